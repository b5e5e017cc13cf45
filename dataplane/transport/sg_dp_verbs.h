/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Verbs (rdma-core) transport for the aggregation engine: the same engine as
 * sigmad's DPDK pipeline, fed by the completion queue of an RDMA device
 * instead of an ethdev. Built only when SG_HAVE_VERBS is 1 (-Dverbs).
 *
 * Modes:
 * - UD (primary): one unreliable-datagram QP. Each datagram is one Sigma
 *   protocol message (docs/protocol.md) without the IPv4/UDP headers; the
 *   first 40 bytes of every receive buffer hold the GRH (or, on RoCE v2 over
 *   IPv4, the IPv4 header in its last 20 bytes). Replies go to an address
 *   handle cached per sender (GID, LID, QPN).
 * - RC with RDMA WRITE-with-immediate (second): each worker has one RC QP
 *   to the node and a range of slots in the node's registered region. It
 *   writes a message into one of its slots and sends the slot number as the
 *   immediate; the receive completion (from a shared receive queue) says
 *   which slot to read. Replies are written the same way into the worker's
 *   own slot ring. The QP attributes are exchanged out of band
 *   (sg_dp_verbs_rc_connect(); the control plane carries them).
 *
 * Usage (one transport per reducer thread, like an engine):
 *   t = sg_dp_verbs_create(&vc);            // device, PD, MR, CQs, QP, receives
 *   ec.tx = sg_dp_verbs_tx_ops(t);           // engine replies go out through t
 *   ec.max_payload = sg_dp_verbs_max_payload(t);
 *   eng = sg_dp_engine_create(&ec);
 *   for (;;) { sg_dp_verbs_poll(t, eng, now); sg_dp_engine_poll(eng, now); }
 *
 * Every ibv_* call goes through struct sg_dp_verbs_ops, so tests substitute
 * fake verbs where there is no device. Functions return 0 or -errno;
 * constructors return NULL and set errno; `err`/`errlen` get a one-line
 * reason naming the cause and the fix.
 *
 * Threading: a transport belongs to one thread. poll() and the tx ops take no
 * lock and allocate nothing.
 */
#ifndef SG_DP_VERBS_H
#define SG_DP_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "sg_dp_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes in front of every UD receive: the GRH area (filled when IBV_WC_GRH). */
#define SG_DP_VERBS_GRH_LEN 40
/** Default Q_Key of Sigma's UD QPs ("SG" plus version). */
#define SG_DP_VERBS_QKEY_DEFAULT 0x53470001u
/** Most peers (address handles or RC connections) one transport caches. */
#define SG_DP_VERBS_MAX_PEERS 65536

/** Transport mode (`[verbs] mode`). */
enum sg_dp_verbs_mode {
	SG_DP_VERBS_UD = 0, /**< unreliable datagram, one message per datagram (default) */
	SG_DP_VERBS_RC = 1, /**< reliable connection, RDMA WRITE-with-immediate into slots */
};

/**
 * The verbs calls the transport makes. sg_dp_verbs_ops_rdma_core() is the real
 * table; tests pass fakes. Each member has the signature of the ibv_* function
 * of the same name (the inline ones included), plus the memlock probe.
 */
struct sg_dp_verbs_ops {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *entry, uint32_t flags);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	/**
	 * Memlock facts: RLIMIT_MEMLOCK's soft limit (RLIM_INFINITY as UINT64_MAX),
	 * bytes locked already (VmLck) and whether CAP_IPC_LOCK is effective.
	 * @return 0 or -errno.
	 */
	int (*memlock_probe)(uint64_t *limit, uint64_t *locked, bool *cap_ipc_lock);
};

/** The table of real rdma-core calls. */
const struct sg_dp_verbs_ops *sg_dp_verbs_ops_rdma_core(void);

