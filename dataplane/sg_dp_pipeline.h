/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * sigmad's DPDK pipeline: configuration, lcore layout, Ethernet/ARP/IPv4/UDP
 * handling, the lcore loops that drive the aggregation engine, telemetry and
 * lifecycle. sigmad.c is a thin main() over this header; tests and the
 * benchmark drive the same functions in-process.
 *
 * Conventions: functions return 0 or -errno; constructors return NULL and set
 * errno. Functions that take `err`/`errlen` write a one-line, human-readable
 * reason there on failure (naming the option or key and the fix).
 *
 * Lcore layout (l3fwd style; see sg_dp_layout_parse()):
 * - `io`     "(port,queue,lcore)[,...]": the lcore polls RX queue `queue` of
 *            `port`, answers ARP, checks the headers and hands each push to
 *            the reducer that owns its key (rte_ring hand-off);
 * - `reduce` "lcore[,lcore|a-b...]": reducer lcores; a key belongs to exactly
 *            one reducer (hash of job and key), which sums it and transmits the
 *            results on its own TX queue of the port the push came from;
 * - `rtc`    "(port,queue,lcore)[,...]": run to completion: the lcore receives
 *            and reduces; pushes for keys it does not own go to their owner's
 *            ring, so any number of queues stays correct without RSS.
 * Every lcore in the layout owns one TX queue on every port.
 */
#ifndef SG_DP_PIPELINE_H
#define SG_DP_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_ether.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "sg_ctl_config.h"
#include "sg_dp_engine.h"
#include "sg_dp_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most ports sigmad drives. */
#define SG_DP_MAX_PORTS 8
/** Most lcores in one layout. */
#define SG_DP_MAX_LAYOUT 32
/** Most jobs configured in the file ("[job N]" sections). */
#define SG_DP_MAX_CONFIG_JOBS 16
/**
 * Most jobs each reducer's engine holds at once, the file's and the control
 * plane's together (control/ creates at most SG_CTL_MAX_JOBS, 64): the
 * engines' max_jobs. The agent's job table and the per-job counters are
 * sized from the engines' max_jobs when they are created.
 */
#define SG_DP_MAX_JOBS 128

/* Roles (enum sg_role) and idle policies (enum sg_idle) are in sg_types.h. */

/** One lcore of the layout. */
struct sg_dp_lcore_cfg {
	unsigned int lcore;
	enum sg_role role;
	uint16_t port;  /**< RX port (io, rtc) */
	uint16_t queue; /**< RX queue (io, rtc) */
};

/** One job declared in the config file ("[job N]" sections). */
struct sg_dp_job_cfg {
	uint32_t id;
	uint32_t workers;     /**< N */
	uint64_t token;       /**< session token */
	unsigned int dtype;   /**< enum sg_dtype */
	unsigned int mode;    /**< enum sg_mode: 0 sync, 1 async, 2 deterministic */
	uint32_t keys;        /**< partitions: keys 0..keys-1 */
	uint32_t partition_bytes; /**< bytes of each partition */
	uint32_t chunk_bytes; /**< payload bytes per chunk (0: largest that fits the MTU) */
	uint32_t slots;       /**< slots in flight (0: engine default) */
	/**
	 * Tests only, never read from a file: add the job as an open job (its pushes
	 * make keys 0..keys-1), with a budget of open_slots chunk slots per engine
	 */
	uint32_t open_slots;
};

/** What the agent needs beyond the server's own settings. */
struct sg_dp_agent_conf {
	char name[64];         /**< node name (heartbeats, node_info) [hostname] */
	unsigned int kind;     /**< enum sg_node_kind [cpu] */
	double gbps;           /**< bandwidth announced in heartbeats [the ports' speed, or 100] */
	char coordinator[128]; /**< "host:port" or "unix:path" of a coordinator; "" = none */
	unsigned int heartbeat_ms; /**< period of node_heartbeat [1000] */
};

/**
 * `[control]` as the config loader parsed it, once per load: the agent's keys
 * and the control server's. Held by value in struct sg_dp_config, which is
 * copied by value: the server settings' strings and secret live in @c store,
 * and @c sc's pointers are only meaningful through sg_dp_config_control(),
 * which points them into the store of the copy at hand.
 */
