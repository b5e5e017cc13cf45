/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to control/: what the files of the server library provide each other,
 * by file. The calls run one way (docs/architecture.md, "The control server"):
 * sg_ctl_server.c (the I/O loop) calls down into every other file; the files of
 * methods call sg_ctl_rpc.c and the files below them; sg_ctl_rpc.c calls none.
 * `.ci/file-circles control` checks it.
 */
#ifndef SG_CTL_SERVER_INTERNAL_H
#define SG_CTL_SERVER_INTERNAL_H

#include <jansson.h>

#include "sg_ctl_internal.h"
#include "sg_ctl_rpc.h"
#include "sg_ctl_server_state.h"

/* ---- sg_ctl_rpc.c: the registry, the library's clock ------------------------ */

/*
 * Set-up: every registered name well-formed and registered once per table, plain
 * or a node's (a build defect otherwise). @return 0 or -EINVAL (logged).
 */
int sg_rpc_methods_check(void);

/*
 * Run method @p name for server @p s: its node's registration, else the plain one.
 * @return 0 with *result set (a new reference), or -1 with @p err filled; -ENOENT
 * if no such method is registered.
 */
int sg_rpc_dispatch(struct sg_ctl_server *s, const char *name, json_t *params, json_t **result,
		    struct sg_rpc_err *err);

/* "not supported by this node's agent" (SG_CTL_ERR_NOT_SUPPORTED). @return -1. */
int sg_ctl_srv_not_supported(struct sg_rpc_err *err);

/* A method of the agent's ops table answers "not supported" when the agent leaves it NULL. */
#define NEED_OP(s, op, err)                                                                 \
	do {                                                                                \
		if ((s)->cfg.ops->op == NULL)                                               \
			return sg_ctl_srv_not_supported(err);                               \
	} while (0)

/** Current monotonic time in ns. */
uint64_t sg_ctl_now_ns(void);

/* ---- sg_ctl_jobs.c: the server's job table ----------------------------------- */

/*
 * Every job the agent lists, into a malloc'd array (job_list, stats_get and
 * /metrics). @return the count, or -1 with @p err.
 */
int sg_ctl_srv_jobs(struct sg_ctl_server *s, struct sg_ctl_job **out, struct sg_rpc_err *err);

/* One job as job_list shows it (a new reference). */
json_t *sg_ctl_srv_job_json(const struct sg_ctl_job *j);

/* ---- sg_ctl_cluster.c: the jobs' records in etcd ------------------------------ */

/**
 * With sg_ctl_server_config.etcd: start the watch of the cluster's membership and
 * job records. @return 0 or -errno (logged).
 */
int sg_ctl_cluster_start(struct sg_ctl_server *s, const struct sg_etcd_conf *etcd,
			 const char *cluster);

/** Stop the watch (NULL watch is fine). */
void sg_ctl_cluster_stop(struct sg_ctl_server *s);

/**
 * Bring the jobs held here in line with etcd (control thread): renew the leases of
 * their records, and add to each fixed job the keys of its lost nodes that
 * placement now gives this node. Cheap when nothing changed.
 */
void sg_ctl_cluster_reconcile(struct sg_ctl_server *s);

/** Job @p j was made with @p token (64 hex digits): remember its digest for its record. */
void sg_ctl_cluster_job_made(struct sg_ctl_server *s, struct srv_job *j, const char *token);

/* ---- sg_ctl_metrics.c: counters and /metrics (and sg_ctl_server_get_stats()) -- */

/*
 * The node's lcores (its lcores op), into a malloc'd array of SG_CTL_MAX_LCORES
 * (lcores_get, stats_get, /metrics). @return the count, or -1 with @p err.
 */
int sg_ctl_srv_lcores(struct sg_ctl_server *s, struct sg_ctl_lcore_stats **out,
		      struct sg_rpc_err *err);

/** Prometheus text for /metrics (malloc'd, NUL-terminated), or NULL. */
char *sg_ctl_srv_metrics(struct sg_ctl_server *s, size_t *len);

#endif /* SG_CTL_SERVER_INTERNAL_H */
