/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Aggregation engine: slot table, worker bitmaps, shadow results, sync /
 * async / deterministic modes, back-pressure and worker-loss reporting.
 *
 * Data layout: an engine holds a small array of jobs (looked up by a linear
 * scan with a one-entry cache: a reducer lcore serves a handful of jobs).
 * A job holds a key table (open addressing, key id -> key index), and one
 * direct-indexed slot array: slot = key's first slot + chunk index.
 * Accumulators come from one sg_sum_pool per engine.
 *
 * An open job reserves its tables at add_job for its slot budget (as many
 * keys as slots, the hash at twice that) and fills them as pushes create
 * keys: a new key takes the next nchunks slots. Keys are never removed, so
 * their slot ranges stay in creation order, as a fixed job's do. Each key
 * carries its own dtype (a job of dtype any takes each key's from its first
 * push), so the hot path reads the element type from the key, not the job.
 *
 * Every collecting slot is on its job's "active" list in the order it opened
 * (that is, by start time), so the timeout scan stops at the first young
 * slot. Every finished slot that still holds its result is on the job's
 * "done" list in completion order, so reclaiming under pool pressure takes
 * the oldest result first.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_log.h>

#include "sg_auth.h"
#include "sg_dp_engine.h"
#include "sg_late.h"

_Static_assert(SG_DP_MAC_TRAILER == SG_AUTH_TRAILER_BYTES, "one trailer size");

/*
 * The engine's own logtype, apart from sigmad's sigma.dataplane: sigma-udpd
 * and sigma-bench run the engine without sigmad.
 */
RTE_LOG_REGISTER(sg_dp_engine_logtype, sigma.engine, INFO);
#define SG_DP_ENG_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sg_dp_engine_logtype, "sigma.engine: " fmt "\n", ##__VA_ARGS__)

#define NIL UINT32_MAX

#define DEF_POOL_BUFS 4096u
#define DEF_MAX_JOBS 16u
#define MAX_MAX_JOBS 1024u
#define DEF_SLOT_TIMEOUT_NS 1000000000ull
#define DEF_SHADOW_HOLD_NS 100000000ull
/*
 * ERROR MISMATCH/STALE replies per job and period: enough for a worker to learn
 * at once why its pushes fail; a flood (which needs the job's token) gets few.
 */
#define REFUSE_MAX 32
#define REFUSE_NS 100000000ull
/* Slot-timeout reports logged per poll call; the rest are summed up in one line. */
#define LOG_PER_POLL 4
/*
 * ERROR WAITING: at most the job's N per chunk per tick of 2^WAIT_TICK_SHIFT ns (16.8 ms).
 * The N-1 ranks that wait on a chunk resend it at most once per tick each once their
 * timeouts have doubled past it (libsigma: after its resends at 5 and 10 ms), so every
 * resend is answered from then on; a flood of resends of a chunk (which needs the token)
 * gets N answers per tick, each smaller than the push it answers.
 */
#define WAIT_TICK_SHIFT 24
/* Late ranks: one log line per job per this period at most. */
#define LATE_LOG_PERIOD_NS 1000000000ull
#define DEF_LATE_LOG_NS 10000000ull

enum slot_state {
	S_NEW = 0, /* never used */
	S_COLLECT, /* some, not all, pushes of `round` are in */
	S_DONE,    /* all N are in; acc holds the result (NULL once reclaimed) */
	S_ASYNC,   /* async store; acc holds it */
};

#define SF_TIMED_OUT (1u << 0) /* reported; off the active list */
#define SF_FIRST (1u << 1)     /* collecting the first round this engine sees of the slot */

struct slot {
	uint64_t arrived; /* collect: ranks in this round; async: ranks ever seen */
	void *acc;        /* accumulator of `round`, or its result, or the async store */
	void *prev;       /* result of round-1 while `round` collects (the shadow) */
	uint64_t t;       /* collect: open time, once timed out the last WORKER_LOST report;
			     done: completion time */
	union {
		struct {
			/* active list while collecting, done list when finished */
			uint32_t lprev, lnext;
		};
		uint64_t told; /* timed out (on no list): ranks told WORKER_LOST since t */
	};
	uint32_t round;
	uint16_t ifl;          /* in-flight id while collecting */
	uint8_t state;
	uint8_t flags;
	uint8_t next_rank; /* deterministic: ranks below it are folded into acc */
	uint8_t wait_n;    /* collect: ERROR WAITING sent in tick wait_t */
	uint32_t wait_t;   /* ... the tick: now >> WAIT_TICK_SHIFT, truncated (wraps in 2 years) */
};
_Static_assert(sizeof(struct slot) == 56, "docs/dataplane-engine.md: 56 bytes per slot");

/* A last chunk whose length a new key of an open job has not learnt: no push's nelem. */
#define LAST_UNKNOWN UINT32_MAX

struct key_ent {
	uint32_t id;
	/* elements of the last chunk; LAST_UNKNOWN for a new key of an open job until its last
	 * chunk's first push (the parser bounds nelem by the payload: it never matches) */
	uint32_t last;
	uint32_t nchunks;
	uint32_t base;	      /* index of chunk 0's slot */
	uint32_t chunk_elems; /* elements of a full chunk: chunk_bytes / esz */
	uint8_t dtype;	      /* the key's element type (the job's, unless the job's is any) */
	uint8_t esz;	      /* its size in bytes */
};

struct list {
	uint32_t head, tail;
};

struct job {
	uint32_t id;
	uint32_t n;
	struct sg_auth_job *auth; /* auth = mac: the ranks' keys and windows; NULL: none */
	uint64_t token;
	uint64_t full; /* bitmap with all N ranks */
	enum sg_dtype dtype;  /* SG_DTYPE_ANY: an open job whose keys each have their own */
	enum sg_mode mode;
	unsigned int sum_flags;
	uint32_t chunk_bytes; /* payload bytes of a full chunk */
	uint32_t part;	      /* partition_bytes: an open job's largest key */
	bool open;	      /* keys are made by their first push */
	uint32_t nkeys;
	uint32_t max_keys;    /* room in keys (an open job's: its slot budget) */
	struct key_ent *keys;
	uint32_t *khash; /* key index + 1; 0 = empty */
	uint32_t kmask;
	uint32_t nslots;     /* slots allocated: a fixed job's chunks, an open job's budget */
	uint32_t slots_used; /* ... of which keys hold (a fixed job: all) */
	struct slot *slots;
	uint64_t *peer; /* last address each rank pushed from */
	uint32_t max_inflight;
	uint32_t ifl_top; /* free in-flight ids: ifl_free[0..ifl_top) */
	uint16_t *ifl_free;
	void **stage;      /* deterministic: [ifl * n + rank] held pushes */
	uint32_t *around;  /* async: [slot * n + rank] last round pushed */
	struct list active, done;
	uint64_t refuse_t0; /* refusals (ERROR MISMATCH/STALE): start of the current period */
	uint32_t refuse_n;  /* ... and how many were sent in it */
	struct sg_late_rank *late; /* [rank]: lateness of its pushes (sync and deterministic) */
	uint64_t late_told; /* ranks logged as late, until their average halves */
	uint64_t late_log_t; /* ... the last such line (late_logged: there was one) */
	bool late_logged;
	struct sg_dp_job_stats st;
};

/* One per reducer lcore. */
struct sg_dp_engine {
	struct sg_dp_engine_conf conf;
	struct sg_sum_pool *pool;
	void *spare;      /* a pool buffer outside the count: acc_fold_checked() sums into it */
	uint32_t buf_size;
	uint32_t njobs;
	struct job **jobs;
	struct job *last; /* cache of the last job looked up */
	bool multi;       /* tx has the fan-out pair */
	struct sg_dp_stats st;
	uint64_t version_t0;  /* ERROR VERSION answers: this REFUSE_NS window's start... */
	uint32_t version_n;   /* ... and how many it sent */
	struct sg_dp_tx_dest fan[SG_MAX_WORKERS]; /* scratch for one fanned-out RESULT */
	/* sg_dp_engine_jobs_snapshot(): max_jobs entries, allocated at create */
	uint32_t snap_n;
	uint32_t *snap_ids;
	struct sg_dp_job_stats *snap_st;
	/* sg_dp_engine_rx_csum(): the datagram in hand, while its checksum is unchecked */
	struct {
		const uint8_t *pkt;
		uint32_t len;
		uint16_t before; /* checksum of what the UDP checksum covers before pkt */
		bool pending;    /* not checked yet */
		bool bad;        /* checked and wrong */
	} cs;
} __rte_cache_aligned;

/* Counters kept engine-wide and per job move together. */
#define JCOUNT(e, j, f)                                                                      \
	do {                                                                                 \
		(e)->st.f++;                                                                 \
		(j)->st.f++;                                                                 \
	} while (0)
#define JUNCOUNT(e, j, f)                                                                    \
	do {                                                                                 \
		(e)->st.f--;                                                                 \
		(j)->st.f--;                                                                 \
	} while (0)

/* ---- small helpers ----------------------------------------------------- */

static inline int32_t rdiff(uint32_t a, uint32_t b)
{
	/* Serial-number arithmetic: rounds may wrap. */
	return (int32_t)(a - b);
}

/* Time since @t; 0 if the caller's clock went backwards (never a huge age). */
static inline uint64_t age(uint64_t now, uint64_t t)
{
	return now > t ? now - t : 0;
}

static inline uint32_t hash32(uint32_t x)
{
	return (x * 0x9e3779b1u) ^ (x >> 16);
}

static void list_push_tail(struct job *j, struct list *l, uint32_t i)
{
	struct slot *s = &j->slots[i];

	s->lnext = NIL;
	s->lprev = l->tail;
	if (l->tail != NIL)
		j->slots[l->tail].lnext = i;
	else
		l->head = i;
	l->tail = i;
}

static void list_del(struct job *j, struct list *l, uint32_t i)
{
	struct slot *s = &j->slots[i];

	if (s->lprev != NIL)
		j->slots[s->lprev].lnext = s->lnext;
	else
		l->head = s->lnext;
	if (s->lnext != NIL)
		j->slots[s->lnext].lprev = s->lprev;
	else
		l->tail = s->lprev;
	s->lprev = s->lnext = NIL;
}

static struct job *job_find(struct sg_dp_engine *e, uint32_t id)
{
	if (e->last != NULL && e->last->id == id)
		return e->last;
	for (uint32_t i = 0; i < e->njobs; i++) {
		if (e->jobs[i]->id == id) {
			e->last = e->jobs[i];
			return e->last;
		}
	}
	return NULL;
}

