/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Local aggregation (BytePS's communication service): the L ranks of one
 * machine sum their tensors in shared memory, and each machine pushes every
 * byte once (docs/client.md, "Several ranks on one machine").
 *
 * The layout: L jobs of N = n (the machines) on the nodes, one per local
 * index j ("sub-jobs"). Local rank j of machine m opens its session of
 * sub-job j as rank m (sigma_open(), sigma_open_job()) and hands it to
 * sigma_local_open(). For each tensor, every local rank copies its input into
 * its own slot of the machine's segment; local rank j sums *share j*
 * (elements [j n / L, (j + 1) n / L)) over the L slots in local-rank order
 * (fixed: bitwise the same run after run; fp16 and bf16 in fp32, rounded
 * once), push_pulls it through its session in place, and once every share is
 * back each local rank copies the whole sum out.
 *
 * **Shared memory.** One POSIX segment per machine and job,
 * /dev/shm/sigma-local-<uid>-j<job>-m<machine>-p<pid>, made by local rank 0
 * (its pid in the name) and found by the others by its name and key;
 * sigma_local_open() returns once all L local ranks have mapped it, and the
 * last one to map it unlinks it: from then on only the mappings hold it, so
 * nothing is left however the processes end (SIGKILL included). A segment
 * whose maker died before that is removed by the next sigma_local_open() on
 * the machine. Its size is virtual (SIGMA_LOCAL_CAPACITY, sparse); a tensor's
 * pages (L slots of its size and 4 KiB of counters) are taken
 * (posix_fallocate) when the first local rank registers it, so a full
 * /dev/shm is an error there, never a SIGBUS.
 *
 * **Waiting** sleeps on a futex in the segment (after a short spin), never
 * polls the nodes' sessions of the other local ranks; every wait has a bound.
 *
 * **Failures** name the machine and the local rank (sigma_local_last_error()):
 * a local rank that died (its pid gone, or a zombie) fails the others' calls
 * within SIGMA_LOCAL_DEAD_CHECK_MS with -EPIPE; one that does not come within
 * wait_us (stuck, paused) fails them with -ETIMEDOUT; a local rank whose call
 * fails writes its reason into the segment, and the others' calls then fail
 * with -EPIPE quoting it. After a failure the context is spent: every later
 * push_pull returns the same error (close it, and the sessions).
 *
 * **Threads and memory.** A context belongs to one thread at a time, as its
 * session does. Everything is allocated by sigma_local_open() and
 * sigma_local_tensor_register(); push_pull allocates nothing and takes no
 * lock. sigma_local_push_pull() blocks; sigma_local_start(),
 * sigma_local_poll() and sigma_local_test() keep several tensors in flight
 * at once (one op per tensor), started in any order on each local rank.
 *
 * The counters are C11 atomics (release/acquire): no reliance on x86-64's
 * store order, unlike python/sigma/local.py.
 *
 * Every function returns 0 on success and -errno on failure; constructors
 * return NULL and set errno.
 */
#ifndef SIGMA_LOCAL_H
#define SIGMA_LOCAL_H

#include <stdint.h>

#include "sigma.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most local ranks of one machine. */
#define SIGMA_LOCAL_MAX 64
/** Virtual size of a segment (sparse: only registered tensors take pages). */
#define SIGMA_LOCAL_CAPACITY (256ull << 30)
/** How often a waiting local rank checks that the ones it waits for live. */
#define SIGMA_LOCAL_DEAD_CHECK_MS 200

/** A machine's place in the job. Zero fields take the documented defaults. */
struct sigma_local_conf {
	/**
	 * Names the segment: the same on every local rank of the machine and
	 * different from any other job running there (e.g. sub-job 0's id).
	 */
	uint32_t job;
	/**
	 * A value every local rank of this run shares and no earlier run did
	 * (e.g. sub-job 0's token): a segment of another run of the same job id
	 * is never joined. 0 is allowed (then only the job id tells runs apart).
	 */
	uint64_t key;
	uint16_t machine;    /**< m: this machine's rank in the sub-jobs (0..n-1) */
	uint16_t local_rank; /**< j: 0..local_size-1 (local rank 0 makes the segment) */
	uint16_t local_size; /**< L: 1..SIGMA_LOCAL_MAX, the same on every local rank */
	/**
	 * sigma_local_open(): how long to wait for the other local ranks to map
	 * the segment (default 30 s).
	 */
	uint32_t open_timeout_ms;
	/**
	 * push_pull: how long to wait for another local rank to come (its input,
	 * or its copy of the last result out) before failing with -ETIMEDOUT
	 * (default 60 s, libsigma's ranks_wait_us default: a rank behind holds the
	 * others up no longer than on the nodes).
	 */
	uint32_t wait_us;
	/**
	 * push_pull: how long to wait for another local rank's share to come back
	 * from the nodes (default wait_us + 5 s: above the sessions' own bounds,
	 * which fire first with the nodes' reason).
	 */
	uint32_t share_wait_us;
};

struct sigma_local;
struct sigma_local_tensor;

/**
 * Join the machine's segment (local rank 0 makes it, removing stale segments
 * of dead makers first) and wait until every local rank has mapped it. @p s is
 * this local rank's session of sub-job local_rank, as rank machine (N = the
 * machines); it stays the caller's (close it after sigma_local_close()), and
 * the context drives it: do not push_pull through it directly meanwhile.
 * With local_size 1 there is no segment: push_pull goes straight to @p s.
 * @param err receives the reason on failure (naming the machine and the local
 *            rank); may be NULL
 * @return the context, or NULL with errno:
 *   - EINVAL: a bad argument (@p conf or @p s NULL, local_size 0 or above
 *     SIGMA_LOCAL_MAX, local_rank not below local_size), or **a local size
 *     that differs** between the local ranks of the machine: refused on the
 *     rank that finds it and, through the segment, on the others that are
 *     still in sigma_local_open();
 *   - EEXIST: a live process opened as this local rank already;
 *   - ETIMEDOUT: the local ranks did not all map the segment within
 *     open_timeout_ms (local rank 0 then removes it);
 *   - EPIPE: a local rank died, or failed (its reason quoted), while the others
 *     waited;
 *   - ENOMEM, or shm_open/ftruncate/posix_fallocate/mmap's errno (EACCES,
 *     ENOSPC: /dev/shm full, ...).
 */
struct sigma_local *sigma_local_open(const struct sigma_local_conf *conf,
				     struct sigma_session *s, char *err, size_t errlen);

/**
 * Register a tensor on this local rank: its region of the segment (the first
 * local rank to register @p id takes it, the others find it) and, when share
 * local_rank is not empty, the share's tensor in the session (id @p id,
 * nelem / L or so elements). Every local rank must register the same tensors
 * (id, dtype, nelem), and every machine the same ones.
 * @param name for messages (may be NULL); @p id 0..SG_MAX_TENSORS-1, unique in
 *             the context; @p nelem > 0; @p priority as sigma_tensor_register()
 * @return the tensor, or NULL with errno EINVAL (a bad argument, or another
 *         local rank registered @p id with another dtype or element count: the
 *         others then fail too), EEXIST (id in use here), ENOSPC (no room left
 *         in the segment or in /dev/shm for the region), ETIMEDOUT (the local
 *         rank that took the region gave no place within wait_us), EPIPE (the
 *         context failed before), or sigma_tensor_register()'s errno;
 *         sigma_local_last_error() says why.
 */
struct sigma_local_tensor *sigma_local_tensor_register(struct sigma_local *l, const char *name,
						       uint32_t id, enum sg_dtype dtype,
						       uint64_t nelem, int priority);

/**
 * Sum @p in over every rank of every machine into @p out (nelem elements of
 * the tensor's dtype each; in == out allowed): blocks until done or failed.
 * The machine's sum is taken in local-rank order, so in deterministic mode
 * the result is bitwise reproducible.
 * @return 0, or:
 *   - -EPIPE: a local rank of the machine died, closed its context, or failed
 *     (the reason it wrote into the segment is quoted);
 *   - -ETIMEDOUT: a local rank did not come within wait_us, or its share did
 *     not come back within share_wait_us; or this rank's share timed out in the
 *     session (sigma_test()'s -ETIMEDOUT: sigma_last_failure() says which bound);
 *   - any other failure of this rank's share in the session, as sigma_test()
 *     returns it (-EPROTO, -ESTALE, -ENOSPC, -EHOSTDOWN, ...);
 *   - -EINVAL: NULL buffers (the context stays usable).
 *   Any failure but -EINVAL spends the context; sigma_local_last_error() names
 *   the tensor, the step, the machine and the local rank.
 */
int sigma_local_push_pull(struct sigma_local_tensor *t, const void *in, void *out);

/**
 * Start push_pull of @p t (as sigma_local_push_pull(), without waiting): copy
 * @p in into the segment (local rank 0 first waits, within sigma_local_poll(),
 * for the last sum to be copied out everywhere). @p in and @p out must stay
 * valid until sigma_local_test() says the op is over. Several tensors may be in
 * flight at once, started in any order on each local rank: each advances in
 * sigma_local_poll() when the other local ranks reach it.
 * @return 0 (in flight), or -EINVAL (NULL buffers), -EBUSY (@p t's last op is
 *         still in flight), or the spent context's error.
 */
int sigma_local_start(struct sigma_local_tensor *t, const void *in, void *out);

/**
 * Advance every op in flight as far as it goes (sums, shares pushed through the
 * session and its sigma_poll(), results copied out), waiting up to
 * @p timeout_us for one to finish.
 * @return how many finished in this call (0 on timeout), or the failure that
 *         spent the context (the errors of sigma_local_push_pull()); every op in
 *         flight then ends with it.
 */
int sigma_local_poll(struct sigma_local *l, int timeout_us);

/**
 * @return -EINPROGRESS while @p t's op is in flight, then 0 or its failure
 *         (sigma_local_push_pull()'s errors); -EINVAL for NULL.
 */
int sigma_local_test(const struct sigma_local_tensor *t);

/** The last failure's message ("" if none). */
const char *sigma_local_last_error(const struct sigma_local *l);

/** The session the context drives (as given to sigma_local_open()). */
struct sigma_session *sigma_local_session(const struct sigma_local *l);

/**
 * Unmap the segment and free the context and its tensors (the session's
 * tensors stay registered in it). Local ranks still waiting for this one fail
 * with -EPIPE. NULL does nothing.
 */
void sigma_local_close(struct sigma_local *l);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_LOCAL_H */
