/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK ethdev transport: Ethernet/IPv4/UDP built and classified by
 * dataplane's sg_dp_net (the code sigmad runs), queue 0 of one port, the nodes' MAC addresses resolved by ARP at open. For hosts that
 * give the worker a port (e.g. net_memif to a local sigmad).
 *
 * A poll-mode port cannot wake a waiting thread, and DPDK 22.11's memif PMD offers no
 * RX interrupts. On a memif client port we ask sigmad for a wake-up channel of its own
 * (docs/sigmad.md, "memif wake-up channel"): event fds, one per RX queue, that
 * sigmad writes after sending to us, and one we write after sending to it. With one,
 * a waiting recv blocks on them; without (another server, an older sigmad), it polls.
 *
 * A node at an address of this machine's kernel (bind() to it succeeds) is reached
 * over kernel UDP (lo), not the port: what the port sends leaves the machine and
 * never comes back to its kernel (a switch does not send a frame back out of the
 * port it came in on). So a worker over net_af_xdp reaches its own machine's node.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "sg_dp_net.h"
#include "sg_parse.h"
#include "sigma_internal.h"

#define DPDK_DESC 1024
#define DPDK_MBUFS 4095
#define DPDK_ARP_TRIES 50      /* one request every 100 ms */
#define DPDK_START_NS 10000000000ull /* a memif client waits this long for server and link */
#define DPDK_LINK_NS 2000000000ull   /* ... and this long for the link once connected */
#define DPDK_SPIN_POLLS 32     /* empty polls (with yields) before a waiting recv sleeps */
#define DPDK_IDLE_SLEEP_US 20
#define DPDK_WAKE_SPIN_POLLS 8 /* ... or, with a wake-up channel, before it blocks */
#define DPDK_WAKE_REPLY_MS 2000 /* how long sigmad's answers may take (its relay thread) */
/* net_af_xdp: XDP keeps this much in front of each frame (XDP_PACKET_HEADROOM), and the
 * whole mbuf, with the mempool's object header (64), must fit a page: DPDK 22.11's PMD
 * has no multi-buffer frames */
#define DPDK_XDP_HEADROOM 256
#define DPDK_MP_OBJ_HDR 64

/* The wake-up channel's messages (128 bytes, as memif's control messages). */
#define WAKE_MSG_LEN 128
#define WAKE_MSG_HELLO 2        /* memif's: the server speaks first */
#define WAKE_MSG_TYPE 0x5357
#define WAKE_VERSION 1
#define WAKE_OP_RXQ 1
#define WAKE_OP_DONE 2
#define WAKE_OP_TXQ 3
#define WAKE_OP_ACK 4

struct sg_cli_dpdk {
	struct sg_cli_transport ops;
	uint16_t port;
	uint16_t nrxq;
	struct rte_mempool *mp;
	struct sg_dp_net net;       /* our MAC, IPv4 and UDP port; checksums in software */
	unsigned int nnodes;
	struct sg_dp_peer *node;    /* each node's MAC (once ARP answered), IPv4, UDP port */
	bool *node_known;
	bool *node_local;           /* at an address of this machine: over @p local */
	struct sg_cli_transport *local; /* kernel UDP to those nodes (NULL: none) */
	unsigned int nheld;
	struct rte_mbuf *held[SG_CLI_BURST]; /* received packets handed out by the last recv */
	/* the wake-up channel: its connection (-1: none), the fd sigmad sleeps on, ours */
	int wake_sock, wake_tx;
	int wake_rx[SIGMA_DPDK_MAX_RXQ];
};

/* After a TX burst: sigmad's lcore may be asleep (eventfd: a write is never lost). */
static void tx_kick(struct sg_cli_dpdk *d)
{
	uint64_t one = 1;

	if (d->wake_tx >= 0 && write(d->wake_tx, &one, sizeof(one)) < 0) {
		/* the counter is full: readable, which is all a wake needs */
	}
}

