/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad configuration: the embedded default, INI overrides, command-line
 * options, the layout syntax and the layout checks, each fed good and bad
 * input, the section hooks a program's own sections go through, and random
 * mutations of good files (with sigmad's own sections, sg_dp_agent_config.h,
 * as sigmad loads them) and command lines. [control] and [cluster] themselves:
 * tests/sigmad/test_agent_config.c. Runs without EAL: rte_cfgfile and the
 * parsers need none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cfgfile.h>

#include "sg_dp_agent_config.h"
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
	SG_CHECK_EQ(c.lcores[0].role, SG_ROLE_RTC);
	SG_CHECK_EQ(c.lcores[0].lcore, 1);
	SG_CHECK_EQ(c.burst, 32);
	SG_CHECK_EQ(c.idle, SG_IDLE_POLL);
	SG_CHECK_EQ(c.n_jobs, 1);
	SG_CHECK_EQ(c.jobs[0].id, 1);
	SG_CHECK_EQ(c.jobs[0].workers, 4);
	SG_CHECK_EQ(c.jobs[0].token, 0x5349474d41000001ull);
	SG_CHECK_EQ(c.jobs[0].dtype, SG_DTYPE_FP32);
	SG_CHECK_EQ(c.log_level, 7); /* info */
	SG_CHECK_EQ(c.transport, SG_DP_TRANSPORT_DPDK);
	SG_CHECK(c.sock.rcvbuf == 8u << 20 && c.sock.sndbuf == 4u << 20 && c.sock.gro &&
		 c.sock.gso, "[socket] defaults: rcvbuf %u sndbuf %u gro %d gso %d", c.sock.rcvbuf,
		 c.sock.sndbuf, c.sock.gro, c.sock.gso);
}

static void test_file_overrides(void)
{
	struct sg_dp_config c;

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(load(&c, "[net]\nip = 192.168.7.9\nudp_checksum = no\n"
			     "[layout]\nio = (0,0,1), (0,1,2)\nreduce = 3-4,6\n"
			     "[resources]\npeers = 100000\npeer_idle_ms = 500\n"
			     "[live]\nidle = sleep\nidle_sleep_us = 250\nlog_level = debug\n"
			     "sleep_lcores = 3,5-6\n"
			     "[job 7]\nworkers = 8\ndtype = bf16\nmode = deterministic\n"),
		    0);
	SG_CHECK(err[0] == '\0', "no error text: %s", err);
	SG_CHECK_EQ(c.ip, (192u << 24) | (168u << 16) | (7u << 8) | 9u);
	SG_CHECK_EQ(c.udp_port, 9300); /* untouched */
	SG_CHECK_EQ(c.peers, 100000);
	SG_CHECK_EQ(c.peer_idle_ms, 500);
	SG_CHECK(!c.udp_checksum, "udp_checksum off");
	SG_CHECK_EQ(c.n_lcores, 5); /* [layout] replaced the default rtc */
	SG_CHECK_EQ(c.lcores[0].role, SG_ROLE_IO);
	SG_CHECK_EQ(c.lcores[1].queue, 1);
	SG_CHECK_EQ(c.lcores[1].lcore, 2);
	SG_CHECK_EQ(c.lcores[2].lcore, 3);
	SG_CHECK_EQ(c.lcores[3].lcore, 4);
	SG_CHECK_EQ(c.lcores[4].lcore, 6);
	SG_CHECK_EQ(c.lcores[4].role, SG_ROLE_REDUCE);
	SG_CHECK_EQ(c.idle, SG_IDLE_SLEEP);
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

/* INI text that must be refused, and what the message must name. */
struct bad_ini {
	const char *text, *needle;
};

/*
 * Each of @p bad on top of the defaults: refused, the message names its needle,
 * and the keys the garbage was not about keep their defaults.
 */
static void refuse_all(const struct bad_ini *bad, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct sg_dp_config c;

		sg_dp_config_defaults(&c);
		SG_CHECK(load(&c, bad[i].text) < 0, "accepted: %s", bad[i].text);
		SG_CHECK(strstr(err, bad[i].needle) != NULL, "%s: \"%s\" lacks \"%s\"",
			 bad[i].text, err, bad[i].needle);
		SG_CHECK(c.idle == SG_IDLE_POLL && c.steer == SG_DP_STEER_AUTO,
			 "%s: a refused config changed idle or steer", bad[i].text);
	}
}

