/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's reply addresses under hostile and heavy traffic (issue 17), with
 * the daemon's pipeline on ring ports in one process and the in-process
 * generator as workers. Every RESULT element is checked against the exactly
 * known sum, and every RESULT must reach exactly its worker's MAC, IP and
 * UDP port.
 *
 * - Flood: thousands of datagrams from distinct source addresses (60 zero
 *   bytes, a wrong token, a wrong job) mixed with live workers; then the live
 *   job's workers restarted on new ports, and 64 fresh workers of another
 *   job, must all be answered.
 * - Many peers: thousands of distinct worker addresses over one pipeline's
 *   life (a job's workers restarted on new ports again and again), while a
 *   long-lived job keeps its workers.
 * - Idle addresses are forgotten after [resources] peer_idle_ms, and the
 *   table on its own keeps the most recently seen addresses.
 * - RX queues: a port whose RX queues exist whatever sigmad configures (ring
 *   ports, like net_af_packet's qpairs) is polled on every queue, not only on
 *   those the layout names.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_dp_peers.h"
#include "sg_dp_testdrv.h"
#include "sg_dp_proto.h"
#include "dp_pipe_util.h"
#include "sg_test.h"

#define MAX_RXQ 4

static char err[512];

/* The pipeline on one ring port, as sigmad runs it, and the rings around it. */
struct rig {
	struct sg_dp_config c;
	struct rte_ring *rx[MAX_RXQ], *tx;
	unsigned int nrx;
	int port;
	struct rte_mempool *pool; /* the workers' mbufs */
	struct sg_dp_pipeline *p;
	struct sg_dp_net dnet;
};

/* Job 1: 4 workers, 4 keys of 2 chunks; job 2: 64 workers, 2 keys of one chunk. */
static void base_config(struct sg_dp_config *c)
{
	sg_dp_config_defaults(c);
	c->mtu = 1500; /* 1424-byte chunks */
	c->mbufs = 4096;
	c->pool_bufs = 1024;
	c->timeout_ms = 5000;
	c->n_jobs = 2;
	c->jobs[0].workers = 4;
	c->jobs[0].keys = 4;
	c->jobs[0].partition_bytes = 2 * 1424;
	c->jobs[1] = c->jobs[0];
	c->jobs[1].id = 2;
	c->jobs[1].token = 0x2222;
	c->jobs[1].workers = 64;
	c->jobs[1].keys = 2;
	c->jobs[1].partition_bytes = 1424;
}

static int rig_up(struct rig *r, unsigned int nrx)
{
	static unsigned int seq;
	struct rte_ring *txq[SG_DP_MAX_LAYOUT];
	char name[64];
	int sock = (int)rte_socket_id();

	r->nrx = nrx;
	r->port = -1;
	seq++;
	for (unsigned int q = 0; q < nrx; q++) {
		snprintf(name, sizeof(name), "pr_rx%u_%u_%d", q, seq, (int)getpid());
		r->rx[q] = rte_ring_create(name, 4096, sock, 0);
		if (r->rx[q] == NULL)
			return -1;
	}
	snprintf(name, sizeof(name), "pr_tx%u_%d", seq, (int)getpid());
	r->tx = rte_ring_create(name, 16384, sock, RING_F_SC_DEQ);
	if (r->tx == NULL)
		return -1;
	for (unsigned int i = 0; i < r->c.n_lcores; i++)
		txq[i] = r->tx;
	snprintf(name, sizeof(name), "pr_port%u", seq);
	r->port = rte_eth_from_rings(name, r->rx, nrx, txq, r->c.n_lcores, (unsigned int)sock);
	if (r->port < 0)
		return -1;
	for (unsigned int i = 0; i < r->c.n_lcores; i++)
		r->c.lcores[i].port = (uint16_t)r->port;
	snprintf(name, sizeof(name), "pr_pool%u_%d", seq, (int)getpid());
	r->pool = rte_pktmbuf_pool_create(name, 8192, 256, SG_DP_MBUF_PRIV_SIZE,
					  RTE_PKTMBUF_HEADROOM + 2048, sock);
	if (r->pool == NULL)
		return -1;
	r->p = sg_dp_pipeline_create(&r->c, err, sizeof(err));
	if (r->p == NULL)
		return -1;
	sg_dp_pipeline_net(r->p, (uint16_t)r->port, &r->dnet);
	return sg_dp_pipeline_start(r->p);
}

static void rig_down(struct rig *r)
{
	void *m = NULL;

	sg_dp_pipeline_stop(r->p);
	/* frames left in the rings belong to either pool: free them before the pools go */
	for (unsigned int q = 0; q <= r->nrx; q++) {
		struct rte_ring *ring = q < r->nrx ? r->rx[q] : r->tx;

		while (ring != NULL && rte_ring_dequeue(ring, &m) == 0)
			rte_pktmbuf_free(m);
	}
	sg_dp_pipeline_destroy(r->p);
	if (r->port >= 0)
		rte_eth_dev_close((uint16_t)r->port);
	for (unsigned int q = 0; q < r->nrx; q++)
		rte_ring_free(r->rx[q]);
	rte_ring_free(r->tx);
	rte_mempool_free(r->pool);
	memset(r->rx, 0, sizeof(r->rx));
}

/* Workers of job @p job (1 or 2) sending to RX queue @p q from ports @p src_port + rank. */
static struct sg_dp_gen *workers(struct rig *r, unsigned int q, unsigned int job,
				 uint32_t rounds, uint16_t src_port, uint32_t first_round)
{
	const struct sg_dp_job_cfg *j = &r->c.jobs[job - 1];
	struct sg_dp_gen_conf gc = {
		.to_dut = r->rx[q], .from_dut = r->tx, .port = -1, .pool = r->pool,
		.dut_mac = r->dnet.mac, .dut_ip = r->dnet.ip, .dut_udp_port = r->c.udp_port,
		.job = j->id, .token = j->token, .workers = j->workers, .keys = j->keys,
		.partition_bytes = j->partition_bytes, .chunk_bytes = sg_dp_job_chunk_bytes(&r->c, j),
		.rounds = rounds, .window = 8, .retrans_us = 100000, .seed = src_port,
		.udp_checksum = r->c.udp_checksum, .src_port = src_port, .first_round = first_round,
	};
	struct sg_dp_gen *g = sg_dp_gen_create(&gc);

	SG_CHECK(g != NULL, "generator: %s", strerror(errno));
	return g;
}

/* Read what the node still sends (duplicates of late retransmits) until it is quiet. */
static void drain(struct sg_dp_gen *g)
{
	uint64_t hz = rte_get_tsc_hz(), quiet = rte_rdtsc() + hz / 50;

	while (rte_rdtsc() < quiet) {
		unsigned int before = 0;
		struct sg_dp_gen_stats st;

		sg_dp_gen_stats(g, &st);
		before = (unsigned int)(st.results_dup + st.results_ok + st.other);
		sg_dp_gen_poll(g);
		sg_dp_gen_stats(g, &st);
		if (st.results_dup + st.results_ok + st.other != before)
			quiet = rte_rdtsc() + hz / 50;
	}
}

/* Check a generator's verdict: every round done, each of its @p n workers got every
 * result, every result right. */
static bool verdict(struct sg_dp_gen *g, uint32_t n, int rc, const char *what)
{
	struct sg_dp_gen_stats st;
	bool ok;

	if (g == NULL)
		return false;
	sg_dp_gen_stats(g, &st);
	printf("[%s] %lu of %lu rounds, %lu results ok, %lu bad, %lu retransmits\n", what,
	       (unsigned long)st.rounds_done, (unsigned long)st.rounds_total,
	       (unsigned long)st.results_ok, (unsigned long)st.results_bad,
	       (unsigned long)st.retransmits);
	ok = SG_CHECK(rc == 0, "%s: not every worker got its results in time", what);
	ok &= SG_CHECK_EQ(st.rounds_done, st.rounds_total);
	ok &= SG_CHECK_EQ(st.results_bad, 0);
	ok &= SG_CHECK_EQ(st.results_ok, st.rounds_total * n);
	return ok;
}

/* Run @p n workers to the end (or @p seconds), check them, drain, free. */
static bool run_workers(struct sg_dp_gen *g, uint32_t n, double seconds, const char *what)
{
	int rc;
	bool ok;

	if (g == NULL)
		return false;
	rc = sg_dp_gen_run(g, rte_rdtsc() + (uint64_t)(seconds * (double)rte_get_tsc_hz()), NULL);
	ok = verdict(g, n, rc, what);
	drain(g);
	sg_dp_gen_destroy(g);
	return ok;
}

static uint64_t lcore_drops(struct rig *r, enum sg_dp_ndrop d)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(r->p); i++) {
		struct sg_dp_lcore_stats st;

		sg_dp_pipeline_lcore_stats(r->p, i, &st);
		n += st.drops[d];
	}
	return n;
}

