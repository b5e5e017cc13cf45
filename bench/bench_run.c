/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench run / compare: N pinned worker processes push_pull a sweep of
 * tensor sizes through summation nodes (kernel-UDP nodes started here, or
 * nodes given with --attach), every sum checked; compare runs the same sweep
 * through OpenMPI's MPI_Allreduce (with --sweep also over shared memory, and
 * Gloo's allreduce) and prints the ratios.
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

#define RB_MAX_SIZES 16
#define RB_MAX_N 16
#define RB_MAX_DT 4
#define RB_MAX_NODES 8
#define RB_MAX_ITERS 50
#define RB_MAX_LAT 200000 /* partition latencies kept per (size, worker) */
#define RB_MAX_RUNS 15

struct rb_opts {
	unsigned int ns[RB_MAX_N], n_ns;
	uint64_t sizes[RB_MAX_SIZES];
	unsigned int n_sizes;
	enum sg_dtype dts[RB_MAX_DT];
	unsigned int n_dts;
	unsigned int iters, nodes, chunk, window;
	uint32_t partition;
	bool print_config;
	const char *telemetry; /* sigmad's telemetry socket: busy% per lcore */
	const char *memif;     /* sigmad's memif socket: workers use DPDK, worker r on id r */
	unsigned int memif_queues; /* RX queues per worker: sigmad's lcore count */
	unsigned int runs;     /* compare: whole sweeps, each point's median across them */
	bool threads;          /* compare --threads-baseline: node threads too, same run */
	uint8_t gso;           /* sigma_conf.udp_gso of the kernel-UDP workers (--no-gso) */
	int spin_us;           /* sigma_conf.spin_us and the node threads' (--spin-us) */
	bool sweep;            /* compare --sweep: MPI over shared memory and Gloo too */
	bool shm;              /* workers reach the node threads through shared memory */
	bool auth;             /* --auth: the jobs have auth = mac (their nodes started here) */
	bool colocate;         /* --shm --colocate: N nodes, worker r over shm to node r alone,
				  kernel UDP to the others (BytePS with k = 0) */
	const char *shm_paths[RB_MAX_NODES]; /* ... their sockets (run_point() sets them) */
	uint32_t first_round;  /* round of every tensor's first push_pull (an attached node
				  keeps its jobs' rounds from one sweep to the next) */
	char attach[256];
	const char *json, *csv, *plot;
	bool quiet;
};

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

struct rb_result {
	unsigned int n;
	enum sg_dtype dt;
	uint64_t size;
	double t_med, algbw, busbw, goodput;
	double p50_us, p99_us, max_us;
	uint64_t retransmits, nacks, rx_dropped;
	unsigned int window;       /* the workers' window (libsigma's default for N and chunk) */
	double busy[RB_MAX_NODES]; /* node threads, or sigmad lcores (--telemetry) */
	unsigned int nbusy;
	bool busy_sigmad; /* busy[] came from sigmad's telemetry */
	bool ok;
};

int sigma_bench_parse_size(const char *s, uint64_t *out)
{
	const char *end;
	double v;
	uint64_t mul = 1;

	if (sigma_bench_parse_unit(s, &v, &end) != 0)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': mul = 1024; end++; break;
	case 'M': case 'm': mul = 1024 * 1024; end++; break;
	case 'G': case 'g': mul = 1024ull * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || v * mul > 1024.0 * 1024 * 1024)
		return -EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

/* Split a comma list and call @p fn on each item; -EINVAL on a bad one or too many. */
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
void sigma_bench_fill(void *buf, enum sg_dtype dt, uint64_t n, unsigned int r)
{
	for (uint64_t i = 0; i < n; i++) {
		int64_t v = (int64_t)(i % 509) + r;

		switch (dt) {
		case SG_DTYPE_FP32: ((float *)buf)[i] = (float)v; break;
		case SG_DTYPE_FP64: ((double *)buf)[i] = (double)v; break;
		case SG_DTYPE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
		default: ((int64_t *)buf)[i] = v; break;
		}
	}
}

uint64_t sigma_bench_count_bad(const void *buf, enum sg_dtype dt, uint64_t n, unsigned int nw)
{
	uint64_t bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		int64_t ref = (int64_t)nw * (int64_t)(i % 509) + (int64_t)nw * (nw - 1) / 2;

		switch (dt) {
		case SG_DTYPE_FP32: bad += ((const float *)buf)[i] != (float)ref; break;
		case SG_DTYPE_FP64: bad += ((const double *)buf)[i] != (double)ref; break;
		case SG_DTYPE_INT32: bad += ((const int32_t *)buf)[i] != (int32_t)ref; break;
		default: bad += ((const int64_t *)buf)[i] != ref; break;
		}
	}
	return bad;
}

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

