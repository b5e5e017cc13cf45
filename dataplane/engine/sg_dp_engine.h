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
 *
 * Open jobs (sg_dp_job_conf.open): the job comes without keys; a PUSH that
 * names a key the job does not have, and passes the job, token and rank
 * checks, makes the key if its header holds together (chunk < nchunks,
 * offset == chunk * chunk_bytes, the job's dtype unless the job's is any,
 * full chunks but the last, the key within partition_bytes) and the job's
 * slot budget has room for its chunks; ERROR MISMATCH or FULL otherwise.
 * The tables for the whole budget are reserved at add_job: making a key
 * allocates nothing. docs/dataplane-engine.md, "Open jobs".
 */
#ifndef SG_DP_ENGINE_H
#define SG_DP_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "sg_dp_proto.h"
#include "sg_late.h"
#include "sg_sum.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One destination of a fanned-out RESULT (sg_dp_tx_ops.send_multi). */
struct sg_dp_tx_dest {
	uint64_t dest; /**< the worker's opaque address (as given to rx) */
	uint16_t rank; /**< its rank: the header's rank field of the copy sent to it */
};

/**
 * Packet output. The engine builds each packet in place: alloc() gives it a
 * buffer of at least @p len bytes for the UDP payload, the engine writes the
 * Sigma header and payload there, then hands it back with send(). One packet
 * is in the engine's hands at a time (alloc, fill, send), so a caller may
 * reuse one scratch buffer. A DPDK caller returns the data area of a fresh
 * mbuf (behind room for Ethernet/IPv4/UDP headers) and keeps the mbuf in
 * @p pkt, so the payload is written exactly once.
 *
 * Fan-out (optional: set both alloc_multi and send_multi, or neither). When a
 * round completes, the same RESULT payload goes to all N workers; only the
 * header's rank field differs. With these ops the engine writes the header
 * and the payload once, and the caller sends it N times: a DPDK caller builds
 * one payload mbuf and N small header mbufs chained to it (refcount N), so
 * the payload is neither narrowed nor copied N times. Without them, or when
 * alloc_multi returns NULL, the engine sends N packets through alloc/send.
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
	/** Transmit the packet from alloc() to @p dest (alloc()'s); @p len bytes were
	 *  written. */
	void (*send)(void *ctx, uint64_t dest, void *pkt, uint32_t len);
	/**
	 * Optional: a buffer for one RESULT of @p len bytes that will go to the
	 * @p n (>= 2) destinations @p to (valid until send_multi returns).
	 * @return writable buffer, or NULL to have the engine fall back to n
	 *         alloc/send pairs for this RESULT
	 */
	void *(*alloc_multi)(void *ctx, const struct sg_dp_tx_dest *to, unsigned int n,
			     uint32_t len, void **pkt);
	/**
	 * Optional: send the packet from alloc_multi() to each of @p to[0..n-1].
	 * The buffer holds the header with to[0].rank; copy i must carry
	 * to[i].rank (sg_dp_hdr_set_rank()). The packet and its buffer are the
	 * caller's again when this returns.
	 * @return copies queued; the others are counted in tx_fail
	 */
	unsigned int (*send_multi)(void *ctx, void *pkt, uint32_t len,
				   const struct sg_dp_tx_dest *to, unsigned int n);
	/**
	 * Optional: the packet that sg_dp_engine_rx() is handling, from @p src,
	 * passed every check of its job (job id, token, rank, key, chunk,
	 * offset, dtype, and nelem for a PUSH), so replies to its rank go to
	 * @p src from now on. Called once per such packet, before the engine
	 * replies to it or to anyone else because of it; never for a packet
	 * dropped before those checks end (garbage, an unknown job, a wrong
	 * token). A transport that needs more than the 64-bit address to reach
	 * a worker (an Ethernet MAC) learns it here, so that nothing unchecked
	 * enters its tables.
	 */
	void (*accept)(void *ctx, uint64_t src);
	/**
	 * Optional: the checksum (sg_sum.h) of the elements of the RESULT in the
	 * buffer of @p pkt (the bytes after its header), which the engine summed
	 * as it wrote them. Called once per RESULT buffer, after the elements are
	 * written and before send() or send_multi(). A transport that fills in
	 * UDP checksums in software adds the headers' sums to it instead of
	 * reading the elements again.
	 */
	void (*payload_csum)(void *ctx, void *pkt, uint16_t csum);
	void *ctx;
};

