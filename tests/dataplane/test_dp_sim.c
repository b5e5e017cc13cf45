/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Property test: N simulated workers (1..64) drive the engine through a
 * simulated network that loses (up to 30%), duplicates, delays and reorders
 * packets in both directions. Workers retransmit on timeout and after NACKs.
 *
 * Every RESULT is checked against a reference computed here, independently
 * of the summation library: bitwise in deterministic mode (the rank-order
 * fold) and for integers; within a stated bound otherwise (below). Every
 * worker must also receive bitwise the same result for a (chunk, round).
 * Async jobs are checked at the end: each stored value must be the sum of
 * every push.
 *
 * Tolerance for sync mode (sum of N values x_i in some order, |x| summed in
 * S): fp32 |got - ref| <= N * 2^-24 * S * 2, fp64 the same with 2^-53, plus,
 * for fp16/bf16, the final rounding |ref| * 2^-11 / 2^-8.
 *
 * Each run's configuration comes from its seed. A failing run prints the
 * seed; SG_SIM_SEED=<seed> reruns just that one, SG_SIM_SEEDS=<count> changes
 * how many random seeds run (default 1000).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <rte_log.h>

#include "dp_test_util.h"

#define US 1000ull
#define MS 1000000ull
#define RTO (1 * MS)
#define TICK (RTO / 2)
#define SIM_LIMIT (60000 * MS)
#define MAX_KEYS 3
#define MAX_CH 32

struct sim_cfg {
	uint64_t seed;
	uint32_t n;
	double loss, dup;
	enum sg_mode mode;
	enum sg_dtype dt;
	uint32_t chunk_bytes;
	uint32_t rounds;
	uint32_t window;
	bool tight; /* small pool: NACKs and reclaims happen */
};

struct ev {
	uint64_t t, seq;
	int to;   /* -1: the engine, else a worker's rank */
	int from; /* sender's rank, or -1 for the engine */
	uint32_t len;
	uint8_t *data;
};

struct worker {
	uint32_t round, next, outstanding, done;
	bool finished;
	uint8_t st[MAX_CH]; /* 0 unsent, 1 waiting, 2 have the result */
	uint64_t t_sent[MAX_CH];
};

struct sim {
	struct sim_cfg c;
	uint64_t rng;
	uint64_t now, seq;
	struct sg_dp_engine *e;
	struct ev **heap;
	size_t nheap, capheap;
	uint32_t nkeys, nch;
	struct sg_dp_key keys[MAX_KEYS];
	uint32_t key_base[MAX_KEYS];
	uint32_t ch_key[MAX_CH], ch_chunk[MAX_CH];
	struct worker w[SG_MAX_WORKERS];
	uint64_t *res_hash; /* [ch * rounds + round], 0 = none yet */
	uint8_t txbuf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	uint8_t *capture; /* when set, engine output goes here, not to the network */
	uint32_t capture_len;
	unsigned long failures, results, nacks, stale, stale_sent, waits, waits_sent;
};

/* ---- independent reference arithmetic ----------------------------------- */

