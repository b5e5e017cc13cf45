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
 * pointers are on the device that owns @p stream; any alignment (a whole
 * element) works, 16-byte vectors are used where every pointer sits at the
 * same offset within 16 bytes. 1 <= k <= 16. The arithmetic is
 * sg_gpu_kmath.h's.
 * @return cudaSuccess or the launch error (a stale error of an earlier call
 * is not reported; a sticky one is).
 */
cudaError_t sg_gpu_kernel_reduce(int dtype, void *dst, const void *const *src, unsigned k,
				 size_t n, cudaStream_t stream);

/**
 * Self-test of the conversions on the current device: for every fp32 bit
 * pattern, the fp16 and bf16 conversion instructions the kernels use
 * against sg_gpu_kmath.h's *_soft functions (which the CPU tests check
 * against summation/), and the same for every 16-bit pattern widened.
 * NaN against NaN counts as equal. Synchronous (about a second).
 * @param bad mismatches: [0] fp32->fp16, [1] fp32->bf16, [2] fp16->fp32,
 * [3] bf16->fp32.
 */
cudaError_t sg_gpu_kernel_conv_check(unsigned long long bad[4]);

#ifdef __cplusplus
}
#endif

#endif /* SG_GPU_KERNELS_H */