/** Engine configuration. Zero fields take the documented defaults. */
struct sg_dp_engine_conf {
	int numa_node;            /**< pool's NUMA node; -1 = the calling thread's node */
	uint32_t pool_bufs;       /**< accumulator buffers (default 4096) */
	uint32_t max_payload;     /**< largest chunk_bytes of any job: multiple of 8, default
				   1424, at most SG_MAX_CHUNK_BYTES */
	uint32_t max_jobs;        /**< jobs at once (default 16, max 1024) */
	uint64_t slot_timeout_ns; /**< incomplete slot reported after this (default 1 s) */
	uint64_t shadow_hold_ns;  /**< kept result reclaimable after this (default 100 ms) */
	/**
	 * A rank whose moving average lateness (sg_dp_engine_job_lateness()) passes
	 * this is logged at WARNING, naming it, once, and again only after it fell
	 * under half of it; at most one such line per job per second (default 10 ms;
	 * UINT64_MAX: never)
	 */
	uint64_t late_log_ns;
	struct sg_dp_tx_ops tx;   /**< packet output (alloc and send are required; the
				   multi pair is optional) */
};

/** One partition (key) of a job. */
struct sg_dp_key {
	uint32_t id;    /**< key as it appears on the wire */
	uint32_t nelem; /**< elements in the partition (> 0) */
};

/** Job configuration. Zero fields take the documented defaults. */
struct sg_dp_job_conf {
	uint32_t id;              /**< job id on the wire */
	uint32_t nworkers;        /**< N, 1..SG_MAX_WORKERS */
	uint64_t token;           /**< session token every packet must carry */
	/**
	 * Element type of every key; an open job may take SG_DTYPE_ANY: each key
	 * then has the dtype of its first push
	 */
	enum sg_dtype dtype;
	enum sg_mode mode;     /**< sync (default), async or deterministic */
	unsigned int sum_flags;   /**< 0 (fp16/bf16 summed in fp32) or SG_SUM_F_NATIVE */
	uint32_t partition_bytes; /**< largest key in bytes (default SG_PARTITION_BYTES_DEFAULT) */
	uint32_t chunk_bytes;     /**< payload bytes per chunk, multiple of 8 (default 1424) */
	uint32_t max_inflight;    /**< slots collecting at once (default: pool_bufs / 2) */
	const struct sg_dp_key *keys; /**< the job's partitions (copied); NULL for an open job */
	uint32_t nkeys;           /**< number of keys, > 0; 0 for an open job */
	bool open;                /**< an open job: its first valid pushes make its keys */
	/**
	 * Open job: chunk slots its keys may take on this engine, 1..SG_OPEN_SLOTS_MAX
	 * (0: SG_OPEN_SLOTS_DEFAULT). Each costs 88 bytes of tables reserved at add_job
	 * (touched as keys take slots), plus 4 * nworkers in async mode.
	 */
	uint32_t slots;
	/**
	 * auth = mac (docs/protocol.md, "Authenticated datagrams"): the job's
	 * SG_AUTH_KEY_BYTES key (read at add_job only; NULL: no auth). Every PUSH
	 * and PULL must then carry a trailer whose MAC verifies under its rank's
	 * key, checked right after the token and rank and before anything else of
	 * the job is touched (drops auth_short, auth_job, auth_bad, auth_replay;
	 * without the trailer, or with one to a job without auth: ERROR MISMATCH
	 * and auth_mismatch), and every reply carries one under the node's key for
	 * that rank. chunk_bytes + SG_DP_MAC_TRAILER must fit max_payload.
	 */
	const uint8_t *auth_key;
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
	uint64_t errors_sent;       /**< ERROR packets emitted (WAITING not included) */
	uint64_t slot_timeouts;     /**< slots reported incomplete after slot_timeout_ns */
	uint64_t incomplete_slots;  /**< gauge: timed-out slots still incomplete now */
	uint64_t slots_active;      /**< gauge: slots collecting now */
	uint64_t shadows_reclaimed; /**< kept results released early under pool pressure */
	uint64_t stale_rounds;      /**< first rounds dropped unfinished: a push of a later
				     round showed they had finished on another engine */
	uint64_t pool_free;         /**< gauge: free accumulator buffers */
	uint64_t tx_fail;           /**< packets not sent because tx alloc returned NULL */
	uint64_t keys_created;      /**< keys open jobs' pushes made */
	uint64_t waits_sent;        /**< ERROR WAITING emitted: resends of a push that a
				         collecting slot holds, answered (sg_dp_engine_rx()) */
};

