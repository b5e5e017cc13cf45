/* SPDX-License-Identifier: BSD-3-Clause */
/* sg_err(): a reason into a caller's buffer (sg_err.h). */
#include <stdarg.h>
#include <stdio.h>

#include "sg_err.h"

int sg_err(char *err, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}
