/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's control agent against the real pipeline: the generator (4 workers,
 * lossy ring port) sums job 1 while an operator thread makes RPC round trips
 * over the Unix socket and authenticated TCP, and hostile clients send
 * garbage, oversized frames, calls without auth, a wrong HMAC and a
 * slow-loris partial frame. Every RESULT is checked by the generator, and the
 * engine's completed rounds must keep growing during the abuse. Heartbeats go
 * to a second in-process server on a Unix socket. Also: the [control] and
 * [transport] config sections fed garbage.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <jansson.h>

#include <rte_cycles.h>
#include <rte_eal.h>

#include "sg_ctl_server.h"
#include "sg_dp_agent.h"
#include "sg_dp_testdrv.h"
#include "sg_test.h"
#include "agent_test_util.h"

static char err[512];
static char dir[32], ctl_path[96], coord_path[96];
static const uint8_t secret[] = "agent-test-secret-0123456789";

struct run {
	struct sg_dp_agent *agent;
	struct sg_ctl_server *coord;
	pthread_t op;
	bool op_started;
	volatile bool op_done;
	uint64_t rounds_before, rounds_after, drained_a, drained_b, active_after;
	uint64_t committed_at[4]; /* key moves: engine rounds when each move committed */
};

static uint64_t rounds_now(struct sg_dp_pipeline *p)
{
	struct sg_dp_stats st;

	sg_dp_pipeline_engine_stats(p, &st);
	return st.rounds_completed;
}

static uint64_t slots_active(struct sg_dp_pipeline *p)
{
	struct sg_dp_stats st;

	sg_dp_pipeline_engine_stats(p, &st);
	return st.slots_active;
}

/* Call @p method and check that the answer contains @p needle (or fails, needle NULL). */
static char *call(struct sg_ctl_client *c, const char *method, const char *params,
		  const char *needle)
{
	char *res = NULL, *emsg = NULL;
	int rc = sg_ctl_client_call(c, method, params, &res, &emsg);

	if (needle == NULL) {
		SG_CHECK(rc == -EREMOTEIO, "%s %s: expected a refusal, got %d %s", method,
			 params ? params : "", rc, res ? res : "");
		free(res);
		return emsg;
	}
	SG_CHECK(rc == 0 && res && strstr(res, needle), "%s %s: wanted \"%s\" in %s (%s)", method,
		 params ? params : "", needle, res ? res : "nothing", emsg ? emsg : "");
	free(emsg);
	return res;
}

static void expect(struct sg_ctl_client *c, const char *m, const char *p, const char *needle)
{
	free(call(c, m, p, needle));
}

static void refused(struct sg_ctl_client *c, const char *m, const char *p, const char *why)
{
	char *e = call(c, m, p, NULL);

	SG_CHECK(e && strstr(e, why), "%s: reason \"%s\" wanted, got %s", m, why, e ? e : "none");
	free(e);
}

/* A raw TCP or Unix stream to the agent's server. */
static int raw_connect(uint16_t tcp_port)
{
	int fd;

	if (tcp_port) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(tcp_port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
	} else {
		struct sockaddr_un su = {.sun_family = AF_UNIX};

		snprintf(su.sun_path, sizeof(su.sun_path), "%s", ctl_path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&su, sizeof(su)) == 0)
			return fd;
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Read until the server closes the stream (true) or @p ms pass (false). */
static bool closed_within(int fd, int ms)
{
	uint64_t end = rte_rdtsc() + rte_get_tsc_hz() * (uint64_t)ms / 1000;
	char buf[4096];

	while (rte_rdtsc() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&pf, 1, 50) <= 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			return true;
	}
	return false;
}

static void hostile_clients(struct sg_ctl_server *srv)
{
	uint16_t tcp = sg_ctl_server_tcp_port(srv);
	struct sg_ctl_server_stats st;
	char big[8192];
	int fd;

	/* a method before auth on TCP: error, then closed */
	fd = raw_connect(tcp);
	SG_CHECK(fd >= 0, "tcp connect");
	if (fd >= 0) {
		const char *q = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_list\"}\n";

		SG_CHECK(write(fd, q, strlen(q)) == (ssize_t)strlen(q), "write");
		SG_CHECK(closed_within(fd, 3000), "unauthenticated client not closed");
		close(fd);
	}
	/* a wrong secret */
	{
		struct sg_ctl_client *bad;
		char target[64];

		snprintf(target, sizeof(target), "127.0.0.1:%u", tcp);
		bad = sg_ctl_client_connect(target, (const uint8_t *)"wrong-secret-wrong-secret", 25,
					    2000);
		SG_CHECK(bad == NULL && errno == EACCES, "wrong secret accepted (errno %d)", errno);
		sg_ctl_client_close(bad);
	}
	/* garbage on the Unix socket: answered, connection kept; then an oversized frame */
	fd = raw_connect(0);
	SG_CHECK(fd >= 0, "unix connect");
	if (fd >= 0) {
		const char *g = "{this is not json\n\x01\x02\xff}\n[1,2]\n";

		SG_CHECK(write(fd, g, strlen(g)) == (ssize_t)strlen(g), "write");
		memset(big, 'x', sizeof(big));
		SG_CHECK(write(fd, big, sizeof(big)) == (ssize_t)sizeof(big), "write");
		SG_CHECK(closed_within(fd, 3000), "oversized frame not closed");
		close(fd);
	}
	/* slow-loris: half a request, then silence */
	fd = raw_connect(0);
	if (fd >= 0) {
		SG_CHECK(write(fd, "{\"jsonrpc\":", 11) == 11, "write");
		SG_CHECK(closed_within(fd, 3000), "slow-loris client not closed");
		close(fd);
	}
	sg_ctl_server_get_stats(srv, &st);
	SG_CHECK(st.malformed >= 2 && st.oversized >= 1 && st.unauthenticated >= 1 &&
		 st.auth_failed >= 1 && st.timeouts >= 1,
		 "counters: malformed %lu oversized %lu unauth %lu auth_failed %lu timeouts %lu",
		 (unsigned long)st.malformed, (unsigned long)st.oversized,
		 (unsigned long)st.unauthenticated, (unsigned long)st.auth_failed,
		 (unsigned long)st.timeouts);
}

