/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma GPU-side staging: the machine topology, staging plans that follow
 * BytePS's two intra-machine principles, a checker for any plan, and the
 * backends that execute a plan.
 *
 * The two principles (BytePS, OSDI 2020, section 4.2):
 *  1. never copy GPU-to-GPU directly between GPUs that are not under the same
 *     PCIe switch (unless the copy goes over NVLink);
 *  2. keep as little traffic as possible on the PCIe switch-to-CPU link that
 *     the NIC shares.
 *
 * Flow: a topology (sg_gpu_topo_load() from a file, or sg_gpu_topo_discover()
 * from sysfs) and a partition size go into sg_gpu_plan_build(); the plan is a
 * list of steps, each with its source, destination and bytes.
 * sg_gpu_plan_check() reports principle violations and the bytes each link
 * carries. sg_gpu_exec_create() executes plans, on the CUDA backend when a GPU
 * works and on the host backend (GPUs emulated in host memory) otherwise.
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno. Functions that parse text take an error buffer and
 * write a one-line reason there ("file:line: reason" for files). Logs go to
 * the rte_log type "sigma.gpu".
 */
#ifndef SG_GPU_H
#define SG_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sg_sum.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Topology                                                                 */
/* ------------------------------------------------------------------------ */

#define SG_GPU_MAX_NODES 256   /**< sockets + root ports + switches + devices */
#define SG_GPU_MAX_GPUS 16     /**< GPUs per machine */
#define SG_GPU_MAX_NICS 16     /**< NICs per machine */
#define SG_GPU_MAX_NVLINKS 256 /**< NVLink edges (each with a link count) */
#define SG_GPU_NAME_LEN 32     /**< node names, including the NUL */

/** Kinds of topology node. */
enum sg_gpu_node_kind {
	SG_GPU_NODE_SOCKET = 0, /**< CPU socket = NUMA node; owns host memory */
	SG_GPU_NODE_ROOT,       /**< PCIe root port (inside a socket) */
	SG_GPU_NODE_SWITCH,     /**< PCIe switch (parent: root port or switch) */
	SG_GPU_NODE_GPU,        /**< GPU (parent: switch or root port) */
	SG_GPU_NODE_NIC,        /**< NIC (parent: switch or root port) */
	SG_GPU_NODE_NVSWITCH,   /**< NVSwitch (no PCIe parent; NVLinks only) */
	SG_GPU_NODE_KIND_COUNT
};

/** One node. Every node but sockets and NVSwitches has a PCIe parent. */
struct sg_gpu_node {
	enum sg_gpu_node_kind kind;
	char name[SG_GPU_NAME_LEN];
	int parent;     /**< node index of the PCIe parent, -1 for none */
	int numa;       /**< NUMA node (sockets: their own; others: inherited) */
	int index;      /**< GPUs and NICs: index among nodes of that kind */
	char pci[16];   /**< PCI address "dddd:bb:dd.f" or "" when unknown */
	unsigned gbps;  /**< NIC line rate in Gbit/s (0: unknown) */
};

/** An NVLink edge between two GPUs or a GPU and an NVSwitch. */
struct sg_gpu_nvlink {
	int a, b;       /**< node indices */
	unsigned count; /**< number of NVLink links bundled in this edge */
};

/** A machine. Plain data: callers may read every field. */
struct sg_gpu_topo {
	char name[64];
	unsigned nnodes;
	struct sg_gpu_node nodes[SG_GPU_MAX_NODES];
	unsigned nnvlinks;
	struct sg_gpu_nvlink nvlinks[SG_GPU_MAX_NVLINKS];
	unsigned ngpus;
	int gpu[SG_GPU_MAX_GPUS]; /**< node index of GPU i */
	unsigned nnics;
	int nic[SG_GPU_MAX_NICS]; /**< node index of NIC i */
	/** peer[i][j]: CUDA reports GPU i can access GPU j (discovery with CUDA only). */
	bool peer[SG_GPU_MAX_GPUS][SG_GPU_MAX_GPUS];
	bool have_peer_info; /**< peer[][] was filled from CUDA */
};

/** A new empty topology (calloc'd). @return NULL with errno set on failure. */
struct sg_gpu_topo *sg_gpu_topo_new(void);

