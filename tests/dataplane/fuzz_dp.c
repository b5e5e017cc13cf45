/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the packet parser and the engine entry point.
 *
 * The input is a little program. Each step starts with an opcode byte:
 *   0: a raw packet follows (1 length byte, then that many bytes, repeated
 *      x36 so that jumbo-sized garbage is reachable);
 *   1: a well-formed PUSH whose fields come from the next bytes (job, rank,
 *      key, chunk, round, flags, corruption), so deep engine states are
 *      reached without guessing the token;
 *   2: a PULL, built the same way;
 *   3: advance time and poll (timeouts, reclaim);
 *   4: remove a job and add it back.
 * The last job is open, of dtype any, with room for 6 chunks: its pushes make
 * its keys, from geometries (dtype, chunk count, offset, element count) the
 * input picks. Job 2 has auth = mac: built pushes carry no trailer, one of
 * input bytes, or one signed with the rank's key (sequence numbers that
 * start where the input leaves them), so its checks and its signed replies
 * are reached; the others get such trailers too (auth_mismatch).
 * Every packet also goes through sg_dp_parse() alone. After each input the
 * engine is destroyed; before that, all jobs are removed and the pool must be
 * full again (a leaked buffer aborts).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>

#include "sg_auth.h"
#include "sg_dp_engine.h"

#define NJOBS 4 /* the last one open */
#define POOL 12

static uint8_t txbuf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];

static void *fz_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	*pkt = txbuf;
	return len <= sizeof(txbuf) ? txbuf : NULL;
}

static void fz_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct sg_dp_msg m;

	/* What the engine sends must itself parse. */
	if (sg_dp_parse(pkt, len, &m, NULL) != 0)
		abort();
}

static const struct sg_dp_key keys[2] = {{.id = 1, .nelem = 40}, {.id = 2, .nelem = 3}};
static const uint8_t auth_key[SG_AUTH_KEY_BYTES] = {1, 2, 3};
static struct sg_auth_signer signers[4]; /* job 2's ranks */

static void job_conf(struct sg_dp_job_conf *jc, unsigned int i)
{
	static const enum sg_dtype dts[NJOBS] = {SG_DTYPE_FP32, SG_DTYPE_BF16, SG_DTYPE_INT8,
						 SG_DTYPE_ANY};

	memset(jc, 0, sizeof(*jc));
	jc->id = i + 1;
	jc->nworkers = 1 + 3 * i; /* 1, 4, 7, 10 */
	jc->token = 0x1000 + i;
	jc->dtype = dts[i];
	jc->mode = (enum sg_mode)(i % SG_MODE_COUNT);
	jc->chunk_bytes = 32;
	jc->max_inflight = 4;
	jc->keys = keys;
	jc->nkeys = 2;
	if (i == 1)
		jc->auth_key = auth_key;
	if (i == NJOBS - 1) {
		/* keys of up to 3 chunks of 32 bytes, 6 slots in all */
		jc->keys = NULL;
		jc->nkeys = 0;
		jc->open = true;
		jc->slots = 6;
		jc->partition_bytes = 96;
	}
}

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t next(struct rd *r)
{
	if (r->n == 0)
		return 0;
	r->n--;
	return *r->p++;
}

/* Packets the engine used and dropped in this input, to check its counters. */
static uint64_t n_used, n_dropped;

static void feed(struct sg_dp_engine *e, const uint8_t *pkt, uint32_t len, uint64_t src,
		 uint64_t now)
{
	struct sg_dp_msg m;
	enum sg_dp_drop why;
	int rc;

	sg_dp_parse(pkt, len, &m, &why);
	rc = sg_dp_engine_rx(e, pkt, len, src, now);
	/* used: a positive mask; dropped: -EBADMSG; nothing else, ever */
	if (rc == 0 || (rc < 0 && rc != -EBADMSG) || rc >= 16)
		abort();
	if (rc > 0)
		n_used++;
	else
		n_dropped++;
}

/* A push or PULL of the open job: any of 4 keys, the geometry from the input. */
static void build_open(struct rd *r, struct sg_dp_msg *m, uint8_t b0, uint8_t b2, uint8_t b3,
		       uint32_t *nelem)
{
	uint8_t b5 = next(r), b6 = next(r);
	uint32_t per;

	m->dtype = (uint8_t)(b5 % SG_DTYPE_COUNT);
	per = 32 / (uint32_t)sg_dtype_size((enum sg_dtype)m->dtype);
	m->key = 1 + (b0 >> 2) % 4;
	m->nchunks = b2 % 5; /* 4: past the partition; 0: no chunk at all */
	m->chunk = (uint32_t)(b2 >> 3) % (m->nchunks + 1);
	m->offset = m->chunk * 32 + ((b6 & 7) == 0 ? 8 : 0);
	m->round = (uint32_t)(b3 % 6) - 1;
	*nelem = (b6 >> 3) & 1 ? per : (uint32_t)(b6 >> 4) % (per + 2);
	if (*nelem * sg_dtype_size((enum sg_dtype)m->dtype) > 64)
		*nelem = per;
}

