/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the ethdev transport (sg_dp_eth.c) gives the pipeline's other files:
 * the port gate (the pipeline's reload and memif's guard) and the reducer
 * steering rules (white-box tested).
 */
#ifndef SG_DP_ETH_H
#define SG_DP_ETH_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_flow.h>

struct sg_dp_pipeline;

/**
 * ethdev: stop (@p open false) or resume every lcore's use of @p port. When a
 * stop returns, no lcore is inside an RX or TX burst on the port, nor enters
 * one until it resumes (it waits for each running lcore's next loop: see
 * p->rcu); frames buffered for the port meanwhile are dropped (port_down).
 * Any thread but an lcore's.
 */
void sg_dp_eth_port_gate(struct sg_dp_pipeline *p, uint16_t port, bool open);

/**
 * Reducer steering rule "eth / ipv4 dst is <ip> / udp dst is <udp_port + 1 + r> ->
 * queue <q>", as rte_flow_validate() and rte_flow_create() take it. It points
 * into itself: fill it in place with sg_dp_steer_rule() and do not copy it.
 */
struct sg_dp_flow_rule {
	struct rte_flow_attr attr;
	struct rte_flow_item pattern[4];  /* eth, ipv4, udp, end */
	struct rte_flow_action action[2]; /* queue, end */
	struct rte_flow_item_ipv4 ip_spec, ip_mask;
	struct rte_flow_item_udp udp_spec, udp_mask;
	struct rte_flow_action_queue queue;
};

/** Fill @p r for reducer @p reducer of a node at @p ip (network order) and @p udp_port
 *  (host order): its datagrams go to RX queue @p queue. */
void sg_dp_steer_rule(struct sg_dp_flow_rule *r, uint32_t ip, uint16_t udp_port,
		      unsigned int reducer, uint16_t queue);

#endif /* SG_DP_ETH_H */
