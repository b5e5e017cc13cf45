/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench compare: the sweep of sigma-bench run (bench_run.c), whole
 * sweeps several times, beside OpenMPI's MPI_Allreduce (with --sweep also over
 * shared memory, and Gloo's allreduce), each point's median across the runs,
 * and the ratios. With --auth, each run also sweeps without auth: the cost of
 * auth = mac, measured in the same run.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigma.h"
#include "sigma_job_conf.h"
#include "sigma_udpd.h"
#include "sigma_bench.h"
#include "sg_dp_pipeline.h"

#include "bench_run.h"

/*
 * The peers compare measures beside Sigma, each in every run: OpenMPI's
 * MPI_Allreduce over TCP loopback (always), and with --sweep also over shared
 * memory (the vader BTL) and Gloo's allreduce over its TCP transport.
 */
enum rb_peer_id { RB_MPI_TCP, RB_MPI_VADER, RB_GLOO, RB_NPEERS };

static const struct rb_peer {
	const char *key;   /* in the JSON */
	const char *label; /* in the table and the plot */
	const char *btl;   /* OpenMPI's BTLs; NULL: Gloo */
} rb_peers[RB_NPEERS] = {
	[RB_MPI_TCP] = {"mpi_tcp", "MPI TCP", "self,tcp --mca btl_tcp_if_include lo"},
	[RB_MPI_VADER] = {"mpi_vader", "MPI vader", "self,vader"},
	[RB_GLOO] = {"gloo", "Gloo TCP", NULL},
};

#ifndef SIGMA_GLOO_EXE
#define SIGMA_GLOO_EXE NULL
#endif

/* Build bench/mpi_allreduce.c with mpicc into @p exe. */
int sigma_bench_build_mpi(char *exe, size_t cap)
{
	char dir[] = "/tmp/sigma-mpi-XXXXXX", cmd[1024];

	if (mkdtemp(dir) == NULL)
		return -errno;
	snprintf(exe, cap, "%s/mpi_allreduce", dir);
	snprintf(cmd, sizeof(cmd), "mpicc -O2 -o %s %s", exe,
		 sigma_bench_path(SIGMA_SOURCE_ROOT "/bench/mpi_allreduce.c",
				  SIGMA_DATA_DIR "/bench/mpi_allreduce.c"));
	if (system(cmd) != 0) {
		fprintf(stderr, "sigma-bench: '%s' failed (install openmpi-bin libopenmpi-dev)\n",
			cmd);
		rmdir(dir);
		return -ENOENT;
	}
	return 0;
}

void sigma_bench_rm_mpi(const char *exe)
{
	char dir[256];

	unlink(exe);
	snprintf(dir, sizeof(dir), "%s", exe);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
}

/*
 * Run peer @p p for N ranks over the sweep's sizes; fills t[size] with the
 * median seconds its program reports, NaN where its sum was wrong. Both
 * programs print "allreduce BYTES SECONDS OK" per size.
 */
static int run_peer(enum rb_peer_id p, const char *mpi_exe, const char *gloo_exe,
		    const struct rb_opts *o, unsigned int n, double *t)
{
	char cmd[2048], line[256];
	int len;
	FILE *f;
	unsigned int got = 0;

	if (rb_peers[p].btl != NULL)
		len = snprintf(cmd, sizeof(cmd),
			       "mpirun --allow-run-as-root --oversubscribe -np %u --bind-to none "
			       "--mca btl %s --mca pml ob1 --mca oob_tcp_if_include lo %s %u", n,
			       rb_peers[p].btl, mpi_exe, o->iters);
	else
		len = snprintf(cmd, sizeof(cmd), "%s %u %u", gloo_exe, n, o->iters);
	for (unsigned int j = 0; j < o->n_sizes && len < (int)sizeof(cmd) - 32; j++)
		len += snprintf(cmd + len, sizeof(cmd) - len, " %" PRIu64, o->sizes[j]);
	snprintf(cmd + len, sizeof(cmd) - len, " 2>&1");
	for (unsigned int j = 0; j < o->n_sizes; j++)
		t[j] = NAN;
	f = popen(cmd, "r");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		uint64_t sz;
		double v;
		int ok;

		if (sscanf(line, "allreduce %" SCNu64 " %lf %d", &sz, &v, &ok) == 3) {
			for (unsigned int j = 0; j < o->n_sizes; j++)
				if (o->sizes[j] == sz) {
					t[j] = ok ? v : NAN;
					got++;
				}
		} else if (!o->quiet) {
			fprintf(stderr, "%s: %s", rb_peers[p].label, line);
		}
	}
	if (pclose(f) != 0 || got != o->n_sizes)
		return -EIO;
	return 0;
}