/* Learn a node's MAC from an ARP reply. @return true if the frame was an ARP reply. */
static bool on_arp_reply(struct sg_cli_dpdk *d, const uint8_t *f, uint32_t len)
{
	const struct rte_ether_hdr *eh = (const struct rte_ether_hdr *)f;
	const struct rte_arp_hdr *ah = (const struct rte_arp_hdr *)(eh + 1);

	if (len < sizeof(*eh) + sizeof(*ah) || eh->ether_type != RTE_BE16(RTE_ETHER_TYPE_ARP) ||
	    ah->arp_opcode != RTE_BE16(RTE_ARP_OP_REPLY))
		return false;
	for (unsigned int i = 0; i < d->nnodes; i++)
		if (ah->arp_data.arp_sip == d->node[i].ip) {
			d->node[i].mac = ah->arp_data.arp_sha;
			d->node_known[i] = true;
		}
	return true;
}

static void send_arp_request(struct sg_cli_dpdk *d, unsigned int node)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->mp);
	struct rte_ether_hdr *eh;
	struct rte_arp_hdr *ah;

	if (m == NULL)
		return;
	eh = (struct rte_ether_hdr *)rte_pktmbuf_append(m, sizeof(*eh) + sizeof(*ah));
	ah = (struct rte_arp_hdr *)(eh + 1);
	memset(&eh->dst_addr, 0xff, sizeof(eh->dst_addr));
	eh->src_addr = d->net.mac;
	eh->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	*ah = (struct rte_arp_hdr){
		.arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER),
		.arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4),
		.arp_hlen = RTE_ETHER_ADDR_LEN,
		.arp_plen = 4,
		.arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST),
	};
	ah->arp_data.arp_sha = d->net.mac;
	ah->arp_data.arp_sip = d->net.ip;
	ah->arp_data.arp_tip = d->node[node].ip;
	if (rte_eth_tx_burst(d->port, 0, &m, 1) != 1)
		rte_pktmbuf_free(m);
	else
		tx_kick(d);
}

static int dpdk_send(struct sg_cli_transport *tp, const struct sg_cli_txpkt *pkts, unsigned int n)
{
	struct sg_cli_dpdk *d = (struct sg_cli_dpdk *)tp;
	struct rte_mbuf *m[SG_CLI_BURST];
	unsigned int k = 0, sent = 0, nlocal = 0;

	if (d->local != NULL) {
		struct sg_cli_txpkt loc[SG_CLI_BURST];
		int rc;

		for (unsigned int i = 0; i < n && i < SG_CLI_BURST; i++)
			if (d->node_local[pkts[i].node])
				loc[nlocal++] = pkts[i];
		if (nlocal > 0) {
			rc = d->local->send(d->local, loc, nlocal);
			nlocal = rc > 0 ? (unsigned int)rc : 0;
		}
	}
	for (unsigned int i = 0; i < n && i < SG_CLI_BURST; i++) {
		uint32_t tl = pkts[i].trailer != NULL ? SG_DP_MAC_TRAILER : 0;
		uint32_t plen = SG_DP_HDR_LEN + pkts[i].payload_len + tl;
		struct sg_dp_peer to = d->node[pkts[i].node];
		uint8_t *p;

		if (d->local != NULL && d->node_local[pkts[i].node])
			continue;
		m[k] = rte_pktmbuf_alloc(d->mp);
		if (m[k] == NULL)
			break;
		p = (uint8_t *)rte_pktmbuf_append(m[k], (uint16_t)(SG_DP_NET_HDR_LEN + plen));
		if (p == NULL) {
			rte_pktmbuf_free(m[k]);
			break;
		}
		to.udp_port = rte_cpu_to_be_16((uint16_t)(rte_be_to_cpu_16(to.udp_port) +
							  pkts[i].port_off));
		/* UDP checksum 0 ("none", allowed over IPv4): no second pass over the payload. */
		memcpy(p + SG_DP_NET_HDR_LEN, pkts[i].hdr, SG_DP_HDR_LEN);
		memcpy(p + SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN, pkts[i].payload, pkts[i].payload_len);
		if (tl != 0)
			memcpy(p + SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN + pkts[i].payload_len,
			       pkts[i].trailer, tl);
		sg_dp_net_build(&d->net, &to, p, plen, NULL);
		k++;
	}
	/* A full TX ring gets a few more tries; what is left counts as lost. */
	for (int tries = 0; sent < k && tries < 100; tries++)
		sent += rte_eth_tx_burst(d->port, 0, m + sent, (uint16_t)(k - sent));
	for (unsigned int i = sent; i < k; i++)
		rte_pktmbuf_free(m[i]);
	if (sent > 0)
		tx_kick(d);
	return (int)(sent + nlocal);
}

