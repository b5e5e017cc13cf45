/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma-core transport of sigmad's pipeline ([transport] type = verbs):
 * the same lcore loop, reducer rings, keymap, control agent and telemetry as
 * the ethdev transport, with sg_dp_verbs (QP + CQs + registered buffers)
 * where ethdev has RX/TX queues.
 *
 * Layouts (checked by verbs_check() before anything is built):
 * - UD: io, reduce and rtc lcores as with ethdev, every io/rtc entry on
 *   port 0 (the [verbs] device and port; the queue number only orders the
 *   receiving QPs). Every lcore owns one sg_dp_verbs: io and rtc lcores
 *   receive on theirs (workers address their QPNs), and every reducer sends
 *   its engine's replies on its own, so no QP is shared and no lock is
 *   taken. A reply may therefore come from another node QP than the one the
 *   push went to, which UD allows. A reducer's QP also receives (a push
 *   sent there is summed or handed on like any other). A push for a key that another reducer owns
 *   is copied into an item of the hand-off mempool, with the sender's UD
 *   address; the owner makes its own address handle for it (one per worker
 *   per reducer, cached).
 * - RC: exactly one rtc lcore. A worker's connection (QP) carries both its
 *   writes and the node's replies, and a QP belongs to the lcore polling it,
 *   so the lcore that accepts a connection must also sum and answer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "sg_dp_hand.h"
#include "sg_dp_lcore_ctl.h"
#include "sg_dp_transport.h"
#include "sg_dp_verbs.h"

/* The transport's own control-channel messages (struct sg_dp_transport.ctl). */
#define SG_DP_MSG_VERBS_RC_CONNECT SG_DP_MSG_TRANSPORT /* arg[0]: the request */
#define SG_DP_MSG_VERBS_RC_DISCONNECT (SG_DP_MSG_TRANSPORT + 1) /* arg[0]: the peer id */

/* defined at the end, with the ops it names */
static const struct sg_dp_transport sg_dp_transport_verbs;

/* A push on its way to the reducer that owns its key. */
struct vtp_item {
	struct sg_dp_hand_item h;        /* the length */
	struct sg_dp_verbs_peer_key key; /* the sender, for the owner's address handle */
	struct ibv_ah_attr attr;
	uint8_t msg[];
};

struct vtp_lcore {
	struct sg_dp_verbs *t;
	struct sg_dp_tx_ops tx;      /* t's engine output */
	struct sg_dp_hand hand;      /* pushes for other reducers (no pool: one lcore) */
	uint32_t item_cap;           /* message bytes an item holds */
	uint64_t now;                /* this poll's time for the engine */
	bool moved;                  /* completions since the counters were copied */
	bool poll_failed;            /* the receive CQ failed once (logged) */
} __rte_cache_aligned;

struct vtp {
	unsigned int n_lc;
	struct vtp_lcore lc[];
};

/* [verbs] of @p c as a transport configuration. */
static int verbs_conf(const struct sg_dp_config *c, struct sg_dp_verbs_conf *vc, char *err,
		      size_t errlen)
{
	sg_dp_verbs_conf_defaults(vc);
	for (unsigned int i = 0; i < c->n_verbs_kv; i++) {
		int rc = sg_dp_verbs_conf_set(vc, c->verbs_kv[i].key, c->verbs_kv[i].value, err,
					      errlen);

		if (rc < 0)
			return rc;
	}
	vc->ops = c->verbs_ops;
	return sg_dp_verbs_conf_check(vc, err, errlen);
}

