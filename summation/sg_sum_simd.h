/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to summation/: the loops shared by the AVX2 and AVX-512 kernels.
 *
 * An ISA file (sg_sum_avx2.c, sg_sum_avx512.c) defines small static inline
 * primitives with fixed names, includes this file once for the bf16 pair
 * type, then defines SG_SIMD_TABLE and includes it again at its end, where
 * this file turns the primitives into every kernel and the kernel table.
 * Keeping the loops in one place keeps the two ISAs identical in the order of
 * additions, which is what makes them bitwise equal to the scalar reference.
 *
 * Primitives, per element kind X (f32, f64, i32, i64, u8, h = fp16, b = bf16):
 *   vf, vd, vi                 vector of float, double, integer
 *   W32, W64, W8               elements per vector for 4-, 8- and 1-byte types
 *                              (fp16/bf16 use W32: they are widened to fp32 lanes)
 *   ld_X(p)                    unaligned load of one vector (h, b: widened to vf)
 *   ldm_X(p, r)                load of the first r < W elements, other lanes zero;
 *                              memory past element r is never touched
 *   st_X(p, v), stnt_X(p, v)   store one vector; the _nt form is a non-temporal
 *                              store and p is 64-byte aligned
 *   stm_X(p, v, r)             store of the first r elements only
 *   add_X(a, b)                a + b, as the scalar reference computes it
 *   addn_h, addn_b             a + b rounded to the 16-bit type (SG_SUM_F_NATIVE);
 *                              a and b hold values of that type (addn_b may assume
 *                              zero low 16 bits)
 *   vb, WB, X = b2             bf16 as a pair of fp32 vectors (even and odd
 *                              elements) holding WB elements, for the fused sum;
 *                              st_b2 may assume that NaN lanes are quiet and have
 *                              zero low 16 bits, as any sum of bf16 inputs has
 *   b2_quiet(v)                v with its signalling NaN lanes quiet (the quiet
 *                              bit set), every other lane unchanged
 *   sg_simd_sfence()           orders the non-temporal stores
 * Integer kinds share ld_i, st_i and stnt_i.
 * For the checksums (sg_simd_cs_*): vh, an integer vector of half the width;
 * ld_vh, ldm_vh, st_vh, stm_vh for W32 16-bit elements in it (_m: the first
 * r, others zero); ldm_w16(p, r), a whole vector's first r 16-bit elements;
 * h_widen(vh), fp16 to vf.
 */
#ifndef SG_SIMD_TABLE
/*
 * First inclusion, after vf, add_f32 and addn_b exist: the bf16 pair layout.
 * One full-width load holds 2 x W32 bf16. Shifting each 32-bit lane left by
 * 16 gives the even elements as fp32, masking off the low half gives the odd
 * ones: no shuffles to widen. The lanes stay in that even/odd order while
 * summing (each element's additions are unchanged); narrowing puts them back.
 * The ISA file then defines ld_b2, ldm_b2, st_b2, stnt_b2 and stm_b2.
 */
typedef struct {
	vf e, o;
} vb;
#define WB (2 * W32)

static inline vb add_b2(vb a, vb b)
{
	return (vb){add_f32(a.e, b.e), add_f32(a.o, b.o)};
}

static inline vb addn_b2(vb a, vb b)
{
	return (vb){addn_b(a.e, b.e), addn_b(a.o, b.o)};
}

#else /* second inclusion, at the end of the ISA file: the kernels */

/*
 * Vectors per unrolled step, and how far ahead (bytes) each input is
 * prefetched. Chosen by sigma-bench sum on a Zen 5 VM: 8 and 2048 beat 4 and
 * no prefetch by 5-15% when k inputs stream at once (the hardware prefetchers
 * follow a few streams well, not nine). A prefetch past the end never faults.
 * The bf16 pair kernels keep two vectors per unrolled vector: an ISA sets a
 * smaller SG_SIMD_UNROLL_B2 (SG_SIMD_UNROLL_CS_B2 for the fused checksum one)
 * where the step spills (AVX2's 16 registers; AVX-512's 32, as GCC loads
 * every input of a step before adding).
 */
