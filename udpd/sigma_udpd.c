/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A summation node over kernel UDP in one thread: recvmmsg bursts into the
 * aggregation engine, its replies batched into sendmmsg. For tests,
 * benchmarks and hosts without DPDK; sigmad is the fast path.
 *
 * The kernel's per-datagram cost, not the summing, bounds this node, so it
 * moves up to 64 KB per message each way: UDP_GRO on receive (a worker's
 * UDP_SEGMENT send arrives as one message) and UDP_SEGMENT on send (the
 * replies of one length to one worker in a burst leave as one message). Under
 * light traffic it polls a little before it sleeps (conf.spin_us).
 *
 * With conf.shm_path, workers of this machine may skip the kernel: each one
 * that connects to that Unix socket gets a channel of two shared-memory rings
 * (sg_shm.h), which the same loop polls beside the socket. The engine
 * tells such a worker from a UDP one by its address: SHM_TAG set, the
 * channel's generation and slot below. A second thread, the channel maker,
 * accepts those workers and makes their channels: writing a channel's 8 MB
 * once took 50-100 ms here (sg_shm.h), for which the node's own thread
 * would have left every other worker waiting.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sg_parse.h"
#include "sg_shm.h"
#include "sg_sum.h"
#include "sg_udp.h"
#include "sigma.h"
#include "sigma_udpd.h"

/* Datagrams one burst takes or sends. */
#define UDPD_BURST 64
#define UDPD_BUF SG_UDP_DGRAM_BUF

/* An engine address with this bit is a shared-memory channel: no IPv4 << 16 | port has it. */
#define SHM_TAG (1ull << 63)
#define SHM_MAX_LIMIT 1024

/* One worker's shared-memory channel (sock < 0: a free slot). */
struct shm_chan {
	int sock;                 /* the worker's connection: its hang-up frees the channel */
	struct sg_shm_layout *mem;
	uint64_t id;              /* its engine address: SHM_TAG | generation << 16 | slot */
	struct sg_shm_ring up;    /* worker to node: we consume, the efd is ours */
	struct sg_shm_ring down;  /* node to worker: we produce, the efd is the worker's */
	bool dirty;               /* down has records not yet published */
};


struct sigma_udpd {
	struct sigma_udpd_conf conf;
	struct sg_dp_engine *eng;
	pthread_mutex_t lock; /* engine: node thread vs add_job/stats callers */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	int fd;
	uint16_t port;
	uint64_t rng;
	uint64_t t_start, t_stop;
	_Atomic uint64_t busy_ns; /* read by sigma_udpd_busy() on other threads */
	/* receive bursts (UDP_GRO) */
	struct sg_udp_rx *rx;
	struct sg_udp_dgram rxpkt[UDPD_BURST];
	const struct sockaddr_in *rxfrom[UDPD_BURST];
	/*
	 * Transmit burst, filled by the engine through alloc/send and, for a
	 * RESULT to several workers, alloc_multi/send_multi: the payload is
	 * written once into a buffer, and each datagram is its own header and a
	 * reference to that payload.
	 */
	unsigned int ntx;                        /* datagrams */
	unsigned int nbuf;                       /* buffers of txbuf taken */
	uint8_t *cur;                            /* the buffer the engine is filling */
	bool gso;                                /* conf.no_gso off, until the kernel refuses */
	uint64_t spin_ns;                        /* conf.spin_us (0: never) */
	int last_burst;                          /* datagrams of the last burst that had any */
	uint64_t last_rx;                        /* ... when it was handled */
	uint64_t last_ctl;                       /* shared memory's sockets last looked at */
	struct sockaddr_in txaddr[UDPD_BURST]; /* each datagram's destination */
	uint32_t txlen[UDPD_BURST];            /* ... its length */
	const uint8_t *txhdr[UDPD_BURST];      /* ... its header */
	const uint8_t *txpay[UDPD_BURST];      /* ... its payload (txlen - header) */
	uint8_t hdrs[UDPD_BURST][SG_DP_HDR_LEN]; /* headers of fanned-out RESULTs */
	struct mmsghdr txmsg[UDPD_BURST];      /* messages: one or several datagrams */
	struct iovec txiov[2 * UDPD_BURST];    /* header and payload of each datagram,
						    grouped by message */
	uint8_t txctl[UDPD_BURST][SG_UDP_SEGCTL];
	uint8_t *txbuf;
	_Atomic uint64_t tx_msgs, tx_dgrams, tx_bufs, spins; /* read by sigma_udpd_io_stats() */
	/* shared memory (conf.shm_path): the channels change under lock, on the node's thread */
	uint32_t ipv4;                           /* our UDP address, for the hello */
	char *shm_path;                          /* conf.shm_path's copy */
	int shm_fd;                              /* the listening socket (the maker's), or -1 */
	/* the channel maker's thread: it queues the channels it made for the node's thread */
	pthread_t maker;
	bool maker_running;
	int mk_wake, mk_stop;                    /* eventfds: channels queued; stop the maker */
	pthread_mutex_t mk_lock;                 /* mk_q and mk_n */
	struct shm_chan *mk_q;                   /* made, not yet in a slot (shm_max at most) */
	uint32_t mk_n;
	atomic_bool mk_pending;                  /* mk_n > 0: the node's thread looks each turn */
	_Atomic uint32_t shm_used;               /* channels in slots or queued: at most shm_max */
	uint32_t shm_max, shm_gen, shm_next;     /* slots; channels made; the next to read */
	struct shm_chan *ch;
	struct pollfd *pfd;                      /* the node's sleep: 2 + 2 * shm_max */
	const uint8_t *srx[UDPD_BURST];        /* a burst of records */
	uint32_t srxlen[UDPD_BURST];
	uint64_t srxsrc[UDPD_BURST];
	_Atomic uint64_t shm_open, shm_accepted, shm_refused, shm_closed, shm_garbage, shm_rx,
		shm_tx, shm_tx_full, shm_tx_stale, shm_bad_len, shm_wakeups;
};

