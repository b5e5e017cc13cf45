/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Staging planner: turns a topology into the list of steps one partition goes
 * through on a GPU machine, following BytePS's two intra-machine principles.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sg_gpu_internal.h"

#define DEFAULT_PARTITION 4096000u /* BytePS's BYTEPS_PARTITION_BYTES */

static const char *const strat_names[SG_GPU_STRAT_COUNT] = {
	[SG_GPU_STRAT_AUTO] = "auto",
	[SG_GPU_STRAT_CPU_ASSISTED] = "cpu-assisted",
	[SG_GPU_STRAT_NVLINK_TREE] = "nvlink-tree",
	[SG_GPU_STRAT_NVSWITCH] = "nvswitch",
	[SG_GPU_STRAT_RING] = "ring",
};

static const char *const step_names[SG_GPU_STEP_KIND_COUNT] = {
	[SG_GPU_STEP_P2P] = "p2p",         [SG_GPU_STEP_REDUCE] = "reduce",
	[SG_GPU_STEP_D2H] = "d2h",         [SG_GPU_STEP_CPU_SUM] = "cpu-sum",
	[SG_GPU_STEP_H2H] = "h2h",         [SG_GPU_STEP_PUSH] = "push",
	[SG_GPU_STEP_PULL] = "pull",       [SG_GPU_STEP_H2D] = "h2d",
	[SG_GPU_STEP_BCAST] = "bcast",
};

const char *sg_gpu_strategy_name(enum sg_gpu_strategy s)
{
	return (unsigned)s < SG_GPU_STRAT_COUNT ? strat_names[s] : "unknown";
}

