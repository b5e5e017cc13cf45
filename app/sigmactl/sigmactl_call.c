/* SPDX-License-Identifier: BSD-3-Clause */
/* sigmactl's shared call and error wording (sigmactl_call.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigmactl_call.h"

int sigmactl_vfail(int code, const char *fmt, va_list ap)
{
	fputs("sigmactl: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	return code;
}

int sigmactl_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = sigmactl_vfail(code, fmt, ap);
	va_end(ap);
	return code;
}

json_t *sigmactl_call(struct sg_ctl_client *cli, const char *method, json_t *params, int *r,
		      char *err, size_t cap)
{
	char *ptext = NULL, *res = NULL, *emsg = NULL;
	json_t *out = NULL;

	if (params != NULL) {
		ptext = json_dumps(params, JSON_COMPACT);
		json_decref(params);
	}
	*r = sg_ctl_client_call(cli, method, ptext, &res, &emsg);
	free(ptext);
	if (*r == -EREMOTEIO)
		snprintf(err, cap, "%s: %s", method, emsg ? emsg : "failed");
	else if (*r != 0)
		snprintf(err, cap, "%s: %s", method, strerror(-*r));
	else if ((out = json_loads(res, JSON_DECODE_ANY, NULL)) == NULL) {
		snprintf(err, cap, "%s: unreadable answer", method);
		*r = -EBADMSG;
	}
	free(res);
	free(emsg);
	return out;
}
