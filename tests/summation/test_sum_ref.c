/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scalar reference against computations written here from scratch:
 * fp16/bf16 decoding with ldexp(), fp32 -> fp16/bf16 rounding in double
 * arithmetic with nearbyint(), integer sums in wider unsigned math, float sums
 * in index order. Then the public API (addk, the accumulator calls, copy,
 * streaming stores) on every implementation this CPU runs, against the same
 * independent results.
 */
#include <errno.h>
#include <stdlib.h>

#include "sg_test.h"
#include "sum_test_util.h"

/* IEEE binary formats narrower than fp32: mantissa bits, smallest normal exponent, bias. */
struct fmt {
	int mbits, emin, bias;
};

static const struct fmt F16 = {10, -14, 15}, BF16 = {7, -126, 127};

static const struct fmt *fmt_of(enum sg_dtype dt)
{
	return dt == SG_DTYPE_FP16 ? &F16 : &BF16;
}

/* Decode with ldexp; NaN as a float NaN (payload checked separately). */
static double my_decode(const struct fmt *f, uint16_t h)
{
	int ebits = 15 - f->mbits;
	unsigned int e = (h >> f->mbits) & ((1u << ebits) - 1), m = h & ((1u << f->mbits) - 1);
	double v;

	if (e == (1u << ebits) - 1)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, f->emin - f->mbits);
	else
		v = ldexp(m + (1u << f->mbits), (int)e - f->bias - f->mbits);
	return (h & 0x8000) ? -v : v;
}

/* Round @v (an fp32 value) to the format, nearest-even, and encode it. NaN -> 0x7fff. */
static uint16_t my_encode(const struct fmt *f, double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	int ebits = 15 - f->mbits, e;
	double a = fabs(v), ulp, r, maxv;

	if (isnan(v))
		return 0x7fff;
	maxv = ldexp((double)((2u << f->mbits) - 1), (1 << (ebits - 1)) - 1 - f->mbits);
	if (a == 0)
		return sign;
	e = ilogb(a) < f->emin ? f->emin : ilogb(a);
	ulp = ldexp(1, e - f->mbits);
	r = nearbyint(a / ulp) * ulp; /* a / ulp is exact: fp32 has 24 bits */
	if (r > maxv || isinf(a))
		return sign | (uint16_t)(((1u << ebits) - 1) << f->mbits);
	if (r < ldexp(1, f->emin))
		return sign | (uint16_t)(r / ldexp(1, f->emin - f->mbits));
	e = ilogb(r);
	return sign | (uint16_t)((unsigned int)(e + f->bias) << f->mbits) |
	       (uint16_t)(r / ldexp(1, e - f->mbits) - (1u << f->mbits));
}

static bool is_nan16(const struct fmt *f, uint16_t h)
{
	return isnan(my_decode(f, h));
}

static void test_decode_all(void)
{
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float a = sg_fp16_to_fp32((uint16_t)h), b = sg_bf16_to_fp32((uint16_t)h);
		double x = my_decode(&F16, (uint16_t)h), y = my_decode(&BF16, (uint16_t)h);

		if (isnan(x))
			SG_CHECK(isnan(a) && ((st_f2u(a) >> 13) & 0x3ff) == (h & 0x3ff),
				 "fp16 0x%04x: NaN payload", h);
		else
			SG_CHECK((double)a == x && !signbit(a) == !signbit(x),
				 "fp16 0x%04x: %g vs %g", h, (double)a, x);
		if (isnan(y))
			SG_CHECK(isnan(b), "bf16 0x%04x: NaN", h);
		else
			SG_CHECK((double)b == y && !signbit(b) == !signbit(y), "bf16 0x%04x", h);
	}
}

