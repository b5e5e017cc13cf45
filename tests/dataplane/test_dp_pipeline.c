/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's pipeline in one process: ring ports, a generator acting as N
 * workers on the main lcore, and the daemon's own lcore loops. Every RESULT
 * element is compared with the exactly known sum (sg_dp_gen), with loss
 * injected on both directions, and pushes damaged under their UDP checksum.
 * Also: ARP, garbage frames counted by reason,
 * every layout kind (io + reduce, run to completion with hand-off, one lcore),
 * the sleep idle policy, bad layouts refused with their documented
 * message before anything starts, the end of a run, workers backing off when
 * no answer comes, and pools faulted in when made.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_dp_lcore.h"
#include "sg_dp_net.h"
#include "sg_dp_testdrv.h"
#include "dp_pipe_util.h"
#include "sg_test.h"

static char err[512];

struct residency {
	size_t pages, resident;
};

/* rte_mempool_mem_iter callback: count the resident pages of one chunk (mincore). */
static void count_resident(struct rte_mempool *mp, void *arg, struct rte_mempool_memhdr *mh,
			   unsigned int idx)
{
	struct residency *r = arg;
	long n, got = sg_test_resident(mh->addr, mh->len, &n);

	(void)mp;
	(void)idx;
	r->resident += got > 0 ? (size_t)got : 0;
	r->pages += (size_t)n;
}

/*
 * Pools are faulted in when made (sg_dp_net_pool_populate): without hugepages
 * EAL memory is mapped page by page on first touch, and a pool hands out every
 * mbuf before it reuses one, so the faults went on through whole benchmark
 * runs (about 30,000 a second in sigmad --demo on the loaded 2-CPU VM). Runs
 * first, while EAL's memory is untouched: an mbuf's data pages are not
 * resident until the pool is faulted in, and all of them are after.
 */
static void test_prefault(void)
{
	struct rte_mempool *mp = rte_pktmbuf_pool_create("sg_prefault_test", 512, 0, 0, 9216,
							 (int)rte_socket_id());
	struct residency before = {0}, after = {0};

	if (!SG_CHECK(mp != NULL, "pool: %s", rte_strerror(rte_errno)))
		return;
	rte_mempool_mem_iter(mp, count_resident, &before);
	sg_dp_net_pool_populate(mp);
	rte_mempool_mem_iter(mp, count_resident, &after);
	printf("prefault: %zu of %zu pages resident before, %zu after\n", before.resident,
	       before.pages, after.resident);
	SG_CHECK(before.resident < before.pages, "the test cannot tell: all resident before");
	SG_CHECK_EQ(after.resident, after.pages);
	rte_mempool_free(mp);
}

static void base_config(struct sg_dp_config *c, unsigned int workers, unsigned int keys)
{
	sg_dp_config_defaults(c);
	c->mbufs = 4096;
	c->pool_bufs = 1024;
	c->n_jobs = 1;
	c->jobs[0].workers = workers;
	c->jobs[0].keys = keys;
	c->jobs[0].partition_bytes = 40000; /* 4 full chunks of 8920 B and one short one */
	c->timeout_ms = 5000;
}

static uint64_t drops_of(const struct sg_dp_loop_result *r, enum sg_dp_ndrop d)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < r->n_lcores; i++)
		n += r->lcores[i].drops[d];
	return n;
}