#ifndef SG_SIMD_UNROLL
#define SG_SIMD_UNROLL 8
#endif
#ifndef SG_SIMD_UNROLL_B2
#define SG_SIMD_UNROLL_B2 SG_SIMD_UNROLL
#endif
#ifndef SG_SIMD_UNROLL_CS_B2
#define SG_SIMD_UNROLL_CS_B2 SG_SIMD_UNROLL_B2
#endif
#define SG_SIMD_PRAGMA_(x) _Pragma(#x)
#define SG_SIMD_PRAGMA(x) SG_SIMD_PRAGMA_(x)
/* The step's vectors live in registers only if these loops are fully unrolled. */
#define SG_SIMD_UNROLLED(u) SG_SIMD_PRAGMA(GCC unroll u)

#ifndef SG_SIMD_PREFETCH
#define SG_SIMD_PREFETCH 2048
#endif

/* Prefetch the lines that the step SG_SIMD_PREFETCH bytes ahead will read from p. */
static inline __attribute__((always_inline)) void sg_simd_prefetch(const char *p, size_t bytes)
{
	if (SG_SIMD_PREFETCH == 0)
		return;
	for (size_t o = 0; o < bytes; o += 64)
		_mm_prefetch(p + SG_SIMD_PREFETCH + o, _MM_HINT_T0);
}

/*
 * CALL, which names k as SG_SIMD_K_, with k a constant for the common k = 2,
 * 3 and 4 (sg_sum_add/add2 are k = 2; 3 and 4 workers): the compiler then
 * unrolls the loop over inputs and keeps their pointers in registers. With k
 * known only at run time, each input of each step reloaded its pointer and
 * ran the loop's bookkeeping: about 10% of the AVX2 bf16 sum's time at k = 4
 * and 7% of fp32's (Zen 5). The price is code: each kernel 4 times.
 */
#define SG_SIMD_BY_K(k, CALL)                                                                  \
	do {                                                                                   \
		switch (k) {                                                                   \
		case 2: {                                                                      \
			const unsigned int SG_SIMD_K_ = 2;                                     \
			CALL;                                                                  \
			break;                                                                 \
		}                                                                              \
		case 3: {                                                                      \
			const unsigned int SG_SIMD_K_ = 3;                                     \
			CALL;                                                                  \
			break;                                                                 \
		}                                                                              \
		case 4: {                                                                      \
			const unsigned int SG_SIMD_K_ = 4;                                     \
			CALL;                                                                  \
			break;                                                                 \
		}                                                                              \
		default: {                                                                     \
			const unsigned int SG_SIMD_K_ = (k);                                   \
			CALL;                                                                  \
			break;                                                                 \
		}                                                                              \
		}                                                                              \
	} while (0)

/* CALL with SG_SIMD_K_ = k: kernels called with one k only, or rarely. */
#define SG_SIMD_ANY_K(k, CALL)                                                                 \
	do {                                                                                   \
		const unsigned int SG_SIMD_K_ = (k);                                           \
		CALL;                                                                          \
	} while (0)

/*
 * SG_SIMD_KERNEL defines NAME(dst, src, k, n, nt): dst = src[0] + ... + src[k-1]
 * where src[0] has SZ0-byte elements, src[1..k-1] SZJ-byte elements and dst
 * SZD-byte elements, U vectors of W elements per step. All k inputs of one
 * step are loaded before dst is written, so dst may alias any input exactly.
 * Each input is read once and dst written once, whatever k is. KS is
 * SG_SIMD_BY_K or SG_SIMD_ANY_K.
 */