static uint16_t ref_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static float ref_bf16_to_f32(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Element @elem of key @ki pushed by @rank in @round, written at @out. */
static void gen(const struct sim *s, uint32_t rank, uint32_t ki, uint32_t elem, uint32_t round,
		void *out)
{
	uint64_t x = s->c.seed ^ ((uint64_t)rank << 48) ^ ((uint64_t)ki << 40) ^
		     ((uint64_t)elem << 8) ^ ((uint64_t)round << 56) ^ 0x5bd1e995ull;
	uint64_t h = splitmix64(&x);
	int32_t hi = (int32_t)(h >> 32);

	switch (s->c.dt) {
	case SG_DTYPE_FP32: {
		float f = (float)hi * 0x1p-28f;

		memcpy(out, &f, 4);
		break;
	}
	case SG_DTYPE_FP64: {
		double d = (double)(int64_t)h * 0x1p-60;

		memcpy(out, &d, 8);
		break;
	}
	case SG_DTYPE_BF16: {
		uint16_t b = ref_f32_to_bf16((float)hi * 0x1p-29f);

		memcpy(out, &b, 2);
		break;
	}
	case SG_DTYPE_FP16: {
		_Float16 v = (_Float16)((float)hi * 0x1p-30f);

		memcpy(out, &v, 2);
		break;
	}
	default: { /* int32 */
		uint32_t u = (uint32_t)h;

		memcpy(out, &u, 4);
		break;
	}
	}
}

static double as_double(enum sg_dtype dt, const void *p)
{
	switch (dt) {
	case SG_DTYPE_FP32: {
		float f;

		memcpy(&f, p, 4);
		return f;
	}
	case SG_DTYPE_FP64: {
		double d;

		memcpy(&d, p, 8);
		return d;
	}
	case SG_DTYPE_BF16: {
		uint16_t b;

		memcpy(&b, p, 2);
		return ref_bf16_to_f32(b);
	}
	default: {
		_Float16 h;

		memcpy(&h, p, 2);
		return (double)h;
	}
	}
}

/*
 * Check one result element against the sum over @rounds of all N ranks'
 * pushes (@rounds == 1 and @round0 = r for a sync round; all rounds for an
 * async store). @return true if it matches.
 */
static bool check_elem(const struct sim *s, uint32_t ki, uint32_t elem, uint32_t round0,
		       uint32_t rounds, const uint8_t *got)
{
	size_t esz = sg_dtype_size(s->c.dt);
	uint8_t x[8];

	if (s->c.dt == SG_DTYPE_INT32) {
		uint32_t sum = 0, g;

		for (uint32_t r = round0; r < round0 + rounds; r++) {
			for (uint32_t k = 0; k < s->c.n; k++) {
				uint32_t u;

				gen(s, k, ki, elem, r, x);
				memcpy(&u, x, 4);
				sum += u;
			}
		}
		memcpy(&g, got, 4);
		return g == sum;
	}
	if (s->c.mode == SG_MODE_DETERM) {
		/* Rank-order fold in the accumulator type, rounded once. */
		uint8_t want[8];

		if (s->c.dt == SG_DTYPE_FP64) {
			double acc = 0;

			for (uint32_t k = 0; k < s->c.n; k++) {
				gen(s, k, ki, elem, round0, x);
				acc = k == 0 ? as_double(s->c.dt, x) : acc + as_double(s->c.dt, x);
			}
			memcpy(want, &acc, 8);
		} else {
			float acc = 0;

			for (uint32_t k = 0; k < s->c.n; k++) {
				gen(s, k, ki, elem, round0, x);
				acc = k == 0 ? (float)as_double(s->c.dt, x)
					     : acc + (float)as_double(s->c.dt, x);
			}
			if (s->c.dt == SG_DTYPE_FP32) {
				memcpy(want, &acc, 4);
			} else if (s->c.dt == SG_DTYPE_BF16) {
				uint16_t b = ref_f32_to_bf16(acc);

				memcpy(want, &b, 2);
			} else {
				_Float16 h = (_Float16)acc;

				memcpy(want, &h, 2);
			}
		}
		return memcmp(want, got, esz) == 0;
	}
	{
		double ref = 0, abs_sum = 0, g = as_double(s->c.dt, got), tol;
		double u = s->c.dt == SG_DTYPE_FP64 ? 0x1p-53 : 0x1p-24;

		for (uint32_t r = round0; r < round0 + rounds; r++) {
			for (uint32_t k = 0; k < s->c.n; k++) {
				gen(s, k, ki, elem, r, x);
				ref += as_double(s->c.dt, x);
				abs_sum += fabs(as_double(s->c.dt, x));
			}
		}
		tol = 2.0 * s->c.n * rounds * u * abs_sum;
		if (s->c.dt == SG_DTYPE_BF16)
			tol += fabs(ref) * 0x1p-8;
		else if (s->c.dt == SG_DTYPE_FP16)
			tol += fabs(ref) * 0x1p-11 + 0x1p-24;
		return fabs(g - ref) <= tol;
	}
}

/* ---- the simulated network ---------------------------------------------- */

static double rnd(struct sim *s)
{
	return (double)(splitmix64(&s->rng) >> 11) * 0x1p-53;
}

static void heap_push(struct sim *s, struct ev *v)
{
	size_t i = s->nheap++;

	if (s->nheap > s->capheap) {
		s->capheap = s->capheap ? 2 * s->capheap : 1024;
		s->heap = realloc(s->heap, s->capheap * sizeof(*s->heap));
	}
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (s->heap[p]->t < v->t || (s->heap[p]->t == v->t && s->heap[p]->seq < v->seq))
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i] = v;
}

