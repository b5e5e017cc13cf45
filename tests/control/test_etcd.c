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
#include "etcd_test_util.h"

static const struct sg_etcd_node node_a = {
	.name = "node-a", .kind = SG_NODE_CPU, .gbps = 25, .addr = "127.0.0.1", .port = 9300,
	.control = "unix:/tmp/a.sock"};

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
	/* the watch's first read must come before the record, or the stream
	 * brings one event and one change fewer than counted below (CI, ASan) */
	for (unsigned int t = 0; w != NULL && t < 3000; t += 10) {
		sg_etcd_watch_stats(w, &ws);
		if (ws.streaming)
			break;
		msleep(10);
	}
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
	/* one read, then the stream brought every change */
	SG_CHECK(ws.polls == 1 && ws.streams == 1 && ws.streaming && !ws.polling &&
			 ws.events >= 4 && ws.changes >= 2 && ws.reachable && ws.failures == 0,
		 "watch: %llu polls, %llu streams, %llu events, %llu changes",
		 (unsigned long long)ws.polls, (unsigned long long)ws.streams,
		 (unsigned long long)ws.events, (unsigned long long)ws.changes);
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

/* sg_etcd_put_if_absent(): of two writers of one key one wins; a key named absent blocks it */
static void test_txn(struct sg_etcd *e)
{
	const char *abs[1] = {"/x/abort"};
	struct sg_etcd_kv *kv = NULL;
	size_t n = 0;

	SG_CHECK_EQ(sg_etcd_put_if_absent(e, "/x/p", "first", 5, 0, NULL, 0), 1);
	SG_CHECK_EQ(sg_etcd_put_if_absent(e, "/x/p", "second", 6, 0, NULL, 0), 0);
	SG_CHECK_EQ(sg_etcd_get_prefix(e, "/x/p", &kv, &n, NULL), 0);
	SG_CHECK(n == 1 && kv[0].len == 5 && memcmp(kv[0].value, "first", 5) == 0,
		 "the first writer's value stays");
	sg_etcd_kvs_free(kv, n);
	SG_CHECK_EQ(sg_etcd_put_if_absent(e, "/x/c", "c", 1, 0, abs, 1), 1);
	SG_CHECK_EQ(sg_etcd_put(e, "/x/abort", "a", 1, 0), 0);
	SG_CHECK_EQ(sg_etcd_put_if_absent(e, "/x/d", "d", 1, 0, abs, 1), 0);
	SG_CHECK_EQ(count_prefix(e, "/x/d"), 0);
	SG_CHECK_EQ(sg_etcd_put_if_absent(e, "/x/e", "e", 1, 0, NULL, 1), -EINVAL);
	SG_CHECK_EQ(sg_etcd_delete(e, "/x/", true), 3);
}

int main(void)
{
	char eps[128];
	struct sg_etcd_conf ec = {.endpoints = eps};
	struct sg_etcd *e;
	pid_t pid;

	etcd_test_init();
	SG_CHECK(sg_etcd_create(&(struct sg_etcd_conf){.endpoints = "127.0.0.1:2379"}) == NULL &&
		 errno == EINVAL, "an endpoint without a scheme is refused");
	SG_CHECK(sg_etcd_create(&(struct sg_etcd_conf){.endpoints = ""}) == NULL, "no endpoint");
	pid = etcd_one("s", eps, &e);
	if (e != NULL) {
		test_requests(e);
		test_txn(e);
		test_records(e);
		test_registration(&ec, e);
	}
	sg_etcd_destroy(e);
	etcd_kill(&pid);
	test_unreachable();
	test_cluster();
	etcd_test_fini();
	return sg_test_finish("etcd");
}
