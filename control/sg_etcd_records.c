/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_etcd's records (sg_etcd.h): node records and job records, their JSON,
 * strict parsing, and the reads of a cluster's records.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "sg_ctl_place.h"
#include "sg_desc.h"
#include "sg_etcd.h"
#include "sg_parse.h"
#include "sg_etcd_internal.h"

/* ---- node records -------------------------------------------------------- */

int sg_etcd_prefix(const char *cluster, char *buf, size_t cap)
{
	int n;

	if (cluster == NULL || sg_desc_check_name(cluster) < 0)
		return -EINVAL;
	n = snprintf(buf, cap, "/sigma/%s", cluster);
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

int sg_etcd_node_format(const struct sg_etcd_node *n, char *buf, size_t cap)
{
	json_t *j;
	char *s;
	int len;

	if (n == NULL || sg_desc_check_name(n->name) < 0 || n->port == 0 || !(n->gbps > 0) ||
	    n->kind > SG_NODE_GPU || sg_ipv4_parse(n->addr, NULL) != 0 ||
	    strlen(n->control) >= sizeof(n->control))
		return -EINVAL;
	j = json_pack("{s:s, s:s, s:f, s:s, s:i, s:s}", "name", n->name, "kind",
		      sg_node_kind_name(n->kind), "gbps", n->gbps, "addr", n->addr, "port",
		      (int)n->port, "control", n->control);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (s == NULL)
		return -ENOMEM;
	len = (int)strlen(s);
	if ((size_t)len >= cap) {
		free(s);
		return -ENOSPC;
	}
	memcpy(buf, s, (size_t)len + 1);
	free(s);
	return len;
}

static int garbage(uint64_t *counter, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (counter != NULL)
		(*counter)++;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int sg_etcd_node_parse(const char *key, const char *value, size_t len, struct sg_etcd_node *n,
		       struct sg_etcd_garbage *g, char *why, size_t whylen)
{
	const char *name, *kind, *addr, *control = "", *last;
	json_t *j = json_loadb(value, len, 0, NULL), *port, *gbps, *ctl;
	int rc = 0;

	memset(n, 0, sizeof(*n));
	if (!json_is_object(j)) {
		rc = garbage(g ? &g->not_json : NULL, why, whylen, "not a JSON object");
		goto out;
	}
	name = json_string_value(json_object_get(j, "name"));
	kind = json_string_value(json_object_get(j, "kind"));
	addr = json_string_value(json_object_get(j, "addr"));
	port = json_object_get(j, "port");
	gbps = json_object_get(j, "gbps");
	ctl = json_object_get(j, "control");
	if (name == NULL || sg_desc_check_name(name) < 0) {
		rc = garbage(g ? &g->bad_field : NULL, why, whylen,
			     "\"name\" missing or not 1..63 of [A-Za-z0-9._-]");
		goto out;
	}
	last = strrchr(key, '/');
	if (last == NULL || strcmp(last + 1, name) != 0) {
		rc = garbage(g ? &g->name_mismatch : NULL, why, whylen,
			     "the key does not end with the record's name '%s'", name);
		goto out;
	}
	if (kind == NULL) {
		rc = garbage(g ? &g->bad_field : NULL, why, whylen, "\"kind\" missing");
		goto out;
	}
	if (sg_node_kind_from_name(kind, &n->kind) != 0) {
		rc = garbage(g ? &g->bad_kind : NULL, why, whylen,
			     "unknown kind '%.32s' (cpu or gpu)", kind);
		goto out;
	}
	if (sg_ipv4_parse(addr, NULL) != 0 || !json_is_integer(port) ||
	    json_integer_value(port) < 1 || json_integer_value(port) > 65535 ||
	    !json_is_number(gbps) || !(json_number_value(gbps) > 0) ||
	    !(json_number_value(gbps) <= 1e6) ||
	    (ctl != NULL && (!json_is_string(ctl) ||
			     strlen(json_string_value(ctl)) >= sizeof(n->control)))) {
		rc = garbage(g ? &g->bad_field : NULL, why, whylen, "\"addr\" (IPv4), \"port\" "
			     "(1..65535), \"gbps\" (> 0) or \"control\" missing or wrong");
		goto out;
	}
	if (ctl != NULL)
		control = json_string_value(ctl);
	snprintf(n->name, sizeof(n->name), "%s", name);
	snprintf(n->addr, sizeof(n->addr), "%s", addr);
	snprintf(n->control, sizeof(n->control), "%s", control);
	n->port = (uint16_t)json_integer_value(port);
	n->gbps = json_number_value(gbps);
out:
	json_decref(j);
	return rc;
}

static bool already_said(struct said *tab, unsigned int cap, const char *key, int64_t rev)
{
	unsigned int h = 0;

	for (const char *p = key; *p; p++)
		h = h * 31 + (unsigned char)*p;
	h %= cap;
	if (tab[h].rev == rev && strncmp(tab[h].key, key, sizeof(tab[h].key) - 1) == 0)
		return true;
	tab[h].rev = rev;
	snprintf(tab[h].key, sizeof(tab[h].key), "%s", key);
	return false;
}

int sg_etcd_nodes_get(struct sg_etcd *e, const char *cluster, struct sg_etcd_node *out,
		      unsigned int cap, struct sg_etcd_garbage *g)
{
	char prefix[SG_ETCD_CLUSTER_MAX + 16];
	struct sg_etcd_kv *kvs;
	size_t n;
	int rc, good = 0;

	if (e == NULL || (out == NULL && cap) || sg_etcd_prefix(cluster, prefix, sizeof(prefix) - 8))
		return -EINVAL;
	strcat(prefix, "/nodes/");
	rc = sg_etcd_get_prefix(e, prefix, &kvs, &n, NULL);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct sg_etcd_node node;
		char why[160];

		if (sg_etcd_node_parse(kvs[i].key, kvs[i].value, kvs[i].len, &node, g, why,
				       sizeof(why)) < 0) {
			if (!already_said(e->said, SAID_SLOTS, kvs[i].key, kvs[i].mod_revision))
				SG_ETCD_LOG("ignoring the node record at %s (revision %" PRId64 "): %s",
					    kvs[i].key, kvs[i].mod_revision, why);
			continue;
		}
		node.lease = kvs[i].lease;
		if ((unsigned int)good < cap)
			out[good] = node;
		good++;
	}
	sg_etcd_kvs_free(kvs, n);
	return good;
}

/* ---- job records ----------------------------------------------------------- */

/* Argon2id's cost for a token digest: a few ms once per job and node, 2^64 of them to search */
#define DIGEST_OPS 3
#define DIGEST_MEM (1u << 20)

int sg_etcd_token_digest(const char *cluster, uint32_t id, uint64_t token,
			 char out[SG_ETCD_DIGEST_LEN])
{
	unsigned char salt[crypto_pwhash_SALTBYTES], d[32];
	char ctx[SG_ETCD_CLUSTER_MAX + 48], tok[17];

	if (cluster == NULL || sg_desc_check_name(cluster) < 0 || out == NULL)
		return -EINVAL;
	if (!sg_etcd_global_init())
		return -ENOMEM;
	/* the salt ties the digest to the job: no table serves two jobs */
	snprintf(ctx, sizeof(ctx), "sigma-job-token-v1/%s/%" PRIu32, cluster, id);
	crypto_generichash(salt, sizeof(salt), (const unsigned char *)ctx, strlen(ctx), NULL, 0);
	snprintf(tok, sizeof(tok), "%016" PRIx64, token);
	if (crypto_pwhash(d, sizeof(d), tok, 16, salt, DIGEST_OPS, DIGEST_MEM,
			  crypto_pwhash_ALG_ARGON2ID13) != 0)
		return -ENOMEM;
	sodium_bin2hex(out, SG_ETCD_DIGEST_LEN, d, sizeof(d));
	sodium_memzero(tok, sizeof(tok));
	return 0;
}

int sg_etcd_job_from_descriptor(const char *cluster, const char *descriptor,
				const uint64_t *elems, uint32_t n_tensors, struct sg_etcd_job *j,
				char *err, size_t errlen)
{
	struct sg_desc *d;
	int rc;

	if (j == NULL || (elems == NULL && n_tensors) || n_tensors > SG_ETCD_JOB_MAX_TENSORS) {
		if (err != NULL && errlen)
			snprintf(err, errlen, "a job record has 0..%d tensors",
				 SG_ETCD_JOB_MAX_TENSORS);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	rc = sg_desc_parse(descriptor ? descriptor : "", d, err, errlen);
	if (rc < 0)
		goto out;
	*j = (struct sg_etcd_job){.id = d->id, .workers = d->workers, .dtype = d->dtype,
				  .mode = d->mode, .partition_bytes = d->partition_bytes,
				  .chunk_bytes = d->chunk_bytes, .open = n_tensors == 0,
				  .n_tensors = n_tensors, .n_nodes = d->n_nodes};
	if (n_tensors)
		memcpy(j->elems, elems, n_tensors * sizeof(*elems));
	for (unsigned int i = 0; i < d->n_nodes; i++) {
		struct sg_etcd_job_node *n = &j->nodes[i];

		memcpy(n->name, d->nodes[i].name, sizeof(n->name));
		n->kind = d->nodes[i].kind;
		n->gbps = d->nodes[i].gbps;
		n->weight = d->nodes[i].weight;
	}
	rc = sg_etcd_token_digest(cluster, d->id, d->token, j->token_digest);
	if (rc == 0)
		rc = sg_etcd_job_check(j, err, errlen);
	else if (err != NULL && errlen)
		snprintf(err, errlen, "bad cluster name '%s' (1..63 of [A-Za-z0-9._-])",
			 cluster ? cluster : "");
out:
	sodium_memzero(&d->token, sizeof(d->token));
	free(d);
	return rc;
}

/* Partitions of a tensor of @p elems elements in job @p j (0 for a bad dtype). */
static uint64_t tensor_parts(const struct sg_etcd_job *j, uint64_t elems)
{
	size_t es = sg_dtype_size(j->dtype);
	uint64_t pe = es ? j->partition_bytes / es : 0;

	return pe ? (elems + pe - 1) / pe : 0;
}

int sg_etcd_job_check(const struct sg_etcd_job *j, char *why, size_t whylen)
{
	double sum = 0;

	if (why != NULL && whylen)
		why[0] = '\0';
#define BAD(...) do { if (why != NULL && whylen) snprintf(why, whylen, __VA_ARGS__); \
		return -EINVAL; } while (0)
	if (j == NULL)
		BAD("no record");
	if (j->id == 0)
		BAD("\"id\" must be 1..2^32-1");
	if (j->workers < 1 || j->workers > SG_MAX_WORKERS)
		BAD("\"workers\" must be 1..%d", SG_MAX_WORKERS);
	if ((unsigned int)j->mode >= SG_MODE_COUNT)
		BAD("\"mode\" must be sync, async or deterministic");
	if (!(sg_dtype_valid(j->dtype) || (j->open && j->dtype == SG_DTYPE_ANY)))
		BAD("\"dtype\" unknown (any only for an open job)");
	if (j->partition_bytes % 8 || j->partition_bytes == 0 ||
	    j->partition_bytes > SG_MAX_PARTITION_BYTES)
		BAD("\"partition_bytes\" must be a multiple of 8, 8..%u", SG_MAX_PARTITION_BYTES);
	if (j->chunk_bytes % 8 || j->chunk_bytes == 0 || j->chunk_bytes > SG_MAX_CHUNK_BYTES ||
	    j->chunk_bytes > j->partition_bytes)
		BAD("\"chunk_bytes\" must be a multiple of 8, 8..%d and at most partition_bytes",
		    SG_MAX_CHUNK_BYTES);
	if (strlen(j->token_digest) != SG_ETCD_DIGEST_LEN - 1 ||
	    strspn(j->token_digest, "0123456789abcdef") != SG_ETCD_DIGEST_LEN - 1)
		BAD("\"token_digest\" must be 64 lowercase hex digits");
	if (j->open != (j->n_tensors == 0) || j->n_tensors > SG_ETCD_JOB_MAX_TENSORS)
		BAD("\"tensors\": 1..%d for a job of tensors, none for an open job",
		    SG_ETCD_JOB_MAX_TENSORS);
	for (uint32_t t = 0; t < j->n_tensors; t++) {
		uint64_t p = tensor_parts(j, j->elems[t]);

		if (j->elems[t] == 0 || p == 0 || p > SG_MAX_PARTS)
			BAD("tensor %u: %" PRIu64 " elements: 1..%d partitions", t, j->elems[t],
			    SG_MAX_PARTS);
	}
	if (j->n_nodes < 1 || j->n_nodes > SG_MAX_NODES)
		BAD("\"nodes\" must list 1..%d nodes", SG_MAX_NODES);
	for (uint32_t i = 0; i < j->n_nodes; i++) {
		const struct sg_etcd_job_node *n = &j->nodes[i];

		if (sg_desc_check_name(n->name) < 0 || n->kind > SG_NODE_GPU || !(n->gbps > 0) ||
		    !(n->gbps <= 1e6) || !(n->weight >= 0) || !(n->weight <= 1e6))
			BAD("node %u: \"name\" (1..63 of [A-Za-z0-9._-]), \"kind\" (cpu, gpu), "
			    "\"gbps\" (> 0) or \"weight\" (>= 0) missing or wrong", i);
		for (uint32_t k = 0; k < i; k++)
			if (strcmp(j->nodes[k].name, n->name) == 0)
				BAD("node '%s' listed twice", n->name);
		sum += n->weight;
	}
	if (!(sum > 0))
		BAD("every node's weight is 0");
#undef BAD
	return 0;
}

int sg_etcd_job_format(const struct sg_etcd_job *j, char **out)
{
	json_t *o, *tensors, *nodes;
	int rc = -ENOMEM;

	*out = NULL;
	if (sg_etcd_job_check(j, NULL, 0) < 0)
		return -EINVAL;
	tensors = json_array();
	nodes = json_array();
	o = json_pack("{s:I, s:I, s:s, s:s, s:I, s:I, s:s, s:b}", "id", (json_int_t)j->id,
		      "workers", (json_int_t)j->workers, "dtype", sg_dtype_name(j->dtype), "mode",
		      sg_mode_name(j->mode), "partition_bytes", (json_int_t)j->partition_bytes,
		      "chunk_bytes", (json_int_t)j->chunk_bytes, "token_digest", j->token_digest,
		      "open", j->open);
	if (o == NULL || tensors == NULL || nodes == NULL)
		goto out;
	for (uint32_t t = 0; t < j->n_tensors; t++)
		if (json_array_append_new(tensors, json_integer((json_int_t)j->elems[t])) != 0)
			goto out;
	for (uint32_t i = 0; i < j->n_nodes; i++)
		if (json_array_append_new(nodes, json_pack("{s:s, s:s, s:f, s:f}", "name",
							   j->nodes[i].name, "kind",
							   sg_node_kind_name(j->nodes[i].kind),
							   "gbps", j->nodes[i].gbps, "weight",
							   j->nodes[i].weight)) != 0)
			goto out;
	if (json_object_set(o, "tensors", tensors) != 0 || json_object_set(o, "nodes", nodes) != 0)
		goto out;
	/* weights read back as the same doubles: jansson writes 17 significant digits */
	*out = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
	rc = *out ? (int)strlen(*out) : -ENOMEM;
out:
	json_decref(tensors);
	json_decref(nodes);
	json_decref(o);
	return rc;
}

int sg_etcd_job_parse(const char *key, const char *value, size_t len, struct sg_etcd_job *j,
		      struct sg_etcd_garbage *g, char *why, size_t whylen)
{
	json_t *o = json_loadb(value, len, 0, NULL), *tensors, *nodes, *v;
	const char *dtype, *mode, *digest, *last = key ? strrchr(key, '/') : NULL;
	json_int_t id, workers, pbytes, cbytes;
	int open = -1, rc = 0;
	char idtext[16];
	size_t i;

	memset(j, 0, sizeof(*j));
	if (!json_is_object(o)) {
		rc = garbage(g ? &g->not_json : NULL, why, whylen, "not a JSON object");
		goto out;
	}
	if (json_unpack(o, "{s:I, s:I, s:s, s:s, s:I, s:I, s:s, s:o, s:o, s?b}", "id", &id,
			"workers", &workers, "dtype", &dtype, "mode", &mode, "partition_bytes",
			&pbytes, "chunk_bytes", &cbytes, "token_digest", &digest, "tensors",
			&tensors, "nodes", &nodes, "open", &open) != 0 ||
	    !json_is_array(tensors) || !json_is_array(nodes) || id < 1 || id > UINT32_MAX ||
	    workers < 0 || workers > SG_MAX_WORKERS || pbytes < 0 ||
	    pbytes > SG_MAX_PARTITION_BYTES || cbytes < 0 || cbytes > SG_MAX_CHUNK_BYTES ||
	    strlen(digest) >= sizeof(j->token_digest) ||
	    json_array_size(tensors) > SG_ETCD_JOB_MAX_TENSORS ||
	    json_array_size(nodes) > SG_MAX_NODES || json_array_size(nodes) == 0) {
		rc = garbage(g ? &g->bad_field : NULL, why, whylen, "a member missing, of the "
			     "wrong type or out of range (id, workers, dtype, mode, "
			     "partition_bytes, chunk_bytes, token_digest, tensors, nodes)");
		goto out;
	}
	snprintf(idtext, sizeof(idtext), "%" PRIu32, (uint32_t)id);
	if (last == NULL || strcmp(last + 1, idtext) != 0) {
		rc = garbage(g ? &g->name_mismatch : NULL, why, whylen,
			     "the key does not end with the record's id %s", idtext);
		goto out;
	}
	*j = (struct sg_etcd_job){.id = (uint32_t)id, .workers = (uint32_t)workers,
				  .partition_bytes = (uint32_t)pbytes,
				  .chunk_bytes = (uint32_t)cbytes,
				  .n_tensors = (uint32_t)json_array_size(tensors),
				  .n_nodes = (uint32_t)json_array_size(nodes)};
	j->open = open < 0 ? j->n_tensors == 0 : open != 0;
	snprintf(j->token_digest, sizeof(j->token_digest), "%s", digest);
	if (sg_job_dtype_from_name(dtype, &j->dtype) != 0 || sg_mode_from_name(mode, &j->mode) != 0) {
		rc = garbage(g ? &g->bad_field : NULL, why, whylen, "unknown dtype '%.16s' or mode "
			     "'%.16s'", dtype, mode);
		goto out;
	}
	json_array_foreach(tensors, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1) {
			rc = garbage(g ? &g->bad_field : NULL, why, whylen, "tensor %zu: not a "
				     "count of elements", i);
			goto out;
		}
		j->elems[i] = (uint64_t)json_integer_value(v);
	}
	json_array_foreach(nodes, i, v) {
		struct sg_etcd_job_node *n = &j->nodes[i];
		const char *name = NULL, *kind = NULL;

		if (json_unpack(v, "{s:s, s:s, s:F, s:F}", "name", &name, "kind", &kind, "gbps",
				&n->gbps, "weight", &n->weight) != 0 ||
		    strlen(name) >= sizeof(n->name)) {
			rc = garbage(g ? &g->bad_field : NULL, why, whylen, "node %zu: \"name\", "
				     "\"kind\", \"gbps\" or \"weight\" missing or wrong", i);
			goto out;
		}
		if (sg_node_kind_from_name(kind, &n->kind) != 0) {
			rc = garbage(g ? &g->bad_kind : NULL, why, whylen, "node %zu: unknown kind "
				     "'%.32s' (cpu or gpu)", i, kind);
			goto out;
		}
		snprintf(n->name, sizeof(n->name), "%s", name);
	}
	if (sg_etcd_job_check(j, why, whylen) < 0)
		rc = garbage(g ? &g->bad_field : NULL, NULL, 0, "");
out:
	json_decref(o);
	return rc;
}

