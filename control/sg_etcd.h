/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma's cluster state in etcd (docs/cluster.md): a small client of etcd 3.4's
 * v3 HTTP/JSON gateway (POST /v3/kv/put, /v3/kv/range, /v3/kv/deleterange,
 * /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke; keys and values in
 * base64) over libcurl and jansson, and the two uses Sigma makes of it:
 *
 * - a summation node's registration: the record <prefix>/nodes/<name> under a
 *   lease whose TTL is the node's liveness timeout, kept alive by a thread of
 *   its own (never an lcore), re-registered when etcd comes back;
 * - a worker's view of the membership: a thread that reads <prefix>/nodes/
 *   every poll period and publishes the set of live node names, which libsigma
 *   reads through sigma_conf.membership (sg_etcd_watch_alive()) off its push
 *   path.
 *
 * The prefix is "/sigma/<cluster>". Several endpoints may be given: a request
 * that gets no HTTP answer from one endpoint (refused, timed out) is tried on
 * the next, and the one that answered is tried first next time.
 *
 * Threads: a struct sg_etcd belongs to one thread at a time. The registration
 * and the watch own their own handles. Functions return 0 (or a count) or a
 * negative errno; constructors return NULL and set errno.
 */
#ifndef SG_ETCD_H
#define SG_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most endpoints in sg_etcd_conf.endpoints. */
#define SG_ETCD_MAX_ENDPOINTS 16
/** Longest message of sg_etcd_last_error(). */
#define SG_ETCD_ERR_LEN 256
/** Longest control endpoint in a node record. */
#define SG_ETCD_CONTROL_MAX 128
/** Longest cluster name: 1..63 of [A-Za-z0-9._-], like a node's name. */
#define SG_ETCD_CLUSTER_MAX SG_NAME_MAX

/** How to reach etcd. Zero fields take the defaults. */
struct sg_etcd_conf {
	/**
	 * Comma-separated client URLs, "http://host:port" or "https://host:port"
	 * (1..SG_ETCD_MAX_ENDPOINTS).
	 */
	const char *endpoints;
	uint32_t timeout_ms;	/**< per request and endpoint (default 1000) */
	/**
	 * etcd authentication (optional): with a user, the client gets a token from
	 * /v3/auth/authenticate and sends it in the Authorization header, getting a
	 * new one when etcd says it is invalid. Untested here (no etcd with auth).
	 */
	const char *user;
	const char *password;
	/** TLS for https:// endpoints (optional; untested here): CA bundle, client cert and key. */
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
};

struct sg_etcd;

/**
 * Make a client (no request is sent yet).
 * @return the client, or NULL with errno EINVAL (a bad endpoint list; the
 *         reason on stderr) or ENOMEM.
 */
struct sg_etcd *sg_etcd_create(const struct sg_etcd_conf *conf);

/** Free a client (NULL is fine). */
void sg_etcd_destroy(struct sg_etcd *e);

/** The last failure's message (names the endpoint and the cause); "" if none. */
const char *sg_etcd_last_error(const struct sg_etcd *e);

/** The endpoint requests go to first (the last one that answered). */
const char *sg_etcd_endpoint(const struct sg_etcd *e);

/*
 * Every request below returns 0 or: -EHOSTUNREACH when no endpoint answered
 * (the message says why for each), -EREMOTEIO when etcd answered with an
 * error (its message), -EPROTO when the answer could not be read, -EINVAL for
 * bad arguments, -ENOMEM.
 */

/** Put @p value (@p len bytes) at @p key, attached to @p lease (0: none). */
int sg_etcd_put(struct sg_etcd *e, const char *key, const void *value, size_t len, int64_t lease);

/** Delete @p key, or every key starting with it when @p prefix. @return count deleted or -errno. */
int sg_etcd_delete(struct sg_etcd *e, const char *key, bool prefix);

/** One key-value pair read. */
struct sg_etcd_kv {
	char *key;	     /**< NUL-terminated */
	char *value;	     /**< @c len bytes, then a NUL */
	size_t len;
	int64_t mod_revision;
	int64_t lease;	     /**< 0: none */
};

