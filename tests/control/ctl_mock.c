/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A mock sigmad agent for the control-plane tests: the server's callbacks
 * (mock_ops) and the node's own methods, registered for servers made with
 * mock_ops as sigmad's agent registers its own (sg_ctl_rpc.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl_mock.h"
#include "sg_ctl_rpc.h"

const uint8_t mock_secret[32] = "sigma-test-secret-0123456789abcd";

static int mk_node_info(void *arg, struct sg_ctl_node_info *out)
{
	struct mock_agent *m = arg;

	snprintf(out->name, sizeof(out->name), "mock-node");
	out->n_cores = 2;
	out->n_numa = 1;
	out->n_ports = 1;
	snprintf(out->ports[0].name, sizeof(out->ports[0].name), "net_memif0");
	out->ports[0].speed_mbps = 100000;
	out->ports[0].numa = 0;
	out->n_reducers = 2;
	out->reducer_lcores[0] = 1;
	out->reducer_lcores[1] = 2;
	out->draining = m->draining;
	snprintf(out->addr, sizeof(out->addr), "10.0.0.9");
	out->udp_port = 9300;
	out->kind = SG_NODE_CPU;
	out->gbps = 100;
	out->max_chunk_bytes = MOCK_MAX_CHUNK;
	return 0;
}

static int mk_job_create(void *arg, struct sg_ctl_job *job, char *reason)
{
	struct mock_agent *m = arg;

	if (job->n_workers == 13) {
		snprintf(reason, SG_CTL_REASON_MAX, "13 workers: unlucky (mock refusal)");
		return -EPERM;
	}
	if (m->n_jobs == SG_CTL_MAX_JOBS)
		return -ENOSPC;
	if (job->chunk_bytes > MOCK_MAX_CHUNK) {
		snprintf(reason, SG_CTL_REASON_MAX, "chunk_bytes %u: at most %u", job->chunk_bytes,
			 MOCK_MAX_CHUNK);
		return -EINVAL;
	}
	for (unsigned int i = 0; job->id != 0 && i < m->n_jobs; i++)
		if (m->jobs[i].id == job->id)
			return -EEXIST;
	if (job->id == 0)
		job->id = ++m->next_id;
	if (job->chunk_bytes == 0)
		job->chunk_bytes = MOCK_MAX_CHUNK;
	if (job->open) {
		/* as sigmad: the default budget, on each of the mock's 2 reducers */
		job->slots = job->slots ? job->slots : SG_OPEN_SLOTS_DEFAULT;
		job->slots_budget = 2ull * job->slots;
	}
	m->last_n_keys = job->n_keys;
	for (unsigned int k = 0; k < job->n_keys && k < MOCK_KEYS; k++)
		m->last_keys[k] = job->keys[k];
	snprintf(m->last_token, sizeof(m->last_token), "%s", job->token);
	m->jobs[m->n_jobs] = *job;
	m->jobs[m->n_jobs].tensors = NULL;
	m->jobs[m->n_jobs].keys = NULL;
	m->jobs[m->n_jobs].token[0] = '\0';
	m->jobs[m->n_jobs].rounds_completed = 1000 + job->id;
	m->n_jobs++;
	return 0;
}

static int mk_job_list(void *arg, struct sg_ctl_job *out, unsigned int cap)
{
	struct mock_agent *m = arg;
	unsigned int i;

	for (i = 0; i < m->n_jobs && i < cap; i++)
		out[i] = m->jobs[i];
	for (; i < m->n_jobs + m->extra_jobs && i < cap; i++)
		out[i] = (struct sg_ctl_job){.id = 5000 + i - m->n_jobs, .n_workers = 2,
					     .rounds_completed = i};
	return (int)i;
}

static int mk_job_destroy(void *arg, uint32_t id)
{
	struct mock_agent *m = arg;
	unsigned int i;

	for (i = 0; i < m->n_jobs; i++)
		if (m->jobs[i].id == id) {
			m->jobs[i] = m->jobs[--m->n_jobs];
			return 0;
		}
	return -ENOENT;
}

static int mk_lcores(void *arg, struct sg_ctl_lcore_stats *out, unsigned int cap)
{
	struct mock_agent *m = arg;
	unsigned int i;

	for (i = 0; i < MOCK_LCORES && i < cap; i++) {
		out[i] = (struct sg_ctl_lcore_stats){
			.lcore = m->layout.lcores[i].lcore,
			.role = m->layout.lcores[i].role,
			.numa = 0,
			.idle = m->layout.lcores[i].idle,
			.busy_cycles = 1000000u * (i + 1),
			.idle_cycles = 500000u,
			.packets = 111u * (i + 1),
			.bytes_summed = 4096u * (i + 1),
			.drops = i,
			.busy_pct = 50.0 + i,
			.mpps = 1.5 * i,
			.gbps_summed = 10.0 * i,
			.ring = 3u * i,
		};
	}
	return (int)i;
}

static int mk_layout_get(struct sg_ctl_server *s, json_t *params, json_t **res,
			 struct sg_rpc_err *err)
{
	struct mock_agent *m = sg_rpc_node(s);

