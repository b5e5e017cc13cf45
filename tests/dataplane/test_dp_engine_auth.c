/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine with auth = mac (sg_dp_job_conf.auth_key; docs/protocol.md,
 * "Authenticated datagrams"). Workers here sign with their own rank keys
 * (sg_auth.h) and check every RESULT with the node's key for their rank. An
 * attacker that has seen the job's id and token, but holds no key, pushes
 * forged datagrams; a rank pushes under another rank's number; pushes are cut
 * short, made with another job's key, replayed byte for byte; unsigned
 * pushes go to the job with auth and signed ones to a job without. Each is
 * dropped under its own reason and never summed: every RESULT must be the
 * exact sum of the genuine pushes (small integers in fp32, computed here),
 * also under loss, duplicates and reordering, and carry a MAC that verifies
 * under the receiving rank's node key only, in the rank's own algorithm
 * (rank 1 signs with Poly1305, the others with AES-256-GMAC where this CPU
 * has it: one job, both algorithms).
 */
#include <errno.h>
#include <stdio.h>

#include <sodium.h>

#include "dp_test_util.h"
#include "sg_auth.h"

#define N 3
#define JOB 7
#define TOKEN 0x0123456789abcdefull
#define CHUNK 1392 /* 1424 less the trailer */
#define NELEM 1000 /* 3 chunks: 348, 348, 304 elements */

static uint8_t K[SG_AUTH_KEY_BYTES];
static uint32_t key_id;
static struct sg_auth_signer signer[N];		/* each rank's, for its pushes */
static uint8_t node_key[N][SG_AUTH_KEY_BYTES];	/* each rank's check of the node's replies */
static struct sg_auth_window node_win[N];
static const struct push_spec ps = {.job = JOB, .token = TOKEN, .dtype = SG_DTYPE_FP32,
				    .chunk_bytes = CHUNK, .key = 1, .key_nelem = NELEM};
static struct cap cap;

static float value(uint32_t rank, uint32_t round, uint32_t i)
{
	return (float)((rank + 1) * 1000 + round * 10 + i % 7);
}

/* Rank @p rank's genuine push of @p chunk, round @p round, signed by @p by (its own: @p rank). */
static uint32_t mk_push(uint8_t *buf, uint32_t rank, uint32_t chunk, uint32_t round,
			struct sg_auth_signer *by)
{
	float v[CHUNK / 4];
	uint32_t len;

	for (uint32_t i = 0; i < CHUNK / 4; i++)
		v[i] = value(rank, round, chunk * (CHUNK / 4) + i);
	len = mk_pkt(buf, &ps, rank, chunk, round, v);
	buf[6] |= SG_DP_F_MAC;
	sg_auth_sign(by, buf, len);
	return len + SG_AUTH_TRAILER_BYTES;
}

static int rx(struct sg_dp_engine *e, const uint8_t *buf, uint32_t len, uint32_t rank)
{
	return sg_dp_engine_rx(e, buf, len, 100 + rank, 1000);
}

static uint64_t drops(struct sg_dp_engine *e, enum sg_dp_drop why)
{
	struct sg_dp_stats st;

	sg_dp_engine_stats(e, &st);
	return st.drops[why];
}

/*
 * Check the RESULTs captured from @p from on: each verifies under its rank's
 * node key (and no other rank's), and is the exact sum of round @p round.
 * @return how many RESULTs of that round each rank got, as a bit per (rank, chunk).
 */
static uint32_t check_results(unsigned int from, uint32_t round)
{
	uint32_t got = 0;

	for (unsigned int i = from; i < cap.n; i++) {
		struct cap_pkt *p = &cap.pkts[i];
		uint32_t r = p->m.rank, first;
		const float *s;
		bool exact = true;

		if (p->m.type != SG_DP_T_RESULT || p->m.round != round)
			continue;
		SG_CHECK(p->m.flags & SG_DP_F_MAC, "a RESULT has a MAC");
		SG_CHECK_EQ(sg_auth_verify(node_key[(r + 1) % N], key_id, p->buf, p->len, NULL),
			    SG_AUTH_BAD);
		SG_CHECK_EQ(sg_auth_verify(node_key[r], key_id, p->buf, p->len, &node_win[r]),
			    SG_AUTH_OK);
		SG_CHECK_EQ(p->buf[p->len - SG_AUTH_TRAILER_BYTES + 12], signer[r].alg);
		s = (const float *)p->m.payload;
		first = p->m.chunk * (CHUNK / 4);
		for (uint32_t k = 0; k < p->m.nelem; k++) {
			float want = 0;

			for (uint32_t w = 0; w < N; w++)
				want += value(w, round, first + k);
			exact &= s[k] == want;
		}
		SG_CHECK(exact, "round %u chunk %u to rank %u: the exact sum", round, p->m.chunk, r);
		got |= 1u << (r * 3 + p->m.chunk);
	}
	return got;
}

