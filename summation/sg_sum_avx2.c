/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AVX2 + F16C kernels.
 *
 * Tails: 4- and 8-byte elements use VPMASKMOV/VMASKMOVPS loads and stores,
 * which neither fault nor touch memory past the last element. AVX2 has no
 * byte or word masks, so 1- and 2-byte tails (int8, uint8, fp16, bf16) go
 * through a one-vector bounce buffer: the r remaining elements are copied in
 * (the rest of the vector is zero), summed by the same vector code, and the r
 * results copied out. Only those r elements are ever read or written.
 */
#include <immintrin.h>
#include <string.h>

#include "sg_sum_internal.h"

typedef __m256 vf;
typedef __m256d vd;
typedef __m256i vi;

#define W32 8
#define W64 4
#define W8 32

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* All-ones in the first r 32-bit (or 64-bit) lanes. */
static inline vi m32(unsigned int r)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
				  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline vi m64(unsigned int r)
{
	return _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* Bounce buffers for 1- and 2-byte tails (see the top of the file). */
static inline vi bounce_in256(const char *p, size_t bytes)
{
	vi t = _mm256_setzero_si256();

	memcpy(&t, p, bytes);
	return t;
}

static inline __m128i bounce_in128(const char *p, size_t bytes)
{
	__m128i t = _mm_setzero_si128();

	memcpy(&t, p, bytes);
	return t;
}

static inline void bounce_out256(char *p, vi v, size_t bytes)
{
	memcpy(p, &v, bytes);
}

static inline void bounce_out128(char *p, __m128i v, size_t bytes)
{
	memcpy(p, &v, bytes);
}

/* fp32 and fp64: the same primitives over ps/pd intrinsics, masked with VMASKMOV. */
#define AVX2_FLOAT_OPS(X, V, T, SFX, MASK)                                                      \
	static inline V ld_##X(const char *p)                                                  \
	{                                                                                      \
		return _mm256_loadu_##SFX((const T *)p);                                       \
	}                                                                                      \
	static inline V ldm_##X(const char *p, unsigned int r)                                 \
	{                                                                                      \
		return _mm256_maskload_##SFX((const T *)p, MASK(r));                           \
	}                                                                                      \
	static inline void st_##X(char *p, V v)                                                \
	{                                                                                      \
		_mm256_storeu_##SFX((T *)p, v);                                                \
	}                                                                                      \
	static inline void stnt_##X(char *p, V v)                                              \
	{                                                                                      \
		_mm256_stream_##SFX((T *)p, v);                                                \
	}                                                                                      \
	static inline void stm_##X(char *p, V v, unsigned int r)                               \
	{                                                                                      \
		_mm256_maskstore_##SFX((T *)p, MASK(r), v);                                    \
	}                                                                                      \
	static inline V add_##X(V a, V b)                                                      \
	{                                                                                      \
		return _mm256_add_##SFX(a, b);                                                 \
	}
AVX2_FLOAT_OPS(f32, vf, float, ps, m32)
AVX2_FLOAT_OPS(f64, vd, double, pd, m64)

/* Integers: wrap-around adds, as the scalar code's unsigned arithmetic. */
static inline vi ld_i(const char *p)
{
	return _mm256_loadu_si256((const vi *)p);
}
static inline void st_i(char *p, vi v)
{
	_mm256_storeu_si256((vi *)p, v);
}
static inline void stnt_i(char *p, vi v)
{
	_mm256_stream_si256((vi *)p, v);
}

#define AVX2_INT_OPS(X, T, BITS, MASK)                                                           \
	static inline vi ldm_##X(const char *p, unsigned int r)                                \
	{                                                                                      \
		return _mm256_maskload_epi##BITS((const T *)p, MASK(r));                       \
	}                                                                                      \
	static inline void stm_##X(char *p, vi v, unsigned int r)                              \
	{                                                                                      \
		_mm256_maskstore_epi##BITS((T *)p, MASK(r), v);                                \
	}                                                                                      \
	static inline vi add_##X(vi a, vi b)                                                   \
	{                                                                                      \
		return _mm256_add_epi##BITS(a, b);                                             \
	}
AVX2_INT_OPS(i32, int, 32, m32)
AVX2_INT_OPS(i64, long long, 64, m64)

static inline vi ldm_u8(const char *p, unsigned int r)
{
	return bounce_in256(p, r);
}
static inline void stm_u8(char *p, vi v, unsigned int r)
{
	bounce_out256(p, v, r);
}
static inline vi add_u8(vi a, vi b)
{
	return _mm256_add_epi8(a, b);
}

/*
 * fp16 and bf16: loads widen, stores narrow; tails through the bounce buffer.
 * PFX/SI/BITS name the vector width of the 16-bit data (W32 elements: 128
 * bits; the bf16 pair: 256 bits).
 */
#define AVX2_16_OPS(X, V, PFX, SI, BITS, WIDEN, NARROW)                                         \
	static inline V ld_##X(const char *p)                                                  \
	{                                                                                      \
		return WIDEN(_##PFX##_loadu_##SI((const void *)p));                            \
	}                                                                                      \
	static inline V ldm_##X(const char *p, unsigned int r)                                 \
	{                                                                                      \
		return WIDEN(bounce_in##BITS(p, 2 * r));                                       \
	}                                                                                      \
	static inline void st_##X(char *p, V v)                                                \
	{                                                                                      \
		_##PFX##_storeu_##SI((void *)p, NARROW(v));                                    \
	}                                                                                      \
	static inline void stnt_##X(char *p, V v)                                              \
	{                                                                                      \
		_##PFX##_stream_##SI((void *)p, NARROW(v));                                    \
	}                                                                                      \
	static inline void stm_##X(char *p, V v, unsigned int r)                               \
	{                                                                                      \
		bounce_out##BITS(p, NARROW(v), 2 * r);                                         \
	}

/* fp16 through F16C: exact widening, RNE narrowing. */
static inline __m128i h_of(vf v)
{
	return _mm256_cvtps_ph(v, RNE);
}
AVX2_16_OPS(h, vf, mm, si128, 128, _mm256_cvtph_ps, h_of)

static inline vf addn_h(vf a, vf b)
{
	return _mm256_cvtph_ps(h_of(_mm256_add_ps(a, b)));
}

/* bf16: widening is a shift; narrowing rounds to nearest even on the bits. */
static inline vf b_widen(__m128i x)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
}

/* fp32 bits -> bf16 in the high half, NaNs aside: RNE by adding 0x7fff plus the lowest kept bit. */
static inline vi b_rne(vi x)
{
	const vi lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));

	return _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
}

