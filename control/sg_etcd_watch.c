/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_etcd's threads (sg_etcd.h): a node's registration under a lease it keeps,
 * and a worker's membership watch (polls and a v3 watch stream).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "sg_ctl_place.h"
#include "sg_desc.h"
#include "sg_etcd.h"
#include "sg_parse.h"
#include "sg_etcd_internal.h"

/* ---- background threads -------------------------------------------------- */

/* A stoppable sleep: returns true when asked to stop. */
struct ticker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
};

static int ticker_init(struct ticker *t)
{
	pthread_condattr_t ca;

	t->stop = false;
	if (pthread_condattr_init(&ca) != 0)
		return -ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&t->cv, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		return -ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&t->mu, NULL);
	return 0;
}

static void ticker_fini(struct ticker *t)
{
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
}

static bool ticker_wait(struct ticker *t, uint32_t ms)
{
	struct timespec ts;
	bool stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&t->mu);
	while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
		;
	stop = t->stop;
	pthread_mutex_unlock(&t->mu);
	return stop;
}

static void ticker_stop(struct ticker *t)
{
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* A background thread with its stoppable sleep and the lock of what it publishes. */
struct worker {
	pthread_t th;
	struct ticker tick;
	pthread_mutex_t mu;
};

static int worker_start(struct worker *w, void *(*fn)(void *), void *arg)
{
	int rc;

	if (ticker_init(&w->tick) < 0)
		return ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	rc = pthread_create(&w->th, NULL, fn, arg);
	if (rc != 0) {
		ticker_fini(&w->tick);
		pthread_mutex_destroy(&w->mu);
	}
	return rc;
}

static void worker_stop(struct worker *w)
{
	ticker_stop(&w->tick);
	pthread_join(w->th, NULL);
	ticker_fini(&w->tick);
	pthread_mutex_destroy(&w->mu);
}

/* ---- registration -------------------------------------------------------- */

struct sg_etcd_reg {
	struct sg_etcd *e;
	struct sg_etcd_reg_conf conf;
	char key[SG_ETCD_CLUSTER_MAX + SG_NAME_MAX + 16];
	char record[512];
	int record_len;
	struct worker w; /* its lock guards st */
	struct sg_etcd_reg_status st;
};

static void reg_fail(struct sg_etcd_reg *r, const char *what, bool *quiet)
{
	pthread_mutex_lock(&r->w.mu);
	r->st.failures++;
	r->st.registered = false;
	snprintf(r->st.last_error, sizeof(r->st.last_error), "%s: %s", what,
		 sg_etcd_last_error(r->e));
	pthread_mutex_unlock(&r->w.mu);
	if (!*quiet)
		SG_ETCD_LOG("node %s: %s failed: %s; summing goes on, registering again when etcd "
			    "answers", r->conf.node.name, what, sg_etcd_last_error(r->e));
	*quiet = true;
}

static void *reg_main(void *arg)
{
	struct sg_etcd_reg *r = arg;
	uint32_t period_ms = r->conf.ttl_s * 1000 / 3;
	int64_t lease = 0;
	bool quiet = false; /* a failure was said and nothing went right since */

	if (period_ms < 300)
		period_ms = 300;
	/* a request must not outlast a period: the lease would run out behind it */
	if (r->e->conf.timeout_ms > period_ms)
		r->e->conf.timeout_ms = period_ms;
	do {
		int rc;

		if (lease != 0) {
			rc = sg_etcd_lease_keepalive(r->e, lease, NULL);
			if (rc == 0) {
				pthread_mutex_lock(&r->w.mu);
				r->st.keepalives++;
				r->st.registered = true;
				pthread_mutex_unlock(&r->w.mu);
				if (quiet)
					SG_ETCD_LOG("node %s: etcd is back (%s), lease %" PRIx64 " kept",
						    r->conf.node.name, sg_etcd_endpoint(r->e),
						    (uint64_t)lease);
				quiet = false;
				continue;
			}
			if (rc != -ENOENT) {
				reg_fail(r, "lease keepalive", &quiet);
				/* retry sooner than the period: the lease runs out meanwhile */
				continue;
			}
			SG_ETCD_LOG("node %s: lease %" PRIx64 " expired (etcd was out of reach "
				    "longer than the TTL of %u s): registering again",
				    r->conf.node.name, (uint64_t)lease, r->conf.ttl_s);
			pthread_mutex_lock(&r->w.mu);
			r->st.expired++;
			r->st.registered = false;
			r->st.lease = 0;
			pthread_mutex_unlock(&r->w.mu);
			lease = 0;
		}
		rc = sg_etcd_lease_grant(r->e, r->conf.ttl_s, &lease);
		if (rc < 0) {
			lease = 0;
			reg_fail(r, "lease grant", &quiet);
			continue;
		}
		rc = sg_etcd_put(r->e, r->key, r->record, (size_t)r->record_len, lease);
		if (rc < 0) {
			reg_fail(r, "record put", &quiet);
			sg_etcd_lease_revoke(r->e, lease);
			lease = 0;
			continue;
		}
		pthread_mutex_lock(&r->w.mu);
		r->st.registrations++;
		r->st.registered = true;
		r->st.lease = lease;
		pthread_mutex_unlock(&r->w.mu);
		SG_ETCD_LOG("node %s registered at %s (lease %" PRIx64 ", TTL %u s) through %s%s",
			    r->conf.node.name, r->key, (uint64_t)lease, r->conf.ttl_s,
			    sg_etcd_endpoint(r->e), quiet ? ", etcd is back" : "");
		quiet = false;
	} while (!ticker_wait(&r->w.tick, quiet ? 200 : period_ms));
	pthread_mutex_lock(&r->w.mu);
	r->st.lease = lease;
	pthread_mutex_unlock(&r->w.mu);
	return NULL;
}

struct sg_etcd_reg *sg_etcd_reg_start(const struct sg_etcd_reg_conf *conf)
{
	struct sg_etcd_reg *r;
	int rc;

	if (conf == NULL || (conf->ttl_s > 3600)) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->conf = *conf;
	r->conf.cluster = NULL;
	r->conf.etcd.endpoints = NULL;
	if (r->conf.ttl_s == 0)
		r->conf.ttl_s = DEF_TTL_S;
	rc = sg_etcd_prefix(conf->cluster, r->key, sizeof(r->key) - SG_NAME_MAX - 8);
	if (rc == 0) {
		r->record_len = sg_etcd_node_format(&conf->node, r->record, sizeof(r->record));
		rc = r->record_len < 0 ? r->record_len : 0;
	}
	if (rc < 0) {
		SG_ETCD_LOG("bad registration: cluster '%s' (1..63 of [A-Za-z0-9._-]) or node "
			    "record of '%s'", conf->cluster ? conf->cluster : "", conf->node.name);
		free(r);
		errno = EINVAL;
		return NULL;
	}
	strcat(r->key, "/nodes/");
	strcat(r->key, conf->node.name);
	r->e = sg_etcd_create(&conf->etcd);
	if (r->e == NULL) {
		rc = errno;
		free(r);
		errno = rc;
		return NULL;
	}
	rc = worker_start(&r->w, reg_main, r);
	if (rc != 0) {
		sg_etcd_destroy(r->e);
		free(r);
		errno = rc;
		return NULL;
	}
	return r;
}

void sg_etcd_reg_status(struct sg_etcd_reg *r, struct sg_etcd_reg_status *st)
{
	pthread_mutex_lock(&r->w.mu);
	*st = r->st;
	pthread_mutex_unlock(&r->w.mu);
}

void sg_etcd_reg_stop(struct sg_etcd_reg *r, bool leave)
{
	if (r == NULL)
		return;
	worker_stop(&r->w);
	if (leave && r->st.lease != 0 && sg_etcd_lease_revoke(r->e, r->st.lease) == 0)
		SG_ETCD_LOG("node %s left: lease %" PRIx64 " revoked", r->conf.node.name,
			    (uint64_t)r->st.lease);
	sg_etcd_destroy(r->e);
	free(r);
}

/* ---- membership watch ---------------------------------------------------- */

/* One key under the watched prefix as last read: the copy of etcd the watch keeps. */
struct ment {
	char *key;
	int64_t mod;			/* its mod_revision */
	int64_t lease;
	bool node_ok;			/* a node record that parses: node */
	struct sg_etcd_node node;
	struct sg_etcd_job *job;	/* a job record that parses, or NULL */
};

/* A lease the watch renews for its user (sg_etcd_watch_keep()). */
struct kept {
	int64_t lease;
	uint64_t due;			/* next renewal, CLOCK_MONOTONIC ns */
};

/* Why a stream ended, from the stream's side. */
struct wstream {
	struct sg_etcd_watch *w;
	char *buf;			/* what came and is not a whole message yet */
	size_t len, cap;
	bool created;			/* etcd said the watch is made */
	int err;			/* 0, or why we ended it: -ESTALE, -EPROTO, -ECONNRESET... */
	char why[160];
};

struct sg_etcd_watch {
	struct sg_etcd *e;
	char cluster[SG_ETCD_CLUSTER_MAX];
	char prefix[SG_ETCD_CLUSTER_MAX + 32];	  /* read and watched: nodes/ or every record */
	char nodes_pfx[SG_ETCD_CLUSTER_MAX + 32]; /* <prefix>/nodes/ */
	char jobs_pfx[SG_ETCD_CLUSTER_MAX + 32];  /* <prefix>/jobs/ */
	uint32_t poll_ms;
	bool polling;			/* no streams: the conf, or the gateway refused one */
	struct worker w;		/* its lock guards names, n, seen, ents, kept, st */
	_Atomic uint64_t gen;		/* st.generation, read without the lock */
	_Atomic bool stop;
	CURLM *multi;			/* the stream's, woken up by sg_etcd_watch_stop() */
	CURL *sh;			/* the stream's transfer */
	char serr[CURL_ERROR_SIZE];	/* libcurl's detail of its last failure */
	int efd;			/* an eventfd written at every change */
	char (*names)[SG_NAME_MAX];	/* live names, sorted */
	unsigned int n;
	/* every name seen, with the lease first seen (-1: lost for good), sorted by name */
	struct seen {
		char name[SG_NAME_MAX];
		int64_t lease;
	} *seen;
	unsigned int n_seen;
	struct ment *ents;		/* sorted by key */
	size_t n_ents, cap_ents;
	bool jobs_changed;		/* since the last publication */
	struct kept *kept;
	unsigned int n_kept;
	int64_t rev;			/* the store's revision the copy is at */
	struct sg_etcd_watch_stats st;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Keep the nodes of this read that are still under the lease first seen, in
 * @p names (sorted); a name gone or under a new lease is lost for good.
 * @return how many are kept.
 */
static int watch_incarnations(struct sg_etcd_watch *w, const struct sg_etcd_node *nodes, int n,
			      char (*names)[SG_NAME_MAX])
{
	int kept = 0;

	for (unsigned int k = 0; k < w->n_seen; k++) {
		bool here = false;

		for (int i = 0; i < n && !here; i++)
			here = strcmp(nodes[i].name, w->seen[k].name) == 0 &&
			       nodes[i].lease == w->seen[k].lease;
		if (!here && w->seen[k].lease != -1) {
			SG_ETCD_LOG("membership of cluster %s: node %s is gone (its record under "
				    "lease %" PRIx64 " is not there)", w->cluster, w->seen[k].name,
				    (uint64_t)w->seen[k].lease);
			w->seen[k].lease = -1;
		}
	}
	for (int i = 0; i < n; i++) {
		struct seen *sn = NULL;

		for (unsigned int k = 0; k < w->n_seen && sn == NULL; k++)
			if (strcmp(w->seen[k].name, nodes[i].name) == 0)
				sn = &w->seen[k];
		if (sn == NULL && w->n_seen < SG_MAX_NODES) {
			sn = &w->seen[w->n_seen++];
			memcpy(sn->name, nodes[i].name, SG_NAME_MAX);
			sn->lease = nodes[i].lease;
		}
		if (sn != NULL && sn->lease == nodes[i].lease)
			memcpy(names[kept++], nodes[i].name, SG_NAME_MAX);
	}
	qsort(names, (size_t)kept, SG_NAME_MAX, name_cmp);
	return kept;
}

/* ---- the watch's copy of etcd (its lock held) ---- */

/* Index of @p key in the copy, or -1 with *@p at where it would go. */
static long ment_find(const struct sg_etcd_watch *w, const char *key, size_t *at)
{
	size_t lo = 0, hi = w->n_ents;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(w->ents[mid].key, key);

		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return -1;
}

static void ment_clear(struct sg_etcd_watch *w, struct ment *m)
{
	if (m->job != NULL)
		w->jobs_changed = true;
	free(m->key);
	free(m->job);
	memset(m, 0, sizeof(*m));
}

static void ment_del(struct sg_etcd_watch *w, const char *key)
{
	size_t at;
	long i = ment_find(w, key, &at);

	if (i < 0)
		return;
	ment_clear(w, &w->ents[i]);
	memmove(&w->ents[i], &w->ents[i + 1], (w->n_ents - (size_t)i - 1) * sizeof(*w->ents));
	w->n_ents--;
}

/*
 * Read the record @p value at @p key (revision @p mod) into @p m: a node's or a
 * job's by its prefix; garbage counted and logged once, at its revision.
 */
static void ment_parse(struct sg_etcd_watch *w, struct ment *m, const char *value, size_t len)
{
	char why[200];

	if (strncmp(m->key, w->nodes_pfx, strlen(w->nodes_pfx)) == 0) {
		m->node_ok = sg_etcd_node_parse(m->key, value, len, &m->node, &w->st.garbage, why,
						sizeof(why)) == 0;
		m->node.lease = m->lease;
		if (!m->node_ok)
			SG_ETCD_LOG("ignoring the node record at %s (revision %" PRId64 "): %s",
				    m->key, m->mod, why);
	} else if (strncmp(m->key, w->jobs_pfx, strlen(w->jobs_pfx)) == 0) {
		m->job = malloc(sizeof(*m->job));
		if (m->job != NULL && sg_etcd_job_parse(m->key, value, len, m->job,
							&w->st.job_garbage, why, sizeof(why)) < 0) {
			SG_ETCD_LOG("ignoring the job record at %s (revision %" PRId64 "): %s",
				    m->key, m->mod, why);
			free(m->job);
			m->job = NULL;
		}
		if (m->job != NULL)
			m->job->lease = m->lease;
		w->jobs_changed = true;
	}
}

/* @p key is @p value at revision @p mod: read it unless the copy has that revision. */
static int ment_put(struct sg_etcd_watch *w, const char *key, const char *value, size_t len,
		    int64_t mod, int64_t lease)
{
	size_t at = 0;
	long i = ment_find(w, key, &at);
	struct ment *m;

	if (i >= 0 && w->ents[i].mod == mod && w->ents[i].lease == lease)
		return 0;
	if (i >= 0) {
		m = &w->ents[i];
		ment_clear(w, m);
	} else {
		if (w->n_ents == w->cap_ents) {
			size_t cap = w->cap_ents ? 2 * w->cap_ents : 16;
			struct ment *n = realloc(w->ents, cap * sizeof(*n));

			if (n == NULL)
				return -ENOMEM;
			w->ents = n;
			w->cap_ents = cap;
		}
		memmove(&w->ents[at + 1], &w->ents[at], (w->n_ents - at) * sizeof(*w->ents));
		w->n_ents++;
		m = &w->ents[at];
		memset(m, 0, sizeof(*m));
	}
	m->key = strdup(key);
	if (m->key == NULL) {
		ment_del(w, key);
		return -ENOMEM;
	}
	m->mod = mod;
	m->lease = lease;
	ment_parse(w, m, value, len);
	return 0;
}

/* The copy becomes the read @p kvs (a range of the whole prefix). */
static int ment_reset(struct sg_etcd_watch *w, const struct sg_etcd_kv *kvs, size_t n)
{
	/* keys gone since: both lists are sorted by key */
	for (size_t i = 0, k = 0; i < w->n_ents;) {
		while (k < n && strcmp(kvs[k].key, w->ents[i].key) < 0)
			k++;
		if (k < n && strcmp(kvs[k].key, w->ents[i].key) == 0) {
			i++;
			continue;
		}
		ment_del(w, w->ents[i].key);
	}
	for (size_t k = 0; k < n; k++)
		if (ment_put(w, kvs[k].key, kvs[k].value, kvs[k].len, kvs[k].mod_revision,
			     kvs[k].lease) < 0)
			return -ENOMEM;
	return 0;
}

/* Publish the copy: the live names (and their generation), jobs; wake the user on a change. */
static void watch_publish(struct sg_etcd_watch *w)
{
	struct sg_etcd_node nodes[SG_MAX_NODES];
	char names[SG_MAX_NODES][SG_NAME_MAX];
	unsigned int jobs = 0;
	bool changed;
	int n = 0;

	for (size_t i = 0; i < w->n_ents; i++) {
		if (w->ents[i].node_ok && n < SG_MAX_NODES)
			nodes[n++] = w->ents[i].node;
		jobs += w->ents[i].job != NULL;
	}
	n = watch_incarnations(w, nodes, n, names);
	changed = w->st.generation == 0 || (unsigned int)n != w->n ||
		  memcmp(names, w->names, (size_t)n * SG_NAME_MAX) != 0;
	w->st.nodes = (unsigned int)n;
	w->st.jobs = jobs;
	if (changed) {
		memcpy(w->names, names, (size_t)n * SG_NAME_MAX);
		w->n = (unsigned int)n;
		if (w->st.generation)
			w->st.changes++;
		w->st.generation++;
		atomic_store(&w->gen, w->st.generation);
	}
	if (w->jobs_changed)
		w->st.job_changes++;
	if (changed || w->jobs_changed) {
		uint64_t one = 1;

		if (write(w->efd, &one, sizeof(one)) < 0) {
			/* the counter is at its limit: the reader has a wake-up pending anyway */
		}
	}
	w->jobs_changed = false;
}

/* ---- reachability, leases kept, sleeping ---- */

static void watch_unreachable(struct sg_etcd_watch *w, const char *why, bool *quiet)
{
	pthread_mutex_lock(&w->w.mu);
	w->st.failures++;
	w->st.reachable = false;
	w->st.streaming = false;
	snprintf(w->st.last_error, sizeof(w->st.last_error), "%s", why);
	pthread_mutex_unlock(&w->w.mu);
	if (!*quiet)
		SG_ETCD_LOG("membership of cluster %s: %s; keeping the %u node(s) last read",
			    w->cluster, why, w->n);
	*quiet = true;
}

static void watch_reachable(struct sg_etcd_watch *w, bool *quiet)
{
	if (*quiet)
		SG_ETCD_LOG("membership of cluster %s: etcd answers again (%s)", w->cluster,
			    sg_etcd_endpoint(w->e));
	*quiet = false;
}

/*
 * Renew the kept leases that are due (each every third of its TTL).
 * @return ms until the next is due (at most 1000).
 */
static uint32_t keep_due(struct sg_etcd_watch *w)
{
	uint64_t now = mono_ns(), next = now + 1000000000ull;

	for (;;) {
		int64_t lease = 0, ttl = 0;
		int rc;

		pthread_mutex_lock(&w->w.mu);
		for (unsigned int i = 0; i < w->n_kept && lease == 0; i++)
			if (w->kept[i].due <= now) {
				lease = w->kept[i].lease;
				w->kept[i].due = now + 1000000000ull; /* until it is answered */
			}
		pthread_mutex_unlock(&w->w.mu);
		if (lease == 0)
			break;
		rc = sg_etcd_lease_keepalive(w->e, lease, &ttl);
		pthread_mutex_lock(&w->w.mu);
		for (unsigned int i = 0; i < w->n_kept; i++) {
			if (w->kept[i].lease != lease)
				continue;
			if (rc == 0) {
				w->st.keepalives++;
				w->kept[i].due = now + (uint64_t)(ttl > 1 ? ttl : 1) * 333000000ull;
			} else {
				w->st.keep_failures++;
				/* gone (-ENOENT): its record went with it; else etcd is away */
				w->kept[i].due = rc == -ENOENT ? UINT64_MAX : now + 200000000ull;
			}
		}
		pthread_mutex_unlock(&w->w.mu);
	}
	pthread_mutex_lock(&w->w.mu);
	for (unsigned int i = 0; i < w->n_kept; i++)
		if (w->kept[i].due < next)
			next = w->kept[i].due;
	pthread_mutex_unlock(&w->w.mu);
	return next > now ? (uint32_t)((next - now) / 1000000) : 0;
}

/* Sleep @p ms (renewing the kept leases): @return true when asked to stop. */
static bool watch_sleep(struct sg_etcd_watch *w, uint32_t ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000ull;

	for (;;) {
		uint64_t now = mono_ns();
		uint32_t due = keep_due(w), left;

		if (now >= end)
			return atomic_load(&w->stop);
		left = (uint32_t)((end - now) / 1000000) + 1;
		if (ticker_wait(&w->w.tick, due < left ? due + 1 : left))
			return true;
	}
}

/* ---- reading: a range of the prefix ---- */

static int watch_range(struct sg_etcd_watch *w, bool *quiet)
{
	struct sg_etcd_kv *kvs = NULL;
	size_t n = 0;
	int64_t rev = 0;
	int rc = sg_etcd_get_prefix(w->e, w->prefix, &kvs, &n, &rev);

	if (rc < 0) {
		watch_unreachable(w, sg_etcd_last_error(w->e), quiet);
		return rc;
	}
	watch_reachable(w, quiet);
	pthread_mutex_lock(&w->w.mu);
	rc = ment_reset(w, kvs, n);
	w->rev = rev;
	w->st.polls++;
	w->st.reachable = true;
	watch_publish(w);
	pthread_mutex_unlock(&w->w.mu);
	sg_etcd_kvs_free(kvs, n);
	return rc;
}

/* ---- reading: a v3 watch stream ---- */

/* One event of a watch response (the lock held). @return 0, or -EPROTO for one we cannot read. */
static int stream_event(struct sg_etcd_watch *w, json_t *ev)
{
	json_t *kv = json_object_get(ev, "kv");
	const char *type = json_string_value(json_object_get(ev, "type"));
	char *key = NULL, *value = NULL;
	size_t klen, vlen;
	int64_t mod = sg_etcd_i64(json_object_get(kv, "mod_revision"));
	int rc;

	if (!json_is_object(kv) || sg_etcd_unb64(json_object_get(kv, "key"), &key, &klen) < 0 ||
	    key == NULL || (type != NULL && strcmp(type, "PUT") != 0 && strcmp(type, "DELETE") != 0)) {
		free(key);
		return -EPROTO;
	}
	if (type != NULL && strcmp(type, "DELETE") == 0) {
		ment_del(w, key);
		rc = 0;
	} else {
		rc = sg_etcd_unb64(json_object_get(kv, "value"), &value, &vlen);
		if (rc == 0)
			rc = ment_put(w, key, value ? value : "", value ? vlen : 0, mod,
				      sg_etcd_i64(json_object_get(kv, "lease")));
	}
	if (mod > w->rev)
		w->rev = mod;
	w->st.events++;
	free(key);
	free(value);
	return rc;
}

/* One message of the stream. @return 0, or < 0 to end the stream (ws->err, ws->why set). */
static int stream_message(struct wstream *ws, json_t *msg)
{
	struct sg_etcd_watch *w = ws->w;
	json_t *res = json_object_get(msg, "result"), *evs, *ev;
	const char *why;
	size_t i;
	int rc = 0;

	if (json_is_object(json_object_get(msg, "error")) || !json_is_object(res)) {
		why = json_string_value(json_object_get(json_object_get(msg, "error"), "message"));
		snprintf(ws->why, sizeof(ws->why), "the watch stream said: %s",
			 why ? why : "not a watch response");
		return ws->err = res == NULL && why != NULL ? -EREMOTEIO : -EPROTO;
	}
	if (json_is_true(json_object_get(res, "created")))
		ws->created = true;
	if (json_is_true(json_object_get(res, "canceled"))) {
		int64_t compact = sg_etcd_i64(json_object_get(res, "compact_revision"));

		why = json_string_value(json_object_get(res, "cancel_reason"));
		if (compact > 0)
			snprintf(ws->why, sizeof(ws->why), "etcd compacted its history past "
				 "revision %" PRId64 " (now %" PRId64 ")", w->rev, compact);
		else
			snprintf(ws->why, sizeof(ws->why), "etcd ended the watch: %s",
				 why ? why : "no reason given");
		return ws->err = compact > 0 ? -ESTALE : -ECONNRESET;
	}
	evs = json_object_get(res, "events");
	if (json_array_size(evs) == 0)
		return 0;
	pthread_mutex_lock(&w->w.mu);
	json_array_foreach(evs, i, ev)
		if (rc == 0)
			rc = stream_event(w, ev);
	watch_publish(w);
	pthread_mutex_unlock(&w->w.mu);
	if (rc < 0) {
		snprintf(ws->why, sizeof(ws->why), "an event of the watch stream is unreadable");
		ws->err = rc;
	}
	return rc;
}

/*
 * The stream's bytes: etcd's gateway writes each message as one line of JSON.
 * Whole lines are read (each may hold several objects: json_loadb() with
 * JSON_DISABLE_EOF_CHECK gives where each ends); the rest waits for more.
 */
static size_t on_stream(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct wstream *ws = arg;
	size_t n = size * nmemb, used = 0;
	char *nl;

	if (!sg_etcd_buf_append(&ws->buf, &ws->len, &ws->cap, ptr, n)) {
		snprintf(ws->why, sizeof(ws->why), "a watch message over %u bytes, or no memory",
			 MAX_REPLY);
		ws->err = -EPROTO;
		return 0;
	}
	while ((nl = memchr(ws->buf + used, '\n', ws->len - used)) != NULL) {
		size_t end = (size_t)(nl - ws->buf);

		while (used < end) {
			json_error_t jerr;
			json_t *msg;

			while (used < end && (ws->buf[used] == ' ' || ws->buf[used] == '\t' ||
					      ws->buf[used] == '\r'))
				used++;
			if (used >= end)
				break;
			msg = json_loadb(ws->buf + used, end - used, JSON_DISABLE_EOF_CHECK, &jerr);
			if (msg == NULL) {
				snprintf(ws->why, sizeof(ws->why), "unreadable watch message: %.120s",
					 jerr.text);
				ws->err = -EPROTO;
				return 0;
			}
			used += (size_t)jerr.position;
			if (stream_message(ws, msg) < 0) {
				json_decref(msg);
				return 0;
			}
			json_decref(msg);
		}
		used = end + 1;
	}
	memmove(ws->buf, ws->buf + used, ws->len - used);
	ws->len -= used;
	return n;
}

/* The body of the watch request: from the revision after the copy's. NULL: out of memory. */
static char *stream_body(struct sg_etcd_watch *w)
{
	json_t *k = sg_etcd_b64(w->prefix, strlen(w->prefix)), *end = sg_etcd_range_end(w->prefix);
	json_t *req = k && end ? json_pack("{s:{s:o, s:o, s:I}}", "create_request", "key", k,
					   "range_end", end, "start_revision",
					   (json_int_t)(w->rev + 1)) : NULL;
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;

	if (req == NULL) {
		json_decref(k);
		json_decref(end);
	}
	json_decref(req);
	return body;
}

/*
 * Hold a watch stream on endpoint @p i until it ends. @return 0 when asked to
 * stop; -ECONNRESET (it was made and ended: make another), -ESTALE (compacted:
 * read afresh), -EHOSTUNREACH (no answer from the endpoint), -EOPNOTSUPP (the
 * endpoint answered, but not with a watch), -EPROTO, -ENOMEM; why in @p why.
 */
static int stream_on(struct sg_etcd_watch *w, unsigned int i, const char *body, char *why,
		     size_t whylen)
{
	struct sg_etcd *e = w->e;
	struct wstream ws = {.w = w};
	struct curl_slist *hdrs = NULL;
	uint64_t t0 = mono_ns();
	CURLcode res = CURLE_OK;
	long status = 0;
	int running = 1, rc;

	/* refused credentials are not a gateway without watches: no fall-back to polling */
	if (e->user != NULL && e->token[0] == '\0' &&
	    (rc = sg_etcd_authenticate(e, i, why, whylen)) < 0)
		return rc;
	/* "hasleader": a member cut off from the others ends the watch instead of going quiet */
	if (sg_etcd_easy_prepare(e, w->sh, i, "/v3/watch", body, true, "Grpc-Metadata-hasleader: true",
			 w->serr, &hdrs) < 0)
		return -ENOMEM;
	curl_easy_setopt(w->sh, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(w->sh, CURLOPT_WRITEDATA, &ws);
	/* a member that vanishes without a reset: probes after 2 s idle, then every second */
	curl_easy_setopt(w->sh, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(w->sh, CURLOPT_TCP_KEEPIDLE, 2L);
	curl_easy_setopt(w->sh, CURLOPT_TCP_KEEPINTVL, 1L);
	if (curl_multi_add_handle(w->multi, w->sh) != CURLM_OK) {
		curl_slist_free_all(hdrs);
		return -ENOMEM;
	}
	while (!atomic_load(&w->stop) && running && ws.err == 0) {
		uint32_t ms;

		if (curl_multi_perform(w->multi, &running) != CURLM_OK)
			break;
		if (!running || ws.err)
			break;
		if (!ws.created && mono_ns() - t0 > (uint64_t)e->conf.timeout_ms * 1000000ull) {
			snprintf(why, whylen, "%s: no watch made within %u ms", e->ep[i],
				 e->conf.timeout_ms);
			res = CURLE_OPERATION_TIMEDOUT;
			break;
		}
		if (ws.created && !w->st.streaming) {
			pthread_mutex_lock(&w->w.mu);
			w->st.streams++;
			w->st.streaming = w->st.reachable = true;
			pthread_mutex_unlock(&w->w.mu);
			e->cur = i;
		}
		ms = keep_due(w);
		curl_multi_poll(w->multi, NULL, 0, ms < 1000 ? ms + 1 : 1000, NULL);
	}
	for (CURLMsg *m; (m = curl_multi_info_read(w->multi, &running)) != NULL;)
		if (m->msg == CURLMSG_DONE)
			res = m->data.result;
	curl_easy_getinfo(w->sh, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(w->multi, w->sh);
	curl_slist_free_all(hdrs);
	free(ws.buf);
	pthread_mutex_lock(&w->w.mu);
	w->st.streaming = false;
	pthread_mutex_unlock(&w->w.mu);
	if (atomic_load(&w->stop))
		return 0;
	if (ws.err != 0) {
		snprintf(why, whylen, "%.100s: %.159s", e->ep[i], ws.why);
		/*
		 * an expired auth token: get a new one at the next try. etcd refuses a
		 * watch with a stale token by cancelling it as soon as it is made
		 * ("canceled", cancel_reason "... invalid auth token"), not with an error
		 */
		if ((ws.err == -EREMOTEIO || ws.err == -ECONNRESET) && e->user != NULL &&
		    strstr(ws.why, "auth token") != NULL)
			e->token[0] = '\0';
		return ws.err == -EREMOTEIO ? -ECONNRESET : ws.err;
	}
	if (ws.created) {
		snprintf(why, whylen, "%s: the watch stream ended (%s)", e->ep[i],
			 res == CURLE_OK ? "closed" : curl_easy_strerror(res));
		return -ECONNRESET;
	}
	if (res != CURLE_OK && status == 0) {
		if (why[0] == '\0')
			sg_etcd_curl_why(e->ep[i], res, w->serr, why, whylen);
		return -EHOSTUNREACH;
	}
	snprintf(why, whylen, "%s: /v3/watch answered HTTP %ld without a watch", e->ep[i], status);
	return -EOPNOTSUPP;
}

/* A stream from the revision after the copy's, on the endpoints in turn. @return as stream_on(). */
static int stream_run(struct sg_etcd_watch *w, char *why, size_t whylen)
{
	char *body = stream_body(w), one[SG_ETCD_MAX_ENDPOINTS][320];
	int rc = -EHOSTUNREACH, len;

	if (body == NULL)
		return -ENOMEM;
	for (unsigned int k = 0; k < w->e->n_ep && rc == -EHOSTUNREACH; k++) {
		one[k][0] = '\0';
		rc = stream_on(w, (w->e->cur + k) % w->e->n_ep, body, one[k], sizeof(one[k]));
		if (rc != -EHOSTUNREACH)
			snprintf(why, whylen, "%.255s", one[k]);
	}
	free(body);
	if (rc != -EHOSTUNREACH)
		return rc;
	len = snprintf(why, whylen, "no etcd endpoint answered");
	for (unsigned int k = 0; k < w->e->n_ep && len > 0 && (size_t)len < whylen; k++)
		len += snprintf(why + len, whylen - len, "%s %.150s", k ? ";" : ":", one[k]);
	return rc;
}

static void *watch_main(void *arg)
{
	struct sg_etcd_watch *w = arg;
	bool quiet = false, need_range = true;
	char why[SG_ETCD_ERR_LEN];

	while (!atomic_load(&w->stop)) {
		int rc;

		if (need_range) {
			if (watch_range(w, &quiet) < 0) {
				if (watch_sleep(w, w->poll_ms < 200 ? w->poll_ms : 200))
					break;
				continue;
			}
			need_range = false;
		}
		if (w->polling) {
			if (watch_sleep(w, w->poll_ms))
				break;
			need_range = true;
			continue;
		}
		why[0] = '\0';
		rc = stream_run(w, why, sizeof(why));
		if (rc == 0)
			break;
		if (rc == -ECONNRESET && w->st.streams > 0) {
			pthread_mutex_lock(&w->w.mu);
			w->st.reconnects++;
			pthread_mutex_unlock(&w->w.mu);
			/* again from the revision after the last event: nothing is lost; a pause
			 * keeps a stream that etcd ends at once from spinning */
			if (watch_sleep(w, 20))
				break;
			continue;
		}
		if (rc == -ESTALE) {
			SG_ETCD_LOG("membership of cluster %s: %s: reading it afresh", w->cluster, why);
			need_range = true;
		} else if (rc == -EHOSTUNREACH || rc == -ECONNRESET || rc == -ENOMEM ||
			   rc == -EACCES) {
			watch_unreachable(w, why, &quiet);
			if (watch_sleep(w, 200))
				break;
		} else {
			SG_ETCD_LOG("membership of cluster %s: cannot hold a v3 watch stream (%s): "
				    "polling every %u ms instead", w->cluster, why, w->poll_ms);
			pthread_mutex_lock(&w->w.mu);
			w->polling = w->st.polling = true;
			pthread_mutex_unlock(&w->w.mu);
			need_range = true;
		}
	}
	return NULL;
}

static void watch_free(struct sg_etcd_watch *w)
{
	for (size_t i = 0; i < w->n_ents; i++)
		ment_clear(w, &w->ents[i]);
	free(w->ents);
	free(w->kept);
	if (w->sh != NULL)
		curl_easy_cleanup(w->sh);
	if (w->multi != NULL)
		curl_multi_cleanup(w->multi);
	if (w->efd >= 0)
		close(w->efd);
	sg_etcd_destroy(w->e);
	free(w->seen);
	free(w->names);
	free(w);
}

struct sg_etcd_watch *sg_etcd_watch_create(const struct sg_etcd_watch_conf *c)
{
	struct sg_etcd_watch *w;
	char prefix[SG_ETCD_CLUSTER_MAX + 16];
	int rc;

	if (c == NULL || sg_etcd_prefix(c->cluster, prefix, sizeof(prefix) - 8) < 0 ||
	    (c->poll_ms && (c->poll_ms < 10 || c->poll_ms > 10000)) ||
	    (unsigned int)c->mode > SG_ETCD_WATCH_POLL) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->names = calloc(SG_MAX_NODES, SG_NAME_MAX);
	w->seen = calloc(SG_MAX_NODES, sizeof(*w->seen));
	w->e = sg_etcd_create(&c->etcd);
	rc = w->e == NULL ? errno : 0;
	sg_etcd_global_init(); /* curl_multi_init() below fails if it did */
	w->multi = curl_multi_init();
	w->sh = curl_easy_init();
	snprintf(w->cluster, sizeof(w->cluster), "%s", c->cluster);
	snprintf(w->nodes_pfx, sizeof(w->nodes_pfx), "%s/nodes/", prefix);
	snprintf(w->jobs_pfx, sizeof(w->jobs_pfx), "%s/jobs/", prefix);
	snprintf(w->prefix, sizeof(w->prefix), "%s/%s", prefix, c->jobs ? "" : "nodes/");
	w->poll_ms = c->poll_ms ? c->poll_ms : DEF_POLL_MS;
	w->polling = w->st.polling = c->mode == SG_ETCD_WATCH_POLL;
	if (rc == 0 && (w->efd < 0 || w->names == NULL || w->seen == NULL || w->multi == NULL ||
			w->sh == NULL))
		rc = ENOMEM;
	if (rc == 0)
		rc = worker_start(&w->w, watch_main, w);
	if (rc != 0) {
		watch_free(w);
		errno = rc;
		return NULL;
	}
	return w;
}

struct sg_etcd_watch *sg_etcd_watch_start(const struct sg_etcd_conf *etcd, const char *cluster,
					  uint32_t poll_ms)
{
	struct sg_etcd_watch_conf c = {.cluster = cluster, .poll_ms = poll_ms};

	if (etcd == NULL) {
		errno = EINVAL;
		return NULL;
	}
	c.etcd = *etcd;
	return sg_etcd_watch_create(&c);
}

int sg_etcd_watch_alive(void *watch, uint64_t *gen, const char *const *names, unsigned int n,
			bool *alive)
{
	struct sg_etcd_watch *w = watch;
	uint64_t g = atomic_load(&w->gen);

	if (g == 0 || g == *gen)
		return 0;
	pthread_mutex_lock(&w->w.mu);
	for (unsigned int i = 0; i < n; i++)
		alive[i] = names[i] != NULL &&
			   bsearch(names[i], w->names, w->n, SG_NAME_MAX, name_cmp) != NULL;
	*gen = w->st.generation;
	pthread_mutex_unlock(&w->w.mu);
	return 1;
}

int sg_etcd_watch_job(struct sg_etcd_watch *w, uint32_t id, struct sg_etcd_job *out)
{
	char key[SG_ETCD_CLUSTER_MAX + 48];
	size_t at;
	long i;
	int rc = -ENOENT;

	if (w == NULL || out == NULL)
		return -EINVAL;
	snprintf(key, sizeof(key), "%s%" PRIu32, w->jobs_pfx, id);
	pthread_mutex_lock(&w->w.mu);
	i = ment_find(w, key, &at);
	if (i >= 0 && w->ents[i].job != NULL) {
		*out = *w->ents[i].job;
		rc = 0;
	}
	pthread_mutex_unlock(&w->w.mu);
	return rc;
}

int sg_etcd_watch_keep(struct sg_etcd_watch *w, const int64_t *leases, unsigned int n)
{
	struct kept *k;

	if (w == NULL || (leases == NULL && n))
		return -EINVAL;
	k = calloc(n ? n : 1, sizeof(*k));
	if (k == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&w->w.mu);
	for (unsigned int i = 0; i < n; i++) {
		k[i] = (struct kept){.lease = leases[i], .due = 0};
		for (unsigned int j = 0; j < w->n_kept; j++)
			if (w->kept[j].lease == leases[i])
				k[i].due = w->kept[j].due;
	}
	free(w->kept);
	w->kept = k;
	w->n_kept = n;
	pthread_mutex_unlock(&w->w.mu);
	curl_multi_wakeup(w->multi);
	return 0;
}

int sg_etcd_watch_fd(const struct sg_etcd_watch *w)
{
	return w == NULL ? -EINVAL : w->efd;
}

void sg_etcd_watch_stats(struct sg_etcd_watch *w, struct sg_etcd_watch_stats *st)
{
	pthread_mutex_lock(&w->w.mu);
	*st = w->st;
	pthread_mutex_unlock(&w->w.mu);
}

void sg_etcd_watch_stop(struct sg_etcd_watch *w)
{
	if (w == NULL)
		return;
	atomic_store(&w->stop, true);
	curl_multi_wakeup(w->multi);
	worker_stop(&w->w);
	watch_free(w);
}
