/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The one way Sigma's functions write a reason into a caller's buffer: the
 * `err`/`errlen` pair that config loaders, set-ups and parsers take. Not
 * installed (library sg_types, sg_err.c).
 */
#ifndef SG_ERR_H
#define SG_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Write the printf-style reason into @p err (@p len bytes, always
 * NUL-terminated; NULL or 0: nowhere).
 * @return @p rc, so that a caller can `return sg_err(err, len, -EINVAL, ...)`.
 */
int sg_err(char *err, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif /* SG_ERR_H */