long sg_etcd_job_keys(const struct sg_etcd_job *j, const bool *lost, unsigned int self,
		      struct sg_etcd_key *out, size_t cap)
{
	struct sg_ctl_place_node pn[SG_MAX_NODES];
	double w[SG_MAX_NODES], left = 0;
	uint64_t pe;
	long n = 0;

	if (j == NULL || self >= j->n_nodes || (out == NULL && cap) || j->open ||
	    sg_etcd_job_check(j, NULL, 0) < 0)
		return -EINVAL;
	for (unsigned int i = 0; i < j->n_nodes; i++) {
		pn[i] = (struct sg_ctl_place_node){.name = j->nodes[i].name, .kind = j->nodes[i].kind,
						   .gbps = j->nodes[i].gbps,
						   .alive = lost == NULL || !lost[i]};
		/* a lost node's weight is 0, the others' stay: only its keys move (as libsigma) */
		w[i] = pn[i].alive ? j->nodes[i].weight : 0;
		left += w[i];
	}
	if (!(left > 0))
		return -EHOSTDOWN;
	pe = j->partition_bytes / sg_dtype_size(j->dtype);
	for (uint32_t t = 0; t < j->n_tensors; t++)
		for (uint64_t off = 0, p = 0; off < j->elems[t]; off += pe, p++) {
			if (sg_ctl_place_key(pn, w, j->n_nodes,
					     sg_ctl_partition_key(t, (uint32_t)p)) != (int)self)
				continue;
			if ((size_t)n < cap)
				out[n] = (struct sg_etcd_key){
					.id = sg_wire_key(t, (uint32_t)p),
					.nelem = (uint32_t)(j->elems[t] - off < pe ? j->elems[t] - off
										   : pe)};
			n++;
		}
	return n;
}

