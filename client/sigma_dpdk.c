/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK ethdev transport: Ethernet/IPv4/UDP built and classified by
 * dataplane's sg_dp_net (the code sigmad runs), queue 0 of one port, the nodes' MAC addresses resolved by ARP at open. For hosts that
 * give the worker a port (e.g. net_memif to a local sigmad).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_arp.h>
#include <rte_cycles.h>
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

struct sg_cli_dpdk {
	struct sg_cli_transport ops;
	uint16_t port;
	uint16_t nrxq;
	struct rte_mempool *mp;
	struct sg_dp_net net;       /* our MAC, IPv4 and UDP port; checksums in software */
	unsigned int nnodes;
	struct sg_dp_peer *node;    /* each node's MAC (once ARP answered), IPv4, UDP port */
	bool *node_known;
	unsigned int nheld;
	struct rte_mbuf *held[SG_CLI_BURST]; /* received packets handed out by the last recv */
};

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
}

static int dpdk_send(struct sg_cli_transport *tp, const struct sg_cli_txpkt *pkts, unsigned int n)
{
	struct sg_cli_dpdk *d = (struct sg_cli_dpdk *)tp;
	struct rte_mbuf *m[SG_CLI_BURST];
	unsigned int k = 0, sent = 0;

	for (unsigned int i = 0; i < n && i < SG_CLI_BURST; i++) {
		uint32_t plen = SG_DP_HDR_LEN + pkts[i].payload_len;
		struct sg_dp_peer to = d->node[pkts[i].node];
		uint8_t *p;

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
		sg_dp_net_build(&d->net, &to, p, plen, NULL);
		k++;
	}
	/* A full TX ring gets a few more tries; what is left counts as lost. */
	for (int tries = 0; sent < k && tries < 100; tries++)
		sent += rte_eth_tx_burst(d->port, 0, m + sent, (uint16_t)(k - sent));
	for (unsigned int i = sent; i < k; i++)
		rte_pktmbuf_free(m[i]);
	return (int)sent;
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
		return false;
	default:
		rte_pktmbuf_free(m);
		return false;
	}
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
		if (got > 0 || timeout_us <= 0 || sg_cli_now_ns() >= deadline)
			return (int)got;
		/* A poll-mode port cannot wait for a packet. Yield at first; then
		 * sleep briefly, so that workers sharing cores with a local sigmad
		 * leave it the CPU while it sums. */
		if (++empty < DPDK_SPIN_POLLS)
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
	free(d->node);
	free(d->node_known);
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
	uint64_t end;

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
			if (link.link_status == RTE_ETH_LINK_UP)
				return 0;
			rte_delay_us_sleep(10000);
		}
		rte_eth_dev_stop(d->port);
	}
	return -ENOLINK;
}

struct sg_cli_transport *sg_cli_dpdk_create(const struct sigma_conf *conf)
{
	struct sg_cli_dpdk *d = calloc(1, sizeof(*d));
	uint32_t frame = (uint32_t)SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN + conf->chunk_bytes;
	int rc = -ENOMEM;

	if (d == NULL)
		return NULL;
	d->ops.send = dpdk_send;
	d->ops.recv = dpdk_recv;
	d->ops.destroy = dpdk_destroy;
	d->port = conf->dpdk_port;
	d->nrxq = conf->dpdk_rx_queues ? conf->dpdk_rx_queues : 1;
	d->nnodes = conf->nnodes;
	d->net.udp_port = rte_cpu_to_be_16(conf->local_port ? conf->local_port :
							     (uint16_t)(9400 + conf->rank));
	d->node = calloc(conf->nnodes, sizeof(*d->node));
	d->node_known = calloc(conf->nnodes, sizeof(*d->node_known));
	if (d->node == NULL || d->node_known == NULL)
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
	rc = port_up(d, frame);
	if (rc < 0)
		goto fail;
	rc = rte_eth_macaddr_get(d->port, &d->net.mac);
	if (rc < 0)
		goto fail;
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
