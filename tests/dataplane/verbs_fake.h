/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fake verbs for the transport's unit tests: a device that behaves like an
 * HCA as far as the transport can tell. Receives land in the buffers the
 * transport posted (the test writes GRH + message there, as the HCA would),
 * sends are recorded with their bytes and complete on the send CQ unless the
 * test holds them. Every object is counted so that leaks show.
 */
#ifndef VERBS_FAKE_H
#define VERBS_FAKE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "sg_dp_verbs.h"
#include "sg_test.h"

#define FK_MAX_RECV 4096
#define FK_MAX_SENT 4096
#define FK_MAX_WC 8192

struct fk_posted {
	uint64_t wr_id;
	uint8_t *addr;
	uint32_t len;
};

struct fk_sent {
	uint64_t wr_id;
	struct ibv_ah *ah;
	uint32_t qpn, qkey;
	struct ibv_qp *qp;
	enum ibv_wr_opcode opcode;
	uint64_t raddr;
	uint32_t rkey, imm; /* imm in host order */
	uint32_t len;
	uint8_t buf[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
};

struct fk_wcq {
	struct ibv_wc wc[FK_MAX_WC];
	unsigned int head, tail;
};

static struct fake {
	/* behaviour knobs */
	int ndev;
	enum ibv_port_state port_state;
	uint8_t link_layer;
	enum ibv_mtu mtu;
	struct ibv_gid_entry gids[4];
	unsigned int ngids;
	uint64_t ml_limit, ml_locked;
	bool ml_cap;
	int fail_reg_mr, fail_create_qp, fail_modify_qp_at, fail_create_ah, fail_post_send_at;
	int hold_send_wc;
	/* state */
	struct ibv_device devs[2];
	struct ibv_device *devlist[3];
	struct ibv_cq *cqs[2]; /* created first: receive CQ, then send CQ */
	unsigned int ncq;
	int live; /* objects alive */
	unsigned int modify_calls;
	enum ibv_qp_state states[4];
	int qkey_set;
	struct ibv_qp_init_attr qp_attr;
	unsigned int nqp;
	struct ibv_qp_attr rtr; /* the last transition to RTR */
	int srq_live;
	struct fk_posted posted[FK_MAX_RECV]; /* FIFO of receive WRs on the QP */
	unsigned int ph, pt;
	unsigned int n_ah;
	struct ibv_ah_attr ah_attr[64];
	struct ibv_ah *ahs[64];
	struct fk_sent sent[FK_MAX_SENT];
	unsigned int nsent;
	struct fk_wcq rq, sq;
	uint32_t lkey;
} fk;

static void fk_reset(void)
{
	memset(&fk, 0, sizeof(fk));
	fk.ndev = 2;
	snprintf(fk.devs[0].name, sizeof(fk.devs[0].name), "fake0");
	snprintf(fk.devs[1].name, sizeof(fk.devs[1].name), "fake1");
	fk.port_state = IBV_PORT_ACTIVE;
	fk.link_layer = IBV_LINK_LAYER_ETHERNET;
	fk.mtu = IBV_MTU_1024;
	/* RoCE table: v1 link-local, v2 link-local, v2 IPv4-mapped 10.0.0.1 */
	fk.ngids = 3;
	for (unsigned int i = 0; i < 3; i++) {
		fk.gids[i].gid.raw[0] = 0xfe;
		fk.gids[i].gid.raw[1] = 0x80;
		fk.gids[i].gid.raw[15] = 1;
		fk.gids[i].gid_index = i;
		fk.gids[i].gid_type = i == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
	}
	memset(fk.gids[2].gid.raw, 0, 16);
	fk.gids[2].gid.raw[10] = fk.gids[2].gid.raw[11] = 0xff;
	fk.gids[2].gid.raw[12] = 10;
	fk.gids[2].gid.raw[15] = 1;
	fk.ml_limit = UINT64_MAX;
	fk.fail_modify_qp_at = -1;
	fk.fail_post_send_at = -1;
	fk.lkey = 0x1234;
}

static void *fk_obj(size_t size)
{
	void *p = calloc(1, size);

	if (p != NULL)
		fk.live++;
	return p;
}

static int fk_free(void *p)
{
	if (p == NULL)
		return EINVAL;
	fk.live--;
	free(p);
	return 0;
}

static struct ibv_device **fk_get_device_list(int *num)
{
	*num = fk.ndev;
	for (int i = 0; i < fk.ndev; i++)
		fk.devlist[i] = &fk.devs[i];
	fk.devlist[fk.ndev] = NULL;
	fk.live++;
	return fk.devlist;
}

static void fk_free_device_list(struct ibv_device **l)
{
	(void)l;
	fk.live--;
}

static struct ibv_context *fk_open_device(struct ibv_device *d)
{
	struct ibv_context *c = fk_obj(sizeof(*c));

