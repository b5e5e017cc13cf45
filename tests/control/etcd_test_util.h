/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the etcd tests share: free loopback ports, etcd members started as
 * children (killed with the test: PR_SET_PDEATHSIG), waiting for one, counting
 * keys, and a TCP proxy between a client and etcd that the test can cut (every
 * connection closed, new ones refused) or make refuse watch streams (an HTTP
 * 404 for POST /v3/watch), to drive a watch's reconnects and fall-backs.
 */
#ifndef ETCD_TEST_UTIL_H
#define ETCD_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sg_etcd.h"
#include "sg_test.h"

static char tmpdir[] = "/tmp/sg_etcd_test.XXXXXX";

static inline void msleep(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline bool port_free(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* @p n consecutive free loopback ports, from a base that depends on our pid. */
static inline uint16_t free_ports(unsigned int n)
{
	for (unsigned int tries = 0; tries < 200; tries++) {
		uint16_t base = (uint16_t)(21000 + ((unsigned int)getpid() * 13 + tries * 37) % 30000);
		bool ok = true;

		for (unsigned int i = 0; i < n && ok; i++)
			ok = port_free((uint16_t)(base + i));
		if (ok)
			return base;
	}
	return 0;
}

/*
 * In a child just forked from @p parent: die with the test (also when meson's
 * timeout kills it), and write stdout and stderr to @p log (opened with
 * O_APPEND, or O_TRUNC).
 */
static inline void child_setup(pid_t parent, const char *log, int mode)
{
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	fd = open(log, O_WRONLY | O_CREAT | mode, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
}

/* Start member @p name of a cluster (@p cluster: its initial-cluster list). */
static inline pid_t etcd_start(const char *name, uint16_t cport, uint16_t pport, const char *cluster)
{
	char data[256], curl[64], purl[64], log[256];
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	snprintf(data, sizeof(data), "%s/%s.data", tmpdir, name);
	snprintf(log, sizeof(log), "%s/%s.log", tmpdir, name);
	child_setup(parent, log, O_APPEND);
	snprintf(curl, sizeof(curl), "http://127.0.0.1:%u", cport);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", pport);
	execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curl,
	       "--advertise-client-urls", curl, "--listen-peer-urls", purl,
	       "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
	       "--initial-cluster-state", "new", "--initial-cluster-token", tmpdir + 5,
	       "--heartbeat-interval", "50", "--election-timeout", "500", NULL);
	_exit(127);
}

static inline void etcd_kill(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

/* Wait until @p e answers a read (up to 15 s). */
static inline bool wait_ready(struct sg_etcd *e)
{
	for (int i = 0; i < 300; i++) {
		struct sg_etcd_kv *kv;
		size_t n;

		if (sg_etcd_get_prefix(e, "/ready", &kv, &n, NULL) == 0) {
			sg_etcd_kvs_free(kv, n);
			return true;
		}
		msleep(50);
	}
	return false;
}

static inline int count_prefix(struct sg_etcd *e, const char *prefix)
{
	struct sg_etcd_kv *kv;
	size_t n;
	int rc = sg_etcd_get_prefix(e, prefix, &kv, &n, NULL);

	if (rc < 0)
		return rc;
	sg_etcd_kvs_free(kv, n);
	return (int)n;
}

static inline void put_record(struct sg_etcd *e, const char *key, const char *value)
{
	SG_CHECK_EQ(sg_etcd_put(e, key, value, strlen(value), 0), 0);
}

/* Wait up to @p ms for watch @p w to see @p name alive (or not). */
static inline bool watch_wait(struct sg_etcd_watch *w, const char *name, bool alive, unsigned int ms)
{
	const char *names[1] = {name};
	uint64_t gen = 0;
	bool a = !alive;

	for (unsigned int t = 0; t <= ms; t += 20) {
		gen = 0;
		if (sg_etcd_watch_alive(w, &gen, names, 1, &a) == 1 && a == alive)
			return true;
		msleep(20);
	}
	return false;
}

/* ---- a proxy the test can cut ---- */

enum proxy_mode {
	PROXY_PASS = 0,	    /* bytes go through */
	PROXY_CUT = 1,	    /* every connection closed, new ones closed at once */
	PROXY_NO_WATCH = 2, /* a connection whose first request is POST /v3/watch gets a 404 */
};

#define PROXY_CONNS 32

struct proxy {
	int lfd;
	uint16_t port, to;
	_Atomic int mode;
	_Atomic bool stop;
	pthread_t th;
	int cfd[PROXY_CONNS], ufd[PROXY_CONNS]; /* client and upstream sides; -1: free */
	bool seen[PROXY_CONNS];			/* its first request was looked at */
	_Atomic unsigned int refused;		/* watch requests answered 404 */
};

static inline void proxy_close(struct proxy *p, int i)
{
	close(p->cfd[i]);
	close(p->ufd[i]);
	p->cfd[i] = p->ufd[i] = -1;
}

static inline int proxy_upstream(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static inline void proxy_accept(struct proxy *p)
{
	int fd = accept(p->lfd, NULL, NULL), i;

	if (fd < 0)
		return;
	for (i = 0; i < PROXY_CONNS && p->cfd[i] >= 0; i++)
		;
	if (atomic_load(&p->mode) == PROXY_CUT || i == PROXY_CONNS ||
	    (p->ufd[i] = proxy_upstream(p->to)) < 0) {
		close(fd);
		return;
	}
	p->cfd[i] = fd;
	p->seen[i] = false;
}

/* Pass what side @p from of connection @p i has to the other. @return false: close it. */
static inline bool proxy_pump(struct proxy *p, int i, bool from_client)
{
	static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
				 "Connection: close\r\n\r\n";
	char buf[65536];
	ssize_t n = read(from_client ? p->cfd[i] : p->ufd[i], buf, sizeof(buf));

	if (n <= 0)
		return false;
	if (from_client && !p->seen[i]) {
		p->seen[i] = true;
		if (atomic_load(&p->mode) == PROXY_NO_WATCH && n >= 14 &&
		    memcmp(buf, "POST /v3/watch", 14) == 0) {
			atomic_fetch_add(&p->refused, 1);
			return write(p->cfd[i], nf, sizeof(nf) - 1) < 0 && false;
		}
	}
	return write(from_client ? p->ufd[i] : p->cfd[i], buf, (size_t)n) == n;
}

static inline void *proxy_main(void *arg)
{
	struct proxy *p = arg;

	while (!atomic_load(&p->stop)) {
		struct pollfd pf[1 + 2 * PROXY_CONNS];
		int map[1 + 2 * PROXY_CONNS], n = 1;

		if (atomic_load(&p->mode) == PROXY_CUT)
			for (int i = 0; i < PROXY_CONNS; i++)
				if (p->cfd[i] >= 0)
					proxy_close(p, i);
		pf[0] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
		for (int i = 0; i < PROXY_CONNS; i++) {
			if (p->cfd[i] < 0)
				continue;
			map[n] = i;
			pf[n++] = (struct pollfd){.fd = p->cfd[i], .events = POLLIN};
			map[n] = i + PROXY_CONNS;
			pf[n++] = (struct pollfd){.fd = p->ufd[i], .events = POLLIN};
		}
		if (poll(pf, (nfds_t)n, 10) <= 0)
			continue;
		if (pf[0].revents)
			proxy_accept(p);
		for (int k = 1; k < n; k++) {
			int i = map[k] % PROXY_CONNS;

			if (pf[k].revents == 0 || p->cfd[i] < 0)
				continue;
			if (!proxy_pump(p, i, map[k] < PROXY_CONNS))
				proxy_close(p, i);
		}
	}
	for (int i = 0; i < PROXY_CONNS; i++)
		if (p->cfd[i] >= 0)
			proxy_close(p, i);
	close(p->lfd);
	return NULL;
}

/* A proxy on a free loopback port to etcd's client port @p to. @return 0 or -1. */
static inline int proxy_start(struct proxy *p, uint16_t to)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < PROXY_CONNS; i++)
		p->cfd[i] = p->ufd[i] = -1;
	p->to = to;
	p->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(p->lfd, 16) != 0 || getsockname(p->lfd, (struct sockaddr *)&a, &al) != 0) {
		if (p->lfd >= 0)
			close(p->lfd);
		return -1;
	}
	p->port = ntohs(a.sin_port);
	return pthread_create(&p->th, NULL, proxy_main, p) == 0 ? 0 : -1;
}

static inline void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stop, true);
	pthread_join(p->th, NULL);
}

