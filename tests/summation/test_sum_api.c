/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * API contract of summation/: argument errors, names, conversions on values
 * worked out by hand, and the buffer pool.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <sys/mman.h>
#include <sys/wait.h>

#include "sg_sum.h"
#include "sg_test.h"

static void test_errors(void)
{
	float a[8] = {0}, b[8] = {0};
	const void *in[2] = {a, b};

	SG_CHECK_EQ(sg_sum_add((enum sg_dtype)99, a, b, 8), -EINVAL);
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_FP32, a, (char *)a + 4, 4), -EINVAL); /* partial overlap */
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_FP32, a, a, 8), 0);                  /* exact alias */
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_FP32, a, b, SIZE_MAX / 2), -EINVAL); /* length overflow */
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_FP32, NULL, b, 1), -EINVAL);
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_FP32, NULL, NULL, 0), 0);
	SG_CHECK_EQ(sg_sum_addk(SG_DTYPE_FP32, a, in, 0, 8, 0), -EINVAL);
	SG_CHECK_EQ(sg_sum_addk(SG_DTYPE_FP32, a, in, SG_SUM_MAX_K + 1, 8, 0), -EINVAL);
	SG_CHECK_EQ(sg_sum_addk(SG_DTYPE_FP32, a, in, 2, 8, 0x80), -EINVAL);
	SG_CHECK_EQ(sg_sum_copy(SG_DTYPE_FP32, a, (char *)a + 4, 4), -EINVAL);
	/* fp32 accumulator of 8 bf16 elements is 32 bytes: src inside it overlaps. */
	SG_CHECK_EQ(sg_sum_acc_init(SG_DTYPE_BF16, 0, a, (char *)a + 8, 8), -EINVAL);
	SG_CHECK_EQ(sg_sum_set_impl((enum sg_sum_impl)42), -EINVAL);
}

static void test_names(void)
{
	enum sg_dtype dt;
	enum sg_sum_impl impl;

	SG_CHECK_EQ(sg_dtype_from_name("bf16", &dt), 0);
	SG_CHECK_EQ(dt, SG_DTYPE_BF16);
	SG_CHECK_EQ(sg_dtype_from_name("float", &dt), -EINVAL);
	SG_CHECK_EQ(sg_dtype_size(SG_DTYPE_INT64), 8);
	SG_CHECK_EQ(sg_dtype_size((enum sg_dtype)SG_DTYPE_COUNT), 0);
	SG_CHECK(strcmp(sg_dtype_name(SG_DTYPE_UINT8), "uint8") == 0, "name");
	SG_CHECK_EQ(sg_sum_impl_from_name("AVX2", &impl), 0);
	SG_CHECK_EQ(impl, SG_SUM_IMPL_AVX2);
	SG_CHECK_EQ(sg_sum_impl_from_name("sse", &impl), -EINVAL);
	SG_CHECK_EQ(sg_sum_acc_elem_size(SG_DTYPE_FP16, 0), 4);
	SG_CHECK_EQ(sg_sum_acc_elem_size(SG_DTYPE_FP16, SG_SUM_F_NATIVE), 2);
}

static void test_conversions(void)
{
	/* Values worked out from the IEEE 754 binary16 / bfloat16 layouts. */
	SG_CHECK_EQ(sg_fp32_to_fp16(1.0f), 0x3c00);
	SG_CHECK_EQ(sg_fp32_to_fp16(-2.0f), 0xc000);
	SG_CHECK_EQ(sg_fp32_to_fp16(65504.0f), 0x7bff);
	SG_CHECK_EQ(sg_fp32_to_fp16(65519.0f), 0x7bff);
	SG_CHECK_EQ(sg_fp32_to_fp16(65520.0f), 0x7c00);     /* halfway to Inf: rounds up */
	SG_CHECK_EQ(sg_fp32_to_fp16(0x1p-24f), 0x0001);     /* smallest subnormal */
	SG_CHECK_EQ(sg_fp32_to_fp16(0x1p-25f), 0x0000);     /* halfway, ties to even (0) */
	SG_CHECK_EQ(sg_fp32_to_fp16(0x1.8p-24f), 0x0002);   /* 1.5 ulp: ties to even (2) */
	SG_CHECK_EQ(sg_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00); /* tie, even stays */
	SG_CHECK_EQ(sg_fp32_to_fp16(1.0f + 0x1.8p-10f), 0x3c02);
	SG_CHECK_EQ(sg_fp32_to_fp16(INFINITY), 0x7c00);
	SG_CHECK((sg_fp32_to_fp16(NAN) & 0x7e00) == 0x7e00, "NaN stays NaN");
	SG_CHECK(sg_fp16_to_fp32(0x0001) == 0x1p-24f, "subnormal");
	SG_CHECK(sg_fp16_to_fp32(0x7bff) == 65504.0f, "max");
	SG_CHECK(isinf(sg_fp16_to_fp32(0xfc00)) && sg_fp16_to_fp32(0xfc00) < 0, "-Inf");
	SG_CHECK(isnan(sg_fp16_to_fp32(0x7e01)), "NaN");

	SG_CHECK_EQ(sg_fp32_to_bf16(1.0f), 0x3f80);
	SG_CHECK_EQ(sg_fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie to even */
	SG_CHECK_EQ(sg_fp32_to_bf16(1.0f + 0x1.8p-7f), 0x3f82);   /* tie, odd rounds up */
	SG_CHECK_EQ(sg_fp32_to_bf16(1.0f + 0x1.2p-8f), 0x3f81);   /* above the tie */
	SG_CHECK_EQ(sg_fp32_to_bf16(0x1.fffffep127f), 0x7f80);    /* overflows to Inf */
	SG_CHECK(isnan(sg_bf16_to_fp32(sg_fp32_to_bf16(NAN))), "bf16 NaN");
	SG_CHECK(sg_bf16_to_fp32(0xc040) == -3.0f, "bf16 -3");
}

static void test_small_sums(void)
{
	int8_t i8a[3] = {127, -128, 5}, i8b[3] = {1, -1, -10}, i8o[3];
	uint8_t u8a[2] = {250, 1}, u8b[2] = {10, 2};
	int64_t i64a[1] = {INT64_MAX}, i64b[1] = {1};
	uint16_t h[3] = {0x3c00, 0x3c00, 0x3c00}, ho[1];
	const void *hk[3] = {&h[0], &h[1], &h[2]};

	SG_CHECK_EQ(sg_sum_add2(SG_DTYPE_INT8, i8o, i8a, i8b, 3, 0), 0);
	SG_CHECK(i8o[0] == -128 && i8o[1] == 127 && i8o[2] == -5, "int8 wraps: %d %d %d",
		 i8o[0], i8o[1], i8o[2]);
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_UINT8, u8a, u8b, 2), 0);
	SG_CHECK(u8a[0] == 4 && u8a[1] == 3, "uint8 wraps: %u %u", u8a[0], u8a[1]);
	SG_CHECK_EQ(sg_sum_add(SG_DTYPE_INT64, i64a, i64b, 1), 0);
	SG_CHECK(i64a[0] == INT64_MIN, "int64 wraps");
	SG_CHECK_EQ(sg_sum_addk(SG_DTYPE_FP16, ho, hk, 3, 1, 0), 0);
	SG_CHECK_EQ(ho[0], 0x4200); /* 3.0 */
}