/* "<prefix>/jobs/<id>" of @p cluster into @p key. @return 0 or -EINVAL. */
static int job_key(const char *cluster, uint32_t id, char *key, size_t cap)
{
	int rc = sg_etcd_prefix(cluster, key, cap);
	size_t n = strlen(key);

	if (rc == 0 && (size_t)snprintf(key + n, cap - n, "/jobs/%" PRIu32, id) >= cap - n)
		rc = -EINVAL;
	return rc;
}

int64_t sg_etcd_job_put(struct sg_etcd *e, const char *cluster, const struct sg_etcd_job *j,
			uint32_t ttl_s)
{
	char key[SG_ETCD_CLUSTER_MAX + 32], *val = NULL;
	int64_t lease = 0;
	int rc, len;

	if (e == NULL || j == NULL || ttl_s > 3600 || job_key(cluster, j->id, key, sizeof(key)) < 0)
		return -EINVAL;
	len = sg_etcd_job_format(j, &val);
	if (len < 0)
		return len;
	rc = sg_etcd_lease_grant(e, ttl_s ? ttl_s : SG_ETCD_JOB_TTL_S, &lease);
	if (rc == 0) {
		rc = sg_etcd_put(e, key, val, (size_t)len, lease);
		if (rc < 0) {
			char saved[SG_ETCD_ERR_LEN];

			memcpy(saved, e->err, sizeof(saved));
			sg_etcd_lease_revoke(e, lease);
			memcpy(e->err, saved, sizeof(saved));
		}
	}
	free(val);
	return rc < 0 ? rc : lease;
}