/* Addresses travel through the engine as one opaque u64: IPv4 << 16 | port. */
static uint64_t addr_pack(const struct sockaddr_in *a)
{
	return ((uint64_t)ntohl(a->sin_addr.s_addr) << 16) | ntohs(a->sin_port);
}

static void addr_unpack(uint64_t v, struct sockaddr_in *a)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)v);
	a->sin_addr.s_addr = htonl((uint32_t)(v >> 16));
}

/* Loss injection: xorshift64, returns true when this packet is to be dropped. */
static bool lose(struct sigma_udpd *d, uint32_t permille)
{
	if (permille == 0)
		return false;
	d->rng ^= d->rng << 13;
	d->rng ^= d->rng >> 7;
	d->rng ^= d->rng << 17;
	return d->rng % 1000 < permille;
}

/*
 * Group the burst's datagrams into messages: with GSO, those of one length to
 * one worker go together (a RESULT goes to every worker in turn, so equal
 * neighbours are rare), in their order, up to the kernel's limits.
 * @return messages.
 */
static unsigned int tx_pack(struct sigma_udpd *d)
{
	bool taken[UDPD_BURST] = {false};
	unsigned int nm = 0, ni = 0;

	for (unsigned int i = 0; i < d->ntx; i++) {
		struct msghdr *mh;
		unsigned int cnt = 0, max = d->gso ? sg_udp_gso_max(d->txlen[i]) : 1;

		if (taken[i])
			continue;
		mh = &d->txmsg[nm++].msg_hdr;
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &d->txaddr[i];
		mh->msg_namelen = sizeof(d->txaddr[i]);
		mh->msg_iov = &d->txiov[ni];
		for (unsigned int j = i; j < d->ntx && cnt < max; j++) {
			if (taken[j] || d->txlen[j] != d->txlen[i] ||
			    d->txaddr[j].sin_port != d->txaddr[i].sin_port ||
			    d->txaddr[j].sin_addr.s_addr != d->txaddr[i].sin_addr.s_addr)
				continue;
			taken[j] = true;
			d->txiov[ni++] = (struct iovec){(void *)d->txhdr[j], SG_DP_HDR_LEN};
			d->txiov[ni++] = (struct iovec){(void *)d->txpay[j],
							d->txlen[j] - SG_DP_HDR_LEN};
			cnt++;
		}
		mh->msg_iovlen = 2 * cnt;
		if (cnt > 1)
			sg_udp_set_segment(mh, d->txctl[nm - 1], (uint16_t)d->txlen[i]);
	}
	return nm;
}