struct op_arg {
	struct run *r;
	struct sg_dp_pipeline *p;
};

/*
 * The coordinator unreachable for a while, then back: heartbeats fail and
 * recover, and the log has one line for the run of failures and one for the
 * recovery, not one per beat. @p ac points at the real coordinator.
 */
static void hb_outage(struct run *r, struct sg_dp_agent_conf *ac)
{
	struct sg_dp_agent_conf down = *ac;
	uint64_t sent0, failed0, sent = 0, failed = 0;
	char *log = NULL, *at;
	size_t loglen = 0;
	FILE *f = open_memstream(&log, &loglen);
	unsigned int n_failed = 0, n_recovered = 0;

	SG_CHECK(f != NULL, "memstream");
	if (f == NULL)
		return;
	sg_dp_agent_heartbeats(r->agent, &sent0, &failed0);
	rte_openlog_stream(f);
	snprintf(down.coordinator, sizeof(down.coordinator), "unix:%s/nobody.sock", dir);
	sg_dp_agent_reload(r->agent, &down, NULL);
	for (int i = 0; i < 200 && failed < failed0 + 4; i++) {
		rte_delay_us_sleep(10000);
		sg_dp_agent_heartbeats(r->agent, &sent, &failed);
	}
	sg_dp_agent_reload(r->agent, ac, NULL);
	for (int i = 0; i < 200 && sent < sent0 + 2; i++) {
		rte_delay_us_sleep(10000);
		sg_dp_agent_heartbeats(r->agent, &sent, &failed);
	}
	rte_openlog_stream(NULL);
	fclose(f);
	for (char *line = strtok_r(log, "\n", &at); line; line = strtok_r(NULL, "\n", &at)) {
		n_failed += strstr(line, "nobody.sock failed") != NULL;
		n_recovered += strstr(line, "heartbeat to") && strstr(line, "recovered after");
	}
	SG_CHECK(failed >= failed0 + 4 && sent >= sent0 + 2, "%lu failed, %lu sent",
		 (unsigned long)(failed - failed0), (unsigned long)(sent - sent0));
	SG_CHECK(n_failed == 1 && n_recovered == 1, "%u failure lines, %u recoveries for %lu "
		 "failed beats", n_failed, n_recovered, (unsigned long)(failed - failed0));
	free(log);
}

