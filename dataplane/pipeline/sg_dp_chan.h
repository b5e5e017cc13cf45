/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma lcore channels: request/response rte_rings through which a control
 * thread sends commands (idle policy, counters, sigmad's own from 0x100) to
 * dataplane lcores. Lcores poll them between bursts; nobody takes a lock.
 * A library of its own (sg_dp_chan: DPDK's rte_ring, no EAL needed), which
 * sigmad's pipeline links; control threads (sigmad's agent) call into it.
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno.
 */
#ifndef SG_DP_CHAN_H
#define SG_DP_CHAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Commands the control thread sends to dataplane lcores. */
enum sg_dp_chan_msg_type {
	SG_DP_CHAN_MSG_NOP = 0,	     /**< ping: the lcore answers 0 */
	SG_DP_CHAN_MSG_IDLE_POLICY = 2,  /**< change the lcore's idle policy */
	SG_DP_CHAN_MSG_STATS = 4,	     /**< snapshot counters */
	/* 1 and 3 were a keymap set and a drain that no lcore handled: sigmad moves
	 * keys with its own messages (from 0x100) and drains in the agent. */
};

/** One message. Requests and responses are the same structure. */
struct sg_dp_chan_msg {
	uint32_t type;	/**< enum sg_dp_chan_msg_type */
	uint32_t seq;	/**< set by sg_dp_chan_call(); echoed by the lcore */
	int32_t result; /**< response: 0 or -errno */
	uint32_t pad;
	uint64_t arg[4]; /**< type-specific; pointers travel as uint64_t and stay owned by the sender */
};

struct sg_dp_chan;

/**
 * Create a channel: two single-producer single-consumer rte_rings of
 * @p size slots (a power of two >= 2) in memory from the C heap, so it works
 * without hugepages and without rte_eal_init().
 */
struct sg_dp_chan *sg_dp_chan_create(const char *name, unsigned int size);
/** Free a channel (NULL is fine); nobody may be using it. */
void sg_dp_chan_destroy(struct sg_dp_chan *c);

/**
 * Control side: send @p req and wait up to @p timeout_us for the lcore's
 * answer, which is copied into @p resp. Responses to earlier calls that timed
 * out are discarded by sequence number.
 * @return 0 (resp->result holds the lcore's answer); -ETIMEDOUT; -ENOBUFS if
 *         the request ring is full.
 */
int sg_dp_chan_call(struct sg_dp_chan *c, const struct sg_dp_chan_msg *req,
		     struct sg_dp_chan_msg *resp, uint64_t timeout_us);

/** Lcore-side handler: act on @p msg; the return value goes back as msg->result. */
typedef int (*sg_dp_chan_handler)(void *arg, struct sg_dp_chan_msg *msg);

/**
 * Lcore side: handle at most @p max pending requests without blocking or
 * allocating. @return the number handled.
 */
unsigned int sg_dp_chan_poll(struct sg_dp_chan *c, sg_dp_chan_handler h, void *arg,
			      unsigned int max);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_CHAN_H */