static void fmt_size(uint64_t b, char *out, size_t cap)
{
	if (b >= (1 << 20) && b % (1 << 20) == 0)
		snprintf(out, cap, "%" PRIu64 "M", b >> 20);
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(out, cap, "%" PRIu64 "K", b >> 10);
	else
		snprintf(out, cap, "%" PRIu64, b);
}

static void print_table(const struct rb_result *r, unsigned int n)
{
	printf("%3s %6s %8s %10s %10s %10s %10s %9s %9s %9s %8s %7s\n", "N", "dtype", "size",
	       "time ms", "algbw MB/s", "busbw MB/s", "gput MB/s", "p50 us", "p99 us", "max us",
	       "retrans", "busy%");
	for (unsigned int i = 0; i < n; i++) {
		char sz[32];
		double busy = 0;

		for (unsigned int k = 0; k < r[i].nbusy; k++)
			busy = r[i].busy[k] > busy ? r[i].busy[k] : busy;
		fmt_size(r[i].size, sz, sizeof(sz));
		printf("%3u %6s %8s %10.3f %10.1f %10.1f %10.1f %9.0f %9.0f %9.0f %8" PRIu64
		       " %6.0f%%%s\n", r[i].n, sg_dtype_name(r[i].dt), sz, r[i].t_med * 1e3,
		       r[i].algbw / 1e6, r[i].busbw / 1e6, r[i].goodput / 1e6, r[i].p50_us,
		       r[i].p99_us, r[i].max_us, r[i].retransmits, 100 * busy,
		       r[i].ok ? "" : "  FAILED");
	}
}

/* Sigma's path in compare's table, JSON and plot. */
static const char *path_label(const struct rb_opts *o)
{
	if (o->colocate)
		return "colocated: shared memory + kernel UDP";
	return o->memif != NULL ? "DPDK memif" : o->shm ? "shared memory" : "kernel UDP";
}

static const char *transport_name(const struct rb_opts *o)
{
	return o->memif != NULL ? "dpdk" : o->colocate ? "shm+udp" : o->shm ? "shm" : "udp";
}

static void write_json(FILE *f, const struct rb_opts *o, const struct rb_result *r,
		       unsigned int n)
{
	fprintf(f, "{\"bench\":\"run\",\"transport\":\"%s\",\"auth\":%s,\"results\":[",
		transport_name(o), o->auth ? "true" : "false");
	for (unsigned int i = 0; i < n; i++) {
		fprintf(f, "%s{\"n\":%u,\"dtype\":\"%s\",\"bytes\":%" PRIu64 ",\"ok\":%s,"
			   "\"time_s\":%.9g,\"algbw_Bps\":%.6g,\"busbw_Bps\":%.6g,"
			   "\"goodput_per_worker_Bps\":%.6g,\"part_latency_us\":{\"p50\":%.3f,"
			   "\"p99\":%.3f,\"max\":%.3f},\"retransmits\":%" PRIu64 ",\"nacks\":%"
			   PRIu64 ",\"rx_dropped\":%" PRIu64 ",\"window\":%u,\"busy_source\":\"%s\","
			   "\"node_busy\":[",
			i ? "," : "", r[i].n, sg_dtype_name(r[i].dt),
			r[i].size, r[i].ok ? "true" : "false", r[i].t_med, r[i].algbw, r[i].busbw,
			r[i].goodput, r[i].p50_us, r[i].p99_us, r[i].max_us, r[i].retransmits,
			r[i].nacks, r[i].rx_dropped, r[i].window,
			r[i].busy_sigmad ? "sigmad lcores" : "node threads");
		for (unsigned int k = 0; k < r[i].nbusy; k++)
			fprintf(f, "%s%.4f", k ? "," : "", r[i].busy[k]);
		fprintf(f, "]}");
	}
	fprintf(f, "]}\n");
}

