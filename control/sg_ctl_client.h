/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma control client: calls to a node's control server (JSON-RPC 2.0 over a
 * Unix socket, or TCP with the HMAC challenge of docs/control.md), and the job
 * service, which creates one job across every summation node of a job and
 * hands out the job descriptor a worker opens it with (docs/control.md, "Jobs
 * across nodes"). A library of its own (sg_ctl_client: jansson and libsodium,
 * no DPDK at run time), installed as libsigma-control for sigmactl, scripts
 * and the Python package.
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno.
 */
#ifndef SG_CTL_CLIENT_H
#define SG_CTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Prefix mixed into every HMAC so a Sigma answer is useless to any other protocol. */
#define SG_CTL_AUTH_CONTEXT "sigma-ctl-auth-v1"
/** Bytes of the per-connection nonce. */
#define SG_CTL_NONCE_LEN 32

/** Per-job session token: 32 random bytes as 64 hex characters (+ NUL). */
#define SG_CTL_TOKEN_LEN 65

/**
 * The 64-bit wire token of a job's session token @p token (at least 16 hex
 * digits, either case): its first 16 hex digits, as every node and the job
 * descriptor take it (docs/control.md, job_create). The caller checks the digits.
 */
uint64_t sg_ctl_wire_token(const char *token);

/** A tensor of a job. */
struct sg_ctl_tensor {
	char name[SG_NAME_MAX];
	uint64_t elems;
};

/** Most jobs a node's control server holds (and job records of a cluster listed at once). */
#define SG_CTL_MAX_JOBS 64

/** Largest shared secret, in bytes, that the server and its clients accept. */
#define SG_CTL_SECRET_MAX 256

/**
 * Read a shared secret from @p path into @p buf, without its trailing newline.
 * A file holding more than SG_CTL_SECRET_MAX bytes of secret is refused, not
 * cut, so that the server and every client derive the same key. A regular
 * file that group or others may read or write is refused, naming the fix
 * (chmod 600), as ssh refuses such a key; with @p private_file it must also
 * be a regular file (what the server requires of its own copy), else a pipe
 * is fine.
 * @return 0 with *len set, or -EINVAL with the reason in @p err.
 */
int sg_ctl_secret_load(const char *path, bool private_file, uint8_t buf[SG_CTL_SECRET_MAX],
		       size_t *len, char *err, size_t errlen);


struct sg_ctl_client;

/**
 * Connect. @p target is "unix:PATH", "tcp:HOST:PORT", "HOST:PORT" or a path
 * (contains '/'). Over TCP the client answers the server's challenge with
 * @p secret before returning. @p timeout_ms bounds every exchange.
 * Errors (NULL, errno): EINVAL bad target; ECONNREFUSED, ENOENT...;
 * EACCES when the server refused the authentication; ETIMEDOUT.
 */
struct sg_ctl_client *sg_ctl_client_connect(const char *target, const uint8_t *secret,
					    size_t secret_len, uint32_t timeout_ms);

/**
 * Whether sg_ctl_client_connect() reaches @p target over TCP (and so needs
 * the shared secret): "tcp:..." or no "unix:" prefix and no '/'.
 */
bool sg_ctl_target_is_tcp(const char *target);
/** Close (NULL is fine). */
void sg_ctl_client_close(struct sg_ctl_client *c);

/**
 * Call @p method with @p params_json (a JSON object or array as text, or
 * NULL). On success *result_json is the "result" member as compact JSON
 * text (free() it). On a JSON-RPC error, returns -EREMOTEIO and, if
 * @p err_msg is not NULL, *err_msg holds "message (code)" (free() it).
 * @return 0; -EREMOTEIO; -EINVAL for bad params text; -EPROTO for a bad
 *         reply; -ETIMEDOUT; -ECONNRESET.
 */
int sg_ctl_client_call(struct sg_ctl_client *c, const char *method, const char *params_json,
		       char **result_json, char **err_msg);

