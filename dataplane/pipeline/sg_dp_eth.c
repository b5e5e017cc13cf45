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
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "sg_dp_eth.h"
#include "sg_dp_memif.h"
#include "sg_dp_peers.h"
#include "sg_dp_transport.h"
#include "sg_dp_xdp.h"
#include "sg_sum.h"

#define SG_DP_PEER_EXPIRE_MAX 64 /* idle reply addresses forgotten per reducer per ms */

/* Where a received datagram came from and where its payload is: written by
 * the receiving lcore into the mbuf's private area, read by the reducer. */
struct rx_meta {
	struct sg_dp_peer peer;
	uint32_t off;
	uint32_t len;
	uint32_t csum; /* UDP checksum left to the reducer, or SG_DP_CSUM_NONE */
};

_Static_assert(sizeof(struct rx_meta) <= SG_DP_MBUF_PRIV_SIZE, "rx_meta fits the mbuf priv area");
_Static_assert(SG_DP_MBUF_PRIV_SIZE % RTE_MBUF_PRIV_ALIGN == 0, "priv size alignment");

/* The engine sees a worker's address as 64 opaque bits: IPv4, UDP port and
 * ethdev port; the MAC is remembered per reducer in its peer table, once the
 * engine has accepted a packet from that address (tx_accept). */
static inline uint64_t peer_dest(const struct sg_dp_peer *pe)
{
	return (uint64_t)pe->ip << 32 | (uint64_t)pe->udp_port << 16 | pe->port_id;
}

/* No datagram in the engine's hands: an ethdev port id is below SG_DP_MAX_PORTS. */
#define SG_DP_NO_DEST UINT64_MAX

static inline uint64_t mac_bits(const struct rte_ether_addr *m)
{
	uint64_t v = 0;

	memcpy(&v, m->addr_bytes, RTE_ETHER_ADDR_LEN);
	return v;
}

static void tx_flush(struct sg_dp_lcore *lc, uint16_t port)
{
	uint16_t n = lc->txn[port], sent = 0;
	struct rte_mbuf **b = lc->txb[port];

	if (unlikely(lc->p->port_off[port])) {
		lc->st.drops[SG_DP_ND_PORT_DOWN] += n;
		rte_pktmbuf_free_bulk(b, n);
		lc->txn[port] = 0;
		return;
	}
	for (int tries = 0; sent < n && tries < 16; tries++)
		sent += rte_eth_tx_burst(port, (uint16_t)lc->idx, b + sent, n - sent);
	if (sent > 0 && lc->p->memif != NULL)
		sg_dp_memif_tx_kick(lc->p, port, (uint16_t)lc->idx); /* the client may sleep */
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

/*
 * The reply address @p dest with its MAC: the MAC of the datagram being
 * handled when it is the sender's, else the one learnt for @p dest;
 * -ENOENT (counted) if the table does not hold it.
 */
static int peer_of(struct sg_dp_lcore *lc, uint64_t dest, struct sg_dp_peer *pe)
{
	uint64_t mac;

	*pe = (struct sg_dp_peer){.ip = (uint32_t)(dest >> 32), .udp_port = (uint16_t)(dest >> 16),
				  .port_id = (uint16_t)dest};
	if (dest == lc->rx_dest)
		mac = lc->rx_mac;
	else if (sg_dp_peers_lookup(lc->peers, dest, &mac) < 0)
		goto none;
	if (pe->port_id >= SG_DP_MAX_PORTS || !lc->p->port_used[pe->port_id])
		goto none;
	memcpy(pe->mac.addr_bytes, &mac, RTE_ETHER_ADDR_LEN);
	return 0;
none:
	lc->st.drops[SG_DP_ND_NO_PEER]++;
	return -ENOENT;
}

/* Engine tx op accept: the datagram being handled passed its job's checks (token
 * included); only now does its sender's address enter the table. */
static void tx_accept(void *ctx, uint64_t src)
{
	struct sg_dp_lcore *lc = ctx;

	if (unlikely(src != lc->rx_dest))
		return; /* the engine names the sender of the datagram it holds */
	switch (sg_dp_peers_learn(lc->peers, src, lc->rx_mac, lc->rx_now)) {
	case SG_DP_PEER_SEEN:
		return;
	case SG_DP_PEER_EVICTED:
		lc->st.peers_evicted++;
		/* fall through */
	case SG_DP_PEER_NEW:
		lc->st.peers_learned++;
		break;
	case SG_DP_PEER_FAILED:
		/* not expected; replies to this datagram still use its MAC, later ones
		 * count as no_peer */
		lc->st.drops[SG_DP_ND_PEER_TABLE]++;
		return;
	}
	lc->st.peers = sg_dp_peers_count(lc->peers);
}

/* Transport poll: forget reply addresses idle for [resources] peer_idle_ms, a few a time. */
static void eth_poll(struct sg_dp_lcore *lc, uint64_t now)
{
	if (lc->peers == NULL)
		return;
	lc->st.peers_expired += sg_dp_peers_expire(lc->peers, now,
						   (uint64_t)lc->p->cfg.peer_idle_ms * 1000000ull,
						   SG_DP_PEER_EXPIRE_MAX);
	lc->st.peers = sg_dp_peers_count(lc->peers);
}

/* Engine tx op payload_csum: the RESULT in @p pkt needs no second pass over its elements. */
static void tx_payload_csum(void *ctx, void *pkt, uint16_t csum)
{
	struct sg_dp_lcore *lc = ctx;

	lc->tx_sum_pkt = pkt;
	lc->tx_sum = csum;
}

/*
 * The checksum of @p m's elements into *@p sum if the engine gave it
 * (tx_payload_csum). Forgotten once asked for: the mbuf goes out now, and
 * its address comes back with another packet. @return whether it was given.
 */
static bool tx_sum_take(struct sg_dp_lcore *lc, const void *m, uint32_t *sum)
{
	bool given = lc->tx_sum_pkt == m;

	lc->tx_sum_pkt = NULL;
	*sum = lc->tx_sum;
	return given;
}

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
	(void)dest; /* send() is given it */
	*pkt = m;
	return rte_pktmbuf_mtod_offset(m, char *, SG_DP_NET_HDR_LEN);
}