static int verbs_check(const struct sg_dp_config *c, struct sg_dp_topology *t, char *err,
		       size_t errlen)
{
	const struct sg_dp_verbs_ops *ops;
	struct sg_dp_verbs_conf vc;
	struct ibv_device **devs;
	int n = 0, rc;

	rc = verbs_conf(c, &vc, err, errlen);
	if (rc < 0)
		return rc;
	ops = vc.ops != NULL ? vc.ops : sg_dp_verbs_ops_rdma_core();
	devs = ops->get_device_list(&n);
	if (devs != NULL)
		ops->free_device_list(devs);
	if (n <= 0) {
		sg_dp_seterr(err, errlen, "[transport] type = verbs: no RDMA device "
			     "(ibv_get_device_list found none): load the NIC's RDMA driver or add "
			     "Soft-RoCE (rdma link add rxe0 type rxe netdev eth0), or set [transport] "
			     "type = dpdk");
		return -ENODEV;
	}
	/* one pseudo-port: as many receiving QPs and sending lcores as the layout has */
	rc = sg_dp_layout_port0(c, t, "verbs", "the [verbs] device and port; the queue number "
				"orders the QPs", err, errlen);
	if (rc < 0)
		return rc;
	if (vc.mode == SG_DP_VERBS_RC &&
	    (c->n_lcores != 1 || c->lcores[0].role != SG_ROLE_RTC)) {
		sg_dp_seterr(err, errlen, "[verbs] mode = rc: the layout must be exactly one rtc lcore "
			     "(a worker's connection carries its replies, so the lcore that polls it "
			     "must also sum): use rtc = (0,0,LCORE) alone, or mode = ud for io, reduce "
			     "and multi-lcore layouts");
		return -EINVAL;
	}
	return 0;
}

/* ---- data path ------------------------------------------------------------ */

/* Copy a push for reducer @p o, with the address of @p peer of this lcore's QP. */
static void hand_off(struct sg_dp_lcore *lc, struct vtp_lcore *v, unsigned int o,
		     const uint8_t *msg, uint32_t len, uint32_t peer)
{
	struct vtp_item *it = sg_dp_hand_get(lc, &v->hand);

	if (it == NULL)
		return;
	if (len > v->item_cap) {
		lc->st.drops[SG_DP_ND_SHORT]++; /* longer than any message: malformed */
		rte_mempool_put(v->hand.items, it);
		return;
	}
	if (sg_dp_verbs_peer_addr(v->t, peer, &it->key, &it->attr) < 0) {
		lc->st.drops[SG_DP_ND_NO_PEER]++;
		rte_mempool_put(v->hand.items, it);
		return;
	}
	it->h.len = len;
	memcpy(it->msg, msg, len);
	sg_dp_hand_add(lc, &v->hand, o, it);
}

/* sg_dp_verbs_poll_fn() sink: sum here, or hand to the owner. */
static int vtp_rx_one(void *arg, const uint8_t *msg, uint32_t len, uint32_t peer)
{
	struct sg_dp_lcore *lc = arg;
	struct vtp_lcore *v = lc->xp;
	int o = sg_dp_steer(lc, msg, len);

	lc->st.rx_pkts++;
	lc->st.rx_bytes += len;
	if (likely(o == SG_DP_STEER_HERE))
		sg_dp_reduce_one(lc, msg, len, peer, v->now);
	else if (o >= 0)
		hand_off(lc, v, (unsigned int)o, msg, len, peer);
	return 0;
}

static unsigned int vtp_rx(struct sg_dp_lcore *lc, unsigned int burst)
{
	struct vtp_lcore *v = lc->xp;
	int n;

	(void)burst; /* [verbs] poll_batch sizes the CQ polls */
	v->now = sg_dp_now_ns(lc->p, rte_rdtsc());
	n = sg_dp_verbs_poll_fn(v->t, vtp_rx_one, lc);
	v->moved |= n > 0;
	if (unlikely(n < 0) && !v->poll_failed) {
		/* counted every time (rx_poll_fail); a broken CQ receives nothing more */
		v->poll_failed = true;
		SG_DP_LOG(ERR, "verbs: lcore %u: ibv_poll_cq on its receive CQ failed; counted "
			  "as rx_poll_fail (/sigma/verbs); a restart makes a new CQ",
			  lc->lcore_id);
	}
	sg_dp_hand_flush(lc, &v->hand);
	return n > 0 ? (unsigned int)n : 0;
}

static void reduce_item(struct sg_dp_lcore *lc, void *item, const uint8_t *msg, uint32_t len,
			uint64_t now)
{
	struct vtp_item *it = item;
	int64_t peer = sg_dp_verbs_peer_resolve(((struct vtp_lcore *)lc->xp)->t, &it->key,
						&it->attr);

	if (peer < 0)
		lc->st.drops[SG_DP_ND_PEER_TABLE]++;
	else
		sg_dp_reduce_one(lc, msg, len, (uint64_t)peer, now);
}

