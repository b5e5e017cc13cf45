/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the pipeline's own files (not part of the public API).
 */
#ifndef SG_DP_INTERNAL_H
#define SG_DP_INTERNAL_H

#include <stddef.h>

/** Write a formatted reason into @p err (when not NULL), always NUL-terminated. */
void sg_dp_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* SG_DP_INTERNAL_H */
