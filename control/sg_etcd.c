/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd over its v3 HTTP/JSON gateway (libcurl, jansson, libsodium's base64):
 * requests with endpoint failover, node records, a node's registration thread
 * and a worker's membership watch (sg_etcd.h).
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

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "sg_desc.h"
#include "sg_etcd.h"

#define SG_ETCD_LOG(fmt, ...) fprintf(stderr, "sigma.etcd: " fmt "\n", ##__VA_ARGS__)

#define URL_MAX 256
#define DEF_TIMEOUT_MS 1000
#define DEF_TTL_S 5
#define DEF_POLL_MS 100
#define MAX_REPLY (64u << 20) /* a range of many records; more is refused */

/*
 * Bad node records are logged once per key and revision: a watch reads the
 * same garbage every period. A small table of what was said is enough.
 */
struct said {
	char key[96];
	int64_t rev;
};

#define SAID_SLOTS 64

struct sg_etcd {
	CURL *curl;
	struct curl_slist *headers;
	char ep[SG_ETCD_MAX_ENDPOINTS][URL_MAX];
	unsigned int n_ep;
	unsigned int cur;		/* tried first */
	struct sg_etcd_conf conf;	/* strings below are our copies */
	char *user, *password, *ca_file, *cert_file, *key_file;
	char token[512];		/* auth token, "" if none */
	char *buf;			/* the reply */
	size_t len, cap;
	char err[SG_ETCD_ERR_LEN];
	struct said said[SAID_SLOTS];	/* bad records logged (sg_etcd_nodes_get()) */
};

static void set_err(struct sg_etcd *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->err, sizeof(e->err), fmt, ap);
	va_end(ap);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_init_once(void)
{
	curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK && sodium_init() >= 0;
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = strdup(s);
	if (d == NULL)
		*oom = true;
	return d;
}

static int parse_endpoints(struct sg_etcd *e, const char *list)
{
	const char *p = list;

	if (list == NULL || *list == '\0') {
		SG_ETCD_LOG("no etcd endpoint given (want http://host:port[,...])");
		return -EINVAL;
	}
	while (*p) {
		size_t n = strcspn(p, ",");

		if (n == 0 || n >= URL_MAX || e->n_ep == SG_ETCD_MAX_ENDPOINTS ||
		    !((n > 7 && strncmp(p, "http://", 7) == 0) ||
		      (n > 8 && strncmp(p, "https://", 8) == 0))) {
			SG_ETCD_LOG("bad etcd endpoint '%.*s' in '%s': want http://host:port or "
				    "https://host:port, at most %u, comma-separated", (int)n, p, list,
				    SG_ETCD_MAX_ENDPOINTS);
			return -EINVAL;
		}
		snprintf(e->ep[e->n_ep], URL_MAX, "%.*s", (int)(p[n - 1] == '/' ? n - 1 : n), p);
		e->n_ep++;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

struct sg_etcd *sg_etcd_create(const struct sg_etcd_conf *conf)
{
	struct sg_etcd *e;
	bool oom = false;
	int rc;

	if (conf == NULL) {
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&curl_once, curl_init_once);
	if (!curl_ok) {
		errno = ENOMEM;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	rc = parse_endpoints(e, conf->endpoints);
	if (rc < 0) {
		free(e);
		errno = -rc;
		return NULL;
	}
	e->conf = *conf;
	if (e->conf.timeout_ms == 0)
		e->conf.timeout_ms = DEF_TIMEOUT_MS;
	e->user = dup_or_null(conf->user, &oom);
	e->password = dup_or_null(conf->password, &oom);
	e->ca_file = dup_or_null(conf->ca_file, &oom);
	e->cert_file = dup_or_null(conf->cert_file, &oom);
	e->key_file = dup_or_null(conf->key_file, &oom);
	e->conf.endpoints = NULL;
	e->curl = curl_easy_init();
	e->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (oom || e->curl == NULL || e->headers == NULL) {
		sg_etcd_destroy(e);
		errno = ENOMEM;
		return NULL;
	}
	return e;
}

void sg_etcd_destroy(struct sg_etcd *e)
{
	if (e == NULL)
		return;
	if (e->curl != NULL)
		curl_easy_cleanup(e->curl);
	curl_slist_free_all(e->headers);
	free(e->user);
	if (e->password != NULL)
		sodium_memzero(e->password, strlen(e->password));
	free(e->password);
	free(e->ca_file);
	free(e->cert_file);
	free(e->key_file);
	free(e->buf);
	free(e);
}

const char *sg_etcd_last_error(const struct sg_etcd *e)
{
	return e == NULL ? "no client" : e->err;
}

const char *sg_etcd_endpoint(const struct sg_etcd *e)
{
	return e->ep[e->cur];
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct sg_etcd *e = arg;
	size_t n = size * nmemb;

	if (e->len + n + 1 > MAX_REPLY)
		return 0; /* aborts the transfer */
	if (e->len + n + 1 > e->cap) {
		size_t cap = (e->len + n + 1) * 2;
		char *b = realloc(e->buf, cap);

		if (b == NULL)
			return 0;
		e->buf = b;
		e->cap = cap;
	}
	memcpy(e->buf + e->len, ptr, n);
	e->len += n;
	e->buf[e->len] = '\0';
	return n;
}

/* One POST of @p body to @p path on endpoint @p i. @return the HTTP status, or -1 (no answer). */
static long post_once(struct sg_etcd *e, unsigned int i, const char *path, const char *body,
		      bool with_token, char *why, size_t whylen)
{
	struct curl_slist *h = e->headers, *auth = NULL;
	char url[URL_MAX + 64], hdr[600];
	long status = 0;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", e->ep[i], path);
	if (with_token && e->token[0]) {
		snprintf(hdr, sizeof(hdr), "Authorization: %s", e->token);
		auth = curl_slist_append(NULL, hdr);
		if (auth == NULL) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		auth->next = e->headers;
		h = auth;
	}
	e->len = 0;
	curl_easy_reset(e->curl);
	curl_easy_setopt(e->curl, CURLOPT_URL, url);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)e->conf.timeout_ms);
	curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)e->conf.timeout_ms);
	curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (e->ca_file != NULL)
		curl_easy_setopt(e->curl, CURLOPT_CAINFO, e->ca_file);
	if (e->cert_file != NULL)
		curl_easy_setopt(e->curl, CURLOPT_SSLCERT, e->cert_file);
	if (e->key_file != NULL)
		curl_easy_setopt(e->curl, CURLOPT_SSLKEY, e->key_file);
	rc = curl_easy_perform(e->curl);
	curl_slist_free_all(auth == NULL ? NULL : (auth->next = NULL, auth));
	if (rc != CURLE_OK) {
		snprintf(why, whylen, "%s: %s", e->ep[i], curl_easy_strerror(rc));
		return -1;
	}
	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 500 && status != 503 && e->len == 0) {
		snprintf(why, whylen, "%s: HTTP %ld", e->ep[i], status);
		return -1;
	}
	return status;
}

