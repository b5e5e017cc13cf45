/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to gpu/, and to its files built with CUDA only: the CUDA backend's
 * error report (sg_gpu_cuda.c), which its micro-benchmark
 * (sg_gpu_cuda_bench.c) shares.
 */
#ifndef SG_GPU_CUDA_H
#define SG_GPU_CUDA_H

#include <cuda_runtime_api.h>

/*
 * Log a failed CUDA call @p what with its error @p e (and whether the context
 * is lost for good). @return -ENOMEM for an allocation failure, else -EIO.
 */
int sg_gpu_cuda_fail(cudaError_t e, const char *what);

/* Return sg_gpu_cuda_fail() from the calling function when @p call fails. */
#define CK(call)                                                                            \
	do {                                                                                \
		cudaError_t e_ = (call);                                                    \
		if (e_ != cudaSuccess)                                                      \
			return sg_gpu_cuda_fail(e_, #call);                                          \
	} while (0)

#endif /* SG_GPU_CUDA_H */
