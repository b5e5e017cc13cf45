/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl --etcd ... drain NODE | undrain NODE | elastic: a node taken out of
 * (or given back to) every elastic job of the cluster at an agreed round
 * (docs/cluster.md, "Elastic jobs"), and the jobs' node sets. The mark is
 * /sigma/<cluster>/drain/<NODE>; each job's rank 0 proposes the change and the
 * job's ranks agree on the round, so sigmactl only writes the mark and reads
 * the records until every job has taken it. With --propose, sigmactl also proposes
 * the change itself, as the job's proposer would (for jobs whose ranks do not
 * propose): the keys that move added to the nodes of a job of tensors first, and
 * the job's record rewritten once the proposal is committed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sg_ctl_client.h"
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
	unsigned int next_k;	/* the first proposal number not written yet */
	json_t *set;		/* the committed epoch's node set (its "nodes") */
	double weight;		/* NODE's weight in the newest epoch that had it (0: none) */
	char nodes[512];
};

/* --propose: what sigmactl needs to propose as the job's proposer does */
struct proposer {
	struct sg_etcd *e;
	const char *prefix, *cluster, *node;
	bool drain;
	const uint8_t *secret;
	size_t secret_len;
	uint64_t retry_at;	/* not before (ms): after a failed try */
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
	json_decref(j->set);
	j->set = json_incref(nodes);
	json_array_foreach(nodes, i, v) {
		const char *nm = json_string_value(json_object_get(v, "name"));

		if (nm == NULL)
			continue;
		if (node != NULL && strcmp(nm, node) == 0 &&
		    json_number_value(json_object_get(v, "weight")) > 0)
			j->weight = json_number_value(json_object_get(v, "weight"));
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
			j->next_k = k;
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

static void jobs_free(struct ejob *j, int n)
{
	for (int i = 0; i < n; i++) {
		json_decref(j[i].set);
		j[i].set = NULL;
	}
}

/* ---- --propose ---------------------------------------------------------------- */

/* Whether @p name has a drain mark among @p marks (the keys under @p dp). */
static bool marked(const struct sg_etcd_kv *marks, size_t n, const char *dp, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(marks[i].key + strlen(dp), name) == 0)
			return true;
	return false;
}

/* The node set to propose for job @p j, as the job's proposer makes it (docs/cluster.md,
 * rule 1), for NODE alone: the committed set without its nodes that are lost (no record
 * under the lease the set names) or drained; for undrain, NODE added (live) with the
 * weight it had in the job. NULL (the reason in @p why, empty when there is nothing to
 * propose) when sigmactl cannot make it: only the job's rank 0 has the token that
 * makes the job on a node that never held it. */
static json_t *next_set(const struct proposer *pr, const struct ejob *j,
			const struct sg_etcd_node *nd, int nn, const struct sg_etcd_kv *marks,
			size_t nmarks, const char *dp, char *why, size_t whylen)
{
	json_t *set = json_array(), *v;
	const struct sg_etcd_node *me = NULL;
	bool in = false;
	size_t i;

	why[0] = '\0';
	for (int k = 0; k < nn; k++)
		if (strcmp(nd[k].name, pr->node) == 0)
			me = &nd[k];
	json_array_foreach(j->set, i, v) {
		const char *nm = json_string_value(json_object_get(v, "name"));
		json_int_t lease = json_integer_value(json_object_get(v, "lease"));
		bool live = false;

		for (int k = 0; nm != NULL && k < nn; k++)
			live |= strcmp(nd[k].name, nm) == 0 && nd[k].lease == lease;
		if (nm != NULL && strcmp(nm, pr->node) == 0)
			in = live;
		if (live && !marked(marks, nmarks, dp, nm))
			json_array_append(set, v);
	}
	/* nothing of NODE's to propose: losses alone are failover's, as for the job's proposer */
	if (pr->drain ? !in || !marked(marks, nmarks, dp, pr->node)
		      : in || me == NULL || marked(marks, nmarks, dp, pr->node)) {
		json_decref(set);
		return NULL;
	}
	if (!pr->drain && !(j->weight > 0)) {
		snprintf(why, whylen, "%s was never in job %lu: only its rank 0 can make the job "
			 "there (sigmactl has not its token)", pr->node, j->id);
		json_decref(set);
		return NULL;
	}
	if (!pr->drain)
		json_array_append_new(set, json_pack("{s:s, s:s, s:f, s:f, s:s, s:i, s:I, s:s}",
			"name", me->name, "kind", sg_node_kind_name(me->kind), "gbps", me->gbps,
			"weight", j->weight, "addr", me->addr, "port", (int)me->port, "lease",
			(json_int_t)me->lease, "control", me->control));
	if (json_array_size(set) == 0) {
		snprintf(why, whylen, "job %lu would have no node left", j->id);
		json_decref(set);
		return NULL;
	}
	return set;
}

/* Job @p j's record of tensors (/jobs/<id>, with the digest of J's tag), into @p r.
 * @return 1, 0 (an open job, or no record of this job: no keys to add), -errno. */
static int read_rec(const struct proposer *pr, const struct ejob *j, struct sg_etcd_job *r)
{
	struct sg_etcd_kv *kv = NULL;
	const char *tag = strrchr(j->dir, '.');
	char key[200];
	size_t n = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/jobs/%lu", pr->prefix, j->id);
	rc = sg_etcd_get_prefix(pr->e, key, &kv, &n, NULL);
	if (rc < 0)
		return rc;
	rc = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0 && tag != NULL &&
		    sg_etcd_job_parse(kv[i].key, kv[i].value, kv[i].len, r, NULL, NULL, 0) == 0 &&
		    !r->open && strncmp(r->token_digest, tag + 1, 16) == 0)
			rc = 1;
	sg_etcd_kvs_free(kv, n);
	return rc;
}

