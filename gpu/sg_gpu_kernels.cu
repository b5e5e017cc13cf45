/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU reduce kernels: dst += src[0] + ... + src[k-1], accumulating in fp32.
 * The element arithmetic and the head/vector/tail split are in
 * sg_gpu_kmath.h, which the CPU tests run too. The bulk goes through 16-byte
 * vector loads (4 fp32 or 8 fp16/bf16 per load), which is what lets a
 * memory-bound kernel reach the device's copy bandwidth; a scalar kernel
 * handles the head (until dst is 16-byte aligned) and the tail.
 */
#include <stdint.h>

#include "sg_gpu_kernels.h"
#include "sg_gpu_kmath.h"

#define THREADS 256
#define MAX_BLOCKS 4096

struct srcs {
	const void *p[SG_GPU_KMAX_SRC];
};

template <int DT>
__global__ void reduce_vec(sg_gpu_v16 *dst, struct srcs s, unsigned k, size_t nvec)
{
	const size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride)
		sg_gpu_reduce_v16(DT, dst, s.p, k, i);
}

template <int DT>
__global__ void reduce_scalar(void *dst, struct srcs s, unsigned k, struct sg_gpu_split sp)
{
	const size_t stride = (size_t)gridDim.x * blockDim.x, items = sp.head + sp.tail;

	for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += stride)
		sg_gpu_reduce_one(DT, dst, s.p, k, sg_gpu_split_scalar_index(DT, &sp, t));
}

template <int DT>
static cudaError_t launch(void *dst, const void *const *src, unsigned k, size_t n,
			  cudaStream_t stream)
{
	const size_t es = DT == SG_GPU_DT_FP32 ? 4 : 2;
	struct sg_gpu_split sp = sg_gpu_reduce_split(DT, dst, src, k, n);
	struct srcs s = {}, sv = {};

	for (unsigned j = 0; j < k; j++) {
		s.p[j] = src[j];
		sv.p[j] = (const uint8_t *)src[j] + sp.head * es;
	}
	if (sp.nvec > 0)
		reduce_vec<DT><<<sg_gpu_blocks(sp.nvec, THREADS, MAX_BLOCKS), THREADS, 0, stream>>>(
			(sg_gpu_v16 *)((uint8_t *)dst + sp.head * es), sv, k, sp.nvec);
	if (sp.head + sp.tail > 0)
		reduce_scalar<DT><<<sg_gpu_blocks(sp.head + sp.tail, THREADS, MAX_BLOCKS), THREADS,
				    0, stream>>>(dst, s, k, sp);
	/* Launch errors only; what the kernel does shows at the next synchronisation. */
	return cudaGetLastError();
}

extern "C" cudaError_t sg_gpu_kernel_reduce(int dtype, void *dst, const void *const *src,
					    unsigned k, size_t n, cudaStream_t stream)
{
	if (k == 0 || k > SG_GPU_KMAX_SRC || dst == NULL || src == NULL)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	/*
	 * cudaGetLastError() after the launch reports the launch, but also any
	 * earlier failed runtime call whose error nobody fetched (a refused
	 * cudaDeviceEnablePeerAccess, say): drop that stale error first. A
	 * sticky error (a broken context) is not cleared by this and still fails
	 * the launch.
	 */
	(void)cudaGetLastError();
	switch (dtype) {
	case SG_GPU_DT_FP32:
		return launch<SG_GPU_DT_FP32>(dst, src, k, n, stream);
	case SG_GPU_DT_FP16:
		return launch<SG_GPU_DT_FP16>(dst, src, k, n, stream);
	case SG_GPU_DT_BF16:
		return launch<SG_GPU_DT_BF16>(dst, src, k, n, stream);
	default:
		return cudaErrorInvalidValue;
	}
}

/* ---- self-test: the conversion instructions against the *_soft functions */

__device__ static bool same_bits(uint32_t a, uint32_t b, bool nan_a, bool nan_b)
{
	return a == b || (nan_a && nan_b); /* NaN payloads may differ */
}

/* Thread t checks fp32 bit patterns t, t + stride, ... below 2^32. */
__global__ void conv_check(unsigned long long *bad)
{
	const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	unsigned long long nbad[4] = {0, 0, 0, 0};

	for (uint64_t u = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; u < (1ull << 32);
	     u += stride) {
		float f = __uint_as_float((uint32_t)u);
		bool fnan = f != f;

		nbad[0] += !same_bits(sg_gpu_narrow(SG_GPU_DT_FP16, f), sg_gpu_f2h_soft(f), fnan,
				      fnan);
		nbad[1] += !same_bits(sg_gpu_narrow(SG_GPU_DT_BF16, f), sg_gpu_f2b_soft(f), fnan,
				      fnan);
		if (u < 65536) {
			float a = sg_gpu_widen(SG_GPU_DT_FP16, (uint16_t)u);
			float b = sg_gpu_widen(SG_GPU_DT_BF16, (uint16_t)u);

			nbad[2] += !same_bits(__float_as_uint(a),
					      __float_as_uint(sg_gpu_h2f_soft((uint16_t)u)), a != a,
					      a != a);
			nbad[3] += !same_bits(__float_as_uint(b),
					      __float_as_uint(sg_gpu_b2f_soft((uint16_t)u)), b != b,
					      b != b);
		}
	}
	for (int i = 0; i < 4; i++)
		if (nbad[i])
			atomicAdd(&bad[i], nbad[i]);
}

extern "C" cudaError_t sg_gpu_kernel_conv_check(unsigned long long bad[4])
{
	unsigned long long *d = NULL;
	cudaError_t e;

	(void)cudaGetLastError();
	e = cudaMalloc((void **)&d, 4 * sizeof(*d));
	if (e == cudaSuccess)
		e = cudaMemset(d, 0, 4 * sizeof(*d));
	if (e == cudaSuccess) {
		conv_check<<<1024, THREADS>>>(d);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaMemcpy(bad, d, 4 * sizeof(*d), cudaMemcpyDeviceToHost);
	cudaFree(d);
	return e;
}