static void *operator_main(void *arg)
{
	struct op_arg *oa = arg;
	struct run *r = oa->r;
	struct sg_dp_pipeline *p = oa->p;
	struct sg_ctl_client *u = sg_ctl_client_connect(ctl_path, NULL, 0, 5000), *t = NULL;
	char target[64], keymap[512];
	uint64_t sent = 0, failed = 0;
	int len;

	r->rounds_before = rounds_now(p);
	snprintf(target, sizeof(target), "127.0.0.1:%u",
		 sg_ctl_server_tcp_port(sg_dp_agent_server(r->agent)));
	t = sg_ctl_client_connect(target, secret, sizeof(secret) - 1, 5000);
	SG_CHECK(u != NULL && t != NULL, "clients: %s", strerror(errno));
	if (u == NULL || t == NULL)
		goto out;
	expect(u, "node_info", NULL, "\"reducer_lcores\":[2]");
	expect(t, "node_info", NULL, "\"name\":\"agent-node\"");
	expect(u, "job_list", NULL, "\"id\":1,");
	expect(u, "layout_get", NULL, "\"reducers\":1");
	expect(u, "lcores_get", NULL, "\"role\":\"reducer\"");
	expect(u, "stats_get", NULL, "\"jobs\"");
	/* a job through the channels of the reducer lcore, then gone again */
	expect(t, "job_create", "{\"workers\":2,\"tensors\":[{\"name\":\"w\",\"elems\":3000000}]}",
	       "\"id\":2");
	expect(u, "job_list", NULL, "\"id\":2,");
	expect(u, "job_destroy", "{\"id\":2}", "true");
	refused(u, "job_destroy", "{\"id\":2}", "");
	refused(u, "job_create", "{\"workers\":100,\"tensors\":[{\"elems\":10}]}", "");
	/* idle policy: live, per lcore; the lcore itself applies it */
	expect(u, "layout_set", "{\"idle\":[{\"lcore\":2,\"policy\":\"sleep\"}]}", "true");
	expect(u, "layout_get", NULL, "\"idle\":\"sleep\"");
	expect(u, "layout_set", "{\"idle\":[{\"lcore\":2,\"policy\":\"poll\"}]}", "true");
	refused(u, "layout_set", "{\"idle\":[{\"lcore\":7,\"policy\":\"poll\"}]}", "not in");
	len = snprintf(keymap, sizeof(keymap), "{\"keymap\":[1");
	for (int i = 1; i < SG_BUCKETS; i++)
		len += snprintf(keymap + len, sizeof(keymap) - (size_t)len, ",0");
	snprintf(keymap + len, sizeof(keymap) - (size_t)len, "]}");
	refused(u, "layout_set", keymap, "no reducer 1");
	refused(u, "layout_set", "{\"reduce\":[3]}", "restart");
	expect(u, "log_level_set", "{\"level\":\"info\"}", "info");
	hostile_clients(sg_dp_agent_server(r->agent));
	/* the dataplane kept summing while all of that happened */
	rte_delay_us_sleep(100000);
	r->rounds_after = rounds_now(p);
	expect(u, "drain", NULL, "\"draining\":true");
	refused(t, "job_create", "{\"workers\":2,\"tensors\":[{\"elems\":10}]}", "draining");
	expect(u, "node_info", NULL, "\"draining\":true");
	/* in-flight rounds finish, then nothing completes: every later round is refused */
	rte_delay_us_sleep(300000);
	r->drained_a = rounds_now(p);
	r->active_after = slots_active(p);
	rte_delay_us_sleep(300000);
	r->drained_b = rounds_now(p);
	/* heartbeats reached the coordinator */
	for (int i = 0; i < 100 && sent < 2; i++) {
		rte_delay_us_sleep(20000);
		sg_dp_agent_heartbeats(r->agent, &sent, &failed);
	}
	SG_CHECK(sent >= 2 && failed == 0, "heartbeats: %lu sent, %lu failed", (unsigned long)sent,
		 (unsigned long)failed);
	{
		struct sg_ctl_client *cc = sg_ctl_client_connect(coord_path, NULL, 0, 5000);

		SG_CHECK(cc != NULL, "coordinator client");
		if (cc != NULL)
			expect(cc, "nodes_list", NULL, "\"name\":\"agent-node\",\"kind\":\"gpu\"");
		sg_ctl_client_close(cc);
	}
	/* SIGHUP's part: a new name and kind reach the coordinator with the next heartbeats;
	 * removing the coordinator needs a restart and leaves it */
	{
		struct sg_dp_agent_conf ac = {.kind = SG_NODE_CPU, .gbps = 25,
					      .heartbeat_ms = 20, .name = "agent-node2"};
		struct sg_ctl_client *cc = sg_ctl_client_connect(coord_path, NULL, 0, 5000);
		char *res = NULL;
		bool seen = false;

		snprintf(ac.coordinator, sizeof(ac.coordinator), "unix:%s", coord_path);
		SG_CHECK_EQ(sg_dp_agent_reload(r->agent, &ac, stdout), 0);
		for (int i = 0; i < 100 && cc != NULL && !seen; i++) {
			rte_delay_us_sleep(20000);
			if (sg_ctl_client_call(cc, "nodes_list", NULL, &res, NULL) == 0)
				seen = strstr(res, "\"name\":\"agent-node2\",\"kind\":\"cpu\"") != NULL;
			free(res);
			res = NULL;
		}
		SG_CHECK(seen, "the renamed node never heartbeated");
		expect(t, "node_info", NULL, "\"name\":\"agent-node2\"");
		hb_outage(r, &ac);
		ac.coordinator[0] = '\0';
		SG_CHECK_EQ(sg_dp_agent_reload(r->agent, &ac, stdout), 1);
		sg_ctl_client_close(cc);
	}
out:
	sg_ctl_client_close(u);
	sg_ctl_client_close(t);
	r->op_done = true;
	return NULL;
}

static struct op_arg oa;

/* Start the agent on @p p and the thread that talks to it. */
static int start_agent(struct sg_dp_pipeline *p, struct run *r,
		       const struct sg_ctl_server_config *sc, const struct sg_dp_agent_conf *ac,
		       void *(*fn)(void *))
{
	r->agent = sg_dp_agent_start(p, sc, ac, NULL, err, sizeof(err));
	SG_CHECK(r->agent != NULL, "agent: %s", err);
	if (r->agent == NULL)
		return -EINVAL;
	oa = (struct op_arg){.r = r, .p = p};
	r->op_started = pthread_create(&r->op, NULL, fn, &oa) == 0;
	return 0;
}

static int hook_start(struct sg_dp_pipeline *p, void *arg)
{
	struct run *r = arg;
	struct sg_ctl_server_config sc = {0}, cc = {0};
	struct sg_ctl_agent_ops none = {0};
	static struct sg_ctl_agent_ops coord_ops;
	struct sg_dp_agent_conf ac = {.kind = SG_NODE_GPU, .gbps = 25, .heartbeat_ms = 30};

	coord_ops = none;
	cc.tcp_disable = true;
	cc.unix_path = coord_path;
	cc.ops = &coord_ops;
	r->coord = sg_ctl_server_create(&cc);
	SG_CHECK(r->coord != NULL, "coordinator: %s", strerror(errno));
	snprintf(ac.name, sizeof(ac.name), "agent-node");
	snprintf(ac.coordinator, sizeof(ac.coordinator), "unix:%s", coord_path);
	sc.tcp_addr = "127.0.0.1";
	sc.secret = secret;
	sc.secret_len = sizeof(secret) - 1;
	sc.unix_path = ctl_path;
	sc.max_frame = 4096;
	sc.frame_timeout_ms = 300;
	sc.auth_timeout_ms = 1000;
	return start_agent(p, r, &sc, &ac, operator_main);
}

