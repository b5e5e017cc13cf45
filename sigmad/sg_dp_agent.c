/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's control agent: the JSON-RPC server of control/ (sg_ctl_server.h) with
 * struct sg_ctl_agent_ops implemented over the running pipeline and the node's
 * own methods (layout, drain, verbs; sg_ctl_rpc.h) registered beside the code
 * they run, the optional node_heartbeat sender, and the node's registration in
 * etcd. Nothing below the agent calls into it: sigmad and the tests start it
 * over a running pipeline (sg_dp_agent.h).
 *
 * Threading: every ops callback and method runs on the server's thread;
 * heartbeats on a thread of their own. The agent changes the pipeline only
 * through sg_dp_pipeline.h's control functions (jobs, keys, idle policies, key
 * moves, drain), which reach the lcores over their channels; it keeps the
 * jobs' descriptions (the control plane's view: tensors, nodes, keys) itself.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_telemetry.h>

#include "sg_etcd.h"
#include "sg_config.h"
#include "sg_ctl_rpc.h"
#include "sg_ctl_server.h"
#include "sg_dp_ctl_job.h"
#include "sg_dp_agent.h"
#include "sg_dp_pipeline.h"
#if SG_HAVE_VERBS
#include "sg_dp_verbs.h"
#endif

/* The agent's log (logtype sigma.agent); the macro ends the line: no "\n" in @p fmt. */
RTE_LOG_REGISTER(sg_agent_logtype, sigma.agent, INFO);
#define SG_AGENT_LOG(lvl, fmt, ...) \
	rte_log(RTE_LOG_##lvl, sg_agent_logtype, "sigmad: " fmt "\n", ##__VA_ARGS__)

#define AGENT_MAX_KEYS (1u << 20)

/* The server's callbacks (defined below); the node's methods are registered for it. */
static const struct sg_ctl_agent_ops agent_ops;

struct agent_job {
	bool used;
	uint32_t id;
	uint32_t workers;
	enum sg_dtype dtype;
	enum sg_mode mode;
	uint32_t partition_bytes;
	uint32_t n_tensors;
	uint32_t n_keys;
	uint32_t n_nodes;
	uint32_t chunk_bytes;
	struct sg_dp_key *keys; /* wire id and elements of each key (the chunks a key move tracks) */
	bool open;		/* an open job: no keys here; the engines make them */
	uint32_t slots;		/* ... and the chunk slots each engine may give them */
	uint64_t token;		/* the wire token (a key move tracks an open job's pushes) */
	bool auth;		/* auth = mac: the MAC key below goes to every engine that */
	uint8_t auth_key[32];	/* ... takes the job, also in a key move */
};

struct sg_dp_agent {
	struct sg_dp_pipeline *p;
	struct sg_dp_agent_conf ac;
	struct sg_dp_cluster_cfg cluster; /* [cluster] as at start (etcd "": none) */
	struct sg_ctl_server *srv;
	struct agent_job *jobs; /* max_jobs entries: as many as the engines hold */
	unsigned int max_jobs;
	uint32_t next_id;
	/* rates of lcores_get: counters at the previous call */
	uint64_t prev_tsc;
	struct sg_dp_lcore_stats prev[SG_DP_MAX_LAYOUT];
	struct sg_etcd_reg *etcd_reg; /* [cluster]: the node's registration, or NULL */
	/* heartbeats */
	const uint8_t *secret;
	size_t secret_len;
	pthread_t hb_thread;
	pthread_mutex_t hb_lock; /* a->ac: SIGHUP writes it, the heartbeat and server threads read */
	bool hb_running;
	volatile bool hb_stop;
	uint64_t hb_sent, hb_failed;
	/* the heartbeat thread's own: in a run of failures, and how long a one */
	bool hb_failing;
	uint64_t hb_fail_run;
};

/* ---- ops ---------------------------------------------------------------- */

static uint32_t node_max_chunk(const struct sg_dp_pipeline *p)
{
	struct sg_dp_pipeline_limits lim;

	sg_dp_pipeline_limits(p, &lim);
	return lim.max_chunk;
}

static bool draining(const struct sg_dp_pipeline *p)
{
	struct sg_dp_pipeline_layout lay;

	sg_dp_pipeline_layout(p, &lay);
	return lay.draining;
}

static int op_node_info(void *arg, struct sg_ctl_node_info *out)
{
	struct sg_dp_agent *a = arg;
	struct sg_dp_pipeline *p = a->p;
	const struct sg_dp_config *c = sg_dp_pipeline_config(p);
	struct sg_dp_pipeline_layout lay;
	unsigned int lcore;
	bool node_seen[RTE_MAX_NUMA_NODES] = {false};

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&a->hb_lock);
	snprintf(out->name, sizeof(out->name), "%s", a->ac.name);
	out->kind = a->ac.kind;
	out->gbps = a->ac.gbps;
	pthread_mutex_unlock(&a->hb_lock);
	if (c->ip != 0)
		snprintf(out->addr, sizeof(out->addr), "%u.%u.%u.%u", c->ip >> 24,
			 (c->ip >> 16) & 0xff, (c->ip >> 8) & 0xff, c->ip & 0xff);
	out->udp_port = c->udp_port;
	out->max_chunk_bytes = node_max_chunk(p);
	sg_dp_pipeline_layout(p, &lay);
	RTE_LCORE_FOREACH(lcore) {
		unsigned int s = rte_lcore_to_socket_id(lcore);

		out->n_cores++;
		if (s < RTE_MAX_NUMA_NODES && !node_seen[s]) {
			node_seen[s] = true;
			out->n_numa++;
		}
	}
	for (unsigned int i = 0; i < lay.n_ports && out->n_ports < SG_CTL_MAX_PORTS; i++) {
		struct sg_ctl_port_info *pi = &out->ports[out->n_ports];
		uint16_t port = lay.ports[i];
		struct rte_eth_link link;

		if (!rte_eth_dev_is_valid_port(port))
			continue;
		if (rte_eth_dev_get_name_by_port(port, pi->name) != 0)
			snprintf(pi->name, sizeof(pi->name), "port%u", port);
		pi->name[sizeof(pi->name) - 1] = '\0';
		if (rte_eth_link_get_nowait(port, &link) == 0 &&
		    link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
			pi->speed_mbps = link.link_speed;
		pi->numa = rte_eth_dev_socket_id(port);
		out->n_ports++;
	}
	for (unsigned int r = 0; r < lay.n_reducers && r < SG_CTL_MAX_LCORES; r++)
		out->reducer_lcores[out->n_reducers++] = lay.reducer_lcores[r];
	out->draining = lay.draining;
	return 0;
}

static struct agent_job *job_find(struct sg_dp_agent *a, uint32_t id)
{
	for (unsigned int i = 0; i < a->max_jobs; i++)
		if (a->jobs[i].used && a->jobs[i].id == id)
			return &a->jobs[i];
	return NULL;
}

static struct agent_job *job_slot(struct sg_dp_agent *a)
{
	for (unsigned int i = 0; i < a->max_jobs; i++)
		if (!a->jobs[i].used)
			return &a->jobs[i];
	return NULL;
}

static bool refuse_during_move(const struct sg_dp_agent *a, char *reason)
{
	unsigned int n = sg_dp_pipeline_moves_pending(a->p);

	if (n == 0)
		return false;
	snprintf(reason, SG_CTL_REASON_MAX, "a key move is in progress (%u chunk(s) before their "
		 "round boundary): retry when layout shows the new keymap", n);
	return true;
}

/* The engine's form of job @p j (its keys are the agent's: valid while @p j is). */
static struct sg_dp_job_conf job_conf(const struct agent_job *j)
{
	return (struct sg_dp_job_conf){
		.id = j->id, .nworkers = j->workers, .token = j->token, .dtype = j->dtype,
		.mode = j->mode, .partition_bytes = j->partition_bytes,
		.chunk_bytes = j->chunk_bytes, .keys = j->open ? NULL : j->keys,
		.nkeys = j->open || j->keys == NULL ? 0 : j->n_keys, .open = j->open,
		.slots = j->slots, .auth_key = j->auth ? j->auth_key : NULL};
}

/*
 * Every job the node holds, as a key move needs them (sg_dp_pipeline_keymap_set()),
 * into *@p out (free() it). @return how many, or -ENOMEM.
 */
static int jobs_conf(const struct sg_dp_agent *a, struct sg_dp_job_conf **out)
{
	unsigned int n = 0;

	*out = calloc(a->max_jobs ? a->max_jobs : 1, sizeof(**out));
	if (*out == NULL)
		return -ENOMEM;
	for (unsigned int i = 0; i < a->max_jobs; i++)
		if (a->jobs[i].used)
			(*out)[n++] = job_conf(&a->jobs[i]);
	return (int)n;
}

static int op_job_create(void *arg, struct sg_ctl_job *job, char *reason)
{
	struct sg_dp_agent *a = arg;
	/* dtype any: each key's own, and chunk_bytes is a multiple of 8, so of every size */
	size_t es = job->open && job->dtype == SG_DTYPE_ANY ? 1 : sg_dtype_size(job->dtype);
	struct sg_dp_pipeline_limits lim;
	struct sg_dp_job_conf jc;
	struct sg_dp_key *keys;
	struct agent_job *aj;
	uint64_t token = 0;
	uint32_t id = job->id, max_chunk;
	int rc = 0;

	sg_dp_pipeline_limits(a->p, &lim);
	max_chunk = lim.max_chunk;
	if (draining(a->p)) {
		snprintf(reason, SG_CTL_REASON_MAX, "the node is draining: no new jobs");
		return -EBUSY;
	}
	if (refuse_during_move(a, reason))
		return -EBUSY;
	if ((unsigned int)job->mode >= SG_MODE_COUNT) {
		snprintf(reason, SG_CTL_REASON_MAX, "unknown mode");
		return -EINVAL;
	}
	if (es == 0 || job->partition_bytes < es || job->n_workers == 0 ||
	    job->n_workers > SG_MAX_WORKERS) {
		snprintf(reason, SG_CTL_REASON_MAX, "need 1..%d workers and a partition of at least "
			 "one element", SG_MAX_WORKERS);
		return -EINVAL;
	}
	if (job->n_keys > AGENT_MAX_KEYS) {
		snprintf(reason, SG_CTL_REASON_MAX, "%u partitions on this node: at most %u (raise "
			 "partition_bytes)", job->n_keys, AGENT_MAX_KEYS);
		return -EINVAL;
	}
	if (job->chunk_bytes > sg_dp_ctl_max_chunk(job, max_chunk) || job->chunk_bytes % es != 0) {
		snprintf(reason, SG_CTL_REASON_MAX, "chunk_bytes %u: this node takes at most %u "
			 "(its [net] mtu and engine buffers%s), in multiples of the element size",
			 job->chunk_bytes, sg_dp_ctl_max_chunk(job, max_chunk),
			 job->auth ? ", less a MAC's 32 bytes" : "");
		return -EINVAL;
	}
	if (id != 0 && job_find(a, id) != NULL) {
		snprintf(reason, SG_CTL_REASON_MAX, "job id %u is in use on this node", id);
		return -EEXIST;
	}
	aj = job_slot(a);
	if (aj == NULL) {
		snprintf(reason, SG_CTL_REASON_MAX, "%u jobs already: destroy one first",
			 a->max_jobs);
		return -ENOSPC;
	}
	if (id == 0) {
		while (a->next_id == 0 || job_find(a, a->next_id) != NULL)
			a->next_id++;
		id = a->next_id++;
	}
	/* keys: placed and numbered by the control plane (sg_wire_key(tensor, part)) */
	keys = malloc((job->n_keys ? job->n_keys : 1) * sizeof(*keys));
	if (keys == NULL)
		return -ENOMEM;
	sg_dp_keys_from_ctl(job->keys, job->n_keys, keys);
	token = sg_ctl_wire_token(job->token);
	jc = sg_dp_job_from_ctl(job, id, token, max_chunk, keys, job->n_keys);
	/* a node the placement gave no key keeps the job (listed, destroyed) but no engine does;
	 * an open job is on every engine: its keys go where the keymap sends their pushes */
	if (job->n_keys > 0 || job->open)
		rc = sg_dp_pipeline_job_add(a->p, &jc);
	if (rc < 0) {
		free(keys);
		snprintf(reason, SG_CTL_REASON_MAX, "a reducer refused the job: %s", strerror(-rc));
		return rc;
	}
	*aj = (struct agent_job){.used = true, .id = id, .workers = job->n_workers,
				 .dtype = job->dtype, .mode = job->mode,
				 .partition_bytes = job->partition_bytes,
				 .n_tensors = job->n_tensors, .n_keys = job->n_keys,
				 .n_nodes = job->n_nodes ? job->n_nodes : 1,
				 .chunk_bytes = jc.chunk_bytes, .keys = keys,
				 .open = job->open, .slots = jc.slots, .token = token,
				 .auth = job->auth};
	memcpy(aj->auth_key, job->auth_key, sizeof(aj->auth_key));
	job->id = id;
	job->chunk_bytes = aj->chunk_bytes;
	job->slots = aj->slots;
	job->slots_budget = (uint64_t)aj->slots * lim.engines;
	if (job->open)
		SG_AGENT_LOG(INFO, "job %u created by the control plane: open (its pushes make its "
			  "keys), %u workers, %s, %s, %u chunk slots on each of %u reducer(s), "
			  "%u-byte chunks", id, job->n_workers, sg_dtype_name(job->dtype),
			  sg_mode_name(job->mode), aj->slots, lim.engines, aj->chunk_bytes);
	else
		SG_AGENT_LOG(INFO, "job %u created by the control plane: %u workers, %s, %s, %u of its "
			  "partitions here (%u node(s)), %u-byte chunks", id, job->n_workers,
			  sg_dtype_name(job->dtype), sg_mode_name(job->mode), job->n_keys,
			  aj->n_nodes, aj->chunk_bytes);
	return 0;
}

static int op_job_list(void *arg, struct sg_ctl_job *out, unsigned int cap)
{
	struct sg_dp_agent *a = arg;
	struct sg_dp_jobs_table t;
	unsigned int n = 0;
	int nj = sg_dp_pipeline_jobs_stats(a->p, &t);

	if (nj < 0) {
		sg_dp_jobs_table_free(&t);
		return nj;
	}
	for (unsigned int i = 0; i < a->max_jobs && n < cap; i++) {
		const struct agent_job *j = &a->jobs[i];

		if (!j->used)
			continue;
		out[n] = (struct sg_ctl_job){.id = j->id, .n_workers = j->workers, .dtype = j->dtype,
					     .mode = j->mode, .partition_bytes = j->partition_bytes,
					     .n_tensors = j->n_tensors, .chunk_bytes = j->chunk_bytes,
					     .n_keys = j->n_keys, .n_nodes = j->n_nodes,
					     .open = j->open, .slots = j->slots};
		for (int k = 0; k < nj; k++)
			if (t.ids[k] == j->id) {
				out[n].rounds_completed = t.st[k].rounds_completed;
				out[n].retransmits = t.st[k].retransmits_served;
				out[n].incomplete = t.st[k].incomplete_slots;
				out[n].nacks = t.st[k].nacks_sent;
				out[n].drops = t.st[k].drops;
				out[n].bytes_pushed = t.st[k].rx_bytes;
				out[n].slots_used = t.st[k].slots_used;
				out[n].slots_budget = t.st[k].slots;
				/* an open job's keys: made by its pushes, on the reducers they reach */
				if (j->open)
					out[n].n_keys = (uint32_t)t.st[k].keys;
			}
		n++;
	}
	sg_dp_jobs_table_free(&t);
	return (int)n;
}

static int op_job_destroy(void *arg, uint32_t id)
{
	struct sg_dp_agent *a = arg;
	struct agent_job *j = job_find(a, id);
	char reason[SG_CTL_REASON_MAX];

	if (j == NULL)
		return -ENOENT;
	/* a move waits for the job's chunks to cross a round boundary */
	if (refuse_during_move(a, reason)) {
		SG_AGENT_LOG(WARNING, "job %u not destroyed: %s", id, reason);
		return -EBUSY;
	}
	sg_dp_pipeline_job_remove(a->p, id);
	free(j->keys);
	j->keys = NULL;
	j->used = false;
	explicit_bzero(j->auth_key, sizeof(j->auth_key));
	SG_AGENT_LOG(INFO, "job %u destroyed by the control plane", id);
	return 0;
}

static int op_lcores(void *arg, struct sg_ctl_lcore_stats *out, unsigned int cap)
{
	struct sg_dp_agent *a = arg;
	struct sg_dp_pipeline *p = a->p;
	uint64_t now = rte_rdtsc();
	double dt = a->prev_tsc ? (double)(now - a->prev_tsc) / (double)rte_get_tsc_hz() : 0;
	unsigned int n = 0;

	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(p) && n < cap; i++) {
		struct sg_dp_lcore_stats st, *pv = &a->prev[i];
		struct sg_ctl_lcore_stats *o = &out[n++];
		uint64_t busy, tot;

		sg_dp_pipeline_lcore_stats(p, i, &st);
		*o = (struct sg_ctl_lcore_stats){
			.lcore = st.lcore, .role = st.role, .numa = st.socket,
			.idle = st.idle,
			.busy_cycles = st.busy_cycles, .idle_cycles = st.idle_cycles,
			.packets = st.rx_pkts + st.handoff_pkts, .bytes_summed = st.bytes_summed,
			.ring = st.ring_count};
		o->drops = sg_dp_lcore_drops(&st, NULL);
		/* rates over the interval since the previous call, busy% like telemetry */
		busy = st.busy_cycles - (dt > 0 ? pv->busy_cycles : 0);
		tot = busy + st.idle_cycles - (dt > 0 ? pv->idle_cycles : 0);
		o->busy_pct = tot ? 100.0 * (double)busy / (double)tot : 0;
		if (dt > 0) {
			o->mpps = (double)(st.rx_pkts - pv->rx_pkts) / dt / 1e6;
			o->gbps_summed = (double)(st.bytes_summed - pv->bytes_summed) * 8 / dt / 1e9;
		}
		*pv = st;
	}
	a->prev_tsc = now;
	return (int)n;
}

