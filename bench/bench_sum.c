/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench sum [--quick] [--runs N] [--json FILE]
 *
 * GB/s of input consumed by sg_sum_addk() per dtype, implementation and k
 * (2, 4, 8), for cache-hot inputs (4 MiB of input per call, L3-resident) and
 * DRAM-cold inputs (64 MiB of input per call, twice the L3). In the same run
 * it measures two references: the single-core streaming read bandwidth (the
 * physical bound) and BytePS's reducer as a plain loop built at -O3
 * -march=native (bench_sum_base.c). Every figure is the median of N runs.
 * It ends with the targets, the measured ratio and met/missed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_sum.h"
#include "sigma_bench.h"

#define HOT_BYTES ((size_t)4 << 20)
#define COLD_BYTES ((size_t)64 << 20)
#define MAX_ROWS 512
#define MAX_RUNS 101
#define HOT_RUN_SECONDS 0.004 /* repeat hot calls until one run lasts this long */

static const unsigned int bench_ks[] = {2, 4, 8};
#define NKS (sizeof(bench_ks) / sizeof(bench_ks[0]))

enum job_kind { JOB_SIGMA, JOB_PLAIN, JOB_READ };

struct job {
	enum job_kind kind;
	enum sg_dtype dt;
	unsigned int flags;
	unsigned int k;
	size_t n;
	void *dst;
	const void *src[8];
};

struct row {
	const char *dtype;
	const char *mode; /* "fp32acc", "native" or "-" */
	const char *impl; /* scalar, avx2, avx512, plain */
	const char *cache;
	unsigned int k;
	double in_gbs;	    /* input consumed */
	double traffic_gbs; /* k reads + 1 write */
};

struct bench {
	unsigned int runs;
	bool quick;
	const char *json;
	uint8_t *hot_in, *hot_out, *cold_in, *cold_out;
	double read_gbs;     /* cold: streaming read of COLD_BYTES from DRAM */
	double read_hot_gbs; /* hot: repeated read of HOT_BYTES from cache */
	struct row rows[MAX_ROWS];
	unsigned int nrows;
	volatile uint64_t sink;
};

static void run_job(struct bench *b, const struct job *j)
{
	switch (j->kind) {
	case JOB_SIGMA:
		if (sg_sum_addk(j->dt, j->dst, j->src, j->k, j->n, j->flags) != 0)
			abort(); /* arguments are built here: a failure is a bug */
		break;
	case JOB_PLAIN:
		bench_plain_sum(j->dt, j->dst, j->src, j->k, j->n);
		break;
	case JOB_READ:
		b->sink += bench_read_stream(j->src[0], j->n);
		break;
	}
}

/* Median seconds per call. Hot jobs repeat within a run to outlast the clock's noise. */
static double time_job(struct bench *b, const struct job *j, bool hot)
{
	double t[MAX_RUNS], t0, once;
	unsigned int reps = 1;

	t0 = sigma_bench_now();
	run_job(b, j); /* warm-up: page faults, caches, frequency */
	once = sigma_bench_now() - t0;
	if (hot && once < HOT_RUN_SECONDS)
		reps = (unsigned int)(HOT_RUN_SECONDS / (once > 1e-7 ? once : 1e-7)) + 1;
	for (unsigned int r = 0; r < b->runs; r++) {
		t0 = sigma_bench_now();
		for (unsigned int i = 0; i < reps; i++)
			run_job(b, j);
		t[r] = (sigma_bench_now() - t0) / reps;
	}
	return sigma_bench_median(t, b->runs);
}

/* Deterministic, finite, non-denormal values: timing must not depend on data. */
static void fill(enum sg_dtype dt, uint8_t *p, size_t bytes)
{
	size_t sz = sg_dtype_size(dt), n = bytes / sz;

	for (size_t i = 0; i < n; i++) {
		float f = (float)(i % 1000) * 0.001f - 0.5f;
		uint64_t u = i * 0x9e3779b97f4a7c15ull;
		double d = f;
		uint16_t h = dt == SG_DTYPE_FP16 ? sg_fp32_to_fp16(f) : sg_fp32_to_bf16(f);

		switch (dt) {
		case SG_DTYPE_FP32:
			memcpy(p + i * sz, &f, sz);
			break;
		case SG_DTYPE_FP64:
			memcpy(p + i * sz, &d, sz);
			break;
		case SG_DTYPE_FP16:
		case SG_DTYPE_BF16:
			memcpy(p + i * sz, &h, sz);
			break;
		default:
			memcpy(p + i * sz, &u, sz);
			break;
		}
	}
}

