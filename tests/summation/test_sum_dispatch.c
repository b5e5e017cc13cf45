/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Choice of implementation: SIGMA_SUM_IMPL (meson runs this program once per
 * value, see meson.build) and sg_sum_set_impl(). A forced implementation must
 * be the one that runs: its sums are compared with the scalar table, and the
 * implementation reported must be the one asked for. An implementation this
 * CPU lacks must be refused (-ENOTSUP), never silently replaced.
 */
#include <errno.h>
#include <stdlib.h>

#include "sg_sum_internal.h"
#include "sg_test.h"
#include "sum_test_util.h"

#define N 300

/* A few sums through the public API against the scalar kernels called directly. */
static void check_sums(const char *who)
{
	static uint8_t a[N * 8], b[N * 8], c[N * 8], got[N * 8], want[N * 8];
	const void *in[3] = {a, b, c};
	uint64_t s = 77;

	for (enum sg_dtype dt = 0; dt < SG_DTYPE_COUNT; dt++) {
		st_fill(dt, a, N, &s);
		st_fill(dt, b, N, &s);
		st_fill(dt, c, N, &s);
		sg_sum_kernels_scalar.addk(dt, want, in, 3, N, 0, false);
		SG_CHECK_EQ(sg_sum_addk(dt, got, in, 3, N, 0), 0);
		SG_CHECK(st_first_diff(dt, sg_dtype_size(dt), got, want, N) == SIZE_MAX,
			 "%s: %s sum differs from scalar", who, sg_dtype_name(dt));
	}
}

static void test_env(void)
{
	const char *env = getenv("SIGMA_SUM_IMPL");
	enum sg_sum_impl want;
	int rc = sg_sum_init();

	if (env == NULL || *env == '\0') {
		SG_CHECK_EQ(rc, 0);
		want = sg_sum_impl_supported(SG_SUM_IMPL_AVX512) ? SG_SUM_IMPL_AVX512
		       : sg_sum_impl_supported(SG_SUM_IMPL_AVX2) ? SG_SUM_IMPL_AVX2
								 : SG_SUM_IMPL_SCALAR;
		SG_CHECK_EQ(sg_sum_get_impl(), want); /* the best one */
		check_sums("auto");
		return;
	}
	if (sg_sum_impl_from_name(env, &want) != 0) {
		/* A typo must be an error, not a silent fallback; sums then fail cleanly. */
		uint8_t x[4] = {0}, y[4] = {0};

		SG_CHECK_EQ(rc, -EINVAL);
		SG_CHECK(sg_sum_add(SG_DTYPE_UINT8, x, y, 4) != 0, "sum ran with SIGMA_SUM_IMPL=%s",
			 env);
		SG_CHECK_EQ(sg_sum_set_impl(SG_SUM_IMPL_SCALAR), 0); /* the API still overrides */
		check_sums("scalar after a bad SIGMA_SUM_IMPL");
		return;
	}
	if (want != SG_SUM_IMPL_AUTO && !sg_sum_impl_supported(want)) {
		SG_CHECK_EQ(rc, -ENOTSUP);
		if (sg_test_failures == 0)
			SG_TEST_SKIP_ALL("SIGMA_SUM_IMPL=%s: this CPU or build lacks it (refused "
					 "with -ENOTSUP as it should be)",
					 env);
		return;
	}
	SG_CHECK_EQ(rc, 0);
	if (want != SG_SUM_IMPL_AUTO)
		SG_CHECK_EQ(sg_sum_get_impl(), want);
	check_sums(env);
}

static void test_set_impl(void)
{
	for (enum sg_sum_impl impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT; impl++) {
		int rc = sg_sum_set_impl(impl);

		if (!sg_sum_impl_supported(impl)) {
			printf("SKIP path %s: this CPU or build lacks it\n",
			       sg_sum_impl_name(impl));
			SG_CHECK_EQ(rc, -ENOTSUP);
			continue;
		}
		SG_CHECK_EQ(rc, 0);
		SG_CHECK_EQ(sg_sum_get_impl(), impl);
		check_sums(sg_sum_impl_name(impl));
	}
	SG_CHECK_EQ(sg_sum_set_impl(SG_SUM_IMPL_COUNT), -EINVAL);
	SG_CHECK_EQ(sg_sum_set_impl(SG_SUM_IMPL_AUTO), 0);
	SG_CHECK(sg_sum_get_impl() != SG_SUM_IMPL_AUTO, "auto resolves to a real implementation");
}

int main(void)
{
	test_env();
	test_set_impl();
	return sg_test_finish("test_sum_dispatch");
}