/* Fold one run's results @p cur into @p acc (run @p run); the times are kept apart. */
static void fold_run(struct rb_result *acc, const struct rb_result *cur, unsigned int run)
{
	bool ok = run == 0 || acc->ok;
	uint64_t re = run ? acc->retransmits : 0, na = run ? acc->nacks : 0;
	uint64_t rd = run ? acc->rx_dropped : 0;

	*acc = *cur; /* latencies and busy%: the last run's */
	acc->ok = ok && cur->ok;
	acc->retransmits = re + cur->retransmits;
	acc->nacks = na + cur->nacks;
	acc->rx_dropped = rd + cur->rx_dropped;
}

/* Each point's median time across @p runs (@p per: runs x n), and its bandwidths. */
static void median_runs(struct rb_result *r, const double *per, unsigned int runs,
			unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		double v[RB_MAX_RUNS];

		for (unsigned int k = 0; k < runs; k++)
			v[k] = per[(size_t)k * n + i];
		r[i].t_med = sigma_bench_median(v, runs);
		r[i].algbw = r[i].t_med > 0 ? (double)r[i].size / r[i].t_med : 0;
		r[i].busbw = r[i].algbw * 2 * (r[i].n - 1) / r[i].n;
		r[i].goodput = 2 * r[i].algbw;
	}
}

static void json_times(FILE *js, const char *name, const double *per, unsigned int runs,
		       unsigned int n, unsigned int i)
{
	fprintf(js, ",\"%s\":[", name);
	for (unsigned int k = 0; k < runs; k++)
		fprintf(js, "%s%.9g", k ? "," : "", isfinite(per[(size_t)k * n + i]) ?
			per[(size_t)k * n + i] : -1);
	fprintf(js, "]");
}

/* compare's measurements: Sigma's (and the node threads') results, each peer's times. */
struct rb_cmp {
	unsigned int n;              /* points: N values x sizes */
	struct rb_result *res, *thr, *cur;
	struct rb_result *pl;        /* --auth: the same sweep without auth, same runs */
	double *per_sg, *per_th, *per_pl; /* runs x n seconds */
	bool on[RB_NPEERS];
	double *per[RB_NPEERS];      /* runs x n seconds, NaN: failed or a wrong sum */
	double *med[RB_NPEERS];      /* n: median across runs, NaN if none */
	bool *ok[RB_NPEERS];         /* n: every run's sums right */
	const char *gloo_exe;
	char mpi_exe[256];
};

static void cmp_free(struct rb_cmp *c)
{
	free(c->res);
	free(c->thr);
	free(c->cur);
	free(c->pl);
	free(c->per_sg);
	free(c->per_th);
	free(c->per_pl);
	for (unsigned int p = 0; p < RB_NPEERS; p++) {
		free(c->per[p]);
		free(c->med[p]);
		free(c->ok[p]);
	}
}