/* Check one received frame: a datagram for us is kept (held until the next recv), an ARP
 * request for our address is answered, an ARP reply teaches a node's MAC. */
static bool rx_one(struct sg_cli_dpdk *d, struct rte_mbuf *m, struct sg_udp_dgram *pkt)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct sg_dp_peer from;
	enum sg_dp_ndrop why;
	uint32_t off, len;

	if (m->nb_segs != 1 || on_arp_reply(d, f, m->data_len)) {
		rte_pktmbuf_free(m);
		return false;
	}
	switch (sg_dp_net_classify(&d->net, f, m->data_len, m->ol_flags, &from, &off, &len, &why)) {
	case SG_DP_RX_UDP:
		pkt->buf = f + off;
		pkt->len = len;
		d->held[d->nheld++] = m;
		return true;
	case SG_DP_RX_ARP: /* rewritten into our reply in place */
		m->ol_flags = 0;
		if (rte_eth_tx_burst(d->port, 0, &m, 1) == 0)
			rte_pktmbuf_free(m);
		else
			tx_kick(d);
		return false;
	default:
		rte_pktmbuf_free(m);
		return false;
	}
}

/*
 * Block until sigmad writes one of our RX queues' event fds or @p deadline (ns). Any
 * burst it sent before its write is in the ring once we have read the fd: the caller
 * polls again. A count left from a burst already received only costs one more poll.
 */
static void wake_wait(struct sg_cli_dpdk *d, uint64_t deadline)
{
	struct pollfd pf[SIGMA_DPDK_MAX_RXQ];
	uint64_t now = sg_cli_now_ns(), left = deadline > now ? deadline - now : 0, v;
	struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
			      .tv_nsec = (long)(left % 1000000000u)};

	for (uint16_t q = 0; q < d->nrxq; q++)
		pf[q] = (struct pollfd){.fd = d->wake_rx[q], .events = POLLIN};
	if (ppoll(pf, d->nrxq, &ts, NULL) <= 0)
		return;
	for (uint16_t q = 0; q < d->nrxq; q++)
		if ((pf[q].revents & POLLIN) && read(d->wake_rx[q], &v, sizeof(v)) < 0) {
			/* EAGAIN: nothing to reset */
		}
}

static void wake_close(struct sg_cli_dpdk *d)
{
	if (d->wake_sock >= 0)
		close(d->wake_sock);
	if (d->wake_tx >= 0)
		close(d->wake_tx);
	for (unsigned int q = 0; q < SIGMA_DPDK_MAX_RXQ; q++) {
		if (d->wake_rx[q] >= 0)
			close(d->wake_rx[q]);
		d->wake_rx[q] = -1;
	}
	d->wake_sock = d->wake_tx = -1;
}

/* The value of @p key in a vdev's arguments ("k=v,k=v": memif's have no lists) into
 * @p out. @return false if the key is absent or its value does not fit. (Not
 * rte_kvargs: libsigma links only rte_eal, rte_ethdev, rte_mbuf and rte_mempool.) */
static bool devarg(const char *args, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);

	for (const char *p = args;;) {
		size_t n = strcspn(p, ",");

		if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
			if (n - klen - 1 >= cap)
				return false;
			memcpy(out, p + klen + 1, n - klen - 1);
			out[n - klen - 1] = '\0';
			return true;
		}
		if (p[n] == '\0')
			return false;
		p += n + 1;
	}
}

