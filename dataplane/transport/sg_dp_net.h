/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Ethernet / ARP / IPv4 / UDP as Sigma speaks them on a DPDK port: build a
 * reply's headers, classify a received frame. Pure functions over frame
 * buffers (no EAL needed), shared by sigmad (sg_dp_eth.c) and libsigma's DPDK
 * transport (client/sigma_dpdk.c) through the sg_dp_net static library.
 */
#ifndef SG_DP_NET_H
#define SG_DP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rte_ether.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Drop reasons, counted per lcore and reported by /sigma/drops. */
enum sg_dp_ndrop {
	SG_DP_ND_SHORT,      /**< shorter than an Ethernet header, or than one plus a 20-byte
				  IPv4 header for IPv4 */
	SG_DP_ND_MULTISEG,   /**< chained mbuf (larger than the MTU) */
	SG_DP_ND_MBUF_PRIV,  /**< mbuf from a pool without SG_DP_MBUF_PRIV_SIZE private bytes */
	SG_DP_ND_ETHERTYPE,  /**< neither IPv4 nor ARP */
	SG_DP_ND_ARP_BAD,    /**< malformed ARP: not Ethernet/IPv4, or cut short */
	SG_DP_ND_ARP_OTHER,  /**< ARP not asking for our IP */
	SG_DP_ND_IP_HDR,     /**< bad version or IHL; total length below IHL or past the frame */
	SG_DP_ND_IP_CSUM,    /**< bad IPv4 header checksum */
	SG_DP_ND_IP_FRAG,    /**< fragments are not reassembled */
	SG_DP_ND_IP_DST,     /**< not addressed to our IP */
	SG_DP_ND_IP_PROTO,   /**< not UDP */
	SG_DP_ND_UDP_PORT,   /**< not our UDP port */
	SG_DP_ND_UDP_LEN,    /**< UDP length disagrees with IP */
	SG_DP_ND_UDP_CSUM,   /**< bad UDP checksum */
	SG_DP_ND_PROTO,      /**< the engine rejected the payload */
	SG_DP_ND_RING_FULL,  /**< reducer's hand-off ring full */
	SG_DP_ND_TX_FULL,    /**< TX queue full */
	SG_DP_ND_NO_MBUF,    /**< mempool empty when replying */
	SG_DP_ND_PEER_TABLE, /**< a sender's address could not be stored (verbs: no address
				  handle; ethdev: not expected, a full table evicts) */
	SG_DP_ND_NO_PEER,    /**< reply to an address the reducer's table does not hold */
	SG_DP_ND_DRAINING,   /**< a push or PULL of a round that began after drain */
	SG_DP_ND_PORT_DOWN,  /**< a reply for a port whose lcores are stopped while its memif
				  client leaves (sg_dp_memif.c) */
	SG_DP_ND_COUNT
};

/** Name of a drop reason ("ip_csum", ...). */
const char *sg_dp_ndrop_name(enum sg_dp_ndrop d);

/** Where a datagram came from: enough to answer it. */
struct sg_dp_peer {
	struct rte_ether_addr mac;
	uint32_t ip;       /**< network byte order */
	uint16_t udp_port; /**< network byte order */
	uint16_t port_id;  /**< ethdev it arrived on */
};

/** Our addresses and what a port offloads. */
struct sg_dp_net {
	struct rte_ether_addr mac;
	uint32_t ip;       /**< network byte order */
	uint16_t udp_port; /**< network byte order: replies come from it */
	/** Datagrams to udp_port + 1 .. udp_port + steer_ports are ours too (one port per
	 *  reducer, docs/sigmad.md "Steering"); 0 for udp_port alone. Host order count. */
	uint16_t steer_ports;
	bool udp_checksum;
	bool tx_ip_csum_offload;
	bool tx_udp_csum_offload;
};

/** Result of sg_dp_net_classify(). */
enum sg_dp_rx_kind {
	SG_DP_RX_DROP = 0, /**< *reason says why */
	SG_DP_RX_ARP,      /**< frame was rewritten into our ARP reply: send it back */
	SG_DP_RX_UDP,      /**< a datagram for us: *peer, *off, *len describe it */
};

/**
 * Classify one frame of @p len bytes at @p frame. @p ol_flags are the mbuf's
 * RX offload flags (checksum verdicts of the port; 0 if none). For ARP
 * requests for our IP the frame is rewritten in place into the reply.
 */
enum sg_dp_rx_kind sg_dp_net_classify(const struct sg_dp_net *net, void *frame, uint32_t len,
				      uint64_t ol_flags, struct sg_dp_peer *peer, uint32_t *off,
				      uint32_t *plen, enum sg_dp_ndrop *reason);

