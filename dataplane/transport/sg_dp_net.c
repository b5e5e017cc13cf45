/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ethernet, ARP, IPv4 and UDP, handled by sigmad itself: no kernel stack on
 * the data path. Pure functions over a frame buffer so tests can feed them
 * anything.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sys/socket.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_udp.h>

#include "sg_dp_net.h"
#include "sg_sum.h"

static const char *const ndrop_names[SG_DP_ND_COUNT] = {
	[SG_DP_ND_SHORT] = "short",         [SG_DP_ND_MULTISEG] = "multiseg",
	[SG_DP_ND_MBUF_PRIV] = "mbuf_priv",
	[SG_DP_ND_ETHERTYPE] = "ethertype", [SG_DP_ND_ARP_BAD] = "arp_bad",
	[SG_DP_ND_ARP_OTHER] = "arp_other", [SG_DP_ND_IP_HDR] = "ip_header",
	[SG_DP_ND_IP_CSUM] = "ip_csum",     [SG_DP_ND_IP_FRAG] = "ip_fragment",
	[SG_DP_ND_IP_DST] = "ip_dst",       [SG_DP_ND_IP_PROTO] = "ip_proto",
	[SG_DP_ND_UDP_PORT] = "udp_port",   [SG_DP_ND_UDP_LEN] = "udp_len",
	[SG_DP_ND_UDP_CSUM] = "udp_csum",   [SG_DP_ND_PROTO] = "proto",
	[SG_DP_ND_RING_FULL] = "ring_full", [SG_DP_ND_TX_FULL] = "tx_full",
	[SG_DP_ND_NO_MBUF] = "no_mbuf",       [SG_DP_ND_PEER_TABLE] = "peer_table",
	[SG_DP_ND_NO_PEER] = "no_peer", [SG_DP_ND_DRAINING] = "draining",
	[SG_DP_ND_PORT_DOWN] = "port_down",
};

const char *sg_dp_ndrop_name(enum sg_dp_ndrop d)
{
	return (unsigned int)d < SG_DP_ND_COUNT ? ndrop_names[d] : "unknown";
}

/*
 * One's-complement sum over native-order 16-bit words, as rte_raw_cksum()
 * gives it, of @p s (any sum of such words) and @p len bytes at @p buf,
 * folded to 16 bits. The bytes go through the summation library's vector
 * kernel: DPDK's byte-pair loop cost ~1.5 us per jumbo frame, a scalar loop
 * over 32-bit words ~16,000 instructions (docs/performance.md).
 */
static uint32_t raw_sum(const void *buf, uint32_t len, uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return sg_sum_csum_add((uint16_t)s, sg_sum_csum(buf, len));
}

/* Folded sum of the UDP pseudo-header and the first @p n bytes of the datagram (checksum
 * field included); @p ulen is its UDP length. */
static uint16_t udp_sum(const struct rte_ipv4_hdr *ip, const struct rte_udp_hdr *udp,
			uint32_t ulen, uint32_t n)
{
	uint64_t ph = (uint64_t)ip->src_addr + ip->dst_addr +
		      rte_cpu_to_be_16((uint16_t)IPPROTO_UDP) + rte_cpu_to_be_16((uint16_t)ulen);

	return (uint16_t)raw_sum(udp, n, ph);
}

static enum sg_dp_rx_kind drop(enum sg_dp_ndrop *reason, enum sg_dp_ndrop r)
{
	*reason = r;
	return SG_DP_RX_DROP;
}

