/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Verbs transport: device set-up, buffer bookkeeping, the address-handle
 * cache and the poll loop that feeds the aggregation engine.
 *
 * Memory: one region holds recv_depth receive buffers (GRH area + largest
 * message, 64-byte strides) then send_depth send buffers; it is registered
 * once. Receive buffer i is always posted with wr_id (RECV, i), and re-posted
 * after the engine has returned (the engine keeps nothing). Send buffers live
 * on a free stack: alloc() pops one, its send completion pushes it back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <arpa/inet.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_jhash.h>
#include <rte_log.h>

#include "sg_err.h"
#include "sg_dp_verbs.h"
#include "sg_sum.h"

RTE_LOG_REGISTER(sg_dp_verbs_logtype, sigma.verbs, INFO);
/* The macro ends the line: no "\n" in @p fmt. */
#define SG_DP_VERBS_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sg_dp_verbs_logtype, "verbs: " fmt "\n", ##__VA_ARGS__)

/* Sends chained behind one doorbell at most. */
#define SEND_CHAIN 64
/* Largest poll batch (conf check keeps poll_batch below it). */
#define MAX_BATCH 256
/* Largest GID table scanned by the automatic choice. */
#define MAX_GIDS 256

/* A worker the node answers: a UD address handle, or an RC connection. */
struct peer {
	struct ibv_ah *ah;     /* UD */
	uint32_t qpn;          /* UD: remote QPN */
	struct ibv_qp *qp;     /* RC: our QP of the connection */
	uint64_t raddr;        /* RC: the worker's receive ring */
	uint32_t rkey, rslots, rstride;
	uint32_t next;         /* RC: next slot of the worker's ring to write */
	uint32_t slot_base;    /* RC: first of our region's slots it writes */
	struct sg_dp_verbs_peer_key key; /* UD: what the cache knows it by */
	struct ibv_ah_attr attr;         /* UD: how its address handle was made */
};

/* RC peers are found by our QP number; this LID marks such keys apart from UD ones. */
#define RC_KEY_LID 0xffff

struct sg_dp_verbs {
	struct sg_dp_verbs_conf c;
	const struct sg_dp_verbs_ops *ops;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *rcq, *scq;
	struct ibv_qp *qp;   /* UD */
	struct ibv_srq *srq; /* RC: zero-length receives consumed by WRITE-with-immediate */
	struct ibv_qp *pending_qp; /* QP of the chained sends */
	uint32_t rc_next_slot; /* RC: first region slot not given to a connection yet */
	uint32_t *rc_free;     /* RC: first slots of ranges closed connections gave back */
	uint32_t n_rc_free;
	uint32_t n_closed;     /* RC: peer entries whose connection is closed (qp NULL) */
	uint32_t err_qpn[8];   /* RC: QPs a completion found in error, closed after the poll */
	uint32_t n_err_qpn;
	enum ibv_mtu path_mtu;
	union ibv_gid gid;
	uint16_t lid;
	int gid_index;
	bool ethernet, ipv4_mapped;
	uint32_t msg_max; /* largest message, Sigma header included */

	uint8_t *region;
	size_t region_len;
	uint8_t *sbase;   /* first send buffer */
	uint32_t rstride, sstride;

	uint32_t *send_free; /* stack of free send buffer indices */
	uint32_t n_send_free;
	uint32_t *repost;    /* receive buffers to post again */
	uint32_t n_repost;
	struct ibv_recv_wr rwr[MAX_BATCH];
	struct ibv_sge rsge[MAX_BATCH];
	struct ibv_send_wr swr[SEND_CHAIN];
	struct ibv_sge ssge[SEND_CHAIN];
	uint32_t n_pending;

	struct rte_hash *peer_hash;
	struct peer *peers;
	uint32_t n_peers;

	struct ibv_wc rwc[MAX_BATCH];
	struct ibv_wc swc[MAX_BATCH];
	struct sg_dp_verbs_stats st;
} __rte_cache_aligned; /* one per reducer lcore */

/* ---- the real rdma-core calls (several are inline in verbs.h) ---------- */

static int rc_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

static int rc_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
			   struct ibv_gid_entry *e, uint32_t flags)
{
	return ibv_query_gid_ex(ctx, port, index, e, flags);
}

static struct ibv_mr *rc_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

static int rc_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_recv(qp, wr, bad);
}

static int rc_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

static int rc_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

static int rc_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad)
{
	return ibv_post_srq_recv(srq, wr, bad);
}

static const struct sg_dp_verbs_ops rdma_core_ops = {
	.get_device_list = ibv_get_device_list,
	.free_device_list = ibv_free_device_list,
	.open_device = ibv_open_device,
	.close_device = ibv_close_device,
	.query_port = rc_query_port,
	.query_gid_ex = rc_query_gid_ex,
	.alloc_pd = ibv_alloc_pd,
	.dealloc_pd = ibv_dealloc_pd,
	.reg_mr = rc_reg_mr,
	.dereg_mr = ibv_dereg_mr,
	.create_cq = ibv_create_cq,
	.destroy_cq = ibv_destroy_cq,
	.create_qp = ibv_create_qp,
	.modify_qp = ibv_modify_qp,
	.destroy_qp = ibv_destroy_qp,
	.create_ah = ibv_create_ah,
	.destroy_ah = ibv_destroy_ah,
	.post_recv = rc_post_recv,
	.post_send = rc_post_send,
	.poll_cq = rc_poll_cq,
	.create_srq = ibv_create_srq,
	.destroy_srq = ibv_destroy_srq,
	.post_srq_recv = rc_post_srq_recv,
	.memlock_probe = sg_dp_verbs_memlock_probe,
};

const struct sg_dp_verbs_ops *sg_dp_verbs_ops_rdma_core(void)
{
	return &rdma_core_ops;
}

