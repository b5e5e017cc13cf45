/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_dp_engine_rx_csum(): the engine checking UDP checksums while it sums,
 * against sg_dp_engine_rx() as the reference.
 *
 * Two engines with the same jobs get the same random traffic: N workers
 * pushing each chunk's rounds in any order, duplicates, retransmits of the
 * last round, PULLs, garbage, with a pool of 4 buffers: small enough to NACK
 * and to reclaim kept results. About one datagram in five is damaged: one bit
 * flipped anywhere in it, or in the headers in front of it. The reference engine gets only the
 * intact ones, with sg_dp_engine_rx(), as if the NIC had dropped the others;
 * the engine under test gets every one with sg_dp_engine_rx_csum() and the
 * checksum of what lies in front, computed here with RFC 1071's algorithm.
 * It must return -EILSEQ for exactly the damaged ones and what the reference
 * returns for the others, send the same bytes to the same addresses, accept
 * the same senders, and end with the same counters. Its RESULTs carry the
 * checksum of their elements (tx.payload_csum), which must be theirs.
 * Modes: sync fp32, bf16 summed in fp32 and natively, int8 with odd chunks,
 * async, deterministic; with and without the fan-out ops; open jobs, whose
 * keys the first intact push makes (a damaged one must make none, nor learn a
 * last chunk's length), of one dtype and of dtype any (a key each in fp32,
 * bf16 and int8), one with a slot budget too small for every key (ERROR FULL).
 */
#include <errno.h>
#include <stdio.h>

#include "dp_test_util.h"

#define TOKEN 0x5eedull
#define N 4

/* RFC 1071 over network-order words, end-around carry, returned in host order. */
static uint16_t ref_csum(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;
	uint16_t be, one = 1;
	uint8_t first;

	for (size_t i = 0; i < len; i += 2) {
		sum += (uint32_t)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
		sum = (sum & 0xffff) + (sum >> 16);
	}
	be = (uint16_t)sum;
	memcpy(&first, &one, 1);
	return first ? (uint16_t)(be >> 8 | be << 8) : be;
}

/* What one engine sent and accepted, as a running digest. */
struct out {
	uint64_t digest;
	uint64_t pkts, accepts, csums, csum_bad;
	bool want_csum;  /* this engine has tx.payload_csum */
	const void *sum_pkt;
	uint16_t sum;    /* the engine's checksum of sum_pkt's elements */
	uint8_t buf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	uint8_t slot;    /* which of buf's uses: one packet at a time */
};

static void mix(struct out *o, uint64_t v)
{
	o->digest = (o->digest ^ v) * 0x100000001b3ull;
}

static void mix_bytes(struct out *o, const uint8_t *p, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		mix(o, p[i]);
}

static void *o_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct out *o = ctx;

	mix(o, dest);
	*pkt = o->buf;
	return o->buf;
}

/* A RESULT with the engine's checksum: it must be its elements'. */
static void check_sum(struct out *o, const void *pkt, uint32_t len)
{
	bool given = o->sum_pkt == pkt;

	o->sum_pkt = NULL;
	if (!o->want_csum || len <= SG_DP_HDR_LEN || o->buf[5] != SG_DP_T_RESULT) {
		SG_CHECK(!given, "a checksum for a packet that is no RESULT");
		return;
	}
	o->csums += given;
	if (!given || o->sum != ref_csum(o->buf + SG_DP_HDR_LEN, len - SG_DP_HDR_LEN))
		o->csum_bad++;
}

static void o_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct out *o = ctx;

	check_sum(o, pkt, len);
	mix_bytes(o, o->buf, len);
	o->pkts++;
}

static void *o_alloc_multi(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
			   uint32_t len, void **pkt)
{
	return o_alloc(ctx, to[0].dest, len, pkt);
}

static unsigned int o_send_multi(void *ctx, void *pkt, uint32_t len,
				 const struct sg_dp_tx_dest *to, unsigned int n)
{
	struct out *o = ctx;

	check_sum(o, pkt, len);
	for (unsigned int i = 0; i < n; i++) {
		sg_dp_hdr_set_rank(o->buf, to[i].rank);
		mix(o, to[i].dest);
		mix_bytes(o, o->buf, len);
		o->pkts++;
	}
	return n;
}