static struct key_ent *key_find(const struct job *j, uint32_t id)
{
	for (uint32_t h = hash32(id) & j->kmask;; h = (h + 1) & j->kmask) {
		uint32_t v = j->khash[h];

		if (v == 0)
			return NULL;
		if (j->keys[v - 1].id == id)
			return &j->keys[v - 1];
	}
}

/* Elements of chunk @p c (LAST_UNKNOWN: the last chunk of a new open key, not learnt yet). */
static inline uint32_t chunk_nelem(const struct key_ent *k, uint32_t c)
{
	return c + 1 == k->nchunks ? k->last : k->chunk_elems;
}

/* ---- checksums left to the engine (sg_dp_engine_rx_csum()) ----------- */

/*
 * The UDP checksum of the datagram in hand (sg_dp_engine_rx_csum()), with a
 * pass of its own unless it was checked already. @return false if it is wrong.
 */
static bool csum_verify(struct sg_dp_engine *e)
{
	if (likely(!e->cs.pending))
		return !e->cs.bad;
	e->cs.pending = false;
	e->cs.bad = sg_sum_csum_add(e->cs.before, sg_sum_csum(e->cs.pkt, e->cs.len)) != 0xffff;
	return !e->cs.bad;
}

/* The checksum, given the sum of the payload's elements: the header's and the rest added. */
static bool csum_payload(struct sg_dp_engine *e, uint16_t elems)
{
	uint16_t sum = sg_sum_csum_add(e->cs.before, sg_sum_csum(e->cs.pkt, SG_DP_HDR_LEN));

	e->cs.pending = false;
	e->cs.bad = sg_sum_csum_add(sum, elems) != 0xffff;
	return !e->cs.bad;
}

/*
 * A damaged datagram: it never reached the engine as far as the counters go
 * (the caller counts it), and it changed nothing. @p j: its job, if known.
 */
static int csum_fail(struct sg_dp_engine *e, struct job *j)
{
	e->st.rx_packets--;
	if (j != NULL)
		j->st.rx_packets--;
	return -EILSEQ;
}

/* ---- output ------------------------------------------------------------ */

/* Header fields every reply for (job, key, chunk) shares. */
static void reply_msg(struct sg_dp_msg *m, const struct job *j, const struct key_ent *k,
		      uint32_t chunk, uint32_t round)
{
	memset(m, 0, sizeof(*m));
	m->dtype = k->dtype;
	m->job = j->id;
	m->token = j->token;
	m->key = k->id;
	m->chunk = chunk;
	m->nchunks = k->nchunks;
	m->round = round;
	m->offset = chunk * j->chunk_bytes;
}

/* Send a header-only or small-payload reply to @rank. */
static void emit_small(struct sg_dp_engine *e, struct job *j, struct sg_dp_msg *m,
		       uint32_t rank, const void *payload, uint32_t plen)
{
	void *pkt, *buf;
	uint32_t len = SG_DP_HDR_LEN + plen + (j->auth != NULL ? SG_DP_MAC_TRAILER : 0);

	/* a reply caused by a datagram nobody checked yet: the rx paths commit() first */
	if (unlikely(e->cs.pending) && !csum_verify(e))
		return;
	buf = e->conf.tx.alloc(e->conf.tx.ctx, j->peer[rank], len, &pkt);
	if (buf == NULL) {
		JCOUNT(e, j, tx_fail);
		return;
	}
	m->rank = (uint16_t)rank;
	if (j->auth != NULL)
		m->flags |= SG_DP_F_MAC;
	sg_dp_build_hdr(buf, m);
	if (plen != 0)
		memcpy((uint8_t *)buf + SG_DP_HDR_LEN, payload, plen);
	if (j->auth != NULL)
		sg_auth_job_sign(j->auth, rank, buf, len - SG_DP_MAC_TRAILER);
	e->conf.tx.send(e->conf.tx.ctx, j->peer[rank], pkt, len);
	if (m->type == SG_DP_T_NACK)
		JCOUNT(e, j, nacks_sent);
	else if (m->type == SG_DP_T_ERROR && m->code == SG_DP_C_WAITING)
		JCOUNT(e, j, waits_sent);
	else if (m->type == SG_DP_T_ERROR)
		JCOUNT(e, j, errors_sent);
}

/*
 * A RESULT's elements: narrowed from accumulator @p acc into @p buf (after its
 * header), with their checksum for a transport that asked (tx.payload_csum).
 */
static void result_fill(struct sg_dp_engine *e, const struct job *j, enum sg_dtype dt, void *pkt,
			uint8_t *buf, const void *acc, uint32_t nelem)
{
	uint8_t *d = buf + SG_DP_HDR_LEN;

	/* Narrows fp32 accumulators of fp16/bf16 straight into the packet. The elements'
	 * checksum leaves out a MAC's trailer: the transport sums such a RESULT itself */
	if (e->conf.tx.payload_csum == NULL || j->auth != NULL)
		sg_sum_acc_final_unchecked(dt, j->sum_flags, d, acc, nelem);
	else
		e->conf.tx.payload_csum(e->conf.tx.ctx, pkt,
					sg_sum_acc_final_csum_unchecked(dt, j->sum_flags, d, acc,
									nelem));
}

/*
 * Send RESULT(@round) with the value in accumulator @acc to each rank set in
 * @ranks. With the fan-out ops and two ranks or more, the header and payload
 * are written once for all of them.
 */
static bool emit_fanout(struct sg_dp_engine *e, struct job *j, enum sg_dtype dt,
			const uint8_t *hdr, uint32_t len, uint32_t nelem, const void *acc,
			uint64_t ranks)
{
	unsigned int n = 0, sent;
	void *pkt, *buf;

	for (; ranks != 0; ranks &= ranks - 1) {
		unsigned int rank = (unsigned int)__builtin_ctzll(ranks);

		e->fan[n].dest = j->peer[rank];
		e->fan[n++].rank = (uint16_t)rank;
	}
	buf = e->conf.tx.alloc_multi(e->conf.tx.ctx, e->fan, n, len, &pkt);
	if (buf == NULL)
		return false;
	memcpy(buf, hdr, SG_DP_HDR_LEN);
	sg_dp_hdr_set_rank(buf, e->fan[0].rank);
	result_fill(e, j, dt, pkt, buf, acc, nelem);
	sent = e->conf.tx.send_multi(e->conf.tx.ctx, pkt, len, e->fan, n);
	sent = RTE_MIN(sent, n);
	e->st.results_sent += sent;
	j->st.results_sent += sent;
	e->st.tx_fail += n - sent;
	j->st.tx_fail += n - sent;
	return true;
}

static void emit_results(struct sg_dp_engine *e, struct job *j, const struct key_ent *k,
			 uint32_t chunk, uint32_t round, const void *acc, uint64_t ranks)
{
	struct sg_dp_msg m;
	uint8_t hdr[SG_DP_HDR_LEN];
	uint32_t nelem = chunk_nelem(k, chunk);
	uint32_t len = SG_DP_HDR_LEN + nelem * k->esz;

	/* a reply caused by a datagram nobody checked yet: the rx paths commit() first */
	if (unlikely(e->cs.pending) && !csum_verify(e))
		return;
	reply_msg(&m, j, k, chunk, round);
	m.type = SG_DP_T_RESULT;
	m.nelem = nelem;
	if (j->auth != NULL)
		m.flags = SG_DP_F_MAC;
	sg_dp_build_hdr(hdr, &m);
	/* each rank's RESULT has its own MAC: no fan-out of one buffer */
	if (e->multi && j->auth == NULL && (ranks & (ranks - 1)) != 0 &&
	    emit_fanout(e, j, k->dtype, hdr, len, nelem, acc, ranks))
		return;
	for (; ranks != 0; ranks &= ranks - 1) {
		unsigned int rank = (unsigned int)__builtin_ctzll(ranks);
		void *pkt, *buf;

		buf = e->conf.tx.alloc(e->conf.tx.ctx, j->peer[rank],
				       len + (j->auth != NULL ? SG_DP_MAC_TRAILER : 0), &pkt);
		if (buf == NULL) {
			JCOUNT(e, j, tx_fail);
			continue;
		}
		memcpy(buf, hdr, SG_DP_HDR_LEN);
		sg_dp_hdr_set_rank(buf, (uint16_t)rank);
		result_fill(e, j, k->dtype, pkt, buf, acc, nelem);
		if (j->auth != NULL)
			sg_auth_job_sign(j->auth, rank, buf, len);
		e->conf.tx.send(e->conf.tx.ctx, j->peer[rank], pkt,
				len + (j->auth != NULL ? SG_DP_MAC_TRAILER : 0));
		JCOUNT(e, j, results_sent);
	}
}

static void emit_result(struct sg_dp_engine *e, struct job *j, const struct key_ent *k,
			uint32_t chunk, uint32_t round, const void *acc, uint32_t rank)
{
	emit_results(e, j, k, chunk, round, acc, 1ull << rank);
}

static void emit_code(struct sg_dp_engine *e, struct job *j, const struct key_ent *k,
		      uint32_t chunk, uint32_t round, uint32_t rank, uint8_t type, uint16_t code)
{
	struct sg_dp_msg m;

	reply_msg(&m, j, k, chunk, round);
	m.type = type;
	m.code = code;
	emit_small(e, j, &m, rank, NULL, 0);
	if (type == SG_DP_T_NACK && code == SG_DP_C_BUSY)
		e->st.nacks_pool++;
}

/* ERROR @p code (WORKER_LOST or WAITING) to @p rank, naming the ranks slot @p s misses. */
static void emit_missing(struct sg_dp_engine *e, struct job *j, const struct key_ent *k,
			 uint32_t chunk, const struct slot *s, uint32_t rank, uint16_t code)
{
	struct sg_dp_msg m;
	uint64_t missing = htobe64(j->full & ~s->arrived);

	reply_msg(&m, j, k, chunk, s->round);
	m.type = SG_DP_T_ERROR;
	m.code = code;
	emit_small(e, j, &m, rank, &missing, sizeof(missing));
}

static void emit_lost(struct sg_dp_engine *e, struct job *j, const struct key_ent *k,
		      uint32_t chunk, const struct slot *s, uint32_t rank)
{
	emit_missing(e, j, k, chunk, s, rank, SG_DP_C_WORKER_LOST);
}

/* ---- buffers ------------------------------------------------------------ */

/*
 * Release the oldest kept result, of any job, that finished at least
 * shadow_hold_ns ago, other than @keep's (the slot asking for a buffer: its
 * result is about to become its shadow). @return true if a buffer went back.
 */
