/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-demo: sigmad's pipeline on a ring port with simulated workers on the
 * other side (sg_dp_loopback_run()), every element of every RESULT checked.
 * It takes sigmad's options (EAL arguments, `--`, Sigma's; without `--` EAL
 * gets sigmad's no-hugepage default), as if --demo were given. A program of
 * its own so that sigmad links no traffic generator.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "sg_dp_agent_config.h"
#include "sg_dp_testdrv.h"

static int run_demo(const struct sg_dp_config *c)
{
	struct sg_dp_config dc = *c;
	struct sg_dp_loop_conf lc = {.rounds = UINT32_MAX / 2, .window = 64, .seed = 1,
				     .retrans_us = 20000,
				     .timeout_s = c->duration_s > 0 ? c->duration_s : 3,
				     .garbage = 6, .arp = true};
	struct sg_dp_loop_result r;
	char err[512];
	double gbps;
	int rc;

	if (c->transport != SG_DP_TRANSPORT_DPDK) {
		fprintf(stderr, "sigma-demo: error: the demo runs sigmad's pipeline on a ring port: "
			"it needs [transport] type = dpdk\n");
		return 2;
	}
	dc.jobs[0].workers = c->demo_workers;
	/* with the sleep policy the generator yields its CPU too */
	lc.gen_sleep_us = c->idle == SG_IDLE_SLEEP ? c->idle_sleep_us : 0;
	printf("sigmad demo: %u workers push %u keys of %u bytes (fp32) for %.1f s through "
	       "sigmad on a ring port; every element of every RESULT is checked\n",
	       dc.jobs[0].workers, dc.jobs[0].keys, dc.jobs[0].partition_bytes, lc.timeout_s);
	rc = sg_dp_loopback_run(&dc, &lc, &r, stdout, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sigma-demo: %s\n", err);
		return 1;
	}
	gbps = (double)r.gen.bytes_pushed * 8 / r.seconds / 1e9;
	printf("\nsigmad demo: %lu chunk rounds complete, %lu results checked, %lu wrong, "
	       "%lu NACKs, ARP %s\n", (unsigned long)r.gen.rounds_done,
	       (unsigned long)r.gen.results_ok, (unsigned long)r.gen.results_bad,
	       (unsigned long)r.gen.nacks, r.gen.arp_replies ? "answered" : "NOT answered");
	printf("sigmad demo: goodput %.2f Gbps of pushed fp32 aggregated (%u workers x %.2f "
	       "Gbps each), %.3f Mpps of pushes\n", gbps, dc.jobs[0].workers,
	       gbps / dc.jobs[0].workers, (double)r.gen.pushes_sent / r.seconds / 1e6);
	if (r.gen.results_bad || r.gen.rounds_done == 0 || !r.gen.arp_replies) {
		printf("sigmad demo: FAILED\n");
		return 1;
	}
	printf("sigmad demo: OK\n");
	return 0;
}

int main(int argc, char **argv)
{
	static struct sg_dp_agent_sections sections;
	struct sg_dp_config c;
	char err[512];
	int eal_argc, sg_argc, rc;
	char **sg_argv = sg_dp_args_split(argc, argv, &eal_argc, &sg_argc);

	if (sg_argv == NULL)
		return 1;
	if (sg_dp_config_defaults(&c) < 0) {
		fprintf(stderr, "sigma-demo: error: the embedded default config does not load\n");
		free(sg_argv);
		return 2;
	}
	/* sigmad's config files: their [control] and [cluster] are checked, then unused */
	sg_dp_agent_sections_init(&sections, &c);
	rc = sg_dp_config_parse_args(&c, sg_argc, sg_argv, err, sizeof(err));
	explicit_bzero(&sections.ctl, sizeof(sections.ctl));
	free(sg_argv);
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "sigma-demo: error: %s\n", err);
		return rc > 0 ? 0 : 2;
	}
	/* what --demo means: the pipeline counts the generator's lcore among the busy ones */
	c.demo = true;
	if (sg_dp_eal_init(eal_argc, argv, "sigma_demo") < 0) {
		fprintf(stderr, "sigma-demo: error: EAL did not start (%s); without hugepages pass "
			"--no-huge --no-shconf -m 512 before --\n", rte_strerror(rte_errno));
		return 1;
	}
	rte_log_set_level_pattern("sigma.*", c.log_level);
	rc = run_demo(&c);
	sg_dp_eal_cleanup();
	fflush(stdout);
	return rc;
}