/* Run one scenario and check that every round completed with correct sums. */
static void scenario(const char *name, const struct sg_dp_config *c,
		     const struct sg_dp_loop_conf *lc, struct sg_dp_loop_result *r)
{
	int rc = sg_dp_loopback_run(c, lc, r, stdout, err, sizeof(err));
	const struct sg_dp_job_cfg *j = &c->jobs[0];
	uint64_t slots = (uint64_t)j->keys * ((j->partition_bytes + 8919) / 8920);

	printf("[%s] %.2f s: %lu rounds of %lu, %lu results ok, %lu bad, %lu retransmits, "
	       "%lu lost out, %lu lost in\n", name, r->seconds,
	       (unsigned long)r->gen.rounds_done, (unsigned long)r->gen.rounds_total,
	       (unsigned long)r->gen.results_ok, (unsigned long)r->gen.results_bad,
	       (unsigned long)r->gen.retransmits, (unsigned long)r->gen.dropped_out,
	       (unsigned long)r->gen.dropped_in);
	SG_CHECK(rc == 0, "%s: set-up failed: %s", name, err);
	SG_CHECK(r->rc == 0, "%s: did not complete", name);
	SG_CHECK_EQ(r->gen.rounds_total, slots * lc->rounds);
	SG_CHECK_EQ(r->gen.rounds_done, r->gen.rounds_total);
	SG_CHECK_EQ(r->gen.results_bad, 0);
	/* every worker got every round's result exactly once as far as it is concerned */
	SG_CHECK_EQ(r->gen.results_ok, r->gen.rounds_total * j->workers);
	SG_CHECK_EQ(r->eng.rounds_completed, r->gen.rounds_total);
	SG_CHECK_EQ(r->eng.incomplete_slots, 0);
}

static void test_io_reduce(void)
{
	struct sg_dp_config c;
	struct sg_dp_loop_conf lc = {.rounds = 4, .window = 16, .seed = 1, .timeout_s = 60,
				     .garbage = 12, .arp = true, .retrans_us = 100000};
	struct sg_dp_loop_result r;
	uint64_t summed = 0, handoff = 0;

	base_config(&c, 4, 6);
	dp_layout(&c, "(0,0,1)", "2", NULL);
	scenario("io+reduce, no loss", &c, &lc, &r);
	SG_CHECK_EQ(r.gen.arp_replies, 1);
	for (unsigned int i = 0; i < r.n_lcores; i++) {
		summed += r.lcores[i].bytes_summed;
		handoff += r.lcores[i].handoff_pkts;
	}
	/* every push is summed exactly once, retransmitted or not */
	SG_CHECK_EQ(summed, r.gen.bytes_pushed);
	/* the I/O lcore hands every push to the reducer, plus the bad-magic garbage and
	 * the garbage with a wrong UDP checksum: the reducer checks it while it sums */
	SG_CHECK_EQ(handoff, r.gen.pushes_sent + r.gen.retransmits + 2 + 2);
	/* garbage: 12 frames, 2 per kind; the bad-magic ones reach the engine */
	SG_CHECK_EQ(drops_of(&r, SG_DP_ND_ETHERTYPE), 2);
	SG_CHECK_EQ(drops_of(&r, SG_DP_ND_IP_CSUM), 2);
	SG_CHECK_EQ(drops_of(&r, SG_DP_ND_UDP_PORT), 2);
	SG_CHECK_EQ(drops_of(&r, SG_DP_ND_SHORT), 2);
	SG_CHECK_EQ(drops_of(&r, SG_DP_ND_UDP_CSUM), 2);
	SG_CHECK_EQ(drops_of(&r, SG_DP_ND_PROTO), 2);
	SG_CHECK_EQ(r.eng.drops[SG_DP_DROP_MAGIC], 2);
	/* pushes come from mbufs that hold their elements: none is copied while no
	 * retransmit adds to the window (sg_dp_gen_conf.prepared) */
	if (r.gen.retransmits == 0)
		SG_CHECK_EQ(r.gen.copied, 0);
}

