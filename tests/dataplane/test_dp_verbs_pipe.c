/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's pipeline over the verbs transport ([transport] type = verbs),
 * with a fake HCA injected through the config's test hook (verbs_ops). The
 * fake is thread-safe and keeps one receive queue per QP: the pipeline's
 * lcores poll it from their own threads while the main thread plays N UD
 * workers. Workers push with loss in both directions and retransmit; every
 * element of every RESULT is compared with a scalar sum computed here.
 * Layouts: one rtc lcore, two rtc lcores (hand-off between them), two io
 * lcores feeding two reducers (pushes to the io QPs, then to every QP), RC
 * on one rtc lcore (workers connect, then write into their slots), and keys
 * moved between reducers by the control agent while workers push. Also:
 * layouts the transport refuses, with the documented message; no device;
 * SIGHUP's report of [verbs] changes; the [verbs] section of a config file;
 * the transport counters.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <jansson.h>

#include <rte_cycles.h>
#include <rte_eal.h>

#include "sg_ctl_server.h"
#include "sg_dp_agent.h"
#include "sg_dp_testdrv.h"
#include "sg_dp_proto.h"
#include "sg_dp_verbs.h"
#include "dp_pipe_util.h"
#include "sg_test.h"

static char err[512];

/* ---- a thread-safe fake HCA: one device, UD QPs, per-QP receive queues ---- */

#define FQ_WC 8192
#define FQ_RECV 4096
#define FQ_MAX_QP 64
#define FQ_WIRE 8192
#define FQ_MSG 1200

struct fcq {
	struct ibv_cq cq; /* first: the transport sees this */
	pthread_mutex_t mu;
	unsigned int head, tail;
	struct ibv_wc wc[FQ_WC];
};

/* Posted receives, oldest first: a QP's own, or a shared receive queue's. */
struct frq {
	pthread_mutex_t mu;
	unsigned int ph, pt;
	struct {
		uint64_t wr_id;
		uint8_t *addr;
		uint32_t len;
	} posted[FQ_RECV];
};

struct fsrq {
	struct ibv_srq srq;
	struct frq rq;
};

struct fqp {
	struct ibv_qp qp;
	struct fcq *rcq, *scq;
	struct fsrq *srq;  /* RC */
	uint32_t dest_qpn; /* RC: the worker's QP (RTR) */
	uint8_t dest_host; /* RC: last byte of the worker's IPv4-mapped GID */
	struct frq rq;     /* UD */
};

struct fah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

/* A datagram the node sent, on its way to a worker. */
struct wire_msg {
	uint32_t to_qpn, from_qpn;
	uint8_t to_host;
	uint32_t len;
	uint8_t buf[FQ_MSG];
};

static struct {
	int ndev;
	pthread_mutex_t mu; /* qps[], the wire */
	struct fqp *qps[FQ_MAX_QP];
	unsigned int nqp;
	struct wire_msg *wire;
	unsigned int wh, wt;
	atomic_int live;
	atomic_uint bad_wr;    /* sends the fake found malformed */
	atomic_uint foreign_ah; /* an AH used on a QP of another PD */
	struct fcq *fail_cq;    /* its next fail_n polls fail */
	atomic_int fail_n;
	atomic_int stall;       /* the lcore hangs: 1 in ibv_poll_cq, 2 in ibv_modify_qp */
	atomic_int stalled;     /* ... and it is hanging in ibv_poll_cq now */
	struct ibv_device dev;
	struct ibv_device *list[2];
} fq;

static void *fq_obj(size_t n)
{
	void *p = calloc(1, n);

	if (p != NULL)
		atomic_fetch_add(&fq.live, 1);
	return p;
}

static int fq_free(void *p)
{
	atomic_fetch_sub(&fq.live, 1);
	free(p);
	return 0;
}

static struct ibv_device **fq_get_device_list(int *num)
{
	*num = fq.ndev;
	fq.list[0] = fq.ndev ? &fq.dev : NULL;
	fq.list[1] = NULL;
	atomic_fetch_add(&fq.live, 1);
	return fq.list;
}

static void fq_free_device_list(struct ibv_device **l)
{
	(void)l;
	atomic_fetch_sub(&fq.live, 1);
}

static struct ibv_context *fq_open_device(struct ibv_device *d)
{
	struct ibv_context *c = fq_obj(sizeof(*c));

	c->device = d;
	return c;
}

static int fq_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a)
{
	(void)c;
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	a->active_mtu = IBV_MTU_1024;
	a->max_mtu = IBV_MTU_4096;
	a->gid_tbl_len = 2;
	return 0;
}

/* index 1: RoCE v2, IPv4-mapped 10.0.0.1 */
static int fq_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t idx,
			   struct ibv_gid_entry *e, uint32_t flags)
{
	(void)c, (void)port, (void)flags;
	if (idx > 1)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	e->gid_index = idx;
	e->gid_type = idx ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	if (idx == 0) {
		e->gid.raw[0] = 0xfe;
		e->gid.raw[1] = 0x80;
		e->gid.raw[15] = 1;
	} else {
		e->gid.raw[10] = e->gid.raw[11] = 0xff;
		e->gid.raw[12] = 10;
		e->gid.raw[15] = 1;
	}
	return 0;
}

static struct ibv_pd *fq_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = fq_obj(sizeof(*pd));

	pd->context = c;
	return pd;
}

static struct ibv_mr *fq_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = fq_obj(sizeof(*mr));

	(void)access;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = 0x55;
	return mr;
}

static struct ibv_cq *fq_create_cq(struct ibv_context *c, int cqe, void *ctx,
				   struct ibv_comp_channel *ch, int vec)
{
	struct fcq *q = fq_obj(sizeof(*q));

	(void)ctx, (void)ch, (void)vec;
	q->cq.context = c;
	q->cq.cqe = cqe;
	pthread_mutex_init(&q->mu, NULL);
	return &q->cq;
}

static int fq_destroy_cq(struct ibv_cq *cq)
{
	pthread_mutex_destroy(&((struct fcq *)cq)->mu);
	return fq_free(cq);
}

static void fq_push_wc(struct fcq *q, const struct ibv_wc *wc)
{
	pthread_mutex_lock(&q->mu);
	if (q->tail - q->head < FQ_WC)
		q->wc[q->tail++ % FQ_WC] = *wc;
	pthread_mutex_unlock(&q->mu);
}

static struct ibv_qp *fq_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct fqp *q;

	if (a->qp_type != IBV_QPT_UD && (a->qp_type != IBV_QPT_RC || a->srq == NULL)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	q = fq_obj(sizeof(*q));
	q->srq = (struct fsrq *)a->srq;
	q->qp.pd = pd;
	q->qp.qp_type = a->qp_type;
	q->rcq = (struct fcq *)a->recv_cq;
	q->scq = (struct fcq *)a->send_cq;
	pthread_mutex_init(&q->rq.mu, NULL);
	pthread_mutex_lock(&fq.mu);
	q->qp.qp_num = 0x200 + fq.nqp;
	if (fq.nqp < FQ_MAX_QP)
		fq.qps[fq.nqp++] = q;
	pthread_mutex_unlock(&fq.mu);
	return &q->qp;
}

static int fq_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fqp *q = (struct fqp *)qp;

	while (atomic_load(&fq.stall) == 2)
		rte_delay_us_sleep(1000); /* an lcore stuck in the middle of a connect */
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qpn = a->dest_qp_num;
	if (mask & IBV_QP_AV)
		q->dest_host = a->ah_attr.grh.dgid.raw[15];
	return 0;
}

static int fq_destroy_qp(struct ibv_qp *qp)
{
	struct fqp *q = (struct fqp *)qp;

	pthread_mutex_lock(&fq.mu);
	for (unsigned int i = 0; i < fq.nqp; i++)
		if (fq.qps[i] == q)
			fq.qps[i] = NULL;
	pthread_mutex_unlock(&fq.mu);
	pthread_mutex_destroy(&q->rq.mu);
	return fq_free(qp);
}

static struct ibv_ah *fq_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	struct fah *h = fq_obj(sizeof(*h));

	h->ah.pd = pd;
	h->attr = *a;
	return &h->ah;
}

