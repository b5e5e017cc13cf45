/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Elastic jobs (sigma_elastic.h, docs/cluster.md "Elastic jobs"). Records, all
 * under J = /sigma/<cluster>/elastic/<job>.<tag> (tag: the first 16 hex digits
 * of the job's token digest, so that a reused job id never reads another job's):
 *   J/job            rank 0's, under its lease: {"id","workers","nodes":[node...]}
 *   J/proposal/<k>   {"epoch":k,"workers":N,"margin":M,"by":...,"why":...,"nodes":[node...]}
 *   J/confirm/<k>/<r> {"rank":r,"rounds":{"<tensor id>":next round,...},"idle":[id...]}
 *   J/abort/<k>      {"epoch":k,"by":...,"reason":...}
 *   J/done/<k>/<r>   {"rank":r}: rank r closed every session before epoch k
 * node = {"name","kind","gbps","weight","addr","port","lease"}.
 * A proposal k is committed when every rank's confirm exists, aborted when its
 * abort exists; each is written only if the other's key is absent (one etcd
 * transaction), so no reader can see both.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "sg_auth.h"
#include "sg_ctl_client.h"
#include "sg_err.h"
#include "sg_ctl_place.h"
#include "sg_dp_proto.h"
#include "sigma_elastic.h"

#define EL_MAX_EPOCHS 256
#define EL_JOB_TTL_S 10
#define EL_RESWITCH_IDLE 4	/* idle_ms a tensor below its switch round waits: a re-switch */
/* idle_ms: below a poll_ms every tensor of a loop slower than it would be idle; above
 * 10 min a tensor that stopped holds a re-switch (4 idle_ms) up for most of an hour */
#define EL_IDLE_MIN_MS 10
#define EL_IDLE_MAX_MS 600000
/* keys per job_keys_add request: the node's limit (4096 fit its default 64 KiB frame) */
#define EL_KEYS_PER_CALL 4096

struct el_node {
	char name[SG_NAME_MAX];
	enum sg_node_kind kind;
	double gbps, weight;
	char addr[16];
	uint16_t port;
	int64_t lease;
	char control[SG_ETCD_CONTROL_MAX];
};

struct el_epoch {
	uint32_t k;
	unsigned int n;
	struct el_node nodes[SG_MAX_NODES];
	uint32_t *rounds;		/* per tensor slot: the round it switches here (k > 0) */
	json_t *switch_at;		/* tensor id -> that round, for every id a rank listed */
	struct sigma_session *s;	/* main thread only */
	struct sigma_tensor *t[SIGMA_ELASTIC_MAX_TENSORS];
	bool closed;
	uint64_t at_ms;			/* when this rank saw it committed */
	bool again;			/* the node set of the epoch before: a re-switch */
	bool tried;			/* proposer: a re-switch of it was proposed */
	struct sigma_elastic *e;
};

struct el_tensor {
	uint32_t id;
	enum sg_dtype dtype;
	uint64_t nelem;
	int prio;
	char name[SG_NAME_MAX];
	uint32_t round;		/* next round */
	uint64_t last_ms;	/* when its last push_pull started (or it was registered) */
	unsigned int ep;	/* index into epochs of its current node set */
	bool limited;		/* a confirmed proposal bounds it */
	uint32_t limit;
};

struct sigma_elastic {
	struct sigma_elastic_conf c;
	struct sigma_job job;
	struct sigma_conf base;
	char cluster[SG_NAME_MAX], prefix[128], jp[256];
	pthread_t thr;
	bool thr_up;
	atomic_bool stop;
	pthread_mutex_t mu;
	/* under mu */
	struct el_node live[SG_MAX_NODES];
	unsigned int n_live;
	atomic_uint_fast64_t live_gen;
	struct el_epoch *ep[EL_MAX_EPOCHS];
	unsigned int n_ep;		/* committed epochs known, ep[0] the first */
	uint32_t next_k;		/* the next proposal number to look at */
	bool pending_confirmed;		/* we confirmed proposal next_k (or are writing it) */
	char *my_confirm;		/* ... that confirmation, as written */
	uint64_t seen_at;		/* ms when proposal next_k was first seen */
	uint64_t retry_at;		/* proposer: not before (ms) */
	uint32_t closed_upto;		/* every session before epoch closed_upto is closed */
	uint32_t done_written;
	struct el_tensor tens[SIGMA_ELASTIC_MAX_TENSORS];
	unsigned int nt;
	struct sigma_elastic_status st;
	char drained[SG_MAX_NODES][SG_NAME_MAX];
	unsigned int n_drained;
	int64_t lease;			/* rank 0: the job record's */
	/* a job of tensors recorded in etcd (its record with our token's digest), or NULL:
	 * the proposer adds the keys a switch moves to each node and rewrites the record */
	struct sg_etcd_job *rec;
	uint32_t rec_written;		/* the newest epoch the record was rewritten for */
	struct sigma_stats closed_st;	/* the counters of the sessions closed */
	char token[65];			/* auth = mac, a proposer: the job's token (zeroed at close) */
	char err[SIGMA_ERR_LEN];
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int set_err(struct sigma_elastic *e, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->err, sizeof(e->err), fmt, ap);
	va_end(ap);
	return rc;
}

static void say(const struct sigma_elastic *e, const char *fmt, ...)
{
	char buf[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "sigma.elastic: job %u rank %u: %s\n", e->job.conf.job, e->c.rank, buf);
}

/* ---- records ---------------------------------------------------------------- */

static json_t *nodes_json(const struct el_node *n, unsigned int cnt)
{
	json_t *a = json_array();

	for (unsigned int i = 0; i < cnt && a; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:f, s:f, s:s, s:i, s:I, s:s}",
			"name", n[i].name, "kind", sg_node_kind_name(n[i].kind), "gbps", n[i].gbps,
			"weight", n[i].weight, "addr", n[i].addr, "port", (int)n[i].port, "lease",
			(json_int_t)n[i].lease, "control", n[i].control));
	return a;
}

/* Strict: every member present and of its type. @return the count, or -EINVAL. */
static int nodes_parse(json_t *a, struct el_node *out)
{
	size_t i;
	json_t *v;

	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > SG_MAX_NODES)
		return -EINVAL;
	json_array_foreach(a, i, v) {
		const char *name, *kind, *addr, *ctl = "";
		json_int_t port, lease;
		double gbps, w;

		if (json_unpack(v, "{s:s, s:s, s:F, s:F, s:s, s:I, s:I, s?s}", "name", &name, "kind",
				&kind, "gbps", &gbps, "weight", &w, "addr", &addr, "port", &port,
				"lease", &lease, "control", &ctl) != 0 ||
		    strlen(name) == 0 || strlen(name) >= SG_NAME_MAX || strlen(addr) >= 16 ||
		    port < 1 || port > 65535 || !(w >= 0) || !(gbps > 0) ||
		    strlen(ctl) >= SG_ETCD_CONTROL_MAX)
			return -EINVAL;
		memset(&out[i], 0, sizeof(out[i]));
		snprintf(out[i].name, sizeof(out[i].name), "%s", name);
		out[i].kind = strcmp(kind, "gpu") == 0 ? SG_NODE_GPU : SG_NODE_CPU;
		out[i].gbps = gbps;
		out[i].weight = w;
		snprintf(out[i].addr, sizeof(out[i].addr), "%s", addr);
		out[i].port = (uint16_t)port;
		out[i].lease = lease;
		snprintf(out[i].control, sizeof(out[i].control), "%s", ctl);
	}
	return (int)json_array_size(a);
}

static const struct sg_etcd_kv *kv_find(const struct sg_etcd_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return &kv[i];
	return NULL;
}

static json_t *kv_json(const struct sg_etcd_kv *kv)
{
	return kv ? json_loadb(kv->value, kv->len, 0, NULL) : NULL;
}

static int put_json(struct sg_etcd *et, const char *key, json_t *v, int64_t lease,
		    const char *const *absent, unsigned int n_absent, bool txn)
{
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
	int rc;

	json_decref(v);
	if (s == NULL)
		return -ENOMEM;
	rc = txn ? sg_etcd_put_if_absent(et, key, s, strlen(s), lease, absent, n_absent)
		 : sg_etcd_put(et, key, s, strlen(s), lease);
	free(s);
	return rc;
}