static int write_csv(const char *path, const struct rb_result *r, unsigned int n)
{
	struct sigma_bench_out out;
	FILE *f;

	if (sigma_bench_out_open(&out) < 0)
		return -ENOMEM;
	f = out.f;
	fprintf(f, "n,dtype,bytes,ok,time_s,algbw_Bps,busbw_Bps,goodput_per_worker_Bps,"
		   "p50_us,p99_us,max_us,retransmits,nacks\n");
	for (unsigned int i = 0; i < n; i++)
		fprintf(f, "%u,%s,%" PRIu64 ",%d,%.9g,%.6g,%.6g,%.6g,%.3f,%.3f,%.3f,%" PRIu64
			   ",%" PRIu64 "\n", r[i].n, sg_dtype_name(r[i].dt), r[i].size, r[i].ok,
			r[i].t_med, r[i].algbw, r[i].busbw, r[i].goodput, r[i].p50_us, r[i].p99_us,
			r[i].max_us, r[i].retransmits, r[i].nacks);
	return sigma_bench_out_write(&out, path);
}

/* Close the data file @p f, start gnuplot writing @p path; on failure @p dat is removed. */
static FILE *gnuplot_open(FILE *f, const char *dat, const char *path)
{
	FILE *g;

	fclose(f);
	g = popen("gnuplot", "w");
	if (g == NULL) {
		unlink(dat);
		return NULL;
	}
	fprintf(g, "set terminal %s size 800,500\nset output '%s'\nset grid\n",
		strstr(path, ".png") ? "pngcairo" : "svg", path);
	return g;
}

/*
 * The x axis's tics at the sizes measured, labelled as the table does (4K, 64K,
 * 1M): gnuplot's own labels for a log scale read 1.04858x10^6.
 */
static void gnuplot_size_tics(FILE *g, const uint64_t *sizes, unsigned int n)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	char sz[32];

	fprintf(g, "set xtics (");
	for (unsigned int i = 0; i < n; i++) {
		fmt_size(sizes[i], sz, sizeof(sz));
		fprintf(g, "%s\"%s\" %" PRIu64, i ? ", " : "", sz, sizes[i]);
		lo = sizes[i] < lo ? sizes[i] : lo;
		hi = sizes[i] > hi ? sizes[i] : hi;
	}
	/* a margin on both sides, so that the end sizes' tics are drawn too */
	fprintf(g, ")\nset xrange [%.6g:%.6g]\n", lo / 1.25, hi * 1.25);
}

/* gnuplot: goodput per worker against size, one line per (N, dtype). */
static int plot(const char *path, const struct rb_result *r, unsigned int n,
		const struct rb_opts *o)
{
	char dat[] = "/tmp/sigma-bench-XXXXXX";
	int fd = mkstemp(dat);
	FILE *f, *g;
	unsigned int series = 0;
	int rc;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		return -errno;
	for (unsigned int i = 0; i < n; i++) {
		if (i > 0 && (r[i].n != r[i - 1].n || r[i].dt != r[i - 1].dt)) {
			fprintf(f, "\n\n");
			series++;
		}
		fprintf(f, "%" PRIu64 " %.6g\n", r[i].size, r[i].goodput / 1e6);
	}
	g = gnuplot_open(f, dat, path);
	if (g == NULL)
		return -errno;
	gnuplot_size_tics(g, o->sizes, o->n_sizes);
	fprintf(g, "set logscale x 2\nset xlabel 'tensor bytes'\nset ylabel 'goodput per worker "
		   "(MB/s)'\nset key left top\nset title 'sigma push_pull over kernel "
		   "UDP'\nplot ");
	for (unsigned int sidx = 0, i = 0; sidx <= series; sidx++) {
		fprintf(g, "%s'%s' index %u with linespoints title 'N=%u %s'", sidx ? ", " : "",
			dat, sidx, r[i].n, sg_dtype_name(r[i].dt));
		while (i + 1 < n && r[i + 1].n == r[i].n && r[i + 1].dt == r[i].dt)
			i++;
		i++;
	}
	fprintf(g, "\n");
	rc = pclose(g);
	unlink(dat);
	return rc == 0 ? 0 : -EIO;
}

/* The sweeps' defaults: what parse_opts() starts from and what the usage says. */
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

static void run_usage(FILE *f, const char *cmd)
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
			   "--plot F.svg|F.png then draws each peer's ratio per size\n", RB_MAX_RUNS);
}

