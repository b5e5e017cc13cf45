/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Exact scalar conversions between fp32 and fp16/bf16 (sg_sum.h), round to
 * nearest even: what the scalar kernels (sg_sum_scalar.c), the tests'
 * references and the GPU code use element by element. They call nothing else
 * of the library.
 */
#include <stdint.h>
#include <string.h>

#include "sg_sum.h"

/* ---- exact scalar conversions ------------------------------------------ */

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

float sg_fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;

	if (exp == 0) {
		/* Zero or subnormal: mant * 2^-24 is exact in fp32. */
		float v = (float)mant * 0x1p-24f;

		return sign ? -v : v;
	}
	if (exp == 31)
		return u2f(sign | 0x7f800000u | (mant << 13));
	return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t sg_fp32_to_fp16(float f)
{
	uint32_t x = f2u(f);
	uint16_t sign = (x >> 16) & 0x8000;
	uint32_t ax = x & 0x7fffffffu;

	if (ax > 0x7f800000u) /* NaN: quiet it, keep the top payload bits */
		return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
	if (ax >= 0x477ff000u) /* >= 65520 rounds to infinity */
		return sign | 0x7c00;
	if (ax < 0x38800000u) {
		/* fp16 subnormal range: scale to units of 2^-24 and round to even. */
		float v = u2f(ax) * 0x1p24f;
		uint32_t r = (uint32_t)v;
		float frac = v - (float)r;

		if (frac > 0.5f || (frac == 0.5f && (r & 1)))
			r++;
		return sign | (uint16_t)r; /* r == 1024 is the smallest normal */
	}
	ax += 0xfffu + ((ax >> 13) & 1);
	return sign | (uint16_t)((ax - 0x38000000u) >> 13);
}

float sg_bf16_to_fp32(uint16_t b)
{
	return u2f((uint32_t)b << 16);
}

uint16_t sg_fp32_to_bf16(float f)
{
	uint32_t x = f2u(f);

	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}
