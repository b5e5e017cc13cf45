/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd over its v3 HTTP/JSON gateway (libcurl, jansson, libsodium's base64):
 * the client, requests with endpoint failover and authentication, keys,
 * transactions and leases (sg_etcd.h). Records are sg_etcd_records.c's, the
 * threads sg_etcd_watch.c's.
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

bool sg_etcd_global_init(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_ok;
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
	if (!sg_etcd_global_init()) {
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
	if (oom || e->curl == NULL) {
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

/* Append @p n bytes and a NUL to a buffer of MAX_REPLY at most. @return false: no room. */
bool sg_etcd_buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (*len + n + 1 > MAX_REPLY)
		return false;
	if (*len + n + 1 > *cap) {
		size_t c = (*len + n + 1) * 2;
		char *b = realloc(*buf, c);

		if (b == NULL)
			return false;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct sg_etcd *e = arg;
	size_t n = size * nmemb;

	/* 0 aborts the transfer */
	return sg_etcd_buf_append(&e->buf, &e->len, &e->cap, ptr, n) ? n : 0;
}

/*
 * Why a transfer to endpoint @p ep failed (@p rc, libcurl's detail @p cerr) into
 * @p why, with what to check when it is TLS's: the messages of libcurl alone
 * ("Error in the HTTP2 framing layer") do not say that etcd refused our
 * certificate, which with TLS 1.3 shows only once the handshake is over.
 */
void sg_etcd_curl_why(const char *ep, CURLcode rc, const char *cerr, char *why, size_t whylen)
{
	const char *hint = "";

	if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)
		hint = " (check ca_file: the CA that signed etcd's --cert-file)";
	else if (rc == CURLE_SSL_CERTPROBLEM)
		hint = " (check cert_file and key_file: a PEM certificate and its key)";
	else if (strncmp(ep, "https://", 8) == 0 &&
		 (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SEND_ERROR ||
		  rc == CURLE_RECV_ERROR || rc == CURLE_HTTP2 || rc == CURLE_GOT_NOTHING))
		hint = " (did etcd refuse our certificate? cert_file and key_file: a pair signed "
		       "by a CA of its --trusted-ca-file)";
	snprintf(why, whylen, "%s: %s%s", ep, cerr[0] ? cerr : curl_easy_strerror(rc), hint);
}

/*
 * What an answer that is not JSON says (its first line, printable bytes only),
 * with the fix when it is etcd 3.4's gateway refusing a certificate's
 * CommonName, into @p out.
 */
static void reply_text(const struct sg_etcd *e, char *out, size_t len)
{
	size_t n = 0;

	for (size_t k = 0; e->buf != NULL && k < e->len && e->buf[k] != '\n' && n + 1 < len &&
			   n < 120; k++)
		if (e->buf[k] >= ' ' && e->buf[k] < 127)
			out[n++] = e->buf[k];
	out[n] = '\0';
	if (strstr(out, "CommonName") != NULL)
		snprintf(out + n, len - n, " (make cert_file without a CommonName: etcd's "
			 "gateway refuses one when auth is on)");
}

/*
 * Make @p h a POST of @p body to @p path on endpoint @p i, with the JSON content
 * type, the auth token (@p with_token) and @p extra (a header line, or NULL).
 * *@p hdrs gets the header list to free once the transfer is over.
 * @return 0, or -ENOMEM.
 */
int sg_etcd_easy_prepare(struct sg_etcd *e, CURL *h, unsigned int i, const char *path,
			const char *body, bool with_token, const char *extra, char *cerr,
			struct curl_slist **hdrs)
{
	char url[URL_MAX + 64], hdr[600];
	struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json"), *t = l;

	snprintf(url, sizeof(url), "%s%s", e->ep[i], path);
	if (t != NULL && with_token && e->token[0]) {
		snprintf(hdr, sizeof(hdr), "Authorization: %s", e->token);
		t = curl_slist_append(l, hdr);
	}
	if (t != NULL && extra != NULL)
		t = curl_slist_append(l, extra);
	sodium_memzero(hdr, sizeof(hdr));
	if (t == NULL) {
		curl_slist_free_all(l);
		return -ENOMEM;
	}
	curl_easy_reset(h);
	cerr[0] = '\0';
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)e->conf.timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (e->ca_file != NULL)
		curl_easy_setopt(h, CURLOPT_CAINFO, e->ca_file);
	if (e->cert_file != NULL)
		curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert_file);
	if (e->key_file != NULL)
		curl_easy_setopt(h, CURLOPT_SSLKEY, e->key_file);
	*hdrs = l;
	return 0;
}

/* One POST of @p body to @p path on endpoint @p i. @return the HTTP status, or -1 (no answer). */
static long post_once(struct sg_etcd *e, unsigned int i, const char *path, const char *body,
		      bool with_token, char *why, size_t whylen)
{
	struct curl_slist *hdrs = NULL;
	long status = 0;
	CURLcode rc;

	if (sg_etcd_easy_prepare(e, e->curl, i, path, body, with_token, NULL, e->cerr, &hdrs) < 0) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	e->len = 0;
	curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)e->conf.timeout_ms);
	rc = curl_easy_perform(e->curl);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK) {
		sg_etcd_curl_why(e->ep[i], rc, e->cerr, why, whylen);
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

int sg_etcd_authenticate(struct sg_etcd *e, unsigned int i, char *why, size_t whylen)
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
		char text[300];

		reply_text(e, text, sizeof(text));
		snprintf(why, whylen, "%s: etcd refused user '%s': %.200s", e->ep[i], e->user,
			 json_string_value(json_object_get(rep, "message")) ?:
			 (rep == NULL && text[0] ? text : "no token"));
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
	char why[SG_ETCD_MAX_ENDPOINTS][SG_ETCD_ERR_LEN];
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
			rc = sg_etcd_authenticate(e, i, why[k], sizeof(why[k]));
			if (rc == -EHOSTUNREACH)
				continue;
			if (rc == -EACCES) {
				set_err(e, "%s%s", retried_auth ? "etcd refused our auth token "
					"(expired or revoked), and a new one: " : "", why[k]);
				rc = -EREMOTEIO;
			}
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
			char text[300];

			reply_text(e, text, sizeof(text));
			set_err(e, "%s%s: unreadable answer (HTTP %ld, %zu bytes)%s%s", e->ep[i],
				path, st, e->len, text[0] ? ": " : "", text);
			rc = st == 200 ? -EPROTO : -EREMOTEIO;
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
			set_err(e, "%s%s: etcd said: %s (HTTP %ld)%s", e->ep[i], path,
				msg ? msg : "no message", st,
				msg != NULL && strstr(msg, "user name is empty") != NULL ?
				"; etcd has authentication on: give a user and its password "
				"([cluster] user and password_file; sigma-udpd --etcd-user and "
				"--etcd-password-file)" : "");
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
	}
	json_decref(rep);
	free(body);
	return rc;
}