/* A client for a one-call function; the reason in @p err when it cannot be made. */
static struct sg_etcd *one_call_client(const struct sg_etcd_conf *conf, char *err, size_t errlen)
{
	struct sg_etcd *e = conf ? sg_etcd_create(conf) : NULL;

	if (e == NULL && err != NULL && errlen)
		snprintf(err, errlen, "etcd: %s", conf == NULL ? "no configuration" :
			 errno == EINVAL ? "bad endpoint list (http://host:port[,...])" :
			 strerror(errno));
	return e;
}

int64_t sg_etcd_job_record(const struct sg_etcd_conf *conf, const char *cluster,
			   const char *descriptor, const uint64_t *elems, uint32_t n_tensors,
			   uint32_t ttl_s, char *err, size_t errlen)
{
	struct sg_etcd_job *j = calloc(1, sizeof(*j));
	struct sg_etcd *e = NULL;
	int64_t rc;

	if (err != NULL && errlen)
		err[0] = '\0';
	if (j == NULL)
		return -ENOMEM;
	rc = sg_etcd_job_from_descriptor(cluster, descriptor, elems, n_tensors, j, err, errlen);
	if (rc == 0 && (e = one_call_client(conf, err, errlen)) == NULL)
		rc = -EINVAL;
	if (rc == 0) {
		rc = sg_etcd_job_put(e, cluster, j, ttl_s);
		if (rc < 0 && err != NULL && errlen)
			snprintf(err, errlen, "job %u's record: %s", j->id, sg_etcd_last_error(e));
	}
	sg_etcd_destroy(e);
	free(j);
	return rc;
}

