/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench run: N pinned worker processes push_pull a sweep of tensor
 * sizes through summation nodes (kernel-UDP nodes started here, or nodes
 * given with --attach), every sum checked. Its output is bench_run_out.c's;
 * compare (bench_compare.c) runs the same sweep beside MPI and Gloo.
 *
 * Definitions (as nccl-tests): algbw = S / t for a tensor of S bytes that
 * takes t; busbw = algbw * 2(N-1)/N. Goodput per worker = 2S / t: the
 * gradient bytes each worker sends plus the sum bytes it receives, per
 * second.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sg_auth.h"
#include "sigma.h"
#include "sigma_job_conf.h"
#include "sigma_udpd.h"
#include "sigma_bench.h"
#include "sg_dp_pipeline.h"

#include "bench_run.h"


/*
 * The barrier that starts each iteration on all workers together. Waiters spin
 * (yielding) for up to RB_BAR_SPIN_NS, then sleep on a futex: they leave it
 * within a microsecond or so of each other, as MPI's ranks leave MPI_Barrier
 * (they spin). A sleeping waiter takes a wake-up to leave (tens of
 * microseconds on a VM, one after the other), and the first worker out would
 * count that in its push_pull's time, since its pushes wait for the others'.
 */
struct rb_bar {
	_Atomic uint32_t count; /* arrived in this generation */
	_Atomic uint32_t gen;   /* generation: the futex word */
	_Atomic uint32_t sleepers;
	uint32_t n;
};

#define RB_BAR_SPIN_NS 1000000

