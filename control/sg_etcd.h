/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma's cluster state in etcd (docs/cluster.md): a small client of etcd 3.4's
 * v3 HTTP/JSON gateway (POST /v3/kv/put, /v3/kv/range, /v3/kv/deleterange,
 * /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke, /v3/watch; keys and
 * values in base64) over libcurl and jansson, and the uses Sigma makes of it:
 *
 * - a summation node's registration: the record <prefix>/nodes/<name> under a
 *   lease whose TTL is the node's liveness timeout, kept alive by a thread of
 *   its own (never an lcore), re-registered when etcd comes back;
 * - a worker's view of the membership: a thread that reads <prefix>/nodes/
 *   once and then holds a v3 watch stream (or polls, if etcd refuses streams),
 *   and publishes the set of live node names, which libsigma reads through
 *   sigma_conf.membership (sg_etcd_watch_alive()) off its push path;
 * - job records under <prefix>/jobs/<id>, from which a summation node builds
 *   a lost node's keys that move to it (its control server watches them).
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
	 * new one when etcd says it is invalid (tests/control/test_etcd_secure.c).
	 */
	const char *user;
	const char *password;
	/**
	 * TLS for https:// endpoints (optional): CA bundle, client cert and key. etcd
	 * 3.4's gateway refuses a client certificate with a CommonName (docs/cluster.md).
	 */
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

/**
 * Put @p value at @p key (under @p lease, 0: none) in one etcd transaction, only
 * if @p key and each of the @p n_absent keys @p absent do not exist: of two
 * writers racing for one key, exactly one wins.
 * @return 1 when put, 0 when one of the keys exists (nothing written), or as above.
 */
int sg_etcd_put_if_absent(struct sg_etcd *e, const char *key, const void *value, size_t len,
			  int64_t lease, const char *const *absent, unsigned int n_absent);

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

/** Longest password sg_etcd_password_load() reads, with its NUL. */
#define SG_ETCD_PASSWORD_MAX 256

/**
 * Read the etcd password from @p path (its first line, without the line end)
 * into @p buf. A regular file that its group or others may read or write is
 * refused, as ssh refuses such a key, naming the fix (chmod 600); so is an
 * empty first line or one of SG_ETCD_PASSWORD_MAX bytes or more. The
 * password never goes into @p err.
 * @return 0, or -EINVAL (the reason in @p err, naming @p what, e.g.
 *         "[cluster] password_file").
 */
int sg_etcd_password_load(const char *what, const char *path, char buf[SG_ETCD_PASSWORD_MAX],
			  char *err, size_t errlen);

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

/* ---- job records (docs/cluster.md, "Jobs in etcd") ------------------------ */

/** Most tensors in a job record (the job service's limit). */
#define SG_ETCD_JOB_MAX_TENSORS 1024
/** A token digest: 64 lowercase hex digits and the NUL. */
#define SG_ETCD_DIGEST_LEN 65
/** Default TTL of a job record's lease, seconds (the nodes that hold the job renew it). */
#define SG_ETCD_JOB_TTL_S 30

/** A summation node of a job record: placement's inputs. */
struct sg_etcd_job_node {
	char name[SG_NAME_MAX];	/**< its [control] name, which placement hashes */
	enum sg_node_kind kind;
	double gbps;		/**< > 0 */
	double weight;		/**< placement weight, >= 0 (the descriptor's) */
};

/**
 * A job's record, the JSON value of <prefix>/jobs/<id>:
 * {"id":7, "workers":4, "dtype":"fp32", "mode":"sync", "partition_bytes":P,
 *  "chunk_bytes":C, "token_digest":"<64 hex>", "open":false,
 *  "tensors":[E0, E1, ...], "nodes":[{"name":..., "kind":"cpu"|"gpu", "gbps":G,
 *  "weight":W}, ...]}. Tensor i (its element count Ei) is tensor id i, as in a
 * job made by the job service. Other members are ignored. Never the token.
 */
