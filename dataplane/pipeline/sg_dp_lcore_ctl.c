/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lcores' control channel, beside the pipeline: what a reducer does with a
 * message between bursts (sg_dp_lcore_ctl(), sg_dp_lcore_ctl_tick()), the key
 * moves it runs on its own packets (sg_dp_move_route(), from every transport
 * through sg_dp_move_fwd()), and the calling side that the agent, telemetry
 * and the verbs transport share (sg_dp_lcore_call(), sg_dp_pipeline_jobs_stats()).
 *
 * Threading: sg_dp_lcore_ctl(), sg_dp_lcore_ctl_tick() and sg_dp_move_route()
 * run on the lcore that owns the engine and the move; the callers' side runs
 * on any other thread, serialised by p->ctl_lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_hash.h>

#include "sg_dp_chan.h"
#include "sg_dp_lcore_ctl.h"
#include "sg_dp_move.h"
#include "sg_dp_transport.h"

/* How long a caller waits for an lcore's answer. */
#define LCORE_CALL_TIMEOUT_US 2000000

/* ---- lcore side --------------------------------------------------------- */

/* Add chunk @p k to the move's table as not seen yet. @return its index, or -1 if full. */
static int move_add_chunk(struct sg_dp_move *mv, const struct sg_dp_move_key *k)
{
	uint32_t i = mv->n_chunks;

	if (i >= mv->cap || rte_hash_add_key_data(mv->chunks, k, (void *)(uintptr_t)i) < 0)
		return -1;
	mv->ch[i] = (struct sg_dp_move_chunk){0};
	mv->n_chunks++;
	return (int)i;
}

/*
 * A PUSH of a chunk the move has no entry for: if it is an open job's and carries the
 * job's token, its key was made after the move started, and the chunk joins the move.
 * @return its index, or -1 (not a chunk of a known job: the engine here counts the drop).
 */
static int move_track_open(struct sg_dp_move *mv, const uint8_t *pl,
			   const struct sg_dp_move_key *k)
{
	uint64_t token;

	if (sg_dp_hdr_type(pl) != SG_DP_T_PUSH)
		return -1;
	token = sg_dp_hdr_token(pl);
	for (uint32_t i = 0; i < mv->n_open; i++)
		if (mv->open[i].job == k->job)
			return mv->open[i].token == token ? move_add_chunk(mv, k) : -1;
	return -1;
}

int sg_dp_move_route(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len)
{
	struct sg_dp_move *mv = lc->mv;
	struct sg_dp_move_key k;
	struct sg_dp_move_chunk *c;
	uint32_t b, round;
	void *data;

	if (len < SG_DP_HDR_LEN)
		return -1;
	k.job = sg_dp_hdr_job(pl);
	k.key = sg_dp_hdr_key(pl);
	b = sg_dp_bucket_of(k.job, k.key);
	if (mv->phase[b] == 0)
		return -1;
	if (mv->phase[b] == 2)
		return mv->to[b];
	if (sg_dp_hdr_type(pl) != SG_DP_T_PUSH && sg_dp_hdr_type(pl) != SG_DP_T_PULL)
		return -1;
	k.chunk = sg_dp_hdr_chunk(pl);
	round = sg_dp_hdr_round(pl);
	if (rte_hash_lookup_data(mv->chunks, &k, &data) < 0) {
		int i = move_track_open(mv, pl, &k);

		if (i < 0)
			return -1; /* not a chunk of a known job: the engine here counts the drop */
		data = (void *)(uintptr_t)i;
	}
	c = &mv->ch[(uintptr_t)data];
	if (c->state == 0) {
		/* this reducer's round is p-1, p or p+1: p+1 is the last one it sums */
		c->sw = round + 2;
		c->state = 1;
		mv->n_seen++;
		return -1;
	}
	if ((int32_t)(round - c->sw) < 0)
		return -1;
	if (c->state == 1 && round != c->sw) {
		/* a push of sw+1: the new owner finished sw, so nobody needs older results */
		c->state = 2;
		mv->n_done++;
	}
	return mv->to[b];
}

