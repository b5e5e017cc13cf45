/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA backend: executes a plan on real GPUs with pinned staging buffers,
 * one stream per chain of dependent steps, events between chains, and host
 * steps (CPU sum, push, pull) as stream callbacks, so that partitions
 * pipeline: partition p+1 copies while partition p is summed. Also the CUDA
 * and GPUDirect probes and the CUDA additions to discovery. The
 * micro-benchmark of copies and reduces is sg_gpu_cuda_bench.c.
 *
 * Without CUDA (SG_HAVE_CUDA == 0) only the probes exist, and they say why.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu_internal.h"

#if SG_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#if !SG_HAVE_CUDA

int sg_gpu_cuda_probe(char *why, size_t len)
{
	return sg_err(why, len, -ENODEV, "built without CUDA (-Dcuda=disabled or no nvcc)");
}

int sg_gpu_gdr_probe(char *why, size_t len)
{
	return sg_err(why, len, -ENOTSUP, "GPUDirect RDMA unavailable: built without CUDA");
}

int sg_gpu_topo_add_cuda_info(struct sg_gpu_topo *t, char *err, size_t errlen)
{
	(void)t;
	return sg_gpu_cuda_probe(err, errlen);
}

#else /* SG_HAVE_CUDA */

#include <dlfcn.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "sg_gpu_cuda.h"
#include "sg_gpu_kernels.h"
#include "sg_gpu_kmath.h"

_Static_assert(SG_GPU_DT_FP32 == SG_DTYPE_FP32 && SG_GPU_DT_FP16 == SG_DTYPE_FP16 &&
		       SG_GPU_DT_BF16 == SG_DTYPE_BF16,
	       "sg_gpu_kmath.h dtype values");
_Static_assert(SG_GPU_KMAX_SRC == SG_GPU_MAX_SRC, "reduce sources");

int sg_gpu_cuda_probe(char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess)
		return sg_err(why, len, -ENODEV, "cudaGetDeviceCount: %s (%s)",
				  cudaGetErrorString(e), cudaGetErrorName(e));
	if (n <= 0)
		return sg_err(why, len, -ENODEV, "cudaGetDeviceCount found no device");
	return n;
}

/* ---- GPUDirect RDMA probe ----------------------------------------------- */

typedef CUresult (*get_handle_fn)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
				  unsigned long long);

int sg_gpu_gdr_probe(char *why, size_t len)
{
#if !SG_HAVE_VERBS
	return sg_err(why, len, -ENOTSUP, "GPUDirect RDMA unavailable: built without rdma-core");
#else
	enum cudaDriverEntryPointQueryResult q;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr = NULL;
	get_handle_fn get_handle = NULL;
	const size_t size = 2 << 20;
	void *dev = NULL;
	int n = 0, fd = -1, rc;

	list = ibv_get_device_list(&n);
	if (list == NULL || n == 0) {
		if (list != NULL)
			ibv_free_device_list(list);
		return sg_err(why, len, -ENODEV,
				  "GPUDirect RDMA unavailable: no RDMA device (ibv_get_device_list)");
	}
	rc = sg_gpu_cuda_probe(why, len);
	if (rc < 0)
		goto out;
	/* The ByVersion form exists from CUDA 12.5; meson accepts CUDA 12.0 and later. */
#if CUDART_VERSION >= 12050
	if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange",
					     (void **)&get_handle, 12000, cudaEnableDefault,
					     &q) != cudaSuccess ||
