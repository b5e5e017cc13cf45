/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters: the server's own (sg_ctl_server_get_stats(), written by the I/O
 * loop), the node's lcores through the agent's ops table (lcores_get,
 * stats_get), and the Prometheus text the server serves on /metrics
 * (docs/control.md, "Metrics"): lcores, jobs, each job's lateness, the
 * server's counters.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_ctl_server_internal.h"

void sg_ctl_server_get_stats(const struct sg_ctl_server *s, struct sg_ctl_server_stats *out)
{
	const uint64_t *src;
	uint64_t *dst;
	size_t i;

	if (s == NULL || out == NULL)
		return;
	src = (const uint64_t *)&s->st;
	dst = (uint64_t *)out;
	for (i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

int sg_ctl_srv_lcores(struct sg_ctl_server *s, struct sg_ctl_lcore_stats **out,
		      struct sg_rpc_err *err)
{
	struct sg_ctl_lcore_stats *ls = calloc(SG_CTL_MAX_LCORES, sizeof(*ls));
	int n;

	if (ls == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	n = s->cfg.ops->lcores(s->cfg.ops_arg, ls, SG_CTL_MAX_LCORES);
	if (n < 0) {
		free(ls);
		return sg_rpc_fail_errno(err, "lcores", n, NULL);
	}
	*out = ls;
	return n > SG_CTL_MAX_LCORES ? SG_CTL_MAX_LCORES : n;
}

int sg_ctl_srv_drops(struct sg_ctl_server *s, struct sg_ctl_drop **out, struct sg_rpc_err *err)
{
	struct sg_ctl_drop *d;
	int n;

	*out = NULL;
	if (s->cfg.ops->drops == NULL)
		return 0;
	if ((d = calloc(SG_CTL_MAX_DROPS, sizeof(*d))) == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	n = s->cfg.ops->drops(s->cfg.ops_arg, d, SG_CTL_MAX_DROPS);
	if (n < 0) {
		free(d);
		return sg_rpc_fail_errno(err, "drops", n, NULL);
	}
	for (int i = 0; i < n && i < SG_CTL_MAX_DROPS; i++)
		d[i].reason[sizeof(d[i].reason) - 1] = '\0';
	*out = d;
	return n > SG_CTL_MAX_DROPS ? SG_CTL_MAX_DROPS : n;
}

/* ---- Prometheus text format --------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p != NULL && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
			char *np = realloc(b->p, ncap);

			if (np == NULL) {
				b->oom = true;
				return;
			}
			b->p = np;
			b->cap = ncap;
		}
	}
}

static void sb_head(struct sbuf *b, const char *name, const char *type, const char *help)
{
	sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * Each job's lateness (the node's job_lateness op): a Prometheus histogram per job
 * and rank, in seconds (bucket b's `le` is 2^b µs), how often each rank came last,
 * its moving average, and the job's straggler.
 */
static void metrics_late(struct sg_ctl_server *s, struct sbuf *b, const struct sg_ctl_job *jobs,
			 int nj)
{
	struct sg_late *l = calloc((size_t)(nj > 0 ? nj : 1), sizeof(*l));
	int i;

	if (l == NULL) {
		b->oom = true;
		return;
	}
	for (i = 0; i < nj; i++)
		if (s->cfg.ops->job_lateness(s->cfg.ops_arg, jobs[i].id, &l[i]) != 0)
			memset(&l[i], 0, sizeof(l[i]));
	sb_head(b, "sigma_job_push_lateness_seconds", "histogram",
		"time from the first push of a round to this rank's push");
	for (i = 0; i < nj; i++) {
		for (uint32_t r = 0; r < l[i].nranks; r++) {
			const struct sg_late_rank *x = &l[i].rank[r];
			uint64_t cum = 0;

			for (unsigned int k = 0; k + 1 < SG_LATE_BUCKETS; k++) {
				cum += x->hist[k];
				sb_printf(b, "sigma_job_push_lateness_seconds_bucket{sigma_job=\"%u\",rank="
					  "\"%u\",le=\"%.9g\"} %" PRIu64 "\n", jobs[i].id, r,
					  (double)sg_late_bucket_us(k) / 1e6, cum);
			}
			cum += x->hist[SG_LATE_BUCKETS - 1];
			sb_printf(b, "sigma_job_push_lateness_seconds_bucket{sigma_job=\"%u\",rank=\"%u\","
				  "le=\"+Inf\"} %" PRIu64 "\n"
				  "sigma_job_push_lateness_seconds_sum{sigma_job=\"%u\",rank=\"%u\"} %.9f\n"
				  "sigma_job_push_lateness_seconds_count{sigma_job=\"%u\",rank=\"%u\"} %"
				  PRIu64 "\n", jobs[i].id, r, cum, jobs[i].id, r,
				  (double)x->sum_ns / 1e9, jobs[i].id, r, cum);
		}
	}
	sb_head(b, "sigma_job_rank_last_total", "counter",
		"rounds in which this rank was the last to push");
	for (i = 0; i < nj; i++)
		for (uint32_t r = 0; r < l[i].nranks; r++)
			sb_printf(b, "sigma_job_rank_last_total{sigma_job=\"%u\",rank=\"%u\"} %" PRIu64 "\n",
				  jobs[i].id, r, l[i].rank[r].last);
	sb_head(b, "sigma_job_rank_lateness_avg_seconds", "gauge",
		"moving average of this rank's push lateness");
	for (i = 0; i < nj; i++)
		for (uint32_t r = 0; r < l[i].nranks; r++)
			sb_printf(b, "sigma_job_rank_lateness_avg_seconds{sigma_job=\"%u\",rank=\"%u\"} "
				  "%.9f\n", jobs[i].id, r, (double)l[i].rank[r].avg_ns / 1e9);
	sb_head(b, "sigma_job_straggler_rank", "gauge",
		"the rank most often last to push (-1: no round completed yet)");
	for (i = 0; i < nj; i++)
		sb_printf(b, "sigma_job_straggler_rank{sigma_job=\"%u\"} %d\n", jobs[i].id,
			  sg_late_straggler(&l[i]));
	free(l);
}

char *sg_ctl_srv_metrics(struct sg_ctl_server *s, size_t *len)
{
	static const struct {
		const char *name, *help;
		size_t off;
		enum { LC_COUNTER, LC_RATIO, LC_GAUGE } kind;
	} lc_metrics[] = {
		{"sigma_lcore_busy_cycles_total", "TSC cycles spent on work",
		 offsetof(struct sg_ctl_lcore_stats, busy_cycles), LC_COUNTER},
		{"sigma_lcore_idle_cycles_total", "TSC cycles spent polling empty queues",
		 offsetof(struct sg_ctl_lcore_stats, idle_cycles), LC_COUNTER},
		{"sigma_lcore_packets_total", "packets handled",
		 offsetof(struct sg_ctl_lcore_stats, packets), LC_COUNTER},
		{"sigma_lcore_bytes_summed_total", "payload bytes summed",
		 offsetof(struct sg_ctl_lcore_stats, bytes_summed), LC_COUNTER},
		{"sigma_lcore_drops_total", "packets dropped, all reasons",
		 offsetof(struct sg_ctl_lcore_stats, drops), LC_COUNTER},
		{"sigma_lcore_busy_ratio", "busy share over the last interval (0..1)",
		 offsetof(struct sg_ctl_lcore_stats, busy_pct), LC_RATIO},
		{"sigma_lcore_ring_occupancy", "datagrams waiting in the lcore's reducer ring",
		 offsetof(struct sg_ctl_lcore_stats, ring), LC_GAUGE},
	};
	static const struct {
		const char *name, *help;
		size_t off;
		bool gauge;
	} job_metrics[] = {
		{"sigma_job_rounds_completed_total", "summation rounds completed",
		 offsetof(struct sg_ctl_job, rounds_completed), false},
		{"sigma_job_retransmits_total", "retransmitted results served",
		 offsetof(struct sg_ctl_job, retransmits), false},
		{"sigma_job_incomplete_slots", "rounds waiting for pushes",
		 offsetof(struct sg_ctl_job, incomplete), true},
		{"sigma_job_nacks_total", "pushes refused for lack of buffers or slots",
		 offsetof(struct sg_ctl_job, nacks), false},
		{"sigma_job_drops_total", "the job's packets dropped, all reasons",
		 offsetof(struct sg_ctl_job, drops), false},
		{"sigma_job_slots_used", "chunk slots the job's keys take (all engines)",
		 offsetof(struct sg_ctl_job, slots_used), true},
		{"sigma_job_slots_budget", "chunk slots the job may take (all engines)",
		 offsetof(struct sg_ctl_job, slots_budget), true},
		{"sigma_job_pushed_bytes_total", "payload bytes of the pushes summed",
		 offsetof(struct sg_ctl_job, bytes_pushed), false},
	};
	struct sg_ctl_lcore_stats *ls = NULL;
	struct sg_ctl_job *jobs = NULL;
	struct sg_ctl_drop *drops = NULL;
	struct sg_ctl_server_stats st;
	struct sg_rpc_err err;
	struct sbuf b = {0};
	int nl = 0, nj = 0, nd, i;
	size_t m;

	if (s->cfg.ops->lcores != NULL && (nl = sg_ctl_srv_lcores(s, &ls, &err)) < 0)
		nl = 0;
	if (s->cfg.ops->job_list != NULL && (nj = sg_ctl_srv_jobs(s, &jobs, &err)) < 0)
		nj = 0;
	for (m = 0; m < RTE_DIM(lc_metrics); m++) {
		sb_head(&b, lc_metrics[m].name, lc_metrics[m].kind == LC_COUNTER ? "counter" : "gauge",
			lc_metrics[m].help);
		for (i = 0; i < nl; i++) {
			const char *p = (const char *)&ls[i] + lc_metrics[m].off;

			sb_printf(&b, "%s{lcore=\"%u\",role=\"%s\",numa=\"%d\"} ", lc_metrics[m].name,
				  ls[i].lcore, sg_role_name(ls[i].role), ls[i].numa);
			if (lc_metrics[m].kind == LC_RATIO)
				sb_printf(&b, "%.4f\n", *(const double *)p / 100.0);
			else
				sb_printf(&b, "%" PRIu64 "\n", *(const uint64_t *)p);
		}
	}
	for (m = 0; m < RTE_DIM(job_metrics); m++) {
		sb_head(&b, job_metrics[m].name, job_metrics[m].gauge ? "gauge" : "counter",
			job_metrics[m].help);
		for (i = 0; i < nj; i++)
			sb_printf(&b, "%s{sigma_job=\"%u\"} %" PRIu64 "\n", job_metrics[m].name, jobs[i].id,
				  *(const uint64_t *)((const char *)&jobs[i] + job_metrics[m].off));
	}
	/* n_keys is a count, but not a counter: a gauge of its own */
	sb_head(&b, "sigma_job_keys", "gauge", "keys the job holds here (an open job: made so far)");
	for (i = 0; i < nj; i++)
		sb_printf(&b, "sigma_job_keys{sigma_job=\"%u\"} %u\n", jobs[i].id, jobs[i].n_keys);
	sb_head(&b, "sigma_job_info", "gauge", "1 per job, labelled with what it was created with");
	for (i = 0; i < nj; i++)
		sb_printf(&b, "sigma_job_info{sigma_job=\"%u\",workers=\"%u\",dtype=\"%s\",mode=\"%s\","
			  "keys=\"%s\"} 1\n", jobs[i].id, jobs[i].n_workers,
			  sg_dtype_name(jobs[i].dtype), sg_mode_name(jobs[i].mode),
			  jobs[i].open ? "open" : "fixed");
	if (s->cfg.ops->job_lateness != NULL)
		metrics_late(s, &b, jobs, nj);
	if ((nd = sg_ctl_srv_drops(s, &drops, &err)) < 0)
		nd = 0;
	sb_head(&b, "sigma_drops_total", "counter", "packets the node dropped, by reason");
	for (i = 0; i < nd; i++)
		sb_printf(&b, "sigma_drops_total{reason=\"%s\"} %" PRIu64 "\n", drops[i].reason,
			  drops[i].count);
	free(drops);
	sg_ctl_server_get_stats(s, &st);
	sb_head(&b, "sigma_ctl_refusals_total", "counter", "control requests refused, by reason");
	sb_printf(&b,
		  "sigma_ctl_refusals_total{reason=\"auth_failed\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"unauthenticated\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"malformed\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"oversized\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"unknown_method\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"timeout\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"conn_limit\"} %" PRIu64 "\n",
		  st.auth_failed, st.unauthenticated, st.malformed, st.oversized,
		  st.unknown_method, st.timeouts, st.conns_refused);
	sb_head(&b, "sigma_ctl_requests_total", "counter", "control requests answered");
	sb_printf(&b, "sigma_ctl_requests_total %" PRIu64 "\n", st.requests);
	sb_head(&b, "sigma_draining", "gauge", "1 while the node drains");
	sb_printf(&b, "sigma_draining %d\n", s->draining ? 1 : 0);
	free(ls);
	free(jobs);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
