/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Verbs transport on a real RDMA device: the transport serves one UD QP, and
 * a worker QP opened by this test on the same port pushes two ranks' chunks
 * to it through the HCA's loopback. Every RESULT is checked against the sum
 * computed here. Skips (77) where ibv_get_device_list finds no device.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>

#include "sg_dp_pipeline.h"
#include "sg_dp_verbs.h"
#include "sg_test.h"

#define NRANK 2
#define NCHUNK 2
#define ELEMS 64 /* per chunk */
#define NRECV 16
#define MSG (SG_DP_HDR_LEN + ELEMS * 4)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static float val(unsigned int rank, unsigned int chunk, unsigned int e)
{
	return (float)(rank * 100 + chunk * 10 + e);
}

/* The worker side: plain verbs, as a client library would use them. */
struct worker {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq, *scq; /* receives, sends */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint8_t buf[(NRECV + 1) * (SG_DP_VERBS_GRH_LEN + MSG)];
};

static int worker_open(struct worker *w, struct ibv_device *dev, const struct sg_dp_verbs *t,
		       const struct sg_dp_verbs_conf *vc)
{
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp_attr a;
	struct ibv_ah_attr ah = {0};
	struct ibv_port_attr pa;
	union ibv_gid gid;
	uint16_t lid;
	int gi;
	const uint32_t rlen = SG_DP_VERBS_GRH_LEN + MSG;

	w->ctx = ibv_open_device(dev);
	w->pd = w->ctx ? ibv_alloc_pd(w->ctx) : NULL;
	w->cq = w->pd ? ibv_create_cq(w->ctx, 64, NULL, NULL, 0) : NULL;
	w->scq = w->cq ? ibv_create_cq(w->ctx, 64, NULL, NULL, 0) : NULL;
	w->mr = w->scq ? ibv_reg_mr(w->pd, w->buf, sizeof(w->buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (w->mr == NULL || ibv_query_port(w->ctx, vc->port, &pa) != 0)
		return -1;
	ia.send_cq = w->scq;
	ia.recv_cq = w->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = NRECV;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	w->qp = ibv_create_qp(w->pd, &ia);
	if (w->qp == NULL)
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = vc->port;
	a.qkey = SG_DP_VERBS_QKEY_DEFAULT;
	if (ibv_modify_qp(w->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(w->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(w->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;
	for (unsigned int i = 0; i < NRECV; i++) {
		struct ibv_sge s;
		struct ibv_recv_wr r, *bad;

		sg_dp_verbs_build_recv(&r, &s, i, w->buf + (size_t)(i + 1) * rlen, rlen,
				       w->mr->lkey);
		if (ibv_post_recv(w->qp, &r, &bad))
			return -1;
	}
	sg_dp_verbs_local_addr(t, &gid, &lid, &gi);
	ah.dlid = lid;
	ah.port_num = vc->port;
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
		ah.is_global = 1;
		ah.grh.dgid = gid;
		ah.grh.sgid_index = (uint8_t)gi;
		ah.grh.hop_limit = 64;
	}
	w->ah = ibv_create_ah(w->pd, &ah);
	return w->ah != NULL ? 0 : -1;
}

static void worker_close(struct worker *w)
{
	if (w->ah)
		ibv_destroy_ah(w->ah);
	if (w->qp)
		ibv_destroy_qp(w->qp);
	if (w->mr)
		ibv_dereg_mr(w->mr);
	if (w->scq)
		ibv_destroy_cq(w->scq);
	if (w->cq)
		ibv_destroy_cq(w->cq);
	if (w->pd)
		ibv_dealloc_pd(w->pd);
	if (w->ctx)
		ibv_close_device(w->ctx);
}

static int worker_push(struct worker *w, const struct sg_dp_verbs *t, unsigned int rank,
		       unsigned int chunk)
{
	struct sg_dp_msg m = {0};
	float f[ELEMS];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge s;
	struct ibv_wc wc;
	int n;

	for (unsigned int e = 0; e < ELEMS; e++)
		f[e] = val(rank, chunk, e);
	m.type = SG_DP_T_PUSH;
	m.dtype = SG_DTYPE_FP32;
	m.job = 1;
	m.token = 42;
	m.rank = (uint16_t)rank;
	m.chunk = chunk;
	m.nchunks = NCHUNK;
	m.round = 1;
	m.nelem = ELEMS;
	m.offset = chunk * ELEMS * 4;
	if (sg_dp_build(w->buf, MSG, &m, f, sizeof(f)) != MSG)
		return -1;
	sg_dp_verbs_build_ud_send(&wr, &s, 0, w->buf, MSG, w->mr->lkey, w->ah, sg_dp_verbs_qpn(t),
				  SG_DP_VERBS_QKEY_DEFAULT);
	if (ibv_post_send(w->qp, &wr, &bad))
		return -1;
	/* wait for the send to complete so that buf may be reused */
	for (uint64_t end = now_ns() + 2000000000ull; now_ns() < end;) {
		n = ibv_poll_cq(w->scq, 1, &wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc.status == IBV_WC_SUCCESS ? 0 : -1;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	int ndev = 0;
	char prefix[64], err[512];
	char *eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "128",
		       "--log-level=lib.eal:error", prefix, NULL};
	struct sg_dp_verbs_conf vc;
	struct sg_dp_verbs *t;
	struct sg_dp_engine *eng;
	struct sg_dp_engine_conf ec = {0};
	struct sg_dp_job_conf jc = {0};
	static const struct sg_dp_key key = {.id = 0, .nelem = NCHUNK * ELEMS};
	struct worker w = {0};
	unsigned int results = 0, good = 0;

	(void)argc;
	list = ibv_get_device_list(&ndev);
	if (list == NULL || ndev == 0) {
		if (list != NULL)
			ibv_free_device_list(list);
		SG_TEST_SKIP_ALL("no RDMA device (ibv_get_device_list found none)");
	}
	snprintf(prefix, sizeof(prefix), "--file-prefix=sg_verbs_dev_%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0) {
		ibv_free_device_list(list);
		SG_TEST_SKIP_ALL("EAL cannot start here");
	}
	sg_dp_verbs_conf_defaults(&vc);
	snprintf(vc.device, sizeof(vc.device), "%s", ibv_get_device_name(list[0]));
	vc.recv_depth = 64;
	vc.send_depth = 64;
	t = sg_dp_verbs_create(&vc, err, sizeof(err));
	if (t == NULL && errno == ENODEV) {
		ibv_free_device_list(list);
		SG_TEST_SKIP_ALL("%s", err); /* a device, but no active port or GID */
	}
	SG_CHECK(t != NULL, "create on %s: %s", vc.device, err);
	if (t == NULL)
		goto out;
	SG_CHECK(sg_dp_verbs_qpn(t) != 0 && sg_dp_verbs_max_payload(t) >= ELEMS * 4,
		 "qpn %u max payload %u", sg_dp_verbs_qpn(t), sg_dp_verbs_max_payload(t));
	ec.numa_node = -1;
	ec.pool_bufs = 16;
	ec.max_payload = sg_dp_verbs_max_payload(t);
	ec.tx = sg_dp_verbs_tx_ops(t);
	eng = sg_dp_engine_create(&ec);
	jc.id = 1;
	jc.nworkers = NRANK;
	jc.token = 42;
	jc.dtype = SG_DTYPE_FP32;
	jc.chunk_bytes = ELEMS * 4;
	jc.partition_bytes = NCHUNK * ELEMS * 4;
	jc.keys = &key;
	jc.nkeys = 1;
	SG_CHECK(eng != NULL && sg_dp_engine_add_job(eng, &jc) == 0, "engine");
	SG_CHECK(worker_open(&w, list[0], t, &vc) == 0, "worker QP on %s: %s", vc.device,
		 strerror(errno));
	if (eng == NULL || w.ah == NULL)
		goto out_eng;
	/* both ranks push from this one QP; the node answers each at that address */
	for (unsigned int c = 0; c < NCHUNK; c++)
		for (unsigned int r = 0; r < NRANK; r++) {
			SG_CHECK(worker_push(&w, t, r, c) == 0, "push rank %u chunk %u", r, c);
			sg_dp_verbs_poll(t, eng, now_ns());
		}
	for (uint64_t end = now_ns() + 5000000000ull;
	     results < NRANK * NCHUNK && now_ns() < end;) {
		struct ibv_wc wc;

		sg_dp_verbs_poll(t, eng, now_ns());
		if (ibv_poll_cq(w.cq, 1, &wc) == 1 && wc.opcode == IBV_WC_RECV) {
			const uint8_t *b = w.buf + (size_t)(wc.wr_id + 1) *
						   (SG_DP_VERBS_GRH_LEN + MSG);
			struct sg_dp_msg m;
			bool ok;

			results++;
			ok = wc.status == IBV_WC_SUCCESS &&
			     sg_dp_parse(b + SG_DP_VERBS_GRH_LEN, wc.byte_len - SG_DP_VERBS_GRH_LEN,
					 &m, NULL) == 0 && m.type == SG_DP_T_RESULT &&
			     m.nelem == ELEMS && m.chunk < NCHUNK;
			for (unsigned int e = 0; ok && e < ELEMS; e++) {
				float got, want = 0;

				for (unsigned int r = 0; r < NRANK; r++)
					want += val(r, m.chunk, e);
				memcpy(&got, (const uint8_t *)m.payload + 4 * e, 4);
				ok = got == want;
			}
			good += ok;
		}
	}
	SG_CHECK(results == NRANK * NCHUNK && good == results, "%u results, %u right", results,
		 good);
out_eng:
	worker_close(&w);
	sg_dp_engine_destroy(eng);
out:
	sg_dp_verbs_destroy(t);
	ibv_free_device_list(list);
	/* also removes the runtime folder that rte_eal_cleanup() leaves */
	sg_dp_eal_cleanup();
	return sg_test_finish("dp_verbs_dev");
}