/** The versions a node told (sg_ctl_version_check()). */
struct sg_ctl_version {
	char release[32];	/**< its release, "0.1.0" */
	int api;		/**< its control API version (SG_API_VERSION of its build) */
	int protocol;		/**< its wire protocol version (SG_PROTO_VERSION) */
};

/**
 * Ask the node at @p c for its versions (the `version` method, which every API
 * version keeps) and check that it speaks this library's control API
 * (SG_API_VERSION, sg_version.h) and wire protocol (SG_PROTO_VERSION).
 * @param v    out (may be NULL): what the node told, zeroed if it told nothing
 * @param err  the reason on failure, naming both sides' versions and the fix
 * @return 0; -EPROTONOSUPPORT when the node speaks another API or protocol version
 *         or has no `version` method (a node older than this library); -EPROTO for
 *         an answer without the versions; or sg_ctl_client_call()'s errors.
 */
int sg_ctl_version_check(struct sg_ctl_client *c, struct sg_ctl_version *v, char *err,
			 size_t errlen);

/**
 * Compute the authentication answer for @p nonce (raw bytes):
 * HMAC-SHA256(secret, "sigma-ctl-auth-v1" || nonce) as 64 hex characters
 * plus NUL into @p hex (65 bytes). Exposed for tests and other clients.
 */
int sg_ctl_auth_response(const uint8_t *secret, size_t secret_len, const uint8_t *nonce,
			 size_t nonce_len, char *hex);

/** JSON-RPC error codes used by the server (besides the standard ones). */
enum {
	SG_CTL_ERR_PARSE = -32700,
	SG_CTL_ERR_INVALID_REQUEST = -32600,
	SG_CTL_ERR_METHOD_NOT_FOUND = -32601,
	SG_CTL_ERR_INVALID_PARAMS = -32602,
	SG_CTL_ERR_INTERNAL = -32603,
	SG_CTL_ERR_UNAUTHENTICATED = -32001, /**< call "auth" first */
	SG_CTL_ERR_AUTH_FAILED = -32002,     /**< wrong HMAC */
	SG_CTL_ERR_REFUSED = -32003,	     /**< the agent refused; message says why */
	SG_CTL_ERR_NOT_SUPPORTED = -32004,   /**< the agent does not implement it */
	SG_CTL_ERR_NOT_FOUND = -32005,	     /**< unknown job or node */
	SG_CTL_ERR_OVERSIZED = -32006,	     /**< frame over max_frame (then closed) */
};

/* ---- the job service ---------------------------------------------------- */

/** A summation node of a job, as the job service reaches it. Zero fields: node_info's. */
struct sg_ctl_jobsvc_node {
	const char *target;   /**< its control socket: "unix:PATH", "HOST:PORT", ... */
	const char *addr;     /**< dataplane IPv4 workers send to (NULL: node_info's addr) */
	uint16_t udp_port;    /**< dataplane UDP port (0: node_info's udp_port) */
	const char *kind;     /**< "cpu" or "gpu" (NULL: node_info's kind) */
	double gbps;	      /**< bandwidth placement weighs by (0: node_info's gbps) */
	bool has_weight;      /**< use @c weight; give every node one, or none (then the
				   BytePS split over the nodes' kinds and gbps) */
	double weight;	      /**< placement weight, >= 0 */
};

/** How the job service reaches the nodes. */
struct sg_ctl_jobsvc {
	const struct sg_ctl_jobsvc_node *nodes; /**< 1..SG_MAX_NODES, each node once */
	unsigned int n_nodes;
	const uint8_t *secret;	/**< shared secret for TCP targets (NULL if all are Unix) */
	size_t secret_len;
	uint32_t timeout_ms;	/**< bounds every exchange [5000] */
};

/**
 * The job to create. Zero fields take the defaults in brackets. Without tensors
 * (n_tensors 0) the job is *open*: no key is placed beforehand, and each node
 * makes a key on its first valid push, so workers may register any tensors
 * after the job exists (docs/control.md, "Open jobs").
 */
