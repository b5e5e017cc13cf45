/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job service (sg_ctl_client.h): one job across every summation node of a
 * job, one id, one token, one chunk size, the keys placed per node by the one
 * placement function, and the job descriptor (sg_desc.h) that workers open it
 * with. Nothing is left behind when a node refuses.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "sg_auth.h"
#include "sg_ctl_client.h"
#include "sg_err.h"
#include "sg_ctl_place.h"
#include "sg_desc.h"

#define DEF_TIMEOUT_MS 5000

/* What the service learnt of one node. */
struct svc_node {
	struct sg_ctl_client *cli;
	char label[160];	  /* "name (target)" for messages */
	uint32_t max_chunk;
	uint32_t max_id;	  /* highest job id in use there */
	struct sg_desc_node nd;	  /* what the descriptor says of it */
};


/* Call @p method on node @p n; the result parsed into *@p res (may be NULL). */
static int call(struct svc_node *n, const char *method, json_t *params, json_t **res,
		char *err, size_t errlen)
{
	char *text = params ? json_dumps(params, JSON_COMPACT) : NULL, *out = NULL, *msg = NULL;
	int rc;

	if (params != NULL && text == NULL)
		return sg_err(err, errlen, -ENOMEM, "node %s: out of memory", n->label);
	rc = sg_ctl_client_call(n->cli, method, text, &out, &msg);
	free(text);
	if (rc == -EREMOTEIO)
		rc = sg_err(err, errlen, rc, "node %s: %s: %s", n->label, method, msg ? msg : "refused");
	else if (rc != 0)
		rc = sg_err(err, errlen, rc, "node %s: %s: %s", n->label, method, strerror(-rc));
	else if (res != NULL && (*res = json_loads(out, JSON_DECODE_ANY, NULL)) == NULL)
		rc = sg_err(err, errlen, -EPROTO, "node %s: %s: unreadable answer", n->label, method);
	free(out);
	free(msg);
	return rc;
}

/* Connect to the nodes; node i is called "first + i" in messages. */
static int connect_all(const struct sg_ctl_jobsvc *svc, struct svc_node *nodes, unsigned int first,
		       char *err, size_t errlen)
{
	uint32_t tmo = svc->timeout_ms ? svc->timeout_ms : DEF_TIMEOUT_MS;

	for (unsigned int i = 0; i < svc->n_nodes; i++) {
		const char *t = svc->nodes[i].target;
		bool tcp;

		if (t == NULL || t[0] == '\0')
			return sg_err(err, errlen, -EINVAL, "node %u: no control target", i);
		snprintf(nodes[i].label, sizeof(nodes[i].label), "%u (%.120s)", first + i, t);
		tcp = sg_ctl_target_is_tcp(t);
		if (tcp && (svc->secret == NULL || svc->secret_len == 0))
			return sg_err(err, errlen, -EINVAL, "node %s: a TCP target needs the shared "
				    "secret", nodes[i].label);
		nodes[i].cli = sg_ctl_client_connect(t, tcp ? svc->secret : NULL,
						     tcp ? svc->secret_len : 0, tmo);
		if (nodes[i].cli == NULL) {
			int e = errno;

			return sg_err(err, errlen, -e, "node %s: %s", nodes[i].label,
				    e == EACCES ? "refused the authentication (wrong secret?)" :
				    e == EINVAL ? "not a control target (unix:PATH or HOST:PORT)" :
				    strerror(e));
		}
	}
	return 0;
}

static void close_all(struct svc_node *nodes, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		sg_ctl_client_close(nodes[i].cli);
}