static void bar_wait(struct rb_bar *b)
{
	uint32_t gen = atomic_load(&b->gen);
	double t0;

	if (atomic_fetch_add(&b->count, 1) + 1 == b->n) {
		atomic_store(&b->count, 0);
		atomic_fetch_add(&b->gen, 1);
		if (atomic_load(&b->sleepers) != 0)
			syscall(SYS_futex, &b->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		return;
	}
	t0 = sigma_bench_now();
	while (atomic_load(&b->gen) == gen && sigma_bench_now() - t0 < RB_BAR_SPIN_NS * 1e-9)
		sched_yield();
	atomic_fetch_add(&b->sleepers, 1);
	while (atomic_load(&b->gen) == gen)
		syscall(SYS_futex, &b->gen, FUTEX_WAIT, gen, NULL, NULL, 0);
	atomic_fetch_sub(&b->sleepers, 1);
}

/* Per (N, dtype) point, shared between the parent and the worker processes. */
struct rb_shared {
	struct rb_bar bar;
	_Atomic int nodes_up; /* the parent's node threads run (or failed to start) */
	int failed;
	char err[SIGMA_ERR_LEN];
	uint64_t bad_elems;
	uint64_t retransmits[RB_MAX_SIZES], nacks[RB_MAX_SIZES];
	uint64_t rx_dropped[RB_MAX_SIZES]; /* the workers' sockets overflowed (sigma_stats) */
	double t[RB_MAX_SIZES][RB_MAX_N][RB_MAX_ITERS];
	uint32_t nlat[RB_MAX_SIZES][RB_MAX_N];
	float lat_us[RB_MAX_SIZES][RB_MAX_N][RB_MAX_LAT / RB_MAX_N];
};


static int parse_list(const char *s, unsigned int max, unsigned int *count,
		      int (*fn)(const char *item, unsigned int i, void *arg), void *arg)
{
	char buf[512], *rest = buf, *tok;
	unsigned int i = 0;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	/* strsep, not strtok: an empty item ("4K,,1M") is an error, not skipped. */
	while ((tok = strsep(&rest, ",")) != NULL) {
		if (i == max || *tok == '\0' || fn(tok, i, arg) < 0)
			return -EINVAL;
		i++;
	}
	*count = i;
	return i ? 0 : -EINVAL;
}

static int item_size(const char *s, unsigned int i, void *arg)
{
	return sigma_bench_parse_size(s, &((struct rb_opts *)arg)->sizes[i]);
}

static int item_n(const char *s, unsigned int i, void *arg)
{
	uint64_t v;

	if (sg_parse_u64(s, 1, RB_MAX_N, &v) != 0)
		return -EINVAL;
	((struct rb_opts *)arg)->ns[i] = (unsigned int)v;
	return 0;
}

static int item_dtype(const char *s, unsigned int i, void *arg)
{
	enum sg_dtype dt;

	/* Only types whose sums of the test pattern are exact at every N. */
	if (sg_dtype_from_name(s, &dt) < 0 || (dt != SG_DTYPE_FP32 && dt != SG_DTYPE_FP64 &&
					       dt != SG_DTYPE_INT32 && dt != SG_DTYPE_INT64))
		return -EINVAL;
	((struct rb_opts *)arg)->dts[i] = dt;
	return 0;
}

/* Worker r's element i: sum over N ranks is N*(i % 509) + N(N-1)/2, exact in every dtype. */
static void pin(unsigned int r)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (ncpu < 1)
		return;
	CPU_ZERO(&set);
	CPU_SET((int)(r % (unsigned long)ncpu), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * Each size is its own job (job_base + j) holding one tensor (id 0) of full
 * partitions: the form sigmad's [job N] sections declare (keys 0..K-1 of
 * partition_bytes each), so the same sweep runs against an attached sigmad.
 */
static uint32_t part_bytes(const struct rb_opts *o, unsigned int j)
{
	return o->sizes[j] < o->partition ? (uint32_t)o->sizes[j] : o->partition;
}

/* --auth: every job's key (the workers, forked, inherit it) */
static uint8_t auth_key[SG_AUTH_KEY_BYTES];

static uint32_t chunk_bytes(const struct rb_opts *o, unsigned int j)
{
	uint32_t p = part_bytes(o, j), c = o->chunk < p ? o->chunk : p / 8 * 8;

	/* with auth, 32 bytes of each datagram are the MAC's */
	return o->auth && c + SG_AUTH_TRAILER_BYTES > SG_MAX_CHUNK_BYTES ?
	       (SG_MAX_CHUNK_BYTES - SG_AUTH_TRAILER_BYTES) / 8 * 8 : c;
}

static uint64_t job_token(unsigned int job)
{
	return 0x5167a000ull + job;
}

/* With --memif, worker r's own IPv4 address on its memif link (sigmad learns it). */
static void memif_local_addr(unsigned int rank, char *buf, size_t cap)
{
	snprintf(buf, cap, "10.80.0.%u", 100 + rank);
}

/* @p data: a worker's session (over shared memory with --shm), not the parent's description. */
static struct sigma_tensor *open_size(const struct rb_opts *o, struct sigma_node *nodes,
				      unsigned int nnodes, unsigned int job, unsigned int n,
				      unsigned int rank, enum sg_dtype dt, unsigned int j, bool data,
				      struct sigma_session **sp)
{
	struct sigma_conf c = {.job = job, .rank = (uint16_t)rank, .nworkers = (uint16_t)n,
			       .token = job_token(job), .nodes = nodes, .nnodes = nnodes,
			       .partition_bytes = part_bytes(o, j), .chunk_bytes = chunk_bytes(o, j),
			       .window = o->window, .rto_us = 20000, .rto_max_us = 500000,
			       .spin_us = o->spin_us,
			       .max_retries = 12, .first_round = o->first_round,
			       .udp_gso = o->gso};
	struct sigma_tensor *t;
	uint8_t keys[2 * SG_AUTH_KEY_BYTES];
	char local[32];

	if (o->auth) {
		/* this rank's two keys only, as a job service would hand them out */
		sg_auth_rank_key(auth_key, (uint16_t)rank, SG_AUTH_RANK, keys);
		sg_auth_rank_key(auth_key, (uint16_t)rank, SG_AUTH_NODE, keys + SG_AUTH_KEY_BYTES);
		c.auth_keys = keys;
		c.auth_key_id = sg_auth_key_id(auth_key);
	}
	if (o->memif != NULL) {
		/* the worker's EAL has one port: its memif client (worker_eal()) */
		memif_local_addr(rank, local, sizeof(local));
		c.transport = SIGMA_TRANSPORT_DPDK;
		c.dpdk_port = 0;
		c.dpdk_rx_queues = (uint16_t)o->memif_queues;
		c.local_addr = local;
	}
	if (o->shm && data && o->colocate) {
		/* its own node's socket alone: the others' nodes over UDP */
		c.shm_paths = &o->shm_paths[rank];
		c.n_shm_paths = 1;
	} else if (o->shm && data) {
		c.transport = SIGMA_TRANSPORT_SHM;
		c.shm_paths = o->shm_paths;
		c.n_shm_paths = nnodes;
	}

	*sp = sigma_open(&c);
	if (*sp == NULL)
		return NULL;
	t = sigma_tensor_register(*sp, "bench", 0, dt, o->sizes[j] / sg_dtype_size(dt), 0);
	if (t == NULL) {
		sigma_close(*sp);
		*sp = NULL;
	}
	return t;
}

/*
 * --memif: start this worker process's own EAL (after the fork: EAL does not
 * survive one) with one port, the memif client of id @p r on sigmad's socket,
 * on CPU @p cpu. No hugepages, its own file prefix, so N of them run side by side.
 */
static int worker_eal(const char *sock, unsigned int r, unsigned int cpu)
{
	static char args[8][320];
	char *argv[9];

	snprintf(args[0], sizeof(args[0]), "sigma-bench-worker");
	snprintf(args[1], sizeof(args[1]), "--no-huge");
	snprintf(args[2], sizeof(args[2]), "--no-shconf");
	snprintf(args[3], sizeof(args[3]), "--no-pci");
	snprintf(args[4], sizeof(args[4]), "-m256");
	snprintf(args[5], sizeof(args[5]), "--file-prefix=sgbw_%d", (int)getpid());
	snprintf(args[6], sizeof(args[6]), "--lcores=0@%u", cpu);
	/* one memif buffer per jumbo frame (bench/sigmad_memif.sh says why) */
	if (snprintf(args[7], sizeof(args[7]), "--vdev=net_memif0,role=client,id=%u,socket=%s,"
		     "socket-abstract=no,bsize=9216", r, sock) >= (int)sizeof(args[7]))
		return -ENAMETOOLONG;
	for (int i = 0; i < 8; i++)
		argv[i] = args[i];
	argv[8] = NULL;
	rte_log_set_global_level(RTE_LOG_ERR); /* EAL's start-up chatter, once per worker */
	if (rte_eal_init(8, argv) < 0)
		return -rte_errno;
	return 0;
}

static void worker(const struct rb_opts *o, struct rb_shared *sh, struct sigma_node *nodes,
		   unsigned int nnodes, unsigned int job0, unsigned int n, unsigned int r,
		   enum sg_dtype dt)
{
	uint64_t maxb = 0;
	size_t es = sg_dtype_size(dt);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	void *in, *out;
	int erc;

	pin(r + 1);
	if (o->memif != NULL &&
	    (erc = worker_eal(o->memif, r, (r + 1) % (unsigned int)(ncpu < 1 ? 1 : ncpu))) < 0) {
		sh->failed = 1;
		snprintf(sh->err, sizeof(sh->err), "worker %u: EAL with memif client id %u on %s: "
			 "%s", r, r, o->memif, rte_strerror(-erc));
	}
	for (unsigned int j = 0; j < o->n_sizes; j++)
		maxb = o->sizes[j] > maxb ? o->sizes[j] : maxb;
	in = malloc(maxb);
	out = malloc(maxb);
	if (in == NULL || out == NULL)
		sh->failed = 1;
	/* the parent's nodes write their buffers once as they start: not during a push */
	while (!atomic_load(&sh->nodes_up))
		usleep(200);
	for (unsigned int j = 0; j < o->n_sizes; j++) {
		uint64_t ne = o->sizes[j] / es;
		struct sigma_session *s = NULL;
		struct sigma_tensor *t = NULL;
		struct sigma_stats st;

		if (!sh->failed) {
			t = open_size(o, nodes, nnodes, job0 + j, n, r, dt, j, true, &s);
			if (t == NULL) {
				sh->failed = 1;
				snprintf(sh->err, sizeof(sh->err), "worker %u: setup failed: %s",
					 r, strerror(errno));
			} else {
				sigma_bench_fill(in, dt, ne, r);
			}
		}
		for (unsigned int it = 0; it <= o->iters; it++) {
			double t0;
			int rc;

			bar_wait(&sh->bar);
			if (sh->failed || t == NULL)
				continue;
			t0 = sigma_bench_now();
			rc = sigma_push_pull_sync(t, in, out);
			if (rc < 0) {
				sh->failed = 1;
				snprintf(sh->err, sizeof(sh->err), "worker %u: %s", r,
					 sigma_last_error(s));
				continue;
			}
			if (it == 0)
				continue; /* warm-up */
			sh->t[j][r][it - 1] = sigma_bench_now() - t0;
			for (uint32_t p = 0; p < sigma_tensor_nparts(t); p++)
				if (sh->nlat[j][r] < RB_MAX_LAT / RB_MAX_N)
					sh->lat_us[j][r][sh->nlat[j][r]++] =
						(float)(sigma_tensor_part_latency(t, p) / 1e3);
			if (it == o->iters)
				__atomic_add_fetch(&sh->bad_elems, sigma_bench_count_bad(out, dt, ne, n),
						   __ATOMIC_RELAXED);
		}
		if (s != NULL) {
			sigma_get_stats(s, &st);
			__atomic_add_fetch(&sh->retransmits[j], st.retransmits, __ATOMIC_RELAXED);
			__atomic_add_fetch(&sh->nacks[j], st.nacks, __ATOMIC_RELAXED);
			__atomic_add_fetch(&sh->rx_dropped[j], st.rx_dropped, __ATOMIC_RELAXED);
		}
		sigma_close(s);
	}
	free(in);
	free(out);
	if (o->memif != NULL)
		sg_dp_eal_cleanup();
}

static int parse_attach(const char *spec, struct sigma_node *nodes, char addrs[][64],
			unsigned int *nn)
{
	char buf[256], *save = NULL, *tok;
	unsigned int i = 0;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(tok, ':');

		if (i == RB_MAX_NODES)
			return -EINVAL;
		nodes[i] = (struct sigma_node){.kind = SG_NODE_CPU, .gbps = 1};
		if (colon != NULL) {
			unsigned int port;

			*colon = '\0';
			if (sigma_bench_parse_uint(colon + 1, 0, 65535, &port) < 0)
				return -EINVAL;
			nodes[i].port = (uint16_t)port;
		}
		snprintf(addrs[i], 64, "%s", tok);
		nodes[i].addr = addrs[i];
		i++;
	}
	*nn = i;
	return i ? 0 : -EINVAL;
}