struct sg_dp_control_cfg {
	struct sg_dp_agent_conf ac;      /**< name, kind, gbps, coordinator, heartbeat_ms */
	struct sg_ctl_server_config sc;  /**< listen, unix, metrics, secret, limits (no ops) */
	struct sg_ctl_config_store store; /**< the strings and the secret @c sc names */
};

/** Everything sigmad is configured with. */
/**
 * `[cluster]`: the node's registration in etcd (docs/cluster.md). Read at
 * start; a change needs a restart.
 */
struct sg_dp_cluster_cfg {
	char etcd[512];		/**< endpoints http://host:port[,...]; "" = no registration */
	char cluster[64];	/**< records under /sigma/<cluster>/ [default] */
	unsigned int ttl;	/**< lease TTL, seconds, 1..3600 [5] */
	char addr[16];		/**< dataplane IPv4 announced [[net] ip] */
	char user[64];		/**< etcd user (optional) */
	char password_file[256];/**< its password, first line of this file (mode 0600) */
	char ca_file[256];	/**< TLS: CA bundle (https:// endpoints) */
	char cert_file[256];	/**< TLS: client certificate */
	char key_file[256];	/**< TLS: client key */
};

struct sg_dp_config {
	/* network */
	uint32_t ip;          /**< host byte order */
	uint16_t udp_port;
	uint16_t mtu;         /**< IP MTU: 1500 or up to 9000 */
	bool udp_checksum;    /**< compute and verify UDP checksums */
	struct rte_ether_addr mac_override; /**< all-zero: use the port's MAC */
	unsigned int steer;   /**< enum sg_dp_steer: [net] steer */
	/* layout */
	unsigned int n_lcores;
	struct sg_dp_lcore_cfg lcores[SG_DP_MAX_LAYOUT];
	/* resources */
	unsigned int burst;
	unsigned int ring_size;
	unsigned int mbufs;   /**< per socket */
	unsigned int rxd, txd;
	unsigned int peers;        /**< reply addresses each reducer remembers (ethdev) */
	unsigned int peer_idle_ms; /**< ... forgotten after this long without a checked packet */
	/* live (SIGHUP) */
	enum sg_idle idle;  /**< policy of every lcore not in sleep_lcores */
	bool sleep_lcores[1024]; /**< lcores that back off and sleep whatever @c idle says */
	unsigned int idle_sleep_us;
	unsigned int timeout_ms; /**< incomplete slot reported after this */
	unsigned int pool_bufs;  /**< accumulator buffers per reducer */
	unsigned int log_level; /**< RTE_LOG_* */
	unsigned int stats_interval_s;
	/* jobs */
	unsigned int n_jobs;
	struct sg_dp_job_cfg jobs[SG_DP_MAX_CONFIG_JOBS];
	/* control plane and transport ([control], [transport], [verbs]; docs/sigmad.md) */
	bool control;          /**< the file has a [control] section: run the control agent */
	struct sg_dp_control_cfg ctl; /**< that section, parsed (valid when @c control) */
	struct sg_dp_cluster_cfg cluster; /**< [cluster] (etcd[0] == 0: none) */
	unsigned int transport; /**< enum sg_dp_transport_kind */
	/** `[verbs]` as written (key, value); the verbs transport parses it (docs/verbs.md) */
	unsigned int n_verbs_kv;
	struct {
		char key[32];
		char value[64];
	} verbs_kv[16];
	/** Tests only: a `const struct sg_dp_verbs_ops *` the verbs transport uses instead
	 *  of rdma-core (a fake HCA). NULL in sigmad; never read from a file. */
	const void *verbs_ops;
	/** `[socket]`: the kernel UDP transport's settings ([transport] type = socket) */
	struct sg_dp_sock_cfg {
		unsigned int rcvbuf; /**< SO_RCVBUF(FORCE) bytes asked for each socket */
		unsigned int sndbuf; /**< SO_SNDBUF(FORCE) bytes asked for each socket */
		bool gro;            /**< UDP_GRO on every receiving socket */
		bool gso;            /**< UDP_SEGMENT: equal replies to one worker in one send */
	} sock;
	/* run control */
	char config_path[256]; /**< empty: embedded default */
	double duration_s;     /**< 0: until a signal */
	bool demo;
	unsigned int demo_workers;
};