static int parse_opts(int argc, char **argv, struct rb_opts *o, const char *cmd)
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
static void print_sigmad_jobs(const struct rb_opts *o)
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
static int sweep(const struct rb_opts *o, struct rb_result *res)
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

	print_table(res, n);
	if (sigma_bench_out_open(&out) < 0)
		return -ENOMEM;
	write_json(out.f, o, res, n);
	if (sigma_bench_out_write(&out, o->json) < 0)
		return -EIO;
	if (o->csv != NULL && write_csv(o->csv, res, n) < 0)
		return -EIO;
	if (o->plot != NULL && plot(o->plot, res, n, o) < 0) {
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
	int rc = parse_opts(argc, argv, &o, "run");

	if (rc != 0) {
		run_usage(rc > 0 ? stdout : stderr, "run");
		return rc > 0 ? 0 : 2;
	}
	if (o.print_config) {
		print_sigmad_jobs(&o);
		return 0;
	}
	n = o.n_ns * o.n_dts * o.n_sizes;
	res = calloc(n, sizeof(*res));
	if (res == NULL)
		return 1;
	rc = sweep(&o, res);
	if (outputs(&o, res, n) < 0)
		rc = -EIO;
	free(res);
	return rc < 0 ? 1 : 0;
}

/* ---- compare: the same sweep through MPI_Allreduce ---------------------- */


/*
 * The peers compare measures beside Sigma, each in every run: OpenMPI's
 * MPI_Allreduce over TCP loopback (always), and with --sweep also over shared
 * memory (the vader BTL) and Gloo's allreduce over its TCP transport.
 */
enum rb_peer_id { RB_MPI_TCP, RB_MPI_VADER, RB_GLOO, RB_NPEERS };

static const struct rb_peer {
	const char *key;   /* in the JSON */
	const char *label; /* in the table and the plot */
	const char *btl;   /* OpenMPI's BTLs; NULL: Gloo */
} rb_peers[RB_NPEERS] = {
	[RB_MPI_TCP] = {"mpi_tcp", "MPI TCP", "self,tcp --mca btl_tcp_if_include lo"},
	[RB_MPI_VADER] = {"mpi_vader", "MPI vader", "self,vader"},
	[RB_GLOO] = {"gloo", "Gloo TCP", NULL},
};

#ifndef SIGMA_GLOO_EXE
#define SIGMA_GLOO_EXE NULL
#endif

/* Build bench/mpi_allreduce.c with mpicc into @p exe. */
int sigma_bench_build_mpi(char *exe, size_t cap)
{
	char dir[] = "/tmp/sigma-mpi-XXXXXX", cmd[1024];

	if (mkdtemp(dir) == NULL)
		return -errno;
	snprintf(exe, cap, "%s/mpi_allreduce", dir);
	snprintf(cmd, sizeof(cmd), "mpicc -O2 -o %s %s", exe,
		 sigma_bench_path(SIGMA_SOURCE_ROOT "/bench/mpi_allreduce.c",
				  SIGMA_DATA_DIR "/bench/mpi_allreduce.c"));
	if (system(cmd) != 0) {
		fprintf(stderr, "sigma-bench: '%s' failed (install openmpi-bin libopenmpi-dev)\n",
			cmd);
		rmdir(dir);
		return -ENOENT;
	}
	return 0;
}

void sigma_bench_rm_mpi(const char *exe)
{
	char dir[256];

	unlink(exe);
	snprintf(dir, sizeof(dir), "%s", exe);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
}

/*
 * Run peer @p p for N ranks over the sweep's sizes; fills t[size] with the
 * median seconds its program reports, NaN where its sum was wrong. Both
 * programs print "allreduce BYTES SECONDS OK" per size.
 */
static int run_peer(enum rb_peer_id p, const char *mpi_exe, const char *gloo_exe,
		    const struct rb_opts *o, unsigned int n, double *t)
{
	char cmd[2048], line[256];
	int len;
	FILE *f;
	unsigned int got = 0;

	if (rb_peers[p].btl != NULL)
		len = snprintf(cmd, sizeof(cmd),
			       "mpirun --allow-run-as-root --oversubscribe -np %u --bind-to none "
			       "--mca btl %s --mca pml ob1 --mca oob_tcp_if_include lo %s %u", n,
			       rb_peers[p].btl, mpi_exe, o->iters);
	else
		len = snprintf(cmd, sizeof(cmd), "%s %u %u", gloo_exe, n, o->iters);
	for (unsigned int j = 0; j < o->n_sizes && len < (int)sizeof(cmd) - 32; j++)
		len += snprintf(cmd + len, sizeof(cmd) - len, " %" PRIu64, o->sizes[j]);
	snprintf(cmd + len, sizeof(cmd) - len, " 2>&1");
	for (unsigned int j = 0; j < o->n_sizes; j++)
		t[j] = NAN;
	f = popen(cmd, "r");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		uint64_t sz;
		double v;
		int ok;

		if (sscanf(line, "allreduce %" SCNu64 " %lf %d", &sz, &v, &ok) == 3) {
			for (unsigned int j = 0; j < o->n_sizes; j++)
				if (o->sizes[j] == sz) {
					t[j] = ok ? v : NAN;
					got++;
				}
		} else if (!o->quiet) {
			fprintf(stderr, "%s: %s", rb_peers[p].label, line);
		}
	}
	if (pclose(f) != 0 || got != o->n_sizes)
		return -EIO;
	return 0;
}