/* [transport] type = socket and its [socket] keys: parsed, and each bad value refused
 * with the key and the accepted form named. */
static void test_socket(void)
{
	static const struct bad_ini bad[] = {
		{"[socket]\nrcvbuf = 10\n",
		 "[socket] rcvbuf = \"10\": expected an integer in [65536, 1073741824]"},
		{"[socket]\nsndbuf = 2147483648\n", "[socket] sndbuf = \"2147483648\": expected"},
		{"[socket]\nsndbuf = -1\n", "[socket] sndbuf"},
		{"[socket]\nrcvbuf = 1M\n", "[socket] rcvbuf = \"1M\""},
		{"[socket]\ngro = maybe\n", "[socket] gro = \"maybe\": expected yes, on, true"},
		{"[socket]\ngso = 2\n", "[socket] gso = \"2\": expected yes"},
		{"[socket]\nbusy_poll = 1\n", "unknown key \"busy_poll\" in [socket]"},
		{"[transport]\ntype = udp\n", "[transport] type = \"udp\": expected dpdk, verbs or socket"},
		{"[transport]\ntype = Socket\n", "expected dpdk, verbs or socket"},
	};
	struct sg_dp_config c;

	refuse_all(bad, sizeof(bad) / sizeof(bad[0]));
	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(load(&c, "[transport]\ntype = socket\n[socket]\nrcvbuf = 65536\n"
			 "sndbuf = 1073741824\ngro = no\ngso = off\n"), 0);
	SG_CHECK(c.transport == SG_DP_TRANSPORT_SOCKET && c.sock.rcvbuf == 65536 &&
		 c.sock.sndbuf == 1u << 30 && !c.sock.gro && !c.sock.gso,
		 "[socket] parsed: transport %u rcvbuf %u sndbuf %u gro %d gso %d", c.transport,
		 c.sock.rcvbuf, c.sock.sndbuf, c.sock.gro, c.sock.gso);
	/* a later file without [socket] keeps what an earlier one set */
	SG_CHECK_EQ(load(&c, "[live]\nidle = sleep\n"), 0);
	SG_CHECK(c.sock.rcvbuf == 65536 && !c.sock.gro, "[socket] kept");
}

