/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kernel UDP socket transport of sigmad's pipeline ([transport] type =
 * socket): the same lcore loop, reducer rings, keymap moves, control agent,
 * telemetry, drain and SIGHUP as the ethdev transport, over ordinary UDP
 * sockets, for machines without a DPDK-capable NIC. EAL needs no port.
 *
 * Sockets (all bound to [net] ip; checked by sk_check() before anything is built):
 * - every io/rtc lcore binds udp_port with SO_REUSEPORT, so the kernel
 *   spreads the workers (by their address and port) over those lcores;
 * - reducer r binds udp_port + 1 + r alone: the kernel's demultiplexing is
 *   this transport's reducer steering, a push a worker sends there reaches
 *   its owner with no hand-off; the other steering ports up to udp_port +
 *   SG_DP_STEER_PORTS go round-robin to the reducers, so a worker whose R
 *   is not the node's still reaches a socket (and a hand-off, if needed);
 * - a reducer sends its replies from udp_port (where libsigma expects them):
 *   an rtc lcore on its own udp_port socket; a pure reducer, which must not
 *   join the SO_REUSEPORT group (it would take a share of the workers), on
 *   the socket of an io lcore, which sends nothing itself (the kernel's UDP
 *   send path takes no lock that sigmad would see).
 *
 * Receive: each lcore's sockets are in one epoll set with an eventfd. busy
 * polls it without waiting and drains ready sockets with recvmmsg
 * (MSG_DONTWAIT); sleep blocks in it after 8 empty polls, woken by a
 * datagram, by a hand-off to its ring (the eventfd, written only while it
 * waits), by a control call or stop (the eventfd), or after 10 ms for its
 * engine's timers. With UDP_GRO one message may carry several datagrams of
 * one sender, split at the gso_size control message. SO_RXQ_OVFL reports
 * the kernel's drops on each socket.
 *
 * Hand-off: a push for a key another reducer owns is copied into an item of
 * the NUMA node's mempool (address and bytes) and queued on the owner's
 * ring. Engine output: replies are built in this lcore's send slots and go
 * out with sendmmsg; a RESULT for N workers is one payload and N 48-byte
 * headers (two iovecs per copy); several replies of one length to one
 * worker go in one UDP_SEGMENT (GSO) send. The engine's address of a worker
 * is its IPv4 address << 16 | UDP port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "sg_dp_hand.h"
#include "sg_dp_transport.h"
#include "sg_udp.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif

/* The longest Sigma datagram: header and the largest chunk. */
#define SK_DGRAM_MAX (SG_DP_HDR_LEN + SG_MAX_CHUNK_BYTES)
/* One GRO message holds at most one IPv4 datagram's worth. */
#define SK_GRO_BUF 65536
/* The largest UDP payload of one IPv4 packet: a GSO send's limit. */
#define SK_GSO_BYTES 65507
/* Datagrams in one GSO send (the kernel's UDP_MAX_SEGMENTS is 64 or more). */
#define SK_GSO_SEGS 64
/* Messages per recvmmsg ([resources] burst, at most this). */
#define SK_RX_VLEN 64
/* Replies the engine may build before a flush, and datagrams queued (a
 * fan-out queues N per reply). */
#define SK_TX_SLOTS 64
#define SK_TX_MSGS 256
/* Sockets of one lcore: udp_port and every steering port at most. */
#define SK_MAX_SOCKS (1 + SG_DP_STEER_PORTS)
#define SK_CTRL_LEN 64

_Static_assert(SK_DGRAM_MAX < SK_GRO_BUF, "a datagram fits a GRO buffer");

/* A push on its way to the reducer that owns its key. */
struct sk_item {
	struct sg_dp_hand_item h; /* the length */
	uint32_t pad;
	uint64_t dest;            /* the sender: IPv4 << 16 | port */
	uint8_t msg[];
};

/* One receiving socket. */
struct sk_sock {
	int fd;
	uint16_t port;  /* host order */
	uint32_t ovfl;  /* the kernel's drop count (SO_RXQ_OVFL) last seen */
};

/* The transport's counters of one lcore (uint64_t only: summed by telemetry). */
struct sk_stats {
	uint64_t sockets;          /* gauge: sockets it receives on */
	uint64_t rx_calls;         /* recvmmsg calls that returned datagrams */
	uint64_t rx_gro;           /* messages that carried several datagrams (UDP_GRO) */
	uint64_t tx_calls;         /* sendmmsg calls */
	uint64_t tx_gso;           /* messages that carried several datagrams (UDP_SEGMENT) */
	uint64_t sleeps;           /* blocking waits (idle = sleep) */
	uint64_t rx_not_sigma;     /* drop: not Sigma's magic */
	uint64_t rx_too_long;      /* drop: longer than any Sigma datagram */
	uint64_t rx_kernel_drops;  /* drop: the kernel's, on this lcore's sockets (SO_RXQ_OVFL) */
	uint64_t rx_errors;        /* drop: recvmmsg failed */
	uint64_t tx_errors;        /* drop: datagrams sendmmsg refused */
	uint64_t tx_gso_refused;   /* GSO sends the kernel refused; resent one by one */
};

