/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to "sigma-bench sum": the baselines built at -O3 -march=native
 * (bench_sum_base.c).
 */
#ifndef BENCH_SUM_H
#define BENCH_SUM_H

#include <stddef.h>
#include <stdint.h>

#include "sg_sum.h"

/** Read @p bytes of @p buf once, sequentially; returns a value to keep. */
uint64_t bench_read_stream(const void *buf, size_t bytes);

/** BytePS-style reducer: dst = src[0], then dst += src[j] one pass per j. */
void bench_plain_sum(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k, size_t n);

#endif /* BENCH_SUM_H */
