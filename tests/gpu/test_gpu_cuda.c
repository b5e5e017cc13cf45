/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA backend on a real GPU: the conversion instructions against
 * sg_gpu_kmath.h's (every fp32 and 16-bit pattern), the reduce kernels
 * against summation/'s scalar sums (bit for bit: same order of additions,
 * one rounding; aligned, misaligned and mixed pointers), the pipelined
 * staging of a large tensor through a simulated service (and a failing
 * one), and every reference plan executed with all its logical GPUs on one
 * device. Ends with one JSON line ("gpu_cuda_result") for the issue's
 * closing note. Skips (77) with the reason when CUDA cannot run here.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "sg_gpu_kernels.h"

#define CUDA_OK(call)                                                                        \
	({                                                                                   \
		cudaError_t e_ = (call);                                                     \
		SG_CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));        \
	})

/* What the closing note needs, printed as JSON at the end. */
static struct {
	unsigned long long conv_bad[4];
	int conv_rc;
	unsigned kern_cases[3], kern_bad[3];
	unsigned plan_runs[3], plan_bad[3];
	unsigned stage_runs, stage_bad;
	int net_error_rc;
} res = {.conv_rc = -1};

static int dt_index(enum sg_dtype dt)
{
	return dt == SG_DTYPE_FP32 ? 0 : dt == SG_DTYPE_FP16 ? 1 : 2;
}

static void test_conversions(void)
{
	res.conv_rc = (int)sg_gpu_kernel_conv_check(res.conv_bad);
	CUDA_OK((cudaError_t)res.conv_rc);
	SG_CHECK(res.conv_bad[0] + res.conv_bad[1] + res.conv_bad[2] + res.conv_bad[3] == 0,
		 "conversion instructions differ from sg_gpu_kmath.h: f2h %llu f2b %llu h2f %llu "
		 "b2f %llu",
		 res.conv_bad[0], res.conv_bad[1], res.conv_bad[2], res.conv_bad[3]);
}

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
				/* 0: aligned; 1: all one element off; 2: one source off. */
				for (unsigned mis = 0; mis < 3; mis++) {
					size_t n = ns[ni], bytes = (n + 8) * es, off = (mis == 1) * es;
					unsigned k = ks[ki];
					uint8_t *h[17], *dv[17];
					const void *hsrc[17], *dsrc[16];
					uint8_t *want = malloc(bytes), *got = malloc(bytes);

					for (unsigned j = 0; j <= k; j++) {
						size_t o = off + (mis == 2 && j == k) * es;

						h[j] = malloc(bytes);
						fill(dts[d], h[j] + o, n, j + 1, false);
						CUDA_OK(cudaMalloc((void **)&dv[j], bytes));
						CUDA_OK(cudaMemcpy(dv[j], h[j], bytes,
								   cudaMemcpyHostToDevice));
						hsrc[j] = h[j] + o;
						if (j > 0)
							dsrc[j - 1] = dv[j] + o;
					}
					/* Reference: dst first, then the sources in order. */
					SG_CHECK_EQ(sg_sum_addk(dts[d], want, hsrc, k + 1, n, 0), 0);
					CUDA_OK(sg_gpu_kernel_reduce(dts[d], dv[0] + off, dsrc, k, n,
								     0));
					CUDA_OK(cudaDeviceSynchronize());
					CUDA_OK(cudaMemcpy(got, dv[0] + off, n * es,
							   cudaMemcpyDeviceToHost));
					res.kern_cases[d]++;
					res.kern_bad[d] += !SG_CHECK(
						memcmp(got, want, n * es) == 0,
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
	unsigned fail_part; /* > 0: the pull of this partition fails with -EPIPE */
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
	if (n->fail_part > 0 && partition == n->fail_part)
		return -EPIPE;
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
	void *dptr[SG_GPU_MAX_GPUS], *ones = NULL;
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
	/*
	 * gpu0's gradient gets +1 from a kernel still queued on the legacy
	 * default stream when the run starts: the run must wait for it (its
	 * streams are non-blocking).
	 */
	for (size_t i = 0; i < elems; i++) {
		val_set(dt, h, i, 1.0f);
		ref[i] += 1.0f;
	}
	CUDA_OK(cudaMalloc(&ones, bytes));
	CUDA_OK(cudaMemcpy(ones, h, bytes, cudaMemcpyHostToDevice));
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "%s: create: %s", what, strerror(errno));
	if (ex != NULL) {
		SG_CHECK_EQ(sg_gpu_exec_backend(ex), SG_GPU_BACKEND_CUDA);
		CUDA_OK(sg_gpu_kernel_reduce(dt, dptr[0], (const void *const *)&ones, 1, elems,
					     0));
		SG_CHECK(sg_gpu_exec_run(ex, dptr, bytes) == 0, "%s: run", what);
		for (unsigned g = 0; g < p->ngpus; g++) {
			CUDA_OK(cudaMemcpy(got, dptr[g], bytes, cudaMemcpyDeviceToHost));
			for (size_t i = 0; i < elems; i++) {
				wrong += val_get(dt, got, i) != ref[i] + (net ? net->other : 0);
			}
		}
		SG_CHECK(wrong == 0, "%s %s: %zu wrong elements", what, sg_dtype_name(dt), wrong);
	}
	if (net == NULL) {
		res.plan_runs[dt_index(dt)]++;
		res.plan_bad[dt_index(dt)] += ex == NULL || wrong != 0;
	} else {
		res.stage_runs++;
		res.stage_bad += ex == NULL || wrong != 0;
	}
	sg_gpu_exec_destroy(ex);
	cudaFree(ones);
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
	/* A service that fails mid-tensor: the run says so, the executor stays usable. */
	if (p != NULL) {
		int dev0 = 0;
		struct sg_gpu_exec_conf conf = {.backend = SG_GPU_BACKEND_CUDA, .plan = p,
						.dtype = SG_DTYPE_FP32, .depth = 4, .device_of = &dev0,
						.net = net_fn, .net_arg = &net};
		struct sg_gpu_exec *ex = sg_gpu_exec_create(&conf);
		void *d = NULL;

		CUDA_OK(cudaMalloc(&d, elems * 4));
		SG_CHECK(ex != NULL, "create: %s", strerror(errno));
		if (ex != NULL && d != NULL) {
			net.fail_part = 5;
			res.net_error_rc = sg_gpu_exec_run(ex, &d, elems * 4);
			SG_CHECK_EQ(res.net_error_rc, -EPIPE);
			net.fail_part = 0;
			SG_CHECK_EQ(sg_gpu_exec_run(ex, &d, elems * 4), 0);
		}
		sg_gpu_exec_destroy(ex);
		cudaFree(d);
	}
	/* A logical GPU mapped to a device that does not exist: refused. */
	if (p != NULL) {
		int bad = 1 << 20;
		struct sg_gpu_exec_conf conf = {.backend = SG_GPU_BACKEND_CUDA, .plan = p,
						.dtype = SG_DTYPE_FP32, .device_of = &bad};

		SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL, "device %d", bad);
	}
	free(net.pushed);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

