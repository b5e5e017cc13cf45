/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wire format: parse/validate and build the fixed Sigma header.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "sg_dp_proto.h"

_Static_assert(sizeof(struct sg_dp_wire_hdr) == SG_DP_HDR_LEN, "wire header must be 48 bytes");
_Static_assert(SG_DP_HDR_LEN + SG_DP_IPUDP_LEN + SG_DP_PAYLOAD_MTU1500 == 1500, "MTU 1500");
_Static_assert(SG_DP_HDR_LEN + SG_DP_IPUDP_LEN + SG_DP_PAYLOAD_JUMBO == 9000, "MTU 9000");
_Static_assert(sizeof(struct sg_dp_full) == 8 && sizeof(struct sg_dp_mismatch) == 8,
	       "ERROR payloads are 8 bytes");

static const char *const drop_names[SG_DP_DROP_COUNT] = {
	[SG_DP_DROP_NONE] = "none",
	[SG_DP_DROP_SHORT] = "short",
	[SG_DP_DROP_MAGIC] = "magic",
	[SG_DP_DROP_VERSION] = "version",
	[SG_DP_DROP_TYPE] = "type",
	[SG_DP_DROP_FLAGS] = "flags",
	[SG_DP_DROP_DTYPE] = "dtype",
	[SG_DP_DROP_LENGTH] = "length",
	[SG_DP_DROP_CODE] = "code",
	[SG_DP_DROP_JOB] = "job",
	[SG_DP_DROP_TOKEN] = "token",
	[SG_DP_DROP_RANK] = "rank",
	[SG_DP_DROP_KEY] = "key",
	[SG_DP_DROP_CHUNK] = "chunk",
	[SG_DP_DROP_OFFSET] = "offset",
	[SG_DP_DROP_NELEM] = "nelem",
	[SG_DP_DROP_JOB_DTYPE] = "job_dtype",
	[SG_DP_DROP_DIRECTION] = "direction",
	[SG_DP_DROP_ROUND_OLD] = "round_old",
	[SG_DP_DROP_ROUND_NEW] = "round_new",
	[SG_DP_DROP_DUPLICATE] = "duplicate",
	[SG_DP_DROP_PENDING] = "pending",
	[SG_DP_DROP_JOIN] = "join",
	[SG_DP_DROP_PARTITION] = "partition",
	[SG_DP_DROP_FULL] = "full",
	[SG_DP_DROP_AUTH_SHORT] = "auth_short",
	[SG_DP_DROP_AUTH_JOB] = "auth_job",
	[SG_DP_DROP_AUTH_BAD] = "auth_bad",
	[SG_DP_DROP_AUTH_REPLAY] = "auth_replay",
	[SG_DP_DROP_AUTH_MISMATCH] = "auth_mismatch",
};

static const char *const type_names[SG_DP_T_MAX + 1] = {
	[SG_DP_T_PUSH] = "push", [SG_DP_T_RESULT] = "result", [SG_DP_T_PULL] = "pull",
	[SG_DP_T_NACK] = "nack", [SG_DP_T_ERROR] = "error",   [SG_DP_T_JOIN] = "join",
};

const char *sg_dp_drop_name(enum sg_dp_drop why)
{
	return (unsigned int)why < SG_DP_DROP_COUNT ? drop_names[why] : "unknown";
}

const char *sg_dp_type_name(unsigned int type)
{
	return type >= 1 && type <= SG_DP_T_MAX ? type_names[type] : "unknown";
}

static int drop(enum sg_dp_drop *why, enum sg_dp_drop reason)
{
	if (why != NULL)
		*why = reason;
	return -EBADMSG;
}

