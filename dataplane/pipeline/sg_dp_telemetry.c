/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rte_telemetry commands for operators: /sigma/lcores, /sigma/ports,
 * /sigma/verbs, /sigma/socket, /sigma/jobs, /sigma/jobs/lateness, /sigma/drops
 * (sigmad's agent adds
 * /sigma/cluster, since the registration in etcd is its). dpdk-telemetry.py lists and
 * runs them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_telemetry.h>

#include "sg_dp_engine.h"
#include "sg_dp_transport.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"
#include "sg_late.h"
#include "sg_parse.h"

/* rte_telemetry callbacks carry no context: the registered pipeline. */
static struct sg_dp_pipeline *tel_pipeline;

static int no_pipeline(struct rte_tel_data *d)
{
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "error", "no pipeline running");
	return 0;
}

/* Lcore @p i's transport drop counters into dict @p l, as <transport>_<name> (they are
 * not in its "drops": that one counts the net_* reasons of /sigma/drops). */
static void tel_transport_drops(struct sg_dp_pipeline *p, unsigned int i, struct rte_tel_data *l)
{
	struct sg_dp_counter tc[32];
	unsigned int n = p->tr->counters ? p->tr->counters(p, i, tc, RTE_DIM(tc)) : 0;
	char name[48];

	for (unsigned int k = 0; k < n; k++) {
		if (!tc[k].drop)
			continue;
		snprintf(name, sizeof(name), "%s_%s", p->tr->name, tc[k].name);
		rte_tel_data_add_dict_u64(l, name, tc[k].value);
	}
}

static int tel_lcores(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct sg_dp_pipeline *p = tel_pipeline;

	if (p == NULL)
		return no_pipeline(d);
	rte_tel_data_start_dict(d);
	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(p); i++) {
		struct sg_dp_lcore_stats st;
		struct rte_tel_data *l = rte_tel_data_alloc();
		uint64_t tot, drops;
		char name[32];

		if (l == NULL)
			return -ENOMEM;
		sg_dp_pipeline_lcore_stats(p, i, &st);
		drops = sg_dp_lcore_drops(&st, NULL);
		tot = st.busy_cycles + st.idle_cycles;
		rte_tel_data_start_dict(l);
		rte_tel_data_add_dict_string(l, "role", sg_role_name(st.role));
		rte_tel_data_add_dict_int(l, "socket", st.socket);
		rte_tel_data_add_dict_string(l, "idle_policy",
					     st.idle == SG_IDLE_SLEEP ? "sleep" : "busy");
		rte_tel_data_add_dict_u64(l, "busy_cycles", st.busy_cycles);
		rte_tel_data_add_dict_u64(l, "idle_cycles", st.idle_cycles);
		rte_tel_data_add_dict_u64(l, "busy_permille", tot ? st.busy_cycles * 1000 / tot : 0);
		rte_tel_data_add_dict_u64(l, "rx_pkts", st.rx_pkts);
		rte_tel_data_add_dict_u64(l, "rx_bytes", st.rx_bytes);
		rte_tel_data_add_dict_u64(l, "tx_pkts", st.tx_pkts);
		rte_tel_data_add_dict_u64(l, "tx_bytes", st.tx_bytes);
		rte_tel_data_add_dict_u64(l, "handoff_pkts", st.handoff_pkts);
		rte_tel_data_add_dict_u64(l, "reduced_pkts", st.reduced_pkts);
		rte_tel_data_add_dict_u64(l, "bytes_summed", st.bytes_summed);
		rte_tel_data_add_dict_u64(l, "arp_replies", st.arp_replies);
		rte_tel_data_add_dict_u64(l, "ring_count", st.ring_count);
		rte_tel_data_add_dict_u64(l, "peers", st.peers);
		rte_tel_data_add_dict_u64(l, "peers_learned", st.peers_learned);
		rte_tel_data_add_dict_u64(l, "peers_evicted", st.peers_evicted);
		rte_tel_data_add_dict_u64(l, "peers_expired", st.peers_expired);
		rte_tel_data_add_dict_u64(l, "drops", drops);
		tel_transport_drops(p, i, l);
		snprintf(name, sizeof(name), "lcore_%u", st.lcore);
		rte_tel_data_add_dict_container(d, name, l, 0);
	}
	return 0;
}