/* Every bad value names its key; none crashes or leaves half a value. */
static void test_file_garbage(void)
{
	static const struct bad_ini bad[] = {
		{"[net]\nip = 10.0.0.256\n", "ip"},
		{"[net]\nip = 10.0.0\n", "ip"},
		{"[net]\nip = -1.0.0.1\n", "ip"},
		/* read as 10.0.0.1 here but as 8.0.0.1 by tools that take octal: refused,
		 * as by every other IPv4 parser of Sigma (sg_ipv4_parse()) */
		{"[net]\nip = 010.0.0.1\n", "ip"},
		{"[net]\nip = 10.0.0.1x\n", "ip"},
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
		/* read as octal (8) before: a leading zero is refused, as in an address */
		{"[resources]\nburst = 010\n", "burst"},
		{"[job 2]\nworkers = 010\n", "workers"},
		{"[layout]\nreduce = 01\n", "reduce"},
		{"[resources]\npeers = 63\n", "peers"},
		{"[resources]\npeer_idle_ms = 9\n", "peer_idle_ms"},
		/* docs/sigmad.md: pool_bufs is 16..4194304 */
		{"[resources]\npool_bufs = 15\n", "[16, 4194304]"},
		{"[resources]\npool_bufs = 4194305\n", "pool_bufs"},
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

	refuse_all(bad, sizeof(bad) / sizeof(bad[0]));
	{
		struct sg_dp_config c;

		sg_dp_config_defaults(&c);
		err[0] = '\0';
		SG_CHECK(sg_dp_config_load_file(&c, "/nonexistent/sigmad.ini", err,
						sizeof(err)) < 0, "missing file accepted");
		SG_CHECK(strstr(err, "/nonexistent/sigmad.ini") != NULL, "%s", err);
	}
}

/*
 * Word-valued keys: every accepted word gives its value (the table here is the
 * reference, written from docs/sigmad.md), anything else is refused with the
 * accepted words listed, in the file and on the command line alike.
 */
static void test_words(void)
{
	static const struct {
		const char *section, *key, *word;
		unsigned int want;
	} good[] = {
		{"live", "idle", "busy", SG_IDLE_POLL},
		{"live", "idle", "sleep", SG_IDLE_SLEEP},
		{"net", "steer", "auto", SG_DP_STEER_AUTO},
		{"net", "steer", "flow", SG_DP_STEER_FLOW},
		{"net", "steer", "off", SG_DP_STEER_OFF},
		{"net", "udp_checksum", "yes", 1}, {"net", "udp_checksum", "on", 1},
		{"net", "udp_checksum", "true", 1}, {"net", "udp_checksum", "1", 1},
		{"net", "udp_checksum", "no", 0}, {"net", "udp_checksum", "off", 0},
		{"net", "udp_checksum", "false", 0}, {"net", "udp_checksum", "0", 0},
		{"transport", "type", "dpdk", SG_DP_TRANSPORT_DPDK},
		{"transport", "type", "verbs", SG_DP_TRANSPORT_VERBS},
		{"transport", "type", "socket", SG_DP_TRANSPORT_SOCKET},
	};
	static const struct bad_ini bad[] = {
		{"[live]\nidle = nap\n", "[live] idle = \"nap\": expected busy or sleep"},
		{"[live]\nidle = BUSY\n", "expected busy or sleep"},
		{"[live]\nidle = busy2\n", "expected busy or sleep"},
		{"[live]\nidle =\n", "[live] idle = \"\": expected busy or sleep"},
		{"[net]\nsteer = 1\n", "[net] steer = \"1\": expected auto, flow or off"},
		{"[net]\nsteer = autoo\n", "expected auto, flow or off"},
		{"[net]\nudp_checksum = maybe\n",
		 "[net] udp_checksum = \"maybe\": expected yes, on, true, 1, no, off, false or 0"},
		{"[transport]\ntype = rdma\n",
		 "[transport] type = \"rdma\": expected dpdk, verbs or socket"},
	};
	char text[128];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct sg_dp_config c;
		unsigned int got;

		sg_dp_config_defaults(&c);
		/* start from another value, so that a key that is ignored shows */
		c.idle = good[i].want ? SG_IDLE_POLL : SG_IDLE_SLEEP;
		c.steer = good[i].want ? SG_DP_STEER_AUTO : SG_DP_STEER_OFF;
		c.udp_checksum = !good[i].want;
		c.transport = good[i].want ? SG_DP_TRANSPORT_DPDK : SG_DP_TRANSPORT_VERBS;
		snprintf(text, sizeof(text), "[%s]\n%s = %s\n", good[i].section, good[i].key,
			 good[i].word);
		SG_CHECK_EQ(load(&c, text), 0);
		got = !strcmp(good[i].key, "idle") ? (unsigned int)c.idle :
		      !strcmp(good[i].key, "steer") ? c.steer :
		      !strcmp(good[i].key, "type") ? c.transport : (unsigned int)c.udp_checksum;
		SG_CHECK(got == good[i].want, "%s: got %u, want %u", text, got, good[i].want);
	}
	refuse_all(bad, sizeof(bad) / sizeof(bad[0]));
	{
		struct sg_dp_config c;

		sg_dp_config_defaults(&c);
		SG_CHECK_EQ(args(&c, "--idle", "sleep", "--steer", "off", NULL), 0);
		SG_CHECK(c.idle == SG_IDLE_SLEEP && c.steer == SG_DP_STEER_OFF, "options");
		SG_CHECK(args(&c, "--steer", "sideways", NULL, NULL, NULL) < 0, "--steer sideways");
		SG_CHECK(strstr(err, "expected auto, flow or off") != NULL, "%s", err);
		SG_CHECK(args(&c, "--idle", "", NULL, NULL, NULL) < 0, "--idle \"\"");
		SG_CHECK(strstr(err, "expected busy or sleep") != NULL, "%s", err);
	}
}