static void tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct sg_dp_lcore *lc = ctx;
	struct rte_mbuf *m = pkt;
	uint64_t ol = 0;
	struct sg_dp_peer pe;
	uint32_t sum;
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	bool summed = tx_sum_take(lc, m, &sum);

	if (peer_of(lc, dest, &pe) < 0) {
		rte_pktmbuf_free(m);
		return;
	}
	/* a RESULT: the engine summed its elements as it wrote them */
	if (summed)
		sg_dp_net_build_seg(&lc->p->net[pe.port_id], &pe, f, SG_DP_HDR_LEN, len, sum, &ol);
	else
		sg_dp_net_build(&lc->p->net[pe.port_id], &pe, f, len, &ol);
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
	struct rte_mbuf *pl = pkt, *h[SG_MAX_WORKERS];
	const uint8_t *sg = rte_pktmbuf_mtod_offset(pl, uint8_t *, SG_DP_NET_HDR_LEN);
	uint32_t plen = len - SG_DP_HDR_LEN, tail;
	unsigned int sent = 0;
	bool need = false, summed = tx_sum_take(lc, pl, &tail);

	if (n > RTE_DIM(h) || rte_pktmbuf_alloc_bulk(lc->pool, h, n) != 0) {
		lc->st.drops[SG_DP_ND_NO_MBUF] += n;
		rte_pktmbuf_free(pl);
		return 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		uint16_t port = (uint16_t)to[i].dest;

		need |= lc->p->net[port].udp_checksum && !lc->p->net[port].tx_udp_csum_offload;
	}
	/* the engine summed the elements as it wrote them, unless it was not asked to */
	if (need && !summed)
		tail = sg_dp_net_sum(sg + SG_DP_HDR_LEN, plen);
	/* the payload segment: the elements only; one reference per chain */
	pl->data_off += SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN;
	pl->data_len = (uint16_t)plen;
	pl->pkt_len = plen;
	rte_mbuf_refcnt_set(pl, (uint16_t)n);
	for (unsigned int i = 0; i < n; i++) {
		struct rte_mbuf *m = h[i];
		uint64_t ol = 0;
		struct sg_dp_peer pe;
		uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);

		if (peer_of(lc, to[i].dest, &pe) < 0) {
			rte_pktmbuf_free(m);
			rte_pktmbuf_free(pl); /* drops this chain's reference */
			continue;
		}
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

	lc->rx_now = now;

	for (unsigned int i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct rx_meta *md = rte_mbuf_to_priv(m);
		const uint8_t *pl = rte_pktmbuf_mtod_offset(m, const uint8_t *, md->off);
		int fwd;

		/* a key move reads the header to route it: only an intact one (rare) */
		if (unlikely(lc->mv != NULL) && md->csum != SG_DP_CSUM_NONE) {
			if (sg_sum_csum_add((uint16_t)md->csum, sg_dp_net_sum(pl, md->len)) !=
			    0xffff) {
				lc->st.drops[SG_DP_ND_UDP_CSUM]++;
				continue;
			}
			md->csum = SG_DP_CSUM_NONE;
		}
		fwd = sg_dp_steer_move(lc, pl, md->len);

		if (unlikely(fwd != SG_DP_STEER_HERE)) {
			if (fwd == SG_DP_STEER_DROPPED) {
				/* counted */
			} else if (rte_ring_enqueue(lc->p->red[fwd]->ring, m) == 0) {
				lc->st.handoff_pkts++;
				pkts[i] = NULL;
				if (lc->p->memif != NULL) /* it may block (memif wake-up) */
					sg_dp_memif_wake(lc->p->red[fwd]);
			} else {
				lc->st.drops[SG_DP_ND_RING_FULL]++;
			}
			continue;
		}
		/* replies to it use its MAC; tx_accept learns it if the engine accepts it */
		lc->rx_dest = peer_dest(&md->peer);
		lc->rx_mac = mac_bits(&md->peer.mac);
		if (md->csum == SG_DP_CSUM_NONE)
			sg_dp_reduce_one(lc, pl, md->len, lc->rx_dest, now);
		else /* the engine checks the checksum in the pass that sums the elements */
			sg_dp_reduce_one_csum(lc, pl, md->len, lc->rx_dest, now,
					      (uint16_t)md->csum);
	}
	lc->rx_dest = SG_DP_NO_DEST;
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

