/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A summation node's side of failover (docs/cluster.md, "Jobs in etcd"). With
 * sg_ctl_server_config.etcd, the control server watches the cluster's
 * membership and job records (a stream on the watch's own thread, which also
 * renews leases); on the control thread, for each job held here whose record
 * matches it (the digest of the token this node was given, and the job's
 * shape), it has the watch renew the record's lease and, when nodes of the job
 * are lost, adds to the job the keys that placement now gives this node: those
 * that were the lost nodes', each to the node with the next highest score, as
 * every worker computes it. Each key's first push then opens the round the
 * workers push again (docs/client.md, "When a node is lost").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sg_ctl_server_internal.h"

int sg_ctl_cluster_start(struct sg_ctl_server *s, const struct sg_etcd_conf *etcd,
			 const char *cluster)
{
	struct sg_etcd_watch_conf c = {.etcd = *etcd, .cluster = cluster ? cluster : "default",
				       .jobs = true};

	s->cl.rec = malloc(sizeof(*s->cl.rec));
	if (s->cl.rec == NULL)
		return -ENOMEM;
	s->cl.w = sg_etcd_watch_create(&c);
	if (s->cl.w == NULL) {
		int rc = -errno;

		SG_CTL_LOG(ERR, "cannot watch cluster '%s' in etcd %s: %s", c.cluster,
			   etcd->endpoints ? etcd->endpoints : "", strerror(-rc));
		return rc;
	}
	snprintf(s->cl.name, sizeof(s->cl.name), "%s", c.cluster);
	SG_CTL_LOG(INFO, "watching cluster %s in etcd for the records of this node's jobs",
		   s->cl.name);
	return 0;
}

void sg_ctl_cluster_stop(struct sg_ctl_server *s)
{
	sg_etcd_watch_stop(s->cl.w);
	s->cl.w = NULL;
	free(s->cl.rec);
	s->cl.rec = NULL;
}

void sg_ctl_cluster_job_made(struct sg_ctl_server *s, struct srv_job *j, const char *token)
{
	uint64_t wire;

	j->digest[0] = '\0';
	j->lost = 0;
	j->said_lease = j->said_mod = -1;
	if (s->cl.w == NULL)
		return;
	wire = sg_ctl_wire_token(token);
	if (sg_etcd_token_digest(s->cl.name, j->spec.id, wire, j->digest) < 0)
		j->digest[0] = '\0';
	sodium_memzero(&wire, sizeof(wire));
}

/* This node's name (node_info's), once. @return false while it is not known. */
static bool self_known(struct sg_ctl_server *s)
{
	struct sg_ctl_node_info *ni;

	if (s->cl.self[0] != '\0')
		return true;
	if (s->cfg.ops->node_info == NULL || (ni = calloc(1, sizeof(*ni))) == NULL)
		return false;
	if (s->cfg.ops->node_info(s->cfg.ops_arg, ni) == 0)
		snprintf(s->cl.self, sizeof(s->cl.self), "%s", ni->name);
	free(ni);
	return s->cl.self[0] != '\0';
}

/* The job's own record (its digest and shape) that does not name this node: an elastic
 * job's switch (a drain) took this node out of the job's node set. */
static const char not_among[] = "this node is not among its nodes";

/* Why record @p r does not describe job @p j as this node (@p self in it) holds it; NULL if it does. */
static const char *mismatch(const struct srv_job *j, const struct sg_etcd_job *r, int self)
{
	if (strcmp(r->token_digest, j->digest) != 0)
		return "its token digest is not this job's token's (a record of another job of "
		       "this id)";
	if (r->workers != j->spec.n_workers || r->dtype != j->spec.dtype ||
	    r->mode != j->spec.mode || r->partition_bytes != j->spec.partition_bytes ||
	    r->chunk_bytes != j->spec.chunk_bytes || r->open != j->spec.open)
		return "another N, dtype, mode, partition_bytes, chunk_bytes or kind (open or not)";
	if (r->open)
		return NULL;
	if (r->n_tensors != j->spec.n_tensors)
		return "another number of tensors";
	for (uint32_t t = 0; t < r->n_tensors; t++)
		if (r->elems[t] != j->tensors[t].elems)
			return "another size of a tensor";
	if (self < 0)
		return not_among;
	/* An elastic job's switch rewrites the record with its new node set and weights,
	 * after job_keys_add gave this node the keys that move here: so the record may name
	 * other nodes than the job was made with, but its placement never gives this node
	 * more keys than it holds (those it was made with and those added since). */
	if (sg_etcd_job_keys(r, NULL, (unsigned int)self, NULL, 0) > (long)j->spec.n_keys)
		return "another node list or weights (its placement gives this node more keys "
		       "than it holds)";
	return NULL;
}

