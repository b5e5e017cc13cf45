/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control server's jobs: job_create (parameters, placement of the keys
 * on this node, the server's job table, the record in etcd), job_list,
 * job_destroy and job_placement, each registered beside it. The node's agent
 * makes and removes the job on its engines (struct sg_ctl_agent_ops).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "sg_auth.h"
#include "sg_ctl_rpc.h"
#include "sg_ctl_server_internal.h"

static int parse_tensors(json_t *arr, struct sg_ctl_tensor **out, uint32_t *n,
			 struct sg_rpc_err *err)
{
	size_t i, cnt = json_array_size(arr);
	struct sg_ctl_tensor *t;

	if (!json_is_array(arr) || cnt == 0 || cnt > SG_CTL_MAX_TENSORS)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: tensors must be an array of up to %d entries (none: an "
				   "open job)", SG_CTL_MAX_TENSORS);
	t = calloc(cnt, sizeof(*t));
	if (t == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	for (i = 0; i < cnt; i++) {
		const char *name = NULL;
		json_int_t elems = 0;
		json_error_t jerr;

		if (json_unpack_ex(json_array_get(arr, i), &jerr, JSON_STRICT, "{s?s, s:I}", "name",
				   &name, "elems", &elems) != 0) {
			free(t);
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: tensor %zu: %s",
					   i, jerr.text);
		}
		if (elems <= 0 || elems > (json_int_t)1 << 40) {
			free(t);
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: tensor %zu: elems must be 1..2^40", i);
		}
		if (name != NULL)
			snprintf(t[i].name, sizeof(t[i].name), "%s", name);
		else
			snprintf(t[i].name, sizeof(t[i].name), "t%zu", i);
		t[i].elems = (uint64_t)elems;
	}
	*out = t;
	*n = (uint32_t)cnt;
	return 0;
}

/* The job's summation nodes (job_create's "nodes"), every member checked. */
static int parse_nodes(json_t *arr, struct sg_ctl_place_node *nodes, double *w, bool *has_w,
		       struct sg_rpc_err *err)
{
	size_t i, cnt = json_array_size(arr);
	unsigned int n_w = 0;

	if (!json_is_array(arr) || cnt == 0 || cnt > SG_MAX_NODES)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: nodes must be an array of 1..%d entries", SG_MAX_NODES);
	for (i = 0; i < cnt; i++) {
		const char *name = NULL, *kind = "cpu";
		double gbps = 1, weight = -1;
		json_error_t jerr;

		if (json_unpack_ex(json_array_get(arr, i), &jerr, JSON_STRICT, "{s:s, s?s, s?F, s?F}",
				   "name", &name, "kind", &kind, "gbps", &gbps, "weight",
				   &weight) != 0)
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: nodes[%zu]: %s",
					   i, jerr.text);
		if (name[0] == '\0' || strlen(name) >= SG_NAME_MAX)
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: nodes[%zu]: name must be 1..%d characters", i,
					   SG_NAME_MAX - 1);
		for (size_t k = 0; k < i; k++)
			if (strcmp(nodes[k].name, name) == 0)
				return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
						   "invalid params: node '%s' is listed twice", name);
		nodes[i].name = name; /* points into params: valid for the call */
		nodes[i].alive = true;
		if (sg_node_kind_from_name(kind, &nodes[i].kind) != 0 || !(gbps > 0) ||
		    !isfinite(gbps))
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: nodes[%zu]: kind is cpu or gpu, gbps > 0", i);
		nodes[i].gbps = gbps;
		if (json_object_get(json_array_get(arr, i), "weight") != NULL) {
			if (!(weight >= 0) || !isfinite(weight))
				return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
						   "invalid params: nodes[%zu]: weight must be >= 0", i);
			w[i] = weight;
			n_w++;
		}
	}
	if (n_w == cnt) {
		double sum = 0;

		for (i = 0; i < cnt; i++)
			sum += w[i];
		if (!(sum > 0))
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: every node's weight is 0");
	}
	if (n_w != 0 && n_w != cnt)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: give every node a weight, or none (then the BytePS "
				   "split over their kinds and gbps)");
	*has_w = n_w != 0;
	return (int)cnt;
}