/*
 * POST @p req (consumed) to @p path, trying each endpoint from the current one.
 * @return the reply's JSON object in *out, or -errno with e->err set.
 */
static int call(struct sg_etcd *e, const char *path, json_t *req, json_t **out);

static int authenticate(struct sg_etcd *e, unsigned int i, char *why, size_t whylen)
{
	json_t *req = json_pack("{s:s, s:s}", "name", e->user, "password",
				e->password ? e->password : "");
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_t *rep;
	const char *tok;
	long st;

	json_decref(req);
	if (body == NULL)
		return -ENOMEM;
	st = post_once(e, i, "/v3/auth/authenticate", body, false, why, whylen);
	sodium_memzero(body, strlen(body));
	free(body);
	if (st < 0)
		return -EHOSTUNREACH;
	rep = json_loads(e->buf ? e->buf : "", 0, NULL);
	tok = json_string_value(json_object_get(rep, "token"));
	if (st != 200 || tok == NULL || strlen(tok) >= sizeof(e->token)) {
		snprintf(why, whylen, "%s: etcd refused user '%s': %s", e->ep[i], e->user,
			 json_string_value(json_object_get(rep, "message")) ?: "no token");
		json_decref(rep);
		return -EACCES;
	}
	snprintf(e->token, sizeof(e->token), "%s", tok);
	json_decref(rep);
	return 0;
}

