/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every SIMD kernel table against the scalar reference, bit for bit: each
 * dtype and accumulation mode, every length 0..1025, misaligned dst and
 * inputs, in-place sums, ordinary and streaming stores, k = 1..64 (sampled),
 * the accumulator kernels, the checksums fused with them, and no byte written
 * outside dst. Then sums whose
 * results are known by hand (NaN payloads, infinities, fp16 subnormals, bf16
 * ties and denormals, integer wrap-around) on every path.
 *
 * NaN: a NaN result must be a NaN. When exactly one input is NaN its quieted
 * payload must match exactly (checked by the hand-made cases); when several
 * are, x86 keeps the first operand's and compilers may commute an addition,
 * so either payload is accepted.
 */
#include <stdlib.h>

#include "sg_sum_internal.h"
#include "sg_test.h"
#include "sum_test_util.h"

#define MAXN 1025
#define PAD 128 /* guard bytes on each side of dst; offsets stay below this */
#define BUFSZ ((MAXN * 8 + 2 * PAD + 63) / 64 * 64) /* aligned_alloc wants a multiple */
#define GUARD 0xa5

struct path {
	const char *name;
	const struct sg_sum_kernels *kt;
	const char *why_not; /* NULL when this CPU and build can run it */
};

static struct path paths[3];
static unsigned int npaths;

/* cpuid wants literal names, hence one function per path. */
static const char *lacks_avx2(void)
{
	if (!__builtin_cpu_supports("avx2"))
		return "CPU lacks avx2";
	if (!__builtin_cpu_supports("f16c"))
		return "CPU lacks f16c";
	if (!__builtin_cpu_supports("fma"))
		return "CPU lacks fma";
	return NULL;
}

static const char *lacks_avx512(void)
{
	if (!__builtin_cpu_supports("avx512f"))
		return "CPU lacks avx512f";
	if (!__builtin_cpu_supports("avx512bw"))
		return "CPU lacks avx512bw";
	if (!__builtin_cpu_supports("avx512vl"))
		return "CPU lacks avx512vl";
	return lacks_avx2();
}

static const char *lacks_avx512bf16(void)
{
	if (!__builtin_cpu_supports("avx512bf16"))
		return "CPU lacks avx512bf16";
	return lacks_avx512();
}

static void add_path(const char *name, const struct sg_sum_kernels *kt, const char *why_not)
{
	if (why_not != NULL) {
		printf("SKIP path %s: %s\n", name, why_not);
		return;
	}
	paths[npaths].name = name;
	paths[npaths].kt = kt;
	npaths++;
}

static void find_paths(void)
{
	__builtin_cpu_init();
#ifdef SG_SUM_BUILD_AVX2
	add_path("avx2", &sg_sum_kernels_avx2, lacks_avx2());
#else
	add_path("avx2", NULL, "not built: the compiler lacks -mavx2 -mf16c -mfma");
#endif
#ifdef SG_SUM_BUILD_AVX512
	add_path("avx512", &sg_sum_kernels_avx512, lacks_avx512());
#else
	add_path("avx512", NULL, "not built: the compiler lacks -mavx512f/bw/vl");
#endif
#ifdef SG_SUM_BUILD_AVX512BF16
	add_path("avx512bf16", &sg_sum_kernels_avx512bf16, lacks_avx512bf16());
#else
	add_path("avx512bf16", NULL, "not built: the compiler lacks -mavx512bf16");
#endif
}

