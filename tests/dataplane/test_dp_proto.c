/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wire format and validation: the header layout against hand-written bytes
 * (parser, builder and the single-field accessors),
 * every malformed case with its own drop counter (parser and engine), bad
 * configurations, and random garbage that must neither crash the engine nor
 * change a sum.
 */
#include <errno.h>
#include <stdio.h>

#include "dp_test_util.h"
#include "sg_parse.h"

static struct cap cap;

/* The example of docs/protocol.md, byte for byte. */
static const uint8_t doc_example[SG_DP_HDR_LEN] = {
	0x53, 0x47, 0x4d, 0x41, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x00,
	0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x02,
	0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x01, 0x20, 0x00, 0x00, 0x0b, 0x20,
};

static void test_layout(void)
{
	static uint8_t pkt[SG_DP_HDR_LEN + 1152], built[sizeof(pkt)];
	struct sg_dp_msg m;
	enum sg_dp_drop why = SG_DP_DROP_COUNT;

	memcpy(pkt, doc_example, sizeof(doc_example));
	for (unsigned int i = 0; i < 1152; i++)
		pkt[SG_DP_HDR_LEN + i] = (uint8_t)i;
	SG_CHECK_EQ(sg_dp_parse(pkt, sizeof(pkt), &m, &why), 0);
	SG_CHECK_EQ(why, SG_DP_DROP_NONE);
	SG_CHECK_EQ(m.type, SG_DP_T_PUSH);
	SG_CHECK_EQ(m.dtype, SG_DTYPE_FP32);
	SG_CHECK_EQ(m.job, 7);
	SG_CHECK_EQ(m.rank, 1);
	SG_CHECK(m.token == 0x0123456789abcdefull, "token %#" PRIx64, m.token);
	SG_CHECK_EQ(m.key, 42);
	SG_CHECK_EQ(m.chunk, 2);
	SG_CHECK_EQ(m.nchunks, 3);
	SG_CHECK_EQ(m.round, 5);
	SG_CHECK_EQ(m.nelem, 288);
	SG_CHECK_EQ(m.offset, 2848);
	SG_CHECK_EQ(m.payload_len, 1152);
	SG_CHECK(m.payload == pkt + SG_DP_HDR_LEN, "payload pointer");
	SG_CHECK_EQ(sg_dp_chunk_count(1000, SG_DTYPE_FP32, 1424), 3);
	{
		uint32_t first = 0, count = 0, off = 0;

		SG_CHECK_EQ(sg_dp_chunk_span(1000, SG_DTYPE_FP32, 1424, 2, &first, &count, &off), 0);
		SG_CHECK(first == 712 && count == 288 && off == 2848, "span %u %u %u", first, count,
			 off);
		SG_CHECK_EQ(sg_dp_chunk_span(1000, SG_DTYPE_FP32, 1424, 0, &first, &count, &off), 0);
		SG_CHECK(first == 0 && count == 356 && off == 0, "span 0: %u %u %u", first, count,
			 off);
		SG_CHECK_EQ(sg_dp_chunk_span(1000, SG_DTYPE_FP32, 1424, 3, &first, &count, &off),
			    -EINVAL);
		SG_CHECK_EQ(sg_dp_chunk_span(1000, SG_DTYPE_FP64, 1428, 0, &first, &count, &off),
			    -EINVAL);
		SG_CHECK_EQ(sg_dp_chunk_span(1000, 99, 1424, 0, &first, &count, &off), -EINVAL);
		SG_CHECK_EQ(sg_dp_chunk_span(1000, SG_DTYPE_FP32, 0, 0, &first, &count, &off),
			    -EINVAL);
		SG_CHECK_EQ(sg_dp_chunk_count(7, SG_DTYPE_INT8, 8), 1);
		SG_CHECK_EQ(sg_dp_chunk_count(0xffffffffu, SG_DTYPE_FP64, 8), 0xffffffffu);
	}
	/* Build gives the same bytes back. */
	SG_CHECK_EQ(sg_dp_build(built, sizeof(built), &m, m.payload, m.payload_len),
		    (int)sizeof(pkt));
	SG_CHECK(memcmp(built, pkt, sizeof(pkt)) == 0, "build(parse(x)) != x");
	SG_CHECK_EQ(sg_dp_build(built, sizeof(built) - 1, &m, m.payload, m.payload_len),
		    -ENOSPC);
	SG_CHECK_EQ(sg_dp_build(built, sizeof(built), &m, m.payload, SG_DP_MAX_PAYLOAD + 1),
		    -EINVAL);
	/* Unaligned packets parse the same. */
	{
		static uint8_t odd[sizeof(pkt) + 1];

		memcpy(odd + 1, pkt, sizeof(pkt));
		SG_CHECK_EQ(sg_dp_parse(odd + 1, sizeof(pkt), &m, NULL), 0);
		SG_CHECK_EQ(m.offset, 2848);
	}
}

/*
 * The single-field accessors (sg_dp_hdr_job() ...) that steering and key moves use
 * read the documented example's bytes as written, at every alignment.
 */
