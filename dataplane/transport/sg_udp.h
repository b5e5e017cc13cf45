/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel UDP sockets for Sigma datagrams: a socket with large buffers, the
 * UDP_SEGMENT (GSO) send helpers, and a receive side that takes bursts with
 * recvmmsg and UDP_GRO and hands out their datagrams. Used by libsigma's
 * kernel-UDP transport and by the kernel-UDP node (sigma-udpd). Not installed.
 */
#ifndef SG_UDP_H
#define SG_UDP_H

#include <stdint.h>
#include <time.h>

#include "sg_dp_proto.h"

/** Bytes of one datagram buffer: the largest Sigma datagram, and some slack. */
#define SG_UDP_DGRAM_BUF (SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64)

/** The monotonic clock in ns, as sg_udp_rx_spin() counts. */
static inline uint64_t sg_udp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * One received datagram; its buffer belongs to whoever handed it out (a
 * receive side, a transport) until its next receive.
 */
struct sg_udp_dgram {
	const void *buf;
	uint32_t len;
};

struct mmsghdr;
struct iovec;
struct sockaddr_in;

/** Messages one receive burst takes with UDP_GRO (each up to 64 KB of datagrams). */
#define SG_UDP_RX_MSGS 16
/** Bytes of one such message: the largest UDP payload over IPv4. */
#define SG_UDP_RX_MSGBUF 65536
/** Datagrams a burst may split into (the kernel coalesces at most 128 per message). */
#define SG_UDP_RX_DGRAMS (SG_UDP_RX_MSGS * 128)

/**
 * A socket's receive side with UDP_GRO: one recvmmsg takes up to
 * SG_UDP_RX_MSGS messages, each holding one datagram or several the kernel
 * coalesced (a sender's UDP_SEGMENT send arrives whole on loopback), split
 * here at the segment size the kernel reports. Datagrams are handed out from
 * the burst until it is used up, then the next recvmmsg refills it.
 */
struct sg_udp_rx;

/**
 * Set UDP_GRO on @p fd (where the kernel has it) and make its receive state, its
 * buffers' pages written once (sg_udp_rx_populate()). NULL: ENOMEM.
 */
struct sg_udp_rx *sg_udp_rx_create(int fd);

/**
 * Write every page of @p rx's receive buffers once more (sg_sum_populate()): after a
 * fork(), the first write to each page of private memory is a copy, so a process that
 * made its receive state before it forked calls this before the hot path.
 */
void sg_udp_rx_populate(struct sg_udp_rx *rx);

void sg_udp_rx_destroy(struct sg_udp_rx *rx);

/**
 * Up to @p max datagrams, without waiting: @p pkts gets each one (valid until
 * the burst is used up and refilled), @p from (may be NULL) a pointer to its
 * sender's address. @return datagrams (0: none queued), or -errno.
 */
int sg_udp_rx_take(struct sg_udp_rx *rx, struct sg_udp_dgram *pkts,
		   const struct sockaddr_in **from, unsigned int max);

/**
 * As sg_udp_rx_take(), but when nothing is queued, poll again for up to
 * @p spin_ns, yielding the CPU between polls (to another thread of the
 * worker or the node that may be the one to answer). @return as
 * sg_udp_rx_take(): 0 when nothing came in that time.
 */
int sg_udp_rx_spin(struct sg_udp_rx *rx, struct sg_udp_dgram *pkts,
		   const struct sockaddr_in **from, unsigned int max, uint64_t spin_ns);

/** Counters of @p rx: recvmmsg messages and the datagrams they carried. */
void sg_udp_rx_counts(const struct sg_udp_rx *rx, uint64_t *msgs, uint64_t *dgrams);

/**
 * Datagrams the kernel dropped at @p rx's socket, its receive buffer full (or
 * its memory accounting over), as the socket's last received message reported
 * it (SO_RXQ_OVFL). Any thread may call it.
 * @return the count since the socket was made; 0 on a kernel that does not
 *         report it. The kernel stamps each datagram with the count as it
 *         queues it, so drops show once a datagram queued after them is read.
 */
uint64_t sg_udp_rx_overflows(const struct sg_udp_rx *rx);

struct msghdr;

/**
 * What a message received on a socket with UDP_GRO and SO_RXQ_OVFL on says in its
 * control data (sg_udp_rx_create() turns both on).
 * @param mh   the message, as recvmsg()/recvmmsg() filled it
 * @param ovfl out: the socket's drop count (the kernel's running 32-bit count) if the
 *             message carries it; left as it was if not
 * @return the segment size of a message that holds several datagrams of one
 *         sender (UDP_GRO), or 0 for a message of one datagram
 */
uint32_t sg_udp_msg_cmsgs(struct msghdr *mh, uint32_t *ovfl);

/** Bytes of a message's control buffer for its UDP_SEGMENT size (CMSG_SPACE of a u16). */
#define SG_UDP_SEGCTL 24

/** Make @p mh a UDP_SEGMENT send of @p seg-byte datagrams, its control data in @p ctl. */
void sg_udp_set_segment(struct msghdr *mh, uint8_t ctl[SG_UDP_SEGCTL], uint16_t seg);

/** Datagrams of @p len bytes one UDP_SEGMENT message may carry (64 KB of IPv4 payload). */
unsigned int sg_udp_gso_max(uint32_t len);

/**
 * Open a UDP socket with large buffers, bound to @p addr (NULL: any) and @p port
 * (0: an ephemeral port of its own). SO_REUSEPORT when @p reuseport and @p port
 * is not 0, so that several processes may share a configured port.
 * @return the fd, or -errno; @p bound (may be NULL) gets the port bound.
 */
int sg_udp_socket(const char *addr, uint16_t port, int reuseport, uint16_t *bound);

#endif /* SG_UDP_H */
