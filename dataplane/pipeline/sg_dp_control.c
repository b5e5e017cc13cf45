/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Control of a running pipeline from a non-lcore thread (sg_dp_pipeline.h,
 * "Control of a running pipeline"): the node's limits and layout, jobs and
 * keys on every engine, idle policies, key moves and drain. The lcores do the
 * work on their own side of the channel (sg_dp_lcore_ctl.c); this file builds
 * what they are handed and keeps it alive.
 *
 * Threading: every function runs on a control thread; p->op_lock makes them
 * one at a time (a move is built from the jobs and the keymap as they are, and
 * the staging below is shared), and each lcore call takes p->ctl_lock itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_hash.h>
#include <rte_jhash.h>

#include "sg_dp_chan.h"
#include "sg_dp_control.h"
#include "sg_dp_lcore.h"
#include "sg_dp_lcore_ctl.h"
#include "sg_dp_move.h"

/* ---- limits and layout --------------------------------------------------- */

/* The largest payload every engine takes (what reducer set-up gave them) and one
 * transport message holds (verbs: what verbs_info advertises as max_payload). */
static uint32_t engine_max_payload(const struct sg_dp_pipeline *p)
{
	uint32_t m = p->tr_max_payload ? p->tr_max_payload : UINT32_MAX;

	for (unsigned int r = 0; r < p->n_red; r++)
		m = RTE_MIN(m, sg_dp_engine_max_payload(p->red[r]->eng));
	return m == UINT32_MAX ? SG_DP_PAYLOAD_MTU1500 : m;
}

void sg_dp_pipeline_limits(const struct sg_dp_pipeline *p, struct sg_dp_pipeline_limits *out)
{
	struct sg_dp_job_cfg jc = {.chunk_bytes = 0};

	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < p->n_lc; i++)
		if (p->lc[i].eng != NULL) {
			out->max_jobs = RTE_MAX(out->max_jobs, sg_dp_engine_max_jobs(p->lc[i].eng));
			out->engines++;
		}
	out->max_chunk = RTE_MIN(sg_dp_job_chunk_bytes(&p->cfg, &jc), engine_max_payload(p));
}

static void keymap_now(const struct sg_dp_pipeline *p, uint16_t *keymap)
{
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		keymap[b] = __atomic_load_n(&p->keymap[b], __ATOMIC_ACQUIRE);
}

void sg_dp_pipeline_layout(const struct sg_dp_pipeline *p, struct sg_dp_pipeline_layout *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < p->n_lc; i++) {
		const struct sg_dp_lcore *lc = &p->lc[i];
		bool rx = (lc->role & SG_ROLE_IO) != 0;

		out->lcores[out->n_lcores++] = (struct sg_dp_pipeline_lcore){
			.lcore = lc->lcore_id, .role = lc->role, .socket = lc->socket,
			.idle = lc->st.idle, .port = rx ? lc->rx_port : -1,
			.queue = rx ? lc->rx_queue : -1};
	}
	for (unsigned int r = 0; r < p->n_red; r++)
		out->reducer_lcores[out->n_reducers++] = p->red[r]->lcore_id;
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_used[port])
			out->ports[out->n_ports++] = port;
	keymap_now(p, out->keymap);
	out->draining = __atomic_load_n(&p->draining, __ATOMIC_ACQUIRE);
}

int sg_dp_pipeline_idle_set(struct sg_dp_pipeline *p, unsigned int lcore, enum sg_idle idle)
{
	for (unsigned int i = 0; i < p->n_lc; i++)
		if (p->lc[i].lcore_id == lcore)
			return sg_dp_lcore_call(p, i, SG_DP_CHAN_MSG_IDLE_POLICY, idle);
	return -ENOENT;
}

/* ---- jobs and keys on every engine ---------------------------------------- */

/*
 * Keep a copy of @p n keys for the lcores to read. An lcore that timed out may
 * still read the previous copy (p->stage_late), so that one is let go (leaked)
 * instead of freed.
 */
