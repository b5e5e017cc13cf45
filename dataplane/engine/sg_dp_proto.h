/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma wire protocol: one fixed 48-byte header per UDP payload, then the
 * chunk's elements. docs/protocol.md is the normative description; this
 * header is its C form.
 *
 * All multi-byte header fields are big-endian (network byte order) on the
 * wire. The payload (tensor elements) is in the host's little-endian IEEE /
 * two's complement layout, as GPUs and x86 store it, so that no element is
 * ever byte-swapped on the hot path.
 *
 * Parsing is split in two: sg_dp_parse() checks everything that can be
 * checked from the packet alone (length, magic, version, type, flags,
 * dtype, element count against length, code); the engine checks the rest against
 * the job (token, rank, key, chunk, offset, element count, dtype).
 */
#ifndef SG_DP_PROTO_H
#define SG_DP_PROTO_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sg_types.h"
#include "sg_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** First four bytes of every packet: "SGMA". */
#define SG_DP_MAGIC 0x53474d41u
/** Protocol version this build speaks (stated in the top meson.build). */
#define SG_DP_VERSION SG_PROTO_VERSION
/** Default UDP port of a summation node. */
#define SG_DP_UDP_PORT 9300
/** Size of the fixed header in bytes. */
#define SG_DP_HDR_LEN 48
/** IPv4 (no options) + UDP header bytes in front of the Sigma header. */
#define SG_DP_IPUDP_LEN 28
/** Largest payload in a 1500-byte IP MTU: 1500 - 28 - 48. */
#define SG_DP_PAYLOAD_MTU1500 1424
/** Largest payload in a 9000-byte IP MTU (jumbo frames): 9000 - 28 - 48. */
#define SG_DP_PAYLOAD_JUMBO 8924
/** Largest payload any packet may carry (the parser rejects larger ones). */
#define SG_DP_MAX_PAYLOAD SG_DP_PAYLOAD_JUMBO
/* Job limits (SG_MAX_WORKERS, SG_MAX_CHUNK_BYTES, ...) are in sg_types.h. */

/** Message types (header field `type`). */
enum sg_dp_type {
	SG_DP_T_PUSH = 1,   /**< worker -> node: a chunk of the worker's gradient */
	SG_DP_T_RESULT = 2, /**< node -> worker: the chunk's sum (or async store value) */
	SG_DP_T_PULL = 3,   /**< worker -> node: ACK/PULL-REQ, "send me round r's result" */
	SG_DP_T_NACK = 4,   /**< node -> worker: push refused for now, retry later (code) */
	SG_DP_T_ERROR = 5,  /**< node -> worker: the chunk cannot complete (code, payload) */
	SG_DP_T_JOIN = 6,   /**< control hand-off; not handled by the engine */
	SG_DP_T_MAX = 6
};

/** Header flag bits. Unknown bits must be zero (else the packet is dropped). */
enum sg_dp_flag {
	SG_DP_F_RETRANS = 1u << 0, /**< sender is retransmitting (informational) */
	/** a job with auth: SG_DP_MAC_TRAILER bytes (sg_auth.h) follow the payload */
	SG_DP_F_MAC = 1u << 1,
	/**
	 * a PUSH of the sender's first round of this key in a new node set (an
	 * elastic switch): a slot here two or more rounds behind it is stale and is
	 * released; without the flag such a push is dropped (ROUND_NEW), so that
	 * garbage can never discard a round or a kept result
	 */
	SG_DP_F_REOPEN = 1u << 2,
};
/** All flag bits this version defines. */
#define SG_DP_F_ALL (SG_DP_F_RETRANS | SG_DP_F_MAC | SG_DP_F_REOPEN)
/** Bytes of the trailer an SG_DP_F_MAC datagram ends with (SG_AUTH_TRAILER_BYTES). */
#define SG_DP_MAC_TRAILER 32