static void vtp_reduce(struct sg_dp_lcore *lc, void **items, unsigned int n)
{
	sg_dp_hand_reduce(lc, &((struct vtp_lcore *)lc->xp)->hand, items, n, reduce_item);
}

static unsigned int vtp_flush(struct sg_dp_lcore *lc)
{
	struct vtp_lcore *v = lc->xp;
	unsigned int n;
	int f;

	/* A reducer's QP receives too: a push sent to it is summed or handed on, and
	 * its receive CQ never overruns (which would put the QP it sends on in error). */
	/* An io/rtc lcore stops its rx at stop, but still sends while it drains: it keeps
	 * polling its receive CQ here, else arrivals could overrun it. */
	n = (lc->role & SG_ROLE_IO) && !lc->p->stop_rx ? 0 : vtp_rx(lc, 0);
	f = sg_dp_verbs_flush(v->t);
	if (f > 0 || v->moved) {
		struct sg_dp_verbs_stats vs;

		v->moved = false;
		/* the lcore's table shows what its own QP sent */
		sg_dp_verbs_stats(v->t, &vs);
		lc->st.tx_pkts = vs.tx_packets;
		lc->st.tx_bytes = vs.tx_bytes;
	}
	return n + (f > 0 ? (unsigned int)f : 0);
}

static void *vtp_tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct vtp_lcore *v = ((struct sg_dp_lcore *)ctx)->xp;

	return v->tx.alloc(v->tx.ctx, dest, len, pkt);
}

static void vtp_tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct vtp_lcore *v = ((struct sg_dp_lcore *)ctx)->xp;

	v->tx.send(v->tx.ctx, dest, pkt, len);
}

/* ---- set-up --------------------------------------------------------------- */

static void verbs_teardown(struct sg_dp_pipeline *p)
{
	struct vtp *x = p->xp;

	if (x == NULL)
		return;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		sg_dp_verbs_destroy(x->lc[i].t);
		p->lc[i].xp = NULL;
	}
	for (unsigned int n = 0; n < RTE_MAX_NUMA_NODES; n++) {
		rte_mempool_free(p->pools[n]);
		p->pools[n] = NULL;
	}
	rte_free(x);
	p->xp = NULL;
}

static int verbs_setup(struct sg_dp_pipeline *p, char *err, size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	struct sg_dp_verbs_conf vc;
	struct vtp *x;
	char why[384];
	uint32_t msg_max = 0;
	int rc;

	rc = verbs_conf(c, &vc, err, errlen);
	if (rc < 0)
		return rc;
	x = rte_zmalloc("sg_dp_vtp", sizeof(*x) + sizeof(x->lc[0]) * p->n_lc, RTE_CACHE_LINE_SIZE);
	if (x == NULL) {
		sg_dp_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->xp = x;
	x->n_lc = p->n_lc;
	/* no ethdev port is used: /sigma/ports and the agent's port list stay empty */
	memset(p->port_used, 0, sizeof(p->port_used));
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];
		struct vtp_lcore *v = &x->lc[i];

		vc.numa_node = lc->socket;
		v->t = sg_dp_verbs_create(&vc, why, sizeof(why));
		if (v->t == NULL) {
			rc = -errno;
			sg_dp_seterr(err, errlen, "[verbs] lcore %u: %s", lc->lcore_id, why);
			return rc < 0 ? rc : -EIO;
		}
		v->tx = sg_dp_verbs_tx_ops(v->t);
		lc->xp = v;
		msg_max = sg_dp_verbs_msg_max(v->t);
		/* the control plane's jobs must fit one message too (agent, job_create) */
		p->tr_max_payload = sg_dp_verbs_max_payload(v->t);
		SG_DP_LOG(INFO, "verbs: lcore %u (%s) on %s QP %" PRIu32, lc->lcore_id,
			  sg_role_name(lc->role), sg_dp_verbs_mode_name(vc.mode),
			  sg_dp_verbs_qpn(v->t));
	}
	for (unsigned int j = 0; j < c->n_jobs; j++) {
		uint32_t cb = sg_dp_job_chunk_bytes(c, &c->jobs[j]);

		if (cb + SG_DP_HDR_LEN > msg_max) {
			sg_dp_seterr(err, errlen, "[job %u]: chunks of %u bytes do not fit one %u-byte "
				     "verbs message: set [job %u] chunk_bytes to at most %u, or raise "
				     "[verbs] mtu (and the port's MTU)", c->jobs[j].id, cb, msg_max,
				     c->jobs[j].id, (msg_max - SG_DP_HDR_LEN) & ~7u);
			return -EINVAL;
		}
	}
	for (unsigned int i = 0; p->n_lc > 1 && i < p->n_lc; i++) {
		x->lc[i].hand.items = sg_dp_hand_pool(p, p->lc[i].socket,
						      sizeof(struct vtp_item) + msg_max, err, errlen);
		if (x->lc[i].hand.items == NULL)
			return -ENOMEM;
		x->lc[i].item_cap = msg_max;
		x->lc[i].hand.msg_off = offsetof(struct vtp_item, msg);
	}
	return 0;
}

