/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lcore channels (rte_ring request/response without EAL or hugepages), and a
 * live key->reducer map change under load: a dispatcher thread spreads pushes
 * of N workers over two reducer threads by the map, while an operator changes
 * the map again and again through the whole path (client, JSON-RPC server,
 * agent, channel). Every round of every key must complete exactly once with
 * the right sum.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_pause.h>
#include <rte_ring.h>

#include "sg_dp_chan.h"
#include "sg_ctl_rpc.h"
#include "sg_sum.h"
#include "sg_test.h"

/* ---- basic channel behaviour ---- */

static int echo_handler(void *arg, struct sg_dp_chan_msg *m)
{
	unsigned int *calls = arg;

	(*calls)++;
	m->arg[1] = m->arg[0] * 2;
	return m->type == SG_DP_CHAN_MSG_NOP ? 0 : -ENOTSUP;
}

struct poller {
	struct sg_dp_chan *c;
	volatile int stop;
	unsigned int calls;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
		if (sg_dp_chan_poll(p->c, echo_handler, &p->calls, 8) == 0)
			rte_pause();
	return NULL;
}

static void test_basics(void)
{
	struct sg_dp_chan *c;
	struct sg_dp_chan_msg rq = {.type = SG_DP_CHAN_MSG_NOP}, rs;
	struct poller p = {0};
	pthread_t t;
	unsigned int calls = 0, i;

	SG_CHECK(sg_dp_chan_create("x", 3) == NULL && errno == EINVAL, "size not a power of 2");
	SG_CHECK(sg_dp_chan_create("x", 1) == NULL && errno == EINVAL, "size 1");
	SG_CHECK(sg_dp_chan_create(NULL, 4) == NULL && errno == EINVAL, "no name");
	c = sg_dp_chan_create("basic", 4);
	SG_CHECK(c != NULL, "create without EAL: %s", strerror(errno));
	if (c == NULL)
		return;
	/* Nobody polls: the call times out; the late answer is discarded later. */
	rq.arg[0] = 21;
	SG_CHECK_EQ(sg_dp_chan_call(c, &rq, &rs, 1000), -ETIMEDOUT);
	/* Fill the request ring (capacity size-1 = 3, one is already queued). */
	SG_CHECK_EQ(sg_dp_chan_call(c, &rq, &rs, 0), -ETIMEDOUT);
	SG_CHECK_EQ(sg_dp_chan_call(c, &rq, &rs, 0), -ETIMEDOUT);
	SG_CHECK_EQ(sg_dp_chan_call(c, &rq, &rs, 0), -ENOBUFS);
	SG_CHECK_EQ(sg_dp_chan_poll(c, echo_handler, &calls, 2), 2);
	SG_CHECK_EQ(sg_dp_chan_poll(c, echo_handler, &calls, 8), 1);
	SG_CHECK_EQ(sg_dp_chan_poll(c, echo_handler, &calls, 8), 0);
	SG_CHECK_EQ(calls, 3);

	p.c = c;
	pthread_create(&t, NULL, poller_main, &p);
	for (i = 0; i < 1000; i++) {
		rq.type = i % 5 ? SG_DP_CHAN_MSG_NOP : SG_DP_CHAN_MSG_STATS;
		rq.arg[0] = i;
		memset(&rs, 0xa5, sizeof(rs));
		if (sg_dp_chan_call(c, &rq, &rs, 2000000) != 0) {
			SG_CHECK(0, "call %u failed", i);
			break;
		}
		/* The stale answers of the timed-out calls never come back as this one's. */
		SG_CHECK(rs.arg[1] == 2ull * i && rs.result == (i % 5 ? 0 : -ENOTSUP),
			 "call %u: arg %lu result %d", i, (unsigned long)rs.arg[1], rs.result);
	}
	__atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	SG_CHECK_EQ(p.calls, 1000);
	sg_dp_chan_destroy(c);
	sg_dp_chan_destroy(NULL);
}

/* ---- live key->reducer map change under load ---- */