/* "a, b" of the record's nodes in @p mask into @p buf. */
static void names_of(const struct sg_etcd_job *r, uint64_t mask, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (uint32_t k = 0; k < r->n_nodes && len < cap; k++)
		if (mask >> k & 1)
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
						r->nodes[k].name);
}

/*
 * The keys placement gives node @p self of @p r with the nodes of @p lost gone,
 * less those it had with none gone: what comes here. @return how many (in *@p out,
 * malloc'd), or -errno.
 */
static long moved_here(const struct sg_etcd_job *r, const bool *lost, unsigned int self,
		       struct sg_ctl_key **out)
{
	long n0 = sg_etcd_job_keys(r, NULL, self, NULL, 0);
	long n1 = sg_etcd_job_keys(r, lost, self, NULL, 0), m = 0;
	struct sg_etcd_key *k0 = NULL, *k1 = NULL;
	struct sg_ctl_key *mv = NULL;

	*out = NULL;
	if (n0 < 0 || n1 < 0)
		return n0 < 0 ? n0 : n1;
	k0 = calloc((size_t)n0 + 1, sizeof(*k0));
	k1 = calloc((size_t)n1 + 1, sizeof(*k1));
	mv = calloc((size_t)n1 + 1, sizeof(*mv));
	if (k0 == NULL || k1 == NULL || mv == NULL) {
		m = -ENOMEM;
		goto out;
	}
	sg_etcd_job_keys(r, NULL, self, k0, (size_t)n0);
	sg_etcd_job_keys(r, lost, self, k1, (size_t)n1);
	/* both in key order; a node keeps every key it had (only lost nodes' keys move) */
	for (long a = 0, b = 0; b < n1; b++) {
		while (a < n0 && k0[a].id < k1[b].id)
			a++;
		if (a < n0 && k0[a].id == k1[b].id)
			continue;
		mv[m++] = (struct sg_ctl_key){.id = k1[b].id, .nelem = k1[b].nelem};
	}
	*out = mv;
	mv = NULL;
out:
	free(k0);
	free(k1);
	free(mv);
	return m;
}

