/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Heartbeat liveness: a silent node is declared lost, the epoch moves (a new
 * placement is due), its in-flight rounds fail with a clear error naming the
 * node, key and round, and nothing else is touched.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sg_ctl_members.h"
#include "sg_test.h"

#define MS 1000000ull

static struct sg_ctl_round_failure fails[16];
static char fail_msgs[16][256];
static unsigned int n_fails;

static void on_fail(void *arg, const struct sg_ctl_round_failure *f)
{
	(void)arg;
	if (n_fails < 16) {
		fails[n_fails] = *f;
		snprintf(fail_msgs[n_fails], sizeof(fail_msgs[0]), "%s", f->message);
		fails[n_fails].message = fail_msgs[n_fails];
		fails[n_fails].node = NULL; /* only valid during the callback */
	}
	n_fails++;
}

int main(void)
{
	struct sg_ctl_members *m;
	struct sg_ctl_member list[8];
	struct sg_ctl_place_node pn[8];
	double w[8];
	uint64_t e0, e1;
	int h1, h2, h3, n, i, owner_lost = 0;

	SG_CHECK(sg_ctl_members_create(0, 4, 4, NULL, NULL) == NULL && errno == EINVAL,
		 "zero timeout");
	m = sg_ctl_members_create(100 * MS, 4, 8, on_fail, NULL);
	SG_CHECK(m != NULL, "create");
	if (m == NULL)
		return sg_test_finish("ctl_members");
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "cpu0", SG_NODE_CPU, 100, 1 * MS), 0);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "cpu1", SG_NODE_CPU, 100, 1 * MS), 0);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "gpu0", SG_NODE_GPU, 25, 1 * MS), 0);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "gpu1", SG_NODE_GPU, 25, 1 * MS), 0);
	/* Bad input: counted out, never stored. */
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "gpu2", SG_NODE_GPU, 25, 1 * MS), -ENOSPC);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "", SG_NODE_GPU, 25, 1 * MS), -EINVAL);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "cpu0", SG_NODE_GPU + 5, 25, 1 * MS), -EINVAL);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "cpu0", SG_NODE_CPU, -1, 1 * MS), -EINVAL);
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "cpu0", SG_NODE_CPU, 0.0 / 0.0, 1 * MS), -EINVAL);
	{
		char longname[100];

		memset(longname, 'n', sizeof(longname) - 1);
		longname[99] = '\0';
		SG_CHECK_EQ(sg_ctl_members_heartbeat(m, longname, SG_NODE_CPU, 1, 1), -EINVAL);
	}
	SG_CHECK_EQ(sg_ctl_members_list(m, list, 8), 4);
	e0 = sg_ctl_members_epoch(m);

	h1 = sg_ctl_members_round_begin(m, "gpu1", 7, 0x100000002ull, 41);
	h2 = sg_ctl_members_round_begin(m, "gpu1", 7, 0x3, 42);
	h3 = sg_ctl_members_round_begin(m, "cpu0", 7, 0x4, 42);
	SG_CHECK(h1 >= 0 && h2 >= 0 && h3 >= 0, "round handles %d %d %d", h1, h2, h3);
	SG_CHECK_EQ(sg_ctl_members_round_begin(m, "nobody", 7, 1, 1), -ENOENT);
	SG_CHECK_EQ(sg_ctl_members_round_end(m, h2), 0);
	SG_CHECK_EQ(sg_ctl_members_round_end(m, h2), -EINVAL); /* stale handle */
	SG_CHECK_EQ(sg_ctl_members_round_end(m, 12345678), -EINVAL);

	/* Everyone but gpu1 keeps beating; at 150 ms gpu1 has been silent too long. */
	for (i = 0; i < 4; i++)
		if (i != 3)
			sg_ctl_members_heartbeat(m, (const char *[]){"cpu0", "cpu1", "gpu0"}[i], i < 2
						 ? SG_NODE_CPU : SG_NODE_GPU, i < 2 ? 100 : 25,
						 90 * MS);
	SG_CHECK_EQ(sg_ctl_members_check(m, 100 * MS), 0);
	SG_CHECK_EQ(n_fails, 0);
	SG_CHECK_EQ(sg_ctl_members_epoch(m), e0);
	SG_CHECK_EQ(sg_ctl_members_check(m, 150 * MS), 1);
	e1 = sg_ctl_members_epoch(m);
	SG_CHECK(e1 > e0, "epoch moved");
	/* Exactly the round still in flight on gpu1 failed, with a message that says it all. */
	SG_CHECK_EQ(n_fails, 1);
	SG_CHECK(fails[0].job == 7 && fails[0].key == 0x100000002ull && fails[0].round == 41 &&
			 fails[0].error == -EHOSTDOWN,
		 "failure fields");
	SG_CHECK(strstr(fail_msgs[0], "gpu1") && strstr(fail_msgs[0], "round 41") &&
			 strstr(fail_msgs[0], "0x100000002") && strstr(fail_msgs[0], "no heartbeat"),
		 "message: %s", fail_msgs[0]);
	SG_CHECK_EQ(sg_ctl_members_round_end(m, h1), -EINVAL); /* already failed */
	SG_CHECK_EQ(sg_ctl_members_round_begin(m, "gpu1", 7, 5, 43), -EHOSTDOWN);
	SG_CHECK_EQ(sg_ctl_members_check(m, 160 * MS), 0); /* reported once */

	/* The new placement leaves gpu1 out. */
	n = sg_ctl_members_place_nodes(m, pn, 8);
	SG_CHECK_EQ(n, 4);
	SG_CHECK_EQ(sg_ctl_place_weights(pn, (unsigned int)n, w), 0);
	for (i = 0; i < 10000; i++) {
		int o = sg_ctl_place_key(pn, w, (unsigned int)n, (uint64_t)i);

		owner_lost += o >= 0 && strcmp(pn[o].name, "gpu1") == 0;
	}
	SG_CHECK_EQ(owner_lost, 0);
	SG_CHECK_EQ(sg_ctl_members_place_nodes(m, pn, 2), -ENOSPC);

	/* gpu1 comes back: alive again, epoch moves again. */
	SG_CHECK_EQ(sg_ctl_members_heartbeat(m, "gpu1", SG_NODE_GPU, 25, 170 * MS), 0);
	SG_CHECK(sg_ctl_members_epoch(m) > e1, "epoch moved on return");
	sg_ctl_members_list(m, list, 8);
	SG_CHECK(list[3].alive, "gpu1 alive again");

	/* Removing a node on purpose fails its rounds too, and keeps others' handles valid. */
	h1 = sg_ctl_members_round_begin(m, "cpu0", 8, 9, 1);
	h2 = sg_ctl_members_round_begin(m, "gpu1", 8, 10, 1);
	SG_CHECK_EQ(sg_ctl_members_remove(m, "cpu0"), 0);
	SG_CHECK_EQ(n_fails, 3); /* h3 and h1, both on cpu0 */
	SG_CHECK(strstr(fail_msgs[2], "removed by the operator") != NULL, "remove message");
	SG_CHECK_EQ(sg_ctl_members_remove(m, "cpu0"), -ENOENT);
	SG_CHECK_EQ(sg_ctl_members_round_end(m, h2), 0);
	SG_CHECK_EQ(sg_ctl_members_list(m, NULL, 0), 3);
	sg_ctl_members_destroy(m);
	sg_ctl_members_destroy(NULL);
	return sg_test_finish("ctl_members");
}