static enum sg_dp_rx_kind classify_arp(const struct sg_dp_net *net, struct rte_ether_hdr *eth,
				       uint32_t len, enum sg_dp_ndrop *reason)
{
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	uint32_t sip;

	/* an Ethernet header with an ARP ethertype and no whole ARP packet after it */
	if (len < sizeof(*eth) + sizeof(*arp))
		return drop(reason, SG_DP_ND_ARP_BAD);
	if (arp->arp_hardware != RTE_BE16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != RTE_BE16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4)
		return drop(reason, SG_DP_ND_ARP_BAD);
	if (arp->arp_opcode != RTE_BE16(RTE_ARP_OP_REQUEST) || arp->arp_data.arp_tip != net->ip)
		return drop(reason, SG_DP_ND_ARP_OTHER);
	/* turn the request into the reply in place: no allocation on this path */
	sip = arp->arp_data.arp_sip;
	arp->arp_opcode = RTE_BE16(RTE_ARP_OP_REPLY);
	arp->arp_data.arp_tha = arp->arp_data.arp_sha;
	arp->arp_data.arp_tip = sip;
	arp->arp_data.arp_sha = net->mac;
	arp->arp_data.arp_sip = net->ip;
	eth->dst_addr = eth->src_addr;
	eth->src_addr = net->mac;
	return SG_DP_RX_ARP;
}

