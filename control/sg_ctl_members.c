/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Membership of summation nodes from heartbeats, and failure of the rounds
 * in flight on a node that goes silent; the server's methods on it
 * (node_heartbeat, nodes_list, node_remove), registered beside it.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_ctl_rpc.h"
#include "sg_ctl_server_internal.h"

struct round_slot {
	bool used;
	uint32_t gen; /* makes stale handles detectable */
	uint32_t node;
	uint32_t job;
	uint64_t key;
	uint64_t round;
};

struct sg_ctl_members {
	uint64_t timeout_ns;
	uint64_t epoch;
	unsigned int max_nodes, n_nodes;
	unsigned int max_rounds;
	sg_ctl_round_failed_cb cb;
	void *cb_arg;
	struct sg_ctl_member *nodes;
	struct round_slot *rounds;
};

struct sg_ctl_members *sg_ctl_members_create(uint64_t timeout_ns, unsigned int max_nodes,
					     unsigned int max_rounds, sg_ctl_round_failed_cb cb,
					     void *cb_arg)
{
	struct sg_ctl_members *m;

	if (timeout_ns == 0 || max_nodes == 0 || max_nodes > 65536 || max_rounds > (1u << 20)) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->nodes = calloc(max_nodes, sizeof(*m->nodes));
	m->rounds = calloc(max_rounds ? max_rounds : 1, sizeof(*m->rounds));
	if (m->nodes == NULL || m->rounds == NULL) {
		sg_ctl_members_destroy(m);
		errno = ENOMEM;
		return NULL;
	}
	m->timeout_ns = timeout_ns;
	m->max_nodes = max_nodes;
	m->max_rounds = max_rounds;
	m->cb = cb;
	m->cb_arg = cb_arg;
	return m;
}

void sg_ctl_members_destroy(struct sg_ctl_members *m)
{
	if (m == NULL)
		return;
	free(m->nodes);
	free(m->rounds);
	free(m);
}