/*
 * fp32 -> bf16 in 32-bit lanes (result in the high half): b_rne, and NaN
 * keeps its top bits with the quiet bit set. Bit for bit what
 * sg_fp32_to_bf16() does, denormals included.
 */
static inline vi b_round(vf v)
{
	const vi x = _mm256_castps_si256(v);
	const vi r = b_rne(x);
	/* v unordered with itself: the NaN lanes in one instruction and no constant */
	const vf nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
	const vi q = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));

	return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q),
						    nan));
}

static inline __m128i b_of(vf v)
{
	/* Values are below 2^16 after the shift, so the saturating pack is exact. */
	const vi h = _mm256_srli_epi32(b_round(v), 16);
	const vi p = _mm256_packus_epi32(h, h);

	return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

AVX2_16_OPS(b, vf, mm, si128, 128, b_widen, b_of)

/*
 * a + b rounded to bf16, for a and b that are bf16 (zero low halves): the sum
 * is then a NaN only with a zero low half (an input's payload or the default
 * NaN, quiet), which the integer rounding leaves as it is, so that no NaN
 * blend is needed. 5 instructions after the add, where b_round and a mask
 * took 8.
 */
static inline vf addn_b(vf a, vf b)
{
	const vi r = b_rne(_mm256_castps_si256(_mm256_add_ps(a, b)));

	return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

/* bf16 in the fused sum: the even/odd pair layout of sg_sum_simd.h. */
#include "sg_sum_simd.h"

/*
 * The even elements' shift is a multiply by 2^16 (the same bits): on Zen 5
 * shifts and word blends share two pipes, which narrowing also needs, while
 * VPMULLD runs on others. With the shift the k = 4 sum ran 9% slower at 2
 * pairs a step and 15% at 4, where it spilled (sigma-bench sum's kernel,
 * alone). On Intel cores VPMULLD is two micro-ops: not measured there.
 */
static inline vb b2_widen(vi x)
{
	vi m = _mm256_set1_epi32(0x10000);

	__asm__("" : "+x"(m)); /* or GCC turns the multiply back into a shift */
	return (vb){_mm256_castsi256_ps(_mm256_mullo_epi32(x, m)),
		    _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)))};
}

