/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * JSON-RPC methods of the control server and the Prometheus text it serves.
 * Every method validates its params strictly (unknown members are refused)
 * before the agent sees anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sg_ctl_server_internal.h"
#include "sg_parse.h"
#include "sg_version.h"


static int fail(struct rpc_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct rpc_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* Map an agent's -errno to a JSON-RPC error; @p reason (may be empty) wins. */
static int agent_fail(struct rpc_err *err, const char *what, int rc, const char *reason)
{
	int code = rc == -ENOENT	? SG_CTL_ERR_NOT_FOUND
		   : rc == -ENOTSUP ? SG_CTL_ERR_NOT_SUPPORTED
				    : SG_CTL_ERR_REFUSED;

	if (reason != NULL && reason[0] != '\0')
		return fail(err, code, "%s: %s", what, reason);
	return fail(err, code, "%s: %s", what, strerror(-rc));
}

static int bad_params(struct rpc_err *err, const json_error_t *jerr)
{
	return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: %s", jerr->text);
}

#define NEED_OP(s, op, err)                                                                 \
	do {                                                                                \
		if ((s)->cfg.ops->op == NULL)                                               \
			return fail(err, SG_CTL_ERR_NOT_SUPPORTED,                          \
				    "not supported by this node's agent");                  \
	} while (0)

/* Number of members of an array or object. */
static size_t json_size(const json_t *j)
{
	return json_is_array(j) ? json_array_size(j) : json_is_object(j) ? json_object_size(j) : 0;
}

/* Methods take no params unless they say so: refuse anything but {} / [] / absent. */
static int no_params(json_t *params, struct rpc_err *err)
{
	if (params != NULL && json_size(params) != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: this method takes none");
	return 0;
}


const char *sg_ctl_role_name(enum sg_role role)
{
	switch (role) {
	case SG_ROLE_IO:
		return "io";
	case SG_ROLE_REDUCE:
		return "reducer";
	case SG_ROLE_RTC:
		return "rtc";
	case SG_ROLE_CONTROL:
		return "control";
	}
	return "unknown";
}

/* ---- node ---------------------------------------------------------------- */

static int m_node_info(struct sg_ctl_server *s, json_t *params, json_t **res,
		       struct rpc_err *err)
{
	struct sg_ctl_node_info *ni;
	json_t *ports, *red;
	unsigned int i;
	int rc;

	if (no_params(params, err))
		return -1;
	NEED_OP(s, node_info, err);
	ni = calloc(1, sizeof(*ni));
	if (ni == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	rc = s->cfg.ops->node_info(s->cfg.ops_arg, ni);
	if (rc != 0) {
		free(ni);
		return agent_fail(err, "node info", rc, NULL);
	}
	ports = json_array();
	for (i = 0; i < ni->n_ports && i < SG_CTL_MAX_PORTS; i++)
		json_array_append_new(ports, json_pack("{s:s, s:I, s:i}", "name", ni->ports[i].name,
						       "speed_mbps",
						       (json_int_t)ni->ports[i].speed_mbps, "numa",
						       ni->ports[i].numa));
	red = json_array();
	for (i = 0; i < ni->n_reducers && i < SG_CTL_MAX_LCORES; i++)
		json_array_append_new(red, json_integer(ni->reducer_lcores[i]));
	*res = json_pack("{s:s, s:I, s:I, s:o, s:o, s:b, s:s, s:I, s:s, s:f, s:I}", "name",
			 ni->name, "cores", (json_int_t)ni->n_cores, "numa_nodes",
			 (json_int_t)ni->n_numa, "ports", ports, "reducer_lcores", red, "draining",
			 ni->draining || s->draining, "addr", ni->addr, "udp_port",
			 (json_int_t)ni->udp_port, "kind", sg_node_kind_name(ni->kind), "gbps",
			 ni->gbps, "max_chunk_bytes", (json_int_t)ni->max_chunk_bytes);
	free(ni);
	return 0;
}

static int m_node_heartbeat(struct sg_ctl_server *s, json_t *params, json_t **res,
			    struct rpc_err *err)
{
	const char *name = NULL, *kind = "cpu";
	double gbps = 0;
	enum sg_node_kind k;
	json_error_t jerr;
	int rc;

	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s:s, s?s, s:F}", "name", &name, "kind",
			   &kind, "gbps", &gbps) != 0)
		return params ? bad_params(err, &jerr)
			      : fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need name, gbps");
	if (sg_node_kind_from_name(kind, &k) != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: kind must be cpu or gpu");
	rc = sg_ctl_members_heartbeat(s->members, name, k, gbps, sg_ctl_now_ns());
	if (rc != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: %s", rc == -ENOSPC ? "too many nodes"
					    : "name must be 1..63 chars, gbps > 0");
	*res = json_pack("{s:I}", "epoch", (json_int_t)sg_ctl_members_epoch(s->members));
	return 0;
}

static int m_nodes_list(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct rpc_err *err)
{
	struct sg_ctl_member *mem;
	unsigned int i, n;
	uint64_t now = sg_ctl_now_ns();
	json_t *arr;

	if (no_params(params, err))
		return -1;
	n = sg_ctl_members_list(s->members, NULL, 0);
	mem = calloc(n ? n : 1, sizeof(*mem));
	if (mem == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	sg_ctl_members_list(s->members, mem, n);
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:f, s:b, s:I}", "name", mem[i].name, "kind",
				       sg_node_kind_name(mem[i].kind), "gbps", mem[i].gbps,
				       "alive", mem[i].alive, "last_heartbeat_ms",
				       (json_int_t)((now - mem[i].last_heartbeat_ns) / 1000000)));
	free(mem);
	*res = json_pack("{s:I, s:o}", "epoch", (json_int_t)sg_ctl_members_epoch(s->members),
			 "nodes", arr);
	return 0;
}

