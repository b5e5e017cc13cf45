/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The watch's v3 stream and job records, against a real etcd started here
 * (skipped without etcd): through a proxy the test cuts, a stream that ends is
 * made again from the next revision and loses none of the changes made
 * meanwhile (no fresh read); when etcd compacted its history past that
 * revision, the watch reads the prefix afresh; a gateway that answers
 * /v3/watch with 404 makes it poll instead. The time from a change to the
 * watch's view, stream against poll, is printed (measured, not asserted).
 * Job records: from a descriptor, read back, every kind of garbage ignored and
 * counted (sg_etcd_job_parse(), sg_etcd_jobs_get(), a watch with jobs), the
 * token digest, the keys each node sums with and without a lost node (against
 * placement computed here), a record put under a lease that lives while a
 * watch renews it and goes when nobody does, and removed with its lease.
 */
#include "etcd_test_util.h"
#include "sg_ctl_place.h"

#define DESC "sigma-job=1;id=7;workers=4;token=0123456789abcdef;dtype=fp32;mode=deterministic;" \
	     "partition_bytes=65536;chunk_bytes=8920;node=n1,127.0.0.1,9301,cpu,10,0.25;"          \
	     "node=n2,127.0.0.1,9302,cpu,10,0.25;node=n3,127.0.0.1,9303,gpu,25,0.5"

static const uint64_t elems[3] = {300000, 1000, 77777};

static const char node_rec[] = "{\"name\":\"%s\",\"kind\":\"cpu\",\"gbps\":1,\"addr\":\"127.0.0.1\","
			       "\"port\":9}";

static void put_node(struct sg_etcd *e, const char *cluster, const char *name)
{
	char key[128], val[256];

	snprintf(key, sizeof(key), "/sigma/%s/nodes/%s", cluster, name);
	snprintf(val, sizeof(val), node_rec, name);
	put_record(e, key, val);
}

static void del_node(struct sg_etcd *e, const char *cluster, const char *name)
{
	char key[128];

	snprintf(key, sizeof(key), "/sigma/%s/nodes/%s", cluster, name);
	SG_CHECK_EQ(sg_etcd_delete(e, key, false), 1);
}

static struct sg_etcd_watch_stats wstats(struct sg_etcd_watch *w)
{
	struct sg_etcd_watch_stats st;

	sg_etcd_watch_stats(w, &st);
	return st;
}

static bool wait_streaming(struct sg_etcd_watch *w, bool on, unsigned int ms)
{
	for (unsigned int t = 0; t <= ms; t += 20, msleep(20))
		if (wstats(w).streaming == on)
			return true;
	return false;
}

/* ---- the stream: reconnects lose nothing, compaction, no stream ---- */