/* A reply queued for sendmmsg: @len bytes to @dest, from send slot @slot, with
 * header copy @hdr (index into hdrs) in front of the slot's payload, or the
 * slot's own header when @hdr is SK_NO_HDR. */
struct sk_txq {
	uint64_t dest;
	uint32_t len;
	uint16_t slot;
	uint16_t hdr;
};
#define SK_NO_HDR UINT16_MAX

struct sk_lcore {
	struct sg_dp_lcore *lc;
	int ep;                    /* epoll set: its sockets and evfd */
	int evfd;                  /* wakes its idle_wait() */
	int txfd;                  /* socket its replies leave from (udp_port) */
	volatile int sleeping;     /* in idle_wait(): a waker writes evfd */
	bool gso;                  /* UDP_SEGMENT in use */
	bool rx_failed;            /* recvmmsg failed once (logged) */
	unsigned int nsock;
	struct sk_sock sock[SK_MAX_SOCKS];
	uint64_t now;              /* this poll's time for the engine */
	/* receive */
	unsigned int vlen;
	uint32_t rxbuf_len;
	uint8_t *rxbuf;            /* vlen x rxbuf_len */
	struct mmsghdr rxm[SK_RX_VLEN];
	struct iovec rxiov[SK_RX_VLEN];
	struct sockaddr_in rxname[SK_RX_VLEN];
	uint8_t rxctl[SK_RX_VLEN][SK_CTRL_LEN];
	struct sg_dp_hand hand;    /* pushes for other reducers */
	/* send */
	uint8_t *slots;            /* SK_TX_SLOTS x SK_DGRAM_MAX */
	unsigned int nslots, nq;
	struct sk_txq q[SK_TX_MSGS];
	uint8_t hdrs[SK_TX_MSGS][SG_DP_HDR_LEN];
	struct mmsghdr txm[SK_TX_MSGS];
	struct iovec txiov[2 * SK_TX_MSGS];
	struct sockaddr_in txname[SK_TX_MSGS];
	uint8_t txctl[SK_TX_MSGS][CMSG_SPACE(sizeof(uint16_t))];
	uint16_t gnext[SK_TX_MSGS]; /* flush: the group's next datagram, or SK_NO_HDR */
	uint16_t gfirst[SK_TX_MSGS], glast[SK_TX_MSGS], gcount[SK_TX_MSGS];
	struct sk_stats st;
} __rte_cache_aligned;

struct sk_transport {
	unsigned int n;
	bool warned_rcv, warned_snd; /* a socket buffer below [socket]'s (logged once) */
	struct sk_lcore *lc[SG_DP_MAX_LAYOUT];
};

static inline uint64_t addr_dest(const struct sockaddr_in *a)
{
	return (uint64_t)ntohl(a->sin_addr.s_addr) << 16 | ntohs(a->sin_port);
}

static inline void dest_addr(uint64_t dest, struct sockaddr_in *a)
{
	*a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)dest),
				  .sin_addr.s_addr = htonl((uint32_t)(dest >> 16))};
}

/* ---- layout check ----------------------------------------------------------- */

static int sk_check(const struct sg_dp_config *c, struct sg_dp_topology *t, char *err,
		    size_t errlen)
{
	if (!rte_is_zero_ether_addr(&c->mac_override)) {
		sg_dp_seterr(err, errlen, "[net] mac: with [transport] type = socket the kernel picks "
			     "the interface and its MAC: remove [net] mac");
		return -EINVAL;
	}
	if ((unsigned int)c->udp_port + SG_DP_STEER_PORTS > UINT16_MAX) {
		sg_dp_seterr(err, errlen, "[net] udp_port %u: the socket transport binds udp_port "
			     "and the %u steering ports after it, past 65535: set udp_port to at "
			     "most %u", c->udp_port, SG_DP_STEER_PORTS,
			     UINT16_MAX - SG_DP_STEER_PORTS);
		return -EINVAL;
	}
	/* one pseudo-port: a socket per receiving lcore, no TX queues to count */
	return sg_dp_layout_port0(c, t, "socket", "the node's UDP port; the queue number orders "
				  "the sockets", err, errlen);
}

/* ---- receive ---------------------------------------------------------------- */

/* Copy a push for reducer @p o. */
static void hand_off(struct sg_dp_lcore *lc, struct sk_lcore *s, unsigned int o,
		     const uint8_t *msg, uint32_t len, uint64_t dest)
{
	struct sk_item *it = sg_dp_hand_get(lc, &s->hand);

	if (it == NULL)
		return;
	it->dest = dest;
	it->h.len = len;
	memcpy(it->msg, msg, len);
	sg_dp_hand_add(lc, &s->hand, o, it);
}

