/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the engine reports and emits: the return mask of sg_dp_engine_rx()
 * and the per-job counters against a scripted scenario, and fan-out RESULTs
 * (tx alloc_multi/send_multi) against a reference sum and against the
 * engine's one-packet-per-worker output, including the fall-backs; and
 * which senders tx.accept names.
 */
#include <errno.h>
#include <stdio.h>

#include <rte_log.h>

#include "dp_test_util.h"

#define MS 1000000ull
#define TOKEN 0x5157ull

static struct cap cap, cap_plain;

static struct push_spec spec(uint32_t job, enum sg_dtype dt, uint32_t chunk_bytes,
			     uint32_t nelem)
{
	return (struct push_spec){.job = job, .token = TOKEN, .dtype = dt,
				  .chunk_bytes = chunk_bytes, .key = 1, .key_nelem = nelem};
}

/* rx of a push of @chunk (all elements @v, fp32) or, with @pull, a PULL. */
static int rx(struct sg_dp_engine *e, const struct push_spec *ps, uint32_t rank, uint32_t chunk,
	      uint32_t round, bool pull, uint64_t now)
{
	static uint8_t p[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	float d[16];

	for (int i = 0; i < 16; i++)
		d[i] = (float)(rank + 1);
	return sg_dp_engine_rx(e, p, mk_pkt(p, ps, rank, chunk, round, pull ? NULL : d),
			       100 + rank, now);
}

static void add_job(struct sg_dp_engine *e, uint32_t id, uint32_t n, uint32_t max_inflight)
{
	struct sg_dp_key k = {.id = 1, .nelem = 32};
	struct sg_dp_job_conf jc = {
		.id = id, .nworkers = n, .token = TOKEN, .dtype = SG_DTYPE_FP32,
		.chunk_bytes = 64, .max_inflight = max_inflight, .keys = &k, .nkeys = 1,
	};

	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
}

#define USED_NACK (SG_DP_USED_REPLIED | SG_DP_USED_NACKED)

/*
 * Job 1: 3 workers, key 1 of 2 chunks. Job 2: 2 workers, one slot in flight.
 * Every packet's return is checked, then each job's counters, then that the
 * engine's totals are the jobs' plus the packets no job could claim.
 */
static void test_rx_codes_and_job_stats(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 16,
				       .slot_timeout_ns = 50 * MS};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	struct push_spec j1 = spec(1, SG_DTYPE_FP32, 64, 32), j2 = spec(2, SG_DTYPE_FP32, 64, 32);
	struct push_spec bad_token = j1, bad_key = j2, no_job = spec(9, SG_DTYPE_FP32, 64, 32);
	struct sg_dp_job_stats a, b;
	struct sg_dp_stats st;
	uint8_t junk[SG_DP_HDR_LEN] = {1, 2, 3};
	uint32_t ids[4] = {0};

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	cap.n = 0;
	add_job(e, 1, 3, 0);
	add_job(e, 2, 2, 1);
	bad_token.token = TOKEN + 1;
	bad_key.key = 7;

	SG_CHECK_EQ(rx(e, &j1, 0, 0, 0, false, 0), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(rx(e, &j1, 0, 0, 0, false, 0), -EBADMSG);                 /* duplicate */
	/* ... answered: the node holds rank 0's push and waits for ranks 1 and 2 */
	SG_CHECK(cap.n == 1 && cap.pkts[0].m.type == SG_DP_T_ERROR &&
			 cap.pkts[0].m.code == SG_DP_C_WAITING && cap.pkts[0].m.rank == 0 &&
			 cap.pkts[0].m.payload_len == 8 &&
			 memcmp(cap.pkts[0].m.payload, "\0\0\0\0\0\0\0\x06", 8) == 0,
		 "a duplicate's WAITING");
	SG_CHECK_EQ(rx(e, &j1, 1, 0, 0, false, 0), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(cap.n, 1);
	SG_CHECK_EQ(rx(e, &j1, 2, 0, 0, false, 0), SG_DP_USED_SUMMED | SG_DP_USED_COMPLETED);
	SG_CHECK_EQ(cap.n, 4);
	SG_CHECK_EQ(rx(e, &j1, 1, 0, 0, false, 1), SG_DP_USED_REPLIED);      /* lost RESULT */
	SG_CHECK_EQ(rx(e, &j1, 2, 0, 0, true, 1), SG_DP_USED_REPLIED);       /* PULL */
	SG_CHECK_EQ(rx(e, &j1, 0, 1, 0, true, 1), -EBADMSG);                 /* pending */
	SG_CHECK_EQ(rx(e, &bad_token, 0, 1, 0, false, 1), -EBADMSG);
	SG_CHECK_EQ(rx(e, &j1, 5, 1, 0, false, 1), -EBADMSG);                /* rank >= N */
	SG_CHECK_EQ(rx(e, &j1, 0, 1, 0, false, 2), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(cap.n, 6);
	SG_CHECK_EQ(sg_dp_engine_poll(e, 100 * MS), 1);                      /* worker loss */
	SG_CHECK_EQ(rx(e, &j1, 0, 1, 0, false, 101 * MS), -EBADMSG); /* told at 100 ms */
	SG_CHECK(cap.pkts[cap.n - 1].m.code == SG_DP_C_WAITING, "WAITING between reports");
	SG_CHECK_EQ(rx(e, &j1, 0, 1, 0, false, 150 * MS), SG_DP_USED_REPLIED); /* ERROR again */
	SG_CHECK(cap.pkts[cap.n - 1].m.code == SG_DP_C_WORKER_LOST, "WORKER_LOST again");
	SG_CHECK_EQ(rx(e, &j1, 0, 1, 0, false, 151 * MS), -EBADMSG);

	SG_CHECK_EQ(rx(e, &bad_key, 0, 0, 0, false, 0), -EBADMSG);
	SG_CHECK_EQ(rx(e, &j2, 0, 0, 0, false, 0), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(rx(e, &j2, 0, 1, 0, false, 0), USED_NACK);               /* in-flight limit */
	SG_CHECK_EQ(sg_dp_engine_rx(e, junk, sizeof(junk), 1, 0), -EBADMSG);  /* no job known */
	SG_CHECK_EQ(rx(e, &no_job, 0, 0, 0, false, 0), -EBADMSG);

	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 1, &a), 0);
	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 2, &b), 0);
	{
		/* job 1, then job 2: every counter against the script above */
		const struct sg_dp_job_stats *js[2] = {&a, &b};
		static const uint64_t want[2][16] = {
			{13, 4, 1, 6, 3, 1, 1, 1, 0, 1, 5, 2, 0, 2, 1, 3},
			{3, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}, /* MISMATCH for key 7 */
		};
		static const char *const names[16] = {
			"rx_packets", "rx_pushes", "rx_pulls", "drops", "duplicate", "pending",
			"token", "rank", "key", "rounds_completed", "results_sent",
			"retransmits_served", "nacks_sent", "errors_sent", "slot_timeouts",
			"waits_sent"};

		for (int j = 0; j < 2; j++) {
			const struct sg_dp_job_stats *x = js[j];
			const uint64_t got[16] = {
				x->rx_packets, x->rx_pushes, x->rx_pulls, x->drops,
				x->drops_by[SG_DP_DROP_DUPLICATE], x->drops_by[SG_DP_DROP_PENDING],
				x->drops_by[SG_DP_DROP_TOKEN], x->drops_by[SG_DP_DROP_RANK],
				x->drops_by[SG_DP_DROP_KEY], x->rounds_completed, x->results_sent,
				x->retransmits_served, x->nacks_sent, x->errors_sent,
				x->slot_timeouts, x->waits_sent};

			for (int i = 0; i < 16; i++)
				SG_CHECK(got[i] == want[j][i], "job %d %s: %" PRIu64 ", want %" PRIu64,
					 j + 1, names[i], got[i], want[j][i]);
		}
	}
	SG_CHECK_EQ(a.incomplete_slots, 1);
	SG_CHECK_EQ(a.slots_active + b.slots_active, 2);
	SG_CHECK_EQ(a.tx_fail + b.tx_fail, 0);

	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.rx_packets, a.rx_packets + b.rx_packets + 2);
	SG_CHECK_EQ(st.rx_pushes, a.rx_pushes + b.rx_pushes);
	SG_CHECK_EQ(st.results_sent, a.results_sent + b.results_sent);
	SG_CHECK_EQ(st.slots_active, a.slots_active + b.slots_active);
	SG_CHECK_EQ(st.drops[SG_DP_DROP_JOB], 1);
	SG_CHECK_EQ(st.drops[SG_DP_DROP_DUPLICATE] + st.drops[SG_DP_DROP_KEY], 4);

	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 9, &a), -ENOENT);
	SG_CHECK_EQ(sg_dp_engine_jobs(e, ids, 4), 2);
	SG_CHECK((ids[0] == 1 && ids[1] == 2) || (ids[0] == 2 && ids[1] == 1), "job ids %u %u",
		 ids[0], ids[1]);
	SG_CHECK_EQ(sg_dp_engine_jobs(e, ids, 1), 2); /* count, even past cap */

	/* a removed job's counters stay in the engine's totals; its gauges go */
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 2), 0);
	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 2, &b), -ENOENT);
	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.rx_pushes, 5);
	SG_CHECK_EQ(st.slots_active, 1);
	sg_dp_engine_destroy(e);
}

