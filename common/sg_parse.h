/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma's strict parsers of numbers and addresses: configuration files,
 * command lines, environment variables, job descriptors and etcd records all
 * go through these, so that a typo is refused the same way everywhere and
 * never becomes a silently different value (strtoul() takes " 7", "+7", "7x"
 * and "-1" as 7, 7, 7 and ULONG_MAX). Each parses the whole string: nothing
 * may come before or after the number (no spaces, no newline). On error *out
 * is left as it was.
 *
 * Not installed: the modules' own (library sg_types, sg_parse.c); the worker
 * API (sigma.h, sg_types.h) has no use for them.
 */
#ifndef SG_PARSE_H
#define SG_PARSE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Parse a whole string as an unsigned decimal integer in [@p min, @p max]:
 * digits only, no sign, no leading zero ("0" is zero; "010" is refused, as
 * strtoul(..., 0) reads it as 8), no "0x" (see sg_parse_u64x()).
 * @return 0 with *out set; -EINVAL if @p s or @p out is NULL, or @p s is
 *	empty or not such a number (a sign, a space, any other character);
 *	-ERANGE if it is one but beyond [@p min, @p max] (2^64 and more too).
 */
int sg_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/**
 * Like sg_parse_u64(), but a number may also be hexadecimal after "0x" or
 * "0X" ("0x10" is 16; leading zeros are fine after the prefix, "0x" alone is
 * refused). For values people write in hex: masks, tokens, Q_Keys.
 * @return 0, -EINVAL or -ERANGE as sg_parse_u64().
 */
int sg_parse_u64x(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/**
 * Parse a whole string as a signed decimal integer in [@p min, @p max]: an
 * optional '-' (no '+'), then digits as sg_parse_u64() takes them.
 * @return 0 with *out set; -EINVAL if @p s or @p out is NULL or @p s is not
 *	such a number; -ERANGE if it is one but beyond [@p min, @p max]
 *	(beyond int64_t too).
 */
int sg_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/**
 * Parse a whole string as a finite decimal number in [@p min, @p max]:
 * digits with an optional '.' and exponent ("1.5", ".5", "2e-3", "-4");
 * what printf's %g and Python's repr() write. Refused: a '+' or a space
 * first, "nan", "inf", hexadecimal floats ("0x1p3"), trailing characters.
 * @return 0 with *out set; -EINVAL if @p s or @p out is NULL or @p s is not
 *	such a number; -ERANGE if it is one but beyond [@p min, @p max], or
 *	beyond what a double holds ("1e999", and "1e-999", which would
 *	underflow).
 */
int sg_parse_double(const char *s, double min, double max, double *out);

/**
 * The one IPv4 parser of Sigma: a dotted quad, four parts of 0..255 in decimal
 * without leading zeros (which other tools read as octal), nothing before or
 * after (inet_pton()'s rule).
 * @param addr_be the address in network byte order, if not NULL
 * @return 0, or -EINVAL for NULL or anything else.
 */
int sg_ipv4_parse(const char *s, uint32_t *addr_be);

/** Log levels: the syslog severities plus one, as rte_log numbers them. */
#define SG_LOG_LEVEL_EMERG 1 /**< RTE_LOG_EMERG */
#define SG_LOG_LEVEL_DEBUG 8 /**< RTE_LOG_DEBUG */

/**
 * The log level named @p name: "emerg", "alert", "crit", "err", "warning",
 * "notice", "info" or "debug" (SG_LOG_LEVEL_EMERG..SG_LOG_LEVEL_DEBUG, which
 * are rte_log's RTE_LOG_EMERG..RTE_LOG_DEBUG).
 * @return the level, or -EINVAL for any other name (NULL too).
 */
int sg_log_level_parse(const char *name);

/** The name of log level @p level, or NULL outside SG_LOG_LEVEL_EMERG..SG_LOG_LEVEL_DEBUG. */
const char *sg_log_level_name(unsigned int level);

#ifdef __cplusplus
}
#endif

#endif /* SG_PARSE_H */