static void add_row(struct bench *b, const struct job *j, const char *mode, const char *impl,
		    const char *cache, double secs)
{
	struct row *r = &b->rows[b->nrows < MAX_ROWS ? b->nrows++ : MAX_ROWS - 1];
	double in_bytes = (double)j->k * (double)j->n * (double)sg_dtype_size(j->dt);

	r->dtype = sg_dtype_name(j->dt);
	r->mode = mode;
	r->impl = impl;
	r->cache = cache;
	r->k = j->k;
	r->in_gbs = in_bytes / secs * 1e-9;
	r->traffic_gbs = in_bytes * (j->k + 1) / j->k / secs * 1e-9;
}

static const struct row *find_row(const struct bench *b, const char *dtype, const char *mode,
				  const char *impl, const char *cache, unsigned int k)
{
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];

		if (strcmp(r->dtype, dtype) == 0 && strcmp(r->mode, mode) == 0 &&
		    strcmp(r->impl, impl) == 0 && strcmp(r->cache, cache) == 0 && r->k == k)
			return r;
	}
	return NULL;
}

/* Every implementation and the plain loop for one dtype/mode, hot and cold, each k. */
static void bench_dtype(struct bench *b, enum sg_dtype dt, unsigned int flags)
{
	const bool wide = dt == SG_DTYPE_FP16 || dt == SG_DTYPE_BF16;
	const char *mode = !wide ? "-" : (flags & SG_SUM_F_NATIVE) ? "native" : "fp32acc";
	size_t sz = sg_dtype_size(dt);

	fill(dt, b->hot_in, HOT_BYTES);
	fill(dt, b->cold_in, COLD_BYTES);
	for (unsigned int c = 0; c < 2; c++) {
		const bool hot = c == 0;
		uint8_t *in = hot ? b->hot_in : b->cold_in;
		size_t total = hot ? HOT_BYTES : COLD_BYTES;

		for (unsigned int ki = 0; ki < NKS; ki++) {
			struct job j = {.dt = dt, .flags = flags, .k = bench_ks[ki]};

			j.n = total / j.k / sz;
			j.dst = hot ? b->hot_out : b->cold_out;
			for (unsigned int s = 0; s < j.k; s++)
				j.src[s] = in + s * (total / j.k);
			for (enum sg_sum_impl impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT;
			     impl++) {
				if (!sg_sum_impl_supported(impl) || sg_sum_set_impl(impl) != 0)
					continue;
				j.kind = JOB_SIGMA;
				add_row(b, &j, mode, sg_sum_impl_name(impl), hot ? "hot" : "cold",
					time_job(b, &j, hot));
			}
			/* BytePS rounds every partial sum: the plain loop has no fp32acc mode. */
			j.kind = JOB_PLAIN;
			add_row(b, &j, mode, "plain", hot ? "hot" : "cold", time_job(b, &j, hot));
		}
	}
	sg_sum_set_impl(SG_SUM_IMPL_AUTO);
}

/* Single-core sequential read rate of the hot or the cold input buffer. */
static double read_bound(struct bench *b, bool hot)
{
	size_t bytes = hot ? HOT_BYTES : COLD_BYTES;
	struct job j = {.kind = JOB_READ, .n = bytes, .src = {hot ? b->hot_in : b->cold_in}};

	return (double)bytes / time_job(b, &j, hot) * 1e-9;
}

/*
 * want: the target; got: measured ratio; ceiling: the most any kernel
 * could reach here (inputs read at the hot read bound), 0 if not applicable.
 */
struct target {
	const char *what;
	double want, got, ceiling;
};

/* The targets, judged on the best implementation this CPU runs. */
static unsigned int judge(const struct bench *b, struct target *t)
{
	const char *best = sg_sum_impl_name(sg_sum_get_impl());
	const struct row *r, *p;
	unsigned int n = 0;

	r = find_row(b, "fp32", "-", best, "cold", 4);
	if (r != NULL)
		t[n++] = (struct target){"cold fp32 k=4: (k+1) x bytes / time vs streaming read",
					 0.85, r->traffic_gbs / b->read_gbs, 0};
	for (unsigned int ki = 0; ki < NKS; ki++) {
		static const char *const names[2][NKS] = {
			{"hot fp16 k=2 vs plain loop", "hot fp16 k=4 vs plain loop",
			 "hot fp16 k=8 vs plain loop"},
			{"hot bf16 k=2 vs plain loop", "hot bf16 k=4 vs plain loop",
			 "hot bf16 k=8 vs plain loop"}};

		for (unsigned int d = 0; d < 2; d++) {
			const char *dt = d ? "bf16" : "fp16";

			r = find_row(b, dt, "fp32acc", best, "hot", bench_ks[ki]);
			p = find_row(b, dt, "fp32acc", "plain", "hot", bench_ks[ki]);
			if (r != NULL && p != NULL)
				t[n++] = (struct target){names[d][ki], 5.0, r->in_gbs / p->in_gbs,
							 b->read_hot_gbs / p->in_gbs};
		}
	}
	r = find_row(b, "fp32", "-", best, "hot", 8);
	p = find_row(b, "fp32", "-", "plain", "hot", 8);
	if (r != NULL && p != NULL)
		t[n++] = (struct target){"hot fp32 k=8 vs plain loop", 2.0, r->in_gbs / p->in_gbs,
					 b->read_hot_gbs / p->in_gbs};
	return n;
}