static struct ev *heap_pop(struct sim *s)
{
	struct ev *top = s->heap[0], *last = s->heap[--s->nheap];
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct ev *best = last;

		if (l < s->nheap && (s->heap[l]->t < best->t ||
				     (s->heap[l]->t == best->t && s->heap[l]->seq < best->seq))) {
			m = l;
			best = s->heap[l];
		}
		if (l + 1 < s->nheap &&
		    (s->heap[l + 1]->t < best->t ||
		     (s->heap[l + 1]->t == best->t && s->heap[l + 1]->seq < best->seq)))
			m = l + 1;
		if (m == i)
			break;
		s->heap[i] = s->heap[m];
		i = m;
	}
	if (s->nheap > 0)
		s->heap[i] = last;
	return top;
}

/* Lose, duplicate or delay a packet on its way to @to. */
static void net_send(struct sim *s, int from, int to, const void *data, uint32_t len)
{
	unsigned int copies;

	if (rnd(s) < s->c.loss)
		return;
	copies = rnd(s) < s->c.dup ? 2 : 1;
	for (unsigned int i = 0; i < copies; i++) {
		struct ev *v = malloc(sizeof(*v));

		v->data = malloc(len);
		memcpy(v->data, data, len);
		v->len = len;
		v->to = to;
		v->from = from;
		v->seq = s->seq++;
		v->t = s->now + 1 * US + splitmix64(&s->rng) % (200 * US);
		heap_push(s, v);
	}
}

static void *sim_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct sim *s = ctx;

	*pkt = (void *)(uintptr_t)dest;
	return len <= sizeof(s->txbuf) ? s->txbuf : NULL;
}

static void sim_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct sim *s = ctx;
	struct sg_dp_msg m;

	/* alloc() kept its destination in the handle: send() must be given the same */
	SG_CHECK_EQ(dest, (uint64_t)(uintptr_t)pkt);

	if (sg_dp_parse(s->txbuf, len, &m, NULL) == 0 && m.type == SG_DP_T_ERROR &&
	    m.code == SG_DP_C_STALE)
		s->stale_sent++;
	if (sg_dp_parse(s->txbuf, len, &m, NULL) == 0 && m.type == SG_DP_T_ERROR &&
	    m.code == SG_DP_C_WAITING)
		s->waits_sent++;
	if (s->capture != NULL) {
		memcpy(s->capture, s->txbuf, len);
		s->capture_len = len;
		return;
	}
	net_send(s, -1, (int)(dest - 1000), s->txbuf, len);
}

/* ---- workers ---------------------------------------------------------------- */

