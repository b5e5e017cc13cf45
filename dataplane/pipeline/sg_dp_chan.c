/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Request/response channels between the control thread and dataplane lcores.
 * Each direction is an SP/SC rte_ring initialised in plain heap memory, so no
 * memzone (and no hugepage, no EAL) is needed, and neither side ever locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_ring.h>

#include "sg_dp_chan.h"

struct sg_dp_chan {
	struct rte_ring *req;	/* control -> lcore */
	struct rte_ring *resp;	/* lcore -> control */
	uint32_t next_seq;	/* control side only */
	unsigned int size;
	struct sg_dp_chan_msg *slots; /* requests live here while queued */
	struct sg_dp_chan_msg *rslots; /* lcore writes answers here: one per request slot */
};

static struct rte_ring *ring_new(const char *name, const char *suffix, unsigned int size)
{
	char rname[RTE_RING_NAMESIZE];
	ssize_t sz = rte_ring_get_memsize(size);
	struct rte_ring *r;

	if (sz < 0)
		return NULL;
	r = aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL((size_t)sz, RTE_CACHE_LINE_SIZE));
	if (r == NULL)
		return NULL;
	snprintf(rname, sizeof(rname), "%.20s_%s", name, suffix);
	if (rte_ring_init(r, rname, size, RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
		free(r);
		return NULL;
	}
	return r;
}

struct sg_dp_chan *sg_dp_chan_create(const char *name, unsigned int size)
{
	struct sg_dp_chan *c;

	if (name == NULL || size < 2 || size > (1u << 16) || (size & (size - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->size = size;
	c->req = ring_new(name, "rq", size);
	c->resp = ring_new(name, "rs", size);
	c->slots = calloc(size, sizeof(*c->slots));
	c->rslots = calloc(size, sizeof(*c->rslots));
	if (c->req == NULL || c->resp == NULL || c->slots == NULL || c->rslots == NULL) {
		sg_dp_chan_destroy(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

void sg_dp_chan_destroy(struct sg_dp_chan *c)
{
	if (c == NULL)
		return;
	free(c->req);
	free(c->resp);
	free(c->slots);
	free(c->rslots);
	free(c);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Slot (seq % size) carries the message itself; the rings carry only slot
 * pointers. A slot is reused after size calls, by which time its answer has
 * been consumed or discarded (at most size-1 requests can be queued).
 */
int sg_dp_chan_call(struct sg_dp_chan *c, const struct sg_dp_chan_msg *req,
		     struct sg_dp_chan_msg *resp, uint64_t timeout_us)
{
	uint64_t deadline;
	uint32_t seq;
	struct sg_dp_chan_msg *slot;
	void *obj;

	if (c == NULL || req == NULL || resp == NULL)
		return -EINVAL;
	/* Drop answers to calls that timed out, so the response ring never fills. */
	while (rte_ring_sc_dequeue(c->resp, &obj) == 0)
		;
	if (rte_ring_full(c->req))
		return -ENOBUFS;
	seq = ++c->next_seq;
	slot = &c->slots[seq & (c->size - 1)];
	*slot = *req;
	slot->seq = seq;
	slot->result = 0;
	if (rte_ring_sp_enqueue(c->req, slot) != 0)
		return -ENOBUFS;
	deadline = now_us() + timeout_us;
	for (;;) {
		while (rte_ring_sc_dequeue(c->resp, &obj) == 0) {
			const struct sg_dp_chan_msg *ans = obj;

			if (ans->seq == seq) {
				*resp = *ans;
				return 0;
			}
			/* An answer to a call that already timed out: drop it. */
		}
		if (now_us() >= deadline)
			return -ETIMEDOUT;
		rte_pause();
	}
}

unsigned int sg_dp_chan_poll(struct sg_dp_chan *c, sg_dp_chan_handler h, void *arg,
			      unsigned int max)
{
	unsigned int n = 0;
	void *obj;

	if (c == NULL || h == NULL)
		return 0;
	while (n < max && rte_ring_sc_dequeue(c->req, &obj) == 0) {
		struct sg_dp_chan_msg *rq = obj;
		struct sg_dp_chan_msg *ans = &c->rslots[rq - c->slots];

		*ans = *rq;
		ans->result = h(arg, ans);
		ans->seq = rq->seq;
		/* The response ring has as many slots as the request ring: it cannot be full. */
		rte_ring_sp_enqueue(c->resp, ans);
		n++;
	}
	return n;
}