/* ---- telemetry and SIGHUP --------------------------------------------------- */

static unsigned int verbs_counters(const struct sg_dp_pipeline *p, unsigned int idx,
				   struct sg_dp_counter *out, unsigned int max)
{
	const struct vtp *x = p->xp;
	struct sg_dp_verbs_stats s;
	unsigned int n = 0;

	if (x == NULL || idx >= p->n_lc || x->lc[idx].t == NULL)
		return 0;
	sg_dp_verbs_stats(x->lc[idx].t, &s);
#define C(f, d) sg_dp_counter_put(out, &n, max, #f, s.f, d)
	sg_dp_counter_put(out, &n, max, "qpn", sg_dp_verbs_qpn(x->lc[idx].t), false);
	C(rx_completions, false);
	C(rx_packets, false);
	C(rx_bytes, false);
	C(tx_packets, false);
	C(tx_bytes, false);
	C(peers, false);
	C(recv_posted, false);
	C(send_free, false);
	C(rx_short, true);
	C(rx_bad_slot, true);
	C(rx_bad_grh, true);
	C(rx_wc_error, true);
	C(rx_no_peer, true);
	C(rx_repost_fail, true);
	C(rx_poll_fail, true);
	C(tx_no_buf, true);
	C(tx_no_peer, true);
	C(tx_post_fail, true);
	C(tx_wc_error, true);
	C(rc_closed, false);
	C(rc_qp_error, true);
#undef C
	return n;
}

/*
 * Every [verbs] key sizes or names something made once at start-up (the
 * device context, QPs, CQs, registered buffers, the address-handle cache),
 * or is read by the lcores without a lock (poll_batch): each change needs a
 * restart, and the report names the key with its old and new value.
 */