/* Fold one run's results @p cur into @p acc (run @p run); the times are kept apart. */
static void fold_run(struct rb_result *acc, const struct rb_result *cur, unsigned int run)
{
	bool ok = run == 0 || acc->ok;
	uint64_t re = run ? acc->retransmits : 0, na = run ? acc->nacks : 0;
	uint64_t rd = run ? acc->rx_dropped : 0;

	*acc = *cur; /* latencies and busy%: the last run's */
	acc->ok = ok && cur->ok;
	acc->retransmits = re + cur->retransmits;
	acc->nacks = na + cur->nacks;
	acc->rx_dropped = rd + cur->rx_dropped;
}

/* Each point's median time across @p runs (@p per: runs x n), and its bandwidths. */
static void median_runs(struct rb_result *r, const double *per, unsigned int runs,
			unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		double v[RB_MAX_RUNS];

		for (unsigned int k = 0; k < runs; k++)
			v[k] = per[(size_t)k * n + i];
		r[i].t_med = sigma_bench_median(v, runs);
		r[i].algbw = r[i].t_med > 0 ? (double)r[i].size / r[i].t_med : 0;
		r[i].busbw = r[i].algbw * 2 * (r[i].n - 1) / r[i].n;
		r[i].goodput = 2 * r[i].algbw;
	}
}

static void json_times(FILE *js, const char *name, const double *per, unsigned int runs,
		       unsigned int n, unsigned int i)
{
	fprintf(js, ",\"%s\":[", name);
	for (unsigned int k = 0; k < runs; k++)
		fprintf(js, "%s%.9g", k ? "," : "", isfinite(per[(size_t)k * n + i]) ?
			per[(size_t)k * n + i] : -1);
	fprintf(js, "]");
}

/* compare's measurements: Sigma's (and the node threads') results, each peer's times. */
struct rb_cmp {
	unsigned int n;              /* points: N values x sizes */
	struct rb_result *res, *thr, *cur;
	double *per_sg, *per_th;     /* runs x n seconds */
	bool on[RB_NPEERS];
	double *per[RB_NPEERS];      /* runs x n seconds, NaN: failed or a wrong sum */
	double *med[RB_NPEERS];      /* n: median across runs, NaN if none */
	bool *ok[RB_NPEERS];         /* n: every run's sums right */
	const char *gloo_exe;
	char mpi_exe[256];
};

static void cmp_free(struct rb_cmp *c)
{
	free(c->res);
	free(c->thr);
	free(c->cur);
	free(c->per_sg);
	free(c->per_th);
	for (unsigned int p = 0; p < RB_NPEERS; p++) {
		free(c->per[p]);
		free(c->med[p]);
		free(c->ok[p]);
	}
}

static int cmp_alloc(struct rb_cmp *c, const struct rb_opts *o, bool sweep)
{
	size_t rn = (size_t)o->runs * c->n;
	bool bad;

	c->res = calloc(c->n, sizeof(*c->res));
	c->thr = calloc(c->n, sizeof(*c->thr));
	c->cur = calloc(c->n, sizeof(*c->cur));
	c->per_sg = calloc(rn, sizeof(double));
	c->per_th = calloc(rn, sizeof(double));
	bad = !c->res || !c->thr || !c->cur || !c->per_sg || !c->per_th;
	c->gloo_exe = getenv("SIGMA_GLOO_ALLREDUCE") ? getenv("SIGMA_GLOO_ALLREDUCE") :
		sigma_bench_path(SIGMA_GLOO_EXE, SIGMA_LIBEXEC_DIR "/sigma-gloo-allreduce");
	for (unsigned int p = 0; p < RB_NPEERS; p++) {
		c->on[p] = p == RB_MPI_TCP || sweep;
		c->per[p] = calloc(rn, sizeof(double));
		c->med[p] = calloc(c->n, sizeof(double));
		c->ok[p] = calloc(c->n, sizeof(bool));
		bad |= !c->per[p] || !c->med[p] || !c->ok[p];
	}
	if (c->on[RB_GLOO] && (c->gloo_exe == NULL || access(c->gloo_exe, X_OK) != 0)) {
		fprintf(stderr, "sigma-bench: --sweep needs the Gloo baseline, %s: build with g++ "
				"and libgloo-dev installed (meson option gloo), or set "
				"SIGMA_GLOO_ALLREDUCE\n", c->gloo_exe ? c->gloo_exe :
				"not built");
		return -ENOENT;
	}
	return bad ? -ENOMEM : sigma_bench_build_mpi(c->mpi_exe, sizeof(c->mpi_exe));
}

