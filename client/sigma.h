/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * libsigma: the worker side of Sigma. A training process (one per GPU rank)
 * opens a session for its job, registers its tensors, and calls push_pull on
 * each gradient: the library cuts the tensor into partitions (at most 4 MB by
 * default), places each partition on a summation node, sends it in chunks
 * (docs/protocol.md), and writes the sum of the N workers' tensors into the
 * output buffer.
 *
 * **Reliability.** Each node has a credit window of outstanding chunks. A
 * chunk without a RESULT is resent after a retransmit timeout that doubles at
 * every timeout (up to rto_max); a new chunk's first timeout follows the
 * measured round trip of its node's chunks (at least rto_us). Without evidence
 * of a loss (a later chunk's RESULT, or a NACK), a timeout resends only one of
 * the node's chunks (a probe: a rank behind the others delays every RESULT, and
 * resending the window would not help). A NACK, and a loss found so, halve the
 * node's window (it grows back by one per RESULT); a NACKed chunk is resent after
 * a back-off. When every chunk
 * outstanding to a node was NACKed, one new chunk at a time goes out anyway,
 * so back-pressure cannot leave a rank unable to send the chunks the node's
 * slots wait for (docs/client.md; this needs the same conf.window on every
 * worker of a job). Two bounds end a chunk's wait (docs/client.md, "Two
 * bounds"): after max_retries resends in a row that the node did not answer at
 * all, the node counts as dead (silent); a node that answers (ERROR WAITING or
 * WORKER_LOST: it holds the push and waits for other ranks; a NACK), or that
 * answers anything of the session during the chunk's timeout, starts that
 * count again, and the chunk may then wait up to ranks_wait_us from its first
 * send. Either way the operation fails with -ETIMEDOUT,
 * sigma_last_error() names the node, the key, the chunk and the round (and the
 * missing ranks when the node reported them), and sigma_last_failure() says
 * which bound ran out: a call never waits forever.
 *
 * **Priority.** Several tensors may be in flight at once. Chunks are sent in
 * priority order (lower value first: give earlier layers lower values, as
 * ByteScheduler does); within a tensor, in partition order.
 *
 * **Thread safety.** A session and its tensors belong to one thread at a time:
 * calls on the same session must not run concurrently (guard them with your
 * own lock if you must share one). Progress is made only inside
 * sigma_poll(), sigma_wait() and sigma_push_pull_sync(); callbacks run inside
 * those calls, on the calling thread, and may start new push_pulls but must
 * not close the session. Separate sessions are fully independent (open one
 * per thread if you want parallel progress).
 *
 * **Memory.** Everything is allocated by sigma_open() and
 * sigma_tensor_register(); push_pull and polling allocate nothing. The input
 * buffer is sent from in place (zero copy): it must stay unchanged, and the
 * output buffer must stay valid, until the operation completes. in == out is
 * allowed.
 *
 * Every function returns 0 (or a count) on success and -errno on failure;
 * constructors return NULL and set errno.
 */
#ifndef SIGMA_H
#define SIGMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_types.h"
#include "sg_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most RX queues of a DPDK session (sigma_conf.dpdk_rx_queues). */
#define SIGMA_DPDK_MAX_RXQ 16
/** Longest error message (sigma_last_error()). */
#define SIGMA_ERR_LEN 512

