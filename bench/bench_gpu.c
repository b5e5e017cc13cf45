/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench gpu: the GPU side of staging, measured against bounds taken in
 * the same run (see bench.h). The measuring itself is in gpu/ (it needs
 * CUDA); this file parses options and reports.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma_bench.h"
#include "sg_gpu.h"

/* Decimal, or hex after 0x (sg_parse_u64x()). */
static int parse_size(const char *s, size_t min, size_t max, size_t *out)
{
	uint64_t v;

	if (sg_parse_u64x(s, min, max, &v) != 0)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		if ((unsigned char)*s >= 0x20)
			putchar(*s);
	}
	putchar('"');
}

static const char *exact(bool ok)
{
	return ok ? "bit-exact" : "WRONG SUMS";
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

int sigma_bench_gpu(int argc, char **argv)
{
	static const struct option opts[] = {
		{"bytes", required_argument, NULL, 'b'},  {"runs", required_argument, NULL, 'r'},
		{"device", required_argument, NULL, 'd'}, {"depth", required_argument, NULL, 'D'},
		{"partition", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct sg_gpu_bench_conf conf = {.bytes = 64u << 20, .runs = 5, .depth = 4};
	struct sg_gpu_bench_result r;
	char why[256] = "";
	size_t v;
	int c, rc;
	double stage_bound;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'h') {
			printf("usage: gpu [--bytes N] [--runs N] [--device N] [--depth N] "
			       "[--partition N]\n");
			return 0;
		}
		/* A device ordinal past int (or any real machine) must not wrap to device 0. */
		if (c == '?' ||
		    parse_size(optarg, c == 'd' ? 0 : 1, c == 'd' ? 1023 : (size_t)1 << 34, &v) < 0) {
			fprintf(stderr, "sigma-bench gpu: bad option or value\n");
			return 2;
		}
		if (c == 'b')
			conf.bytes = v;
		else if (c == 'r')
			conf.runs = v > 64 ? 64 : (unsigned)v;
		else if (c == 'd')
			conf.device = (int)v;
		else if (c == 'D')
			conf.depth = v > 8 ? 8 : (unsigned)v;
		else if (v % 4 == 0 && v <= (1u << 30))
			conf.partition_bytes = (uint32_t)v;
		else {
			fprintf(stderr, "sigma-bench gpu: --partition must be a multiple of 4\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sigma-bench gpu: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	rc = sg_gpu_cuda_bench(&conf, &r, why, sizeof(why));
	if (rc < 0) {
		fprintf(stderr, "gpu: skipped: %s\n", why);
		printf("{\"bench\":\"gpu\",\"skipped\":true,\"reason\":");
		json_str(why);
		printf("}\n");
		return rc == -ENODEV ? 0 : 1;
	}
	/*
	 * D2H and H2D run at once in the pipeline: their rate while both run
	 * (measured here) bounds staging; without it, the slower one alone.
	 */
	stage_bound = r.bidir_gbps > 0 ? r.bidir_gbps
				       : r.d2h_gbps < r.h2d_gbps ? r.d2h_gbps : r.h2d_gbps;
	fprintf(stderr,
		"gpu: %s (%s), %zu bytes, median of %u runs\n"
		"  PCIe bound (link)       %8.2f GB/s\n"
		"  pinned H2D              %8.2f GB/s  %5.1f%% of bound\n"
		"  pinned D2H              %8.2f GB/s  %5.1f%% of bound\n"
		"  H2D + D2H at once       %8.2f GB/s  each way, %5.1f%% of bound\n"
		"  device copy (r+w)       %8.2f GB/s\n"
		"  reduce fp32 (r+w)       %8.2f GB/s  %5.1f%% of copy (target 85%%)  %s\n"
		"  reduce fp16 (r+w)       %8.2f GB/s  %5.1f%% of copy  %s\n"
		"  reduce bf16 (r+w)       %8.2f GB/s  %5.1f%% of copy  %s\n"
		"  staging, pipelined      %8.4f s     %8.2f GB/s  %5.1f%% of duplex copies "
		"(target 90%%)\n"
		"  staging, sum of parts   %8.4f s     speedup %.2fx\n",
		r.device, r.link, r.bytes, r.runs, r.pcie_bound_gbps, r.h2d_gbps,
		100 * ratio(r.h2d_gbps, r.pcie_bound_gbps), r.d2h_gbps,
		100 * ratio(r.d2h_gbps, r.pcie_bound_gbps), r.bidir_gbps,
		100 * ratio(r.bidir_gbps, r.pcie_bound_gbps), r.dev_copy_gbps, r.reduce_gbps[0],
		100 * ratio(r.reduce_gbps[0], r.dev_copy_gbps), exact(r.reduce_exact[0]),
		r.reduce_gbps[1], 100 * ratio(r.reduce_gbps[1], r.dev_copy_gbps),
		exact(r.reduce_exact[1]), r.reduce_gbps[2],
		100 * ratio(r.reduce_gbps[2], r.dev_copy_gbps), exact(r.reduce_exact[2]),
		r.stage_pipelined_s, r.stage_gbps, 100 * ratio(r.stage_gbps, stage_bound),
		r.stage_parts_s, ratio(r.stage_parts_s, r.stage_pipelined_s));
	printf("{\"bench\":\"gpu\",\"skipped\":false,\"device\":");
	json_str(r.device);
	printf(",\"link\":");
	json_str(r.link);
	printf(",\"bytes\":%zu,\"runs\":%u,\"pcie_bound_gbps\":%.3f,\"h2d_gbps\":%.3f,"
	       "\"d2h_gbps\":%.3f,\"bidir_gbps\":%.3f,\"h2d_vs_bound\":%.4f,"
	       "\"d2h_vs_bound\":%.4f,\"bidir_vs_bound\":%.4f,"
	       "\"dev_copy_gbps\":%.3f,\"reduce_fp32_gbps\":%.3f,\"reduce_fp16_gbps\":%.3f,"
	       "\"reduce_bf16_gbps\":%.3f,\"reduce_fp32_vs_copy\":%.4f,"
	       "\"reduce_fp16_vs_copy\":%.4f,\"reduce_bf16_vs_copy\":%.4f,"
	       "\"reduce_exact\":{\"fp32\":%s,\"fp16\":%s,\"bf16\":%s},"
	       "\"stage_pipelined_s\":%.6f,\"stage_parts_s\":%.6f,\"stage_host_s\":%.6f,"
	       "\"stage_gbps\":%.3f,\"stage_bound_gbps\":%.3f,\"stage_vs_bound\":%.4f,"
	       "\"stage_speedup_vs_parts\":%.4f}\n",
	       r.bytes, r.runs, r.pcie_bound_gbps, r.h2d_gbps, r.d2h_gbps, r.bidir_gbps,
	       ratio(r.h2d_gbps, r.pcie_bound_gbps), ratio(r.d2h_gbps, r.pcie_bound_gbps),
	       ratio(r.bidir_gbps, r.pcie_bound_gbps), r.dev_copy_gbps, r.reduce_gbps[0],
	       r.reduce_gbps[1], r.reduce_gbps[2], ratio(r.reduce_gbps[0], r.dev_copy_gbps),
	       ratio(r.reduce_gbps[1], r.dev_copy_gbps), ratio(r.reduce_gbps[2], r.dev_copy_gbps),
	       r.reduce_exact[0] ? "true" : "false", r.reduce_exact[1] ? "true" : "false",
	       r.reduce_exact[2] ? "true" : "false", r.stage_pipelined_s, r.stage_parts_s,
	       r.stage_host_s, r.stage_gbps, stage_bound, ratio(r.stage_gbps, stage_bound),
	       ratio(r.stage_parts_s, r.stage_pipelined_s));
	/* A wrong sum makes every figure above moot: fail the command. */
	return r.reduce_exact[0] && r.reduce_exact[1] && r.reduce_exact[2] ? 0 : 1;
}