static void test_accessors(void)
{
	static uint8_t buf[SG_DP_HDR_LEN + 8];

	for (unsigned int a = 0; a < 8; a++) {
		const uint8_t *h = buf + a;

		memset(buf, 0xee, sizeof(buf));
		memcpy(buf + a, doc_example, SG_DP_HDR_LEN);
		SG_CHECK(sg_dp_hdr_magic(h) == SG_DP_MAGIC, "at +%u: magic %#x", a,
			 sg_dp_hdr_magic(h));
		SG_CHECK(sg_dp_hdr_type(h) == SG_DP_T_PUSH, "at +%u: type %u", a, sg_dp_hdr_type(h));
		SG_CHECK(sg_dp_hdr_job(h) == 7, "at +%u: job %u", a, sg_dp_hdr_job(h));
		SG_CHECK(sg_dp_hdr_token(h) == 0x0123456789abcdefull, "at +%u: token %#" PRIx64, a,
			 sg_dp_hdr_token(h));
		SG_CHECK(sg_dp_hdr_key(h) == 42, "at +%u: key %u", a, sg_dp_hdr_key(h));
		SG_CHECK(sg_dp_hdr_chunk(h) == 2, "at +%u: chunk %u", a, sg_dp_hdr_chunk(h));
		SG_CHECK(sg_dp_hdr_round(h) == 5, "at +%u: round %u", a, sg_dp_hdr_round(h));
	}
	/* another pattern: every byte distinct, so a field read one byte off shows */
	for (unsigned int i = 0; i < SG_DP_HDR_LEN; i++)
		buf[i] = (uint8_t)(0x80 + i);
	SG_CHECK(sg_dp_hdr_magic(buf) == 0x80818283u, "magic %#x", sg_dp_hdr_magic(buf));
	SG_CHECK(sg_dp_hdr_type(buf) == 0x85, "type %#x", sg_dp_hdr_type(buf));
	SG_CHECK(sg_dp_hdr_job(buf) == 0x88898a8bu, "job %#x", sg_dp_hdr_job(buf));
	SG_CHECK(sg_dp_hdr_token(buf) == 0x9091929394959697ull, "token %#" PRIx64,
		 sg_dp_hdr_token(buf));
	SG_CHECK(sg_dp_hdr_key(buf) == 0x98999a9bu, "key %#x", sg_dp_hdr_key(buf));
	SG_CHECK(sg_dp_hdr_chunk(buf) == 0x9c9d9e9fu, "chunk %#x", sg_dp_hdr_chunk(buf));
	SG_CHECK(sg_dp_hdr_round(buf) == 0xa4a5a6a7u, "round %#x", sg_dp_hdr_round(buf));
}

/* Patch one header byte of a copy of the example and expect @why. */
static void expect_parse(const uint8_t *pkt, size_t len, enum sg_dp_drop want, const char *what)
{
	struct sg_dp_msg m;
	enum sg_dp_drop why = SG_DP_DROP_NONE;
	int rc = sg_dp_parse(pkt, len, &m, &why);

	SG_CHECK(rc == -EBADMSG && why == want, "%s: rc %d, reason %s, want %s", what, rc,
		 sg_dp_drop_name(why), sg_dp_drop_name(want));
}

static uint8_t *example(uint8_t *pkt, size_t payload)
{
	memset(pkt, 0, SG_DP_HDR_LEN + payload);
	memcpy(pkt, doc_example, SG_DP_HDR_LEN);
	return pkt;
}