int sg_etcd_password_load(const char *what, const char *path, char buf[SG_ETCD_PASSWORD_MAX],
			  char *err, size_t errlen)
{
	char tmp[SG_ETCD_PASSWORD_MAX + 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC), e;
	struct stat sb;
	ssize_t r = 1;
	size_t n = 0, len = 0;

	if (fd < 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077)) {
		snprintf(err, errlen, "%s %s may be read by others (mode %03o): a password must be "
			 "private; run: chmod 600 %s", what, path, (unsigned int)(sb.st_mode & 0777),
			 path);
		close(fd);
		return -EINVAL;
	}
	/* a pipe may deliver it in pieces: read up to the first line's end or the limit */
	while (n < sizeof(tmp) && memchr(tmp, '\n', n) == NULL &&
	       (r = read(fd, tmp + n, sizeof(tmp) - n)) > 0)
		n += (size_t)r;
	e = r < 0 ? errno : 0;
	close(fd);
	while (len < n && tmp[len] != '\n' && tmp[len] != '\r')
		len++;
	if (e == 0 && len > 0 && len < SG_ETCD_PASSWORD_MAX) {
		memcpy(buf, tmp, len);
		buf[len] = '\0';
	} else {
		snprintf(err, errlen, "%s %s: %s", what, path, e ? strerror(e) : len ?
			 "a first line of 256 bytes or more" : "the first line (the password) is empty");
	}
	sodium_memzero(tmp, sizeof(tmp));
	return e == 0 && len > 0 && len < SG_ETCD_PASSWORD_MAX ? 0 : -EINVAL;
}

/* Base64 of @p len bytes as a new JSON string (NULL: out of memory). */
json_t *sg_etcd_b64(const void *data, size_t len)
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
int sg_etcd_unb64(json_t *j, char **out, size_t *len)
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

/* etcd writes 64-bit integers as strings; absent (or not a number) is 0. */
int64_t sg_etcd_i64(json_t *j)
{
	int64_t v = 0;

	if (json_is_integer(j))
		return json_integer_value(j);
	if (json_is_string(j) && sg_parse_i64(json_string_value(j), INT64_MIN, INT64_MAX, &v) != 0)
		v = 0;
	return v;
}

