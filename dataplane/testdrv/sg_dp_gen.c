/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * In-process traffic generator: N simulated workers behind a pair of rings.
 *
 * Each worker w pushes fp32 chunks whose elements are small integers, so
 * every sum is exact in fp32 and the generator knows it without summing:
 * element i (i >= 3) of worker w in pattern q is ((w + 1) * (i + q + 1)) % 61,
 * and the pattern q = (key + chunk + round) % 4 changes between slots and
 * rounds. Elements 0..2 carry key, chunk and round times (w + 1), so a result
 * delivered for the wrong slot or round is caught too. Expected sums are
 * precomputed once per pattern: checking a RESULT is a memcmp.
 *
 * Each slot (key, chunk) runs its rounds in order. A round starts with a push
 * from every worker; a worker that has not had its RESULT after retrans_us
 * pushes again (the node then sums it, drops it as a duplicate, or resends
 * the kept result). Losses are injected on both directions, and damage on the
 * way to the node (a flipped bit under a valid UDP checksum).
 *
 * The generator must cost less than the node, which shares its CPUs: a push's
 * UDP checksum adds the header's sum to its pattern's, summed once at create,
 * and a RESULT fanned out in a header and a payload segment is checked where
 * it lies, not copied into one buffer first (docs/performance.md). With
 * sg_dp_gen_conf.prepared a push's elements are not even written: it comes
 * from a pool of mbufs that hold its worker's pattern already.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "sg_dp_engine.h"
#include "sg_auth.h"
#include "sg_dp_testdrv.h"
#include "sg_dp_proto.h"
#include "sg_sum.h"

#define NPAT 4
#define GEN_BURST 32

struct gen_slot {
	uint32_t round;     /* round being collected */
	uint64_t got;       /* ranks that have this round's RESULT */
	uint64_t sent_tsc;  /* last (re)send */
	uint8_t backoff;    /* retransmits of this round so far, up to GEN_BACKOFF_MAX */
	bool active;
};

/*
 * Each retransmit of a round doubles the slot's timeout, up to 64 x
 * retrans_us, as TCP's does; its next round starts again at retrans_us. With
 * a fixed timeout a node descheduled for a while (a loaded machine) came back
 * to a copy of every push in the window for every timeout it missed, and
 * spent its turn on duplicates.
 */
#define GEN_BACKOFF_MAX 6

struct sg_dp_gen {
	struct sg_dp_gen_conf c;
	uint32_t nchunks;       /* per key */
	uint32_t nslots;
	uint32_t celem;         /* elements of a full chunk */
	uint64_t all;           /* bitmap of every rank */
	struct gen_slot *slots;
	uint32_t *active;       /* slot indices in flight */
	uint32_t nactive;
	uint32_t next_slot;     /* first slot not started yet */
	float *pat;             /* [workers][NPAT][celem] */
	float *expect;          /* [NPAT][celem] */
	uint16_t *psum;         /* [workers][NPAT][2]: checksums of a pattern's bytes from 12 on,
				   in a full chunk ([0]) and in the key's last, short one ([1]) */
	struct rte_mempool **ppool; /* [workers][NPAT] with conf.prepared, else NULL */
	struct sg_dp_net wnet;  /* worker side addresses (ip/port patched per rank) */
	uint64_t retrans_tsc;
	uint64_t rng;
	struct sg_dp_gen_stats st;
	bool auth;              /* conf.auth_key: each rank signs with its own key */
	struct sg_auth_signer signer[SG_MAX_WORKERS];
	uint8_t node_key[SG_MAX_WORKERS][SG_AUTH_KEY_BYTES]; /* the node's to each rank */
};

static inline uint32_t rnd(struct sg_dp_gen *g)
{
	/* xorshift64*: cheap and reproducible from the seed */
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return (uint32_t)((g->rng * 0x2545f4914f6cdd1dull) >> 32);
}

static inline bool chance(struct sg_dp_gen *g, double p)
{
	return p > 0 && rnd(g) < (uint32_t)(p * 4294967295.0);
}

static inline bool lose(struct sg_dp_gen *g)
{
	return chance(g, g->c.loss);
}

