/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Open jobs: keys made by their first valid push. Each scenario checks the
 * sums against a reference computed here, element by element, from the
 * values the workers pushed (small integers, so that every dtype sums them
 * exactly): key creation and the learned length of a last chunk; every
 * header that must not make a key, each answered with its ERROR MISMATCH
 * reason; the slot budget and ERROR FULL; a job of dtype any with keys of six
 * dtypes; garbage (a wrong token, an unknown job, a rank out of range, PULLs,
 * 20000 random headers) that must never make a key; deterministic and async
 * modes; releasing keys, and a key moved to another engine; keys added to a
 * fixed job (sg_dp_engine_add_keys(): a failover's moved keys) while a round is
 * open and with async stores held; add_job's checks.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <rte_common.h>

#include "dp_test_util.h"
#include "sg_test_dtype.h"

#define TOKEN 0x0badc0ffee0ddf00ull
#define JOB 9
#define CB 64 /* chunk_bytes: 16 fp32 elements */
#define MS 1000000ull

static struct cap cap;

/* A push's header fields, as a worker (good or not) writes them. */
struct hdr {
	uint32_t job;
	uint64_t token;
	uint32_t rank;
	enum sg_dtype dt;
	uint32_t key, chunk, nchunks, round, nelem, offset;
};

/* The header a correct worker writes for chunk @p c of a key of @p nelem elements. */
static struct hdr good(enum sg_dtype dt, uint32_t key, uint32_t nelem, uint32_t c, uint32_t rank,
		       uint32_t round)
{
	uint32_t per = CB / (uint32_t)sg_dtype_size(dt);
	uint32_t nchunks = (nelem + per - 1) / per;

	return (struct hdr){.job = JOB, .token = TOKEN, .rank = rank, .dt = dt, .key = key,
			    .chunk = c, .nchunks = nchunks, .round = round,
			    .nelem = c + 1 < nchunks ? per : nelem - c * per, .offset = c * CB};
}

/* Element i of chunk c of key @p key pushed by @p rank in @p round: small, so sums are exact. */
static int val(uint32_t key, uint32_t rank, uint32_t c, uint32_t round, uint32_t i)
{
	return (int)((key * 11 + rank * 7 + c * 5 + round * 3 + i) % 9) - 4;
}

/* Send @p h with the values val() gives (a payload of h->nelem elements of h->dt). */
static int send_push(struct sg_dp_engine *e, const struct hdr *h, uint64_t now)
{
	static uint8_t pkt[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	uint8_t data[SG_DP_MAX_PAYLOAD];
	size_t esz = sg_dtype_size(h->dt);
	struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .dtype = (uint8_t)h->dt, .job = h->job,
			      .rank = (uint16_t)h->rank, .token = h->token, .key = h->key,
			      .chunk = h->chunk, .nchunks = h->nchunks, .round = h->round,
			      .nelem = h->nelem, .offset = h->offset};

	if (h->nelem * esz > sizeof(data))
		return -E2BIG;
	for (uint32_t i = 0; i < h->nelem; i++)
		sg_test_put(h->dt, data + i * esz, val(h->key, h->rank, h->chunk, h->round, i));
	return sg_dp_engine_rx(e, pkt,
			       (uint32_t)sg_dp_build(pkt, sizeof(pkt), &m, data, h->nelem * esz),
			       100 + h->rank, now);
}

static int send_pull(struct sg_dp_engine *e, const struct hdr *h, uint64_t now)
{
	uint8_t pkt[SG_DP_HDR_LEN];
	struct sg_dp_msg m = {.type = SG_DP_T_PULL, .dtype = (uint8_t)h->dt, .job = h->job,
			      .rank = (uint16_t)h->rank, .token = h->token, .key = h->key,
			      .chunk = h->chunk, .nchunks = h->nchunks, .round = h->round,
			      .offset = h->offset};

	return sg_dp_engine_rx(e, pkt, (uint32_t)sg_dp_build(pkt, sizeof(pkt), &m, NULL, 0),
			       100 + h->rank, now);
}

/*
 * Every RESULT in cap.pkts[from..] must hold, for its (key, chunk, round), the sum
 * over @p n ranks of val(), in the key's dtype @p dt. @return RESULTs checked.
 */
static unsigned int check_results(unsigned int from, uint32_t n, enum sg_dtype dt,
				  const char *what)
{
	unsigned int checked = 0;

	for (unsigned int p = from; p < cap.n; p++) {
		const struct sg_dp_msg *m = &cap.pkts[p].m;
		size_t esz = sg_dtype_size(dt);
		bool ok = m->dtype == dt;

		if (m->type != SG_DP_T_RESULT)
			continue;
		for (uint32_t i = 0; i < m->nelem && ok; i++) {
			int64_t want = 0;

			for (uint32_t r = 0; r < n; r++)
				want += val(m->key, r, m->chunk, m->round, i);
			if (dt == SG_DTYPE_UINT8)
				want &= 0xff;
			ok = sg_test_get(dt, (const uint8_t *)m->payload + i * esz) == want;
		}
		SG_CHECK(ok, "%s: RESULT of key %u chunk %u round %u (%s) is not the sum", what,
			 m->key, m->chunk, m->round, sg_dtype_name((enum sg_dtype)m->dtype));
		checked++;
	}
	return checked;
}

/* The last packet sent must be ERROR @p code; for MISMATCH with @p what (0: any). */
static void expect_error(uint16_t code, uint8_t what, const char *ctx)
{
	const struct cap_pkt *q = cap.n ? &cap.pkts[cap.n - 1] : NULL;
	const uint8_t *pl = q ? q->m.payload : NULL;

	SG_CHECK(q != NULL && q->m.type == SG_DP_T_ERROR && q->m.code == code &&
			 q->m.payload_len == 8 && (what == 0 || pl[0] == what),
		 "%s: want ERROR %u (what %u), got %s code %u what %u", ctx, code, what,
		 q ? sg_dp_type_name(q->m.type) : "nothing", q ? q->m.code : 0,
		 pl ? pl[0] : 0);
}

static struct sg_dp_job_stats jstats(struct sg_dp_engine *e)
{
	struct sg_dp_job_stats js = {0};

	SG_CHECK_EQ(sg_dp_engine_job_stats(e, JOB, &js), 0);
	return js;
}

static uint64_t drops(struct sg_dp_engine *e, enum sg_dp_drop why)
{
	struct sg_dp_stats st;

	sg_dp_engine_stats(e, &st);
	return st.drops[why];
}

/* An engine holding job @p jc. NULL (a failed check) if it cannot be made. */
static struct sg_dp_engine *job_engine(const struct sg_dp_job_conf *jc)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 256,
				       .slot_timeout_ns = 50 * MS};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);

	cap.n = 0;
	if (!SG_CHECK(e != NULL, "engine") || !SG_CHECK_EQ(sg_dp_engine_add_job(e, jc), 0)) {
		sg_dp_engine_destroy(e);
		return NULL;
	}
	return e;
}

