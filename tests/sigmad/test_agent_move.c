/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Key moves packet by packet: sigmad's pipeline on a ring port with two rtc
 * reducers and the control agent, and this thread as two workers that send
 * each push by hand and read every reply. The slot timeout is 250 ms, so an
 * idle chunk's move commits after 500 ms (docs/sigmad.md, "Moving keys
 * between reducers live").
 *
 * Issue 17, failure 2: both ranks finish round 1 of a chunk, the chunk is
 * idle, layout_set moves its bucket, and a late copy of rank 0's round-1 push
 * reaches the new reducer. Round 2 must still complete with the right sum and
 * no WORKER_LOST, exactly as for a key that did not move.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_ctl_server.h"
#include "sg_dp_net.h"
#include "sg_dp_agent.h"
#include "sg_dp_pipeline.h"
#include "dp_pipe_util.h"
#include "sg_test.h"
#include "agent_test_util.h"

#define JOB 1
#define TOKEN 0x5349474d41000001ull
#define NELEM 8 /* one chunk per key */
#define TIMEOUT_MS 250

static char err[512];
static char dir[32], ctl_path[96];

struct node {
	struct rte_ring *rx[2], *tx;
	struct rte_mempool *pool;
	int port;
	struct sg_dp_pipeline *p;
	struct sg_dp_agent *agent;
	struct sg_ctl_client *ctl;
	struct sg_dp_net net;
};

/* What a worker got back for one key. */
struct replies {
	unsigned int results[2][4]; /* [rank][round] RESULTs with the right sum */
	unsigned int bad, lost, gone, nacks;
};

static float value(uint32_t rank, uint32_t key, uint32_t round, uint32_t i)
{
	return (float)((rank + 1) * 100 + key * 10 + round * 1000 + i);
}

static void send_push(struct node *n, uint32_t rank, uint32_t key, uint32_t round, bool retrans)
{
	float v[NELEM];
	struct sg_dp_msg msg = {
		.type = SG_DP_T_PUSH, .flags = retrans ? SG_DP_F_RETRANS : 0,
		.dtype = SG_DTYPE_FP32, .job = JOB, .rank = (uint16_t)rank, .token = TOKEN,
		.key = key, .chunk = 0, .nchunks = 1, .round = round, .nelem = NELEM,
	};
	struct sg_dp_net w = {.mac = {{0x02, 0, 0, 0, 0, (uint8_t)(rank + 1)}},
			      .ip = rte_cpu_to_be_32(0x0a0b0064u + rank),
			      .udp_port = rte_cpu_to_be_16((uint16_t)(40000 + rank)),
			      .udp_checksum = true};
	struct sg_dp_peer to = {.mac = n->net.mac, .ip = n->net.ip, .udp_port = n->net.udp_port};
	struct rte_mbuf *m = rte_pktmbuf_alloc(n->pool);
	uint32_t len = SG_DP_HDR_LEN + sizeof(v);
	uint8_t *f = m ? (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(SG_DP_NET_HDR_LEN + len)) :
			 NULL;

	SG_CHECK(f != NULL, "no mbuf for a push");
	if (f == NULL)
		return;
	for (uint32_t i = 0; i < NELEM; i++)
		v[i] = value(rank, key, round, i);
	SG_CHECK(sg_dp_build(f + SG_DP_NET_HDR_LEN, len, &msg, v, sizeof(v)) == (int)len,
		 "push built");
	sg_dp_net_build(&w, &to, f, len, NULL);
	SG_CHECK(rte_ring_enqueue(n->rx[0], m) == 0, "RX ring full");
}