/* @p r with node set @p set (names, kinds, rates and weights). */
static void rec_set(struct sg_etcd_job *r, json_t *set)
{
	size_t i;
	json_t *v;

	r->n_nodes = 0;
	json_array_foreach(set, i, v) {
		struct sg_etcd_job_node *x = &r->nodes[r->n_nodes];

		if (r->n_nodes >= SG_MAX_NODES)
			break;
		memset(x, 0, sizeof(*x));
		snprintf(x->name, sizeof(x->name), "%s",
			 json_string_value(json_object_get(v, "name")) ?: "");
		x->kind = strcmp(json_string_value(json_object_get(v, "kind")) ?: "", "gpu") == 0 ?
			  SG_NODE_GPU : SG_NODE_CPU;
		x->gbps = json_number_value(json_object_get(v, "gbps"));
		x->weight = json_number_value(json_object_get(v, "weight"));
		r->n_nodes++;
	}
}

/* One control call to node @p nd (its "control" endpoint), with @p params (taken; NULL:
 * none). @return 0 or -errno, the node's message in @p msg (free() it). */
static int call_node(const struct proposer *pr, json_t *nd, const char *method, json_t *params,
		     char **res, char **msg)
{
	const char *ctl = json_string_value(json_object_get(nd, "control"));
	char *p = params ? json_dumps(params, JSON_COMPACT) : NULL;
	struct sg_ctl_client *cl = NULL;
	int rc;

	json_decref(params);
	if (ctl != NULL && ctl[0] != '\0')
		cl = sg_ctl_client_connect(ctl, pr->secret_len ? pr->secret : NULL,
					   pr->secret_len, 5000);
	if ((params != NULL && p == NULL) || cl == NULL) {
		char m[320];

		snprintf(m, sizeof(m), "cannot reach its control endpoint '%s'%s%s", ctl ? ctl : "",
			 ctl && ctl[0] ? ": " : " (none in its record)",
			 ctl && ctl[0] ? strerror(errno) : "");
		*msg = strdup(m);
		free(p);
		sg_ctl_client_close(cl);
		return cl != NULL ? -ENOMEM : -ENOTCONN;
	}
	rc = sg_ctl_client_call(cl, method, p, res, msg);
	sg_ctl_client_close(cl);
	free(p);
	return rc;
}

/* Give node set[@p i] the keys of job @p r (over the new set) that placement gives it,
 * 4096 a request, as the job's proposer does. @return 0 or -errno (said on stderr). */
