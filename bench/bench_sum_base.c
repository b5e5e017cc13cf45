/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Baselines for "sigma-bench sum", compiled on their own at -O3
 * -march=native so that the compiler does its best with plain C:
 *  - a streaming read of one buffer (the machine's single-core read bound);
 *  - BytePS's reducer as plain loops: the first input copied, then one
 *    dst[i] += src[i] pass per further input; fp16 converted one element at
 *    a time with F16C, bf16 with bit operations, each partial sum rounded to
 *    the 16-bit type, as BytePS does.
 */
#include <immintrin.h>
#include <string.h>

#include "bench_sum.h"

uint64_t bench_read_stream(const void *buf, size_t bytes)
{
	const uint64_t *p = buf;
	uint64_t a = 0;

	for (size_t i = 0; i < bytes / 8; i++)
		a ^= p[i];
	return a;
}

static inline float bf16_to_f32(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#define PLAIN_ADD(name, T)                                                                         \
	static void name(T *restrict d, const T *restrict s, size_t n)                             \
	{                                                                                          \
		for (size_t i = 0; i < n; i++)                                                     \
			d[i] += s[i];                                                              \
	}
PLAIN_ADD(add_f32, float)
PLAIN_ADD(add_f64, double)
PLAIN_ADD(add_u32, uint32_t)
PLAIN_ADD(add_u64, uint64_t)
PLAIN_ADD(add_u8, uint8_t)

static void add_f16(uint16_t *restrict d, const uint16_t *restrict s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = _cvtss_sh(_cvtsh_ss(d[i]) + _cvtsh_ss(s[i]), 0);
}

static void add_bf16(uint16_t *restrict d, const uint16_t *restrict s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = f32_to_bf16(bf16_to_f32(d[i]) + bf16_to_f32(s[i]));
}

void bench_plain_sum(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k, size_t n)
{
	memcpy(dst, src[0], n * sg_dtype_size(dt));
	for (unsigned int j = 1; j < k; j++) {
		switch (dt) {
		case SG_DTYPE_FP32:
			add_f32(dst, src[j], n);
			break;
		case SG_DTYPE_FP64:
			add_f64(dst, src[j], n);
			break;
		case SG_DTYPE_FP16:
			add_f16(dst, src[j], n);
			break;
		case SG_DTYPE_BF16:
			add_bf16(dst, src[j], n);
			break;
		case SG_DTYPE_INT32:
			add_u32(dst, src[j], n);
			break;
		case SG_DTYPE_INT64:
			add_u64(dst, src[j], n);
			break;
		default:
			add_u8(dst, src[j], n);
			break;
		}
	}
}