/* Flip the keymap for this reducer's moving buckets once every chunk crossed. */
static void move_check(struct sg_dp_lcore *lc)
{
	struct sg_dp_move *mv = lc->mv;
	uint64_t now = sg_dp_now_ns(lc->p, rte_rdtsc());
	unsigned int nb = 0;

	if (mv->n_done < mv->n_chunks && now < mv->hard_ns &&
	    !(now >= mv->idle_ns && mv->n_seen == mv->n_done))
		return;
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		if (mv->phase[b] == 1) {
			__atomic_store_n(&lc->p->keymap[b], mv->to[b], __ATOMIC_RELEASE);
			mv->phase[b] = 2;
			nb++;
		}
	__atomic_store_n(&mv->committed, true, __ATOMIC_RELEASE);
	SG_DP_LOG(INFO, "reducer lcore %u: %u bucket(s) moved: %u of %u chunks crossed a round "
		  "boundary, %u idle%s", lc->lcore_id, nb, mv->n_done, mv->n_chunks,
		  mv->n_chunks - mv->n_seen, mv->n_seen != mv->n_done ?
		  " (some rounds were stuck longer than 4 slot timeouts)" : "");
}

unsigned int sg_dp_lcore_ctl_tick(struct sg_dp_lcore *lc)
{
	unsigned int n = sg_dp_chan_poll(lc->chan, sg_dp_lcore_ctl, lc, 4);

	if (lc->mv != NULL && !lc->mv->committed && !lc->mv->drain)
		move_check(lc);
	return n;
}

struct open_fill {
	struct sg_dp_move *mv;
	uint32_t job;
};

/* sg_dp_engine_job_keys() callback: the chunks of an open job's key in a moving bucket. */
static void open_key_chunks(void *arg, uint32_t key, uint32_t nchunks)
{
	struct open_fill *f = arg;

	if (f->mv->phase[sg_dp_bucket_of(f->job, key)] != 1)
		return;
	for (uint32_t c = 0; c < nchunks; c++) {
		struct sg_dp_move_key k = {.job = f->job, .key = key, .chunk = c};

		if (rte_hash_lookup(f->mv->chunks, &k) < 0 && move_add_chunk(f->mv, &k) < 0)
			return;
	}
}

/*
 * Reducer @p lc takes move @p mv: the chunks of the keys its engine made for open jobs
 * join the move's table, as the agent's list put a fixed job's there. Same thread as
 * the engine, and before any packet meets the move.
 */
static int move_take(struct sg_dp_lcore *lc, struct sg_dp_move *mv)
{
	for (uint32_t i = 0; mv != NULL && i < mv->n_open; i++) {
		struct open_fill f = {.mv = mv, .job = mv->open[i].job};

		sg_dp_engine_job_keys(lc->eng, f.job, open_key_chunks, &f);
	}
	lc->mv = mv;
	return 0;
}

static bool key_in_mask(void *arg, uint32_t job, uint32_t key)
{
	return (*(const uint64_t *)arg >> sg_dp_bucket_of(job, key)) & 1;
}

_Static_assert(SG_BUCKETS <= 64, "a bucket mask fits a message argument");

/*
 * Buckets in @p mask come back to this reducer, which held them before: its
 * engine forgets their old rounds, and its earlier move stops forwarding them.
 * The agent sends this before the current owner starts the move, so none of
 * their packets reach this lcore yet. @return slots freed.
 */
static int keys_release(struct sg_dp_lcore *lc, uint64_t mask)
{
	const struct sg_dp_job_stats *st;
	const uint32_t *ids;
	unsigned int n;
	int freed = 0;

	/* the snapshot table lists the jobs without a table of our own */
	sg_dp_engine_jobs_snapshot(lc->eng);
	n = sg_dp_engine_snapshot(lc->eng, &ids, &st);
	for (unsigned int b = 0; lc->mv != NULL && b < SG_BUCKETS; b++)
		if (mask >> b & 1)
			lc->mv->phase[b] = 0;
	for (unsigned int i = 0; i < n; i++) {
		int rc = sg_dp_engine_release_keys(lc->eng, ids[i], key_in_mask, &mask);

		freed += rc > 0 ? rc : 0;
	}
	return freed;
}

