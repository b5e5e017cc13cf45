/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Portable scalar kernels: the reference every SIMD path must match bit for
 * bit, and the fallback on CPUs without AVX2.
 */
#include <string.h>

#include "sg_sum_internal.h"

/*
 * Element i of type T at p, and its store. memcpy because pointers may have
 * any alignment (the API allows it); compilers turn it into one move.
 */
#define LD(T, p, i)                                                                          \
	({                                                                                   \
		T v_;                                                                        \
		memcpy(&v_, (const char *)(p) + (i) * sizeof(T), sizeof(T));                 \
		v_;                                                                          \
	})
#define ST(T, p, i, v)                                                                       \
	do {                                                                                 \
		T s_ = (v);                                                                  \
		memcpy((char *)(p) + (i) * sizeof(T), &s_, sizeof(T));                       \
	} while (0)

#define SCALAR_ADDK(name, T)                                                                 \
	static void name(void *dst, const void *const *src, unsigned int k, size_t n)        \
	{                                                                                    \
		for (size_t i = 0; i < n; i++) {                                             \
			T acc = LD(T, src[0], i);                                            \
			for (unsigned int j = 1; j < k; j++)                                 \
				acc += LD(T, src[j], i);                                     \
			ST(T, dst, i, acc);                                                  \
		}                                                                            \
	}

/* Integers go through their unsigned twins so that overflow wraps, as documented. */
SCALAR_ADDK(addk_f32, float)
SCALAR_ADDK(addk_f64, double)
SCALAR_ADDK(addk_i32, uint32_t)
SCALAR_ADDK(addk_i64, uint64_t)
SCALAR_ADDK(addk_u8, uint8_t)

static void addk_16(enum sg_dtype dt, uint16_t *d, const void *const *src, unsigned int k, size_t n,
		    unsigned int flags)
{
	const bool h = dt == SG_DTYPE_FP16;

	for (size_t i = 0; i < n; i++) {
		uint16_t v = LD(uint16_t, src[0], i);
		float acc = h ? sg_fp16_to_fp32(v) : sg_bf16_to_fp32(v);

		for (unsigned int j = 1; j < k; j++) {
			v = LD(uint16_t, src[j], i);
			acc += h ? sg_fp16_to_fp32(v) : sg_bf16_to_fp32(v);
			/* Native mode rounds every partial sum, as BytePS does. */
			if (flags & SG_SUM_F_NATIVE)
				acc = h ? sg_fp16_to_fp32(sg_fp32_to_fp16(acc)) :
					  sg_bf16_to_fp32(sg_fp32_to_bf16(acc));
		}
		ST(uint16_t, d, i, h ? sg_fp32_to_fp16(acc) : sg_fp32_to_bf16(acc));
	}
}

static void scalar_addk(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k,
			size_t n, unsigned int flags, bool nt)
{
	(void)nt;
	switch (dt) {
	case SG_DTYPE_FP32:
		addk_f32(dst, src, k, n);
		break;
	case SG_DTYPE_FP64:
		addk_f64(dst, src, k, n);
		break;
	case SG_DTYPE_FP16:
	case SG_DTYPE_BF16:
		addk_16(dt, dst, src, k, n, flags);
		break;
	case SG_DTYPE_INT32:
		addk_i32(dst, src, k, n);
		break;
	case SG_DTYPE_INT64:
		addk_i64(dst, src, k, n);
		break;
	case SG_DTYPE_INT8:
	case SG_DTYPE_UINT8:
		addk_u8(dst, src, k, n);
		break;
	default:
		break;
	}
}

static void scalar_widen(enum sg_dtype dt, float *acc, const uint16_t *src, size_t n, bool add)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t h = LD(uint16_t, src, i);
		float v = dt == SG_DTYPE_FP16 ? sg_fp16_to_fp32(h) : sg_bf16_to_fp32(h);

		ST(float, acc, i, add ? LD(float, acc, i) + v : v);
	}
}

static void scalar_narrow(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n, bool nt)
{
	(void)nt;
	for (size_t i = 0; i < n; i++) {
		float a = LD(float, acc, i);

		ST(uint16_t, dst, i, dt == SG_DTYPE_FP16 ? sg_fp32_to_fp16(a) : sg_fp32_to_bf16(a));
	}
}

/*
 * The Internet checksum of RFC 1071 in its plainest form: 16-bit words in
 * native byte order, a last odd byte padded with a zero byte after it.
 */
static uint64_t scalar_csum(const void *p, size_t bytes)
{
	uint64_t s = 0;
	size_t i;

	for (i = 0; i + 2 <= bytes; i += 2)
		s += LD(uint16_t, (const char *)p + i, 0);
	if (i < bytes) {
		uint16_t w = 0;

		memcpy(&w, (const char *)p + i, 1);
		s += w;
	}
	return s;
}

static uint64_t scalar_csum_copy(void *dst, const void *src, size_t bytes)
{
	if (dst != NULL)
		memcpy(dst, src, bytes);
	return scalar_csum(src, bytes);
}

/* The sums above, then the checksum of src: the reference reads it twice. */
static uint64_t scalar_csum_add(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc,
				const void *src, size_t n)
{
	const size_t sz = sg_dtype_size(dt);
	const bool wide = sz == 2 && !(flags & SG_SUM_F_NATIVE);
	const void *in[2] = {acc, src};

	if (wide && acc == NULL) {
		scalar_widen(dt, dst, src, n, false);
	} else if (wide) {
		if (dst != acc)
			memcpy(dst, acc, n * sizeof(float));
		scalar_widen(dt, dst, src, n, true);
	} else {
		scalar_addk(dt, dst, in, 2, n, flags, false);
	}
	return scalar_csum(src, n * sz);
}

static uint64_t scalar_csum_narrow(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n)
{
	scalar_narrow(dt, dst, acc, n, false);
	return scalar_csum(dst, n * sizeof(uint16_t));
}

const struct sg_sum_kernels sg_sum_kernels_scalar = {
	.addk = scalar_addk,
	.widen = scalar_widen,
	.narrow = scalar_narrow,
	.csum_copy = scalar_csum_copy,
	.csum_add = scalar_csum_add,
	.csum_narrow = scalar_csum_narrow,
};
