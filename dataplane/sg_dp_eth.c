/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DPDK ethdev transport of the pipeline: per-socket mbuf pools, port and
 * queue set-up, RX with Ethernet/ARP/IPv4/UDP checks and the hand-off to the
 * owning reducer, the engine's output built straight into mbufs, TX bursts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_ip.h>
#include <rte_kvargs.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_dp_internal.h"

/* The engine sees a worker's address as 64 opaque bits: IPv4, UDP port and
 * ethdev port; the MAC is remembered per reducer in its peer table. */
static inline uint64_t peer_dest(const struct sg_dp_peer *pe)
{
	return (uint64_t)pe->ip << 32 | (uint64_t)pe->udp_port << 16 | pe->port_id;
}

static inline uint64_t mac_bits(const struct rte_ether_addr *m)
{
	uint64_t v = 0;

	memcpy(&v, m->addr_bytes, RTE_ETHER_ADDR_LEN);
	return v | 1ull << 63; /* never NULL as a data pointer */
}

static void tx_flush(struct sg_dp_lcore *lc, uint16_t port)
{
	uint16_t n = lc->txn[port], sent = 0;
	struct rte_mbuf **b = lc->txb[port];

	for (int tries = 0; sent < n && tries < 16; tries++)
		sent += rte_eth_tx_burst(port, (uint16_t)lc->idx, b + sent, n - sent);
	for (uint16_t i = 0; i < sent; i++)
		lc->st.tx_bytes += b[i]->pkt_len;
	lc->st.tx_pkts += sent;
	if (sent < n) {
		lc->st.drops[SG_DP_ND_TX_FULL] += n - sent;
		rte_pktmbuf_free_bulk(b + sent, n - sent);
	}
	lc->txn[port] = 0;
}

static inline void tx_enqueue(struct sg_dp_lcore *lc, uint16_t port, struct rte_mbuf *m)
{
	lc->txb[port][lc->txn[port]++] = m;
	if (lc->txn[port] == SG_DP_TXB)
		tx_flush(lc, port);
}

static unsigned int eth_flush(struct sg_dp_lcore *lc)
{
	unsigned int n = 0;

	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (lc->txn[port]) {
			n += lc->txn[port];
			tx_flush(lc, port);
		}
	return n;
}

/* ---- engine output ------------------------------------------------------ */

static void *tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct sg_dp_lcore *lc = ctx;
	struct rte_mbuf *m;

	if (len + SG_DP_NET_HDR_LEN > lc->p->max_frame)
		return NULL;
	m = rte_pktmbuf_alloc(lc->pool);
	if (m == NULL) {
		lc->st.drops[SG_DP_ND_NO_MBUF]++;
		return NULL;
	}
	lc->cur_dest = dest;
	*pkt = m;
	return rte_pktmbuf_mtod_offset(m, char *, SG_DP_NET_HDR_LEN);
}

static void tx_send(void *ctx, void *pkt, uint32_t len)
{
	struct sg_dp_lcore *lc = ctx;
	struct rte_mbuf *m = pkt;
	uint64_t dest = lc->cur_dest, ol = 0;
	struct sg_dp_peer pe = {.ip = (uint32_t)(dest >> 32), .udp_port = (uint16_t)(dest >> 16),
				.port_id = (uint16_t)dest};
	void *mac;

	if (rte_hash_lookup_data(lc->peers, &dest, &mac) < 0 || pe.port_id >= SG_DP_MAX_PORTS ||
	    !lc->p->port_used[pe.port_id]) {
		lc->st.drops[SG_DP_ND_NO_PEER]++;
		rte_pktmbuf_free(m);
		return;
	}
	memcpy(pe.mac.addr_bytes, &(uint64_t){(uintptr_t)mac}, RTE_ETHER_ADDR_LEN);
	sg_dp_net_build(&lc->p->net[pe.port_id], &pe, rte_pktmbuf_mtod(m, void *), len, &ol);
	m->data_len = (uint16_t)(SG_DP_NET_HDR_LEN + len);
	m->pkt_len = m->data_len;
	m->ol_flags = ol;
	m->l2_len = RTE_ETHER_HDR_LEN;
	m->l3_len = sizeof(struct rte_ipv4_hdr);
	tx_enqueue(lc, pe.port_id, m);
}

