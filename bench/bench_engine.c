/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench engine [--quick] [--fanout] [--auth] [--runs N] [--json FILE]
 *
 * Throughput of the aggregation engine alone, on one core: pre-built PUSH
 * packets of N workers go through sg_dp_engine_rx(), which parses,
 * validates, sums and writes N RESULT packets per chunk into rotating tx
 * buffers (as a DPDK lcore would into mbufs). Reported: chunks/s and GB/s of
 * pushed payload aggregated, per dtype (fp32, bf16), N (2, 4, 8) and chunk
 * payload (1, 4, 8 KiB).
 *
 * With --fanout the engine gets the fan-out tx ops: each completed chunk's
 * RESULT is written once, and send_multi writes N 48-byte header copies
 * (with their rank) into rotating header buffers, as a DPDK caller fills N
 * header mbufs chained to one payload mbuf.
 *
 * With --auth the job has auth = mac (sg_dp_job_conf.auth_key): each push is
 * signed with its rank's key just before the engine gets it (so the figures
 * include the workers' signing; callgrind with --toggle-collect=sg_dp_engine_rx
 * counts the node's side alone), and every RESULT is signed per worker.
 *
 * Arrival order: workers push a window of 64 chunks, interleaved by rank,
 * as concurrent workers would; the next round reuses the same chunks.
 *
 * In the same run, two references on the same buffers and order:
 *  - "kernel": the summation work only (sg_sum_acc_init/add, N x acc_final
 *    into the same tx buffers) with no protocol; engine / kernel is the cost
 *    of the protocol;
 *  - "read": streaming read of the pushed payloads (the physical bound).
 * Each run times all three back to back; every figure is the median of N
 * runs, ratios the median of per-run ratios. Target (issue 3): >= 25 Gbps of
 * pushed fp32 data per core at 4 KiB chunks.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>

#include "bench_sum.h"
#include "sg_auth.h"
#include "sg_dp_engine.h"
#include "sigma_bench.h"

#define WINDOW 64      /* chunks in flight */
#define TX_BUFS 256    /* rotating tx buffers, like an mbuf cache */
#define MAX_RUNS 101
#define RUN_SECONDS 0.05
#define TARGET_GBPS 25.0

static const unsigned int bench_ns[] = {2, 4, 8};
static const uint32_t bench_chunks[] = {1024, 4096, 8192};
static const enum sg_dtype bench_dts[] = {SG_DTYPE_FP32, SG_DTYPE_BF16};
#define NNS (sizeof(bench_ns) / sizeof(bench_ns[0]))
#define NCHUNKS (sizeof(bench_chunks) / sizeof(bench_chunks[0]))
#define NDTS (sizeof(bench_dts) / sizeof(bench_dts[0]))
#define NROWS (NNS * NCHUNKS * NDTS)

struct row {
	enum sg_dtype dt;
	unsigned int n;
	uint32_t chunk;
	double chunks_s;   /* pushed chunks aggregated per second (engine) */
	double gbs;        /* GB/s of pushed payload (engine) */
	double kernel_gbs; /* same, summation kernels only */
	double read_gbs;   /* streaming read of the same payloads */
	double ratio_kernel, ratio_read; /* medians of per-run ratios */
};

struct tx {
	uint8_t *bufs;
	unsigned int next;
	uint64_t bytes;
	uint8_t hdrs[TX_BUFS][SG_DP_HDR_LEN]; /* --fanout: the per-worker header copies */
	unsigned int next_hdr;
};

struct bench {
	unsigned int runs;
	bool quick;
	bool fanout;
	bool auth;
	const char *json;
	struct row rows[NROWS];
	unsigned int nrows;
};

static void *tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct tx *t = ctx;
	uint8_t *b = t->bufs + (size_t)(t->next++ % TX_BUFS) * (SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD);

	*pkt = b;
	return b;
}

static void tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct tx *t = ctx;

	t->bytes += len;
}

static void *tx_alloc_multi(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
			    uint32_t len, void **pkt)
{
	(void)to;
	(void)n;
	return tx_alloc(ctx, 0, len, pkt);
}