static uint32_t build(struct rd *r, uint8_t *pkt, int push)
{
	uint8_t b0 = next(r), b1 = next(r), b2 = next(r), b3 = next(r), b4 = next(r);
	unsigned int ji = b0 % NJOBS;
	struct sg_dp_job_conf jc;
	const struct sg_dp_key *k;
	struct sg_dp_msg m;
	uint8_t payload[64];
	uint32_t per, nelem, nchunks, len;
	size_t esz;

	job_conf(&jc, ji);
	k = &keys[(b0 >> 2) & 1];
	esz = jc.open ? 1 : sg_dtype_size(jc.dtype);
	per = jc.chunk_bytes / (uint32_t)esz;
	nchunks = sg_dp_chunk_count(k->nelem, jc.dtype, jc.chunk_bytes);
	memset(&m, 0, sizeof(m));
	m.type = push ? SG_DP_T_PUSH : SG_DP_T_PULL;
	m.dtype = (uint8_t)jc.dtype;
	m.job = jc.id;
	m.token = jc.token;
	m.rank = (uint16_t)(b1 % (jc.nworkers + 1)); /* sometimes out of range */
	m.key = k->id;
	m.chunk = b2 % (nchunks + 1);
	m.nchunks = nchunks;
	m.round = (uint32_t)(b3 % 6) - 1; /* around 0, wrapping */
	m.flags = (b0 >> 3) & 1;
	m.offset = m.chunk * jc.chunk_bytes;
	nelem = m.chunk < nchunks ? (k->nelem - m.chunk * per < per ? k->nelem - m.chunk * per : per)
				  : per;
	if (jc.open) {
		build_open(r, &m, b0, b2, b3, &nelem);
		esz = sg_dtype_size((enum sg_dtype)m.dtype);
	}
	m.nelem = push ? nelem : 0;
	for (uint32_t i = 0; i < nelem * esz && i < sizeof(payload); i++)
		payload[i] = next(r);
	len = (uint32_t)sg_dp_build(pkt, SG_DP_HDR_LEN + sizeof(payload), &m, payload,
				    push ? nelem * esz : 0);
	/* a trailer: none, the input's bytes, or signed with the rank's key */
	if ((b4 >> 2) & 3) {
		pkt[6] |= SG_DP_F_MAC;
		if ((b4 >> 3) & 1 && ji == 1 && m.rank < 4) {
			sg_auth_sign(&signers[m.rank], pkt, len);
		} else {
			for (uint32_t i = 0; i < SG_AUTH_TRAILER_BYTES; i++)
				pkt[len + i] = next(r);
		}
		len += SG_AUTH_TRAILER_BYTES - (b4 >> 6 == 3 ? next(r) % 33 : 0);
	}
	/* Occasionally corrupt one header byte. */
	if (b4 >= 0xf0)
		pkt[b4 % SG_DP_HDR_LEN] ^= next(r);
	return len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Timeout reports and job notices would flood the fuzzer's output. */
	rte_log_set_level_pattern("sigma.*", RTE_LOG_EMERG);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64];
	struct sg_dp_engine_conf ec = {
		.numa_node = -1, .pool_bufs = POOL, .max_payload = 64, .max_jobs = NJOBS,
		.slot_timeout_ns = 1000, .shadow_hold_ns = 300,
		.tx = {.alloc = fz_alloc, .send = fz_send},
	};
	struct rd r = {data, size};
	struct sg_dp_engine *e;
	struct sg_dp_job_conf jc;
	struct sg_dp_stats st;
	uint64_t now = 0;

	/* The parser alone, on the raw input. */
	{
		struct sg_dp_msg m;

		sg_dp_parse(data, size, &m, NULL);
	}
	n_used = n_dropped = 0;
	for (uint16_t k = 0; k < 4; k++) {
		uint8_t rk[SG_AUTH_KEY_BYTES];

		sg_auth_rank_key(auth_key, k, SG_AUTH_RANK, rk);
		sg_auth_signer_init(&signers[k], rk, sg_auth_key_id(auth_key));
		signers[k].seq = (uint64_t)k << 40; /* each input alike */
	}
	e = sg_dp_engine_create(&ec);
	if (e == NULL)
		abort();
	for (unsigned int i = 0; i < NJOBS; i++) {
		job_conf(&jc, i);
		if (sg_dp_engine_add_job(e, &jc) != 0)
			abort();
	}
	while (r.n > 0) {
		uint8_t op = next(&r) % 5;
		uint32_t len;

		switch (op) {
		case 0:
			len = (uint32_t)next(&r) * 36;
			if (len > r.n)
				len = (uint32_t)r.n;
			memcpy(pkt, r.p, len);
			r.p += len;
			r.n -= len;
			feed(e, pkt, len, 7, now);
			break;
		case 1:
		case 2:
			len = build(&r, pkt, op == 1);
			feed(e, pkt, len, 100 + (next(&r) & 7), now);
			break;
		case 3:
			now += next(&r) * 10u;
			sg_dp_engine_poll(e, now);
			break;
		default:
			job_conf(&jc, next(&r) % NJOBS);
			if (sg_dp_engine_remove_job(e, jc.id) != 0 ||
			    sg_dp_engine_add_job(e, &jc) != 0)
				abort();
			break;
		}
		now++;
	}
	for (unsigned int i = 0; i < NJOBS; i++)
		if (sg_dp_engine_remove_job(e, i + 1) != 0)
			abort();
	sg_dp_engine_stats(e, &st);
	if (st.pool_free != POOL || st.slots_active != 0 || st.incomplete_slots != 0)
		abort();
	/* Every packet is either used or dropped under exactly one reason. */
	{
		uint64_t drops = 0;

		for (int i = 0; i < SG_DP_DROP_COUNT; i++)
			drops += st.drops[i];
		if (drops != n_dropped || st.rx_packets != n_used + n_dropped ||
		    st.drops[SG_DP_DROP_NONE] != 0)
			abort();
	}
	sg_dp_engine_destroy(e);
	return 0;
}
