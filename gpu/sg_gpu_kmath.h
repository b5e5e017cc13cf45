/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The arithmetic and index math of the CUDA backend, in one header that both
 * nvcc (sg_gpu_kernels.cu, device and host code) and gcc (sg_gpu_cuda.c, the
 * host backend, tests/gpu/test_gpu_kmath.c) compile. The CPU test runs the
 * very functions the kernels run, element by element, against summation/'s
 * scalar reference; only the fp16/bf16 <-> fp32 conversions differ on the
 * device, where the hardware instructions replace the *_soft functions below
 * (same results, NaN payloads aside; the GPU test compares them exhaustively).
 *
 * Inside gpu/ only; plain C11 or CUDA C++, no DPDK.
 */
#ifndef SG_GPU_KMATH_H
#define SG_GPU_KMATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define SG_HD static inline __host__ __device__
/* Lane loops must unroll: acc[] has to live in registers, not local memory. */
#define SG_UNROLL _Pragma("unroll")
#else
#define SG_UNROLL
#define SG_HD static inline
#endif

/* Same values as enum sg_dtype (wire-stable, see sg_sum.h); checked by the tests. */
#define SG_GPU_DT_FP32 0
#define SG_GPU_DT_FP16 2
#define SG_GPU_DT_BF16 3

/* Sources of one reduce: the kernel ABI passes them by value. */
#define SG_GPU_KMAX_SRC 16

/* One 16-byte vector: uint4 for nvcc (ld/st.v4), the same layout for gcc. */
#ifdef __CUDACC__
typedef uint4 sg_gpu_v16;
#else
typedef struct {
	uint32_t x, y, z, w;
} __attribute__((aligned(16))) sg_gpu_v16;
#endif

/* ---- element conversions ---------------------------------------------- */

SG_HD uint32_t sg_gpu_f2u(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
#endif
}

SG_HD float sg_gpu_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;

	memcpy(&f, &u, 4);
	return f;
#endif
}

/* fp16 bits to fp32: exact (subnormals included; NaN payload kept). */
SG_HD float sg_gpu_h2f_soft(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f)
		return sg_gpu_u2f(s | 0x7f800000u | m << 13);
	if (e != 0)
		return sg_gpu_u2f(s | (e + 112) << 23 | m << 13);
	if (m == 0)
		return sg_gpu_u2f(s);
	/* Subnormal m * 2^-24: normalise the mantissa. */
	e = 113;
	while (!(m & 0x400)) {
		m <<= 1;
		e--;
	}
	return sg_gpu_u2f(s | e << 23 | (m & 0x3ff) << 13);
}

/* fp32 to fp16 bits, round to nearest even; >= 65520 to Inf; NaN quieted. */
SG_HD uint16_t sg_gpu_f2h_soft(float f)
{
	uint32_t u = sg_gpu_f2u(f), s = (u >> 16) & 0x8000, a = u & 0x7fffffffu, h, rem, half;
	unsigned sh;

	if (a > 0x7f800000u)
		return (uint16_t)(s | 0x7e00 | ((a >> 13) & 0x3ff));
	if (a >= 0x477ff000u)
		return (uint16_t)(s | 0x7c00);
	if (a >= 0x38800000u) { /* normal: drop 13 bits, rebias 127 -> 15 */
		h = (a >> 13) - (112u << 10);
		rem = a & 0x1fff;
		h += rem > 0x1000 || (rem == 0x1000 && (h & 1));
		return (uint16_t)(s | h);
	}
	if (a <= 0x33000000u) /* <= 2^-25: rounds to (even) zero */
		return (uint16_t)s;
	/* Subnormal result: mantissa in units of 2^-24, shifted by 126 - exponent. */
	sh = 126 - (a >> 23);
	h = ((a & 0x7fffff) | 0x800000) >> sh;
	rem = ((a & 0x7fffff) | 0x800000) & ((1u << sh) - 1);
	half = 1u << (sh - 1);
	h += rem > half || (rem == half && (h & 1));
	return (uint16_t)(s | h);
}

