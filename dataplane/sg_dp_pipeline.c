/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's lcore pipeline: ports, per-socket mempools, reducer rings, one
 * aggregation engine per reducer lcore, and the lcore loops that connect
 * them.
 *
 * Data path of one push: an I/O (or run-to-completion) lcore receives the
 * frame, checks Ethernet/IPv4/UDP (sg_dp_net_classify), and picks the reducer
 * that owns the datagram's (job, key). If that is itself it sums at once;
 * otherwise the mbuf goes to the owner's rte_ring. The reducer gives the
 * payload to its engine; the engine's replies are built straight into fresh
 * mbufs (tx_alloc/tx_send) and sent on the reducer's own TX queue of the
 * port the worker talks through. Nothing on this path allocates from the
 * heap or takes a lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_ip.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_dp_engine.h"
#include "sg_dp_internal.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"

RTE_LOG_REGISTER(sg_dp_logtype, sigma.dataplane, INFO);
#define LOG(lvl, ...) rte_log(RTE_LOG_##lvl, sg_dp_logtype, "sigmad: " __VA_ARGS__)

#define TXB 64          /* frames buffered per port before a TX burst */
#define MAX_BURST 512
#define PEERS 4096      /* reply addresses remembered per reducer */
#define IDLE_SPIN 256   /* empty polls before the sleep policy starts sleeping */

/* Where a received datagram came from and where its payload is: written by
 * the receiving lcore into the mbuf's private area, read by the reducer. */
struct rx_meta {
	struct sg_dp_peer peer;
	uint32_t off;
	uint32_t len;
};

struct sg_dp_lcore {
	struct sg_dp_pipeline *p;
	unsigned int idx;
	unsigned int lcore_id;
	enum sg_dp_role role;
	int socket;
	uint16_t rx_port, rx_queue;
	struct rte_ring *ring;      /* reducers: hand-off input */
	struct sg_dp_engine *eng;   /* reducers */
	struct rte_hash *peers;     /* reducers: reply address -> MAC */
	struct rte_mempool *pool;   /* this socket's mbufs */
	uint64_t cur_dest;          /* address of the packet the engine is building */
	uint64_t next_poll_tsc;
	uint64_t pushes;            /* engine's rx_pushes after the last push */
	struct sg_dp_stats es;      /* scratch copy of the engine's counters */
	uint16_t txn[SG_DP_MAX_PORTS];
	struct rte_mbuf *txb[SG_DP_MAX_PORTS][TXB];
	struct sg_dp_lcore_stats st;
} __rte_cache_aligned;

struct sg_dp_pipeline {
	struct sg_dp_config cfg;
	struct sg_dp_topology topo;
	unsigned int n_lc, n_red;
	struct sg_dp_lcore *lc;
	struct sg_dp_lcore *red[SG_DP_MAX_LAYOUT];
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES];
	bool port_used[SG_DP_MAX_PORTS];
	bool port_started[SG_DP_MAX_PORTS];
	struct sg_dp_net net[SG_DP_MAX_PORTS];
	uint32_t job_hash_seed;
	double ns_per_tsc;
	uint32_t max_frame;
	bool running;
	/* written by the main thread, read by lcores */
	volatile bool stop_rx;
	volatile bool stop_req;
	volatile int io_running;
	volatile unsigned int idle_sleep_us;
};

_Static_assert(sizeof(struct rx_meta) <= SG_DP_MBUF_PRIV_SIZE, "rx_meta fits the mbuf priv area");
_Static_assert(SG_DP_MBUF_PRIV_SIZE % RTE_MBUF_PRIV_ALIGN == 0, "priv size alignment");

/* ---- helpers ------------------------------------------------------------ */

static inline uint64_t now_ns(const struct sg_dp_pipeline *p, uint64_t tsc)
{
	return (uint64_t)((double)tsc * p->ns_per_tsc);
}

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

/* Reducer that owns (job, key): consecutive keys go round-robin so that a
 * job's partitions spread evenly over the reducers. */
