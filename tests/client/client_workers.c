/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * N libsigma workers in one process against a running summation node (e.g.
 * sigmad, configured with the same job): tensor 0 of KEYS full partitions,
 * ROUNDS push_pulls, every element checked against the exact sum. Exits 0 when
 * all sums are right, 1 otherwise (with sigma_last_error()).
 * Usage: client_workers ADDR PORT N KEYS PARTITION_BYTES CHUNK_BYTES ROUNDS TOKEN JOB
 * With SIGMA_EAL="eal args..." and SIGMA_LOCAL_IP set, the workers use the
 * DPDK transport instead of kernel UDP: worker r owns ethdev port r (give EAL
 * N ports, e.g. N memif clients), polling $SIGMA_MEMIF_QUEUES RX queues (one
 * per sigmad lcore). SIGMA_STEER_REDUCERS=R sets sigma_conf.steer_reducers (pushes
 * to PORT + 1 + the key's reducer among R); SIGMA_FIRST_ROUND=K starts at round K (a
 * second run against the same job continues its rounds).
 */
#include <stdlib.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_errno.h>

#include "client_util.h"

int main(int argc, char **argv)
{
	struct cu_group g = {0};
	struct sigma_conf c = {0};
	struct sigma_tensor *t[CU_MAX_W];
	float *in[CU_MAX_W], *out[CU_MAX_W];
	unsigned int n, keys, rounds;
	uint64_t ne;
	size_t bad = 0;

	if (argc != 10) {
		fprintf(stderr, "usage: %s ADDR PORT N KEYS PARTITION_BYTES CHUNK_BYTES ROUNDS "
				"TOKEN JOB\n", argv[0]);
		return 2;
	}
	n = (unsigned int)atoi(argv[3]);
	keys = (unsigned int)atoi(argv[4]);
	rounds = (unsigned int)atoi(argv[7]);
	c.partition_bytes = (uint32_t)atoi(argv[5]);
	c.chunk_bytes = (uint32_t)atoi(argv[6]);
	c.token = strtoull(argv[8], NULL, 0);
	c.job = (uint32_t)atoi(argv[9]);
	c.rto_us = 20000;
	c.max_retries = 8;
	if (n < 1 || n > CU_MAX_W || keys < 1 || c.partition_bytes % 4)
		return 2;
	ne = (uint64_t)keys * c.partition_bytes / 4;
	if (getenv("SIGMA_EAL") != NULL) {
		static char eal_buf[1024];
		char *eal_argv[32] = {argv[0]}, *save = NULL;
		int eal_argc = 1;

		snprintf(eal_buf, sizeof(eal_buf), "%s", getenv("SIGMA_EAL"));
		for (char *tok = strtok_r(eal_buf, " ", &save); tok && eal_argc < 31;
		     tok = strtok_r(NULL, " ", &save))
			eal_argv[eal_argc++] = tok;
		if (rte_eal_init(eal_argc, eal_argv) < 0)
			SG_TEST_SKIP_ALL("rte_eal_init failed: %s", rte_strerror(rte_errno));
		if (rte_eth_dev_count_avail() < n) {
			fprintf(stderr, "client_workers: %u workers need %u ports (one session per "
					"port), EAL has %u\n", n, n, rte_eth_dev_count_avail());
			return 2;
		}
		c.transport = SIGMA_TRANSPORT_DPDK;
		c.local_addr = getenv("SIGMA_LOCAL_IP");
		if (getenv("SIGMA_MEMIF_QUEUES") != NULL)
			c.dpdk_rx_queues = (uint16_t)atoi(getenv("SIGMA_MEMIF_QUEUES"));
	}
	if (getenv("SIGMA_FIRST_ROUND") != NULL)
		c.first_round = (uint32_t)atoi(getenv("SIGMA_FIRST_ROUND"));
	if (getenv("SIGMA_STEER_REDUCERS") != NULL)
		c.steer_reducers = (uint16_t)atoi(getenv("SIGMA_STEER_REDUCERS"));
	g.nnodes = 1;
	g.nodes[0] = (struct sigma_node){.addr = argv[1], .port = (uint16_t)atoi(argv[2])};
	if (cu_sessions(&g, n, &c) < 0) {
		fprintf(stderr, "client_workers: open: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned int r = 0; r < n; r++) {
		t[r] = sigma_tensor_register(g.s[r], "t0", 0, SG_DTYPE_FP32, ne, 0);
		in[r] = malloc(ne * 4);
		out[r] = malloc(ne * 4);
		if (t[r] == NULL || in[r] == NULL || out[r] == NULL)
			return 1;
	}
	for (unsigned int k = 0; k < rounds; k++) {
		for (unsigned int r = 0; r < n; r++) {
			for (uint64_t i = 0; i < ne; i++)
				in[r][i] = (float)((i + k) % 1000) * (float)(r + 1);
			SG_CHECK_EQ(sigma_push_pull(t[r], in[r], out[r], NULL, NULL), 0);
		}
		cu_drive(&g, t, n);
		for (unsigned int r = 0; r < n; r++) {
			SG_CHECK(sigma_test(t[r]) == 0, "rank %u round %u: %s", r, k,
				 sigma_last_error(g.s[r]));
			for (uint64_t i = 0; i < ne; i++)
				bad += out[r][i] != (float)((i + k) % 1000) * (float)(n * (n + 1) / 2);
		}
	}
	SG_CHECK(bad == 0, "%zu elements differ from the exact sum", bad);
	for (unsigned int r = 0; r < n; r++) {
		struct sigma_stats st;

		sigma_get_stats(g.s[r], &st);
		printf("rank %u: %" PRIu64 " pushes sent, %" PRIu64 " results, %" PRIu64
		       " retransmits, %" PRIu64 " nacks\n", r, st.tx_packets, st.rx_results,
		       st.retransmits, st.nacks);
		free(in[r]);
		free(out[r]);
	}
	cu_free(&g);
	if (getenv("SIGMA_EAL") != NULL)
		rte_eal_cleanup();
	return sg_test_finish("client_workers");
}