/** Free a topology. NULL is fine. */
void sg_gpu_topo_free(struct sg_gpu_topo *t);

/** Name of a node kind as used in topology files ("gpu", "switch", ...). */
const char *sg_gpu_node_kind_name(enum sg_gpu_node_kind kind);

/**
 * Add a node. The parent must already exist and be of a kind that may have
 * children of this kind (socket > root > switch > switch|gpu|nic).
 * @return the new node's index, or -EINVAL (bad kind/parent/name, with a
 * reason in @p err), -EEXIST (name in use), -ENOSPC (table full).
 */
int sg_gpu_topo_add_node(struct sg_gpu_topo *t, enum sg_gpu_node_kind kind, const char *name,
			 int parent, char *err, size_t errlen);

/**
 * Add an NVLink edge between two GPUs, or a GPU and an NVSwitch; adding the
 * same pair again adds to its count.
 * @return 0, -EINVAL (with a reason in @p err) or -ENOSPC.
 */
int sg_gpu_topo_add_nvlink(struct sg_gpu_topo *t, int a, int b, unsigned count, char *err,
			   size_t errlen);

/** Index of the node named @p name, or -ENOENT. */
int sg_gpu_topo_find(const struct sg_gpu_topo *t, const char *name);

/**
 * Check the whole topology: parents, at least one GPU, every GPU and NIC
 * under a socket. @return 0 or -EINVAL with a reason in @p err.
 */
int sg_gpu_topo_validate(const struct sg_gpu_topo *t, char *err, size_t errlen);

/**
 * Parse a topology from text (format: docs/gpu-topology.md). @p origin names
 * the source in errors ("file.topo:12: unknown keyword 'gpux'").
 * @return the topology, or NULL with errno = EINVAL and the reason in @p err.
 */
struct sg_gpu_topo *sg_gpu_topo_parse(const char *text, const char *origin, char *err,
				      size_t errlen);

/** Read and parse a topology file. NULL with errno and @p err on failure. */
struct sg_gpu_topo *sg_gpu_topo_load(const char *path, char *err, size_t errlen);

/** Write @p t in the file format (parsing the output gives the same topology). */
int sg_gpu_topo_write(const struct sg_gpu_topo *t, FILE *out);

/**
 * Discover the local machine from sysfs under @p sysfs_root ("/" for the real
 * one; tests pass a fake tree: @p sysfs_root + "/sys/bus/pci/devices/..").
 * GPUs are NVIDIA devices of class 0x0302 or 0x0300; NICs are class 0x0200
 * or 0x0207. Switches and root ports come from the parent bridges in each
 * device's sysfs path; sockets from numa_node (-1 counts as node 0). GPUs are
 * numbered in PCI address order (CUDA's PCI_BUS_ID order).
 * @return the topology (possibly without GPUs), or NULL with errno and @p err.
 */
struct sg_gpu_topo *sg_gpu_topo_discover(const char *sysfs_root, char *err, size_t errlen);

/**
 * Add what CUDA and NVML know to a discovered topology: the peer-access
 * matrix and NVLink edges (to GPUs or NVSwitches). A no-op returning -ENODEV,
 * with the reason in @p err, when CUDA does not work here.
 */
int sg_gpu_topo_add_cuda_info(struct sg_gpu_topo *t, char *err, size_t errlen);

/** Number of NVLink links between node @p a and node @p b (0 if none). */
unsigned sg_gpu_topo_nvlinks(const struct sg_gpu_topo *t, int a, int b);

/**
 * True when GPUs @p ga and @p gb (GPU indices) can copy over NVLink: a direct
 * edge, or edges to a common NVSwitch.
 */
bool sg_gpu_topo_nvlink_path(const struct sg_gpu_topo *t, unsigned ga, unsigned gb);

/** Socket node index above node @p n, or -EINVAL. */
int sg_gpu_topo_socket_of(const struct sg_gpu_topo *t, int n);

/**
 * The switch closest to the socket above node @p n (the one whose uplink to
 * its root port is shared by everything below it), or -ENOENT if @p n hangs
 * directly off a root port.
 */
int sg_gpu_topo_top_switch(const struct sg_gpu_topo *t, int n);

/**
 * True when GPUs @p ga and @p gb share a PCIe switch (their lowest common
 * ancestor is a switch), i.e. a P2P copy between them stays below the CPU.
 */
