/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * sigmad's DPDK pipeline: the lcore loops that drive one aggregation engine
 * per reducer over a transport (DPDK ethdev ports, kernel UDP sockets or
 * verbs), their counters, telemetry, live reload and life cycle. It runs what
 * sg_dp_config.h describes. sigmad.c is a thin main() over this header; the
 * tests, the benchmark and the demo drive the same functions in-process
 * (their traffic generator is sg_dp_testdrv.h's).
 *
 * Conventions: functions return 0 or -errno; constructors return NULL and set
 * errno. Functions that take `err`/`errlen` write a one-line, human-readable
 * reason there on failure.
 */
#ifndef SG_DP_PIPELINE_H
#define SG_DP_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_mempool.h>

#include "sg_dp_config.h"
#include "sg_dp_engine.h"
#include "sg_dp_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A sigmad-like program's command line (sigmad, sigma-demo): EAL's arguments,
 * then `--`, then Sigma's options (sg_dp_config_parse_args()). Without `--`
 * every argument is Sigma's and EAL gets a default.
 */

/**
 * Split @p argv at its first `--`. *@p eal_argc: the arguments before it
 * (argv[0] included), or 0 when there is no `--`; *@p sg_argc: Sigma's.
 * @return Sigma's options with argv[0] in front, as getopt expects (free() it),
 *         or NULL with errno set (ENOMEM).
 */
char **sg_dp_args_split(int argc, char **argv, int *eal_argc, int *sg_argc);

/**
 * Start EAL with the first @p eal_argc arguments of @p argv, or, when
 * @p eal_argc is 0, with a no-hugepage, virtual-device default: no PCI, 1 GB,
 * lcores 0-2 floating over every CPU, file prefix "<@p name>_<pid>", EAL's
 * and telemetry's logs at error level.
 * @return rte_eal_init()'s result (< 0: rte_errno says why).
 */
int sg_dp_eal_init(int eal_argc, char **argv, const char *name);

/**
 * rte_eal_cleanup(), then remove EAL's runtime folder (/var/run/dpdk/<file
 * prefix>, or under $XDG_RUNTIME_DIR) and the files in it, which EAL leaves
 * behind: one folder per run when the prefix names the pid, as
 * sg_dp_eal_init()'s does. Only for a process whose prefix no other process
 * shares (no secondary processes). Call it last: EAL is gone afterwards.
 */
void sg_dp_eal_cleanup(void);

/*
 * The running pipeline.
 */

/** Add every `[job N]` of @p c to @p eng (the reducers' set-up, and the verbs transport's). */
int sg_dp_engine_add_config_jobs(struct sg_dp_engine *eng, const struct sg_dp_config *c, char *err,
				  size_t errlen);

struct sg_dp_pipeline;

/** Per-lcore counters (what /sigma/lcores reports). */
struct sg_dp_lcore_stats {
	unsigned int lcore;
	enum sg_role role;
	int socket;
	enum sg_idle idle;  /**< the lcore's idle policy now */
	uint64_t busy_cycles;  /**< TSC cycles of polls that found work */
	uint64_t idle_cycles;  /**< TSC cycles of polls that found none (sleep included) */
	uint64_t rx_pkts;      /**< frames received from the port */
	uint64_t rx_bytes;
	uint64_t tx_pkts;      /**< frames transmitted */
	uint64_t tx_bytes;
	uint64_t handoff_pkts; /**< datagrams passed to another reducer's ring */
	uint64_t reduced_pkts; /**< datagrams given to this lcore's engine */
	uint64_t bytes_summed; /**< payload bytes of pushes the engine accepted */
	uint64_t arp_replies;
	uint64_t ring_count;   /**< gauge: datagrams waiting in this reducer's ring */
	/* ethdev reducers' reply addresses (docs/sigmad.md, "Reply addresses") */
	uint64_t peers;         /**< gauge: addresses held now */
	uint64_t peers_learned; /**< addresses added: their packet passed the engine's checks */
	uint64_t peers_evicted; /**< addresses forgotten to make room (least recently seen) */
	uint64_t peers_expired; /**< addresses forgotten after [resources] peer_idle_ms unused */
	uint64_t drops[SG_DP_ND_COUNT];
};

/**
 * An lcore's network drops: @return their total; also add them, reason by
 * reason, into @p by_reason (SG_DP_ND_COUNT entries) unless it is NULL.
 */
static inline uint64_t sg_dp_lcore_drops(const struct sg_dp_lcore_stats *st, uint64_t *by_reason)
{
	uint64_t n = 0;

	for (int k = 0; k < SG_DP_ND_COUNT; k++) {
		n += st->drops[k];
		if (by_reason != NULL)
			by_reason[k] += st->drops[k];
	}
	return n;
}

/**
 * Build the pipeline after rte_eal_init(): check the layout (warnings go to
 * stderr), create per-socket mempools, configure and start the ports the
 * layout polls, the reducers' rings and one engine per reducer holding every
 * configured job. Ports must exist already (vdevs, PCI, or ring ports).
 * @return the pipeline, or NULL with errno set and @p err filled; errno is
 *         EPROTONOSUPPORT when the configured transport was not built in (a
 *         configuration error, unlike a port or device that refuses).
 */
struct sg_dp_pipeline *sg_dp_pipeline_create(const struct sg_dp_config *c, char *err,
					     size_t errlen);

/** Launch the layout's lcores. @return 0 or -errno. */
int sg_dp_pipeline_start(struct sg_dp_pipeline *p);

/**
 * Wait until every lcore of the layout has run its loop once since
 * sg_dp_pipeline_start(): it polls its queues, rings and control channel (what
 * sigmad's readiness means, docs/deploy.md).
 * @return 0, -EINVAL when the pipeline is not running, or -ETIMEDOUT after
 *         @p timeout_ms with some lcore still not polling.
 */
int sg_dp_pipeline_wait_polling(struct sg_dp_pipeline *p, unsigned int timeout_ms);

/**
 * Stop: RX lcores stop polling, reducers drain their rings and flush their
 * TX, then every lcore returns. Safe to call twice; waits for the lcores.
 */
void sg_dp_pipeline_stop(struct sg_dp_pipeline *p);

/** Stop if running, stop the ports, free everything. NULL is fine. */
void sg_dp_pipeline_destroy(struct sg_dp_pipeline *p);

/**
 * Apply a re-read configuration: idle, sleep_lcores, idle_sleep_us,
 * log_level and stats_interval_s take effect at once; every other difference
 * (timeout_ms too: the engine takes it at creation) is listed on @p report as
 * needing a restart.
 * @return number of sections or keys that need a restart.
 */
int sg_dp_pipeline_reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report);

