/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Plan checker: walks every copy of a plan along the topology, counts the
 * bytes each link carries in each direction, and reports each violation of
 * the two intra-machine principles.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu_internal.h"

/* Scratch tallies indexed by node (PCIe uplinks) and by NVLink edge. */
struct tally {
	uint64_t up[SG_GPU_MAX_NODES], down[SG_GPU_MAX_NODES];
	uint64_t nv_ab[SG_GPU_MAX_NVLINKS], nv_ba[SG_GPU_MAX_NVLINKS];
	uint64_t net_up, net_down; /* push/pull bytes on the NIC's link */
	int nic_link;
};

/*
 * Account a transfer from node a to node b: every uplink from a up to the
 * common ancestor carries it "up", every uplink down to b carries it "down".
 * Sockets have no parent: their uplink stands for the inter-socket link.
 */
static void path(const struct sg_gpu_topo *t, struct tally *y, int a, int b, uint64_t bytes,
		 bool net)
{
	int da = sg_gpu_topo_depth(t, a), db = sg_gpu_topo_depth(t, b);

	while (a != b) {
		if (da >= db && a >= 0) {
			y->up[a] += bytes;
			if (net && a == y->nic_link)
				y->net_up += bytes;
			a = t->nodes[a].parent;
			da--;
		} else if (b >= 0) {
			y->down[b] += bytes;
			if (net && b == y->nic_link)
				y->net_down += bytes;
			b = t->nodes[b].parent;
			db--;
		} else {
			break; /* both climbed out of their sockets: they met "between" */
		}
		if (a < 0 && b < 0)
			break;
	}
}

static int host_node(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p, unsigned h)
{
	for (unsigned i = 0; i < t->nnodes; i++)
		if (t->nodes[i].kind == SG_GPU_NODE_SOCKET && t->nodes[i].numa == p->host_numa[h])
			return (int)i;
	return -1; /* validated before: cannot happen */
}

static int ep_node(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p,
		   const struct sg_gpu_ep *e)
{
	switch (e->mem) {
	case SG_GPU_MEM_GRAD:
	case SG_GPU_MEM_SCRATCH:
		return t->gpu[e->idx];
	case SG_GPU_MEM_HOST:
		return host_node(t, p, e->idx);
	default:
		return t->nic[p->nic];
	}
}

static void nv_edge(const struct sg_gpu_topo *t, struct tally *y, int from, int to,
		    uint64_t bytes)
{
	int e = sg_gpu_topo_nvlink_edge(t, from, to);

	if (e < 0)
		return;
	if (t->nvlinks[e].a == from)
		y->nv_ab[e] += bytes;
	else
		y->nv_ba[e] += bytes;
}

/* NVLink copy from GPU node a to GPU node b; false when there is no NVLink path. */
static bool nv_path(const struct sg_gpu_topo *t, struct tally *y, int a, int b, uint64_t bytes)
{
	if (sg_gpu_topo_nvlink_edge(t, a, b) >= 0) {
		nv_edge(t, y, a, b, bytes);
		return true;
	}
	/*
	 * Through NVSwitches: the GPUs spread their traffic over every switch
	 * both reach, in proportion to the links each pair of edges can carry.
	 */
	uint64_t weight = 0, left = bytes;
	int last = -1;

	for (unsigned i = 0; i < t->nnodes; i++) {
		unsigned ca, cb;

		if (t->nodes[i].kind != SG_GPU_NODE_NVSWITCH)
			continue;
		ca = sg_gpu_topo_nvlinks(t, a, (int)i);
		cb = sg_gpu_topo_nvlinks(t, b, (int)i);
		weight += ca < cb ? ca : cb;
		if (ca > 0 && cb > 0)
			last = (int)i;
	}
	for (int i = 0; weight > 0 && i <= last; i++) {
		unsigned ca, cb;
		uint64_t share;

		if (t->nodes[i].kind != SG_GPU_NODE_NVSWITCH)
			continue;
		ca = sg_gpu_topo_nvlinks(t, a, i);
		cb = sg_gpu_topo_nvlinks(t, b, i);
		if (ca == 0 || cb == 0)
			continue;
		share = i == last ? left : bytes * (ca < cb ? ca : cb) / weight;
		left -= share;
		nv_edge(t, y, a, i, share);
		nv_edge(t, y, i, b, share);
	}
	return weight > 0;
}