#define WORKERS 4
#define KEYS 32
#define ROUNDS 300
#define LEN 64
#define REDUCERS 2

struct push {
	uint32_t key, round, worker;
	int32_t val[LEN];
};

static struct push *pushes;		  /* [ROUNDS][KEYS][WORKERS] */
static int32_t (*acc)[KEYS][LEN];	  /* [ROUNDS] */
static uint32_t cnt[ROUNDS][KEYS];	  /* pushes summed, per (round, key) */
static uint32_t done_by[ROUNDS][KEYS];	  /* reducer + 1 that completed it */
static struct rte_ring *red_ring[REDUCERS];
static volatile int gen_done, red_stop;
static unsigned int keymap_applied;

static int32_t value(unsigned int r, unsigned int k, unsigned int w, unsigned int i)
{
	return (int32_t)(r * 1000003u + k * 7919u + w * 104729u + i * 31u);
}

struct dispatcher {
	struct sg_dp_chan *chan;
	uint16_t keymap[SG_BUCKETS];
	uint16_t pending[SG_BUCKETS];
	bool has_pending;
};

/* This test's own message: a new keymap for the dispatcher (sigmad's start at 0x100). */
#define TEST_MSG_KEYMAP 0x200

static int disp_handler(void *arg, struct sg_dp_chan_msg *m)
{
	struct dispatcher *d = arg;

	if (m->type != TEST_MSG_KEYMAP)
		return -ENOTSUP;
	/* The map travels by pointer; the sender keeps it alive until the answer. */
	memcpy(d->pending, (const void *)(uintptr_t)m->arg[0], sizeof(d->pending));
	d->has_pending = true;
	return 0;
}

static void *disp_main(void *arg)
{
	struct dispatcher *d = arg;
	unsigned int r, k, w;

	for (r = 0; r < ROUNDS; r++) {
		/* Round boundary: every push of round r-1 went to its old reducer. */
		sg_dp_chan_poll(d->chan, disp_handler, d, 4);
		if (d->has_pending) {
			memcpy(d->keymap, d->pending, sizeof(d->keymap));
			d->has_pending = false;
			keymap_applied++;
		}
		for (w = 0; w < WORKERS; w++)
			for (k = 0; k < KEYS; k++) {
				struct push *p = &pushes[(r * KEYS + k) * WORKERS + w];
				unsigned int red = d->keymap[k % SG_BUCKETS];

				while (rte_ring_sp_enqueue(red_ring[red], p) != 0) {
					/* Back-pressure: keep answering the control thread. */
					sg_dp_chan_poll(d->chan, disp_handler, d, 4);
					rte_pause();
				}
			}
	}
	/* Answer whatever the control thread still sends. */
	__atomic_store_n(&gen_done, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&red_stop, __ATOMIC_ACQUIRE))
		if (sg_dp_chan_poll(d->chan, disp_handler, d, 4) == 0)
			rte_pause();
	return NULL;
}

static void *red_main(void *arg)
{
	unsigned int me = (unsigned int)(uintptr_t)arg;
	void *obj;

	for (;;) {
		struct push *p;

		if (rte_ring_sc_dequeue(red_ring[me], &obj) != 0) {
			if (__atomic_load_n(&red_stop, __ATOMIC_ACQUIRE))
				return NULL;
			rte_pause();
			continue;
		}
		p = obj;
		if (cnt[p->round][p->key] == 0)
			memcpy(acc[p->round][p->key], p->val, sizeof(p->val));
		else
			sg_sum_add(SG_DTYPE_INT32, acc[p->round][p->key], p->val, LEN);
		if (++cnt[p->round][p->key] == WORKERS)
			done_by[p->round][p->key] = me + 1;
	}
}

/* The server's callbacks: none; the node's one method is registered for this table. */
static const struct sg_ctl_agent_ops live_ops;