/*
 * The keys of @p job that node @p self of @p nodes holds (self < 0: a job of one
 * node, which holds them all), numbered and placed as libsigma does:
 * partition p of tensor t is key sg_wire_key(t, p), on node
 * sg_ctl_place_key(sg_ctl_partition_key(t, p)). @return the count, or -1 with err.
 */
static int place_keys(const struct sg_ctl_job *job, const struct sg_ctl_place_node *nodes,
		      const double *w, unsigned int n_nodes, int self, struct sg_ctl_key **out,
		      struct sg_rpc_err *err)
{
	uint64_t pelems = job->partition_bytes / sg_dtype_size(job->dtype), total = 0;
	struct sg_ctl_key *keys;
	uint32_t n = 0;

	for (uint32_t t = 0; t < job->n_tensors; t++) {
		uint64_t parts = (job->tensors[t].elems + pelems - 1) / pelems;

		if (parts > SG_MAX_PARTS)
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
					   "invalid params: tensor %u ('%s') has %" PRIu64 " partitions of %u "
					   "bytes: at most %d (raise partition_bytes)", t, job->tensors[t].name,
					   parts, job->partition_bytes, SG_MAX_PARTS);
		total += parts;
	}
	keys = calloc(total ? total : 1, sizeof(*keys));
	if (keys == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	for (uint32_t t = 0; t < job->n_tensors; t++)
		for (uint64_t off = 0, p = 0; off < job->tensors[t].elems; off += pelems, p++) {
			if (self >= 0 && sg_ctl_place_key(nodes, w, n_nodes,
							  sg_ctl_partition_key(t, (uint32_t)p)) != self)
				continue;
			keys[n].id = sg_wire_key(t, (uint32_t)p);
			keys[n++].nelem = (uint32_t)RTE_MIN(pelems, job->tensors[t].elems - off);
		}
	*out = keys;
	return (int)n;
}

/* A 64-hex-digit token (what job_create hands out) into @p out; -1 if it is not one. */
static int token_param(const char *tok, char out[SG_CTL_TOKEN_LEN])
{
	if (strlen(tok) != SG_CTL_TOKEN_LEN - 1 ||
	    strspn(tok, "0123456789abcdefABCDEF") != SG_CTL_TOKEN_LEN - 1)
		return -1;
	for (int i = 0; i < SG_CTL_TOKEN_LEN; i++)
		out[i] = (char)(tok[i] >= 'A' && tok[i] <= 'F' ? tok[i] | 0x20 : tok[i]);
	return 0;
}