/** Transports (all behind one internal ops interface). */
enum sigma_transport {
	/**
	 * Kernel UDP: sendmmsg/recvmmsg. Given shm_paths, the
	 * nodes whose shared-memory socket answers are reached through shared
	 * memory as with SIGMA_TRANSPORT_SHM and the others over UDP (a worker
	 * beside its own node, as BytePS with k = 0: docs/client.md, "A
	 * session over both").
	 */
	SIGMA_TRANSPORT_UDP = 0,
	/**
	 * A DPDK ethdev port (e.g. net_memif to a local sigmad). The caller has
	 * run rte_eal_init() and leaves the port stopped: the session owns it
	 * (one session per port), configures one queue pair and its own mbuf
	 * pool, starts it (waiting up to 5 s for the link, as a memif client
	 * must), and resolves each node's MAC address by ARP at open (up to 5 s;
	 * sigmad answers ARP). UDP checksums are sent as 0. Needs local_addr.
	 * Polls: waiting in sigma_poll() spins with yields for 32 empty polls,
	 * then sleeps 20 us between polls (cores shared with a local sigmad).
	 */
	SIGMA_TRANSPORT_DPDK = 1,
	/**
	 * Shared memory to sigma-udpd nodes on this machine (sigma-udpd --shm
	 * PATH; docs/client.md, "Shared memory"). sigma_conf.shm_paths lists
	 * their Unix sockets; each node says in its hello which UDP address and
	 * port it has, so nodes are named, placed and weighed as over UDP, and
	 * one job may have workers on either transport. Every node of the
	 * session must be among them. A datagram moves with one memcpy into a
	 * ring in both directions and no system call while both sides run;
	 * waiting in sigma_poll() polls the rings for spin_us, then sleeps on an
	 * eventfd. A full ring loses the datagram (resent as a lost one); a node
	 * that dies stops answering, and max_retries ends the wait, as over UDP.
	 */
	SIGMA_TRANSPORT_SHM = 2,
};

/** One summation node of the session. */
struct sigma_node {
	const char *name;           /**< stable identity for placement (NULL: use addr:port) */
	const char *addr;           /**< IPv4 address, dotted quad */
	uint16_t port;              /**< UDP port (0: 9300, SG_DP_UDP_PORT) */
	enum sg_node_kind kind;     /**< CPU or GPU machine (BytePS split) */
	double gbps;                /**< NIC bandwidth, weights nodes of one kind (0: 1) */
};

/**
 * A membership source (sigma_conf.membership), such as sg_etcd_watch_alive()
 * of libsigma-control (docs/cluster.md). libsigma calls it from sigma_poll()
 * at its timer scans (every rto_us / 4), never per packet. When the source's
 * membership generation differs from *gen it sets alive[i] for each of the
 * @p n node names (the session's nodes, in conf.nodes order), sets *gen and
 * returns 1; otherwise (nothing new, or nothing known yet) it returns 0 and
 * leaves alive alone. It must be cheap when nothing changed.
 */
typedef int (*sigma_membership_fn)(void *arg, uint64_t *gen, const char *const *names,
				   unsigned int n, bool *alive);

/** sigma_conf.udp_gso */
enum sigma_udp_gso {
	SIGMA_GSO_DEFAULT = 0, /**< on for nodes on 127.0.0.0/8 (this host), off for others */
	SIGMA_GSO_ON = 1,
	SIGMA_GSO_OFF = 2,
};

/** sigma_conf.spin_us polls only while at most this many bytes are outstanding. */
#define SIGMA_SPIN_MAX_BYTES (1024 * 1024)

/** sigma_conf.spin_us's default. */
#define SIGMA_SPIN_US_DEFAULT 200

