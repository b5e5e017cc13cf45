/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The strict number parsers of sg_parse.h against hand-written expectations:
 * what each accepts and its value, and for each refusal which error, with the
 * output left alone.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "sg_parse.h"
#include "sg_test.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct u_case {
	const char *s;
	int rc;
	uint64_t v; /* the value when rc is 0 */
};

static void check_u(const char *fn, int (*parse)(const char *, uint64_t, uint64_t, uint64_t *),
		    const struct u_case *c, size_t n, uint64_t min, uint64_t max)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 12345;
		int rc = parse(c[i].s, min, max, &v);

		SG_CHECK(rc == c[i].rc, "%s(\"%s\") = %d, expected %d", fn, c[i].s, rc, c[i].rc);
		SG_CHECK(v == (c[i].rc == 0 ? c[i].v : 12345), "%s(\"%s\") gave %" PRIu64, fn,
			 c[i].s, v);
	}
}

static void test_u64(void)
{
	static const struct u_case any[] = {
		{"0", 0, 0},
		{"1", 0, 1},
		{"4096", 0, 4096},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -ERANGE, 0},	/* 2^64 */
		{"99999999999999999999999", -ERANGE, 0},
		{"99999999999999999999999x", -EINVAL, 0}, /* not a number, however long */
		{"", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{"-0", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 ", -EINVAL, 0},
		{"1\n", -EINVAL, 0},
		{"1x", -EINVAL, 0},
		{"1.0", -EINVAL, 0},
		{"1e3", -EINVAL, 0},
		{"010", -EINVAL, 0}, /* strtoul(, 0) reads 8, strtoul(, 10) 10: neither */
		{"00", -EINVAL, 0},
		{"0x10", -EINVAL, 0}, /* decimal only */
		{"x", -EINVAL, 0},
	};
	static const struct u_case ranged[] = {
		{"9", -ERANGE, 0}, {"10", 0, 10}, {"64", 0, 64}, {"65", -ERANGE, 0},
		{"0", -ERANGE, 0}, {"65x", -EINVAL, 0},
	};
	static const struct u_case hex[] = {
		{"0x10", 0, 16},
		{"0X10", 0, 16},
		{"0xfF", 0, 255},
		{"0x0010", 0, 16},
		{"16", 0, 16},
		{"0xffffffffffffffff", 0, UINT64_MAX},
		{"0x10000000000000000", -ERANGE, 0},
		{"0x", -EINVAL, 0},
		{"0xg", -EINVAL, 0},
		{"0x-1", -EINVAL, 0},
		{"0x 1", -EINVAL, 0},
		{"x10", -EINVAL, 0},
		{"ff", -EINVAL, 0},
		{"010", -EINVAL, 0},
		{"-0x1", -EINVAL, 0},
	};
	static const struct u_case hex_ranged[] = {
		{"0xff", 0, 255}, {"0x100", -ERANGE, 0}, {"256", -ERANGE, 0},
	};
	uint64_t v = 3;

	check_u("sg_parse_u64", sg_parse_u64, any, N(any), 0, UINT64_MAX);
	check_u("sg_parse_u64 [10, 64]", sg_parse_u64, ranged, N(ranged), 10, 64);
	check_u("sg_parse_u64x", sg_parse_u64x, hex, N(hex), 0, UINT64_MAX);
	check_u("sg_parse_u64x [0, 255]", sg_parse_u64x, hex_ranged, N(hex_ranged), 0, 255);
	SG_CHECK_EQ(sg_parse_u64(NULL, 0, 1, &v), -EINVAL);
	SG_CHECK_EQ(sg_parse_u64("1", 0, 1, NULL), -EINVAL);
	SG_CHECK_EQ(sg_parse_u64x(NULL, 0, 1, &v), -EINVAL);
	SG_CHECK_EQ(v, 3);
}

static void test_i64(void)
{
	static const struct {
		const char *s;
		int rc;
		int64_t v;
	} c[] = {
		{"0", 0, 0},
		{"-0", 0, 0},
		{"7", 0, 7},
		{"-7", 0, -7},
		{"9223372036854775807", 0, INT64_MAX},
		{"9223372036854775808", -ERANGE, 0},
		{"-9223372036854775808", 0, INT64_MIN},
		{"-9223372036854775809", -ERANGE, 0},
		{"-18446744073709551616", -ERANGE, 0},
		{"", -EINVAL, 0},
		{"-", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{"--1", -EINVAL, 0},
		{" -1", -EINVAL, 0},
		{"- 1", -EINVAL, 0},
		{"-1x", -EINVAL, 0},
		{"-01", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
	};
	int64_t v;

	for (size_t i = 0; i < N(c); i++) {
		v = 12345;
		int rc = sg_parse_i64(c[i].s, INT64_MIN, INT64_MAX, &v);

		SG_CHECK(rc == c[i].rc, "sg_parse_i64(\"%s\") = %d, expected %d", c[i].s, rc,
			 c[i].rc);
		SG_CHECK(v == (c[i].rc == 0 ? c[i].v : 12345), "sg_parse_i64(\"%s\") gave %" PRId64,
			 c[i].s, v);
	}
	v = 5;
	SG_CHECK_EQ(sg_parse_i64("-3", -2, 2, &v), -ERANGE);
	SG_CHECK_EQ(sg_parse_i64("3", -2, 2, &v), -ERANGE);
	SG_CHECK_EQ(v, 5);
	SG_CHECK(sg_parse_i64("-2", -2, 2, &v) == 0 && v == -2, "-2 in [-2, 2]");
	SG_CHECK(sg_parse_i64("2", -2, 2, &v) == 0 && v == 2, "2 in [-2, 2]");
	SG_CHECK_EQ(sg_parse_i64(NULL, -2, 2, &v), -EINVAL);
	SG_CHECK_EQ(sg_parse_i64("1", -2, 2, NULL), -EINVAL);
}

static void test_double(void)
{
	static const struct {
		const char *s;
		int rc;
		double v;
	} c[] = {
		{"0", 0, 0.0},
		{"1.5", 0, 1.5},
		{".5", 0, 0.5},
		{"5.", 0, 5.0},
		{"-4", 0, -4.0},
		{"-.25", 0, -0.25},
		{"2e-3", 0, 0.002},
		{"2E3", 0, 2000.0},
		{"1e+2", 0, 100.0},
		{"007.5", 0, 7.5},
		{"0.1", 0, 0.1},
		{"1e308", 0, 1e308},
		{"1e999", -ERANGE, 0},
		{"-1e999", -ERANGE, 0},
		{"1e-999", -ERANGE, 0},
		{"", -EINVAL, 0},
		{".", -EINVAL, 0},
		{"-", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 ", -EINVAL, 0},
		{"1x", -EINVAL, 0},
		{"1e", -EINVAL, 0},
		{"1-2", -EINVAL, 0},
		{"1..2", -EINVAL, 0},
		{"--1", -EINVAL, 0},
		{"nan", -EINVAL, 0},
		{"NAN", -EINVAL, 0},
		{"inf", -EINVAL, 0},
		{"-inf", -EINVAL, 0},
		{"infinity", -EINVAL, 0},
		{"0x1p3", -EINVAL, 0},
		{"e5", -EINVAL, 0},
	};
	double v;

	for (size_t i = 0; i < N(c); i++) {
		v = 12345;
		int rc = sg_parse_double(c[i].s, -DBL_MAX, DBL_MAX, &v);

		SG_CHECK(rc == c[i].rc, "sg_parse_double(\"%s\") = %d, expected %d", c[i].s, rc,
			 c[i].rc);
		SG_CHECK(v == (c[i].rc == 0 ? c[i].v : 12345), "sg_parse_double(\"%s\") gave %g",
			 c[i].s, v);
	}
	v = 9;
	SG_CHECK_EQ(sg_parse_double("-0.001", 0, 1, &v), -ERANGE);
	SG_CHECK_EQ(sg_parse_double("1.001", 0, 1, &v), -ERANGE);
	SG_CHECK_EQ(v, 9);
	SG_CHECK(sg_parse_double("0", 0, 1, &v) == 0 && v == 0, "0 in [0, 1]");
	SG_CHECK(sg_parse_double("1", 0, 1, &v) == 0 && v == 1, "1 in [0, 1]");
	SG_CHECK_EQ(sg_parse_double(NULL, 0, 1, &v), -EINVAL);
	SG_CHECK_EQ(sg_parse_double("1", 0, 1, NULL), -EINVAL);
}

/* The one table of log level names: every name both ways, garbage refused. */
static void test_log_levels(void)
{
	static const char *const bad[] = {"", "DEBUG", "debug ", "warn", "9", "info\n"};

	SG_CHECK_EQ(sg_log_level_parse("emerg"), 1);
	SG_CHECK_EQ(sg_log_level_parse("warning"), 5);
	SG_CHECK_EQ(sg_log_level_parse("debug"), 8);
	for (unsigned int l = SG_LOG_LEVEL_EMERG; l <= SG_LOG_LEVEL_DEBUG; l++)
		SG_CHECK_EQ(sg_log_level_parse(sg_log_level_name(l)), (int)l);
	SG_CHECK(sg_log_level_name(0) == NULL && sg_log_level_name(SG_LOG_LEVEL_DEBUG + 1) ==
		 NULL, "names outside the levels");
	SG_CHECK_EQ(sg_log_level_parse(NULL), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		SG_CHECK(sg_log_level_parse(bad[i]) == -EINVAL, "\"%s\" accepted", bad[i]);
}

int main(void)
{
	test_u64();
	test_log_levels();
	test_i64();
	test_double();
	return sg_test_finish("parse");
}
