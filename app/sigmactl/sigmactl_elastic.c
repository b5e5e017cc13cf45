/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl --etcd ... drain NODE | undrain NODE | elastic: a node taken out of
 * (or given back to) every elastic job of the cluster at an agreed round
 * (docs/cluster.md, "Elastic jobs"), and the jobs' node sets. The mark is
 * /sigma/<cluster>/drain/<NODE>; each job's rank 0 proposes the change and the
 * job's ranks agree on the round, so sigmactl only writes the mark and reads
 * the records until every job has taken it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sg_etcd.h"
#include "sg_parse.h"
#include "sigmactl_elastic.h"

struct ejob {
	char dir[256];		/* /sigma/<cluster>/elastic/<id>.<tag> */
	unsigned long id;
	int workers;
	unsigned int epoch;	/* last committed */
	bool has_node;		/* NODE in it */
	bool closed;		/* every rank closed the sessions before it */
	bool pending;		/* a proposal after it not yet decided */
	char nodes[512];
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static json_t *get_json(const struct sg_etcd_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return json_loadb(kv[i].value, kv[i].len, 0, NULL);
	return NULL;
}

static bool exists(const struct sg_etcd_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return true;
	return false;
}

static void names_of(json_t *nodes, const char *node, struct ejob *j)
{
	size_t i;
	json_t *v;

	j->nodes[0] = '\0';
	j->has_node = false;
	json_array_foreach(nodes, i, v) {
		const char *nm = json_string_value(json_object_get(v, "name"));

		if (nm == NULL)
			continue;
		snprintf(j->nodes + strlen(j->nodes), sizeof(j->nodes) - strlen(j->nodes), "%s%s",
			 j->nodes[0] ? "," : "", nm);
		j->has_node |= node != NULL && strcmp(nm, node) == 0;
	}
}

/* The live elastic jobs of the cluster (those whose rank 0 keeps J/job), decided as
 * every rank decides them: a proposal is committed with every rank's confirm. */
static int read_jobs(struct sg_etcd *e, const char *prefix, const char *node, struct ejob *out,
		     int cap)
{
	char ep[160], key[400];
	struct sg_etcd_kv *kv = NULL;
	size_t n = 0;
	int cnt = 0, rc;

	snprintf(ep, sizeof(ep), "%s/elastic/", prefix);
	rc = sg_etcd_get_prefix(e, ep, &kv, &n, NULL);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && cnt < cap; i++) {
		size_t len = strlen(kv[i].key);
		struct ejob *j = &out[cnt];
		json_t *rec;

		if (len < 4 || strcmp(kv[i].key + len - 4, "/job") != 0 || len - 4 >= sizeof(j->dir))
			continue;
		memset(j, 0, sizeof(*j));
		memcpy(j->dir, kv[i].key, len - 4);
		rec = json_loadb(kv[i].value, kv[i].len, 0, NULL);
		j->id = (unsigned long)json_integer_value(json_object_get(rec, "id"));
		j->workers = (int)json_integer_value(json_object_get(rec, "workers"));
		names_of(json_object_get(rec, "nodes"), node, j);
		json_decref(rec);
		j->closed = true;
		for (unsigned int k = 1;; k++) {
			json_t *p;
			int have = 0;

			snprintf(key, sizeof(key), "%s/proposal/%u", j->dir, k);
			p = get_json(kv, n, key);
			if (p == NULL)
				break;
			snprintf(key, sizeof(key), "%s/abort/%u", j->dir, k);
			if (exists(kv, n, key)) {
				json_decref(p);
				continue;
			}
			for (int r = 0; r < j->workers; r++) {
				snprintf(key, sizeof(key), "%s/confirm/%u/%d", j->dir, k, r);
				have += exists(kv, n, key);
			}
			if (have == j->workers) {
				j->epoch = k;
				names_of(json_object_get(p, "nodes"), node, j);
			} else {
				j->pending = true;
			}
			json_decref(p);
			if (have != j->workers)
				break;
		}
		for (int r = 0; j->epoch > 0 && r < j->workers; r++) {
			snprintf(key, sizeof(key), "%s/done/%u/%d", j->dir, j->epoch, r);
			j->closed &= exists(kv, n, key);
		}
		cnt++;
	}
	sg_etcd_kvs_free(kv, n);
	return cnt;
}

static void print_jobs(const struct ejob *j, int n, bool json)
{
	if (json) {
		json_t *a = json_array();

		for (int i = 0; i < n; i++)
			json_array_append_new(a, json_pack("{s:I, s:i, s:i, s:s, s:b, s:b}", "id",
				(json_int_t)j[i].id, "workers", j[i].workers, "epoch", (int)j[i].epoch,
				"nodes", j[i].nodes, "pending", j[i].pending, "closed", j[i].closed));
		char *s = json_dumps(a, JSON_INDENT(2));

		printf("%s\n", s ? s : "[]");
		free(s);
		json_decref(a);
		return;
	}
	printf("%-10s %-7s %-6s %-8s %-7s %s\n", "JOB", "WORKERS", "EPOCH", "PENDING", "CLOSED",
	       "NODES");
	for (int i = 0; i < n; i++)
		printf("%-10lu %-7d %-6u %-8s %-7s %s\n", j[i].id, j[i].workers, j[i].epoch,
		       j[i].pending ? "yes" : "no", j[i].closed ? "yes" : "no", j[i].nodes);
}

