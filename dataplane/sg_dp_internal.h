/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the pipeline's own files share (not part of the public API): the
 * lcore and pipeline structures, and the transport seam.
 *
 * The seam: the lcore loop (sg_dp_pipeline.c) moves bytes only through a
 * struct sg_dp_transport. The DPDK ethdev transport (sg_dp_eth.c) is the one
 * implemented; an rdma-core transport fills the same table (its items would be
 * receive buffers, its engine_tx posts sends).
 */
#ifndef SG_DP_INTERNAL_H
#define SG_DP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_hash.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "sg_dp_engine.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"

/** Write a formatted reason into @p err (when not NULL), always NUL-terminated. */
void sg_dp_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

extern int sg_dp_logtype;
#define SG_DP_LOG(lvl, ...) rte_log(RTE_LOG_##lvl, sg_dp_logtype, "sigmad: " __VA_ARGS__)

struct sg_dp_lcore;

/** How a pipeline moves bytes. Every function runs on the lcore it is given
 *  (rx, reduce, flush, engine_tx) or on the main thread (setup, teardown). */
struct sg_dp_transport {
	const char *name;
	/** Pools, ports, queues, per-reducer reply tables; after the rings and engines. */
	int (*setup)(struct sg_dp_pipeline *p, char *err, size_t errlen);
	/** Undo setup (ports stopped, pools freed); the lcores have returned. */
	void (*teardown)(struct sg_dp_pipeline *p);
	/** Receive up to @p burst; reduce what this lcore owns, hand the rest to the
	 *  owners' rings (sg_dp_owner_of()). @return items received. */
	unsigned int (*rx)(struct sg_dp_lcore *lc, unsigned int burst);
	/** Reduce @p n items taken from this reducer's ring, then release them. */
	void (*reduce)(struct sg_dp_lcore *lc, void **items, unsigned int n);
	/** Release items never reduced (rings drained at teardown). */
	void (*release)(void **items, unsigned int n);
	/** Send what this lcore buffered. @return frames handed to the device. */
	unsigned int (*flush)(struct sg_dp_lcore *lc);
	/** Engine output; ctx is the reducer's struct sg_dp_lcore. */
	void *(*tx_alloc)(void *ctx, uint64_t dest, uint32_t len, void **pkt);
	void (*tx_send)(void *ctx, void *pkt, uint32_t len);
	/** Optional engine fan-out (struct sg_dp_tx_ops): one RESULT to N workers. */
	void *(*tx_alloc_multi)(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
				uint32_t len, void **pkt);
	unsigned int (*tx_send_multi)(void *ctx, void *pkt, uint32_t len,
				      const struct sg_dp_tx_dest *to, unsigned int n);
};

/** The DPDK ethdev transport (any PMD: PCI NICs, memif, af_packet, tap, ring). */
extern const struct sg_dp_transport sg_dp_transport_ethdev;

/**
 * Give one datagram to this reducer's engine, from any transport: counts it,
 * and counts its payload as summed when the engine aggregated it.
 * @p dest is the transport's reply address for the engine.
 */
void sg_dp_reduce_one(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len, uint64_t dest,
		      uint64_t now);

#define SG_DP_TXB 64          /* frames buffered per port before a TX burst */
#define SG_DP_MAX_BURST 512
#define SG_DP_PEERS 4096      /* reply addresses remembered per reducer */
#define SG_DP_IDLE_SPIN 256   /* empty polls before the sleep policy starts sleeping */

/* Where a received datagram came from and where its payload is: written by
 * the receiving lcore into the mbuf's private area, read by the reducer. */
struct rx_meta {
	struct sg_dp_peer peer;
	uint32_t off;
	uint32_t len;
};

struct sg_dp_lcore {
	struct sg_dp_pipeline *p;
	unsigned int idx;
	unsigned int lcore_id;
	enum sg_dp_role role;
	int socket;
	uint16_t rx_port, rx_queue;
	struct rte_ring *ring;      /* reducers: hand-off input (transport items) */
	struct sg_dp_engine *eng;   /* reducers */
	struct rte_hash *peers;     /* ethdev reducers: reply address -> MAC */
	struct rte_mempool *pool;   /* ethdev: this socket's mbufs */
	uint64_t cur_dest;          /* address of the packet the engine is building */
	uint64_t next_poll_tsc;
	uint16_t txn[SG_DP_MAX_PORTS];
	struct rte_mbuf *txb[SG_DP_MAX_PORTS][SG_DP_TXB];
	struct sg_dp_lcore_stats st;
} __rte_cache_aligned;

struct sg_dp_pipeline {
	const struct sg_dp_transport *tr;
	struct sg_dp_config cfg;
	struct sg_dp_topology topo;
	unsigned int n_lc, n_red;
	struct sg_dp_lcore *lc;
	struct sg_dp_lcore *red[SG_DP_MAX_LAYOUT];
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES];
	bool port_used[SG_DP_MAX_PORTS];
	bool port_started[SG_DP_MAX_PORTS];
	bool port_chains[SG_DP_MAX_PORTS]; /* TX takes chained mbufs (RESULT fan-out) */
	struct sg_dp_net net[SG_DP_MAX_PORTS];
	uint32_t job_hash_seed;
	double ns_per_tsc;
	uint32_t max_frame;
	bool running;
	/* written by the main thread, read by lcores */
	volatile bool stop_rx;
	volatile bool stop_req;
	volatile int io_running;
	volatile unsigned int idle_sleep_us;
};

_Static_assert(sizeof(struct rx_meta) <= SG_DP_MBUF_PRIV_SIZE, "rx_meta fits the mbuf priv area");
_Static_assert(SG_DP_MBUF_PRIV_SIZE % RTE_MBUF_PRIV_ALIGN == 0, "priv size alignment");

static inline uint64_t sg_dp_now_ns(const struct sg_dp_pipeline *p, uint64_t tsc)
{
	return (uint64_t)((double)tsc * p->ns_per_tsc);
}

/* Reducer that owns (job, key): consecutive keys go round-robin so that a
 * job's partitions spread evenly over the reducers. */
static inline unsigned int sg_dp_owner_of(const struct sg_dp_pipeline *p, const uint8_t *pl,
				    uint32_t len)
{
	uint32_t job, key;

	if (p->n_red == 1 || len < SG_DP_HDR_LEN)
		return 0; /* a short datagram is the engine's to count */
	memcpy(&job, pl + 8, sizeof(job));
	memcpy(&key, pl + 24, sizeof(key));
	job = rte_be_to_cpu_32(job);
	key = rte_be_to_cpu_32(key);
	return ((job * 0x9e3779b1u >> 8) + key) % p->n_red;
}

#endif /* SG_DP_INTERNAL_H */
