/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma's shared-memory transport against kernel-UDP nodes of this process
 * that offer shared memory (sigma_udpd_conf.shm_path): the rings alone (wrap,
 * full, bad lengths), exact sums with N = 2 and 4 workers checked against a
 * reference computed here, a job with workers on both transports, clients that
 * send garbage, scribble bad records, hang up or never read their hello, the
 * channel limit (a counted refusal, and a good worker gets in once a slot is
 * free), a node that stops (-ETIMEDOUT in bounded time), bad configurations,
 * a fake node that never reads its ring and passes blocking eventfds or
 * /dev/zero (every push it could not take counted in tx_dropped, no hang),
 * and nothing left behind (fds, socket files).
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"
#include "sigma_internal.h"
#include "sg_shm.h"

static char dir[64];

static const struct sigma_udpd_conf shm_node = {.engine = {.pool_bufs = 4096}};


static unsigned int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned int n = 0;

	while (d != NULL && readdir(d) != NULL)
		n++;
	if (d != NULL)
		closedir(d);
	return n;
}

static unsigned int count_files(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	unsigned int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	if (d != NULL)
		closedir(d);
	return n;
}

/* Free @p g: nothing left behind, no socket file, the @p fds open before it. */
static void free_group(struct cu_group *g, unsigned int fds)
{
	cu_free(g);
	SG_CHECK_EQ(count_files(dir), 0);
	SG_CHECK_EQ(count_fds(), fds);
}

/* The rings on their own: records in order across the wrap, a full ring, bad lengths. */
static void test_ring(void)
{
	enum { SIZE = 4096 };
	struct sg_shm_layout *m = aligned_alloc(4096, sg_shm_mem_bytes(SIZE));
	struct sg_shm_ring p, c;
	uint32_t next_put = 0, next_get = 0, len;
	uint64_t bad = 0;
	const uint8_t *b;

	memset(m, 0, sg_shm_mem_bytes(SIZE));
	sg_shm_ring_init(&p, &m->up, m->data, SIZE, 1500, -1);
	sg_shm_ring_init(&c, &m->up, m->data, SIZE, 1500, -1);
	SG_CHECK(sg_shm_put(&p, 0) == NULL && sg_shm_put(&p, 1501) == NULL, "lengths 0, 1501");
	/* records of 1..1000 bytes, each filled with its number: 40 rounds of fill and drain */
	for (int round = 0; round < 40; round++) {
		uint8_t *w;

		while ((w = sg_shm_put(&p, 1 + next_put * 37 % 1000)) != NULL) {
			memset(w, (int)(next_put & 0xff), 1 + next_put * 37 % 1000);
			next_put++;
		}
		SG_CHECK(sg_shm_get(&c, &len, &bad) == NULL, "unpublished records are not seen");
		sg_shm_publish(&p);
		while ((b = sg_shm_get(&c, &len, &bad)) != NULL) {
			SG_CHECK_EQ(len, 1 + next_get * 37 % 1000);
			SG_CHECK(b[0] == (next_get & 0xff) && b[len - 1] == (next_get & 0xff),
				 "record %u's bytes", next_get);
			next_get++;
		}
		sg_shm_release(&c);
	}
	SG_CHECK_EQ(next_get, next_put);
	SG_CHECK(next_put > 40 * 3, "only %u records went round", next_put);
	SG_CHECK_EQ(bad, 0);
	/* a length past the ring, and a head more than a ring ahead: skipped, counted */
	{
		uint32_t huge = 0x7fffffff;
		uint8_t *w = sg_shm_put(&p, 100);

		memcpy(w - SG_SHM_REC_HDR, &huge, sizeof(huge));
		sg_shm_publish(&p);
		SG_CHECK(sg_shm_get(&c, &len, &bad) == NULL && bad == 1, "bad length: %" PRIu64, bad);
		atomic_store(&m->up.head, c.pos + 3 * SIZE);
		SG_CHECK(sg_shm_get(&c, &len, &bad) == NULL && bad == 2, "bad head: %" PRIu64, bad);
	}
	free(m);
}

