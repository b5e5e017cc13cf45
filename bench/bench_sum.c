/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench sum [--quick] [--runs N] [--json FILE]
 *
 * GB/s of input consumed by sg_sum_addk() per dtype, implementation and k
 * (2, 4, 8), for cache-hot inputs (4 MiB of input per call, L3-resident) and
 * DRAM-cold inputs (64 MiB of input per call, twice the L3). In the same run,
 * for each of those configurations, it times two references: a single-core
 * sequential read of the same input bytes (the physical bound) and BytePS's
 * reducer as a plain loop built at -O3 -march=native (bench_sum_base.c).
 *
 * Runs are paired: each run times every implementation, the plain loop and
 * the read back to back, so that a noisy neighbour slows them alike. Time is
 * the thread's CPU time by default (--wall for the wall clock), so that time
 * spent descheduled on a shared machine does not count. Rates
 * are medians over runs; ratios are medians of the per-run ratios. It ends
 * with the targets, the measured ratio and met/missed.
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
#define MAX_JOBS (SG_SUM_IMPL_COUNT + 2)
#define HOT_RUN_SECONDS 0.002 /* repeat hot calls until one timing lasts this long */

static const unsigned int bench_ks[] = {2, 4, 8};
#define NKS (sizeof(bench_ks) / sizeof(bench_ks[0]))

enum job_kind { JOB_SIGMA, JOB_PLAIN, JOB_READ };

struct job {
	enum job_kind kind;
	enum sg_sum_impl impl; /* JOB_SIGMA */
	enum sg_dtype dt;
	unsigned int flags;
	unsigned int k;
	size_t n;
	void *dst;
	const void *src[8];
	unsigned int reps;
	double t[MAX_RUNS]; /* seconds per call, per run */
};

struct row {
	const char *dtype;
	const char *mode; /* "fp32acc", "native" or "-" */
	const char *impl; /* scalar, avx2, avx512, plain, read */
	const char *cache;
	unsigned int k;
	double in_gbs;	 /* input consumed (read: bytes read) */
	double vs_plain; /* per-run ratio to the plain loop's time */
	double vs_read;	 /* (k+1) x n x size per second over the read rate */
	double ceiling;	 /* plain only: per-run read rate over the plain loop's rate */
};