static inline unsigned int owner_of(const struct sg_dp_pipeline *p, const uint8_t *pl,
				    uint32_t len)
{
	uint32_t job, key;

	if (p->n_red == 1 || len < SG_DP_HDR_LEN)
		return 0; /* a short datagram is the engine's to count */
	memcpy(&job, pl + 8, sizeof(job));
	memcpy(&key, pl + 24, sizeof(key));
	job = rte_be_to_cpu_32(job);
	key = rte_be_to_cpu_32(key);
	return ((job * 0x9e3779b1u >> 8) + key) % p->n_red;
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
	if (lc->txn[port] == TXB)
		tx_flush(lc, port);
}

static unsigned int tx_flush_all(struct sg_dp_lcore *lc)
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

/* ---- lcore loops -------------------------------------------------------- */

static void reduce_burst(struct sg_dp_lcore *lc, struct rte_mbuf **pkts, unsigned int n)
{
	uint64_t now = now_ns(lc->p, rte_rdtsc());

	for (unsigned int i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct rx_meta *md = rte_mbuf_to_priv(m);
		const uint8_t *pl = rte_pktmbuf_mtod_offset(m, const uint8_t *, md->off);
		uint64_t dest = peer_dest(&md->peer), mb = mac_bits(&md->peer.mac);
		void *known;

		/* learn (or refresh) the worker's MAC for the replies */
		if (rte_hash_lookup_data(lc->peers, &dest, &known) < 0 ||
		    (uintptr_t)known != mb) {
			if (rte_hash_add_key_data(lc->peers, &dest, (void *)(uintptr_t)mb) < 0) {
				lc->st.drops[SG_DP_ND_PEER_TABLE]++;
				continue;
			}
		}
		lc->st.reduced_pkts++;
		if (md->len > SG_DP_HDR_LEN && pl[5] == SG_DP_T_PUSH) {
			/* the engine's push counter tells a summed push from one that was
			 * answered from the kept result or refused with a NACK */
			uint64_t before = lc->pushes;

			if (sg_dp_engine_rx(lc->eng, pl, md->len, dest, now) < 0)
				lc->st.drops[SG_DP_ND_PROTO]++;
			sg_dp_engine_stats(lc->eng, &lc->es);
			lc->pushes = lc->es.rx_pushes;
			if (lc->pushes != before)
				lc->st.bytes_summed += md->len - SG_DP_HDR_LEN;
		} else if (sg_dp_engine_rx(lc->eng, pl, md->len, dest, now) < 0) {
			lc->st.drops[SG_DP_ND_PROTO]++;
		}
	}
	rte_pktmbuf_free_bulk(pkts, n);
}