/* Pass @p n datagrams to reducer @p o's ring; what does not fit is dropped (counted). */
static void handoff(struct sg_dp_lcore *lc, unsigned int o, struct rte_mbuf **m, unsigned int n)
{
	unsigned int e = rte_ring_enqueue_burst(lc->p->red[o]->ring, (void **)m, n, NULL);

	lc->st.handoff_pkts += e;
	if (e > 0 && lc->p->memif != NULL)
		sg_dp_memif_wake(lc->p->red[o]); /* it may block on its memif wake-up channel */
	lc->st.drops[SG_DP_ND_RING_FULL] += n - e;
	rte_pktmbuf_free_bulk(m + e, n - e);
}

/* Receive a burst from one RX queue: answer ARP, reduce what this lcore owns, hand the
 * rest to its owners. */
static unsigned int rx_queue(struct sg_dp_lcore *lc, uint16_t port, uint16_t queue,
			     unsigned int burst)
{
	struct rte_mbuf *pkts[SG_DP_MAX_BURST];
	struct sg_dp_pipeline *p = lc->p;
	const struct sg_dp_net *net = &p->net[port];
	struct rte_mbuf *local[SG_DP_MAX_BURST];
	struct rte_mbuf *hand[SG_DP_MAX_LAYOUT][64];
	unsigned int nhand[SG_DP_MAX_LAYOUT] = {0};
	unsigned int nl = 0, n;
	bool any_hand = false;

	if (unlikely(p->port_off[port]))
		return 0;
	n = rte_eth_rx_burst(port, queue, pkts, (uint16_t)burst);
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
		k = sg_dp_net_classify_csum(net, rte_pktmbuf_mtod(m, void *), m->data_len,
					    m->ol_flags, &md->peer, &md->off, &md->len, &md->csum,
					    &why);
		if (k == SG_DP_RX_DROP) {
			lc->st.drops[why]++;
			rte_pktmbuf_free(m);
			continue;
		}
		if (k == SG_DP_RX_ARP) {
			lc->st.arp_replies++;
			m->ol_flags = 0;
			tx_enqueue(lc, port, m);
			continue;
		}
		md->peer.port_id = port;
		/* the keymap names the owner (sg_dp_steer()); the owner sees to key moves */
		o = sg_dp_owner_of(p, rte_pktmbuf_mtod_offset(m, uint8_t *, md->off), md->len);
		if (p->red[o] == lc) {
			local[nl++] = m;
			continue;
		}
		hand[o][nhand[o]++] = m;
		any_hand = true;
		if (nhand[o] == RTE_DIM(hand[o])) {
			handoff(lc, o, hand[o], nhand[o]);
			nhand[o] = 0;
		}
	}
	if (any_hand)
		for (unsigned int o = 0; o < p->n_red; o++)
			if (nhand[o])
				handoff(lc, o, hand[o], nhand[o]);
	if (nl)
		reduce_burst(lc, local, nl);
	return n;
}

static unsigned int eth_rx(struct sg_dp_lcore *lc, unsigned int burst)
{
	unsigned int n = rx_queue(lc, lc->rx_port, lc->rx_queue, burst);

	for (unsigned int i = 0; i < lc->n_xq; i++)
		n += rx_queue(lc, lc->xq_port[i], lc->xq[i], burst);
	return n;
}