bool sg_gpu_topo_same_switch(const struct sg_gpu_topo *t, unsigned ga, unsigned gb);

/* ------------------------------------------------------------------------ */
/* Plans                                                                    */
/* ------------------------------------------------------------------------ */

/** Kinds of step. A plan runs once per partition, steps in list order. */
enum sg_gpu_step_kind {
	SG_GPU_STEP_P2P = 0,  /**< GPU -> GPU copy while reducing (src grad/scratch -> dst) */
	SG_GPU_STEP_REDUCE,   /**< on one GPU: dst += src[0] + ... (fp32 accumulation) */
	SG_GPU_STEP_D2H,      /**< GPU -> host memory */
	SG_GPU_STEP_CPU_SUM,  /**< host: dst = src[0] + ... via summation/ */
	SG_GPU_STEP_H2H,      /**< host -> host memory on another socket */
	SG_GPU_STEP_PUSH,     /**< host -> NIC (to the summation service) */
	SG_GPU_STEP_PULL,     /**< NIC -> host (the global sum) */
	SG_GPU_STEP_H2D,      /**< host -> GPU */
	SG_GPU_STEP_BCAST,    /**< GPU -> GPU copy of the result */
	SG_GPU_STEP_KIND_COUNT
};

/** Memory a step reads or writes. */
enum sg_gpu_mem {
	SG_GPU_MEM_GRAD = 0, /**< GPU idx's gradient (the caller's tensor; in place) */
	SG_GPU_MEM_SCRATCH,  /**< GPU idx's scratch, slot 'slot' (partition-sized each) */
	SG_GPU_MEM_HOST,     /**< host staging buffer idx (partition-sized) */
	SG_GPU_MEM_NET,      /**< the summation service, through the NIC */
	SG_GPU_MEM_COUNT
};

/** Link class a copy step uses. */
enum sg_gpu_via {
	SG_GPU_VIA_NONE = 0, /**< no link (REDUCE, CPU_SUM on local memory) */
	SG_GPU_VIA_PCIE,
	SG_GPU_VIA_NVLINK,
};

/** A buffer endpoint: address = base(mem, idx) + slot * partition + data_off. */
struct sg_gpu_ep {
	uint8_t mem;   /**< enum sg_gpu_mem */
	uint8_t slot;  /**< scratch slot (SCRATCH only; 0 otherwise) */
	uint16_t idx;  /**< GPU index (GRAD, SCRATCH) or host buffer (HOST) */
};

#define SG_GPU_MAX_SRC 16 /**< sources of one REDUCE or CPU_SUM */

/**
 * One step. It moves or sums bytes [data_off, data_off + bytes) of the
 * partition; every endpoint holds that range at the same data offset.
 */
struct sg_gpu_step {
	uint8_t kind; /**< enum sg_gpu_step_kind */
	uint8_t via;  /**< enum sg_gpu_via (copies between GPUs: PCIE or NVLINK) */
	uint8_t nsrc; /**< sources used in src[] (1 for copies) */
	struct sg_gpu_ep dst;
	struct sg_gpu_ep src[SG_GPU_MAX_SRC];
	uint32_t data_off;
	uint32_t bytes;
};

#define SG_GPU_MAX_HOST 32 /**< host staging buffers per plan */

/** A staging plan for one partition. */
struct sg_gpu_plan {
	char strategy[32];       /**< "cpu-assisted", "nvlink-tree", ... */
	char why[160];           /**< one sentence: why this strategy here */
	uint32_t partition_bytes;
	unsigned ngpus;
	int nic;                 /**< NIC index the plan pushes through */
	int root;                /**< GPU that talks to the host, -1 if several */
	unsigned scratch_slots;  /**< partition-sized scratch slots per GPU */
	unsigned nhost;          /**< host staging buffers used */
	int host_numa[SG_GPU_MAX_HOST]; /**< NUMA node of each host buffer */
	unsigned nsteps, cap;
	struct sg_gpu_step *steps;
};

