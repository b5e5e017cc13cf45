/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memif guard: sigmad relays the control channel of its memif server
 * ports, because DPDK 22.11's memif PMD lets a client crash the server.
 *
 * The PMD runs each control channel (a SOCK_SEQPACKET unix socket) in EAL's
 * interrupt thread. Two of its behaviours killed sigmad:
 *  1. When a client connects and closes before the interrupt thread accepts
 *     it, the PMD's listener handler fails to send HELLO (EPIPE); it then
 *     closes the accepted socket but leaves the socket's interrupt callback
 *     registered, and the interrupt thread panics when it next rebuilds its
 *     epoll set ("Error adding fd N epoll_ctl, Bad file descriptor"). Busy
 *     machines make this common: the listen backlog is 1, and a client that
 *     gives up waiting for its link closes and retries while its first
 *     connection still waits to be accepted.
 *  2. When a client leaves, the PMD unmaps the shared rings in the interrupt
 *     thread while an lcore may be inside rte_eth_rx_burst() or
 *     rte_eth_tx_burst() on that port, which checks the link only on entry:
 *     SIGSEGV in the PMD (most likely with the busy idle policy).
 *
 * We cannot patch the PMD, so a thread of sigmad stands between the clients
 * and it. It takes over the listening socket the clients connect to (the
 * PMD's own, found by its address), and the PMD's file descriptor is made to
 * listen on a private socket in EAL's runtime directory (mode 0700) instead.
 * For each client the thread opens its own connection to the PMD and relays
 * messages, and the file descriptors they carry, both ways:
 *  - that connection is closed only after the PMD's HELLO has come through
 *    it (or the PMD closed it), whatever the client does (1);
 *  - once the client has sent CONNECT, the PMD may map the rings and the
 *    lcores use them; the session then ends only in this order: every lcore
 *    stops using the port (sg_dp_eth_port_gate() returns once each running
 *    lcore has finished the loop it was in), the PMD gets end-of-file and
 *    disconnects, the PMD closes its end, and the lcores resume (2). A client
 *    has nothing to say after CONNECT, so whatever it sends then also ends
 *    the session.
 * The PMD never learns a client's credentials (it does not use them), and
 * the relay's socket to the clients listens with a backlog of 64.
 */
/* 22.11 has interrupt handles only through its experimental rte_intr_instance_*()
 * (eal_intr_rebuild() needs one); they are in Debian's librte_eal.so.23. */
#define ALLOW_EXPERIMENTAL_API
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_kvargs.h>
#include <rte_rcu_qsbr.h>

#include "sg_dp_eth.h"
#include "sg_dp_lcore.h"
#include "sg_dp_memif.h"
#include "sg_parse.h"

/* The memif control protocol (facts from its specification): every message is 128
 * bytes; a 16-bit type (host order) comes first; INIT carries the interface id as
 * a 32-bit field at byte 4, after a 16-bit version. */
#define MG_MSG_LEN 128
#define MG_MSG_HELLO 2
#define MG_MSG_INIT 3
#define MG_MSG_CONNECT 6
#define MG_MSG_CONNECTED 7
#define MG_INIT_ID_OFF 4
#define MG_MAX_FDS 4         /* a message carries at most one; more are refused */
#define MG_MAX_PAIRS 64      /* clients at once (each memif id serves one) */
#define MG_BACKLOG 64
#define MG_STOP_WAIT_MS 2000 /* at stop: how long the PMD gets to see clients leave */
/* The PMD's defaults (its devargs): role client, id 0, this socket, abstract. */
#define MG_DEFAULT_SOCKET "/run/memif.sock"

/*
 * The wake-up channel (docs/sigmad.md, "memif wake-up channel"): sigmad's own
 * messages on a second connection to the memif socket, 128 bytes each like memif's,
 * of a type memif does not use. A PMD that gets one disconnects, so an older sigmad
 * simply refuses the channel and the client polls as before.
 */
#define MG_MSG_WAKE 0x5357      /* "WS" */
#define MG_WAKE_VERSION 1
#define MG_WAKE_ID_OFF 4        /* u32: the memif interface id of the client's port */
#define MG_WAKE_OP_OFF 8        /* u16 */
#define MG_WAKE_QUEUE_OFF 10    /* u16 */
#define MG_WAKE_COUNT_OFF 12    /* u16 */
#define MG_WAKE_STATUS_OFF 16   /* u32: 0 or an errno */
#define MG_WAKE_RXQ 1           /* client: an event fd for its RX queue (sigmad writes it) */
#define MG_WAKE_DONE 2          /* client: that was all (count: how many) */
#define MG_WAKE_TXQ 3           /* sigmad: the event fd the client writes after a TX burst */
#define MG_WAKE_ACK 4           /* sigmad: status; 0 = the channel is open */
#define MG_WAKE_MAXQ 32
#define MG_IDLE_WAIT_US 10000   /* an lcore's longest block: its engine's timers (as sockets) */

struct mg_sock {
	int pub;                 /* where clients connect: the PMD's listener, taken over */
	struct sockaddr_un priv; /* where the PMD's listening descriptor listens now */
	socklen_t priv_len;
	uint32_t ports;          /* memif server ports on this socket (bit mask) */
};

enum mg_state {
	MG_FREE,
	MG_RELAY,      /* both ends open */
	MG_WAIT_HELLO, /* the client left before the PMD's HELLO came: wait for it */
	MG_TEARING,    /* live session ending: stop the ports, then wait for the PMD's close */
};

struct mg_pair {
	enum mg_state st;
	int c, d;          /* the client's connection; ours to the PMD */
	unsigned int sock;
	uint32_t ports;    /* ports its INITs named (0: none yet; then all of the socket's) */
	uint32_t held;     /* ports this pair keeps stopped (sg_dp_eth_port_gate) */
	bool hello, live, shut;
};

/* A wake-up channel's connection, from its first message until it closes. */
struct mg_wake {
	int c;                    /* -1: free */
	unsigned int sock;
	int port;                 /* the port it serves once open, else -1 */
	uint16_t nq;              /* RXQ messages so far */
	int rxq[MG_WAKE_MAXQ];    /* the client's event fds, by its RX queue */
};

/* A port's open channel, as its lcores see it. */
struct mg_port_wake {
	bool on;                  /* atomic; fds valid while set (and an RCU grace after) */
	uint16_t nq;
	int cli[MG_WAKE_MAXQ];    /* written after TX on queue q (= the client's RX queue q) */
	int srv;                  /* written by the client after its TX (our RX queue 0) */
	unsigned int wake;        /* its mg_wake */
	unsigned int pair;        /* the memif session it belongs to */
};

/* Where an lcore blocks when every queue it polls has a channel. */
struct mg_lcore {
	int ep, evfd;
	int sleeping;             /* atomic: in idle_wait(), a waker writes evfd */
};

struct sg_dp_memif_guard {
	struct sg_dp_pipeline *p;
	pthread_t thread;
	int stop_fd;
	unsigned int nsock;
	struct mg_sock sock[SG_DP_MAX_PORTS];
	unsigned int nsrv;
	struct {
		uint32_t id;
		uint16_t port;
		unsigned int sock;
	} srv[SG_DP_MAX_PORTS];
	unsigned int stopped[SG_DP_MAX_PORTS]; /* pairs holding each port stopped */
	uint64_t refused;                      /* clients closed at once (logged 1, 2, 4...) */
	uint64_t wake_refused;                 /* wake-up channels refused (logged alike) */
	struct mg_pair pair[MG_MAX_PAIRS];
	struct mg_wake wake[MG_MAX_PAIRS];
	struct mg_port_wake pw[SG_DP_MAX_PORTS];
	unsigned int nlc;
	struct mg_lcore *lc;                   /* by lcore index */
};

/* One message with the descriptor it carries (-1: none). */
struct mg_msg {
	uint8_t b[MG_MSG_LEN];
	size_t len;
	int fd;
};

/* ---- finding and taking over the PMD's listener ----------------------------------- */

/*
 * The memif server ports' sockets and ids, as the PMD parsed its devargs.
 * @return 1 with @p path, @p abstract and @p id set for a memif server port; 0 otherwise.
 */
static int memif_server(uint16_t port, char *path, size_t cap, bool *abstract, uint32_t *id)
{
	struct rte_eth_dev_info info;
	const struct rte_devargs *da;
	struct rte_kvargs *kv;
	const char *v;
	int server = 0;

	if (rte_eth_dev_info_get(port, &info) < 0 || strcmp(info.driver_name, "net_memif") != 0)
		return 0;
	da = rte_dev_devargs(info.device);
	if (da == NULL || da->args == NULL || (kv = rte_kvargs_parse(da->args, NULL)) == NULL)
		return 0;
	v = rte_kvargs_get(kv, "role");
	if (v != NULL && (strstr(v, "server") != NULL || strstr(v, "master") != NULL)) {
		server = 1;
		v = rte_kvargs_get(kv, "id");
		*id = v != NULL ? (uint32_t)strtoul(v, NULL, 10) : 0;
		v = rte_kvargs_get(kv, "socket");
		snprintf(path, cap, "%s", v != NULL ? v : MG_DEFAULT_SOCKET);
		v = rte_kvargs_get(kv, "socket-abstract");
		*abstract = v == NULL || strstr(v, "yes") != NULL;
	}
	rte_kvargs_free(kv);
	return server;
}

/* Is @p fd a listening SOCK_SEQPACKET unix socket bound to @p path? */
static bool is_listener(int fd, const char *path, bool abstract)
{
	struct sockaddr_un a;
	socklen_t len = sizeof(a);
	int v = 0;
	socklen_t vl = sizeof(v);
	size_t n = strlen(path);

	memset(&a, 0, sizeof(a));
	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0 || a.sun_family != AF_UNIX)
		return false;
	if (abstract) {
		/* the PMD binds an abstract name without a trailing NUL */
		if (len != offsetof(struct sockaddr_un, sun_path) + 1 + n ||
		    a.sun_path[0] != '\0' || memcmp(a.sun_path + 1, path, n) != 0)
			return false;
	} else if (strncmp(a.sun_path, path, sizeof(a.sun_path)) != 0) {
		return false;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) < 0 || v != SOCK_SEQPACKET)
		return false;
	vl = sizeof(v);
	/* accepted sockets report the listener's address too */
	return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) == 0 && v == 1;
}

