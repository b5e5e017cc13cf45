/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NUMA-local memory, thread pinning, and the per-lcore accumulator buffer
 * pool. Everything degrades to plain memory on machines without NUMA.
 */
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sg_sum_internal.h"

#define POOL_ALIGN 64

static bool numa_ok(void)
{
	return numa_available() >= 0;
}

int sg_sum_numa_nodes(void)
{
	return numa_ok() ? numa_max_node() + 1 : 1;
}

void *sg_sum_numa_alloc(size_t size, int node)
{
	void *p;

	if (size == 0 || size > PTRDIFF_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if (node < -1 || node >= sg_sum_numa_nodes()) {
		SG_SUM_LOG(ERR, "NUMA node %d does not exist (nodes: 0..%d)", node,
			   sg_sum_numa_nodes() - 1);
		errno = EINVAL;
		return NULL;
	}
	if (numa_ok()) {
		/* Both calls mmap: page-aligned and zeroed. */
		p = node < 0 ? numa_alloc_local(size) : numa_alloc_onnode(size, node);
		if (p == NULL)
			errno = ENOMEM;
		return p;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void sg_sum_numa_free(void *ptr, size_t size)
{
	if (ptr == NULL)
		return;
	if (numa_ok())
		numa_free(ptr, size);
	else
		munmap(ptr, size);
}

int sg_sum_cpu_node(unsigned int cpu)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int node;

	if (ncpu > 0 && cpu >= (unsigned long)ncpu)
		return -EINVAL;
	if (!numa_ok())
		return 0;
	node = numa_node_of_cpu((int)cpu);
	return node < 0 ? -EINVAL : node;
}

int sg_sum_pin_thread(unsigned int cpu)
{
	cpu_set_t set;
	int rc;

	if (cpu >= CPU_SETSIZE)
		return -EINVAL;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc != 0) {
		SG_SUM_LOG(ERR, "cannot pin thread to cpu %u: %s", cpu, strerror(rc));
		return -rc;
	}
	return 0;
}

int sg_sum_current_node(void)
{
	int cpu = sched_getcpu();
	int node;

	if (cpu < 0 || !numa_ok())
		return 0;
	node = numa_node_of_cpu(cpu);
	return node < 0 ? 0 : node;
}

struct sg_sum_pool {
	uint8_t *base;
	size_t stride;     /* buffer size rounded up to POOL_ALIGN */
	size_t buf_size;
	size_t map_size;
	unsigned int count;
	unsigned int top;  /* number of entries in free_idx */
	uint32_t *free_idx;
	uint8_t *in_use;   /* catches double puts, which would corrupt sums */
};

struct sg_sum_pool *sg_sum_pool_create(int node, size_t buf_size, unsigned int count)
{
	struct sg_sum_pool *p;
	size_t stride;

	if (buf_size == 0 || count == 0 || buf_size > (SIZE_MAX >> 8)) {
		errno = EINVAL;
		return NULL;
	}
	stride = (buf_size + POOL_ALIGN - 1) & ~(size_t)(POOL_ALIGN - 1);
	if (stride > PTRDIFF_MAX / count) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->free_idx = calloc(count, sizeof(*p->free_idx));
	p->in_use = calloc(count, 1);
	p->map_size = stride * count;
	p->base = p->free_idx && p->in_use ? sg_sum_numa_alloc(p->map_size, node) : NULL;
	if (p->base == NULL) {
		int err = errno ? errno : ENOMEM;

		free(p->free_idx);
		free(p->in_use);
		free(p);
		errno = err;
		return NULL;
	}
	/* The buffers come and go in turn: no first write on the hot path. A child process
	 * never uses its parent's pool, and sharing it would make each first write after a
	 * fork() a page copy (sigma-bench forks its workers beside its node threads). */
	sg_sum_populate(p->base, p->map_size);
	if (madvise(p->base, p->map_size, MADV_DONTFORK) < 0) {
		/* only a cost: inherited, its first writes after a fork are copies */
	}
	p->stride = stride;
	p->buf_size = buf_size;
	p->count = count;
	/* Hand out low addresses first: friendlier to the TLB and to debugging. */
	for (unsigned int i = 0; i < count; i++)
		p->free_idx[i] = count - 1 - i;
	p->top = count;
	return p;
}

void sg_sum_pool_destroy(struct sg_sum_pool *pool)
{
	if (pool == NULL)
		return;
	sg_sum_numa_free(pool->base, pool->map_size);
	free(pool->free_idx);
	free(pool->in_use);
	free(pool);
}

void *sg_sum_pool_get(struct sg_sum_pool *pool)
{
	uint32_t idx;

	if (pool->top == 0)
		return NULL;
	idx = pool->free_idx[--pool->top];
	pool->in_use[idx] = 1;
	return pool->base + (size_t)idx * pool->stride;
}

int sg_sum_pool_put(struct sg_sum_pool *pool, void *buf)
{
	uintptr_t off = (uintptr_t)buf - (uintptr_t)pool->base;
	size_t idx;

	if ((uintptr_t)buf < (uintptr_t)pool->base || off % pool->stride != 0 ||
	    (idx = off / pool->stride) >= pool->count || !pool->in_use[idx]) {
		SG_SUM_LOG(ERR, "pool put of %p: not a buffer taken from this pool", buf);
		return -EINVAL;
	}
	pool->in_use[idx] = 0;
	pool->free_idx[pool->top++] = (uint32_t)idx;
	return 0;
}

unsigned int sg_sum_pool_avail(const struct sg_sum_pool *pool)
{
	return pool->top;
}

size_t sg_sum_pool_buf_size(const struct sg_sum_pool *pool)
{
	return pool->buf_size;
}