/** Transport configuration (`[verbs]` section). Zero fields take the defaults. */
struct sg_dp_verbs_conf {
	char device[64];       /**< device name ("mlx5_0"); "" = the first device */
	uint8_t port;          /**< port number (default 1) */
	int gid_index;         /**< GID index; -1 = choose (sg_dp_verbs_gid_select) (default -1) */
	enum sg_dp_verbs_mode mode; /**< UD (default) or RC */
	uint32_t qkey;         /**< UD Q_Key (default SG_DP_VERBS_QKEY_DEFAULT) */
	uint32_t recv_depth;   /**< receive buffers posted (default 1024) */
	uint32_t send_depth;   /**< send buffers / send queue depth (default 1024) */
	uint32_t max_peers;    /**< address handles cached (default 4096, max SG_DP_VERBS_MAX_PEERS) */
	uint32_t mtu;          /**< largest message in bytes, header included; 0 = the port's
				    active MTU (UD) or 9000 (RC) */
	uint32_t poll_batch;   /**< completions per poll (default 32, max 256) */
	uint32_t rc_slots;     /**< RC: region slots per connection (default 64; the
				    region has recv_depth slots in all) */
	int numa_node;         /**< buffers' NUMA node; -1 = the calling thread's (default) */
	const struct sg_dp_verbs_ops *ops; /**< NULL = sg_dp_verbs_ops_rdma_core() */
};

/** Fill @p c with the defaults (gid_index and numa_node -1, mode UD). */
void sg_dp_verbs_conf_defaults(struct sg_dp_verbs_conf *c);

/**
 * Set one `[verbs]` key from its text value: device, port, gid_index ("auto"
 * or a number), mode ("ud"/"rc"), qkey, recv_depth, send_depth, max_peers,
 * mtu, poll_batch, rc_slots, numa_node. @return 0, or -EINVAL with @p err naming the key,
 * the value and the expected form (unknown keys included).
 */
int sg_dp_verbs_conf_set(struct sg_dp_verbs_conf *c, const char *key, const char *value,
			 char *err, size_t errlen);

/**
 * Apply every entry of @p section of an rte_cfgfile (struct rte_cfgfile *,
 * passed as void * so that this header needs no rte_cfgfile.h). A missing
 * section changes nothing. @return 0 or -EINVAL (first bad key in @p err).
 */
int sg_dp_verbs_conf_load(struct sg_dp_verbs_conf *c, void *cfgfile, const char *section,
			  char *err, size_t errlen);

/** Check a whole configuration. @return 0 or -EINVAL with the reason. */
int sg_dp_verbs_conf_check(const struct sg_dp_verbs_conf *c, char *err, size_t errlen);

/** Name of a mode ("ud", "rc"). */
const char *sg_dp_verbs_mode_name(enum sg_dp_verbs_mode m);

/**
 * Decide whether @p need more bytes can be registered (pinned). Fine when
 * @p cap_ipc_lock, when @p limit is UINT64_MAX (unlimited), or when
 * @p locked + @p need <= @p limit. Otherwise -ENOMEM, and @p err says how much
 * is needed, what the limit is, and how to raise it (ulimit -l, limits.conf,
 * systemd LimitMEMLOCK, docker --ulimit memlock).
 */
int sg_dp_verbs_memlock_check(uint64_t need, uint64_t limit, uint64_t locked, bool cap_ipc_lock,
			      char *err, size_t errlen);

/** The memlock probe of the real ops: getrlimit() and /proc/self/status. */
int sg_dp_verbs_memlock_probe(uint64_t *limit, uint64_t *locked, bool *cap_ipc_lock);

/**
 * Choose a GID index among @p n entries of a port's GID table. Ethernet
 * (RoCE) ports: the first RoCE v2 entry with an IPv4-mapped GID, else the
 * first RoCE v2 entry, else the first non-zero one. InfiniBand ports: the
 * first non-zero entry. @return the index (entries[i].gid_index), or -ENOENT.
 */
int sg_dp_verbs_gid_select(const struct ibv_gid_entry *entries, unsigned int n,
			   bool ethernet);

/** Bytes of an IB MTU enum (IBV_MTU_256..IBV_MTU_4096); 0 if invalid. */
uint32_t sg_dp_verbs_mtu_bytes(enum ibv_mtu mtu);

/*
 * Work requests and completions (pure helpers, exposed for tests).
 */

/** What a wr_id refers to. */
enum sg_dp_verbs_wr_kind {
	SG_DP_VERBS_WR_RECV = 1, /**< receive buffer i */
	SG_DP_VERBS_WR_SEND = 2, /**< send buffer i */
};

/** Encode a wr_id: kind in bits 32..39, buffer index in bits 0..31. */
static inline uint64_t sg_dp_verbs_wr_id(enum sg_dp_verbs_wr_kind kind, uint32_t idx)
{
	return ((uint64_t)kind << 32) | idx;
}