static unsigned int eth_rx_steered(struct sg_dp_lcore *lc, unsigned int burst)
{
	const struct sg_dp_pipeline *p = lc->p;
	unsigned int n = 0;

	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_steer[port])
			n += rx_queue(lc, port, (uint16_t)(p->steer_q0[port] + lc->red_idx), burst);
	return n;
}

/* ---- stopping one port ---------------------------------------------------- */

void sg_dp_eth_port_gate(struct sg_dp_pipeline *p, uint16_t port, bool open)
{
	uint64_t t;

	p->port_off[port] = !open;
	if (open)
		return;
	/* every lcore in a burst began it before the flag: wait for its next loop */
	t = rte_rcu_qsbr_start(p->rcu);
	while (!rte_rcu_qsbr_check(p->rcu, t, false))
		rte_delay_us_sleep(20);
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

static struct rte_mempool *pool_make(struct sg_dp_pipeline *p, const char *name, int socket,
				     char *err, size_t errlen)
{
	uint32_t data = RTE_MAX(p->max_frame, 2048u);
	struct rte_mempool *mp;
	uint16_t room;

	/* every port's RX must fit one frame in one mbuf (no chains on the data path);
	 * net_af_xdp: the kernel writes frames after XDP's headroom */
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_used[port])
			data = RTE_MAX(data, sg_dp_xdp_port(port) ? p->max_frame + SG_DP_XDP_HEADROOM :
					     port_rx_room(port));
	room = (uint16_t)(RTE_PKTMBUF_HEADROOM + data);
	mp = rte_pktmbuf_pool_create(name, p->cfg.mbufs, 256, SG_DP_MBUF_PRIV_SIZE, room, socket);
	if (mp == NULL)
		sg_dp_seterr(err, errlen, "mempool of %u mbufs of %u bytes on socket %d: %s (lower "
		       "[resources] mbufs, or give EAL more memory with -m)", p->cfg.mbufs, room,
		       socket, rte_strerror(rte_errno));
	else
		sg_dp_net_pool_populate(mp);
	return mp;
}

static struct rte_mempool *socket_pool(struct sg_dp_pipeline *p, int socket, char *err,
				       size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];

	if (p->pools[socket])
		return p->pools[socket];
	snprintf(name, sizeof(name), "sg_mbuf_%d_%u", socket, (unsigned int)getpid());
	p->pools[socket] = pool_make(p, name, socket, err, errlen);
	return p->pools[socket];
}

/*
 * The RX pool of @p port: the lcore's (its socket's), or for a net_af_xdp port
 * after the first, a pool of its own: the PMD registers an RX pool as the
 * port's UMEM, and two ports on one pool received nothing (22.11, no shared
 * UMEM). NULL with @p err on failure.
 */
static struct rte_mempool *rx_pool(struct sg_dp_pipeline *p, uint16_t port,
				   const struct sg_dp_lcore *lc, char *err, size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	bool first = true;

	if (p->port_pool[port] != NULL || !sg_dp_xdp_port(port))
		return p->port_pool[port] ? p->port_pool[port] : lc->pool;
	for (uint16_t q = 0; q < port; q++)
		first &= !(p->port_started[q] && sg_dp_xdp_port(q));
	if (first)
		return lc->pool;
	snprintf(name, sizeof(name), "sg_xdp%u_%u", port, (unsigned int)getpid());
	p->port_pool[port] = pool_make(p, name, lc->socket, err, errlen);
	return p->port_pool[port];
}

/*
 * RX queues @p port fills whatever sigmad configures, or 0. net_af_packet opens
 * one packet socket per queue pair at probe time (its qpairs devarg, which must
 * cover one TX queue per lcore) and the kernel spreads incoming frames over all
 * of them; a ring port's RX rings are fed by whoever made them. A queue left
 * unpolled there loses what lands on it without a counter.
 */
static uint16_t port_fixed_rxq(const struct rte_eth_dev_info *info)
{
	if (!strcmp(info->driver_name, "net_af_packet") || !strcmp(info->driver_name, "net_ring"))
		return info->max_rx_queues;
	return 0;
}

/*
 * Give the port's RX queues @p nrxq .. @p nall - 1, which the layout does not
 * name, to the lcores that poll the port, in turn. @return 0, or -ENOSPC (with
 * @p err) when an lcore would poll more than SG_DP_MAX_XQ extra queues.
 */
