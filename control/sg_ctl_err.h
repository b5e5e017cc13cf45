/* SPDX-License-Identifier: BSD-3-Clause */
/* Private to control/: the one way its functions write a reason into a caller's buffer. */
#ifndef SG_CTL_ERR_H
#define SG_CTL_ERR_H

#include <stddef.h>

/**
 * Write the printf-style reason into @p err (@p len bytes; NULL or 0: nowhere).
 * @return @p rc, so that a caller can `return sg_ctl_err(err, len, -EINVAL, ...)`.
 */
int sg_ctl_err(char *err, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* SG_CTL_ERR_H */