static int m_node_remove(struct sg_ctl_server *s, json_t *params, json_t **res,
			 struct rpc_err *err)
{
	const char *name;
	json_error_t jerr;

	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s:s}", "name", &name) != 0)
		return params ? bad_params(err, &jerr)
			      : fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need name");
	if (sg_ctl_members_remove(s->members, name) != 0)
		return fail(err, SG_CTL_ERR_NOT_FOUND, "no such node: %.63s", name);
	*res = json_true();
	return 0;
}

/* ---- jobs ---------------------------------------------------------------- */

static int parse_tensors(json_t *arr, struct sg_ctl_tensor **out, uint32_t *n,
			 struct rpc_err *err)
{
	size_t i, cnt = json_array_size(arr);
	struct sg_ctl_tensor *t;

	if (!json_is_array(arr) || cnt == 0 || cnt > SG_CTL_MAX_TENSORS)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: tensors must be an array of up to %d entries (none: an "
			    "open job)", SG_CTL_MAX_TENSORS);
	t = calloc(cnt, sizeof(*t));
	if (t == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	for (i = 0; i < cnt; i++) {
		const char *name = NULL;
		json_int_t elems = 0;
		json_error_t jerr;

		if (json_unpack_ex(json_array_get(arr, i), &jerr, JSON_STRICT, "{s?s, s:I}", "name",
				   &name, "elems", &elems) != 0) {
			free(t);
			return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: tensor %zu: %s",
				    i, jerr.text);
		}
		if (elems <= 0 || elems > (json_int_t)1 << 40) {
			free(t);
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
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
		       struct rpc_err *err)
{
	size_t i, cnt = json_array_size(arr);
	unsigned int n_w = 0;

	if (!json_is_array(arr) || cnt == 0 || cnt > SG_MAX_NODES)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: nodes must be an array of 1..%d entries", SG_MAX_NODES);
	for (i = 0; i < cnt; i++) {
		const char *name = NULL, *kind = "cpu";
		double gbps = 1, weight = -1;
		json_error_t jerr;

		if (json_unpack_ex(json_array_get(arr, i), &jerr, JSON_STRICT, "{s:s, s?s, s?F, s?F}",
				   "name", &name, "kind", &kind, "gbps", &gbps, "weight",
				   &weight) != 0)
			return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: nodes[%zu]: %s",
				    i, jerr.text);
		if (name[0] == '\0' || strlen(name) >= SG_NAME_MAX)
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: nodes[%zu]: name must be 1..%d characters", i,
				    SG_NAME_MAX - 1);
		for (size_t k = 0; k < i; k++)
			if (strcmp(nodes[k].name, name) == 0)
				return fail(err, SG_CTL_ERR_INVALID_PARAMS,
					    "invalid params: node '%s' is listed twice", name);
		nodes[i].name = name; /* points into params: valid for the call */
		nodes[i].alive = true;
		if (sg_node_kind_from_name(kind, &nodes[i].kind) != 0 || !(gbps > 0) ||
		    !isfinite(gbps))
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: nodes[%zu]: kind is cpu or gpu, gbps > 0", i);
		nodes[i].gbps = gbps;
		if (json_object_get(json_array_get(arr, i), "weight") != NULL) {
			if (!(weight >= 0) || !isfinite(weight))
				return fail(err, SG_CTL_ERR_INVALID_PARAMS,
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
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: every node's weight is 0");
	}
	if (n_w != 0 && n_w != cnt)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
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
		      struct rpc_err *err)
{
	uint64_t pelems = job->partition_bytes / sg_dtype_size(job->dtype), total = 0;
	struct sg_ctl_key *keys;
	uint32_t n = 0;

	for (uint32_t t = 0; t < job->n_tensors; t++) {
		uint64_t parts = (job->tensors[t].elems + pelems - 1) / pelems;

		if (parts > SG_MAX_PARTS)
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: tensor %u ('%s') has %" PRIu64 " partitions of %u "
				    "bytes: at most %d (raise partition_bytes)", t, job->tensors[t].name,
				    parts, job->partition_bytes, SG_MAX_PARTS);
		total += parts;
	}
	keys = calloc(total ? total : 1, sizeof(*keys));
	if (keys == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
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
		     unsigned int n, struct rpc_err *err)
{
	struct sg_ctl_node_info *ni;
	int self = -1;

	if (s->cfg.ops->node_info == NULL)
		return fail(err, SG_CTL_ERR_NOT_SUPPORTED,
			    "this node's agent cannot tell its name: a job of several nodes "
			    "cannot be placed here");
	ni = calloc(1, sizeof(*ni));
	if (ni == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	if (s->cfg.ops->node_info(s->cfg.ops_arg, ni) == 0)
		for (unsigned int i = 0; i < n && self < 0; i++)
			if (strcmp(nodes[i].name, ni->name) == 0)
				self = (int)i;
	if (self < 0)
		fail(err, SG_CTL_ERR_REFUSED,
		     "this node is '%.63s', which is not in the job's node list: list each node by "
		     "its [control] name", ni->name);
	free(ni);
	return self;
}

static int m_job_create(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct rpc_err *err)
{
	const char *dtype = "fp32", *mode = "sync", *token = NULL;
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
			   "{s:I, s?s, s?s, s?I, s?o, s?I, s?s, s?I, s?o, s?I}", "workers", &workers,
			   "dtype", &dtype, "mode", &mode, "partition_bytes", &pbytes, "tensors",
			   &tensors, "id", &id, "token", &token, "chunk_bytes", &chunk, "nodes",
			   &jnodes, "slots", &slots) != 0)
		return params ? bad_params(err, &jerr)
			      : fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need workers");
	if (workers < 1 || workers > SG_MAX_WORKERS)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: workers must be 1..%d",
			    SG_MAX_WORKERS);
	/* no tensors, or none listed: an open job, whose pushes make its keys */
	job.open = tensors == NULL || (json_is_array(tensors) && json_array_size(tensors) == 0);
	if (sg_job_dtype_from_name(dtype, &job.dtype) != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: unknown dtype '%.16s'",
			    dtype);
	if (job.dtype == SG_DTYPE_ANY && !job.open)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: dtype any is for open "
			    "jobs (without tensors), whose keys each take the dtype of their first "
			    "push");
	if (slots != -1 && !job.open)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: slots is for open jobs "
			    "(without tensors); a job of tensors takes the slots of its chunks");
	if (slots != -1 && (slots < 1 || slots > SG_OPEN_SLOTS_MAX))
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: slots must be 1..%u "
			    "(chunk slots per engine)", SG_OPEN_SLOTS_MAX);
	if (sg_mode_from_name(mode, &job.mode) != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: mode must be sync, async or deterministic");
	/* an open job of dtype any: its largest element */
	if (pbytes < (json_int_t)(job.dtype == SG_DTYPE_ANY ? 8 : sg_dtype_size(job.dtype)) ||
	    pbytes > SG_MAX_PARTITION_BYTES)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: partition_bytes must be one element..4 MiB");
	if (id < 0 || id > UINT32_MAX)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: id must be 1..2^32-1");
	if (chunk < 0 || chunk > SG_MAX_CHUNK_BYTES || chunk % 8 != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: chunk_bytes must be a multiple of 8 in 8..%d (0: the "
			    "node's largest)", SG_MAX_CHUNK_BYTES);
	if (token != NULL && token_param(token, job.token) != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: token must be 64 hex digits (as job_create returns it)");
	if (jnodes != NULL && (n_nodes = parse_nodes(jnodes, nodes, w, &has_w, err)) < 0)
		return -1;
	if (s->draining)
		return fail(err, SG_CTL_ERR_REFUSED, "node is draining: no new jobs");
	for (i = 0; i < SG_CTL_MAX_JOBS && slot == NULL; i++)
		if (!s->jobs[i].used)
			slot = &s->jobs[i];
	if (slot == NULL)
		return fail(err, SG_CTL_ERR_REFUSED, "too many jobs (max %d)", SG_CTL_MAX_JOBS);
	if (jnodes != NULL) {
		if (!has_w && sg_ctl_place_weights(nodes, (unsigned int)n_nodes, w) != 0)
			return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: bad node list");
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
	rc = s->cfg.ops->job_create(s->cfg.ops_arg, &job, reason);
	free(keys);
	job.keys = NULL;
	if (rc != 0) {
		free(slot->tensors);
		slot->tensors = NULL;
		sodium_memzero(job.token, sizeof(job.token));
		return agent_fail(err, "job create refused", rc, reason);
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
	if (job.open) {
		json_object_set_new(*res, "slots", json_integer((json_int_t)job.slots));
		json_object_set_new(*res, "slots_budget", json_integer((json_int_t)job.slots_budget));
	}
	sodium_memzero(job.token, sizeof(job.token));
	return 0;
}

static json_t *job_json(const struct sg_ctl_job *j)
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
static int get_jobs(struct sg_ctl_server *s, struct sg_ctl_job **out, struct rpc_err *err)
{
	struct sg_ctl_job *jobs = NULL;
	unsigned int cap = SG_CTL_MAX_JOBS;
	int n;

	for (;;) {
		struct sg_ctl_job *grown = realloc(jobs, cap * sizeof(*jobs));

		if (grown == NULL) {
			free(jobs);
			return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
		}
		jobs = grown;
		memset(jobs, 0, cap * sizeof(*jobs));
		n = s->cfg.ops->job_list(s->cfg.ops_arg, jobs, cap);
		if (n < 0) {
			free(jobs);
			return agent_fail(err, "job list", n, NULL);
		}
		if ((unsigned int)n < cap || cap >= (1u << 20))
			break;
		cap *= 2;
	}
	*out = jobs;
	return n < (int)cap ? n : (int)cap;
}

static int m_job_list(struct sg_ctl_server *s, json_t *params, json_t **res,
		      struct rpc_err *err)
{
	struct sg_ctl_job *jobs = NULL;
	json_t *arr;
	int i, n;

	if (no_params(params, err))
		return -1;
	NEED_OP(s, job_list, err);
	n = get_jobs(s, &jobs, err);
	if (n < 0)
		return -1;
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(arr, job_json(&jobs[i]));
	free(jobs);
	*res = arr;
	return 0;
}

static int job_id_param(json_t *params, uint32_t *id, struct rpc_err *err, const char *extra,
			int *flag)
{
	json_int_t v = -1;
	json_error_t jerr;
	int rc;

	if (params == NULL)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need id");
	if (extra != NULL)
		rc = json_unpack_ex(params, &jerr, JSON_STRICT, "{s:I, s?b}", "id", &v, extra, flag);
	else
		rc = json_unpack_ex(params, &jerr, JSON_STRICT, "{s:I}", "id", &v);
	if (rc != 0)
		return bad_params(err, &jerr);
	if (v < 0 || v > UINT32_MAX)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: bad id");
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
			 struct rpc_err *err)
{
	struct srv_job *j;
	uint32_t id;
	int rc;

	NEED_OP(s, job_destroy, err);
	if (job_id_param(params, &id, err, NULL, NULL) != 0)
		return -1;
	rc = s->cfg.ops->job_destroy(s->cfg.ops_arg, id);
	if (rc != 0)
		return rc == -ENOENT ? fail(err, SG_CTL_ERR_NOT_FOUND, "no such job: %" PRIu32, id)
				     : agent_fail(err, "job destroy", rc, NULL);
	j = find_job(s, id);
	if (j != NULL) {
		free(j->tensors);
		memset(j, 0, sizeof(*j));
	}
	sg_ctl_cluster_reconcile(s); /* its record's lease is no longer renewed here */
	*res = json_true();
	return 0;
}

static int m_job_placement(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct rpc_err *err)
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
		return fail(err, SG_CTL_ERR_NOT_FOUND, "no such job: %" PRIu32, id);
	nn = (int)sg_ctl_members_list(s->members, NULL, 0);
	if (nn <= 0)
		return fail(err, SG_CTL_ERR_NOT_FOUND,
			    "no summation node has sent a heartbeat: nothing to place on");
	nodes = calloc((size_t)nn, sizeof(*nodes));
	w = calloc((size_t)nn, sizeof(*w));
	bytes = calloc((size_t)nn, sizeof(*bytes));
	parts = calloc((size_t)nn, sizeof(*parts));
	if (nodes == NULL || w == NULL || bytes == NULL || parts == NULL) {
		fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
		goto out;
	}
	sg_ctl_members_place_nodes(s->members, nodes, (unsigned int)nn);
	if (sg_ctl_place_weights(nodes, (unsigned int)nn, w) != 0) {
		fail(err, SG_CTL_ERR_NOT_FOUND, "no summation node is alive");
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

/* ---- lcores, layout, stats ---------------------------------------------- */

static int get_lcores(struct sg_ctl_server *s, struct sg_ctl_lcore_stats **out,
		      struct rpc_err *err)
{
	struct sg_ctl_lcore_stats *ls = calloc(SG_CTL_MAX_LCORES, sizeof(*ls));
	int n;

	if (ls == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	n = s->cfg.ops->lcores(s->cfg.ops_arg, ls, SG_CTL_MAX_LCORES);
	if (n < 0) {
		free(ls);
		return agent_fail(err, "lcores", n, NULL);
	}
	*out = ls;
	return n > SG_CTL_MAX_LCORES ? SG_CTL_MAX_LCORES : n;
}

static json_t *lcore_json(const struct sg_ctl_lcore_stats *l)
{
	return json_pack("{s:I, s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f}", "lcore",
			 (json_int_t)l->lcore, "role", sg_ctl_role_name(l->role), "numa", l->numa,
			 "idle", l->idle == SG_IDLE_SLEEP ? "sleep" : "poll", "busy_cycles",
			 (json_int_t)l->busy_cycles, "idle_cycles", (json_int_t)l->idle_cycles,
			 "packets", (json_int_t)l->packets, "bytes_summed",
			 (json_int_t)l->bytes_summed, "drops", (json_int_t)l->drops, "busy_pct",
			 l->busy_pct, "mpps", l->mpps, "gbps_summed", l->gbps_summed);
}

static int m_lcores_get(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct rpc_err *err)
{
	struct sg_ctl_lcore_stats *ls = NULL;
	int i, n;

	if (no_params(params, err))
		return -1;
	NEED_OP(s, lcores, err);
	n = get_lcores(s, &ls, err);
	if (n < 0)
		return -1;
	*res = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(*res, lcore_json(&ls[i]));
	free(ls);
	return 0;
}

static json_t *server_stats_json(const struct sg_ctl_server *s)
{
	struct sg_ctl_server_stats st;

	sg_ctl_server_get_stats(s, &st);
	json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "conns_accepted", (json_int_t)st.conns_accepted, "conns_refused",
			 (json_int_t)st.conns_refused, "requests", (json_int_t)st.requests,
			 "auth_ok", (json_int_t)st.auth_ok, "auth_failed",
			 (json_int_t)st.auth_failed, "unauthenticated",
			 (json_int_t)st.unauthenticated, "malformed", (json_int_t)st.malformed,
			 "oversized", (json_int_t)st.oversized, "unknown_method",
			 (json_int_t)st.unknown_method, "timeouts", (json_int_t)st.timeouts,
			 "method_errors", (json_int_t)st.method_errors, "metrics_scrapes",
			 (json_int_t)st.metrics_scrapes, "http_bad", (json_int_t)st.http_bad);

	if (o != NULL && s->cl.w != NULL) {
		struct sg_etcd_watch_stats ws;
		const struct sg_etcd_garbage *g = &ws.job_garbage;

		sg_etcd_watch_stats(s->cl.w, &ws);
		json_object_set_new(o, "cluster", json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, "
			"s:b, s:I}", "name", s->cl.name, "records", (json_int_t)st.cluster_records,
			"refused", (json_int_t)st.cluster_refused, "nodes_lost",
			(json_int_t)st.cluster_nodes_lost, "keys_added",
			(json_int_t)st.cluster_keys_added, "add_failures",
			(json_int_t)st.cluster_add_failures, "job_garbage",
			(json_int_t)(g->not_json + g->bad_field + g->bad_kind + g->name_mismatch),
			"streaming", ws.streaming, "reachable", ws.reachable, "live_nodes",
			(json_int_t)ws.nodes));
	}
	return o;
}

static int m_stats_get(struct sg_ctl_server *s, json_t *params, json_t **res,
		       struct rpc_err *err)
{
	struct sg_ctl_lcore_stats *ls = NULL;
	struct sg_ctl_job *jobs = NULL;
	json_t *la = json_array(), *ja = json_array();
	int i, n;

	if (no_params(params, err))
		goto bad;
	if (s->cfg.ops->lcores != NULL) {
		if ((n = get_lcores(s, &ls, err)) < 0)
			goto bad;
		for (i = 0; i < n; i++)
			json_array_append_new(la, lcore_json(&ls[i]));
	}
	if (s->cfg.ops->job_list != NULL) {
		if ((n = get_jobs(s, &jobs, err)) < 0)
			goto bad;
		for (i = 0; i < n; i++)
			json_array_append_new(ja, job_json(&jobs[i]));
	}
	free(ls);
	free(jobs);
	*res = json_pack("{s:o, s:o, s:o, s:b}", "lcores", la, "jobs", ja, "control",
			 server_stats_json(s), "draining", s->draining);
	return 0;
bad:
	free(ls);
	json_decref(la);
	json_decref(ja);
	return -1;
}

static int m_layout_get(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct rpc_err *err)
{
	struct sg_ctl_layout *lay;
	json_t *lc, *km;
	unsigned int i;
	int rc;

	if (no_params(params, err))
		return -1;
	NEED_OP(s, layout_get, err);
	lay = calloc(1, sizeof(*lay));
	if (lay == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	rc = s->cfg.ops->layout_get(s->cfg.ops_arg, lay);
	if (rc != 0) {
		free(lay);
		return agent_fail(err, "layout", rc, NULL);
	}
	lc = json_array();
	for (i = 0; i < lay->n_lcores && i < SG_CTL_MAX_LCORES; i++)
		json_array_append_new(
			lc, json_pack("{s:I, s:s, s:i, s:s, s:i, s:i}", "lcore",
				      (json_int_t)lay->lcores[i].lcore, "role",
				      sg_ctl_role_name(lay->lcores[i].role), "numa",
				      lay->lcores[i].numa, "idle",
				      lay->lcores[i].idle == SG_IDLE_SLEEP ? "sleep" : "poll",
				      "port", lay->lcores[i].port, "queue", lay->lcores[i].queue));
	km = json_array();
	for (i = 0; i < SG_CTL_KEYMAP_BUCKETS; i++)
		json_array_append_new(km, json_integer(lay->keymap[i]));
	*res = json_pack("{s:o, s:I, s:o}", "lcores", lc, "reducers",
			 (json_int_t)lay->n_reducers, "keymap", km);
	free(lay);
	return 0;
}

static int parse_idle(json_t *arr, struct sg_ctl_layout_change *chg, struct rpc_err *err)
{
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) > SG_CTL_MAX_LCORES)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: idle must be an array of {lcore, policy}");
	for (i = 0; i < json_array_size(arr); i++) {
		json_int_t lc;
		const char *pol;
		json_error_t jerr;

		if (json_unpack_ex(json_array_get(arr, i), &jerr, JSON_STRICT, "{s:I, s:s}",
				   "lcore", &lc, "policy", &pol) != 0)
			return bad_params(err, &jerr);
		if (lc < 0 || lc >= 1024 || (strcmp(pol, "poll") != 0 && strcmp(pol, "sleep") != 0))
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: idle[%zu]: lcore 0..1023, policy poll|sleep",
				    i);
		chg->idle[i].lcore = (uint32_t)lc;
		chg->idle[i].idle = strcmp(pol, "sleep") == 0 ? SG_IDLE_SLEEP : SG_IDLE_POLL;
	}
	chg->n_idle = (uint32_t)i;
	return 0;
}

static int m_layout_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct rpc_err *err)
{
	struct sg_ctl_layout_change *chg;
	char reason[SG_CTL_REASON_MAX] = "";
	const char *key;
	json_t *val;
	int rc = -1;

	NEED_OP(s, layout_change, err);
	if (!json_is_object(params) || json_object_size(params) == 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: want an object with keymap and/or idle");
	/* Anything but the live-changeable subset is refused, with what to do instead. */
	json_object_foreach(params, key, val)
		if (strcmp(key, "keymap") != 0 && strcmp(key, "idle") != 0)
			return fail(err, SG_CTL_ERR_REFUSED,
				    "'%.32s' cannot change live (only keymap and idle can); "
				    "change sigmad's config and restart it",
				    key);
	chg = calloc(1, sizeof(*chg));
	if (chg == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	val = json_object_get(params, "keymap");
	if (val != NULL) {
		size_t i;

		if (!json_is_array(val) || json_array_size(val) != SG_CTL_KEYMAP_BUCKETS) {
			fail(err, SG_CTL_ERR_INVALID_PARAMS,
			     "invalid params: keymap must list %d reducer indexes",
			     SG_CTL_KEYMAP_BUCKETS);
			goto out;
		}
		for (i = 0; i < SG_CTL_KEYMAP_BUCKETS; i++) {
			json_t *e = json_array_get(val, i);

			if (!json_is_integer(e) || json_integer_value(e) < 0 ||
			    json_integer_value(e) >= SG_CTL_MAX_LCORES) {
				fail(err, SG_CTL_ERR_INVALID_PARAMS,
				     "invalid params: keymap[%zu] is not a reducer index", i);
				goto out;
			}
			chg->keymap[i] = (uint16_t)json_integer_value(e);
		}
		chg->has_keymap = true;
	}
	val = json_object_get(params, "idle");
	if (val != NULL && parse_idle(val, chg, err) != 0)
		goto out;
	rc = s->cfg.ops->layout_change(s->cfg.ops_arg, chg, reason);
	if (rc != 0) {
		agent_fail(err, "layout change refused", rc, reason);
		rc = -1;
		goto out;
	}
	*res = json_true();
out:
	free(chg);
	return rc;
}

/* ---- verbs transport ------------------------------------------------------ */

int sg_ctl_gid_parse(const char *s, uint8_t gid[16])
{
	size_t len = s != NULL ? strlen(s) : 0;
	unsigned int n = 0;

	/* 32 digits, or 8 groups of 4 with a colon between each (39 characters) */
	if (len != 32 && len != 39)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int v;

		if (len == 39 && i % 5 == 4) {
			if (s[i] != ':')
				return -EINVAL;
			continue;
		}
		v = s[i] >= '0' && s[i] <= '9'	 ? s[i] - '0'
		    : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
		    : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
						 : -1;
		if (v < 0)
			return -EINVAL;
		if (n % 2 == 0)
			gid[n / 2] = (uint8_t)(v << 4);
		else
			gid[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 ? 0 : -EINVAL;
}

void sg_ctl_gid_format(const uint8_t gid[16], char out[40])
{
	for (unsigned int g = 0; g < 8; g++)
		snprintf(out + 5 * g, 6, "%02x%02x%s", gid[2 * g], gid[2 * g + 1], g < 7 ? ":" : "");
}

static json_t *rc_addr_json(const struct sg_ctl_verbs_rc_addr *a)
{
	char gid[40], addr[24];

	sg_ctl_gid_format(a->gid, gid);
	snprintf(addr, sizeof(addr), "0x%" PRIx64, a->addr);
	return json_pack("{s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I}", "qpn", (json_int_t)a->qpn,
			 "psn", (json_int_t)a->psn, "lid", (json_int_t)a->lid, "gid", gid, "addr",
			 addr, "rkey", (json_int_t)a->rkey, "slots", (json_int_t)a->slots, "stride",
			 (json_int_t)a->stride);
}

static int m_verbs_info(struct sg_ctl_server *s, json_t *params, json_t **res,
			struct rpc_err *err)
{
	struct sg_ctl_verbs_info *vi;
	char reason[SG_CTL_REASON_MAX] = "", gid[40];
	json_t *lc;
	int rc;

	if (no_params(params, err))
		return -1;
	NEED_OP(s, verbs_info, err);
	vi = calloc(1, sizeof(*vi));
	if (vi == NULL)
		return fail(err, SG_CTL_ERR_INTERNAL, "out of memory");
	rc = s->cfg.ops->verbs_info(s->cfg.ops_arg, vi, reason);
	if (rc != 0) {
		free(vi);
		return agent_fail(err, "verbs info", rc, reason);
	}
	lc = json_array();
	for (uint32_t i = 0; i < vi->n_lcores && i < SG_CTL_MAX_LCORES; i++)
		json_array_append_new(lc, json_pack("{s:I, s:s, s:I}", "lcore",
						    (json_int_t)vi->lcores[i].lcore, "role",
						    sg_ctl_role_name(vi->lcores[i].role), "qpn",
						    (json_int_t)vi->lcores[i].qpn));
	sg_ctl_gid_format(vi->gid, gid);
	*res = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:i, s:I, s:o}", "transport", "verbs",
			 "mode", vi->mode == SG_CTL_VERBS_RC ? "rc" : "ud", "qkey",
			 (json_int_t)vi->qkey, "msg_max", (json_int_t)vi->msg_max, "max_payload",
			 (json_int_t)vi->max_payload, "port", (json_int_t)vi->port, "gid", gid,
			 "gid_index", vi->gid_index, "lid", (json_int_t)vi->lid, "lcores", lc);
	if (*res != NULL && vi->mode == SG_CTL_VERBS_RC)
		json_object_set_new(*res, "rc",
				    json_pack("{s:I, s:I, s:I}", "slots", (json_int_t)vi->rc_slots,
					      "connected", (json_int_t)vi->rc_conns,
					      "max_connections", (json_int_t)vi->rc_max_conns));
	free(vi);
	return 0;
}

/* An integer member of the RC params in [lo, hi], or fail naming it. */
static int rc_field(json_t *params, const char *name, bool need, json_int_t lo, json_int_t hi,
		    json_int_t *v, struct rpc_err *err)
{
	json_t *j = json_object_get(params, name);

	if (j == NULL && !need)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: %s must be an integer in [%lld, %lld]%s", name,
			    (long long)lo, (long long)hi, j == NULL ? " (missing)" : "");
	*v = json_integer_value(j);
	return 0;
}

/* The worker's side of an RC connection from @p params; every member checked. */
static int rc_addr_parse(json_t *params, struct sg_ctl_verbs_rc_addr *a, struct rpc_err *err)
{
	static const char *const known[] = {"qpn", "psn", "lid", "gid", "addr",
					    "rkey", "slots", "stride"};
	json_int_t qpn = 0, psn = 0, lid = 0, rkey = 0, slots = 0, stride = 0;
	json_t *gid, *addr;
	const char *key;
	json_t *val;

	if (!json_is_object(params))
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: want {qpn, psn, lid?, gid, addr, rkey, slots, stride}");
	json_object_foreach(params, key, val) {
		size_t i;

		for (i = 0; i < RTE_DIM(known) && strcmp(key, known[i]) != 0; i++)
			;
		if (i == RTE_DIM(known))
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: unknown member '%.32s'", key);
	}
	if (rc_field(params, "qpn", true, 1, 0xffffff, &qpn, err) ||
	    rc_field(params, "psn", true, 0, 0xffffff, &psn, err) ||
	    rc_field(params, "lid", false, 0, 0xffff, &lid, err) ||
	    rc_field(params, "rkey", true, 0, UINT32_MAX, &rkey, err) ||
	    rc_field(params, "slots", true, 1, SG_CTL_VERBS_MAX_SLOTS, &slots, err) ||
	    rc_field(params, "stride", true, 64, SG_CTL_VERBS_MAX_STRIDE, &stride, err))
		return -1;
	memset(a, 0, sizeof(*a));
	gid = json_object_get(params, "gid");
	if (!json_is_string(gid) || sg_ctl_gid_parse(json_string_value(gid), a->gid) != 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: gid must be 32 hex digits, or 8 groups of 4 joined "
			    "by ':' (fe80:0000:...)%s", gid == NULL ? " (missing)" : "");
	addr = json_object_get(params, "addr");
	if (json_is_integer(addr) && json_integer_value(addr) > 0) {
		a->addr = (uint64_t)json_integer_value(addr);
	} else {
		const char *t = json_is_string(addr) ? json_string_value(addr) : "";
		uint64_t v = 0;

		/* a string only in hex, "0x" and up to 16 digits */
		if (t[0] != '0' || (t[1] != 'x' && t[1] != 'X') || strlen(t) > 18 ||
		    sg_parse_u64x(t, 1, UINT64_MAX, &v) != 0)
			return fail(err, SG_CTL_ERR_INVALID_PARAMS,
				    "invalid params: addr must be the ring's non-zero address, an "
				    "integer or a \"0x...\" string of up to 16 hex digits%s",
				    addr == NULL ? " (missing)" : "");
		a->addr = v;
	}
	a->qpn = (uint32_t)qpn;
	a->psn = (uint32_t)psn;
	a->lid = (uint16_t)lid;
	a->rkey = (uint32_t)rkey;
	a->slots = (uint32_t)slots;
	a->stride = (uint32_t)stride;
	return 0;
}

static int m_verbs_rc_connect(struct sg_ctl_server *s, json_t *params, json_t **res,
			      struct rpc_err *err)
{
	struct sg_ctl_verbs_rc_addr worker, node;
	char reason[SG_CTL_REASON_MAX] = "";
	int peer;

	NEED_OP(s, verbs_rc_connect, err);
	if (rc_addr_parse(params, &worker, err) != 0)
		return -1;
	if (s->draining)
		return fail(err, SG_CTL_ERR_REFUSED, "node is draining: no new connections");
	memset(&node, 0, sizeof(node));
	peer = s->cfg.ops->verbs_rc_connect(s->cfg.ops_arg, &worker, &node, reason);
	if (peer < 0)
		return agent_fail(err, "RC connect refused", peer, reason);
	*res = json_pack("{s:I, s:o}", "peer", (json_int_t)peer, "node", rc_addr_json(&node));
	return 0;
}

static int m_verbs_rc_disconnect(struct sg_ctl_server *s, json_t *params, json_t **res,
				 struct rpc_err *err)
{
	char reason[SG_CTL_REASON_MAX] = "";
	json_int_t peer = 0;
	int rc;

	NEED_OP(s, verbs_rc_disconnect, err);
	if (!json_is_object(params) || json_object_size(params) != 1)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: want {peer}");
	if (rc_field(params, "peer", true, 0, UINT32_MAX, &peer, err) != 0)
		return -1;
	rc = s->cfg.ops->verbs_rc_disconnect(s->cfg.ops_arg, (uint32_t)peer, reason);
	if (rc < 0)
		return agent_fail(err, "RC disconnect refused", rc, reason);
	*res = json_pack("{s:I}", "peer", peer);
	return 0;
}

/* ---- log level, drain, introspection ----------------------------------- */

static int m_log_level_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct rpc_err *err)
{
	const char *pattern = "sigma.*", *level;
	json_error_t jerr;
	int lv, rc;

	if (params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s?s, s:s}", "pattern", &pattern,
			   "level", &level) != 0)
		return params ? bad_params(err, &jerr)
			      : fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: need level");
	lv = sg_ctl_log_level_parse(level);
	if (lv < 0)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS,
			    "invalid params: level must be emerg|alert|crit|err|warning|notice|"
			    "info|debug");
	if (pattern[0] == '\0' || strlen(pattern) > 64)
		return fail(err, SG_CTL_ERR_INVALID_PARAMS, "invalid params: bad pattern");
	if (s->cfg.ops->log_level != NULL)
		rc = s->cfg.ops->log_level(s->cfg.ops_arg, pattern, lv);
	else
		rc = rte_log_set_level_pattern(pattern, (uint32_t)lv);
	if (rc != 0)
		return agent_fail(err, "log level", rc < 0 ? rc : -EINVAL, NULL);
	*res = json_pack("{s:s, s:s}", "pattern", pattern, "level",
			 sg_ctl_log_level_name((unsigned int)lv));
	return 0;
}