/* @p text as a private (0600) file under /tmp; its path into @p path. */
/* A program's section (struct sg_dp_config_section): what a hook saw. */
struct seen {
	int calls;
	char value[32];
	int rc; /* what the hook answers */
};

static int seen_load(void *arg, struct rte_cfgfile *cf, const char *name, char *e, size_t elen)
{
	struct seen *s = arg;
	const char *v = rte_cfgfile_get_entry(cf, name, "color");

	s->calls++;
	snprintf(s->value, sizeof(s->value), "%s", v ? v : "");
	if (s->rc < 0)
		snprintf(e, elen, "[%s] color = %s: refused by its hook", name, s->value);
	return s->rc;
}

/*
 * The loader hands a program's section whole to its hook, once per load that has
 * it; without the hook the section is unknown; the hook's refusal is the load's.
 */
static void test_sections(void)
{
	struct seen s = {0};
	struct sg_dp_config c;

	sg_dp_config_defaults(&c);
	SG_CHECK(load(&c, "[paint]\ncolor = red\n") < 0 && strstr(err, "unknown section [paint]"),
		 "no hook: %s", err);
	SG_CHECK(strstr(err, "control") == NULL, "a section no hook names is listed: %s", err);
	c.sections[0] = (struct sg_dp_config_section){"paint", seen_load, &s};
	c.n_sections = 1;
	SG_CHECK_EQ(load(&c, "[live]\nidle = sleep\n"), 0);
	SG_CHECK_EQ(s.calls, 0);
	SG_CHECK_EQ(load(&c, "[paint]\ncolor = red\n[live]\nidle = sleep\n"), 0);
	SG_CHECK(s.calls == 1 && !strcmp(s.value, "red"), "hook saw %d call(s), \"%s\"", s.calls,
		 s.value);
	SG_CHECK_EQ(c.idle, SG_IDLE_SLEEP);
	SG_CHECK(load(&c, "[pain]\ncolor = red\n") < 0 && strstr(err, "paint") != NULL,
		 "the hook's section is listed as known: %s", err);
	s.rc = -EINVAL;
	SG_CHECK(load(&c, "[paint]\ncolor = blue\n") == -EINVAL &&
		 strstr(err, "refused by its hook") != NULL, "the hook's refusal: %s", err);
	SG_CHECK_EQ(s.calls, 2);
	/* defaults clear the hooks: a fresh config knows none */
	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(c.n_sections, 0);
}

