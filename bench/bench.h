/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Benchmark entry points of the dataplane helper, for sigma-bench to dispatch.
 */
#ifndef SG_BENCH_H
#define SG_BENCH_H

/**
 * `sigma-bench pipeline [--runs N] [--seconds S] [--workers N] [--quick]`:
 * sigmad's pipeline on ring ports with 1 and 2 reducer lcores. Starts EAL
 * itself. Prints a table and one JSON line. @return 0, 1 (failure), 2 (usage).
 */
int sg_bench_pipeline_main(int argc, char **argv);

/** The same, under sigma-bench's naming convention (sigma_bench_<name>). */
int sigma_bench_pipeline(int argc, char **argv);

#endif /* SG_BENCH_H */
