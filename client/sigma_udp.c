/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel UDP transport: one socket per session, sendmmsg with the payload
 * gathered from the caller's tensor (no copy in user space), several
 * datagrams per message (UDP_SEGMENT, conf.udp_gso), recvmmsg in bursts with
 * UDP_GRO (a node's segmented replies arrive in one message), polling before
 * it sleeps while little is outstanding (conf.spin_us).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sg_parse.h"
#include "sigma_internal.h"

/* Large socket buffers absorb a whole window of every node at once. */
#define SG_CLI_UDP_SOCKBUF (8 << 20)

struct sg_cli_udp {
	struct sg_cli_transport ops;
	int fd;
	bool gso;       /* until the kernel refuses it */
	bool *gso_node; /* per node: conf.udp_gso on, or the default and a loopback node */
	unsigned int nnodes;
	struct sockaddr_in *addrs;
	struct mmsghdr txmsg[SG_CLI_BURST];
	struct sockaddr_in txname[SG_CLI_BURST]; /* node address, port moved by port_off */
	struct iovec txiov[2 * SG_CLI_BURST];    /* each message's, one after the other */
	uint16_t txcount[SG_CLI_BURST];          /* datagrams of each message */
	uint8_t txctl[SG_CLI_BURST][SG_CLI_SEGCTL];
	struct sg_cli_rx *rx;
};

int sg_cli_udp_socket(const char *addr, uint16_t port, int reuseport, uint16_t *bound)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t alen = sizeof(a);
	int one = 1, sz = SG_CLI_UDP_SOCKBUF, fd, err;

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

struct sg_cli_rx {
	int fd;
	unsigned int next, count; /* datagrams of the burst handed out, in it */
	_Atomic uint64_t msgs, dgrams; /* read by other threads (sigma_udpd_io_stats()) */
	struct sg_cli_rxpkt dg[SG_CLI_RX_DGRAMS];
	const struct sockaddr_in *from[SG_CLI_RX_DGRAMS];
	struct mmsghdr msg[SG_CLI_RX_MSGS];
	struct iovec iov[SG_CLI_RX_MSGS];
	struct sockaddr_in name[SG_CLI_RX_MSGS];
	uint8_t ctl[SG_CLI_RX_MSGS][CMSG_SPACE(sizeof(int))];
	uint8_t *buf; /* SG_CLI_RX_MSGS * SG_CLI_RX_MSGBUF */
};

struct sg_cli_rx *sg_cli_rx_create(int fd)
{
	struct sg_cli_rx *rx = calloc(1, sizeof(*rx));
	int one = 1;

	if (rx == NULL || (rx->buf = malloc((size_t)SG_CLI_RX_MSGS * SG_CLI_RX_MSGBUF)) == NULL) {
		free(rx);
		errno = ENOMEM;
		return NULL;
	}
	rx->fd = fd;
	/* without UDP_GRO (kernels before 5.0) every message is one datagram, as before */
	setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	for (unsigned int i = 0; i < SG_CLI_RX_MSGS; i++) {
		rx->iov[i] = (struct iovec){rx->buf + (size_t)i * SG_CLI_RX_MSGBUF, SG_CLI_RX_MSGBUF};
		rx->msg[i].msg_hdr.msg_iov = &rx->iov[i];
		rx->msg[i].msg_hdr.msg_iovlen = 1;
		rx->msg[i].msg_hdr.msg_name = &rx->name[i];
	}
	return rx;
}

void sg_cli_rx_destroy(struct sg_cli_rx *rx)
{
	if (rx != NULL)
		free(rx->buf);
	free(rx);
}

/* The segment size of a coalesced message, or its length when it holds one datagram. */
static uint32_t gro_seg(struct msghdr *mh, uint32_t len)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm))
		if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int seg;

			memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
			return seg > 0 && (uint32_t)seg < len ? (uint32_t)seg : len;
		}
	return len;
}

/* One recvmmsg into the burst, split into datagrams. @return datagrams, 0, or -errno. */
static int rx_refill(struct sg_cli_rx *rx)
{
	int r;

	for (unsigned int i = 0; i < SG_CLI_RX_MSGS; i++) {
		rx->msg[i].msg_hdr.msg_namelen = sizeof(rx->name[i]);
		rx->msg[i].msg_hdr.msg_control = rx->ctl[i];
		rx->msg[i].msg_hdr.msg_controllen = sizeof(rx->ctl[i]);
	}
	rx->next = rx->count = 0;
	do
		r = recvmmsg(rx->fd, rx->msg, SG_CLI_RX_MSGS, MSG_DONTWAIT, NULL);
	/* ECONNREFUSED: an ICMP error queued on the socket, nothing to read */
	while (r < 0 && (errno == EINTR || errno == ECONNREFUSED));
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	for (int i = 0; i < r; i++) {
		struct msghdr *mh = &rx->msg[i].msg_hdr;
		uint32_t len = rx->msg[i].msg_len, seg = gro_seg(mh, len);
		const uint8_t *b = rx->iov[i].iov_base;

		for (uint32_t off = 0; off < len && rx->count < SG_CLI_RX_DGRAMS; off += seg) {
			rx->dg[rx->count] = (struct sg_cli_rxpkt){b + off, len - off < seg ?
								  len - off : seg};
			rx->from[rx->count++] = &rx->name[i];
		}
	}
	atomic_fetch_add_explicit(&rx->msgs, (uint64_t)r, memory_order_relaxed);
	atomic_fetch_add_explicit(&rx->dgrams, rx->count, memory_order_relaxed);
	return (int)rx->count;
}