#else
	if (cudaGetDriverEntryPoint("cuMemGetHandleForAddressRange", (void **)&get_handle,
				    cudaEnableDefault, &q) != cudaSuccess ||
#endif
	    q != cudaDriverEntryPointSuccess || get_handle == NULL) {
		rc = sg_err(why, len, -ENOTSUP,
				"GPUDirect RDMA unavailable: the driver lacks dma-buf export "
				"(cuMemGetHandleForAddressRange)");
		goto out;
	}
	if (cudaMalloc(&dev, size) != cudaSuccess) {
		rc = sg_err(why, len, -ENOMEM, "GPUDirect RDMA probe: cudaMalloc failed");
		goto out;
	}
	if (get_handle(&fd, (CUdeviceptr)(uintptr_t)dev, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
		       0) != CUDA_SUCCESS) {
		rc = sg_err(why, len, -ENOTSUP,
				"GPUDirect RDMA unavailable: dma-buf export of device memory "
				"refused (kernel or driver without dma-buf support)");
		goto out;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (pd == NULL) {
		rc = sg_err(why, len, -ENODEV, "GPUDirect RDMA probe: cannot open %s",
				ibv_get_device_name(list[0]));
		goto out;
	}
	mr = ibv_reg_dmabuf_mr(pd, 0, size, 0, fd,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_WRITE);
	if (mr == NULL) {
		rc = errno;
		rc = sg_err(why, len, -ENOTSUP,
				"GPUDirect RDMA unavailable: ibv_reg_dmabuf_mr on %s: %s",
				ibv_get_device_name(list[0]), strerror(rc));
		goto out;
	}
	snprintf(why, len, "GPUDirect RDMA available: ibv_reg_dmabuf_mr works on %s",
		 ibv_get_device_name(list[0]));
	rc = 0;
out:
	if (mr != NULL)
		ibv_dereg_mr(mr);
	if (pd != NULL)
		ibv_dealloc_pd(pd);
	if (ctx != NULL)
		ibv_close_device(ctx);
	if (fd >= 0)
		close(fd);
	cudaFree(dev);
	ibv_free_device_list(list);
	return rc;
#endif
}

/* ---- discovery additions ------------------------------------------------ */

/* The NVML subset we need, loaded at run time (no NVML headers or link). */
typedef struct {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
} nvml_pci_t;
typedef void *nvml_dev_t;

static void nvlinks_from_nvml(struct sg_gpu_topo *t)
{
	int (*init)(void), (*fini)(void), (*by_pci)(const char *, nvml_dev_t *);
	int (*state)(nvml_dev_t, unsigned, int *), (*remote)(nvml_dev_t, unsigned, nvml_pci_t *);
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);

	if (h == NULL)
		return;
	init = (int (*)(void))dlsym(h, "nvmlInit_v2");
	fini = (int (*)(void))dlsym(h, "nvmlShutdown");
	by_pci = (int (*)(const char *, nvml_dev_t *))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
	state = (int (*)(nvml_dev_t, unsigned, int *))dlsym(h, "nvmlDeviceGetNvLinkState");
	remote = (int (*)(nvml_dev_t, unsigned, nvml_pci_t *))dlsym(
		h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	if (init == NULL || fini == NULL || by_pci == NULL || state == NULL || remote == NULL ||
	    init() != 0)
		goto out;
	for (unsigned g = 0; g < t->ngpus; g++) {
		nvml_dev_t dev;

		if (by_pci(t->nodes[t->gpu[g]].pci, &dev) != 0)
			continue;
		for (unsigned l = 0; l < 18; l++) { /* NVML_NVLINK_MAX_LINKS */
			char addr[16];
			nvml_pci_t pci;
			int active = 0, peer;

			if (state(dev, l, &active) != 0 || !active || remote(dev, l, &pci) != 0)
				continue;
			snprintf(addr, sizeof(addr), "%04x:%02x:%02x.0", pci.domain & 0xffff,
				 pci.bus & 0xff, pci.device & 0x1f);
			peer = -1;
			for (unsigned i = 0; i < t->nnodes; i++)
				if (strcmp(t->nodes[i].pci, addr) == 0)
					peer = (int)i;
			if (peer < 0) {
				char name[SG_GPU_NAME_LEN];

				/* Not one of our GPUs: an NVSwitch. */
				snprintf(name, sizeof(name), "nvs-%s", addr);
				peer = sg_gpu_topo_add_node(t, SG_GPU_NODE_NVSWITCH, name, -1, NULL,
							    0);
				if (peer >= 0)
					snprintf(t->nodes[peer].pci, sizeof(t->nodes[peer].pci),
						 "%s", addr);
			}
			/* Each GPU reports its end of a GPU-GPU link: count it once. */
			if (peer >= 0 && (t->nodes[peer].kind == SG_GPU_NODE_NVSWITCH ||
					  t->nodes[peer].index > (int)g))
				sg_gpu_topo_add_nvlink(t, t->gpu[g], peer, 1, NULL, 0);
		}
	}
	fini();
out:
	dlclose(h);
}