static void test_args(void)
{
	struct sg_dp_config c;

	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(args(&c, "--io", "(0,0,1)", "--reduce", "2-3", "--idle=sleep"), 0);
	SG_CHECK_EQ(c.n_lcores, 3);
	SG_CHECK_EQ(c.lcores[0].role, SG_ROLE_IO);
	SG_CHECK_EQ(c.lcores[2].lcore, 3);
	SG_CHECK_EQ(c.idle, SG_IDLE_SLEEP);

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
	SG_CHECK(args(&c, "--duration", "+2", NULL, NULL, NULL) < 0, "signed duration");
	SG_CHECK(args(&c, "--duration", "0x1p3", NULL, NULL, NULL) < 0, "hex duration");
	SG_CHECK(args(&c, "--duration", "2 ", NULL, NULL, NULL) < 0, "duration and a space");
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
		SG_CHECK_EQ(sg_dp_layout_parse(&c, SG_ROLE_IO, io, err, sizeof(err)), 0);
	if (reduce)
		SG_CHECK_EQ(sg_dp_layout_parse(&c, SG_ROLE_REDUCE, reduce, err, sizeof(err)), 0);
	if (rtc)
		SG_CHECK_EQ(sg_dp_layout_parse(&c, SG_ROLE_RTC, rtc, err, sizeof(err)), 0);
	err[0] = '\0';
	rc = sg_dp_layout_check(&c, t, err, sizeof(err), devnull, nw);
	fclose(devnull);
	return rc;
}

/* The layout rtc = (0,0,1) plus [layout] extra_rx = @p extra, from a config file. */
static int check_extra(const char *extra, const struct sg_dp_topology *t)
{
	struct sg_dp_config c;
	FILE *devnull = fopen("/dev/null", "w");
	char ini[512];
	int rc;

	snprintf(ini, sizeof(ini), "[layout]\nrtc = (0,0,1)\nextra_rx = %s\n", extra);
	sg_dp_config_defaults(&c);
	err[0] = '\0';
	rc = sg_dp_config_load_string(&c, ini, err, sizeof(err));
	if (rc == 0)
		rc = sg_dp_layout_check(&c, t, err, sizeof(err), devnull, NULL);
	fclose(devnull);
	return rc;
}