/* @p port's memif socket address and interface id, if it is a memif client port. */
static bool memif_client_of(uint16_t port, struct sockaddr_un *a, socklen_t *alen,
			    uint32_t *id)
{
	struct rte_eth_dev_info info;
	const struct rte_devargs *da;
	char v[sizeof(a->sun_path)], path[sizeof(a->sun_path)] = "/run/memif.sock";
	bool abstract = true; /* the PMD's defaults: role client, id 0, that socket */
	size_t n;

	if (rte_eth_dev_info_get(port, &info) < 0 || strcmp(info.driver_name, "net_memif") != 0)
		return false;
	da = rte_dev_devargs(info.device);
	if (da == NULL || da->args == NULL)
		return false;
	if (devarg(da->args, "role", v, sizeof(v)) &&
	    (strstr(v, "server") != NULL || strstr(v, "master") != NULL))
		return false;
	*id = devarg(da->args, "id", v, sizeof(v)) ? (uint32_t)strtoul(v, NULL, 10) : 0;
	if (devarg(da->args, "socket", v, sizeof(v)))
		memcpy(path, v, sizeof(path));
	if (devarg(da->args, "socket-abstract", v, sizeof(v)))
		abstract = strstr(v, "yes") != NULL;
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = strlen(path);
	if (n + 1 >= sizeof(a->sun_path))
		return false;
	if (abstract) /* the PMD's abstract names have no trailing NUL */
		memcpy(a->sun_path + 1, path, n);
	else
		memcpy(a->sun_path, path, n + 1);
	*alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return true;
}

/* Send a wake-up message (@p fd: a descriptor to pass, or -1). @return 0 or -errno. */
static int wake_send(int s, uint16_t op, uint16_t queue, uint16_t count, uint32_t id, int fd)
{
	uint8_t b[WAKE_MSG_LEN] = {0};
	uint16_t t = WAKE_MSG_TYPE, ver = WAKE_VERSION;

	memcpy(b, &t, 2);
	memcpy(b + 2, &ver, 2);
	memcpy(b + 4, &id, 4);
	memcpy(b + 8, &op, 2);
	memcpy(b + 10, &queue, 2);
	memcpy(b + 12, &count, 2);
	return sg_dp_net_send_fd(s, b, sizeof(b), fd, 0) == (ssize_t)sizeof(b) ? 0 : -EIO;
}

/* Receive one message within DPDK_WAKE_REPLY_MS; @p fd gets the descriptor it carried
 * (or -1). @return its type and @p op, or -errno. */
static int wake_recv(int s, uint8_t b[WAKE_MSG_LEN], int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = b, .iov_len = WAKE_MSG_LEN};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct pollfd pf = {.fd = s, .events = POLLIN};
	uint16_t t;
	ssize_t n;

	*fd = -1;
	if (poll(&pf, 1, DPDK_WAKE_REPLY_MS) <= 0)
		return -ETIMEDOUT;
	n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c != NULL; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (*fd < 0)
					*fd = f;
				else
					close(f);
			}
	if (n != WAKE_MSG_LEN) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return n == 0 ? -ECONNRESET : -EPROTO;
	}
	memcpy(&t, b, 2);
	return t;
}

/*
 * Ask the memif server of our port for a wake-up channel. A server that is not a
 * sigmad with one (it disconnects on our message, or says no) leaves us polling.
 */