static void test_genuine_and_forged(struct sg_dp_engine *e)
{
	static uint8_t buf[4][SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64];
	struct sg_auth_signer thief, other_job;
	uint8_t tk[32], ok2[32];
	unsigned int from = cap.n;
	uint32_t len;

	/* an attacker with the token and a key of its own: forged pushes of every rank first */
	randombytes_buf(tk, sizeof(tk));
	sg_auth_signer_init(&thief, tk, key_id); /* even with the job's key id */
	for (uint32_t r = 0; r < N; r++) {
		len = mk_push(buf[0], r, 0, 0, &thief);
		SG_CHECK_EQ(rx(e, buf[0], len, r), -EBADMSG);
	}
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_BAD), N);
	/* another job's key: told apart */
	sg_auth_rank_key(tk, 0, SG_AUTH_RANK, ok2);
	sg_auth_signer_init(&other_job, ok2, sg_auth_key_id(tk));
	len = mk_push(buf[0], 0, 0, 0, &other_job);
	SG_CHECK_EQ(rx(e, buf[0], len, 0), -EBADMSG);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_JOB), 1);
	/* rank 1 pushing as rank 0, with its own key */
	len = mk_push(buf[0], 0, 0, 0, &signer[1]);
	SG_CHECK_EQ(rx(e, buf[0], len, 1), -EBADMSG);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_BAD), N + 1);
	/* a genuine push cut short, by 1 to 32 bytes: a truncated MAC */
	len = mk_push(buf[0], 2, 1, 0, &signer[2]);
	for (uint32_t cut = 1; cut <= SG_AUTH_TRAILER_BYTES; cut++)
		SG_CHECK(rx(e, buf[0], len - cut, 2) == -EBADMSG, "cut %u", cut);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_SHORT), SG_AUTH_TRAILER_BYTES);
	/* one altered element */
	buf[0][SG_DP_HDR_LEN + 4] ^= 0x40;
	SG_CHECK_EQ(rx(e, buf[0], len, 2), -EBADMSG);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_BAD), N + 2);
	SG_CHECK(cap.n == from, "nothing forged was answered (%u sent)", cap.n - from);
	/* none of it was summed: the genuine round 0 is exact */
	for (uint32_t c = 0; c < 3; c++)
		for (uint32_t r = 0; r < N; r++) {
			len = mk_push(buf[1], r, c, 0, &signer[r]);
			SG_CHECK(rx(e, buf[1], len, r) > 0, "genuine push r%u c%u", r, c);
		}
	SG_CHECK_EQ(check_results(from, 0), 0777u);
	/* byte-for-byte replays of an old round's genuine push, after the round ended */
	SG_CHECK_EQ(rx(e, buf[1], len, N - 1), -EBADMSG);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_REPLAY), 1);
}

/* Rounds 1..R under loss, duplicates (resent and replayed) and reordering. */
static void test_faults(struct sg_dp_engine *e)
{
	static uint8_t pkt[N * 3][SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64];
	uint32_t plen[N * 3];
	uint64_t seed = 42, replays0 = drops(e, SG_DP_DROP_AUTH_REPLAY), replays = 0;

	for (uint32_t round = 1; round <= 20; round++) {
		unsigned int from = cap.n, order[N * 3], left = N * 3, guard = 0;

		for (unsigned int i = 0; i < N * 3; i++)
			order[i] = i;
		while (left > 0 && guard++ < 1000) {
			unsigned int pick = (unsigned int)(splitmix64(&seed) % left), x = order[pick];
			uint32_t r = x / 3, c = x % 3, dice = (uint32_t)(splitmix64(&seed) % 10);

			/* every send is new (a new seq): a retransmit after a loss, or a resend */
			plen[x] = mk_push(pkt[x], r, c, round, &signer[r]);
			if (dice < 2)
				continue; /* lost: sent again later */
			SG_CHECK(rx(e, pkt[x], plen[x], r) > 0, "r%u c%u round %u", r, c, round);
			if (dice == 2) {
				/* the same datagram again: a replay */
				SG_CHECK_EQ(rx(e, pkt[x], plen[x], r), -EBADMSG);
				replays++;
			} else if (dice == 3) {
				/* resent by its rank: a duplicate of an honest push */
				plen[x] = mk_push(pkt[x], r, c, round, &signer[r]);
				rx(e, pkt[x], plen[x], r);
			}
			order[pick] = order[--left];
		}
		SG_CHECK(check_results(from, round) == 0777u, "round %u: every rank got every chunk",
			 round);
	}
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_REPLAY) - replays0, replays);
	SG_CHECK(replays > 0, "some replays: %llu", (unsigned long long)replays);
}