#define SG_SIMD_KERNEL(NAME, KS, U, V, W, SZ0, SZJ, SZD, L0, L0M, LJ, LJM, ADD, ST, STNT, STM) \
	static inline __attribute__((always_inline)) void NAME##_run(                          \
		char *d, const void *const *src, unsigned int k, size_t i, size_t hi, bool nt) \
	{                                                                                      \
		for (; i + (U) * (W) <= hi; i += (U) * (W)) {                                  \
			const char *p = (const char *)src[0] + i * (SZ0);                      \
			char *q = d + i * (SZD);                                               \
			V a[(U)];                                                              \
			SG_SIMD_UNROLLED(U)                                                    \
			for (unsigned int u = 0; u < (U); u++)                                 \
				a[u] = L0(p + u * (W) * (SZ0));                                \
			sg_simd_prefetch(p, (U) * (W) * (SZ0));                                \
			for (unsigned int j = 1; j < k; j++) {                                 \
				p = (const char *)src[j] + i * (SZJ);                          \
				sg_simd_prefetch(p, (U) * (W) * (SZJ));                        \
				SG_SIMD_UNROLLED(U)                                            \
				for (unsigned int u = 0; u < (U); u++)                         \
					a[u] = ADD(a[u], LJ(p + u * (W) * (SZJ)));             \
			}                                                                      \
			SG_SIMD_UNROLLED(U)                                                    \
			for (unsigned int u = 0; u < (U); u++) {                               \
				if (nt)                                                        \
					STNT(q + u * (W) * (SZD), a[u]);                       \
				else                                                           \
					ST(q + u * (W) * (SZD), a[u]);                         \
			}                                                                      \
		}                                                                              \
		for (; i + (W) <= hi; i += (W)) {                                              \
			V a = L0((const char *)src[0] + i * (SZ0));                            \
			for (unsigned int j = 1; j < k; j++)                                   \
				a = ADD(a, LJ((const char *)src[j] + i * (SZJ)));              \
			if (nt)                                                                \
				STNT(d + i * (SZD), a);                                        \
			else                                                                   \
				ST(d + i * (SZD), a);                                          \
		}                                                                              \
		if (i < hi) { /* the tail: masked, never a scalar loop */                      \
			unsigned int r = (unsigned int)(hi - i);                               \
			V a = L0M((const char *)src[0] + i * (SZ0), r);                        \
			for (unsigned int j = 1; j < k; j++)                                   \
				a = ADD(a, LJM((const char *)src[j] + i * (SZJ), r));          \
			STM(d + i * (SZD), a, r);                                              \
		}                                                                              \
	}                                                                                      \
	static __attribute__((noinline)) void NAME##_plain(char *d, const void *const *src,    \
							   unsigned int k, size_t i, size_t hi) \
	{                                                                                      \
		KS(k, NAME##_run(d, src, SG_SIMD_K_, i, hi, false));                           \
	}                                                                                      \
	static __attribute__((noinline)) void NAME##_stream(char *d, const void *const *src,   \
							    unsigned int k, size_t i, size_t hi) \
	{                                                                                      \
		KS(k, NAME##_run(d, src, SG_SIMD_K_, i, hi, true));                            \
	}                                                                                      \
	static void NAME(void *dst, const void *const *src, unsigned int k, size_t n, bool nt) \
	{                                                                                      \
		char *d = dst;                                                                 \
		size_t head, body;                                                             \
		/* Streaming stores need an aligned dst: store a short head normally. */       \
		if (!nt || (uintptr_t)d % (SZD) != 0) {                                        \
			NAME##_plain(d, src, k, 0, n);                                         \
			return;                                                                \
		}                                                                              \
		head = (size_t)(-(uintptr_t)d & 63) / (SZD);                                   \
		head = head < n ? head : n;                                                    \
		body = head + (n - head) / (W) * (W);                                          \
		NAME##_plain(d, src, k, 0, head);                                              \
		NAME##_stream(d, src, k, head, body);                                          \
		NAME##_plain(d, src, k, body, n);                                              \
		sg_simd_sfence();                                                              \
	}

/* Same-type kernels: every input and dst have the element kind X. */
#define SG_SIMD_SAME(NAME, U, V, W, SZ, X, ADD, LDI, STI, STNTI)                               \
	SG_SIMD_KERNEL(NAME, SG_SIMD_BY_K, U, V, W, SZ, SZ, SZ, LDI, ldm_##X, LDI, ldm_##X, ADD, \
		       STI, STNTI, stm_##X)

SG_SIMD_SAME(k_f32, SG_SIMD_UNROLL, vf, W32, 4, f32, add_f32, ld_f32, st_f32, stnt_f32)
SG_SIMD_SAME(k_f64, SG_SIMD_UNROLL, vd, W64, 8, f64, add_f64, ld_f64, st_f64, stnt_f64)
SG_SIMD_SAME(k_i32, SG_SIMD_UNROLL, vi, W32, 4, i32, add_i32, ld_i, st_i, stnt_i)
SG_SIMD_SAME(k_i64, SG_SIMD_UNROLL, vi, W64, 8, i64, add_i64, ld_i, st_i, stnt_i)
SG_SIMD_SAME(k_u8, SG_SIMD_UNROLL, vi, W8, 1, u8, add_u8, ld_i, st_i, stnt_i)
/* fp16/bf16: fp32 lanes; plain add keeps fp32 partial sums, addn rounds each one. */
SG_SIMD_SAME(k_h, SG_SIMD_UNROLL, vf, W32, 2, h, add_f32, ld_h, st_h, stnt_h)
SG_SIMD_SAME(k_hn, SG_SIMD_UNROLL, vf, W32, 2, h, addn_h, ld_h, st_h, stnt_h)
/* bf16 sums use the even/odd pair layout (vb, WB elements per load). */
SG_SIMD_SAME(k_b, SG_SIMD_UNROLL_B2, vb, WB, 2, b2, add_b2, ld_b2, st_b2, stnt_b2)
SG_SIMD_SAME(k_bn, SG_SIMD_UNROLL_B2, vb, WB, 2, b2, addn_b2, ld_b2, st_b2, stnt_b2)
/*
 * bf16 with k = 1 (either mode): a copy that no addition touches, so its
 * signalling NaNs are quieted before st_b2, which may assume quiet NaNs.
 * (Every NaN the pair kernels narrow has zero low bits: it is an input's
 * widened, or the default NaN.)
 */
static inline vb ld_b2q(const char *p)
{
	return b2_quiet(ld_b2(p));
}

static inline vb ldm_b2q(const char *p, unsigned int r)
{
	return b2_quiet(ldm_b2(p, r));
}
SG_SIMD_KERNEL(k_b1, SG_SIMD_ANY_K, SG_SIMD_UNROLL_B2, vb, WB, 2, 2, 2, ld_b2q, ldm_b2q, ld_b2q,
	       ldm_b2q, add_b2, st_b2, stnt_b2, stm_b2)
/* Accumulator kernels: src[0] (if k == 2) is the fp32 accumulator, src[k-1] the 16-bit input. */
#define SG_SIMD_ACC(NAME, SZ0, SZJ, SZD, L0, L0M, LJ, LJM, ST, STNT, STM)                      \
	SG_SIMD_KERNEL(NAME, SG_SIMD_ANY_K, SG_SIMD_UNROLL, vf, W32, SZ0, SZJ, SZD, L0, L0M, LJ, \
		       LJM, add_f32, ST, STNT, STM)
SG_SIMD_ACC(k_widen_h, 2, 2, 4, ld_h, ldm_h, ld_h, ldm_h, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_widen_b, 2, 2, 4, ld_b, ldm_b, ld_b, ldm_b, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_acc_h, 4, 2, 4, ld_f32, ldm_f32, ld_h, ldm_h, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_acc_b, 4, 2, 4, ld_f32, ldm_f32, ld_b, ldm_b, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_narrow_h, 4, 4, 2, ld_f32, ldm_f32, ld_f32, ldm_f32, st_h, stnt_h, stm_h)
SG_SIMD_ACC(k_narrow_b, 4, 4, 2, ld_f32, ldm_f32, ld_f32, ldm_f32, st_b, stnt_b, stm_b)

/*
 * Checksums fused with the kernels (sg_sum.h): the 16-bit ones' complement
 * sum of the bytes a kernel loads (or stores), taken from the very registers
 * it loads (or stores), so that a transport's UDP checksum costs no pass of
 * its own. Each 64-bit lane adds 32-bit words: 2^16 = 1 modulo 0xffff, so any
 * grouping of the 16-bit words gives the same sum once folded, as long as
 * words stay whole (every load starts an even number of bytes into the
 * buffer). Zero lanes (masked tails) add nothing.
 */
typedef uint64_t sg_v64 __attribute__((vector_size(sizeof(vi))));
typedef uint32_t sg_vh32 __attribute__((vector_size(sizeof(vh))));

/* A whole vector: its low and high 32-bit words of each 64-bit lane. */
static inline void sg_simd_cs_vi(sg_v64 *c, vi x)
{
	c[0] += (sg_v64)x & 0xffffffffu;
	c[1] += (sg_v64)x >> 32;
}

/* Half a vector: its 32-bit words, zero-extended. */
static inline void sg_simd_cs_vh(sg_v64 *c, vh x)
{
	c[0] += __builtin_convertvector((sg_vh32)x, sg_v64);
}

/* The accumulators' total, each lane folded first so that the sum cannot overflow. */
static inline uint64_t sg_simd_cs_total(const sg_v64 *c, unsigned int nc)
{
	uint64_t s = 0;

	for (unsigned int i = 0; i < nc; i++)
		for (unsigned int l = 0; l < sizeof(sg_v64) / sizeof(uint64_t); l++)
			s += (c[i][l] & 0xffffffffu) + (c[i][l] >> 32);
	return s;
}

/* Raw bits as the kernel's element kind. */
static inline vf sg_simd_vi_f32(vi x)
{
	return (vf)x;
}

static inline vd sg_simd_vi_f64(vi x)
{
	return (vd)x;
}

static inline vi sg_simd_vi_id(vi x)
{
	return x;
}

/*
 * SG_SIMD_CS_IN defines NAME_add(d, a, s, n), NAME_set(d, s, n) and
 * NAME_sum(s, n), each returning the checksum of s (n elements): d = a +
 * CVT(s), d = CVT(s), and nothing stored. s's raw vectors (R: vi or vh, W
 * elements of SZS bytes) load with LR and LRM and count with CS; a has
 * SZA-byte elements (LA, LAM), d SZD-byte ones (ST, STM). Additions keep the
 * order of SG_SIMD_KERNEL (a first), and d may be a exactly.
 */
#define SG_SIMD_CS_IN(NAME, U, V, W, SZA, SZS, SZD, R, LR, LRM, CS, CVT, LA, LAM, ADD, ST, STM) \
	static inline __attribute__((always_inline)) uint64_t NAME##_run(                      \
		char *d, const char *a, const char *s, size_t n, bool add, bool store)         \
	{                                                                                      \
		sg_v64 c[4] = {0};                                                             \
		size_t i = 0;                                                                  \
		for (; i + (U) * (W) <= n; i += (U) * (W)) {                                   \
			R r[(U)];                                                              \
			V v[(U)];                                                              \
			SG_SIMD_UNROLLED(U)                                                    \
			for (unsigned int u = 0; u < (U); u++) {                               \
				r[u] = LR(s + (i + u * (W)) * (SZS));                          \
				CS(&c[2 * (u & 1)], r[u]);                                     \
				v[u] = CVT(r[u]);                                              \
			}                                                                      \
			sg_simd_prefetch(s + i * (SZS), (U) * (W) * (SZS));                    \
			if (add) {                                                             \
				sg_simd_prefetch(a + i * (SZA), (U) * (W) * (SZA));            \
				SG_SIMD_UNROLLED(U)                                            \
				for (unsigned int u = 0; u < (U); u++)                         \
					v[u] = ADD(LA(a + (i + u * (W)) * (SZA)), v[u]);       \
			}                                                                      \
			if (store) {                                                           \
				SG_SIMD_UNROLLED(U)                                            \
				for (unsigned int u = 0; u < (U); u++)                         \
					ST(d + (i + u * (W)) * (SZD), v[u]);                   \
			}                                                                      \
		}                                                                              \
		for (; i + (W) <= n; i += (W)) {                                               \
			R r = LR(s + i * (SZS));                                               \
			V v = CVT(r);                                                          \
			CS(c, r);                                                              \
			if (add)                                                               \
				v = ADD(LA(a + i * (SZA)), v);                                 \
			if (store)                                                             \
				ST(d + i * (SZD), v);                                          \
		}                                                                              \
		if (i < n) { /* masked: lanes past n load as zero and are not stored */        \
			unsigned int m = (unsigned int)(n - i);                                \
			R r = LRM(s + i * (SZS), m);                                           \
			V v = CVT(r);                                                          \
			CS(c, r);                                                              \
			if (add)                                                               \
				v = ADD(LAM(a + i * (SZA), m), v);                             \
			if (store)                                                             \
				STM(d + i * (SZD), v, m);                                      \
		}                                                                              \
		return sg_simd_cs_total(c, 4);                                                 \
	}                                                                                      \
	static __attribute__((noinline, unused)) uint64_t NAME##_add(                          \
		void *d, const void *a, const void *s, size_t n)                               \
	{                                                                                      \
		return NAME##_run(d, a, s, n, true, true);                                     \
	}                                                                                      \
	static __attribute__((noinline, unused)) uint64_t NAME##_set(void *d, const void *s,   \
								     size_t n)                 \
	{                                                                                      \
		return NAME##_run(d, NULL, s, n, false, true);                                 \
	}                                                                                      \
	static __attribute__((noinline, unused)) uint64_t NAME##_sum(const void *s, size_t n)  \
	{                                                                                      \
		return NAME##_run(NULL, NULL, s, n, false, false);                             \
	}