static struct sg_dp_key *stage_keys(struct sg_dp_pipeline *p, const struct sg_dp_key *keys,
				    uint32_t n)
{
	if (!p->stage_late)
		free(p->stage_keys);
	p->stage_keys = calloc(n ? n : 1, sizeof(*p->stage_keys));
	if (p->stage_keys != NULL && n > 0)
		memcpy(p->stage_keys, keys, n * sizeof(*keys));
	return p->stage_keys;
}

/* Send @p type with @p arg0 to every engine's lcore; @return 0 or the first error. */
static int engines_call(struct sg_dp_pipeline *p, uint32_t type, uint64_t arg0)
{
	int rc = 0;

	for (unsigned int i = 0; i < p->n_lc && rc >= 0; i++)
		if (p->lc[i].eng != NULL)
			rc = sg_dp_lcore_call(p, i, type, arg0);
	return rc < 0 ? rc : 0;
}

static void job_remove_locked(struct sg_dp_pipeline *p, uint32_t id)
{
	for (unsigned int i = 0; i < p->n_lc; i++)
		if (p->lc[i].eng != NULL)
			sg_dp_lcore_call(p, i, SG_DP_MSG_JOB_REMOVE, id);
}

int sg_dp_pipeline_job_add(struct sg_dp_pipeline *p, const struct sg_dp_job_conf *jc)
{
	int rc = -ENOMEM;

	pthread_mutex_lock(&p->op_lock);
	if (stage_keys(p, jc->keys, jc->keys ? jc->nkeys : 0) != NULL) {
		p->stage_job = *jc;
		p->stage_job.keys = jc->keys ? p->stage_keys : NULL;
		rc = engines_call(p, SG_DP_MSG_JOB_ADD, (uint64_t)(uintptr_t)&p->stage_job);
		p->stage_late = rc == -ETIMEDOUT;
		if (rc < 0)
			job_remove_locked(p, jc->id); /* also undoes a half-done add */
	}
	pthread_mutex_unlock(&p->op_lock);
	return rc;
}

void sg_dp_pipeline_job_remove(struct sg_dp_pipeline *p, uint32_t id)
{
	pthread_mutex_lock(&p->op_lock);
	job_remove_locked(p, id);
	pthread_mutex_unlock(&p->op_lock);
}

int sg_dp_pipeline_keys_add(struct sg_dp_pipeline *p, uint32_t job, const struct sg_dp_key *keys,
			    uint32_t n)
{
	int rc = -ENOMEM;

	pthread_mutex_lock(&p->op_lock);
	if (stage_keys(p, keys, n) != NULL) {
		p->stage_ka = (struct sg_dp_keys_add){.job = job, .keys = p->stage_keys, .n = n};
		rc = engines_call(p, SG_DP_MSG_KEYS_ADD, (uint64_t)(uintptr_t)&p->stage_ka);
		p->stage_late = rc == -ETIMEDOUT;
	}
	pthread_mutex_unlock(&p->op_lock);
	return rc;
}

/* ---- key moves ----------------------------------------------------------- */

static void move_free(struct sg_dp_move *mv)
{
	if (mv == NULL)
		return;
	rte_hash_free(mv->chunks);
	free(mv->ch);
	free(mv->open);
	free(mv);
}

static unsigned int moves_pending_locked(const struct sg_dp_pipeline *p)
{
	unsigned int n = 0;

	for (unsigned int r = 0; r < p->n_red; r++) {
		const struct sg_dp_move *mv = p->mv[r];

		if (mv != NULL && !mv->drain && !__atomic_load_n(&mv->committed, __ATOMIC_ACQUIRE))
			n += mv->n_chunks - mv->n_done + 1;
	}
	return n;
}

unsigned int sg_dp_pipeline_moves_pending(struct sg_dp_pipeline *p)
{
	unsigned int n;

	pthread_mutex_lock(&p->op_lock);
	n = moves_pending_locked(p);
	pthread_mutex_unlock(&p->op_lock);
	return n;
}

