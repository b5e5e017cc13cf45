/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers for the client tests: kernel-UDP nodes on 127.0.0.1 and a group of
 * N worker sessions driven from one thread, with sums checked against a
 * reference computed here.
 */
#ifndef CLIENT_UTIL_H
#define CLIENT_UTIL_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sg_test.h"
#include "sigma.h"
#include "sigma_job_conf.h"
#include "sigma_udpd.h"

#define CU_MAX_W 8
#define CU_MAX_NODES 4

struct cu_group {
	unsigned int n;                       /* workers */
	struct sigma_session *s[CU_MAX_W];
	struct sigma_udpd *d[CU_MAX_NODES];
	unsigned int nnodes;
	struct sigma_node nodes[CU_MAX_NODES];
	/* shared memory (cu_shm_nodes()): each node's socket, and the ranks that use it */
	const char *shm[CU_MAX_NODES];
	char shm_path[CU_MAX_NODES][108];
	uint32_t shm_ranks;
	/* colocated (BytePS k = 0): rank r over UDP, given node r's socket alone */
	bool colocate;
	bool running; /* the nodes run already (cu_start() does not start them) */
};

static inline uint64_t cu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* fixed names: placement hashes the name, and addr:port would change with the
 * ephemeral port, making the keys' spread over nodes differ from run to run */
static const char *const cu_names[CU_MAX_NODES] = {"node0", "node1", "node2", "node3"};

/* Start @p nnodes nodes with @p dc (addr 127.0.0.1, ephemeral ports). */
static inline int cu_nodes(struct cu_group *g, unsigned int nnodes,
			   const struct sigma_udpd_conf *dc)
{
	if (nnodes > CU_MAX_NODES)
		return -EINVAL;
	g->nnodes = nnodes;
	for (unsigned int i = 0; i < nnodes; i++) {
		g->d[i] = sigma_udpd_create(dc);
		if (g->d[i] == NULL)
			return -errno;
		g->nodes[i] = (struct sigma_node){.name = cu_names[i], .addr = "127.0.0.1",
						  .port = sigma_udpd_port(g->d[i]),
						  .kind = SG_NODE_CPU,
						  .gbps = 10};
	}
	return 0;
}

/*
 * cu_nodes() with shared memory: node i's socket is @p dir/node<i>.sock, and
 * the ranks in @p ranks (a bit mask) open their sessions over it. The nodes
 * start at once: a node's thread answers the workers that connect at open.
 */