/* Exact sums with @p n workers (ranks in @p shm_ranks over shared memory) on 2 nodes. */
static void sums(unsigned int n, uint32_t shm_ranks, const char *what)
{
	const size_t sizes[] = {1, 356, 100001};
	struct sigma_conf c = {.job = 31, .token = 0x5157, .partition_bytes = 65536};
	struct cu_group g = {0};
	struct sigma_udpd_io io[2];
	unsigned int fds = count_fds();

	SG_CHECK_EQ(cu_shm_nodes(&g, 2, &shm_node, dir, shm_ranks), 0);
	SG_CHECK_EQ(cu_sessions(&g, n, &c), 0);
	for (unsigned int r = 0; r < n; r++)
		for (unsigned int i = 0; i < 2; i++)
			SG_CHECK_EQ(sigma_node_transport(g.s[r], i), shm_ranks >> r & 1 ?
				    SIGMA_TRANSPORT_SHM : SIGMA_TRANSPORT_UDP);
	SG_CHECK_EQ(sigma_node_transport(g.s[0], 2), -EINVAL);
	SG_CHECK_EQ(sigma_node_transport(NULL, 0), -EINVAL);
	cu_run_fp32(&g, sizes, 3, 4, what);
	for (unsigned int i = 0; i < 2; i++) {
		sigma_udpd_io_stats(g.d[i], &io[i]);
		SG_CHECK_EQ(io[i].shm_open, (uint64_t)__builtin_popcount(shm_ranks));
		SG_CHECK(io[i].shm_rx > 0 && io[i].shm_tx > 0, "%s: node %u moved nothing over "
			 "shared memory", what, i);
		SG_CHECK(io[i].shm_bad_len + io[i].shm_tx_stale + io[i].shm_garbage == 0,
			 "%s: node %u dropped records", what, i);
		/* the UDP ranks' pushes went over UDP */
		SG_CHECK((io[i].rx_dgrams > 0) == (shm_ranks != (1u << n) - 1),
			 "%s: node %u: %" PRIu64 " UDP datagrams", what, i, io[i].rx_dgrams);
	}
	free_group(&g, fds);
}

/*
 * Colocated, as BytePS with k = 0: @p n workers and @p n nodes, worker r a
 * UDP session given node r's socket alone. Exact sums, and each node took
 * one channel, its own worker's pushes over it and the others' over UDP:
 * with nothing resent, exactly n - 1 UDP datagrams each way per record.
 */
static void colocated(unsigned int n, const char *what)
{
	const size_t sizes[] = {1, 356, 100001};
	/* one thread drives every rank: a 5 ms timeout fires while the others are polled */
	struct sigma_conf c = {.job = 35, .token = 0x3535, .partition_bytes = 16384,
			       .rto_us = 100000, .rto_max_us = 400000};
	struct cu_group g = {0};
	uint64_t resent = 0;
	unsigned int fds = count_fds();

	SG_CHECK_EQ(cu_shm_nodes(&g, n, &shm_node, dir, 0), 0);
	g.colocate = true;
	SG_CHECK_EQ(cu_sessions(&g, n, &c), 0);
	/* what the session says it does: its own node over shared memory alone */
	for (unsigned int r = 0; r < n; r++)
		for (unsigned int i = 0; i < n; i++)
			SG_CHECK(sigma_node_transport(g.s[r], i) ==
					 (i == r ? SIGMA_TRANSPORT_SHM : SIGMA_TRANSPORT_UDP),
				 "%s: rank %u reaches node %u by transport %d", what, r, i,
				 sigma_node_transport(g.s[r], i));
	cu_run_fp32(&g, sizes, 3, 4, what);
	for (unsigned int r = 0; r < n; r++) {
		struct sigma_stats st;

		sigma_get_stats(g.s[r], &st);
		resent += st.retransmits + st.nacks + st.errors + st.tx_dropped;
	}
	for (unsigned int i = 0; i < n; i++) {
		struct sigma_udpd_io io;

		sigma_udpd_io_stats(g.d[i], &io);
		SG_CHECK_EQ(io.shm_open, 1);
		SG_CHECK(io.shm_rx > 0 && io.shm_tx > 0 && io.rx_dgrams > 0 && io.tx_dgrams > 0,
			 "%s: node %u: shm %" PRIu64 "/%" PRIu64 ", UDP %" PRIu64 "/%" PRIu64, what,
			 i, io.shm_rx, io.shm_tx, io.rx_dgrams, io.tx_dgrams);
		SG_CHECK(io.shm_bad_len + io.shm_tx_stale + io.shm_garbage + io.shm_tx_full == 0,
			 "%s: node %u dropped records", what, i);
		if (resent == 0)
			SG_CHECK(io.rx_dgrams == (n - 1) * io.shm_rx &&
					 io.tx_dgrams == (n - 1) * io.shm_tx,
				 "%s: node %u: shm %" PRIu64 "/%" PRIu64 ", UDP %" PRIu64
				 "/%" PRIu64, what, i, io.shm_rx, io.shm_tx, io.rx_dgrams,
				 io.tx_dgrams);
	}
	if (resent != 0)
		printf("%s: %" PRIu64 " resends, NACKs or drops: counts not compared exactly\n",
		       what, resent);
	free_group(&g, fds);
}

