/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench model, run as a program, against hand-computed cases:
 * n=8, k=4: Sigma 2*8*7/(64+32-8) = 112/88 = 1.2727 M/B, all-reduce
 * 2*7/8 = 1.75 M/B, PS 8/4 = 2.0 M/B; CPU share 2*7/88, GPU share 4/88.
 * n=4, k=0: all-reduce and Sigma both 1.5 M/B. n=2, k=2: 1.0 against 1.0.
 * Also: garbage options exit 2 with a message.
 */
#include <math.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_test.h"

static char out[1 << 16];

static int run(const char *exe, const char *args)
{
	char cmd[1024];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s model %s 2>&1", exe, args);
	p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The number after "key": in the output's JSON (first occurrence after @p from). */
static double num(const char *from, const char *key)
{
	char pat[64];
	const char *at;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = strstr(from, pat);
	return at ? strtod(at + strlen(pat), NULL) : NAN;
}

static void near(double got, double want, const char *what)
{
	SG_CHECK(fabs(got - want) < 1e-5 * (fabs(want) + 1), "%s: got %.9g, want %.9g", what, got,
		 want);
}

int main(int argc, char **argv)
{
	const char *exe = argc > 1 ? argv[1] : "sigma-bench";
	const char *js;

	SG_CHECK_EQ(run(exe, "--n 8 --k 4 --bw 80 --size 1000"), 0);
	js = strstr(out, "{\"bench\":\"model\"");
	SG_CHECK(js != NULL, "no JSON in: %s", out);
	if (js == NULL)
		return sg_test_finish("bench_model");
	near(num(js, "t_sigma_MB"), 112.0 / 88.0, "n8k4 sigma M/B");
	near(num(js, "t_allreduce_MB"), 1.75, "n8k4 all-reduce M/B");
	near(num(js, "t_ps_MB"), 2.0, "n8k4 PS M/B");
	/* B = 80 Gbit/s = 1e10 B/s, M = 1e9 B: M/B = 0.1 s. */
	near(num(js, "t_sigma_s"), 0.1 * 112.0 / 88.0, "n8k4 sigma seconds");
	near(num(js, "cpu_bytes"), 1e9 * 14.0 / 88.0, "n8k4 CPU bytes");
	near(num(js, "gpu_bytes"), 1e9 * 4.0 / 88.0, "n8k4 GPU bytes");
	SG_CHECK(strstr(out, "1.273") && strstr(out, "1.750") && strstr(out, "2.000"),
		 "table lacks 1.273/1.750/2.000: %s", out);

	SG_CHECK_EQ(run(exe, "--n 4 --k 0"), 0);
	js = strstr(out, "{\"bench\"");
	if (js != NULL) {
		near(num(js, "t_sigma_MB"), 1.5, "n4k0 sigma");
		near(num(js, "t_allreduce_MB"), 1.5, "n4k0 all-reduce");
		near(num(js, "speedup_vs_allreduce"), 1.0, "n4k0 speedup");
	}
	SG_CHECK_EQ(run(exe, "--n 2 --k 2"), 0);
	js = strstr(out, "{\"bench\"");
	if (js != NULL) {
		near(num(js, "t_sigma_MB"), 1.0, "n2k2 sigma");
		near(num(js, "t_ps_MB"), 1.0, "n2k2 PS");
	}
	/* The default table: k = 0..8, the last row reaching 1.75x. */
	SG_CHECK_EQ(run(exe, ""), 0);
	js = strstr(out, "\"k\":8");
	SG_CHECK(js != NULL, "default table lacks k=8");
	if (js != NULL)
		near(num(js, "speedup_vs_allreduce"), 1.75, "n8k8 speedup");

	SG_CHECK_EQ(run(exe, "--n 0"), 2);
	SG_CHECK_EQ(run(exe, "--n 8x"), 2);
	SG_CHECK_EQ(run(exe, "--bw -1"), 2);
	SG_CHECK_EQ(run(exe, "--size nan"), 2);
	SG_CHECK_EQ(run(exe, "--bogus"), 2);
	SG_CHECK_EQ(run(exe, "extra"), 2);
	return sg_test_finish("bench_model");
}
