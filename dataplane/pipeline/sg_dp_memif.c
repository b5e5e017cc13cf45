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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_kvargs.h>

#include "sg_dp_internal.h"
#include "sg_parse.h"

/* The memif control protocol (facts from its specification): every message is 128
 * bytes; a 16-bit type (host order) comes first; INIT carries the interface id as
 * a 32-bit field at byte 4, after a 16-bit version. */
#define MG_MSG_LEN 128
#define MG_MSG_HELLO 2
#define MG_MSG_INIT 3
#define MG_MSG_CONNECT 6
#define MG_INIT_ID_OFF 4
#define MG_MAX_FDS 4         /* a message carries at most one; more are refused */
#define MG_MAX_PAIRS 64      /* clients at once (each memif id serves one) */
#define MG_BACKLOG 64
#define MG_STOP_WAIT_MS 2000 /* at stop: how long the PMD gets to see clients leave */
/* The PMD's defaults (its devargs): role client, id 0, this socket, abstract. */
#define MG_DEFAULT_SOCKET "/run/memif.sock"

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
	struct mg_pair pair[MG_MAX_PAIRS];
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
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = m->b, .iov_len = m->len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (m->fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &m->fd, sizeof(int));
	}
	n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	return n == (ssize_t)m->len ? 0 : n < 0 ? -errno : -EIO;
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

static void pair_free(struct sg_dp_memif_guard *g, struct mg_pair *pr)
{
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
	struct pollfd pf[1 + SG_DP_MAX_PORTS + 2 * MG_MAX_PAIRS];
	int at[RTE_DIM(pf)]; /* what each entry is: -1 stop, -2 - k socket k, 2i / 2i+1 pair i */

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
	for (unsigned int i = 0; i < MG_MAX_PAIRS; i++)
		g->pair[i].c = g->pair[i].d = -1;
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
	g->stop_fd = eventfd(0, EFD_CLOEXEC);
	rc = g->stop_fd < 0 ? -errno : -pthread_create(&g->thread, NULL, guard_main, g);
	if (rc < 0) {
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
	free(g);
}