/* The part of sigmad's agent this test needs: layout changes, sent to the dispatcher lcore. */
static int live_layout_change(struct dispatcher *d, const struct sg_ctl_layout_change *chg,
			      char *reason)
{
	static uint16_t staged[4][SG_BUCKETS];
	static unsigned int next;
	struct sg_dp_chan_msg rq = {.type = TEST_MSG_KEYMAP}, rs;
	uint16_t *slot = staged[next++ % 4];
	unsigned int i;
	int rc;

	if (!chg->has_keymap || chg->n_idle != 0) {
		snprintf(reason, SG_CTL_REASON_MAX, "this agent changes only the keymap");
		return -ENOTSUP;
	}
	for (i = 0; i < SG_BUCKETS; i++)
		if (chg->keymap[i] >= REDUCERS) {
			snprintf(reason, SG_CTL_REASON_MAX, "no reducer %u (there are %d)",
				 chg->keymap[i], REDUCERS);
			return -EINVAL;
		}
	/* Agent-owned copy: the lcore reads it after this call's chg is gone. */
	memcpy(slot, chg->keymap, sizeof(staged[0]));
	rq.arg[0] = (uint64_t)(uintptr_t)slot;
	rc = sg_dp_chan_call(d->chan, &rq, &rs, 2000000);
	return rc != 0 ? rc : rs.result;
}

static int live_layout_set(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct sg_rpc_err *err)
{
	struct sg_ctl_layout_change chg;
	char reason[SG_CTL_REASON_MAX] = "";

	if (sg_rpc_layout_set_parse(params, &chg, err) != 0)
		return -1;
	return sg_rpc_layout_set_answer(live_layout_change(sg_rpc_node(s), &chg, reason), reason,
					res, err);
}
SG_RPC_NODE_REGISTER(&live_ops, "layout_set", live_layout_set);

