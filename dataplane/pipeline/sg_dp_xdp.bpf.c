// SPDX-License-Identifier: BSD-3-Clause
/*
 * sigmad's XDP program for net_af_xdp ports (docs/sigmad.md, "AF_XDP"). DPDK's
 * af_xdp PMD loads it (xdp_prog= devarg) and puts each queue's AF_XDP socket in
 * xsks_map under the queue's index. IPv4 UDP datagrams (not fragments) to
 * Sigma's ports go to the socket of the queue they arrived on; everything else
 * (ARP, ICMP, other UDP and TCP) goes on to the kernel, which keeps the
 * interface's address and answers ARP for it. Until sigmad writes sigma_cfg
 * the program steers nothing. A libsigma worker on an address of its own (one
 * the kernel does not have) also asks for the ARP of that address
 * (SG_DP_XDP_F_ARP): only it answers there.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "sg_dp_xdp_cfg.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sg_dp_xdp_cfg);
} sigma_cfg SEC(".maps");

/* an ARP packet for IPv4 over Ethernet (linux/if_arp.h pulls in libc's headers) */
struct sg_arp {
	__be16 hrd, pro;
	__u8 hln, pln;
	__be16 op;
	__u8 sha[6], spa[4], tha[6], tpa[4];
} __attribute__((packed));

/* ARP (Ethernet, IPv4) whose target is the steered address, where sigma_cfg asks */
static __always_inline int steer_arp(struct xdp_md *ctx, void *l3, void *end)
{
	struct sg_arp *ah = l3;
	struct sg_dp_xdp_cfg *cfg;
	__u32 zero = 0, tip;

	if ((void *)(ah + 1) > end || ah->hrd != bpf_htons(1 /* ARPHRD_ETHER */) ||
	    ah->pro != bpf_htons(ETH_P_IP) || ah->hln != 6 || ah->pln != 4)
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&sigma_cfg, &zero);
	if (cfg == NULL || !(cfg->flags & SG_DP_XDP_F_ARP) || cfg->ip == 0)
		return XDP_PASS;
	__builtin_memcpy(&tip, ah->tpa, 4);
	if (tip != cfg->ip)
		return XDP_PASS;
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int sigma_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct sg_dp_xdp_cfg *cfg;
	struct udphdr *udp;
	struct iphdr *ip;
	__u32 zero = 0;
	__u16 off;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return steer_arp(ctx, eth + 1, end);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5 ||
	    (ip->frag_off & bpf_htons(0x3fff)) != 0)
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&sigma_cfg, &zero);
	if (cfg == NULL || cfg->nports == 0 || (cfg->ip != 0 && cfg->ip != ip->daddr))
		return XDP_PASS;
	off = (__u16)(bpf_ntohs(udp->dest) - bpf_ntohs(cfg->port));
	if (off >= cfg->nports)
		return XDP_PASS;
	/* no socket on this queue: the kernel gets it (and answers port unreachable) */
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "BSD";