static int verbs_reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report)
{
	static const struct {
		const char *key;
		size_t off, size;
	} f[] = {
#define F(k) {#k, offsetof(struct sg_dp_verbs_conf, k), sizeof(((struct sg_dp_verbs_conf *)0)->k)}
		F(device), F(port), F(gid_index), F(mode), F(qkey), F(recv_depth), F(send_depth),
		F(max_peers), F(mtu), F(poll_batch), F(rc_slots), F(numa_node),
#undef F
	};
	struct sg_dp_verbs_conf a, b;
	char err[256];
	int restart = 0;

	if (verbs_conf(&p->cfg, &a, err, sizeof(err)) < 0)
		return 0; /* cannot be: it started with it */
	if (verbs_conf(nc, &b, err, sizeof(err)) < 0) {
		if (report)
			fprintf(report, "sigmad: SIGHUP: [verbs] not applied: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < RTE_DIM(f); i++) {
		if (!memcmp((const char *)&a + f[i].off, (const char *)&b + f[i].off, f[i].size))
			continue;
		restart++;
		if (report)
			fprintf(report, "sigmad: SIGHUP: [verbs] %s changed: needs a restart (QPs, "
				"CQs and buffers are made at start-up)\n", f[i].key);
	}
	return restart;
}

/* ---- RC connections -------------------------------------------------------- */

/*
 * A connection request's life: the caller abandons one the lcore did not answer
 * in time, and whoever of the two comes last frees it. An abandoned request the
 * lcore had not taken is skipped; one it was connecting is undone, so no
 * connection that no worker knows of keeps a slot range.
 */
enum rc_req_state { RQ_PENDING, RQ_TAKEN, RQ_DONE, RQ_ABANDONED };

/* A connection request; on the heap, since an lcore that answers late still reads it. */
struct rc_req {
	struct sg_dp_verbs_rc_addr remote, local;
	int state;  /* enum rc_req_state, changed with atomics */
	int rc;     /* the lcore's answer, once RQ_DONE */
	char err[256];
};

/* The lcore's side of a connection request. */
static int rc_req_serve(struct vtp_lcore *v, struct rc_req *r)
{
	int s = RQ_PENDING, rc;

	if (!__atomic_compare_exchange_n(&r->state, &s, RQ_TAKEN, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		free(r); /* abandoned before we got to it: nobody waits for it */
		return -ECANCELED;
	}
	rc = sg_dp_verbs_rc_connect(v->t, &r->remote, &r->local, r->err, sizeof(r->err));
	r->rc = rc;
	s = RQ_TAKEN;
	if (__atomic_compare_exchange_n(&r->state, &s, RQ_DONE, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return rc;
	/* abandoned while we connected: undo it */
	if (rc >= 0)
		sg_dp_verbs_rc_disconnect(v->t, (uint32_t)rc, NULL, 0);
	SG_DP_LOG(WARNING, "verbs: an RC connect request was answered too late; its connection "
		  "was closed again");
	free(r);
	return -ECANCELED;
}

static int verbs_ctl(struct sg_dp_lcore *lc, uint32_t type, uint64_t arg)
{
	struct vtp_lcore *v = lc->xp;

	if (v == NULL)
		return -ENOTSUP;
	if (type == SG_DP_MSG_VERBS_RC_CONNECT)
		return rc_req_serve(v, (struct rc_req *)(uintptr_t)arg);
	if (type == SG_DP_MSG_VERBS_RC_DISCONNECT)
		return arg > UINT32_MAX ? -ENOENT :
					  sg_dp_verbs_rc_disconnect(v->t, (uint32_t)arg, NULL, 0);
	return -ENOTSUP;
}

/* The pipeline runs the verbs transport: else fill @p err. */
static bool is_verbs(const struct sg_dp_pipeline *p, const char *what, char *err, size_t errlen)
{
	if (p != NULL && p->tr == &sg_dp_transport_verbs && p->xp != NULL)
		return true;
	sg_dp_seterr(err, errlen, "%s: the pipeline does not run the verbs transport "
		     "([transport] type = verbs, [verbs] mode = rc)", what);
	return false;
}

int sg_dp_pipeline_verbs_rc_connect(struct sg_dp_pipeline *p,
				    const struct sg_dp_verbs_rc_addr *remote,
				    struct sg_dp_verbs_rc_addr *local, char *err, size_t errlen)
{
	struct rc_req *r;
	int rc;

	if (!is_verbs(p, "RC connect", err, errlen))
		return -ENOTSUP;
	if (remote == NULL || local == NULL) {
		sg_dp_seterr(err, errlen, "RC connect: no address");
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		sg_dp_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->remote = *remote;
	/* RC layouts are one rtc lcore (verbs_check): lcore 0 owns every connection */
	rc = p->running ? sg_dp_lcore_call(p, 0, SG_DP_MSG_VERBS_RC_CONNECT, (uintptr_t)r) :
			  verbs_ctl(&p->lc[0], SG_DP_MSG_VERBS_RC_CONNECT, (uintptr_t)r);
	if (rc == -ETIMEDOUT) {
		int s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);

		/* the lcore may still take it: abandon it, and the lcore frees it */
		while (s != RQ_DONE && !__atomic_compare_exchange_n(&r->state, &s, RQ_ABANDONED,
								    false, __ATOMIC_ACQ_REL,
								    __ATOMIC_ACQUIRE))
			;
		if (s != RQ_DONE) {
			sg_dp_seterr(err, errlen, "RC connect: lcore %u did not answer in time "
				     "(%s); nothing was connected", p->lc[0].lcore_id,
				     strerror(-rc));
			return rc;
		}
		rc = r->rc; /* answered just after the deadline: the answer stands */
	} else if (rc == -ENOBUFS) {
		/* never queued: the lcore never sees it */
		sg_dp_seterr(err, errlen, "RC connect: lcore %u's channel is full (%s)",
			     p->lc[0].lcore_id, strerror(-rc));
		free(r);
		return rc;
	}
	if (rc >= 0)
		*local = r->local;
	else
		sg_dp_seterr(err, errlen, "%s", r->err[0] ? r->err : strerror(-rc));
	free(r);
	return rc;
}

int sg_dp_pipeline_verbs_rc_disconnect(struct sg_dp_pipeline *p, uint32_t peer, char *err,
				       size_t errlen)
{
	int rc;

	if (!is_verbs(p, "RC disconnect", err, errlen))
		return -ENOTSUP;
	rc = p->running ? sg_dp_lcore_call(p, 0, SG_DP_MSG_VERBS_RC_DISCONNECT, peer) :
			  verbs_ctl(&p->lc[0], SG_DP_MSG_VERBS_RC_DISCONNECT, peer);
	if (rc == -ENOENT)
		sg_dp_seterr(err, errlen, "RC disconnect: no open connection with peer id %u "
			     "(the id verbs_rc_connect returned)", peer);
	else if (rc == -ENOTSUP)
		sg_dp_seterr(err, errlen, "RC disconnect: this node runs [verbs] mode = ud: it "
			     "has no connections");
	else if (rc == -ETIMEDOUT)
		sg_dp_seterr(err, errlen, "RC disconnect: lcore %u did not answer in time; it "
			     "closes the connection when it does", p->lc[0].lcore_id);
	else if (rc < 0)
		sg_dp_seterr(err, errlen, "RC disconnect: %s", strerror(-rc));
	return rc;
}

int sg_dp_pipeline_verbs_info(const struct sg_dp_pipeline *p,
			      struct sg_dp_pipeline_verbs_info *out, char *err, size_t errlen)
{
	const struct vtp *x;
	struct sg_dp_verbs_conf vc;
	struct sg_dp_verbs_stats st;
	union ibv_gid gid;

	if (p == NULL || out == NULL || p->tr != &sg_dp_transport_verbs || p->xp == NULL) {
		sg_dp_seterr(err, errlen, "this node runs the DPDK transport ([transport] type = "
			     "dpdk), not verbs");
		return -ENOTSUP;
	}
	if (verbs_conf(&p->cfg, &vc, err, errlen) < 0)
		return -EINVAL; /* cannot be: it started with it */
	x = p->xp;
	memset(out, 0, sizeof(*out));
	out->rc = vc.mode == SG_DP_VERBS_RC;
	out->qkey = vc.qkey;
	out->port = vc.port;
	out->rc_slots = out->rc ? vc.rc_slots : 0;
	out->rc_max_conns = out->rc ? RTE_MIN(vc.recv_depth / vc.rc_slots, vc.max_peers) : 0;
	out->msg_max = sg_dp_verbs_msg_max(x->lc[0].t);
	out->max_payload = sg_dp_verbs_max_payload(x->lc[0].t);
	sg_dp_verbs_local_addr(x->lc[0].t, &gid, &out->lid, &out->gid_index);
	memcpy(out->gid, gid.raw, sizeof(out->gid));
	for (unsigned int i = 0; i < p->n_lc && i < SG_DP_MAX_LAYOUT; i++) {
		out->lcores[i].lcore = p->lc[i].lcore_id;
		out->lcores[i].role = p->lc[i].role;
		out->lcores[i].qpn = sg_dp_verbs_qpn(x->lc[i].t);
		out->n_lcores++;
	}
	if (out->rc) {
		/* the peers gauge: a word the lcore writes, read here without a lock */
		sg_dp_verbs_stats(x->lc[0].t, &st);
		out->rc_conns = (uint32_t)st.peers;
	}
	return 0;
}

static const struct sg_dp_transport sg_dp_transport_verbs = {
	.name = "verbs",
	.check = verbs_check,
	.setup = verbs_setup,
	.teardown = verbs_teardown,
	.rx = vtp_rx,
	.reduce = vtp_reduce,
	.release = sg_dp_hand_release,
	.flush = vtp_flush,
	.tx = {.alloc = vtp_tx_alloc, .send = vtp_tx_send},
	.ctl = verbs_ctl,
	.counters = verbs_counters,
	.reload = verbs_reload,
};
SG_DP_TRANSPORT_REGISTER(SG_DP_TRANSPORT_VERBS, sg_dp_transport_verbs);