/* Payload bytes of chunk @p chunk of a key. */
static inline uint32_t gen_bytes(const struct sg_dp_gen *g, uint32_t chunk)
{
	uint32_t off = chunk * g->c.chunk_bytes;

	return RTE_MIN(g->c.chunk_bytes, g->c.partition_bytes - off);
}

static inline uint32_t worker_ip(uint32_t w)
{
	return rte_cpu_to_be_32(0x0a0b0000u + 100u + w); /* 10.11.0.(100 + w) */
}

/* Worker w's UDP port (host order): 40000 + w unless the conf moves it. */
static inline uint16_t worker_port(const struct sg_dp_gen *g, uint32_t w)
{
	return (uint16_t)((g->c.src_port ? g->c.src_port : 40000) + w);
}

/* A MAC of its own for every (rank, UDP port): a reply sent with another
 * address's MAC is caught. */
static inline void worker_mac(uint32_t w, uint16_t port, struct rte_ether_addr *m)
{
	*m = (struct rte_ether_addr){{0x02, 0x53, (uint8_t)w, 0x47, (uint8_t)(port >> 8),
				      (uint8_t)port}};
}

/* Where a push's frame starts in an mbuf fresh from rte_pktmbuf_alloc(). */
static inline uint8_t *frame_of(struct rte_mbuf *m)
{
	return (uint8_t *)m->buf_addr + RTE_MIN((uint16_t)RTE_PKTMBUF_HEADROOM, m->buf_len);
}

struct prefill {
	const float *pat;
	uint32_t bytes;
};

/* rte_mempool_obj_iter callback: a prepared mbuf's elements from byte 12 on. */
static void prefill_one(struct rte_mempool *mp, void *arg, void *obj, unsigned int idx)
{
	const struct prefill *f = arg;

	(void)mp;
	(void)idx;
	memcpy(frame_of(obj) + SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN + 12,
	       (const uint8_t *)f->pat + 12, f->bytes - 12);
}

/*
 * One pool per worker and pattern, each mbuf holding the pattern's elements.
 * A stack (LIFO) pool hands out the mbufs freed last, whose elements are still
 * in the caches; DPDK's default ring pool would cycle through all of them. The
 * lock-free stack: with the spinlock one, a generator descheduled while it
 * holds the lock (a loaded machine) would stall the lcore that frees pushes.
 * A pool holds a window of pushes and the caches of the two lcores that take
 * and free them; a pool that runs dry sends with copies (build_push).
 */
static int prepare_pools(struct sg_dp_gen *g)
{
	static unsigned int seq;
	const struct sg_dp_gen_conf *gc = &g->c;
	unsigned int np = gc->workers * NPAT, cache = 32, n = gc->window + 3 * cache;
	uint16_t room = (uint16_t)(RTE_PKTMBUF_HEADROOM + SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN +
				   gc->chunk_bytes);

	if (gc->chunk_bytes <= 12 || gc->chunk_bytes > UINT16_MAX - 512)
		return -EINVAL;
	g->ppool = calloc(np, sizeof(*g->ppool));
	if (g->ppool == NULL)
		return -ENOMEM;
	seq++;
	for (unsigned int i = 0; i < np; i++) {
		struct prefill f = {.pat = &g->pat[(size_t)i * g->celem], .bytes = gc->chunk_bytes};
		char name[RTE_MEMPOOL_NAMESIZE];

		snprintf(name, sizeof(name), "sgp%x_%x_%u", (unsigned int)getpid() & 0xfffff,
			 seq & 0xfff, i);
		g->ppool[i] = rte_pktmbuf_pool_create_by_ops(name, n, cache, SG_DP_MBUF_PRIV_SIZE,
							     room, (int)rte_socket_id(), "lf_stack");
		if (g->ppool[i] == NULL) /* no lock-free stack here: the default ring pool */
			g->ppool[i] = rte_pktmbuf_pool_create(name, n, cache, SG_DP_MBUF_PRIV_SIZE,
							      room, (int)rte_socket_id());
		if (g->ppool[i] == NULL)
			return -ENOMEM;
		rte_mempool_obj_iter(g->ppool[i], prefill_one, &f);
	}
	return 0;
}

static void free_pools(struct sg_dp_gen *g)
{
	for (unsigned int i = 0; g->ppool && i < g->c.workers * NPAT; i++)
		rte_mempool_free(g->ppool[i]);
	free(g->ppool);
	g->ppool = NULL;
}

