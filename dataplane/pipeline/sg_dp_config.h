/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * sigmad's configuration: what `sigmad.conf` and sigmad's options say
 * (struct sg_dp_config; docs/sigmad.md), the lcore layout and its checks
 * against the machine. The config loader runs before EAL starts; nothing here
 * needs a running pipeline (sg_dp_pipeline.h runs one).
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
#ifndef SG_DP_CONFIG_H
#define SG_DP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_ether.h>

#include "sg_err.h"
#include "sg_types.h"

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
 * plane's together (control/ creates at most 64, SG_CTL_MAX_JOBS): the
 * engines' max_jobs. The agent's job table and the per-job counters are
 * sized from the engines' max_jobs when they are created.
 */
#define SG_DP_MAX_JOBS 128

/* Roles (enum sg_role) and idle policies (enum sg_idle) are in sg_types.h. */

/** Entries of [layout] extra_rx. */
#define SG_DP_MAX_EXTRA_RX 8

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
	/**
	 * Tests and benchmarks only, never read from a file: auth = mac with this job
	 * key (docs/security.md); its chunks leave SG_DP_MAC_TRAILER bytes for the MAC
	 */
	bool auth;
	uint8_t auth_key[32];
};

struct rte_cfgfile;

/**
 * A section of the config file that the program owns, not the pipeline
 * (sigmad's [control] and [cluster]: sigmad/sg_dp_agent_config.h). The loader
 * hands each such section, whole, to its hook, once per file that has it, in
 * file order; a section that neither the loader nor a hook knows is refused.
 */
struct sg_dp_config_section {
	const char *name; /**< the section, e.g. "control" */
	/** Parse section @p name of @p cf into @p arg. @return 0, or -errno with @p err. */
	int (*load)(void *arg, struct rte_cfgfile *cf, const char *name, char *err, size_t errlen);
	void *arg;
};

/** Most program sections one config takes (struct sg_dp_config.sections). */
#define SG_DP_CONFIG_MAX_SECTIONS 4

/** Everything sigmad is configured with. */
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
	/** [layout] extra_rx: more RX queues, of any port, for lcores that receive (io,
	 *  rtc); role unused. One lcore can so serve two ports (docs/sigmad.md). */
	unsigned int n_extra_rx;
	struct sg_dp_lcore_cfg extra_rx[SG_DP_MAX_EXTRA_RX];
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
	/**
	 * The program's own sections (n_sections of them; none: the loader refuses
	 * [control] and [cluster] as unknown). Read only while loading; set after
	 * sg_dp_config_defaults(), which clears them.
	 */
	struct sg_dp_config_section sections[SG_DP_CONFIG_MAX_SECTIONS];
	unsigned int n_sections;
	/* transport ([transport], [verbs], [socket]; docs/sigmad.md) */
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

/**
 * Write a formatted reason into @p err (when not NULL), always NUL-terminated:
 * how this library and the pipeline fill their `err`/`errlen`; sg_err() with
 * no value to return (sg_err.h).
 */
#define sg_dp_seterr(err, errlen, ...) ((void)sg_err(err, errlen, 0, __VA_ARGS__))

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

/**
 * A transport's check() for a transport without ethdev ports (verbs, socket):
 * refuse a layout entry on another port than 0, naming what port 0 is
 * (@p what) and the [transport] @p type, and describe that one pseudo-port in
 * @p t: 32 RX queues, a TX queue per lcore.
 * @return 0, or -EINVAL with the entry and its fix in @p err.
 */
int sg_dp_layout_port0(const struct sg_dp_config *c, struct sg_dp_topology *t, const char *type,
		       const char *what, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_CONFIG_H */