/*
 * Engine fan-out: a RESULT for N workers is written once into one payload
 * mbuf; each worker gets a small header mbuf (Ethernet/IPv4/UDP and its copy
 * of the Sigma header) chained to it, the payload's refcount counting the
 * chains, as DPDK's ipv4_multicast example does. The payload is neither
 * narrowed, copied nor (for a software UDP checksum) summed N times.
 */
static void *tx_alloc_multi(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
			    uint32_t len, void **pkt)
{
	struct sg_dp_lcore *lc = ctx;

	/* a port that takes no chains gets one whole packet per worker (tx_alloc) */
	for (unsigned int i = 0; i < n; i++) {
		uint16_t port = (uint16_t)to[i].dest;

		if (port >= SG_DP_MAX_PORTS || !lc->p->port_chains[port])
			return NULL;
	}
	return tx_alloc(ctx, to[0].dest, len, pkt);
}

static unsigned int tx_send_multi(void *ctx, void *pkt, uint32_t len,
				  const struct sg_dp_tx_dest *to, unsigned int n)
{
	struct sg_dp_lcore *lc = ctx;
	struct rte_mbuf *pl = pkt, *h[SG_DP_MAX_WORKERS];
	const uint8_t *sg = rte_pktmbuf_mtod_offset(pl, uint8_t *, SG_DP_NET_HDR_LEN);
	uint32_t plen = len - SG_DP_HDR_LEN, tail = 0;
	unsigned int sent = 0;

	if (n > RTE_DIM(h) || rte_pktmbuf_alloc_bulk(lc->pool, h, n) != 0) {
		lc->st.drops[SG_DP_ND_NO_MBUF] += n;
		rte_pktmbuf_free(pl);
		return 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		uint16_t port = (uint16_t)to[i].dest;

		if (lc->p->net[port].udp_checksum && !lc->p->net[port].tx_udp_csum_offload) {
			tail = sg_dp_net_sum(sg + SG_DP_HDR_LEN, plen);
			break;
		}
	}
	/* the payload segment: the elements only; one reference per chain */
	pl->data_off += SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN;
	pl->data_len = (uint16_t)plen;
	pl->pkt_len = plen;
	rte_mbuf_refcnt_set(pl, (uint16_t)n);
	for (unsigned int i = 0; i < n; i++) {
		struct rte_mbuf *m = h[i];
		uint64_t dest = to[i].dest, ol = 0;
		struct sg_dp_peer pe = {.ip = (uint32_t)(dest >> 32),
					.udp_port = (uint16_t)(dest >> 16), .port_id = (uint16_t)dest};
		uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
		void *mac;

		if (rte_hash_lookup_data(lc->peers, &dest, &mac) < 0) {
			lc->st.drops[SG_DP_ND_NO_PEER]++;
			rte_pktmbuf_free(m);
			rte_pktmbuf_free(pl); /* drops this chain's reference */
			continue;
		}
		memcpy(pe.mac.addr_bytes, &(uint64_t){(uintptr_t)mac}, RTE_ETHER_ADDR_LEN);
		memcpy(f + SG_DP_NET_HDR_LEN, sg, SG_DP_HDR_LEN);
		sg_dp_hdr_set_rank(f + SG_DP_NET_HDR_LEN, to[i].rank);
		sg_dp_net_build_seg(&lc->p->net[pe.port_id], &pe, f, SG_DP_HDR_LEN, len, tail, &ol);
		m->data_len = SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN;
		m->pkt_len = SG_DP_NET_HDR_LEN + len;
		m->nb_segs = 2;
		m->next = pl;
		m->ol_flags = ol;
		m->l2_len = RTE_ETHER_HDR_LEN;
		m->l3_len = sizeof(struct rte_ipv4_hdr);
		tx_enqueue(lc, pe.port_id, m);
		sent++;
	}
	return sent;
}

/* ---- lcore loops -------------------------------------------------------- */

