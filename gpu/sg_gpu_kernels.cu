/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU reduce kernels: dst += src[0] + ... + src[k-1], accumulating in fp32.
 * The bulk goes through 16-byte vector loads (4 fp32 or 8 fp16/bf16 per
 * load), which is what lets a memory-bound kernel reach the device's copy
 * bandwidth; a scalar kernel handles the unaligned tail.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "sg_gpu_kernels.h"

#define MAX_SRC 16
#define THREADS 256
#define MAX_BLOCKS 4096

/* Same values as enum sg_dtype (wire-stable, see sg_sum.h). */
enum { DT_FP32 = 0, DT_FP16 = 2, DT_BF16 = 3 };

struct srcs {
	const void *p[MAX_SRC];
};

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f(float f);
template <> __device__ __forceinline__ float from_f<float>(float f) { return f; }
template <> __device__ __forceinline__ __half from_f<__half>(float f) { return __float2half_rn(f); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float f)
{
	return __float2bfloat16_rn(f);
}

/* One 16-byte vector of T. */
template <typename T> union vec {
	uint4 u;
	T e[16 / sizeof(T)];
};

template <typename T>
__global__ void reduce_vec(T *dst, struct srcs s, unsigned k, size_t nvec)
{
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	constexpr int L = 16 / sizeof(T);

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
		vec<T> d, x;
		float acc[L];

		d.u = reinterpret_cast<const uint4 *>(dst)[i];
#pragma unroll
		for (int l = 0; l < L; l++)
			acc[l] = to_f(d.e[l]);
		for (unsigned j = 0; j < k; j++) {
			x.u = reinterpret_cast<const uint4 *>(s.p[j])[i];
#pragma unroll
			for (int l = 0; l < L; l++)
				acc[l] += to_f(x.e[l]);
		}
#pragma unroll
		for (int l = 0; l < L; l++)
			d.e[l] = from_f<T>(acc[l]);
		reinterpret_cast<uint4 *>(dst)[i] = d.u;
	}
}

template <typename T>
__global__ void reduce_scalar(T *dst, struct srcs s, unsigned k, size_t first, size_t n)
{
	const size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = first + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float acc = to_f(dst[i]);

		for (unsigned j = 0; j < k; j++)
			acc += to_f(static_cast<const T *>(s.p[j])[i]);
		dst[i] = from_f<T>(acc);
	}
}

static unsigned blocks_for(size_t items)
{
	size_t b = (items + THREADS - 1) / THREADS;

	return (unsigned)(b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

template <typename T>
static cudaError_t launch(void *dst, const void *const *src, unsigned k, size_t n,
			  cudaStream_t stream)
{
	constexpr size_t L = 16 / sizeof(T);
	struct srcs s = {};
	bool aligned = ((uintptr_t)dst & 15) == 0;
	size_t nvec;

	for (unsigned j = 0; j < k; j++) {
		s.p[j] = src[j];
		aligned &= ((uintptr_t)src[j] & 15) == 0;
	}
	nvec = aligned ? n / L : 0;
	if (nvec > 0)
		reduce_vec<T><<<blocks_for(nvec), THREADS, 0, stream>>>(static_cast<T *>(dst), s, k,
									nvec);
	if (nvec * L < n)
		reduce_scalar<T><<<blocks_for(n - nvec * L), THREADS, 0, stream>>>(
			static_cast<T *>(dst), s, k, nvec * L, n);
	return cudaGetLastError();
}

extern "C" cudaError_t sg_gpu_kernel_reduce(int dtype, void *dst, const void *const *src,
					    unsigned k, size_t n, cudaStream_t stream)
{
	if (k == 0 || k > MAX_SRC || dst == NULL || src == NULL)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	switch (dtype) {
	case DT_FP32:
		return launch<float>(dst, src, k, n, stream);
	case DT_FP16:
		return launch<__half>(dst, src, k, n, stream);
	case DT_BF16:
		return launch<__nv_bfloat16>(dst, src, k, n, stream);
	default:
		return cudaErrorInvalidValue;
	}
}