static void fail(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	s->failures++;
	if (s->failures > 3)
		return;
	fprintf(stderr, "FAIL seed=%" PRIu64 " (rerun: SG_SIM_SEED=%" PRIu64
		") n=%u mode=%s dtype=%s loss=%.2f dup=%.2f chunk=%u rounds=%u window=%u "
		"tight=%d: ", s->c.seed, s->c.seed, s->c.n, sg_mode_name(s->c.mode),
		sg_dtype_name(s->c.dt), s->c.loss, s->c.dup, s->c.chunk_bytes, s->c.rounds,
		s->c.window, s->c.tight);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static struct push_spec ch_spec(const struct sim *s, uint32_t ch)
{
	const struct sg_dp_key *k = &s->keys[s->ch_key[ch]];

	return (struct push_spec){.job = 5, .token = s->c.seed | 1, .dtype = s->c.dt,
				  .chunk_bytes = s->c.chunk_bytes, .key = k->id,
				  .key_nelem = k->nelem};
}

static void send_push(struct sim *s, uint32_t rank, uint32_t ch)
{
	static uint8_t pay[SG_DP_MAX_PAYLOAD], pkt[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	struct push_spec ps = ch_spec(s, ch);
	size_t esz = sg_dtype_size(s->c.dt);
	uint32_t per = s->c.chunk_bytes / (uint32_t)esz, first = s->ch_chunk[ch] * per;
	uint32_t len;

	for (uint32_t i = 0; i < per && first + i < ps.key_nelem; i++)
		gen(s, rank, s->ch_key[ch], first + i, s->w[rank].round, pay + i * esz);
	len = mk_pkt(pkt, &ps, rank, s->ch_chunk[ch], s->w[rank].round, pay);
	s->w[rank].t_sent[ch] = s->now;
	net_send(s, (int)rank, -1, pkt, len);
}

static void fill_window(struct sim *s, uint32_t rank)
{
	struct worker *w = &s->w[rank];

	while (!w->finished && w->outstanding < s->c.window && w->next < s->nch) {
		w->st[w->next] = 1;
		w->outstanding++;
		send_push(s, rank, w->next++);
	}
}

static uint64_t fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h | 1;
}

static void worker_rx(struct sim *s, uint32_t rank, const uint8_t *pkt, uint32_t len)
{
	struct worker *w = &s->w[rank];
	struct sg_dp_msg m;
	uint32_t ki, ch;

	if (sg_dp_parse(pkt, len, &m, NULL) != 0 || m.rank != rank || m.job != 5) {
		fail(s, "worker %u got a malformed packet", rank);
		return;
	}
	for (ki = 0; ki < s->nkeys && s->keys[ki].id != m.key; ki++)
		;
	if (ki == s->nkeys ||
	    m.chunk >= (ki + 1 < s->nkeys ? s->key_base[ki + 1] : s->nch) - s->key_base[ki]) {
		fail(s, "worker %u: result for unknown key %u", rank, m.key);
		return;
	}
	ch = s->key_base[ki] + m.chunk;
	if (m.type == SG_DP_T_NACK) {
		s->nacks++;
		return; /* the retransmit timer resends it */
	}
	if (m.type == SG_DP_T_ERROR && m.code == SG_DP_C_STALE &&
	    (m.round < w->round || w->st[ch] == 2 || w->finished)) {
		/* a late duplicate's answer: this worker has that result and moved on */
		s->stale++;
		return;
	}
	if (m.type == SG_DP_T_ERROR && m.code == SG_DP_C_WAITING) {
		uint64_t missing = 0;

		/* the node holds this worker's push: it names other ranks, some */
		if (m.payload_len == 8)
			memcpy(&missing, m.payload, 8);
		missing = be64toh(missing);
		if (missing == 0 || (missing & (1ull << rank)) || (s->c.n < 64 && missing >> s->c.n))
			fail(s, "worker %u: WAITING for key %u chunk %u round %u names ranks "
			     "0x%" PRIx64, rank, m.key, m.chunk, m.round, missing);
		s->waits++;
		return; /* a resend was answered: the retransmit timer goes on */
	}
	if (m.type != SG_DP_T_RESULT) {
		fail(s, "worker %u: %s code %u for key %u chunk %u round %u", rank,
		     sg_dp_type_name(m.type), m.code, m.key, m.chunk, m.round);
		return;
	}
	s->results++;
	if (m.round >= s->c.rounds) {
		fail(s, "result for round %u", m.round);
		return;
	}
	if (s->c.mode != SG_MODE_ASYNC) {
		size_t esz = sg_dtype_size(s->c.dt);
		uint32_t first = m.chunk * (s->c.chunk_bytes / (uint32_t)esz);
		uint64_t h = fnv(m.payload, m.payload_len), *slot;
		unsigned int bad = 0;

		/* The first copy is checked element by element; every later one must be
		 * bitwise the same (all workers get one sum). */
		slot = &s->res_hash[ch * s->c.rounds + m.round];
		if (*slot == 0) {
			for (uint32_t i = 0; i < m.nelem; i++)
				bad += !check_elem(s, ki, first + i, m.round, 1,
						   (const uint8_t *)m.payload + i * esz);
			if (bad)
				fail(s, "key %u chunk %u round %u: %u of %u elements wrong", m.key,
				     m.chunk, m.round, bad, m.nelem);
			*slot = h;
		} else if (*slot != h) {
			fail(s, "key %u chunk %u round %u: workers got different results",
			     m.key, m.chunk, m.round);
		}
	}
	if (w->st[ch] == 1 && m.round == w->round) {
		w->st[ch] = 2;
		w->outstanding--;
		if (++w->done == s->nch) {
			if (++w->round == s->c.rounds) {
				w->finished = true;
				return;
			}
			memset(w->st, 0, sizeof(w->st));
			w->next = w->outstanding = w->done = 0;
		}
		fill_window(s, rank);
	}
}

static void tick(struct sim *s)
{
	for (uint32_t r = 0; r < s->c.n; r++) {
		struct worker *w = &s->w[r];

		for (uint32_t ch = 0; ch < s->nch && !w->finished; ch++)
			if (w->st[ch] == 1 && s->now - w->t_sent[ch] >= RTO)
				send_push(s, r, ch);
		fill_window(s, r);
	}
	sg_dp_engine_poll(s->e, s->now);
}

/* ---- one run ----------------------------------------------------------------- */

static void setup_keys(struct sim *s)
{
	size_t esz = sg_dtype_size(s->c.dt);
	uint32_t per = s->c.chunk_bytes / (uint32_t)esz;

	s->nkeys = 1 + (uint32_t)(splitmix64(&s->rng) % MAX_KEYS);
	s->nch = 0;
	for (uint32_t k = 0; k < s->nkeys; k++) {
		uint32_t nchunks = 1 + (uint32_t)(splitmix64(&s->rng) % 3);

		if (s->nch + nchunks > MAX_CH)
			nchunks = MAX_CH - s->nch;
		s->keys[k].id = 1000 * k + (uint32_t)(s->c.seed % 1000);
		/* The last chunk is often partial. */
		s->keys[k].nelem = (nchunks - 1) * per + 1 +
				   (uint32_t)(splitmix64(&s->rng) % per);
		s->key_base[k] = s->nch;
		for (uint32_t c = 0; c < nchunks; c++) {
			s->ch_key[s->nch] = k;
			s->ch_chunk[s->nch++] = c;
		}
	}
}

static void check_async(struct sim *s)
{
	static uint8_t pkt[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD], out[sizeof(pkt)];
	size_t esz = sg_dtype_size(s->c.dt);

	s->capture = out;
	for (uint32_t ch = 0; ch < s->nch; ch++) {
		struct push_spec ps = ch_spec(s, ch);
		uint32_t first = s->ch_chunk[ch] * (s->c.chunk_bytes / (uint32_t)esz);
		struct sg_dp_msg m;
		unsigned int bad = 0;

		s->capture_len = 0;
		sg_dp_engine_rx(s->e, pkt, mk_pkt(pkt, &ps, 0, s->ch_chunk[ch], 0, NULL), 1000,
				s->now);
		if (s->capture_len == 0 || sg_dp_parse(out, s->capture_len, &m, NULL) != 0 ||
		    m.type != SG_DP_T_RESULT) {
			fail(s, "async pull of chunk %u got no result", ch);
			continue;
		}
		for (uint32_t i = 0; i < m.nelem; i++)
			bad += !check_elem(s, s->ch_key[ch], first + i, 0, s->c.rounds,
					   (const uint8_t *)m.payload + i * esz);
		if (bad)
			fail(s, "async store of chunk %u: %u of %u elements wrong", ch, bad,
			     m.nelem);
	}
	s->capture = NULL;
}

static void check_counters(struct sim *s)
{
	struct sg_dp_stats st;
	uint64_t pushes = (uint64_t)s->c.n * s->c.rounds * s->nch;

	sg_dp_engine_stats(s->e, &st);
	if (st.rx_pushes != pushes)
		fail(s, "%" PRIu64 " pushes added, want %" PRIu64 " (each exactly once)",
		     st.rx_pushes, pushes);
	if (s->c.mode == SG_MODE_ASYNC ? st.async_updates != pushes
					  : st.rounds_completed != (uint64_t)s->c.rounds * s->nch)
		fail(s, "%" PRIu64 " rounds completed / %" PRIu64 " async updates",
		     st.rounds_completed, st.async_updates);
	for (int i = SG_DP_DROP_NONE; i < SG_DP_DROP_COUNT; i++) {
		if (i == SG_DP_DROP_DUPLICATE || i == SG_DP_DROP_ROUND_OLD ||
		    i == SG_DP_DROP_ROUND_NEW)
			continue;
		if (st.drops[i] != 0)
			fail(s, "%" PRIu64 " drops for %s", st.drops[i], sg_dp_drop_name(i));
	}
	/* the only ERRORs: STALE for late duplicates (each stale at its worker, or it fails) */
	if (st.errors_sent != s->stale_sent || st.slot_timeouts != 0)
		fail(s, "%" PRIu64 " errors (%lu of them STALE), %" PRIu64 " timeouts",
		     st.errors_sent, s->stale_sent, st.slot_timeouts);
	if (st.waits_sent != s->waits_sent)
		fail(s, "%" PRIu64 " WAITING counted, %lu sent", st.waits_sent, s->waits_sent);
	if (!s->c.tight && st.nacks_sent != 0)
		fail(s, "%" PRIu64 " NACKs with a large pool", st.nacks_sent);
}

/* Totals over all runs, to show that the lossy paths were taken. */
static struct {
	uint64_t results, nacks, served, reclaimed, duplicates, old, waits;
} tot;

static unsigned long run(const struct sim_cfg *cfg)
{
	static struct sim sim;
	struct sim *s = &sim;
	struct sg_dp_engine_conf ec = {.numa_node = -1, .max_payload = SG_MAX_CHUNK_BYTES,
				       .slot_timeout_ns = 10000 * MS,
				       .shadow_hold_ns = 50 * MS};
	struct sg_dp_job_conf jc;
	uint64_t next_tick = 0;
	bool all;

	memset(s, 0, sizeof(*s));
	s->c = *cfg;
	s->rng = cfg->seed * 0x2545f4914f6cdd1dull + 7;
	setup_keys(s);
	ec.pool_bufs = cfg->tight ? 4 + (uint32_t)(splitmix64(&s->rng) % 4)
				  : 2 * s->nch + cfg->n * cfg->window + 8;
	ec.tx = (struct sg_dp_tx_ops){.alloc = sim_alloc, .send = sim_send, .ctx = s};
	s->e = sg_dp_engine_create(&ec);
	jc = (struct sg_dp_job_conf){
		.id = 5, .nworkers = cfg->n, .token = cfg->seed | 1, .dtype = cfg->dt,
		.mode = cfg->mode, .chunk_bytes = cfg->chunk_bytes, .keys = s->keys,
		.nkeys = s->nkeys, .max_inflight = cfg->tight ? 2 : 0,
	};
	if (s->e == NULL || sg_dp_engine_add_job(s->e, &jc) != 0) {
		fail(s, "setup failed");
		sg_dp_engine_destroy(s->e);
		return s->failures;
	}
	s->res_hash = calloc((size_t)s->nch * cfg->rounds, sizeof(*s->res_hash));
	for (uint32_t r = 0; r < cfg->n; r++)
		fill_window(s, r);
	for (;;) {
		all = true;
		for (uint32_t r = 0; r < cfg->n; r++)
			all &= s->w[r].finished;
		if (all || s->failures > 3)
			break;
		if (s->nheap > 0 && s->heap[0]->t <= next_tick) {
			struct ev *v = heap_pop(s);

			s->now = v->t;
			if (v->to < 0)
				sg_dp_engine_rx(s->e, v->data, v->len, 1000 + (uint64_t)v->from,
						s->now);
			else
				worker_rx(s, (uint32_t)v->to, v->data, v->len);
			free(v->data);
			free(v);
		} else {
			s->now = next_tick;
			tick(s);
			next_tick += TICK;
		}
		if (s->now > SIM_LIMIT) {
			fail(s, "no progress after %" PRIu64 " ms of simulated time",
			     (uint64_t)(s->now / MS));
			break;
		}
	}
	if (s->failures == 0) {
		if (cfg->mode == SG_MODE_ASYNC)
			check_async(s);
		check_counters(s);
	}
	{
		struct sg_dp_stats st;

		sg_dp_engine_stats(s->e, &st);
		tot.results += s->results;
		tot.nacks += s->nacks;
		tot.served += st.retransmits_served;
		tot.reclaimed += st.shadows_reclaimed;
		tot.duplicates += st.drops[SG_DP_DROP_DUPLICATE];
		tot.old += st.drops[SG_DP_DROP_ROUND_OLD];
		tot.waits += s->waits;
	}
	while (s->nheap > 0) {
		struct ev *v = heap_pop(s);

		free(v->data);
		free(v);
	}
	free(s->heap);
	free(s->res_hash);
	sg_dp_engine_destroy(s->e);
	return s->failures;
}

static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 33, 63, 64};
static const uint32_t chunks[] = {64, 200, 256, 1424, SG_MAX_CHUNK_BYTES};
static const double losses[] = {0, 0.05, 0.1, 0.3};
static const double dups[] = {0, 0.05, 0.2};

