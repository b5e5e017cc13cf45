/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Public entry points of the summation library: argument checks, the one-time
 * choice of implementation (the exact scalar conversions: sg_sum_convert.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rte_common.h>

#include "sg_sum_internal.h"

RTE_LOG_REGISTER(sg_sum_logtype, sigma.summation, INFO);

/*
 * Process-wide choice, made once at init (or forced by a test). It is the only
 * state the library keeps, and it is documented in sg_sum.h.
 */
static const struct sg_sum_kernels *_Atomic sum_kern;
static _Atomic int sum_impl = SG_SUM_IMPL_AUTO;
static _Atomic size_t sum_nt_override;
static size_t sum_nt_default;

static const char *const impl_names[SG_SUM_IMPL_COUNT] = {
	[SG_SUM_IMPL_AUTO] = "auto",
	[SG_SUM_IMPL_SCALAR] = "scalar",
	[SG_SUM_IMPL_AVX2] = "avx2",
	[SG_SUM_IMPL_AVX512] = "avx512",
};

const char *sg_sum_impl_name(enum sg_sum_impl impl)
{
	return (unsigned int)impl < SG_SUM_IMPL_COUNT ? impl_names[impl] : "unknown";
}

int sg_sum_impl_from_name(const char *name, enum sg_sum_impl *impl)
{
	for (unsigned int i = 0; name != NULL && i < SG_SUM_IMPL_COUNT; i++) {
		if (strcasecmp(name, impl_names[i]) == 0) {
			*impl = i;
			return 0;
		}
	}
	return -EINVAL;
}

static const struct sg_sum_kernels *impl_kernels(enum sg_sum_impl impl)
{
	switch (impl) {
	case SG_SUM_IMPL_SCALAR:
		return &sg_sum_kernels_scalar;
#ifdef SG_SUM_BUILD_AVX2
	case SG_SUM_IMPL_AVX2:
		return &sg_sum_kernels_avx2;
#endif
#ifdef SG_SUM_BUILD_AVX512
	case SG_SUM_IMPL_AVX512:
#ifdef SG_SUM_BUILD_AVX512BF16
		/* Same results, faster fp32 -> bf16 narrowing. */
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512bf16"))
			return &sg_sum_kernels_avx512bf16;
#endif
		return &sg_sum_kernels_avx512;
#endif
	default:
		return NULL;
	}
}

bool sg_sum_impl_supported(enum sg_sum_impl impl)
{
	__builtin_cpu_init();
	switch (impl) {
	case SG_SUM_IMPL_AUTO:
	case SG_SUM_IMPL_SCALAR:
		return true;
	case SG_SUM_IMPL_AVX2:
		return impl_kernels(impl) != NULL && __builtin_cpu_supports("avx2") &&
		       __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
	case SG_SUM_IMPL_AVX512:
		return impl_kernels(impl) != NULL && __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
		       __builtin_cpu_supports("f16c");
	default:
		return false;
	}
}

static enum sg_sum_impl best_impl(void)
{
	if (sg_sum_impl_supported(SG_SUM_IMPL_AVX512))
		return SG_SUM_IMPL_AVX512;
	if (sg_sum_impl_supported(SG_SUM_IMPL_AVX2))
		return SG_SUM_IMPL_AVX2;
	return SG_SUM_IMPL_SCALAR;
}

static size_t detect_llc_bytes(void)
{
	long v = sysconf(_SC_LEVEL3_CACHE_SIZE);

	if (v <= 0)
		v = sysconf(_SC_LEVEL2_CACHE_SIZE);
	return v > 0 ? (size_t)v : (size_t)32 << 20;
}

int sg_sum_set_impl(enum sg_sum_impl impl)
{
	if ((unsigned int)impl >= SG_SUM_IMPL_COUNT) {
		SG_SUM_LOG(ERR, "unknown implementation %d", (int)impl);
		return -EINVAL;
	}
	if (impl == SG_SUM_IMPL_AUTO)
		impl = best_impl();
	if (!sg_sum_impl_supported(impl)) {
		SG_SUM_LOG(ERR, "implementation %s is not supported by this CPU or build",
			   sg_sum_impl_name(impl));
		return -ENOTSUP;
	}
	if (sum_nt_default == 0)
		sum_nt_default = detect_llc_bytes();
	atomic_store(&sum_impl, impl);
	atomic_store(&sum_kern, impl_kernels(impl));
	return 0;
}

int sg_sum_init(void)
{
	const char *env;
	enum sg_sum_impl impl = SG_SUM_IMPL_AUTO;

	if (atomic_load(&sum_kern) != NULL)
		return 0;
	env = getenv("SIGMA_SUM_IMPL");
	if (env != NULL && *env != '\0' && sg_sum_impl_from_name(env, &impl) != 0) {
		SG_SUM_LOG(ERR, "SIGMA_SUM_IMPL=%s is not one of auto, scalar, avx2, avx512", env);
		return -EINVAL;
	}
	return sg_sum_set_impl(impl);
}

enum sg_sum_impl sg_sum_get_impl(void)
{
	if (sg_sum_init() != 0)
		return SG_SUM_IMPL_AUTO;
	return atomic_load(&sum_impl);
}

size_t sg_sum_nt_threshold(void)
{
	size_t o = atomic_load(&sum_nt_override);

	if (o != 0)
		return o;
	if (sum_nt_default == 0)
		sum_nt_default = detect_llc_bytes();
	return sum_nt_default;
}

void sg_sum_set_nt_threshold(size_t bytes)
{
	atomic_store(&sum_nt_override, bytes);
}

static const struct sg_sum_kernels *kernels(void)
{
	const struct sg_sum_kernels *k = atomic_load(&sum_kern);

	if (k == NULL && sg_sum_init() == 0)
		k = atomic_load(&sum_kern);
	return k;
}

/* True if [a, a+alen) and [b, b+blen) share a byte. */
static bool ranges_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;

	return alen != 0 && blen != 0 && pa < pb + blen && pb < pa + alen;
}

