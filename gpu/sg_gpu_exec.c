/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Plan execution: backend choice and the host backend, which emulates every
 * GPU in host memory so that any plan can be run and its sums checked on a
 * machine without GPUs. The CUDA backend lives in sg_gpu_cuda.c; what both
 * run (the steps' dependencies and one host step) in sg_gpu_step.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu_internal.h"
#include "sg_gpu_kmath.h"

struct sg_gpu_exec {
	enum sg_gpu_backend backend;
	enum sg_dtype dtype;
	size_t elem;
	struct sg_gpu_plan plan; /* steps owned by the executor */
	sg_gpu_net_fn net;
	void *net_arg;
	char reason[256];
	unsigned shuffle;
	/* host backend */
	uint8_t **scratch; /* per GPU: scratch_slots partitions */
	uint8_t **host;    /* per host buffer: one partition */
	uint8_t *loop;     /* loopback "service": one partition */
	unsigned *order;   /* execution order of the steps */
#if SG_HAVE_CUDA
	struct sg_gpu_cuda *cuda;
#endif
};

static const char *const backend_names[] = {"auto", "host", "cuda"};

const char *sg_gpu_backend_name(enum sg_gpu_backend b)
{
	return (unsigned)b <= SG_GPU_BACKEND_CUDA ? backend_names[b] : "unknown";
}

/*
 * A random order that the dependencies allow. Running a plan this way checks
 * that the dependency analysis (which the CUDA backend relies on for its
 * streams) misses nothing.
 */
static int shuffled_order(const struct sg_gpu_plan *p, unsigned seed, unsigned *order)
{
	uint64_t *deps = sg_gpu_plan_deps(p);
	bool *done = calloc(p->nsteps + 1, sizeof(bool));
	int rc = 0;

	if (deps == NULL || done == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (unsigned k = 0; k < p->nsteps; k++) {
		unsigned nready = 0, pick = 0;

		/* Reservoir choice among the ready steps; deps only point backwards,
		 * so the first step not done is always ready. */
		for (unsigned s = 0; s < p->nsteps; s++) {
			bool ready = !done[s];

			for (unsigned t = 0; ready && t < s; t++)
				ready = done[t] || !sg_gpu_dep_test(deps, p->nsteps, s, t);
			if (ready && (unsigned)rand_r(&seed) % ++nready == 0)
				pick = s;
		}
		done[pick] = true;
		order[k] = pick;
	}
out:
	free(deps);
	free(done);
	return rc;
}

static void host_free(struct sg_gpu_exec *ex)
{
	size_t part = ex->plan.partition_bytes;

	for (unsigned g = 0; ex->scratch != NULL && g < ex->plan.ngpus; g++)
		sg_sum_numa_free(ex->scratch[g], part * ex->plan.scratch_slots);
	for (unsigned h = 0; ex->host != NULL && h < ex->plan.nhost; h++)
		sg_sum_numa_free(ex->host[h], part);
	sg_sum_numa_free(ex->loop, part);
	free(ex->scratch);
	free(ex->host);
}

static int host_init(struct sg_gpu_exec *ex)
{
	size_t part = ex->plan.partition_bytes;
	int nodes = sg_sum_numa_nodes();

	ex->scratch = calloc(ex->plan.ngpus, sizeof(*ex->scratch));
	ex->host = calloc(ex->plan.nhost + 1, sizeof(*ex->host));
	if (ex->scratch == NULL || ex->host == NULL)
		return -ENOMEM;
	for (unsigned g = 0; g < ex->plan.ngpus && ex->plan.scratch_slots > 0; g++) {
		ex->scratch[g] = sg_sum_numa_alloc(part * ex->plan.scratch_slots, -1);
		if (ex->scratch[g] == NULL)
			return -ENOMEM;
	}
	for (unsigned h = 0; h < ex->plan.nhost; h++) {
		int numa = ex->plan.host_numa[h];

		/* A topology file may name NUMA nodes this machine lacks. */
		ex->host[h] = sg_sum_numa_alloc(part, numa < nodes ? numa : -1);
		if (ex->host[h] == NULL)
			return -ENOMEM;
	}
	ex->loop = sg_sum_numa_alloc(part, -1);
	return ex->loop == NULL ? -ENOMEM : 0;
}

static int check_conf(const struct sg_gpu_exec_conf *conf, size_t elem)
{
	char why[200];

	if (elem == 0) {
		SG_GPU_LOG(ERR, "executor: dtype %s not supported (fp32, fp16, bf16)",
			   sg_dtype_name(conf->dtype));
		return -EINVAL;
	}
	if ((unsigned)conf->backend > SG_GPU_BACKEND_CUDA) {
		SG_GPU_LOG(ERR, "executor: unknown backend %d", (int)conf->backend);
		return -EINVAL;
	}
	/* The executor has no topology: the topology-free part of sg_gpu_plan_validate(). */
	if (sg_gpu_plan_validate_steps(conf->plan, elem, why, sizeof(why)) < 0) {
		SG_GPU_LOG(ERR, "executor: %s", why);
		return -EINVAL;
	}
	return 0;
}

struct sg_gpu_exec *sg_gpu_exec_create(const struct sg_gpu_exec_conf *conf)
{
	struct sg_gpu_exec *ex;
	size_t elem;
	int rc;

	if (conf == NULL) {
		errno = EINVAL;
		return NULL;
	}
	elem = sg_gpu_exec_elem(conf->dtype);
	rc = check_conf(conf, elem);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	ex = calloc(1, sizeof(*ex));
	if (ex == NULL)
		return NULL;
	ex->plan = *conf->plan;
	ex->plan.steps = malloc(conf->plan->nsteps * sizeof(struct sg_gpu_step));
	ex->order = malloc(conf->plan->nsteps * sizeof(unsigned));
	if (ex->plan.steps == NULL || ex->order == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	memcpy(ex->plan.steps, conf->plan->steps, conf->plan->nsteps * sizeof(struct sg_gpu_step));
	ex->plan.cap = ex->plan.nsteps;
	ex->dtype = conf->dtype;
	ex->elem = elem;
	ex->net = conf->net;
	ex->net_arg = conf->net_arg;
	ex->backend = conf->backend;
	if (ex->backend != SG_GPU_BACKEND_HOST) {
		char why[200];
		int n = sg_gpu_cuda_probe(why, sizeof(why));

		if (n > 0 && conf->device_of == NULL && (unsigned)n < ex->plan.ngpus) {
			snprintf(why, sizeof(why), "the plan has %u GPUs, CUDA sees %d",
				 ex->plan.ngpus, n);
			n = -ENODEV;
		}
		if (n < 0 && ex->backend == SG_GPU_BACKEND_CUDA) {
			SG_GPU_LOG(ERR, "CUDA backend unusable: %s", why);
			rc = -ENODEV;
			goto fail;
		}
		if (n < 0) {
			snprintf(ex->reason, sizeof(ex->reason), "%s", why);
			SG_GPU_LOG(INFO, "CUDA unusable (%s): using the host backend", why);
			ex->backend = SG_GPU_BACKEND_HOST;
		} else {
			ex->backend = SG_GPU_BACKEND_CUDA;
		}
	}
#if SG_HAVE_CUDA
	if (ex->backend == SG_GPU_BACKEND_CUDA) {
		ex->cuda = sg_gpu_cuda_create(conf, &ex->plan);
		if (ex->cuda == NULL) {
			rc = -(errno ? errno : ENODEV);
			goto fail;
		}
		return ex;
	}
#endif
	/* Test hook: run steps in another order the dependencies allow. */
	ex->shuffle = conf->shuffle;
	for (unsigned s = 0; s < ex->plan.nsteps; s++)
		ex->order[s] = s;
	rc = ex->shuffle ? shuffled_order(&ex->plan, ex->shuffle, ex->order) : 0;
	if (rc == 0)
		rc = host_init(ex);
	if (rc == 0)
		return ex;
fail:
	sg_gpu_exec_destroy(ex);
	errno = -rc;
	return NULL;
}

enum sg_gpu_backend sg_gpu_exec_backend(const struct sg_gpu_exec *ex)
{
	return ex->backend;
}

const char *sg_gpu_exec_fallback_reason(const struct sg_gpu_exec *ex)
{
	return ex->reason;
}

static uint8_t *host_addr(struct sg_gpu_exec *ex, void *const *grads, unsigned part,
			  const struct sg_gpu_ep *e, uint32_t off)
{
	size_t psz = ex->plan.partition_bytes;

	switch (e->mem) {
	case SG_GPU_MEM_GRAD:
		return (uint8_t *)grads[e->idx] + (size_t)part * psz + off;
	case SG_GPU_MEM_SCRATCH:
		return ex->scratch[e->idx] + sg_gpu_ep_offset(e, ex->plan.partition_bytes, off);
	case SG_GPU_MEM_HOST:
		return ex->host[e->idx] + off;
	default:
		return ex->loop + off;
	}
}

static int host_step(struct sg_gpu_exec *ex, void *const *grads, unsigned part,
		     const struct sg_gpu_step *st, uint32_t n)
{
	const void *src[SG_GPU_MAX_SRC];

	for (unsigned i = 0; i < st->nsrc; i++)
		src[i] = host_addr(ex, grads, part, &st->src[i], st->data_off);
	return sg_gpu_host_step(st, ex->dtype, host_addr(ex, grads, part, &st->dst, st->data_off),
				src, ex->net, ex->net_arg, part, n);
}

int sg_gpu_exec_run(struct sg_gpu_exec *ex, void *const *grads, size_t bytes)
{
	size_t psz;
	unsigned nparts;

	if (ex == NULL || grads == NULL) {
		SG_GPU_LOG(ERR, "run: no executor or no tensor array");
		return -EINVAL;
	}
	if (bytes % ex->elem != 0) {
		SG_GPU_LOG(ERR, "run: %zu bytes is not a multiple of the %zu-byte element", bytes,
			   ex->elem);
		return -EINVAL;
	}
	psz = ex->plan.partition_bytes;
	if (sg_gpu_nparts(bytes, psz) > UINT32_MAX) {
		SG_GPU_LOG(ERR, "run: %zu bytes is too many partitions", bytes);
		return -EINVAL;
	}
	for (unsigned g = 0; g < ex->plan.ngpus; g++) {
		if (grads[g] == NULL && bytes > 0) {
			SG_GPU_LOG(ERR, "run: no tensor for gpu%u", g);
			return -EINVAL;
		}
	}
#if SG_HAVE_CUDA
	if (ex->cuda != NULL)
		return sg_gpu_cuda_run(ex->cuda, grads, bytes);
#endif
	nparts = (unsigned)sg_gpu_nparts(bytes, psz);
	for (unsigned part = 0; part < nparts; part++) {
		uint32_t len = sg_gpu_part_len(bytes, psz, part);

		for (unsigned k = 0; k < ex->plan.nsteps; k++) {
			const struct sg_gpu_step *st = &ex->plan.steps[ex->order[k]];
			/* The last partition may be short: clip every step to it. */
			uint32_t n = sg_gpu_step_len(st->data_off, st->bytes, len);
			int rc;

			if (n == 0)
				continue;
			rc = host_step(ex, grads, part, st, n);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

void sg_gpu_exec_destroy(struct sg_gpu_exec *ex)
{
	if (ex == NULL)
		return;
#if SG_HAVE_CUDA
	sg_gpu_cuda_destroy(ex->cuda);
#endif
	host_free(ex);
	free(ex->plan.steps);
	free(ex->order);
	free(ex);
}