/* Read what the node sent for @p ms ms and file each reply of @p key under @p r. */
static void collect(struct node *n, uint32_t key, struct replies *r, unsigned int ms)
{
	uint64_t end = rte_rdtsc() + rte_get_tsc_hz() * ms / 1000;

	do {
		struct rte_mbuf *m;
		uint8_t lin[2048];
		const uint8_t *d;
		struct sg_dp_msg msg;
		float sum[NELEM];

		if (rte_ring_dequeue(n->tx, (void **)&m) != 0) {
			rte_delay_us_sleep(200);
			continue;
		}
		/* a fanned-out RESULT is a header segment chained to the payload */
		d = m->pkt_len <= sizeof(lin) ? rte_pktmbuf_read(m, 0, m->pkt_len, lin) : NULL;
		if (d != NULL && m->pkt_len > SG_DP_NET_HDR_LEN &&
		    sg_dp_parse(d + SG_DP_NET_HDR_LEN, m->pkt_len - SG_DP_NET_HDR_LEN, &msg,
				NULL) == 0 && msg.key == key) {
			if (msg.type == SG_DP_T_RESULT && msg.rank < 2 && msg.round < 4 &&
			    msg.nelem == NELEM) {
				bool ok = true;

				memcpy(sum, msg.payload, sizeof(sum));
				for (uint32_t i = 0; i < NELEM; i++)
					ok &= sum[i] == value(0, key, msg.round, i) +
							value(1, key, msg.round, i);
				if (ok)
					r->results[msg.rank][msg.round]++;
				else
					r->bad++;
			} else if (msg.type == SG_DP_T_ERROR && msg.code == SG_DP_C_WORKER_LOST) {
				r->lost++;
			} else if (msg.type == SG_DP_T_ERROR && msg.code == SG_DP_C_GONE) {
				r->gone++;
			} else if (msg.type == SG_DP_T_NACK) {
				r->nacks++;
			} else {
				r->bad++;
			}
		}
		rte_pktmbuf_free(m);
	} while (rte_rdtsc() < end);
}

/* layout_set @p km and wait until the move committed. */
static bool move_to(struct node *n, const uint16_t *km)
{
	char params[512], *res = NULL, *emsg = NULL;
	uint64_t end = rte_rdtsc() + 5 * rte_get_tsc_hz();

	keymap_json(params, sizeof(params), km);
	SG_CHECK(sg_ctl_client_call(n->ctl, "layout_set", params, &res, &emsg) == 0,
		 "layout_set: %s", emsg ? emsg : "?");
	free(res);
	free(emsg);
	while (rte_rdtsc() < end)
		if (keymap_is(n->ctl, km))
			return true;
		else
			rte_delay_us_sleep(10000);
	return false;
}

static int node_up(struct node *n)
{
	struct sg_dp_config c;
	struct rte_ring *txq[2];
	struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
	struct sg_dp_agent_conf ac = {.name = "mover"};
	char name[64];
	unsigned int tag = (unsigned int)getpid();

	for (int q = 0; q < 2; q++) {
		snprintf(name, sizeof(name), "sg_mvrx%d_%u", q, tag);
		n->rx[q] = rte_ring_create(name, 1024, (int)rte_socket_id(), 0);
	}
	snprintf(name, sizeof(name), "sg_mvtx_%u", tag);
	n->tx = rte_ring_create(name, 4096, (int)rte_socket_id(), RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "sg_mvpool_%u", tag);
	n->pool = rte_pktmbuf_pool_create(name, 1024, 0, SG_DP_MBUF_PRIV_SIZE, 2048,
					  (int)rte_socket_id());
	if (!n->rx[0] || !n->rx[1] || !n->tx || !n->pool)
		return -ENOMEM;
	txq[0] = txq[1] = n->tx;
	snprintf(name, sizeof(name), "sg_mvport_%u", tag);
	n->port = rte_eth_from_rings(name, n->rx, 2, txq, 2, rte_socket_id());
	if (n->port < 0)
		return -ENODEV;
	sg_dp_config_defaults(&c);
	c.mtu = 1500;
	c.mbufs = 2048;
	c.pool_bufs = 64;
	c.timeout_ms = TIMEOUT_MS;
	c.idle = SG_IDLE_SLEEP;
	c.jobs[0].workers = 2;
	c.jobs[0].keys = 8;
	c.jobs[0].partition_bytes = NELEM * 4;
	dp_layout(&c, NULL, NULL, "(0,0,1),(0,1,2)");
	for (unsigned int i = 0; i < c.n_lcores; i++)
		c.lcores[i].port = (uint16_t)n->port;
	n->p = sg_dp_pipeline_create(&c, err, sizeof(err));
	SG_CHECK(n->p != NULL, "pipeline: %s", err);
	if (n->p == NULL || sg_dp_pipeline_start(n->p) != 0)
		return -EIO;
	sg_dp_pipeline_net(n->p, (uint16_t)n->port, &n->net);
	n->agent = sg_dp_agent_start(n->p, &sc, &ac, NULL, err, sizeof(err));
	SG_CHECK(n->agent != NULL, "agent: %s", err);
	n->ctl = n->agent ? sg_ctl_client_connect(ctl_path, NULL, 0, 5000) : NULL;
	return n->ctl != NULL ? 0 : -EIO;
}

