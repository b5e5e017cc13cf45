/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auth_cost [plain|auth] [N] [CHUNK] [ROUNDS]: what auth = mac costs the node,
 * in instructions per pushed byte, under callgrind:
 *
 *   valgrind --tool=callgrind --toggle-collect=node_rx bench/auth_cost auth 4 4096 20
 *
 * counts only node_rx(), which hands every push, signed beforehand (the
 * workers' cost is not the node's), to sg_dp_engine_rx(): parse, check the
 * MAC (auth), sum, and write and sign N RESULTs per chunk. The same run with
 * "plain" is the baseline: the ratio of the two totals, each divided by the
 * pushed bytes printed here, is the cost. Engine alone: no NIC, no sockets,
 * one RESULT packet per worker (no fan-out) in both.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_auth.h"
#include "sg_dp_engine.h"

#define WINDOW 64

static uint8_t txbuf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];

static void *tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	*pkt = txbuf;
	return txbuf;
}

static void tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	*(uint64_t *)ctx += len;
}

/* What callgrind counts: every pre-built push through the engine. */
__attribute__((noinline)) void node_rx(struct sg_dp_engine *e, uint8_t *pkts, size_t stride,
				       uint32_t len, size_t count, unsigned int n);
__attribute__((noinline)) void node_rx(struct sg_dp_engine *e, uint8_t *pkts, size_t stride,
				       uint32_t len, size_t count, unsigned int n)
{
	for (size_t i = 0; i < count; i++)
		if (sg_dp_engine_rx(e, pkts + i * stride, len, 100 + i % n, i) < 0)
			abort();
}

int main(int argc, char **argv)
{
	bool auth = argc > 1 && strcmp(argv[1], "auth") == 0;
	unsigned int n = argc > 2 ? (unsigned int)atoi(argv[2]) : 4;
	uint32_t chunk = argc > 3 ? (uint32_t)atoi(argv[3]) : 4096;
	unsigned int rounds = argc > 4 ? (unsigned int)atoi(argv[4]) : 20;
	uint8_t key[SG_AUTH_KEY_BYTES];
	struct sg_auth_signer sg[64];
	uint64_t sent = 0;
	struct sg_dp_key k = {.id = 1, .nelem = WINDOW * chunk / 4};
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 4 * WINDOW,
				       .max_payload = SG_MAX_CHUNK_BYTES,
				       .tx = {.alloc = tx_alloc, .send = tx_send, .ctx = &sent}};
	struct sg_dp_job_conf jc = {.id = 1, .nworkers = n, .token = 42, .dtype = SG_DTYPE_FP32,
				    .chunk_bytes = chunk, .keys = &k, .nkeys = 1,
				    .max_inflight = 2 * WINDOW, .partition_bytes = WINDOW * chunk};
	size_t stride = SG_DP_HDR_LEN + chunk + SG_AUTH_TRAILER_BYTES, count;
	uint32_t len = SG_DP_HDR_LEN + chunk + (auth ? SG_AUTH_TRAILER_BYTES : 0);
	struct sg_dp_engine *e;
	uint8_t *pkts;

	if (n < 1 || n > 64 || chunk % 8 || chunk + SG_AUTH_TRAILER_BYTES > SG_MAX_CHUNK_BYTES ||
	    rounds < 1 || sg_auth_job_key(key) < 0) {
		fprintf(stderr, "usage: auth_cost [plain|auth] [N 1..64] [CHUNK] [ROUNDS]\n");
		return 2;
	}
	if (auth)
		jc.auth_key = key;
	count = (size_t)rounds * WINDOW * n;
	pkts = malloc(count * stride);
	e = sg_dp_engine_create(&ec);
	if (pkts == NULL || e == NULL || sg_dp_engine_add_job(e, &jc) != 0)
		return 1;
	for (unsigned int r = 0; r < n; r++) {
		uint8_t rk[SG_AUTH_KEY_BYTES];

		sg_auth_rank_key(key, (uint16_t)r, SG_AUTH_RANK, rk);
		sg_auth_signer_init(&sg[r], rk, sg_auth_key_id(key));
	}
	/* round by round, a window of chunks, ranks interleaved: as bench_engine's order */
	for (size_t i = 0; i < count; i++) {
		unsigned int rank = (unsigned int)(i % n);
		uint32_t c = (uint32_t)(i / n % WINDOW), round = (uint32_t)(i / n / WINDOW);
		uint8_t *p = pkts + i * stride;
		struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .dtype = SG_DTYPE_FP32, .job = 1,
				      .token = 42, .rank = (uint16_t)rank, .key = 1, .chunk = c,
				      .nchunks = WINDOW, .round = round, .nelem = chunk / 4,
				      .offset = c * chunk, .flags = auth ? SG_DP_F_MAC : 0};

		sg_dp_build_hdr(p, &m);
		for (uint32_t j = 0; j < chunk / 4; j++) {
			float f = (float)((i + j) % 17);

			memcpy(p + SG_DP_HDR_LEN + 4 * j, &f, 4);
		}
		if (auth)
			sg_auth_sign(&sg[rank], p, SG_DP_HDR_LEN + chunk);
	}
	node_rx(e, pkts, stride, len, count, n);
	printf("{\"bench\": \"auth_cost\", \"auth\": %s, \"n\": %u, \"chunk_bytes\": %u, "
	       "\"pushes\": %zu, \"pushed_bytes\": %zu, \"result_bytes_sent\": %llu}\n",
	       auth ? "true" : "false", n, chunk, count, count * chunk, (unsigned long long)sent);
	sg_dp_engine_destroy(e);
	free(pkts);
	return 0;
}