/* NAME(d, a, n): d = NR(a) for fp32 a, the checksum of d (vh vectors of W32 16-bit elements). */
#define SG_SIMD_CS_OUT(NAME, U, NR)                                                            \
	static __attribute__((noinline)) uint64_t NAME(void *dst, const void *acc, size_t n)   \
	{                                                                                      \
		sg_v64 c[4] = {0};                                                             \
		char *d = dst;                                                                 \
		const char *a = acc;                                                           \
		size_t i = 0;                                                                  \
		for (; i + (U) * W32 <= n; i += (U) * W32) {                                   \
			sg_simd_prefetch(a + i * 4, (U) * W32 * 4);                            \
			SG_SIMD_UNROLLED(U)                                                    \
			for (unsigned int u = 0; u < (U); u++) {                               \
				vh r = NR(ld_f32(a + (i + u * W32) * 4));                      \
				sg_simd_cs_vh(&c[2 * (u & 1)], r);                             \
				st_vh(d + (i + u * W32) * 2, r);                               \
			}                                                                      \
		}                                                                              \
		for (; i + W32 <= n; i += W32) {                                               \
			vh r = NR(ld_f32(a + i * 4));                                          \
			sg_simd_cs_vh(c, r);                                                   \
			st_vh(d + i * 2, r);                                                   \
		}                                                                              \
		if (i < n) { /* zero lanes narrow to zero bits: they add nothing */            \
			vh r = NR(ldm_f32(a + i * 4, (unsigned int)(n - i)));                  \
			sg_simd_cs_vh(c, r);                                                   \
			stm_vh(d + i * 2, r, (unsigned int)(n - i));                           \
		}                                                                              \
		return sg_simd_cs_total(c, 4);                                                 \
	}

