/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The job description a libsigma session's tensors give each node: what the
 * control plane's job service hands a node, computed here by the worker, for
 * the tests and `sigma-bench run`, which start their own nodes. Not installed
 * and not exported from libsigma.so (libsigma.map): it fills the engine's job
 * structs (sg_dp_engine.h), which the worker API does not know. It is a
 * library of its own (sigma_job_conf.c, meson's job_conf_dep) over libsigma's
 * placement accessor (sigma_placement.h), so that libsigma is compiled
 * against no engine header.
 */
#ifndef SIGMA_JOB_CONF_H
#define SIGMA_JOB_CONF_H

#include "sg_dp_engine.h"
#include "sigma.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The job description node @p node needs for this session's registered
 * tensors (what the control plane would hand it): fills @p job (id, N, token,
 * dtype of the first tensor, chunk and partition size) and up to @p cap keys
 * placed on @p node. The keys' dtype must be the same for all tensors of a
 * job on the engine; @return -EINVAL otherwise.
 * @return the number of keys on that node (may exceed @p cap), or -errno.
 */
int sigma_job_for_node(const struct sigma_session *s, unsigned int node,
		       struct sg_dp_job_conf *job, struct sg_dp_key *keys, unsigned int cap);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_JOB_CONF_H */