/* ---- membership, per session --------------------------------------------------- */

/* sigma_conf.membership of an epoch's session: a node is alive while its record is
 * under the lease the epoch names, the same answer on every rank. */
static int el_alive(void *arg, uint64_t *gen, const char *const *names, unsigned int n,
		    bool *alive)
{
	struct el_epoch *ep = arg;
	struct sigma_elastic *e = ep->e;
	uint64_t g = atomic_load(&e->live_gen);

	if (g == 0 || g == *gen)
		return 0;
	pthread_mutex_lock(&e->mu);
	for (unsigned int i = 0; i < n && i < ep->n; i++) {
		alive[i] = false;
		for (unsigned int j = 0; j < e->n_live; j++)
			if (strcmp(e->live[j].name, names[i]) == 0)
				alive[i] = e->live[j].lease == ep->nodes[i].lease;
	}
	pthread_mutex_unlock(&e->mu);
	*gen = g;
	return 1;
}

/* ---- sessions (main thread) ---------------------------------------------------- */

static int open_epoch(struct sigma_elastic *e, struct el_epoch *ep)
{
	struct sigma_node nodes[SG_MAX_NODES];
	double w[SG_MAX_NODES];
	struct sigma_conf c = e->base;

	for (unsigned int i = 0; i < ep->n; i++) {
		nodes[i] = (struct sigma_node){.name = ep->nodes[i].name, .addr = ep->nodes[i].addr,
					       .port = ep->nodes[i].port, .kind = ep->nodes[i].kind,
					       .gbps = ep->nodes[i].gbps};
		w[i] = ep->nodes[i].weight;
	}
	c.job = e->job.conf.job;
	c.rank = e->c.rank;
	c.nworkers = e->job.conf.nworkers;
	c.token = e->job.conf.token;
	c.auth_keys = e->job.auth ? e->job.conf.auth_keys : NULL; /* copied by sigma_open() */
	c.auth_key_id = e->job.conf.auth_key_id;
	c.partition_bytes = e->job.conf.partition_bytes;
	c.chunk_bytes = e->job.conf.chunk_bytes;
	c.nodes = nodes;
	c.nnodes = ep->n;
	c.weights = w;
	c.failover = true;
	c.membership = el_alive;
	c.membership_arg = ep;
	ep->s = sigma_open(&c);
	ep->closed = false;
	if (ep->s == NULL)
		return set_err(e, -errno, "epoch %u: cannot open its session: %s", ep->k,
			       strerror(errno));
	for (unsigned int i = 0; i < e->nt; i++) {
		struct el_tensor *te = &e->tens[i];

		ep->t[i] = sigma_tensor_register(ep->s, te->name, te->id, te->dtype, te->nelem,
						 te->prio);
		if (ep->t[i] == NULL)
			return set_err(e, -errno, "epoch %u: tensor %u: %s", ep->k, te->id,
				       strerror(errno));
	}
	return 0;
}

