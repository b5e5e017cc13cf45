/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_auth: the rank keys against BLAKE2b values computed by Python's hashlib
 * (an independent implementation), the MAC against libsodium's one-shot
 * Poly1305 and one-shot AES-256-GCM over a one-time key made apart (both
 * algorithms, one datagram in one piece or two), the node's replies in the
 * algorithm of the rank's last authentic datagram, every bit flipped in a datagram
 * refused, another rank's and another job's keys refused by their own
 * verdicts, truncated trailers, and the replay window (duplicates, reordering
 * inside it, a datagram older than it, a jump forward).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sg_auth.h"
#include "sg_test.h"

static void hex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned int b;

		sscanf(s + 2 * i, "%2x", &b);
		out[i] = (uint8_t)b;
	}
}

static void test_keys(const uint8_t K[32])
{
	static const struct {
		enum sg_auth_dir dir;
		uint16_t rank;
		const char *want;
	} v[] = {
		{SG_AUTH_RANK, 0, "84c262c6d2669b63d50ad812219782e0706c965ca63c6add5e7e28d4850e96ed"},
		{SG_AUTH_RANK, 5, "578f19a47afc2c9b53e654c63b30597169e7cb528eb7593981c4a77e93a31dcd"},
		{SG_AUTH_NODE, 5, "b42f13cc24070bbcf7f54787b1bd8ba2fc2834970ce54d1f5fbc17a6ea4164b0"},
	};
	uint8_t got[32], want[32];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		hex(v[i].want, want, 32);
		SG_CHECK_EQ(sg_auth_rank_key(K, v[i].rank, v[i].dir, got), 0);
		SG_CHECK(memcmp(got, want, 32) == 0, "rank key %zu as hashlib's", i);
	}
	SG_CHECK_EQ(sg_auth_key_id(K), 0xcb2f5160u);
	SG_CHECK_EQ(sg_auth_rank_key(K, 0, (enum sg_auth_dir)2, got), -EINVAL);
}

/* A datagram: 48 bytes of "header", @p n of payload, then room for the trailer. */
static size_t fill(uint8_t *buf, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < 48 + n; i++)
		buf[i] = (uint8_t)(seed + i * 7);
	return 48 + n;
}

/* The reference MAC of datagram @p buf (@p len bytes, trailer's first half after it). */
static void ref_mac(const uint8_t rk[32], uint8_t alg, const uint8_t *buf, size_t len,
		    uint8_t ref[16])
{
	uint8_t otk[32], zero[32] = {0}, n8[8], whole[1600], ct[64 + 16];
	static const uint8_t npub[12];

	memcpy(n8, buf + len, 8);
	if (alg == SG_AUTH_POLY1305) {
		/* one-time key = ChaCha20(rank key, nonce = seq) XOR zeros */
		crypto_stream_chacha20_xor(otk, zero, 32, n8, rk);
		memcpy(whole, buf, len + 16);
		crypto_onetimeauth(ref, whole, len + 16, otk);
		return;
	}
	/* GMAC: nonce seq | 2^63; message the 48-byte head and the trailer's half */
	n8[0] |= 0x80;
	crypto_stream_chacha20_xor(otk, zero, 32, n8, rk);
	memcpy(whole, buf, 48);
	memcpy(whole + 48, buf + len, 16);
	crypto_aead_aes256gcm_encrypt_detached(ct, ref, NULL, whole, 64, buf + 48, len - 48, NULL,
					       npub, otk);
}

