/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench run's output (bench_run.h): the table on stdout, and the JSON,
 * CSV and gnuplot files of a sweep's results.
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

void rb_fmt_size(uint64_t b, char *out, size_t cap)
{
	if (b >= (1 << 20) && b % (1 << 20) == 0)
		snprintf(out, cap, "%" PRIu64 "M", b >> 20);
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(out, cap, "%" PRIu64 "K", b >> 10);
	else
		snprintf(out, cap, "%" PRIu64, b);
}

void rb_print_table(const struct rb_result *r, unsigned int n)
{
	printf("%3s %6s %8s %10s %10s %10s %10s %9s %9s %9s %8s %7s\n", "N", "dtype", "size",
	       "time ms", "algbw MB/s", "busbw MB/s", "gput MB/s", "p50 us", "p99 us", "max us",
	       "retrans", "busy%");
	for (unsigned int i = 0; i < n; i++) {
		char sz[32];
		double busy = 0;

		for (unsigned int k = 0; k < r[i].nbusy; k++)
			busy = r[i].busy[k] > busy ? r[i].busy[k] : busy;
		rb_fmt_size(r[i].size, sz, sizeof(sz));
		printf("%3u %6s %8s %10.3f %10.1f %10.1f %10.1f %9.0f %9.0f %9.0f %8" PRIu64
		       " %6.0f%%%s\n", r[i].n, sg_dtype_name(r[i].dt), sz, r[i].t_med * 1e3,
		       r[i].algbw / 1e6, r[i].busbw / 1e6, r[i].goodput / 1e6, r[i].p50_us,
		       r[i].p99_us, r[i].max_us, r[i].retransmits, 100 * busy,
		       r[i].ok ? "" : "  FAILED");
	}
}

/* Sigma's path in compare's table, JSON and plot. */
const char *rb_path_label(const struct rb_opts *o)
{
	if (o->colocate)
		return "colocated: shared memory + kernel UDP";
	return o->memif != NULL ? "DPDK memif" : o->shm ? "shared memory" : "kernel UDP";
}

static const char *transport_name(const struct rb_opts *o)
{
	return o->memif != NULL ? "dpdk" : o->colocate ? "shm+udp" : o->shm ? "shm" : "udp";
}

void rb_write_json(FILE *f, const struct rb_opts *o, const struct rb_result *r,
		       unsigned int n)
{
	fprintf(f, "{\"bench\":\"run\",\"transport\":\"%s\",\"results\":[",
		transport_name(o));
	for (unsigned int i = 0; i < n; i++) {
		fprintf(f, "%s{\"n\":%u,\"dtype\":\"%s\",\"bytes\":%" PRIu64 ",\"ok\":%s,"
			   "\"time_s\":%.9g,\"algbw_Bps\":%.6g,\"busbw_Bps\":%.6g,"
			   "\"goodput_per_worker_Bps\":%.6g,\"part_latency_us\":{\"p50\":%.3f,"
			   "\"p99\":%.3f,\"max\":%.3f},\"retransmits\":%" PRIu64 ",\"nacks\":%"
			   PRIu64 ",\"rx_dropped\":%" PRIu64 ",\"window\":%u,\"busy_source\":\"%s\","
			   "\"node_busy\":[",
			i ? "," : "", r[i].n, sg_dtype_name(r[i].dt),
			r[i].size, r[i].ok ? "true" : "false", r[i].t_med, r[i].algbw, r[i].busbw,
			r[i].goodput, r[i].p50_us, r[i].p99_us, r[i].max_us, r[i].retransmits,
			r[i].nacks, r[i].rx_dropped, r[i].window,
			r[i].busy_sigmad ? "sigmad lcores" : "node threads");
		for (unsigned int k = 0; k < r[i].nbusy; k++)
			fprintf(f, "%s%.4f", k ? "," : "", r[i].busy[k]);
		fprintf(f, "]}");
	}
	fprintf(f, "]}\n");
}