static bool reclaim_one(struct sg_dp_engine *e, uint64_t now, const struct slot *keep)
{
	struct job *best = NULL;
	uint32_t best_i = NIL;

	for (uint32_t n = 0; n < e->njobs; n++) {
		struct job *j = e->jobs[n];
		uint32_t i = j->done.head;

		if (i != NIL && &j->slots[i] == keep)
			i = j->slots[i].lnext;
		if (i == NIL || age(now, j->slots[i].t) < e->conf.shadow_hold_ns)
			continue;
		if (best == NULL || j->slots[i].t < best->slots[best_i].t) {
			best = j;
			best_i = i;
		}
	}
	if (best == NULL)
		return false;
	list_del(best, &best->done, best_i);
	sg_sum_pool_put(e->pool, best->slots[best_i].acc);
	best->slots[best_i].acc = NULL;
	e->st.shadows_reclaimed++;
	return true;
}

static void *buf_get(struct sg_dp_engine *e, uint64_t now, const struct slot *keep)
{
	void *b = sg_sum_pool_get(e->pool);

	if (b == NULL && reclaim_one(e, now, keep))
		b = sg_sum_pool_get(e->pool);
	return b;
}

static void buf_put(struct sg_dp_engine *e, void **b)
{
	if (*b != NULL) {
		sg_sum_pool_put(e->pool, *b);
		*b = NULL;
	}
}

/* ---- sync and deterministic slots -------------------------------------- */

#define USED_NACK (SG_DP_USED_REPLIED | SG_DP_USED_NACKED)

struct pkt_ctx {
	struct job *j;
	struct key_ent *k;
	uint32_t chunk;
	uint32_t sidx;
	struct slot *s;
	const struct sg_dp_msg *m;
	uint32_t nelem;
	uint64_t now;
	uint64_t src;	/* the sender's address */
	bool committed; /* intact, and its sender is its rank's address (commit()) */
	bool folded;    /* slot_open() already folded the push into the slot */
};

/*
 * Before the engine acts on a checked packet (replies, changes a slot, or
 * folds it in without its checksum): make sure it is intact, then its sender
 * becomes its rank's reply address (tx.accept). Once per packet.
 * @return 0, or -EILSEQ (nothing done).
 */
static __attribute__((noinline)) int commit_now(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	if (!csum_verify(e))
		return csum_fail(e, c->j);
	c->committed = true;
	c->j->peer[c->m->rank] = c->src;
	if (e->conf.tx.accept != NULL)
		e->conf.tx.accept(e->conf.tx.ctx, c->src);
	return 0;
}

/* (Called again on most paths: the second time is one test, inline.) */
static inline int commit(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	return likely(c->committed) ? 0 : commit_now(e, c);
}

static void acc_fold(const struct job *j, const struct key_ent *k, void *acc, const void *src,
		     uint32_t nelem, bool first)
{
	/* add_job checked flags, the parser the key's dtype; the buffers are the pool's and the
	 * packet's */
	if (first)
		sg_sum_acc_init_unchecked((enum sg_dtype)k->dtype, j->sum_flags, acc, src, nelem);
	else
		sg_sum_acc_add_unchecked((enum sg_dtype)k->dtype, j->sum_flags, acc, src, nelem);
}

/*
 * Fold the push into *@p acc, then commit() it. When its checksum is still
 * unchecked, the pass that sums its elements checks it: a first fold writes
 * *acc (it holds nothing yet), a later one sums into the engine's spare buffer,
 * which takes *acc's place only if the checksum holds (*acc becomes the spare),
 * so a damaged push changes no sum. The spare was just written or freed: it is
 * in the cache, as *acc is. @return 0, or -EILSEQ.
 */
static int acc_fold_checked(struct sg_dp_engine *e, struct pkt_ctx *c, void **acc, bool first)
{
	const struct job *j = c->j;
	enum sg_dtype dt = (enum sg_dtype)c->k->dtype;
	const void *pl = c->m->payload;
	void *t = NULL;
	uint16_t sum;

	if (!e->cs.pending) {
		acc_fold(j, c->k, *acc, pl, c->nelem, first);
		return commit(e, c);
	}
	if (first) {
		sum = sg_sum_acc_init_csum_unchecked(dt, j->sum_flags, *acc, pl, c->nelem);
	} else {
		t = e->spare;
		sum = sg_sum_acc_add_csum_unchecked(dt, j->sum_flags, t, *acc, pl, c->nelem);
	}
	if (!csum_payload(e, sum))
		return csum_fail(e, c->j);
	if (t != NULL) {
		e->spare = *acc;
		*acc = t;
	}
	return commit(e, c);
}

static void slot_complete(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct job *j = c->j;
	struct slot *s = c->s;

	if (s->flags & SF_TIMED_OUT) {
		JUNCOUNT(e, j, incomplete_slots);
		SG_DP_ENG_LOG(NOTICE, "job %" PRIu32 " key %" PRIu32 " chunk %" PRIu32
			" round %" PRIu32 ": completed after its timeout report",
			j->id, c->k->id, c->chunk, s->round);
	} else {
		list_del(j, &j->active, c->sidx);
	}
	/* Every rank has pushed this round, so every rank had round-1's result. */
	buf_put(e, &s->prev);
	j->ifl_free[j->ifl_top++] = s->ifl;
	s->state = S_DONE;
	s->flags = 0;
	s->t = c->now;
	list_push_tail(j, &j->done, c->sidx);
	JCOUNT(e, j, rounds_completed);
	JUNCOUNT(e, j, slots_active);
	emit_results(e, j, c->k, c->chunk, s->round, s->acc, j->full);
}

/* Start collecting the packet's round: nobody in, opened now, last on the active list. */
static void slot_begin(struct pkt_ctx *c, uint8_t flags)
{
	struct slot *s = c->s;

	s->round = c->m->round;
	s->arrived = 0;
	s->next_rank = 0;
	s->wait_n = 0;
	s->flags = flags;
	s->t = c->now;
	list_push_tail(c->j, &c->j->active, c->sidx);
}

/* Open round m->round on a new or finished slot. @return 0 or USED_NACK (NACKed). */
static int slot_open(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct job *j = c->j;
	struct slot *s = c->s;
	uint32_t rank = c->m->rank;
	void *b;
	int rc;

	/* a NACK, or a kept result reclaimed for the push: only for an intact one */
	if ((j->ifl_top == 0 || sg_sum_pool_avail(e->pool) == 0) && (rc = commit(e, c)) < 0)
		return rc;
	if (j->ifl_top == 0) {
		emit_code(e, j, c->k, c->chunk, c->m->round, rank, SG_DP_T_NACK, SG_DP_C_INFLIGHT);
		return USED_NACK;
	}
	b = buf_get(e, c->now, s);
	if (b == NULL) {
		emit_code(e, j, c->k, c->chunk, c->m->round, rank, SG_DP_T_NACK, SG_DP_C_BUSY);
		return USED_NACK;
	}
	/* the round's first fold, before the slot changes: a damaged push leaves it as it was
	 * (deterministic mode may hold the push instead, and checked it first) */
	if (j->mode != SG_MODE_DETERM) {
		rc = acc_fold_checked(e, c, &b, true);
		if (rc < 0) {
			buf_put(e, &b);
			return rc;
		}
		c->folded = true;
	}
	if (s->state == S_DONE) {
		if (s->acc != NULL)
			list_del(j, &j->done, c->sidx);
		s->prev = s->acc; /* round r's result becomes the shadow */
	}
	slot_begin(c, s->state == S_NEW ? SF_FIRST : 0);
	s->acc = b;
	s->ifl = j->ifl_free[--j->ifl_top];
	s->state = S_COLLECT;
	JCOUNT(e, j, slots_active);
	return 0;
}

/* Deterministic mode: give back the pushes a collecting slot holds for their turn. */
static void stage_free(struct sg_dp_engine *e, struct job *j, const struct slot *s)
{
	for (uint32_t r = 0; j->stage != NULL && r < j->n; r++)
		buf_put(e, &j->stage[(size_t)s->ifl * j->n + r]);
}

/*
 * A push of a later round reached a slot that collects the first round this
 * engine has seen of it. Its sender has the result of that round, which this
 * engine never made: the round finished on another reducer (the chunk moved
 * here), and what collects here was opened by a late copy. Drop that round and
 * collect the sender's instead, in the same buffer and in-flight id.
 */
static void slot_restart(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct job *j = c->j;
	struct slot *s = c->s;

	if (s->flags & SF_TIMED_OUT)
		JUNCOUNT(e, j, incomplete_slots);
	else
		list_del(j, &j->active, c->sidx);
	stage_free(e, j, s);
	slot_begin(c, SF_FIRST);
	e->st.stale_rounds++;
}

/*
 * Push of @p rank into collecting slot @p s: its lateness, from the round's
 * first push (the slot's open time, so the first push's is 0), into the rank's
 * table. A timed-out slot's t is its last report, a slot timeout or more after
 * the round began: the figure is then a lower bound. A few instructions, no
 * branch but that one; the table was allocated with the job.
 */
static inline void late_note(struct job *j, uint32_t rank, const struct slot *s, uint64_t now,
			     uint64_t timeout)
{
	struct sg_late_rank *l = &j->late[rank];
	uint64_t ns = age(now, s->t);

	if (unlikely(s->flags & SF_TIMED_OUT))
		ns += timeout;
	l->hist[sg_late_bucket(ns)]++;
	l->sum_ns += ns;
	l->avg_ns += (ns >> SG_LATE_AVG_SHIFT) - (l->avg_ns >> SG_LATE_AVG_SHIFT);
}

/*
 * @p rank's push completed its round: it came last. Once per round. A rank
 * whose average passes conf.late_log_ns is logged once (at most one line per
 * job per LATE_LOG_PERIOD_NS; one held back is logged at a later round), and
 * again only after its average fell under half the threshold.
 */
static void late_last(struct sg_dp_engine *e, struct job *j, uint32_t rank, uint64_t now)
{
	const struct sg_late_rank *l = &j->late[rank];
	uint64_t bit = 1ull << rank;

	j->late[rank].last++;
	if (likely(l->avg_ns <= e->conf.late_log_ns)) {
		if (unlikely(j->late_told & bit) && l->avg_ns < e->conf.late_log_ns / 2)
			j->late_told &= ~bit;
		return;
	}
	if ((j->late_told & bit) ||
	    (j->late_logged && age(now, j->late_log_t) < LATE_LOG_PERIOD_NS))
		return;
	j->late_told |= bit;
	j->late_logged = true;
	j->late_log_t = now;
	SG_DP_ENG_LOG(WARNING, "job %" PRIu32 ": rank %" PRIu32 " is late: %.1f ms after its rounds' "
		"first push on average, last in %" PRIu64 " of %" PRIu64 " rounds (over %.1f ms)",
		j->id, rank, (double)l->avg_ns / 1e6, l->last, j->st.rounds_completed + 1,
		(double)e->conf.late_log_ns / 1e6);
}

