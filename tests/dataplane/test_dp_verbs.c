/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the verbs transport that need no RDMA device: configuration
 * (with garbage), the memlock verdict, GID choice, work-request building, UD
 * source addressing, set-up error paths, and the whole data path (receive ->
 * engine -> send, buffer refill, address-handle cache, back-pressure) over
 * fake verbs. Sums are checked against a reference computed here.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_cfgfile.h>
#include <rte_cycles.h>
#include <rte_eal.h>

#include "sg_dp_pipeline.h"
#include "sg_dp_verbs.h"
#include "sg_test.h"
#include "verbs_fake.h"

static char err[512];

#define F(f) offsetof(struct sg_dp_verbs_conf, f), sizeof(((struct sg_dp_verbs_conf *)0)->f)
static const struct {
	const char *key, *value;
	size_t off, size;
	int64_t want;
} good[] = {
	{"port", "2", F(port), 2}, {"gid_index", "3", F(gid_index), 3},
	{"gid_index", "auto", F(gid_index), -1}, {"mode", "rc", F(mode), SG_DP_VERBS_RC},
	{"qkey", "0x11111111", F(qkey), 0x11111111}, {"recv_depth", "4096", F(recv_depth), 4096},
	{"send_depth", "512", F(send_depth), 512}, {"max_peers", "64", F(max_peers), 64},
	{"mtu", "4096", F(mtu), 4096}, {"poll_batch", "64", F(poll_batch), 64},
	{"rc_slots", "32", F(rc_slots), 32}, {"numa_node", "1", F(numa_node), 1},
	{"numa_node", "-1", F(numa_node), -1},
};
#undef F

static void test_conf(void)
{
	struct sg_dp_verbs_conf c;
	static const char *const bad[][2] = {
		{"port", "0"}, {"port", "256"}, {"port", "-1"}, {"port", "1x"}, {"port", ""},
		{"gid_index", "256"}, {"gid_index", "x"}, {"mode", "uc"}, {"mode", ""},
		{"recv_depth", "15"}, {"recv_depth", "65537"}, {"send_depth", "99999999999999999999"},
		{"max_peers", "0"}, {"max_peers", "65537"}, {"mtu", "70000"}, {"poll_batch", "0"},
		{"poll_batch", "257"}, {"qkey", "0"}, {"qkey", "0x100000000"}, {"numa_node", "-2"},
		{"numa_node", "1024"}, {"colour", "blue"}, {"", "1"},
		{"device", "0123456789012345678901234567890123456789012345678901234567890123456789"},
	};

	sg_dp_verbs_conf_defaults(&c);
	SG_CHECK_EQ(c.port, 1);
	SG_CHECK_EQ(c.gid_index, -1);
	SG_CHECK_EQ(c.mode, SG_DP_VERBS_UD);
	SG_CHECK_EQ(c.qkey, SG_DP_VERBS_QKEY_DEFAULT);
	SG_CHECK(sg_dp_verbs_conf_check(&c, err, sizeof(err)) == 0, "defaults rejected: %s", err);

	SG_CHECK_EQ(sg_dp_verbs_conf_set(&c, "device", "mlx5_1", err, sizeof(err)), 0);
	SG_CHECK(strcmp(c.device, "mlx5_1") == 0, "device %s", c.device);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int64_t got = 0;

		SG_CHECK(sg_dp_verbs_conf_set(&c, good[i].key, good[i].value, err, sizeof(err)) == 0,
			 "%s = %s: %s", good[i].key, good[i].value, err);
		if (good[i].size == 1)
			got = *((uint8_t *)&c + good[i].off);
		else
			got = *(int32_t *)(void *)((uint8_t *)&c + good[i].off);
		SG_CHECK(got == good[i].want, "%s = %s gave %lld", good[i].key, good[i].value,
			 (long long)got);
	}
	SG_CHECK_EQ(c.mode, SG_DP_VERBS_RC);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sg_dp_verbs_conf before = c;

		err[0] = '\0';
		SG_CHECK(sg_dp_verbs_conf_set(&c, bad[i][0], bad[i][1], err, sizeof(err)) == -EINVAL,
			 "%s = \"%s\" accepted", bad[i][0], bad[i][1]);
		SG_CHECK(strstr(err, "[verbs]") != NULL && err[0] != '\0',
			 "%s: message \"%s\" does not name the section", bad[i][0], err);
		SG_CHECK(memcmp(&before, &c, sizeof(c)) == 0, "%s = \"%s\" changed the conf",
			 bad[i][0], bad[i][1]);
	}
	SG_CHECK(sg_dp_verbs_conf_set(&c, NULL, "1", err, sizeof(err)) == -EINVAL, "NULL key");
	SG_CHECK(sg_dp_verbs_conf_set(&c, "port", NULL, err, sizeof(err)) == -EINVAL, "NULL value");
	SG_CHECK(strstr(err, "[verbs]") != NULL, "NULL value message: %s", err);

	/* conf_check catches what a caller filled in by hand */
	sg_dp_verbs_conf_defaults(&c);
	c.mtu = 20;
	SG_CHECK(sg_dp_verbs_conf_check(&c, err, sizeof(err)) == -EINVAL && strstr(err, "mtu"),
		 "tiny mtu: %s", err);
	sg_dp_verbs_conf_defaults(&c);
	c.mode = 7;
	SG_CHECK(sg_dp_verbs_conf_check(&c, err, sizeof(err)) == -EINVAL && strstr(err, "mode"),
		 "bad mode: %s", err);
	sg_dp_verbs_conf_defaults(&c);
	c.port = 0;
	SG_CHECK(sg_dp_verbs_conf_check(&c, err, sizeof(err)) == -EINVAL, "port 0");
	sg_dp_verbs_conf_defaults(&c);
	c.gid_index = -5;
	SG_CHECK(sg_dp_verbs_conf_check(&c, err, sizeof(err)) == -EINVAL, "gid -5");
	SG_CHECK_EQ(strcmp(sg_dp_verbs_mode_name(SG_DP_VERBS_RC), "rc"), 0);
	SG_CHECK_EQ(strcmp(sg_dp_verbs_mode_name(9), "unknown"), 0);
}