SG_HD float sg_gpu_b2f_soft(uint16_t b)
{
	return sg_gpu_u2f((uint32_t)b << 16);
}

/* fp32 to bf16 bits, round to nearest even; NaN quieted. */
SG_HD uint16_t sg_gpu_f2b_soft(float f)
{
	uint32_t u = sg_gpu_f2u(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/* What the kernels use: the conversion instructions on the device. */
SG_HD float sg_gpu_widen(int dt, uint16_t v)
{
#ifdef __CUDA_ARCH__
	return dt == SG_GPU_DT_FP16 ? __half2float(__ushort_as_half(v))
				    : __bfloat162float(__ushort_as_bfloat16(v));
#else
	return dt == SG_GPU_DT_FP16 ? sg_gpu_h2f_soft(v) : sg_gpu_b2f_soft(v);
#endif
}

SG_HD uint16_t sg_gpu_narrow(int dt, float f)
{
#ifdef __CUDA_ARCH__
	return dt == SG_GPU_DT_FP16 ? __half_as_ushort(__float2half_rn(f))
				    : __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
	return dt == SG_GPU_DT_FP16 ? sg_gpu_f2h_soft(f) : sg_gpu_f2b_soft(f);
#endif
}

/* ---- the reduce: dst = dst + src[0] + ... + src[k-1], fp32, one rounding - */

/* Elements of one 16-byte vector. */
SG_HD unsigned sg_gpu_lanes(int dt)
{
	return dt == SG_GPU_DT_FP32 ? 4 : 8;
}

SG_HD uint32_t sg_gpu_v16_word(const sg_gpu_v16 *v, unsigned i)
{
	return i == 0 ? v->x : i == 1 ? v->y : i == 2 ? v->z : v->w;
}

SG_HD void sg_gpu_v16_set(sg_gpu_v16 *v, unsigned i, uint32_t w)
{
	if (i == 0)
		v->x = w;
	else if (i == 1)
		v->y = w;
	else if (i == 2)
		v->z = w;
	else
		v->w = w;
}

/* Lane l of a vector as fp32 (16-bit lanes: low half of a word first). */
SG_HD float sg_gpu_lane(int dt, const sg_gpu_v16 *v, unsigned l)
{
	uint32_t w;

	if (dt == SG_GPU_DT_FP32)
		return sg_gpu_u2f(sg_gpu_v16_word(v, l));
	w = sg_gpu_v16_word(v, l >> 1);
	return sg_gpu_widen(dt, (uint16_t)(l & 1 ? w >> 16 : w & 0xffff));
}

/*
 * Vector i of the reduce: one 16-byte load of dst and of each source, the
 * lanes summed in fp32 in that order (dst first), rounded once, one store.
 * dst and every src[j] must be 16-byte aligned.
 */
SG_HD void sg_gpu_reduce_v16(int dt, sg_gpu_v16 *dst, const void *const *src, unsigned k,
			     size_t i)
{
	const unsigned L = sg_gpu_lanes(dt);
	sg_gpu_v16 d = dst[i], x;
	float acc[8];

	SG_UNROLL
	for (unsigned l = 0; l < L; l++)
		acc[l] = sg_gpu_lane(dt, &d, l);
	/*
	 * Unrolled to the maximum with a break: constant indices into src[]
	 * let nvcc read the kernel parameters in place instead of copying
	 * the array to local memory in every thread.
	 */
	SG_UNROLL
	for (unsigned j = 0; j < SG_GPU_KMAX_SRC; j++) {
		if (j >= k)
			break;
		x = ((const sg_gpu_v16 *)src[j])[i];
		SG_UNROLL
		for (unsigned l = 0; l < L; l++)
			acc[l] += sg_gpu_lane(dt, &x, l);
	}
	SG_UNROLL
	for (unsigned w = 0; w < 4; w++)
		sg_gpu_v16_set(&d, w,
			       dt == SG_GPU_DT_FP32
				       ? sg_gpu_f2u(acc[w])
				       : (uint32_t)sg_gpu_narrow(dt, acc[2 * w]) |
						 (uint32_t)sg_gpu_narrow(dt, acc[2 * w + 1]) << 16);
	dst[i] = d;
}

/* Element i of the reduce, for heads and tails: the same sums one at a time. */
SG_HD void sg_gpu_reduce_one(int dt, void *dst, const void *const *src, unsigned k, size_t i)
{
	float acc;

	if (dt == SG_GPU_DT_FP32) {
		acc = ((const float *)dst)[i];
		SG_UNROLL
		for (unsigned j = 0; j < SG_GPU_KMAX_SRC && j < k; j++)
			acc += ((const float *)src[j])[i];
		((float *)dst)[i] = acc;
		return;
	}
	acc = sg_gpu_widen(dt, ((const uint16_t *)dst)[i]);
	SG_UNROLL
	for (unsigned j = 0; j < SG_GPU_KMAX_SRC && j < k; j++)
		acc += sg_gpu_widen(dt, ((const uint16_t *)src[j])[i]);
	((uint16_t *)dst)[i] = sg_gpu_narrow(dt, acc);
}

/*
 * How a reduce of n elements is cut: 'head' scalar elements until dst is
 * 16-byte aligned, 'nvec' vectors, then 'tail' scalar elements. Vectors
 * need every pointer at the same offset within 16 bytes (and that offset a
 * whole number of elements); otherwise everything is scalar (head = n).
 */
struct sg_gpu_split {
	size_t head, nvec, tail;
};

SG_HD struct sg_gpu_split sg_gpu_reduce_split(int dt, const void *dst, const void *const *src,
					      unsigned k, size_t n)
{
	const size_t es = dt == SG_GPU_DT_FP32 ? 4 : 2, L = sg_gpu_lanes(dt);
	size_t mis = (size_t)((uintptr_t)dst & 15);
	struct sg_gpu_split sp = {n, 0, 0};
	bool same = mis % es == 0;

	for (unsigned j = 0; same && j < k; j++)
		same = (size_t)((uintptr_t)src[j] & 15) == mis;
	if (!same)
		return sp;
	sp.head = mis ? (16 - mis) / es : 0;
	if (sp.head >= n) {
		sp.head = n;
		return sp;
	}
	sp.nvec = (n - sp.head) / L;
	sp.tail = n - sp.head - sp.nvec * L;
	return sp;
}

/* Element index of scalar work item t < head + tail. */
SG_HD size_t sg_gpu_split_scalar_index(int dt, const struct sg_gpu_split *sp, size_t t)
{
	return t < sp->head ? t : sp->head + sp->nvec * sg_gpu_lanes(dt) + (t - sp->head);
}

/* Blocks for a grid-stride loop over 'items': at least 1, at most 'max'. */
SG_HD unsigned sg_gpu_blocks(size_t items, unsigned threads, unsigned max)
{
	size_t b = (items + threads - 1) / threads;

	return (unsigned)(b < 1 ? 1 : b > max ? max : b);
}

/* ---- partitions of the pipelined staging -------------------------------- */

/* Partitions of a tensor of 'bytes' (the last may be short). */
static inline size_t sg_gpu_nparts(size_t bytes, uint32_t psz)
{
	return bytes / psz + (bytes % psz != 0);
}

/* Bytes of partition 'part'. */
static inline uint32_t sg_gpu_part_len(size_t bytes, uint32_t psz, size_t part)
{
	size_t left = bytes - part * psz;

	return (uint32_t)(left < psz ? left : psz);
}

/* Bytes a step [off, off + sbytes) moves in a partition of 'len': 0 when it lies past it. */
static inline uint32_t sg_gpu_step_len(uint32_t off, uint32_t sbytes, uint32_t len)
{
	return off >= len ? 0 : sbytes < len - off ? sbytes : len - off;
}

#endif /* SG_GPU_KMATH_H */