static void reduce_burst(struct sg_dp_lcore *lc, struct rte_mbuf **pkts, unsigned int n)
{
	uint64_t now = sg_dp_now_ns(lc->p, rte_rdtsc());

	for (unsigned int i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct rx_meta *md = rte_mbuf_to_priv(m);
		const uint8_t *pl = rte_pktmbuf_mtod_offset(m, const uint8_t *, md->off);
		uint64_t dest = peer_dest(&md->peer), mb = mac_bits(&md->peer.mac);
		int fwd = sg_dp_move_fwd(lc, pl, md->len);
		void *known;

		if (unlikely(fwd >= 0)) {
			/* a key moving away: its new owner sums this round; or drained */
			if (fwd == SG_DP_MOVE_DROP) {
				lc->st.drops[SG_DP_ND_DRAINING]++;
			} else if (rte_ring_enqueue(lc->p->red[fwd]->ring, m) == 0) {
				lc->st.handoff_pkts++;
				pkts[i] = NULL;
			} else {
				lc->st.drops[SG_DP_ND_RING_FULL]++;
			}
			continue;
		}
		/* learn (or refresh) the worker's MAC for the replies */
		if (rte_hash_lookup_data(lc->peers, &dest, &known) < 0 ||
		    (uintptr_t)known != mb) {
			if (rte_hash_add_key_data(lc->peers, &dest, (void *)(uintptr_t)mb) < 0) {
				lc->st.drops[SG_DP_ND_PEER_TABLE]++;
				continue;
			}
		}
		sg_dp_reduce_one(lc, pl, md->len, dest, now);
	}
	rte_pktmbuf_free_bulk(pkts, n);
}

static void eth_reduce(struct sg_dp_lcore *lc, void **items, unsigned int n)
{
	reduce_burst(lc, (struct rte_mbuf **)items, n);
}

static void eth_release(void **items, unsigned int n)
{
	rte_pktmbuf_free_bulk((struct rte_mbuf **)items, n);
}

static unsigned int eth_rx(struct sg_dp_lcore *lc, unsigned int burst)
{
	struct rte_mbuf *pkts[SG_DP_MAX_BURST];
	struct sg_dp_pipeline *p = lc->p;
	const struct sg_dp_net *net = &p->net[lc->rx_port];
	struct rte_mbuf *local[SG_DP_MAX_BURST];
	struct rte_mbuf *hand[SG_DP_MAX_LAYOUT][64];
	unsigned int nhand[SG_DP_MAX_LAYOUT] = {0};
	unsigned int nl = 0, n;
	bool any_hand = false;

	n = rte_eth_rx_burst(lc->rx_port, lc->rx_queue, pkts, (uint16_t)burst);
	for (unsigned int i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct rx_meta *md = rte_mbuf_to_priv(m);
		enum sg_dp_ndrop why = SG_DP_ND_SHORT;
		enum sg_dp_rx_kind k;
		unsigned int o;

		lc->st.rx_pkts++;
		lc->st.rx_bytes += m->pkt_len;
		if (unlikely(m->nb_segs > 1 || m->priv_size < sizeof(*md))) {
			lc->st.drops[m->nb_segs > 1 ? SG_DP_ND_MULTISEG : SG_DP_ND_MBUF_PRIV]++;
			rte_pktmbuf_free(m);
			continue;
		}
		k = sg_dp_net_classify(net, rte_pktmbuf_mtod(m, void *), m->data_len, m->ol_flags,
				       &md->peer, &md->off, &md->len, &why);
		if (k == SG_DP_RX_DROP) {
			lc->st.drops[why]++;
			rte_pktmbuf_free(m);
			continue;
		}
		if (k == SG_DP_RX_ARP) {
			lc->st.arp_replies++;
			m->ol_flags = 0;
			tx_enqueue(lc, lc->rx_port, m);
			continue;
		}
		md->peer.port_id = lc->rx_port;
		o = sg_dp_owner_of(p, rte_pktmbuf_mtod_offset(m, uint8_t *, md->off), md->len);
		if (p->red[o] == lc) {
			local[nl++] = m;
			continue;
		}
		hand[o][nhand[o]++] = m;
		any_hand = true;
		if (nhand[o] == RTE_DIM(hand[o])) {
			unsigned int e = rte_ring_enqueue_burst(p->red[o]->ring, (void **)hand[o],
								nhand[o], NULL);

			lc->st.handoff_pkts += e;
			lc->st.drops[SG_DP_ND_RING_FULL] += nhand[o] - e;
			rte_pktmbuf_free_bulk(hand[o] + e, nhand[o] - e);
			nhand[o] = 0;
		}
	}
	if (any_hand)
		for (unsigned int o = 0; o < p->n_red; o++) {
			unsigned int e;

			if (nhand[o] == 0)
				continue;
			e = rte_ring_enqueue_burst(p->red[o]->ring, (void **)hand[o], nhand[o], NULL);
			lc->st.handoff_pkts += e;
			lc->st.drops[SG_DP_ND_RING_FULL] += nhand[o] - e;
			rte_pktmbuf_free_bulk(hand[o] + e, nhand[o] - e);
		}
	if (nl)
		reduce_burst(lc, local, nl);
	return n;
}

