/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA backend on a real GPU: the reduce kernels against summation/'s
 * scalar sums (bit for bit: same order of additions, one rounding), the
 * pipelined staging of a large tensor through a simulated service, and
 * every reference plan executed with all its logical GPUs on one device.
 * Skips (77) with the reason when CUDA cannot run here.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "sg_gpu_kernels.h"

#define CUDA_OK(call)                                                                        \
	SG_CHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

static void fill(enum sg_dtype dt, void *buf, size_t n, unsigned seed, bool exact)
{
	for (size_t i = 0; i < n; i++)
		val_set(dt, buf, i,
			exact ? exact_val(i, seed)
			      : (float)((i * 2654435761u + seed * 40503u) % 20011) / 1000.0f - 10.0f);
}

static void test_kernels(void)
{
	static const enum sg_dtype dts[] = {SG_DTYPE_FP32, SG_DTYPE_FP16, SG_DTYPE_BF16};
	static const size_t ns[] = {1, 1000, (1 << 20) + 3};
	static const unsigned ks[] = {1, 3, 16};

	for (unsigned d = 0; d < 3; d++) {
		size_t es = sg_dtype_size(dts[d]);

		for (unsigned ni = 0; ni < 3; ni++) {
			for (unsigned ki = 0; ki < 3; ki++) {
				for (unsigned mis = 0; mis < 2; mis++) {
					size_t n = ns[ni], bytes = (n + 8) * es, off = mis * es;
					unsigned k = ks[ki];
					uint8_t *h[17], *dv[17];
					const void *hsrc[17], *dsrc[16];
					uint8_t *want = malloc(bytes), *got = malloc(bytes);

					for (unsigned j = 0; j <= k; j++) {
						h[j] = malloc(bytes);
						fill(dts[d], h[j] + off, n, j + 1, false);
						CUDA_OK(cudaMalloc((void **)&dv[j], bytes));
						CUDA_OK(cudaMemcpy(dv[j], h[j], bytes,
								   cudaMemcpyHostToDevice));
						hsrc[j] = h[j] + off;
						if (j > 0)
							dsrc[j - 1] = dv[j] + off;
					}
					/* Reference: dst first, then the sources in order. */
					SG_CHECK_EQ(sg_sum_addk(dts[d], want, hsrc, k + 1, n, 0), 0);
					CUDA_OK(sg_gpu_kernel_reduce(dts[d], dv[0] + off, dsrc, k, n,
								     0));
					CUDA_OK(cudaDeviceSynchronize());
					CUDA_OK(cudaMemcpy(got, dv[0] + off, n * es,
							   cudaMemcpyDeviceToHost));
					SG_CHECK(memcmp(got, want, n * es) == 0,
						 "%s n=%zu k=%u misaligned=%u differs",
						 sg_dtype_name(dts[d]), n, k, mis);
					for (unsigned j = 0; j <= k; j++) {
						cudaFree(dv[j]);
						free(h[j]);
					}
					free(want);
					free(got);
				}
			}
		}
	}
	SG_CHECK(sg_gpu_kernel_reduce(SG_DTYPE_INT32, NULL, NULL, 1, 1, 0) != cudaSuccess,
		 "int32 refused");
}

struct fake_net {
	float other;
	float *pushed;
	uint32_t part;
};

static int net_fn(void *arg, unsigned partition, uint32_t off, const void *push, void *pull,
		  uint32_t bytes)
{
	struct fake_net *n = arg;
	float *base = n->pushed + ((size_t)partition * n->part + off) / 4;

	if (push != NULL) {
		memcpy(base, push, bytes);
		return 0;
	}
	for (size_t i = 0; i < bytes / 4; i++)
		((float *)pull)[i] = base[i] + n->other;
	return 0;
}