/* Post @p wr on @p q; each must have @p nsge SGEs (UD 1, SRQ for WRITE-with-immediate 0). */
static int frq_post(struct frq *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad, int nsge)
{
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	for (; wr != NULL; wr = wr->next) {
		if (wr->num_sge != nsge || q->pt - q->ph >= FQ_RECV) {
			*bad = wr;
			rc = EINVAL;
			break;
		}
		q->posted[q->pt % FQ_RECV].wr_id = wr->wr_id;
		q->posted[q->pt % FQ_RECV].addr =
			nsge ? (uint8_t *)(uintptr_t)wr->sg_list[0].addr : NULL;
		q->posted[q->pt % FQ_RECV].len = nsge ? wr->sg_list[0].length : 0;
		q->pt++;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

/* Consume the oldest receive of @p q if it holds @p need bytes; its buffer in @p addr.
 * Call with q->mu held. @return 0, or -1 (none: the HCA would drop). */
static int frq_take(struct frq *q, uint32_t need, uint64_t *wr_id, uint8_t **addr)
{
	if (q->ph == q->pt || q->posted[q->ph % FQ_RECV].len < need)
		return -1;
	*wr_id = q->posted[q->ph % FQ_RECV].wr_id;
	*addr = q->posted[q->ph % FQ_RECV].addr;
	q->ph++;
	return 0;
}

static int fq_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return frq_post(&((struct fqp *)qp)->rq, wr, bad, 1);
}

static void wire_put(uint32_t to_qpn, uint32_t from_qpn, uint8_t to_host, const void *buf,
		     uint32_t len)
{
	pthread_mutex_lock(&fq.mu);
	if (fq.wt - fq.wh < FQ_WIRE) { /* else lost, as on a congested wire */
		struct wire_msg *m = &fq.wire[fq.wt++ % FQ_WIRE];

		m->to_qpn = to_qpn;
		m->from_qpn = from_qpn;
		m->to_host = to_host;
		m->len = len;
		memcpy(m->buf, buf, len);
	}
	pthread_mutex_unlock(&fq.mu);
}

/* UD sends go on the wire to the worker the AH and remote QPN name; RC writes to the
 * worker the connection leads to. */
static int fq_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *q = (struct fqp *)qp;

	(void)bad;
	for (; wr != NULL; wr = wr->next) {
		struct ibv_wc wc = {.wr_id = wr->wr_id, .status = IBV_WC_SUCCESS,
				    .opcode = IBV_WC_SEND, .qp_num = qp->qp_num};
		struct fah *h = (struct fah *)wr->wr.ud.ah;
		uint32_t len = wr->num_sge == 1 ? wr->sg_list[0].length : 0;

		if (qp->qp_type == IBV_QPT_RC) {
			/* WRITE-with-immediate into the worker's ring, then its completion */
			if (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM || wr->num_sge != 1 ||
			    len > FQ_MSG || !(wr->send_flags & IBV_SEND_SIGNALED) ||
			    wr->wr.rdma.rkey != 0x99) {
				atomic_fetch_add(&fq.bad_wr, 1);
			} else {
				memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr,
				       (void *)(uintptr_t)wr->sg_list[0].addr, len);
				wire_put(q->dest_qpn, qp->qp_num, q->dest_host,
					 (void *)(uintptr_t)wr->wr.rdma.remote_addr, len);
			}
		} else if (wr->opcode != IBV_WR_SEND || wr->num_sge != 1 || len > FQ_MSG ||
			   h == NULL || !(wr->send_flags & IBV_SEND_SIGNALED)) {
			atomic_fetch_add(&fq.bad_wr, 1);
		} else if (h->ah.pd != qp->pd) {
			atomic_fetch_add(&fq.foreign_ah, 1); /* an AH is only valid on its PD */
		} else {
			wire_put(wr->wr.ud.remote_qpn, qp->qp_num, h->attr.grh.dgid.raw[15],
				 (void *)(uintptr_t)wr->sg_list[0].addr, len);
		}
		fq_push_wc(q->scq, &wc);
	}
	return 0;
}

static int fq_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fcq *q = (struct fcq *)cq;
	int k = 0;

	while (atomic_load(&fq.stall) == 1) {
		atomic_store(&fq.stalled, 1);
		rte_delay_us_sleep(1000); /* an lcore too busy to answer its channel */
	}
	atomic_store(&fq.stalled, 0);
	if (q == __atomic_load_n(&fq.fail_cq, __ATOMIC_ACQUIRE) && atomic_load(&fq.fail_n) > 0) {
		atomic_fetch_sub(&fq.fail_n, 1);
		return -1;
	}
	pthread_mutex_lock(&q->mu);
	while (k < n && q->head != q->tail)
		wc[k++] = q->wc[q->head++ % FQ_WC];
	pthread_mutex_unlock(&q->mu);
	return k;
}

static struct ibv_srq *fq_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	struct fsrq *q = fq_obj(sizeof(*q));

	(void)a;
	q->srq.pd = pd;
	pthread_mutex_init(&q->rq.mu, NULL);
	return &q->srq;
}

static int fq_destroy_srq(struct ibv_srq *srq)
{
	pthread_mutex_destroy(&((struct fsrq *)srq)->rq.mu);
	return fq_free(srq);
}

/* WRITE-with-immediate receives carry no buffer. */
static int fq_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return frq_post(&((struct fsrq *)srq)->rq, wr, bad, 0);
}

static int fq_memlock_probe(uint64_t *limit, uint64_t *locked, bool *cap)
{
	*limit = UINT64_MAX;
	*locked = 0;
	*cap = false;
	return 0;
}

static const struct sg_dp_verbs_ops fq_ops = {
	.get_device_list = fq_get_device_list,
	.free_device_list = fq_free_device_list,
	.open_device = fq_open_device,
	.close_device = (int (*)(struct ibv_context *))fq_free,
	.query_port = fq_query_port,
	.query_gid_ex = fq_query_gid_ex,
	.alloc_pd = fq_alloc_pd,
	.dealloc_pd = (int (*)(struct ibv_pd *))fq_free,
	.reg_mr = fq_reg_mr,
	.dereg_mr = (int (*)(struct ibv_mr *))fq_free,
	.create_cq = fq_create_cq,
	.destroy_cq = fq_destroy_cq,
	.create_qp = fq_create_qp,
	.modify_qp = fq_modify_qp,
	.destroy_qp = fq_destroy_qp,
	.create_ah = fq_create_ah,
	.destroy_ah = (int (*)(struct ibv_ah *))fq_free,
	.post_recv = fq_post_recv,
	.post_send = fq_post_send,
	.poll_cq = fq_poll_cq,
	.create_srq = fq_create_srq,
	.destroy_srq = fq_destroy_srq,
	.post_srq_recv = fq_post_srq_recv,
	.memlock_probe = fq_memlock_probe,
};

static void fq_reset(void)
{
	SG_CHECK_EQ(atomic_load(&fq.live), 0);
	fq.ndev = 1;
	snprintf(fq.dev.name, sizeof(fq.dev.name), "fakeq0");
	fq.nqp = 0;
	fq.wh = fq.wt = 0;
	atomic_store(&fq.bad_wr, 0);
	atomic_store(&fq.foreign_ah, 0);
}

/* The live QP numbered @p qpn, or NULL. */
static struct fqp *fq_find(uint32_t qpn)
{
	struct fqp *q = NULL;

	pthread_mutex_lock(&fq.mu);
	for (unsigned int i = 0; i < fq.nqp; i++)
		if (fq.qps[i] != NULL && fq.qps[i]->qp.qp_num == qpn)
			q = fq.qps[i];
	pthread_mutex_unlock(&fq.mu);
	return q;
}

/* A worker's datagram to node QP @p qpn, as the HCA delivers it (RoCE v2, IPv4). */
static int fq_deliver(uint32_t qpn, uint8_t host, uint32_t src_qpn, const void *msg,
		      uint32_t len)
{
	struct fqp *q = fq_find(qpn);
	struct ibv_wc wc = {.status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV,
			    .byte_len = SG_DP_VERBS_GRH_LEN + len, .src_qp = src_qpn,
			    .wc_flags = IBV_WC_GRH, .qp_num = qpn};
	uint8_t *b;
	int rc;

	if (q == NULL)
		return -1;
	pthread_mutex_lock(&q->rq.mu);
	rc = frq_take(&q->rq, SG_DP_VERBS_GRH_LEN + len, &wc.wr_id, &b);
	if (rc == 0) {
		memset(b, 0, SG_DP_VERBS_GRH_LEN);
		b[20] = 0x45;
		b[29] = 17;
		b[32] = 10, b[33] = 0, b[34] = 1, b[35] = host;
		b[36] = 10, b[37] = 0, b[38] = 0, b[39] = 1;
		memcpy(b + SG_DP_VERBS_GRH_LEN, msg, len);
	}
	pthread_mutex_unlock(&q->rq.mu);
	if (rc == 0)
		fq_push_wc(q->rcq, &wc);
	return rc;
}

/* Completion @p wc of a WRITE-with-immediate at node QP @p qpn: it consumes one of the
 * shared receive queue's receives, as the HCA does. @return 0 or -1. */