/* Add one push to a collecting slot. @return SG_DP_USED_* bits (NACKED: not added). */
static int slot_add(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct job *j = c->j;
	struct slot *s = c->s;
	uint32_t rank = c->m->rank;
	int rc;

	if (j->mode == SG_MODE_DETERM && rank != s->next_rank) {
		/* Out of rank order: hold a copy until the lower ranks are folded in. */
		void **st = &j->stage[(size_t)s->ifl * j->n + rank];

		*st = buf_get(e, c->now, s);
		if (*st == NULL) {
			emit_code(e, j, c->k, c->chunk, s->round, rank, SG_DP_T_NACK,
				  SG_DP_C_BUSY);
			return USED_NACK;
		}
		memcpy(*st, c->m->payload, (size_t)c->nelem * c->k->esz);
	} else if (j->mode == SG_MODE_DETERM) {
		void **st;

		acc_fold(j, c->k, s->acc, c->m->payload, c->nelem, rank == 0);
		s->next_rank++;
		while (s->next_rank < j->n &&
		       *(st = &j->stage[(size_t)s->ifl * j->n + s->next_rank]) != NULL) {
			acc_fold(j, c->k, s->acc, *st, c->nelem, false);
			buf_put(e, st);
			s->next_rank++;
		}
	} else if (!c->folded && (rc = acc_fold_checked(e, c, &s->acc, s->arrived == 0)) < 0) {
		return rc;
	}
	late_note(j, rank, s, c->now, e->conf.slot_timeout_ns);
	s->arrived |= 1ull << rank;
	JCOUNT(e, j, rx_pushes);
	j->st.rx_bytes += (uint64_t)c->nelem * c->k->esz;
	if (s->arrived != j->full)
		return SG_DP_USED_SUMMED;
	late_last(e, j, rank, c->now);
	slot_complete(e, c);
	return SG_DP_USED_SUMMED | SG_DP_USED_COMPLETED;
}

/* A damaged datagram (sg_dp_engine_rx_csum()) is not dropped for its header's sake. */
static int count_drop(struct sg_dp_engine *e, enum sg_dp_drop why)
{
	if (!csum_verify(e))
		return csum_fail(e, NULL);
	e->st.drops[why]++;
	return -EBADMSG;
}

/* A drop of a packet whose job is known: counted for the job too. */
static int job_drop(struct sg_dp_engine *e, struct job *j, enum sg_dp_drop why)
{
	if (!csum_verify(e))
		return csum_fail(e, j);
	j->st.drops++;
	j->st.drops_by[why]++;
	return count_drop(e, why);
}

/* GONE's and STALE's payload: the round of slot @p s, and whether it finished. */
static void round_info(const struct slot *s, struct sg_dp_round_info *ri)
{
	ri->round = htobe32(s->round);
	ri->finished = htobe32(s->state == S_DONE);
}

/*
 * One more refusal answered in the REFUSE_NS window that began at *@p t0, of
 * which *@p n went out: false once REFUSE_MAX have (then the packet goes
 * unanswered).
 */
static bool refuse_budget(uint64_t *t0, uint32_t *n, uint64_t now)
{
	if (now - *t0 >= REFUSE_NS) {
		*t0 = now;
		*n = 0;
	}
	if (*n >= REFUSE_MAX)
		return false;
	(*n)++;
	return true;
}

/*
 * Answer a PUSH the job refuses with ERROR @p code and its 8-byte @p payload,
 * sent back to where it came from, echoing its header (so that the worker
 * matches it to its chunk). Only for packets with the job's token (the caller
 * checked it), and at most REFUSE_MAX per REFUSE_NS per job.
 */
static void refuse(struct sg_dp_engine *e, struct job *j, const struct sg_dp_msg *m,
		   uint64_t src, uint64_t now, uint16_t code, const void *payload)
{
	struct sg_dp_msg r = *m;
	void *pkt, *buf;

	/* a damaged datagram is nobody's: it gets no answer (sg_dp_engine_rx_csum()) */
	if (m->type != SG_DP_T_PUSH || !csum_verify(e) ||
	    !refuse_budget(&j->refuse_t0, &j->refuse_n, now))
		return;
	/* a push that passed its MAC gets a MACed answer; one that has none, one without */
	bool mac = j->auth != NULL && (m->flags & SG_DP_F_MAC);
	uint32_t len = SG_DP_HDR_LEN + 8 + (mac ? SG_DP_MAC_TRAILER : 0);

	buf = e->conf.tx.alloc(e->conf.tx.ctx, src, len, &pkt);
	if (buf == NULL) {
		JCOUNT(e, j, tx_fail);
		return;
	}
	r.type = SG_DP_T_ERROR;
	r.flags = mac ? SG_DP_F_MAC : 0;
	r.code = code;
	r.nelem = 0;
	sg_dp_build_hdr(buf, &r);
	memcpy((uint8_t *)buf + SG_DP_HDR_LEN, payload, 8);
	if (mac)
		sg_auth_job_sign(j->auth, m->rank, buf, SG_DP_HDR_LEN + 8);
	e->conf.tx.send(e->conf.tx.ctx, src, pkt, len);
	JCOUNT(e, j, errors_sent);
}

/*
 * A PUSH or PULL of another protocol version: tell its sender which versions this
 * node speaks (ERROR VERSION), so that its worker fails naming both instead of
 * timing out. Its sender shows no token (another version's may lie elsewhere), so
 * at most REFUSE_MAX such answers go out per REFUSE_NS per engine.
 */
static void version_refuse(struct sg_dp_engine *e, const void *pkt, uint32_t len, uint64_t src,
			   uint64_t now)
{
	uint8_t reply[SG_DP_HDR_LEN + sizeof(struct sg_dp_version_info)];
	int n = sg_dp_build_version_error(reply, sizeof(reply), pkt, len);
	void *mb, *buf;

	if (n < 0 || !csum_verify(e) || !refuse_budget(&e->version_t0, &e->version_n, now))
		return;
	buf = e->conf.tx.alloc(e->conf.tx.ctx, src, (uint32_t)n, &mb);
	if (buf == NULL) {
		e->st.tx_fail++;
		return;
	}
	memcpy(buf, reply, (size_t)n);
	e->conf.tx.send(e->conf.tx.ctx, src, mb, (uint32_t)n);
	e->st.errors_sent++;
}

/*
 * Drop a push that disagrees with job @p j's geometry (with key @p k's, when the job
 * has it), and tell its sender what the job is.
 */
static int mismatch(struct sg_dp_engine *e, struct job *j, const struct key_ent *k,
		    const struct sg_dp_msg *m, uint64_t src, uint64_t now, enum sg_dp_drop why,
		    uint8_t what)
{
	struct sg_dp_mismatch mm = {.what = what,
				    .dtype = k != NULL ? k->dtype : (uint8_t)j->dtype,
				    .chunk_bytes = htobe32(j->chunk_bytes)};

	refuse(e, j, m, src, now, SG_DP_C_MISMATCH, &mm);
	return job_drop(e, j, why);
}

/*
 * auth = mac: a datagram whose MAC flag is not the job's, or whose MAC is in an
 * algorithm this CPU cannot check (GMAC without AES-NI), gets ERROR MISMATCH
 * (its worker stops at once, naming the mismatch); one that fails its rank's
 * MAC, or replays, is dropped by its reason. A damaged one is the checksum's,
 * not a forgery. @return 0 (verified) or the drop.
 */
static int auth_check(struct sg_dp_engine *e, struct job *j, const struct sg_dp_msg *m,
		      const void *pkt, uint32_t len, uint64_t src, uint64_t now)
{
	static const enum sg_dp_drop drop_of[] = {
		[SG_AUTH_SHORT] = SG_DP_DROP_AUTH_SHORT, [SG_AUTH_OTHER_JOB] = SG_DP_DROP_AUTH_JOB,
		[SG_AUTH_BAD] = SG_DP_DROP_AUTH_BAD, [SG_AUTH_REPLAY] = SG_DP_DROP_AUTH_REPLAY};
	enum sg_auth_verdict v;

	if ((j->auth != NULL) != ((m->flags & SG_DP_F_MAC) != 0))
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_AUTH_MISMATCH, SG_DP_MM_AUTH);
	if (!csum_verify(e))
		return csum_fail(e, j);
	v = sg_auth_job_check(j->auth, m->rank, pkt, len);
	if (v == SG_AUTH_ALG) /* a MAC this CPU cannot check: tell the worker, do not drop in silence */
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_AUTH_MISMATCH, SG_DP_MM_MAC_ALG);
	return v == SG_AUTH_OK ? 0 : job_drop(e, j, drop_of[v]);
}

/* Resend a kept result, or ERROR GONE if it was reclaimed. */
static int resend(struct sg_dp_engine *e, struct pkt_ctx *c, const void *acc, uint32_t round)
{
	int rc = commit(e, c);

	if (rc < 0)
		return rc;
	if (acc == NULL) {
		struct sg_dp_msg m;
		struct sg_dp_round_info ri;

		round_info(c->s, &ri);
		reply_msg(&m, c->j, c->k, c->chunk, round);
		m.type = SG_DP_T_ERROR;
		m.code = SG_DP_C_GONE;
		emit_small(e, c->j, &m, c->m->rank, &ri, sizeof(ri));
		return SG_DP_USED_REPLIED;
	}
	emit_result(e, c->j, c->k, c->chunk, round, acc, c->m->rank);
	JCOUNT(e, c->j, retransmits_served);
	return SG_DP_USED_REPLIED;
}

/*
 * Where a round lies relative to the slot's: the window is r-1 .. r+1. A push
 * from behind it gets ERROR STALE with the slot's round (a program restarted
 * against a job whose rounds went on; a late duplicate's reply is stale to its
 * sender, who has moved on).
 */
static int window_drop(struct sg_dp_engine *e, struct pkt_ctx *c, int32_t d)
{
	int rc = commit(e, c);

	if (rc < 0)
		return rc;
	if (d < 0 && c->j->mode != SG_MODE_ASYNC) {
		struct sg_dp_round_info ri;

		round_info(c->s, &ri);
		refuse(e, c->j, c->m, c->src, c->now, SG_DP_C_STALE, &ri);
	}
	return job_drop(e, c->j, d < 0 ? SG_DP_DROP_ROUND_OLD : SG_DP_DROP_ROUND_NEW);
}