/* This node's index in @p nodes (by its node_info name), or -1 with err. */
static int find_self(struct sg_ctl_server *s, const struct sg_ctl_place_node *nodes,
		     unsigned int n, struct sg_rpc_err *err)
{
	struct sg_ctl_node_info *ni;
	int self = -1;

	if (s->cfg.ops->node_info == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_NOT_SUPPORTED,
				   "this node's agent cannot tell its name: a job of several nodes "
				   "cannot be placed here");
	ni = calloc(1, sizeof(*ni));
	if (ni == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	if (s->cfg.ops->node_info(s->cfg.ops_arg, ni) == 0)
		for (unsigned int i = 0; i < n && self < 0; i++)
			if (strcmp(nodes[i].name, ni->name) == 0)
				self = (int)i;
	if (self < 0)
		sg_rpc_fail(err, SG_CTL_ERR_REFUSED,
			    "this node is '%.63s', which is not in the job's node list: list each node by "
			    "its [control] name", ni->name);
	free(ni);
	return self;
}

static int m_job_create(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct sg_rpc_err *err)
{
	const char *dtype = "fp32", *mode = "sync", *token = NULL, *auth = "none";
	json_int_t workers = 0, pbytes = SG_PARTITION_BYTES_DEFAULT, id = 0, chunk = 0, slots = -1;
	json_t *tensors = NULL, *jnodes = NULL;
	struct sg_ctl_job job = {0};
	struct sg_ctl_place_node nodes[SG_MAX_NODES];
	double w[SG_MAX_NODES];
	struct sg_ctl_key *keys = NULL;
	char reason[SG_CTL_REASON_MAX] = "";
	uint8_t tok[32];
	json_error_t jerr;
	struct srv_job *slot = NULL;
	bool has_w = false;
	int rc, n_nodes = 1, self = -1, n_keys;
	unsigned int i;

	NEED_OP(s, job_create, err);
	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT,
			   "{s:I, s?s, s?s, s?I, s?o, s?I, s?s, s?I, s?o, s?I, s?s}", "workers",
			   &workers, "dtype", &dtype, "mode", &mode, "partition_bytes", &pbytes,
			   "tensors", &tensors, "id", &id, "token", &token, "chunk_bytes", &chunk,
			   "nodes", &jnodes, "slots", &slots, "auth", &auth) != 0)
		return params ? sg_rpc_bad_params(err, &jerr)
			      : sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need workers");
	if (workers < 1 || workers > SG_MAX_WORKERS)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: workers must be 1..%d",
				   SG_MAX_WORKERS);
	/* no tensors, or none listed: an open job, whose pushes make its keys */
	job.open = tensors == NULL || (json_is_array(tensors) && json_array_size(tensors) == 0);
	if (sg_job_dtype_from_name(dtype, &job.dtype) != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: unknown dtype '%.16s'",
				   dtype);
	if (job.dtype == SG_DTYPE_ANY && !job.open)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: dtype any is for open "
				   "jobs (without tensors), whose keys each take the dtype of their first "
				   "push");
	if (slots != -1 && !job.open)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: slots is for open jobs "
				   "(without tensors); a job of tensors takes the slots of its chunks");
	if (slots != -1 && (slots < 1 || slots > SG_OPEN_SLOTS_MAX))
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: slots must be 1..%u "
				   "(chunk slots per engine)", SG_OPEN_SLOTS_MAX);
	if (strcmp(auth, "mac") != 0 && strcmp(auth, "none") != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: auth must be "
				   "\"mac\" (authenticated datagrams) or \"none\"");
	job.auth = strcmp(auth, "mac") == 0;
	if (sg_mode_from_name(mode, &job.mode) != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: mode must be sync, async or deterministic");
	/* an open job of dtype any: its largest element */
	if (pbytes < (json_int_t)(job.dtype == SG_DTYPE_ANY ? 8 : sg_dtype_size(job.dtype)) ||
	    pbytes > SG_MAX_PARTITION_BYTES)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: partition_bytes must be one element..4 MiB");
	if (id < 0 || id > UINT32_MAX)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: id must be 1..2^32-1");
	if (chunk < 0 || chunk > SG_MAX_CHUNK_BYTES || chunk % 8 != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: chunk_bytes must be a multiple of 8 in 8..%d (0: the "
				   "node's largest)", SG_MAX_CHUNK_BYTES);
	if (token != NULL && token_param(token, job.token) != 0)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
				   "invalid params: token must be 64 hex digits (as job_create returns it)");
	if (jnodes != NULL && (n_nodes = parse_nodes(jnodes, nodes, w, &has_w, err)) < 0)
		return -1;
	if (s->draining)
		return sg_rpc_fail(err, SG_CTL_ERR_REFUSED, "node is draining: no new jobs");
	for (i = 0; i < SG_CTL_MAX_JOBS && slot == NULL; i++)
		if (!s->jobs[i].used)
			slot = &s->jobs[i];
	if (slot == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_REFUSED, "too many jobs (max %d)", SG_CTL_MAX_JOBS);
	if (jnodes != NULL) {
		if (!has_w && sg_ctl_place_weights(nodes, (unsigned int)n_nodes, w) != 0)
			return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: bad node list");
		if ((self = find_self(s, nodes, (unsigned int)n_nodes, err)) < 0)
			return -1;
	}
	if (!job.open && parse_tensors(tensors, &slot->tensors, &job.n_tensors, err) != 0)
		return -1;
	job.n_workers = (uint32_t)workers;
	job.partition_bytes = (uint32_t)pbytes;
	job.tensors = slot->tensors;
	job.id = (uint32_t)id;
	job.chunk_bytes = (uint32_t)chunk;
	job.n_nodes = (uint32_t)n_nodes;
	job.slots = slots > 0 ? (uint32_t)slots : 0;
	/* an open job places nothing: each worker places its tensors' partitions itself */
	n_keys = job.open ? 0 : place_keys(&job, nodes, w, (unsigned int)n_nodes, self, &keys, err);
	if (n_keys < 0) {
		free(slot->tensors);
		slot->tensors = NULL;
		return -1;
	}
	job.keys = keys;
	job.n_keys = (uint32_t)n_keys;
	if (token == NULL) {
		randombytes_buf(tok, sizeof(tok));
		sodium_bin2hex(job.token, sizeof(job.token), tok, sizeof(tok));
	}
	/* every node of the job has the whole token: each derives the same MAC key */
	if (job.auth)
		sg_auth_job_key_from_token(job.token, job.auth_key);
	rc = s->cfg.ops->job_create(s->cfg.ops_arg, &job, reason);
	sodium_memzero(job.auth_key, sizeof(job.auth_key));
	free(keys);
	job.keys = NULL;
	if (rc != 0) {
		free(slot->tensors);
		slot->tensors = NULL;
		sodium_memzero(job.token, sizeof(job.token));
		return sg_rpc_fail_errno(err, "job create refused", rc, reason);
	}
	slot->used = true;
	slot->spec = job;
	memset(slot->spec.token, 0, sizeof(slot->spec.token)); /* only the job gets it */
	/* with etcd: the digest its record will hold, and its lease renewed from now */
	sg_ctl_cluster_job_made(s, slot, job.token);
	sg_ctl_cluster_reconcile(s);
	*res = json_pack("{s:I, s:s, s:I, s:s, s:s, s:I, s:I, s:o, s:I}", "id", (json_int_t)job.id,
			 "token", job.token, "workers", (json_int_t)job.n_workers, "dtype",
			 sg_dtype_name(job.dtype), "mode", sg_mode_name(job.mode),
			 "partition_bytes", (json_int_t)job.partition_bytes, "chunk_bytes",
			 (json_int_t)job.chunk_bytes, "keys",
			 job.open ? json_string("open") : json_integer((json_int_t)job.n_keys),
			 "nodes", (json_int_t)job.n_nodes);
	if (job.auth)
		json_object_set_new(*res, "auth", json_string("mac"));
	if (job.open) {
		json_object_set_new(*res, "slots", json_integer((json_int_t)job.slots));
		json_object_set_new(*res, "slots_budget", json_integer((json_int_t)job.slots_budget));
	}
	sodium_memzero(job.token, sizeof(job.token));
	return 0;
}
SG_RPC_REGISTER("job_create", m_job_create);