/** Session configuration. Zero fields take the documented defaults. */
struct sigma_conf {
	uint32_t job;             /**< job id (from the control plane) */
	uint16_t rank;            /**< this worker, 0 <= rank < nworkers */
	uint16_t nworkers;        /**< N, 1..SG_MAX_WORKERS */
	uint64_t token;           /**< the job's session token */
	const struct sigma_node *nodes; /**< summation nodes (copied) */
	unsigned int nnodes;      /**< 1..SG_MAX_NODES */
	/**
	 * Placement weights, one per node, summing to about 1 (copied). NULL: the
	 * BytePS split from sg_ctl_place_weights() over the nodes' kinds and
	 * bandwidths. The control plane hands these out when it exists.
	 */
	const double *weights;
	uint32_t partition_bytes; /**< largest partition (default SG_PARTITION_BYTES_DEFAULT) */
	uint32_t chunk_bytes;     /**< payload per packet, multiple of 8, <= 8920 (default 1424) */
	/**
	 * Outstanding chunks per node; the same on every worker of a job. Default
	 * (0): about 1 MB per node, less for large N (min(1 MB, 4 MB / nworkers)
	 * / chunk_bytes, within 16..256 chunks), so that every worker's window
	 * fits a node's socket buffer at once; sigma_window_default(). This is
	 * the window of the node of the largest placement weight; the others get
	 * it in proportion to their weight (at least 1).
	 */
	uint32_t window;
	uint32_t rto_us;          /**< first retransmit timeout, and the floor of the
				       adaptive one (default 5000 us) */
	uint32_t rto_max_us;      /**< back-off ceiling (default 200000 us) */
	uint32_t max_retries;     /**< timeouts of one chunk before failing (default 10) */
	uint32_t first_round;     /**< round number of every tensor's first push_pull (default 0) */
	enum sigma_transport transport; /**< default SIGMA_TRANSPORT_UDP */
	const char *local_addr;   /**< UDP: address to bind (default any); DPDK: our IPv4 (required) */
	uint16_t local_port;      /**< UDP: port to bind (default ephemeral); DPDK: default 9400 + rank */
	uint16_t dpdk_port;       /**< DPDK: ethdev port id */
	/**
	 * DPDK: RX queues to configure and poll (default 1, at most
	 * SIGMA_DPDK_MAX_RXQ). A memif peer answers on each of its TX queues, and
	 * a memif server links only the queues its client has: against sigmad,
	 * give the number of lcores in sigmad's layout (each sends on its own).
	 */
	uint16_t dpdk_rx_queues;
	/**
	 * Reducer steering (docs/client.md): the number R of reducers of each node
	 * (0, the default: off). Each push goes to UDP port node.port + 1 + r, r =
	 * sg_dp_steer_reducer(job, key, R), the reducer that owns the key under the
	 * node's default keymap, so that a NIC flow rule on the node can hand it
	 * straight to that reducer's RX queue. sigmad accepts node.port + 1 ..
	 * node.port + SG_DP_STEER_PORTS (64) whatever its reducer count, so a
	 * wrong R costs at most a ring hand-off inside the node, never a push or
	 * a sum. At most 64. Replies still come from node.port. Both transports.
	 */
	uint16_t steer_reducers;
	/**
	 * UDP transport: send consecutive pushes of one length to one node port
	 * in one UDP_SEGMENT (GSO) message, up to 64 datagrams or 64 KB
	 * (SIGMA_GSO_ON), or one datagram per message (SIGMA_GSO_OFF).
	 * SIGMA_GSO_DEFAULT: on for nodes on 127.0.0.0/8, off for the others
	 * (a GSO packet can reach a packet socket whole: over a veth, sigmad on
	 * net_af_packet would see one 64 KB frame). The kernel cuts them into the
	 * same datagrams, and its per-datagram work is done once per message; a
	 * receiver with UDP_GRO (sigma-udpd, sigmad's socket transport) gets them
	 * in one message. Where the kernel refuses GSO (a route's MTU below the
	 * datagrams, a kernel before 4.18), the session goes back to one per
	 * message by itself. (It was a bool, default off: true is SIGMA_GSO_ON.)
	 */
	uint8_t udp_gso;
	/**
	 * Failover (docs/client.md, "When a node is lost"): keep a copy of each
	 * tensor's input of its current and last rounds, so that the partitions of
	 * a lost node (sigma_node_lost(), or a node the membership source no longer
	 * lists) can be pushed again to the node rendezvous hashing picks among the
	 * survivors: its last round (for ranks still waiting for that round's
	 * result) and its current one. Costs one copy of the tensor per push_pull
	 * and twice the tensors' memory. The job must be in sync or deterministic
	 * mode (sigma_open_job() refuses async), and either open (its keys made by
	 * their first push) on every node, or recorded in etcd and its nodes
	 * watching it, so that survivors make a fixed job's moved keys
	 * (docs/cluster.md, "Jobs in etcd"). Implied by @c membership.
	 */
	bool failover;
	/**
	 * Where membership comes from (NULL: the node list is fixed). A node that
	 * the source stops listing is lost for the rest of the session; a node it
	 * adds is not used before the next session (docs/client.md). Also, with a
	 * source, a node that stops answering is not given up after max_retries
	 * while the source still lists it: resends go on, at rto_max_us, for up to
	 * failover_wait_us more (the time its lease takes to expire), and the
	 * operation fails with -ETIMEDOUT only then.
	 */
	sigma_membership_fn membership;
	void *membership_arg;	  /**< the source's argument (e.g. the sg_etcd_watch) */
	uint32_t failover_wait_us; /**< see membership (default 10 s: above the lease TTL and a poll) */
	/**
	 * UDP transport: when sigma_poll() would sleep for a reply while at most
	 * SIGMA_SPIN_MAX_BYTES of the session's chunks are outstanding (a small
	 * operation, or the last megabyte of a large one), poll the socket first,
	 * yielding the CPU between polls, until this long after the last packet
	 * sent or received, then sleep (a wait that goes on sleeps). A sleeping
	 * thread takes a wake-up per reply (tens of microseconds on a VM, more
	 * than a small push_pull's whole round trip); with more outstanding,
	 * replies come in bulk and polling would take CPU from the node and the
	 * other workers. 0: the default, 200 us; negative: never.
	 */
	int32_t spin_us;
	/**
	 * The "ranks missing" bound (docs/client.md, "Two bounds"): how long a
	 * chunk may stay without its RESULT, from its first send, while its node
	 * answers its resends (ERROR WAITING or WORKER_LOST: the node holds this
	 * rank's push and waits for the ranks it names; or NACKs). Then the
	 * operation fails with -ETIMEDOUT, kind SIGMA_FAIL_RANKS_MISSING. Bounds
	 * how long a dead, stuck or paused rank holds up the others. Default
	 * 60 s (0); at most 4294 s.
	 */
	uint32_t ranks_wait_us;
	/**
	 * The Unix sockets of nodes' shared memory (each one a sigma-udpd --shm
	 * PATH), in any order, read by sigma_open() only. A socket whose node is
	 * not in the session is closed again at once, one that fails is skipped
	 * (logged); two of one node: the first counts. SIGMA_TRANSPORT_SHM: every
	 * node of the session needs one. SIGMA_TRANSPORT_UDP: optional (NULL or
	 * none: UDP alone); a node without one goes over UDP, so a worker may
	 * give only its own node's. Ignored by the DPDK transport.
	 */
	const char *const *shm_paths;
	/** entries of shm_paths: 1..256 with SIGMA_TRANSPORT_SHM, 0..256 with UDP */
	unsigned int n_shm_paths;
	/**
	 * auth = mac (docs/protocol.md, "Authenticated datagrams"): this rank's two
	 * 32-byte keys, what it sends and then what the node sends it (64 bytes,
	 * copied by sigma_open()), or NULL: no auth. Every PUSH is then signed, and
	 * a reply whose MAC does not verify is dropped (counted in rx_bad). The
	 * job's chunk_bytes leaves room for the 32-byte trailer.
	 */
	const uint8_t *auth_keys;
	uint32_t auth_key_id; /**< the job key's id (the trailer's; with auth_keys) */
};

