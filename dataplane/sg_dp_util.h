/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to dataplane/: small helpers shared by the config parsers of sigmad
 * and of the verbs transport.
 */
#ifndef SG_DP_UTIL_H
#define SG_DP_UTIL_H

#include <stdint.h>

/**
 * Strict unsigned parse of a whole string: decimal, or hex with 0x.
 * Leading signs or spaces, trailing garbage and values outside [lo, hi] are
 * refused, so that a config typo never becomes a silently different number.
 * @return 0 with *out set, or -EINVAL.
 */
int sg_dp_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

#endif /* SG_DP_UTIL_H */