/* The epochs known, read under the lock: the etcd thread appends to them. */
static unsigned int n_epochs(struct sigma_elastic *e)
{
	unsigned int n;

	pthread_mutex_lock(&e->mu);
	n = e->n_ep;
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* Add session @p s's counters to @p acc (struct sigma_stats is all uint64_t). */
static void stats_add(struct sigma_stats *acc, const struct sigma_session *s)
{
	struct sigma_stats one;
	uint64_t *a = (uint64_t *)acc;
	const uint64_t *v = (const uint64_t *)&one;

	_Static_assert(sizeof(one) % sizeof(uint64_t) == 0, "sigma_stats: counters only");
	sigma_get_stats(s, &one);
	for (size_t f = 0; f < sizeof(one) / sizeof(uint64_t); f++)
		a[f] += v[f];
}

/* The epoch tensor @p i's next round belongs to: the newest whose switch round it has
 * reached. A later epoch may switch it at an earlier round than the one before (a
 * tensor idle at its confirmation, below a switch round it never reached): every rank
 * skips the same epochs, and no rank pushed a round at or past a switch round before
 * it knew it. Under the lock. */
static unsigned int epoch_of(const struct sigma_elastic *e, unsigned int i)
{
	const struct el_tensor *te = &e->tens[i];

	for (unsigned int k = e->n_ep - 1; k > te->ep; k--)
		if (te->round >= e->ep[k]->rounds[i])
			return k;
	return te->ep;
}

/* Tensor @p i to the epoch its next round belongs to, counted as a switch if that is
 * another one. Under the lock. */
static void switch_to_current(struct sigma_elastic *e, unsigned int i)
{
	struct el_tensor *te = &e->tens[i];
	unsigned int to = epoch_of(e, i);

	if (to == te->ep)
		return;
	te->ep = to;
	e->st.switches++;
}

/* Move tensor @p i on to the epoch its next round belongs to, if nothing of it is in
 * flight nor failed in its current one (a wait then reads it there): a tensor idle at a
 * switch whose switch round is its next round leaves its old session now, not at its
 * next push, so that the old one can close. Under the lock. */
static void move_on(struct sigma_elastic *e, unsigned int i)
{
	const struct el_epoch *ep = e->ep[e->tens[i].ep];

	if (ep->s != NULL && ep->t[i] != NULL && sigma_test(ep->t[i]) != 0)
		return;
	switch_to_current(e, i);
}

static void close_unused(struct sigma_elastic *e)
{
	unsigned int n, lo;

	pthread_mutex_lock(&e->mu);
	for (unsigned int i = 0; i < e->nt; i++)
		move_on(e, i);
	n = e->n_ep;
	pthread_mutex_unlock(&e->mu);
	lo = n;
	for (unsigned int i = 0; i < e->nt; i++)
		if (e->tens[i].ep < lo)
			lo = e->tens[i].ep;
	if (e->nt == 0)
		lo = n - 1;
	for (unsigned int k = 0; k < lo; k++) {
		struct el_epoch *ep = e->ep[k];
		bool busy = false;

		if (ep->closed)
			continue;
		for (unsigned int i = 0; ep->s && i < e->nt; i++)
			busy |= ep->t[i] && sigma_test(ep->t[i]) == -EINPROGRESS;
		if (busy)
			return;
		/* an epoch every tensor skipped (two decided at the same rounds) has no session */
		if (ep->s != NULL)
			stats_add(&e->closed_st, ep->s);
		/* under the lock: sigma_elastic_get_stats() may read it from another thread */
		pthread_mutex_lock(&e->mu);
		sigma_close(ep->s);
		ep->s = NULL;
		ep->closed = true;
		e->closed_upto = e->ep[k + 1]->k;
		pthread_mutex_unlock(&e->mu);
	}
}

static void poll_all(struct sigma_elastic *e, int timeout_us)
{
	unsigned int open = 0, n = n_epochs(e);

	for (unsigned int k = 0; k < n; k++)
		open += e->ep[k]->s != NULL;
	for (unsigned int k = 0; k < n; k++)
		if (e->ep[k]->s != NULL)
			sigma_poll(e->ep[k]->s, open > 1 ? 0 : timeout_us);
	if (open > 1 && timeout_us > 0)
		usleep(50);
}

/* ---- the etcd thread --------------------------------------------------------- */

/* Weight of a newcomer: its BytePS split among the new set, scaled so the weights the
 * others keep are unchanged in total: no key moves but those it takes. */
static double join_weight(const struct el_node *keep, unsigned int n, const struct el_node *nw)
{
	struct sg_ctl_place_node pn[SG_MAX_NODES + 1];
	double w[SG_MAX_NODES + 1], have = 0, split = 0;

	for (unsigned int i = 0; i < n; i++)
		pn[i] = (struct sg_ctl_place_node){.name = keep[i].name, .kind = keep[i].kind,
						   .gbps = keep[i].gbps, .alive = true};
	pn[n] = (struct sg_ctl_place_node){.name = nw->name, .kind = nw->kind, .gbps = nw->gbps,
					   .alive = true};
	if (sg_ctl_place_weights(pn, n + 1, w) != 0)
		return 1.0 / (n + 1);
	for (unsigned int i = 0; i < n; i++) {
		have += keep[i].weight;
		split += w[i];
	}
	return n == 0 || !(split > 0) ? w[n] : w[n] * have / split;
}

/* The job on a newcomer: job_create with the job's shape and the new node set (an
 * open job, the token's wire part; the rest of the 64 hex digits is zero). */
static int create_on(struct sigma_elastic *e, const struct el_node *nw, const struct el_node *set,
		     unsigned int n)
{
	struct sg_ctl_client *cl;
	char tok[65], *res = NULL, *msg = NULL, *p;
	json_t *pj, *jn = json_array();
	int rc;

	if (nw->control[0] == '\0')
		return -ENOTCONN;
	if (e->job.auth && e->c.job_token == NULL) {
		say(e, "cannot make job %u on node %s: it has auth = mac, and this rank holds "
		    "no job_token", e->job.conf.job, nw->name);
		return -EACCES;
	}
	if (e->job.auth)
		snprintf(tok, sizeof(tok), "%s", e->c.job_token);
	else
		snprintf(tok, sizeof(tok), "%016" PRIx64 "%048d", e->job.conf.token, 0);
	for (unsigned int i = 0; i < n; i++)
		json_array_append_new(jn, json_pack("{s:s, s:s, s:f, s:f}", "name", set[i].name,
			"kind", sg_node_kind_name(set[i].kind), "gbps", set[i].gbps, "weight",
			set[i].weight));
	pj = json_pack("{s:I, s:i, s:s, s:s, s:I, s:I, s:s, s:o}", "id",
		       (json_int_t)e->job.conf.job, "workers", (int)e->job.conf.nworkers, "dtype",
		       sg_dtype_name(e->job.dtype), "mode", sg_mode_name(e->job.mode),
		       "partition_bytes", (json_int_t)e->job.conf.partition_bytes, "chunk_bytes",
		       (json_int_t)e->job.conf.chunk_bytes, "token", tok, "nodes", jn);
	if (pj != NULL && e->rec != NULL) {
		/* a job of tensors: the newcomer places its keys over the new set itself */
		json_t *ts = json_array();

		for (uint32_t t = 0; t < e->rec->n_tensors && ts; t++)
			json_array_append_new(ts, json_pack("{s:I}", "elems",
							    (json_int_t)e->rec->elems[t]));
		json_object_set_new(pj, "tensors", ts);
	}
	if (pj != NULL && e->job.auth)
		json_object_set_new(pj, "auth", json_string("mac"));
	p = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
	json_decref(pj); /* holds the token: jansson's copies are freed, not zeroed */
	sodium_memzero(tok, sizeof(tok));
	cl = p ? sg_ctl_client_connect(nw->control, e->c.secret, e->c.secret_len, 5000) : NULL;
	if (cl == NULL) {
		free(p);
		say(e, "cannot reach node %s's control endpoint %s to make the job there: %s",
		    nw->name, nw->control, strerror(errno));
		return -ENOTCONN;
	}
	rc = sg_ctl_client_call(cl, "job_create", p, &res, &msg);
	sg_ctl_client_close(cl);
	if (p != NULL)
		sodium_memzero(p, strlen(p));
	free(p);
	free(res);
	/* a node that kept the job (drained, then undrained) has it already */
	if (rc != 0 && msg != NULL && strstr(msg, "in use") != NULL)
		rc = 0;
	if (rc != 0)
		say(e, "node %s refused the job: %s", nw->name, msg ? msg : strerror(-rc));
	free(msg);
	return rc;
}

/* The job record with node set @p set (weights included), into @p r. */
static void rec_with(const struct sigma_elastic *e, const struct el_node *set, unsigned int n,
		     struct sg_etcd_job *r)
{
	*r = *e->rec;
	r->n_nodes = n;
	for (unsigned int i = 0; i < n; i++) {
		_Static_assert(sizeof(r->nodes[i].name) == sizeof(set[i].name), "one name size");
		memset(&r->nodes[i], 0, sizeof(r->nodes[i]));
		memcpy(r->nodes[i].name, set[i].name, sizeof(set[i].name));
		r->nodes[i].name[sizeof(r->nodes[i].name) - 1] = '\0';
		r->nodes[i].kind = set[i].kind;
		r->nodes[i].gbps = set[i].gbps;
		r->nodes[i].weight = set[i].weight;
	}
}

/* A job of tensors: give node set[@p i] every key that placement over @p set gives it
 * (job_keys_add, EL_KEYS_PER_CALL a request; keys it has are skipped), so that a key a
 * switch moves there exists before any rank pushes it. @return 0 or -errno. */
static int keys_on(struct sigma_elastic *e, const struct el_node *set, unsigned int n,
		   unsigned int i)
{
	struct sg_etcd_job *r = malloc(sizeof(*r));
	struct sg_etcd_key *k = NULL;
	struct sg_ctl_client *cl = NULL;
	long nk = -ENOMEM, added = 0;
	int rc = 0;

	if (r != NULL) {
		rec_with(e, set, n, r);
		nk = sg_etcd_job_keys(r, NULL, i, NULL, 0);
	}
	if (nk > 0 && (k = calloc((size_t)nk, sizeof(*k))) != NULL)
		sg_etcd_job_keys(r, NULL, i, k, (size_t)nk);
	free(r);
	if (nk <= 0 || k == NULL) {
		free(k);
		return nk < 0 ? (int)nk : nk == 0 ? 0 : -ENOMEM;
	}
	if (set[i].control[0] == '\0' ||
	    (cl = sg_ctl_client_connect(set[i].control, e->c.secret, e->c.secret_len, 5000)) == NULL) {
		say(e, "cannot reach node %s's control endpoint '%s' to add the keys that move "
		    "there: %s", set[i].name, set[i].control, set[i].control[0] ? strerror(errno) :
		    "none in its record");
		free(k);
		return -ENOTCONN;
	}
	for (long at = 0; at < nk && rc == 0; at += EL_KEYS_PER_CALL) {
		json_t *ks = json_array(), *pj, *rj;
		char *p, *res = NULL, *msg = NULL;

		for (long j = at; j < nk && j < at + EL_KEYS_PER_CALL && ks; j++)
			json_array_append_new(ks, json_integer(k[j].id));
		pj = json_pack("{s:I, s:o}", "id", (json_int_t)e->job.conf.job, "keys", ks);
		p = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
		json_decref(pj);
		rc = p ? sg_ctl_client_call(cl, "job_keys_add", p, &res, &msg) : -ENOMEM;
		rj = res ? json_loads(res, 0, NULL) : NULL;
		added += json_integer_value(json_object_get(rj, "added"));
		if (rc != 0)
			say(e, "node %s refused the keys that move there (job_keys_add): %s",
			    set[i].name, msg ? msg : strerror(-rc));
		json_decref(rj);
		free(p);
		free(res);
		free(msg);
	}
	sg_ctl_client_close(cl);
	if (rc == 0 && added > 0)
		say(e, "node %s: %ld key(s) of its %ld in the proposed node set added there", set[i].name,
		    added, nk);
	free(k);
	return rc;
}

/* Rewrite the job's record (a job of tensors) with the newest epoch's node set and
 * weights, under the lease it is under (its nodes renew it), so that a node's failover
 * builds the current placement's keys. Read again first: written only over a record of
 * this job (our token's digest). Outside the lock. @return 0 or -errno. */
static int rewrite_record(struct sigma_elastic *e, struct sg_etcd *et, const struct el_node *set,
			  unsigned int n, uint32_t k)
{
	struct sg_etcd_kv *kv = NULL;
	const struct sg_etcd_kv *r;
	struct sg_etcd_job *j = malloc(sizeof(*j));
	char key[200], *val = NULL;
	size_t nkv = 0;
	int rc, len;

	snprintf(key, sizeof(key), "%s/jobs/%u", e->prefix, e->job.conf.job);
	if (j == NULL)
		return -ENOMEM;
	rc = sg_etcd_get_prefix(et, key, &kv, &nkv, NULL);
	r = rc == 0 ? kv_find(kv, nkv, key) : NULL;
	if (rc == 0 && (r == NULL || sg_etcd_job_parse(r->key, r->value, r->len, j, NULL, NULL,
						       0) != 0 ||
			strcmp(j->token_digest, e->rec->token_digest) != 0 || j->open))
		rc = -ENOENT;
	if (rc == 0) {
		rec_with(e, set, n, j);
		len = sg_etcd_job_format(j, &val);
		rc = len < 0 ? len : sg_etcd_put(et, key, val, (size_t)len, r->lease);
	}
	if (rc == 0)
		say(e, "job record %s rewritten for epoch %u (%u node(s))", key, k, n);
	else if (rc == -ENOENT)
		say(e, "job record %s gone or no longer this job's: not rewritten for epoch %u", key,
		    k);
	free(val);
	free(j);
	sg_etcd_kvs_free(kv, nkv);
	return rc;
}

static bool is_drained(const struct sigma_elastic *e, const char *name)
{
	for (unsigned int i = 0; i < e->n_drained; i++)
		if (strcmp(e->drained[i], name) == 0)
			return true;
	return false;
}

/* Put proposal next_k. @return 1 (ours), 0 (another writer's first), -errno (etcd). */
static int propose(struct sigma_elastic *e, struct sg_etcd *et, const struct el_node *set,
		   unsigned int n, const char *why)
{
	char key[384];
	json_t *v;
	int rc;

	snprintf(key, sizeof(key), "%s/proposal/%u", e->jp, e->next_k);
	v = json_pack("{s:I, s:i, s:I, s:s, s:s, s:o}", "epoch", (json_int_t)e->next_k, "workers",
		      (int)e->job.conf.nworkers, "margin", (json_int_t)e->c.margin, "by",
		      e->c.rank == 0 ? "rank 0" : "a rank", "why", why, "nodes",
		      nodes_json(set, n));
	rc = put_json(et, key, v, 0, NULL, 0, true);
	if (rc == 1) {
		e->st.proposals++;
		say(e, "proposed epoch %u: %s (%u node(s))", e->next_k, why, n);
	} else if (rc == 0) {
		e->st.races_lost++;
	} else {
		e->st.etcd_failures++;
	}
	return rc;
}

/* Proposer: the node set the job should have, if it differs by a join or a drain.
 * @return whether it does. */
static bool maybe_propose(struct sigma_elastic *e, struct sg_etcd *et)
{
	const struct el_epoch *cur = e->ep[e->n_ep - 1];
	struct el_node set[SG_MAX_NODES];
	char why[512] = "";
	unsigned int n = 0, joins = 0, drains = 0;
	struct el_node join[SG_MAX_NODES];

	for (unsigned int i = 0; i < cur->n; i++) {
		bool live = false;

		for (unsigned int j = 0; j < e->n_live; j++)
			live |= strcmp(e->live[j].name, cur->nodes[i].name) == 0 &&
				e->live[j].lease == cur->nodes[i].lease;
		if (live && is_drained(e, cur->nodes[i].name)) {
			drains++;
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "%sdrain %s",
				 why[0] ? ", " : "", cur->nodes[i].name);
		} else if (live) {
			set[n++] = cur->nodes[i];
		}
	}
	for (unsigned int j = 0; j < e->n_live; j++) {
		bool in = false;

		for (unsigned int i = 0; i < n; i++)
			in |= strcmp(set[i].name, e->live[j].name) == 0;
		if (in || is_drained(e, e->live[j].name) || n + joins >= SG_MAX_NODES)
			continue;
		join[joins] = e->live[j];
		/* a node back gets its weight back (its share returns); a new one its split */
		join[joins].weight = 0;
		for (unsigned int k = 0; k < e->n_ep; k++)
			for (unsigned int i = 0; i < e->ep[k]->n; i++)
				if (strcmp(e->ep[k]->nodes[i].name, join[joins].name) == 0)
					join[joins].weight = e->ep[k]->nodes[i].weight;
		if (!(join[joins].weight > 0))
			join[joins].weight = join_weight(set, n, &join[joins]);
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%sjoin %s",
			 why[0] ? ", " : "", join[joins].name);
		joins++;
	}
	if (joins + drains == 0 || n + joins == 0)
		return false;
	for (unsigned int i = 0; i < joins; i++)
		set[n++] = join[i];
	for (unsigned int i = n - joins; i < n; i++)
		if (create_on(e, &set[i], set, n) != 0) {
			e->retry_at = now_ms() + 1000;
			return true;
		}
	/* a job of tensors: every node of the new set holds its keys there first (a node
	 * that kept the job, or one that stays, may lack some) */
	for (unsigned int i = 0; e->rec != NULL && i < n; i++)
		if (keys_on(e, set, n, i) != 0) {
			e->retry_at = now_ms() + 1000;
			return true;
		}
	propose(e, et, set, n, why);
	return true;
}