/* layout_set's keymap: every job the node holds goes with it (a move tracks their chunks) */
static int keymap_change(struct sg_dp_agent *a, const uint16_t *want, char *reason)
{
	struct sg_dp_job_conf *jobs;
	int n = jobs_conf(a, &jobs), rc;

	if (n < 0)
		return n;
	rc = sg_dp_pipeline_keymap_set(a->p, want, jobs, (unsigned int)n, reason,
				       SG_CTL_REASON_MAX);
	free(jobs);
	return rc < 0 ? rc : 0;
}

static int layout_get(struct sg_dp_agent *a, struct sg_ctl_layout *out)
{
	struct sg_dp_pipeline_layout lay;

	sg_dp_pipeline_layout(a->p, &lay);
	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < lay.n_lcores && i < SG_CTL_MAX_LCORES; i++) {
		const struct sg_dp_pipeline_lcore *lc = &lay.lcores[i];

		out->lcores[i].lcore = lc->lcore;
		out->lcores[i].role = lc->role;
		out->lcores[i].numa = lc->socket;
		out->lcores[i].idle = lc->idle;
		out->lcores[i].port = lc->port;
		out->lcores[i].queue = lc->queue;
		out->n_lcores++;
	}
	out->n_reducers = lay.n_reducers;
	memcpy(out->keymap, lay.keymap, sizeof(out->keymap));
	return 0;
}