static void test_stream(struct sg_etcd *e, uint16_t port)
{
	struct sg_etcd_watch_conf c = {.cluster = "s1", .poll_ms = 10000};
	struct sg_etcd_watch_stats st;
	struct sg_etcd_watch *w, *w2;
	struct sg_etcd_kv *kv;
	struct proxy px;
	char url[64], cmd[256];
	int64_t rev = 0;
	size_t n;

	if (!SG_CHECK_EQ(proxy_start(&px, port), 0))
		return;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", px.port);
	c.etcd = (struct sg_etcd_conf){.endpoints = url, .timeout_ms = 500};
	w = sg_etcd_watch_create(&c);
	if (!SG_CHECK(w != NULL, "watch: %s", strerror(errno))) {
		proxy_stop(&px);
		return;
	}
	SG_CHECK(wait_streaming(w, true, 3000), "a stream is made");
	put_node(e, "s1", "n1");
	/* a poll period of 10 s: only the stream can bring it this soon */
	SG_CHECK(watch_wait(w, "n1", true, 3000), "the stream brings n1");
	st = wstats(w);
	SG_CHECK(st.streaming && st.streams == 1 && st.polls == 1 && !st.polling,
		 "streaming %d, %llu streams, %llu polls", st.streaming,
		 (unsigned long long)st.streams, (unsigned long long)st.polls);
	/* cut: changes meanwhile come when the stream is made again, without a fresh read */
	atomic_store(&px.mode, PROXY_CUT);
	SG_CHECK(wait_streaming(w, false, 3000), "the cut ends the stream");
	put_node(e, "s1", "n2");
	del_node(e, "s1", "n1");
	put_node(e, "s1", "n3");
	atomic_store(&px.mode, PROXY_PASS);
	SG_CHECK(watch_wait(w, "n2", true, 5000) && watch_wait(w, "n1", false, 100) &&
		 watch_wait(w, "n3", true, 100), "the changes made during the cut");
	st = wstats(w);
	SG_CHECK(st.polls == 1 && st.streams >= 2 && st.events >= 4,
		 "after the cut: %llu polls, %llu streams, %llu events",
		 (unsigned long long)st.polls, (unsigned long long)st.streams,
		 (unsigned long long)st.events);
	/* cut again; changes, then etcd compacts past them: the watch reads afresh */
	atomic_store(&px.mode, PROXY_CUT);
	SG_CHECK(wait_streaming(w, false, 3000), "the second cut ends the stream");
	del_node(e, "s1", "n3");
	put_node(e, "s1", "n4");
	put_node(e, "s1", "n4");
	if (SG_CHECK_EQ(sg_etcd_get_prefix(e, "/sigma/s1/", &kv, &n, &rev), 0))
		sg_etcd_kvs_free(kv, n);
	snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints http://127.0.0.1:%u "
		 "compact %lld >/dev/null", port, (long long)rev);
	SG_CHECK_EQ(system(cmd), 0);
	atomic_store(&px.mode, PROXY_PASS);
	SG_CHECK(watch_wait(w, "n4", true, 5000) && watch_wait(w, "n3", false, 100) &&
		 watch_wait(w, "n2", true, 100), "the state after the compaction");
	SG_CHECK(wait_streaming(w, true, 3000), "streaming again");
	st = wstats(w);
	SG_CHECK(st.polls == 2 && st.streaming, "after the compaction: %llu polls (a fresh read)",
		 (unsigned long long)st.polls);
	sg_etcd_watch_stop(w);
	/* a gateway that refuses watch streams: the watch polls, and says so in its stats */
	atomic_store(&px.mode, PROXY_NO_WATCH);
	c.poll_ms = 50;
	w2 = sg_etcd_watch_create(&c);
	SG_CHECK(w2 != NULL && watch_wait(w2, "n4", true, 3000), "a watch without streams reads");
	put_node(e, "s1", "n5");
	SG_CHECK(w2 != NULL && watch_wait(w2, "n5", true, 3000), "and polls");
	st = wstats(w2);
	SG_CHECK(st.polling && !st.streaming && st.streams == 0 && st.polls >= 2 &&
			 atomic_load(&px.refused) >= 1,
		 "polling %d, %llu polls, %u refused", st.polling, (unsigned long long)st.polls,
		 atomic_load(&px.refused));
	sg_etcd_watch_stop(w2);
	proxy_stop(&px);
	/* a stop in the middle of a stream is prompt */
	c.etcd.endpoints = url;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
	c.mode = SG_ETCD_WATCH_AUTO;
	w = sg_etcd_watch_create(&c);
	SG_CHECK(w != NULL && wait_streaming(w, true, 3000), "streaming");
	if (w != NULL) {
		double t0 = now_ms();

		sg_etcd_watch_stop(w);
		SG_CHECK(now_ms() - t0 < 500, "stop took %.0f ms", now_ms() - t0);
	}
	SG_CHECK_EQ(sg_etcd_delete(e, "/sigma/s1/", true), 3);
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* From a put (and a delete) to the watch's view: a stream's and a 100 ms poll's. Printed. */
static void test_latency(const struct sg_etcd_conf *ec, struct sg_etcd *e)
{
	struct sg_etcd_watch_conf c = {.etcd = *ec, .cluster = "lat", .poll_ms = 100};
	struct sg_etcd_watch *w[2];
	double lat[2][20];
	const char *names[1] = {"n1"};
	int k = 0;

	w[0] = sg_etcd_watch_create(&c);
	c.mode = SG_ETCD_WATCH_POLL;
	w[1] = sg_etcd_watch_create(&c);
	if (!SG_CHECK(w[0] != NULL && w[1] != NULL, "two watches"))
		goto out;
	put_node(e, "lat", "n0"); /* something read: generation 1 */
	SG_CHECK(watch_wait(w[0], "n0", true, 3000) && watch_wait(w[1], "n0", true, 3000), "ready");
	for (k = 0; k < 20; k++) {
		bool put = k % 2 == 0, seen[2] = {false, false};
		double t0 = now_ms();

		/* a node that leaves and comes back is lost for good: a new name each time */
		char name[16];

		snprintf(name, sizeof(name), "m%d", k / 2);
		names[0] = name;
		/* at no fixed phase of the poll period */
		msleep((unsigned int)(k * 37 % 100));
		t0 = now_ms();
		if (put)
			put_node(e, "lat", name);
		else
			del_node(e, "lat", name);
		while ((!seen[0] || !seen[1]) && now_ms() - t0 < 3000) {
			for (int i = 0; i < 2; i++) {
				uint64_t gen = 0;
				bool a = !put;

				if (!seen[i] && sg_etcd_watch_alive(w[i], &gen, names, 1, &a) == 1 &&
				    a == put) {
					seen[i] = true;
					lat[i][k] = now_ms() - t0;
				}
			}
			msleep(1);
		}
		if (!SG_CHECK(seen[0] && seen[1], "change %d seen by both", k))
			break;
	}
	if (k == 20) {
		qsort(lat[0], 20, sizeof(double), dbl_cmp);
		qsort(lat[1], 20, sizeof(double), dbl_cmp);
		printf("change to view, median of 20 (1 ms steps): stream %.1f ms, poll 100 ms "
		       "%.1f ms; max %.1f and %.1f ms\n", (lat[0][9] + lat[0][10]) / 2,
		       (lat[1][9] + lat[1][10]) / 2, lat[0][19], lat[1][19]);
	}
out:
	sg_etcd_watch_stop(w[0]);
	sg_etcd_watch_stop(w[1]);
	sg_etcd_delete(e, "/sigma/lat/", true);
}