/** Counters of a session (monotonic). */
struct sigma_stats {
	uint64_t tx_packets;   /**< PUSH packets sent, retransmits included */
	uint64_t rx_packets;   /**< packets received (all types) */
	uint64_t rx_results;   /**< RESULTs that completed a chunk */
	uint64_t rx_stale;     /**< RESULTs for a chunk not waiting (duplicates, old rounds) */
	uint64_t rx_bad;       /**< packets dropped: unparsable, wrong job/token/key/size */
	uint64_t retransmits;  /**< chunks resent after a timeout */
	uint64_t nacks;        /**< NACKs received */
	uint64_t errors;       /**< ERROR packets received */
	uint64_t ops_done;     /**< push_pulls completed successfully */
	uint64_t ops_failed;   /**< push_pulls failed */
	uint64_t nodes_lost;   /**< nodes given up (sigma_node_lost() or the membership source) */
	uint64_t keys_moved;   /**< partitions moved off lost nodes */
	uint64_t recovery_pushes; /**< pushes of a moved partition's last round (failover) */
	uint64_t membership_changes; /**< changes the membership source reported */
	/**
	 * Timeouts that resent nothing: no evidence of a loss (no later chunk of
	 * the node had its RESULT), and another of its chunks went as the probe
	 * (a rank behind, not a lost packet; docs/client.md, "Retransmission").
	 */
	uint64_t timeouts_held;
	uint64_t spins;        /**< waits for a reply that polled first (conf.spin_us) */
	uint64_t waits;        /**< ERROR WAITING received (also in errors): a node that holds
				    our push and waits for other ranks answered a resend */
	/**
	 * PUSH packets the transport could not take (not in tx_packets): a full
	 * shared-memory ring, a full or refused socket. Each is lost, and the
	 * window's timers resend it as they do a packet lost on the way.
	 */
	uint64_t tx_dropped;
	/**
	 * Datagrams the kernel dropped at the session's UDP socket before it read
	 * them, its receive buffer full (SO_RXQ_OVFL; 0 on other transports, and
	 * on a kernel that does not report it): replies lost here, which the
	 * window's timers make up for as for any loss. The kernel counts a drop
	 * with the next datagram it queues, so a count shows once one came after.
	 */
	uint64_t rx_dropped;
};