	if (sg_rpc_no_params(params, err))
		return -1;
	return sg_rpc_layout_get_answer(0, &m->layout, res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "layout_get", mk_layout_get);

static int mk_layout_change(struct mock_agent *m, const struct sg_ctl_layout_change *chg,
			    char *reason)
{
	unsigned int i, j;

	if (chg->has_keymap)
		for (i = 0; i < SG_BUCKETS; i++)
			if (chg->keymap[i] >= m->layout.n_reducers) {
				snprintf(reason, SG_CTL_REASON_MAX,
					 "keymap[%u] = %u but there are %u reducers", i,
					 chg->keymap[i], m->layout.n_reducers);
				return -EINVAL;
			}
	for (i = 0; i < chg->n_idle; i++) {
		for (j = 0; j < m->layout.n_lcores; j++)
			if (m->layout.lcores[j].lcore == chg->idle[i].lcore)
				break;
		if (j == m->layout.n_lcores) {
			snprintf(reason, SG_CTL_REASON_MAX, "lcore %u is not in the layout",
				 chg->idle[i].lcore);
			return -EINVAL;
		}
	}
	if (chg->has_keymap)
		memcpy(m->layout.keymap, chg->keymap, sizeof(chg->keymap));
	for (i = 0; i < chg->n_idle; i++)
		for (j = 0; j < m->layout.n_lcores; j++)
			if (m->layout.lcores[j].lcore == chg->idle[i].lcore)
				m->layout.lcores[j].idle = chg->idle[i].idle;
	m->layout_changes++;
	return 0;
}

static int mk_layout_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			 struct sg_rpc_err *err)
{
	struct sg_ctl_layout_change chg;
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_layout_set_parse(params, &chg, err) != 0)
		return -1;
	return sg_rpc_layout_set_answer(mk_layout_change(sg_rpc_node(s), &chg, reason), reason,
					res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "layout_set", mk_layout_set);

