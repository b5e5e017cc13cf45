/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hand-off of copied pushes (the verbs and socket transports, whose receive
 * buffers do not outlive a poll): the receiving lcore copies a push for
 * another reducer into an item of a mempool and batches items per owner; the
 * owner reduces them from its ring and puts them back (sg_dp_hand.c).
 */
#ifndef SG_DP_HAND_H
#define SG_DP_HAND_H

#include <stddef.h>
#include <stdint.h>

#include "sg_dp_config.h"

struct rte_mempool;
struct sg_dp_lcore;
struct sg_dp_pipeline;

#define SG_DP_HAND_BATCH 32

/* What every item starts with; the transport's address of the sender follows, and the
 * message at struct sg_dp_hand.msg_off. */
struct sg_dp_hand_item {
	uint32_t len;
};

struct sg_dp_hand {
	struct rte_mempool *items; /* NULL: nobody to hand to (one reducer, no io lcore) */
	uint32_t msg_off;          /* where an item's message starts */
	unsigned int n[SG_DP_MAX_LAYOUT];
	void *b[SG_DP_MAX_LAYOUT][SG_DP_HAND_BATCH];
};

/** An item for a push to reducer @p o, or NULL (counted: no_mbuf, or ring_full when
 *  @p h has no pool). Fill it, then sg_dp_hand_add() it. */
void *sg_dp_hand_get(struct sg_dp_lcore *lc, struct sg_dp_hand *h);

/** Queue filled item @p item for reducer @p o; a full batch goes to its ring at once. */
void sg_dp_hand_add(struct sg_dp_lcore *lc, struct sg_dp_hand *h, unsigned int o, void *item);

/** Put every batch on its owner's ring (what does not fit is dropped: ring_full), and
 *  wake the owners (struct sg_dp_transport.wake). */
void sg_dp_hand_flush(struct sg_dp_lcore *lc, struct sg_dp_hand *h);

/**
 * struct sg_dp_transport.reduce for items of @p h's layout: each item of a key
 * moving away goes to its new owner's ring (or is refused: draining,
 * ring_full); @p one reduces the others. Every item not forwarded goes back to
 * its pool.
 */
void sg_dp_hand_reduce(struct sg_dp_lcore *lc, const struct sg_dp_hand *h, void **items,
		       unsigned int n,
		       void (*one)(struct sg_dp_lcore *lc, void *item, const uint8_t *msg,
				   uint32_t len, uint64_t now));

/** struct sg_dp_transport.release for items of sg_dp_hand_pool()s. */
void sg_dp_hand_release(void **items, unsigned int n);

/**
 * The hand-off pool of NUMA node @p node for items of @p size bytes, made once
 * into p->pools[node]: room for every reducer's ring full, plus every lcore's
 * batches and cache. NULL with @p err filled on failure; freed by the transport.
 */
struct rte_mempool *sg_dp_hand_pool(struct sg_dp_pipeline *p, int node, uint32_t size,
				    char *err, size_t errlen);

#endif /* SG_DP_HAND_H */