/*
 * Narrowing a pair to 16 bf16, rounding both halves at once in 16-bit lanes:
 * top is every element's fp32 bits truncated (its high half), low the 16
 * bits that rounding drops. RNE rounds up when low + (top & 1) > 0x8000,
 * the carry of the low + 0x7fff + (top & 1) that the scalar reference adds
 * to the 32 bits: VPAVGW(low, 0x7ffe | (top & 1)) = (low + 0x7fff + (top &
 * 1)) >> 1 has it in bit 15. A carry out of the mantissa goes into the
 * exponent, as in the reference (the largest finite becomes infinity).
 *
 * NaN lanes must be quiet with a zero low half (the contract of st_b2 in
 * sg_sum_simd.h): a sum of bf16 inputs only ever holds such NaNs (an input's,
 * quieted, or the default NaN), which the reference truncates, and so does
 * this (low = 0 never rounds up). 9 instructions for 16 elements, where
 * rounding each half in 32-bit lanes with a NaN blend took 16. Checked against
 * the reference on every fp32 input but those NaNs, in both positions.
 */
static inline vi b2_of(vb v)
{
	const vi e = _mm256_castps_si256(v.e), o = _mm256_castps_si256(v.o);
	const vi top = _mm256_blend_epi16(_mm256_srli_epi32(e, 16), o, 0xaa);
	const vi low = _mm256_blend_epi16(e, _mm256_slli_epi32(o, 16), 0xaa);
	const vi odd = _mm256_and_si256(top, _mm256_set1_epi16(1));
	const vi g = _mm256_avg_epu16(low, _mm256_or_si256(odd, _mm256_set1_epi16(0x7ffe)));

	return _mm256_sub_epi16(top, _mm256_srai_epi16(g, 15));
}

/* NaN lanes (unordered with themselves) get the quiet bit. */
static inline vf b_quiet(vf x)
{
	return _mm256_or_ps(x, _mm256_and_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q),
					     _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000))));
}

static inline vb b2_quiet(vb v)
{
	return (vb){b_quiet(v.e), b_quiet(v.o)};
}

AVX2_16_OPS(b2, vb, mm256, si256, 256, b2_widen, b2_of)

static inline void sg_simd_sfence(void)
{
	_mm_sfence();
}

/* The checksums' half vector: 8 16-bit elements (sg_sum_simd.h). */
typedef __m128i vh;

static inline vh ld_vh(const char *p)
{
	return _mm_loadu_si128((const void *)p);
}

static inline vh ldm_vh(const char *p, unsigned int r)
{
	return bounce_in128(p, 2 * r);
}

static inline void st_vh(char *p, vh x)
{
	_mm_storeu_si128((void *)p, x);
}

static inline void stm_vh(char *p, vh x, unsigned int r)
{
	bounce_out128(p, x, 2 * r);
}

static inline vi ldm_w16(const char *p, unsigned int r)
{
	return bounce_in256(p, 2 * r);
}

static inline vf h_widen(vh x)
{
	return _mm256_cvtph_ps(x);
}

/*
 * 16 ymm registers: a step of 8 bf16 pairs spills (sg_sum_simd.h). 4 pairs
 * keep the sums and the widening constants in registers (the narrowing's
 * constants are reloaded); the fused checksum kernel, which also keeps the
 * raw vectors and 4 checksum sums, takes 2.
 */
#define SG_SIMD_UNROLL_B2 4
#define SG_SIMD_UNROLL_CS_B2 2
#define SG_SIMD_TABLE sg_sum_kernels_avx2
#include "sg_sum_simd.h"