/*
 * A rank resends a push that slot @p c->s collects and already holds: its RESULT is
 * late because other ranks are. The push is dropped as a duplicate, and answered with
 * ERROR WAITING naming the missing ranks, so that the worker tells this live node from
 * a dead one (docs/protocol.md), within the chunk's budget of N per tick.
 */
static int still_waiting(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct slot *s = c->s;
	uint32_t tick = (uint32_t)(c->now >> WAIT_TICK_SHIFT);
	int rc = commit(e, c); /* a checked packet: it still commits (its sender is known) */

	if (rc < 0)
		return rc;
	if (tick != s->wait_t) {
		s->wait_t = tick;
		s->wait_n = 0;
	}
	if (s->wait_n < c->j->n) {
		s->wait_n++;
		emit_missing(e, c->j, c->k, c->chunk, s, c->m->rank, SG_DP_C_WAITING);
	}
	return job_drop(e, c->j, SG_DP_DROP_DUPLICATE);
}

/*
 * A rank of a timed-out round resends its push: it is still waiting, so tell
 * it again who is missing, but once per slot timeout and rank (its report may
 * have been lost), not on every retransmit; the other resends get WAITING.
 */
static int lost_again(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct slot *s = c->s;
	uint64_t bit = 1ull << c->m->rank;
	int rc = commit(e, c);

	if (rc < 0)
		return rc;
	if (age(c->now, s->t) >= e->conf.slot_timeout_ns) {
		s->t = c->now;
		s->told = 0;
	}
	if (s->told & bit)
		return still_waiting(e, c);
	s->told |= bit;
	emit_lost(e, c->j, c->k, c->chunk, s, c->m->rank);
	return SG_DP_USED_REPLIED;
}

static bool slot_release(struct sg_dp_engine *e, struct job *j, uint32_t i);

/*
 * A push two or more rounds ahead of the slot's round r, flagged REOPEN: its
 * sender starts the key in a new node set (an elastic job's switch), with the
 * result of a round after r made elsewhere (the key moved away from this
 * engine and back), so every rank had r's result and what this slot holds is
 * stale. Only the flag proves it: an unflagged push that far ahead is garbage
 * or a bug, dropped (ROUND_NEW), and never discards a round or a kept result.
 * Release it (no shadow: a push of the round before gets ERROR GONE, never an
 * old result) and open the sender's round as a first one.
 */
static int slot_skip(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	int rc = commit(e, c);

	if (rc < 0)
		return rc;
	slot_release(e, c->j, c->sidx);
	e->st.stale_rounds++;
	return slot_open(e, c) ?: slot_add(e, c);
}

static int sync_push(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct slot *s = c->s;
	int32_t d = rdiff(c->m->round, s->round);

	switch (s->state) {
	case S_NEW:
		return slot_open(e, c) ?: slot_add(e, c);
	case S_COLLECT:
		if (d == 0) {
			if (!(s->arrived & (1ull << c->m->rank)))
				return slot_add(e, c); /* a NACK still answers the packet */
			if (s->flags & SF_TIMED_OUT)
				return lost_again(e, c);
			return still_waiting(e, c);
		}
		if (d == -1)
			return resend(e, c, s->prev, c->m->round);
		if (d > 0 && (s->flags & SF_FIRST)) {
			int rc = commit(e, c);

			if (rc < 0)
				return rc;
			slot_restart(e, c);
			return slot_add(e, c);
		}
		if (d > 1 && (c->m->flags & SG_DP_F_REOPEN))
			return slot_skip(e, c);
		return window_drop(e, c, d);
	default: /* S_DONE */
		if (d == 0)
			return resend(e, c, s->acc, s->round);
		if (d == 1)
			return slot_open(e, c) ?: slot_add(e, c);
		if (d > 1 && (c->m->flags & SG_DP_F_REOPEN))
			return slot_skip(e, c);
		return window_drop(e, c, d);
	}
}

static int sync_pull(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct slot *s = c->s;
	int32_t d = rdiff(c->m->round, s->round);

	if (s->state == S_NEW || (s->state == S_COLLECT && d == 0) ||
	    (s->state == S_DONE && d == 1))
		return job_drop(e, c->j, SG_DP_DROP_PENDING);
	if (s->state == S_COLLECT && d == -1) {
		JCOUNT(e, c->j, rx_pulls);
		return resend(e, c, s->prev, c->m->round);
	}
	if (s->state == S_DONE && d == 0) {
		JCOUNT(e, c->j, rx_pulls);
		return resend(e, c, s->acc, s->round);
	}
	return window_drop(e, c, d);
}

/* ---- async slots --------------------------------------------------------- */

static int async_push(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	struct job *j = c->j;
	struct slot *s = c->s;
	uint32_t rank = c->m->rank;
	uint32_t *last = &j->around[(size_t)c->sidx * j->n + rank];
	bool seen = s->arrived & (1ull << rank);
	int32_t d = rdiff(c->m->round, *last);
	int rc;

	if (seen && d == 0)
		return resend(e, c, s->acc, c->m->round);
	if (seen && d != 1)
		return window_drop(e, c, d);
	if (s->state == S_NEW) {
		/* a NACK, or a kept result reclaimed for the push: only for an intact one */
		if (sg_sum_pool_avail(e->pool) == 0 && (rc = commit(e, c)) < 0)
			return rc;
		s->acc = buf_get(e, c->now, s);
		if (s->acc == NULL) {
			emit_code(e, j, c->k, c->chunk, c->m->round, rank, SG_DP_T_NACK,
				  SG_DP_C_BUSY);
			return USED_NACK;
		}
		rc = acc_fold_checked(e, c, &s->acc, true);
		if (rc < 0) {
			buf_put(e, &s->acc);
			return rc;
		}
		s->state = S_ASYNC;
	} else if ((rc = acc_fold_checked(e, c, &s->acc, false)) < 0) {
		return rc;
	}
	s->arrived |= 1ull << rank;
	*last = c->m->round;
	JCOUNT(e, j, rx_pushes);
	j->st.rx_bytes += (uint64_t)c->nelem * c->k->esz;
	e->st.async_updates++;
	emit_result(e, j, c->k, c->chunk, c->m->round, s->acc, rank);
	return SG_DP_USED_SUMMED | SG_DP_USED_REPLIED;
}

static int async_pull(struct sg_dp_engine *e, struct pkt_ctx *c)
{
	int rc;

	if (c->s->state == S_NEW)
		return job_drop(e, c->j, SG_DP_DROP_PENDING);
	if ((rc = commit(e, c)) < 0)
		return rc;
	JCOUNT(e, c->j, rx_pulls);
	emit_result(e, c->j, c->k, c->chunk, c->m->round, c->s->acc, c->m->rank);
	return SG_DP_USED_REPLIED;
}

/* ---- open jobs: keys made by their first push ---------------------------- */

/* Bytes of a key of @p nchunks chunks whose last one holds @p last elements of @p esz bytes. */
static inline uint64_t key_bytes(const struct job *j, uint32_t nchunks, uint32_t last,
				 uint32_t esz)
{
	return (uint64_t)(nchunks - 1) * j->chunk_bytes + (uint64_t)last * esz;
}

/*
 * Learn the length of the last chunk of open key @p k from its first push @p m:
 * 1..a full chunk's elements, and the key within partition_bytes. @return 0 or the drop.
 */
static int key_learn_last(struct sg_dp_engine *e, struct job *j, struct key_ent *k,
			  const struct sg_dp_msg *m, uint64_t src, uint64_t now)
{
	if (m->nelem == 0 || m->nelem > k->chunk_elems)
		return mismatch(e, j, k, m, src, now, SG_DP_DROP_NELEM, SG_DP_MM_NELEM);
	if (key_bytes(j, k->nchunks, m->nelem, k->esz) > j->part)
		return mismatch(e, j, k, m, src, now, SG_DP_DROP_PARTITION, SG_DP_MM_PARTITION);
	k->last = m->nelem;
	return 0;
}

/*
 * A push for a key open job @p j does not have yet (the job, token and rank are
 * checked): make the key from its header if the header holds together, and if the
 * job's slot budget has room for its chunks. @return 0 (the key is the job's last)
 * or the drop, answered with ERROR MISMATCH or FULL.
 */
static int key_create(struct sg_dp_engine *e, struct job *j, const struct sg_dp_msg *m,
		      uint64_t src, uint64_t now)
{
	uint32_t esz = (uint32_t)sg_dtype_size((enum sg_dtype)m->dtype), per, h;
	bool last = m->chunk + 1 == m->nchunks;
	struct key_ent *k;

	if (m->nchunks == 0 || m->chunk >= m->nchunks)
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_CHUNK, SG_DP_MM_CHUNKS);
	if (m->offset != (uint64_t)m->chunk * j->chunk_bytes)
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_OFFSET, SG_DP_MM_OFFSET);
	if (j->dtype != SG_DTYPE_ANY && m->dtype != j->dtype)
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_JOB_DTYPE, SG_DP_MM_DTYPE);
	per = j->chunk_bytes / esz;
	if (last ? m->nelem == 0 || m->nelem > per : m->nelem != per)
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_NELEM, SG_DP_MM_NELEM);
	if (key_bytes(j, m->nchunks, last ? m->nelem : 1, esz) > j->part)
		return mismatch(e, j, NULL, m, src, now, SG_DP_DROP_PARTITION, SG_DP_MM_PARTITION);
	if ((uint64_t)j->slots_used + m->nchunks > j->nslots || j->nkeys == j->max_keys) {
		struct sg_dp_full f = {.slots = htobe32(j->nslots), .used = htobe32(j->slots_used)};

		refuse(e, j, m, src, now, SG_DP_C_FULL, &f);
		return job_drop(e, j, SG_DP_DROP_FULL);
	}
	k = &j->keys[j->nkeys];
	*k = (struct key_ent){.id = m->key, .nchunks = m->nchunks, .base = j->slots_used,
			      .chunk_elems = per, .dtype = m->dtype, .esz = (uint8_t)esz,
			      .last = last ? m->nelem : LAST_UNKNOWN};
	for (h = hash32(k->id) & j->kmask; j->khash[h] != 0; h = (h + 1) & j->kmask)
		;
	j->khash[h] = ++j->nkeys;
	j->slots_used += m->nchunks;
	j->st.keys++;
	j->st.slots_used += m->nchunks;
	e->st.keys_created++;
	return 0;
}

/* ---- entry points -------------------------------------------------------- */