/* The configuration of a random run, all drawn from its seed. */
static struct sim_cfg cfg_from_seed(uint64_t seed)
{
	static const enum sg_dtype dts[] = {SG_DTYPE_FP32, SG_DTYPE_FP32, SG_DTYPE_BF16,
					    SG_DTYPE_FP16, SG_DTYPE_FP64, SG_DTYPE_INT32};
	uint64_t x = seed;
	struct sim_cfg c = {.seed = seed};

	c.mode = (enum sg_mode)(splitmix64(&x) % SG_MODE_COUNT);
	c.dt = dts[splitmix64(&x) % 6];
	c.n = ns[splitmix64(&x) % (sizeof(ns) / sizeof(ns[0]))];
	c.loss = losses[splitmix64(&x) % 4];
	c.dup = dups[splitmix64(&x) % 3];
	c.chunk_bytes = chunks[splitmix64(&x) % (sizeof(chunks) / sizeof(chunks[0]))];
	c.rounds = 2 + (uint32_t)(splitmix64(&x) % 3);
	c.window = 1 + (uint32_t)(splitmix64(&x) % 8);
	/* A small pool stalls async stores for good and makes large N slow. */
	c.tight = c.mode != SG_MODE_ASYNC && c.n <= 16 && splitmix64(&x) % 4 == 0;
	return c;
}

