/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Test drivers of sigmad's pipeline (library sg_dp_testdrv, which sigmad does
 * not link): an in-process traffic generator, a loopback run (the pipeline on
 * a ring port, the generator on the calling lcore) and a two-process run over
 * net_memif. The tests, sigma-bench and sigma-demo use them.
 *
 * Conventions: functions return 0 or -errno; constructors return NULL and set
 * errno. Functions that take `err`/`errlen` write a one-line reason there.
 */
#ifndef SG_DP_TESTDRV_H
#define SG_DP_TESTDRV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_ether.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "sg_dp_pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif


/*
 * In-process traffic generator: N simulated workers on the far side of a
 * pair of rte_rings (the two rings of a ring port), for tests, the benchmark
 * and the demo. It pushes every chunk of every key of one job for a number of
 * rounds, drops packets on purpose if asked, retransmits on timeout, and
 * checks every RESULT element against the exactly known sum.
 */

struct sg_dp_gen;

/** Generator parameters. */
struct sg_dp_gen_conf {
	struct rte_ring *to_dut;   /**< frames towards sigmad (its RX ring), or NULL */
	struct rte_ring *from_dut; /**< frames from sigmad (its TX ring), or NULL */
	int port;                  /**< >= 0: use this ethdev instead of rings: TX queue 0, */
	uint16_t nb_rxq;           /**< ... and RX queues 0..nb_rxq-1 */
	struct rte_mempool *pool;  /**< mbufs for pushes */
	struct rte_ether_addr dut_mac;
	uint32_t dut_ip;           /**< network byte order */
	uint16_t dut_udp_port;     /**< host order */
	uint32_t job;
	uint64_t token;
	uint32_t workers;          /**< N (1..64) */
	uint32_t keys;
	uint32_t partition_bytes;
	uint32_t chunk_bytes;
	uint32_t rounds;
	uint32_t window;           /**< slots in flight at once */
	double loss;               /**< probability of dropping each push and each result */
	/** Probability that a push leaves with one bit of its UDP payload flipped after its
	 *  UDP checksum was computed (damaged on the way); only with udp_checksum. */
	double corrupt;
	uint64_t retrans_us;       /**< resend after this long without a result, twice as long after
				    each resend of the same round (up to 64 x) */
	uint32_t seed;
	bool udp_checksum;
	unsigned int idle_sleep_us; /**< sleep this long after 64 empty polls (0: spin) */
	/** Optional second job (keys2 > 0): the last keys2 of the keys go out as keys
	 *  0..keys2-1 of job job2 (token token2), same workers and partition size. */
	uint32_t job2;
	uint64_t token2;
	uint32_t keys2;
	/** Worker w sends from UDP port src_port + w (0: 40000 + w); its MAC depends on
	 *  its rank and port. Every RESULT must come to exactly that address. */
	uint16_t src_port;
	/** auth = mac: the job's key (the node's job has it too); each rank signs its
	 *  pushes with its own key (sg_auth.h). Not with keys2. NULL: no auth. */
	const uint8_t *auth_key;
	/** The rounds pushed are first_round .. first_round + rounds - 1: workers that
	 *  carry on a job that earlier ones left (a restart on new ports). */
	uint32_t first_round;
	/**
	 * Build pushes in mbufs that already hold their elements: one pool per worker
	 * and pattern, filled once at create, so a push costs its headers and first
	 * 12 bytes instead of a copy of its elements (the generator shares the node's
	 * CPUs). Not with corrupt (a damaged push would stay damaged). A pool that
	 * runs dry, or cannot be made, falls back to @p pool. The pools go with
	 * sg_dp_gen_destroy(): call it only once no push can still be in flight
	 * (the node stopped, its rings emptied).
	 */
	bool prepared;
};

/** Generator counters and verdict. */
struct sg_dp_gen_stats {
	uint64_t pushes_sent;      /**< first sends */
	uint64_t retransmits;
	uint64_t results_ok;       /**< RESULTs whose every element matched */
	uint64_t results_bad;      /**< RESULTs with a wrong element or to a wrong address (must
				    stay 0) */
	uint64_t results_dup;      /**< RESULTs for a round already complete for that rank */
	uint64_t nacks, errors, other;
	uint64_t dropped_out, dropped_in; /**< injected losses */
	uint64_t unsent;           /**< of pushes_sent and retransmits: never sent (no mbuf, or
				    the port's ring or queue full) */
	uint64_t copied;           /**< pushes built with a copy of their elements (not from a
				    prepared mbuf: sg_dp_gen_conf.prepared) */
	uint64_t corrupted;        /**< pushes sent damaged (sg_dp_gen_conf.corrupt) */
	uint64_t rounds_done;      /**< (slot, round) pairs complete for every worker */
	uint64_t rounds_total;
	uint64_t bytes_pushed;     /**< payload bytes of first sends (the goodput numerator) */
	uint64_t arp_replies;
	uint64_t retransmits2;     /**< ... of retransmits: pushes of job2 */
};

