/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to bench/: what sigma-bench run's three files share: the options and
 * results of a sweep (bench_run.c runs it, bench_run_out.c writes its table,
 * JSON, CSV and plot, bench_compare.c runs it beside MPI and Gloo).
 */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sg_types.h"

#define RB_MAX_SIZES 16
#define RB_MAX_N 16
#define RB_MAX_DT 4
#define RB_MAX_NODES 8
#define RB_MAX_ITERS 50
#define RB_MAX_LAT 200000 /* partition latencies kept per (size, worker) */
#define RB_MAX_RUNS 15

struct rb_opts {
	unsigned int ns[RB_MAX_N], n_ns;
	uint64_t sizes[RB_MAX_SIZES];
	unsigned int n_sizes;
	enum sg_dtype dts[RB_MAX_DT];
	unsigned int n_dts;
	unsigned int iters, nodes, chunk, window;
	uint32_t partition;
	bool print_config;
	const char *telemetry; /* sigmad's telemetry socket: busy% per lcore */
	const char *memif;     /* sigmad's memif socket: workers use DPDK, worker r on id r */
	unsigned int memif_queues; /* RX queues per worker: sigmad's lcore count */
	unsigned int runs;     /* compare: whole sweeps, each point's median across them */
	bool threads;          /* compare --threads-baseline: node threads too, same run */
	uint8_t gso;           /* sigma_conf.udp_gso of the kernel-UDP workers (--no-gso) */
	int spin_us;           /* sigma_conf.spin_us and the node threads' (--spin-us) */
	bool sweep;            /* compare --sweep: MPI over shared memory and Gloo too */
	bool shm;              /* workers reach the node threads through shared memory */
	bool colocate;         /* --shm --colocate: N nodes, worker r over shm to node r alone,
				  kernel UDP to the others (BytePS with k = 0) */
	const char *shm_paths[RB_MAX_NODES]; /* ... their sockets (run_point() sets them) */
	uint32_t first_round;  /* round of every tensor's first push_pull (an attached node
				  keeps its jobs' rounds from one sweep to the next) */
	char attach[256];
	const char *json, *csv, *plot;
	bool quiet;
};

/* One point of a sweep: (N, dtype, size), measured. */
struct rb_result {
	unsigned int n;
	enum sg_dtype dt;
	uint64_t size;
	double t_med, algbw, busbw, goodput;
	double p50_us, p99_us, max_us;
	uint64_t retransmits, nacks, rx_dropped;
	unsigned int window;       /* the workers' window (libsigma's default for N and chunk) */
	double busy[RB_MAX_NODES]; /* node threads, or sigmad lcores (--telemetry) */
	unsigned int nbusy;
	bool busy_sigmad; /* busy[] came from sigmad's telemetry */
	bool ok;
};

/* ---- bench_run.c -------------------------------------------------------- */

/* `sigma-bench @p cmd --help` (run or compare). */
void rb_run_usage(FILE *f, const char *cmd);

/* Parse @p cmd's options into @p o. @return 0, 1 for --help, or -EINVAL (said why). */
int rb_parse_opts(int argc, char **argv, struct rb_opts *o, const char *cmd);

/* The [job N] sections a sigmad needs to serve the sweep (for --attach). */
void rb_print_sigmad_jobs(const struct rb_opts *o);

/*
 * The whole sweep: @p res gets n_ns * n_dts * n_sizes entries.
 * @return 0, or -EIO if a point failed (the others still run).
 */
int rb_sweep(const struct rb_opts *o, struct rb_result *res);

/* ---- bench_run_out.c ---------------------------------------------------- */

/* "4K", "16M" or the bytes. */
void rb_fmt_size(uint64_t b, char *out, size_t cap);

/* The table of @p n results on stdout. */
void rb_print_table(const struct rb_result *r, unsigned int n);

/* Sigma's path in compare's table, JSON and plot. */
const char *rb_path_label(const struct rb_opts *o);

/* The JSON of @p n results on @p f. */
void rb_write_json(FILE *f, const struct rb_opts *o, const struct rb_result *r, unsigned int n);

/* The CSV of @p n results into @p path. @return 0 or -errno. */
int rb_write_csv(const char *path, const struct rb_result *r, unsigned int n);

/*
 * Close the data file @p f (named @p dat) and start gnuplot writing @p path.
 * @return the pipe, or NULL (and @p dat removed) if gnuplot does not start.
 */
FILE *rb_gnuplot_open(FILE *f, const char *dat, const char *path);

/* The x axis's tics at the @p n sizes measured, labelled as the table does. */
void rb_gnuplot_size_tics(FILE *g, const uint64_t *sizes, unsigned int n);

/*
 * gnuplot: goodput per worker against size, one line per (N, dtype), into
 * @p path (PNG or SVG by its name). @return 0 or -errno.
 */
int rb_plot(const char *path, const struct rb_result *r, unsigned int n, const struct rb_opts *o);

#endif /* BENCH_RUN_H */