static const struct {
	enum sg_dtype dt;
	unsigned int flags;
} modes[] = {
	{SG_DTYPE_FP32, 0},  {SG_DTYPE_FP64, 0},
	{SG_DTYPE_FP16, 0},  {SG_DTYPE_FP16, SG_SUM_F_NATIVE},
	{SG_DTYPE_BF16, 0},  {SG_DTYPE_BF16, SG_SUM_F_NATIVE},
	{SG_DTYPE_INT32, 0}, {SG_DTYPE_INT64, 0},
	{SG_DTYPE_INT8, 0},  {SG_DTYPE_UINT8, 0},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

/* Byte offsets: aligned, element-aligned and not even element-aligned. */
static const size_t offs[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 60, 63, 64, 100};
#define NOFFS (sizeof(offs) / sizeof(offs[0]))

static uint8_t *in[SG_SUM_MAX_K];
static uint8_t *ref, *got;
static uint64_t seed = 0x5167a5eed;

/*
 * One addk into @out (guard bytes around), optionally in place: dst is then
 * input n % k (the first, the last or one between, as n varies).
 */
static void run_addk(const struct sg_sum_kernels *kt, uint8_t *out, enum sg_dtype dt,
		     unsigned int flags, unsigned int k, size_t n, const size_t *off, size_t doff,
		     bool inplace, bool nt)
{
	const void *s[SG_SUM_MAX_K];

	memset(out, GUARD, BUFSZ);
	for (unsigned int j = 0; j < k; j++)
		s[j] = in[j] + off[j];
	if (inplace) {
		memcpy(out + doff, s[n % k], n * sg_dtype_size(dt));
		s[n % k] = out + doff;
	}
	kt->addk(dt, out + doff, s, k, n, flags, nt);
}

/* got (by @name) against ref: @esz-byte elements of @dt at @doff, guards intact. */
static bool same(const char *name, const char *what, enum sg_dtype dt, size_t esz, size_t n,
		 size_t doff, unsigned int k, const size_t *off)
{
	size_t i = st_first_diff(dt, esz, got + doff, ref + doff, n);
	bool guards =
		memcmp(got, ref, doff) == 0 &&
		memcmp(got + doff + n * esz, ref + doff + n * esz, BUFSZ - doff - n * esz) == 0;
	uint64_t g = 0, w = 0;

	if (i != SIZE_MAX) {
		memcpy(&g, got + doff + i * esz, esz);
		memcpy(&w, ref + doff + i * esz, esz);
	}
	return SG_CHECK(i == SIZE_MAX && guards,
			"%s %s %s k=%u n=%zu doff=%zu off0=%zu: %s at %zu: got 0x%llx want 0x%llx",
			name, what, sg_dtype_name(dt), k, n, doff, off[0],
			guards ? "element" : "write outside dst", i == SIZE_MAX ? 0 : i,
			(unsigned long long)g, (unsigned long long)w);
}

static void check_addk(unsigned int m, unsigned int k, size_t n, size_t doff, const size_t *off,
		       bool inplace, bool nt)
{
	enum sg_dtype dt = modes[m].dt;
	unsigned int flags = modes[m].flags;
	size_t sz = sg_dtype_size(dt);
	char what[32];

	for (unsigned int j = 0; j < k; j++)
		st_fill(dt, in[j] + off[j], n, &seed);
	run_addk(&sg_sum_kernels_scalar, ref, dt, flags, k, n, off, doff, inplace, false);
	snprintf(what, sizeof(what), "addk%s%s%s", flags ? "/native" : "",
		 inplace ? "/inplace" : "", nt ? "/nt" : "");
	for (unsigned int p = 0; p < npaths; p++) {
		run_addk(paths[p].kt, got, dt, flags, k, n, off, doff, inplace, nt);
		if (!same(paths[p].name, what, dt, sz, n, doff, k, off))
			return; /* one report per case is enough */
	}
}

/* Every mode, every length 0..MAXN; k, offsets, in-place and nt vary with n. */
static void test_lengths(void)
{
	static const unsigned int ks[] = {1, 2, 3, 4, 2, 5, 8, 3, 2, 7, 16, 4};
	size_t off[SG_SUM_MAX_K];

	for (unsigned int m = 0; m < NMODES; m++) {
		for (size_t n = 0; n <= MAXN; n++) {
			unsigned int k = ks[(n + m) % (sizeof(ks) / sizeof(ks[0]))];

			for (unsigned int j = 0; j < k; j++)
				off[j] = offs[(n + 5 * j + m) % NOFFS];
			check_addk(m, k, n, offs[(3 * n + m) % NOFFS], off, n % 7 == 3, n % 4 == 1);
		}
	}
}

/* Large k, sampled: a few lengths each, around the vector and unroll sizes. */
static void test_large_k(void)
{
	static const unsigned int ks[] = {6, 9, 13, 31, 32, 33, 47, 63, 64};
	static const size_t ns[] = {1, 15, 16, 17, 63, 64, 65, 130, 511, 1025};
	size_t off[SG_SUM_MAX_K];

	for (unsigned int m = 0; m < NMODES; m++) {
		for (unsigned int a = 0; a < sizeof(ks) / sizeof(ks[0]); a++) {
			for (unsigned int b = a % 3; b < sizeof(ns) / sizeof(ns[0]); b += 3) {
				for (unsigned int j = 0; j < ks[a]; j++)
					off[j] = offs[(a + b + 7 * j) % NOFFS];
				check_addk(m, ks[a], ns[b], offs[(a + 2 * b) % NOFFS], off, b == 4,
					   a % 2 == 0);
			}
		}
	}
}

/* Bits planted in an fp32 accumulator so that narrowing meets its hard cases. */
static void plant_hard_fp32(uint8_t *acc, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u, r = (uint32_t)st_rand(s);

		memcpy(&u, acc + 4 * i, 4);
		switch (r % 6) {
		case 0: /* fp32 denormal: VCVTNEPS2BF16 alone would flush it */
			u = (r & 0x807fffffu) | 1u;
			break;
		case 1: /* exact bf16 tie */
			u = (u & 0xffff0000u) | 0x8000u;
			break;
		case 2: /* exact fp16 tie, in the fp16 subnormal range or near 1.0 */
			u = ((r & 1) ? 0x33000000u : 0x3f800000u) | (u & 0x007fe000u) | 0x1000u;
			break;
		default:
			break;
		}
		memcpy(acc + 4 * i, &u, 4);
	}
}