static void test_rtc_loss(void)
{
	struct sg_dp_config c;
	struct sg_dp_loop_conf lc = {.rounds = 6, .window = 32, .loss = 0.1, .seed = 7,
				     .retrans_us = 3000, .timeout_s = 60};
	struct sg_dp_loop_result r;

	base_config(&c, 5, 8);
	dp_layout(&c, NULL, NULL, "(0,0,1),(0,1,2)");
	c.sleep_lcores[2] = true; /* the hand-off receiver may sleep, the other polls */
	scenario("rtc x2, 10% loss", &c, &lc, &r);
	SG_CHECK(r.gen.dropped_out > 0 && r.gen.dropped_in > 0, "loss was injected");
	SG_CHECK(r.gen.retransmits > 0, "retransmitted");
	/* a lost RESULT is recovered from the kept copy */
	SG_CHECK(r.eng.retransmits_served > 0, "retransmits served");
	/* lcore 1 received everything and handed the other reducer's keys over */
	SG_CHECK(r.lcores[0].handoff_pkts > 0, "hand-off used");
	SG_CHECK(r.lcores[1].reduced_pkts > 0, "second reducer reduced");
	SG_CHECK_EQ(r.lcores[0].idle, SG_IDLE_POLL);
	SG_CHECK_EQ(r.lcores[1].idle, SG_IDLE_SLEEP);
}

/*
 * Pushes damaged on the way (one bit flipped under a valid UDP checksum): the
 * reducer checks the checksum in the pass that sums the elements, so none may
 * reach a sum. Each one is a udp_csum drop, the workers' retransmits complete
 * every round, and every RESULT is exact. One reducer, then an I/O lcore
 * handing every push to a reducer (which checks them, not the I/O lcore).
 */
static void test_damaged_pushes(void)
{
	static const char *const rtc[] = {"(0,0,1)", NULL}, *const io[] = {NULL, "(0,0,1)"};

	for (int l = 0; l < 2; l++) {
		struct sg_dp_config c;
		struct sg_dp_loop_conf lc = {.rounds = 4, .window = 16, .corrupt = 0.1, .seed = 11,
					     .retrans_us = 3000, .timeout_s = 60};
		struct sg_dp_loop_result r;
		uint64_t summed = 0;

		base_config(&c, 4, 6);
		c.udp_checksum = true;
		dp_layout(&c, io[l], io[l] ? "2" : NULL, rtc[l]);
		scenario(l ? "damaged pushes, io+reduce" : "damaged pushes, rtc", &c, &lc, &r);
		for (unsigned int i = 0; i < r.n_lcores; i++)
			summed += r.lcores[i].bytes_summed;
		SG_CHECK(r.gen.corrupted > 20, "%lu pushes damaged", (unsigned long)r.gen.corrupted);
		SG_CHECK_EQ(drops_of(&r, SG_DP_ND_UDP_CSUM), r.gen.corrupted);
		SG_CHECK_EQ(summed, r.gen.bytes_pushed); /* each intact push once, no damaged one */
		SG_CHECK_EQ(r.eng.rx_pushes, r.gen.rounds_total * c.jobs[0].workers);
		/* a damaged prepared push would stay damaged: each one built is a copy
		 * (unsent also counts those built but refused by a full ring) */
		SG_CHECK(r.gen.copied <= r.gen.pushes_sent + r.gen.retransmits &&
				 r.gen.copied + r.gen.unsent >= r.gen.pushes_sent + r.gen.retransmits,
			 "%lu pushes copied", (unsigned long)r.gen.copied);
	}
}

/*
 * The end of a run: every frame the generator sent has been received and
 * dealt with before the counters are read. Workers that retransmit at once
 * (after 1 us) keep copies of the last pushes in flight when the last RESULT
 * comes back; the run must let the node take them in before it stops, or
 * the node's counters fall short of the generator's (as test_io_reduce's and
 * test_damaged_pushes' did under load, when a stalled node made the workers
 * retransmit). One lcore, then an I/O lcore handing every push to a reducer.
 */
