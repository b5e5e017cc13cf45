/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The checksums of sg_sum.h on every implementation this CPU runs, against a
 * reference written here from RFC 1071: 16-bit words in network byte order,
 * end-around carries, the result byte-swapped to the host's order. First
 * the RFC's own example and the two zeros, then sg_sum_csum() at every
 * offset and length up to 2 KiB, then the fused accumulator calls: every
 * dtype and mode, lengths 0..600 and a jumbo chunk, misaligned buffers, the
 * sum into another buffer and in place. Their data must be the very bytes of
 * the calls without _csum, their checksum the reference's, and nothing past
 * the end may be written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_test.h"
#include "sum_test_util.h"

#define MAXN 2240 /* elements: an 8920-byte fp32 chunk, and some */
#define GUARD 64

/* RFC 1071, section 4.1, in network order, then swapped to the host's. */
static uint16_t ref_csum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t sum = 0;
	uint16_t be;

	for (size_t i = 0; i < len; i += 2) {
		sum += (uint32_t)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
		sum = (sum & 0xffff) + (sum >> 16);
	}
	be = (uint16_t)sum;
	/* the host's order: on a little-endian host the bytes of the sum swap */
	{
		const uint16_t one = 1;
		uint8_t first;

		memcpy(&first, &one, 1);
		return first ? (uint16_t)(be >> 8 | be << 8) : be;
	}
}

static uint8_t src_buf[MAXN * 8 + 16], acc_buf[MAXN * 8 + 16];
static uint8_t out_a[MAXN * 8 + GUARD + 16], out_b[MAXN * 8 + GUARD + 16];

static void test_known(void)
{
	/* RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 in network order */
	static const uint8_t ex[8] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
	uint8_t z[40] = {0}, ones[4] = {0xff, 0xff, 0xff, 0xff};
	uint16_t want = ref_csum(ex, 8);

	SG_CHECK(want == 0xddf2 || want == 0xf2dd, "the reference: 0x%x", want);
	SG_CHECK_EQ(sg_sum_csum(ex, 8), want);
	SG_CHECK_EQ(sg_sum_csum(NULL, 0), 0);
	SG_CHECK_EQ(sg_sum_csum(z, sizeof(z)), 0);     /* all zero: 0 */
	SG_CHECK_EQ(sg_sum_csum(ones, sizeof(ones)), 0xffff); /* zero in ones' complement */
	/* an odd last byte is the high-address byte of a word padded with zero */
	SG_CHECK_EQ(sg_sum_csum(ex, 7), ref_csum(ex, 7));
	/* pieces starting at even offsets combine */
	SG_CHECK_EQ(sg_sum_csum_add(sg_sum_csum(ex, 2), sg_sum_csum(ex + 2, 6)), want);
	SG_CHECK_EQ(sg_sum_csum_add(0xffff, 0), 0xffff);
	SG_CHECK_EQ(sg_sum_csum_add(0, 0), 0);
	SG_CHECK_EQ(sg_sum_csum_add(0x8000, 0x7fff), 0xffff);
}

static void test_plain(enum sg_sum_impl impl, uint64_t *seed)
{
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len <= 2048; len += 1 + (len > 300) * (len % 7)) {
			uint16_t got, want;

			st_fill(SG_DTYPE_UINT8, src_buf + off, len, seed);
			got = sg_sum_csum(src_buf + off, len);
			want = ref_csum(src_buf + off, len);
			if (!SG_CHECK(got == want, "%s: %zu bytes at +%zu: 0x%04x, want 0x%04x",
				      sg_sum_impl_name(impl), len, off, got, want))
				return;
		}
}

/* @p buf has @p len bytes of data then GUARD bytes of @p g. */
static bool guards_ok(const uint8_t *buf, size_t len, uint8_t g)
{
	for (size_t i = 0; i < GUARD; i++)
		if (buf[len + i] != g)
			return false;
	return true;
}

/*
 * Same values, bit for bit, except that a NaN matches any NaN: the fused and
 * the plain kernels are different code, and a compiler may commute an
 * addition of two NaNs (see test_sum_kernels.c).
 */
static bool same(enum sg_dtype dt, size_t esz, const void *x, const void *y, size_t n)
{
	return st_first_diff(esz == 4 && sg_dtype_size(dt) == 2 ? SG_DTYPE_FP32 : dt, esz, x, y,
			     n) == SIZE_MAX;
}

