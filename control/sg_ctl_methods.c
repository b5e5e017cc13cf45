/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's methods that the server answers through the agent's ops table
 * (node_info, lcores_get, stats_get: the server needs the same callbacks for
 * placement and /metrics), the JSON shared by the methods each node registers
 * itself (layout_*, drain, verbs_*, log_level_set; sg_ctl_rpc.h) with their
 * plain registrations, and what a node that registers none answers. Every
 * method validates its params strictly (unknown members are refused) before the
 * node sees anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_ctl_config.h"
#include "sg_ctl_rpc.h"
#include "sg_ctl_server_internal.h"
#include "sg_parse.h"

/* ---- node ---------------------------------------------------------------- */

static int m_node_info(struct sg_ctl_server *s, json_t *params, json_t **res,
		       struct sg_rpc_err *err)
{
	struct sg_ctl_node_info *ni;
	json_t *ports, *red;
	unsigned int i;
	int rc;

	if (sg_rpc_no_params(params, err))
		return -1;
	NEED_OP(s, node_info, err);
	ni = calloc(1, sizeof(*ni));
	if (ni == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	rc = s->cfg.ops->node_info(s->cfg.ops_arg, ni);
	if (rc != 0) {
		free(ni);
		return sg_rpc_fail_errno(err, "node info", rc, NULL);
	}
	ports = json_array();
	for (i = 0; i < ni->n_ports && i < SG_CTL_MAX_PORTS; i++)
		json_array_append_new(ports, json_pack("{s:s, s:I, s:i}", "name", ni->ports[i].name,
						       "speed_mbps",
						       (json_int_t)ni->ports[i].speed_mbps, "numa",
						       ni->ports[i].numa));
	red = json_array();
	for (i = 0; i < ni->n_reducers && i < SG_CTL_MAX_LCORES; i++)
		json_array_append_new(red, json_integer(ni->reducer_lcores[i]));
	*res = json_pack("{s:s, s:I, s:I, s:o, s:o, s:b, s:s, s:I, s:s, s:f, s:I}", "name",
			 ni->name, "cores", (json_int_t)ni->n_cores, "numa_nodes",
			 (json_int_t)ni->n_numa, "ports", ports, "reducer_lcores", red, "draining",
			 ni->draining || s->draining, "addr", ni->addr, "udp_port",
			 (json_int_t)ni->udp_port, "kind", sg_node_kind_name(ni->kind), "gbps",
			 ni->gbps, "max_chunk_bytes", (json_int_t)ni->max_chunk_bytes);
	free(ni);
	return 0;
}
SG_RPC_REGISTER("node_info", m_node_info);

/* ---- lcores, layout, stats ---------------------------------------------- */

static json_t *lcore_json(const struct sg_ctl_lcore_stats *l)
{
	return json_pack("{s:I, s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:I}", "lcore",
			 (json_int_t)l->lcore, "role", sg_role_name(l->role), "numa", l->numa,
			 "idle", l->idle == SG_IDLE_SLEEP ? "sleep" : "poll", "busy_cycles",
			 (json_int_t)l->busy_cycles, "idle_cycles", (json_int_t)l->idle_cycles,
			 "packets", (json_int_t)l->packets, "bytes_summed",
			 (json_int_t)l->bytes_summed, "drops", (json_int_t)l->drops, "busy_pct",
			 l->busy_pct, "mpps", l->mpps, "gbps_summed", l->gbps_summed, "ring",
			 (json_int_t)l->ring);
}

static int m_lcores_get(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct sg_rpc_err *err)
{
	struct sg_ctl_lcore_stats *ls = NULL;
	int i, n;

	if (sg_rpc_no_params(params, err))
		return -1;
	NEED_OP(s, lcores, err);
	n = sg_ctl_srv_lcores(s, &ls, err);
	if (n < 0)
		return -1;
	*res = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(*res, lcore_json(&ls[i]));
	free(ls);
	return 0;
}
SG_RPC_REGISTER("lcores_get", m_lcores_get);

static json_t *server_stats_json(const struct sg_ctl_server *s)
{
	struct sg_ctl_server_stats st;

	sg_ctl_server_get_stats(s, &st);
	json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "conns_accepted", (json_int_t)st.conns_accepted, "conns_refused",
			 (json_int_t)st.conns_refused, "requests", (json_int_t)st.requests,
			 "auth_ok", (json_int_t)st.auth_ok, "auth_failed",
			 (json_int_t)st.auth_failed, "unauthenticated",
			 (json_int_t)st.unauthenticated, "malformed", (json_int_t)st.malformed,
			 "oversized", (json_int_t)st.oversized, "unknown_method",
			 (json_int_t)st.unknown_method, "timeouts", (json_int_t)st.timeouts,
			 "method_errors", (json_int_t)st.method_errors, "metrics_scrapes",
			 (json_int_t)st.metrics_scrapes, "http_bad", (json_int_t)st.http_bad);