int rb_write_csv(const char *path, const struct rb_result *r, unsigned int n)
{
	struct sigma_bench_out out;
	FILE *f;

	if (sigma_bench_out_open(&out) < 0)
		return -ENOMEM;
	f = out.f;
	fprintf(f, "n,dtype,bytes,ok,time_s,algbw_Bps,busbw_Bps,goodput_per_worker_Bps,"
		   "p50_us,p99_us,max_us,retransmits,nacks\n");
	for (unsigned int i = 0; i < n; i++)
		fprintf(f, "%u,%s,%" PRIu64 ",%d,%.9g,%.6g,%.6g,%.6g,%.3f,%.3f,%.3f,%" PRIu64
			   ",%" PRIu64 "\n", r[i].n, sg_dtype_name(r[i].dt), r[i].size, r[i].ok,
			r[i].t_med, r[i].algbw, r[i].busbw, r[i].goodput, r[i].p50_us, r[i].p99_us,
			r[i].max_us, r[i].retransmits, r[i].nacks);
	return sigma_bench_out_write(&out, path);
}

/* Close the data file @p f, start gnuplot writing @p path; on failure @p dat is removed. */
FILE *rb_gnuplot_open(FILE *f, const char *dat, const char *path)
{
	FILE *g;

	fclose(f);
	g = popen("gnuplot", "w");
	if (g == NULL) {
		unlink(dat);
		return NULL;
	}
	fprintf(g, "set terminal %s size 800,500\nset output '%s'\nset grid\n",
		strstr(path, ".png") ? "pngcairo" : "svg", path);
	return g;
}

/*
 * The x axis's tics at the sizes measured, labelled as the table does (4K, 64K,
 * 1M): gnuplot's own labels for a log scale read 1.04858x10^6.
 */
void rb_gnuplot_size_tics(FILE *g, const uint64_t *sizes, unsigned int n)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	char sz[32];

	fprintf(g, "set xtics (");
	for (unsigned int i = 0; i < n; i++) {
		rb_fmt_size(sizes[i], sz, sizeof(sz));
		fprintf(g, "%s\"%s\" %" PRIu64, i ? ", " : "", sz, sizes[i]);
		lo = sizes[i] < lo ? sizes[i] : lo;
		hi = sizes[i] > hi ? sizes[i] : hi;
	}
	/* a margin on both sides, so that the end sizes' tics are drawn too */
	fprintf(g, ")\nset xrange [%.6g:%.6g]\n", lo / 1.25, hi * 1.25);
}

/* gnuplot: goodput per worker against size, one line per (N, dtype). */
int rb_plot(const char *path, const struct rb_result *r, unsigned int n,
		const struct rb_opts *o)
{
	char dat[] = "/tmp/sigma-bench-XXXXXX";
	int fd = mkstemp(dat);
	FILE *f, *g;
	unsigned int series = 0;
	int rc;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		return -errno;
	for (unsigned int i = 0; i < n; i++) {
		if (i > 0 && (r[i].n != r[i - 1].n || r[i].dt != r[i - 1].dt)) {
			fprintf(f, "\n\n");
			series++;
		}
		fprintf(f, "%" PRIu64 " %.6g\n", r[i].size, r[i].goodput / 1e6);
	}
	g = rb_gnuplot_open(f, dat, path);
	if (g == NULL)
		return -errno;
	rb_gnuplot_size_tics(g, o->sizes, o->n_sizes);
	fprintf(g, "set logscale x 2\nset xlabel 'tensor bytes'\nset ylabel 'goodput per worker "
		   "(MB/s)'\nset key left top\nset title 'sigma push_pull over kernel "
		   "UDP'\nplot ");
	for (unsigned int sidx = 0, i = 0; sidx <= series; sidx++) {
		fprintf(g, "%s'%s' index %u with linespoints title 'N=%u %s'", sidx ? ", " : "",
			dat, sidx, r[i].n, sg_dtype_name(r[i].dt));
		while (i + 1 < n && r[i + 1].n == r[i].n && r[i + 1].dt == r[i].dt)
			i++;
		i++;
	}
	fprintf(g, "\n");
	rc = pclose(g);
	unlink(dat);
	return rc == 0 ? 0 : -EIO;
}