static void wake_open(struct sg_cli_dpdk *d)
{
	struct sockaddr_un a;
	socklen_t alen;
	uint8_t b[WAKE_MSG_LEN];
	uint32_t id, status;
	uint16_t op;
	int rc = -EIO, fd;
	const char *why = "";

	if (d->nrxq > SIGMA_DPDK_MAX_RXQ || !memif_client_of(d->port, &a, &alen, &id))
		return;
	d->wake_sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (d->wake_sock < 0 || connect(d->wake_sock, (struct sockaddr *)&a, alen) < 0) {
		why = "cannot connect";
		rc = -errno;
		goto none;
	}
	rc = wake_recv(d->wake_sock, b, &fd);
	if (fd >= 0)
		close(fd);
	if (rc != WAKE_MSG_HELLO) {
		why = "no HELLO";
		goto none;
	}
	for (uint16_t q = 0; q < d->nrxq; q++) {
		d->wake_rx[q] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		rc = d->wake_rx[q] < 0 ? -errno : wake_send(d->wake_sock, WAKE_OP_RXQ, q, 0, id,
							    d->wake_rx[q]);
		if (rc < 0) {
			why = "cannot send";
			goto none;
		}
	}
	rc = wake_send(d->wake_sock, WAKE_OP_DONE, 0, d->nrxq, id, -1);
	while (rc == 0) {
		rc = wake_recv(d->wake_sock, b, &fd);
		if (rc != WAKE_MSG_TYPE) {
			if (fd >= 0)
				close(fd);
			why = rc >= 0 ? "the server does not know it" : "no answer";
			rc = rc >= 0 ? -ENOTSUP : rc;
			break;
		}
		memcpy(&op, b + 8, 2);
		memcpy(&status, b + 16, 4);
		if (op == WAKE_OP_TXQ && fd >= 0 && d->wake_tx < 0) {
			d->wake_tx = fd;
			rc = 0;
		} else if (op == WAKE_OP_ACK && status == 0 && d->wake_tx >= 0 && fd < 0) {
			SG_CLI_LOG(DEBUG, "port %u: memif wake-up channel open", d->port);
			return;
		} else {
			if (fd >= 0)
				close(fd);
			why = "refused";
			rc = status != 0 ? -(int)status : -EPROTO;
		}
	}
none:
	SG_CLI_LOG(INFO, "port %u: no memif wake-up channel (%s: %s): polling", d->port, why,
		   strerror(rc < 0 ? -rc : EIO));
	wake_close(d);
}

static int dpdk_recv(struct sg_cli_transport *tp, struct sg_udp_dgram *pkts, unsigned int max,
		     int timeout_us, int spin_us)
{
	struct sg_cli_dpdk *d = (struct sg_cli_dpdk *)tp;
	uint64_t deadline = sg_cli_now_ns() + (uint64_t)(timeout_us > 0 ? timeout_us : 0) * 1000;
	struct rte_mbuf *m[SG_CLI_BURST];
	unsigned int got = 0, empty = 0;

	(void)spin_us; /* a poll-mode port polls anyway (below) */
	rte_pktmbuf_free_bulk(d->held, d->nheld);
	d->nheld = 0;
	if (max > SG_CLI_BURST)
		max = SG_CLI_BURST;
	for (;;) {
		/* the peer may answer on any of our RX queues (one per sigmad lcore) */
		for (uint16_t q = 0; q < d->nrxq && got < max; q++) {
			uint16_t n = rte_eth_rx_burst(d->port, q, m, (uint16_t)(max - got));

			for (uint16_t i = 0; i < n; i++)
				got += rx_one(d, m[i], &pkts[got]);
		}
		if (d->local != NULL && got < max) {
			int n = d->local->recv(d->local, pkts + got, max - got, 0, 0);

			got += n > 0 ? (unsigned int)n : 0;
		}
		if (got > 0 || timeout_us <= 0 || sg_cli_now_ns() >= deadline)
			return (int)got;
		/* A poll-mode port cannot wait for a packet. Yield at first; then
		 * block on the wake-up channel, or else sleep briefly, so that workers
		 * sharing cores with a local sigmad leave it the CPU while it sums. */
		++empty;
		if (d->wake_sock >= 0 && empty >= DPDK_WAKE_SPIN_POLLS)
			wake_wait(d, deadline);
		else if (empty < DPDK_SPIN_POLLS)
			sched_yield();
		else
			rte_delay_us_sleep(DPDK_IDLE_SLEEP_US);
	}
}

static void dpdk_destroy(struct sg_cli_transport *tp)
{
	struct sg_cli_dpdk *d = (struct sg_cli_dpdk *)tp;

	if (d == NULL)
		return;
	rte_pktmbuf_free_bulk(d->held, d->nheld);
	wake_close(d);
	if (d->local != NULL)
		d->local->destroy(d->local);
	free(d->node);
	free(d->node_known);
	free(d->node_local);
	/* The port stays up (other users may own it); its pool goes with the session. */
	if (d->mp != NULL) {
		rte_eth_dev_stop(d->port);
		rte_mempool_free(d->mp);
	}
	free(d);
}