static void violation(struct sg_gpu_report *rep, int principle, int step, uint64_t bytes,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void violation(struct sg_gpu_report *rep, int principle, int step, uint64_t bytes,
		      const char *fmt, ...)
{
	va_list ap;

	if (rep->nviolations < SG_GPU_MAX_VIOLATIONS) {
		struct sg_gpu_violation *v = &rep->violations[rep->nviolations];

		v->principle = principle;
		v->step = step;
		v->bytes = bytes;
		va_start(ap, fmt);
		vsnprintf(v->msg, sizeof(v->msg), fmt, ap);
		va_end(ap);
	}
	rep->nviolations++;
}

static void check_gpu_copy(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p,
			   struct tally *y, struct sg_gpu_report *rep, unsigned s)
{
	const struct sg_gpu_step *st = &p->steps[s];
	unsigned ga = st->src[0].idx, gb = st->dst.idx;
	int a = t->gpu[ga], b = t->gpu[gb];

	if (st->via == SG_GPU_VIA_NVLINK) {
		if (!nv_path(t, y, a, b, st->bytes)) {
			violation(rep, 1, (int)s, st->bytes,
				  "step %u: gpu%u -> gpu%u claims NVLink but none joins them", s, ga,
				  gb);
			path(t, y, a, b, st->bytes, false); /* it would really go over PCIe */
		}
		return;
	}
	path(t, y, a, b, st->bytes, false);
	if (!sg_gpu_topo_same_switch(t, ga, gb))
		violation(rep, 1, (int)s, st->bytes,
			  "step %u: %s gpu%u -> gpu%u over PCIe, not under one switch (%" PRIu32
			  " bytes through the root complex)",
			  s, sg_gpu_step_kind_name(st->kind), ga, gb, st->bytes);
}

/*
 * GPU traffic the NIC's uplink must carry anyway: one partition each way
 * when GPUs below the NIC's switch have no NVLink way out of it.
 */
static uint64_t unavoidable(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p, int top)
{
	bool inside = false, way_out = false;

	if (top < 0 || t->nodes[top].kind != SG_GPU_NODE_SWITCH)
		return 0;
	for (unsigned g = 0; g < t->ngpus; g++) {
		if (!sg_gpu_topo_below(t, t->gpu[g], top))
			continue;
		inside = true;
		for (unsigned h = 0; h < t->ngpus; h++)
			if (!sg_gpu_topo_below(t, t->gpu[h], top) && sg_gpu_topo_nvlink_path(t, g, h))
				way_out = true;
	}
	return inside && !way_out ? p->partition_bytes : 0;
}

/* Report the bytes one direction of the NIC's link carries beyond 'allowed'. */
static void nic_excess(const struct sg_gpu_topo *t, struct sg_gpu_report *rep, uint64_t carried,
		       uint64_t allowed, const char *dir)
{
	if (carried <= allowed)
		return;
	violation(rep, 2, -1, carried - allowed,
		  "%s uplink (shared with the NIC) carries %" PRIu64 " bytes %s the CPU, %" PRIu64
		  " more than the unavoidable %" PRIu64,
		  t->nodes[rep->nic_link].name, carried, dir, carried - allowed, allowed);
}

static void fill_links(const struct sg_gpu_topo *t, const struct tally *y,
		       struct sg_gpu_report *rep)
{
	for (unsigned n = 0; n < t->nnodes; n++) {
		if (y->up[n] == 0 && y->down[n] == 0)
			continue;
		rep->links[rep->nlinks++] = (struct sg_gpu_link_bytes){
			.kind = t->nodes[n].kind == SG_GPU_NODE_SOCKET ? SG_GPU_LINK_SOCKET
								       : SG_GPU_LINK_PCIE,
			.node = (int)n, .up = y->up[n], .down = y->down[n]};
	}
	for (unsigned e = 0; e < t->nnvlinks; e++) {
		if (y->nv_ab[e] == 0 && y->nv_ba[e] == 0)
			continue;
		rep->links[rep->nlinks++] = (struct sg_gpu_link_bytes){
			.kind = SG_GPU_LINK_NVLINK, .node = (int)e, .up = y->nv_ab[e],
			.down = y->nv_ba[e]};
	}
}

int sg_gpu_plan_check(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p,
		      struct sg_gpu_report *rep, char *err, size_t errlen)
{
	struct tally *y;
	uint64_t extra;
	int rc, nic, top;

	rc = sg_gpu_plan_validate(t, p, err, errlen);
	if (rc < 0)
		return rc;
	y = calloc(1, sizeof(*y));
	if (y == NULL)
		return -ENOMEM;
	memset(rep, 0, sizeof(*rep));
	nic = t->nic[p->nic];
	top = sg_gpu_topo_top_switch(t, nic);
	y->nic_link = top >= 0 ? top : nic;
	rep->nic_link = y->nic_link;
	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];
		int d = ep_node(t, p, &st->dst);

		switch (st->kind) {
		case SG_GPU_STEP_P2P:
		case SG_GPU_STEP_BCAST:
			check_gpu_copy(t, p, y, rep, s);
			break;
		case SG_GPU_STEP_REDUCE:
			break; /* on one GPU: no link */
		case SG_GPU_STEP_CPU_SUM:
			/* The CPU reads remote sources across the inter-socket link. */
			for (unsigned i = 0; i < st->nsrc; i++)
				path(t, y, ep_node(t, p, &st->src[i]), d, st->bytes, false);
			break;
		default:
			path(t, y, ep_node(t, p, &st->src[0]), d, st->bytes,
			     st->kind == SG_GPU_STEP_PUSH || st->kind == SG_GPU_STEP_PULL);
			break;
		}
	}
	/* Principle 2 on the NIC's switch-to-CPU link. */
	extra = unavoidable(t, p, top);
	rep->nic_allowed_up = y->net_up + extra;
	rep->nic_allowed_down = y->net_down + extra;
	nic_excess(t, rep, y->up[y->nic_link], rep->nic_allowed_up, "towards");
	nic_excess(t, rep, y->down[y->nic_link], rep->nic_allowed_down, "from");
	fill_links(t, y, rep);
	free(y);
	return 0;
}

