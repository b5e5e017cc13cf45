/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_etcd against a real etcd started here (skipped when the etcd binary is
 * absent): requests and prefixes, leases that expire, node records and the
 * garbage a store may hold (each counted by reason, the good records still
 * read), a node's registration (made, kept, expired, revoked, and made again
 * when an etcd that was down comes up), a worker's membership watch, no
 * endpoint answering, and a 3-member cluster on loopback ports where killing
 * the member in use keeps requests, registration and the watch working.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sg_etcd.h"
#include "sg_test.h"

static char tmpdir[] = "/tmp/sg_etcd_test.XXXXXX";

static void msleep(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static bool port_free(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* @p n consecutive free loopback ports, from a base that depends on our pid. */
static uint16_t free_ports(unsigned int n)
{
	for (unsigned int tries = 0; tries < 200; tries++) {
		uint16_t base = (uint16_t)(21000 + ((unsigned int)getpid() * 13 + tries * 37) % 30000);
		bool ok = true;

		for (unsigned int i = 0; i < n && ok; i++)
			ok = port_free((uint16_t)(base + i));
		if (ok)
			return base;
	}
	return 0;
}

/* Start member @p name of a cluster (@p cluster: its initial-cluster list). */
static pid_t etcd_start(const char *name, uint16_t cport, uint16_t pport, const char *cluster)
{
	char data[256], curl[64], purl[64], log[256];
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	snprintf(data, sizeof(data), "%s/%s.data", tmpdir, name);
	snprintf(log, sizeof(log), "%s/%s.log", tmpdir, name);
	snprintf(curl, sizeof(curl), "http://127.0.0.1:%u", cport);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", pport);
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl,
	       "--advertise-client-urls", curl, "--listen-peer-urls", purl,
	       "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
	       "--initial-cluster-state", "new", "--initial-cluster-token", tmpdir + 5,
	       "--heartbeat-interval", "50", "--election-timeout", "500", NULL);
	_exit(127);
}

static void etcd_kill(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

/* Wait until @p e answers a read (up to 15 s). */
static bool wait_ready(struct sg_etcd *e)
{
	for (int i = 0; i < 300; i++) {
		struct sg_etcd_kv *kv;
		size_t n;

		if (sg_etcd_get_prefix(e, "/ready", &kv, &n, NULL) == 0) {
			sg_etcd_kvs_free(kv, n);
			return true;
		}
		msleep(50);
	}
	return false;
}

static int count_prefix(struct sg_etcd *e, const char *prefix)
{
	struct sg_etcd_kv *kv;
	size_t n;
	int rc = sg_etcd_get_prefix(e, prefix, &kv, &n, NULL);

	if (rc < 0)
		return rc;
	sg_etcd_kvs_free(kv, n);
	return (int)n;
}

static const struct sg_etcd_node node_a = {
	.name = "node-a", .kind = SG_NODE_CPU, .gbps = 25, .addr = "127.0.0.1", .port = 9300,
	.control = "unix:/tmp/a.sock"};

static void put_record(struct sg_etcd *e, const char *key, const char *value)
{
	SG_CHECK_EQ(sg_etcd_put(e, key, value, strlen(value), 0), 0);
}

static void test_requests(struct sg_etcd *e)
{
	struct sg_etcd_kv *kv = NULL;
	size_t n = 0;
	int64_t rev = 0, lease = 0, ttl = 0;
	static const uint8_t bin[5] = {0, 1, 0xff, '"', '\\'};

	SG_CHECK_EQ(sg_etcd_put(e, "/t/a", "one", 3, 0), 0);
	SG_CHECK_EQ(sg_etcd_put(e, "/t/b", bin, sizeof(bin), 0), 0);
	SG_CHECK_EQ(sg_etcd_put(e, "/t0", "outside", 7, 0), 0);
	SG_CHECK_EQ(sg_etcd_get_prefix(e, "/t/", &kv, &n, &rev), 0);
	SG_CHECK_EQ(n, 2);
	SG_CHECK(rev >= 3, "revision %lld", (long long)rev);
	if (n == 2) {
		SG_CHECK(strcmp(kv[0].key, "/t/a") == 0 && kv[0].len == 3 &&
			 memcmp(kv[0].value, "one", 3) == 0, "first %s", kv[0].key);
		SG_CHECK(strcmp(kv[1].key, "/t/b") == 0 && kv[1].len == sizeof(bin) &&
			 memcmp(kv[1].value, bin, sizeof(bin)) == 0, "binary value read back");
	}
	sg_etcd_kvs_free(kv, n);
	SG_CHECK_EQ(sg_etcd_delete(e, "/t/", true), 2);
	SG_CHECK_EQ(count_prefix(e, "/t"), 1);
	SG_CHECK_EQ(sg_etcd_delete(e, "/t0", false), 1);
	SG_CHECK_EQ(sg_etcd_put(e, "", "x", 1, 0), -EINVAL);
	SG_CHECK_EQ(sg_etcd_lease_grant(e, 0, &lease), -EINVAL);
	/* a lease: keys under it go when it expires, and keepalive says it is gone */
	SG_CHECK_EQ(sg_etcd_lease_grant(e, 1, &lease), 0);
	SG_CHECK_EQ(sg_etcd_put(e, "/l/x", "v", 1, lease), 0);
	SG_CHECK_EQ(sg_etcd_lease_keepalive(e, lease, &ttl), 0);
	SG_CHECK(ttl >= 1, "ttl %lld", (long long)ttl);
	SG_CHECK_EQ(count_prefix(e, "/l/"), 1);
	msleep(3000);
	SG_CHECK_EQ(sg_etcd_lease_keepalive(e, lease, &ttl), -ENOENT);
	SG_CHECK_EQ(count_prefix(e, "/l/"), 0);
	/* revoked: gone at once */
	SG_CHECK_EQ(sg_etcd_lease_grant(e, 60, &lease), 0);
	SG_CHECK_EQ(sg_etcd_put(e, "/l/y", "v", 1, lease), 0);
	SG_CHECK_EQ(sg_etcd_lease_revoke(e, lease), 0);
	SG_CHECK_EQ(count_prefix(e, "/l/"), 0);
	/* a lease etcd never granted */
	SG_CHECK_EQ(sg_etcd_put(e, "/l/z", "v", 1, 12345), -EREMOTEIO);
	SG_CHECK(strstr(sg_etcd_last_error(e), "lease") != NULL, "error: %s", sg_etcd_last_error(e));
}

static void test_records(struct sg_etcd *e)
{
	struct sg_etcd_node got[8], back;
	struct sg_etcd_garbage g = {0};
	char buf[512], why[160];
	int len;

	len = sg_etcd_node_format(&node_a, buf, sizeof(buf));
	SG_CHECK(len > 0, "format: %d", len);
	SG_CHECK_EQ(sg_etcd_node_parse("/sigma/c1/nodes/node-a", buf, (size_t)len, &back, &g, why,
				       sizeof(why)), 0);
	SG_CHECK(memcmp(&back, &node_a, sizeof(back)) == 0, "record read back");
	SG_CHECK_EQ(sg_etcd_node_format(&node_a, buf, 10), -ENOSPC);
	put_record(e, "/sigma/c1/nodes/node-a", buf);
	/* garbage of every kind, among good records */
	put_record(e, "/sigma/c1/nodes/junk", "{not json");
	put_record(e, "/sigma/c1/nodes/arr", "[1,2]");
	put_record(e, "/sigma/c1/nodes/tpu", "{\"name\":\"tpu\",\"kind\":\"tpu\",\"gbps\":1,"
		   "\"addr\":\"127.0.0.1\",\"port\":1}");
	put_record(e, "/sigma/c1/nodes/other", "{\"name\":\"node-b\",\"kind\":\"cpu\",\"gbps\":1,"
		   "\"addr\":\"127.0.0.1\",\"port\":1}");
	put_record(e, "/sigma/c1/nodes/port", "{\"name\":\"port\",\"kind\":\"cpu\",\"gbps\":1,"
		   "\"addr\":\"127.0.0.1\",\"port\":70000}");
	put_record(e, "/sigma/c1/nodes/addr", "{\"name\":\"addr\",\"kind\":\"gpu\",\"gbps\":1,"
		   "\"addr\":\"localhost\",\"port\":9}");
	put_record(e, "/sigma/c1/nodes/gb", "{\"name\":\"gb\",\"kind\":\"gpu\",\"gbps\":-1,"
		   "\"addr\":\"127.0.0.1\",\"port\":9}");
	put_record(e, "/sigma/c1/nodes/", "");
	put_record(e, "/sigma/c1/nodes/node-g", "{\"name\":\"node-g\",\"kind\":\"gpu\",\"gbps\":100,"
		   "\"addr\":\"10.0.0.2\",\"port\":9400,\"future\":[1]}");
	put_record(e, "/sigma/c2/nodes/node-z", buf); /* another cluster */
	SG_CHECK_EQ(sg_etcd_nodes_get(e, "c1", got, 8, &g), 2);
	SG_CHECK(strcmp(got[0].name, "node-a") == 0 && strcmp(got[1].name, "node-g") == 0 &&
		 got[1].kind == SG_NODE_GPU && got[1].port == 9400 && got[1].control[0] == 0,
		 "the two good records");
	SG_CHECK_EQ(g.not_json, 3); /* {not json, [1,2], "" */
	SG_CHECK_EQ(g.bad_kind, 1);
	SG_CHECK_EQ(g.name_mismatch, 1);
	SG_CHECK_EQ(g.bad_field, 3);
	SG_CHECK_EQ(sg_etcd_nodes_get(e, "c1", got, 1, NULL), 2); /* a count past cap */
	SG_CHECK_EQ(sg_etcd_nodes_get(e, "bad/name", got, 8, NULL), -EINVAL);
	SG_CHECK_EQ(sg_etcd_delete(e, "/sigma/", true), 11);
}

static bool reg_wait(struct sg_etcd_reg *r, bool registered, unsigned int ms)
{
	struct sg_etcd_reg_status st;

	for (unsigned int t = 0; t <= ms; t += 50) {
		sg_etcd_reg_status(r, &st);
		if (st.registered == registered)
			return true;
		msleep(50);
	}
	return false;
}

static bool watch_wait(struct sg_etcd_watch *w, const char *name, bool alive, unsigned int ms)
{
	const char *names[1] = {name};
	uint64_t gen = 0;
	bool a = !alive;

	for (unsigned int t = 0; t <= ms; t += 20) {
		gen = 0;
		if (sg_etcd_watch_alive(w, &gen, names, 1, &a) == 1 && a == alive)
			return true;
		msleep(20);
	}
	return false;
}

static void test_registration(const struct sg_etcd_conf *ec, struct sg_etcd *e)
{
	struct sg_etcd_reg_conf rc = {.etcd = *ec, .cluster = "c1", .node = node_a, .ttl_s = 1};
	struct sg_etcd_watch_stats ws;
	struct sg_etcd_reg_status st;
	struct sg_etcd_watch *w = sg_etcd_watch_start(ec, "c1", 20), *w2;
	struct sg_etcd_reg *r;
	const char *names[2] = {"node-a", "nobody"};
	bool alive[2];
	uint64_t gen = 0;

	SG_CHECK(w != NULL, "watch: %s", strerror(errno));
	r = sg_etcd_reg_start(&rc);
	SG_CHECK(r != NULL, "registration: %s", strerror(errno));
	if (r == NULL || w == NULL)
		return;
	SG_CHECK(reg_wait(r, true, 3000), "registered");
	SG_CHECK(watch_wait(w, "node-a", true, 3000), "the watch sees node-a");
	SG_CHECK_EQ(sg_etcd_watch_alive(w, &gen, names, 2, alive), 1);
	SG_CHECK(alive[0] && !alive[1], "alive %d %d", alive[0], alive[1]);
	SG_CHECK_EQ(sg_etcd_watch_alive(w, &gen, names, 2, alive), 0); /* nothing changed */
	/* kept alive past several TTLs */
	msleep(2500);
	sg_etcd_reg_status(r, &st);
	SG_CHECK(st.registered && st.keepalives >= 3 && st.registrations == 1,
		 "kept: registered %d, %llu keepalives, %llu registrations", st.registered,
		 (unsigned long long)st.keepalives, (unsigned long long)st.registrations);
	SG_CHECK_EQ(count_prefix(e, "/sigma/c1/nodes/node-a"), 1);
	/* a stop without leaving: the record expires with the lease (a crashed node) */
	sg_etcd_reg_stop(r, false);
	SG_CHECK(watch_wait(w, "node-a", false, 4000), "the watch sees node-a's lease expire");
	/* registered again, under another lease: lost for good for this watch, seen by a new one */
	r = sg_etcd_reg_start(&rc);
	SG_CHECK(r != NULL && reg_wait(r, true, 3000), "registered again");
	w2 = sg_etcd_watch_start(ec, "c1", 20);
	SG_CHECK(w2 != NULL && watch_wait(w2, "node-a", true, 3000), "a new watch sees it");
	SG_CHECK(!watch_wait(w, "node-a", true, 500), "the old watch keeps it lost");
	/* a clean leave: gone at once */
	sg_etcd_reg_stop(r, true);
	SG_CHECK_EQ(count_prefix(e, "/sigma/c1/nodes/"), 0);
	SG_CHECK(w2 != NULL && watch_wait(w2, "node-a", false, 3000), "the leave seen");
	sg_etcd_watch_stop(w2);
	sg_etcd_watch_stats(w, &ws);
	SG_CHECK(ws.polls > 10 && ws.changes >= 1 && ws.reachable && ws.failures == 0,
		 "watch: %llu polls, %llu changes", (unsigned long long)ws.polls,
		 (unsigned long long)ws.changes);
	sg_etcd_watch_stop(w);
	/* bad registrations */
	rc.cluster = "a/b";
	SG_CHECK(sg_etcd_reg_start(&rc) == NULL && errno == EINVAL, "bad cluster refused");
	rc.cluster = "c1";
	rc.node.port = 0;
	SG_CHECK(sg_etcd_reg_start(&rc) == NULL && errno == EINVAL, "bad record refused");
}

/* No endpoint answers; then etcd comes up on that port and the registration is made. */
static void test_unreachable(void)
{
	uint16_t p = free_ports(3);
	char url[96], cluster[96], dead[32];
	struct sg_etcd_conf ec = {.endpoints = url, .timeout_ms = 300};
	struct sg_etcd_reg_conf rc = {.cluster = "c1", .node = node_a, .ttl_s = 2};
	struct sg_etcd_reg_status st;
	struct sg_etcd_watch_stats ws;
	struct sg_etcd *e;
	struct sg_etcd_reg *r;
	struct sg_etcd_watch *w;
	pid_t pid;

	/* p + 2 never has an etcd; p gets one later */
	snprintf(url, sizeof(url), "http://127.0.0.1:%u,http://127.0.0.1:%u", p + 2, p);
	snprintf(dead, sizeof(dead), "127.0.0.1:%u", p + 2);
	e = sg_etcd_create(&ec);
	SG_CHECK_EQ(sg_etcd_put(e, "/x", "y", 1, 0), -EHOSTUNREACH);
	SG_CHECK(strstr(sg_etcd_last_error(e), "no etcd endpoint answered") &&
		 strstr(sg_etcd_last_error(e), dead), "message: %s", sg_etcd_last_error(e));
	rc.etcd = ec;
	r = sg_etcd_reg_start(&rc);
	w = sg_etcd_watch_start(&ec, "c1", 50);
	SG_CHECK(r != NULL && w != NULL, "start without etcd");
	msleep(1500);
	sg_etcd_reg_status(r, &st);
	SG_CHECK(!st.registered && st.failures >= 1 && strstr(st.last_error, "lease grant"),
		 "down: registered %d, %llu failures, '%s'", st.registered,
		 (unsigned long long)st.failures, st.last_error);
	sg_etcd_watch_stats(w, &ws);
	SG_CHECK(!ws.reachable && ws.failures >= 1 && ws.generation == 0, "watch down");
	snprintf(cluster, sizeof(cluster), "u=http://127.0.0.1:%u", p + 1);
	pid = etcd_start("u", p, (uint16_t)(p + 1), cluster);
	SG_CHECK(reg_wait(r, true, 15000), "registered once etcd is up");
	SG_CHECK(watch_wait(w, "node-a", true, 3000), "the watch reads it");
	sg_etcd_reg_stop(r, true);
	sg_etcd_watch_stop(w);
	SG_CHECK(e != NULL && wait_ready(e), "a client made while etcd was down works after");
	sg_etcd_destroy(e);
	etcd_kill(&pid);
}

/* Three members; the one in use is killed: requests, registration and the watch go on. */
static void test_cluster(void)
{
	uint16_t p = free_ports(6);
	char eps[256], cluster[256], names[3][8];
	struct sg_etcd_conf ec = {.endpoints = eps, .timeout_ms = 500};
	struct sg_etcd_reg_conf rc = {.cluster = "c3", .node = node_a, .ttl_s = 2};
	struct sg_etcd_reg_status st;
	struct sg_etcd *e;
	struct sg_etcd_reg *r;
	struct sg_etcd_watch *w;
	pid_t pids[3];
	int victim = -1;
	uint64_t k0;

	snprintf(eps, sizeof(eps), "http://127.0.0.1:%u,http://127.0.0.1:%u,http://127.0.0.1:%u",
		 p, p + 2, p + 4);
	snprintf(cluster, sizeof(cluster), "m0=http://127.0.0.1:%u,m1=http://127.0.0.1:%u,"
		 "m2=http://127.0.0.1:%u", p + 1, p + 3, p + 5);
	for (int i = 0; i < 3; i++) {
		snprintf(names[i], sizeof(names[i]), "m%d", i);
		pids[i] = etcd_start(names[i], (uint16_t)(p + 2 * i), (uint16_t)(p + 2 * i + 1),
				     cluster);
	}
	e = sg_etcd_create(&ec);
	SG_CHECK(e != NULL && wait_ready(e), "3-member cluster up");
	rc.etcd = ec;
	r = sg_etcd_reg_start(&rc);
	w = sg_etcd_watch_start(&ec, "c3", 50);
	SG_CHECK(r != NULL && w != NULL && reg_wait(r, true, 5000), "registered in the cluster");
	SG_CHECK(watch_wait(w, "node-a", true, 3000), "watched in the cluster");
	SG_CHECK_EQ(sg_etcd_put(e, "/k", "1", 1, 0), 0);
	for (int i = 0; i < 3; i++) {
		char ep[64];

		snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", p + 2 * i);
		if (strcmp(sg_etcd_endpoint(e), ep) == 0)
			victim = i;
	}
	SG_CHECK(victim >= 0, "endpoint in use: %s", sg_etcd_endpoint(e));
	if (victim < 0)
		victim = 0;
	sg_etcd_reg_status(r, &st);
	k0 = st.keepalives;
	etcd_kill(&pids[victim]);
	/* a new leader may take an election: allow a few tries */
	for (int i = 0; i < 40 && sg_etcd_put(e, "/k", "2", 1, 0) != 0; i++)
		msleep(100);
	SG_CHECK(count_prefix(e, "/k") == 1, "read after the kill: %s", sg_etcd_last_error(e));
	SG_CHECK(strstr(sg_etcd_endpoint(e), "127.0.0.1") != NULL, "moved endpoint");
	msleep(3000); /* longer than the TTL: the lease must have been kept alive elsewhere */
	sg_etcd_reg_status(r, &st);
	SG_CHECK(st.registered && st.keepalives > k0, "registration kept: %d, %llu > %llu",
		 st.registered, (unsigned long long)st.keepalives, (unsigned long long)k0);
	SG_CHECK(watch_wait(w, "node-a", true, 2000), "still watched");
	SG_CHECK_EQ(sg_etcd_nodes_get(e, "c3", NULL, 0, NULL), 1);
	sg_etcd_reg_stop(r, true);
	SG_CHECK(watch_wait(w, "node-a", false, 3000), "the leave seen through the survivors");
	sg_etcd_watch_stop(w);
	sg_etcd_destroy(e);
	for (int i = 0; i < 3; i++)
		etcd_kill(&pids[i]);
}

int main(void)
{
	char eps[128], cluster[128], cmd[300];
	struct sg_etcd_conf ec = {.endpoints = eps};
	struct sg_etcd *e;
	uint16_t p;
	pid_t pid;

	if (system("command -v etcd >/dev/null 2>&1") != 0)
		SG_TEST_SKIP_ALL("no etcd binary (Debian package etcd-server)");
	if (mkdtemp(tmpdir) == NULL)
		SG_TEST_SKIP_ALL("mkdtemp: %s", strerror(errno));
	SG_CHECK(sg_etcd_create(&(struct sg_etcd_conf){.endpoints = "127.0.0.1:2379"}) == NULL &&
		 errno == EINVAL, "an endpoint without a scheme is refused");
	SG_CHECK(sg_etcd_create(&(struct sg_etcd_conf){.endpoints = ""}) == NULL, "no endpoint");
	p = free_ports(2);
	snprintf(eps, sizeof(eps), "http://127.0.0.1:%u", p);
	snprintf(cluster, sizeof(cluster), "s=http://127.0.0.1:%u", p + 1);
	pid = etcd_start("s", p, (uint16_t)(p + 1), cluster);
	e = sg_etcd_create(&ec);
	if (SG_CHECK(e != NULL && wait_ready(e), "etcd up on port %u", p)) {
		test_requests(e);
		test_records(e);
		test_registration(&ec, e);
	}
	sg_etcd_destroy(e);
	etcd_kill(&pid);
	test_unreachable();
	test_cluster();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return sg_test_finish("etcd");
}