static int cmp_alloc(struct rb_cmp *c, const struct rb_opts *o, bool sweep)
{
	size_t rn = (size_t)o->runs * c->n;
	bool bad;

	c->res = calloc(c->n, sizeof(*c->res));
	c->thr = calloc(c->n, sizeof(*c->thr));
	c->cur = calloc(c->n, sizeof(*c->cur));
	c->per_sg = calloc(rn, sizeof(double));
	c->per_th = calloc(rn, sizeof(double));
	c->pl = calloc(c->n, sizeof(*c->pl));
	c->per_pl = calloc(rn, sizeof(double));
	bad = !c->res || !c->thr || !c->cur || !c->per_sg || !c->per_th || !c->pl || !c->per_pl;
	c->gloo_exe = getenv("SIGMA_GLOO_ALLREDUCE") ? getenv("SIGMA_GLOO_ALLREDUCE") :
		sigma_bench_path(SIGMA_GLOO_EXE, SIGMA_LIBEXEC_DIR "/sigma-gloo-allreduce");
	for (unsigned int p = 0; p < RB_NPEERS; p++) {
		c->on[p] = p == RB_MPI_TCP || sweep;
		c->per[p] = calloc(rn, sizeof(double));
		c->med[p] = calloc(c->n, sizeof(double));
		c->ok[p] = calloc(c->n, sizeof(bool));
		bad |= !c->per[p] || !c->med[p] || !c->ok[p];
	}
	if (c->on[RB_GLOO] && (c->gloo_exe == NULL || access(c->gloo_exe, X_OK) != 0)) {
		fprintf(stderr, "sigma-bench: --sweep needs the Gloo baseline, %s: build with g++ "
				"and libgloo-dev installed (meson option gloo), or set "
				"SIGMA_GLOO_ALLREDUCE\n", c->gloo_exe ? c->gloo_exe :
				"not built");
		return -ENOENT;
	}
	return bad ? -ENOMEM : sigma_bench_build_mpi(c->mpi_exe, sizeof(c->mpi_exe));
}

/* --auth's baseline: the same sweep without auth (8920-byte chunks, not 8888), run @p run. */
static int cmp_plain(struct rb_cmp *c, const struct rb_opts *pl, unsigned int run)
{
	size_t at = (size_t)run * c->n;
	int rc = 0;

	if (!pl->quiet)
		fprintf(stderr, "sigma-bench: the same sweep without auth\n");
	if (rb_sweep(pl, c->cur) < 0)
		rc = -EIO;
	for (unsigned int i = 0; i < c->n; i++) {
		c->per_pl[at + i] = c->cur[i].t_med;
		fold_run(&c->pl[i], &c->cur[i], run);
	}
	return rc;
}

/* @p o's runs, interleaved, so that a change of load on a shared machine hits every peer. */
static int cmp_runs(struct rb_cmp *c, struct rb_opts *o)
{
	struct rb_opts th = *o, pl = *o;
	int rc = 0;

	pl.auth = false;
	/* the threads baseline: the same sweep through sigma-bench's own node threads */
	th.attach[0] = '\0';
	th.telemetry = NULL;
	th.memif = NULL;
	th.gso = SIGMA_GSO_DEFAULT; /* the default workers: --no-gso is the attached node's */
	th.shm = th.colocate = false; /* --colocate's baseline: the same nodes over UDP alone */
	for (unsigned int run = 0; run < o->runs; run++) {
		size_t at = (size_t)run * c->n;

		if (!o->quiet && o->runs > 1)
			fprintf(stderr, "sigma-bench: run %u of %u\n", run + 1, o->runs);
		for (unsigned int p = 0; p < RB_NPEERS; p++)
			for (unsigned int a = 0; a < o->n_ns && c->on[p]; a++) {
				if (!o->quiet)
					fprintf(stderr, "sigma-bench: %s, N=%u\n", rb_peers[p].label,
						o->ns[a]);
				if (run_peer(p, c->mpi_exe, c->gloo_exe, o, o->ns[a],
					     c->per[p] + at + (size_t)a * o->n_sizes) < 0) {
					fprintf(stderr, "sigma-bench: %s failed for N=%u\n",
						rb_peers[p].label, o->ns[a]);
					rc = -EIO;
				}
			}
		/* --auth: the plain sweep just before the authenticated one in even runs, just
		 * after in odd ones, so that a drift of load favours neither */
		if (o->auth && run % 2 == 0 && cmp_plain(c, &pl, run) < 0)
			rc = -EIO;
		if (rb_sweep(o, c->cur) < 0)
			rc = -EIO;
		for (unsigned int i = 0; i < c->n; i++) {
			c->per_sg[at + i] = c->cur[i].t_med;
			fold_run(&c->res[i], &c->cur[i], run);
		}
		if (o->auth && run % 2 == 1 && cmp_plain(c, &pl, run) < 0)
			rc = -EIO;
		/* an attached node keeps its jobs: the next sweep continues their rounds */
		o->first_round += o->iters + 1;
		if (!o->threads)
			continue;
		if (!o->quiet)
			fprintf(stderr, "sigma-bench: the same sweep through %u node thread(s)\n",
				th.nodes);
		if (rb_sweep(&th, c->cur) < 0)
			rc = -EIO;
		for (unsigned int i = 0; i < c->n; i++) {
			c->per_th[at + i] = c->cur[i].t_med;
			fold_run(&c->thr[i], &c->cur[i], run);
		}
	}
	sigma_bench_rm_mpi(c->mpi_exe);
	median_runs(c->res, c->per_sg, o->runs, c->n);
	if (o->threads)
		median_runs(c->thr, c->per_th, o->runs, c->n);
	if (o->auth)
		median_runs(c->pl, c->per_pl, o->runs, c->n);
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		for (unsigned int i = 0; i < c->n && c->on[p]; i++) {
			double v[RB_MAX_RUNS];

			c->ok[p][i] = true;
			for (unsigned int k = 0; k < o->runs; k++) {
				v[k] = c->per[p][(size_t)k * c->n + i];
				c->ok[p][i] &= isfinite(v[k]);
				v[k] = isfinite(v[k]) ? v[k] : INFINITY;
			}
			c->med[p][i] = sigma_bench_median(v, o->runs);
			if (!isfinite(c->med[p][i]))
				c->med[p][i] = NAN;
			if (!c->ok[p][i])
				rc = -EIO; /* a peer's wrong sum fails the comparison as Sigma's does */
		}
	return rc;
}

