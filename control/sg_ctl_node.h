/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What a summation node is to the control plane: its ports, lcores, jobs and
 * keys, its layout and verbs answers, and the agent ops table through which the
 * control server asks the node (struct sg_ctl_agent_ops). Node methods'
 * handlers (sg_ctl_rpc.h) and the agents that implement them (sigmad's,
 * sigma-udpd's, the tests' mock) share these types; sg_ctl_server.h includes
 * this header. Part of library sg_ctl_server.
 *
 * Conventions: functions return 0 or a negative errno.
 */
#ifndef SG_CTL_NODE_H
#define SG_CTL_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_ctl_client.h"
#include "sg_late.h"
#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most ports, lcores and tensors the answers below carry. */
#define SG_CTL_MAX_PORTS 16
#define SG_CTL_MAX_LCORES 128
#define SG_CTL_MAX_TENSORS 1024
/** Longest reason an agent may give for refusing something. */
#define SG_CTL_REASON_MAX 160

/** A port of this node. */
struct sg_ctl_port_info {
	char name[32];
	uint32_t speed_mbps;
	int32_t numa;
};

/** Answer of the node info method. */
struct sg_ctl_node_info {
	char name[SG_NAME_MAX];
	uint32_t n_cores;
	uint32_t n_numa;
	uint32_t n_ports;
	struct sg_ctl_port_info ports[SG_CTL_MAX_PORTS];
	uint32_t n_reducers;
	uint32_t reducer_lcores[SG_CTL_MAX_LCORES];
	bool draining;
	/* What a worker and the job service need (docs/control.md, "Jobs across nodes"). */
	char addr[16];		  /**< the dataplane's IPv4 address, dotted quad ("" if none) */
	uint16_t udp_port;	  /**< the dataplane's UDP port (0 if none) */
	enum sg_node_kind kind;	  /**< CPU or GPU machine (placement) */
	double gbps;		  /**< bandwidth placement weighs the node with (> 0) */
	uint32_t max_chunk_bytes; /**< largest chunk_bytes a job may use here */
};

/** Per-lcore counters and recent rates (as in the dataplane's telemetry). */
struct sg_ctl_lcore_stats {
	uint32_t lcore;
	uint32_t role; /**< enum sg_role */
	int32_t numa;
	uint32_t idle; /**< enum sg_idle */
	uint64_t busy_cycles;
	uint64_t idle_cycles;
	uint64_t packets;
	uint64_t bytes_summed;
	uint64_t drops;
	double busy_pct; /**< over the dataplane's last interval */
	double mpps;
	double gbps_summed;
	uint64_t ring;   /**< gauge: datagrams waiting in this lcore's reducer ring (0: none) */
};

/** One key of a job on a node: partition part of tensor t is key sg_wire_key(t, part). */
struct sg_ctl_key {
	uint32_t id;	/**< wire key */
	uint32_t nelem; /**< elements of the partition */
};