static int keys_on(const struct proposer *pr, const struct sg_etcd_job *r, json_t *set,
		   unsigned int i)
{
	const char *nm = json_string_value(json_object_get(json_array_get(set, i), "name"));
	long nk = sg_etcd_job_keys(r, NULL, i, NULL, 0), added = 0;
	struct sg_etcd_key *k = nk > 0 ? calloc((size_t)nk, sizeof(*k)) : NULL;
	int rc = 0;

	if (nk <= 0 || k == NULL) {
		free(k);
		return nk < 0 ? (int)nk : nk == 0 ? 0 : -ENOMEM;
	}
	sg_etcd_job_keys(r, NULL, i, k, (size_t)nk);
	for (long at = 0; at < nk && rc == 0; at += 4096) {
		json_t *ks = json_array(), *rj;
		char *res = NULL, *msg = NULL;

		for (long x = at; x < nk && x < at + 4096; x++)
			json_array_append_new(ks, json_integer(k[x].id));
		rc = call_node(pr, json_array_get(set, i), "job_keys_add",
			       json_pack("{s:I, s:o}", "id", (json_int_t)r->id, "keys", ks), &res,
			       &msg);
		rj = res ? json_loads(res, 0, NULL) : NULL;
		added += json_integer_value(json_object_get(rj, "added"));
		if (rc != 0)
			fprintf(stderr, "sigmactl: job %u: node %s refused the keys that move there "
				"(job_keys_add): %s\n", r->id, nm, msg ? msg : strerror(-rc));
		json_decref(rj);
		free(res);
		free(msg);
	}
	free(k);
	if (rc == 0 && added > 0)
		printf("job %u: node %s: %ld key(s) of its %ld in the proposed node set added "
		       "there\n", r->id, nm, added, nk);
	return rc;
}

/* Whether node @p nd holds job @p id (job_list): a node that comes back must have kept it. */
static int holds_job(const struct proposer *pr, json_t *nd, unsigned long id)
{
	char *res = NULL, *msg = NULL;
	int rc = call_node(pr, nd, "job_list", NULL, &res, &msg);
	json_t *a = rc == 0 && res ? json_loads(res, 0, NULL) : NULL, *v;
	size_t i;

	if (rc != 0)
		fprintf(stderr, "sigmactl: node %s: job_list: %s\n",
			json_string_value(json_object_get(nd, "name")), msg ? msg : strerror(-rc));
	rc = rc != 0 ? rc : -ENOENT;
	json_array_foreach(a, i, v)
		if ((unsigned long)json_integer_value(json_object_get(v, "id")) == id)
			rc = 0;
	json_decref(a);
	free(res);
	free(msg);
	return rc;
}

/* --propose, for job @p j (no proposal pending): propose the change as its proposer does
 * (docs/cluster.md, rule 1): for a job of tensors, every node of the new set given its keys
 * first; then proposal next_k, in a transaction (absent). @return 1 proposed, 0 nothing
 * to propose (or another writer's first), -errno (said on stderr; tried again later). */
static int propose_for(struct proposer *pr, const struct ejob *j, const struct sg_etcd_node *nd,
		       int nn, const struct sg_etcd_kv *marks, size_t nmarks, const char *dp)
{
	struct sg_etcd_job *r = malloc(sizeof(*r));
	char why[256], key[300], *val;
	json_t *pj, *set = next_set(pr, j, nd, nn, marks, nmarks, dp, why, sizeof(why));
	int rc = 0, fixed = 0;

	if (set == NULL || r == NULL) {
		if (why[0])
			fprintf(stderr, "sigmactl: job %lu: not proposed: %s\n", j->id, why);
		free(r);
		json_decref(set);
		return set == NULL && why[0] == '\0' ? 0 : -EINVAL;
	}
	if (!pr->drain)
		rc = holds_job(pr, json_array_get(set, json_array_size(set) - 1), j->id);
	if (rc == -ENOENT)
		fprintf(stderr, "sigmactl: job %lu: not proposed: node %s no longer holds it (only "
			"its rank 0 can make it there)\n", j->id, pr->node);
	if (rc == 0)
		rc = fixed = read_rec(pr, j, r);
	if (fixed == 1) {
		rec_set(r, set);
		for (unsigned int i = 0; i < json_array_size(set) && rc >= 0; i++)
			rc = keys_on(pr, r, set, i);
	}
	free(r);
	if (rc < 0) {
		json_decref(set);
		return rc;
	}
	snprintf(why, sizeof(why), "%s %s", pr->drain ? "drain" : "join", pr->node);
	snprintf(key, sizeof(key), "%.255s/proposal/%u", j->dir, j->next_k);
	pj = json_pack("{s:I, s:i, s:I, s:s, s:s, s:o}", "epoch", (json_int_t)j->next_k,
		       "workers", j->workers, "margin", (json_int_t)4, "by", "sigmactl", "why", why,
		       "nodes", set);
	val = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
	json_decref(pj);
	rc = val ? sg_etcd_put_if_absent(pr->e, key, val, strlen(val), 0, NULL, 0) : -ENOMEM;
	free(val);
	if (rc == 1)
		printf("job %lu: proposed epoch %u: %s\n", j->id, j->next_k, why);
	else if (rc < 0)
		fprintf(stderr, "sigmactl: job %lu: etcd: %s\n", j->id, sg_etcd_last_error(pr->e));
	return rc;
}