/**
 * Read every key starting with @p prefix (sorted by key).
 * @param[out] kvs  an array of *n pairs; free it with sg_etcd_kvs_free()
 * @param[out] revision  the store's revision of the read (may be NULL)
 * @return 0, or as above.
 */
int sg_etcd_get_prefix(struct sg_etcd *e, const char *prefix, struct sg_etcd_kv **kvs, size_t *n,
		       int64_t *revision);

/** Free what sg_etcd_get_prefix() returned. */
void sg_etcd_kvs_free(struct sg_etcd_kv *kvs, size_t n);

/** Grant a lease of @p ttl_s seconds (1..3600); its id in @p id. */
int sg_etcd_lease_grant(struct sg_etcd *e, uint32_t ttl_s, int64_t *id);

/**
 * Renew lease @p id once. @p ttl_left (may be NULL) gets the seconds it now has.
 * @return 0; -ENOENT when the lease is gone (it expired: grant a new one); or as above.
 */
int sg_etcd_lease_keepalive(struct sg_etcd *e, int64_t id, int64_t *ttl_left);

/** Revoke lease @p id: its keys go at once. */
int sg_etcd_lease_revoke(struct sg_etcd *e, int64_t id);

/* ---- node records -------------------------------------------------------- */

/**
 * A summation node's record, the JSON value of <prefix>/nodes/<name>:
 * {"name":..., "kind":"cpu"|"gpu", "gbps":G, "addr":"a.b.c.d", "port":P,
 *  "control":"unix:/path" | "host:port" | ""}. Other members are ignored.
 */
struct sg_etcd_node {
	char name[SG_NAME_MAX];
	enum sg_node_kind kind;
	double gbps;
	char addr[16];
	uint16_t port;
	char control[SG_ETCD_CONTROL_MAX];
	int64_t lease;	/**< read: the lease the record is under (0: none); not written */
};

/** Why records were ignored (counters; docs/cluster.md "Garbage"). */
struct sg_etcd_garbage {
	uint64_t not_json;	/**< not a JSON object */
	uint64_t bad_field;	/**< a field missing, of the wrong type or out of range */
	uint64_t bad_kind;	/**< a kind other than cpu or gpu */
	uint64_t name_mismatch; /**< the key's last part is not the record's name */
};

/** "/sigma/<cluster>" into @p buf. @return 0, or -EINVAL for a bad cluster name. */
int sg_etcd_prefix(const char *cluster, char *buf, size_t cap);

/**
 * Write @p n as its record (JSON) into @p buf. @return the length, -EINVAL for
 * a record that would not read back, -ENOSPC when @p cap is too small.
 */
int sg_etcd_node_format(const struct sg_etcd_node *n, char *buf, size_t cap);

/**
 * Read the record @p value (@p len bytes) stored at @p key. Strict.
 * @return 0, or -EINVAL with the reason in @p why and the counter of
 *         @p g (may be NULL) raised.
 */
int sg_etcd_node_parse(const char *key, const char *value, size_t len, struct sg_etcd_node *n,
		       struct sg_etcd_garbage *g, char *why, size_t whylen);

/**
 * Read the live nodes of @p cluster: the records under <prefix>/nodes/ that
 * parse; the others are counted in @p g (may be NULL) and logged once per key
 * and revision on stderr with their reason.
 * @return the number of nodes (at most @p cap are written; more may exist), or
 *         as the requests above.
 */
int sg_etcd_nodes_get(struct sg_etcd *e, const char *cluster, struct sg_etcd_node *out,
		      unsigned int cap, struct sg_etcd_garbage *g);

/* ---- a node's registration ----------------------------------------------- */

/** A node's registration. */
struct sg_etcd_reg_conf {
	struct sg_etcd_conf etcd;
	const char *cluster;		 /**< 1..63 of [A-Za-z0-9._-] */
	struct sg_etcd_node node;	 /**< the record (its name names the key) */
	uint32_t ttl_s;			 /**< lease TTL, the liveness timeout: 1..3600 (default 5) */
};