#define CORNER_SEED 1000

/*
 * The corners, seeds CORNER_SEED.. : N = 1 and 64 at 30% loss in every mode;
 * every other seed draws its configuration.
 */
static struct sim_cfg cfg_for_seed(uint64_t seed)
{
	if (seed >= CORNER_SEED && seed < CORNER_SEED + 2 * SG_MODE_COUNT) {
		unsigned int mode = (unsigned int)(seed - CORNER_SEED) / 2;
		bool big = (seed - CORNER_SEED) % 2;

		return (struct sim_cfg){
			.seed = seed, .n = big ? 64 : 1, .loss = 0.3, .dup = 0.1,
			.mode = (enum sg_mode)mode,
			.dt = mode == SG_MODE_ASYNC ? SG_DTYPE_INT32 : SG_DTYPE_FP32,
			.chunk_bytes = 1424, .rounds = 3, .window = 4,
		};
	}
	return cfg_from_seed(seed);
}

int main(void)
{
	const char *one = getenv("SG_SIM_SEED"), *cnt = getenv("SG_SIM_SEEDS");
	unsigned long seeds = cnt ? strtoul(cnt, NULL, 0) : 1000, bad = 0, runs = 0;

	/* Hundreds of jobs come and go: keep their notices out of the log. */
	rte_log_set_level_pattern("sigma.engine", RTE_LOG_WARNING);
	if (one != NULL) {
		struct sim_cfg c = cfg_for_seed(strtoull(one, NULL, 0));

		bad += run(&c);
		runs++;
	} else {
		for (uint64_t seed = CORNER_SEED; seed < CORNER_SEED + 2 * SG_MODE_COUNT;
		     seed++) {
			struct sim_cfg c = cfg_for_seed(seed);

			bad += run(&c);
			runs++;
		}
		for (unsigned long i = 0; i < seeds; i++) {
			struct sim_cfg c = cfg_for_seed(0x5167a000 + i);

			bad += run(&c);
			runs++;
		}
	}
	printf("dp_sim: %lu runs, %lu failed; %" PRIu64 " results checked, %" PRIu64
	       " NACKs, %" PRIu64 " retransmits served, %" PRIu64 " results reclaimed, %" PRIu64
	       " duplicates and %" PRIu64 " old rounds dropped, %" PRIu64 " WAITING received\n",
	       runs, bad, tot.results, tot.nacks, tot.served, tot.reclaimed, tot.duplicates,
	       tot.old, tot.waits);
	SG_CHECK(bad == 0, "%lu runs failed (their seeds are above)", bad);
	if (one == NULL) {
		SG_CHECK(tot.nacks > 0 && tot.served > 0 && tot.reclaimed > 0 &&
				 tot.duplicates > 0 && tot.old > 0 && tot.waits > 0,
			 "a lossy path was never taken");
	}
	return sg_test_finish("dp_sim");
}