static void kill_workers(const pid_t *pids, unsigned int n)
{
	for (unsigned int k = 0; k < n; k++)
		if (pids[k] > 0)
			kill(pids[k], SIGKILL);
}

/*
 * Wait for the workers. A worker that was never forked (or a node that did
 * not start: @abort) or one that dies (a crash, a signal) would leave the
 * others waiting at the barrier forever: kill them all. Workers that only
 * failed their own setup still take part in every barrier and exit normally.
 */
static void reap(pid_t *pids, unsigned int n, struct rb_shared *sh, bool abort)
{
	unsigned int left = 0;

	for (unsigned int r = 0; r < n; r++)
		if (pids[r] > 0)
			left++;
		else
			abort = true;
	if (abort) {
		sh->failed = 1;
		kill_workers(pids, n);
	}
	while (left > 0) {
		int st;
		pid_t p = waitpid(-1, &st, 0);

		if (p < 0)
			break;
		for (unsigned int r = 0; r < n; r++) {
			if (pids[r] != p)
				continue;
			pids[r] = -1;
			left--;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				break;
			sh->failed = 1;
			snprintf(sh->err, sizeof(sh->err), "worker %u died (status 0x%x)", r, st);
			kill_workers(pids, n);
			break;
		}
	}
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* Busy and idle cycles of each sigmad lcore, from its /sigma/lcores telemetry command. */
struct rb_cycles {
	unsigned int n;
	uint64_t busy[RB_MAX_NODES], idle[RB_MAX_NODES];
};

static int read_telemetry(const char *path, struct rb_cycles *c)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	static char buf[1 << 16];
	json_t *root, *lc, *v;
	const char *key;
	ssize_t len;
	int fd;

	c->n = 0;
	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    read(fd, buf, sizeof(buf)) <= 0 || /* the greeting */
	    write(fd, "/sigma/lcores", 13) != 13 || (len = read(fd, buf, sizeof(buf) - 1)) <= 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	close(fd);
	buf[len] = '\0';
	root = json_loads(buf, 0, NULL);
	lc = json_object_get(root, "/sigma/lcores");
	json_object_foreach(lc, key, v) {
		if (c->n == RB_MAX_NODES || !json_is_object(v))
			continue;
		c->busy[c->n] = (uint64_t)json_integer_value(json_object_get(v, "busy_cycles"));
		c->idle[c->n] = (uint64_t)json_integer_value(json_object_get(v, "idle_cycles"));
		c->n++;
	}
	json_decref(root);
	return c->n ? 0 : -ENOENT;
}