/** `[net] steer`: rte_flow rules that send reducer r's UDP port to its own RX queue. */
enum sg_dp_steer {
	SG_DP_STEER_AUTO = 0, /**< use rules where the port validates them, rings elsewhere */
	SG_DP_STEER_FLOW = 1, /**< rules on every port, or refuse to start */
	SG_DP_STEER_OFF = 2,  /**< ring hand-off only */
};

/** How sigmad moves bytes: `[transport] type`. */
enum sg_dp_transport_kind {
	SG_DP_TRANSPORT_DPDK = 0,  /**< DPDK ethdev ports (the default) */
	SG_DP_TRANSPORT_VERBS = 1, /**< rdma-core verbs (-Dverbs=enabled; docs/verbs.md) */
	SG_DP_TRANSPORT_SOCKET = 2, /**< kernel UDP sockets (docs/sigmad.md, "Kernel sockets") */
};

/** The embedded default configuration (INI text). */
extern const char sg_dp_default_config[];

/** Fill @p c from the embedded default configuration. @return 0 or -errno. */
int sg_dp_config_defaults(struct sg_dp_config *c);

/**
 * Apply an INI file on top of @p c (keys absent from the file keep their
 * value). Unknown sections or keys, and malformed values, are errors.
 */
int sg_dp_config_load_file(struct sg_dp_config *c, const char *path, char *err, size_t errlen);

/** Same as sg_dp_config_load_file() for INI text held in memory. */
int sg_dp_config_load_string(struct sg_dp_config *c, const char *text, char *err, size_t errlen);

/**
 * Parse Sigma's options (what follows EAL's `--`): `--config FILE` is applied
 * first, then every other option overrides it. argv[0] is the program name.
 * @return 0, 1 if --help was given (usage printed to stdout), or -EINVAL.
 */
int sg_dp_config_parse_args(struct sg_dp_config *c, int argc, char **argv, char *err,
			    size_t errlen);

/**
 * The control server's settings from @p c's parsed `[control]` (@c ctl) into
 * @p sc, ops left NULL. Its strings and secret point into @p c itself, so
 * they stay right for a by-value copy of a config; @p c must outlive @p sc's
 * use (sg_ctl_server_create() copies what it keeps).
 */
void sg_dp_config_control(const struct sg_dp_config *c, struct sg_ctl_server_config *sc);

/**
 * SIGHUP: compare the control server's keys of two parsed configs (listen,
 * unix, secret_file's secret, metrics and the limits), which apply only at
 * start, and name on @p report, in one line, each one that differs.
 * The agent's own keys are sg_dp_agent_reload()'s.
 * @return how many differ (each needs a restart).
 */
int sg_dp_config_control_diff(const struct sg_dp_config *old, const struct sg_dp_config *nc,
			      FILE *report);

/**
 * Parse an lcore list ("2,3", "2-5,7") into @p mask (1024 entries, cleared
 * first); the syntax of the `reduce` layout list. @return 0 or -EINVAL.
 */
int sg_dp_lcore_list_parse(const char *spec, bool *mask, char *err, size_t errlen);

/** Payload bytes per chunk of job @p j: its chunk_bytes, or the largest that fits the MTU. */
uint32_t sg_dp_job_chunk_bytes(const struct sg_dp_config *c, const struct sg_dp_job_cfg *j);

/**
 * Checks of the [job N] sections that need the whole config (a section's keys
 * come in any order): each partition holds a whole number of elements.
 * Every path that adds the config's jobs to engines runs it first.
 * @return 0, or -EINVAL with the job named in @p err.
 */
int sg_dp_config_check_jobs(const struct sg_dp_config *c, char *err, size_t errlen);

/** Add every `[job N]` of @p c to @p eng (the reducers' set-up, and the verbs transport's). */
int sg_dp_engine_add_config_jobs(struct sg_dp_engine *eng, const struct sg_dp_config *c, char *err,
				  size_t errlen);

/** Print `sigmad --help`. */
void sg_dp_usage(FILE *f, const char *prog);

