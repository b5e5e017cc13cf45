/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net_af_xdp ports (sg_dp_xdp.c; docs/sigmad.md, "AF_XDP"), in a build with
 * libbpf and clang (SG_HAVE_AF_XDP); no-ops otherwise. What other programs
 * use too (sg_dp_xdp_eal_args(), sg_dp_xdp_explain(), sg_dp_xdp_cleanup())
 * is in the public sg_dp_af_xdp.h.
 * sg_dp_xdp_port_started(): tell @p port's program what to steer (ip in
 * network order, UDP ports @p udp_port .. + @p nports - 1); 0 for other
 * ports, or -errno with @p err.
 */
#ifndef SG_DP_XDP_H
#define SG_DP_XDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_dp_af_xdp.h"

struct sg_dp_lcore;
struct sg_dp_pipeline;

/* what XDP keeps in front of each frame in an AF_XDP buffer (XDP_PACKET_HEADROOM) */
#define SG_DP_XDP_HEADROOM 256
#ifdef SG_HAVE_AF_XDP
bool sg_dp_xdp_port(uint16_t port);
int sg_dp_xdp_port_started(uint16_t port, uint32_t ip_be, uint16_t udp_port, uint16_t nports,
			   char *err, size_t errlen);
/* --idle sleep: block on the AF_XDP sockets (sg_dp_xdp.c): note the socket that
 * @p queue's set-up made; after every port started, build each lcore's epoll
 * set (only where all its queues are AF_XDP sockets); idle_wait and wake as
 * struct sg_dp_transport's; teardown closes the sets. */
void sg_dp_xdp_queue_set_up(uint16_t port, uint16_t queue);
void sg_dp_xdp_wait_setup(struct sg_dp_pipeline *p);
bool sg_dp_xdp_idle_wait(struct sg_dp_lcore *lc, unsigned int us);
void sg_dp_xdp_wake(struct sg_dp_lcore *lc);
void sg_dp_xdp_wait_teardown(void);
#else
static inline bool sg_dp_xdp_port(uint16_t port)
{
	(void)port;
	return false;
}
static inline int sg_dp_xdp_port_started(uint16_t port, uint32_t ip_be, uint16_t udp_port,
					 uint16_t nports, char *err, size_t errlen)
{
	(void)port, (void)ip_be, (void)udp_port, (void)nports, (void)err, (void)errlen;
	return 0;
}
static inline void sg_dp_xdp_queue_set_up(uint16_t port, uint16_t queue)
{
	(void)port, (void)queue;
}
static inline void sg_dp_xdp_wait_setup(struct sg_dp_pipeline *p)
{
	(void)p;
}
static inline bool sg_dp_xdp_idle_wait(struct sg_dp_lcore *lc, unsigned int us)
{
	(void)lc, (void)us;
	return false;
}
static inline void sg_dp_xdp_wake(struct sg_dp_lcore *lc)
{
	(void)lc;
}
static inline void sg_dp_xdp_wait_teardown(void)
{
}
#endif

#endif /* SG_DP_XDP_H */