/*
 * Common checks. @insz/@outsz are per-element sizes of inputs and the
 * output. Exact aliasing of the output with an input is allowed only when
 * @alias_ok and the element sizes match.
 */
static int check_args(const char *fn, enum sg_dtype dt, const void *dst, size_t outsz,
		      const void *const *src, unsigned int k, size_t insz, size_t n, bool alias_ok)
{
	if (!sg_dtype_valid(dt)) {
		SG_SUM_LOG(ERR, "%s: unknown dtype %d", fn, (int)dt);
		return -EINVAL;
	}
	if (n > PTRDIFF_MAX / 8) {
		SG_SUM_LOG(ERR, "%s: length %zu overflows the address space", fn, n);
		return -EINVAL;
	}
	if (n == 0)
		return 0;
	if (dst == NULL) {
		SG_SUM_LOG(ERR, "%s: NULL output", fn);
		return -EINVAL;
	}
	for (unsigned int j = 0; j < k; j++) {
		if (src[j] == NULL) {
			SG_SUM_LOG(ERR, "%s: NULL input %u", fn, j);
			return -EINVAL;
		}
		if (alias_ok && src[j] == dst && insz == outsz)
			continue;
		if (ranges_overlap(dst, n * outsz, src[j], n * insz)) {
			SG_SUM_LOG(ERR, "%s: output overlaps input %u", fn, j);
			return -EINVAL;
		}
	}
	if (kernels() == NULL) {
		SG_SUM_LOG(ERR, "%s: no implementation could be initialised", fn);
		return -ENOTSUP;
	}
	return 0;
}

static bool use_nt(size_t bytes)
{
	return bytes > sg_sum_nt_threshold();
}

static void copy_bytes(const struct sg_sum_kernels *k, void *dst, const void *src, size_t bytes)
{
	/* Exact aliasing is allowed by the API; memcpy onto itself is not. */
	if (dst == src)
		return;
	/* A one-input byte sum is a copy with streaming stores: dst skips the cache. */
	if (use_nt(bytes))
		k->addk(SG_DTYPE_UINT8, dst, &src, 1, bytes, 0, true);
	else
		memcpy(dst, src, bytes);
}

int sg_sum_copy(enum sg_dtype dt, void *dst, const void *src, size_t n)
{
	size_t sz = sg_dtype_size(dt);
	int rc = check_args(__func__, dt, dst, sz, &src, 1, sz, n, true);

	if (rc != 0 || n == 0)
		return rc;
	/* Bytes are copied as they are: a widen/narrow round trip would quiet NaNs. */
	copy_bytes(kernels(), dst, src, n * sz);
	return 0;
}