static int m_drain(struct sg_ctl_server *s, json_t *params, json_t **res, struct rpc_err *err)
{
	int rc;

	if (no_params(params, err))
		return -1;
	NEED_OP(s, drain, err);
	rc = s->cfg.ops->drain(s->cfg.ops_arg);
	if (rc != 0)
		return agent_fail(err, "drain", rc, NULL);
	s->draining = true;
	*res = json_pack("{s:b}", "draining", 1);
	return 0;
}

/*
 * The versions this node speaks (docs/control.md, "Versions"). Its name and result
 * keep their meaning in every API version: a client asks it first.
 */
static int m_version(struct sg_ctl_server *s, json_t *params, json_t **res, struct rpc_err *err)
{
	if (no_params(params, err))
		return -1;
	*res = json_pack("{s:s, s:i, s:i, s:i}", "release", SG_VERSION_STRING, "api",
			 SG_API_VERSION, "protocol", SG_PROTO_VERSION, "soversion", SG_SOVERSION);
	return 0;
}

static int m_rpc_get_methods(struct sg_ctl_server *s, json_t *params, json_t **res,
			     struct rpc_err *err);

typedef int (*method_fn)(struct sg_ctl_server *, json_t *, json_t **, struct rpc_err *);

static const struct {
	const char *name;
	method_fn fn;
} methods[] = {
	{"rpc_get_methods", m_rpc_get_methods},
	{"version", m_version},
	{"node_info", m_node_info},
	{"node_heartbeat", m_node_heartbeat},
	{"node_remove", m_node_remove},
	{"nodes_list", m_nodes_list},
	{"job_create", m_job_create},
	{"job_list", m_job_list},
	{"job_destroy", m_job_destroy},
	{"job_placement", m_job_placement},
	{"stats_get", m_stats_get},
	{"lcores_get", m_lcores_get},
	{"layout_get", m_layout_get},
	{"layout_set", m_layout_set},
	{"log_level_set", m_log_level_set},
	{"drain", m_drain},
	{"verbs_info", m_verbs_info},
	{"verbs_rc_connect", m_verbs_rc_connect},
	{"verbs_rc_disconnect", m_verbs_rc_disconnect},
};

