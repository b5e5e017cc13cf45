/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's XDP program (sigma_xdp.o, docs/sigmad.md "AF_XDP") for a program
 * that opens a net_af_xdp port of its own, such as a worker over libsigma's
 * DPDK transport (sigma-bench cluster --worker af_xdp). The pipeline uses the
 * same functions for its ports. Built with libbpf and clang (SG_HAVE_AF_XDP,
 * which this library's dependency defines); inline stubs otherwise.
 *
 * Order: sg_dp_xdp_eal_args() before rte_eal_init(); once the port's queues
 * are set up the program is on the interface, and sg_dp_xdp_iface_steer()
 * tells it what to steer (it steers nothing before); on failure
 * sg_dp_xdp_explain() says why; sg_dp_xdp_cleanup() after rte_eal_cleanup().
 */
#ifndef SG_DP_AF_XDP_H
#define SG_DP_AF_XDP_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_dp_xdp_cfg.h"

#ifdef SG_HAVE_AF_XDP
/**
 * @p argc / @p argv with every net_af_xdp vdev given xdp_prog=<sigma_xdp.o>
 * (unless it names one) in @p *out, valid until sg_dp_xdp_cleanup(). A
 * sigma_xdp program that a dead process left on the interface (SIGKILL) is
 * detached first. @return the count, or -ENOMEM.
 */
int sg_dp_xdp_eal_args(int argc, char **argv, char ***out);
/**
 * Tell the sigma_xdp program on interface @p iface to steer IPv4 UDP to
 * @p ip_be (network order; 0: any) ports @p udp_port .. + @p nports - 1 to
 * the AF_XDP sockets, with @p flags (SG_DP_XDP_F_ARP: ARP for @p ip_be too),
 * and record this process as its owner.
 * @return 0; -ENODEV: no such interface; -ENOENT: no program attached (yet);
 *         -EPERM: the program attached is another one (its name in @p err);
 *         -errno of the map's update.
 */
int sg_dp_xdp_iface_steer(const char *iface, uint32_t ip_be, uint16_t udp_port, uint16_t nports,
			  uint32_t flags, char *err, size_t errlen);
/**
 * Replace @p err by the cause of net_af_xdp port @p port's failed set-up
 * (@p rc), naming the fix: AF_XDP refused, another XDP program attached, an
 * MTU (@p mtu) that does not fit a frame, the memlock limit. Nothing for
 * other ports.
 */
void sg_dp_xdp_explain(uint16_t port, uint32_t mtu, int rc, char *err, size_t errlen);
/** After rte_eal_cleanup(): detach the programs of ours still attached. */
void sg_dp_xdp_cleanup(void);
#else
static inline int sg_dp_xdp_eal_args(int argc, char **argv, char ***out)
{
	*out = argv;
	return argc;
}
static inline int sg_dp_xdp_iface_steer(const char *iface, uint32_t ip_be, uint16_t udp_port,
					uint16_t nports, uint32_t flags, char *err, size_t errlen)
{
	(void)iface, (void)ip_be, (void)udp_port, (void)nports, (void)flags, (void)err;
	(void)errlen;
	return -ENOTSUP;
}
static inline void sg_dp_xdp_explain(uint16_t port, uint32_t mtu, int rc, char *err,
				     size_t errlen)
{
	(void)port, (void)mtu, (void)rc, (void)err, (void)errlen;
}
static inline void sg_dp_xdp_cleanup(void)
{
}
#endif

#endif /* SG_DP_AF_XDP_H */