static void o_accept(void *ctx, uint64_t src)
{
	struct out *o = ctx;

	mix(o, src ^ 0xacce);
	o->accepts++;
}

static void o_payload_csum(void *ctx, void *pkt, uint16_t csum)
{
	struct out *o = ctx;

	o->sum_pkt = pkt;
	o->sum = csum;
}

struct mode {
	const char *name;
	enum sg_dtype dt;
	enum sg_mode mode;
	unsigned int flags;
	uint32_t chunk_bytes, nelem[3];
	bool multi;
	uint32_t open_slots;  /* an open job with this slot budget (0: a job with its keys) */
	enum sg_dtype kdt[3]; /* dtype any: each key's */
};

static const struct mode modes[] = {
	{"fp32 sync", SG_DTYPE_FP32, SG_MODE_SYNC, 0, 64, {40, 16, 7}, true},
	{"fp32 sync, no fan-out", SG_DTYPE_FP32, SG_MODE_SYNC, 0, 64, {40, 16, 7}, false},
	{"bf16 fp32acc", SG_DTYPE_BF16, SG_MODE_SYNC, 0, 32, {37, 16, 3}, true},
	{"bf16 native", SG_DTYPE_BF16, SG_MODE_SYNC, SG_SUM_F_NATIVE, 32, {37, 16, 3}, true},
	{"int8 odd chunks", SG_DTYPE_INT8, SG_MODE_SYNC, 0, 24, {61, 5, 25}, true},
	{"fp32 async", SG_DTYPE_FP32, SG_MODE_ASYNC, 0, 64, {40, 16, 7}, true},
	{"fp32 deterministic", SG_DTYPE_FP32, SG_MODE_DETERM, 0, 64, {40, 16, 7}, true},
	{"open fp32 sync", SG_DTYPE_FP32, SG_MODE_SYNC, 0, 64, {40, 16, 7}, true, 64},
	{"open any sync", SG_DTYPE_ANY, SG_MODE_SYNC, 0, 32, {37, 16, 61}, true, 64,
	 {SG_DTYPE_FP32, SG_DTYPE_BF16, SG_DTYPE_INT8}},
	{"open any async, full", SG_DTYPE_ANY, SG_MODE_ASYNC, 0, 32, {37, 16, 61}, true, 4,
	 {SG_DTYPE_BF16, SG_DTYPE_FP32, SG_DTYPE_INT8}},
	/* one chunk a key: with 4 buffers, deterministic mode's held pushes NACK most of more */
	{"open any deterministic", SG_DTYPE_ANY, SG_MODE_DETERM, 0, 64, {40, 16, 7}, true, 64,
	 {SG_DTYPE_INT8, SG_DTYPE_BF16, SG_DTYPE_FP32}},
};

/* The dtype of key @p k's elements. */
static enum sg_dtype key_dtype(const struct mode *md, unsigned int k)
{
	return md->dt == SG_DTYPE_ANY ? md->kdt[k] : md->dt;
}

static struct sg_dp_engine *mk_engine(const struct mode *md, struct out *o, bool csum)
{
	struct sg_dp_engine_conf ec = {
		.numa_node = -1, .pool_bufs = 4, .slot_timeout_ns = 100000000, .shadow_hold_ns = 50000000,
		.tx = {.alloc = o_alloc, .send = o_send, .accept = o_accept, .ctx = o,
		       .payload_csum = csum ? o_payload_csum : NULL},
	};
	struct sg_dp_key keys[3];
	struct sg_dp_job_conf jc = {
		.id = 9, .nworkers = N, .token = TOKEN, .dtype = md->dt, .mode = md->mode,
		.sum_flags = md->flags, .chunk_bytes = md->chunk_bytes, .max_inflight = 3,
		.keys = keys, .nkeys = 3, .open = md->open_slots != 0, .slots = md->open_slots,
	};
	struct sg_dp_engine *e;