/** What a registration did (monotonic counters, and its state). */
struct sg_etcd_reg_status {
	bool registered;	/**< the record is in etcd under a live lease, as far as we know */
	int64_t lease;		/**< its lease (0: none) */
	uint64_t registrations; /**< leases granted and records put */
	uint64_t keepalives;	/**< lease renewals that etcd confirmed */
	uint64_t failures;	/**< requests that failed (etcd unreachable, or refused) */
	uint64_t expired;	/**< times the lease was found gone (then registered again) */
	char last_error[SG_ETCD_ERR_LEN];
};

struct sg_etcd_reg;

/**
 * Start registering: a thread grants a lease of ttl_s, puts the record under
 * it, renews it every ttl_s/3 (at least every second when ttl_s < 3), and
 * when etcd is unreachable or the lease is gone says so once on stderr and
 * registers again as soon as etcd answers. The caller goes on whether etcd is
 * up or not.
 * @return the registration, or NULL with errno EINVAL (bad conf), ENOMEM, or
 *         pthread_create()'s error.
 */
struct sg_etcd_reg *sg_etcd_reg_start(const struct sg_etcd_reg_conf *conf);

/** Copy the registration's state. */
void sg_etcd_reg_status(struct sg_etcd_reg *r, struct sg_etcd_reg_status *st);

/**
 * Stop: the thread ends and, when @p leave, the lease is revoked so the record
 * goes at once (a clean leave); otherwise the record expires with its lease.
 * NULL is fine.
 */
void sg_etcd_reg_stop(struct sg_etcd_reg *r, bool leave);

/* ---- a worker's membership watch ----------------------------------------- */

/** Counters of a watch. */
struct sg_etcd_watch_stats {
	uint64_t polls;		/**< reads of the membership that succeeded */
	uint64_t failures;	/**< reads that failed (etcd unreachable or refused) */
	uint64_t changes;	/**< times the set of live names changed */
	uint64_t generation;	/**< 0 until the first read, then +1 per change */
	unsigned int nodes;	/**< live nodes in the last read */
	bool reachable;		/**< the last read succeeded */
	struct sg_etcd_garbage garbage;
	char last_error[SG_ETCD_ERR_LEN];
};

struct sg_etcd_watch;

/**
 * Start watching @p cluster's nodes: a thread reads <prefix>/nodes/ every
 * @p poll_ms (default 100; 10..10000) and publishes the live names. When etcd
 * is unreachable the last set read stays (the worker keeps using the nodes it
 * knows) and the thread says so once on stderr.
 *
 * A node is live for the watch while its record is under the lease it had
 * when the watch first saw it: a record under another lease is the node
 * registered again after its lease expired, and it stays lost for this
 * watch. So workers that polled at different times agree that the node was
 * lost even if some of them never saw its record missing. Use one watch per
 * session (a node that comes back is for the next session).
 * @return the watch, or NULL with errno EINVAL, ENOMEM, or pthread_create()'s.
 */
struct sg_etcd_watch *sg_etcd_watch_start(const struct sg_etcd_conf *etcd, const char *cluster,
					  uint32_t poll_ms);

/**
 * The membership callback for sigma_conf.membership (arg: the watch). If the
 * watch's generation is not *gen, sets alive[i] for each of the @p n names
 * (whether a record of that name is live), sets *gen, and returns 1; returns 0
 * when nothing changed or nothing was read yet (alive untouched). Cheap when
 * nothing changed: one atomic load. Thread-safe.
 */
int sg_etcd_watch_alive(void *watch, uint64_t *gen, const char *const *names, unsigned int n,
			bool *alive);

/** Copy the watch's counters. */
void sg_etcd_watch_stats(struct sg_etcd_watch *w, struct sg_etcd_watch_stats *st);

/** Stop the thread and free (NULL is fine). */
void sg_etcd_watch_stop(struct sg_etcd_watch *w);

#ifdef __cplusplus
}
#endif

#endif /* SG_ETCD_H */
