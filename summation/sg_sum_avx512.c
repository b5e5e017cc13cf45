/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AVX-512 (F, BW, VL) kernels. Built twice: without and, where the compiler
 * has it, with AVX512-BF16 (SG_SUM_AVX512BF16 defined), which only changes how
 * fp32 is narrowed to bf16. sg_sum.c picks the BF16 table when cpuid has it.
 * Tails use k-masks: masked loads neither fault nor read past the end.
 */
#include <immintrin.h>

#include "sg_sum_internal.h"

typedef __m512 vf;
typedef __m512d vd;
typedef __m512i vi;

#define W32 16
#define W64 8
#define W8 64

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __mmask8 m8(unsigned int r)
{
	return (__mmask8)((1u << r) - 1);
}

static inline __mmask16 m16(unsigned int r)
{
	return (__mmask16)((1u << r) - 1);
}

static inline __mmask64 m64(unsigned int r)
{
	return (__mmask64)((1ull << r) - 1); /* r < 64 */
}

/* fp32 and fp64: the same primitives over ps/pd intrinsics. */
#define AVX512_FLOAT_OPS(X, V, T, SFX, MASK)                                                    \
	static inline V ld_##X(const char *p)                                                  \
	{                                                                                      \
		return _mm512_loadu_##SFX(p);                                                  \
	}                                                                                      \
	static inline V ldm_##X(const char *p, unsigned int r)                                 \
	{                                                                                      \
		return _mm512_maskz_loadu_##SFX(MASK(r), p);                                   \
	}                                                                                      \
	static inline void st_##X(char *p, V v)                                                \
	{                                                                                      \
		_mm512_storeu_##SFX(p, v);                                                     \
	}                                                                                      \
	static inline void stnt_##X(char *p, V v)                                              \
	{                                                                                      \
		_mm512_stream_##SFX((T *)p, v);                                                \
	}                                                                                      \
	static inline void stm_##X(char *p, V v, unsigned int r)                               \
	{                                                                                      \
		_mm512_mask_storeu_##SFX(p, MASK(r), v);                                       \
	}                                                                                      \
	static inline V add_##X(V a, V b)                                                      \
	{                                                                                      \
		return _mm512_add_##SFX(a, b);                                                 \
	}
AVX512_FLOAT_OPS(f32, vf, float, ps, m16)
AVX512_FLOAT_OPS(f64, vd, double, pd, m8)

/* Integers: wrap-around adds, as the scalar code's unsigned arithmetic. */
static inline vi ld_i(const char *p)
{
	return _mm512_loadu_si512(p);
}
static inline void st_i(char *p, vi v)
{
	_mm512_storeu_si512(p, v);
}
static inline void stnt_i(char *p, vi v)
{
	_mm512_stream_si512((void *)p, v);
}

#define AVX512_INT_OPS(X, BITS, MASK)                                                            \
	static inline vi ldm_##X(const char *p, unsigned int r)                                \
	{                                                                                      \
		return _mm512_maskz_loadu_epi##BITS(MASK(r), p);                               \
	}                                                                                      \
	static inline void stm_##X(char *p, vi v, unsigned int r)                              \
	{                                                                                      \
		_mm512_mask_storeu_epi##BITS(p, MASK(r), v);                                   \
	}                                                                                      \
	static inline vi add_##X(vi a, vi b)                                                   \
	{                                                                                      \
		return _mm512_add_epi##BITS(a, b);                                             \
	}
AVX512_INT_OPS(i32, 32, m16)
AVX512_INT_OPS(i64, 64, m8)
AVX512_INT_OPS(u8, 8, m64)

/*
 * fp16 and bf16: loads widen, stores narrow. PFX/SI name the vector width of
 * the 16-bit data (W32 elements: 256 bits; the bf16 pair: 512 bits).
 */
#define AVX512_16_OPS(X, V, PFX, SI, MASK, WIDEN, NARROW)                                       \
	static inline V ld_##X(const char *p)                                                  \
	{                                                                                      \
		return WIDEN(_##PFX##_loadu_##SI((const void *)p));                            \
	}                                                                                      \
	static inline V ldm_##X(const char *p, unsigned int r)                                 \
	{                                                                                      \
		return WIDEN(_##PFX##_maskz_loadu_epi16(MASK(r), p));                          \
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
		_##PFX##_mask_storeu_epi16(p, MASK(r), NARROW(v));                             \
	}

/* fp16: VCVTPH2PS is exact, VCVTPS2PH rounds to nearest even. */
static inline __m256i h_of(vf v)
{
	return _mm512_cvtps_ph(v, RNE);
}
AVX512_16_OPS(h, vf, mm256, si256, m16, _mm512_cvtph_ps, h_of)

static inline vf addn_h(vf a, vf b)
{
	return _mm512_cvtph_ps(h_of(_mm512_add_ps(a, b)));
}

/* bf16 in fp32 lanes (the accumulator kernels): widening is a shift. */
static inline vf b_widen(__m256i x)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

/* b_rne and b_round: the integer RNE of sg_sum_avx2.c, with a k-mask for the NaN lanes. */
static inline vi b_rne(vi x)
{
	const vi lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));

	return _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
}

static inline vi b_round(vf v)
{
	const vi x = _mm512_castps_si512(v);
	const vi r = b_rne(x);
	const __mmask16 nan = _mm512_cmpgt_epu32_mask(
		_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));

	return _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x00400000));
}

