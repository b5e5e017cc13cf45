/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writing a range's pages once before the hot path does. A file of its own: the
 * transports that use it (libsigma's kernel UDP among them) must not pull libnuma
 * into a static link.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "sg_sum.h"

/* the smallest page size: a write at this stride reaches every page of any size */
#define MIN_PAGE 4096u

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

size_t sg_sum_populate(void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(MIN_PAGE - 1);
	uintptr_t hi = ((uintptr_t)addr + len + MIN_PAGE - 1) & ~(uintptr_t)(MIN_PAGE - 1);

	if (len == 0)
		return 0;
	/* a range not all mapped now (ENOMEM, EFAULT: another thread unmapped it, as the
	 * memif PMD does when a peer leaves) is left alone; before Linux 5.14 (EINVAL) the
	 * writes alone do it */
	if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) < 0 && errno != EINVAL)
		return 0;
	/* the first byte of each page, or of the range on its first page (it may be the
	 * only mapped part of that page that is ours) */
	for (uintptr_t a = lo; a < hi; a += MIN_PAGE) {
		uintptr_t b = a < (uintptr_t)addr ? (uintptr_t)addr : a;

		__atomic_fetch_add((uint8_t *)b, 0, __ATOMIC_RELAXED);
	}
	return len;
}