static int m_layout_get(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct sg_rpc_err *err)
{
	struct sg_ctl_layout lay;

	if (sg_rpc_no_params(params, err))
		return -1;
	return sg_rpc_layout_get_answer(layout_get(sg_rpc_node(s), &lay), &lay, res, err);
}
SG_RPC_NODE_REGISTER(&agent_ops, "layout_get", m_layout_get);

static bool in_layout(const struct sg_dp_pipeline_layout *lay, uint32_t lcore)
{
	for (unsigned int i = 0; i < lay->n_lcores; i++)
		if (lay->lcores[i].lcore == lcore)
			return true;
	return false;
}

static int layout_change(struct sg_dp_agent *a, const struct sg_ctl_layout_change *chg,
			 char *reason)
{
	struct sg_dp_pipeline_layout lay;

	sg_dp_pipeline_layout(a->p, &lay);
	if (chg->has_keymap) {
		for (unsigned int b = 0; b < SG_BUCKETS; b++)
			if (chg->keymap[b] >= RTE_MAX(lay.n_reducers, 1u)) {
				snprintf(reason, SG_CTL_REASON_MAX, "no reducer %u (there are %u)",
					 chg->keymap[b], lay.n_reducers);
				return -EINVAL;
			}
	}
	/* check every lcore before changing any: all or nothing */
	for (uint32_t i = 0; i < chg->n_idle; i++)
		if (!in_layout(&lay, chg->idle[i].lcore)) {
			snprintf(reason, SG_CTL_REASON_MAX, "lcore %u is not in sigmad's layout",
				 chg->idle[i].lcore);
			return -EINVAL;
		}
	for (uint32_t i = 0; i < chg->n_idle; i++) {
		int rc = sg_dp_pipeline_idle_set(a->p, chg->idle[i].lcore, chg->idle[i].idle);

		if (rc < 0) {
			snprintf(reason, SG_CTL_REASON_MAX, "lcore %u did not answer: %s",
				 chg->idle[i].lcore, strerror(-rc));
			return rc;
		}
	}
	return chg->has_keymap ? keymap_change(a, chg->keymap, reason) : 0;
}