/* ---- fan-out ---------------------------------------------------------------- */

/* A fan-out sink: expands each fanned-out RESULT into one captured packet per worker. */
struct fan {
	struct cap *c;
	unsigned int allocs, sends; /* alloc_multi and send_multi calls */
	unsigned int decline;       /* alloc_multi returns NULL while set */
	unsigned int short_by;      /* send_multi queues this many fewer copies */
	uint32_t len;
	uint8_t buf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
};

static struct fan fan;

/* The engine has one ctx for all its ops: the capture, whose fan-out state is `fan`. */
static void *fan_alloc(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n, uint32_t len,
		       void **pkt)
{
	struct fan *f = &fan;

	SG_CHECK(ctx == f->c, "alloc_multi: not the ops' ctx");

	SG_CHECK(n >= 2 && len <= sizeof(f->buf), "alloc_multi: n %u len %u", n, len);
	for (unsigned int i = 0; i < n; i++)
		SG_CHECK(to[i].dest == 100u + to[i].rank && (i == 0 || to[i].rank > to[i - 1].rank),
			 "alloc_multi: destination %u: rank %u dest %" PRIu64, i, to[i].rank,
			 to[i].dest);
	if (f->decline)
		return NULL;
	f->allocs++;
	f->len = len;
	memset(f->buf, 0xee, sizeof(f->buf));
	*pkt = f;
	return f->buf;
}