int sg_gpu_topo_add_cuda_info(struct sg_gpu_topo *t, char *err, size_t errlen)
{
	int n = sg_gpu_cuda_probe(err, errlen), map[SG_GPU_MAX_GPUS];

	if (n < 0)
		return n;
	for (unsigned g = 0; g < t->ngpus; g++) {
		map[g] = -1;
		for (int d = 0; d < n; d++) {
			char bus[32];

			if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) == cudaSuccess &&
			    strcasecmp(bus, t->nodes[t->gpu[g]].pci) == 0)
				map[g] = d;
		}
	}
	for (unsigned a = 0; a < t->ngpus; a++) {
		for (unsigned b = 0; b < t->ngpus; b++) {
			int ok = 0;

			if (a != b && map[a] >= 0 && map[b] >= 0 &&
			    cudaDeviceCanAccessPeer(&ok, map[a], map[b]) != cudaSuccess)
				ok = 0;
			t->peer[a][b] = ok != 0;
		}
	}
	/* Errors of the calls above only meant "unknown": leave none behind. */
	(void)cudaGetLastError();
	t->have_peer_info = true;
	nvlinks_from_nvml(t);
	return 0;
}

/* ---- the backend -------------------------------------------------------- */

#define MAX_STREAMS 64 /* more chains share their device's streams (events keep order) */
#define MAX_DEPTH 8

struct cb_arg {
	struct sg_gpu_cuda *c;
	unsigned part, step, slot;
	uint32_t len;
};

struct sg_gpu_cuda {
	const struct sg_gpu_plan *plan;
	enum sg_dtype dtype;
	size_t elem;
	unsigned depth;
	int dev[SG_GPU_MAX_GPUS];
	sg_gpu_net_fn net;
	void *net_arg;
	uint64_t *deps;
	int *stream_of;                       /* per step */
	int *dev_of;                          /* per step: device that issues it */
	unsigned nstreams;
	cudaStream_t stream[MAX_STREAMS];
	int stream_dev[MAX_STREAMS];
	/* per depth slot */
	void *scratch[MAX_DEPTH][SG_GPU_MAX_GPUS];
	void *host[MAX_DEPTH][SG_GPU_MAX_HOST];
	bool registered[MAX_DEPTH][SG_GPU_MAX_HOST]; /* NUMA memory + cudaHostRegister */
	void *loop[MAX_DEPTH];
	cudaEvent_t *ev[MAX_DEPTH];          /* per step */
	struct cb_arg *cb[MAX_DEPTH];        /* per step */
	void *const *grads;
	_Atomic int cb_rc;
	unsigned *waits;                     /* scratch for issue_step() */
	cudaEvent_t start[SG_GPU_MAX_GPUS];  /* per logical GPU, on its device */
	bool broken;                         /* a sticky error: the context is lost */
};

/*
 * Errors after which the CUDA context is unusable: every later call fails
 * the same way until the process exits (CUDA's "sticky" errors).
 */
static bool sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorAssert:
	case cudaErrorLaunchTimeout:
	case cudaErrorECCUncorrectable:
	case cudaErrorContextIsDestroyed:
		return true;
	default:
		return false;
	}
}

int sg_gpu_cuda_fail(cudaError_t e, const char *what)
{
	SG_GPU_LOG(ERR, "cuda: %s: %s (%s)%s", what, cudaGetErrorString(e), cudaGetErrorName(e),
		   sticky(e) ? "; the CUDA context is lost, restart the process" : "");
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* Streams for the plan's chains (see sg_gpu_plan_chains()). */
static int create_streams(struct sg_gpu_cuda *c)
{
	int n = sg_gpu_plan_chains(c->plan, c->deps, c->dev, c->dev_of, c->stream_of,
				   c->stream_dev, MAX_STREAMS);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		CK(cudaSetDevice(c->stream_dev[i]));
		CK(cudaStreamCreateWithFlags(&c->stream[i], cudaStreamNonBlocking));
		c->nstreams++;
	}
	return 0;
}

/*
 * Pinned staging memory on the NUMA node the plan chose for it (the planner
 * keeps each switch's staging on its own socket). cudaHostAlloc places
 * memory where the calling thread runs, so on a multi-node machine the
 * buffer comes from that node and is pinned with cudaHostRegister.
 */