/* ---- job records ---- */

static void test_job_record(void)
{
	static struct sg_etcd_job j, back;
	char err[256], d2[SG_ETCD_DIGEST_LEN], *text = NULL;
	int len;

	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", DESC, elems, 3, &j, err, sizeof(err)), 0);
	SG_CHECK(j.id == 7 && j.workers == 4 && j.mode == SG_MODE_DETERM && j.dtype == SG_DTYPE_FP32 &&
			 j.partition_bytes == 65536 && j.chunk_bytes == 8920 && !j.open &&
			 j.n_tensors == 3 && j.elems[2] == 77777 && j.n_nodes == 3 &&
			 j.nodes[2].kind == SG_NODE_GPU && j.nodes[2].weight == 0.5,
		 "record from the descriptor");
	/* the digest: of this token, cluster and id; the token nowhere in the record */
	SG_CHECK_EQ(sg_etcd_token_digest("cj", 7, 0x0123456789abcdefull, d2), 0);
	SG_CHECK(strcmp(d2, j.token_digest) == 0 && strlen(d2) == 64, "digest %s", j.token_digest);
	SG_CHECK_EQ(sg_etcd_token_digest("ck", 7, 0x0123456789abcdefull, d2), 0);
	SG_CHECK(strcmp(d2, j.token_digest) != 0, "another cluster, another digest");
	SG_CHECK_EQ(sg_etcd_token_digest("cj", 8, 0x0123456789abcdefull, d2), 0);
	SG_CHECK(strcmp(d2, j.token_digest) != 0, "another id, another digest");
	SG_CHECK_EQ(sg_etcd_token_digest("cj", 7, 0x0123456789abcdeeull, d2), 0);
	SG_CHECK(strcmp(d2, j.token_digest) != 0, "another token, another digest");
	SG_CHECK_EQ(sg_etcd_token_digest("c/j", 7, 1, d2), -EINVAL);
	len = sg_etcd_job_format(&j, &text);
	SG_CHECK(len > 0 && strstr(text, "0123456789abcdef") == NULL, "format: %d", len);
	SG_CHECK_EQ(sg_etcd_job_parse("/sigma/cj/jobs/7", text, (size_t)len, &back, NULL, err,
				      sizeof(err)), 0);
	SG_CHECK(memcmp(&back, &j, sizeof(j)) == 0, "read back the same");
	free(text);
	/* an open job */
	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", DESC, NULL, 0, &back, err, sizeof(err)), 0);
	SG_CHECK(back.open && back.n_tensors == 0, "open");
	SG_CHECK_EQ(sg_etcd_job_keys(&back, NULL, 0, NULL, 0), -EINVAL);
	/* refusals */
	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", "sigma-job=1;id=7", elems, 3, &back, err,
						sizeof(err)), -EINVAL);
	SG_CHECK(err[0] != '\0', "a bad descriptor says why");
	SG_CHECK_EQ(sg_etcd_job_from_descriptor("c/j", DESC, elems, 3, &back, err, sizeof(err)),
		    -EINVAL);
	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", DESC, elems, SG_ETCD_JOB_MAX_TENSORS + 1,
						&back, err, sizeof(err)), -EINVAL);
	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", DESC, (const uint64_t[]){0}, 1, &back, err,
						sizeof(err)), -EINVAL);
}

