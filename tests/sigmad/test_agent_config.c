/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's own sections of its config file (sigmad/sg_dp_agent_config.h):
 * [control] and [cluster] through the pipeline loader's section hooks, each
 * fed good and bad input; the server's settings from a copy; SIGHUP's
 * comparison. Runs without EAL: rte_cfgfile and the parsers need none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sg_ctl_server.h"
#include "sg_dp_agent_config.h"
#include "sg_test.h"

static char err[512];

/* A config as sigmad holds it: the pipeline's, and its own sections. */
struct conf {
	struct sg_dp_config dp;
	struct sg_dp_agent_sections s;
};

static void conf_defaults(struct conf *c)
{
	SG_CHECK_EQ(sg_dp_config_defaults(&c->dp), 0);
	sg_dp_agent_sections_init(&c->s, &c->dp);
}

static int conf_load(struct conf *c, const char *text)
{
	err[0] = '\0';
	return sg_dp_config_load_string(&c->dp, text, err, sizeof(err));
}

/* INI text that must be refused, and what the message must name. */
struct bad_ini {
	const char *text, *needle;
};

/* Each of @p bad on top of the defaults: refused, the message names its needle. */
static void refuse_all(const struct bad_ini *bad, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct conf c;

		conf_defaults(&c);
		SG_CHECK(conf_load(&c, bad[i].text) < 0, "accepted: %s", bad[i].text);
		SG_CHECK(strstr(err, bad[i].needle) != NULL, "%s: \"%s\" lacks \"%s\"",
			 bad[i].text, err, bad[i].needle);
		SG_CHECK(!c.s.control, "%s: a refused [control] counts", bad[i].text);
	}
}

/* [cluster]: the registration in etcd, parsed, and each bad section refused with the reason. */
static void test_cluster(void)
{
	static const struct bad_ini bad[] = {
		{"[cluster]\ncluster = a\n", "[cluster]: etcd = http://host:port[,...] is required"},
		{"[cluster]\netcd = http://e:1\nttl = 0\n", "[cluster] ttl = \"0\": expected seconds"},
		{"[cluster]\netcd = http://e:1\nttl = 3601\n", "[cluster] ttl"},
		{"[cluster]\netcd = http://e:1\nttl = 5s\n", "[cluster] ttl = \"5s\""},
		/* strtoul() took a sign: one parser (sg_parse_u64()) refuses it everywhere */
		{"[cluster]\netcd = http://e:1\nttl = +5\n", "[cluster] ttl = \"+5\""},
		{"[cluster]\netcd = http://e:1\nlease = 5\n", "[cluster]: unknown key lease"},
		{"[cluster]\netcd = http://e:1\naddr = 1234567890.1234567\n",
		 "[cluster] addr: empty or longer than 15"},
	};
	struct conf c;

	refuse_all(bad, sizeof(bad) / sizeof(bad[0]));
	conf_defaults(&c);
	SG_CHECK(c.s.cluster.etcd[0] == '\0', "no [cluster] by default");
	SG_CHECK_EQ(conf_load(&c, "[cluster]\netcd = http://a:2379,http://b:2379\nttl = 7\n"
			 "addr = 10.0.0.9\nuser = sigma\npassword_file = /etc/pw\n"), 0);
	SG_CHECK(!strcmp(c.s.cluster.etcd, "http://a:2379,http://b:2379") &&
		 !strcmp(c.s.cluster.cluster, "default") && c.s.cluster.ttl == 7 &&
		 !strcmp(c.s.cluster.addr, "10.0.0.9") && !strcmp(c.s.cluster.user, "sigma") &&
		 !strcmp(c.s.cluster.password_file, "/etc/pw"), "[cluster] parsed: %s %s %u",
		 c.s.cluster.etcd, c.s.cluster.cluster, c.s.cluster.ttl);
}

