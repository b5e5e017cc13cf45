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

/* fp32 */
static inline vf ld_f32(const char *p)
{
	return _mm256_loadu_ps((const float *)p);
}
static inline vf ldm_f32(const char *p, unsigned int r)
{
	return _mm256_maskload_ps((const float *)p, m32(r));
}
static inline void st_f32(char *p, vf v)
{
	_mm256_storeu_ps((float *)p, v);
}
static inline void stnt_f32(char *p, vf v)
{
	_mm256_stream_ps((float *)p, v);
}
static inline void stm_f32(char *p, vf v, unsigned int r)
{
	_mm256_maskstore_ps((float *)p, m32(r), v);
}
static inline vf add_f32(vf a, vf b)
{
	return _mm256_add_ps(a, b);
}

/* fp64 */
static inline vd ld_f64(const char *p)
{
	return _mm256_loadu_pd((const double *)p);
}
static inline vd ldm_f64(const char *p, unsigned int r)
{
	return _mm256_maskload_pd((const double *)p, m64(r));
}
static inline void st_f64(char *p, vd v)
{
	_mm256_storeu_pd((double *)p, v);
}
static inline void stnt_f64(char *p, vd v)
{
	_mm256_stream_pd((double *)p, v);
}
static inline void stm_f64(char *p, vd v, unsigned int r)
{
	_mm256_maskstore_pd((double *)p, m64(r), v);
}
static inline vd add_f64(vd a, vd b)
{
	return _mm256_add_pd(a, b);
}

/* integers: wrap-around adds, as the scalar code's unsigned arithmetic */
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
static inline vi ldm_i32(const char *p, unsigned int r)
{
	return _mm256_maskload_epi32((const int *)p, m32(r));
}
static inline void stm_i32(char *p, vi v, unsigned int r)
{
	_mm256_maskstore_epi32((int *)p, m32(r), v);
}
static inline vi add_i32(vi a, vi b)
{
	return _mm256_add_epi32(a, b);
}
static inline vi ldm_i64(const char *p, unsigned int r)
{
	return _mm256_maskload_epi64((const long long *)p, m64(r));
}
static inline void stm_i64(char *p, vi v, unsigned int r)
{
	_mm256_maskstore_epi64((long long *)p, m64(r), v);
}
static inline vi add_i64(vi a, vi b)
{
	return _mm256_add_epi64(a, b);
}
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

/* fp16 through F16C: exact widening, RNE narrowing. */
static inline __m128i h_of(vf v)
{
	return _mm256_cvtps_ph(v, RNE);
}
static inline vf ld_h(const char *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline vf ldm_h(const char *p, unsigned int r)
{
	return _mm256_cvtph_ps(bounce_in128(p, 2 * r));
}
static inline void st_h(char *p, vf v)
{
	_mm_storeu_si128((__m128i *)p, h_of(v));
}
static inline void stnt_h(char *p, vf v)
{
	_mm_stream_si128((__m128i *)p, h_of(v));
}
static inline void stm_h(char *p, vf v, unsigned int r)
{
	bounce_out128(p, h_of(v), 2 * r);
}
static inline vf addn_h(vf a, vf b)
{
	return _mm256_cvtph_ps(h_of(_mm256_add_ps(a, b)));
}

/* bf16: widening is a shift; narrowing rounds to nearest even on the bits. */
static inline vf b_widen(__m128i x)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
}

/*
 * fp32 -> bf16 in 32-bit lanes (result in the high half): RNE by adding
 * 0x7fff plus the lowest kept bit; NaN keeps its top bits with the quiet bit
 * set. Bit for bit what sg_fp32_to_bf16() does, denormals included.
 */
static inline vi b_round(vf v)
{
	const vi x = _mm256_castps_si256(v);
	const vi lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
	const vi r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
	/* Signed compare is fine: both sides are below 2^31. */
	const vi nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
					  _mm256_set1_epi32(0x7f800000));
	const vi q = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));

	return _mm256_blendv_epi8(r, q, nan);
}

static inline __m128i b_of(vf v)
{
	/* Values are below 2^16 after the shift, so the saturating pack is exact. */
	const vi h = _mm256_srli_epi32(b_round(v), 16);
	const vi p = _mm256_packus_epi32(h, h);

	return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

static inline vf ld_b(const char *p)
{
	return b_widen(_mm_loadu_si128((const __m128i *)p));
}
static inline vf ldm_b(const char *p, unsigned int r)
{
	return b_widen(bounce_in128(p, 2 * r));
}
static inline void st_b(char *p, vf v)
{
	_mm_storeu_si128((__m128i *)p, b_of(v));
}
static inline void stnt_b(char *p, vf v)
{
	_mm_stream_si128((__m128i *)p, b_of(v));
}
static inline void stm_b(char *p, vf v, unsigned int r)
{
	bounce_out128(p, b_of(v), 2 * r);
}
static inline vf addn_b(vf a, vf b)
{
	const vi r = b_round(_mm256_add_ps(a, b));

	return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

/*
 * bf16 in the fused sum: one 32-byte load holds 16 bf16. Shifting each
 * 32-bit lane left by 16 gives the even elements as fp32, masking off the
 * low half gives the odd ones: no shuffles to widen. The lanes stay in that
 * even/odd order while summing (each element's additions are unchanged), and
 * narrowing puts them back.
 */
typedef struct {
	vf e, o;
} vb;
#define WB 16

static inline vb b2_widen(vi x)
{
	return (vb){_mm256_castsi256_ps(_mm256_slli_epi32(x, 16)),
		    _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)))};
}

static inline vi b2_of(vb v)
{
	return _mm256_or_si256(_mm256_srli_epi32(b_round(v.e), 16),
			       _mm256_and_si256(b_round(v.o), _mm256_set1_epi32((int)0xffff0000u)));
}

static inline vb ld_b2(const char *p)
{
	return b2_widen(ld_i(p));
}
static inline vb ldm_b2(const char *p, unsigned int r)
{
	return b2_widen(bounce_in256(p, 2 * r));
}
static inline void st_b2(char *p, vb v)
{
	st_i(p, b2_of(v));
}
static inline void stnt_b2(char *p, vb v)
{
	stnt_i(p, b2_of(v));
}
static inline void stm_b2(char *p, vb v, unsigned int r)
{
	bounce_out256(p, b2_of(v), 2 * r);
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

#define SG_SIMD_TABLE sg_sum_kernels_avx2
#include "sg_sum_simd.h"
