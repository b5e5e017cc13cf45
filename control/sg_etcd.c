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
	char ep[SG_ETCD_MAX_ENDPOINTS][URL_MAX];
	unsigned int n_ep;
	unsigned int cur;		/* tried first */
	struct sg_etcd_conf conf;	/* strings below are our copies */
	char *user, *password, *ca_file, *cert_file, *key_file;
	char token[512];		/* auth token, "" if none */
	char cerr[CURL_ERROR_SIZE];	/* libcurl's detail of the last failure of curl */
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
static bool buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
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
	return buf_append(&e->buf, &e->len, &e->cap, ptr, n) ? n : 0;
}

/*
 * Why a transfer to endpoint @p ep failed (@p rc, libcurl's detail @p cerr) into
 * @p why, with what to check when it is TLS's: the messages of libcurl alone
 * ("Error in the HTTP2 framing layer") do not say that etcd refused our
 * certificate, which with TLS 1.3 shows only once the handshake is over.
 */
static void curl_why(const char *ep, CURLcode rc, const char *cerr, char *why, size_t whylen)
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
static int easy_prepare(struct sg_etcd *e, CURL *h, unsigned int i, const char *path,
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

	if (easy_prepare(e, e->curl, i, path, body, with_token, NULL, e->cerr, &hdrs) < 0) {
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
		curl_why(e->ep[i], rc, e->cerr, why, whylen);
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
			rc = authenticate(e, i, why[k], sizeof(why[k]));
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

/* etcd writes 64-bit integers as strings; absent (or not a number) is 0. */
static int64_t i64(json_t *j)
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

/* A txn compare: key @p key does not exist (its create revision is 0). */
static json_t *absent_cmp(const char *key)
{
	json_t *k = b64(key, strlen(key));

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
	    json_object_set_new(put, "value", b64(value ? value : "", len)) ||
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
	pthread_once(&curl_once, curl_init_once);
	if (!curl_ok)
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

/* One key under the watched prefix as last read: the copy of etcd the watch keeps. */
struct ment {
	char *key;
	int64_t mod;			/* its mod_revision */
	int64_t lease;
	bool node_ok;			/* a node record that parses: node */
	struct sg_etcd_node node;
	struct sg_etcd_job *job;	/* a job record that parses, or NULL */
};

/* A lease the watch renews for its user (sg_etcd_watch_keep()). */
struct kept {
	int64_t lease;
	uint64_t due;			/* next renewal, CLOCK_MONOTONIC ns */
};

/* Why a stream ended, from the stream's side. */
struct wstream {
	struct sg_etcd_watch *w;
	char *buf;			/* what came and is not a whole message yet */
	size_t len, cap;
	bool created;			/* etcd said the watch is made */
	int err;			/* 0, or why we ended it: -ESTALE, -EPROTO, -ECONNRESET... */
	char why[160];
};

struct sg_etcd_watch {
	struct sg_etcd *e;
	char cluster[SG_ETCD_CLUSTER_MAX];
	char prefix[SG_ETCD_CLUSTER_MAX + 32];	  /* read and watched: nodes/ or every record */
	char nodes_pfx[SG_ETCD_CLUSTER_MAX + 32]; /* <prefix>/nodes/ */
	char jobs_pfx[SG_ETCD_CLUSTER_MAX + 32];  /* <prefix>/jobs/ */
	uint32_t poll_ms;
	bool polling;			/* no streams: the conf, or the gateway refused one */
	struct worker w;		/* its lock guards names, n, seen, ents, kept, st */
	_Atomic uint64_t gen;		/* st.generation, read without the lock */
	_Atomic bool stop;
	CURLM *multi;			/* the stream's, woken up by sg_etcd_watch_stop() */
	CURL *sh;			/* the stream's transfer */
	char serr[CURL_ERROR_SIZE];	/* libcurl's detail of its last failure */
	int efd;			/* an eventfd written at every change */
	char (*names)[SG_NAME_MAX];	/* live names, sorted */
	unsigned int n;
	/* every name seen, with the lease first seen (-1: lost for good), sorted by name */
	struct seen {
		char name[SG_NAME_MAX];
		int64_t lease;
	} *seen;
	unsigned int n_seen;
	struct ment *ents;		/* sorted by key */
	size_t n_ents, cap_ents;
	bool jobs_changed;		/* since the last publication */
	struct kept *kept;
	unsigned int n_kept;
	int64_t rev;			/* the store's revision the copy is at */
	struct sg_etcd_watch_stats st;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/* ---- the watch's copy of etcd (its lock held) ---- */

/* Index of @p key in the copy, or -1 with *@p at where it would go. */
static long ment_find(const struct sg_etcd_watch *w, const char *key, size_t *at)
{
	size_t lo = 0, hi = w->n_ents;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(w->ents[mid].key, key);

		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return -1;
}

static void ment_clear(struct sg_etcd_watch *w, struct ment *m)
{
	if (m->job != NULL)
		w->jobs_changed = true;
	free(m->key);
	free(m->job);
	memset(m, 0, sizeof(*m));
}

static void ment_del(struct sg_etcd_watch *w, const char *key)
{
	size_t at;
	long i = ment_find(w, key, &at);

	if (i < 0)
		return;
	ment_clear(w, &w->ents[i]);
	memmove(&w->ents[i], &w->ents[i + 1], (w->n_ents - (size_t)i - 1) * sizeof(*w->ents));
	w->n_ents--;
}

/*
 * Read the record @p value at @p key (revision @p mod) into @p m: a node's or a
 * job's by its prefix; garbage counted and logged once, at its revision.
 */
static void ment_parse(struct sg_etcd_watch *w, struct ment *m, const char *value, size_t len)
{
	char why[200];

	if (strncmp(m->key, w->nodes_pfx, strlen(w->nodes_pfx)) == 0) {
		m->node_ok = sg_etcd_node_parse(m->key, value, len, &m->node, &w->st.garbage, why,
						sizeof(why)) == 0;
		m->node.lease = m->lease;
		if (!m->node_ok)
			SG_ETCD_LOG("ignoring the node record at %s (revision %" PRId64 "): %s",
				    m->key, m->mod, why);
	} else if (strncmp(m->key, w->jobs_pfx, strlen(w->jobs_pfx)) == 0) {
		m->job = malloc(sizeof(*m->job));
		if (m->job != NULL && sg_etcd_job_parse(m->key, value, len, m->job,
							&w->st.job_garbage, why, sizeof(why)) < 0) {
			SG_ETCD_LOG("ignoring the job record at %s (revision %" PRId64 "): %s",
				    m->key, m->mod, why);
			free(m->job);
			m->job = NULL;
		}
		if (m->job != NULL)
			m->job->lease = m->lease;
		w->jobs_changed = true;
	}
}

/* @p key is @p value at revision @p mod: read it unless the copy has that revision. */
static int ment_put(struct sg_etcd_watch *w, const char *key, const char *value, size_t len,
		    int64_t mod, int64_t lease)
{
	size_t at = 0;
	long i = ment_find(w, key, &at);
	struct ment *m;

	if (i >= 0 && w->ents[i].mod == mod && w->ents[i].lease == lease)
		return 0;
	if (i >= 0) {
		m = &w->ents[i];
		ment_clear(w, m);
	} else {
		if (w->n_ents == w->cap_ents) {
			size_t cap = w->cap_ents ? 2 * w->cap_ents : 16;
			struct ment *n = realloc(w->ents, cap * sizeof(*n));

			if (n == NULL)
				return -ENOMEM;
			w->ents = n;
			w->cap_ents = cap;
		}
		memmove(&w->ents[at + 1], &w->ents[at], (w->n_ents - at) * sizeof(*w->ents));
		w->n_ents++;
		m = &w->ents[at];
		memset(m, 0, sizeof(*m));
	}
	m->key = strdup(key);
	if (m->key == NULL) {
		ment_del(w, key);
		return -ENOMEM;
	}
	m->mod = mod;
	m->lease = lease;
	ment_parse(w, m, value, len);
	return 0;
}

/* The copy becomes the read @p kvs (a range of the whole prefix). */
static int ment_reset(struct sg_etcd_watch *w, const struct sg_etcd_kv *kvs, size_t n)
{
	/* keys gone since: both lists are sorted by key */
	for (size_t i = 0, k = 0; i < w->n_ents;) {
		while (k < n && strcmp(kvs[k].key, w->ents[i].key) < 0)
			k++;
		if (k < n && strcmp(kvs[k].key, w->ents[i].key) == 0) {
			i++;
			continue;
		}
		ment_del(w, w->ents[i].key);
	}
	for (size_t k = 0; k < n; k++)
		if (ment_put(w, kvs[k].key, kvs[k].value, kvs[k].len, kvs[k].mod_revision,
			     kvs[k].lease) < 0)
			return -ENOMEM;
	return 0;
}

/* Publish the copy: the live names (and their generation), jobs; wake the user on a change. */
static void watch_publish(struct sg_etcd_watch *w)
{
	struct sg_etcd_node nodes[SG_MAX_NODES];
	char names[SG_MAX_NODES][SG_NAME_MAX];
	unsigned int jobs = 0;
	bool changed;
	int n = 0;

	for (size_t i = 0; i < w->n_ents; i++) {
		if (w->ents[i].node_ok && n < SG_MAX_NODES)
			nodes[n++] = w->ents[i].node;
		jobs += w->ents[i].job != NULL;
	}
	n = watch_incarnations(w, nodes, n, names);
	changed = w->st.generation == 0 || (unsigned int)n != w->n ||
		  memcmp(names, w->names, (size_t)n * SG_NAME_MAX) != 0;
	w->st.nodes = (unsigned int)n;
	w->st.jobs = jobs;
	if (changed) {
		memcpy(w->names, names, (size_t)n * SG_NAME_MAX);
		w->n = (unsigned int)n;
		if (w->st.generation)
			w->st.changes++;
		w->st.generation++;
		atomic_store(&w->gen, w->st.generation);
	}
	if (w->jobs_changed)
		w->st.job_changes++;
	if (changed || w->jobs_changed) {
		uint64_t one = 1;

		if (write(w->efd, &one, sizeof(one)) < 0) {
			/* the counter is at its limit: the reader has a wake-up pending anyway */
		}
	}
	w->jobs_changed = false;
}

/* ---- reachability, leases kept, sleeping ---- */

static void watch_unreachable(struct sg_etcd_watch *w, const char *why, bool *quiet)
{
	pthread_mutex_lock(&w->w.mu);
	w->st.failures++;
	w->st.reachable = false;
	w->st.streaming = false;
	snprintf(w->st.last_error, sizeof(w->st.last_error), "%s", why);
	pthread_mutex_unlock(&w->w.mu);
	if (!*quiet)
		SG_ETCD_LOG("membership of cluster %s: %s; keeping the %u node(s) last read",
			    w->cluster, why, w->n);
	*quiet = true;
}

static void watch_reachable(struct sg_etcd_watch *w, bool *quiet)
{
	if (*quiet)
		SG_ETCD_LOG("membership of cluster %s: etcd answers again (%s)", w->cluster,
			    sg_etcd_endpoint(w->e));
	*quiet = false;
}

/*
 * Renew the kept leases that are due (each every third of its TTL).
 * @return ms until the next is due (at most 1000).
 */
static uint32_t keep_due(struct sg_etcd_watch *w)
{
	uint64_t now = mono_ns(), next = now + 1000000000ull;

	for (;;) {
		int64_t lease = 0, ttl = 0;
		int rc;

		pthread_mutex_lock(&w->w.mu);
		for (unsigned int i = 0; i < w->n_kept && lease == 0; i++)
			if (w->kept[i].due <= now) {
				lease = w->kept[i].lease;
				w->kept[i].due = now + 1000000000ull; /* until it is answered */
			}
		pthread_mutex_unlock(&w->w.mu);
		if (lease == 0)
			break;
		rc = sg_etcd_lease_keepalive(w->e, lease, &ttl);
		pthread_mutex_lock(&w->w.mu);
		for (unsigned int i = 0; i < w->n_kept; i++) {
			if (w->kept[i].lease != lease)
				continue;
			if (rc == 0) {
				w->st.keepalives++;
				w->kept[i].due = now + (uint64_t)(ttl > 1 ? ttl : 1) * 333000000ull;
			} else {
				w->st.keep_failures++;
				/* gone (-ENOENT): its record went with it; else etcd is away */
				w->kept[i].due = rc == -ENOENT ? UINT64_MAX : now + 200000000ull;
			}
		}
		pthread_mutex_unlock(&w->w.mu);
	}
	pthread_mutex_lock(&w->w.mu);
	for (unsigned int i = 0; i < w->n_kept; i++)
		if (w->kept[i].due < next)
			next = w->kept[i].due;
	pthread_mutex_unlock(&w->w.mu);
	return next > now ? (uint32_t)((next - now) / 1000000) : 0;
}

/* Sleep @p ms (renewing the kept leases): @return true when asked to stop. */
static bool watch_sleep(struct sg_etcd_watch *w, uint32_t ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000ull;

	for (;;) {
		uint64_t now = mono_ns();
		uint32_t due = keep_due(w), left;

		if (now >= end)
			return atomic_load(&w->stop);
		left = (uint32_t)((end - now) / 1000000) + 1;
		if (ticker_wait(&w->w.tick, due < left ? due + 1 : left))
			return true;
	}
}

/* ---- reading: a range of the prefix ---- */

static int watch_range(struct sg_etcd_watch *w, bool *quiet)
{
	struct sg_etcd_kv *kvs = NULL;
	size_t n = 0;
	int64_t rev = 0;
	int rc = sg_etcd_get_prefix(w->e, w->prefix, &kvs, &n, &rev);

	if (rc < 0) {
		watch_unreachable(w, sg_etcd_last_error(w->e), quiet);
		return rc;
	}
	watch_reachable(w, quiet);
	pthread_mutex_lock(&w->w.mu);
	rc = ment_reset(w, kvs, n);
	w->rev = rev;
	w->st.polls++;
	w->st.reachable = true;
	watch_publish(w);
	pthread_mutex_unlock(&w->w.mu);
	sg_etcd_kvs_free(kvs, n);
	return rc;
}

/* ---- reading: a v3 watch stream ---- */

/* One event of a watch response (the lock held). @return 0, or -EPROTO for one we cannot read. */
static int stream_event(struct sg_etcd_watch *w, json_t *ev)
{
	json_t *kv = json_object_get(ev, "kv");
	const char *type = json_string_value(json_object_get(ev, "type"));
	char *key = NULL, *value = NULL;
	size_t klen, vlen;
	int64_t mod = i64(json_object_get(kv, "mod_revision"));
	int rc;

	if (!json_is_object(kv) || unb64(json_object_get(kv, "key"), &key, &klen) < 0 ||
	    key == NULL || (type != NULL && strcmp(type, "PUT") != 0 && strcmp(type, "DELETE") != 0)) {
		free(key);
		return -EPROTO;
	}
	if (type != NULL && strcmp(type, "DELETE") == 0) {
		ment_del(w, key);
		rc = 0;
	} else {
		rc = unb64(json_object_get(kv, "value"), &value, &vlen);
		if (rc == 0)
			rc = ment_put(w, key, value ? value : "", value ? vlen : 0, mod,
				      i64(json_object_get(kv, "lease")));
	}
	if (mod > w->rev)
		w->rev = mod;
	w->st.events++;
	free(key);
	free(value);
	return rc;
}

/* One message of the stream. @return 0, or < 0 to end the stream (ws->err, ws->why set). */
static int stream_message(struct wstream *ws, json_t *msg)
{
	struct sg_etcd_watch *w = ws->w;
	json_t *res = json_object_get(msg, "result"), *evs, *ev;
	const char *why;
	size_t i;
	int rc = 0;

	if (json_is_object(json_object_get(msg, "error")) || !json_is_object(res)) {
		why = json_string_value(json_object_get(json_object_get(msg, "error"), "message"));
		snprintf(ws->why, sizeof(ws->why), "the watch stream said: %s",
			 why ? why : "not a watch response");
		return ws->err = res == NULL && why != NULL ? -EREMOTEIO : -EPROTO;
	}
	if (json_is_true(json_object_get(res, "created")))
		ws->created = true;
	if (json_is_true(json_object_get(res, "canceled"))) {
		int64_t compact = i64(json_object_get(res, "compact_revision"));

		why = json_string_value(json_object_get(res, "cancel_reason"));
		if (compact > 0)
			snprintf(ws->why, sizeof(ws->why), "etcd compacted its history past "
				 "revision %" PRId64 " (now %" PRId64 ")", w->rev, compact);
		else
			snprintf(ws->why, sizeof(ws->why), "etcd ended the watch: %s",
				 why ? why : "no reason given");
		return ws->err = compact > 0 ? -ESTALE : -ECONNRESET;
	}
	evs = json_object_get(res, "events");
	if (json_array_size(evs) == 0)
		return 0;
	pthread_mutex_lock(&w->w.mu);
	json_array_foreach(evs, i, ev)
		if (rc == 0)
			rc = stream_event(w, ev);
	watch_publish(w);
	pthread_mutex_unlock(&w->w.mu);
	if (rc < 0) {
		snprintf(ws->why, sizeof(ws->why), "an event of the watch stream is unreadable");
		ws->err = rc;
	}
	return rc;
}

/*
 * The stream's bytes: etcd's gateway writes each message as one line of JSON.
 * Whole lines are read (each may hold several objects: json_loadb() with
 * JSON_DISABLE_EOF_CHECK gives where each ends); the rest waits for more.
 */
static size_t on_stream(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct wstream *ws = arg;
	size_t n = size * nmemb, used = 0;
	char *nl;

	if (!buf_append(&ws->buf, &ws->len, &ws->cap, ptr, n)) {
		snprintf(ws->why, sizeof(ws->why), "a watch message over %u bytes, or no memory",
			 MAX_REPLY);
		ws->err = -EPROTO;
		return 0;
	}
	while ((nl = memchr(ws->buf + used, '\n', ws->len - used)) != NULL) {
		size_t end = (size_t)(nl - ws->buf);

		while (used < end) {
			json_error_t jerr;
			json_t *msg;

			while (used < end && (ws->buf[used] == ' ' || ws->buf[used] == '\t' ||
					      ws->buf[used] == '\r'))
				used++;
			if (used >= end)
				break;
			msg = json_loadb(ws->buf + used, end - used, JSON_DISABLE_EOF_CHECK, &jerr);
			if (msg == NULL) {
				snprintf(ws->why, sizeof(ws->why), "unreadable watch message: %.120s",
					 jerr.text);
				ws->err = -EPROTO;
				return 0;
			}
			used += (size_t)jerr.position;
			if (stream_message(ws, msg) < 0) {
				json_decref(msg);
				return 0;
			}
			json_decref(msg);
		}
		used = end + 1;
	}
	memmove(ws->buf, ws->buf + used, ws->len - used);
	ws->len -= used;
	return n;
}

/* The body of the watch request: from the revision after the copy's. NULL: out of memory. */
static char *stream_body(struct sg_etcd_watch *w)
{
	json_t *k = b64(w->prefix, strlen(w->prefix)), *end = range_end(w->prefix);
	json_t *req = k && end ? json_pack("{s:{s:o, s:o, s:I}}", "create_request", "key", k,
					   "range_end", end, "start_revision",
					   (json_int_t)(w->rev + 1)) : NULL;
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;

	if (req == NULL) {
		json_decref(k);
		json_decref(end);
	}
	json_decref(req);
	return body;
}

/*
 * Hold a watch stream on endpoint @p i until it ends. @return 0 when asked to
 * stop; -ECONNRESET (it was made and ended: make another), -ESTALE (compacted:
 * read afresh), -EHOSTUNREACH (no answer from the endpoint), -EOPNOTSUPP (the
 * endpoint answered, but not with a watch), -EPROTO, -ENOMEM; why in @p why.
 */
static int stream_on(struct sg_etcd_watch *w, unsigned int i, const char *body, char *why,
		     size_t whylen)
{
	struct sg_etcd *e = w->e;
	struct wstream ws = {.w = w};
	struct curl_slist *hdrs = NULL;
	uint64_t t0 = mono_ns();
	CURLcode res = CURLE_OK;
	long status = 0;
	int running = 1, rc;

	/* refused credentials are not a gateway without watches: no fall-back to polling */
	if (e->user != NULL && e->token[0] == '\0' &&
	    (rc = authenticate(e, i, why, whylen)) < 0)
		return rc;
	/* "hasleader": a member cut off from the others ends the watch instead of going quiet */
	if (easy_prepare(e, w->sh, i, "/v3/watch", body, true, "Grpc-Metadata-hasleader: true",
			 w->serr, &hdrs) < 0)
		return -ENOMEM;
	curl_easy_setopt(w->sh, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(w->sh, CURLOPT_WRITEDATA, &ws);
	/* a member that vanishes without a reset: probes after 2 s idle, then every second */
	curl_easy_setopt(w->sh, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(w->sh, CURLOPT_TCP_KEEPIDLE, 2L);
	curl_easy_setopt(w->sh, CURLOPT_TCP_KEEPINTVL, 1L);
	if (curl_multi_add_handle(w->multi, w->sh) != CURLM_OK) {
		curl_slist_free_all(hdrs);
		return -ENOMEM;
	}
	while (!atomic_load(&w->stop) && running && ws.err == 0) {
		uint32_t ms;

		if (curl_multi_perform(w->multi, &running) != CURLM_OK)
			break;
		if (!running || ws.err)
			break;
		if (!ws.created && mono_ns() - t0 > (uint64_t)e->conf.timeout_ms * 1000000ull) {
			snprintf(why, whylen, "%s: no watch made within %u ms", e->ep[i],
				 e->conf.timeout_ms);
			res = CURLE_OPERATION_TIMEDOUT;
			break;
		}
		if (ws.created && !w->st.streaming) {
			pthread_mutex_lock(&w->w.mu);
			w->st.streams++;
			w->st.streaming = w->st.reachable = true;
			pthread_mutex_unlock(&w->w.mu);
			e->cur = i;
		}
		ms = keep_due(w);
		curl_multi_poll(w->multi, NULL, 0, ms < 1000 ? ms + 1 : 1000, NULL);
	}
	for (CURLMsg *m; (m = curl_multi_info_read(w->multi, &running)) != NULL;)
		if (m->msg == CURLMSG_DONE)
			res = m->data.result;
	curl_easy_getinfo(w->sh, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(w->multi, w->sh);
	curl_slist_free_all(hdrs);
	free(ws.buf);
	pthread_mutex_lock(&w->w.mu);
	w->st.streaming = false;
	pthread_mutex_unlock(&w->w.mu);
	if (atomic_load(&w->stop))
		return 0;
	if (ws.err != 0) {
		snprintf(why, whylen, "%.100s: %.159s", e->ep[i], ws.why);
		/*
		 * an expired auth token: get a new one at the next try. etcd refuses a
		 * watch with a stale token by cancelling it as soon as it is made
		 * ("canceled", cancel_reason "... invalid auth token"), not with an error
		 */
		if ((ws.err == -EREMOTEIO || ws.err == -ECONNRESET) && e->user != NULL &&
		    strstr(ws.why, "auth token") != NULL)
			e->token[0] = '\0';
		return ws.err == -EREMOTEIO ? -ECONNRESET : ws.err;
	}
	if (ws.created) {
		snprintf(why, whylen, "%s: the watch stream ended (%s)", e->ep[i],
			 res == CURLE_OK ? "closed" : curl_easy_strerror(res));
		return -ECONNRESET;
	}
	if (res != CURLE_OK && status == 0) {
		if (why[0] == '\0')
			curl_why(e->ep[i], res, w->serr, why, whylen);
		return -EHOSTUNREACH;
	}
	snprintf(why, whylen, "%s: /v3/watch answered HTTP %ld without a watch", e->ep[i], status);
	return -EOPNOTSUPP;
}

/* A stream from the revision after the copy's, on the endpoints in turn. @return as stream_on(). */
static int stream_run(struct sg_etcd_watch *w, char *why, size_t whylen)
{
	char *body = stream_body(w), one[SG_ETCD_MAX_ENDPOINTS][320];
	int rc = -EHOSTUNREACH, len;

	if (body == NULL)
		return -ENOMEM;
	for (unsigned int k = 0; k < w->e->n_ep && rc == -EHOSTUNREACH; k++) {
		one[k][0] = '\0';
		rc = stream_on(w, (w->e->cur + k) % w->e->n_ep, body, one[k], sizeof(one[k]));
		if (rc != -EHOSTUNREACH)
			snprintf(why, whylen, "%.255s", one[k]);
	}
	free(body);
	if (rc != -EHOSTUNREACH)
		return rc;
	len = snprintf(why, whylen, "no etcd endpoint answered");
	for (unsigned int k = 0; k < w->e->n_ep && len > 0 && (size_t)len < whylen; k++)
		len += snprintf(why + len, whylen - len, "%s %.150s", k ? ";" : ":", one[k]);
	return rc;
}

static void *watch_main(void *arg)
{
	struct sg_etcd_watch *w = arg;
	bool quiet = false, need_range = true;
	char why[SG_ETCD_ERR_LEN];

	while (!atomic_load(&w->stop)) {
		int rc;

		if (need_range) {
			if (watch_range(w, &quiet) < 0) {
				if (watch_sleep(w, w->poll_ms < 200 ? w->poll_ms : 200))
					break;
				continue;
			}
			need_range = false;
		}
		if (w->polling) {
			if (watch_sleep(w, w->poll_ms))
				break;
			need_range = true;
			continue;
		}
		why[0] = '\0';
		rc = stream_run(w, why, sizeof(why));
		if (rc == 0)
			break;
		if (rc == -ECONNRESET && w->st.streams > 0) {
			pthread_mutex_lock(&w->w.mu);
			w->st.reconnects++;
			pthread_mutex_unlock(&w->w.mu);
			/* again from the revision after the last event: nothing is lost; a pause
			 * keeps a stream that etcd ends at once from spinning */
			if (watch_sleep(w, 20))
				break;
			continue;
		}
		if (rc == -ESTALE) {
			SG_ETCD_LOG("membership of cluster %s: %s: reading it afresh", w->cluster, why);
			need_range = true;
		} else if (rc == -EHOSTUNREACH || rc == -ECONNRESET || rc == -ENOMEM ||
			   rc == -EACCES) {
			watch_unreachable(w, why, &quiet);
			if (watch_sleep(w, 200))
				break;
		} else {
			SG_ETCD_LOG("membership of cluster %s: cannot hold a v3 watch stream (%s): "
				    "polling every %u ms instead", w->cluster, why, w->poll_ms);
			pthread_mutex_lock(&w->w.mu);
			w->polling = w->st.polling = true;
			pthread_mutex_unlock(&w->w.mu);
			need_range = true;
		}
	}
	return NULL;
}

static void watch_free(struct sg_etcd_watch *w)
{
	for (size_t i = 0; i < w->n_ents; i++)
		ment_clear(w, &w->ents[i]);
	free(w->ents);
	free(w->kept);
	if (w->sh != NULL)
		curl_easy_cleanup(w->sh);
	if (w->multi != NULL)
		curl_multi_cleanup(w->multi);
	if (w->efd >= 0)
		close(w->efd);
	sg_etcd_destroy(w->e);
	free(w->seen);
	free(w->names);
	free(w);
}

struct sg_etcd_watch *sg_etcd_watch_create(const struct sg_etcd_watch_conf *c)
{
	struct sg_etcd_watch *w;
	char prefix[SG_ETCD_CLUSTER_MAX + 16];
	int rc;

	if (c == NULL || sg_etcd_prefix(c->cluster, prefix, sizeof(prefix) - 8) < 0 ||
	    (c->poll_ms && (c->poll_ms < 10 || c->poll_ms > 10000)) ||
	    (unsigned int)c->mode > SG_ETCD_WATCH_POLL) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->names = calloc(SG_MAX_NODES, SG_NAME_MAX);
	w->seen = calloc(SG_MAX_NODES, sizeof(*w->seen));
	w->e = sg_etcd_create(&c->etcd);
	rc = w->e == NULL ? errno : 0;
	pthread_once(&curl_once, curl_init_once);
	w->multi = curl_multi_init();
	w->sh = curl_easy_init();
	snprintf(w->cluster, sizeof(w->cluster), "%s", c->cluster);
	snprintf(w->nodes_pfx, sizeof(w->nodes_pfx), "%s/nodes/", prefix);
	snprintf(w->jobs_pfx, sizeof(w->jobs_pfx), "%s/jobs/", prefix);
	snprintf(w->prefix, sizeof(w->prefix), "%s/%s", prefix, c->jobs ? "" : "nodes/");
	w->poll_ms = c->poll_ms ? c->poll_ms : DEF_POLL_MS;
	w->polling = w->st.polling = c->mode == SG_ETCD_WATCH_POLL;
	if (rc == 0 && (w->efd < 0 || w->names == NULL || w->seen == NULL || w->multi == NULL ||
			w->sh == NULL))
		rc = ENOMEM;
	if (rc == 0)
		rc = worker_start(&w->w, watch_main, w);
	if (rc != 0) {
		watch_free(w);
		errno = rc;
		return NULL;
	}
	return w;
}

struct sg_etcd_watch *sg_etcd_watch_start(const struct sg_etcd_conf *etcd, const char *cluster,
					  uint32_t poll_ms)
{
	struct sg_etcd_watch_conf c = {.cluster = cluster, .poll_ms = poll_ms};

	if (etcd == NULL) {
		errno = EINVAL;
		return NULL;
	}
	c.etcd = *etcd;
	return sg_etcd_watch_create(&c);
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

int sg_etcd_watch_job(struct sg_etcd_watch *w, uint32_t id, struct sg_etcd_job *out)
{
	char key[SG_ETCD_CLUSTER_MAX + 48];
	size_t at;
	long i;
	int rc = -ENOENT;

	if (w == NULL || out == NULL)
		return -EINVAL;
	snprintf(key, sizeof(key), "%s%" PRIu32, w->jobs_pfx, id);
	pthread_mutex_lock(&w->w.mu);
	i = ment_find(w, key, &at);
	if (i >= 0 && w->ents[i].job != NULL) {
		*out = *w->ents[i].job;
		rc = 0;
	}
	pthread_mutex_unlock(&w->w.mu);
	return rc;
}

int sg_etcd_watch_keep(struct sg_etcd_watch *w, const int64_t *leases, unsigned int n)
{
	struct kept *k;

	if (w == NULL || (leases == NULL && n))
		return -EINVAL;
	k = calloc(n ? n : 1, sizeof(*k));
	if (k == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&w->w.mu);
	for (unsigned int i = 0; i < n; i++) {
		k[i] = (struct kept){.lease = leases[i], .due = 0};
		for (unsigned int j = 0; j < w->n_kept; j++)
			if (w->kept[j].lease == leases[i])
				k[i].due = w->kept[j].due;
	}
	free(w->kept);
	w->kept = k;
	w->n_kept = n;
	pthread_mutex_unlock(&w->w.mu);
	curl_multi_wakeup(w->multi);
	return 0;
}

int sg_etcd_watch_fd(const struct sg_etcd_watch *w)
{
	return w == NULL ? -EINVAL : w->efd;
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
	atomic_store(&w->stop, true);
	curl_multi_wakeup(w->multi);
	worker_stop(&w->w);
	watch_free(w);
}