/**
 * Parse one layout list (the value of `io`, `reduce` or `rtc`) and append it
 * to @p c. Syntax: io/rtc "(port,queue,lcore)[,(port,queue,lcore)...]";
 * reduce "lcore[,lcore...]" where an item may be a range "a-b".
 */
int sg_dp_layout_parse(struct sg_dp_config *c, enum sg_role role, const char *spec, char *err,
		       size_t errlen);

/** Remove every lcore of @p role from the layout (before re-parsing it). */
void sg_dp_layout_clear(struct sg_dp_config *c, enum sg_role role);

/** The machine a layout is checked against (sg_dp_topology_probe() or a test's). */
struct sg_dp_topology {
	unsigned int n_ports;
	int port_node[SG_DP_MAX_PORTS];   /**< -1: unknown (vdev) */
	uint16_t max_rxq[SG_DP_MAX_PORTS];
	uint16_t max_txq[SG_DP_MAX_PORTS];
	bool lcore_enabled[1024];
	int lcore_node[1024];
	unsigned int main_lcore;
};

/** Fill @p t from EAL (after rte_eal_init()). */
void sg_dp_topology_probe(struct sg_dp_topology *t);

/**
 * Check a layout. Errors (return -EINVAL, first one in @p err): no reducer, no
 * RX lcore, an lcore that EAL did not enable or the main lcore, one lcore with
 * two roles, a port that does not exist, RX queues of a port not numbered
 * 0..n-1 or over its limit, too many TX queues. Warnings (printed to @p warn
 * if not NULL, counted in *@p n_warn): a reducer or I/O lcore on another NUMA
 * node than a port it serves.
 */
int sg_dp_layout_check(const struct sg_dp_config *c, const struct sg_dp_topology *t, char *err,
		       size_t errlen, FILE *warn, unsigned int *n_warn);

/*
 * The running pipeline.
 */

struct sg_dp_pipeline;

/** Per-lcore counters (what /sigma/lcores reports). */
struct sg_dp_lcore_stats {
	unsigned int lcore;
	enum sg_role role;
	int socket;
	enum sg_idle idle;  /**< the lcore's idle policy now */
	uint64_t busy_cycles;  /**< TSC cycles of polls that found work */
	uint64_t idle_cycles;  /**< TSC cycles of polls that found none (sleep included) */
	uint64_t rx_pkts;      /**< frames received from the port */
	uint64_t rx_bytes;
	uint64_t tx_pkts;      /**< frames transmitted */
	uint64_t tx_bytes;
	uint64_t handoff_pkts; /**< datagrams passed to another reducer's ring */
	uint64_t reduced_pkts; /**< datagrams given to this lcore's engine */
	uint64_t bytes_summed; /**< payload bytes of pushes the engine accepted */
	uint64_t arp_replies;
	uint64_t ring_count;   /**< gauge: datagrams waiting in this reducer's ring */
	/* ethdev reducers' reply addresses (docs/sigmad.md, "Reply addresses") */
	uint64_t peers;         /**< gauge: addresses held now */
	uint64_t peers_learned; /**< addresses added: their packet passed the engine's checks */
	uint64_t peers_evicted; /**< addresses forgotten to make room (least recently seen) */
	uint64_t peers_expired; /**< addresses forgotten after [resources] peer_idle_ms unused */
	uint64_t drops[SG_DP_ND_COUNT];
};

/**
 * Build the pipeline after rte_eal_init(): check the layout (warnings go to
 * stderr), create per-socket mempools, configure and start the ports the
 * layout polls, the reducers' rings and one engine per reducer holding every
 * configured job. Ports must exist already (vdevs, PCI, or ring ports).
 * @return the pipeline, or NULL with errno set and @p err filled; errno is
 *         EPROTONOSUPPORT when the configured transport was not built in (a
 *         configuration error, unlike a port or device that refuses).
 */
struct sg_dp_pipeline *sg_dp_pipeline_create(const struct sg_dp_config *c, char *err,
					     size_t errlen);

/** Launch the layout's lcores. @return 0 or -errno. */
int sg_dp_pipeline_start(struct sg_dp_pipeline *p);