/** Decode a wr_id. @return 0, or -EINVAL if its kind is unknown. */
int sg_dp_verbs_wr_id_decode(uint64_t wr_id, enum sg_dp_verbs_wr_kind *kind, uint32_t *idx);

/** Fill a receive WR (and its one SGE) for buffer @p idx at @p addr, @p len bytes. */
void sg_dp_verbs_build_recv(struct ibv_recv_wr *wr, struct ibv_sge *sge, uint32_t idx,
			    void *addr, uint32_t len, uint32_t lkey);

/** Fill a signalled UD SEND of send buffer @p idx to (@p ah, @p qpn, @p qkey). */
void sg_dp_verbs_build_ud_send(struct ibv_send_wr *wr, struct ibv_sge *sge, uint32_t idx,
			       void *addr, uint32_t len, uint32_t lkey, struct ibv_ah *ah,
			       uint32_t qpn, uint32_t qkey);

/**
 * Fill a signalled RDMA WRITE-with-immediate of send buffer @p idx into slot
 * @p slot of a remote region (@p raddr + slot * @p stride, @p rkey); the
 * immediate carries the slot (big-endian, as verbs wants imm_data).
 */
void sg_dp_verbs_build_rc_write_imm(struct ibv_send_wr *wr, struct ibv_sge *sge, uint32_t idx,
				    void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
				    uint32_t rkey, uint32_t slot, uint32_t stride);

/** Where a UD sender can be answered: the address-handle cache's key. */
struct sg_dp_verbs_peer_key {
	uint8_t gid[16]; /**< source GID from the GRH; zero without GRH */
	uint32_t qpn;    /**< source QP number */
	uint16_t lid;    /**< source LID (0 on RoCE) */
	uint16_t pad;    /**< zero */
};

/**
 * From a UD receive completion and its 40-byte GRH area: the peer's key and
 * the address-handle attributes that reach it through @p port / @p gid_index.
 * On RoCE v2 over IPv4 (@p ipv4_mapped, our GID is ::ffff:a.b.c.d) the area
 * holds the IPv4 header in its last 20 bytes, and the source GID is the
 * mapped source address. @return 0, or -EBADMSG if the GRH is required
 * (@p need_grh) but absent or malformed.
 */
int sg_dp_verbs_peer_from_wc(const struct ibv_wc *wc, const void *grh, uint8_t port,
			     uint8_t gid_index, bool need_grh, bool ipv4_mapped,
			     struct sg_dp_verbs_peer_key *key, struct ibv_ah_attr *ah);

/*
 * The transport.
 */

/** Transport counters (monotonic unless said otherwise). */
struct sg_dp_verbs_stats {
	uint64_t rx_completions; /**< receive completions polled */
	uint64_t rx_packets;     /**< messages given to the engine */
	uint64_t rx_bytes;       /**< their bytes */
	uint64_t rx_engine_drop; /**< ... that the engine dropped (its reasons in its stats) */
	uint64_t rx_short;       /**< UD receive shorter than the GRH area */
	uint64_t rx_bad_slot;    /**< RC: not a WRITE-with-immediate, or a slot outside the
				      sender's range, or longer than a slot */
	uint64_t rx_bad_grh;     /**< GRH required but missing or malformed */
	uint64_t rx_wc_error;    /**< receive completions with an error status */
	uint64_t rx_no_peer;     /**< no address handle (cache full, ibv_create_ah failed) or
				      an RC completion from an unknown QP */
	uint64_t rx_repost_fail; /**< ibv_post_recv failures (buffers lost until restart) */
	uint64_t rx_poll_fail;   /**< ibv_poll_cq failures on the receive CQ */
	uint64_t tx_packets;     /**< sends posted */
	uint64_t tx_bytes;
	uint64_t tx_no_buf;      /**< engine output dropped: every send buffer in flight */
	uint64_t tx_no_peer;     /**< engine output to an unknown peer */
	uint64_t tx_post_fail;   /**< ibv_post_send failures */
	uint64_t tx_wc_error;    /**< send completions with an error status */
	uint64_t rc_closed;      /**< RC: connections closed (sg_dp_verbs_rc_disconnect(), or
				      a QP in error) */
	uint64_t rc_qp_error;    /**< RC: ... of them closed because a completion found their
				      QP in error */
	uint64_t peers;          /**< gauge: cached peers (RC: open connections) */
	uint64_t recv_posted;    /**< gauge: receive buffers on the QP */
	uint64_t send_free;      /**< gauge: send buffers free */
};