struct bench {
	unsigned int runs;
	bool quick;
	bool wall; /* time with the wall clock instead of the thread's CPU time */
	const char *json;
	uint8_t *hot_in, *hot_out, *cold_in, *cold_out;
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

static double now(const struct bench *b)
{
	return b->wall ? sigma_bench_now() : sigma_bench_thread_cpu_now();
}

static double time_once(struct bench *b, const struct job *j)
{
	double t0;

	if (j->kind == JOB_SIGMA && sg_sum_set_impl(j->impl) != 0)
		abort();
	t0 = now(b);
	for (unsigned int i = 0; i < j->reps; i++)
		run_job(b, j);
	return (now(b) - t0) / j->reps;
}

/* Paired runs over @nj jobs. Hot jobs repeat within a timing to outlast clock noise. */
static void time_jobs(struct bench *b, struct job *jobs, unsigned int nj, bool hot)
{
	for (unsigned int i = 0; i < nj; i++) {
		double once;

		jobs[i].reps = 1;
		once = time_once(b, &jobs[i]); /* warm-up: page faults, caches, clocks */
		if (hot && once < HOT_RUN_SECONDS)
			jobs[i].reps = (unsigned int)(HOT_RUN_SECONDS / (once > 1e-7 ? once : 1e-7)) + 1;
	}
	for (unsigned int r = 0; r < b->runs; r++)
		for (unsigned int i = 0; i < nj; i++)
			jobs[i].t[r] = time_once(b, &jobs[i]);
}

/* Median over runs of f(run). */
static double median_of(const struct bench *b, const struct job *x, const struct job *y,
			double (*f)(const struct job *, const struct job *, unsigned int))
{
	double v[MAX_RUNS];

	for (unsigned int r = 0; r < b->runs; r++)
		v[r] = f(x, y, r);
	return sigma_bench_median(v, b->runs);
}

static double f_time(const struct job *x, const struct job *y, unsigned int r)
{
	return x->t[r];
}

static double f_speedup(const struct job *x, const struct job *y, unsigned int r)
{
	return y->t[r] / x->t[r];
}

/* Bytes moved by x ((k+1) buffers of n elements) per second over y's read rate. */
static double f_vs_read(const struct job *x, const struct job *y, unsigned int r)
{
	double moved = (double)(x->k + 1) * (double)x->n * (double)sg_dtype_size(x->dt);

	return moved / x->t[r] / ((double)y->n / y->t[r]);
}

/* Deterministic, finite, non-denormal values: timing must not depend on data. */
static void fill(enum sg_dtype dt, uint8_t *p, size_t bytes)
{
	size_t sz = sg_dtype_size(dt), n = bytes / sz;

	for (size_t i = 0; i < n; i++) {
		float f = (float)(i % 1000) * 0.001f - 0.5f;
		double d = f;
		uint16_t h;
		uint64_t u;

		/* Each case converts only what it stores: fills run over 64 MiB. */
		switch (dt) {
		case SG_DTYPE_FP32:
			memcpy(p + i * sz, &f, sz);
			break;
		case SG_DTYPE_FP64:
			memcpy(p + i * sz, &d, sz);
			break;
		case SG_DTYPE_FP16:
		case SG_DTYPE_BF16:
			h = dt == SG_DTYPE_FP16 ? sg_fp32_to_fp16(f) : sg_fp32_to_bf16(f);
			memcpy(p + i * sz, &h, sz);
			break;
		default:
			u = i * 0x9e3779b97f4a7c15ull;
			memcpy(p + i * sz, &u, sz);
			break;
		}
	}
}

static void add_row(struct bench *b, const struct job *j, const char *mode, const char *impl,
		    const char *cache, const struct job *plain, const struct job *rd)
{
	struct row *r = &b->rows[b->nrows < MAX_ROWS ? b->nrows++ : MAX_ROWS - 1];
	double bytes = j->kind == JOB_READ ? (double)j->n
					   : (double)j->k * (double)j->n * (double)sg_dtype_size(j->dt);

	r->dtype = sg_dtype_name(j->dt);
	r->mode = mode;
	r->impl = impl;
	r->cache = cache;
	r->k = j->k;
	r->in_gbs = bytes / median_of(b, j, NULL, f_time) * 1e-9;
	r->vs_plain = j->kind == JOB_READ ? 0 : median_of(b, j, plain, f_speedup);
	r->vs_read = j->kind == JOB_READ ? 0 : median_of(b, j, rd, f_vs_read);
	r->ceiling = j->kind == JOB_PLAIN ? median_of(b, rd, j, f_speedup) : 0;
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

/* Every implementation, the plain loop and the read bound for one dtype/mode and k. */
static void bench_config(struct bench *b, enum sg_dtype dt, unsigned int flags, bool hot,
			 unsigned int k)
{
	const bool wide = dt == SG_DTYPE_FP16 || dt == SG_DTYPE_BF16;
	const char *mode = !wide ? "-" : (flags & SG_SUM_F_NATIVE) ? "native" : "fp32acc";
	const char *cache = hot ? "hot" : "cold";
	size_t total = hot ? HOT_BYTES : COLD_BYTES;
	uint8_t *in = hot ? b->hot_in : b->cold_in;
	static struct job jobs[MAX_JOBS]; /* large: keep off the stack */
	struct job *plain, *rd;
	unsigned int nj = 0;

	memset(jobs, 0, sizeof(jobs));
	for (enum sg_sum_impl impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT; impl++)
		if (sg_sum_impl_supported(impl))
			jobs[nj++] = (struct job){.kind = JOB_SIGMA, .impl = impl};
	/* BytePS rounds every partial sum: the plain loop has no fp32acc mode. */
	plain = &jobs[nj++];
	plain->kind = JOB_PLAIN;
	rd = &jobs[nj++];
	rd->kind = JOB_READ;
	for (unsigned int i = 0; i < nj; i++) {
		jobs[i].dt = dt;
		jobs[i].flags = flags;
		jobs[i].k = k;
		jobs[i].n = total / k / sg_dtype_size(dt);
		jobs[i].dst = hot ? b->hot_out : b->cold_out;
		for (unsigned int s = 0; s < k; s++)
			jobs[i].src[s] = in + s * (total / k);
	}
	rd->n = total; /* bytes: all k inputs, as one buffer */
	rd->src[0] = in;
	time_jobs(b, jobs, nj, hot);
	for (unsigned int i = 0; i < nj; i++)
		add_row(b, &jobs[i], mode,
			jobs[i].kind == JOB_SIGMA ? sg_sum_impl_name(jobs[i].impl)
			: jobs[i].kind == JOB_PLAIN ? "plain"
						    : "read",
			cache, plain, rd);
	sg_sum_set_impl(SG_SUM_IMPL_AUTO);
}

static void bench_dtype(struct bench *b, enum sg_dtype dt, unsigned int flags)
{
	fill(dt, b->hot_in, HOT_BYTES);
	fill(dt, b->cold_in, COLD_BYTES);
	for (unsigned int c = 0; c < 2; c++)
		for (unsigned int ki = 0; ki < NKS; ki++)
			bench_config(b, dt, flags, c == 0, bench_ks[ki]);
}

/*
 * want: the target; got: measured ratio; ceiling: the most any kernel
 * could reach here (all input read at the read bound), 0 if not applicable.
 */
struct target {
	const char *what;
	double want, got, ceiling;
};

/* The targets, judged on the best implementation this CPU runs. */
static unsigned int judge(const struct bench *b, struct target *t)
{
	static const char *const names[2][NKS] = {
		{"hot fp16 k=2 vs plain loop", "hot fp16 k=4 vs plain loop",
		 "hot fp16 k=8 vs plain loop"},
		{"hot bf16 k=2 vs plain loop", "hot bf16 k=4 vs plain loop",
		 "hot bf16 k=8 vs plain loop"}};
	const char *best = sg_sum_impl_name(sg_sum_get_impl());
	const struct row *r, *p;
	unsigned int n = 0;

	r = find_row(b, "fp32", "-", best, "cold", 4);
	if (r != NULL)
		t[n++] = (struct target){"cold fp32 k=4: (k+1) x bytes / time vs streaming read",
					 0.85, r->vs_read, 0};
	for (unsigned int ki = 0; ki < NKS; ki++) {
		for (unsigned int d = 0; d < 2; d++) {
			const char *dt = d ? "bf16" : "fp16";

			r = find_row(b, dt, "fp32acc", best, "hot", bench_ks[ki]);
			p = find_row(b, dt, "fp32acc", "plain", "hot", bench_ks[ki]);
			if (r != NULL && p != NULL)
				t[n++] = (struct target){names[d][ki], 5.0, r->vs_plain,
							 p->ceiling};
		}
	}
	/* issue 12: bf16 on a CPU with AVX2 and no AVX-512 (measured here with avx2) */
	r = find_row(b, "bf16", "fp32acc", "avx2", "hot", 4);
	if (r != NULL)
		t[n++] = (struct target){"hot bf16 k=4, avx2: (k+1) x bytes / time vs read", 0.85,
					 r->vs_read, 0};
	r = find_row(b, "fp32", "-", best, "hot", 8);
	p = find_row(b, "fp32", "-", "plain", "hot", 8);
	if (r != NULL && p != NULL)
		t[n++] = (struct target){"hot fp32 k=8 vs plain loop", 2.0, r->vs_plain,
					 p->ceiling};
	return n;
}

static void print_table(const struct bench *b, const struct target *t, unsigned int nt)
{
	static const char *const cols[] = {"scalar", "avx2", "avx512", "plain", "read"};
	const char *best = sg_sum_impl_name(sg_sum_get_impl());

	printf("sigma-bench sum: GB/s of input consumed, median of %u paired runs (%s, %s)\n",
	       b->runs, b->quick ? "quick" : "full",
	       b->wall ? "wall clock" : "thread CPU time");
	printf("input per call: hot %zu MiB (in L3), cold %zu MiB (2x L3). plain = BytePS-style "
	       "loop at -O3 -march=native,\none pass per input; read = 1-core sequential read of "
	       "the same input; traffic/rd = (k+1) x n x size\nper second over the read rate\n\n",
	       HOT_BYTES >> 20, COLD_BYTES >> 20);
	printf("%-6s %-8s %-5s %2s %9s %9s %9s %9s %9s %10s %10s\n", "dtype", "mode", "cache", "k",
	       "scalar", "avx2", "avx512", "plain", "read", "best/plain", "traffic/rd");
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i], *x;

		if (strcmp(r->impl, "read") != 0)
			continue;
		printf("%-6s %-8s %-5s %2u", r->dtype, r->mode, r->cache, r->k);
		for (unsigned int m = 0; m < sizeof(cols) / sizeof(cols[0]); m++) {
			x = find_row(b, r->dtype, r->mode, cols[m], r->cache, r->k);
			if (x != NULL)
				printf(" %9.2f", x->in_gbs);
			else
				printf(" %9s", "-");
		}
		x = find_row(b, r->dtype, r->mode, best, r->cache, r->k);
		if (x != NULL)
			printf(" %9.2fx %9.2fx", x->vs_plain, x->vs_read);
		printf("\n");
	}
	printf("\ntargets (best implementation: %s; shared, noisy machines read low):\n", best);
	for (unsigned int i = 0; i < nt; i++) {
		printf("  %-56s >= %4.2fx  measured %6.2fx  %-6s", t[i].what, t[i].want, t[i].got,
		       t[i].got >= t[i].want ? "met" : "MISSED");
		if (t[i].ceiling > 0)
			printf("  (ceiling here %.2fx: read rate / plain)", t[i].ceiling);
		printf("\n");
	}
}