/* The reducers' reply-address counters, summed (in the fields of one lcore's stats). */
static struct sg_dp_lcore_stats peer_counters(struct rig *r)
{
	struct sg_dp_lcore_stats sum = {0};

	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(r->p); i++) {
		struct sg_dp_lcore_stats st;

		sg_dp_pipeline_lcore_stats(r->p, i, &st);
		sum.peers += st.peers;
		sum.peers_learned += st.peers_learned;
		sum.peers_evicted += st.peers_evicted;
		sum.peers_expired += st.peers_expired;
	}
	return sum;
}

/*
 * Garbage datagram @p i, each from a source address of its own: 60 zero bytes
 * (no Sigma magic), a push of job 1 with a wrong token, or a push of job 99.
 */
static uint32_t garbage(uint8_t *f, unsigned int i, const struct rig *r)
{
	const struct sg_dp_job_cfg *j = &r->c.jobs[0];
	struct sg_dp_net w = {
		.mac = {{0x02, 0x66, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i, 0}},
		.ip = rte_cpu_to_be_32(0x0a0c0000u + i), .udp_port = rte_cpu_to_be_16(1024 + i),
		.udp_checksum = r->c.udp_checksum,
	};
	struct sg_dp_peer to = {.mac = r->dnet.mac, .ip = r->dnet.ip, .udp_port = r->dnet.udp_port};
	uint32_t chunk = sg_dp_job_chunk_bytes(&r->c, j), plen = 60;
	uint8_t *pl = f + SG_DP_NET_HDR_LEN;

	memset(pl, 0, SG_DP_HDR_LEN + chunk);
	if (i % 3) {
		struct sg_dp_msg m = {
			.type = SG_DP_T_PUSH, .dtype = SG_DTYPE_FP32, .rank = 0, .key = 0, .chunk = 0,
			.nchunks = j->partition_bytes / chunk, .round = 0, .nelem = chunk / 4,
			.job = i % 3 == 1 ? j->id : 99, .token = i % 3 == 1 ? ~j->token : j->token,
		};

		sg_dp_build_hdr(pl, &m);
		plen = SG_DP_HDR_LEN + chunk;
	}
	sg_dp_net_build(&w, &to, f, plen, NULL);
	return SG_DP_NET_HDR_LEN + plen;
}