enum acc_op { ACC_WIDEN, ACC_ADD, ACC_NARROW };

static void run_acc(const struct sg_sum_kernels *kt, uint8_t *out, enum acc_op op, enum sg_dtype dt,
		    size_t n, const uint8_t *src, const uint8_t *acc, size_t doff, bool nt)
{
	memset(out, GUARD, BUFSZ);
	switch (op) {
	case ACC_WIDEN:
		kt->widen(dt, (float *)(out + doff), (const uint16_t *)src, n, false);
		break;
	case ACC_ADD:
		memcpy(out + doff, acc, 4 * n);
		kt->widen(dt, (float *)(out + doff), (const uint16_t *)src, n, true);
		break;
	case ACC_NARROW:
		kt->narrow(dt, (uint16_t *)(out + doff), (const float *)acc, n, nt);
		break;
	}
}

/* widen (init and add) and narrow, each path against scalar. */
static void test_acc_kernels(void)
{
	static const enum sg_dtype dts[] = {SG_DTYPE_FP16, SG_DTYPE_BF16};
	static const char *const what[] = {"widen", "widen+add", "narrow"};

	for (unsigned int d = 0; d < 2; d++) {
		enum sg_dtype dt = dts[d];

		for (size_t n = 0; n <= MAXN; n += 1 + n / 64) {
			size_t off[2] = {offs[(n + 3) % NOFFS], offs[(n + 7) % NOFFS]};
			size_t doff = offs[n % NOFFS];
			const uint8_t *src = in[0] + off[0], *acc = in[1] + off[1];

			st_fill(dt, in[0] + off[0], n, &seed);
			st_fill(SG_DTYPE_FP32, in[1] + off[1], n, &seed);
			plant_hard_fp32(in[1] + off[1], n, &seed);
			for (enum acc_op op = ACC_WIDEN; op <= ACC_NARROW; op++) {
				enum sg_dtype odt = op == ACC_NARROW ? dt : SG_DTYPE_FP32;

				run_acc(&sg_sum_kernels_scalar, ref, op, dt, n, src, acc, doff,
					false);
				for (unsigned int p = 0; p < npaths; p++) {
					run_acc(paths[p].kt, got, op, dt, n, src, acc, doff, n % 2);
					same(paths[p].name, what[op], odt, sg_dtype_size(odt), n,
					     doff, 1, off);
				}
			}
		}
	}
}

/* A kernel's unfolded checksum, folded as RFC 1071 says: 0 stays 0, else 1..0xffff. */
static uint16_t fold(uint64_t s)
{
	return s == 0 ? 0 : (uint16_t)(1 + (s - 1) % 0xffff);
}

/*
 * The checksum kernels, each path against scalar: the copy (and the checksum
 * alone) at any byte offset and length, the fused sums of every mode into
 * another buffer, in place and (fp16/bf16 into fp32) from nothing, and the
 * fused narrowing. Outputs as in the other tests, checksums equal once folded.
 */