static cudaError_t pinned_alloc(void **p, size_t size, int numa, bool *registered)
{
	cudaError_t e;

	*registered = false;
	if (sg_sum_numa_nodes() > 1 && numa >= 0 && numa < sg_sum_numa_nodes()) {
		*p = sg_sum_numa_alloc(size, numa);
		if (*p == NULL)
			return cudaErrorMemoryAllocation;
		e = cudaHostRegister(*p, size, cudaHostRegisterPortable);
		if (e != cudaSuccess) {
			sg_sum_numa_free(*p, size);
			*p = NULL;
			return e;
		}
		*registered = true;
		return cudaSuccess;
	}
	return cudaHostAlloc(p, size, cudaHostAllocPortable);
}

static void pinned_free(void *p, size_t size, bool registered)
{
	if (p == NULL)
		return;
	if (registered) {
		cudaHostUnregister(p);
		sg_sum_numa_free(p, size);
	} else {
		cudaFreeHost(p);
	}
}

static int cuda_alloc(struct sg_gpu_cuda *c)
{
	const struct sg_gpu_plan *p = c->plan;
	size_t part = p->partition_bytes;
	uint32_t done[SG_GPU_MAX_GPUS] = {0}; /* GPU pairs whose peer access is set up */

	for (unsigned d = 0; d < c->depth; d++) {
		for (unsigned g = 0; g < p->ngpus && p->scratch_slots > 0; g++) {
			CK(cudaSetDevice(c->dev[g]));
			CK(cudaMalloc(&c->scratch[d][g], part * p->scratch_slots));
		}
		for (unsigned h = 0; h < p->nhost; h++)
			CK(pinned_alloc(&c->host[d][h], part, c->plan->host_numa[h],
					&c->registered[d][h]));
		CK(cudaHostAlloc(&c->loop[d], part, cudaHostAllocPortable));
		c->ev[d] = calloc(p->nsteps, sizeof(cudaEvent_t));
		c->cb[d] = calloc(p->nsteps, sizeof(struct cb_arg));
		if (c->ev[d] == NULL || c->cb[d] == NULL)
			return -ENOMEM;
		for (unsigned s = 0; s < p->nsteps; s++) {
			CK(cudaSetDevice(c->dev_of[s]));
			CK(cudaEventCreateWithFlags(&c->ev[d][s], cudaEventDisableTiming));
		}
	}
	for (unsigned g = 0; g < p->ngpus; g++) {
		CK(cudaSetDevice(c->dev[g]));
		CK(cudaEventCreateWithFlags(&c->start[g], cudaEventDisableTiming));
	}
	/* Let P2P copies go straight between devices where the hardware allows. */
	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];
		unsigned ga = st->src[0].idx, gb = st->dst.idx;
		int a, b, ok = 0;
		cudaError_t e;

		if ((st->kind != SG_GPU_STEP_P2P && st->kind != SG_GPU_STEP_BCAST) ||
		    (done[ga] >> gb & 1))
			continue;
		done[ga] |= 1u << gb;
		a = c->dev[ga];
		b = c->dev[gb];
		if (a == b)
			continue;
		e = cudaDeviceCanAccessPeer(&ok, a, b);
		if (e == cudaSuccess && ok) {
			CK(cudaSetDevice(a));
			e = cudaDeviceEnablePeerAccess(b, 0);
			/* Enabled before (another executor) is fine. */
			if (e == cudaErrorPeerAccessAlreadyEnabled)
				continue;
		}
		/*
		 * No peer access (or a full peer table): cudaMemcpyPeerAsync
		 * still works, but through host memory, which is not the PCIe
		 * traffic the plan's checker counted. Say so once per pair.
		 */
		if (e != cudaSuccess || !ok)
			SG_GPU_LOG(WARNING,
				   "cuda: gpu%u -> gpu%u (devices %d -> %d, step %u): no peer access "
				   "(%s), CUDA stages the copies through host memory",
				   ga, gb, a, b, s, e != cudaSuccess ? cudaGetErrorName(e) : "none");
	}
	/* Drop the errors the probes above left behind (they were handled). */
	(void)cudaGetLastError();
	return 0;
}