/* Send messages @p from..@p to one datagram each (after the kernel refused GSO). */
static void tx_unsegmented(struct sigma_udpd *d, unsigned int from, unsigned int to)
{
	for (unsigned int k = from; k < to; k++) {
		struct msghdr mh = d->txmsg[k].msg_hdr;

		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		mh.msg_iovlen = 2; /* a datagram: its header and its payload */
		for (size_t i = 0; i < d->txmsg[k].msg_hdr.msg_iovlen; i += 2) {
			mh.msg_iov = &d->txmsg[k].msg_hdr.msg_iov[i];
			if (sendmsg(d->fd, &mh, 0) >= 0) {
				d->tx_msgs++;
				d->tx_dgrams++;
			}
		}
	}
}

static void tx_flush(struct sigma_udpd *d)
{
	unsigned int done = 0, nm = tx_pack(d);

	for (uint32_t k = 0; k < d->shm_max; k++)
		if (d->ch[k].dirty) {
			d->ch[k].dirty = false;
			if (sg_shm_publish(&d->ch[k].down))
				d->shm_wakeups++;
		}

	while (done < nm) {
		int r = sendmmsg(d->fd, d->txmsg + done, nm - done, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* GSO refused (a route's MTU below the datagrams): one per message
			 * from now on; this burst's rest goes that way at once */
			if ((errno == EINVAL || errno == EIO) && d->gso &&
			    d->txmsg[done].msg_hdr.msg_iovlen > 2) {
				d->gso = false;
				tx_unsegmented(d, done, nm);
			}
			break; /* else lost: the worker retransmits */
		}
		for (int k = 0; k < r; k++)
			d->tx_dgrams += d->txmsg[done + (unsigned int)k].msg_hdr.msg_iovlen / 2;
		d->tx_msgs += (unsigned int)r;
		done += (unsigned int)r;
	}
	d->ntx = 0;
	d->nbuf = 0;
}

/* A buffer for a packet of @p len bytes to @p ndgrams destinations (flushes a full burst). */
static uint8_t *tx_buffer(struct sigma_udpd *d, uint32_t len, unsigned int ndgrams)
{
	if (len > UDPD_BUF || ndgrams > UDPD_BURST)
		return NULL;
	if (d->ntx + ndgrams > UDPD_BURST || d->nbuf == UDPD_BURST)
		tx_flush(d);
	d->cur = d->txbuf + (size_t)d->nbuf++ * UDPD_BUF;
	d->tx_bufs++;
	return d->cur;
}

/* A datagram to a shared-memory worker: copied into its ring now, published at tx_flush(). */
static void shm_queue(struct sigma_udpd *d, uint64_t dest, const uint8_t *hdr, uint32_t len)
{
	uint32_t slot = (uint32_t)(dest & 0xffff);
	struct shm_chan *c = slot < d->shm_max ? &d->ch[slot] : NULL;
	uint8_t *b;

	if (c == NULL || c->sock < 0 || c->id != dest) {
		d->shm_tx_stale++;
		return;
	}
	b = sg_shm_put(&c->down, len);
	if (b == NULL) {
		d->shm_tx_full++; /* a slow worker: it resends, and never holds us up */
		return;
	}
	memcpy(b, hdr, SG_DP_HDR_LEN);
	memcpy(b + SG_DP_HDR_LEN, d->cur + SG_DP_HDR_LEN, len - SG_DP_HDR_LEN);
	c->dirty = true;
	d->shm_tx++;
}

/* Queue datagram of @p len bytes to @p dest: header @p hdr, payload after the current buffer's. */
static void tx_queue(struct sigma_udpd *d, uint64_t dest, const uint8_t *hdr, uint32_t len)
{
	unsigned int i = d->ntx;

	if (lose(d, d->conf.drop_tx_permille))
		return;
	if (dest & SHM_TAG) {
		shm_queue(d, dest, hdr, len);
		return;
	}
	addr_unpack(dest, &d->txaddr[i]);
	d->txlen[i] = len;
	d->txhdr[i] = hdr;
	d->txpay[i] = d->cur + SG_DP_HDR_LEN;
	d->ntx++;
}

static void *tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct sigma_udpd *d = ctx;
	uint8_t *buf = tx_buffer(d, len, 1);

	(void)dest; /* tx_send() is given it */
	*pkt = NULL;
	return buf;
}

static void tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct sigma_udpd *d = ctx;

	(void)pkt;
	tx_queue(d, dest, d->cur, len);
}

