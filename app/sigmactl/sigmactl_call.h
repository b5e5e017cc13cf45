/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What sigmactl's commands share (sigmactl_call.c): not a library, part of
 * sigmactl. One way to call a method and read its answer, and one way to say
 * an error, so that every command words them alike.
 */
#ifndef SIGMACTL_CALL_H
#define SIGMACTL_CALL_H

#include <stdarg.h>
#include <stddef.h>

#include <jansson.h>

#include "sg_ctl_client.h"

/** sigmactl's exit codes: the server (or the node) failed; bad usage. */
#define SIGMACTL_EXIT_SERVER 1
#define SIGMACTL_EXIT_USAGE 2
/** Room for sigmactl_call()'s "METHOD: the server's message". */
#define SIGMACTL_ERR_MAX 1024

/**
 * Print "sigmactl: error: " and the message on stderr.
 * @return @p code, so that a command can `return sigmactl_fail(...)`.
 */
int sigmactl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sigmactl_vfail(int code, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/**
 * Call @p method with @p params (taken: freed here; NULL for none) and parse
 * the answer.
 * @return the answer (the caller frees it), or NULL with @p err holding
 *         "METHOD: why" and *@p r the call's result: -EREMOTEIO (the server
 *         refused; its message is in @p err), another -errno from
 *         sg_ctl_client_call(), or -EBADMSG for an answer that is not JSON.
 */
json_t *sigmactl_call(struct sg_ctl_client *cli, const char *method, json_t *params, int *r,
		      char *err, size_t cap);

#endif