/* The [verbs] section through rte_cfgfile: a good file and garbage files. */
static void test_conf_file(void)
{
	static const char *const files[] = {
		"[verbs]\ndevice = mlx5_0\nport = 1\nmode = ud\nrecv_depth = 2048\n",
		"[verbs]\nrecv_depth = lots\n",
		"[verbs]\nwhat = 1\n",
		"[net]\nip = 10.0.0.1\n", /* no [verbs]: nothing changes */
	};
	static const int want[] = {0, -EINVAL, -EINVAL, 0};
	char path[64];

	snprintf(path, sizeof(path), "/tmp/sg_verbs_conf_%d.ini", (int)getpid());
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct sg_dp_verbs_conf c;
		struct rte_cfgfile *cf;
		FILE *f = fopen(path, "w");

		SG_CHECK(f != NULL, "cannot write %s", path);
		if (f == NULL)
			return;
		fputs(files[i], f);
		fclose(f);
		cf = rte_cfgfile_load(path, 0);
		SG_CHECK(cf != NULL, "file %zu did not load", i);
		if (cf == NULL)
			continue;
		sg_dp_verbs_conf_defaults(&c);
		SG_CHECK(sg_dp_verbs_conf_load(&c, cf, "verbs", err, sizeof(err)) == want[i],
			 "file %zu: %s", i, err);
		if (i == 0)
			SG_CHECK(strcmp(c.device, "mlx5_0") == 0 && c.recv_depth == 2048,
				 "file 0 not applied");
		if (i == 3)
			SG_CHECK_EQ(c.recv_depth, 1024);
		rte_cfgfile_close(cf);
	}
	unlink(path);
	{
		struct sg_dp_verbs_conf c;

		sg_dp_verbs_conf_defaults(&c);
		SG_CHECK(sg_dp_verbs_conf_load(&c, NULL, "verbs", err, sizeof(err)) == -EINVAL,
			 "NULL cfgfile");
	}
}

static void test_memlock(void)
{
	const uint64_t k = 1024, m = 1024 * 1024;

	SG_CHECK_EQ(sg_dp_verbs_memlock_check(100 * m, UINT64_MAX, 0, false, err, sizeof(err)), 0);
	SG_CHECK_EQ(sg_dp_verbs_memlock_check(100 * m, 64 * k, 0, true, err, sizeof(err)), 0);
	SG_CHECK_EQ(sg_dp_verbs_memlock_check(60 * k, 64 * k, 4 * k, false, err, sizeof(err)), 0);
	err[0] = '\0';
	SG_CHECK_EQ(sg_dp_verbs_memlock_check(61 * k, 64 * k, 4 * k, false, err, sizeof(err)),
		    -ENOMEM);
	SG_CHECK(strstr(err, "RLIMIT_MEMLOCK is 64 KiB") && strstr(err, "ulimit -l unlimited") &&
		 strstr(err, "LimitMEMLOCK=infinity") && strstr(err, "memlock") &&
		 strstr(err, "at least 3 MiB"), "message: %s", err);
	/* already over the limit: no unsigned wrap-around into "fits" */
	SG_CHECK_EQ(sg_dp_verbs_memlock_check(1, 64 * k, 65 * k, false, err, sizeof(err)), -ENOMEM);
	SG_CHECK_EQ(sg_dp_verbs_memlock_check(0, 0, 0, false, err, sizeof(err)), 0);
	{
		uint64_t lim, locked;
		bool cap;

		SG_CHECK_EQ(sg_dp_verbs_memlock_probe(&lim, &locked, &cap), 0);
		SG_CHECK(lim > 0, "probe: limit %llu", (unsigned long long)lim);
	}
}

static void test_gid_select(void)
{
	struct ibv_gid_entry e[4];

	memset(e, 0, sizeof(e));
	for (unsigned int i = 0; i < 4; i++)
		e[i].gid_index = i;
	SG_CHECK_EQ(sg_dp_verbs_gid_select(e, 4, false), -ENOENT);
	SG_CHECK_EQ(sg_dp_verbs_gid_select(e, 0, true), -ENOENT);
	e[1].gid.raw[0] = 0xfe, e[1].gid_type = IBV_GID_TYPE_ROCE_V1;
	e[2].gid.raw[0] = 0xfe, e[2].gid_type = IBV_GID_TYPE_ROCE_V2;
	e[3].gid.raw[10] = e[3].gid.raw[11] = 0xff, e[3].gid.raw[12] = 10;
	e[3].gid_type = IBV_GID_TYPE_ROCE_V2;
	SG_CHECK_EQ(sg_dp_verbs_gid_select(e, 4, true), 3);  /* v2 IPv4-mapped */
	SG_CHECK_EQ(sg_dp_verbs_gid_select(e, 3, true), 2);  /* first v2 */
	SG_CHECK_EQ(sg_dp_verbs_gid_select(e, 2, true), 1);  /* only v1 */
	SG_CHECK_EQ(sg_dp_verbs_gid_select(e, 4, false), 1); /* InfiniBand: first non-zero */
	SG_CHECK_EQ(sg_dp_verbs_mtu_bytes(IBV_MTU_256), 256);
	SG_CHECK_EQ(sg_dp_verbs_mtu_bytes(IBV_MTU_4096), 4096);
	SG_CHECK_EQ(sg_dp_verbs_mtu_bytes(0), 0);
	SG_CHECK_EQ(sg_dp_verbs_mtu_bytes(6), 0);
}

static void test_wr(void)
{
	struct ibv_recv_wr rw;
	struct ibv_send_wr sw;
	struct ibv_sge sge;
	enum sg_dp_verbs_wr_kind kind;
	uint32_t idx;
	uint8_t buf[64];
	struct ibv_ah *ah = (struct ibv_ah *)buf;

	SG_CHECK_EQ(sg_dp_verbs_wr_id_decode(sg_dp_verbs_wr_id(SG_DP_VERBS_WR_SEND, 0xfffffffe),
					     &kind, &idx), 0);
	SG_CHECK(kind == SG_DP_VERBS_WR_SEND && idx == 0xfffffffe, "decode");
	SG_CHECK_EQ(sg_dp_verbs_wr_id_decode(sg_dp_verbs_wr_id(SG_DP_VERBS_WR_RECV, 5), &kind,
					     &idx), 0);
	SG_CHECK(kind == SG_DP_VERBS_WR_RECV && idx == 5, "decode recv");
	SG_CHECK_EQ(sg_dp_verbs_wr_id_decode(0, &kind, &idx), -EINVAL);
	SG_CHECK_EQ(sg_dp_verbs_wr_id_decode(3ull << 32, &kind, &idx), -EINVAL);
	SG_CHECK_EQ(sg_dp_verbs_wr_id_decode(~0ull, &kind, &idx), -EINVAL);

	memset(&rw, 0xa5, sizeof(rw));
	sg_dp_verbs_build_recv(&rw, &sge, 9, buf, 64, 0x42);
	SG_CHECK(rw.wr_id == sg_dp_verbs_wr_id(SG_DP_VERBS_WR_RECV, 9) && rw.next == NULL &&
		 rw.num_sge == 1 && rw.sg_list == &sge && sge.addr == (uintptr_t)buf &&
		 sge.length == 64 && sge.lkey == 0x42, "recv WR");

	memset(&sw, 0xa5, sizeof(sw));
	sg_dp_verbs_build_ud_send(&sw, &sge, 3, buf, 48, 0x42, ah, 0xabcdef, 0x1111);
	SG_CHECK(sw.wr_id == sg_dp_verbs_wr_id(SG_DP_VERBS_WR_SEND, 3) && sw.next == NULL &&
		 sw.opcode == IBV_WR_SEND && sw.send_flags == IBV_SEND_SIGNALED &&
		 sw.wr.ud.ah == ah && sw.wr.ud.remote_qpn == 0xabcdef &&
		 sw.wr.ud.remote_qkey == 0x1111 && sge.length == 48, "UD send WR");

	sg_dp_verbs_build_rc_write_imm(&sw, &sge, 4, buf, 40, 0x42, 0x10000, 0x99, 7, 4160);
	SG_CHECK(sw.opcode == IBV_WR_RDMA_WRITE_WITH_IMM && ntohl(sw.imm_data) == 7 &&
		 sw.wr.rdma.remote_addr == 0x10000 + 7 * 4160 && sw.wr.rdma.rkey == 0x99 &&
		 sw.send_flags == IBV_SEND_SIGNALED && sw.next == NULL &&
		 sw.wr_id == sg_dp_verbs_wr_id(SG_DP_VERBS_WR_SEND, 4), "RC write-imm WR");
}

