/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma placement: BytePS's optimal split of the bytes between CPU and GPU
 * summation machines, its predicted times, and weighted rendezvous hashing of
 * partition keys onto nodes. Pure functions with no state, shared by the
 * control plane, sigmactl, libsigma and sigma-bench, so that every party
 * computes the same key -> node map without a coordinator (docs/control.md,
 * "Placement"). Its own library (sg_ctl_place, no jansson, no libsodium): the
 * worker library links it.
 *
 * Conventions: functions return 0 or a negative errno.
 */
#ifndef SG_CTL_PLACE_H
#define SG_CTL_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "sg_types.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Node kinds (enum sg_node_kind) are in sg_types.h. */

/**
 * BytePS's optimal share of the model per machine, as fractions of M.
 *
 * With n GPU machines and k CPU machines (k <= n): each CPU machine gets
 * 2(n-1)/(n^2+kn-2k), each GPU machine (n-k)/(n^2+kn-2k); the shares add up to
 * 1. When k >= n the GPU machines get nothing and each CPU machine 1/k. When
 * n == 0 each CPU machine gets 1/k; when k == 0, each GPU machine 1/n.
 *
 * @return 0, or -EINVAL when n == k == 0 or an output pointer is NULL.
 */
int sg_ctl_split(unsigned int n_gpu, unsigned int k_cpu, double *cpu_share, double *gpu_share);

/** Predicted communication times for one synchronisation of M bytes. */
struct sg_ctl_model {
	unsigned int n;	       /**< GPU machines (workers) */
	unsigned int k;	       /**< CPU machines */
	double cpu_bytes;      /**< bytes each CPU machine sums */
	double gpu_bytes;      /**< bytes each GPU machine sums */
	double t_sigma;	       /**< seconds, BytePS/Sigma split: 2n(n-1)M/((n^2+kn-2k)B); M/B if k>=n */
	double t_allreduce;    /**< seconds, ring all-reduce: 2(n-1)M/(nB) */
	double t_ps;	       /**< seconds, classic PS on the k CPU machines: nM/(kB), M/B if k>=n;
				    INFINITY when k == 0 */
	double speedup_vs_allreduce; /**< t_allreduce / t_sigma */
};

/**
 * Fill @p out for n GPU machines, k CPU machines, a model of @p model_bytes
 * and a per-machine bandwidth of @p bw_bytes_per_s (B).
 * @return 0; -EINVAL if n == 0 (nobody to synchronise), B <= 0, M < 0 or
 *         out == NULL.
 */
int sg_ctl_model(unsigned int n_gpu, unsigned int k_cpu, double model_bytes,
		 double bw_bytes_per_s, struct sg_ctl_model *out);

/** A summation node as placement sees it. */
struct sg_ctl_place_node {
	const char *name;	    /**< stable identity: hashed, so order does not matter */
	enum sg_node_kind kind; /**< CPU or GPU machine */
	double gbps;		    /**< NIC bandwidth; weights nodes within their group (> 0) */
	bool alive;		    /**< dead nodes get weight 0 */
};

/**
 * Compute the rendezvous weight of each node: its group's total share from
 * sg_ctl_split() (n = alive GPU nodes, k = alive CPU nodes), divided among
 * the group's alive nodes in proportion to their bandwidth.
 * @param[out] weights n_nodes entries; they add up to 1.
 * @return 0; -EINVAL on bad arguments (NULL, a name NULL, gbps <= 0 on an
 *         alive node); -ENOENT when no node is alive.
 */
int sg_ctl_place_weights(const struct sg_ctl_place_node *nodes, unsigned int n_nodes,
			 double *weights);

/**
 * The node that owns partition @p key: weighted rendezvous (highest random
 * weight) hashing over the nodes' names. A node's score depends only on its
 * name, weight and the key, so removing a node moves only the keys it owned
 * (when the group shares stay the same), and every process that sees the same
 * membership computes the same map.
 * @return the node's index in @p nodes, or -ENOENT if every weight is 0.
 */
int sg_ctl_place_key(const struct sg_ctl_place_node *nodes, const double *weights,
		     unsigned int n_nodes, uint64_t key);

/** Partition key of partition @p part of tensor @p tensor in a job (shared convention). */
static inline uint64_t sg_ctl_partition_key(uint32_t tensor, uint32_t part)
{
	return ((uint64_t)tensor << 32) | part;
}

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_PLACE_H */
