/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * JSON-RPC methods of the control server, registered next to the code they
 * control (docs/control.md lists them; docs/architecture.md, "Add an RPC").
 *
 * A method is a function of type sg_rpc_fn, registered once per program with
 * SG_RPC_REGISTER() at file scope of the file that implements it. The server
 * (sg_ctl_server.c) keeps only the sockets, the framing and the HMAC handshake
 * (`auth`); the registry (sg_ctl_rpc.c) looks a request's method up by name
 * among every method linked into the program, and `rpc_get_methods` lists them.
 *
 * A node (sigmad's agent, a test's mock) registers the methods it acts on
 * itself, beside its own code, with SG_RPC_NODE_REGISTER(): such a
 * registration is tagged with the node's ops table (struct sg_ctl_agent_ops)
 * and serves only the servers created with that table, so that a program with
 * two servers (a node and a plain coordinator) dispatches each to its own. A
 * server looks a name up among its node's registrations first, then among the
 * plain ones. The plain registrations of the node methods (layout_get,
 * layout_set, drain, verbs_*; sg_ctl_methods.c) answer "not supported by this
 * node's agent" (SG_CTL_ERR_NOT_SUPPORTED), or, for log_level_set, set the
 * rte_log level: what a node that registers none of its own answers (as
 * sigma-udpd, which has no layout, drain or verbs). The
 * JSON of those methods (params and answers) is shared below, so that a
 * node's handler is its own action between a parse and an answer helper.
 *
 * Registration puts a struct sg_rpc_method into the linker section
 * `sg_rpc_methods`. A program links the server library whole (meson's
 * ctl_server_dep: link_whole), so every registration of it is in the program,
 * whichever file it sits in; the registry and the helpers below are
 * sg_ctl_rpc.c's, which calls no method. The test rpc_methods checks that
 * sigmad and sigma-udpd serve every method docs/control.md lists, and no other.
 *
 * Methods run on the server's thread, one at a time; a node's handlers must
 * not block for long (they reach lcores through sg_dp_chan_call() with a short
 * timeout).
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

/** A registered method (SG_RPC_REGISTER() or SG_RPC_NODE_REGISTER() makes one). */
struct sg_rpc_method {
	const char *name; /**< what a request's "method" names: 1..63 of [a-z0-9_] */
	sg_rpc_fn fn;
	/** NULL: a method of every server; else only of the servers created with this table */
	const struct sg_ctl_agent_ops *node;
};

#define SG_RPC_CAT_(a, b) a##b
#define SG_RPC_CAT(a, b) SG_RPC_CAT_(a, b)
#define SG_RPC_REGISTER_(name, fn, node)                                                      \
	static const struct sg_rpc_method SG_RPC_CAT(sg_rpc_method_, __COUNTER__)             \
		__attribute__((used, section("sg_rpc_methods"), aligned(sizeof(void *)))) = \
			{name, fn, node}

/**
 * Register @p fn as method @p name (a string literal) of every control server
 * of the program. A name registered twice makes sg_ctl_server_create() fail
 * with EINVAL, naming it.
 */
#define SG_RPC_REGISTER(name, fn) SG_RPC_REGISTER_(name, fn, NULL)

/**
 * Register @p fn as method @p name of the control servers created with the
 * node's ops table @p ops (a `const struct sg_ctl_agent_ops *`): it takes the
 * place of a plain registration of the same name there, and no other server
 * sees it. sg_rpc_node() gives @p fn the node (the config's ops_arg). A name
 * registered twice for one table makes sg_ctl_server_create() fail with EINVAL.
 */
#define SG_RPC_NODE_REGISTER(ops, name, fn) SG_RPC_REGISTER_(name, fn, ops)

/** The node a server was created for: its config's ops_arg (for a node's own methods). */
void *sg_rpc_node(const struct sg_ctl_server *s);

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

/*
 * The node methods' JSON, shared by every node that answers them (docs/control.md
 * is the contract). A *_parse() helper checks the params strictly and fills the
 * request: @return 0, or -1 with @p err filled (the node must not act then). An
 * *_answer() helper takes what the node's action returned (@p rc: 0 or -errno,
 * and its @p reason, which may be "" or NULL) and builds the answer or the error
 * every node gives: @return 0 with *result set, or -1 with @p err filled, which
 * the handler returns as it is.
 */

/** layout_get (no params: sg_rpc_no_params()): the lcores, reducers and keymap of @p lay. */
int sg_rpc_layout_get_answer(int rc, const struct sg_ctl_layout *lay, json_t **result,
			     struct sg_rpc_err *err);

/**
 * layout_set: {keymap?, idle?}, at least one; any other member is refused with
 * SG_CTL_ERR_REFUSED (it needs a restart), a malformed one with
 * SG_CTL_ERR_INVALID_PARAMS.
 */
int sg_rpc_layout_set_parse(json_t *params, struct sg_ctl_layout_change *chg,
			    struct sg_rpc_err *err);
/** layout_set: true, or "layout change refused: <reason>". */
int sg_rpc_layout_set_answer(int rc, const char *reason, json_t **result, struct sg_rpc_err *err);

/**
 * drain (no params): on @p rc 0 the server @p s counts as draining from now on
 * (it refuses new jobs and RC connections; node_info, stats_get and /metrics say
 * so), and the answer is {"draining": true}.
 */
int sg_rpc_drain_answer(struct sg_ctl_server *s, int rc, json_t **result, struct sg_rpc_err *err);

/** verbs_info (no params): @p vi as JSON (its "rc" object in RC mode). */
int sg_rpc_verbs_info_answer(int rc, const struct sg_ctl_verbs_info *vi, const char *reason,
			     json_t **result, struct sg_rpc_err *err);

/**
 * verbs_rc_connect: the worker's side {qpn, psn, lid?, gid, addr, rkey, slots,
 * stride}, every member range-checked; refused (SG_CTL_ERR_REFUSED) while @p s
 * drains.
 */
int sg_rpc_verbs_rc_connect_parse(struct sg_ctl_server *s, json_t *params,
				  struct sg_ctl_verbs_rc_addr *worker, struct sg_rpc_err *err);
/** verbs_rc_connect: @p peer (>= 0: the peer id, or -errno) and the node's side @p node. */
int sg_rpc_verbs_rc_connect_answer(int peer, const struct sg_ctl_verbs_rc_addr *node,
				   const char *reason, json_t **result, struct sg_rpc_err *err);

/** verbs_rc_disconnect: {peer}, 0..2^32-1. */
int sg_rpc_verbs_rc_disconnect_parse(json_t *params, uint32_t *peer, struct sg_rpc_err *err);
/** verbs_rc_disconnect: {"peer": @p peer}. */
int sg_rpc_verbs_rc_disconnect_answer(int rc, uint32_t peer, const char *reason, json_t **result,
				      struct sg_rpc_err *err);

/**
 * log_level_set: {pattern?, level}; @p *pattern ("sigma.*" if absent) points into
 * @p params, @p *level is the rte_log level (RTE_LOG_EMERG..RTE_LOG_DEBUG).
 */
int sg_rpc_log_level_set_parse(json_t *params, const char **pattern, int *level,
			       struct sg_rpc_err *err);
/** log_level_set: {pattern, level}; a positive @p rc counts as -EINVAL. */
int sg_rpc_log_level_set_answer(int rc, const char *pattern, int level, json_t **result,
				struct sg_rpc_err *err);

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_RPC_H */