static void one_fused(enum sg_sum_impl impl, enum sg_dtype dt, unsigned int flags, size_t n,
		      unsigned int mis, uint64_t *seed)
{
	size_t esz = sg_dtype_size(dt), asz = sg_sum_acc_elem_size(dt, flags);
	uint8_t *src = src_buf + mis, *acc = acc_buf + (mis * 3) % 8;
	uint8_t *a = out_a + (mis ^ 5) % 8, *b = out_b + (mis ^ 5) % 8;
	const char *name = sg_sum_impl_name(impl);
	uint16_t c, want;

	st_fill(dt, src, n, seed);
	want = ref_csum(src, n * esz);

	/* init: a = widen(src) */
	memset(out_a, 0xa5, sizeof(out_a));
	memset(out_b, 0xa5, sizeof(out_b));
	sg_sum_acc_init_unchecked(dt, flags, a, src, n);
	c = sg_sum_acc_init_csum_unchecked(dt, flags, b, src, n);
	SG_CHECK(c == want, "%s %s/%u n=%zu init: checksum 0x%x, want 0x%x", name,
		 sg_dtype_name(dt), flags, n, c, want);
	SG_CHECK(same(dt, asz, a, b, n) && guards_ok(b, n * asz, 0xa5),
		 "%s %s/%u n=%zu init: the accumulator differs or was overrun", name,
		 sg_dtype_name(dt), flags, n);

	/* add into another buffer: b = acc + src, acc untouched */
	sg_sum_acc_init_unchecked(dt, flags, acc, src_buf + 8 - mis % 8, n);
	memcpy(a, acc, n * asz);
	sg_sum_acc_add_unchecked(dt, flags, a, src, n);
	memset(out_b, 0x5a, sizeof(out_b));
	c = sg_sum_acc_add_csum_unchecked(dt, flags, b, acc, src, n);
	SG_CHECK(c == want, "%s %s/%u n=%zu add: checksum 0x%x, want 0x%x", name,
		 sg_dtype_name(dt), flags, n, c, want);
	SG_CHECK(same(dt, asz, a, b, n) && guards_ok(b, n * asz, 0x5a),
		 "%s %s/%u n=%zu add: the sum differs or was overrun", name, sg_dtype_name(dt),
		 flags, n);

	/* add in place: acc += src */
	c = sg_sum_acc_add_csum_unchecked(dt, flags, acc, acc, src, n);
	SG_CHECK(c == want && same(dt, asz, a, acc, n),
		 "%s %s/%u n=%zu add in place: checksum 0x%x (want 0x%x) or sum differs", name,
		 sg_dtype_name(dt), flags, n, c, want);

	/* final: the result's bytes and their checksum */
	memset(out_a, 0xa5, sizeof(out_a));
	memset(out_b, 0xa5, sizeof(out_b));
	sg_sum_acc_final_unchecked(dt, flags, a, acc, n);
	c = sg_sum_acc_final_csum_unchecked(dt, flags, b, acc, n);
	want = ref_csum(a, n * esz);
	SG_CHECK(c == want, "%s %s/%u n=%zu final: checksum 0x%x, want 0x%x", name,
		 sg_dtype_name(dt), flags, n, c, want);
	SG_CHECK(same(dt, esz, a, b, n) && guards_ok(b, n * esz, 0xa5),
		 "%s %s/%u n=%zu final: the result differs or was overrun", name,
		 sg_dtype_name(dt), flags, n);
}

int main(void)
{
	uint64_t seed = 0xc5c5c5c5ull;
	unsigned int impls = 0;

	test_known();
	for (int impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT; impl++) {
		if (!st_use_impl(impl))
			continue;
		impls++;
		test_known();
		test_plain(impl, &seed);
		for (int dt = 0; dt < SG_DTYPE_COUNT; dt++)
			for (unsigned int flags = 0; flags <= SG_SUM_F_NATIVE; flags++) {
				for (size_t n = 0; n <= 600; n += 1 + n / 100)
					one_fused(impl, dt, flags, n, (unsigned int)n % 8, &seed);
				one_fused(impl, dt, flags, 8920 / sg_dtype_size(dt), 3, &seed);
				one_fused(impl, dt, flags, MAXN, 6, &seed);
			}
	}
	SG_CHECK(impls >= 1, "no implementation ran");
	return sg_test_finish("sum_csum");
}