static int fq_rc_complete(uint32_t qpn, struct ibv_wc *wc)
{
	struct fqp *q = fq_find(qpn);
	uint8_t *unused;
	int rc;

	if (q == NULL || q->srq == NULL)
		return -1;
	pthread_mutex_lock(&q->srq->rq.mu);
	rc = frq_take(&q->srq->rq, 0, &wc->wr_id, &unused);
	pthread_mutex_unlock(&q->srq->rq.mu);
	if (rc == 0)
		fq_push_wc(q->rcq, wc);
	return rc;
}

/* A worker's RDMA WRITE-with-immediate of @p len bytes into slot @p slot, already
 * copied there: its completion on node QP @p qpn's receive CQ. @return 0 or -1. */
static int fq_rc_write(uint32_t qpn, uint32_t slot, uint32_t len)
{
	struct ibv_wc wc = {.status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			    .byte_len = len, .imm_data = htonl(slot), .wc_flags = IBV_WC_WITH_IMM,
			    .qp_num = qpn};

	return fq_rc_complete(qpn, &wc);
}

/* A WRITE-with-immediate that failed at node QP @p qpn (the QP goes to error). */
static int fq_rc_error(uint32_t qpn)
{
	struct ibv_wc wc = {.status = IBV_WC_REM_ACCESS_ERR, .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			    .qp_num = qpn};

	return fq_rc_complete(qpn, &wc);
}

/* Take the oldest datagram on its way to a worker. @return 0, or -1 if none. */
static int fq_take(struct wire_msg *out)
{
	int rc = -1;

	pthread_mutex_lock(&fq.mu);
	if (fq.wh != fq.wt) {
		*out = fq.wire[fq.wh++ % FQ_WIRE];
		rc = 0;
	}
	pthread_mutex_unlock(&fq.mu);
	return rc;
}

/* Wait (up to 2 s) until every receive completion has been polled. */
static void fq_wait_rx_idle(void)
{
	uint64_t end = rte_rdtsc() + 2 * rte_get_tsc_hz();
	bool busy = true;

	while (busy && rte_rdtsc() < end) {
		busy = false;
		pthread_mutex_lock(&fq.mu);
		for (unsigned int i = 0; i < fq.nqp; i++) {
			struct fcq *q = fq.qps[i] ? fq.qps[i]->rcq : NULL;

			if (q != NULL && __atomic_load_n(&q->head, __ATOMIC_ACQUIRE) !=
					     __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE))
				busy = true;
		}
		pthread_mutex_unlock(&fq.mu);
		if (busy)
			rte_delay_us_sleep(1000);
	}
}

/* ---- N UD workers on the main thread ---------------------------------------- */

#define NW 4
#define KEYS 6
#define ELEMS 600          /* per key: chunks of 244, 244, 112 elements */
#define CHUNK 976
#define NCH 3
#define JOB 9
#define TOKEN 0xabcdull
#define W_HOST(w) ((uint8_t)(20 + (w)))
#define W_QPN(w) (0x100u + (w))

static uint64_t rng = 88172645463325252ull;

static unsigned int rnd(unsigned int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng % n);
}

/* Small integers: every fp32 sum is exact, so the comparison is exact too. */
static float val(unsigned int w, unsigned int key, unsigned int round, unsigned int e)
{
	return (float)((int)((w + 1) * (e + 3 * key + 7 * round) % 61) - 30);
}

static uint32_t push_msg(uint8_t *pkt, unsigned int w, unsigned int key, unsigned int chunk,
			 unsigned int round, bool retrans)
{
	uint32_t first = chunk * (CHUNK / 4), n = RTE_MIN((uint32_t)CHUNK / 4, ELEMS - first);
	float f[CHUNK / 4];
	struct sg_dp_msg m = {
		.type = SG_DP_T_PUSH, .flags = retrans ? SG_DP_F_RETRANS : 0,
		.dtype = SG_DTYPE_FP32, .job = JOB, .token = TOKEN, .rank = (uint16_t)w,
		.key = key, .chunk = chunk, .nchunks = NCH, .round = round, .nelem = n,
		.offset = chunk * CHUNK,
	};

	for (uint32_t i = 0; i < n; i++)
		f[i] = val(w, key, round, first + i);
	return (uint32_t)sg_dp_build(pkt, SG_DP_HDR_LEN + CHUNK, &m, f, n * 4);
}

struct run {
	unsigned int rounds;
	unsigned int loss_pct;   /* each direction */
	uint32_t rx_qpn[8];      /* node QPs that receive (io/rtc lcores) */
	unsigned int n_rx;
	/* RC: each worker's connection (the node's side) and writes so far */
	bool rc;
	struct sg_dp_verbs_rc_addr conn[NW];
	uint32_t writes[NW];
	/* called after each round (the control agent's moves) */
	void (*between)(struct run *r, unsigned int round);
	struct sg_ctl_client *ctl;
	/* results */
	uint64_t ok, bad, stale, lost_out, lost_in, retrans, sent, waits;
};

/* Check one RESULT against the scalar sum; @return true if it is right. */
static bool check_result(const struct sg_dp_msg *m, unsigned int round,
			 const struct wire_msg *x)
{
	uint32_t first = m->chunk * (CHUNK / 4);

	if (m->job != JOB || m->key >= KEYS || m->chunk >= NCH || m->rank >= NW ||
	    x->to_qpn != W_QPN(m->rank) || x->to_host != W_HOST(m->rank) ||
	    m->nelem != RTE_MIN((uint32_t)CHUNK / 4, ELEMS - first) || m->round != round)
		return false;
	for (uint32_t e = 0; e < m->nelem; e++) {
		float want = 0, got;

		for (unsigned int w = 0; w < NW; w++)
			want += val(w, m->key, round, first + e);
		memcpy(&got, (const uint8_t *)m->payload + 4 * e, 4);
		if (got != want)
			return false;
	}
	return true;
}

/* RC: worker @p w writes its push into its next slot of the node's ring. */
static void rc_push(struct run *r, unsigned int w, const uint8_t *pkt, uint32_t len)
{
	const struct sg_dp_verbs_rc_addr *n = &r->conn[w];
	uint32_t slot = r->writes[w]++ % n->slots;

	memcpy((void *)(uintptr_t)(n->addr + (uint64_t)slot * n->stride), pkt, len);
	SG_CHECK_EQ(fq_rc_write(n->qpn, slot, len), 0);
}

/*
 * Every round: each worker pushes every chunk of every key to one of the
 * node's receiving QPs (spread by worker and key, so that pushes reach a QP
 * whose lcore does not own the key), then re-pushes what it has no RESULT
 * for every few milliseconds. A round ends when every worker has every
 * chunk's RESULT.
 */
static int drive(struct run *r)
{
	uint8_t pkt[SG_DP_HDR_LEN + CHUNK];
	uint64_t hz = rte_get_tsc_hz();

	for (unsigned int round = 1; round <= r->rounds; round++) {
		bool got[NW][KEYS][NCH] = {{{false}}};
		unsigned int need = NW * KEYS * NCH;
		uint64_t deadline = rte_rdtsc() + 20 * hz, resend = 0;

		while (need > 0) {
			struct wire_msg x;
			struct sg_dp_msg m;
			uint64_t now = rte_rdtsc();

			if (now >= resend) {
				for (unsigned int w = 0; w < NW; w++)
					for (unsigned int k = 0; k < KEYS; k++)
						for (unsigned int c = 0; c < NCH; c++) {
							uint32_t len, qpn;

							if (got[w][k][c])
								continue;
							r->sent++;
							r->retrans += resend != 0;
							if (rnd(100) < r->loss_pct) {
								r->lost_out++;
								continue;
							}
							len = push_msg(pkt, w, k, c, round, resend != 0);
							if (r->rc) {
								rc_push(r, w, pkt, len);
								continue;
							}
							qpn = r->rx_qpn[(w + k) % r->n_rx];
							fq_deliver(qpn, W_HOST(w), W_QPN(w), pkt, len);
						}
				/* RC is reliable: a resend would only reuse slots early */
				resend = now + (r->rc ? 5 * hz : hz / 200);
			}
			while (fq_take(&x) == 0) {
				if (sg_dp_parse(x.buf, x.len, &m, NULL) == 0 &&
				    m.type == SG_DP_T_ERROR && m.code == SG_DP_C_WAITING &&
				    m.payload_len == 8) {
					uint64_t miss;

					/* a resend of a push the node holds: others are missing */
					memcpy(&miss, m.payload, 8);
					miss = be64toh(miss);
					r->bad += miss == 0 || (miss & (1ull << m.rank));
					r->waits++;
					continue;
				}
				if (sg_dp_parse(x.buf, x.len, &m, NULL) != 0 ||
				    m.type != SG_DP_T_RESULT) {
					r->bad++;
					continue;
				}
				if (rnd(100) < r->loss_pct) {
					r->lost_in++;
					continue;
				}
				if (m.round != round) {
					r->stale += m.round < round; /* a kept result resent late */
					r->bad += m.round > round;
					continue;
				}
				if (!check_result(&m, round, &x)) {
					r->bad++;
					continue;
				}
				if (!got[m.rank][m.key][m.chunk]) {
					got[m.rank][m.key][m.chunk] = true;
					need--;
					r->ok++;
				}
			}
			if (rte_rdtsc() > deadline)
				return -1;
			rte_delay_us_sleep(50);
		}
		if (r->between != NULL)
			r->between(r, round);
	}
	return 0;
}