struct sg_dp_gen *sg_dp_gen_create(const struct sg_dp_gen_conf *gc)
{
	struct sg_dp_gen *g;

	if (gc->workers == 0 || gc->workers > SG_MAX_WORKERS || gc->chunk_bytes == 0 ||
	    gc->chunk_bytes % 8 || gc->partition_bytes % 4 || gc->keys == 0 || gc->window == 0 ||
	    gc->keys2 >= gc->keys || (gc->keys2 && gc->job2 == gc->job) ||
	    (gc->auth_key != NULL && gc->keys2 != 0) ||
	    (gc->port < 0 && (gc->to_dut == NULL || gc->from_dut == NULL)) || gc->pool == NULL) {
		errno = EINVAL;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return NULL;
	g->c = *gc;
	g->nchunks = sg_dp_chunk_count(gc->partition_bytes / 4, SG_DTYPE_FP32, gc->chunk_bytes);
	g->nslots = gc->keys * g->nchunks;
	g->celem = gc->chunk_bytes / 4;
	g->all = gc->workers == 64 ? UINT64_MAX : (1ull << gc->workers) - 1;
	g->slots = calloc(g->nslots, sizeof(*g->slots));
	g->active = calloc(gc->window, sizeof(*g->active));
	g->pat = calloc((size_t)gc->workers * NPAT * g->celem, sizeof(float));
	g->expect = calloc((size_t)NPAT * g->celem, sizeof(float));
	g->psum = calloc((size_t)gc->workers * NPAT * 2, sizeof(uint16_t));
	if (!g->slots || !g->active || !g->pat || !g->expect || !g->psum) {
		sg_dp_gen_destroy(g);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t q = 0; q < NPAT; q++)
		for (uint32_t i = 0; i < g->celem; i++) {
			uint32_t sum = 0;

			for (uint32_t w = 0; w < gc->workers; w++) {
				uint32_t v = ((w + 1) * (i + q + 1)) % 61;

				g->pat[((size_t)w * NPAT + q) * g->celem + i] = (float)v;
				sum += v;
			}
			g->expect[(size_t)q * g->celem + i] = (float)sum;
		}
	for (uint32_t w = 0; w < gc->workers; w++)
		for (uint32_t q = 0; q < NPAT; q++)
			for (int last = 0; last < 2; last++) {
				uint32_t bytes = last ? gen_bytes(g, g->nchunks - 1) : gc->chunk_bytes;
				const uint8_t *p = (const uint8_t *)&g->pat[((size_t)w * NPAT + q) *
									    g->celem];

				g->psum[((size_t)w * NPAT + q) * 2 + last] =
					bytes > 12 ? sg_sum_csum(p + 12, bytes - 12) : 0;
			}
	/* without them pushes are copied, as they were before: still correct */
	/* nor with auth: a short chunk's trailer would overwrite the elements prepared
	 * for the full chunks that the same mbufs carry */
	if (gc->prepared && gc->corrupt <= 0 && gc->auth_key == NULL && prepare_pools(g) < 0)
		free_pools(g);
	g->auth = gc->auth_key != NULL;
	for (uint32_t w = 0; g->auth && w < gc->workers; w++) {
		uint8_t rk[SG_AUTH_KEY_BYTES];

		sg_auth_rank_key(gc->auth_key, (uint16_t)w, SG_AUTH_RANK, rk);
		sg_auth_signer_init(&g->signer[w], rk, sg_auth_key_id(gc->auth_key));
		sg_auth_rank_key(gc->auth_key, (uint16_t)w, SG_AUTH_NODE, g->node_key[w]);
		explicit_bzero(rk, sizeof(rk));
	}
	g->wnet.udp_checksum = gc->udp_checksum;
	g->retrans_tsc = gc->retrans_us * rte_get_tsc_hz() / 1000000;
	g->rng = gc->seed * 0x9e3779b97f4a7c15ull + 1;
	g->st.rounds_total = (uint64_t)g->nslots * gc->rounds;
	return g;
}

void sg_dp_gen_destroy(struct sg_dp_gen *g)
{
	if (g == NULL)
		return;
	free_pools(g);
	free(g->slots);
	free(g->active);
	free(g->pat);
	free(g->expect);
	free(g->psum);
	explicit_bzero(g->signer, sizeof(g->signer));
	explicit_bzero(g->node_key, sizeof(g->node_key));
	free(g);
}

void sg_dp_gen_stats(const struct sg_dp_gen *g, struct sg_dp_gen_stats *st)
{
	*st = g->st;
}

static int send_frames(struct sg_dp_gen *g, struct rte_mbuf **m, unsigned int n)
{
	unsigned int e = 0;

	/* the node drains its RX ring: wait briefly rather than lose test traffic */
	for (int tries = 0; e < n && tries < 100000; tries++)
		e += g->c.port >= 0 ?
			rte_eth_tx_burst((uint16_t)g->c.port, 0, m + e, (uint16_t)(n - e)) :
			rte_ring_enqueue_burst(g->c.to_dut, (void **)m + e, n - e, NULL);
	if (e < n)
		rte_pktmbuf_free_bulk(m + e, n - e);
	return (int)e;
}

int sg_dp_gen_raw(struct sg_dp_gen *g, const void *frame, uint32_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(g->c.pool);
	char *d;

	if (m == NULL)
		return -ENOMEM;
	d = rte_pktmbuf_append(m, (uint16_t)len);
	if (d == NULL) {
		rte_pktmbuf_free(m);
		return -ENOSPC;
	}
	memcpy(d, frame, len);
	return send_frames(g, &m, 1) == 1 ? 0 : -ENOBUFS;
}

int sg_dp_gen_arp(struct sg_dp_gen *g)
{
	uint8_t f[60] = {0};
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(eth + 1);

	memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
	worker_mac(0, worker_port(g, 0), &eth->src_addr);
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP);
	a->arp_hardware = RTE_BE16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = RTE_ETHER_ADDR_LEN;
	a->arp_plen = 4;
	a->arp_opcode = RTE_BE16(RTE_ARP_OP_REQUEST);
	a->arp_data.arp_sha = eth->src_addr;
	a->arp_data.arp_sip = worker_ip(0);
	a->arp_data.arp_tip = g->c.dut_ip;
	return sg_dp_gen_raw(g, f, sizeof(f));
}

