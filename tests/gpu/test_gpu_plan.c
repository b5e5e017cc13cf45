/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Planner and checker on the reference topologies. The expected bytes per
 * link are worked out by hand in the comments (M = one partition), and naive
 * plans must be flagged.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define M 4096000ull /* the default partition */

static struct sg_gpu_plan *plan(const struct sg_gpu_topo *t, enum sg_gpu_strategy s, int root)
{
	struct sg_gpu_plan_opts o = {.strategy = s, .root = root};
	char err[256] = "";
	struct sg_gpu_plan *p = sg_gpu_plan_build(t, &o, err, sizeof(err));

	SG_CHECK(p != NULL, "plan %s on %s: %s", sg_gpu_strategy_name(s), t->name, err);
	if (p == NULL)
		exit(1);
	SG_CHECK_EQ(sg_gpu_plan_validate(t, p, err, sizeof(err)), 0);
	return p;
}

static void check(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p,
		  struct sg_gpu_report *rep)
{
	char err[256] = "";

	SG_CHECK(sg_gpu_plan_check(t, p, rep, err, sizeof(err)) == 0, "check: %s", err);
}

/* Expect the PCIe uplink of the named node to carry (up, down). */
static void expect_link(const struct sg_gpu_topo *t, const struct sg_gpu_report *rep,
			const char *node, uint64_t up, uint64_t down)
{
	uint64_t u, d;
	int n = sg_gpu_topo_find(t, node);

	SG_CHECK(n >= 0, "no node %s", node);
	sg_gpu_report_pcie(rep, n, &u, &d);
	SG_CHECK(u == up && d == down, "%s %s: up %llu down %llu, want %llu %llu", t->name, node,
		 (unsigned long long)u, (unsigned long long)d, (unsigned long long)up,
		 (unsigned long long)down);
}

static unsigned count_principle(const struct sg_gpu_report *rep, int principle)
{
	unsigned n = 0;

	for (unsigned i = 0; i < rep->nviolations && i < SG_GPU_MAX_VIOLATIONS; i++)
		n += rep->violations[i].principle == principle;
	return n;
}

/* Direct PCIe copies between GPUs of different switches in the plan. */
static unsigned cross_switch_copies(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p)
{
	unsigned n = 0;

	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];

		if ((st->kind == SG_GPU_STEP_P2P || st->kind == SG_GPU_STEP_BCAST) &&
		    st->via == SG_GPU_VIA_PCIE &&
		    !sg_gpu_topo_same_switch(t, st->src[0].idx, st->dst.idx))
			n++;
	}
	return n;
}

