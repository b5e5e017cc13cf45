/* SPDX-License-Identifier: BSD-3-Clause */
/* Authenticated datagrams: keys, the trailer, the checks (sg_auth.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sg_auth.h"

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool sodium_ready(void)
{
	/* idempotent and thread-safe; -1 only when libsodium cannot start */
	return sodium_init() >= 0;
}

int sg_auth_job_key(uint8_t key[SG_AUTH_KEY_BYTES])
{
	if (!sodium_ready())
		return -ENOMEM;
	randombytes_buf(key, SG_AUTH_KEY_BYTES);
	return 0;
}

int sg_auth_job_key_from_token(const char *token_hex, uint8_t key[SG_AUTH_KEY_BYTES])
{
	static const char ctx[] = "sigma-mac-v1/job";
	uint8_t tok[32];
	size_t n = 0;

	if (token_hex == NULL || strlen(token_hex) != 64 || !sodium_ready() ||
	    sodium_hex2bin(tok, sizeof(tok), token_hex, 64, NULL, &n, NULL) != 0 || n != 32)
		return -EINVAL;
	crypto_generichash(key, SG_AUTH_KEY_BYTES, (const uint8_t *)ctx, sizeof(ctx) - 1, tok,
			   sizeof(tok));
	sodium_memzero(tok, sizeof(tok));
	return 0;
}

uint32_t sg_auth_key_id(const uint8_t key[SG_AUTH_KEY_BYTES])
{
	uint8_t h[32];

	crypto_generichash(h, sizeof(h), key, SG_AUTH_KEY_BYTES, NULL, 0);
	return get_be32(h);
}

int sg_auth_rank_key(const uint8_t key[SG_AUTH_KEY_BYTES], uint16_t rank, enum sg_auth_dir dir,
		     uint8_t out[SG_AUTH_KEY_BYTES])
{
	uint8_t msg[20];

	if ((unsigned int)dir > SG_AUTH_NODE)
		return -EINVAL;
	memcpy(msg, dir == SG_AUTH_RANK ? "sigma-mac-v1/rank/" : "sigma-mac-v1/node/", 18);
	msg[18] = (uint8_t)(rank >> 8);
	msg[19] = (uint8_t)rank;
	crypto_generichash(out, SG_AUTH_KEY_BYTES, msg, sizeof(msg), key, SG_AUTH_KEY_BYTES);
	return 0;
}

static bool gmac_ok(void)
{
	static int ok = -1; /* racing first calls store the same value */
	int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);

	if (v < 0) {
		/* sodium_init() also picks the SSE2 Poly1305 over the portable one */
		v = sodium_ready() && crypto_aead_aes256gcm_is_available();
		__atomic_store_n(&ok, v, __ATOMIC_RELAXED);
	}
	return v > 0;
}

/* The algorithm a signer starts with: GMAC where this CPU has AES-NI and PCLMUL. */
static uint8_t default_alg(void)
{
	const char *e = getenv("SIGMA_AUTH_MAC");

	if (e != NULL && strcmp(e, "poly1305") == 0)
		return SG_AUTH_POLY1305;
	return gmac_ok() ? SG_AUTH_GMAC : SG_AUTH_POLY1305;
}

int sg_auth_signer_init(struct sg_auth_signer *s, const uint8_t key[SG_AUTH_KEY_BYTES],
			uint32_t key_id)
{
	if (!sodium_ready())
		return -ENOMEM;
	memcpy(s->key, key, SG_AUTH_KEY_BYTES);
	s->key_id = key_id;
	s->alg = default_alg();
	/* below 2^62: no wrap in any sender's life, so a receiver's window never sees one */
	s->seq = randombytes_random() | (uint64_t)(randombytes_random() & 0x3fffffffu) << 32;
	return 0;
}

/*
 * Poly1305: the MAC of @p a (@p alen bytes), @p b (@p blen) and the trailer's
 * first 16 bytes @p tr, into @p mac.
 */
static void poly_of(const uint8_t key[SG_AUTH_KEY_BYTES], const void *a, size_t alen,
		    const void *b, size_t blen, const uint8_t tr[16], uint8_t mac[SG_AUTH_MAC_BYTES])
{
	uint8_t otk[crypto_onetimeauth_KEYBYTES];
	crypto_onetimeauth_state st;

	/* the datagram's one-time key: ChaCha20's keystream under the rank key, nonce seq */
	crypto_stream_chacha20(otk, sizeof(otk), tr, key);
	crypto_onetimeauth_init(&st, otk);
	crypto_onetimeauth_update(&st, a, alen);
	if (blen != 0)
		crypto_onetimeauth_update(&st, b, blen);
	crypto_onetimeauth_update(&st, tr, 16);
	crypto_onetimeauth_final(&st, mac);
	sodium_memzero(otk, sizeof(otk));
}

