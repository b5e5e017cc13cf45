/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench model, run as a program, against hand-computed cases:
 * n=8, k=4: Sigma 2*8*7/(64+32-8) = 112/88 = 1.2727 M/B, all-reduce
 * 2*7/8 = 1.75 M/B, PS 8/4 = 2.0 M/B; CPU share 2*7/88, GPU share 4/88.
 * n=4, k=0: all-reduce and Sigma both 1.5 M/B. n=2, k=2: 1.0 against 1.0.
 * Also: garbage options exit 2 with a message, for model, run and compare;
 * and one short "run" sweep whose JSON and CSV say every sum was right.
 */
#include <math.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sg_test.h"

static char out[1 << 16];

static int run(const char *exe, const char *args)
{
	char cmd[1024];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", exe, args);
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

static void run_garbage(const char *exe)
{
	static const char *const bad[] = {
		"run --workers 0", "run --workers 99", "run --workers 2,x", "run --sizes 3x",
		"run --sizes 0", "run --sizes 2G", "run --sizes 3M", "run --sizes 4K,,",
		"run --dtypes fp16", "run --dtypes nope", "run --iters 0", "run --iters 51",
		"run --iters 3x", "run --window 1e3", "run --chunk 8x", "run --nodes 2k",
		"run --chunk 7", "run --chunk 9000", "run --window 65537", "run --nodes 9",
		"run --spin-us -1", "run --spin-us 1000001", "run --spin-us x",
		"run --partition 3", "run --partition 1x", "run --bogus", "run extra",
		"compare --workers 0", "compare --sizes junk", "compare --chunk 12",
		"run --memif /tmp/x.sock", "compare --memif /tmp/x.sock",
		"run --attach 10.80.0.1:9300 --memif ''", "run --memif-queues 0",
		"run --memif-queues 17", "run --memif-queues x",
		"compare --threads-baseline", "run --threads-baseline --attach 127.0.0.1:1",
		"run --runs 2", "compare --runs 0", "compare --runs 16", "compare --runs x",
		"run --sweep", "run --shm --attach 127.0.0.1:1",
		"compare --shm --threads-baseline --attach 127.0.0.1:1",
		/* what strtol(), strtod() and strtoul() took: a sign, hex, a leading zero */
		"model --n +8", "model --bw 0x10", "run --workers +2", "run --sizes +4K",
		"run --sizes 0x1p12", "run --iters 03",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = run(exe, bad[i]);

		SG_CHECK(rc == 2, "'%s' exited %d, want 2: %s", bad[i], rc, out);
	}
	/* A node address that is not one: the point fails, nothing hangs. */
	SG_CHECK_EQ(run(exe, "run --quiet --workers 2 --sizes 4K --iters 1 --attach nonsense"), 1);
}

/* Read a whole (small) file into @p buf as a string, then delete it. */
static int take_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	buf[0] = '\0';
	if (f == NULL)
		return -1;
	n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	return 0;
}

