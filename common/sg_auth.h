/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Authenticated datagrams (a job's `auth = mac`, docs/protocol.md
 * "Authenticated datagrams", docs/security.md): the keys, the 32-byte
 * trailer that follows an authenticated datagram's payload, and the checks a
 * receiver makes before it uses one. libsodium does the cryptography.
 *
 * - A job has a 32-byte key K, made by the control plane (sg_auth_job_key())
 *   and given to the nodes over the authenticated control channel, never on
 *   the dataplane. Rank r's key for what it sends (PUSH, PULL) and the key of
 *   the node's replies to it are derived from K (sg_auth_rank_key()); a
 *   worker holds only its own two, so it cannot MAC another rank's push.
 * - Each datagram carries a 64-bit sequence number, new for every datagram
 *   its sender sends under that key (a retransmit too), and names its MAC
 *   algorithm. Poly1305 (SG_AUTH_POLY1305): the datagram's one-time key is
 *   the first 32 bytes of ChaCha20's keystream under the rank key with the
 *   sequence number as nonce, and its MAC is Poly1305 (crypto_onetimeauth)
 *   under it, over the header, the payload and the trailer's first 16 bytes.
 *   AES-256-GMAC (SG_AUTH_GMAC, where the CPU has AES-NI and PCLMUL: about a
 *   third of Poly1305's instructions per byte): the one-time key is
 *   ChaCha20's keystream with the nonce's top bit set (seq stays below 2^62),
 *   and the MAC is the tag of AES-256-GCM (crypto_aead_aes256gcm) under it,
 *   nonce zero, message the first SG_AUTH_GMAC_HEAD bytes and the trailer's
 *   first 16 (the ciphertext is not sent), additional data the rest. Either
 *   way no one-time key ever MACs two messages.
 * - Trailer: seq (8 bytes, big-endian), key id (4, big-endian: the first 4
 *   bytes of BLAKE2b-256(K) read big-endian, so that a MAC made with another
 *   job's key is told from a forged one), the algorithm (1 byte), 3 zero
 *   bytes, the 16-byte MAC.
 * - A signer uses GMAC where this CPU can, Poly1305 elsewhere or when the
 *   environment has SIGMA_AUTH_MAC=poly1305; a receiver checks either. The
 *   node answers each rank with the algorithm of the rank's last authentic
 *   datagram (Poly1305 before it), so that a worker always gets replies it
 *   can check; a receiver that cannot check GMAC says so (SG_AUTH_ALG).
 *
 * Functions return 0 or a negative errno unless said otherwise; nothing
 * here allocates or locks, so the checks may run on a hot path.
 */
#ifndef SG_AUTH_H
#define SG_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SG_AUTH_KEY_BYTES 32     /**< a job's key and each rank key */
#define SG_AUTH_MAC_BYTES 16     /**< Poly1305's tag */
#define SG_AUTH_TRAILER_BYTES 32 /**< seq, key id, algorithm, 3 zero bytes, MAC */
/** GMAC's message: the datagram's first bytes (a Sigma header), the rest is additional data. */
#define SG_AUTH_GMAC_HEAD 48

/** The trailer's algorithm byte. */
enum sg_auth_alg {
	SG_AUTH_POLY1305 = 0, /**< ChaCha20 one-time key, Poly1305 */
	SG_AUTH_GMAC = 1,     /**< ChaCha20 one-time key, AES-256-GCM's tag */
};
/** Sequence numbers a receiver remembers below the highest it has seen, per sender. */
#define SG_AUTH_WINDOW 1024

/** Whose key: what a rank sends, or what the node sends that rank. */
enum sg_auth_dir {
	SG_AUTH_RANK = 0, /**< PUSH and PULL of the rank */
	SG_AUTH_NODE = 1, /**< RESULT, NACK and ERROR to the rank */
};

/** What sg_auth_verify() found. */
enum sg_auth_verdict {
	SG_AUTH_OK = 0,
	SG_AUTH_SHORT,     /**< too short to hold a trailer: a truncated MAC */
	SG_AUTH_OTHER_JOB, /**< a trailer made with another job's key (its key id) */
	SG_AUTH_BAD,       /**< the MAC does not verify: forged, altered, or another rank's */
	SG_AUTH_REPLAY,    /**< it verifies, but its sequence number was seen or is too old */
	SG_AUTH_ALG,       /**< GMAC, and this CPU has no AES-NI or PCLMUL to check it */
};

/** A new job key, random (libsodium's randombytes_buf). @return 0 or -ENOMEM (no libsodium). */
int sg_auth_job_key(uint8_t key[SG_AUTH_KEY_BYTES]);

/**
 * The job key of a job whose control-plane token (64 hex digits, the 32 bytes
 * every node of the job gets over the authenticated control channel, of
 * which the wire carries only the first 8) is @p token_hex: BLAKE2b-256 keyed
 * with those 32 bytes over "sigma-mac-v1/job". @return 0 or -EINVAL.
 */
int sg_auth_job_key_from_token(const char *token_hex, uint8_t key[SG_AUTH_KEY_BYTES]);

/** The key id of job key @p key (the trailer's). */
uint32_t sg_auth_key_id(const uint8_t key[SG_AUTH_KEY_BYTES]);

/**
 * Rank @p rank's key of direction @p dir, from job key @p key:
 * BLAKE2b-256 keyed with it over "sigma-mac-v1/rank/" or "sigma-mac-v1/node/"
 * and the rank as 2 big-endian bytes. @return 0 or -EINVAL.
 */
int sg_auth_rank_key(const uint8_t key[SG_AUTH_KEY_BYTES], uint16_t rank, enum sg_auth_dir dir,
		     uint8_t out[SG_AUTH_KEY_BYTES]);

/** A sender's state under one rank key. */
struct sg_auth_signer {
	uint8_t key[SG_AUTH_KEY_BYTES];
	uint32_t key_id;
	uint64_t seq; /**< the next datagram's */
	uint8_t alg;  /**< enum sg_auth_alg: set by sg_auth_signer_init(), may be changed */
};

/**
 * Start signing with rank key @p key of the job whose key id is @p key_id.
 * The first sequence number is random, so that a sender that starts again
 * with the same key does not reuse one. The algorithm: GMAC where this CPU
 * has AES-NI and PCLMUL, unless the environment has SIGMA_AUTH_MAC=poly1305.
 * @return 0 or -ENOMEM (no libsodium).
 */
int sg_auth_signer_init(struct sg_auth_signer *s, const uint8_t key[SG_AUTH_KEY_BYTES],
			uint32_t key_id);

/**
 * Write the trailer of the datagram of @p len bytes at @p buf (header and
 * payload) at buf + len, which must have SG_AUTH_TRAILER_BYTES of room, and
 * take the next sequence number.
 */
void sg_auth_sign(struct sg_auth_signer *s, void *buf, size_t len);

/**
 * sg_auth_sign() of a datagram in two parts, @p hdr (@p hlen bytes, at most
 * SG_AUTH_GMAC_HEAD when @p plen is not 0) and @p payload (@p plen), sent from
 * where they lie: its trailer into @p trailer.
 */
void sg_auth_sign_parts(struct sg_auth_signer *s, const void *hdr, size_t hlen,
			const void *payload, size_t plen, uint8_t trailer[SG_AUTH_TRAILER_BYTES]);

/** The sequence numbers a receiver has taken from one sender (zero it to start). */
struct sg_auth_window {
	uint64_t top;                         /**< highest taken + 1; 0: none yet */
	uint64_t bits[SG_AUTH_WINDOW / 64];   /**< bit (seq % WINDOW): taken */
};

/**
 * Check the datagram of @p len bytes at @p buf (header, payload, trailer)
 * under rank key @p key of the job with key id @p key_id; when it verifies,
 * take its sequence number in @p win (may be NULL: no replay check). Checks
 * in this order: SG_AUTH_SHORT, SG_AUTH_OTHER_JOB, SG_AUTH_BAD (an unknown
 * algorithm or nonzero reserved bytes), SG_AUTH_ALG, SG_AUTH_BAD (the MAC,
 * constant time), SG_AUTH_REPLAY.
 */
enum sg_auth_verdict sg_auth_verify(const uint8_t key[SG_AUTH_KEY_BYTES], uint32_t key_id,
				    const void *buf, size_t len, struct sg_auth_window *win);

/**
 * A node's state for one job with auth: each rank's key and replay window,
 * and a signer of its replies to each rank.
 */
struct sg_auth_job;

/**
 * For a job of @p n ranks (1..65535) with job key @p key. Allocates (at job
 * creation, never on the hot path). @return it, or NULL with errno EINVAL or ENOMEM.
 */
struct sg_auth_job *sg_auth_job_create(const uint8_t key[SG_AUTH_KEY_BYTES], uint32_t n);

/** Free it; its keys are zeroed first (NULL is fine). */
void sg_auth_job_destroy(struct sg_auth_job *a);

/**
 * sg_auth_verify() of a datagram from @p rank (< n) under its key and window;
 * when it verifies, the node's replies to the rank take its algorithm.
 */
enum sg_auth_verdict sg_auth_job_check(struct sg_auth_job *a, uint32_t rank, const void *buf,
				       size_t len);

/** sg_auth_sign() of the node's datagram to @p rank (< n) of @p len bytes at @p buf. */
void sg_auth_job_sign(struct sg_auth_job *a, uint32_t rank, void *buf, size_t len);

/** "ok", "auth_short", "auth_job", "auth_bad", "auth_replay", "auth_alg". */
const char *sg_auth_verdict_name(enum sg_auth_verdict v);

#ifdef __cplusplus
}
#endif

#endif /* SG_AUTH_H */
