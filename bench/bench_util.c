/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What sigma-bench's subcommands share (sigma_bench.h): clocks, medians, the
 * paths of what they run, number and size parsers, the payload every worker
 * fills and checks, and the JSON output file.
 */
#include <errno.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sigma_bench.h"

const char *sigma_bench_path(const char *built, const char *installed)
{
	return built == NULL || access(built, F_OK) != 0 ? installed : built;
}

double sigma_bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double sigma_bench_thread_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double sigma_bench_median(double *v, size_t n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *sigma_bench_cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512], *v;

	snprintf(buf, len, "unknown");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "model name", 10) != 0 || (v = strchr(line, ':')) == NULL)
			continue;
		v += strspn(v, ": \t");
		v[strcspn(v, "\n")] = '\0';
		snprintf(buf, len, "%s", v);
		break;
	}
	if (f != NULL)
		fclose(f);
	return buf;
}

int sigma_bench_parse_uint(const char *s, unsigned int lo, unsigned int hi, unsigned int *out)
{
	uint64_t v;

	if (sg_parse_u64(s, lo, hi, &v) != 0)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

int sigma_bench_parse_unit(const char *s, double *v, const char **unit)
{
	char num[64];
	size_t n = s != NULL ? strlen(s) : 0;

	/* the unit is the trailing letters: "1e3K" is 1e3 and K, "5e" no number */
	while (n > 0 && ((s[n - 1] >= 'a' && s[n - 1] <= 'z') || (s[n - 1] >= 'A' && s[n - 1] <= 'Z')))
		n--;
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n);
	num[n] = '\0';
	if (sg_parse_double(num, 0, DBL_MAX, v) != 0 || !(*v > 0))
		return -EINVAL;
	*unit = s + n;
	return 0;
}

int sigma_bench_out_open(struct sigma_bench_out *o)
{
	o->buf = NULL;
	o->len = 0;
	o->f = open_memstream(&o->buf, &o->len);
	if (o->f == NULL) {
		int e = errno;

		fprintf(stderr, "sigma-bench: cannot build the output: %s\n", strerror(e));
		return -e;
	}
	return 0;
}

int sigma_bench_out_write(struct sigma_bench_out *o, const char *path)
{
	const char *name = path != NULL ? path : "stdout";
	const char *step = "build";
	FILE *f = NULL;
	int rc = 0;

	if (o->f == NULL || fclose(o->f) != 0) {
		rc = -(errno ? errno : EIO);
	} else if (path != NULL && (f = fopen(path, "w")) == NULL) {
		step = "open";
		rc = -errno;
	} else {
		FILE *to = f != NULL ? f : stdout;

		errno = 0;
		step = "write";
		if (fwrite(o->buf, 1, o->len, to) != o->len)
			rc = -(errno ? errno : EIO);
		step = rc ? step : "close";
		if ((f != NULL ? fclose(f) : fflush(stdout)) != 0 && rc == 0)
			rc = -(errno ? errno : EIO);
	}
	if (rc < 0)
		fprintf(stderr, "sigma-bench: cannot %s %s: %s\n", step, name, strerror(-rc));
	free(o->buf);
	*o = (struct sigma_bench_out){0};
	return rc;
}

int sigma_bench_parse_size(const char *s, uint64_t *out)
{
	const char *end;
	double v;
	uint64_t mul = 1;

	if (sigma_bench_parse_unit(s, &v, &end) != 0)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': mul = 1024; end++; break;
	case 'M': case 'm': mul = 1024 * 1024; end++; break;
	case 'G': case 'g': mul = 1024ull * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || v * mul > 1024.0 * 1024 * 1024)
		return -EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

/* Split a comma list and call @p fn on each item; -EINVAL on a bad one or too many. */
void sigma_bench_fill(void *buf, enum sg_dtype dt, uint64_t n, unsigned int r)
{
	for (uint64_t i = 0; i < n; i++) {
		int64_t v = (int64_t)(i % 509) + r;

		switch (dt) {
		case SG_DTYPE_FP32: ((float *)buf)[i] = (float)v; break;
		case SG_DTYPE_FP64: ((double *)buf)[i] = (double)v; break;
		case SG_DTYPE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
		default: ((int64_t *)buf)[i] = v; break;
		}
	}
}

uint64_t sigma_bench_count_bad(const void *buf, enum sg_dtype dt, uint64_t n, unsigned int nw)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		int64_t ref = (int64_t)nw * (int64_t)(i % 509) + (int64_t)nw * (nw - 1) / 2;

		switch (dt) {
		case SG_DTYPE_FP32: bad += ((const float *)buf)[i] != (float)ref; break;
		case SG_DTYPE_FP64: bad += ((const double *)buf)[i] != (double)ref; break;
		case SG_DTYPE_INT32: bad += ((const int32_t *)buf)[i] != (int32_t)ref; break;
		default: bad += ((const int64_t *)buf)[i] != ref; break;
		}
	}
	return bad;
}