/* A two-worker sweep over the in-process nodes: exact sums, JSON and CSV written. */
static void run_short(const char *exe)
{
	char args[512], csv[4096] = "";
	char dir[] = "/tmp/sg_bench_client_XXXXXX";

	if (mkdtemp(dir) == NULL) {
		SG_CHECK(0, "mkdtemp");
		return;
	}
	snprintf(args, sizeof(args), "run --quiet --workers 1,2 --sizes 4K,96K --dtypes fp32,int64 "
		 "--iters 2 --partition 32K --json %s/r.json --csv %s/r.csv", dir, dir);
	SG_CHECK_EQ(run(exe, args), 0);
	snprintf(args, sizeof(args), "%s/r.json", dir);
	SG_CHECK(take_file(args, out, sizeof(out)) == 0 && strstr(out, "\"ok\":false") == NULL &&
			 strstr(out, "\"n\":2,\"dtype\":\"int64\",\"bytes\":98304,\"ok\":true"),
		 "run JSON: %s", out);
	snprintf(args, sizeof(args), "%s/r.csv", dir);
	SG_CHECK(take_file(args, csv, sizeof(csv)) == 0, "no CSV");
	/* header + 2 N x 2 dtypes x 2 sizes */
	{
		int lines = 0;

		for (const char *p = csv; *p; p++)
			lines += *p == '\n';
		SG_CHECK_EQ(lines, 9);
	}
	/* the same over shared memory: exact sums, the transport named, no socket left */
	snprintf(args, sizeof(args), "run --quiet --shm --workers 2 --sizes 4K,96K --dtypes int64 "
		 "--iters 2 --partition 32K --json %s/r.json", dir);
	SG_CHECK_EQ(run(exe, args), 0);
	snprintf(args, sizeof(args), "%s/r.json", dir);
	SG_CHECK(take_file(args, out, sizeof(out)) == 0 && strstr(out, "\"ok\":false") == NULL &&
			 strstr(out, "\"transport\":\"shm\"") &&
			 strstr(out, "\"n\":2,\"dtype\":\"int64\",\"bytes\":98304,\"ok\":true"),
		 "run --shm JSON: %s", out);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const char *exe = argc > 1 ? argv[1] : "sigma-bench";
	const char *js;

	SG_CHECK_EQ(run(exe, "model --n 8 --k 4 --bw 80 --size 1000"), 0);
	js = strstr(out, "{\"bench\":\"model\"");
	SG_CHECK(js != NULL, "no JSON in: %s", out);
	if (js == NULL)
		return sg_test_finish("bench_client");
	near(num(js, "t_sigma_MB"), 112.0 / 88.0, "n8k4 sigma M/B");
	near(num(js, "t_allreduce_MB"), 1.75, "n8k4 all-reduce M/B");
	near(num(js, "t_ps_MB"), 2.0, "n8k4 PS M/B");
	/* B = 80 Gbit/s = 1e10 B/s, M = 1e9 B: M/B = 0.1 s. */
	near(num(js, "t_sigma_s"), 0.1 * 112.0 / 88.0, "n8k4 sigma seconds");
	near(num(js, "cpu_bytes"), 1e9 * 14.0 / 88.0, "n8k4 CPU bytes");
	near(num(js, "gpu_bytes"), 1e9 * 4.0 / 88.0, "n8k4 GPU bytes");
	SG_CHECK(strstr(out, "1.273") && strstr(out, "1.750") && strstr(out, "2.000"),
		 "table lacks 1.273/1.750/2.000: %s", out);

	SG_CHECK_EQ(run(exe, "model --n 4 --k 0"), 0);
	js = strstr(out, "{\"bench\"");
	if (js != NULL) {
		near(num(js, "t_sigma_MB"), 1.5, "n4k0 sigma");
		near(num(js, "t_allreduce_MB"), 1.5, "n4k0 all-reduce");
		near(num(js, "speedup_vs_allreduce"), 1.0, "n4k0 speedup");
	}
	SG_CHECK_EQ(run(exe, "model --n 2 --k 2"), 0);
	js = strstr(out, "{\"bench\"");
	if (js != NULL) {
		near(num(js, "t_sigma_MB"), 1.0, "n2k2 sigma");
		near(num(js, "t_ps_MB"), 1.0, "n2k2 PS");
	}
	/* The default table: k = 0..8, the last row reaching 1.75x. */
	SG_CHECK_EQ(run(exe, "model "), 0);
	js = strstr(out, "\"k\":8");
	SG_CHECK(js != NULL, "default table lacks k=8");
	if (js != NULL)
		near(num(js, "speedup_vs_allreduce"), 1.75, "n8k8 speedup");

	SG_CHECK_EQ(run(exe, "model --n 0"), 2);
	SG_CHECK_EQ(run(exe, "model --n 8x"), 2);
	SG_CHECK_EQ(run(exe, "model --bw -1"), 2);
	SG_CHECK_EQ(run(exe, "model --size nan"), 2);
	SG_CHECK_EQ(run(exe, "model --bogus"), 2);
	SG_CHECK_EQ(run(exe, "model extra"), 2);
	/* JSON that cannot be written fails the command, naming the file and the step:
	 * a folder that is not there (open), and a full disk (write or close) */
	SG_CHECK_EQ(run(exe, "model --n 2 --json /nonexistent-sigma/m.json"), 1);
	SG_CHECK(strstr(out, "cannot open /nonexistent-sigma/m.json") != NULL, "%s", out);
	if (access("/dev/full", W_OK) == 0) {
		SG_CHECK_EQ(run(exe, "model --n 2 --json /dev/full"), 1);
		SG_CHECK(strstr(out, "/dev/full: No space left on device") != NULL, "%s", out);
	}
	run_garbage(exe);
	run_short(exe);
	return sg_test_finish("bench_client");
}
