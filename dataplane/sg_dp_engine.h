/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma aggregation engine: the transport-agnostic core of a summation node.
 *
 * One UDP payload goes in (sg_dp_engine_rx()); zero or more packets come out
 * through the caller's tx callbacks. Timeouts are driven by
 * sg_dp_engine_poll(). Time is whatever monotonic nanosecond clock the caller
 * passes in, so tests can simulate it.
 *
 * Threading: an engine belongs to one thread (one reducer lcore). No function
 * takes a lock; none may be called concurrently on the same engine. Separate
 * engines are independent. The engine needs no rte_eal_init().
 *
 * Memory: everything is allocated by create and add_job. rx and poll allocate
 * nothing; accumulators come from a fixed NUMA-local pool (sg_sum_pool). When
 * the pool or a job's slots-in-flight limit is exhausted the push is answered
 * with a NACK (code BUSY or INFLIGHT) and not aggregated; the worker retries.
 *
 * Slots: there is one slot per (job, key, chunk). A slot collects one round at
 * a time. Round r's result is kept (the "shadow") while round r+1 collects, so
 * that a worker whose RESULT was lost can retransmit its push of r and get the
 * result again. It is released when round r+1 completes, or, under pool
 * pressure, once it has been complete for at least shadow_hold_ns. See
 * docs/protocol.md for the full state machine.
 */
#ifndef SG_DP_ENGINE_H
#define SG_DP_ENGINE_H

#include <stdint.h>

#include "sg_dp_proto.h"
#include "sg_sum.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Packet output. The engine builds each packet in place: alloc() gives it a
 * buffer of at least @p len bytes for the UDP payload, the engine writes the
 * Sigma header and payload there, then hands it back with send(). One packet
 * is in the engine's hands at a time (alloc, fill, send), so a caller may
 * reuse one scratch buffer. A DPDK caller returns the data area of a fresh
 * mbuf (behind room for Ethernet/IPv4/UDP headers) and keeps the mbuf in
 * @p pkt, so the payload is written exactly once.
 */
struct sg_dp_tx_ops {
	/**
	 * @param ctx  the ops' ctx
	 * @param dest the destination worker's opaque address (as given to rx)
	 * @param len  bytes needed (header + payload)
	 * @param pkt  out: the caller's handle for send()
	 * @return writable buffer, or NULL to drop this packet (counted in tx_fail)
	 */
	void *(*alloc)(void *ctx, uint64_t dest, uint32_t len, void **pkt);
	/** Transmit the packet from alloc(); @p len bytes were written. */
	void (*send)(void *ctx, void *pkt, uint32_t len);
	void *ctx;
};

/** Engine configuration. Zero fields take the documented defaults. */
struct sg_dp_engine_conf {
	int numa_node;            /**< pool's NUMA node; -1 = the calling thread's node */
	uint32_t pool_bufs;       /**< accumulator buffers (default 4096) */
	uint32_t max_payload;     /**< largest chunk_bytes of any job: multiple of 8, default
				   1424, at most SG_DP_MAX_CHUNK_BYTES */
	uint32_t max_jobs;        /**< jobs at once (default 16, max 1024) */
	uint64_t slot_timeout_ns; /**< incomplete slot reported after this (default 1 s) */
	uint64_t shadow_hold_ns;  /**< kept result reclaimable after this (default 100 ms) */
	struct sg_dp_tx_ops tx;   /**< packet output (alloc and send are required) */
};

/** One partition (key) of a job. */
struct sg_dp_key {
	uint32_t id;    /**< key as it appears on the wire */
	uint32_t nelem; /**< elements in the partition (> 0) */
};

/** Job configuration. Zero fields take the documented defaults. */
struct sg_dp_job_conf {
	uint32_t id;              /**< job id on the wire */
	uint32_t nworkers;        /**< N, 1..SG_DP_MAX_WORKERS */
	uint64_t token;           /**< session token every packet must carry */
	enum sg_dtype dtype;      /**< element type of every key */
	enum sg_dp_mode mode;     /**< sync (default), async or deterministic */
	unsigned int sum_flags;   /**< 0 (fp16/bf16 summed in fp32) or SG_SUM_F_NATIVE */
	uint32_t partition_bytes; /**< largest key in bytes (default SG_DP_PARTITION_DEFAULT) */
	uint32_t chunk_bytes;     /**< payload bytes per chunk, multiple of 8 (default 1424) */
	uint32_t max_inflight;    /**< slots collecting at once (default: pool_bufs / 2) */
	const struct sg_dp_key *keys; /**< the job's partitions (copied) */
	uint32_t nkeys;           /**< number of keys, > 0 */
};

