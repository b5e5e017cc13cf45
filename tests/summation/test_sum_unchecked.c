/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The unchecked accumulator calls (sg_sum_acc_*_unchecked) against the
 * checked ones: for every implementation this CPU has, every dtype, both
 * accumulation modes, lengths 0..300 (then a few long ones), misaligned
 * pointers and forced streaming stores, the accumulator and the final result
 * must be the same bytes, and nothing past n elements may be written.
 * (The checked calls are compared with an independent reference in sum_ref.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_test.h"
#include "sum_test_util.h"

#define MAXN 4100
#define GUARD 64
#define K 3 /* inputs folded per case: init, add, add */

static uint8_t in[K][MAXN * 8 + 8];
static uint8_t acc_c[MAXN * 8 + GUARD + 8], acc_u[MAXN * 8 + GUARD + 8];
static uint8_t out_c[MAXN * 8 + GUARD + 8], out_u[MAXN * 8 + GUARD + 8];

static void one_case(enum sg_sum_impl impl, enum sg_dtype dt, unsigned int flags, size_t n,
		     unsigned int mis, uint64_t *seed)
{
	size_t esz = sg_dtype_size(dt), asz = sg_sum_acc_elem_size(dt, flags);
	const void *src[K];
	uint8_t *ac = acc_c + mis, *au = acc_u + mis, *oc = out_c + (mis ^ 1), *ou = out_u + (mis ^ 1);
	size_t bad;

	for (int k = 0; k < K; k++) {
		src[k] = in[k] + (mis + (unsigned int)k) % 8;
		st_fill(dt, (void *)src[k], n, seed);
	}
	memset(acc_c, 0xa5, sizeof(acc_c));
	memset(acc_u, 0xa5, sizeof(acc_u));
	memset(out_c, 0x5a, sizeof(out_c));
	memset(out_u, 0x5a, sizeof(out_u));

	SG_CHECK_EQ(sg_sum_acc_init(dt, flags, ac, src[0], n), 0);
	sg_sum_acc_init_unchecked(dt, flags, au, src[0], n);
	for (int k = 1; k < K; k++) {
		SG_CHECK_EQ(sg_sum_acc_add(dt, flags, ac, src[k], n), 0);
		sg_sum_acc_add_unchecked(dt, flags, au, src[k], n);
	}
	SG_CHECK_EQ(sg_sum_acc_final(dt, flags, oc, ac, n), 0);
	sg_sum_acc_final_unchecked(dt, flags, ou, au, n);

	/* Same kernels in the same order: the very same bytes, NaN payloads included. */
	bad = st_first_diff(SG_DTYPE_UINT8, 1, au, ac, n * asz); /* first differing byte */
	SG_CHECK(memcmp(ac, au, n * asz) == 0,
		 "%s %s flags %u n %zu mis %u: accumulators differ (first at byte %zu)",
		 sg_sum_impl_name(impl), sg_dtype_name(dt), flags, n, mis, bad);
	SG_CHECK(memcmp(oc, ou, n * esz) == 0, "%s %s flags %u n %zu mis %u: results differ",
		 sg_sum_impl_name(impl), sg_dtype_name(dt), flags, n, mis);
	for (size_t i = 0; i < GUARD; i++) {
		if (au[n * asz + i] != 0xa5 || ou[n * esz + i] != 0x5a) {
			SG_CHECK(0, "%s %s flags %u n %zu: wrote past the end (byte %zu)",
				 sg_sum_impl_name(impl), sg_dtype_name(dt), flags, n, i);
			break;
		}
	}
}

int main(void)
{
	static const size_t longs[] = {511, 1024, 2047, 4096, MAXN};
	uint64_t seed = 0x5eed1234abcdull;
	unsigned int impls = 0;

	for (int impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT; impl++) {
		if (!st_use_impl(impl))
			continue;
		impls++;
		for (int dt = 0; dt < SG_DTYPE_COUNT; dt++) {
			for (unsigned int flags = 0; flags <= SG_SUM_F_NATIVE; flags++) {
				for (size_t n = 0; n <= 300; n++)
					one_case(impl, dt, flags, n, (unsigned int)n % 8, &seed);
				for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++)
					one_case(impl, dt, flags, longs[i], (unsigned int)i, &seed);
				/* streaming stores above 256 bytes: the non-temporal branches */
				sg_sum_set_nt_threshold(256);
				for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++)
					one_case(impl, dt, flags, longs[i], (unsigned int)i + 3,
						 &seed);
				sg_sum_set_nt_threshold(0);
			}
		}
	}
	SG_CHECK(impls >= 1, "no implementation ran");
	return sg_test_finish("sum_unchecked");
}