	if (o != NULL)
		json_object_set_new(o, "keys_add", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
				    "requests", (json_int_t)st.keys_add_requests, "added",
				    (json_int_t)st.keys_add_added, "refused",
				    (json_int_t)st.keys_add_refused, "spare",
				    (json_int_t)st.keys_spare, "busy_us",
				    (json_int_t)st.keys_add_busy_us, "max_us",
				    (json_int_t)st.keys_add_max_us));

	if (o != NULL && s->cl.w != NULL) {
		struct sg_etcd_watch_stats ws;
		const struct sg_etcd_garbage *g = &ws.job_garbage;

		sg_etcd_watch_stats(s->cl.w, &ws);
		json_object_set_new(o, "cluster", json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, "
			"s:b, s:I}", "name", s->cl.name, "records", (json_int_t)st.cluster_records,
			"refused", (json_int_t)st.cluster_refused, "nodes_lost",
			(json_int_t)st.cluster_nodes_lost, "keys_added",
			(json_int_t)st.cluster_keys_added, "add_failures",
			(json_int_t)st.cluster_add_failures, "job_garbage",
			(json_int_t)(g->not_json + g->bad_field + g->bad_kind + g->name_mismatch),
			"streaming", ws.streaming, "reachable", ws.reachable, "live_nodes",
			(json_int_t)ws.nodes));
	}
	return o;
}

static int m_stats_get(struct sg_ctl_server *s, json_t *params, json_t **res,
		       struct sg_rpc_err *err)
{
	struct sg_ctl_lcore_stats *ls = NULL;
	struct sg_ctl_job *jobs = NULL;
	struct sg_ctl_drop *drops = NULL;
	json_t *la = json_array(), *ja = json_array(), *da = json_object();
	int i, n;

	if (sg_rpc_no_params(params, err))
		goto bad;
	if (s->cfg.ops->lcores != NULL) {
		if ((n = sg_ctl_srv_lcores(s, &ls, err)) < 0)
			goto bad;
		for (i = 0; i < n; i++)
			json_array_append_new(la, lcore_json(&ls[i]));
	}
	if (s->cfg.ops->job_list != NULL) {
		if ((n = sg_ctl_srv_jobs(s, &jobs, err)) < 0)
			goto bad;
		for (i = 0; i < n; i++)
			json_array_append_new(ja, sg_ctl_srv_job_json(&jobs[i]));
	}
	if ((n = sg_ctl_srv_drops(s, &drops, err)) < 0)
		goto bad;
	for (i = 0; i < n; i++)
		json_object_set_new(da, drops[i].reason, json_integer((json_int_t)drops[i].count));
	free(drops);
	free(ls);
	free(jobs);
	*res = json_pack("{s:o, s:o, s:o, s:o, s:b}", "lcores", la, "jobs", ja, "drops", da,
			 "control", server_stats_json(s), "draining", s->draining);
	return 0;
bad:
	free(ls);
	free(jobs);
	json_decref(la);
	json_decref(ja);
	json_decref(da);
	return -1;
}
SG_RPC_REGISTER("stats_get", m_stats_get);

