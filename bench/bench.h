/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Subcommands of sigma-bench. Each prints a readable table on stderr and one
 * JSON object on stdout, and returns the process exit status.
 */
#ifndef SG_BENCH_H
#define SG_BENCH_H

/**
 * "gpu": pinned D2H/H2D against the PCIe bound of the GPU's link, the reduce
 * kernels against device copy bandwidth, and pipelined staging of a 64 MiB
 * tensor against the sum of its parts. Without a usable GPU it prints JSON
 * with "skipped": true and the reason, and returns 0.
 */
int sg_bench_gpu_main(int argc, char **argv);

#endif /* SG_BENCH_H */