/* Chunks of open jobs a move may meet beyond the slots their keys take now: new keys. */
#define MOVE_OPEN_HEADROOM 65536u

/*
 * The open jobs @p mv tracks, and room for their chunks: what their keys take on the
 * node now, and MOVE_OPEN_HEADROOM more, at most each job's budget on one engine.
 * @return the room, or -ENOMEM.
 */
static int64_t move_open_jobs(struct sg_dp_pipeline *p, struct sg_dp_move *mv,
			      const struct sg_dp_job_conf *jobs, unsigned int n_jobs)
{
	struct sg_dp_jobs_table t = {0};
	uint64_t room = 0;
	unsigned int n = 0;
	int nj;

	for (unsigned int i = 0; i < n_jobs; i++)
		n += jobs[i].open;
	if (n == 0)
		return 0;
	mv->open = calloc(n, sizeof(*mv->open));
	if (mv->open == NULL)
		return -ENOMEM;
	nj = sg_dp_pipeline_jobs_stats(p, &t);
	for (unsigned int i = 0; i < n_jobs; i++) {
		const struct sg_dp_job_conf *j = &jobs[i];
		uint64_t used = 0;

		if (!j->open)
			continue;
		for (int k = 0; k < nj; k++)
			if (t.ids[k] == j->id)
				used = t.st[k].slots_used;
		mv->open[mv->n_open++] = (struct sg_dp_move_open){.job = j->id, .token = j->token};
		room += RTE_MIN(used + MOVE_OPEN_HEADROOM, (uint64_t)j->slots);
	}
	sg_dp_jobs_table_free(&t);
	return (int64_t)RTE_MIN(room, (uint64_t)1 << 24);
}

/* Add the chunks of every job's keys in @p mv's moving buckets to its table. */
static int move_fill(struct sg_dp_move *mv, const struct sg_dp_job_conf *jobs,
		     unsigned int n_jobs, bool count_only)
{
	uint32_t n = 0;

	for (unsigned int i = 0; i < n_jobs; i++) {
		const struct sg_dp_job_conf *j = &jobs[i];

		for (uint32_t k = 0; j->keys != NULL && k < j->nkeys; k++) {
			uint32_t nch, id = j->keys[k].id;

			if (mv->phase[sg_dp_bucket_of(j->id, id)] != 1)
				continue;
			nch = sg_dp_chunk_count(j->keys[k].nelem, j->dtype, j->chunk_bytes);
			for (uint32_t c = 0; c < nch; c++, n++) {
				struct sg_dp_move_key key = {.job = j->id, .key = id, .chunk = c};

				if (!count_only &&
				    rte_hash_add_key_data(mv->chunks, &key, (void *)(uintptr_t)n) < 0)
					return -ENOSPC;
			}
		}
	}
	mv->n_chunks = n;
	return 0;
}