static unsigned int tx_send_multi(void *ctx, void *pkt, uint32_t len,
				  const struct sg_dp_tx_dest *to, unsigned int n)
{
	struct tx *t = ctx;

	for (unsigned int i = 0; i < n; i++) {
		uint8_t *h = t->hdrs[t->next_hdr++ % TX_BUFS];

		memcpy(h, pkt, SG_DP_HDR_LEN);
		sg_dp_hdr_set_rank(h, to[i].rank);
		t->bytes += len;
	}
	return n;
}

static uint64_t splitmix_next(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One configuration: N x WINDOW pre-built pushes, [rank][chunk]; the round is patched in. */
struct setup {
	enum sg_dtype dt;
	unsigned int n;
	uint32_t chunk;
	uint32_t nelem; /* per chunk */
	size_t pkt_stride;
	uint8_t *pkts; /* n * WINDOW packets */
	struct sg_dp_engine *e;
	struct tx tx;
	void *acc[WINDOW]; /* for the kernel reference */
	bool auth;
	struct sg_auth_signer signer[8]; /* --auth: each rank's */
};

static int setup_init(struct setup *s, enum sg_dtype dt, unsigned int n, uint32_t chunk,
		      bool fanout, bool auth)
{
	static uint8_t job_key[SG_AUTH_KEY_BYTES];
	struct sg_dp_key key = {.id = 1};
	struct sg_dp_engine_conf ec = {
		.numa_node = -1, .pool_bufs = 4 * WINDOW, .max_payload = SG_MAX_CHUNK_BYTES,
		.tx = {.alloc = tx_alloc, .send = tx_send, .ctx = &s->tx},
	};
	struct sg_dp_job_conf jc = {
		.id = 1, .nworkers = n, .token = 42, .dtype = dt, .chunk_bytes = chunk,
		.keys = &key, .nkeys = 1, .max_inflight = 2 * WINDOW,
		.partition_bytes = WINDOW * chunk,
	};
	size_t esz = sg_dtype_size(dt);
	uint64_t x = 1;

	memset(s, 0, sizeof(*s));
	s->auth = auth;
	if (auth) {
		if (sg_auth_job_key(job_key) < 0)
			return -ENOMEM;
		jc.auth_key = job_key;
		for (unsigned int r = 0; r < n && r < 8; r++) {
			uint8_t rk[SG_AUTH_KEY_BYTES];

			sg_auth_rank_key(job_key, (uint16_t)r, SG_AUTH_RANK, rk);
			sg_auth_signer_init(&s->signer[r], rk, sg_auth_key_id(job_key));
		}
	}
	if (fanout) {
		ec.tx.alloc_multi = tx_alloc_multi;
		ec.tx.send_multi = tx_send_multi;
	}
	s->dt = dt;
	s->n = n;
	s->chunk = chunk;
	s->nelem = chunk / (uint32_t)esz;
	key.nelem = WINDOW * s->nelem;
	/* room for a trailer; not a power of two: no cache aliasing */
	s->pkt_stride = SG_DP_HDR_LEN + chunk + SG_AUTH_TRAILER_BYTES + 16;
	s->pkts = sg_sum_numa_alloc(s->pkt_stride * n * WINDOW, -1);
	s->tx.bufs = sg_sum_numa_alloc((size_t)TX_BUFS * (SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD), -1);
	if (s->pkts == NULL || s->tx.bufs == NULL)
		return -ENOMEM;
	s->e = sg_dp_engine_create(&ec);
	if (s->e == NULL || sg_dp_engine_add_job(s->e, &jc) != 0)
		return -EINVAL;
	for (unsigned int r = 0; r < n; r++) {
		for (uint32_t c = 0; c < WINDOW; c++) {
			uint8_t *p = s->pkts + s->pkt_stride * (r * WINDOW + c);
			struct sg_dp_msg m = {
				.type = SG_DP_T_PUSH, .dtype = (uint8_t)dt, .job = 1, .token = 42,
				.rank = (uint16_t)r, .key = 1, .chunk = c, .nchunks = WINDOW,
				.nelem = s->nelem, .offset = c * chunk,
				.flags = auth ? SG_DP_F_MAC : 0,
			};

			sg_dp_build_hdr(p, &m);
			/* Small values: sums stay finite in bf16 as in fp32. */
			for (uint32_t i = 0; i < s->nelem; i++) {
				uint8_t *e = p + SG_DP_HDR_LEN + i * esz;
				float f = (float)(int)(splitmix_next(&x) % 2001 - 1000) / 1024.0f;

				if (dt == SG_DTYPE_FP32) {
					memcpy(e, &f, 4);
				} else {
					uint16_t b = sg_fp32_to_bf16(f);

					memcpy(e, &b, 2);
				}
			}
		}
	}
	for (uint32_t c = 0; c < WINDOW; c++) {
		s->acc[c] = sg_sum_numa_alloc(sg_dp_engine_buf_size(s->e), -1);
		if (s->acc[c] == NULL)
			return -ENOMEM;
	}
	return 0;
}

static void setup_free(struct setup *s)
{
	size_t bsz = s->e != NULL ? sg_dp_engine_buf_size(s->e) : 0;

	for (uint32_t c = 0; c < WINDOW; c++)
		sg_sum_numa_free(s->acc[c], bsz);
	sg_dp_engine_destroy(s->e);
	sg_sum_numa_free(s->pkts, s->pkt_stride * s->n * WINDOW);
	sg_sum_numa_free(s->tx.bufs, (size_t)TX_BUFS * (SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD));
}

static uint8_t *pkt_at(const struct setup *s, unsigned int rank, uint32_t c)
{
	return s->pkts + s->pkt_stride * (rank * WINDOW + c);
}

enum what { ENGINE, KERNEL, READ };

/* One round over the window, rank by rank (all WINDOW accumulators open at once). */
static void one_round(struct setup *s, enum what w, uint32_t round, volatile uint64_t *sink)
{
	uint32_t be = htobe32(round);
	size_t plen = (size_t)s->nelem * sg_dtype_size(s->dt);

	for (unsigned int r = 0; r < s->n; r++) {
		for (uint32_t c = 0; c < WINDOW; c++) {
			uint8_t *p = pkt_at(s, r, c);

			switch (w) {
			case ENGINE:
				memcpy(p + offsetof(struct sg_dp_wire_hdr, round), &be, 4);
				if (s->auth)
					sg_auth_sign(&s->signer[r], p, SG_DP_HDR_LEN + plen);
				sg_dp_engine_rx(s->e, p, (uint32_t)(SG_DP_HDR_LEN + plen +
						(s->auth ? SG_AUTH_TRAILER_BYTES : 0)), 100 + r, round);
				break;
			case KERNEL:
				if (r == 0)
					sg_sum_acc_init(s->dt, 0, s->acc[c], p + SG_DP_HDR_LEN,
							s->nelem);
				else
					sg_sum_acc_add(s->dt, 0, s->acc[c], p + SG_DP_HDR_LEN,
						       s->nelem);
				if (r + 1 == s->n) {
					for (unsigned int k = 0; k < s->n; k++) {
						void *pk, *b = tx_alloc(&s->tx, k, 0, &pk);

						sg_sum_acc_final(s->dt, 0,
								 (uint8_t *)b + SG_DP_HDR_LEN,
								 s->acc[c], s->nelem);
					}
				}
				break;
			default:
				*sink += bench_read_stream(p + SG_DP_HDR_LEN, plen);
				break;
			}
		}
	}
}

/* GB/s of pushed payload in one run of about RUN_SECONDS. */
static double measure_once(struct setup *s, enum what w, uint32_t *round)
{
	volatile uint64_t sink = 0;
	size_t round_bytes = (size_t)s->n * WINDOW * s->nelem * sg_dtype_size(s->dt);
	double t0 = sigma_bench_now(), t;
	unsigned long rounds = 0;

	do {
		one_round(s, w, (*round)++, &sink);
		rounds++;
		t = sigma_bench_now() - t0;
	} while (t < RUN_SECONDS);
	return (double)rounds * (double)round_bytes / t / 1e9;
}

/*
 * Each run times the engine and both references back to back, so that a
 * neighbour's noise hits all three alike; ratios are medians of per-run ratios.
 */
static int bench_one(struct bench *b, enum sg_dtype dt, unsigned int n, uint32_t chunk)
{
	double eng[MAX_RUNS], ker[MAX_RUNS], rd[MAX_RUNS], rk[MAX_RUNS], rr[MAX_RUNS];
	struct setup s;
	struct row *row = &b->rows[b->nrows];
	struct sg_dp_stats st;
	volatile uint64_t sink = 0;
	uint32_t round = 0, unused = 0; /* the engine's rounds must follow each other */
	int rc = setup_init(&s, dt, n, chunk, b->fanout, b->auth);

	if (rc != 0) {
		fprintf(stderr, "sigma-bench engine: setup failed: %s\n", strerror(-rc));
		setup_free(&s);
		return rc;
	}
	for (enum what w = ENGINE; w <= READ; w++)
		one_round(&s, w, w == ENGINE ? round++ : 0, &sink); /* warm-up */
	for (unsigned int i = 0; i < b->runs; i++) {
		eng[i] = measure_once(&s, ENGINE, &round);
		ker[i] = measure_once(&s, KERNEL, &unused);
		rd[i] = measure_once(&s, READ, &unused);
		rk[i] = eng[i] / ker[i];
		rr[i] = eng[i] / rd[i];
	}
	row->dt = dt;
	row->n = n;
	row->chunk = chunk;
	row->gbs = sigma_bench_median(eng, b->runs);
	row->chunks_s = row->gbs * 1e9 / chunk;
	row->kernel_gbs = sigma_bench_median(ker, b->runs);
	row->read_gbs = sigma_bench_median(rd, b->runs);
	row->ratio_kernel = sigma_bench_median(rk, b->runs);
	row->ratio_read = sigma_bench_median(rr, b->runs);
	/* Every engine round must have completed every chunk, with nothing dropped. */
	sg_dp_engine_stats(s.e, &st);
	if (st.rx_pushes != st.rx_packets || st.nacks_sent != 0 || st.tx_fail != 0 ||
	    st.rounds_completed * n != st.rx_pushes) {
		fprintf(stderr, "sigma-bench engine: the engine did not take every push "
			"(%" PRIu64 " of %" PRIu64 ", %" PRIu64 " NACKs)\n",
			st.rx_pushes, st.rx_packets, st.nacks_sent);
		rc = -EIO;
	}
	setup_free(&s);
	b->nrows++;
	return rc;
}

static void print_table(const struct bench *b)
{
	printf("sigma-bench engine: one core, impl %s, window %d chunks, %s, median of %u runs\n",
	       sg_sum_impl_name(sg_sum_get_impl()), WINDOW,
	       b->fanout ? "RESULT fan-out" : "one RESULT packet per worker", b->runs);
	printf("%-5s %2s %6s %10s %8s %7s %10s %8s %9s %8s\n", "dtype", "N", "chunk",
	       "Mchunks/s", "GB/s", "Gbps", "kernel", "engine/", "read", "engine/");
	printf("%-5s %2s %6s %10s %8s %7s %10s %8s %9s %8s\n", "", "", "bytes", "", "pushed",
	       "pushed", "GB/s", "kernel", "GB/s", "read");
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];

		printf("%-5s %2u %6u %10.3f %8.2f %7.1f %10.2f %8.2f %9.2f %8.2f\n",
		       sg_dtype_name(r->dt), r->n, r->chunk, r->chunks_s / 1e6, r->gbs,
		       r->gbs * 8, r->kernel_gbs, r->ratio_kernel, r->read_gbs, r->ratio_read);
	}
}

