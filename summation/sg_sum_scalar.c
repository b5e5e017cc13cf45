/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Portable scalar kernels: the reference every SIMD path must match bit for
 * bit, and the fallback on CPUs without AVX2.
 */
#include <string.h>

#include "sg_sum_internal.h"

#define SCALAR_ADDK(name, T, UT)                                                             \
	static void name(void *dst, const void *const *src, unsigned int k, size_t n)        \
	{                                                                                    \
		T *d = dst;                                                                  \
		for (size_t i = 0; i < n; i++) {                                             \
			UT acc = (UT)((const T *)src[0])[i];                                 \
			for (unsigned int j = 1; j < k; j++)                                 \
				acc += (UT)((const T *)src[j])[i];                           \
			d[i] = (T)acc;                                                       \
		}                                                                            \
	}

/* Integers go through their unsigned twins so that overflow wraps, as documented. */
SCALAR_ADDK(addk_f32, float, float)
SCALAR_ADDK(addk_f64, double, double)
SCALAR_ADDK(addk_i32, uint32_t, uint32_t)
SCALAR_ADDK(addk_i64, uint64_t, uint64_t)
SCALAR_ADDK(addk_u8, uint8_t, uint8_t)

static void addk_16(enum sg_dtype dt, uint16_t *d, const void *const *src, unsigned int k, size_t n,
		    unsigned int flags)
{
	const bool h = dt == SG_DTYPE_FP16;

	for (size_t i = 0; i < n; i++) {
		uint16_t v = ((const uint16_t *)src[0])[i];
		float acc = h ? sg_fp16_to_fp32(v) : sg_bf16_to_fp32(v);

		for (unsigned int j = 1; j < k; j++) {
			v = ((const uint16_t *)src[j])[i];
			acc += h ? sg_fp16_to_fp32(v) : sg_bf16_to_fp32(v);
			/* Native mode rounds every partial sum, as BytePS does. */
			if (flags & SG_SUM_F_NATIVE)
				acc = h ? sg_fp16_to_fp32(sg_fp32_to_fp16(acc)) :
					  sg_bf16_to_fp32(sg_fp32_to_bf16(acc));
		}
		d[i] = h ? sg_fp32_to_fp16(acc) : sg_fp32_to_bf16(acc);
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
		float v = dt == SG_DTYPE_FP16 ? sg_fp16_to_fp32(src[i]) : sg_bf16_to_fp32(src[i]);

		acc[i] = add ? acc[i] + v : v;
	}
}

static void scalar_narrow(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n, bool nt)
{
	(void)nt;
	for (size_t i = 0; i < n; i++)
		dst[i] = dt == SG_DTYPE_FP16 ? sg_fp32_to_fp16(acc[i]) : sg_fp32_to_bf16(acc[i]);
}

const struct sg_sum_kernels sg_sum_kernels_scalar = {
	.addk = scalar_addk,
	.widen = scalar_widen,
	.narrow = scalar_narrow,
};