static int engine_rx(struct sg_dp_engine *e, const void *pkt, uint32_t len, uint64_t src,
		     uint64_t now)
{
	struct sg_dp_msg m;
	enum sg_dp_drop why;
	struct pkt_ctx c = {.src = src};
	struct job *j;
	int rc;

	e->st.rx_packets++;
	if (sg_dp_parse(pkt, len, &m, &why) != 0) {
		if (unlikely(why == SG_DP_DROP_VERSION))
			version_refuse(e, pkt, len, src, now);
		return count_drop(e, why);
	}
	if (m.type == SG_DP_T_JOIN)
		return count_drop(e, SG_DP_DROP_JOIN);
	if (m.type != SG_DP_T_PUSH && m.type != SG_DP_T_PULL)
		return count_drop(e, SG_DP_DROP_DIRECTION);
	j = job_find(e, m.job);
	if (j == NULL)
		return count_drop(e, SG_DP_DROP_JOB);
	j->st.rx_packets++;
	if (m.token != j->token)
		return job_drop(e, j, SG_DP_DROP_TOKEN);
	if (m.rank >= j->n)
		return job_drop(e, j, SG_DP_DROP_RANK);
	/* before anything of the job is touched: its MAC, with auth = mac */
	if (unlikely(j->auth != NULL || (m.flags & SG_DP_F_MAC)) &&
	    (rc = auth_check(e, j, &m, pkt, len, src, now)) < 0)
		return rc;
	/* from here on the sender holds the job's token: a refused push is answered */
	c.k = key_find(j, m.key);
	if (unlikely(c.k == NULL)) {
		/* a PULL never makes a key: it asks for a result, and there is none */
		if (!j->open || m.type != SG_DP_T_PUSH)
			return mismatch(e, j, NULL, &m, src, now, SG_DP_DROP_KEY, SG_DP_MM_KEY);
		/* a key is made from an intact push only (sg_dp_engine_rx_csum()) */
		if (!csum_verify(e))
			return csum_fail(e, j);
		rc = key_create(e, j, &m, src, now);
		if (rc < 0)
			return rc;
		c.k = &j->keys[j->nkeys - 1];
	}
	if (m.chunk >= c.k->nchunks || m.nchunks != c.k->nchunks)
		return mismatch(e, j, c.k, &m, src, now, SG_DP_DROP_CHUNK, SG_DP_MM_CHUNKS);
	if (m.offset != (uint64_t)m.chunk * j->chunk_bytes)
		return mismatch(e, j, c.k, &m, src, now, SG_DP_DROP_OFFSET, SG_DP_MM_OFFSET);
	if (m.dtype != c.k->dtype)
		return mismatch(e, j, c.k, &m, src, now, SG_DP_DROP_JOB_DTYPE, SG_DP_MM_DTYPE);
	c.nelem = chunk_nelem(c.k, m.chunk);
	if (m.type == SG_DP_T_PUSH && unlikely(m.nelem != c.nelem)) {
		/* the last chunk of a new open key, whose first push tells its length */
		if (!csum_verify(e))
			return csum_fail(e, j);
		rc = c.nelem == LAST_UNKNOWN ? key_learn_last(e, j, c.k, &m, src, now)
				  : mismatch(e, j, c.k, &m, src, now, SG_DP_DROP_NELEM,
					     SG_DP_MM_NELEM);
		if (rc < 0)
			return rc;
		c.nelem = m.nelem;
	}

	c.j = j;
	c.m = &m;
	c.chunk = m.chunk;
	c.sidx = c.k->base + m.chunk;
	c.s = &j->slots[c.sidx];
	c.now = now;
	/*
	 * A push that a sum is waiting for commits once folded in: the fold checks
	 * an unchecked checksum on the way. Anything else commits now.
	 */
	if ((!e->cs.pending || m.type != SG_DP_T_PUSH || j->mode == SG_MODE_DETERM) &&
	    (rc = commit(e, &c)) < 0)
		return rc;
	if (j->mode == SG_MODE_ASYNC)
		return m.type == SG_DP_T_PUSH ? async_push(e, &c) : async_pull(e, &c);
	return m.type == SG_DP_T_PUSH ? sync_push(e, &c) : sync_pull(e, &c);
}

int sg_dp_engine_rx(struct sg_dp_engine *e, const void *pkt, uint32_t len, uint64_t src,
		    uint64_t now)
{
	return engine_rx(e, pkt, len, src, now);
}

int sg_dp_engine_rx_csum(struct sg_dp_engine *e, const void *pkt, uint32_t len, uint64_t src,
			 uint64_t now, uint16_t csum)
{
	int rc;

	e->cs.pkt = pkt;
	e->cs.len = len;
	e->cs.before = csum;
	e->cs.pending = true;
	e->cs.bad = false;
	rc = engine_rx(e, pkt, len, src, now);
	/* every path checks before it acts: a late check (emit_*) that failed sent nothing */
	if (rc >= 0 && e->cs.bad)
		rc = -EILSEQ;
	e->cs.pending = false;
	e->cs.bad = false;
	return rc;
}

/* "3,5,17" for the set bits of @mask, truncated to fit @buf. */
static void format_ranks(char *buf, size_t cap, uint64_t mask)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned int r = 0; r < 64 && off < cap; r++) {
		if (mask & (1ull << r)) {
			int w = snprintf(buf + off, cap - off, "%s%u", off ? "," : "", r);

			if (w < 0)
				break;
			off += (size_t)w;
		}
	}
}

static int job_poll(struct sg_dp_engine *e, struct job *j, uint64_t now, int logged)
{
	int n = 0;
	uint32_t i;

	while ((i = j->active.head) != NIL &&
	       age(now, j->slots[i].t) >= e->conf.slot_timeout_ns) {
		struct slot *s = &j->slots[i];
		const struct key_ent *k;
		uint32_t chunk;

		/* Find the slot's key: keys are laid out in slot order. */
		{
			uint32_t lo = 0, hi = j->nkeys - 1;

			while (lo < hi) {
				uint32_t mid = lo + (hi - lo + 1) / 2;

				if (j->keys[mid].base <= i)
					lo = mid;
				else
					hi = mid - 1;
			}
			k = &j->keys[lo];
			chunk = i - k->base;
		}
		list_del(j, &j->active, i);
		s->flags |= SF_TIMED_OUT;
		JCOUNT(e, j, slot_timeouts);
		JCOUNT(e, j, incomplete_slots);
		if (logged + n < LOG_PER_POLL) {
			char miss[200];

			format_ranks(miss, sizeof(miss), j->full & ~s->arrived);
			SG_DP_ENG_LOG(ERR, "job %" PRIu32 " key %" PRIu32 " chunk %" PRIu32
				" round %" PRIu32 ": %d of %" PRIu32 " pushes after %" PRIu64
				" ms; missing ranks: %s", j->id, k->id, chunk, s->round,
				__builtin_popcountll(s->arrived), j->n,
				age(now, s->t) / 1000000, miss);
		}
		for (uint32_t r = 0; r < j->n; r++)
			if (s->arrived & (1ull << r))
				emit_lost(e, j, k, chunk, s, r);
		/* off the active list: t and told now pace the repeated reports */
		s->t = now;
		s->told = s->arrived;
		n++;
	}
	return n;
}

int sg_dp_engine_poll(struct sg_dp_engine *e, uint64_t now)
{
	int n = 0;

	for (uint32_t i = 0; i < e->njobs; i++)
		n += job_poll(e, e->jobs[i], now, n);
	if (n > LOG_PER_POLL)
		SG_DP_ENG_LOG(ERR, "%d more slots timed out (worker loss); see the slot_timeouts counter",
			n - LOG_PER_POLL);
	return n;
}

void sg_dp_engine_stats(const struct sg_dp_engine *e, struct sg_dp_stats *st)
{
	*st = e->st;
	st->pool_free = sg_sum_pool_avail(e->pool);
}

int sg_dp_engine_job_stats(const struct sg_dp_engine *e, uint32_t job_id,
			   struct sg_dp_job_stats *st)
{
	for (uint32_t i = 0; e != NULL && i < e->njobs; i++) {
		if (e->jobs[i]->id == job_id) {
			*st = e->jobs[i]->st;
			return 0;
		}
	}
	return -ENOENT;
}

int sg_dp_engine_job_lateness(const struct sg_dp_engine *e, uint32_t job_id, struct sg_late *out)
{
	for (uint32_t i = 0; e != NULL && i < e->njobs; i++) {
		const struct job *j = e->jobs[i];

		if (j->id != job_id)
			continue;
		memset(out, 0, sizeof(*out));
		out->nranks = j->n;
		memcpy(out->rank, j->late, j->n * sizeof(*j->late));
		for (uint32_t r = 0; r < j->n; r++)
			out->rounds += j->late[r].last;
		return 0;
	}
	return -ENOENT;
}

unsigned int sg_dp_engine_jobs(const struct sg_dp_engine *e, uint32_t *ids, unsigned int cap)
{
	for (uint32_t i = 0; i < e->njobs && i < cap; i++)
		ids[i] = e->jobs[i]->id;
	return e->njobs;
}

uint32_t sg_dp_engine_buf_size(const struct sg_dp_engine *e)
{
	return e->buf_size;
}

uint32_t sg_dp_engine_max_payload(const struct sg_dp_engine *e)
{
	return e->conf.max_payload;
}

uint32_t sg_dp_engine_max_jobs(const struct sg_dp_engine *e)
{
	return e->conf.max_jobs;
}

unsigned int sg_dp_engine_jobs_snapshot(struct sg_dp_engine *e)
{
	for (uint32_t i = 0; i < e->njobs; i++) {
		e->snap_ids[i] = e->jobs[i]->id;
		e->snap_st[i] = e->jobs[i]->st;
	}
	e->snap_n = e->njobs;
	return e->snap_n;
}

unsigned int sg_dp_engine_snapshot(const struct sg_dp_engine *e, const uint32_t **ids,
				   const struct sg_dp_job_stats **st)
{
	*ids = e->snap_ids;
	*st = e->snap_st;
	return e->snap_n;
}

/* ---- construction -------------------------------------------------------- */

struct sg_dp_engine *sg_dp_engine_create(const struct sg_dp_engine_conf *conf)
{
	struct sg_dp_engine *e;