/* A move of the buckets that leave reducer @p r for @p want, or NULL if none leaves. */
static struct sg_dp_move *move_build(struct sg_dp_pipeline *p, unsigned int r,
				     const uint16_t *want, bool drain,
				     const struct sg_dp_job_conf *jobs, unsigned int n_jobs, int *rc)
{
	struct sg_dp_move *old = p->mv[r], *mv;
	struct rte_hash_parameters hp = {.key_len = sizeof(struct sg_dp_move_key),
					 .hash_func = rte_jhash, .socket_id = p->red[r]->socket};
	uint64_t now = sg_dp_now_ns(p, rte_rdtsc()), slot = (uint64_t)p->cfg.timeout_ms * 1000000;
	char name[RTE_HASH_NAMESIZE];
	int64_t open_room;
	bool any = false;

	*rc = 0;
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		any |= p->keymap[b] == r && (drain || want[b] != r);
	if (!any)
		return NULL;
	mv = calloc(1, sizeof(*mv));
	if (mv == NULL)
		goto nomem;
	for (unsigned int b = 0; b < SG_BUCKETS; b++) {
		if (p->keymap[b] == r && (drain || want[b] != r)) {
			mv->phase[b] = 1;
			mv->to[b] = drain ? SG_DP_MOVE_DROP : want[b];
		} else if (old != NULL && old->phase[b] == 2) {
			/* keep forwarding stragglers of an earlier move */
			mv->phase[b] = 2;
			mv->to[b] = old->to[b];
		}
	}
	move_fill(mv, jobs, n_jobs, true);
	open_room = move_open_jobs(p, mv, jobs, n_jobs);
	if (open_room < 0)
		goto nomem;
	mv->cap = mv->n_chunks + (uint32_t)open_room;
	snprintf(name, sizeof(name), "sg_mv%u_%u", p->n_moves++, (unsigned int)getpid());
	hp.name = name;
	hp.entries = RTE_MAX(mv->cap, 8u);
	mv->chunks = rte_hash_create(&hp);
	mv->ch = calloc(hp.entries, sizeof(*mv->ch));
	if (mv->chunks == NULL || mv->ch == NULL || move_fill(mv, jobs, n_jobs, false) < 0)
		goto nomem;
	mv->drain = drain;
	/* an idle chunk has no round boundary to wait for; a stuck round is already reported
	 * incomplete by the engine after one slot timeout */
	mv->idle_ns = now + 2 * slot;
	mv->hard_ns = now + 4 * slot;
	return mv;
nomem:
	move_free(mv);
	*rc = -ENOMEM;
	return NULL;
}

/* Hand @p mv to reducer @p r; the one it replaces is freed once the lcore let go of it. */
static int move_install(struct sg_dp_pipeline *p, unsigned int r, struct sg_dp_move *mv)
{
	int rc = sg_dp_lcore_call(p, p->red[r]->idx, SG_DP_MSG_MOVE_SET, (uint64_t)(uintptr_t)mv);

	if (rc == -ETIMEDOUT)
		return rc; /* the lcore may still take either: free neither */
	if (rc == 0) {
		move_free(p->mv[r]);
		p->mv[r] = mv;
	}
	return rc;
}

static int keymap_set_locked(struct sg_dp_pipeline *p, const uint16_t *want,
			     const struct sg_dp_job_conf *jobs, unsigned int n_jobs, char *err,
			     size_t errlen)
{
	uint16_t now[SG_BUCKETS];
	struct sg_dp_move *mv[SG_DP_MAX_LAYOUT] = {NULL};
	uint64_t back[SG_DP_MAX_LAYOUT] = {0};
	unsigned int moved = 0, n;
	int rc = 0;

	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		if (want[b] >= RTE_MAX(p->n_red, 1u)) {
			sg_dp_seterr(err, errlen, "no reducer %u (there are %u)", want[b], p->n_red);
			return -EINVAL;
		}
	keymap_now(p, now);
	for (unsigned int b = 0; b < SG_BUCKETS; b++) {
		if (want[b] == now[b])
			continue;
		moved++;
		if (p->ever[b] & (1ull << want[b]))
			back[want[b]] |= 1ull << b;
	}
	if (moved == 0)
		return 0;
	if (p->draining) {
		sg_dp_seterr(err, errlen, "the node is draining: no key moves");
		return -EBUSY;
	}
	n = moves_pending_locked(p);
	if (n > 0) {
		sg_dp_seterr(err, errlen, "a key move is in progress (%u chunk(s) before their round "
			     "boundary): retry when layout shows the new keymap", n);
		return -EBUSY;
	}
	for (unsigned int i = 0; i < n_jobs; i++)
		if (jobs[i].mode == SG_MODE_ASYNC) {
			sg_dp_seterr(err, errlen, "job %u is async: its stores live in their reducers "
				     "for the job's lifetime, so no key moves while it exists",
				     jobs[i].id);
			return -EOPNOTSUPP;
		}
	/* a bucket going back to a reducer that held it: that engine forgets its old rounds
	 * first (no packet of the bucket reaches it until the current owner forwards them) */
	for (unsigned int r = 0; r < p->n_red && rc >= 0; r++)
		if (back[r] != 0)
			rc = sg_dp_lcore_call(p, p->red[r]->idx, SG_DP_MSG_KEYS_RELEASE, back[r]);
	if (rc < 0) {
		sg_dp_seterr(err, errlen, "a reducer did not release the keys coming back to it: %s",
			     strerror(-rc));
		return rc;
	}
	rc = 0;
	for (unsigned int r = 0; r < p->n_red && rc == 0; r++)
		mv[r] = move_build(p, r, want, false, jobs, n_jobs, &rc);
	for (unsigned int r = 0; r < p->n_red; r++) {
		if (mv[r] == NULL)
			continue;
		if (rc == 0)
			rc = move_install(p, r, mv[r]);
		else
			move_free(mv[r]);
	}
	if (rc < 0) {
		sg_dp_seterr(err, errlen, "key move not started on every reducer: %s",
			     strerror(-rc));
		return rc;
	}
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		p->ever[b] |= 1ull << want[b];
	SG_DP_LOG(INFO, "key move started: %u bucket(s); each chunk changes reducer at its next "
		  "round boundary", moved);
	return (int)moved;
}