static int call(struct sg_etcd *e, const char *path, json_t *req, json_t **out)
{
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	char why[SG_ETCD_MAX_ENDPOINTS][160];
	bool retried_auth = false;
	json_t *rep = NULL;
	int rc = -EHOSTUNREACH;

	json_decref(req);
	*out = NULL;
	if (body == NULL)
		return -ENOMEM;
	for (unsigned int k = 0; k < e->n_ep; k++) {
		unsigned int i = (e->cur + k) % e->n_ep;
		const char *msg;
		long st;

		why[k][0] = '\0';
		if (e->user != NULL && e->token[0] == '\0') {
			rc = authenticate(e, i, why[k], sizeof(why[k]));
			if (rc == -EHOSTUNREACH)
				continue;
			if (rc < 0)
				break;
		}
		st = post_once(e, i, path, body, true, why[k], sizeof(why[k]));
		if (st < 0) {
			rc = -EHOSTUNREACH;
			continue;
		}
		e->cur = i; /* it answered */
		rep = json_loads(e->buf ? e->buf : "", JSON_DISABLE_EOF_CHECK, NULL);
		if (!json_is_object(rep)) {
			set_err(e, "%s%s: unreadable answer (HTTP %ld, %zu bytes)", e->ep[i], path,
				st, e->len);
			rc = -EPROTO;
			break;
		}
		msg = json_string_value(json_object_get(rep, "message"));
		if (msg == NULL)
			msg = json_string_value(json_object_get(rep, "error"));
		if (st != 200 || msg != NULL) {
			/* an expired auth token: get a new one once */
			if (e->user != NULL && !retried_auth && msg != NULL &&
			    strstr(msg, "token") != NULL) {
				retried_auth = true;
				e->token[0] = '\0';
				json_decref(rep);
				rep = NULL;
				k--;
				continue;
			}
			set_err(e, "%s%s: etcd said: %s (HTTP %ld)", e->ep[i], path,
				msg ? msg : "no message", st);
			rc = -EREMOTEIO;
			break;
		}
		free(body);
		*out = rep;
		return 0;
	}
	if (rc == -EHOSTUNREACH) {
		int len = snprintf(e->err, sizeof(e->err), "no etcd endpoint answered");

		for (unsigned int k = 0; k < e->n_ep && len > 0 && (size_t)len < sizeof(e->err); k++)
			len += snprintf(e->err + len, sizeof(e->err) - len, "%s %s",
					k ? ";" : ":", why[k]);
	} else if (rc == -EACCES) {
		set_err(e, "%s", why[0]);
		rc = -EREMOTEIO;
	}
	json_decref(rep);
	free(body);
	return rc;
}

/* Base64 of @p len bytes as a new JSON string (NULL: out of memory). */
static json_t *b64(const void *data, size_t len)
{
	size_t cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(cap);
	json_t *j;

	if (s == NULL)
		return NULL;
	sodium_bin2base64(s, cap, data, len, sodium_base64_VARIANT_ORIGINAL);
	j = json_string(s);
	free(s);
	return j;
}