	c->device = d;
	return c;
}

static int fk_close_device(struct ibv_context *c)
{
	return fk_free(c);
}

static int fk_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a)
{
	(void)c;
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = fk.port_state;
	a->link_layer = fk.link_layer;
	a->active_mtu = fk.mtu;
	a->max_mtu = IBV_MTU_4096;
	a->lid = fk.link_layer == IBV_LINK_LAYER_INFINIBAND ? 7 : 0;
	a->gid_tbl_len = 4;
	return 0;
}

static int fk_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t idx,
			   struct ibv_gid_entry *e, uint32_t flags)
{
	(void)c, (void)port, (void)flags;
	if (idx >= fk.ngids)
		return ENODATA;
	*e = fk.gids[idx];
	return 0;
}

static struct ibv_pd *fk_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = fk_obj(sizeof(*pd));

	pd->context = c;
	return pd;
}

static int fk_dealloc_pd(struct ibv_pd *pd)
{
	return fk_free(pd);
}

static struct ibv_mr *fk_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr;

	if (fk.fail_reg_mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr = fk_obj(sizeof(*mr));
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = fk.lkey;
	mr->rkey = (uint32_t)access; /* lets a test see the access flags */
	return mr;
}

static int fk_dereg_mr(struct ibv_mr *mr)
{
	return fk_free(mr);
}

static struct ibv_cq *fk_create_cq(struct ibv_context *c, int cqe, void *ctx,
				   struct ibv_comp_channel *ch, int vec)
{
	struct ibv_cq *cq = fk_obj(sizeof(*cq));

	(void)c, (void)ctx, (void)ch, (void)vec;
	cq->cqe = cqe;
	if (fk.ncq < 2)
		fk.cqs[fk.ncq++] = cq;
	return cq;
}

static int fk_destroy_cq(struct ibv_cq *cq)
{
	return fk_free(cq);
}

static struct ibv_qp *fk_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct ibv_qp *qp;

	if (fk.fail_create_qp) {
		errno = ENOMEM;
		return NULL;
	}
	fk.qp_attr = *a;
	qp = fk_obj(sizeof(*qp));
	qp->pd = pd;
	qp->qp_num = 0x77 + fk.nqp++;
	qp->qp_type = a->qp_type;
	return qp;
}

static int fk_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	(void)qp;
	if ((int)fk.modify_calls == fk.fail_modify_qp_at)
		return EINVAL;
	if (fk.modify_calls < 4)
		fk.states[fk.modify_calls] = a->qp_state;
	if (a->qp_state == IBV_QPS_RTR)
		fk.rtr = *a;
	if (mask & IBV_QP_QKEY)
		fk.qkey_set = (int)a->qkey;
	fk.modify_calls++;
	return 0;
}

static int fk_destroy_qp(struct ibv_qp *qp)
{
	return fk_free(qp);
}

