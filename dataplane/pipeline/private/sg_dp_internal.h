/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the pipeline's own files share (not part of the public API): the
 * lcore and pipeline structures, and the transport seam.
 *
 * The seam: the lcore loop (sg_dp_pipeline.c) moves bytes only through a
 * struct sg_dp_transport: the DPDK ethdev transport (sg_dp_eth.c; its items
 * are mbufs), the kernel UDP socket one (sg_dp_sock.c; its items are copies
 * of pushes for another reducer, its engine output goes out with sendmmsg)
 * or, in builds with verbs, the rdma-core one (sg_dp_verbs_tp.c; its items
 * are copies of pushes for another reducer, its engine output posts sends on
 * the reducer's own QP).
 */
#ifndef SG_DP_INTERNAL_H
#define SG_DP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_flow.h>
#include <rte_hash.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "sg_dp_engine.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"
#include "sg_dp_peers.h"
#include "sg_dp_eth.h"
#include "sg_dp_xdp.h"
#include "sg_dp_memif.h"
#include "sg_dp_hand.h"
#include "sg_dp_control.h"
#include "sg_dp_lcore_ctl.h"

/* sigmad's log (logtype sigma.dataplane); the macro ends the line: no "\n" in @p fmt. */
extern int sg_dp_logtype;
#define SG_DP_LOG(lvl, fmt, ...) \
	rte_log(RTE_LOG_##lvl, sg_dp_logtype, "sigmad: " fmt "\n", ##__VA_ARGS__)

struct sg_dp_lcore;
struct sg_dp_chan;
struct sg_dp_chan_msg;

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

/* Keys are hashed to one of SG_BUCKETS buckets (sg_dp_bucket_of(), sg_dp_proto.h);
 * p->keymap sends a bucket to a reducer. */

/*
 * Buckets leaving one reducer (built by sg_dp_control.c, run by sg_dp_lcore_ctl.c).
 * The reducer that owns the buckets' rounds today sequences the move: a
 * chunk's first push seen after the move starts, of round p, fixes its switch round s = p + 2 (the
 * reducer's own round is p - 1, p or p + 1). Rounds before s stay here;
 * rounds from s on are forwarded to the new owner, which opens them fresh.
 * Once every chunk has been seen at s + 1 (its new owner finished round s, so
 * nobody can ask for an older result) the keymap entry flips and dispatchers
 * send straight to the new owner; stragglers are forwarded.
 */
struct sg_dp_move_chunk {
	uint32_t sw;    /* switch round */
	uint32_t state; /* 0 not seen yet, 1 switching at sw, 2 done */
};

/* A move's destination that drops instead: drain refuses rounds from sw on. */
#define SG_DP_MOVE_DROP 0xffff

/* An open job a move tracks: its keys are made by pushes, so no list of them exists. */
struct sg_dp_move_open {
	uint32_t job;
	uint64_t token; /* the wire token: only a push that carries it adds a chunk */
};

struct sg_dp_move {
	uint16_t to[SG_BUCKETS];  /* destination reducer index per bucket, or SG_DP_MOVE_DROP */
	uint8_t phase[SG_BUCKETS]; /* 0 stays, 1 moving (per chunk), 2 moved (forward all) */
	struct rte_hash *chunks;     /* (job, key, chunk) -> index into ch */
	struct sg_dp_move_chunk *ch;
	uint32_t n_chunks, n_seen, n_done;
	/*
	 * Open jobs: the reducer adds the chunks of the keys its engine made when it takes
	 * the move, and a chunk it meets later at its first PUSH with the job's token (a
	 * key made meanwhile), up to cap chunks in all (the table's and ch's size).
	 */
	uint32_t cap;
	uint32_t n_open;
	struct sg_dp_move_open *open;
	uint64_t idle_ns, hard_ns;   /* unseen chunks count as idle after idle_ns; all after
					 hard_ns (rounds stuck that long are lost) */
	bool drain;                  /* never commits: rounds from sw on are refused for good */
	volatile bool committed;     /* written by the reducer, read by control threads */
};

/** Key of struct sg_dp_move's hash. */
struct sg_dp_move_key {
	uint32_t job, key, chunk;
};

/* Slow path of sg_dp_move_fwd(). */
int sg_dp_move_route(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len);

/** One transport counter for telemetry and the stats table. */
struct sg_dp_counter {
	const char *name;
	uint64_t value;
	bool drop; /* also reported by /sigma/drops (as <transport>_<name>) */
};

/** Append one counter to @p out (at @p *n, at most @p max) for a transport's counters(). */
static inline void sg_dp_counter_put(struct sg_dp_counter *out, unsigned int *n,
				     unsigned int max, const char *name, uint64_t value, bool drop)
{
	if (*n < max)
		out[(*n)++] = (struct sg_dp_counter){name, value, drop};
}

/** How a pipeline moves bytes. Every function runs on the lcore it is given
 *  (rx, reduce, flush, engine_tx) or on the main thread (the others). */
struct sg_dp_transport {
	const char *name;
	/** Optional: refuse layouts the transport cannot serve, before anything is built;
	 *  may describe the transport's "ports" in @p t for sg_dp_layout_check(). */
	int (*check)(const struct sg_dp_config *c, struct sg_dp_topology *t, char *err,
		     size_t errlen);
	/** Pools, ports, queues, per-reducer reply tables; after the rings and engines. */
	int (*setup)(struct sg_dp_pipeline *p, char *err, size_t errlen);
	/** Undo setup (ports stopped, pools freed); the lcores have returned. */
	void (*teardown)(struct sg_dp_pipeline *p);
	/** Receive up to @p burst; reduce what this lcore owns, hand the rest to the
	 *  owners' rings (sg_dp_owner_of()). @return items received. */
	unsigned int (*rx)(struct sg_dp_lcore *lc, unsigned int burst);
	/** Optional, reducers: receive what the NIC steered to this reducer's own RX
	 *  queues (as rx; a datagram another reducer owns is handed off). */
	unsigned int (*rx_steered)(struct sg_dp_lcore *lc, unsigned int burst);
	/** Reduce @p n items taken from this reducer's ring, then release them. */
	void (*reduce)(struct sg_dp_lcore *lc, void **items, unsigned int n);
	/** Release items never reduced (rings drained at teardown). */
	void (*release)(void **items, unsigned int n);
	/** Send what this lcore buffered. @return frames handed to the device. */
	unsigned int (*flush)(struct sg_dp_lcore *lc);
	/** The engine's output ops (alloc and send required, the others optional): the
	 *  pipeline gives each reducer's engine a copy whose ctx is its struct
	 *  sg_dp_lcore, and keeps payload_csum only while UDP checksums are on. */
	struct sg_dp_tx_ops tx;
	/** Optional: lcore @p idx's transport counters (any thread; a torn read is fine).
	 *  @return how many were written, at most @p max. */
	unsigned int (*counters)(const struct sg_dp_pipeline *p, unsigned int idx,
				 struct sg_dp_counter *out, unsigned int max);
	/** Optional, reducers: every millisecond, beside sg_dp_engine_poll() (@p now in ns). */
	void (*poll)(struct sg_dp_lcore *lc, uint64_t now);
	/** Optional: act on control-channel message @p type (>= SG_DP_MSG_TRANSPORT) on
	 *  lcore @p lc. @return the answer, or -ENOTSUP. */
	int (*ctl)(struct sg_dp_lcore *lc, uint32_t type, uint64_t arg);
	/** Optional, SIGHUP: report the transport's own section's changes.
	 *  @return changes that need a restart. */
	int (*reload)(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report);
	/** Optional, idle = sleep: block until lcore @p lc may have work (input, a hand-off
	 *  to its ring, a wake()) or @p us pass. @return false, at once, if it cannot (an
	 *  input it cannot wait for): then, as without it, the lcore sleeps, backing off
	 *  from 1 us up to @p us. */
	bool (*idle_wait)(struct sg_dp_lcore *lc, unsigned int us);
	/** Optional, any thread: end lcore @p lc's idle_wait() early (cheap when it is not
	 *  waiting). Called after a control request is queued for it and at stop. */
	void (*wake)(struct sg_dp_lcore *lc);
};

/**
 * check() of a transport without ethdev ports (verbs, socket): refuse a layout
 * entry on another port than 0, naming what port 0 is (@p what), and describe
 * that one pseudo-port in @p t: 32 RX queues, a TX queue per lcore.
 * @return 0, or -EINVAL with the entry and its fix in @p err.
 */
int sg_dp_layout_port0(const struct sg_dp_config *c, struct sg_dp_topology *t, const char *type,
		       const char *what, char *err, size_t errlen);

/**
 * A transport's registration: the [transport] type (enum sg_dp_transport_kind)
 * it serves. SG_DP_TRANSPORT_REGISTER() puts one into the linker section
 * `sg_dp_transports` at file scope of the transport's own file, so that adding a
 * transport touches no file of the pipeline's. Programs link the pipeline whole
 * (dp_pipe_dep: link_whole), so every registration built is in the program.
 */
struct sg_dp_transport_reg {
	unsigned int kind;
	const struct sg_dp_transport *tr;
};

#define SG_DP_TRANSPORT_REGISTER(k, t)                                                        \
	static const struct sg_dp_transport_reg sg_dp_transport_reg_##t                       \
		__attribute__((used, section("sg_dp_transports"), aligned(sizeof(void *)))) = \
			{(k), &(t)}

/**
 * The transport registered for @p kind (enum sg_dp_transport_kind), or NULL
 * when this build has none (verbs without -Dverbs).
 */
const struct sg_dp_transport *sg_dp_transport_find(unsigned int kind);

/*
 * A transport's blocking idle wait (memif's wake-up channels, AF_XDP sockets):
 * sg_dp_idle_block() sets @p *sleeping, and unless a control call, the stop or
 * a hand-off is already there (false), blocks in epoll set @p ep at most @p us
 * (true); the set holds @p evfd with data.u32 UINT32_MAX, which it drains.
 * sg_dp_idle_wake(), any thread: write @p evfd if the lcore announced a sleep.
 */
bool sg_dp_idle_block(struct sg_dp_lcore *lc, int *sleeping, int ep, int evfd, unsigned int us);
void sg_dp_idle_wake(int *sleeping, int evfd);

/**
 * Give one datagram to this reducer's engine, from any transport: counts it,
 * and counts its payload as summed when the engine aggregated it.
 * @p dest is the transport's reply address for the engine.
 */
void sg_dp_reduce_one(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len, uint64_t dest,
		      uint64_t now);

/**
 * sg_dp_reduce_one() for a datagram whose UDP checksum is still to be checked:
 * @p csum as sg_dp_engine_rx_csum() takes it. A damaged one counts as a
 * udp_csum drop, not as reduced.
 */
void sg_dp_reduce_one_csum(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len,
			   uint64_t dest, uint64_t now, uint16_t csum);

#define SG_DP_TXB 64          /* frames buffered per port before a TX burst */
#define SG_DP_MAX_BURST 512
#define SG_DP_MAX_XQ 16       /* RX queues an lcore polls beyond its layout's one */
#define SG_DP_IDLE_SPIN 256   /* empty polls before the sleep policy starts sleeping */
/* ... before it blocks in a transport's idle_wait(), which an arrival ends: a long spin
 * only takes the CPU from the workers. Measured on the 2-core VM (socket transport, 1 rtc
 * lcore, 4 workers, 16 MB): sigmad's CPU 510 ms at 256 polls, 380 at 8, 480 at 1 (a
 * wake-up per burst); wall time 84, 77 and 76 ms. */
#define SG_DP_IDLE_SPIN_WAIT 8

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
	uint64_t cur_dest;          /* address of the packet the engine is building */
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

/* Reducer that owns (job, key): the keymap entry of its bucket. */
static inline unsigned int sg_dp_owner_of(const struct sg_dp_pipeline *p, const uint8_t *pl,
				    uint32_t len)
{
	if (p->n_red == 1 || len < SG_DP_HDR_LEN)
		return 0; /* a short datagram is the engine's to count */
	return p->keymap[sg_dp_bucket_of(sg_dp_hdr_job(pl), sg_dp_hdr_key(pl))];
}

/* Reducer to forward this datagram to, SG_DP_MOVE_DROP to refuse it (drain), or -1 to
 * reduce it here (no move: one test). */
static inline int sg_dp_move_fwd(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len)
{
	if (likely(lc->mv == NULL))
		return -1;
	return sg_dp_move_route(lc, pl, len);
}

/* sg_dp_steer*(): this lcore sums the datagram; it was dropped (a drain, counted). */
#define SG_DP_STEER_HERE (-1)
#define SG_DP_STEER_DROPPED (-2)

/*
 * At the key's owner, where a datagram goes: SG_DP_STEER_HERE, the reducer a
 * moving key now belongs to (its new owner sums this round), or
 * SG_DP_STEER_DROPPED for a drained key (counted as draining). Every transport
 * steers through here, so that moves and drains mean one thing.
 */
static inline int sg_dp_steer_move(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len)
{
	int fwd = sg_dp_move_fwd(lc, pl, len);

	if (likely(fwd < 0))
		return SG_DP_STEER_HERE;
	if (fwd == SG_DP_MOVE_DROP) {
		lc->st.drops[SG_DP_ND_DRAINING]++;
		return SG_DP_STEER_DROPPED;
	}
	return fwd;
}

/*
 * Where a datagram this lcore received goes: the reducer index to hand it to
 * (the keymap's owner, or a moving key's new owner), SG_DP_STEER_HERE or
 * SG_DP_STEER_DROPPED (sg_dp_steer_move()). The keymap, not the UDP port it
 * came to, names the owner: a datagram steered to the wrong reducer (a moved
 * key, a stale worker) stays correct.
 */
static inline int sg_dp_steer(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len)
{
	unsigned int o = sg_dp_owner_of(lc->p, pl, len);

	if (lc->p->red[o] != lc)
		return (int)o;
	return sg_dp_steer_move(lc, pl, len);
}

#endif /* SG_DP_INTERNAL_H */