static void test_peer_from_wc(void)
{
	struct ibv_wc wc = {0};
	struct sg_dp_verbs_peer_key key;
	struct ibv_ah_attr ah;
	uint8_t grh[40] = {0};
	uint32_t vtf = htonl(6u << 28 | 0x2au << 20 | 0x12345);

	/* InfiniBand, no GRH: LID addressing */
	wc.src_qp = 0x1abcdef;
	wc.slid = 9;
	wc.sl = 2;
	SG_CHECK_EQ(sg_dp_verbs_peer_from_wc(&wc, grh, 1, 0, false, false, &key, &ah), 0);
	SG_CHECK(key.qpn == 0xabcdef && key.lid == 9 && !ah.is_global && ah.dlid == 9 &&
		 ah.sl == 2 && ah.port_num == 1, "IB peer");
	/* RoCE needs the GRH */
	SG_CHECK_EQ(sg_dp_verbs_peer_from_wc(&wc, grh, 1, 0, true, false, &key, &ah), -EBADMSG);

	/* IPv6 GRH: source GID at bytes 8..23 */
	wc.wc_flags = IBV_WC_GRH;
	memcpy(grh, &vtf, 4);
	for (int i = 0; i < 16; i++)
		grh[8 + i] = (uint8_t)(0xa0 + i);
	SG_CHECK_EQ(sg_dp_verbs_peer_from_wc(&wc, grh, 1, 3, true, false, &key, &ah), 0);
	SG_CHECK(ah.is_global && ah.grh.sgid_index == 3 && ah.grh.dgid.raw[0] == 0xa0 &&
		 ah.grh.dgid.raw[15] == 0xaf && ah.grh.traffic_class == 0x2a &&
		 ah.grh.flow_label == 0x12345 && key.gid[15] == 0xaf, "GRH peer");
	grh[0] = 0x40; /* not IPv6 */
	SG_CHECK_EQ(sg_dp_verbs_peer_from_wc(&wc, grh, 1, 3, true, false, &key, &ah), -EBADMSG);

	/* RoCE v2 over IPv4: the IPv4 header in bytes 20..39 */
	memset(grh, 0, sizeof(grh));
	grh[20] = 0x45;
	grh[21] = 0x88;
	grh[32] = 192, grh[33] = 168, grh[34] = 7, grh[35] = 9;
	SG_CHECK_EQ(sg_dp_verbs_peer_from_wc(&wc, grh, 1, 2, true, true, &key, &ah), 0);
	SG_CHECK(ah.grh.dgid.raw[10] == 0xff && ah.grh.dgid.raw[11] == 0xff &&
		 ah.grh.dgid.raw[12] == 192 && ah.grh.dgid.raw[15] == 9 && ah.grh.dgid.raw[0] == 0 &&
		 ah.grh.traffic_class == 0x88, "IPv4 peer");
	grh[20] = 0x46; /* IP options: not what RoCE sends */
	SG_CHECK_EQ(sg_dp_verbs_peer_from_wc(&wc, grh, 1, 2, true, true, &key, &ah), -EBADMSG);
}

static struct sg_dp_verbs_conf fconf(void)
{
	struct sg_dp_verbs_conf c;

	sg_dp_verbs_conf_defaults(&c);
	c.ops = &fk_ops;
	c.recv_depth = 64;
	c.send_depth = 32;
	c.max_peers = 8;
	return c;
}

/* create() must fail with errno @p e, a message containing @p needle, and no leak. */
static void expect_create_fail(const struct sg_dp_verbs_conf *c, int e, const char *needle)
{
	struct sg_dp_verbs *t;

	err[0] = '\0';
	errno = 0;
	t = sg_dp_verbs_create(c, err, sizeof(err));
	SG_CHECK(t == NULL && errno == e, "create: %p, errno %d (want %d), \"%s\"", (void *)t,
		 errno, e, err);
	SG_CHECK(strstr(err, needle) != NULL, "message \"%s\" lacks \"%s\"", err, needle);
	SG_CHECK_EQ(fk.live, 0);
	sg_dp_verbs_destroy(t);
}