static unsigned int fan_send(void *ctx, void *pkt, uint32_t len, const struct sg_dp_tx_dest *to,
			     unsigned int n)
{
	struct fan *f = &fan;
	struct sg_dp_msg m;
	unsigned int q = n > f->short_by ? n - f->short_by : 0;

	f->sends++;
	SG_CHECK(pkt == f && len == f->len, "send_multi: not the packet from alloc_multi");
	SG_CHECK(sg_dp_parse(f->buf, len, &m, NULL) == 0 && m.rank == to[0].rank,
		 "send_multi: the buffer must hold a RESULT for to[0]");
	for (unsigned int i = 0; i < q; i++) {
		void *cp;
		uint8_t *b = cap_alloc(f->c, to[i].dest, len, &cp);

		if (!SG_CHECK(b != NULL, "capture full"))
			return i;
		memcpy(b, f->buf, len);
		sg_dp_hdr_set_rank(b, to[i].rank);
		cap_send(f->c, to[i].dest, cp, len);
	}
	SG_CHECK(ctx == f->c, "send_multi: not the ops' ctx");
	return q;
}

/* Element i of @rank's push of (chunk, round): a small integer, so every sum is exact. */
static int val(uint32_t rank, uint32_t chunk, uint32_t round, uint32_t i)
{
	return (int)((rank * 7 + chunk * 5 + round * 3 + i) % 9) - 4;
}

static void put(enum sg_dtype dt, void *p, int v)
{
	float f = (float)v;
	uint16_t h;
	int32_t w = v;

	switch (dt) {
	case SG_DTYPE_FP32: memcpy(p, &f, 4); break;
	case SG_DTYPE_BF16: h = sg_fp32_to_bf16(f); memcpy(p, &h, 2); break;
	case SG_DTYPE_FP16: h = sg_fp32_to_fp16(f); memcpy(p, &h, 2); break;
	default: memcpy(p, &w, 4); break;
	}
}

/* Index of the captured RESULT for (rank, chunk, round), or -1; counts duplicates. */
static int find(const struct cap *c, uint32_t rank, uint32_t chunk, uint32_t round, int *copies)
{
	int at = -1;

	*copies = 0;
	for (unsigned int i = 0; i < c->n; i++) {
		const struct sg_dp_msg *m = &c->pkts[i].m;

		if (m->type == SG_DP_T_RESULT && m->rank == rank && m->chunk == chunk &&
		    m->round == round) {
			at = (int)i;
			++*copies;
		}
	}
	return at;
}

