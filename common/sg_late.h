/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Straggler attribution: how late each rank of a job pushes, as a summation
 * node sees it (docs/dataplane-engine.md, "Lateness").
 *
 * A push's lateness is the time from the first push of its round (of that
 * key's chunk) to it: the round's first push is 0 late, and the last push of
 * a round completes it. The engine keeps, per job and rank, a log2 histogram
 * of lateness in microseconds, its sum, a moving average, and how many rounds
 * the rank completed (it came last). The engine fills these tables; the
 * dataplane sums the tables of its engines (sg_late_add()), and the control
 * plane and sigmactl read them. Pure C, library sg_types.
 */
#ifndef SG_LATE_H
#define SG_LATE_H

#include <stdint.h>

#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Buckets of a lateness histogram. Bucket 0 counts pushes under 1 µs late
 * (every round's first push), bucket b (1..SG_LATE_BUCKETS-2) those of
 * [2^(b-1), 2^b) µs, the last those of 2^(SG_LATE_BUCKETS-2) µs (4.2 s) or more.
 */
#define SG_LATE_BUCKETS 24

/** The moving average's weight of each new push: 1 / 2^SG_LATE_AVG_SHIFT. */
#define SG_LATE_AVG_SHIFT 4

/** One rank's lateness. */
struct sg_late_rank {
	uint64_t hist[SG_LATE_BUCKETS]; /**< pushes by lateness (see SG_LATE_BUCKETS) */
	uint64_t sum_ns;                /**< lateness of all its pushes, summed (ns) */
	uint64_t avg_ns;                /**< moving average of its pushes' lateness (ns) */
	uint64_t last;                  /**< rounds in which it was the last to push */
};

/** A job's lateness, rank by rank. */
struct sg_late {
	uint32_t nranks;                             /**< the job's N (ranks 0..N-1 are valid) */
	uint64_t rounds;                             /**< rounds timed: completed (sum of last) */
	struct sg_late_rank rank[SG_MAX_WORKERS];
};

/** Bucket of a lateness of @p ns nanoseconds. */
static inline unsigned int sg_late_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned int b = us == 0 ? 0 : 64u - (unsigned int)__builtin_clzll(us);

	return b < SG_LATE_BUCKETS - 1 ? b : SG_LATE_BUCKETS - 1;
}

/**
 * Upper bound of bucket @p b in µs, exclusive (Prometheus's `le`, which is
 * inclusive, differs by less than 1 µs): 1, 2, 4 ... 2^22; 0 for the last
 * bucket, which has none.
 */
static inline uint64_t sg_late_bucket_us(unsigned int b)
{
	return b < SG_LATE_BUCKETS - 1 ? 1ull << b : 0;
}

/** Pushes that @p r counts (its histogram's total). */
uint64_t sg_late_pushes(const struct sg_late_rank *r);

/**
 * Add @p from into @p to (the tables of one job on two engines): counts add,
 * the moving averages are weighed by the pushes each counts. @p to's nranks
 * becomes the larger of the two.
 */
void sg_late_add(struct sg_late *to, const struct sg_late *from);

/**
 * The straggler of @p l: the rank most often last (the lower rank on a tie).
 * @return the rank, or -1 when no round was timed.
 */
int sg_late_straggler(const struct sg_late *l);

/**
 * The lateness below which a share @p q (0..1) of rank @p r's pushes lie,
 * interpolated in its histogram's bucket as Prometheus's histogram_quantile()
 * does (ns; 0 if it counts no push).
 */
uint64_t sg_late_quantile_ns(const struct sg_late_rank *r, double q);

#ifdef __cplusplus
}
#endif

#endif /* SG_LATE_H */