/** Codes carried in the `code` field of NACK and ERROR (0 elsewhere). */
enum sg_dp_code {
	SG_DP_C_NONE = 0,
	SG_DP_C_BUSY = 1,        /**< NACK: accumulator pool exhausted; back off and retry */
	SG_DP_C_INFLIGHT = 2,    /**< NACK: job's slots-in-flight limit reached; retry */
	SG_DP_C_WORKER_LOST = 3, /**< ERROR: slot timed out; payload = u64 missing-rank bitmap */
	SG_DP_C_GONE = 4,        /**< ERROR: the requested round's result is no longer kept;
				      payload: struct sg_dp_round_info */
	SG_DP_C_MISMATCH = 5,    /**< ERROR: the push names the job and its token but not its
				      geometry; payload: struct sg_dp_mismatch */
	SG_DP_C_STALE = 6,       /**< ERROR: the push's round is behind the chunk's round on the
				      node; payload: struct sg_dp_round_info */
	SG_DP_C_FULL = 7,        /**< ERROR: an open job has no chunk slot left on the node for a
				      new key; payload: struct sg_dp_full */
	SG_DP_C_VERSION = 8,     /**< ERROR: the push or pull is of another protocol version than
				      the node's; payload: struct sg_dp_version_info. Sent in
				      the node's version: see sg_dp_build_version_error() */
	SG_DP_C_WAITING = 9,     /**< ERROR: the node holds the sender's push of this collecting
				      round and waits for other ranks (an answer to a resend);
				      payload = u64 missing-rank bitmap. Not a failure */
};

/** Payload of ERROR GONE and STALE (8 bytes, big-endian): where the chunk is on the node. */
struct __attribute__((packed)) sg_dp_round_info {
	uint32_t round;    /**< the chunk's round on the node */
	uint32_t finished; /**< 1: that round finished (the next one to push is round + 1); 0:
			        it is collecting */
};

/** What a push disagreed with (struct sg_dp_mismatch's what). */
enum sg_dp_mismatch_what {
	SG_DP_MM_KEY = 1,    /**< the job has no such key (other tensors or placement) */
	SG_DP_MM_CHUNKS = 2, /**< chunk index or chunk count is not the key's */
	SG_DP_MM_OFFSET = 3, /**< the byte offset is not the chunk's */
	SG_DP_MM_DTYPE = 4,  /**< the element type is not the job's */
	SG_DP_MM_NELEM = 5,  /**< the element count is not the chunk's */
	SG_DP_MM_PARTITION = 6, /**< a new key of an open job would be larger than the job's
				     partition_bytes */
	SG_DP_MM_AUTH = 7,   /**< SG_DP_F_MAC set and the job has no auth, or the reverse */
	SG_DP_MM_MAC_ALG = 8, /**< a MAC in AES-256-GMAC, and the node's CPU cannot check it */
};

/** Payload of ERROR MISMATCH (8 bytes, big-endian): the job as the node holds it. */
struct __attribute__((packed)) sg_dp_mismatch {
	uint8_t what;         /**< enum sg_dp_mismatch_what */
	uint8_t dtype;        /**< the job's dtype; of a job of dtype any, the key's, or 0xff
				   (SG_DTYPE_ANY) before the key exists */
	uint16_t zero;        /**< 0 */
	uint32_t chunk_bytes; /**< the job's chunk_bytes */
};

/** Payload of ERROR FULL (8 bytes, big-endian): an open job's chunk slots on the node. */
struct __attribute__((packed)) sg_dp_full {
	uint32_t slots; /**< chunk slots the job may take on the engine that refused (its budget) */
	uint32_t used;  /**< ... of which its keys take now */
};

/** Payload of ERROR VERSION (8 bytes, big-endian): the protocol versions the node speaks. */
struct __attribute__((packed)) sg_dp_version_info {
	uint32_t lowest;  /**< the oldest protocol version the node speaks */
	uint32_t highest; /**< the newest (the reply's header carries this one) */
};

/**
 * The header as it lies on the wire (big-endian fields). Use sg_dp_parse()
 * and sg_dp_build_hdr() rather than touching it directly.
 */
struct __attribute__((packed)) sg_dp_wire_hdr {
	uint32_t magic;    /**< SG_DP_MAGIC */
	uint8_t version;   /**< SG_DP_VERSION */
	uint8_t type;      /**< enum sg_dp_type */
	uint8_t flags;     /**< enum sg_dp_flag bits */
	uint8_t dtype;     /**< enum sg_dtype (summation/sg_sum.h) */
	uint32_t job;      /**< job id */
	uint16_t rank;     /**< sender's rank (PUSH/PULL) or receiver's rank (node replies) */
	uint16_t code;     /**< enum sg_dp_code (NACK/ERROR), else 0 */
	uint64_t token;    /**< per-job session token */
	uint32_t key;      /**< partition id */
	uint32_t chunk;    /**< chunk index within the partition */
	uint32_t nchunks;  /**< number of chunks of the partition */
	uint32_t round;    /**< iteration number (per chunk, wraps modulo 2^32) */
	uint32_t nelem;    /**< elements in the payload (PUSH/RESULT), else 0 */
	uint32_t offset;   /**< byte offset of the chunk in the partition */
};