static inline int cu_shm_nodes(struct cu_group *g, unsigned int nnodes,
			       const struct sigma_udpd_conf *dc, const char *dir, uint32_t ranks)
{
	struct sigma_udpd_conf c = *dc;

	if (nnodes > CU_MAX_NODES)
		return -EINVAL;
	for (unsigned int i = 0; i < nnodes; i++) {
		struct cu_group one = {0};
		int rc;

		snprintf(g->shm_path[i], sizeof(g->shm_path[i]), "%s/node%u.sock", dir, i);
		g->shm[i] = g->shm_path[i];
		c.shm_path = g->shm[i];
		rc = cu_nodes(&one, 1, &c);
		if (rc < 0)
			return rc;
		g->d[i] = one.d[0];
		g->nodes[i] = one.nodes[0];
		g->nodes[i].name = cu_names[i];
		g->nnodes = i + 1;
		rc = sigma_udpd_start(g->d[i]);
		if (rc < 0)
			return rc;
	}
	g->running = true;
	g->nnodes = nnodes;
	g->shm_ranks = ranks;
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
		if (g->shm_ranks & (1u << r)) {
			c.transport = SIGMA_TRANSPORT_SHM;
			c.shm_paths = g->shm;
			c.n_shm_paths = g->nnodes;
		}
		if (g->colocate) {
			c.transport = SIGMA_TRANSPORT_UDP;
			c.shm_paths = &g->shm[r % g->nnodes];
			c.n_shm_paths = 1;
		}
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
	for (unsigned int i = 0; i < g->nnodes && !g->running; i++) {
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

/* Worker r's value of element i in round k: small integers, so fp32 sums are exact. */
static inline float cu_val(unsigned int r, size_t i, unsigned int k)
{
	return (float)((int)((i * 7 + r * 131 + k * 17) % 1001) - 500);
}

/*
 * Sum @p nt fp32 tensors of sizes @p sizes over the group for @p rounds
 * rounds and check every element against the reference.
 */
static inline void cu_run_fp32(struct cu_group *g, const size_t *sizes, unsigned int nt,
				unsigned int rounds, const char *what)
{
	struct sigma_tensor *t[CU_MAX_W * 4];
	float *in[CU_MAX_W * 4], *out[CU_MAX_W * 4];
	size_t bad = 0;

	for (unsigned int r = 0; r < g->n; r++)
		for (unsigned int j = 0; j < nt; j++) {
			unsigned int x = r * nt + j;

			t[x] = sigma_tensor_register(g->s[r], what, j, SG_DTYPE_FP32, sizes[j],
						     (int)j);
			SG_CHECK(t[x] != NULL, "%s: register: %s", what, strerror(errno));
			in[x] = malloc(sizes[j] * sizeof(float));
			out[x] = malloc(sizes[j] * sizeof(float));
		}
	SG_CHECK_EQ(cu_start(g, NULL), 0);
	for (unsigned int k = 0; k < rounds; k++) {
		for (unsigned int x = 0; x < g->n * nt; x++) {
			unsigned int r = x / nt, j = x % nt;

			for (size_t i = 0; i < sizes[j]; i++)
				in[x][i] = cu_val(r, i, k);
			memset(out[x], 0xff, sizes[j] * sizeof(float));
			SG_CHECK_EQ(sigma_push_pull(t[x], in[x], out[x], NULL, NULL), 0);
		}
		cu_drive(g, t, g->n * nt);
		for (unsigned int x = 0; x < g->n * nt; x++) {
			unsigned int j = x % nt;

			SG_CHECK(sigma_test(t[x]) == 0, "%s: op %u round %u: %d %s", what, x, k,
				 sigma_test(t[x]), sigma_last_error(g->s[x / nt]));
			for (size_t i = 0; i < sizes[j]; i++) {
				double ref = 0;

				for (unsigned int r = 0; r < g->n; r++)
					ref += cu_val(r, i, k);
				bad += out[x][i] != (float)ref;
			}
		}
	}
	SG_CHECK(bad == 0, "%s: %zu elements differ from the reference", what, bad);
	for (unsigned int x = 0; x < g->n * nt; x++) {
		free(in[x]);
		free(out[x]);
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

struct cu_gone_seen {
	int status;
	int calls;
};

static inline void cu_gone_cb(void *arg, struct sigma_tensor *t, int status)
{
	struct cu_gone_seen *s = arg;

	s->status = status;
	s->calls++;
}

/*
 * @p g's one node (cu_nodes() or cu_shm_nodes()) vanishes after the first
 * results of job @p job: each of 2 workers gets -ETIMEDOUT, node silent,
 * quickly, with an error naming node, key and round. Frees @p g.
 */
static inline void cu_node_gone(struct cu_group *g, uint32_t job)
{
	enum { NE = 400000 };
	struct sigma_conf c = {.job = job, .token = 11, .window = 32, .rto_us = 2000,
			       .rto_max_us = 16000, .max_retries = 5};
	struct sigma_tensor *t[2];
	struct cu_gone_seen seen[2] = {{0}};
	float *buf = calloc(NE, sizeof(float));
	float *out[2] = {malloc(NE * 4), malloc(NE * 4)};
	struct sigma_stats st = {0};
	uint64_t t0;

	SG_CHECK_EQ(cu_sessions(g, 2, &c), 0);
	for (unsigned int r = 0; r < 2; r++)
		t[r] = sigma_tensor_register(g->s[r], "grad.layer7", 7, SG_DTYPE_FP32, NE, 0);
	SG_CHECK_EQ(cu_start(g, NULL), 0);
	for (unsigned int r = 0; r < 2; r++)
		SG_CHECK_EQ(sigma_push_pull(t[r], buf, out[r], cu_gone_cb, &seen[r]), 0);
	/*
	 * Until the first results are in. On a starved machine the node thread
	 * may not run for longer than the 5 retries take: then the operations
	 * have already failed (the same -ETIMEDOUT checked below), and waiting
	 * for results that no one asks for any more would never end.
	 */
	while (st.rx_results < 10 &&
	       (sigma_test(t[0]) == -EINPROGRESS || sigma_test(t[1]) == -EINPROGRESS)) {
		for (unsigned int r = 0; r < 2; r++)
			sigma_poll(g->s[r], 100);
		sigma_get_stats(g->s[0], &st);
	}
	sigma_udpd_stop(g->d[0]);
	t0 = cu_now_ms();
	cu_drive(g, t, 2);
	/* 2+4+8+16+16+16 ms of back-off, far below a second even on a busy machine. */
	SG_CHECK(cu_now_ms() - t0 < 3000, "failing took %" PRIu64 " ms", cu_now_ms() - t0);
	for (unsigned int r = 0; r < 2; r++) {
		const char *e = sigma_last_error(g->s[r]);

		SG_CHECK_EQ(sigma_test(t[r]), -ETIMEDOUT);
		SG_CHECK_EQ(seen[r].calls, 1);
		SG_CHECK_EQ(seen[r].status, -ETIMEDOUT);
		SG_CHECK(strstr(e, "127.0.0.1") && strstr(e, "key 0x0007") &&
				 strstr(e, "round 0") && strstr(e, "grad.layer7"),
			 "error does not name node, key and round: '%s'", e);
		SG_CHECK(strstr(e, "node silent") != NULL, "'%s'", e);
		{
			struct sigma_failure f;

			SG_CHECK_EQ(sigma_last_failure(g->s[r], &f), 0);
			SG_CHECK(f.kind == SIGMA_FAIL_NODE_SILENT && f.status == -ETIMEDOUT &&
					 f.node == 0 && (f.key >> 16) == 7 && f.round == 0,
				 "failure: kind %d status %d node %d key 0x%x round %u", f.kind,
				 f.status, f.node, f.key, f.round);
		}
	}
	free(buf);
	free(out[0]);
	free(out[1]);
	cu_free(g);
}

#endif /* CLIENT_UTIL_H */