/**
 * Wait until every lcore of the layout has run its loop once since
 * sg_dp_pipeline_start(): it polls its queues, rings and control channel (what
 * sigmad's readiness means, docs/deploy.md).
 * @return 0, -EINVAL when the pipeline is not running, or -ETIMEDOUT after
 *         @p timeout_ms with some lcore still not polling.
 */
int sg_dp_pipeline_wait_polling(struct sg_dp_pipeline *p, unsigned int timeout_ms);

/**
 * Stop: RX lcores stop polling, reducers drain their rings and flush their
 * TX, then every lcore returns. Safe to call twice; waits for the lcores.
 */
void sg_dp_pipeline_stop(struct sg_dp_pipeline *p);

/** Stop if running, stop the ports, free everything. NULL is fine. */
void sg_dp_pipeline_destroy(struct sg_dp_pipeline *p);

/**
 * Apply a re-read configuration: idle, sleep_lcores, idle_sleep_us,
 * log_level and stats_interval_s take effect at once; every other difference
 * (timeout_ms too: the engine takes it at creation) is listed on @p report as
 * needing a restart.
 * @return number of sections or keys that need a restart.
 */
int sg_dp_pipeline_reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report);

/** Number of lcores in the layout. */
unsigned int sg_dp_pipeline_n_lcores(const struct sg_dp_pipeline *p);

/** Counters of layout lcore @p idx. @return 0 or -EINVAL. */
int sg_dp_pipeline_lcore_stats(const struct sg_dp_pipeline *p, unsigned int idx,
			       struct sg_dp_lcore_stats *st);

/** Engine counters summed over every reducer. */
void sg_dp_pipeline_engine_stats(const struct sg_dp_pipeline *p, struct sg_dp_stats *st);

struct sg_dp_verbs_rc_addr;

/**
 * `[verbs] mode = rc` (builds with verbs only): connect one worker to the
 * pipeline's rtc lcore, as sg_dp_verbs_rc_connect() does (sg_dp_verbs.h):
 * the worker's ring and QP in @p remote, the node's in @p local. While the
 * pipeline runs, the lcore makes the connection itself between bursts (its
 * control channel), since its QPs are its own. Thread-safe.
 * @return the worker's peer id (>= 0), or -errno with @p err filled:
 *         -ENOTSUP (not the verbs transport, or mode = ud), -EINVAL,
 *         -ENOSPC, -ETIMEDOUT (the lcore did not answer within 2 s: nothing
 *         stays connected, since the lcore skips, or undoes, a request
 *         answered late), or the verbs call's error.
 */
int sg_dp_pipeline_verbs_rc_connect(struct sg_dp_pipeline *p,
				    const struct sg_dp_verbs_rc_addr *remote,
				    struct sg_dp_verbs_rc_addr *local, char *err, size_t errlen);

/**
 * Close the RC connection of peer id @p peer (what sg_dp_pipeline_verbs_rc_connect()
 * returned), as sg_dp_verbs_rc_disconnect() does, on the lcore that owns it:
 * its QP goes to the error state and is destroyed, and its slots go back for
 * a later connection. Thread-safe. @return 0, or -errno with @p err filled:
 * -ENOTSUP (not the verbs transport, or mode = ud), -ENOENT (no open
 * connection with that id), -ETIMEDOUT (the lcore did not answer; it still
 * closes the connection when it takes the request).
 */
int sg_dp_pipeline_verbs_rc_disconnect(struct sg_dp_pipeline *p, uint32_t peer, char *err,
				       size_t errlen);

/** What a worker needs to address the node's verbs transport (sg_dp_pipeline_verbs_info()). */
struct sg_dp_pipeline_verbs_info {
	bool rc;               /**< [verbs] mode = rc (else UD) */
	uint32_t qkey;         /**< UD Q_Key workers must use */
	uint32_t msg_max;      /**< largest message, the 48-byte header included */
	uint32_t max_payload;  /**< payload bytes after the header one message carries */
	uint8_t port;          /**< the [verbs] port */
	uint8_t gid[16];       /**< the port's GID at gid_index */
	int gid_index;
	uint16_t lid;          /**< 0 on RoCE */
	uint32_t rc_slots;     /**< RC: node slots each connection gets */
	uint32_t rc_conns;     /**< RC: workers connected so far */
	uint32_t rc_max_conns; /**< RC: recv_depth / rc_slots (and at most max_peers) */
	unsigned int n_lcores;
	struct {
		unsigned int lcore;
		enum sg_role role;
		uint32_t qpn;  /**< the lcore's UD QP (RC: its connections have their own) */
	} lcores[SG_DP_MAX_LAYOUT];
};