static void hook_stop(struct sg_dp_pipeline *p, void *arg)
{
	struct run *r = arg;

	(void)p;
	if (r->op_started)
		pthread_join(r->op, NULL);
	sg_dp_agent_stop(r->agent);
	sg_ctl_server_destroy(r->coord);
}

/* Job 1 of 4 workers and @p keys 40000-byte keys; RX lcore 1 (@p rx_role), reducer lcore 2. */
static void two_lcore_config(struct sg_dp_config *c, uint32_t keys, enum sg_role rx_role)
{
	sg_dp_config_defaults(c);
	c->mbufs = 4096;
	c->pool_bufs = 1024;
	c->n_jobs = 1;
	c->jobs[0].workers = 4;
	c->jobs[0].keys = keys;
	c->jobs[0].partition_bytes = 40000;
	c->idle = SG_IDLE_SLEEP;
	c->n_lcores = 0;
	SG_CHECK_EQ(sg_dp_layout_parse(c, rx_role, "(0,0,1)", err, sizeof(err)), 0);
	SG_CHECK_EQ(sg_dp_layout_parse(c, SG_ROLE_REDUCE, "2", err, sizeof(err)), 0);
}

static void test_agent_under_load(void)
{
	struct sg_dp_config c;
	struct run r = {0};
	struct sg_dp_loop_conf lc = {.rounds = 1u << 30, .window = 16, .loss = 0.01, .seed = 7,
				     .retrans_us = 5000, .timeout_s = 5, .gen_sleep_us = 50,
				     .on_start = hook_start, .on_stop = hook_stop,
				     .hook_arg = &r};
	struct sg_dp_loop_result res;
	int rc;

	two_lcore_config(&c, 8, SG_ROLE_IO);
	rc = sg_dp_loopback_run(&c, &lc, &res, stdout, err, sizeof(err));
	SG_CHECK(rc == 0, "loopback: %s", err);
	SG_CHECK(r.op_done, "the operator thread finished before the generator");
	printf("agent under load: %lu chunk rounds, %lu results ok, %lu bad; engine rounds %lu -> "
	       "%lu during the RPCs and abuse\n", (unsigned long)res.gen.rounds_done,
	       (unsigned long)res.gen.results_ok, (unsigned long)res.gen.results_bad,
	       (unsigned long)r.rounds_before, (unsigned long)r.rounds_after);
	SG_CHECK_EQ(res.gen.results_bad, 0);
	SG_CHECK(res.gen.results_ok > 0 && res.gen.rounds_done > 0, "nothing summed");
	SG_CHECK(r.rounds_after > r.rounds_before, "no round completed during the control traffic");
	printf("drain: rounds %lu then %lu, %lu slots collecting, %lu pushes refused\n",
	       (unsigned long)r.drained_a, (unsigned long)r.drained_b,
	       (unsigned long)r.active_after, (unsigned long)res.lcores[1].drops[SG_DP_ND_DRAINING]);
	SG_CHECK(r.drained_a == r.drained_b && r.drained_a > r.rounds_after,
		 "rounds after drain: %lu then %lu", (unsigned long)r.drained_a,
		 (unsigned long)r.drained_b);
	SG_CHECK_EQ(r.active_after, 0);
	SG_CHECK(res.n_lcores == 2 && res.lcores[1].drops[SG_DP_ND_DRAINING] > 0,
		 "no push refused after drain");
}

/* ---- a drain of an open job ------------------------------------------------ */

/* Drain once the open job's keys are made and summing; then no round may complete. */
static void *drain_main(void *arg)
{
	struct op_arg *o = arg;
	struct run *r = o->r;
	struct sg_ctl_client *u = sg_ctl_client_connect(ctl_path, NULL, 0, 5000);

	SG_CHECK(u != NULL, "client");
	while (u != NULL && rounds_now(o->p) < 500)
		rte_delay_us_sleep(1000);
	r->rounds_after = rounds_now(o->p);
	if (u != NULL)
		expect(u, "drain", NULL, "\"draining\":true");
	rte_delay_us_sleep(300000);
	r->drained_a = rounds_now(o->p);
	r->active_after = slots_active(o->p);
	rte_delay_us_sleep(300000);
	r->drained_b = rounds_now(o->p);
	sg_ctl_client_close(u);
	r->op_done = true;
	return NULL;
}

static int drain_start(struct sg_dp_pipeline *p, void *arg)
{
	struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
	struct sg_dp_agent_conf ac = {.name = "drainer"};

	return start_agent(p, arg, &sc, &ac, drain_main);
}

/*
 * A drain stops an open job's rounds as it stops a fixed job's: the reducer tracks
 * the chunks of the keys its engine made, so each gets its stop round.
 */