/** Which bound or refusal ended an operation (struct sigma_failure). */
enum sigma_fail_kind {
	SIGMA_FAIL_NONE = 0,	  /**< no failure yet */
	/**
	 * -ETIMEDOUT: the node answered nothing for max_retries resends in a row
	 * (it is dead, or unreachable from here, or has no such job)
	 */
	SIGMA_FAIL_NODE_SILENT = 1,
	/**
	 * -ETIMEDOUT: the node answered (it is alive) but the chunk had no
	 * RESULT within ranks_wait_us of its first send: the ranks in @c missing
	 * did not push (dead, stuck or far behind), or the node kept NACKing
	 * (no slot or buffer free; @c missing 0)
	 */
	SIGMA_FAIL_RANKS_MISSING = 2,
	/** -EPROTO, -ESTALE, -EPIPE, -ENOSPC: the node refused the push (an ERROR) */
	SIGMA_FAIL_REFUSED = 3,
	/** -EHOSTDOWN: every node of the session was lost */
	SIGMA_FAIL_NO_NODE = 4,
};

/** The last failure of a session, in parts (sigma_last_error() has its message). */
struct sigma_failure {
	int status;		   /**< the operation's status, -errno */
	enum sigma_fail_kind kind;
	int node;		   /**< index into conf.nodes, or -1 (SIGMA_FAIL_NO_NODE) */
	uint32_t key;		   /**< the wire key of the chunk that failed */
	uint32_t chunk;		   /**< its chunk index */
	uint32_t round;		   /**< its round */
	uint64_t missing;	   /**< ranks the node reported missing (bit i: rank i), 0: none */
	uint64_t waited_us;	   /**< from the chunk's first send to the failure */
};

struct sigma_session;
struct sigma_tensor;

/** Completion callback: @p status is 0 or -errno (see sigma_last_error()). */
typedef void (*sigma_done_cb)(void *arg, struct sigma_tensor *t, int status);