/* The descriptor of the PMD's listener on @p path, or -ENOENT. */
static int find_listener(const char *path, bool abstract)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -ENOENT;

	if (dir == NULL)
		return -errno;
	while (found < 0 && (e = readdir(dir)) != NULL) {
		uint64_t fd;

		if (sg_parse_u64(e->d_name, 0, INT_MAX, &fd) == 0 && (int)fd != dirfd(dir) &&
		    is_listener((int)fd, path, abstract))
			found = (int)fd;
	}
	closedir(dir);
	return found;
}

static void noop_intr(void *arg)
{
	RTE_SET_USED(arg);
}

/*
 * EAL's interrupt thread keeps an epoll set that it rebuilds only when a callback
 * comes or goes. The PMD's listening descriptor now names another socket, but the
 * set still watches the old one: add and remove a callback so that it rebuilds.
 */
static void eal_intr_rebuild(void)
{
	struct rte_intr_handle *h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	int efd = eventfd(0, EFD_CLOEXEC);

	if (h != NULL && efd >= 0 && rte_intr_fd_set(h, efd) == 0 &&
	    rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) == 0 &&
	    rte_intr_callback_register(h, noop_intr, NULL) == 0)
		rte_intr_callback_unregister_sync(h, noop_intr, NULL);
	if (efd >= 0)
		close(efd);
	rte_intr_instance_free(h);
}