#define SG_SIMD_U SG_SIMD_UNROLL
/* Bytes: the copy and the checksum alone; int8/uint8 sums. */
SG_SIMD_CS_IN(cs_u8, SG_SIMD_U, vi, W8, 1, 1, 1, vi, ld_i, ldm_u8, sg_simd_cs_vi,
	      sg_simd_vi_id, ld_i, ldm_u8, add_u8, st_i, stm_u8)
SG_SIMD_CS_IN(cs_f32, SG_SIMD_U, vf, W32, 4, 4, 4, vi, ld_i, ldm_i32, sg_simd_cs_vi,
	      sg_simd_vi_f32, ld_f32, ldm_f32, add_f32, st_f32, stm_f32)
SG_SIMD_CS_IN(cs_f64, SG_SIMD_U, vd, W64, 8, 8, 8, vi, ld_i, ldm_i64, sg_simd_cs_vi,
	      sg_simd_vi_f64, ld_f64, ldm_f64, add_f64, st_f64, stm_f64)
SG_SIMD_CS_IN(cs_i32, SG_SIMD_U, vi, W32, 4, 4, 4, vi, ld_i, ldm_i32, sg_simd_cs_vi,
	      sg_simd_vi_id, ld_i, ldm_i32, add_i32, st_i, stm_i32)