/* One RESULT to @p n workers: the engine writes its payload once (no copy per worker). */
static void *tx_alloc_multi(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
			    uint32_t len, void **pkt)
{
	(void)to;
	*pkt = NULL;
	return tx_buffer(ctx, len, n);
}

static unsigned int tx_send_multi(void *ctx, void *pkt, uint32_t len,
				  const struct sg_dp_tx_dest *to, unsigned int n)
{
	struct sigma_udpd *d = ctx;

	(void)pkt;
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *h = d->hdrs[d->ntx];

		memcpy(h, d->cur, SG_DP_HDR_LEN);
		sg_dp_hdr_set_rank(h, to[i].rank);
		tx_queue(d, to[i].dest, h, len);
	}
	return n; /* a datagram lost on purpose counts as sent, as in tx_send */
}

/* ---- shared memory (conf.shm_path) ----------------------------------------- */

static int shm_listen(struct sigma_udpd *d, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	mode_t old;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path); /* a node's earlier socket: one node per path */
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc != 0 || chmod(path, 0600) != 0 || listen(fd, 64) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	d->shm_fd = fd;
	return 0;
}

static void chan_unmap(struct shm_chan *c)
{
	if (c->mem != NULL)
		munmap(c->mem, sg_shm_mem_bytes(SG_SHM_RING_BYTES));
	if (c->up.efd >= 0)
		close(c->up.efd);
	if (c->down.efd >= 0)
		close(c->down.efd);
	if (c->sock >= 0)
		close(c->sock);
	*c = (struct shm_chan){.sock = -1, .up.efd = -1, .down.efd = -1};
}

/*
 * Make a channel @p c (no slot yet) for the worker on @p sock and send it the
 * hello; the maker's thread. @return 0, or -errno (@p sock closed).
 */
static int chan_make(struct sigma_udpd *d, struct shm_chan *c, int sock)
{
	uint64_t bytes = sg_shm_mem_bytes(SG_SHM_RING_BYTES);
	struct sg_shm_hello h = {.magic = SG_SHM_MAGIC, .version = SG_SHM_VERSION,
				 .udp_port = d->port, .ipv4 = d->ipv4,
				 .ring_bytes = SG_SHM_RING_BYTES, .mem_bytes = bytes};
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(3 * sizeof(int))];
	} ctl;
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *cm;
	int memfd, fds[3], rc = 0;
	struct shm_chan n = {.sock = sock};

	memfd = memfd_create("sigma-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	n.up.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	n.down.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	/* sealed: a worker that shrank it would kill us with SIGBUS */
	if (memfd < 0 || n.up.efd < 0 || n.down.efd < 0 || ftruncate(memfd, (off_t)bytes) != 0 ||
	    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
	    (n.mem = sg_shm_map(memfd, bytes, SG_SHM_RING_BYTES)) == NULL) {
		rc = -errno;
		goto out;
	}
	/* every page written once through our mapping now, not on the hot path (sg_shm.h) */
	memset(n.mem->data, 0, 2 * (size_t)SG_SHM_RING_BYTES);
	fds[0] = memfd;
	fds[1] = n.up.efd;
	fds[2] = n.down.efd;
	memset(&ctl, 0, sizeof(ctl));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	if (sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
		rc = -errno;
		goto out;
	}
	sg_shm_ring_init(&n.up, &n.mem->up, n.mem->data, SG_SHM_RING_BYTES, UDPD_BUF, n.up.efd);
	sg_shm_ring_init(&n.down, &n.mem->down, n.mem->data + SG_SHM_RING_BYTES,
			 SG_SHM_RING_BYTES, UDPD_BUF, n.down.efd);
	*c = n;
out:
	if (memfd >= 0)
		close(memfd); /* the mapping stays */
	if (rc != 0)
		chan_unmap(&n);
	return rc;
}

static void chan_free(struct sigma_udpd *d, struct shm_chan *c)
{
	pthread_mutex_lock(&d->lock);
	chan_unmap(c);
	pthread_mutex_unlock(&d->lock);
	d->shm_open--;
	d->shm_closed++;
	atomic_fetch_sub(&d->shm_used, 1);
}