/* Peer time / Sigma time (> 1: Sigma is faster), NaN when either is missing. */
static double cmp_ratio(const struct rb_cmp *c, unsigned int p, unsigned int i)
{
	return c->res[i].t_med > 0 && isfinite(c->med[p][i]) ? c->med[p][i] / c->res[i].t_med :
							     NAN;
}

/* --auth: Sigma's time with auth / without (> 1: auth is slower), NaN when either is missing. */
static double cmp_auth_cost(const struct rb_cmp *c, unsigned int i)
{
	return c->res[i].t_med > 0 && c->pl[i].t_med > 0 ? c->res[i].t_med / c->pl[i].t_med : NAN;
}

static double json_num(double v)
{
	return isfinite(v) ? v : -1;
}

static void cmp_table(const struct rb_cmp *c, const struct rb_opts *o, const char *cpu)
{
	printf("CPU: %s; %u run(s), each figure the median across them; sigma: %s\n", cpu, o->runs,
	       rb_path_label(o));
	printf("%3s %8s %10s %13s", "N", "size", "sigma ms", "sigma MB/s");
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		if (c->on[p])
			printf(" %12s %9s", rb_peers[p].label, "ratio");
	if (o->threads)
		printf(" %12s %10s", "threads ms", "vs thr");
	if (o->auth)
		printf(" %10s %10s", "plain ms", "auth/plain");
	printf("  %s\n", "node busy%");
	for (unsigned int i = 0; i < c->n; i++) {
		const struct rb_result *r = &c->res[i];
		bool ok = r->ok && (!o->threads || c->thr[i].ok) && (!o->auth || c->pl[i].ok);
		char sz[32];

		rb_fmt_size(r->size, sz, sizeof(sz));
		printf("%3u %8s %10.3f %13.1f", r->n, sz, r->t_med * 1e3, r->algbw / 1e6);
		for (unsigned int p = 0; p < RB_NPEERS; p++)
			if (c->on[p]) {
				printf(" %9.3f ms %8.2fx", c->med[p][i] * 1e3, cmp_ratio(c, p, i));
				ok &= c->ok[p][i];
			}
		if (o->threads)
			printf(" %12.3f %9.2fx", c->thr[i].t_med * 1e3,
			       r->t_med > 0 ? c->thr[i].t_med / r->t_med : NAN);
		if (o->auth)
			printf(" %10.3f %9.3fx", c->pl[i].t_med * 1e3, cmp_auth_cost(c, i));
		/* busy% of each node thread or sigmad lcore over the point's whole sweep */
		for (unsigned int k = 0; k < r->nbusy; k++)
			printf("%s%.0f", k ? "/" : "  ", 100 * r->busy[k]);
		printf("%s\n", ok ? "" : "  FAILED");
	}
	if (o->auth)
		printf("sigma with auth = mac; plain = the same sweep without auth in the same "
		       "runs, auth/plain = their times' ratio (> 1: auth is slower)\n");
	printf("ratio = peer time / sigma time (> 1: sigma is faster)%s\n",
	       !o->threads ? "" : o->colocate ? "; threads = --nodes node threads over kernel "
	       "UDP alone, vs thr = their time / sigma time" :
	       "; vs thr = node threads' time / sigma time");
}