struct sg_etcd_job {
	uint32_t id;			 /**< 1..2^32-1, the key's last part */
	uint32_t workers;		 /**< N, 1..SG_MAX_WORKERS */
	enum sg_dtype dtype;		 /**< SG_DTYPE_ANY only for an open job */
	enum sg_mode mode;
	uint32_t partition_bytes;	 /**< multiple of 8, 8..SG_MAX_PARTITION_BYTES */
	uint32_t chunk_bytes;		 /**< multiple of 8, 8..min(SG_MAX_CHUNK_BYTES, partition) */
	char token_digest[SG_ETCD_DIGEST_LEN]; /**< sg_etcd_token_digest() of its wire token */
	bool open;			 /**< no tensors: the job's pushes make its keys */
	uint32_t n_tensors;		 /**< 1..SG_ETCD_JOB_MAX_TENSORS, or 0 (open) */
	uint64_t elems[SG_ETCD_JOB_MAX_TENSORS]; /**< elements of tensor i */
	uint32_t n_nodes;		 /**< 1..SG_MAX_NODES */
	struct sg_etcd_job_node nodes[SG_MAX_NODES];
	int64_t lease;			 /**< read: the lease the record is under; not written */
};

/** One key of a job: partition p of tensor t is id sg_wire_key(t, p). */
struct sg_etcd_key {
	uint32_t id;
	uint32_t nelem;
};

/**
 * The digest a job record holds in place of the token: Argon2id (libsodium's
 * crypto_pwhash, ARGON2ID13, 3 passes, 1 MiB) of the wire token written as 16
 * lowercase hex digits, with the salt BLAKE2b-128 ("sigma-job-token-v1/" cluster
 * "/" decimal id), as 64 lowercase hex digits. A few ms: computed once per job.
 * @return 0, or -EINVAL (a bad cluster name), -ENOMEM.
 */
int sg_etcd_token_digest(const char *cluster, uint32_t id, uint64_t token,
			 char out[SG_ETCD_DIGEST_LEN]);

/**
 * @p j from a job descriptor (what the job service returns) and the element
 * counts of its @p n_tensors tensors (none: an open job), with the token's digest.
 * @return 0, or -EINVAL (a bad descriptor, cluster or tensor: the reason in
 *         @p err), -ENOMEM.
 */
int sg_etcd_job_from_descriptor(const char *cluster, const char *descriptor,
				const uint64_t *elems, uint32_t n_tensors, struct sg_etcd_job *j,
				char *err, size_t errlen);

/** 0 if @p j is a record a reader takes; else -EINVAL with the reason in @p why (may be NULL). */
int sg_etcd_job_check(const struct sg_etcd_job *j, char *why, size_t whylen);

/**
 * @p j as its JSON record in a new string *@p out (free() it).
 * @return its length, -EINVAL for a record sg_etcd_job_check() refuses, -ENOMEM.
 */
int sg_etcd_job_format(const struct sg_etcd_job *j, char **out);

/**
 * Read the record @p value (@p len bytes) stored at @p key. Strict, as
 * sg_etcd_node_parse(): not JSON (not_json), a member missing, of the wrong
 * type or out of range, or what sg_etcd_job_check() refuses (bad_field), a
 * node's unknown kind (bad_kind), a key whose last part is not the id
 * (name_mismatch). @return 0, or -EINVAL with the reason in @p why and the
 * counter of @p g (may be NULL) raised.
 */
int sg_etcd_job_parse(const char *key, const char *value, size_t len, struct sg_etcd_job *j,
		      struct sg_etcd_garbage *g, char *why, size_t whylen);