#define FLOOD 6000

static void test_flood(const char *name, const char *rtc)
{
	static uint8_t f[2048];
	struct rig r = {0};
	struct sg_dp_gen *g;
	struct sg_dp_stats es;
	uint64_t hz = rte_get_tsc_hz(), until, engine_drops;
	struct sg_dp_lcore_stats pc;
	unsigned int sent = 0;
	int rc = -1;

	base_config(&r.c);
	dp_layout(&r.c, NULL, NULL, rtc);
	if (!SG_CHECK(rig_up(&r, 2) == 0, "%s: set-up: %s", name, err))
		goto out;
	/* live workers of job 1, while garbage from FLOOD addresses comes in */
	g = workers(&r, 0, 1, 20, 40000, 0);
	until = rte_rdtsc() + 30 * hz;
	while (g && (rc != 0 || sent < FLOOD) && rte_rdtsc() < until) {
		for (unsigned int k = 0; k < 64 && sent < FLOOD; k++) {
			int e = sg_dp_gen_raw(g, f, garbage(f, sent, &r));

			/* the node's RX ring stayed full (a starved lcore on a loaded
			 * machine): that frame was not sent, so send it again later */
			if (e == -ENOBUFS)
				break;
			SG_CHECK(e == 0, "garbage %u: %d", sent, e);
			sent++;
		}
		rc = sg_dp_gen_run(g, rte_rdtsc() + hz / 1000, NULL);
	}
	SG_CHECK_EQ(sent, FLOOD);
	verdict(g, 4, rc, "live workers of job 1 during the flood");
	if (g)
		drain(g);
	sg_dp_gen_destroy(g);
	/* the same job's workers restarted on new ports, then 64 new workers of job 2 */
	run_workers(workers(&r, 0, 1, 3, 50000, 20), 4, 10, "job 1 restarted on new ports");
	run_workers(workers(&r, 0, 2, 3, 52000, 0), 64, 10, "64 fresh workers of job 2");
	sg_dp_pipeline_engine_stats(r.p, &es);
	SG_CHECK_EQ(es.drops[SG_DP_DROP_MAGIC], FLOOD / 3);
	SG_CHECK_EQ(es.drops[SG_DP_DROP_TOKEN], FLOOD / 3);
	SG_CHECK_EQ(es.drops[SG_DP_DROP_JOB], FLOOD / 3);
	engine_drops = 0;
	for (int k = 0; k < SG_DP_DROP_COUNT; k++)
		engine_drops += es.drops[k];
	SG_CHECK_EQ(lcore_drops(&r, SG_DP_ND_PROTO), engine_drops);
	SG_CHECK_EQ(lcore_drops(&r, SG_DP_ND_PEER_TABLE), 0);
	SG_CHECK_EQ(lcore_drops(&r, SG_DP_ND_NO_PEER), 0);
	/* only the 72 workers' addresses were learnt (by each reducer that sums their
	 * keys), none of the garbage's, and nothing had to make room */
	pc = peer_counters(&r);
	SG_CHECK(pc.peers_learned >= 72 && pc.peers_learned <= 72 * 2,
		 "%s: %lu addresses learnt for 72 workers", name, (unsigned long)pc.peers_learned);
	SG_CHECK_EQ(pc.peers, pc.peers_learned);
	SG_CHECK_EQ(pc.peers_evicted, 0);
	sg_dp_pipeline_print_stats(r.p, stdout, 0);
out:
	rig_down(&r);
}