static void set_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_parse_malformed(void)
{
	static uint8_t p[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 16];
	const size_t full = SG_DP_HDR_LEN + 1152;

	expect_parse(NULL, 0, SG_DP_DROP_SHORT, "NULL");
	expect_parse(example(p, 1152), 0, SG_DP_DROP_SHORT, "empty");
	expect_parse(example(p, 1152), 1, SG_DP_DROP_SHORT, "1 byte");
	expect_parse(example(p, 1152), SG_DP_HDR_LEN - 1, SG_DP_DROP_SHORT, "47 bytes");
	/* One header byte patched in the example, each with the reason it must give. */
	static const struct {
		unsigned int off;
		uint8_t val;
		enum sg_dp_drop why;
		const char *what;
	} patches[] = {
		{0, 0x54, SG_DP_DROP_MAGIC, "magic"},
		{3, 0, SG_DP_DROP_MAGIC, "magic low byte"},
		{4, 0, SG_DP_DROP_VERSION, "version 0"},
		{4, 2, SG_DP_DROP_VERSION, "version 2"},
		{5, 0, SG_DP_DROP_TYPE, "type 0"},
		{5, SG_DP_T_MAX + 1, SG_DP_DROP_TYPE, "type 7"},
		{5, 0xff, SG_DP_DROP_TYPE, "type 255"},
		{6, 0x08, SG_DP_DROP_FLAGS, "flag 0x08"},
		{6, 0x02, SG_DP_DROP_AUTH_SHORT, "the MAC flag and no trailer"},
		{6, 0x81, SG_DP_DROP_FLAGS, "flag 0x81"},
		{7, SG_DTYPE_COUNT, SG_DP_DROP_DTYPE, "dtype 8"},
		{7, 0xff, SG_DP_DROP_DTYPE, "dtype 255"},
		{7, SG_DTYPE_FP64, SG_DP_DROP_LENGTH, "fp64 count"}, /* 288 * 8 != 1152 */
	};

	for (unsigned int i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
		example(p, 1152)[patches[i].off] = patches[i].val;
		expect_parse(p, full, patches[i].why, patches[i].what);
	}
	example(p, 1152)[6] = SG_DP_F_RETRANS;
	SG_CHECK_EQ(sg_dp_parse(p, full, &(struct sg_dp_msg){0}, NULL), 0);
	/* Element count against length. */
	expect_parse(example(p, 1152), full - 1, SG_DP_DROP_LENGTH, "payload one short");
	expect_parse(example(p, 1152), full + 1, SG_DP_DROP_LENGTH, "payload one long");
	expect_parse(example(p, 1152), SG_DP_HDR_LEN, SG_DP_DROP_LENGTH, "no payload");
	set_be32(example(p, 1152) + 40, 0xffffffffu);
	expect_parse(p, full, SG_DP_DROP_LENGTH, "huge nelem");
	example(p, 1152)[5] = SG_DP_T_RESULT;
	p[7] = SG_DTYPE_BF16;
	expect_parse(p, full, SG_DP_DROP_LENGTH, "result bf16 count");
	/* Oversized payload, consistent count: still too big for any MTU. */
	set_be32(example(p, SG_DP_MAX_PAYLOAD + 8) + 40, (SG_DP_MAX_PAYLOAD + 4) / 4);
	expect_parse(p, SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 4, SG_DP_DROP_LENGTH, "too big");
	/* Header-only types must not carry a payload; ERROR at most 8 bytes. */
	example(p, 8)[5] = SG_DP_T_PULL;
	expect_parse(p, SG_DP_HDR_LEN + 4, SG_DP_DROP_LENGTH, "pull with payload");
	/* the example's nelem (288) on a PULL, which carries no elements */
	expect_parse(p, SG_DP_HDR_LEN, SG_DP_DROP_LENGTH, "pull with nelem");
	set_be32(p + 40, 0);
	SG_CHECK_EQ(sg_dp_parse(p, SG_DP_HDR_LEN, &(struct sg_dp_msg){0}, NULL), 0);
	/* code is for NACK and ERROR: a PUSH or PULL that sets it is dropped */
	p[15] = 1;
	expect_parse(p, SG_DP_HDR_LEN, SG_DP_DROP_CODE, "pull with a code");
	example(p, 1152)[14] = 0x80;
	expect_parse(p, full, SG_DP_DROP_CODE, "push with a code");
	p[5] = SG_DP_T_NACK;
	p[40] = p[41] = p[42] = p[43] = 0;
	SG_CHECK_EQ(sg_dp_parse(p, SG_DP_HDR_LEN, &(struct sg_dp_msg){0}, NULL), 0);
	example(p, 8)[5] = SG_DP_T_PULL;
	set_be32(p + 40, 0);
	p[5] = SG_DP_T_NACK;
	expect_parse(p, SG_DP_HDR_LEN + 1, SG_DP_DROP_LENGTH, "nack with payload");
	p[5] = SG_DP_T_JOIN;
	expect_parse(p, SG_DP_HDR_LEN + 8, SG_DP_DROP_LENGTH, "join with payload");
	example(p, 16)[5] = SG_DP_T_ERROR;
	expect_parse(p, SG_DP_HDR_LEN + 9, SG_DP_DROP_LENGTH, "error payload 9");
	SG_CHECK_EQ(sg_dp_parse(p, SG_DP_HDR_LEN + 8, &(struct sg_dp_msg){0}, NULL), 0);
}

/* The one IPv4 parser (sg_ipv4_parse()): network byte order, strict dotted quads. */
static void test_ipv4(void)
{
	static const char *const bad[] = {
		"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-4", "+1.2.3.4", " 1.2.3.4",
		"1.2.3.4 ", "01.2.3.4", "1.2.3.04", "0x1.2.3.4", "1..3.4", "a.b.c.d", "1.2.3.4/8",
	};
	uint32_t ip = 0;

	SG_CHECK(sg_ipv4_parse("10.20.30.40", &ip) == 0 && ip == htobe32(0x0a141e28u),
		 "10.20.30.40: %08x", ip);
	SG_CHECK(sg_ipv4_parse("0.0.0.0", &ip) == 0 && ip == 0, "0.0.0.0");
	SG_CHECK(sg_ipv4_parse("255.255.255.255", &ip) == 0 && ip == 0xffffffffu, "broadcast");
	SG_CHECK_EQ(sg_ipv4_parse("127.0.0.1", NULL), 0);
	SG_CHECK_EQ(sg_ipv4_parse(NULL, &ip), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ip = 7;
		SG_CHECK(sg_ipv4_parse(bad[i], &ip) == -EINVAL && ip == 7, "'%s' taken", bad[i]);
	}
}