int sg_dp_verbs_memlock_probe(uint64_t *limit, uint64_t *locked, bool *cap_ipc_lock)
{
	struct rlimit rl;
	char line[256];
	FILE *f;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return -errno;
	*limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	*locked = 0;
	*cap_ipc_lock = false;
	f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return 0; /* without /proc, judge by the limit alone */
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;

		if (sscanf(line, "VmLck: %llu kB", &v) == 1)
			*locked = (uint64_t)v * 1024;
		else if (sscanf(line, "CapEff: %llx", &v) == 1)
			*cap_ipc_lock = (v >> 14) & 1; /* CAP_IPC_LOCK */
	}
	fclose(f);
	return 0;
}

/* ---- set-up --------------------------------------------------------------- */

static int open_device(struct sg_dp_verbs *t, char *err, size_t errlen)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	char names[256] = "";
	int num = 0, rc = 0;

	list = t->ops->get_device_list(&num);
	if (list == NULL || num <= 0) {
		if (list != NULL)
			t->ops->free_device_list(list);
		return sg_err(err, errlen, -ENODEV,
			    "no RDMA device (ibv_get_device_list found none): load the NIC's "
			    "RDMA driver or use the DPDK transport");
	}
	for (int i = 0; i < num; i++) {
		size_t used = strlen(names);

		snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
			 list[i]->name);
		if (dev == NULL && (t->c.device[0] == '\0' || strcmp(list[i]->name, t->c.device) == 0))
			dev = list[i];
	}
	if (dev == NULL)
		rc = sg_err(err, errlen, -ENODEV,
			  "[verbs] device = \"%s\": no such RDMA device (found: %s)", t->c.device,
			  names);
	else if ((t->ctx = t->ops->open_device(dev)) == NULL)
		rc = sg_err(err, errlen, -(errno ? errno : ENODEV), "ibv_open_device(%s): %s",
			  dev->name, strerror(errno ? errno : ENODEV));
	else
		snprintf(t->c.device, sizeof(t->c.device), "%s", dev->name);
	t->ops->free_device_list(list);
	return rc;
}

static int pick_port_and_gid(struct sg_dp_verbs *t, struct ibv_port_attr *pa, char *err,
			     size_t errlen)
{
	struct ibv_gid_entry e;
	int rc;

	memset(pa, 0, sizeof(*pa));
	rc = t->ops->query_port(t->ctx, t->c.port, pa);
	if (rc != 0)
		return sg_err(err, errlen, -(rc > 0 ? rc : EINVAL),
			    "[verbs] port = %u: ibv_query_port on %s failed (%s); ports are "
			    "numbered from 1", t->c.port, t->c.device, strerror(rc > 0 ? rc : EINVAL));
	if (pa->state != IBV_PORT_ACTIVE)
		return sg_err(err, errlen, -ENODEV,
			    "port %u of %s is not active (state %s): check the link/cable or "
			    "pick another [verbs] port", t->c.port, t->c.device,
			    ibv_port_state_str(pa->state));
	t->ethernet = pa->link_layer == IBV_LINK_LAYER_ETHERNET;
	t->lid = pa->lid;
	t->path_mtu = pa->active_mtu;

	if (t->c.gid_index < 0) {
		struct ibv_gid_entry *all;
		unsigned int n = 0, len = pa->gid_tbl_len > MAX_GIDS ? MAX_GIDS : pa->gid_tbl_len;

		all = calloc(len ? len : 1, sizeof(*all));
		if (all == NULL)
			return sg_err(err, errlen, -ENOMEM, "out of memory");
		for (unsigned int i = 0; i < len; i++)
			if (t->ops->query_gid_ex(t->ctx, t->c.port, i, &all[n], 0) == 0)
				all[n++].gid_index = i;
		rc = sg_dp_verbs_gid_select(all, n, t->ethernet);
		free(all);
		if (rc < 0)
			return sg_err(err, errlen, -ENODEV,
				    "port %u of %s has no usable GID (RoCE: give the netdev an IP "
				    "address; or set [verbs] gid_index)", t->c.port, t->c.device);
		t->gid_index = rc;
	} else {
		t->gid_index = t->c.gid_index;
	}
	if (t->ops->query_gid_ex(t->ctx, t->c.port, (uint32_t)t->gid_index, &e, 0) != 0)
		return sg_err(err, errlen, -EINVAL,
			    "[verbs] gid_index = %d: no such GID on port %u of %s (see "
			    "'ibv_devinfo -v' or 'show_gids')", t->gid_index, t->c.port, t->c.device);
	t->gid = e.gid;
	t->ipv4_mapped = t->ethernet && e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
			 memcmp(e.gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
	return 0;
}

/* Largest message: UD datagrams must fit the port's active MTU. */
static int size_messages(struct sg_dp_verbs *t, const struct ibv_port_attr *pa, char *err,
			 size_t errlen)
{
	uint32_t cap = SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD;

	if (t->c.mode == SG_DP_VERBS_UD) {
		uint32_t port_mtu = sg_dp_verbs_mtu_bytes(pa->active_mtu);

		if (port_mtu == 0)
			return sg_err(err, errlen, -EINVAL, "port %u of %s reports no valid MTU",
				    t->c.port, t->c.device);
		if (t->c.mtu > port_mtu)
			return sg_err(err, errlen, -EINVAL,
				    "[verbs] mtu = %u exceeds the active MTU of port %u of %s (%u): "
				    "a UD message is one packet; lower mtu or use mode = rc",
				    t->c.mtu, t->c.port, t->c.device, port_mtu);
		cap = port_mtu < cap ? port_mtu : cap;
	}
	t->msg_max = t->c.mtu ? t->c.mtu : cap;
	if (t->msg_max > SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD)
		t->msg_max = SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD;
	return 0;
}

static int setup_memory(struct sg_dp_verbs *t, char *err, size_t errlen)
{
	uint64_t limit, locked;
	bool cap;
	int access = IBV_ACCESS_LOCAL_WRITE, rc;
	size_t recv_len;

	t->rstride = RTE_ALIGN_CEIL(SG_DP_VERBS_GRH_LEN + t->msg_max, 64);
	t->sstride = RTE_ALIGN_CEIL(t->msg_max, 64);
	recv_len = (size_t)t->c.recv_depth * t->rstride;
	t->region_len = RTE_ALIGN_CEIL(recv_len + (size_t)t->c.send_depth * t->sstride, 4096);

	/* Check first: a failed ibv_reg_mr only says ENOMEM, not why. */
	rc = t->ops->memlock_probe(&limit, &locked, &cap);
	if (rc == 0) {
		rc = sg_dp_verbs_memlock_check(t->region_len, limit, locked, cap, err, errlen);
		if (rc < 0)
			return rc;
	}
	t->region = sg_sum_numa_alloc(t->region_len, t->c.numa_node);
	if (t->region == NULL)
		return sg_err(err, errlen, -ENOMEM, "cannot allocate %zu KiB of buffers on node %d",
			    t->region_len / 1024, t->c.numa_node);
	t->sbase = t->region + recv_len;
	if (t->c.mode == SG_DP_VERBS_RC)
		access |= IBV_ACCESS_REMOTE_WRITE;
	t->mr = t->ops->reg_mr(t->pd, t->region, t->region_len, access);
	if (t->mr == NULL) {
		int e = errno ? errno : ENOMEM;

		return sg_err(err, errlen, -e,
			    "ibv_reg_mr of %zu KiB failed (%s): if the cause is the locked-memory "
			    "limit, run 'ulimit -l unlimited' (or LimitMEMLOCK=infinity under "
			    "systemd, --ulimit memlock=-1 under docker) before sigmad",
			    t->region_len / 1024, strerror(e));
	}
	return 0;
}

/* Walk a fresh QP through INIT, RTR and RTS; the error names the state that failed. */
static int qp_to_rts(struct sg_dp_verbs *t, struct ibv_qp *qp, struct ibv_qp_attr a[3],
		     const int mask[3], const char *what, char *err, size_t errlen)
{
	static const char *const names[] = {"INIT", "RTR", "RTS"};

	a[0].qp_state = IBV_QPS_INIT;
	a[1].qp_state = IBV_QPS_RTR;
	a[2].qp_state = IBV_QPS_RTS;
	for (int i = 0; i < 3; i++) {
		int rc = t->ops->modify_qp(qp, &a[i], mask[i] | IBV_QP_STATE);

		if (rc != 0)
			return sg_err(err, errlen, -(rc > 0 ? rc : EINVAL),
				    "ibv_modify_qp of the %s QP to %s failed (%s)", what, names[i],
				    strerror(rc > 0 ? rc : EINVAL));
	}
	return 0;
}

static int setup_ud_qp(struct sg_dp_verbs *t, char *err, size_t errlen)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = t->scq, .recv_cq = t->rcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = t->c.send_depth, .max_recv_wr = t->c.recv_depth,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	static const int mask[3] = {IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0,
				    IBV_QP_SQ_PSN};
	struct ibv_qp_attr a[3];

	t->qp = t->ops->create_qp(t->pd, &ia);
	if (t->qp == NULL)
		return sg_err(err, errlen, -(errno ? errno : EINVAL),
			    "ibv_create_qp (UD, %u send / %u receive WRs) failed (%s): lower "
			    "[verbs] send_depth/recv_depth to the device's max_qp_wr",
			    t->c.send_depth, t->c.recv_depth, strerror(errno ? errno : EINVAL));
	memset(a, 0, sizeof(a));
	a[0].port_num = t->c.port;
	a[0].qkey = t->c.qkey;
	return qp_to_rts(t, t->qp, a, mask, "UD", err, errlen);
}

