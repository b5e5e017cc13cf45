/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Small integers in every element type, written and read by the tests
 * themselves (not by the summation library they check): a test pushes values
 * whose sums every dtype holds exactly (|sum| < 256 for bf16 and the 8-bit
 * types, < 2048 for fp16), and compares the RESULTs with an integer sum.
 */
#ifndef SG_TEST_DTYPE_H
#define SG_TEST_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "sg_types.h"

/* bf16 of a small integer: the top half of its fp32 (exact: no bits below). */
static inline uint16_t sg_test_bf16(int64_t v)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16);
}

/* fp16 of an integer with |v| < 2048 (a normal number, or 0). */
static inline uint16_t sg_test_fp16(int64_t v)
{
	uint64_t a = (uint64_t)(v < 0 ? -v : v);
	unsigned int e = 0;

	if (a == 0)
		return 0;
	while ((a >> (e + 1)) != 0)
		e++;
	return (uint16_t)((v < 0 ? 0x8000u : 0) | (e + 15) << 10 | ((a << (10 - e)) & 0x3ff));
}

static inline double sg_test_from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline double sg_test_from_fp16(uint16_t h)
{
	unsigned int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	/* (1024 + m) * 2^(e - 25) for a normal number, m * 2^-24 for a subnormal one */
	double x = e == 0 ? (double)m / (double)(1u << 24)
		   : e >= 25 ? (double)(1024 + m) * (double)(1u << (e - 25))
			     : (double)(1024 + m) / (double)(1u << (25 - e));

	return (h & 0x8000) ? -x : x;
}

/** Write the small integer @p v at @p p as one element of @p dt (little-endian). */
static inline void sg_test_put(enum sg_dtype dt, uint8_t *p, int64_t v)
{
	float f = (float)v;
	double d = (double)v;
	uint16_t h;

	switch (dt) {
	case SG_DTYPE_FP32: memcpy(p, &f, 4); break;
	case SG_DTYPE_FP64: memcpy(p, &d, 8); break;
	case SG_DTYPE_BF16: h = sg_test_bf16(v); memcpy(p, &h, 2); break;
	case SG_DTYPE_FP16: h = sg_test_fp16(v); memcpy(p, &h, 2); break;
	default: memcpy(p, &v, sg_dtype_size(dt)); break; /* the low bytes: two's complement */
	}
}

/** The element of @p dt at @p p, as an integer (uint8 as 0..255). */
static inline int64_t sg_test_get(enum sg_dtype dt, const uint8_t *p)
{
	float f;
	double d;
	uint16_t h;
	int32_t w;
	int64_t q;

	switch (dt) {
	case SG_DTYPE_FP32: memcpy(&f, p, 4); return (int64_t)f;
	case SG_DTYPE_FP64: memcpy(&d, p, 8); return (int64_t)d;
	case SG_DTYPE_BF16: memcpy(&h, p, 2); return (int64_t)sg_test_from_bf16(h);
	case SG_DTYPE_FP16: memcpy(&h, p, 2); return (int64_t)sg_test_from_fp16(h);
	case SG_DTYPE_INT8: return (int8_t)p[0];
	case SG_DTYPE_UINT8: return p[0];
	case SG_DTYPE_INT32: memcpy(&w, p, 4); return w;
	default: memcpy(&q, p, 8); return q;
	}
}

#endif /* SG_TEST_DTYPE_H */