json_t *sg_ctl_srv_job_json(const struct sg_ctl_job *j)
{
	json_t *o = json_pack("{s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			      "s:I}", "id", (json_int_t)j->id,
			      "workers", (json_int_t)j->n_workers, "dtype", sg_dtype_name(j->dtype),
			      "mode", sg_mode_name(j->mode),
			      "partition_bytes", (json_int_t)j->partition_bytes, "chunk_bytes",
			      (json_int_t)j->chunk_bytes, "tensors", (json_int_t)j->n_tensors, "keys",
			      (json_int_t)j->n_keys, "nodes", (json_int_t)(j->n_nodes ? j->n_nodes : 1),
			      "rounds_completed",
			      (json_int_t)j->rounds_completed, "retransmits", (json_int_t)j->retransmits,
			      "incomplete", (json_int_t)j->incomplete, "nacks", (json_int_t)j->nacks,
			      "drops", (json_int_t)j->drops);

	json_object_set_new(o, "open", json_boolean(j->open));
	json_object_set_new(o, "bytes_pushed", json_integer((json_int_t)j->bytes_pushed));
	json_object_set_new(o, "slots_used", json_integer((json_int_t)j->slots_used));
	json_object_set_new(o, "slots_budget", json_integer((json_int_t)j->slots_budget));
	if (j->open)
		json_object_set_new(o, "slots", json_integer((json_int_t)j->slots));
	return o;
}