int sg_gpu_strategy_from_name(const char *name, enum sg_gpu_strategy *s)
{
	for (unsigned i = 0; name != NULL && i < SG_GPU_STRAT_COUNT; i++) {
		if (strcasecmp(name, strat_names[i]) == 0) {
			*s = (enum sg_gpu_strategy)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *sg_gpu_step_kind_name(enum sg_gpu_step_kind k)
{
	return (unsigned)k < SG_GPU_STEP_KIND_COUNT ? step_names[k] : "unknown";
}

struct sg_gpu_plan *sg_gpu_plan_new(unsigned ngpus, uint32_t partition_bytes, unsigned cap)
{
	struct sg_gpu_plan *p;

	if (ngpus == 0 || ngpus > SG_GPU_MAX_GPUS || partition_bytes == 0) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->cap = cap > 0 ? cap : 16;
	p->steps = calloc(p->cap, sizeof(*p->steps));
	if (p->steps == NULL) {
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	p->ngpus = ngpus;
	p->partition_bytes = partition_bytes;
	p->root = -1;
	snprintf(p->strategy, sizeof(p->strategy), "custom");
	return p;
}

void sg_gpu_plan_free(struct sg_gpu_plan *p)
{
	if (p == NULL)
		return;
	free(p->steps);
	free(p);
}

int sg_gpu_plan_add(struct sg_gpu_plan *p, const struct sg_gpu_step *step)
{
	if (p->nsteps == p->cap) {
		unsigned ncap = p->cap * 2;
		struct sg_gpu_step *n = realloc(p->steps, ncap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		p->steps = n;
		p->cap = ncap;
	}
	p->steps[p->nsteps++] = *step;
	return 0;
}

/* ---- builder helpers ---------------------------------------------------- */

/* Builder state: the plan, the first allocation error, the slice alignment. */
struct builder {
	const struct sg_gpu_topo *t;
	struct sg_gpu_plan *p;
	int rc;
	unsigned align;
	int nic_node, nic_numa;
};

static struct sg_gpu_ep ep(enum sg_gpu_mem mem, unsigned idx, unsigned slot)
{
	return (struct sg_gpu_ep){.mem = (uint8_t)mem, .idx = (uint16_t)idx, .slot = (uint8_t)slot};
}

#define GRAD(g) ep(SG_GPU_MEM_GRAD, (g), 0)
#define SCRATCH(g, s) ep(SG_GPU_MEM_SCRATCH, (g), (s))
#define HOST(h) ep(SG_GPU_MEM_HOST, (h), 0)
#define NET ep(SG_GPU_MEM_NET, 0, 0)

static void emit(struct builder *b, enum sg_gpu_step_kind kind, enum sg_gpu_via via,
		 struct sg_gpu_ep dst, const struct sg_gpu_ep *src, unsigned nsrc, uint32_t off,
		 uint32_t len)
{
	struct sg_gpu_step s = {.kind = (uint8_t)kind, .via = (uint8_t)via,
				.nsrc = (uint8_t)nsrc, .dst = dst, .data_off = off, .bytes = len};

	if (len == 0 || b->rc < 0)
		return; /* an empty slice (tiny partition) moves nothing */
	memcpy(s.src, src, nsrc * sizeof(*src));
	b->rc = sg_gpu_plan_add(b->p, &s);
}

static void copy(struct builder *b, enum sg_gpu_step_kind kind, enum sg_gpu_via via,
		 struct sg_gpu_ep src, struct sg_gpu_ep dst, uint32_t off, uint32_t len)
{
	emit(b, kind, via, dst, &src, 1, off, len);
}

static unsigned new_host(struct builder *b, int numa)
{
	if (b->p->nhost == SG_GPU_MAX_HOST) {
		b->rc = -ENOSPC;
		return 0;
	}
	b->p->host_numa[b->p->nhost] = numa;
	return b->p->nhost++;
}

/* Slice j of k of the partition, each boundary a multiple of the alignment. */
static void slice(const struct builder *b, unsigned k, unsigned j, uint32_t *off, uint32_t *len)
{
	uint32_t total = b->p->partition_bytes;
	uint64_t per = ((uint64_t)total + k - 1) / k;

	per = (per + b->align - 1) / b->align * b->align;
	*off = (uint32_t)(per * j < total ? per * j : total);
	*len = (uint32_t)(total - *off < per ? total - *off : per);
}

static int gpu_numa(const struct sg_gpu_topo *t, unsigned g)
{
	return t->nodes[sg_gpu_topo_socket_of(t, t->gpu[g])].numa;
}

/* True when GPU g shares the NIC's switch (its traffic would cross the NIC's uplink). */
static bool on_nic_switch(const struct builder *b, unsigned g)
{
	int top = sg_gpu_topo_top_switch(b->t, b->nic_node);

	return top >= 0 && sg_gpu_topo_below(b->t, b->t->gpu[g], top);
}

/*
 * Reduce-scatter among GPUs m[0..k-1] (every copy over 'via'): GPU m[j]
 * ends up holding the group's sum of slice j in its gradient buffer.
 */
static void reduce_scatter(struct builder *b, const unsigned *m, unsigned k, enum sg_gpu_via via)
{
	struct sg_gpu_ep src[SG_GPU_MAX_SRC];
	uint32_t off, len;

	for (unsigned j = 0; j < k; j++) {
		unsigned n = 0;

		slice(b, k, j, &off, &len);
		for (unsigned i = 0; i < k; i++) {
			if (i == j)
				continue;
			copy(b, SG_GPU_STEP_P2P, via, GRAD(m[i]), SCRATCH(m[j], n), off, len);
			src[n] = SCRATCH(m[j], n);
			n++;
		}
		if (n > 0)
			emit(b, SG_GPU_STEP_REDUCE, SG_GPU_VIA_NONE, GRAD(m[j]), src, n, off, len);
	}
	if (k > 1 && k - 1 > b->p->scratch_slots)
		b->p->scratch_slots = k - 1;
}

/* All-gather among m[0..k-1]: GPU m[j] sends slice j to every other GPU. */
static void all_gather(struct builder *b, const unsigned *m, unsigned k, enum sg_gpu_via via)
{
	uint32_t off, len;

	for (unsigned j = 0; j < k; j++) {
		slice(b, k, j, &off, &len);
		for (unsigned i = 0; i < k; i++)
			if (i != j)
				copy(b, SG_GPU_STEP_BCAST, via, GRAD(m[j]), GRAD(m[i]), off, len);
	}
}

/* Push the host sum to the service and pull the global sum back into it. */
static void push_pull(struct builder *b, unsigned h)
{
	uint32_t n = b->p->partition_bytes;

	copy(b, SG_GPU_STEP_PUSH, SG_GPU_VIA_PCIE, HOST(h), NET, 0, n);
	copy(b, SG_GPU_STEP_PULL, SG_GPU_VIA_PCIE, NET, HOST(h), 0, n);
}

/* ---- CPU-assisted aggregation (PCIe only, or one switch) ---------------- */

/*
 * GPUs under one top-level switch form a group: they reduce-scatter over
 * P2P (legal: same switch), each owner copies its slice to a host buffer on
 * its socket, so every switch uplink carries one partition up and one down,
 * whatever the group size. The CPU sums the groups: first per socket, then
 * once across sockets on the NIC's node, so the inter-socket link carries one
 * partition each way. The result goes back the same way, and an all-gather
 * inside each switch completes every GPU.
 */
static void plan_cpu_assisted(struct builder *b)
{
	const struct sg_gpu_topo *t = b->t;
	unsigned ngrp = 0, members[SG_GPU_MAX_GPUS][SG_GPU_MAX_GPUS];
	unsigned nmem[SG_GPU_MAX_GPUS] = {0}, gbuf[SG_GPU_MAX_GPUS], sock_buf[SG_GPU_MAX_NODES];
	int grp_key[SG_GPU_MAX_GPUS], key;
	struct sg_gpu_ep src[SG_GPU_MAX_SRC];
	unsigned nsrc = 0, result;
	uint32_t off, len, n = b->p->partition_bytes;

	for (unsigned g = 0; g < t->ngpus; g++) {
		unsigned i;

		/* A GPU straight on a root port is a group of its own. */
		key = sg_gpu_topo_top_switch(t, t->gpu[g]);
		if (key < 0)
			key = t->gpu[g];
		for (i = 0; i < ngrp && grp_key[i] != key; i++)
			;
		if (i == ngrp)
			grp_key[ngrp++] = key;
		members[i][nmem[i]++] = g;
	}
	/* Within each switch: reduce-scatter, then each owner stages its slice. */
	for (unsigned i = 0; i < ngrp; i++) {
		gbuf[i] = new_host(b, gpu_numa(t, members[i][0]));
		reduce_scatter(b, members[i], nmem[i], SG_GPU_VIA_PCIE);
		for (unsigned j = 0; j < nmem[i]; j++) {
			slice(b, nmem[i], j, &off, &len);
			copy(b, SG_GPU_STEP_D2H, SG_GPU_VIA_PCIE, GRAD(members[i][j]),
			     HOST(gbuf[i]), off, len);
		}
	}
	/* Per socket other than the NIC's: sum locally, ship one copy across. */
	for (unsigned s = 0; s < t->nnodes; s++) {
		unsigned ns = 0, first = 0;
		struct sg_gpu_ep ssrc[SG_GPU_MAX_SRC];
		int numa = t->nodes[s].numa;

		sock_buf[s] = ~0u;
		if (t->nodes[s].kind != SG_GPU_NODE_SOCKET)
			continue;
		for (unsigned i = 0; i < ngrp; i++) {
			if (b->p->host_numa[gbuf[i]] != numa)
				continue;
			if (numa == b->nic_numa) {
				if (nsrc < SG_GPU_MAX_SRC)
					src[nsrc++] = HOST(gbuf[i]);
				continue;
			}
			if (ns == 0)
				first = gbuf[i];
			if (ns < SG_GPU_MAX_SRC)
				ssrc[ns++] = HOST(gbuf[i]);
		}
		if (ns == 0)
			continue;
		if (ns > 1) {
			first = new_host(b, numa);
			emit(b, SG_GPU_STEP_CPU_SUM, SG_GPU_VIA_NONE, HOST(first), ssrc, ns, 0, n);
		}
		sock_buf[s] = first;
		if (nsrc < SG_GPU_MAX_SRC) {
			src[nsrc] = HOST(new_host(b, b->nic_numa));
			copy(b, SG_GPU_STEP_H2H, SG_GPU_VIA_NONE, HOST(first), src[nsrc], 0, n);
			nsrc++;
		}
	}
	if (nsrc == 1) {
		result = src[0].idx; /* one group: nothing for the CPU to add */
	} else {
		result = new_host(b, b->nic_numa);
		emit(b, SG_GPU_STEP_CPU_SUM, SG_GPU_VIA_NONE, HOST(result), src, nsrc, 0, n);
	}
	push_pull(b, result);
	/* Back: one copy per remote socket, then H2D to each owner, all-gather. */
	for (unsigned s = 0; s < t->nnodes; s++)
		if (t->nodes[s].kind == SG_GPU_NODE_SOCKET && sock_buf[s] != ~0u)
			copy(b, SG_GPU_STEP_H2H, SG_GPU_VIA_NONE, HOST(result), HOST(sock_buf[s]),
			     0, n);
	for (unsigned i = 0; i < ngrp; i++) {
		int s = sg_gpu_topo_socket_of(t, t->gpu[members[i][0]]);
		unsigned from = b->p->host_numa[gbuf[i]] == b->nic_numa ? result : sock_buf[s];

		for (unsigned j = 0; j < nmem[i]; j++) {
			slice(b, nmem[i], j, &off, &len);
			copy(b, SG_GPU_STEP_H2D, SG_GPU_VIA_PCIE, HOST(from),
			     GRAD(members[i][j]), off, len);
		}
		all_gather(b, members[i], nmem[i], SG_GPU_VIA_PCIE);
	}
	if (ngrp == 1)
		snprintf(b->p->why, sizeof(b->p->why),
			 "one PCIe switch: P2P inside it, its uplink carries one partition each "
			 "way, no CPU sum needed");
	else
		snprintf(b->p->why, sizeof(b->p->why),
			 "PCIe only: reduce inside each switch, the CPU sums %u switch groups, one "
			 "partition per uplink each way",
			 ngrp);
}

/* ---- root choice for the NVLink plans ----------------------------------- */

static unsigned nvlink_degree(const struct sg_gpu_topo *t, unsigned g)
{
	unsigned d = 0;

	for (unsigned l = 0; l < t->nnvlinks; l++)
		if (t->nvlinks[l].a == t->gpu[g] || t->nvlinks[l].b == t->gpu[g])
			d += t->nvlinks[l].count;
	return d;
}

/*
 * The root talks to the host, so it must not share the NIC's switch
 * (principle 2). Among the others prefer the NIC's socket (the D2H lands in
 * the memory the NIC reads, with no inter-socket hop), then the most NVLink
 * links (more bandwidth into the root), then the lowest index.
 */
static int pick_root(const struct builder *b)
{
	int best = -1;
	long best_score = -1;

	for (unsigned g = 0; g < b->t->ngpus; g++) {
		long score = 0;

		if (!on_nic_switch(b, g))
			score += 1L << 20;
		if (gpu_numa(b->t, g) == b->nic_numa)
			score += 1L << 16;
		score += nvlink_degree(b->t, g);
		if (score > best_score) {
			best = (int)g;
			best_score = score;
		}
	}
	return best;
}

/* Stage the root's full partition through the host and back. */
static void root_staging(struct builder *b, unsigned root)
{
	uint32_t n = b->p->partition_bytes;
	unsigned h = new_host(b, b->nic_numa);

	copy(b, SG_GPU_STEP_D2H, SG_GPU_VIA_PCIE, GRAD(root), HOST(h), 0, n);
	push_pull(b, h);
	copy(b, SG_GPU_STEP_H2D, SG_GPU_VIA_PCIE, HOST(h), GRAD(root), 0, n);
}

/* ---- NVLink tree (DGX-1 hybrid cube-mesh and similar) ------------------- */

/*
 * Breadth-first tree over direct GPU-GPU NVLink edges from the root; a GPU
 * joins under the neighbour one level up with the most links. Children send
 * their subtree sums up (deepest level first), the root stages the partition
 * through the host, and the result flows back down the same edges.
 */
static int plan_nvlink_tree(struct builder *b, unsigned root, char *err, size_t errlen)
{
	const struct sg_gpu_topo *t = b->t;
	int parent[SG_GPU_MAX_GPUS], level[SG_GPU_MAX_GPUS], maxlvl = 0;
	unsigned nchild[SG_GPU_MAX_GPUS] = {0};
	uint32_t n = b->p->partition_bytes;

	for (unsigned g = 0; g < t->ngpus; g++)
		level[g] = -1;
	level[root] = 0;
	parent[root] = -1;
	for (int lvl = 1; lvl < (int)t->ngpus; lvl++) {
		for (unsigned g = 0; g < t->ngpus; g++) {
			unsigned best = 0;

			if (level[g] >= 0)
				continue;
			for (unsigned u = 0; u < t->ngpus; u++) {
				unsigned c = sg_gpu_topo_nvlinks(t, t->gpu[g], t->gpu[u]);

				if (level[u] == lvl - 1 && c > best) {
					best = c;
					parent[g] = (int)u;
				}
			}
			if (best > 0) {
				level[g] = lvl;
				maxlvl = lvl;
			}
		}
		/* Levels are assigned only from the previous level: no mixing. */
		for (unsigned g = 0; g < t->ngpus; g++)
			if (level[g] == lvl)
				nchild[parent[g]]++;
	}
	for (unsigned g = 0; g < t->ngpus; g++)
		if (level[g] < 0)
			return sg_err(err, errlen, -EINVAL,
					  "gpu%u has no NVLink path to root gpu%u", g, root);
	for (unsigned g = 0; g < t->ngpus; g++) {
		if (nchild[g] > SG_GPU_MAX_SRC)
			return sg_err(err, errlen, -EINVAL, "gpu%u has too many children", g);
		if (nchild[g] > b->p->scratch_slots)
			b->p->scratch_slots = nchild[g];
	}
	for (int lvl = maxlvl - 1; lvl >= 0; lvl--) {
		for (unsigned u = 0; u < t->ngpus; u++) {
			struct sg_gpu_ep src[SG_GPU_MAX_SRC];
			unsigned ns = 0;

			if (level[u] != lvl)
				continue;
			for (unsigned g = 0; g < t->ngpus; g++) {
				if (level[g] != lvl + 1 || parent[g] != (int)u)
					continue;
				copy(b, SG_GPU_STEP_P2P, SG_GPU_VIA_NVLINK, GRAD(g),
				     SCRATCH(u, ns), 0, n);
				src[ns] = SCRATCH(u, ns);
				ns++;
			}
			if (ns > 0)
				emit(b, SG_GPU_STEP_REDUCE, SG_GPU_VIA_NONE, GRAD(u), src, ns, 0, n);
		}
	}
	root_staging(b, root);
	for (int lvl = 1; lvl <= maxlvl; lvl++)
		for (unsigned g = 0; g < t->ngpus; g++)
			if (level[g] == lvl)
				copy(b, SG_GPU_STEP_BCAST, SG_GPU_VIA_NVLINK, GRAD(parent[g]),
				     GRAD(g), 0, n);
	snprintf(b->p->why, sizeof(b->p->why),
		 "NVLink: reduce over an NVLink tree (depth %d) to gpu%u, off the NIC's switch, "
		 "which alone talks to the host",
		 maxlvl, root);
	return 0;
}

/* ---- NVSwitch (DGX H100 style) ------------------------------------------ */

/*
 * Every GPU reaches every other at full NVLink bandwidth, so a reduce-scatter
 * over the NVSwitches spreads the summing over all GPUs (each link carries
 * (k-1)/k of a partition) instead of funnelling k-1 partitions into one root.
 * The owners then gather their slices at the root, which alone stages through
 * the host: the GPU under the NIC's switch sends its slice over NVLink, never
 * over the NIC's PCIe uplink. The way back is a scatter and an all-gather.
 */
static void plan_nvswitch(struct builder *b, unsigned root)
{
	const struct sg_gpu_topo *t = b->t;
	unsigned m[SG_GPU_MAX_GPUS], k = t->ngpus;
	uint32_t off, len;

	for (unsigned g = 0; g < k; g++)
		m[g] = g;
	reduce_scatter(b, m, k, SG_GPU_VIA_NVLINK);
	for (unsigned j = 0; j < k; j++) {
		slice(b, k, j, &off, &len);
		if (j != root)
			copy(b, SG_GPU_STEP_P2P, SG_GPU_VIA_NVLINK, GRAD(j), GRAD(root), off, len);
	}
	root_staging(b, root);
	for (unsigned j = 0; j < k; j++) {
		slice(b, k, j, &off, &len);
		if (j != root)
			copy(b, SG_GPU_STEP_BCAST, SG_GPU_VIA_NVLINK, GRAD(root), GRAD(j), off, len);
	}
	/* All-gather; the root already holds every slice. */
	for (unsigned j = 0; j < k; j++) {
		slice(b, k, j, &off, &len);
		for (unsigned i = 0; i < k; i++)
			if (i != j && i != root)
				copy(b, SG_GPU_STEP_BCAST, SG_GPU_VIA_NVLINK, GRAD(j), GRAD(i), off,
				     len);
	}
	snprintf(b->p->why, sizeof(b->p->why),
		 "NVSwitch: reduce-scatter over NVLink, gather at gpu%u (off the NIC's switch), "
		 "which alone talks to the host",
		 root);
}

/* ---- naive ring (for the checker's tests and comparisons) --------------- */

/*
 * The textbook ring all-reduce over PCIe in index order, then the root (GPU
 * 0 unless forced) stages the partition and PCIe-broadcasts the result. It ignores both principles
 * on purpose: the checker must flag it.
 */
static void plan_ring(struct builder *b)
{
	unsigned k = b->t->ngpus;
	uint32_t off, len;

	for (unsigned s = 0; s + 1 < k; s++) {
		for (unsigned i = 0; i < k; i++) {
			unsigned nx = (i + 1) % k, c = (i + k - s) % k;

			slice(b, k, c, &off, &len);
			copy(b, SG_GPU_STEP_P2P, SG_GPU_VIA_PCIE, GRAD(i), SCRATCH(nx, 0), off, len);
			emit(b, SG_GPU_STEP_REDUCE, SG_GPU_VIA_NONE, GRAD(nx),
			     (struct sg_gpu_ep[]){SCRATCH(nx, 0)}, 1, off, len);
		}
	}
	for (unsigned s = 0; s + 1 < k; s++) {
		for (unsigned i = 0; i < k; i++) {
			unsigned nx = (i + 1) % k, c = (i + 1 + k - s) % k;

			slice(b, k, c, &off, &len);
			copy(b, SG_GPU_STEP_BCAST, SG_GPU_VIA_PCIE, GRAD(i), GRAD(nx), off, len);
		}
	}
	b->p->scratch_slots = k > 1 ? 1 : 0;
	root_staging(b, (unsigned)b->p->root);
	for (unsigned i = 0; i < k; i++)
		if (i != (unsigned)b->p->root)
			copy(b, SG_GPU_STEP_BCAST, SG_GPU_VIA_PCIE, GRAD(b->p->root), GRAD(i), 0,
			     b->p->partition_bytes);
	snprintf(b->p->why, sizeof(b->p->why),
		 "naive ring all-reduce over PCIe, gpu%d stages (ignores both principles)",
		 b->p->root);
}

/* ---- strategy choice ---------------------------------------------------- */

static bool nvswitch_attached(const struct sg_gpu_topo *t)
{
	for (unsigned i = 0; i < t->ngpus; i++)
		for (unsigned j = i + 1; j < t->ngpus; j++)
			if (!sg_gpu_topo_nvlink_path(t, i, j))
				return false;
	for (unsigned l = 0; l < t->nnvlinks; l++)
		if (t->nodes[t->nvlinks[l].a].kind == SG_GPU_NODE_NVSWITCH ||
		    t->nodes[t->nvlinks[l].b].kind == SG_GPU_NODE_NVSWITCH)
			return t->ngpus > 1;
	return false;
}

/* Direct GPU-GPU NVLink edges join every GPU. */
static bool nvlink_connected(const struct sg_gpu_topo *t)
{
	bool seen[SG_GPU_MAX_GPUS] = {true};
	unsigned nseen = 1;

	for (bool grew = true; grew;) {
		grew = false;
		for (unsigned g = 0; g < t->ngpus; g++)
			for (unsigned u = 0; !seen[g] && u < t->ngpus; u++)
				if (seen[u] && sg_gpu_topo_nvlinks(t, t->gpu[g], t->gpu[u]) > 0) {
					seen[g] = grew = true;
					nseen++;
				}
	}
	return t->ngpus > 1 && nseen == t->ngpus;
}

struct sg_gpu_plan *sg_gpu_plan_build(const struct sg_gpu_topo *t,
				      const struct sg_gpu_plan_opts *opts, char *err,
				      size_t errlen)
{
	struct sg_gpu_plan_opts o = opts ? *opts : (struct sg_gpu_plan_opts){0};
	struct builder b = {.t = t};
	int rc = 0;

	if (o.partition_bytes == 0)
		o.partition_bytes = DEFAULT_PARTITION;
	if (o.align == 0)
		o.align = 64;
	if (o.nic < 0)
		o.nic = 0;
	rc = sg_gpu_topo_validate(t, err, errlen);
	if (rc == 0 && t->nnics == 0)
		rc = sg_err(err, errlen, -EINVAL, "the topology has no NIC to push through");
	if (rc == 0 && (unsigned)o.nic >= t->nnics)
		rc = sg_err(err, errlen, -EINVAL, "NIC %d out of range (%u NICs)", o.nic,
				t->nnics);
	if (rc == 0 && (o.root < 0 || o.root > (int)t->ngpus))
		rc = sg_err(err, errlen, -EINVAL, "root GPU %d out of range (%u GPUs)",
				o.root - 1, t->ngpus);
	if (rc == 0 && (o.align > 4096 || (o.align & (o.align - 1)) != 0))
		rc = sg_err(err, errlen, -EINVAL, "alignment %u is not a power of two <= 4096",
				o.align);
	if (rc == 0 && (o.partition_bytes % 4 != 0 || o.partition_bytes > (1u << 30)))
		rc = sg_err(err, errlen, -EINVAL,
				"partition of %u bytes: must be a multiple of 4, at most 1 GiB",
				o.partition_bytes);
	if (rc == 0 && (unsigned)o.strategy >= SG_GPU_STRAT_COUNT)
		rc = sg_err(err, errlen, -EINVAL, "unknown strategy %d", (int)o.strategy);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	b.p = sg_gpu_plan_new(t->ngpus, o.partition_bytes, 64);
	if (b.p == NULL)
		return NULL;
	b.align = o.align;
	b.p->nic = o.nic;
	b.nic_node = t->nic[o.nic];
	b.nic_numa = t->nodes[sg_gpu_topo_socket_of(t, b.nic_node)].numa;
	if (o.strategy == SG_GPU_STRAT_AUTO)
		o.strategy = nvswitch_attached(t)  ? SG_GPU_STRAT_NVSWITCH
			     : nvlink_connected(t) ? SG_GPU_STRAT_NVLINK_TREE
						   : SG_GPU_STRAT_CPU_ASSISTED;
	if ((o.strategy == SG_GPU_STRAT_NVSWITCH && !nvswitch_attached(t)) ||
	    (o.strategy == SG_GPU_STRAT_NVLINK_TREE && !nvlink_connected(t)))
		rc = sg_err(err, errlen, -EINVAL, "strategy %s needs %s joining every GPU",
				strat_names[o.strategy],
				o.strategy == SG_GPU_STRAT_NVSWITCH ? "NVSwitches" : "NVLink");
	snprintf(b.p->strategy, sizeof(b.p->strategy), "%s", strat_names[o.strategy]);
	b.p->root = o.root > 0 ? o.root - 1 : -1;
	if (rc == 0 && o.strategy != SG_GPU_STRAT_CPU_ASSISTED && b.p->root < 0)
		b.p->root = o.strategy == SG_GPU_STRAT_RING ? 0 : pick_root(&b);
	if (rc == 0 && o.strategy == SG_GPU_STRAT_CPU_ASSISTED && b.p->root >= 0)
		rc = sg_err(err, errlen, -EINVAL, "cpu-assisted plans have no root GPU");
	if (rc == 0 && o.strategy == SG_GPU_STRAT_NVSWITCH && t->ngpus > SG_GPU_MAX_SRC + 1)
		rc = sg_err(err, errlen, -EINVAL, "more than %d GPUs on NVSwitch",
				SG_GPU_MAX_SRC + 1);
	if (rc == 0) {
		switch (o.strategy) {
		case SG_GPU_STRAT_NVSWITCH:
			plan_nvswitch(&b, (unsigned)b.p->root);
			break;
		case SG_GPU_STRAT_NVLINK_TREE:
			rc = plan_nvlink_tree(&b, (unsigned)b.p->root, err, errlen);
			break;
		case SG_GPU_STRAT_RING:
			plan_ring(&b);
			break;
		default:
			plan_cpu_assisted(&b);
			break;
		}
	}
	if (rc == 0 && b.rc < 0)
		rc = sg_err(err, errlen, b.rc, "plan too large: %s", strerror(-b.rc));
	if (rc < 0) {
		sg_gpu_plan_free(b.p);
		errno = -rc;
		return NULL;
	}
	return b.p;
}

/* ---- validation and printing -------------------------------------------- */

static bool same_buf(const struct sg_gpu_ep *a, const struct sg_gpu_ep *b)
{
	return a->mem == b->mem && a->idx == b->idx && a->slot == b->slot;
}

static int check_ep(const struct sg_gpu_plan *p, const struct sg_gpu_ep *e, unsigned s,
		    char *err, size_t errlen)
{
	switch (e->mem) {
	case SG_GPU_MEM_GRAD:
	case SG_GPU_MEM_SCRATCH:
		if (e->idx >= p->ngpus)
			return sg_err(err, errlen, -EINVAL, "step %u: gpu%u out of range", s,
					  e->idx);
		if (e->mem == SG_GPU_MEM_SCRATCH && e->slot >= p->scratch_slots)
			return sg_err(err, errlen, -EINVAL,
					  "step %u: scratch slot %u beyond %u slots", s, e->slot,
					  p->scratch_slots);
		break;
	case SG_GPU_MEM_HOST:
		if (e->idx >= p->nhost)
			return sg_err(err, errlen, -EINVAL, "step %u: host buffer %u of %u", s,
					  e->idx, p->nhost);
		break;
	case SG_GPU_MEM_NET:
		if (e->idx != 0)
			return sg_err(err, errlen, -EINVAL, "step %u: net index %u", s, e->idx);
		break;
	default:
		return sg_err(err, errlen, -EINVAL, "step %u: unknown memory %u", s, e->mem);
	}
	if (e->mem != SG_GPU_MEM_SCRATCH && e->slot != 0)
		return sg_err(err, errlen, -EINVAL, "step %u: slot on non-scratch memory", s);
	return 0;
}

/* Memory kinds each step accepts: bit masks over enum sg_gpu_mem. */
#define M_GPU (1u << SG_GPU_MEM_GRAD | 1u << SG_GPU_MEM_SCRATCH)
#define M_HOST (1u << SG_GPU_MEM_HOST)
#define M_NET (1u << SG_GPU_MEM_NET)

static const struct {
	unsigned src, dst;
	bool multi;
} step_mems[SG_GPU_STEP_KIND_COUNT] = {
	[SG_GPU_STEP_P2P] = {M_GPU, M_GPU, false},   [SG_GPU_STEP_REDUCE] = {M_GPU, M_GPU, true},
	[SG_GPU_STEP_D2H] = {M_GPU, M_HOST, false},  [SG_GPU_STEP_CPU_SUM] = {M_HOST, M_HOST, true},
	[SG_GPU_STEP_H2H] = {M_HOST, M_HOST, false}, [SG_GPU_STEP_PUSH] = {M_HOST, M_NET, false},
	[SG_GPU_STEP_PULL] = {M_NET, M_HOST, false}, [SG_GPU_STEP_H2D] = {M_HOST, M_GPU, false},
	[SG_GPU_STEP_BCAST] = {M_GPU, M_GPU, false},
};

static int check_step(const struct sg_gpu_plan *p, unsigned s, char *err, size_t errlen)
{
	const struct sg_gpu_step *st = &p->steps[s];
	int rc;

	if (st->kind >= SG_GPU_STEP_KIND_COUNT)
		return sg_err(err, errlen, -EINVAL, "step %u: unknown kind %u", s, st->kind);
	if (st->bytes == 0 || st->data_off > p->partition_bytes ||
	    st->bytes > p->partition_bytes - st->data_off)
		return sg_err(err, errlen, -EINVAL,
				  "step %u: bytes [%u, +%u) outside the %u-byte partition", s,
				  st->data_off, st->bytes, p->partition_bytes);
	if (st->nsrc == 0 || st->nsrc > SG_GPU_MAX_SRC ||
	    (!step_mems[st->kind].multi && st->nsrc != 1))
		return sg_err(err, errlen, -EINVAL, "step %u: %u sources for a %s", s, st->nsrc,
				  step_names[st->kind]);
	if (st->via > SG_GPU_VIA_NVLINK)
		return sg_err(err, errlen, -EINVAL, "step %u: unknown link class %u", s,
				  st->via);
	rc = check_ep(p, &st->dst, s, err, errlen);
	if (rc == 0 && !(step_mems[st->kind].dst & 1u << st->dst.mem))
		rc = sg_err(err, errlen, -EINVAL, "step %u: a %s cannot write that memory", s,
				step_names[st->kind]);
	for (unsigned i = 0; rc == 0 && i < st->nsrc; i++) {
		const struct sg_gpu_ep *e = &st->src[i];

		rc = check_ep(p, e, s, err, errlen);
		if (rc == 0 && !(step_mems[st->kind].src & 1u << e->mem))
			rc = sg_err(err, errlen, -EINVAL, "step %u: a %s cannot read that memory",
					s, step_names[st->kind]);
		if (rc == 0 && st->kind == SG_GPU_STEP_REDUCE &&
		    (e->idx != st->dst.idx || same_buf(e, &st->dst)))
			rc = sg_err(err, errlen, -EINVAL,
					"step %u: reduce sources must be other buffers of gpu%u", s,
					st->dst.idx);
		if (rc == 0 && !step_mems[st->kind].multi && same_buf(e, &st->dst))
			rc = sg_err(err, errlen, -EINVAL, "step %u: copy onto itself", s);
	}
	if (rc == 0 && (st->kind == SG_GPU_STEP_P2P || st->kind == SG_GPU_STEP_BCAST) &&
	    (st->src[0].idx == st->dst.idx || st->via == SG_GPU_VIA_NONE))
		rc = sg_err(err, errlen, -EINVAL,
				"step %u: a GPU-to-GPU copy joins two GPUs over PCIe or NVLink", s);
	return rc;
}

int sg_gpu_plan_validate_steps(const struct sg_gpu_plan *p, size_t elem, char *err,
			       size_t errlen)
{
	int rc;

	if (p == NULL)
		return sg_err(err, errlen, -EINVAL, "no plan");
	if (p->ngpus == 0 || p->ngpus > SG_GPU_MAX_GPUS || p->nhost > SG_GPU_MAX_HOST ||
	    p->scratch_slots > 255 || p->partition_bytes == 0 || p->nsteps == 0 ||
	    p->steps == NULL)
		return sg_err(err, errlen, -EINVAL, "bad plan header");
	if (elem > 1 && p->partition_bytes % elem != 0)
		return sg_err(err, errlen, -EINVAL,
				  "partition %u bytes is not a multiple of the %zu-byte element",
				  p->partition_bytes, elem);
	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];

		rc = check_step(p, s, err, errlen);
		if (rc < 0)
			return rc;
		if (elem > 1 && (st->data_off % elem != 0 || st->bytes % elem != 0))
			return sg_err(err, errlen, -EINVAL,
					  "step %u: bytes [%u, +%u) not %zu-byte aligned", s,
					  st->data_off, st->bytes, elem);
	}
	return 0;
}

int sg_gpu_plan_validate(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p, char *err,
			 size_t errlen)
{
	if (p == NULL || t == NULL)
		return sg_err(err, errlen, -EINVAL, "no plan or no topology");
	if (p->ngpus != t->ngpus)
		return sg_err(err, errlen, -EINVAL, "plan for %u GPUs, topology has %u",
				  p->ngpus, t->ngpus);
	if (p->nic < 0 || (unsigned)p->nic >= t->nnics)
		return sg_err(err, errlen, -EINVAL, "plan uses NIC %d, topology has %u", p->nic,
				  t->nnics);
	if (p->nhost > SG_GPU_MAX_HOST)
		return sg_err(err, errlen, -EINVAL, "bad plan header");
	for (unsigned h = 0; h < p->nhost; h++) {
		bool found = false;

		for (unsigned i = 0; i < t->nnodes; i++)
			found |= t->nodes[i].kind == SG_GPU_NODE_SOCKET &&
				 t->nodes[i].numa == p->host_numa[h];
		if (!found)
			return sg_err(err, errlen, -EINVAL,
					  "host buffer %u on NUMA node %d: no such socket", h,
					  p->host_numa[h]);
	}
	return sg_gpu_plan_validate_steps(p, 1, err, errlen);
}

static void ep_name(const struct sg_gpu_plan *p, const struct sg_gpu_ep *e, char *buf,
		    size_t len)
{
	switch (e->mem) {
	case SG_GPU_MEM_GRAD:
		snprintf(buf, len, "gpu%u", e->idx);
		break;
	case SG_GPU_MEM_SCRATCH:
		snprintf(buf, len, "gpu%u.s%u", e->idx, e->slot);
		break;
	case SG_GPU_MEM_HOST:
		snprintf(buf, len, "host%u@n%d", e->idx,
			 e->idx < SG_GPU_MAX_HOST ? p->host_numa[e->idx] : -1);
		break;
	default:
		snprintf(buf, len, "net");
		break;
	}
}

void sg_gpu_plan_print(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p, FILE *out)
{
	static const char *const via[] = {"", "pcie", "nvlink"};

	fprintf(out, "plan %s: %u GPUs, partition %u bytes, nic %s, root %s%d, %u steps\n",
		p->strategy, p->ngpus, p->partition_bytes,
		p->nic >= 0 && (unsigned)p->nic < t->nnics ? t->nodes[t->nic[p->nic]].name : "?",
		p->root >= 0 ? "gpu" : "", p->root, p->nsteps);
	if (p->why[0] != '\0')
		fprintf(out, "  why: %s\n", p->why);
	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];
		char d[32], srcs[SG_GPU_MAX_SRC * 12 + 8] = "", one[32];

		ep_name(p, &st->dst, d, sizeof(d));
		for (unsigned i = 0; i < st->nsrc && i < SG_GPU_MAX_SRC; i++) {
			ep_name(p, &st->src[i], one, sizeof(one));
			if (i > 0)
				strcat(srcs, "+");
			strncat(srcs, one, sizeof(srcs) - strlen(srcs) - 1);
		}
		fprintf(out, "  %3u %-7s %-6s %-28s -> %-12s [%u, +%u)\n", s,
			sg_gpu_step_kind_name(st->kind), st->via <= 2 ? via[st->via] : "?", srcs, d,
			st->data_off, st->bytes);
	}
}