/* One datagram: sum it here, or hand it to its owner. */
static void rx_one(struct sg_dp_lcore *lc, struct sk_lcore *s, const uint8_t *pl, uint32_t len,
		   uint64_t dest)
{
	int o;

	lc->st.rx_pkts++;
	lc->st.rx_bytes += len;
	if (unlikely(len < SG_DP_HDR_LEN)) {
		lc->st.drops[SG_DP_ND_SHORT]++;
		return;
	}
	if (unlikely(len > SK_DGRAM_MAX)) {
		s->st.rx_too_long++;
		return;
	}
	/*
	 * not Sigma's: counted here, never handed to a reducer. Another protocol version
	 * goes on: its engine answers ERROR VERSION and counts the drop.
	 */
	if (unlikely(sg_dp_hdr_magic(pl) != SG_DP_MAGIC)) {
		s->st.rx_not_sigma++;
		return;
	}
	o = sg_dp_steer(lc, pl, len);
	if (likely(o == SG_DP_STEER_HERE))
		sg_dp_reduce_one(lc, pl, len, dest, s->now);
	else if (o >= 0)
		hand_off(lc, s, (unsigned int)o, pl, len, dest);
}

/* The kernel's drop count on @p k, from a message's SO_RXQ_OVFL; @return the GRO
 * segment size (0: one datagram). */
static uint32_t rx_cmsgs(struct sk_lcore *s, struct sk_sock *k, struct msghdr *mh)
{
	uint32_t v = k->ovfl, gso = sg_udp_msg_cmsgs(mh, &v);

	if (v != k->ovfl) {
		s->st.rx_kernel_drops += (uint32_t)(v - k->ovfl);
		k->ovfl = v;
	}
	return gso;
}

/* Drain up to one burst of socket @p k. @return datagrams received. */
static unsigned int rx_sock(struct sg_dp_lcore *lc, struct sk_lcore *s, struct sk_sock *k)
{
	unsigned int got = 0;
	int n;

	for (unsigned int i = 0; i < s->vlen; i++) {
		s->rxm[i].msg_hdr.msg_namelen = sizeof(s->rxname[i]);
		s->rxm[i].msg_hdr.msg_controllen = SK_CTRL_LEN;
		s->rxm[i].msg_hdr.msg_flags = 0;
	}
	n = recvmmsg(k->fd, s->rxm, s->vlen, MSG_DONTWAIT, NULL);
	if (n <= 0) {
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			s->st.rx_errors++;
			if (!s->rx_failed) {
				s->rx_failed = true;
				SG_DP_LOG(ERR, "socket: lcore %u: recvmmsg on port %u: %s (counted as "
					  "rx_errors, /sigma/socket)", lc->lcore_id, k->port,
					  strerror(errno));
			}
		}
		return 0;
	}
	s->st.rx_calls++;
	for (int i = 0; i < n; i++) {
		struct msghdr *mh = &s->rxm[i].msg_hdr;
		const uint8_t *b = s->rxiov[i].iov_base;
		uint32_t len = s->rxm[i].msg_len, seg = rx_cmsgs(s, k, mh);
		uint64_t dest = addr_dest(&s->rxname[i]);

		if (unlikely(mh->msg_flags & MSG_TRUNC)) {
			lc->st.rx_pkts++;
			lc->st.rx_bytes += len;
			s->st.rx_too_long++;
			got++;
			continue;
		}
		if (seg == 0 || seg >= len) {
			rx_one(lc, s, b, len, dest);
			got++;
			continue;
		}
		/* UDP_GRO: datagrams of seg bytes each, the last one possibly shorter */
		s->st.rx_gro++;
		for (uint32_t off = 0; off < len; off += seg) {
			rx_one(lc, s, b + off, RTE_MIN(seg, len - off), dest);
			got++;
		}
	}
	return got;
}

/* Everything ready on this lcore's sockets, one burst each. */
static unsigned int sk_poll(struct sg_dp_lcore *lc)
{
	struct sk_lcore *s = lc->xp;
	struct epoll_event ev[SK_MAX_SOCKS + 1];
	unsigned int got = 0;
	int n;

	s->now = sg_dp_now_ns(lc->p, rte_rdtsc());
	if (s->nsock == 1) {
		got = rx_sock(lc, s, &s->sock[0]); /* no need to ask epoll first */
	} else {
		n = epoll_wait(s->ep, ev, (int)RTE_DIM(ev), 0);
		for (int i = 0; i < n; i++)
			if (ev[i].data.u32 < s->nsock)
				got += rx_sock(lc, s, &s->sock[ev[i].data.u32]);
	}
	sg_dp_hand_flush(lc, &s->hand);
	return got;
}

static unsigned int sk_rx(struct sg_dp_lcore *lc, unsigned int burst)
{
	(void)burst; /* [resources] burst sized the receive vector at set-up */
	return sk_poll(lc);
}

static unsigned int sk_rx_steered(struct sg_dp_lcore *lc, unsigned int burst)
{
	(void)burst;
	/* an rtc lcore's rx polls all of its sockets already */
	return lc->role == SG_ROLE_REDUCE ? sk_poll(lc) : 0;
}

static void reduce_item(struct sg_dp_lcore *lc, void *item, const uint8_t *msg, uint32_t len,
			uint64_t now)
{
	sg_dp_reduce_one(lc, msg, len, ((struct sk_item *)item)->dest, now);
}

static void sk_reduce(struct sg_dp_lcore *lc, void **items, unsigned int n)
{
	sg_dp_hand_reduce(lc, &((struct sk_lcore *)lc->xp)->hand, items, n, reduce_item);
}

/* ---- idle ---------------------------------------------------------------------- */