/* ---- set-up ------------------------------------------------------------- */

/*
 * Bytes one mbuf must hold for @p port's RX queue to be set up. af_packet
 * copies whole ring frames: its queue set-up refuses mbufs smaller than its
 * framesz devarg (2048 by default) less its 32-byte frame header, so jumbo
 * frames there (framesz=16384) need a pool sized from that devarg.
 */
static uint32_t port_rx_room(uint16_t port)
{
	struct rte_eth_dev_info info;
	const struct rte_devargs *da;
	struct rte_kvargs *kv;
	uint32_t need = 2048;

	if (rte_eth_dev_info_get(port, &info) < 0 || strcmp(info.driver_name, "net_af_packet"))
		return 0;
	da = rte_dev_devargs(info.device);
	if (da != NULL && da->args != NULL && (kv = rte_kvargs_parse(da->args, NULL)) != NULL) {
		const char *v = rte_kvargs_get(kv, "framesz");
		unsigned long f = v ? strtoul(v, NULL, 0) : 0;

		if (f > 0 && f <= UINT16_MAX - RTE_PKTMBUF_HEADROOM)
			need = (uint32_t)f;
		rte_kvargs_free(kv);
	}
	return need;
}

static struct rte_mempool *socket_pool(struct sg_dp_pipeline *p, int socket, char *err,
				       size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	uint32_t data = RTE_MAX(p->max_frame, 2048u);
	uint16_t room;

	if (p->pools[socket])
		return p->pools[socket];
	/* every port's RX must fit one frame in one mbuf (no chains on the data path) */
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_used[port])
			data = RTE_MAX(data, port_rx_room(port));
	room = (uint16_t)(RTE_PKTMBUF_HEADROOM + data);
	snprintf(name, sizeof(name), "sg_mbuf_%d_%u", socket, (unsigned int)getpid());
	p->pools[socket] = rte_pktmbuf_pool_create(name, p->cfg.mbufs, 256,
		SG_DP_MBUF_PRIV_SIZE, room, socket);
	if (p->pools[socket] == NULL)
		sg_dp_seterr(err, errlen, "mempool of %u mbufs of %u bytes on socket %d: %s (lower "
		       "[resources] mbufs, or give EAL more memory with -m)", p->cfg.mbufs, room,
		       socket, rte_strerror(rte_errno));
	return p->pools[socket];
}