/*
 * AES-256-GMAC, as poly_of(): AES-256-GCM under a one-time key (ChaCha20's
 * keystream under the rank key, nonce seq with its top bit set, which no
 * Poly1305 key uses), a zero nonce, the datagram's first SG_AUTH_GMAC_HEAD
 * bytes and the trailer's first 16 as the message (its ciphertext is thrown
 * away: the tag covers it) and the rest as additional data: that lies where
 * it is, in one piece, whether the header travels apart from the payload or
 * not. @p a must be at most SG_AUTH_GMAC_HEAD bytes when @p b is not empty.
 */
static void gmac_of(const uint8_t key[SG_AUTH_KEY_BYTES], const void *a, size_t alen,
		    const void *b, size_t blen, const uint8_t tr[16], uint8_t mac[SG_AUTH_MAC_BYTES])
{
	static const uint8_t npub[crypto_aead_aes256gcm_NPUBBYTES];
	crypto_aead_aes256gcm_state st;
	uint8_t otk[crypto_aead_aes256gcm_KEYBYTES], n8[8];
	uint8_t msg[SG_AUTH_GMAC_HEAD + 16], ct[SG_AUTH_GMAC_HEAD + 16];
	size_t head = alen + blen < SG_AUTH_GMAC_HEAD ? alen + blen : SG_AUTH_GMAC_HEAD;
	size_t ha = alen < head ? alen : head;
	const uint8_t *ad;
	size_t adlen;

	memcpy(msg, a, ha);
	if (head > ha)
		memcpy(msg + ha, b, head - ha);
	memcpy(msg + head, tr, 16);
	if (alen > head) {
		ad = (const uint8_t *)a + head;
		adlen = alen - head;
	} else if (blen > head - ha) {
		ad = (const uint8_t *)b + (head - ha);
		adlen = blen - (head - ha);
	} else {
		/* all of it is in the message: no additional data (and @p b may be NULL) */
		ad = NULL;
		adlen = 0;
	}
	memcpy(n8, tr, 8);
	n8[0] |= 0x80;
	crypto_stream_chacha20(otk, sizeof(otk), n8, key);
	crypto_aead_aes256gcm_beforenm(&st, otk);
	crypto_aead_aes256gcm_encrypt_detached_afternm(ct, mac, NULL, msg, head + 16, ad, adlen,
						       NULL, npub, &st);
	sodium_memzero(otk, sizeof(otk));
	sodium_memzero(&st, sizeof(st));
}

void sg_auth_sign_parts(struct sg_auth_signer *s, const void *hdr, size_t hlen,
			const void *payload, size_t plen, uint8_t tr[SG_AUTH_TRAILER_BYTES])
{
	put_be64(tr, s->seq++);
	put_be32(tr + 8, s->key_id);
	tr[12] = s->alg;
	memset(tr + 13, 0, 3);
	if (s->alg == SG_AUTH_GMAC)
		gmac_of(s->key, hdr, hlen, payload, plen, tr, tr + 16);
	else
		poly_of(s->key, hdr, hlen, payload, plen, tr, tr + 16);
}

void sg_auth_sign(struct sg_auth_signer *s, void *buf, size_t len)
{
	sg_auth_sign_parts(s, buf, len, NULL, 0, (uint8_t *)buf + len);
}

/* Take @p seq in @p w. @return false: taken before, or older than the window. */
static bool window_take(struct sg_auth_window *w, uint64_t seq)
{
	uint64_t *word;
	uint64_t bit;

	if (seq >= w->top) {
		uint64_t gap = w->top == 0 ? SG_AUTH_WINDOW : seq + 1 - w->top;

		if (gap >= SG_AUTH_WINDOW)
			memset(w->bits, 0, sizeof(w->bits));
		else
			for (uint64_t s = w->top; s <= seq; s++)
				w->bits[(s % SG_AUTH_WINDOW) / 64] &= ~(1ull << (s % 64));
		w->top = seq + 1;
	} else if (w->top - seq > SG_AUTH_WINDOW) {
		return false;
	}
	word = &w->bits[(seq % SG_AUTH_WINDOW) / 64];
	bit = 1ull << (seq % 64);
	if (*word & bit)
		return false;
	*word |= bit;
	return true;
}

