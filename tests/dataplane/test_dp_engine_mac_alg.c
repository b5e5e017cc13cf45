/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A node whose CPU cannot check AES-256-GMAC (no AES-NI or PCLMUL) and a
 * worker whose MACs use it (docs/protocol.md, "Authenticated datagrams",
 * "Algorithm"): the push is answered with ERROR MISMATCH, reason mac_alg,
 * counted as auth_mismatch, and never summed; the same rank's push in
 * Poly1305 (SIGMA_AUTH_MAC=poly1305, the fix the worker is told) is.
 *
 * The test is linked with -Wl,--wrap=crypto_aead_aes256gcm_is_available, so
 * that sg_auth.c sees a CPU without AES-NI while this process, whose real CPU
 * has it, still signs in GMAC (where the real CPU lacks it, it skips).
 */
#include <errno.h>
#include <stdio.h>

#include <sodium.h>

#include "dp_test_util.h"
#include "sg_auth.h"

#define N 2
#define JOB 11
#define TOKEN 0x5eedf00dcafe0001ull
#define CHUNK 1392
#define NELEM 300 /* one chunk */

int __real_crypto_aead_aes256gcm_is_available(void);
int __wrap_crypto_aead_aes256gcm_is_available(void);

/* What sg_auth.c asks: this node's CPU has no AES-NI. */
int __wrap_crypto_aead_aes256gcm_is_available(void)
{
	return 0;
}

static struct cap cap;
static const struct push_spec ps = {.job = JOB, .token = TOKEN, .dtype = SG_DTYPE_FP32,
				    .chunk_bytes = CHUNK, .key = 1, .key_nelem = NELEM};

static float value(uint32_t rank, uint32_t i)
{
	return (float)((rank + 1) * 100 + i % 5);
}

/* Rank @p rank's push of round 0, its values raised by @p bias, signed by @p s. */
static uint32_t mk_push(uint8_t *buf, uint32_t rank, float bias, struct sg_auth_signer *s)
{
	float v[NELEM];
	uint32_t len;

	for (uint32_t i = 0; i < NELEM; i++)
		v[i] = value(rank, i) + bias;
	len = mk_pkt(buf, &ps, rank, 0, 0, v);
	buf[6] |= SG_DP_F_MAC;
	sg_auth_sign(s, buf, len);
	return len + SG_AUTH_TRAILER_BYTES;
}

static uint64_t drops(struct sg_dp_engine *e, enum sg_dp_drop why)
{
	struct sg_dp_stats st;

	sg_dp_engine_stats(e, &st);
	return st.drops[why];
}

