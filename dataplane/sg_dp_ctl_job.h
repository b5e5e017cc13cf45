/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A job made over the control plane (struct sg_ctl_job, job_create) as an
 * aggregation engine takes it (struct sg_dp_job_conf): the one conversion that
 * every node's job_create uses (sigmad's agent, sigma-udpd). Header only, so
 * that it adds no library: a node links the engine and the control server
 * anyway, and neither of those two depends on the other.
 */
#ifndef SG_DP_CTL_JOB_H
#define SG_DP_CTL_JOB_H

#include <stdint.h>

#include "sg_ctl_server.h"
#include "sg_dp_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Copy @p n keys of the control plane into the engine's form, @p out (room for @p n). */
static inline void sg_dp_keys_from_ctl(const struct sg_ctl_key *in, uint32_t n,
				       struct sg_dp_key *out)
{
	for (uint32_t k = 0; k < n; k++)
		out[k] = (struct sg_dp_key){.id = in[k].id, .nelem = in[k].nelem};
}

/* The largest chunk of @p job on a node of @p max_chunk: a MAC's trailer must fit too. */
static inline uint32_t sg_dp_ctl_max_chunk(const struct sg_ctl_job *job, uint32_t max_chunk)
{
	return job->auth ? (max_chunk - SG_DP_MAC_TRAILER) & ~7u : max_chunk;
}

/**
 * The engine's configuration of job @p job under id @p id: its wire token
 * (sg_ctl_wire_token() of job->token, or the one the node kept), the chunk size
 * asked for or @p max_chunk (the node's largest) when it asked for none, and
 * @p keys (@p n_keys, from sg_dp_keys_from_ctl()), which an open job has none
 * of: it gets its chunk slots instead (job->slots, or SG_OPEN_SLOTS_DEFAULT).
 * @p keys must outlive the engine's add_job call, which copies them.
 */
static inline struct sg_dp_job_conf sg_dp_job_from_ctl(const struct sg_ctl_job *job, uint32_t id,
						       uint64_t token, uint32_t max_chunk,
						       const struct sg_dp_key *keys,
						       uint32_t n_keys)
{
	return (struct sg_dp_job_conf){
		.id = id, .nworkers = job->n_workers, .token = token, .dtype = job->dtype,
		.mode = job->mode, .partition_bytes = job->partition_bytes,
		.chunk_bytes = job->chunk_bytes ? job->chunk_bytes : sg_dp_ctl_max_chunk(job, max_chunk),
		.keys = job->open ? NULL : keys, .nkeys = job->open ? 0 : n_keys,
		.open = job->open, .slots = job->open ? (job->slots ?: SG_OPEN_SLOTS_DEFAULT) : 0,
		.auth_key = job->auth ? job->auth_key : NULL,
	};
}

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_CTL_JOB_H */
