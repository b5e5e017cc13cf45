/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma sessions: partitioning, placement, chunking, credit windows,
 * retransmission with back-off, NACK handling, priority order, completion.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sg_auth.h"
#include "sg_parse.h"
#include "sigma_internal.h"
#include "sigma_placement.h"

RTE_LOG_REGISTER(sg_cli_logtype, sigma.client, INFO);

#define SG_CLI_WINDOW_MIN 16
#define SG_CLI_WINDOW_MAX 256
#define SG_CLI_DEF_RTO_US 5000
#define SG_CLI_DEF_RTO_MAX_US 200000
#define SG_CLI_DEF_RETRIES 10
#define SG_CLI_NAME_LEN 64
#define SG_CLI_DEF_FAILOVER_WAIT_US 10000000u
#define SG_CLI_DEF_RANKS_WAIT_US 60000000u

/* One outstanding chunk: a credit of its node's window. */
struct sg_cli_slot {
	struct sigma_tensor *t; /* NULL: free */
	uint32_t part;
	uint32_t chunk;     /* within the partition */
	uint32_t retries;
	uint32_t rto_us;
	uint64_t sent;      /* first sent at (the RTT sample of a RESULT without resend) */
	uint64_t tx_at;     /* last sent at */
	uint64_t seq;       /* its node's send order (first sends), from 1 */
	uint64_t deadline;  /* timeout at */
	uint64_t missing;   /* ranks the node reported missing (WORKER_LOST, WAITING) */
	uint64_t reported;  /* ... those last logged (WORKER_LOST) */
	uint64_t give_up;   /* out of retries at a node still listed: fail at (0: not yet) */
	uint32_t round;     /* the round pushed */
	bool answered;      /* the node answered it (WAITING, WORKER_LOST, NACK): alive */
	bool held;          /* the node said it holds this push (WAITING, WORKER_LOST), and
			       has not been silent through a timeout since: see likely_lost() */
	bool parked;        /* NACKed (until its RESULT): see has_credit() */
	bool resent;        /* sent more than once: its RESULT gives no round trip (Karn) */
	bool recov;         /* a failover push of the partition's last round: its RESULT is
			       not written, and no reply fails an operation */
};

struct sg_cli_node {
	char label[SG_CLI_NAME_LEN]; /* "name (addr:port)" for messages */
	char name[SG_CLI_NAME_LEN];  /* placement identity */
	uint32_t wmax;               /* its window: conf.window scaled by its weight */
	uint32_t cwnd;               /* current credit window, 1..wmax */
	uint32_t outstanding;        /* window entries taken (chunks without RESULT) */
	uint32_t parked;             /* ... of which NACKed (parked) */
	struct sg_cli_slot *slots;   /* window entries */
	uint32_t *free_slots;        /* stack of free slot indices */
	uint32_t nfree;
	bool heard;                  /* a reply of this job (right token) came from it */
	uint64_t srtt, rttvar;       /* ns: smoothed chunk round trip and its deviation, 0: none */
	uint64_t rto;                /* ns: the timeout a new chunk gets (see rto_sample()) */
	uint64_t next_seq;           /* send order of its next new chunk (from 1) */
	uint64_t top_done;           /* highest send order that got its RESULT (0: none) */
	uint64_t heard_at;           /* ns: its last reply of this job (see scan_timers()) */
	uint64_t next_probe;         /* ns: no probe before (one per round trip: scan_timers()) */
	bool warned;                 /* said it does not answer but is still listed */
	uint64_t lost_log;           /* ns: when a "waits for ranks" line of it was last logged */
	uint32_t lost_quiet;         /* ... reports not logged since (see log_waits()) */
	uint64_t lost_ranks;         /* ... and the ranks they named */
};

struct sg_cli_part {
	uint64_t byte_off;  /* in the tensor */
	uint32_t nelem;
	uint32_t nchunks;
	uint32_t first;     /* index of its first chunk in the tensor's chunk table */
	uint32_t node;
	uint16_t port_off;  /* added to the node's UDP port: 1 + reducer when steering, else 0 */
	uint32_t next;      /* next chunk never sent in this round */
	uint32_t left;      /* chunks without RESULT in this round */
	uint64_t t_start;
	uint64_t latency;
	uint32_t rnext;     /* failover: next chunk of round rround to push again (nchunks: none) */
	uint32_t rleft;     /* ... and those without RESULT (or refusal) */
	uint32_t rround;
	uint64_t moved_at;  /* failover: when it moved to its node (0: never), ns */
	/* failover: the rounds [reopen_lo, reopen_hi] its new node gets first say REOPEN
	 * (that node may hold a stale slot of this key from before it moved away) */
	uint32_t reopen_lo, reopen_hi;
	bool reopen;
};

struct sigma_tensor {
	struct sigma_session *s;
	char name[SG_CLI_NAME_LEN];
	uint32_t id;
	enum sg_dtype dtype;
	uint32_t esize;
	uint64_t nelem;
	int priority;
	uint32_t nparts;
	struct sg_cli_part *parts;
	uint32_t *slot_of;  /* per chunk: outstanding slot index + 1, or 0 */
	uint32_t round;     /* round of the current (or next) operation */
	uint32_t reopen;    /* sigma_tensor_set_round()'s round + 1: its pushes say REOPEN */
	int status;         /* 0, -EINPROGRESS or -errno */
	uint32_t cursor;    /* first partition that may have unsent chunks */
	uint64_t chunks_left;
	const uint8_t *in;
	uint8_t *out;
	uint8_t *stage[2];  /* failover: the input of rounds of each parity (a copy) */
	struct sigma_tensor *next_recov; /* tensors with failover pushes to send */
	bool in_recov;
	sigma_done_cb cb;
	void *cb_arg;
	struct sigma_tensor *next_active; /* priority-ordered list of operations in flight */
};

/*
 * auth = mac: one sequence number for every session of this process. Two sessions
 * of one rank sign under one key at once (an elastic job's old and new node sets,
 * client/sigma_elastic.h), and a node keeps one replay window per rank, below which
 * a second, unrelated sequence would fall: drawn from one counter, their numbers
 * interleave. It starts at the wall clock in nanoseconds (below 2^62 until 2116),
 * so that a rank's process started again begins above every number the one before
 * it sent (fewer than one a nanosecond), not below its window. 0: not started.
 */
static _Atomic uint64_t proc_seq;

static void proc_seq_start(void)
{
	struct timespec ts;
	uint64_t unset = 0, v;

	clock_gettime(CLOCK_REALTIME, &ts);
	v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) & ((1ull << 62) - 1);
	atomic_compare_exchange_strong(&proc_seq, &unset, v ? v : 1);
}

struct sigma_session {
	struct sigma_conf conf;
	struct sg_cli_node *nodes;
	struct sg_ctl_place_node *place;
	double *weights;
	struct sg_cli_transport *tp;
	struct sigma_tensor **tensors; /* by id */
	struct sigma_tensor *active;
	struct sigma_stats st;
	int finished;                  /* operations finished during the current poll */
	uint64_t next_scan;            /* next retransmit-timer scan */
	uint64_t last_io;              /* last packet sent or received: polling is for the
					  spin_us after it (spin_us()) */
	unsigned int ntx;
	struct sg_cli_txpkt tx[SG_CLI_BURST];
	uint8_t txhdr[SG_CLI_BURST][SG_DP_HDR_LEN];
	/* auth = mac: the signer of this rank's pushes, the key of the node's replies, and
	 * each packet's trailer */
	bool auth;
	struct sg_auth_signer signer;
	uint8_t node_key[SG_AUTH_KEY_BYTES];
	uint8_t txtrl[SG_CLI_BURST][SG_AUTH_TRAILER_BYTES];
	int job_dtype;                 /* every tensor's (sigma_open_job()), or -1: any */
	bool failover;                 /* conf.failover or conf.membership */
	bool no_node;                  /* every node lost */
	uint64_t member_gen;           /* the membership source's generation seen */
	const char **names;            /* node names, for the membership source */
	bool *alive;                   /* its answer */
	struct sigma_tensor *recov;    /* tensors with failover pushes to send */
	struct sigma_failure fail;     /* the last failure, in parts */
	char err[SIGMA_ERR_LEN];
};