/* An engine holding open job JOB. NULL (a failed check) if it cannot be made. */
static struct sg_dp_engine *open_engine(uint32_t n, enum sg_dtype dt, enum sg_mode mode,
					uint32_t slots, uint32_t part)
{
	struct sg_dp_job_conf jc = {.id = JOB, .nworkers = n, .token = TOKEN, .dtype = dt,
				    .mode = mode, .chunk_bytes = CB, .partition_bytes = part,
				    .open = true, .slots = slots};

	return job_engine(&jc);
}

/* Pushes of every chunk of key @p key (@p nelem elements) by ranks 0..n-1 for one round. */
static void push_round(struct sg_dp_engine *e, enum sg_dtype dt, uint32_t key, uint32_t nelem,
		       uint32_t n, uint32_t round, uint64_t now)
{
	uint32_t per = CB / (uint32_t)sg_dtype_size(dt), nch = (nelem + per - 1) / per;

	for (uint32_t r = 0; r < n; r++)
		for (uint32_t c = 0; c < nch; c++) {
			struct hdr h = good(dt, key, nelem, nch - 1 - c, r, round);

			SG_CHECK(send_push(e, &h, now) > 0, "key %u chunk %u rank %u round %u", key,
				 h.chunk, r, round);
		}
}

/* ---- key creation, the last chunk's length -------------------------------- */

static void test_create(void)
{
	struct sg_dp_engine *e = open_engine(3, SG_DTYPE_FP32, SG_MODE_SYNC, 0, 0);
	struct sg_dp_job_stats js;
	struct sg_dp_stats st;
	struct hdr h;

	if (e == NULL)
		return;
	js = jstats(e);
	SG_CHECK(js.keys == 0 && js.slots_used == 0 && js.slots == SG_OPEN_SLOTS_DEFAULT,
		 "a new open job: %lu keys, %lu of %lu slots", (unsigned long)js.keys,
		 (unsigned long)js.slots_used, (unsigned long)js.slots);
	/* key 0x10002 (tensor 1, part 2) of 40 elements: chunks of 16, 16 and 8; made by a push
	 * of its middle chunk, so its last chunk's length is not known yet */
	h = good(SG_DTYPE_FP32, 0x10002, 40, 1, 0, 5);
	SG_CHECK(send_push(e, &h, 0) > 0, "a valid push makes the key");
	js = jstats(e);
	SG_CHECK(js.keys == 1 && js.slots_used == 3, "%lu keys, %lu slots used",
		 (unsigned long)js.keys, (unsigned long)js.slots_used);
	/* a later push of the last chunk with 9 elements: learned (the key's length is 41) */
	h = good(SG_DTYPE_FP32, 0x10002, 41, 2, 1, 5);
	SG_CHECK(send_push(e, &h, 0) > 0, "the first push of the last chunk tells its length");
	/* rank 2 with the 8 its tensor really has: refused, the length is the first push's */
	h = good(SG_DTYPE_FP32, 0x10002, 40, 2, 2, 5);
	SG_CHECK_EQ(send_push(e, &h, 0), -EBADMSG);
	expect_error(SG_DP_C_MISMATCH, SG_DP_MM_NELEM, "last chunk of another length");
	SG_CHECK_EQ(drops(e, SG_DP_DROP_NELEM), 1);
	/* the same three ranks with 41 elements complete every chunk */
	cap.n = 0;
	for (uint32_t r = 0; r < 3; r++)
		for (uint32_t c = 0; c < 3; c++) {
			h = good(SG_DTYPE_FP32, 0x10002, 41, c, r, 5);
			if ((r == 0 && c == 1) || (r == 1 && c == 2))
				continue; /* pushed above */
			SG_CHECK(send_push(e, &h, 1) > 0, "rank %u chunk %u", r, c);
		}
	SG_CHECK_EQ(check_results(0, 3, SG_DTYPE_FP32, "created key"), 9);
	for (unsigned int p = 0; p < cap.n; p++)
		if (cap.pkts[p].m.chunk == 2)
			SG_CHECK_EQ(cap.pkts[p].m.nelem, 9);
	/* the next round on the same key: no new key, nothing learned again */
	cap.n = 0;
	push_round(e, SG_DTYPE_FP32, 0x10002, 41, 3, 6, 2);
	SG_CHECK_EQ(check_results(0, 3, SG_DTYPE_FP32, "round 6"), 9);
	/* a PULL of the kept round is served: the key is an ordinary key now */
	h = good(SG_DTYPE_FP32, 0x10002, 41, 2, 0, 6);
	cap.n = 0;
	SG_CHECK(send_pull(e, &h, 3) > 0, "pull of a finished round");
	SG_CHECK_EQ(check_results(0, 3, SG_DTYPE_FP32, "pull"), 1);
	/* a second key, made by its last chunk's push (its length known at once) */
	h = good(SG_DTYPE_FP32, 7, 20, 1, 2, 0);
	SG_CHECK(send_push(e, &h, 4) > 0, "key 7");
	js = jstats(e);
	sg_dp_engine_stats(e, &st);
	SG_CHECK(js.keys == 2 && js.slots_used == 5 && st.keys_created == 2,
		 "%lu keys, %lu slots used, %lu made", (unsigned long)js.keys,
		 (unsigned long)js.slots_used, (unsigned long)st.keys_created);
	h = good(SG_DTYPE_FP32, 7, 21, 1, 0, 0);
	SG_CHECK_EQ(send_push(e, &h, 4), -EBADMSG);
	expect_error(SG_DP_C_MISMATCH, SG_DP_MM_NELEM, "key 7's last chunk");
	sg_dp_engine_destroy(e);
}