/* node_info and job_list of node @p i, with the caller's overrides. */
static int learn(const struct sg_ctl_jobsvc_node *in, struct svc_node *n, char *err,
		 size_t errlen)
{
	json_t *r = NULL, *j;
	const char *name, *addr, *kind;
	size_t k;
	int rc = sg_ctl_version_check(n->cli, NULL, err, errlen);

	/* first the versions: another API's node_info or job_create may mean other things */
	if (rc != 0) {
		char why[400];

		snprintf(why, sizeof(why), "%s", err ? err : "");
		return sg_err(err, errlen, rc, "node %s: %s", n->label, why);
	}
	rc = call(n, "node_info", NULL, &r, err, errlen);
	if (rc != 0)
		return rc;
	name = json_string_value(json_object_get(r, "name"));
	addr = in->addr ? in->addr : json_string_value(json_object_get(r, "addr"));
	kind = in->kind ? in->kind : json_string_value(json_object_get(r, "kind"));
	n->nd.port = in->udp_port ? in->udp_port
				  : (uint16_t)json_integer_value(json_object_get(r, "udp_port"));
	n->nd.gbps = in->gbps > 0 ? in->gbps : json_number_value(json_object_get(r, "gbps"));
	n->max_chunk = (uint32_t)json_integer_value(json_object_get(r, "max_chunk_bytes"));
	if (sg_desc_check_name(name) != 0)
		rc = sg_err(err, errlen, -EINVAL, "node %s: its name '%.64s' cannot go in a job "
			  "descriptor: give it a [control] name of 1..63 of A-Z a-z 0-9 . _ -",
			  n->label, name ? name : "");
	else if (json_is_true(json_object_get(r, "draining")))
		rc = sg_err(err, errlen, -EBUSY, "node %s is draining: no new jobs", n->label);
	else if (addr == NULL || addr[0] == '\0' || strlen(addr) >= sizeof(n->nd.addr))
		rc = sg_err(err, errlen, -EINVAL, "node %s tells no dataplane address: give one "
			  "(addr=)", n->label);
	else if (n->nd.port == 0)
		rc = sg_err(err, errlen, -EINVAL, "node %s tells no UDP port: give one (port=)",
			  n->label);
	else if (sg_node_kind_from_name(kind, &n->nd.kind) != 0)
		rc = sg_err(err, errlen, -EINVAL, "node %s: kind '%.16s' is not cpu or gpu", n->label,
			  kind ? kind : "");
	else if (!(n->nd.gbps > 0) || !isfinite(n->nd.gbps))
		rc = sg_err(err, errlen, -EINVAL, "node %s: bandwidth %g is not > 0 (gbps=)",
			  n->label, n->nd.gbps);
	else if (n->max_chunk < 8)
		rc = sg_err(err, errlen, -EPROTO, "node %s tells no max_chunk_bytes: an older "
			  "sigmad? (upgrade it)", n->label);
	if (rc == 0) {
		snprintf(n->nd.name, sizeof(n->nd.name), "%s", name);
		snprintf(n->nd.addr, sizeof(n->nd.addr), "%s", addr);
		snprintf(n->label, sizeof(n->label), "'%s' (%.120s)", name, in->target);
	}
	json_decref(r);
	if (rc != 0)
		return rc;
	rc = call(n, "job_list", NULL, &r, err, errlen);
	if (rc != 0)
		return rc;
	n->max_id = 0;
	json_array_foreach(r, k, j) {
		json_int_t id = json_integer_value(json_object_get(j, "id"));

		if (id > (json_int_t)n->max_id && id <= UINT32_MAX)
			n->max_id = (uint32_t)id;
	}
	json_decref(r);
	return 0;
}