/** Plan strategies. AUTO picks from the topology (see sg_gpu_plan_build()). */
enum sg_gpu_strategy {
	SG_GPU_STRAT_AUTO = 0,
	SG_GPU_STRAT_CPU_ASSISTED, /**< reduce within each switch, CPU sums the switches */
	SG_GPU_STRAT_NVLINK_TREE,  /**< reduce over an NVLink tree to a root GPU */
	SG_GPU_STRAT_NVSWITCH,     /**< reduce-scatter over NVSwitch, gather at a root */
	SG_GPU_STRAT_RING,         /**< naive: PCIe ring all-reduce, GPU 0 stages (for tests) */
	SG_GPU_STRAT_COUNT
};

/** Options for sg_gpu_plan_build(). Zero-initialised means defaults. */
struct sg_gpu_plan_opts {
	enum sg_gpu_strategy strategy;
	uint32_t partition_bytes; /**< 0: 4,096,000 (BytePS's default) */
	int nic;                  /**< NIC index; <=0: NIC 0 */
	int root;                 /**< force the root GPU (+1: 0 means automatic) */
	unsigned align;           /**< slice alignment in bytes; 0: 64 */
};

/** Name of a strategy ("auto", "cpu-assisted", "nvlink-tree", "nvswitch", "ring"). */
const char *sg_gpu_strategy_name(enum sg_gpu_strategy s);

/** Parse a strategy name; -EINVAL if unknown. */
int sg_gpu_strategy_from_name(const char *name, enum sg_gpu_strategy *s);

/** Name of a step kind ("p2p", "reduce", "d2h", ...). */
const char *sg_gpu_step_kind_name(enum sg_gpu_step_kind k);

/** An empty plan with room for @p cap steps (grows). NULL with errno on failure. */
struct sg_gpu_plan *sg_gpu_plan_new(unsigned ngpus, uint32_t partition_bytes, unsigned cap);

/** Append a copy of @p step. @return 0 or -ENOMEM. */
int sg_gpu_plan_add(struct sg_gpu_plan *p, const struct sg_gpu_step *step);

/** Free a plan. NULL is fine. */
void sg_gpu_plan_free(struct sg_gpu_plan *p);

/**
 * Build the staging plan for @p t.
 * AUTO chooses: NVSwitch when the GPUs hang off NVSwitches; NVLink tree when
 * NVLink joins every GPU; CPU-assisted otherwise (PCIe only, one switch or
 * many). Every slice boundary is a multiple of opts->align, which must be a
 * multiple of the element size the plan will run with.
 * @return the plan, or NULL with errno (EINVAL: reason in @p err).
 */
struct sg_gpu_plan *sg_gpu_plan_build(const struct sg_gpu_topo *t,
				      const struct sg_gpu_plan_opts *opts, char *err,
				      size_t errlen);

/**
 * Check that a plan is well formed for @p t: indices in range, byte ranges
 * inside the partition, sources and destinations of the right memory for the
 * step kind. @return 0 or -EINVAL with the first problem in @p err.
 */
int sg_gpu_plan_validate(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p, char *err,
			 size_t errlen);

/** Print a plan, one step a line, to @p out. */
void sg_gpu_plan_print(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p, FILE *out);

/* ------------------------------------------------------------------------ */
/* Checker                                                                  */
/* ------------------------------------------------------------------------ */

#define SG_GPU_MAX_VIOLATIONS 64

/** Links the checker counts. */
enum sg_gpu_link_kind {
	SG_GPU_LINK_PCIE = 0, /**< a node's PCIe uplink to its parent */
	SG_GPU_LINK_SOCKET,   /**< a socket's inter-socket link (UPI/xGMI) */
	SG_GPU_LINK_NVLINK,   /**< an NVLink edge */
};

/** Bytes one link carries per partition. For PCIe "up" is towards the CPU. */
struct sg_gpu_link_bytes {
	uint8_t kind; /**< enum sg_gpu_link_kind */
	int node;     /**< PCIE/SOCKET: the node whose uplink it is; NVLINK: edge index */
	uint64_t up, down; /**< NVLINK: a->b is "up", b->a "down" */
};

/** One violation, with a sentence saying which step and why. */
struct sg_gpu_violation {
	int principle; /**< 1 or 2 */
	int step;      /**< step index, or -1 for a whole-plan finding */
	uint64_t bytes;
	char msg[160];
};