int main(void)
{
	static uint8_t buf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64];
	struct sg_dp_engine_conf ec = {.pool_bufs = 16, .max_payload = 1424};
	struct sg_dp_key key = {.id = 1, .nelem = NELEM};
	uint8_t K[SG_AUTH_KEY_BYTES], rk[SG_AUTH_KEY_BYTES], nk[N][SG_AUTH_KEY_BYTES];
	struct sg_dp_job_conf jc = {.id = JOB, .nworkers = N, .token = TOKEN,
				    .dtype = SG_DTYPE_FP32, .chunk_bytes = CHUNK, .keys = &key,
				    .nkeys = 1, .auth_key = K};
	struct sg_auth_signer gmac, poly[N];
	struct sg_dp_engine *e;
	uint32_t key_id, len;
	unsigned int results = 0;

	if (sodium_init() < 0)
		SG_TEST_SKIP_ALL("libsodium does not start");
	if (!__real_crypto_aead_aes256gcm_is_available())
		SG_TEST_SKIP_ALL("this CPU has no AES-NI: it cannot sign the GMAC pushes");
	sg_auth_job_key(K);
	key_id = sg_auth_key_id(K);
	for (uint32_t r = 0; r < N; r++) {
		sg_auth_rank_key(K, (uint16_t)r, SG_AUTH_RANK, rk);
		sg_auth_signer_init(&poly[r], rk, key_id);
		SG_CHECK_EQ(poly[r].alg, SG_AUTH_POLY1305); /* the wrap holds: no GMAC here */
		sg_auth_rank_key(K, (uint16_t)r, SG_AUTH_NODE, nk[r]);
	}
	/* rank 0 as on a worker whose CPU has AES-NI: its own key, in GMAC */
	sg_auth_rank_key(K, 0, SG_AUTH_RANK, rk);
	sg_auth_signer_init(&gmac, rk, key_id);
	gmac.alg = SG_AUTH_GMAC;

	/* sg_auth itself: a genuine GMAC datagram is one it cannot check, not a forgery */
	len = mk_push(buf, 0, 0, &gmac);
	SG_CHECK_EQ(sg_auth_verify(rk, key_id, buf, len, NULL), SG_AUTH_ALG);

	e = cap_engine(&cap, &ec);
	if (!SG_CHECK(e != NULL, "engine"))
		return sg_test_finish("dp_engine_mac_alg");
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);

	/* rank 0's GMAC push, its values off by 1000: refused, answered, not summed */
	len = mk_push(buf, 0, 1000, &gmac);
	SG_CHECK_EQ(sg_dp_engine_rx(e, buf, len, 100, 1000), -EBADMSG);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_MISMATCH), 1);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_BAD), 0);
	if (SG_CHECK_EQ(cap.n, 1)) {
		const struct cap_pkt *p = &cap.pkts[0];
		const struct sg_dp_mismatch *mm = p->m.payload;

		SG_CHECK(p->dest == 100 && p->m.type == SG_DP_T_ERROR &&
			 p->m.code == SG_DP_C_MISMATCH && p->m.rank == 0,
			 "ERROR MISMATCH to rank 0's sender");
		SG_CHECK_EQ(mm->what, SG_DP_MM_MAC_ALG);
		/* MACed in Poly1305 under the node's key for rank 0: a worker can check it */
		SG_CHECK(p->m.flags & SG_DP_F_MAC, "the refusal carries a MAC");
		SG_CHECK_EQ(p->buf[p->len - SG_AUTH_TRAILER_BYTES + 12], SG_AUTH_POLY1305);
		SG_CHECK_EQ(sg_auth_verify(nk[0], key_id, p->buf, p->len, NULL), SG_AUTH_OK);
	}

	/* rank 1 in Poly1305, then rank 0 again in Poly1305 (the fix): the exact sum */
	len = mk_push(buf, 1, 0, &poly[1]);
	SG_CHECK(sg_dp_engine_rx(e, buf, len, 101, 1000) > 0, "rank 1's push");
	len = mk_push(buf, 0, 0, &poly[0]);
	SG_CHECK(sg_dp_engine_rx(e, buf, len, 100, 1000) > 0, "rank 0's Poly1305 push");
	SG_CHECK_EQ(drops(e, SG_DP_DROP_DUPLICATE), 0);
	for (unsigned int i = 1; i < cap.n; i++) {
		const struct cap_pkt *p = &cap.pkts[i];
		const float *s = (const float *)p->m.payload;
		bool exact = true;

		if (p->m.type != SG_DP_T_RESULT)
			continue;
		results++;
		SG_CHECK_EQ(sg_auth_verify(nk[p->m.rank], key_id, p->buf, p->len, NULL),
			    SG_AUTH_OK);
		for (uint32_t k = 0; k < NELEM; k++)
			exact &= s[k] == value(0, k) + value(1, k);
		SG_CHECK(exact, "rank %u's RESULT: the sum of the Poly1305 pushes only", p->m.rank);
	}
	SG_CHECK_EQ(results, N);
	SG_CHECK_EQ(drops(e, SG_DP_DROP_AUTH_MISMATCH), 1);
	sg_dp_engine_destroy(e);
	sodium_memzero(K, sizeof(K));
	return sg_test_finish("dp_engine_mac_alg");
}
