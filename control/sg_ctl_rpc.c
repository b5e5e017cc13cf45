/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bottom of the server library: the method registry (lookup, the set-up
 * check, the dispatch, and its own methods rpc_get_methods and version), the
 * helpers every method answers with (sg_ctl_rpc.h), the library's log type and
 * clock. It calls no other file of the server: the I/O loop (sg_ctl_server.c)
 * and every file of methods call it, never the reverse.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sg_ctl_rpc.h"
#include "sg_ctl_server_internal.h"
#include "sg_version.h"

RTE_LOG_REGISTER(sg_ctl_logtype, sigma.control, INFO);

uint64_t sg_ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- methods: the registry (sg_ctl_rpc.h) -------------------------------- */

/* Every method linked into the program: the linker gathers them into this section. */
extern const struct sg_rpc_method __start_sg_rpc_methods[] __attribute__((weak));
extern const struct sg_rpc_method __stop_sg_rpc_methods[] __attribute__((weak));

int sg_rpc_fail(struct sg_rpc_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int sg_rpc_fail_errno(struct sg_rpc_err *err, const char *what, int rc, const char *reason)
{
	int code = rc == -ENOENT	? SG_CTL_ERR_NOT_FOUND
		   : rc == -ENOTSUP ? SG_CTL_ERR_NOT_SUPPORTED
				    : SG_CTL_ERR_REFUSED;

	if (reason != NULL && reason[0] != '\0')
		return sg_rpc_fail(err, code, "%s: %s", what, reason);
	return sg_rpc_fail(err, code, "%s: %s", what, strerror(-rc));
}

int sg_rpc_bad_params(struct sg_rpc_err *err, const json_error_t *jerr)
{
	return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: %s", jerr->text);
}

int sg_rpc_no_params(json_t *params, struct sg_rpc_err *err)
{
	size_t n = json_is_array(params)    ? json_array_size(params)
		   : json_is_object(params) ? json_object_size(params)
					    : 0;

	if (params != NULL && n != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: this method takes none");
	return 0;
}

void *sg_rpc_node(const struct sg_ctl_server *s)
{
	return s->cfg.ops_arg;
}

/* The registration of @p name for servers of @p node's table (NULL: the plain one), or NULL. */
static const struct sg_rpc_method *method_lookup(const char *name,
						 const struct sg_ctl_agent_ops *node)
{
	for (const struct sg_rpc_method *m = __start_sg_rpc_methods; m < __stop_sg_rpc_methods; m++)
		if (m->node == node && strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

/* What server @p s runs for @p name: its node's registration, else the plain one. */
static const struct sg_rpc_method *method_find(const struct sg_ctl_server *s, const char *name)
{
	const struct sg_rpc_method *m = method_lookup(name, s->cfg.ops);

	return m != NULL ? m : method_lookup(name, NULL);
}

/*
 * Set-up: every registered name well-formed and registered once per table, plain
 * or a node's (a build defect otherwise).
 */
int sg_rpc_methods_check(void)
{
	for (const struct sg_rpc_method *m = __start_sg_rpc_methods; m < __stop_sg_rpc_methods;
	     m++) {
		size_t len = strlen(m->name);

		if (len == 0 || len > 63 || strspn(m->name, "abcdefghijklmnopqrstuvwxyz0123456789_") !=
		    len || strcmp(m->name, "auth") == 0 || m->fn == NULL) {
			SG_CTL_LOG(ERR, "method '%.64s': a name of 1..63 of [a-z0-9_] other than "
				   "auth, and a function", m->name);
			return -EINVAL;
		}
		if (method_lookup(m->name, m->node) != m) {
			SG_CTL_LOG(ERR, "method %s is registered twice%s", m->name,
				   m->node != NULL ? " for one node" : "");
			return -EINVAL;
		}
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* "auth" (the handshake, which the framing answers), then every method of @p s by name. */
static int m_rpc_get_methods(struct sg_ctl_server *s, json_t *params, json_t **res,
			     struct sg_rpc_err *err)
{
	size_t n = 0, max = (size_t)(__stop_sg_rpc_methods - __start_sg_rpc_methods);
	json_t **names = calloc(max ? max : 1, sizeof(*names));

	if (names == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	if (sg_rpc_no_params(params, err)) {
		free(names);
		return -1;
	}
	/* each name once: a node's registration stands in for the plain one of its name */
	for (const struct sg_rpc_method *m = __start_sg_rpc_methods; m < __stop_sg_rpc_methods;
	     m++)
		if (method_find(s, m->name) == m)
			names[n++] = json_string(m->name);
	qsort(names, n, sizeof(*names), name_cmp);
	*res = json_array();
	json_array_append_new(*res, json_string("auth"));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(*res, names[i]);
	free(names);
	return 0;
}
SG_RPC_REGISTER("rpc_get_methods", m_rpc_get_methods);

/*
 * The versions this node speaks (docs/control.md, "Versions"). Its name and result
 * keep their meaning in every API version: a client asks it first.
 */
static int m_version(struct sg_ctl_server *s, json_t *params, json_t **res, struct sg_rpc_err *err)
{
	if (sg_rpc_no_params(params, err))
		return -1;
	*res = json_pack("{s:s, s:i, s:i, s:i}", "release", SG_VERSION_STRING, "api",
			 SG_API_VERSION, "protocol", SG_PROTO_VERSION, "soversion", SG_SOVERSION);
	return 0;
}
SG_RPC_REGISTER("version", m_version);


/*
 * Run method @p name. @return 0 with *result set (a new reference), or -1 with
 * @p err filled; -ENOENT if no such method is registered.
 */
int sg_rpc_dispatch(struct sg_ctl_server *s, const char *name, json_t *params, json_t **result,
		    struct sg_rpc_err *err)
{
	const struct sg_rpc_method *m = method_find(s, name);

	*result = NULL;
	if (m == NULL)
		return -ENOENT;
	if (m->fn(s, params, result, err) != 0) {
		json_decref(*result);
		*result = NULL;
		return -1;
	}
	if (*result == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "internal error building the answer");
	return 0;
}

int sg_ctl_srv_not_supported(struct sg_rpc_err *err)
{
	return sg_rpc_fail(err, SG_CTL_ERR_NOT_SUPPORTED, "not supported by this node's agent");
}