static unsigned int lcore_rx(struct sg_dp_lcore *lc, struct rte_mbuf **pkts, unsigned int burst)
{
	struct sg_dp_pipeline *p = lc->p;
	const struct sg_dp_net *net = &p->net[lc->rx_port];
	struct rte_mbuf *local[MAX_BURST];
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
		o = owner_of(p, rte_pktmbuf_mtod_offset(m, uint8_t *, md->off), md->len);
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

static void idle_wait(struct sg_dp_lcore *lc, unsigned int *idle_polls)
{
	unsigned int shift, us;

	if (*(volatile enum sg_dp_idle *)&lc->st.idle != SG_DP_IDLE_SLEEP ||
	    ++*idle_polls < IDLE_SPIN)
		return;
	/* back off exponentially from 1 us up to the configured longest sleep */
	shift = RTE_MIN(*idle_polls - IDLE_SPIN, 20u);
	us = RTE_MIN(1u << shift, lc->p->idle_sleep_us);
	rte_delay_us_sleep(us);
}

static int lcore_main(void *arg)
{
	struct sg_dp_lcore *lc = arg;
	struct sg_dp_pipeline *p = lc->p;
	struct rte_mbuf *pkts[MAX_BURST];
	unsigned int burst = RTE_MIN(p->cfg.burst, (unsigned int)MAX_BURST);
	unsigned int idle_polls = 0;
	bool rx_on = (lc->role & SG_DP_ROLE_IO) != 0;
	bool reduce = (lc->role & SG_DP_ROLE_REDUCE) != 0;
	uint64_t poll_period = rte_get_tsc_hz() / 1000;

	for (;;) {
		uint64_t t0 = rte_rdtsc(), t1;
		unsigned int work = 0, nr = 0;

		if (rx_on) {
			if (p->stop_rx) {
				rx_on = false;
				__atomic_fetch_sub(&p->io_running, 1, __ATOMIC_RELEASE);
			} else {
				work += lcore_rx(lc, pkts, burst);
			}
		}
		if (reduce) {
			nr = rte_ring_dequeue_burst(lc->ring, (void **)pkts, burst, NULL);
			if (nr)
				reduce_burst(lc, pkts, nr);
			work += nr;
			if (t0 >= lc->next_poll_tsc) {
				/* a fresh clock: the engine's time must never run backwards */
				uint64_t t = rte_rdtsc();

				sg_dp_engine_poll(lc->eng, now_ns(p, t));
				lc->next_poll_tsc = t + poll_period;
			}
		}
		work += tx_flush_all(lc);
		if (!rx_on) {
			/* drain: a reducer leaves once no lcore can hand it more */
			if (!reduce)
				break;
			if (nr == 0 && __atomic_load_n(&p->io_running, __ATOMIC_ACQUIRE) == 0 &&
			    rte_ring_empty(lc->ring))
				break;
		}
		t1 = rte_rdtsc();
		if (work) {
			lc->st.busy_cycles += t1 - t0;
			idle_polls = 0;
		} else {
			idle_wait(lc, &idle_polls);
			lc->st.idle_cycles += rte_rdtsc() - t0;
		}
	}
	tx_flush_all(lc);
	return 0;
}

/* ---- set-up ------------------------------------------------------------- */

static int lcore_socket(unsigned int lcore)
{
	unsigned int s = rte_lcore_to_socket_id(lcore);

	return s >= RTE_MAX_NUMA_NODES ? 0 : (int)s;
}

static struct rte_mempool *socket_pool(struct sg_dp_pipeline *p, int socket, char *err,
				       size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	uint16_t room;

	if (p->pools[socket])
		return p->pools[socket];
	/* some PMDs want room for a whole ring frame (af_packet: 2016 bytes) */
	room = (uint16_t)(RTE_PKTMBUF_HEADROOM + (p->max_frame > 2048 ? p->max_frame : 2048));
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
	uint64_t want_tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
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
	if (rte_eth_dev_set_mtu(port, c->mtu) < 0)
		LOG(NOTICE, "port %u: cannot set MTU %u (%s); frames up to the port's own limit "
		    "are accepted\n", port, c->mtu, rte_strerror(rte_errno));
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
	LOG(INFO, "port %u (%s): %u RX queue(s), %u TX queue(s), checksums %s\n", port,
	    info.driver_name, nrxq, p->n_lc,
	    net->tx_ip_csum_offload ? "offloaded" : "in software");
	return 0;
fail:
	sg_dp_seterr(err, errlen, "port %u: set-up failed: %s", port, rte_strerror(-rc));
	return rc < 0 ? rc : -EIO;
}

static int reducer_setup(struct sg_dp_pipeline *p, struct sg_dp_lcore *lc, char *err,
			 size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	char name[RTE_RING_NAMESIZE];
	struct rte_hash_parameters hp = {.entries = PEERS, .key_len = sizeof(uint64_t),
					 .socket_id = lc->socket};
	struct sg_dp_engine_conf ec = {
		.numa_node = lc->socket,
		.pool_bufs = c->pool_bufs,
		.max_jobs = SG_DP_MAX_JOBS,
		.slot_timeout_ns = (uint64_t)c->timeout_ms * 1000000ull,
		.tx = {.alloc = tx_alloc, .send = tx_send, .ctx = lc},
	};
	uint32_t maxpl = 0;

	snprintf(name, sizeof(name), "sg_red%u_%u", lc->lcore_id, (unsigned int)getpid());
	lc->ring = rte_ring_create(name, c->ring_size, lc->socket, RING_F_SC_DEQ);
	if (lc->ring == NULL) {
		sg_dp_seterr(err, errlen, "reducer lcore %u: ring of %u: %s ([resources] ring_size must "
		       "be a power of two)", lc->lcore_id, c->ring_size, rte_strerror(rte_errno));
		return -rte_errno;
	}
	snprintf(name, sizeof(name), "sg_peer%u_%u", lc->lcore_id, (unsigned int)getpid());
	hp.name = name;
	lc->peers = rte_hash_create(&hp);
	if (lc->peers == NULL) {
		sg_dp_seterr(err, errlen, "reducer lcore %u: peer table: %s", lc->lcore_id,
		       rte_strerror(rte_errno));
		return -ENOMEM;
	}
	for (unsigned int j = 0; j < c->n_jobs; j++) {
		uint32_t cb = sg_dp_job_chunk_bytes(c, &c->jobs[j]);

		maxpl = RTE_MAX(maxpl, cb);
	}
	ec.max_payload = maxpl ? maxpl : SG_DP_PAYLOAD_MTU1500;
	lc->eng = sg_dp_engine_create(&ec);
	if (lc->eng == NULL) {
		sg_dp_seterr(err, errlen, "reducer lcore %u: engine: %s (pool of %u buffers of %u bytes)",
		       lc->lcore_id, strerror(errno), ec.pool_bufs, ec.max_payload);
		return -errno;
	}
	for (unsigned int j = 0; j < c->n_jobs; j++) {
		const struct sg_dp_job_cfg *jc = &c->jobs[j];
		size_t es = sg_dtype_size(jc->dtype);
		struct sg_dp_key *keys = calloc(jc->keys, sizeof(*keys));
		struct sg_dp_job_conf jconf = {
			.id = jc->id, .nworkers = jc->workers, .token = jc->token,
			.dtype = jc->dtype, .mode = jc->mode,
			.partition_bytes = jc->partition_bytes,
			.chunk_bytes = sg_dp_job_chunk_bytes(c, jc),
			.max_inflight = jc->slots, .keys = keys, .nkeys = jc->keys,
		};
		int rc;

		if (keys == NULL)
			return -ENOMEM;
		for (uint32_t k = 0; k < jc->keys; k++)
			keys[k] = (struct sg_dp_key){.id = k,
						     .nelem = (uint32_t)(jc->partition_bytes / es)};
		rc = sg_dp_engine_add_job(lc->eng, &jconf);
		free(keys);
		if (rc < 0) {
			sg_dp_seterr(err, errlen, "[job %u]: the engine refused it: %s (check workers, "
			       "partition_bytes and chunk_bytes against docs/protocol.md)", jc->id,
			       strerror(-rc));
			return rc;
		}
	}
	return 0;
}

struct sg_dp_pipeline *sg_dp_pipeline_create(const struct sg_dp_config *c, char *err,
					     size_t errlen)
{
	struct sg_dp_pipeline *p;
	unsigned int nwarn = 0;
	int rc;

	p = rte_zmalloc("sg_dp_pipeline", sizeof(*p), RTE_CACHE_LINE_SIZE);
	if (p == NULL) {
		sg_dp_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	p->cfg = *c;
	p->idle_sleep_us = c->idle_sleep_us;
	p->ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	p->max_frame = RTE_ETHER_HDR_LEN + c->mtu + RTE_ETHER_CRC_LEN;
	p->job_hash_seed = 0;
	sg_dp_topology_probe(&p->topo);
	rc = sg_dp_layout_check(c, &p->topo, err, errlen, stderr, &nwarn);
	if (rc < 0)
		goto fail;
	for (unsigned int j = 0; j < c->n_jobs; j++)
		if (c->jobs[j].partition_bytes % sg_dtype_size(c->jobs[j].dtype)) {
			sg_dp_seterr(err, errlen, "[job %u]: partition_bytes %u is not a multiple of the "
			       "%s element size", c->jobs[j].id, c->jobs[j].partition_bytes,
			       sg_dtype_name(c->jobs[j].dtype));
			rc = -EINVAL;
			goto fail;
		}
	p->n_lc = c->n_lcores;
	p->lc = rte_zmalloc("sg_dp_lcores", sizeof(*p->lc) * p->n_lc, RTE_CACHE_LINE_SIZE);
	if (p->lc == NULL) {
		rc = -ENOMEM;
		sg_dp_seterr(err, errlen, "out of memory");
		goto fail;
	}
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];
		const struct sg_dp_lcore_cfg *a = &c->lcores[i];

		lc->p = p;
		lc->idx = i;
		lc->lcore_id = a->lcore;
		lc->role = a->role;
		lc->socket = lcore_socket(a->lcore);
		lc->rx_port = a->port;
		lc->rx_queue = a->queue;
		lc->st.lcore = a->lcore;
		lc->st.role = a->role;
		lc->st.socket = lc->socket;
		lc->st.idle = c->sleep_lcores[a->lcore] ? SG_DP_IDLE_SLEEP : c->idle;
		lc->pool = socket_pool(p, lc->socket, err, errlen);
		if (lc->pool == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
		if (a->role & SG_DP_ROLE_IO)
			p->port_used[a->port] = true;
		if (a->role & SG_DP_ROLE_REDUCE)
			p->red[p->n_red++] = lc;
	}
	for (unsigned int i = 0; i < p->n_red; i++) {
		rc = reducer_setup(p, p->red[i], err, errlen);
		if (rc < 0)
			goto fail;
	}
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++) {
		if (!p->port_used[port])
			continue;
		rc = port_setup(p, port, err, errlen);
		if (rc < 0)
			goto fail;
	}
	return p;
fail:
	sg_dp_pipeline_destroy(p);
	errno = rc < 0 ? -rc : EINVAL;
	return NULL;
}