SG_SIMD_CS_IN(cs_i64, SG_SIMD_U, vi, W64, 8, 8, 8, vi, ld_i, ldm_i64, sg_simd_cs_vi,
	      sg_simd_vi_id, ld_i, ldm_i64, add_i64, st_i, stm_i64)
/* fp16/bf16 accumulated in their own type (SG_SUM_F_NATIVE). */
SG_SIMD_CS_IN(cs_hn, SG_SIMD_U, vf, W32, 2, 2, 2, vh, ld_vh, ldm_vh, sg_simd_cs_vh, h_widen,
	      ld_h, ldm_h, addn_h, st_h, stm_h)
SG_SIMD_CS_IN(cs_bn, SG_SIMD_UNROLL_CS_B2, vb, WB, 2, 2, 2, vi, ld_i, ldm_w16, sg_simd_cs_vi,
	      b2_widen, ld_b2, ldm_b2, addn_b2, st_b2, stm_b2)
/* fp16/bf16 into fp32 accumulators. */
SG_SIMD_CS_IN(cs_acc_h, SG_SIMD_U, vf, W32, 4, 2, 4, vh, ld_vh, ldm_vh, sg_simd_cs_vh, h_widen,
	      ld_f32, ldm_f32, add_f32, st_f32, stm_f32)
