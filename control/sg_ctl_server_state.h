/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to control/: the server's state, which its I/O loop (sg_ctl_server.c)
 * creates and every file of methods reads. Types only: which file provides what
 * is in sg_ctl_server_internal.h.
 */
#ifndef SG_CTL_SERVER_STATE_H
#define SG_CTL_SERVER_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sg_ctl_members.h"
#include "sg_ctl_server.h"
#include "sg_etcd.h"

/* A job as the server remembers it, for placement and failover. */
struct srv_job {
	bool used;
	struct sg_ctl_job spec;
	struct sg_ctl_tensor *tensors;
	/* with etcd (sg_ctl_cluster.c): what matches the job's record, and what failover did */
	char digest[SG_ETCD_DIGEST_LEN]; /* of its wire token ("" without etcd) */
	uint64_t lost;		/* its record's nodes (bit i: nodes[i]) whose keys were moved */
	uint64_t nodes_sum;	/* of the record's node list lost indexes (a switch rewrites it) */
	int64_t said_lease;	/* the record last refused or said of (logged once) */
	int64_t said_mod;
	/* keys it holds that its record's placement (the lost nodes gone) does not give this
	 * node: left by an elastic switch that moved them on or was aborted, or all of them
	 * once a switch took this node out (sg_ctl_cluster.c; stats keys_spare) */
	uint32_t spare;
};

/* The server's view of etcd (sg_ctl_cluster.c); the control thread's own. */
struct srv_cluster {
	struct sg_etcd_watch *w;
	char name[SG_ETCD_CLUSTER_MAX];	/* the cluster */
	char self[SG_NAME_MAX];		/* this node's name, from node_info ("" until known) */
	struct sg_etcd_job *rec;	/* scratch: one record */
	bool retry;			/* an addition failed: try again at the next tick */
};

struct conn; /* a connection: sg_ctl_server.c's own */

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

#endif /* SG_CTL_SERVER_STATE_H */