/** Number of lcores in the layout. */
unsigned int sg_dp_pipeline_n_lcores(const struct sg_dp_pipeline *p);

/** Counters of layout lcore @p idx. @return 0 or -EINVAL. */
int sg_dp_pipeline_lcore_stats(const struct sg_dp_pipeline *p, unsigned int idx,
			       struct sg_dp_lcore_stats *st);

/** Engine counters summed over every reducer. */
void sg_dp_pipeline_engine_stats(const struct sg_dp_pipeline *p, struct sg_dp_stats *st);

/** One drop counter of the pipeline: sg_dp_pipeline_drops(). */
struct sg_dp_drop_count {
	char name[48];  /**< net_REASON, engine_REASON or TRANSPORT_REASON */
	uint64_t count;
};
/** Room for every drop counter sg_dp_pipeline_drops() can report. */
#define SG_DP_MAX_DROP_COUNTS 96

/**
 * Every drop counter of @p p, by reason, as /sigma/drops names them: the
 * lcores' classify drops (net_*), the engines' (engine_*, summed) and the
 * transport's own (e.g. sock_*, summed over the lcores). For the control
 * plane's stats_get and /metrics. @return the number written to @p out, at
 * most @p cap.
 */
unsigned int sg_dp_pipeline_drops(struct sg_dp_pipeline *p, struct sg_dp_drop_count *out,
				  unsigned int cap);

struct sg_dp_verbs_rc_addr;