int sg_cli_rx_take(struct sg_cli_rx *rx, struct sg_cli_rxpkt *pkts,
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

int sg_cli_rx_spin(struct sg_cli_rx *rx, struct sg_cli_rxpkt *pkts,
		   const struct sockaddr_in **from, unsigned int max, uint64_t spin_ns)
{
	uint64_t t0 = sg_cli_now_ns();
	int r;

	do {
		sched_yield();
		r = sg_cli_rx_take(rx, pkts, from, max);
	} while (r == 0 && sg_cli_now_ns() - t0 < spin_ns);
	return r;
}

void sg_cli_rx_counts(const struct sg_cli_rx *rx, uint64_t *msgs, uint64_t *dgrams)
{
	*msgs = rx->msgs;
	*dgrams = rx->dgrams;
}

_Static_assert(SG_CLI_SEGCTL == CMSG_SPACE(sizeof(uint16_t)), "SG_CLI_SEGCTL");

void sg_cli_set_segment(struct msghdr *mh, uint8_t ctl[SG_CLI_SEGCTL], uint16_t seg)
{
	struct cmsghdr *cm;

	mh->msg_control = ctl;
	mh->msg_controllen = SG_CLI_SEGCTL;
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_UDP;
	cm->cmsg_type = UDP_SEGMENT;
	cm->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
}

unsigned int sg_cli_gso_max(uint32_t len)
{
	unsigned int m = 65507 / len;

	return m < 64 ? m : 64;
}

/* Pack @p pkts into messages: one per packet, or with GSO one per run of packets of
 * one length to one destination. @return messages. */
static unsigned int pack_msgs(struct sg_cli_udp *u, const struct sg_cli_txpkt *pkts,
			      unsigned int n)
{
	unsigned int nm = 0, ni = 0;

	for (unsigned int i = 0; i < n; i++) {
		const struct sg_cli_txpkt *p = &pkts[i], *q = i ? &pkts[i - 1] : NULL;
		uint32_t len = SG_DP_HDR_LEN + p->payload_len;
		struct mmsghdr *m;

		if (u->gso && q != NULL && u->gso_node[p->node] && q->node == p->node &&
		    q->port_off == p->port_off &&
		    q->payload_len == p->payload_len && u->txcount[nm - 1] < sg_cli_gso_max(len)) {
			m = &u->txmsg[nm - 1]; /* q opened it: nm >= 1 */
			u->txcount[nm - 1]++;
		} else {
			m = &u->txmsg[nm];
			memset(m, 0, sizeof(*m));
			u->txname[nm] = u->addrs[p->node];
			u->txname[nm].sin_port = htons((uint16_t)(ntohs(u->txname[nm].sin_port) +
								  p->port_off));
			m->msg_hdr.msg_name = &u->txname[nm];
			m->msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
			m->msg_hdr.msg_iov = &u->txiov[ni];
			u->txcount[nm++] = 1;
		}
		u->txiov[ni++] = (struct iovec){(void *)p->hdr, SG_DP_HDR_LEN};
		m->msg_hdr.msg_iovlen++;
		if (p->payload_len) {
			u->txiov[ni++] = (struct iovec){(void *)p->payload, p->payload_len};
			m->msg_hdr.msg_iovlen++;
		}
	}
	for (unsigned int k = 0; k < nm; k++) {
		struct msghdr *mh = &u->txmsg[k].msg_hdr;
		uint16_t seg;

		if (u->txcount[k] < 2)
			continue;
		seg = (uint16_t)(mh->msg_iov[0].iov_len + (mh->msg_iovlen > u->txcount[k] ?
							     mh->msg_iov[1].iov_len : 0));
		sg_cli_set_segment(mh, u->txctl[k], seg);
	}
	return nm;
}

static int udp_send(struct sg_cli_transport *tp, const struct sg_cli_txpkt *pkts, unsigned int n)
{
	struct sg_cli_udp *u = (struct sg_cli_udp *)tp;
	unsigned int done = 0, sent = 0, nm = pack_msgs(u, pkts, n);

	while (done < nm) {
		int r = sendmmsg(u->fd, u->txmsg + done, nm - done, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* GSO refused (an MTU below the datagrams): one per message from now on */
			if ((errno == EINVAL || errno == EIO) && u->txcount[done] > 1 && u->gso) {
				u->gso = false;
				r = udp_send(tp, pkts + sent, n - sent);
				return r < 0 ? r : (int)sent + r;
			}
			/* A refused or unroutable destination: the chunks count as lost. */
			if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH ||
			    errno == ENOBUFS || errno == EAGAIN)
				return (int)sent;
			return -errno;
		}
		for (int k = 0; k < r; k++)
			sent += u->txcount[done + (unsigned int)k];
		done += (unsigned int)r;
	}
	return (int)sent;
}

