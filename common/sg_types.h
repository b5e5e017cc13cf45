/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma's shared vocabulary: the element types, job modes, lcore roles, idle
 * policies, node kinds and limits that the wire protocol, the dataplane, the
 * control plane and the worker library all speak. One definition of each:
 * modules include this header instead of keeping copies (copies drifted into
 * bugs: a deterministic job could not be created over RPC, and job_create
 * took 4096 workers where the engine takes 64).
 *
 * A leaf: it includes nothing but the C library, so that the installed
 * worker header (sigma.h) can include it. The name tables are in
 * sg_types.c (library sg_types, no dependencies).
 */
#ifndef SG_TYPES_H
#define SG_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types (values are wire-stable: the header's dtype field). */
enum sg_dtype {
	SG_DTYPE_FP32 = 0,
	SG_DTYPE_FP64 = 1,
	SG_DTYPE_FP16 = 2,
	SG_DTYPE_BF16 = 3,
	SG_DTYPE_INT32 = 4,
	SG_DTYPE_INT64 = 5,
	SG_DTYPE_INT8 = 6,
	SG_DTYPE_UINT8 = 7,
	SG_DTYPE_COUNT,
	/**
	 * Not an element type: the dtype of an open job (docs/control.md, "Open
	 * jobs") whose keys each take the dtype of their first push. Never in a
	 * header's dtype field; sg_dtype_valid() and sg_dtype_size() refuse it.
	 */
	SG_DTYPE_ANY = 0xff
};

/** True if @p dt is a valid dtype value. */
static inline bool sg_dtype_valid(unsigned int dt)
{
	return dt < SG_DTYPE_COUNT;
}

/** Size in bytes of one element, or 0 for an unknown dtype. */
size_t sg_dtype_size(enum sg_dtype dt);

/** Name of a dtype ("fp32", "bf16", ...; "any" for SG_DTYPE_ANY), or "unknown". */
const char *sg_dtype_name(enum sg_dtype dt);

/** Parse an element type's name (any case); -EINVAL if unknown or NULL ("any" too). */
int sg_dtype_from_name(const char *name, enum sg_dtype *dt);

/**
 * Parse a job's dtype: an element type's name, or "any" (SG_DTYPE_ANY, which
 * only an open job takes). -EINVAL if unknown or NULL.
 */
int sg_job_dtype_from_name(const char *name, enum sg_dtype *dt);

/** How a job's rounds are summed (docs/protocol.md, "Modes"). */
enum sg_mode {
	SG_MODE_SYNC = 0,   /**< RESULT = sum of the N pushes of a round (default) */
	SG_MODE_ASYNC = 1,  /**< store += each push; each push answered with the store */
	SG_MODE_DETERM = 2, /**< like sync, summed in rank order: bitwise reproducible */
	SG_MODE_COUNT
};

/** "sync", "async", "deterministic", or "unknown". */
const char *sg_mode_name(enum sg_mode mode);

/** Parse a mode name ("sync", "async", "deterministic" or "determ", any case); -EINVAL. */
int sg_mode_from_name(const char *name, enum sg_mode *mode);

/** What an lcore does. The values are bits: an rtc lcore is both io and reduce. */
enum sg_role {
	SG_ROLE_IO = 1,      /**< RX/TX: classify and hand off */
	SG_ROLE_REDUCE = 2,  /**< sums the keys it owns */
	SG_ROLE_RTC = 3,     /**< run to completion: RX, sum and TX */
	SG_ROLE_CONTROL = 4, /**< the main / control lcore */
};

/** What an lcore does when its queues are empty. */
enum sg_idle {
	SG_IDLE_POLL = 0,  /**< busy-poll (a dedicated appliance; the config calls it "busy") */
	SG_IDLE_SLEEP = 1, /**< back off, then sleep (a GPU machine's spare cores) */
};

/** What kind of machine a summation node runs on (BytePS's split). */
enum sg_node_kind {
	SG_NODE_CPU = 0, /**< dedicated CPU machine (no worker on it) */
	SG_NODE_GPU = 1, /**< GPU machine's spare cores (a worker runs there too) */
};

/** "cpu", "gpu" or "unknown". */
const char *sg_node_kind_name(enum sg_node_kind kind);

/**
 * A role's name, as the control plane's answers (docs/control.md), sigmad's
 * telemetry and its logs give it: "io", "reducer", "rtc", "control" or "unknown".
 * (sigmad's `[layout]` keys and options name the lists: io, reduce, rtc.)
 */
const char *sg_role_name(enum sg_role role);

/** Parse "cpu" or "gpu"; -EINVAL otherwise (NULL too). */
int sg_node_kind_from_name(const char *name, enum sg_node_kind *kind);

/** Most workers of a job: a round's arrivals are one 64-bit bitmap of ranks. */
#define SG_MAX_WORKERS 64
/** Largest chunk_bytes of a job: a 9000-byte IP MTU's payload rounded down to 8. */
#define SG_MAX_CHUNK_BYTES 8920
/** Default partition size in bytes (BytePS's BYTEPS_PARTITION_BYTES default). */
#define SG_PARTITION_BYTES_DEFAULT 4096000u
/** Largest partition the control plane creates (BytePS's 4 MB bound). */
#define SG_MAX_PARTITION_BYTES (4u << 20)
/** Most summation nodes of a job (and of a worker's session). */
#define SG_MAX_NODES 64
/**
 * Buckets a summation node hashes keys to: the size of its keymap, which sends a
 * bucket to a reducer (docs/protocol.md, "Reducer steering"; docs/control.md).
 */
#define SG_BUCKETS 64
/** Longest node name, with the NUL. */
#define SG_NAME_MAX 64
/** Most tensors of a job (the high 16 bits of a wire key). */
#define SG_MAX_TENSORS 65536
/** Most partitions of one tensor (the low 16 bits of a wire key). */
#define SG_MAX_PARTS 65536
/**
 * Chunk slots an open job may create on one aggregation engine (one reducer),
 * unless its creator asks for another number: 262144 (2 GiB of fp32 gradients
 * in 8920-byte chunks; about 22 MiB of reserved tables per engine).
 */
#define SG_OPEN_SLOTS_DEFAULT 262144u
/** Most chunk slots an open job may ask for, per engine. */
#define SG_OPEN_SLOTS_MAX (1u << 24)

/**
 * Wire key of partition @p part of tensor @p tensor: the tensor in the high 16
 * bits. Every party numbers keys so: libsigma, jobs made by the control plane,
 * sigma-bench; a `[job N]` section's keys 0..K-1 are the partitions of tensor 0.
 */
static inline uint32_t sg_wire_key(uint32_t tensor, uint32_t part)
{
	return (tensor << 16) | part;
}

#ifdef __cplusplus
}
#endif

#endif /* SG_TYPES_H */