static void check_encode(float v)
{
	uint16_t h = sg_fp32_to_fp16(v), b = sg_fp32_to_bf16(v);
	uint16_t wh = my_encode(&F16, v), wb = my_encode(&BF16, v);

	if (isnan(v)) {
		/* NaN stays NaN, quieted, with the top payload bits and the sign. */
		SG_CHECK(h == ((st_f2u(v) >> 16 & 0x8000) | 0x7e00 | (st_f2u(v) >> 13 & 0x3ff)),
			 "fp16 of NaN 0x%08x: 0x%04x", st_f2u(v), h);
		SG_CHECK(b == ((st_f2u(v) >> 16) | 0x40), "bf16 of NaN 0x%08x: 0x%04x", st_f2u(v),
			 b);
		return;
	}
	SG_CHECK(h == wh, "fp16 of 0x%08x (%a): 0x%04x, want 0x%04x", st_f2u(v), (double)v, h, wh);
	SG_CHECK(b == wb, "bf16 of 0x%08x (%a): 0x%04x, want 0x%04x", st_f2u(v), (double)v, b, wb);
}

static void test_encode(void)
{
	uint64_t s = 0xe4c0de;

	/* Random bit patterns: every exponent, NaNs, denormals. */
	for (int i = 0; i < 300000; i++)
		check_encode(st_u2f((uint32_t)st_rand(&s)));
	/* Exact ties and their neighbours, for both formats, across the exponent range. */
	for (uint32_t e = 0; e < 255; e++) {
		for (int t = 0; t < 64; t++) {
			uint32_t m = (uint32_t)st_rand(&s) & 0x7fffff;
			uint32_t base = e << 23 | (uint32_t)(t & 1) << 31;

			check_encode(st_u2f(base | (m & ~0xffffu) | 0x8000u)); /* bf16 tie */
			check_encode(st_u2f(base | (m & ~0x1fffu) | 0x1000u)); /* fp16 tie */
			check_encode(st_u2f(base | (m & ~0xffffu) | 0x7fffu)); /* below */
			check_encode(st_u2f(base | (m & ~0x1fffu) | 0x1001u)); /* above */
		}
	}
	check_encode(65520.0f);
	check_encode(nextafterf(65520.0f, 0));
	check_encode(0x1p-25f);
	check_encode(nextafterf(0x1p-25f, 1));
}

/* Independent expected sums of @k inputs of @n elements into @want. */
static void my_sum(enum sg_dtype dt, unsigned int flags, uint8_t *const *in, unsigned int k,
		   size_t n, uint8_t *want)
{
	size_t sz = sg_dtype_size(dt);

	for (size_t i = 0; i < n; i++) {
		if (dt == SG_DTYPE_FP32) {
			float acc, x;

			memcpy(&acc, in[0] + i * 4, 4);
			for (unsigned int j = 1; j < k; j++) {
				memcpy(&x, in[j] + i * 4, 4);
				acc = acc + x;
			}
			memcpy(want + i * 4, &acc, 4);
		} else if (dt == SG_DTYPE_FP64) {
			double acc, x;

			memcpy(&acc, in[0] + i * 8, 8);
			for (unsigned int j = 1; j < k; j++) {
				memcpy(&x, in[j] + i * 8, 8);
				acc = acc + x;
			}
			memcpy(want + i * 8, &acc, 8);
		} else if (dt == SG_DTYPE_FP16 || dt == SG_DTYPE_BF16) {
			const struct fmt *f = fmt_of(dt);
			uint16_t h, out;
			float acc;

			memcpy(&h, in[0] + i * 2, 2);
			acc = (float)my_decode(f, h);
			for (unsigned int j = 1; j < k; j++) {
				memcpy(&h, in[j] + i * 2, 2);
				acc = acc + (float)my_decode(f, h);
				if (flags & SG_SUM_F_NATIVE)
					acc = (float)my_decode(f, my_encode(f, acc));
			}
			out = my_encode(f, acc);
			memcpy(want + i * 2, &out, 2);
		} else {
			/* Two's complement wrap: the low bits of an exact 128-bit sum. */
			unsigned __int128 acc = 0;

			for (unsigned int j = 0; j < k; j++) {
				uint64_t x = 0;

				memcpy(&x, in[j] + i * sz, sz);
				acc += x;
			}
			memcpy(want + i * sz, &acc, sz); /* little-endian: the low bytes */
		}
	}
}