/*
 * A one-member etcd named @p name on free ports, its client URL in @p eps (128
 * bytes) and a client of it in *@p e (NULL if it did not come up). @return its pid.
 */
static inline pid_t etcd_one(const char *name, char *eps, struct sg_etcd **e)
{
	struct sg_etcd_conf ec = {.endpoints = eps};
	char cluster[128];
	uint16_t p = free_ports(2);
	pid_t pid;

	snprintf(eps, 128, "http://127.0.0.1:%u", p);
	snprintf(cluster, sizeof(cluster), "%s=http://127.0.0.1:%u", name, p + 1);
	pid = etcd_start(name, p, (uint16_t)(p + 1), cluster);
	*e = sg_etcd_create(&ec);
	if (!SG_CHECK(*e != NULL && wait_ready(*e), "etcd up on port %u", p)) {
		sg_etcd_destroy(*e);
		*e = NULL;
	}
	return pid;
}

/* Set up the test's folder and skip when etcd is absent. */
static inline void etcd_test_init(void)
{
	if (system("command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1") != 0)
		SG_TEST_SKIP_ALL("no etcd or etcdctl (Debian packages etcd-server, etcd-client)");
	if (mkdtemp(tmpdir) == NULL)
		SG_TEST_SKIP_ALL("mkdtemp: %s", strerror(errno));
}

static inline void etcd_test_fini(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

#endif /* ETCD_TEST_UTIL_H */