/* Decode JSON string @p j (base64) into a new NUL-terminated buffer. @return 0 or -EPROTO. */
static int unb64(json_t *j, char **out, size_t *len)
{
	const char *s = json_string_value(j);
	size_t n = s ? strlen(s) : 0, got = 0;
	char *d;

	*out = NULL;
	*len = 0;
	if (s == NULL && j != NULL)
		return -EPROTO;
	d = malloc(n + 1);
	if (d == NULL)
		return -ENOMEM;
	if (n && sodium_base642bin((unsigned char *)d, n, s, n, NULL, &got, NULL,
				   sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(d);
		return -EPROTO;
	}
	d[got] = '\0';
	*out = d;
	*len = got;
	return 0;
}

/* etcd writes 64-bit integers as strings; absent is 0. */
static int64_t i64(json_t *j)
{
	if (json_is_integer(j))
		return json_integer_value(j);
	if (json_is_string(j))
		return strtoll(json_string_value(j), NULL, 10);
	return 0;
}

static json_t *key_obj(const char *key)
{
	json_t *k = b64(key, strlen(key));

	return k ? json_pack("{s:o}", "key", k) : NULL;
}

/* The first key after every key that starts with @p prefix. */
static json_t *range_end(const char *prefix)
{
	size_t n = strlen(prefix);
	unsigned char end[512];

	if (n == 0 || n > sizeof(end))
		return NULL;
	memcpy(end, prefix, n);
	while (n > 0 && end[n - 1] == 0xff)
		n--;
	if (n == 0)
		return b64("\0", 1); /* every key */
	end[n - 1]++;
	return b64(end, n);
}

int sg_etcd_put(struct sg_etcd *e, const char *key, const void *value, size_t len, int64_t lease)
{
	json_t *req, *rep;
	int rc;

	if (e == NULL || key == NULL || *key == '\0' || (value == NULL && len))
		return -EINVAL;
	req = key_obj(key);
	if (req == NULL || json_object_set_new(req, "value", b64(value ? value : "", len)) ||
	    (lease && json_object_set_new(req, "lease", json_integer(lease)))) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = call(e, "/v3/kv/put", req, &rep);
	json_decref(rep);
	return rc;
}

int sg_etcd_delete(struct sg_etcd *e, const char *key, bool prefix)
{
	json_t *req, *rep;
	int rc;

	if (e == NULL || key == NULL || *key == '\0')
		return -EINVAL;
	req = key_obj(key);
	if (req == NULL || (prefix && json_object_set_new(req, "range_end", range_end(key)))) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = call(e, "/v3/kv/deleterange", req, &rep);
	if (rc == 0)
		rc = (int)i64(json_object_get(rep, "deleted"));
	json_decref(rep);
	return rc;
}

void sg_etcd_kvs_free(struct sg_etcd_kv *kvs, size_t n)
{
	if (kvs == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(kvs[i].key);
		free(kvs[i].value);
	}
	free(kvs);
}

int sg_etcd_get_prefix(struct sg_etcd *e, const char *prefix, struct sg_etcd_kv **kvs, size_t *n,
		       int64_t *revision)
{
	json_t *req, *rep, *arr;
	struct sg_etcd_kv *v = NULL;
	size_t cnt = 0;
	int rc;

	if (e == NULL || prefix == NULL || *prefix == '\0' || kvs == NULL || n == NULL)
		return -EINVAL;
	*kvs = NULL;
	*n = 0;
	req = key_obj(prefix);
	if (req == NULL || json_object_set_new(req, "range_end", range_end(prefix))) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = call(e, "/v3/kv/range", req, &rep);
	if (rc < 0)
		return rc;
	arr = json_object_get(rep, "kvs");
	if (arr != NULL && !json_is_array(arr)) {
		set_err(e, "range of %s: kvs is not an array", prefix);
		rc = -EPROTO;
		goto out;
	}
	if (json_array_size(arr)) {
		v = calloc(json_array_size(arr), sizeof(*v));
		if (v == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *kv = json_array_get(arr, i);
		size_t klen;

		rc = unb64(json_object_get(kv, "key"), &v[cnt].key, &klen);
		if (rc == 0)
			rc = unb64(json_object_get(kv, "value"), &v[cnt].value, &v[cnt].len);
		if (rc < 0 || v[cnt].key == NULL || v[cnt].value == NULL) {
			free(v[cnt].key);
			free(v[cnt].value);
			v[cnt].key = v[cnt].value = NULL;
			if (rc == -ENOMEM)
				goto out;
			rc = 0;
			continue; /* not base64: not a key we can name */
		}
		v[cnt].mod_revision = i64(json_object_get(kv, "mod_revision"));
		v[cnt].lease = i64(json_object_get(kv, "lease"));
		cnt++;
	}
	if (revision != NULL)
		*revision = i64(json_object_get(json_object_get(rep, "header"), "revision"));
	*kvs = v;
	*n = cnt;
	v = NULL;
	rc = 0;
out:
	sg_etcd_kvs_free(v, cnt);
	json_decref(rep);
	return rc;
}

int sg_etcd_lease_grant(struct sg_etcd *e, uint32_t ttl_s, int64_t *id)
{
	json_t *rep;
	int rc;

	if (e == NULL || id == NULL || ttl_s == 0 || ttl_s > 3600)
		return -EINVAL;
	rc = call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), &rep);
	if (rc == 0) {
		*id = i64(json_object_get(rep, "ID"));
		if (*id == 0) {
			set_err(e, "lease grant: no lease id in etcd's answer");
			rc = -EPROTO;
		}
	}
	json_decref(rep);
	return rc;
}