static void test_pcie8(void)
{
	struct sg_gpu_topo *t = load_ref("pcie-8gpu.topo");
	struct sg_gpu_plan *p = plan(t, SG_GPU_STRAT_AUTO, 0);
	struct sg_gpu_report rep;

	SG_CHECK(strcmp(p->strategy, "cpu-assisted") == 0, "strategy %s", p->strategy);
	check(t, p, &rep);
	SG_CHECK_EQ(rep.nviolations, 0);
	SG_CHECK_EQ(cross_switch_copies(t, p), 0);
	/*
	 * Pair (gpu0, gpu1) reduce-scatters: each sends the other M/2, each
	 * sends its reduced M/2 to the host, receives M/2 back and sends M/2 in
	 * the all-gather: 3M/2 each way on every GPU link.
	 */
	for (unsigned g = 0; g < 8; g++) {
		char name[8];

		snprintf(name, sizeof(name), "gpu%u", g);
		expect_link(t, &rep, name, 3 * M / 2, 3 * M / 2);
	}
	/* Each switch uplink: its group's M up and M down; sw0 adds pull (up), push (down). */
	expect_link(t, &rep, "sw0", 2 * M, 2 * M);
	expect_link(t, &rep, "sw1", M, M);
	expect_link(t, &rep, "sw2", M, M);
	expect_link(t, &rep, "sw3", M, M);
	expect_link(t, &rep, "nic0", M, M);
	/* cpu1 sums its two switches and ships one M across, then gets M back. */
	expect_link(t, &rep, "cpu0", M, M);
	expect_link(t, &rep, "cpu1", M, M);
	SG_CHECK_EQ(rep.nic_link, sg_gpu_topo_find(t, "sw0"));
	SG_CHECK_EQ(rep.nic_allowed_up, 2 * M); /* pull + the switch's own M */
	sg_gpu_plan_free(p);

	/*
	 * The naive ring: 4 of the 8 ring hops cross switches, 7 reduce-scatter
	 * and 7 all-gather rounds: 56 bad copies, plus gpu0's broadcast to the
	 * 6 GPUs of other switches: 62. sw0 up: gpu1->gpu2 carries 14 chunks of
	 * M/8, plus D2H M, pull M, and 6 broadcasts of M: 39936000.
	 */
	p = plan(t, SG_GPU_STRAT_RING, 0);
	check(t, p, &rep);
	SG_CHECK_EQ(count_principle(&rep, 1), 62);
	SG_CHECK_EQ(count_principle(&rep, 2), 2);
	expect_link(t, &rep, "sw0", 14 * M / 8 + 2 * M + 6 * M, 14 * M / 8 + 2 * M);
	SG_CHECK_EQ(rep.violations[rep.nviolations - 2].bytes, 14 * M / 8 + 6 * M);
	SG_CHECK_EQ(rep.violations[rep.nviolations - 1].bytes, 14 * M / 8);
	sg_gpu_plan_free(p);

	/* No NVLink here: those strategies are refused with a reason. */
	{
		struct sg_gpu_plan_opts o = {.strategy = SG_GPU_STRAT_NVLINK_TREE};
		char err[256] = "";

		SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "nvlink on PCIe");
		SG_CHECK(strstr(err, "NVLink") != NULL, "reason: %s", err);
	}
	sg_gpu_topo_free(t);
}