/* ---- the methods each node registers (sg_ctl_rpc.h) ---------------------- */

/*
 * A node that registers no handler of its own for one of these answers "not
 * supported" (sigma-udpd: no layout, drain or verbs); a method that takes no
 * params refuses some first, as a node's own handler would.
 */
static int m_not_supported(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct sg_rpc_err *err)
{
	(void)s;
	(void)params;
	(void)res;
	return sg_ctl_srv_not_supported(err);
}

static int m_not_supported_no_params(struct sg_ctl_server *s, json_t *params, json_t **res,
				     struct sg_rpc_err *err)
{
	if (sg_rpc_no_params(params, err))
		return -1;
	return m_not_supported(s, params, res, err);
}
SG_RPC_REGISTER("layout_get", m_not_supported_no_params);
SG_RPC_REGISTER("layout_set", m_not_supported);
SG_RPC_REGISTER("drain", m_not_supported_no_params);
SG_RPC_REGISTER("verbs_info", m_not_supported_no_params);
SG_RPC_REGISTER("verbs_rc_connect", m_not_supported);
SG_RPC_REGISTER("verbs_rc_disconnect", m_not_supported);

int sg_rpc_layout_get_answer(int rc, const struct sg_ctl_layout *lay, json_t **res,
			     struct sg_rpc_err *err)
{
	json_t *lc, *km;
	unsigned int i;

	if (rc != 0)
		return sg_rpc_fail_errno(err, "layout", rc, NULL);
	lc = json_array();
	for (i = 0; i < lay->n_lcores && i < SG_CTL_MAX_LCORES; i++)
		json_array_append_new(
			lc, json_pack("{s:I, s:s, s:i, s:s, s:i, s:i}", "lcore",
				      (json_int_t)lay->lcores[i].lcore, "role",
				      sg_role_name(lay->lcores[i].role), "numa",
				      lay->lcores[i].numa, "idle",
				      lay->lcores[i].idle == SG_IDLE_SLEEP ? "sleep" : "poll",
				      "port", lay->lcores[i].port, "queue", lay->lcores[i].queue));
	km = json_array();
	for (i = 0; i < SG_BUCKETS; i++)
		json_array_append_new(km, json_integer(lay->keymap[i]));
	*res = json_pack("{s:o, s:I, s:o}", "lcores", lc, "reducers",
			 (json_int_t)lay->n_reducers, "keymap", km);
	return 0;
}

static int parse_idle(json_t *arr, struct sg_ctl_layout_change *chg, struct sg_rpc_err *err)
{
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) > SG_CTL_MAX_LCORES)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: idle must be an array of {lcore, policy}");
	for (i = 0; i < json_array_size(arr); i++) {
		json_int_t lc;
		const char *pol;
		json_error_t jerr;

		if (json_unpack_ex(json_array_get(arr, i), &jerr, JSON_STRICT, "{s:I, s:s}",
				   "lcore", &lc, "policy", &pol) != 0)
			return sg_rpc_bad_params(err, &jerr);
		if (lc < 0 || lc >= 1024 || (strcmp(pol, "poll") != 0 && strcmp(pol, "sleep") != 0))
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: idle[%zu]: lcore 0..1023, policy poll|sleep",
					   i);
		chg->idle[i].lcore = (uint32_t)lc;
		chg->idle[i].idle = strcmp(pol, "sleep") == 0 ? SG_IDLE_SLEEP : SG_IDLE_POLL;
	}
	chg->n_idle = (uint32_t)i;
	return 0;
}

int sg_rpc_layout_set_parse(json_t *params, struct sg_ctl_layout_change *chg,
			    struct sg_rpc_err *err)
{
	const char *key;
	json_t *val;

