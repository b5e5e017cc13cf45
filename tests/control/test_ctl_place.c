/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Placement: the BytePS split and predicted times against hand-computed
 * values, and weighted rendezvous hashing (balance, minimal movement, order
 * independence, bad input).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sg_ctl_place.h"
#include "sg_test.h"

#define NEAR(a, b, tol) SG_CHECK(fabs((a) - (b)) <= (tol), "%s = %.6f, want %.6f", #a, (a), (b))

static void test_split(void)
{
	double c, g;
	struct sg_ctl_model m;

	/* n=8, k=4: n^2+kn-2k = 64+32-8 = 88; CPU 2*7/88, GPU 4/88. */
	SG_CHECK_EQ(sg_ctl_split(8, 4, &c, &g), 0);
	NEAR(c, 14.0 / 88, 1e-12);
	NEAR(g, 4.0 / 88, 1e-12);
	NEAR(4 * c + 8 * g, 1.0, 1e-12);
	/* n=2, k=1: den 4; CPU 2/4, GPU 1/4. */
	SG_CHECK_EQ(sg_ctl_split(2, 1, &c, &g), 0);
	NEAR(c, 0.5, 1e-12);
	NEAR(g, 0.25, 1e-12);
	/* k >= n: CPU machines carry everything. */
	SG_CHECK_EQ(sg_ctl_split(4, 4, &c, &g), 0);
	NEAR(c, 0.25, 1e-12);
	NEAR(g, 0.0, 1e-12);
	SG_CHECK_EQ(sg_ctl_split(2, 5, &c, &g), 0);
	NEAR(c, 0.2, 1e-12);
	/* k=0: all-reduce style, each GPU machine 1/n. */
	SG_CHECK_EQ(sg_ctl_split(5, 0, &c, &g), 0);
	NEAR(g, 0.2, 1e-12);
	NEAR(c, 0.0, 1e-12);
	SG_CHECK_EQ(sg_ctl_split(0, 0, &c, &g), -EINVAL);
	SG_CHECK_EQ(sg_ctl_split(1, 1, NULL, &g), -EINVAL);

	/* The paper's example, in units of M/B: 1.27 vs 1.75 all-reduce vs 2.0 PS. */
	SG_CHECK_EQ(sg_ctl_model(8, 4, 1.0, 1.0, &m), 0);
	NEAR(m.t_sigma, 112.0 / 88, 1e-12);
	NEAR(m.t_sigma, 1.27, 0.005);
	NEAR(m.t_allreduce, 1.75, 1e-12);
	NEAR(m.t_ps, 2.0, 1e-12);
	NEAR(m.cpu_bytes, 14.0 / 88, 1e-12);
	NEAR(m.gpu_bytes, 4.0 / 88, 1e-12);
	NEAR(m.speedup_vs_allreduce, 1.75 / (112.0 / 88), 1e-12);
	/* Real units: 100 MB at 10 GB/s, n=8, k=8 -> M/B = 10 ms for Sigma and PS. */
	SG_CHECK_EQ(sg_ctl_model(8, 8, 100e6, 10e9, &m), 0);
	NEAR(m.t_sigma, 0.01, 1e-12);
	NEAR(m.t_ps, 0.01, 1e-12);
	NEAR(m.t_allreduce, 2.0 * 7 / 8 * 0.01, 1e-12);
	/* k=0: Sigma degenerates to all-reduce, PS impossible. */
	SG_CHECK_EQ(sg_ctl_model(4, 0, 1.0, 1.0, &m), 0);
	NEAR(m.t_sigma, 1.5, 1e-12);
	NEAR(m.t_allreduce, 1.5, 1e-12);
	SG_CHECK(isinf(m.t_ps), "t_ps = %f", m.t_ps);
	/* n=16, k=16 gives the 2x bound over all-reduce as n grows: 2*15/16. */
	SG_CHECK_EQ(sg_ctl_model(16, 16, 1.0, 1.0, &m), 0);
	NEAR(m.speedup_vs_allreduce, 30.0 / 16, 1e-12);
	SG_CHECK_EQ(sg_ctl_model(0, 4, 1.0, 1.0, &m), -EINVAL);
	SG_CHECK_EQ(sg_ctl_model(4, 4, 1.0, 0.0, &m), -EINVAL);
	SG_CHECK_EQ(sg_ctl_model(4, 4, NAN, 1.0, &m), -EINVAL);
	SG_CHECK_EQ(sg_ctl_model(4, 4, 1.0, 1.0, NULL), -EINVAL);
}

#define NKEYS 160000u

static char names[32][16];

static void make_nodes(struct sg_ctl_place_node *n, unsigned int cnt, unsigned int n_cpu)
{
	unsigned int i;

	for (i = 0; i < cnt; i++) {
		snprintf(names[i], sizeof(names[i]), "node%02u", i);
		n[i] = (struct sg_ctl_place_node){.name = names[i],
						  .kind = i < n_cpu ? SG_NODE_CPU : SG_NODE_GPU,
						  .gbps = 100,
						  .alive = true};
	}
}