/**
 * `[verbs] mode = rc` (builds with verbs only): connect one worker to the
 * pipeline's rtc lcore, as sg_dp_verbs_rc_connect() does (sg_dp_verbs.h):
 * the worker's ring and QP in @p remote, the node's in @p local. While the
 * pipeline runs, the lcore makes the connection itself between bursts (its
 * control channel), since its QPs are its own. Thread-safe.
 * @return the worker's peer id (>= 0), or -errno with @p err filled:
 *         -ENOTSUP (not the verbs transport, or mode = ud), -EINVAL,
 *         -ENOSPC, -ETIMEDOUT (the lcore did not answer within 2 s: nothing
 *         stays connected, since the lcore skips, or undoes, a request
 *         answered late), or the verbs call's error.
 */
int sg_dp_pipeline_verbs_rc_connect(struct sg_dp_pipeline *p,
				    const struct sg_dp_verbs_rc_addr *remote,
				    struct sg_dp_verbs_rc_addr *local, char *err, size_t errlen);

/**
 * Close the RC connection of peer id @p peer (what sg_dp_pipeline_verbs_rc_connect()
 * returned), as sg_dp_verbs_rc_disconnect() does, on the lcore that owns it:
 * its QP goes to the error state and is destroyed, and its slots go back for
 * a later connection. Thread-safe. @return 0, or -errno with @p err filled:
 * -ENOTSUP (not the verbs transport, or mode = ud), -ENOENT (no open
 * connection with that id), -ETIMEDOUT (the lcore did not answer; it still
 * closes the connection when it takes the request).
 */
int sg_dp_pipeline_verbs_rc_disconnect(struct sg_dp_pipeline *p, uint32_t peer, char *err,
				       size_t errlen);

/** What a worker needs to address the node's verbs transport (sg_dp_pipeline_verbs_info()). */
struct sg_dp_pipeline_verbs_info {
	bool rc;               /**< [verbs] mode = rc (else UD) */
	uint32_t qkey;         /**< UD Q_Key workers must use */
	uint32_t msg_max;      /**< largest message, the 48-byte header included */
	uint32_t max_payload;  /**< payload bytes after the header one message carries */
	uint8_t port;          /**< the [verbs] port */
	uint8_t gid[16];       /**< the port's GID at gid_index */
	int gid_index;
	uint16_t lid;          /**< 0 on RoCE */
	uint32_t rc_slots;     /**< RC: node slots each connection gets */
	uint32_t rc_conns;     /**< RC: workers connected so far */
	uint32_t rc_max_conns; /**< RC: recv_depth / rc_slots (and at most max_peers) */
	unsigned int n_lcores;
	struct {
		unsigned int lcore;
		enum sg_role role;
		uint32_t qpn;  /**< the lcore's UD QP (RC: its connections have their own) */
	} lcores[SG_DP_MAX_LAYOUT];
};

/**
 * The node's verbs addressing (builds with verbs only). Thread-safe while the
 * lcores run: everything but rc_conns is fixed at set-up.
 * @return 0, or -ENOTSUP with @p err filled when @p p does not run the verbs
 *         transport.
 */
int sg_dp_pipeline_verbs_info(const struct sg_dp_pipeline *p,
			      struct sg_dp_pipeline_verbs_info *out, char *err, size_t errlen);

/**
 * The transport's own counters of lcore @p idx: nothing for ethdev (its
 * ports have rte_eth_stats); for verbs "qpn" (the QP workers address),
 * completions, packets, peers and drop counters (docs/verbs.md). Names are
 * static strings. Callable from any thread while the lcores run.
 * @return how many were written (at most @p max).
 */
unsigned int sg_dp_pipeline_transport_counters(const struct sg_dp_pipeline *p, unsigned int idx,
					       const char **names, uint64_t *values,
					       unsigned int max);

/** Print the per-lcore table (and drops) to @p f; @p seconds scales rates (0: no rates). */
void sg_dp_pipeline_print_stats(const struct sg_dp_pipeline *p, FILE *f, double seconds);

/** The configuration the pipeline runs with. */
const struct sg_dp_config *sg_dp_pipeline_config(const struct sg_dp_pipeline *p);

/**
 * Register /sigma/lcores, /sigma/ports, /sigma/jobs and /sigma/drops with
 * rte_telemetry for @p p (NULL: answer "no pipeline"). rte_telemetry
 * callbacks take no context, so this is the one process-wide pipeline that
 * telemetry reports on. @return 0 or -errno.
 */