/**
 * Counters of one job (sg_dp_engine_job_stats()): the share of struct
 * sg_dp_stats that a job's packets caused. Packets dropped before their job
 * is known (malformed header, unknown job id) count only engine-wide.
 */
struct sg_dp_job_stats {
	uint64_t rx_packets;        /**< packets that named this job (well-formed header) */
	uint64_t rx_pushes;         /**< pushes aggregated (each counted once) */
	uint64_t rx_pulls;          /**< PULL requests accepted */
	uint64_t drops;             /**< this job's packets dropped, all reasons */
	uint64_t drops_by[SG_DP_DROP_COUNT]; /**< ... by reason */
	uint64_t rounds_completed;  /**< slot rounds that got all N pushes */
	uint64_t results_sent;      /**< RESULT packets emitted */
	uint64_t retransmits_served; /**< RESULTs resent for a finished round */
	uint64_t nacks_sent;        /**< NACKs emitted */
	uint64_t errors_sent;       /**< ERRORs emitted (WAITING not included) */
	uint64_t slot_timeouts;     /**< slots reported incomplete after slot_timeout_ns */
	uint64_t incomplete_slots;  /**< gauge: timed-out slots still incomplete now */
	uint64_t slots_active;      /**< gauge: slots collecting now */
	uint64_t tx_fail;           /**< packets for this job not sent (tx alloc failed) */
	uint64_t keys;              /**< gauge: keys the job has here (an open job: made so far) */
	uint64_t slots_used;        /**< gauge: chunk slots its keys take */
	uint64_t slots;             /**< gauge: chunk slots it may take (a fixed job's: its
				         chunks; an open job's: its budget) */
	uint64_t waits_sent;        /**< ERROR WAITING emitted */
	uint64_t rx_bytes;          /**< payload bytes of the pushes aggregated (rx_pushes') */
};

/**
 * Bits of a non-negative sg_dp_engine_rx() return: what the engine did with a
 * packet it used. A caller can count summed bytes without reading counters.
 */
enum sg_dp_rx_used {
	SG_DP_USED_SUMMED = 1 << 0,    /**< a push was added to a sum (counted in rx_pushes) */
	SG_DP_USED_COMPLETED = 1 << 1, /**< ... and completed its round: RESULTs to all N */
	SG_DP_USED_REPLIED = 1 << 2,   /**< the sender got a reply: a kept or async RESULT,
					    an ERROR, or a NACK (then USED_NACKED too) */
	SG_DP_USED_NACKED = 1 << 3,    /**< refused for lack of buffers or slots; NACK sent */
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
 * at most the engine's max_payload. An open job has no keys (keys NULL, nkeys
 * 0) and a slot budget of at most SG_OPEN_SLOTS_MAX; its tables are reserved
 * here.
 * @return 0, -EINVAL (bad conf, logged), -EEXIST (job id in use), -ENOSPC
 *         (max_jobs reached) or -ENOMEM.
 */