static struct ibv_ah *fk_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	struct ibv_ah *ah;

	if (fk.fail_create_ah) {
		errno = EINVAL;
		return NULL;
	}
	ah = fk_obj(sizeof(*ah));
	ah->pd = pd;
	if (fk.n_ah < 64) {
		fk.ah_attr[fk.n_ah] = *a;
		fk.ahs[fk.n_ah] = ah;
	}
	fk.n_ah++;
	return ah;
}

static int fk_destroy_ah(struct ibv_ah *ah)
{
	return fk_free(ah);
}

static int fk_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	for (; wr != NULL; wr = wr->next) {
		if (wr->num_sge != 1 || wr->sg_list[0].lkey != fk.lkey ||
		    fk.pt - fk.ph >= FK_MAX_RECV) {
			*bad = wr;
			return EINVAL;
		}
		fk.posted[fk.pt % FK_MAX_RECV] = (struct fk_posted){
			wr->wr_id, (uint8_t *)(uintptr_t)wr->sg_list[0].addr, wr->sg_list[0].length };
		fk.pt++;
	}
	return 0;
}

static struct ibv_srq *fk_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	struct ibv_srq *srq = fk_obj(sizeof(*srq));

	(void)a;
	srq->pd = pd;
	fk.srq_live++;
	return srq;
}

static int fk_destroy_srq(struct ibv_srq *srq)
{
	fk.srq_live--;
	return fk_free(srq);
}

/* SRQ receives for WRITE-with-immediate carry no buffer. */
static int fk_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	for (; wr != NULL; wr = wr->next) {
		if (wr->num_sge != 0 || fk.pt - fk.ph >= FK_MAX_RECV) {
			*bad = wr;
			return EINVAL;
		}
		fk.posted[fk.pt % FK_MAX_RECV] = (struct fk_posted){ wr->wr_id, NULL, 0 };
		fk.pt++;
	}
	return 0;
}

static void fk_push_wc(struct fk_wcq *q, const struct ibv_wc *wc)
{
	SG_CHECK(q->tail - q->head < FK_MAX_WC, "fake CQ overflow");
	q->wc[q->tail++ % FK_MAX_WC] = *wc;
}

static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	for (int i = 0; wr != NULL; wr = wr->next, i++) {
		struct fk_sent *s;
		struct ibv_wc wc = { .wr_id = wr->wr_id, .status = IBV_WC_SUCCESS,
				     .opcode = IBV_WC_SEND };

		if (i == fk.fail_post_send_at || fk.nsent == FK_MAX_SENT || wr->num_sge != 1 ||
		    wr->sg_list[0].length > sizeof(s->buf)) {
			*bad = wr;
			return ENOMEM;
		}
		s = &fk.sent[fk.nsent++];
		s->wr_id = wr->wr_id;
		s->ah = wr->wr.ud.ah;
		s->qpn = wr->wr.ud.remote_qpn;
		s->qkey = wr->wr.ud.remote_qkey;
		s->len = wr->sg_list[0].length;
		s->qp = qp;
		s->opcode = wr->opcode;
		s->raddr = wr->wr.rdma.remote_addr;
		s->rkey = wr->wr.rdma.rkey;
		s->imm = ntohl(wr->imm_data);
		SG_CHECK((wr->opcode == IBV_WR_SEND) == (qp->qp_type == IBV_QPT_UD) &&
			 (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) == (qp->qp_type == IBV_QPT_RC) &&
			 (wr->send_flags & IBV_SEND_SIGNALED) && wr->sg_list[0].lkey == fk.lkey,
			 "send WR malformed");
		memcpy(s->buf, (void *)(uintptr_t)wr->sg_list[0].addr, s->len);
		fk_push_wc(&fk.sq, &wc);
	}
	return 0;
}

static int fk_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fk_wcq *q = cq == fk.cqs[0] ? &fk.rq : &fk.sq;
	int k = 0;

	if (q == &fk.sq && fk.hold_send_wc)
		return 0;
	while (k < n && q->head != q->tail)
		wc[k++] = q->wc[q->head++ % FK_MAX_WC];
	return k;
}