static void test_names(void)
{
	enum sg_mode mode;

	for (int i = 0; i < SG_DP_DROP_COUNT; i++) {
		SG_CHECK(strcmp(sg_dp_drop_name(i), "unknown") != 0, "reason %d has no name", i);
		for (int k = 0; k < i; k++)
			SG_CHECK(strcmp(sg_dp_drop_name(i), sg_dp_drop_name(k)) != 0,
				 "reasons %d and %d share a name", i, k);
	}
	SG_CHECK(strcmp(sg_dp_drop_name(SG_DP_DROP_COUNT), "unknown") == 0, "drop name");
	SG_CHECK(strcmp(sg_dp_drop_name(-1), "unknown") == 0, "drop name -1");
	SG_CHECK(strcmp(sg_dp_type_name(0), "unknown") == 0, "type 0");
	SG_CHECK(strcmp(sg_dp_type_name(SG_DP_T_PUSH), "push") == 0, "type push");
	SG_CHECK(strcmp(sg_dp_type_name(99), "unknown") == 0, "type 99");
	SG_CHECK(strcmp(sg_mode_name(SG_MODE_DETERM), "deterministic") == 0, "mode");
	SG_CHECK(strcmp(sg_mode_name(7), "unknown") == 0, "mode 7");
	SG_CHECK(sg_mode_from_name("ASYNC", &mode) == 0 && mode == SG_MODE_ASYNC, "a");
	SG_CHECK(sg_mode_from_name("determ", &mode) == 0 && mode == SG_MODE_DETERM, "d");
	SG_CHECK_EQ(sg_mode_from_name("fast", &mode), -EINVAL);
	SG_CHECK_EQ(sg_mode_from_name(NULL, &mode), -EINVAL);
	test_ipv4();
}

/* ---- engine-level validation ---------------------------------------- */

#define JOB 7
#define TOKEN 0x0123456789abcdefull
#define KEY 42
#define KEY_NELEM 1000
#define NW 3

static const struct push_spec spec = {
	.job = JOB, .token = TOKEN, .dtype = SG_DTYPE_FP32, .chunk_bytes = 1424,
	.key = KEY, .key_nelem = KEY_NELEM,
};

static struct sg_dp_engine *mk_engine(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 64};
	struct sg_dp_key keys[2] = {{.id = KEY, .nelem = KEY_NELEM}, {.id = 9, .nelem = 10}};
	struct sg_dp_job_conf jc = {
		.id = JOB, .nworkers = NW, .token = TOKEN, .dtype = SG_DTYPE_FP32,
		.keys = keys, .nkeys = 2,
	};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);

	SG_CHECK(e != NULL, "engine create");
	if (e != NULL)
		SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	return e;
}

/*
 * Feed one packet; exactly drops[want] must move, and nothing be summed. Nothing
 * is sent, but for a push with the job's token that disagrees with the job
 * (@p mm, an enum sg_dp_mismatch_what): its sender gets one ERROR MISMATCH that
 * echoes the push and carries the job's dtype and chunk size.
 */
static void expect_answered(struct sg_dp_engine *e, const uint8_t *pkt, uint32_t len,
			    enum sg_dp_drop want, const char *what, unsigned int mm)
{
	struct sg_dp_stats a, b;
	unsigned int sent = cap.n;
	struct sg_dp_msg in;
	int rc;

	sg_dp_engine_stats(e, &a);
	rc = sg_dp_engine_rx(e, pkt, len, 1, 0);
	sg_dp_engine_stats(e, &b);
	SG_CHECK(rc == -EBADMSG, "%s: rc %d", what, rc);
	for (int i = 0; i < SG_DP_DROP_COUNT; i++)
		SG_CHECK(b.drops[i] - a.drops[i] == (uint64_t)(i == (int)want),
			 "%s: counter %s moved by %" PRIu64 " (want %s)", what,
			 sg_dp_drop_name(i), b.drops[i] - a.drops[i], sg_dp_drop_name(want));
	SG_CHECK(b.rx_pushes == a.rx_pushes && cap.n == sent + (mm != 0), "%s: it was used", what);
	if (mm == 0 || cap.n != sent + 1 || sg_dp_parse(pkt, len, &in, NULL) != 0)
		return;
	{
		const struct cap_pkt *q = &cap.pkts[sent];
		const uint8_t *pl = q->m.payload;

		SG_CHECK(q->dest == 1 && q->m.type == SG_DP_T_ERROR &&
			 q->m.code == SG_DP_C_MISMATCH && q->m.job == in.job &&
			 q->m.token == in.token && q->m.rank == in.rank && q->m.key == in.key &&
			 q->m.chunk == in.chunk && q->m.nchunks == in.nchunks &&
			 q->m.round == in.round && q->m.payload_len == 8, "%s: the ERROR", what);
		SG_CHECK(q->m.payload_len == 8 && pl[0] == mm && pl[1] == SG_DTYPE_FP32 &&
			 pl[2] == 0 && pl[3] == 0 && get_be32(pl + 4) == 1424,
			 "%s: payload %02x %02x, chunk %u", what, pl[0], pl[1], get_be32(pl + 4));
	}
	cap.n = sent;
}