/* sg_dp_net_classify(), and sg_dp_net_classify_csum() when @p csum is not NULL. */
static enum sg_dp_rx_kind classify(const struct sg_dp_net *net, void *frame, uint32_t len,
				   uint64_t ol_flags, struct sg_dp_peer *peer, uint32_t *off,
				   uint32_t *plen, uint32_t *csum, enum sg_dp_ndrop *reason)
{
	struct rte_ether_hdr *eth = frame;
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	uint32_t ihl, tot, ulen, dport, base;

	if (len < sizeof(*eth))
		return drop(reason, SG_DP_ND_SHORT);
	if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP))
		return classify_arp(net, eth, len, reason);
	if (eth->ether_type != RTE_BE16(RTE_ETHER_TYPE_IPV4))
		return drop(reason, SG_DP_ND_ETHERTYPE);
	if (len < sizeof(*eth) + sizeof(*ip))
		return drop(reason, SG_DP_ND_SHORT);
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	ihl = (ip->version_ihl & 0xf) * 4u;
	tot = rte_be_to_cpu_16(ip->total_length);
	if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(*ip) || tot < ihl)
		return drop(reason, SG_DP_ND_IP_HDR);
	/* frames may carry Ethernet padding, never fewer bytes than IP says: a total
	 * length past the frame is a bad IP header, as a total length below IHL is */
	if (sizeof(*eth) + tot > len)
		return drop(reason, SG_DP_ND_IP_HDR);
	if ((ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD)
		return drop(reason, SG_DP_ND_IP_CSUM);
	if ((ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) != RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
	    rte_raw_cksum(ip, ihl) != 0xffff)
		return drop(reason, SG_DP_ND_IP_CSUM);
	if (ip->fragment_offset & RTE_BE16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
		return drop(reason, SG_DP_ND_IP_FRAG);
	if (ip->dst_addr != net->ip)
		return drop(reason, SG_DP_ND_IP_DST);
	if (ip->next_proto_id != IPPROTO_UDP)
		return drop(reason, SG_DP_ND_IP_PROTO);
	if (tot < ihl + sizeof(*udp))
		return drop(reason, SG_DP_ND_UDP_LEN);
	udp = (struct rte_udp_hdr *)((char *)ip + ihl);
	dport = rte_be_to_cpu_16(udp->dst_port);
	base = rte_be_to_cpu_16(net->udp_port);
	if (dport < base || dport > base + net->steer_ports)
		return drop(reason, SG_DP_ND_UDP_PORT);
	ulen = rte_be_to_cpu_16(udp->dgram_len);
	if (ulen != tot - ihl)
		return drop(reason, SG_DP_ND_UDP_LEN);
	if (csum != NULL)
		*csum = SG_DP_CSUM_NONE;
	if (net->udp_checksum && udp->dgram_cksum != 0 &&
	    (ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) != RTE_MBUF_F_RX_L4_CKSUM_GOOD) {
		if ((ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD)
			return drop(reason, SG_DP_ND_UDP_CSUM);
		if (csum != NULL) /* the payload's sum is the reducer's, in its summing pass */
			*csum = udp_sum(ip, udp, ulen, (uint32_t)sizeof(*udp));
		else if (udp_sum(ip, udp, ulen, ulen) != 0xffff)
			return drop(reason, SG_DP_ND_UDP_CSUM);
	}
	peer->mac = eth->src_addr;
	peer->ip = ip->src_addr;
	peer->udp_port = udp->src_port;
	*off = (uint32_t)((char *)(udp + 1) - (char *)frame);
	*plen = ulen - (uint32_t)sizeof(*udp);
	return SG_DP_RX_UDP;
}

enum sg_dp_rx_kind sg_dp_net_classify(const struct sg_dp_net *net, void *frame, uint32_t len,
				      uint64_t ol_flags, struct sg_dp_peer *peer, uint32_t *off,
				      uint32_t *plen, enum sg_dp_ndrop *reason)
{
	return classify(net, frame, len, ol_flags, peer, off, plen, NULL, reason);
}

enum sg_dp_rx_kind sg_dp_net_classify_csum(const struct sg_dp_net *net, void *frame,
					   uint32_t len, uint64_t ol_flags,
					   struct sg_dp_peer *peer, uint32_t *off, uint32_t *plen,
					   uint32_t *csum, enum sg_dp_ndrop *reason)
{
	return classify(net, frame, len, ol_flags, peer, off, plen, csum, reason);
}

uint32_t sg_dp_net_sum(const void *buf, uint32_t len)
{
	return sg_sum_csum(buf, len);
}

void sg_dp_net_build_seg(const struct sg_dp_net *net, const struct sg_dp_peer *peer, void *frame,
			 uint32_t hlen, uint32_t plen, uint32_t tail_sum, uint64_t *ol_flags)
{
	struct rte_ether_hdr *eth = frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint64_t fl = 0;

	eth->dst_addr = peer->mac;
	eth->src_addr = net->mac;
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->type_of_service = 0;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + sizeof(*udp) + plen));
	ip->packet_id = 0;
	ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->hdr_checksum = 0;
	ip->src_addr = net->ip;
	ip->dst_addr = peer->ip;
	udp->src_port = net->udp_port;
	udp->dst_port = peer->udp_port;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + plen));
	udp->dgram_cksum = 0;
	if (net->tx_ip_csum_offload)
		fl |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
	else
		ip->hdr_checksum = rte_ipv4_cksum(ip);
	if (net->udp_checksum) {
		if (net->tx_udp_csum_offload) {
			fl |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
			udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, fl);
		} else {
			/* the pseudo-header, the bytes in this frame, then the tail's sum */
			uint64_t ph = (uint64_t)ip->src_addr + ip->dst_addr +
				      rte_cpu_to_be_16((uint16_t)IPPROTO_UDP) + udp->dgram_len +
				      tail_sum;
			uint16_t c = (uint16_t)~raw_sum(udp, (uint32_t)sizeof(*udp) + hlen, ph);

			/* 0 means "no checksum" in UDP over IPv4: send its other form */
			udp->dgram_cksum = c ? c : 0xffff;
		}
	}
	if (ol_flags)
		*ol_flags = fl;
}

void sg_dp_net_build(const struct sg_dp_net *net, const struct sg_dp_peer *peer, void *frame,
		     uint32_t plen, uint64_t *ol_flags)
{
	sg_dp_net_build_seg(net, peer, frame, plen, plen, 0, ol_flags);
}

size_t sg_dp_net_memif_populate(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	size_t done = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;
		char perm[8];

		if (strstr(line, "memif_region") == NULL ||
		    sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) != 3 || perm[1] != 'w')
			continue;
		done += sg_sum_populate((void *)lo, hi - lo);
	}
	fclose(f);
	return done;
}

/* rte_mempool_mem_iter callback: populate one memory chunk of a pool. */
static void pool_chunk(struct rte_mempool *mp, void *arg, struct rte_mempool_memhdr *mh,
		       unsigned int idx)
{
	(void)mp;
	(void)idx;
	*(size_t *)arg += sg_sum_populate(mh->addr, mh->len);
}

size_t sg_dp_net_pool_populate(struct rte_mempool *mp)
{
	size_t done = 0;

	rte_mempool_mem_iter(mp, pool_chunk, &done);
	return done;
}

ssize_t sg_dp_net_send_fd(int sock, const void *msg, size_t len, int fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	return n < 0 ? -errno : n;
}