/* Build worker w's push of slot s (its current round) into a fresh mbuf. */
static struct rte_mbuf *build_push(struct sg_dp_gen *g, uint32_t w, uint32_t s, bool retrans)
{
	struct gen_slot *sl = &g->slots[s];
	uint32_t key = s / g->nchunks, chunk = s % g->nchunks;
	uint32_t off = chunk * g->c.chunk_bytes;
	uint32_t bytes = gen_bytes(g, chunk);
	uint32_t q = (key + chunk + sl->round) % NPAT;
	struct sg_dp_peer dut = {.mac = g->c.dut_mac, .ip = g->c.dut_ip,
				 .udp_port = rte_cpu_to_be_16(g->c.dut_udp_port)};
	uint32_t first2 = g->c.keys - g->c.keys2; /* keys from here on are job2's */
	bool j2 = g->c.keys2 && key >= first2;
	struct sg_dp_msg msg = {
		.type = SG_DP_T_PUSH,
		.flags = (retrans ? SG_DP_F_RETRANS : 0) | (g->auth ? SG_DP_F_MAC : 0),
		.dtype = SG_DTYPE_FP32, .job = j2 ? g->c.job2 : g->c.job, .rank = (uint16_t)w,
		.token = j2 ? g->c.token2 : g->c.token, .key = j2 ? key - first2 : key,
		.chunk = chunk, .nchunks = g->nchunks,
		.round = sl->round, .nelem = bytes / 4, .offset = off,
	};
	struct sg_dp_net wn = g->wnet;
	struct rte_mbuf *m = g->ppool ? rte_pktmbuf_alloc(g->ppool[w * NPAT + q]) : NULL;
	bool filled = m != NULL && bytes > 12;
	uint8_t *d;
	uint8_t *pl;
	uint64_t ol;