static inline __m256i b_of(vf v)
{
#ifdef SG_SUM_AVX512BF16
	/*
	 * VCVTNEPS2BF16 is RNE like the reference, but treats denormal inputs
	 * as zero. Lanes holding a denormal (exponent 0, mantissa != 0) are
	 * redone with the integer rounding; that branch is almost never taken.
	 */
	const vi x = _mm512_castps_si512(v);
	const __mmask16 den = _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000)) &
			      _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x007fffff));
	__m256i h = (__m256i)_mm512_cvtneps_pbh(v);

	if (__builtin_expect(den != 0, 0))
		h = _mm256_mask_blend_epi16(
			den, h, _mm512_cvtepi32_epi16(_mm512_srli_epi32(b_round(v), 16)));
	return h;
#else
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(b_round(v), 16));
#endif
}

AVX512_16_OPS(b, vf, mm256, si256, m16, b_widen, b_of)

/* As in sg_sum_avx2.c: a and b are bf16, so a NaN sum needs no NaN lanes of its own. */
static inline vf addn_b(vf a, vf b)
{
	const vi r = b_rne(_mm512_castps_si512(_mm512_add_ps(a, b)));

	return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
}

/* bf16 in the fused sum: the even/odd pair layout of sg_sum_simd.h. */
#include "sg_sum_simd.h"

static inline __mmask32 m32(unsigned int r)
{
	return (__mmask32)((1u << r) - 1);
}

static inline vb b2_widen(vi x)
{
	return (vb){_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
		    _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)))};
}

/*
 * Narrowing a pair to 32 bf16, both halves at once in 16-bit lanes as in
 * sg_sum_avx2.c's b2_of (top: the truncated high halves, low: the dropped
 * bits; the same NaNs only). RNE rounds up when low + (top & 1) exceeds
 * 0x8000, that is when low | (top & 1) does: an unsigned compare to a mask
 * and a masked add of 1 (carrying into the exponent as the reference does).
 * 7 instructions for 32 elements, where rounding each half in 32-bit lanes
 * with a NaN mask took 16. Ternary logic 0xf8 is a | (b & c).
 */
static inline vi b2_round(vb v)
{
	const vi e = _mm512_castps_si512(v.e), o = _mm512_castps_si512(v.o);
	const vi one = _mm512_set1_epi16(1);
	const vi top = _mm512_ternarylogic_epi32(_mm512_srli_epi32(e, 16), o,
						 _mm512_set1_epi32((int)0xffff0000u), 0xf8);
	const vi low = _mm512_ternarylogic_epi32(_mm512_slli_epi32(o, 16), e,
						 _mm512_set1_epi32(0xffff), 0xf8);
	const __mmask32 up = _mm512_cmpgt_epu16_mask(_mm512_ternarylogic_epi32(low, top, one, 0xf8),
						     _mm512_set1_epi16((short)0x8000));

	return _mm512_mask_add_epi16(top, up, top, one);
}

static inline vi b2_of(vb v)
{
#ifdef SG_SUM_AVX512BF16
	/* VCVTNE2PS2BF16 gives [even | odd] halves; VPERMW interleaves them back. */
	static const uint16_t interleave[32] = {
		0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
		8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31,
	};
	const vi xe = _mm512_castps_si512(v.e), xo = _mm512_castps_si512(v.o);
	const vi expo = _mm512_set1_epi32(0x7f800000), mant = _mm512_set1_epi32(0x007fffff);
	/* Denormal lanes (see b_of) are rare: redo the whole vector with integers. */
	const __mmask16 den =
		(_mm512_testn_epi32_mask(xe, expo) & _mm512_test_epi32_mask(xe, mant)) |
		(_mm512_testn_epi32_mask(xo, expo) & _mm512_test_epi32_mask(xo, mant));

	if (__builtin_expect(den != 0, 0))
		return b2_round(v);
	return _mm512_permutexvar_epi16(_mm512_loadu_si512(interleave),
					(vi)_mm512_cvtne2ps_pbh(v.o, v.e));
#else
	return b2_round(v);
#endif
}

/* b2_round takes only quiet NaNs with zero low halves (sg_sum_simd.h). */
static inline vf b_quiet(vf x)
{
	const vi b = _mm512_castps_si512(x);

	return _mm512_castsi512_ps(_mm512_mask_or_epi32(b, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
							b, _mm512_set1_epi32(0x00400000)));
}

static inline vb b2_quiet(vb v)
{
	return (vb){b_quiet(v.e), b_quiet(v.o)};
}

AVX512_16_OPS(b2, vb, mm512, si512, m32, b2_widen, b2_of)

static inline void sg_simd_sfence(void)
{
	_mm_sfence();
}

/* The checksums' half vector: 16 16-bit elements (sg_sum_simd.h). */
typedef __m256i vh;

static inline vh ld_vh(const char *p)
{
	return _mm256_loadu_si256((const void *)p);
}

static inline vh ldm_vh(const char *p, unsigned int r)
{
	return _mm256_maskz_loadu_epi16(m16(r), p);
}

static inline void st_vh(char *p, vh x)
{
	_mm256_storeu_si256((void *)p, x);
}

static inline void stm_vh(char *p, vh x, unsigned int r)
{
	_mm256_mask_storeu_epi16(p, m16(r), x);
}

static inline vi ldm_w16(const char *p, unsigned int r)
{
	return _mm512_maskz_loadu_epi16(m32(r), p);
}

static inline vf h_widen(vh x)
{
	return _mm512_cvtph_ps(x);
}

/*
 * 4 bf16 pairs a step: with 8, GCC loads every input's vectors of the step
 * before adding and the k = 4 loop spills (82 stack accesses in k_b_plain's
 * k = 4 loop, 10 with 4).
 */
#define SG_SIMD_UNROLL_B2 4
#ifdef SG_SUM_AVX512BF16
#define SG_SIMD_TABLE sg_sum_kernels_avx512bf16
#else
#define SG_SIMD_TABLE sg_sum_kernels_avx512
#endif
#include "sg_sum_simd.h"
