/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma's SIGMA_TRANSPORT_SHM, over the rings of sg_shm.h: one channel per node,
 * a datagram moves with one memcpy into the ring and no system call while
 * both sides run; a side that sleeps is woken through its eventfd. Given
 * another transport (kernel UDP with conf.shm_paths), it serves the nodes
 * whose socket answered and hands the others' packets to that one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sg_parse.h"
#include "sigma_internal.h"
#include "sg_shm.h"

/*
 * How long sigma_open() waits for a node's hello: the node writes a channel's
 * 8 MB before it answers, and a busy node thread may take its time to look;
 * 5 s ran out once in client_shm at load 14 under nice 19.
 */
#define SHM_HELLO_MS 10000

/* ---- the worker's transport ---------------------------------------------- */

struct shm_chan {
	int sock;                 /* to the node: its hang-up is ours */
	struct sg_shm_layout *mem;
	uint64_t mem_bytes;
	struct sg_shm_ring up;    /* we produce; efd: the node's */
	struct sg_shm_ring down;  /* we consume; efd: ours */
	bool dirty;               /* up has records not yet published */
};

struct sg_cli_shm {
	struct sg_cli_transport ops;
	unsigned int nnodes;
	unsigned int nch;  /* nodes with a channel: their indices in chans */
	unsigned int next; /* the channel whose ring recv() reads first: fair among nodes */
	struct shm_chan *ch;   /* per node; mem NULL: no channel, the node is rest's */
	unsigned int *chans;
	struct pollfd *pfd;    /* per channel, then rest's wait fd */
	uint64_t bad;      /* records of a bad length from nodes */
	/* the nodes without a channel (NULL: every node has one) */
	struct sg_cli_transport *rest;
	int rest_fd;
	bool rest_first;   /* which of the two recv() asks first: alternates */
	struct sg_cli_txpkt rest_tx[SG_CLI_BURST];
};

static int shm_node_transport(const struct sg_cli_transport *tp, uint32_t node)
{
	const struct sg_cli_shm *t = (const struct sg_cli_shm *)tp;

	/* only the kernel-UDP transport is ever the rest (sigma_open()) */
	return t->ch[node].mem != NULL ? SIGMA_TRANSPORT_SHM : SIGMA_TRANSPORT_UDP;
}

/* The kernel-UDP transport's, for the nodes without a channel (a full ring drops nothing) */
static uint64_t shm_rx_dropped(const struct sg_cli_transport *tp)
{
	const struct sg_cli_shm *t = (const struct sg_cli_shm *)tp;

	return t->rest != NULL && t->rest->rx_dropped != NULL ? t->rest->rx_dropped(t->rest) : 0;
}

static int shm_send(struct sg_cli_transport *tp, const struct sg_cli_txpkt *pkts, unsigned int n)
{
	struct sg_cli_shm *t = (struct sg_cli_shm *)tp;
	unsigned int sent = 0, nrest = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct shm_chan *c = &t->ch[pkts[i].node];
		uint8_t *b;

		if (c->mem == NULL) {
			t->rest_tx[nrest++] = pkts[i]; /* n <= SG_CLI_BURST */
			continue;
		}
		b = sg_shm_put(&c->up, SG_DP_HDR_LEN + pkts[i].payload_len +
				   (pkts[i].trailer != NULL ? SG_DP_MAC_TRAILER : 0));
		if (b == NULL)
			continue; /* a full ring: lost, the window's timers resend it */
		memcpy(b, pkts[i].hdr, SG_DP_HDR_LEN);
		memcpy(b + SG_DP_HDR_LEN, pkts[i].payload, pkts[i].payload_len);
		if (pkts[i].trailer != NULL)
			memcpy(b + SG_DP_HDR_LEN + pkts[i].payload_len, pkts[i].trailer,
			       SG_DP_MAC_TRAILER);
		c->dirty = true;
		sent++;
	}
	for (unsigned int j = 0; j < t->nch; j++) {
		struct shm_chan *c = &t->ch[t->chans[j]];

		if (c->dirty) {
			sg_shm_publish(&c->up);
			c->dirty = false;
		}
	}
	if (nrest > 0) {
		int r = t->rest->send(t->rest, t->rest_tx, nrest);

		/*
		 * The caller counts every packet not in the count as lost; the
		 * other transport's error loses its share only, and is returned
		 * when it is the whole burst's fate.
		 */
		if (r < 0 && sent == 0)
			return r;
		sent += r > 0 ? (unsigned int)r : 0;
	}
	return (int)sent;
}