static void expect_drop(struct sg_dp_engine *e, const uint8_t *pkt, uint32_t len,
			enum sg_dp_drop want, const char *what)
{
	expect_answered(e, pkt, len, want, what, 0);
}

static void test_engine_drops(void)
{
	static uint8_t p[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 16];
	static float data[KEY_NELEM];
	struct push_spec s = spec;
	struct sg_dp_engine *e = mk_engine();
	struct sg_dp_stats st;
	uint32_t len;

	if (e == NULL)
		return;
	/* Every parser reason reaches its engine counter. */
	expect_drop(e, example(p, 8), SG_DP_HDR_LEN - 1, SG_DP_DROP_SHORT, "e short");
	example(p, 8)[0] ^= 1;
	expect_drop(e, p, SG_DP_HDR_LEN, SG_DP_DROP_MAGIC, "e magic");
	/* (a PUSH or PULL of another version is answered: test_engine_version()) */
	example(p, 8)[4] = 9;
	p[5] = SG_DP_T_RESULT;
	expect_drop(e, p, SG_DP_HDR_LEN, SG_DP_DROP_VERSION, "e version");
	example(p, 8)[5] = 77;
	expect_drop(e, p, SG_DP_HDR_LEN, SG_DP_DROP_TYPE, "e type");
	example(p, 8)[6] = 0x40;
	expect_drop(e, p, SG_DP_HDR_LEN, SG_DP_DROP_FLAGS, "e flags");
	example(p, 8)[7] = 42;
	expect_drop(e, p, SG_DP_HDR_LEN, SG_DP_DROP_DTYPE, "e dtype");
	expect_drop(e, example(p, 8), SG_DP_HDR_LEN + 4, SG_DP_DROP_LENGTH, "e length");
	len = mk_pkt(p, &s, 0, 2, 5, NULL);
	set_be32(p + 40, 288);
	expect_drop(e, p, len, SG_DP_DROP_LENGTH, "e pull with nelem");
	len = mk_pkt(p, &s, 0, 2, 5, data);
	p[15] = SG_DP_C_BUSY;
	expect_drop(e, p, len, SG_DP_DROP_CODE, "e push with a code");

	/* Engine-level reasons, each from an otherwise valid push. */
	len = mk_pkt(p, &s, 0, 2, 5, data);
	p[5] = SG_DP_T_JOIN;
	expect_drop(e, p, SG_DP_HDR_LEN, SG_DP_DROP_JOIN, "join");
	for (uint8_t t = SG_DP_T_RESULT; t <= SG_DP_T_ERROR; t++) {
		if (t == SG_DP_T_PULL)
			continue;
		len = mk_pkt(p, &s, 0, 2, 5, data);
		p[5] = t;
		expect_drop(e, p, t == SG_DP_T_RESULT ? len : SG_DP_HDR_LEN,
			    SG_DP_DROP_DIRECTION, sg_dp_type_name(t));
	}
	s.job = 8;
	expect_drop(e, p, mk_pkt(p, &s, 0, 0, 0, data), SG_DP_DROP_JOB, "unknown job");
	s = spec;
	s.token ^= 1ull << 63;
	expect_drop(e, p, mk_pkt(p, &s, 0, 0, 0, data), SG_DP_DROP_TOKEN, "token");
	s = spec;
	expect_drop(e, p, mk_pkt(p, &s, NW, 0, 0, data), SG_DP_DROP_RANK, "rank N");
	expect_drop(e, p, mk_pkt(p, &s, 0xffff, 0, 0, data), SG_DP_DROP_RANK, "rank 65535");
	s.key = 43;
	expect_answered(e, p, mk_pkt(p, &s, 0, 0, 0, data), SG_DP_DROP_KEY, "unknown key", SG_DP_MM_KEY);
	s = spec;
	len = mk_pkt(p, &s, 0, 2, 0, data);
	set_be32(p + 28, 3); /* chunk == nchunks */
	expect_answered(e, p, len, SG_DP_DROP_CHUNK, "chunk index", SG_DP_MM_CHUNKS);
	len = mk_pkt(p, &s, 0, 2, 0, data);
	set_be32(p + 32, 4); /* wrong chunk count */
	expect_answered(e, p, len, SG_DP_DROP_CHUNK, "chunk count", SG_DP_MM_CHUNKS);
	len = mk_pkt(p, &s, 0, 2, 0, data);
	set_be32(p + 44, 2848 + 4);
	expect_answered(e, p, len, SG_DP_DROP_OFFSET, "offset", SG_DP_MM_OFFSET);
	set_be32(p + 44, 0xffffffffu);
	expect_answered(e, p, len, SG_DP_DROP_OFFSET, "offset far out", SG_DP_MM_OFFSET);
	len = mk_pkt(p, &s, 0, 2, 0, data);
	p[7] = SG_DTYPE_INT32; /* same size, other type */
	expect_answered(e, p, len, SG_DP_DROP_JOB_DTYPE, "job dtype", SG_DP_MM_DTYPE);
	/* A full chunk's count on the short last chunk, with a matching length. */
	s.key_nelem = 2000;
	len = mk_pkt(p, &s, 0, 2, 0, data);
	set_be32(p + 32, 3);
	expect_answered(e, p, len, SG_DP_DROP_NELEM, "nelem", SG_DP_MM_NELEM);
	s = spec;

	/* Nothing above left a trace: a clean round sums exactly. */
	for (uint32_t r = 0; r < NW; r++) {
		for (unsigned int i = 0; i < KEY_NELEM; i++)
			data[i] = (float)(i + 1000 * r);
		cap.n = 0;
		for (uint32_t c = 0; c < 3; c++)
			SG_CHECK(sg_dp_engine_rx(e, p, mk_pkt(p, &s, r, c, 5,
							       data + c * 356), 100 + r, 0) > 0, "used");
	}
	SG_CHECK_EQ(cap.n, 3 * NW);
	for (unsigned int i = 0; i < cap.n; i++) {
		const struct cap_pkt *q = &cap.pkts[i];
		const float *v = q->m.payload;
		bool ok = true;

		SG_CHECK_EQ(q->m.type, SG_DP_T_RESULT);
		SG_CHECK_EQ(q->dest, (uint64_t)100 + q->m.rank);
		for (unsigned int k = 0; k < q->m.nelem; k++) {
			unsigned int idx = q->m.chunk * 356 + k;
			float f;

			memcpy(&f, &v[k], sizeof(f));
			ok &= f == (float)(3 * idx + 3000);
		}
		SG_CHECK(ok, "result of chunk %u wrong", q->m.chunk);
	}
	sg_dp_engine_stats(e, &st);
	SG_CHECK_EQ(st.rounds_completed, 3);
	SG_CHECK_EQ(st.rx_pushes, 3 * NW);
	sg_dp_engine_destroy(e);
}