/* Auth on at the node and off at a worker, and the reverse: ERROR MISMATCH at once. */
static void test_mismatch(struct sg_dp_engine *e)
{
	static uint8_t buf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64];
	struct push_spec plain = ps;
	struct sg_dp_job_conf jc = {.id = JOB + 1, .nworkers = N, .token = TOKEN,
				    .dtype = SG_DTYPE_FP32, .chunk_bytes = CHUNK};
	struct sg_dp_key key = {.id = 1, .nelem = NELEM};
	float v[CHUNK / 4] = {0};
	unsigned int from = cap.n;
	uint32_t len;

	len = mk_pkt(buf, &ps, 0, 0, 21, v); /* no MAC, to the job with auth */
	SG_CHECK_EQ(rx(e, buf, len, 0), -EBADMSG);
	jc.keys = &key;
	jc.nkeys = 1;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	plain.job = JOB + 1;
	len = mk_pkt(buf, &plain, 0, 0, 0, v);
	buf[6] |= SG_DP_F_MAC;
	sg_auth_sign(&signer[0], buf, len); /* a MAC, to a job without auth */
	SG_CHECK_EQ(rx(e, buf, len + SG_AUTH_TRAILER_BYTES, 0), -EBADMSG);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_MISMATCH), 2);
	SG_CHECK_EQ(cap.n - from, 2);
	for (unsigned int i = from; i < cap.n; i++) {
		const struct sg_dp_mismatch *mm = cap.pkts[i].m.payload;

		SG_CHECK(cap.pkts[i].m.type == SG_DP_T_ERROR &&
			 cap.pkts[i].m.code == SG_DP_C_MISMATCH && mm->what == SG_DP_MM_AUTH &&
			 !(cap.pkts[i].m.flags & SG_DP_F_MAC), "ERROR MISMATCH (auth), without a MAC");
	}
	/* a job with auth whose chunks leave no room for the trailer is refused */
	jc.id = JOB + 2;
	jc.chunk_bytes = 1424;
	jc.auth_key = K;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), -EINVAL);
}

int main(void)
{
	struct sg_dp_engine_conf ec = {.pool_bufs = 64, .max_payload = 1424};
	struct sg_dp_key key = {.id = 1, .nelem = NELEM};
	struct sg_dp_job_conf jc = {.id = JOB, .nworkers = N, .token = TOKEN,
				    .dtype = SG_DTYPE_FP32, .chunk_bytes = CHUNK, .keys = &key,
				    .nkeys = 1, .auth_key = K};
	struct sg_dp_engine *e;

	if (sodium_init() < 0)
		SG_TEST_SKIP_ALL("libsodium does not start");
	sg_auth_job_key(K);
	key_id = sg_auth_key_id(K);
	for (uint32_t r = 0; r < N; r++) {
		uint8_t rk[SG_AUTH_KEY_BYTES];

		sg_auth_rank_key(K, (uint16_t)r, SG_AUTH_RANK, rk);
		sg_auth_signer_init(&signer[r], rk, key_id);
		sg_auth_rank_key(K, (uint16_t)r, SG_AUTH_NODE, node_key[r]);
	}
	signer[1].alg = SG_AUTH_POLY1305;
	SG_CHECK_EQ(signer[0].alg, crypto_aead_aes256gcm_is_available() ? SG_AUTH_GMAC :
		    SG_AUTH_POLY1305);
	e = cap_engine(&cap, &ec);
	if (!SG_CHECK(e != NULL, "engine"))
		return sg_test_finish("dp_engine_auth");
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	test_genuine_and_forged(e);
	test_faults(e);
	test_mismatch(e);
	sg_dp_engine_destroy(e);
	return sg_test_finish("dp_engine_auth");
}