/**
 * Engine counters. Monotonic unless said otherwise. Drops are counted once
 * per packet, by reason (enum sg_dp_drop).
 */
struct sg_dp_stats {
	uint64_t rx_packets;        /**< packets given to rx */
	uint64_t rx_pushes;         /**< pushes aggregated (each counted once) */
	uint64_t rx_pulls;          /**< PULL requests accepted */
	uint64_t drops[SG_DP_DROP_COUNT]; /**< dropped packets by reason */
	uint64_t rounds_completed;  /**< slot rounds that got all N pushes */
	uint64_t results_sent;      /**< RESULT packets emitted (all causes) */
	uint64_t retransmits_served; /**< RESULTs resent for a finished round */
	uint64_t async_updates;     /**< async pushes added to the store */
	uint64_t nacks_sent;        /**< NACK packets emitted */
	uint64_t nacks_pool;        /**< ... of which for pool exhaustion */
	uint64_t errors_sent;       /**< ERROR packets emitted */
	uint64_t slot_timeouts;     /**< slots reported incomplete after slot_timeout_ns */
	uint64_t incomplete_slots;  /**< gauge: timed-out slots still incomplete now */
	uint64_t slots_active;      /**< gauge: slots collecting now */
	uint64_t shadows_reclaimed; /**< kept results released early under pool pressure */
	uint64_t pool_free;         /**< gauge: free accumulator buffers */
	uint64_t tx_fail;           /**< packets not sent because tx alloc returned NULL */
};

struct sg_dp_engine;

/**
 * Create an engine.
 * @return the engine, or NULL with errno = EINVAL (bad conf, logged) or ENOMEM.
 */
struct sg_dp_engine *sg_dp_engine_create(const struct sg_dp_engine_conf *conf);

/** Destroy an engine, its jobs and its pool. NULL is fine. */
void sg_dp_engine_destroy(struct sg_dp_engine *eng);

/**
 * Add a job. Keys must be distinct, each at most partition_bytes and at most
 * 2^32-1 bytes; chunk_bytes must be a multiple of 8 and of the dtype size and
 * at most the engine's max_payload.
 * @return 0, -EINVAL (bad conf, logged), -EEXIST (job id in use), -ENOSPC
 *         (max_jobs reached) or -ENOMEM.
 */
int sg_dp_engine_add_job(struct sg_dp_engine *eng, const struct sg_dp_job_conf *conf);

/**
 * Remove a job and release its buffers. Packets for it are then dropped as
 * SG_DP_DROP_JOB. @return 0 or -ENOENT.
 */
int sg_dp_engine_remove_job(struct sg_dp_engine *eng, uint32_t job_id);

/**
 * Handle one UDP payload.
 * @param pkt  the Sigma header and payload (any alignment), not kept after return
 * @param len  bytes at @p pkt
 * @param src  the sender's address, opaque to the engine (replies go to it)
 * @param now  monotonic time in ns
 * @return 0 when the packet was used (aggregated or answered, NACKs included),
 *         -EBADMSG when it was dropped (counted under its reason; JOIN is
 *         "dropped" as SG_DP_DROP_JOIN so that the caller may pass it on).
 */
int sg_dp_engine_rx(struct sg_dp_engine *eng, const void *pkt, uint32_t len, uint64_t src,
		    uint64_t now);

/**
 * Report slots that have collected for longer than slot_timeout_ns: each is
 * counted, logged once at ERROR level with its missing ranks, and every worker
 * that has pushed it gets an ERROR (code WORKER_LOST) naming them. The slot
 * stays open: it completes if the missing pushes still arrive, and it is never
 * completed with fewer than N inputs. Call it every millisecond or so.
 * @return number of slots reported by this call.
 */
int sg_dp_engine_poll(struct sg_dp_engine *eng, uint64_t now);

/** Copy the engine's counters into @p st. */
void sg_dp_engine_stats(const struct sg_dp_engine *eng, struct sg_dp_stats *st);

/** Bytes of accumulator buffer the engine's pool holds per buffer. */
uint32_t sg_dp_engine_buf_size(const struct sg_dp_engine *eng);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_ENGINE_H */
