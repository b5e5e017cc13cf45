/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the summation tests: a seeded generator, input fillers
 * that mix ordinary values with the special ones, and comparison of results
 * (bitwise, except that any NaN matches any NaN: which of two NaN inputs wins
 * depends on operand order the compiler may swap, see test_sum_kernels.c).
 */
#ifndef SUM_TEST_UTIL_H
#define SUM_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sg_sum.h"

/* xorshift64*: deterministic, so a failure can be replayed. */
/*
 * Make @p impl the one that runs, if this CPU has it (a line says so if not).
 * @return whether it runs.
 */
static inline bool st_use_impl(int impl)
{
	if (!sg_sum_impl_supported(impl)) {
		printf("%s: not on this CPU, not tested\n", sg_sum_impl_name(impl));
		return false;
	}
	return sg_sum_set_impl(impl) == 0;
}

static inline uint64_t st_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static inline uint32_t st_f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float st_u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/*
 * One random element of @dt at @p. Three kinds, chosen per element: any bit
 * pattern (NaN, Inf, subnormals, huge and tiny values), values of similar
 * magnitude (so that sums round and rounding ties occur), and small integers
 * (exact sums, cancellation to +-0).
 */
static inline void st_fill_one(enum sg_dtype dt, void *p, uint64_t *s)
{
	uint64_t r = st_rand(s);
	unsigned int kind = r % 8;
	uint64_t bits = st_rand(s);

	switch (dt) {
	case SG_DTYPE_FP32: {
		/* kind 1-4: 0.5 <= |f| < 8, both signs. */
		float f = kind == 0  ? st_u2f((uint32_t)bits)
			  : kind < 5 ? st_u2f(0x3f000000u + (uint32_t)(bits & 0x01ffffffu) +
					      (uint32_t)(bits >> 63 << 31))
				     : (float)((int)(bits % 17) - 8);
		memcpy(p, &f, 4);
		break;
	}
	case SG_DTYPE_FP64: {
		double d = kind == 0  ? 0.0
			   : kind < 5 ? ldexp((double)(bits >> 11), -53 - (int)(r >> 60)) *
						((r >> 10) & 1 ? -1 : 1)
				      : (double)((int)(bits % 17) - 8);
		if (kind == 0)
			memcpy(&d, &bits, 8);
		memcpy(p, &d, 8);
		break;
	}
	case SG_DTYPE_FP16: {
		/* kind 1-4: exponents around 1.0 (0x3800-0x43ff) and the subnormals. */
		uint16_t h = kind == 0	? (uint16_t)bits
			     : kind < 4 ? (uint16_t)(0x3800 + bits % 0x0c00) |
						  (uint16_t)((bits >> 20) & 0x8000)
			     : kind == 4
				     ? (uint16_t)(bits % 0x0400) | (uint16_t)((bits >> 20) & 0x8000)
				     : sg_fp32_to_fp16((float)((int)(bits % 17) - 8));
		memcpy(p, &h, 2);
		break;
	}
	case SG_DTYPE_BF16: {
		uint16_t b = kind == 0	? (uint16_t)bits
			     : kind < 4 ? (uint16_t)(0x3f00 + bits % 0x0100) |
						  (uint16_t)((bits >> 20) & 0x8000)
			     : kind == 4
				     ? (uint16_t)(bits % 0x0100) | (uint16_t)((bits >> 20) & 0x8000)
				     : sg_fp32_to_bf16((float)((int)(bits % 17) - 8));
		memcpy(p, &b, 2);
		break;
	}
	default:
		/* Integers: any bits, or values near the wrap-around point. */
		if (kind < 3) {
			size_t bitsz = 8 * sg_dtype_size(dt);
			uint64_t top = (uint64_t)1 << (bitsz - 1); /* INT_MIN of the type */

			bits = ((bits & 1) ? top : 0) - 2 + ((bits >> 1) & 3);
		}
		memcpy(p, &bits, sg_dtype_size(dt));
		break;
	}
}

static inline void st_fill(enum sg_dtype dt, void *p, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++)
		st_fill_one(dt, (char *)p + i * sg_dtype_size(dt), s);
}

static inline bool st_is_nan(enum sg_dtype dt, const void *p)
{
	uint16_t h;
	uint32_t f;
	uint64_t d;

	switch (dt) {
	case SG_DTYPE_FP32:
		memcpy(&f, p, 4);
		return (f & 0x7fffffffu) > 0x7f800000u;
	case SG_DTYPE_FP64:
		memcpy(&d, p, 8);
		return (d & ~(1ull << 63)) > 0x7ff0000000000000ull;
	case SG_DTYPE_FP16:
		memcpy(&h, p, 2);
		return (h & 0x7fff) > 0x7c00;
	case SG_DTYPE_BF16:
		memcpy(&h, p, 2);
		return (h & 0x7fff) > 0x7f80;
	default:
		return false;
	}
}

/*
 * Index of the first element of @got that differs from @want, or SIZE_MAX.
 * Elements are @esz bytes of type @dt (@dt only matters for NaN).
 */
static inline size_t st_first_diff(enum sg_dtype dt, size_t esz, const void *got, const void *want,
				   size_t n)
{
	const char *g = got, *w = want;

	if (memcmp(g, w, n * esz) == 0)
		return SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		if (memcmp(g + i * esz, w + i * esz, esz) == 0)
			continue;
		if (st_is_nan(dt, g + i * esz) && st_is_nan(dt, w + i * esz))
			continue;
		return i;
	}
	return SIZE_MAX;
}

#endif /* SUM_TEST_UTIL_H */