static void print_json(FILE *f, const struct bench *b, const struct target *t, unsigned int nt)
{
	fprintf(f,
		"{\"bench\": \"sum\", \"quick\": %s, \"runs\": %u, \"clock\": \"%s\", "
		"\"best_impl\": \"%s\",\n",
		b->quick ? "true" : "false", b->runs, b->wall ? "wall" : "thread_cpu",
		sg_sum_impl_name(sg_sum_get_impl()));
	fprintf(f, " \"hot_input_bytes\": %zu, \"cold_input_bytes\": %zu,\n", HOT_BYTES,
		COLD_BYTES);
	fprintf(f, " \"results\": [\n");
	for (unsigned int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];

		fprintf(f,
			"  {\"dtype\": \"%s\", \"mode\": \"%s\", \"impl\": \"%s\", "
			"\"cache\": \"%s\", \"k\": %u, \"input_gbs\": %.3f, "
			"\"vs_plain\": %.3f, \"traffic_vs_read\": %.3f}%s\n",
			r->dtype, r->mode, r->impl, r->cache, r->k, r->in_gbs, r->vs_plain,
			r->vs_read, i + 1 < b->nrows ? "," : "");
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
		"usage: sigma-bench sum [--quick] [--runs N] [--wall] [--json FILE]\n"
		"  --quick      fp32, fp16 and bf16 only, 5 runs (what ./sigma demo runs)\n"
		"  --runs N     runs per figure, 5..%d (default 5 quick, 7 full)\n"
		"  --wall       time with the wall clock, not the thread's CPU time (on a\n"
		"               shared machine CPU time leaves out time spent descheduled)\n"
		"  --json FILE  write the JSON there instead of after the table on stdout\n",
		MAX_RUNS);
	return rc;
}

