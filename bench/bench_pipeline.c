/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `pipeline` benchmark: sigmad's lcore pipeline with a generator acting as N
 * workers (fp32, jumbo chunks): on a ring port with the generator on the main
 * lcore of the same process, and over net_memif with the generator in a
 * second process. Each run is a fresh forked process (EAL starts once per
 * process).
 * Reports Gbps of pushed data aggregated, Mpps, and busy% per lcore for 1 and
 * 2 reducer lcores, the median of several runs each, against references
 * measured or fixed in the same run:
 *  - the same core summing the same chunks with nothing else to do (sg_sum
 *    over 8920-byte chunks: what the pipeline would reach if packets were
 *    free), over the pipeline's working set: as many accumulators as the
 *    engine keeps for the slots in flight (each one's sum and the previous
 *    round's, kept for retransmits) and as many input chunks as pushes are in
 *    flight, so that inputs come from the last-level cache as the pushes'
 *    payloads do, not from L1/L2;
 *  - the reference of earlier versions, printed beside it: the same sums
 *    with 64 inputs read over and over (hot in L2) into 36 MB of
 *    accumulators (beyond this VM's L3), which is neither the pipeline's
 *    inputs nor its accumulators;
 *  - the cross-core bound: the same sums while another thread writes each
 *    push's payload just before (a memcpy into a ring of slots, as the
 *    generator fills each push's mbuf and as a NIC writes each frame): every
 *    payload then crosses from one core's cache to the other's, as the
 *    pipeline's do, and no node can sum faster than that;
 *  - the target, 10x BytePS's 2.8 Gbps on this VM = 28 Gbps.
 * Every RESULT is checked by the generator; a run with a wrong sum fails.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>
#include <stdatomic.h>

#include <sys/wait.h>

#include <rte_eal.h>
#include <rte_log.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include "sigma_bench.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_testdrv.h"
#include "sg_sum.h"

#define MAX_RUNS 21
#define BYTEPS_GBPS 2.8
#define WINDOW 256 /* slots in flight, each with a push from every worker */

struct scenario {
	const char *name;
	bool memif;          /* generator in a second process over net_memif */
	const char *rtc;     /* layout */
	bool udp_checksum;
};

static const struct scenario scenarios[] = {
	{"ring, 1 reducer, UDP checksum", false, "(0,0,1)", true},
	{"ring, 1 reducer, no UDP checksum", false, "(0,0,1)", false},
	{"ring, 2 reducers (hand-off), no UDP checksum", false, "(0,0,1),(0,1,2)", false},
	{"memif, 1 reducer, UDP checksum", true, "(0,0,1)", true},
	{"memif, 1 reducer, no UDP checksum", true, "(0,0,1)", false},
	{"memif, 2 reducers (hand-off), no UDP checksum", true, "(0,0,1),(0,1,2)", false},
};

enum { CHUNK_ELEMS = 8920 / 4 };

/* The cross-core bound's producer and the slots it fills for the summing thread. */
struct xcore {
	float *slot;              /* nslot chunks */
	const float *src;         /* a chunk's worth of values to copy */
	unsigned int nslot;
	_Atomic uint64_t written; /* chunks the producer has written */
	_Atomic uint64_t read;    /* chunks the consumer has summed */
	_Atomic bool stop;
};

static void *xcore_producer(void *arg)
{
	struct xcore *x = arg;

	for (uint64_t i = 0; !atomic_load_explicit(&x->stop, memory_order_relaxed); i++) {
		while (i - atomic_load_explicit(&x->read, memory_order_acquire) >= x->nslot)
			if (atomic_load_explicit(&x->stop, memory_order_relaxed))
				return NULL;
		memcpy(x->slot + (i % x->nslot) * CHUNK_ELEMS, x->src, sizeof(float) * CHUNK_ELEMS);
		atomic_store_explicit(&x->written, i + 1, memory_order_release);
	}
	return NULL;
}

/*
 * Pushed bytes/s that one core sums with sg_sum over jumbo chunks and N
 * inputs, with no packets at all: each round copies its first push into the
 * next of @p nacc accumulators and adds the other N - 1 there, the pushes
 * read in turn from @p nin chunks. With @p xcore, another thread writes each
 * push's chunk just before (both threads spin; the OS places them on two
 * CPUs). Median of 5 runs of 0.2 s; 0 if memory or the thread is missing.
 */
static double sum_only_gbps(unsigned int workers, unsigned int nacc, unsigned int nin,
			    bool xcore)
{
	size_t asz = sizeof(float) * CHUNK_ELEMS * nacc, isz = sizeof(float) * CHUNK_ELEMS * nin;
	float *acc = sg_sum_numa_alloc(asz, -1), *src = malloc(sizeof(float) * CHUNK_ELEMS);
	struct xcore x = {.slot = sg_sum_numa_alloc(isz, -1), .src = src, .nslot = nin};
	double v[5] = {0};
	uint64_t i = 0;
	pthread_t t;
	int r = 0;

	if (acc == NULL || x.slot == NULL || src == NULL)
		goto out;
	for (unsigned int k = 0; k < CHUNK_ELEMS; k++)
		src[k] = (float)(k % 61);
	for (size_t k = 0; k < (size_t)CHUNK_ELEMS * nin; k++)
		x.slot[k] = (float)(k % 61);
	if (xcore && pthread_create(&t, NULL, xcore_producer, &x) != 0)
		goto out;
	for (; r < 5; r++) {
		double t0 = sigma_bench_now(), t1;
		uint64_t bytes = 0;

		do {
			for (unsigned int c = 0; c < nacc; c++)
				for (unsigned int w = 0; w < workers; w++, i++) {
					const float *in = x.slot + (i % nin) * CHUNK_ELEMS;
					float *a = acc + (size_t)c * CHUNK_ELEMS;

					while (xcore && atomic_load_explicit(&x.written,
							      memory_order_acquire) <= i)
						;
					if (w == 0)
						sg_sum_copy(SG_DTYPE_FP32, a, in, CHUNK_ELEMS);
					else
						sg_sum_add(SG_DTYPE_FP32, a, in, CHUNK_ELEMS);
					atomic_store_explicit(&x.read, i + 1, memory_order_release);
					bytes += CHUNK_ELEMS * 4;
				}
			t1 = sigma_bench_now();
		} while (t1 - t0 < 0.2);
		v[r] = (double)bytes * 8 / (t1 - t0) / 1e9;
	}
	if (xcore) {
		atomic_store(&x.stop, true);
		pthread_join(t, NULL);
	}
out:
	sg_sum_numa_free(acc, asz);
	sg_sum_numa_free(x.slot, isz);
	free(src);
	return r == 5 ? sigma_bench_median(v, 5) : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sigma-bench pipeline [--runs N] [--seconds S] [--workers N] [--quick]\n"
		"                           [--ring-only|--memif-only] [--idle busy|sleep]\n"
		"                           [--rounds R] [--retrans-ms MS] [--auth]\n"
		"  sigmad's pipeline against a generator acting as N workers: on a ring port\n"
		"  (generator on the main lcore) and over net_memif (generator in a second\n"
		"  process). EAL runs without hugepages; lcores float over all CPUs.\n"
		"  --rounds R: each run pushes exactly R rounds of every chunk (--seconds is\n"
		"  then only a time limit), for instruction counts under callgrind;\n"
		"  --retrans-ms: the workers' retransmit timeout (default 50; raise it under\n"
		"  valgrind so that slowness does not cause retransmits).\n"
		"  --auth: each scenario again with auth = mac (pushes signed per rank, MACs\n"
		"  checked, RESULTs signed), beside its unauthenticated baseline of this run.\n");
}

/* One run in a forked child, so that each run gets a fresh EAL. */
static int run_once(const struct scenario *sc, const struct sg_dp_config *c,
		    const struct sg_dp_loop_conf *lc, struct sg_dp_loop_result *res, char *err,
		    size_t errlen)
{
	struct {
		int rc;
		char err[256];
		struct sg_dp_loop_result res;
	} msg;
	int fds[2], status;
	pid_t pid;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char cpus[32];

	memset(res, 0, sizeof(*res));
	snprintf(cpus, sizeof(cpus), "(0-%ld)", ncpu > 1 ? ncpu - 1 : 0);
	if (pipe(fds) < 0)
		return -errno;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char sock[96], prefix[64], lcores[64], dl[64], gl[64];

		close(fds[0]);
		memset(&msg, 0, sizeof(msg));
		if (sc->memif) {
			struct sg_dp_memif_conf mc = {.socket_path = sock, .dut_lcores = dl,
						      .gen_lcores = gl, .max_life_s = 600};

			snprintf(sock, sizeof(sock), "/tmp/sg_bench_memif_%d.sock", (int)getpid());
			snprintf(dl, sizeof(dl), "(0-2)@%s", cpus);
			snprintf(gl, sizeof(gl), "0@%s", cpus);
			msg.rc = sg_dp_memif_run(c, lc, &mc, &msg.res, msg.err, sizeof(msg.err));
		} else {
			char *eal[] = {"sigma-bench", "--no-huge", "--no-shconf", "--no-pci", "-m",
				       "1024", prefix, lcores, "--log-level=lib.eal:error", NULL};

			snprintf(prefix, sizeof(prefix), "--file-prefix=sg_bench_pipe_%d",
				 (int)getpid());
			snprintf(lcores, sizeof(lcores), "--lcores=(0-2)@%s", cpus);
			if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0) {
				snprintf(msg.err, sizeof(msg.err), "EAL: %s",
					 rte_strerror(rte_errno));
				msg.rc = -1;
			} else {
				rte_log_set_level_pattern("sigma.*", RTE_LOG_WARNING);
				msg.rc = sg_dp_loopback_run(c, lc, &msg.res, NULL, msg.err,
							    sizeof(msg.err));
				sg_dp_eal_cleanup();
			}
		}
		if (write(fds[1], &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &msg, sizeof(msg)) != (ssize_t)sizeof(msg)) {
		msg.rc = -EIO;
		snprintf(msg.err, sizeof(msg.err), "the run's process died");
	}
	close(fds[0]);
	waitpid(pid, &status, 0);
	*res = msg.res;
	if (msg.rc < 0)
		snprintf(err, errlen, "%s", msg.err);
	return msg.rc;
}

