/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * sigma-bench: one executable, one subcommand per benchmark.
 *
 * To add a subcommand, add one line X(name, "help") to SIGMA_BENCH_COMMANDS
 * and define int sigma_bench_<name>(int argc, char **argv) in a file listed in
 * sigma_bench_sources (bench/meson.build). argv[0] is the subcommand's name.
 * A subcommand prints a readable table on stdout and JSON (to stdout, or to a
 * file with --json FILE) and returns 0, or prints why it failed and returns
 * non-zero. The helpers below are bench_util.c's (the subcommands share them;
 * sigma_bench.c only dispatches), except sigma_bench_build_mpi() and
 * sigma_bench_rm_mpi(), which are compare's (bench_compare.c).
 */
#ifndef SIGMA_BENCH_H
#define SIGMA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sg_parse.h"
#include "sg_types.h"

#define SIGMA_BENCH_COMMANDS(X)                                                                    \
	X(sum, "summation kernels: GB/s per dtype, implementation and k, against bounds")           \
	X(engine, "aggregation engine: chunks/s and GB/s pushed per dtype, N and chunk size")      \
	X(pipeline, "sigmad lcore pipeline, ring and memif: Gbps aggregated, Mpps, busy%")         \
	X(gpu, "GPU staging: pinned copies, reduce kernels, pipelined staging (needs a GPU)")      \
	X(model, "BytePS split and predicted times: sigma vs all-reduce vs PS (n, k, B, M)")       \
	X(run, "N worker processes push_pull a size sweep through summation nodes")               \
	X(compare, "the run sweep side by side with OpenMPI's MPI_Allreduce, with the ratio") \
	X(cluster, "the BytePS split on namespaces with shaped links: sigma vs model vs MPI vs PS") \
	/* end of list */

#define SIGMA_BENCH_DECLARE(name, help) int sigma_bench_##name(int argc, char **argv);
SIGMA_BENCH_COMMANDS(SIGMA_BENCH_DECLARE)
#undef SIGMA_BENCH_DECLARE

/** Seconds on a monotonic clock. */
double sigma_bench_now(void);

/**
 * CPU seconds used by the calling thread. Unlike sigma_bench_now(), time the
 * thread spends descheduled (other processes on a shared machine) does not
 * count; cache and memory contention still does.
 */
double sigma_bench_thread_cpu_now(void);

/**
 * A file sigma-bench runs or compiles (a script, bench/mpi_allreduce.c, a helper
 * program): @p built, in the source or build tree this sigma-bench came from,
 * while it exists, else @p installed, where `meson install` put it (under
 * SIGMA_DATA_DIR or SIGMA_LIBEXEC_DIR). Never NULL unless both are.
 */
const char *sigma_bench_path(const char *built, const char *installed);

/* Where those files are: the tree's, and the installed ones (bench/meson.build). */
#ifndef SIGMA_SOURCE_ROOT
#define SIGMA_SOURCE_ROOT "."
#endif
#ifndef SIGMA_DATA_DIR
#define SIGMA_DATA_DIR "/usr/local/share/sigma"
#endif
#ifndef SIGMA_LIBEXEC_DIR
#define SIGMA_LIBEXEC_DIR "/usr/local/libexec/sigma"
#endif

/** Median of @p n doubles (reorders @p v). */
double sigma_bench_median(double *v, size_t n);

/** The CPU's model name (/proc/cpuinfo, as lscpu shows it) into @p buf; "unknown" if none. */
const char *sigma_bench_cpu_model(char *buf, size_t len);

/**
 * Strict option value: a whole decimal number in [@p lo, @p hi]
 * (sg_parse_u64()). Signs, spaces, leading zeros and trailing characters
 * ("7x") are refused, where atoi() would silently give another value.
 * @return 0 with *out set, or -EINVAL.
 */
int sigma_bench_parse_uint(const char *s, unsigned int lo, unsigned int hi, unsigned int *out);

/**
 * A number followed by a unit of letters ("1.5M", "10gbit", "4096"): the
 * number (sg_parse_double(), > 0) in *v, and @p s's trailing letters, possibly
 * "", in *unit. @return 0, or -EINVAL.
 */
int sigma_bench_parse_unit(const char *s, double *v, const char **unit);

/**
 * A size with an optional K, M or G suffix (powers of 1024) and an optional B:
 * "64K", "1.5M", "4096". @return 0 with *out set (at most 1 GiB), or -EINVAL.
 */
int sigma_bench_parse_size(const char *s, uint64_t *out);

/**
 * Rank @p r's input of @p n elements of @p dt (fp32, fp64, int32 or int64):
 * element i is (i % 509) + r, so that the sum over N ranks, N(i % 509) +
 * N(N-1)/2, is exact in each of those dtypes.
 */
void sigma_bench_fill(void *buf, enum sg_dtype dt, uint64_t n, unsigned int r);

/** Elements of @p buf that differ from the sum over @p nw ranks of sigma_bench_fill(). */
uint64_t sigma_bench_count_bad(const void *buf, enum sg_dtype dt, uint64_t n, unsigned int nw);

/**
 * Build bench/mpi_allreduce.c with mpicc into a new temporary folder; @p exe
 * gets the program's path. @return 0, or -errno (said why on stderr).
 */
int sigma_bench_build_mpi(char *exe, size_t cap);

/** Remove what sigma_bench_build_mpi() made. */
void sigma_bench_rm_mpi(const char *exe);

/** A document (JSON, CSV) built in memory, then written whole. */
struct sigma_bench_out {
	FILE *f;    /**< print the document here */
	char *buf;  /**< (the memory stream's) */
	size_t len;
};

/**
 * Start a document in memory: print it to o->f, then sigma_bench_out_write().
 * It grows as needed, so nothing is cut. @return 0, or -errno (reported).
 */
int sigma_bench_out_open(struct sigma_bench_out *o);

/**
 * Write the document to @p path (stdout when NULL) and free it. Every step
 * is checked: the memory stream, the open, the write and the close (or the
 * flush of stdout); a failure is reported on stderr with the path.
 * @return 0 or -errno.
 */
int sigma_bench_out_write(struct sigma_bench_out *o, const char *path);

#endif /* SIGMA_BENCH_H */