static int fk_memlock_probe(uint64_t *limit, uint64_t *locked, bool *cap)
{
	*limit = fk.ml_limit;
	*locked = fk.ml_locked;
	*cap = fk.ml_cap;
	return 0;
}

static const struct sg_dp_verbs_ops fk_ops = {
	.get_device_list = fk_get_device_list,
	.free_device_list = fk_free_device_list,
	.open_device = fk_open_device,
	.close_device = fk_close_device,
	.query_port = fk_query_port,
	.query_gid_ex = fk_query_gid_ex,
	.alloc_pd = fk_alloc_pd,
	.dealloc_pd = fk_dealloc_pd,
	.reg_mr = fk_reg_mr,
	.dereg_mr = fk_dereg_mr,
	.create_cq = fk_create_cq,
	.destroy_cq = fk_destroy_cq,
	.create_qp = fk_create_qp,
	.modify_qp = fk_modify_qp,
	.destroy_qp = fk_destroy_qp,
	.create_ah = fk_create_ah,
	.destroy_ah = fk_destroy_ah,
	.post_recv = fk_post_recv,
	.post_send = fk_post_send,
	.poll_cq = fk_poll_cq,
	.create_srq = fk_create_srq,
	.destroy_srq = fk_destroy_srq,
	.post_srq_recv = fk_post_srq_recv,
	.memlock_probe = fk_memlock_probe,
};

/* Source of a fake UD datagram: RoCE v2 over IPv4 from 10.0.1.<host>, QP qpn. */
struct fk_src {
	uint8_t host;
	uint32_t qpn;
};

/*
 * Deliver one datagram as the HCA would: into the oldest posted receive
 * buffer, GRH area first (IPv4 header in its last 20 bytes), completion on
 * the receive CQ. @return 0, or -1 if no receive is posted (the HCA drops).
 */
static int fk_deliver(struct fk_src src, const void *msg, uint32_t len, enum ibv_wc_status st)
{
	struct fk_posted p;
	struct ibv_wc wc = {0};
	uint8_t *ip;

	if (fk.ph == fk.pt)
		return -1;
	p = fk.posted[fk.ph++ % FK_MAX_RECV];
	if (SG_DP_VERBS_GRH_LEN + len > p.len)
		return -1;
	memset(p.addr, 0xee, SG_DP_VERBS_GRH_LEN); /* bytes 0..19 are undefined */
	ip = p.addr + 20;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	ip[9] = 17;
	ip[12] = 10, ip[13] = 0, ip[14] = 1, ip[15] = src.host;
	ip[16] = 10, ip[17] = 0, ip[18] = 0, ip[19] = 1;
	memcpy(p.addr + SG_DP_VERBS_GRH_LEN, msg, len);
	wc.wr_id = p.wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = SG_DP_VERBS_GRH_LEN + len;
	wc.src_qp = src.qpn;
	wc.wc_flags = IBV_WC_GRH;
	fk_push_wc(&fk.rq, &wc);
	return 0;
}

/* Receives posted and not yet consumed. */
static inline unsigned int fk_posted_count(void)
{
	return fk.pt - fk.ph;
}

/*
 * An RC write as the HCA reports it: the writer already put @p len bytes in
 * its slot; a WRITE-with-immediate consumes the oldest SRQ receive.
 */
static int fk_rc_write_done(uint32_t qp_num, uint32_t slot, uint32_t len,
			    enum ibv_wc_opcode op)
{
	struct ibv_wc wc = {0};

	if (fk.ph == fk.pt)
		return -1;
	wc.wr_id = fk.posted[fk.ph++ % FK_MAX_RECV].wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = op;
	wc.byte_len = len;
	wc.imm_data = htonl(slot);
	wc.wc_flags = op == IBV_WC_RECV_RDMA_WITH_IMM ? IBV_WC_WITH_IMM : 0;
	wc.qp_num = qp_num;
	fk_push_wc(&fk.rq, &wc);
	return 0;
}

#endif /* VERBS_FAKE_H */