/** A header in host byte order, plus where its payload lies. */
struct sg_dp_msg {
	uint8_t version;
	uint8_t type;
	uint8_t flags;
	uint8_t dtype;
	uint32_t job;
	uint16_t rank;
	uint16_t code;
	uint64_t token;
	uint32_t key;
	uint32_t chunk;
	uint32_t nchunks;
	uint32_t round;
	uint32_t nelem;
	uint32_t offset;
	const void *payload;  /**< parse: first payload byte (NULL if none) */
	uint32_t payload_len; /**< parse: payload bytes */
};

/**
 * Why a packet was dropped. Each has its own counter in the engine's stats;
 * the parser reports the first eight, the engine the rest. New reasons are
 * added at the end: the values are stable.
 */
enum sg_dp_drop {
	SG_DP_DROP_NONE = 0,
	SG_DP_DROP_SHORT,       /**< shorter than the header */
	SG_DP_DROP_MAGIC,       /**< wrong magic */
	SG_DP_DROP_VERSION,     /**< unsupported version */
	SG_DP_DROP_TYPE,        /**< unknown message type */
	SG_DP_DROP_FLAGS,       /**< unknown flag bits set */
	SG_DP_DROP_DTYPE,       /**< unknown dtype */
	SG_DP_DROP_LENGTH,      /**< nelem * dtype size != payload length (a PULL's nelem is
				     0), or payload too big */
	SG_DP_DROP_CODE,        /**< code != 0 in a PUSH or PULL */
	SG_DP_DROP_JOB,         /**< job id unknown to this engine */
	SG_DP_DROP_TOKEN,       /**< wrong session token */
	SG_DP_DROP_RANK,        /**< rank >= N */
	SG_DP_DROP_KEY,         /**< key unknown to the job */
	SG_DP_DROP_CHUNK,       /**< chunk index or chunk count does not match the key */
	SG_DP_DROP_OFFSET,      /**< byte offset is not where this chunk lies */
	SG_DP_DROP_NELEM,       /**< element count is not this chunk's element count */
	SG_DP_DROP_JOB_DTYPE,   /**< dtype differs from the job's */
	SG_DP_DROP_DIRECTION,   /**< a node-to-worker type (RESULT, NACK, ERROR) sent to us */
	SG_DP_DROP_ROUND_OLD,   /**< round older than r-1 (or r-1 with nothing kept) */
	SG_DP_DROP_ROUND_NEW,   /**< round newer than r+1 (or r+1 while r still collects) */
	SG_DP_DROP_DUPLICATE,   /**< push already counted for this round */
	SG_DP_DROP_PENDING,     /**< PULL for a round that is still collecting */
	SG_DP_DROP_JOIN,        /**< JOIN: not the engine's; the caller hands it to control */
	SG_DP_DROP_PARTITION,   /**< a new key of an open job larger than its partition_bytes */
	SG_DP_DROP_FULL,        /**< a new key of an open job, and no chunk slot left for it */
	SG_DP_DROP_AUTH_SHORT,  /**< SG_DP_F_MAC, and no room for the whole trailer: truncated */
	SG_DP_DROP_AUTH_JOB,    /**< a trailer made with another job's key (its key id) */
	SG_DP_DROP_AUTH_BAD,    /**< a MAC that does not verify: forged, or another rank's */
	SG_DP_DROP_AUTH_REPLAY, /**< a verified datagram seen before, or older than the window */
	SG_DP_DROP_AUTH_MISMATCH, /**< SG_DP_F_MAC to a job without auth, or none to one with */
	SG_DP_DROP_COUNT
};

/** Short name of a drop reason ("short", "magic", ...), or "unknown". */
const char *sg_dp_drop_name(enum sg_dp_drop why);

/** Name of a message type ("push", ...), or "unknown". */
const char *sg_dp_type_name(unsigned int type);

