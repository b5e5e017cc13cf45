/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma_job_for_node(): a session's placement (sigma_placement.h) as the
 * engine's job structs. Apart from libsigma, so that the worker library is
 * compiled against no engine header; the tests and sigma-bench link it.
 */
#include <errno.h>

#include "sigma_job_conf.h"
#include "sigma_placement.h"

struct key_fill {
	struct sg_dp_key *keys;
	unsigned int cap;
	unsigned int n;
};

static void key_put(void *arg, uint32_t key, uint32_t nelem)
{
	struct key_fill *f = arg;

	if (f->n < f->cap && f->keys != NULL)
		f->keys[f->n] = (struct sg_dp_key){.id = key, .nelem = nelem};
	f->n++;
}

int sigma_job_for_node(const struct sigma_session *s, unsigned int node,
		       struct sg_dp_job_conf *job, struct sg_dp_key *keys, unsigned int cap)
{
	struct key_fill f = {.keys = keys, .cap = cap};
	struct sigma_placement pl;
	int nk;

	if (job == NULL)
		return -EINVAL;
	nk = sigma_placement_of(s, node, &pl, key_put, &f);
	if (nk < 0)
		return nk;
	*job = (struct sg_dp_job_conf){
		.id = pl.job,
		.nworkers = pl.nworkers,
		.token = pl.token,
		.dtype = pl.dtype < 0 ? SG_DTYPE_FP32 : (enum sg_dtype)pl.dtype,
		.partition_bytes = pl.partition_bytes,
		.chunk_bytes = pl.chunk_bytes,
		.keys = keys,
		.nkeys = f.n < cap ? f.n : cap,
	};
	return nk;
}