static void test_mac(const uint8_t K[32], uint8_t alg)
{
	uint8_t rk[32], rk1[32], other[32], ok1[32], buf[1600], ref[16], tr[32];
	struct sg_auth_signer s;
	uint32_t id = sg_auth_key_id(K);
	size_t len = fill(buf, 1424, 3);
	uint64_t seq;

	sg_auth_rank_key(K, 3, SG_AUTH_RANK, rk);
	sg_auth_rank_key(K, 4, SG_AUTH_RANK, rk1);
	SG_CHECK_EQ(sg_auth_signer_init(&s, rk, id), 0);
	SG_CHECK_EQ(s.alg, crypto_aead_aes256gcm_is_available() ? SG_AUTH_GMAC : SG_AUTH_POLY1305);
	setenv("SIGMA_AUTH_MAC", "poly1305", 1);
	SG_CHECK_EQ(sg_auth_signer_init(&s, rk, id), 0);
	SG_CHECK_EQ(s.alg, SG_AUTH_POLY1305);
	unsetenv("SIGMA_AUTH_MAC");
	s.alg = alg;
	seq = s.seq;
	SG_CHECK(seq < (1ull << 62), "the first seq leaves room: %llx", (unsigned long long)seq);
	sg_auth_sign(&s, buf, len);
	SG_CHECK_EQ(s.seq, seq + 1);
	SG_CHECK_EQ(buf[len + 12], alg);
	ref_mac(rk, alg, buf, len, ref);
	SG_CHECK(memcmp(ref, buf + len + 16, 16) == 0, "the MAC (alg %u) is that of header, "
		 "payload and trailer's first half under the one-time key", alg);
	/* in two pieces (a worker's header apart from its payload): the same trailer */
	s.seq--;
	sg_auth_sign_parts(&s, buf, 48, buf + 48, len - 48, tr);
	SG_CHECK(memcmp(tr, buf + len, 32) == 0, "sign_parts == sign (alg %u)", alg);
	s.seq--;
	sg_auth_sign_parts(&s, buf, 20, buf + 20, len - 20, tr);
	SG_CHECK(memcmp(tr, buf + len, 32) == 0, "sign_parts, a short head (alg %u)", alg);
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, len + 32, NULL), SG_AUTH_OK);
	/* every bit of the datagram matters */
	unsigned int refused = 0, total = 0;

	for (size_t i = 0; i < len + 32; i++)
		for (int b = 0; b < 8; b++) {
			enum sg_auth_verdict v;

			buf[i] ^= (uint8_t)(1u << b);
			v = sg_auth_verify(rk, id, buf, len + 32, NULL);
			buf[i] ^= (uint8_t)(1u << b);
			total++;
			refused += v == (i >= len + 8 && i < len + 12 ? SG_AUTH_OTHER_JOB : SG_AUTH_BAD);
		}
	SG_CHECK_EQ(refused, total);
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, len + 32, NULL), SG_AUTH_OK);
	/* another rank's key: a rank cannot pass for another */
	SG_CHECK_EQ(sg_auth_verify(rk1, id, buf, len + 32, NULL), SG_AUTH_BAD);
	/* the node's key for rank 3 is not rank 3's */
	sg_auth_rank_key(K, 3, SG_AUTH_NODE, ok1);
	SG_CHECK_EQ(sg_auth_verify(ok1, id, buf, len + 32, NULL), SG_AUTH_BAD);
	/* another job's key: told apart by the key id */
	memcpy(other, K, 32);
	other[0] ^= 1;
	SG_CHECK(sg_auth_key_id(other) != id, "key ids differ");
	SG_CHECK_EQ(sg_auth_verify(rk, sg_auth_key_id(other), buf, len + 32, NULL),
		    SG_AUTH_OTHER_JOB);
	/* truncated: less than a trailer, or a trailer cut (its MAC no longer lines up) */
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, 31, NULL), SG_AUTH_SHORT);
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, 0, NULL), SG_AUTH_SHORT);
	SG_CHECK(sg_auth_verify(rk, id, buf, len + 31, NULL) != SG_AUTH_OK, "a byte cut off");
	/* an unknown algorithm, a reserved byte set: not a MAC of ours */
	buf[len + 12] = 2;
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, len + 32, NULL), SG_AUTH_BAD);
	buf[len + 12] = alg;
	buf[len + 15] = 1;
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, len + 32, NULL), SG_AUTH_BAD);
	buf[len + 15] = 0;
	/* an empty payload (a PULL) signs and verifies too; and shorter than GMAC's head */
	len = fill(buf, 0, 9);
	sg_auth_sign(&s, buf, len);
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, len + 32, NULL), SG_AUTH_OK);
	sg_auth_sign(&s, buf, 20);
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, 20 + 32, NULL), SG_AUTH_OK);
	buf[3] ^= 4;
	SG_CHECK_EQ(sg_auth_verify(rk, id, buf, 20 + 32, NULL), SG_AUTH_BAD);
	SG_CHECK_EQ(strcmp(sg_auth_verdict_name(SG_AUTH_REPLAY), "auth_replay"), 0);
}

static void test_window(const uint8_t K[32])
{
	enum { M = 3000 };
	static uint8_t d[M][48 + 32];
	struct sg_auth_window w;
	struct sg_auth_signer s;
	uint32_t id = sg_auth_key_id(K);
	uint8_t rk[32];
	unsigned int ok = 0;

	memset(&w, 0, sizeof(w));
	sg_auth_rank_key(K, 0, SG_AUTH_RANK, rk);
	sg_auth_signer_init(&s, rk, id);
	for (int i = 0; i < M; i++) {
		fill(d[i], 0, (uint8_t)i);
		sg_auth_sign(&s, d[i], 48);
	}
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[0], 80, &w), SG_AUTH_OK);
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[0], 80, &w), SG_AUTH_REPLAY);
	/* reordered inside the window: 1..999 taken backwards after 1000 */
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[1000], 80, &w), SG_AUTH_OK);
	for (int i = 999; i >= 1; i--)
		ok += sg_auth_verify(rk, id, d[i], 80, &w) == SG_AUTH_OK;
	SG_CHECK_EQ(ok, 999);
	ok = 0;
	for (int i = 0; i <= 1000; i++)
		ok += sg_auth_verify(rk, id, d[i], 80, &w) == SG_AUTH_REPLAY;
	SG_CHECK_EQ(ok, 1001);
	/* a jump forward past the window: what is older than it is refused */
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[2999], 80, &w), SG_AUTH_OK);
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[1500], 80, &w), SG_AUTH_REPLAY);
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[2999 - SG_AUTH_WINDOW + 1], 80, &w), SG_AUTH_OK);
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[2998], 80, &w), SG_AUTH_OK);
	/* a forged datagram takes no place in the window */
	d[2997][5] ^= 1;
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[2997], 80, &w), SG_AUTH_BAD);
	d[2997][5] ^= 1;
	SG_CHECK_EQ(sg_auth_verify(rk, id, d[2997], 80, &w), SG_AUTH_OK);
}