/* The spec checked, defaults applied. */
static int check_spec(const struct sg_ctl_job_spec *in, struct sg_ctl_job_spec *s,
		      uint64_t *parts, char *err, size_t errlen)
{
	uint64_t pelems;

	*s = *in;
	if (s->auth != (s->rank_descs != NULL))
		return sg_err(err, errlen, -EINVAL, s->auth ? "auth = mac needs a buffer for each "
			    "rank's descriptor (rank_descs)" : "rank_descs is for a job with auth");
	if (s->token_out != NULL && !s->auth)
		return sg_err(err, errlen, -EINVAL, "token_out is for a job with auth");
	if (s->partition_bytes == 0)
		s->partition_bytes = SG_PARTITION_BYTES_DEFAULT;
	if (s->workers < 1 || s->workers > SG_MAX_WORKERS)
		return sg_err(err, errlen, -EINVAL, "workers %u: must be 1..%d", s->workers,
			    SG_MAX_WORKERS);
	if ((!sg_dtype_valid(s->dtype) && s->dtype != SG_DTYPE_ANY) ||
	    (unsigned int)s->mode >= SG_MODE_COUNT)
		return sg_err(err, errlen, -EINVAL, "unknown dtype or mode");
	if (s->partition_bytes % 8 != 0 || s->partition_bytes > SG_MAX_PARTITION_BYTES)
		return sg_err(err, errlen, -EINVAL, "partition_bytes %u: must be a multiple of 8 and "
			    "at most %u", s->partition_bytes, SG_MAX_PARTITION_BYTES);
	if (s->chunk_bytes % 8 != 0 || s->chunk_bytes > SG_MAX_CHUNK_BYTES ||
	    s->chunk_bytes > s->partition_bytes)
		return sg_err(err, errlen, -EINVAL, "chunk_bytes %u: must be a multiple of 8, at most "
			    "%d and at most partition_bytes", s->chunk_bytes, SG_MAX_CHUNK_BYTES);
	if (s->n_tensors == 0) {
		/* an open job: nothing to place; every element size divides a multiple of 8 */
		if (s->slots > SG_OPEN_SLOTS_MAX)
			return sg_err(err, errlen, -EINVAL, "slots %u: an open job takes 1..%u "
					  "chunk slots per engine", s->slots, SG_OPEN_SLOTS_MAX);
		*parts = 0;
		return 0;
	}
	if (s->dtype == SG_DTYPE_ANY)
		return sg_err(err, errlen, -EINVAL, "dtype any is for open jobs (no tensors)");
	if (s->slots != 0)
		return sg_err(err, errlen, -EINVAL, "slots is for open jobs (no tensors)");
	if (s->tensors == NULL || s->n_tensors == 0 || s->n_tensors > 1024)
		return sg_err(err, errlen, -EINVAL, "a job has up to 1024 tensors, or none (an "
				  "open job)");
	pelems = s->partition_bytes / sg_dtype_size(s->dtype);
	*parts = 0;
	for (uint32_t t = 0; t < s->n_tensors; t++) {
		uint64_t p = (s->tensors[t].elems + pelems - 1) / pelems;

		if (s->tensors[t].elems == 0 || p > SG_MAX_PARTS)
			return sg_err(err, errlen, -EINVAL, "tensor %u ('%.63s'): %" PRIu64 " elements "
				    "make %" PRIu64 " partitions: 1..%d (raise partition_bytes)", t,
				    s->tensors[t].name, s->tensors[t].elems, p, SG_MAX_PARTS);
		*parts += p;
	}
	return 0;
}

/* Placement weights: the caller's, or BytePS's split over kinds and bandwidths. */
static int weigh(const struct sg_ctl_jobsvc *svc, struct svc_node *nodes, char *err,
		 size_t errlen)
{
	struct sg_ctl_place_node pn[SG_MAX_NODES];
	double w[SG_MAX_NODES], sum = 0;
	unsigned int given = 0;

	for (unsigned int i = 0; i < svc->n_nodes; i++) {
		given += svc->nodes[i].has_weight;
		pn[i] = (struct sg_ctl_place_node){.name = nodes[i].nd.name, .kind = nodes[i].nd.kind,
						   .gbps = nodes[i].nd.gbps, .alive = true};
		for (unsigned int k = 0; k < i; k++)
			if (strcmp(nodes[i].nd.name, nodes[k].nd.name) == 0)
				return sg_err(err, errlen, -EINVAL, "nodes %u and %u are the same node "
					    "'%s': list each node once", k, i, nodes[i].nd.name);
	}
	if (given != 0 && given != svc->n_nodes)
		return sg_err(err, errlen, -EINVAL, "give every node a weight, or none");
	if (given == 0 && sg_ctl_place_weights(pn, svc->n_nodes, w) != 0)
		return sg_err(err, errlen, -EINVAL, "no placement weights for these nodes");
	for (unsigned int i = 0; i < svc->n_nodes; i++) {
		nodes[i].nd.weight = given ? svc->nodes[i].weight : w[i];
		if (!(nodes[i].nd.weight >= 0) || !isfinite(nodes[i].nd.weight))
			return sg_err(err, errlen, -EINVAL, "node %s: weight %g is not >= 0",
				    nodes[i].label, nodes[i].nd.weight);
		sum += nodes[i].nd.weight;
	}
	if (!(sum > 0))
		return sg_err(err, errlen, -EINVAL, "every node's weight is 0");
	return 0;
}