static void test_pool(void)
{
	struct sg_sum_pool *p = sg_sum_pool_create(-1, 100, 3);
	void *a, *b, *c;
	int x;

	SG_CHECK(p != NULL, "pool create");
	if (p == NULL)
		return;
	a = sg_sum_pool_get(p);
	b = sg_sum_pool_get(p);
	c = sg_sum_pool_get(p);
	SG_CHECK(a && b && c && a != b && b != c, "three distinct buffers");
	SG_CHECK(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0, "64-byte aligned");
	SG_CHECK(sg_sum_pool_get(p) == NULL, "exhausted pool gives NULL");
	SG_CHECK_EQ(sg_sum_pool_avail(p), 0);
	SG_CHECK_EQ(sg_sum_pool_put(p, b), 0);
	SG_CHECK_EQ(sg_sum_pool_put(p, b), -EINVAL); /* double put */
	SG_CHECK_EQ(sg_sum_pool_put(p, &x), -EINVAL); /* foreign */
	SG_CHECK_EQ(sg_sum_pool_put(p, (char *)a + 1), -EINVAL);
	SG_CHECK_EQ(sg_sum_pool_avail(p), 1);
	SG_CHECK(sg_sum_pool_get(p) == b, "reuse");
	sg_sum_pool_destroy(p);
	SG_CHECK(sg_sum_pool_create(0, 0, 3) == NULL && errno == EINVAL, "zero size rejected");
	SG_CHECK(sg_sum_numa_alloc(64, 4096) == NULL && errno == EINVAL, "bad node rejected");
}

/*
 * sg_sum_populate() writes every page without changing a byte; a pool's pages are
 * all resident once made, and a child process does not inherit them (a fork made
 * the node threads' first writes page copies in sigma-bench: docs/performance.md).
 */
static void test_populate(void)
{
	size_t len = 64 * 4096 + 100;
	uint8_t *m = mmap(NULL, len + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	uint8_t *p = m + 50; /* not page-aligned: only the range's own bytes are written */
	struct sg_sum_pool *pool;
	bool same = true;
	long pages;
	void *buf;
	pid_t pid;
	int st;

	if (!SG_CHECK(m != MAP_FAILED, "mmap"))
		return;
	for (size_t i = 0; i < 3 * 4096; i++) /* only the first 3 pages, so the rest are not */
		p[i] = (uint8_t)(i * 7);
	SG_CHECK(sg_test_resident(p, len, &pages) < 10, "the test cannot tell: resident before");
	SG_CHECK_EQ(sg_sum_populate(p, len), len);
	SG_CHECK_EQ(sg_test_resident(p, len, &pages), pages);
	for (size_t i = 0; i < len && same; i++)
		same = p[i] == (i < 3 * 4096 ? (uint8_t)(i * 7) : 0);
	SG_CHECK(same, "populate changed a byte");
	SG_CHECK(m[0] == 0 && m[49] == 0, "bytes before the range");
	munmap(m, len + 4096);
	/* unmapped meanwhile (a memif peer that left): nothing written, no fault */
	SG_CHECK_EQ(sg_sum_populate(p, len), 0);

	pool = sg_sum_pool_create(-1, 9000, 256);
	if (!SG_CHECK(pool != NULL, "pool create"))
		return;
	buf = sg_sum_pool_get(pool);
	/* the pool hands out low addresses first: @p buf and the 255 buffers after it */
	SG_CHECK_EQ(sg_test_resident(buf, 9000 * 255, &pages), pages);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		/* not mapped in the child */
		_exit(sg_test_resident(buf, 4096, &pages) == -1 ? 0 : 1);
	SG_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		 WEXITSTATUS(st) == 0, "a child inherited the pool's memory");
	sg_sum_pool_destroy(pool);
}

int main(void)
{
	SG_CHECK_EQ(sg_sum_init(), 0);
	test_populate();
	test_errors();
	test_names();
	test_conversions();
	test_small_sums();
	test_pool();
	return sg_test_finish("test_sum_api");
}