static int m_layout_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct sg_rpc_err *err)
{
	struct sg_ctl_layout_change chg;
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_layout_set_parse(params, &chg, err) != 0)
		return -1;
	return sg_rpc_layout_set_answer(layout_change(sg_rpc_node(s), &chg, reason), reason, res,
					err);
}
SG_RPC_NODE_REGISTER(&agent_ops, "layout_set", m_layout_set);

/*
 * Drain (sg_dp_pipeline_drain()): in-flight rounds finish, later ones are
 * refused with the counted drop "draining", and no job is created.
 */
static int drain(struct sg_dp_agent *a)
{
	struct sg_dp_job_conf *jobs;
	int n = jobs_conf(a, &jobs), rc;

	if (n < 0)
		return n;
	rc = sg_dp_pipeline_drain(a->p, jobs, (unsigned int)n);
	free(jobs);
	return rc;
}

static int m_drain(struct sg_ctl_server *s, json_t *params, json_t **res, struct sg_rpc_err *err)
{
	if (sg_rpc_no_params(params, err))
		return -1;
	return sg_rpc_drain_answer(s, drain(sg_rpc_node(s)), res, err);
}
SG_RPC_NODE_REGISTER(&agent_ops, "drain", m_drain);

/* ---- verbs: what workers address, and RC connections ------------------------ */

/* -ENOTSUP with the reason when the pipeline does not run verbs (ethdev, or no verbs build). */
static int verbs_refuse(const struct sg_dp_pipeline *p, char *reason)
{
	bool sock = sg_dp_pipeline_config(p)->transport == SG_DP_TRANSPORT_SOCKET;

	if (sg_dp_pipeline_config(p)->transport == SG_DP_TRANSPORT_VERBS && SG_HAVE_VERBS)
		return 0;
	snprintf(reason, SG_CTL_REASON_MAX, "this node runs the %s transport ([transport] "
		 "type = %s), not verbs: workers reach it over UDP", sock ? "kernel socket" : "DPDK",
		 sock ? "socket" : "dpdk");
	return -ENOTSUP;
}