/* Up to @p max records from the nodes' rings, starting at a different node each time. */
static int shm_take(struct sg_cli_shm *t, struct sg_udp_dgram *pkts, unsigned int max)
{
	unsigned int got = 0;

	for (unsigned int k = 0; k < t->nch && got < max; k++) {
		struct sg_shm_ring *r = &t->ch[t->chans[(t->next + k) % t->nch]].down;
		const uint8_t *b;
		uint32_t len;

		while (got < max && (b = sg_shm_get(r, &len, &t->bad)) != NULL)
			pkts[got++] = (struct sg_udp_dgram){b, len};
	}
	t->next = (t->next + 1) % t->nch;
	return (int)got;
}

/*
 * shm_take(), and with a rest transport what it has without waiting, asking
 * the two first in turn so that a stream on one never starves the other.
 * @return packets, or -errno of the rest's recv() when nothing came.
 */
static int mix_take(struct sg_cli_shm *t, struct sg_udp_dgram *pkts, unsigned int max)
{
	int a, b;

	if (t->rest == NULL)
		return shm_take(t, pkts, max);
	t->rest_first = !t->rest_first;
	if (t->rest_first) {
		a = t->rest->recv(t->rest, pkts, max, 0, 0);
		if (a < 0) {
			b = shm_take(t, pkts, max);
			return b > 0 ? b : a;
		}
		b = (unsigned int)a < max ? shm_take(t, pkts + a, max - (unsigned int)a) : 0;
		return a + b;
	}
	a = shm_take(t, pkts, max);
	b = (unsigned int)a < max ?
	    t->rest->recv(t->rest, pkts + a, max - (unsigned int)a, 0, 0) : 0;
	return b < 0 ? (a > 0 ? a : b) : a + b;
}

/*
 * Sleep on the nodes' eventfds (and the rest's fd) for up to @p timeout_us,
 * unless a record is there already.
 */
static void shm_sleep(struct sg_cli_shm *t, int timeout_us)
{
	struct timespec ts = {.tv_sec = timeout_us / 1000000,
			      .tv_nsec = (long)(timeout_us % 1000000) * 1000};
	unsigned int k;

	for (k = 0; k < t->nch; k++)
		if (!sg_shm_sleep_prepare(&t->ch[t->chans[k]].down))
			break;
	if (k == t->nch)
		ppoll(t->pfd, t->nch + (t->rest_fd >= 0), &ts, NULL);
	for (unsigned int j = 0; j < k; j++) /* ring k, if any, cleared its flag itself */
		sg_shm_awake(&t->ch[t->chans[j]].down);
}

static int shm_recv(struct sg_cli_transport *tp, struct sg_udp_dgram *pkts, unsigned int max,
		    int timeout_us, int spin_us)
{
	struct sg_cli_shm *t = (struct sg_cli_shm *)tp;
	uint64_t t0;
	int r;

	/* the records handed out last time are read by now: give them back */
	for (unsigned int k = 0; k < t->nch; k++)
		sg_shm_release(&t->ch[t->chans[k]].down);
	r = mix_take(t, pkts, max);
	if (r != 0 || timeout_us <= 0)
		return r;
	t0 = sg_cli_now_ns();
	if (spin_us > 0) {
		uint64_t spin_ns = (uint64_t)(spin_us < timeout_us ? spin_us : timeout_us) * 1000;

		do {
			sched_yield(); /* the node may share this CPU */
			r = mix_take(t, pkts, max);
			if (r != 0)
				return r;
		} while (sg_cli_now_ns() - t0 < spin_ns);
		timeout_us -= (int)((sg_cli_now_ns() - t0) / 1000);
		if (timeout_us <= 0)
			return 0;
	}
	shm_sleep(t, timeout_us);
	return mix_take(t, pkts, max);
}