/* ---- the control agent: keymap moves over verbs hand-off items ----------------- */

static char ctl_path[96];

/* The answer of @p method, parsed; NULL (and a failed check) if the call failed. */
static json_t *rpc(struct sg_ctl_client *c, const char *method, const char *params)
{
	char *res = NULL, *emsg = NULL;
	json_t *j = NULL;
	int rc = sg_ctl_client_call(c, method, params, &res, &emsg);

	SG_CHECK(rc == 0, "%s: %d %s", method, rc, emsg ? emsg : "");
	if (rc == 0)
		j = json_loads(res, JSON_DECODE_ANY, NULL);
	free(res);
	free(emsg);
	return j;
}

static void keymap_of(uint16_t *km, int kind)
{
	for (int b = 0; b < SG_BUCKETS; b++)
		km[b] = (uint16_t)(kind < 0 ? b % 2 : kind);
}

static void layout_set(struct sg_ctl_client *c, const uint16_t *km)
{
	char buf[512];
	int len = snprintf(buf, sizeof(buf), "{\"keymap\":[");

	for (int b = 0; b < SG_BUCKETS; b++)
		len += snprintf(buf + len, sizeof(buf) - (size_t)len, "%s%u", b ? "," : "", km[b]);
	snprintf(buf + len, sizeof(buf) - (size_t)len, "]}");
	json_decref(rpc(c, "layout_set", buf));
}

/* Wait until layout_get shows @p km (the move committed). */
static bool keymap_is(struct sg_ctl_client *c, const uint16_t *km, double secs)
{
	uint64_t end = rte_rdtsc() + (uint64_t)(secs * (double)rte_get_tsc_hz());

	do {
		json_t *j = rpc(c, "layout_get", NULL), *arr = j ? json_object_get(j, "keymap") : NULL;
		bool same = arr != NULL && json_array_size(arr) == SG_BUCKETS;

		for (size_t b = 0; same && b < SG_BUCKETS; b++)
			same = json_integer_value(json_array_get(arr, b)) == km[b];
		json_decref(j);
		if (same)
			return true;
		rte_delay_us_sleep(5000);
	} while (rte_rdtsc() < end);
	return false;
}

/* Round 4: every bucket to reducer 1; round 8: once that committed, back to the default. */
static void mover(struct run *r, unsigned int round)
{
	uint16_t km[SG_BUCKETS];

	if (round == 4) {
		keymap_of(km, 1);
		layout_set(r->ctl, km);
	} else if (round == 8) {
		keymap_of(km, 1);
		SG_CHECK(keymap_is(r->ctl, km, 5), "move to reducer 1 did not commit");
		keymap_of(km, -1);
		layout_set(r->ctl, km);
	}
}

/* ---- the pipeline ------------------------------------------------------------ */

static void base_config(struct sg_dp_config *c)
{
	sg_dp_config_defaults(c);
	c->transport = SG_DP_TRANSPORT_VERBS;
	c->verbs_ops = &fq_ops;
	c->n_verbs_kv = 0;
	c->pool_bufs = 256;
	c->ring_size = 1024;
	c->timeout_ms = 5000;
	c->idle = SG_IDLE_SLEEP; /* the machine has 2 cores for everything */
	c->idle_sleep_us = 200;
	c->n_jobs = 1;
	c->jobs[0] = (struct sg_dp_job_cfg){.id = JOB, .workers = NW, .token = TOKEN,
					    .dtype = SG_DTYPE_FP32, .keys = KEYS,
					    .partition_bytes = ELEMS * 4, .chunk_bytes = CHUNK};
}

static void set_kv(struct sg_dp_config *c, const char *k, const char *v)
{
	unsigned int i = c->n_verbs_kv++;

	snprintf(c->verbs_kv[i].key, sizeof(c->verbs_kv[i].key), "%s", k);
	snprintf(c->verbs_kv[i].value, sizeof(c->verbs_kv[i].value), "%s", v);
}

/* Counter @p name of lcore @p i's transport; UINT64_MAX if absent. */
static uint64_t counter(const struct sg_dp_pipeline *p, unsigned int i, const char *name)
{
	const char *names[32];
	uint64_t v[32];
	unsigned int n = sg_dp_pipeline_transport_counters(p, i, names, v, 32);

	for (unsigned int k = 0; k < n; k++)
		if (!strcmp(names[k], name))
			return v[k];
	return UINT64_MAX;
}

/* Workers push to every lcore's QP, reducers' included (else only io/rtc ones). */
static bool push_to_all;

/* Worker @p w's ring for the node's replies (RC). */
static uint8_t worker_ring[NW][64][1024];

/* Connect worker @p w to @p p (RC). @return the peer id or -errno. */
/* Worker @p w's side of an RC connection: its QP, ring and GID ::ffff:10.0.1.(20+w). */
static struct sg_dp_verbs_rc_addr worker_addr(unsigned int w, uint32_t stride)
{
	struct sg_dp_verbs_rc_addr ra = {.qpn = W_QPN(w), .psn = 1000 + w,
					 .addr = (uintptr_t)worker_ring[w], .rkey = 0x99,
					 .slots = 64, .stride = stride};

	ra.gid[10] = ra.gid[11] = 0xff;
	ra.gid[12] = 10;
	ra.gid[14] = 1;
	ra.gid[15] = W_HOST(w);
	return ra;
}

static int rc_connect(struct sg_dp_pipeline *p, unsigned int w, uint32_t stride,
		      struct sg_dp_verbs_rc_addr *local)
{
	struct sg_dp_verbs_rc_addr ra = worker_addr(w, stride);

	return sg_dp_pipeline_verbs_rc_connect(p, &ra, local, err, sizeof(err));
}

/* A call that must fail with @p needle in its message. */
static void rpc_refused(struct sg_ctl_client *c, const char *method, const char *params,
			const char *needle)
{
	char *res = NULL, *emsg = NULL;
	int rc = sg_ctl_client_call(c, method, params, &res, &emsg);

	SG_CHECK(rc == -EREMOTEIO && emsg && strstr(emsg, needle), "%s %s: %d %s (want '%s')",
		 method, params ? params : "", rc, emsg ? emsg : res, needle);
	free(res);
	free(emsg);
}

/* The worker's side as verbs_rc_connect params, written as a worker would. */
static void rc_params(char *buf, size_t len, unsigned int w, uint32_t stride)
{
	struct sg_dp_verbs_rc_addr ra = worker_addr(w, stride);
	char gid[40];

	sg_ctl_gid_format(ra.gid, gid);
	snprintf(buf, len, "{\"qpn\":%u,\"psn\":%u,\"gid\":\"%s\",\"addr\":\"0x%" PRIx64 "\","
		 "\"rkey\":%u,\"slots\":%u,\"stride\":%u}", ra.qpn, ra.psn, gid, ra.addr, ra.rkey,
		 ra.slots, ra.stride);
}

/* Connect worker @p w through the agent's verbs_rc_connect. @return the peer id or -1. */
static int rpc_rc_connect(struct sg_ctl_client *c, unsigned int w, uint32_t stride,
			  struct sg_dp_verbs_rc_addr *local)
{
	char params[512];
	json_t *j, *n;
	int peer = -1;

	rc_params(params, sizeof(params), w, stride);
	j = rpc(c, "verbs_rc_connect", params);
	n = j ? json_object_get(j, "node") : NULL;
	if (n != NULL) {
		const char *addr = json_string_value(json_object_get(n, "addr"));

		*local = (struct sg_dp_verbs_rc_addr){
			.qpn = (uint32_t)json_integer_value(json_object_get(n, "qpn")),
			.psn = (uint32_t)json_integer_value(json_object_get(n, "psn")),
			.lid = (uint16_t)json_integer_value(json_object_get(n, "lid")),
			.addr = addr ? strtoull(addr, NULL, 16) : 0,
			.rkey = (uint32_t)json_integer_value(json_object_get(n, "rkey")),
			.slots = (uint32_t)json_integer_value(json_object_get(n, "slots")),
			.stride = (uint32_t)json_integer_value(json_object_get(n, "stride"))};
		SG_CHECK_EQ(sg_ctl_gid_parse(json_string_value(json_object_get(n, "gid")),
					     local->gid), 0);
		peer = (int)json_integer_value(json_object_get(j, "peer"));
	}
	json_decref(j);
	return peer;
}