static int verbs_info(struct sg_dp_agent *a, struct sg_ctl_verbs_info *out, char *reason)
{
	int rc = verbs_refuse(a->p, reason);
#if SG_HAVE_VERBS
	struct sg_dp_pipeline_verbs_info vi;

	if (rc == 0)
		rc = sg_dp_pipeline_verbs_info(a->p, &vi, reason, SG_CTL_REASON_MAX);
	if (rc != 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->mode = vi.rc ? SG_CTL_VERBS_RC : SG_CTL_VERBS_UD;
	out->qkey = vi.qkey;
	out->msg_max = vi.msg_max;
	out->max_payload = vi.max_payload;
	out->port = vi.port;
	memcpy(out->gid, vi.gid, sizeof(out->gid));
	out->gid_index = vi.gid_index;
	out->lid = vi.lid;
	out->rc_slots = vi.rc_slots;
	out->rc_conns = vi.rc_conns;
	out->rc_max_conns = vi.rc_max_conns;
	for (unsigned int i = 0; i < vi.n_lcores && i < SG_CTL_MAX_LCORES; i++) {
		out->lcores[i].lcore = vi.lcores[i].lcore;
		out->lcores[i].role = vi.lcores[i].role;
		out->lcores[i].qpn = vi.lcores[i].qpn;
		out->n_lcores++;
	}
	return 0;
#else
	(void)out;
	return rc;
#endif
}

static int m_verbs_info(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct sg_rpc_err *err)
{
	struct sg_ctl_verbs_info vi;
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_no_params(params, err))
		return -1;
	return sg_rpc_verbs_info_answer(verbs_info(sg_rpc_node(s), &vi, reason), &vi, reason, res,
					err);
}
SG_RPC_NODE_REGISTER(&agent_ops, "verbs_info", m_verbs_info);

static int verbs_rc_connect(struct sg_dp_agent *a, const struct sg_ctl_verbs_rc_addr *worker,
			    struct sg_ctl_verbs_rc_addr *node, char *reason)
{
	int rc = verbs_refuse(a->p, reason);
#if SG_HAVE_VERBS
	struct sg_dp_verbs_rc_addr r = {.qpn = worker->qpn, .psn = worker->psn,
					.lid = worker->lid, .addr = worker->addr,
					.rkey = worker->rkey, .slots = worker->slots,
					.stride = worker->stride}, l;
	struct sg_dp_pipeline_verbs_info vi;
	char why[256] = "";

	if (rc == 0)
		rc = sg_dp_pipeline_verbs_info(a->p, &vi, reason, SG_CTL_REASON_MAX);
	if (rc != 0)
		return rc;
	if (!vi.rc) {
		snprintf(reason, SG_CTL_REASON_MAX, "this node runs [verbs] mode = ud: workers send "
			 "datagrams to the QPNs verbs_info lists; RC needs mode = rc");
		return -ENOTSUP;
	}
	memcpy(r.gid, worker->gid, sizeof(r.gid));
	rc = sg_dp_pipeline_verbs_rc_connect(a->p, &r, &l, why, sizeof(why));
	if (rc < 0) {
		snprintf(reason, SG_CTL_REASON_MAX, "%s", why);
		SG_AGENT_LOG(WARNING, "RC connection of worker QP %u refused: %s", worker->qpn, why);
		return rc;
	}
	*node = (struct sg_ctl_verbs_rc_addr){.qpn = l.qpn, .psn = l.psn, .lid = l.lid,
					      .addr = l.addr, .rkey = l.rkey, .slots = l.slots,
					      .stride = l.stride};
	memcpy(node->gid, l.gid, sizeof(node->gid));
	SG_AGENT_LOG(INFO, "RC: worker QP %u connected as peer %d (node QP %u)", worker->qpn, rc,
		  l.qpn);
	return rc;
#else
	(void)worker;
	(void)node;
	return rc;
#endif
}

static int m_verbs_rc_connect(struct sg_ctl_server *s, json_t *params, json_t **res,
			      struct sg_rpc_err *err)
{
	struct sg_ctl_verbs_rc_addr worker, node = {0};
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_verbs_rc_connect_parse(s, params, &worker, err) != 0)
		return -1;
	return sg_rpc_verbs_rc_connect_answer(verbs_rc_connect(sg_rpc_node(s), &worker, &node,
							       reason),
					      &node, reason, res, err);
}
SG_RPC_NODE_REGISTER(&agent_ops, "verbs_rc_connect", m_verbs_rc_connect);

static int verbs_rc_disconnect(struct sg_dp_agent *a, uint32_t peer, char *reason)
{
	int rc = verbs_refuse(a->p, reason);
#if SG_HAVE_VERBS
	char why[256] = "";

	if (rc != 0)
		return rc;
	rc = sg_dp_pipeline_verbs_rc_disconnect(a->p, peer, why, sizeof(why));
	if (rc < 0) {
		snprintf(reason, SG_CTL_REASON_MAX, "%s", why);
		return rc;
	}
	SG_AGENT_LOG(INFO, "RC: peer %u disconnected; its slots are free", peer);
	return 0;
#else
	(void)peer;
	return rc;
#endif
}

static int m_verbs_rc_disconnect(struct sg_ctl_server *s, json_t *params, json_t **res,
				 struct sg_rpc_err *err)
{
	char reason[SG_CTL_REASON_MAX] = "";
	uint32_t peer;

	if (sg_rpc_verbs_rc_disconnect_parse(params, &peer, err) != 0)
		return -1;
	return sg_rpc_verbs_rc_disconnect_answer(verbs_rc_disconnect(sg_rpc_node(s), peer, reason),
						 peer, reason, res, err);
}
SG_RPC_NODE_REGISTER(&agent_ops, "verbs_rc_disconnect", m_verbs_rc_disconnect);

/*
 * Failover: keys of a lost node that placement now gives this node (docs/cluster.md).
 * Every engine holds every key of a job (the keymap picks the one that sums it).
 */
