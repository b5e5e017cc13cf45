/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What sigmad tells its XDP program (sg_dp_xdp.bpf.c) through the program's
 * one-entry array map "sigma_cfg": the datagrams to steer to the AF_XDP
 * sockets. Shared by the BPF object and sigmad (sg_dp_xdp.c); fixed-size
 * types only, all fields in network byte order except @p pid and @p nports.
 */
#ifndef SG_DP_XDP_CFG_H
#define SG_DP_XDP_CFG_H

#include <linux/types.h>

/* the program's name as the kernel keeps it (at most 15 characters) */
#define SG_DP_XDP_PROG_NAME "sigma_xdp"
#define SG_DP_XDP_CFG_MAP "sigma_cfg"
/* flags: also steer ARP whose target address is @p ip (an address that only the
 * AF_XDP socket's owner answers for, not the kernel: a libsigma worker's) */
#define SG_DP_XDP_F_ARP 1u

struct sg_dp_xdp_cfg {
	__be32 ip;	 /* IPv4 destination to steer; 0: any */
	__be16 port;	 /* first UDP destination port to steer */
	__u16 nports;	 /* ports port .. port + nports - 1; 0: steer nothing */
	__u32 pid;	 /* the process (sigmad, a worker) that attached the program */
	__u32 flags;	 /* SG_DP_XDP_F_*; 0 for sigmad */
};

#endif