/*
 * A job's 64 workers restart on new UDP ports @p runs times (each run pushes the
 * job's next round): runs * 64 distinct addresses over the pipeline's life.
 * Job 1's 4 workers push one round before and one after.
 */
static void test_many_peers(unsigned int runs)
{
	struct rig r = {0};
	struct sg_dp_lcore_stats pc;
	unsigned int ok = 0;

	base_config(&r.c);
	dp_layout(&r.c, NULL, NULL, "(0,0,1),(0,1,2)");
	if (!SG_CHECK(rig_up(&r, 2) == 0, "many peers: set-up: %s", err))
		goto out;
	run_workers(workers(&r, 0, 1, 1, 40000, 0), 4, 10, "job 1, round 0");
	for (unsigned int k = 0; k < runs; k++) {
		char what[64];

		snprintf(what, sizeof(what), "job 2 run %u (ports %u..)", k, 1024 + 64 * k);
		if (!run_workers(workers(&r, 0, 2, 1, (uint16_t)(1024 + 64 * k), k), 64, 5, what))
			break;
		ok++;
	}
	SG_CHECK_EQ(ok, runs);
	run_workers(workers(&r, 0, 1, 1, 40000, 1), 4, 10, "job 1, round 1, after the churn");
	SG_CHECK_EQ(lcore_drops(&r, SG_DP_ND_PEER_TABLE), 0);
	/* both reducers saw every address (2 keys, one each) and hold the newest 8192;
	 * job 1's workers were forgotten during the churn and learnt again after it */
	pc = peer_counters(&r);
	SG_CHECK_EQ(pc.peers_learned, 2 * (64 * runs + 4 + 4));
	SG_CHECK_EQ(pc.peers, 2 * RTE_MIN(64 * runs + 4, r.c.peers));
	SG_CHECK_EQ(pc.peers_evicted, pc.peers_learned - pc.peers);
	SG_CHECK_EQ(pc.peers_expired, 0);
	sg_dp_pipeline_print_stats(r.p, stdout, 0);
out:
	rig_down(&r);
}

/*
 * Addresses idle for [resources] peer_idle_ms are forgotten; workers that come
 * back are learnt again and answered.
 */
static void test_idle_peers(void)
{
	struct rig r = {0};
	struct sg_dp_lcore_stats pc;
	uint64_t until;

	base_config(&r.c);
	r.c.peer_idle_ms = 100;
	dp_layout(&r.c, NULL, NULL, "(0,0,1)");
	if (!SG_CHECK(rig_up(&r, 1) == 0, "idle: set-up: %s", err))
		goto out;
	run_workers(workers(&r, 0, 1, 2, 40000, 0), 4, 10, "job 1 before a pause");
	pc = peer_counters(&r);
	SG_CHECK_EQ(pc.peers_learned, 4);
	until = rte_rdtsc() + rte_get_tsc_hz() * 2;
	do {
		rte_delay_us_sleep(10000);
		pc = peer_counters(&r);
	} while (pc.peers != 0 && rte_rdtsc() < until);
	SG_CHECK_EQ(pc.peers, 0);
	SG_CHECK_EQ(pc.peers_expired, 4);
	run_workers(workers(&r, 0, 1, 2, 40000, 2), 4, 10, "job 1 after the pause");
	pc = peer_counters(&r);
	SG_CHECK_EQ(pc.peers_learned, 8);
	SG_CHECK_EQ(pc.peers, 4);
out:
	rig_down(&r);
}