static void test_csum_kernels(void)
{
	for (size_t n = 0; n <= MAXN; n += 1 + n / 128) {
		size_t so = offs[(n + 1) % NOFFS], doff = offs[(n + 2) % NOFFS], bytes = 2 * n + n % 3;
		const size_t off[1] = {so};
		uint16_t want, c;

		st_fill(SG_DTYPE_UINT8, in[0] + so, bytes, &seed);
		memset(ref, GUARD, BUFSZ);
		want = fold(sg_sum_kernels_scalar.csum_copy(ref + doff, in[0] + so, bytes));
		for (unsigned int p = 0; p < npaths; p++) {
			memset(got, GUARD, BUFSZ);
			c = fold(paths[p].kt->csum_copy(got + doff, in[0] + so, bytes));
			SG_CHECK(c == want, "%s csum_copy %zu bytes at +%zu: 0x%x, want 0x%x",
				 paths[p].name, bytes, so, c, want);
			same(paths[p].name, "csum_copy", SG_DTYPE_UINT8, 1, bytes, doff, 1, off);
			c = fold(paths[p].kt->csum_copy(NULL, in[0] + so, bytes));
			SG_CHECK(c == want, "%s csum alone %zu bytes at +%zu: 0x%x, want 0x%x",
				 paths[p].name, bytes, so, c, want);
		}
	}
	for (unsigned int m = 0; m < NMODES; m++) {
		enum sg_dtype dt = modes[m].dt;
		unsigned int flags = modes[m].flags;
		bool wide = sg_sum_acc_elem_size(dt, flags) == 4 && sg_dtype_size(dt) == 2;
		size_t asz = sg_sum_acc_elem_size(dt, flags);

		for (size_t n = 0; n <= MAXN; n += 1 + n / 64) {
			size_t off[2] = {offs[(n + m) % NOFFS], offs[(n + 3 * m + 5) % NOFFS]};
			size_t doff = offs[(2 * n + m) % NOFFS];
			const uint8_t *src = in[0] + off[0], *acc = in[1] + off[1];
			/* 0: dst another buffer; 1: in place; 2: no accumulator (wide only) */
			unsigned int how = (unsigned int)(n % (wide ? 3 : 2));
			uint16_t want = 0, c;

			st_fill(dt, in[0] + off[0], n, &seed);
			st_fill(wide ? SG_DTYPE_FP32 : dt, in[1] + off[1], n, &seed);
			for (unsigned int p = 0; p <= npaths; p++) {
				const struct sg_sum_kernels *kt = p ? paths[p - 1].kt
								    : &sg_sum_kernels_scalar;
				uint8_t *out = p ? got : ref;
				const uint8_t *a = how == 2 ? NULL : acc;

				memset(out, GUARD, BUFSZ);
				if (how == 1) {
					memcpy(out + doff, acc, n * asz);
					a = out + doff;
				}
				c = fold(kt->csum_add(dt, flags, out + doff, a, src, n));
				if (p == 0) {
					want = c;
					continue;
				}
				SG_CHECK(c == want, "%s csum_add %s%s n=%zu how=%u: 0x%x, want 0x%x",
					 paths[p - 1].name, sg_dtype_name(dt), flags ? "/native" : "",
					 n, how, c, want);
				same(paths[p - 1].name, "csum_add", wide ? SG_DTYPE_FP32 : dt, asz, n,
				     doff, 2, off);
			}
		}
	}
	for (unsigned int d = 0; d < 2; d++) {
		enum sg_dtype dt = d ? SG_DTYPE_BF16 : SG_DTYPE_FP16;

		for (size_t n = 0; n <= MAXN; n += 1 + n / 64) {
			size_t off[1] = {offs[(n + 5) % NOFFS]}, doff = offs[(n + 9) % NOFFS];
			uint16_t want, c;

			st_fill(SG_DTYPE_FP32, in[1] + off[0], n, &seed);
			plant_hard_fp32(in[1] + off[0], n, &seed);
			memset(ref, GUARD, BUFSZ);
			want = fold(sg_sum_kernels_scalar.csum_narrow(dt, (uint16_t *)(ref + doff),
								      (const float *)(in[1] + off[0]),
								      n));
			for (unsigned int p = 0; p < npaths; p++) {
				memset(got, GUARD, BUFSZ);
				c = fold(paths[p].kt->csum_narrow(dt, (uint16_t *)(got + doff),
								  (const float *)(in[1] + off[0]),
								  n));
				SG_CHECK(c == want, "%s csum_narrow %s n=%zu: 0x%x, want 0x%x",
					 paths[p].name, sg_dtype_name(dt), n, c, want);
				same(paths[p].name, "csum_narrow", dt, 2, n, doff, 1, off);
			}
		}
	}
}