/* A raw client: connect to @p path. @return the socket. */
static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	SG_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
		 strerror(errno));
	return fd;
}

/* Take the hello on @p fd: 0 and its three fds, or -1 when the node hung up. */
static int raw_hello(int fd, struct sg_shm_hello *h, int fds[3])
{
	int rc = sg_shm_hello_recv(fd, 5000, h, fds);

	SG_CHECK(rc == 0 || rc == -ECONNRESET, "no hello, no hang-up in 5 s: %d", rc);
	return rc == 0 ? 0 : -1;
}

/* Wait up to 5 s for @p d's io counters to satisfy @p cond. */
#define WAIT_IO(d, io, cond)                                                                      \
	do {                                                                                      \
		uint64_t t_end_ = cu_now_ms() + 5000;                                                \
		do {                                                                              \
			sigma_udpd_io_stats((d), &(io));                                          \
			if (cond)                                                                 \
				break;                                                            \
			usleep(2000);                                                             \
		} while (cu_now_ms() < t_end_);                                                      \
		SG_CHECK(cond, "in 5 s: %s", #cond);                                              \
	} while (0)

/*
 * Clients that misbehave: garbage on the socket, records of a bad length, a
 * hang-up before the hello; then the channel limit. A good job runs after
 * each, on the same node.
 */
static void test_bad_clients(void)
{
	const size_t sizes[] = {5000};
	struct sigma_udpd_conf dc = shm_node;
	struct sigma_conf c = {.job = 32, .token = 77};
	struct cu_group g = {0};
	struct sigma_udpd_io io;
	unsigned int fds0 = count_fds();
	struct sg_shm_hello h;
	int fd, fd2, fds[3];

	dc.shm_max = 2;
	SG_CHECK_EQ(cu_shm_nodes(&g, 1, &dc, dir, 0x3), 0);

	/* garbage on the socket: the channel is freed, counted */
	fd = raw_connect(g.shm[0]);
	SG_CHECK_EQ(raw_hello(fd, &h, fds), 0);
	SG_CHECK(h.magic == SG_SHM_MAGIC && h.version == SG_SHM_VERSION &&
		 h.udp_port == g.nodes[0].port, "hello: magic %x version %u port %u", h.magic,
		 h.version, h.udp_port);
	SG_CHECK_EQ(send(fd, "GET / HTTP/1.0\r\n\r\n", 18, 0), 18);
	WAIT_IO(g.d[0], io, io.shm_garbage == 1 && io.shm_open == 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	close(fd);

	/* bad records in the ring: counted, skipped; then the client dies */
	fd = raw_connect(g.shm[0]);
	SG_CHECK_EQ(raw_hello(fd, &h, fds), 0);
	{
		struct sg_shm_layout *m = sg_shm_map(fds[0], h.mem_bytes, h.ring_bytes);
		uint32_t rec[4] = {0xdeadbeef, 0, 1, 2};
		uint64_t one = 1;

		SG_CHECK(m != NULL, "map: %s", strerror(errno));
		memcpy(m->data, rec, sizeof(rec));
		atomic_store(&m->up.head, 16);
		SG_CHECK_EQ(write(fds[1], &one, 8), 8);
		WAIT_IO(g.d[0], io, io.shm_bad_len == 1);
		/* a short datagram of garbage: the engine's own drop, not the ring's */
		rec[0] = 8;
		memcpy(m->data + 16, rec, sizeof(rec));
		atomic_store(&m->up.head, 32);
		SG_CHECK_EQ(write(fds[1], &one, 8), 8);
		WAIT_IO(g.d[0], io, io.shm_rx == 1);
		munmap(m, h.mem_bytes);
	}
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	close(fd);
	WAIT_IO(g.d[0], io, io.shm_open == 0 && io.shm_closed == 2);

	/* a client that hangs up at once */
	close(raw_connect(g.shm[0]));
	WAIT_IO(g.d[0], io, io.shm_open == 0 && io.shm_accepted + io.shm_refused == 3);

	/* the limit: two channels held, the third refused (a hang-up) and counted */
	fd = raw_connect(g.shm[0]);
	fd2 = raw_connect(g.shm[0]);
	WAIT_IO(g.d[0], io, io.shm_open == 2);
	{
		int x = raw_connect(g.shm[0]);

		SG_CHECK(raw_hello(x, &h, fds) == -1, "a third channel past shm_max 2");
		close(x);
	}
	{
		struct sigma_conf w = c;

		w.nworkers = 2;
		w.nodes = g.nodes;
		w.nnodes = 1;
		w.transport = SIGMA_TRANSPORT_SHM;
		w.shm_paths = g.shm;
		w.n_shm_paths = 1;
		SG_CHECK(sigma_open(&w) == NULL && errno == ECONNRESET, "a worker past shm_max: %s",
			 strerror(errno));
	}
	sigma_udpd_io_stats(g.d[0], &io);
	SG_CHECK(io.shm_refused >= 2, "refused %" PRIu64, io.shm_refused);
	/* the holders leave: good workers get in */
	close(fd);
	close(fd2);
	WAIT_IO(g.d[0], io, io.shm_open == 0);
	/* a stopped node removes its socket; a fresh one gets the good job */
	sigma_udpd_stop(g.d[0]);
	SG_CHECK_EQ(count_files(dir), 0);
	cu_free(&g);
	SG_CHECK_EQ(cu_shm_nodes(&g, 1, &dc, dir, 0x3), 0);
	SG_CHECK_EQ(cu_sessions(&g, 2, &c), 0);
	cu_run_fp32(&g, sizes, 1, 2, "after bad clients");
	cu_free(&g);
	SG_CHECK_EQ(count_fds(), fds0);
}

/* The node stops mid-transfer: every worker fails with -ETIMEDOUT (node silent), quickly. */
static void test_node_gone(void)
{
	struct cu_group g = {0};
	unsigned int fds = count_fds();

	SG_CHECK_EQ(cu_shm_nodes(&g, 1, &shm_node, dir, 0x3), 0);
	cu_node_gone(&g, 33);
	SG_CHECK_EQ(count_files(dir), 0);
	SG_CHECK_EQ(count_fds(), fds);
}

/*
 * A fake node: accepts one worker on its socket and sends a hello; a short
 * memfd (@c whole false), or one as the hello says, sealed, whose rings
 * nobody ever reads (@c whole true: @c up_head gets what the worker had
 * published on its ring when it hung up).
 */
struct fake_node {
	int lfd;
	uint32_t port;
	bool whole;
	bool zero_efd; /* /dev/zero in place of the worker's eventfd */
	uint64_t up_head;
	char path[100];
};

static void *fake_node_main(void *arg)
{
	struct fake_node *f = arg;
	uint64_t bytes = sg_shm_mem_bytes(SG_SHM_RING_BYTES);
	struct sg_shm_hello h = {.magic = SG_SHM_MAGIC, .version = SG_SHM_VERSION,
				 .udp_port = (uint16_t)f->port, .ipv4 = htonl(0x7f000001),
				 .ring_bytes = SG_SHM_RING_BYTES, .mem_bytes = bytes};
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(3 * sizeof(int))];
	} ctl = {0};
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	/* blocking eventfds: the worker must not depend on how the node made them */
	int fds[3] = {memfd_create("fake", MFD_CLOEXEC | MFD_ALLOW_SEALING),
		      eventfd(0, EFD_CLOEXEC),
		      f->zero_efd ? open("/dev/zero", O_RDONLY | O_CLOEXEC) : eventfd(0, EFD_CLOEXEC)};
	struct sg_shm_layout *mem = NULL;
	int s = accept(f->lfd, NULL, NULL);
	char b;

	SG_CHECK(ftruncate(fds[0], f->whole ? (off_t)bytes : 4096) == 0, "ftruncate");
	if (f->whole) {
		SG_CHECK(fcntl(fds[0], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0, "seal");
		mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
		SG_CHECK(mem != MAP_FAILED, "mmap: %s", strerror(errno));
	}
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	SG_CHECK(sendmsg(s, &mh, 0) == (ssize_t)sizeof(h), "fake hello: %s", strerror(errno));
	SG_CHECK(recv(s, &b, 1, 0) == 0, "the worker hangs up"); /* until it did */
	if (mem != NULL && mem != MAP_FAILED) {
		f->up_head = atomic_load(&mem->up.head);
		munmap(mem, bytes);
	}
	close(s);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	return NULL;
}

/* Listen on @p f's socket in the test's folder and start its thread. */
static void fake_node_start(struct fake_node *f, pthread_t *th)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	snprintf(f->path, sizeof(f->path), "%s/fake.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	SG_CHECK(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(f->lfd, 4) == 0,
		 "fake node: %s", strerror(errno));
	SG_CHECK_EQ(pthread_create(th, NULL, fake_node_main, f), 0);
}