static int extra_rxq_assign(struct sg_dp_pipeline *p, uint16_t port, const char *driver,
			    uint16_t nrxq, uint16_t nall, char *err, size_t errlen)
{
	char list[160] = "";
	size_t off = 0;
	unsigned int i = 0;

	for (uint16_t q = nrxq; q < nall; q++) {
		struct sg_dp_lcore *lc;

		do
			lc = &p->lc[i++ % p->n_lc];
		while (!(lc->role & SG_ROLE_IO) || lc->rx_port != port);
		if (lc->n_xq == SG_DP_MAX_XQ) {
			sg_dp_seterr(err, errlen, "port %u (%s) has %u RX queues and the layout polls "
				     "%u: more than %d each for its lcores to poll; name more of them "
				     "in the layout", port, driver, nall, nrxq, SG_DP_MAX_XQ);
			return -ENOSPC;
		}
		lc->xq_port[lc->n_xq] = port;
		lc->xq[lc->n_xq++] = q;
		if (off < sizeof(list))
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%squeue %u by "
						"lcore %u", off ? ", " : "", q, lc->lcore_id);
	}
	if (nall > nrxq)
		SG_DP_LOG(NOTICE, "port %u (%s) fills %u RX queues whatever the layout says, which "
			  "names %u: sigmad polls the others too (%s)", port, driver, nall,
			  nrxq, list);
	return 0;
}

/*
 * Configure and start @p port with its RX queues @p nrxq (the layout's and the
 * port's own, p->lc[].xq) plus @p nsteer more (queue nrxq + r: reducer r's
 * steered queue, on the reducer's socket and pool).
 */
static int port_start(struct sg_dp_pipeline *p, uint16_t port, const struct rte_eth_dev_info *info,
		      uint16_t nrxq, uint16_t nsteer, uint64_t *tx_offloads)
{
	const struct sg_dp_config *c = &p->cfg;
	struct rte_eth_conf conf = {0};
	struct rte_eth_txconf txc;
	uint16_t rxd = (uint16_t)c->rxd, txd = (uint16_t)c->txd, ntxq;
	/* MULTI_SEGS: RESULT fan-out chains header mbufs to one payload mbuf */
	uint64_t want_tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS |
			   (c->udp_checksum ? RTE_ETH_TX_OFFLOAD_UDP_CKSUM : 0);
	int rc;

	conf.txmode.offloads = info->tx_offload_capa & want_tx;
	conf.rxmode.offloads = info->rx_offload_capa &
			       (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
	/* net_tap wants as many TX queues as RX queues: spare TX queues cost nothing */
	ntxq = nsteer ? RTE_MAX((uint16_t)p->n_lc, (uint16_t)(nrxq + nsteer)) : (uint16_t)p->n_lc;
	rc = rte_eth_dev_configure(port, nrxq + nsteer, ntxq, &conf);
	if (rc < 0)
		return rc;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (rc < 0)
		return rc;
	rc = rte_eth_dev_set_mtu(port, c->mtu);
	/* virtual ports without an MTU setting (ring, memif) pass any frame size */
	if (rc == -ENOTSUP)
		SG_DP_LOG(INFO, "port %u (%s) has no MTU setting", port, info->driver_name);
	else if (rc < 0 && port_rx_room(port) > 0)
		/* af_packet reports 1518-byte frames at most whatever its framesz: the
		 * kernel interface's MTU and framesz are what limit it */
		SG_DP_LOG(INFO, "port %u (%s): MTU %u: set it on the kernel interface (ip link "
			  "set IFACE mtu %u) and give the vdev framesz=16384 for jumbo frames",
			  port, info->driver_name, c->mtu, c->mtu);
	else if (rc < 0)
		SG_DP_LOG(WARNING, "port %u: cannot set MTU %u (%s): frames above the port's own "
			  "limit will be lost; lower [net] mtu", port, c->mtu, strerror(-rc));
	txc = info->default_txconf;
	txc.offloads = conf.txmode.offloads;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];

		char perr[160];
		struct rte_mempool *mp = rx_pool(p, port, lc, perr, sizeof(perr));

		if (mp == NULL) {
			SG_DP_LOG(ERR, "port %u: %s", port, perr);
			return -ENOMEM;
		}
		rc = 0;
		if ((lc->role & SG_ROLE_IO) && lc->rx_port == port) {
			rc = rte_eth_rx_queue_setup(port, lc->rx_queue, rxd, (unsigned int)lc->socket,
						    NULL, mp);
			if (rc == 0 && sg_dp_xdp_port(port))
				sg_dp_xdp_queue_set_up(port, lc->rx_queue);
		}
		for (uint16_t x = 0; x < lc->n_xq && rc == 0; x++)
			if (lc->xq_port[x] == port) {
				rc = rte_eth_rx_queue_setup(port, lc->xq[x], rxd,
							    (unsigned int)lc->socket, NULL, mp);
				if (rc == 0 && sg_dp_xdp_port(port))
					sg_dp_xdp_queue_set_up(port, lc->xq[x]);
			}
		if (rc < 0)
			return rc;
		rc = rte_eth_tx_queue_setup(port, (uint16_t)i, txd, (unsigned int)lc->socket, &txc);
		if (rc < 0)
			return rc;
	}
	for (uint16_t r = 0; r < nsteer; r++) {
		struct sg_dp_lcore *lc = p->red[r];

		rc = rte_eth_rx_queue_setup(port, nrxq + r, rxd, (unsigned int)lc->socket, NULL,
					    lc->pool);
		if (rc < 0)
			return rc;
	}
	for (uint16_t q = (uint16_t)p->n_lc; q < ntxq && rc == 0; q++)
		rc = rte_eth_tx_queue_setup(port, q, txd, (unsigned int)p->lc[0].socket, &txc);
	if (rc < 0)
		return rc;
	*tx_offloads = conf.txmode.offloads;
	return rte_eth_dev_start(port);
}

