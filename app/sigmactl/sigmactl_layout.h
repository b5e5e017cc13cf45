/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl layout suggest: which lcore is the bottleneck, and the layout or
 * keymap change that would even the load (docs/control.md, "sigmactl layout
 * suggest"). It only prints commands; it never changes the node.
 */
#ifndef SIGMACTL_LAYOUT_H
#define SIGMACTL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_types.h"

/** The most lcores a node reports (the control server's SG_CTL_MAX_LCORES). */
#define LAY_MAX_LCORES 128

/** An lcore at or above this busy share is a bottleneck. */
#define LAY_HOT 0.70
/** A keymap change is suggested only if it lowers the busiest reducer this much. */
#define LAY_MIN_GAIN 0.10

/** One lcore of the layout, as measured. */
struct lay_lcore {
	uint32_t lcore;
	enum sg_role role;
	int32_t port, queue; /**< what it receives (-1: none) */
	double busy;         /**< busy share over the measurement, 0..1 */
	int reducer;         /**< its reducer index, or -1 */
};

/** What the planner reads: the layout, the keymap and the measured lcores. */
struct lay_in {
	struct lay_lcore lc[LAY_MAX_LCORES];
	unsigned int n;
	unsigned int n_reducers;
	uint16_t keymap[SG_BUCKETS]; /**< bucket -> reducer index */
};

enum lay_kind {
	LAY_NOTHING,     /**< no lcore is a bottleneck */
	LAY_KEYMAP,      /**< move buckets between reducers: `layout set keymap=` (live) */
	LAY_ADD_REDUCER, /**< every reducer is busy: one more (restart) */
	LAY_ADD_RX,      /**< receiving is the bottleneck: one more RX queue and lcore (restart) */
	LAY_BALANCED,    /**< busy, but the reducers are even and no restart layout helps */
};

/** The planner's answer. */
struct lay_advice {
	int bottleneck;   /**< index in lay_in.lc of the busiest lcore, or -1 (no lcores) */
	enum lay_kind kind;
	char command[1536]; /**< the exact command line to run ("" for none) */
	char why[512];      /**< one sentence: what was seen and what the command does */
	uint16_t keymap[SG_BUCKETS];      /**< LAY_KEYMAP: the suggested keymap; else the node's */
	unsigned int moved;               /**< ... buckets it moves */
	double before[LAY_MAX_LCORES];    /**< per reducer index: busy now */
	double after[LAY_MAX_LCORES];     /**< ... and as estimated after the change */
};

/**
 * Plan from @p in for the node @p target (printed in the commands).
 * Estimate: a reducer's busy share is spread evenly over the buckets it owns.
 * @return 0, or -EINVAL if @p in is inconsistent (a keymap entry or a
 * reducer index out of range, more reducers than lcores).
 */
int lay_plan(const struct lay_in *in, const char *target, struct lay_advice *out);

/** How `layout suggest` reaches its node. */
struct lay_conf {
	const char *target;
	const uint8_t *secret; /**< for a TCP target, else NULL */
	size_t secret_len;
	uint32_t timeout_ms;
	bool json;
};

/**
 * Run `layout suggest [--interval S]` (@p argc, @p argv: "suggest" and the
 * words after it). @return the exit status: 0, 1 (the node cannot be reached, has no
 * lcores, or answers what cannot be read; the message printed) or 2 (usage).
 */
int sigmactl_layout_suggest(const struct lay_conf *lc, int argc, char **argv);

#endif /* SIGMACTL_LAYOUT_H */
