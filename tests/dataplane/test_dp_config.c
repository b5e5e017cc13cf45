/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad configuration: the embedded default, INI overrides, command-line
 * options, the layout syntax and the layout checks, each fed good and bad
 * input. Runs without EAL: rte_cfgfile and the parsers need none.
 */
#include <string.h>

#include "sg_dp_pipeline.h"
#include "sg_sum.h"
#include "sg_test.h"

static char err[512];

static int args(struct sg_dp_config *c, const char *a0, const char *a1, const char *a2,
		const char *a3, const char *a4)
{
	char *argv[7] = {"sigmad"};
	int argc = 1;
	const char *in[] = {a0, a1, a2, a3, a4};

	for (int i = 0; i < 5 && in[i]; i++)
		argv[argc++] = (char *)in[i];
	err[0] = '\0';
	return sg_dp_config_parse_args(c, argc, argv, err, sizeof(err));
}

static int load(struct sg_dp_config *c, const char *text)
{
	err[0] = '\0';
	return sg_dp_config_load_string(c, text, err, sizeof(err));
}

static void test_defaults(void)
{
	struct sg_dp_config c;

	SG_CHECK_EQ(sg_dp_config_defaults(&c), 0);
	SG_CHECK_EQ(c.ip, (10u << 24) | (11u << 16) | 1u);
	SG_CHECK_EQ(c.udp_port, 9300);
	SG_CHECK_EQ(c.mtu, 9000);
	SG_CHECK(c.udp_checksum, "udp_checksum default on");
	SG_CHECK_EQ(c.n_lcores, 1);
	SG_CHECK_EQ(c.lcores[0].role, SG_DP_ROLE_RTC);
	SG_CHECK_EQ(c.lcores[0].lcore, 1);
	SG_CHECK_EQ(c.burst, 32);
	SG_CHECK_EQ(c.idle, SG_DP_IDLE_BUSY);
	SG_CHECK_EQ(c.n_jobs, 1);
	SG_CHECK_EQ(c.jobs[0].id, 1);
	SG_CHECK_EQ(c.jobs[0].workers, 4);
	SG_CHECK_EQ(c.jobs[0].token, 0x5349474d41000001ull);
	SG_CHECK_EQ(c.jobs[0].dtype, SG_DTYPE_FP32);
	SG_CHECK_EQ(c.log_level, 7); /* info */
}

static void test_file_overrides(void)
{
	struct sg_dp_config c;

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(load(&c, "[net]\nip = 192.168.7.9\nudp_checksum = no\n"
			     "[layout]\nio = (0,0,1), (0,1,2)\nreduce = 3-4,6\n"
			     "[live]\nidle = sleep\nidle_sleep_us = 250\nlog_level = debug\n"
			     "sleep_lcores = 3,5-6\n"
			     "[job 7]\nworkers = 8\ndtype = bf16\nmode = deterministic\n"),
		    0);
	SG_CHECK(err[0] == '\0', "no error text: %s", err);
	SG_CHECK_EQ(c.ip, (192u << 24) | (168u << 16) | (7u << 8) | 9u);
	SG_CHECK_EQ(c.udp_port, 9300); /* untouched */
	SG_CHECK(!c.udp_checksum, "udp_checksum off");
	SG_CHECK_EQ(c.n_lcores, 5); /* [layout] replaced the default rtc */
	SG_CHECK_EQ(c.lcores[0].role, SG_DP_ROLE_IO);
	SG_CHECK_EQ(c.lcores[1].queue, 1);
	SG_CHECK_EQ(c.lcores[1].lcore, 2);
	SG_CHECK_EQ(c.lcores[2].lcore, 3);
	SG_CHECK_EQ(c.lcores[3].lcore, 4);
	SG_CHECK_EQ(c.lcores[4].lcore, 6);
	SG_CHECK_EQ(c.lcores[4].role, SG_DP_ROLE_REDUCE);
	SG_CHECK_EQ(c.idle, SG_DP_IDLE_SLEEP);
	SG_CHECK_EQ(c.idle_sleep_us, 250);
	SG_CHECK(c.sleep_lcores[3] && c.sleep_lcores[5] && c.sleep_lcores[6], "sleep_lcores set");
	SG_CHECK(!c.sleep_lcores[4] && !c.sleep_lcores[2], "sleep_lcores others clear");
	SG_CHECK_EQ(c.log_level, 8);
	SG_CHECK_EQ(c.n_jobs, 2);
	SG_CHECK_EQ(c.jobs[1].id, 7);
	SG_CHECK_EQ(c.jobs[1].workers, 8);
	SG_CHECK_EQ(c.jobs[1].dtype, SG_DTYPE_BF16);
	SG_CHECK_EQ(c.jobs[1].mode, 2);
}