/* One (N, dtype) point of the sweep: nodes up, N workers forked, results folded. */
static int run_point(const struct rb_opts *o, unsigned int n, enum sg_dtype dt, unsigned int job0,
		     struct rb_result *res)
{
	struct sigma_node nodes[RB_MAX_NODES];
	char addrs[RB_MAX_NODES][64];
	struct sigma_udpd *d[RB_MAX_NODES] = {NULL};
	unsigned int nnodes = 0, nd = 0;
	char shm_dir[64] = "", shm_path[RB_MAX_NODES][96];
	struct rb_opts so = *o; /* with --shm: o, and the nodes' sockets */
	struct rb_shared *sh;
	pid_t pids[RB_MAX_N];
	struct rb_cycles cyc0 = {0}, cyc1 = {0};
	bool tel_busy = false;
	int rc = 0;

	for (unsigned int j = 0; j < o->n_sizes; j++)
		res[j] = (struct rb_result){.n = n, .dt = dt, .size = o->sizes[j]};
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return -ENOMEM;
	if (o->attach[0]) {
		if (parse_attach(o->attach, nodes, addrs, &nnodes) < 0) {
			fprintf(stderr, "sigma-bench: bad --attach '%s'\n", o->attach);
			rc = -EINVAL;
			goto out;
		}
	} else {
		snprintf(shm_dir, sizeof(shm_dir), "/tmp/sigma-bench-shm-%d-XXXXXX", (int)getpid());
		if (o->shm && mkdtemp(shm_dir) == NULL) {
			rc = -errno;
			perror("sigma-bench: a folder for the nodes' shared-memory sockets");
			shm_dir[0] = '\0';
			goto out;
		}
		if (!o->shm)
			shm_dir[0] = '\0';
		/* colocated: one node per worker, as BytePS with k = 0 */
		for (nd = 0; nd < (o->colocate ? n : o->nodes); nd++) {
			/* a size's sessions are open at once: N channels a node */
			struct sigma_udpd_conf dc = {.engine = {.pool_bufs = 8192}, .spin_us = o->spin_us,
						     .shm_max = 2 * RB_MAX_N};

			snprintf(shm_path[nd], sizeof(shm_path[nd]), "%s/node%u", shm_dir, nd);
			dc.shm_path = o->shm ? shm_path[nd] : NULL;
			so.shm_paths[nd] = shm_path[nd];
			d[nd] = sigma_udpd_create(&dc);
			if (d[nd] == NULL) {
				rc = -errno;
				perror("sigma-bench: summation node");
				goto out;
			}
			nodes[nd] = (struct sigma_node){.addr = "127.0.0.1",
							.port = sigma_udpd_port(d[nd]),
							.kind = SG_NODE_CPU, .gbps = 1};
		}
		nnodes = nd;
		o = &so;
		/* The parent registers the same tensors to describe each job to its nodes. */
		for (unsigned int j = 0; j < o->n_sizes && rc == 0; j++) {
			static struct sg_dp_key keys[SG_MAX_PARTS];
			struct sigma_session *s;

			if (open_size(o, nodes, nnodes, job0 + j, n, 0, dt, j, false, &s) == NULL) {
				rc = -errno;
				fprintf(stderr, "sigma-bench: size %" PRIu64 ": cannot register the "
						"tensor: %s\n", o->sizes[j], strerror(errno));
				break;
			}
			for (unsigned int i = 0; i < nnodes && rc == 0; i++) {
				struct sg_dp_job_conf jc;
				int nk = sigma_job_for_node(s, i, &jc, keys, SG_MAX_PARTS);

				jc.max_inflight = 4096;
				jc.auth_key = o->auth ? auth_key : NULL;
				rc = nk > 0 ? sigma_udpd_add_job(d[i], &jc) : nk < 0 ? nk : 0;
			}
			sigma_close(s);
		}
		if (rc < 0)
			goto out;
	}
	if (o->telemetry != NULL && read_telemetry(o->telemetry, &cyc0) < 0)
		fprintf(stderr, "sigma-bench: no lcore telemetry from %s\n", o->telemetry);
	sh->bar.n = n;
	fflush(NULL);
	for (unsigned int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			worker(o, sh, nodes, nnodes, job0, n, r, dt);
			_exit(0);
		}
	}
	/*
	 * The in-process nodes start only now: a worker forked while a node
	 * thread held an allocator lock (ASan's allocator has no fork handler)
	 * would block forever in its first malloc. Their sockets are bound
	 * already, so early pushes wait in the socket buffer.
	 */
	for (unsigned int i = 0; i < nnodes && d[i] != NULL && rc == 0; i++)
		rc = sigma_udpd_start(d[i]);
	if (rc < 0) {
		sh->failed = 1;
		snprintf(sh->err, sizeof(sh->err), "summation node: %s", strerror(-rc));
	}
	atomic_store(&sh->nodes_up, 1);
	reap(pids, n, sh, rc < 0);
	if (o->telemetry != NULL && cyc0.n && read_telemetry(o->telemetry, &cyc1) == 0 &&
	    cyc1.n == cyc0.n)
		tel_busy = true;
	for (unsigned int j = 0; j < o->n_sizes; j++) {
		struct rb_result *x = &res[j];
		double tv[RB_MAX_N * RB_MAX_ITERS];
		size_t nt = 0, nl = 0;
		float *lat;

		*x = (struct rb_result){.n = n, .dt = dt, .size = o->sizes[j],
					.ok = !sh->failed && sh->bad_elems == 0,
					.retransmits = sh->retransmits[j], .nacks = sh->nacks[j],
					.rx_dropped = sh->rx_dropped[j],
					.window = o->window ? o->window :
						  sigma_window_default(n, chunk_bytes(o, j))};
		/* An iteration ends when its slowest worker is done. */
		for (unsigned int it = 0; it < o->iters; it++) {
			double m = 0;

			for (unsigned int r = 0; r < n; r++)
				m = sh->t[j][r][it] > m ? sh->t[j][r][it] : m;
			tv[nt++] = m;
		}
		x->t_med = sigma_bench_median(tv, nt);
		if (x->t_med > 0) {
			x->algbw = (double)x->size / x->t_med;
			x->busbw = x->algbw * 2 * (n - 1) / n;
			x->goodput = 2 * (double)x->size / x->t_med;
		}
		lat = malloc(sizeof(float) * (RB_MAX_LAT + 1));
		for (unsigned int r = 0; r < n && lat; r++)
			for (uint32_t k = 0; k < sh->nlat[j][r]; k++)
				lat[nl++] = sh->lat_us[j][r][k];
		if (lat && nl) {
			qsort(lat, nl, sizeof(float), cmp_float);
			x->p50_us = lat[nl / 2];
			x->p99_us = lat[(size_t)((nl - 1) * 0.99)];
			x->max_us = lat[nl - 1];
		}
		free(lat);
		x->nbusy = tel_busy ? cyc1.n : nd;
		x->busy_sigmad = tel_busy;
		for (unsigned int i = 0; i < x->nbusy; i++) {
			double b = tel_busy ? (double)(cyc1.busy[i] - cyc0.busy[i]) : 0;
			double t = tel_busy ? b + (double)(cyc1.idle[i] - cyc0.idle[i]) : 0;

			x->busy[i] = tel_busy ? (t > 0 ? b / t : 0) : sigma_udpd_busy(d[i]);
		}
	}
	if (sh->failed)
		fprintf(stderr, "sigma-bench: N=%u %s: %s\n", n, sg_dtype_name(dt),
			sh->err[0] ? sh->err : "a worker failed");
	if (sh->bad_elems)
		fprintf(stderr, "sigma-bench: N=%u %s: %" PRIu64 " wrong sums\n", n,
			sg_dtype_name(dt), sh->bad_elems);
	rc = sh->failed || sh->bad_elems ? -EIO : 0;
