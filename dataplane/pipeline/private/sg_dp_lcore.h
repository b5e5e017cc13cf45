/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pipeline's two structures (not part of the public API): struct
 * sg_dp_lcore, one per layout lcore, and struct sg_dp_pipeline, which
 * sg_dp_pipeline.c builds and runs; with the lcore loop's limits, sigmad's
 * log and the blocking idle wait (the logtype and the wait are defined in
 * sg_dp_lcore.c). How bytes move is the transport seam's (sg_dp_transport.h).
 */
#ifndef SG_DP_LCORE_H
#define SG_DP_LCORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_log.h>

#include "sg_dp_engine.h"
#include "sg_dp_lcore_ctl.h"
#include "sg_dp_pipeline.h"

/* sigmad's log (logtype sigma.dataplane); the macro ends the line: no "\n" in @p fmt. */
extern int sg_dp_logtype;
#define SG_DP_LOG(lvl, fmt, ...) \
	rte_log(RTE_LOG_##lvl, sg_dp_logtype, "sigmad: " fmt "\n", ##__VA_ARGS__)

struct rte_mbuf;
struct rte_mempool;
struct rte_rcu_qsbr;
struct rte_ring;
struct sg_dp_chan;
struct sg_dp_memif_guard;
struct sg_dp_move;
struct sg_dp_peers;
struct sg_dp_transport;
struct sg_late;

/*
 * Add every uint64_t of @p src into @p dst: for counter structures made only
 * of uint64_t counters and gauges (struct sg_dp_stats, sg_dp_job_stats).
 */
static inline void sg_dp_counters_add(void *dst, const void *src, size_t size)
{
	uint64_t *d = dst;
	const uint64_t *s = src;

	for (size_t i = 0; i < size / sizeof(uint64_t); i++)
		d[i] += s[i];
}

#define SG_DP_TXB 64          /* frames buffered per port before a TX burst */
#define SG_DP_MAX_BURST 512
#define SG_DP_MAX_XQ 16       /* RX queues an lcore polls beyond its layout's one */

struct sg_dp_lcore {
	struct sg_dp_pipeline *p;
	unsigned int idx;
	unsigned int lcore_id;
	enum sg_role role;
	int socket;
	uint16_t rx_port, rx_queue;
	/* ethdev: more RX queues of rx_port it polls, which the port fills whatever the
	 * layout names (net_af_packet's qpairs, ring ports' rings) */
	uint16_t n_xq, xq[SG_DP_MAX_XQ], xq_port[SG_DP_MAX_XQ]; /* queue xq[i] of xq_port[i] */
	uint16_t red_idx;           /* reducers: index in p->red (its steering UDP port and queue) */
	struct rte_ring *ring;      /* reducers: hand-off input (transport items) */
	struct sg_dp_engine *eng;   /* reducers */
	struct sg_dp_peers *peers;  /* ethdev reducers: reply address -> MAC */
	struct rte_mempool *pool;   /* ethdev: this socket's mbufs */
	void *xp;                   /* the transport's own per-lcore state, or NULL */
	/* ethdev reducers: the datagram the engine is handling (SG_DP_NO_DEST between
	 * bursts); replies to its sender use its MAC, accepted ones learn it */
	uint64_t rx_dest, rx_mac, rx_now;
	/* ethdev: the RESULT whose elements' checksum the engine gave (tx_payload_csum) */
	void *tx_sum_pkt;
	uint16_t tx_sum;
	uint64_t next_poll_tsc;
	uint16_t txn[SG_DP_MAX_PORTS];
	struct rte_mbuf *txb[SG_DP_MAX_PORTS][SG_DP_TXB];
	struct sg_dp_lcore_stats st;
	struct sg_dp_chan *chan;   /* requests from the control agent */
	volatile uint32_t ctl_waiting; /* a control call waits for this lcore: answer each
					* iteration and do not sleep (sg_dp_lcore_call()) */
	struct sg_dp_move *mv;      /* reducers: buckets leaving this reducer, or NULL */
} __rte_cache_aligned;

struct sg_dp_pipeline {
	const struct sg_dp_transport *tr;
	struct sg_dp_config cfg;
	struct sg_dp_topology topo;
	unsigned int n_lc, n_red;
	struct sg_dp_lcore *lc;
	struct sg_dp_lcore *red[SG_DP_MAX_LAYOUT];
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES];
	/* a net_af_xdp port's own RX pool (its UMEM) where another af_xdp port has the
	 * socket's: DPDK 22.11's PMD is built without shared UMEM */
	struct rte_mempool *port_pool[SG_DP_MAX_PORTS];
	void *xp;                   /* the transport's own state, or NULL */
	uint32_t tr_max_payload;    /* largest chunk one transport message holds; 0: no cap */
	bool port_used[SG_DP_MAX_PORTS];
	bool port_started[SG_DP_MAX_PORTS];
	bool port_chains[SG_DP_MAX_PORTS]; /* TX takes chained mbufs (RESULT fan-out) */
	uint16_t port_rxq[SG_DP_MAX_PORTS]; /* RX queues polled: the layout's and the port's own */
	struct sg_dp_net net[SG_DP_MAX_PORTS];
	/* [net] steer: reducer r polls RX queue steer_q0[port] + r where port_steer[port] */
	bool port_steer[SG_DP_MAX_PORTS];
	uint16_t steer_q0[SG_DP_MAX_PORTS];
	char steer_why[SG_DP_MAX_PORTS][160]; /* why a port has no rules (telemetry) */
	struct sg_dp_memif_guard *memif;  /* relay of the memif server ports, or NULL */
	/* ports no lcore may touch (sg_dp_eth_port_gate), and the quiescent states that
	 * tell when every lcore has seen a change: each running lcore reports one per
	 * loop (and is offline while it sleeps or does not run) */
	volatile bool port_off[SG_DP_MAX_PORTS];
	struct rte_rcu_qsbr *rcu;
	double ns_per_tsc;
	uint32_t max_frame;
	bool running;
	unsigned int polling;       /* lcores that have run their loop once since start */
	pthread_mutex_t ctl_lock;   /* control side of the lcore channels (sg_dp_lcore_call) */
	/* written by the main thread, read by lcores */
	volatile bool stop_rx;
	volatile int io_running;
	volatile unsigned int idle_sleep_us;
	/* bucket -> reducer index: written by the reducer that moves a bucket, read by all */
	volatile uint16_t keymap[SG_BUCKETS];
	/* control operations (sg_dp_control.c), one at a time under op_lock: */
	pthread_mutex_t op_lock;
	struct sg_dp_move *mv[SG_DP_MAX_LAYOUT]; /* the move each reducer runs, or NULL */
	uint64_t ever[SG_BUCKETS];  /* reducers that ever owned each bucket (a mask) */
	unsigned int n_moves;       /* moves built: their hash tables' names */
	bool draining;
	/* what lcores are handed to copy: an lcore that timed out may read it late, so
	 * it outlives the call, and a late copy is never freed (stage_late) */
	struct sg_dp_job_conf stage_job;
	struct sg_dp_keys_add stage_ka;
	struct sg_dp_key *stage_keys;
	bool stage_late;
	/* SG_DP_MSG_JOB_LATE's table (under ctl_lock): an lcore that timed out may still
	 * write it, so it is let go (leaked) then, and a fresh one taken */
	struct sg_late *late_buf;
};

static inline uint64_t sg_dp_now_ns(const struct sg_dp_pipeline *p, uint64_t tsc)
{
	return (uint64_t)((double)tsc * p->ns_per_tsc);
}

/*
 * A transport's blocking idle wait (memif's wake-up channels, AF_XDP sockets):
 * sg_dp_idle_block() sets @p *sleeping, and unless a control call, the stop or
 * a hand-off is already there (false), blocks in epoll set @p ep at most @p us
 * (true); the set holds @p evfd with data.u32 UINT32_MAX, which it drains.
 * sg_dp_idle_wake(), any thread: write @p evfd if the lcore announced a sleep.
 */
bool sg_dp_idle_block(struct sg_dp_lcore *lc, int *sleeping, int ep, int evfd, unsigned int us);
void sg_dp_idle_wake(int *sleeping, int evfd);

#endif /* SG_DP_LCORE_H */