/**
 * Parse and validate one UDP payload.
 *
 * Checks, in this order: length >= header (SHORT), magic, version, type
 * (1..SG_DP_T_MAX), flags, dtype (any type; checked for all types), payload
 * length <= SG_DP_MAX_PAYLOAD and, for PUSH and RESULT, nelem * dtype size ==
 * payload length (LENGTH). ERROR may carry a payload of at most 8 bytes; other
 * types carry none, and a PULL's nelem is 0 (LENGTH). Last, code is 0 in a
 * PUSH or PULL (CODE).
 *
 * @param buf   packet bytes (any alignment); may be NULL only if @p len is 0
 * @param len   bytes at @p buf
 * @param msg   out: the header in host order; payload points into @p buf
 * @param why   out (may be NULL): SG_DP_DROP_NONE, or the reason on failure
 * @return 0, or -EBADMSG when the packet must be dropped (@p why says why).
 */
int sg_dp_parse(const void *buf, size_t len, struct sg_dp_msg *msg, enum sg_dp_drop *why);

/**
 * Write the header for @p msg (host order in, wire order out) into @p buf.
 * @p msg->payload and payload_len are ignored: the caller writes the payload
 * at buf + SG_DP_HDR_LEN. version is always written as SG_DP_VERSION.
 * Never fails; @p buf must have SG_DP_HDR_LEN bytes (any alignment).
 */
void sg_dp_build_hdr(void *buf, const struct sg_dp_msg *msg);

/*
 * Versions (docs/protocol.md, "Versions"). Bytes 0..15 of the header (magic,
 * version, type, flags, dtype, job, rank, code) keep their place in every
 * protocol version, as do the types PUSH (1), PULL (3) and ERROR (5) and the
 * code VERSION (8): a node and a worker of different versions can always
 * tell each other so.
 */

/**
 * The node's answer to a packet of another protocol version: when @p pkt is a
 * PUSH or PULL (the stable bytes) with Sigma's magic and a version other than
 * SG_DP_VERSION, write into @p buf its 48 header bytes with version
 * SG_DP_VERSION, type ERROR, flags 0, dtype 0 and code VERSION, then a struct
 * sg_dp_version_info (the other 32 bytes stay the sender's, for it to match).
 * @return the reply's length (SG_DP_HDR_LEN + 8), -EINVAL when @p pkt is
 *         not such a packet, or -ENOSPC when @p cap is too small.
 */
int sg_dp_build_version_error(void *buf, size_t cap, const void *pkt, size_t len);

/**
 * The worker's reading of an ERROR VERSION from a node of another protocol
 * version: the stable bytes checked (magic, type ERROR, code VERSION, an
 * 8-byte payload, a version other than SG_DP_VERSION), the rest of the header
 * read in this version's layout (a node echoes the push's) into @p msg.
 * @param node_lo, node_hi  out: the versions the node speaks (its payload)
 * @return 0, or -EBADMSG when @p buf is not such a reply.
 */
int sg_dp_parse_version_error(const void *buf, size_t len, struct sg_dp_msg *msg,
			      uint32_t *node_lo, uint32_t *node_hi);

/*
 * Single fields of a header at @p buf (any alignment), in host order, read
 * without parsing it: for code that routes a datagram before the engine
 * checks it (steering to the reducer that owns its key, key moves, the
 * socket transport's magic check). The caller has checked that @p buf holds
 * SG_DP_HDR_LEN bytes; nothing else is checked (sg_dp_parse() does that).
 */
/* the big-endian 32-bit field at byte @p off of @p buf */
static inline uint32_t sg_dp_hdr_be32(const void *buf, size_t off)
{
	uint32_t v;

	memcpy(&v, (const uint8_t *)buf + off, sizeof(v));
	return be32toh(v);
}

/** The magic (SG_DP_MAGIC in a Sigma packet). */
static inline uint32_t sg_dp_hdr_magic(const void *buf)
{
	return sg_dp_hdr_be32(buf, offsetof(struct sg_dp_wire_hdr, magic));
}

/** The message type (enum sg_dp_type). */
static inline uint8_t sg_dp_hdr_type(const void *buf)
{
	return ((const uint8_t *)buf)[offsetof(struct sg_dp_wire_hdr, type)];
}

/** The job id. */
static inline uint32_t sg_dp_hdr_job(const void *buf)
{
	return sg_dp_hdr_be32(buf, offsetof(struct sg_dp_wire_hdr, job));
}

/** The session token. */
static inline uint64_t sg_dp_hdr_token(const void *buf)
{
	uint64_t v;

	memcpy(&v, (const uint8_t *)buf + offsetof(struct sg_dp_wire_hdr, token), sizeof(v));
	return be64toh(v);
}