int sg_dp_pipeline_start(struct sg_dp_pipeline *p)
{
	int io = 0;

	if (p->running)
		return -EALREADY;
	for (unsigned int i = 0; i < p->n_lc; i++)
		io += (p->lc[i].role & SG_DP_ROLE_IO) != 0;
	p->stop_rx = false;
	p->stop_req = false;
	__atomic_store_n(&p->io_running, io, __ATOMIC_RELEASE);
	for (unsigned int i = 0; i < p->n_lc; i++) {
		int rc = rte_eal_remote_launch(lcore_main, &p->lc[i], p->lc[i].lcore_id);

		if (rc < 0) {
			LOG(ERR, "cannot launch lcore %u: %s\n", p->lc[i].lcore_id, strerror(-rc));
			/* the lcores already launched must still be stopped and joined */
			for (unsigned int j = i; j < p->n_lc; j++)
				if (p->lc[j].role & SG_DP_ROLE_IO)
					__atomic_fetch_sub(&p->io_running, 1, __ATOMIC_RELEASE);
			p->stop_rx = true;
			for (unsigned int j = 0; j < i; j++)
				rte_eal_wait_lcore(p->lc[j].lcore_id);
			return rc;
		}
	}
	p->running = true;
	return 0;
}

void sg_dp_pipeline_request_stop(struct sg_dp_pipeline *p)
{
	p->stop_req = true;
}