static void sk_wake(struct sg_dp_lcore *lc)
{
	struct sk_lcore *s = lc->xp;
	uint64_t one = 1;

	/* the caller's ring enqueue (or flag) before the look at the flag: a store then
	 * a load, which only a full fence keeps in order (sk_idle_wait() is the other side) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (s != NULL && __atomic_load_n(&s->sleeping, __ATOMIC_SEQ_CST) &&
	    write(s->evfd, &one, sizeof(one)) < 0) {
		/* the counter is full: it is readable, which is all a wake needs */
	}
}

/*
 * idle = sleep: block until a datagram, a hand-off, a control call or the stop
 * wakes the lcore; else until its engine's timers are due (slot timeouts, key
 * moves), which need no better than SK_IDLE_WAIT_US. [live] idle_sleep_us, the
 * ethdev transport's longest nap, applies only when longer: a short nap that no
 * arrival needs costs a wake-up (measured idle: 11% of a CPU at 100 us, 1% at
 * 10 ms, for a 1-lcore node).
 */
#define SK_IDLE_WAIT_US 10000

static bool sk_idle_wait(struct sg_dp_lcore *lc, unsigned int us)
{
	struct sk_lcore *s = lc->xp;
	struct epoll_event ev[SK_MAX_SOCKS + 1];
	struct timespec ts;
	uint64_t v;
	int n;

	us = RTE_MAX(us, (unsigned int)SK_IDLE_WAIT_US);
	ts = (struct timespec){.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};

	/* Announce the wait, then look again: a waker sees the flag, or we see its
	 * work (both sides use sequentially consistent accesses). */
	__atomic_store_n(&s->sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&lc->ctl_waiting, __ATOMIC_SEQ_CST) || lc->p->stop_rx ||
	    (lc->ring != NULL && !rte_ring_empty(lc->ring))) {
		__atomic_store_n(&s->sleeping, 0, __ATOMIC_RELAXED);
		return true;
	}
	s->st.sleeps++;
	n = epoll_pwait2(s->ep, ev, (int)RTE_DIM(ev), &ts, NULL);
	if (n < 0 && errno == ENOSYS) /* kernels before 5.11: millisecond timeouts */
		n = epoll_wait(s->ep, ev, (int)RTE_DIM(ev), (int)((us + 999) / 1000));
	__atomic_store_n(&s->sleeping, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 == UINT32_MAX && read(s->evfd, &v, sizeof(v)) < 0) {
			/* EAGAIN: another wait read it */
		}
	return true;
}

/* ---- send ------------------------------------------------------------------------ */

/* Datagrams of @p len bytes that one GSO send may carry. */
static inline unsigned int gso_max(uint32_t len)
{
	return RTE_MIN((unsigned int)SK_GSO_SEGS, SK_GSO_BYTES / len);
}

/* Point message @p g at group @p g's datagrams (iovecs from @p iov on). @return iovecs used. */
static unsigned int group_msg(struct sk_lcore *s, unsigned int g, struct iovec *iov)
{
	struct msghdr *mh = &s->txm[g].msg_hdr;
	unsigned int ni = 0;

	for (unsigned int i = s->gfirst[g]; i != SK_NO_HDR; i = s->gnext[i]) {
		const struct sk_txq *q = &s->q[i];
		uint8_t *slot = s->slots + (size_t)q->slot * SK_DGRAM_MAX;

		if (q->hdr == SK_NO_HDR) {
			iov[ni++] = (struct iovec){slot, q->len};
		} else {
			iov[ni++] = (struct iovec){s->hdrs[q->hdr], SG_DP_HDR_LEN};
			iov[ni++] = (struct iovec){slot + SG_DP_HDR_LEN, q->len - SG_DP_HDR_LEN};
		}
	}
	dest_addr(s->q[s->gfirst[g]].dest, &s->txname[g]);
	*mh = (struct msghdr){.msg_name = &s->txname[g], .msg_namelen = sizeof(s->txname[g]),
			      .msg_iov = iov, .msg_iovlen = ni};
	if (s->gcount[g] > 1) {
		struct cmsghdr *cm;
		uint16_t seg = (uint16_t)s->q[s->gfirst[g]].len;

		mh->msg_control = s->txctl[g];
		mh->msg_controllen = sizeof(s->txctl[g]);
		cm = CMSG_FIRSTHDR(mh);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(seg));
		memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
	}
	return ni;
}

/* Send the @p ng prepared messages (one per group); a message that fails is counted
 * (its datagrams) and skipped. @return @p ng, or the group whose GSO send the kernel
 * refused (GSO is then off: the caller sends the rest again, one datagram each). */