void sg_dp_steer_rule(struct sg_dp_flow_rule *r, uint32_t ip, uint16_t udp_port,
		      unsigned int reducer, uint16_t queue)
{
	memset(r, 0, sizeof(*r));
	r->attr.ingress = 1;
	r->ip_spec.hdr.dst_addr = ip;
	r->ip_mask.hdr.dst_addr = RTE_BE32(UINT32_MAX);
	r->udp_spec.hdr.dst_port = rte_cpu_to_be_16((uint16_t)(udp_port + 1 + reducer));
	r->udp_mask.hdr.dst_port = RTE_BE16(UINT16_MAX);
	r->pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
	r->pattern[1] = (struct rte_flow_item){.type = RTE_FLOW_ITEM_TYPE_IPV4,
					       .spec = &r->ip_spec, .mask = &r->ip_mask};
	r->pattern[2] = (struct rte_flow_item){.type = RTE_FLOW_ITEM_TYPE_UDP,
					       .spec = &r->udp_spec, .mask = &r->udp_mask};
	r->pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
	r->queue.index = queue;
	r->action[0] = (struct rte_flow_action){.type = RTE_FLOW_ACTION_TYPE_QUEUE,
						.conf = &r->queue};
	r->action[1].type = RTE_FLOW_ACTION_TYPE_END;
}

/* Validate, then create, one rule per reducer on @p port (queue q0 + r); on failure
 * none stays and @p why says which rule failed and what the PMD said. */
static int steer_install(struct sg_dp_pipeline *p, uint16_t port, uint16_t q0, bool create,
			 char *why, size_t whylen)
{
	for (int pass = 0; pass < (create ? 2 : 1); pass++)
		for (unsigned int r = 0; r < p->n_red; r++) {
			struct sg_dp_flow_rule rule;
			struct rte_flow_error fe = {0};
			int rc = 0;

			sg_dp_steer_rule(&rule, rte_cpu_to_be_32(p->cfg.ip), p->cfg.udp_port, r,
					 (uint16_t)(q0 + r));
			if (pass == 0)
				rc = rte_flow_validate(port, &rule.attr, rule.pattern, rule.action,
						       &fe);
			else if (rte_flow_create(port, &rule.attr, rule.pattern, rule.action,
						 &fe) == NULL)
				rc = -rte_errno;
			if (rc < 0) {
				if (pass == 1)
					rte_flow_flush(port, &(struct rte_flow_error){0});
				sg_dp_seterr(why, whylen, "rte_flow_%s of reducer %u's rule (udp dst "
					     "%u -> queue %u): %s", pass ? "create" : "validate",
					     r, p->cfg.udp_port + 1 + r, q0 + r,
					     fe.message ? fe.message : rte_strerror(-rc));
				return rc;
			}
		}
	return 0;
}

/*
 * Can @p port steer at all, before its queues are touched? A PMD without flow
 * operations (ring, memif, null, af_packet) answers ENOSYS whatever the rule.
 */