enum sg_auth_verdict sg_auth_verify(const uint8_t key[SG_AUTH_KEY_BYTES], uint32_t key_id,
				    const void *buf, size_t len, struct sg_auth_window *win)
{
	const uint8_t *tr;
	uint8_t mac[SG_AUTH_MAC_BYTES];
	int bad;

	if (len < SG_AUTH_TRAILER_BYTES)
		return SG_AUTH_SHORT;
	tr = (const uint8_t *)buf + len - SG_AUTH_TRAILER_BYTES;
	if (get_be32(tr + 8) != key_id)
		return SG_AUTH_OTHER_JOB;
	if ((get_be32(tr + 12) & 0xffffffu) != 0 || tr[12] > SG_AUTH_GMAC)
		return SG_AUTH_BAD;
	/* first, so that a process that only checks has run sodium_init() */
	if (!gmac_ok() && tr[12] == SG_AUTH_GMAC)
		return SG_AUTH_ALG;
	if (tr[12] == SG_AUTH_GMAC)
		gmac_of(key, buf, len - SG_AUTH_TRAILER_BYTES, NULL, 0, tr, mac);
	else
		poly_of(key, buf, len - SG_AUTH_TRAILER_BYTES, NULL, 0, tr, mac);
	bad = crypto_verify_16(mac, tr + 16);
	sodium_memzero(mac, sizeof(mac));
	if (bad != 0)
		return SG_AUTH_BAD;
	if (win != NULL && !window_take(win, get_be64(tr)))
		return SG_AUTH_REPLAY;
	return SG_AUTH_OK;
}

struct sg_auth_job {
	uint32_t n, key_id;
	struct sg_auth_rank {
		uint8_t key[SG_AUTH_KEY_BYTES]; /* what the rank sends */
		struct sg_auth_window win;
		struct sg_auth_signer reply;    /* what the node sends it */
	} rank[];
};

struct sg_auth_job *sg_auth_job_create(const uint8_t key[SG_AUTH_KEY_BYTES], uint32_t n)
{
	struct sg_auth_job *a;
	uint8_t nk[SG_AUTH_KEY_BYTES];

	if (key == NULL || n == 0 || n > UINT16_MAX) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a) + n * sizeof(a->rank[0]));
	if (a == NULL)
		return NULL;
	a->n = n;
	a->key_id = sg_auth_key_id(key);
	for (uint32_t r = 0; r < n; r++) {
		sg_auth_rank_key(key, (uint16_t)r, SG_AUTH_RANK, a->rank[r].key);
		sg_auth_rank_key(key, (uint16_t)r, SG_AUTH_NODE, nk);
		if (sg_auth_signer_init(&a->rank[r].reply, nk, a->key_id) < 0) {
			sg_auth_job_destroy(a);
			errno = ENOMEM;
			return NULL;
		}
		/* until the rank shows its own: every receiver can check Poly1305 */
		a->rank[r].reply.alg = SG_AUTH_POLY1305;
	}
	sodium_memzero(nk, sizeof(nk));
	return a;
}

void sg_auth_job_destroy(struct sg_auth_job *a)
{
	if (a == NULL)
		return;
	sodium_memzero(a, sizeof(*a) + a->n * sizeof(a->rank[0]));
	free(a);
}

enum sg_auth_verdict sg_auth_job_check(struct sg_auth_job *a, uint32_t rank, const void *buf,
				       size_t len)
{
	enum sg_auth_verdict v = sg_auth_verify(a->rank[rank].key, a->key_id, buf, len,
						&a->rank[rank].win);

	/* the replies to a rank use the algorithm of its last authentic datagram */
	if (v == SG_AUTH_OK)
		a->rank[rank].reply.alg = ((const uint8_t *)buf)[len - SG_AUTH_TRAILER_BYTES + 12];
	return v;
}

void sg_auth_job_sign(struct sg_auth_job *a, uint32_t rank, void *buf, size_t len)
{
	sg_auth_sign(&a->rank[rank].reply, buf, len);
}

const char *sg_auth_verdict_name(enum sg_auth_verdict v)
{
	static const char *const names[] = {"ok", "auth_short", "auth_job", "auth_bad",
					    "auth_replay", "auth_alg"};

	return (unsigned int)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}