	if (m == NULL)
		m = rte_pktmbuf_alloc(g->c.pool);
	if (m == NULL)
		return NULL;
	d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN + bytes +
							 (g->auth ? SG_AUTH_TRAILER_BYTES : 0)));
	if (d == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	pl = d + SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN;
	/* a prepared mbuf holds the elements from byte 12 on (prefill_one) */
	if (!filled) {
		memcpy(pl, &g->pat[((size_t)w * NPAT + q) * g->celem], bytes);
		g->st.copied++;
	}
	sg_dp_build_hdr(d + SG_DP_NET_HDR_LEN, &msg);
	worker_mac(w, worker_port(g, w), &wn.mac);
	wn.ip = worker_ip(w);
	wn.udp_port = rte_cpu_to_be_16(worker_port(g, w));
	if (bytes >= 12) {
		/* the payload sits 90 bytes into the frame: not float-aligned */
		float h[3] = {(float)((key % 4096) * (w + 1)), (float)((chunk % 4096) * (w + 1)),
			      (float)((sl->round % 1024) * (w + 1))};
		uint16_t sum = g->psum[((size_t)w * NPAT + q) * 2 + (bytes != g->c.chunk_bytes)];

		memcpy(pl, h, sizeof(h));
		/* the elements' checksum: the pattern's from byte 12 on, and these 12 */
		sum = sg_sum_csum_add(sum, sg_sum_csum(h, sizeof(h)));
		if (g->auth) {
			/* the MAC over the Sigma header and elements; the checksum covers it too */
			sg_auth_sign(&g->signer[w], d + SG_DP_NET_HDR_LEN, SG_DP_HDR_LEN + bytes);
			sum = sg_sum_csum_add(sum, sg_sum_csum(pl + bytes, SG_AUTH_TRAILER_BYTES));
		}
		sg_dp_net_build_seg(&wn, &dut, d, SG_DP_HDR_LEN,
				    SG_DP_HDR_LEN + bytes + (g->auth ? SG_AUTH_TRAILER_BYTES : 0), sum,
				    &ol);
	} else if (g->auth) {
		sg_auth_sign(&g->signer[w], d + SG_DP_NET_HDR_LEN, SG_DP_HDR_LEN + bytes);
		sg_dp_net_build(&wn, &dut, d, SG_DP_HDR_LEN + bytes + SG_AUTH_TRAILER_BYTES, &ol);
	} else {
		sg_dp_net_build(&wn, &dut, d, SG_DP_HDR_LEN + bytes, &ol);
	}
	if (g->c.udp_checksum && chance(g, g->c.corrupt)) {
		/* damaged on the way: one bit of the Sigma header or the elements */
		uint32_t at = rnd(g) % (SG_DP_HDR_LEN + bytes);

		d[SG_DP_NET_HDR_LEN + at] ^= (uint8_t)(1u << (rnd(g) % 8));
		g->st.corrupted++;
	}
	return m;
}

/* (Re)send the pushes of slot s for every rank still waiting for its result. */
static void send_slot(struct sg_dp_gen *g, uint32_t s, bool retrans)
{
	struct gen_slot *sl = &g->slots[s];
	struct rte_mbuf *out[SG_MAX_WORKERS];
	unsigned int n = 0;
	uint32_t bytes = gen_bytes(g, s % g->nchunks);

	for (uint32_t w = 0; w < g->c.workers; w++) {
		struct rte_mbuf *m;

		if (sl->got >> w & 1)
			continue;
		if (retrans) {
			g->st.retransmits++;
			g->st.retransmits2 += g->c.keys2 && s / g->nchunks >= g->c.keys - g->c.keys2;
		} else {
			g->st.pushes_sent++;
			g->st.bytes_pushed += bytes;
		}
		if (lose(g)) {
			g->st.dropped_out++;
			continue;
		}
		m = build_push(g, w, s, retrans);
		if (m)
			out[n++] = m;
		else
			g->st.unsent++;
	}
	g->st.unsent += n - (unsigned int)send_frames(g, out, n);
	sl->sent_tsc = rte_rdtsc();
}

static bool start_next(struct sg_dp_gen *g, uint32_t pos)
{
	if (g->next_slot >= g->nslots || g->c.rounds == 0)
		return false;
	g->active[pos] = g->next_slot;
	g->slots[g->next_slot] = (struct gen_slot){.active = true, .round = g->c.first_round};
	send_slot(g, g->next_slot++, false);
	return true;
}

/* Check one RESULT (in @p frame: its Ethernet/IPv4/UDP headers name the worker it went
 * to); complete the round when every rank has it. */