bool sg_dp_pipeline_stop_requested(const struct sg_dp_pipeline *p)
{
	return p->stop_req;
}

void sg_dp_pipeline_stop(struct sg_dp_pipeline *p)
{
	if (p == NULL || !p->running)
		return;
	p->stop_rx = true;
	for (unsigned int i = 0; i < p->n_lc; i++)
		rte_eal_wait_lcore(p->lc[i].lcore_id);
	p->running = false;
}

void sg_dp_pipeline_destroy(struct sg_dp_pipeline *p)
{
	if (p == NULL)
		return;
	sg_dp_pipeline_stop(p);
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (p->port_started[port])
			rte_eth_dev_stop(port);
	for (unsigned int i = 0; p->lc && i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];
		void *m;

		if (lc->ring)
			while (rte_ring_dequeue(lc->ring, &m) == 0)
				rte_pktmbuf_free(m);
		rte_ring_free(lc->ring);
		rte_hash_free(lc->peers);
		sg_dp_engine_destroy(lc->eng);
	}
	for (unsigned int s = 0; s < RTE_MAX_NUMA_NODES; s++)
		rte_mempool_free(p->pools[s]);
	rte_free(p->lc);
	rte_free(p);
}

/* ---- live reconfiguration and statistics -------------------------------- */