static int tel_ports(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct sg_dp_pipeline *p = tel_pipeline;

	if (p == NULL)
		return no_pipeline(d);
	rte_tel_data_start_dict(d);
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++) {
		struct sg_dp_net net;
		struct rte_eth_stats es;
		struct rte_tel_data *l;
		char name[32], mac[RTE_ETHER_ADDR_FMT_SIZE];

		if (sg_dp_pipeline_net(p, port, &net) < 0)
			continue;
		l = rte_tel_data_alloc();
		if (l == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(l);
		rte_ether_format_addr(mac, sizeof(mac), &net.mac);
		rte_tel_data_add_dict_string(l, "mac", mac);
		rte_tel_data_add_dict_string(l, "checksum", net.tx_ip_csum_offload ?
					     "offloaded" : "software");
		/* reducer steering: "flow" (rules installed) or "ring" (hand-off), and why */
		rte_tel_data_add_dict_string(l, "steer", p->port_steer[port] ? "flow" : "ring");
		rte_tel_data_add_dict_string(l, "steer_detail", p->steer_why[port]);
		rte_tel_data_add_dict_u64(l, "steer_udp_ports", net.steer_ports);
		/* the layout's queues, those the port fills on its own, and steering's */
		rte_tel_data_add_dict_u64(l, "rx_queues", p->port_rxq[port]);
		if (rte_eth_stats_get(port, &es) == 0) {
			rte_tel_data_add_dict_u64(l, "ipackets", es.ipackets);
			rte_tel_data_add_dict_u64(l, "opackets", es.opackets);
			rte_tel_data_add_dict_u64(l, "ibytes", es.ibytes);
			rte_tel_data_add_dict_u64(l, "obytes", es.obytes);
			rte_tel_data_add_dict_u64(l, "imissed", es.imissed);
			rte_tel_data_add_dict_u64(l, "ierrors", es.ierrors);
			rte_tel_data_add_dict_u64(l, "oerrors", es.oerrors);
			rte_tel_data_add_dict_u64(l, "rx_nombuf", es.rx_nombuf);
		}
		snprintf(name, sizeof(name), "port_%u", port);
		rte_tel_data_add_dict_container(d, name, l, 0);
	}
	return 0;
}

/* Transport @p name's own counters per lcore (verbs: each lcore's QP; socket: its
 * sockets), or an error naming the transport that runs. */
static int tel_transport(const char *name, struct rte_tel_data *d)
{
	struct sg_dp_pipeline *p = tel_pipeline;
	char why[96];

	if (p == NULL)
		return no_pipeline(d);
	rte_tel_data_start_dict(d);
	if (p->tr->counters == NULL || strcmp(p->tr->name, name)) {
		snprintf(why, sizeof(why), "the transport is %s, not %s: see /sigma/lcores and "
			 "/sigma/ports", p->tr->name, name);
		rte_tel_data_add_dict_string(d, "error", why);
		return 0;
	}
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_counter tc[32];
		unsigned int n = p->tr->counters(p, i, tc, RTE_DIM(tc));
		struct rte_tel_data *l = rte_tel_data_alloc();
		char lname[32];

		if (l == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(l);
		rte_tel_data_add_dict_string(l, "role", sg_role_name(p->lc[i].role));
		for (unsigned int k = 0; k < n; k++)
			rte_tel_data_add_dict_u64(l, tc[k].name, tc[k].value);
		snprintf(lname, sizeof(lname), "lcore_%u", p->lc[i].lcore_id);
		rte_tel_data_add_dict_container(d, lname, l, 0);
	}
	return 0;
}

static int tel_verbs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	return tel_transport("verbs", d);
}

static int tel_socket(const char *cmd, const char *params, struct rte_tel_data *d)
{
	return tel_transport("socket", d);
}

