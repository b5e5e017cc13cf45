/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Elastic jobs (docs/cluster.md, "Elastic jobs"): one rank's view of a job
 * whose node set changes mid-job at rounds that every rank agrees on in etcd.
 * A node that registers into the job's cluster (new, or back after a crash
 * with a new lease), or one that sigmactl drains, changes the job's node set
 * through a numbered proposal that one writer wins (an etcd transaction),
 * that every rank confirms with its rounds, and that takes effect for each
 * tensor at the round max(confirmed rounds) + margin (a tensor every rank
 * confirmed idle: at its confirmed round), on every rank. A
 * proposal that a rank does not confirm within confirm_ms is aborted (also in
 * a transaction), naming the rank: the job stays on its node set. A tensor
 * that stops between its confirmation and its switch round gets the same node
 * set proposed again, where it is confirmed idle and switches at once. Each node
 * set is one libsigma session (with failover): a tensor goes on in the old
 * one until its switch round, then in the new one.
 *
 * Not in libsigma itself (which has no etcd): a static library beside it
 * that uses sigma.h and libsigma-control's sg_etcd.h. One instance per rank;
 * its calls belong to one thread; a thread of its own does the etcd I/O.
 * Functions return 0 or -errno; constructors return NULL and set errno.
 */
#ifndef SIGMA_ELASTIC_H
#define SIGMA_ELASTIC_H

#include <stdbool.h>
#include <stdint.h>

#include "sg_etcd.h"
#include "sigma.h"

/** Most tensors of an elastic job. */
#define SIGMA_ELASTIC_MAX_TENSORS 1024

/** Configuration. Zero fields take the defaults in brackets. */
struct sigma_elastic_conf {
	struct sg_etcd_conf etcd;	/**< etcd endpoints */
	const char *cluster;		/**< the nodes' cluster ["default"] */
	const char *descriptor;		/**< the job (an open job: docs/control.md) */
	uint16_t rank;			/**< this worker */
	const struct sigma_conf *base;	/**< transport and timeouts, as sigma_open_job() [defaults] */
	uint32_t poll_ms;		/**< period of the etcd reads, 10..10000 [50] */
	uint32_t margin;		/**< rounds between the confirmations and a switch, 1..1000 [4] */
	uint32_t confirm_ms;		/**< a proposal's bound for every confirmation [10000] */
	/**
	 * How long a push_pull may wait at its limit for a proposal to be decided
	 * (etcd unreachable meanwhile) before failing with -ETIMEDOUT [60000]
	 */
	uint32_t wait_ms;
	/** propose changes (joins, drains): [rank 0 only]; 1: this rank too, -1: never */
	int propose;
	const uint8_t *secret;		/**< control secret for TCP control endpoints (joins) */
	size_t secret_len;
	/**
	 * A tensor not pushed for this long when the rank confirms a proposal is
	 * confirmed idle: its next push waits for the decision, and if every rank
	 * confirmed it idle it switches at its next round (a tensor never pushed
	 * again then keeps no old session open), 10..600000 [1000]
	 */
	uint32_t idle_ms;
	/**
	 * auth = mac (the descriptor's auth=mac; it must be this rank's own, with its
	 * keys): the job's full token, 64 hex digits (`sigmactl job create --auth
	 * --token-file`), which a rank that proposes needs to make the job on a node
	 * that joins (the node derives the job key from it) and no other rank should
	 * hold: with it a rank could MAC any rank's push (docs/security.md). Copied.
	 */
	const char *job_token;
};

/** State of an instance. */
struct sigma_elastic_status {
	uint32_t epoch;			/**< the newest node set this rank knows (0: the descriptor's) */
	unsigned int nodes;		/**< its nodes */
	unsigned int sessions;		/**< sessions open (two during a switch) */
	uint64_t proposals;		/**< proposals this rank won */
	uint64_t races_lost;		/**< proposals it tried that another writer won first */
	uint64_t confirms;		/**< confirmations it wrote */
	uint64_t aborts;		/**< proposals it saw aborted */
	uint64_t switches;		/**< tensors that switched to a newer node set */
	uint64_t waits;			/**< push_pulls that waited at their limit for a decision */
	uint64_t etcd_failures;		/**< etcd reads or writes that failed */
	char last_abort[256];		/**< the last abort's reason */
};

