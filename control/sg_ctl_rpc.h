/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * JSON-RPC methods of the control server, registered next to the code they
 * control (docs/control.md lists them; docs/architecture.md, "Add an RPC").
 *
 * A method is a function of type sg_rpc_fn, registered once per program with
 * SG_RPC_REGISTER() at file scope of the file that implements it. The server
 * (sg_ctl_server.c) keeps only the sockets, the framing, the HMAC handshake
 * (`auth`) and the dispatch: it looks a request's method up by name among
 * every method linked into the program, and `rpc_get_methods` lists them.
 * Every server of a program serves the same methods.
 *
 * Registration puts a struct sg_rpc_method into the linker section
 * `sg_rpc_methods`. The linker takes an object file out of a static library
 * only if the program uses one of its symbols, so a method must live in a
 * file that the program links for another reason (the server itself, the
 * membership tracker, the node's agent); a file of nothing but methods would
 * be left out silently. The test rpc_methods checks that sigmad and
 * sigma-udpd serve every method docs/control.md lists, and no other.
 *
 * Methods run on the server's thread, one at a time.
 */
#ifndef SG_CTL_RPC_H
#define SG_CTL_RPC_H

#include <jansson.h>

#include "sg_ctl_server.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A JSON-RPC error to send back: one of the SG_CTL_ERR_* codes and its message. */
struct sg_rpc_err {
	int code;
	char msg[SG_CTL_REASON_MAX + 96];
};

/**
 * One method: validate @p params (NULL when the request had none) strictly,
 * act, and set @p *result to a new reference.
 * @return 0 with *result set, or -1 with @p err filled (sg_rpc_fail()).
 */
typedef int (*sg_rpc_fn)(struct sg_ctl_server *s, json_t *params, json_t **result,
			 struct sg_rpc_err *err);

/** A registered method (SG_RPC_REGISTER() makes one). */
struct sg_rpc_method {
	const char *name; /**< what a request's "method" names: 1..63 of [a-z0-9_] */
	sg_rpc_fn fn;
};

/**
 * Register @p fn as method @p name (a string literal) of every control server
 * of the program. A name registered twice makes sg_ctl_server_create() fail
 * with EINVAL, naming it.
 */
#define SG_RPC_REGISTER(name, fn)                                                           \
	static const struct sg_rpc_method sg_rpc_method_##fn                                \
		__attribute__((used, section("sg_rpc_methods"), aligned(sizeof(void *)))) = \
			{name, fn}

/**
 * Fill @p err with @p code and the printf-style message.
 * @return -1, so that a method can `return sg_rpc_fail(err, ...)`.
 */
int sg_rpc_fail(struct sg_rpc_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/**
 * An agent's -errno @p rc as a JSON-RPC error: -ENOENT is SG_CTL_ERR_NOT_FOUND,
 * -ENOTSUP SG_CTL_ERR_NOT_SUPPORTED, anything else SG_CTL_ERR_REFUSED; the
 * message is "@p what: @p reason", or strerror() when @p reason is NULL or empty.
 * @return -1.
 */
int sg_rpc_fail_errno(struct sg_rpc_err *err, const char *what, int rc, const char *reason);

/** jansson's complaint about @p params as SG_CTL_ERR_INVALID_PARAMS. @return -1. */
int sg_rpc_bad_params(struct sg_rpc_err *err, const json_error_t *jerr);

/**
 * For a method that takes no params: @return 0 if @p params is NULL, {} or [];
 * -1 with SG_CTL_ERR_INVALID_PARAMS otherwise.
 */
int sg_rpc_no_params(json_t *params, struct sg_rpc_err *err);

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_RPC_H */