	if (md->multi) {
		ec.tx.alloc_multi = o_alloc_multi;
		ec.tx.send_multi = o_send_multi;
	}
	memset(o, 0, sizeof(*o));
	o->want_csum = csum;
	for (unsigned int k = 0; k < 3; k++)
		keys[k] = (struct sg_dp_key){.id = 10 + k, .nelem = md->nelem[k]};
	if (jc.open) {
		jc.keys = NULL;
		jc.nkeys = 0;
	}
	e = sg_dp_engine_create(&ec);
	if (e == NULL || sg_dp_engine_add_job(e, &jc) != 0) {
		SG_CHECK(false, "%s: engine set-up failed", md->name);
		sg_dp_engine_destroy(e);
		return NULL;
	}
	return e;
}

/*
 * Random elements, without NaNs: which of two NaN payloads a sum keeps is
 * unspecified (sg_sum.h), and the two engines run different kernels. The top
 * exponent bit of each fp32 or bf16 element (in its last byte) is cleared.
 */
static void fill(enum sg_dtype dt, uint8_t *p, size_t bytes, uint64_t *rng)
{
	size_t esz = sg_dtype_size(dt);

	for (size_t i = 0; i < bytes; i++) {
		p[i] = (uint8_t)splitmix64(rng);
		if (dt != SG_DTYPE_INT8 && i % esz == esz - 1)
			p[i] &= 0xbf;
	}
}