/*
 * Jobs from the agent into a malloc'd array, all of them (a node holds the
 * jobs of its config file besides the ones created here): the array grows
 * until the agent leaves room. @return count or -1 with err.
 */
int sg_ctl_srv_jobs(struct sg_ctl_server *s, struct sg_ctl_job **out, struct sg_rpc_err *err)
{
	struct sg_ctl_job *jobs = NULL;
	unsigned int cap = SG_CTL_MAX_JOBS;
	int n;

	for (;;) {
		struct sg_ctl_job *grown = realloc(jobs, cap * sizeof(*jobs));

		if (grown == NULL) {
			free(jobs);
			return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
		}
		jobs = grown;
		memset(jobs, 0, cap * sizeof(*jobs));
		n = s->cfg.ops->job_list(s->cfg.ops_arg, jobs, cap);
		if (n < 0) {
			free(jobs);
			return sg_rpc_fail_errno(err, "job list", n, NULL);
		}
		if ((unsigned int)n < cap || cap >= (1u << 20))
			break;
		cap *= 2;
	}
	*out = jobs;
	return n < (int)cap ? n : (int)cap;
}

static int m_job_list(struct sg_ctl_server *s, json_t *params, json_t **res,
		      struct sg_rpc_err *err)
{
	struct sg_ctl_job *jobs = NULL;
	json_t *arr;
	int i, n;

	if (sg_rpc_no_params(params, err))
		return -1;
	NEED_OP(s, job_list, err);
	n = sg_ctl_srv_jobs(s, &jobs, err);
	if (n < 0)
		return -1;
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(arr, sg_ctl_srv_job_json(&jobs[i]));
	free(jobs);
	*res = arr;
	return 0;
}
SG_RPC_REGISTER("job_list", m_job_list);

static int job_id_param(json_t *params, uint32_t *id, struct sg_rpc_err *err, const char *extra,
			int *flag)
{
	json_int_t v = -1;
	json_error_t jerr;
	int rc;

	if (params == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need id");
	if (extra != NULL)
		rc = json_unpack_ex(params, &jerr, JSON_STRICT, "{s:I, s?b}", "id", &v, extra, flag);
	else
		rc = json_unpack_ex(params, &jerr, JSON_STRICT, "{s:I}", "id", &v);
	if (rc != 0)
		return sg_rpc_bad_params(err, &jerr);
	if (v < 0 || v > UINT32_MAX)
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: bad id");
	*id = (uint32_t)v;
	return 0;
}

static struct srv_job *find_job(struct sg_ctl_server *s, uint32_t id)
{
	unsigned int i;

	for (i = 0; i < SG_CTL_MAX_JOBS; i++)
		if (s->jobs[i].used && s->jobs[i].spec.id == id)
			return &s->jobs[i];
	return NULL;
}

static int m_job_destroy(struct sg_ctl_server *s, json_t *params, json_t **res,
			 struct sg_rpc_err *err)
{
	struct srv_job *j;
	uint32_t id;
	int rc;

	NEED_OP(s, job_destroy, err);
	if (job_id_param(params, &id, err, NULL, NULL) != 0)
		return -1;
	rc = s->cfg.ops->job_destroy(s->cfg.ops_arg, id);
	if (rc != 0)
		return rc == -ENOENT ? sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND, "no such job: %" PRIu32, id)
				     : sg_rpc_fail_errno(err, "job destroy", rc, NULL);
	j = find_job(s, id);
	if (j != NULL) {
		free(j->tensors);
		memset(j, 0, sizeof(*j));
	}
	sg_ctl_cluster_reconcile(s); /* its record's lease is no longer renewed here */
	*res = json_true();
	return 0;
}
SG_RPC_REGISTER("job_destroy", m_job_destroy);