	if (conf == NULL || conf->tx.alloc == NULL || conf->tx.send == NULL ||
	    (conf->tx.alloc_multi == NULL) != (conf->tx.send_multi == NULL)) {
		SG_DP_ENG_LOG(ERR, "engine: tx.alloc and tx.send are required; alloc_multi and "
			"send_multi go together");
		errno = EINVAL;
		return NULL;
	}
	/* The hot path calls the unchecked sums, which need an implementation chosen. */
	if (sg_sum_init() != 0) {
		SG_DP_ENG_LOG(ERR, "engine: the summation library has no usable implementation");
		errno = ENOTSUP;
		return NULL;
	}
	e = aligned_alloc(RTE_CACHE_LINE_SIZE, sizeof(*e));
	if (e == NULL)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->conf = *conf;
	if (e->conf.pool_bufs == 0)
		e->conf.pool_bufs = DEF_POOL_BUFS;
	if (e->conf.max_payload == 0)
		e->conf.max_payload = SG_DP_PAYLOAD_MTU1500;
	if (e->conf.max_jobs == 0)
		e->conf.max_jobs = DEF_MAX_JOBS;
	if (e->conf.slot_timeout_ns == 0)
		e->conf.slot_timeout_ns = DEF_SLOT_TIMEOUT_NS;
	if (e->conf.shadow_hold_ns == 0)
		e->conf.shadow_hold_ns = DEF_SHADOW_HOLD_NS;
	if (e->conf.late_log_ns == 0)
		e->conf.late_log_ns = DEF_LATE_LOG_NS;
	if (e->conf.max_payload > SG_MAX_CHUNK_BYTES || e->conf.max_payload % 8 != 0) {
		SG_DP_ENG_LOG(ERR, "engine: max_payload %" PRIu32 " must be a multiple of 8, at most %d",
			e->conf.max_payload, SG_MAX_CHUNK_BYTES);
		goto inval;
	}
	if (e->conf.max_jobs > MAX_MAX_JOBS) {
		SG_DP_ENG_LOG(ERR, "engine: max_jobs %" PRIu32 " is above %u", e->conf.max_jobs,
			MAX_MAX_JOBS);
		goto inval;
	}
	if (e->conf.pool_bufs > (1u << 24)) {
		SG_DP_ENG_LOG(ERR, "engine: pool_bufs %" PRIu32 " is above 2^24", e->conf.pool_bufs);
		goto inval;
	}
	/* fp16/bf16 accumulate in fp32: twice the payload. */
	e->buf_size = RTE_ALIGN_CEIL(2 * e->conf.max_payload, 64);
	e->jobs = calloc(e->conf.max_jobs, sizeof(*e->jobs));
	e->snap_ids = calloc(e->conf.max_jobs, sizeof(*e->snap_ids));
	e->snap_st = calloc(e->conf.max_jobs, sizeof(*e->snap_st));
	/* pool_bufs for the slots, and the spare that a checked fold swaps with an accumulator */
	e->pool = sg_sum_pool_create(e->conf.numa_node, e->buf_size, e->conf.pool_bufs + 1);
	e->spare = e->pool != NULL ? sg_sum_pool_get(e->pool) : NULL;
	if (e->jobs == NULL || e->snap_ids == NULL || e->snap_st == NULL || e->pool == NULL) {
		int err = e->pool == NULL ? errno : ENOMEM;

		sg_sum_pool_destroy(e->pool);
		free(e->jobs);
		free(e->snap_ids);
		free(e->snap_st);
		free(e);
		errno = err != 0 ? err : ENOMEM;
		return NULL;
	}
	e->multi = conf->tx.alloc_multi != NULL;
	return e;
inval:
	free(e);
	errno = EINVAL;
	return NULL;
}

static bool slot_release(struct sg_dp_engine *e, struct job *j, uint32_t i);

static void job_free(struct sg_dp_engine *e, struct job *j)
{
	/* a half-built job's slots are all S_NEW: releasing them touches nothing else; an open
	 * job's slots past those its keys took were never used (nor their pages touched) */
	for (uint32_t i = 0; j->slots != NULL && i < j->slots_used; i++)
		slot_release(e, j, i);
	free(j->slots);
	free(j->keys);
	free(j->khash);
	free(j->peer);
	free(j->ifl_free);
	free(j->stage);
	free(j->around);
	free(j->late);
	sg_auth_job_destroy(j->auth);
	free(j);
}

/* The largest accumulator a chunk of @p chunk_bytes needs: of the job's dtype, or of any. */
static size_t acc_bytes(const struct sg_dp_job_conf *c, uint32_t chunk_bytes)
{
	size_t most = 0;

	for (unsigned int dt = 0; dt < SG_DTYPE_COUNT; dt++)
		if (c->dtype == SG_DTYPE_ANY || dt == (unsigned int)c->dtype)
			most = RTE_MAX(most, chunk_bytes / sg_dtype_size((enum sg_dtype)dt) *
						     sg_sum_acc_elem_size((enum sg_dtype)dt,
									  c->sum_flags));
	return most;
}

/* An open job's own checks: no keys, a slot budget in range. */
static int open_check(const struct sg_dp_job_conf *c)
{
	if (c->keys != NULL || c->nkeys != 0) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": an open job comes without keys (keys %s, nkeys %"
			PRIu32 "): its pushes make them", c->id, c->keys ? "set" : "NULL", c->nkeys);
		return -EINVAL;
	}
	if (c->slots > SG_OPEN_SLOTS_MAX) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": %" PRIu32 " slots: an open job takes 1..%u",
			c->id, c->slots, SG_OPEN_SLOTS_MAX);
		return -EINVAL;
	}
	return 0;
}

/* Key @p c of a fixed job of elements of @p esz bytes: 1..@p part bytes. @return 0 or -EINVAL. */
static int key_check(uint32_t job, size_t esz, uint32_t part, const struct sg_dp_key *c)
{
	uint64_t bytes = (uint64_t)c->nelem * esz;

	if (c->nelem == 0 || bytes > part) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": key %" PRIu32 " has %" PRIu64 " bytes; must be "
			"1..partition_bytes %" PRIu32, job, c->id, bytes, part);
		return -EINVAL;
	}
	return 0;
}

static int job_check(const struct sg_dp_engine *e, const struct sg_dp_job_conf *c,
		     uint32_t chunk_bytes, uint32_t part)
{
	size_t esz = sg_dtype_size(c->dtype);

	if (c->nworkers < 1 || c->nworkers > SG_MAX_WORKERS) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": %" PRIu32 " workers is outside 1..%d", c->id,
			c->nworkers, SG_MAX_WORKERS);
		return -EINVAL;
	}
	if (c->open && c->dtype == SG_DTYPE_ANY)
		esz = 1; /* each key's own; chunk_bytes is a multiple of 8, so of every size */
	if (esz == 0) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": unknown dtype %d%s", c->id, (int)c->dtype,
			c->dtype == SG_DTYPE_ANY ? " (any: open jobs only)" : "");
		return -EINVAL;
	}
	if ((unsigned int)c->mode >= SG_MODE_COUNT) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": unknown mode %d", c->id, (int)c->mode);
		return -EINVAL;
	}
	if ((c->sum_flags & ~SG_SUM_F_NATIVE) != 0) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": unknown sum flags 0x%x", c->id, c->sum_flags);
		return -EINVAL;
	}
	if (c->auth_key != NULL && chunk_bytes + SG_DP_MAC_TRAILER > e->conf.max_payload) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": chunk_bytes %" PRIu32 " and a MAC's %d bytes of "
			"trailer (auth = mac) exceed the engine's max_payload %" PRIu32, c->id,
			chunk_bytes, SG_DP_MAC_TRAILER, e->conf.max_payload);
		return -EINVAL;
	}
	if (chunk_bytes % 8 != 0 || chunk_bytes > e->conf.max_payload) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": chunk_bytes %" PRIu32
			" must be a multiple of 8 and at most the engine's max_payload %" PRIu32,
			c->id, chunk_bytes, e->conf.max_payload);
		return -EINVAL;
	}
	if (acc_bytes(c, chunk_bytes) > e->buf_size) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": a %" PRIu32 "-byte chunk's accumulator does not fit "
			"the engine's %" PRIu32 "-byte buffers", c->id, chunk_bytes, e->buf_size);
		return -EINVAL;
	}
	if (c->open)
		return open_check(c);
	if (c->keys == NULL || c->nkeys == 0 || c->nkeys > (1u << 24)) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": needs a key array of 1..2^24 keys (keys %s, nkeys %"
			PRIu32 ")", c->id, c->keys ? "set" : "NULL", c->nkeys);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < c->nkeys; i++)
		if (key_check(c->id, esz, part, &c->keys[i]) != 0)
			return -EINVAL;
	return 0;
}

/* Key entry @p k of fixed job @p j for key @p c, its chunk 0 at slot @p base. */
static void key_fill(struct key_ent *k, const struct job *j, const struct sg_dp_key *c,
		     uint32_t base)
{
	k->id = c->id;
	k->nchunks = sg_dp_chunk_count(c->nelem, j->dtype, j->chunk_bytes);
	k->base = base;
	k->dtype = (uint8_t)j->dtype;
	k->esz = (uint8_t)sg_dtype_size(j->dtype);
	k->chunk_elems = j->chunk_bytes / k->esz;
	k->last = c->nelem - (k->nchunks - 1) * k->chunk_elems;
}

/* Fill the key table and hash; @return total slots or 0 on a duplicate key. */
static uint64_t job_keys(struct job *j, const struct sg_dp_job_conf *c)
{
	uint64_t base = 0;

	for (uint32_t i = 0; i < c->nkeys; i++) {
		struct key_ent *k = &j->keys[i];
		uint32_t h;

		key_fill(k, j, &c->keys[i], (uint32_t)base);
		base += k->nchunks;
		if (base >= NIL)
			return 0;
		for (h = hash32(k->id) & j->kmask; j->khash[h] != 0; h = (h + 1) & j->kmask)
			if (j->keys[j->khash[h] - 1].id == k->id)
				return 0;
		j->khash[h] = i + 1;
	}
	return base;
}