/* Proposer: a tensor of ours not pushed for EL_RESWITCH_IDLE idle_ms below the newest
 * epoch's switch round (it stopped between its confirmation and that round, which it may
 * never reach), and some rank still has a session of an older epoch (no done record).
 * Propose the same node set again (once per epoch, never for a re-switch itself): the
 * tensors idle by now switch to it at their next round (rule 4), so the older sessions
 * can close. A sync job's ranks push each round of a tensor together, so what one rank
 * sees idle is idle on every rank. */
static void maybe_reswitch(struct sigma_elastic *e, struct sg_etcd *et,
			   const struct sg_etcd_kv *kv, size_t nkv)
{
	struct el_epoch *cur = e->ep[e->n_ep - 1];
	char why[320] = "", key[384];
	uint64_t now = now_ms(), quiet = (uint64_t)EL_RESWITCH_IDLE * e->c.idle_ms;
	int t = -1;

	if (cur->k == 0 || cur->again || cur->tried)
		return;
	/* a tensor of ours below the newest switch round, not pushed for a while (a slow
	 * loop's busy tensors get there: no epoch for them) */
	for (unsigned int i = 0; i < e->nt && t < 0; i++)
		if (epoch_of(e, i) < e->n_ep - 1 && now - e->tens[i].last_ms >= quiet &&
		    now - cur->at_ms >= quiet)
			t = (int)i;
	if (t < 0)
		return;
	for (unsigned int r = 0; r < e->job.conf.nworkers; r++) {
		snprintf(key, sizeof(key), "%s/done/%u/%u", e->jp, cur->k, r);
		if (kv_find(kv, nkv, key) == NULL)
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%u",
				 why[0] ? ", " : "again: rank(s) ", r);
	}
	if (why[0] == '\0')
		return;
	snprintf(why + strlen(why), sizeof(why) - strlen(why), " still on an older node set "
		 "(tensor %u idle at round %u, below its switch round %u)", e->tens[t].id,
		 e->tens[t].round, cur->rounds[t]);
	/* tried again at the next look only if etcd did not answer */
	cur->tried = propose(e, et, cur->nodes, cur->n, why) >= 0;
}

/* Our confirmation's rounds and the limits they set. A tensor not pushed for idle_ms is
 * listed idle: its limit is its round itself (its next push waits for the decision), so
 * that if every rank lists it idle it switches at that round, not margin rounds later,
 * which a tensor never pushed again would never reach (its old session kept open). */
static void snapshot_limits(struct sigma_elastic *e, json_t *rounds, json_t *idle)
{
	uint64_t now = now_ms();

	for (unsigned int i = 0; i < e->nt; i++) {
		struct el_tensor *te = &e->tens[i];
		bool quiet = now - te->last_ms >= e->c.idle_ms;
		char id[16];

		snprintf(id, sizeof(id), "%u", te->id);
		json_object_set_new(rounds, id, json_integer(te->round));
		if (quiet)
			json_array_append_new(idle, json_integer(te->id));
		te->limited = true;
		te->limit = te->round + (quiet ? 0 : e->c.margin);
	}
}

/* Whether @p confirm lists tensor @p id (decimal) idle. */
static bool listed_idle(json_t *confirm, const char *id)
{
	json_int_t want = (json_int_t)strtoll(id, NULL, 10);
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(confirm, "idle"), i, v)
		if (json_is_integer(v) && json_integer_value(v) == want)
			return true;
	return false;
}