int sigmactl_elastic(const struct sg_etcd_conf *ec, const char *cluster, int argc, char **argv,
		     bool json)
{
	const char *cmd = argv[0], *node = NULL;
	char prefix[128], key[256];
	struct ejob jobs[64];
	uint64_t timeout_ms = 60000, t0 = mono_ms();
	struct sg_etcd *e;
	int n, rc = 0;

	for (int i = 1; i < argc; i++) {
		uint64_t v;

		if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc &&
		    sg_parse_u64(argv[i + 1], 1, 86400, &v) == 0) {
			timeout_ms = v * 1000u;
			i++;
		} else if (node == NULL && argv[i][0] != '-') {
			node = argv[i];
		} else {
			fprintf(stderr, "sigmactl: %s: bad argument '%s'\n", cmd, argv[i]);
			return 2;
		}
	}
	if (strcmp(cmd, "elastic") != 0 && (node == NULL || strlen(node) >= SG_NAME_MAX)) {
		fprintf(stderr, "sigmactl: %s needs a node name\n", cmd);
		return 2;
	}
	if (sg_etcd_prefix(cluster, prefix, sizeof(prefix)) < 0) {
		fprintf(stderr, "sigmactl: bad cluster name '%s'\n", cluster);
		return 2;
	}
	e = sg_etcd_create(ec);
	if (e == NULL)
		return 2;
	if (strcmp(cmd, "elastic") == 0) {
		n = read_jobs(e, prefix, NULL, jobs, 64);
		if (n >= 0)
			print_jobs(jobs, n, json);
		else
			fprintf(stderr, "sigmactl: etcd: %s\n", sg_etcd_last_error(e));
		sg_etcd_destroy(e);
		return n < 0;
	}
	snprintf(key, sizeof(key), "%s/drain/%s", prefix, node);
	if (strcmp(cmd, "drain") == 0) {
		char v[160];

		snprintf(v, sizeof(v), "{\"name\":\"%s\",\"by\":\"sigmactl\"}", node);
		rc = sg_etcd_put(e, key, v, strlen(v), 0);
	} else {
		rc = sg_etcd_delete(e, key, false);
		rc = rc < 0 ? rc : 0;
	}
	if (rc < 0) {
		fprintf(stderr, "sigmactl: etcd: %s\n", sg_etcd_last_error(e));
		sg_etcd_destroy(e);
		return 1;
	}
	/* until every live job has taken it: drain, out of the node set and no session left
	 * that has it; undrain, back in the node set (if the node is registered) */
	for (;;) {
		struct sg_etcd_node nd[SG_MAX_NODES];
		int nn = sg_etcd_nodes_get(e, cluster, nd, SG_MAX_NODES, NULL);
		bool live = false, all = true;

		for (int i = 0; i < nn && i < SG_MAX_NODES; i++)
			live |= strcmp(nd[i].name, node) == 0;
		n = read_jobs(e, prefix, node, jobs, 64);
		for (int i = 0; i < n; i++)
			all &= strcmp(cmd, "drain") == 0 ? !jobs[i].has_node && jobs[i].closed
							 : !live || jobs[i].has_node;
		if (n >= 0 && nn >= 0 && all) {
			for (int i = 0; i < n; i++)
				printf("job %lu: epoch %u, nodes %s\n", jobs[i].id, jobs[i].epoch,
				       jobs[i].nodes);
			printf("node %s %s: %d elastic job(s)%s\n", node,
			       strcmp(cmd, "drain") == 0 ? "drained (it may stop now)" : "undrained",
			       n, strcmp(cmd, "undrain") == 0 && !live ?
			       "; it is not registered: a restart brings it back" : "");
			break;
		}
		if (mono_ms() - t0 > timeout_ms) {
			fprintf(stderr, "sigmactl: %s %s: not taken within %llu s by every job:\n", cmd,
				node, (unsigned long long)(timeout_ms / 1000));
			for (int i = 0; i < n; i++)
				fprintf(stderr, "  job %lu: epoch %u, nodes %s%s%s\n", jobs[i].id,
					jobs[i].epoch, jobs[i].nodes, jobs[i].pending ?
					", a proposal pending" : "", jobs[i].closed ? "" :
					", a rank still has an older session");
			rc = 1;
			break;
		}
		usleep(50000);
	}
	sg_etcd_destroy(e);
	return rc;
}