int sg_etcd_job_unrecord(const struct sg_etcd_conf *conf, const char *cluster, uint32_t id,
			 char *err, size_t errlen)
{
	char key[SG_ETCD_CLUSTER_MAX + 32];
	struct sg_etcd_kv *kv = NULL;
	struct sg_etcd *e;
	int64_t lease = -1;
	size_t n = 0;
	int rc;

	if (err != NULL && errlen)
		err[0] = '\0';
	if (job_key(cluster, id, key, sizeof(key)) < 0) {
		if (err != NULL && errlen)
			snprintf(err, errlen, "bad cluster name (1..63 of [A-Za-z0-9._-])");
		return -EINVAL;
	}
	e = one_call_client(conf, err, errlen);
	if (e == NULL)
		return -EINVAL;
	/* a range of the key as a prefix: keep only the key itself (not /jobs/70 for 7) */
	rc = sg_etcd_get_prefix(e, key, &kv, &n, NULL);
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			lease = kv[i].lease;
	if (rc == 0 && lease < 0)
		rc = -ENOENT;
	/* its lease goes with it, so that nobody renews a record that is gone; a lease
	 * that is gone already leaves a key of its own to delete */
	if (rc == 0 && (lease == 0 || sg_etcd_lease_revoke(e, lease) < 0))
		rc = sg_etcd_delete(e, key, false);
	rc = rc < 0 ? rc : 0;
	if (rc < 0 && err != NULL && errlen)
		snprintf(err, errlen, "job %u's record: %s", id, rc == -ENOENT ?
			 "there is none" : sg_etcd_last_error(e));
	sg_etcd_kvs_free(kv, n);
	sg_etcd_destroy(e);
	return rc;
}