static void unlimit(struct sigma_elastic *e)
{
	for (unsigned int i = 0; i < e->nt; i++)
		e->tens[i].limited = false;
	e->pending_confirmed = false;
	free(e->my_confirm);
	e->my_confirm = NULL;
}

/* Tensor @p id's first round in epoch @p ep: listed by no rank, it was registered after
 * every confirmation, so it is in the new epoch from its start (0). */
static uint32_t switch_round(const struct el_epoch *ep, uint32_t id)
{
	char key[16];
	json_t *v;

	snprintf(key, sizeof(key), "%u", id);
	v = json_object_get(ep->switch_at, key);
	return json_is_integer(v) ? (uint32_t)json_integer_value(v) : 0;
}

/* Proposal k is committed: its epoch, with each tensor's switch round. */
static void commit_epoch(struct sigma_elastic *e, const struct el_node *nodes, unsigned int n,
			 uint32_t margin, json_t **confirms)
{
	struct el_epoch *ep = calloc(1, sizeof(*ep));

	if (ep == NULL || e->n_ep >= EL_MAX_EPOCHS) {
		free(ep);
		return;
	}
	ep->rounds = calloc(SIGMA_ELASTIC_MAX_TENSORS, sizeof(*ep->rounds));
	if (ep->rounds == NULL) {
		free(ep);
		return;
	}
	ep->k = e->next_k;
	ep->n = n;
	ep->e = e;
	memcpy(ep->nodes, nodes, n * sizeof(*nodes));
	ep->at_ms = now_ms();
	ep->again = n == e->ep[e->n_ep - 1]->n;
	for (unsigned int i = 0; i < n && ep->again; i++)
		ep->again = strcmp(nodes[i].name, e->ep[e->n_ep - 1]->nodes[i].name) == 0 &&
			    nodes[i].lease == e->ep[e->n_ep - 1]->nodes[i].lease;
	/* each tensor any rank listed: max over the ranks' limits (round + margin, or the
	 * round of a tensor the rank listed idle) */
	ep->switch_at = json_object();
	for (unsigned int r = 0; r < e->job.conf.nworkers && ep->switch_at; r++) {
		const char *id;
		json_t *v;

		json_object_foreach(json_object_get(confirms[r], "rounds"), id, v) {
			json_t *have = json_object_get(ep->switch_at, id);
			json_int_t want = json_integer_value(v) +
					  (listed_idle(confirms[r], id) ? 0 : margin);

			if (json_is_integer(v) && (have == NULL || json_integer_value(have) < want))
				json_object_set_new(ep->switch_at, id, json_integer(want));
		}
	}
	for (unsigned int i = 0; i < e->nt; i++)
		ep->rounds[i] = switch_round(ep, e->tens[i].id);
	e->ep[e->n_ep++] = ep;
	{
		char r[640] = "";
		struct timespec ts;

		for (unsigned int i = 0; i < e->nt && strlen(r) < sizeof(r) - 32; i++)
			snprintf(r + strlen(r), sizeof(r) - strlen(r), " %u@%u", e->tens[i].id,
				 ep->rounds[i]);
		clock_gettime(CLOCK_REALTIME, &ts);
		say(e, "epoch %u committed (%u node(s)) at unix ms %lld; tensor@first round:%s",
		    ep->k, n, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
		    e->nt ? r : " none yet");
	}
}

/* One look at proposal next_k. */
static void step(struct sigma_elastic *e, struct sg_etcd *et, const struct sg_etcd_kv *kv,
		 size_t nkv)
{
	char key[384];
	const struct sg_etcd_kv *p, *ab;
	json_t *pj, *conf[SG_MAX_WORKERS] = {NULL};
	struct el_node nodes[SG_MAX_NODES];
	unsigned int have = 0, N = e->job.conf.nworkers;
	char missing[256] = "";
	int n;

	snprintf(key, sizeof(key), "%s/proposal/%u", e->jp, e->next_k);
	p = kv_find(kv, nkv, key);
	if (p == NULL) {
		if (e->c.propose > 0 && now_ms() >= e->retry_at && !maybe_propose(e, et))
			maybe_reswitch(e, et, kv, nkv);
		return;
	}
	if (e->seen_at == 0)
		e->seen_at = now_ms();
	snprintf(key, sizeof(key), "%s/abort/%u", e->jp, e->next_k);
	ab = kv_find(kv, nkv, key);
	if (ab != NULL) {
		json_t *a = kv_json(ab);

		snprintf(e->st.last_abort, sizeof(e->st.last_abort), "%s",
			 json_string_value(json_object_get(a, "reason")) ?: "?");
		say(e, "proposal %u aborted: %s; the job stays on epoch %u", e->next_k,
		    e->st.last_abort, e->ep[e->n_ep - 1]->k);
		json_decref(a);
		e->st.aborts++;
		unlimit(e);
		e->next_k++;
		e->seen_at = 0;
		e->retry_at = now_ms() + e->c.confirm_ms;
		return;
	}
	pj = kv_json(p);
	n = nodes_parse(json_object_get(pj, "nodes"), nodes);
	if (n <= 0 || json_integer_value(json_object_get(pj, "workers")) != N) {
		say(e, "proposal %u does not parse (or names another N): ignored until aborted",
		    e->next_k);
		json_decref(pj);
		goto late;
	}
	for (unsigned int r = 0; r < N; r++) {
		snprintf(key, sizeof(key), "%s/confirm/%u/%u", e->jp, e->next_k, r);
		conf[r] = kv_json(kv_find(kv, nkv, key));
		if (conf[r] != NULL)
			have++;
		else
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%u",
				 missing[0] ? ", " : "", r);
	}
	if (have == N) {
		uint32_t margin = (uint32_t)json_integer_value(json_object_get(pj, "margin"));

		commit_epoch(e, nodes, (unsigned int)n, margin ? margin : e->c.margin, conf);
		unlimit(e);
		e->next_k++;
		e->seen_at = 0;
	} else if (conf[e->c.rank] == NULL) {
		const char *abs[1];
		char akey[384], *val;
		int rc;

		/* The first time: our rounds, and the limits they set. After a write that got no
		 * answer (etcd may have applied it): the same record again, the limits kept, so
		 * that no round passes what a confirm etcd holds allows. */
		if (!e->pending_confirmed) {
			json_t *rounds = json_object(), *idle = json_array(), *cj;

			snapshot_limits(e, rounds, idle);
			e->pending_confirmed = true;
			cj = json_pack("{s:i, s:I, s:o, s:o}", "rank", (int)e->c.rank, "epoch",
				       (json_int_t)e->next_k, "rounds", rounds, "idle", idle);
			free(e->my_confirm);
			e->my_confirm = cj ? json_dumps(cj, JSON_COMPACT) : NULL;
			json_decref(cj);
		}
		snprintf(key, sizeof(key), "%s/confirm/%u/%u", e->jp, e->next_k, e->c.rank);
		snprintf(akey, sizeof(akey), "%s/abort/%u", e->jp, e->next_k);
		abs[0] = akey;
		val = e->my_confirm ? strdup(e->my_confirm) : NULL;
		pthread_mutex_unlock(&e->mu);
		rc = val ? sg_etcd_put_if_absent(et, key, val, strlen(val), 0, abs, 1) : -ENOMEM;
		free(val);
		pthread_mutex_lock(&e->mu);
		if (rc == 1)
			e->st.confirms++;
		else if (rc < 0)
			e->st.etcd_failures++; /* tried again at the next look */
		/* rc 0: aborted meanwhile; the next look sees it (the limits hold until then) */
	}
	for (unsigned int r = 0; r < N; r++)
		json_decref(conf[r]);
	json_decref(pj);
	if (have == N)
		return;