void sg_gpu_cuda_destroy(struct sg_gpu_cuda *c)
{
	if (c == NULL)
		return;
	for (unsigned i = 0; i < c->nstreams; i++) {
		cudaSetDevice(c->stream_dev[i]);
		cudaStreamSynchronize(c->stream[i]);
		cudaStreamDestroy(c->stream[i]);
	}
	for (unsigned d = 0; d < MAX_DEPTH; d++) {
		for (unsigned g = 0; g < SG_GPU_MAX_GPUS; g++) {
			if (c->scratch[d][g] == NULL)
				continue;
			cudaSetDevice(c->dev[g]);
			cudaFree(c->scratch[d][g]);
		}
		for (unsigned h = 0; h < SG_GPU_MAX_HOST; h++)
			pinned_free(c->host[d][h], c->plan->partition_bytes, c->registered[d][h]);
		cudaFreeHost(c->loop[d]);
		for (unsigned s = 0; c->ev[d] != NULL && s < c->plan->nsteps; s++)
			if (c->ev[d][s] != NULL)
				cudaEventDestroy(c->ev[d][s]);
		free(c->ev[d]);
		free(c->cb[d]);
	}
	for (unsigned g = 0; g < SG_GPU_MAX_GPUS; g++) {
		if (c->start[g] == NULL)
			continue;
		cudaSetDevice(c->dev[g]);
		cudaEventDestroy(c->start[g]);
	}
	free(c->waits);
	free(c->deps);
	free(c->stream_of);
	free(c->dev_of);
	free(c);
}

/*
 * CUDA device ordinals in PCI address order. Discovery numbers GPUs by PCI
 * address, but CUDA's default order (CUDA_DEVICE_ORDER=FASTEST_FIRST) is
 * not specified beyond device 0: "logical GPU i on device i" could put a
 * plan's steps on other GPUs than the ones it was checked for.
 */
static int pci_order(int ndev, int *order)
{
	char bus[SG_GPU_MAX_GPUS][32];

	if (ndev > SG_GPU_MAX_GPUS)
		ndev = SG_GPU_MAX_GPUS;
	for (int d = 0; d < ndev; d++) {
		CK(cudaDeviceGetPCIBusId(bus[d], sizeof(bus[d]), d));
		order[d] = d;
	}
	/* Insertion sort: at most 16 devices. */
	for (int i = 1; i < ndev; i++)
		for (int j = i; j > 0 && strcasecmp(bus[order[j - 1]], bus[order[j]]) > 0; j--) {
			int x = order[j];

			order[j] = order[j - 1];
			order[j - 1] = x;
		}
	return 0;
}

struct sg_gpu_cuda *sg_gpu_cuda_create(const struct sg_gpu_exec_conf *conf,
				       const struct sg_gpu_plan *plan)
{
	int order[SG_GPU_MAX_GPUS];
	struct sg_gpu_cuda *c = calloc(1, sizeof(*c));
	int ndev = 0, rc;

	if (c == NULL)
		return NULL;
	c->plan = plan;
	c->dtype = conf->dtype;
	c->elem = sg_gpu_exec_elem(conf->dtype);
	c->depth = conf->depth == 0 ? 2 : conf->depth > MAX_DEPTH ? MAX_DEPTH : conf->depth;
	c->net = conf->net;
	c->net_arg = conf->net_arg;
	rc = cudaGetDeviceCount(&ndev) == cudaSuccess ? 0 : -ENODEV;
	if (rc == 0 && conf->device_of == NULL)
		rc = pci_order(ndev, order);
	for (unsigned g = 0; rc == 0 && g < plan->ngpus; g++) {
		c->dev[g] = conf->device_of != NULL ? conf->device_of[g]
			    : g < (unsigned)ndev && g < SG_GPU_MAX_GPUS ? order[g]
									: ndev;
		if (c->dev[g] < 0 || c->dev[g] >= ndev) {
			SG_GPU_LOG(ERR, "cuda: gpu%u mapped to device %d of %d", g, c->dev[g],
				   ndev);
			rc = -EINVAL;
		}
	}
	c->deps = rc == 0 ? sg_gpu_plan_deps(plan) : NULL;
	c->stream_of = calloc(plan->nsteps, sizeof(int));
	c->dev_of = calloc(plan->nsteps, sizeof(int));
	c->waits = calloc(plan->nsteps, sizeof(unsigned));
	if (rc == 0 && (c->deps == NULL || c->stream_of == NULL || c->dev_of == NULL ||
			c->waits == NULL))
		rc = -ENOMEM;
	if (rc == 0)
		rc = create_streams(c);
	if (rc == 0)
		rc = cuda_alloc(c);
	if (rc < 0) {
		sg_gpu_cuda_destroy(c);
		errno = -rc;
		return NULL;
	}
	return c;
}