static void fake_node_stop(struct fake_node *f, pthread_t th)
{
	pthread_join(th, NULL);
	close(f->lfd);
	unlink(f->path);
}

/* A session of one worker on the fake node @p f (SIGMA_TRANSPORT_SHM). */
static struct sigma_conf fake_conf(struct fake_node *f, struct sigma_node *node,
				   const char **paths, uint32_t job)
{
	*node = (struct sigma_node){.name = "fake", .addr = "127.0.0.1", .port = f->port};
	paths[0] = f->path;
	return (struct sigma_conf){.job = job, .token = 1, .nworkers = 1, .nodes = node,
				   .nnodes = 1, .transport = SIGMA_TRANSPORT_SHM,
				   .shm_paths = paths, .n_shm_paths = 1};
}

/*
 * A "node" whose memfd is shorter than its hello says (or that could shrink
 * it later): the worker refuses it (EPROTO) instead of dying of SIGBUS when it
 * touches the rings.
 */
static void test_short_memfd(void)
{
	struct sigma_node node;
	const char *paths[1];
	unsigned int fds = count_fds(); /* before the fake node's socket */
	struct fake_node f = {.port = 40999};
	struct sigma_conf c;
	pthread_t th;

	fake_node_start(&f, &th);
	c = fake_conf(&f, &node, paths, 35);
	errno = 0;
	SG_CHECK(sigma_open(&c) == NULL && errno == EPROTO, "a short memfd: errno %d (%s)", errno,
		 strerror(errno));
	fake_node_stop(&f, th);
	SG_CHECK_EQ(count_fds(), fds);
}