/*
 * N workers push 3 chunks (the last one short) for 2 rounds, in a shuffled
 * order, into two engines: one with the fan-out ops, one without. Every
 * worker must get exactly one RESULT per chunk and round from each, equal to
 * the reference sum, and the two engines' packets must be the same bytes.
 */
static void fanout_case(enum sg_dtype dt, enum sg_mode mode, uint32_t n)
{
	const uint32_t chunk_bytes = 64, nchunks = 3, rounds = 2;
	size_t esz = sg_dtype_size(dt);
	uint32_t per = chunk_bytes / (uint32_t)esz, nelem = per * (nchunks - 1) + per / 2 + 1;
	struct sg_dp_engine_conf ef = {.numa_node = -1, .pool_bufs = 256,
				       .tx = {.alloc_multi = fan_alloc, .send_multi = fan_send}};
	struct sg_dp_engine_conf ep = {.numa_node = -1, .pool_bufs = 256};
	struct sg_dp_key k = {.id = 1, .nelem = nelem};
	struct sg_dp_job_conf jc = {.id = 3, .nworkers = n, .token = TOKEN, .dtype = dt,
				    .mode = mode, .chunk_bytes = chunk_bytes, .keys = &k,
				    .nkeys = 1};
	struct push_spec ps = spec(3, dt, chunk_bytes, nelem);
	struct sg_dp_engine *e[2];
	struct sg_dp_stats st;
	uint64_t rng = n * 31u + (uint64_t)dt * 7 + (uint64_t)mode;
	static uint8_t pkt[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	uint8_t data[64];
	uint32_t order[64];
	char what[64];

	snprintf(what, sizeof(what), "%s %s N=%u", sg_dtype_name(dt), sg_mode_name(mode), n);
	memset(&fan, 0, sizeof(fan));
	fan.c = &cap;
	cap.n = cap_plain.n = 0;
	/* the fan-out engine's single-packet ops capture into cap too (N = 1, fall-backs) */
	e[0] = cap_engine(&cap, &ef);
	e[1] = cap_engine(&cap_plain, &ep);
	if (!SG_CHECK(e[0] != NULL && e[1] != NULL, "%s: engines", what))
		goto out;
	SG_CHECK_EQ(sg_dp_engine_add_job(e[0], &jc), 0);
	SG_CHECK_EQ(sg_dp_engine_add_job(e[1], &jc), 0);
	for (uint32_t round = 0; round < rounds; round++) {
		for (uint32_t c = 0; c < nchunks; c++) {
			/* rank order shuffled per chunk: deterministic mode must not care */
			for (uint32_t r = 0; r < n; r++)
				order[r] = r;
			for (uint32_t r = n; r > 1; r--) {
				uint32_t s = (uint32_t)(splitmix64(&rng) % r), t = order[r - 1];

				order[r - 1] = order[s];
				order[s] = t;
			}
			for (uint32_t x = 0; x < n; x++) {
				uint32_t r = order[x], len;

				for (uint32_t i = 0; i < per; i++)
					put(dt, data + i * esz, val(r, c, round, i));
				len = mk_pkt(pkt, &ps, r, c, round, data);
				for (int w = 0; w < 2; w++)
					SG_CHECK(sg_dp_engine_rx(e[w], pkt, len, 100 + r, round) > 0,
						 "%s: push used", what);
			}
		}
	}
	/* N = 1 never fans out; otherwise once per completed chunk round */
	SG_CHECK_EQ(fan.allocs, n >= 2 ? nchunks * rounds : 0);
	SG_CHECK_EQ(fan.sends, fan.allocs);
	SG_CHECK_EQ(cap.n, n * nchunks * rounds);
	SG_CHECK_EQ(cap_plain.n, n * nchunks * rounds);
	for (uint32_t round = 0; round < rounds; round++) {
		for (uint32_t c = 0; c < nchunks; c++) {
			uint32_t ne = c + 1 < nchunks ? per : nelem - per * (nchunks - 1);
			uint8_t want[64];

			for (uint32_t i = 0; i < ne; i++) {
				int sum = 0;

				for (uint32_t r = 0; r < n; r++)
					sum += val(r, c, round, i);
				put(dt, want + i * esz, sum);
			}
			for (uint32_t r = 0; r < n; r++) {
				int nf, np, f = find(&cap, r, c, round, &nf);
				int p = find(&cap_plain, r, c, round, &np);

				if (!SG_CHECK(nf == 1 && np == 1, "%s: rank %u chunk %u round %u: "
					      "%d and %d RESULTs", what, r, c, round, nf, np))
					continue;
				SG_CHECK(cap.pkts[f].dest == 100 + r && cap.pkts[f].m.nelem == ne &&
						 memcmp(cap.pkts[f].m.payload, want, ne * esz) == 0,
					 "%s: rank %u chunk %u round %u: wrong sum", what, r, c,
					 round);
				SG_CHECK(cap.pkts[f].len == cap_plain.pkts[p].len &&
						 memcmp(cap.pkts[f].buf, cap_plain.pkts[p].buf,
							cap.pkts[f].len) == 0,
					 "%s: rank %u chunk %u round %u: fan-out packet differs", what,
					 r, c, round);
			}
		}
	}
	sg_dp_engine_stats(e[0], &st);
	SG_CHECK_EQ(st.results_sent, n * nchunks * rounds);
	SG_CHECK_EQ(st.tx_fail, 0);
out:
	sg_dp_engine_destroy(e[0]);
	sg_dp_engine_destroy(e[1]);
}

/* alloc_multi declining falls back to one packet each; a short send_multi counts tx_fail. */
static void test_fanout_fallbacks(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 16,
				       .tx = {.alloc_multi = fan_alloc, .send_multi = fan_send}};
	struct push_spec ps = spec(1, SG_DTYPE_FP32, 64, 32);
	struct sg_dp_engine *e;
	struct sg_dp_job_stats js;
	struct sg_dp_stats st;
	int copies;

	memset(&fan, 0, sizeof(fan));
	fan.c = &cap;
	cap.n = 0;
	e = cap_engine(&cap, &ec);
	if (!SG_CHECK(e != NULL, "engine"))
		return;
	add_job(e, 1, 4, 0);
	fan.decline = 1;
	for (uint32_t r = 0; r < 4; r++)
		rx(e, &ps, r, 0, 0, false, 0);
	SG_CHECK_EQ(fan.allocs, 0);
	SG_CHECK_EQ(cap.n, 4); /* through alloc/send */
	for (uint32_t r = 0; r < 4; r++)
		SG_CHECK(find(&cap, r, 0, 0, &copies) >= 0 && copies == 1, "rank %u", r);
	fan.decline = 0;
	fan.short_by = 3;
	cap.n = 0;
	for (uint32_t r = 0; r < 4; r++)
		rx(e, &ps, r, 1, 0, false, 0);
	SG_CHECK_EQ(fan.sends, 1);
	SG_CHECK_EQ(cap.n, 1);
	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.results_sent, 5);
	SG_CHECK_EQ(st.tx_fail, 3);
	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 1, &js), 0);
	SG_CHECK_EQ(js.tx_fail, 3);
	SG_CHECK_EQ(js.results_sent, 5);
	/* a retransmit to one worker goes out alone, through alloc/send */
	fan.short_by = 0;
	cap.n = 0;
	SG_CHECK_EQ(rx(e, &ps, 2, 1, 0, false, 1), SG_DP_USED_REPLIED);
	SG_CHECK_EQ(fan.sends, 1);
	SG_CHECK(cap.n == 1 && cap.pkts[0].m.rank == 2 && cap.pkts[0].m.type == SG_DP_T_RESULT,
		 "retransmit");
	sg_dp_engine_destroy(e);

	/* only one of the pair is a configuration error */
	ec.tx.send_multi = NULL;
	errno = 0;
	SG_CHECK(cap_engine(&cap, &ec) == NULL && errno == EINVAL, "alloc_multi alone accepted");
}