/* Lowest fp32 Gbps at 4 KiB chunks over the Ns measured (the target's figure). */
static double target_gbps(const struct bench *b)
{
	double lo = -1;

	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];

		if (r->dt == SG_DTYPE_FP32 && r->chunk == 4096 && (lo < 0 || r->gbs * 8 < lo))
			lo = r->gbs * 8;
	}
	return lo;
}

static void print_json(FILE *f, const struct bench *b)
{
	double tg = target_gbps(b);

	fprintf(f, "{\"bench\": \"engine\", \"impl\": \"%s\", \"window\": %d, "
		"\"fanout\": %s, \"auth\": %s, \"runs\": %u, \"results\": [",
		sg_sum_impl_name(sg_sum_get_impl()), WINDOW, b->fanout ? "true" : "false",
		b->auth ? "true" : "false", b->runs);
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];

		fprintf(f, "%s\n  {\"dtype\": \"%s\", \"n\": %u, \"chunk_bytes\": %u, "
			"\"chunks_per_s\": %.0f, \"gbytes_per_s\": %.3f, \"gbps\": %.2f, "
			"\"kernel_gbytes_per_s\": %.3f, \"ratio_to_kernel\": %.3f, "
			"\"read_bound_gbytes_per_s\": %.3f, \"ratio_to_read_bound\": %.3f}",
			i ? "," : "", sg_dtype_name(r->dt), r->n, r->chunk, r->chunks_s, r->gbs,
			r->gbs * 8, r->kernel_gbs, r->ratio_kernel, r->read_gbs, r->ratio_read);
	}
	fprintf(f, "\n ],\n \"target\": {\"what\": \"fp32, 4096-byte chunks, lowest over N\", "
		"\"min_gbps\": %.1f, \"measured_gbps\": %.2f, \"ratio\": %.3f, "
		"\"met\": %s}}\n", TARGET_GBPS, tg, tg / TARGET_GBPS,
		tg >= TARGET_GBPS ? "true" : "false");
}