#define ANY_NAN UINT64_MAX

/* Sums worked out by hand from the IEEE 754 layouts and two's complement. */
static const struct known {
	enum sg_dtype dt;
	unsigned int flags;
	unsigned int k;
	uint64_t in[3];
	uint64_t want;
} knowns[] = {
	/* fp32: one signalling NaN comes out quieted with its payload. */
	{SG_DTYPE_FP32, 0, 3, {0x3f800000, 0x7fa00001, 0x40000000}, 0x7fe00001},
	{SG_DTYPE_FP32, 0, 1, {0x7fa00001}, 0x7fa00001}, /* k = 1 is a copy */
	{SG_DTYPE_FP32, 0, 2, {0x7f800000, 0xff800000}, ANY_NAN},
	{SG_DTYPE_FP32, 0, 2, {0x7f800000, 0x3f800000}, 0x7f800000},
	{SG_DTYPE_FP32, 0, 2, {0x7f7fffff, 0x7f7fffff}, 0x7f800000}, /* overflow */
	{SG_DTYPE_FP32, 0, 2, {0x80000000, 0x80000000}, 0x80000000}, /* -0 + -0 */
	{SG_DTYPE_FP32, 0, 2, {0x00000000, 0x80000000}, 0x00000000}, /* +0 + -0 */
	{SG_DTYPE_FP32, 0, 2, {0x00000001, 0x00000001}, 0x00000002}, /* no flush to zero */
	{SG_DTYPE_FP64, 0, 2, {0x3ff0000000000000, 0x7ff4000000000001}, 0x7ffc000000000001},
	{SG_DTYPE_FP64, 0, 3, {1, 1, 0x8000000000000001}, 1},
	/* fp16: subnormals, the subnormal/normal boundary, overflow, NaN. */
	{SG_DTYPE_FP16, 0, 3, {0x0001, 0x0001, 0x0001}, 0x0003},
	{SG_DTYPE_FP16, 0, 2, {0x03ff, 0x0001}, 0x0400},
	{SG_DTYPE_FP16, 0, 2, {0x7bff, 0x7bff}, 0x7c00},
	{SG_DTYPE_FP16, 0, 2, {0x7bff, 0x3c00}, 0x7bff}, /* 65505 rounds down */
	{SG_DTYPE_FP16, 0, 2, {0x3c00, 0x7c01}, 0x7e01},
	{SG_DTYPE_FP16, SG_SUM_F_NATIVE, 2, {0x3c00, 0x7c01}, 0x7e01},
	{SG_DTYPE_FP16, 0, 1, {0x7c01}, 0x7e01}, /* narrowing quiets */
	{SG_DTYPE_FP16, 0, 2, {0xfc00, 0x7c00}, ANY_NAN},
	/* 2048 + 1 + 1: exact in fp32 (2050); native rounds 2049 to even (2048) twice. */
	{SG_DTYPE_FP16, 0, 3, {0x6800, 0x3c00, 0x3c00}, 0x6801},
	{SG_DTYPE_FP16, SG_SUM_F_NATIVE, 3, {0x6800, 0x3c00, 0x3c00}, 0x6800},
	/* bf16: ties to even, denormals kept (no flush), NaN. */
	{SG_DTYPE_BF16, 0, 2, {0x3f80, 0x3b80}, 0x3f80}, /* 1 + 2^-8: tie, stays even */
	{SG_DTYPE_BF16, 0, 2, {0x3f81, 0x3b80}, 0x3f82}, /* tie, odd rounds up */
	{SG_DTYPE_BF16, 0, 2, {0x0001, 0x0001}, 0x0002},
	{SG_DTYPE_BF16, 0, 2, {0x8001, 0x8001}, 0x8002},
	{SG_DTYPE_BF16, 0, 2, {0x3f80, 0x7f81}, 0x7fc1},
	{SG_DTYPE_BF16, 0, 1, {0x7f81}, 0x7fc1}, /* k = 1: no addition quiets it */
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 1, {0xff81}, 0xffc1},
	{SG_DTYPE_BF16, 0, 1, {0xff80}, 0xff80},
	{SG_DTYPE_BF16, 0, 3, {0x4380, 0x3f80, 0x3f80}, 0x4381}, /* 256 + 1 + 1 = 258 */
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 3, {0x4380, 0x3f80, 0x3f80}, 0x4380},
	/*
	 * max + 2^119 - 2^120: native rounds the first sum's tie up into
	 * infinity (the carry into the exponent), fp32 partial sums give
	 * max - 2^119, a tie that rounds to the even 0x7f7e.
	 */
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 3, {0x7f7f, 0x7b00, 0xfb80}, 0x7f80},
	{SG_DTYPE_BF16, 0, 3, {0x7f7f, 0x7b00, 0xfb80}, 0x7f7e},
	/* native partial sums that are NaN: payloads with odd and even last bits, default NaN */
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 3, {0x7f81, 0x3f80, 0x4000}, 0x7fc1},
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 3, {0x3f80, 0xffc2, 0x7f80}, 0xffc2},
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 3, {0x7f80, 0xff80, 0x3f80}, ANY_NAN},
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 2, {0x8000, 0x8000}, 0x8000}, /* -0 + -0 */
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE, 3, {0x8000, 0x0000, 0x8000}, 0x0000},
	/* integers wrap modulo 2^bits */
	{SG_DTYPE_INT8, 0, 2, {0x7f, 0x01}, 0x80},
	{SG_DTYPE_INT8, 0, 2, {0x80, 0xff}, 0x7f},
	{SG_DTYPE_UINT8, 0, 3, {0xff, 0x02, 0xff}, 0x00},
	{SG_DTYPE_INT32, 0, 2, {0x7fffffff, 1}, 0x80000000},
	{SG_DTYPE_INT64, 0, 2, {0x7fffffffffffffff, 1}, 0x8000000000000000},
	{SG_DTYPE_INT64, 0, 3, {0, UINT64_MAX, UINT64_MAX}, UINT64_MAX - 1},
};