int sg_gpu_report_pcie(const struct sg_gpu_report *rep, int node, uint64_t *up,
		       uint64_t *down)
{
	*up = 0;
	*down = 0;
	for (unsigned i = 0; i < rep->nlinks; i++) {
		if (rep->links[i].kind != SG_GPU_LINK_NVLINK && rep->links[i].node == node) {
			*up = rep->links[i].up;
			*down = rep->links[i].down;
			return 0;
		}
	}
	return -ENOENT;
}

void sg_gpu_link_name(const struct sg_gpu_topo *t, const struct sg_gpu_link_bytes *l,
		      char *buf, size_t len)
{
	if (l->kind == SG_GPU_LINK_NVLINK && (unsigned)l->node < t->nnvlinks) {
		const struct sg_gpu_nvlink *e = &t->nvlinks[l->node];

		snprintf(buf, len, "%s<=>%s", t->nodes[e->a].name, t->nodes[e->b].name);
	} else if (l->kind == SG_GPU_LINK_SOCKET && (unsigned)l->node < t->nnodes) {
		snprintf(buf, len, "%s<->other-sockets", t->nodes[l->node].name);
	} else if ((unsigned)l->node < t->nnodes && t->nodes[l->node].parent >= 0) {
		snprintf(buf, len, "%s<->%s", t->nodes[l->node].name,
			 t->nodes[t->nodes[l->node].parent].name);
	} else {
		snprintf(buf, len, "?");
	}
}

void sg_gpu_report_print(const struct sg_gpu_topo *t, const struct sg_gpu_report *rep,
			 bool violations, FILE *out)
{
	char name[80];

	fprintf(out, "links (bytes per partition; up = towards the CPU, nvlink: a->b / b->a):\n");
	for (unsigned i = 0; i < rep->nlinks; i++) {
		const struct sg_gpu_link_bytes *l = &rep->links[i];

		sg_gpu_link_name(t, l, name, sizeof(name));
		fprintf(out, "  %-6s %-36s up %12" PRIu64 "  down %12" PRIu64 "%s\n",
			l->kind == SG_GPU_LINK_NVLINK ? "nvlink"
			: l->kind == SG_GPU_LINK_SOCKET ? "socket" : "pcie",
			name, l->up, l->down,
			l->kind != SG_GPU_LINK_NVLINK && l->node == rep->nic_link ? "  (NIC's link)"
										     : "");
	}
	fprintf(out, "NIC's link %s: allowed up %" PRIu64 ", down %" PRIu64 "\n",
		(unsigned)rep->nic_link < t->nnodes ? t->nodes[rep->nic_link].name : "?",
		rep->nic_allowed_up, rep->nic_allowed_down);
	if (!violations)
		return;
	fprintf(out, "violations: %u\n", rep->nviolations);
	for (unsigned i = 0; i < rep->nviolations && i < SG_GPU_MAX_VIOLATIONS; i++)
		fprintf(out, "  principle %d: %s\n", rep->violations[i].principle,
			rep->violations[i].msg);
}