int sigma_bench_pipeline(int argc, char **argv)
{
	static const struct option opts[] = {
		{"runs", required_argument, NULL, 'r'}, {"seconds", required_argument, NULL, 's'},
		{"workers", required_argument, NULL, 'w'}, {"quick", no_argument, NULL, 'q'},
		{"ring-only", no_argument, NULL, 'R'}, {"memif-only", no_argument, NULL, 'M'},
		{"idle", required_argument, NULL, 'i'}, {"rounds", required_argument, NULL, 'n'},
		{"retrans-ms", required_argument, NULL, 't'}, {"auth", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	unsigned int runs = 5, workers = 4, rounds = 0, retrans_ms = 50;
	double secs = 2.0, base, hot, xc;
	char err[512];
	int opt, only = 0, bad = 0;
	unsigned int sleep_us = 0; /* 0: busy polling everywhere */
	bool ok = true, auth = false;
	struct sigma_bench_out out;
	struct sg_dp_config c0;
	uint32_t plain_chunk, auth_chunk;
	size_t ns = 0;

#define JSON(...) fprintf(out.f, __VA_ARGS__)

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': bad |= sigma_bench_parse_uint(optarg, 0, UINT_MAX, &runs) < 0; break;
		case 's':
			bad |= sg_parse_double(optarg, -DBL_MAX, DBL_MAX, &secs) != 0;
			break;
		case 'w': bad |= sigma_bench_parse_uint(optarg, 0, UINT_MAX, &workers) < 0; break;
		case 'n': bad |= sigma_bench_parse_uint(optarg, 1, UINT32_MAX / 2, &rounds) < 0; break;
		case 't': bad |= sigma_bench_parse_uint(optarg, 1, 3600000, &retrans_ms) < 0; break;
		case 'q': runs = 3; secs = 0.5; break;
		case 'a': auth = true; break;
		case 'R': only = 1; break;
		case 'M': only = 2; break;
		case 'i':
			if (!strcmp(optarg, "sleep"))
				sleep_us = 20;
			else if (strcmp(optarg, "busy")) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (bad || runs < 1 || runs > MAX_RUNS || !(secs > 0 && secs < 600) || workers < 1 ||
	    workers > 64) {
		fprintf(stderr, "pipeline: --runs 1..%d, --seconds > 0, --workers 1..64\n",
			MAX_RUNS);
		return 2;
	}
	if (sigma_bench_out_open(&out) < 0)
		return 1;
	base = sum_only_gbps(workers, 2 * WINDOW, WINDOW * workers, false);
	hot = sum_only_gbps(workers, 4096, 64, false);
	xc = sum_only_gbps(workers, 2 * WINDOW, WINDOW * workers, true);
	/* the chunk payload is the config's (the MTU's), less the MAC trailer with auth */
	sg_dp_config_defaults(&c0);
	plain_chunk = sg_dp_job_chunk_bytes(&c0, &c0.jobs[0]);
	c0.jobs[0].auth = true;
	auth_chunk = sg_dp_job_chunk_bytes(&c0, &c0.jobs[0]);
	printf("pipeline: %u workers, fp32, %u-byte chunks (%u MTU)", workers, plain_chunk,
	       (unsigned int)c0.mtu);
	if (auth)
		printf(", %u with auth", auth_chunk);
	printf("; median of %u runs of %.1f s; %ld CPUs; idle policy %s\n", runs, secs,
	       sysconf(_SC_NPROCESSORS_ONLN), sleep_us ? "sleep (node and generator)" : "busy");
	printf("reference: one core summing the same chunks with sg_sum (%s), no packets, over the "
	       "pipeline's working set\n(%u accumulators, %u pushes in flight: %.1f MB): %.2f Gbps "
	       "of pushed data (x_sum);\nearlier reference, 64 hot inputs into 36 MB of accumulators: "
	       "%.2f Gbps (x_hot);\ncross-core bound, the same sums of payloads that another thread "
	       "has just written: %.2f Gbps (x_xcore);\ntarget: 10 x BytePS (%.1f Gbps) = %.1f "
	       "Gbps\n\n",
	       sg_sum_impl_name(sg_sum_get_impl()), 2 * WINDOW, WINDOW * workers,
	       8920.0 * (2 * WINDOW + WINDOW * workers) / 1e6, base, hot, xc, BYTEPS_GBPS,
	       10 * BYTEPS_GBPS);
	printf("%-46s %9s %9s %9s %8s %8s %8s %8s  %s\n", "scenario", "Gbps", "Mpps_in",
	       "Mpps_all", "x_sum", "x_hot", "x_xcore", "x_target", "busy% per lcore");
	/* chunk_bytes: the plain runs' (and x_sum's); each scenario gives its own */
	JSON("{\"bench\":\"pipeline\",\"idle\":\"%s\",\"workers\":%u,\"chunk_bytes\":%u,"
	     "\"runs\":%u,\"seconds\":%.2f,\"sum_only_gbps\":%.3f,\"sum_hot_gbps\":%.3f,\"xcore_gbps\":%.3f,"
	     "\"target_gbps\":%.1f,\"auth\":%s,\"scenarios\":[",
	     sleep_us ? "sleep" : "busy", workers, plain_chunk, runs, secs, base, hot, xc,
	     10 * BYTEPS_GBPS, auth ? "true" : "false");
	fflush(stdout);
	/* with --auth each scenario runs twice, plain first: the baseline of the same run */
	for (size_t sa = 0; sa < 2 * (sizeof(scenarios) / sizeof(scenarios[0])); sa++) {
		const struct scenario *sc = &scenarios[sa / 2];
		bool with_auth = sa % 2;
		static double plain_gbps;
		double gbps[MAX_RUNS], mpps[MAX_RUNS], mpps_all[MAX_RUNS];
		double busy[MAX_RUNS][SG_DP_MAX_LAYOUT];
		double g, m, ma, bl[SG_DP_MAX_LAYOUT];
		unsigned int nl = 0;
		struct sg_dp_config c;
		char line[512] = "";
		int len = 0;

		if ((only == 1 && sc->memif) || (only == 2 && !sc->memif) || (with_auth && !auth))
			continue;
		sg_dp_config_defaults(&c);
		c.n_lcores = 0;
		sg_dp_layout_parse(&c, SG_ROLE_RTC, sc->rtc, err, sizeof(err));
		c.udp_checksum = sc->udp_checksum;
		c.jobs[0].workers = workers;
		/* a fixed key: what it costs does not depend on its bytes */
		c.jobs[0].auth = with_auth;
		memset(c.jobs[0].auth_key, 0x5a, sizeof(c.jobs[0].auth_key));
		c.mbufs = 16384;
		c.log_level = RTE_LOG_WARNING;
		c.idle = sleep_us ? SG_IDLE_SLEEP : SG_IDLE_POLL;
		c.idle_sleep_us = sleep_us ? sleep_us : c.idle_sleep_us;
		for (unsigned int r = 0; r < runs; r++) {
			struct sg_dp_loop_conf lc = {.rounds = rounds ? rounds : UINT32_MAX / 2,
						     .window = WINDOW,
						     .retrans_us = (uint64_t)retrans_ms * 1000,
						     .seed = r + 1,
						     .timeout_s = secs, .gen_sleep_us = sleep_us};
			struct sg_dp_loop_result res = {0};

			if (run_once(sc, &c, &lc, &res, err, sizeof(err)) < 0) {
				fprintf(stderr, "pipeline: %s: %s\n", sc->name, err);
				fclose(out.f);
				free(out.buf);
				return 1;
			}
			if (res.gen.results_bad || res.gen.rounds_done == 0) {
				fprintf(stderr, "pipeline: %s: %lu wrong results, %lu rounds: FAILED\n",
					sc->name, (unsigned long)res.gen.results_bad,
					(unsigned long)res.gen.rounds_done);
				ok = false;
			}
			if (rounds && res.rc != 0) {
				fprintf(stderr, "pipeline: %s: %u rounds not done in %.1f s: FAILED\n",
					sc->name, rounds, secs);
				ok = false;
			}
			gbps[r] = (double)res.gen.bytes_pushed * 8 / res.seconds / 1e9;
			mpps[r] = (double)res.gen.pushes_sent / res.seconds / 1e6;
			mpps_all[r] = 0;
			nl = res.n_lcores;
			for (unsigned int i = 0; i < nl; i++) {
				const struct sg_dp_lcore_stats *st = &res.lcores[i];
				uint64_t tot = st->busy_cycles + st->idle_cycles;

				mpps_all[r] += (double)(st->rx_pkts + st->tx_pkts) / res.seconds / 1e6;
				busy[r][i] = tot ? 100.0 * (double)st->busy_cycles / (double)tot : 0;
			}
		}
		g = sigma_bench_median(gbps, runs);
		m = sigma_bench_median(mpps, runs);
		ma = sigma_bench_median(mpps_all, runs);
		for (unsigned int i = 0; i < nl; i++) {
			double v[MAX_RUNS];

			for (unsigned int r = 0; r < runs; r++)
				v[r] = busy[r][i];
			bl[i] = sigma_bench_median(v, runs);
			len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%.0f",
					i ? " / " : "", bl[i]);
		}
		printf("%-46s %9.2f %9.3f %9.3f %8.2f %8.2f %8.2f %8.2f  %s", with_auth ?
		       "  the same with auth = mac" : sc->name, g, m, ma,
		       base > 0 ? g / base : 0, hot > 0 ? g / hot : 0, xc > 0 ? g / xc : 0,
		       g / (10 * BYTEPS_GBPS), line);
		if (with_auth)
			printf("  (%.2f x plain)", plain_gbps > 0 ? g / plain_gbps : 0);
		printf("\n");
		JSON("%s{\"name\":\"%s\",\"transport\":\"%s\",\"reducers\":%u,\"udp_checksum\":%s,"
		     "\"chunk_bytes\":%u,\"auth\":%s,\"gbps\":%.3f,\"mpps_pushes\":%.4f,"
		     "\"mpps_all\":%.4f,"
		     "\"ratio_sum_only\":%.3f,\"ratio_sum_hot\":%.3f,\"ratio_xcore\":%.3f,"
		     "\"ratio_target\":%.3f,", ns++ ? "," : "",
		     sc->name, sc->memif ? "memif" : "ring", nl, sc->udp_checksum ? "true" : "false",
		     sg_dp_job_chunk_bytes(&c, &c.jobs[0]), with_auth ? "true" : "false", g, m, ma,
		     base > 0 ? g / base : 0,
		     hot > 0 ? g / hot : 0, xc > 0 ? g / xc : 0, g / (10 * BYTEPS_GBPS));
		/* the unauthenticated baseline measured just before, in this run */
		if (with_auth)
			JSON("\"plain_gbps\":%.3f,\"ratio_plain\":%.3f,", plain_gbps,
			     plain_gbps > 0 ? g / plain_gbps : 0);
		else
			plain_gbps = g;
		JSON("\"busy_pct\":[");
		for (unsigned int i = 0; i < nl; i++)
			JSON("%s%.1f", i ? "," : "", bl[i]);
		JSON("]}");
		fflush(stdout);
	}
	JSON("],\"ok\":%s}\n", ok ? "true" : "false");
#undef JSON
	printf("\n");
	return sigma_bench_out_write(&out, NULL) == 0 && ok ? 0 : 1;
}