/** What sg_gpu_plan_check() found. */
struct sg_gpu_report {
	unsigned nlinks;
	struct sg_gpu_link_bytes links[SG_GPU_MAX_NODES + SG_GPU_MAX_NVLINKS];
	unsigned nviolations;      /**< all of them, even past the array */
	struct sg_gpu_violation violations[SG_GPU_MAX_VIOLATIONS];
	int nic_link;              /**< node whose uplink is the NIC's switch-to-CPU link */
	uint64_t nic_allowed_up, nic_allowed_down; /**< push/pull + unavoidable bytes */
};

/**
 * Check any plan against both principles and count the bytes per link.
 * Principle 1: a P2P or BCAST step over PCIe between GPUs that do not share
 * a switch, or one that claims NVLink where there is none. Principle 2: bytes
 * on the NIC's switch-to-CPU link beyond push/pull plus, when some GPU below
 * that switch has no NVLink to a GPU outside it, one partition each way (its
 * unavoidable D2H and H2D). Link counts only include links with traffic.
 * @return 0 (report filled; violations may be > 0), or -EINVAL for a
 * malformed plan (reason in @p err).
 */
int sg_gpu_plan_check(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p,
		      struct sg_gpu_report *rep, char *err, size_t errlen);

/** Bytes (up, down) the report holds for the PCIe uplink of node @p node. */
int sg_gpu_report_pcie(const struct sg_gpu_report *rep, int node, uint64_t *up,
		       uint64_t *down);

/** Human name of a report link ("sw0<->rp0", "cpu0<->cpu*", "gpu0<=>gpu1"). */
void sg_gpu_link_name(const struct sg_gpu_topo *t, const struct sg_gpu_link_bytes *l,
		      char *buf, size_t len);

/** Print a report: the links, then (if @p violations) the violations. */
void sg_gpu_report_print(const struct sg_gpu_topo *t, const struct sg_gpu_report *rep,
			 bool violations, FILE *out);

/* ------------------------------------------------------------------------ */
/* Execution                                                                */
/* ------------------------------------------------------------------------ */

/** Backends. */
enum sg_gpu_backend {
	SG_GPU_BACKEND_AUTO = 0, /**< CUDA when it works, else host (reason logged) */
	SG_GPU_BACKEND_HOST,     /**< GPUs emulated in host memory */
	SG_GPU_BACKEND_CUDA,     /**< real GPUs; fails with -ENODEV when unusable */
};

/**
 * The summation service as seen by the plan: called for PUSH (push != NULL)
 * and for PULL (pull != NULL) with the partition number and the byte range.
 * The default (NULL) is a loopback: a pull returns what was pushed, which is
 * the global sum on a single machine. Must not call CUDA (it may run as a
 * stream callback). @return 0 or -errno (aborts the run).
 */
typedef int (*sg_gpu_net_fn)(void *arg, unsigned partition, uint32_t data_off,
			     const void *push, void *pull, uint32_t bytes);

/** Executor configuration. */
struct sg_gpu_exec_conf {
	enum sg_gpu_backend backend;
	const struct sg_gpu_plan *plan; /**< copied; may be freed after create */
	enum sg_dtype dtype;            /**< fp32, fp16 or bf16 */
	unsigned depth;                 /**< partitions in flight (CUDA); 0: 2 */
	sg_gpu_net_fn net;              /**< NULL: loopback */
	void *net_arg;
	/**
	 * CUDA: device ordinal of each logical GPU. NULL: GPU i on the i-th
	 * device in PCI address order, the order sg_gpu_topo_discover() numbers
	 * GPUs in, whatever CUDA_DEVICE_ORDER says.
	 */
	const int *device_of;
	/**
	 * Host backend test hook: when not 0, run the steps in a random order
	 * (seeded by this value) that the dependencies between steps allow. The
	 * CUDA backend's streams rely on that dependency analysis; this checks
	 * it on machines without GPUs.
	 */
	unsigned shuffle;
};

struct sg_gpu_exec;

/**
 * Create an executor. With AUTO, when cudaGetDeviceCount fails or finds too
 * few devices, the reason is logged, kept (sg_gpu_exec_fallback_reason()) and
 * the host backend is used. @return NULL with errno: EINVAL (bad conf),
 * ENODEV (CUDA asked for but unusable), ENOMEM.
 */
struct sg_gpu_exec *sg_gpu_exec_create(const struct sg_gpu_exec_conf *conf);

