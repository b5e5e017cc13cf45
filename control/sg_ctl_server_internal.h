/* SPDX-License-Identifier: BSD-3-Clause */
/* Private to control/: the server's state, shared by its I/O loop and its methods. */
#ifndef SG_CTL_SERVER_INTERNAL_H
#define SG_CTL_SERVER_INTERNAL_H

#include <pthread.h>

#include <jansson.h>

#include "sg_ctl_internal.h"
#include "sg_ctl_rpc.h"

/* A job as the server remembers it, for placement and failover. */
struct srv_job {
	bool used;
	struct sg_ctl_job spec;
	struct sg_ctl_tensor *tensors;
	/* with etcd (sg_ctl_cluster.c): what matches the job's record, and what failover did */
	char digest[SG_ETCD_DIGEST_LEN]; /* of its wire token ("" without etcd) */
	uint64_t lost;		/* its record's nodes (bit i: nodes[i]) whose keys were moved */
	int64_t said_lease;	/* the record last refused or said of (logged once) */
	int64_t said_mod;
};

/* The server's view of etcd (sg_ctl_cluster.c); the control thread's own. */
struct srv_cluster {
	struct sg_etcd_watch *w;
	char name[SG_ETCD_CLUSTER_MAX];	/* the cluster */
	char self[SG_NAME_MAX];		/* this node's name, from node_info ("" until known) */
	struct sg_etcd_job *rec;	/* scratch: one record */
	bool retry;			/* an addition failed: try again at the next tick */
};

struct sg_ctl_server {
	struct sg_ctl_server_config cfg;
	uint8_t *secret;
	char *unix_path;
	int epfd, stop_fd;
	int tcp_fd, unix_fd, http_fd;
	uint16_t tcp_port, http_port;
	pthread_t thread;
	bool thread_started;
	unsigned int n_conns;
	struct conn *conns;
	struct sg_ctl_members *members;
	struct srv_job jobs[SG_CTL_MAX_JOBS];
	struct srv_cluster cl;
	bool draining;
	struct sg_ctl_server_stats st; /* written by the control thread only, read atomically */
};

/* Bump a counter: one writer, readers in other threads. */
#define SRV_COUNT(s, field) __atomic_fetch_add(&(s)->st.field, 1, __ATOMIC_RELAXED)

/* "not supported by this node's agent" (SG_CTL_ERR_NOT_SUPPORTED). @return -1. */
int sg_ctl_srv_not_supported(struct sg_rpc_err *err);

/* A method of the agent's ops table answers "not supported" when the agent leaves it NULL. */
#define NEED_OP(s, op, err)                                                                 \
	do {                                                                                \
		if ((s)->cfg.ops->op == NULL)                                               \
			return sg_ctl_srv_not_supported(err);                               \
	} while (0)

/*
 * Every job the agent lists, into a malloc'd array (sg_ctl_jobs.c; job_list,
 * stats_get and /metrics). @return the count, or -1 with @p err.
 */
int sg_ctl_srv_jobs(struct sg_ctl_server *s, struct sg_ctl_job **out, struct sg_rpc_err *err);

/* One job as job_list shows it (a new reference). */
json_t *sg_ctl_srv_job_json(const struct sg_ctl_job *j);

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

/** Prometheus text for /metrics (malloc'd, NUL-terminated), or NULL. */
char *sg_ctl_srv_metrics(struct sg_ctl_server *s, size_t *len);

/** Current monotonic time in ns. */
uint64_t sg_ctl_now_ns(void);

#endif /* SG_CTL_SERVER_INTERNAL_H */