int sg_dp_engine_add_job(struct sg_dp_engine *eng, const struct sg_dp_job_conf *conf);

/**
 * Add keys to fixed job @p job_id: a node's share of a job grows when a lost
 * node's keys move to it (docs/cluster.md, "Jobs in etcd"). Keys the job
 * already has are skipped; the others are checked as add_job checks a job's
 * keys and get fresh slots, so that each key's first push opens whatever round
 * it carries (as a new key of an open job). The job's tables are reallocated
 * (this allocates: a control message, off the data path); its rounds in flight
 * and kept results stay. Same thread as rx.
 * @return keys added (>= 0), -ENOENT (no such job), -EINVAL (an open job, whose
 *         pushes make keys; a key of 0 elements or over partition_bytes, or one
 *         given twice: logged; nothing added), -ENOMEM (nothing added).
 */
int sg_dp_engine_add_keys(struct sg_dp_engine *eng, uint32_t job_id, const struct sg_dp_key *keys,
			  uint32_t n);

/**
 * Remove a job and release its buffers. Packets for it are then dropped as
 * SG_DP_DROP_JOB. @return 0 or -ENOENT.
 */
int sg_dp_engine_remove_job(struct sg_dp_engine *eng, uint32_t job_id);

/**
 * Forget the rounds of some keys of job @p job_id: every chunk slot of each
 * key for which @p pick returns true gives back its accumulator and kept
 * result (counters and gauges follow: an open slot stops counting as active
 * or incomplete) and starts afresh, so that its next push opens whatever
 * round it carries. For a key that moved to another engine and comes back:
 * call it once the keys' packets no longer reach this engine, before they
 * come back. Same thread as rx.
 * @return slots that held a round (>= 0), or -ENOENT if the engine has no such job.
 */
int sg_dp_engine_release_keys(struct sg_dp_engine *eng, uint32_t job_id,
			      bool (*pick)(void *arg, uint32_t job, uint32_t key), void *arg);

/**
 * Call @p fn(@p arg, key, nchunks) for each key job @p job_id has on this
 * engine (an open job: the keys its pushes made so far), in the order their
 * slots lie. Same thread as rx.
 * @return the number of keys, or -ENOENT if the engine has no such job.
 */
int sg_dp_engine_job_keys(const struct sg_dp_engine *eng, uint32_t job_id,
			  void (*fn)(void *arg, uint32_t key, uint32_t nchunks), void *arg);

/**
 * Handle one UDP payload.
 * @param pkt  the Sigma header and payload (any alignment), not kept after return
 * @param len  bytes at @p pkt
 * @param src  the sender's address, opaque to the engine (replies go to it)
 * @param now  monotonic time in ns
 * @return a positive mask of enum sg_dp_rx_used when the packet was used
 *         (aggregated or answered, NACKs included; a reply whose tx alloc
 *         failed still counts as REPLIED, see tx_fail), or -EBADMSG when it
 *         was dropped (counted under its reason; JOIN is "dropped" as
 *         SG_DP_DROP_JOIN so that the caller may pass it on). Never 0.
 */
int sg_dp_engine_rx(struct sg_dp_engine *eng, const void *pkt, uint32_t len, uint64_t src,
		    uint64_t now);

/**
 * sg_dp_engine_rx() for a UDP datagram whose checksum is still to be checked
 * in software. @p csum is the checksum (sg_sum.h) of what the UDP checksum
 * covers before @p pkt: the pseudo-header and the UDP header, checksum field
 * included. The datagram is intact when it and @p pkt's add up to 0xffff.
 *
 * A push that a slot is collecting is checked in the pass that sums its
 * elements (sg_sum_acc_*_csum_unchecked()): a later arrival is summed into a
 * spare pool buffer that replaces the accumulator only if the checksum holds.
 * Any other packet is checked with a pass of its own before the engine acts
 * on it or counts it dropped.
 *
 * @return as sg_dp_engine_rx(), or -EILSEQ for a damaged datagram: nothing
 *         changed, no reply, and no counter (rx_packets included) counts it;
 *         the caller does (sigmad: the udp_csum drop).
 */