int sg_dp_parse(const void *buf, size_t len, struct sg_dp_msg *msg, enum sg_dp_drop *why)
{
	struct sg_dp_wire_hdr h;
	size_t plen, esz;

	if (buf == NULL || len < SG_DP_HDR_LEN)
		return drop(why, SG_DP_DROP_SHORT);
	/* Copy out: the packet may sit at any alignment. */
	memcpy(&h, buf, sizeof(h));
	if (be32toh(h.magic) != SG_DP_MAGIC)
		return drop(why, SG_DP_DROP_MAGIC);
	if (h.version != SG_DP_VERSION)
		return drop(why, SG_DP_DROP_VERSION);
	if (h.type < 1 || h.type > SG_DP_T_MAX)
		return drop(why, SG_DP_DROP_TYPE);
	if (h.flags & ~SG_DP_F_ALL)
		return drop(why, SG_DP_DROP_FLAGS);
	if (!sg_dtype_valid(h.dtype))
		return drop(why, SG_DP_DROP_DTYPE);

	msg->version = h.version;
	msg->type = h.type;
	msg->flags = h.flags;
	msg->dtype = h.dtype;
	msg->job = be32toh(h.job);
	msg->rank = be16toh(h.rank);
	msg->code = be16toh(h.code);
	msg->token = be64toh(h.token);
	msg->key = be32toh(h.key);
	msg->chunk = be32toh(h.chunk);
	msg->nchunks = be32toh(h.nchunks);
	msg->round = be32toh(h.round);
	msg->nelem = be32toh(h.nelem);
	msg->offset = be32toh(h.offset);

	plen = len - SG_DP_HDR_LEN;
	if (h.flags & SG_DP_F_MAC) {
		/* the rules below are the payload's, before the trailer (sg_auth.h) */
		size_t body = h.type == SG_DP_T_PUSH || h.type == SG_DP_T_RESULT ?
			      (size_t)msg->nelem * sg_dtype_size(h.dtype) : 0;

		if (plen < SG_DP_MAC_TRAILER || (plen >= body && plen < body + SG_DP_MAC_TRAILER))
			return drop(why, SG_DP_DROP_AUTH_SHORT);
		plen -= SG_DP_MAC_TRAILER;
	}
	if (plen > SG_DP_MAX_PAYLOAD)
		return drop(why, SG_DP_DROP_LENGTH);
	switch (h.type) {
	case SG_DP_T_PUSH:
	case SG_DP_T_RESULT:
		esz = sg_dtype_size(h.dtype);
		/* nelem <= 2^32-1 and esz <= 8: the product cannot overflow size_t. */
		if ((size_t)msg->nelem * esz != plen)
			return drop(why, SG_DP_DROP_LENGTH);
		break;
	case SG_DP_T_ERROR:
		if (plen > sizeof(uint64_t))
			return drop(why, SG_DP_DROP_LENGTH);
		break;
	case SG_DP_T_PULL:
		/* a PULL names a round, not elements: nelem says it carries some */
		if (plen != 0 || msg->nelem != 0)
			return drop(why, SG_DP_DROP_LENGTH);
		break;
	default:
		if (plen != 0)
			return drop(why, SG_DP_DROP_LENGTH);
		break;
	}
	/* code belongs to NACK and ERROR: a worker's message that sets it is not one we know */
	if ((h.type == SG_DP_T_PUSH || h.type == SG_DP_T_PULL) && msg->code != 0)
		return drop(why, SG_DP_DROP_CODE);
	msg->payload = plen != 0 ? (const uint8_t *)buf + SG_DP_HDR_LEN : NULL;
	msg->payload_len = (uint32_t)plen;
	if (why != NULL)
		*why = SG_DP_DROP_NONE;
	return 0;
}

int sg_dp_build_version_error(void *buf, size_t cap, const void *pkt, size_t len)
{
	struct sg_dp_version_info vi = {.lowest = htobe32(SG_DP_VERSION),
					.highest = htobe32(SG_DP_VERSION)};
	struct sg_dp_wire_hdr h;

	if (pkt == NULL || len < SG_DP_HDR_LEN)
		return -EINVAL;
	memcpy(&h, pkt, sizeof(h));
	if (be32toh(h.magic) != SG_DP_MAGIC || h.version == SG_DP_VERSION ||
	    (h.type != SG_DP_T_PUSH && h.type != SG_DP_T_PULL))
		return -EINVAL;
	if (cap < SG_DP_HDR_LEN + sizeof(vi))
		return -ENOSPC;
	h.version = SG_DP_VERSION;
	h.type = SG_DP_T_ERROR;
	h.flags = 0;
	h.dtype = SG_DTYPE_FP32; /* another version's dtype may be none of ours */
	h.code = htobe16(SG_DP_C_VERSION);
	memcpy(buf, &h, sizeof(h));
	memcpy((uint8_t *)buf + SG_DP_HDR_LEN, &vi, sizeof(vi));
	return SG_DP_HDR_LEN + (int)sizeof(vi);
}

