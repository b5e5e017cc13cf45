/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Local aggregation (sigma_local.h): a machine's local ranks sum in a shared
 * segment, each pushes its share through its own session of its sub-job.
 *
 * Segment layout (offsets in bytes):
 *   0          struct seg_hdr (magic written last by the maker)
 *   4096 + 64j local rank j's slot: pid, closed, failed (j < SIGMA_LOCAL_MAX)
 *   8192 + 512j local rank j's failure message
 *   65536      the tensor table: SG_MAX_TENSORS struct seg_ent
 *   SEG_DATA   tensor regions, taken from hdr.top
 * A region: counters (arrived, done, copied: one cache line per local rank
 * each, one writer each), then L slots of the tensor; slot 0 holds the sum.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sg_sum.h"
#include "sigma_local.h"

#define SEG_MAGIC 0x324c434f4c475353ull /* "SSGLOCL2" */
#define SEG_DIR "/dev/shm"
#define SEG_RANKS 4096
#define SEG_MSGS 8192
#define SEG_MSG 512
#define SEG_TABLE 65536
#define SEG_DATA (SEG_TABLE + (uint64_t)SG_MAX_TENSORS * sizeof(struct seg_ent) + 65536)
#define LINE 64
/*
 * How long after anything of this context last moved sigma_local_poll() polls before it
 * sleeps on the bell: the time, not a count of polls per call, since a caller that polls
 * every 200 us (sigma.torch) would otherwise never sleep while it waits.
 */
#define SPIN_US 50

_Static_assert(SIGMA_LOCAL_MAX <= SG_SUM_MAX_K, "the local sum is one sg_sum_addk()");

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() atomic_signal_fence(memory_order_seq_cst)
#endif

struct seg_hdr {
	_Atomic uint64_t magic;
	uint64_t key;
	uint32_t job;
	uint16_t local_size, machine;
	int32_t maker;
	_Atomic uint32_t mapped;  /* local ranks that mapped it */
	_Atomic uint32_t bell;    /* futex: +1 at every counter's change */
	_Atomic uint32_t waiters; /* sleeping on bell */
	_Atomic uint64_t top;     /* bytes of regions taken */
};

struct seg_rank {
	_Atomic int32_t pid;
	_Atomic uint32_t closed;
	_Atomic uint32_t failed; /* after its message */
};

enum { ENT_FREE, ENT_CLAIMING, ENT_READY, ENT_ERROR };

struct seg_ent {
	_Atomic uint32_t state;
	uint32_t dtype;
	uint64_t nelem;
	uint64_t off;
	uint32_t claimer;
	int32_t error; /* ENT_ERROR: errno */
};

enum { ARRIVED, DONE, COPIED };

struct sigma_local_tensor {
	struct sigma_local *l;
	struct sigma_tensor *inner; /* NULL for an empty share */
	char name[64];
	uint32_t id;
	enum sg_dtype dtype;
	size_t esize;
	uint64_t nelem, lo, hi; /* share [lo, hi) */
	uint64_t seq;
	uint8_t *region;
	uint64_t slot_bytes;
	uint64_t hdr_bytes;
	/* the op in flight (sigma_local_start()): its state, since when, its buffers */
	int state;
	int status; /* LT_IDLE: the last op's, 0 or -errno */
	uint64_t since, checked;
	const void *in;
	void *out;
	struct sigma_local_tensor *next;
};

/* An op's states: each waits for one thing (the other local ranks' counters, or the session). */
enum { LT_IDLE, LT_SLOT, LT_ARRIVE, LT_SHARE, LT_DONE };

struct sigma_local {
	struct sigma_local_conf c;
	struct sigma_session *s;
	int fd;
	uint8_t *base;
	char path[300];
	int failed; /* -errno once spent */
	bool attached; /* our rank slot's pid is ours */
	uint64_t moved; /* us: an op started or took a step (the poll before sleeping) */
	struct sigma_local_tensor *tensors;
	char err[SIGMA_ERR_LEN];
};

static struct seg_hdr *hdr(const struct sigma_local *l)
{
	return (struct seg_hdr *)l->base;
}

static struct seg_rank *rank_slot(uint8_t *base, unsigned int j)
{
	return (struct seg_rank *)(base + SEG_RANKS + LINE * j);
}

static char *rank_msg(uint8_t *base, unsigned int j)
{
	return (char *)(base + SEG_MSGS + SEG_MSG * j);
}

