/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the dataplane tests: a tx sink that records every packet
 * the engine emits, and a push/pull builder.
 */
#ifndef DP_TEST_UTIL_H
#define DP_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "sg_dp_engine.h"
#include "sg_test.h"

#define CAP_MAX 4096

/* One packet the engine sent, parsed. */
struct cap_pkt {
	uint64_t dest;
	uint32_t len;
	struct sg_dp_msg m;
	uint8_t buf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
};

struct cap {
	unsigned int n;
	uint64_t dest;  /* of the packet being filled */
	int fail_alloc; /* alloc returns NULL while set */
	struct cap_pkt pkts[CAP_MAX];
};

static void *cap_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct cap *c = ctx;

	if (c->fail_alloc || c->n == CAP_MAX || len > sizeof(c->pkts[0].buf))
		return NULL;
	c->pkts[c->n].dest = dest;
	*pkt = &c->pkts[c->n];
	return c->pkts[c->n].buf;
}

static void cap_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct cap *c = ctx;
	struct cap_pkt *p = pkt;

	p->len = len;
	SG_CHECK(p->dest == dest, "send: not the destination its alloc was given");
	SG_CHECK(sg_dp_parse(p->buf, len, &p->m, NULL) == 0, "engine sent a bad packet");
	c->n++;
}

static inline struct sg_dp_engine *cap_engine(struct cap *c, struct sg_dp_engine_conf *conf)
{
	conf->tx.alloc = cap_alloc;
	conf->tx.send = cap_send;
	conf->tx.ctx = c;
	return sg_dp_engine_create(conf);
}

/* Geometry of a push: filled from the job conf and the key. */
struct push_spec {
	uint32_t job;
	uint64_t token;
	enum sg_dtype dtype;
	uint32_t chunk_bytes;
	uint32_t key;
	uint32_t key_nelem;
};

/*
 * Build a PUSH (payload != NULL) or PULL (payload == NULL) of @chunk of the
 * key in @ps into @buf. @return the packet length.
 */
static inline uint32_t mk_pkt(uint8_t *buf, const struct push_spec *ps, uint32_t rank,
			      uint32_t chunk, uint32_t round, const void *payload)
{
	size_t esz = sg_dtype_size(ps->dtype);
	uint32_t per = ps->chunk_bytes / (uint32_t)esz;
	uint32_t first = chunk * per;
	uint32_t nelem = ps->key_nelem - first < per ? ps->key_nelem - first : per;
	struct sg_dp_msg m = {
		.type = payload ? SG_DP_T_PUSH : SG_DP_T_PULL,
		.dtype = (uint8_t)ps->dtype,
		.job = ps->job,
		.rank = (uint16_t)rank,
		.token = ps->token,
		.key = ps->key,
		.chunk = chunk,
		.nchunks = sg_dp_chunk_count(ps->key_nelem, ps->dtype, ps->chunk_bytes),
		.round = round,
		.nelem = payload ? nelem : 0,
		.offset = chunk * ps->chunk_bytes,
	};
	size_t plen = payload ? nelem * esz : 0;

	return (uint32_t)sg_dp_build(buf, SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD, &m, payload, plen);
}

static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif /* DP_TEST_UTIL_H */