static void *dev_addr(struct sg_gpu_cuda *c, unsigned slot, unsigned part,
		      const struct sg_gpu_ep *e, uint32_t off)
{
	size_t psz = c->plan->partition_bytes;

	switch (e->mem) {
	case SG_GPU_MEM_GRAD:
		return (uint8_t *)c->grads[e->idx] + (size_t)part * psz + off;
	case SG_GPU_MEM_SCRATCH:
		return (uint8_t *)c->scratch[slot][e->idx] + sg_gpu_ep_offset(e, (uint32_t)psz, off);
	case SG_GPU_MEM_HOST:
		return (uint8_t *)c->host[slot][e->idx] + off;
	default:
		return (uint8_t *)c->loop[slot] + off;
	}
}

/* Host steps run as stream callbacks: no CUDA calls allowed in here. */
static void CUDART_CB host_cb(void *arg)
{
	struct cb_arg *a = arg;
	struct sg_gpu_cuda *c = a->c;
	const struct sg_gpu_step *st = &c->plan->steps[a->step];
	const void *src[SG_GPU_MAX_SRC];
	int rc;

	for (unsigned i = 0; i < st->nsrc; i++)
		src[i] = dev_addr(c, a->slot, a->part, &st->src[i], st->data_off);
	rc = sg_gpu_host_step(st, c->dtype, dev_addr(c, a->slot, a->part, &st->dst, st->data_off),
			      src, c->net, c->net_arg, a->part, a->len);
	if (rc < 0) {
		int zero = 0;

		atomic_compare_exchange_strong(&c->cb_rc, &zero, rc);
	}
}

static int issue_step(struct sg_gpu_cuda *c, unsigned slot, unsigned part, unsigned s,
		      uint32_t len)
{
	const struct sg_gpu_plan *p = c->plan;
	const struct sg_gpu_step *st = &p->steps[s];
	cudaStream_t str = c->stream[c->stream_of[s]];
	void *dst = dev_addr(c, slot, part, &st->dst, st->data_off);
	const void *src[SG_GPU_MAX_SRC];
	unsigned nw;

	CK(cudaSetDevice(c->dev_of[s]));
	/* Dependencies on other streams: events of this partition (same slot). */
	nw = sg_gpu_step_waits(p, c->deps, c->stream_of, s, c->waits);
	for (unsigned i = 0; i < nw; i++)
		CK(cudaStreamWaitEvent(str, c->ev[slot][c->waits[i]], 0));
	for (unsigned i = 0; i < st->nsrc; i++)
		src[i] = dev_addr(c, slot, part, &st->src[i], st->data_off);
	switch (st->kind) {
	case SG_GPU_STEP_P2P:
	case SG_GPU_STEP_BCAST:
		/* The only GPU-to-GPU copies: exactly where the plan put them. */
		CK(cudaMemcpyPeerAsync(dst, c->dev[st->dst.idx], src[0], c->dev[st->src[0].idx],
				       len, str));
		break;
	case SG_GPU_STEP_REDUCE:
		CK(sg_gpu_kernel_reduce(c->dtype, dst, src, st->nsrc, len / c->elem, str));
		break;
	case SG_GPU_STEP_D2H:
		CK(cudaMemcpyAsync(dst, src[0], len, cudaMemcpyDeviceToHost, str));
		break;
	case SG_GPU_STEP_H2D:
		CK(cudaMemcpyAsync(dst, src[0], len, cudaMemcpyHostToDevice, str));
		break;
	default:
		c->cb[slot][s] = (struct cb_arg){.c = c, .part = part, .step = s, .slot = slot,
						 .len = len};
		CK(cudaLaunchHostFunc(str, host_cb, &c->cb[slot][s]));
		break;
	}
	CK(cudaEventRecord(c->ev[slot][s], str));
	return 0;
}