static int port_up(struct sg_cli_dpdk *d, uint32_t frame)
{
	struct rte_eth_conf pc = {0};
	int socket = rte_eth_dev_socket_id(d->port), rc;
	char name[RTE_MEMPOOL_NAMESIZE];
	uint32_t room = RTE_PKTMBUF_HEADROOM + (frame > 2048 ? frame : 2048);
	struct rte_eth_dev_info info;
	uint64_t end;

	if (rte_eth_dev_info_get(d->port, &info) == 0 && !strcmp(info.driver_name, "net_af_xdp")) {
		uint32_t page = (uint32_t)sysconf(_SC_PAGESIZE), fixed = DPDK_MP_OBJ_HDR +
			(uint32_t)sizeof(struct rte_mbuf) + RTE_PKTMBUF_HEADROOM + DPDK_XDP_HEADROOM;

		room = RTE_PKTMBUF_HEADROOM + DPDK_XDP_HEADROOM + frame;
		if (fixed + frame > page) {
			SG_CLI_LOG(ERR, "port %u (net_af_xdp): a frame of %u bytes (a chunk and its "
				   "headers) does not fit an AF_XDP frame, one %u-byte page with its "
				   "headroom: give chunks of at most %u bytes (less a MAC trailer)",
				   d->port, frame, page,
				   page - fixed - (uint32_t)(SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN));
			return -EMSGSIZE;
		}
	}

	snprintf(name, sizeof(name), "sgcli_%u_%u", d->port, (unsigned int)getpid());
	/* some PMDs fill every RX descriptor with an mbuf up front */
	d->mp = rte_pktmbuf_pool_create(name, DPDK_MBUFS + DPDK_DESC * (d->nrxq - 1u), 256, 0,
					(uint16_t)room, socket < 0 ? SOCKET_ID_ANY : socket);
	if (d->mp == NULL)
		return -rte_errno;
	rc = rte_eth_dev_configure(d->port, d->nrxq, 1, &pc);
	for (uint16_t q = 0; q < d->nrxq && rc == 0; q++)
		rc = rte_eth_rx_queue_setup(d->port, q, DPDK_DESC, socket, NULL, d->mp);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(d->port, 0, DPDK_DESC, socket, NULL);
	if (rc < 0)
		return rc;
	/*
	 * A memif client's start fails until its server is up: retry it. A start that
	 * connected is given DPDK_LINK_NS for the handshake (a dozen messages through
	 * both processes' interrupt threads: slow on busy cores) before it is undone and
	 * retried, which only a server that refused us needs. Closing sooner (it was
	 * 100 ms) made workers churn connections under load, and a connection closed
	 * before the server accepted it crashed sigmads older than its memif guard.
	 */
	end = sg_cli_now_ns() + DPDK_START_NS;
	while (sg_cli_now_ns() < end) {
		uint64_t link_end;

		if (rte_eth_dev_start(d->port) != 0) {
			rte_delay_us_sleep(50000);
			continue;
		}
		link_end = RTE_MIN(end, sg_cli_now_ns() + DPDK_LINK_NS);
		while (sg_cli_now_ns() < link_end) {
			struct rte_eth_link link = {0};

			rte_eth_link_get_nowait(d->port, &link);
			if (link.link_status == RTE_ETH_LINK_UP) {
				sg_dp_net_memif_populate();
				return 0;
			}
			rte_delay_us_sleep(10000);
		}
		rte_eth_dev_stop(d->port);
	}
	return -ENOLINK;
}

static int dpdk_node_transport(const struct sg_cli_transport *tp, uint32_t node)
{
	const struct sg_cli_dpdk *d = (const struct sg_cli_dpdk *)tp;

	return d->local != NULL && d->node_local[node] ? SIGMA_TRANSPORT_UDP :
							 SIGMA_TRANSPORT_DPDK;
}

/* Whether IPv4 @p ip (network order) is an address of this machine's kernel. */
static bool kernel_addr(uint32_t ip)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = ip};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool mine;

	if (fd < 0)
		return false;
	mine = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return mine;
}