static json_t *create_params(const struct sg_ctl_job_spec *s, const struct sg_desc *d,
			     const char *token, const struct svc_node *nodes, unsigned int n)
{
	json_t *p, *tensors = json_array(), *jn = json_array();

	for (uint32_t t = 0; t < s->n_tensors; t++)
		json_array_append_new(tensors, s->tensors[t].name[0] ?
				      json_pack("{s:s, s:I}", "name", s->tensors[t].name, "elems",
						(json_int_t)s->tensors[t].elems) :
				      json_pack("{s:I}", "elems", (json_int_t)s->tensors[t].elems));
	for (unsigned int i = 0; i < n; i++)
		json_array_append_new(jn, json_pack("{s:s, s:s, s:f, s:f}", "name", nodes[i].nd.name,
						    "kind", sg_node_kind_name(nodes[i].nd.kind),
						    "gbps", nodes[i].nd.gbps, "weight",
						    nodes[i].nd.weight));
	p = json_pack("{s:I, s:s, s:s, s:I, s:I, s:s, s:I, s:o}", "id", (json_int_t)d->id,
		      "dtype", sg_dtype_name(d->dtype), "mode", sg_mode_name(d->mode),
		      "workers", (json_int_t)d->workers, "partition_bytes",
		      (json_int_t)d->partition_bytes, "token", token, "chunk_bytes",
		      (json_int_t)d->chunk_bytes, "nodes", jn);
	/* an open job: no tensors (a node that knows no open jobs refuses it) */
	if (p != NULL && s->n_tensors > 0)
		json_object_set_new(p, "tensors", tensors);
	else
		json_decref(tensors);
	if (p != NULL && s->slots != 0)
		json_object_set_new(p, "slots", json_integer((json_int_t)s->slots));
	if (p != NULL && s->auth)
		json_object_set_new(p, "auth", json_string("mac"));
	return p;
}

/*
 * The job's descriptor into @p desc and, with auth (its key id in it), rank r's
 * into s->rank_descs[r]: the same with rank r's two keys, derived from the job
 * key as every node derives it from the token (sg_auth.h).
 * @return 0 or sg_desc_format()'s error.
 */
static int descs_format(const struct sg_ctl_job_spec *s, struct sg_desc *d, const char *token,
			char *desc, size_t cap, char *sub, size_t sublen)
{
	uint8_t K[SG_AUTH_KEY_BYTES];
	int rc;

	if (!s->auth) {
		rc = sg_desc_format(d, desc, cap, sub, sublen);
		return rc < 0 ? rc : 0;
	}
	if (sg_auth_job_key_from_token(token, K) != 0)
		return -EINVAL;
	d->auth = true;
	d->key_id = sg_auth_key_id(K);
	rc = sg_desc_format(d, desc, cap, sub, sublen);
	for (uint32_t r = 0; r < s->workers && rc >= 0; r++) {
		d->has_keys = true;
		d->rank = (uint16_t)r;
		sg_auth_rank_key(K, (uint16_t)r, SG_AUTH_RANK, d->keys);
		sg_auth_rank_key(K, (uint16_t)r, SG_AUTH_NODE, d->keys + SG_AUTH_KEY_BYTES);
		rc = sg_desc_format(d, s->rank_descs[r], cap, sub, sublen);
	}
	d->has_keys = false;
	sodium_memzero(d->keys, sizeof(d->keys));
	sodium_memzero(K, sizeof(K));
	return rc < 0 ? rc : 0;
}

static void destroy_on(struct svc_node *nodes, unsigned int n, uint32_t id)
{
	for (unsigned int i = 0; i < n; i++) {
		json_t *p = json_pack("{s:I}", "id", (json_int_t)id);

		call(&nodes[i], "job_destroy", p, NULL, NULL, 0);
		json_decref(p);
	}
}