static int usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: sigma-bench engine [--quick] [--fanout] [--runs N] [--json FILE]\n"
		"  --quick      fp32 only, 4 KiB chunks, 5 runs\n"
		"  --fanout     give the engine the fan-out tx ops (one RESULT for N workers)\n"
		"  --auth       the job has auth = mac: pushes signed, MACs checked, RESULTs signed\n"
		"  --runs N     runs per figure, median reported (default 7, at least 5)\n"
		"  --json FILE  write the JSON there instead of after the table on stdout\n");
	return rc;
}

int sigma_bench_engine(int argc, char **argv)
{
	static struct bench bench;
	struct bench *b = &bench;
	struct sigma_bench_out out;
	double tg;
	int rc = 0;

	memset(b, 0, sizeof(*b));
	b->runs = 7;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			b->quick = true;
			b->runs = 5;
		} else if (strcmp(argv[i], "--fanout") == 0) {
			b->fanout = true;
		} else if (strcmp(argv[i], "--auth") == 0) {
			b->auth = true;
		} else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
			uint64_t v;

			if (sg_parse_u64(argv[++i], 5, MAX_RUNS, &v) != 0) {
				fprintf(stderr, "sigma-bench engine: --runs must be 5..%d\n",
					MAX_RUNS);
				return 2;
			}
			b->runs = (unsigned int)v;
		} else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			b->json = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return usage(0);
		} else {
			fprintf(stderr, "sigma-bench engine: unknown option '%s'\n", argv[i]);
			return usage(2);
		}
	}
	/* Job notices would interleave with the table. */
	rte_log_set_level_pattern("sigma.dataplane", RTE_LOG_WARNING);
	if (sg_sum_init() != 0)
		return 1;
	for (unsigned int d = 0; d < NDTS && rc == 0; d++)
		for (unsigned int n = 0; n < NNS && rc == 0; n++)
			for (unsigned int c = 0; c < NCHUNKS && rc == 0; c++)
				if (!b->quick || (bench_dts[d] == SG_DTYPE_FP32 &&
						  bench_chunks[c] == 4096))
					rc = bench_one(b, bench_dts[d], bench_ns[n],
						       bench_chunks[c]);
	if (rc != 0)
		return 1;
	print_table(b);
	tg = target_gbps(b);
	printf("target: >= %.0f Gbps of pushed fp32 at 4 KiB chunks per core: %.1f Gbps "
	       "(ratio %.2f) %s\n", TARGET_GBPS, tg, tg / TARGET_GBPS,
	       tg >= TARGET_GBPS ? "met" : "MISSED");
	if (sigma_bench_out_open(&out) < 0)
		return 1;
	print_json(out.f, b);
	return sigma_bench_out_write(&out, b->json) < 0 ? 1 : 0;
}