/* Random bytes and mutated packets of another job: no crash, job 7 untouched. */
/*
 * Another protocol version (docs/protocol.md, "Versions"): a node answers a PUSH or
 * PULL of another version with ERROR VERSION, byte for byte as the document says, at
 * most 32 times per 100 ms; anything else of another version is dropped unanswered.
 * A worker reads a newer node's answer from the stable bytes and its own echoed push.
 */
static void test_engine_version(void)
{
	static const uint8_t payload_v1[8] = {0, 0, 0, 1, 0, 0, 0, 1};
	static uint8_t p[SG_DP_HDR_LEN + 1152], r[SG_DP_HDR_LEN + 8];
	struct sg_dp_engine *e = mk_engine();
	struct sg_dp_stats a, b;
	uint32_t lo = 0, hi = 0;
	struct sg_dp_msg m;
	unsigned int sent;

	if (e == NULL)
		return;
	for (int type = 1; type <= 9; type++) {
		bool answered = type == SG_DP_T_PUSH || type == SG_DP_T_PULL;

		cap.n = 0;
		example(p, 1152)[4] = 2; /* a version-2 worker's push (this layout is a guess) */
		p[5] = (uint8_t)type;
		p[7] = 0x42; /* a dtype version 1 does not know */
		sg_dp_engine_stats(e, &a);
		SG_CHECK_EQ(sg_dp_engine_rx(e, p, SG_DP_HDR_LEN + 1152, 5, 0), -EBADMSG);
		sg_dp_engine_stats(e, &b);
		SG_CHECK(b.drops[SG_DP_DROP_VERSION] == a.drops[SG_DP_DROP_VERSION] + 1,
			 "type %d of version 2: not dropped as version", type);
		SG_CHECK(cap.n == answered && b.errors_sent == a.errors_sent + answered,
			 "type %d of version 2: %u answers", type, cap.n);
		if (!answered || cap.n != 1)
			continue;
		/* the answer: bytes 0..15 patched, 16..47 the push's own, then 1 to 1 */
		SG_CHECK(cap.pkts[0].dest == 5 && cap.pkts[0].len == SG_DP_HDR_LEN + 8,
			 "the answer goes back, 56 bytes");
		SG_CHECK(memcmp(cap.pkts[0].buf, "\x53\x47\x4d\x41\x01\x05\x00\x00", 8) == 0,
			 "answer bytes 0..7: magic, version 1, ERROR, flags 0, dtype 0");
		SG_CHECK(memcmp(cap.pkts[0].buf + 8, p + 8, 6) == 0 && cap.pkts[0].buf[14] == 0 &&
			 cap.pkts[0].buf[15] == 8, "answer bytes 8..15: job, rank, code VERSION");
		SG_CHECK(memcmp(cap.pkts[0].buf + 16, p + 16, 32) == 0, "bytes 16..47 echoed");
		SG_CHECK(memcmp(cap.pkts[0].buf + SG_DP_HDR_LEN, payload_v1, 8) == 0,
			 "payload: versions 1 to 1");
	}
	/* short, or without the magic: not Sigma's, never answered */
	cap.n = 0;
	example(p, 8)[4] = 2;
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, SG_DP_HDR_LEN - 1, 5, 0), -EBADMSG);
	p[0] = 0;
	SG_CHECK_EQ(sg_dp_engine_rx(e, p, SG_DP_HDR_LEN, 5, 0), -EBADMSG);
	SG_CHECK_EQ(cap.n, 0);
	/* a flood of them gets 32 answers per 100 ms (the sender shows no token) */
	example(p, 1152)[4] = 3;
	for (int i = 0; i < 100; i++)
		sg_dp_engine_rx(e, p, SG_DP_HDR_LEN + 1152, 5, 200000000ull + (uint64_t)i);
	SG_CHECK(cap.n == 32, "100 pushes of version 3 within 100 us: %u answers, want 32", cap.n);
	sent = cap.n;
	sg_dp_engine_rx(e, p, SG_DP_HDR_LEN + 1152, 5, 300000001ull);
	SG_CHECK(cap.n == sent + 1, "100 ms later: answered again");
	cap.n = 0;
	sg_dp_engine_destroy(e);

	/* the worker's side: a version-2 node answered the doc's push of version 1 */
	memcpy(r, doc_example, SG_DP_HDR_LEN);
	r[4] = 2, r[5] = SG_DP_T_ERROR, r[15] = SG_DP_C_VERSION;
	memcpy(r + SG_DP_HDR_LEN, "\x00\x00\x00\x02\x00\x00\x00\x03", 8);
	SG_CHECK_EQ(sg_dp_parse_version_error(r, sizeof(r), &m, &lo, &hi), 0);
	SG_CHECK(m.version == 2 && m.type == SG_DP_T_ERROR && m.code == SG_DP_C_VERSION &&
		 m.job == 7 && m.rank == 1 && m.token == 0x0123456789abcdefull && m.key == 42 &&
		 m.chunk == 2 && m.nchunks == 3 && m.round == 5 && lo == 2 && hi == 3,
		 "the echoed push: job %u key %u chunk %u round %u, versions %u..%u", m.job,
		 m.key, m.chunk, m.round, lo, hi);
	SG_CHECK_EQ(sg_dp_parse_version_error(r, sizeof(r) - 1, &m, &lo, &hi), -EBADMSG);
	r[4] = SG_DP_VERSION; /* our own version never sends it */
	SG_CHECK_EQ(sg_dp_parse_version_error(r, sizeof(r), &m, &lo, &hi), -EBADMSG);
	r[4] = 2, r[15] = SG_DP_C_MISMATCH;
	SG_CHECK_EQ(sg_dp_parse_version_error(r, sizeof(r), &m, &lo, &hi), -EBADMSG);
	r[15] = SG_DP_C_VERSION, r[5] = SG_DP_T_NACK;
	SG_CHECK_EQ(sg_dp_parse_version_error(r, sizeof(r), &m, &lo, &hi), -EBADMSG);
	r[5] = SG_DP_T_ERROR, r[0] = 0;
	SG_CHECK_EQ(sg_dp_parse_version_error(r, sizeof(r), &m, &lo, &hi), -EBADMSG);
	/* the node's builder refuses its own version and what it must not answer */
	SG_CHECK_EQ(sg_dp_build_version_error(r, sizeof(r), doc_example, SG_DP_HDR_LEN), -EINVAL);
	example(p, 8)[4] = 2;
	SG_CHECK_EQ(sg_dp_build_version_error(r, sizeof(r) - 1, p, SG_DP_HDR_LEN), -ENOSPC);
	SG_CHECK_EQ(sg_dp_build_version_error(r, sizeof(r), p, SG_DP_HDR_LEN - 1), -EINVAL);
}