static int op_job_keys_add(void *arg, uint32_t id, const struct sg_ctl_key *keys, uint32_t n,
			   char *reason)
{
	struct sg_dp_agent *a = arg;
	struct agent_job *aj = job_find(a, id);
	struct sg_dp_key *add, *grown;
	uint32_t added = 0;
	int rc = 0;

	if (aj == NULL || aj->open) {
		snprintf(reason, SG_CTL_REASON_MAX, "%s", aj ? "an open job makes its own keys" :
			 "no such job");
		return aj ? -EINVAL : -ENOENT;
	}
	/* a key move tracks the job's chunks: the server tries again once it is over */
	if (n == 0 || refuse_during_move(a, reason))
		return n == 0 ? 0 : -EBUSY;
	add = calloc(n, sizeof(*add));
	grown = realloc(aj->keys, (aj->n_keys + n) * sizeof(*aj->keys));
	if (grown != NULL)
		aj->keys = grown;
	if (add == NULL || grown == NULL) {
		free(add);
		return -ENOMEM;
	}
	/* the agent's list: the keys it does not have yet (what the engines add) */
	for (uint32_t i = 0; i < n; i++) {
		bool have = false;

		for (uint32_t k = 0; k < aj->n_keys && !have; k++)
			have = aj->keys[k].id == keys[i].id;
		if (!have)
			add[added++] = (struct sg_dp_key){.id = keys[i].id, .nelem = keys[i].nelem};
	}
	if (added > 0 && aj->n_keys == 0) {
		/* no key was placed here: the engines have no job yet (a refused one is undone) */
		struct sg_dp_job_conf jc = job_conf(aj);

		jc.keys = add;
		jc.nkeys = added;
		rc = sg_dp_pipeline_job_add(a->p, &jc);
	} else if (added > 0) {
		/* engines that took some of the keys skip them next time */
		rc = sg_dp_pipeline_keys_add(a->p, id, add, added);
	}
	if (rc < 0) {
		free(add);
		snprintf(reason, SG_CTL_REASON_MAX, "a reducer refused the keys: %s", strerror(-rc));
		return rc;
	}
	memcpy(&aj->keys[aj->n_keys], add, added * sizeof(*aj->keys));
	aj->n_keys += added;
	free(add);
	SG_AGENT_LOG(NOTICE, "job %u: %u key(s) of a lost node added, %u here now", id, added,
		  aj->n_keys);
	return (int)added;
}

/* The reducers' tables of a job the agent made; one with no keys on any reducer: 0s. */
static int op_job_lateness(void *arg, uint32_t id, struct sg_late *out)
{
	struct sg_dp_agent *a = arg;
	const struct agent_job *j = job_find(a, id);
	int rc;

	if (j == NULL)
		return -ENOENT;
	rc = sg_dp_pipeline_job_lateness(a->p, id, out);
	if (rc == -ENOENT) {
		memset(out, 0, sizeof(*out));
		out->nranks = j->workers;
		rc = 0;
	}
	return rc;
}

/* Every drop counter, named as /sigma/drops names it. */
static int op_drops(void *arg, struct sg_ctl_drop *out, unsigned int cap)
{
	struct sg_dp_agent *a = arg;
	struct sg_dp_drop_count dc[SG_DP_MAX_DROP_COUNTS];
	unsigned int n = sg_dp_pipeline_drops(a->p, dc, RTE_DIM(dc)), k;

	for (k = 0; k < n && k < cap; k++) {
		_Static_assert(sizeof(out[k].reason) == sizeof(dc[k].name), "drop names");
		memcpy(out[k].reason, dc[k].name, sizeof(out[k].reason));
		out[k].reason[sizeof(out[k].reason) - 1] = '\0';
		out[k].count = dc[k].count;
	}
	return (int)k;
}

static const struct sg_ctl_agent_ops agent_ops = {
	.job_keys_add = op_job_keys_add,
	.job_lateness = op_job_lateness,
	.drops = op_drops,
	.node_info = op_node_info,
	.job_create = op_job_create,
	.job_list = op_job_list,
	.job_destroy = op_job_destroy,
	.lcores = op_lcores,
};

/* ---- heartbeats --------------------------------------------------------- */

static void *hb_main(void *arg)
{
	struct sg_dp_agent *a = arg;
	struct sg_ctl_client *cli = NULL;
	struct sg_dp_agent_conf ac;
	char params[256], target[sizeof(ac.coordinator)] = "";
	uint64_t hz = rte_get_tsc_hz(), next = rte_rdtsc();

	while (!a->hb_stop) {
		char *emsg = NULL;

		if (rte_rdtsc() < next) {
			usleep(10000);
			continue;
		}
		/* SIGHUP may have changed any of these since the last beat */
		pthread_mutex_lock(&a->hb_lock);
		ac = a->ac;
		pthread_mutex_unlock(&a->hb_lock);
		snprintf(params, sizeof(params), "{\"name\":\"%s\",\"kind\":\"%s\",\"gbps\":%.3f}",
			 ac.name, sg_node_kind_name(ac.kind), ac.gbps);
		next = rte_rdtsc() + hz * ac.heartbeat_ms / 1000;
		if (cli != NULL && strcmp(target, ac.coordinator) != 0) {
			sg_ctl_client_close(cli);
			cli = NULL;
		}
		if (cli == NULL) {
			snprintf(target, sizeof(target), "%s", ac.coordinator);
			cli = sg_ctl_client_connect(target, a->secret, a->secret_len, 1000);
		}
		if (cli != NULL && sg_ctl_client_call(cli, "node_heartbeat", params, NULL,
						      &emsg) == 0) {
			__atomic_fetch_add(&a->hb_sent, 1, __ATOMIC_RELAXED);
			if (a->hb_failing)
				SG_AGENT_LOG(NOTICE, "heartbeat to %s recovered after %" PRIu64
					  " failed", target, a->hb_fail_run);
			a->hb_failing = false;
			continue;
		}
		__atomic_fetch_add(&a->hb_failed, 1, __ATOMIC_RELAXED);
		/* one line when a run of failures starts (not one a beat), one when it ends */
		if (!a->hb_failing)
			SG_AGENT_LOG(WARNING, "heartbeat to %s failed: %s (logged again when it "
				  "recovers)", target, emsg ? emsg : strerror(errno));
		a->hb_fail_run = a->hb_failing ? a->hb_fail_run + 1 : 1;
		a->hb_failing = true;
		free(emsg);
		sg_ctl_client_close(cli);
		cli = NULL;
	}
	sg_ctl_client_close(cli);
	return NULL;
}