struct sg_ctl_job_spec {
	uint32_t id;		  /**< [the lowest id above every job id in use on the nodes] */
	uint32_t workers;	  /**< N, 1..SG_MAX_WORKERS */
	/**
	 * [fp32]; SG_DTYPE_ANY for an open job whose keys each take the dtype of
	 * their first push (the descriptor then says dtype=any)
	 */
	enum sg_dtype dtype;
	enum sg_mode mode;	  /**< [sync] */
	uint32_t partition_bytes; /**< [SG_PARTITION_BYTES_DEFAULT]; a multiple of 8, <= 4 MiB */
	uint32_t chunk_bytes;	  /**< [the largest every node takes]; a multiple of 8 */
	/** 0..1024 tensors: tensor i is id i in libsigma; none (n_tensors 0): an open job */
	const struct sg_ctl_tensor *tensors;
	uint32_t n_tensors;
	/**
	 * Open job: chunk slots each engine (each reducer of a node) may give its keys,
	 * 1..SG_OPEN_SLOTS_MAX [SG_OPEN_SLOTS_DEFAULT]; must be 0 for a job of tensors
	 */
	uint32_t slots;
	/**
	 * auth = mac (docs/security.md): authenticated datagrams. Every node gets
	 * "auth": "mac" (each derives the job key from the full token), chunks leave
	 * SG_AUTH_TRAILER_BYTES for the MAC, the job's descriptor says auth=mac and
	 * its key id (and opens no session), and rank r's own descriptor, with its
	 * two keys only, goes to @c rank_descs[r].
	 */
	bool auth;
	/** with auth: @c workers buffers of desc_cap bytes each, one per rank; else NULL */
	char *const *rank_descs;
	/**
	 * with auth, or NULL: receives the job's full token (SG_CTL_TOKEN_LEN bytes,
	 * 64 hex digits), from which every node derives the job key: whoever holds it
	 * can MAC any rank's push. For an elastic job's proposing rank only
	 * (sigma_elastic_conf.job_token); zeroed on failure.
	 */
	char *token_out;
};

/**
 * Create one job on every node: ask each for node_info (name, dataplane address,
 * kind, bandwidth, largest chunk) and job_list (ids in use), pick one id, one
 * token and one chunk size every node takes, compute the placement weights,
 * and call job_create on each node with the job's node list, so that each
 * keeps exactly the keys placed on it. If any node refuses, the job is
 * destroyed on the nodes that made it, and nothing is left behind.
 * @param desc  receives the job descriptor (sg_desc.h's form, one line, no
 *              newline): what every worker opens the job with
 *              (sigma_open_job()); @p desc_cap of SIGMA_JOB_DESC_MAX (16384) always fits
 * @param err   receives the reason on failure, naming the node
 * An open job is made on every node the same way, with no keys placed.
 * With spec->auth, rank r's descriptor goes to spec->rank_descs[r]: hand each
 * rank its own (it holds that rank's keys, so it is as secret as the shared
 * secret). No key or token is written to @p err or any log.
 * @return the job id (> 0); -EINVAL (a bad spec or node list; auth without
 *         rank_descs, or rank_descs or token_out without auth), -ECONNREFUSED,
 *         -EACCES, -ETIMEDOUT... (a node not reached), -EREMOTEIO (a node
 *         refused: its reason in @p err), -ENOSPC (@p desc_cap too small).
 */
int64_t sg_ctl_job_service_create(const struct sg_ctl_jobsvc *svc,
				  const struct sg_ctl_job_spec *spec, char *desc, size_t desc_cap,
				  char *err, size_t errlen);

/**
 * Destroy job @p id on every node, going on past a node that fails.
 * @return 0; or the first failure (-ENOENT if a node did not have the job),
 *         with every node's failure in @p err.
 */
int sg_ctl_job_service_destroy(const struct sg_ctl_jobsvc *svc, uint32_t id, char *err,
			       size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_CLIENT_H */