int sg_dp_lcore_ctl(void *arg, struct sg_dp_chan_msg *m)
{
	struct sg_dp_lcore *lc = arg;

	switch (m->type) {
	case SG_DP_CHAN_MSG_NOP:
		return 0;
	case SG_DP_CHAN_MSG_IDLE_POLICY:
		lc->st.idle = m->arg[0] == SG_IDLE_SLEEP ? SG_IDLE_SLEEP : SG_IDLE_POLL;
		return 0;
	case SG_DP_CHAN_MSG_STATS:
		if (lc->eng == NULL)
			return -ENOENT;
		sg_dp_engine_stats(lc->eng, (struct sg_dp_stats *)(uintptr_t)m->arg[0]);
		return 0;
	case SG_DP_MSG_JOB_ADD:
		if (lc->eng == NULL)
			return 0;
		/* the engine allocates the job's tables here: once per job, off the data path */
		return sg_dp_engine_add_job(lc->eng,
					    (const struct sg_dp_job_conf *)(uintptr_t)m->arg[0]);
	case SG_DP_MSG_JOB_REMOVE:
		return lc->eng ? sg_dp_engine_remove_job(lc->eng, (uint32_t)m->arg[0]) : 0;
	case SG_DP_MSG_KEYS_ADD: {
		const struct sg_dp_keys_add *ka = (const void *)(uintptr_t)m->arg[0];

		/* the job's tables grow here: once per failover, off the data path */
		return lc->eng ? sg_dp_engine_add_keys(lc->eng, ka->job, ka->keys, ka->n) : 0;
	}
	case SG_DP_MSG_MOVE_SET:
		if (lc->eng == NULL)
			return -EINVAL;
		return move_take(lc, (struct sg_dp_move *)(uintptr_t)m->arg[0]);
	case SG_DP_MSG_KEYS_RELEASE:
		return lc->eng ? keys_release(lc, m->arg[0]) : 0;
	case SG_DP_MSG_JOB_STATS:
		return lc->eng ? (int)sg_dp_engine_jobs_snapshot(lc->eng) : 0;
	case SG_DP_MSG_JOB_LATE:
		return lc->eng ? sg_dp_engine_job_lateness(lc->eng, (uint32_t)m->arg[0],
							   (struct sg_late *)(uintptr_t)m->arg[1])
			       : -ENOENT;
	default:
		if (m->type >= SG_DP_MSG_TRANSPORT && lc->p->tr->ctl != NULL)
			return lc->p->tr->ctl(lc, m->type, m->arg[0]);
		return -ENOTSUP;
	}
}

/* ---- callers' side (the agent's, telemetry's and the verbs set-up's threads) -- */

/* sg_dp_lcore_call() with p->ctl_lock held by the caller, and a second argument. */
static int lcore_call2_locked(struct sg_dp_pipeline *p, unsigned int i, uint32_t type,
			      uint64_t arg0, uint64_t arg1)
{
	struct sg_dp_chan_msg rq = {.type = type, .arg = {arg0, arg1}}, rs;
	struct sg_dp_lcore *lc = &p->lc[i];
	int rc;

	/* the lcore stays awake and answers at once while this is set (pipeline loop);
	 * a transport whose idle lcores block is woken up first */
	__atomic_store_n(&lc->ctl_waiting, 1, __ATOMIC_SEQ_CST);
	if (p->tr->wake != NULL)
		p->tr->wake(lc);
	rc = sg_dp_chan_call(lc->chan, &rq, &rs, LCORE_CALL_TIMEOUT_US);
	__atomic_store_n(&lc->ctl_waiting, 0, __ATOMIC_RELEASE);
	return rc < 0 ? rc : rs.result;
}

