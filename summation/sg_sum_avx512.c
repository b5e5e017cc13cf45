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

/* fp32 */
static inline vf ld_f32(const char *p)
{
	return _mm512_loadu_ps(p);
}
static inline vf ldm_f32(const char *p, unsigned int r)
{
	return _mm512_maskz_loadu_ps(m16(r), p);
}
static inline void st_f32(char *p, vf v)
{
	_mm512_storeu_ps(p, v);
}
static inline void stnt_f32(char *p, vf v)
{
	_mm512_stream_ps((float *)p, v);
}
static inline void stm_f32(char *p, vf v, unsigned int r)
{
	_mm512_mask_storeu_ps(p, m16(r), v);
}
static inline vf add_f32(vf a, vf b)
{
	return _mm512_add_ps(a, b);
}

/* fp64 */
static inline vd ld_f64(const char *p)
{
	return _mm512_loadu_pd(p);
}
static inline vd ldm_f64(const char *p, unsigned int r)
{
	return _mm512_maskz_loadu_pd(m8(r), p);
}
static inline void st_f64(char *p, vd v)
{
	_mm512_storeu_pd(p, v);
}
static inline void stnt_f64(char *p, vd v)
{
	_mm512_stream_pd((double *)p, v);
}
static inline void stm_f64(char *p, vd v, unsigned int r)
{
	_mm512_mask_storeu_pd(p, m8(r), v);
}
static inline vd add_f64(vd a, vd b)
{
	return _mm512_add_pd(a, b);
}

/* integers: wrap-around adds, as the scalar code's unsigned arithmetic */
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
static inline vi ldm_i32(const char *p, unsigned int r)
{
	return _mm512_maskz_loadu_epi32(m16(r), p);
}
static inline void stm_i32(char *p, vi v, unsigned int r)
{
	_mm512_mask_storeu_epi32(p, m16(r), v);
}
static inline vi add_i32(vi a, vi b)
{
	return _mm512_add_epi32(a, b);
}
static inline vi ldm_i64(const char *p, unsigned int r)
{
	return _mm512_maskz_loadu_epi64(m8(r), p);
}
static inline void stm_i64(char *p, vi v, unsigned int r)
{
	_mm512_mask_storeu_epi64(p, m8(r), v);
}
static inline vi add_i64(vi a, vi b)
{
	return _mm512_add_epi64(a, b);
}
static inline vi ldm_u8(const char *p, unsigned int r)
{
	return _mm512_maskz_loadu_epi8(m64(r), p);
}
static inline void stm_u8(char *p, vi v, unsigned int r)
{
	_mm512_mask_storeu_epi8(p, m64(r), v);
}
static inline vi add_u8(vi a, vi b)
{
	return _mm512_add_epi8(a, b);
}

/* fp16: F16C-style conversions are exact (widening) and RNE (narrowing). */
static inline __m256i h_of(vf v)
{
	return _mm512_cvtps_ph(v, RNE);
}
static inline vf ld_h(const char *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const void *)p));
}
static inline vf ldm_h(const char *p, unsigned int r)
{
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m16(r), p));
}
static inline void st_h(char *p, vf v)
{
	_mm256_storeu_si256((void *)p, h_of(v));
}
static inline void stnt_h(char *p, vf v)
{
	_mm256_stream_si256((void *)p, h_of(v));
}
static inline void stm_h(char *p, vf v, unsigned int r)
{
	_mm256_mask_storeu_epi16(p, m16(r), h_of(v));
}
static inline vf addn_h(vf a, vf b)
{
	return _mm512_cvtph_ps(h_of(_mm512_add_ps(a, b)));
}

/* bf16: widening is a shift; narrowing rounds to nearest even on the bits. */
static inline vf b_widen(__m256i x)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

/*
 * fp32 -> bf16 in 32-bit lanes (result in the high half): RNE by adding
 * 0x7fff plus the lowest kept bit; NaN keeps its top bits with the quiet bit
 * set. Bit for bit what sg_fp32_to_bf16() does, denormals included.
 */
static inline vi b_round(vf v)
{
	const vi x = _mm512_castps_si512(v);
	const vi lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
	const vi r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
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

static inline vf ld_b(const char *p)
{
	return b_widen(_mm256_loadu_si256((const void *)p));
}
static inline vf ldm_b(const char *p, unsigned int r)
{
	return b_widen(_mm256_maskz_loadu_epi16(m16(r), p));
}
static inline void st_b(char *p, vf v)
{
	_mm256_storeu_si256((void *)p, b_of(v));
}
static inline void stnt_b(char *p, vf v)
{
	_mm256_stream_si256((void *)p, b_of(v));
}
static inline void stm_b(char *p, vf v, unsigned int r)
{
	_mm256_mask_storeu_epi16(p, m16(r), b_of(v));
}
static inline vf addn_b(vf a, vf b)
{
	const vi r = b_round(_mm512_add_ps(a, b));

	return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
}

/*
 * bf16 in the fused sum: one 64-byte load holds 32 bf16. Shifting each
 * 32-bit lane left by 16 gives the even elements as fp32, masking off the
 * low half gives the odd ones: no shuffles to widen. The lanes stay in that
 * even/odd order while summing (each element's additions are unchanged), and
 * narrowing puts them back.
 */
typedef struct {
	vf e, o;
} vb;
#define WB 32

static inline __mmask32 m32(unsigned int r)
{
	return (__mmask32)((1u << r) - 1);
}

static inline vb b2_widen(vi x)
{
	return (vb){_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
		    _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)))};
}

/* Rounded even elements to the low halves, rounded odd ones to the high halves. */
static inline vi b2_round(vb v)
{
	/* ternary logic 0xf8: a | (b & c) */
	return _mm512_ternarylogic_epi32(_mm512_srli_epi32(b_round(v.e), 16), b_round(v.o),
					 _mm512_set1_epi32((int)0xffff0000u), 0xf8);
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

static inline vb ld_b2(const char *p)
{
	return b2_widen(_mm512_loadu_si512(p));
}
static inline vb ldm_b2(const char *p, unsigned int r)
{
	return b2_widen(_mm512_maskz_loadu_epi16(m32(r), p));
}
static inline void st_b2(char *p, vb v)
{
	_mm512_storeu_si512(p, b2_of(v));
}
static inline void stnt_b2(char *p, vb v)
{
	_mm512_stream_si512((void *)p, b2_of(v));
}
static inline void stm_b2(char *p, vb v, unsigned int r)
{
	_mm512_mask_storeu_epi16(p, m32(r), b2_of(v));
}
static inline vb add_b2(vb a, vb b)
{
	return (vb){add_f32(a.e, b.e), add_f32(a.o, b.o)};
}
static inline vb addn_b2(vb a, vb b)
{
	return (vb){addn_b(a.e, b.e), addn_b(a.o, b.o)};
}

static inline void sg_simd_sfence(void)
{
	_mm_sfence();
}

#ifdef SG_SUM_AVX512BF16
#define SG_SIMD_TABLE sg_sum_kernels_avx512bf16
#else
#define SG_SIMD_TABLE sg_sum_kernels_avx512
#endif
#include "sg_sum_simd.h"