/* verbs_info against the pipeline's own counters and the fake port; @p rc_conns for RC. */
static void check_verbs_info(struct sg_ctl_client *c, struct sg_dp_pipeline *p, bool rc,
			     unsigned int rc_conns)
{
	json_t *j = rpc(c, "verbs_info", NULL), *l, *rcj;
	size_t i;

	if (j == NULL)
		return;
	SG_CHECK(!strcmp(json_string_value(json_object_get(j, "mode")), rc ? "rc" : "ud") &&
		 json_integer_value(json_object_get(j, "qkey")) == SG_DP_VERBS_QKEY_DEFAULT &&
		 json_integer_value(json_object_get(j, "max_payload")) == CHUNK &&
		 json_integer_value(json_object_get(j, "msg_max")) == 1024 &&
		 json_integer_value(json_object_get(j, "port")) == 1 &&
		 !strcmp(json_string_value(json_object_get(j, "gid")),
			 "0000:0000:0000:0000:0000:ffff:0a00:0001"),
		 "verbs_info header: %s", json_dumps(j, JSON_COMPACT));
	SG_CHECK_EQ(json_array_size(json_object_get(j, "lcores")), sg_dp_pipeline_n_lcores(p));
	json_array_foreach(json_object_get(j, "lcores"), i, l) {
		struct sg_dp_lcore_stats st;

		sg_dp_pipeline_lcore_stats(p, (unsigned int)i, &st);
		SG_CHECK(json_integer_value(json_object_get(l, "qpn")) ==
				 (json_int_t)counter(p, (unsigned int)i, "qpn") &&
			 (rc ? counter(p, (unsigned int)i, "qpn") == 0
			     : counter(p, (unsigned int)i, "qpn") >= 0x200) &&
			 json_integer_value(json_object_get(l, "lcore")) == st.lcore &&
			 !strcmp(json_string_value(json_object_get(l, "role")), "rtc"),
			 "verbs_info lcore %zu", i);
	}
	rcj = json_object_get(j, "rc");
	SG_CHECK(rc ? rcj != NULL && json_integer_value(json_object_get(rcj, "connected")) ==
				      rc_conns &&
			      json_integer_value(json_object_get(rcj, "max_connections")) == 4 &&
			      json_integer_value(json_object_get(rcj, "slots")) == 64
		    : rcj == NULL, "verbs_info rc member");
	json_decref(j);
}

/* RC over the agent: every refusal, every piece of garbage, then nothing more connected. */
static void rc_rpc_refusals(struct sg_ctl_client *c)
{
	static const struct {
		const char *params, *needle;
	} bad[] = {
		{NULL, "want {qpn"},
		{"[1,2]", "want {qpn"},
		{"{\"qpn\":1}", "psn must be"},
		{"{\"qpn\":0,\"psn\":1,\"gid\":\"00000000000000000000000000000000\",\"addr\":1,"
		 "\"rkey\":1,\"slots\":1,\"stride\":1024}", "qpn must be an integer in [1, 16777215]"},
		{"{\"qpn\":16777216,\"psn\":1}", "qpn must be"},
		{"{\"qpn\":\"5\",\"psn\":1}", "qpn must be"},
		{"{\"qpn\":5,\"psn\":-1}", "psn must be"},
		{"{\"qpn\":5,\"psn\":1,\"lid\":65536,\"rkey\":1,\"slots\":1,\"stride\":64}",
		 "lid must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":4294967296,\"slots\":1,\"stride\":64}",
		 "rkey must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":0,\"stride\":64}", "slots must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":65537,\"stride\":64}", "slots must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":63}", "stride must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1.5}", "stride must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024}", "gid must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,\"gid\":\"xyz\"}",
		 "gid must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"0000:0000:0000:0000:0000:ffff:0a00:00g1\"}", "gid must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"0000-0000:0000:0000:0000:ffff:0a00:0001\"}", "gid must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"00000000000000000000ffff0a000001\"}", "addr must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"00000000000000000000ffff0a000001\",\"addr\":0}", "addr must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"00000000000000000000ffff0a000001\",\"addr\":\"0x12345678901234567\"}",
		 "addr must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"00000000000000000000ffff0a000001\",\"addr\":\"0xfoo\"}", "addr must be"},
		{"{\"qpn\":5,\"psn\":1,\"rkey\":1,\"slots\":4,\"stride\":1024,"
		 "\"gid\":\"00000000000000000000ffff0a000001\",\"addr\":4096,\"mtu\":9000}",
		 "unknown member 'mtu'"},
	};
	char params[512];

	for (size_t i = 0; i < RTE_DIM(bad); i++)
		rpc_refused(c, "verbs_rc_connect", bad[i].params, bad[i].needle);
	rc_params(params, sizeof(params), 0, 1024);
	rpc_refused(c, "verbs_rc_connect", params, "raise [verbs] recv_depth");
	rc_params(params, sizeof(params), 0, 512);
	rpc_refused(c, "verbs_rc_connect", params, "cannot hold");
	rpc_refused(c, "verbs_info", "{\"lcore\":1}", "takes none");
}

/*
 * RC with a full node (4 connections of 64 slots): worker 3 disconnects, two
 * connects that the lcore answers too late (stalled before it takes the
 * request, then in the middle of it) leave nothing connected, and worker 3
 * connects again into its old slots. Then worker 2's QP goes to error: the
 * node closes it by itself, and worker 2 connects again. Garbage peer ids are
 * refused. The rounds that follow go through the new connections.
 */
static void rc_lifecycle(struct sg_dp_pipeline *p, struct sg_ctl_client *c,
			 struct sg_dp_verbs_rc_addr *conn)
{
	static const struct {
		const char *params, *needle;
	} bad[] = {
		{NULL, "want {peer}"},
		{"[3]", "want {peer}"},
		{"{}", "want {peer}"},
		{"{\"peer\":3,\"qpn\":1}", "want {peer}"},
		{"{\"qpn\":3}", "peer must be"},
		{"{\"peer\":\"3\"}", "peer must be"},
		{"{\"peer\":-1}", "peer must be"},
		{"{\"peer\":4294967296}", "peer must be"},
		{"{\"peer\":1.5}", "peer must be"},
		{"{\"peer\":3}", "no open connection with peer id 3"},
		{"{\"peer\":99}", "no open connection with peer id 99"},
		{"{\"peer\":4294967295}", "no open connection with peer id 4294967295"},
	};
	struct sg_dp_verbs_rc_addr x, old3 = conn[3], old2 = conn[2];
	json_t *j;
	uint64_t end;
	int rc;

	j = rpc(c, "verbs_rc_disconnect", "{\"peer\":3}");
	SG_CHECK(j && json_integer_value(json_object_get(j, "peer")) == 3, "disconnect 3");
	json_decref(j);
	check_verbs_info(c, p, true, NW - 1);
	SG_CHECK_EQ(counter(p, 0, "peers"), NW - 1);
	for (size_t i = 0; i < RTE_DIM(bad); i++)
		rpc_refused(c, "verbs_rc_disconnect", bad[i].params, bad[i].needle);
	/* the lcore answers neither in time: the first it skips, the second it undoes */
	for (int stall = 1; stall <= 2; stall++) {
		atomic_store(&fq.stall, stall);
		/* an lcore between its CQ poll and its channel would answer at once: the
		 * request goes only once it hangs (it polls its CQ every loop) */
		end = rte_rdtsc() + 2 * rte_get_tsc_hz();
		while (stall == 1 && !atomic_load(&fq.stalled) && rte_rdtsc() < end)
			rte_delay_us_sleep(100);
		rc = rc_connect(p, 3, 1024, &x);
		atomic_store(&fq.stall, 0);
		SG_CHECK(rc == -ETIMEDOUT && strstr(err, "nothing was connected"),
			 "stalled lcore %d: %d %s", stall, rc, err);
	}
	/* behind the late requests on the channel: only room for one, the old range */
	rc = rpc_rc_connect(c, 3, 1024, &conn[3]);
	SG_CHECK(rc >= NW && conn[3].addr == old3.addr && conn[3].qpn != old3.qpn,
		 "reconnect 3: peer %d, ring %#" PRIx64 " (was %#" PRIx64 ")", rc, conn[3].addr,
		 old3.addr);
	check_verbs_info(c, p, true, NW);
	rc = rc_connect(p, 3, 1024, &x);
	SG_CHECK(rc == -ENOSPC, "full again: %d %s", rc, err);
	/* worker 2's connection breaks: the node closes it at the next poll */
	SG_CHECK_EQ(fq_rc_error(old2.qpn), 0);
	end = rte_rdtsc() + 2 * rte_get_tsc_hz();
	/* the lcore's counters are read from this thread: wait for both */
	while ((counter(p, 0, "rc_qp_error") == 0 || counter(p, 0, "peers") != NW - 1) &&
	       rte_rdtsc() < end)
		rte_delay_us_sleep(1000);
	SG_CHECK_EQ(counter(p, 0, "rc_qp_error"), 1);
	SG_CHECK_EQ(counter(p, 0, "peers"), NW - 1);
	rpc_refused(c, "verbs_rc_disconnect", "{\"peer\":2}", "no open connection");
	rc = rpc_rc_connect(c, 2, 1024, &conn[2]);
	SG_CHECK(rc > NW && conn[2].addr == old2.addr, "reconnect 2: peer %d", rc);
	/* 3 closed: by the RPC, by the late request undone, by the error */
	SG_CHECK_EQ(counter(p, 0, "rc_closed"), 3);
	SG_CHECK_EQ(counter(p, 0, "peers"), NW);
}