/**
 * The node's verbs addressing (builds with verbs only). Thread-safe while the
 * lcores run: everything but rc_conns is fixed at set-up.
 * @return 0, or -ENOTSUP with @p err filled when @p p does not run the verbs
 *         transport.
 */
int sg_dp_pipeline_verbs_info(const struct sg_dp_pipeline *p,
			      struct sg_dp_pipeline_verbs_info *out, char *err, size_t errlen);

/**
 * The transport's own counters of lcore @p idx: nothing for ethdev (its
 * ports have rte_eth_stats); for verbs "qpn" (the QP workers address),
 * completions, packets, peers and drop counters (docs/verbs.md). Names are
 * static strings. Callable from any thread while the lcores run.
 * @return how many were written (at most @p max).
 */
unsigned int sg_dp_pipeline_transport_counters(const struct sg_dp_pipeline *p, unsigned int idx,
					       const char **names, uint64_t *values,
					       unsigned int max);

/** Print the per-lcore table (and drops) to @p f; @p seconds scales rates (0: no rates). */
void sg_dp_pipeline_print_stats(const struct sg_dp_pipeline *p, FILE *f, double seconds);

/** The configuration the pipeline runs with. */
const struct sg_dp_config *sg_dp_pipeline_config(const struct sg_dp_pipeline *p);

/**
 * Register /sigma/lcores, /sigma/ports, /sigma/jobs and /sigma/drops with
 * rte_telemetry for @p p (NULL: answer "no pipeline"). rte_telemetry
 * callbacks take no context, so this is the one process-wide pipeline that
 * telemetry reports on. @return 0 or -errno.
 */
int sg_dp_telemetry_register(struct sg_dp_pipeline *p);

/** Fill a struct sg_dp_net for port @p port_id of the pipeline (MAC, offloads). */
int sg_dp_pipeline_net(const struct sg_dp_pipeline *p, uint16_t port_id, struct sg_dp_net *net);

/*
 * In-process traffic generator: N simulated workers on the far side of a
 * pair of rte_rings (the two rings of a ring port), for tests, the benchmark
 * and the demo. It pushes every chunk of every key of one job for a number of
 * rounds, drops packets on purpose if asked, retransmits on timeout, and
 * checks every RESULT element against the exactly known sum.
 */

struct sg_dp_gen;

/** Generator parameters. */
struct sg_dp_gen_conf {
	struct rte_ring *to_dut;   /**< frames towards sigmad (its RX ring), or NULL */
	struct rte_ring *from_dut; /**< frames from sigmad (its TX ring), or NULL */
	int port;                  /**< >= 0: use this ethdev instead of rings: TX queue 0, */
	uint16_t nb_rxq;           /**< ... and RX queues 0..nb_rxq-1 */
	struct rte_mempool *pool;  /**< mbufs for pushes */
	struct rte_ether_addr dut_mac;
	uint32_t dut_ip;           /**< network byte order */
	uint16_t dut_udp_port;     /**< host order */
	uint32_t job;
	uint64_t token;
	uint32_t workers;          /**< N (1..64) */
	uint32_t keys;
	uint32_t partition_bytes;
	uint32_t chunk_bytes;
	uint32_t rounds;
	uint32_t window;           /**< slots in flight at once */
	double loss;               /**< probability of dropping each push and each result */
	/** Probability that a push leaves with one bit of its UDP payload flipped after its
	 *  UDP checksum was computed (damaged on the way); only with udp_checksum. */
	double corrupt;
	uint64_t retrans_us;       /**< resend after this long without a result, twice as long after
				    each resend of the same round (up to 64 x) */
	uint32_t seed;
	bool udp_checksum;
	unsigned int idle_sleep_us; /**< sleep this long after 64 empty polls (0: spin) */
	/** Optional second job (keys2 > 0): the last keys2 of the keys go out as keys
	 *  0..keys2-1 of job job2 (token token2), same workers and partition size. */
	uint32_t job2;
	uint64_t token2;
	uint32_t keys2;
	/** Worker w sends from UDP port src_port + w (0: 40000 + w); its MAC depends on
	 *  its rank and port. Every RESULT must come to exactly that address. */
	uint16_t src_port;
	/** The rounds pushed are first_round .. first_round + rounds - 1: workers that
	 *  carry on a job that earlier ones left (a restart on new ports). */
	uint32_t first_round;
	/**
	 * Build pushes in mbufs that already hold their elements: one pool per worker
	 * and pattern, filled once at create, so a push costs its headers and first
	 * 12 bytes instead of a copy of its elements (the generator shares the node's
	 * CPUs). Not with corrupt (a damaged push would stay damaged). A pool that
	 * runs dry, or cannot be made, falls back to @p pool. The pools go with
	 * sg_dp_gen_destroy(): call it only once no push can still be in flight
	 * (the node stopped, its rings emptied).
	 */
	bool prepared;
};