static void test_garbage(void)
{
	static uint8_t p[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64];
	static float data[KEY_NELEM];
	struct sg_dp_engine *e = mk_engine();
	struct sg_dp_key k2 = {.id = KEY, .nelem = KEY_NELEM};
	struct sg_dp_job_conf jc = {.id = 2, .nworkers = 4, .token = 5, .dtype = SG_DTYPE_FP32,
				    .keys = &k2, .nkeys = 1};
	struct push_spec s2 = spec;
	struct sg_dp_stats st;
	uint64_t rng = 12345, used = 0, dropped = 0;

	if (e == NULL)
		return;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	s2.job = 2;
	s2.token = 5;
	for (unsigned int it = 0; it < 60000; it++) {
		uint64_t r = splitmix64(&rng);
		uint32_t len;
		int rc;

		if (it % 3 == 0) {
			len = (uint32_t)(r % sizeof(p));
			for (uint32_t i = 0; i < len; i += 8) {
				uint64_t w = splitmix64(&rng);

				memcpy(p + i, &w, len - i < 8 ? len - i : 8);
			}
		} else {
			len = mk_pkt(p, &s2, (uint32_t)(r >> 8) % 4, (uint32_t)(r >> 16) % 3,
				     (uint32_t)(r >> 24) % 4, (r & 1) ? data : NULL);
			for (unsigned int f = 0; f < 1 + (r >> 32) % 3; f++) {
				uint64_t w = splitmix64(&rng);

				p[w % SG_DP_HDR_LEN] ^= (uint8_t)(1u << ((w >> 8) % 8));
			}
			if ((r >> 40) % 8 == 0)
				len = (uint32_t)((r >> 44) % (len + 1));
		}
		cap.n = 0;
		rc = sg_dp_engine_rx(e, p, len, r, it * 1000ull);
		if (rc <= 0 && rc != -EBADMSG)
			SG_CHECK(0, "rx returned %d: neither used (> 0) nor -EBADMSG", rc);
		if (rc > 0)
			used++;
		else
			dropped++;
		if (it % 97 == 0)
			sg_dp_engine_poll(e, it * 1000ull);
	}
	sg_dp_engine_stats(e, &st);
	{
		uint64_t sum = 0;

		for (int i = 0; i < SG_DP_DROP_COUNT; i++)
			sum += st.drops[i];
		SG_CHECK(sum == dropped && st.rx_packets == used + dropped,
			 "drops %" PRIu64 " vs %" PRIu64 ", rx %" PRIu64, sum, dropped,
			 st.rx_packets);
		SG_CHECK_EQ(st.drops[SG_DP_DROP_NONE], 0);
	}
	/* Job 7 still sums a clean round exactly. */
	cap.n = 0;
	for (uint32_t r = 0; r < NW; r++) {
		for (unsigned int i = 0; i < KEY_NELEM; i++)
			data[i] = (float)(r + 1) * 0.5f;
		sg_dp_engine_rx(e, p, mk_pkt(p, &spec, r, 1, 1, data), 100 + r, 1);
	}
	SG_CHECK_EQ(cap.n, NW);
	for (unsigned int i = 0; i < cap.n; i++) {
		float f;

		memcpy(&f, cap.pkts[i].m.payload, sizeof(f));
		SG_CHECK(f == 3.0f && cap.pkts[i].m.type == SG_DP_T_RESULT, "sum %g", f);
	}
	sg_dp_engine_destroy(e);
}

