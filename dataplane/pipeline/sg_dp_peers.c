/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A reducer's reply addresses (ethdev transport): worker address -> MAC, for
 * addresses the engine accepted only (struct sg_dp_tx_ops.accept). An
 * rte_hash finds an address; its position indexes a fixed array of entries
 * threaded on a list from the most to the least recently seen. A full table
 * makes room by forgetting its least recently seen address, so a valid
 * worker is never refused; sg_dp_peers_expire() forgets idle ones from the
 * same end, a bounded number per call. Nothing is allocated or locked after
 * create: the table belongs to its reducer lcore.
 *
 * Every accepted push learns its sender and every RESULT looks up N workers,
 * and the same few addresses come back over and over: a small direct-mapped
 * cache of (address, position) answers most of them without rte_hash (about
 * 200 instructions a lookup, docs/performance.md). A position is the
 * address's until rte_hash deletes it, and a deleted entry forgets its address,
 * so a cached position is right when its entry still holds the address.
 */
#include <errno.h>
#include <stdio.h>

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_malloc.h>

#include "sg_dp_peers.h"

#define NIL UINT32_MAX
#define CACHE 256          /* direct-mapped entries, a power of two */
#define NO_DEST UINT64_MAX /* never an address: an ethdev port id is below 2^16 - 1 */

struct peer_ent {
	uint64_t dest;
	uint64_t mac;
	uint64_t seen;        /* ns of the last accepted packet from dest */
	uint32_t prev, next;  /* towards the most / the least recently seen */
};

struct sg_dp_peers {
	struct rte_hash *h;
	struct peer_ent *e;   /* by rte_hash position */
	uint32_t cap, n;
	uint32_t head, tail;  /* most, least recently seen */
	struct {
		uint64_t dest;
		uint32_t pos;
	} cache[CACHE];
};

static inline unsigned int cache_slot(uint64_t dest)
{
	return (unsigned int)((dest * 0x9e3779b97f4a7c15ull) >> 56) & (CACHE - 1);
}

/* @p dest's position in the table, or a negative rte_hash answer. */
static int32_t find(struct sg_dp_peers *t, uint64_t dest)
{
	unsigned int c = cache_slot(dest);
	int32_t pos;

	if (t->cache[c].dest == dest && t->e[t->cache[c].pos].dest == dest)
		return (int32_t)t->cache[c].pos;
	pos = rte_hash_lookup(t->h, &dest);
	if (pos >= 0) {
		t->cache[c].dest = dest;
		t->cache[c].pos = (uint32_t)pos;
	}
	return pos;
}

struct sg_dp_peers *sg_dp_peers_create(const char *name, uint32_t cap, int socket)
{
	struct rte_hash_parameters hp = {
		.name = name, .entries = cap, .key_len = sizeof(uint64_t), .socket_id = socket,
		/* extendable buckets: every one of the cap entries fits, whatever the hashes */
		.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	struct sg_dp_peers *t;
	int32_t max;

	if (cap < 8) {
		rte_errno = EINVAL;
		return NULL;
	}
	t = rte_zmalloc_socket("sg_dp_peers", sizeof(*t), 0, socket);
	if (t == NULL) {
		rte_errno = ENOMEM;
		return NULL;
	}
	t->h = rte_hash_create(&hp);
	max = t->h ? rte_hash_max_key_id(t->h) : -1;
	if (max >= 0)
		t->e = rte_calloc_socket("sg_dp_peer_ents", (size_t)max + 1, sizeof(*t->e), 0,
					 socket);
	if (t->e == NULL) {
		int err = t->h ? ENOMEM : rte_errno;

		sg_dp_peers_free(t);
		rte_errno = err;
		return NULL;
	}
	t->cap = cap;
	t->head = t->tail = NIL;
	for (int32_t i = 0; i <= max; i++)
		t->e[i].dest = NO_DEST;
	for (unsigned int c = 0; c < CACHE; c++)
		t->cache[c].dest = NO_DEST;
	return t;
}

void sg_dp_peers_free(struct sg_dp_peers *t)
{
	if (t == NULL)
		return;
	rte_hash_free(t->h);
	rte_free(t->e);
	rte_free(t);
}

static void unlink_ent(struct sg_dp_peers *t, uint32_t i)
{
	struct peer_ent *e = &t->e[i];

	if (e->prev != NIL)
		t->e[e->prev].next = e->next;
	else
		t->head = e->next;
	if (e->next != NIL)
		t->e[e->next].prev = e->prev;
	else
		t->tail = e->prev;
}

static void push_head(struct sg_dp_peers *t, uint32_t i)
{
	struct peer_ent *e = &t->e[i];

	e->prev = NIL;
	e->next = t->head;
	if (t->head != NIL)
		t->e[t->head].prev = i;
	else
		t->tail = i;
	t->head = i;
}

/* Forget the least recently seen address. */
static void drop_tail(struct sg_dp_peers *t)
{
	uint32_t i = t->tail;

	unlink_ent(t, i);
	rte_hash_del_key(t->h, &t->e[i].dest);
	t->e[i].dest = NO_DEST; /* a cached position of it no longer matches */
	t->n--;
}

enum sg_dp_peers_learn sg_dp_peers_learn(struct sg_dp_peers *t, uint64_t dest, uint64_t mac,
					 uint64_t now)
{
	int32_t pos = find(t, dest);
	bool evicted = false;
	struct peer_ent *e;

	if (pos >= 0) {
		e = &t->e[pos];
		e->mac = mac; /* a worker behind a new NIC or gateway: the latest wins */
		e->seen = now;
		if (t->head != (uint32_t)pos) {
			unlink_ent(t, (uint32_t)pos);
			push_head(t, (uint32_t)pos);
		}
		return SG_DP_PEER_SEEN;
	}
	if (t->n == t->cap) {
		drop_tail(t);
		evicted = true;
	}
	pos = rte_hash_add_key(t->h, &dest);
	if (pos < 0)
		return SG_DP_PEER_FAILED;
	e = &t->e[pos];
	e->dest = dest;
	e->mac = mac;
	e->seen = now;
	push_head(t, (uint32_t)pos);
	t->n++;
	t->cache[cache_slot(dest)].dest = dest;
	t->cache[cache_slot(dest)].pos = (uint32_t)pos;
	return evicted ? SG_DP_PEER_EVICTED : SG_DP_PEER_NEW;
}

int sg_dp_peers_lookup(struct sg_dp_peers *t, uint64_t dest, uint64_t *mac)
{
	int32_t pos = find(t, dest);

	if (pos < 0)
		return -ENOENT;
	*mac = t->e[pos].mac;
	return 0;
}

unsigned int sg_dp_peers_expire(struct sg_dp_peers *t, uint64_t now, uint64_t idle_ns,
				unsigned int max)
{
	unsigned int n = 0;

	/* the tail is the least recently seen: stop at the first address still in use */
	while (n < max && t->tail != NIL && now > t->e[t->tail].seen &&
	       now - t->e[t->tail].seen >= idle_ns) {
		drop_tail(t);
		n++;
	}
	return n;
}

uint32_t sg_dp_peers_count(const struct sg_dp_peers *t)
{
	return t->n;
}