static void run_mode(const struct mode *md, uint64_t seed)
{
	struct out ref_out, out;
	struct sg_dp_engine *ref = mk_engine(md, &ref_out, false);
	struct sg_dp_engine *e = mk_engine(md, &out, true);
	struct sg_dp_stats rs, es;
	uint32_t round[3][8][N] = {{{0}}};
	uint64_t rng = seed, now = 1000, damaged = 0, intact = 0, mismatch = 0;
	static uint8_t pkt[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];

	if (ref == NULL || e == NULL)
		goto out;
	for (unsigned int step = 0; step < 6000; step++) {
		uint64_t r = splitmix64(&rng);
		unsigned int k = (unsigned int)(r % 3), rank = (unsigned int)(r >> 8) % N;
		enum sg_dtype dt = key_dtype(md, k);
		struct push_spec ps = {.job = 9, .token = TOKEN, .dtype = dt,
				       .chunk_bytes = md->chunk_bytes, .key = 10 + k,
				       .key_nelem = md->nelem[k]};
		uint32_t nch = sg_dp_chunk_count(md->nelem[k], dt, md->chunk_bytes);
		uint32_t c = (uint32_t)(r >> 16) % nch;
		/* the round a worker is at: per chunk, or per chunk and rank (async) */
		uint32_t *cur = &round[k][c][md->mode == SG_MODE_ASYNC ? rank : 0], rd = *cur;
		unsigned int what = (unsigned int)(r >> 24) % 16;
		uint8_t payload[SG_DP_MAX_PAYLOAD];
		uint32_t len;
		uint16_t before;
		int rc_ref = 0, rc;
		bool bad;

		if (rd == 0)
			rd = *cur = 1; /* rounds start at 1: round 0 is the one before */
		if (what < 2)
			rd -= 1; /* a retransmit of the last round */
		fill(dt, payload, md->chunk_bytes, &rng); /* a chunk at most: mk_pkt reads no more */
		len = mk_pkt(pkt, &ps, rank, c, rd, what == 4 ? NULL : payload);
		if (what == 5)
			pkt[(r >> 32) % SG_DP_HDR_LEN] ^= 0x10; /* garbage, intact checksum */
		/* the checksum field makes the whole datagram add up to 0xffff */
		before = (uint16_t)~ref_csum(pkt, len);
		bad = (r >> 40) % 5 == 0;
		if (bad && (r >> 43) % 4 == 0)
			before ^= (uint16_t)(1u << ((r >> 45) % 16)); /* in the headers in front */
		else if (bad)
			pkt[(r >> 45) % len] ^= (uint8_t)(1u << ((r >> 60) % 8));
		if (!bad)
			rc_ref = sg_dp_engine_rx(ref, pkt, len, 100 + rank, now);
		/* the round is done (sync), or the worker's push is in (async): move on */
		if (!bad && rc_ref > 0 &&
		    (rc_ref & (md->mode == SG_MODE_ASYNC ? SG_DP_USED_SUMMED
							    : SG_DP_USED_COMPLETED)))
			*cur = rd + 1;
		rc = sg_dp_engine_rx_csum(e, pkt, len, 100 + rank, now, before);
		damaged += bad;
		intact += !bad;
		if (!SG_CHECK(bad ? rc == -EILSEQ : rc == rc_ref,
			      "%s step %u (%s, what %u): %d, reference %d", md->name, step,
			      bad ? "damaged" : "intact", what, rc, rc_ref))
			break;
		if (out.digest != ref_out.digest || out.pkts != ref_out.pkts ||
		    out.accepts != ref_out.accepts) {
			mismatch++;
			SG_CHECK(false, "%s step %u (%s, what %u, rc %d): sent or accepted "
				 "differently (%lu/%lu packets, %lu/%lu accepted)", md->name, step,
				 bad ? "damaged" : "intact", what, rc, (unsigned long)out.pkts,
				 (unsigned long)ref_out.pkts, (unsigned long)out.accepts,
				 (unsigned long)ref_out.accepts);
			break;
		}
		now += (1000 + (r >> 50) % 3000) * 1000; /* 1 to 4 ms */
		if (step % 16 == 0) {
			sg_dp_engine_poll(ref, now);
			sg_dp_engine_poll(e, now);
		}
	}
	sg_dp_engine_stats(ref, &rs);
	sg_dp_engine_stats(e, &es);
	SG_CHECK(memcmp(&rs, &es, sizeof(rs)) == 0, "%s: counters differ (rx %lu / %lu, pushes "
		 "%lu / %lu, results %lu / %lu)", md->name, (unsigned long)es.rx_packets,
		 (unsigned long)rs.rx_packets, (unsigned long)es.rx_pushes,
		 (unsigned long)rs.rx_pushes, (unsigned long)es.results_sent,
		 (unsigned long)rs.results_sent);
	SG_CHECK(rs.rx_pushes > 100 && damaged > 500 &&
		 (rs.rounds_completed > 20 || md->mode == SG_MODE_ASYNC),
		 "%s: the traffic did something (%lu pushes, %lu rounds, %lu damaged)", md->name,
		 (unsigned long)rs.rx_pushes, (unsigned long)rs.rounds_completed,
		 (unsigned long)damaged);
	/* the pool ran dry: NACKs, and kept results reclaimed */
	SG_CHECK(rs.nacks_pool > 0 || md->open_slots == 4, "%s: NACKs too", md->name);
	/* the counters above agree: a damaged push made no key the reference lacks (garbage
	 * with an intact checksum makes more than the three) */
	SG_CHECK(md->open_slots == 0 || rs.keys_created >= 2,
		 "%s: pushes made %lu keys", md->name, (unsigned long)rs.keys_created);
	SG_CHECK(md->open_slots == 0 || md->open_slots >= 7 || rs.drops[SG_DP_DROP_FULL] > 0,
		 "%s: a key refused for the slot budget", md->name);
	SG_CHECK(out.csums > 0 && out.csum_bad == 0,
		 "%s: %lu RESULTs with the engine's checksum, %lu of them wrong or missing",
		 md->name, (unsigned long)out.csums, (unsigned long)out.csum_bad);
	printf("%s: %lu intact, %lu damaged, %lu pushes summed, %lu rounds, %lu NACKs, "
	       "%lu RESULT checksums, %lu keys made\n", md->name, (unsigned long)intact, (unsigned long)damaged,
	       (unsigned long)rs.rx_pushes, (unsigned long)rs.rounds_completed,
	       (unsigned long)rs.nacks_sent, (unsigned long)out.csums,
	       (unsigned long)rs.keys_created);
out:
	sg_dp_engine_destroy(ref);
	sg_dp_engine_destroy(e);
}

int main(void)
{
	if (sg_sum_init() != 0)
		SG_TEST_SKIP_ALL("no summation implementation");
	for (int impl = SG_SUM_IMPL_SCALAR; impl < SG_SUM_IMPL_COUNT; impl++) {
		if (!sg_sum_impl_supported(impl))
			continue;
		SG_CHECK_EQ(sg_sum_set_impl(impl), 0);
		printf("-- %s\n", sg_sum_impl_name(impl));
		for (unsigned int m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
			run_mode(&modes[m], 0x1234 + m);
	}
	return sg_test_finish("dp_engine_csum");
}