/* Take over the PMD's listener on @p path: clients now reach our @p s->pub, the PMD
 * listens on a private socket. @return 0 or -errno (the socket stays unguarded). */
static int sock_take_over(struct sg_dp_memif_guard *g, struct mg_sock *s, const char *path,
			  bool abstract)
{
	int lfd = find_listener(path, abstract), priv = -1, rc;
	struct sockaddr_un *a = &s->priv;

	if (lfd < 0)
		return lfd;
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (snprintf(a->sun_path, sizeof(a->sun_path), "%s/memif-guard-%u.sock",
		     rte_eal_get_runtime_dir(), g->nsock) >= (int)sizeof(a->sun_path))
		return -ENAMETOOLONG;
	s->priv_len = (socklen_t)sizeof(*a);
	s->pub = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
	priv = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	unlink(a->sun_path);
	/* the PMD listens with a backlog of 1; clients that come together get more */
	if (s->pub < 0 || priv < 0 || listen(s->pub, MG_BACKLOG) < 0 ||
	    bind(priv, (struct sockaddr *)a, s->priv_len) < 0 || listen(priv, MG_BACKLOG) < 0 ||
	    dup2(priv, lfd) < 0) {
		rc = -errno;
		if (priv >= 0) {
			close(priv);
			unlink(a->sun_path);
		}
		if (s->pub >= 0)
			close(s->pub);
		s->pub = -1;
		return rc;
	}
	/* Non-blocking (shared by lfd): the PMD's accept() must not wait while EAL's
	 * epoll set still reports the old socket. Accepted sockets do not inherit it. */
	close(priv);
	eal_intr_rebuild();
	return 0;
}

/* ---- relaying ------------------------------------------------------------------ */

/* Receive one message. @return its length, 0 at end-of-file, or -errno. */
static ssize_t msg_recv(int fd, struct mg_msg *m)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MG_MAX_FDS) + CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = m->b, .iov_len = sizeof(m->b)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	ssize_t n;
	bool bad = false;

	m->fd = -1;
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		int fds[MG_MAX_FDS];
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(c), RTE_MIN(k, (size_t)MG_MAX_FDS) * sizeof(int));
		for (size_t i = 0; i < k && i < MG_MAX_FDS; i++) {
			if (m->fd < 0)
				m->fd = fds[i];
			else {
				close(fds[i]);
				bad = true;
			}
		}
	}
	if (bad || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (n > 0 && n != MG_MSG_LEN)) {
		if (m->fd >= 0)
			close(m->fd);
		m->fd = -1;
		return -EPROTO; /* not a memif message: the session ends */
	}
	m->len = (size_t)n;
	return n;
}

/* Send @p m (and its descriptor, which is closed here). @return 0 or -errno. */
static int msg_send(int fd, struct mg_msg *m)
{
	ssize_t n = sg_dp_net_send_fd(fd, m->b, m->len, m->fd, MSG_DONTWAIT);

	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	return n == (ssize_t)m->len ? 0 : n < 0 ? (int)n : -EIO;
}