static void test_create_errors(void)
{
	struct sg_dp_verbs_conf c = fconf();

	fk_reset();
	fk.ndev = 0;
	expect_create_fail(&c, ENODEV, "no RDMA device (ibv_get_device_list found none)");
	fk_reset();
	snprintf(c.device, sizeof(c.device), "mlx5_9");
	expect_create_fail(&c, ENODEV, "found: fake0, fake1");
	c = fconf();
	fk_reset();
	fk.port_state = IBV_PORT_DOWN;
	expect_create_fail(&c, ENODEV, "not active");
	fk_reset();
	c.port = 2;
	expect_create_fail(&c, EINVAL, "[verbs] port = 2");
	c = fconf();
	fk_reset();
	c.gid_index = 3;
	expect_create_fail(&c, EINVAL, "gid_index = 3");
	c = fconf();
	fk_reset();
	fk.ngids = 0;
	expect_create_fail(&c, ENODEV, "no usable GID");
	fk_reset();
	c.mtu = 2048;
	expect_create_fail(&c, EINVAL, "exceeds the active MTU");
	c = fconf();
	fk_reset();
	fk.ml_limit = 64 * 1024;
	expect_create_fail(&c, ENOMEM, "ulimit -l unlimited");
	fk_reset();
	fk.fail_reg_mr = 1;
	expect_create_fail(&c, ENOMEM, "ibv_reg_mr");
	fk_reset();
	fk.fail_create_qp = 1;
	expect_create_fail(&c, ENOMEM, "ibv_create_qp");
	for (int at = 0; at < 3; at++) {
		static const char *const st[] = {"INIT", "RTR", "RTS"};

		fk_reset();
		fk.fail_modify_qp_at = at;
		expect_create_fail(&c, EINVAL, st[at]);
	}
	c.recv_depth = 3;
	expect_create_fail(&c, EINVAL, "recv_depth");
	SG_CHECK(sg_dp_verbs_create(NULL, err, sizeof(err)) == NULL && errno == EINVAL, "NULL");
}

static void test_create_ok(void)
{
	struct sg_dp_verbs_conf c = fconf();
	struct sg_dp_verbs_stats st;
	struct sg_dp_verbs *t;
	union ibv_gid gid;
	int gi;

	fk_reset();
	snprintf(c.device, sizeof(c.device), "fake1");
	t = sg_dp_verbs_create(&c, err, sizeof(err));
	SG_CHECK(t != NULL, "create: %s", err);
	if (t == NULL)
		return;
	/* UD QP walked INIT -> RTR -> RTS with our Q_Key; every receive posted */
	SG_CHECK(fk.modify_calls == 3 && fk.states[0] == IBV_QPS_INIT &&
		 fk.states[1] == IBV_QPS_RTR && fk.states[2] == IBV_QPS_RTS, "QP states");
	SG_CHECK_EQ((uint32_t)fk.qkey_set, SG_DP_VERBS_QKEY_DEFAULT);
	SG_CHECK(fk.qp_attr.qp_type == IBV_QPT_UD && fk.qp_attr.cap.max_recv_wr == 64 &&
		 fk.qp_attr.cap.max_send_wr == 32, "QP attributes");
	SG_CHECK_EQ(fk_posted_count(), 64);
	SG_CHECK(fk.posted[0].len >= SG_DP_VERBS_GRH_LEN + 1024, "receive buffer %u bytes",
		 fk.posted[0].len);
	sg_dp_verbs_local_addr(t, &gid, NULL, &gi);
	SG_CHECK(gi == 2 && gid.raw[12] == 10, "auto GID: %d", gi); /* RoCE v2 IPv4 */
	SG_CHECK_EQ(sg_dp_verbs_qpn(t), 0x77);
	SG_CHECK_EQ(sg_dp_verbs_max_payload(t), (1024 - SG_DP_HDR_LEN) & ~7u);
	{
		struct sg_dp_verbs_rc_addr r = {.slots = 8, .stride = 9000}, l;

		SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, &r, &l, err, sizeof(err)), -ENOTSUP);
	}
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(st.recv_posted == 64 && st.send_free == 32 && st.peers == 0, "gauges");
	sg_dp_verbs_destroy(t);
	SG_CHECK_EQ(fk.live, 0);

	/* RC: registered for remote writes, an SRQ of zero-length receives, no QP yet */
	fk_reset();
	c.mode = SG_DP_VERBS_RC;
	t = sg_dp_verbs_create(&c, err, sizeof(err));
	SG_CHECK(t != NULL, "RC create: %s", err);
	if (t != NULL) {
		SG_CHECK(fk.srq_live == 1 && fk.nqp == 0 && fk_posted_count() == 64 &&
			 fk.posted[0].addr == NULL, "RC set-up");
		SG_CHECK_EQ(sg_dp_verbs_msg_max(t), SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD);
		SG_CHECK_EQ(sg_dp_verbs_max_payload(t), SG_MAX_CHUNK_BYTES);
		SG_CHECK_EQ(sg_dp_verbs_poll(t, NULL, 0), 0);
		sg_dp_verbs_destroy(t);
	}
	SG_CHECK_EQ(fk.live, 0);
}

/* ---- the data path: fake HCA <-> transport <-> engine ---------------------- */

#define NW 4
#define KEY_ELEMS 500 /* 3 chunks at 976 bytes */
#define CHUNK 976

static const struct fk_src workers[NW] = {{11, 0x100}, {12, 0x101}, {13, 0x102}, {14, 0x103}};

static float val(unsigned int rank, unsigned int round, unsigned int e)
{
	return (float)((int)(rank * 1000 + round * 10 + e % 97) - 300);
}

static uint32_t build_push(uint8_t *pkt, unsigned int rank, unsigned int round,
			   unsigned int chunk)
{
	uint32_t first = chunk * (CHUNK / 4), n = KEY_ELEMS - first;
	struct sg_dp_msg m = {0};
	float f[CHUNK / 4];

	if (n > CHUNK / 4)
		n = CHUNK / 4;
	for (uint32_t i = 0; i < n; i++)
		f[i] = val(rank, round, first + i);
	m.type = SG_DP_T_PUSH;
	m.dtype = SG_DTYPE_FP32;
	m.job = 5;
	m.token = 0xfeedull;
	m.rank = (uint16_t)rank;
	m.key = 0;
	m.chunk = chunk;
	m.nchunks = 3;
	m.round = round;
	m.nelem = n;
	m.offset = chunk * CHUNK;
	return (uint32_t)sg_dp_build(pkt, SG_DP_HDR_LEN + CHUNK, &m, f, n * 4);
}

/* Every RESULT sent so far for (round, chunk): right sum, right worker. */
static unsigned int check_results(unsigned int from, unsigned int round, unsigned int *bad)
{
	unsigned int ok = 0;

	for (unsigned int s = from; s < fk.nsent; s++) {
		struct sg_dp_msg m;
		uint32_t first;
		const struct fk_sent *x = &fk.sent[s];
		int ahi = -1;

		if (sg_dp_parse(x->buf, x->len, &m, NULL) != 0 || m.type != SG_DP_T_RESULT) {
			(*bad)++;
			continue;
		}
		first = m.chunk * (CHUNK / 4);
		for (unsigned int e = 0; e < m.nelem; e++) {
			float want = 0, got;

			for (unsigned int r = 0; r < NW; r++)
				want += val(r, round, first + e);
			memcpy(&got, (const uint8_t *)m.payload + 4 * e, 4);
			if (got != want) {
				(*bad)++;
				break;
			}
		}
		/* addressed to the rank's QP through an AH for its IPv4-mapped GID */
		for (unsigned int a = 0; a < fk.n_ah && a < 64; a++)
			if (fk.ahs[a] == x->ah)
				ahi = (int)a;
		if (m.round != round || m.rank >= NW || x->qpn != workers[m.rank].qpn ||
		    x->qkey != SG_DP_VERBS_QKEY_DEFAULT || ahi < 0 ||
		    fk.ah_attr[ahi].grh.dgid.raw[15] != workers[m.rank].host ||
		    fk.ah_attr[ahi].grh.dgid.raw[11] != 0xff || !fk.ah_attr[ahi].is_global ||
		    fk.ah_attr[ahi].grh.sgid_index != 2)
			(*bad)++;
		else
			ok++;
	}
	return ok;
}