/* ---- headers that must not make a key --------------------------------------- */

static void test_refusals(void)
{
	/* partition_bytes 160: at most 2 full chunks and 8 fp32 elements */
	struct sg_dp_engine *e = open_engine(2, SG_DTYPE_FP32, SG_MODE_SYNC, 64, 160);
	struct {
		const char *what;
		struct hdr h;
		enum sg_dp_drop why;
		uint8_t mm;
	} bad[] = {
		{"nchunks 0", {.nchunks = 0, .chunk = 0, .nelem = 16}, SG_DP_DROP_CHUNK,
		 SG_DP_MM_CHUNKS},
		{"chunk past nchunks", {.nchunks = 2, .chunk = 2, .nelem = 16, .offset = 128},
		 SG_DP_DROP_CHUNK, SG_DP_MM_CHUNKS},
		{"offset not chunk * chunk_bytes", {.nchunks = 2, .chunk = 1, .nelem = 4,
		 .offset = 60}, SG_DP_DROP_OFFSET, SG_DP_MM_OFFSET},
		{"another dtype than the job's", {.dt = SG_DTYPE_INT32, .nchunks = 1, .nelem = 4},
		 SG_DP_DROP_JOB_DTYPE, SG_DP_MM_DTYPE},
		{"a short chunk that is not the last", {.nchunks = 2, .chunk = 0, .nelem = 15},
		 SG_DP_DROP_NELEM, SG_DP_MM_NELEM},
		{"a last chunk of 0 elements", {.nchunks = 2, .chunk = 1, .nelem = 0,
		 .offset = 64}, SG_DP_DROP_NELEM, SG_DP_MM_NELEM},
		{"a last chunk longer than a chunk", {.nchunks = 1, .chunk = 0, .nelem = 17},
		 SG_DP_DROP_NELEM, SG_DP_MM_NELEM},
		{"more chunks than a partition holds", {.nchunks = 4, .chunk = 0, .nelem = 16},
		 SG_DP_DROP_PARTITION, SG_DP_MM_PARTITION},
		{"a last chunk past the partition", {.nchunks = 3, .chunk = 2, .nelem = 9,
		 .offset = 128}, SG_DP_DROP_PARTITION, SG_DP_MM_PARTITION},
	};
	struct hdr h;

	if (e == NULL)
		return;
	for (unsigned int i = 0; i < RTE_DIM(bad); i++) {
		struct sg_dp_job_stats js;
		const uint8_t *pl;

		h = bad[i].h;
		h.job = JOB;
		h.token = TOKEN;
		h.key = 100 + i;
		if (h.dt == 0)
			h.dt = SG_DTYPE_FP32;
		cap.n = 0;
		SG_CHECK_EQ(send_push(e, &h, 0), -EBADMSG);
		expect_error(SG_DP_C_MISMATCH, bad[i].mm, bad[i].what);
		pl = cap.n ? cap.pkts[0].m.payload : NULL;
		SG_CHECK(cap.n == 1 && pl != NULL && pl[1] == SG_DTYPE_FP32 &&
				 be32toh(*(const uint32_t *)(pl + 4)) == CB &&
				 cap.pkts[0].m.key == h.key && cap.pkts[0].dest == 100,
			 "%s: the ERROR echoes the push and tells the job's dtype and chunk size",
			 bad[i].what);
		SG_CHECK(drops(e, bad[i].why) >= 1, "%s: counted as %s", bad[i].what,
			 sg_dp_drop_name(bad[i].why));
		js = jstats(e);
		SG_CHECK(js.keys == 0 && js.slots_used == 0, "%s made a key", bad[i].what);
	}
	/* a PULL never makes a key; dropped as a key the job does not have, unanswered */
	cap.n = 0;
	h = good(SG_DTYPE_FP32, 5, 16, 0, 0, 0);
	SG_CHECK_EQ(send_pull(e, &h, 0), -EBADMSG);
	SG_CHECK_EQ(cap.n, 0);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_KEY), 1);
	SG_CHECK_EQ(jstats(e).keys, 0);
	/* the largest key that fits: 2 chunks and 8 elements, 160 bytes */
	cap.n = 0;
	push_round(e, SG_DTYPE_FP32, 5, 40, 2, 0, 1);
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_FP32, "a key of partition_bytes"), 6);
	/* key 6, made by its first chunk: its last chunk's first pushes that do not fit are
	 * refused and teach nothing; the first one that fits tells the length */
	h = good(SG_DTYPE_FP32, 6, 40, 0, 0, 0);
	SG_CHECK(send_push(e, &h, 2) > 0, "key 6");
	{
		static const struct {
			uint32_t nelem;
			enum sg_dp_drop why;
			uint8_t mm;
		} last[] = {{0, SG_DP_DROP_NELEM, SG_DP_MM_NELEM},
			    {17, SG_DP_DROP_NELEM, SG_DP_MM_NELEM},
			    {9, SG_DP_DROP_PARTITION, SG_DP_MM_PARTITION}};

		for (unsigned int i = 0; i < RTE_DIM(last); i++) {
			uint64_t before = drops(e, last[i].why);

			h = good(SG_DTYPE_FP32, 6, 40, 2, 1, 0);
			h.nelem = last[i].nelem;
			SG_CHECK_EQ(send_push(e, &h, 2), -EBADMSG);
			expect_error(SG_DP_C_MISMATCH, last[i].mm, "key 6's last chunk");
			SG_CHECK_EQ(drops(e, last[i].why), before + 1);
		}
	}
	cap.n = 0;
	for (uint32_t r = 0; r < 2; r++)
		for (uint32_t c = r == 0 ? 1 : 0; c < 3; c++) {
			h = good(SG_DTYPE_FP32, 6, 39, c, r, 0);
			SG_CHECK(send_push(e, &h, 2) > 0, "key 6 rank %u chunk %u", r, c);
		}
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_FP32, "key 6 of 39 elements"), 6);
	/* an existing key: another chunk count is refused with the key's dtype */
	h = good(SG_DTYPE_FP32, 5, 56, 0, 1, 1);
	SG_CHECK_EQ(send_push(e, &h, 2), -EBADMSG);
	expect_error(SG_DP_C_MISMATCH, SG_DP_MM_CHUNKS, "key 5 with 4 chunks");
	SG_CHECK_EQ(jstats(e).keys, 2);
	sg_dp_engine_destroy(e);
}