/* One rank's lateness as job_lateness gives it (docs/control.md). */
static json_t *late_rank_json(const struct sg_late *l, uint32_t r)
{
	const struct sg_late_rank *x = &l->rank[r];
	uint64_t pushes = sg_late_pushes(x);
	json_t *b = json_array();

	for (unsigned int i = 0; i < SG_LATE_BUCKETS; i++)
		json_array_append_new(b, json_integer((json_int_t)x->hist[i]));
	return json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:o}", "rank", (json_int_t)r,
			 "pushes", (json_int_t)pushes, "last", (json_int_t)x->last, "last_share",
			 l->rounds ? (double)x->last / (double)l->rounds : 0.0, "avg_us",
			 (double)x->avg_ns / 1e3, "mean_us",
			 pushes ? (double)x->sum_ns / (double)pushes / 1e3 : 0.0, "p50_us",
			 (double)sg_late_quantile_ns(x, 0.5) / 1e3, "p99_us",
			 (double)sg_late_quantile_ns(x, 0.99) / 1e3, "buckets", b);
}

static json_t *late_json(uint32_t id, const struct sg_late *l)
{
	int w = sg_late_straggler(l);
	json_t *ranks = json_array(), *strag = json_null();

	for (uint32_t r = 0; r < l->nranks && r < SG_MAX_WORKERS; r++)
		json_array_append_new(ranks, late_rank_json(l, r));
	if (w >= 0)
		strag = json_pack("{s:i, s:I, s:f, s:f}", "rank", w, "last",
				  (json_int_t)l->rank[w].last, "last_share",
				  (double)l->rank[w].last / (double)l->rounds, "avg_us",
				  (double)l->rank[w].avg_ns / 1e3);
	return json_pack("{s:I, s:I, s:I, s:o, s:o}", "id", (json_int_t)id, "workers",
			 (json_int_t)l->nranks, "rounds", (json_int_t)l->rounds, "straggler", strag,
			 "ranks", ranks);
}

static int m_job_lateness(struct sg_ctl_server *s, json_t *params, json_t **res,
			  struct sg_rpc_err *err)
{
	struct sg_late *l;
	uint32_t id;
	int rc;

	NEED_OP(s, job_lateness, err);
	if (job_id_param(params, &id, err, NULL, NULL) != 0)
		return -1;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	rc = s->cfg.ops->job_lateness(s->cfg.ops_arg, id, l);
	if (rc == 0)
		*res = late_json(id, l);
	free(l);
	if (rc != 0)
		return rc == -ENOENT ? sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND, "no such job: %" PRIu32, id)
				     : sg_rpc_fail_errno(err, "job lateness", rc, NULL);
	return 0;
}
SG_RPC_REGISTER("job_lateness", m_job_lateness);