out:
	for (unsigned int i = 0; i < nd; i++)
		sigma_udpd_destroy(d[i]);
	if (shm_dir[0])
		rmdir(shm_dir); /* the nodes removed their sockets */
	munmap(sh, sizeof(*sh));
	return rc;
}

/* The sweeps' defaults: what rb_parse_opts() starts from and what the usage says. */
static const struct rb_defaults {
	const char *cmd, *workers, *sizes;
} rb_defaults[] = {
	{"run", "2,4", "4K,64K,1M,16M"},
	{"compare", "4", "1M,16M,64M"},
};

static const struct rb_defaults *defaults_of(const char *cmd)
{
	for (size_t i = 0; i < sizeof(rb_defaults) / sizeof(rb_defaults[0]); i++)
		if (strcmp(cmd, rb_defaults[i].cmd) == 0)
			return &rb_defaults[i];
	return &rb_defaults[0];
}

void rb_run_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: sigma-bench %s [options]\n"
		   "  --workers LIST  N values, e.g. 2,4 (default %s)\n"
		   "  --sizes LIST    tensor sizes, e.g. 4K,1M,64M (default %s)\n"
		   "  --dtypes LIST   fp32,fp64,int32,int64 (default fp32)\n"
		   "  --iters I       timed iterations per size, after one warm-up (default 5)\n"
		   "  --nodes K       kernel-UDP summation nodes (threads) to start (default: one "
		   "per CPU, at most 8)\n"
		   "  --attach LIST   use running nodes instead (ip:port,...; jobs configured there)\n"
		   "  --chunk BYTES   chunk payload (default 8920: loopback carries jumbo frames)\n"
		   "  --window W      outstanding chunks per node (default: libsigma's, "
		   "sigma_window_default(); 256 with --memif)\n"
		   "  --gso, --no-gso kernel-UDP workers send runs of equal pushes in one UDP_SEGMENT "
		   "message, or one datagram per message (sigma_conf.udp_gso; default libsigma's: "
		   "on for nodes on 127.0.0.0/8)\n"
		   "  --spin-us U     workers and node threads poll up to U us before sleeping, while "
		   "little is in flight (sigma_conf.spin_us; default libsigma's, 200; 0: never)\n"
		   "  --json F --csv F --plot F.svg|F.png   outputs (JSON goes to stdout without "
		   "--json)\n"
		   "  --partition B   partition bytes (default 2M); sizes are at most one "
		   "partition or a multiple\n"
		   "  --telemetry SOCK  sigmad's telemetry socket: busy%% per lcore (default "
		   "$SIGMA_TELEMETRY)\n"
		   "  --memif SOCK    with --attach: workers use libsigma's DPDK transport, worker r "
		   "as the memif client of id r on sigmad's socket SOCK (bench/sigmad_memif.sh)\n"
		   "  --shm           workers reach the node threads through shared memory "
		   "(SIGMA_TRANSPORT_SHM), not kernel UDP\n"
		   "  --auth          the jobs have auth = mac (docs/protocol.md): pushes and "
		   "RESULTs signed, checked; chunks at most 8888 bytes (not with --attach)\n"
		   "  --colocate      with --shm: one node thread per worker (not --nodes), "
		   "worker r given node r's socket alone: its own node over shared memory, the "
		   "others over kernel UDP (BytePS with k = 0)\n"
		   "  --memif-queues Q  RX queues per worker: the lcores of sigmad's layout "
		   "(default $SIGMA_MEMIF_QUEUES, else 1)\n"
		   "  --print-sigmad-config   print the [job N] sections sigmad needs for this "
		   "sweep, and exit\n"
		   "  --quiet         no progress lines\n", cmd,
		defaults_of(cmd)->workers, defaults_of(cmd)->sizes);
	if (strcmp(cmd, "compare") == 0)
		fprintf(f, "  --runs R        repeat the whole comparison R times (1..%d), "
			   "interleaved; each figure is the median across runs (default 1)\n"
			   "  --threads-baseline  with --attach or --colocate: in each run, also "
			   "sweep through sigma-bench's own kernel-UDP node threads (--nodes; "
			   "workers without --gso, over UDP alone) and report the ratio "
			   "(bench/sigmad_socket.sh)\n"
			   "  --sweep         in each run, also measure OpenMPI over shared memory "
			   "(btl self,vader) and Gloo's allreduce (TCP loopback) beside MPI over TCP; "
			   "--plot F.svg|F.png then draws each peer's ratio per size\n"
			   "  --auth          here: in each run, also the same sweep without auth "
			   "(before it in even runs, after it in odd ones), and per point the "
			   "ratio of the medians, auth / plain\n", RB_MAX_RUNS);
}