/**
 * Open a session: validates @p conf, computes placement weights, and opens the
 * transport (UDP: binds a socket; DPDK: starts the port, waits for its link and
 * resolves the nodes' MACs by ARP). No push is sent.
 * @return the session, or NULL with errno EINVAL (bad conf; the reason is
 *         printed to stderr), ENOMEM, the socket error, or for DPDK ENOLINK
 *         (the port's link was not up within 10 s: docs/client.md) or
 *         EHOSTUNREACH (no ARP reply within 5 s). Shared memory: a socket
 *         that fails is skipped (logged), and the session fails only if a
 *         node is left without one, with the last socket's error: connect()'s
 *         (ENOENT, ECONNREFUSED: no node there; EACCES), ENAMETOOLONG (a path
 *         longer than a Unix socket takes), ECONNRESET (the node refused the
 *         channel: it has its --shm-max channels already), ETIMEDOUT (no
 *         hello within 10 s), EPROTO (not a Sigma node's hello, another
 *         layout version, or a memfd not of the rings' size or not sealed
 *         against shrinking); or ENOENT when every socket answered but none was
 *         that node's. Kernel UDP given shm_paths: the same sockets are
 *         tried, but none of their failures fails the session (the nodes they
 *         were for go over UDP); EINVAL for an empty path or more than 256.
 */
struct sigma_session *sigma_open(const struct sigma_conf *conf);

/**
 * The window a session of @p nworkers workers and @p chunk_bytes chunks takes
 * when sigma_conf.window is 0: min(1 MB, 4 MB / nworkers) / chunk_bytes, within
 * 16..256. Every worker of a job computes the same (docs/client.md, "Credit
 * window"). @return the window in chunks (16 when an argument is 0).
 */
uint32_t sigma_window_default(unsigned int nworkers, uint32_t chunk_bytes);

/** Close a session: abandons operations in flight (no callbacks), frees its tensors. */
void sigma_close(struct sigma_session *s);

/**
 * Register a tensor. Every worker of the job must register the same tensors
 * (same id, dtype, element count); @p id is the tensor's identity on the wire.
 * @param name     for messages (may be NULL)
 * @param id       0..SG_MAX_TENSORS-1, unique in the session
 * @param dtype    element type
 * @param nelem    elements (> 0)
 * @param priority lower is sent first (earlier layers: lower values)
 * @return the tensor, or NULL with errno EINVAL (bad argument), EEXIST (id in
 *         use), E2BIG (more than SG_MAX_PARTS partitions) or ENOMEM.
 */
struct sigma_tensor *sigma_tensor_register(struct sigma_session *s, const char *name,
					   uint32_t id, enum sg_dtype dtype, uint64_t nelem,
					   int priority);

/**
 * Start summing @p in over the N workers into @p out (each nelem elements of
 * the tensor's dtype). Non-blocking: progress happens in sigma_poll() and
 * sigma_wait(). @p cb (may be NULL) runs once when it completes or fails.
 * With failover the input is copied at once, so @p in may change after the
 * call (out must stay valid).
 * @return 0; -EBUSY if this tensor already has an operation in flight;
 *         -EINVAL on NULL buffers; -EHOSTDOWN when every node of the session
 *         was lost (sigma_last_error() names them).
 */
int sigma_push_pull(struct sigma_tensor *t, const void *in, void *out, sigma_done_cb cb,
		    void *arg);

/**
 * Make progress: send what the windows allow, receive, retransmit, complete.
 * Waits at most @p timeout_us for a packet when nothing is ready (0: do not
 * wait).
 * @return the number of operations completed or failed by this call (>= 0),
 *         or -errno on a transport failure.
 */
int sigma_poll(struct sigma_session *s, int timeout_us);

