/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The job descriptor: one line of text that tells a worker everything it needs
 * about a job made by the job service (docs/client.md, "The job descriptor"):
 *
 *     sigma-job=1;id=7;workers=4;token=0123456789abcdef;dtype=fp32;mode=sync;
 *     partition_bytes=4096000;chunk_bytes=1424;node=a,10.0.0.21,9300,cpu,100,0.5;
 *     node=b,10.0.0.22,9300,cpu,100,0.5
 *
 * (one line, no spaces). A job with authenticated datagrams (auth = mac,
 * docs/security.md) adds `auth=mac;key_id=HEX8` to the job's descriptor, and
 * each rank's own descriptor adds `rank=R;keys=HEX128`: its two keys (what it
 * sends, what the node sends it), which no other rank's descriptor holds.
 * The control plane writes it (the job service of sg_ctl_client.h,
 * sigmactl), libsigma reads it (sigma_job_parse()), and the Python package
 * does both; this module is the one C implementation of the form. Pure C with
 * no dependency but sg_types, so libsigma links it.
 *
 * Functions return 0 (or a length) or a negative errno.
 */
#ifndef SG_DESC_H
#define SG_DESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Version of the form this build reads and writes (the value of `sigma-job`). */
#define SG_DESC_VERSION 1
/** Longest descriptor, with its NUL: 64 nodes with 63-character names fit. */
#define SG_DESC_MAX 16384

/** One summation node of a job. */
struct sg_desc_node {
	char name[SG_NAME_MAX];	/**< the node's [control] name: placement hashes it */
	char addr[16];		/**< IPv4, dotted quad */
	uint16_t port;		/**< UDP port, 1..65535 */
	enum sg_node_kind kind; /**< CPU or GPU machine */
	double gbps;		/**< bandwidth (> 0), informative once weights are given */
	double weight;		/**< placement weight (>= 0; not all 0) */
};

/** A parsed descriptor. */
struct sg_desc {
	uint32_t id;		  /**< job id, >= 1 */
	uint32_t workers;	  /**< N, 1..SG_MAX_WORKERS */
	uint64_t token;		  /**< the 64-bit wire token */
	enum sg_dtype dtype;	  /**< SG_DTYPE_ANY ("any"): each tensor may have its own */
	enum sg_mode mode;
	uint32_t partition_bytes; /**< multiple of 8, chunk_bytes..SG_MAX_PARTITION_BYTES */
	uint32_t chunk_bytes;	  /**< multiple of 8, 8..SG_MAX_CHUNK_BYTES */
	unsigned int n_nodes;	  /**< 1..SG_MAX_NODES */
	struct sg_desc_node nodes[SG_MAX_NODES];
	bool auth;		  /**< auth=mac: authenticated datagrams (key_id= given) */
	uint32_t key_id;	  /**< the job key's id (sg_auth_key_id()), with auth */
	bool has_keys;		  /**< rank= and keys= given: one rank's descriptor */
	uint16_t rank;		  /**< whose keys, below workers */
	/** that rank's key for what it sends, then the node's key for its replies to it */
	uint8_t keys[64];
};

/**
 * Parse @p text (leading and trailing white space, a final newline too, are
 * ignored) into @p d. Strict: every field is checked, unknown or repeated keys
 * are refused, and so is anything that does not make a job libsigma can open.
 * @return 0, or -EINVAL with the reason in @p err (which names the field and
 *         what it must be), -E2BIG when the text is longer than SG_DESC_MAX.
 */
int sg_desc_parse(const char *text, struct sg_desc *d, char *err, size_t errlen);

/**
 * Write @p d as one line (no newline) into @p buf. Weights are written so
 * that they read back as the same doubles (17 significant digits).
 * @return the length, -EINVAL if @p d would not parse back (the reason in
 *         @p err), or -ENOSPC if @p cap is too small (SG_DESC_MAX always fits).
 */
int sg_desc_format(const struct sg_desc *d, char *buf, size_t cap, char *err, size_t errlen);

/** 0 if @p name can be a node's name in a descriptor: 1..63 of [A-Za-z0-9._-]; else -EINVAL. */
int sg_desc_check_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* SG_DESC_H */