static int m_job_placement(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct sg_rpc_err *err)
{
	struct sg_ctl_place_node *nodes = NULL;
	uint64_t *bytes = NULL, *parts = NULL;
	double *w = NULL;
	json_t *narr, *parr = NULL;
	struct srv_job *j;
	int detail = 0, nn, rc = -1;
	uint32_t id, t;
	size_t esz;

	if (job_id_param(params, &id, err, "detail", &detail) != 0)
		return -1;
	j = find_job(s, id);
	if (j == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND, "no such job: %" PRIu32, id);
	nn = (int)sg_ctl_members_list(s->members, NULL, 0);
	if (nn <= 0)
		return sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND,
				   "no summation node has sent a heartbeat: nothing to place on");
	nodes = calloc((size_t)nn, sizeof(*nodes));
	w = calloc((size_t)nn, sizeof(*w));
	bytes = calloc((size_t)nn, sizeof(*bytes));
	parts = calloc((size_t)nn, sizeof(*parts));
	if (nodes == NULL || w == NULL || bytes == NULL || parts == NULL) {
		sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
		goto out;
	}
	sg_ctl_members_place_nodes(s->members, nodes, (unsigned int)nn);
	if (sg_ctl_place_weights(nodes, (unsigned int)nn, w) != 0) {
		sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND, "no summation node is alive");
		goto out;
	}
	if (detail)
		parr = json_array();
	esz = sg_dtype_size(j->spec.dtype);
	for (t = 0; t < j->spec.n_tensors; t++) {
		uint64_t total = j->tensors[t].elems * esz, per = j->spec.partition_bytes / esz * esz;
		uint32_t p, np = (uint32_t)((total + per - 1) / per);

		for (p = 0; p < np; p++) {
			uint64_t key = sg_ctl_partition_key(t, p);
			uint64_t b = p + 1 < np ? per : total - per * p;
			int node = sg_ctl_place_key(nodes, w, (unsigned int)nn, key);

			bytes[node] += b;
			parts[node]++;
			if (parr != NULL)
				json_array_append_new(
					parr, json_pack("{s:I, s:I, s:I, s:s}", "tensor",
							(json_int_t)t, "part", (json_int_t)p,
							"bytes", (json_int_t)b, "node",
							nodes[node].name));
		}
	}
	narr = json_array();
	for (t = 0; t < (uint32_t)nn; t++)
		json_array_append_new(
			narr, json_pack("{s:s, s:s, s:b, s:f, s:I, s:I}", "name", nodes[t].name,
					"kind", sg_node_kind_name(nodes[t].kind), "alive",
					nodes[t].alive, "weight", w[t], "partitions",
					(json_int_t)parts[t], "bytes", (json_int_t)bytes[t]));
	*res = json_pack("{s:I, s:I, s:o}", "job", (json_int_t)id, "epoch",
			 (json_int_t)sg_ctl_members_epoch(s->members), "nodes", narr);
	if (parr != NULL)
		json_object_set_new(*res, "partitions", parr);
	rc = 0;
out:
	free(nodes);
	free(w);
	free(bytes);
	free(parts);
	return rc;
}
SG_RPC_REGISTER("job_placement", m_job_placement);

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Most keys one job_keys_add names: 4096 decimal keys fit the default 64 KiB frame. */
#define SG_CTL_KEYS_ADD_MAX 4096

/*
 * job_keys_add {id, keys: [key, ...]}: keys of fixed job id that this node is to sum
 * from now on, because an elastic job's switch moves them here (docs/cluster.md,
 * "Elastic jobs"): the agent's job_keys_add, which failover uses too. Each key is
 * checked against the job's own tensors (partition p of tensor t, t below its tensor
 * count, p below that tensor's partitions), and its size comes from them, so that no
 * request can give a key of another job, or another size, to a sum. Keys the job has
 * already are skipped (the answer's "added" counts the new ones).
 */
static int m_job_keys_add(struct sg_ctl_server *s, json_t *params, json_t **res,
			  struct sg_rpc_err *err)
{
	struct sg_ctl_key *keys = NULL;
	char reason[SG_CTL_REASON_MAX] = "";
	json_t *jkeys = NULL, *v;
	json_error_t jerr;
	json_int_t id = -1;
	struct srv_job *j;
	uint32_t *ids = NULL;
	struct timespec t0, t1;
	uint64_t pe, us;
	size_t i, n;
	int rc = -1;

