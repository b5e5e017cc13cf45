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
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sigma_internal.h"
#include "sigma_udpd.h"

#define UDPD_BUF SG_CLI_RXBUF


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
	struct sg_cli_rx *rx;
	struct sg_cli_rxpkt rxpkt[SG_CLI_BURST];
	const struct sockaddr_in *rxfrom[SG_CLI_BURST];
	/*
	 * Transmit burst, filled by the engine through alloc/send and, for a
	 * RESULT to several workers, alloc_multi/send_multi: the payload is
	 * written once into a buffer, and each datagram is its own header and a
	 * reference to that payload.
	 */
	unsigned int ntx;                        /* datagrams */
	unsigned int nbuf;                       /* buffers of txbuf taken */
	uint8_t *cur;                            /* the buffer the engine is filling */
	uint64_t cur_dest;                       /* ... for this worker (tx_alloc) */
	bool gso;                                /* conf.no_gso off, until the kernel refuses */
	uint64_t spin_ns;                        /* conf.spin_us (0: never) */
	int last_burst;                          /* datagrams of the last burst that had any */
	uint64_t last_rx;                        /* ... when it was handled */
	struct sockaddr_in txaddr[SG_CLI_BURST]; /* each datagram's destination */
	uint32_t txlen[SG_CLI_BURST];            /* ... its length */
	const uint8_t *txhdr[SG_CLI_BURST];      /* ... its header */
	const uint8_t *txpay[SG_CLI_BURST];      /* ... its payload (txlen - header) */
	uint8_t hdrs[SG_CLI_BURST][SG_DP_HDR_LEN]; /* headers of fanned-out RESULTs */
	struct mmsghdr txmsg[SG_CLI_BURST];      /* messages: one or several datagrams */
	struct iovec txiov[2 * SG_CLI_BURST];    /* header and payload of each datagram,
						    grouped by message */
	uint8_t txctl[SG_CLI_BURST][SG_CLI_SEGCTL];
	uint8_t *txbuf;
	_Atomic uint64_t tx_msgs, tx_dgrams, tx_bufs, spins; /* read by sigma_udpd_io_stats() */
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
	bool taken[SG_CLI_BURST] = {false};
	unsigned int nm = 0, ni = 0;

	for (unsigned int i = 0; i < d->ntx; i++) {
		struct msghdr *mh;
		unsigned int cnt = 0, max = d->gso ? sg_cli_gso_max(d->txlen[i]) : 1;

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
			sg_cli_set_segment(mh, d->txctl[nm - 1], (uint16_t)d->txlen[i]);
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
	if (len > UDPD_BUF || ndgrams > SG_CLI_BURST)
		return NULL;
	if (d->ntx + ndgrams > SG_CLI_BURST || d->nbuf == SG_CLI_BURST)
		tx_flush(d);
	d->cur = d->txbuf + (size_t)d->nbuf++ * UDPD_BUF;
	d->tx_bufs++;
	return d->cur;
}

/* Queue datagram of @p len bytes to @p dest: header @p hdr, payload after the current buffer's. */
static void tx_queue(struct sigma_udpd *d, uint64_t dest, const uint8_t *hdr, uint32_t len)
{
	unsigned int i = d->ntx;

	if (lose(d, d->conf.drop_tx_permille))
		return;
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

	*pkt = NULL;
	d->cur_dest = dest;
	return buf;
}