struct bad {
	const char *key, *value;
	int counter; /* 0 not_json, 1 bad_field, 2 bad_kind, 3 name_mismatch */
};

#define GOOD_NODES "[{\"name\":\"n1\",\"kind\":\"cpu\",\"gbps\":1,\"weight\":1}]"
#define DIG "\"token_digest\":\"0000000000000000000000000000000000000000000000000000000000000000\""
#define REC(id, more) "{\"id\":" #id ",\"workers\":2,\"dtype\":\"fp32\",\"mode\":\"sync\"," \
		      "\"partition_bytes\":4096,\"chunk_bytes\":1024," more "}"

static const struct bad bads[] = {
	{"/sigma/cj/jobs/1", "{not json", 0},
	{"/sigma/cj/jobs/2", "[1]", 0},
	{"/sigma/cj/jobs/3", "", 0},
	{"/sigma/cj/jobs/4", REC(4, DIG ",\"nodes\":" GOOD_NODES), 1},	/* no tensors */
	{"/sigma/cj/jobs/5", REC(5, DIG ",\"tensors\":[10],\"nodes\":[]"), 1},
	{"/sigma/cj/jobs/6", REC(6, "\"token_digest\":\"00\",\"tensors\":[10],\"nodes\":"
				 GOOD_NODES), 1},
	{"/sigma/cj/jobs/16", REC(16, DIG ",\"tensors\":[0],\"nodes\":" GOOD_NODES), 1},
	{"/sigma/cj/jobs/8", REC(8, DIG ",\"tensors\":[\"x\"],\"nodes\":" GOOD_NODES), 1},
	{"/sigma/cj/jobs/9", REC(9, DIG ",\"tensors\":[10],\"open\":true,\"nodes\":"
				 GOOD_NODES), 1},
	{"/sigma/cj/jobs/10", REC(10, DIG ",\"tensors\":[10],\"nodes\":[{\"name\":\"n1\","
				  "\"kind\":\"cpu\",\"gbps\":1,\"weight\":0}]"), 1},
	{"/sigma/cj/jobs/11", REC(11, DIG ",\"tensors\":[10],\"nodes\":[{\"name\":\"n1\","
				  "\"kind\":\"cpu\",\"gbps\":1,\"weight\":1},{\"name\":\"n1\","
				  "\"kind\":\"cpu\",\"gbps\":1,\"weight\":1}]"), 1},
	{"/sigma/cj/jobs/12", "{\"id\":12,\"workers\":2,\"dtype\":\"fp32\",\"mode\":\"sync\","
			      "\"partition_bytes\":1024,\"chunk_bytes\":4096," DIG
			      ",\"tensors\":[10],\"nodes\":" GOOD_NODES "}", 1},
	{"/sigma/cj/jobs/13", REC(13, DIG ",\"tensors\":[10],\"nodes\":[{\"name\":\"n1\","
				  "\"kind\":\"tpu\",\"gbps\":1,\"weight\":1}]"), 2},
	{"/sigma/cj/jobs/99", REC(14, DIG ",\"tensors\":[10],\"nodes\":" GOOD_NODES), 3},
	{"/sigma/cj/jobs/15", "{\"id\":15,\"workers\":2,\"dtype\":\"fp32\",\"mode\":\"fast\","
			      "\"partition_bytes\":4096,\"chunk_bytes\":1024," DIG
			      ",\"tensors\":[10],\"nodes\":" GOOD_NODES "}", 1},
};
#define N_BAD (sizeof(bads) / sizeof(bads[0]))