struct sg_dp_verbs;

/**
 * Open the device, pick port and GID, check memlock, allocate and register
 * the buffers, create the CQs and, for UD, the QP (brought to RTS); post
 * every receive buffer (RC: zero-length receives on a shared receive queue;
 * connections come later with sg_dp_verbs_rc_connect()).
 * @return the transport, or NULL with errno (ENODEV: no such device or port
 *         down; ENOMEM: memlock or allocation; EINVAL: bad conf; else the
 *         failing call's errno) and @p err saying which step failed and why.
 */
struct sg_dp_verbs *sg_dp_verbs_create(const struct sg_dp_verbs_conf *conf, char *err,
				       size_t errlen);

/** Destroy QP, CQs, address handles, MR, PD, buffers; close the device. NULL is fine. */
void sg_dp_verbs_destroy(struct sg_dp_verbs *t);

/** The engine's tx ops that send through @p t (engine `dest` = the peer id of rx). */
struct sg_dp_tx_ops sg_dp_verbs_tx_ops(struct sg_dp_verbs *t);

/** Largest payload after the Sigma header that one message can carry (engine max_payload). */
uint32_t sg_dp_verbs_max_payload(const struct sg_dp_verbs *t);

/**
 * Poll the completion queues once: hand every received message to
 * sg_dp_engine_rx(@p eng, ..., peer id, @p now), post what the engine sent
 * (one doorbell per batch), reclaim finished sends and re-post the receive
 * buffers. @return completions handled (>= 0), or -errno if polling failed.
 */
int sg_dp_verbs_poll(struct sg_dp_verbs *t, struct sg_dp_engine *eng, uint64_t now);

/**
 * Where sg_dp_verbs_poll_fn() hands each received message: @p msg (@p len
 * bytes, valid only during the call) from peer id @p peer of the transport.
 * @return < 0 to count the message in rx_engine_drop, else >= 0.
 */
typedef int (*sg_dp_verbs_rx_fn)(void *arg, const uint8_t *msg, uint32_t len, uint32_t peer);

/**
 * sg_dp_verbs_poll() with a caller's sink instead of an engine (sigmad's
 * pipeline: the message may belong to another lcore's reducer). The sends
 * @p fn makes through sg_dp_verbs_tx_ops() are posted before it returns.
 * @return completions handled (>= 0), or -errno if polling failed.
 */
int sg_dp_verbs_poll_fn(struct sg_dp_verbs *t, sg_dp_verbs_rx_fn fn, void *arg);

/**
 * Post the sends chained since the last poll (one doorbell) and take back
 * finished send buffers, without polling receives: for a thread that only
 * sends through @p t. @return sends posted plus send completions reaped.
 */
int sg_dp_verbs_flush(struct sg_dp_verbs *t);

/**
 * A UD peer's address, for another transport of the same device to answer it
 * (sg_dp_verbs_peer_resolve()). @return 0, or -ENOENT (no such UD peer).
 */
int sg_dp_verbs_peer_addr(const struct sg_dp_verbs *t, uint32_t peer,
			  struct sg_dp_verbs_peer_key *key, struct ibv_ah_attr *attr);

/**
 * The peer id of the UD sender @p key in @p t: cached, or a new address
 * handle made from @p attr (on @p t's own protection domain). Counts
 * rx_no_peer when it cannot. @return the peer id (>= 0), or -1.
 */
int64_t sg_dp_verbs_peer_resolve(struct sg_dp_verbs *t, const struct sg_dp_verbs_peer_key *key,
				 const struct ibv_ah_attr *attr);

/** Our QP number (what workers address). */
uint32_t sg_dp_verbs_qpn(const struct sg_dp_verbs *t);

/** Our GID (port's GID at the chosen index) and LID. */
void sg_dp_verbs_local_addr(const struct sg_dp_verbs *t, union ibv_gid *gid, uint16_t *lid,
			    int *gid_index);

/** Copy the counters into @p st. */
void sg_dp_verbs_stats(const struct sg_dp_verbs *t, struct sg_dp_verbs_stats *st);