/* Post the receive buffers listed in t->repost, in chains of poll_batch. */
static int repost_recvs(struct sg_dp_verbs *t)
{
	uint32_t done = 0;
	int rc = 0;

	while (done < t->n_repost) {
		uint32_t n = t->n_repost - done;
		struct ibv_recv_wr *bad = NULL;

		if (n > MAX_BATCH)
			n = MAX_BATCH;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t idx = t->repost[done + i];

			sg_dp_verbs_build_recv(&t->rwr[i], &t->rsge[i], idx,
					       t->region + (size_t)idx * t->rstride,
					       t->rstride, t->mr->lkey);
			/* RC: the data lands where the writer puts it, not here */
			if (t->srq != NULL)
				t->rwr[i].num_sge = 0;
			t->rwr[i].next = i + 1 < n ? &t->rwr[i + 1] : NULL;
		}
		rc = t->srq != NULL ? t->ops->post_srq_recv(t->srq, t->rwr, &bad) :
				      t->ops->post_recv(t->qp, t->rwr, &bad);
		if (rc != 0) {
			/* WRs before the bad one are posted; the rest are lost until restart. */
			uint32_t ok = bad != NULL ? (uint32_t)(bad - t->rwr) : 0;

			if (ok > n)
				ok = 0;
			t->st.recv_posted += ok;
			t->st.rx_repost_fail += n - ok;
			done += n;
			break;
		}
		t->st.recv_posted += n;
		done += n;
	}
	t->n_repost = 0;
	return rc > 0 ? -rc : rc;
}