static void test_dgx1(void)
{
	struct sg_gpu_topo *t = load_ref("dgx1-nvlink.topo");
	struct sg_gpu_plan *p = plan(t, SG_GPU_STRAT_AUTO, 0);
	struct sg_gpu_report rep;

	SG_CHECK(strcmp(p->strategy, "nvlink-tree") == 0, "strategy %s", p->strategy);
	/* Root: not on sw0 (the NIC's), on the NIC's socket, most links: gpu2. */
	SG_CHECK_EQ(p->root, 2);
	check(t, p, &rep);
	SG_CHECK_EQ(rep.nviolations, 0);
	/* Only the root touches PCIe: D2H M up, H2D M down. */
	expect_link(t, &rep, "gpu2", M, M);
	expect_link(t, &rep, "sw1", M, M);
	for (unsigned g = 0; g < 8; g++) {
		char name[8];

		snprintf(name, sizeof(name), "gpu%u", g);
		if (g != 2)
			expect_link(t, &rep, name, 0, 0);
	}
	/* The NIC's uplink carries exactly push (down) and pull (up). */
	expect_link(t, &rep, "sw0", M, M);
	SG_CHECK_EQ(rep.nic_allowed_up, M);
	SG_CHECK_EQ(rep.nic_allowed_down, M);
	expect_link(t, &rep, "cpu0", 0, 0);
	/* Tree: every non-root GPU sends M up its edge and gets M back: 7 edges used. */
	{
		unsigned nv = 0;

		for (unsigned i = 0; i < rep.nlinks; i++) {
			if (rep.links[i].kind != SG_GPU_LINK_NVLINK)
				continue;
			nv++;
			SG_CHECK(rep.links[i].up + rep.links[i].down == 2 * M, "edge total");
		}
		SG_CHECK_EQ(nv, 7);
	}
	sg_gpu_plan_free(p);

	/* Root forced onto the NIC's switch: principle 2, M too much each way. */
	p = plan(t, SG_GPU_STRAT_NVLINK_TREE, 0 + 1);
	check(t, p, &rep);
	SG_CHECK_EQ(count_principle(&rep, 1), 0);
	SG_CHECK_EQ(count_principle(&rep, 2), 2);
	SG_CHECK_EQ(rep.violations[0].bytes, M);
	expect_link(t, &rep, "sw0", 2 * M, 2 * M);
	sg_gpu_plan_free(p);

	/* CPU-assisted also works here (P2P only inside switches). */
	p = plan(t, SG_GPU_STRAT_CPU_ASSISTED, 0);
	check(t, p, &rep);
	SG_CHECK_EQ(count_principle(&rep, 1), 0);
	/* ...but NVLink gives gpu0/gpu1 a way out, so their M on sw0 is avoidable. */
	SG_CHECK_EQ(count_principle(&rep, 2), 2);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

static void test_nvswitch(void)
{
	struct sg_gpu_topo *t = load_ref("dgx-h100-nvswitch.topo");
	struct sg_gpu_plan *p = plan(t, SG_GPU_STRAT_AUTO, 0);
	struct sg_gpu_report rep;
	uint64_t total_up = 0, total_down = 0;

	SG_CHECK(strcmp(p->strategy, "nvswitch") == 0, "strategy %s", p->strategy);
	SG_CHECK_EQ(p->root, 1); /* gpu0 shares sw0 with nic0 */
	check(t, p, &rep);
	SG_CHECK_EQ(rep.nviolations, 0);
	expect_link(t, &rep, "gpu1", M, M);
	expect_link(t, &rep, "gpu0", 0, 0);
	expect_link(t, &rep, "sw0", M, M);
	expect_link(t, &rep, "nic0", M, M);
	/*
	 * GPU-to-NVSwitch traffic, summed over the four switches: reduce-scatter
	 * moves 8*7 slices of M/8 out of GPUs; the gather 7 slices; the scatter 7
	 * and the all-gather 8*7 - 7 (nobody re-sends to the root): 2*56 + 14 - 7
	 * = 119 slices out of GPUs, and as many into them.
	 */
	for (unsigned i = 0; i < rep.nlinks; i++) {
		if (rep.links[i].kind == SG_GPU_LINK_NVLINK) {
			total_up += rep.links[i].up;
			total_down += rep.links[i].down;
		}
	}
	SG_CHECK_EQ(total_up, 119 * M / 8);
	SG_CHECK_EQ(total_down, 119 * M / 8);
	SG_CHECK_EQ(p->scratch_slots, 7);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

static void test_workstation(void)
{
	struct sg_gpu_topo *t = load_ref("ws-4gpu.topo");
	struct sg_gpu_plan *p = plan(t, SG_GPU_STRAT_AUTO, 0);
	struct sg_gpu_report rep;
	unsigned cpu_sums = 0;

	SG_CHECK(strcmp(p->strategy, "cpu-assisted") == 0, "strategy %s", p->strategy);
	check(t, p, &rep);
	SG_CHECK_EQ(rep.nviolations, 0);
	for (unsigned s = 0; s < p->nsteps; s++)
		cpu_sums += p->steps[s].kind == SG_GPU_STEP_CPU_SUM;
	SG_CHECK_EQ(cpu_sums, 0); /* one switch: nothing for the CPU to add */
	/* Each GPU: 3 slices of M/4 out, its slice to the host, 3 in the all-gather. */
	expect_link(t, &rep, "gpu0", 7 * M / 4, 7 * M / 4);
	expect_link(t, &rep, "sw0", M, M);
	expect_link(t, &rep, "nic0", M, M);
	SG_CHECK_EQ(rep.nic_link, t->nic[0]); /* the NIC has a root port to itself */
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

/* A hand-written plan that claims NVLink where there is none. */
static void test_custom_plans(void)
{
	struct sg_gpu_topo *t = load_ref("pcie-8gpu.topo");
	struct sg_gpu_plan *p = sg_gpu_plan_new(8, 1024, 4);
	struct sg_gpu_step st = {.kind = SG_GPU_STEP_BCAST, .via = SG_GPU_VIA_NVLINK, .nsrc = 1,
				 .dst = {.mem = SG_GPU_MEM_GRAD, .idx = 5},
				 .src = {{.mem = SG_GPU_MEM_GRAD, .idx = 0}},
				 .bytes = 1024};
	struct sg_gpu_report rep;
	char err[256];

	p->nic = 0;
	SG_CHECK_EQ(sg_gpu_plan_add(p, &st), 0);
	check(t, p, &rep);
	SG_CHECK_EQ(count_principle(&rep, 1), 1);
	SG_CHECK(strstr(rep.violations[0].msg, "claims NVLink") != NULL, "%s",
		 rep.violations[0].msg);
	/* Same switch over PCIe: fine. */
	p->steps[0].via = SG_GPU_VIA_PCIE;
	p->steps[0].dst.idx = 1;
	check(t, p, &rep);
	SG_CHECK_EQ(rep.nviolations, 0);
	expect_link(t, &rep, "gpu0", 1024, 0);
	expect_link(t, &rep, "sw0", 0, 0);

	/* Malformed plans are rejected with a reason, never crash the checker. */
	static const struct {
		struct sg_gpu_step st;
		const char *why;
	} bad[] = {
		{{.kind = 99, .nsrc = 1, .bytes = 4}, "kind"},
		{{.kind = SG_GPU_STEP_D2H, .nsrc = 1, .bytes = 0}, "outside"},
		{{.kind = SG_GPU_STEP_D2H, .nsrc = 1, .data_off = 1020, .bytes = 8}, "outside"},
		{{.kind = SG_GPU_STEP_D2H, .nsrc = 1, .bytes = 4, .dst = {.mem = SG_GPU_MEM_HOST,
									  .idx = 3}},
		 "host buffer"},
		{{.kind = SG_GPU_STEP_D2H, .nsrc = 2, .bytes = 4}, "sources"},
		{{.kind = SG_GPU_STEP_PUSH, .nsrc = 1, .bytes = 4}, "cannot write"},
		{{.kind = SG_GPU_STEP_P2P, .via = SG_GPU_VIA_PCIE, .nsrc = 1, .bytes = 4,
		  .src = {{.mem = SG_GPU_MEM_GRAD, .idx = 9}}},
		 "out of range"},
		{{.kind = SG_GPU_STEP_P2P, .via = SG_GPU_VIA_PCIE, .nsrc = 1, .bytes = 4,
		  .dst = {.mem = SG_GPU_MEM_SCRATCH, .idx = 1, .slot = 3}},
		 "slot"},
		{{.kind = SG_GPU_STEP_REDUCE, .nsrc = 1, .bytes = 4,
		  .src = {{.mem = SG_GPU_MEM_GRAD, .idx = 0}}},
		 "reduce sources"},
		{{.kind = SG_GPU_STEP_BCAST, .via = SG_GPU_VIA_NONE, .nsrc = 1, .bytes = 4,
		  .dst = {.mem = SG_GPU_MEM_GRAD, .idx = 1}},
		 "GPU-to-GPU"},
		{{.kind = SG_GPU_STEP_H2H, .nsrc = 1, .bytes = 4,
		  .dst = {.mem = SG_GPU_MEM_HOST}, .src = {{.mem = SG_GPU_MEM_HOST}}},
		 "itself"},
		{{.kind = SG_GPU_STEP_D2H, .via = 7, .nsrc = 1, .bytes = 4,
		  .dst = {.mem = SG_GPU_MEM_HOST}},
		 "link class"},
	};
	p->nhost = 1;
	p->host_numa[0] = 0;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p->steps[0] = bad[i].st;
		err[0] = '\0';
		SG_CHECK(sg_gpu_plan_check(t, p, &rep, err, sizeof(err)) == -EINVAL, "bad %u", i);
		SG_CHECK(strstr(err, bad[i].why) != NULL, "bad %u: '%s' lacks '%s'", i, err,
			 bad[i].why);
	}
	p->steps[0] = bad[0].st;
	p->host_numa[0] = 7;
	SG_CHECK_EQ(sg_gpu_plan_validate(t, p, err, sizeof(err)), -EINVAL);
	SG_CHECK(strstr(err, "NUMA") != NULL, "%s", err);
	p->host_numa[0] = 0;
	p->nic = 3;
	SG_CHECK_EQ(sg_gpu_plan_validate(t, p, err, sizeof(err)), -EINVAL);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

/* Random corruption of real plans: validate and check never crash. */
static void test_mutations(void)
{
	struct sg_gpu_report rep;
	char err[256];
	unsigned rejected = 0, total = 0;

	srand(11);
	for (unsigned f = 0; f < NREF; f++) {
		struct sg_gpu_topo *t = load_ref(ref_files[f]);
		struct sg_gpu_plan *p = plan(t, SG_GPU_STRAT_AUTO, 0);

		for (unsigned iter = 0; iter < 2000; iter++) {
			unsigned s = (unsigned)rand() % p->nsteps;
			struct sg_gpu_step save = p->steps[s];
			uint8_t *b = (uint8_t *)&p->steps[s];

			b[(unsigned)rand() % sizeof(save)] = (uint8_t)rand();
			if (sg_gpu_plan_check(t, p, &rep, err, sizeof(err)) < 0)
				rejected++;
			total++;
			p->steps[s] = save;
		}
		SG_CHECK_EQ(sg_gpu_plan_check(t, p, &rep, err, sizeof(err)), 0);
		sg_gpu_plan_free(p);
		sg_gpu_topo_free(t);
	}
	printf("mutations: %u of %u rejected as malformed\n", rejected, total);
	SG_CHECK(rejected > 0, "some mutation must be malformed");
}

static void test_build_errors(void)
{
	struct sg_gpu_topo *t = load_ref("ws-4gpu.topo"), *nonic;
	struct sg_gpu_plan_opts o;
	struct sg_gpu_plan *p;
	char err[256];

	o = (struct sg_gpu_plan_opts){.nic = 5};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL && errno == EINVAL, "nic");
	o = (struct sg_gpu_plan_opts){.root = 9};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "root");
	o = (struct sg_gpu_plan_opts){.partition_bytes = 1001};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "partition");
	o = (struct sg_gpu_plan_opts){.align = 48};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "align");
	o = (struct sg_gpu_plan_opts){.strategy = SG_GPU_STRAT_NVSWITCH};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "nvswitch");
	o = (struct sg_gpu_plan_opts){.strategy = 42};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "strategy");
	o = (struct sg_gpu_plan_opts){.strategy = SG_GPU_STRAT_CPU_ASSISTED, .root = 1};
	SG_CHECK(sg_gpu_plan_build(t, &o, err, sizeof(err)) == NULL, "cpu-assisted root");
	nonic = sg_gpu_topo_parse("socket c\nroot r parent=c\ngpu g parent=r\n", "x", err,
				  sizeof(err));
	SG_CHECK(nonic != NULL, "%s", err);
	SG_CHECK(sg_gpu_plan_build(nonic, NULL, err, sizeof(err)) == NULL, "no nic");
	SG_CHECK(strstr(err, "no NIC") != NULL, "%s", err);
	sg_gpu_topo_free(nonic);
	/* A tiny partition leaves most slices empty; the plan stays valid. */
	o = (struct sg_gpu_plan_opts){.partition_bytes = 4, .align = 4};
	p = sg_gpu_plan_build(t, &o, err, sizeof(err));
	SG_CHECK(p != NULL, "tiny: %s", err);
	if (p != NULL)
		SG_CHECK_EQ(sg_gpu_plan_validate(t, p, err, sizeof(err)), 0);
	sg_gpu_plan_free(p);
	SG_CHECK(strcmp(sg_gpu_strategy_name(SG_GPU_STRAT_RING), "ring") == 0, "name");
	SG_CHECK(strcmp(sg_gpu_strategy_name(77), "unknown") == 0, "name");
	SG_CHECK(strcmp(sg_gpu_step_kind_name(SG_GPU_STEP_CPU_SUM), "cpu-sum") == 0, "kind");
	sg_gpu_topo_free(t);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		topo_dir = argv[1];
	test_pcie8();
	test_dgx1();
	test_nvswitch();
	test_workstation();
	test_custom_plans();
	test_mutations();
	test_build_errors();
	return sg_test_finish("gpu_plan");
}
