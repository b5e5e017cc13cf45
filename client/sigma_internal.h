/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma internals shared by its source files: the transport ops interface
 * and the logging macro. Not installed, not for other modules.
 */
#ifndef SIGMA_INTERNAL_H
#define SIGMA_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include <rte_log.h>

#include "sg_ctl_place.h"
#include "sg_dp_proto.h"
#include "sigma.h"

extern int sg_cli_logtype;

#define SG_CLI_LOG(level, fmt, ...)                                                               \
	rte_log(RTE_LOG_##level, sg_cli_logtype, "sigma.client: " fmt "\n", ##__VA_ARGS__)

/** Packets handed to or taken from a transport in one call, at most. */
#define SG_CLI_BURST 64

/** One packet to send: a header and a payload sent from in place, to node @p node. */
struct sg_cli_txpkt {
	const void *hdr;
	const void *payload;
	uint32_t payload_len;
	uint32_t node;
	uint16_t port_off; /**< added to the node's UDP port (reducer steering), else 0 */
};

/** One received packet; the buffer belongs to the transport until its next recv. */
struct sg_cli_rxpkt {
	const void *buf;
	uint32_t len;
};

/** A transport: every way of moving packets to the nodes sits behind these three. */
struct sg_cli_transport {
	/** Send @p n packets. @return packets sent (the rest count as lost), or -errno. */
	int (*send)(struct sg_cli_transport *t, const struct sg_cli_txpkt *pkts, unsigned int n);
	/**
	 * Receive up to @p max packets, waiting at most @p timeout_us for the
	 * first one (0: do not wait); of that, poll for up to @p spin_us before
	 * sleeping (0: sleep at once; a transport that cannot sleep polls
	 * anyway). @return packets received, or -errno.
	 */
	int (*recv)(struct sg_cli_transport *t, struct sg_cli_rxpkt *pkts, unsigned int max,
		    int timeout_us, int spin_us);
	void (*destroy)(struct sg_cli_transport *t);
	/**
	 * A descriptor that polls readable when recv() has something once what
	 * it buffered is taken (a session mixing transports sleeps on it beside
	 * its own); NULL: none (a poll-mode transport).
	 */
	int (*wait_fd)(const struct sg_cli_transport *t);
	/**
	 * How node @p node (< the session's nnodes) is reached: a SIGMA_TRANSPORT_*
	 * value; NULL: every node by the session's conf.transport.
	 */
	int (*node_transport)(const struct sg_cli_transport *t, uint32_t node);
};

/** Kernel UDP transport to @p conf's nodes. NULL with errno on failure. */
struct sg_cli_transport *sg_cli_udp_create(const struct sigma_conf *conf);

/** DPDK ethdev transport (see SIGMA_TRANSPORT_DPDK). NULL with errno on failure. */
struct sg_cli_transport *sg_cli_dpdk_create(const struct sigma_conf *conf);

/**
 * Shared memory to sigma-udpd nodes on this machine. @p rest NULL
 * (SIGMA_TRANSPORT_SHM): every node needs a socket of conf.shm_paths, NULL
 * with errno on failure (see sigma_open()). @p rest a transport to all the
 * nodes (the kernel-UDP one, given conf.shm_paths): the nodes whose socket
 * answers go over shared memory, the others over @p rest, which the result
 * owns from then on (destroyed with it, or on failure); that is @p rest
 * itself when no node answered, and NULL only with ENOMEM.
 */
struct sg_cli_transport *sg_cli_shm_create(const struct sigma_conf *conf,
					   struct sg_cli_transport *rest);

/** Bytes of one receive buffer: the largest Sigma datagram, and some slack. */
#define SG_CLI_RXBUF (SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD + 64)

struct mmsghdr;
struct iovec;
struct sockaddr_in;

/** Messages one receive burst takes with UDP_GRO (each up to 64 KB of datagrams). */
#define SG_CLI_RX_MSGS 16
/** Bytes of one such message: the largest UDP payload over IPv4. */
#define SG_CLI_RX_MSGBUF 65536
/** Datagrams a burst may split into (the kernel coalesces at most 128 per message). */
#define SG_CLI_RX_DGRAMS (SG_CLI_RX_MSGS * 128)

/**
 * A socket's receive side with UDP_GRO: one recvmmsg takes up to
 * SG_CLI_RX_MSGS messages, each holding one datagram or several the kernel
 * coalesced (a sender's UDP_SEGMENT send arrives whole on loopback), split
 * here at the segment size the kernel reports. Datagrams are handed out from
 * the burst until it is used up, then the next recvmmsg refills it.
 */
struct sg_cli_rx;

/** Set UDP_GRO on @p fd (where the kernel has it) and make its receive state. NULL: ENOMEM. */
struct sg_cli_rx *sg_cli_rx_create(int fd);

void sg_cli_rx_destroy(struct sg_cli_rx *rx);

/**
 * Up to @p max datagrams, without waiting: @p pkts gets each one (valid until
 * the burst is used up and refilled), @p from (may be NULL) a pointer to its
 * sender's address. @return datagrams (0: none queued), or -errno.
 */
int sg_cli_rx_take(struct sg_cli_rx *rx, struct sg_cli_rxpkt *pkts,
		   const struct sockaddr_in **from, unsigned int max);

/**
 * As sg_cli_rx_take(), but when nothing is queued, poll again for up to
 * @p spin_ns, yielding the CPU between polls (to another thread of the
 * worker or the node that may be the one to answer). @return as
 * sg_cli_rx_take(): 0 when nothing came in that time.
 */
int sg_cli_rx_spin(struct sg_cli_rx *rx, struct sg_cli_rxpkt *pkts,
		   const struct sockaddr_in **from, unsigned int max, uint64_t spin_ns);

/** Counters of @p rx: recvmmsg messages and the datagrams they carried. */
void sg_cli_rx_counts(const struct sg_cli_rx *rx, uint64_t *msgs, uint64_t *dgrams);

/** Bytes of a message's control buffer for its UDP_SEGMENT size (CMSG_SPACE of a u16). */
#define SG_CLI_SEGCTL 24

struct msghdr;

/** Make @p mh a UDP_SEGMENT send of @p seg-byte datagrams, its control data in @p ctl. */
void sg_cli_set_segment(struct msghdr *mh, uint8_t ctl[SG_CLI_SEGCTL], uint16_t seg);

/** Datagrams of @p len bytes one UDP_SEGMENT message may carry (64 KB of IPv4 payload). */
unsigned int sg_cli_gso_max(uint32_t len);

/**
 * Open a UDP socket with large buffers, bound to @p addr (NULL: any) and @p port
 * (0: an ephemeral port of its own). SO_REUSEPORT when @p reuseport and @p port
 * is not 0, so that several processes may share a configured port.
 * @return the fd, or -errno; @p bound (may be NULL) gets the port bound.
 */
int sg_cli_udp_socket(const char *addr, uint16_t port, int reuseport, uint16_t *bound);

/** Make @p s refuse tensors of another dtype than @p dt (a session of a described job). */
void sg_cli_set_job_dtype(struct sigma_session *s, enum sg_dtype dt);

static inline uint64_t sg_cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* SIGMA_INTERNAL_H */
