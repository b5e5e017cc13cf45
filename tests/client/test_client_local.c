/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Local aggregation (sigma_local.h) against one kernel-UDP node of this
 * process: L = 2 and L = 3 local ranks on one machine, and 2 machines of 2,
 * each local rank a forked process, every element of fp32 and fp16 tensors
 * (one with fewer elements than L) compared bitwise with a sum computed here
 * in local-rank order (fp16 through summation's converters); the node's
 * counters show one push per chunk per machine; the same with every tensor in
 * flight at once (sigma_local_start/poll/test), each local rank starting them
 * in another order. Then failures: a local rank
 * SIGKILLed mid-step (the others -EPIPE within the bound, naming it), one
 * stopped (-ETIMEDOUT after wait_us), mismatched local sizes refused at open
 * on both ranks, a stale segment of a dead maker removed; no segment left in
 * /dev/shm after any of them.
 */
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"
#include "sg_sum.h"
#include "sigma_local.h"

#define ROUNDS 4
#define NT 3
#define MAX_PROCS 8
#define JOB0 3917000u /* the segments' names start sigma-local-<uid>-j3917 */
#define CHUNK 1424

static const struct sigma_udpd_conf plain_node = {.engine = {.pool_bufs = 4096}};
static const uint64_t nelems[NT] = {100003, 2, 5001};
static const enum sg_dtype dtypes[NT] = {SG_DTYPE_FP32, SG_DTYPE_FP32, SG_DTYPE_FP16};

/* What the children report to the parent (a shared anonymous mapping). */
struct report {
	int rc[MAX_PROCS];
	uint64_t fail_us[MAX_PROCS]; /* CLOCK_MONOTONIC when the call failed */
	char err[MAX_PROCS][SIGMA_ERR_LEN];
	_Atomic int rounds_done[MAX_PROCS];
};

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Rank r's element i in round k: varied magnitudes, so the order of a sum shows. */
static float val(unsigned int r, uint64_t i, unsigned int k)
{
	uint64_t x = (r + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull ^
		     (k + 1) * 0x94d049bb133111ebull;

	x ^= x >> 31;
	x *= 0xd6e9f1e3a8c2b5d7ull;
	x ^= x >> 29;
	return ((float)(int64_t)(x % 2000001) - 1000000.0f) / (float)(1u << (x >> 60));
}

static void fill(void *buf, enum sg_dtype dt, uint64_t n, unsigned int r, unsigned int k)
{
	for (uint64_t i = 0; i < n; i++) {
		if (dt == SG_DTYPE_FP32)
			((float *)buf)[i] = val(r, i, k);
		else
			((uint16_t *)buf)[i] = sg_fp32_to_fp16(val(r, i, k) / 64.0f);
	}
}

/* The sum of machine m's L ranks, in local-rank order (fp16: in fp32, rounded once). */
static float machine_sum(enum sg_dtype dt, unsigned int m, unsigned int L, uint64_t i,
			 unsigned int k)
{
	float acc = 0;

	for (unsigned int j = 0; j < L; j++) {
		float v = val(m * L + j, i, k);

		if (dt == SG_DTYPE_FP16)
			v = sg_fp16_to_fp32(sg_fp32_to_fp16(v / 64.0f));
		acc = j == 0 ? v : acc + v;
	}
	return dt == SG_DTYPE_FP16 ? sg_fp16_to_fp32(sg_fp32_to_fp16(acc)) : acc;
}

/* Element i of round k's expected result: the machines' sums added in machine order. */
static void expect(enum sg_dtype dt, unsigned int M, unsigned int L, uint64_t i, unsigned int k,
		   void *out)
{
	float acc = 0;

	for (unsigned int m = 0; m < M; m++)
		acc = m == 0 ? machine_sum(dt, m, L, i, k) : acc + machine_sum(dt, m, L, i, k);
	if (dt == SG_DTYPE_FP32)
		memcpy(out, &acc, 4);
	else {
		uint16_t h = sg_fp32_to_fp16(acc);

		memcpy(out, &h, 2);
	}
}

static unsigned int segments_left(void)
{
	char pre[64];
	unsigned int n = 0;
	struct dirent *e;
	DIR *d = opendir("/dev/shm");

	if (d == NULL)
		return 0;
	snprintf(pre, sizeof(pre), "sigma-local-%u-j3917", (unsigned int)getuid());
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, pre, strlen(pre)) == 0;
	closedir(d);
	return n;
}

struct run {
	unsigned int M, L;
	uint32_t job0;
	uint64_t key;
	struct cu_group g;
	struct report *rep;
	uint32_t wait_us;
	unsigned int rounds;   /* 0: run until killed */
	int mismatch_rank;     /* this process (r) says local size L + 1 (-1: none) */
	bool started;          /* every tensor in flight at once, rank r starting at r % NT */
};

static void add_jobs(struct run *ru)
{
	for (unsigned int j = 0; j < ru->L; j++) {
		struct sg_dp_job_conf job = {.id = ru->job0 + j, .nworkers = ru->M,
					     .token = ru->key + j, .dtype = SG_DTYPE_ANY,
					     .mode = SG_MODE_DETERM, .open = true,
					     .slots = 4096};

		SG_CHECK_EQ(sigma_udpd_add_job(ru->g.d[0], &job), 0);
	}
}

/* Process r: local rank r % L of machine r / L. Exits 0 when every check held. */
static void child(struct run *ru, unsigned int r)
{
	unsigned int m = r / ru->L, j = r % ru->L;
	struct sigma_conf c = {.job = ru->job0 + j, .rank = (uint16_t)m,
			       .nworkers = (uint16_t)ru->M, .token = ru->key + j,
			       .nodes = ru->g.nodes, .nnodes = 1, .rto_us = 2000,
			       .ranks_wait_us = 10000000};
	struct sigma_local_conf lc = {.job = ru->job0, .key = ru->key, .machine = (uint16_t)m,
				      .local_rank = (uint16_t)j, .local_size = (uint16_t)ru->L,
				      .open_timeout_ms = 5000, .wait_us = ru->wait_us};
	struct sigma_local_tensor *t[NT];
	void *in[NT], *out[NT];
	char err[SIGMA_ERR_LEN];
	struct sigma_session *s = sigma_open(&c);
	struct sigma_local *l;

	signal(SIGTERM, SIG_DFL);
	if ((int)r == ru->mismatch_rank)
		lc.local_size++;
	SG_CHECK(s != NULL, "rank %u: sigma_open: %s", r, strerror(errno));
	if (s == NULL)
		_exit(1);
	l = sigma_local_open(&lc, s, err, sizeof(err));
	if (l == NULL) {
		ru->rep->rc[r] = -errno;
		snprintf(ru->rep->err[r], SIGMA_ERR_LEN, "%s", err);
		sigma_close(s);
		_exit(ru->mismatch_rank >= 0 ? 0 : 1);
	}
	for (unsigned int q = 0; q < NT; q++) {
		size_t es = sg_dtype_size(dtypes[q]);

		t[q] = sigma_local_tensor_register(l, "t", q, dtypes[q], nelems[q], (int)q);
		SG_CHECK(t[q] != NULL, "rank %u: register %u: %s", r, q, sigma_local_last_error(l));
		in[q] = malloc(nelems[q] * es);
		out[q] = malloc(nelems[q] * es);
		if (t[q] == NULL || in[q] == NULL || out[q] == NULL)
			_exit(1);
	}
	for (unsigned int k = 0; ru->started && k < ru->rounds; k++) {
		int busy = NT, rc = 0;

		for (unsigned int i = 0; i < NT; i++) {
			unsigned int q = (r + i) % NT;

			fill(in[q], dtypes[q], nelems[q], r, k % 16);
			SG_CHECK_EQ(sigma_local_start(t[q], in[q], out[q]), 0);
		}
		SG_CHECK_EQ(sigma_local_start(t[0], in[0], out[0]), -EBUSY);
		while (busy > 0 && rc >= 0) {
			rc = sigma_local_poll(l, 100000);
			busy -= rc > 0 ? rc : 0;
		}
		SG_CHECK(rc >= 0 && busy == 0, "rank %u round %u: poll %d: %s", r, k, rc,
			 sigma_local_last_error(l));
		for (unsigned int q = 0; q < NT; q++) {
			size_t es = sg_dtype_size(dtypes[q]);
			unsigned int bad = 0;

			SG_CHECK_EQ(sigma_local_test(t[q]), 0);
			for (uint64_t i = 0; i < nelems[q]; i++) {
				uint8_t want[4];

				expect(dtypes[q], ru->M, ru->L, i, k % 16, want);
				bad += memcmp((uint8_t *)out[q] + i * es, want, es) != 0;
			}
			SG_CHECK(bad == 0, "rank %u tensor %u round %u (started in rank order %u): "
				 "%u of %" PRIu64 " elements differ", r, q, k, r % NT, bad, nelems[q]);
		}
	}
	for (unsigned int k = 0; !ru->started && (ru->rounds == 0 || k < ru->rounds); k++) {
		for (unsigned int q = 0; q < NT; q++) {
			size_t es = sg_dtype_size(dtypes[q]);
			unsigned int bad = 0;
			int rc;

			fill(in[q], dtypes[q], nelems[q], r, k % 16);
			rc = sigma_local_push_pull(t[q], in[q], out[q]);
			if (rc < 0) {
				ru->rep->fail_us[r] = mono_us();
				ru->rep->rc[r] = rc;
				snprintf(ru->rep->err[r], SIGMA_ERR_LEN, "%s", sigma_local_last_error(l));
				SG_CHECK_EQ(sigma_local_push_pull(t[q], in[q], out[q]), rc);
				goto out;
			}
			if (ru->rounds == 0)
				continue;
			for (uint64_t i = 0; i < nelems[q]; i++) {
				uint8_t want[4];

				expect(dtypes[q], ru->M, ru->L, i, k % 16, want);
				bad += memcmp((uint8_t *)out[q] + i * es, want, es) != 0;
			}
			SG_CHECK(bad == 0, "rank %u (machine %u local rank %u) tensor %u round %u: %u "
				 "of %" PRIu64 " elements differ from the local-rank-order sum", r, m,
				 j, q, k, bad, nelems[q]);
		}
		atomic_store(&ru->rep->rounds_done[r], (int)k + 1);
	}
out:
	sigma_local_close(l);
	sigma_close(s);
	for (unsigned int q = 0; q < NT; q++) {
		free(in[q]);
		free(out[q]);
	}
	_exit(sg_test_failures ? 1 : 0);
}

/* Start the node with the run's sub-jobs and fork its M x L processes. */
static void start(struct run *ru, pid_t *pids)
{
	memset(&ru->g, 0, sizeof(ru->g));
	SG_CHECK_EQ(cu_nodes(&ru->g, 1, &plain_node), 0);
	add_jobs(ru);
	SG_CHECK_EQ(sigma_udpd_start(ru->g.d[0]), 0);
	memset(ru->rep, 0, sizeof(*ru->rep));
	fflush(NULL);
	for (unsigned int r = 0; r < ru->M * ru->L; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			child(ru, r);
	}
}

static int reap(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void stop(struct run *ru)
{
	sigma_udpd_stop(ru->g.d[0]);
	sigma_udpd_destroy(ru->g.d[0]);
}

static uint64_t chunks(uint64_t bytes)
{
	return (bytes + CHUNK - 1) / CHUNK;
}

/* M machines of L local ranks: every sum bitwise, one push per chunk per machine. */
static void sums(unsigned int M, unsigned int L, struct report *rep, bool started)
{
	struct run ru = {.M = M, .L = L, .job0 = JOB0 + 10 * (M * 4 + L) + 100 * started,
			 .rep = rep, .key = 0x5eed0000ull + (uint64_t)getpid() * 64 + L,
			 .rounds = ROUNDS, .mismatch_rank = -1, .started = started};
	pid_t pids[MAX_PROCS];
	uint64_t pushes = 0, want = 0, direct = 0;

	start(&ru, pids);
	for (unsigned int r = 0; r < M * L; r++)
		SG_CHECK(reap(pids[r]) == 0, "M=%u L=%u: process %u failed (%s)", M, L, r,
			 rep->err[r]);
	for (unsigned int j = 0; j < L; j++) {
		struct sg_dp_job_stats st;

		SG_CHECK_EQ(sigma_udpd_job_stats(ru.g.d[0], ru.job0 + j, &st), 0);
		pushes += st.rx_pushes;
		for (unsigned int q = 0; q < NT; q++) {
			uint64_t lo = nelems[q] * j / L, hi = nelems[q] * (j + 1) / L;

			want += chunks((hi - lo) * sg_dtype_size(dtypes[q]));
		}
	}
	for (unsigned int q = 0; q < NT; q++)
		direct += chunks(nelems[q] * sg_dtype_size(dtypes[q]));
	want *= (uint64_t)ROUNDS * M;
	SG_CHECK(pushes == want, "M=%u L=%u: the node took %" PRIu64 " pushes, want %" PRIu64
		 " (one per chunk per machine; every rank pushing would be %" PRIu64 ")", M, L,
		 pushes, want, direct * ROUNDS * M * L);
	SG_CHECK_EQ(segments_left(), 0);
	stop(&ru);
	printf("M=%u L=%u%s: %u rounds of %u tensors summed bitwise; %" PRIu64 " pushes at the "
	       "node (every rank pushing: %" PRIu64 ")\n", M, L,
	       started ? " (all in flight, started in another order on each rank)" : "", ROUNDS,
	       NT, pushes, direct * ROUNDS * M * L);
}

/*
 * L = 3, local rank 1 SIGKILLed (or stopped: -ETIMEDOUT after wait_us) while
 * the three loop on push_pulls: the others fail within the bound, naming it.
 */
static void victim(struct report *rep, bool kill_it)
{
	struct run ru = {.M = 1, .L = 3, .job0 = JOB0 + 200 + kill_it, .rep = rep,
			 .key = 0xdead0000ull + (uint64_t)getpid() * 4 + kill_it,
			 .wait_us = kill_it ? 20000000 : 700000, .mismatch_rank = -1};
	pid_t pids[MAX_PROCS];
	uint64_t t0, bound = kill_it ? SIGMA_LOCAL_DEAD_CHECK_MS * 1000 + 1500000 :
				 700000 + 1500000 + 6000000;

	start(&ru, pids);
	t0 = mono_us();
	while (atomic_load(&rep->rounds_done[1]) < 3 && mono_us() - t0 < 20000000)
		usleep(1000);
	SG_CHECK(atomic_load(&rep->rounds_done[1]) >= 3, "the ranks made no progress");
	kill(pids[1], kill_it ? SIGKILL : SIGSTOP);
	t0 = mono_us();
	for (unsigned int r = 0; r < 3; r += 2) {
		SG_CHECK(reap(pids[r]) == 0, "process %u failed", r);
		/* the first to give up times out; the other may quote it (-EPIPE) */
		SG_CHECK(rep->rc[r] == -EPIPE || (!kill_it && rep->rc[r] == -ETIMEDOUT),
			 "local rank %u: %d", r, rep->rc[r]);
		SG_CHECK(rep->fail_us[r] >= t0 && rep->fail_us[r] - t0 < bound,
			 "local rank %u failed %.3f s after the %s (bound %.3f s)", r,
			 (double)(rep->fail_us[r] - t0) / 1e6, kill_it ? "kill" : "stop",
			 (double)bound / 1e6);
		SG_CHECK(strstr(rep->err[r], "local rank 1") != NULL &&
			 strstr(rep->err[r], "machine 0") != NULL, "local rank %u: %s", r,
			 rep->err[r]);
		printf("%s: local rank %u: %d after %.3f s: %s\n", kill_it ? "kill" : "stop", r,
		       rep->rc[r], (double)(rep->fail_us[r] - t0) / 1e6, rep->err[r]);
	}
	if (!kill_it) {
		SG_CHECK(rep->rc[0] == -ETIMEDOUT || rep->rc[2] == -ETIMEDOUT,
			 "no local rank timed out: %d, %d", rep->rc[0], rep->rc[2]);
		kill(pids[1], SIGKILL);
		kill(pids[1], SIGCONT);
	}
	SG_CHECK_EQ(reap(pids[1]), 128 + SIGKILL);
	SG_CHECK_EQ(segments_left(), 0);
	stop(&ru);
}

/* Local rank 1 says L = 3 where local rank 0 made the segment for 2: both refused at open. */
static void mismatch(struct report *rep)
{
	struct run ru = {.M = 1, .L = 2, .job0 = JOB0 + 300, .rep = rep,
			 .key = 0xabc00000ull + (uint64_t)getpid(), .rounds = 1,
			 .mismatch_rank = 1};
	pid_t pids[MAX_PROCS];

	start(&ru, pids);
	for (unsigned int r = 0; r < 2; r++) {
		SG_CHECK(reap(pids[r]) == 0, "process %u failed", r);
		SG_CHECK_EQ(rep->rc[r], -EINVAL);
		SG_CHECK(strstr(rep->err[r], "local size") != NULL, "local rank %u: %s", r,
			 rep->err[r]);
		printf("mismatch: local rank %u: %s\n", r, rep->err[r]);
	}
	SG_CHECK_EQ(segments_left(), 0);
	stop(&ru);
}

/* A segment whose maker died is removed by the next local rank 0 to open. */
static void stale(struct report *rep)
{
	char path[128];
	pid_t dead = fork();
	FILE *f;

	if (dead == 0)
		_exit(0);
	SG_CHECK_EQ(reap(dead), 0);
	snprintf(path, sizeof(path), "/dev/shm/sigma-local-%u-j%u-m0-p%d", (unsigned int)getuid(),
		 JOB0 + 400, (int)dead);
	f = fopen(path, "w");
	SG_CHECK(f != NULL, "%s: %s", path, strerror(errno));
	if (f != NULL)
		fclose(f);
	SG_CHECK_EQ(segments_left(), 1);
	sums(1, 2, rep, false);
	SG_CHECK(access(path, F_OK) < 0, "%s is still there", path);
	unlink(path);
}

static void test_bad_args(void)
{
	struct sigma_local_conf lc = {.job = 1, .local_rank = 2, .local_size = 2};
	char err[SIGMA_ERR_LEN];

	errno = 0;
	SG_CHECK(sigma_local_open(&lc, NULL, err, sizeof(err)) == NULL && errno == EINVAL,
		 "NULL session");
	lc.local_size = SIGMA_LOCAL_MAX + 1;
	SG_CHECK(sigma_local_open(&lc, (struct sigma_session *)&lc, err, sizeof(err)) == NULL &&
		 errno == EINVAL, "local size above the most");
	SG_CHECK_EQ(sigma_local_push_pull(NULL, err, err), -EINVAL);
	SG_CHECK_EQ(sigma_local_start(NULL, err, err), -EINVAL);
	SG_CHECK_EQ(sigma_local_poll(NULL, 0), -EINVAL);
	SG_CHECK_EQ(sigma_local_test(NULL), -EINVAL);
}

int main(void)
{
	struct report *rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (rep == MAP_FAILED)
		return 1;
	if (access("/dev/shm", W_OK) < 0)
		SG_TEST_SKIP_ALL("/dev/shm is not writable");
	test_bad_args();
	sums(1, 2, rep, false);
	sums(1, 3, rep, false);
	sums(2, 2, rep, false);
	sums(1, 3, rep, true);
	sums(2, 2, rep, true);
	victim(rep, true);
	victim(rep, false);
	mismatch(rep);
	stale(rep);
	return sg_test_finish("client_local");
}
