/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench: dispatches to the subcommands listed in sigma_bench.h.
 */
#include <errno.h>
#include <limits.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#include "sg_version.h"
#include "sigma_bench.h"

struct sigma_bench_cmd {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *help;
};

#define SIGMA_BENCH_ENTRY(name, help) {#name, sigma_bench_##name, help},
static const struct sigma_bench_cmd cmds[] = {SIGMA_BENCH_COMMANDS(SIGMA_BENCH_ENTRY)};
#undef SIGMA_BENCH_ENTRY

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

static void usage(FILE *f)
{
	fprintf(f, "usage: sigma-bench <command> [options]   (sigma-bench <command> --help)\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "  %-10s %s\n", "help", "this list (also -h, --help)");
	fprintf(f, "  %-10s %s\n", "--version", "print the release and exit");
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		fputs(SG_VERSION_TEXT("sigma-bench"), stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].main(argc - 1, argv + 1);
	fprintf(stderr, "sigma-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