#define F_AGENT 1u /* the control agent moves keys while workers push */
#define F_RC 2u    /* [verbs] mode = rc: workers connect, then write */
#define F_RPC 4u   /* RC: workers 1.. connect through the agent's verbs_rc_connect */

static void scenario(const char *name, const char *io, const char *red, const char *rtc,
		     unsigned int loss_pct, unsigned int flags)
{
	bool agent = flags & F_AGENT;
	struct sg_dp_agent *a = NULL;
	struct sg_dp_config c;
	struct sg_dp_pipeline *p;
	struct run r = {.rounds = 12, .loss_pct = loss_pct};
	struct sg_dp_stats es;
	uint64_t rx = 0, tx = 0, reduced = 0, handoff = 0, summed = 0, proto = 0;
	uint64_t engine_drops = 0;
	int rc;

	base_config(&c);
	dp_layout(&c, io, red, rtc);
	if (agent)
		c.timeout_ms = 250; /* a move waits 2 slot timeouts for chunks nobody pushes */
	if (flags & F_RC) {
		set_kv(&c, "mode", "rc");
		set_kv(&c, "mtu", "1024");
		set_kv(&c, "recv_depth", "256"); /* 4 connections of 64 slots */
		r.rc = true;
	}
	fq_reset();
	p = sg_dp_pipeline_create(&c, err, sizeof(err));
	SG_CHECK(p != NULL, "%s: create: %s", name, err);
	if (p == NULL)
		return;
	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(p); i++) {
		struct sg_dp_lcore_stats st;

		sg_dp_pipeline_lcore_stats(p, i, &st);
		SG_CHECK(r.rc || (counter(p, i, "qpn") >= 0x200 &&
				  counter(p, i, "qpn") < 0x200 + FQ_MAX_QP),
			 "%s: lcore %u has no QP", name, st.lcore);
		if ((st.role & SG_ROLE_IO) || push_to_all)
			r.rx_qpn[r.n_rx++] = (uint32_t)counter(p, i, "qpn");
	}
	/* RC: one worker connects before the start (directly), the others while the lcore
	 * runs (through its control channel) */
	if (r.rc)
		SG_CHECK(rc_connect(p, 0, 1024, &r.conn[0]) == 0, "RC connect 0: %s", err);
	SG_CHECK_EQ(sg_dp_pipeline_start(p), 0);
	if (flags & (F_AGENT | F_RPC)) {
		struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
		struct sg_dp_agent_conf ac = {.name = "vtp"};

		a = sg_dp_agent_start(p, &sc, &ac, NULL, err, sizeof(err));
		SG_CHECK(a != NULL, "agent: %s", err);
		r.ctl = a ? sg_ctl_client_connect(ctl_path, NULL, 0, 5000) : NULL;
		SG_CHECK(r.ctl != NULL, "control client");
		r.between = r.ctl && agent ? mover : NULL;
	}
	for (unsigned int w = 1; r.rc && w < NW; w++) {
		if ((flags & F_RPC) && r.ctl != NULL) {
			rc = rpc_rc_connect(r.ctl, w, 1024, &r.conn[w]);
			SG_CHECK(rc == (int)w, "RC connect %u over RPC: %d", w, rc);
			continue;
		}
		rc = rc_connect(p, w, 1024, &r.conn[w]);
		SG_CHECK(rc == (int)w, "RC connect %u: %d %s", w, rc, err);
	}
	if (r.ctl != NULL && (r.rc || agent)) {
		char params[512];

		check_verbs_info(r.ctl, p, r.rc, NW);
		if (r.rc) {
			rc_rpc_refusals(r.ctl);
			check_verbs_info(r.ctl, p, true, NW); /* nothing more connected */
		} else {
			rc_params(params, sizeof(params), 0, 1024);
			rpc_refused(r.ctl, "verbs_rc_connect", params, "mode = ud");
		}
	}
	if (r.rc) {
		struct sg_dp_verbs_rc_addr x;

		/* the region has room for 4 connections; a worker ring too small for replies */
		rc = rc_connect(p, 0, 1024, &x);
		SG_CHECK(rc == -ENOSPC && strstr(err, "raise [verbs] recv_depth"), "5th: %d %s",
			 rc, err);
		rc = rc_connect(p, 0, 512, &x);
		SG_CHECK(rc == -EINVAL && strstr(err, "cannot hold"), "small ring: %d %s", rc, err);
		SG_CHECK(r.conn[1].slots == 64 && r.conn[1].stride >= 1024 &&
			 r.conn[1].addr != r.conn[2].addr && r.conn[1].qpn != r.conn[2].qpn,
			 "connections");
		if (r.ctl != NULL)
			rc_lifecycle(p, r.ctl, r.conn);
	}
	rc = drive(&r);
	fq_wait_rx_idle(); /* retransmits still queued are received before RX stops */
	if (r.ctl != NULL && agent) {
		uint16_t km[SG_BUCKETS];
		json_t *jl = rpc(r.ctl, "job_list", NULL), *j;
		size_t i;
		bool listed = false;

		keymap_of(km, -1);
		SG_CHECK(keymap_is(r.ctl, km, 5), "move back did not commit");
		/* the agent's per-job counters, from the reducers through their channels */
		json_array_foreach(jl, i, j)
			if (json_integer_value(json_object_get(j, "id")) == JOB) {
				listed = true;
				SG_CHECK_EQ((uint64_t)json_integer_value(
						    json_object_get(j, "rounds_completed")),
					    (uint64_t)r.rounds * KEYS * NCH);
			}
		SG_CHECK(listed, "job_list lists job %u", JOB);
		json_decref(jl);
	}
	sg_ctl_client_close(r.ctl);
	sg_dp_agent_stop(a);
	sg_dp_pipeline_stop(p);
	printf("[%s] %lu results ok, %lu bad, %lu stale, %lu pushes (%lu retransmitted), "
	       "%lu lost out, %lu lost in, %lu WAITING\n", name, (unsigned long)r.ok,
	       (unsigned long)r.bad, (unsigned long)r.stale, (unsigned long)r.sent,
	       (unsigned long)r.retrans, (unsigned long)r.lost_out, (unsigned long)r.lost_in,
	       (unsigned long)r.waits);
	sg_dp_pipeline_print_stats(p, stdout, 0);
	SG_CHECK(rc == 0, "%s: rounds did not complete", name);
	SG_CHECK_EQ(r.bad, 0);
	SG_CHECK_EQ(r.ok, (uint64_t)r.rounds * NW * KEYS * NCH);
	SG_CHECK_EQ(atomic_load(&fq.bad_wr), 0);
	SG_CHECK_EQ(atomic_load(&fq.foreign_ah), 0);
	sg_dp_pipeline_engine_stats(p, &es);
	SG_CHECK_EQ(es.rounds_completed, (uint64_t)r.rounds * KEYS * NCH);
	SG_CHECK_EQ(es.incomplete_slots, 0);
	for (unsigned int i = 0; i < sg_dp_pipeline_n_lcores(p); i++) {
		struct sg_dp_lcore_stats st;

		sg_dp_pipeline_lcore_stats(p, i, &st);
		rx += st.rx_pkts;
		reduced += st.reduced_pkts;
		handoff += st.handoff_pkts;
		summed += st.bytes_summed;
		/* a retransmitted push the engine already summed is its "duplicate" (below) */
		proto += st.drops[SG_DP_ND_PROTO];
		for (int k = 0; k < SG_DP_ND_COUNT; k++)
			SG_CHECK(st.drops[k] == 0 || k == SG_DP_ND_PROTO, "%s: lcore %u drop %s: %lu",
				 name, st.lcore, sg_dp_ndrop_name(k), (unsigned long)st.drops[k]);
		SG_CHECK_EQ(counter(p, i, "rx_no_peer"), 0);
		SG_CHECK_EQ(counter(p, i, "tx_no_buf"), 0);
		SG_CHECK(st.rx_pkts == counter(p, i, "rx_packets") &&
			 st.tx_pkts == counter(p, i, "tx_packets"), "%s: lcore %u rx %lu vs %lu, "
			 "tx %lu vs %lu", name, st.lcore, (unsigned long)st.rx_pkts,
			 (unsigned long)counter(p, i, "rx_packets"), (unsigned long)st.tx_pkts,
			 (unsigned long)counter(p, i, "tx_packets"));
		tx += st.tx_pkts;
	}
	for (int k = 1; k < SG_DP_DROP_COUNT; k++)
		engine_drops += es.drops[k];
	SG_CHECK(proto == es.drops[SG_DP_DROP_DUPLICATE] && engine_drops == proto &&
		 proto <= r.retrans, "%s: %lu drops, %lu duplicates", name, (unsigned long)proto,
		 (unsigned long)es.drops[SG_DP_DROP_DUPLICATE]);
	/* every RESULT and WAITING the engines sent went out on some lcore's QP */
	SG_CHECK(tx == es.results_sent + es.waits_sent, "%s: %lu sent, engines %lu + %lu", name,
		 (unsigned long)tx, (unsigned long)es.results_sent, (unsigned long)es.waits_sent);
	/* every push that reached the node was reduced once, here or after a hand-off */
	SG_CHECK_EQ(rx, r.sent - r.lost_out);
	SG_CHECK_EQ(reduced, rx);
	SG_CHECK_EQ(summed, (uint64_t)r.rounds * NW * KEYS * ELEMS * 4);
	if (r.n_rx > 1 || strchr(red ? red : "", ','))
		SG_CHECK(handoff > 0, "%s: no hand-off happened", name);
	sg_dp_pipeline_destroy(p);
	SG_CHECK_EQ(atomic_load(&fq.live), 0);
}