/* The table alone: the least recently seen address makes room; expiry is bounded. */
static void test_table(void)
{
	char name[32];
	struct sg_dp_peers *t;
	enum sg_dp_peers_learn rc;
	uint64_t mac = 0;
	unsigned int n;

	snprintf(name, sizeof(name), "pr_tab_%d", (int)getpid());
	t = sg_dp_peers_create(name, 8, (int)rte_socket_id());
	if (!SG_CHECK(t != NULL, "create: %s", rte_strerror(rte_errno)))
		return;
	/* (the calls are made once, outside the checks, which print their operands again) */
	for (uint64_t a = 0; a < 8; a++) {
		rc = sg_dp_peers_learn(t, 100 + a, 1000 + a, 10 + a);
		SG_CHECK_EQ(rc, SG_DP_PEER_NEW);
	}
	SG_CHECK_EQ(sg_dp_peers_count(t), 8);
	/* address 100 is seen again (a new MAC): 101 is now the least recently seen */
	rc = sg_dp_peers_learn(t, 100, 2000, 20);
	SG_CHECK_EQ(rc, SG_DP_PEER_SEEN);
	rc = sg_dp_peers_learn(t, 200, 3000, 21);
	SG_CHECK_EQ(rc, SG_DP_PEER_EVICTED);
	SG_CHECK_EQ(sg_dp_peers_lookup(t, 101, &mac), -ENOENT);
	SG_CHECK(sg_dp_peers_lookup(t, 100, &mac) == 0 && mac == 2000, "100's new MAC");
	SG_CHECK(sg_dp_peers_lookup(t, 200, &mac) == 0 && mac == 3000, "200 learnt");
	SG_CHECK_EQ(sg_dp_peers_count(t), 8);
	/* at 30 with 15 ns idle: 102..105 (seen 12..15) are idle; 3 at most per call */
	n = sg_dp_peers_expire(t, 30, 15, 3);
	SG_CHECK_EQ(n, 3);
	n = sg_dp_peers_expire(t, 30, 15, 3);
	SG_CHECK_EQ(n, 1);
	n = sg_dp_peers_expire(t, 30, 15, 3);
	SG_CHECK_EQ(n, 0);
	SG_CHECK_EQ(sg_dp_peers_count(t), 4);
	SG_CHECK_EQ(sg_dp_peers_lookup(t, 105, &mac), -ENOENT);
	SG_CHECK_EQ(sg_dp_peers_lookup(t, 106, &mac), 0);
	SG_CHECK_EQ(sg_dp_peers_lookup(t, 100, &mac), 0);
	/* refill past the capacity many times over: the count never passes it */
	for (uint64_t a = 0; a < 1000; a++)
		sg_dp_peers_learn(t, 5000 + a, a, 100 + a);
	SG_CHECK_EQ(sg_dp_peers_count(t), 8);
	for (uint64_t a = 992; a < 1000; a++)
		SG_CHECK(sg_dp_peers_lookup(t, 5000 + a, &mac) == 0 && mac == a, "newest %lu",
			 (unsigned long)a);
	n = sg_dp_peers_expire(t, 1u << 30, 1, 100);
	SG_CHECK_EQ(n, 8);
	SG_CHECK_EQ(sg_dp_peers_count(t), 0);
	rc = sg_dp_peers_learn(t, 7, 7, 1 << 30);
	SG_CHECK_EQ(rc, SG_DP_PEER_NEW);
	sg_dp_peers_free(t);
}

/*
 * The table against a model of it (an array in most-recently-seen order),
 * over random learns, lookups and expiries of 3000 addresses in a table of 8:
 * positions are reused again and again, and many addresses share a slot of
 * the table's cache of recent answers, which must never answer for an
 * address that was forgotten or replaced.
 */