static void tx_send(void *ctx, void *pkt, uint32_t len)
{
	struct sigma_udpd *d = ctx;

	(void)pkt;
	tx_queue(d, d->cur_dest, d->cur, len);
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

static void *node_main(void *arg)
{
	struct sigma_udpd *d = arg;
	uint64_t last_poll = 0;

	while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
		struct pollfd pfd = {.fd = d->fd, .events = POLLIN};
		uint64_t t0, now;
		int n;

		n = sg_cli_rx_take(d->rx, d->rxpkt, d->rxfrom, SG_CLI_BURST);
		/* light traffic: a worker's next push or its peers' come soon, and a
		 * wake-up would take longer (docs/performance.md); but only for spin_us
		 * after the last burst: polling on through a quiet spell took the CPU
		 * the workers need, for nothing */
		if (n == 0 && d->spin_ns && d->last_burst <= SIGMA_UDPD_SPIN_BURST) {
			uint64_t quiet = sg_cli_now_ns() - d->last_rx;

			if (quiet < d->spin_ns) {
				d->spins++;
				n = sg_cli_rx_spin(d->rx, d->rxpkt, d->rxfrom, SG_CLI_BURST,
						   d->spin_ns - quiet);
			}
		}
		if (n > 0)
			d->last_burst = n;
		if (n <= 0) {
			if (n < 0)
				break;
			poll(&pfd, 1, 1);
		}
		t0 = sg_cli_now_ns();
		pthread_mutex_lock(&d->lock);
		for (int i = 0; i < n; i++) {
			if (lose(d, d->conf.drop_rx_permille))
				continue;
			sg_dp_engine_rx(d->eng, d->rxpkt[i].buf, d->rxpkt[i].len,
					addr_pack(d->rxfrom[i]), t0);
		}
		if (t0 - last_poll > 1000000) {
			sg_dp_engine_poll(d->eng, t0);
			last_poll = t0;
		}
		tx_flush(d);
		pthread_mutex_unlock(&d->lock);
		now = sg_cli_now_ns();
		if (n > 0) {
			d->busy_ns += now - t0;
			d->last_rx = now; /* the quiet spell spin_us covers starts here */
		}
	}
	return NULL;
}

struct sigma_udpd *sigma_udpd_create(const struct sigma_udpd_conf *conf)
{
	struct sigma_udpd *d;
	int err;

	if (conf == NULL || conf->spin_us > 1000000) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->fd = -1;
	d->conf = *conf;
	d->rng = conf->seed ? conf->seed : 0x9e3779b97f4a7c15ull;
	pthread_mutex_init(&d->lock, NULL);
	d->gso = !conf->no_gso;
	d->spin_ns = conf->spin_us < 0 ? 0 :
		     (uint64_t)(conf->spin_us ? conf->spin_us : SIGMA_SPIN_US_DEFAULT) * 1000;
	d->last_burst = SG_CLI_BURST; /* no polling before traffic */
	d->txbuf = malloc((size_t)SG_CLI_BURST * UDPD_BUF);
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
	d->fd = sg_cli_udp_socket(conf->addr ? conf->addr : "127.0.0.1", conf->port, 0, &d->port);
	if (d->fd < 0) {
		err = -d->fd;
		goto fail;
	}
	d->rx = sg_cli_rx_create(d->fd);
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

uint32_t sigma_udpd_max_payload(struct sigma_udpd *d)
{
	return sg_dp_engine_max_payload(d->eng);
}

int sigma_udpd_start(struct sigma_udpd *d)
{
	int rc;

	if (d == NULL || d->running || d->fd < 0)
		return -EINVAL;
	atomic_store(&d->stop, false);
	d->t_start = sg_cli_now_ns();
	d->busy_ns = 0;
	d->t_stop = 0;
	rc = pthread_create(&d->thread, NULL, node_main, d);
	if (rc != 0)
		return -rc;
	d->running = true;
	return 0;
}

void sigma_udpd_stop(struct sigma_udpd *d)
{
	if (d == NULL)
		return;
	if (d->running) {
		atomic_store(&d->stop, true);
		pthread_join(d->thread, NULL);
		d->running = false;
		d->t_stop = sg_cli_now_ns();
	}
	if (d->fd >= 0) {
		close(d->fd);
		d->fd = -1;
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
	uint64_t end = d->t_stop ? d->t_stop : sg_cli_now_ns();

	if (d->t_start == 0 || end <= d->t_start)
		return 0;
	return (double)d->busy_ns / (double)(end - d->t_start);
}

void sigma_udpd_io_stats(struct sigma_udpd *d, struct sigma_udpd_io *io)
{
	sg_cli_rx_counts(d->rx, &io->rx_msgs, &io->rx_dgrams);
	io->tx_msgs = d->tx_msgs;
	io->tx_dgrams = d->tx_dgrams;
	io->tx_bufs = d->tx_bufs;
	io->spins = d->spins;
}

void sigma_udpd_destroy(struct sigma_udpd *d)
{
	if (d == NULL)
		return;
	sigma_udpd_stop(d);
	sg_dp_engine_destroy(d->eng);
	pthread_mutex_destroy(&d->lock);
	sg_cli_rx_destroy(d->rx);
	free(d->txbuf);
	free(d);
}
