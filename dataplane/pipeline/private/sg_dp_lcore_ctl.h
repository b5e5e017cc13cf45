/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lcore control channel's messages (sg_dp_lcore_ctl.c): what control
 * threads ask an lcore through its struct sg_dp_chan (sg_dp_chan.h), and how.
 */
#ifndef SG_DP_LCORE_CTL_H
#define SG_DP_LCORE_CTL_H

#include <stdint.h>

struct sg_dp_chan_msg;
struct sg_dp_key;
struct sg_dp_lcore;
struct sg_dp_pipeline;

/* An lcore answers its control channel every this many loop iterations: often
 * enough for a prompt answer, rare enough to cost nothing per burst. */
#define SG_DP_CTL_POLL_EVERY 64
/* Channel messages of sigmad's own (the control module's types are below 0x100). */
#define SG_DP_MSG_JOB_ADD 0x100    /* arg[0]: const struct sg_dp_job_conf * */
#define SG_DP_MSG_JOB_REMOVE 0x101 /* arg[0]: job id */
#define SG_DP_MSG_MOVE_SET 0x102   /* arg[0]: struct sg_dp_move * (or 0), owned by p->mv */
#define SG_DP_MSG_KEYS_RELEASE 0x103 /* arg[0]: mask of buckets coming back to this reducer */
#define SG_DP_MSG_JOB_STATS 0x104  /* per-job counters into the engine's snapshot table */
#define SG_DP_MSG_KEYS_ADD 0x105   /* arg[0]: const struct sg_dp_keys_add * (failover) */
#define SG_DP_MSG_JOB_LATE 0x106   /* arg[0]: job id, arg[1]: struct sg_late * to fill */

/* SG_DP_MSG_KEYS_ADD's argument: keys for a fixed job (sg_dp_engine_add_keys()). */
struct sg_dp_keys_add {
	uint32_t job;
	const struct sg_dp_key *keys;
	uint32_t n;
};
/* From here on, the transport's own messages (struct sg_dp_transport.ctl). */
#define SG_DP_MSG_TRANSPORT 0x180

/** Lcore side of the control channel (sg_dp_lcore_ctl.c): act on one message. */
int sg_dp_lcore_ctl(void *arg, struct sg_dp_chan_msg *m);

/**
 * Control side: send one message to lcore @p i of the layout and wait for its
 * answer. Serialised by p->ctl_lock, so the agent's thread and the telemetry
 * thread may both call it (each channel has one producer at a time).
 * @return the lcore's answer, or -ETIMEDOUT / -ENOBUFS.
 */
int sg_dp_lcore_call(struct sg_dp_pipeline *p, unsigned int i, uint32_t type, uint64_t arg0);

/** Every SG_DP_CTL_POLL_EVERY loop iterations: answer the channel, advance a key move. */
unsigned int sg_dp_lcore_ctl_tick(struct sg_dp_lcore *lc);

#endif /* SG_DP_LCORE_CTL_H */