static void check_counts(const struct sg_etcd_garbage *g, const char *what)
{
	uint64_t want[4] = {0};

	for (size_t i = 0; i < N_BAD; i++)
		want[bads[i].counter]++;
	SG_CHECK(g->not_json == want[0] && g->bad_field == want[1] && g->bad_kind == want[2] &&
			 g->name_mismatch == want[3],
		 "%s: %llu not json, %llu bad field, %llu bad kind, %llu mismatch", what,
		 (unsigned long long)g->not_json, (unsigned long long)g->bad_field,
		 (unsigned long long)g->bad_kind, (unsigned long long)g->name_mismatch);
}

static void test_job_garbage(const struct sg_etcd_conf *ec, struct sg_etcd *e)
{
	struct sg_etcd_watch_conf c = {.etcd = *ec, .cluster = "cj", .jobs = true};
	static struct sg_etcd_job j, got[4];
	struct sg_etcd_garbage g = {0};
	struct sg_etcd_watch *w;
	char why[200], *good = NULL;
	int len;

	for (size_t i = 0; i < N_BAD; i++) {
		struct sg_etcd_garbage one = {0};
		uint64_t *ctr[4] = {&one.not_json, &one.bad_field, &one.bad_kind,
				    &one.name_mismatch};

		why[0] = '\0';
		SG_CHECK(sg_etcd_job_parse(bads[i].key, bads[i].value, strlen(bads[i].value), &j,
					   &one, why, sizeof(why)) == -EINVAL && *ctr[bads[i].counter] == 1
				 && why[0] != '\0',
			 "garbage %zu (%s) refused with its reason: '%s'", i, bads[i].key, why);
		put_record(e, bads[i].key, bads[i].value);
	}
	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", DESC, elems, 3, &j, why, sizeof(why)), 0);
	len = sg_etcd_job_format(&j, &good);
	SG_CHECK(len > 0 && sg_etcd_put(e, "/sigma/cj/jobs/7", good, (size_t)len, 0) == 0,
		 "a good record among them");
	free(good);
	SG_CHECK_EQ(sg_etcd_jobs_get(e, "cj", got, 4, &g), 1);
	SG_CHECK(got[0].id == 7 && got[0].n_tensors == 3, "the good record read");
	check_counts(&g, "jobs_get");
	w = sg_etcd_watch_create(&c);
	SG_CHECK(w != NULL, "a watch with jobs");
	for (int t = 0; w != NULL && t < 150 && wstats(w).jobs == 0; t++)
		msleep(20);
	if (w != NULL) {
		struct sg_etcd_watch_stats st = wstats(w);

		SG_CHECK_EQ(st.jobs, 1);
		check_counts(&st.job_garbage, "watch");
		SG_CHECK_EQ(sg_etcd_watch_job(w, 7, &j), 0);
		SG_CHECK(j.n_tensors == 3 && j.elems[0] == 300000, "the watch's copy");
		SG_CHECK_EQ(sg_etcd_watch_job(w, 4, &j), -ENOENT);
	}
	sg_etcd_watch_stop(w);
	SG_CHECK_EQ(count_prefix(e, "/sigma/cj/jobs/"), (int)N_BAD + 1);
	SG_CHECK_EQ(sg_etcd_delete(e, "/sigma/cj/jobs/", true), (int)N_BAD + 1);
}

