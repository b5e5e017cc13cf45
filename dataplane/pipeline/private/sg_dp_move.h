/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Key moves: buckets leaving one reducer (built by sg_dp_control.c, run by
 * sg_dp_lcore_ctl.c). Keys are hashed to one of SG_BUCKETS buckets
 * (sg_dp_bucket_of(), sg_dp_proto.h); p->keymap sends a bucket to a reducer.
 * The reducer that owns the buckets' rounds today sequences the move: a
 * chunk's first push seen after the move starts, of round p, fixes its switch round s = p + 2 (the
 * reducer's own round is p - 1, p or p + 1). Rounds before s stay here;
 * rounds from s on are forwarded to the new owner, which opens them fresh.
 * Once every chunk has been seen at s + 1 (its new owner finished round s, so
 * nobody can ask for an older result) the keymap entry flips and dispatchers
 * send straight to the new owner; stragglers are forwarded.
 */
#ifndef SG_DP_MOVE_H
#define SG_DP_MOVE_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_branch_prediction.h>

#include "sg_types.h"
#include "sg_dp_lcore.h"

struct rte_hash;

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

/* Reducer to forward this datagram to, SG_DP_MOVE_DROP to refuse it (drain), or -1 to
 * reduce it here (no move: one test). */
static inline int sg_dp_move_fwd(struct sg_dp_lcore *lc, const uint8_t *pl, uint32_t len)
{
	if (likely(lc->mv == NULL))
		return -1;
	return sg_dp_move_route(lc, pl, len);
}

#endif /* SG_DP_MOVE_H */