/**
 * State of the tensor's last operation.
 * @return 0 (complete, or none started), -EINPROGRESS, or the failure (-errno):
 *         -ETIMEDOUT (no answer from the node for max_retries resends, or no
 *         RESULT within ranks_wait_us while it waits for other ranks:
 *         sigma_last_failure() says which), -EPROTO (ERROR
 *         MISMATCH: the node's job has another geometry or dtype), -ESTALE or
 *         -EPIPE (ERROR STALE or GONE: this session's rounds are behind the
 *         node's), -ENOSPC (ERROR FULL: an open job has no chunk slot left on
 *         the node for a new key); sigma_last_error() says which and what to do.
 */
int sigma_test(const struct sigma_tensor *t);

/** Poll until the tensor's operation completes or fails. @return as sigma_test(). */
int sigma_wait(struct sigma_tensor *t);

/** push_pull then wait: the blocking form. */
int sigma_push_pull_sync(struct sigma_tensor *t, const void *in, void *out);

/** The last failure's message (names node, key, chunk and round); "" if none. */
const char *sigma_last_error(const struct sigma_session *s);

/**
 * The release of the libsigma that runs ("0.1.0"), which may differ from the
 * SG_VERSION_STRING a program was compiled with (sg_version.h). It speaks wire
 * protocol SG_PROTO_VERSION of the sg_version.h installed with it: a node of
 * another protocol version fails its pushes with -EPROTONOSUPPORT and a message
 * naming both versions. Never fails.
 */
const char *sigma_version(void);

/**
 * The last failure in parts: which bound ran out, the node, key, chunk, round
 * and missing ranks. Valid inside the failed operation's callback too.
 * @return 0, -ENOENT when no operation of the session failed yet (@p f then
 *         has kind SIGMA_FAIL_NONE), or -EINVAL for NULL arguments.
 */
int sigma_last_failure(const struct sigma_session *s, struct sigma_failure *f);

/** Copy the session's counters; a NULL @p s gives all zeros, a NULL @p st does nothing. */
void sigma_get_stats(const struct sigma_session *s, struct sigma_stats *st);

/**
 * Set the round of @p t's next push_pull (its rounds then go on from there, +1
 * per operation). An elastic job (client/sigma_elastic.h) starts each tensor in
 * a new session at the round its switch was agreed for. The pushes of that
 * round carry REOPEN (docs/protocol.md): a node's slot of the key two or more
 * rounds behind is released, not left to refuse them.
 * @return 0, -EBUSY while an operation of @p t is in flight, -EINVAL for NULL.
 */
int sigma_tensor_set_round(struct sigma_tensor *t, uint32_t round);

/** The round of @p t's current (or next) operation (0 for NULL). */
uint32_t sigma_tensor_round(const struct sigma_tensor *t);

/** Number of partitions of @p t. */
uint32_t sigma_tensor_nparts(const struct sigma_tensor *t);

/**
 * Latency of partition @p part in the last completed operation: from its first
 * chunk sent to its last RESULT, in ns (0 if unknown).
 */
uint64_t sigma_tensor_part_latency(const struct sigma_tensor *t, uint32_t part);

/** Index (into conf.nodes) of the node that sums partition @p part of @p t. */
int sigma_tensor_part_node(const struct sigma_tensor *t, uint32_t part);

/**
 * How @p s reaches node @p node (an index into conf.nodes): a value of enum
 * sigma_transport. Only a kernel-UDP session given shm_paths mixes them: its
 * nodes whose socket answered at sigma_open() are SIGMA_TRANSPORT_SHM, the
 * others SIGMA_TRANSPORT_UDP.
 * @return the transport, or -EINVAL (@p s NULL, or @p node not below conf.nnodes).
 */
int sigma_node_transport(const struct sigma_session *s, unsigned int node);