int sg_etcd_lease_keepalive(struct sg_etcd *e, int64_t id, int64_t *ttl_left)
{
	json_t *rep, *res;
	int64_t ttl;
	int rc;

	if (e == NULL || id == 0)
		return -EINVAL;
	rc = call(e, "/v3/lease/keepalive", json_pack("{s:I}", "ID", (json_int_t)id), &rep);
	if (rc < 0)
		return rc;
	/* a stream of one answer: {"result": {..., "TTL": "5"}}; no TTL once the lease is gone */
	res = json_object_get(rep, "result");
	ttl = i64(json_object_get(res ? res : rep, "TTL"));
	json_decref(rep);
	if (ttl_left != NULL)
		*ttl_left = ttl;
	if (ttl <= 0) {
		set_err(e, "lease %" PRIx64 " is gone (expired or revoked)", (uint64_t)id);
		return -ENOENT;
	}
	return 0;
}

int sg_etcd_lease_revoke(struct sg_etcd *e, int64_t id)
{
	json_t *rep;
	int rc;

	if (e == NULL || id == 0)
		return -EINVAL;
	rc = call(e, "/v3/lease/revoke", json_pack("{s:I}", "ID", (json_int_t)id), &rep);
	json_decref(rep);
	return rc;
}

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
	struct in_addr a;

	if (n == NULL || sg_desc_check_name(n->name) < 0 || n->port == 0 || !(n->gbps > 0) ||
	    n->kind > SG_NODE_GPU || inet_pton(AF_INET, n->addr, &a) != 1 ||
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
	struct in_addr a;
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
	if (addr == NULL || inet_pton(AF_INET, addr, &a) != 1 || !json_is_integer(port) ||
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

/* ---- background threads -------------------------------------------------- */

/* A stoppable sleep: returns true when asked to stop. */
struct ticker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
};

static int ticker_init(struct ticker *t)
{
	pthread_condattr_t ca;

	t->stop = false;
	if (pthread_condattr_init(&ca) != 0)
		return -ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&t->cv, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		return -ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&t->mu, NULL);
	return 0;
}

static void ticker_fini(struct ticker *t)
{
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
}

static bool ticker_wait(struct ticker *t, uint32_t ms)
{
	struct timespec ts;
	bool stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&t->mu);
	while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
		;
	stop = t->stop;
	pthread_mutex_unlock(&t->mu);
	return stop;
}