static int udp_recv(struct sg_cli_transport *tp, struct sg_cli_rxpkt *pkts, unsigned int max,
		    int timeout_us, int spin_us)
{
	struct sg_cli_udp *u = (struct sg_cli_udp *)tp;
	struct pollfd pfd = {.fd = u->fd, .events = POLLIN};
	struct timespec ts;
	uint64_t t0 = 0;
	int r = sg_cli_rx_take(u->rx, pkts, NULL, max);

	if (r != 0 || timeout_us <= 0)
		return r;
	if (spin_us > 0) {
		t0 = sg_cli_now_ns();
		r = sg_cli_rx_spin(u->rx, pkts, NULL, max,
				   (uint64_t)(spin_us < timeout_us ? spin_us : timeout_us) * 1000);
		if (r != 0)
			return r;
		timeout_us -= (int)((sg_cli_now_ns() - t0) / 1000);
		if (timeout_us <= 0)
			return 0;
	}
	ts = (struct timespec){.tv_sec = timeout_us / 1000000,
			       .tv_nsec = (long)(timeout_us % 1000000) * 1000};
	if (ppoll(&pfd, 1, &ts, NULL) <= 0)
		return 0;
	return sg_cli_rx_take(u->rx, pkts, NULL, max);
}

static int udp_wait_fd(const struct sg_cli_transport *tp)
{
	return ((const struct sg_cli_udp *)tp)->fd;
}

static void udp_destroy(struct sg_cli_transport *tp)
{
	struct sg_cli_udp *u = (struct sg_cli_udp *)tp;

	if (u == NULL)
		return;
	if (u->fd >= 0)
		close(u->fd);
	free(u->addrs);
	free(u->gso_node);
	sg_cli_rx_destroy(u->rx);
	free(u);
}

struct sg_cli_transport *sg_cli_udp_create(const struct sigma_conf *conf)
{
	struct sg_cli_udp *u = calloc(1, sizeof(*u));
	int err;

	if (u == NULL)
		return NULL;
	u->fd = -1;
	u->gso = conf->udp_gso != SIGMA_GSO_OFF;
	u->ops.send = udp_send;
	u->ops.recv = udp_recv;
	u->ops.destroy = udp_destroy;
	u->ops.wait_fd = udp_wait_fd;
	u->nnodes = conf->nnodes;
	u->addrs = calloc(conf->nnodes, sizeof(*u->addrs));
	u->gso_node = calloc(conf->nnodes, sizeof(*u->gso_node));
	if (u->addrs == NULL || u->gso_node == NULL) {
		err = ENOMEM;
		goto fail;
	}
	for (unsigned int i = 0; i < conf->nnodes; i++) {
		u->addrs[i].sin_family = AF_INET;
		u->addrs[i].sin_port = htons(conf->nodes[i].port ? conf->nodes[i].port :
								   SG_DP_UDP_PORT);
		if (sg_ipv4_parse(conf->nodes[i].addr, &u->addrs[i].sin_addr.s_addr) < 0) {
			err = EINVAL;
			goto fail;
		}
		/*
		 * By default only to a node on this host's loopback: elsewhere a GSO
		 * packet may reach a packet socket whole (veth to sigmad on
		 * net_af_packet), which then sees one 64 KB frame, not the datagrams
		 */
		u->gso_node[i] = conf->udp_gso == SIGMA_GSO_ON ||
				 (conf->udp_gso == SIGMA_GSO_DEFAULT &&
				  (ntohl(u->addrs[i].sin_addr.s_addr) >> 24) == 127);
	}
	/* Several worker processes of one host may share a configured port. */
	u->fd = sg_cli_udp_socket(conf->local_addr, conf->local_port, 1, NULL);
	if (u->fd < 0) {
		err = -u->fd;
		goto fail;
	}
	/* GRO: a node's replies sent with UDP_SEGMENT arrive in one message each */
	u->rx = sg_cli_rx_create(u->fd);
	if (u->rx == NULL) {
		err = ENOMEM;
		goto fail;
	}
	return &u->ops;
fail:
	udp_destroy(&u->ops);
	errno = err;
	return NULL;
}
