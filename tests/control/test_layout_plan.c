/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl layout suggest's planner against loads worked out by hand: an
 * uneven pair of reducers gets a keymap that moves buckets from the busy one
 * only, and the estimate it prints is the hand-computed one; even reducers, a
 * single reducer, a busy receiver and an idle node each get their own advice
 * with the exact layout flags; inconsistent input is refused.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sg_test.h"
#include "sigmactl_layout.h"

static struct lay_in in;
static struct lay_advice a;

static void lcore(uint32_t id, enum sg_role role, int port, int queue, double busy, int red)
{
	in.lc[in.n++] = (struct lay_lcore){.lcore = id, .role = role, .port = port, .queue = queue,
					   .busy = busy, .reducer = red};
}

/* io lcore 1 on (0,0); reducers 2, 3 (and 4 with @three) with the given loads */
static void io_reduce(double io, double r0, double r1, int three, double r2)
{
	memset(&in, 0, sizeof(in));
	lcore(1, SG_ROLE_IO, 0, 0, io, -1);
	lcore(2, SG_ROLE_REDUCE, -1, -1, r0, 0);
	lcore(3, SG_ROLE_REDUCE, -1, -1, r1, 1);
	if (three)
		lcore(4, SG_ROLE_REDUCE, -1, -1, r2, 2);
	in.n_reducers = three ? 3 : 2;
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		in.keymap[b] = (uint16_t)(b % in.n_reducers);
}

static void test_uneven_reducers(void)
{
	unsigned int moved = 0, b, on[2] = {0};

	/* 32 buckets each; reducer 0 at 90% (2.8125% a bucket), reducer 1 at 30%. After k
	 * moves: 90 - 2.8125k and 30 + 2.8125k. The 11th move still lowers the busiest
	 * (61.875% -> 60.94%, now reducer 1's); a 12th cannot (reducer 1 took, it does not
	 * give): 11 buckets, 59.06% / 60.94% */
	io_reduce(0.2, 0.9, 0.3, 0, 0);
	SG_CHECK_EQ(lay_plan(&in, "unix:/n.sock", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_KEYMAP);
	SG_CHECK_EQ(in.lc[a.bottleneck].lcore, 2);
	for (b = 0; b < SG_BUCKETS; b++) {
		SG_CHECK(a.keymap[b] < 2, "bucket %u to reducer %u", b, a.keymap[b]);
		on[a.keymap[b]]++;
		if (a.keymap[b] != in.keymap[b]) {
			/* only from the busy reducer to the idle one */
			SG_CHECK(in.keymap[b] == 0 && a.keymap[b] == 1, "bucket %u moved %u -> %u", b,
				 in.keymap[b], a.keymap[b]);
			moved++;
		}
	}
	SG_CHECK_EQ(moved, a.moved);
	SG_CHECK_EQ(a.moved, 11);
	SG_CHECK_EQ(on[0], 21);
	SG_CHECK_EQ(on[1], 43);
	SG_CHECK(fabs(a.after[0] - (0.9 - 11 * 0.9 / 32)) < 1e-9, "after[0] %f", a.after[0]);
	SG_CHECK(fabs(a.after[1] - (0.3 + 11 * 0.9 / 32)) < 1e-9, "after[1] %f", a.after[1]);
	SG_CHECK(fabs(a.after[0] + a.after[1] - 1.2) < 1e-9, "the load is moved, not lost");
	SG_CHECK(strncmp(a.command, "sigmactl -s unix:/n.sock layout set keymap=", 43) == 0,
		 "%s", a.command);
	/* the command is the keymap, all 64 entries */
	{
		const char *p = a.command + 43;

		for (b = 0; b < SG_BUCKETS; b++) {
			unsigned int v;
			int n;

			SG_CHECK(sscanf(p, "%u%n", &v, &n) == 1 && v == a.keymap[b], "entry %u: %s", b,
				 p);
			p += n;
			if (b + 1 < SG_BUCKETS)
				SG_CHECK(*p++ == ',', "separator after %u", b);
		}
		SG_CHECK(*p == '\0', "trailing '%s'", p);
	}
	SG_CHECK(strstr(a.why, "lcore 2 (reducer) is 90% busy while the least busy reducer is "
			       "at 30%: moving 11 of its buckets") != NULL, "%s", a.why);
	SG_CHECK(strstr(a.why, "about 61%") != NULL, "%s", a.why);

	/* three reducers, one hot: buckets go to both others */
	io_reduce(0.1, 0.3, 0.95, 1, 0.3);
	SG_CHECK_EQ(lay_plan(&in, "h:1", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_KEYMAP);
	SG_CHECK(a.after[1] < 0.6 && a.after[0] > 0.3 && a.after[2] > 0.3,
		 "after %.3f %.3f %.3f", a.after[0], a.after[1], a.after[2]);
	for (b = 0; b < SG_BUCKETS; b++)
		if (a.keymap[b] != in.keymap[b])
			SG_CHECK(in.keymap[b] == 1, "bucket %u moved from %u", b, in.keymap[b]);
}

static void test_even_or_single(void)
{
	/* both reducers hot and even: nothing to move, add a reducer (lcore 4) */
	io_reduce(0.4, 0.9, 0.88, 0, 0);
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_ADD_REDUCER);
	SG_CHECK_EQ(a.moved, 0);
	SG_CHECK(memcmp(a.keymap, in.keymap, sizeof(a.keymap)) == 0, "keymap untouched");
	SG_CHECK(strcmp(a.command, "--io \"(0,0,1)\" --reduce 2,3,4") == 0, "%s", a.command);
	SG_CHECK(strstr(a.why, "the reducers are even") != NULL, "%s", a.why);
	/* a gain under LAY_MIN_GAIN is not worth a change: 80/72 can only reach 76 */
	io_reduce(0.4, 0.8, 0.72, 0, 0);
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_ADD_REDUCER);
	/* one rtc lcore, hot: another rtc lcore on the next RX queue */
	memset(&in, 0, sizeof(in));
	lcore(1, SG_ROLE_RTC, 0, 0, 0.97, 0);
	in.n_reducers = 1;
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_ADD_REDUCER);
	SG_CHECK(strcmp(a.command, "--rtc \"(0,0,1),(0,1,2)\"") == 0, "%s", a.command);
	SG_CHECK(strstr(a.why, "it is the only reducer") != NULL, "%s", a.why);
	SG_CHECK(strstr(a.why, "one more RX queue") != NULL, "%s", a.why);
}

