// SPDX-License-Identifier: BSD-3-Clause
/*
 * sigmad's XDP program for net_af_xdp ports (docs/sigmad.md, "AF_XDP"). DPDK's
 * af_xdp PMD loads it (xdp_prog= devarg) and puts each queue's AF_XDP socket in
 * xsks_map under the queue's index. IPv4 UDP datagrams (not fragments) to
 * Sigma's ports go to the socket of the queue they arrived on; everything else
 * (ARP, ICMP, other UDP and TCP) goes on to the kernel, which keeps the
 * interface's address and answers ARP for it. Until sigmad writes sigma_cfg
 * the program steers nothing.
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

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
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