static int write_secret(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/sg_dp_config_secret_XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* SIGHUP's comparison of two parsed [control] sections, as its report line. */
static int control_diff(const struct sg_dp_agent_sections *a,
			const struct sg_dp_agent_sections *b, char *out,
			size_t len)
{
	FILE *f = fmemopen(out, len, "w");
	int n;

	out[0] = '\0';
	if (f == NULL)
		return -1;
	n = sg_dp_agent_sections_diff(a, b, f);
	fclose(f);
	return n;
}

/*
 * [control] is parsed with the config (once per load) and kept in sigmad's
 * sections (struct sg_dp_agent_sections): by value,
 * so a copy stays whole when the original is reused; a later [control] replaces
 * an earlier one; garbage is refused with the key named; SIGHUP's comparison
 * names exactly the server keys that differ.
 */
static void test_control(void)
{
	static const struct bad_ini bad[] = {
		{"[control]\nunix = relative.sock\n", "unix"},
		{"[control]\nlisten = 127.0.0.1:0\n", "secret_file"},
		{"[control]\nlisten = 127.0.0.1\n", "listen"},
		{"[control]\nlisten = 300.0.0.1:7\n", "listen"},
		{"[control]\nmetrics = here\n", "metrics"},
		{"[control]\nmax_conns = -1\n", "max_conns"},
		{"[control]\nmax_conns = 0\n", "max_conns"},
		{"[control]\nheartbeat_ms = soon\n", "heartbeat_ms"},
		{"[control]\nheartbeat_ms = +250\n", "heartbeat_ms"},
		{"[control]\ngbps = +25\n", "gbps"},
		{"[control]\ngbps = 0x1p3\n", "gbps"},
		{"[control]\nbogus = 1\n", "bogus"},
		{"[control]\nsecret_file = /nonexistent/secret\n", "/nonexistent/secret"},
	};
	char s1[64], s2[64], text[512], out[1024];
	struct conf *c = calloc(3, sizeof(*c)), *d, *e;
	struct sg_ctl_server_config sc;

	if (c == NULL || write_secret(s1, sizeof(s1), "0123456789abcdef-one\n") < 0 ||
	    write_secret(s2, sizeof(s2), "0123456789abcdef-two\n") < 0) {
		SG_CHECK(0, "set-up");
		free(c);
		return;
	}
	d = c + 1;
	e = c + 2;
	refuse_all(bad, sizeof(bad) / sizeof(bad[0]));

	conf_defaults(c);
	SG_CHECK(!c->s.control, "no [control] by default");
	snprintf(text, sizeof(text), "[control]\nunix = /tmp/sg_x.sock\nlisten = 127.0.0.2:7070\n"
		 "secret_file = %s\nmetrics = 127.0.0.3:9100\nmax_conns = 8\nname = n1\n"
		 "heartbeat_ms = 250\n", s1);
	SG_CHECK_EQ(conf_load(c, text), 0);
	SG_CHECK(c->s.control, "control");
	d->s = c->s;
	/* reuse the original for another [control]: the copy must not follow it */
	snprintf(text, sizeof(text), "[control]\nunix = /tmp/sg_y.sock\nlisten = 127.0.0.2:7070\n"
		 "secret_file = %s\nmetrics = off\nname = n2\nmax_frame = 4096\n", s2);
	SG_CHECK_EQ(conf_load(c, text), 0);
	sg_dp_agent_sections_server(&d->s, &sc);
	SG_CHECK(sc.unix_path == d->s.ctl.store.unix_path && !strcmp(sc.unix_path, "/tmp/sg_x.sock"),
		 "unix %s", sc.unix_path ? sc.unix_path : "(null)");
	SG_CHECK(!sc.tcp_disable && sc.tcp_addr && !strcmp(sc.tcp_addr, "127.0.0.2"), "listen");
	SG_CHECK_EQ(sc.tcp_port, 7070);
	SG_CHECK(sc.metrics_enable && sc.metrics_addr && !strcmp(sc.metrics_addr, "127.0.0.3"),
		 "metrics");
	SG_CHECK_EQ(sc.metrics_port, 9100);
	SG_CHECK_EQ(sc.max_conns, 8);
	SG_CHECK(sc.secret_len == 20 && !memcmp(sc.secret, "0123456789abcdef-one", 20),
		 "secret of %zu bytes", sc.secret_len);
	SG_CHECK(sc.ops == NULL, "ops");
	SG_CHECK(!strcmp(d->s.ctl.ac.name, "n1") && d->s.ctl.ac.heartbeat_ms == 250, "agent keys");
	/* the second [control] replaced the first whole: max_conns is back to unset */
	sg_dp_agent_sections_server(&c->s, &sc);
	SG_CHECK(!strcmp(sc.unix_path, "/tmp/sg_y.sock") && !sc.metrics_enable, "replaced");
	SG_CHECK_EQ(sc.max_conns, 0);
	SG_CHECK_EQ(sc.max_frame, 4096);
	SG_CHECK(!strcmp(c->s.ctl.ac.name, "n2") && c->s.ctl.ac.heartbeat_ms == 0, "agent replaced");

	/* SIGHUP's comparison: the same config differs in nothing */
	e->s = d->s;
	SG_CHECK_EQ(control_diff(&d->s, &e->s, out, sizeof(out)), 0);
	SG_CHECK(out[0] == '\0', "printed \"%s\" for no change", out);
	/* the agent's own keys are not the server's */
	snprintf(e->s.ctl.ac.name, sizeof(e->s.ctl.ac.name), "renamed");
	SG_CHECK_EQ(control_diff(&d->s, &e->s, out, sizeof(out)), 0);
	/* four server keys differ from d: unix, secret, metrics, max_frame (max_conns too) */
	SG_CHECK_EQ(control_diff(&d->s, &c->s, out, sizeof(out)), 5);
	SG_CHECK(strstr(out, "needs a restart") != NULL, "%s", out);
	SG_CHECK(strstr(out, "unix (/tmp/sg_x.sock -> /tmp/sg_y.sock)") != NULL, "%s", out);
	SG_CHECK(strstr(out, "secret_file (another secret)") != NULL, "%s", out);
	SG_CHECK(strstr(out, "metrics (127.0.0.3:9100 -> off)") != NULL, "%s", out);
	SG_CHECK(strstr(out, "max_conns (8 -> 0)") != NULL, "%s", out);
	SG_CHECK(strstr(out, "max_frame (0 -> 4096)") != NULL, "%s", out);
	SG_CHECK(strstr(out, "listen (") == NULL, "listen named: %s", out);
	/* the same secret from another file is no change; listen is */
	snprintf(text, sizeof(text), "[control]\nunix = /tmp/sg_x.sock\nlisten = 127.0.0.2:7071\n"
		 "secret_file = %s\nmetrics = 127.0.0.3:9100\nmax_conns = 8\n", s1);
	conf_defaults(e);
	SG_CHECK_EQ(conf_load(e, text), 0);
	SG_CHECK_EQ(control_diff(&d->s, &e->s, out, sizeof(out)), 1);
	SG_CHECK(strstr(out, "listen (127.0.0.2:7070 -> 127.0.0.2:7071)") != NULL, "%s", out);
	unlink(s1);
	unlink(s2);
	free(c);
}

int main(void)
{
	test_control();
	test_cluster();
	return sg_test_finish("agent_config");
}