static void ticker_stop(struct ticker *t)
{
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* A background thread with its stoppable sleep and the lock of what it publishes. */
struct worker {
	pthread_t th;
	struct ticker tick;
	pthread_mutex_t mu;
};

static int worker_start(struct worker *w, void *(*fn)(void *), void *arg)
{
	int rc;

	if (ticker_init(&w->tick) < 0)
		return ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	rc = pthread_create(&w->th, NULL, fn, arg);
	if (rc != 0) {
		ticker_fini(&w->tick);
		pthread_mutex_destroy(&w->mu);
	}
	return rc;
}

static void worker_stop(struct worker *w)
{
	ticker_stop(&w->tick);
	pthread_join(w->th, NULL);
	ticker_fini(&w->tick);
	pthread_mutex_destroy(&w->mu);
}

/* ---- registration -------------------------------------------------------- */

struct sg_etcd_reg {
	struct sg_etcd *e;
	struct sg_etcd_reg_conf conf;
	char key[SG_ETCD_CLUSTER_MAX + SG_NAME_MAX + 16];
	char record[512];
	int record_len;
	struct worker w; /* its lock guards st */
	struct sg_etcd_reg_status st;
};

static void reg_fail(struct sg_etcd_reg *r, const char *what, bool *quiet)
{
	pthread_mutex_lock(&r->w.mu);
	r->st.failures++;
	r->st.registered = false;
	snprintf(r->st.last_error, sizeof(r->st.last_error), "%s: %s", what,
		 sg_etcd_last_error(r->e));
	pthread_mutex_unlock(&r->w.mu);
	if (!*quiet)
		SG_ETCD_LOG("node %s: %s failed: %s; summing goes on, registering again when etcd "
			    "answers", r->conf.node.name, what, sg_etcd_last_error(r->e));
	*quiet = true;
}

static void *reg_main(void *arg)
{
	struct sg_etcd_reg *r = arg;
	uint32_t period_ms = r->conf.ttl_s * 1000 / 3;
	int64_t lease = 0;
	bool quiet = false; /* a failure was said and nothing went right since */

	if (period_ms < 300)
		period_ms = 300;
	/* a request must not outlast a period: the lease would run out behind it */
	if (r->e->conf.timeout_ms > period_ms)
		r->e->conf.timeout_ms = period_ms;
	do {
		int rc;

		if (lease != 0) {
			rc = sg_etcd_lease_keepalive(r->e, lease, NULL);
			if (rc == 0) {
				pthread_mutex_lock(&r->w.mu);
				r->st.keepalives++;
				r->st.registered = true;
				pthread_mutex_unlock(&r->w.mu);
				if (quiet)
					SG_ETCD_LOG("node %s: etcd is back (%s), lease %" PRIx64 " kept",
						    r->conf.node.name, sg_etcd_endpoint(r->e),
						    (uint64_t)lease);
				quiet = false;
				continue;
			}
			if (rc != -ENOENT) {
				reg_fail(r, "lease keepalive", &quiet);
				/* retry sooner than the period: the lease runs out meanwhile */
				continue;
			}
			SG_ETCD_LOG("node %s: lease %" PRIx64 " expired (etcd was out of reach "
				    "longer than the TTL of %u s): registering again",
				    r->conf.node.name, (uint64_t)lease, r->conf.ttl_s);
			pthread_mutex_lock(&r->w.mu);
			r->st.expired++;
			r->st.registered = false;
			r->st.lease = 0;
			pthread_mutex_unlock(&r->w.mu);
			lease = 0;
		}
		rc = sg_etcd_lease_grant(r->e, r->conf.ttl_s, &lease);
		if (rc < 0) {
			lease = 0;
			reg_fail(r, "lease grant", &quiet);
			continue;
		}
		rc = sg_etcd_put(r->e, r->key, r->record, (size_t)r->record_len, lease);
		if (rc < 0) {
			reg_fail(r, "record put", &quiet);
			sg_etcd_lease_revoke(r->e, lease);
			lease = 0;
			continue;
		}
		pthread_mutex_lock(&r->w.mu);
		r->st.registrations++;
		r->st.registered = true;
		r->st.lease = lease;
		pthread_mutex_unlock(&r->w.mu);
		SG_ETCD_LOG("node %s registered at %s (lease %" PRIx64 ", TTL %u s) through %s%s",
			    r->conf.node.name, r->key, (uint64_t)lease, r->conf.ttl_s,
			    sg_etcd_endpoint(r->e), quiet ? ", etcd is back" : "");
		quiet = false;
	} while (!ticker_wait(&r->w.tick, quiet ? 200 : period_ms));
	pthread_mutex_lock(&r->w.mu);
	r->st.lease = lease;
	pthread_mutex_unlock(&r->w.mu);
	return NULL;
}

struct sg_etcd_reg *sg_etcd_reg_start(const struct sg_etcd_reg_conf *conf)
{
	struct sg_etcd_reg *r;
	int rc;

	if (conf == NULL || (conf->ttl_s > 3600)) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->conf = *conf;
	r->conf.cluster = NULL;
	r->conf.etcd.endpoints = NULL;
	if (r->conf.ttl_s == 0)
		r->conf.ttl_s = DEF_TTL_S;
	rc = sg_etcd_prefix(conf->cluster, r->key, sizeof(r->key) - SG_NAME_MAX - 8);
	if (rc == 0) {
		r->record_len = sg_etcd_node_format(&conf->node, r->record, sizeof(r->record));
		rc = r->record_len < 0 ? r->record_len : 0;
	}
	if (rc < 0) {
		SG_ETCD_LOG("bad registration: cluster '%s' (1..63 of [A-Za-z0-9._-]) or node "
			    "record of '%s'", conf->cluster ? conf->cluster : "", conf->node.name);
		free(r);
		errno = EINVAL;
		return NULL;
	}
	strcat(r->key, "/nodes/");
	strcat(r->key, conf->node.name);
	r->e = sg_etcd_create(&conf->etcd);
	if (r->e == NULL) {
		rc = errno;
		free(r);
		errno = rc;
		return NULL;
	}
	rc = worker_start(&r->w, reg_main, r);
	if (rc != 0) {
		sg_etcd_destroy(r->e);
		free(r);
		errno = rc;
		return NULL;
	}
	return r;
}

void sg_etcd_reg_status(struct sg_etcd_reg *r, struct sg_etcd_reg_status *st)
{
	pthread_mutex_lock(&r->w.mu);
	*st = r->st;
	pthread_mutex_unlock(&r->w.mu);
}

void sg_etcd_reg_stop(struct sg_etcd_reg *r, bool leave)
{
	if (r == NULL)
		return;
	worker_stop(&r->w);
	if (leave && r->st.lease != 0 && sg_etcd_lease_revoke(r->e, r->st.lease) == 0)
		SG_ETCD_LOG("node %s left: lease %" PRIx64 " revoked", r->conf.node.name,
			    (uint64_t)r->st.lease);
	sg_etcd_destroy(r->e);
	free(r);
}

/* ---- membership watch ---------------------------------------------------- */

struct sg_etcd_watch {
	struct sg_etcd *e;
	char cluster[SG_ETCD_CLUSTER_MAX];
	uint32_t poll_ms;
	struct worker w;		/* its lock guards names, n, seen, st */
	_Atomic uint64_t gen;		/* st.generation, read without the lock */
	char (*names)[SG_NAME_MAX];	/* live names, sorted */
	unsigned int n;
	/* every name seen, with the lease first seen (-1: lost for good), sorted by name */
	struct seen {
		char name[SG_NAME_MAX];
		int64_t lease;
	} *seen;
	unsigned int n_seen;
	struct sg_etcd_watch_stats st;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * Keep the nodes of this read that are still under the lease first seen, in
 * @p names (sorted); a name gone or under a new lease is lost for good.
 * @return how many are kept.
 */
static int watch_incarnations(struct sg_etcd_watch *w, const struct sg_etcd_node *nodes, int n,
			      char (*names)[SG_NAME_MAX])
{
	int kept = 0;

	for (unsigned int k = 0; k < w->n_seen; k++) {
		bool here = false;

		for (int i = 0; i < n && !here; i++)
			here = strcmp(nodes[i].name, w->seen[k].name) == 0 &&
			       nodes[i].lease == w->seen[k].lease;
		if (!here && w->seen[k].lease != -1) {
			SG_ETCD_LOG("membership of cluster %s: node %s is gone (its record under "
				    "lease %" PRIx64 " is not there)", w->cluster, w->seen[k].name,
				    (uint64_t)w->seen[k].lease);
			w->seen[k].lease = -1;
		}
	}
	for (int i = 0; i < n; i++) {
		struct seen *sn = NULL;

		for (unsigned int k = 0; k < w->n_seen && sn == NULL; k++)
			if (strcmp(w->seen[k].name, nodes[i].name) == 0)
				sn = &w->seen[k];
		if (sn == NULL && w->n_seen < SG_MAX_NODES) {
			sn = &w->seen[w->n_seen++];
			memcpy(sn->name, nodes[i].name, SG_NAME_MAX);
			sn->lease = nodes[i].lease;
		}
		if (sn != NULL && sn->lease == nodes[i].lease)
			memcpy(names[kept++], nodes[i].name, SG_NAME_MAX);
	}
	qsort(names, (size_t)kept, SG_NAME_MAX, name_cmp);
	return kept;
}

static void watch_poll(struct sg_etcd_watch *w, struct sg_etcd_node *nodes, bool *quiet)
{
	struct sg_etcd_garbage g = {0};
	int n = sg_etcd_nodes_get(w->e, w->cluster, nodes, SG_MAX_NODES, &g);
	char names[SG_MAX_NODES][SG_NAME_MAX];
	bool changed;

	if (n < 0) {
		pthread_mutex_lock(&w->w.mu);
		w->st.failures++;
		w->st.reachable = false;
		snprintf(w->st.last_error, sizeof(w->st.last_error), "%s",
			 sg_etcd_last_error(w->e));
		pthread_mutex_unlock(&w->w.mu);
		if (!*quiet)
			SG_ETCD_LOG("membership of cluster %s: %s; keeping the %u node(s) last "
				    "read", w->cluster, sg_etcd_last_error(w->e), w->n);
		*quiet = true;
		return;
	}
	if (*quiet)
		SG_ETCD_LOG("membership of cluster %s: etcd answers again (%s)", w->cluster,
			    sg_etcd_endpoint(w->e));
	*quiet = false;
	if (n > SG_MAX_NODES)
		n = SG_MAX_NODES;
	pthread_mutex_lock(&w->w.mu);
	n = watch_incarnations(w, nodes, n, names);
	changed = w->st.generation == 0 || (unsigned int)n != w->n ||
		  memcmp(names, w->names, (size_t)n * SG_NAME_MAX) != 0;
	w->st.polls++;
	w->st.reachable = true;
	w->st.nodes = (unsigned int)n;
	w->st.garbage.not_json += g.not_json;
	w->st.garbage.bad_field += g.bad_field;
	w->st.garbage.bad_kind += g.bad_kind;
	w->st.garbage.name_mismatch += g.name_mismatch;
	if (changed) {
		memcpy(w->names, names, (size_t)n * SG_NAME_MAX);
		w->n = (unsigned int)n;
		if (w->st.generation)
			w->st.changes++;
		w->st.generation++;
		atomic_store(&w->gen, w->st.generation);
	}
	pthread_mutex_unlock(&w->w.mu);
}

static void *watch_main(void *arg)
{
	struct sg_etcd_watch *w = arg;
	struct sg_etcd_node *nodes = calloc(SG_MAX_NODES, sizeof(*nodes));
	bool quiet = false;

	if (nodes == NULL)
		return NULL;
	do
		watch_poll(w, nodes, &quiet);
	while (!ticker_wait(&w->w.tick, w->poll_ms));
	free(nodes);
	return NULL;
}

struct sg_etcd_watch *sg_etcd_watch_start(const struct sg_etcd_conf *etcd, const char *cluster,
					  uint32_t poll_ms)
{
	struct sg_etcd_watch *w;
	char prefix[SG_ETCD_CLUSTER_MAX + 16];
	int rc;

	if (etcd == NULL || sg_etcd_prefix(cluster, prefix, sizeof(prefix)) < 0 ||
	    (poll_ms && (poll_ms < 10 || poll_ms > 10000))) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->names = calloc(SG_MAX_NODES, SG_NAME_MAX);
	w->seen = calloc(SG_MAX_NODES, sizeof(*w->seen));
	w->e = sg_etcd_create(etcd);
	snprintf(w->cluster, sizeof(w->cluster), "%s", cluster);
	w->poll_ms = poll_ms ? poll_ms : DEF_POLL_MS;
	rc = w->e == NULL ? errno : w->names == NULL || w->seen == NULL ? ENOMEM :
		 worker_start(&w->w, watch_main, w);
	if (rc != 0) {
		sg_etcd_destroy(w->e);
		free(w->seen);
		free(w->names);
		free(w);
		errno = rc;
		return NULL;
	}
	return w;
}

int sg_etcd_watch_alive(void *watch, uint64_t *gen, const char *const *names, unsigned int n,
			bool *alive)
{
	struct sg_etcd_watch *w = watch;
	uint64_t g = atomic_load(&w->gen);

	if (g == 0 || g == *gen)
		return 0;
	pthread_mutex_lock(&w->w.mu);
	for (unsigned int i = 0; i < n; i++)
		alive[i] = names[i] != NULL &&
			   bsearch(names[i], w->names, w->n, SG_NAME_MAX, name_cmp) != NULL;
	*gen = w->st.generation;
	pthread_mutex_unlock(&w->w.mu);
	return 1;
}

void sg_etcd_watch_stats(struct sg_etcd_watch *w, struct sg_etcd_watch_stats *st)
{
	pthread_mutex_lock(&w->w.mu);
	*st = w->st;
	pthread_mutex_unlock(&w->w.mu);
}

void sg_etcd_watch_stop(struct sg_etcd_watch *w)
{
	if (w == NULL)
		return;
	worker_stop(&w->w);
	sg_etcd_destroy(w->e);
	free(w->seen);
	free(w->names);
	free(w);
}
