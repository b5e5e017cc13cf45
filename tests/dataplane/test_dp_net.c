/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ethernet/ARP/IPv4/UDP handling: a frame built by sigmad parses back to the
 * same peer and payload, its checksums match an independent RFC 1071 sum,
 * every malformed case gives its own drop reason, ARP requests become correct
 * replies, and random garbage never crashes the classifier. Reducer
 * steering: the reducers' UDP ports are accepted and no other, and the
 * rte_flow rule of each reducer matches exactly its port and queue.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "sg_config.h"
#include "sg_dp_eth.h"
#include "sg_dp_transport.h"
#include "sg_dp_pipeline.h"
#include "sg_test.h"

#define OUR_IP RTE_BE32(0x0a0b0001)
#define PEER_IP RTE_BE32(0x0a0b0064)

static const struct rte_ether_addr our_mac = {{0x02, 0, 0, 0, 0, 0x01}};
static const struct rte_ether_addr peer_mac = {{0x02, 0, 0, 0, 0, 0x64}};

/* RFC 1071 one's-complement sum, written independently of DPDK's. */
static uint16_t ref_csum(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static struct sg_dp_net net(void)
{
	return (struct sg_dp_net){.mac = our_mac, .ip = OUR_IP, .udp_port = RTE_BE16(4791),
				  .udp_checksum = true};
}

/* A frame from the peer to us, as a worker would send it. */
static uint32_t make_frame(uint8_t *f, uint32_t plen)
{
	struct sg_dp_net peer_side = {.mac = peer_mac, .ip = PEER_IP,
				      .udp_port = RTE_BE16(40000), .udp_checksum = true};
	struct sg_dp_peer to_us = {.mac = our_mac, .ip = OUR_IP, .udp_port = RTE_BE16(4791)};

	for (uint32_t i = 0; i < plen; i++)
		f[SG_DP_NET_HDR_LEN + i] = (uint8_t)(i * 7 + 3);
	sg_dp_net_build(&peer_side, &to_us, f, plen, NULL);
	return SG_DP_NET_HDR_LEN + plen;
}

static enum sg_dp_rx_kind classify(uint8_t *f, uint32_t len, uint64_t ol, enum sg_dp_ndrop *why)
{
	struct sg_dp_net n = net();
	struct sg_dp_peer p;
	uint32_t off, plen;

	*why = SG_DP_ND_COUNT;
	return sg_dp_net_classify(&n, f, len, ol, &p, &off, &plen, why);
}

static void test_roundtrip(void)
{
	static uint8_t f[9100];
	struct sg_dp_net n = net();
	struct sg_dp_peer p;
	uint32_t off = 0, plen = 0, len;
	enum sg_dp_ndrop why;
	uint8_t pseudo[12];

	for (uint32_t sz = 0; sz <= 8958; sz = sz ? sz * 3 : 1) {
		len = make_frame(f, sz);
		SG_CHECK_EQ(sg_dp_net_classify(&n, f, len, 0, &p, &off, &plen, &why), SG_DP_RX_UDP);
		SG_CHECK_EQ(off, SG_DP_NET_HDR_LEN);
		SG_CHECK_EQ(plen, sz);
		SG_CHECK(rte_is_same_ether_addr(&p.mac, &peer_mac), "peer mac");
		SG_CHECK_EQ(p.ip, PEER_IP);
		SG_CHECK_EQ(p.udp_port, RTE_BE16(40000));
		/* independent checksum check: IP header sums to 0xffff, UDP with pseudo-header */
		SG_CHECK_EQ(ref_csum(f + 14, 20, 0), 0xffff);
		memcpy(pseudo, f + 14 + 12, 8);
		pseudo[8] = 0;
		pseudo[9] = 17;
		pseudo[10] = (uint8_t)((8 + sz) >> 8);
		pseudo[11] = (uint8_t)(8 + sz);
		SG_CHECK_EQ(ref_csum(f + 34, 8 + sz, ref_csum(pseudo, 12, 0)), 0xffff);
		SG_CHECK_EQ(f[off + (sz ? sz - 1 : 0)], sz ? (uint8_t)((sz - 1) * 7 + 3) : f[off]);
	}
	/* Ethernet padding after a short datagram is accepted and ignored */
	len = make_frame(f, 4);
	memset(f + len, 0xee, 60 - len);
	SG_CHECK_EQ(sg_dp_net_classify(&n, f, 60, 0, &p, &off, &plen, &why), SG_DP_RX_UDP);
	SG_CHECK_EQ(plen, 4);
}

static void test_offload_flags(void)
{
	static uint8_t f[256];
	struct sg_dp_net n = net();
	struct sg_dp_peer to = {.mac = peer_mac, .ip = PEER_IP, .udp_port = RTE_BE16(1)};
	uint64_t fl = 0;
	enum sg_dp_ndrop why;

	n.tx_ip_csum_offload = true;
	n.tx_udp_csum_offload = true;
	sg_dp_net_build(&n, &to, f, 16, &fl);
	SG_CHECK(fl & RTE_MBUF_F_TX_IP_CKSUM, "ip offload flag");
	SG_CHECK(fl & RTE_MBUF_F_TX_UDP_CKSUM, "udp offload flag");
	SG_CHECK_EQ(((struct rte_ipv4_hdr *)(f + 14))->hdr_checksum, 0);
	n.udp_checksum = false;
	n.tx_ip_csum_offload = false;
	sg_dp_net_build(&n, &to, f, 16, &fl);
	SG_CHECK_EQ(fl, 0);
	SG_CHECK_EQ(((struct rte_udp_hdr *)(f + 34))->dgram_cksum, 0);
	/* RX: the port's "bad" verdict wins, its "good" verdict skips the software check */
	make_frame(f, 16);
	SG_CHECK_EQ(classify(f, 58, RTE_MBUF_F_RX_IP_CKSUM_BAD, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_IP_CSUM);
	SG_CHECK_EQ(classify(f, 58, RTE_MBUF_F_RX_L4_CKSUM_BAD, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_UDP_CSUM);
	f[50] ^= 1; /* payload corrupted, but the port says the checksum is good */
	SG_CHECK_EQ(classify(f, 58, RTE_MBUF_F_RX_L4_CKSUM_GOOD, &why), SG_DP_RX_UDP);
	SG_CHECK_EQ(classify(f, 58, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_UDP_CSUM);
}

typedef void (*mutate_fn)(uint8_t *f, uint32_t *len);

static void m_short(uint8_t *f, uint32_t *len) { (void)f; *len = 10; }
static void m_trunc(uint8_t *f, uint32_t *len) { (void)f; *len -= 1; }
static void m_iphdr_cut(uint8_t *f, uint32_t *len) { (void)f; *len = 14 + 19; }
static void m_ethertype(uint8_t *f, uint32_t *len) { (void)len; f[12] = 0x86; f[13] = 0xdd; }
static void m_version(uint8_t *f, uint32_t *len) { (void)len; f[14] = 0x65; }
static void m_ihl(uint8_t *f, uint32_t *len) { (void)len; f[14] = 0x44; }
static void m_ipcsum(uint8_t *f, uint32_t *len) { (void)len; f[14 + 10] ^= 0x40; }
static void m_ttl_nocsum(uint8_t *f, uint32_t *len) { (void)len; f[14 + 8] = 1; }

static void fix_ip_csum(uint8_t *f)
{
	f[24] = f[25] = 0;
	uint16_t c = (uint16_t)~ref_csum(f + 14, 20, 0);
	f[24] = (uint8_t)(c >> 8);
	f[25] = (uint8_t)c;
}

static void m_frag(uint8_t *f, uint32_t *len) { (void)len; f[20] = 0x20; fix_ip_csum(f); }
static void m_dst(uint8_t *f, uint32_t *len) { (void)len; f[33] ^= 1; fix_ip_csum(f); }
static void m_proto(uint8_t *f, uint32_t *len) { (void)len; f[23] = 6; fix_ip_csum(f); }
static void m_port(uint8_t *f, uint32_t *len) { (void)len; f[37] ^= 1; }
static void m_ulen(uint8_t *f, uint32_t *len) { (void)len; f[39] += 1; }
static void m_ucsum(uint8_t *f, uint32_t *len) { (void)len; f[60] ^= 0x10; }
static void m_iplen(uint8_t *f, uint32_t *len)
{
	(void)len;
	f[17] -= 8; /* IP shorter than the UDP datagram it carries */
	fix_ip_csum(f);
}
static void m_iptot(uint8_t *f, uint32_t *len)
{
	(void)len;
	f[16] = 0;
	f[17] = 24; /* room for no UDP header */
	fix_ip_csum(f);
}

static void test_malformed(void)
{
	static const struct {
		const char *what;
		mutate_fn fn;
		enum sg_dp_ndrop why;
	} cases[] = {
		{"short", m_short, SG_DP_ND_SHORT},
		{"ip header cut", m_iphdr_cut, SG_DP_ND_SHORT},
		{"ip longer than the frame", m_trunc, SG_DP_ND_IP_HDR},
		{"ipv6", m_ethertype, SG_DP_ND_ETHERTYPE},
		{"version 6", m_version, SG_DP_ND_IP_HDR},
		{"ihl 4", m_ihl, SG_DP_ND_IP_HDR},
		{"ip checksum", m_ipcsum, SG_DP_ND_IP_CSUM},
		{"ttl changed, checksum stale", m_ttl_nocsum, SG_DP_ND_IP_CSUM},
		{"fragment", m_frag, SG_DP_ND_IP_FRAG},
		{"other dst", m_dst, SG_DP_ND_IP_DST},
		{"tcp", m_proto, SG_DP_ND_IP_PROTO},
		{"other port", m_port, SG_DP_ND_UDP_PORT},
		{"udp len", m_ulen, SG_DP_ND_UDP_LEN},
		{"ip len < udp len", m_iplen, SG_DP_ND_UDP_LEN},
		{"no udp header", m_iptot, SG_DP_ND_UDP_LEN},
		{"udp checksum", m_ucsum, SG_DP_ND_UDP_CSUM},
	};
	static uint8_t f[512];
	enum sg_dp_ndrop why;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t len = make_frame(f, 100);

		cases[i].fn(f, &len);
		SG_CHECK(classify(f, len, 0, &why) == SG_DP_RX_DROP, "%s accepted", cases[i].what);
		SG_CHECK(why == cases[i].why, "%s: reason %s, expected %s", cases[i].what,
			 sg_dp_ndrop_name(why), sg_dp_ndrop_name(cases[i].why));
	}
	/* a zero UDP checksum means "none" in IPv4 */
	uint32_t len = make_frame(f, 100);
	f[40] = f[41] = 0;
	SG_CHECK_EQ(classify(f, len, 0, &why), SG_DP_RX_UDP);
	for (int d = 0; d < SG_DP_ND_COUNT; d++)
		SG_CHECK(strcmp(sg_dp_ndrop_name((enum sg_dp_ndrop)d), "unknown") != 0, "name %d", d);
}

static uint32_t make_arp(uint8_t *f, uint32_t tip, uint16_t op)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(eth + 1);

	memset(f, 0, 64);
	memset(&eth->dst_addr, 0xff, 6);
	eth->src_addr = peer_mac;
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP);
	a->arp_hardware = RTE_BE16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = 6;
	a->arp_plen = 4;
	a->arp_opcode = rte_cpu_to_be_16(op);
	a->arp_data.arp_sha = peer_mac;
	a->arp_data.arp_sip = PEER_IP;
	a->arp_data.arp_tip = tip;
	return 60;
}

static void test_arp(void)
{
	static uint8_t f[64];
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(eth + 1);
	enum sg_dp_ndrop why;

	make_arp(f, OUR_IP, RTE_ARP_OP_REQUEST);
	SG_CHECK_EQ(classify(f, 60, 0, &why), SG_DP_RX_ARP);
	SG_CHECK(rte_is_same_ether_addr(&eth->dst_addr, &peer_mac), "reply to requester");
	SG_CHECK(rte_is_same_ether_addr(&eth->src_addr, &our_mac), "from us");
	SG_CHECK_EQ(a->arp_opcode, RTE_BE16(RTE_ARP_OP_REPLY));
	SG_CHECK(rte_is_same_ether_addr(&a->arp_data.arp_sha, &our_mac), "sha = our mac");
	SG_CHECK_EQ(a->arp_data.arp_sip, OUR_IP);
	SG_CHECK(rte_is_same_ether_addr(&a->arp_data.arp_tha, &peer_mac), "tha = peer");
	SG_CHECK_EQ(a->arp_data.arp_tip, PEER_IP);

	make_arp(f, RTE_BE32(0x0a0b0002), RTE_ARP_OP_REQUEST);
	SG_CHECK_EQ(classify(f, 60, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_ARP_OTHER);
	make_arp(f, OUR_IP, RTE_ARP_OP_REPLY);
	SG_CHECK_EQ(classify(f, 60, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_ARP_OTHER);
	make_arp(f, OUR_IP, RTE_ARP_OP_REQUEST);
	a->arp_hlen = 8;
	SG_CHECK_EQ(classify(f, 60, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_ARP_BAD);
	/* an ARP frame too short for an ARP packet (4 bytes after Ethernet) is malformed
	 * ARP; a frame shorter than the Ethernet header is short */
	make_arp(f, OUR_IP, RTE_ARP_OP_REQUEST);
	SG_CHECK_EQ(classify(f, 14 + 4, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_ARP_BAD);
	SG_CHECK_EQ(classify(f, 14 + 27, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_ARP_BAD);
	SG_CHECK_EQ(classify(f, 13, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_SHORT);
	make_arp(f, OUR_IP, RTE_ARP_OP_REQUEST);
	SG_CHECK_EQ(classify(f, 20, 0, &why), SG_DP_RX_DROP);
	SG_CHECK_EQ(why, SG_DP_ND_ARP_BAD);
}

/* Random frames and random bit flips of a good frame: never a crash, and a
 * flipped frame is only accepted if all its checksums still verify. */
static void test_garbage(void)
{
	static uint8_t f[1600];
	enum sg_dp_ndrop why;
	unsigned int accepted = 0;

	srand(12345);
	for (int it = 0; it < 20000; it++) {
		uint32_t len = (uint32_t)rand() % sizeof(f);

		if (it & 1) {
			for (uint32_t i = 0; i < len; i++)
				f[i] = (uint8_t)rand();
			if (it & 2) { /* make it look like IPv4 to reach deeper checks */
				f[12] = 0x08;
				f[13] = 0x00;
				f[14] = 0x45;
			}
		} else {
			len = make_frame(f, (uint32_t)rand() % 1400);
			f[(uint32_t)rand() % len] ^= (uint8_t)(1u << (rand() % 8));
		}
		enum sg_dp_rx_kind k = classify(f, len, 0, &why);

		if (k == SG_DP_RX_DROP)
			SG_CHECK(why < SG_DP_ND_COUNT, "reason set");
		else
			accepted++;
	}
	/* a one-bit flip in an Ethernet address keeps the frame valid: some pass */
	SG_CHECK(accepted < 20000 / 2, "accepted %u", accepted);
}

/*
 * A frame whose payload is split (a fanned-out RESULT: headers + Sigma header
 * in one segment, the elements in another) gets the same bytes, checksums
 * included, as the contiguous frame, for every split of even length.
 */
static void test_split_payload(void)
{
	static uint8_t whole[SG_DP_NET_HDR_LEN + 9000], head[SG_DP_NET_HDR_LEN + 9000];
	struct sg_dp_net n = net();
	struct sg_dp_peer to = {.mac = peer_mac, .ip = PEER_IP, .udp_port = RTE_BE16(40001)};
	static const uint32_t plens[] = {49, 64, 1472, 8920, 8999};

	for (size_t i = 0; i < sizeof(plens) / sizeof(plens[0]); i++) {
		uint32_t plen = plens[i];

		for (uint32_t hlen = 0; hlen <= 48 && hlen <= plen; hlen += 2) {
			const uint8_t *tail = whole + SG_DP_NET_HDR_LEN + hlen;
			uint64_t fl = 1;

			for (uint32_t b = 0; b < plen; b++)
				whole[SG_DP_NET_HDR_LEN + b] = (uint8_t)(b * 13 + plen);
			memcpy(head + SG_DP_NET_HDR_LEN, whole + SG_DP_NET_HDR_LEN, hlen);
			sg_dp_net_build(&n, &to, whole, plen, NULL);
			sg_dp_net_build_seg(&n, &to, head, hlen, plen,
					    sg_dp_net_sum(tail, plen - hlen), &fl);
			SG_CHECK(memcmp(head, whole, SG_DP_NET_HDR_LEN + hlen) == 0 && fl == 0,
				 "plen %u split at %u: headers differ", plen, hlen);
			/* and the checksum is right by an independent sum over the whole */
			SG_CHECK(ref_csum(whole + 14 + 20, 8 + plen,
					  ref_csum(whole + 14 + 12, 8, 17 + 8 + plen)) == 0xffff,
				 "plen %u: UDP checksum", plen);
		}
	}
}

/* udp_port .. udp_port + steer_ports are ours, nothing outside; replies keep udp_port. */
static void test_steer_ports(void)
{
	static uint8_t f[256];
	struct sg_dp_net peer_side = {.mac = peer_mac, .ip = PEER_IP,
				      .udp_port = RTE_BE16(40000), .udp_checksum = true};
	struct sg_dp_net n = net();
	struct sg_dp_peer p;
	uint32_t off, plen, len;
	enum sg_dp_ndrop why;

	for (unsigned int span = 0; span <= 4; span += 4) {
		n.steer_ports = (uint16_t)span;
		for (unsigned int port = 4780; port <= 4800; port++) {
			struct sg_dp_peer to = {.mac = our_mac, .ip = OUR_IP,
						.udp_port = rte_cpu_to_be_16((uint16_t)port)};
			bool ours = port >= 4791 && port <= 4791 + span;

			memset(f, 0x5a, 64);
			sg_dp_net_build(&peer_side, &to, f, 64, NULL);
			len = SG_DP_NET_HDR_LEN + 64;
			why = SG_DP_ND_COUNT;
			SG_CHECK_EQ(sg_dp_net_classify(&n, f, len, 0, &p, &off, &plen, &why),
				    ours ? SG_DP_RX_UDP : SG_DP_RX_DROP);
			if (!ours)
				SG_CHECK_EQ(why, SG_DP_ND_UDP_PORT);
		}
	}
	/* the top of the port space: no wrap to port 0 */
	n.udp_port = RTE_BE16(65534);
	n.steer_ports = 1;
	for (unsigned int port = 0; port < 3; port++) {
		struct sg_dp_peer to = {.mac = our_mac, .ip = OUR_IP,
					.udp_port = rte_cpu_to_be_16((uint16_t)(65534 + port))};

		sg_dp_net_build(&peer_side, &to, f, 64, NULL);
		SG_CHECK_EQ(sg_dp_net_classify(&n, f, SG_DP_NET_HDR_LEN + 64, 0, &p, &off, &plen,
					       &why), port < 2 ? SG_DP_RX_UDP : SG_DP_RX_DROP);
	}
	/* a reply still comes from udp_port itself */
	n = net();
	n.steer_ports = 4;
	sg_dp_net_build(&n, &(struct sg_dp_peer){.mac = peer_mac, .ip = PEER_IP,
						 .udp_port = RTE_BE16(40000)}, f, 8, NULL);
	SG_CHECK_EQ(f[34] << 8 | f[35], 4791);
	SG_CHECK_EQ(f[36] << 8 | f[37], 40000);
}

/* The rule sg_dp_steer_rule() builds, item by item, against the documented form. */
static void test_steer_rule(void)
{
	for (unsigned int r = 0; r < 4; r++) {
		struct sg_dp_flow_rule rule;
		const struct rte_flow_item_ipv4 *ip, *ipm;
		const struct rte_flow_item_udp *udp, *udpm;
		const struct rte_flow_action_queue *q;

		memset(&rule, 0xa5, sizeof(rule)); /* nothing may be left from before */
		sg_dp_steer_rule(&rule, OUR_IP, 9300, r, (uint16_t)(3 + r));
		SG_CHECK_EQ(rule.attr.ingress, 1);
		SG_CHECK_EQ(rule.attr.egress, 0);
		SG_CHECK_EQ(rule.attr.transfer, 0);
		SG_CHECK_EQ(rule.attr.group, 0);
		SG_CHECK_EQ(rule.attr.priority, 0);
		SG_CHECK_EQ(rule.pattern[0].type, RTE_FLOW_ITEM_TYPE_ETH);
		SG_CHECK(rule.pattern[0].spec == NULL && rule.pattern[0].mask == NULL &&
			 rule.pattern[0].last == NULL, "eth item matches any frame");
		SG_CHECK_EQ(rule.pattern[1].type, RTE_FLOW_ITEM_TYPE_IPV4);
		SG_CHECK_EQ(rule.pattern[2].type, RTE_FLOW_ITEM_TYPE_UDP);
		SG_CHECK_EQ(rule.pattern[3].type, RTE_FLOW_ITEM_TYPE_END);
		SG_CHECK(rule.pattern[1].last == NULL && rule.pattern[2].last == NULL, "no ranges");
		ip = rule.pattern[1].spec;
		ipm = rule.pattern[1].mask;
		/* only the destination address is matched, fully */
		SG_CHECK_EQ(ip->hdr.dst_addr, OUR_IP);
		SG_CHECK_EQ(ipm->hdr.dst_addr, 0xffffffffu);
		SG_CHECK_EQ(ipm->hdr.src_addr, 0);
		SG_CHECK_EQ(ipm->hdr.next_proto_id, 0);
		udp = rule.pattern[2].spec;
		udpm = rule.pattern[2].mask;
		SG_CHECK_EQ(rte_be_to_cpu_16(udp->hdr.dst_port), 9300 + 1 + r);
		SG_CHECK_EQ(udpm->hdr.dst_port, 0xffff);
		SG_CHECK_EQ(udpm->hdr.src_port, 0);
		SG_CHECK_EQ(rule.action[0].type, RTE_FLOW_ACTION_TYPE_QUEUE);
		SG_CHECK_EQ(rule.action[1].type, RTE_FLOW_ACTION_TYPE_END);
		q = rule.action[0].conf;
		SG_CHECK_EQ(q->index, 3 + r);
	}
}

/* The bucket hash workers and sigmad share: written out again, and spread over reducers. */
static void test_bucket(void)
{
	unsigned int per[3] = {0};

	for (uint32_t job = 1; job < 50; job += 7)
		for (uint32_t key = 0; key < 300; key++) {
			uint32_t ref = (uint32_t)(((uint64_t)job * 2654435761u) & 0xffffffffu);

			ref = ((ref >> 8) + key) % 64;
			SG_CHECK_EQ(sg_dp_bucket_of(job, key), ref);
			SG_CHECK_EQ(sg_dp_steer_reducer(job, key, 3), ref % 3);
			SG_CHECK_EQ(sg_dp_steer_reducer(job, key, 1), 0);
			SG_CHECK_EQ(sg_dp_steer_reducer(job, key, 0), 0);
			per[ref % 3]++;
		}
	/* consecutive keys fill consecutive buckets: 64 buckets over 3 reducers give each
	 * 21 or 22 of every 64 keys, so each gets 2100 * 21/64 .. 2100 * 22/64, give or take */
	for (int r = 0; r < 3; r++)
		SG_CHECK(per[r] >= 680 && per[r] <= 735, "reducer %d: %u keys", r, per[r]);
}

/* Each transport registers itself (SG_DP_TRANSPORT_REGISTER()): a linked program
 * finds every one its build has, by its [transport] type, and nothing for others. */
static void test_transports_registered(void)
{
	const struct sg_dp_transport *t;

	t = sg_dp_transport_find(SG_DP_TRANSPORT_DPDK);
	SG_CHECK(t != NULL && strcmp(t->name, "ethdev") == 0, "dpdk: %s", t ? t->name : "none");
	t = sg_dp_transport_find(SG_DP_TRANSPORT_SOCKET);
	SG_CHECK(t != NULL && strcmp(t->name, "socket") == 0, "socket: %s", t ? t->name : "none");
	t = sg_dp_transport_find(SG_DP_TRANSPORT_VERBS);
	SG_CHECK(SG_HAVE_VERBS ? t != NULL && strcmp(t->name, "verbs") == 0 : t == NULL,
		 "verbs: %s (built with verbs: %d)", t ? t->name : "none", SG_HAVE_VERBS);
	SG_CHECK(sg_dp_transport_find(77) == NULL, "an unknown type has no transport");
}

int main(void)
{
	test_transports_registered();
	test_roundtrip();
	test_offload_flags();
	test_malformed();
	test_arp();
	test_garbage();
	test_split_payload();
	test_steer_ports();
	test_steer_rule();
	test_bucket();
	return sg_test_finish("dp_net");
}