int sg_sum_addk(enum sg_dtype dt, void *dst, const void *const *src, unsigned int k, size_t n,
		unsigned int flags)
{
	size_t sz = sg_dtype_size(dt);
	int rc;

	if (src == NULL || k == 0 || k > SG_SUM_MAX_K) {
		SG_SUM_LOG(ERR, "sg_sum_addk: k=%u is outside 1..%d", k, SG_SUM_MAX_K);
		return -EINVAL;
	}
	if (flags & ~SG_SUM_F_NATIVE) {
		SG_SUM_LOG(ERR, "sg_sum_addk: unknown flags 0x%x", flags);
		return -EINVAL;
	}
	rc = check_args(__func__, dt, dst, sz, src, k, sz, n, true);
	if (rc != 0 || n == 0)
		return rc;
	kernels()->addk(dt, dst, src, k, n, flags, use_nt(n * sz));
	return 0;
}

int sg_sum_add(enum sg_dtype dt, void *dst, const void *src, size_t n)
{
	const void *in[2] = {dst, src};

	return sg_sum_addk(dt, dst, in, 2, n, 0);
}

int sg_sum_add2(enum sg_dtype dt, void *dst, const void *a, const void *b, size_t n,
		unsigned int flags)
{
	const void *in[2] = {a, b};

	return sg_sum_addk(dt, dst, in, 2, n, flags);
}

static bool wide_acc(enum sg_dtype dt, unsigned int flags)
{
	return (dt == SG_DTYPE_FP16 || dt == SG_DTYPE_BF16) && !(flags & SG_SUM_F_NATIVE);
}

size_t sg_sum_acc_elem_size(enum sg_dtype dt, unsigned int flags)
{
	return wide_acc(dt, flags) ? sizeof(float) : sg_dtype_size(dt);
}

/* Checks for the accumulator calls: @acc_is_out says which side is written. */
static int check_acc(const char *fn, enum sg_dtype dt, unsigned int flags, const void *out,
		     const void *in, size_t n, bool acc_is_out)
{
	size_t asz = sg_sum_acc_elem_size(dt, flags), sz = sg_dtype_size(dt);

	if (flags & ~SG_SUM_F_NATIVE) {
		SG_SUM_LOG(ERR, "%s: unknown flags 0x%x", fn, flags);
		return -EINVAL;
	}
	return check_args(fn, dt, out, acc_is_out ? asz : sz, &in, 1, acc_is_out ? sz : asz, n,
			  true);
}

/*
 * The accumulator calls without their checks. The checked calls above run
 * check_acc() (which also makes sure an implementation is chosen) and then
 * these, so both give the same bits.
 */
static inline const struct sg_sum_kernels *kernels_ready(void)
{
	return atomic_load_explicit(&sum_kern, memory_order_acquire);
}

void sg_sum_acc_init_unchecked(enum sg_dtype dt, unsigned int flags, void *acc, const void *src,
			       size_t n)
{
	if (n == 0)
		return;
	if (wide_acc(dt, flags))
		kernels_ready()->widen(dt, acc, src, n, false);
	else
		copy_bytes(kernels_ready(), acc, src, n * sg_dtype_size(dt));
}

void sg_sum_acc_add_unchecked(enum sg_dtype dt, unsigned int flags, void *acc, const void *src,
			      size_t n)
{
	const void *in[2] = {acc, src};

	if (n == 0)
		return;
	if (wide_acc(dt, flags))
		kernels_ready()->widen(dt, acc, src, n, true);
	else
		kernels_ready()->addk(dt, acc, in, 2, n, 0, use_nt(n * sg_dtype_size(dt)));
}

void sg_sum_acc_final_unchecked(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc,
				size_t n)
{
	if (n == 0)
		return;
	if (wide_acc(dt, flags))
		kernels_ready()->narrow(dt, dst, acc, n, use_nt(n * sizeof(uint16_t)));
	else
		copy_bytes(kernels_ready(), dst, acc, n * sg_dtype_size(dt));
}

/* ---- fused checksums ---------------------------------------------------- */

/*
 * Elements per kernel call: at most 2^30 bytes, so that no 64-bit lane of a
 * kernel's checksum can overflow; even, so that a 16-bit word never straddles
 * two calls.
 */
#define CSUM_STEP(sz) (((size_t)1 << 30) / (sz))

static uint16_t csum_fold(uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)((s & 0xffff) + (s >> 16));
}

/* The checksum of @p bytes at @p src, copied to @p dst unless it is NULL. */
static uint16_t csum_copy(const struct sg_sum_kernels *k, void *dst, const void *src, size_t bytes)
{
	uint16_t c = 0;

	for (size_t o = 0; o < bytes; o += CSUM_STEP(1)) {
		size_t b = RTE_MIN(bytes - o, CSUM_STEP(1));

		c = sg_sum_csum_add(c, csum_fold(k->csum_copy(dst ? (char *)dst + o : NULL,
							      (const char *)src + o, b)));
	}
	return c;
}