static void test_bad_config(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 8, .max_jobs = 2};
	struct sg_dp_key keys[3] = {{1, 100}, {2, 100}, {1, 5}};
	struct sg_dp_job_conf ok = {.id = 1, .nworkers = 2, .dtype = SG_DTYPE_FP32,
				    .keys = keys, .nkeys = 2};
	struct sg_dp_job_conf jc;
	struct sg_dp_engine_conf bad;
	struct sg_dp_engine *e;

	errno = 0;
	SG_CHECK(sg_dp_engine_create(NULL) == NULL && errno == EINVAL, "NULL conf");
	bad = ec;
	errno = 0;
	SG_CHECK(sg_dp_engine_create(&bad) == NULL && errno == EINVAL, "no tx");
	bad.max_payload = SG_MAX_CHUNK_BYTES + 8;
	errno = 0;
	SG_CHECK(cap_engine(&cap, &bad) == NULL && errno == EINVAL, "max_payload");
	bad.max_payload = 1000 + 4;
	SG_CHECK(cap_engine(&cap, &bad) == NULL, "max_payload not a multiple of 8");
	bad = ec;
	bad.max_jobs = 100000;
	SG_CHECK(cap_engine(&cap, &bad) == NULL, "max_jobs");
	bad = ec;
	bad.pool_bufs = (1u << 24) + 1;
	SG_CHECK(cap_engine(&cap, &bad) == NULL, "pool_bufs");
	sg_dp_engine_destroy(NULL);

	e = cap_engine(&cap, &ec);
	SG_CHECK(e != NULL, "create");
	if (e == NULL)
		return;
	SG_CHECK_EQ(sg_dp_engine_buf_size(e) % 64, 0);
	SG_CHECK(sg_dp_engine_buf_size(e) >= 2 * SG_DP_PAYLOAD_MTU1500, "buf size");
	SG_CHECK_EQ(sg_dp_engine_add_job(e, NULL), -EINVAL);
#define BAD_JOB(field, value)                                                              \
	do {                                                                               \
		jc = ok;                                                                   \
		jc.field = value;                                                          \
		SG_CHECK(sg_dp_engine_add_job(e, &jc) == -EINVAL, #field " = " #value);   \
	} while (0)
	BAD_JOB(nworkers, 0);
	BAD_JOB(nworkers, 65);
	BAD_JOB(dtype, (enum sg_dtype)99);
	BAD_JOB(mode, (enum sg_mode)9);
	BAD_JOB(sum_flags, 0x10);
	BAD_JOB(chunk_bytes, 12);
	BAD_JOB(chunk_bytes, SG_DP_PAYLOAD_MTU1500 + 8);
	BAD_JOB(keys, NULL);
	BAD_JOB(nkeys, 0);
	BAD_JOB(nkeys, 3); /* key 1 twice */
	BAD_JOB(partition_bytes, 399);
#undef BAD_JOB
	keys[1].nelem = 0;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &ok), -EINVAL);
	keys[1].nelem = 100;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &ok), 0);
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &ok), -EEXIST);
	jc = ok;
	jc.id = 2;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	jc.id = 3;
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), -ENOSPC);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 9), -ENOENT);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 1), 0);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 1), -ENOENT);
	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
	sg_dp_engine_destroy(e);
}

int main(void)
{
	test_layout();
	test_accessors();
	test_parse_malformed();
	test_names();
	test_engine_drops();
	test_engine_version();
	test_garbage();
	test_bad_config();
	return sg_test_finish("dp_proto");
}