	if (!json_is_object(params) || json_object_size(params) == 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: want an object with keymap and/or idle");
	/* Anything but the live-changeable subset is refused, with what to do instead. */
	json_object_foreach(params, key, val)
		if (strcmp(key, "keymap") != 0 && strcmp(key, "idle") != 0)
			return sg_rpc_fail(err, SG_CTL_ERR_REFUSED,
					   "'%.32s' cannot change live (only keymap and idle can); "
					   "change sigmad's config and restart it",
					   key);
	memset(chg, 0, sizeof(*chg));
	val = json_object_get(params, "keymap");
	if (val != NULL) {
		size_t i;

		if (!json_is_array(val) || json_array_size(val) != SG_BUCKETS)
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: keymap must list %d reducer indexes",
					   SG_BUCKETS);
		for (i = 0; i < SG_BUCKETS; i++) {
			json_t *e = json_array_get(val, i);

			if (!json_is_integer(e) || json_integer_value(e) < 0 ||
			    json_integer_value(e) >= SG_CTL_MAX_LCORES)
				return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
						   "invalid params: keymap[%zu] is not a reducer index",
						   i);
			chg->keymap[i] = (uint16_t)json_integer_value(e);
		}
		chg->has_keymap = true;
	}
	val = json_object_get(params, "idle");
	return val != NULL ? parse_idle(val, chg, err) : 0;
}

int sg_rpc_layout_set_answer(int rc, const char *reason, json_t **res, struct sg_rpc_err *err)
{
	if (rc != 0)
		return sg_rpc_fail_errno(err, "layout change refused", rc, reason);
	*res = json_true();
	return 0;
}

int sg_rpc_drain_answer(struct sg_ctl_server *s, int rc, json_t **res, struct sg_rpc_err *err)
{
	if (rc != 0)
		return sg_rpc_fail_errno(err, "drain", rc, NULL);
	s->draining = true;
	*res = json_pack("{s:b}", "draining", 1);
	return 0;
}

/* ---- verbs transport ------------------------------------------------------ */

int sg_ctl_gid_parse(const char *s, uint8_t gid[16])
{
	size_t len = s != NULL ? strlen(s) : 0;
	unsigned int n = 0;

	/* 32 digits, or 8 groups of 4 with a colon between each (39 characters) */
	if (len != 32 && len != 39)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int v;

		if (len == 39 && i % 5 == 4) {
			if (s[i] != ':')
				return -EINVAL;
			continue;
		}
		v = s[i] >= '0' && s[i] <= '9'	 ? s[i] - '0'
		    : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
		    : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
						 : -1;
		if (v < 0)
			return -EINVAL;
		if (n % 2 == 0)
			gid[n / 2] = (uint8_t)(v << 4);
		else
			gid[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 ? 0 : -EINVAL;
}

void sg_ctl_gid_format(const uint8_t gid[16], char out[40])
{
	for (unsigned int g = 0; g < 8; g++)
		snprintf(out + 5 * g, 6, "%02x%02x%s", gid[2 * g], gid[2 * g + 1], g < 7 ? ":" : "");
}

static json_t *rc_addr_json(const struct sg_ctl_verbs_rc_addr *a)
{
	char gid[40], addr[24];

	sg_ctl_gid_format(a->gid, gid);
	snprintf(addr, sizeof(addr), "0x%" PRIx64, a->addr);
	return json_pack("{s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I}", "qpn", (json_int_t)a->qpn,
			 "psn", (json_int_t)a->psn, "lid", (json_int_t)a->lid, "gid", gid, "addr",
			 addr, "rkey", (json_int_t)a->rkey, "slots", (json_int_t)a->slots, "stride",
			 (json_int_t)a->stride);
}

int sg_rpc_verbs_info_answer(int rc, const struct sg_ctl_verbs_info *vi, const char *reason,
			     json_t **res, struct sg_rpc_err *err)
{
	char gid[40];
	json_t *lc;

	if (rc != 0)
		return sg_rpc_fail_errno(err, "verbs info", rc, reason);
	lc = json_array();
	for (uint32_t i = 0; i < vi->n_lcores && i < SG_CTL_MAX_LCORES; i++)
		json_array_append_new(lc, json_pack("{s:I, s:s, s:I}", "lcore",
						    (json_int_t)vi->lcores[i].lcore, "role",
						    sg_role_name(vi->lcores[i].role), "qpn",
						    (json_int_t)vi->lcores[i].qpn));
	sg_ctl_gid_format(vi->gid, gid);
	*res = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:i, s:I, s:o}", "transport", "verbs",
			 "mode", vi->mode == SG_CTL_VERBS_RC ? "rc" : "ud", "qkey",
			 (json_int_t)vi->qkey, "msg_max", (json_int_t)vi->msg_max, "max_payload",
			 (json_int_t)vi->max_payload, "port", (json_int_t)vi->port, "gid", gid,
			 "gid_index", vi->gid_index, "lid", (json_int_t)vi->lid, "lcores", lc);
	if (*res != NULL && vi->mode == SG_CTL_VERBS_RC)
		json_object_set_new(*res, "rc",
				    json_pack("{s:I, s:I, s:I}", "slots", (json_int_t)vi->rc_slots,
					      "connected", (json_int_t)vi->rc_conns,
					      "max_connections", (json_int_t)vi->rc_max_conns));
	return 0;
}

