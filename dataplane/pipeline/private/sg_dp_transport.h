/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport seam: the lcore loop (sg_dp_pipeline.c) moves bytes only
 * through a struct sg_dp_transport: the DPDK ethdev transport (sg_dp_eth.c;
 * its items are mbufs), the kernel UDP socket one (sg_dp_sock.c; its items
 * are copies of pushes for another reducer, its engine output goes out with
 * sendmmsg) or, in builds with verbs, the rdma-core one (sg_dp_verbs_tp.c;
 * its items are copies of pushes for another reducer, its engine output
 * posts sends on the reducer's own QP). Every transport steers a datagram
 * with sg_dp_steer() or sg_dp_steer_move() and gives it to the engine with
 * sg_dp_reduce_one(), all here.
 */
#ifndef SG_DP_TRANSPORT_H
#define SG_DP_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_branch_prediction.h>

#include "sg_dp_config.h"
#include "sg_dp_engine.h"
#include "sg_dp_lcore.h"
#include "sg_dp_move.h"
#include "sg_dp_proto.h"

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

/* Count what the engine did with one datagram (@p rc from sg_dp_engine_rx*()). */
static inline void sg_dp_reduced(struct sg_dp_lcore *lc, int rc, uint32_t len)
{
	if (rc == -EILSEQ) { /* a damaged datagram never reached the engine */
		lc->st.drops[SG_DP_ND_UDP_CSUM]++;
		return;
	}
	lc->st.reduced_pkts++;
	if (rc < 0)
		lc->st.drops[SG_DP_ND_PROTO]++;
	else if (rc & SG_DP_USED_SUMMED) /* not a kept result resent, nor a NACK */
		lc->st.bytes_summed += len - SG_DP_HDR_LEN;
}

/**
 * Give one datagram to this reducer's engine, from any transport: counts it,
 * and counts its payload as summed when the engine aggregated it.
 * @p dest is the transport's reply address for the engine.
 */
static inline void sg_dp_reduce_one(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len,
				    uint64_t dest, uint64_t now)
{
	sg_dp_reduced(lc, sg_dp_engine_rx(lc->eng, pl, len, dest, now), len);
}

/**
 * sg_dp_reduce_one() for a datagram whose UDP checksum is still to be checked:
 * @p csum as sg_dp_engine_rx_csum() takes it. A damaged one counts as a
 * udp_csum drop, not as reduced.
 */
static inline void sg_dp_reduce_one_csum(struct sg_dp_lcore *lc, const uint8_t *pl,
					 uint32_t len, uint64_t dest, uint64_t now,
					 uint16_t csum)
{
	sg_dp_reduced(lc, sg_dp_engine_rx_csum(lc->eng, pl, len, dest, now, csum), len);
}

/* Reducer that owns (job, key): the keymap entry of its bucket. */
static inline unsigned int sg_dp_owner_of(const struct sg_dp_pipeline *p, const uint8_t *pl,
				    uint32_t len)
{
	if (p->n_red == 1 || len < SG_DP_HDR_LEN)
		return 0; /* a short datagram is the engine's to count */
	return p->keymap[sg_dp_bucket_of(sg_dp_hdr_job(pl), sg_dp_hdr_key(pl))];
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

#endif /* SG_DP_TRANSPORT_H */
