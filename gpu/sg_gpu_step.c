/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every executor of a plan shares (sg_gpu_internal.h): the dependencies
 * between its steps, the chains (streams) and waits that respect them, and one
 * host step (a CPU sum, a push or a pull, a copy in host memory). The host
 * backend (sg_gpu_exec.c) and the CUDA backend (sg_gpu_cuda.c) both call them;
 * they call neither.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu_internal.h"

/* Bits of step s's access set: 'w' says whether this access writes. */
struct access {
	struct sg_gpu_ep ep;
	bool w;
};

static unsigned accesses(const struct sg_gpu_step *st, struct access *a)
{
	unsigned n = 0;

	a[n++] = (struct access){st->dst, true};
	if (st->kind == SG_GPU_STEP_REDUCE)
		a[n++] = (struct access){st->dst, false};
	for (unsigned i = 0; i < st->nsrc && i < SG_GPU_MAX_SRC; i++)
		a[n++] = (struct access){st->src[i], false};
	return n;
}

static bool conflict(const struct sg_gpu_step *x, const struct sg_gpu_step *y)
{
	struct access ax[SG_GPU_MAX_SRC + 2], ay[SG_GPU_MAX_SRC + 2];
	unsigned nx = accesses(x, ax), ny = accesses(y, ay);

	if (x->data_off >= y->data_off + y->bytes || y->data_off >= x->data_off + x->bytes)
		return false;
	for (unsigned i = 0; i < nx; i++)
		for (unsigned j = 0; j < ny; j++)
			if ((ax[i].w || ay[j].w) && ax[i].ep.mem == ay[j].ep.mem &&
			    ax[i].ep.idx == ay[j].ep.idx && ax[i].ep.slot == ay[j].ep.slot)
				return true;
	return false;
}

uint64_t *sg_gpu_plan_deps(const struct sg_gpu_plan *p)
{
	size_t words = ((size_t)p->nsteps * p->nsteps + 63) / 64;
	uint64_t *bits = calloc(words ? words : 1, sizeof(uint64_t));

	if (bits == NULL)
		return NULL;
	for (unsigned s = 0; s < p->nsteps; s++)
		for (unsigned t = 0; t < s; t++)
			if (conflict(&p->steps[t], &p->steps[s]))
				sg_gpu_dep_set(bits, p->nsteps, s, t);
	return bits;
}

static int step_device(const struct sg_gpu_step *st, const int *dev)
{
	switch (st->kind) {
	case SG_GPU_STEP_REDUCE:
	case SG_GPU_STEP_H2D:
		return dev[st->dst.idx];
	case SG_GPU_STEP_P2P:
	case SG_GPU_STEP_BCAST:
	case SG_GPU_STEP_D2H:
		return dev[st->src[0].idx];
	default:
		return dev[0]; /* host work: any stream can carry its callback */
	}
}

int sg_gpu_plan_chains(const struct sg_gpu_plan *p, const uint64_t *deps, const int *dev,
		       int *dev_of, int *stream_of, int *stream_dev, unsigned max_streams)
{
	int *last = calloc(max_streams + 1, sizeof(int));
	unsigned n = 0;

	if (last == NULL)
		return -ENOMEM;
	for (unsigned s = 0; s < p->nsteps; s++) {
		int pick = -1, d = step_device(&p->steps[s], dev);

		dev_of[s] = d;
		for (int t = (int)s - 1; t >= 0 && pick < 0; t--)
			if (sg_gpu_dep_test(deps, p->nsteps, s, (unsigned)t) &&
			    last[stream_of[t]] == t && stream_dev[stream_of[t]] == d)
				pick = stream_of[t];
		if (pick < 0 && n < max_streams) {
			pick = (int)n++;
			stream_dev[pick] = d;
		}
		/* Out of streams: share one of this device's; events keep it correct. */
		for (unsigned i = 0; i < n && pick < 0; i++)
			if (stream_dev[i] == d)
				pick = (int)i;
		if (pick < 0) {
			free(last);
			return -ENOSPC;
		}
		stream_of[s] = pick;
		last[pick] = (int)s;
	}
	free(last);
	return (int)n;
}

unsigned sg_gpu_step_waits(const struct sg_gpu_plan *p, const uint64_t *deps,
			   const int *stream_of, unsigned s, unsigned *waits)
{
	unsigned n = 0;

	for (int t = (int)s - 1; t >= 0; t--) {
		bool seen = stream_of[t] == stream_of[s];

		for (unsigned i = 0; !seen && i < n; i++)
			seen = stream_of[waits[i]] == stream_of[t];
		if (!seen && sg_gpu_dep_test(deps, p->nsteps, s, (unsigned)t))
			waits[n++] = (unsigned)t;
	}
	return n;
}

int sg_gpu_host_step(const struct sg_gpu_step *st, enum sg_dtype dt, void *dst,
		     const void *const *src, sg_gpu_net_fn net, void *net_arg, unsigned part,
		     uint32_t n)
{
	const void *all[SG_GPU_MAX_SRC + 1];
	size_t elem = sg_gpu_exec_elem(dt);
	unsigned k = 0;

	switch (st->kind) {
	case SG_GPU_STEP_REDUCE:
		all[k++] = dst; /* dst += sources: dst is the first addend */
		/* fallthrough */
	case SG_GPU_STEP_CPU_SUM:
		for (unsigned i = 0; i < st->nsrc; i++)
			all[k++] = src[i];
		if (k == 1) {
			memmove(dst, all[0], n);
			return 0;
		}
		return sg_sum_addk(dt, dst, all, k, n / elem, 0);
	case SG_GPU_STEP_PUSH:
		/* Loopback: src is a host buffer, dst the service's (NET) buffer. */
		if (net != NULL)
			return net(net_arg, part, st->data_off, src[0], NULL, n);
		memcpy(dst, src[0], n);
		return 0;
	case SG_GPU_STEP_PULL:
		if (net != NULL)
			return net(net_arg, part, st->data_off, NULL, dst, n);
		memcpy(dst, src[0], n);
		return 0;
	default:
		/* Every copy kind: the topology matters for speed, not for the bytes. */
		memmove(dst, src[0], n);
		return 0;
	}
}