int rb_parse_opts(int argc, char **argv, struct rb_opts *o, const char *cmd)
{
	static const struct option opts[] = {
		{"workers", required_argument, NULL, 'n'}, {"sizes", required_argument, NULL, 's'},
		{"dtypes", required_argument, NULL, 'd'},  {"iters", required_argument, NULL, 'i'},
		{"nodes", required_argument, NULL, 'k'},   {"attach", required_argument, NULL, 'a'},
		{"chunk", required_argument, NULL, 'c'},   {"window", required_argument, NULL, 'w'},
		{"json", required_argument, NULL, 'j'},    {"csv", required_argument, NULL, 'v'},
		{"plot", required_argument, NULL, 'p'},    {"quiet", no_argument, NULL, 'q'},
		{"partition", required_argument, NULL, 'P'},
		{"print-sigmad-config", no_argument, NULL, 'C'},
		{"telemetry", required_argument, NULL, 'T'},
		{"memif", required_argument, NULL, 'M'},
		{"memif-queues", required_argument, NULL, 'Q'},
		{"runs", required_argument, NULL, 'R'},
		{"threads-baseline", no_argument, NULL, 'B'},
		{"gso", no_argument, NULL, 'G'},         {"no-gso", no_argument, NULL, 'g'},
		{"spin-us", required_argument, NULL, 'U'},
		{"sweep", no_argument, NULL, 'S'},      {"shm", no_argument, NULL, 'H'},
		{"colocate", no_argument, NULL, 'O'},   {"auth", no_argument, NULL, 'Y'},
		{"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	int c, bad = 0;
	bool window_set = false;

	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* One node thread per CPU spreads the summing; measured best on 2 cores. */
	*o = (struct rb_opts){.iters = 5, .nodes = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (unsigned int)ncpu,
			      .chunk = 8920, .window = 0,
			      .partition = 2 << 20, .runs = 1};
	bad |= parse_list(defaults_of(cmd)->workers, RB_MAX_N, &o->n_ns, item_n, o);
	bad |= parse_list(defaults_of(cmd)->sizes, RB_MAX_SIZES, &o->n_sizes, item_size, o);
	bad |= parse_list("fp32", RB_MAX_DT, &o->n_dts, item_dtype, o);
	/* bench/sigmad_netns.sh exports where its sigmad's telemetry socket is. */
	o->telemetry = getenv("SIGMA_TELEMETRY");
	/* bench/sigmad_memif.sh exports how many lcores its sigmad answers from. */
	o->memif_queues = 1;
	if (getenv("SIGMA_MEMIF_QUEUES") != NULL &&
	    sigma_bench_parse_uint(getenv("SIGMA_MEMIF_QUEUES"), 0, UINT_MAX, &o->memif_queues) < 0)
		o->memif_queues = 0; /* refused below with the valid range */
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': bad |= parse_list(optarg, RB_MAX_N, &o->n_ns, item_n, o); break;
		case 's': bad |= parse_list(optarg, RB_MAX_SIZES, &o->n_sizes, item_size, o); break;
		case 'd': bad |= parse_list(optarg, RB_MAX_DT, &o->n_dts, item_dtype, o); break;
		case 'i': bad |= sigma_bench_parse_uint(optarg, 0, UINT_MAX, &o->iters) < 0; break;
		case 'k': bad |= sigma_bench_parse_uint(optarg, 0, UINT_MAX, &o->nodes) < 0; break;
		case 'a': snprintf(o->attach, sizeof(o->attach), "%s", optarg); break;
		case 'c': bad |= sigma_bench_parse_uint(optarg, 0, UINT_MAX, &o->chunk) < 0; break;
		case 'w':
			bad |= sigma_bench_parse_uint(optarg, 0, UINT_MAX, &o->window) < 0;
			window_set = true;
			break;
		case 'j': o->json = optarg; break;
		case 'v': o->csv = optarg; break;
		case 'p': o->plot = optarg; break;
		case 'q': o->quiet = true; break;
		case 'P': {
			uint64_t v = 0;

			bad |= sigma_bench_parse_size(optarg, &v) < 0 || v > UINT32_MAX;
			o->partition = (uint32_t)v;
			break;
		}
		case 'C': o->print_config = true; break;
		case 'T': o->telemetry = optarg; break;
		case 'M': o->memif = optarg; break;
		case 'Q':
			if (sigma_bench_parse_uint(optarg, 0, UINT_MAX, &o->memif_queues) < 0)
				o->memif_queues = 0; /* refused below with the valid range */
			break;
		case 'R':
			if (strcmp(cmd, "compare") != 0 ||
			    sigma_bench_parse_uint(optarg, 1, RB_MAX_RUNS, &o->runs) < 0) {
				fprintf(stderr, "sigma-bench: --runs is compare's: 1..%d\n",
					RB_MAX_RUNS);
				return -EINVAL;
			}
			break;
		case 'B':
		case 'S':
			/* compare's flags: a run has no peers and no baseline */
			if (strcmp(cmd, "compare") != 0) {
				fprintf(stderr, "sigma-bench: --%s is compare's\n",
					c == 'B' ? "threads-baseline" : "sweep");
				return -EINVAL;
			}
			*(c == 'B' ? &o->threads : &o->sweep) = true;
			break;
		case 'H': o->shm = true; break;
		case 'O': o->colocate = true; break;
		case 'Y':
			o->auth = true;
			if (sg_auth_job_key(auth_key) < 0)
				bad = 1;
			break;
		case 'G': o->gso = SIGMA_GSO_ON; break;
		case 'g': o->gso = SIGMA_GSO_OFF; break;
		case 'U': {
			unsigned int v = 0;

			bad |= sigma_bench_parse_uint(optarg, 0, 1000000, &v) < 0;
			o->spin_us = v == 0 ? -1 : (int)v;
			break;
		}
		case 'h': return 1;
		default: return -EINVAL;
		}
	}
	if (bad || optind < argc || o->iters < 1 || o->iters > RB_MAX_ITERS || o->nodes < 1 ||
	    o->nodes > RB_MAX_NODES || o->chunk == 0 || o->chunk % 8 || o->chunk > 8920 ||
	    o->window > 65536) {
		fprintf(stderr, "sigma-bench: bad option: N in 1..%d, at most %d sizes of at most "
				"1G, dtypes fp32/fp64/int32/int64, iters 1..%d, nodes 1..%d, chunk a "
				"multiple of 8 <= 8920, window 0..65536, spin-us 0..1000000\n",
			RB_MAX_N, RB_MAX_SIZES, RB_MAX_ITERS, RB_MAX_NODES);
		return -EINVAL;
	}
	/* shared memory loses nothing to socket buffers: a wide window (best
	 * measured at 256 for 64 MB) keeps sigmad fed */
	if (o->memif != NULL && !window_set)
		o->window = 256;
	if (o->memif_queues < 1 || o->memif_queues > SIGMA_DPDK_MAX_RXQ) {
		fprintf(stderr, "sigma-bench: --memif-queues must be in 1..%d\n",
			SIGMA_DPDK_MAX_RXQ);
		return -EINVAL;
	}
	if (o->auth && o->attach[0] != '\0') {
		fprintf(stderr, "sigma-bench: --auth gives its own node threads the job keys: not "
				"with --attach\n");
		return -EINVAL;
	}
	if (o->colocate && (!o->shm || o->attach[0] != '\0')) {
		fprintf(stderr, "sigma-bench: --colocate needs --shm (and not --attach)\n");
		return -EINVAL;
	}
	for (unsigned int a = 0; a < o->n_ns && o->colocate; a++)
		if (o->ns[a] > RB_MAX_NODES) {
			fprintf(stderr, "sigma-bench: --colocate starts a node per worker: N at "
					"most %d\n", RB_MAX_NODES);
			return -EINVAL;
		}
	if (o->threads && o->attach[0] == '\0' && !o->colocate) {
		fprintf(stderr, "sigma-bench: --threads-baseline needs --attach or --colocate: "
				"without them the sweep runs the node threads already\n");
		return -EINVAL;
	}
	if (o->shm && (o->attach[0] != '\0' || (o->threads && !o->colocate))) {
		fprintf(stderr, "sigma-bench: --shm is for sigma-bench's own node threads, not "
				"--attach or --threads-baseline (but --colocate "
				"--threads-baseline)\n");
		return -EINVAL;
	}
	if (o->memif != NULL && (o->attach[0] == '\0' || o->memif[0] == '\0')) {
		fprintf(stderr, "sigma-bench: --memif needs --attach: the sigmad that serves the "
				"memif socket\n");
		return -EINVAL;
	}
	if (o->partition < 8 || o->partition % 8) {
		fprintf(stderr, "sigma-bench: --partition must be a positive multiple of 8\n");
		return -EINVAL;
	}
	for (unsigned int j = 0; j < o->n_sizes; j++)
		if (o->sizes[j] % 8 || (o->sizes[j] > o->partition && o->sizes[j] % o->partition)) {
			fprintf(stderr, "sigma-bench: size %" PRIu64 " must be a multiple of 8, and "
					"at most --partition (%u) or a multiple of it\n",
				o->sizes[j], o->partition);
			return -EINVAL;
		}
	return 0;
}