/* Push chunk @p chunk (of 2, CHUNK bytes each) of key 0 as the only worker of @p job
 * to node QP @p qpn; @return true if its RESULT came back with the pushed values. */
static bool push_answered(uint32_t qpn, uint32_t job, uint64_t token, uint32_t chunk)
{
	uint8_t pkt[SG_DP_HDR_LEN + CHUNK];
	float f[CHUNK / 4];
	struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .dtype = SG_DTYPE_FP32, .job = job,
			      .token = token, .rank = 0, .key = 0, .chunk = chunk, .nchunks = 2,
			      .round = 1, .nelem = CHUNK / 4, .offset = chunk * CHUNK};
	uint64_t end = rte_rdtsc() + 3 * rte_get_tsc_hz();
	uint32_t len;

	for (uint32_t i = 0; i < CHUNK / 4; i++)
		f[i] = (float)(i + chunk * 1000) - 100.0f;
	len = (uint32_t)sg_dp_build(pkt, sizeof(pkt), &m, f, CHUNK);
	SG_CHECK_EQ(fq_deliver(qpn, W_HOST(0), W_QPN(0), pkt, len), 0);
	while (rte_rdtsc() < end) {
		struct wire_msg x;

		if (fq_take(&x) != 0) {
			rte_delay_us_sleep(1000);
			continue;
		}
		return sg_dp_parse(x.buf, x.len, &m, NULL) == 0 && m.type == SG_DP_T_RESULT &&
		       m.job == job && m.key == 0 && m.chunk == chunk && m.nelem == CHUNK / 4 &&
		       m.round == 1 && !memcmp(m.payload, f, CHUNK);
	}
	return false;
}

/*
 * A job made over RPC on a node without [job N] sections: its chunks must fit
 * one verbs message (UD at MTU 1024: 976 bytes, what verbs_info advertises),
 * not the 1424-byte Ethernet default. A worker chunking at max_payload gets
 * each chunk summed and answered. Then the receive CQ fails a few polls:
 * counted (rx_poll_fail, a drop in /sigma/drops), and receiving goes on.
 */
static void test_rpc_job_fits_verbs(void)
{
	struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
	struct sg_dp_agent_conf ac = {.name = "vtp"};
	struct sg_dp_agent *a = NULL;
	struct sg_ctl_client *cli = NULL;
	struct sg_dp_pipeline *p;
	struct sg_dp_config c;
	json_t *j;
	uint32_t job = 0, qpn;
	uint64_t token = 0, end;
	json_int_t maxpl = 0;

	base_config(&c);
	c.n_jobs = 0;
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	fq_reset();
	p = sg_dp_pipeline_create(&c, err, sizeof(err));
	SG_CHECK(p != NULL, "create: %s", err);
	if (p == NULL)
		return;
	qpn = (uint32_t)counter(p, 0, "qpn");
	SG_CHECK_EQ(sg_dp_pipeline_start(p), 0);
	a = sg_dp_agent_start(p, &sc, &ac, NULL, err, sizeof(err));
	SG_CHECK(a != NULL, "agent: %s", err);
	cli = a ? sg_ctl_client_connect(ctl_path, NULL, 0, 5000) : NULL;
	SG_CHECK(cli != NULL, "control client");
	j = cli ? rpc(cli, "verbs_info", NULL) : NULL;
	maxpl = json_integer_value(json_object_get(j, "max_payload"));
	json_decref(j);
	SG_CHECK_EQ(maxpl, (json_int_t)CHUNK);
	/* one key of two chunks of max_payload bytes, one worker */
	j = cli ? rpc(cli, "job_create", "{\"workers\":1,\"partition_bytes\":1952,"
		      "\"tensors\":[{\"elems\":488}]}") : NULL;
	if (j != NULL) {
		const char *tok = json_string_value(json_object_get(j, "token"));

		job = (uint32_t)json_integer_value(json_object_get(j, "id"));
		for (int i = 0; tok != NULL && i < 16; i++)
			token = token << 4 | (uint64_t)(tok[i] <= '9' ? tok[i] - '0'
							 : (tok[i] | 0x20) - 'a' + 10);
		json_decref(j);
	}
	SG_CHECK(push_answered(qpn, job, token, 0),
		 "a push of max_payload bytes to an RPC-made job got no right RESULT");
	/* three failed polls of the rtc lcore's receive CQ */
	__atomic_store_n(&fq.fail_cq, fq_find(qpn)->rcq, __ATOMIC_RELEASE);
	atomic_store(&fq.fail_n, 3);
	end = rte_rdtsc() + 3 * rte_get_tsc_hz();
	while (counter(p, 0, "rx_poll_fail") < 3 && rte_rdtsc() < end)
		rte_delay_us_sleep(1000);
	SG_CHECK_EQ(counter(p, 0, "rx_poll_fail"), 3);
	SG_CHECK(push_answered(qpn, job, token, 1), "no RESULT after failed polls");
	__atomic_store_n(&fq.fail_cq, NULL, __ATOMIC_RELEASE);
	sg_ctl_client_close(cli);
	sg_dp_agent_stop(a);
	sg_dp_pipeline_destroy(p);
	SG_CHECK_EQ(atomic_load(&fq.live), 0);
}

static void expect_refused(const char *what, const struct sg_dp_config *c, const char *needle)
{
	struct sg_dp_pipeline *p;

	fq_reset();
	p = sg_dp_pipeline_create(c, err, sizeof(err));
	SG_CHECK(p == NULL && strstr(err, needle) != NULL, "%s: want \"%s\", got \"%s\"", what,
		 needle, p ? "(accepted)" : err);
	sg_dp_pipeline_destroy(p);
	SG_CHECK_EQ(atomic_load(&fq.live), 0);
}

static void test_refused(void)
{
	struct sg_dp_config c;

	base_config(&c);
	dp_layout(&c, NULL, NULL, "(1,0,1)");
	expect_refused("port 1", &c, "every entry is on port 0");

	base_config(&c);
	set_kv(&c, "mode", "rc");
	dp_layout(&c, NULL, NULL, "(0,0,1),(0,1,2)");
	expect_refused("rc, two rtc", &c, "mode = rc: the layout must be exactly one rtc lcore");

	base_config(&c);
	set_kv(&c, "mode", "rc");
	dp_layout(&c, "(0,0,1)", "2", NULL);
	expect_refused("rc, io + reduce", &c, "use rtc = (0,0,LCORE) alone, or mode = ud");

	base_config(&c);
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	set_kv(&c, "recv_depth", "lots");
	expect_refused("garbage [verbs] value", &c, "recv_depth");

	base_config(&c);
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	set_kv(&c, "bogus", "1");
	expect_refused("unknown [verbs] key", &c, "bogus");

	base_config(&c);
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	c.jobs[0].chunk_bytes = 2048; /* the fake port's MTU is 1024 */
	expect_refused("chunk above the UD MTU", &c, "do not fit one 1024-byte verbs message");

	base_config(&c);
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	fq_reset();
	fq.ndev = 0;
	{
		struct sg_dp_pipeline *p = sg_dp_pipeline_create(&c, err, sizeof(err));

		SG_CHECK(p == NULL && errno == ENODEV &&
			 strstr(err, "no RDMA device (ibv_get_device_list found none)"),
			 "no device: %s", p ? "(accepted)" : err);
		sg_dp_pipeline_destroy(p);
	}
	fq.ndev = 1;
	SG_CHECK_EQ(atomic_load(&fq.live), 0);

	/* the generic layout checks still apply (an lcore EAL did not enable) */
	base_config(&c);
	dp_layout(&c, NULL, NULL, "(0,0,7)");
	expect_refused("lcore not enabled", &c, "lcore 7 is not enabled by EAL");
}