static unsigned int send_msgs(struct sg_dp_lcore *lc, struct sk_lcore *s, unsigned int ng)
{
	unsigned int done = 0, tries = 0;

	while (done < ng) {
		int r = sendmmsg(s->txfd, s->txm + done, ng - done, MSG_DONTWAIT);
		unsigned int g = done;

		s->st.tx_calls++;
		if (r > 0) {
			for (unsigned int i = done; i < done + (unsigned int)r; i++) {
				lc->st.tx_pkts += s->gcount[i];
				lc->st.tx_bytes += (uint64_t)s->gcount[i] * s->q[s->gfirst[i]].len;
				s->st.tx_gso += s->gcount[i] > 1;
			}
			done += (unsigned int)r;
			tries = 0;
			continue;
		}
		if (errno == EINTR)
			continue;
		if ((errno == EAGAIN || errno == ENOBUFS) && ++tries < 16)
			continue; /* the socket buffer drains as the kernel delivers */
		if (s->gcount[g] > 1 && (errno == EINVAL || errno == EIO)) {
			/* the route refuses GSO (datagrams above its MTU, no checksum
			 * offload): one datagram per message from now on */
			s->st.tx_gso_refused++;
			s->gso = false;
			SG_DP_LOG(WARNING, "socket: lcore %u: the kernel refused a UDP_SEGMENT send "
				  "(%s); replies go one datagram per message from now on (set "
				  "[socket] gso = no to skip the attempt)", lc->lcore_id,
				  strerror(errno));
			return g;
		}
		if (errno == EAGAIN || errno == ENOBUFS)
			lc->st.drops[SG_DP_ND_TX_FULL] += s->gcount[g];
		else
			s->st.tx_errors += s->gcount[g];
		done++;
		tries = 0;
	}
	return ng;
}

/* Group the queued datagrams: one group per message, consecutive datagrams of one
 * length to one worker together while GSO allows. @return the number of groups. */
static unsigned int group_txq(struct sk_lcore *s)
{
	unsigned int ng = 0;

	for (unsigned int i = 0; i < s->nq; i++) {
		unsigned int g = ng;

		/* the worker's latest group, if GSO may extend it (the worker's
		 * datagrams keep their order) */
		for (unsigned int k = ng; s->gso && k-- > 0;)
			if (s->q[s->gfirst[k]].dest == s->q[i].dest) {
				if (s->q[s->gfirst[k]].len == s->q[i].len &&
				    s->gcount[k] < gso_max(s->q[i].len))
					g = k;
				break;
			}
		s->gnext[i] = SK_NO_HDR;
		if (g == ng) {
			ng++;
			s->gfirst[g] = (uint16_t)i;
			s->gcount[g] = 0;
		} else {
			s->gnext[s->glast[g]] = (uint16_t)i;
		}
		s->glast[g] = (uint16_t)i;
		s->gcount[g]++;
	}
	return ng;
}

/* Send every queued datagram. @return datagrams handed to the kernel or dropped. */
static unsigned int sk_tx_flush(struct sg_dp_lcore *lc, struct sk_lcore *s)
{
	unsigned int n = s->nq;

	while (s->nq > 0) {
		struct sk_txq rest[SK_TX_MSGS];
		unsigned int ng = group_txq(s), iv = 0, stop, m = 0;

		for (unsigned int g = 0; g < ng; g++)
			iv += group_msg(s, g, s->txiov + iv);
		stop = send_msgs(lc, s, ng);
		/* GSO refused at group stop: its datagrams and the later ones go again */
		for (unsigned int g = stop; g < ng; g++)
			for (unsigned int i = s->gfirst[g]; i != SK_NO_HDR; i = s->gnext[i])
				rest[m++] = s->q[i];
		memcpy(s->q, rest, m * sizeof(rest[0]));
		s->nq = m;
	}
	s->nslots = 0;
	return n;
}

static unsigned int sk_flush(struct sg_dp_lcore *lc)
{
	struct sk_lcore *s = lc->xp;

	return sk_tx_flush(lc, s);
}

static void *sk_tx_alloc(void *ctx, uint64_t dest, uint32_t len, void **pkt)
{
	struct sg_dp_lcore *lc = ctx;
	struct sk_lcore *s = lc->xp;

	if (len > SK_DGRAM_MAX)
		return NULL;
	if (s->nslots == SK_TX_SLOTS || s->nq == SK_TX_MSGS)
		sk_tx_flush(lc, s);
	(void)dest; /* send() is given it */
	*pkt = s;
	return s->slots + (size_t)s->nslots * SK_DGRAM_MAX;
}

static void sk_tx_send(void *ctx, uint64_t dest, void *pkt, uint32_t len)
{
	struct sk_lcore *s = pkt;

	(void)ctx;
	s->q[s->nq++] = (struct sk_txq){.dest = dest, .len = len,
					.slot = (uint16_t)s->nslots, .hdr = SK_NO_HDR};
	s->nslots++;
}

static void *sk_tx_alloc_multi(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
			       uint32_t len, void **pkt)
{
	struct sg_dp_lcore *lc = ctx;
	struct sk_lcore *s = lc->xp;

	(void)to;
	if (len > SK_DGRAM_MAX || len < SG_DP_HDR_LEN || n > SK_TX_MSGS)
		return NULL;
	if (s->nslots == SK_TX_SLOTS || s->nq + n > SK_TX_MSGS)
		sk_tx_flush(lc, s);
	*pkt = s;
	return s->slots + (size_t)s->nslots * SK_DGRAM_MAX;
}