static struct sg_dp_engine *make_engine(struct sg_dp_verbs *t)
{
	static const struct sg_dp_key key = {.id = 0, .nelem = KEY_ELEMS};
	struct sg_dp_engine_conf ec = {0};
	struct sg_dp_job_conf jc = {0};
	struct sg_dp_engine *eng;

	ec.numa_node = -1;
	ec.pool_bufs = 64;
	ec.max_payload = sg_dp_verbs_max_payload(t);
	ec.tx = sg_dp_verbs_tx_ops(t);
	eng = sg_dp_engine_create(&ec);
	SG_CHECK(eng != NULL, "engine: %d", errno);
	if (eng == NULL)
		return NULL;
	jc.id = 5;
	jc.nworkers = NW;
	jc.token = 0xfeedull;
	jc.dtype = SG_DTYPE_FP32;
	jc.chunk_bytes = CHUNK;
	jc.partition_bytes = KEY_ELEMS * 4;
	jc.keys = &key;
	jc.nkeys = 1;
	SG_CHECK_EQ(sg_dp_engine_add_job(eng, &jc), 0);
	return eng;
}

static void poll_all(struct sg_dp_verbs *t, struct sg_dp_engine *eng)
{
	for (int i = 0; i < 1000 && (fk.rq.head != fk.rq.tail || fk.sq.head != fk.sq.tail); i++)
		SG_CHECK(sg_dp_verbs_poll(t, eng, 1000) >= 0, "poll failed");
}

/* Reset the fake HCA; a transport with @p c and an engine on it. NULL if either fails. */
static struct sg_dp_verbs *open_pair(const struct sg_dp_verbs_conf *c, struct sg_dp_engine **eng)
{
	struct sg_dp_verbs *t;

	fk_reset();
	t = sg_dp_verbs_create(c, err, sizeof(err));
	*eng = t != NULL ? make_engine(t) : NULL;
	SG_CHECK(*eng != NULL, "create: %s", err);
	if (*eng == NULL) {
		sg_dp_verbs_destroy(t);
		return NULL;
	}
	return t;
}

static void close_pair(struct sg_dp_verbs *t, struct sg_dp_engine *eng)
{
	sg_dp_engine_destroy(eng);
	sg_dp_verbs_destroy(t);
	SG_CHECK_EQ(fk.live, 0);
}

/* Every rank pushes chunks 0..nchunks-1 of @p round over UD, rank order rotated by @p shift. */
static void push_ud(unsigned int round, unsigned int nchunks, unsigned int shift)
{
	uint8_t pkt[SG_DP_HDR_LEN + CHUNK];

	for (unsigned int chunk = 0; chunk < nchunks; chunk++)
		for (unsigned int i = 0; i < NW; i++) {
			unsigned int r = (i + shift) % NW;

			SG_CHECK_EQ(fk_deliver(workers[r], pkt, build_push(pkt, r, round, chunk),
					       IBV_WC_SUCCESS), 0);
		}
}

static void test_datapath(void)
{
	struct sg_dp_verbs_conf c = fconf();
	struct sg_dp_verbs_stats st;
	struct sg_dp_stats es;
	struct sg_dp_verbs *t;
	struct sg_dp_engine *eng;
	uint8_t pkt[SG_DP_HDR_LEN + CHUNK];
	unsigned int bad = 0, ok, from;

	t = open_pair(&c, &eng);
	if (t == NULL)
		return;
	/* three rounds, pushes in a different rank order each round */
	for (unsigned int round = 1; round <= 3; round++) {
		from = fk.nsent;
		push_ud(round, 3, round);
		poll_all(t, eng);
		ok = check_results(from, round, &bad);
		SG_CHECK(ok == 3 * NW && bad == 0, "round %u: %u results right, %u wrong", round, ok,
			 bad);
		/* every consumed receive buffer is posted again */
		SG_CHECK_EQ(fk_posted_count(), 64);
	}
	/* one address handle per worker, however many packets */
	SG_CHECK_EQ(fk.n_ah, NW);
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(st.rx_packets == 3 * 3 * NW && st.peers == NW && st.tx_packets == 3 * 3 * NW &&
		 st.send_free == 32 && st.recv_posted == 64 && st.rx_engine_drop == 0,
		 "stats rx %llu tx %llu free %llu", (unsigned long long)st.rx_packets,
		 (unsigned long long)st.tx_packets, (unsigned long long)st.send_free);

	/* garbage and errors: each counted, nothing sent, buffers come back */
	from = fk.nsent;
	memset(pkt, 0x5a, sizeof(pkt));
	SG_CHECK_EQ(fk_deliver(workers[0], pkt, 100, IBV_WC_SUCCESS), 0); /* not Sigma */
	SG_CHECK_EQ(fk_deliver(workers[1], pkt, 0, IBV_WC_SUCCESS), 0);   /* empty */
	SG_CHECK_EQ(fk_deliver(workers[2], pkt, 60, IBV_WC_LOC_LEN_ERR), 0);
	{
		struct ibv_wc w = {.wr_id = 0xdeadbeefull, .status = IBV_WC_SUCCESS};

		fk_push_wc(&fk.rq, &w); /* a wr_id that is not ours */
	}
	poll_all(t, eng);
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(fk.nsent == from && st.rx_engine_drop == 2 && st.rx_wc_error == 2,
		 "garbage: sent %u, engine drops %llu, wc errors %llu", fk.nsent - from,
		 (unsigned long long)st.rx_engine_drop, (unsigned long long)st.rx_wc_error);
	SG_CHECK_EQ(fk_posted_count(), 64);
	/* a completion shorter than the GRH area */
	{
		struct fk_posted p = fk.posted[fk.ph++ % FK_MAX_RECV];
		struct ibv_wc w = {.wr_id = p.wr_id, .status = IBV_WC_SUCCESS, .byte_len = 12,
				   .wc_flags = IBV_WC_GRH};

		fk_push_wc(&fk.rq, &w);
		poll_all(t, eng);
		sg_dp_verbs_stats(t, &st);
		SG_CHECK_EQ(st.rx_short, 1);
		SG_CHECK_EQ(fk_posted_count(), 64);
	}
	/* RoCE without GRH: no address to answer, counted */
	{
		struct fk_posted p = fk.posted[fk.ph++ % FK_MAX_RECV];
		struct ibv_wc w = {.wr_id = p.wr_id, .status = IBV_WC_SUCCESS, .byte_len = 100};

		fk_push_wc(&fk.rq, &w);
		poll_all(t, eng);
		sg_dp_verbs_stats(t, &st);
		SG_CHECK_EQ(st.rx_bad_grh, 1);
	}
	/* a flushed receive (QP in error) is not re-posted */
	{
		unsigned int before = fk_posted_count();

		SG_CHECK_EQ(fk_deliver(workers[0], pkt, 10, IBV_WC_WR_FLUSH_ERR), 0);
		poll_all(t, eng);
		SG_CHECK_EQ(fk_posted_count(), before - 1);
	}
	sg_dp_engine_stats(eng, &es);
	SG_CHECK_EQ(es.rounds_completed, 9);
	close_pair(t, eng);
}