static void test_receiver(void)
{
	/* the io lcore hot, the reducers idle: one more RX queue and io lcore */
	io_reduce(1.0, 0.05, 0.0, 0, 0);
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_ADD_RX);
	SG_CHECK_EQ(in.lc[a.bottleneck].lcore, 1);
	SG_CHECK(strcmp(a.command, "--io \"(0,0,1),(0,1,4)\" --reduce 2,3") == 0, "%s", a.command);
	/* ... with the reducers hot too: both */
	io_reduce(0.99, 0.9, 0.9, 0, 0);
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_ADD_RX);
	SG_CHECK(strcmp(a.command, "--io \"(0,0,1),(0,1,4)\" --reduce 2,3,5") == 0, "%s",
		 a.command);
	SG_CHECK(strstr(a.why, "the reducers are busy too") != NULL, "%s", a.why);
}

static void test_idle_and_bad(void)
{
	io_reduce(0.3, 0.69, 0.1, 0, 0);
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.kind, LAY_NOTHING);
	SG_CHECK_EQ(a.command[0], '\0');
	SG_CHECK(strstr(a.why, "no bottleneck: the busiest lcore, 2 (reducer), is 69% busy") !=
			 NULL, "%s", a.why);
	/* no lcores: no bottleneck, nothing */
	memset(&in, 0, sizeof(in));
	SG_CHECK_EQ(lay_plan(&in, "t", &a), 0);
	SG_CHECK_EQ(a.bottleneck, -1);
	/* inconsistent: a keymap entry past the reducers, a reducer index too big, an
	 * io lcore with a reducer index, more reducers than lcores */
	io_reduce(0.9, 0.9, 0.1, 0, 0);
	in.keymap[7] = 2;
	SG_CHECK_EQ(lay_plan(&in, "t", &a), -EINVAL);
	io_reduce(0.9, 0.9, 0.1, 0, 0);
	in.lc[2].reducer = 5;
	SG_CHECK_EQ(lay_plan(&in, "t", &a), -EINVAL);
	io_reduce(0.9, 0.9, 0.1, 0, 0);
	in.lc[0].reducer = 0;
	SG_CHECK_EQ(lay_plan(&in, "t", &a), -EINVAL);
	io_reduce(0.9, 0.9, 0.1, 0, 0);
	in.n_reducers = 9;
	SG_CHECK_EQ(lay_plan(&in, "t", &a), -EINVAL);
}

int main(void)
{
	test_uneven_reducers();
	test_even_or_single();
	test_receiver();
	test_idle_and_bad();
	return sg_test_finish("layout_plan");
}