/**
 * The keys of fixed job @p j that node @p self (an index into j->nodes) sums
 * when the nodes with @p lost[i] (NULL: none) are gone: their weights 0, the
 * others' unchanged, every partition placed by sg_ctl_place_key() as libsigma
 * places it. Up to @p cap written to @p out, in tensor and partition order.
 * @return the number of keys (may exceed @p cap); -EHOSTDOWN when every node
 *         is lost; -EINVAL (an open job, a bad record or index).
 */
long sg_etcd_job_keys(const struct sg_etcd_job *j, const bool *lost, unsigned int self,
		      struct sg_etcd_key *out, size_t cap);

/**
 * Put @p j at <prefix>/jobs/<id> under a new lease of @p ttl_s seconds
 * (1..3600; 0: SG_ETCD_JOB_TTL_S). The nodes that hold the job (with the
 * token whose digest the record holds) renew the lease while they hold it
 * (docs/cluster.md), so a record lives as long as its job lives on a node.
 * @return the lease (> 0), or as the requests above (-EINVAL for a bad record).
 */
int64_t sg_etcd_job_put(struct sg_etcd *e, const char *cluster, const struct sg_etcd_job *j,
			uint32_t ttl_s);

/**
 * The one call a job's creator makes after sg_ctl_job_service_create(): the
 * record of the job @p descriptor describes, with its tensors' element counts
 * @p elems (@p n_tensors; 0 for an open job), put as sg_etcd_job_put() puts it.
 * @return the lease (> 0), or -EINVAL (bad descriptor, cluster, tensors or
 *         endpoints), -EHOSTUNREACH, -EREMOTEIO..., with the reason in @p err.
 */
int64_t sg_etcd_job_record(const struct sg_etcd_conf *conf, const char *cluster,
			   const char *descriptor, const uint64_t *elems, uint32_t n_tensors,
			   uint32_t ttl_s, char *err, size_t errlen);

/**
 * Remove job @p id's record and revoke its lease (after
 * sg_ctl_job_service_destroy()). @return 0, -ENOENT (no record), or as the
 * requests above, with the reason in @p err.
 */
int sg_etcd_job_unrecord(const struct sg_etcd_conf *conf, const char *cluster, uint32_t id,
			 char *err, size_t errlen);

/**
 * Read the job records of @p cluster that parse (the others counted in @p g,
 * may be NULL, and logged once per key and revision).
 * @return how many (at most @p cap written; more may exist), or as the requests.
 */
int sg_etcd_jobs_get(struct sg_etcd *e, const char *cluster, struct sg_etcd_job *out,
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
	/**
	 * reads of the whole prefix (range requests) that succeeded: every poll
	 * period when polling; with a stream, the first and one after a compaction
	 */
	uint64_t polls;
	uint64_t failures;	/**< reads and stream attempts that failed (etcd unreachable) */
	uint64_t changes;	/**< times the set of live names changed */
	uint64_t generation;	/**< 0 until the first read, then +1 per change */
	unsigned int nodes;	/**< live nodes in the last read */
	bool reachable;		/**< the last read succeeded, or a stream is held */
	struct sg_etcd_garbage garbage; /**< node records ignored (once per key and revision) */
	char last_error[SG_ETCD_ERR_LEN];
	/* since the v3 watch stream (members appended: older callers' offsets hold) */
	uint64_t streams;	/**< watch streams established */
	uint64_t reconnects;	/**< streams made again after one ended (from the next revision) */
	uint64_t events;	/**< events the streams brought */
	bool streaming;		/**< a stream is held now */
	bool polling;		/**< no streams: SG_ETCD_WATCH_POLL, or etcd refused one */
	unsigned int jobs;	/**< job records that parse (a watch with jobs) */
	uint64_t job_changes;	/**< times a job record came, changed or went */
	struct sg_etcd_garbage job_garbage; /**< job records ignored (once per key and revision) */
	uint64_t keepalives;	/**< renewals of kept leases (sg_etcd_watch_keep()) etcd confirmed */
	uint64_t keep_failures; /**< ... that failed (etcd unreachable, or the lease gone) */
};