static int conf_verror(const char *fmt, va_list ap)
{
	fprintf(stderr, "sigma: bad session config: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	return -EINVAL;
}

int sg_cli_conf_error(const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = conf_verror(fmt, ap);
	va_end(ap);
	return rc;
}

uint32_t sigma_window_default(unsigned int nworkers, uint32_t chunk_bytes)
{
	/* every worker's window must fit a node's socket buffer at once: 4 MB of a
	 * non-root node's 8 MB (rmem_max 4 MB, doubled), and 1 MB covers loopback's
	 * bandwidth-delay product (docs/performance.md) */
	uint64_t bytes = 1 << 20, w;

	if (nworkers == 0 || chunk_bytes == 0)
		return SG_CLI_WINDOW_MIN;
	if (bytes > (4u << 20) / nworkers)
		bytes = (4u << 20) / nworkers;
	w = bytes / chunk_bytes;
	return w < SG_CLI_WINDOW_MIN ? SG_CLI_WINDOW_MIN : w > SG_CLI_WINDOW_MAX ? SG_CLI_WINDOW_MAX :
										 (uint32_t)w;
}

/* The registrations (SG_CLI_TRANSPORT_REGISTER()); weak: a build with none links too. */
extern const struct sg_cli_transport_reg __start_sg_cli_transports[]
	__attribute__((weak, visibility("hidden")));
extern const struct sg_cli_transport_reg __stop_sg_cli_transports[]
	__attribute__((weak, visibility("hidden")));

/* The transport registered for conf.transport @p kind, or NULL. */
static const struct sg_cli_transport_reg *transport_find(int kind)
{
	for (const struct sg_cli_transport_reg *r = __start_sg_cli_transports;
	     r < __stop_sg_cli_transports; r++)
		if ((int)r->kind == kind)
			return r;
	return NULL;
}

static int check_conf(struct sigma_conf *c)
{
	const struct sg_cli_transport_reg *tr;

	if (c->nworkers == 0 || c->nworkers > SG_MAX_WORKERS)
		return sg_cli_conf_error("nworkers %u not in 1..%u", c->nworkers, SG_MAX_WORKERS);
	if (c->rank >= c->nworkers)
		return sg_cli_conf_error("rank %u >= nworkers %u", c->rank, c->nworkers);
	if (c->nodes == NULL || c->nnodes == 0 || c->nnodes > SG_MAX_NODES)
		return sg_cli_conf_error("need 1..%u nodes, got %u", SG_MAX_NODES, c->nnodes);
	if (c->partition_bytes == 0)
		c->partition_bytes = SG_PARTITION_BYTES_DEFAULT;
	if (c->chunk_bytes == 0)
		c->chunk_bytes = SG_DP_PAYLOAD_MTU1500;
	if (c->chunk_bytes % 8 || c->chunk_bytes > SG_MAX_CHUNK_BYTES)
		return sg_cli_conf_error("chunk_bytes %u: must be a multiple of 8 and <= %u",
				  c->chunk_bytes, SG_MAX_CHUNK_BYTES);
	if (c->partition_bytes < c->chunk_bytes || c->partition_bytes % 8)
		return sg_cli_conf_error("partition_bytes %u: must be a multiple of 8 and >= chunk_bytes",
				  c->partition_bytes);
	if (c->window == 0)
		c->window = sigma_window_default(c->nworkers, c->chunk_bytes);
	if (c->window > 65536)
		return sg_cli_conf_error("window %u > 65536", c->window);
	if (c->rto_us == 0)
		c->rto_us = SG_CLI_DEF_RTO_US;
	if (c->rto_max_us == 0)
		c->rto_max_us = SG_CLI_DEF_RTO_MAX_US;
	if (c->rto_max_us < c->rto_us)
		c->rto_max_us = c->rto_us;
	if (c->max_retries == 0)
		c->max_retries = SG_CLI_DEF_RETRIES;
	tr = transport_find(c->transport);
	if (tr == NULL)
		return sg_cli_conf_error("unknown transport %d", (int)c->transport);
	if (tr->check != NULL) {
		int rc = tr->check(c);

		if (rc < 0)
			return rc;
	}
	if (c->dpdk_rx_queues == 0)
		c->dpdk_rx_queues = 1;
	if (c->failover_wait_us == 0)
		c->failover_wait_us = SG_CLI_DEF_FAILOVER_WAIT_US;
	if (c->udp_gso > SIGMA_GSO_OFF)
		return sg_cli_conf_error("udp_gso %u: SIGMA_GSO_DEFAULT, _ON or _OFF", c->udp_gso);
	if (c->spin_us == 0)
		c->spin_us = SIGMA_SPIN_US_DEFAULT;
	if (c->spin_us > 1000000)
		return sg_cli_conf_error("spin_us %d: at most 1 s (negative: never)", c->spin_us);
	if (c->ranks_wait_us == 0)
		c->ranks_wait_us = SG_CLI_DEF_RANKS_WAIT_US;
	if (c->dpdk_rx_queues > SIGMA_DPDK_MAX_RXQ)
		return sg_cli_conf_error("dpdk_rx_queues %u not in 1..%u", c->dpdk_rx_queues,
				  SIGMA_DPDK_MAX_RXQ);
	for (unsigned int i = 0; i < c->nnodes; i++) {
		uint32_t a;

		if (sg_ipv4_parse(c->nodes[i].addr, &a) < 0)
			return sg_cli_conf_error("node %u: address '%s' is not an IPv4 address", i,
					  c->nodes[i].addr ? c->nodes[i].addr : "(null)");
		if (c->nodes[i].gbps < 0 || c->nodes[i].kind > SG_NODE_GPU)
			return sg_cli_conf_error("node %u: bad kind or bandwidth", i);
		if (c->steer_reducers > SG_DP_STEER_PORTS)
			return sg_cli_conf_error("steer_reducers %u: at most %u (a node's reducer ports)",
					  c->steer_reducers, SG_DP_STEER_PORTS);
		if (sg_cli_node_port(&c->nodes[i]) + c->steer_reducers > UINT16_MAX)
			return sg_cli_conf_error("node %u: UDP port + steer_reducers %u passes 65535", i,
					  c->steer_reducers);
	}
	return 0;
}

/*
 * Each node's window: conf.window for the node of the largest placement weight,
 * in proportion for the others (at least 1). A worker's pushes to all nodes
 * share its link: with equal windows each node got an equal share of it, and
 * a node that sums three times the bytes of another finished last while the
 * others' links idled (docs/emulated-cluster.md). Every worker has the same
 * weights, so every worker gives a node the same window (docs/client.md).
 */
static void node_windows(struct sigma_session *s)
{
	double top = 0;

	for (unsigned int i = 0; i < s->conf.nnodes; i++)
		top = s->weights[i] > top ? s->weights[i] : top;
	for (unsigned int i = 0; i < s->conf.nnodes; i++) {
		double w = top > 0 ? s->conf.window * s->weights[i] / top + 0.5 : 1;

		s->nodes[i].wmax = w < 1 ? 1 : w > s->conf.window ? s->conf.window : (uint32_t)w;
		s->nodes[i].cwnd = s->nodes[i].wmax;
	}
}

static int setup_nodes(struct sigma_session *s)
{
	const struct sigma_conf *c = &s->conf;
	int rc;

	s->nodes = calloc(c->nnodes, sizeof(*s->nodes));
	s->place = calloc(c->nnodes, sizeof(*s->place));
	s->weights = calloc(c->nnodes, sizeof(*s->weights));
	s->names = calloc(c->nnodes, sizeof(*s->names));
	s->alive = calloc(c->nnodes, sizeof(*s->alive));
	if (s->nodes == NULL || s->place == NULL || s->weights == NULL || s->names == NULL ||
	    s->alive == NULL)
		return -ENOMEM;
	for (unsigned int i = 0; i < c->nnodes; i++) {
		const struct sigma_node *cn = &c->nodes[i];
		struct sg_cli_node *n = &s->nodes[i];
		unsigned int port = sg_cli_node_port(cn);

		snprintf(n->name, sizeof(n->name), "%s:%u", cn->addr, port);
		snprintf(n->label, sizeof(n->label), "%s", n->name);
		if (cn->name != NULL) {
			snprintf(n->name, sizeof(n->name), "%s", cn->name);
			snprintf(n->label, sizeof(n->label), "%.24s (%.16s:%u)", cn->name,
				 cn->addr, port);
		}
		n->rto = c->rto_us * 1000ull;
		n->slots = calloc(c->window, sizeof(*n->slots));
		n->free_slots = malloc(c->window * sizeof(*n->free_slots));
		if (n->slots == NULL || n->free_slots == NULL)
			return -ENOMEM;
		for (uint32_t k = 0; k < c->window; k++)
			n->free_slots[k] = c->window - 1 - k;
		n->nfree = c->window;
		s->place[i].name = n->name;
		s->names[i] = n->name;
		s->place[i].kind = cn->kind;
		s->place[i].gbps = cn->gbps > 0 ? cn->gbps : 1.0;
		s->place[i].alive = true;
	}
	if (c->weights != NULL) {
		double sum = 0;

		for (unsigned int i = 0; i < c->nnodes; i++) {
			if (!(c->weights[i] >= 0))
				return sg_cli_conf_error("weight of node %u is not >= 0", i);
			s->weights[i] = c->weights[i];
			sum += c->weights[i];
		}
		if (!(sum > 0))
			return sg_cli_conf_error("every placement weight is 0");
	} else {
		rc = sg_ctl_place_weights(s->place, c->nnodes, s->weights);
		if (rc < 0)
			return sg_cli_conf_error("placement weights: %s", strerror(-rc));
	}
	node_windows(s);
	return 0;
}

struct sigma_session *sigma_open(const struct sigma_conf *conf)
{
	const struct sg_cli_transport_reg *tr;
	struct sigma_session *s;
	int rc;

	if (conf == NULL) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	/* Validate against the caller's arrays; keep our own copies after. */
	{
		struct sigma_conf tmp = *conf;

		rc = check_conf(&tmp);
		if (rc < 0)
			goto fail;
		s->conf = tmp;
	}
	rc = setup_nodes(s);
	if (rc < 0)
		goto fail;
	s->job_dtype = -1;
	s->failover = s->conf.failover || s->conf.membership != NULL;
	if (s->conf.auth_keys != NULL) {
		s->auth = sg_auth_signer_init(&s->signer, s->conf.auth_keys,
					      s->conf.auth_key_id) == 0;
		proc_seq_start();
		memcpy(s->node_key, s->conf.auth_keys + SG_AUTH_KEY_BYTES, SG_AUTH_KEY_BYTES);
		s->conf.auth_keys = NULL; /* the caller's keys are not kept */
	}
	s->conf.nodes = NULL; /* the caller's array is not kept */
	s->conf.weights = NULL;
	s->tensors = calloc(SG_MAX_TENSORS, sizeof(*s->tensors));
	if (s->tensors == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	{
		/* The checked config with defaults applied, and the caller's nodes. */
		struct sigma_conf full = s->conf;

		full.nodes = conf->nodes;
		tr = transport_find(full.transport); /* check_conf() found it */
		s->tp = tr->create(&full);
		s->conf.shm_paths = NULL; /* used at open only */
	}
	if (s->tp == NULL) {
		rc = -errno;
		fprintf(stderr, "sigma: cannot open the %s transport: %s\n", tr->name,
			strerror(-rc));
		goto fail;
	}
	return s;
fail:
	sigma_close(s);
	errno = -rc;
	return NULL;
}

static void tensor_free(struct sigma_tensor *t)
{
	if (t == NULL)
		return;
	free(t->parts);
	free(t->slot_of);
	free(t->stage[0]);
	free(t->stage[1]);
	free(t);
}

void sigma_close(struct sigma_session *s)
{
	if (s == NULL)
		return;
	if (s->tp != NULL)
		s->tp->destroy(s->tp);
	if (s->tensors != NULL)
		for (uint32_t i = 0; i < SG_MAX_TENSORS; i++)
			tensor_free(s->tensors[i]);
	free(s->tensors);
	if (s->nodes != NULL)
		for (unsigned int i = 0; i < s->conf.nnodes; i++) {
			free(s->nodes[i].slots);
			free(s->nodes[i].free_slots);
		}
	free(s->nodes);
	free(s->place);
	free(s->weights);
	free(s->names);
	free(s->alive);
	free(s);
}

struct sigma_tensor *sigma_tensor_register(struct sigma_session *s, const char *name,
					   uint32_t id, enum sg_dtype dtype, uint64_t nelem,
					   int priority)
{
	struct sigma_tensor *t;
	uint64_t part_elems, nparts, nchunks = 0;
	uint32_t esize;
	int err = EINVAL;

	if (s == NULL || id >= SG_MAX_TENSORS || !sg_dtype_valid(dtype) || nelem == 0)
		goto fail;
	if (s->job_dtype >= 0 && (int)dtype != s->job_dtype) {
		fprintf(stderr, "sigma: tensor '%s' (id %u) is %s, but the job sums %s: register "
			"it as %s, or create a job of %s\n", name ? name : "", id, sg_dtype_name(dtype),
			sg_dtype_name((enum sg_dtype)s->job_dtype),
			sg_dtype_name((enum sg_dtype)s->job_dtype), sg_dtype_name(dtype));
		goto fail;
	}
	esize = (uint32_t)sg_dtype_size(dtype);
	if (s->conf.chunk_bytes % esize || s->conf.partition_bytes % esize)
		goto fail;
	if (s->tensors[id] != NULL) {
		err = EEXIST;
		goto fail;
	}
	part_elems = s->conf.partition_bytes / esize;
	nparts = (nelem + part_elems - 1) / part_elems;
	if (nparts > SG_MAX_PARTS) {
		err = E2BIG;
		goto fail;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->parts = calloc(nparts, sizeof(*t->parts));
	if (t->parts == NULL) {
		tensor_free(t);
		return NULL;
	}
	t->s = s;
	if (name != NULL)
		snprintf(t->name, sizeof(t->name), "%s", name);
	else
		snprintf(t->name, sizeof(t->name), "tensor%u", id);
	t->id = id;
	t->dtype = dtype;
	t->esize = esize;
	t->nelem = nelem;
	t->priority = priority;
	t->nparts = (uint32_t)nparts;
	t->round = s->conf.first_round;
	for (uint32_t p = 0; p < t->nparts; p++) {
		struct sg_cli_part *pt = &t->parts[p];
		uint64_t first = p * part_elems;
		uint64_t n = nelem - first < part_elems ? nelem - first : part_elems;
		int node = sg_ctl_place_key(s->place, s->weights, s->conf.nnodes,
					    sg_ctl_partition_key(id, p));

		pt->byte_off = first * esize;
		pt->nelem = (uint32_t)n;
		pt->nchunks = sg_dp_chunk_count(pt->nelem, dtype, s->conf.chunk_bytes);
		pt->first = (uint32_t)nchunks;
		pt->node = node < 0 ? 0 : (uint32_t)node;
		pt->rnext = pt->nchunks;
		/* the node's reducer for this key under its default keymap (sg_dp_proto.h) */
		if (s->conf.steer_reducers)
			pt->port_off = (uint16_t)(1 + sg_dp_steer_reducer(s->conf.job,
				sg_wire_key(id, p), s->conf.steer_reducers));
		nchunks += pt->nchunks;
	}
	t->slot_of = calloc(nchunks, sizeof(*t->slot_of));
	if (s->failover) {
		t->stage[0] = malloc(nelem * esize);
		t->stage[1] = malloc(nelem * esize);
	}
	if (t->slot_of == NULL || (s->failover && (t->stage[0] == NULL || t->stage[1] == NULL))) {
		tensor_free(t);
		return NULL;
	}
	s->tensors[id] = t;
	return t;
fail:
	errno = err;
	return NULL;
}

int sigma_push_pull(struct sigma_tensor *t, const void *in, void *out, sigma_done_cb cb,
		    void *arg)
{
	struct sigma_tensor **pp;

	if (t == NULL || in == NULL || out == NULL)
		return -EINVAL;
	if (t->status == -EINPROGRESS)
		return -EBUSY;
	if (t->s->no_node)
		return -EHOSTDOWN;
	if (t->s->failover) {
		/* the copy a lost node's partitions are pushed again from, whatever the caller does */
		memcpy(t->stage[t->round & 1], in, t->nelem * t->esize);
		in = t->stage[t->round & 1];
	}
	t->in = in;
	t->out = out;
	t->cb = cb;
	t->cb_arg = arg;
	t->status = -EINPROGRESS;
	t->cursor = 0;
	t->chunks_left = 0;
	for (uint32_t p = 0; p < t->nparts; p++) {
		t->parts[p].next = 0;
		t->parts[p].left = t->parts[p].nchunks;
		t->parts[p].latency = 0;
		t->chunks_left += t->parts[p].nchunks;
	}
	/* Lower priority values go first; equal ones in arrival order. */
	for (pp = &t->s->active; *pp != NULL && (*pp)->priority <= t->priority;
	     pp = &(*pp)->next_active)
		;
	t->next_active = *pp;
	*pp = t;
	return 0;
}

static void unlink_active(struct sigma_tensor *t)
{
	for (struct sigma_tensor **pp = &t->s->active; *pp != NULL; pp = &(*pp)->next_active)
		if (*pp == t) {
			*pp = t->next_active;
			break;
		}
	t->next_active = NULL;
}

static void slot_free(struct sigma_session *s, uint32_t node, uint32_t idx)
{
	struct sg_cli_node *n = &s->nodes[node];
	struct sg_cli_slot *sl = &n->slots[idx];

	sl->t->slot_of[sl->t->parts[sl->part].first + sl->chunk] = 0;
	sl->t = NULL;
	n->free_slots[n->nfree++] = idx;
	n->outstanding--;
	if (sl->parked)
		n->parked--;
}

/* End the tensor's operation with @p status; the round advances either way. */
static void finish(struct sigma_tensor *t, int status)
{
	struct sigma_session *s = t->s;

	if (status < 0) {
		for (uint32_t p = 0; p < t->nparts; p++) {
			const struct sg_cli_part *pt = &t->parts[p];

			for (uint32_t c = 0; c < pt->nchunks; c++) {
				uint32_t idx = t->slot_of[pt->first + c];

				if (idx && !s->nodes[pt->node].slots[idx - 1].recov)
					slot_free(s, pt->node, idx - 1);
			}
		}
		s->st.ops_failed++;
	} else {
		s->st.ops_done++;
	}
	unlink_active(t);
	t->status = status;
	t->round++;
	s->finished++;
	if (t->cb != NULL)
		t->cb(t->cb_arg, t, status);
}

/* The transport's count of datagrams dropped before they were read (0: none it can tell). */
static uint64_t rx_dropped(const struct sigma_session *s)
{
	return s->tp->rx_dropped != NULL ? s->tp->rx_dropped(s->tp) : 0;
}

/*
 * Fail the chunk's operation: "<why> from node N for tensor T key K chunk C round R[: hint]",
 * and its parts for sigma_last_failure(), with @p kind.
 */
static void fail_chunk_as(struct sigma_session *s, uint32_t node, uint32_t idx, int status,
			  enum sigma_fail_kind kind, const char *why, const char *hint)
{
	const struct sg_cli_slot *sl = &s->nodes[node].slots[idx];
	struct sigma_tensor *t = sl->t;
	uint64_t drops;
	int len;

	s->fail = (struct sigma_failure){.status = status, .kind = kind, .node = (int)node,
					 .key = sg_wire_key(t->id, sl->part), .chunk = sl->chunk,
					 .round = t->round, .missing = sl->missing,
					 .waited_us = (sg_cli_now_ns() - sl->sent) / 1000};

	len = snprintf(s->err, sizeof(s->err),
		       "%s from node %s for tensor '%s' key 0x%08x chunk %u round %u", why,
		       s->nodes[node].label, t->name, sg_wire_key(t->id, sl->part), sl->chunk,
		       t->round);
	if (sl->missing && len > 0 && (size_t)len < sizeof(s->err))
		len += snprintf(s->err + len, sizeof(s->err) - len, " (node reports ranks 0x%"
				PRIx64 " missing)", sl->missing);
	if (hint != NULL && len > 0 && (size_t)len < sizeof(s->err))
		len += snprintf(s->err + len, sizeof(s->err) - len, ": %s", hint);
	/* replies may have died here, not on the way: say so where the failure is read */
	drops = kind == SIGMA_FAIL_NODE_SILENT ? rx_dropped(s) : 0;
	if (drops && len > 0 && (size_t)len < sizeof(s->err))
		snprintf(s->err + len, sizeof(s->err) - len, " (this worker's socket overflowed: "
			 "the kernel dropped %" PRIu64 " datagrams before it read them)", drops);
	SG_CLI_LOG(ERR, "%s", s->err);
	finish(t, status);
}

/* fail_chunk_as() for a refusal (an ERROR of the node). */
static void fail_chunk(struct sigma_session *s, uint32_t node, uint32_t idx, int status,
		       const char *why, const char *hint)
{
	fail_chunk_as(s, node, idx, status, SIGMA_FAIL_REFUSED, why, hint);
}

static void flush(struct sigma_session *s)
{
	int r;

	if (s->ntx == 0)
		return;
	r = s->tp->send(s->tp, s->tx, s->ntx);
	if (r > 0)
		s->st.tx_packets += (uint64_t)r;
	/* an error of the transport loses the whole burst, as a refused destination does */
	s->st.tx_dropped += r < 0 ? s->ntx : s->ntx - (unsigned int)r;
	s->ntx = 0;
	s->last_io = sg_cli_now_ns();
}

/* The input of @p t's round @p round: the failover copy, or the caller's buffer. */
static const uint8_t *round_input(const struct sigma_tensor *t, uint32_t round)
{
	return t->s->failover ? t->stage[round & 1] : t->in;
}

/* Queue the PUSH of one chunk of round @p round (its slot is already taken). */
static void queue_push(struct sigma_session *s, const struct sigma_tensor *t, uint32_t part,
		       uint32_t chunk, uint32_t round, bool retrans)
{
	const struct sg_cli_part *pt = &t->parts[part];
	uint32_t first = 0, n = 0, off = 0;
	struct sg_dp_msg m;
	struct sg_cli_txpkt *p;

	/* chunk < nchunks and chunk_bytes % esize == 0 were checked at registration */
	sg_dp_chunk_span(pt->nelem, t->dtype, s->conf.chunk_bytes, chunk, &first, &n, &off);
	m = (struct sg_dp_msg){
		.type = SG_DP_T_PUSH,
		.flags = (retrans ? SG_DP_F_RETRANS : 0) | (s->auth ? SG_DP_F_MAC : 0) |
			 ((t->reopen == round + 1u && t->reopen != 0) ||
			  (pt->reopen && (int32_t)(round - pt->reopen_lo) >= 0 &&
			   (int32_t)(pt->reopen_hi - round) >= 0) ? SG_DP_F_REOPEN : 0),
		.dtype = (uint8_t)t->dtype,
		.job = s->conf.job,
		.rank = s->conf.rank,
		.token = s->conf.token,
		.key = sg_wire_key(t->id, part),
		.chunk = chunk,
		.nchunks = pt->nchunks,
		.round = round,
		.nelem = n,
		.offset = off,
	};

	if (s->ntx == SG_CLI_BURST)
		flush(s);
	p = &s->tx[s->ntx];
	sg_dp_build_hdr(s->txhdr[s->ntx], &m);
	p->hdr = s->txhdr[s->ntx];
	p->payload = round_input(t, round) + pt->byte_off + (uint64_t)first * t->esize;
	p->payload_len = n * t->esize;
	p->trailer = NULL;
	if (s->auth) {
		s->signer.seq = atomic_fetch_add_explicit(&proc_seq, 1, memory_order_relaxed);
		sg_auth_sign_parts(&s->signer, p->hdr, SG_DP_HDR_LEN, p->payload, p->payload_len,
				   s->txtrl[s->ntx]);
		p->trailer = s->txtrl[s->ntx];
	}
	p->node = pt->node;
	p->port_off = pt->port_off;
	s->ntx++;
}

/*
 * Credit for one more new chunk to node @p n: the congestion window has room,
 * or every chunk we have out there was NACKed (parked). In the second case
 * one new chunk goes out at a time, as a probe: the chunk the node is short
 * of may be the next one we have not sent (the other ranks filled the node's
 * slots-in-flight with later chunks, so all of ours are NACKed), and waiting
 * for credit that only a RESULT can give would stall every rank for good.
 * The node's window (wmax) still bounds the chunks without RESULT: since every
 * rank has the same window for the node and sends in the same order, the rank
 * furthest behind can always reach the chunks the others wait in
 * (docs/client.md).
 */
static bool has_credit(const struct sg_cli_node *n)
{
	return n->outstanding < n->wmax &&
	       (n->outstanding < n->cwnd || n->outstanding == n->parked);
}

/* Take a window entry of node @p n for chunk @p chunk of @p t's partition @p p, and queue it. */
static void take_slot(struct sigma_session *s, struct sigma_tensor *t, uint32_t p,
		      uint32_t chunk, uint32_t round, bool recov, uint64_t now)
{
	struct sg_cli_node *n = &s->nodes[t->parts[p].node];
	uint32_t idx = n->free_slots[--n->nfree];

	n->slots[idx] = (struct sg_cli_slot){.t = t, .part = p, .chunk = chunk, .round = round,
					     .recov = recov, .rto_us = (uint32_t)(n->rto / 1000),
					     .sent = now, .tx_at = now, .seq = ++n->next_seq,
					     .deadline = now + n->rto};
	t->slot_of[t->parts[p].first + chunk] = idx + 1;
	n->outstanding++;
	queue_push(s, t, p, chunk, round, false);
}

/*
 * Failover pushes: a moved partition's last round, sent before its current
 * round (whose pushes wait for them: a new key's first round on the survivor
 * must be the older one, or ranks still waiting for it would never get it).
 */
static void fill_recovery(struct sigma_session *s, uint64_t now)
{
	for (struct sigma_tensor **tp = &s->recov; *tp != NULL;) {
		struct sigma_tensor *t = *tp;
		bool pending = false;

		for (uint32_t p = 0; p < t->nparts; p++) {
			struct sg_cli_part *pt = &t->parts[p];

			while (pt->rnext < pt->nchunks && has_credit(&s->nodes[pt->node])) {
				s->st.recovery_pushes++;
				take_slot(s, t, p, pt->rnext++, pt->rround, true, now);
			}
			pending |= pt->rnext < pt->nchunks;
		}
		if (pending) {
			tp = &t->next_recov;
		} else {
			*tp = t->next_recov;
			t->in_recov = false;
		}
	}
}

_Static_assert(SG_MAX_NODES <= 64, "fill() keeps a bit per node");

/*
 * Send new chunks while windows have credit, tensors in priority order.
 *
 * A partition whose failover pushes (its last round again) are not all
 * answered holds back its node's later chunks too: every rank must send a
 * node its chunks in one order (docs/client.md). A rank that had lost one
 * such RESULT used to skip the partition and fill its window with the next
 * ones, while another rank filled its window with the skipped one: each then
 * waited for chunks the other had no credit to send (test_client_nack).
 */
static void fill(struct sigma_session *s, uint64_t now)
{
	uint64_t held = 0; /* nodes whose next chunks wait for a partition's failover pushes */

	if (s->recov != NULL)
		fill_recovery(s, now);
	for (struct sigma_tensor *t = s->active; t != NULL; t = t->next_active) {
		bool all_sent = true;

		for (uint32_t p = t->cursor; p < t->nparts; p++) {
			struct sg_cli_part *pt = &t->parts[p];
			struct sg_cli_node *n = &s->nodes[pt->node];

			if (pt->rleft != 0)
				held |= 1ull << pt->node;
			while (!(held & (1ull << pt->node)) && pt->next < pt->nchunks &&
			       has_credit(n)) {
				if (pt->next == 0)
					pt->t_start = now;
				take_slot(s, t, p, pt->next, t->round, false, now);
				pt->next++;
			}
			if (pt->next < pt->nchunks)
				all_sent = false;
			else if (all_sent)
				t->cursor = p + 1;
		}
	}
}

/* A failover push is over (its RESULT, a refusal, or out of retries): no operation depends on it. */
static void recov_done(struct sigma_session *s, uint32_t node, uint32_t idx)
{
	struct sg_cli_slot *sl = &s->nodes[node].slots[idx];

	sl->t->parts[sl->part].rleft--;
	slot_free(s, node, idx);
}

/* At most one "waits for ranks" line per node per second: the rest are summed up. */
#define SG_CLI_WAIT_LOG_NS 1000000000ull

/*
 * The node reports a chunk waiting for ranks (WORKER_LOST). With skewed ranks every
 * outstanding chunk gets one, a window's worth per node: log the first, count the
 * others and say how many once the second has passed (log_waits_flush()).
 */
static void log_waits(struct sigma_session *s, uint32_t node, const struct sg_dp_msg *m,
		      uint64_t missing, uint64_t now)
{
	struct sg_cli_node *n = &s->nodes[node];

	if (n->lost_log != 0 && now - n->lost_log < SG_CLI_WAIT_LOG_NS) {
		n->lost_quiet++;
		n->lost_ranks |= missing;
		return;
	}
	n->lost_log = now;
	SG_CLI_LOG(WARNING, "node %s: key 0x%08x chunk %u round %u waits for ranks 0x%" PRIx64,
		   n->label, m->key, m->chunk, m->round, missing);
}

/* Say how many reports log_waits() kept quiet, once their second is over. */
static void log_waits_flush(struct sigma_session *s, uint32_t node, uint64_t now)
{
	struct sg_cli_node *n = &s->nodes[node];

	if (n->lost_quiet == 0 || now - n->lost_log < SG_CLI_WAIT_LOG_NS)
		return;
	SG_CLI_LOG(WARNING, "node %s: %u more chunk(s) wait for ranks 0x%" PRIx64 " (reports of "
		   "the last %.1f s; one line per node and second)", n->label, n->lost_quiet,
		   n->lost_ranks, (double)(now - n->lost_log) / 1e9);
	n->lost_log = now;
	n->lost_quiet = 0;
	n->lost_ranks = 0;
}

/*
 * The node answered chunk @p sl (ERROR WAITING or WORKER_LOST, naming @p missing; or a
 * NACK, @p missing 0): it is alive, so its silence budget (max_retries) starts again;
 * the time since the first send (ranks_wait_us) goes on.
 */
static void note_alive(struct sg_cli_slot *sl, uint64_t missing)
{
	sl->answered = true;
	sl->retries = 0;
	sl->give_up = 0;
	if (missing != 0) {
		sl->missing = missing;
		sl->held = true;
	}
}

/* Slot @p idx of node @p node waited ranks_wait_us with its node answering: fail it. */
static void ranks_missing(struct sigma_session *s, uint32_t node, uint32_t idx, uint64_t now)
{
	const struct sg_cli_slot *sl = &s->nodes[node].slots[idx];
	char why[96], hint[320];

	if (sl->recov) { /* a failover push: nobody's operation waits for it */
		recov_done(s, node, idx);
		return;
	}
	snprintf(why, sizeof(why), "no RESULT within %.1f s, ranks missing",
		 (double)(now - sl->sent) / 1e9);
	if (sl->missing)
		snprintf(hint, sizeof(hint), "the node is alive and holds this rank's push, but "
			 "the ranks named did not push this round within ranks_wait_us (%.1f s): "
			 "they are dead, stuck or far behind (raise ranks_wait_us for longer "
			 "pauses)", s->conf.ranks_wait_us / 1e6);
	else if (!sl->parked)
		snprintf(hint, sizeof(hint), "the node is alive (it answers this session) but "
			 "the chunk had no RESULT within ranks_wait_us (%.1f s): other ranks are "
			 "dead, stuck or far behind (raise ranks_wait_us for longer pauses)",
			 s->conf.ranks_wait_us / 1e6);
	else
		snprintf(hint, sizeof(hint), "the node is alive but kept refusing the push for "
			 "want of a free slot or buffer (NACK) for ranks_wait_us (%.1f s): its slots "
			 "are held by chunks that wait for other ranks", s->conf.ranks_wait_us / 1e6);
	fail_chunk_as(s, node, idx, -ETIMEDOUT, SIGMA_FAIL_RANKS_MISSING, why, hint);
}

static int check_membership(struct sigma_session *s);

/*
 * Evidence that chunk @p sl of node @p n was lost, not waiting for a rank that
 * is behind: it was NACKed, or a chunk first sent after it got its RESULT (every
 * rank sends a node its chunks in the same order, so every rank had pushed this
 * one before that one). Not when the node said it holds this push (ERROR WAITING
 * or WORKER_LOST for its round: @c held): a later RESULT then shows that some
 * other rank's push of it was lost, and only that rank's resend helps. Every rank
 * used to resend such a chunk at each of its timeouts until the one that lost
 * it got through: N - 1 useless resends per back-off, into the queue that had
 * just overflowed (docs/client.md, "Retransmission").
 */
static bool likely_lost(const struct sg_cli_node *n, const struct sg_cli_slot *sl)
{
	return !sl->held && (sl->parked || sl->seq < n->top_done);
}

/* The node said nothing to this session since chunk @p sl's timer started. */
static bool silent_since(const struct sg_cli_node *n, const struct sg_cli_slot *sl)
{
	return n->heard_at < sl->deadline - sl->rto_us * 1000ull;
}

/* Probe order (pick_probe()): chunks not known to be held first, then the last sent. */
static bool probe_before(const struct sg_cli_slot *a, const struct sg_cli_slot *b)
{
	if ((a->missing == 0) != (b->missing == 0))
		return a->missing == 0;
	return a->seq > b->seq;
}

/*
 * The probe of node @p n's timeouts: of its expired chunks without evidence of
 * a loss, the last sent. Its RESULT is evidence for all the others. Chunks the
 * node said it holds (ERROR WAITING or WORKER_LOST: @c missing) come last:
 * after a failover ranks may send a node their chunks in different orders, and
 * rank A probing chunk Y, which the node holds, while its push of X was lost,
 * and rank B the reverse, waited for each other for good. A held chunk is a
 * probe only if the node has said nothing since its timer started: the node's
 * answer to it (WAITING again) then keeps its silence budget (max_retries) from
 * running out while a rank is paused; a node that answers anything meanwhile
 * is alive, and a resend would carry nothing it lacks. @return its index, or
 * conf.window if none.
 */
static uint32_t pick_probe(const struct sigma_session *s, const struct sg_cli_node *n,
			   uint64_t now)
{
	uint32_t probe = s->conf.window;

	for (uint32_t k = 0; k < s->conf.window; k++) {
		const struct sg_cli_slot *sl = &n->slots[k];

		if (sl->t == NULL || sl->deadline > now || likely_lost(n, sl) ||
		    (sl->held && !silent_since(n, sl)))
			continue;
		if (probe == s->conf.window || probe_before(sl, &n->slots[probe]))
			probe = k;
	}
	return probe;
}

/*
 * The time between two probes of a node: its smoothed round trip, within
 * [rto_us, rto_max_us]. A probe per timer scan (every rto_us / 4) went out
 * whenever the round trip exceeded the chunks' timeouts, as behind a deep
 * link queue (its RTT beyond rto_max_us), and most met a RESULT already on
 * its way: the node sent that RESULT again, into the same queue. One probe's
 * answer arrives within a round trip; until it does, another tells nothing
 * new. The cap keeps a paused rank's node answering within every chunk's
 * timeout, as the silence budget (max_retries) needs.
 */
static uint64_t probe_gap(const struct sigma_conf *c, const struct sg_cli_node *n)
{
	uint64_t lo = c->rto_us * 1000ull, hi = c->rto_max_us * 1000ull;

	return n->srtt < lo ? lo : n->srtt > hi ? hi : n->srtt;
}

static void resend(struct sigma_session *s, struct sg_cli_slot *sl, uint64_t now)
{
	s->st.retransmits++;
	sl->resent = true;
	sl->tx_at = now;
	queue_push(s, sl->t, sl->part, sl->chunk, sl->round, true);
}

/*
 * Chunks whose timer expired: resend, or fail those out of retries.
 *
 * A chunk's RESULT waits for every rank's push of it, so a timeout alone does
 * not tell a lost packet from a rank that is behind (descheduled, or starting
 * later): a stalled rank used to make every other rank resend its whole window
 * at each back-off, thousands of datagrams the node reads only to drop as
 * duplicates (docs/performance.md). So an expired chunk is resent only with
 * evidence of a loss (likely_lost(), as TCP infers one from a SACK beyond a
 * hole); the others count the timeout (retries, back-off) and wait, except one
 * per node and round trip (probe_gap()), the last sent, which goes again as a probe: its RESULT
 * (the rank behind caught up, or the probe replaced a lost push) is evidence
 * for every chunk sent before it, and a rank that catches up pushes those
 * first. A scan that finds a loss also halves the node's congestion window (it
 * may be a full socket buffer); timeouts without one do not (a rank that is
 * ahead would only send later, and its round trips would mix waits with none).
 * Failing after max_retries timeouts is as before, resent or not.
 */
static void scan_timers(struct sigma_session *s, uint64_t now)
{
	for (unsigned int i = 0; i < s->conf.nnodes; i++) {
		struct sg_cli_node *n = &s->nodes[i];
		uint32_t probe = n->outstanding && now >= n->next_probe ? pick_probe(s, n, now) :
								    s->conf.window;
		bool lost = false, resent, silent;

		log_waits_flush(s, i, now);
		for (uint32_t k = 0; k < s->conf.window && n->outstanding; k++) {
			struct sg_cli_slot *sl = &n->slots[k];

			if (sl->t == NULL || sl->deadline > now)
				continue;
			if (sl->answered && now - sl->sent >= s->conf.ranks_wait_us * 1000ull) {
				ranks_missing(s, i, k, now);
				continue;
			}
			if (sl->retries >= s->conf.max_retries && s->conf.membership != NULL &&
			    sl->give_up == 0) {
				/* look now: the node may be gone, its keys moved (this slot too) */
				check_membership(s);
				if (sl->t == NULL)
					continue;
				sl->give_up = now + s->conf.failover_wait_us * 1000ull;
				if (!n->warned)
					SG_CLI_LOG(WARNING, "node %s does not answer, but the membership "
						   "still lists it: resending for up to %u ms more, "
						   "until its lease expires", n->label,
						   s->conf.failover_wait_us / 1000);
				n->warned = true;
			}
			if (sl->retries >= s->conf.max_retries && sl->recov &&
			    (sl->give_up == 0 || now >= sl->give_up)) {
				recov_done(s, i, k);
				continue;
			}
			if (sl->retries >= s->conf.max_retries && (sl->give_up == 0 || now >= sl->give_up)) {
				char why[64];

				snprintf(why, sizeof(why), "no RESULT after %u retries",
					 sl->retries);
				/* a node drops pushes without its job's id and token unanswered */
				fail_chunk_as(s, i, k, -ETIMEDOUT, SIGMA_FAIL_NODE_SILENT, why,
					      n->heard ? "the node answered none of them (node "
					      "silent): it is down, or unreachable from here" :
					      "no reply of this job ever came from that node: check "
					      "that the job exists there with this job id and token "
					      "(the node drops other pushes without a word), and that "
					      "its address and UDP port are right");
				continue;
			}
			resent = likely_lost(n, sl) || k == probe;
			silent = silent_since(n, sl);
			/*
			 * max_retries counts timeouts in which the node said nothing to this
			 * session: a node that replied since the chunk's timer started is
			 * alive, and the chunk counts as answered (ranks_wait_us bounds it),
			 * whether it was held back or resent. Counting a chunk's own
			 * unanswered resends instead failed live nodes as silent on a
			 * loaded machine (py_torch under two CPU hogs: 3 runs of 3). A dead
			 * node replies nothing, so every chunk's count grows as before.
			 */
			if (!silent)
				note_alive(sl, 0);
			else if (sl->retries < s->conf.max_retries)
				sl->retries++;
			sl->rto_us = sl->rto_us * 2 > s->conf.rto_max_us ? s->conf.rto_max_us :
									   sl->rto_us * 2;
			sl->deadline = now + sl->rto_us * 1000ull;
			/* the back-off holds for new chunks too, until a round trip is measured */
			if (sl->rto_us * 1000ull > n->rto)
				n->rto = sl->rto_us * 1000ull;
			lost |= !sl->parked && likely_lost(n, sl);
			if (resent)
				resend(s, sl, now);
			else
				s->st.timeouts_held++;
			if (k == probe)
				n->next_probe = now + probe_gap(&s->conf, n);
			/* a node silent through a timeout may have restarted without the
			 * pushes it said it held: the usual evidence decides again */
			if (silent)
				sl->held = false;
		}
		if (lost)
			n->cwnd = n->cwnd > 1 ? n->cwnd / 2 : 1;
	}
}

/* Find the outstanding slot a node reply is about; NULL if none (stale or bad). */
static struct sg_cli_slot *match(struct sigma_session *s, const struct sg_dp_msg *m,
				 uint64_t now, uint32_t *node, uint32_t *idx)
{
	struct sigma_tensor *t = s->tensors[m->key >> 16];
	const struct sg_cli_part *pt;
	uint32_t slot;

	if (t == NULL || (m->key & 0xffff) >= t->nparts) {
		s->st.rx_bad++;
		return NULL;
	}
	pt = &t->parts[m->key & 0xffff];
	if (m->chunk >= pt->nchunks || m->nchunks != pt->nchunks) {
		s->st.rx_bad++;
		return NULL;
	}
	s->nodes[pt->node].heard = true;
	s->nodes[pt->node].heard_at = now;
	slot = t->slot_of[pt->first + m->chunk];
	if (slot == 0 || m->round != s->nodes[pt->node].slots[slot - 1].round ||
	    (t->status != -EINPROGRESS && !s->nodes[pt->node].slots[slot - 1].recov)) {
		s->st.rx_stale++;
		return NULL;
	}
	*node = pt->node;
	*idx = slot - 1;
	return &s->nodes[pt->node].slots[slot - 1];
}

/*
 * A chunk's round trip, from its only send to its RESULT (Karn: a resent
 * chunk's RESULT answers an unknown send), sets the timeout of the node's new
 * chunks as TCP does: srtt + 4 rttvar (at least srtt / 4 above srtt), within
 * [rto_us, rto_max_us]. The
 * round trip includes the wait for the other ranks' pushes of the chunk, so
 * a rank ahead of the others (or a node slowed by load) no longer resends
 * every chunk it waits for: such resends carry nothing the node lacks.
 */
static void rto_sample(const struct sigma_conf *c, struct sg_cli_node *n, uint64_t rtt)
{
	uint64_t rto;

	if (n->srtt == 0) {
		n->srtt = rtt;
		n->rttvar = rtt / 2;
	} else {
		uint64_t d = rtt > n->srtt ? rtt - n->srtt : n->srtt - rtt;

		n->rttvar = (3 * n->rttvar + d) / 4;
		n->srtt = (7 * n->srtt + rtt) / 8;
	}
	/* a window's chunks finish together: their samples agree and rttvar falls
	 * towards 0, which would put the timeout on the round trip's very edge */
	rto = n->srtt + (4 * n->rttvar > n->srtt / 4 ? 4 * n->rttvar : n->srtt / 4);
	n->rto = rto < c->rto_us * 1000ull ? c->rto_us * 1000ull :
		 rto > c->rto_max_us * 1000ull ? c->rto_max_us * 1000ull : rto;
}

static void on_result(struct sigma_session *s, const struct sg_dp_msg *m, uint64_t now)
{
	uint32_t node, idx;
	struct sg_cli_slot *sl = match(s, m, now, &node, &idx);
	struct sigma_tensor *t;
	struct sg_cli_part *pt;
	struct sg_cli_node *n;
	uint32_t first, expect, off;

	if (sl == NULL)
		return;
	t = sl->t;
	pt = &t->parts[sl->part];
	if (sl->recov) { /* a failover push: the ranks that waited for it write the sum */
		if (sl->seq > s->nodes[node].top_done)
			s->nodes[node].top_done = sl->seq;
		recov_done(s, node, idx);
		return;
	}
	if (sg_dp_chunk_span(pt->nelem, t->dtype, s->conf.chunk_bytes, sl->chunk, &first, &expect,
			     &off) < 0 || m->dtype != t->dtype || m->nelem != expect ||
	    m->offset != off) {
		s->st.rx_bad++;
		return;
	}
	memcpy(t->out + pt->byte_off + m->offset, m->payload, m->payload_len);
	n = &s->nodes[node];
	if (sl->seq > n->top_done)
		n->top_done = sl->seq;
	if (!sl->resent && !sl->parked)
		rto_sample(&s->conf, n, now - sl->sent);
	slot_free(s, node, idx);
	if (n->cwnd < n->wmax)
		n->cwnd++;
	s->st.rx_results++;
	if (--pt->left == 0)
		pt->latency = now - pt->t_start;
	if (--t->chunks_left == 0)
		finish(t, 0);
}

static void on_nack(struct sigma_session *s, const struct sg_dp_msg *m, uint64_t now)
{
	uint32_t node, idx;
	struct sg_cli_slot *sl = match(s, m, now, &node, &idx);
	struct sg_cli_node *n;

	s->st.nacks++;
	if (sl == NULL)
		return;
	n = &s->nodes[node];
	note_alive(sl, 0);
	/*
	 * Back-pressure: halve the window, and resend this chunk after its
	 * back-off. The chunk stays parked (see has_credit()) until
	 * its RESULT: a resend may be NACKed again.
	 */
	n->cwnd = n->cwnd > 1 ? n->cwnd / 2 : 1;
	if (!sl->parked) {
		sl->parked = true;
		n->parked++;
	}
	sl->deadline = now + sl->rto_us * 1000ull;
}

/*
 * ERROR MISMATCH: the node holds the job (our token was right) but not with our
 * geometry. Say what differs and where the right value comes from.
 */
static void on_mismatch(struct sigma_session *s, const struct sg_dp_msg *m, uint32_t node,
			uint32_t idx)
{
	const struct sigma_tensor *t = s->nodes[node].slots[idx].t;
	const struct sg_dp_mismatch *mm = m->payload;
	uint32_t chunk = be32toh(mm->chunk_bytes);
	char hint[320];

	if (mm->what == SG_DP_MM_AUTH && s->auth)
		snprintf(hint, sizeof(hint), "this session has auth = mac (authenticated "
			 "datagrams) and the node's job has not: make the job with \"auth\": \"mac\" "
			 "or open the sessions without auth_keys");
	else if (mm->what == SG_DP_MM_AUTH)
		snprintf(hint, sizeof(hint), "the node's job has auth = mac (authenticated "
			 "datagrams) and this session has not: every worker of the job must sign its "
			 "pushes with its rank's key (docs/protocol.md, \"Authenticated datagrams\")");
	else if (mm->what == SG_DP_MM_MAC_ALG)
		snprintf(hint, sizeof(hint), "the node's CPU cannot check AES-256-GMAC (no AES-NI "
			 "or PCLMUL), which this worker's MACs use: run the workers with "
			 "SIGMA_AUTH_MAC=poly1305 (docs/security.md)");
	else if (chunk != s->conf.chunk_bytes)
		snprintf(hint, sizeof(hint), "the node's job uses chunk_bytes %u, this session %u: "
			 "every worker must use the job's chunk size (it is in the job descriptor; "
			 "see sigma_job_parse())", chunk, s->conf.chunk_bytes);
	else if (mm->dtype != t->dtype && mm->dtype != SG_DTYPE_ANY)
		/* also seen as other chunk counts: say the cause */
		snprintf(hint, sizeof(hint), "the node's job sums %s, this tensor is %s%s",
			 sg_dtype_name(mm->dtype), sg_dtype_name(t->dtype),
			 mm->what == SG_DP_MM_DTYPE ? " (a job of dtype any keeps the dtype of each "
			 "key's first push: every worker must register the tensor with one dtype)" :
			 "");
	else if (mm->what == SG_DP_MM_PARTITION)
		snprintf(hint, sizeof(hint), "the key is larger than the node's job's "
			 "partition_bytes allows: every worker must use the job's partition_bytes "
			 "(it is in the job descriptor), this session uses %u", s->conf.partition_bytes);
	else if (mm->what == SG_DP_MM_KEY && t->parts[s->nodes[node].slots[idx].part].moved_at)
		snprintf(hint, sizeof(hint), "the node has not made this key, which moved to it "
			 "when a node was lost, within failover_wait_us: it takes a fixed job's "
			 "moved keys from the job's record in etcd (docs/cluster.md): run it with "
			 "[cluster] or --etcd, and record the job (sigmactl --etcd ... job create, "
			 "sg_etcd_job_record())");
	else if (mm->what == SG_DP_MM_KEY)
		snprintf(hint, sizeof(hint), "the node's job has no such key: the job was created "
			 "with other tensors (ids, sizes), another partition_bytes, or another node "
			 "list or weights than this session uses");
	else
		snprintf(hint, sizeof(hint), "the key has another size in the node's job (%s "
			 "differ): this tensor's element count or partition_bytes is not the job's",
			 mm->what == SG_DP_MM_OFFSET ? "offsets" : mm->what == SG_DP_MM_NELEM ?
			 "element counts" : "chunk counts");
	fail_chunk(s, node, idx, -EPROTO, "job mismatch (ERROR MISMATCH)", hint);
}

/*
 * ERROR FULL: an open job has no chunk slot left on the node for this key. It will not
 * have any until the job is made again with more: say so, and how.
 */
static void on_full(struct sigma_session *s, const struct sg_dp_msg *m, uint32_t node,
		    uint32_t idx)
{
	const struct sg_dp_full *f = m->payload;
	char hint[400];

	snprintf(hint, sizeof(hint), "job %u has no room for this key on that node: its keys "
		 "take %u of the %u chunk slots one reducer there may give the job, and this key "
		 "needs %u: create the job with more slots (job_create \"slots\", sigmactl "
		 "job create --open --slots S, sg_ctl_job_spec.slots), larger chunks, or across "
		 "more nodes", s->conf.job, be32toh(f->used), be32toh(f->slots), m->nchunks);
	fail_chunk(s, node, idx, -ENOSPC, "no room for a new key (ERROR FULL)", hint);
}

/* ERROR STALE or GONE: this rank's round is not one the node can serve. */
static void on_behind(struct sigma_session *s, const struct sg_dp_msg *m, uint32_t node,
		      uint32_t idx)
{
	const struct sg_dp_round_info *ri = m->payload;
	char why[96], hint[320];

	if (m->payload_len == sizeof(*ri)) {
		uint32_t round = be32toh(ri->round), next = round + (be32toh(ri->finished) != 0);

		snprintf(hint, sizeof(hint), "the chunk is at round %u on the node (%s), this "
			 "session pushes round %u: its rounds are behind the job's, as when a "
			 "program restarts against a job that ran on; create a new job, or open "
			 "the session with first_round = %u", round,
			 be32toh(ri->finished) ? "finished" : "collecting", m->round, next);
	} else {
		snprintf(hint, sizeof(hint), "this rank fell behind the others, or a program "
			 "restarted against a job that ran on; create a new job");
	}
	snprintf(why, sizeof(why), "%s",
		 m->code == SG_DP_C_GONE ? "result no longer kept (ERROR GONE)"
					 : "round behind the node's (ERROR STALE)");
	fail_chunk(s, node, idx, m->code == SG_DP_C_GONE ? -EPIPE : -ESTALE, why, hint);
}

/*
 * A moved partition's survivor does not have its key yet (ERROR MISMATCH, "no such
 * key"): a fixed job's survivor makes it when its own watch sees the loss, which may
 * come a little after ours (docs/cluster.md, "Jobs in etcd"). Resend as after a NACK,
 * for up to failover_wait_us from the move. @return true if so.
 */
static bool not_made_yet(struct sigma_session *s, const struct sg_dp_msg *m,
			 struct sg_cli_slot *sl, uint32_t node, uint64_t now)
{
	const struct sg_cli_part *pt = &sl->t->parts[sl->part];
	const struct sg_dp_mismatch *mm = m->payload;

	if (m->code != SG_DP_C_MISMATCH || m->payload_len != sizeof(*mm) ||
	    mm->what != SG_DP_MM_KEY || pt->moved_at == 0 ||
	    now - pt->moved_at > s->conf.failover_wait_us * 1000ull)
		return false;
	if (!sl->parked) {
		sl->parked = true;
		s->nodes[node].parked++;
	}
	sl->deadline = now + sl->rto_us * 1000ull;
	return true;
}

static void on_error(struct sigma_session *s, const struct sg_dp_msg *m, uint64_t now)
{
	uint32_t node, idx;
	struct sg_cli_slot *sl = match(s, m, now, &node, &idx);
	bool ranks = (m->code == SG_DP_C_WAITING || m->code == SG_DP_C_WORKER_LOST) &&
		     m->payload_len == 8;
	uint64_t missing = 0; /* WAITING's and WORKER_LOST's ranks still to push */

	s->st.errors++;
	if (sl == NULL || not_made_yet(s, m, sl, node, now))
		return;
	if (ranks) {
		memcpy(&missing, m->payload, 8);
		missing = be64toh(missing);
		s->st.waits += m->code == SG_DP_C_WAITING;
		note_alive(sl, missing);
		if (m->code == SG_DP_C_WAITING || sl->recov)
			return;
	}
	if (sl->recov) {
		/* refused or stale: the survivor's key has gone past that round, nobody waits */
		if (m->code != SG_DP_C_WORKER_LOST && m->code != SG_DP_C_WAITING)
			recov_done(s, node, idx);
		return;
	}
	if (m->code == SG_DP_C_MISMATCH && m->payload_len == sizeof(struct sg_dp_mismatch)) {
		on_mismatch(s, m, node, idx);
	} else if (m->code == SG_DP_C_FULL && m->payload_len == sizeof(struct sg_dp_full)) {
		on_full(s, m, node, idx);
	} else if (m->code == SG_DP_C_STALE || m->code == SG_DP_C_GONE) {
		on_behind(s, m, node, idx);
	} else if (ranks && sl->reported != missing) { /* WORKER_LOST not yet reported */
		sl->reported = missing;
		log_waits(s, node, m, missing, now);
	}
}

/*
 * ERROR VERSION from a node of another wire protocol version, which echoes our push:
 * the push's operation fails at once, naming both versions, instead of timing out.
 */
static void on_version(struct sigma_session *s, const void *buf, uint32_t len, uint64_t now)
{
	uint32_t node, idx, lo, hi;
	struct sg_cli_slot *sl;
	struct sg_dp_msg m;
	char hint[320];

	if (sg_dp_parse_version_error(buf, len, &m, &lo, &hi) != 0 || m.job != s->conf.job ||
	    m.token != s->conf.token || m.rank != s->conf.rank) {
		s->st.rx_bad++;
		return;
	}
	s->st.errors++;
	sl = match(s, &m, now, &node, &idx);
	if (sl == NULL)
		return;
	if (sl->recov) {
		/* a failover push: nobody waits for it (on_error()) */
		recov_done(s, node, idx);
		return;
	}
	if (lo == hi)
		snprintf(hint, sizeof(hint), "the node speaks wire protocol version %u, this "
			 "libsigma (release %s) speaks version %d", lo, SG_VERSION_STRING,
			 SG_DP_VERSION);
	else
		snprintf(hint, sizeof(hint), "the node speaks wire protocol versions %u to %u, "
			 "this libsigma (release %s) speaks version %d", lo, hi,
			 SG_VERSION_STRING, SG_DP_VERSION);
	snprintf(hint + strlen(hint), sizeof(hint) - strlen(hint), ": run workers and nodes "
		 "of one protocol version (sigma_version(), sigmad --version)");
	fail_chunk(s, node, idx, -EPROTONOSUPPORT, "wire protocol version mismatch (ERROR "
		   "VERSION)", hint);
}

/*
 * auth = mac: a reply counts only if the node's key for this rank signed it. No
 * replay window: each node, and each reducer of one, signs with a sequence of
 * its own, and a replayed reply is one the node sent for the key, chunk and
 * round its header names, which the round logic takes at most once. An
 * unsigned ERROR MISMATCH is the node's answer to a push it could not check (a
 * job without auth, or with it when we have none): it names the mismatch.
 */
static bool reply_authentic(struct sigma_session *s, const struct sg_dp_msg *m, const void *buf,
			    uint32_t len)
{
	if (m->flags & SG_DP_F_MAC)
		return s->auth &&
		       sg_auth_verify(s->node_key, s->conf.auth_key_id, buf, len, NULL) ==
			       SG_AUTH_OK;
	return !s->auth || (m->type == SG_DP_T_ERROR && m->code == SG_DP_C_MISMATCH);
}

static void handle(struct sigma_session *s, const void *buf, uint32_t len, uint64_t now)
{
	enum sg_dp_drop why;
	struct sg_dp_msg m;

	s->st.rx_packets++;
	if (sg_dp_parse(buf, len, &m, &why) < 0) {
		if (why == SG_DP_DROP_VERSION)
			on_version(s, buf, len, now);
		else
			s->st.rx_bad++;
		return;
	}
	if (m.job != s->conf.job || m.token != s->conf.token || m.rank != s->conf.rank) {
		s->st.rx_bad++;
		return;
	}
	if (!reply_authentic(s, &m, buf, len)) {
		s->st.rx_bad++;
		return;
	}
	switch (m.type) {
	case SG_DP_T_RESULT:
		on_result(s, &m, now);
		break;
	case SG_DP_T_NACK:
		on_nack(s, &m, now);
		break;
	case SG_DP_T_ERROR:
		on_error(s, &m, now);
		break;
	default:
		s->st.rx_bad++;
	}
}

/*
 * How long sigma_poll() polls before it sleeps (conf.spin_us) at @p now: only
 * while few chunks are outstanding, and only for spin_us after the last packet
 * sent or received. A small operation's reply comes within a round trip, which
 * a wake-up would double; a large one's come in bulk, and polling would take
 * the CPU the node and the other workers need (docs/performance.md). A wait
 * that goes on (other ranks behind, a node that is slow) is a sleep: a poll
 * each time the thread woke to scan its timers kept it on the CPU all along,
 * and two such ranks kept a node on the same two cores off them for seconds
 * (py_torch failed its nodes as silent).
 */
static int spin_us(const struct sigma_session *s, uint64_t now)
{
	uint64_t out = 0, quiet = now > s->last_io ? (now - s->last_io) / 1000 : 0;

	if (s->conf.spin_us <= 0 || quiet >= (uint64_t)s->conf.spin_us)
		return 0;
	for (unsigned int i = 0; i < s->conf.nnodes; i++)
		out += s->nodes[i].outstanding;
	return out * s->conf.chunk_bytes <= SIGMA_SPIN_MAX_BYTES ?
	       s->conf.spin_us - (int)quiet : 0;
}

/* Handle the @p n packets received (n >= 0). @return the time they were handled at. */
static uint64_t handle_burst(struct sigma_session *s, const struct sg_udp_dgram *rx, int n)
{
	uint64_t now = sg_cli_now_ns();

	if (n > 0)
		s->last_io = now;
	for (int i = 0; i < n; i++)
		handle(s, rx[i].buf, rx[i].len, now);
	return now;
}

int sigma_poll(struct sigma_session *s, int timeout_us)
{
	struct sg_udp_dgram rx[SG_CLI_BURST];
	uint64_t now = sg_cli_now_ns();
	int n;

	if (s == NULL)
		return -EINVAL;
	s->finished = 0;
	/* the loop's first pass sends what the windows allow */
	do {
		n = s->tp->recv(s->tp, rx, SG_CLI_BURST, 0, 0);
		if (n < 0)
			return n;
		now = handle_burst(s, rx, n);
		/* Keep the windows full while results stream in. */
		fill(s, now);
		flush(s);
	} while (n == SG_CLI_BURST);
	if (n == 0 && s->finished == 0 && timeout_us > 0 && s->active != NULL) {
		/* Nothing arrived: poll a while (spin_us()), then sleep until a packet or
		 * the next timer scan. */
		uint64_t wait = s->next_scan > now ? (s->next_scan - now) / 1000 : 0;
		int spin = spin_us(s, now);

		if (wait > (uint64_t)timeout_us)
			wait = (uint64_t)timeout_us;
		s->st.spins += spin > 0 && wait > 0;
		n = s->tp->recv(s->tp, rx, SG_CLI_BURST, (int)wait, spin);
		if (n < 0)
			return n;
		now = handle_burst(s, rx, n);
	}
	if (now >= s->next_scan) {
		if (s->conf.membership != NULL)
			check_membership(s);
		scan_timers(s, now);
		/* A quarter of the first timeout keeps resends close to their deadline. */
		s->next_scan = now + s->conf.rto_us * 250ull;
	}
	fill(s, now);
	flush(s);
	return s->finished;
}

void sg_cli_set_job_dtype(struct sigma_session *s, enum sg_dtype dt)
{
	s->job_dtype = (int)dt;
}

int sigma_test(const struct sigma_tensor *t)
{
	return t == NULL ? -EINVAL : t->status;
}

int sigma_wait(struct sigma_tensor *t)
{
	if (t == NULL)
		return -EINVAL;
	while (t->status == -EINPROGRESS) {
		int r = sigma_poll(t->s, 1000);

		if (r < 0)
			return r;
	}
	return t->status;
}

int sigma_push_pull_sync(struct sigma_tensor *t, const void *in, void *out)
{
	int rc = sigma_push_pull(t, in, out, NULL, NULL);

	return rc < 0 ? rc : sigma_wait(t);
}

const char *sigma_last_error(const struct sigma_session *s)
{
	return s == NULL ? "no session" : s->err;
}

const char *sigma_version(void)
{
	return SG_VERSION_STRING;
}

int sigma_last_failure(const struct sigma_session *s, struct sigma_failure *f)
{
	if (s == NULL || f == NULL)
		return -EINVAL;
	*f = s->fail;
	return f->kind == SIGMA_FAIL_NONE ? -ENOENT : 0;
}

void sigma_get_stats(const struct sigma_session *s, struct sigma_stats *st)
{
	if (st == NULL)
		return;
	if (s == NULL) {
		memset(st, 0, sizeof(*st));
		return;
	}
	*st = s->st;
	st->rx_dropped = rx_dropped(s);
}

int sigma_tensor_set_round(struct sigma_tensor *t, uint32_t round)
{
	if (t == NULL)
		return -EINVAL;
	if (t->status == -EINPROGRESS)
		return -EBUSY;
	t->round = round;
	/* the nodes may hold this key's rounds from before it moved away: the first
	 * round's pushes say so (REOPEN), so that a stale slot there is released */
	t->reopen = round + 1u;
	return 0;
}

uint32_t sigma_tensor_round(const struct sigma_tensor *t)
{
	return t != NULL ? t->round : 0;
}

uint32_t sigma_tensor_nparts(const struct sigma_tensor *t)
{
	return t->nparts;
}

uint64_t sigma_tensor_part_latency(const struct sigma_tensor *t, uint32_t part)
{
	return part < t->nparts ? t->parts[part].latency : 0;
}

int sigma_tensor_part_node(const struct sigma_tensor *t, uint32_t part)
{
	return part < t->nparts ? (int)t->parts[part].node : -EINVAL;
}

int sigma_node_transport(const struct sigma_session *s, unsigned int node)
{
	if (s == NULL || node >= s->conf.nnodes)
		return -EINVAL;
	return s->tp->node_transport != NULL ? s->tp->node_transport(s->tp, node) :
					       (int)s->conf.transport;
}

/* Every node is lost: fail what is in flight, and what comes, with the names. */
static int no_node_left(struct sigma_session *s)
{
	int len = snprintf(s->err, sizeof(s->err), "no summation node left: every node of the "
			   "session was lost (");

	for (unsigned int i = 0; i < s->conf.nnodes && len > 0 && (size_t)len < sizeof(s->err); i++)
		len += snprintf(s->err + len, sizeof(s->err) - len, "%s%s", i ? ", " : "",
				s->nodes[i].name);
	if (len > 0 && (size_t)len < sizeof(s->err))
		snprintf(s->err + len, sizeof(s->err) - len, "): start nodes and a new job");
	SG_CLI_LOG(ERR, "%s", s->err);
	s->fail = (struct sigma_failure){.status = -EHOSTDOWN, .kind = SIGMA_FAIL_NO_NODE,
					 .node = -1};
	s->no_node = true;
	while (s->active != NULL)
		finish(s->active, -EHOSTDOWN);
	return -EHOSTDOWN;
}

/* Move partition @p p of @p t off its lost node; @return the key moved. */
static uint32_t move_part(struct sigma_session *s, struct sigma_tensor *t, uint32_t p)
{
	struct sg_cli_part *pt = &t->parts[p];
	int node = sg_ctl_place_key(s->place, s->weights, s->conf.nnodes,
				    sg_ctl_partition_key(t->id, p));

	pt->node = node < 0 ? 0 : (uint32_t)node;
	pt->moved_at = sg_cli_now_ns();
	/*
	 * Its last round again, for the ranks still waiting for that round's sum
	 * (all of it, also when failover pushes were going to a node lost before).
	 */
	if (t->round != s->conf.first_round) {
		if (pt->rleft == 0 && pt->rnext == pt->nchunks)
			pt->rround = t->round - 1;
		pt->rnext = 0;
		pt->rleft = pt->nchunks;
		if (!t->in_recov) {
			t->in_recov = true;
			t->next_recov = s->recov;
			s->recov = t;
		}
	}
	/* the rounds pushed there first: the one pushed again above, up to the one in flight */
	pt->reopen = true;
	pt->reopen_lo = t->round != s->conf.first_round ? pt->rround : t->round;
	pt->reopen_hi = t->round;
	/* the round in flight, every chunk of it: all ranks then write the survivor's sums */
	if (t->status == -EINPROGRESS) {
		t->chunks_left += pt->nchunks - pt->left;
		pt->left = pt->nchunks;
		pt->next = 0;
		if (t->cursor > p)
			t->cursor = p;
	}
	s->st.keys_moved++;
	return sg_wire_key(t->id, p);
}

int sigma_node_lost(struct sigma_session *s, unsigned int node, const char *why)
{
	struct sg_cli_node *n;
	char keys[256];
	int moved = 0, len = 0;
	bool left = false;

	if (s == NULL || node >= s->conf.nnodes)
		return -EINVAL;
	if (!s->failover)
		return -EOPNOTSUPP;
	if (!s->place[node].alive)
		return 0;
	n = &s->nodes[node];
	s->place[node].alive = false;
	s->weights[node] = 0; /* the others' stay: rendezvous moves only this node's keys */
	s->st.nodes_lost++;
	for (uint32_t k = 0; k < s->conf.window; k++) {
		struct sg_cli_slot *sl = &n->slots[k];

		if (sl->t == NULL)
			continue;
		if (sl->recov)
			sl->t->parts[sl->part].rleft--;
		slot_free(s, node, k);
	}
	n->cwnd = n->wmax;
	for (unsigned int i = 0; i < s->conf.nnodes; i++)
		left |= s->weights[i] > 0;
	if (!left) {
		SG_CLI_LOG(ERR, "node %s lost (%s)", n->label, why ? why : "sigma_node_lost()");
		return no_node_left(s);
	}
	keys[0] = '\0';
	for (uint32_t id = 0; id < SG_MAX_TENSORS; id++) {
		struct sigma_tensor *t = s->tensors[id];

		for (uint32_t p = 0; t != NULL && p < t->nparts; p++) {
			uint32_t key;

			if (t->parts[p].node != node)
				continue;
			key = move_part(s, t, p);
			if ((size_t)len < sizeof(keys) - 40)
				len += snprintf(keys + len, sizeof(keys) - len, "%s0x%08x->%s",
						moved ? " " : "", key,
						s->nodes[t->parts[p].node].name);
			else if (keys[len - 1] != '.')
				len += snprintf(keys + len, sizeof(keys) - len, " ...");
			moved++;
		}
	}
	SG_CLI_LOG(WARNING, "node %s lost (%s): %d key(s) moved to the survivors: %s", n->label,
		   why ? why : "sigma_node_lost()", moved, moved ? keys : "none");
	return moved;
}

/* Ask the membership source; give up the nodes it no longer lists. */
static int check_membership(struct sigma_session *s)
{
	if (s->conf.membership(s->conf.membership_arg, &s->member_gen, s->names,
			       s->conf.nnodes, s->alive) != 1)
		return 0;
	s->st.membership_changes++;
	for (unsigned int i = 0; i < s->conf.nnodes && !s->no_node; i++)
		if (!s->alive[i] && s->place[i].alive)
			sigma_node_lost(s, i, "no longer in the membership: its lease expired or it "
					"left");
	return 1;
}

int sigma_placement_of(const struct sigma_session *s, unsigned int node,
		       struct sigma_placement *pl, sigma_placed_key_fn *fn, void *arg)
{
	int nk = 0, dtype = -1;

	if (s == NULL || pl == NULL || node >= s->conf.nnodes)
		return -EINVAL;
	for (uint32_t id = 0; id < SG_MAX_TENSORS; id++) {
		const struct sigma_tensor *t = s->tensors[id];

		if (t == NULL)
			continue;
		if (dtype >= 0 && (int)t->dtype != dtype)
			return -EINVAL;
		dtype = (int)t->dtype;
		for (uint32_t p = 0; p < t->nparts; p++) {
			if (t->parts[p].node != node)
				continue;
			if (fn != NULL)
				fn(arg, sg_wire_key(id, p), t->parts[p].nelem);
			nk++;
		}
	}
	*pl = (struct sigma_placement){
		.job = s->conf.job,
		.nworkers = s->conf.nworkers,
		.token = s->conf.token,
		.partition_bytes = s->conf.partition_bytes,
		.chunk_bytes = s->conf.chunk_bytes,
		.dtype = dtype,
	};
	return nk;
}