int main(int argc, char **argv)
{
	static const char *const names[3] = {"fp32", "fp16", "bf16"};
	struct cudaDeviceProp prop;
	char why[256];
	int n, gdr;

	if (argc > 1)
		topo_dir = argv[1];
	n = sg_gpu_cuda_probe(why, sizeof(why));
	if (n < 0)
		SG_TEST_SKIP_ALL("no usable GPU: %s", why);
	printf("CUDA devices: %d\n", n);
	gdr = sg_gpu_gdr_probe(why, sizeof(why));
	printf("GPUDirect RDMA: %s\n  %s\n", gdr == 0 ? "available" : "unavailable", why);
	if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
		snprintf(prop.name, sizeof(prop.name), "?");
	test_conversions();
	test_kernels();
	test_pipelined_staging();
	test_plans_on_one_device();
	/* One line for the closing note: kernel correctness per dtype and the rest. */
	printf("{\"gpu_cuda_result\":{\"device\":\"%.60s\",\"devices\":%d,"
	       "\"conv_mismatches\":{\"fp32_to_fp16\":%llu,\"fp32_to_bf16\":%llu,"
	       "\"fp16_to_fp32\":%llu,\"bf16_to_fp32\":%llu},\"kernels\":{",
	       prop.name, n, res.conv_bad[0], res.conv_bad[1], res.conv_bad[2], res.conv_bad[3]);
	for (int d = 0; d < 3; d++)
		printf("%s\"%s\":{\"cases\":%u,\"bit_exact\":%u}", d ? "," : "", names[d],
		       res.kern_cases[d], res.kern_cases[d] - res.kern_bad[d]);
	printf("},\"plans_on_one_device\":{");
	for (int d = 0; d < 3; d++)
		printf("%s\"%s\":{\"runs\":%u,\"exact\":%u}", d ? "," : "", names[d],
		       res.plan_runs[d], res.plan_runs[d] - res.plan_bad[d]);
	printf("},\"staging\":{\"runs\":%u,\"exact\":%u,\"failing_service_rc\":%d},"
	       "\"gdr\":%s,\"checks\":%lu,\"failed\":%lu}}\n",
	       res.stage_runs, res.stage_runs - res.stage_bad, res.net_error_rc,
	       gdr == 0 ? "true" : "false", sg_test_checks, sg_test_failures);
	return sg_test_finish("gpu_cuda");
}
