/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared inside gpu/ only: logging, error formatting and the backend vtable.
 */
#ifndef SG_GPU_INTERNAL_H
#define SG_GPU_INTERNAL_H

#include <rte_log.h>

#include "sg_config.h"
#include "sg_err.h"
#include "sg_gpu.h"

extern int sg_gpu_logtype;

/* The macro ends the line: no "\n" in @p fmt. */
#define SG_GPU_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sg_gpu_logtype, "sigma.gpu: " fmt "\n", ##__VA_ARGS__)

/* Address of an endpoint for partition-relative data offset 'off'. */
static inline size_t sg_gpu_ep_offset(const struct sg_gpu_ep *ep, uint32_t part, uint32_t off)
{
	return (size_t)ep->slot * part + off;
}

/* Element size of the dtypes the executors accept, 0 otherwise. */
static inline size_t sg_gpu_exec_elem(enum sg_dtype dt)
{
	return dt == SG_DTYPE_FP32 ? 4 : (dt == SG_DTYPE_FP16 || dt == SG_DTYPE_BF16) ? 2 : 0;
}

/*
 * Dependencies between the steps of a plan: bit (s, t) is set when step t
 * (t < s) writes what s touches or touches what s writes, on overlapping
 * bytes. Returns a calloc'd nsteps x nsteps bit matrix, NULL on ENOMEM.
 */
uint64_t *sg_gpu_plan_deps(const struct sg_gpu_plan *p);

static inline void sg_gpu_dep_set(uint64_t *bits, unsigned n, unsigned s, unsigned t)
{
	size_t i = (size_t)s * n + t;

	bits[i / 64] |= 1ull << (i % 64);
}

static inline bool sg_gpu_dep_test(const uint64_t *bits, unsigned n, unsigned s, unsigned t)
{
	size_t i = (size_t)s * n + t;

	return bits[i / 64] >> (i % 64) & 1;
}

/*
 * Cut a plan into chains for streams. A step runs on the device of the GPU
 * whose engine does the work (reduce, H2D: destination; P2P, broadcast,
 * D2H: source; host steps: the device of GPU 0). It continues the stream of
 * a dependency that was the last step on that stream and on the same device,
 * else it opens a new stream; at most max_streams, then it shares one of
 * its device's. dev[g] is the device of logical GPU g; dev_of and stream_of
 * get one entry per step, stream_dev one per stream. Dependencies on other
 * streams must become event waits. Returns the number of streams, or
 * -ENOSPC when a device would need a stream beyond max_streams.
 */
int sg_gpu_plan_chains(const struct sg_gpu_plan *p, const uint64_t *deps, const int *dev,
		       int *dev_of, int *stream_of, int *stream_dev, unsigned max_streams);

/*
 * The part of sg_gpu_plan_validate() that needs no topology: the header,
 * every step's kind, byte range, sources and destination, and (elem > 1)
 * every byte range and the partition a multiple of elem. What the executor
 * checks before it runs a plan. @return 0 or -EINVAL with the reason in err.
 */
int sg_gpu_plan_validate_steps(const struct sg_gpu_plan *p, size_t elem, char *err,
			       size_t errlen);

/*
 * One host step (CPU_SUM, PUSH, PULL, H2H; every kind on the host backend)
 * on resolved addresses: dst and src[0..nsrc) of st, n bytes at st->data_off
 * of partition 'part'. REDUCE adds into dst; PUSH/PULL call net, or copy to
 * and from the loopback buffer (dst resp. src[0]) when net is NULL. Shared by
 * the host backend and the CUDA backend's stream callbacks: makes no CUDA
 * call. @return 0 or what net or sg_sum_addk() returned.
 */
int sg_gpu_host_step(const struct sg_gpu_step *st, enum sg_dtype dt, void *dst,
		     const void *const *src, sg_gpu_net_fn net, void *net_arg, unsigned part,
		     uint32_t n);

/*
 * The events step s of a partition waits for before it starts on its stream:
 * for each other stream, the latest earlier step there that s depends on
 * (streams run in order, so the earlier ones are done by then). Writes step
 * indices to waits[] (room for nsteps) and returns how many.
 */
unsigned sg_gpu_step_waits(const struct sg_gpu_plan *p, const uint64_t *deps,
			   const int *stream_of, unsigned s, unsigned *waits);

/* A PCIe link as sysfs tells it (0: unknown). */
struct sg_gpu_pcie_link {
	double cur_gts, max_gts; /* GT/s per lane: current, and the maximum of both ends */
	unsigned cur_width, max_width;
	double gts;              /* what the bound uses: max if known, else current */
	unsigned width;
	double gbps;             /* GB/s each way: gts x width x encoding / 8 */
};

/*
 * The PCIe bound of device @p bdf ("0000:3b:00.0", lower case) under
 * @p sysfs_root: the maximum speed and width both the device and the port
 * above it support (an idle GPU's current speed is often lowered), times
 * the line encoding (8b/10b below 8 GT/s, 128b/130b up to 32 GT/s, FLIT
 * 242/256 at 64 GT/s). @return 0, -ENOENT when sysfs gives no figures, or
 * -EINVAL / -errno for a bad address.
 */
int sg_gpu_pcie_link(const char *sysfs_root, const char *bdf, struct sg_gpu_pcie_link *l);

/* Topology walks shared by the planner and the checker (sg_gpu_topo.c). */

/** Hops from node @p n up to its socket (a socket has depth 0). */
int sg_gpu_topo_depth(const struct sg_gpu_topo *t, int n);

/** True when node @p n is @p anc or lies below it. */
bool sg_gpu_topo_below(const struct sg_gpu_topo *t, int n, int anc);

/** Index in t->nvlinks of the edge joining @p a and @p b, or -1. */
int sg_gpu_topo_nvlink_edge(const struct sg_gpu_topo *t, int a, int b);

#if SG_HAVE_CUDA
/* CUDA backend (sg_gpu_cuda.c); only built with CUDA. */
struct sg_gpu_cuda;
struct sg_gpu_cuda *sg_gpu_cuda_create(const struct sg_gpu_exec_conf *conf,
				       const struct sg_gpu_plan *plan);
int sg_gpu_cuda_run(struct sg_gpu_cuda *c, void *const *grads, size_t bytes);
void sg_gpu_cuda_destroy(struct sg_gpu_cuda *c);
#endif

#endif /* SG_GPU_INTERNAL_H */