/* ---- the slot budget -------------------------------------------------------- */

static void test_budget(void)
{
	struct sg_dp_engine *e = open_engine(2, SG_DTYPE_FP32, SG_MODE_SYNC, 5, 0);
	struct sg_dp_job_stats js;
	const uint8_t *pl;
	struct hdr h;

	if (e == NULL)
		return;
	push_round(e, SG_DTYPE_FP32, 1, 40, 2, 0, 0); /* 3 chunks */
	push_round(e, SG_DTYPE_FP32, 2, 17, 2, 0, 0); /* 2 chunks: the budget is used up */
	js = jstats(e);
	SG_CHECK(js.keys == 2 && js.slots_used == 5 && js.slots == 5, "%lu keys, %lu of %lu",
		 (unsigned long)js.keys, (unsigned long)js.slots_used, (unsigned long)js.slots);
	cap.n = 0;
	h = good(SG_DTYPE_FP32, 3, 1, 0, 1, 0);
	SG_CHECK_EQ(send_push(e, &h, 1), -EBADMSG);
	expect_error(SG_DP_C_FULL, 0, "a key past the budget");
	pl = cap.n ? cap.pkts[cap.n - 1].m.payload : NULL;
	SG_CHECK(pl != NULL && be32toh(*(const uint32_t *)pl) == 5 &&
			 be32toh(*(const uint32_t *)(pl + 4)) == 5 && cap.pkts[cap.n - 1].dest == 101 &&
			 cap.pkts[cap.n - 1].m.key == 3,
		 "ERROR FULL tells the budget and the slots used, to the sender");
	SG_CHECK_EQ(drops(e, SG_DP_DROP_FULL), 1);
	SG_CHECK_EQ(jstats(e).drops_by[SG_DP_DROP_FULL], 1);
	/* a flood of new keys gets at most 32 answers per 100 ms */
	cap.n = 0;
	for (uint32_t k = 0; k < 100; k++) {
		h = good(SG_DTYPE_FP32, 1000 + k, 16, 0, 0, 0);
		SG_CHECK_EQ(send_push(e, &h, 200 * MS), -EBADMSG);
	}
	SG_CHECK_EQ(cap.n, 32);
	SG_CHECK_EQ(jstats(e).keys, 2);
	/* the keys it has keep summing */
	cap.n = 0;
	push_round(e, SG_DTYPE_FP32, 1, 40, 2, 1, 300 * MS);
	push_round(e, SG_DTYPE_FP32, 2, 17, 2, 1, 300 * MS);
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_FP32, "full job"), 10);
	sg_dp_engine_destroy(e);
	/* single-chunk keys: 2 slots hold 2 keys, no third */
	e = open_engine(1, SG_DTYPE_FP32, SG_MODE_SYNC, 2, 0);
	if (e == NULL)
		return;
	push_round(e, SG_DTYPE_FP32, 1, 3, 1, 0, 0);
	push_round(e, SG_DTYPE_FP32, 2, 3, 1, 0, 0);
	h = good(SG_DTYPE_FP32, 3, 3, 0, 0, 0);
	SG_CHECK_EQ(send_push(e, &h, 1), -EBADMSG);
	expect_error(SG_DP_C_FULL, 0, "a third key on 2 slots");
	sg_dp_engine_destroy(e);
}