/** A job: its spec (create) and its counters (list). */
struct sg_ctl_job {
	/**
	 * create: the id asked for (the job service gives every node the same), or 0
	 * for one the agent picks; the agent sets it. An id in use is refused (-EEXIST).
	 */
	uint32_t id;
	uint32_t n_workers;
	enum sg_dtype dtype;
	enum sg_mode mode;
	uint32_t partition_bytes; /**< at most 4 MiB */
	uint32_t n_tensors;
	const struct sg_ctl_tensor *tensors; /**< create: owned by the server for the call only */
	char token[SG_CTL_TOKEN_LEN];	     /**< create: given or made by the server; list: empty */
	/**
	 * create: the chunk size asked for, or 0 for the node's largest (node_info's
	 * max_chunk_bytes); the agent refuses one above that (-EINVAL with a reason) and
	 * sets the one it uses. list: the job's.
	 */
	uint32_t chunk_bytes;
	/**
	 * create: the keys this node holds, placed by the server (every partition of
	 * every tensor on a job of one node; on a job of several, those that
	 * sg_ctl_place_key() gives this node, which may be none). Owned by the server
	 * for the call only. list: n_keys is the number of keys the node holds.
	 */
	const struct sg_ctl_key *keys;
	uint32_t n_keys;
	uint32_t n_nodes;	   /**< create and list: summation nodes the job spans (>= 1) */
	/**
	 * An open job (job_create without tensors): no keys are placed; each of the
	 * node's engines makes a key on its first valid push (docs/control.md, "Open
	 * jobs"). Its dtype may be SG_DTYPE_ANY. list: n_keys is the keys made so far,
	 * summed over the node's engines.
	 */
	bool open;
	/**
	 * Open job. create: chunk slots each engine may give its keys (0: the agent's
	 * default, SG_OPEN_SLOTS_DEFAULT); the agent sets the one it uses. list: the same.
	 */
	uint32_t slots;
	uint64_t slots_budget; /**< create and list: chunk slots the job may take, summed over
				    the node's engines (a fixed job: its chunks', reserved) */
	uint64_t slots_used;   /**< list: chunk slots its keys take, summed over the engines */
	uint64_t rounds_completed; /**< list: summed over the node's reducers */
	uint64_t retransmits;      /**< list: kept results served again */
	uint64_t incomplete;       /**< list: gauge, timed-out rounds still open */
	uint64_t nacks;            /**< list: NACKs sent (no buffer or slot free) */
	uint64_t drops;            /**< list: the job's packets dropped, all reasons */
	uint64_t bytes_pushed;     /**< list: payload bytes of the pushes summed here */
	/**
	 * create and list: auth = mac (job_create's "auth": "mac"; docs/protocol.md,
	 * "Authenticated datagrams"). create: auth_key is the job's MAC key, which the
	 * server derives from the job's full token (sg_auth_job_key_from_token()), so
	 * that every node of the job derives the same; the agent hands it to its
	 * engines and keeps it while the job lives. list: auth_key is zero.
	 */
	bool auth;
	uint8_t auth_key[32];
};

/** A live layout change: only what the dataplane can apply without a restart. */
struct sg_ctl_layout_change {
	bool has_keymap;
	uint16_t keymap[SG_BUCKETS]; /**< bucket -> reducer index */
	uint32_t n_idle;			/**< idle-policy changes */
	struct {
		uint32_t lcore;
		uint32_t idle; /**< enum sg_idle */
	} idle[SG_CTL_MAX_LCORES];
};

/** The lcore layout. */
struct sg_ctl_layout {
	uint32_t n_lcores;
	struct {
		uint32_t lcore;
		uint32_t role; /**< enum sg_role */
		int32_t numa;
		uint32_t idle; /**< enum sg_idle */
		int32_t port;  /**< -1 if none */
		int32_t queue; /**< -1 if none */
	} lcores[SG_CTL_MAX_LCORES];
	uint32_t n_reducers;
	uint16_t keymap[SG_BUCKETS];
};

/** Verbs transport modes (sigmad's `[verbs] mode`, docs/verbs.md). */
enum sg_ctl_verbs_mode {
	SG_CTL_VERBS_UD = 0, /**< one UD datagram per message to an lcore's QPN */
	SG_CTL_VERBS_RC = 1, /**< one RC connection per worker (verbs_rc_connect) */
};

/** Answer of the verbs info method: what a worker needs to reach the node. */
struct sg_ctl_verbs_info {
	uint32_t mode;         /**< enum sg_ctl_verbs_mode */
	uint32_t qkey;         /**< UD Q_Key */
	uint32_t msg_max;      /**< largest message, the 48-byte Sigma header included */
	uint32_t max_payload;  /**< payload bytes after the header per message (chunk_bytes cap) */
	uint32_t port;         /**< HCA port */
	uint8_t gid[16];       /**< port GID */
	int32_t gid_index;
	uint32_t lid;          /**< 0 on RoCE */
	uint32_t rc_slots;     /**< RC: node slots each connection gets */
	uint32_t rc_conns;     /**< RC: connected workers */
	uint32_t rc_max_conns; /**< RC: most workers the node can take */
	uint32_t n_lcores;
	struct {
		uint32_t lcore;
		uint32_t role; /**< enum sg_role */
		uint32_t qpn;  /**< the lcore's UD QP number; 0 in RC (connections have their own) */
	} lcores[SG_CTL_MAX_LCORES];
};