int64_t sg_ctl_job_service_create(const struct sg_ctl_jobsvc *svc,
				  const struct sg_ctl_job_spec *spec, char *desc, size_t desc_cap,
				  char *err, size_t errlen)
{
	struct svc_node *nodes;
	struct sg_ctl_job_spec s;
	struct sg_desc *d;
	char token[SG_CTL_TOKEN_LEN], sub[256];
	uint8_t raw[32];
	uint64_t parts = 0, placed = 0;
	uint32_t max_id = 0, chunk = UINT32_MAX;
	unsigned int made = 0;
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (svc == NULL || spec == NULL || desc == NULL || svc->nodes == NULL ||
	    svc->n_nodes == 0 || svc->n_nodes > SG_MAX_NODES)
		return sg_err(err, errlen, -EINVAL, "a job needs 1..%d nodes", SG_MAX_NODES);
	rc = check_spec(spec, &s, &parts, err, errlen);
	if (rc != 0)
		return rc;
	if (sodium_init() < 0)
		return sg_err(err, errlen, -EIO, "libsodium does not initialise");
	nodes = calloc(svc->n_nodes, sizeof(*nodes));
	d = calloc(1, sizeof(*d));
	if (nodes == NULL || d == NULL) {
		rc = sg_err(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	rc = connect_all(svc, nodes, 0, err, errlen);
	for (unsigned int i = 0; i < svc->n_nodes && rc == 0; i++) {
		rc = learn(&svc->nodes[i], &nodes[i], err, errlen);
		/* with auth a datagram carries the MAC after its chunk */
		if (rc == 0 && s.auth && nodes[i].max_chunk < 8 + SG_AUTH_TRAILER_BYTES)
			rc = sg_err(err, errlen, -EINVAL, "node %s takes chunks of %u bytes: no room "
				  "for the MAC", nodes[i].label, nodes[i].max_chunk);
		else if (rc == 0 && s.auth)
			nodes[i].max_chunk -= SG_AUTH_TRAILER_BYTES;
		if (rc == 0 && nodes[i].max_chunk < chunk)
			chunk = nodes[i].max_chunk;
		if (rc == 0 && s.chunk_bytes > nodes[i].max_chunk)
			rc = sg_err(err, errlen, -EINVAL, "chunk_bytes %u: node %s takes at most %u%s",
				  s.chunk_bytes, nodes[i].label, nodes[i].max_chunk,
				  s.auth ? " (its largest less the MAC's 32 bytes)" : "");
		if (rc == 0 && nodes[i].max_id > max_id)
			max_id = nodes[i].max_id;
	}
	if (rc == 0)
		rc = weigh(svc, nodes, err, errlen);
	if (rc != 0)
		goto out;
	/* the largest chunk every node takes, within a partition */
	chunk = s.chunk_bytes ? s.chunk_bytes : chunk / 8 * 8;
	if (chunk > s.partition_bytes)
		chunk = s.partition_bytes;
	if (s.id == 0 && max_id == UINT32_MAX) {
		rc = sg_err(err, errlen, -ENOSPC, "no job id left above %u: give one (id)", max_id);
		goto out;
	}
	*d = (struct sg_desc){.id = s.id ? s.id : max_id + 1, .workers = s.workers,
			      .dtype = s.dtype, .mode = s.mode,
			      .partition_bytes = s.partition_bytes, .chunk_bytes = chunk,
			      .n_nodes = svc->n_nodes};
	for (unsigned int i = 0; i < svc->n_nodes; i++)
		d->nodes[i] = nodes[i].nd;
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(token, sizeof(token), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	d->token = sg_ctl_wire_token(token);
	rc = descs_format(&s, d, token, desc, desc_cap, sub, sizeof(sub));
	if (rc < 0) {
		rc = rc == -ENOSPC ? sg_err(err, errlen, rc, "the descriptor does not fit in %zu bytes",
					  desc_cap)
				   : sg_err(err, errlen, rc, "%s", sub);
		goto out;
	}
	rc = 0;
	/* nodes 0..made-1 have the job */
	for (unsigned int i = 0; i < svc->n_nodes && rc >= 0; i++) {
		json_t *p = create_params(&s, d, token, nodes, svc->n_nodes), *r = NULL;

		rc = p ? call(&nodes[i], "job_create", p, &r, err, errlen) :
			 sg_err(err, errlen, -ENOMEM, "out of memory");
		json_decref(p);
		if (rc == 0)
			made = i + 1;
		if (rc == 0 && (uint32_t)json_integer_value(json_object_get(r, "chunk_bytes")) != chunk)
			rc = sg_err(err, errlen, -EPROTO, "node %s made the job with chunk_bytes %lld, "
				  "not %u", nodes[i].label,
				  (long long)json_integer_value(json_object_get(r, "chunk_bytes")),
				  chunk);
		/* a node that knows no auth would make a job anyone with the token can push to */
		if (rc == 0 && s.auth && !json_is_string(json_object_get(r, "auth")))
			rc = sg_err(err, errlen, -EPROTO, "node %s made the job without auth = mac "
				  "(its answer has no \"auth\": \"mac\"): an older node? (upgrade it)",
				  nodes[i].label);
		if (rc == 0 && s.n_tensors == 0 &&
		    !json_is_string(json_object_get(r, "keys")))
			rc = sg_err(err, errlen, -EPROTO, "node %s did not make an open job (its "
				  "answer has no \"keys\": \"open\"): an older node? (upgrade it)",
				  nodes[i].label);
		placed += (uint64_t)json_integer_value(json_object_get(r, "keys"));
		json_decref(r);
	}
	if (rc == 0 && placed != parts)
		rc = sg_err(err, errlen, -EPROTO, "the nodes placed %" PRIu64 " partitions between "
			  "them, the job has %" PRIu64 ": placement differs between the nodes "
			  "(mixed versions?)", placed, parts);
	if (rc != 0) {
		size_t len = err ? strlen(err) : 0;

		/* nothing left behind: the nodes that made the job destroy it */
		destroy_on(nodes, made, d->id);
		if (err != NULL && len < errlen && made > 0)
			snprintf(err + len, errlen - len, "; the job was destroyed again on the %u "
				 "node(s) that had made it", made);
		desc[0] = '\0';
		goto out;
	}
	if (s.token_out != NULL)
		memcpy(s.token_out, token, SG_CTL_TOKEN_LEN);
out:
	if (rc != 0 && s.token_out != NULL)
		sodium_memzero(s.token_out, SG_CTL_TOKEN_LEN);
	if (rc != 0 && s.rank_descs != NULL)
		for (uint32_t r = 0; r < s.workers; r++)
			sodium_memzero(s.rank_descs[r], desc_cap);
	if (d != NULL)
		sodium_memzero(d->keys, sizeof(d->keys));
	sodium_memzero(token, sizeof(token));
	if (nodes != NULL)
		close_all(nodes, svc->n_nodes);
	free(nodes);
	if (rc == 0) {
		int64_t id = d->id;

		free(d);
		return id;
	}
	free(d);
	return rc;
}

int sg_ctl_job_service_destroy(const struct sg_ctl_jobsvc *svc, uint32_t id, char *err,
			       size_t errlen)
{
	struct svc_node *nodes;
	size_t len = 0;
	int first = 0;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (svc == NULL || svc->nodes == NULL || svc->n_nodes == 0 || svc->n_nodes > SG_MAX_NODES)
		return sg_err(err, errlen, -EINVAL, "a job needs 1..%d nodes", SG_MAX_NODES);
	nodes = calloc(svc->n_nodes, sizeof(*nodes));
	if (nodes == NULL)
		return sg_err(err, errlen, -ENOMEM, "out of memory");
	for (unsigned int i = 0; i < svc->n_nodes; i++) {
		struct sg_ctl_jobsvc one = *svc;
		char e[320] = "";
		json_t *p;
		int rc;

		one.nodes = &svc->nodes[i];
		one.n_nodes = 1;
		rc = connect_all(&one, &nodes[i], i, e, sizeof(e));
		if (rc == 0) {
			p = json_pack("{s:I}", "id", (json_int_t)id);
			rc = call(&nodes[i], "job_destroy", p, NULL, e, sizeof(e));
			json_decref(p);
			/* -32005: the node has no such job */
			if (rc == -EREMOTEIO && strstr(e, "(-32005)") != NULL)
				rc = -ENOENT;
		}
		if (rc != 0) {
			if (first == 0)
				first = rc;
			if (err != NULL && len < errlen)
				len += (size_t)snprintf(err + len, errlen - len, "%s%s",
							len ? "; " : "", e);
		}
	}
	close_all(nodes, svc->n_nodes);
	free(nodes);
	return first;
}
