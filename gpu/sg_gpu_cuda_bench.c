/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA micro-benchmark (sg_gpu_cuda_bench(), sigma-bench gpu): timed
 * host-device and device-device copies, the reduce kernels with their results
 * checked, and a staging run of a one-GPU plan through the executor. Without
 * CUDA it says why it cannot run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu_internal.h"

#if !SG_HAVE_CUDA

int sg_gpu_cuda_bench(const struct sg_gpu_bench_conf *conf, struct sg_gpu_bench_result *r,
		      char *why, size_t len)
{
	(void)conf;
	memset(r, 0, sizeof(*r));
	return sg_gpu_cuda_probe(why, len);
}

#else /* SG_HAVE_CUDA */

#include <time.h>

#include <cuda_runtime_api.h>

#include "sg_gpu_cuda.h"
#include "sg_gpu_kernels.h"

/* ---- benchmark measurements --------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum bench_op { OP_H2D, OP_D2H, OP_D2D, OP_RED32, OP_RED16, OP_REDB16 };

/* Median seconds of one operation over 'runs' timed runs (one warm-up). */
static int time_op(enum bench_op op, void *hbuf, void *d0, void *d1, size_t bytes,
		   unsigned runs, double *out)
{
	double t[64];
	const void *src[1] = {d1};

	for (unsigned r = 0; r <= runs && r <= 64; r++) {
		double t0 = now_s();

		switch (op) {
		case OP_H2D:
			CK(cudaMemcpyAsync(d0, hbuf, bytes, cudaMemcpyHostToDevice, 0));
			break;
		case OP_D2H:
			CK(cudaMemcpyAsync(hbuf, d0, bytes, cudaMemcpyDeviceToHost, 0));
			break;
		case OP_D2D:
			CK(cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, 0));
			break;
		case OP_RED32:
			CK(sg_gpu_kernel_reduce(SG_DTYPE_FP32, d0, src, 1, bytes / 4, 0));
			break;
		case OP_RED16:
			CK(sg_gpu_kernel_reduce(SG_DTYPE_FP16, d0, src, 1, bytes / 2, 0));
			break;
		default:
			CK(sg_gpu_kernel_reduce(SG_DTYPE_BF16, d0, src, 1, bytes / 2, 0));
			break;
		}
		CK(cudaDeviceSynchronize());
		if (r > 0)
			t[r - 1] = now_s() - t0;
	}
	*out = median(t, runs < 64 ? runs : 64);
	return 0;
}

/*
 * H2D and D2H at once on two streams, median seconds: the duplex bound of
 * pipelined staging, whose copies in the two directions overlap.
 */
static int time_bidir(void *h1, void *h2, void *d0, void *d1, size_t bytes, unsigned runs,
		      double *out)
{
	cudaStream_t s[2] = {NULL, NULL};
	double t[64];
	int rc = 0;

	for (int i = 0; i < 2; i++)
		if (cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking) != cudaSuccess)
			rc = sg_gpu_cuda_fail(cudaGetLastError(), "cudaStreamCreateWithFlags");
	for (unsigned r = 0; rc == 0 && r <= runs && r <= 64; r++) {
		double t0 = now_s();
		cudaError_t e = cudaMemcpyAsync(d0, h1, bytes, cudaMemcpyHostToDevice, s[0]);

		if (e == cudaSuccess)
			e = cudaMemcpyAsync(h2, d1, bytes, cudaMemcpyDeviceToHost, s[1]);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s[0]);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s[1]);
		if (e != cudaSuccess)
			rc = sg_gpu_cuda_fail(e, "bidirectional copy");
		else if (r > 0)
			t[r - 1] = now_s() - t0;
	}
	for (int i = 0; i < 2; i++)
		if (s[i] != NULL)
			cudaStreamDestroy(s[i]);
	if (rc == 0)
		*out = median(t, runs < 64 ? runs : 64);
	return rc;
}

/*
 * One correctness run of the reduce kernel per figure: dst += a + b on
 * 2^20 + 3 elements, every pointer one element past 16-byte alignment (the
 * head, vector and tail paths), against sg_sum_addk() bit for bit.
 */
