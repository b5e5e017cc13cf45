/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A summation node in one thread over kernel UDP (tests, benchmarks, and
 * machines without DPDK), wrapping the aggregation engine of dataplane/.
 * Not part of the installed worker API (sigma.h): it links the engine and
 * summation, not libsigma. Tests and sigma-bench start it with the jobs a
 * session's tensors give each node (libsigma's sigma_job_for_node(),
 * client/sigma_job_conf.h).
 *
 * Every function returns 0 (or a count) on success and -errno on failure;
 * constructors return NULL and set errno.
 */
#ifndef SIGMA_UDPD_H
#define SIGMA_UDPD_H

#include <stdint.h>

#include "sg_dp_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Configuration of a kernel-UDP node. */
struct sigma_udpd_conf {
	const char *addr;              /**< address to bind (default 127.0.0.1) */
	uint16_t port;                 /**< 0: ephemeral (see sigma_udpd_port()) */
	struct sg_dp_engine_conf engine; /**< engine settings (tx ops are filled in) */
	uint32_t drop_rx_permille;     /**< loss injection: drop this share of received packets */
	uint32_t drop_tx_permille;     /**< loss injection: drop this share of sent packets */
	uint32_t seed;                 /**< loss injection PRNG seed */
	bool no_gso;                   /**< one reply per message (default: replies of one length
					    to one worker in a burst leave in one UDP_SEGMENT
					    message, as sigmad's [socket] gso) */
	/**
	 * After a burst of at most SIGMA_UDPD_SPIN_BURST datagrams (light traffic:
	 * small push_pulls, where a wake-up per burst would cost more than the
	 * work), poll the socket, yielding the CPU between polls, until this
	 * long after that burst, then sleep in poll(). 0: the default, SIGMA_SPIN_US_DEFAULT
	 * (200 us); negative: never; at most 1 s (sigma_udpd_create(): EINVAL).
	 */
	int32_t spin_us;
	/**
	 * Offer shared memory to workers of this machine (SIGMA_TRANSPORT_SHM):
	 * a Unix socket (SOCK_SEQPACKET, mode 0600; put it in a private folder)
	 * made at this path, replaced if one is there, removed at stop. NULL:
	 * none. Each worker that connects gets its own channel (sg_shm.h).
	 */
	const char *shm_path;
	uint32_t shm_max; /**< channels at once (0: 64; at most 1024); more are refused */
};

/** sigma_udpd_conf.shm_max's default. */
#define SIGMA_UDPD_SHM_MAX 64

/** sigma_udpd_conf.spin_us polls only after bursts of at most this many datagrams. */
#define SIGMA_UDPD_SPIN_BURST 16

/** A node's messages and datagrams each way (UDP_GRO and UDP_SEGMENT at work). */
struct sigma_udpd_io {
	uint64_t rx_msgs, rx_dgrams; /**< received: messages, and the datagrams they held */
	uint64_t tx_msgs, tx_dgrams; /**< sent: messages, and the datagrams they held */
	uint64_t tx_bufs;            /**< packets the engine wrote: a RESULT to several workers
					  is written once and sent to each with its own header */
	uint64_t spins;              /**< polls before sleeping (conf.spin_us) */
	/* shared memory (conf.shm_path) */
	uint64_t shm_open;           /**< channels open now */
	uint64_t shm_accepted;       /**< channels made */
	uint64_t shm_refused;        /**< connections refused: shm_max channels open, no memory,
					  or the worker gone before its hello */
	uint64_t shm_closed;         /**< channels freed: the worker hung up or sent garbage */
	uint64_t shm_garbage;        /**< ... of them, because it wrote to the socket */
	uint64_t shm_rx, shm_tx;     /**< datagrams taken from the rings, put into them */
	uint64_t shm_tx_full;        /**< replies dropped: the worker's ring was full */
	uint64_t shm_tx_stale;       /**< replies dropped: their channel is gone */
	uint64_t shm_bad_len;        /**< records of a bad length (what followed was skipped) */
	uint64_t shm_wakeups;        /**< eventfd writes to sleeping workers */
	uint64_t rx_overflows;       /**< datagrams the kernel dropped at the node's socket, its
					  receive buffer full (sg_udp_rx_overflows()) */
};

struct sigma_udpd;

/**
 * Create a node and bind its socket (it does not run yet).
 * @return the node, or NULL with errno (EINVAL, ENOMEM, socket errors).
 */
struct sigma_udpd *sigma_udpd_create(const struct sigma_udpd_conf *conf);

/** UDP address the node is bound to (network order). */
uint32_t sigma_udpd_ipv4(const struct sigma_udpd *d);

/** UDP port the node is bound to. */
uint16_t sigma_udpd_port(const struct sigma_udpd *d);

/** Add a job to the node's engine (allowed while running). @return as sg_dp_engine_add_job(). */
int sigma_udpd_add_job(struct sigma_udpd *d, const struct sg_dp_job_conf *job);

/** Add keys to a fixed job (allowed while running). @return as sg_dp_engine_add_keys(). */
int sigma_udpd_add_keys(struct sigma_udpd *d, uint32_t job, const struct sg_dp_key *keys,
			uint32_t n);

/** Remove a job (allowed while running). @return as sg_dp_engine_remove_job(). */
int sigma_udpd_remove_job(struct sigma_udpd *d, uint32_t job);

/** Copy job @p job's counters. @return 0 or -ENOENT. */
int sigma_udpd_job_stats(struct sigma_udpd *d, uint32_t job, struct sg_dp_job_stats *st);

/** sg_dp_engine_job_lateness() of the node's engine. @return 0 or -ENOENT. */
int sigma_udpd_job_lateness(struct sigma_udpd *d, uint32_t job, struct sg_late *out);

/** The largest chunk_bytes a job may use on this node (the engine's max_payload). */
uint32_t sigma_udpd_max_payload(struct sigma_udpd *d);

/**
 * Start the node's thread (and, with conf.shm_path, the thread that accepts
 * workers and makes their shared-memory channels). The node's receive and send
 * buffers are written once first (sg_sum_populate()), so that a fork() since
 * sigma_udpd_create() costs its page copies now, not in the first operations; the
 * engine's pool is not inherited by a child at all (sg_sum_pool_create()).
 * @return 0 or -errno: EINVAL (already started, or stopped), pthread_create()'s.
 */
int sigma_udpd_start(struct sigma_udpd *d);

/**
 * Stop the threads and close the socket (the node disappears: packets sent to
 * its port go unanswered), close every shared-memory channel and remove the
 * shm socket. Stats stay readable. Idempotent.
 */
void sigma_udpd_stop(struct sigma_udpd *d);

/** Copy the engine's counters (consistent snapshot). */
void sigma_udpd_stats(struct sigma_udpd *d, struct sg_dp_stats *st);

/** Fraction of wall time the node's thread spent handling packets since start (0..1). */
double sigma_udpd_busy(struct sigma_udpd *d);

/** Copy the node's message and datagram counters (since create). */
void sigma_udpd_io_stats(struct sigma_udpd *d, struct sigma_udpd_io *io);

/** Stop (if running) and free. NULL is fine. */
void sigma_udpd_destroy(struct sigma_udpd *d);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_UDPD_H */