static bool has_key(const struct sg_etcd_key *k, long n, uint32_t id)
{
	for (long i = 0; i < n; i++)
		if (k[i].id == id)
			return true;
	return false;
}

/* Each node's keys, without and with a lost node, against placement computed here. */
static void test_job_keys(void)
{
	static struct sg_etcd_job j;
	struct sg_etcd_key k[3][64], kl[3][64];
	struct sg_ctl_place_node pn[3];
	double w[3], wl[3];
	bool lost[3] = {false, true, false};
	long n[3], nl[3], total = 0, moved = 0;
	char err[200];

	SG_CHECK_EQ(sg_etcd_job_from_descriptor("cj", DESC, elems, 3, &j, err, sizeof(err)), 0);
	for (int i = 0; i < 3; i++) {
		pn[i] = (struct sg_ctl_place_node){.name = j.nodes[i].name, .kind = j.nodes[i].kind,
						   .gbps = j.nodes[i].gbps, .alive = true};
		w[i] = j.nodes[i].weight;
		wl[i] = lost[i] ? 0 : w[i];
		n[i] = sg_etcd_job_keys(&j, NULL, (unsigned int)i, k[i], 64);
		nl[i] = sg_etcd_job_keys(&j, lost, (unsigned int)i, kl[i], 64);
		total += n[i];
	}
	/* 65536-byte partitions of fp32: 19 + 1 + 5 */
	SG_CHECK_EQ(total, 25);
	SG_CHECK_EQ(nl[1], 0);
	for (uint32_t t = 0; t < 3; t++)
		for (uint32_t p = 0; (uint64_t)p * 16384 < elems[t]; p++) {
			uint32_t id = sg_wire_key(t, p);
			int o = sg_ctl_place_key(pn, w, 3, sg_ctl_partition_key(t, p));
			int ol = sg_ctl_place_key(pn, wl, 3, sg_ctl_partition_key(t, p));

			SG_CHECK(o >= 0 && has_key(k[o], n[o], id) && ol >= 0 && ol != 1 &&
					 has_key(kl[ol], nl[ol], id),
				 "key 0x%x on node %d, then %d", id, o, ol);
			/* only the lost node's keys move */
			SG_CHECK(o == 1 || o == ol, "key 0x%x moved from a live node", id);
			moved += o == 1;
		}
	SG_CHECK_EQ(nl[0] + nl[2], 25);
	SG_CHECK_EQ(nl[0] + nl[2] - n[0] - n[2], moved);
	SG_CHECK(moved == n[1] && moved > 0, "%ld moved, n2 had %ld", moved, n[1]);
	lost[0] = lost[2] = true;
	SG_CHECK_EQ(sg_etcd_job_keys(&j, lost, 0, NULL, 0), -EHOSTDOWN);
	SG_CHECK_EQ(sg_etcd_job_keys(&j, NULL, 3, NULL, 0), -EINVAL);
	SG_CHECK(k[0][0].nelem > 0, "elements");
}