SG_SIMD_CS_IN(cs_acc_b, SG_SIMD_U, vf, W32, 4, 2, 4, vh, ld_vh, ldm_vh, sg_simd_cs_vh, b_widen,
	      ld_f32, ldm_f32, add_f32, st_f32, stm_f32)
SG_SIMD_CS_OUT(cs_narrow_h, SG_SIMD_U, h_of)
SG_SIMD_CS_OUT(cs_narrow_b, SG_SIMD_U, b_of)

static uint64_t simd_csum_copy(void *dst, const void *src, size_t bytes)
{
	return dst != NULL ? cs_u8_set(dst, src, bytes) : cs_u8_sum(src, bytes);
}

static uint64_t simd_csum_add(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc,
			      const void *src, size_t n)
{
	const bool native = flags & SG_SUM_F_NATIVE;

	switch (dt) {
	case SG_DTYPE_FP32:
		return cs_f32_add(dst, acc, src, n);
	case SG_DTYPE_FP64:
		return cs_f64_add(dst, acc, src, n);
	case SG_DTYPE_FP16:
		if (native)
			return cs_hn_add(dst, acc, src, n);
		return acc != NULL ? cs_acc_h_add(dst, acc, src, n) : cs_acc_h_set(dst, src, n);
	case SG_DTYPE_BF16:
		if (native)
			return cs_bn_add(dst, acc, src, n);
		return acc != NULL ? cs_acc_b_add(dst, acc, src, n) : cs_acc_b_set(dst, src, n);
	case SG_DTYPE_INT32:
		return cs_i32_add(dst, acc, src, n);
	case SG_DTYPE_INT64:
		return cs_i64_add(dst, acc, src, n);
	case SG_DTYPE_INT8:
	case SG_DTYPE_UINT8:
		return cs_u8_add(dst, acc, src, n);
	default:
		return 0;
	}
}

static uint64_t simd_csum_narrow(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n)
{
	return (dt == SG_DTYPE_FP16 ? cs_narrow_h : cs_narrow_b)(dst, acc, n);
}

static void simd_addk(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k,
		      size_t n, unsigned int flags, bool nt)
{
	const bool native = flags & SG_SUM_F_NATIVE;

	switch (dt) {
	case SG_DTYPE_FP32:
		k_f32(dst, src, k, n, nt);
		break;
	case SG_DTYPE_FP64:
		k_f64(dst, src, k, n, nt);
		break;
	case SG_DTYPE_FP16:
		(native ? k_hn : k_h)(dst, src, k, n, nt);
		break;
	case SG_DTYPE_BF16:
		(k == 1 ? k_b1 : native ? k_bn : k_b)(dst, src, k, n, nt);
		break;
	case SG_DTYPE_INT32:
		k_i32(dst, src, k, n, nt);
		break;
	case SG_DTYPE_INT64:
		k_i64(dst, src, k, n, nt);
		break;
	case SG_DTYPE_INT8:
	case SG_DTYPE_UINT8:
		k_u8(dst, src, k, n, nt);
		break;
	default:
		break;
	}
}

static void simd_widen(enum sg_dtype dt, float *acc, const uint16_t *src, size_t n, bool add)
{
	const void *in[2] = {acc, src};
	const bool h = dt == SG_DTYPE_FP16;

	if (add)
		(h ? k_acc_h : k_acc_b)(acc, in, 2, n, false);
	else
		(h ? k_widen_h : k_widen_b)(acc, &in[1], 1, n, false);
}

static void simd_narrow(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n, bool nt)
{
	const void *in[1] = {acc};

	(dt == SG_DTYPE_FP16 ? k_narrow_h : k_narrow_b)(dst, in, 1, n, nt);
}

const struct sg_sum_kernels SG_SIMD_TABLE = {
	.addk = simd_addk,
	.widen = simd_widen,
	.narrow = simd_narrow,
	.csum_copy = simd_csum_copy,
	.csum_add = simd_csum_add,
	.csum_narrow = simd_csum_narrow,
};

#endif /* SG_SIMD_TABLE */