int sg_dp_pipeline_reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report)
{
	struct sg_dp_config *c = &p->cfg;
	int restart = 0;

#define NEEDS_RESTART(cond, what)                                                            \
	do {                                                                                \
		if (cond) {                                                                 \
			restart++;                                                          \
			if (report)                                                         \
				fprintf(report, "sigmad: SIGHUP: %s changed: needs a restart\n", \
					what);                                              \
		}                                                                           \
	} while (0)
	NEEDS_RESTART(nc->ip != c->ip || nc->udp_port != c->udp_port || nc->mtu != c->mtu ||
		      nc->udp_checksum != c->udp_checksum ||
		      !rte_is_same_ether_addr(&nc->mac_override, &c->mac_override), "[net]");
	NEEDS_RESTART(nc->n_lcores != c->n_lcores ||
		      memcmp(nc->lcores, c->lcores, sizeof(c->lcores[0]) * c->n_lcores),
		      "[layout]");
	NEEDS_RESTART(nc->burst != c->burst || nc->ring_size != c->ring_size ||
		      nc->mbufs != c->mbufs || nc->rxd != c->rxd || nc->txd != c->txd ||
		      nc->pool_bufs != c->pool_bufs, "[resources]");
	NEEDS_RESTART(nc->n_jobs != c->n_jobs ||
		      memcmp(nc->jobs, c->jobs, sizeof(c->jobs[0]) * c->n_jobs), "[job N]");
	/* the engine takes its slot timeout at creation only */
	NEEDS_RESTART(nc->timeout_ms != c->timeout_ms, "[live] timeout_ms");
#undef NEEDS_RESTART
	if (nc->idle != c->idle || nc->idle_sleep_us != c->idle_sleep_us ||
	    memcmp(nc->sleep_lcores, c->sleep_lcores, sizeof(c->sleep_lcores))) {
		c->idle = nc->idle;
		c->idle_sleep_us = nc->idle_sleep_us;
		memcpy(c->sleep_lcores, nc->sleep_lcores, sizeof(c->sleep_lcores));
		p->idle_sleep_us = nc->idle_sleep_us;
		for (unsigned int i = 0; i < p->n_lc; i++) {
			struct sg_dp_lcore *lc = &p->lc[i];

			*(volatile enum sg_dp_idle *)&lc->st.idle =
				c->sleep_lcores[lc->lcore_id] ? SG_DP_IDLE_SLEEP : c->idle;
			if (report)
				fprintf(report, "sigmad: SIGHUP: lcore %u idle policy now %s (sleep up "
					"to %u us)\n", lc->lcore_id,
					lc->st.idle == SG_DP_IDLE_BUSY ? "busy" : "sleep",
					c->idle_sleep_us);
		}
	}
	if (nc->log_level != c->log_level) {
		c->log_level = nc->log_level;
		rte_log_set_level_pattern("sigma.*", c->log_level);
		if (report)
			fprintf(report, "sigmad: SIGHUP: log level now %u\n", c->log_level);
	}
	c->stats_interval_s = nc->stats_interval_s;
	return restart;
}

unsigned int sg_dp_pipeline_n_lcores(const struct sg_dp_pipeline *p)
{
	return p->n_lc;
}

const struct sg_dp_config *sg_dp_pipeline_config(const struct sg_dp_pipeline *p)
{
	return &p->cfg;
}