static void test_agent_drain_open(void)
{
	struct sg_dp_config c;
	struct run r = {0};
	struct sg_dp_loop_conf lc = {.rounds = 1u << 30, .window = 16, .loss = 0.01, .seed = 5,
				     .retrans_us = 5000, .timeout_s = 2, .gen_sleep_us = 50,
				     .on_start = drain_start, .on_stop = hook_stop,
				     .hook_arg = &r};
	struct sg_dp_loop_result res;

	two_lcore_config(&c, 8, SG_ROLE_IO);
	c.jobs[0].open_slots = 64;
	SG_CHECK_EQ(sg_dp_loopback_run(&c, &lc, &res, stdout, err, sizeof(err)), 0);
	printf("drain of an open job: rounds %lu at the drain, then %lu and %lu, %lu slots "
	       "collecting, %lu pushes refused, %lu keys made\n", (unsigned long)r.rounds_after,
	       (unsigned long)r.drained_a, (unsigned long)r.drained_b,
	       (unsigned long)r.active_after,
	       (unsigned long)(res.n_lcores == 2 ? res.lcores[1].drops[SG_DP_ND_DRAINING] : 0),
	       (unsigned long)res.eng.keys_created);
	SG_CHECK(r.op_done, "the drainer finished");
	SG_CHECK_EQ(res.gen.results_bad, 0);
	/* the generator's window of 16 chunks covers the first 4 of the 8 keys */
	SG_CHECK(res.eng.keys_created >= 4 && res.eng.keys_created <= 8, "%lu keys made",
		 (unsigned long)res.eng.keys_created);
	SG_CHECK(r.drained_a == r.drained_b && r.drained_a >= r.rounds_after,
		 "rounds after the drain: %lu then %lu", (unsigned long)r.drained_a,
		 (unsigned long)r.drained_b);
	SG_CHECK_EQ(r.active_after, 0);
	SG_CHECK(res.n_lcores == 2 && res.lcores[1].drops[SG_DP_ND_DRAINING] > 0,
		 "no push refused after the drain");
}

/* ---- a live key->reducer move under load --------------------------------- */

#define MV_ROUNDS 1500
#define MV_MOVES 4
#define MV_KEYS 16
#define MV_CHUNKS 5 /* 40000-byte partitions in 8920-byte chunks; all in flight at once */

/* Wait until layout_get shows @p km (the move committed). @return true if it did. */
static bool wait_keymap(struct sg_ctl_client *c, const uint16_t *km, double secs)
{
	uint64_t end = rte_rdtsc() + (uint64_t)(secs * (double)rte_get_tsc_hz());

	while (rte_rdtsc() < end) {
		if (keymap_is(c, km))
			return true;
		rte_delay_us_sleep(5000);
	}
	return false;
}

static void *mover_main(void *arg)
{
	struct op_arg *o = arg;
	struct run *r = o->r;
	struct sg_ctl_client *u = sg_ctl_client_connect(ctl_path, NULL, 0, 5000);
	uint16_t all1[SG_BUCKETS], odd0[SG_BUCKETS];
	uint16_t all0[SG_BUCKETS] = {0};
	char params[512];

	SG_CHECK(u != NULL, "client");
	if (u == NULL)
		goto out;
	for (int b = 0; b < SG_BUCKETS; b++) {
		all1[b] = 1;
		odd0[b] = b % 2 ? 0 : 1;
	}
	/* the default map: even buckets on reducer 0, odd ones on reducer 1 */
	for (int b = 0; b < SG_BUCKETS; b++)
		all0[b] = (uint16_t)(b % 2);
	SG_CHECK(wait_keymap(u, all0, 1), "default keymap");
	while (rounds_now(o->p) < 2000)
		rte_delay_us_sleep(1000);
	/* 1: the even buckets move from reducer 0 to reducer 1;
	 * 2: the odd buckets move from reducer 1 to reducer 0;
	 * 3: every bucket goes back to the reducer that held it first, which released
	 *    its old rounds of them;
	 * 4: and away again, to the reducer that held it in 1 and 2 */
	{
		const uint16_t *steps[MV_MOVES] = {all1, odd0, all0, odd0};

		for (int i = 0; i < MV_MOVES; i++) {
			keymap_json(params, sizeof(params), steps[i]);
			expect(u, "layout_set", params, "true");
			SG_CHECK(wait_keymap(u, steps[i], 10), "move %d did not commit", i + 1);
			r->committed_at[i] = rounds_now(o->p);
		}
	}
out:
	sg_ctl_client_close(u);
	r->op_done = true;
	return NULL;
}

static int mv_start(struct sg_dp_pipeline *p, void *arg)
{
	struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
	struct sg_dp_agent_conf ac = {.name = "mover"};

	return start_agent(p, arg, &sc, &ac, mover_main);
}

/*
 * @p open: the job is an open one, whose keys the pushes make on the reducer the keymap
 * sends them to: the reducer that leaves a bucket tracks the chunks its engine made,
 * and those it meets during the move, as it tracks a fixed job's listed chunks.
 */