/** Generator counters and verdict. */
struct sg_dp_gen_stats {
	uint64_t pushes_sent;      /**< first sends */
	uint64_t retransmits;
	uint64_t results_ok;       /**< RESULTs whose every element matched */
	uint64_t results_bad;      /**< RESULTs with a wrong element or to a wrong address (must
				    stay 0) */
	uint64_t results_dup;      /**< RESULTs for a round already complete for that rank */
	uint64_t nacks, errors, other;
	uint64_t dropped_out, dropped_in; /**< injected losses */
	uint64_t unsent;           /**< of pushes_sent and retransmits: never sent (no mbuf, or
				    the port's ring or queue full) */
	uint64_t copied;           /**< pushes built with a copy of their elements (not from a
				    prepared mbuf: sg_dp_gen_conf.prepared) */
	uint64_t corrupted;        /**< pushes sent damaged (sg_dp_gen_conf.corrupt) */
	uint64_t rounds_done;      /**< (slot, round) pairs complete for every worker */
	uint64_t rounds_total;
	uint64_t bytes_pushed;     /**< payload bytes of first sends (the goodput numerator) */
	uint64_t arp_replies;
	uint64_t retransmits2;     /**< ... of retransmits: pushes of job2 */
};

/** Create a generator. @return it, or NULL with errno set. */
struct sg_dp_gen *sg_dp_gen_create(const struct sg_dp_gen_conf *gc);

/**
 * Run until every round of every slot is complete, or @p deadline_tsc passes,
 * or *@p stop becomes true. @return 0 if complete, -ETIMEDOUT otherwise.
 */
int sg_dp_gen_run(struct sg_dp_gen *g, uint64_t deadline_tsc, volatile bool *stop);

/** Receive and check what the DUT sent, once (no sends). */
void sg_dp_gen_poll(struct sg_dp_gen *g);

/** Send one ARP request for the DUT's IP; the reply is counted in arp_replies
 *  and its MAC becomes the destination of later pushes. */
int sg_dp_gen_arp(struct sg_dp_gen *g);

/** Send one raw frame of @p len bytes (for garbage tests). */
int sg_dp_gen_raw(struct sg_dp_gen *g, const void *frame, uint32_t len);

/** Counters so far. */
void sg_dp_gen_stats(const struct sg_dp_gen *g, struct sg_dp_gen_stats *st);

/** Free a generator. NULL is fine. */
void sg_dp_gen_destroy(struct sg_dp_gen *g);

/** Private bytes every mbuf that reaches sigmad's RX must have (rte_pktmbuf_pool_create). */
#define SG_DP_MBUF_PRIV_SIZE 32

/*
 * Loopback run: sigmad's pipeline on a ring port, the generator on the
 * calling (main) lcore. One call = one scenario; used by the tests, the
 * benchmark and `sigmad --demo`.
 */