static bool steer_possible(struct sg_dp_pipeline *p, uint16_t port,
			   const struct rte_eth_dev_info *info, uint16_t nrxq, char *why,
			   size_t whylen)
{
	if (p->n_red == 0 || p->cfg.steer == SG_DP_STEER_OFF)
		return false;
	if ((unsigned int)p->cfg.udp_port + p->n_red > UINT16_MAX) {
		sg_dp_seterr(why, whylen, "udp_port %u + %u reducers passes 65535",
			     p->cfg.udp_port, p->n_red);
		return false;
	}
	if ((unsigned int)nrxq + p->n_red > info->max_rx_queues) {
		sg_dp_seterr(why, whylen, "it has %u RX queue(s) at most; steering needs %u (%u "
			     "polled by I/O lcores, 1 per reducer)", info->max_rx_queues,
			     nrxq + p->n_red, nrxq);
		return false;
	}
	if (steer_install(p, port, nrxq, false, why, whylen) != -ENOSYS)
		return true; /* other refusals may be about unconfigured queues: try for real */
	sg_dp_seterr(why, whylen, "the PMD has no rte_flow support (rte_flow_validate: %s)",
		     rte_strerror(ENOSYS));
	return false;
}

static int port_setup(struct sg_dp_pipeline *p, uint16_t port, char *err, size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	struct rte_eth_dev_info info;
	struct sg_dp_net *net = &p->net[port];
	char *why = p->steer_why[port];
	size_t whylen = sizeof(p->steer_why[port]);
	uint16_t nrxq = 0;
	uint64_t txo = 0;
	bool steer;
	int rc;

	rc = rte_eth_dev_info_get(port, &info);
	if (rc < 0)
		goto fail;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		nrxq += (p->lc[i].role & SG_ROLE_IO) && p->lc[i].rx_port == port;
		for (uint16_t x = 0; x < p->lc[i].n_xq; x++) /* [layout] extra_rx */
			nrxq += p->lc[i].xq_port[x] == port;
	}
	if (port_fixed_rxq(&info) > nrxq) {
		uint16_t nall = port_fixed_rxq(&info);

		rc = extra_rxq_assign(p, port, info.driver_name, nrxq, nall, err, errlen);
		if (rc < 0)
			return rc;
		nrxq = nall;
	}
	snprintf(why, whylen, "%s", c->steer == SG_DP_STEER_OFF ? "steer = off" : "no reducer");
	steer = steer_possible(p, port, &info, nrxq, why, whylen);
	if (steer) {
		rc = port_start(p, port, &info, nrxq, (uint16_t)p->n_red, &txo);
		if (rc < 0)
			sg_dp_seterr(why, whylen, "it refuses %u RX queues: %s", nrxq + p->n_red,
				     rte_strerror(-rc));
		else if (steer_install(p, port, nrxq, true, why, whylen) == 0)
			p->port_steer[port] = true;
		else
			rte_eth_dev_stop(port);
	}
	if (p->port_steer[port]) {
		p->steer_q0[port] = nrxq;
		snprintf(why, whylen, "%u rte_flow rules: udp dst %u..%u -> RX queues %u..%u",
			 p->n_red, c->udp_port + 1, c->udp_port + p->n_red, nrxq,
			 nrxq + p->n_red - 1);
	} else if (c->steer == SG_DP_STEER_FLOW) {
		sg_dp_seterr(err, errlen, "port %u (%s): steer = flow, but the port cannot steer: "
			     "%s (set [net] steer = auto, or off, or --steer auto)", port,
			     info.driver_name, why);
		return -ENOTSUP;
	} else {
		if (c->steer == SG_DP_STEER_AUTO && p->n_red > 0)
			SG_DP_LOG(INFO, "port %u (%s): no reducer steering, rte_ring hand-off "
				  "instead: %s", port, info.driver_name, why);
		/* the layout's queues alone: nothing would drain steering queues */
		rc = port_start(p, port, &info, nrxq, 0, &txo);
		if (rc < 0)
			goto fail;
	}
	p->port_started[port] = true;
	p->port_rxq[port] = (uint16_t)(nrxq + (p->port_steer[port] ? p->n_red : 0));
	memset(net, 0, sizeof(*net));
	if (rte_is_zero_ether_addr(&c->mac_override))
		rte_eth_macaddr_get(port, &net->mac);
	else
		net->mac = c->mac_override;
	net->ip = rte_cpu_to_be_32(c->ip);
	net->udp_port = rte_cpu_to_be_16(c->udp_port);
	/* every reducer's port is accepted whatever steering does (docs/sigmad.md) */
	net->steer_ports = (uint16_t)RTE_MIN(SG_DP_STEER_PORTS, UINT16_MAX - c->udp_port);
	net->udp_checksum = c->udp_checksum;
	net->tx_ip_csum_offload = (txo & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
	net->tx_udp_csum_offload = (txo & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
	p->port_chains[port] = (txo & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
	/* af_xdp: the XDP program steers the node's port and every reducer's */
	rc = sg_dp_xdp_port_started(port, net->ip, c->udp_port, (uint16_t)(1 + net->steer_ports),
				    err, errlen);
	if (rc < 0)
		return rc;
	SG_DP_LOG(INFO, "port %u (%s): %u RX queue(s), %u TX queue(s), checksums %s, "
		  "steering %s", port, info.driver_name,
		  nrxq + (p->port_steer[port] ? p->n_red : 0), p->n_lc,
		  net->tx_ip_csum_offload ? "offloaded" : "in software",
		  p->port_steer[port] ? "by rte_flow" : "by rte_ring");
	return 0;
fail:
	sg_dp_seterr(err, errlen, "port %u: set-up failed: %s", port, rte_strerror(-rc));
	sg_dp_xdp_explain(port, c->mtu, rc, err, errlen);
	return rc < 0 ? rc : -EIO;
}

static int eth_setup(struct sg_dp_pipeline *p, char *err, size_t errlen)
{
	int rc;

	/* before any port starts: the relay must stand between memif clients and the PMD */
	rc = sg_dp_memif_guard_start(p, err, errlen);
	if (rc < 0)
		return rc;
	for (unsigned int r = 0; r < p->n_red; r++)
		p->red[r]->red_idx = (uint16_t)r;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];

		lc->pool = socket_pool(p, lc->socket, err, errlen);
		if (lc->pool == NULL)
			return -ENOMEM;
		lc->rx_dest = SG_DP_NO_DEST;
		if (lc->role & SG_ROLE_REDUCE) {
			char name[RTE_HASH_NAMESIZE];

			snprintf(name, sizeof(name), "sg_peer%u_%u", lc->lcore_id,
				 (unsigned int)getpid());
			lc->peers = sg_dp_peers_create(name, p->cfg.peers, lc->socket);
			if (lc->peers == NULL) {
				sg_dp_seterr(err, errlen, "reducer lcore %u: table of %u reply "
					     "addresses: %s (lower [resources] peers)",
					     lc->lcore_id, p->cfg.peers, rte_strerror(rte_errno));
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
	sg_dp_xdp_wait_setup(p);
	return 0;
}

static void eth_teardown(struct sg_dp_pipeline *p)
{
	sg_dp_xdp_wait_teardown();
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_started[port]) {
			if (p->port_steer[port])
				rte_flow_flush(port, &(struct rte_flow_error){0});
			p->port_steer[port] = false;
			rte_eth_dev_stop(port);
			p->port_started[port] = false;
		}
	for (unsigned int i = 0; p->lc && i < p->n_lc; i++) {
		sg_dp_peers_free(p->lc[i].peers);
		p->lc[i].peers = NULL;
	}
	for (unsigned int s = 0; s < RTE_MAX_NUMA_NODES; s++) {
		rte_mempool_free(p->pools[s]);
		p->pools[s] = NULL;
	}
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++) {
		rte_mempool_free(p->port_pool[port]);
		p->port_pool[port] = NULL;
	}
}

/* An idle lcore blocks: on its memif ports' wake-up channels, or on its AF_XDP sockets. */
static bool eth_idle_wait(struct sg_dp_lcore *lc, unsigned int us)
{
	return sg_dp_memif_idle_wait(lc, us) || sg_dp_xdp_idle_wait(lc, us);
}

static void eth_wake(struct sg_dp_lcore *lc)
{
	sg_dp_memif_wake(lc);
	sg_dp_xdp_wake(lc);
}

static const struct sg_dp_transport sg_dp_transport_ethdev = {
	.name = "ethdev",
	.setup = eth_setup,
	.teardown = eth_teardown,
	.rx = eth_rx,
	.rx_steered = eth_rx_steered,
	.reduce = eth_reduce,
	.release = eth_release,
	.flush = eth_flush,
	.tx = {.alloc = tx_alloc, .send = tx_send, .alloc_multi = tx_alloc_multi,
	       .send_multi = tx_send_multi, .accept = tx_accept, .payload_csum = tx_payload_csum},
	.poll = eth_poll,
	/* memif ports whose clients opened a wake-up channel (sg_dp_memif.c), and
	 * net_af_xdp ports (sg_dp_xdp.c) */
	.idle_wait = eth_idle_wait,
	.wake = eth_wake,
};
SG_DP_TRANSPORT_REGISTER(SG_DP_TRANSPORT_DPDK, sg_dp_transport_ethdev);