/* Send buffers run out while completions are held; output is dropped, counted, then recovers. */
static void test_backpressure(void)
{
	struct sg_dp_verbs_conf c = fconf();
	struct sg_dp_verbs_stats st;
	struct sg_dp_stats es;
	struct sg_dp_verbs *t;
	struct sg_dp_engine *eng;
	unsigned int bad = 0;

	c.send_depth = 16;
	t = open_pair(&c, &eng);
	if (t == NULL)
		return;
	fk.hold_send_wc = 1;
	/* 3 chunks x 4 results = 12 fit; round 2 needs 12 more: only 4 buffers left */
	push_ud(1, 3, 0);
	push_ud(2, 3, 0);
	poll_all(t, eng);
	sg_dp_verbs_stats(t, &st);
	sg_dp_engine_stats(eng, &es);
	SG_CHECK(st.tx_packets == 16 && st.tx_no_buf == 8 && es.tx_fail == 8 && st.send_free == 0,
		 "held: tx %llu no_buf %llu eng tx_fail %llu", (unsigned long long)st.tx_packets,
		 (unsigned long long)st.tx_no_buf, (unsigned long long)es.tx_fail);
	/* completions come back: the workers retransmit round 2 and get the kept result */
	fk.hold_send_wc = 0;
	poll_all(t, eng);
	{
		unsigned int from = fk.nsent;

		push_ud(2, 3, 0);
		poll_all(t, eng);
		SG_CHECK_EQ(check_results(from, 2, &bad), 12);
		SG_CHECK_EQ(bad, 0);
	}
	/* a failed doorbell gives its buffers back */
	fk.fail_post_send_at = 1;
	push_ud(3, 1, 0);
	poll_all(t, eng);
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(st.tx_post_fail == 3 && st.send_free == 16, "post fail %llu, free %llu",
		 (unsigned long long)st.tx_post_fail, (unsigned long long)st.send_free);
	/* a completion for a buffer that is already free is counted and frees nothing */
	fk.fail_post_send_at = -1;
	{
		struct ibv_wc w = {.wr_id = sg_dp_verbs_wr_id(SG_DP_VERBS_WR_SEND, 3),
				   .status = IBV_WC_RETRY_EXC_ERR};

		fk_push_wc(&fk.sq, &w);
		poll_all(t, eng);
		sg_dp_verbs_stats(t, &st);
		SG_CHECK(st.tx_wc_error == 1 && st.send_free == 16, "wc error %llu free %llu",
			 (unsigned long long)st.tx_wc_error, (unsigned long long)st.send_free);
	}
	close_pair(t, eng);
}

/* The address-handle cache is bounded; a full cache or a failing ibv_create_ah drops. */
static void test_peer_cache(void)
{
	struct sg_dp_verbs_conf c = fconf();
	struct sg_dp_verbs_stats st;
	struct sg_dp_verbs *t;
	struct sg_dp_engine *eng;
	uint8_t pkt[SG_DP_HDR_LEN + CHUNK];

	c.max_peers = 2;
	t = open_pair(&c, &eng);
	if (t == NULL)
		return;
	push_ud(1, 1, 0);
	poll_all(t, eng);
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(st.peers == 2 && st.rx_no_peer == 2 && st.rx_packets == 2 && fk.n_ah == 2 &&
		 fk.nsent == 0, "cache full: peers %llu no_peer %llu",
		 (unsigned long long)st.peers, (unsigned long long)st.rx_no_peer);
	close_pair(t, eng);

	c.max_peers = 8;
	t = open_pair(&c, &eng);
	if (t == NULL)
		return;
	fk.fail_create_ah = 1;
	fk_deliver(workers[0], pkt, build_push(pkt, 0, 1, 0), IBV_WC_SUCCESS);
	poll_all(t, eng);
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(st.rx_no_peer == 1 && st.peers == 0, "create_ah failure not counted");
	/* the engine's reply to a peer id the transport never gave out */
	{
		struct sg_dp_tx_ops ops = sg_dp_verbs_tx_ops(t);
		void *h;

		SG_CHECK(ops.alloc(ops.ctx, 5, 64, &h) == NULL, "unknown peer got a buffer");
		sg_dp_verbs_stats(t, &st);
		SG_CHECK_EQ(st.tx_no_peer, 1);
	}
	close_pair(t, eng);
}

/* RC: connect 4 workers, WRITE-with-immediate both ways, sums and slots checked. */
#define RING 8 /* slots in each worker's ring */
static uint8_t rings[NW][RING][SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];

