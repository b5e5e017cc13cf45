/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hand-off of copied pushes between lcores, for the transports whose receive
 * buffers do not outlive a poll (verbs, socket): items from a per-NUMA-node
 * mempool, batched per owner, put on the owner's ring; the owner forwards
 * those of a key moving away. No lock, no heap on this path.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "sg_dp_hand.h"
#include "sg_dp_transport.h"

void *sg_dp_hand_get(struct sg_dp_lcore *lc, struct sg_dp_hand *h)
{
	void *it;

	if (unlikely(h->items == NULL)) {
		lc->st.drops[SG_DP_ND_RING_FULL]++; /* cannot be: nobody to hand to */
		return NULL;
	}
	if (rte_mempool_get(h->items, &it) < 0) {
		lc->st.drops[SG_DP_ND_NO_MBUF]++;
		return NULL;
	}
	return it;
}

/* Batch of owner @p o onto its ring. @return items enqueued. */
static unsigned int flush_one(struct sg_dp_lcore *lc, struct sg_dp_hand *h, unsigned int o)
{
	unsigned int n = h->n[o], e;

	e = rte_ring_enqueue_burst(lc->p->red[o]->ring, h->b[o], n, NULL);
	lc->st.handoff_pkts += e;
	if (e < n) {
		lc->st.drops[SG_DP_ND_RING_FULL] += n - e;
		rte_mempool_put_bulk(h->items, h->b[o] + e, n - e);
	}
	h->n[o] = 0;
	return e;
}

static void wake(struct sg_dp_lcore *lc, unsigned int o)
{
	if (lc->p->tr->wake != NULL)
		lc->p->tr->wake(lc->p->red[o]);
}

void sg_dp_hand_add(struct sg_dp_lcore *lc, struct sg_dp_hand *h, unsigned int o, void *item)
{
	h->b[o][h->n[o]++] = item;
	if (h->n[o] == SG_DP_HAND_BATCH && flush_one(lc, h, o))
		wake(lc, o);
}

void sg_dp_hand_flush(struct sg_dp_lcore *lc, struct sg_dp_hand *h)
{
	for (unsigned int o = 0; h->items != NULL && o < lc->p->n_red; o++)
		if (h->n[o] && flush_one(lc, h, o))
			wake(lc, o);
}

/* @return 0 to reduce @p item here; 1 if forwarded to a key's new owner; -1 to drop it */
static int hand_fwd(struct sg_dp_lcore *lc, void *item, const uint8_t *msg, uint32_t len)
{
	int fwd = sg_dp_steer_move(lc, msg, len);

	if (likely(fwd == SG_DP_STEER_HERE))
		return 0;
	if (fwd == SG_DP_STEER_DROPPED)
		return -1;
	if (rte_ring_enqueue(lc->p->red[fwd]->ring, item) < 0) {
		lc->st.drops[SG_DP_ND_RING_FULL]++;
		return -1;
	}
	lc->st.handoff_pkts++;
	wake(lc, (unsigned int)fwd);
	return 1;
}

void sg_dp_hand_reduce(struct sg_dp_lcore *lc, const struct sg_dp_hand *h, void **items,
		       unsigned int n,
		       void (*one)(struct sg_dp_lcore *lc, void *item, const uint8_t *msg,
				   uint32_t len, uint64_t now))
{
	uint64_t now = sg_dp_now_ns(lc->p, rte_rdtsc());

	for (unsigned int i = 0; i < n; i++) {
		void *it = items[i];
		uint32_t len = ((const struct sg_dp_hand_item *)it)->len;
		const uint8_t *msg = (const uint8_t *)it + h->msg_off;
		int fwd = hand_fwd(lc, it, msg, len);

		if (fwd > 0)
			continue; /* a key moving away: the new owner has it */
		if (fwd == 0)
			one(lc, it, msg, len, now);
		/* its own pool: another NUMA node's lcore may have handed it */
		rte_mempool_put(rte_mempool_from_obj(it), it);
	}
}

void sg_dp_hand_release(void **items, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		rte_mempool_put(rte_mempool_from_obj(items[i]), items[i]);
}

struct rte_mempool *sg_dp_hand_pool(struct sg_dp_pipeline *p, int node, uint32_t size,
				    char *err, size_t errlen)
{
	/* enough for every ring full plus every lcore's batches and cache */
	unsigned int n = p->n_red * p->cfg.ring_size +
			 p->n_lc * (p->n_red * SG_DP_HAND_BATCH + 2 * 64);
	char name[RTE_MEMPOOL_NAMESIZE];

	if (p->pools[node] != NULL)
		return p->pools[node];
	snprintf(name, sizeof(name), "sg_hand_%d_%u", node, (unsigned int)getpid());
	p->pools[node] = rte_mempool_create(name, n, size, 64, 0, NULL, NULL, NULL, NULL, node, 0);
	if (p->pools[node] == NULL)
		sg_dp_seterr(err, errlen, "hand-off pool of %u items of %u bytes on NUMA node %d: %s "
			     "(lower [resources] ring_size, or give EAL more memory with -m)", n,
			     size, node, rte_strerror(rte_errno));
	return p->pools[node];
}
