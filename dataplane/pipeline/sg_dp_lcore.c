/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every pipeline file uses of the lcore's (sg_dp_lcore.h): sigmad's
 * logtype, and the blocking idle wait that transports build their idle_wait()
 * and wake() on. A file of its own, below the files that use it, so that
 * logging or waiting points back at no file that calls them (the lcore loop,
 * sg_dp_pipeline.c, calls every other one).
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_log.h>
#include <rte_ring.h>

#include "sg_dp_lcore.h"

RTE_LOG_REGISTER(sg_dp_logtype, sigma.dataplane, INFO);

bool sg_dp_idle_block(struct sg_dp_lcore *lc, int *sleeping, int ep, int evfd, unsigned int us)
{
	struct epoll_event ev[8];
	uint64_t v;
	int n;

	/* announce, then look again: a waker sees the flag or we see its work */
	__atomic_store_n(sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&lc->ctl_waiting, __ATOMIC_SEQ_CST) || lc->p->stop_rx ||
	    (lc->ring != NULL && !rte_ring_empty(lc->ring))) {
		__atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
		return false;
	}
	n = epoll_wait(ep, ev, (int)RTE_DIM(ev), (int)((us + 999) / 1000));
	__atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 == UINT32_MAX && read(evfd, &v, sizeof(v)) < 0) {
			/* EAGAIN: read already */
		}
	return true;
}

void sg_dp_idle_wake(int *sleeping, int evfd)
{
	uint64_t one = 1;

	/* the caller's enqueue (a store) before the look at the flag: a full fence */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(sleeping, __ATOMIC_SEQ_CST) && write(evfd, &one, sizeof(one)) < 0) {
		/* the counter is full: readable, which is all a wake needs */
	}
}