int sg_dp_pipeline_lcore_stats(const struct sg_dp_pipeline *p, unsigned int idx,
			       struct sg_dp_lcore_stats *st)
{
	if (idx >= p->n_lc)
		return -EINVAL;
	/* lcores keep writing: a torn read of one counter is off by one burst at most */
	*st = p->lc[idx].st;
	st->ring_count = p->lc[idx].ring ? rte_ring_count(p->lc[idx].ring) : 0;
	return 0;
}

void sg_dp_pipeline_engine_stats(const struct sg_dp_pipeline *p, struct sg_dp_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned int r = 0; r < p->n_red; r++) {
		struct sg_dp_stats s;
		uint64_t *dst = (uint64_t *)st;
		const uint64_t *src = (const uint64_t *)&s;

		sg_dp_engine_stats(p->red[r]->eng, &s);
		/* every field is a uint64_t counter or gauge: sum them all */
		for (size_t i = 0; i < sizeof(s) / sizeof(uint64_t); i++)
			dst[i] += src[i];
	}
}

int sg_dp_pipeline_net(const struct sg_dp_pipeline *p, uint16_t port_id, struct sg_dp_net *net)
{
	if (port_id >= SG_DP_MAX_PORTS || !p->port_used[port_id])
		return -EINVAL;
	*net = p->net[port_id];
	return 0;
}

void sg_dp_pipeline_print_stats(const struct sg_dp_pipeline *p, FILE *f, double seconds)
{
	struct sg_dp_stats es;
	uint64_t drops[SG_DP_ND_COUNT] = {0};

	fprintf(f, "%-6s %-7s %-4s %6s %12s %12s %10s %12s %12s %6s %8s\n", "lcore", "role",
		"node", "busy%", "rx_pkts", "tx_pkts", "handoff", "reduced", "GB_summed", "ring",
		"drops");
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore_stats st;
		uint64_t d = 0, tot;

		sg_dp_pipeline_lcore_stats(p, i, &st);
		for (int k = 0; k < SG_DP_ND_COUNT; k++) {
			d += st.drops[k];
			drops[k] += st.drops[k];
		}
		tot = st.busy_cycles + st.idle_cycles;
		fprintf(f, "%-6u %-7s %-4d %6.1f %12" PRIu64 " %12" PRIu64 " %10" PRIu64
			" %12" PRIu64 " %12.3f %6" PRIu64 " %8" PRIu64 "\n", st.lcore,
			sg_dp_role_name(st.role), st.socket, tot ? 100.0 * st.busy_cycles / tot : 0.0,
			st.rx_pkts, st.tx_pkts, st.handoff_pkts, st.reduced_pkts,
			st.bytes_summed / 1e9, st.ring_count, d);
		if (seconds > 0)
			fprintf(f, "%-6s %-7s %-4s %6s %9.3f Mpps %9.3f Mpps %25s %7.2f Gbps\n", "",
				"", "", "", st.rx_pkts / seconds / 1e6, st.tx_pkts / seconds / 1e6,
				"", st.bytes_summed * 8 / seconds / 1e9);
	}
	for (int k = 0; k < SG_DP_ND_COUNT; k++)
		if (drops[k])
			fprintf(f, "  drop %-12s %" PRIu64 "\n", sg_dp_ndrop_name(k), drops[k]);
	sg_dp_pipeline_engine_stats(p, &es);
	fprintf(f, "engine: %" PRIu64 " pushes, %" PRIu64 " rounds completed, %" PRIu64
		" results sent, %" PRIu64 " retransmits served, %" PRIu64 " NACKs, %" PRIu64
		" slot timeouts, %" PRIu64 " incomplete now\n", es.rx_pushes, es.rounds_completed,
		es.results_sent, es.retransmits_served, es.nacks_sent, es.slot_timeouts,
		es.incomplete_slots);
	for (int k = 1; k < SG_DP_DROP_COUNT; k++)
		if (es.drops[k])
			fprintf(f, "  engine drop %-12s %" PRIu64 "\n",
				sg_dp_drop_name((enum sg_dp_drop)k), es.drops[k]);
}