int sg_dp_pipeline_keymap_set(struct sg_dp_pipeline *p, const uint16_t *want,
			      const struct sg_dp_job_conf *jobs, unsigned int n_jobs, char *err,
			      size_t errlen)
{
	int rc;

	pthread_mutex_lock(&p->op_lock);
	rc = keymap_set_locked(p, want, jobs, n_jobs, err, errlen);
	pthread_mutex_unlock(&p->op_lock);
	return rc;
}

/*
 * Each reducer lets every chunk finish the rounds it may have begun (up to the
 * switch round of a key move, first round seen + 2) and refuses later ones.
 */
static int drain_locked(struct sg_dp_pipeline *p, const struct sg_dp_job_conf *jobs,
			unsigned int n_jobs)
{
	uint16_t now[SG_BUCKETS];
	int rc = 0;

	if (p->draining)
		return 0;
	if (moves_pending_locked(p)) {
		SG_DP_LOG(WARNING, "drain refused: a key move is in progress");
		return -EBUSY;
	}
	keymap_now(p, now);
	for (unsigned int r = 0; r < p->n_red && rc == 0; r++) {
		struct sg_dp_move *mv = move_build(p, r, now, true, jobs, n_jobs, &rc);

		if (mv != NULL && (rc = move_install(p, r, mv)) < 0 && rc != -ETIMEDOUT)
			move_free(mv);
	}
	if (rc < 0)
		return rc;
	__atomic_store_n(&p->draining, true, __ATOMIC_RELEASE);
	SG_DP_LOG(NOTICE, "draining: in-flight rounds finish, later rounds and new jobs are "
		  "refused");
	return 0;
}

int sg_dp_pipeline_drain(struct sg_dp_pipeline *p, const struct sg_dp_job_conf *jobs,
			 unsigned int n_jobs)
{
	int rc;

	pthread_mutex_lock(&p->op_lock);
	rc = drain_locked(p, jobs, n_jobs);
	pthread_mutex_unlock(&p->op_lock);
	return rc;
}

/* ---- life cycle (sg_dp_pipeline.c) ------------------------------------------ */

void sg_dp_control_fini(struct sg_dp_pipeline *p)
{
	/* the lcores have returned: nothing reads the moves or the staging any more */
	for (unsigned int r = 0; r < p->n_red; r++) {
		move_free(p->mv[r]);
		p->mv[r] = NULL;
	}
	free(p->stage_keys);
	p->stage_keys = NULL;
	free(p->late_buf);
	p->late_buf = NULL;
}