static int lcore_call_locked(struct sg_dp_pipeline *p, unsigned int i, uint32_t type,
			     uint64_t arg0)
{
	return lcore_call2_locked(p, i, type, arg0, 0);
}

int sg_dp_lcore_call(struct sg_dp_pipeline *p, unsigned int i, uint32_t type, uint64_t arg0)
{
	int rc;

	pthread_mutex_lock(&p->ctl_lock);
	rc = lcore_call_locked(p, i, type, arg0);
	pthread_mutex_unlock(&p->ctl_lock);
	return rc;
}

void sg_dp_jobs_table_free(struct sg_dp_jobs_table *t)
{
	free(t->ids);
	free(t->st);
	memset(t, 0, sizeof(*t));
}

/* Room for one more job in @p t (of @p *cap). @return 0 or -ENOMEM. */
static int jobs_table_room(struct sg_dp_jobs_table *t, unsigned int *cap)
{
	unsigned int ncap = RTE_MAX(2 * *cap, 16u);
	uint32_t *ids;
	struct sg_dp_job_stats *st;

	if (t->n < *cap)
		return 0;
	ids = realloc(t->ids, ncap * sizeof(*ids));
	if (ids != NULL)
		t->ids = ids;
	st = realloc(t->st, ncap * sizeof(*st));
	if (st != NULL)
		t->st = st;
	if (ids == NULL || st == NULL)
		return -ENOMEM;
	*cap = ncap;
	return 0;
}

int sg_dp_pipeline_job_lateness(struct sg_dp_pipeline *p, uint32_t job, struct sg_late *out)
{
	struct sg_late *one;
	bool found = false;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->ctl_lock);
	if (p->late_buf == NULL && (p->late_buf = malloc(sizeof(*p->late_buf))) == NULL) {
		pthread_mutex_unlock(&p->ctl_lock);
		return -ENOMEM;
	}
	one = p->late_buf;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		if (p->lc[i].eng == NULL)
			continue;
		/* the lcore writes *one before it answers; the lock keeps it ours meanwhile */
		rc = lcore_call2_locked(p, i, SG_DP_MSG_JOB_LATE, job, (uint64_t)(uintptr_t)one);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		sg_late_add(out, one);
		found = true;
	}
	if (rc == -ETIMEDOUT)
		p->late_buf = NULL; /* the lcore may answer late, into it: never freed */
	pthread_mutex_unlock(&p->ctl_lock);
	return rc < 0 ? rc : found ? 0 : -ENOENT;
}

int sg_dp_pipeline_jobs_stats(struct sg_dp_pipeline *p, struct sg_dp_jobs_table *t)
{
	unsigned int cap = 0;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	/* the lock also keeps the engines' snapshots ours until we have read them */
	pthread_mutex_lock(&p->ctl_lock);
	for (unsigned int i = 0; i < p->n_lc && rc >= 0; i++) {
		const struct sg_dp_lcore *lc = &p->lc[i];
		const struct sg_dp_job_stats *st;
		const uint32_t *ids;
		unsigned int n;

		if (lc->eng == NULL)
			continue;
		rc = lcore_call_locked(p, i, SG_DP_MSG_JOB_STATS, 0);
		if (rc < 0)
			break;
		n = RTE_MIN((unsigned int)rc, sg_dp_engine_snapshot(lc->eng, &ids, &st));
		for (unsigned int k = 0; k < n && rc >= 0; k++) {
			unsigned int at = 0;

			while (at < t->n && t->ids[at] != ids[k])
				at++;
			if (at == t->n) {
				rc = jobs_table_room(t, &cap);
				if (rc < 0)
					break;
				t->ids[t->n] = ids[k];
				memset(&t->st[t->n++], 0, sizeof(*t->st));
			}
			sg_dp_counters_add(&t->st[at], &st[k], sizeof(st[k]));
		}
	}
	pthread_mutex_unlock(&p->ctl_lock);
	return rc < 0 ? rc : (int)t->n;
}