static uint16_t msg_type(const struct mg_msg *m)
{
	uint16_t t;

	memcpy(&t, m->b, sizeof(t));
	return t;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Stop every lcore's use of the pair's ports; the last pair to let go resumes them. */
static void ports_stop(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	pr->held = pr->ports != 0 ? pr->ports : g->sock[pr->sock].ports;
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if ((pr->held >> port & 1) && g->stopped[port]++ == 0)
			sg_dp_eth_port_gate(g->p, port, false);
}

static void ports_resume(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if ((pr->held >> port & 1) && --g->stopped[port] == 0)
			sg_dp_eth_port_gate(g->p, port, true);
	pr->held = 0;
}

static void wake_end_pair(struct sg_dp_memif_guard *g, const struct mg_pair *pr);

static void pair_free(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	wake_end_pair(g, pr);
	close_fd(&pr->c);
	close_fd(&pr->d);
	ports_resume(g, pr);
	pr->st = MG_FREE;
}

/* A live session ends: the ports stop, then the PMD sees end-of-file; its close ends
 * the pair (MG_TEARING) and resumes the ports. */
static void pair_tear(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	pr->st = MG_TEARING;
	wake_end_pair(g, pr);
	close_fd(&pr->c);
	ports_stop(g, pr);
	shutdown(pr->d, SHUT_WR);
	pr->shut = true;
	SG_DP_LOG(DEBUG, "memif: client %u left: ports 0x%x stopped, PMD told",
		  (unsigned int)(pr - g->pair), pr->held);
}

/* The client left (or broke the protocol). */
static void client_gone(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	if (pr->live) {
		pair_tear(g, pr);
	} else if (!pr->hello) {
		/* the PMD's HELLO may still be on its way: its send must not fail (1) */
		close_fd(&pr->c);
		pr->st = MG_WAIT_HELLO;
	} else {
		pair_free(g, pr); /* no rings mapped yet: the PMD may disconnect at once */
	}
}

static uint32_t ports_of_id(const struct sg_dp_memif_guard *g, unsigned int sock, uint32_t id)
{
	for (unsigned int i = 0; i < g->nsrv; i++)
		if (g->srv[i].sock == sock && g->srv[i].id == id)
			return 1u << g->srv[i].port;
	return g->sock[sock].ports; /* not ours: the PMD will refuse it; stop them all anyway */
}

/* ---- the wake-up channel ------------------------------------------------------ */

static uint16_t msg_u16(const struct mg_msg *m, size_t off)
{
	uint16_t v;

	memcpy(&v, m->b + off, sizeof(v));
	return v;
}

/* Is @p fd an event fd? An lcore writes it: a pipe or a socket could block it. */
static bool is_eventfd(int fd)
{
	char path[40], link[40];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = '\0';
	return strcmp(link, "anon_inode:[eventfd]") == 0;
}

static pid_t peer_pid(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? cr.pid : -1;
}

/* Does lcore @p lc poll RX queue 0 of @p port, the one a channel's client sends to? */
static bool polls_q0(const struct sg_dp_lcore *lc, uint16_t port)
{
	if (!(lc->role & SG_ROLE_IO))
		return false;
	if (lc->rx_port == port && lc->rx_queue == 0)
		return true;
	for (unsigned int i = 0; i < lc->n_xq; i++)
		if (lc->xq_port[i] == port && lc->xq[i] == 0)
			return true;
	return false;
}

/* Every lcore has finished the loop in which it last read a channel's descriptors. */
static void lcores_sync(struct sg_dp_memif_guard *g)
{
	uint64_t t = rte_rcu_qsbr_start(g->p->rcu);

	while (!rte_rcu_qsbr_check(g->p->rcu, t, false))
		rte_delay_us_sleep(20);
}

static void lcores_kick(struct sg_dp_memif_guard *g)
{
	for (unsigned int i = 0; i < g->nlc; i++)
		sg_dp_memif_wake(&g->p->lc[i]);
}

static void wake_reply(struct mg_wake *w, uint16_t op, uint32_t status, int fd)
{
	struct mg_msg m = {.len = MG_MSG_LEN, .fd = fd};
	uint16_t t = MG_MSG_WAKE, v = MG_WAKE_VERSION;

	memcpy(m.b, &t, sizeof(t));
	memcpy(m.b + 2, &v, sizeof(v));
	memcpy(m.b + MG_WAKE_OP_OFF, &op, sizeof(op));
	memcpy(m.b + MG_WAKE_STATUS_OFF, &status, sizeof(status));
	if (msg_send(w->c, &m) < 0) {
		/* the client left: its end-of-file closes the channel */
	}
}

/* Close channel @p w: its port's lcores stop using it first. */
static void wake_close(struct sg_dp_memif_guard *g, struct mg_wake *w)
{
	if (w->port >= 0) {
		struct mg_port_wake *pw = &g->pw[w->port];

		__atomic_store_n(&pw->on, false, __ATOMIC_RELEASE);
		lcores_sync(g);
		for (unsigned int i = 0; i < g->nlc; i++)
			if (polls_q0(&g->p->lc[i], (uint16_t)w->port))
				epoll_ctl(g->lc[i].ep, EPOLL_CTL_DEL, pw->srv, NULL);
		close_fd(&pw->srv);
		for (unsigned int q = 0; q < pw->nq; q++)
			close_fd(&pw->cli[q]);
		pw->nq = 0;
		SG_DP_LOG(DEBUG, "memif: port %d: wake-up channel closed", w->port);
		w->port = -1;
		lcores_kick(g); /* a sleeping lcore polls its port again */
	}
	for (unsigned int q = 0; q < MG_WAKE_MAXQ; q++)
		close_fd(&w->rxq[q]);
	close_fd(&w->c);
}

static void wake_end_pair(struct sg_dp_memif_guard *g, const struct mg_pair *pr)
{
	for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
		if (g->pw[port].on && g->pw[port].pair == (unsigned int)(pr - g->pair))
			wake_close(g, &g->wake[g->pw[port].wake]);
}

/* DONE: open channel @p w for interface @p id. @return 0 or -errno (the reason to give). */
static int wake_open(struct sg_dp_memif_guard *g, struct mg_wake *w, uint32_t id,
		     uint16_t count)
{
	struct mg_port_wake *pw;
	int port = -1, pair = -1;
	pid_t pid = peer_pid(w->c);

	for (unsigned int i = 0; i < g->nsrv; i++)
		if (g->srv[i].sock == w->sock && g->srv[i].id == id)
			port = g->srv[i].port;
	if (port < 0)
		return -ENODEV;
	if (count == 0 || count != w->nq)
		return -EINVAL;
	pw = &g->pw[port];
	if (pw->on)
		return -EBUSY;
	/* the channel serves the memif session of the same process on that port */
	for (unsigned int i = 0; i < MG_MAX_PAIRS && pair < 0; i++) {
		const struct mg_pair *pr = &g->pair[i];

		if (pr->st == MG_RELAY && pr->live && (pr->ports >> port & 1) && pid > 0 &&
		    peer_pid(pr->c) == pid)
			pair = (int)i;
	}
	if (pair < 0)
		return -ENOTCONN;
	if (g->nlc == 0)
		return -ENOMEM;
	pw->srv = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (pw->srv < 0)
		return -errno;
	for (unsigned int i = 0; i < g->nlc; i++) {
		/* edge-triggered: the lcore never reads it, so it never touches a closed fd */
		struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u32 = (uint32_t)port};

		if (polls_q0(&g->p->lc[i], (uint16_t)port) &&
		    epoll_ctl(g->lc[i].ep, EPOLL_CTL_ADD, pw->srv, &ev) < 0) {
			int rc = -errno;

			for (unsigned int k = 0; k < i; k++)
				if (polls_q0(&g->p->lc[k], (uint16_t)port))
					epoll_ctl(g->lc[k].ep, EPOLL_CTL_DEL, pw->srv, NULL);
			close_fd(&pw->srv);
			return rc;
		}
	}
	pw->nq = w->nq;
	for (unsigned int q = 0; q < w->nq; q++) {
		pw->cli[q] = w->rxq[q];
		w->rxq[q] = -1;
	}
	pw->wake = (unsigned int)(w - g->wake);
	pw->pair = (unsigned int)pair;
	w->port = port;
	__atomic_store_n(&pw->on, true, __ATOMIC_RELEASE);
	SG_DP_LOG(INFO, "memif: port %d (id %u): wake-up channel open, %u queues", port, id,
		  (unsigned int)w->nq);
	return 0;
}