/**
 * Give up node @p node (an index into conf.nodes) for the rest of the session:
 * its partitions move to the node rendezvous hashing picks among the others
 * (no other partition moves: its weight becomes 0, the others' stay), their
 * last round is pushed again there for ranks that still wait for it, and the
 * operations in flight push their interrupted partitions again there. Every
 * worker of the job must lose the same node (the membership source makes
 * them agree: docs/client.md). A log line names the node and the keys moved.
 * When no node is left, every operation in flight fails with -EHOSTDOWN.
 * Call it from the session's thread, not from a callback.
 * @return the number of partitions moved (>= 0; 0 if already lost),
 *         -EOPNOTSUPP without failover, -EINVAL for a bad index,
 *         -EHOSTDOWN when it was the last node.
 */
int sigma_node_lost(struct sigma_session *s, unsigned int node, const char *why);

/* ------------------------------------------------------------------------ */
/* Jobs made by the job service: the job descriptor (docs/client.md)        */
/* ------------------------------------------------------------------------ */

/** Longest job descriptor, with its NUL. */
#define SIGMA_JOB_DESC_MAX 16384

/**
 * A job as its descriptor gives it. @c conf is ready for sigma_open() except
 * for the rank (0 here) and the transport settings (defaults): set those, then
 * open. Its nodes and weights point into this structure, so use it in place
 * (a copy would point into the original).
 */
struct sigma_job {
	struct sigma_conf conf;	/**< job, nworkers, token, nodes, weights, partition and chunk size */
	/**
	 * the job's element type: every tensor's; SG_DTYPE_ANY for an open job of
	 * dtype any, whose tensors may each have their own
	 */
	enum sg_dtype dtype;
	enum sg_mode mode;	/**< how the nodes sum (they apply it; for the caller's information) */
	struct sigma_node nodes[SG_MAX_NODES];
	double weights[SG_MAX_NODES];
	char names[SG_MAX_NODES][SG_NAME_MAX];
	char addrs[SG_MAX_NODES][16];
	/**
	 * auth = mac (docs/security.md): the job has authenticated datagrams
	 * (conf.auth_key_id is its key id). A rank's own descriptor also gives
	 * @c rank and its two keys (conf.auth_keys points at @c auth_keys, and
	 * conf.rank is that rank); the job's descriptor gives none (has_keys false)
	 * and opens no session.
	 */
	bool auth;
	bool has_keys;
	uint16_t rank;
	uint8_t auth_keys[64];
};

/**
 * Read a job descriptor (the one line that `sigmactl --node ... job create` and
 * the job service print) into @p job. The parser is strict: a field missing,
 * repeated, unknown or out of range refuses the whole descriptor. It needs no
 * control-plane library (no JSON, no crypto).
 * @param err    receives the reason on failure ("job descriptor: ..."); may be NULL
 * @return 0, -EINVAL (the reason in @p err), or -E2BIG (longer than
 *         SIGMA_JOB_DESC_MAX).
 */
int sigma_job_parse(const char *descriptor, struct sigma_job *job, char *err, size_t errlen);

/**
 * Open rank @p rank's session of the job that @p descriptor describes:
 * sigma_job_parse(), then sigma_open() with the job's id, N, token, nodes,
 * weights, partition and chunk size, and @p base's other settings (window,
 * timeouts, first_round, transport, addresses; @p base may be NULL for the
 * defaults). Tensors registered in it must have the job's dtype (EINVAL
 * otherwise, with the reason on stderr), unless the job's is any (an open job
 * whose keys take the dtype of their first push).
 * A job with auth = mac opens only from a rank's own descriptor, and only as
 * that rank (its keys are in it; @p rank must be the descriptor's).
 * @return the session, or NULL with errno EINVAL (a bad descriptor or rank,
 *         the reason in @p err), EACCES (auth = mac and the descriptor is
 *         the job's, without a rank's keys, or another rank's: the reason in
 *         @p err), E2BIG, EOPNOTSUPP (failover or a membership
 *         source asked for a job in async mode: docs/cluster.md; the reason in
 *         @p err), or sigma_open()'s errno.
 */
struct sigma_session *sigma_open_job(const char *descriptor, uint16_t rank,
				     const struct sigma_conf *base, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_H */