/* Run plan p on device 0 with every logical GPU there; exact integer data. */
static void run_plan(const struct sg_gpu_plan *p, enum sg_dtype dt, size_t elems,
		     unsigned depth, struct fake_net *net, const char *what)
{
	size_t es = sg_dtype_size(dt), bytes = elems * es, wrong = 0;
	int dev0[SG_GPU_MAX_GPUS] = {0};
	struct sg_gpu_exec_conf conf = {.backend = SG_GPU_BACKEND_CUDA, .plan = p, .dtype = dt,
					.depth = depth, .device_of = dev0};
	void *dptr[SG_GPU_MAX_GPUS];
	uint8_t *h = malloc(bytes), *got = malloc(bytes);
	float *ref = calloc(elems, sizeof(float));
	struct sg_gpu_exec *ex;

	if (net != NULL) {
		conf.net = net_fn;
		conf.net_arg = net;
	}
	for (unsigned g = 0; g < p->ngpus; g++) {
		fill(dt, h, elems, g, true);
		for (size_t i = 0; i < elems; i++)
			ref[i] += val_get(dt, h, i);
		CUDA_OK(cudaMalloc(&dptr[g], bytes));
		CUDA_OK(cudaMemcpy(dptr[g], h, bytes, cudaMemcpyHostToDevice));
	}
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "%s: create: %s", what, strerror(errno));
	if (ex != NULL) {
		SG_CHECK_EQ(sg_gpu_exec_backend(ex), SG_GPU_BACKEND_CUDA);
		SG_CHECK(sg_gpu_exec_run(ex, dptr, bytes) == 0, "%s: run", what);
		for (unsigned g = 0; g < p->ngpus; g++) {
			CUDA_OK(cudaMemcpy(got, dptr[g], bytes, cudaMemcpyDeviceToHost));
			for (size_t i = 0; i < elems; i++) {
				wrong += val_get(dt, got, i) != ref[i] + (net ? net->other : 0);
			}
		}
		SG_CHECK(wrong == 0, "%s %s: %zu wrong elements", what, sg_dtype_name(dt), wrong);
	}
	sg_gpu_exec_destroy(ex);
	for (unsigned g = 0; g < p->ngpus; g++)
		cudaFree(dptr[g]);
	free(h);
	free(got);
	free(ref);
}

static void test_plans_on_one_device(void)
{
	static const enum sg_dtype dts[] = {SG_DTYPE_FP32, SG_DTYPE_FP16, SG_DTYPE_BF16};

	for (unsigned f = 0; f < NREF; f++) {
		char err[256] = "";
		struct sg_gpu_topo *t = load_ref(ref_files[f]);
		struct sg_gpu_plan_opts o = {.partition_bytes = 1 << 20};
		struct sg_gpu_plan *p = sg_gpu_plan_build(t, &o, err, sizeof(err));
		SG_CHECK(p != NULL, "%s", err);
		for (unsigned d = 0; p != NULL && d < 3; d++)
			run_plan(p, dts[d], 5 * (1 << 20) / sg_dtype_size(dts[d]) + 333, 3, NULL,
				 ref_files[f]);
		sg_gpu_plan_free(p);
		sg_gpu_topo_free(t);
	}
}

/* 64 MiB through D2H, push, pull, H2D with 4 partitions in flight. */
static void test_pipelined_staging(void)
{
	static const char one[] = "socket c\nroot r0 parent=c\ngpu g parent=r0\n"
				  "root r1 parent=c\nnic n parent=r1\n";
	char err[256] = "";
	struct sg_gpu_topo *t = sg_gpu_topo_parse(one, "one-gpu", err, sizeof(err));
	struct sg_gpu_plan *p = t ? sg_gpu_plan_build(t, NULL, err, sizeof(err)) : NULL;
	const size_t elems = (64u << 20) / 4 + 5;
	struct fake_net net = {.other = 1000.0f, .part = 4096000};

	SG_CHECK(p != NULL, "%s", err);
	net.pushed = calloc(elems + 4096000 / 4, sizeof(float));
	for (unsigned depth = 1; p != NULL && depth <= 4; depth += 3)
		run_plan(p, SG_DTYPE_FP32, elems, depth, &net, "staging");
	free(net.pushed);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

int main(int argc, char **argv)
{
	char why[256];
	int n;

	if (argc > 1)
		topo_dir = argv[1];
	n = sg_gpu_cuda_probe(why, sizeof(why));
	if (n < 0)
		SG_TEST_SKIP_ALL("no usable GPU: %s", why);
	printf("CUDA devices: %d\n", n);
	printf("GPUDirect RDMA: %s\n",
	       sg_gpu_gdr_probe(why, sizeof(why)) == 0 ? "available" : "unavailable");
	printf("  %s\n", why);
	test_kernels();
	test_pipelined_staging();
	test_plans_on_one_device();
	return sg_test_finish("gpu_cuda");
}
