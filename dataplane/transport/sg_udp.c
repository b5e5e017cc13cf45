/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel UDP sockets for Sigma datagrams (sg_udp.h): a socket with large
 * buffers, UDP_SEGMENT sends, and bursts received with UDP_GRO and split at
 * the segment size. Shared by libsigma's kernel-UDP transport and sigma-udpd.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sg_parse.h"
#include "sg_sum.h"
#include "sg_udp.h"

/* Large socket buffers absorb a whole window of every node at once. */
#define SG_UDP_SOCKBUF (8 << 20)

int sg_udp_socket(const char *addr, uint16_t port, int reuseport, uint16_t *bound)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t alen = sizeof(a);
	int one = 1, sz = SG_UDP_SOCKBUF, fd, err;

	if (addr != NULL && sg_ipv4_parse(addr, &a.sin_addr.s_addr) < 0)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/*
	 * Only on a given port: on port 0 the kernel may hand one ephemeral port to
	 * several SO_REUSEPORT sockets of a user, and replies then go astray.
	 */
	if (reuseport && port != 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* FORCE needs CAP_NET_ADMIN; the plain form is the fallback. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
		err = errno;
		close(fd);
		return -err;
	}
	if (bound != NULL)
		*bound = ntohs(a.sin_port);
	return fd;
}

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

struct sg_udp_rx {
	int fd;
	unsigned int next, count; /* datagrams of the burst handed out, in it */
	_Atomic uint64_t msgs, dgrams; /* read by other threads (sigma_udpd_io_stats()) */
	_Atomic uint64_t overflows; /* the kernel's count of drops at the socket (SO_RXQ_OVFL) */
	struct sg_udp_dgram dg[SG_UDP_RX_DGRAMS];
	const struct sockaddr_in *from[SG_UDP_RX_DGRAMS];
	struct mmsghdr msg[SG_UDP_RX_MSGS];
	struct iovec iov[SG_UDP_RX_MSGS];
	struct sockaddr_in name[SG_UDP_RX_MSGS];
	uint8_t ctl[SG_UDP_RX_MSGS][CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint32_t))];
	uint8_t *buf; /* SG_UDP_RX_MSGS * SG_UDP_RX_MSGBUF */
};

struct sg_udp_rx *sg_udp_rx_create(int fd)
{
	struct sg_udp_rx *rx = calloc(1, sizeof(*rx));
	int one = 1;

	if (rx == NULL || (rx->buf = malloc((size_t)SG_UDP_RX_MSGS * SG_UDP_RX_MSGBUF)) == NULL) {
		free(rx);
		errno = ENOMEM;
		return NULL;
	}
	sg_udp_rx_populate(rx);
	rx->fd = fd;
	/* without UDP_GRO (kernels before 5.0) every message is one datagram, as before */
	setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	/* each message then carries the socket's drop count: a full buffer is counted */
	setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	for (unsigned int i = 0; i < SG_UDP_RX_MSGS; i++) {
		rx->iov[i] = (struct iovec){rx->buf + (size_t)i * SG_UDP_RX_MSGBUF, SG_UDP_RX_MSGBUF};
		rx->msg[i].msg_hdr.msg_iov = &rx->iov[i];
		rx->msg[i].msg_hdr.msg_iovlen = 1;
		rx->msg[i].msg_hdr.msg_name = &rx->name[i];
	}
	return rx;
}

void sg_udp_rx_populate(struct sg_udp_rx *rx)
{
	/* the kernel's copies would otherwise meet fresh pages on the hot path (sg_sum.h) */
	sg_sum_populate(rx->buf, (size_t)SG_UDP_RX_MSGS * SG_UDP_RX_MSGBUF);
}

void sg_udp_rx_destroy(struct sg_udp_rx *rx)
{
	if (rx != NULL)
		free(rx->buf);
	free(rx);
}

uint32_t sg_udp_msg_cmsgs(struct msghdr *mh, uint32_t *ovfl)
{
	uint32_t seg = 0;

	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;

			memcpy(&v, CMSG_DATA(cm), sizeof(v));
			seg = v > 0 ? (uint32_t)v : 0;
		} else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL &&
			   cm->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
			memcpy(ovfl, CMSG_DATA(cm), sizeof(*ovfl));
		}
	}
	return seg;
}