/* One message of channel @p w. @return 0, or -errno: the channel is refused. */
static int wake_msg(struct sg_dp_memif_guard *g, struct mg_wake *w, struct mg_msg *m)
{
	uint16_t op = msg_u16(m, MG_WAKE_OP_OFF), q = msg_u16(m, MG_WAKE_QUEUE_OFF);
	uint32_t id;
	int rc;

	if (msg_type(m) != MG_MSG_WAKE || msg_u16(m, 2) != MG_WAKE_VERSION || w->port >= 0)
		return -EPROTO; /* nothing follows an open channel's DONE */
	if (op == MG_WAKE_RXQ) {
		int fl;

		if (m->fd < 0 || !is_eventfd(m->fd))
			return -EBADF;
		if (q != w->nq || q >= MG_WAKE_MAXQ)
			return -EINVAL;
		/* our writes must never block an lcore */
		fl = fcntl(m->fd, F_GETFL);
		if (fl < 0 || fcntl(m->fd, F_SETFL, fl | O_NONBLOCK) < 0)
			return -errno;
		w->rxq[w->nq++] = m->fd;
		m->fd = -1;
		return 0;
	}
	if (op != MG_WAKE_DONE || m->fd >= 0)
		return -EPROTO;
	memcpy(&id, m->b + MG_WAKE_ID_OFF, sizeof(id));
	rc = wake_open(g, w, id, msg_u16(m, MG_WAKE_COUNT_OFF));
	if (rc < 0)
		return rc;
	wake_reply(w, MG_WAKE_TXQ, 0, fcntl(g->pw[w->port].srv, F_DUPFD_CLOEXEC, 0));
	wake_reply(w, MG_WAKE_ACK, 0, -1);
	return 0;
}

/* Handle @p m (received on @p w->c: @p n as msg_recv() returned); refusals are counted. */
static void wake_input(struct sg_dp_memif_guard *g, struct mg_wake *w, ssize_t n,
		       struct mg_msg *m)
{
	int rc = n > 0 ? wake_msg(g, w, m) : n == 0 ? -ECONNRESET : (int)n;

	if (m->fd >= 0)
		close_fd(&m->fd);
	if (rc == 0)
		return;
	if (rc != -ECONNRESET && w->port < 0) {
		g->wake_refused++;
		if ((g->wake_refused & (g->wake_refused - 1)) == 0)
			SG_DP_LOG(WARNING, "memif: a wake-up channel refused (%" PRIu64
				  " so far): %s", g->wake_refused, strerror(-rc));
		wake_reply(w, MG_WAKE_ACK, (uint32_t)-rc, -1);
	}
	wake_close(g, w);
}

/* The first message of pair @p pr is a wake-up channel's: the connection becomes one, and
 * the pair's connection to the PMD ends as a client's that left would. */
static void wake_begin(struct sg_dp_memif_guard *g, struct mg_pair *pr, struct mg_msg *m)
{
	struct mg_wake *w = NULL;

	for (unsigned int i = 0; i < MG_MAX_PAIRS && w == NULL; i++)
		if (g->wake[i].c < 0)
			w = &g->wake[i];
	if (w == NULL) {
		close_fd(&m->fd);
		client_gone(g, pr); /* counted as a refused client */
		g->refused++;
		return;
	}
	w->c = pr->c;
	w->sock = pr->sock;
	w->port = -1;
	w->nq = 0;
	pr->c = -1;
	client_gone(g, pr);
	wake_input(g, w, MG_MSG_LEN, m);
}