/* A record under a lease: alive while a watch renews it, gone when none does; removed. */
static void test_job_lease(const struct sg_etcd_conf *ec, struct sg_etcd *e)
{
	struct sg_etcd_watch_conf c = {.etcd = *ec, .cluster = "cj", .jobs = true};
	static struct sg_etcd_job j;
	struct sg_etcd_watch *w = sg_etcd_watch_create(&c);
	struct pollfd pf;
	char err[256];
	uint64_t v;
	int64_t lease;

	if (!SG_CHECK(w != NULL, "watch"))
		return;
	pf = (struct pollfd){.fd = sg_etcd_watch_fd(w), .events = POLLIN};
	msleep(300);
	while (read(pf.fd, &v, sizeof(v)) == sizeof(v))
		;
	lease = sg_etcd_job_record(ec, "cj", DESC, elems, 3, 2, err, sizeof(err));
	SG_CHECK(lease > 0, "record: %s", err);
	SG_CHECK(poll(&pf, 1, 3000) == 1, "the watch's fd wakes up");
	SG_CHECK_EQ(sg_etcd_watch_job(w, 7, &j), 0);
	SG_CHECK(j.lease == lease && j.n_tensors == 3, "the record under its lease");
	/* renewed: alive past twice its TTL */
	SG_CHECK_EQ(sg_etcd_watch_keep(w, &lease, 1), 0);
	msleep(4500);
	SG_CHECK_EQ(count_prefix(e, "/sigma/cj/jobs/7"), 1);
	SG_CHECK(wstats(w).keepalives >= 3, "%llu renewals",
		 (unsigned long long)wstats(w).keepalives);
	/* nobody renews it: gone with its lease */
	SG_CHECK_EQ(sg_etcd_watch_keep(w, NULL, 0), 0);
	for (int t = 0; t < 200 && sg_etcd_watch_job(w, 7, &j) == 0; t++)
		msleep(20);
	SG_CHECK_EQ(sg_etcd_watch_job(w, 7, &j), -ENOENT);
	SG_CHECK_EQ(count_prefix(e, "/sigma/cj/jobs/"), 0);
	/* recorded and removed (the lease revoked with it) */
	lease = sg_etcd_job_record(ec, "cj", DESC, NULL, 0, 0, err, sizeof(err));
	SG_CHECK(lease > 0, "an open job's record: %s", err);
	SG_CHECK_EQ(count_prefix(e, "/sigma/cj/jobs/7"), 1);
	SG_CHECK_EQ(sg_etcd_job_unrecord(ec, "cj", 7, err, sizeof(err)), 0);
	SG_CHECK_EQ(count_prefix(e, "/sigma/cj/jobs/"), 0);
	SG_CHECK_EQ(sg_etcd_lease_keepalive(e, lease, NULL), -ENOENT);
	SG_CHECK_EQ(sg_etcd_job_unrecord(ec, "cj", 7, err, sizeof(err)), -ENOENT);
	SG_CHECK(strstr(err, "there is none") != NULL, "%s", err);
	SG_CHECK_EQ(sg_etcd_job_record(ec, "cj", "sigma-job=1", elems, 3, 0, err, sizeof(err)),
		    -EINVAL);
	sg_etcd_watch_stop(w);
}

int main(void)
{
	char eps[128];
	struct sg_etcd_conf ec = {.endpoints = eps};
	struct sg_etcd *e;
	pid_t pid;

	etcd_test_init();
	test_job_record();
	test_job_keys();
	pid = etcd_one("w", eps, &e);
	if (e != NULL) {
		uint16_t port = (uint16_t)atoi(strrchr(eps, ':') + 1);

		test_stream(e, port);
		test_latency(&ec, e);
		test_job_garbage(&ec, e);
		test_job_lease(&ec, e);
	}
	sg_etcd_destroy(e);
	etcd_kill(&pid);
	etcd_test_fini();
	return sg_test_finish("etcd_watch");
}