static void test_table_model(void)
{
	enum { CAP = 8 };
	struct {
		uint64_t dest, mac, seen;
	} m[CAP];
	unsigned int mn = 0, bad = 0;
	uint64_t rng = 12345, now = 0;
	char name[32];
	struct sg_dp_peers *t;

	snprintf(name, sizeof(name), "pr_mod_%d", (int)getpid());
	t = sg_dp_peers_create(name, CAP, (int)rte_socket_id());
	if (!SG_CHECK(t != NULL, "create: %s", rte_strerror(rte_errno)))
		return;
	for (unsigned int step = 0; step < 200000 && bad < 5; step++) {
		uint64_t r, dest, mac;
		unsigned int i = 0, op;
		uint64_t got = 0;

		rng ^= rng << 13; /* xorshift64 */
		rng ^= rng >> 7;
		rng ^= rng << 17;
		r = rng;
		dest = 1000 + (r % 3000) * 65537;
		mac = r >> 32;
		op = (unsigned int)(r >> 20) % 8;
		now += 1 + (r >> 40) % 3;
		while (i < mn && m[i].dest != dest)
			i++;
		if (op < 3) { /* learn: to the front, evicting the last when full */
			enum sg_dp_peers_learn rc = sg_dp_peers_learn(t, dest, mac, now);
			enum sg_dp_peers_learn want = i < mn ? SG_DP_PEER_SEEN
					      : mn == CAP ? SG_DP_PEER_EVICTED : SG_DP_PEER_NEW;

			bad += !SG_CHECK(rc == want, "step %u: learn %lu: %d, want %d", step,
					 (unsigned long)dest, rc, want);
			if (i == mn) { /* a new one; when full the least recently seen goes */
				mn += mn < CAP;
				i = mn - 1;
			}
			memmove(&m[1], &m[0], i * sizeof(m[0]));
			m[0].dest = dest;
			m[0].mac = mac;
			m[0].seen = now;
		} else if (op < 7) { /* lookup */
			int rc = sg_dp_peers_lookup(t, dest, &got);

			bad += !SG_CHECK(i < mn ? rc == 0 && got == m[i].mac : rc == -ENOENT,
					 "step %u: lookup %lu: %d (MAC %lx), the model %s", step,
					 (unsigned long)dest, rc, (unsigned long)got,
					 i < mn ? "holds it" : "does not");
		} else { /* expire what was not seen for 40 */
			unsigned int n = sg_dp_peers_expire(t, now, 40, 2), want = 0;

			while (want < 2 && mn > 0 && now - m[mn - 1].seen >= 40) {
				mn--;
				want++;
			}
			bad += !SG_CHECK(n == want, "step %u: expired %u, want %u", step, n, want);
		}
		bad += !SG_CHECK(sg_dp_peers_count(t) == mn, "step %u: %u held, the model %u",
				 step, sg_dp_peers_count(t), mn);
	}
	sg_dp_peers_free(t);
}

/*
 * A ring port with 3 RX queues under a layout that names queue 0 only (like
 * net_af_packet with qpairs=3 for 3 lcores: the kernel fills every queue):
 * datagrams on queues 1 and 2 must be received and answered.
 */
static void test_unnamed_queues(void)
{
	struct rig r = {0};

	base_config(&r.c);
	dp_layout(&r.c, "(0,0,1)", "2", NULL);
	if (!SG_CHECK(rig_up(&r, 3) == 0, "queues: set-up: %s", err))
		goto out;
	run_workers(workers(&r, 2, 1, 2, 40000, 0), 4, 5, "job 1 on RX queue 2");
	run_workers(workers(&r, 1, 1, 2, 40000, 2), 4, 5, "job 1 on RX queue 1");
	run_workers(workers(&r, 0, 1, 2, 40000, 4), 4, 5, "job 1 on RX queue 0");
out:
	rig_down(&r);
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "512",
		       "--lcores=(0-2)@(0-1)", "--log-level=lib.eal:error", prefix, NULL};

	(void)argc;
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_dp_peers_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0)
		SG_TEST_SKIP_ALL("EAL cannot start here (no --no-huge support?)");
	test_table();
	test_table_model();
	test_flood("flood, one rtc lcore", "(0,0,1)");
	test_flood("flood, two rtc reducers", "(0,0,1),(0,1,2)");
	test_many_peers(140);
	test_idle_peers();
	test_unnamed_queues();
	sg_dp_eal_cleanup();
	return sg_test_finish("dp_peers");
}