int sg_dp_telemetry_register(struct sg_dp_pipeline *p);

/** Fill a struct sg_dp_net for port @p port_id of the pipeline (MAC, offloads). */
int sg_dp_pipeline_net(const struct sg_dp_pipeline *p, uint16_t port_id, struct sg_dp_net *net);

/** Private bytes every mbuf that reaches sigmad's RX must have (rte_pktmbuf_pool_create). */
#define SG_DP_MBUF_PRIV_SIZE 32

/** Every job's counters, summed over the reducers' engines. */
struct sg_dp_jobs_table {
	unsigned int n;             /**< jobs */
	uint32_t *ids;              /**< their ids */
	struct sg_dp_job_stats *st; /**< their counters, in the same order */
};

/**
 * Counters of every job, summed over the reducers' engines, into @p t (as
 * many as the engines hold: the table grows to fit; release it with
 * sg_dp_jobs_table_free(), on failure too). Each engine is read by its own
 * lcore, through its control channel, so the pipeline must be running; safe
 * from any non-lcore thread (calls are serialised).
 * @return the number of jobs, -ETIMEDOUT if a reducer did not answer, or -ENOMEM.
 */
int sg_dp_pipeline_jobs_stats(struct sg_dp_pipeline *p, struct sg_dp_jobs_table *t);

/** Free the arrays of @p t and zero it. */
void sg_dp_jobs_table_free(struct sg_dp_jobs_table *t);

/**
 * The lateness of job @p job's ranks (sg_late.h), summed over the reducers'
 * engines that hold it (sg_late_add()), into @p out. Each engine is read by
 * its own lcore, as in sg_dp_pipeline_jobs_stats(); safe from any non-lcore
 * thread. @return 0, -ENOENT if no engine has the job, -ETIMEDOUT if a reducer
 * did not answer, or -ENOMEM.
 */
int sg_dp_pipeline_job_lateness(struct sg_dp_pipeline *p, uint32_t job, struct sg_late *out);


/*
 * Control of a running pipeline from a thread that is not an lcore (sigmad's
 * agent, sigmad/sg_dp_agent.c; the tests). Engines and key moves belong to
 * their reducer lcores, so each call below that changes them is a message on
 * the lcores' control channels (sg_dp_chan.h), answered between bursts, and
 * calls are serialised with each other and with sg_dp_pipeline_jobs_stats():
 * any number of control threads may call. An lcore that does not answer
 * within 2 s makes the call fail with -ETIMEDOUT; what it was handed stays
 * allocated, since it may still read it.
 */

/** What the node's engines take (sg_dp_pipeline_limits()). */
struct sg_dp_pipeline_limits {
	unsigned int max_jobs; /**< most jobs one engine holds (0: no engine) */
	unsigned int engines;  /**< lcores with an engine: each holds every job */
	/** largest chunk_bytes a job may use: what [net] mtu fits, the engines' buffers
	 * and one transport message hold */
	uint32_t max_chunk;
};

/** The node's engine limits into @p out. Fixed at set-up; any thread. */
void sg_dp_pipeline_limits(const struct sg_dp_pipeline *p, struct sg_dp_pipeline_limits *out);

/** One lcore of the running layout (struct sg_dp_pipeline_layout). */
struct sg_dp_pipeline_lcore {
	unsigned int lcore;
	enum sg_role role;
	int socket;
	enum sg_idle idle; /**< its idle policy now */
	int port;          /**< the port it receives from, -1 without SG_ROLE_IO */
	int queue;         /**< ... and the RX queue, -1 without SG_ROLE_IO */
};

/** The layout as it runs now (sg_dp_pipeline_layout()). */
struct sg_dp_pipeline_layout {
	unsigned int n_lcores;
	struct sg_dp_pipeline_lcore lcores[SG_DP_MAX_LAYOUT];
	unsigned int n_reducers;
	unsigned int reducer_lcores[SG_DP_MAX_LAYOUT]; /**< reducer index -> lcore id */
	unsigned int n_ports;
	uint16_t ports[SG_DP_MAX_PORTS];  /**< the ports the layout receives from */
	uint16_t keymap[SG_BUCKETS];      /**< bucket -> reducer index, now */
	bool draining;                    /**< sg_dp_pipeline_drain() was called */
};