struct sg_dp_verbs *sg_dp_verbs_create(const struct sg_dp_verbs_conf *conf, char *err,
				       size_t errlen)
{
	struct rte_hash_parameters hp = {0};
	struct ibv_port_attr pa;
	struct sg_dp_verbs *t;
	char name[RTE_HASH_NAMESIZE];
	int rc;

	if (conf == NULL) {
		errno = EINVAL;
		snprintf(err, errlen, "verbs: no configuration");
		return NULL;
	}
	rc = sg_dp_verbs_conf_check(conf, err, errlen);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	if (posix_memalign((void **)&t, RTE_CACHE_LINE_SIZE, sizeof(*t)) != 0)
		t = NULL;
	else
		memset(t, 0, sizeof(*t));
	if (t == NULL) {
		snprintf(err, errlen, "verbs: out of memory");
		return NULL;
	}
	t->c = *conf;
	t->ops = conf->ops != NULL ? conf->ops : &rdma_core_ops;
	t->send_free = calloc(t->c.send_depth, sizeof(*t->send_free));
	t->repost = calloc(t->c.recv_depth, sizeof(*t->repost));
	t->peers = calloc(t->c.max_peers, sizeof(*t->peers));
	t->rc_free = calloc(t->c.recv_depth / (t->c.rc_slots ? t->c.rc_slots : 1) + 1,
			    sizeof(*t->rc_free));
	if (t->send_free == NULL || t->repost == NULL || t->peers == NULL || t->rc_free == NULL) {
		rc = sg_err(err, errlen, -ENOMEM, "verbs: out of memory");
		goto out;
	}
	rc = open_device(t, err, errlen);
	if (rc == 0)
		rc = pick_port_and_gid(t, &pa, err, errlen);
	if (rc == 0)
		rc = size_messages(t, &pa, err, errlen);
	if (rc < 0)
		goto out;
	t->pd = t->ops->alloc_pd(t->ctx);
	if (t->pd == NULL) {
		rc = sg_err(err, errlen, -(errno ? errno : ENOMEM), "ibv_alloc_pd on %s failed (%s)",
			  t->c.device, strerror(errno ? errno : ENOMEM));
		goto out;
	}
	rc = setup_memory(t, err, errlen);
	if (rc < 0)
		goto out;
	t->rcq = t->ops->create_cq(t->ctx, (int)t->c.recv_depth, NULL, NULL, 0);
	t->scq = t->rcq == NULL ? NULL :
		 t->ops->create_cq(t->ctx, (int)t->c.send_depth, NULL, NULL, 0);
	if (t->scq == NULL) {
		rc = sg_err(err, errlen, -(errno ? errno : ENOMEM),
			  "ibv_create_cq (%u/%u entries) on %s failed (%s): lower [verbs] "
			  "recv_depth/send_depth to the device's max_cqe", t->c.recv_depth,
			  t->c.send_depth, t->c.device, strerror(errno ? errno : ENOMEM));
		goto out;
	}
	snprintf(name, sizeof(name), "sgv_%" PRIxPTR, (uintptr_t)t);
	hp.name = name;
	hp.entries = t->c.max_peers < 8 ? 8 : t->c.max_peers;
	hp.key_len = sizeof(struct sg_dp_verbs_peer_key);
	hp.hash_func = rte_jhash;
	hp.socket_id = t->c.numa_node < 0 ? SOCKET_ID_ANY : t->c.numa_node;
	t->peer_hash = rte_hash_create(&hp);
	if (t->peer_hash == NULL) {
		rc = sg_err(err, errlen, -(rte_errno ? rte_errno : ENOMEM),
			  "rte_hash_create for %u peers failed (%s; EAL must be initialised)",
			  t->c.max_peers, rte_strerror(rte_errno));
		goto out;
	}
	for (uint32_t i = 0; i < t->c.send_depth; i++)
		t->send_free[i] = t->c.send_depth - 1 - i;
	t->n_send_free = t->c.send_depth;
	if (t->c.mode == SG_DP_VERBS_UD) {
		rc = setup_ud_qp(t, err, errlen);
	} else {
		struct ibv_srq_init_attr sa = {
			.attr = { .max_wr = t->c.recv_depth, .max_sge = 1 } };

		t->srq = t->ops->create_srq(t->pd, &sa);
		if (t->srq == NULL)
			rc = sg_err(err, errlen, -(errno ? errno : ENOMEM),
				  "ibv_create_srq (%u WRs) on %s failed (%s): lower [verbs] "
				  "recv_depth to the device's max_srq_wr", t->c.recv_depth,
				  t->c.device, strerror(errno ? errno : ENOMEM));
	}
	if (rc < 0)
		goto out;
	for (uint32_t i = 0; i < t->c.recv_depth; i++)
		t->repost[i] = i;
	t->n_repost = t->c.recv_depth;
	rc = repost_recvs(t);
	if (rc < 0) {
		rc = sg_err(err, errlen, rc, "posting %u receives failed (%s)", t->c.recv_depth,
			  strerror(-rc));
		goto out;
	}
	SG_DP_VERBS_LOG(INFO, "%s port %u (%s) gid %d, %s QP %u, %u-byte messages, %u+%u buffers, %zu KiB",
	     t->c.device, t->c.port, t->ethernet ? "RoCE" : "InfiniBand", t->gid_index,
	     sg_dp_verbs_mode_name(t->c.mode), t->qp ? t->qp->qp_num : 0, t->msg_max,
	     t->c.recv_depth, t->c.send_depth, t->region_len / 1024);
	return t;
out:
	sg_dp_verbs_destroy(t);
	errno = -rc;
	return NULL;
}

void sg_dp_verbs_destroy(struct sg_dp_verbs *t)
{
	if (t == NULL)
		return;
	if (t->qp != NULL)
		t->ops->destroy_qp(t->qp);
	for (uint32_t i = 0; i < t->n_peers; i++) {
		if (t->peers[i].ah != NULL)
			t->ops->destroy_ah(t->peers[i].ah);
		if (t->peers[i].qp != NULL)
			t->ops->destroy_qp(t->peers[i].qp);
	}
	if (t->srq != NULL)
		t->ops->destroy_srq(t->srq);
	rte_hash_free(t->peer_hash);
	if (t->scq != NULL)
		t->ops->destroy_cq(t->scq);
	if (t->rcq != NULL)
		t->ops->destroy_cq(t->rcq);
	if (t->mr != NULL)
		t->ops->dereg_mr(t->mr);
	if (t->region != NULL)
		sg_sum_numa_free(t->region, t->region_len);
	if (t->pd != NULL)
		t->ops->dealloc_pd(t->pd);
	if (t->ctx != NULL)
		t->ops->close_device(t->ctx);
	free(t->send_free);
	free(t->repost);
	free(t->peers);
	free(t->rc_free);
	free(t);
}

