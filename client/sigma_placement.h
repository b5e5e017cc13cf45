/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * What a libsigma session placed on each node, in libsigma's own terms: the
 * job's parameters after sigma_open()'s defaults and the keys of one node.
 * Not installed and not exported from libsigma.so (libsigma.map). Its one
 * reader is sigma_job_for_node() (sigma_job_conf.h, a library of its own for
 * the tests and `sigma-bench run`), which turns it into the engine's job
 * structs, so that libsigma itself is compiled against no engine header.
 */
#ifndef SIGMA_PLACEMENT_H
#define SIGMA_PLACEMENT_H

#include <stdint.h>

#include "sigma.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A session's job, as its nodes must hold it. */
struct sigma_placement {
	uint32_t job;             /**< the job id */
	uint32_t nworkers;        /**< N */
	uint64_t token;           /**< the session token */
	uint32_t partition_bytes; /**< after sigma_open()'s default */
	uint32_t chunk_bytes;     /**< after sigma_open()'s default */
	int dtype;                /**< the registered tensors' enum sg_dtype; -1: none yet */
};

/** Called once per key placed on the node asked for, in tensor then partition order. */
typedef void sigma_placed_key_fn(void *arg, uint32_t key, uint32_t nelem);

/**
 * Fill @p pl with session @p s's job and call @p fn (if not NULL) with each
 * key placed on node @p node (< the session's nnodes): its wire key
 * (sg_wire_key()) and its element count.
 * @return the number of keys on that node, or -EINVAL: @p s or @p pl NULL,
 * @p node out of range, or tensors of more than one dtype (an engine's job
 * has one).
 */
int sigma_placement_of(const struct sigma_session *s, unsigned int node,
		       struct sigma_placement *pl, sigma_placed_key_fn *fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_PLACEMENT_H */