static void on_result(struct sg_dp_gen *g, const struct sg_dp_msg *msg, const uint8_t *frame)
{
	const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)frame;
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)(ip + 1);
	struct rte_ether_addr mac;
	uint32_t s, q, bytes, off;
	struct gen_slot *sl;
	const uint8_t *r = msg->payload;
	const float *e;
	float h[3];
	uint32_t first2 = g->c.keys - g->c.keys2, key = msg->key;
	bool known = msg->job == g->c.job && key < first2;

	if (!known && g->c.keys2 && msg->job == g->c.job2 && key < g->c.keys2) {
		key += first2; /* job2's key k is the generator's key first2 + k */
		known = true;
	}
	if (!known || msg->chunk >= g->nchunks || msg->rank >= g->c.workers) {
		g->st.results_bad++;
		return;
	}
	s = key * g->nchunks + msg->chunk;
	sl = &g->slots[s];
	if (!sl->active || msg->round != sl->round || (sl->got >> msg->rank & 1)) {
		g->st.results_dup++;
		return;
	}
	/* the result that counts was sent to exactly that worker: its MAC, IP and UDP
	 * port (a late copy for workers of an earlier generator is a duplicate above) */
	worker_mac(msg->rank, worker_port(g, msg->rank), &mac);
	if (ip->dst_addr != worker_ip(msg->rank) ||
	    udp->dst_port != rte_cpu_to_be_16(worker_port(g, msg->rank)) ||
	    !rte_is_same_ether_addr(&eth->dst_addr, &mac)) {
		g->st.results_bad++;
		return;
	}
	off = msg->chunk * g->c.chunk_bytes;
	bytes = RTE_MIN(g->c.chunk_bytes, g->c.partition_bytes - off);
	q = (key + msg->chunk + msg->round) % NPAT;
	e = &g->expect[(size_t)q * g->celem];
	if (msg->payload_len != bytes || msg->offset != off) {
		g->st.results_bad++;
		return;
	}
	if (bytes >= 12) {
		float tri = (float)(g->c.workers * (g->c.workers + 1) / 2);

		h[0] = (float)(key % 4096) * tri;
		h[1] = (float)(msg->chunk % 4096) * tri;
		h[2] = (float)(msg->round % 1024) * tri;
		if (memcmp(r, h, sizeof(h)) || memcmp(r + 12, e + 3, bytes - 12)) {
			g->st.results_bad++;
			return;
		}
	} else if (memcmp(r, e, bytes)) {
		g->st.results_bad++;
		return;
	}
	g->st.results_ok++;
	sl->got |= 1ull << msg->rank;
	if (sl->got != g->all)
		return;
	g->st.rounds_done++;
	if (++sl->round - g->c.first_round < g->c.rounds) {
		sl->got = 0;
		sl->backoff = 0;
		send_slot(g, s, false);
	} else {
		sl->active = false;
	}
}

/* auth = mac: RESULT @p m (parsed into @p msg) verifies under the node's key for its rank. */
static bool result_signed(const struct sg_dp_gen *g, const struct rte_mbuf *m,
			  const struct sg_dp_msg *msg)
{
	uint8_t lin[16384];
	const uint8_t *d;

	if (!(msg->flags & SG_DP_F_MAC) || msg->rank >= g->c.workers || m->pkt_len > sizeof(lin) ||
	    m->pkt_len < SG_DP_NET_HDR_LEN)
		return false;
	d = rte_pktmbuf_read(m, 0, m->pkt_len, lin);
	return d != NULL && sg_auth_verify(g->node_key[msg->rank], g->signer[0].key_id,
					   d + SG_DP_NET_HDR_LEN, m->pkt_len - SG_DP_NET_HDR_LEN,
					   NULL) == SG_AUTH_OK;
}