static int m_rpc_get_methods(struct sg_ctl_server *s, json_t *params, json_t **res,
			     struct rpc_err *err)
{
	size_t i;

	if (no_params(params, err))
		return -1;
	*res = json_array();
	json_array_append_new(*res, json_string("auth"));
	for (i = 0; i < RTE_DIM(methods); i++)
		json_array_append_new(*res, json_string(methods[i].name));
	return 0;
}

int sg_ctl_srv_dispatch(struct sg_ctl_server *s, const char *method, json_t *params,
			json_t **result, struct rpc_err *err)
{
	size_t i;

	*result = NULL;
	for (i = 0; i < RTE_DIM(methods); i++) {
		if (strcmp(method, methods[i].name) != 0)
			continue;
		if (methods[i].fn(s, params, result, err) != 0) {
			json_decref(*result);
			*result = NULL;
			return -1;
		}
		if (*result == NULL)
			return fail(err, SG_CTL_ERR_INTERNAL, "internal error building the answer");
		return 0;
	}
	return -ENOENT;
}

/* ---- Prometheus text format --------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p != NULL && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
			char *np = realloc(b->p, ncap);

			if (np == NULL) {
				b->oom = true;
				return;
			}
			b->p = np;
			b->cap = ncap;
		}
	}
}

static void sb_head(struct sbuf *b, const char *name, const char *type, const char *help)
{
	sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *sg_ctl_srv_metrics(struct sg_ctl_server *s, size_t *len)
{
	static const struct {
		const char *name, *help;
		size_t off;
		bool gauge_dbl;
	} lc_metrics[] = {
		{"sigma_lcore_busy_cycles_total", "TSC cycles spent on work",
		 offsetof(struct sg_ctl_lcore_stats, busy_cycles), false},
		{"sigma_lcore_idle_cycles_total", "TSC cycles spent polling empty queues",
		 offsetof(struct sg_ctl_lcore_stats, idle_cycles), false},
		{"sigma_lcore_packets_total", "packets handled",
		 offsetof(struct sg_ctl_lcore_stats, packets), false},
		{"sigma_lcore_bytes_summed_total", "payload bytes summed",
		 offsetof(struct sg_ctl_lcore_stats, bytes_summed), false},
		{"sigma_lcore_drops_total", "packets dropped, all reasons",
		 offsetof(struct sg_ctl_lcore_stats, drops), false},
		{"sigma_lcore_busy_ratio", "busy share over the last interval (0..1)",
		 offsetof(struct sg_ctl_lcore_stats, busy_pct), true},
	};
	static const struct {
		const char *name, *help;
		size_t off;
	} job_metrics[] = {
		{"sigma_job_rounds_completed_total", "summation rounds completed",
		 offsetof(struct sg_ctl_job, rounds_completed)},
		{"sigma_job_retransmits_total", "retransmitted results served",
		 offsetof(struct sg_ctl_job, retransmits)},
		{"sigma_job_incomplete_slots", "rounds waiting for pushes",
		 offsetof(struct sg_ctl_job, incomplete)},
		{"sigma_job_nacks_total", "pushes refused for lack of buffers or slots",
		 offsetof(struct sg_ctl_job, nacks)},
		{"sigma_job_drops_total", "the job's packets dropped, all reasons",
		 offsetof(struct sg_ctl_job, drops)},
		{"sigma_job_slots_used", "chunk slots the job's keys take (all engines)",
		 offsetof(struct sg_ctl_job, slots_used)},
		{"sigma_job_slots_budget", "chunk slots the job may take (all engines)",
		 offsetof(struct sg_ctl_job, slots_budget)},
	};
	struct sg_ctl_lcore_stats *ls = NULL;
	struct sg_ctl_job *jobs = NULL;
	struct sg_ctl_server_stats st;
	struct rpc_err err;
	struct sbuf b = {0};
	int nl = 0, nj = 0, i;
	size_t m;

	if (s->cfg.ops->lcores != NULL && (nl = get_lcores(s, &ls, &err)) < 0)
		nl = 0;
	if (s->cfg.ops->job_list != NULL && (nj = get_jobs(s, &jobs, &err)) < 0)
		nj = 0;
	for (m = 0; m < RTE_DIM(lc_metrics); m++) {
		sb_head(&b, lc_metrics[m].name, lc_metrics[m].gauge_dbl ? "gauge" : "counter",
			lc_metrics[m].help);
		for (i = 0; i < nl; i++) {
			const char *p = (const char *)&ls[i] + lc_metrics[m].off;

			sb_printf(&b, "%s{lcore=\"%u\",role=\"%s\",numa=\"%d\"} ", lc_metrics[m].name,
				  ls[i].lcore, sg_ctl_role_name(ls[i].role), ls[i].numa);
			if (lc_metrics[m].gauge_dbl)
				sb_printf(&b, "%.4f\n", *(const double *)p / 100.0);
			else
				sb_printf(&b, "%" PRIu64 "\n", *(const uint64_t *)p);
		}
	}
	for (m = 0; m < RTE_DIM(job_metrics); m++) {
		sb_head(&b, job_metrics[m].name, m == 2 || m >= 5 ? "gauge" : "counter",
			job_metrics[m].help);
		for (i = 0; i < nj; i++)
			sb_printf(&b, "%s{job=\"%u\"} %" PRIu64 "\n", job_metrics[m].name, jobs[i].id,
				  *(const uint64_t *)((const char *)&jobs[i] + job_metrics[m].off));
	}
	/* n_keys is a count, but not a counter: a gauge of its own */
	sb_head(&b, "sigma_job_keys", "gauge", "keys the job holds here (an open job: made so far)");
	for (i = 0; i < nj; i++)
		sb_printf(&b, "sigma_job_keys{job=\"%u\"} %u\n", jobs[i].id, jobs[i].n_keys);
	sb_head(&b, "sigma_job_info", "gauge", "1 per job, labelled with what it was created with");
	for (i = 0; i < nj; i++)
		sb_printf(&b, "sigma_job_info{job=\"%u\",workers=\"%u\",dtype=\"%s\",mode=\"%s\","
			  "keys=\"%s\"} 1\n", jobs[i].id, jobs[i].n_workers,
			  sg_dtype_name(jobs[i].dtype), sg_mode_name(jobs[i].mode),
			  jobs[i].open ? "open" : "fixed");
	sg_ctl_server_get_stats(s, &st);
	sb_head(&b, "sigma_ctl_refusals_total", "counter", "control requests refused, by reason");
	sb_printf(&b,
		  "sigma_ctl_refusals_total{reason=\"auth_failed\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"unauthenticated\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"malformed\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"oversized\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"unknown_method\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"timeout\"} %" PRIu64 "\n"
		  "sigma_ctl_refusals_total{reason=\"conn_limit\"} %" PRIu64 "\n",
		  st.auth_failed, st.unauthenticated, st.malformed, st.oversized,
		  st.unknown_method, st.timeouts, st.conns_refused);
	sb_head(&b, "sigma_ctl_requests_total", "counter", "control requests answered");
	sb_printf(&b, "sigma_ctl_requests_total %" PRIu64 "\n", st.requests);
	sb_head(&b, "sigma_draining", "gauge", "1 while the node drains");
	sb_printf(&b, "sigma_draining %d\n", s->draining ? 1 : 0);
	free(ls);
	free(jobs);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