/* One job's counters, summed over the reducers, into dict @p l. */
static void tel_job_counters(struct rte_tel_data *l, const struct sg_dp_job_stats *js)
{
	rte_tel_data_add_dict_u64(l, "rounds_completed", js->rounds_completed);
	rte_tel_data_add_dict_u64(l, "retransmits_served", js->retransmits_served);
	rte_tel_data_add_dict_u64(l, "incomplete_slots", js->incomplete_slots);
	rte_tel_data_add_dict_u64(l, "slot_timeouts", js->slot_timeouts);
	rte_tel_data_add_dict_u64(l, "slots_active", js->slots_active);
	rte_tel_data_add_dict_u64(l, "pushes", js->rx_pushes);
	rte_tel_data_add_dict_u64(l, "results_sent", js->results_sent);
	rte_tel_data_add_dict_u64(l, "nacks_sent", js->nacks_sent);
	rte_tel_data_add_dict_u64(l, "errors_sent", js->errors_sent);
	rte_tel_data_add_dict_u64(l, "waits_sent", js->waits_sent);
	rte_tel_data_add_dict_u64(l, "drops", js->drops);
	/* a fixed job's keys are on every reducer; an open job's where its pushes went */
	rte_tel_data_add_dict_u64(l, "keys_held", js->keys);
	rte_tel_data_add_dict_u64(l, "slots_used", js->slots_used);
	rte_tel_data_add_dict_u64(l, "slots_budget", js->slots);
}

static int tel_jobs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct sg_dp_pipeline *p = tel_pipeline;
	const struct sg_dp_config *c;
	struct sg_dp_stats es;
	struct rte_tel_data *t;
	struct sg_dp_jobs_table jt = {0};
	int nj;

	if (p == NULL)
		return no_pipeline(d);
	c = sg_dp_pipeline_config(p);
	/* each reducer reads its own engine's jobs (a job may come or go meanwhile) */
	nj = p->running ? sg_dp_pipeline_jobs_stats(p, &jt) : 0;
	rte_tel_data_start_dict(d);
	for (int k = 0; k < RTE_MAX(nj, 0); k++) {
		struct rte_tel_data *l = rte_tel_data_alloc();
		char name[32];

		if (l == NULL) {
			sg_dp_jobs_table_free(&jt);
			return -ENOMEM;
		}
		rte_tel_data_start_dict(l);
		for (unsigned int j = 0; j < c->n_jobs; j++)
			if (c->jobs[j].id == jt.ids[k]) {
				rte_tel_data_add_dict_u64(l, "workers", c->jobs[j].workers);
				rte_tel_data_add_dict_u64(l, "keys", c->jobs[j].keys);
				rte_tel_data_add_dict_string(l, "dtype",
							     sg_dtype_name(c->jobs[j].dtype));
				rte_tel_data_add_dict_string(l, "mode",
							     sg_mode_name(c->jobs[j].mode));
			}
		tel_job_counters(l, &jt.st[k]);
		snprintf(name, sizeof(name), "job_%u", jt.ids[k]);
		rte_tel_data_add_dict_container(d, name, l, 0);
	}
	sg_dp_jobs_table_free(&jt);
	/* engine-wide: every job, removed ones too, and the pool */
	sg_dp_pipeline_engine_stats(p, &es);
	t = rte_tel_data_alloc();
	if (t == NULL)
		return -ENOMEM;
	rte_tel_data_start_dict(t);
	rte_tel_data_add_dict_u64(t, "rounds_completed", es.rounds_completed);
	rte_tel_data_add_dict_u64(t, "retransmits_served", es.retransmits_served);
	rte_tel_data_add_dict_u64(t, "incomplete_slots", es.incomplete_slots);
	rte_tel_data_add_dict_u64(t, "slot_timeouts", es.slot_timeouts);
	rte_tel_data_add_dict_u64(t, "slots_active", es.slots_active);
	rte_tel_data_add_dict_u64(t, "pushes", es.rx_pushes);
	rte_tel_data_add_dict_u64(t, "results_sent", es.results_sent);
	rte_tel_data_add_dict_u64(t, "nacks_sent", es.nacks_sent);
	rte_tel_data_add_dict_u64(t, "errors_sent", es.errors_sent);
	rte_tel_data_add_dict_u64(t, "waits_sent", es.waits_sent);
	rte_tel_data_add_dict_u64(t, "pool_free", es.pool_free);
	rte_tel_data_add_dict_u64(t, "stale_rounds", es.stale_rounds);
	rte_tel_data_add_dict_u64(t, "keys_created", es.keys_created);
	if (nj < 0)
		rte_tel_data_add_dict_string(t, "per_job", "a reducer did not answer");
	rte_tel_data_add_dict_container(d, "all_jobs", t, 0);
	return 0;
}