static void cmp_json(FILE *js, const struct rb_cmp *c, const struct rb_opts *o, const char *cpu)
{
	fprintf(js, "{\"bench\":\"compare\",\"baseline\":\"MPI_Allreduce (OpenMPI, TCP loopback)\","
		    "\"sigma_transport\":\"%s\",\"cpu\":\"%s\",\"runs\":%u,\"iters\":%u,"
		    "\"threads_baseline\":%s,\"worker_gso\":%s,\"window\":%u,\"auth\":%s,"
		    "\"peers\":[",
		rb_path_label(o), cpu,
		o->runs, o->iters,
		o->threads ? "true" : "false", o->gso != SIGMA_GSO_OFF ? "true" : "false", o->window,
		o->auth ? "true" : "false");
	for (unsigned int p = 0, k = 0; p < RB_NPEERS; p++)
		if (c->on[p])
			fprintf(js, "%s\"%s\"", k++ ? "," : "", rb_peers[p].key);
	fprintf(js, "],\"results\":[");
	for (unsigned int i = 0; i < c->n; i++) {
		const struct rb_result *r = &c->res[i];

		fprintf(js, "%s{\"n\":%u,\"bytes\":%" PRIu64 ",\"sigma_time_s\":%.9g,"
			    "\"mpi_time_s\":%.9g,\"sigma_algbw_Bps\":%.6g,\"mpi_algbw_Bps\":%.6g,"
			    "\"speedup_vs_mpi\":%.4f,\"sigma_ok\":%s,\"window\":%u,"
			    "\"busy_source\":\"%s\",\"node_busy\":[", i ? "," : "", r->n, r->size, r->t_med,
			json_num(c->med[RB_MPI_TCP][i]), r->algbw,
			json_num(r->size / c->med[RB_MPI_TCP][i]),
			json_num(cmp_ratio(c, RB_MPI_TCP, i)), r->ok ? "true" : "false", r->window,
			r->busy_sigmad ? "sigmad lcores" : "node threads");
		for (unsigned int k = 0; k < r->nbusy; k++)
			fprintf(js, "%s%.4f", k ? "," : "", r->busy[k]);
		fprintf(js, "]");
		if (o->threads)
			fprintf(js, ",\"threads_time_s\":%.9g,\"threads_algbw_Bps\":%.6g,"
				    "\"threads_ok\":%s,\"speedup_vs_threads\":%.4f,"
				    "\"threads_vs_mpi\":%.4f", c->thr[i].t_med, c->thr[i].algbw,
				c->thr[i].ok ? "true" : "false",
				json_num(r->t_med > 0 ? c->thr[i].t_med / r->t_med : NAN),
				json_num(c->thr[i].t_med > 0 ? c->med[RB_MPI_TCP][i] /
						c->thr[i].t_med : NAN));
		if (o->auth)
			fprintf(js, ",\"plain_time_s\":%.9g,\"plain_algbw_Bps\":%.6g,"
				    "\"plain_ok\":%s,\"auth_vs_plain\":%.4f", c->pl[i].t_med,
				c->pl[i].algbw, c->pl[i].ok ? "true" : "false",
				json_num(cmp_auth_cost(c, i)));
		json_times(js, "sigma_runs_s", c->per_sg, o->runs, c->n, i);
		if (o->auth)
			json_times(js, "plain_runs_s", c->per_pl, o->runs, c->n, i);
		json_times(js, "mpi_runs_s", c->per[RB_MPI_TCP], o->runs, c->n, i);
		if (o->threads)
			json_times(js, "threads_runs_s", c->per_th, o->runs, c->n, i);
		fprintf(js, ",\"peers\":{");
		for (unsigned int p = 0, k = 0; p < RB_NPEERS; p++) {
			if (!c->on[p])
				continue;
			fprintf(js, "%s\"%s\":{\"time_s\":%.9g,\"ok\":%s,\"ratio\":%.4f", k++ ? "," :
				"", rb_peers[p].key, json_num(c->med[p][i]),
				c->ok[p][i] ? "true" : "false", json_num(cmp_ratio(c, p, i)));
			json_times(js, "runs_s", c->per[p], o->runs, c->n, i);
			fprintf(js, "}");
		}
		fprintf(js, "}}");
	}
	fprintf(js, "]}\n");
}