late:
	if (now_ms() - e->seen_at > e->c.confirm_ms) {
		const char *abs[SG_MAX_WORKERS];
		char keys[SG_MAX_WORKERS][384], akey[384], reason[320];
		unsigned int na = 0;
		int rc;

		for (unsigned int r = 0; r < N; r++) {
			snprintf(keys[r], sizeof(keys[r]), "%s/confirm/%u/%u", e->jp, e->next_k, r);
			if (kv_find(kv, nkv, keys[r]) == NULL)
				abs[na++] = keys[r];
		}
		snprintf(reason, sizeof(reason), "rank(s) %s did not confirm within %u ms",
			 missing[0] ? missing : "?", e->c.confirm_ms);
		snprintf(akey, sizeof(akey), "%s/abort/%u", e->jp, e->next_k);
		pthread_mutex_unlock(&e->mu);
		{
			char by[32];

			snprintf(by, sizeof(by), "rank %u", e->c.rank);
			rc = put_json(et, akey, json_pack("{s:I, s:s, s:s}", "epoch",
				      (json_int_t)e->next_k, "by", by, "reason", reason), 0, abs, na,
				      true);
		}
		pthread_mutex_lock(&e->mu);
		if (rc < 0)
			e->st.etcd_failures++;
	}
}

static void read_live(struct sigma_elastic *e, struct sg_etcd *et)
{
	struct sg_etcd_node nd[SG_MAX_NODES];
	struct sg_etcd_kv *kv = NULL;
	size_t nkv = 0;
	char dp[160];
	int n = sg_etcd_nodes_get(et, e->cluster, nd, SG_MAX_NODES, NULL);
	bool changed;

	if (n < 0) {
		e->st.etcd_failures++;
		return;
	}
	if (n > SG_MAX_NODES)
		n = SG_MAX_NODES;
	snprintf(dp, sizeof(dp), "%s/drain/", e->prefix);
	if (sg_etcd_get_prefix(et, dp, &kv, &nkv, NULL) < 0) {
		e->st.etcd_failures++;
		return;
	}
	pthread_mutex_lock(&e->mu);
	changed = (unsigned int)n != e->n_live;
	for (int i = 0; i < n; i++) {
		struct el_node x = {.kind = nd[i].kind, .gbps = nd[i].gbps, .port = nd[i].port,
				    .lease = nd[i].lease};

		memcpy(x.name, nd[i].name, sizeof(x.name));
		memcpy(x.addr, nd[i].addr, sizeof(x.addr));
		memcpy(x.control, nd[i].control, sizeof(x.control));
		x.name[sizeof(x.name) - 1] = x.addr[sizeof(x.addr) - 1] = '\0';
		x.control[sizeof(x.control) - 1] = '\0';
		changed |= strcmp(e->live[i].name, x.name) != 0 || e->live[i].lease != x.lease;
		e->live[i] = x;
	}
	e->n_live = (unsigned int)n;
	if (changed || atomic_load(&e->live_gen) == 0)
		atomic_fetch_add(&e->live_gen, 1);
	e->n_drained = 0;
	for (size_t i = 0; i < nkv && e->n_drained < SG_MAX_NODES; i++)
		snprintf(e->drained[e->n_drained++], SG_NAME_MAX, "%s", kv[i].key + strlen(dp));
	pthread_mutex_unlock(&e->mu);
	sg_etcd_kvs_free(kv, nkv);
}

static void *thread_main(void *arg)
{
	struct sigma_elastic *e = arg;
	struct sg_etcd *et = sg_etcd_create(&e->c.etcd);
	uint64_t keep_at = 0;

	while (et != NULL && !atomic_load(&e->stop)) {
		struct sg_etcd_kv *kv = NULL;
		size_t nkv = 0;
		char jp[300];

		read_live(e, et);
		snprintf(jp, sizeof(jp), "%s/", e->jp);
		if (sg_etcd_get_prefix(et, jp, &kv, &nkv, NULL) == 0) {
			pthread_mutex_lock(&e->mu);
			step(e, et, kv, nkv);
			if (e->closed_upto > e->done_written) {
				char key[384];
				uint32_t k = e->closed_upto;

				snprintf(key, sizeof(key), "%s/done/%u/%u", e->jp, k, e->c.rank);
				pthread_mutex_unlock(&e->mu);
				if (put_json(et, key, json_pack("{s:i}", "rank", (int)e->c.rank), 0,
					     NULL, 0, false) == 0)
					e->done_written = k;
				pthread_mutex_lock(&e->mu);
			}
			if (e->rec != NULL && e->c.propose > 0 &&
			    e->ep[e->n_ep - 1]->k > e->rec_written) {
				const struct el_epoch *ep = e->ep[e->n_ep - 1];
				struct el_node set[SG_MAX_NODES];
				unsigned int n = ep->n;
				uint32_t k = ep->k;
				int rc;

				memcpy(set, ep->nodes, n * sizeof(*set));
				pthread_mutex_unlock(&e->mu);
				rc = rewrite_record(e, et, set, n, k);
				pthread_mutex_lock(&e->mu);
				if (rc == 0 || rc == -ENOENT)
					e->rec_written = k;
				else
					e->st.etcd_failures++; /* tried again at the next look */
			}
			pthread_mutex_unlock(&e->mu);
			sg_etcd_kvs_free(kv, nkv);
		} else {
			e->st.etcd_failures++;
		}
		if (e->lease && now_ms() >= keep_at) {
			sg_etcd_lease_keepalive(et, e->lease, NULL);
			keep_at = now_ms() + EL_JOB_TTL_S * 1000 / 3;
		}
		usleep(e->c.poll_ms * 1000u);
	}
	sg_etcd_destroy(et);
	return NULL;
}

/* ---- the API --------------------------------------------------------------- */

static int first_epoch(struct sigma_elastic *e, struct sg_etcd *et, char *err, size_t errlen)
{
	struct el_epoch *ep = calloc(1, sizeof(*ep));
	char key[320];
	uint64_t until = now_ms() + e->c.confirm_ms;

	if (ep == NULL)
		return -ENOMEM;
	ep->e = e;
	e->ep[e->n_ep++] = ep;
	snprintf(key, sizeof(key), "%s/job", e->jp);
	if (e->c.rank == 0) {
		struct sg_etcd_node nd[SG_MAX_NODES];
		int n = sg_etcd_nodes_get(et, e->cluster, nd, SG_MAX_NODES, NULL);
		int rc;

		if (n < 0)
			return sg_err(err, errlen, -EHOSTUNREACH, "etcd: %s",
					  sg_etcd_last_error(et));
		ep->n = e->job.conf.nnodes;
		for (unsigned int i = 0; i < ep->n; i++) {
			struct el_node *x = &ep->nodes[i];

			snprintf(x->name, sizeof(x->name), "%s", e->job.names[i]);
			snprintf(x->addr, sizeof(x->addr), "%s", e->job.addrs[i]);
			x->port = e->job.nodes[i].port ? e->job.nodes[i].port : SG_DP_UDP_PORT;
			x->kind = e->job.nodes[i].kind;
			x->gbps = e->job.nodes[i].gbps > 0 ? e->job.nodes[i].gbps : 1;
			x->weight = e->job.weights[i];
			for (int j = 0; j < n && j < SG_MAX_NODES; j++)
				if (strcmp(nd[j].name, x->name) == 0) {
					x->lease = nd[j].lease;
					snprintf(x->control, sizeof(x->control), "%s", nd[j].control);
				}
		}
		rc = sg_etcd_lease_grant(et, EL_JOB_TTL_S, &e->lease);
		if (rc == 0)
			rc = put_json(et, key, json_pack("{s:I, s:i, s:o}", "id",
				      (json_int_t)e->job.conf.job, "workers", (int)e->job.conf.nworkers,
				      "nodes", nodes_json(ep->nodes, ep->n)), e->lease, NULL, 0, false);
		if (rc < 0)
			return sg_err(err, errlen, rc, "etcd: cannot put %s: %s", key,
					  sg_etcd_last_error(et));
		return 0;
	}
	for (;;) {
		struct sg_etcd_kv *kv = NULL;
		size_t nkv = 0;
		int rc = sg_etcd_get_prefix(et, key, &kv, &nkv, NULL);
		json_t *j = rc == 0 ? kv_json(kv_find(kv, nkv, key)) : NULL;
		int n = j ? nodes_parse(json_object_get(j, "nodes"), ep->nodes) : -1;

		json_decref(j);
		sg_etcd_kvs_free(kv, nkv);
		if (n > 0) {
			ep->n = (unsigned int)n;
			return 0;
		}
		if (now_ms() > until)
			return sg_err(err, errlen, rc < 0 ? -EHOSTUNREACH : -ETIMEDOUT,
					  "no job record %s from rank 0 within %u ms%s%s", key,
					  e->c.confirm_ms, rc < 0 ? ": etcd: " : "",
					  rc < 0 ? sg_etcd_last_error(et) : "");
		usleep(20000);
	}
}