int sg_dp_engine_rx_csum(struct sg_dp_engine *eng, const void *pkt, uint32_t len, uint64_t src,
			 uint64_t now, uint16_t csum);

/**
 * Report slots that have collected for longer than slot_timeout_ns: each is
 * counted, logged once at ERROR level with its missing ranks, and every worker
 * that has pushed it gets an ERROR (code WORKER_LOST) naming them. A rank that
 * resends its push of such a slot is told again at most once per
 * slot_timeout_ns (its other resends are dropped as duplicates). The slot
 * stays open: it completes if the missing pushes still arrive, and it is never
 * completed with fewer than N inputs. Call it every millisecond or so.
 * @return number of slots reported by this call.
 */
int sg_dp_engine_poll(struct sg_dp_engine *eng, uint64_t now);

/**
 * Copy the lateness of job @p job_id's ranks (sg_late.h) into @p out: per rank,
 * for each push summed here, the time from the first push of its round (of that
 * chunk) to it, as a histogram, a sum and a moving average, and the rounds it
 * came last in; out->rounds is the rounds completed. Pushes into a round
 * reported late (slot_timeout_ns) count a lower bound: the slot timeout plus
 * the time since the last report. An async job has no rounds: its table stays
 * 0. Entries past the job's N are zeroed. Same thread as rx.
 * @return 0, or -ENOENT if the engine has no such job.
 */
int sg_dp_engine_job_lateness(const struct sg_dp_engine *eng, uint32_t job_id,
			      struct sg_late *out);

/** Copy the engine's counters into @p st. */
void sg_dp_engine_stats(const struct sg_dp_engine *eng, struct sg_dp_stats *st);

/**
 * Copy the counters of job @p job_id into @p st. Engine-wide totals
 * (sg_dp_engine_stats()) include every job's, removed jobs' too. Same thread
 * as rx, like every call here.
 * @return 0, or -ENOENT if the engine has no such job.
 */
int sg_dp_engine_job_stats(const struct sg_dp_engine *eng, uint32_t job_id,
			   struct sg_dp_job_stats *st);

/**
 * Ids of the engine's jobs, in no particular order: up to @p cap written to
 * @p ids. @return the number of jobs (which may exceed @p cap).
 */
unsigned int sg_dp_engine_jobs(const struct sg_dp_engine *eng, uint32_t *ids, unsigned int cap);

/** Bytes of accumulator buffer the engine's pool holds per buffer. */
uint32_t sg_dp_engine_buf_size(const struct sg_dp_engine *eng);

/** Largest chunk payload the engine takes (its conf's max_payload, the default applied). */
uint32_t sg_dp_engine_max_payload(const struct sg_dp_engine *eng);

/** Most jobs the engine holds at once (its conf's max_jobs, the default applied). */
uint32_t sg_dp_engine_max_jobs(const struct sg_dp_engine *eng);

/**
 * Copy every job's id and counters into the engine's own snapshot table
 * (max_jobs entries, allocated at create, so this allocates nothing). For a
 * control thread that cannot read a running engine: the engine's thread
 * takes the snapshot, the other reads it with sg_dp_engine_snapshot() once
 * told it is done. Same thread as rx. @return the number of jobs copied.
 */
unsigned int sg_dp_engine_jobs_snapshot(struct sg_dp_engine *eng);

/**
 * The table the last sg_dp_engine_jobs_snapshot() wrote: @p ids and @p st
 * point at its entries, in the same order, valid until the next snapshot.
 * @return the number of entries (0 before the first snapshot).
 */
unsigned int sg_dp_engine_snapshot(const struct sg_dp_engine *eng, const uint32_t **ids,
				   const struct sg_dp_job_stats **st);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_ENGINE_H */