int sg_dp_engine_add_job(struct sg_dp_engine *e, const struct sg_dp_job_conf *c)
{
	uint32_t chunk_bytes, part, hsize = 4;
	uint64_t nslots;
	struct job *j;
	int rc;

	if (e == NULL || c == NULL)
		return -EINVAL;
	chunk_bytes = c->chunk_bytes ? c->chunk_bytes : SG_DP_PAYLOAD_MTU1500;
	part = c->partition_bytes ? c->partition_bytes : SG_PARTITION_BYTES_DEFAULT;
	rc = job_check(e, c, chunk_bytes, part);
	if (rc != 0)
		return rc;
	if (job_find(e, c->id) != NULL)
		return -EEXIST;
	if (e->njobs == e->conf.max_jobs)
		return -ENOSPC;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	j->id = c->id;
	j->n = c->nworkers;
	j->token = c->token;
	j->full = j->n == 64 ? UINT64_MAX : (1ull << j->n) - 1;
	j->dtype = c->dtype;
	j->mode = c->mode;
	j->sum_flags = c->sum_flags;
	j->chunk_bytes = chunk_bytes;
	j->part = part;
	j->open = c->open;
	if (c->auth_key != NULL && (j->auth = sg_auth_job_create(c->auth_key, j->n)) == NULL)
		goto nomem;
	/* an open job: as many keys as slots (each key takes one at least) */
	j->nkeys = c->open ? 0 : c->nkeys;
	j->max_keys = c->open ? (c->slots ? c->slots : SG_OPEN_SLOTS_DEFAULT) : c->nkeys;
	j->max_inflight = c->max_inflight ? c->max_inflight : RTE_MAX(e->conf.pool_bufs / 2, 1u);
	j->max_inflight = RTE_MIN(j->max_inflight, (uint32_t)UINT16_MAX + 1);
	j->active.head = j->active.tail = NIL;
	j->done.head = j->done.tail = NIL;
	while (hsize < 2 * j->max_keys)
		hsize <<= 1;
	j->kmask = hsize - 1;
	j->keys = calloc(j->max_keys, sizeof(*j->keys));
	j->khash = calloc(hsize, sizeof(*j->khash));
	j->peer = calloc(j->n, sizeof(*j->peer));
	j->ifl_free = calloc(j->max_inflight, sizeof(*j->ifl_free));
	j->late = calloc(j->n, sizeof(*j->late));
	if (j->keys == NULL || j->khash == NULL || j->peer == NULL || j->ifl_free == NULL ||
	    j->late == NULL)
		goto nomem;
	nslots = c->open ? j->max_keys : job_keys(j, c);
	if (nslots == 0) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": duplicate key ids or more than 2^32-1 chunks",
			c->id);
		job_free(e, j);
		return -EINVAL;
	}
	j->nslots = (uint32_t)nslots;
	/* calloc: an open job's pages are touched as its keys take slots */
	j->slots = calloc(nslots, sizeof(*j->slots));
	if (j->slots == NULL)
		goto nomem;
	j->slots_used = c->open ? 0 : j->nslots;
	j->st.keys = j->nkeys;
	j->st.slots_used = j->slots_used;
	j->st.slots = j->nslots;
	for (uint32_t i = 0; i < j->max_inflight; i++)
		j->ifl_free[i] = (uint16_t)(j->max_inflight - 1 - i);
	j->ifl_top = j->max_inflight;
	if (j->mode == SG_MODE_DETERM) {
		j->stage = calloc((size_t)j->max_inflight * j->n, sizeof(*j->stage));
		if (j->stage == NULL)
			goto nomem;
	}
	if (j->mode == SG_MODE_ASYNC) {
		j->around = calloc((size_t)nslots * j->n, sizeof(*j->around));
		if (j->around == NULL)
			goto nomem;
	}
	e->jobs[e->njobs++] = j;
	if (j->open)
		SG_DP_ENG_LOG(INFO, "job %" PRIu32 " added (open: its pushes make its keys): %" PRIu32
			" workers, %s, %s, up to %" PRIu32 " chunks of %" PRIu32 " bytes, %"
			PRIu32 " in flight", j->id, j->n, sg_dtype_name(j->dtype),
			sg_mode_name(j->mode), j->nslots, j->chunk_bytes, j->max_inflight);
	else
		SG_DP_ENG_LOG(INFO, "job %" PRIu32 " added: %" PRIu32 " workers, %s, %s, %" PRIu32
			" keys, %" PRIu32 " chunks of %" PRIu32 " bytes, %" PRIu32 " in flight",
			j->id, j->n, sg_dtype_name(j->dtype), sg_mode_name(j->mode), j->nkeys,
			j->nslots, j->chunk_bytes, j->max_inflight);
	return 0;
nomem:
	job_free(e, j);
	return -ENOMEM;
}

int sg_dp_engine_add_keys(struct sg_dp_engine *e, uint32_t job_id, const struct sg_dp_key *keys,
			  uint32_t n)
{
	struct job *j = e != NULL ? job_find(e, job_id) : NULL;
	uint32_t m = 0, nkeys, hsize = 4, *khash = NULL, *around = NULL;
	uint64_t nslots;
	struct key_ent *kt = NULL;
	struct slot *slots = NULL;

	if (j == NULL)
		return -ENOENT;
	if (j->open || (keys == NULL && n != 0))
		return -EINVAL;
	nslots = j->nslots;
	for (uint32_t i = 0; i < n; i++) {
		if (key_check(j->id, sg_dtype_size(j->dtype), j->part, &keys[i]) != 0)
			return -EINVAL;
		if (key_find(j, keys[i].id) != NULL)
			continue;
		m++;
		nslots += sg_dp_chunk_count(keys[i].nelem, j->dtype, j->chunk_bytes);
	}
	if (m == 0)
		return 0;
	nkeys = j->nkeys + m;
	if (nkeys > (1u << 24) || nslots >= NIL) {
		SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": %" PRIu32 " keys or %" PRIu64 " chunks: too many",
			j->id, nkeys, nslots);
		return -EINVAL;
	}
	while (hsize < 2 * nkeys)
		hsize <<= 1;
	/* everything new first: a failure leaves the job as it was */
	kt = calloc(nkeys, sizeof(*kt));
	khash = calloc(hsize, sizeof(*khash));
	slots = calloc(nslots, sizeof(*slots));
	if (j->mode == SG_MODE_ASYNC)
		around = calloc(nslots * j->n, sizeof(*around));
	if (kt == NULL || khash == NULL || slots == NULL || (j->mode == SG_MODE_ASYNC && !around))
		goto fail;
	memcpy(kt, j->keys, j->nkeys * sizeof(*kt));
	memcpy(slots, j->slots, (size_t)j->nslots * sizeof(*slots));
	if (around != NULL)
		memcpy(around, j->around, (size_t)j->nslots * j->n * sizeof(*around));
	/* new keys' slots follow the old ones: the lists' slot indices stay right */
	for (uint32_t i = 0, at = j->nkeys, base = j->nslots; i < n; i++) {
		struct key_ent *k = &kt[at];

		if (key_find(j, keys[i].id) != NULL)
			continue;
		key_fill(k, j, &keys[i], base);
		base += k->nchunks;
		at++;
	}
	for (uint32_t i = 0; i < nkeys; i++) {
		uint32_t h;

		for (h = hash32(kt[i].id) & (hsize - 1); khash[h] != 0; h = (h + 1) & (hsize - 1))
			if (kt[khash[h] - 1].id == kt[i].id)
				break;
		if (khash[h] != 0) { /* the same new key twice */
			SG_DP_ENG_LOG(ERR, "job %" PRIu32 ": key %" PRIu32 " given twice", j->id, kt[i].id);
			m = 0;
			goto fail;
		}
		khash[h] = i + 1;
	}
	free(j->keys);
	free(j->khash);
	free(j->slots);
	free(j->around);
	j->keys = kt;
	j->khash = khash;
	j->kmask = hsize - 1;
	j->slots = slots;
	j->around = around;
	j->nkeys = j->max_keys = nkeys;
	j->nslots = j->slots_used = (uint32_t)nslots;
	j->st.keys = nkeys;
	j->st.slots_used = j->st.slots = nslots;
	SG_DP_ENG_LOG(INFO, "job %" PRIu32 ": %" PRIu32 " key(s) added, %" PRIu32 " in all, %" PRIu32
		" chunks", j->id, m, nkeys, j->nslots);
	return (int)m;
fail:
	free(kt);
	free(khash);
	free(slots);
	free(around);
	return m == 0 ? -EINVAL : -ENOMEM;
}

/* Give back everything slot @p i holds and make it S_NEW: its next push opens any round. */
static bool slot_release(struct sg_dp_engine *e, struct job *j, uint32_t i)
{
	struct slot *s = &j->slots[i];
	bool held = s->state != S_NEW;

	if (s->state == S_COLLECT) {
		if (s->flags & SF_TIMED_OUT)
			JUNCOUNT(e, j, incomplete_slots);
		else
			list_del(j, &j->active, i);
		JUNCOUNT(e, j, slots_active);
		stage_free(e, j, s);
		j->ifl_free[j->ifl_top++] = s->ifl;
	} else if (s->state == S_DONE && s->acc != NULL) {
		list_del(j, &j->done, i);
	}
	buf_put(e, &s->acc);
	buf_put(e, &s->prev);
	if (j->around != NULL)
		memset(&j->around[(size_t)i * j->n], 0, sizeof(*j->around) * j->n);
	memset(s, 0, sizeof(*s));
	s->lprev = s->lnext = NIL;
	return held;
}

int sg_dp_engine_release_keys(struct sg_dp_engine *e, uint32_t job_id,
			      bool (*pick)(void *arg, uint32_t job, uint32_t key), void *arg)
{
	struct job *j = e != NULL ? job_find(e, job_id) : NULL;
	int n = 0;

	if (j == NULL)
		return -ENOENT;
	for (uint32_t k = 0; k < j->nkeys; k++) {
		const struct key_ent *ke = &j->keys[k];

		if (!pick(arg, j->id, ke->id))
			continue;
		for (uint32_t c = 0; c < ke->nchunks; c++)
			n += slot_release(e, j, ke->base + c);
	}
	return n;
}

int sg_dp_engine_job_keys(const struct sg_dp_engine *e, uint32_t job_id,
			  void (*fn)(void *arg, uint32_t key, uint32_t nchunks), void *arg)
{
	for (uint32_t i = 0; e != NULL && i < e->njobs; i++) {
		const struct job *j = e->jobs[i];

		if (j->id != job_id)
			continue;
		for (uint32_t k = 0; k < j->nkeys; k++)
			fn(arg, j->keys[k].id, j->keys[k].nchunks);
		return (int)j->nkeys;
	}
	return -ENOENT;
}

int sg_dp_engine_remove_job(struct sg_dp_engine *e, uint32_t job_id)
{
	struct job *j = e != NULL ? job_find(e, job_id) : NULL;

	if (j == NULL)
		return -ENOENT;
	for (uint32_t i = 0; i < e->njobs; i++) {
		if (e->jobs[i] == j) {
			e->jobs[i] = e->jobs[--e->njobs];
			break;
		}
	}
	e->last = NULL;
	job_free(e, j);
	return 0;
}

void sg_dp_engine_destroy(struct sg_dp_engine *e)
{
	if (e == NULL)
		return;
	while (e->njobs > 0)
		sg_dp_engine_remove_job(e, e->jobs[0]->id);
	sg_sum_pool_destroy(e->pool);
	free(e->jobs);
	free(e->snap_ids);
	free(e->snap_st);
	free(e);
}