/* A job of tensors recorded in etcd (its record, with our token's digest, not open):
 * kept in e->rec, so that the proposer adds to the nodes of each new set the keys that
 * move to them and rewrites the record at each switch. An unrecorded job of tensors
 * cannot be told from an open one: the first switch that moves a key to a node that
 * stays fails it (ERROR MISMATCH). @return 0 or -ENOMEM. */
static int read_fixed(struct sigma_elastic *e, struct sg_etcd *et, const char *digest)
{
	struct sg_etcd_kv *kv = NULL;
	const struct sg_etcd_kv *r;
	struct sg_etcd_job *j;
	size_t nkv = 0;
	char key[200];

	snprintf(key, sizeof(key), "%s/jobs/%u", e->prefix, e->job.conf.job);
	if (sg_etcd_get_prefix(et, key, &kv, &nkv, NULL) < 0)
		return 0; /* etcd away: the job record's read says so next */
	r = kv_find(kv, nkv, key);
	j = r ? malloc(sizeof(*j)) : NULL;
	if (r != NULL && j == NULL) {
		sg_etcd_kvs_free(kv, nkv);
		return -ENOMEM;
	}
	if (j != NULL && sg_etcd_job_parse(r->key, r->value, r->len, j, NULL, NULL, 0) == 0 &&
	    !j->open && strcmp(j->token_digest, digest) == 0) {
		e->rec = j;
		j = NULL;
	}
	free(j);
	sg_etcd_kvs_free(kv, nkv);
	return 0;
}

/*
 * auth = mac: this rank opens from its own descriptor (its two keys); a rank that
 * proposes holds the job's token too, for the newcomers it makes the job on (a node
 * derives the job key from it: docs/cluster.md, "Elastic jobs with auth"), checked
 * against the descriptor's wire token and key id. @return 0 or -errno, the reason in @p err.
 */
static int auth_conf(struct sigma_elastic *e, const struct sigma_elastic_conf *c, char *err,
		     size_t errlen)
{
	uint8_t k[SG_AUTH_KEY_BYTES];
	char wire[17];
	bool match;

	e->c.job_token = NULL;
	if (!e->job.auth)
		return c->job_token == NULL ? 0 : sg_err(err, errlen, -EINVAL, "job_token is for "
			"a job with auth = mac, and job %u has none", e->job.conf.job);
	if (!e->job.has_keys || e->job.rank != c->rank)
		return sg_err(err, errlen, -EACCES, "job %u has auth = mac and this descriptor "
			      "holds %s: open rank %u with its own descriptor", e->job.conf.job,
			      e->job.has_keys ? "another rank's keys" : "no rank's keys", c->rank);
	if (c->job_token == NULL)
		return e->c.propose > 0 ? sg_err(err, errlen, -EINVAL, "job %u has auth = mac and "
			"rank %u proposes joins: give it the job's token (job_token), which a node "
			"that joins derives the job key from, or make it propose nothing "
			"(propose -1)", e->job.conf.job, c->rank) : 0;
	snprintf(wire, sizeof(wire), "%016" PRIx64, e->job.conf.token);
	match = strlen(c->job_token) == 64 && strncasecmp(c->job_token, wire, 16) == 0 &&
		sg_auth_job_key_from_token(c->job_token, k) == 0 &&
		sg_auth_key_id(k) == e->job.conf.auth_key_id;
	sodium_memzero(k, sizeof(k));
	if (!match)
		return sg_err(err, errlen, -EINVAL, "job_token is not job %u's token (64 hex "
			      "digits whose job key has the descriptor's key_id)", e->job.conf.job);
	snprintf(e->token, sizeof(e->token), "%s", c->job_token);
	e->c.job_token = e->token;
	return 0;
}