static void test_rc(void)
{
	struct sg_dp_verbs_conf c = fconf();
	struct sg_dp_verbs_rc_addr local[NW], r;
	struct sg_dp_verbs_stats st;
	struct sg_dp_verbs *t;
	struct sg_dp_engine *eng;
	unsigned int bad = 0, ok = 0;
	uint8_t pkt[SG_DP_HDR_LEN + CHUNK];

	c.mode = SG_DP_VERBS_RC;
	c.rc_slots = 16;
	t = open_pair(&c, &eng);
	if (t == NULL)
		return;
	for (unsigned int w = 0; w < NW; w++) {
		memset(&r, 0, sizeof(r));
		r.qpn = 0x300 + w;
		r.psn = 0x1000000 + w; /* PSNs are 24 bits: the top must be ignored */
		r.gid[10] = r.gid[11] = 0xff;
		r.gid[12] = 10, r.gid[14] = 1, r.gid[15] = workers[w].host;
		r.addr = (uintptr_t)rings[w];
		r.rkey = 0x500 + w;
		r.slots = RING;
		r.stride = sizeof(rings[w][0]);
		SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, &r, &local[w], err, sizeof(err)), (int)w);
		SG_CHECK(fk.rtr.dest_qp_num == r.qpn && fk.rtr.rq_psn == w &&
			 fk.rtr.ah_attr.is_global && fk.rtr.ah_attr.grh.dgid.raw[15] == r.gid[15] &&
			 fk.rtr.ah_attr.grh.sgid_index == 2 && fk.rtr.path_mtu == IBV_MTU_1024,
			 "RTR attributes of worker %u", w);
		SG_CHECK(local[w].slots == 16 && local[w].stride >= sg_dp_verbs_msg_max(t) &&
			 (local[w].rkey & IBV_ACCESS_REMOTE_WRITE) && local[w].gid[12] == 10 &&
			 (w == 0 || local[w].addr == local[w - 1].addr + 16ull * local[w].stride) &&
			 local[w].qpn != 0 && local[w].psn < (1u << 24), "local side of worker %u", w);
	}
	/* no slots left (64 / 16), a ring too small for our messages, a NULL remote */
	SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, &r, &local[0], err, sizeof(err)), -ENOSPC);
	SG_CHECK(strstr(err, "recv_depth") != NULL, "ENOSPC message: %s", err);
	r.stride = 100;
	SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, &r, &local[0], err, sizeof(err)), -EINVAL);
	SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, NULL, &local[0], err, sizeof(err)), -EINVAL);

	/* two rounds; worker w writes its k-th message into its slot k */
	for (unsigned int round = 1; round <= 2; round++) {
		unsigned int from = fk.nsent;

		for (unsigned int chunk = 0; chunk < 3; chunk++)
			for (unsigned int i = 0; i < NW; i++) {
				unsigned int w = (i + round) % NW, k = (round - 1) * 3 + chunk;
				uint32_t len = build_push(pkt, w, round, chunk);

				memcpy((uint8_t *)(uintptr_t)local[w].addr + k * local[w].stride, pkt,
				       len);
				SG_CHECK_EQ(fk_rc_write_done(local[w].qpn, k, len,
							     IBV_WC_RECV_RDMA_WITH_IMM), 0);
			}
		poll_all(t, eng);
		for (unsigned int s = from; s < fk.nsent; s++) {
			const struct fk_sent *x = &fk.sent[s];
			struct sg_dp_msg m;
			float got, want = 0;
			/* replies to a worker fill its ring in order: 0, 1, 2, ... */
			unsigned int w = x->rkey - 0x500;

			if (w >= NW || sg_dp_parse(x->buf, x->len, &m, NULL) != 0 ||
			    m.type != SG_DP_T_RESULT || m.rank != w || m.round != round ||
			    x->opcode != IBV_WR_RDMA_WRITE_WITH_IMM || x->qp->qp_num != local[w].qpn ||
			    x->imm != ((round - 1) * 3 + m.chunk) % RING ||
			    x->raddr != (uintptr_t)rings[w][x->imm]) {
				bad++;
				continue;
			}
			for (unsigned int e = 0; e < m.nelem; e++) {
				want = 0;
				for (unsigned int rr = 0; rr < NW; rr++)
					want += val(rr, round, m.chunk * (CHUNK / 4) + e);
				memcpy(&got, (const uint8_t *)m.payload + 4 * e, 4);
				if (got != want)
					break;
			}
			if (got != want)
				bad++;
			else
				ok++;
		}
	}
	SG_CHECK(ok == 2 * 3 * NW && bad == 0, "RC: %u results right, %u wrong", ok, bad);
	SG_CHECK_EQ(fk_posted_count(), 64);

	/* garbage: slot out of range, plain SEND opcode, unknown QP, oversized */
	fk_rc_write_done(local[0].qpn, 16, 100, IBV_WC_RECV_RDMA_WITH_IMM);
	fk_rc_write_done(local[0].qpn, 0, 100, IBV_WC_RECV);
	fk_rc_write_done(0x9999, 0, 100, IBV_WC_RECV_RDMA_WITH_IMM);
	fk_rc_write_done(local[1].qpn, 1, sg_dp_verbs_msg_max(t) + 1, IBV_WC_RECV_RDMA_WITH_IMM);
	poll_all(t, eng);
	sg_dp_verbs_stats(t, &st);
	SG_CHECK(st.rx_bad_slot == 3 && st.rx_no_peer == 1 && st.rx_engine_drop == 0 &&
		 st.rx_packets == 2 * 3 * NW, "RC garbage: bad_slot %llu no_peer %llu",
		 (unsigned long long)st.rx_bad_slot, (unsigned long long)st.rx_no_peer);
	SG_CHECK_EQ(fk_posted_count(), 64);
	close_pair(t, eng);
	SG_CHECK_EQ(fk.srq_live, 0);

	/* a connection whose QP will not reach RTR is torn down and reported */
	fk_reset();
	t = sg_dp_verbs_create(&c, err, sizeof(err));
	if (t == NULL)
		return;
	fk.fail_modify_qp_at = 1;
	memset(&r, 0, sizeof(r));
	r.slots = RING;
	r.stride = sizeof(rings[0][0]);
	SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, &r, &local[0], err, sizeof(err)), -EINVAL);
	SG_CHECK(strstr(err, "RTR") != NULL, "message: %s", err);
	sg_dp_verbs_destroy(t);
	SG_CHECK_EQ(fk.live, 0);
}

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

/*
 * Garbage completions, as a broken or hostile peer could cause them: random
 * lengths, opcodes, flags, source QPs, immediates and statuses, and bytes
 * that are not Sigma messages, mixed with real pushes. Nothing may crash, every
 * consumed receive must come back, and every send buffer must come home.
 */