static bool pick_key1(void *arg, uint32_t job, uint32_t key)
{
	++*(unsigned int *)arg;
	return job == 1 && key == 1;
}

/* The sum RESULT @p at carries: every element must be @p want (fp32). */
static bool result_is(const struct cap *c, int at, float want)
{
	const struct cap_pkt *cp = &c->pkts[at];

	for (uint32_t i = 0; at >= 0 && i < cp->m.nelem; i++) {
		float v;

		memcpy(&v, cp->buf + SG_DP_HDR_LEN + i * sizeof(v), sizeof(v));
		if (v != want)
			return false;
	}
	return at >= 0;
}

/*
 * sg_dp_engine_release_keys(): key 1 has a kept result and an open round, key
 * 2 a kept result. Releasing key 1 gives back its buffers and its active slot;
 * its next push opens any round (as a key that comes back after a move would)
 * and sums right; key 2 still serves its kept result.
 */
static void test_release_keys(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 8};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	struct sg_dp_key k[2] = {{.id = 1, .nelem = 16}, {.id = 2, .nelem = 16}};
	struct sg_dp_job_conf jc = {.id = 1, .nworkers = 2, .token = TOKEN,
				    .dtype = SG_DTYPE_FP32, .chunk_bytes = 64, .keys = k,
				    .nkeys = 2};
	struct push_spec k1 = spec(1, SG_DTYPE_FP32, 64, 16), k2 = k1;
	struct sg_dp_job_stats js;
	struct sg_dp_stats st;
	unsigned int asked = 0;
	int copies;

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	k2.key = 2;
	for (uint32_t r = 0; r < 2; r++) {
		rx(e, &k1, r, 0, 0, false, 0);
		rx(e, &k2, r, 0, 0, false, 0);
	}
	SG_CHECK_EQ(rx(e, &k1, 0, 0, 1, false, 1), SG_DP_USED_SUMMED); /* round 1 opens */
	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.pool_free, 8 - 3); /* key 1: result 0 and round 1; key 2: result 0 */
	SG_CHECK_EQ(sg_dp_engine_release_keys(e, 1, pick_key1, &asked), 1);
	SG_CHECK_EQ(asked, 2); /* asked once per key */
	SG_CHECK_EQ(sg_dp_engine_release_keys(e, 9, pick_key1, &asked), -ENOENT);
	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.pool_free, 8 - 1);
	SG_CHECK_EQ(st.slots_active, 0);
	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 1, &js), 0);
	SG_CHECK_EQ(js.slots_active, 0);
	SG_CHECK_EQ(js.rounds_completed, 2);
	/* round 1 is forgotten: key 1 starts again at round 7, and sums 1 + 2 */
	cap.n = 0;
	SG_CHECK_EQ(rx(e, &k1, 0, 0, 7, false, 2), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(rx(e, &k1, 1, 0, 7, false, 2), SG_DP_USED_SUMMED | SG_DP_USED_COMPLETED);
	SG_CHECK(result_is(&cap, find(&cap, 0, 0, 7, &copies), 3.0f) && copies == 1, "key 1 r7");
	SG_CHECK(result_is(&cap, find(&cap, 1, 0, 7, &copies), 3.0f) && copies == 1, "key 1 r7");
	/* its old round 0 is gone (too old now); key 2's kept round 0 is still served */
	SG_CHECK_EQ(rx(e, &k1, 1, 0, 0, false, 3), -EBADMSG);
	cap.n = 0;
	SG_CHECK_EQ(rx(e, &k2, 1, 0, 0, false, 3), SG_DP_USED_REPLIED);
	SG_CHECK(result_is(&cap, find(&cap, 1, 0, 0, &copies), 3.0f), "key 2 kept result");
	/* released again, key 1 gives back its round-7 result */
	SG_CHECK_EQ(sg_dp_engine_release_keys(e, 1, pick_key1, &asked), 1);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 1), 0);
	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.pool_free, 8);
	sg_dp_engine_destroy(e);
}