/*
 * The node answers each rank in the algorithm of the rank's last authentic
 * datagram (Poly1305 before any), and a forged one does not change it.
 */
static void test_job_alg(const uint8_t K[32])
{
	struct sg_auth_job *a = sg_auth_job_create(K, 2);
	struct sg_auth_signer s;
	uint32_t id = sg_auth_key_id(K);
	uint8_t rk[32], nk[32], d[48 + 64 + 32], r[48 + 32];

	SG_CHECK(a != NULL, "job");
	sg_auth_rank_key(K, 1, SG_AUTH_RANK, rk);
	sg_auth_rank_key(K, 1, SG_AUTH_NODE, nk);
	sg_auth_signer_init(&s, rk, id);
	s.alg = SG_AUTH_GMAC;
	fill(r, 0, 1);
	sg_auth_job_sign(a, 1, r, 48);
	SG_CHECK_EQ(r[48 + 12], SG_AUTH_POLY1305);
	SG_CHECK_EQ(sg_auth_verify(nk, id, r, sizeof(r), NULL), SG_AUTH_OK);
	fill(d, 64, 2);
	sg_auth_sign(&s, d, 48 + 64);
	d[60] ^= 1;
	SG_CHECK_EQ(sg_auth_job_check(a, 1, d, sizeof(d)), SG_AUTH_BAD);
	sg_auth_job_sign(a, 1, r, 48);
	SG_CHECK_EQ(r[48 + 12], SG_AUTH_POLY1305); /* a forgery changes nothing */
	d[60] ^= 1;
	SG_CHECK_EQ(sg_auth_job_check(a, 1, d, sizeof(d)), SG_AUTH_OK);
	SG_CHECK_EQ(sg_auth_job_check(a, 1, d, sizeof(d)), SG_AUTH_REPLAY);
	sg_auth_job_sign(a, 1, r, 48);
	SG_CHECK_EQ(r[48 + 12], SG_AUTH_GMAC);
	ref_mac(nk, SG_AUTH_GMAC, r, 48, d);
	SG_CHECK(memcmp(d, r + 48 + 16, 16) == 0, "the reply's GMAC as the reference's");
	SG_CHECK_EQ(sg_auth_verify(nk, id, r, sizeof(r), NULL), SG_AUTH_OK);
	/* rank 0 has shown nothing: still Poly1305 */
	sg_auth_job_sign(a, 0, r, 48);
	SG_CHECK_EQ(r[48 + 12], SG_AUTH_POLY1305);
	/* and back: a Poly1305 datagram from rank 1 */
	s.alg = SG_AUTH_POLY1305;
	fill(d, 64, 3);
	sg_auth_sign(&s, d, 48 + 64);
	SG_CHECK_EQ(sg_auth_job_check(a, 1, d, sizeof(d)), SG_AUTH_OK);
	sg_auth_job_sign(a, 1, r, 48);
	SG_CHECK_EQ(r[48 + 12], SG_AUTH_POLY1305);
	SG_CHECK_EQ(strcmp(sg_auth_verdict_name(SG_AUTH_ALG), "auth_alg"), 0);
	sg_auth_job_destroy(a);
}

int main(void)
{
	uint8_t K[32], k2[32], k3[32];

	for (int i = 0; i < 32; i++)
		K[i] = (uint8_t)i;
	test_keys(K);
	test_mac(K, SG_AUTH_POLY1305);
	if (crypto_aead_aes256gcm_is_available()) {
		test_mac(K, SG_AUTH_GMAC);
		test_job_alg(K);
	} else {
		printf("no AES-NI or PCLMUL here: GMAC not tested\n");
	}
	test_window(K);
	SG_CHECK(sg_auth_job_key(k2) == 0 && sg_auth_job_key(k3) == 0 && memcmp(k2, k3, 32) != 0,
		 "job keys are random");
	return sg_test_finish("auth");
}