/* Every bad value names its key; none crashes or leaves half a value. */
static void test_file_garbage(void)
{
	static const struct {
		const char *text, *needle;
	} bad[] = {
		{"[net]\nip = 10.0.0.256\n", "ip"},
		{"[net]\nip = 10.0.0\n", "ip"},
		{"[net]\nip = -1.0.0.1\n", "ip"},
		{"[net]\nudp_port = 0\n", "udp_port"},
		{"[net]\nudp_port = 65536\n", "udp_port"},
		{"[net]\nudp_port = 12ab\n", "udp_port"},
		{"[net]\nmtu = 9001\n", "mtu"},
		{"[net]\nudp_checksum = maybe\n", "udp_checksum"},
		{"[net]\nmac = 02:00:zz:00:00:01\n", "mac"},
		{"[net]\ncolour = blue\n", "colour"},
		{"[nett]\nip = 10.0.0.1\n", "nett"},
		{"[resources]\nburst = 0\n", "burst"},
		{"[resources]\nburst = -5\n", "burst"},
		{"[resources]\nmbufs = 99999999999999999999999\n", "mbufs"},
		{"[live]\nidle = nap\n", "idle"},
		{"[live]\nlog_level = loud\n", "log_level"},
		{"[live]\nsleep_lcores = 1:2\n", "1:2"},
		{"[live]\nsleep_lcores = 2-\n", "2-"},
		{"[layout]\nio = (0,0)\n", "io"},
		{"[layout]\nio = (0,0,1\n", "io"},
		{"[layout]\nio = (0,0,1),\n", "io"},
		{"[layout]\nio = (a,0,1)\n", "io"},
		{"[layout]\nreduce = 3-1\n", "reduce"},
		{"[layout]\nreduce = 2,,3\n", "reduce"},
		{"[layout]\nreduce = 99999\n", "reduce"},
		{"[layout]\nrtc = (9,0,1)\n", "rtc"},
		{"[layout]\nrtc = \n", "rtc"},
		{"[job x]\nworkers = 2\n", "job x"},
		{"[job 0]\nworkers = 2\n", "job 0"},
		{"[job 2]\nworkers = 65\n", "workers"},
		{"[job 2]\ndtype = fp8\n", "dtype"},
		{"[job 2]\nmode = lazy\n", "mode"},
		{"[job 2]\nflavour = 1\n", "flavour"},
		{"[job 2]\nchunk_bytes = 1001\n", "chunk_bytes"},
		{"[job 2]\nchunk_bytes = 9000\n", "chunk_bytes"},
		{"[job 2]\nkeys = 0\n", "keys"},
		{"this is not an ini file\n", "INI"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sg_dp_config c;

		sg_dp_config_defaults(&c);
		SG_CHECK(load(&c, bad[i].text) < 0, "accepted: %s", bad[i].text);
		SG_CHECK(strstr(err, bad[i].needle) != NULL, "error for %s does not name %s: %s",
			 bad[i].text, bad[i].needle, err);
	}
	{
		struct sg_dp_config c;

		sg_dp_config_defaults(&c);
		err[0] = '\0';
		SG_CHECK(sg_dp_config_load_file(&c, "/nonexistent/sigmad.ini", err,
						sizeof(err)) < 0, "missing file accepted");
		SG_CHECK(strstr(err, "/nonexistent/sigmad.ini") != NULL, "%s", err);
	}
}

static void test_args(void)
{
	struct sg_dp_config c;

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(args(&c, "--io", "(0,0,1)", "--reduce", "2-3", "--idle=sleep"), 0);
	SG_CHECK_EQ(c.n_lcores, 3);
	SG_CHECK_EQ(c.lcores[0].role, SG_DP_ROLE_IO);
	SG_CHECK_EQ(c.lcores[2].lcore, 3);
	SG_CHECK_EQ(c.idle, SG_DP_IDLE_SLEEP);

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(args(&c, "--sleep-lcores", "7", NULL, NULL, NULL), 0);
	SG_CHECK(c.sleep_lcores[7] && !c.sleep_lcores[1], "--sleep-lcores");
	SG_CHECK(args(&c, "--sleep-lcores", "x", NULL, NULL, NULL) < 0, "bad --sleep-lcores");

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(args(&c, "--ip", "10.1.2.3", "--udp-port", "5000", "--no-udp-checksum"), 0);
	SG_CHECK_EQ(c.ip, (10u << 24) | (1u << 16) | (2u << 8) | 3u);
	SG_CHECK_EQ(c.udp_port, 5000);
	SG_CHECK(!c.udp_checksum, "--no-udp-checksum");
	SG_CHECK_EQ(c.n_lcores, 1); /* no layout option: config's layout stays */

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(args(&c, "--demo", "--demo-workers", "8", "--duration", "1.5"), 0);
	SG_CHECK(c.demo, "--demo");
	SG_CHECK_EQ(c.demo_workers, 8);
	SG_CHECK(c.duration_s == 1.5, "--duration");

	/* garbage on the command line */
	sg_dp_config_defaults(&c);
	SG_CHECK(args(&c, "--bogus", NULL, NULL, NULL, NULL) < 0, "unknown option");
	SG_CHECK(strstr(err, "--bogus") != NULL, "%s", err);
	SG_CHECK(args(&c, "--ip", "300.1.1.1", NULL, NULL, NULL) < 0, "bad ip");
	SG_CHECK(strstr(err, "ip") != NULL, "%s", err);
	SG_CHECK(args(&c, "--duration", "-1", NULL, NULL, NULL) < 0, "bad duration");
	SG_CHECK(args(&c, "--duration", "abc", NULL, NULL, NULL) < 0, "bad duration");
	SG_CHECK(args(&c, "--demo-workers", "0", NULL, NULL, NULL) < 0, "bad workers");
	SG_CHECK(args(&c, "--reduce", "x", NULL, NULL, NULL) < 0, "bad reduce");
	SG_CHECK(args(&c, "--io", NULL, NULL, NULL, NULL) < 0, "missing argument");
	SG_CHECK(args(&c, "stray", NULL, NULL, NULL, NULL) < 0, "stray argument");
	SG_CHECK(strstr(err, "stray") != NULL, "%s", err);
	SG_CHECK(args(&c, "--config", "/nonexistent.ini", NULL, NULL, NULL) < 0, "config");
	SG_CHECK(strstr(err, "/nonexistent.ini") != NULL, "%s", err);
}

static void topo_init(struct sg_dp_topology *t, unsigned int lcores, unsigned int ports)
{
	memset(t, 0, sizeof(*t));
	for (unsigned int l = 0; l < lcores; l++)
		t->lcore_enabled[l] = true;
	t->n_ports = ports;
	for (unsigned int p = 0; p < ports; p++) {
		t->max_rxq[p] = 4;
		t->max_txq[p] = 8;
	}
}

static int check(const char *io, const char *reduce, const char *rtc,
		 const struct sg_dp_topology *t, unsigned int *nw)
{
	struct sg_dp_config c;
	FILE *devnull = fopen("/dev/null", "w");
	int rc;

	sg_dp_config_defaults(&c);
	c.n_lcores = 0;
	if (io)
		SG_CHECK_EQ(sg_dp_layout_parse(&c, SG_DP_ROLE_IO, io, err, sizeof(err)), 0);
	if (reduce)
		SG_CHECK_EQ(sg_dp_layout_parse(&c, SG_DP_ROLE_REDUCE, reduce, err, sizeof(err)), 0);
	if (rtc)
		SG_CHECK_EQ(sg_dp_layout_parse(&c, SG_DP_ROLE_RTC, rtc, err, sizeof(err)), 0);
	err[0] = '\0';
	rc = sg_dp_layout_check(&c, t, err, sizeof(err), devnull, nw);
	fclose(devnull);
	return rc;
}

static void test_layout_check(void)
{
	struct sg_dp_topology t;
	unsigned int nw = 99;

	topo_init(&t, 4, 1);
	SG_CHECK_EQ(check("(0,0,1)", "2-3", NULL, &t, &nw), 0);
	SG_CHECK_EQ(nw, 0);
	SG_CHECK_EQ(check(NULL, NULL, "(0,0,1),(0,1,2)", &t, &nw), 0);

	/* an lcore EAL did not enable */
	SG_CHECK(check("(0,0,1)", "5", NULL, &t, &nw) < 0, "lcore 5 accepted");
	SG_CHECK(strstr(err, "lcore 5 is not enabled") && strstr(err, "--lcores"), "%s", err);
	/* the main lcore */
	SG_CHECK(check("(0,0,0)", "1", NULL, &t, &nw) < 0, "main lcore accepted");
	SG_CHECK(strstr(err, "main lcore") != NULL, "%s", err);
	/* one lcore, two roles */
	SG_CHECK(check("(0,0,1)", "1", NULL, &t, &nw) < 0, "two roles accepted");
	SG_CHECK(strstr(err, "two roles") && strstr(err, "rtc"), "%s", err);
	SG_CHECK(check("(0,0,1),(0,1,1)", "2", NULL, &t, &nw) < 0, "two queues one lcore");
	SG_CHECK(strstr(err, "two roles") && strstr(err, "own lcore"), "%s", err);
	/* no reducer / no receiver */
	SG_CHECK(check("(0,0,1)", NULL, NULL, &t, &nw) < 0, "no reducer accepted");
	SG_CHECK(strstr(err, "no reducer") != NULL, "%s", err);
	SG_CHECK(check(NULL, "1", NULL, &t, &nw) < 0, "no receiver accepted");
	SG_CHECK(strstr(err, "receives") != NULL, "%s", err);
	/* ports and queues */
	SG_CHECK(check("(1,0,1)", "2", NULL, &t, &nw) < 0, "port 1 accepted");
	SG_CHECK(strstr(err, "port 1 does not exist") != NULL, "%s", err);
	SG_CHECK(check("(0,1,1)", "2", NULL, &t, &nw) < 0, "queue gap accepted");
	SG_CHECK(strstr(err, "without gaps") != NULL, "%s", err);
	SG_CHECK(check("(0,0,1),(0,0,2)", "3", NULL, &t, &nw) < 0, "queue twice accepted");
	SG_CHECK(strstr(err, "twice") != NULL, "%s", err);
	t.max_rxq[0] = 1;
	SG_CHECK(check(NULL, NULL, "(0,0,1),(0,1,2)", &t, &nw) < 0, "too many rxq accepted");
	SG_CHECK(strstr(err, "RX queues") != NULL, "%s", err);
	t.max_rxq[0] = 4;
	t.max_txq[0] = 2;
	SG_CHECK(check("(0,0,1)", "2-3", NULL, &t, &nw) < 0, "too many txq accepted");
	SG_CHECK(strstr(err, "TX queue") != NULL, "%s", err);

	/* NUMA: a reducer on another node than its port is a warning */
	topo_init(&t, 4, 1);
	t.port_node[0] = 0;
	t.lcore_node[3] = 1;
	SG_CHECK_EQ(check("(0,0,1)", "2-3", NULL, &t, &nw), 0);
	SG_CHECK_EQ(nw, 1);
	t.port_node[0] = -1; /* vdev: unknown node, no warning */
	SG_CHECK_EQ(check("(0,0,1)", "2-3", NULL, &t, &nw), 0);
	SG_CHECK_EQ(nw, 0);
}

int main(void)
{
	test_defaults();
	test_file_overrides();
	test_file_garbage();
	test_args();
	test_layout_check();
	return sg_test_finish("dp_config");
}