/** The running layout into @p out (plain loads of lcore-owned values); any thread. */
void sg_dp_pipeline_layout(const struct sg_dp_pipeline *p, struct sg_dp_pipeline_layout *out);

/**
 * Set the idle policy of the layout's lcore @p lcore (an lcore id) to @p idle.
 * @return 0, -ENOENT when @p lcore is not in the layout, or -ETIMEDOUT.
 */
int sg_dp_pipeline_idle_set(struct sg_dp_pipeline *p, unsigned int lcore, enum sg_idle idle);

/**
 * Add job @p jc to every engine (with its keys; an open job with none). The
 * job and its keys are copied first, so @p jc need not outlive the call. If
 * an engine refuses, the engines that took it forget it again.
 * @return 0, -ENOMEM, -ETIMEDOUT, or the error of sg_dp_engine_add_job()
 *         (-EEXIST, -EINVAL, -ENOSPC, -ENOMEM) of the first engine that refused.
 */
int sg_dp_pipeline_job_add(struct sg_dp_pipeline *p, const struct sg_dp_job_conf *jc);

/** Remove job @p id from every engine that holds it (none: nothing happens). */
void sg_dp_pipeline_job_remove(struct sg_dp_pipeline *p, uint32_t id);

/**
 * Add @p n keys (@p keys, copied first) to job @p job on every engine
 * (failover: a lost node's keys, docs/cluster.md). An engine that took some
 * of them skips those the next time.
 * @return 0, -ENOMEM, -ETIMEDOUT, or the error of sg_dp_engine_add_keys()
 *         (-ENOENT: an engine does not hold the job; -EINVAL, -ENOSPC, -ENOMEM).
 */
int sg_dp_pipeline_keys_add(struct sg_dp_pipeline *p, uint32_t job, const struct sg_dp_key *keys,
			    uint32_t n);

/*
 * Key moves (docs/sigmad.md, "Moving keys between reducers live"): buckets
 * change reducer chunk by chunk, each at its next round boundary, sequenced by
 * the reducer that leaves them. A move must know every chunk that may be in
 * flight: the caller passes the node's jobs, as it created them (keys and
 * all; an open job's keys are found on the engines and by the job's token).
 */

/**
 * Chunks of started key moves that have not crossed their round boundary yet
 * (0: no move in progress). Any thread.
 */
unsigned int sg_dp_pipeline_moves_pending(struct sg_dp_pipeline *p);

/**
 * Move the buckets whose reducer in @p want (SG_BUCKETS reducer indexes)
 * differs from the keymap's now. @p jobs (@p n_jobs) are every job the node
 * holds.
 * @return the number of buckets that move (0: @p want is the keymap now),
 *         or -errno with @p err filled: -EINVAL (a reducer index out of
 *         range), -EBUSY (draining, or a move in progress: retry when
 *         sg_dp_pipeline_moves_pending() is 0), -EOPNOTSUPP (an async job:
 *         its stores stay in their reducers), -ENOMEM, -ETIMEDOUT, or an
 *         lcore's error. On failure no bucket moves.
 */
int sg_dp_pipeline_keymap_set(struct sg_dp_pipeline *p, const uint16_t *want,
			      const struct sg_dp_job_conf *jobs, unsigned int n_jobs, char *err,
			      size_t errlen);

/**
 * Drain: every reducer lets each chunk of @p jobs (@p n_jobs, every job the
 * node holds) finish the rounds it may have begun and refuses later ones
 * with the counted drop "draining", for good. Callers refuse new jobs from
 * then on (struct sg_dp_pipeline_layout, draining).
 * @return 0 (also when draining already), -EBUSY (a key move is in
 *         progress), -ENOMEM or -ETIMEDOUT.
 */
int sg_dp_pipeline_drain(struct sg_dp_pipeline *p, const struct sg_dp_job_conf *jobs,
			 unsigned int n_jobs);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_PIPELINE_H */