/** What the generator side of a loopback run does (job 1 of the config is used). */
struct sg_dp_loop_conf {
	uint32_t rounds;
	uint32_t window;        /**< slots in flight (default 64) */
	double loss;            /**< injected loss, each direction */
	double corrupt;         /**< pushes damaged after their UDP checksum (sg_dp_gen_conf) */
	uint64_t retrans_us;    /**< default 2000 */
	uint32_t seed;
	double timeout_s;       /**< give up after this long (default 30) */
	unsigned int garbage;   /**< malformed frames to send first (counted drops) */
	bool arp;               /**< send an ARP request first */
	unsigned int gen_sleep_us; /**< generator's idle sleep (0: it busy-polls) */
	/** Called once the lcores run, before the generator starts (for example to start
	 *  the control agent); a negative return ends the run with that error. */
	int (*on_start)(struct sg_dp_pipeline *p, void *arg);
	/** Called once the generator is done, while the lcores still run. */
	void (*on_stop)(struct sg_dp_pipeline *p, void *arg);
	void *hook_arg;
	/** Drive the config's second job too (same workers and partition_bytes as the
	 *  first): its keys follow the first job's in the generator's window. */
	bool two_jobs;
};

/**
 * Outcome of a loopback run. When every round completed, the node took in
 * every frame the generator sent before its lcores stopped (the run waits for
 * the port's RX rings to empty, within timeout_s): its counters then cover
 * the same frames as the generator's.
 */
struct sg_dp_loop_result {
	int rc;                 /**< 0: every round complete */
	double seconds;         /**< generator's wall time */
	struct sg_dp_gen_stats gen;
	struct sg_dp_stats eng;
	unsigned int n_lcores;
	struct sg_dp_lcore_stats lcores[SG_DP_MAX_LAYOUT];
};

/** Every job's counters, summed over the reducers' engines. */
struct sg_dp_jobs_table {
	unsigned int n;             /**< jobs */
	uint32_t *ids;              /**< their ids */
	struct sg_dp_job_stats *st; /**< their counters, in the same order */
};

/**
 * Counters of every job, summed over the reducers' engines, into @p t (as
 * many as the engines hold: the table grows to fit; release it with
 * sg_dp_jobs_table_free(), on failure too). Each engine is read by its own
 * lcore, through its control channel, so the pipeline must be running; safe
 * from any non-lcore thread (calls are serialised).
 * @return the number of jobs, -ETIMEDOUT if a reducer did not answer, or -ENOMEM.
 */
int sg_dp_pipeline_jobs_stats(struct sg_dp_pipeline *p, struct sg_dp_jobs_table *t);

/** Free the arrays of @p t and zero it. */
void sg_dp_jobs_table_free(struct sg_dp_jobs_table *t);

/**
 * Create a ring port (RX queues as the layout needs, one TX queue per
 * lcore), point the layout's port 0 at it, run the pipeline with @p c and
 * the generator with @p lc until done or timed out, stop, collect, free.
 * @p table: if not NULL, the per-lcore table is printed there.
 * @return 0 or -errno (set-up failures fill @p err); a run that did not
 *         complete returns 0 with res->rc = -ETIMEDOUT.
 */
int sg_dp_loopback_run(const struct sg_dp_config *c, const struct sg_dp_loop_conf *lc,
		       struct sg_dp_loop_result *res, FILE *table, char *err, size_t errlen);

/** Where the two processes of sg_dp_memif_run() run. */
struct sg_dp_memif_conf {
	const char *socket_path; /**< memif control socket file (removed before and after) */
	const char *dut_lcores;  /**< EAL --lcores of the node process, e.g. "0@0,1@1" */
	const char *gen_lcores;  /**< EAL --lcores of the generator process, e.g. "0@0" */
	double max_life_s;       /**< the node exits after this long even if not told */
	bool dut_table;          /**< the node prints its per-lcore table on exit */
};

/**
 * Two processes over net_memif: fork a node process that runs the pipeline
 * with @p c on a memif server port (port 0), then start EAL here with the
 * memif client, resolve the node's MAC by ARP, and run the generator as in
 * sg_dp_loopback_run(). The node's counters come back through a pipe; it is
 * stopped with SIGTERM and killed if it does not exit within 5 s.
 * Must be called in a process that has not started EAL; it starts and cleans
 * up EAL itself, so call it once per process.
 */
int sg_dp_memif_run(const struct sg_dp_config *c, const struct sg_dp_loop_conf *lc,
		    const struct sg_dp_memif_conf *mc, struct sg_dp_loop_result *res, char *err,
		    size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_PIPELINE_H */