static void test_agent_keymove(bool open)
{
	struct sg_dp_config c;
	struct run r = {0};
	/* 20 ms retransmit timer: on 2 shared cores a descheduled lcore otherwise makes every
	 * chunk in flight resend, and the retransmit bound below stops telling a kept-rounds
	 * reducer (about 4 resends per chunk round) from a busy machine */
	struct sg_dp_loop_conf lc = {.rounds = MV_ROUNDS, .window = MV_KEYS * MV_CHUNKS, .loss = 0.01, .seed = 11,
				     .retrans_us = 20000, .timeout_s = 60, .gen_sleep_us = 50,
				     .on_start = mv_start, .on_stop = hook_stop, .hook_arg = &r};
	struct sg_dp_loop_result res;
	uint64_t total = (uint64_t)MV_KEYS * MV_CHUNKS * MV_ROUNDS;
	int rc;

	two_lcore_config(&c, MV_KEYS, SG_ROLE_RTC);
	c.jobs[0].open_slots = open ? 1024 : 0;
	rc = sg_dp_loopback_run(&c, &lc, &res, stdout, err, sizeof(err));
	SG_CHECK(rc == 0, "loopback: %s", err);
	printf("key move under load%s: %lu of %lu chunk rounds, %lu results ok, %lu bad, %lu "
	       "retransmits; moves committed at engine round %lu, %lu, %lu (back) and %lu\n",
	       open ? " (open job)" : "", (unsigned long)res.gen.rounds_done, (unsigned long)res.gen.rounds_total,
	       (unsigned long)res.gen.results_ok, (unsigned long)res.gen.results_bad,
	       (unsigned long)res.gen.retransmits, (unsigned long)r.committed_at[0],
	       (unsigned long)r.committed_at[1], (unsigned long)r.committed_at[2],
	       (unsigned long)r.committed_at[3]);
	SG_CHECK(r.op_done, "the mover finished");
	/* no push lost: every round of every chunk completed, every result element right */
	SG_CHECK_EQ(res.rc, 0);
	SG_CHECK_EQ(res.gen.rounds_total, total);
	SG_CHECK_EQ(res.gen.rounds_done, total);
	SG_CHECK_EQ(res.gen.results_bad, 0);
	SG_CHECK_EQ(res.gen.results_ok, total * 4);
	/* 1% loss each way costs about one retransmit per 5 chunk rounds; a reducer that kept
	 * the old rounds of a bucket coming back refuses its new ones until retransmits push
	 * it along (about 4 per chunk round, measured before the keys were released) */
	SG_CHECK(res.gen.retransmits < total, "%lu retransmits for %lu chunk rounds",
		 (unsigned long)res.gen.retransmits, (unsigned long)total);
	SG_CHECK(res.eng.drops[SG_DP_DROP_ROUND_NEW] * 100 < total, "%lu pushes refused as too "
		 "new: a reducer kept old rounds", (unsigned long)res.eng.drops[SG_DP_DROP_ROUND_NEW]);
	/* the moves happened while the workers were pushing */
	SG_CHECK(r.committed_at[MV_MOVES - 1] > 0 && r.committed_at[MV_MOVES - 1] < total,
		 "last move committed at round %lu of %lu",
		 (unsigned long)r.committed_at[MV_MOVES - 1], (unsigned long)total);
	SG_CHECK(res.n_lcores == 2 && res.lcores[0].bytes_summed > 0 &&
		 res.lcores[1].bytes_summed > 0, "both reducers summed");
	/* a round cut by a move is reported after one slot timeout: none may be */
	SG_CHECK_EQ(res.eng.slot_timeouts, 0);
	if (open)
		SG_CHECK(res.eng.keys_created >= MV_KEYS && res.eng.keys_created <= 2 * MV_KEYS,
			 "%lu keys made on the two reducers for %u keys",
			 (unsigned long)res.eng.keys_created, MV_KEYS);
}

/* ---- per-job counters: two jobs with different traffic, 40 idle ones ---- */

#define TJ_ROUNDS 300
#define TJ_KEYS1 8
#define TJ_KEYS2 3
/* jobs the control plane adds beside the two with traffic: more than the 16
 * that fixed tables once held, so every table must be sized from max_jobs */
#define TJ_IDLE 40

struct tj_run {
	struct run r; /* first: the hooks above take it */
	int nj;
	struct sg_dp_jobs_table jt;
	uint32_t idle_ids[TJ_IDLE];
	unsigned int n_idle;
	struct sg_dp_stats eng;
	json_t *list; /* job_list's answer */
};

static void *idle_main(void *arg)
{
	((struct op_arg *)arg)->r->op_done = true;
	return NULL;
}

static int tj_start(struct sg_dp_pipeline *p, void *arg)
{
	struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
	struct sg_dp_agent_conf ac = {.name = "two-jobs"};
	struct tj_run *t = arg;
	struct sg_ctl_client *u;
	int rc = start_agent(p, arg, &sc, &ac, idle_main);

	if (rc < 0)
		return rc;
	/* before the generator starts: the idle jobs are there all the run */
	u = sg_ctl_client_connect(ctl_path, NULL, 0, 5000);
	SG_CHECK(u != NULL, "client");
	for (unsigned int i = 0; u != NULL && i < TJ_IDLE; i++) {
		char *res = NULL, *msg = NULL;
		json_t *j;

		/* the first one deterministic: a mode the engine has must be creatable */
		if (sg_ctl_client_call(u, "job_create", i == 0 ?
				       "{\"workers\":3,\"partition_bytes\":1024,\"mode\":"
				       "\"deterministic\",\"tensors\":[{\"elems\":1000}]}" :
				       "{\"workers\":3,\"partition_bytes\":1024,"
				       "\"tensors\":[{\"elems\":1000}]}", &res, &msg) != 0) {
			SG_CHECK(false, "job_create %u: %s", i, msg ? msg : "no answer");
			free(msg);
			break;
		}
		j = json_loads(res, 0, NULL);
		t->idle_ids[t->n_idle++] = (uint32_t)json_integer_value(json_object_get(j, "id"));
		json_decref(j);
		free(res);
	}
	sg_ctl_client_close(u);
	return 0;
}