static void on_wake(struct sg_dp_memif_guard *g, struct mg_wake *w)
{
	struct mg_msg m;
	ssize_t n = msg_recv(w->c, &m);

	if (n != -EAGAIN)
		wake_input(g, w, n, &m);
}

/* ---- the lcores' side ---------------------------------------------------------- */

/* Can lcore @p lc block? Only if an arrival on every queue it polls would wake it. */
static bool lcore_covered(const struct sg_dp_memif_guard *g, const struct sg_dp_lcore *lc)
{
	const struct sg_dp_pipeline *p = lc->p;

	if (lc->role & SG_ROLE_REDUCE)
		for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++)
			if (p->port_steer[port])
				return false;
	if (!(lc->role & SG_ROLE_IO) || p->stop_rx)
		return true;
	/* a channel's client sends on its queue 0 only: the port's other queues stay empty */
	return lc->rx_port < SG_DP_MAX_PORTS &&
	       __atomic_load_n(&g->pw[lc->rx_port].on, __ATOMIC_ACQUIRE);
}

void sg_dp_memif_tx_kick(struct sg_dp_pipeline *p, uint16_t port, uint16_t queue)
{
	struct mg_port_wake *pw = &p->memif->pw[port];
	uint64_t one = 1;

	/* the burst is in the ring; a write that finds the counter full changes nothing */
	if (__atomic_load_n(&pw->on, __ATOMIC_ACQUIRE) && queue < pw->nq &&
	    write(pw->cli[queue], &one, sizeof(one)) < 0) {
	}
}

void sg_dp_memif_wake(struct sg_dp_lcore *lc)
{
	struct sg_dp_memif_guard *g = lc->p->memif;

	if (g == NULL || lc->idx >= g->nlc)
		return;
	sg_dp_idle_wake(&g->lc[lc->idx].sleeping, g->lc[lc->idx].evfd);
}

bool sg_dp_memif_idle_wait(struct sg_dp_lcore *lc, unsigned int us)
{
	struct sg_dp_memif_guard *g = lc->p->memif;
	struct mg_lcore *ml;

	if (g == NULL || lc->idx >= g->nlc || !lcore_covered(g, lc))
		return false;
	ml = &g->lc[lc->idx];
	/* a client's write after its burst (edge-triggered: it reports even one that came
	 * since the last poll of the ring), a hand-off, a control call or the stop */
	sg_dp_idle_block(lc, &ml->sleeping, ml->ep, ml->evfd,
			 RTE_MAX(us, (unsigned int)MG_IDLE_WAIT_US));
	return true;
}

/* Each lcore's epoll set with its own event fd. @return 0 or -errno. */
static int lcores_wake_setup(struct sg_dp_memif_guard *g)
{
	g->lc = calloc(g->p->n_lc, sizeof(*g->lc));
	if (g->lc == NULL)
		return -ENOMEM;
	for (unsigned int i = 0; i < g->p->n_lc; i++) {
		struct mg_lcore *ml = &g->lc[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};

		g->nlc = i + 1;
		ml->ep = epoll_create1(EPOLL_CLOEXEC);
		ml->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (ml->ep < 0 || ml->evfd < 0 ||
		    epoll_ctl(ml->ep, EPOLL_CTL_ADD, ml->evfd, &ev) < 0)
			return -errno;
	}
	return 0;
}

static void lcores_wake_free(struct sg_dp_memif_guard *g)
{
	for (unsigned int i = 0; i < g->nlc; i++) {
		close_fd(&g->lc[i].ep);
		close_fd(&g->lc[i].evfd);
	}
	free(g->lc);
	g->lc = NULL;
	g->nlc = 0;
}

static void on_client(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	struct mg_msg m;
	ssize_t n = msg_recv(pr->c, &m);

	if (n == -EAGAIN)
		return;
	if (n <= 0 || pr->live) {
		if (m.fd >= 0)
			close(m.fd);
		SG_DP_LOG(DEBUG, "memif: client %u: %s (live %d, hello %d)",
			  (unsigned int)(pr - g->pair), n < 0 ? strerror((int)-n) :
			  n == 0 ? "end-of-file" : "a message after CONNECT", pr->live, pr->hello);
		client_gone(g, pr);
		return;
	}
	if (msg_type(&m) == MG_MSG_WAKE && pr->ports == 0) {
		wake_begin(g, pr, &m);
		return;
	}
	if (msg_type(&m) == MG_MSG_INIT) {
		uint32_t id;

		memcpy(&id, m.b + MG_INIT_ID_OFF, sizeof(id));
		pr->ports |= ports_of_id(g, pr->sock, id); /* a second INIT adds its port */
		SG_DP_LOG(DEBUG, "memif: client %u: id %u (ports 0x%x)",
			  (unsigned int)(pr - g->pair), id, pr->ports);
	} else if (msg_type(&m) == MG_MSG_CONNECT) {
		pr->live = true; /* the PMD maps the rings as it reads this */
	}
	if (msg_send(pr->d, &m) < 0)
		client_gone(g, pr);
}