/* --propose, job @p j of tensors: its record names the committed node set (and weights),
 * so that a node's failover builds the current placement's keys, as the job's proposer
 * rewrites it. @return 0 or -errno. */
static int rewrite_rec(const struct proposer *pr, const struct ejob *j)
{
	struct sg_etcd_job *r = malloc(sizeof(*r)), want;
	char key[200], *val = NULL;
	int rc, len;

	rc = r ? read_rec(pr, j, r) : -ENOMEM;
	if (rc == 1) {
		want = *r;
		rec_set(&want, j->set);
		rc = 0;
		bool same = want.n_nodes == r->n_nodes;

		for (uint32_t i = 0; same && i < want.n_nodes; i++)
			same = strcmp(want.nodes[i].name, r->nodes[i].name) == 0 &&
			       want.nodes[i].weight == r->nodes[i].weight;
		if (!same) {
			snprintf(key, sizeof(key), "%s/jobs/%lu", pr->prefix, j->id);
			len = sg_etcd_job_format(&want, &val);
			rc = len < 0 ? len : sg_etcd_put(pr->e, key, val, (size_t)len, r->lease);
			if (rc == 0)
				printf("job %lu: record %s rewritten for epoch %u (%u node(s))\n",
				       j->id, key, j->epoch, want.n_nodes);
		}
	}
	free(val);
	free(r);
	return rc < 0 ? rc : 0;
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

/* --propose: each job that has not taken the change and has no proposal pending gets one
 * (a try that failed waits a second); each job of tensors that has taken it gets its record
 * rewritten. */
static void propose_all(struct proposer *pr, const struct ejob *jobs, int n,
			const struct sg_etcd_node *nd, int nn, const char *dp)
{
	struct sg_etcd_kv *marks = NULL;
	size_t nm = 0;
	bool failed = false;

	if (sg_etcd_get_prefix(pr->e, dp, &marks, &nm, NULL) < 0)
		return;
	for (int i = 0; i < n; i++) {
		const struct ejob *j = &jobs[i];

		if (j->has_node != pr->drain || j->pending) {
			if (j->has_node != pr->drain && j->epoch > 0 && rewrite_rec(pr, j) < 0)
				fprintf(stderr, "sigmactl: job %lu: record not rewritten: %s\n",
					j->id, sg_etcd_last_error(pr->e));
			continue;
		}
		if (mono_ms() >= pr->retry_at)
			failed |= propose_for(pr, j, nd, nn, marks, nm, dp) < 0;
	}
	if (failed)
		pr->retry_at = mono_ms() + 1000;
	sg_etcd_kvs_free(marks, nm);
}

int sigmactl_elastic(const struct sg_etcd_conf *ec, const char *cluster, int argc, char **argv,
		     bool json, const uint8_t *secret, size_t secret_len)
{
	const char *cmd = argv[0], *node = NULL;
	char prefix[128], key[256], dp[160];
	static struct ejob jobs[64];
	uint64_t timeout_ms = 60000, t0 = mono_ms();
	struct proposer pr = {.secret = secret, .secret_len = secret_len};
	bool propose = false;
	struct sg_etcd *e;
	int n, rc = 0;

	for (int i = 1; i < argc; i++) {
		uint64_t v;

		if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc &&
		    sg_parse_u64(argv[i + 1], 1, 86400, &v) == 0) {
			timeout_ms = v * 1000u;
			i++;
		} else if (strcmp(argv[i], "--propose") == 0 && strcmp(cmd, "elastic") != 0) {
			propose = true;
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
		jobs_free(jobs, n);
		sg_etcd_destroy(e);
		return n < 0;
	}
	pr = (struct proposer){.e = e, .prefix = prefix, .cluster = cluster, .node = node,
			       .drain = strcmp(cmd, "drain") == 0, .secret = secret,
			       .secret_len = secret_len};
	snprintf(dp, sizeof(dp), "%s/drain/", prefix);
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
		if (propose && n > 0 && nn >= 0)
			propose_all(&pr, jobs, n, nd, nn, dp);
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
		jobs_free(jobs, n);
		usleep(50000);
	}
	jobs_free(jobs, n);
	sg_etcd_destroy(e);
	return rc;
}