static unsigned int sk_tx_send_multi(void *ctx, void *pkt, uint32_t len,
				     const struct sg_dp_tx_dest *to, unsigned int n)
{
	struct sk_lcore *s = pkt;
	const uint8_t *slot = s->slots + (size_t)s->nslots * SK_DGRAM_MAX;

	(void)ctx;
	/* one payload, a header per worker: its rank is the only difference */
	for (unsigned int i = 0; i < n; i++) {
		memcpy(s->hdrs[s->nq], slot, SG_DP_HDR_LEN);
		sg_dp_hdr_set_rank(s->hdrs[s->nq], to[i].rank);
		s->q[s->nq] = (struct sk_txq){.dest = to[i].dest, .len = len,
					      .slot = (uint16_t)s->nslots, .hdr = (uint16_t)s->nq};
		s->nq++;
	}
	s->nslots++;
	return n;
}

/* ---- set-up ------------------------------------------------------------------------ */

static const char *ip_str(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = {.s_addr = htonl(ip)};

	return inet_ntop(AF_INET, &a, buf, (socklen_t)len) ? buf : "?";
}

/* Socket buffer @p opt (SO_RCVBUF or SO_SNDBUF) of @p want bytes, forced when the process
 * may; @return 0, or the size the kernel granted when it is less. */
static int sock_buf(int fd, int opt, int force, unsigned int want)
{
	int v = (int)want, got = 0;
	socklen_t l = sizeof(got);

	if (setsockopt(fd, SOL_SOCKET, force, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
	/* the kernel doubles what it grants (room for its bookkeeping) */
	if (getsockopt(fd, SOL_SOCKET, opt, &got, &l) == 0 && (unsigned int)got / 2 < want)
		return got / 2;
	return 0;
}

/* A UDP socket bound to [net] ip and @p port, or -errno with the reason in @p err. */
static int sock_open(struct sg_dp_pipeline *p, uint16_t port, bool reuseport, bool rx, char *err,
		     size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	struct sk_transport *x = p->xp;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(c->ip)};
	int one = 1, fd, rc, got;
	char ip[INET_ADDRSTRLEN];

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		sg_dp_seterr(err, errlen, "socket: %s", strerror(errno));
		return rc;
	}
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
		rc = -errno;
		sg_dp_seterr(err, errlen, "SO_REUSEPORT: %s", strerror(errno));
		goto fail;
	}
	if (rx) {
		got = sock_buf(fd, SO_RCVBUF, SO_RCVBUFFORCE, c->sock.rcvbuf);
		if (got && !x->warned_rcv) {
			x->warned_rcv = true;
			SG_DP_LOG(WARNING, "socket: [socket] rcvbuf %u: the kernel granted %d bytes "
				  "(net.core.rmem_max); a burst beyond it is dropped by the kernel "
				  "(rx_kernel_drops): raise it (sysctl -w net.core.rmem_max=%u) or "
				  "give sigmad CAP_NET_ADMIN", c->sock.rcvbuf, got, c->sock.rcvbuf);
		}
		/* the kernel's drop count comes with each message */
		setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
		if (c->sock.gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0)
			SG_DP_LOG(INFO, "socket: UDP_GRO: %s: one datagram per message",
				  strerror(errno));
	}
	got = sock_buf(fd, SO_SNDBUF, SO_SNDBUFFORCE, c->sock.sndbuf);
	if (got && !x->warned_snd) {
		x->warned_snd = true;
		SG_DP_LOG(WARNING, "socket: [socket] sndbuf %u: the kernel granted %d bytes "
			  "(net.core.wmem_max): raise it (sysctl -w net.core.wmem_max=%u) or give "
			  "sigmad CAP_NET_ADMIN", c->sock.sndbuf, got, c->sock.sndbuf);
	}
	/* [net] udp_checksum = no: checksum 0 on what we send */
	if (!c->udp_checksum)
		setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		rc = -errno;
		ip_str(c->ip, ip, sizeof(ip));
		if (errno == EADDRNOTAVAIL)
			sg_dp_seterr(err, errlen, "[net] ip %s is not an address of this host (bind: "
				     "%s): set [net] ip to one of its addresses (127.0.0.1 for "
				     "workers on this machine, 0.0.0.0 for every address)", ip,
				     strerror(errno));
		else if (errno == EADDRINUSE)
			sg_dp_seterr(err, errlen, "UDP port %u of %s is in use (another sigmad or "
				     "program: ss -ulpn shows it): stop it, or set [net] udp_port "
				     "(the socket transport binds udp_port .. udp_port + %u)", port,
				     ip, SG_DP_STEER_PORTS);
		else if (errno == EACCES)
			sg_dp_seterr(err, errlen, "UDP port %u: %s: ports below 1024 need "
				     "CAP_NET_BIND_SERVICE: set [net] udp_port above 1023", port,
				     strerror(errno));
		else
			sg_dp_seterr(err, errlen, "bind %s:%u: %s", ip, port, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

/* Add a receiving socket on @p port to @p s's epoll set. */
static int add_sock(struct sg_dp_pipeline *p, struct sk_lcore *s, uint16_t port, bool reuseport,
		    char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = s->nsock};
	struct sk_sock *k = &s->sock[s->nsock];
	int fd = sock_open(p, port, reuseport, true, err, errlen);

	if (fd < 0)
		return fd;
	*k = (struct sk_sock){.fd = fd, .port = port};
	s->nsock++;
	s->st.sockets = s->nsock;
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		sg_dp_seterr(err, errlen, "epoll_ctl: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

static void sk_teardown(struct sg_dp_pipeline *p)
{
	struct sk_transport *x = p->xp;

	if (x == NULL)
		return;
	for (unsigned int i = 0; i < x->n; i++) {
		struct sk_lcore *s = x->lc[i];

		if (s == NULL)
			continue;
		for (unsigned int k = 0; k < s->nsock; k++)
			close(s->sock[k].fd);
		if (s->ep >= 0)
			close(s->ep);
		if (s->evfd >= 0)
			close(s->evfd);
		rte_free(s->rxbuf);
		rte_free(s->slots);
		rte_free(s);
		p->lc[i].xp = NULL;
	}
	for (unsigned int n = 0; n < RTE_MAX_NUMA_NODES; n++) {
		rte_mempool_free(p->pools[n]);
		p->pools[n] = NULL;
	}
	rte_free(x);
	p->xp = NULL;
}

/* One lcore's state, epoll set and buffers. */
static struct sk_lcore *lcore_new(struct sg_dp_pipeline *p, struct sg_dp_lcore *lc, char *err,
				  size_t errlen)
{
	struct sk_lcore *s = rte_zmalloc_socket("sg_sk_lcore", sizeof(*s), RTE_CACHE_LINE_SIZE,
						lc->socket);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};

	if (s == NULL) {
		sg_dp_seterr(err, errlen, "out of memory (lcore %u)", lc->lcore_id);
		return NULL;
	}
	s->lc = lc;
	s->txfd = -1;
	s->hand.msg_off = offsetof(struct sk_item, msg);
	s->gso = p->cfg.sock.gso && p->cfg.udp_checksum; /* the kernel refuses GSO without */
	s->vlen = RTE_MIN(p->cfg.burst, (unsigned int)SK_RX_VLEN); /* burst >= 1 */
	s->rxbuf_len = p->cfg.sock.gro ? SK_GRO_BUF : SK_DGRAM_MAX;
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	lc->xp = s;
	if (s->ep < 0 || s->evfd < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->evfd, &ev) < 0) {
		sg_dp_seterr(err, errlen, "lcore %u: epoll/eventfd: %s", lc->lcore_id,
			     strerror(errno));
		return NULL;
	}
	s->rxbuf = rte_malloc_socket("sg_sk_rx", (size_t)s->vlen * s->rxbuf_len, 64, lc->socket);
	s->slots = rte_malloc_socket("sg_sk_tx", (size_t)SK_TX_SLOTS * SK_DGRAM_MAX, 64,
				     lc->socket);
	if (s->rxbuf == NULL || s->slots == NULL) {
		sg_dp_seterr(err, errlen, "lcore %u: buffers of %u KiB: out of memory (give EAL "
			     "more with -m)", lc->lcore_id,
			     (unsigned int)(((size_t)s->vlen * s->rxbuf_len +
					     (size_t)SK_TX_SLOTS * SK_DGRAM_MAX) >> 10));
		return NULL;
	}
	for (unsigned int i = 0; i < s->vlen; i++) {
		s->rxiov[i] = (struct iovec){s->rxbuf + (size_t)i * s->rxbuf_len, s->rxbuf_len};
		s->rxm[i].msg_hdr = (struct msghdr){.msg_name = &s->rxname[i],
						    .msg_iov = &s->rxiov[i], .msg_iovlen = 1,
						    .msg_control = s->rxctl[i]};
	}
	return s;
}