/** One side of a verbs RC connection (sigmad's struct sg_dp_verbs_rc_addr). */
struct sg_ctl_verbs_rc_addr {
	uint32_t qpn;    /**< QP number (24 bits) */
	uint32_t psn;    /**< first packet sequence number (24 bits) */
	uint16_t lid;    /**< LID (InfiniBand; 0 on RoCE) */
	uint8_t gid[16]; /**< GID (RoCE; may be zero on InfiniBand) */
	uint64_t addr;   /**< first slot of the receive ring */
	uint32_t rkey;   /**< rkey of the ring */
	uint32_t slots;  /**< slots in the ring */
	uint32_t stride; /**< bytes per slot */
};

/** Largest ring a worker may declare in verbs_rc_connect (slots, bytes per slot). */
#define SG_CTL_VERBS_MAX_SLOTS 65536
#define SG_CTL_VERBS_MAX_STRIDE (1u << 20)

/**
 * Parse a GID written as 32 hex digits, or as 8 colon-separated groups of 4
 * (the form `ibv_devinfo -v` and show_gids print). @return 0 or -EINVAL.
 */
int sg_ctl_gid_parse(const char *s, uint8_t gid[16]);
/** Write @p gid as 8 colon-separated groups of 4 hex digits (40 bytes with the NUL). */
void sg_ctl_gid_format(const uint8_t gid[16], char out[40]);

/**
 * What the server needs of its node outside any method of the same name:
 * node_info for placement and etcd, the job callbacks for its job table and
 * /metrics, lcores for /metrics, job_keys_add for failover. The node's other
 * methods (layout, drain, verbs, log level) are handlers it registers itself
 * with SG_RPC_NODE_REGISTER() (sg_ctl_rpc.h), tagged with this table. Every
 * callback runs on the control thread, one at a time; it must not block for
 * long (talk to lcores through sg_dp_chan_call() with a short timeout). A NULL
 * callback makes its method answer "not supported". Callbacks return 0 or
 * -errno; where they take @p reason, they may write a human-readable refusal
 * into it.
 */
/** One drop reason of a node and its count (the agent ops' drops). */
struct sg_ctl_drop {
	char reason[48]; /**< e.g. engine_bad_token, net_not_udp, udp_rx_overflows */
	uint64_t count;
};
/** The most drop reasons a node reports. */
#define SG_CTL_MAX_DROPS 96

struct sg_ctl_agent_ops {
	int (*node_info)(void *arg, struct sg_ctl_node_info *out);
	/** Create a job; set job->id. The token is already in job->token. */
	int (*job_create)(void *arg, struct sg_ctl_job *job, char *reason);
	/** Up to @p cap jobs. @return the number written, or -errno. */
	int (*job_list)(void *arg, struct sg_ctl_job *out, unsigned int cap);
	/** -ENOENT for an unknown job. */
	int (*job_destroy)(void *arg, uint32_t id);
	/** Up to @p cap lcores. @return the number written, or -errno. */
	int (*lcores)(void *arg, struct sg_ctl_lcore_stats *out, unsigned int cap);
	/**
	 * Optional: add @p n keys to fixed job @p id, the keys of a lost node that
	 * placement now gives this node (docs/cluster.md, "Jobs in etcd"); keys the job
	 * has already are skipped. Each key's first push opens whatever round it
	 * carries. NULL: the server never moves keys here.
	 * @return keys added (>= 0), or -errno (-ENOENT, -EBUSY: try later) with @p reason.
	 */
	int (*job_keys_add)(void *arg, uint32_t id, const struct sg_ctl_key *keys, uint32_t n,
			    char *reason);
	/**
	 * Optional: the lateness of job @p id's ranks (sg_late.h), summed over the
	 * node's engines, into @p out (job_lateness, /metrics). NULL: the node keeps
	 * none. @return 0, or -ENOENT for an unknown job, or -errno.
	 */
	int (*job_lateness)(void *arg, uint32_t id, struct sg_late *out);
	/**
	 * Optional: the node's dropped packets by reason, engine-wide and its
	 * transport's own (stats_get's `drops`, /metrics' `sigma_drops_total`), up
	 * to @p cap. NULL: the node keeps none. @return the number written, or -errno.
	 */
	int (*drops)(void *arg, struct sg_ctl_drop *out, unsigned int cap);
};

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_NODE_H */