/* ---- data path ------------------------------------------------------------ */

/* Post the chained sends behind one doorbell. */
static void flush_sends(struct sg_dp_verbs *t)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t n = t->n_pending, ok = n;

	if (n == 0)
		return;
	t->n_pending = 0;
	t->swr[n - 1].next = NULL;
	if (t->ops->post_send(t->pending_qp, t->swr, &bad) != 0) {
		ok = bad != NULL && bad >= t->swr && bad < t->swr + n ? (uint32_t)(bad - t->swr) : 0;
		for (uint32_t i = ok; i < n; i++)
			t->send_free[t->n_send_free++] = (uint32_t)t->swr[i].wr_id; /* low bits: index */
		t->st.tx_post_fail += n - ok;
	}
	t->st.tx_packets += ok;
	for (uint32_t i = 0; i < ok; i++)
		t->st.tx_bytes += t->ssge[i].length;
}

/*
 * An RC completion in error (not a flush) means its QP went to the error state:
 * remember it, to close the connection after this poll (closing reaps sends, so
 * not from inside a reap).
 */
static void rc_note_error(struct sg_dp_verbs *t, const struct ibv_wc *wc)
{
	if (t->c.mode != SG_DP_VERBS_RC || wc->status == IBV_WC_WR_FLUSH_ERR)
		return;
	for (uint32_t i = 0; i < t->n_err_qpn; i++)
		if (t->err_qpn[i] == wc->qp_num)
			return;
	if (t->n_err_qpn < RTE_DIM(t->err_qpn))
		t->err_qpn[t->n_err_qpn++] = wc->qp_num;
}

/* Take back the send buffers whose sends completed. */
static int reap_sends(struct sg_dp_verbs *t)
{
	int n = t->ops->poll_cq(t->scq, (int)t->c.poll_batch, t->swc);

	for (int i = 0; i < n; i++) {
		enum sg_dp_verbs_wr_kind kind;
		uint32_t idx;

		if (sg_dp_verbs_wr_id_decode(t->swc[i].wr_id, &kind, &idx) < 0 ||
		    kind != SG_DP_VERBS_WR_SEND || idx >= t->c.send_depth ||
		    t->n_send_free >= t->c.send_depth) {
			t->st.tx_wc_error++; /* not ours: never free a buffer twice */
			continue;
		}
		if (t->swc[i].status != IBV_WC_SUCCESS) {
			t->st.tx_wc_error++;
			rc_note_error(t, &t->swc[i]);
		}
		t->send_free[t->n_send_free++] = idx;
	}
	return n < 0 ? 0 : n;
}

static void *tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct sg_dp_verbs *t = ctx;
	uint32_t idx;

	if (dest >= t->n_peers || (t->peers[dest].qp == NULL && t->peers[dest].ah == NULL)) {
		/* never connected, or a closed RC connection */
		t->st.tx_no_peer++;
		return NULL;
	}
	if (len > t->msg_max) {
		t->st.tx_no_buf++;
		return NULL;
	}
	if (t->n_send_free == 0) {
		/* Sends only complete once posted: ring the doorbell, then reap. */
		flush_sends(t);
		reap_sends(t);
		if (t->n_send_free == 0) {
			t->st.tx_no_buf++;
			return NULL;
		}
	}
	idx = t->send_free[--t->n_send_free];
	*pkt = t->sbase + (size_t)idx * t->sstride;
	return *pkt;
}

static void tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct sg_dp_verbs *t = ctx;
	uint32_t idx = (uint32_t)(((uint8_t *)pkt - t->sbase) / t->sstride);
	struct peer *p = &t->peers[(uint32_t)dest];
	struct ibv_qp *qp = p->qp != NULL ? p->qp : t->qp;
	uint32_t k;

	/* One chain goes to one QP: RC replies to another worker start a new one. */
	if (t->n_pending > 0 && t->pending_qp != qp)
		flush_sends(t);
	k = t->n_pending;
	t->pending_qp = qp;
	if (p->qp != NULL) {
		sg_dp_verbs_build_rc_write_imm(&t->swr[k], &t->ssge[k], idx, pkt, len, t->mr->lkey,
					       p->raddr, p->rkey, p->next, p->rstride);
		p->next = p->next + 1 == p->rslots ? 0 : p->next + 1;
	} else {
		sg_dp_verbs_build_ud_send(&t->swr[k], &t->ssge[k], idx, pkt, len, t->mr->lkey,
					  p->ah, p->qpn, t->c.qkey);
	}
	if (k > 0)
		t->swr[k - 1].next = &t->swr[k];
	t->n_pending = k + 1;
	if (t->n_pending == SEND_CHAIN)
		flush_sends(t);
}

struct sg_dp_tx_ops sg_dp_verbs_tx_ops(struct sg_dp_verbs *t)
{
	struct sg_dp_tx_ops ops = { .alloc = tx_alloc, .send = tx_send, .ctx = t };

	return ops;
}