int sg_dp_agent_reload(struct sg_dp_agent *a, const struct sg_dp_agent_conf *ac, FILE *report)
{
	struct sg_dp_agent_conf nc = *ac;
	int restart = 0;

	/* the same defaults as at start */
	if (nc.name[0] == '\0')
		snprintf(nc.name, sizeof(nc.name), "%s", a->ac.name);
	if (nc.gbps <= 0)
		nc.gbps = a->ac.gbps;
	if (nc.heartbeat_ms == 0)
		nc.heartbeat_ms = 1000;
	if (strcmp(nc.coordinator, a->ac.coordinator) != 0 &&
	    (!a->hb_running || nc.coordinator[0] == '\0')) {
		restart++;
		if (report)
			fprintf(report, "sigmad: SIGHUP: [control] coordinator %s: needs a restart\n",
				a->hb_running ? "removed" : "added");
		snprintf(nc.coordinator, sizeof(nc.coordinator), "%s", a->ac.coordinator);
	}
	if (report) {
		if (strcmp(nc.name, a->ac.name))
			fprintf(report, "sigmad: SIGHUP: [control] name now %s\n", nc.name);
		if (nc.kind != a->ac.kind)
			fprintf(report, "sigmad: SIGHUP: [control] kind now %s\n",
				sg_node_kind_name(nc.kind));
		if (nc.gbps != a->ac.gbps)
			fprintf(report, "sigmad: SIGHUP: [control] gbps now %.3f\n", nc.gbps);
		if (nc.heartbeat_ms != a->ac.heartbeat_ms)
			fprintf(report, "sigmad: SIGHUP: [control] heartbeat_ms now %u\n",
				nc.heartbeat_ms);
		if (strcmp(nc.coordinator, a->ac.coordinator))
			fprintf(report, "sigmad: SIGHUP: [control] heartbeats now to %s\n",
				nc.coordinator);
	}
	pthread_mutex_lock(&a->hb_lock);
	a->ac = nc;
	pthread_mutex_unlock(&a->hb_lock);
	return restart;
}

/* ---- [cluster]: registration in etcd -------------------------------------- */

/*
 * How to reach [cluster]'s etcd into @p ec; the password (password_file's first
 * line) into @p password, which @p ec points at. @return 0 or -EINVAL with err.
 */
static int cluster_etcd_conf(const struct sg_dp_cluster_cfg *cl, struct sg_etcd_conf *ec,
			     char password[SG_ETCD_PASSWORD_MAX], char *err, size_t errlen)
{
	*ec = (struct sg_etcd_conf){.endpoints = cl->etcd,
		.user = cl->user[0] ? cl->user : NULL,
		.ca_file = cl->ca_file[0] ? cl->ca_file : NULL,
		.cert_file = cl->cert_file[0] ? cl->cert_file : NULL,
		.key_file = cl->key_file[0] ? cl->key_file : NULL};
	if (cl->password_file[0]) {
		if (sg_etcd_password_load("[cluster] password_file", cl->password_file, password,
					  err, errlen) < 0) {
			errno = EINVAL;
			return -EINVAL;
		}
		ec->password = password;
	}
	return 0;
}

/*
 * Register this node in etcd: its own thread keeps the lease (a control-plane
 * thread, never an lcore), so sums go on whatever etcd does.
 */
static int cluster_register(struct sg_dp_agent *a, const struct sg_ctl_server_config *sc,
			    const struct sg_etcd_conf *ec, char *err, size_t errlen)
{
	const struct sg_dp_cluster_cfg *cl = &a->cluster;
	struct sg_etcd_reg_conf rc = {.cluster = cl->cluster, .ttl_s = cl->ttl, .etcd = *ec};
	struct sg_ctl_node_info info;

	op_node_info(a, &info);
	snprintf(rc.node.name, sizeof(rc.node.name), "%s", info.name);
	snprintf(rc.node.addr, sizeof(rc.node.addr), "%s", cl->addr[0] ? cl->addr : info.addr);
	rc.node.port = info.udp_port;
	rc.node.kind = info.kind;
	rc.node.gbps = info.gbps;
	if (sc->unix_path != NULL)
		snprintf(rc.node.control, sizeof(rc.node.control), "unix:%s", sc->unix_path);
	else if (!sc->tcp_disable && sc->tcp_addr != NULL && sc->tcp_addr[0])
		snprintf(rc.node.control, sizeof(rc.node.control), "%s:%u", sc->tcp_addr,
			 sg_ctl_server_tcp_port(a->srv));
	a->etcd_reg = sg_etcd_reg_start(&rc);
	if (a->etcd_reg == NULL) {
		sg_dp_seterr(err, errlen, "[cluster]: cannot register node '%s' (addr '%s', port %u) "
			     "in cluster '%s' of etcd %s: %s (the name must be 1..63 of "
			     "[A-Za-z0-9._-]; set [cluster] addr when [net] has no ip)", rc.node.name,
			     rc.node.addr, rc.node.port, cl->cluster, cl->etcd, strerror(errno));
		errno = EINVAL;
		return -EINVAL;
	}
	SG_AGENT_LOG(NOTICE, "registering node %s in etcd %s, cluster %s, lease TTL %u s",
		  rc.node.name, cl->etcd, cl->cluster, cl->ttl);
	return 0;
}

/* ---- telemetry: /sigma/cluster -------------------------------------------- */

/* rte_telemetry callbacks take no context: the process's one running agent reports */
static struct sg_dp_agent *tel_agent;

/* [cluster]: whether the node is registered in etcd, and what went wrong last. */
static int tel_cluster(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct sg_dp_agent *a = __atomic_load_n(&tel_agent, __ATOMIC_ACQUIRE);
	const struct sg_dp_cluster_cfg *cl;
	struct sg_etcd_reg_status st;
	char lease[24];

	rte_tel_data_start_dict(d);
	if (a == NULL || a->etcd_reg == NULL) {
		rte_tel_data_add_dict_string(d, "etcd", "none: no [cluster] section");
		return 0;
	}
	cl = &a->cluster;
	sg_etcd_reg_status(a->etcd_reg, &st);
	snprintf(lease, sizeof(lease), "%" PRIx64, (uint64_t)st.lease);
	rte_tel_data_add_dict_string(d, "etcd", cl->etcd);
	rte_tel_data_add_dict_string(d, "cluster", cl->cluster);
	rte_tel_data_add_dict_u64(d, "registered", st.registered);
	rte_tel_data_add_dict_string(d, "lease", lease);
	rte_tel_data_add_dict_u64(d, "ttl_s", cl->ttl);
	rte_tel_data_add_dict_u64(d, "registrations", st.registrations);
	rte_tel_data_add_dict_u64(d, "keepalives", st.keepalives);
	rte_tel_data_add_dict_u64(d, "failures", st.failures);
	rte_tel_data_add_dict_u64(d, "expired", st.expired);
	rte_tel_data_add_dict_string(d, "last_error", st.last_error);
	return 0;
}