/*
 * A node that never reads its ring, and a window larger than the ring: every
 * push the ring could not take is counted in tx_dropped, not in tx_packets,
 * which equals the records the node finds published (the ring's head over
 * one record's bytes: it never wraps, since nothing is released). The node's
 * eventfds are blocking ones (the worker's wake-up read hung on them before
 * it made them non-blocking), or @p zero_efd: /dev/zero in place of the
 * worker's (its wake-up read looped for ever: it never runs dry).
 */
static void test_full_ring(bool zero_efd)
{
	enum { NCH = 1000, PART_CH = 250, CHUNK = 8920 };
	const uint64_t rec = SG_SHM_REC_HDR + 48 + CHUNK; /* a multiple of 8 */
	struct sigma_node node;
	const char *paths[1];
	struct fake_node f = {.port = 40998, .whole = true, .zero_efd = zero_efd};
	struct sigma_conf c;
	struct sigma_session *s;
	struct sigma_tensor *t;
	struct sigma_stats st;
	float *buf = calloc(NCH * CHUNK / sizeof(float), sizeof(float));
	pthread_t th;

	fake_node_start(&f, &th);
	c = fake_conf(&f, &node, paths, 36);
	c.chunk_bytes = CHUNK;
	c.partition_bytes = PART_CH * CHUNK;
	c.window = NCH;
	c.rto_us = 2000;
	c.rto_max_us = 4000;
	c.max_retries = 2;
	s = sigma_open(&c);
	SG_CHECK(s != NULL && buf != NULL, "open on the fake node: %s", strerror(errno));
	t = s == NULL ? NULL : sigma_tensor_register(s, "full", 1, SG_DTYPE_FP32,
						     NCH * CHUNK / sizeof(float), 0);
	SG_CHECK(t != NULL, "register: %s", strerror(errno));
	if (t != NULL) {
		SG_CHECK_EQ(sigma_push_pull_sync(t, buf, buf), -ETIMEDOUT);
		sigma_get_stats(s, &st);
		SG_CHECK(st.tx_dropped >= NCH - SG_SHM_RING_BYTES / rec,
			 "%" PRIu64 " pushes dropped, want at least %" PRIu64, st.tx_dropped,
			 (uint64_t)NCH - SG_SHM_RING_BYTES / rec);
	}
	if (s != NULL)
		sigma_close(s);
	fake_node_stop(&f, th);
	SG_CHECK(f.up_head % rec == 0, "ring head %" PRIu64 " not whole records", f.up_head);
	SG_CHECK_EQ(f.up_head / rec, SG_SHM_RING_BYTES / rec); /* the ring was filled */
	if (t != NULL)
		SG_CHECK_EQ(st.tx_packets, f.up_head / rec);
	free(buf);
}

