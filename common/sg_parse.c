/* SPDX-License-Identifier: BSD-3-Clause */
/* The strict parsers of numbers and addresses (sg_parse.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sg_parse.h"

int sg_ipv4_parse(const char *s, uint32_t *addr_be)
{
	struct in_addr a;

	if (s == NULL || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	if (addr_be != NULL)
		*addr_be = a.s_addr;
	return 0;
}

/*
 * The digits of @p s in @p base (10 or 16) into *v. A decimal number has no
 * leading zero. Scans to the end even past an overflow, so that "1...9x"
 * is -EINVAL (not a number) rather than -ERANGE.
 */
static int parse_digits(const char *s, unsigned int base, uint64_t *v)
{
	bool over = false;
	uint64_t x = 0;

	if (*s == '\0' || (base == 10 && s[0] == '0' && s[1] != '\0'))
		return -EINVAL;
	for (; *s != '\0'; s++) {
		unsigned int d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned int)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned int)(*s - 'a') + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned int)(*s - 'A') + 10;
		else
			return -EINVAL;
		if (x > (UINT64_MAX - d) / base)
			over = true;
		x = x * base + d;
	}
	if (over)
		return -ERANGE;
	*v = x;
	return 0;
}

static int parse_u64(const char *s, bool hex, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	int rc;

	if (s == NULL || out == NULL)
		return -EINVAL;
	if (hex && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		rc = parse_digits(s + 2, 16, &v);
	else
		rc = parse_digits(s, 10, &v);
	if (rc != 0)
		return rc;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int sg_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	return parse_u64(s, false, min, max, out);
}

int sg_parse_u64x(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	return parse_u64(s, true, min, max, out);
}

int sg_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg;
	uint64_t m;
	int64_t v;
	int rc;

	if (s == NULL || out == NULL)
		return -EINVAL;
	neg = s[0] == '-';
	rc = parse_digits(s + neg, 10, &m);
	if (rc != 0)
		return rc;
	if (m > (uint64_t)INT64_MAX + neg)
		return -ERANGE;
	/* -2^63 has no positive counterpart: negate in unsigned arithmetic */
	v = neg ? (int64_t)(0 - m) : (int64_t)m;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int sg_parse_double(const char *s, double min, double max, double *out)
{
	const char *d;
	char *end;
	double v;

	if (s == NULL || out == NULL)
		return -EINVAL;
	d = s + (s[0] == '-');
	/* strtod() alone would take spaces, '+', nan, inf and hex floats */
	if (!((d[0] >= '0' && d[0] <= '9') || d[0] == '.') ||
	    strspn(d, "0123456789.eE+-") != strlen(d))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || !(v >= min && v <= max))
		return -ERANGE;
	*out = v;
	return 0;
}

/* rte_log's names (rte_log_set_level_pattern() takes the numbers), without DPDK */
static const char *const log_names[SG_LOG_LEVEL_DEBUG + 1] = {
	[1] = "emerg", [2] = "alert",  [3] = "crit", [4] = "err",
	[5] = "warning", [6] = "notice", [7] = "info", [8] = "debug",
};

int sg_log_level_parse(const char *name)
{
	for (unsigned int i = SG_LOG_LEVEL_EMERG; name != NULL && i <= SG_LOG_LEVEL_DEBUG; i++)
		if (strcmp(name, log_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

const char *sg_log_level_name(unsigned int level)
{
	return level >= SG_LOG_LEVEL_EMERG && level <= SG_LOG_LEVEL_DEBUG ? log_names[level] : NULL;
}