int sg_dp_parse_version_error(const void *buf, size_t len, struct sg_dp_msg *msg,
			      uint32_t *node_lo, uint32_t *node_hi)
{
	uint8_t copy[SG_DP_HDR_LEN + sizeof(struct sg_dp_version_info)];
	struct sg_dp_version_info vi;
	struct sg_dp_wire_hdr h;

	if (buf == NULL || len != sizeof(copy))
		return -EBADMSG;
	memcpy(&h, buf, sizeof(h));
	if (be32toh(h.magic) != SG_DP_MAGIC || h.version == SG_DP_VERSION ||
	    h.type != SG_DP_T_ERROR || be16toh(h.code) != SG_DP_C_VERSION)
		return -EBADMSG;
	/* the rest is the worker's own push, echoed: read it as this version reads it */
	memcpy(copy, buf, len);
	copy[offsetof(struct sg_dp_wire_hdr, version)] = SG_DP_VERSION;
	if (sg_dp_parse(copy, len, msg, NULL) != 0)
		return -EBADMSG;
	memcpy(&vi, (const uint8_t *)buf + SG_DP_HDR_LEN, sizeof(vi));
	msg->version = h.version;
	msg->payload = (const uint8_t *)buf + SG_DP_HDR_LEN;
	*node_lo = be32toh(vi.lowest);
	*node_hi = be32toh(vi.highest);
	return 0;
}

void sg_dp_build_hdr(void *buf, const struct sg_dp_msg *msg)
{
	struct sg_dp_wire_hdr h = {
		.magic = htobe32(SG_DP_MAGIC),
		.version = SG_DP_VERSION,
		.type = msg->type,
		.flags = msg->flags,
		.dtype = msg->dtype,
		.job = htobe32(msg->job),
		.rank = htobe16(msg->rank),
		.code = htobe16(msg->code),
		.token = htobe64(msg->token),
		.key = htobe32(msg->key),
		.chunk = htobe32(msg->chunk),
		.nchunks = htobe32(msg->nchunks),
		.round = htobe32(msg->round),
		.nelem = htobe32(msg->nelem),
		.offset = htobe32(msg->offset),
	};

	memcpy(buf, &h, sizeof(h));
}

int sg_dp_build(void *buf, size_t cap, const struct sg_dp_msg *msg, const void *payload,
		size_t payload_len)
{
	if (payload_len > SG_DP_MAX_PAYLOAD)
		return -EINVAL;
	if (buf == NULL || cap < SG_DP_HDR_LEN + payload_len)
		return -ENOSPC;
	sg_dp_build_hdr(buf, msg);
	if (payload_len != 0)
		memcpy((uint8_t *)buf + SG_DP_HDR_LEN, payload, payload_len);
	return (int)(SG_DP_HDR_LEN + payload_len);
}

uint32_t sg_dp_chunk_count(uint32_t nelem, enum sg_dtype dtype, uint32_t chunk_bytes)
{
	uint64_t bytes = (uint64_t)nelem * sg_dtype_size(dtype);

	if (chunk_bytes == 0)
		return 0;
	return (uint32_t)((bytes + chunk_bytes - 1) / chunk_bytes);
}

int sg_dp_chunk_span(uint32_t nelem, enum sg_dtype dtype, uint32_t chunk_bytes, uint32_t chunk,
		     uint32_t *first, uint32_t *count, uint32_t *offset)
{
	size_t esz = sg_dtype_size(dtype);
	uint32_t per;

	if (esz == 0 || chunk_bytes == 0 || chunk_bytes % esz != 0 ||
	    chunk >= sg_dp_chunk_count(nelem, dtype, chunk_bytes))
		return -EINVAL;
	per = chunk_bytes / (uint32_t)esz;
	*first = chunk * per;
	*count = nelem - *first < per ? nelem - *first : per;
	*offset = chunk * chunk_bytes;
	return 0;
}