/* An integer member of the RC params in [lo, hi], or fail naming it. */
static int rc_field(json_t *params, const char *name, bool need, json_int_t lo, json_int_t hi,
		    json_int_t *v, struct sg_rpc_err *err)
{
	json_t *j = json_object_get(params, name);

	if (j == NULL && !need)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: %s must be an integer in [%lld, %lld]%s", name,
				   (long long)lo, (long long)hi, j == NULL ? " (missing)" : "");
	*v = json_integer_value(j);
	return 0;
}

/* The worker's side of an RC connection from @p params; every member checked. */
static int rc_addr_parse(json_t *params, struct sg_ctl_verbs_rc_addr *a, struct sg_rpc_err *err)
{
	static const char *const known[] = {"qpn", "psn", "lid", "gid", "addr",
					    "rkey", "slots", "stride"};
	json_int_t qpn = 0, psn = 0, lid = 0, rkey = 0, slots = 0, stride = 0;
	json_t *gid, *addr;
	const char *key;
	json_t *val;

	if (!json_is_object(params))
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: want {qpn, psn, lid?, gid, addr, rkey, slots, stride}");
	json_object_foreach(params, key, val) {
		size_t i;

		for (i = 0; i < RTE_DIM(known) && strcmp(key, known[i]) != 0; i++)
			;
		if (i == RTE_DIM(known))
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: unknown member '%.32s'", key);
	}
	if (rc_field(params, "qpn", true, 1, 0xffffff, &qpn, err) ||
	    rc_field(params, "psn", true, 0, 0xffffff, &psn, err) ||
	    rc_field(params, "lid", false, 0, 0xffff, &lid, err) ||
	    rc_field(params, "rkey", true, 0, UINT32_MAX, &rkey, err) ||
	    rc_field(params, "slots", true, 1, SG_CTL_VERBS_MAX_SLOTS, &slots, err) ||
	    rc_field(params, "stride", true, 64, SG_CTL_VERBS_MAX_STRIDE, &stride, err))
		return -1;
	memset(a, 0, sizeof(*a));
	gid = json_object_get(params, "gid");
	if (!json_is_string(gid) || sg_ctl_gid_parse(json_string_value(gid), a->gid) != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: gid must be 32 hex digits, or 8 groups of 4 joined "
				   "by ':' (fe80:0000:...)%s", gid == NULL ? " (missing)" : "");
	addr = json_object_get(params, "addr");
	if (json_is_integer(addr) && json_integer_value(addr) > 0) {
		a->addr = (uint64_t)json_integer_value(addr);
	} else {
		const char *t = json_is_string(addr) ? json_string_value(addr) : "";
		uint64_t v = 0;

		/* a string only in hex, "0x" and up to 16 digits */
		if (t[0] != '0' || (t[1] != 'x' && t[1] != 'X') || strlen(t) > 18 ||
		    sg_parse_u64x(t, 1, UINT64_MAX, &v) != 0)
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: addr must be the ring's non-zero address, an "
					   "integer or a \"0x...\" string of up to 16 hex digits%s",
					   addr == NULL ? " (missing)" : "");
		a->addr = v;
	}
	a->qpn = (uint32_t)qpn;
	a->psn = (uint32_t)psn;
	a->lid = (uint16_t)lid;
	a->rkey = (uint32_t)rkey;
	a->slots = (uint32_t)slots;
	a->stride = (uint32_t)stride;
	return 0;
}