static void on_pmd(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
	struct mg_msg m;
	ssize_t n = msg_recv(pr->d, &m);

	if (n == -EAGAIN)
		return;
	if (n <= 0) {
		/* the PMD closed: the session is over on its side (in MG_TEARING: as asked) */
		if (m.fd >= 0)
			close(m.fd);
		SG_DP_LOG(DEBUG, "memif: client %u: the PMD closed (state %d, ports 0x%x held)",
			  (unsigned int)(pr - g->pair), pr->st, pr->held);
		pair_free(g, pr);
		return;
	}
	if (m.fd >= 0) {
		close(m.fd); /* the PMD sends none; a client gets nothing from sigmad's table */
		m.fd = -1;
	}
	if (msg_type(&m) == MG_MSG_HELLO)
		pr->hello = true;
	/* the PMD mapped the client's regions before it said CONNECTED */
	if (msg_type(&m) == MG_MSG_CONNECTED && pr->st == MG_RELAY)
		SG_DP_LOG(DEBUG, "memif: client %u connected: %zu bytes of regions written",
			  (unsigned int)(pr - g->pair), sg_dp_net_memif_populate());
	if (pr->st == MG_WAIT_HELLO) {
		if (pr->hello)
			pair_free(g, pr);
	} else if (pr->st == MG_RELAY && msg_send(pr->c, &m) < 0) {
		client_gone(g, pr);
	}
	/* MG_TEARING: the PMD's last words go nowhere */
}

static void on_accept(struct sg_dp_memif_guard *g, unsigned int k)
{
	struct mg_sock *s = &g->sock[k];
	struct mg_pair *pr = NULL;
	int c = accept4(s->pub, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), d;

	if (c < 0)
		return;
	for (unsigned int i = 0; i < MG_MAX_PAIRS && pr == NULL; i++)
		if (g->pair[i].st == MG_FREE)
			pr = &g->pair[i];
	d = pr ? socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
	if (d < 0 || connect(d, (const struct sockaddr *)&s->priv, s->priv_len) < 0) {
		const char *why = pr == NULL ? "too many clients at once" : strerror(errno);

		g->refused++;
		if ((g->refused & (g->refused - 1)) == 0)
			SG_DP_LOG(WARNING, "memif: a client refused (%" PRIu64 " so far): %s",
				  g->refused, why);
		close(c);
		if (d >= 0)
			close(d);
		return;
	}
	*pr = (struct mg_pair){.st = MG_RELAY, .c = c, .d = d, .sock = k};
	SG_DP_LOG(DEBUG, "memif: client %u connected", (unsigned int)(pr - g->pair));
}

