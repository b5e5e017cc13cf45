/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma summation library: element-wise tensor sums for the summation service.
 *
 * Every module that adds tensors goes through this header. The library picks
 * the fastest implementation the CPU supports once (sg_sum_init()); callers
 * may force another one for testing (sg_sum_set_impl() or the environment
 * variable SIGMA_SUM_IMPL=scalar|avx2|avx512).
 *
 * Conventions:
 * - Lengths are element counts, never bytes. Any length (0 included) and any
 *   alignment of every pointer are accepted.
 * - Functions return 0 on success or a negative errno. -EINVAL comes with a
 *   logged reason (log type "sigma.summation").
 * - Integer sums wrap modulo 2^bits (two's complement), exactly as unsigned
 *   arithmetic does; they never trap and never saturate.
 * - Floating-point sums follow IEEE 754 round-to-nearest-even. NaN and
 *   infinities propagate as in scalar C arithmetic. Every implementation
 *   gives the scalar reference's result bit for bit, with one freedom: when
 *   several inputs of one element are NaN, which NaN's payload survives is
 *   unspecified (the result is a NaN either way). fp32 denormals are never
 *   flushed to zero.
 * - fp16 and bf16: by default (SG_SUM_F_NATIVE not set) partial sums are
 *   kept in fp32 and rounded to the 16-bit type once, at the end. With
 *   SG_SUM_F_NATIVE every partial sum is rounded to the 16-bit type, which is
 *   what BytePS does.
 * - Aliasing: dst may be exactly equal to an input (in-place); any partial
 *   overlap between dst and an input is rejected with -EINVAL.
 * - All functions are thread-safe once sg_sum_init() has returned: they keep
 *   no state besides the implementation chosen at init.
 */
#ifndef SG_SUM_H
#define SG_SUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Reducer implementations. */
enum sg_sum_impl {
	SG_SUM_IMPL_AUTO = 0, /**< best one the CPU supports */
	SG_SUM_IMPL_SCALAR,   /**< portable C, the reference */
	SG_SUM_IMPL_AVX2,     /**< AVX2 + F16C + FMA */
	SG_SUM_IMPL_AVX512,   /**< AVX-512 F/BW/VL (+BF16 where present) */
	SG_SUM_IMPL_COUNT
};

/** Flag: accumulate fp16/bf16 in the native 16-bit type (BytePS behaviour). */
#define SG_SUM_F_NATIVE (1u << 0)

/** Largest k accepted by sg_sum_addk(). */
#define SG_SUM_MAX_K 64

/**
 * Choose the implementation once. Honours SIGMA_SUM_IMPL if set; an unknown
 * or unsupported value there is an error (-EINVAL / -ENOTSUP), never silently
 * ignored. Calling it again is harmless. The sum functions call it lazily.
 */
int sg_sum_init(void);

/**
 * Force an implementation (SG_SUM_IMPL_AUTO re-runs detection).
 * @return 0, -ENOTSUP if the CPU lacks it, -EINVAL for an unknown value.
 */
int sg_sum_set_impl(enum sg_sum_impl impl);

/** The implementation in use (after sg_sum_init()). */
enum sg_sum_impl sg_sum_get_impl(void);

/** True if this CPU (and this build) can run @p impl. */
bool sg_sum_impl_supported(enum sg_sum_impl impl);

/** Name of an implementation ("scalar", "avx2", "avx512"), or "unknown". */
const char *sg_sum_impl_name(enum sg_sum_impl impl);

/** Parse an implementation name; -EINVAL if unknown. */
int sg_sum_impl_from_name(const char *name, enum sg_sum_impl *impl);

/**
 * Copy-first helper for a round's first arrival: dst = src, bytes as they are
 * (NaN payloads included). Above sg_sum_nt_threshold() bytes the copy uses
 * non-temporal stores. Overlap is rejected; dst == src is a no-op.
 */
int sg_sum_copy(enum sg_dtype dt, void *dst, const void *src, size_t n);

/** dst += src, element-wise. */
int sg_sum_add(enum sg_dtype dt, void *dst, const void *src, size_t n);

/** dst = a + b, element-wise. @p flags: SG_SUM_F_NATIVE or 0. */
int sg_sum_add2(enum sg_dtype dt, void *dst, const void *a, const void *b, size_t n,
		unsigned int flags);

/**
 * Fused k-way sum: dst = src[0] + ... + src[k-1], summed in index order.
 * 1 <= k <= SG_SUM_MAX_K. With fp32 accumulation (the default) fp16/bf16 are
 * rounded once; with SG_SUM_F_NATIVE after every addition.
 */
int sg_sum_addk(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k, size_t n,
		unsigned int flags);

/*
 * Accumulator API, for sums whose inputs arrive one at a time (the
 * aggregation engine). For fp16/bf16 without SG_SUM_F_NATIVE the accumulator
 * holds fp32 (sg_sum_acc_elem_size() == 4); otherwise it holds the dtype
 * itself. Use: acc_init with the first arrival, acc_add with each later one,
 * acc_final once to produce the result.
 */

/** Bytes per element of the accumulator for (@p dt, @p flags); 0 if unknown. */
size_t sg_sum_acc_elem_size(enum sg_dtype dt, unsigned int flags);

/** acc = widen(src). */
int sg_sum_acc_init(enum sg_dtype dt, unsigned int flags, void *acc, const void *src, size_t n);

/** acc += widen(src). */
int sg_sum_acc_add(enum sg_dtype dt, unsigned int flags, void *acc, const void *src, size_t n);

/** dst = narrow(acc), rounding to nearest even. */
int sg_sum_acc_final(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc, size_t n);

/*
 * Unchecked accumulator calls, for a hot path that validated its arguments
 * once (the aggregation engine checks dtype and flags when a job is added and
 * owns every buffer it passes). They compute exactly what the checked calls
 * above compute, bit for bit, but check and log nothing: the per-call checks
 * cost several hundred instructions, more than summing a 1 KiB chunk.
 *
 * The caller guarantees, and nothing verifies:
 * - sg_sum_init() (or sg_sum_set_impl()) has returned 0;
 * - @p dt is a valid dtype and @p flags is 0 or SG_SUM_F_NATIVE;
 * - when n > 0, both pointers are non-NULL and cover n elements of their
 *   type (the accumulator: sg_sum_acc_elem_size(), the other: the dtype);
 * - the two ranges do not overlap at all (not even exactly).
 * Breaking one of these is undefined behaviour, not an error code.
 */

/** acc = widen(src), unchecked (see above). */
void sg_sum_acc_init_unchecked(enum sg_dtype dt, unsigned int flags, void *acc, const void *src,
			       size_t n);

/** acc += widen(src), unchecked (see above). */
void sg_sum_acc_add_unchecked(enum sg_dtype dt, unsigned int flags, void *acc, const void *src,
			      size_t n);

/** dst = narrow(acc), unchecked (see above). */
void sg_sum_acc_final_unchecked(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc,
				size_t n);

/*
 * Internet checksums (RFC 1071) fused with the sums, for a transport that
 * checks or fills in UDP checksums in software: the pass that sums a
 * datagram's elements (or writes a result's) also sums their bytes for the
 * checksum, so that no pass reads the payload only for that.
 *
 * A checksum here is the 16-bit ones' complement sum of some bytes taken as
 * 16-bit words in the host's byte order (a last odd byte padded with a zero
 * byte after it), folded into 0..0xffff: 0 only when every byte is 0, 0xffff
 * for other sums that are zero in ones' complement. Pieces of one datagram
 * combine with sg_sum_csum_add() as long as each starts an even number of
 * bytes into it. In network byte order it is the same value byte-swapped, so
 * a received UDP datagram (pseudo-header included) is intact when the sum of
 * everything folds to 0xffff, and a checksum field is ~sum of the rest.
 * Every implementation returns the same value.
 */

/** Ones' complement sum of two checksums. */
static inline uint16_t sg_sum_csum_add(uint16_t a, uint16_t b)
{
	uint32_t s = (uint32_t)a + b;

	return (uint16_t)((s & 0xffff) + (s >> 16));
}

/** Checksum of @p bytes bytes at @p buf (any alignment; NULL only with 0 bytes). */
uint16_t sg_sum_csum(const void *buf, size_t bytes);

/*
 * The unchecked accumulator calls (same contract as above: the caller
 * guarantees the arguments), fused with a checksum. They write exactly what
 * the calls without _csum write, bit for bit; stores are never non-temporal.
 */

/** acc = widen(src); @return the checksum of src's n elements. */
uint16_t sg_sum_acc_init_csum_unchecked(enum sg_dtype dt, unsigned int flags, void *acc,
					const void *src, size_t n);

/**
 * dst = acc + widen(src), where @p dst is @p acc itself or an accumulator that
 * overlaps neither @p acc nor @p src: a caller that must not change @p acc
 * before knowing the checksum sums into another buffer.
 * @return the checksum of src's n elements.
 */
uint16_t sg_sum_acc_add_csum_unchecked(enum sg_dtype dt, unsigned int flags, void *dst,
				       const void *acc, const void *src, size_t n);

/** dst = narrow(acc); @return the checksum of dst's n elements. */
uint16_t sg_sum_acc_final_csum_unchecked(enum sg_dtype dt, unsigned int flags, void *dst,
					 const void *acc, size_t n);

/*
 * Scalar conversions, exact IEEE round-to-nearest-even. Exposed for tests,
 * wire tools and the GPU host backend.
 */

/** fp16 bits to fp32. */
float sg_fp16_to_fp32(uint16_t h);
/** fp32 to fp16 bits (RNE; overflow to Inf; NaN stays NaN). */
uint16_t sg_fp32_to_fp16(float f);
/** bf16 bits to fp32. */
float sg_bf16_to_fp32(uint16_t b);
/** fp32 to bf16 bits (RNE; NaN stays NaN, quieted). */
uint16_t sg_fp32_to_bf16(float f);

/**
 * Output size in bytes above which non-temporal stores are used (default: the
 * last-level cache size as reported by the OS, or 32 MiB if unknown).
 */
size_t sg_sum_nt_threshold(void);

/** Override the non-temporal threshold (0 restores the default). */
void sg_sum_set_nt_threshold(size_t bytes);

/*
 * NUMA-local memory.
 */

/**
 * Allocate @p size bytes on NUMA node @p node (-1: the caller's node).
 * Falls back to page-aligned ordinary memory when libnuma reports that NUMA
 * is unavailable. Memory is 64-byte aligned and zeroed.
 * @return pointer, or NULL with errno set.
 */
void *sg_sum_numa_alloc(size_t size, int node);

/** Free memory from sg_sum_numa_alloc(); @p size must match. NULL is fine. */
void sg_sum_numa_free(void *ptr, size_t size);

/**
 * Write every page of the mapped, writable range [@p addr, @p addr + @p len) once
 * without changing a byte: MADV_POPULATE_WRITE, then an atomic add of 0 per page,
 * which loses no store that another thread or process makes meanwhile. Call it on
 * memory that the hot path would otherwise write first: on the 2-vCPU VMs this
 * project runs on, a page's first write cost 13 us, and still 6.6 us after
 * MADV_POPULATE_WRITE alone (38 MB: 126 ms, or 8 + 64 ms); a pool that hands out its
 * buffers in turn met such pages for many operations (docs/performance.md).
 * @return @p len; 0 if madvise() found part of the range unmapped or not writable
 * (nothing is written then). A kernel without MADV_POPULATE_WRITE (before 5.14) takes
 * the writes alone. Memory that another thread may unmap meanwhile can still fault.
 */
size_t sg_sum_populate(void *addr, size_t len);

/** Number of NUMA nodes (1 when NUMA is unavailable). */
int sg_sum_numa_nodes(void);

/** NUMA node of @p cpu (0 when NUMA is unavailable), or -EINVAL. */
int sg_sum_cpu_node(unsigned int cpu);

/** Pin the calling thread to @p cpu. @return 0 or -errno. */
int sg_sum_pin_thread(unsigned int cpu);

/** NUMA node the calling thread runs on now (0 when NUMA is unavailable). */
int sg_sum_current_node(void);

/**
 * Fixed-size buffer pool on one NUMA node: @p count buffers of @p buf_size
 * bytes each, 64-byte aligned. Get and put are O(1), allocate nothing and
 * take no lock: a pool belongs to one thread (one lcore).
 */
struct sg_sum_pool;

/**
 * Create a pool. Every page of its memory is written once now (sg_sum_populate()),
 * and a child process does not inherit it (MADV_DONTFORK): a pool is for the process
 * that made it. @return the pool, or NULL with errno set.
 */
struct sg_sum_pool *sg_sum_pool_create(int node, size_t buf_size, unsigned int count);

/** Destroy a pool and all its buffers. NULL is fine. */
void sg_sum_pool_destroy(struct sg_sum_pool *pool);

/** Take a buffer; NULL when the pool is exhausted (not an error to log). */
void *sg_sum_pool_get(struct sg_sum_pool *pool);

/** Return a buffer taken from this pool. @return 0, or -EINVAL if foreign. */
int sg_sum_pool_put(struct sg_sum_pool *pool, void *buf);

/** Buffers currently free in the pool. */
unsigned int sg_sum_pool_avail(const struct sg_sum_pool *pool);

/** Size of each buffer. */
size_t sg_sum_pool_buf_size(const struct sg_sum_pool *pool);

#ifdef __cplusplus
}
#endif

#endif /* SG_SUM_H */