/* The maker's thread: a channel for each worker that connects, while slots last. */
static void *maker_main(void *arg)
{
	struct sigma_udpd *d = arg;
	struct pollfd pfd[2] = {{.fd = d->shm_fd, .events = POLLIN},
				{.fd = d->mk_stop, .events = POLLIN}};

	for (;;) {
		int sock;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break; /* sigma_udpd_stop() */
		while ((sock = accept4(d->shm_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
			struct shm_chan n;

			/* the worker sees the hang-up instead of a hello */
			if (atomic_load(&d->shm_used) >= d->shm_max) {
				close(sock);
				d->shm_refused++;
				continue;
			}
			if (chan_make(d, &n, sock) != 0) {
				d->shm_refused++;
				continue;
			}
			atomic_fetch_add(&d->shm_used, 1);
			pthread_mutex_lock(&d->mk_lock);
			d->mk_q[d->mk_n++] = n;
			atomic_store(&d->mk_pending, true);
			pthread_mutex_unlock(&d->mk_lock);
			eventfd_write(d->mk_wake, 1);
			d->shm_accepted++;
		}
	}
	return NULL;
}

/* The node's thread: the channels the maker queued, each into a free slot. */
static void shm_install(struct sigma_udpd *d)
{
	eventfd_t v;
	uint32_t k = 0;

	eventfd_read(d->mk_wake, &v); /* non-blocking: nothing to read is fine */
	pthread_mutex_lock(&d->mk_lock);
	for (uint32_t i = 0; i < d->mk_n; i++) {
		while (d->ch[k].sock >= 0) /* shm_used keeps a slot free for each */
			k++;
		d->mk_q[i].id = SHM_TAG | (uint64_t)d->shm_gen++ << 16 | k;
		pthread_mutex_lock(&d->lock); /* the engine's replies read the slots */
		d->ch[k] = d->mk_q[i];
		pthread_mutex_unlock(&d->lock);
		d->shm_open++;
	}
	d->mk_n = 0;
	atomic_store(&d->mk_pending, false);
	pthread_mutex_unlock(&d->mk_lock);
}

/* A worker's socket woke us: it hung up, or wrote to it (garbage). Free its channel. */
static void chan_event(struct sigma_udpd *d, struct shm_chan *c, short revents)
{
	uint8_t b;
	ssize_t r = revents & POLLIN ? recv(c->sock, &b, 1, MSG_DONTWAIT) : 0;

	if (r < 0 && (errno == EAGAIN || errno == EINTR) && !(revents & (POLLHUP | POLLERR)))
		return;
	if (r > 0)
		d->shm_garbage++;
	chan_free(d, c);
}

/*
 * Wait up to @p ms for anything (0: only look): the UDP socket and the rings
 * (when @p ms > 0), the maker's new channels, the workers' sockets. Before it
 * sleeps it tells every ring (sg_shm.h), and does not sleep if one has a
 * record.
 */
static void node_wait(struct sigma_udpd *d, int ms)
{
	nfds_t np = 0, first_chan;
	uint32_t slot_of[2 * SHM_MAX_LIMIT];
	bool asleep = true;

	if (ms > 0)
		d->pfd[np++] = (struct pollfd){.fd = d->fd, .events = POLLIN};
	if (d->mk_wake >= 0)
		d->pfd[np++] = (struct pollfd){.fd = d->mk_wake, .events = POLLIN};
	first_chan = np;
	for (uint32_t k = 0; k < d->shm_max; k++) {
		if (d->ch[k].sock < 0)
			continue;
		slot_of[np - first_chan] = k;
		d->pfd[np++] = (struct pollfd){.fd = d->ch[k].sock, .events = POLLIN};
		if (ms > 0) {
			slot_of[np - first_chan] = k;
			d->pfd[np++] = (struct pollfd){.fd = d->ch[k].up.efd, .events = POLLIN};
			asleep = asleep && sg_shm_sleep_prepare(&d->ch[k].up);
		}
	}
	if (np == 0 || poll(d->pfd, np, asleep ? ms : 0) <= 0)
		goto awake;
	if (d->mk_wake >= 0 && (d->pfd[first_chan - 1].revents & POLLIN))
		shm_install(d);
	for (nfds_t i = first_chan; i < np; i++) {
		struct shm_chan *c = &d->ch[slot_of[i - first_chan]];

		if (d->pfd[i].fd == c->sock && d->pfd[i].revents)
			chan_event(d, c, d->pfd[i].revents);
	}
awake:
	if (ms > 0)
		for (uint32_t k = 0; k < d->shm_max; k++)
			if (d->ch[k].sock >= 0)
				sg_shm_awake(&d->ch[k].up);
}

/* Up to a burst of records from the workers' rings, a different channel first each time. */
static int shm_take(struct sigma_udpd *d)
{
	int n = 0;
	uint64_t bad = 0;

	for (uint32_t i = 0; i < d->shm_max && n < UDPD_BURST; i++) {
		struct shm_chan *c = &d->ch[(d->shm_next + i) % d->shm_max];

		if (c->sock < 0)
			continue;
		while (n < UDPD_BURST &&
		       (d->srx[n] = sg_shm_get(&c->up, &d->srxlen[n], &bad)) != NULL)
			d->srxsrc[n++] = c->id;
	}
	if (d->shm_max)
		d->shm_next = (d->shm_next + 1) % d->shm_max;
	if (bad)
		d->shm_bad_len += bad;
	if (n)
		d->shm_rx += (unsigned int)n;
	return n;
}

/* The engine is done with the burst's records: their room goes back to the workers. */
static void shm_release(struct sigma_udpd *d)
{
	for (uint32_t k = 0; k < d->shm_max; k++)
		if (d->ch[k].sock >= 0)
			sg_shm_release(&d->ch[k].up);
}

/* Datagrams waiting now: @p ns gets the shared-memory ones. @return UDP's, or -errno. */
static int rx_take(struct sigma_udpd *d, int *ns)
{
	*ns = shm_take(d);
	return sg_udp_rx_take(d->rx, d->rxpkt, d->rxfrom, UDPD_BURST);
}

static void *node_main(void *arg)
{
	struct sigma_udpd *d = arg;
	uint64_t last_poll = 0;

	while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
		uint64_t t0, now;
		int n, ns;

		if (atomic_load_explicit(&d->mk_pending, memory_order_relaxed))
			shm_install(d);
		n = rx_take(d, &ns);
		/* light traffic: a worker's next push or its peers' come soon, and a
		 * wake-up would take longer (docs/performance.md); but only for spin_us
		 * after the last burst: polling on through a quiet spell took the CPU
		 * the workers need, for nothing */
		if (n == 0 && ns == 0 && d->spin_ns && d->last_burst <= SIGMA_UDPD_SPIN_BURST) {
			uint64_t quiet = sg_udp_now_ns() - d->last_rx;

			if (quiet < d->spin_ns)
				d->spins++;
			while (n == 0 && ns == 0 && quiet < d->spin_ns) {
				sched_yield(); /* to a worker, which may be the one to answer */
				n = rx_take(d, &ns);
				quiet = sg_udp_now_ns() - d->last_rx;
			}
		}
		if (n < 0)
			break;
		if (n + ns > 0)
			d->last_burst = n + ns;
		else
			node_wait(d, 1);
		t0 = sg_udp_now_ns();
		pthread_mutex_lock(&d->lock);
		for (int i = 0; i < n; i++) {
			if (lose(d, d->conf.drop_rx_permille))
				continue;
			sg_dp_engine_rx(d->eng, d->rxpkt[i].buf, d->rxpkt[i].len,
					addr_pack(d->rxfrom[i]), t0);
		}
		for (int i = 0; i < ns; i++) {
			if (lose(d, d->conf.drop_rx_permille))
				continue;
			sg_dp_engine_rx(d->eng, d->srx[i], d->srxlen[i], d->srxsrc[i], t0);
		}
		if (t0 - last_poll > 1000000) {
			sg_dp_engine_poll(d->eng, t0);
			last_poll = t0;
		}
		tx_flush(d);
		pthread_mutex_unlock(&d->lock);
		if (ns > 0)
			shm_release(d);
		now = sg_udp_now_ns();
		if (n + ns > 0) {
			d->busy_ns += now - t0;
			d->last_rx = now; /* the quiet spell spin_us covers starts here */
			/* while busy, new workers and hang-ups are seen once a millisecond */
			if (now - d->last_ctl > 1000000) {
				node_wait(d, 0);
				d->last_ctl = now;
			}
		}
	}
	return NULL;
}

struct sigma_udpd *sigma_udpd_create(const struct sigma_udpd_conf *conf)
{
	struct sigma_udpd *d;
	int err;

	if (conf == NULL || conf->spin_us > 1000000 || conf->shm_max > SHM_MAX_LIMIT) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->fd = -1;
	d->shm_fd = -1;
	d->mk_wake = d->mk_stop = -1;
	d->shm_max = conf->shm_path == NULL ? 0 : conf->shm_max ? conf->shm_max : SIGMA_UDPD_SHM_MAX;
	d->ch = calloc(d->shm_max + 1, sizeof(*d->ch));
	d->mk_q = calloc(d->shm_max + 1, sizeof(*d->mk_q));
	d->pfd = calloc(2 + 2 * (size_t)d->shm_max, sizeof(*d->pfd));
	if (d->ch == NULL || d->mk_q == NULL || d->pfd == NULL) {
		free(d->ch);
		free(d->mk_q);
		free(d->pfd);
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t k = 0; k < d->shm_max; k++)
		d->ch[k] = (struct shm_chan){.sock = -1, .up.efd = -1, .down.efd = -1};
	d->conf = *conf;
	d->rng = conf->seed ? conf->seed : 0x9e3779b97f4a7c15ull;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->mk_lock, NULL);
	d->gso = !conf->no_gso;
	d->spin_ns = conf->spin_us < 0 ? 0 :
		     (uint64_t)(conf->spin_us ? conf->spin_us : SIGMA_SPIN_US_DEFAULT) * 1000;
	d->last_burst = UDPD_BURST; /* no polling before traffic */
	d->txbuf = malloc((size_t)UDPD_BURST * UDPD_BUF);
	if (d->txbuf == NULL) {
		err = ENOMEM;
		goto fail;
	}
	d->conf.engine.tx.alloc = tx_alloc;
	d->conf.engine.tx.send = tx_send;
	d->conf.engine.tx.alloc_multi = tx_alloc_multi;
	d->conf.engine.tx.send_multi = tx_send_multi;
	d->conf.engine.tx.ctx = d;
	if (d->conf.engine.max_payload == 0)
		d->conf.engine.max_payload = SG_MAX_CHUNK_BYTES;
	d->eng = sg_dp_engine_create(&d->conf.engine);
	if (d->eng == NULL) {
		err = errno;
		goto fail;
	}
	d->fd = sg_udp_socket(conf->addr ? conf->addr : "127.0.0.1", conf->port, 0, &d->port);
	if (d->fd < 0) {
		err = -d->fd;
		goto fail;
	}
	sg_ipv4_parse(conf->addr ? conf->addr : "127.0.0.1", &d->ipv4); /* the socket took it */
	if (conf->shm_path != NULL) {
		d->shm_path = strdup(conf->shm_path);
		err = d->shm_path == NULL ? ENOMEM : -shm_listen(d, d->shm_path);
		if (err != 0)
			goto fail;
		d->mk_wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		d->mk_stop = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (d->mk_wake < 0 || d->mk_stop < 0) {
			err = errno;
			goto fail;
		}
	}
	d->rx = sg_udp_rx_create(d->fd);
	if (d->rx == NULL) {
		err = ENOMEM;
		goto fail;
	}
	return d;
fail:
	sigma_udpd_destroy(d);
	errno = err;
	return NULL;
}