struct sigma_elastic;

/**
 * Open rank @p c->rank of the job: reads the nodes from etcd (which must
 * answer), takes the job's first node set from the job record rank 0 puts
 * (rank 0 makes it; the others wait for it up to confirm_ms), and opens the
 * first session. A job of tensors must be recorded in etcd
 * (/sigma/<cluster>/jobs/<id>, sg_etcd_job_record()): the proposer then adds to
 * every node of a new node set the keys that move to it (job_keys_add, over the
 * control endpoint of the node's record, with @p c->secret) and rewrites that
 * record at each switch; an open job needs neither.
 * @return the instance, or NULL with errno EINVAL (bad conf or descriptor, poll_ms,
 *         margin or idle_ms out of its range, a rank not below N, an async job; the
 *         reason in @p err), EHOSTUNREACH (etcd), ETIMEDOUT (no job record from rank
 *         0), EACCES (auth = mac, and the descriptor is not this rank's own),
 *         EINVAL also for auth = mac and a rank that proposes without job_token, a
 *         job_token that is not the job's, or one for a job without auth (all before
 *         etcd, the reason in @p err), ENOMEM, or sigma_open()'s errno.
 */
struct sigma_elastic *sigma_elastic_open(const struct sigma_elastic_conf *c, char *err,
					 size_t errlen);

/** Close: every session, the thread; rank 0 removes the job's records. NULL is fine. */
void sigma_elastic_close(struct sigma_elastic *e);

/**
 * Register a tensor (as sigma_tensor_register(): every rank the same).
 * @return 0, -EINVAL, -EEXIST, -ENOSPC (more than SIGMA_ELASTIC_MAX_TENSORS),
 *         or sigma_tensor_register()'s error.
 */
int sigma_elastic_tensor(struct sigma_elastic *e, const char *name, uint32_t id,
			 enum sg_dtype dtype, uint64_t nelem, int priority);

/**
 * Start summing tensor @p id's @p in into @p out on the node set its round
 * belongs to. Waits (polling every open session) when its round reached the
 * limit of a proposal not yet decided.
 * @return 0, sigma_push_pull()'s errors, -ENOENT (no such tensor), -ETIMEDOUT
 *         (no decision within wait_ms: sigma_elastic_last_error() says why).
 */
int sigma_elastic_push_pull(struct sigma_elastic *e, uint32_t id, const void *in, void *out);

/** Wait for tensor @p id's operation, polling every open session. @return as sigma_wait(). */
int sigma_elastic_wait(struct sigma_elastic *e, uint32_t id);

/** push_pull, then wait. */
int sigma_elastic_push_pull_sync(struct sigma_elastic *e, uint32_t id, const void *in, void *out);

/**
 * The name of the node that sums partition @p part of tensor @p id in the
 * round its next operation has, into @p name (SG_NAME_MAX).
 * @return 0, -ENOENT, -EINVAL.
 */
int sigma_elastic_part_node(struct sigma_elastic *e, uint32_t id, uint32_t part, char *name);

/**
 * Make progress on every open session (waits up to @p timeout_us when only one
 * is open), and close the sessions no tensor needs any more.
 * @return 0, -EINVAL.
 */
int sigma_elastic_poll(struct sigma_elastic *e, int timeout_us);

/** State of tensor @p id's last operation: as sigma_test(), or -ENOENT. */
int sigma_elastic_test(struct sigma_elastic *e, uint32_t id);

/** The counters of every session the instance opened, added up (monotonic). */
void sigma_elastic_get_stats(struct sigma_elastic *e, struct sigma_stats *st);

/** The round of tensor @p id's next operation (0 if none). */
uint32_t sigma_elastic_round(const struct sigma_elastic *e, uint32_t id);

/** Copy the state. */
void sigma_elastic_status(struct sigma_elastic *e, struct sigma_elastic_status *st);

/** The last failure's message ("" if none). */
const char *sigma_elastic_last_error(const struct sigma_elastic *e);

#endif /* SIGMA_ELASTIC_H */