static void expect_open_fail(struct sigma_conf c, int err, const char *what)
{
	errno = 0;
	SG_CHECK(sigma_open(&c) == NULL && errno == err, "%s: errno %d (%s), want %d", what, errno,
		 strerror(errno), err);
}

static void expect_open_ok(struct sigma_conf c, const char *what)
{
	struct sigma_session *s = sigma_open(&c);

	SG_CHECK(s != NULL, "%s: %s", what, strerror(errno));
	sigma_close(s);
}

/* Configurations the transport refuses, each with its error. */
static void test_bad_conf(void)
{
	struct cu_group g = {0};
	char missing[128], longp[200];
	const char *paths[1];
	struct sigma_conf c = {.job = 34, .token = 1, .nworkers = 1,
			       .transport = SIGMA_TRANSPORT_SHM};
	unsigned int fds = count_fds();

	SG_CHECK_EQ(cu_shm_nodes(&g, 2, &shm_node, dir, 0), 0);
	c.nodes = g.nodes;
	c.nnodes = 2;
	expect_open_fail(c, EINVAL, "no shm_paths");
	paths[0] = "";
	c.shm_paths = paths;
	c.n_shm_paths = 1;
	expect_open_fail(c, EINVAL, "an empty path");
	snprintf(missing, sizeof(missing), "%s/nothing.sock", dir);
	paths[0] = missing;
	expect_open_fail(c, ENOENT, "no socket there");
	memset(longp, 'x', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	paths[0] = longp;
	expect_open_fail(c, ENAMETOOLONG, "a path too long");
	/* node 1's socket only: node 0 has none */
	paths[0] = g.shm[1];
	expect_open_fail(c, ENOENT, "a node without its socket");
	/* both, in the other order, after a dead one and with a second copy of one: fine */
	{
		const char *ok[4] = {missing, g.shm[1], g.shm[0], g.shm[1]};

		c.shm_paths = ok;
		c.n_shm_paths = 4;
		expect_open_ok(c, "both nodes' sockets");
	}
	free_group(&g, fds);
}

/*
 * Kernel UDP given shm_paths, with bad ones: an empty path or too many are
 * refused; a dead socket, a path too long and a node's second socket are
 * skipped, and the node left without one goes over UDP: exact sums, node 1's
 * pushes all over shared memory and node 0's all over UDP. A socket of a node
 * not in the session is closed again, and a session of dead sockets alone is
 * plain UDP.
 */
static void test_udp_shm_paths(void)
{
	const size_t sizes[] = {356, 100001};
	struct cu_group g = {0};
	char missing[128], longp[200];
	const char *paths[4] = {""};
	struct sigma_conf c = {.job = 36, .token = 0x36, .nworkers = 1, .partition_bytes = 16384,
			       .rto_us = 100000, .shm_paths = paths, .n_shm_paths = 1};
	struct sigma_udpd_io io[2];
	unsigned int fds = count_fds();

	SG_CHECK_EQ(cu_shm_nodes(&g, 2, &shm_node, dir, 0), 0);
	c.nodes = g.nodes;
	c.nnodes = 2;
	expect_open_fail(c, EINVAL, "UDP: an empty path");
	c.n_shm_paths = 257;
	expect_open_fail(c, EINVAL, "UDP: 257 paths");
	snprintf(missing, sizeof(missing), "%s/nothing.sock", dir);
	memset(longp, 'x', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	paths[0] = missing;
	paths[1] = longp;
	paths[2] = g.shm[1];
	paths[3] = g.shm[1];
	c.n_shm_paths = 4;
	SG_CHECK_EQ(cu_sessions(&g, 2, &c), 0);
	cu_run_fp32(&g, sizes, 2, 3, "UDP with node 1's socket");
	for (unsigned int i = 0; i < 2; i++)
		sigma_udpd_io_stats(g.d[i], &io[i]);
	SG_CHECK(io[0].shm_accepted == 0 && io[0].rx_dgrams > 0 && io[0].shm_rx == 0,
		 "node 0: channels %" PRIu64 ", UDP %" PRIu64 ", shm %" PRIu64,
		 io[0].shm_accepted, io[0].rx_dgrams, io[0].shm_rx);
	/* each worker's second socket of node 1 was closed at once */
	SG_CHECK(io[1].shm_open == 2 && io[1].rx_dgrams == 0 && io[1].shm_rx > 0,
		 "node 1: open %" PRIu64 ", UDP %" PRIu64 ", shm %" PRIu64, io[1].shm_open,
		 io[1].rx_dgrams, io[1].shm_rx);
	for (unsigned int r = 0; r < 2; r++)
		sigma_close(g.s[r]);
	g.n = 0;
	/* node 1's socket to a session of node 0 alone; then dead sockets alone */
	c.nnodes = 1;
	c.shm_paths = &g.shm[1];
	c.n_shm_paths = 1;
	expect_open_ok(c, "a socket of another node");
	/* 2 of each of the 2 workers before, 1 now */
	WAIT_IO(g.d[1], io[1], io[1].shm_open == 0 && io[1].shm_accepted == 5);
	SG_CHECK(io[1].shm_open == 0 && io[1].shm_accepted == 5, "node 1: open %" PRIu64
		 ", made %" PRIu64, io[1].shm_open, io[1].shm_accepted);
	c.shm_paths = paths;
	c.n_shm_paths = 2;
	expect_open_ok(c, "dead sockets alone");
	free_group(&g, fds);
}

/* Remove the folder and what a node or the fake one left in it (async-signal-safe). */
static void remove_dir(void)
{
	static const char *const names[] = {"node0.sock", "node1.sock", "node2.sock",
					    "node3.sock", "fake.sock"};
	char p[160];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		/* no snprintf in a signal handler: the folder's name, '/', the file's */
		size_t n = strlen(dir), m = strlen(names[i]);

		memcpy(p, dir, n);
		p[n] = '/';
		memcpy(p + n + 1, names[i], m + 1);
		unlink(p);
	}
	rmdir(dir);
}

/* meson's timeout (SIGTERM) or Ctrl-C: nothing left in /tmp (atexit() covers the rest). */
static void on_fatal(int sig)
{
	remove_dir();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sigma-shm-test-%d-XXXXXX", (int)getpid());
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	atexit(remove_dir);
	/* a crash's signals stay the sanitizers' */
	signal(SIGTERM, on_fatal);
	signal(SIGINT, on_fatal);
	rte_log_set_level_pattern("sigma.client", RTE_LOG_EMERG); /* the refusals' log lines */
	test_ring();
	sums(2, 0x3, "N=2 over shm");
	sums(4, 0xf, "N=4 over shm");
	sums(2, 0x2, "N=2 mixed (rank 0 UDP, rank 1 shm)");
	sums(4, 0x5, "N=4 mixed (ranks 0, 2 shm)");
	colocated(2, "N=2 colocated");
	colocated(3, "N=3 colocated");
	colocated(4, "N=4 colocated");
	test_bad_clients();
	test_node_gone();
	test_bad_conf();
	test_udp_shm_paths();
	test_short_memfd();
	test_full_ring(false);
	test_full_ring(true);
	return sg_test_finish("client_shm");
}