static void *guard_main(void *arg)
{
	struct sg_dp_memif_guard *g = arg;
	struct pollfd pf[1 + SG_DP_MAX_PORTS + 3 * MG_MAX_PAIRS];
	/* what each entry is: -1 stop, -2 - k socket k, 2i / 2i+1 pair i, 2 * MG_MAX_PAIRS + i
	 * wake-up channel i */
	int at[RTE_DIM(pf)];

	for (;;) {
		unsigned int n = 0;

		pf[n] = (struct pollfd){.fd = g->stop_fd, .events = POLLIN};
		at[n++] = -1;
		for (unsigned int k = 0; k < g->nsock; k++) {
			pf[n] = (struct pollfd){.fd = g->sock[k].pub, .events = POLLIN};
			at[n++] = -2 - (int)k;
		}
		for (unsigned int i = 0; i < MG_MAX_PAIRS; i++) {
			struct mg_pair *pr = &g->pair[i];

			if (pr->st == MG_FREE)
				continue;
			if (pr->c >= 0) {
				pf[n] = (struct pollfd){.fd = pr->c, .events = POLLIN};
				at[n++] = (int)(2 * i);
			}
			pf[n] = (struct pollfd){.fd = pr->d, .events = POLLIN};
			at[n++] = (int)(2 * i + 1);
		}
		for (unsigned int i = 0; i < MG_MAX_PAIRS; i++)
			if (g->wake[i].c >= 0) {
				pf[n] = (struct pollfd){.fd = g->wake[i].c, .events = POLLIN};
				at[n++] = (int)(2 * MG_MAX_PAIRS + i);
			}
		if (poll(pf, n, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		for (unsigned int e = 1; e < n; e++) {
			struct mg_pair *pr;

			if (pf[e].revents == 0)
				continue;
			if (at[e] <= -2) {
				on_accept(g, (unsigned int)(-2 - at[e]));
				continue;
			}
			if (at[e] >= 2 * MG_MAX_PAIRS) {
				struct mg_wake *w = &g->wake[at[e] - 2 * MG_MAX_PAIRS];

				if (w->c == pf[e].fd)
					on_wake(g, w);
				continue;
			}
			pr = &g->pair[at[e] / 2];
			/* an earlier event of this pass may have closed that end */
			if (at[e] % 2 == 0 && pr->c == pf[e].fd && pr->st == MG_RELAY)
				on_client(g, pr);
			else if (at[e] % 2 == 1 && pr->d == pf[e].fd && pr->st != MG_FREE)
				on_pmd(g, pr);
		}
	}
	return NULL;
}

/* ---- start and stop --------------------------------------------------------------- */

int sg_dp_memif_guard_start(struct sg_dp_pipeline *p, char *err, size_t errlen)
{
	struct sg_dp_memif_guard *g;
	char paths[SG_DP_MAX_PORTS][sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool abstract[SG_DP_MAX_PORTS];
	unsigned int npath = 0, path_of[SG_DP_MAX_PORTS];
	uint16_t port;
	int rc;

	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		sg_dp_seterr(err, errlen, "memif guard: out of memory");
		return -ENOMEM;
	}
	g->p = p;
	for (unsigned int i = 0; i < MG_MAX_PAIRS; i++) {
		g->pair[i].c = g->pair[i].d = -1;
		g->wake[i].c = g->wake[i].port = -1;
		for (unsigned int q = 0; q < MG_WAKE_MAXQ; q++)
			g->wake[i].rxq[q] = -1;
	}
	for (unsigned int i = 0; i < SG_DP_MAX_PORTS; i++)
		g->pw[i].srv = -1;
	RTE_ETH_FOREACH_DEV(port) {
		char path[sizeof(paths[0])];
		bool abs;
		uint32_t id;
		unsigned int k = 0;

		if (port >= SG_DP_MAX_PORTS || !memif_server(port, path, sizeof(path), &abs, &id))
			continue;
		while (k < npath && (strcmp(paths[k], path) != 0 || abstract[k] != abs))
			k++;
		if (k == npath) {
			snprintf(paths[npath], sizeof(paths[0]), "%s", path);
			abstract[npath++] = abs;
		}
		path_of[g->nsrv] = k;
		g->srv[g->nsrv].id = id;
		g->srv[g->nsrv].port = port;
		g->srv[g->nsrv++].sock = UINT_MAX; /* until its socket is taken over */
	}
	for (unsigned int k = 0; k < npath; k++) {
		struct mg_sock *s = &g->sock[g->nsock];

		rc = sock_take_over(g, s, paths[k], abstract[k]);
		if (rc < 0) {
			SG_DP_LOG(WARNING, "memif socket %s%s: not guarded (%s): a client that "
				  "leaves at the wrong moment can crash sigmad",
				  abstract[k] ? "@" : "", paths[k], strerror(-rc));
			continue;
		}
		for (unsigned int i = 0; i < g->nsrv; i++)
			if (path_of[i] == k) {
				g->srv[i].sock = g->nsock;
				s->ports |= 1u << g->srv[i].port;
			}
		SG_DP_LOG(INFO, "memif socket %s%s: control channels relayed through %s",
			  abstract[k] ? "@" : "", paths[k], s->priv.sun_path);
		g->nsock++;
	}
	if (g->nsock == 0) {
		free(g);
		return 0;
	}
	rc = lcores_wake_setup(g);
	if (rc < 0) {
		SG_DP_LOG(WARNING, "memif: no wake-up channels (%s): clients poll", strerror(-rc));
		lcores_wake_free(g);
	}
	g->stop_fd = eventfd(0, EFD_CLOEXEC);
	rc = g->stop_fd < 0 ? -errno : -pthread_create(&g->thread, NULL, guard_main, g);
	if (rc < 0) {
		lcores_wake_free(g);
		sg_dp_seterr(err, errlen, "memif guard: cannot start its thread: %s", strerror(-rc));
		if (g->stop_fd >= 0)
			close(g->stop_fd);
		for (unsigned int k = 0; k < g->nsock; k++) {
			close(g->sock[k].pub);
			unlink(g->sock[k].priv.sun_path);
		}
		free(g);
		return rc;
	}
	pthread_setname_np(g->thread, "sigmad-memif");
	p->memif = g;
	return 0;
}

void sg_dp_memif_guard_stop(struct sg_dp_pipeline *p)
{
	struct sg_dp_memif_guard *g = p->memif;
	uint64_t one = 1;
	unsigned int left = 1;

	if (g == NULL)
		return;
	if (write(g->stop_fd, &one, sizeof(one)) != sizeof(one))
		SG_DP_LOG(WARNING, "memif guard: cannot signal its thread: %s", strerror(errno));
	pthread_join(g->thread, NULL);
	for (unsigned int i = 0; i < MG_MAX_PAIRS; i++)
		if (g->wake[i].c >= 0)
			wake_close(g, &g->wake[i]);
	/*
	 * The lcores have returned. Every session gets end-of-file and the PMD's close
	 * is awaited, so that the PMD disconnects in its own thread before sigmad stops
	 * the ports, and never finds its HELLO unsendable (our end stays readable).
	 */
	for (unsigned int i = 0; i < MG_MAX_PAIRS; i++) {
		struct mg_pair *pr = &g->pair[i];

		close_fd(&pr->c);
		if (pr->d >= 0 && !pr->shut)
			shutdown(pr->d, SHUT_WR);
	}
	for (int waited = 0; left > 0 && waited < MG_STOP_WAIT_MS; waited += 10) {
		left = 0;
		for (unsigned int i = 0; i < MG_MAX_PAIRS; i++) {
			struct mg_pair *pr = &g->pair[i];
			struct mg_msg m;
			ssize_t n;

			if (pr->d < 0)
				continue;
			while ((n = msg_recv(pr->d, &m)) > 0)
				if (m.fd >= 0)
					close(m.fd);
			if (n == -EAGAIN)
				left++;
			else
				close_fd(&pr->d);
		}
		if (left > 0)
			usleep(10000);
	}
	for (unsigned int i = 0; i < MG_MAX_PAIRS; i++)
		close_fd(&g->pair[i].d);
	for (unsigned int k = 0; k < g->nsock; k++) {
		close(g->sock[k].pub);
		unlink(g->sock[k].priv.sun_path);
	}
	close(g->stop_fd);
	p->memif = NULL;
	lcores_wake_free(g);
	free(g);
}