static unsigned int job_base(unsigned int point)
{
	return 1000 + point * RB_MAX_SIZES;
}

/* The [job N] sections a sigmad needs to serve the sweep (for --attach). */
void rb_print_sigmad_jobs(const struct rb_opts *o)
{
	unsigned int point = 0;

	printf("# sigma-bench sweep jobs for sigmad (add to its config file)\n");
	for (unsigned int a = 0; a < o->n_ns; a++)
		for (unsigned int b = 0; b < o->n_dts; b++, point++)
			for (unsigned int j = 0; j < o->n_sizes; j++) {
				unsigned int job = job_base(point) + j;

				printf("[job %u]\nworkers = %u\ntoken = 0x%" PRIx64 "\ndtype = %s\n"
				       "keys = %" PRIu64 "\npartition_bytes = %u\nchunk_bytes = %u\n\n",
				       job, o->ns[a], job_token(job), sg_dtype_name(o->dts[b]),
				       o->sizes[j] / part_bytes(o, j), part_bytes(o, j),
				       chunk_bytes(o, j));
			}
}

/* The whole sweep; @p res gets n_ns * n_dts * n_sizes entries. */
int rb_sweep(const struct rb_opts *o, struct rb_result *res)
{
	unsigned int points = o->n_ns * o->n_dts, done = 0;
	int rc = 0;
	double t0 = sigma_bench_now();

	for (unsigned int a = 0; a < o->n_ns; a++)
		for (unsigned int b = 0; b < o->n_dts; b++) {
			if (!o->quiet)
				fprintf(stderr, "sigma-bench: [%u/%u] N=%u %s, %u sizes x %u "
						"iterations (%.0f s so far)\n", done + 1, points,
					o->ns[a], sg_dtype_name(o->dts[b]), o->n_sizes,
					o->iters + 1, sigma_bench_now() - t0);
			if (run_point(o, o->ns[a], o->dts[b], job_base(done),
				      res + (size_t)done * o->n_sizes) < 0)
				rc = -EIO;
			done++;
		}
	return rc;
}