int64_t sg_dp_verbs_peer_resolve(struct sg_dp_verbs *t, const struct sg_dp_verbs_peer_key *key,
				 const struct ibv_ah_attr *attr)
{
	struct ibv_ah_attr ah = *attr;
	void *data;
	struct ibv_ah *h;

	if (rte_hash_lookup_data(t->peer_hash, key, &data) >= 0)
		return (int64_t)(uintptr_t)data;
	if (t->qp == NULL || t->n_peers >= t->c.max_peers) {
		t->st.rx_no_peer++;
		return -1;
	}
	h = t->ops->create_ah(t->pd, &ah);
	if (h == NULL) {
		t->st.rx_no_peer++;
		return -1;
	}
	if (rte_hash_add_key_data(t->peer_hash, key, (void *)(uintptr_t)t->n_peers) < 0) {
		t->ops->destroy_ah(h);
		t->st.rx_no_peer++;
		return -1;
	}
	t->peers[t->n_peers].ah = h;
	t->peers[t->n_peers].qpn = key->qpn;
	t->peers[t->n_peers].key = *key;
	t->peers[t->n_peers].attr = *attr;
	return t->n_peers++;
}

int sg_dp_verbs_peer_addr(const struct sg_dp_verbs *t, uint32_t peer,
			  struct sg_dp_verbs_peer_key *key, struct ibv_ah_attr *attr)
{
	if (peer >= t->n_peers || t->peers[peer].ah == NULL)
		return -ENOENT;
	*key = t->peers[peer].key;
	*attr = t->peers[peer].attr;
	return 0;
}

/* The peer id of a UD sender: cached, or a new address handle. -1 if none. */
static int64_t peer_lookup(struct sg_dp_verbs *t, const struct ibv_wc *wc, const void *grh)
{
	struct sg_dp_verbs_peer_key key;
	struct ibv_ah_attr ah;

	if (sg_dp_verbs_peer_from_wc(wc, grh, t->c.port, (uint8_t)t->gid_index, t->ethernet,
				     t->ipv4_mapped, &key, &ah) < 0) {
		t->st.rx_bad_grh++;
		return -1;
	}
	return sg_dp_verbs_peer_resolve(t, &key, &ah);
}

/* Where received messages go: the engine (sg_dp_verbs_poll) or a caller's function. */
struct sink {
	sg_dp_verbs_rx_fn fn;
	void *arg;
};

static void deliver(struct sg_dp_verbs *t, const struct sink *k, const uint8_t *msg,
		    uint32_t len, uint32_t peer)
{
	t->st.rx_packets++;
	t->st.rx_bytes += len;
	if (k->fn(k->arg, msg, len, peer) < 0)
		t->st.rx_engine_drop++;
}

/* An RC WRITE-with-immediate: the immediate names the slot the sender wrote. */
static void handle_rc_write(struct sg_dp_verbs *t, const struct sink *k, const struct ibv_wc *wc)
{
	struct sg_dp_verbs_peer_key key = { .qpn = wc->qp_num, .lid = RC_KEY_LID };
	const struct peer *p;
	void *data;
	uint32_t slot;

	if (rte_hash_lookup_data(t->peer_hash, &key, &data) < 0) {
		t->st.rx_no_peer++;
		return;
	}
	p = &t->peers[(uintptr_t)data];
	slot = ntohl(wc->imm_data);
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
	    slot >= t->c.rc_slots || wc->byte_len > t->msg_max) {
		t->st.rx_bad_slot++;
		return;
	}
	/* the immediate counts from the sender's first slot */
	deliver(t, k, t->region + (size_t)(p->slot_base + slot) * t->rstride, wc->byte_len,
		(uint32_t)(uintptr_t)data);
}

static void handle_recv(struct sg_dp_verbs *t, const struct sink *k, const struct ibv_wc *wc)
{
	enum sg_dp_verbs_wr_kind kind;
	uint32_t idx;
	uint8_t *buf;
	int64_t peer;

	t->st.rx_completions++;
	if (sg_dp_verbs_wr_id_decode(wc->wr_id, &kind, &idx) < 0 || kind != SG_DP_VERBS_WR_RECV ||
	    idx >= t->c.recv_depth) {
		t->st.rx_wc_error++; /* not one of our buffers: nothing to re-post */
		return;
	}
	t->st.recv_posted--;
	if (wc->status != IBV_WC_SUCCESS) {
		t->st.rx_wc_error++;
		rc_note_error(t, wc);
		/* A flushed receive means the QP is in error: posting again is futile. */
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			t->repost[t->n_repost++] = idx;
		return;
	}
	t->repost[t->n_repost++] = idx;
	if (t->srq != NULL) {
		handle_rc_write(t, k, wc);
		return;
	}
	buf = t->region + (size_t)idx * t->rstride;
	if (wc->byte_len < SG_DP_VERBS_GRH_LEN || wc->byte_len > t->rstride) {
		t->st.rx_short++;
		return;
	}
	peer = peer_lookup(t, wc, buf);
	if (peer < 0)
		return;
	deliver(t, k, buf + SG_DP_VERBS_GRH_LEN, wc->byte_len - SG_DP_VERBS_GRH_LEN,
		(uint32_t)peer);
}

static void rc_close_errored(struct sg_dp_verbs *t);

int sg_dp_verbs_poll_fn(struct sg_dp_verbs *t, sg_dp_verbs_rx_fn fn, void *arg)
{
	struct sink k = {.fn = fn, .arg = arg};
	int n, reaped;

	n = t->ops->poll_cq(t->rcq, (int)t->c.poll_batch, t->rwc);
	if (n < 0) {
		t->st.rx_poll_fail++;
		return -EIO;
	}
	for (int i = 0; i < n; i++)
		handle_recv(t, &k, &t->rwc[i]);
	flush_sends(t);
	if (t->n_repost > 0)
		repost_recvs(t);
	reaped = reap_sends(t);
	if (unlikely(t->n_err_qpn > 0))
		rc_close_errored(t);
	return n + reaped;
}

int sg_dp_verbs_flush(struct sg_dp_verbs *t)
{
	int posted = (int)t->n_pending;

	flush_sends(t);
	return posted + reap_sends(t);
}

struct engine_sink {
	struct sg_dp_engine *eng;
	uint64_t now;
};