static int parse(struct bench *b, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			b->quick = true;
		} else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
			uint64_t v;

			if (sg_parse_u64(argv[++i], 5, MAX_RUNS, &v) != 0) {
				fprintf(stderr, "sigma-bench sum: --runs wants 5..%d, not '%s'\n",
					MAX_RUNS, argv[i]);
				return -EINVAL;
			}
			b->runs = (unsigned int)v;
		} else if (strcmp(argv[i], "--wall") == 0) {
			b->wall = true;
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
	struct sigma_bench_out out;
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
	for (unsigned int s = 0; s < sizeof(sets) / sizeof(sets[0]); s++)
		if (sets[s].quick || !b->quick)
			bench_dtype(b, sets[s].dt, sets[s].flags);
	nt = judge(b, t);
	print_table(b, t, nt);
	printf("\n");
	if (sigma_bench_out_open(&out) < 0) {
		rc = 1;
		goto out;
	}
	print_json(out.f, b, t, nt);
	if (sigma_bench_out_write(&out, b->json) < 0) {
		rc = 1;
		goto out;
	}
	if (b->json != NULL)
		printf("JSON written to %s\n", b->json);
out:
	sg_sum_numa_free(b->hot_in, HOT_BYTES);
	sg_sum_numa_free(b->hot_out, HOT_BYTES);
	sg_sum_numa_free(b->cold_in, COLD_BYTES);
	sg_sum_numa_free(b->cold_out, COLD_BYTES / 2);
	free(b);
	return rc;
}
