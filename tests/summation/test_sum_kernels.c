/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every SIMD kernel table against the scalar reference, bit for bit: each
 * dtype and accumulation mode, every length 0..1025, misaligned dst and
 * inputs, in-place sums, ordinary and streaming stores, k = 1..64 (sampled),
 * the accumulator kernels, and no byte written outside dst. Then sums whose
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
	{SG_DTYPE_FP32, 0},  {SG_DTYPE_FP64, 0},  {SG_DTYPE_FP16, 0},
	{SG_DTYPE_FP16, SG_SUM_F_NATIVE},	  {SG_DTYPE_BF16, 0},
	{SG_DTYPE_BF16, SG_SUM_F_NATIVE},	  {SG_DTYPE_INT32, 0},
	{SG_DTYPE_INT64, 0}, {SG_DTYPE_INT8, 0},  {SG_DTYPE_UINT8, 0},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

/* Byte offsets: aligned, element-aligned and not even element-aligned. */
static const size_t offs[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 60, 63, 64, 100};
#define NOFFS (sizeof(offs) / sizeof(offs[0]))

static uint8_t *in[SG_SUM_MAX_K];
static uint8_t *ref, *got;
static uint64_t seed = 0x5167a5eed;

/* One addk into @out (guard bytes around), optionally in place on input 0. */
static void run_addk(const struct sg_sum_kernels *kt, uint8_t *out, enum sg_dtype dt,
		     unsigned int flags, unsigned int k, size_t n, const size_t *off, size_t doff,
		     bool inplace, bool nt)
{
	const void *s[SG_SUM_MAX_K];

	memset(out, GUARD, BUFSZ);
	for (unsigned int j = 0; j < k; j++)
		s[j] = in[j] + off[j];
	if (inplace) {
		memcpy(out + doff, s[0], n * sg_dtype_size(dt));
		s[0] = out + doff;
	}
	kt->addk(dt, out + doff, s, k, n, flags, nt);
}

/* got (by @name) against ref: @esz-byte elements of @dt at @doff, guards intact. */
static bool same(const char *name, const char *what, enum sg_dtype dt, size_t esz, size_t n,
		 size_t doff, unsigned int k, const size_t *off)
{
	size_t i = st_first_diff(dt, esz, got + doff, ref + doff, n);
	bool guards = memcmp(got, ref, doff) == 0 &&
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
	snprintf(what, sizeof(what), "addk%s%s%s", flags ? "/native" : "", inplace ? "/inplace" : "",
		 nt ? "/nt" : "");
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

static void run_acc(const struct sg_sum_kernels *kt, uint8_t *out, enum acc_op op,
		    enum sg_dtype dt, size_t n, const uint8_t *src, const uint8_t *acc, size_t doff,
		    bool nt)
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

				run_acc(&sg_sum_kernels_scalar, ref, op, dt, n, src, acc, doff, false);
				for (unsigned int p = 0; p < npaths; p++) {
					run_acc(paths[p].kt, got, op, dt, n, src, acc, doff, n % 2);
					same(paths[p].name, what[op], odt, sg_dtype_size(odt), n, doff,
					     1, off);
				}
			}
		}
	}
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
	for (unsigned int j = 0; j < SG_SUM_MAX_K; j++)
		free(in[j]);
	free(ref);
	free(got);
	return sg_test_finish("test_sum_kernels");
}
