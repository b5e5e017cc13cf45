/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * C interface of the CUDA kernels (sg_gpu_kernels.cu), for the CUDA backend
 * and the GPU tests. Only built when meson finds CUDA (SG_HAVE_CUDA).
 */
#ifndef SG_GPU_KERNELS_H
#define SG_GPU_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * dst[i] = dst[i] + src[0][i] + ... + src[k-1][i] for i < n elements of
 * @p dtype (enum sg_dtype: fp32, fp16 or bf16), added in that order in fp32
 * and rounded once to the element type (round to nearest even). All
 * pointers are on the device that owns @p stream. 1 <= k <= 16.
 * @return cudaSuccess or the launch error.
 */
cudaError_t sg_gpu_kernel_reduce(int dtype, void *dst, const void *const *src, unsigned k,
				 size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SG_GPU_KERNELS_H */
