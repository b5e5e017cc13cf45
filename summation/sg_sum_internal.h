/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to summation/: the kernel table each implementation fills in.
 * Arguments are already validated by sg_sum.c, so kernels never fail.
 */
#ifndef SG_SUM_INTERNAL_H
#define SG_SUM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_log.h>

#include "sg_sum.h"

extern int sg_sum_logtype;
#define SG_SUM_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sg_sum_logtype, "sigma.summation: " fmt "\n", ##__VA_ARGS__)

struct sg_sum_kernels {
	/*
	 * dst = src[0] + ... + src[k-1] in index order, k >= 1. dst may equal
	 * any src exactly. @nt: use non-temporal stores for dst.
	 */
	void (*addk)(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k, size_t n,
		     unsigned int flags, bool nt);
	/* acc (+)= widen(src) for fp16/bf16 into fp32 (add=false: plain widen). */
	void (*widen)(enum sg_dtype dt, float *acc, const uint16_t *src, size_t n, bool add);
	/* dst = narrow(acc) for fp16/bf16, RNE. */
	void (*narrow)(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n, bool nt);
	/*
	 * Fused with the Internet checksum (sg_sum.h). Each returns the sum of
	 * the checksummed bytes' native-order 16-bit words (a last odd byte
	 * padded with a zero byte), not folded: any value congruent to it
	 * modulo 0xffff, 0 only when every such byte is 0 (sg_sum.c folds it).
	 * Callers keep each call below 2^30 bytes. Stores are never
	 * non-temporal.
	 */
	/* dst = src, bytes as they are (when dst is not NULL); the checksum of src. */
	uint64_t (*csum_copy)(void *dst, const void *src, size_t bytes);
	/*
	 * dst = acc + src in the accumulator's type: for fp16/bf16 without
	 * SG_SUM_F_NATIVE acc and dst are fp32 and src is widened, and acc may
	 * be NULL (dst = widen(src)); otherwise all three have the dtype and acc
	 * is not NULL. dst may be acc exactly. The checksum of src.
	 */
	uint64_t (*csum_add)(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc,
			     const void *src, size_t n);
	/* dst = narrow(acc) for fp16/bf16, RNE; the checksum of dst. */
	uint64_t (*csum_narrow)(enum sg_dtype dt, uint16_t *dst, const float *acc, size_t n);
};

extern const struct sg_sum_kernels sg_sum_kernels_scalar;
extern const struct sg_sum_kernels sg_sum_kernels_avx2;
extern const struct sg_sum_kernels sg_sum_kernels_avx512;
/* AVX-512 plus AVX512-BF16: used instead of the above where cpuid has avx512bf16. */
extern const struct sg_sum_kernels sg_sum_kernels_avx512bf16;

#endif /* SG_SUM_INTERNAL_H */