/* Compare @got with @want; 16-bit NaNs by class (my_encode has no payloads). */
static bool agree(const char *what, enum sg_dtype dt, unsigned int flags, const uint8_t *got,
		  const uint8_t *want, size_t n)
{
	size_t sz = sg_dtype_size(dt), bad = SIZE_MAX;
	uint64_t g = 0, w = 0;

	for (size_t i = 0; i < n && bad == SIZE_MAX; i++) {
		memcpy(&g, got + i * sz, sz);
		memcpy(&w, want + i * sz, sz);
		if ((dt == SG_DTYPE_FP16 || dt == SG_DTYPE_BF16) && w == 0x7fff)
			bad = is_nan16(fmt_of(dt), (uint16_t)g) ? bad : i;
		else if (g != w && !(st_is_nan(dt, &g) && st_is_nan(dt, &w)))
			bad = i;
	}
	return SG_CHECK(bad == SIZE_MAX, "%s %s%s n=%zu: element %zu is 0x%llx, want 0x%llx", what,
			sg_dtype_name(dt), flags ? " native" : "", n, bad, (unsigned long long)g,
			(unsigned long long)w);
}

#define N 777
#define K 8

/* Scalar first, then each implementation: addk, and the accumulator calls. */
static void test_sums(void)
{
	static uint8_t bufs[K][N * 8], want[N * 8], got[N * 8 + 1], acc[N * 8];
	uint8_t *in[K];
	const void *cin[K];
	uint64_t s = 0x5eed5;

	for (unsigned int j = 0; j < K; j++)
		in[j] = bufs[j], cin[j] = bufs[j];
	for (enum sg_sum_impl impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT; impl++) {
		if (!sg_sum_impl_supported(impl)) {
			printf("SKIP %s: this CPU or build lacks it\n", sg_sum_impl_name(impl));
			continue;
		}
		SG_CHECK_EQ(sg_sum_set_impl(impl), 0);
		for (enum sg_dtype dt = 0; dt < SG_DTYPE_COUNT; dt++) {
			for (unsigned int flags = 0; flags <= SG_SUM_F_NATIVE; flags++) {
				unsigned int k = 1 + (unsigned int)(st_rand(&s) % K);
				size_t n = N - (size_t)(st_rand(&s) % 64);
				char what[48];

				for (unsigned int j = 0; j < k; j++)
					st_fill(dt, in[j], n, &s);
				my_sum(dt, flags, in, k, n, want);
				snprintf(what, sizeof(what), "%s addk k=%u", sg_sum_impl_name(impl),
					 k);
				SG_CHECK_EQ(sg_sum_addk(dt, got, cin, k, n, flags), 0);
				agree(what, dt, flags, got, want, n);
				/* The same sum one input at a time through the accumulator. */
				snprintf(what, sizeof(what), "%s acc k=%u", sg_sum_impl_name(impl),
					 k);
				SG_CHECK_EQ(sg_sum_acc_init(dt, flags, acc, in[0], n), 0);
				for (unsigned int j = 1; j < k; j++)
					SG_CHECK_EQ(sg_sum_acc_add(dt, flags, acc, in[j], n), 0);
				SG_CHECK_EQ(sg_sum_acc_final(dt, flags, got, acc, n), 0);
				agree(what, dt, flags, got, want, n);
				/* Streaming stores (threshold 1 byte) for addk and copy. */
				sg_sum_set_nt_threshold(1);
				snprintf(what, sizeof(what), "%s addk/nt k=%u",
					 sg_sum_impl_name(impl), k);
				SG_CHECK_EQ(sg_sum_addk(dt, got + 1, cin, k, n, flags),
					    0); /* misaligned */
				agree(what, dt, flags, got + 1, want, n);
				SG_CHECK_EQ(sg_sum_copy(dt, got, in[k - 1], n), 0);
				SG_CHECK(memcmp(got, in[k - 1], n * sg_dtype_size(dt)) == 0,
					 "%s copy/nt", sg_sum_impl_name(impl));
				sg_sum_set_nt_threshold(0);
			}
		}
	}
	sg_sum_set_impl(SG_SUM_IMPL_AUTO);
}

int main(void)
{
	SG_CHECK_EQ(sg_sum_init(), 0);
	test_decode_all();
	test_encode();
	test_sums();
	return sg_test_finish("test_sum_ref");
}
