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
 *   addn_h, addn_b             a + b rounded to the 16-bit type (SG_SUM_F_NATIVE)
 *   vb, WB, X = b2             bf16 as a pair of fp32 vectors (even and odd
 *                              elements) holding WB elements, for the fused sum
 *   sg_simd_sfence()           orders the non-temporal stores
 * Integer kinds share ld_i, st_i and stnt_i.
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
 * The bf16 pair kernels keep two vectors per unrolled vector: an ISA with 16
 * vector registers sets a smaller SG_SIMD_UNROLL_B2, or the step spills.
 */
#ifndef SG_SIMD_UNROLL
#define SG_SIMD_UNROLL 8
#endif
#ifndef SG_SIMD_UNROLL_B2
#define SG_SIMD_UNROLL_B2 SG_SIMD_UNROLL
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
 * SG_SIMD_KERNEL defines NAME(dst, src, k, n, nt): dst = src[0] + ... + src[k-1]
 * where src[0] has SZ0-byte elements, src[1..k-1] SZJ-byte elements and dst
 * SZD-byte elements, U vectors of W elements per step. All k inputs of one
 * step are loaded before dst is written, so dst may alias any input exactly.
 * Each input is read once and dst written once, whatever k is.
 */
#define SG_SIMD_KERNEL(NAME, U, V, W, SZ0, SZJ, SZD, L0, L0M, LJ, LJM, ADD, ST, STNT, STM)     \
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
		NAME##_run(d, src, k, i, hi, false);                                           \
	}                                                                                      \
	static __attribute__((noinline)) void NAME##_stream(char *d, const void *const *src,   \
							    unsigned int k, size_t i, size_t hi) \
	{                                                                                      \
		NAME##_run(d, src, k, i, hi, true);                                            \
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
	SG_SIMD_KERNEL(NAME, U, V, W, SZ, SZ, SZ, LDI, ldm_##X, LDI, ldm_##X, ADD, STI, STNTI, \
		       stm_##X)

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
/* Accumulator kernels: src[0] (if k == 2) is the fp32 accumulator, src[k-1] the 16-bit input. */
#define SG_SIMD_ACC(NAME, SZ0, SZJ, SZD, L0, L0M, LJ, LJM, ST, STNT, STM)                      \
	SG_SIMD_KERNEL(NAME, SG_SIMD_UNROLL, vf, W32, SZ0, SZJ, SZD, L0, L0M, LJ, LJM, add_f32, \
		       ST, STNT, STM)
SG_SIMD_ACC(k_widen_h, 2, 2, 4, ld_h, ldm_h, ld_h, ldm_h, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_widen_b, 2, 2, 4, ld_b, ldm_b, ld_b, ldm_b, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_acc_h, 4, 2, 4, ld_f32, ldm_f32, ld_h, ldm_h, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_acc_b, 4, 2, 4, ld_f32, ldm_f32, ld_b, ldm_b, st_f32, stnt_f32, stm_f32)
SG_SIMD_ACC(k_narrow_h, 4, 4, 2, ld_f32, ldm_f32, ld_f32, ldm_f32, st_h, stnt_h, stm_h)
SG_SIMD_ACC(k_narrow_b, 4, 4, 2, ld_f32, ldm_f32, ld_f32, ldm_f32, st_b, stnt_b, stm_b)

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
		(native ? k_bn : k_b)(dst, src, k, n, nt);
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
};

#endif /* SG_SIMD_TABLE */