static void node_down(struct node *n)
{
	void *m = NULL;

	sg_ctl_client_close(n->ctl);
	sg_dp_agent_stop(n->agent);
	sg_dp_pipeline_stop(n->p);
	for (int q = 0; q < 2; q++)
		while (n->rx[q] && rte_ring_dequeue(n->rx[q], &m) == 0)
			rte_pktmbuf_free(m);
	while (n->tx && rte_ring_dequeue(n->tx, &m) == 0)
		rte_pktmbuf_free(m);
	sg_dp_pipeline_destroy(n->p);
	if (n->port >= 0)
		rte_eth_dev_close((uint16_t)n->port);
	for (int q = 0; q < 2; q++)
		rte_ring_free(n->rx[q]);
	rte_ring_free(n->tx);
	rte_mempool_free(n->pool);
}

/* Both ranks push round @p round of @p key until both have its RESULT or @p ms pass. */
static void round_trip(struct node *n, uint32_t key, uint32_t round, struct replies *r,
		       unsigned int ms)
{
	for (unsigned int t = 0; t < ms; t += 20) {
		for (uint32_t rank = 0; rank < 2; rank++)
			if (r->results[rank][round] == 0)
				send_push(n, rank, key, round, t > 0);
		collect(n, key, r, 20);
		if (r->results[0][round] && r->results[1][round])
			return;
	}
}

/* Issue 17, failure 2, on a key whose bucket moves and on one whose bucket stays. */
static void test_idle_move_late_copy(struct node *n)
{
	uint16_t km[SG_BUCKETS];
	uint32_t moved = 0, stays;
	struct replies r[2] = {0};
	uint32_t kk[2];

	for (int b = 0; b < SG_BUCKETS; b++)
		km[b] = (uint16_t)(b % 2);
	SG_CHECK(keymap_is(n->ctl, km), "the default keymap");
	/* a key on reducer 0 that moves, and one in another bucket that stays */
	while (sg_dp_bucket_of(JOB, moved) % 2 != 0)
		moved++;
	for (stays = 0; sg_dp_bucket_of(JOB, stays) == sg_dp_bucket_of(JOB, moved); stays++)
		;
	kk[0] = moved;
	kk[1] = stays;
	for (int i = 0; i < 2; i++) {
		round_trip(n, kk[i], 1, &r[i], 1000);
		SG_CHECK(r[i].results[0][1] && r[i].results[1][1], "key %u: round 1 done", kk[i]);
	}
	km[sg_dp_bucket_of(JOB, moved)] = 1;
	SG_CHECK(move_to(n, km), "the move of an idle bucket did not commit");
	/* the late copy: rank 0's round 1, retransmitted, to both keys */
	for (int i = 0; i < 2; i++) {
		send_push(n, 0, kk[i], 1, true);
		collect(n, kk[i], &r[i], 30);
	}
	for (int i = 0; i < 2; i++) {
		round_trip(n, kk[i], 2, &r[i], 600);
		printf("key %u (%s): round 2 results %u/%u, %u WORKER_LOST, %u GONE, %u NACK, "
		       "%u bad\n", kk[i], i ? "stays" : "moved", r[i].results[0][2],
		       r[i].results[1][2], r[i].lost, r[i].gone, r[i].nacks, r[i].bad);
		SG_CHECK(r[i].results[0][2] && r[i].results[1][2], "key %u: round 2 wedged",
			 kk[i]);
		SG_CHECK_EQ(r[i].lost, 0);
		SG_CHECK_EQ(r[i].bad, 0);
	}
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "256",
		       "--lcores=(0-2)@(0-1)", "--log-level=lib.eal:error", prefix, NULL};
	struct node n = {.port = -1};

	(void)argc;
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_agmv_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0)
		SG_TEST_SKIP_ALL("EAL cannot start here (no --no-huge support?)");
	snprintf(dir, sizeof(dir), "/tmp/sg_agmv.XXXXXX");
	if (mkdtemp(dir) == NULL)
		SG_TEST_SKIP_ALL("no temporary folder");
	snprintf(ctl_path, sizeof(ctl_path), "%s/ctl.sock", dir);
	if (node_up(&n) == 0)
		test_idle_move_late_copy(&n);
	else
		SG_CHECK(false, "node set-up failed: %s", err);
	node_down(&n);
	unlink(ctl_path);
	rmdir(dir);
	sg_dp_eal_cleanup();
	return sg_test_finish("agent_move");
}