static int check_reduce(enum sg_dtype dt, bool *exact)
{
	const size_t n = (1u << 20) + 3, es = sg_dtype_size(dt);
	const size_t bytes = ((n + 1) * es + 15) & ~(size_t)15; /* regions 16-byte aligned */
	uint8_t *h = malloc(4 * bytes), *dv = NULL;
	const void *ref[3], *src[2];
	int rc = 0;

	*exact = false;
	if (h == NULL)
		return -ENOMEM;
	/*
	 * Each region on its own: regions are 'bytes' apart, which is more than
	 * (n + 1) elements for fp16/bf16, so one run over 3 * (n + 1) elements
	 * would leave the last elements of the third source unwritten.
	 */
	for (size_t i = 0; i < 3 * (n + 1); i++) {
		float f = (float)((int)((i * 2654435761u) % 20011) - 10005) / 997.0f;
		uint8_t *at = h + i / (n + 1) * bytes + i % (n + 1) * es;

		if (dt == SG_DTYPE_FP32)
			memcpy(at, &f, 4);
		else {
			uint16_t v = dt == SG_DTYPE_FP16 ? sg_fp32_to_fp16(f) : sg_fp32_to_bf16(f);

			memcpy(at, &v, 2);
		}
	}
	for (int j = 0; j < 3; j++)
		ref[j] = h + j * bytes + es;
	if (sg_sum_addk(dt, h + 3 * bytes + es, ref, 3, n, 0) < 0) {
		free(h);
		return -EINVAL;
	}
	if (cudaMalloc((void **)&dv, 3 * bytes) != cudaSuccess ||
	    cudaMemcpy(dv, h, 3 * bytes, cudaMemcpyHostToDevice) != cudaSuccess)
		rc = sg_gpu_cuda_fail(cudaGetLastError(), "check_reduce: buffers");
	src[0] = dv + bytes + es;
	src[1] = dv + 2 * bytes + es;
	if (rc == 0) {
		cudaError_t e = sg_gpu_kernel_reduce(dt, dv + es, src, 2, n, 0);

		if (e == cudaSuccess)
			e = cudaMemcpy(h, dv, bytes, cudaMemcpyDeviceToHost); /* synchronises */
		if (e != cudaSuccess)
			rc = sg_gpu_cuda_fail(e, "check_reduce");
	}
	if (rc == 0)
		*exact = memcmp(h + es, h + 3 * bytes + es, n * es) == 0;
	cudaFree(dv);
	free(h);
	return rc;
}