static unsigned int receive(struct sg_dp_gen *g)
{
	struct rte_mbuf *m[GEN_BURST];
	unsigned int n = 0;

	if (g->c.port < 0)
		n = rte_ring_dequeue_burst(g->c.from_dut, (void **)m, GEN_BURST, NULL);
	else
		for (uint16_t q = 0; q < RTE_MAX(g->c.nb_rxq, (uint16_t)1) && n < GEN_BURST; q++)
			n += rte_eth_rx_burst((uint16_t)g->c.port, q, m + n,
					      (uint16_t)(GEN_BURST - n));

	for (unsigned int i = 0; i < n; i++) {
		uint8_t lin[16384];
		/* a fanned-out RESULT over a ring port arrives as header + payload
		 * segments: read it whole, as a NIC would have put it on the wire */
		uint32_t dlen = m[i]->nb_segs == 1 || m[i]->pkt_len > sizeof(lin) ? m[i]->data_len :
				m[i]->pkt_len;
		/* ... unless the first segment is exactly the headers: then the elements are
		 * checked where they lie, without a copy (sigmad's fan-out) */
		bool split = m[i]->nb_segs == 2 && dlen == m[i]->pkt_len &&
			     m[i]->data_len == SG_DP_NET_HDR_LEN + SG_DP_HDR_LEN;
		uint8_t *d = dlen == m[i]->data_len || split ?
				     rte_pktmbuf_mtod(m[i], uint8_t *) :
				     (uint8_t *)rte_pktmbuf_read(m[i], 0, dlen, lin);
		struct rte_ether_hdr *eth = (struct rte_ether_hdr *)d;
		struct sg_dp_msg msg;

		if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP)) {
			struct rte_arp_hdr *a = (struct rte_arp_hdr *)(eth + 1);

			if (a->arp_opcode == RTE_BE16(RTE_ARP_OP_REPLY) &&
			    a->arp_data.arp_sip == g->c.dut_ip) {
				g->st.arp_replies++;
				g->c.dut_mac = a->arp_data.arp_sha; /* resolved */
			}
			else
				g->st.other++;
			continue;
		}
		/* (a split RESULT's header is parsed alone: sg_dp_parse reads only the header) */
		if (dlen < SG_DP_NET_HDR_LEN ||
		    sg_dp_parse(d + SG_DP_NET_HDR_LEN, dlen - SG_DP_NET_HDR_LEN, &msg, NULL) < 0) {
			g->st.other++;
			continue;
		}
		if (split && msg.payload != NULL)
			msg.payload = rte_pktmbuf_mtod(m[i]->next, uint8_t *);
		if (msg.type == SG_DP_T_RESULT && g->auth && !result_signed(g, m[i], &msg)) {
			g->st.results_bad++; /* a RESULT that the node's key for its rank did not sign */
		} else if (msg.type == SG_DP_T_RESULT) {
			if (lose(g))
				g->st.dropped_in++;
			else
				on_result(g, &msg, d);
		} else if (msg.type == SG_DP_T_NACK) {
			g->st.nacks++;
		} else if (msg.type == SG_DP_T_ERROR) {
			g->st.errors++;
		} else {
			g->st.other++;
		}
	}
	rte_pktmbuf_free_bulk(m, n);
	return n;
}

void sg_dp_gen_poll(struct sg_dp_gen *g)
{
	(void)receive(g);
}

int sg_dp_gen_run(struct sg_dp_gen *g, uint64_t deadline_tsc, volatile bool *stop)
{
	uint32_t scan = 0, idle = 0;

	while (g->nactive < g->c.window && start_next(g, g->nactive))
		g->nactive++;
	while (g->nactive > 0) {
		uint64_t now;
		uint32_t pos;

		if (receive(g) == 0 && g->c.idle_sleep_us && ++idle > 64) {
			/* nothing came back: let the node have the CPU if it shares ours */
			rte_delay_us_sleep(g->c.idle_sleep_us);
			idle = 0;
		} else if (idle > 64) {
			idle = 0;
		}
		now = rte_rdtsc();
		if (now > deadline_tsc || (stop && *stop))
			return -ETIMEDOUT;
		/* refill finished positions; resend one overdue slot per pass */
		pos = scan++ % g->nactive;
		struct gen_slot *sl = &g->slots[g->active[pos]];

		if (!sl->active) {
			if (!start_next(g, pos))
				g->active[pos] = g->active[--g->nactive];
		} else if (now - sl->sent_tsc > g->retrans_tsc << sl->backoff) {
			send_slot(g, g->active[pos], true);
			sl->backoff += sl->backoff < GEN_BACKOFF_MAX;
		}
	}
	return 0;
}