struct sg_etcd_watch;

/** How a watch reads etcd. */
enum sg_etcd_watch_mode {
	/** a v3 watch stream; range polls only if etcd's gateway refuses one (said on stderr) */
	SG_ETCD_WATCH_AUTO = 0,
	SG_ETCD_WATCH_POLL = 1, /**< a range request every poll period */
};

/** A watch. Zero fields take the defaults. */
struct sg_etcd_watch_conf {
	struct sg_etcd_conf etcd;
	const char *cluster;		/**< 1..63 of [A-Za-z0-9._-] */
	uint32_t poll_ms;		/**< period when polling, 10..10000 (default 100) */
	enum sg_etcd_watch_mode mode;	/**< default SG_ETCD_WATCH_AUTO */
	/**
	 * also keep the cluster's job records (<prefix>/jobs/, sg_etcd_watch_job()):
	 * what a summation node needs; a worker needs only the nodes
	 */
	bool jobs;
};

/**
 * Start watching a cluster: a thread reads <prefix>/nodes/ (and <prefix>/jobs/
 * with @c jobs) once, then holds a v3 watch stream (POST /v3/watch) from the
 * revision after that read, so that every change comes as it happens and none
 * is lost across a reconnect (a stream that ends is made again from the
 * revision after its last event, on the next endpoint if need be; when etcd
 * compacted past it, the prefix is read afresh). If etcd's gateway answers
 * /v3/watch without a watch, the thread says so on stderr and polls instead
 * (a range request every poll_ms), as SG_ETCD_WATCH_POLL does from the start.
 * When etcd is unreachable the last set read stays (the worker keeps using the
 * nodes it knows) and the thread says so once on stderr.
 *
 * A node is live for the watch while its record is under the lease it had
 * when the watch first saw it: a record under another lease is the node
 * registered again after its lease expired, and it stays lost for this
 * watch. So workers that read at different times agree that the node was
 * lost even if some of them never saw its record missing. Use one watch per
 * session (a node that comes back is for the next session).
 * @return the watch, or NULL with errno EINVAL, ENOMEM, or pthread_create()'s.
 */
struct sg_etcd_watch *sg_etcd_watch_create(const struct sg_etcd_watch_conf *conf);

/**
 * sg_etcd_watch_create() of @p cluster's nodes with @p poll_ms (0: 100), in
 * SG_ETCD_WATCH_AUTO mode (a stream), without job records.
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

/**
 * Copy job @p id's record, as last read, into @p out (a watch with jobs).
 * @return 0, -ENOENT (no record of that id parses), -EINVAL. Thread-safe.
 */
int sg_etcd_watch_job(struct sg_etcd_watch *w, uint32_t id, struct sg_etcd_job *out);

/**
 * Have the watch's thread renew leases @p leases (@p n of them; they replace
 * the last list) every third of their TTL, until they are left out of a later
 * list: what a node does for the records of the jobs it holds. A lease found
 * gone is no longer renewed. @return 0, -EINVAL, -ENOMEM. Thread-safe.
 */
int sg_etcd_watch_keep(struct sg_etcd_watch *w, const int64_t *leases, unsigned int n);

/**
 * An eventfd (non-blocking, close-on-exec, owned by the watch) that becomes
 * readable when the live names or the job records change: poll it, read its
 * 8 bytes, then look (sg_etcd_watch_alive(), sg_etcd_watch_job()).
 */
int sg_etcd_watch_fd(const struct sg_etcd_watch *w);

/** Copy the watch's counters. */
void sg_etcd_watch_stats(struct sg_etcd_watch *w, struct sg_etcd_watch_stats *st);

/** Stop the thread (at once, also in the middle of a stream) and free (NULL is fine). */
void sg_etcd_watch_stop(struct sg_etcd_watch *w);

#ifdef __cplusplus
}
#endif

#endif /* SG_ETCD_H */