static void print_table(const struct bench *b, const struct target *t, unsigned int nt)
{
	const char *best = sg_sum_impl_name(sg_sum_get_impl());

	printf("sigma-bench sum: GB/s of input consumed, median of %u runs (%s)\n", b->runs,
	       b->quick ? "quick" : "full");
	printf("input per call: hot %zu MiB (in L3), cold %zu MiB (2x L3); 1-core read bound: "
	       "hot %.2f GB/s, cold %.2f GB/s\n",
	       HOT_BYTES >> 20, COLD_BYTES >> 20, b->read_hot_gbs, b->read_gbs);
	printf("plain = BytePS-style loop at -O3 -march=native (one pass per input); "
	       "traffic/rd = (k+1) x n x size / time / read bound of the same cache level\n\n");
	printf("%-6s %-8s %-5s %2s %9s %9s %9s %9s %10s %10s\n", "dtype", "mode", "cache", "k",
	       "scalar", "avx2", "avx512", "plain", "best/plain", "traffic/rd");
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i], *x, *p;
		static const char *const impls[] = {"scalar", "avx2", "avx512"};

		if (strcmp(r->impl, "plain") != 0)
			continue;
		printf("%-6s %-8s %-5s %2u", r->dtype, r->mode, r->cache, r->k);
		for (unsigned int m = 0; m < 3; m++) {
			x = find_row(b, r->dtype, r->mode, impls[m], r->cache, r->k);
			if (x != NULL)
				printf(" %9.2f", x->in_gbs);
			else
				printf(" %9s", "-");
		}
		p = r;
		x = find_row(b, r->dtype, r->mode, best, r->cache, r->k);
		printf(" %9.2f", p->in_gbs);
		if (x != NULL)
			printf(" %9.2fx %9.2fx\n", x->in_gbs / p->in_gbs,
			       x->traffic_gbs /
				       (strcmp(r->cache, "hot") ? b->read_gbs : b->read_hot_gbs));
		else
			printf("\n");
	}
	printf("\ntargets (best implementation: %s; shared, noisy machines read low):\n", best);
	for (unsigned int i = 0; i < nt; i++) {
		printf("  %-56s >= %4.2fx  measured %6.2fx  %-6s", t[i].what, t[i].want, t[i].got,
		       t[i].got >= t[i].want ? "met" : "MISSED");
		if (t[i].ceiling > 0)
			printf("  (ceiling here %.2fx: hot read bound / plain)", t[i].ceiling);
		printf("\n");
	}
}

static void print_json(FILE *f, const struct bench *b, const struct target *t, unsigned int nt)
{
	fprintf(f, "{\"bench\": \"sum\", \"quick\": %s, \"runs\": %u, \"best_impl\": \"%s\",\n",
		b->quick ? "true" : "false", b->runs, sg_sum_impl_name(sg_sum_get_impl()));
	fprintf(f, " \"hot_input_bytes\": %zu, \"cold_input_bytes\": %zu,\n", HOT_BYTES,
		COLD_BYTES);
	fprintf(f, " \"read_bound_gbs\": {\"hot\": %.3f, \"cold\": %.3f},\n", b->read_hot_gbs,
		b->read_gbs);
	fprintf(f, " \"results\": [\n");
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];

		fprintf(f,
			"  {\"dtype\": \"%s\", \"mode\": \"%s\", \"impl\": \"%s\", \"cache\": "
			"\"%s\", "
			"\"k\": %u, \"input_gbs\": %.3f, \"traffic_gbs\": %.3f}%s\n",
			r->dtype, r->mode, r->impl, r->cache, r->k, r->in_gbs, r->traffic_gbs,
			i + 1 < b->nrows ? "," : "");
	}
	fprintf(f, " ],\n \"targets\": [\n");
	for (unsigned int i = 0; i < nt; i++)
		fprintf(f,
			"  {\"what\": \"%s\", \"target\": %.2f, \"measured\": %.3f, \"met\": %s, "
			"\"ceiling\": %.3f}%s\n",
			t[i].what, t[i].want, t[i].got, t[i].got >= t[i].want ? "true" : "false",
			t[i].ceiling, i + 1 < nt ? "," : "");
	fprintf(f, " ]}\n");
}