/* @p o's runs, interleaved, so that a change of load on a shared machine hits every peer. */
static int cmp_runs(struct rb_cmp *c, struct rb_opts *o)
{
	struct rb_opts th = *o;
	int rc = 0;

	/* the threads baseline: the same sweep through sigma-bench's own node threads */
	th.attach[0] = '\0';
	th.telemetry = NULL;
	th.memif = NULL;
	th.gso = SIGMA_GSO_DEFAULT; /* the default workers: --no-gso is the attached node's */
	th.shm = th.colocate = false; /* --colocate's baseline: the same nodes over UDP alone */
	for (unsigned int run = 0; run < o->runs; run++) {
		size_t at = (size_t)run * c->n;

		if (!o->quiet && o->runs > 1)
			fprintf(stderr, "sigma-bench: run %u of %u\n", run + 1, o->runs);
		for (unsigned int p = 0; p < RB_NPEERS; p++)
			for (unsigned int a = 0; a < o->n_ns && c->on[p]; a++) {
				if (!o->quiet)
					fprintf(stderr, "sigma-bench: %s, N=%u\n", rb_peers[p].label,
						o->ns[a]);
				if (run_peer(p, c->mpi_exe, c->gloo_exe, o, o->ns[a],
					     c->per[p] + at + (size_t)a * o->n_sizes) < 0) {
					fprintf(stderr, "sigma-bench: %s failed for N=%u\n",
						rb_peers[p].label, o->ns[a]);
					rc = -EIO;
				}
			}
		if (sweep(o, c->cur) < 0)
			rc = -EIO;
		for (unsigned int i = 0; i < c->n; i++) {
			c->per_sg[at + i] = c->cur[i].t_med;
			fold_run(&c->res[i], &c->cur[i], run);
		}
		/* an attached node keeps its jobs: the next sweep continues their rounds */
		o->first_round += o->iters + 1;
		if (!o->threads)
			continue;
		if (!o->quiet)
			fprintf(stderr, "sigma-bench: the same sweep through %u node thread(s)\n",
				th.nodes);
		if (sweep(&th, c->cur) < 0)
			rc = -EIO;
		for (unsigned int i = 0; i < c->n; i++) {
			c->per_th[at + i] = c->cur[i].t_med;
			fold_run(&c->thr[i], &c->cur[i], run);
		}
	}
	sigma_bench_rm_mpi(c->mpi_exe);
	median_runs(c->res, c->per_sg, o->runs, c->n);
	if (o->threads)
		median_runs(c->thr, c->per_th, o->runs, c->n);
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		for (unsigned int i = 0; i < c->n && c->on[p]; i++) {
			double v[RB_MAX_RUNS];

			c->ok[p][i] = true;
			for (unsigned int k = 0; k < o->runs; k++) {
				v[k] = c->per[p][(size_t)k * c->n + i];
				c->ok[p][i] &= isfinite(v[k]);
				v[k] = isfinite(v[k]) ? v[k] : INFINITY;
			}
			c->med[p][i] = sigma_bench_median(v, o->runs);
			if (!isfinite(c->med[p][i]))
				c->med[p][i] = NAN;
			if (!c->ok[p][i])
				rc = -EIO; /* a peer's wrong sum fails the comparison as Sigma's does */
		}
	return rc;
}

/* Peer time / Sigma time (> 1: Sigma is faster), NaN when either is missing. */
static double cmp_ratio(const struct rb_cmp *c, unsigned int p, unsigned int i)
{
	return c->res[i].t_med > 0 && isfinite(c->med[p][i]) ? c->med[p][i] / c->res[i].t_med :
							     NAN;
}

static double json_num(double v)
{
	return isfinite(v) ? v : -1;
}