/* ---- dtype any -------------------------------------------------------------- */

static void test_dtype_any(void)
{
	static const enum sg_dtype dts[] = {SG_DTYPE_FP32, SG_DTYPE_FP16, SG_DTYPE_BF16,
					    SG_DTYPE_INT32, SG_DTYPE_INT8, SG_DTYPE_FP64,
					    SG_DTYPE_UINT8, SG_DTYPE_INT64};
	struct sg_dp_engine *e = open_engine(3, SG_DTYPE_ANY, SG_MODE_SYNC, 0, 0);
	struct hdr h;

	if (e == NULL)
		return;
	for (uint32_t round = 0; round < 2; round++)
		for (unsigned int i = 0; i < RTE_DIM(dts); i++) {
			unsigned int from = cap.n = 0;

			/* key i: 2.5 chunks of its own dtype */
			push_round(e, dts[i], sg_wire_key(i, 0), CB / (uint32_t)sg_dtype_size(dts[i])
				   * 5 / 2, 3, round, round);
			SG_CHECK_EQ(check_results(from, 3, dts[i], sg_dtype_name(dts[i])), 9);
		}
	SG_CHECK_EQ(jstats(e).keys, (uint64_t)RTE_DIM(dts));
	/* the fp32 key pushed as fp16: MISMATCH, with the key's dtype in the answer */
	h = good(SG_DTYPE_FP16, sg_wire_key(0, 0), 80, 0, 1, 2);
	cap.n = 0;
	SG_CHECK_EQ(send_push(e, &h, 5), -EBADMSG);
	expect_error(SG_DP_C_MISMATCH, SG_DP_MM_DTYPE, "fp32 key pushed as fp16");
	SG_CHECK(cap.n == 1 && ((const uint8_t *)cap.pkts[0].m.payload)[1] == SG_DTYPE_FP32,
		 "the mismatch tells the key's dtype");
	/* a refused new key of a job of dtype any tells dtype 0xff (no key, no dtype yet) */
	h = good(SG_DTYPE_BF16, 999, 64, 0, 1, 0);
	h.nelem = 3;
	cap.n = 0;
	SG_CHECK_EQ(send_push(e, &h, 5), -EBADMSG);
	SG_CHECK(cap.n == 1 && ((const uint8_t *)cap.pkts[0].m.payload)[1] == SG_DTYPE_ANY,
		 "a refused new key of a job of dtype any");
	sg_dp_engine_destroy(e);
}

/* ---- garbage never makes a key ---------------------------------------------- */

static void test_garbage(void)
{
	struct sg_dp_engine *e = open_engine(4, SG_DTYPE_ANY, SG_MODE_SYNC, 1024, 0);
	static uint8_t pkt[SG_DP_HDR_LEN + 256];
	uint64_t rng = 12345;
	struct sg_dp_stats st;
	struct hdr h;

	if (e == NULL)
		return;
	h = good(SG_DTYPE_FP32, 1, 16, 0, 0, 0);
	h.token ^= 1;
	SG_CHECK_EQ(send_push(e, &h, 0), -EBADMSG);
	h = good(SG_DTYPE_FP32, 1, 16, 0, 0, 0);
	h.job = JOB + 1;
	SG_CHECK_EQ(send_push(e, &h, 0), -EBADMSG);
	h = good(SG_DTYPE_FP32, 1, 16, 0, 4, 0); /* rank 4 of 4 workers */
	SG_CHECK_EQ(send_push(e, &h, 0), -EBADMSG);
	/* random headers that name the job: a random token, or the right one 1 time in 2
	 * with a random geometry the engine must refuse or accept consistently */
	for (unsigned int i = 0; i < 20000; i++) {
		struct sg_dp_msg m = {.type = SG_DP_T_PUSH};
		uint64_t r = splitmix64(&rng);
		uint32_t plen = (uint32_t)(r % 64) * 4;

		m.dtype = (uint8_t)(splitmix64(&rng) % SG_DTYPE_COUNT);
		m.job = JOB;
		m.token = splitmix64(&rng);
		m.rank = (uint16_t)(r >> 8) % 4;
		m.key = (uint32_t)splitmix64(&rng);
		m.chunk = (uint32_t)(r >> 16) % 4;
		m.nchunks = (uint32_t)(r >> 24) % 4;
		m.offset = (uint32_t)(r >> 32) % 3 * CB;
		m.nelem = plen / (uint32_t)sg_dtype_size((enum sg_dtype)m.dtype);
		plen = m.nelem * (uint32_t)sg_dtype_size((enum sg_dtype)m.dtype);
		memset(pkt + SG_DP_HDR_LEN, 0, plen);
		sg_dp_build_hdr(pkt, &m);
		SG_CHECK_EQ(sg_dp_engine_rx(e, pkt, SG_DP_HDR_LEN + plen, 7, i), -EBADMSG);
	}
	sg_dp_engine_stats(e, &st);
	SG_CHECK(jstats(e).keys == 0 && st.keys_created == 0 && cap.n == 0,
		 "garbage made %lu keys and %u replies", (unsigned long)st.keys_created, cap.n);
	SG_CHECK_EQ(st.drops[SG_DP_DROP_TOKEN], 20001);
	/* with the job's token: a key only from a header that holds together */
	for (unsigned int i = 0; i < 20000; i++) {
		struct sg_dp_msg m = {.type = SG_DP_T_PUSH};
		uint64_t r = splitmix64(&rng);
		enum sg_dtype dt = (enum sg_dtype)(splitmix64(&rng) % SG_DTYPE_COUNT);
		uint32_t esz = (uint32_t)sg_dtype_size(dt), per = CB / esz;
		uint32_t before = (uint32_t)jstats(e).keys;
		int rc;

		m.dtype = (uint8_t)dt;
		m.job = JOB;
		m.token = TOKEN;
		m.rank = (uint16_t)(r % 4);
		m.key = (uint32_t)(r >> 8) % 4096 + 5000;
		m.nchunks = (uint32_t)(r >> 20) % 4;
		m.chunk = (uint32_t)(r >> 24) % 4;
		m.offset = m.chunk * CB + ((r >> 28) % 8 == 0 ? 8 : 0);
		m.nelem = (r >> 32) % 2 ? per : (uint32_t)(r >> 40) % (per + 2);
		memset(pkt + SG_DP_HDR_LEN, 1, m.nelem * esz);
		sg_dp_build_hdr(pkt, &m);
		rc = sg_dp_engine_rx(e, pkt, SG_DP_HDR_LEN + m.nelem * esz, 8, 1000000);
		if (jstats(e).keys > before)
			SG_CHECK(rc > 0 && m.nchunks >= 1 && m.chunk < m.nchunks &&
					 m.offset == m.chunk * CB &&
					 (m.chunk + 1 == m.nchunks ? m.nelem >= 1 : m.nelem == per),
				 "key %u made from nchunks %u chunk %u offset %u nelem %u", m.key,
				 m.nchunks, m.chunk, m.offset, m.nelem);
	}
	SG_CHECK(jstats(e).keys > 0 && jstats(e).slots_used <= 1024, "%lu keys, %lu slots",
		 (unsigned long)jstats(e).keys, (unsigned long)jstats(e).slots_used);
	sg_dp_engine_destroy(e);
}