/*
 * RC connections. The two sides exchange a struct sg_dp_verbs_rc_addr out of
 * band (the control plane carries it with the job). Each side describes its
 * QP and its receive ring: `slots` slots of `stride` bytes from `addr`,
 * writable with `rkey`. A sender writes message k into slot k mod slots of
 * the receiver's ring, and sends the slot number as the immediate. Credit:
 * the node handles a write as soon as it polls its completion, and it answers
 * in order on the same QP. So a worker may reuse a slot once it has received
 * the reply to that message, or a reply to a later one, and a worker that
 * keeps at most `slots` pushes unanswered never overwrites a slot the node
 * has not read.
 */

/** One side of an RC connection. */
struct sg_dp_verbs_rc_addr {
	uint32_t qpn;      /**< QP number */
	uint32_t psn;      /**< first packet sequence number it sends */
	uint16_t lid;      /**< LID (InfiniBand; 0 on RoCE) */
	uint8_t gid[16];   /**< GID (RoCE; may be zero on InfiniBand) */
	uint64_t addr;     /**< first slot of its receive ring */
	uint32_t rkey;     /**< rkey of the ring */
	uint32_t slots;    /**< slots in the ring */
	uint32_t stride;   /**< bytes per slot (at least the other side's messages) */
};

/**
 * Connect one worker: create an RC QP on the shared receive queue, bring it
 * to RTS towards @p remote, give it rc_slots slots of the region, and fill
 * @p local with what the worker needs. @return the peer id (>= 0; the
 * engine's address of this worker), -ENOTSUP (UD transport), -EINVAL (remote
 * slots smaller than our messages, or none), -ENOSPC (max_peers or the region's
 * slots used up), or the failing verbs call's -errno, with @p err filled.
 */
int sg_dp_verbs_rc_connect(struct sg_dp_verbs *t, const struct sg_dp_verbs_rc_addr *remote,
			   struct sg_dp_verbs_rc_addr *local, char *err, size_t errlen);

/**
 * Close the RC connection of peer id @p peer (from sg_dp_verbs_rc_connect()):
 * move its QP to the error state, wait (at most 10 ms) for the sends in
 * flight to complete, destroy the QP, and give its rc_slots slots back: a
 * later sg_dp_verbs_rc_connect() reuses them (and peer ids, once max_peers
 * were handed out). Replies the engine still sends to @p peer are counted as
 * tx_no_peer; writes still in the receive CQ as rx_no_peer. The poll functions
 * do the same, by themselves, for a connection a completion finds in error
 * (counted in rc_qp_error). Same thread as the poll functions.
 * @return 0, -ENOTSUP (UD transport) or -ENOENT (no such open connection),
 * with @p err filled.
 */
int sg_dp_verbs_rc_disconnect(struct sg_dp_verbs *t, uint32_t peer, char *err, size_t errlen);

/*
 * The reducer lcore's loop, for rte_eal_remote_launch(): what sigmad runs on
 * an lcore that serves a verbs transport instead of an ethdev queue.
 */

/** Arguments and results of sg_dp_verbs_lcore_main(). */
struct sg_dp_verbs_loop {
	struct sg_dp_verbs *t;
	struct sg_dp_engine *eng;
	volatile bool *stop;        /**< the loop returns once *stop is true */
	unsigned int idle_sleep_us; /**< 0: busy-poll; else back off, then sleep up to this */
	uint64_t max_polls;         /**< 0: until *stop; else return after this many polls */
	uint64_t busy_cycles;       /**< out: TSC cycles of polls that found work */
	uint64_t idle_cycles;       /**< out: TSC cycles of polls that found none, sleep included */
	uint64_t polls;             /**< out: polls made */
	int rc;                     /**< out: 0, or the -errno that ended the loop */
};

/**
 * Poll @p arg's transport into its engine until *stop (or max_polls), and run
 * sg_dp_engine_poll() about every millisecond. Time is the TSC in ns. Idle
 * policy as sigmad's `idle`: busy-poll, or after 64 empty polls sleep, the
 * sleep doubling from 1 us up to idle_sleep_us. @return arg->rc.
 */
int sg_dp_verbs_lcore_main(void *arg);

/** Bytes one message may have at most (Sigma header included). */
uint32_t sg_dp_verbs_msg_max(const struct sg_dp_verbs *t);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_VERBS_H */