/** Create a generator. @return it, or NULL with errno set. */
struct sg_dp_gen *sg_dp_gen_create(const struct sg_dp_gen_conf *gc);

/**
 * Run until every round of every slot is complete, or @p deadline_tsc passes,
 * or *@p stop becomes true. @return 0 if complete, -ETIMEDOUT otherwise.
 */
int sg_dp_gen_run(struct sg_dp_gen *g, uint64_t deadline_tsc, volatile bool *stop);

/** Receive and check what the DUT sent, once (no sends). */
void sg_dp_gen_poll(struct sg_dp_gen *g);

/** Send one ARP request for the DUT's IP; the reply is counted in arp_replies
 *  and its MAC becomes the destination of later pushes. */
int sg_dp_gen_arp(struct sg_dp_gen *g);

/** Send one raw frame of @p len bytes (for garbage tests). */
int sg_dp_gen_raw(struct sg_dp_gen *g, const void *frame, uint32_t len);

/** Counters so far. */
void sg_dp_gen_stats(const struct sg_dp_gen *g, struct sg_dp_gen_stats *st);

/** Free a generator. NULL is fine. */
void sg_dp_gen_destroy(struct sg_dp_gen *g);

/*
 * Loopback run: sigmad's pipeline on a ring port, the generator on the
 * calling (main) lcore. One call = one scenario; used by the tests, the
 * benchmark and `sigmad --demo`.
 */

/** What the generator side of a loopback run does (job 1 of the config is used). */
struct sg_dp_loop_conf {
	uint32_t rounds;
	uint32_t window;        /**< slots in flight (default 64) */
	double loss;            /**< injected loss, each direction */
	double corrupt;         /**< pushes damaged after their UDP checksum (sg_dp_gen_conf) */
	uint64_t retrans_us;    /**< default 2000 */
	uint32_t seed;
	double timeout_s;       /**< give up after this long (default 30) */
	unsigned int garbage;   /**< malformed frames to send first (counted drops) */
	bool arp;               /**< send an ARP request first */
	unsigned int gen_sleep_us; /**< generator's idle sleep (0: it busy-polls) */
	/** Called once the lcores run, before the generator starts (for example to start
	 *  the control agent); a negative return ends the run with that error. */
	int (*on_start)(struct sg_dp_pipeline *p, void *arg);
	/** Called once the generator is done, while the lcores still run. */
	void (*on_stop)(struct sg_dp_pipeline *p, void *arg);
	void *hook_arg;
	/** Drive the config's second job too (same workers and partition_bytes as the
	 *  first): its keys follow the first job's in the generator's window. */
	bool two_jobs;
};

/**
 * Outcome of a loopback run. When every round completed, the node took in
 * every frame the generator sent before its lcores stopped (the run waits for
 * the port's RX rings to empty, within timeout_s): its counters then cover
 * the same frames as the generator's.
 */
struct sg_dp_loop_result {
	int rc;                 /**< 0: every round complete */
	double seconds;         /**< generator's wall time */
	struct sg_dp_gen_stats gen;
	struct sg_dp_stats eng;
	unsigned int n_lcores;
	struct sg_dp_lcore_stats lcores[SG_DP_MAX_LAYOUT];
};

/**
 * Create a ring port (RX queues as the layout needs, one TX queue per
 * lcore), point the layout's port 0 at it, run the pipeline with @p c and
 * the generator with @p lc until done or timed out, stop, collect, free.
 * @p table: if not NULL, the per-lcore table is printed there.
 * @return 0 or -errno (set-up failures fill @p err); a run that did not
 *         complete returns 0 with res->rc = -ETIMEDOUT.
 */
int sg_dp_loopback_run(const struct sg_dp_config *c, const struct sg_dp_loop_conf *lc,
		       struct sg_dp_loop_result *res, FILE *table, char *err, size_t errlen);

/** Where the two processes of sg_dp_memif_run() run. */
struct sg_dp_memif_conf {
	const char *socket_path; /**< memif control socket file (removed before and after) */
	const char *dut_lcores;  /**< EAL --lcores of the node process, e.g. "0@0,1@1" */
	const char *gen_lcores;  /**< EAL --lcores of the generator process, e.g. "0@0" */
	double max_life_s;       /**< the node exits after this long even if not told */
	bool dut_table;          /**< the node prints its per-lcore table on exit */
};

/**
 * Two processes over net_memif: fork a node process that runs the pipeline
 * with @p c on a memif server port (port 0), then start EAL here with the
 * memif client, resolve the node's MAC by ARP, and run the generator as in
 * sg_dp_loopback_run(). The node's counters come back through a pipe; it is
 * stopped with SIGTERM and killed if it does not exit within 5 s.
 * Must be called in a process that has not started EAL; it starts and cleans
 * up EAL itself, so call it once per process.
 */
int sg_dp_memif_run(const struct sg_dp_config *c, const struct sg_dp_loop_conf *lc,
		    const struct sg_dp_memif_conf *mc, struct sg_dp_loop_result *res, char *err,
		    size_t errlen);


#ifdef __cplusplus
}
#endif

#endif /* SG_DP_TESTDRV_H */