/* ---- deterministic and async modes ------------------------------------------ */

/* Deterministic: fp32 values whose sum depends on the order; the result must be the rank order's. */
static void test_deterministic(void)
{
	const uint32_t n = 4, nelem = 20;
	struct sg_dp_engine *e = open_engine(n, SG_DTYPE_FP32, SG_MODE_DETERM, 0, 0);
	static uint8_t pkt[SG_DP_HDR_LEN + CB];
	float x[4][20], want[20];
	uint64_t rng = 99;

	if (e == NULL)
		return;
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t i = 0; i < nelem; i++)
			x[r][i] = (float)(splitmix64(&rng) % 1000000) * (r % 2 ? 1e-7f : 1e3f);
	for (uint32_t i = 0; i < nelem; i++) {
		want[i] = x[0][i];
		for (uint32_t r = 1; r < n; r++)
			want[i] += x[r][i];
	}
	/* ranks arrive 3, 1, 0, 2: the first one (3) makes the key */
	for (uint32_t k = 0; k < n; k++) {
		static const uint32_t order[] = {3, 1, 0, 2};
		uint32_t r = order[k];

		for (uint32_t c = 0; c < 2; c++) {
			struct hdr h = good(SG_DTYPE_FP32, 77, nelem, c, r, 0);
			struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .dtype = SG_DTYPE_FP32,
					      .job = JOB, .rank = (uint16_t)r, .token = TOKEN,
					      .key = 77, .chunk = c, .nchunks = 2,
					      .nelem = h.nelem, .offset = h.offset};

			sg_dp_build(pkt, sizeof(pkt), &m, &x[r][c * 16], h.nelem * 4);
			SG_CHECK(sg_dp_engine_rx(e, pkt, SG_DP_HDR_LEN + h.nelem * 4, 100 + r, 0) > 0,
				 "rank %u chunk %u", r, c);
		}
	}
	SG_CHECK_EQ(cap.n, 2 * n);
	for (unsigned int p = 0; p < cap.n; p++) {
		const struct sg_dp_msg *m = &cap.pkts[p].m;

		SG_CHECK(m->type == SG_DP_T_RESULT &&
				 memcmp(m->payload, &want[m->chunk * 16], m->nelem * 4) == 0,
			 "deterministic RESULT %u is not the rank-order sum, bit for bit", p);
	}
	sg_dp_engine_destroy(e);
}

static void test_async(void)
{
	struct sg_dp_engine *e = open_engine(2, SG_DTYPE_INT32, SG_MODE_ASYNC, 0, 0);
	int64_t store[20] = {0};
	struct hdr h;
	uint32_t next[2] = {0, 0};

	if (e == NULL)
		return;
	/* rank 1's first push makes the key and initialises the store; each later push adds */
	for (uint32_t step = 0; step < 6; step++) {
		uint32_t rank = step % 3 == 1 ? 0 : 1, round = next[rank]++;

		h = good(SG_DTYPE_INT32, 4, 20, 1, rank, round);
		cap.n = 0;
		SG_CHECK(send_push(e, &h, step) > 0, "async push %u", step);
		for (uint32_t i = 0; i < 4; i++)
			store[i] += val(4, rank, 1, round, i);
		SG_CHECK(cap.n == 1 && cap.pkts[0].m.type == SG_DP_T_RESULT &&
				 cap.pkts[0].m.rank == rank && cap.pkts[0].m.nelem == 4,
			 "async push %u answered with the store", step);
		for (uint32_t i = 0; cap.n == 1 && i < 4; i++)
			SG_CHECK_EQ(sg_test_get(SG_DTYPE_INT32, (const uint8_t *)cap.pkts[0].m.payload +
						    4 * i), store[i]);
	}
	SG_CHECK_EQ(jstats(e).keys, 1);
	sg_dp_engine_destroy(e);
}