/*
 * Wait until every step of the partition that used this slot is done. All
 * events are waited for even after an error, so that nothing of the slot is
 * still running when the caller reuses or frees its buffers.
 */
static int drain_slot(struct sg_gpu_cuda *c, unsigned slot)
{
	int rc = 0;

	for (unsigned s = 0; s < c->plan->nsteps; s++) {
		cudaError_t e = cudaEventSynchronize(c->ev[slot][s]);

		if (e != cudaSuccess && rc == 0)
			rc = sg_gpu_cuda_fail(e, "cudaEventSynchronize");
	}
	return rc;
}

/*
 * Our streams are non-blocking: they do not wait for the legacy default
 * stream, where a caller's cudaMemcpy(Async)(..., 0) or kernel<<<..>>> that
 * wrote the gradients may still run. Order every stream after what each
 * device's legacy stream holds now (the contract in sg_gpu.h).
 */
static int wait_for_callers(struct sg_gpu_cuda *c)
{
	for (unsigned g = 0; g < c->plan->ngpus; g++) {
		CK(cudaSetDevice(c->dev[g]));
		CK(cudaEventRecord(c->start[g], cudaStreamLegacy));
	}
	for (unsigned i = 0; i < c->nstreams; i++) {
		CK(cudaSetDevice(c->stream_dev[i]));
		for (unsigned g = 0; g < c->plan->ngpus; g++)
			CK(cudaStreamWaitEvent(c->stream[i], c->start[g], 0));
	}
	return 0;
}

/* A step with nothing to move in this (short, last) partition: mark it done. */
static int record_skipped(struct sg_gpu_cuda *c, unsigned slot, unsigned s)
{
	CK(cudaSetDevice(c->dev_of[s]));
	CK(cudaEventRecord(c->ev[slot][s], c->stream[c->stream_of[s]]));
	return 0;
}

int sg_gpu_cuda_run(struct sg_gpu_cuda *c, void *const *grads, size_t bytes)
{
	size_t psz = c->plan->partition_bytes;
	unsigned nparts = (unsigned)sg_gpu_nparts(bytes, (uint32_t)psz);
	int rc = 0;

	if (c->broken) {
		SG_GPU_LOG(ERR, "cuda: an earlier run lost the CUDA context; restart the process");
		return -EIO;
	}
	c->grads = grads;
	atomic_store(&c->cb_rc, 0);
	rc = nparts > 0 ? wait_for_callers(c) : 0;
	for (unsigned part = 0; rc == 0 && part < nparts; part++) {
		unsigned slot = part % c->depth;
		uint32_t len = sg_gpu_part_len(bytes, (uint32_t)psz, part);

		/*
		 * The slot's buffers, events and callback arguments are reused:
		 * the partition that had them must be finished. Up to 'depth'
		 * partitions stay in flight, which is what overlaps copy and sum.
		 */
		if (part >= c->depth)
			rc = drain_slot(c, slot);
		/* A failed host step (the network) ends the run early. */
		if (rc == 0)
			rc = atomic_load(&c->cb_rc);
		for (unsigned s = 0; rc == 0 && s < c->plan->nsteps; s++) {
			const struct sg_gpu_step *st = &c->plan->steps[s];
			uint32_t n = sg_gpu_step_len(st->data_off, st->bytes, len);

			/*
			 * A skipped step still records its event, so that later
			 * waits see it completed. Errors only set rc: the drain
			 * below must run before the caller's buffers are released.
			 */
			rc = n == 0 ? record_skipped(c, slot, s) : issue_step(c, slot, part, s, n);
		}
	}
	for (unsigned d = 0; d < c->depth && d < nparts; d++) {
		int r = drain_slot(c, d);

		rc = rc < 0 ? rc : r;
	}
	if (rc == 0)
		rc = atomic_load(&c->cb_rc);
	/* A sticky error fails every later call: make later runs say so at once. */
	if (rc == -EIO && sticky(cudaPeekAtLastError()))
		c->broken = true;
	return rc;
}

#endif /* SG_HAVE_CUDA */
