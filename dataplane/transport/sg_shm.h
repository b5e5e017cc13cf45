/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared memory between a worker (libsigma, SIGMA_TRANSPORT_SHM) and a
 * sigma-udpd node on the same machine (--shm PATH), used by both sides. Not
 * installed.
 *
 * A worker connects to the node's Unix socket (SOCK_SEQPACKET). The node
 * answers with one message, struct sg_shm_hello, carrying three fds
 * (SCM_RIGHTS): a memfd (sealed: it can neither shrink nor grow) holding two single-producer/single-consumer rings
 * (worker to node, node to worker) and two eventfds (the node's wake-up, the
 * worker's). A ring holds variable-length records: an 8-byte record header
 * (the datagram's length) and one Sigma datagram exactly as on UDP (48-byte
 * header and payload), padded to 8 bytes; a record that would cross the end
 * of the ring is preceded by a pad record and starts at offset 0, so that
 * every datagram is contiguous and handed on in place. The worker never
 * writes to the socket: anything it sends there is garbage, and its hang-up
 * frees the channel.
 *
 * Sleep and wake-up: a consumer that finds its ring empty sets the ring's
 * `sleeping` flag, checks the ring again, and only then sleeps in poll() on
 * its eventfd; a producer, after it published its records (head), reads the
 * flag and writes the consumer's eventfd only when it is set. Both pairs (a
 * store, then a load of the other's variable) are sequentially consistent,
 * so that one side at least sees the other's store: no wake-up is lost, and
 * no system call is made while both sides run.
 *
 * Each side writes every page of both rings once through its own mapping
 * when the channel is made (the node before its hello, the worker before its
 * first datagram; nothing else writes them yet): on the 2-vCPU VM a page's
 * first write through a new mapping cost 10-25 us (50 us per 9 KB datagram,
 * 60 times the copy; MAP_POPULATE and MADV_POPULATE_WRITE took half of that
 * at most), and a short job's datagrams each met fresh pages.
 */
#ifndef SG_SHM_H
#define SG_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/** "SGSH": the hello's magic. */
#define SG_SHM_MAGIC 0x53475348u
/** Layout version of the hello and the shared memory. */
#define SG_SHM_VERSION 1
/** Bytes of each ring's data: a 1 MB window of pushes, several times over. */
#define SG_SHM_RING_BYTES (4u << 20)
/** The record header before each datagram. */
#define SG_SHM_REC_HDR 8
/** A record length that says "skip to the ring's start". */
#define SG_SHM_PAD 0xffffffffu

/** The node's one message on the socket (the fds travel with it). */
struct sg_shm_hello {
	uint32_t magic;      /**< SG_SHM_MAGIC */
	uint16_t version;    /**< SG_SHM_VERSION */
	uint16_t udp_port;   /**< the node's UDP port: which of a session's nodes it is */
	uint32_t ipv4;       /**< the node's UDP address (network order) */
	uint32_t ring_bytes; /**< each ring's data bytes (a power of 2) */
	uint64_t mem_bytes;  /**< the memfd's size */
};

/** One ring's control words, each on its own cache line. */
struct sg_shm_ring_ctl {
	_Alignas(64) _Atomic uint64_t head; /**< bytes published by the producer */
	_Alignas(64) _Atomic uint64_t tail; /**< bytes released by the consumer */
	_Alignas(64) _Atomic uint32_t sleeping; /**< the consumer sleeps (or is about to) */
};

/** The memfd: both rings' control words, then each ring's data. */
struct sg_shm_layout {
	struct sg_shm_ring_ctl up;   /**< worker to node */
	struct sg_shm_ring_ctl down; /**< node to worker */
	_Alignas(4096) uint8_t data[]; /**< up's ring_bytes, then down's */
};

/** Bytes of the memfd for rings of @p ring_bytes. */
static inline uint64_t sg_shm_mem_bytes(uint32_t ring_bytes)
{
	return sizeof(struct sg_shm_layout) + 2 * (uint64_t)ring_bytes;
}

/** One side of one ring, in the private memory of its process. */
struct sg_shm_ring {
	struct sg_shm_ring_ctl *ctl;
	uint8_t *data;
	uint32_t size;    /* a power of 2 */
	uint32_t max_len; /* longest datagram taken */
	uint64_t pos;     /* producer: head written, not yet published; consumer: tail read */
	uint64_t limit;   /* producer: tail + size last seen; consumer: head last seen */
	int efd;          /* the consumer's eventfd */
};

/** Set @p r up on ring @p ctl with @p size bytes at @p data; @p efd wakes its consumer. */
void sg_shm_ring_init(struct sg_shm_ring *r, struct sg_shm_ring_ctl *ctl, uint8_t *data,
		      uint32_t size, uint32_t max_len, int efd);

/**
 * Producer: room for a datagram of @p len bytes, written and not yet visible.
 * @return where to write it, or NULL when the ring has no room (or @p len is
 *         0 or above max_len): the datagram counts as lost.
 */
uint8_t *sg_shm_put(struct sg_shm_ring *r, uint32_t len);

/**
 * Producer: make what sg_shm_put() wrote visible, and wake the consumer if it
 * sleeps. @return true if it wrote the eventfd.
 */
bool sg_shm_publish(struct sg_shm_ring *r);

/**
 * Consumer: the next datagram (valid until sg_shm_release()), or NULL when the
 * ring is empty. A record whose length is out of bounds makes the consumer
 * skip everything published so far: @p bad (if not NULL) is incremented.
 */
const uint8_t *sg_shm_get(struct sg_shm_ring *r, uint32_t *len, uint64_t *bad);

/** Consumer: give back to the producer every record sg_shm_get() returned. */
void sg_shm_release(struct sg_shm_ring *r);

/** Consumer: anything published not yet taken? */
static inline bool sg_shm_pending(const struct sg_shm_ring *r)
{
	return atomic_load_explicit(&r->ctl->head, memory_order_acquire) != r->pos;
}

/**
 * Consumer: about to sleep: set the flag and look again.
 * @return true if the ring is still empty (sleep; sg_shm_awake() after), false
 *         if a record came meanwhile (the flag is cleared again).
 */
bool sg_shm_sleep_prepare(struct sg_shm_ring *r);

/** Consumer: awake again: clear the flag and drain the eventfd. */
void sg_shm_awake(struct sg_shm_ring *r);

/**
 * A worker's side of the set-up: take the node's hello and its three fds
 * (memfd, the node's eventfd, the worker's) from @p sock, waiting up to
 * @p timeout_ms.
 * @return 0 with every fd valid (the caller's to close) and the hello's magic
 *         and version checked, or -errno: ETIMEDOUT (nothing came),
 *         ECONNRESET (the node hung up: it refused the channel), EPROTO (not
 *         a Sigma node's hello, or another version; no fd kept), recvmsg's.
 */
int sg_shm_hello_recv(int sock, int timeout_ms, struct sg_shm_hello *h, int fds[3]);

/**
 * Map a channel's memfd of @p mem_bytes with rings of @p ring_bytes.
 * @return the layout, or NULL with errno (EINVAL: sizes that do not fit, a
 *         memfd of another size, or one not sealed against shrinking).
 */
struct sg_shm_layout *sg_shm_map(int memfd, uint64_t mem_bytes, uint32_t ring_bytes);

#endif /* SG_SHM_H */