/* ---- releasing keys, and a key moved to another engine ----------------------- */

static bool pick_key(void *arg, uint32_t job, uint32_t key)
{
	return job == JOB && key == *(const uint32_t *)arg;
}

static void count_keys(void *arg, uint32_t key, uint32_t nchunks)
{
	uint32_t *n = arg;

	n[0]++;
	n[1] += nchunks;
	(void)key;
}

static void test_release_and_move(void)
{
	struct sg_dp_engine *a = open_engine(2, SG_DTYPE_BF16, SG_MODE_SYNC, 0, 0), *b;
	uint32_t key = 3, cnt[2] = {0};
	struct sg_dp_job_conf jc = {.id = JOB, .nworkers = 2, .token = TOKEN,
				    .dtype = SG_DTYPE_BF16, .chunk_bytes = CB, .open = true};
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 64};
	struct hdr h;
	int rc;

	if (a == NULL)
		return;
	/* key 3 sums rounds 0 and 1 on engine a, rank 0 starts round 2 there */
	push_round(a, SG_DTYPE_BF16, key, 70, 2, 0, 0);
	push_round(a, SG_DTYPE_BF16, key, 70, 2, 1, 0);
	h = good(SG_DTYPE_BF16, key, 70, 0, 0, 2);
	SG_CHECK(send_push(a, &h, 1) > 0, "round 2 opens");
	/* released: the slots start afresh, the key (and its learned length) stays */
	rc = sg_dp_engine_release_keys(a, JOB, pick_key, &key);
	SG_CHECK_EQ(rc, 3);
	SG_CHECK(jstats(a).keys == 1 && jstats(a).slots_active == 0, "after release");
	SG_CHECK_EQ(sg_dp_engine_job_keys(a, JOB, count_keys, cnt), 1);
	SG_CHECK(cnt[0] == 1 && cnt[1] == 3, "job_keys: %u keys, %u chunks", cnt[0], cnt[1]);
	/* the key moves to engine b: made there by its next push, round 7 */
	b = cap_engine(&cap, &ec);
	if (!SG_CHECK(b != NULL && sg_dp_engine_add_job(b, &jc) == 0, "engine b")) {
		sg_dp_engine_destroy(a);
		sg_dp_engine_destroy(b);
		return;
	}
	cap.n = 0;
	push_round(b, SG_DTYPE_BF16, key, 70, 2, 7, 2);
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_BF16, "moved key"), 6);
	SG_CHECK_EQ(jstats(b).keys, 1);
	/* and back to a, which released it: any round opens there */
	cap.n = 0;
	push_round(a, SG_DTYPE_BF16, key, 70, 2, 8, 3);
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_BF16, "key back on a"), 6);
	SG_CHECK_EQ(drops(a, SG_DP_DROP_ROUND_NEW), 0);
	SG_CHECK_EQ(sg_dp_engine_job_keys(a, JOB + 1, count_keys, cnt), -ENOENT);
	SG_CHECK_EQ(sg_dp_engine_remove_job(a, JOB), 0);
	sg_dp_engine_destroy(a);
	sg_dp_engine_destroy(b);
}

/* ---- keys added to a fixed job (failover: a lost node's keys) ---------------- */

/* An engine holding fixed job JOB with key 1 of 40 elements; NULL if it cannot be made. */
static struct sg_dp_engine *fixed_engine(uint32_t n, enum sg_dtype dt, enum sg_mode mode)
{
	static const struct sg_dp_key k1 = {.id = 1, .nelem = 40};
	struct sg_dp_job_conf jc = {.id = JOB, .nworkers = n, .token = TOKEN, .dtype = dt,
				    .mode = mode, .chunk_bytes = CB, .partition_bytes = 4096,
				    .keys = &k1, .nkeys = 1};

	return job_engine(&jc);
}