/* Is UDP port @p port of [net] ip free? Another sigmad's SO_REUSEPORT group would
 * otherwise take ours in and share the workers with us. */
static int port_free(struct sg_dp_pipeline *p, uint16_t port, char *err, size_t errlen)
{
	int fd = sock_open(p, port, false, false, err, errlen);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static int sk_setup(struct sg_dp_pipeline *p, char *err, size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	struct sk_transport *x;
	struct sg_dp_lcore *io[SG_DP_MAX_LAYOUT];
	unsigned int nio = 0, nio_only = 0;
	char why[256], ip[INET_ADDRSTRLEN];
	int rc;

	x = rte_zmalloc("sg_sk", sizeof(*x), RTE_CACHE_LINE_SIZE);
	if (x == NULL) {
		sg_dp_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->xp = x;
	x->n = p->n_lc;
	/* no ethdev port is used: /sigma/ports and the agent's port list stay empty */
	memset(p->port_used, 0, sizeof(p->port_used));
	for (unsigned int r = 0; r < p->n_red; r++)
		p->red[r]->red_idx = (uint16_t)r;
	for (unsigned int i = 0; i < p->n_lc; i++) {
		x->lc[i] = lcore_new(p, &p->lc[i], err, errlen);
		if (x->lc[i] == NULL)
			return -ENOMEM;
		if (p->lc[i].role & SG_ROLE_IO)
			io[nio++] = &p->lc[i];
		nio_only += p->lc[i].role == SG_ROLE_IO;
	}
	rc = port_free(p, c->udp_port, why, sizeof(why));
	if (rc < 0) {
		sg_dp_seterr(err, errlen, "[transport] type = socket: %s", why);
		return rc;
	}
	/* the receiving lcores' shared port, in the layout's queue order */
	for (unsigned int q = 0; q < nio; q++)
		for (unsigned int i = 0; i < nio; i++) {
			struct sk_lcore *s = io[i]->xp;

			if (io[i]->rx_queue != q)
				continue;
			rc = add_sock(p, s, c->udp_port, true, why, sizeof(why));
			if (rc < 0) {
				sg_dp_seterr(err, errlen, "[transport] type = socket: lcore %u: %s",
					     io[i]->lcore_id, why);
				return rc;
			}
			s->txfd = s->sock[0].fd;
		}
	/* steering port j (udp_port + 1 + j) to reducer j mod R */
	for (unsigned int j = 0; j < SG_DP_STEER_PORTS; j++) {
		struct sg_dp_lcore *lc = p->red[j % p->n_red];

		rc = add_sock(p, lc->xp, (uint16_t)(c->udp_port + 1 + j), false, why, sizeof(why));
		if (rc < 0) {
			sg_dp_seterr(err, errlen, "[transport] type = socket: reducer lcore %u: %s",
				     lc->lcore_id, why);
			return rc;
		}
	}
	/* a pure reducer answers through an io lcore's socket on udp_port */
	for (unsigned int r = 0, k = 0; r < p->n_red; r++) {
		struct sk_lcore *s = p->red[r]->xp;

		if (s->txfd < 0)
			s->txfd = ((struct sk_lcore *)io[k++ % nio]->xp)->sock[0].fd;
	}
	/* items move only between reducers, or from an io lcore to one */
	if (p->n_red > 1 || nio_only > 0)
		for (unsigned int i = 0; i < p->n_lc; i++) {
			struct sk_lcore *s = p->lc[i].xp;

			s->hand.items = sg_dp_hand_pool(p, p->lc[i].socket,
							sizeof(struct sk_item) + SK_DGRAM_MAX, err,
							errlen);
			if (s->hand.items == NULL)
				return -ENOMEM;
		}
	SG_DP_LOG(INFO, "socket: %s:%u (SO_REUSEPORT over %u lcore(s)), reducer ports %u..%u "
		  "(%u reducer(s)), GRO %s, GSO %s", ip_str(c->ip, ip, sizeof(ip)), c->udp_port,
		  nio, c->udp_port + 1, c->udp_port + SG_DP_STEER_PORTS, p->n_red,
		  c->sock.gro ? "on" : "off",
		  ((struct sk_lcore *)p->lc[0].xp)->gso ? "on" : "off");
	return 0;
}

/* ---- telemetry and SIGHUP ------------------------------------------------------------ */

static unsigned int sk_counters(const struct sg_dp_pipeline *p, unsigned int idx,
				struct sg_dp_counter *out, unsigned int max)
{
	const struct sk_lcore *s;
	unsigned int n = 0;

	if (p->xp == NULL || idx >= p->n_lc || (s = p->lc[idx].xp) == NULL)
		return 0;
#define C(f, d) sg_dp_counter_put(out, &n, max, #f, s->st.f, d)
	C(sockets, false);
	C(rx_calls, false);
	C(rx_gro, false);
	C(tx_calls, false);
	C(tx_gso, false);
	C(sleeps, false);
	C(rx_not_sigma, true);
	C(rx_too_long, true);
	C(rx_kernel_drops, true);
	C(rx_errors, true);
	C(tx_errors, true);
	C(tx_gso_refused, false);
#undef C
	return n;
}

/* [socket] keys size or configure sockets made at start-up. */
static int sk_reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report)
{
	const struct sg_dp_sock_cfg *a = &p->cfg.sock, *b = &nc->sock;
	const struct {
		const char *key;
		bool changed;
	} f[] = {
		{"rcvbuf", a->rcvbuf != b->rcvbuf}, {"sndbuf", a->sndbuf != b->sndbuf},
		{"gro", a->gro != b->gro}, {"gso", a->gso != b->gso},
	};
	int restart = 0;

	for (size_t i = 0; i < RTE_DIM(f); i++) {
		if (!f[i].changed)
			continue;
		restart++;
		if (report)
			fprintf(report, "sigmad: SIGHUP: [socket] %s changed: needs a restart "
				"(sockets are made at start-up)\n", f[i].key);
	}
	return restart;
}

static const struct sg_dp_transport sg_dp_transport_socket = {
	.name = "socket",
	.check = sk_check,
	.setup = sk_setup,
	.teardown = sk_teardown,
	.rx = sk_rx,
	.rx_steered = sk_rx_steered,
	.reduce = sk_reduce,
	.release = sg_dp_hand_release,
	.flush = sk_flush,
	.tx = {.alloc = sk_tx_alloc, .send = sk_tx_send, .alloc_multi = sk_tx_alloc_multi,
	       .send_multi = sk_tx_send_multi},
	.counters = sk_counters,
	.reload = sk_reload,
	.idle_wait = sk_idle_wait,
	.wake = sk_wake,
};
SG_DP_TRANSPORT_REGISTER(SG_DP_TRANSPORT_SOCKET, sg_dp_transport_socket);
