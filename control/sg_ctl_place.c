/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Placement of partitions on summation nodes: BytePS's optimal CPU/GPU split,
 * the predicted communication times, and weighted rendezvous hashing.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sg_ctl_place.h"

int sg_ctl_split(unsigned int n, unsigned int k, double *cpu_share, double *gpu_share)
{
	if (cpu_share == NULL || gpu_share == NULL || (n == 0 && k == 0))
		return -EINVAL;
	if (n == 0 || k >= n) {
		/* Enough CPU machines: they carry everything, GPU NICs only push/pull. */
		*cpu_share = 1.0 / k;
		*gpu_share = 0.0;
	} else if (k == 0) {
		*cpu_share = 0.0;
		*gpu_share = 1.0 / n;
	} else {
		double dn = n, dk = k, den = dn * dn + dk * dn - 2.0 * dk;

		*cpu_share = 2.0 * (dn - 1.0) / den;
		*gpu_share = (dn - dk) / den;
	}
	return 0;
}

int sg_ctl_model(unsigned int n, unsigned int k, double m, double b, struct sg_ctl_model *out)
{
	double cs, gs, dn = n, dk = k;

	if (out == NULL || n == 0 || !(b > 0) || !(m >= 0))
		return -EINVAL;
	sg_ctl_split(n, k, &cs, &gs);
	memset(out, 0, sizeof(*out));
	out->n = n;
	out->k = k;
	out->cpu_bytes = k ? cs * m : 0.0;
	out->gpu_bytes = gs * m;
	if (k >= n)
		out->t_sigma = m / b;
	else
		out->t_sigma = 2.0 * dn * (dn - 1.0) * m / ((dn * dn + dk * dn - 2.0 * dk) * b);
	out->t_allreduce = 2.0 * (dn - 1.0) * m / (dn * b);
	if (k == 0)
		out->t_ps = INFINITY;
	else if (k >= n)
		out->t_ps = m / b;
	else
		out->t_ps = dn * m / (dk * b);
	/* n == 1: nothing moves at all, both times are 0. */
	out->speedup_vs_allreduce = out->t_sigma > 0 ? out->t_allreduce / out->t_sigma : 1.0;
	return 0;
}

int sg_ctl_place_weights(const struct sg_ctl_place_node *nodes, unsigned int n_nodes,
			 double *weights)
{
	unsigned int i, n = 0, k = 0;
	double bw[2] = {0, 0}, share[2];

	if (nodes == NULL || weights == NULL)
		return -EINVAL;
	for (i = 0; i < n_nodes; i++) {
		if (nodes[i].name == NULL ||
		    (nodes[i].kind != SG_NODE_CPU && nodes[i].kind != SG_NODE_GPU))
			return -EINVAL;
		if (!nodes[i].alive)
			continue;
		if (!(nodes[i].gbps > 0) || !isfinite(nodes[i].gbps))
			return -EINVAL;
		bw[nodes[i].kind] += nodes[i].gbps;
		if (nodes[i].kind == SG_NODE_CPU)
			k++;
		else
			n++;
	}
	if (n + k == 0)
		return -ENOENT;
	sg_ctl_split(n, k, &share[SG_NODE_CPU], &share[SG_NODE_GPU]);
	/* Group total = per-machine share x machines, divided by bandwidth in the group. */
	share[SG_NODE_CPU] *= k;
	share[SG_NODE_GPU] *= n;
	for (i = 0; i < n_nodes; i++) {
		enum sg_node_kind g = nodes[i].kind;

		weights[i] = nodes[i].alive ? share[g] * nodes[i].gbps / bw[g] : 0.0;
	}
	return 0;
}

/* FNV-1a: a stable identity for a node name, independent of list order. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* splitmix64 finaliser: turns (key, node) into well-mixed bits. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

int sg_ctl_place_key(const struct sg_ctl_place_node *nodes, const double *weights,
		     unsigned int n_nodes, uint64_t key)
{
	int best = -ENOENT;
	double best_score = 0.0;
	unsigned int i;

	if (nodes == NULL || weights == NULL)
		return -EINVAL;
	for (i = 0; i < n_nodes; i++) {
		double u, score;

		if (!(weights[i] > 0))
			continue;
		/* u uniform in (0,1); -w/ln(u) picks node i with probability w_i/sum(w). */
		u = ((double)(mix64(key ^ mix64(name_hash(nodes[i].name))) >> 11) + 0.5) *
		    0x1p-53;
		score = -weights[i] / log(u);
		if (best < 0 || score > best_score) {
			best = (int)i;
			best_score = score;
		}
	}
	return best;
}