/* The big-endian u32 at @p p. */
static uint32_t be32(const void *p)
{
	const uint8_t *b = p;

	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Packet @p i of @p c is ERROR @p code to @p dest about round @p round of key @p key. */
static bool is_error(const struct cap *c, unsigned int i, uint16_t code, uint64_t dest,
		     uint32_t key, uint32_t round)
{
	const struct cap_pkt *q = &c->pkts[i];

	return i < c->n && q->m.type == SG_DP_T_ERROR && q->m.code == code && q->dest == dest &&
	       q->m.key == key && q->m.round == round && q->m.payload_len == 8;
}

/*
 * Pushes the node refuses though they carry the job's token are answered:
 * a program restarted against a job whose rounds went on gets ERROR STALE with
 * the chunk's round, a push whose result was reclaimed ERROR GONE with it, a
 * push of other geometry ERROR MISMATCH; each at most REFUSE_MAX (32) per 100 ms
 * per job, and a packet without the token never gets an answer.
 */
static void test_refusals(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 2, .shadow_hold_ns = 10};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	struct sg_dp_key keys[3] = {{.id = 1, .nelem = 16}, {.id = 2, .nelem = 16},
				    {.id = 3, .nelem = 16}};
	struct sg_dp_job_conf jc = {.id = 4, .nworkers = 2, .token = TOKEN,
				    .dtype = SG_DTYPE_FP32, .chunk_bytes = 64, .keys = keys,
				    .nkeys = 3};
	struct push_spec k1 = spec(4, SG_DTYPE_FP32, 64, 16), bad = k1, nok = k1;
	struct sg_dp_job_stats js;
	unsigned int n;

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	cap.n = 0;
	/* rounds 0 and 1 of key 1 complete */
	for (uint32_t r = 0; r < 2; r++) {
		SG_CHECK_EQ(rx(e, &k1, 0, 0, r, false, r), SG_DP_USED_SUMMED);
		SG_CHECK_EQ(rx(e, &k1, 1, 0, r, false, r),
			    SG_DP_USED_SUMMED | SG_DP_USED_COMPLETED);
	}
	SG_CHECK_EQ(cap.n, 4);
	/* rank 0 restarts at round 0: the chunk finished round 1 */
	SG_CHECK_EQ(rx(e, &k1, 0, 0, 0, false, 2), -EBADMSG);
	SG_CHECK(is_error(&cap, 4, SG_DP_C_STALE, 100, 1, 0) &&
		 be32(cap.pkts[4].m.payload) == 1 && be32((const uint8_t *)cap.pkts[4].m.payload + 4) == 1,
		 "STALE with round 1, finished");
	/* ... without the token: dropped, never answered */
	nok.token ^= 1;
	SG_CHECK_EQ(rx(e, &nok, 0, 0, 0, false, 2), -EBADMSG);
	SG_CHECK_EQ(cap.n, 5);
	/* round 2 collects (rank 0 in): a push of round 0 is two behind it */
	SG_CHECK_EQ(rx(e, &k1, 0, 0, 2, false, 3), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(rx(e, &k1, 1, 0, 0, false, 3), -EBADMSG);
	SG_CHECK(is_error(&cap, 5, SG_DP_C_STALE, 101, 1, 0) &&
		 be32(cap.pkts[5].m.payload) == 2 && be32((const uint8_t *)cap.pkts[5].m.payload + 4) == 0,
		 "STALE with round 2, collecting");
	/* pushes of other geometry, 100 of them at once: 32 answers, then 32 more later */
	bad.key = 99;
	cap.n = 0;
	for (int i = 0; i < 100; i++)
		SG_CHECK_EQ(rx(e, &bad, 0, 0, 0, false, 200 * MS), -EBADMSG);
	SG_CHECK_EQ(cap.n, 32);
	SG_CHECK(is_error(&cap, 0, SG_DP_C_MISMATCH, 100, 99, 0), "MISMATCH");
	for (int i = 0; i < 100; i++)
		rx(e, &bad, 0, 0, 0, false, 300 * MS);
	SG_CHECK_EQ(cap.n, 64);
	/* a PULL of other geometry is not answered */
	SG_CHECK_EQ(rx(e, &bad, 0, 0, 0, true, 600 * MS), -EBADMSG);
	SG_CHECK_EQ(cap.n, 64);
	SG_CHECK_EQ(sg_dp_engine_job_stats(e, 4, &js), 0);
	SG_CHECK_EQ(js.drops_by[SG_DP_DROP_KEY], 201);
	SG_CHECK_EQ(js.errors_sent, 2 + 64);
	sg_dp_engine_destroy(e);

	/* N = 1 and a pool of 2: key 3 takes key 1's kept result, whose resend is GONE */
	e = cap_engine(&cap, &ec);
	if (!SG_CHECK(e != NULL, "engine"))
		return;
	jc.nworkers = 1;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	{
		struct push_spec k2 = k1, k3 = k1;

		k2.key = 2;
		k3.key = 3;
		cap.n = 0;
		rx(e, &k1, 0, 0, 0, false, 0);
		rx(e, &k2, 0, 0, 0, false, 0);
		rx(e, &k3, 0, 0, 0, false, 1000);
		n = cap.n;
		SG_CHECK_EQ(rx(e, &k1, 0, 0, 0, false, 2000), SG_DP_USED_REPLIED);
		SG_CHECK(n == 3 && cap.n == n + 1 && is_error(&cap, n, SG_DP_C_GONE, 100, 1, 0) &&
			 be32(cap.pkts[n].m.payload) == 0 &&
			 be32((const uint8_t *)cap.pkts[n].m.payload + 4) == 1,
			 "GONE with round 0, finished (%u, %u packets)", n, cap.n);
	}
	sg_dp_engine_destroy(e);
}

/* tx.accept's calls: the address, and how many packets the engine had sent by then. */
static struct {
	unsigned int n;
	uint64_t src[16];
	unsigned int sent_before[16];
} acc;

static void cap_accept(void *ctx, uint64_t src)
{
	struct cap *c = ctx;

	if (acc.n < 16) {
		acc.src[acc.n] = src;
		acc.sent_before[acc.n] = c->n;
	}
	acc.n++;
}

/*
 * tx.accept names the sender of each packet that passed its job's checks,
 * before any reply it causes, and never the sender of garbage, of an unknown
 * job, or of a wrong token, rank or key.
 */
static void test_accept(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 16, .tx.accept = cap_accept};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	struct push_spec j1 = spec(1, SG_DTYPE_FP32, 64, 32);
	struct push_spec bad_token = j1, bad_key = j1, no_job = spec(9, SG_DTYPE_FP32, 64, 32);
	static uint8_t p[SG_DP_HDR_LEN + 64];
	float d[16] = {1};

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	cap.n = 0;
	acc.n = 0;
	add_job(e, 1, 2, 0);
	bad_token.token = TOKEN + 1;
	bad_key.key = 7;
	memset(p, 0, sizeof(p));
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, sizeof(p), 1, 0), -EBADMSG);             /* zeros */
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, mk_pkt(p, &bad_token, 0, 0, 0, d), 2, 0), -EBADMSG);
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, mk_pkt(p, &no_job, 0, 0, 0, d), 3, 0), -EBADMSG);
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, mk_pkt(p, &bad_key, 0, 0, 0, d), 4, 0), -EBADMSG);
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, mk_pkt(p, &j1, 2, 0, 0, d), 5, 0), -EBADMSG); /* rank */
	SG_CHECK_EQ(acc.n, 0);
	SG_CHECK_EQ(rx(e, &j1, 0, 0, 0, false, 0), SG_DP_USED_SUMMED);
	SG_CHECK_EQ(rx(e, &j1, 0, 0, 0, false, 0), -EBADMSG); /* a duplicate still refreshes */
	SG_CHECK_EQ(rx(e, &j1, 1, 0, 0, false, 0), SG_DP_USED_SUMMED | SG_DP_USED_COMPLETED);
	/* the key-7 push got ERROR MISMATCH (its token was right), and its sender stays out;
	 * the duplicate got WAITING */
	SG_CHECK_EQ(cap.n, 4);
	if (SG_CHECK_EQ(acc.n, 3)) {
		SG_CHECK(acc.src[0] == 100 && acc.src[1] == 100 && acc.src[2] == 101,
			 "accepted %llu %llu %llu", (unsigned long long)acc.src[0],
			 (unsigned long long)acc.src[1], (unsigned long long)acc.src[2]);
		/* the duplicate was accepted before its WAITING, rank 1 before the RESULTs its
		 * push completed */
		SG_CHECK_EQ(acc.sent_before[1], 1);
		SG_CHECK_EQ(acc.sent_before[2], 2);
	}
	sg_dp_engine_destroy(e);
}

int main(void)
{
	static const enum sg_dtype dts[] = {SG_DTYPE_FP32, SG_DTYPE_BF16, SG_DTYPE_FP16,
					    SG_DTYPE_INT32};
	static const uint32_t ns[] = {1, 2, 5, 64};

	rte_log_set_global_level(RTE_LOG_WARNING);
	test_rx_codes_and_job_stats();
	test_accept();
	test_release_keys();
	test_refusals();
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			for (int mode = SG_MODE_SYNC; mode <= SG_MODE_DETERM; mode++)
				if (mode != SG_MODE_ASYNC)
					fanout_case(dts[d], mode, ns[i]);
	test_fanout_fallbacks();
	return sg_test_finish("dp_engine_out");
}