static int to_engine(void *arg, const uint8_t *msg, uint32_t len, uint32_t peer)
{
	const struct engine_sink *e = arg;

	return sg_dp_engine_rx(e->eng, msg, len, peer, e->now);
}

int sg_dp_verbs_poll(struct sg_dp_verbs *t, struct sg_dp_engine *eng, uint64_t now)
{
	struct engine_sink e = {.eng = eng, .now = now};

	return sg_dp_verbs_poll_fn(t, to_engine, &e);
}

uint32_t sg_dp_verbs_max_payload(const struct sg_dp_verbs *t)
{
	uint32_t p = (t->msg_max - SG_DP_HDR_LEN) & ~7u;

	return p > SG_MAX_CHUNK_BYTES ? SG_MAX_CHUNK_BYTES : p;
}

uint32_t sg_dp_verbs_qpn(const struct sg_dp_verbs *t)
{
	return t->qp != NULL ? t->qp->qp_num : 0;
}

void sg_dp_verbs_local_addr(const struct sg_dp_verbs *t, union ibv_gid *gid, uint16_t *lid,
			    int *gid_index)
{
	if (gid != NULL)
		*gid = t->gid;
	if (lid != NULL)
		*lid = t->lid;
	if (gid_index != NULL)
		*gid_index = t->gid_index;
}

void sg_dp_verbs_stats(const struct sg_dp_verbs *t, struct sg_dp_verbs_stats *st)
{
	*st = t->st;
	st->peers = t->n_peers - t->n_closed;
	st->send_free = t->n_send_free;
}

uint32_t sg_dp_verbs_msg_max(const struct sg_dp_verbs *t)
{
	return t->msg_max;
}

/* Bring a fresh RC QP to RTS towards @p r. */
static int rc_qp_rts(struct sg_dp_verbs *t, struct ibv_qp *qp, const struct sg_dp_verbs_rc_addr *r,
		     uint32_t psn, char *err, size_t errlen)
{
	static const int mask[3] = {
		IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
		IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC,
	};
	static const uint8_t zero[16];
	struct ibv_qp_attr a[3];

	memset(a, 0, sizeof(a));
	a[0].port_num = t->c.port;
	a[0].qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	a[1].path_mtu = t->path_mtu;
	a[1].dest_qp_num = r->qpn;
	a[1].rq_psn = r->psn & 0xffffff;
	a[1].max_dest_rd_atomic = 1;
	a[1].min_rnr_timer = 12;
	a[1].ah_attr.dlid = r->lid;
	a[1].ah_attr.port_num = t->c.port;
	if (t->ethernet || memcmp(r->gid, zero, 16) != 0) {
		a[1].ah_attr.is_global = 1;
		memcpy(a[1].ah_attr.grh.dgid.raw, r->gid, 16);
		a[1].ah_attr.grh.sgid_index = (uint8_t)t->gid_index;
		a[1].ah_attr.grh.hop_limit = 64;
	}
	a[2].sq_psn = psn;
	a[2].timeout = 14;
	a[2].retry_cnt = 7;
	a[2].rnr_retry = 7;
	a[2].max_rd_atomic = 1;
	return qp_to_rts(t, qp, a, mask, "RC", err, errlen);
}

int sg_dp_verbs_rc_connect(struct sg_dp_verbs *t, const struct sg_dp_verbs_rc_addr *remote,
			   struct sg_dp_verbs_rc_addr *local, char *err, size_t errlen)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = t->scq, .recv_cq = t->rcq, .srq = t->srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = t->c.send_depth, .max_send_sge = 1 },
	};
	struct sg_dp_verbs_peer_key key = { .lid = RC_KEY_LID };
	struct peer *p;
	struct ibv_qp *qp;
	uint32_t psn, id = t->n_peers, base = t->rc_next_slot;
	int rc;

	if (t->c.mode != SG_DP_VERBS_RC)
		return sg_err(err, errlen, -ENOTSUP, "verbs: rc_connect on a UD transport");
	if (remote == NULL || local == NULL || remote->slots == 0 ||
	    remote->stride < t->msg_max)
		return sg_err(err, errlen, -EINVAL,
			    "verbs: the worker's ring (%u slots of %u bytes) cannot hold the node's "
			    "%u-byte messages", remote ? remote->slots : 0,
			    remote ? remote->stride : 0, t->msg_max);
	/* A fresh peer id while there are some (the engine may still answer a closed
	 * one's rounds: those replies are dropped as tx_no_peer), then closed ones. */
	for (uint32_t i = 0; id >= t->c.max_peers && i < t->n_peers; i++)
		if (t->peers[i].qp == NULL)
			id = i;
	if (t->n_rc_free > 0)
		base = t->rc_free[t->n_rc_free - 1]; /* taken below, once connected */
	if (id >= t->c.max_peers || (t->n_rc_free == 0 &&
				     t->c.recv_depth - t->rc_next_slot < t->c.rc_slots))
		return sg_err(err, errlen, -ENOSPC,
			    "verbs: no room for another RC connection (%u connected; max_peers %u, "
			    "recv_depth %u / rc_slots %u): raise [verbs] recv_depth, or "
			    "verbs_rc_disconnect a worker",
			    t->n_peers - t->n_closed, t->c.max_peers, t->c.recv_depth,
			    t->c.rc_slots);
	qp = t->ops->create_qp(t->pd, &ia);
	if (qp == NULL)
		return sg_err(err, errlen, -(errno ? errno : ENOMEM), "ibv_create_qp (RC) failed (%s)",
			    strerror(errno ? errno : ENOMEM));
	/* Any PSN works; derive it from the QPN so that runs are reproducible. */
	psn = (qp->qp_num * 2654435761u) & 0xffffff;
	rc = rc_qp_rts(t, qp, remote, psn, err, errlen);
	key.qpn = qp->qp_num;
	if (rc == 0 && rte_hash_add_key_data(t->peer_hash, &key, (void *)(uintptr_t)id) < 0)
		rc = sg_err(err, errlen, -ENOSPC, "verbs: peer table full");
	if (rc < 0) {
		t->ops->destroy_qp(qp);
		return rc;
	}
	p = &t->peers[id];
	memset(p, 0, sizeof(*p));
	p->qp = qp;
	p->raddr = remote->addr;
	p->rkey = remote->rkey;
	p->rslots = remote->slots;
	p->rstride = remote->stride;
	p->slot_base = base;
	if (t->n_rc_free > 0)
		t->n_rc_free--;
	else
		t->rc_next_slot += t->c.rc_slots;
	if (id < t->n_peers)
		t->n_closed--;
	else
		t->n_peers++;

	memset(local, 0, sizeof(*local));
	local->qpn = qp->qp_num;
	local->psn = psn;
	local->lid = t->lid;
	memcpy(local->gid, t->gid.raw, 16);
	local->addr = (uintptr_t)(t->region + (size_t)p->slot_base * t->rstride);
	local->rkey = t->mr->rkey;
	local->slots = t->c.rc_slots;
	local->stride = t->rstride;
	return (int)id;
}

