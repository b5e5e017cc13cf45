/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A reducer's reply addresses (ethdev; sg_dp_peers.c): the MAC of each worker
 * address (the engine's 64-bit dest: IPv4, UDP port, ethdev port) that sent a
 * packet the engine accepted (struct sg_dp_tx_ops.accept). At most @c cap
 * addresses: a new one takes the place of the least recently seen when full.
 * Fixed memory; nothing is allocated or locked after create; one lcore.
 */
#ifndef SG_DP_PEERS_H
#define SG_DP_PEERS_H

#include <stdint.h>

struct sg_dp_peers;

/** What sg_dp_peers_learn() did. */
enum sg_dp_peers_learn {
	SG_DP_PEER_SEEN,    /* known already: MAC and last-seen time refreshed */
	SG_DP_PEER_NEW,     /* added */
	SG_DP_PEER_EVICTED, /* added in place of the least recently seen address */
	SG_DP_PEER_FAILED,  /* rte_hash refused the key (not expected: the table has
			       extendable buckets and is never full when it adds) */
};

/** A table of @p cap (>= 8) addresses on @p socket. @return it, or NULL with rte_errno set. */
struct sg_dp_peers *sg_dp_peers_create(const char *name, uint32_t cap, int socket);
/** Free a table. NULL is fine. */
void sg_dp_peers_free(struct sg_dp_peers *t);
/** Remember that @p dest (at @p mac) was accepted at @p now (ns). */
enum sg_dp_peers_learn sg_dp_peers_learn(struct sg_dp_peers *t, uint64_t dest, uint64_t mac,
					 uint64_t now);
/** The MAC of @p dest into *@p mac. @return 0, or -ENOENT if the table does not hold it.
 *  (Not const: a small cache of recent answers sits in the table.) */
int sg_dp_peers_lookup(struct sg_dp_peers *t, uint64_t dest, uint64_t *mac);
/** Forget up to @p max addresses not seen for @p idle_ns, least recently seen first.
 *  @return how many were forgotten. */
unsigned int sg_dp_peers_expire(struct sg_dp_peers *t, uint64_t now, uint64_t idle_ns,
				unsigned int max);
/** Addresses held now. */
uint32_t sg_dp_peers_count(const struct sg_dp_peers *t);

#endif /* SG_DP_PEERS_H */