static void test_live_keymap(void)
{
	struct sg_ctl_server_config cfg = {0};
	struct sg_ctl_server *srv;
	struct sg_ctl_client *cli;
	char dir[64], path[128];
	struct dispatcher d = {0};
	pthread_t dt, rt[REDUCERS];
	unsigned int r, k, w, i, changes = 0, bad = 0, moved_keys = 0, by[REDUCERS] = {0};
	uint16_t maps[2][SG_BUCKETS];

	pushes = calloc((size_t)ROUNDS * KEYS * WORKERS, sizeof(*pushes));
	acc = calloc(ROUNDS, sizeof(*acc));
	if (pushes == NULL || acc == NULL) {
		SG_CHECK(0, "out of memory");
		return;
	}
	for (r = 0; r < ROUNDS; r++)
		for (k = 0; k < KEYS; k++)
			for (w = 0; w < WORKERS; w++) {
				struct push *p = &pushes[(r * KEYS + k) * WORKERS + w];

				p->round = r;
				p->key = k;
				p->worker = w;
				for (i = 0; i < LEN; i++)
					p->val[i] = value(r, k, w, i);
			}
	for (i = 0; i < REDUCERS; i++) {
		ssize_t sz = rte_ring_get_memsize(256);

		red_ring[i] = aligned_alloc(64, (size_t)sz);
		SG_CHECK_EQ(rte_ring_init(red_ring[i], i ? "red1" : "red0", 256,
					  RING_F_SP_ENQ | RING_F_SC_DEQ),
			    0);
	}
	/* Map A: even buckets to reducer 0; map B: the opposite. */
	for (i = 0; i < SG_BUCKETS; i++) {
		d.keymap[i] = maps[0][i] = i % 2;
		maps[1][i] = 1 - i % 2;
	}
	d.chan = sg_dp_chan_create("disp", 8);
	pthread_create(&dt, NULL, disp_main, &d);
	for (i = 0; i < REDUCERS; i++)
		pthread_create(&rt[i], NULL, red_main, (void *)(uintptr_t)i);

	/*
	 * The operator flips the map as fast as the path answers: sigmactl's
	 * client -> JSON-RPC server -> agent -> channel -> dispatcher lcore.
	 */
	snprintf(dir, sizeof(dir), "/tmp/sg_dp_chan.XXXXXX");
	SG_CHECK(mkdtemp(dir) != NULL, "temporary folder");
	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	cfg.tcp_disable = true;
	cfg.unix_path = path;
	cfg.ops = &live_ops;
	cfg.ops_arg = &d;
	srv = sg_ctl_server_create(&cfg);
	cli = sg_ctl_client_connect(path, NULL, 0, 5000);
	SG_CHECK(srv != NULL && cli != NULL, "server and client: %s", strerror(errno));
	while (cli != NULL && !__atomic_load_n(&gen_done, __ATOMIC_ACQUIRE)) {
		const uint16_t *mp = maps[(changes + 1) % 2];
		char params[512], *emsg = NULL;
		int len = snprintf(params, sizeof(params), "{\"keymap\":[");

		for (i = 0; i < SG_BUCKETS; i++)
			len += snprintf(params + len, sizeof(params) - (size_t)len, "%s%u", i ? "," : "",
					mp[i]);
		snprintf(params + len, sizeof(params) - (size_t)len, "]}");
		if (sg_ctl_client_call(cli, "layout_set", params, NULL, &emsg) != 0) {
			SG_CHECK(0, "layout_set: %s", emsg ? emsg : "?");
			free(emsg);
			break;
		}
		changes++;
		usleep(200); /* leave the 2 cores to the "dataplane" */
	}
	/* A reducer that does not exist is refused before it reaches the lcore. */
	if (cli != NULL) {
		char *emsg = NULL;
		char params[512] = "{\"keymap\":[5";

		for (i = 1; i < SG_BUCKETS; i++)
			strcat(params, ",0");
		strcat(params, "]}");
		SG_CHECK_EQ(sg_ctl_client_call(cli, "layout_set", params, NULL, &emsg), -EREMOTEIO);
		SG_CHECK(emsg && strstr(emsg, "no reducer 5"), "reason: %s", emsg ? emsg : "none");
		free(emsg);
	}
	sg_ctl_client_close(cli);
	sg_ctl_server_destroy(srv);
	rmdir(dir);
	/* Let the reducers finish what is queued, then stop everyone. */
	for (;;) {
		bool empty = true;

		for (i = 0; i < REDUCERS; i++)
			empty &= rte_ring_empty(red_ring[i]);
		if (empty)
			break;
		rte_pause();
	}
	__atomic_store_n(&red_stop, 1, __ATOMIC_RELEASE);
	pthread_join(dt, NULL);
	for (i = 0; i < REDUCERS; i++)
		pthread_join(rt[i], NULL);

	/* Independent reference: the closed-form sum over workers, in wrapping int32. */
	for (r = 0; r < ROUNDS; r++)
		for (k = 0; k < KEYS; k++) {
			if (cnt[r][k] != WORKERS) {
				bad++;
				continue;
			}
			by[done_by[r][k] - 1]++;
			if (r > 0 && done_by[r][k] != done_by[r - 1][k])
				moved_keys++;
			for (i = 0; i < LEN; i++) {
				uint32_t want = 0;

				for (w = 0; w < WORKERS; w++)
					want += (uint32_t)value(r, k, w, i);
				bad += acc[r][k][i] != (int32_t)want;
			}
		}
	SG_CHECK_EQ(bad, 0);
	SG_CHECK(changes >= 3 && keymap_applied >= 3, "only %u map changes (%u applied)", changes,
		 keymap_applied);
	SG_CHECK(moved_keys > 0 && by[0] > 0 && by[1] > 0, "keys moved %u times", moved_keys);
	printf("live keymap: %u changes sent, %u applied, %u key moves, no push lost\n", changes,
	       keymap_applied, moved_keys);
	sg_dp_chan_destroy(d.chan);
	for (i = 0; i < REDUCERS; i++)
		free(red_ring[i]);
	free(pushes);
	free(acc);
}

int main(void)
{
	test_basics();
	test_live_keymap();
	return sg_test_finish("ctl_chan");
}