uint32_t sigma_udpd_ipv4(const struct sigma_udpd *d)
{
	return d->ipv4;
}

uint16_t sigma_udpd_port(const struct sigma_udpd *d)
{
	return d->port;
}

int sigma_udpd_add_job(struct sigma_udpd *d, const struct sg_dp_job_conf *job)
{
	int rc;

	pthread_mutex_lock(&d->lock);
	rc = sg_dp_engine_add_job(d->eng, job);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int sigma_udpd_add_keys(struct sigma_udpd *d, uint32_t job, const struct sg_dp_key *keys,
			uint32_t n)
{
	int rc;

	pthread_mutex_lock(&d->lock);
	rc = sg_dp_engine_add_keys(d->eng, job, keys, n);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int sigma_udpd_remove_job(struct sigma_udpd *d, uint32_t job)
{
	int rc;

	pthread_mutex_lock(&d->lock);
	rc = sg_dp_engine_remove_job(d->eng, job);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int sigma_udpd_job_stats(struct sigma_udpd *d, uint32_t job, struct sg_dp_job_stats *st)
{
	int rc;

	pthread_mutex_lock(&d->lock);
	rc = sg_dp_engine_job_stats(d->eng, job, st);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int sigma_udpd_job_lateness(struct sigma_udpd *d, uint32_t job, struct sg_late *out)
{
	int rc;

	pthread_mutex_lock(&d->lock);
	rc = sg_dp_engine_job_lateness(d->eng, job, out);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

uint32_t sigma_udpd_max_payload(struct sigma_udpd *d)
{
	return sg_dp_engine_max_payload(d->eng);
}

int sigma_udpd_start(struct sigma_udpd *d)
{
	int rc;

	if (d == NULL || d->running || d->fd < 0)
		return -EINVAL;
	/* a fork() since they were made turned every first write into a page copy: have
	 * those now, not on the hot path (the engine's pool is not inherited at all) */
	sg_udp_rx_populate(d->rx);
	sg_sum_populate(d->txbuf, (size_t)UDPD_BURST * UDPD_BUF);
	atomic_store(&d->stop, false);
	d->t_start = sg_udp_now_ns();
	d->busy_ns = 0;
	d->t_stop = 0;
	rc = pthread_create(&d->thread, NULL, node_main, d);
	if (rc != 0)
		return -rc;
	d->running = true;
	if (d->shm_fd >= 0) {
		rc = pthread_create(&d->maker, NULL, maker_main, d);
		if (rc != 0) {
			sigma_udpd_stop(d);
			return -rc;
		}
		d->maker_running = true;
	}
	return 0;
}

void sigma_udpd_stop(struct sigma_udpd *d)
{
	if (d == NULL)
		return;
	if (d->maker_running) {
		eventfd_write(d->mk_stop, 1);
		pthread_join(d->maker, NULL);
		d->maker_running = false;
	}
	if (d->running) {
		atomic_store(&d->stop, true);
		pthread_join(d->thread, NULL);
		d->running = false;
		d->t_stop = sg_udp_now_ns();
	}
	if (d->fd >= 0) {
		close(d->fd);
		d->fd = -1;
	}
	for (uint32_t k = 0; k < d->shm_max; k++)
		if (d->ch[k].sock >= 0)
			chan_free(d, &d->ch[k]);
	for (uint32_t i = 0; i < d->mk_n; i++) { /* made, never taken into a slot */
		chan_unmap(&d->mk_q[i]);
		atomic_fetch_sub(&d->shm_used, 1);
	}
	d->mk_n = 0;
	if (d->shm_fd >= 0) {
		close(d->shm_fd);
		d->shm_fd = -1;
		unlink(d->shm_path);
	}
}

void sigma_udpd_stats(struct sigma_udpd *d, struct sg_dp_stats *st)
{
	pthread_mutex_lock(&d->lock);
	sg_dp_engine_stats(d->eng, st);
	pthread_mutex_unlock(&d->lock);
}

double sigma_udpd_busy(struct sigma_udpd *d)
{
	uint64_t end = d->t_stop ? d->t_stop : sg_udp_now_ns();

	if (d->t_start == 0 || end <= d->t_start)
		return 0;
	return (double)d->busy_ns / (double)(end - d->t_start);
}

void sigma_udpd_io_stats(struct sigma_udpd *d, struct sigma_udpd_io *io)
{
	sg_udp_rx_counts(d->rx, &io->rx_msgs, &io->rx_dgrams);
	io->tx_msgs = d->tx_msgs;
	io->tx_dgrams = d->tx_dgrams;
	io->tx_bufs = d->tx_bufs;
	io->spins = d->spins;
	io->shm_open = d->shm_open;
	io->shm_accepted = d->shm_accepted;
	io->shm_refused = d->shm_refused;
	io->shm_closed = d->shm_closed;
	io->shm_garbage = d->shm_garbage;
	io->shm_rx = d->shm_rx;
	io->shm_tx = d->shm_tx;
	io->shm_tx_full = d->shm_tx_full;
	io->shm_tx_stale = d->shm_tx_stale;
	io->shm_bad_len = d->shm_bad_len;
	io->shm_wakeups = d->shm_wakeups;
	io->rx_overflows = sg_udp_rx_overflows(d->rx);
}

void sigma_udpd_destroy(struct sigma_udpd *d)
{
	if (d == NULL)
		return;
	sigma_udpd_stop(d);
	sg_dp_engine_destroy(d->eng);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->mk_lock);
	if (d->mk_wake >= 0)
		close(d->mk_wake);
	if (d->mk_stop >= 0)
		close(d->mk_stop);
	sg_udp_rx_destroy(d->rx);
	free(d->txbuf);
	free(d->ch);
	free(d->mk_q);
	free(d->pfd);
	free(d->shm_path);
	free(d);
}