/* The generator is done and the lcores still run: read the counters both ways. */
static void tj_stop(struct sg_dp_pipeline *p, void *arg)
{
	struct tj_run *t = arg;
	struct sg_ctl_client *u = sg_ctl_client_connect(ctl_path, NULL, 0, 5000);
	char *res = NULL;

	t->nj = sg_dp_pipeline_jobs_stats(p, &t->jt);
	sg_dp_pipeline_engine_stats(p, &t->eng);
	SG_CHECK(u != NULL, "client");
	if (u != NULL && sg_ctl_client_call(u, "job_list", NULL, &res, NULL) == 0)
		t->list = json_loads(res, 0, NULL);
	free(res);
	sg_ctl_client_close(u);
	hook_stop(p, arg);
}

static const struct sg_dp_job_stats *tj_job(const struct tj_run *t, uint32_t id)
{
	for (int i = 0; i < t->nj; i++)
		if (t->jt.ids[i] == id)
			return &t->jt.st[i];
	return NULL;
}

static json_t *tj_listed(const struct tj_run *t, uint32_t id)
{
	json_t *j;
	size_t i;

	json_array_foreach(t->list, i, j)
		if (json_integer_value(json_object_get(j, "id")) == id)
			return j;
	return NULL;
}

static void test_agent_job_counters(void)
{
	struct sg_dp_config c;
	struct tj_run t = {0};
	struct sg_dp_loop_conf lc = {.rounds = TJ_ROUNDS, .window = 32, .loss = 0.02, .seed = 5,
				     .retrans_us = 3000, .timeout_s = 60, .gen_sleep_us = 50,
				     .on_start = tj_start, .on_stop = tj_stop, .hook_arg = &t,
				     .two_jobs = true};
	struct sg_dp_loop_result res;
	const uint32_t keys[2] = {TJ_KEYS1, TJ_KEYS2}, nch = MV_CHUNKS;
	uint64_t sum[4] = {0};
	int rc;

	two_lcore_config(&c, TJ_KEYS1, SG_ROLE_RTC); /* two reducers: lcores 1 and 2 */
	c.n_jobs = 2;
	c.jobs[1] = c.jobs[0];
	c.jobs[1].id = 2;
	c.jobs[1].token = c.jobs[0].token ^ 0x5a5a;
	c.jobs[1].keys = TJ_KEYS2;
	c.jobs[1].mode = SG_MODE_DETERM; /* job_list once called it "sync" */
	rc = sg_dp_loopback_run(&c, &lc, &res, NULL, err, sizeof(err));
	SG_CHECK(rc == 0, "loopback: %s", err);
	SG_CHECK_EQ(res.rc, 0);
	SG_CHECK_EQ(res.gen.results_bad, 0);
	SG_CHECK_EQ(res.gen.rounds_done, (uint64_t)(TJ_KEYS1 + TJ_KEYS2) * nch * TJ_ROUNDS);
	SG_CHECK_EQ(t.n_idle, TJ_IDLE);
	SG_CHECK(t.nj == 2 + TJ_IDLE, "%d jobs in the engines' counters", t.nj);
	SG_CHECK_EQ(json_array_size(t.list), 2 + TJ_IDLE);
	/* the idle jobs: listed both ways, and no round counted for them */
	for (unsigned int i = 0; i < t.n_idle; i++) {
		const struct sg_dp_job_stats *js = tj_job(&t, t.idle_ids[i]);
		json_t *l = tj_listed(&t, t.idle_ids[i]);

		SG_CHECK(l != NULL && strcmp(json_string_value(json_object_get(l, "mode")),
					     i == 0 ? "deterministic" : "sync") == 0,
			 "idle job %u listed as %s", t.idle_ids[i],
			 l ? json_string_value(json_object_get(l, "mode")) : "(none)");
		SG_CHECK(js != NULL && l != NULL && js->rounds_completed == 0 &&
				 js->rx_packets == 0 &&
				 json_integer_value(json_object_get(l, "rounds_completed")) == 0,
			 "idle job %u: counters %p, listed %p", t.idle_ids[i], (const void *)js,
			 (void *)l);
	}
	for (uint32_t id = 1; id <= 2; id++) {
		const struct sg_dp_job_stats *js = tj_job(&t, id);
		json_t *l = tj_listed(&t, id);
		uint64_t rounds = (uint64_t)keys[id - 1] * nch * TJ_ROUNDS;
		uint64_t resent = id == 2 ? res.gen.retransmits2 :
				  res.gen.retransmits - res.gen.retransmits2;

		SG_CHECK(js != NULL && l != NULL, "job %u: counters %p, listed %p", id,
			 (const void *)js, (void *)l);
		if (js == NULL || l == NULL)
			continue;
		printf("job %u: %lu rounds, %lu pushes, %lu retransmits served of %lu resent, "
		       "%lu NACKs, %lu drops\n", id, (unsigned long)js->rounds_completed,
		       (unsigned long)js->rx_pushes, (unsigned long)js->retransmits_served,
		       (unsigned long)resent, (unsigned long)js->nacks_sent,
		       (unsigned long)js->drops);
		/* what the generator sent this job: every round once, every push once */
		SG_CHECK_EQ(js->rounds_completed, rounds);
		SG_CHECK_EQ(js->rx_pushes, rounds * 4);
		SG_CHECK(js->retransmits_served + js->drops_by[SG_DP_DROP_DUPLICATE] <= resent,
			 "job %u: %lu served + %lu duplicates > %lu retransmits", id,
			 (unsigned long)js->retransmits_served,
			 (unsigned long)js->drops_by[SG_DP_DROP_DUPLICATE], (unsigned long)resent);
		SG_CHECK_EQ(js->incomplete_slots, 0);
		/* job_list (and so sigmactl jobs and /metrics) says the same */
		SG_CHECK(strcmp(json_string_value(json_object_get(l, "mode")),
				id == 2 ? "deterministic" : "sync") == 0, "job %u listed as %s", id,
			 json_string_value(json_object_get(l, "mode")));
		SG_CHECK_EQ((uint64_t)json_integer_value(json_object_get(l, "rounds_completed")),
			    js->rounds_completed);
		SG_CHECK_EQ((uint64_t)json_integer_value(json_object_get(l, "retransmits")),
			    js->retransmits_served);
		SG_CHECK_EQ((uint64_t)json_integer_value(json_object_get(l, "nacks")),
			    js->nacks_sent);
		SG_CHECK_EQ((uint64_t)json_integer_value(json_object_get(l, "drops")), js->drops);
		sum[0] += js->rounds_completed;
		sum[1] += js->retransmits_served;
		sum[2] += js->nacks_sent;
		sum[3] += js->rx_pushes;
	}
	SG_CHECK(res.gen.retransmits2 > 0 && res.gen.retransmits > res.gen.retransmits2,
		 "loss made both jobs retransmit");
	/* the jobs' shares add up to the engines' totals */
	SG_CHECK_EQ(sum[0], t.eng.rounds_completed);
	SG_CHECK_EQ(sum[1], t.eng.retransmits_served);
	SG_CHECK_EQ(sum[2], t.eng.nacks_sent);
	SG_CHECK_EQ(sum[3], t.eng.rx_pushes);
	json_decref(t.list);
	sg_dp_jobs_table_free(&t.jt);
}