/* Wait (a bounded time) until every posted send completed, so that destroying a QP
 * loses no completion, and with it no send buffer. */
static void rc_reap_all(struct sg_dp_verbs *t)
{
	uint64_t end = rte_get_tsc_cycles() + rte_get_tsc_hz() / 100; /* 10 ms */

	flush_sends(t);
	while (t->n_send_free < t->c.send_depth && rte_get_tsc_cycles() < end)
		if (reap_sends(t) == 0)
			rte_pause();
	if (t->n_send_free < t->c.send_depth)
		SG_DP_VERBS_LOG(WARNING, "RC close: %u sends still in flight after 10 ms; their buffers "
		     "may not come back", t->c.send_depth - t->n_send_free);
}

int sg_dp_verbs_rc_disconnect(struct sg_dp_verbs *t, uint32_t peer, char *err, size_t errlen)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct sg_dp_verbs_peer_key key = { .lid = RC_KEY_LID };
	struct peer *p;

	if (t->c.mode != SG_DP_VERBS_RC)
		return sg_err(err, errlen, -ENOTSUP, "verbs: rc_disconnect on a UD transport");
	if (peer >= t->n_peers || t->peers[peer].qp == NULL)
		return sg_err(err, errlen, -ENOENT, "verbs: no RC connection with peer id %u "
			    "(%u connected)", peer, t->n_peers - t->n_closed);
	p = &t->peers[peer];
	/* Error state first: the HCA flushes what is outstanding, and the worker's writes
	 * stop landing in the slots we are about to give to someone else. */
	if (t->ops->modify_qp(p->qp, &a, IBV_QP_STATE) != 0)
		SG_DP_VERBS_LOG(WARNING, "RC close of peer %u: ibv_modify_qp(ERR) failed (%s); destroying "
		     "QP %u anyway", peer, strerror(errno), p->qp->qp_num);
	rc_reap_all(t);
	key.qpn = p->qp->qp_num;
	rte_hash_del_key(t->peer_hash, &key);
	if (t->pending_qp == p->qp)
		t->pending_qp = NULL;
	t->ops->destroy_qp(p->qp);
	p->qp = NULL;
	t->rc_free[t->n_rc_free++] = p->slot_base;
	t->n_closed++;
	t->st.rc_closed++;
	return 0;
}

/* Close the connections whose QPs went to the error state (rc_note_error()). */
static void rc_close_errored(struct sg_dp_verbs *t)
{
	struct sg_dp_verbs_peer_key key = { .lid = RC_KEY_LID };
	uint32_t n = t->n_err_qpn;
	void *data;

	t->n_err_qpn = 0;
	for (uint32_t i = 0; i < n; i++) {
		key.qpn = t->err_qpn[i];
		if (rte_hash_lookup_data(t->peer_hash, &key, &data) < 0)
			continue; /* closed already */
		SG_DP_VERBS_LOG(WARNING, "RC: QP %u of peer %u is in error: connection closed, its slots "
		     "freed (the worker connects again)", key.qpn, (uint32_t)(uintptr_t)data);
		sg_dp_verbs_rc_disconnect(t, (uint32_t)(uintptr_t)data, NULL, 0);
		/* after the close: whoever sees the count sees the peer gone */
		t->st.rc_qp_error++;
	}
}

int sg_dp_verbs_lcore_main(void *arg)
{
	struct sg_dp_verbs_loop *l = arg;
	uint64_t hz = rte_get_tsc_hz(), last_tick = 0, tick = hz / 1000 ? hz / 1000 : 1;
	unsigned int empty = 0, sleep_us = 1;

	l->rc = 0;
	while (!*l->stop && (l->max_polls == 0 || l->polls < l->max_polls)) {
		uint64_t t0 = rte_rdtsc();
		/* ns from TSC: split to avoid overflowing 64 bits */
		uint64_t now = t0 / hz * 1000000000ull + t0 % hz * 1000000000ull / hz;
		int n = sg_dp_verbs_poll(l->t, l->eng, now);

		l->polls++;
		if (n < 0) {
			l->rc = n;
			break;
		}
		if (t0 - last_tick >= tick) {
			sg_dp_engine_poll(l->eng, now);
			last_tick = t0;
		}
		if (n > 0) {
			empty = 0;
			sleep_us = 1;
			l->busy_cycles += rte_rdtsc() - t0;
			continue;
		}
		/* nothing: back off only under the sleep policy, and only after a while */
		if (l->idle_sleep_us > 0 && ++empty >= 64) {
			rte_delay_us_sleep(sleep_us);
			sleep_us = sleep_us * 2 > l->idle_sleep_us ? l->idle_sleep_us : sleep_us * 2;
		}
		l->idle_cycles += rte_rdtsc() - t0;
	}
	return l->rc;
}