struct sigma_elastic *sigma_elastic_open(const struct sigma_elastic_conf *c, char *err,
					 size_t errlen)
{
	struct sigma_elastic *e;
	struct sg_etcd *et;
	char digest[SG_ETCD_DIGEST_LEN];
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (c == NULL || c->descriptor == NULL) {
		errno = EINVAL;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	pthread_mutex_init(&e->mu, NULL);
	e->c = *c;
	snprintf(e->cluster, sizeof(e->cluster), "%s", c->cluster ? c->cluster : "default");
	e->c.poll_ms = c->poll_ms ? c->poll_ms : 50;
	e->c.margin = c->margin ? c->margin : 4;
	e->c.confirm_ms = c->confirm_ms ? c->confirm_ms : 10000;
	e->c.wait_ms = c->wait_ms ? c->wait_ms : 60000;
	e->c.idle_ms = c->idle_ms ? c->idle_ms : 1000;
	e->c.propose = c->propose ? c->propose : (c->rank == 0 ? 1 : -1);
	if (c->base != NULL)
		e->base = *c->base;
	e->next_k = 1;
	rc = sigma_job_parse(c->descriptor, &e->job, err, errlen);
	if (rc == 0 && (e->job.mode == SG_MODE_ASYNC || c->rank >= e->job.conf.nworkers ||
			e->c.poll_ms < 10 || e->c.poll_ms > 10000 || e->c.margin > 1000 ||
			e->c.idle_ms < EL_IDLE_MIN_MS || e->c.idle_ms > EL_IDLE_MAX_MS))
		rc = sg_err(err, errlen, -EINVAL, "an elastic job needs sync or deterministic "
				"mode, a rank below N, poll_ms 10..10000, margin 1..1000 and idle_ms "
				"%u..%u", EL_IDLE_MIN_MS, EL_IDLE_MAX_MS);
	if (rc == 0)
		rc = auth_conf(e, c, err, errlen);
	if (rc == 0 && (rc = sg_etcd_prefix(e->cluster, e->prefix, sizeof(e->prefix))) < 0)
		sg_err(err, errlen, rc, "bad cluster name '%s'", e->cluster);
	if (rc == 0 && (rc = sg_etcd_token_digest(e->cluster, e->job.conf.job, e->job.conf.token,
						  digest)) < 0)
		sg_err(err, errlen, rc, "cannot compute the token digest");
	if (rc < 0)
		goto fail;
	snprintf(e->jp, sizeof(e->jp), "%s/elastic/%u.%.16s", e->prefix, e->job.conf.job, digest);
	et = sg_etcd_create(&c->etcd);
	if (et == NULL) {
		rc = sg_err(err, errlen, -EINVAL, "bad etcd endpoints");
		goto fail;
	}
	rc = read_fixed(e, et, digest);
	if (rc == 0)
		rc = first_epoch(e, et, err, errlen);
	sg_etcd_destroy(et);
	if (rc == 0)
		rc = open_epoch(e, e->ep[0]);
	if (rc < 0 && err && !err[0])
		snprintf(err, errlen, "%s", e->err);
	if (rc == 0 && (rc = -pthread_create(&e->thr, NULL, thread_main, e)) == 0)
		e->thr_up = true;
	if (rc < 0)
		goto fail;
	return e;
fail:
	sigma_elastic_close(e);
	errno = -rc;
	return NULL;
}

void sigma_elastic_close(struct sigma_elastic *e)
{
	if (e == NULL)
		return;
	atomic_store(&e->stop, true);
	if (e->thr_up)
		pthread_join(e->thr, NULL);
	for (unsigned int k = 0; k < e->n_ep; k++) {
		sigma_close(e->ep[k]->s);
		free(e->ep[k]->rounds);
		json_decref(e->ep[k]->switch_at);
		free(e->ep[k]);
	}
	if (e->c.rank == 0 && e->jp[0]) {
		struct sg_etcd *et = sg_etcd_create(&e->c.etcd);
		char key[300];

		snprintf(key, sizeof(key), "%s/", e->jp);
		if (et != NULL) {
			sg_etcd_delete(et, key, true);
			if (e->lease)
				sg_etcd_lease_revoke(et, e->lease);
		}
		sg_etcd_destroy(et);
	}
	pthread_mutex_destroy(&e->mu);
	sodium_memzero(e->token, sizeof(e->token));
	sodium_memzero(e->job.auth_keys, sizeof(e->job.auth_keys));
	free(e->rec);
	free(e->my_confirm);
	free(e);
}

static struct el_tensor *find(struct sigma_elastic *e, uint32_t id, unsigned int *idx)
{
	for (unsigned int i = 0; i < e->nt; i++)
		if (e->tens[i].id == id) {
			if (idx)
				*idx = i;
			return &e->tens[i];
		}
	return NULL;
}

int sigma_elastic_tensor(struct sigma_elastic *e, const char *name, uint32_t id,
			 enum sg_dtype dtype, uint64_t nelem, int priority)
{
	struct el_tensor *te;
	int rc = 0;

	if (e == NULL)
		return -EINVAL;
	if (find(e, id, NULL))
		return -EEXIST;
	if (e->nt >= SIGMA_ELASTIC_MAX_TENSORS)
		return -ENOSPC;
	pthread_mutex_lock(&e->mu);
	te = &e->tens[e->nt];
	/* from the first epoch on: another rank may have listed it in a confirmation, its
	 * first rounds then belong to an older node set (push_pull moves it on) */
	*te = (struct el_tensor){.id = id, .dtype = dtype, .nelem = nelem, .prio = priority,
				 .round = e->base.first_round, .ep = 0, .last_ms = now_ms()};
	for (unsigned int k = 1; k < e->n_ep; k++)
		e->ep[k]->rounds[e->nt] = switch_round(e->ep[k], id);
	snprintf(te->name, sizeof(te->name), "%s", name ? name : "");
	/* registered after our confirmation: its first push waits for the decision */
	te->limited = e->pending_confirmed;
	te->limit = te->round;
	for (unsigned int k = 0; k < e->n_ep && rc == 0; k++) {
		struct el_epoch *ep = e->ep[k];

		if (ep->s == NULL)
			continue;
		ep->t[e->nt] = sigma_tensor_register(ep->s, name, id, dtype, nelem, priority);
		if (ep->t[e->nt] == NULL)
			rc = -errno;
	}
	if (rc == 0)
		e->nt++;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int sigma_elastic_push_pull(struct sigma_elastic *e, uint32_t id, const void *in, void *out)
{
	unsigned int i;
	struct el_tensor *te = e ? find(e, id, &i) : NULL;
	uint64_t t0 = now_ms();
	struct el_epoch *ep;
	bool waited = false;
	int rc;

	if (te == NULL)
		return -ENOENT;
	pthread_mutex_lock(&e->mu);
	while (te->limited && te->round >= te->limit) {
		pthread_mutex_unlock(&e->mu);
		if (!waited)
			e->st.waits++;
		waited = true;
		if (now_ms() - t0 > e->c.wait_ms)
			return set_err(e, -ETIMEDOUT, "tensor %u round %u: proposal %u not decided "
				       "within %u ms (etcd unreachable, or a rank neither confirmed "
				       "nor let it be aborted): the job cannot tell which node set "
				       "its ranks use", id, te->round, e->next_k, e->c.wait_ms);
		poll_all(e, 500);
		pthread_mutex_lock(&e->mu);
	}
	switch_to_current(e, i);
	ep = e->ep[te->ep];
	te->last_ms = now_ms();
	pthread_mutex_unlock(&e->mu);
	/* (again, for a tensor registered late whose first rounds are an older epoch's) */
	if (ep->s == NULL && (rc = open_epoch(e, ep)) < 0)
		return rc;
	if (sigma_tensor_round(ep->t[i]) != te->round &&
	    (rc = sigma_tensor_set_round(ep->t[i], te->round)) < 0)
		return rc;
	rc = sigma_push_pull(ep->t[i], in, out, NULL, NULL);
	if (rc < 0)
		return set_err(e, rc, "%s", sigma_last_error(ep->s));
	pthread_mutex_lock(&e->mu);
	te->round++;
	pthread_mutex_unlock(&e->mu);
	close_unused(e);
	return 0;
}

/* Tensor @p id's libsigma tensor in its current session, or NULL: *rc -ENOENT (no such
 * tensor) or 0 (its session is closed: nothing in flight). */
static struct sigma_tensor *cur_tensor(struct sigma_elastic *e, uint32_t id,
				       struct el_epoch **epp, int *rc)
{
	unsigned int i;
	struct el_tensor *te = e ? find(e, id, &i) : NULL;

	*rc = te == NULL ? -ENOENT : 0;
	if (te == NULL)
		return NULL;
	*epp = e->ep[te->ep];
	return (*epp)->s != NULL ? (*epp)->t[i] : NULL;
}

int sigma_elastic_wait(struct sigma_elastic *e, uint32_t id)
{
	struct el_epoch *ep;
	int rc;
	struct sigma_tensor *t = cur_tensor(e, id, &ep, &rc);

	if (t == NULL)
		return rc;
	while ((rc = sigma_test(t)) == -EINPROGRESS)
		poll_all(e, 1000);
	if (rc < 0)
		set_err(e, rc, "%s", sigma_last_error(ep->s));
	close_unused(e);
	return rc;
}

int sigma_elastic_push_pull_sync(struct sigma_elastic *e, uint32_t id, const void *in, void *out)
{
	int rc = sigma_elastic_push_pull(e, id, in, out);

	return rc < 0 ? rc : sigma_elastic_wait(e, id);
}

int sigma_elastic_part_node(struct sigma_elastic *e, uint32_t id, uint32_t part, char *name)
{
	unsigned int i;
	struct el_tensor *te = e ? find(e, id, &i) : NULL;
	struct el_epoch *ep;
	int n;

	if (te == NULL || name == NULL)
		return -ENOENT;
	pthread_mutex_lock(&e->mu);
	ep = e->ep[epoch_of(e, i)];
	pthread_mutex_unlock(&e->mu);
	if (ep->s == NULL && !ep->closed && open_epoch(e, ep) < 0)
		return -EIO;
	n = ep->s ? sigma_tensor_part_node(ep->t[i], part) : -1;
	if (n < 0 || (unsigned int)n >= ep->n)
		return -EINVAL;
	snprintf(name, SG_NAME_MAX, "%s", ep->nodes[n].name);
	return 0;
}

int sigma_elastic_poll(struct sigma_elastic *e, int timeout_us)
{
	if (e == NULL)
		return -EINVAL;
	poll_all(e, timeout_us);
	close_unused(e);
	return 0;
}

int sigma_elastic_test(struct sigma_elastic *e, uint32_t id)
{
	struct el_epoch *ep;
	int rc;
	struct sigma_tensor *t = cur_tensor(e, id, &ep, &rc);

	if (t == NULL)
		return rc;
	rc = sigma_test(t);
	if (rc < 0 && rc != -EINPROGRESS)
		set_err(e, rc, "%s", sigma_last_error(ep->s));
	return rc;
}

void sigma_elastic_get_stats(struct sigma_elastic *e, struct sigma_stats *st)
{
	pthread_mutex_lock(&e->mu);
	memcpy(st, &e->closed_st, sizeof(*st));
	for (unsigned int k = 0; k < e->n_ep; k++)
		if (e->ep[k]->s != NULL)
			stats_add(st, e->ep[k]->s);
	pthread_mutex_unlock(&e->mu);
}

uint32_t sigma_elastic_round(const struct sigma_elastic *e, uint32_t id)
{
	for (unsigned int i = 0; e && i < e->nt; i++)
		if (e->tens[i].id == id)
			return e->tens[i].round;
	return 0;
}

void sigma_elastic_status(struct sigma_elastic *e, struct sigma_elastic_status *st)
{
	pthread_mutex_lock(&e->mu);
	*st = e->st;
	st->epoch = e->ep[e->n_ep - 1]->k;
	st->nodes = e->ep[e->n_ep - 1]->n;
	st->sessions = 0;
	for (unsigned int k = 0; k < e->n_ep; k++)
		st->sessions += e->ep[k]->s != NULL;
	pthread_mutex_unlock(&e->mu);
}

const char *sigma_elastic_last_error(const struct sigma_elastic *e)
{
	return e ? e->err : "";
}