static void test_end_of_run(void)
{
	static const char *const rtc[] = {"(0,0,1)", NULL}, *const io[] = {NULL, "(0,0,1)"};

	for (int l = 0; l < 2; l++) {
		struct sg_dp_config c;
		struct sg_dp_loop_conf lc = {.rounds = 3, .window = 4, .seed = 5, .retrans_us = 1,
					     .timeout_s = 60};
		struct sg_dp_loop_result r;
		uint64_t rx = 0, handoff = 0, reduced = 0, sent;

		base_config(&c, 3, 2);
		dp_layout(&c, io[l], io[l] ? "2" : NULL, rtc[l]);
		scenario(l ? "end of run, io+reduce" : "end of run, rtc", &c, &lc, &r);
		for (unsigned int i = 0; i < r.n_lcores; i++) {
			rx += r.lcores[i].rx_pkts;
			handoff += r.lcores[i].handoff_pkts;
			reduced += r.lcores[i].reduced_pkts;
		}
		sent = r.gen.pushes_sent + r.gen.retransmits - r.gen.unsent;
		SG_CHECK(r.gen.retransmits > 0, "retransmitted");
		SG_CHECK_EQ(rx, sent);
		/* handed off or dropped for a full ring; every one handed off is reduced */
		SG_CHECK_EQ(l ? handoff + drops_of(&r, SG_DP_ND_RING_FULL) : 0, l ? rx : 0);
		SG_CHECK_EQ(reduced, l ? handoff : rx);
	}
}

/*
 * Workers whose node does not answer (descheduled, on a loaded machine) back
 * off: each retransmit of a round doubles its slot's timeout, up to 64 x
 * retrans_us. With a fixed timeout they resent the whole window every
 * retrans_us, about 100 copies of each push in 100 ms here, which the node
 * then had to work through once it ran again.
 */
static void test_backoff(void)
{
	const uint32_t workers = 2, window = 4, rto_us = 1000;
	struct rte_ring *to = rte_ring_create("sg_bo_to", 4096, (int)rte_socket_id(), 0);
	struct rte_ring *from = rte_ring_create("sg_bo_from", 64, (int)rte_socket_id(), 0);
	struct rte_mempool *mp = rte_pktmbuf_pool_create("sg_bo_pool", 2048, 0,
							 SG_DP_MBUF_PRIV_SIZE, 9216,
							 (int)rte_socket_id());
	struct sg_dp_gen_conf gc = {
		.to_dut = to, .from_dut = from, .port = -1, .pool = mp, .dut_ip = 1,
		.dut_udp_port = 9300, .job = 1, .token = 1, .workers = workers, .keys = 1,
		.partition_bytes = 40000, .chunk_bytes = 8920, .rounds = 1, .window = window,
		.retrans_us = rto_us, .seed = 1,
	};
	struct sg_dp_gen *g = NULL;
	struct sg_dp_gen_stats st;
	uint64_t hz = rte_get_tsc_hz(), t0, bound = 0;
	double elapsed_us, next = 0;
	void *m = NULL;

	if (!SG_CHECK(to && from && mp, "rings and pool"))
		goto out;
	g = sg_dp_gen_create(&gc);
	if (!SG_CHECK(g != NULL, "generator: %s", strerror(errno)))
		goto out;
	t0 = rte_rdtsc();
	SG_CHECK_EQ(sg_dp_gen_run(g, t0 + hz / 10, NULL), -ETIMEDOUT);
	elapsed_us = (double)(rte_rdtsc() - t0) * 1e6 / (double)hz;
	sg_dp_gen_stats(g, &st);
	/* the most retransmits of one push that doubling timeouts allow in that time:
	 * the k-th comes rto x (1 + 2 + ... + 2^(k-1)) after the first send */
	for (;; bound++) {
		next += (double)rto_us * (double)(1u << (bound < 6 ? bound : 6));
		if (next > elapsed_us)
			break;
	}
	printf("back-off: %.0f ms without an answer: %lu retransmits, at most %lu allowed\n",
	       elapsed_us / 1000, (unsigned long)st.retransmits,
	       (unsigned long)(bound * window * workers));
	SG_CHECK(st.retransmits >= window * workers, "every push was retransmitted");
	SG_CHECK(st.retransmits <= bound * window * workers, "%lu retransmits",
		 (unsigned long)st.retransmits);
out:
	sg_dp_gen_destroy(g);
	while (to && rte_ring_dequeue(to, &m) == 0)
		rte_pktmbuf_free(m);
	rte_ring_free(to);
	rte_ring_free(from);
	rte_mempool_free(mp);
}