static int usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: sigma-bench sum [--quick] [--runs N] [--json FILE]\n"
		"  --quick      fp32, fp16 and bf16 only, 5 runs (what ./sigma demo runs)\n"
		"  --runs N     runs per figure, 5..%d (default 5 quick, 7 full)\n"
		"  --json FILE  write the JSON there instead of after the table on stdout\n",
		MAX_RUNS);
	return rc;
}

static int parse(struct bench *b, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "--quick") == 0) {
			b->quick = true;
		} else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
			long v = strtol(argv[++i], &end, 10);

			if (*end != '\0' || v < 5 || v > MAX_RUNS) {
				fprintf(stderr, "sigma-bench sum: --runs wants 5..%d, not '%s'\n",
					MAX_RUNS, argv[i]);
				return -EINVAL;
			}
			b->runs = (unsigned int)v;
		} else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			b->json = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return 1;
		} else {
			fprintf(stderr, "sigma-bench sum: unknown or incomplete option '%s'\n",
				argv[i]);
			return -EINVAL;
		}
	}
	if (b->runs == 0)
		b->runs = b->quick ? 5 : 7;
	return 0;
}

int sigma_bench_sum(int argc, char **argv)
{
	static const struct {
		enum sg_dtype dt;
		unsigned int flags;
		bool quick;
	} sets[] = {
		{SG_DTYPE_FP32, 0, true},
		{SG_DTYPE_FP16, 0, true},
		{SG_DTYPE_BF16, 0, true},
		{SG_DTYPE_FP16, SG_SUM_F_NATIVE, false},
		{SG_DTYPE_BF16, SG_SUM_F_NATIVE, false},
		{SG_DTYPE_FP64, 0, false},
		{SG_DTYPE_INT32, 0, false},
		{SG_DTYPE_INT64, 0, false},
		{SG_DTYPE_INT8, 0, false},
		{SG_DTYPE_UINT8, 0, false},
	};
	struct bench *b = calloc(1, sizeof(*b));
	struct target t[16];
	unsigned int nt;
	int rc;

	if (b == NULL)
		return 1;
	rc = parse(b, argc, argv);
	if (rc != 0) {
		free(b);
		return usage(rc < 0 ? 2 : 0);
	}
	if (sg_sum_init() != 0) {
		fprintf(stderr, "sigma-bench sum: the summation library did not initialise\n");
		free(b);
		return 1;
	}
	b->hot_in = sg_sum_numa_alloc(HOT_BYTES, -1);
	b->hot_out = sg_sum_numa_alloc(HOT_BYTES, -1);
	b->cold_in = sg_sum_numa_alloc(COLD_BYTES, -1);
	b->cold_out = sg_sum_numa_alloc(COLD_BYTES / 2, -1);
	if (b->hot_in == NULL || b->hot_out == NULL || b->cold_in == NULL || b->cold_out == NULL) {
		fprintf(stderr, "sigma-bench sum: cannot allocate %zu MiB\n",
			(2 * HOT_BYTES + COLD_BYTES * 3 / 2) >> 20);
		rc = 1;
		goto out;
	}
	/* Untouched pages all map the zero page, which would read from cache. */
	fill(SG_DTYPE_FP32, b->cold_in, COLD_BYTES);
	fill(SG_DTYPE_FP32, b->hot_in, HOT_BYTES);
	b->read_gbs = read_bound(b, false);
	b->read_hot_gbs = read_bound(b, true);
	for (unsigned int s = 0; s < sizeof(sets) / sizeof(sets[0]); s++)
		if (sets[s].quick || !b->quick)
			bench_dtype(b, sets[s].dt, sets[s].flags);
	nt = judge(b, t);
	print_table(b, t, nt);
	if (b->json != NULL) {
		FILE *f = fopen(b->json, "w");

		if (f == NULL) {
			fprintf(stderr, "sigma-bench sum: cannot write %s: %s\n", b->json,
				strerror(errno));
			rc = 1;
			goto out;
		}
		print_json(f, b, t, nt);
		fclose(f);
	} else {
		printf("\n");
		print_json(stdout, b, t, nt);
	}
out:
	sg_sum_numa_free(b->hot_in, HOT_BYTES);
	sg_sum_numa_free(b->hot_out, HOT_BYTES);
	sg_sum_numa_free(b->cold_in, COLD_BYTES);
	sg_sum_numa_free(b->cold_out, COLD_BYTES / 2);
	free(b);
	return rc;
}