/* Each hand-made case, as 197 equal elements (vectors and a tail), on every table. */
static void test_known(void)
{
	const size_t n = 197;

	for (unsigned int c = 0; c < sizeof(knowns) / sizeof(knowns[0]); c++) {
		const struct known *kc = &knowns[c];
		size_t sz = sg_dtype_size(kc->dt), off[3] = {0, 0, 0};

		for (unsigned int j = 0; j < kc->k; j++)
			for (size_t i = 0; i < n; i++)
				memcpy(in[j] + i * sz, &kc->in[j], sz);
		for (unsigned int p = 0; p <= npaths; p++) {
			const struct sg_sum_kernels *kt =
				p ? paths[p - 1].kt : &sg_sum_kernels_scalar;
			const char *name = p ? paths[p - 1].name : "scalar";

			for (int nt = 0; nt < 2; nt++) {
				size_t bad = SIZE_MAX;
				uint64_t v = 0;

				run_addk(kt, got, kc->dt, kc->flags, kc->k, n, off, 64, false, nt);
				for (size_t i = 0; i < n && bad == SIZE_MAX; i++) {
					memcpy(&v, got + 64 + i * sz, sz);
					if (kc->want == ANY_NAN ? !st_is_nan(kc->dt, &v)
								: v != kc->want)
						bad = i;
				}
				SG_CHECK(bad == SIZE_MAX,
					 "%s case %u (%s%s): element %zu is 0x%llx, want 0x%llx",
					 name, c, sg_dtype_name(kc->dt), kc->flags ? " native" : "",
					 bad, (unsigned long long)v, (unsigned long long)kc->want);
			}
		}
	}
}

/*
 * bf16 rounding, every pattern: each 16-bit top T (sign, exponent, 7
 * mantissa bits) is summed with two bf16 inputs that put 16 more bits L
 * exactly below its mantissa (T + hi + lo, the same sign, exact in fp32), for
 * L around the tie 0x8000 and a random one; where the exponent is too small
 * for the low bits to be bf16 (or T is infinite or NaN), L = 0. Every path's
 * result, including scalar's, must be the test's own round-to-nearest-even of
 * the 32 bits T:L (a NaN keeps its payload and gets the quiet bit), bit for
 * bit. The k = 1 copy of every T must be T, a NaN quieted.
 */
static uint16_t rne_bf16(uint16_t t, uint16_t l)
{
	if ((t & 0x7f80) == 0x7f80)
		return (t & 0x7f) != 0 ? t | 0x40 : t;
	return (uint16_t)(t + (l > 0x8000 || (l == 0x8000 && (t & 1))));
}

