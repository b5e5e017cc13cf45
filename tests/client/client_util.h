/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers for the client tests: kernel-UDP nodes on 127.0.0.1 and a group of
 * N worker sessions driven from one thread, with sums checked against a
 * reference computed here.
 */
#ifndef CLIENT_UTIL_H
#define CLIENT_UTIL_H

#include <errno.h>
#include <string.h>

#include "sg_test.h"
#include "sigma.h"
#include "sigma_udpd.h"

#define CU_MAX_W 8
#define CU_MAX_NODES 4

struct cu_group {
	unsigned int n;                       /* workers */
	struct sigma_session *s[CU_MAX_W];
	struct sigma_udpd *d[CU_MAX_NODES];
	unsigned int nnodes;
	struct sigma_node nodes[CU_MAX_NODES];
};

/* Start @p nnodes nodes with @p dc (addr 127.0.0.1, ephemeral ports). */
static inline int cu_nodes(struct cu_group *g, unsigned int nnodes,
			   const struct sigma_udpd_conf *dc)
{
	/* fixed names: placement hashes the name, and addr:port would change with the
	 * ephemeral port, making the keys' spread over nodes differ from run to run */
	static const char *const names[CU_MAX_NODES] = {"node0", "node1", "node2", "node3"};

	if (nnodes > CU_MAX_NODES)
		return -EINVAL;
	g->nnodes = nnodes;
	for (unsigned int i = 0; i < nnodes; i++) {
		g->d[i] = sigma_udpd_create(dc);
		if (g->d[i] == NULL)
			return -errno;
		g->nodes[i] = (struct sigma_node){.name = names[i], .addr = "127.0.0.1",
						  .port = sigma_udpd_port(g->d[i]),
						  .kind = SG_NODE_CPU,
						  .gbps = 10};
	}
	return 0;
}

/* Open N sessions with @p base (nodes, rank and N are filled in). */
static inline int cu_sessions(struct cu_group *g, unsigned int n, const struct sigma_conf *base)
{
	g->n = n;
	for (unsigned int r = 0; r < n; r++) {
		struct sigma_conf c = *base;

		c.rank = (uint16_t)r;
		c.nworkers = (uint16_t)n;
		/* a DPDK session owns its port: rank r takes the r-th port from base's */
		if (c.transport == SIGMA_TRANSPORT_DPDK)
			c.dpdk_port = (uint16_t)(base->dpdk_port + r);
		c.nodes = g->nodes;
		c.nnodes = g->nnodes;
		g->s[r] = sigma_open(&c);
		if (g->s[r] == NULL)
			return -errno;
	}
	return 0;
}

/* Give every node its job (from rank 0's tensors) and start the nodes. */
static inline int cu_start(struct cu_group *g, const struct sg_dp_job_conf *over)
{
	static struct sg_dp_key keys[4096];

	for (unsigned int i = 0; i < g->nnodes; i++) {
		struct sg_dp_job_conf job;
		int nk = sigma_job_for_node(g->s[0], i, &job, keys, 4096), rc;

		if (nk < 0 || nk > 4096)
			return -EINVAL;
		if (nk == 0)
			continue;
		if (over != NULL) {
			job.mode = over->mode;
			job.max_inflight = over->max_inflight;
		}
		rc = sigma_udpd_add_job(g->d[i], &job);
		if (rc < 0)
			return rc;
	}
	for (unsigned int i = 0; i < g->nnodes; i++) {
		int rc = sigma_udpd_start(g->d[i]);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Poll every session until each of the @p n tensors t[] is done; returns when all are. */
static inline void cu_drive(struct cu_group *g, struct sigma_tensor *const *t, unsigned int n)
{
	for (;;) {
		unsigned int busy = 0;

		for (unsigned int r = 0; r < n; r++)
			if (sigma_test(t[r]) == -EINPROGRESS)
				busy++;
		if (busy == 0)
			return;
		for (unsigned int r = 0; r < g->n; r++)
			sigma_poll(g->s[r], 200);
	}
}

static inline void cu_free(struct cu_group *g)
{
	for (unsigned int r = 0; r < g->n; r++)
		sigma_close(g->s[r]);
	for (unsigned int i = 0; i < g->nnodes; i++)
		sigma_udpd_destroy(g->d[i]);
	memset(g, 0, sizeof(*g));
}

#endif /* CLIENT_UTIL_H */
