/* SPDX-License-Identifier: BSD-3-Clause */
/* libsigma's side of the job descriptor: a ready sigma_conf from one line of text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_desc.h"
#include "sigma_internal.h"

_Static_assert(SIGMA_JOB_DESC_MAX == SG_DESC_MAX, "one descriptor length");

int sigma_job_parse(const char *descriptor, struct sigma_job *job, char *err, size_t errlen)
{
	struct sg_desc d;
	int rc;

	if (job == NULL)
		return -EINVAL;
	rc = sg_desc_parse(descriptor, &d, err, errlen);
	if (rc != 0)
		return rc;
	memset(job, 0, sizeof(*job));
	for (unsigned int i = 0; i < d.n_nodes; i++) {
		snprintf(job->names[i], sizeof(job->names[i]), "%s", d.nodes[i].name);
		snprintf(job->addrs[i], sizeof(job->addrs[i]), "%s", d.nodes[i].addr);
		job->nodes[i] = (struct sigma_node){.name = job->names[i], .addr = job->addrs[i],
						    .port = d.nodes[i].port,
						    .kind = d.nodes[i].kind, .gbps = d.nodes[i].gbps};
		job->weights[i] = d.nodes[i].weight;
	}
	job->auth = d.auth;
	job->has_keys = d.has_keys;
	job->rank = d.rank;
	memcpy(job->auth_keys, d.keys, sizeof(job->auth_keys));
	explicit_bzero(d.keys, sizeof(d.keys));
	job->dtype = d.dtype;
	job->mode = d.mode;
	job->conf = (struct sigma_conf){.job = d.id, .nworkers = (uint16_t)d.workers,
					.token = d.token, .nodes = job->nodes,
					.nnodes = d.n_nodes, .weights = job->weights,
					.partition_bytes = d.partition_bytes,
					.chunk_bytes = d.chunk_bytes,
					.rank = d.rank,
					.auth_keys = d.has_keys ? job->auth_keys : NULL,
					.auth_key_id = d.key_id};
	return 0;
}

struct sigma_session *sigma_open_job(const char *descriptor, uint16_t rank,
				     const struct sigma_conf *base, char *err, size_t errlen)
{
	struct sigma_job *job = malloc(sizeof(*job));
	struct sigma_session *s = NULL;
	struct sigma_conf c = {0};
	int rc;

	if (job == NULL)
		return NULL;
	rc = sigma_job_parse(descriptor, job, err, errlen);
	if (rc != 0)
		goto out;
	if (rank >= job->conf.nworkers) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "rank %u: the job has %u workers (ranks 0..%u)", rank,
				 job->conf.nworkers, job->conf.nworkers - 1u);
		rc = -EINVAL;
		goto out;
	}
	/* each rank's keys are its own: no descriptor opens another rank's session */
	if (job->auth && (!job->has_keys || job->rank != rank)) {
		if (err != NULL && errlen > 0 && !job->has_keys)
			snprintf(err, errlen, "job %u has auth = mac and this descriptor holds no rank's "
				 "keys (it is the job's): open rank %u with its own descriptor (the "
				 "job service hands one to each rank)", job->conf.job, rank);
		else if (err != NULL && errlen > 0)
			snprintf(err, errlen, "job %u has auth = mac and this descriptor holds rank %u's "
				 "keys, not rank %u's: open each rank with its own descriptor",
				 job->conf.job, job->rank, rank);
		rc = -EACCES;
		goto out;
	}
	if (base != NULL)
		c = *base;
	/*
	 * An async store holds every push since the job began, on its node only: the
	 * survivors cannot rebuild it from what the workers hold (docs/cluster.md).
	 */
	if (job->mode == SG_MODE_ASYNC && (c.failover || c.membership != NULL)) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "failover (sigma_conf.failover or membership) is not "
				 "supported in async mode: a chunk's async store holds the sum of "
				 "every push since the job began, on its node only, and no survivor can "
				 "rebuild it from what the workers hold; open the session without "
				 "failover, or make the job sync or deterministic");
		rc = -EOPNOTSUPP;
		goto out;
	}
	c.job = job->conf.job;
	c.rank = rank;
	c.nworkers = job->conf.nworkers;
	c.token = job->conf.token;
	c.nodes = job->conf.nodes;
	c.nnodes = job->conf.nnodes;
	c.weights = job->conf.weights;
	c.partition_bytes = job->conf.partition_bytes;
	c.chunk_bytes = job->conf.chunk_bytes;
	c.auth_keys = job->conf.auth_keys;
	c.auth_key_id = job->conf.auth_key_id;
	s = sigma_open(&c);
	if (s == NULL) {
		rc = -errno;
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "cannot open the session: %s", strerror(errno));
		goto out;
	}
	/* a job of dtype any (an open job) takes each tensor's own */
	if (job->dtype != SG_DTYPE_ANY)
		sg_cli_set_job_dtype(s, job->dtype);
out:
	explicit_bzero(job->auth_keys, sizeof(job->auth_keys));
	free(job);
	if (s == NULL)
		errno = -rc;
	return s;
}