/* A digest of the record's node list and weights: tells a rewritten one (a switch). */
static uint64_t nodes_sum(const struct sg_etcd_job *r)
{
	uint64_t h = 1469598103934665603ull;

	for (uint32_t k = 0; k < r->n_nodes; k++) {
		for (const char *c = r->nodes[k].name; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
		h = (h ^ (uint64_t)(r->nodes[k].weight * 1e9)) * 1099511628211ull;
	}
	return h;
}

/* The nodes of fixed job @p j lost since the last look: add the keys that come here. */
static void failover(struct sg_ctl_server *s, struct srv_job *j, const struct sg_etcd_job *r,
		     unsigned int self)
{
	const char *names[SG_MAX_NODES];
	bool alive[SG_MAX_NODES], lost[SG_MAX_NODES] = {false};
	char who[512], reason[SG_CTL_REASON_MAX] = "", keys[200];
	struct sg_ctl_key *mv = NULL;
	uint64_t gen = 0, now_lost = 0, fresh;
	long n;
	int rc, len = 0;

	for (uint32_t k = 0; k < r->n_nodes; k++)
		names[k] = r->nodes[k].name;
	/* a record rewritten with another node set (an elastic switch): its lost bits index
	 * other nodes, so every node it names not alive is looked at afresh (keys that are
	 * here already are skipped by the agent) */
	if (j->nodes_sum != nodes_sum(r)) {
		j->nodes_sum = nodes_sum(r);
		j->lost = 0;
	}
	if (sg_etcd_watch_alive(s->cl.w, &gen, names, r->n_nodes, alive) != 1)
		return; /* nothing read yet */
	/* this node is not lost for itself: its record may be away while etcd is */
	for (uint32_t k = 0; k < r->n_nodes; k++)
		if (!alive[k] && k != self) {
			lost[k] = true;
			now_lost |= 1ull << k;
		}
	fresh = now_lost & ~j->lost;
	if (fresh == 0)
		return;
	names_of(r, fresh, who, sizeof(who));
	if (j->spec.mode == SG_MODE_ASYNC || s->cfg.ops->job_keys_add == NULL) {
		SG_CTL_LOG(WARNING, "job %" PRIu32 ": node(s) %s lost, and its keys are not moved "
			   "here: %s", j->spec.id, who, j->spec.mode == SG_MODE_ASYNC ?
			   "an async job's stores live on their node only (docs/cluster.md)" :
			   "this node cannot add keys to a job");
		__atomic_fetch_add(&s->st.cluster_nodes_lost, __builtin_popcountll(fresh),
				   __ATOMIC_RELAXED);
		j->lost = now_lost;
		return;
	}
	n = moved_here(r, lost, self, &mv);
	rc = n < 0 ? (int)n : s->cfg.ops->job_keys_add(s->cfg.ops_arg, j->spec.id, mv,
						       (uint32_t)n, reason);
	if (rc < 0) {
		SRV_COUNT(s, cluster_add_failures);
		s->cl.retry = true;
		if ((uint64_t)j->said_mod != now_lost)
			SG_CTL_LOG(ERR, "job %" PRIu32 ": node(s) %s lost, but the %ld key(s) of theirs "
				   "that come here cannot be added: %s; trying again", j->spec.id,
				   who, n, reason[0] ? reason : strerror(-rc));
		j->said_mod = (int64_t)now_lost;
		free(mv);
		return;
	}
	for (long i = 0; i < n && len < (int)sizeof(keys) - 16; i++)
		len += snprintf(keys + len, sizeof(keys) - (size_t)len, " 0x%08" PRIx32, mv[i].id);
	SG_CTL_LOG(WARNING, "job %" PRIu32 ": node(s) %s lost (no longer in etcd's membership): %ld "
		   "of their key(s) now summed here (%d new):%s%s", j->spec.id, who, n, rc,
		   n ? keys : " none", len >= (int)sizeof(keys) - 16 ? " ..." : "");
	__atomic_fetch_add(&s->st.cluster_nodes_lost, __builtin_popcountll(fresh),
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->st.cluster_keys_added, (uint64_t)rc, __ATOMIC_RELAXED);
	j->spec.n_keys += (uint32_t)rc;
	j->lost = now_lost;
	free(mv);
}

/* How many of fixed job @p j's keys record @p r's placement (its lost nodes gone, as
 * failover left them) does not give node @p self: keys an elastic switch left here (moved
 * on, or added for a proposal that was aborted). They stay in the job (the data plane
 * removes no key of a live job) and cost only memory. */
static uint32_t spare_keys(const struct srv_job *j, const struct sg_etcd_job *r,
			   unsigned int self)
{
	bool lost[SG_MAX_NODES] = {false};
	long placed;

	for (uint32_t k = 0; k < r->n_nodes; k++)
		lost[k] = (j->lost >> k & 1) != 0;
	placed = sg_etcd_job_keys(r, lost, self, NULL, 0);
	return placed >= 0 && placed < (long)j->spec.n_keys ?
	       j->spec.n_keys - (uint32_t)placed : 0;
}

void sg_ctl_cluster_reconcile(struct sg_ctl_server *s)
{
	int64_t leases[SG_CTL_MAX_JOBS];
	unsigned int nl = 0;
	uint64_t spare = 0;

	if (s->cl.w == NULL)
		return;
	s->cl.retry = false;
	if (!self_known(s)) {
		s->cl.retry = true;
		return;
	}
	for (unsigned int i = 0; i < SG_CTL_MAX_JOBS; i++) {
		struct srv_job *j = &s->jobs[i];
		struct sg_etcd_job *r = s->cl.rec;
		const char *why;
		int self = -1;

		if (!j->used || j->digest[0] == '\0' || sg_etcd_watch_job(s->cl.w, j->spec.id, r) != 0)
			continue;
		for (uint32_t k = 0; k < r->n_nodes && self < 0; k++)
			if (strcmp(r->nodes[k].name, s->cl.self) == 0)
				self = (int)k;
		why = mismatch(j, r, self);
		if (why == not_among) {
			j->spare = j->spec.open ? 0 : j->spec.n_keys; /* summed for no one now */
			/* not a refusal: the job moved on without this node (it renews nothing) */
			if (j->said_lease != r->lease)
				SG_CTL_LOG(INFO, "job %" PRIu32 ": its record in etcd (lease %" PRIx64
					   ") no longer names this node (an elastic job's switch took "
					   "it out): its lease is not renewed here", j->spec.id,
					   (uint64_t)r->lease);
			j->said_lease = r->lease;
			continue;
		}
		if (why != NULL) {
			if (j->said_lease != r->lease) {
				SG_CTL_LOG(WARNING, "job %" PRIu32 ": its record in etcd (lease %"
					   PRIx64 ") is not the job this node holds: %s; ignored",
					   j->spec.id, (uint64_t)r->lease, why);
				SRV_COUNT(s, cluster_refused);
			}
			j->said_lease = r->lease;
			continue;
		}
		if (r->lease != 0)
			leases[nl++] = r->lease;
		if (!r->open) {
			failover(s, j, r, (unsigned int)self);
			j->spare = spare_keys(j, r, (unsigned int)self);
		}
	}
	for (unsigned int i = 0; i < SG_CTL_MAX_JOBS; i++)
		spare += s->jobs[i].used ? s->jobs[i].spare : 0;
	__atomic_store_n(&s->st.keys_spare, spare, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.cluster_records, (uint64_t)nl, __ATOMIC_RELAXED);
	sg_etcd_watch_keep(s->cl.w, leases, nl);
}