static json_t *key_obj(const char *key)
{
	json_t *k = sg_etcd_b64(key, strlen(key));

	return k ? json_pack("{s:o}", "key", k) : NULL;
}

/* The first key after every key that starts with @p prefix. */
json_t *sg_etcd_range_end(const char *prefix)
{
	size_t n = strlen(prefix);
	unsigned char end[512];

	if (n == 0 || n > sizeof(end))
		return NULL;
	memcpy(end, prefix, n);
	while (n > 0 && end[n - 1] == 0xff)
		n--;
	if (n == 0)
		return sg_etcd_b64("\0", 1); /* every key */
	end[n - 1]++;
	return sg_etcd_b64(end, n);
}

int sg_etcd_put(struct sg_etcd *e, const char *key, const void *value, size_t len, int64_t lease)
{
	json_t *req, *rep;
	int rc;

	if (e == NULL || key == NULL || *key == '\0' || (value == NULL && len))
		return -EINVAL;
	req = key_obj(key);
	if (req == NULL || json_object_set_new(req, "value", sg_etcd_b64(value ? value : "", len)) ||
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
	if (req == NULL || (prefix && json_object_set_new(req, "range_end", sg_etcd_range_end(key)))) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = call(e, "/v3/kv/deleterange", req, &rep);
	if (rc == 0)
		rc = (int)sg_etcd_i64(json_object_get(rep, "deleted"));
	json_decref(rep);
	return rc;
}

/* A txn compare: key @p key does not exist (its create revision is 0). */
static json_t *absent_cmp(const char *key)
{
	json_t *k = sg_etcd_b64(key, strlen(key));

	return k ? json_pack("{s:o, s:s, s:s, s:s}", "key", k, "result", "EQUAL", "target",
			     "CREATE", "create_revision", "0") : NULL;
}

int sg_etcd_put_if_absent(struct sg_etcd *e, const char *key, const void *value, size_t len,
			  int64_t lease, const char *const *absent, unsigned int n_absent)
{
	json_t *req, *rep = NULL, *cmp = json_array(), *put = key_obj(key);
	int rc;

	if (e == NULL || key == NULL || *key == '\0' || (value == NULL && len) ||
	    (absent == NULL && n_absent)) {
		json_decref(cmp);
		json_decref(put);
		return -EINVAL;
	}
	if (cmp == NULL || put == NULL || json_array_append_new(cmp, absent_cmp(key)) ||
	    json_object_set_new(put, "value", sg_etcd_b64(value ? value : "", len)) ||
	    (lease && json_object_set_new(put, "lease", json_integer(lease)))) {
		json_decref(cmp);
		json_decref(put);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < n_absent; i++)
		if (absent[i] == NULL || json_array_append_new(cmp, absent_cmp(absent[i]))) {
			json_decref(cmp);
			json_decref(put);
			return absent[i] == NULL ? -EINVAL : -ENOMEM;
		}
	req = json_pack("{s:o, s:[{s:o}]}", "compare", cmp, "success", "request_put", put);
	if (req == NULL)
		return -ENOMEM;
	rc = call(e, "/v3/kv/txn", req, &rep);
	if (rc == 0)
		rc = json_is_true(json_object_get(rep, "succeeded")) ? 1 : 0;
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
	if (req == NULL || json_object_set_new(req, "range_end", sg_etcd_range_end(prefix))) {
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

		rc = sg_etcd_unb64(json_object_get(kv, "key"), &v[cnt].key, &klen);
		if (rc == 0)
			rc = sg_etcd_unb64(json_object_get(kv, "value"), &v[cnt].value, &v[cnt].len);
		if (rc < 0 || v[cnt].key == NULL || v[cnt].value == NULL) {
			free(v[cnt].key);
			free(v[cnt].value);
			v[cnt].key = v[cnt].value = NULL;
			if (rc == -ENOMEM)
				goto out;
			rc = 0;
			continue; /* not base64: not a key we can name */
		}
		v[cnt].mod_revision = sg_etcd_i64(json_object_get(kv, "mod_revision"));
		v[cnt].lease = sg_etcd_i64(json_object_get(kv, "lease"));
		cnt++;
	}
	if (revision != NULL)
		*revision = sg_etcd_i64(json_object_get(json_object_get(rep, "header"), "revision"));
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
		*id = sg_etcd_i64(json_object_get(rep, "ID"));
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
	ttl = sg_etcd_i64(json_object_get(res ? res : rep, "TTL"));
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