int sg_etcd_jobs_get(struct sg_etcd *e, const char *cluster, struct sg_etcd_job *out,
		     unsigned int cap, struct sg_etcd_garbage *g)
{
	char prefix[SG_ETCD_CLUSTER_MAX + 16];
	struct sg_etcd_job *j;
	struct sg_etcd_kv *kvs;
	size_t n;
	int rc, good = 0;

	if (e == NULL || (out == NULL && cap) || sg_etcd_prefix(cluster, prefix, sizeof(prefix) - 8))
		return -EINVAL;
	strcat(prefix, "/jobs/");
	j = malloc(sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	rc = sg_etcd_get_prefix(e, prefix, &kvs, &n, NULL);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char why[200];

		if (sg_etcd_job_parse(kvs[i].key, kvs[i].value, kvs[i].len, j, g, why,
				      sizeof(why)) < 0) {
			if (!already_said(e->said, SAID_SLOTS, kvs[i].key, kvs[i].mod_revision))
				SG_ETCD_LOG("ignoring the job record at %s (revision %" PRId64 "): %s",
					    kvs[i].key, kvs[i].mod_revision, why);
			continue;
		}
		j->lease = kvs[i].lease;
		if ((unsigned int)good < cap)
			out[good] = *j;
		good++;
	}
	if (rc == 0)
		sg_etcd_kvs_free(kvs, n);
	free(j);
	return rc < 0 ? rc : good;
}