static int outputs(const struct rb_opts *o, const struct rb_result *res, unsigned int n)
{
	struct sigma_bench_out out;

	rb_print_table(res, n);
	if (sigma_bench_out_open(&out) < 0)
		return -ENOMEM;
	rb_write_json(out.f, o, res, n);
	if (sigma_bench_out_write(&out, o->json) < 0)
		return -EIO;
	if (o->csv != NULL && rb_write_csv(o->csv, res, n) < 0)
		return -EIO;
	if (o->plot != NULL && rb_plot(o->plot, res, n, o) < 0) {
		fprintf(stderr, "sigma-bench: gnuplot failed (is gnuplot-nox installed?)\n");
		return -EIO;
	}
	return 0;
}

int sigma_bench_run(int argc, char **argv)
{
	struct rb_opts o;
	struct rb_result *res;
	unsigned int n;
	int rc = rb_parse_opts(argc, argv, &o, "run");

	if (rc != 0) {
		rb_run_usage(rc > 0 ? stdout : stderr, "run");
		return rc > 0 ? 0 : 2;
	}
	if (o.print_config) {
		rb_print_sigmad_jobs(&o);
		return 0;
	}
	n = o.n_ns * o.n_dts * o.n_sizes;
	res = calloc(n, sizeof(*res));
	if (res == NULL)
		return 1;
	rc = rb_sweep(&o, res);
	if (outputs(&o, res, n) < 0)
		rc = -EIO;
	free(res);
	return rc < 0 ? 1 : 0;
}
