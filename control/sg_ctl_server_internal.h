/* SPDX-License-Identifier: BSD-3-Clause */
/* Private to control/: the server's state, shared by its I/O loop and its methods. */
#ifndef SG_CTL_SERVER_INTERNAL_H
#define SG_CTL_SERVER_INTERNAL_H

#include <pthread.h>

#include <jansson.h>

#include "sg_ctl_internal.h"

/* A job as the server remembers it, for placement. */
struct srv_job {
	bool used;
	struct sg_ctl_job spec;
	struct sg_ctl_tensor *tensors;
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
	bool draining;
	struct sg_ctl_server_stats st; /* written by the control thread only, read atomically */
};

/* Bump a counter: one writer, readers in other threads. */
#define SRV_COUNT(s, field) __atomic_fetch_add(&(s)->st.field, 1, __ATOMIC_RELAXED)

/* A JSON-RPC error to send back. */
struct rpc_err {
	int code;
	char msg[SG_CTL_REASON_MAX + 96];
};

/**
 * Run one method. @return 0 with *result set (a new reference), or -1 with
 * @p err filled; -ENOENT if there is no such method.
 */
int sg_ctl_srv_dispatch(struct sg_ctl_server *s, const char *method, json_t *params,
			json_t **result, struct rpc_err *err);

/** Prometheus text for /metrics (malloc'd, NUL-terminated), or NULL. */
char *sg_ctl_srv_metrics(struct sg_ctl_server *s, size_t *len);

/** Current monotonic time in ns. */
uint64_t sg_ctl_now_ns(void);

#endif /* SG_CTL_SERVER_INTERNAL_H */