/* One recvmmsg into the burst, split into datagrams. @return datagrams, 0, or -errno. */
static int rx_refill(struct sg_udp_rx *rx)
{
	uint32_t ovfl;
	int r;

	for (unsigned int i = 0; i < SG_UDP_RX_MSGS; i++) {
		rx->msg[i].msg_hdr.msg_namelen = sizeof(rx->name[i]);
		rx->msg[i].msg_hdr.msg_control = rx->ctl[i];
		rx->msg[i].msg_hdr.msg_controllen = sizeof(rx->ctl[i]);
	}
	rx->next = rx->count = 0;
	do
		r = recvmmsg(rx->fd, rx->msg, SG_UDP_RX_MSGS, MSG_DONTWAIT, NULL);
	/* ECONNREFUSED: an ICMP error queued on the socket, nothing to read */
	while (r < 0 && (errno == EINTR || errno == ECONNREFUSED));
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	/* the kernel's running count since the socket was made: the latest message's is it */
	ovfl = (uint32_t)atomic_load_explicit(&rx->overflows, memory_order_relaxed);
	for (int i = 0; i < r; i++) {
		struct msghdr *mh = &rx->msg[i].msg_hdr;
		uint32_t len = rx->msg[i].msg_len, seg = sg_udp_msg_cmsgs(mh, &ovfl);
		const uint8_t *b = rx->iov[i].iov_base;

		if (seg == 0 || seg > len)
			seg = len;

		for (uint32_t off = 0; off < len && rx->count < SG_UDP_RX_DGRAMS; off += seg) {
			rx->dg[rx->count] = (struct sg_udp_dgram){b + off, len - off < seg ?
								  len - off : seg};
			rx->from[rx->count++] = &rx->name[i];
		}
	}
	atomic_store_explicit(&rx->overflows, ovfl, memory_order_relaxed);
	atomic_fetch_add_explicit(&rx->msgs, (uint64_t)r, memory_order_relaxed);
	atomic_fetch_add_explicit(&rx->dgrams, rx->count, memory_order_relaxed);
	return (int)rx->count;
}

int sg_udp_rx_take(struct sg_udp_rx *rx, struct sg_udp_dgram *pkts,
		   const struct sockaddr_in **from, unsigned int max)
{
	unsigned int n;

	if (rx->next == rx->count) {
		int r = rx_refill(rx);

		if (r <= 0)
			return r;
	}
	n = rx->count - rx->next < max ? rx->count - rx->next : max;
	memcpy(pkts, rx->dg + rx->next, n * sizeof(*pkts));
	if (from != NULL)
		memcpy(from, rx->from + rx->next, n * sizeof(*from));
	rx->next += n;
	return (int)n;
}

int sg_udp_rx_spin(struct sg_udp_rx *rx, struct sg_udp_dgram *pkts,
		   const struct sockaddr_in **from, unsigned int max, uint64_t spin_ns)
{
	uint64_t t0 = sg_udp_now_ns();
	int r;

	do {
		sched_yield();
		r = sg_udp_rx_take(rx, pkts, from, max);
	} while (r == 0 && sg_udp_now_ns() - t0 < spin_ns);
	return r;
}

void sg_udp_rx_counts(const struct sg_udp_rx *rx, uint64_t *msgs, uint64_t *dgrams)
{
	*msgs = rx->msgs;
	*dgrams = rx->dgrams;
}

uint64_t sg_udp_rx_overflows(const struct sg_udp_rx *rx)
{
	return atomic_load_explicit(&rx->overflows, memory_order_relaxed);
}

_Static_assert(SG_UDP_SEGCTL == CMSG_SPACE(sizeof(uint16_t)), "SG_UDP_SEGCTL");

void sg_udp_set_segment(struct msghdr *mh, uint8_t ctl[SG_UDP_SEGCTL], uint16_t seg)
{
	struct cmsghdr *cm;

	mh->msg_control = ctl;
	mh->msg_controllen = SG_UDP_SEGCTL;
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_UDP;
	cm->cmsg_type = UDP_SEGMENT;
	cm->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
}

unsigned int sg_udp_gso_max(uint32_t len)
{
	unsigned int m = 65507 / len;

	return m < 64 ? m : 64;
}