static void test_extra_rx(void)
{
	struct sg_dp_topology t;
	struct sg_dp_config c;
	char *argv[] = {"sigmad", "--rtc", "(0,0,1)", "--extra-rx", "(1,0,1),(0,1,1)", NULL};

	topo_init(&t, 4, 2);
	SG_CHECK_EQ(check_extra("(1,0,1)", &t), 0);
	SG_CHECK_EQ(check_extra("(1,0,1),(0,1,1)", &t), 0);
	/* an lcore that does not receive, a port that is not there, a queue twice, a gap */
	SG_CHECK(check_extra("(1,0,2)", &t) < 0, "extra_rx on a non-receiving lcore accepted");
	SG_CHECK(strstr(err, "lcore 2 does not receive") != NULL, "%s", err);
	SG_CHECK(check_extra("(2,0,1)", &t) < 0, "extra_rx on port 2 of 2 accepted");
	SG_CHECK(strstr(err, "port 2 does not exist") != NULL, "%s", err);
	SG_CHECK(check_extra("(0,0,1)", &t) < 0, "extra_rx of the layout's own queue accepted");
	SG_CHECK(strstr(err, "polled twice") != NULL, "%s", err);
	SG_CHECK(check_extra("(1,1,1)", &t) < 0, "extra_rx queue gap accepted");
	SG_CHECK(strstr(err, "without gaps") != NULL, "%s", err);
	SG_CHECK(check_extra("(1,0)", &t) < 0, "malformed extra_rx accepted");
	SG_CHECK(check_extra("(0,1,1),(0,2,1),(0,3,1),(1,0,1),(1,1,1),(1,2,1),(1,3,1),(1,4,1),"
			     "(1,5,1)", &t) < 0, "9 extra_rx entries accepted");
	SG_CHECK(strstr(err, "more than 8") != NULL, "%s", err);
	/* the option: both entries, and it replaces the file's layout */
	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(sg_dp_config_parse_args(&c, 5, argv, err, sizeof(err)), 0);
	SG_CHECK_EQ(c.n_extra_rx, 2);
	SG_CHECK(c.extra_rx[0].port == 1 && c.extra_rx[0].queue == 0 && c.extra_rx[0].lcore == 1 &&
		 c.extra_rx[1].port == 0 && c.extra_rx[1].queue == 1, "extra_rx from --extra-rx");
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
	SG_CHECK(strstr(err, "TX queue") != NULL && strstr(err, "qpairs=3") != NULL, "%s", err);

	/* [layout] extra_rx: one lcore polls a queue of another port too */
	test_extra_rx();

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

/*
 * Random mutations of good configs (bytes changed or cut, lines repeated, keys
 * of every section given extreme values, files spliced), as an operator's typo
 * or a truncated file would make them: each load returns 0 or -errno, a refusal
 * always says why, and what is accepted goes through the job and layout checks
 * (under the sanitizers: no overflow, no leak, no undefined behaviour).
 */
static uint64_t mut_rng = 0x9e3779b97f4a7c15ull;

static uint32_t mut_next(uint32_t n)
{
	mut_rng ^= mut_rng << 13;
	mut_rng ^= mut_rng >> 7;
	mut_rng ^= mut_rng << 17;
	return (uint32_t)(mut_rng % n);
}

#define MUT_CAP 4096

/* Values that sit on or beyond a bound, or that a careless parser might misread. */
static const char *const mut_vals[] = {
	"", "0", "-1", "1", "65535", "65536", "4294967295", "4294967296",
	"18446744073709551615", "18446744073709551616", "99999999999999999999999", "0x",
	"0xffffffffffffffff", "1e309", "nan", "-0", "yes", "sleep", "(0,0,1),(0,0,1)",
	"(1023,65535,1023)", "0-1023", "1023-0", ",", "(", "10.0.0.1:65536", "/",
	"fp32", "bf16", "socket", "verbs", "%s%n%s", "\\", "\"",
};

/* Append a "section key = value" line drawn from what sigmad reads, with an extreme value. */
static size_t mut_add_line(char *t, size_t len)
{
	static const char *const keys[] = {
		"[net]\nip", "[net]\nudp_port", "[net]\nmtu", "[net]\nmac", "[net]\nsteer",
		"[layout]\nio", "[layout]\nreduce", "[layout]\nrtc", "[resources]\nburst",
		"[resources]\nring_size", "[resources]\nmbufs", "[resources]\npool_bufs",
		"[resources]\npeers", "[live]\nidle", "[live]\nsleep_lcores", "[live]\nlog_level",
		"[job 3]\nworkers", "[job 3]\nkeys", "[job 3]\npartition_bytes", "[job 3]\nchunk_bytes",
		"[job 3]\nslots", "[job 3]\ntoken", "[job 3]\ndtype", "[job 64]\nmode",
		"[job 4294967295]\nworkers", "[control]\nunix", "[control]\nlisten",
		"[control]\nmax_frame", "[control]\nname", "[cluster]\netcd", "[cluster]\nttl",
		"[cluster]\naddr", "[socket]\nrcvbuf", "[transport]\ntype", "[verbs]\nrecv_depth",
	};
	char v[320];
	int n;

	if (mut_next(8) == 0) {
		memset(v, 'a' + (int)mut_next(26), sizeof(v) - 1);
		v[sizeof(v) - 1] = '\0';
	} else {
		snprintf(v, sizeof(v), "%s", mut_vals[mut_next(RTE_DIM(mut_vals))]);
	}
	n = snprintf(t + len, MUT_CAP - len, "\n%s = %s\n", keys[mut_next(RTE_DIM(keys))], v);
	return n < 0 || len + (size_t)n >= MUT_CAP ? len : len + (size_t)n;
}

/* Mutate @p t (a string of @p len bytes, room for MUT_CAP) in place. @return its new length. */
static size_t mutate(char *t, size_t len, const char *other)
{
	static const char alphabet[] = "[]=;#\n\r\t ,-():.x0123456789%\\\"\xff";
	size_t at = len ? mut_next((uint32_t)len) : 0, n;

	switch (mut_next(5)) {
	case 0: /* one byte changed */
		if (len)
			t[at] = alphabet[mut_next(sizeof(alphabet) - 1)];
		break;
	case 1: /* a span cut out */
		n = 1 + mut_next(24);
		if (at + n > len)
			n = len - at;
		memmove(t + at, t + at + n, len - at - n + 1);
		len -= n;
		break;
	case 2: { /* the line at @at repeated */
		size_t b = at, e = at;

		while (b > 0 && t[b - 1] != '\n')
			b--;
		while (e < len && t[e] != '\n')
			e++;
		n = e - b + 1;
		if (e < len && len + n < MUT_CAP) {
			memmove(t + e + 1 + n, t + e + 1, len - e);
			memcpy(t + e + 1, t + b, n);
			len += n;
		}
		break;
	}
	case 3:
		len = mut_add_line(t, len);
		break;
	default: /* spliced: this file's head, then the other's tail */
		n = strlen(other);
		n = n ? mut_next((uint32_t)n) : 0;
		if (at + strlen(other + n) < MUT_CAP) {
			strcpy(t + at, other + n);
			len = at + strlen(other + n);
		}
	}
	t[len] = '\0';
	return len;
}

/* Mutated files: see above. @return how many of @p runs were accepted. */
static unsigned int mutate_files(struct sg_dp_config *c, FILE *devnull, unsigned int runs)
{
	struct sg_dp_agent_sections *sections = malloc(sizeof(*sections));
	static const char *const seeds[] = {
		sg_dp_default_config,
		"[net]\nip = 192.168.7.9\nudp_checksum = no\n[layout]\nio = (0,0,1), (0,1,2)\n"
		"reduce = 3-4,6\n[resources]\npeers = 100000\npeer_idle_ms = 500\n[live]\n"
		"idle = sleep\nidle_sleep_us = 250\nlog_level = debug\nsleep_lcores = 3,5-6\n"
		"[job 7]\nworkers = 8\ndtype = bf16\nmode = deterministic\n",
		"[transport]\ntype = socket\n[socket]\nrcvbuf = 65536\nsndbuf = 1073741824\n"
		"gro = no\ngso = off\n[layout]\nrtc = (0,0,1),(0,1,2)\n",
		"[cluster]\netcd = http://a:2379,http://b:2379\nttl = 7\naddr = 10.0.0.9\n"
		"user = sigma\n[control]\nunix = /tmp/sg_mut.sock\nmax_conns = 8\nname = n1\n"
		"heartbeat_ms = 250\nmax_frame = 4096\n",
		"[job 2]\nworkers = 2\nkeys = 3\npartition_bytes = 65536\nchunk_bytes = 1024\n"
		"slots = 64\ntoken = 0x1\ndtype = int64\n[job 9]\nworkers = 64\nmode = async\n",
		"[verbs]\ndevice = mlx5_0\nport = 1\nmode = ud\nrecv_depth = 2048\n",
	};
	struct sg_dp_topology topo;
	unsigned int accepted = 0, nw;
	char *t = malloc(MUT_CAP);

	if (!SG_CHECK(t != NULL && sections != NULL, "malloc")) {
		free(t);
		free(sections);
		return 0;
	}
	topo_init(&topo, 8, 2);
	for (unsigned int i = 0; i < runs; i++) {
		const char *seed = seeds[mut_next(RTE_DIM(seeds))];
		size_t len = strlen(seed);
		int rc;

		memcpy(t, seed, len + 1);
		for (uint32_t m = 1 + mut_next(4); m > 0; m--)
			len = mutate(t, len, seeds[mut_next(RTE_DIM(seeds))]);
		sg_dp_config_defaults(c);
		sg_dp_agent_sections_init(sections, c);
		rc = load(c, t);
		if (rc < 0) {
			if (!SG_CHECK(err[0] != '\0', "refused (%d) without a reason:\n%s", rc, t))
				break;
			continue;
		}
		if (!SG_CHECK_EQ(rc, 0))
			break;
		accepted++;
		err[0] = '\0';
		if (sg_dp_config_check_jobs(c, err, sizeof(err)) < 0 && !SG_CHECK(err[0] != '\0',
				"jobs refused without a reason:\n%s", t))
			break;
		err[0] = '\0';
		if (sg_dp_layout_check(c, &topo, err, sizeof(err), devnull, &nw) < 0 &&
		    !SG_CHECK(err[0] != '\0', "layout refused without a reason:\n%s", t))
			break;
	}
	free(t);
	free(sections);
	return accepted;
}

/*
 * Command lines of sigmad's options, mostly with good values, else with one of
 * mut_vals or none: each returns 0 or -errno with a reason. @return how many of
 * @p runs were accepted.
 */
static unsigned int mutate_args(struct sg_dp_config *c, unsigned int runs)
{
	static const char *const opts[][2] = {
		{"--io", "(0,0,1)"}, {"--reduce", "2-3"}, {"--rtc", "(0,0,1),(0,1,2)"},
		{"--ip", "10.1.2.3"}, {"--udp-port", "5000"}, {"--mtu", "1500"},
		{"--burst", "32"}, {"--idle", "sleep"}, {"--idle-sleep-us", "100"},
		{"--log-level", "debug"}, {"--sleep-lcores", "3,5-6"}, {"--steer", "auto"},
		{"--demo-workers", "4"}, {"--duration", "1"}, {"--no-udp-checksum", NULL},
		{"--config", "/nonexistent/sigmad.ini"}, {"-x", NULL}, {"--", NULL},
	};
	unsigned int accepted = 0;

	for (unsigned int i = 0; i < runs; i++) {
		char *argv[12] = {"sigmad"};
		int argc = 1, rc;

		for (uint32_t n = 1 + mut_next(4); n > 0 && argc < 11; n--) {
			uint32_t o = mut_next(RTE_DIM(opts)), v = mut_next(8);

			argv[argc++] = (char *)opts[o][0];
			if (v < 6 && opts[o][1] != NULL)
				argv[argc++] = (char *)opts[o][1];
			else if (v == 6)
				argv[argc++] = (char *)mut_vals[mut_next(RTE_DIM(mut_vals))];
		}
		argv[argc] = NULL;
		sg_dp_config_defaults(c);
		err[0] = '\0';
		rc = sg_dp_config_parse_args(c, argc, argv, err, sizeof(err));
		if (!SG_CHECK(rc == 0 || (rc < 0 && err[0] != '\0'), "%s %s %s: %d without a reason",
			      argv[1], argc > 2 ? argv[2] : "", argc > 3 ? argv[3] : "", rc))
			break;
		accepted += rc == 0;
	}
	return accepted;
}

static void test_mutations(void)
{
	enum { FILES = 20000, ARGS = 5000 };
	struct sg_dp_config *c = malloc(sizeof(*c));
	FILE *devnull = fopen("/dev/null", "w");
	unsigned int ok;

	if (SG_CHECK(c != NULL && devnull != NULL, "set-up")) {
		/* both outcomes must be common, or the mutations test nothing */
		ok = mutate_files(c, devnull, FILES);
		printf("mutations: %u of %u accepted\n", ok, FILES);
		SG_CHECK(ok > FILES / 50 && ok < FILES - FILES / 50, "files accepted: %u of %u",
			 ok, FILES);
		ok = mutate_args(c, ARGS);
		printf("command lines: %u of %u accepted\n", ok, ARGS);
		SG_CHECK(ok > ARGS / 50 && ok < ARGS - ARGS / 50, "command lines accepted: %u of %u",
			 ok, ARGS);
	}
	if (devnull)
		fclose(devnull);
	free(c);
}

int main(void)
{
	test_defaults();
	test_file_overrides();
	test_file_garbage();
	test_args();
	test_words();
	test_sections();
	test_socket();
	test_layout_check();
	test_mutations();
	return sg_test_finish("dp_config");
}