int sg_dp_agent_telemetry_register(struct sg_dp_agent *a)
{
	static bool registered;
	int rc;

	__atomic_store_n(&tel_agent, a, __ATOMIC_RELEASE);
	if (registered)
		return 0;
	rc = rte_telemetry_register_cmd("/sigma/cluster", tel_cluster,
					"Registration in etcd ([cluster]): registered, lease, "
					"keepalives, failures");
	registered = rc == 0;
	return rc;
}

/* ---- life cycle --------------------------------------------------------- */

struct sg_dp_agent *sg_dp_agent_start(struct sg_dp_pipeline *p,
				      const struct sg_ctl_server_config *sc,
				      const struct sg_dp_agent_conf *ac,
				      const struct sg_dp_cluster_cfg *cl, char *err, size_t errlen)
{
	struct sg_ctl_server_config cfg = *sc;
	struct sg_dp_agent *a = calloc(1, sizeof(*a));
	const struct sg_dp_config *c = sg_dp_pipeline_config(p);
	struct sg_dp_pipeline_limits lim;
	struct sg_etcd_conf ec;
	char password[SG_ETCD_PASSWORD_MAX] = "";

	if (a == NULL) {
		sg_dp_seterr(err, errlen, "control agent: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	a->p = p;
	a->ac = *ac;
	if (cl != NULL)
		a->cluster = *cl;
	pthread_mutex_init(&a->hb_lock, NULL);
	if (a->ac.name[0] == '\0' && gethostname(a->ac.name, sizeof(a->ac.name) - 1) != 0)
		snprintf(a->ac.name, sizeof(a->ac.name), "sigmad");
	if (a->ac.gbps <= 0)
		a->ac.gbps = 100;
	if (a->ac.heartbeat_ms == 0)
		a->ac.heartbeat_ms = 1000;
	/* set-up, not the data path: one entry per job the engines can hold */
	sg_dp_pipeline_limits(p, &lim);
	a->max_jobs = RTE_MAX(lim.max_jobs, c->n_jobs);
	a->jobs = calloc(a->max_jobs, sizeof(*a->jobs));
	if (a->jobs == NULL) {
		sg_dp_seterr(err, errlen, "control agent: out of memory");
		free(a);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned int j = 0; j < c->n_jobs; j++) {
		const struct sg_dp_job_cfg *jc = &c->jobs[j];

		a->jobs[j] = (struct agent_job){.used = true, .id = jc->id, .workers = jc->workers,
						.dtype = jc->dtype,
						.mode = jc->mode,
						.partition_bytes = jc->partition_bytes,
						.n_tensors = 1, .n_keys = jc->keys, .n_nodes = 1,
						.chunk_bytes = sg_dp_job_chunk_bytes(c, jc),
						.keys = calloc(jc->keys, sizeof(struct sg_dp_key)),
						.open = jc->open_slots != 0, .slots = jc->open_slots,
						.token = jc->token};
		if (a->jobs[j].open)
			a->jobs[j].n_keys = 0; /* the engines make them */
		/* keys 0..K-1: the partitions of tensor 0 in libsigma's numbering */
		for (uint32_t k = 0; a->jobs[j].keys && k < a->jobs[j].n_keys; k++)
			a->jobs[j].keys[k] = (struct sg_dp_key){
				.id = k, .nelem = jc->partition_bytes / (uint32_t)sg_dtype_size(jc->dtype)};
		a->next_id = RTE_MAX(a->next_id, jc->id);
	}
	a->next_id++;
	cfg.ops = &agent_ops;
	cfg.ops_arg = a;
	if (a->cluster.etcd[0] != '\0') {
		/* the server watches the membership and its jobs' records (failover) */
		if (cluster_etcd_conf(&a->cluster, &ec, password, err, errlen) < 0)
			goto fail;
		cfg.etcd = &ec;
		cfg.cluster = a->cluster.cluster;
	}
	a->srv = sg_ctl_server_create(&cfg);
	if (a->srv == NULL) {
		int e = errno;

		sg_dp_seterr(err, errlen, "control server: %s (check [control] listen, unix and "
			     "metrics%s)", strerror(e), cfg.etcd ? ", and [cluster]" : "");
		goto fail;
	}
	if (a->cluster.etcd[0] != '\0' && cluster_register(a, sc, &ec, err, errlen) < 0) {
		sg_ctl_server_destroy(a->srv);
		goto fail;
	}
	explicit_bzero(password, sizeof(password));
	if (a->ac.coordinator[0] != '\0') {
		a->secret = sc->secret;
		a->secret_len = sc->secret_len;
		if (pthread_create(&a->hb_thread, NULL, hb_main, a) == 0)
			a->hb_running = true;
		else
			SG_AGENT_LOG(ERR, "cannot start the heartbeat thread");
	}
	return a;
fail:
	{
		int e = errno;

		explicit_bzero(password, sizeof(password));
		for (unsigned int i = 0; i < a->max_jobs; i++)
			free(a->jobs[i].keys);
		free(a->jobs);
		free(a);
		errno = e;
		return NULL;
	}
}

void sg_dp_agent_stop(struct sg_dp_agent *a)
{
	struct sg_dp_agent *seen = a; /* a failed exchange below writes it */

	if (a == NULL)
		return;
	/* telemetry's thread must not meet a freed agent */
	__atomic_compare_exchange_n(&tel_agent, &seen, NULL, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
	a->hb_stop = true;
	if (a->hb_running)
		pthread_join(a->hb_thread, NULL);
	/* a clean leave: workers move this node's keys at once instead of after the TTL */
	sg_etcd_reg_stop(a->etcd_reg, true);
	a->etcd_reg = NULL;
	sg_ctl_server_destroy(a->srv);
	for (unsigned int i = 0; i < a->max_jobs; i++)
		free(a->jobs[i].keys);
	free(a->jobs);
	pthread_mutex_destroy(&a->hb_lock);
	free(a);
}

struct sg_ctl_server *sg_dp_agent_server(struct sg_dp_agent *a)
{
	return a->srv;
}

void sg_dp_agent_heartbeats(const struct sg_dp_agent *a, uint64_t *sent, uint64_t *failed)
{
	*sent = __atomic_load_n(&a->hb_sent, __ATOMIC_RELAXED);
	*failed = __atomic_load_n(&a->hb_failed, __ATOMIC_RELAXED);
}