static void test_bf16_all_tops(void)
{
	static const uint16_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0};
	const size_t nl = sizeof(lows) / sizeof(lows[0]), cap = 65536 * nl;
	uint16_t *a = malloc(cap * 2), *hi = malloc(cap * 2), *lo = malloc(cap * 2);
	uint16_t *want = malloc(cap * 2), *out = malloc(cap * 2), *tops = malloc(65536 * 2);
	size_t n = 0, bad = 0;

	if (a == NULL || hi == NULL || lo == NULL || want == NULL || out == NULL || tops == NULL)
		SG_TEST_SKIP_ALL("out of memory");
	for (uint32_t t = 0; t < 65536; t++) {
		unsigned int e = (t >> 7) & 0xff;
		float sign = t & 0x8000 ? -1.0f : 1.0f;

		for (size_t j = 0; j < nl; j++) {
			uint16_t l = j + 1 < nl ? lows[j] : (uint16_t)st_rand(&seed);
			float fh, fl, sum;
			uint32_t bits;

			if ((e < 17 || e == 255) && j > 0)
				break;
			if (e < 17 || e == 255)
				l = 0;
			/* L's bit i weighs 2^(e - 150 + i): the high byte, then the low one */
			fh = sign * ldexpf((float)(l >> 8), (int)e - 142);
			fl = sign * ldexpf((float)(l & 0xff), (int)e - 150);
			a[n] = (uint16_t)t;
			hi[n] = sg_fp32_to_bf16(fh);
			lo[n] = sg_fp32_to_bf16(fl);
			sum = sg_bf16_to_fp32(a[n]) + sg_bf16_to_fp32(hi[n]) + sg_bf16_to_fp32(lo[n]);
			memcpy(&bits, &sum, 4);
			/* the inputs are exact and so is their sum, NaN apart */
			if (!SG_CHECK(sg_bf16_to_fp32(hi[n]) == fh && sg_bf16_to_fp32(lo[n]) == fl &&
					      (e == 255 || bits == (t << 16 | l)),
				      "bf16 tops: T=0x%04x L=0x%04x built 0x%08x", t, l, bits))
				goto out;
			want[n++] = rne_bf16((uint16_t)t, l);
		}
	}
	for (uint32_t t = 0; t < 65536; t++)
		tops[t] = (uint16_t)t;
	for (unsigned int p = 0; p <= npaths; p++) {
		const struct sg_sum_kernels *kt = p ? paths[p - 1].kt : &sg_sum_kernels_scalar;
		const char *name = p ? paths[p - 1].name : "scalar";
		const void *src[3] = {a, hi, lo}, *copy[1] = {tops};

		kt->addk(SG_DTYPE_BF16, out, src, 3, n, 0, false);
		for (size_t i = 0; i < n; i++)
			if (out[i] != want[i] && bad++ < 5)
				SG_CHECK(false, "%s bf16 k=3 T=0x%04x (element %zu): 0x%04x, want 0x%04x",
					 name, a[i], i, out[i], want[i]);
		kt->addk(SG_DTYPE_BF16, out, copy, 1, 65536, 0, false);
		for (uint32_t t = 0; t < 65536; t++)
			if (out[t] != rne_bf16((uint16_t)t, 0) && bad++ < 5)
				SG_CHECK(false, "%s bf16 k=1 0x%04x: 0x%04x, want 0x%04x", name, t,
					 out[t], rne_bf16((uint16_t)t, 0));
	}
	SG_CHECK(bad == 0, "bf16 tops: %zu wrong elements", bad);
out:
	free(a);
	free(hi);
	free(lo);
	free(want);
	free(out);
	free(tops);
}

int main(void)
{
	find_paths();
	if (npaths == 0)
		SG_TEST_SKIP_ALL("no SIMD path runs here (see the lines above)");
	for (unsigned int j = 0; j < SG_SUM_MAX_K; j++)
		in[j] = aligned_alloc(64, BUFSZ);
	ref = aligned_alloc(64, BUFSZ);
	got = aligned_alloc(64, BUFSZ);
	if (ref == NULL || got == NULL || in[SG_SUM_MAX_K - 1] == NULL)
		SG_TEST_SKIP_ALL("out of memory");
	test_lengths();
	test_large_k();
	test_acc_kernels();
	test_csum_kernels();
	test_known();
	test_bf16_all_tops();
	for (unsigned int j = 0; j < SG_SUM_MAX_K; j++)
		free(in[j]);
	free(ref);
	free(got);
	return sg_test_finish("test_sum_kernels");
}