static int find_node(const struct sg_ctl_members *m, const char *name)
{
	unsigned int i;

	for (i = 0; i < m->n_nodes; i++)
		if (strcmp(m->nodes[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

/* Fail every round in flight on node @idx, telling the owner why. */
static void fail_rounds(struct sg_ctl_members *m, unsigned int idx, const char *why)
{
	unsigned int i;
	char msg[256];

	for (i = 0; i < m->max_rounds; i++) {
		struct round_slot *r = &m->rounds[i];
		struct sg_ctl_round_failure f;

		if (!r->used || r->node != idx)
			continue;
		snprintf(msg, sizeof(msg),
			 "round %" PRIu64 " of key %#" PRIx64 " (job %" PRIu32
			 ") failed: summation node '%s' lost (%s)",
			 r->round, r->key, r->job, m->nodes[idx].name, why);
		f = (struct sg_ctl_round_failure){
			.job = r->job,
			.key = r->key,
			.round = r->round,
			.node = m->nodes[idx].name,
			.error = -EHOSTDOWN,
			.message = msg,
		};
		r->used = false;
		r->gen++;
		if (m->cb != NULL)
			m->cb(m->cb_arg, &f);
	}
}

int sg_ctl_members_heartbeat(struct sg_ctl_members *m, const char *name,
			     enum sg_node_kind kind, double gbps, uint64_t now_ns)
{
	struct sg_ctl_member *nd;
	int i;

	if (m == NULL || name == NULL || name[0] == '\0' || strlen(name) >= SG_NAME_MAX ||
	    (kind != SG_NODE_CPU && kind != SG_NODE_GPU) || !(gbps > 0) ||
	    !isfinite(gbps))
		return -EINVAL;
	i = find_node(m, name);
	if (i < 0) {
		if (m->n_nodes == m->max_nodes)
			return -ENOSPC;
		i = (int)m->n_nodes++;
		nd = &m->nodes[i];
		/* A removal leaves the last slot holding its old node: start clean. */
		*nd = (typeof(*nd)){0};
		snprintf(nd->name, sizeof(nd->name), "%s", name);
	}
	nd = &m->nodes[i];
	if (!nd->alive || nd->kind != kind || nd->gbps != gbps) {
		if (nd->alive || nd->last_heartbeat_ns != 0)
			SG_CTL_LOG(INFO, "node '%s' is %s", name, nd->alive ? "changed" : "back");
		m->epoch++;
	}
	nd->kind = kind;
	nd->gbps = gbps;
	nd->alive = true;
	nd->last_heartbeat_ns = now_ns ? now_ns : 1;
	return 0;
}

int sg_ctl_members_remove(struct sg_ctl_members *m, const char *name)
{
	unsigned int i;
	int idx;

	if (m == NULL || name == NULL)
		return -EINVAL;
	idx = find_node(m, name);
	if (idx < 0)
		return idx;
	fail_rounds(m, (unsigned int)idx, "removed by the operator");
	/* Keep round slots pointing at the right nodes after the shift. */
	for (i = 0; i < m->max_rounds; i++)
		if (m->rounds[i].used && m->rounds[i].node > (unsigned int)idx)
			m->rounds[i].node--;
	memmove(&m->nodes[idx], &m->nodes[idx + 1],
		(m->n_nodes - (unsigned int)idx - 1) * sizeof(m->nodes[0]));
	m->n_nodes--;
	m->epoch++;
	return 0;
}

int sg_ctl_members_check(struct sg_ctl_members *m, uint64_t now_ns)
{
	unsigned int i;
	int lost = 0;

	if (m == NULL)
		return 0;
	for (i = 0; i < m->n_nodes; i++) {
		struct sg_ctl_member *nd = &m->nodes[i];
		char why[96];

		if (!nd->alive || now_ns < nd->last_heartbeat_ns ||
		    now_ns - nd->last_heartbeat_ns <= m->timeout_ns)
			continue;
		nd->alive = false;
		lost++;
		snprintf(why, sizeof(why), "no heartbeat for %" PRIu64 " ms",
			 (now_ns - nd->last_heartbeat_ns) / 1000000);
		SG_CTL_LOG(WARNING, "summation node '%s' lost: %s; a new placement is due",
			   nd->name, why);
		fail_rounds(m, i, why);
	}
	if (lost)
		m->epoch++;
	return lost;
}

uint64_t sg_ctl_members_epoch(const struct sg_ctl_members *m)
{
	return m ? m->epoch : 0;
}

unsigned int sg_ctl_members_list(const struct sg_ctl_members *m, struct sg_ctl_member *out,
				 unsigned int cap)
{
	unsigned int i;

	if (m == NULL)
		return 0;
	for (i = 0; i < m->n_nodes && i < cap && out != NULL; i++)
		out[i] = m->nodes[i];
	return m->n_nodes;
}

int sg_ctl_members_place_nodes(const struct sg_ctl_members *m, struct sg_ctl_place_node *out,
			       unsigned int cap)
{
	unsigned int i;

	if (m == NULL || (out == NULL && m->n_nodes > 0))
		return -EINVAL;
	if (m->n_nodes > cap)
		return -ENOSPC;
	for (i = 0; i < m->n_nodes; i++)
		out[i] = (struct sg_ctl_place_node){
			.name = m->nodes[i].name,
			.kind = m->nodes[i].kind,
			.gbps = m->nodes[i].gbps,
			.alive = m->nodes[i].alive,
		};
	return (int)m->n_nodes;
}

int sg_ctl_members_round_begin(struct sg_ctl_members *m, const char *node, uint32_t job,
			       uint64_t key, uint64_t round)
{
	unsigned int i;
	int idx;

	if (m == NULL || node == NULL)
		return -EINVAL;
	idx = find_node(m, node);
	if (idx < 0)
		return idx;
	if (!m->nodes[idx].alive)
		return -EHOSTDOWN;
	for (i = 0; i < m->max_rounds; i++) {
		struct round_slot *r = &m->rounds[i];

		if (r->used)
			continue;
		r->used = true;
		r->node = (uint32_t)idx;
		r->job = job;
		r->key = key;
		r->round = round;
		/* Handle = slot index + generation, so a stale handle never ends a reused slot. */
		return (int)(i | ((r->gen & 0x7ffu) << 20));
	}
	return -ENOSPC;
}

int sg_ctl_members_round_end(struct sg_ctl_members *m, int handle)
{
	unsigned int i, gen;

	if (m == NULL || handle < 0)
		return -EINVAL;
	i = (unsigned int)handle & ((1u << 20) - 1);
	gen = (unsigned int)handle >> 20;
	if (i >= m->max_rounds || !m->rounds[i].used || (m->rounds[i].gen & 0x7ffu) != gen)
		return -EINVAL;
	m->rounds[i].used = false;
	m->rounds[i].gen++;
	return 0;
}

/* ---- methods: the server's membership (docs/control.md) ------------------ */

static int m_node_heartbeat(struct sg_ctl_server *s, json_t *params, json_t **res,
			    struct sg_rpc_err *err)
{
	const char *name = NULL, *kind = "cpu";
	double gbps = 0;
	enum sg_node_kind k;
	json_error_t jerr;
	int rc;

	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s:s, s?s, s:F}", "name", &name, "kind",
			   &kind, "gbps", &gbps) != 0)
		return params ? sg_rpc_bad_params(err, &jerr)
			      : sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need name, gbps");
	if (sg_node_kind_from_name(kind, &k) != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: kind must be cpu or gpu");
	rc = sg_ctl_members_heartbeat(s->members, name, k, gbps, sg_ctl_now_ns());
	if (rc != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: %s", rc == -ENOSPC ? "too many nodes"
					    : "name must be 1..63 chars, gbps > 0");
	*res = json_pack("{s:I}", "epoch", (json_int_t)sg_ctl_members_epoch(s->members));
	return 0;
}
SG_RPC_REGISTER("node_heartbeat", m_node_heartbeat);

static int m_nodes_list(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct sg_rpc_err *err)
{
	struct sg_ctl_member *mem;
	unsigned int i, n;
	uint64_t now = sg_ctl_now_ns();
	json_t *arr;

	if (sg_rpc_no_params(params, err))
		return -1;
	n = sg_ctl_members_list(s->members, NULL, 0);
	mem = calloc(n ? n : 1, sizeof(*mem));
	if (mem == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	sg_ctl_members_list(s->members, mem, n);
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:f, s:b, s:I}", "name", mem[i].name, "kind",
				       sg_node_kind_name(mem[i].kind), "gbps", mem[i].gbps,
				       "alive", mem[i].alive, "last_heartbeat_ms",
				       (json_int_t)((now - mem[i].last_heartbeat_ns) / 1000000)));
	free(mem);
	*res = json_pack("{s:I, s:o}", "epoch", (json_int_t)sg_ctl_members_epoch(s->members),
			 "nodes", arr);
	return 0;
}
SG_RPC_REGISTER("nodes_list", m_nodes_list);

static int m_node_remove(struct sg_ctl_server *s, json_t *params, json_t **res,
			 struct sg_rpc_err *err)
{
	const char *name;
	json_error_t jerr;

	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s:s}", "name", &name) != 0)
		return params ? sg_rpc_bad_params(err, &jerr)
			      : sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need name");
	if (sg_ctl_members_remove(s->members, name) != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND, "no such node: %.63s", name);
	*res = json_true();
	return 0;
}
SG_RPC_REGISTER("node_remove", m_node_remove);