/** Backend actually in use. */
enum sg_gpu_backend sg_gpu_exec_backend(const struct sg_gpu_exec *ex);

/** Why AUTO fell back to the host backend, or "" if it did not. */
const char *sg_gpu_exec_fallback_reason(const struct sg_gpu_exec *ex);

/**
 * All-reduce a tensor of @p bytes that each logical GPU holds at grads[i]
 * (host memory for the host backend, device memory for CUDA), in place: on
 * return every grads[i] holds the sum. The tensor is cut into partitions of
 * the plan's size (the last may be shorter); bytes must be a multiple of the
 * element size. CUDA: the run starts after the work queued so far on each
 * device's legacy default stream (stream 0); the caller must synchronise any
 * other stream that writes grads before the call. It returns when all is
 * done. @return 0 or -errno (-EINVAL with a logged reason; -EIO for a CUDA
 * error; after a "sticky" one, which loses the CUDA context, every later run
 * of the executor returns -EIO at once).
 */
int sg_gpu_exec_run(struct sg_gpu_exec *ex, void *const *grads, size_t bytes);

/** Destroy an executor. NULL is fine. */
void sg_gpu_exec_destroy(struct sg_gpu_exec *ex);

/** Name of a backend ("auto", "host", "cuda"). */
const char *sg_gpu_backend_name(enum sg_gpu_backend b);

/**
 * Can CUDA run here? @return the number of devices (> 0), or -ENODEV with
 * the reason (e.g. "built without CUDA", "cudaGetDeviceCount: no CUDA-capable
 * device is detected") in @p why.
 */
int sg_gpu_cuda_probe(char *why, size_t len);

/**
 * GPUDirect RDMA: can device memory be registered with the NIC through
 * ibv_reg_dmabuf_mr? Tries a real registration of a small device buffer.
 * @return 0 when it works, -ENOTSUP / -ENODEV with the reason in @p why.
 */
int sg_gpu_gdr_probe(char *why, size_t len);

/* ------------------------------------------------------------------------ */
/* Measurements for bench/ (CUDA only)                                      */
/* ------------------------------------------------------------------------ */

/** What sg_gpu_cuda_bench() measures. Zero-initialised means defaults. */
struct sg_gpu_bench_conf {
	int device;               /**< CUDA device ordinal */
	size_t bytes;             /**< tensor size; 0: 64 MiB */
	unsigned runs;            /**< timed runs per figure (median); 0: 5 */
	unsigned depth;           /**< partitions in flight while staging; 0: 4 */
	uint32_t partition_bytes; /**< 0: 4,096,000 */
};

/** Results: bandwidths in GB/s (1e9 bytes/s), times in seconds, medians. */
struct sg_gpu_bench_result {
	char device[64];
	char link[64];           /**< PCIe link as sysfs reports it */
	size_t bytes;
	unsigned runs;
	/** GB/s each way of the GPU's link: the highest GT/s and width that the GPU and
	 *  its port both support, x the line encoding (8b/10b below 8 GT/s, 128b/130b up
	 *  to 32, 242/256 at 64) / 8; 0 when sysfs has no figures */
	double pcie_bound_gbps;
	double h2d_gbps, d2h_gbps; /**< pinned cudaMemcpyAsync */
	double dev_copy_gbps;    /**< device-to-device copy, bytes read + written */
	double reduce_gbps[3];   /**< dst += src, fp32/fp16/bf16, bytes read + written */
	double stage_pipelined_s; /**< executor: D2H, push, pull, H2D, pipelined */
	double stage_parts_s;    /**< D2H + H2D + host copies, each alone (serial staging) */
	double stage_host_s;     /**< the host copies alone */
	double stage_gbps;       /**< bytes / stage_pipelined_s */
	double bidir_gbps;       /**< each direction while H2D and D2H run at once */
	/** The reduce kernel (fp32/fp16/bf16) gave sg_sum_addk()'s bits on 3 x 2^20+3 elements. */
	bool reduce_exact[3];
};

/**
 * Measure pinned copies, the reduce kernels and pipelined staging on one
 * GPU. @return 0, or -ENODEV with the reason in @p why when CUDA is unusable.
 */
int sg_gpu_cuda_bench(const struct sg_gpu_bench_conf *conf, struct sg_gpu_bench_result *r,
		      char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* SG_GPU_H */