static void test_balance(void)
{
	struct sg_ctl_place_node nodes[12];
	double w[12], c, g, sum = 0;
	unsigned int cnt[12] = {0}, i;

	/* 4 CPU + 8 GPU machines: each gets its BytePS share of the keys. */
	make_nodes(nodes, 12, 4);
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 12, w), 0);
	sg_ctl_split(8, 4, &c, &g);
	for (i = 0; i < 12; i++) {
		NEAR(w[i], i < 4 ? c : g, 1e-12);
		sum += w[i];
	}
	NEAR(sum, 1.0, 1e-12);
	for (i = 0; i < NKEYS; i++) {
		int o = sg_ctl_place_key(nodes, w, 12, sg_ctl_partition_key(i % 97, i / 97));

		SG_CHECK(o >= 0 && o < 12, "owner %d", o);
		if (o >= 0 && o < 12)
			cnt[o]++;
	}
	for (i = 0; i < 12; i++) {
		double want = w[i] * NKEYS;

		SG_CHECK(fabs(cnt[i] - want) < 0.05 * want, "node %u: %u keys, want %.0f", i,
			 cnt[i], want);
	}

	/* Bandwidth weights within a group: a 200 Gbps CPU node gets twice a 100 Gbps one. */
	nodes[0].gbps = 200;
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 12, w), 0);
	NEAR(w[0], 2 * w[1], 1e-12);
	NEAR(w[0] + w[1] + w[2] + w[3], 4 * c, 1e-12);

	/* Bad input and nobody alive. */
	nodes[0].gbps = 0;
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 12, w), -EINVAL);
	nodes[0].gbps = 100;
	nodes[1].name = NULL;
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 12, w), -EINVAL);
	nodes[1].name = names[1];
	nodes[2].kind = (enum sg_node_kind)7;
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 12, w), -EINVAL);
	nodes[2].kind = SG_NODE_CPU;
	for (i = 0; i < 12; i++)
		nodes[i].alive = false;
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 12, w), -ENOENT);
	for (i = 0; i < 12; i++)
		w[i] = 0;
	SG_CHECK_EQ(sg_ctl_place_key(nodes, w, 12, 42), -ENOENT);
	SG_CHECK_EQ(sg_ctl_place_key(NULL, w, 12, 42), -EINVAL);
}

static void test_movement(void)
{
	struct sg_ctl_place_node nodes[16], rev[16];
	double w[16], w2[16], wr[16];
	unsigned int i, moved = 0, wrong = 0, differs = 0;

	/* 16 CPU nodes; node 5 leaves. Only its keys may move, and they are ~1/16. */
	make_nodes(nodes, 16, 16);
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 16, w), 0);
	for (i = 0; i < 16; i++)
		rev[15 - i] = nodes[i];
	SG_CHECK_EQ(sg_ctl_place_weights(rev, 16, wr), 0);
	nodes[5].alive = false;
	SG_CHECK_EQ(sg_ctl_place_weights(nodes, 16, w2), 0);
	nodes[5].alive = true;
	for (i = 0; i < NKEYS; i++) {
		int a = sg_ctl_place_key(nodes, w, 16, i);
		int b = sg_ctl_place_key(nodes, w2, 16, i);
		int r = sg_ctl_place_key(rev, wr, 16, i);

		if (a != b) {
			moved++;
			wrong += a != 5;
		}
		SG_CHECK(b != 5, "key %u still on the dead node", i);
		/* Same names in another order: same owner by name. */
		differs += r < 0 || strcmp(rev[r].name, nodes[a].name) != 0;
	}
	SG_CHECK_EQ(wrong, 0);
	SG_CHECK_EQ(differs, 0);
	SG_CHECK(fabs((double)moved / NKEYS - 1.0 / 16) < 0.1 / 16, "moved %.4f of keys, want %.4f",
		 (double)moved / NKEYS, 1.0 / 16);
	printf("one node of 16 out: %.4f of the keys moved (ideal %.4f)\n", (double)moved / NKEYS,
	       1.0 / 16);
}

static void test_names(void)
{
	enum sg_node_kind k;

	SG_CHECK_EQ(sg_node_kind_from_name("gpu", &k), 0);
	SG_CHECK_EQ(k, SG_NODE_GPU);
	SG_CHECK_EQ(sg_node_kind_from_name("GPU ", &k), -EINVAL);
	SG_CHECK_EQ(sg_node_kind_from_name(NULL, &k), -EINVAL);
	SG_CHECK(strcmp(sg_node_kind_name(SG_NODE_CPU), "cpu") == 0, "cpu name");
	/* the role names docs/control.md gives lcores_get, layout_get and verbs_info */
	SG_CHECK(strcmp(sg_role_name(SG_ROLE_IO), "io") == 0, "io");
	SG_CHECK(strcmp(sg_role_name(SG_ROLE_REDUCE), "reducer") == 0, "reducer");
	SG_CHECK(strcmp(sg_role_name(SG_ROLE_RTC), "rtc") == 0, "rtc");
	SG_CHECK(strcmp(sg_role_name(SG_ROLE_CONTROL), "control") == 0, "control");
	SG_CHECK(strcmp(sg_role_name((enum sg_role)0), "unknown") == 0, "unknown");
	SG_CHECK_EQ(sg_ctl_partition_key(1, 2), (1ull << 32) | 2);
}

int main(void)
{
	test_split();
	test_balance();
	test_movement();
	test_names();
	return sg_test_finish("ctl_place");
}