/* PCIe bound of the GPU's link from sysfs (see sg_gpu_pcie_link()). */
static double pcie_bound(int dev, char *link, size_t len)
{
	struct sg_gpu_pcie_link l;
	char bus[32];

	if (cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess) {
		snprintf(link, len, "unknown (cudaDeviceGetPCIBusId failed)");
		return 0;
	}
	for (char *p = bus; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
	if (sg_gpu_pcie_link("/", bus, &l) < 0) {
		snprintf(link, len, "%.16s: no link figures in sysfs", bus);
		return 0;
	}
	snprintf(link, len, "%.16s: %.1f GT/s x%u (now %.1f GT/s x%u)", bus, l.gts, l.width,
		 l.cur_gts, l.cur_width);
	return l.gbps;
}

/* A one-GPU machine: the staging path alone (D2H, push, pull, H2D). */
static const char one_gpu[] = "socket cpu0\nroot rp0 parent=cpu0\ngpu gpu0 parent=rp0\n"
			      "root rp1 parent=cpu0\nnic nic0 parent=rp1\n";

/*
 * Pipelined staging of the whole tensor through the executor, against the
 * sum of its parts measured alone: the D2H, the host copies of the loopback
 * push and pull, and the H2D.
 */
static int bench_staging(const struct sg_gpu_bench_conf *conf, struct sg_gpu_bench_result *r,
			 size_t bytes, unsigned runs, char *why, size_t len)
{
	struct sg_gpu_plan_opts o = {.partition_bytes = conf->partition_bytes};
	struct sg_gpu_exec_conf ec = {.backend = SG_GPU_BACKEND_CUDA, .dtype = SG_DTYPE_FP32,
				      .depth = conf->depth ? conf->depth : 4,
				      .device_of = &conf->device};
	struct sg_gpu_topo *t = sg_gpu_topo_parse(one_gpu, "bench", why, len);
	struct sg_gpu_plan *p = t ? sg_gpu_plan_build(t, &o, why, len) : NULL;
	struct sg_gpu_exec *ex = NULL;
	double tv[64], host;
	void *d = NULL, *h1 = NULL, *h2 = NULL;
	int rc = p ? 0 : -EINVAL;

	ec.plan = p;
	if (rc == 0 && (ex = sg_gpu_exec_create(&ec)) == NULL)
		rc = sg_err(why, len, -errno, "bench: executor: %s", strerror(errno));
	if (rc == 0 && (cudaMalloc(&d, bytes) != cudaSuccess ||
			cudaHostAlloc(&h1, bytes, 0) != cudaSuccess ||
			cudaHostAlloc(&h2, bytes, 0) != cudaSuccess))
		rc = sg_err(why, len, -ENOMEM, "bench: staging buffers of %zu bytes", bytes);
	if (rc == 0) {
		memset(h1, 1, bytes);
		memset(h2, 2, bytes);
	}
	for (unsigned i = 0; rc == 0 && i <= runs && i <= 64; i++) {
		double t0 = now_s();

		rc = sg_gpu_exec_run(ex, &d, bytes);
		if (rc < 0)
			sg_err(why, len, rc, "bench: staging run failed (see the log)");
		if (i > 0)
			tv[i - 1] = now_s() - t0;
	}
	if (rc == 0) {
		r->stage_pipelined_s = median(tv, runs < 64 ? runs : 64);
		for (unsigned i = 0; i <= runs && i <= 64; i++) {
			double t0 = now_s();

			memcpy(h2, h1, bytes); /* loopback push */
			memcpy(h1, h2, bytes); /* loopback pull */
			if (i > 0)
				tv[i - 1] = now_s() - t0;
		}
		host = median(tv, runs < 64 ? runs : 64);
		r->stage_parts_s = bytes / (r->d2h_gbps * 1e9) + bytes / (r->h2d_gbps * 1e9) + host;
		r->stage_host_s = host;
		r->stage_gbps = bytes / r->stage_pipelined_s / 1e9;
	}
	cudaFree(d);
	cudaFreeHost(h1);
	cudaFreeHost(h2);
	sg_gpu_exec_destroy(ex);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
	return rc;
}

int sg_gpu_cuda_bench(const struct sg_gpu_bench_conf *conf, struct sg_gpu_bench_result *r,
		      char *why, size_t len)
{
	size_t bytes = conf->bytes ? conf->bytes : 64u << 20;
	unsigned runs = conf->runs ? conf->runs : 5;
	struct cudaDeviceProp prop;
	void *h = NULL, *h2 = NULL, *d0 = NULL, *d1 = NULL;
	int rc = sg_gpu_cuda_probe(why, len);
	cudaError_t e;
	double t;

	memset(r, 0, sizeof(*r));
	if (rc < 0)
		return rc;
	if (conf->device < 0 || conf->device >= rc)
		return sg_err(why, len, -ENODEV, "device %d: CUDA sees %d device(s)",
				  conf->device, rc);
	e = cudaSetDevice(conf->device);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&prop, conf->device);
	if (e != cudaSuccess)
		return sg_err(why, len, -EIO, "device %d: %s", conf->device,
				  cudaGetErrorString(e));
	snprintf(r->device, sizeof(r->device), "%.63s", prop.name);
	r->bytes = bytes;
	r->runs = runs;
	r->pcie_bound_gbps = pcie_bound(conf->device, r->link, sizeof(r->link));
	e = cudaHostAlloc(&h, bytes, cudaHostAllocPortable);
	if (e == cudaSuccess)
		e = cudaHostAlloc(&h2, bytes, cudaHostAllocPortable);
	if (e == cudaSuccess)
		e = cudaMalloc(&d0, bytes);
	if (e == cudaSuccess)
		e = cudaMalloc(&d1, bytes);
	if (e == cudaSuccess)
		e = cudaMemset(d0, 0, bytes);
	if (e == cudaSuccess)
		e = cudaMemset(d1, 0, bytes);
	if (e != cudaSuccess)
		rc = sg_err(why, len, -ENOMEM, "%zu-byte buffers: %s", bytes,
				cudaGetErrorString(e));
	else {
		memset(h, 0, bytes);
		memset(h2, 0, bytes);
	}
	if (rc >= 0 && (rc = time_op(OP_H2D, h, d0, d1, bytes, runs, &t)) == 0)
		r->h2d_gbps = bytes / t / 1e9;
	if (rc == 0 && (rc = time_op(OP_D2H, h, d0, d1, bytes, runs, &t)) == 0)
		r->d2h_gbps = bytes / t / 1e9;
	if (rc == 0 && (rc = time_bidir(h, h2, d0, d1, bytes, runs, &t)) == 0)
		r->bidir_gbps = bytes / t / 1e9;
	/* Device-memory traffic: a copy reads and writes each byte once. */
	if (rc == 0 && (rc = time_op(OP_D2D, h, d0, d1, bytes, runs, &t)) == 0)
		r->dev_copy_gbps = 2.0 * bytes / t / 1e9;
	/* dst += src reads two bytes and writes one per byte of tensor. */
	for (int k = 0; rc == 0 && k < 3; k++) {
		rc = time_op(OP_RED32 + k, h, d0, d1, bytes, runs, &t);
		if (rc == 0)
			r->reduce_gbps[k] = 3.0 * bytes / t / 1e9;
	}
	for (int k = 0; rc == 0 && k < 3; k++)
		rc = check_reduce(k == 0 ? SG_DTYPE_FP32 : k == 1 ? SG_DTYPE_FP16 : SG_DTYPE_BF16,
				  &r->reduce_exact[k]);
	if (rc < 0 && why[0] == '\0')
		sg_err(why, len, rc, "a timed copy or reduce failed (see the log)");
	cudaFreeHost(h);
	cudaFreeHost(h2);
	cudaFree(d0);
	cudaFree(d1);
	if (rc == 0)
		rc = bench_staging(conf, r, bytes, runs, why, len);
	return rc;
}

#endif /* SG_HAVE_CUDA */