static int port_setup(struct sg_dp_pipeline *p, uint16_t port, char *err, size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf = {0};
	struct rte_eth_txconf txc;
	struct sg_dp_net *net = &p->net[port];
	uint16_t nrxq = 0, rxd = (uint16_t)c->rxd, txd = (uint16_t)c->txd;
	/* MULTI_SEGS: RESULT fan-out chains header mbufs to one payload mbuf */
	uint64_t want_tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS |
			   (c->udp_checksum ? RTE_ETH_TX_OFFLOAD_UDP_CKSUM : 0);
	int rc;

	rc = rte_eth_dev_info_get(port, &info);
	if (rc < 0)
		goto fail;
	for (unsigned int i = 0; i < p->n_lc; i++)
		nrxq += (p->lc[i].role & SG_DP_ROLE_IO) && p->lc[i].rx_port == port;
	conf.txmode.offloads = info.tx_offload_capa & want_tx;
	conf.rxmode.offloads = info.rx_offload_capa &
			       (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
	rc = rte_eth_dev_configure(port, nrxq, (uint16_t)p->n_lc, &conf);
	if (rc < 0)
		goto fail;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (rc < 0)
		goto fail;
	rc = rte_eth_dev_set_mtu(port, c->mtu);
	/* virtual ports without an MTU setting (ring, memif) pass any frame size */
	if (rc == -ENOTSUP)
		SG_DP_LOG(INFO, "port %u (%s) has no MTU setting\n", port, info.driver_name);
	else if (rc < 0 && port_rx_room(port) > 0)
		/* af_packet reports 1518-byte frames at most whatever its framesz: the
		 * kernel interface's MTU and framesz are what limit it */
		SG_DP_LOG(INFO, "port %u (%s): MTU %u: set it on the kernel interface (ip link "
			  "set IFACE mtu %u) and give the vdev framesz=16384 for jumbo frames\n",
			  port, info.driver_name, c->mtu, c->mtu);
	else if (rc < 0)
		SG_DP_LOG(WARNING, "port %u: cannot set MTU %u (%s): frames above the port's own "
			  "limit will be lost; lower [net] mtu\n", port, c->mtu, strerror(-rc));
	txc = info.default_txconf;
	txc.offloads = conf.txmode.offloads;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];

		if ((lc->role & SG_DP_ROLE_IO) && lc->rx_port == port) {
			rc = rte_eth_rx_queue_setup(port, lc->rx_queue, rxd, (unsigned int)lc->socket,
						    NULL, lc->pool);
			if (rc < 0)
				goto fail;
		}
		rc = rte_eth_tx_queue_setup(port, (uint16_t)i, txd, (unsigned int)lc->socket, &txc);
		if (rc < 0)
			goto fail;
	}
	rc = rte_eth_dev_start(port);
	if (rc < 0)
		goto fail;
	p->port_started[port] = true;
	memset(net, 0, sizeof(*net));
	if (rte_is_zero_ether_addr(&c->mac_override))
		rte_eth_macaddr_get(port, &net->mac);
	else
		net->mac = c->mac_override;
	net->ip = rte_cpu_to_be_32(c->ip);
	net->udp_port = rte_cpu_to_be_16(c->udp_port);
	net->udp_checksum = c->udp_checksum;
	net->tx_ip_csum_offload = (conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
	net->tx_udp_csum_offload = (conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
	p->port_chains[port] = (conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
	SG_DP_LOG(INFO, "port %u (%s): %u RX queue(s), %u TX queue(s), checksums %s\n", port,
	    info.driver_name, nrxq, p->n_lc,
	    net->tx_ip_csum_offload ? "offloaded" : "in software");
	return 0;
fail:
	sg_dp_seterr(err, errlen, "port %u: set-up failed: %s", port, rte_strerror(-rc));
	return rc < 0 ? rc : -EIO;
}


static int eth_setup(struct sg_dp_pipeline *p, char *err, size_t errlen)
{
	int rc;

	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];

		lc->pool = socket_pool(p, lc->socket, err, errlen);
		if (lc->pool == NULL)
			return -ENOMEM;
		if (lc->role & SG_DP_ROLE_REDUCE) {
			char name[RTE_HASH_NAMESIZE];
			struct rte_hash_parameters hp = {.entries = SG_DP_PEERS,
							 .key_len = sizeof(uint64_t),
							 .socket_id = lc->socket, .name = name};

			snprintf(name, sizeof(name), "sg_peer%u_%u", lc->lcore_id,
				 (unsigned int)getpid());
			lc->peers = rte_hash_create(&hp);
			if (lc->peers == NULL) {
				sg_dp_seterr(err, errlen, "reducer lcore %u: peer table: %s",
					     lc->lcore_id, rte_strerror(rte_errno));
				return -ENOMEM;
			}
		}
	}
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++) {
		if (!p->port_used[port])
			continue;
		rc = port_setup(p, port, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void eth_teardown(struct sg_dp_pipeline *p)
{
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_started[port]) {
			rte_eth_dev_stop(port);
			p->port_started[port] = false;
		}
	for (unsigned int i = 0; p->lc && i < p->n_lc; i++) {
		rte_hash_free(p->lc[i].peers);
		p->lc[i].peers = NULL;
	}
	for (unsigned int s = 0; s < RTE_MAX_NUMA_NODES; s++) {
		rte_mempool_free(p->pools[s]);
		p->pools[s] = NULL;
	}
}

const struct sg_dp_transport sg_dp_transport_ethdev = {
	.name = "ethdev",
	.setup = eth_setup,
	.teardown = eth_teardown,
	.rx = eth_rx,
	.reduce = eth_reduce,
	.release = eth_release,
	.flush = eth_flush,
	.tx_alloc = tx_alloc,
	.tx_send = tx_send,
	.tx_alloc_multi = tx_alloc_multi,
	.tx_send_multi = tx_send_multi,
};