static void chan_close(struct shm_chan *c)
{
	if (c->mem != NULL)
		munmap(c->mem, c->mem_bytes);
	if (c->sock >= 0)
		close(c->sock);
	if (c->up.efd >= 0)
		close(c->up.efd);
	if (c->down.efd >= 0)
		close(c->down.efd);
	*c = (struct shm_chan){.sock = -1, .up.efd = -1, .down.efd = -1};
}

static void shm_destroy(struct sg_cli_transport *tp)
{
	struct sg_cli_shm *t = (struct sg_cli_shm *)tp;

	if (t == NULL)
		return;
	for (unsigned int k = 0; t->ch != NULL && k < t->nnodes; k++)
		chan_close(&t->ch[k]);
	if (t->rest != NULL)
		t->rest->destroy(t->rest);
	free(t->ch);
	free(t->chans);
	free(t->pfd);
	free(t);
}


/*
 * Connect to the node at @p path and take its hello and fds into @p c.
 * @return 0, or -errno (ENAMETOOLONG, connect's, sg_shm_hello_recv()'s,
 *         EPROTO: rings that do not fit).
 */
static int chan_open(struct shm_chan *c, const char *path, struct sg_shm_hello *h)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fds[3], rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->sock < 0)
		return -errno;
	if (connect(c->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	rc = sg_shm_hello_recv(c->sock, SHM_HELLO_MS, h, fds);
	if (rc < 0)
		return rc;
	c->up.efd = fds[1];
	c->down.efd = fds[2];
	c->mem = sg_shm_map(fds[0], h->mem_bytes, h->ring_bytes);
	close(fds[0]); /* the mapping stays */
	if (c->mem == NULL)
		return errno == EINVAL ? -EPROTO : -errno;
	c->mem_bytes = h->mem_bytes;
	/* every page written once through our mapping before the first datagram (sg_shm.h) */
	memset(c->mem->data, 0, 2 * (size_t)h->ring_bytes);
	sg_shm_ring_init(&c->up, &c->mem->up, c->mem->data, h->ring_bytes, SG_CLI_RXBUF, fds[1]);
	sg_shm_ring_init(&c->down, &c->mem->down, c->mem->data + h->ring_bytes, h->ring_bytes,
			 SG_CLI_RXBUF, fds[2]);
	return 0;
}

/* Which of @p conf's nodes announced itself in @p h (-1: none). */
static int node_of(const struct sigma_conf *conf, const struct sg_shm_hello *h)
{
	for (unsigned int i = 0; i < conf->nnodes; i++) {
		uint32_t a;

		if (sg_ipv4_parse(conf->nodes[i].addr, &a) == 0 && a == h->ipv4 &&
		    sg_cli_node_port(&conf->nodes[i]) == h->udp_port)
			return (int)i;
	}
	return -1;
}

struct sg_cli_transport *sg_cli_shm_create(const struct sigma_conf *conf,
					   struct sg_cli_transport *rest)
{
	struct sg_cli_shm *t = calloc(1, sizeof(*t));
	int err = 0;

	if (t == NULL) {
		if (rest != NULL)
			rest->destroy(rest);
		errno = ENOMEM;
		return NULL;
	}
	t->rest = rest; /* ours from here on: shm_destroy() takes it */
	t->ch = calloc(conf->nnodes, sizeof(*t->ch));
	t->chans = calloc(conf->nnodes, sizeof(*t->chans));
	t->pfd = calloc(conf->nnodes + 1, sizeof(*t->pfd));
	if (t->ch == NULL || t->chans == NULL || t->pfd == NULL) {
		shm_destroy(&t->ops);
		errno = ENOMEM;
		return NULL;
	}
	t->ops.send = shm_send;
	t->ops.recv = shm_recv;
	t->ops.destroy = shm_destroy;
	t->ops.node_transport = shm_node_transport;
	t->ops.rx_dropped = shm_rx_dropped;
	t->nnodes = conf->nnodes;
	t->rest_fd = rest != NULL && rest->wait_fd != NULL ? rest->wait_fd(rest) : -1;
	for (unsigned int k = 0; k < t->nnodes; k++)
		t->ch[k] = (struct shm_chan){.sock = -1, .up.efd = -1, .down.efd = -1};
	/* a socket that fails is skipped: the others may cover every node */
	for (unsigned int p = 0; p < conf->n_shm_paths; p++) {
		struct shm_chan c = {.sock = -1, .up.efd = -1, .down.efd = -1};
		struct sg_shm_hello h;
		int rc = chan_open(&c, conf->shm_paths[p], &h), i = rc == 0 ? node_of(conf, &h) : -1;

		if (rc != 0) {
			SG_CLI_LOG(INFO, "shared memory at %s: %s", conf->shm_paths[p], strerror(-rc));
			err = -rc;
		}
		if (i < 0 || t->ch[i].mem != NULL) {
			/* failed, a node of another session, or a second socket of one node */
			chan_close(&c);
			continue;
		}
		t->ch[i] = c;
	}
	for (unsigned int k = 0; k < t->nnodes; k++) {
		if (t->ch[k].mem != NULL) {
			t->pfd[t->nch] = (struct pollfd){.fd = t->ch[k].down.efd, .events = POLLIN};
			t->chans[t->nch++] = k;
			continue;
		}
		if (rest != NULL) {
			SG_CLI_LOG(DEBUG, "node %u (%s:%u): over UDP (none of the %u shared-memory "
				   "sockets is its)", k, conf->nodes[k].addr,
				   sg_cli_node_port(&conf->nodes[k]), conf->n_shm_paths);
			continue;
		}
		SG_CLI_LOG(ERR, "node %u (%s:%u): none of the %u shared-memory sockets is its", k,
			   conf->nodes[k].addr, sg_cli_node_port(&conf->nodes[k]), conf->n_shm_paths);
		shm_destroy(&t->ops);
		errno = err ? err : ENOENT; /* the last socket's failure says most */
		return NULL;
	}
	if (t->nch == 0) {
		/* no node here answered: the rest is the whole session, without a detour */
		t->rest = NULL;
		shm_destroy(&t->ops);
		return rest;
	}
	if (t->rest_fd >= 0)
		t->pfd[t->nch] = (struct pollfd){.fd = t->rest_fd, .events = POLLIN};
	return &t->ops;
}

int sg_cli_shm_check_paths(const struct sigma_conf *c)
{
	for (unsigned int i = 0; i < c->n_shm_paths; i++)
		if (c->shm_paths[i] == NULL || c->shm_paths[i][0] == '\0')
			return sg_cli_conf_error("shm_paths[%u] is empty", i);
	return 0;
}

static int shm_check(struct sigma_conf *c)
{
	if (c->shm_paths == NULL || c->n_shm_paths == 0 || c->n_shm_paths > 256)
		return sg_cli_conf_error("the shared-memory transport needs 1..256 shm_paths, "
					 "got %u", c->shm_paths == NULL ? 0 : c->n_shm_paths);
	return sg_cli_shm_check_paths(c);
}

/* every node of the session over shared memory (SIGMA_TRANSPORT_SHM) */
static struct sg_cli_transport *shm_open_all(const struct sigma_conf *conf)
{
	return sg_cli_shm_create(conf, NULL);
}

SG_CLI_TRANSPORT_REGISTER(shm) = {
	.kind = SIGMA_TRANSPORT_SHM,
	.name = "shared-memory",
	.check = shm_check,
	.create = shm_open_all,
};
