/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma control plane: membership. Heartbeat-based liveness of the summation
 * nodes, and failure of in-flight rounds on a lost node with a clear error.
 * Part of the control server's library (sg_ctl_server), whose methods
 * node_heartbeat, nodes_list and node_remove read it (docs/control.md).
 * Logging uses the rte_log type "sigma.control".
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno.
 */
#ifndef SG_CTL_MEMBERS_H
#define SG_CTL_MEMBERS_H

#include <stdbool.h>
#include <stdint.h>

#include "sg_ctl_place.h"
#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One node's state as the membership tracker knows it. */
struct sg_ctl_member {
	char name[SG_NAME_MAX];
	enum sg_node_kind kind;
	double gbps;
	bool alive;
	uint64_t last_heartbeat_ns; /**< clock of the caller (monotonic ns) */
};

/** Why an in-flight round failed: handed to the failure callback. */
struct sg_ctl_round_failure {
	uint32_t job;
	uint64_t key;
	uint64_t round;
	const char *node;	 /**< the lost node's name */
	int error;		 /**< -EHOSTDOWN */
	const char *message;	 /**< human-readable: names node, job, key, round, silence */
};

/** Called once per in-flight round on a node declared lost. */
typedef void (*sg_ctl_round_failed_cb)(void *arg, const struct sg_ctl_round_failure *f);

struct sg_ctl_members;

/**
 * Create a tracker. A node is lost when no heartbeat came for @p timeout_ns.
 * @p max_nodes and @p max_rounds bound memory (nothing grows afterwards).
 * @p cb may be NULL. Not thread-safe: one thread (the control thread) owns it.
 */
struct sg_ctl_members *sg_ctl_members_create(uint64_t timeout_ns, unsigned int max_nodes,
					     unsigned int max_rounds, sg_ctl_round_failed_cb cb,
					     void *cb_arg);
/** Free a tracker (NULL is fine). */
void sg_ctl_members_destroy(struct sg_ctl_members *m);

/**
 * Record a heartbeat from @p name at @p now_ns; adds the node if new. A lost
 * node that heartbeats again becomes alive again (and bumps the epoch).
 * @return 0; -EINVAL for a bad name/kind/gbps; -ENOSPC when full.
 */
int sg_ctl_members_heartbeat(struct sg_ctl_members *m, const char *name,
			     enum sg_node_kind kind, double gbps, uint64_t now_ns);

/**
 * Remove a node on purpose; fails the rounds recorded for it with
 * sg_ctl_members_round_begin() (the control server records none). -ENOENT if unknown.
 */
int sg_ctl_members_remove(struct sg_ctl_members *m, const char *name);

/**
 * Declare lost every alive node silent for longer than the timeout, fail its
 * in-flight rounds through the callback, and log it.
 * @return the number of nodes newly lost (>= 0).
 */
int sg_ctl_members_check(struct sg_ctl_members *m, uint64_t now_ns);

/** Membership epoch: bumped on every change of the alive set (a new placement is due). */
uint64_t sg_ctl_members_epoch(const struct sg_ctl_members *m);

/** Copy up to @p cap members into @p out. @return the total number of members. */
unsigned int sg_ctl_members_list(const struct sg_ctl_members *m, struct sg_ctl_member *out,
				 unsigned int cap);

/**
 * Fill @p out (capacity @p cap) with placement nodes for the current
 * membership; names point into the tracker and stay valid until the next
 * heartbeat/remove call. @return the number of nodes, or -ENOSPC.
 */
int sg_ctl_members_place_nodes(const struct sg_ctl_members *m, struct sg_ctl_place_node *out,
			       unsigned int cap);

/**
 * Note that round @p round of @p key of job @p job is in flight on @p node.
 * @return a handle >= 0 for sg_ctl_members_round_end(); -ENOENT if the node
 *         is unknown; -EHOSTDOWN if it is lost (the caller must re-place);
 *         -ENOSPC if max_rounds are in flight.
 */
int sg_ctl_members_round_begin(struct sg_ctl_members *m, const char *node, uint32_t job,
			       uint64_t key, uint64_t round);
/** The round completed normally. -EINVAL for a stale or bad handle. */
int sg_ctl_members_round_end(struct sg_ctl_members *m, int handle);

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_MEMBERS_H */