static void test_random_completions(void)
{
	static const enum ibv_wc_status sts[] = {IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_WC_SUCCESS,
						 IBV_WC_LOC_LEN_ERR, IBV_WC_REM_ACCESS_ERR,
						 IBV_WC_GENERAL_ERR};
	static const enum ibv_wc_opcode ops[] = {IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM,
						 IBV_WC_SEND, IBV_WC_RDMA_WRITE};

	for (int mode = 0; mode < 2; mode++) {
		struct sg_dp_verbs_conf c = fconf();
		struct sg_dp_verbs_rc_addr remote = {.slots = RING, .stride = sizeof(rings[0][0])};
		struct sg_dp_verbs_rc_addr local[2];
		struct sg_dp_verbs_stats st;
		struct sg_dp_engine *eng;
		struct sg_dp_verbs *t;
		uint64_t injected = 0; /* receive completions */
		uint8_t pkt[SG_DP_HDR_LEN + CHUNK];

		rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)mode;
		c.mode = mode ? SG_DP_VERBS_RC : SG_DP_VERBS_UD;
		c.rc_slots = 16;
		t = open_pair(&c, &eng);
		if (t == NULL)
			return;
		for (unsigned int w = 0; mode && w < 2; w++) {
			remote.addr = (uintptr_t)rings[w];
			SG_CHECK_EQ(sg_dp_verbs_rc_connect(t, &remote, &local[w], err, sizeof(err)),
				    (int)w);
		}
		for (int it = 0; it < 4000; it++) {
			struct ibv_wc w = {0};
			uint32_t len;

			if (rnd() % 8 == 0) { /* a completion that is not ours at all */
				bool rq = rnd() & 1;

				w.wr_id = (uint64_t)(rnd() % 7 + 3) << 32 | rnd();
				fk_push_wc(rq ? &fk.rq : &fk.sq, &w);
				injected += rq;
			} else if (fk.ph != fk.pt) {
				struct fk_posted p = fk.posted[fk.ph++ % FK_MAX_RECV];

				len = rnd() % 4 ? build_push(pkt, rnd() % NW, rnd() % 3, rnd() % 3) :
						  rnd() % (SG_DP_HDR_LEN + CHUNK);
				if (rnd() % 4 == 0)
					for (uint32_t b = 0; b < len; b++)
						pkt[b] = (uint8_t)rnd();
				if (mode == 0) {
					/* mostly a well-formed IPv4 GRH area, sometimes noise */
					for (int g = 0; g < SG_DP_VERBS_GRH_LEN; g++)
						p.addr[g] = rnd() % 8 ? 0 : (uint8_t)rnd();
					p.addr[20] = rnd() % 8 ? 0x45 : (uint8_t)rnd();
					p.addr[32] = 10;
					p.addr[35] = (uint8_t)(rnd() % 6);
					memcpy(p.addr + SG_DP_VERBS_GRH_LEN, pkt, len);
				}
				else
					memcpy((uint8_t *)(uintptr_t)local[rnd() & 1].addr +
						       (rnd() % 16) * local[0].stride, pkt, len);
				w.wr_id = p.wr_id;
				/* mostly what the HCA reports, sometimes anything */
				w.status = rnd() % 4 ? IBV_WC_SUCCESS : sts[rnd() % 6];
				w.opcode = rnd() % 4 ? (mode ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) :
						       ops[rnd() % 4];
				w.wc_flags = rnd() % 4 ? (mode ? IBV_WC_WITH_IMM : IBV_WC_GRH) :
							 rnd() & (IBV_WC_GRH | IBV_WC_WITH_IMM);
				w.byte_len = rnd() % 8 ? len + (mode ? 0 : SG_DP_VERBS_GRH_LEN) : rnd();
				w.src_qp = rnd() % 2;
				w.qp_num = mode ? local[rnd() % 3 % 2].qpn + (rnd() % 5 == 0) : 0;
				w.imm_data = htonl(rnd() % 5 ? rnd() % 16 : rnd());
				fk_push_wc(&fk.rq, &w);
				injected++;
			}
			if (rnd() % 4 == 0)
				poll_all(t, eng);
		}
		poll_all(t, eng);
		sg_dp_verbs_stats(t, &st);
		SG_CHECK(st.rx_completions == injected &&
			 fk_posted_count() == 64 && st.recv_posted == 64 && st.send_free == 32,
			 "mode %d: completions %llu of %llu, posted %u, free %llu", mode,
			 (unsigned long long)st.rx_completions, (unsigned long long)injected,
			 fk_posted_count(), (unsigned long long)st.send_free);
		close_pair(t, eng);
	}
}

/* The lcore loop: pushes waiting on the CQ are summed; the sleep policy sleeps when idle. */
static void test_lcore_loop(void)
{
	struct sg_dp_verbs_conf c = fconf();
	struct sg_dp_engine *eng;
	struct sg_dp_verbs *t;
	volatile bool stop = false;
	unsigned int bad = 0;

	t = open_pair(&c, &eng);
	if (t == NULL)
		return;
	push_ud(1, 3, 0);
	{
		struct sg_dp_verbs_loop l = {.t = t, .eng = eng, .stop = &stop, .max_polls = 50};

		SG_CHECK_EQ(sg_dp_verbs_lcore_main(&l), 0);
		SG_CHECK(l.polls == 50 && l.busy_cycles > 0 && l.idle_cycles > 0,
			 "busy-poll loop: %llu polls", (unsigned long long)l.polls);
		SG_CHECK_EQ(check_results(0, 1, &bad), 3 * NW);
		SG_CHECK_EQ(bad, 0);
	}
	{
		/* 200 empty polls under the sleep policy: at least 136 sleeps of >= 1 us */
		struct sg_dp_verbs_loop l = {.t = t, .eng = eng, .stop = &stop, .max_polls = 200,
					     .idle_sleep_us = 50};
		uint64_t t0 = rte_get_timer_cycles();

		SG_CHECK_EQ(sg_dp_verbs_lcore_main(&l), 0);
		SG_CHECK(l.busy_cycles == 0 &&
			 rte_get_timer_cycles() - t0 >= 136 * rte_get_timer_hz() / 1000000,
			 "sleep policy did not sleep");
	}
	{
		struct sg_dp_verbs_loop l = {.t = t, .eng = eng, .stop = &stop};

		stop = true;
		SG_CHECK_EQ(sg_dp_verbs_lcore_main(&l), 0);
		SG_CHECK_EQ(l.polls, 0);
	}
	close_pair(t, eng);
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "128",
		       "--log-level=lib.eal:error", "--log-level=sigma.verbs:warning", prefix,
		       NULL};

	(void)argc;
	test_conf();
	test_conf_file();
	test_memlock();
	test_gid_select();
	test_wr();
	test_peer_from_wc();
	/* the address-handle cache is an rte_hash: the rest needs EAL */
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_verbs_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0) {
		printf("EAL cannot start here: transport tests not run\n");
		return sg_test_finish("dp_verbs");
	}
	test_create_errors();
	test_create_ok();
	test_datapath();
	test_backpressure();
	test_peer_cache();
	test_rc();
	test_random_completions();
	test_lcore_loop();
	/* also removes the runtime folder that rte_eal_cleanup() leaves */
	sg_dp_eal_cleanup();
	return sg_test_finish("dp_verbs");
}