/* Headers: 8 bytes at a time in C cost a tenth of a vector kernel's set-up and tail. */
#define CSUM_SHORT 128

static uint64_t csum_short(const uint8_t *p, size_t bytes)
{
	uint64_t s = 0, w;
	uint32_t v = 0;
	uint16_t h = 0;
	size_t i = 0;

	for (; i + 8 <= bytes; i += 8) {
		memcpy(&w, p + i, 8);
		s += (w & 0xffffffffu) + (w >> 32);
	}
	if (i + 4 <= bytes) {
		memcpy(&v, p + i, 4);
		i += 4;
	}
	if (i + 2 <= bytes) {
		memcpy(&h, p + i, 2);
		s += h;
		h = 0;
		i += 2;
	}
	if (i < bytes)
		memcpy(&h, p + i, 1);
	return s + v + h;
}

uint16_t sg_sum_csum(const void *buf, size_t bytes)
{
	const struct sg_sum_kernels *k;

	if (bytes <= CSUM_SHORT)
		return csum_fold(csum_short(buf, bytes));
	k = kernels();

	/* no implementation (a bad SIGMA_SUM_IMPL, logged): the reference still answers */
	return csum_copy(k != NULL ? k : &sg_sum_kernels_scalar, NULL, buf, bytes);
}

uint16_t sg_sum_acc_init_csum_unchecked(enum sg_dtype dt, unsigned int flags, void *acc,
					const void *src, size_t n)
{
	const struct sg_sum_kernels *k = kernels_ready();

	if (!wide_acc(dt, flags))
		return csum_copy(k, acc, src, n * sg_dtype_size(dt));
	return sg_sum_acc_add_csum_unchecked(dt, flags, acc, NULL, src, n);
}

uint16_t sg_sum_acc_add_csum_unchecked(enum sg_dtype dt, unsigned int flags, void *dst,
				       const void *acc, const void *src, size_t n)
{
	const struct sg_sum_kernels *k = kernels_ready();
	const size_t asz = sg_sum_acc_elem_size(dt, flags), sz = sg_dtype_size(dt);
	uint16_t c = 0;

	for (size_t i = 0; i < n; i += CSUM_STEP(8)) {
		size_t m = RTE_MIN(n - i, CSUM_STEP(8));

		c = sg_sum_csum_add(c, csum_fold(k->csum_add(dt, flags, (char *)dst + i * asz,
							     acc ? (const char *)acc + i * asz
								 : NULL,
							     (const char *)src + i * sz, m)));
	}
	return c;
}

uint16_t sg_sum_acc_final_csum_unchecked(enum sg_dtype dt, unsigned int flags, void *dst,
					 const void *acc, size_t n)
{
	const struct sg_sum_kernels *k = kernels_ready();
	uint16_t c = 0;

	if (!wide_acc(dt, flags))
		return csum_copy(k, dst, acc, n * sg_dtype_size(dt));
	for (size_t i = 0; i < n; i += CSUM_STEP(8)) {
		size_t m = RTE_MIN(n - i, CSUM_STEP(8));

		c = sg_sum_csum_add(c, csum_fold(k->csum_narrow(dt, (uint16_t *)dst + i,
								(const float *)acc + i, m)));
	}
	return c;
}

int sg_sum_acc_init(enum sg_dtype dt, unsigned int flags, void *acc, const void *src, size_t n)
{
	int rc = check_acc(__func__, dt, flags, acc, src, n, true);

	if (rc == 0)
		sg_sum_acc_init_unchecked(dt, flags, acc, src, n);
	return rc;
}

int sg_sum_acc_add(enum sg_dtype dt, unsigned int flags, void *acc, const void *src, size_t n)
{
	int rc = check_acc(__func__, dt, flags, acc, src, n, true);

	if (rc == 0)
		sg_sum_acc_add_unchecked(dt, flags, acc, src, n);
	return rc;
}

int sg_sum_acc_final(enum sg_dtype dt, unsigned int flags, void *dst, const void *acc, size_t n)
{
	int rc = check_acc(__func__, dt, flags, dst, acc, n, false);

	if (rc == 0)
		sg_sum_acc_final_unchecked(dt, flags, dst, acc, n);
	return rc;
}