int sg_rpc_verbs_rc_connect_parse(struct sg_ctl_server *s, json_t *params,
				  struct sg_ctl_verbs_rc_addr *worker, struct sg_rpc_err *err)
{
	if (rc_addr_parse(params, worker, err) != 0)
		return -1;
	if (s->draining)
		return sg_rpc_fail(err, SG_CTL_ERR_REFUSED, "node is draining: no new connections");
	return 0;
}

int sg_rpc_verbs_rc_connect_answer(int peer, const struct sg_ctl_verbs_rc_addr *node,
				   const char *reason, json_t **res, struct sg_rpc_err *err)
{
	if (peer < 0)
		return sg_rpc_fail_errno(err, "RC connect refused", peer, reason);
	*res = json_pack("{s:I, s:o}", "peer", (json_int_t)peer, "node", rc_addr_json(node));
	return 0;
}

int sg_rpc_verbs_rc_disconnect_parse(json_t *params, uint32_t *peer, struct sg_rpc_err *err)
{
	json_int_t v = 0;

	if (!json_is_object(params) || json_object_size(params) != 1)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: want {peer}");
	if (rc_field(params, "peer", true, 0, UINT32_MAX, &v, err) != 0)
		return -1;
	*peer = (uint32_t)v;
	return 0;
}

int sg_rpc_verbs_rc_disconnect_answer(int rc, uint32_t peer, const char *reason, json_t **res,
				      struct sg_rpc_err *err)
{
	if (rc < 0)
		return sg_rpc_fail_errno(err, "RC disconnect refused", rc, reason);
	*res = json_pack("{s:I}", "peer", (json_int_t)peer);
	return 0;
}

/* ---- log level ------------------------------------------------------------ */

_Static_assert(SG_LOG_LEVEL_EMERG == RTE_LOG_EMERG && SG_LOG_LEVEL_DEBUG == RTE_LOG_DEBUG,
	       "sg_parse.h's log levels are rte_log's");

int sg_rpc_log_level_set_parse(json_t *params, const char **pattern, int *level,
			       struct sg_rpc_err *err)
{
	const char *lvname;
	json_error_t jerr;

	*pattern = "sigma.*";
	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s?s, s:s}", "pattern", pattern,
			   "level", &lvname) != 0)
		return params ? sg_rpc_bad_params(err, &jerr)
			      : sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need level");
	*level = sg_log_level_parse(lvname);
	if (*level < 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: level must be emerg|alert|crit|err|warning|notice|"
				   "info|debug");
	if ((*pattern)[0] == '\0' || strlen(*pattern) > 64)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: bad pattern");
	return 0;
}

int sg_rpc_log_level_set_answer(int rc, const char *pattern, int level, json_t **res,
				struct sg_rpc_err *err)
{
	if (rc != 0)
		return sg_rpc_fail_errno(err, "log level", rc < 0 ? rc : -EINVAL, NULL);
	*res = json_pack("{s:s, s:s}", "pattern", pattern, "level",
			 sg_log_level_name((unsigned int)level));
	return 0;
}

/* What a node without a handler of its own does: the process's rte_log levels. */
static int m_log_level_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct sg_rpc_err *err)
{
	const char *pattern;
	int lv;

	(void)s;
	if (sg_rpc_log_level_set_parse(params, &pattern, &lv, err) != 0)
		return -1;
	return sg_rpc_log_level_set_answer(rte_log_set_level_pattern(pattern, (uint32_t)lv),
					   pattern, lv, res, err);
}
SG_RPC_REGISTER("log_level_set", m_log_level_set);