static int mk_drain(struct sg_ctl_server *s, json_t *params, json_t **res, struct sg_rpc_err *err)
{
	struct mock_agent *m = sg_rpc_node(s);

	if (sg_rpc_no_params(params, err))
		return -1;
	m->draining = true;
	return sg_rpc_drain_answer(s, 0, res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "drain", mk_drain);

/* The level is only recorded: the test process's rte_log stays as it is. */
static int mk_log_level_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			    struct sg_rpc_err *err)
{
	struct mock_agent *m = sg_rpc_node(s);
	const char *pattern;
	int lv;

	if (sg_rpc_log_level_set_parse(params, &pattern, &lv, err) != 0)
		return -1;
	m->last_log_level = lv;
	return sg_rpc_log_level_set_answer(0, pattern, lv, res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "log_level_set", mk_log_level_set);

static int mk_verbs_refuse(const struct mock_agent *m, char *reason)
{
	if (m->verbs_kind != 2)
		return 0;
	snprintf(reason, SG_CTL_REASON_MAX, "this node runs the DPDK transport (mock)");
	return -ENOTSUP;
}

static int mk_verbs_info(struct mock_agent *m, struct sg_ctl_verbs_info *out, char *reason)
{
	int rc = mk_verbs_refuse(m, reason);

	if (rc != 0)
		return rc;
	out->mode = m->verbs_kind == 0 ? SG_CTL_VERBS_RC : SG_CTL_VERBS_UD;
	out->qkey = 0x53470001;
	out->msg_max = 4096;
	out->max_payload = 4040;
	out->port = 1;
	out->gid[0] = 0xfe;
	out->gid[1] = 0x80;
	out->gid[15] = 0x2a;
	out->gid_index = 3;
	out->lid = 7;
	out->rc_slots = 64;
	out->rc_conns = m->rc_calls;
	out->rc_max_conns = 16;
	out->n_lcores = 2;
	out->lcores[0].lcore = 1;
	out->lcores[0].role = SG_ROLE_RTC;
	out->lcores[0].qpn = 0x1234;
	out->lcores[1].lcore = 3;
	out->lcores[1].role = SG_ROLE_REDUCE;
	out->lcores[1].qpn = 0xabcdef;
	return 0;
}

static int mk_verbs_info_m(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct sg_rpc_err *err)
{
	struct sg_ctl_verbs_info vi = {0};
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_no_params(params, err))
		return -1;
	return sg_rpc_verbs_info_answer(mk_verbs_info(sg_rpc_node(s), &vi, reason), &vi, reason,
					res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "verbs_info", mk_verbs_info_m);

static int mk_verbs_rc_connect(struct mock_agent *m, const struct sg_ctl_verbs_rc_addr *worker,
			       struct sg_ctl_verbs_rc_addr *node, char *reason)
{
	int rc = mk_verbs_refuse(m, reason);

	if (rc != 0)
		return rc;
	if (m->verbs_kind == 1) {
		snprintf(reason, SG_CTL_REASON_MAX, "this node runs [verbs] mode = ud (mock)");
		return -ENOTSUP;
	}
	m->last_worker = *worker;
	*node = (struct sg_ctl_verbs_rc_addr){.qpn = 0x200 + m->rc_calls, .psn = 0xabcde,
					      .lid = 7, .addr = 0xffff800000001000ull,
					      .rkey = 0xdeadbeef, .slots = 64, .stride = 4096};
	node->gid[0] = 0xfe;
	node->gid[1] = 0x80;
	node->gid[15] = 0x2a;
	return (int)m->rc_calls++;
}

static int mk_verbs_rc_connect_m(struct sg_ctl_server *s, json_t *params, json_t **res,
				 struct sg_rpc_err *err)
{
	struct sg_ctl_verbs_rc_addr worker, node = {0};
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_verbs_rc_connect_parse(s, params, &worker, err) != 0)
		return -1;
	return sg_rpc_verbs_rc_connect_answer(mk_verbs_rc_connect(sg_rpc_node(s), &worker, &node,
								  reason),
					      &node, reason, res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "verbs_rc_connect", mk_verbs_rc_connect_m);

/* Peer ids are those connect handed out (rc_calls so far), each closed once. */
static int mk_verbs_rc_disconnect(struct mock_agent *m, uint32_t peer, char *reason)
{
	int rc = mk_verbs_refuse(m, reason);

	if (rc != 0)
		return rc;
	m->disc_calls++;
	if (peer >= m->rc_calls || peer >= 64 || (m->closed >> peer & 1)) {
		snprintf(reason, SG_CTL_REASON_MAX, "no open connection with peer id %u (mock)",
			 peer);
		return -ENOENT;
	}
	m->closed |= 1ull << peer;
	return 0;
}

static int mk_verbs_rc_disconnect_m(struct sg_ctl_server *s, json_t *params, json_t **res,
				    struct sg_rpc_err *err)
{
	char reason[SG_CTL_REASON_MAX] = "";
	uint32_t peer;

	if (sg_rpc_verbs_rc_disconnect_parse(params, &peer, err) != 0)
		return -1;
	return sg_rpc_verbs_rc_disconnect_answer(mk_verbs_rc_disconnect(sg_rpc_node(s), peer,
									reason),
						 peer, reason, res, err);
}
SG_RPC_NODE_REGISTER(&mock_ops, "verbs_rc_disconnect", mk_verbs_rc_disconnect_m);

/* Two drop reasons, the second with a name at the field's limit (47 characters). */
static int mk_drops(void *arg, struct sg_ctl_drop *out, unsigned int cap)
{
	(void)arg;
	if (cap < 2)
		return -ENOSPC;
	snprintf(out[0].reason, sizeof(out[0].reason), "engine_short");
	out[0].count = 7;
	memset(out[1].reason, 'x', sizeof(out[1].reason)); /* not NUL-terminated: cut */
	out[1].count = 0;
	return 2;
}

/* job_keys_add: the keys as the server gave them (their sizes are its), all new. */
static int mk_job_keys_add(void *arg, uint32_t id, const struct sg_ctl_key *keys, uint32_t n,
			   char *reason)
{
	struct mock_agent *m = arg;

	(void)id;
	(void)reason;
	m->keys_add_calls++;
	m->last_n_keys = n;
	memcpy(m->last_keys, keys, (n < MOCK_KEYS ? n : MOCK_KEYS) * sizeof(*keys));
	return (int)n;
}

const struct sg_ctl_agent_ops mock_ops = {
	.job_keys_add = mk_job_keys_add,
	.drops = mk_drops,
	.node_info = mk_node_info,
	.job_create = mk_job_create,
	.job_list = mk_job_list,
	.job_destroy = mk_job_destroy,
	.lcores = mk_lcores,
};

void mock_init(struct mock_agent *m)
{
	static const uint32_t roles[MOCK_LCORES] = {SG_ROLE_CONTROL, SG_ROLE_REDUCE,
						    SG_ROLE_REDUCE, SG_ROLE_IO};
	unsigned int i;

	memset(m, 0, sizeof(*m));
	m->layout.n_lcores = MOCK_LCORES;
	for (i = 0; i < MOCK_LCORES; i++) {
		m->layout.lcores[i].lcore = i;
		m->layout.lcores[i].role = roles[i];
		m->layout.lcores[i].port = roles[i] == SG_ROLE_IO ? 0 : -1;
		m->layout.lcores[i].queue = roles[i] == SG_ROLE_IO ? 0 : -1;
	}
	m->layout.n_reducers = 2;
	for (i = 0; i < SG_BUCKETS; i++)
		m->layout.keymap[i] = i % 2;
}

void mock_config(struct sg_ctl_server_config *cfg, struct mock_agent *m, const char *unix_path)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->tcp_addr = "127.0.0.1";
	cfg->unix_path = unix_path;
	cfg->secret = mock_secret;
	cfg->secret_len = sizeof(mock_secret);
	cfg->metrics_enable = true;
	cfg->max_frame = 4096;
	cfg->max_conns = 16;
	cfg->idle_timeout_ms = 1500;
	cfg->frame_timeout_ms = 300;
	cfg->auth_timeout_ms = 800;
	cfg->heartbeat_timeout_ms = 60000;
	cfg->ops = &mock_ops;
	cfg->ops_arg = m;
}
