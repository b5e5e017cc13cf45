/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma control server: JSON-RPC 2.0 over TCP (HMAC-SHA256 challenge-response)
 * and over a Unix socket (file permissions), plus a Prometheus text endpoint,
 * all on one epoll thread of its own. The node's daemon plugs in through an
 * agent ops table (struct sg_ctl_agent_ops, sg_ctl_node.h, with the node's
 * types) and the methods it registers itself (sg_ctl_rpc.h). The wire format is documented in
 * docs/control.md; registering a method: sg_ctl_rpc.h. Library sg_ctl_server
 * (with the membership tracker, sg_ctl_members.h): DPDK's rte_log, jansson,
 * libsodium, etcd. Logging uses the rte_log type "sigma.control".
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno.
 */
#ifndef SG_CTL_SERVER_H
#define SG_CTL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_ctl_client.h"
#include "sg_ctl_node.h"
#include "sg_etcd.h"
#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Server configuration. Zero fields get the defaults in brackets. */
struct sg_ctl_server_config {
	const char *tcp_addr;	     /**< IPv4 listen address ["127.0.0.1"]; "" disables TCP */
	uint16_t tcp_port;	     /**< 0 = ephemeral (see sg_ctl_server_tcp_port()) */
	bool tcp_disable;	     /**< no TCP listener */
	const char *unix_path;	     /**< Unix socket path, created 0600; NULL = none */
	const uint8_t *secret;	     /**< shared secret for TCP (required if TCP is on) */
	size_t secret_len;	     /**< at least 16 bytes */
	bool metrics_enable;	     /**< serve Prometheus /metrics over HTTP */
	const char *metrics_addr;    /**< ["127.0.0.1"] */
	uint16_t metrics_port;	     /**< 0 = ephemeral */
	uint32_t max_frame;	     /**< largest request line in bytes [65536] */
	uint32_t max_conns;	     /**< simultaneous connections [64] */
	uint32_t idle_timeout_ms;    /**< close a connection silent this long [30000] */
	uint32_t frame_timeout_ms;   /**< close one whose partial frame is this old [5000] */
	uint32_t auth_timeout_ms;    /**< close a TCP one not authenticated by then [5000] */
	uint64_t heartbeat_timeout_ms; /**< membership: node lost after this silence [3000] */
	/**
	 * Required: the node's table; it also selects the node's own methods
	 * (SG_RPC_NODE_REGISTER() with this pointer), so two servers of one program
	 * made with different tables each answer their own.
	 */
	const struct sg_ctl_agent_ops *ops;
	void *ops_arg; /**< the node: the callbacks' @p arg, and sg_rpc_node() */
	/**
	 * Failover of fixed jobs (docs/cluster.md, "Jobs in etcd"): the etcd cluster
	 * whose membership and job records the server watches (a stream, on a thread
	 * of the watch's own), to add to its jobs the keys of a lost node that
	 * placement moves here, and to renew the leases of its jobs' records. NULL:
	 * none. Read at create (copied).
	 */
	const struct sg_etcd_conf *etcd;
	const char *cluster;	     /**< with etcd: 1..63 of [A-Za-z0-9._-] ["default"] */
};

/** Counters of the server, each for its own kind of refusal. */
struct sg_ctl_server_stats {
	uint64_t conns_accepted;
	uint64_t conns_refused;	 /**< over max_conns */
	uint64_t requests;	 /**< answered requests (any outcome) */
	uint64_t auth_ok;
	uint64_t auth_failed;	 /**< wrong HMAC, replayed response, bad auth params */
	uint64_t unauthenticated; /**< a method called before auth */
	uint64_t malformed;	 /**< not JSON, or not a JSON-RPC 2.0 request */
	uint64_t oversized;	 /**< frame longer than max_frame */
	uint64_t unknown_method;
	uint64_t timeouts;	 /**< idle, partial-frame or auth timeout */
	uint64_t method_errors;	 /**< the agent or the params refused */
	uint64_t metrics_scrapes;
	uint64_t http_bad;	 /**< bad HTTP requests to the metrics port */
	/* with etcd (sg_ctl_server_config.etcd) */
	uint64_t cluster_records;   /**< gauge: job records taken (a job held here, the digest of
				         its token and its shape match): their leases renewed */
	uint64_t cluster_refused;   /**< records of a job held here refused (another token or
				         shape), once per record */
	uint64_t cluster_nodes_lost; /**< nodes of jobs held here found lost (per job and node) */
	uint64_t cluster_keys_added; /**< keys added to jobs here because a node was lost */
	uint64_t cluster_add_failures; /**< attempts to add them that failed (tried again) */
	/* job_keys_add (an elastic job's switch moving keys to a node that stays) */
	uint64_t keys_add_requests; /**< requests that added their keys (some may be new) */
	uint64_t keys_add_added;    /**< keys new to their job that those added */
	uint64_t keys_add_refused;  /**< requests refused: an unknown job, an open or async one,
				         a key not of the job, malformed, or the agent's refusal */
	uint64_t keys_add_busy_us;  /**< the agent's job_keys_add, in all (us): the control
				         thread answers nothing else meanwhile */
	uint64_t keys_add_max_us;   /**< ... the longest one */
	uint64_t keys_spare;	    /**< gauge: keys jobs here hold that their records' placement
				         does not give this node (an elastic switch moved them
				         away, took the node out, or was aborted after
				         job_keys_add): memory only, summed for no one */
};

struct sg_ctl_server;

/**
 * Create the sockets and start the control thread. Fails (NULL, errno) on
 * bad config (EINVAL, with a logged reason), or when a socket cannot be
 * bound. libsodium is initialised here.
 */
struct sg_ctl_server *sg_ctl_server_create(const struct sg_ctl_server_config *cfg);
/** Stop the thread, close everything, remove the Unix socket file. NULL is fine. */
void sg_ctl_server_destroy(struct sg_ctl_server *s);

/** TCP port actually bound (useful with port 0), 0 if none. */
uint16_t sg_ctl_server_tcp_port(const struct sg_ctl_server *s);
/** Metrics port actually bound, 0 if none. */
uint16_t sg_ctl_server_metrics_port(const struct sg_ctl_server *s);
/** Snapshot of the counters (thread-safe: relaxed atomic reads). */
void sg_ctl_server_get_stats(const struct sg_ctl_server *s, struct sg_ctl_server_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_SERVER_H */