static void cmp_table(const struct rb_cmp *c, const struct rb_opts *o, const char *cpu)
{
	printf("CPU: %s; %u run(s), each figure the median across them; sigma: %s\n", cpu, o->runs,
	       path_label(o));
	printf("%3s %8s %10s %13s", "N", "size", "sigma ms", "sigma MB/s");
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		if (c->on[p])
			printf(" %12s %9s", rb_peers[p].label, "ratio");
	if (o->threads)
		printf(" %12s %10s", "threads ms", "vs thr");
	printf("  %s\n", "node busy%");
	for (unsigned int i = 0; i < c->n; i++) {
		const struct rb_result *r = &c->res[i];
		bool ok = r->ok && (!o->threads || c->thr[i].ok);
		char sz[32];

		fmt_size(r->size, sz, sizeof(sz));
		printf("%3u %8s %10.3f %13.1f", r->n, sz, r->t_med * 1e3, r->algbw / 1e6);
		for (unsigned int p = 0; p < RB_NPEERS; p++)
			if (c->on[p]) {
				printf(" %9.3f ms %8.2fx", c->med[p][i] * 1e3, cmp_ratio(c, p, i));
				ok &= c->ok[p][i];
			}
		if (o->threads)
			printf(" %12.3f %9.2fx", c->thr[i].t_med * 1e3,
			       r->t_med > 0 ? c->thr[i].t_med / r->t_med : NAN);
		/* busy% of each node thread or sigmad lcore over the point's whole sweep */
		for (unsigned int k = 0; k < r->nbusy; k++)
			printf("%s%.0f", k ? "/" : "  ", 100 * r->busy[k]);
		printf("%s\n", ok ? "" : "  FAILED");
	}
	printf("ratio = peer time / sigma time (> 1: sigma is faster)%s\n",
	       !o->threads ? "" : o->colocate ? "; threads = --nodes node threads over kernel "
	       "UDP alone, vs thr = their time / sigma time" :
	       "; vs thr = node threads' time / sigma time");
}

static void cmp_json(FILE *js, const struct rb_cmp *c, const struct rb_opts *o, const char *cpu)
{
	fprintf(js, "{\"bench\":\"compare\",\"baseline\":\"MPI_Allreduce (OpenMPI, TCP loopback)\","
		    "\"sigma_transport\":\"%s\",\"cpu\":\"%s\",\"runs\":%u,\"iters\":%u,"
		    "\"threads_baseline\":%s,\"worker_gso\":%s,\"window\":%u,\"auth\":%s,"
		    "\"peers\":[",
		path_label(o), cpu,
		o->runs, o->iters,
		o->threads ? "true" : "false", o->gso != SIGMA_GSO_OFF ? "true" : "false", o->window,
		o->auth ? "true" : "false");
	for (unsigned int p = 0, k = 0; p < RB_NPEERS; p++)
		if (c->on[p])
			fprintf(js, "%s\"%s\"", k++ ? "," : "", rb_peers[p].key);
	fprintf(js, "],\"results\":[");
	for (unsigned int i = 0; i < c->n; i++) {
		const struct rb_result *r = &c->res[i];

		fprintf(js, "%s{\"n\":%u,\"bytes\":%" PRIu64 ",\"sigma_time_s\":%.9g,"
			    "\"mpi_time_s\":%.9g,\"sigma_algbw_Bps\":%.6g,\"mpi_algbw_Bps\":%.6g,"
			    "\"speedup_vs_mpi\":%.4f,\"sigma_ok\":%s,\"window\":%u,"
			    "\"busy_source\":\"%s\",\"node_busy\":[", i ? "," : "", r->n, r->size, r->t_med,
			json_num(c->med[RB_MPI_TCP][i]), r->algbw,
			json_num(r->size / c->med[RB_MPI_TCP][i]),
			json_num(cmp_ratio(c, RB_MPI_TCP, i)), r->ok ? "true" : "false", r->window,
			r->busy_sigmad ? "sigmad lcores" : "node threads");
		for (unsigned int k = 0; k < r->nbusy; k++)
			fprintf(js, "%s%.4f", k ? "," : "", r->busy[k]);
		fprintf(js, "]");
		if (o->threads)
			fprintf(js, ",\"threads_time_s\":%.9g,\"threads_algbw_Bps\":%.6g,"
				    "\"threads_ok\":%s,\"speedup_vs_threads\":%.4f,"
				    "\"threads_vs_mpi\":%.4f", c->thr[i].t_med, c->thr[i].algbw,
				c->thr[i].ok ? "true" : "false",
				json_num(r->t_med > 0 ? c->thr[i].t_med / r->t_med : NAN),
				json_num(c->thr[i].t_med > 0 ? c->med[RB_MPI_TCP][i] /
						c->thr[i].t_med : NAN));
		json_times(js, "sigma_runs_s", c->per_sg, o->runs, c->n, i);
		json_times(js, "mpi_runs_s", c->per[RB_MPI_TCP], o->runs, c->n, i);
		if (o->threads)
			json_times(js, "threads_runs_s", c->per_th, o->runs, c->n, i);
		fprintf(js, ",\"peers\":{");
		for (unsigned int p = 0, k = 0; p < RB_NPEERS; p++) {
			if (!c->on[p])
				continue;
			fprintf(js, "%s\"%s\":{\"time_s\":%.9g,\"ok\":%s,\"ratio\":%.4f", k++ ? "," :
				"", rb_peers[p].key, json_num(c->med[p][i]),
				c->ok[p][i] ? "true" : "false", json_num(cmp_ratio(c, p, i)));
			json_times(js, "runs_s", c->per[p], o->runs, c->n, i);
			fprintf(js, "}");
		}
		fprintf(js, "}}");
	}
	fprintf(js, "]}\n");
}