/* [control] and [transport] in sigmad's INI, good and bad. */
static void test_agent_config(void)
{
	static const struct {
		const char *ini, *needle;
	} bad[] = {
		{"[control]\nunix = off\nbogus = 1\n", "bogus"},
		{"[control]\nunix = off\nkind = tpu\n", "cpu or gpu"},
		{"[control]\nunix = off\ngbps = -3\n", "gbps"},
		{"[control]\nunix = off\nheartbeat_ms = 1\n", "heartbeat_ms"},
		{"[control]\nunix = off\ncoordinator = nowhere\n", "coordinator"},
		{"[control]\nunix = off\ncoordinator = 10.0.0.1:7070\n", "secret_file"},
		{"[control]\nlisten = 127.0.0.1:99999\n", "listen"},
		{"[transport]\ntype = carrier-pigeon\n", "dpdk, verbs or socket"},
		{"[transport]\ntype = dpdk\nspeed = 9\n", "only key"},
		{"[controls]\nunix = off\n", "unknown section"},
	};
	struct sg_dp_agent_sections s;
	struct sg_dp_config c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sg_dp_config_defaults(&c);
		sg_dp_agent_sections_init(&s, &c);
		err[0] = '\0';
		SG_CHECK(sg_dp_config_load_string(&c, bad[i].ini, err, sizeof(err)) < 0,
			 "accepted: %s", bad[i].ini);
		SG_CHECK(strstr(err, bad[i].needle) != NULL, "%s: message \"%s\" lacks \"%s\"",
			 bad[i].ini, err, bad[i].needle);
	}
	sg_dp_config_defaults(&c);
	sg_dp_agent_sections_init(&s, &c);
	SG_CHECK(!s.control && c.transport == SG_DP_TRANSPORT_DPDK, "defaults");
	SG_CHECK(sg_dp_config_load_string(&c, "[control]\nunix = /tmp/x.sock\nname = n1\n"
					  "kind = gpu\ngbps = 100\n[transport]\ntype = verbs\n",
					  err, sizeof(err)) == 0, "good config: %s", err);
	SG_CHECK(s.control && c.transport == SG_DP_TRANSPORT_VERBS, "parsed");
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "512",
		       "--lcores=(0-2)@(0-1)", "--log-level=lib.eal:error", prefix, NULL};

	(void)argc;
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_agent_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0)
		SG_TEST_SKIP_ALL("EAL cannot start here (no --no-huge support?)");
	snprintf(dir, sizeof(dir), "/tmp/sg_agent.XXXXXX");
	if (mkdtemp(dir) == NULL)
		SG_TEST_SKIP_ALL("no temporary folder");
	snprintf(ctl_path, sizeof(ctl_path), "%s/ctl.sock", dir);
	snprintf(coord_path, sizeof(coord_path), "%s/coord.sock", dir);
	test_agent_config();
	test_agent_under_load();
	test_agent_keymove(false);
	test_agent_keymove(true);
	test_agent_drain_open();
	test_agent_job_counters();
	unlink(ctl_path);
	unlink(coord_path);
	rmdir(dir);
	sg_dp_eal_cleanup();
	return sg_test_finish("agent");
}