/* A job's lateness in brief: its straggler (-1: none yet), how often last, how late. */
static void tel_late_summary(struct rte_tel_data *l, const struct sg_late *t)
{
	int w = sg_late_straggler(t);

	rte_tel_data_add_dict_u64(l, "workers", t->nranks);
	rte_tel_data_add_dict_u64(l, "rounds", t->rounds);
	rte_tel_data_add_dict_int(l, "straggler", w);
	rte_tel_data_add_dict_u64(l, "straggler_last", w < 0 ? 0 : t->rank[w].last);
	rte_tel_data_add_dict_u64(l, "straggler_avg_ns", w < 0 ? 0 : t->rank[w].avg_ns);
}

/* One rank's lateness (ns; the quantiles interpolated in its histogram). */
static struct rte_tel_data *tel_late_rank(const struct sg_late_rank *x)
{
	struct rte_tel_data *l = rte_tel_data_alloc();
	uint64_t n = sg_late_pushes(x);

	if (l == NULL)
		return NULL;
	rte_tel_data_start_dict(l);
	rte_tel_data_add_dict_u64(l, "pushes", n);
	rte_tel_data_add_dict_u64(l, "last", x->last);
	rte_tel_data_add_dict_u64(l, "avg_ns", x->avg_ns);
	rte_tel_data_add_dict_u64(l, "mean_ns", n ? x->sum_ns / n : 0);
	rte_tel_data_add_dict_u64(l, "p50_ns", sg_late_quantile_ns(x, 0.5));
	rte_tel_data_add_dict_u64(l, "p99_ns", sg_late_quantile_ns(x, 0.99));
	return l;
}

/*
 * /sigma/jobs/lateness: every job's straggler in brief; /sigma/jobs/lateness,ID:
 * that job's, and each rank's lateness (docs/sigmad.md, "Telemetry").
 */
static int tel_lateness(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct sg_dp_pipeline *p = tel_pipeline;
	struct sg_dp_jobs_table jt = {0};
	struct sg_late *t;
	uint64_t id;
	int rc = 0, nj;

	(void)cmd;
	if (p == NULL)
		return no_pipeline(d);
	rte_tel_data_start_dict(d);
	if (!p->running) {
		rte_tel_data_add_dict_string(d, "error", "pipeline not running");
		return 0;
	}
	if (params != NULL && params[0] != '\0' &&
	    (sg_parse_u64(params, 0, UINT32_MAX, &id) != 0 || id == 0)) {
		rte_tel_data_add_dict_string(d, "error", "want a job id: /sigma/jobs/lateness,ID");
		return 0;
	}
	t = malloc(sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	if (params != NULL && params[0] != '\0') {
		rc = sg_dp_pipeline_job_lateness(p, (uint32_t)id, t);
		if (rc == 0) {
			rte_tel_data_add_dict_u64(d, "job", id);
			tel_late_summary(d, t);
			for (uint32_t r = 0; r < t->nranks; r++) {
				struct rte_tel_data *l = tel_late_rank(&t->rank[r]);
				char name[32];

				if (l == NULL) {
					rc = -ENOMEM;
					break;
				}
				snprintf(name, sizeof(name), "rank_%u", r);
				rte_tel_data_add_dict_container(d, name, l, 0);
			}
		} else if (rc == -ENOENT || rc == -ETIMEDOUT) {
			rte_tel_data_add_dict_string(d, "error", rc == -ENOENT ? "no such job"
						     : "a reducer did not answer");
			rc = 0;
		}
		free(t);
		return rc;
	}
	nj = sg_dp_pipeline_jobs_stats(p, &jt);
	for (int k = 0; k < nj && rc == 0; k++) {
		struct rte_tel_data *l;
		char name[32];

		if (sg_dp_pipeline_job_lateness(p, jt.ids[k], t) != 0)
			continue; /* gone meanwhile, or a reducer did not answer */
		l = rte_tel_data_alloc();
		if (l == NULL) {
			rc = -ENOMEM;
			break;
		}
		rte_tel_data_start_dict(l);
		tel_late_summary(l, t);
		snprintf(name, sizeof(name), "job_%u", jt.ids[k]);
		rte_tel_data_add_dict_container(d, name, l, 0);
	}
	if (nj < 0)
		rte_tel_data_add_dict_string(d, "error", "a reducer did not answer");
	sg_dp_jobs_table_free(&jt);
	free(t);
	return rc;
}

unsigned int sg_dp_pipeline_drops(struct sg_dp_pipeline *p, struct sg_dp_drop_count *out,
				  unsigned int cap)
{
	uint64_t nd[SG_DP_ND_COUNT] = {0};
	struct sg_dp_stats es;
	unsigned int n = 0;

#define SG_DP_DROP_ADD(v, ...)                                                                     \
	do {                                                                                       \
		if (n < cap) {                                                                     \
			snprintf(out[n].name, sizeof(out[n].name), __VA_ARGS__);                   \
			out[n++].count = (v);                                                      \
		}                                                                                  \
	} while (0)
	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(p); i++) {
		struct sg_dp_lcore_stats st;

		sg_dp_pipeline_lcore_stats(p, i, &st);
		sg_dp_lcore_drops(&st, nd);
	}
	sg_dp_pipeline_engine_stats(p, &es);
	for (int k = 0; k < SG_DP_ND_COUNT; k++)
		SG_DP_DROP_ADD(nd[k], "net_%s", sg_dp_ndrop_name(k));
	for (int k = 1; k < SG_DP_DROP_COUNT; k++)
		SG_DP_DROP_ADD(es.drops[k], "engine_%s", sg_dp_drop_name((enum sg_dp_drop)k));
	if (p->tr->counters != NULL) {
		/* the transport's drop counters, summed over the lcores (same order for each) */
		struct sg_dp_counter sum[32], tc[32];
		unsigned int m = p->tr->counters(p, 0, sum, RTE_DIM(sum));

		for (unsigned int i = 1; i < p->n_lc; i++) {
			unsigned int mi = p->tr->counters(p, i, tc, RTE_DIM(tc));

			for (unsigned int k = 0; k < RTE_MIN(mi, m); k++)
				sum[k].value += tc[k].value;
		}
		for (unsigned int k = 0; k < m; k++)
			if (sum[k].drop)
				SG_DP_DROP_ADD(sum[k].value, "%s_%s", p->tr->name, sum[k].name);
	}
#undef SG_DP_DROP_ADD
	return n;
}