	NEED_OP(s, job_keys_add, err);
	/* the control thread serves nothing else meanwhile: the checks and the agent's
	 * call timed (stats keys_add) */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (params == NULL || json_unpack_ex(params, &jerr, JSON_STRICT, "{s:I, s:o}", "id", &id,
					     "keys", &jkeys) != 0) {
		SRV_COUNT(s, keys_add_refused);
		return params == NULL ? sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS,
						    "invalid params: need id and keys")
				      : sg_rpc_bad_params(err, &jerr);
	}
	n = json_is_array(jkeys) ? json_array_size(jkeys) : 0;
	if (id < 1 || id > UINT32_MAX || n == 0 || n > SG_CTL_KEYS_ADD_MAX) {
		SRV_COUNT(s, keys_add_refused);
		return sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: id 1..2^32-1 and "
				   "keys, an array of 1..%d keys", SG_CTL_KEYS_ADD_MAX);
	}
	j = find_job(s, (uint32_t)id);
	if (j == NULL) {
		SRV_COUNT(s, keys_add_refused);
		return sg_rpc_fail(err, SG_CTL_ERR_NOT_FOUND, "no such job: %" PRId64 " (nothing "
				   "added)", (int64_t)id);
	}
	if (j->spec.open || j->spec.mode == SG_MODE_ASYNC) {
		SRV_COUNT(s, keys_add_refused);
		return sg_rpc_fail(err, SG_CTL_ERR_REFUSED, "job %" PRId64 ": %s (nothing added)",
				   (int64_t)id, j->spec.open ? "an open job makes its own keys" :
				   "an async job's stores live on their node only: its keys do not "
				   "move");
	}
	keys = calloc(n, sizeof(*keys));
	if (keys == NULL)
		return sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	pe = j->spec.partition_bytes / sg_dtype_size(j->spec.dtype);
	json_array_foreach(jkeys, i, v) {
		json_int_t k = json_is_integer(v) ? json_integer_value(v) : -1;
		uint32_t t = (uint32_t)k >> 16, p = (uint32_t)k & 0xffff;
		uint64_t parts = 0;

		if (k >= 0 && k <= UINT32_MAX && t < j->spec.n_tensors)
			parts = (j->tensors[t].elems + pe - 1) / pe;
		if (k < 0 || k > UINT32_MAX || t >= j->spec.n_tensors || p >= parts) {
			sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: keys[%zu] is not "
				    "a key of job %" PRId64 " (%" PRIu32 " tensor(s); a key is tensor << "
				    "16 | partition, below each tensor's partitions): nothing added", i,
				    (int64_t)id, j->spec.n_tensors);
			goto out;
		}
		keys[i] = (struct sg_ctl_key){.id = (uint32_t)k,
			.nelem = (uint32_t)(j->tensors[t].elems - p * pe < pe ?
					    j->tensors[t].elems - p * pe : pe)};
	}
	/* a key given twice: sorted ids, not each against the ones before (4096 keys took
	 * 7 ms of the control thread that way, against 0.7 ms for the agent's call) */
	ids = malloc(n * sizeof(*ids));
	if (ids == NULL) {
		sg_rpc_fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		ids[i] = keys[i].id;
	qsort(ids, n, sizeof(*ids), cmp_u32);
	for (i = 1; i < n; i++)
		if (ids[i] == ids[i - 1]) {
			sg_rpc_fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: key 0x%08" PRIx32
				    " given twice: nothing added", ids[i]);
			goto out;
		}
	rc = s->cfg.ops->job_keys_add(s->cfg.ops_arg, (uint32_t)id, keys, (uint32_t)n, reason);
	if (rc < 0) {
		rc = sg_rpc_fail_errno(err, "job keys add refused", rc, reason);
		goto out;
	}
	/* the keys it holds now: what a record's placement may give it (sg_ctl_cluster.c) */
	j->spec.n_keys += (uint32_t)rc;
	__atomic_fetch_add(&s->st.keys_add_requests, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->st.keys_add_added, (uint64_t)rc, __ATOMIC_RELAXED);
	SG_CTL_LOG(INFO, "job %" PRId64 ": %zu key(s) asked for (job_keys_add), %d new here",
		   (int64_t)id, n, rc);
	*res = json_pack("{s:I, s:I, s:I}", "id", (json_int_t)id, "keys", (json_int_t)n, "added",
			 (json_int_t)rc);
	rc = 0;
	/* the keys its record does not place here yet count as spare until it does */
	sg_ctl_cluster_reconcile(s);
out:
	if (rc < 0)
		SRV_COUNT(s, keys_add_refused);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	us = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
	__atomic_fetch_add(&s->st.keys_add_busy_us, us, __ATOMIC_RELAXED);
	if (us > __atomic_load_n(&s->st.keys_add_max_us, __ATOMIC_RELAXED))
		__atomic_store_n(&s->st.keys_add_max_us, us, __ATOMIC_RELAXED);
	free(ids);
	free(keys);
	return rc;
}
SG_RPC_REGISTER("job_keys_add", m_job_keys_add);