static void test_add_keys(void)
{
	const struct sg_dp_key add[] = {{.id = 1, .nelem = 40}, {.id = 5, .nelem = 20},
					{.id = 6, .nelem = 3}};
	const struct sg_dp_key twice[] = {{.id = 7, .nelem = 4}, {.id = 7, .nelem = 4}};
	const struct sg_dp_key big = {.id = 8, .nelem = 4096 / 4 + 1};
	struct sg_dp_engine *e = fixed_engine(2, SG_DTYPE_FP32, SG_MODE_SYNC), *o;
	struct hdr h;

	if (e == NULL)
		return;
	/* key 1 sums rounds 0 and 1; rank 0 opens round 2 of its chunk 2 (on the active list) */
	push_round(e, SG_DTYPE_FP32, 1, 40, 2, 0, 0);
	push_round(e, SG_DTYPE_FP32, 1, 40, 2, 1, 0);
	h = good(SG_DTYPE_FP32, 1, 40, 2, 0, 2);
	SG_CHECK(send_push(e, &h, 1) > 0, "round 2 opens");
	/* key 5 is not the job's yet: ERROR MISMATCH, no key made */
	h = good(SG_DTYPE_FP32, 5, 20, 0, 0, 7);
	SG_CHECK_EQ(send_push(e, &h, 1), -EBADMSG);
	expect_error(SG_DP_C_MISMATCH, SG_DP_MM_KEY, "key 5 before it is added");
	SG_CHECK_EQ(jstats(e).keys, 1);
	/* key 1 is there already and skipped; 5 (2 chunks) and 6 (1 chunk) come */
	SG_CHECK_EQ(sg_dp_engine_add_keys(e, JOB, add, 3), 2);
	SG_CHECK(jstats(e).keys == 3 && jstats(e).slots == 6 && jstats(e).slots_used == 6,
		 "after add_keys: %" PRIu64 " keys, %" PRIu64 " slots", jstats(e).keys,
		 jstats(e).slots);
	SG_CHECK_EQ(sg_dp_engine_add_keys(e, JOB, add, 3), 0);
	/* round 2 of key 1, open across the tables' move, completes with the right sum */
	cap.n = 0;
	h = good(SG_DTYPE_FP32, 1, 40, 2, 1, 2);
	SG_CHECK(send_push(e, &h, 2) & SG_DP_USED_COMPLETED, "round 2 of key 1 completes");
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_FP32, "key 1 across add_keys"), 2);
	/* a moved key's first push opens whatever round it carries */
	cap.n = 0;
	push_round(e, SG_DTYPE_FP32, 5, 20, 2, 7, 3);
	push_round(e, SG_DTYPE_FP32, 6, 3, 2, 7, 3);
	for (uint32_t c = 0; c < 2; c++)
		for (uint32_t r = 0; r < 2; r++) {
			h = good(SG_DTYPE_FP32, 1, 40, c, r, 2);
			SG_CHECK(send_push(e, &h, 3) > 0, "key 1 chunk %u round 2", c);
		}
	SG_CHECK_EQ(check_results(0, 2, SG_DTYPE_FP32, "added keys"), 10);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_ROUND_NEW), 0);
	/* refusals change nothing */
	SG_CHECK_EQ(sg_dp_engine_add_keys(e, JOB, twice, 2), -EINVAL);
	SG_CHECK_EQ(sg_dp_engine_add_keys(e, JOB, &big, 1), -EINVAL);
	SG_CHECK_EQ(sg_dp_engine_add_keys(e, JOB + 1, add, 1), -ENOENT);
	SG_CHECK_EQ(jstats(e).keys, 3);
	h = good(SG_DTYPE_FP32, 7, 4, 0, 0, 0);
	SG_CHECK_EQ(send_push(e, &h, 4), -EBADMSG);
	expect_error(SG_DP_C_MISMATCH, SG_DP_MM_KEY, "key 7 refused twice");
	sg_dp_engine_destroy(e);
	/* an open job makes its own keys */
	o = open_engine(2, SG_DTYPE_FP32, SG_MODE_SYNC, 0, 0);
	if (o != NULL)
		SG_CHECK_EQ(sg_dp_engine_add_keys(o, JOB, add, 1), -EINVAL);
	sg_dp_engine_destroy(o);
}

/* Async: each rank's last round of the old keys survives the tables' move. */
static void test_add_keys_async(void)
{
	const struct sg_dp_key k9 = {.id = 9, .nelem = 16};
	struct sg_dp_engine *e = fixed_engine(2, SG_DTYPE_INT32, SG_MODE_ASYNC);
	int64_t store[16] = {0};
	struct hdr h;

	if (e == NULL)
		return;
	for (uint32_t round = 0; round < 2; round++)
		for (uint32_t r = 0; r < 2; r++) {
			h = good(SG_DTYPE_INT32, 1, 40, 0, r, round);
			SG_CHECK(send_push(e, &h, round) > 0, "async push");
			for (uint32_t i = 0; i < 16; i++)
				store[i] += val(1, r, 0, round, i);
		}
	SG_CHECK_EQ(sg_dp_engine_add_keys(e, JOB, &k9, 1), 1);
	/* a retransmit of round 1 is answered, not added again; round 2 adds */
	cap.n = 0;
	h = good(SG_DTYPE_INT32, 1, 40, 0, 1, 1);
	SG_CHECK(send_push(e, &h, 5) > 0, "retransmit");
	h = good(SG_DTYPE_INT32, 1, 40, 0, 0, 2);
	SG_CHECK(send_push(e, &h, 5) > 0, "round 2");
	for (uint32_t i = 0; i < 16; i++)
		store[i] += val(1, 0, 0, 2, i);
	SG_CHECK(cap.n == 2 && cap.pkts[1].m.type == SG_DP_T_RESULT, "two answers");
	for (uint32_t i = 0; cap.n == 2 && i < 16; i++)
		SG_CHECK_EQ(sg_test_get(SG_DTYPE_INT32, (const uint8_t *)cap.pkts[1].m.payload +
					    4 * i), store[i]);
	SG_CHECK_EQ(jstats(e).keys, 2);
	sg_dp_engine_destroy(e);
}

/* ---- add_job ---------------------------------------------------------------- */

static void test_add_job(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 16};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	struct sg_dp_key k = {.id = 1, .nelem = 4};
	struct sg_dp_job_conf jc = {.id = 1, .nworkers = 2, .token = TOKEN, .dtype = SG_DTYPE_ANY,
				    .chunk_bytes = CB, .open = true};

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	jc.id = 2;
	jc.keys = &k;
	jc.nkeys = 1;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), -EINVAL); /* an open job with keys */
	jc.open = false;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), -EINVAL); /* dtype any, not open */
	jc.keys = NULL;
	jc.nkeys = 0;
	jc.open = true;
	jc.dtype = SG_DTYPE_FP16;
	jc.slots = SG_OPEN_SLOTS_MAX + 1;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), -EINVAL);
	jc.slots = 1000;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 2), 0);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 1), 0);
	sg_dp_engine_destroy(e);
}

int main(void)
{
	test_create();
	test_refusals();
	test_budget();
	test_dtype_any();
	test_garbage();
	test_deterministic();
	test_async();
	test_release_and_move();
	test_add_keys();
	test_add_keys_async();
	test_add_job();
	return sg_test_finish("dp_engine_open");
}