/* [verbs] in a config file: kept as written for the transport, garbage refused. */
static void test_config_section(void)
{
	static const struct {
		const char *ini, *needle;
	} bad[] = {
		{"[verbs]\nrecv_depth = lots\n", "recv_depth"},
		{"[verbs]\nmode = xrc\n", "mode"},
		{"[verbs]\nflavour = 3\n", "flavour"},
		{"[verbs]\ndevice = mlx5_0_with_a_name_far_longer_than_any_device_name_rdma_core_"
		 "would_ever_give_one_of_its_devices\n", "too long"},
	};
	struct sg_dp_config c;

	for (size_t i = 0; i < RTE_DIM(bad); i++) {
		sg_dp_config_defaults(&c);
		err[0] = '\0';
		SG_CHECK(sg_dp_config_load_string(&c, bad[i].ini, err, sizeof(err)) < 0 &&
			 strstr(err, bad[i].needle) != NULL, "%s: \"%s\" lacks \"%s\"", bad[i].ini,
			 err, bad[i].needle);
	}
	sg_dp_config_defaults(&c);
	SG_CHECK_EQ(c.n_verbs_kv, 0);
	SG_CHECK(sg_dp_config_load_string(&c, "[transport]\ntype = verbs\n[verbs]\nmode = ud\n"
					  "recv_depth = 2048\n", err, sizeof(err)) == 0, "good: %s",
		 err);
	SG_CHECK(c.transport == SG_DP_TRANSPORT_VERBS && c.n_verbs_kv == 2 &&
		 !strcmp(c.verbs_kv[1].key, "recv_depth") && !strcmp(c.verbs_kv[1].value, "2048"),
		 "kept as written");
	/* a later [verbs] replaces the whole section */
	SG_CHECK_EQ(sg_dp_config_load_string(&c, "[verbs]\nport = 2\n", err, sizeof(err)), 0);
	SG_CHECK(c.n_verbs_kv == 1 && !strcmp(c.verbs_kv[0].key, "port"), "replaced");
}

/* SIGHUP with @p nc; its report (to free) in @p out. @return changes needing a restart. */
static int reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, char **out)
{
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	int n;

	if (f == NULL)
		return -1;
	n = sg_dp_pipeline_reload(p, nc, f);
	fclose(f);
	return n;
}

/* SIGHUP names every changed [verbs] key; unchanged ones say nothing. */
static void test_reload(void)
{
	struct sg_dp_config c, nc;
	struct sg_dp_pipeline *p;
	char *out = NULL;
	int n;

	base_config(&c);
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	set_kv(&c, "recv_depth", "512");
	fq_reset();
	p = sg_dp_pipeline_create(&c, err, sizeof(err));
	SG_CHECK(p != NULL, "create: %s", err);
	if (p == NULL)
		return;
	nc = c;
	nc.verbs_ops = NULL; /* a re-read file never carries the hook */
	n = reload(p, &nc, &out);
	SG_CHECK(n == 0 && strstr(out, "[verbs]") == NULL, "unchanged: %d: %s", n, out);
	free(out);

	nc.n_verbs_kv = 0;
	set_kv(&nc, "recv_depth", "2048");
	set_kv(&nc, "poll_batch", "64");
	set_kv(&nc, "mode", "ud"); /* the default: no change */
	n = reload(p, &nc, &out);
	SG_CHECK(n == 2 && strstr(out, "[verbs] recv_depth changed: needs a restart") &&
		 strstr(out, "[verbs] poll_batch changed: needs a restart") &&
		 !strstr(out, "[verbs] mode"), "two keys: %d: %s", n, out);
	free(out);

	nc.n_verbs_kv = 0;
	set_kv(&nc, "send_depth", "-3");
	n = reload(p, &nc, &out);
	SG_CHECK(n == 1 && strstr(out, "[verbs] not applied") && strstr(out, "send_depth"),
		 "bad value: %d: %s", n, out);
	free(out);
	/* RC connections on a UD pipeline, and on no pipeline, are refused */
	{
		struct sg_dp_verbs_rc_addr local;

		n = rc_connect(p, 0, 1024, &local);
		SG_CHECK(n == -ENOTSUP && strstr(err, "UD"), "UD: %d %s", n, err);
		n = rc_connect(NULL, 0, 1024, &local);
		SG_CHECK(n == -ENOTSUP && strstr(err, "does not run the verbs transport"),
			 "no pipeline: %d %s", n, err);
	}
	sg_dp_pipeline_destroy(p);
	SG_CHECK_EQ(atomic_load(&fq.live), 0);
}

/* A node on the DPDK transport refuses both verbs RPCs, saying so. */
static int ethdev_hook(struct sg_dp_pipeline *p, void *arg)
{
	struct sg_ctl_server_config sc = {.tcp_disable = true, .unix_path = ctl_path};
	struct sg_dp_agent_conf ac = {.name = "eth"};
	struct sg_dp_agent *a = sg_dp_agent_start(p, &sc, &ac, NULL, err, sizeof(err));
	struct sg_ctl_client *c = a ? sg_ctl_client_connect(ctl_path, NULL, 0, 5000) : NULL;
	char params[512];

	(void)arg;
	SG_CHECK(c != NULL, "ethdev agent: %s", err);
	if (c != NULL) {
		rc_params(params, sizeof(params), 0, 1024);
		rpc_refused(c, "verbs_info", NULL, "this node runs the DPDK transport");
		rpc_refused(c, "verbs_rc_connect", params, "this node runs the DPDK transport");
	}
	sg_ctl_client_close(c);
	sg_dp_agent_stop(a);
	return 0;
}

static void test_ethdev_refused(void)
{
	struct sg_dp_config c;
	struct sg_dp_loop_conf lc = {.rounds = 2, .timeout_s = 10, .gen_sleep_us = 50,
				     .on_start = ethdev_hook};
	struct sg_dp_loop_result res;

	sg_dp_config_defaults(&c);
	c.mbufs = 2048;
	c.pool_bufs = 256;
	c.idle = SG_IDLE_SLEEP;
	c.n_jobs = 1;
	c.jobs[0].workers = 2;
	c.jobs[0].keys = 2;
	c.jobs[0].partition_bytes = 8000;
	dp_layout(&c, NULL, NULL, "(0,0,1)");
	SG_CHECK(sg_dp_loopback_run(&c, &lc, &res, NULL, err, sizeof(err)) == 0 && res.rc == 0,
		 "ethdev loopback: %s", err);
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "512",
		       "--lcores=(0-4)@(0-1)", "--log-level=lib.eal:error", prefix, NULL};

	(void)argc;
	pthread_mutex_init(&fq.mu, NULL);
	fq.wire = calloc(FQ_WIRE, sizeof(*fq.wire));
	if (fq.wire == NULL)
		return 1;
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_dp_vpipe_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0)
		SG_TEST_SKIP_ALL("EAL cannot start here (no --no-huge support?)");
	test_config_section();
	test_refused();
	test_reload();
	scenario("one rtc lcore", NULL, NULL, "(0,0,1)", 10, 0);
	scenario("two rtc lcores", NULL, NULL, "(0,0,1),(0,1,2)", 10, 0);
	scenario("two io, two reducers", "(0,0,1),(0,1,2)", "3,4", NULL, 10, 0);
	/* the RC connections of workers 1..3 go through the agent's verbs_rc_connect RPC */
	snprintf(ctl_path, sizeof(ctl_path), "/tmp/sg_vtp_%d.sock", (int)getpid());
	scenario("RC, one rtc lcore", NULL, NULL, "(0,0,1)", 0, F_RC | F_RPC);
	test_ethdev_refused();
	push_to_all = true; /* a reducer's QP receives too */
	scenario("two io, two reducers, pushes to all 4 QPs", "(0,0,1),(0,1,2)", "3,4", NULL, 10,
		 0);
	push_to_all = false;
	/* keys move between the reducers (control agent, layout_set) while workers push */
	scenario("two rtc lcores, keys moved", NULL, NULL, "(0,0,1),(0,1,2)", 5, F_AGENT);
	test_rpc_job_fits_verbs();
	unlink(ctl_path);
	sg_dp_eal_cleanup();
	free(fq.wire);
	return sg_test_finish("dp_verbs_pipe");
}
