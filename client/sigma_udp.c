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

struct sg_cli_udp {
	struct sg_cli_transport ops;
	int fd;
	bool gso;       /* until the kernel refuses it */
	bool *gso_node; /* per node: conf.udp_gso on, or the default and a loopback node */
	unsigned int nnodes;
	struct sockaddr_in *addrs;
	struct mmsghdr txmsg[SG_CLI_BURST];
	struct sockaddr_in txname[SG_CLI_BURST]; /* node address, port moved by port_off */
	struct iovec txiov[3 * SG_CLI_BURST];    /* each message's, one after the other */
	uint16_t txcount[SG_CLI_BURST];          /* datagrams of each message */
	uint8_t txctl[SG_CLI_BURST][SG_UDP_SEGCTL];
	struct sg_udp_rx *rx;
};

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

		/* a MAC's trailer is a third iovec: such datagrams go one per message */
		if (u->gso && q != NULL && p->trailer == NULL && q->trailer == NULL &&
		    u->gso_node[p->node] && q->node == p->node &&
		    q->port_off == p->port_off &&
		    q->payload_len == p->payload_len && u->txcount[nm - 1] < sg_udp_gso_max(len)) {
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
		if (p->trailer != NULL) {
			u->txiov[ni++] = (struct iovec){(void *)p->trailer, SG_DP_MAC_TRAILER};
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
		sg_udp_set_segment(mh, u->txctl[k], seg);
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

static int udp_recv(struct sg_cli_transport *tp, struct sg_udp_dgram *pkts, unsigned int max,
		    int timeout_us, int spin_us)
{
	struct sg_cli_udp *u = (struct sg_cli_udp *)tp;
	struct pollfd pfd = {.fd = u->fd, .events = POLLIN};
	struct timespec ts;
	uint64_t t0 = 0;
	int r = sg_udp_rx_take(u->rx, pkts, NULL, max);

	if (r != 0 || timeout_us <= 0)
		return r;
	if (spin_us > 0) {
		t0 = sg_cli_now_ns();
		r = sg_udp_rx_spin(u->rx, pkts, NULL, max,
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
	return sg_udp_rx_take(u->rx, pkts, NULL, max);
}

static int udp_wait_fd(const struct sg_cli_transport *tp)
{
	return ((const struct sg_cli_udp *)tp)->fd;
}

static uint64_t udp_rx_dropped(const struct sg_cli_transport *tp)
{
	return sg_udp_rx_overflows(((const struct sg_cli_udp *)tp)->rx);
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
	sg_udp_rx_destroy(u->rx);
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
	u->ops.rx_dropped = udp_rx_dropped;
	u->nnodes = conf->nnodes;
	u->addrs = calloc(conf->nnodes, sizeof(*u->addrs));
	u->gso_node = calloc(conf->nnodes, sizeof(*u->gso_node));
	if (u->addrs == NULL || u->gso_node == NULL) {
		err = ENOMEM;
		goto fail;
	}
	for (unsigned int i = 0; i < conf->nnodes; i++) {
		u->addrs[i].sin_family = AF_INET;
		u->addrs[i].sin_port = htons(sg_cli_node_port(&conf->nodes[i]));
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
	u->fd = sg_udp_socket(conf->local_addr, conf->local_port, 1, NULL);
	if (u->fd < 0) {
		err = -u->fd;
		goto fail;
	}
	/* GRO: a node's replies sent with UDP_SEGMENT arrive in one message each */
	u->rx = sg_udp_rx_create(u->fd);
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

/* shm_paths are optional here: the nodes that answer on one go over shared memory */
static int udp_check(struct sigma_conf *c)
{
	if (c->shm_paths != NULL && c->n_shm_paths > 256)
		return sg_cli_conf_error("shm_paths: at most 256, got %u", c->n_shm_paths);
	if (c->shm_paths == NULL)
		c->n_shm_paths = 0;
	return sg_cli_shm_check_paths(c);
}

static struct sg_cli_transport *udp_open(const struct sigma_conf *conf)
{
	struct sg_cli_transport *t = sg_cli_udp_create(conf);

	/* given shm_paths: the nodes that answer there go over shared memory */
	if (t != NULL && conf->n_shm_paths > 0)
		t = sg_cli_shm_create(conf, t);
	return t;
}

SG_CLI_TRANSPORT_REGISTER(udp) = {
	.kind = SIGMA_TRANSPORT_UDP,
	.name = "UDP",
	.check = udp_check,
	.create = udp_open,
};