/** sg_dp_net_classify_csum(): no UDP checksum is left to check. */
#define SG_DP_CSUM_NONE UINT32_MAX

/**
 * sg_dp_net_classify(), except that a UDP checksum to check in software is
 * not checked over the UDP payload: *@p csum gets the checksum (sg_sum.h) of
 * the pseudo-header and the UDP header, to which the payload's must add up
 * to 0xffff (the reducer sums the payload anyway: sg_dp_engine_rx_csum()).
 * *@p csum is SG_DP_CSUM_NONE when nothing is left to check: checksums off,
 * a datagram sent without one (field 0), or the port checked it.
 */
enum sg_dp_rx_kind sg_dp_net_classify_csum(const struct sg_dp_net *net, void *frame,
					   uint32_t len, uint64_t ol_flags,
					   struct sg_dp_peer *peer, uint32_t *off, uint32_t *plen,
					   uint32_t *csum, enum sg_dp_ndrop *reason);

/** Bytes of Ethernet + IPv4 + UDP headers Sigma writes in front of a payload. */
#define SG_DP_NET_HDR_LEN (14 + 20 + 8)

/**
 * Write Ethernet/IPv4/UDP headers into the SG_DP_NET_HDR_LEN bytes at @p frame,
 * in front of @p plen payload bytes, addressed to @p peer. Checksums are
 * computed in software unless @p net says the port offloads them, in which
 * case *@p ol_flags gets the mbuf TX flags to set (and the UDP field the
 * pseudo-header sum the offload expects).
 */
void sg_dp_net_build(const struct sg_dp_net *net, const struct sg_dp_peer *peer, void *frame,
		     uint32_t plen, uint64_t *ol_flags);

/**
 * One's-complement sum of @p len bytes (folded to 16 bits, native order),
 * for sg_dp_net_build_seg(): the sum of a payload that several frames share.
 */
uint32_t sg_dp_net_sum(const void *buf, uint32_t len);

/**
 * sg_dp_net_build() for a frame whose UDP payload is split: the first
 * @p hlen bytes (an even number) follow the headers at @p frame, the rest
 * (@p plen - @p hlen bytes) lie in another segment whose sg_dp_net_sum() is
 * @p tail_sum (needed only for a software UDP checksum).
 */
void sg_dp_net_build_seg(const struct sg_dp_net *net, const struct sg_dp_peer *peer, void *frame,
			 uint32_t hlen, uint32_t plen, uint32_t tail_sum, uint64_t *ol_flags);

/**
 * Write every page of the memif regions this process maps writable (the memif PMD's
 * shared rings and buffers: "memif_region" in /proc/self/maps), without changing a
 * byte: MADV_POPULATE_WRITE, then an atomic add of 0 per page, which loses no store
 * that another thread or process makes meanwhile. On the 2-vCPU VM a page's first
 * write through a mapping costs 10-25 us, and a ring of 1024 9 KB buffers comes round
 * only every 128 operations of 64 KB, so a short job's frames each met fresh pages
 * (docs/performance.md). Call it only while no region can be unmapped.
 * @return the bytes written (0 without /proc/self/maps or without regions).
 */
size_t sg_dp_net_memif_populate(void);

struct rte_mempool;

/**
 * Write every page of @p mp's memory in the same way, so that no thread takes a page
 * fault the first time it uses an object. Memory that EAL maps without hugepages
 * (--no-huge) is otherwise faulted in page by page on first write, and a pool hands out
 * every mbuf before it reuses one: the faults went on through whole benchmark runs.
 * MADV_POPULATE_WRITE alone was not enough on the 2-vCPU VM: sigmad's first 1 MB
 * operations over memif still took 3.1-3.3 ms against 0.75 ms once every page had been
 * written (docs/performance.md). Call it before the pool is in use or while its memory
 * stays mapped.
 * @return the bytes written.
 */
size_t sg_dp_net_pool_populate(struct rte_mempool *mp);

/**
 * Send @p len bytes at @p msg as one message on the Unix socket @p sock, with the
 * descriptor @p fd (SCM_RIGHTS) unless it is negative (for memif's control channel
 * and sigmad's wake-up channel beside it). @p flags as sendmsg()'s; MSG_NOSIGNAL is
 * added. @return the bytes sent, or -errno.
 */
ssize_t sg_dp_net_send_fd(int sock, const void *msg, size_t len, int fd, int flags);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_NET_H */