/* Kernel UDP to the nodes at this machine's own addresses, if any. @return 0 or -errno. */
static int local_open(struct sg_cli_dpdk *d, const struct sigma_conf *conf)
{
	struct sigma_conf u = *conf;
	bool any = false;

	for (unsigned int i = 0; i < d->nnodes; i++) {
		d->node_local[i] = kernel_addr(d->node[i].ip);
		d->node_known[i] = d->node_local[i]; /* no ARP for them */
		any |= d->node_local[i];
	}
	if (!any)
		return 0;
	/* its own socket, on any address and an ephemeral port: the node answers there */
	u.transport = SIGMA_TRANSPORT_UDP;
	u.local_addr = NULL;
	u.local_port = 0;
	u.shm_paths = NULL;
	u.n_shm_paths = 0;
	d->local = sg_cli_udp_create(&u);
	if (d->local == NULL)
		return -errno;
	SG_CLI_LOG(DEBUG, "port %u: the nodes at this machine's addresses go over kernel UDP",
		   d->port);
	return 0;
}

static struct sg_cli_transport *dpdk_create(const struct sigma_conf *conf)
{
	struct sg_cli_dpdk *d = calloc(1, sizeof(*d));
	uint32_t frame = (uint32_t)SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN + conf->chunk_bytes +
			 (conf->auth_keys != NULL ? SG_DP_MAC_TRAILER : 0);
	int rc = -ENOMEM;

	if (d == NULL)
		return NULL;
	d->ops.send = dpdk_send;
	d->ops.recv = dpdk_recv;
	d->ops.destroy = dpdk_destroy;
	d->ops.node_transport = dpdk_node_transport;
	d->wake_sock = d->wake_tx = -1;
	for (unsigned int q = 0; q < SIGMA_DPDK_MAX_RXQ; q++)
		d->wake_rx[q] = -1;
	d->port = conf->dpdk_port;
	d->nrxq = conf->dpdk_rx_queues ? conf->dpdk_rx_queues : 1;
	d->nnodes = conf->nnodes;
	d->net.udp_port = rte_cpu_to_be_16(conf->local_port ? conf->local_port :
							     (uint16_t)(9400 + conf->rank));
	d->node = calloc(conf->nnodes, sizeof(*d->node));
	d->node_known = calloc(conf->nnodes, sizeof(*d->node_known));
	d->node_local = calloc(conf->nnodes, sizeof(*d->node_local));
	if (d->node == NULL || d->node_known == NULL || d->node_local == NULL)
		goto fail;
	rc = -EINVAL;
	if (!rte_eth_dev_is_valid_port(d->port) ||
	    sg_ipv4_parse(conf->local_addr, &d->net.ip) < 0)
		goto fail;
	for (unsigned int i = 0; i < conf->nnodes; i++) {
		if (sg_ipv4_parse(conf->nodes[i].addr, &d->node[i].ip) < 0)
			goto fail;
		d->node[i].udp_port = rte_cpu_to_be_16(sg_cli_node_port(&conf->nodes[i]));
		d->node[i].port_id = d->port;
	}
	rc = local_open(d, conf);
	if (rc < 0)
		goto fail;
	rc = port_up(d, frame);
	if (rc < 0)
		goto fail;
	rc = rte_eth_macaddr_get(d->port, &d->net.mac);
	if (rc < 0)
		goto fail;
	wake_open(d);
	for (int t = 0; t < DPDK_ARP_TRIES; t++) {
		struct sg_udp_dgram rx[SG_CLI_BURST];
		unsigned int known = 0;

		for (unsigned int i = 0; i < d->nnodes; i++)
			if (!d->node_known[i])
				send_arp_request(d, i);
			else
				known++;
		if (known == d->nnodes)
			return &d->ops;
		dpdk_recv(&d->ops, rx, SG_CLI_BURST, 100000, 0);
	}
	SG_CLI_LOG(ERR, "no ARP reply from the nodes on port %u", d->port);
	rc = -EHOSTUNREACH;
fail:
	dpdk_destroy(&d->ops);
	errno = -rc;
	return NULL;
}

static int dpdk_check(struct sigma_conf *c)
{
	if (c->local_addr == NULL)
		return sg_cli_conf_error("the DPDK transport needs local_addr (our IPv4 address)");
	return 0;
}

SG_CLI_TRANSPORT_REGISTER(dpdk) = {
	.kind = SIGMA_TRANSPORT_DPDK,
	.name = "DPDK",
	.check = dpdk_check,
	.create = dpdk_create,
};