/* gnuplot: each peer's time / Sigma's against size, one line per (peer, N). */
static int cmp_plot(const char *path, const struct rb_cmp *c, const struct rb_opts *o)
{
	char dat[] = "/tmp/sigma-bench-XXXXXX";
	int fd = mkstemp(dat), rc;
	unsigned int series = 0;
	FILE *f, *g;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		return -errno;
	/* one block per series, in the order the plot command names them */
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		for (unsigned int a = 0; a < o->n_ns && c->on[p]; a++, series++) {
			for (unsigned int j = 0; j < o->n_sizes; j++) {
				double v = cmp_ratio(c, p, a * o->n_sizes + j);

				if (isfinite(v))
					fprintf(f, "%" PRIu64 " %.6g\n", o->sizes[j], v);
			}
			fprintf(f, "\n\n");
		}
	g = rb_gnuplot_open(f, dat, path);
	if (g == NULL)
		return -errno;
	rb_gnuplot_size_tics(g, o->sizes, o->n_sizes);
	fprintf(g, "set logscale xy 2\nset xlabel 'tensor bytes'\nset ylabel 'peer time / sigma "
		   "time (> 1: sigma faster)'\nset key outside right\nset title "
		   "'sigma (%s) against each peer, median of %u runs'\nplot 1 with lines dt 2 "
		   "lc rgb 'black' title 'equal'", rb_path_label(o), o->runs);
	series = 0;
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		for (unsigned int a = 0; a < o->n_ns && c->on[p]; a++, series++)
			fprintf(g, ", '%s' index %u with linespoints title '%s N=%u'", dat, series,
				rb_peers[p].label, o->ns[a]);
	fprintf(g, "\n");
	rc = pclose(g);
	unlink(dat);
	return rc == 0 ? 0 : -EIO;
}

int sigma_bench_compare(int argc, char **argv)
{
	struct rb_opts o;
	struct rb_cmp c = {0};
	struct sigma_bench_out out = {0};
	char cpu[128];
	int rc = rb_parse_opts(argc, argv, &o, "compare");

	if (rc != 0) {
		rb_run_usage(rc > 0 ? stdout : stderr, "compare");
		return rc > 0 ? 0 : 2;
	}
	o.n_dts = 1;
	o.dts[0] = SG_DTYPE_FP32; /* MPI_FLOAT, MPI_SUM */
	if (o.print_config) {
		rb_print_sigmad_jobs(&o);
		return 0;
	}
	c.n = o.n_ns * o.n_sizes;
	if (cmp_alloc(&c, &o, o.sweep) < 0) {
		cmp_free(&c);
		return 1;
	}
	rc = cmp_runs(&c, &o);
	sigma_bench_cpu_model(cpu, sizeof(cpu));
	cmp_table(&c, &o, cpu);
	if (sigma_bench_out_open(&out) < 0) {
		rc = -ENOMEM;
	} else {
		cmp_json(out.f, &c, &o, cpu);
		if (sigma_bench_out_write(&out, o.json) < 0)
			rc = -EIO;
	}
	if (o.plot != NULL && cmp_plot(o.plot, &c, &o) < 0) {
		fprintf(stderr, "sigma-bench: gnuplot failed (is gnuplot-nox installed?)\n");
		rc = -EIO;
	}
	cmp_free(&c);
	return rc < 0 ? 1 : 0;
}