/* gnuplot: each peer's time / Sigma's against size, one line per (peer, N). */
static int cmp_plot(const char *path, const struct rb_cmp *c, const struct rb_opts *o)
{
	char dat[] = "/tmp/sigma-bench-XXXXXX";
	int fd = mkstemp(dat), rc;
	unsigned int series = 0;
	FILE *f, *g;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		return -errno;
	/* one block per series, in the order the plot command names them */
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		for (unsigned int a = 0; a < o->n_ns && c->on[p]; a++, series++) {
			for (unsigned int j = 0; j < o->n_sizes; j++) {
				double v = cmp_ratio(c, p, a * o->n_sizes + j);

				if (isfinite(v))
					fprintf(f, "%" PRIu64 " %.6g\n", o->sizes[j], v);
			}
			fprintf(f, "\n\n");
		}
	g = gnuplot_open(f, dat, path);
	if (g == NULL)
		return -errno;
	gnuplot_size_tics(g, o->sizes, o->n_sizes);
	fprintf(g, "set logscale xy 2\nset xlabel 'tensor bytes'\nset ylabel 'peer time / sigma "
		   "time (> 1: sigma faster)'\nset key outside right\nset title "
		   "'sigma (%s) against each peer, median of %u runs'\nplot 1 with lines dt 2 "
		   "lc rgb 'black' title 'equal'", path_label(o), o->runs);
	series = 0;
	for (unsigned int p = 0; p < RB_NPEERS; p++)
		for (unsigned int a = 0; a < o->n_ns && c->on[p]; a++, series++)
			fprintf(g, ", '%s' index %u with linespoints title '%s N=%u'", dat, series,
				rb_peers[p].label, o->ns[a]);
	fprintf(g, "\n");
	rc = pclose(g);
	unlink(dat);
	return rc == 0 ? 0 : -EIO;
}

int sigma_bench_compare(int argc, char **argv)
{
	struct rb_opts o;
	struct rb_cmp c = {0};
	struct sigma_bench_out out = {0};
	char cpu[128];
	int rc = parse_opts(argc, argv, &o, "compare");

	if (rc != 0) {
		run_usage(rc > 0 ? stdout : stderr, "compare");
		return rc > 0 ? 0 : 2;
	}
	o.n_dts = 1;
	o.dts[0] = SG_DTYPE_FP32; /* MPI_FLOAT, MPI_SUM */
	if (o.print_config) {
		print_sigmad_jobs(&o);
		return 0;
	}
	c.n = o.n_ns * o.n_sizes;
	if (cmp_alloc(&c, &o, o.sweep) < 0) {
		cmp_free(&c);
		return 1;
	}
	rc = cmp_runs(&c, &o);
	sigma_bench_cpu_model(cpu, sizeof(cpu));
	cmp_table(&c, &o, cpu);
	if (sigma_bench_out_open(&out) < 0) {
		rc = -ENOMEM;
	} else {
		cmp_json(out.f, &c, &o, cpu);
		if (sigma_bench_out_write(&out, o.json) < 0)
			rc = -EIO;
	}
	if (o.plot != NULL && cmp_plot(o.plot, &c, &o) < 0) {
		fprintf(stderr, "sigma-bench: gnuplot failed (is gnuplot-nox installed?)\n");
		rc = -EIO;
	}
	cmp_free(&c);
	return rc < 0 ? 1 : 0;
}
