/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench model: BytePS's optimal split and the predicted communication
 * times of Sigma, ring all-reduce and a classic parameter server, from the
 * control plane's formulas (sg_ctl_model()).
 */
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_ctl_place.h"
#include "sigma_bench.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sigma-bench model [--n N] [--k K] [--bw GBPS] [--size MB] [--json FILE]\n"
		   "  --n N      GPU machines (workers), default 8\n"
		   "  --k K      CPU machines; default: a table for k = 0..n\n"
		   "  --bw GBPS  per-machine bandwidth B in Gbit/s, default 100\n"
		   "  --size MB  model size M in MB (1e6 bytes), default 1000\n"
		   "  --json F   write the JSON there instead of stdout\n"
		   "Times are in ms and in units of M/B (the paper's unit).\n");
}

static double json_num(double v)
{
	return isfinite(v) ? v : -1; /* JSON has no infinity: -1 means "not defined" */
}

int sigma_bench_model(int argc, char **argv)
{
	static const struct option opts[] = {
		{"n", required_argument, NULL, 'n'},     {"k", required_argument, NULL, 'k'},
		{"bw", required_argument, NULL, 'b'},    {"size", required_argument, NULL, 's'},
		{"json", required_argument, NULL, 'j'},  {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	long n = 8, k = -1;
	double gbps = 100, mb = 1000;
	const char *json_path = NULL;
	struct sigma_bench_out out;
	FILE *js;
	int c, rc = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int64_t iv = 0;
		int bad = 0;

		switch (c) {
		case 'n': bad = sg_parse_i64(optarg, INT64_MIN, INT64_MAX, &iv); n = (long)iv; break;
		case 'k': bad = sg_parse_i64(optarg, INT64_MIN, INT64_MAX, &iv); k = (long)iv; break;
		case 'b': bad = sg_parse_double(optarg, -DBL_MAX, DBL_MAX, &gbps); break;
		case 's': bad = sg_parse_double(optarg, -DBL_MAX, DBL_MAX, &mb); break;
		case 'j': json_path = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (bad != 0) {
			fprintf(stderr, "sigma-bench model: bad number '%s'\n", optarg);
			return 2;
		}
	}
	if (optind < argc || n < 1 || n > 4096 || k < -1 || k > 4096 || !(gbps > 0) ||
	    !(mb > 0) || !isfinite(gbps) || !isfinite(mb)) {
		fprintf(stderr, "sigma-bench model: need 1 <= n <= 4096, 0 <= k <= 4096, bw > 0, "
				"size > 0 and no extra arguments\n");
		return 2;
	}
	double M = mb * 1e6, B = gbps * 1e9 / 8;
	long k0 = k < 0 ? 0 : k, k1 = k < 0 ? n : k;

	/* The JSON is collected apart and printed after the table. */
	if (sigma_bench_out_open(&out) < 0)
		return 1;
	js = out.f;
	printf("BytePS split and predicted sync time: n=%ld GPU machines, M=%.0f MB, B=%.0f Gbit/s\n",
	       n, mb, gbps);
	printf("%4s %10s %10s %11s %11s %11s %7s %7s %7s %8s\n", "k", "CPU share", "GPU share",
	       "sigma ms", "allred ms", "PS ms", "sig M/B", "ar M/B", "PS M/B", "speedup");
	fprintf(js, "{\"bench\":\"model\",\"n\":%ld,\"model_bytes\":%.0f,\"bw_bytes_per_s\":%.0f,"
		    "\"rows\":[", n, M, B);
	for (long kk = k0; kk <= k1; kk++) {
		struct sg_ctl_model m;
		double u = M / B;

		if (sg_ctl_model((unsigned int)n, (unsigned int)kk, M, B, &m) < 0) {
			fprintf(stderr, "sigma-bench model: model failed for n=%ld k=%ld\n", n, kk);
			rc = 1;
			break;
		}
		printf("%4ld %9.1f%% %9.1f%% %11.2f %11.2f %11.2f %7.3f %7.3f %7.3f %7.2fx\n", kk,
		       100 * m.cpu_bytes / M, 100 * m.gpu_bytes / M, m.t_sigma * 1e3,
		       m.t_allreduce * 1e3, m.t_ps * 1e3, m.t_sigma / u, m.t_allreduce / u,
		       m.t_ps / u, m.speedup_vs_allreduce);
		fprintf(js, "%s{\"k\":%ld,\"cpu_bytes\":%.1f,\"gpu_bytes\":%.1f,\"t_sigma_s\":%.9g,"
			    "\"t_allreduce_s\":%.9g,\"t_ps_s\":%.9g,\"t_sigma_MB\":%.6f,"
			    "\"t_allreduce_MB\":%.6f,\"t_ps_MB\":%.6f,\"speedup_vs_allreduce\":%.6f}",
			kk == k0 ? "" : ",", kk, m.cpu_bytes, m.gpu_bytes, m.t_sigma,
			m.t_allreduce, json_num(m.t_ps), m.t_sigma / u, m.t_allreduce / u,
			json_num(m.t_ps / u), m.speedup_vs_allreduce);
	}
	fprintf(js, "]}\n");
	printf("With k = n CPU machines Sigma needs M/B and all-reduce 2(n-1)/n M/B: %.2fx at "
	       "n = %ld, approaching 2x as n grows.\n", 2.0 * (double)(n - 1) / (double)n, n);
	return sigma_bench_out_write(&out, json_path) < 0 ? 1 : rc;
}