static void test_single_sleep(void)
{
	struct sg_dp_config c;
	struct sg_dp_loop_conf lc = {.rounds = 3, .window = 8, .loss = 0.05, .seed = 3,
				     .timeout_s = 60};
	struct sg_dp_loop_result r;

	base_config(&c, 16, 2);
	c.idle = SG_IDLE_SLEEP;
	c.idle_sleep_us = 200;
	c.udp_checksum = false;
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	scenario("rtc x1, 16 workers, sleep policy, 5% loss", &c, &lc, &r);
	SG_CHECK(r.lcores[0].idle_cycles > 0, "idle time accounted");
}

static void test_bad_layouts(void)
{
	static const struct {
		const char *io, *red, *rtc, *needle;
	} bad[] = {
		{"(0,0,1)", "1", NULL, "two roles"},
		{"(0,0,1)", "9", NULL, "not enabled"},
		{"(0,0,0)", "1", NULL, "main lcore"},
		{"(0,0,1)", NULL, NULL, "no reducer"},
		{NULL, "1", NULL, "receives"},
		{"(5,0,1)", "2", NULL, "does not exist"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sg_dp_config c;
		struct sg_dp_loop_conf lc = {.rounds = 1};
		struct sg_dp_loop_result r;
		struct sg_dp_pipeline *p;

		base_config(&c, 2, 1);
		dp_layout(&c, bad[i].io, bad[i].red, bad[i].rtc);
		err[0] = '\0';
		if (strstr(bad[i].needle, "does not exist")) {
			/* the loopback run remaps port 0; a direct create sees the real ports */
			p = sg_dp_pipeline_create(&c, err, sizeof(err));
			SG_CHECK(p == NULL, "bad layout %zu accepted", i);
			sg_dp_pipeline_destroy(p);
		} else {
			SG_CHECK(sg_dp_loopback_run(&c, &lc, &r, NULL, err, sizeof(err)) < 0,
				 "bad layout %zu accepted", i);
		}
		SG_CHECK(strstr(err, bad[i].needle) != NULL, "layout %zu: \"%s\" lacks \"%s\"", i,
			 err, bad[i].needle);
	}
}

/*
 * The engine and sigmad's pipeline have a logtype each, so that one can be
 * turned up without the other: both registered "sigma.dataplane" before,
 * which rte_log made one logtype.
 */
extern int sg_dp_engine_logtype;

static void test_logtypes(void)
{
	int eng = rte_log_get_level(sg_dp_engine_logtype), dp = rte_log_get_level(sg_dp_logtype);

	SG_CHECK(sg_dp_engine_logtype >= 0 && sg_dp_logtype >= 0 &&
		 sg_dp_engine_logtype != sg_dp_logtype, "one logtype: engine %d, sigmad %d",
		 sg_dp_engine_logtype, sg_dp_logtype);
	SG_CHECK_EQ(rte_log_set_level_pattern("sigma.engine", RTE_LOG_DEBUG), 0);
	SG_CHECK_EQ(rte_log_get_level(sg_dp_engine_logtype), RTE_LOG_DEBUG);
	SG_CHECK_EQ(rte_log_get_level(sg_dp_logtype), dp);
	rte_log_set_level(sg_dp_engine_logtype, (uint32_t)eng);
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "512",
		       "--lcores=(0-2)@(0-1)", "--log-level=lib.eal:error", prefix, NULL};

	(void)argc;
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_dp_pipe_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0)
		SG_TEST_SKIP_ALL("EAL cannot start here (no --no-huge support?)");
	test_logtypes();
	test_prefault();
	test_bad_layouts();
	test_io_reduce();
	test_rtc_loss();
	test_damaged_pushes();
	test_end_of_run();
	test_backoff();
	test_single_sleep();
	sg_dp_eal_cleanup();
	return sg_test_finish("dp_pipeline");
}