static struct seg_ent *ent(const struct sigma_local *l, uint32_t id)
{
	return (struct seg_ent *)(l->base + SEG_TABLE) + id;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Alive: the process exists and is not a zombie (its parent has not reaped it yet). */
static bool pid_alive(int32_t pid)
{
	char path[40], buf[256], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p == NULL || p[1] == '\0' || (p[2] != 'Z' && p[2] != 'X');
}

/* ---- the bell: counters change, sleepers wake ------------------------------ */

static void ring(struct sigma_local *l)
{
	struct seg_hdr *h = hdr(l);

	atomic_fetch_add(&h->bell, 1);
	if (atomic_load(&h->waiters) > 0)
		syscall(SYS_futex, &h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void sleep_on(struct sigma_local *l, uint32_t seen, uint64_t us)
{
	struct seg_hdr *h = hdr(l);
	struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};

	atomic_fetch_add(&h->waiters, 1);
	syscall(SYS_futex, &h->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
	atomic_fetch_sub(&h->waiters, 1);
}

/* ---- failures ------------------------------------------------------------- */

/* Spend the context with @p rc; the reason goes into the segment for the others. */
static int fail(struct sigma_local *l, int rc, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (l->failed)
		return l->failed;
	va_start(ap, fmt);
	vsnprintf(l->err, sizeof(l->err), fmt, ap);
	va_end(ap);
	n = strlen(l->err);
	if (strstr(l->err, "of machine") == NULL)
		snprintf(l->err + n, sizeof(l->err) - n, " [local rank %u of machine %u]",
			 l->c.local_rank, l->c.machine);
	l->failed = rc;
	if (l->base != NULL) {
		struct seg_rank *me = rank_slot(l->base, l->c.local_rank);

		if (!atomic_load(&me->failed)) {
			snprintf(rank_msg(l->base, l->c.local_rank), SEG_MSG, "%s", l->err);
			atomic_store_explicit(&me->failed, 1, memory_order_release);
			ring(l);
		}
	}
	return rc;
}

/* Another local rank's failure, if one wrote one: then this context fails with -EPIPE. */
static int peer_failed(struct sigma_local *l)
{
	for (unsigned int k = 0; k < SIGMA_LOCAL_MAX; k++) {
		if (k == l->c.local_rank ||
		    !atomic_load_explicit(&rank_slot(l->base, k)->failed, memory_order_acquire))
			continue;
		/* quote it; do not write it back as ours */
		int n = snprintf(l->err, sizeof(l->err), "local rank %u of machine %u failed: ", k,
				 l->c.machine);
		const char *m = rank_msg(l->base, k);
		size_t len = strnlen(m, SEG_MSG - 1);

		if (n > 0 && (size_t)n < sizeof(l->err)) {
			len = len < sizeof(l->err) - 1 - (size_t)n ? len : sizeof(l->err) - 1 - (size_t)n;
			memcpy(l->err + n, m, len);
			l->err[(size_t)n + len] = '\0';
		}
		l->failed = -EPIPE;
		return -EPIPE;
	}
	return 0;
}

/* ---- waiting for the other local ranks ------------------------------------ */

static _Atomic uint64_t *counter(const struct sigma_local_tensor *t, unsigned int what,
				 unsigned int j)
{
	return (_Atomic uint64_t *)(t->region + LINE * (what * t->l->c.local_size + j));
}

static void set_counter(struct sigma_local_tensor *t, unsigned int what, uint64_t v)
{
	atomic_store_explicit(counter(t, what, t->l->c.local_rank), v, memory_order_release);
	ring(t->l);
}

static int first_behind(const struct sigma_local_tensor *t, unsigned int what, uint64_t want)
{
	for (unsigned int k = 0; k < t->l->c.local_size; k++)
		if (atomic_load_explicit(counter(t, what, k), memory_order_acquire) < want)
			return (int)k;
	return -1;
}

static const char *const what_name[] = {"come", "finish its share", "copy the last sum out"};

/*
 * Whether every local rank's counter @p what is at least @p want: 1 yes, 0 not yet (within
 * @p bound_us of t->since; the ones behind checked alive every SIGMA_LOCAL_DEAD_CHECK_MS),
 * or the failure (-EPIPE, -ETIMEDOUT; the context is spent).
 */
static int arrived_all(struct sigma_local_tensor *t, unsigned int what, uint64_t want,
		       uint64_t bound_us, uint64_t now)
{
	struct sigma_local *l = t->l;
	int k = first_behind(t, what, want), rc;

	if (k < 0)
		return 1;
	if ((rc = peer_failed(l)) < 0)
		return rc;
	if (now - t->checked >= SIGMA_LOCAL_DEAD_CHECK_MS * 1000ull) {
		t->checked = now;
		for (unsigned int q = 0; q < l->c.local_size; q++) {
			struct seg_rank *r = rank_slot(l->base, q);
			int32_t pid = atomic_load(&r->pid);

			if (atomic_load_explicit(counter(t, what, q), memory_order_acquire) >= want)
				continue;
			if (atomic_load(&r->closed))
				return fail(l, -EPIPE, "push_pull of '%s' (step %" PRIu64 "): local rank "
					    "%u (pid %d) of machine %u closed its context", t->name,
					    t->seq, q, (int)pid, l->c.machine);
			if (!pid_alive(pid))
				return fail(l, -EPIPE, "push_pull of '%s' (step %" PRIu64 "): local rank "
					    "%u (pid %d) of machine %u died", t->name, t->seq, q,
					    (int)pid, l->c.machine);
		}
	}
	if (now - t->since >= bound_us)
		return fail(l, -ETIMEDOUT, "push_pull of '%s' (step %" PRIu64 "): local rank %d (pid "
			    "%d) of machine %u did not %s within %.3g s (stuck or paused)", t->name,
			    t->seq, k, (int)atomic_load(&rank_slot(l->base, (unsigned int)k)->pid),
			    l->c.machine, what_name[what], (double)bound_us / 1e6);
	return 0;
}

/* ---- the segment ---------------------------------------------------------- */

static void seg_name(char *buf, size_t len, uint32_t job, unsigned int machine, int pid)
{
	snprintf(buf, len, "sigma-local-%u-j%u-m%u-p%d", (unsigned int)getuid(), job, machine,
		 pid);
}

/* Remove this user's segments whose maker is dead. */
static void clean_stale(void)
{
	char pre[48], path[sizeof(SEG_DIR) + 300];
	struct dirent *e;
	DIR *d = opendir(SEG_DIR);

	if (d == NULL)
		return;
	snprintf(pre, sizeof(pre), "sigma-local-%u-j", (unsigned int)getuid());
	while ((e = readdir(d)) != NULL) {
		unsigned int job, m;
		int pid, end = 0;

		if (strncmp(e->d_name, pre, strlen(pre)) != 0 ||
		    sscanf(e->d_name + strlen(pre), "%u-m%u-p%d%n", &job, &m, &pid, &end) != 3 ||
		    e->d_name[strlen(pre) + (size_t)end] != '\0' || pid_alive(pid))
			continue;
		snprintf(path, sizeof(path), "%s/%s", SEG_DIR, e->d_name);
		unlink(path);
	}
	closedir(d);
}

static int map_fd(struct sigma_local *l)
{
	void *p = mmap(NULL, SIGMA_LOCAL_CAPACITY, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_NORESERVE, l->fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	l->base = p;
	return 0;
}

static int seg_create(struct sigma_local *l, char *err, size_t errlen)
{
	char name[80];
	int rc;

	clean_stale();
	seg_name(name, sizeof(name), l->c.job, l->c.machine, (int)getpid());
	snprintf(l->path, sizeof(l->path), "/%s", name);
	l->fd = shm_open(l->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (l->fd < 0) {
		rc = -errno;
		say(err, errlen, "sigma_local_open: local rank 0 of machine %u cannot make the "
		    "segment %s/%s: %s (is %s a writable tmpfs?)", l->c.machine, SEG_DIR, name,
		    strerror(-rc), SEG_DIR);
		return rc;
	}
	if (ftruncate(l->fd, (off_t)SIGMA_LOCAL_CAPACITY) < 0)
		rc = -errno;
	else
		rc = -posix_fallocate(l->fd, 0, (off_t)SEG_DATA);
	if (rc == 0)
		rc = map_fd(l);
	if (rc < 0) {
		say(err, errlen, "sigma_local_open: local rank 0 of machine %u: segment %s/%s: %s",
		    l->c.machine, SEG_DIR, name, strerror(-rc));
		shm_unlink(l->path);
		return rc;
	}
	hdr(l)->key = l->c.key;
	hdr(l)->job = l->c.job;
	hdr(l)->local_size = l->c.local_size;
	hdr(l)->machine = l->c.machine;
	hdr(l)->maker = (int32_t)getpid();
	atomic_store_explicit(&hdr(l)->magic, SEG_MAGIC, memory_order_release);
	return 0;
}

/*
 * Find the segment local rank 0 made: a name of our job and machine whose maker
 * lives, with our key. @return 1 found (mapped), 0 not yet, or -errno.
 */
static int seg_find(struct sigma_local *l, char *err, size_t errlen)
{
	char pre[64];
	struct dirent *e;
	DIR *d = opendir(SEG_DIR);
	int found = 0;

	if (d == NULL) {
		int rc = -errno;

		say(err, errlen, "sigma_local_open: local rank %u of machine %u: %s: %s",
		    l->c.local_rank, l->c.machine, SEG_DIR, strerror(-rc));
		return rc;
	}
	snprintf(pre, sizeof(pre), "sigma-local-%u-j%u-m%u-p", (unsigned int)getuid(), l->c.job,
		 l->c.machine);
	while (found == 0 && (e = readdir(d)) != NULL) {
		int pid, end = 0, fd;
		struct stat st;
		struct seg_hdr *h;

		if (strncmp(e->d_name, pre, strlen(pre)) != 0 ||
		    sscanf(e->d_name + strlen(pre), "%d%n", &pid, &end) != 1 ||
		    e->d_name[strlen(pre) + (size_t)end] != '\0' || !pid_alive(pid))
			continue;
		snprintf(l->path, sizeof(l->path), "/%s", e->d_name);
		fd = shm_open(l->path, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0)
			continue; /* unlinked meanwhile */
		if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != SIGMA_LOCAL_CAPACITY) {
			close(fd); /* its maker is still at ftruncate */
			continue;
		}
		l->fd = fd;
		if (map_fd(l) < 0) {
			close(fd);
			l->fd = -1;
			continue;
		}
		h = hdr(l);
		if (atomic_load_explicit(&h->magic, memory_order_acquire) == SEG_MAGIC &&
		    h->key == l->c.key && h->job == l->c.job && h->machine == l->c.machine) {
			found = 1;
			break;
		}
		munmap(l->base, SIGMA_LOCAL_CAPACITY);
		l->base = NULL;
		close(fd);
		l->fd = -1;
	}
	closedir(d);
	return found;
}

/* Every local rank mapped it (the last unlinked it), within the open timeout. */
static int wait_mapped(struct sigma_local *l, uint64_t deadline, char *err, size_t errlen)
{
	for (;;) {
		uint32_t bell = atomic_load(&hdr(l)->bell);
		uint64_t now;
		int rc;

		if (atomic_load(&hdr(l)->mapped) >= l->c.local_size)
			return 0;
		if ((rc = peer_failed(l)) < 0) {
			/* a local size refused elsewhere is ours to refuse too */
			if (strstr(l->err, "local size") != NULL)
				rc = -EINVAL;
			say(err, errlen, "sigma_local_open: local rank %u of machine %u: %s",
			    l->c.local_rank, l->c.machine, l->err);
			return rc;
		}
		for (unsigned int q = 0; q < l->c.local_size; q++) {
			int32_t pid = atomic_load(&rank_slot(l->base, q)->pid);

			if (pid != 0 && !pid_alive(pid)) {
				say(err, errlen, "sigma_local_open: local rank %u (pid %d) of machine "
				    "%u died while the local ranks opened", q, (int)pid,
				    l->c.machine);
				return -EPIPE;
			}
		}
		now = now_us();
		if (now >= deadline) {
			unsigned int missing = 0;

			for (unsigned int q = 0; q < l->c.local_size; q++)
				missing += atomic_load(&rank_slot(l->base, q)->pid) == 0;
			say(err, errlen, "sigma_local_open: local rank %u of machine %u: %u of the "
			    "%u local ranks did not map the segment within %.3g s (are they all "
			    "on this machine, with this job and key?)", l->c.local_rank,
			    l->c.machine, missing, l->c.local_size,
			    (double)l->c.open_timeout_ms / 1e3);
			return -ETIMEDOUT;
		}
		sleep_on(l, bell, deadline - now < 50000 ? deadline - now : 50000);
	}
}

static int local_open(struct sigma_local *l, char *err, size_t errlen)
{
	uint64_t deadline = now_us() + (uint64_t)l->c.open_timeout_ms * 1000;
	struct seg_rank *me;
	int32_t zero = 0;
	int rc;

	if (l->c.local_rank == 0) {
		rc = seg_create(l, err, errlen);
		if (rc < 0)
			return rc;
	} else {
		while ((rc = seg_find(l, err, errlen)) == 0) {
			if (now_us() >= deadline) {
				say(err, errlen, "sigma_local_open: local rank %u of machine %u: no "
				    "segment of job %u and this key from local rank 0 within %.3g s "
				    "(is it running, on this machine, with the same job and key?)",
				    l->c.local_rank, l->c.machine, l->c.job,
				    (double)l->c.open_timeout_ms / 1e3);
				return -ETIMEDOUT;
			}
			usleep(2000);
		}
		if (rc < 0)
			return rc;
		if (hdr(l)->local_size != l->c.local_size) {
			fail(l, -EINVAL, "sigma_local_open: local rank %u of machine %u says %u "
			     "local ranks, but local rank 0's segment says %u: every local rank "
			     "of a machine needs the same local size", l->c.local_rank,
			     l->c.machine, l->c.local_size, hdr(l)->local_size);
			say(err, errlen, "%s", l->err);
			return -EINVAL;
		}
	}
	me = rank_slot(l->base, l->c.local_rank);
	if (!atomic_compare_exchange_strong(&me->pid, &zero, (int32_t)getpid())) {
		say(err, errlen, "sigma_local_open: local rank %u of machine %u is open already "
		    "(pid %d)", l->c.local_rank, l->c.machine, (int)zero);
		return -EEXIST;
	}
	l->attached = true;
	if (atomic_fetch_add(&hdr(l)->mapped, 1) + 1 == l->c.local_size)
		shm_unlink(l->path); /* the last to map it: the mappings alone hold it now */
	ring(l);
	rc = wait_mapped(l, deadline, err, errlen);
	if (rc < 0) {
		/* the others waiting to open fail with it (a refused local size, too) */
		if (l->failed == 0)
			fail(l, rc, "%s", err != NULL && errlen > 0 ? err : "sigma_local_open failed");
		shm_unlink(l->path);
	}
	return rc;
}

struct sigma_local *sigma_local_open(const struct sigma_local_conf *conf,
				     struct sigma_session *s, char *err, size_t errlen)
{
	struct sigma_local *l;
	int rc;

	say(err, errlen, "%s", "");
	if (conf == NULL || s == NULL || conf->local_size == 0 ||
	    conf->local_size > SIGMA_LOCAL_MAX || conf->local_rank >= conf->local_size) {
		say(err, errlen, "sigma_local_open: %s", conf == NULL || s == NULL ?
		    "NULL conf or session" : "local_rank must be below local_size, 1..64");
		errno = EINVAL;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	l->c = *conf;
	l->s = s;
	l->fd = -1;
	/* the sum's table, picked once before any thread sums (a bad SIGMA_SUM_IMPL is
	 * logged; the scalar reference still answers) */
	(void)sg_sum_init();
	if (l->c.open_timeout_ms == 0)
		l->c.open_timeout_ms = 30000;
	if (l->c.wait_us == 0)
		l->c.wait_us = 60000000;
	if (l->c.share_wait_us == 0)
		l->c.share_wait_us = l->c.wait_us > UINT32_MAX - 5000000 ? UINT32_MAX :
				     l->c.wait_us + 5000000;
	if (l->c.local_size > 1 && (rc = local_open(l, err, errlen)) < 0) {
		sigma_local_close(l);
		errno = -rc;
		return NULL;
	}
	return l;
}

/* ---- tensors -------------------------------------------------------------- */

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Take or find tensor @p id's region; fills t->region. */
static int claim(struct sigma_local *l, struct sigma_local_tensor *t)
{
	struct seg_ent *e = ent(l, t->id);
	uint32_t st = ENT_FREE;
	uint64_t size = round_up(t->hdr_bytes + l->c.local_size * t->slot_bytes, 4096), start;

	if (atomic_compare_exchange_strong(&e->state, &st, ENT_CLAIMING)) {
		uint64_t off = SEG_DATA + atomic_fetch_add(&hdr(l)->top, size);
		int rc = off + size > SIGMA_LOCAL_CAPACITY ? ENOSPC :
			 posix_fallocate(l->fd, (off_t)off, (off_t)size);

		e->dtype = (uint32_t)t->dtype;
		e->nelem = t->nelem;
		e->off = off;
		e->claimer = l->c.local_rank;
		e->error = rc;
		atomic_store_explicit(&e->state, rc ? ENT_ERROR : ENT_READY, memory_order_release);
		ring(l);
		if (rc)
			return fail(l, -rc, "tensor '%s' (id %u): cannot take %" PRIu64 " bytes of "
				    "shared memory (%" PRIu64 " elements x %u local ranks): %s: make "
				    "%s larger", t->name, t->id, size, t->nelem, l->c.local_size,
				    strerror(rc), SEG_DIR);
		t->region = l->base + off;
		return 0;
	}
	start = now_us();
	while ((st = atomic_load_explicit(&e->state, memory_order_acquire)) == ENT_CLAIMING) {
		int rc = peer_failed(l);

		if (rc < 0)
			return rc;
		if (now_us() - start >= l->c.wait_us)
			return fail(l, -ETIMEDOUT, "tensor '%s' (id %u): the local rank that took its "
				    "shared memory gave no place within %.3g s", t->name, t->id,
				    (double)l->c.wait_us / 1e6);
		usleep(100);
	}
	if (st == ENT_ERROR)
		return fail(l, -e->error, "tensor '%s' (id %u): local rank %u could not take its "
			    "shared memory: %s", t->name, t->id, e->claimer, strerror(e->error));
	if (e->dtype != (uint32_t)t->dtype || e->nelem != t->nelem)
		return fail(l, -EINVAL, "tensor '%s' (id %u) is %" PRIu64 " %s elements on local "
			    "rank %u of machine %u, but local rank %u registered it as %" PRIu64
			    " %s: an id must have the same size and dtype on every rank", t->name,
			    t->id, t->nelem, sg_dtype_name(t->dtype), l->c.local_rank, l->c.machine,
			    e->claimer, e->nelem, sg_dtype_name((enum sg_dtype)e->dtype));
	t->region = l->base + e->off;
	return 0;
}

struct sigma_local_tensor *sigma_local_tensor_register(struct sigma_local *l, const char *name,
						       uint32_t id, enum sg_dtype dtype,
						       uint64_t nelem, int priority)
{
	struct sigma_local_tensor *t;
	unsigned int L;
	int rc;

	if (l == NULL || nelem == 0 || id >= SG_MAX_TENSORS || sg_dtype_size(dtype) == 0 ||
	    dtype == SG_DTYPE_ANY) {
		if (l != NULL)
			snprintf(l->err, sizeof(l->err), "sigma_local_tensor_register: a bad "
				 "argument (id %u, %" PRIu64 " elements)", id, nelem);
		errno = EINVAL;
		return NULL;
	}
	if (l->failed) {
		errno = -l->failed;
		return NULL;
	}
	for (t = l->tensors; t != NULL; t = t->next)
		if (t->id == id) {
			snprintf(l->err, sizeof(l->err), "sigma_local_tensor_register: id %u is in "
				 "use ('%s')", id, t->name);
			errno = EEXIST;
			return NULL;
		}
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	L = l->c.local_size;
	t->l = l;
	t->id = id;
	t->dtype = dtype;
	t->esize = sg_dtype_size(dtype);
	t->nelem = nelem;
	t->lo = nelem * l->c.local_rank / L;
	t->hi = nelem * (l->c.local_rank + 1u) / L;
	snprintf(t->name, sizeof(t->name), "%s", name != NULL ? name : "tensor");
	t->slot_bytes = round_up(nelem * t->esize, LINE);
	t->hdr_bytes = round_up((uint64_t)LINE * 3 * L, 4096);
	if (t->hi > t->lo) {
		t->inner = sigma_tensor_register(l->s, name, id, dtype, t->hi - t->lo, priority);
		if (t->inner == NULL) {
			rc = errno;
			snprintf(l->err, sizeof(l->err), "tensor '%s' (id %u): share %u (%" PRIu64
				 " elements) not registered in the session: %s", t->name, id,
				 l->c.local_rank, t->hi - t->lo, strerror(rc));
			free(t);
			errno = rc;
			return NULL;
		}
	}
	if (L > 1 && (rc = claim(l, t)) < 0) {
		free(t); /* the session's tensor stays until sigma_close() */
		errno = -rc;
		return NULL;
	}
	t->next = l->tensors;
	l->tensors = t;
	return t;
}

/* ---- the local sum -------------------------------------------------------- */

/*
 * Slot 0's share = the sum of every slot's, in local-rank order (summation/'s
 * fused k-way sum: 16-bit types in fp32, rounded once; integers wrap).
 */
static void reduce(struct sigma_local_tensor *t, uint8_t *slot0)
{
	const void *srcs[SIGMA_LOCAL_MAX];
	unsigned int L = t->l->c.local_size;

	for (unsigned int k = 0; k < L; k++)
		srcs[k] = slot0 + k * t->slot_bytes + t->lo * t->esize;
	/* cannot fail: dtype and L checked at open and registration, dst is srcs[0] exactly */
	(void)sg_sum_addk(t->dtype, slot0 + t->lo * t->esize, srcs, L, t->hi - t->lo, 0);
}

static void enter(struct sigma_local_tensor *t, int state, uint64_t now)
{
	t->state = state;
	t->since = t->checked = now;
}

/* The session's share: 0 done, -EINPROGRESS, or its failure (the context spent). */
static int share_test(struct sigma_local_tensor *t)
{
	struct sigma_local *l = t->l;
	int rc = sigma_test(t->inner);

	if (rc >= 0 || rc == -EINPROGRESS)
		return rc;
	if (l->c.local_size == 1)
		return fail(l, rc, "push_pull of '%s' (step %" PRIu64 "): %s", t->name, t->seq,
			    sigma_last_error(l->s));
	return fail(l, rc, "push_pull of '%s' (step %" PRIu64 "): share %u of machine %u: %s",
		    t->name, t->seq, l->c.local_rank, l->c.machine, sigma_last_error(l->s));
}

/* Take the op as far as it goes without waiting: 1 it moved, 0 it waits, or -errno. */
static int step(struct sigma_local_tensor *t, uint64_t now)
{
	struct sigma_local *l = t->l;
	uint8_t *slot0 = t->region + t->hdr_bytes;
	uint64_t nbytes = t->nelem * t->esize;
	int rc;

	switch (t->state) {
	case LT_SLOT: /* slot 0 holds the last sum until every local rank copied it out */
		if (l->c.local_rank == 0 &&
		    (rc = arrived_all(t, COPIED, t->seq - 1, l->c.wait_us, now)) <= 0)
			return rc;
		memcpy(slot0 + l->c.local_rank * t->slot_bytes, t->in, nbytes);
		set_counter(t, ARRIVED, t->seq);
		enter(t, LT_ARRIVE, now);
		return 1;
	case LT_ARRIVE:
		if ((rc = arrived_all(t, ARRIVED, t->seq, l->c.wait_us, now)) <= 0)
			return rc;
		if (t->inner != NULL) {
			uint8_t *share = slot0 + t->lo * t->esize;

			reduce(t, slot0);
			rc = sigma_push_pull(t->inner, share, share, NULL, NULL);
			if (rc < 0)
				return fail(l, rc, "push_pull of '%s' (step %" PRIu64 "): share %u of "
					    "machine %u: %s", t->name, t->seq, l->c.local_rank,
					    l->c.machine, sigma_last_error(l->s));
			enter(t, LT_SHARE, now);
			return 1;
		}
		set_counter(t, DONE, t->seq);
		enter(t, LT_DONE, now);
		return 1;
	case LT_SHARE:
		if ((rc = share_test(t)) == -EINPROGRESS)
			return 0;
		if (rc < 0)
			return rc;
		if (l->c.local_size == 1) {
			t->state = LT_IDLE;
			t->status = 0;
			return 1;
		}
		set_counter(t, DONE, t->seq);
		enter(t, LT_DONE, now);
		return 1;
	case LT_DONE:
		if ((rc = arrived_all(t, DONE, t->seq, l->c.share_wait_us, now)) <= 0)
			return rc;
		memcpy(t->out, slot0, nbytes);
		set_counter(t, COPIED, t->seq);
		t->state = LT_IDLE;
		t->status = 0;
		return 1;
	default:
		return 0;
	}
}

/* A failure spends the context: every op in flight ends with it. */
static int fail_all(struct sigma_local *l, int rc)
{
	for (struct sigma_local_tensor *t = l->tensors; t != NULL; t = t->next)
		if (t->state != LT_IDLE) {
			t->state = LT_IDLE;
			t->status = rc;
		}
	return rc;
}

int sigma_local_start(struct sigma_local_tensor *t, const void *in, void *out)
{
	struct sigma_local *l;
	int rc;

	if (t == NULL || in == NULL || out == NULL)
		return -EINVAL;
	l = t->l;
	if (l->failed)
		return l->failed;
	if (t->state != LT_IDLE)
		return -EBUSY;
	t->seq++;
	t->in = in;
	t->out = out;
	t->status = -EINPROGRESS;
	if (l->c.local_size == 1) {
		rc = sigma_push_pull(t->inner, in, out, NULL, NULL);
		if (rc < 0) {
			t->status = rc;
			return fail(l, rc, "push_pull of '%s' (step %" PRIu64 "): %s", t->name,
				    t->seq, sigma_last_error(l->s));
		}
		enter(t, LT_SHARE, now_us());
		l->moved = t->since;
		return 0;
	}
	enter(t, LT_SLOT, now_us());
	l->moved = t->since;
	/* the first steps need nobody else (local rank 0 may wait for the last copies out) */
	rc = step(t, t->since);
	return rc < 0 ? fail_all(l, rc) : 0;
}

int sigma_local_poll(struct sigma_local *l, int timeout_us)
{
	uint64_t start = now_us(), until = start + (uint64_t)(timeout_us > 0 ? timeout_us : 0);
	int done = 0;

	if (l == NULL)
		return -EINVAL;
	if (l->failed)
		return l->failed;
	for (;;) {
		uint32_t bell = l->base != NULL ? atomic_load(&hdr(l)->bell) : 0;
		uint64_t now = now_us(), wait;
		bool active = false, sharing = false;

		for (struct sigma_local_tensor *t = l->tensors; t != NULL; t = t->next) {
			int rc = 0;

			while (t->state != LT_IDLE && (rc = step(t, now)) > 0)
				l->moved = now;
			if (t->state != LT_IDLE && rc < 0)
				return fail_all(l, rc);
			if (t->state == LT_IDLE && t->status == 0 && t->in != NULL) {
				t->in = NULL; /* counted once */
				done++;
			}
			active |= t->state != LT_IDLE;
			sharing |= t->state == LT_SHARE;
		}
		if (done > 0 || !active || now >= until)
			return done;
		if (!sharing && now - l->moved < SPIN_US) {
			cpu_relax();
			continue;
		}
		/* wake for the next dead-rank check at least; the session's shares by its poll */
		wait = until - now;
		if (wait > SIGMA_LOCAL_DEAD_CHECK_MS * 1000ull)
			wait = SIGMA_LOCAL_DEAD_CHECK_MS * 1000ull;
		if (sharing) {
			int rc = sigma_poll(l->s, (int)(wait < 200 ? wait : 200));

			if (rc < 0)
				return fail_all(l, fail(l, rc, "sigma_poll: %s", sigma_last_error(l->s)));
		} else {
			sleep_on(l, bell, wait);
		}
	}
}

int sigma_local_test(const struct sigma_local_tensor *t)
{
	if (t == NULL)
		return -EINVAL;
	if (t->state != LT_IDLE)
		return t->l->failed ? t->l->failed : -EINPROGRESS;
	return t->status;
}

int sigma_local_push_pull(struct sigma_local_tensor *t, const void *in, void *out)
{
	int rc = sigma_local_start(t, in, out);

	if (rc < 0)
		return rc;
	while ((rc = sigma_local_test(t)) == -EINPROGRESS) {
		int p = sigma_local_poll(t->l, 1000000);

		if (p < 0)
			return p;
	}
	return rc;
}

const char *sigma_local_last_error(const struct sigma_local *l)
{
	return l != NULL ? l->err : "";
}

struct sigma_session *sigma_local_session(const struct sigma_local *l)
{
	return l != NULL ? l->s : NULL;
}

void sigma_local_close(struct sigma_local *l)
{
	if (l == NULL)
		return;
	while (l->tensors != NULL) {
		struct sigma_local_tensor *t = l->tensors;

		l->tensors = t->next;
		free(t);
	}
	if (l->base != NULL) {
		if (l->attached) {
			atomic_store(&rank_slot(l->base, l->c.local_rank)->closed, 1);
			ring(l);
		}
		munmap(l->base, SIGMA_LOCAL_CAPACITY);
	}
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}
