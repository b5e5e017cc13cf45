/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_etcd's own: the client's structure and the helpers its three files share
 * (sg_etcd.c: requests, keys and leases; sg_etcd_records.c: node and job
 * records; sg_etcd_watch.c: the registration and watch threads). Not
 * installed; nothing outside the library includes it.
 */
#ifndef SG_ETCD_INTERNAL_H
#define SG_ETCD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

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

/* libcurl's and libsodium's global set-up, once per process. @return false if it failed. */
bool sg_etcd_global_init(void);
/* Append @p n bytes of @p p to the growing buffer; false when out of memory or past MAX_REPLY. */
bool sg_etcd_buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n);
/* libcurl's failure @p rc at endpoint @p ep, in words, into @p why. */
void sg_etcd_curl_why(const char *ep, CURLcode rc, const char *cerr, char *why, size_t whylen);
/* Set up @p h for a POST of @p body to endpoint @p i's @p path. @return 0 or -errno. */
int sg_etcd_easy_prepare(struct sg_etcd *e, CURL *h, unsigned int i, const char *path,
			const char *body, bool with_token, const char *extra, char *cerr,
			struct curl_slist **hdrs);
/* Get a token from endpoint @p i (auth configured). @return 0 or -errno, @p why set. */
int sg_etcd_authenticate(struct sg_etcd *e, unsigned int i, char *why, size_t whylen);
/* Base64 of @p data as a JSON string, etcd's encoding of keys and values. */
json_t *sg_etcd_b64(const void *data, size_t len);
/* Decode etcd's base64 @p j into a new NUL-terminated buffer. @return 0 or -errno. */
int sg_etcd_unb64(json_t *j, char **out, size_t *len);
/* An int64 that etcd's gateway sends as a string or a number (0 if neither). */
int64_t sg_etcd_i64(json_t *j);
/* The range_end (base64) that makes a range of every key under @p prefix. */
json_t *sg_etcd_range_end(const char *prefix);

#endif /* SG_ETCD_INTERNAL_H */