/** The key (partition id). */
static inline uint32_t sg_dp_hdr_key(const void *buf)
{
	return sg_dp_hdr_be32(buf, offsetof(struct sg_dp_wire_hdr, key));
}

/** The chunk index within the partition. */
static inline uint32_t sg_dp_hdr_chunk(const void *buf)
{
	return sg_dp_hdr_be32(buf, offsetof(struct sg_dp_wire_hdr, chunk));
}

/** The round. */
static inline uint32_t sg_dp_hdr_round(const void *buf)
{
	return sg_dp_hdr_be32(buf, offsetof(struct sg_dp_wire_hdr, round));
}

/**
 * Set the rank field of a header already built at @p buf (any alignment):
 * what a fan-out sender (sg_dp_tx_ops.send_multi) changes in each copy.
 */
static inline void sg_dp_hdr_set_rank(void *buf, uint16_t rank)
{
	uint8_t *p = (uint8_t *)buf + offsetof(struct sg_dp_wire_hdr, rank);

	/* network byte order, byte by byte: no alignment assumed */
	p[0] = (uint8_t)(rank >> 8);
	p[1] = (uint8_t)rank;
}

/**
 * Build a whole packet: header plus @p payload_len bytes copied from
 * @p payload (which may be NULL when @p payload_len is 0).
 * @return packet length (> 0), or -ENOSPC if it does not fit in @p cap,
 *         -EINVAL if @p payload_len exceeds SG_DP_MAX_PAYLOAD.
 */
int sg_dp_build(void *buf, size_t cap, const struct sg_dp_msg *msg, const void *payload,
		size_t payload_len);

/*
 * Key placement inside a summation node (docs/protocol.md, "Reducer
 * steering"): a node hashes (job, key) to one of SG_BUCKETS buckets, and
 * its keymap sends a bucket to a reducer, by default bucket b to reducer
 * b mod R. A worker that knows R may address a push to UDP port
 * udp_port + 1 + sg_dp_steer_reducer(job, key, R), which a NIC flow rule can
 * steer straight to that reducer's RX queue. Any port of the range is correct.
 */

/**
 * Reducer ports a node always accepts: udp_port + 1 .. udp_port + SG_DP_STEER_PORTS,
 * whatever its reducer count, so that a worker's R (at most this: more reducers than
 * buckets would own nothing) is never wrong enough to lose a push.
 */
#define SG_DP_STEER_PORTS SG_BUCKETS

/** Bucket of (@p job, @p key), 0..SG_BUCKETS-1: node and workers share this hash. */
static inline unsigned int sg_dp_bucket_of(uint32_t job, uint32_t key)
{
	/* consecutive keys of a job land in consecutive buckets: round-robin over reducers */
	return ((job * 0x9e3779b1u >> 8) + key) % SG_BUCKETS;
}

/**
 * Reducer of (@p job, @p key) under the default keymap of a node with
 * @p n_reducers reducers (0 when @p n_reducers is 0 or 1).
 */
static inline unsigned int sg_dp_steer_reducer(uint32_t job, uint32_t key,
					       unsigned int n_reducers)
{
	return n_reducers > 1 ? sg_dp_bucket_of(job, key) % n_reducers : 0;
}

/*
 * Job geometry (docs/protocol.md, "Job geometry"): how a key of nelem
 * elements is cut into chunks of chunk_bytes. Workers and the node must agree.
 */

/**
 * Number of chunks of a key of @p nelem elements of @p dtype at @p chunk_bytes
 * payload bytes per chunk: ceil(nelem * size / chunk_bytes). 0 if @p chunk_bytes
 * is 0 or @p dtype unknown.
 */
uint32_t sg_dp_chunk_count(uint32_t nelem, enum sg_dtype dtype, uint32_t chunk_bytes);

/**
 * Where chunk @p chunk of such a key lies: its first element, its element
 * count, and its byte offset (the header's `offset`).
 * @return 0, or -EINVAL if @p chunk >= the chunk count, @p chunk_bytes is not
 *         a multiple of the dtype size, or @p dtype is unknown.
 */
int sg_dp_chunk_span(uint32_t nelem, enum sg_dtype dtype, uint32_t chunk_bytes, uint32_t chunk,
		     uint32_t *first, uint32_t *count, uint32_t *offset);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_PROTO_H */