static int tel_drops(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct sg_dp_pipeline *p = tel_pipeline;
	struct sg_dp_drop_count dc[SG_DP_MAX_DROP_COUNTS];
	unsigned int n;

	if (p == NULL)
		return no_pipeline(d);
	n = sg_dp_pipeline_drops(p, dc, RTE_DIM(dc));
	rte_tel_data_start_dict(d);
	for (unsigned int k = 0; k < n; k++)
		rte_tel_data_add_dict_u64(d, dc[k].name, dc[k].count);
	return 0;
}

int sg_dp_telemetry_register(struct sg_dp_pipeline *p)
{
	static const struct {
		const char *cmd;
		telemetry_cb fn;
		const char *help;
	} cmds[] = {
		{"/sigma/lcores", tel_lcores,
		 "Per lcore: role, busy/idle cycles, packets, bytes summed, ring, drops"},
		{"/sigma/ports", tel_ports, "Per port: MAC, checksum mode, ethdev counters"},
		{"/sigma/verbs", tel_verbs,
		 "Verbs transport, per lcore: QP number, completions, packets, peers, drops"},
		{"/sigma/socket", tel_socket,
		 "Socket transport, per lcore: sockets, system calls, GRO/GSO batches, drops"},
		{"/sigma/jobs", tel_jobs,
		 "Jobs and engine counters: rounds completed, retransmits served, incomplete slots"},
		{"/sigma/jobs/lateness", tel_lateness,
		 "Stragglers: per job the rank most often last; with ,ID each rank's lateness (ns)"},
		{"/sigma/drops", tel_drops, "Dropped packets by reason (net_* and engine_*)"},
	};
	static bool registered;
	int rc;

	tel_pipeline = p;
	if (registered)
		return 0;
	for (size_t i = 0; i < RTE_DIM(cmds); i++) {
		rc = rte_telemetry_register_cmd(cmds[i].cmd, cmds[i].fn, cmds[i].help);
		if (rc < 0)
			return rc;
	}
	registered = true;
	return 0;
}
