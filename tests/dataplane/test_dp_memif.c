/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two processes over net_memif: sigmad's pipeline in a forked node process
 * (memif server, started first), the generator in this process (memif
 * client, start retried until the link is up), the node's MAC resolved by
 * ARP, 5% loss injected each way, every RESULT checked against the known
 * sum. Bounded: the node is stopped with SIGTERM, killed after 5 s, and dies
 * with this process in any case.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sg_dp_testdrv.h"
#include "sg_test.h"

int main(void)
{
	struct sg_dp_config c;
	struct sg_dp_loop_result r;
	struct sg_dp_loop_conf lc = {.rounds = 4, .window = 32, .loss = 0.05, .seed = 11,
				     .retrans_us = 5000, .timeout_s = 60};
	char sock[128], err[512];
	struct sg_dp_memif_conf mc = {.socket_path = sock, .dut_lcores = "(0-1)@(0-1)",
				      .gen_lcores = "0@(0-1)", .max_life_s = 120,
				      .dut_table = true};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int rc;

	if (ncpu < 2)
		mc.dut_lcores = "(0-1)@0", mc.gen_lcores = "0@0";
	snprintf(sock, sizeof(sock), "/tmp/sg_dp_memif_%d.sock", (int)getpid());
	sg_dp_config_defaults(&c);
	c.udp_checksum = true;
	c.mbufs = 4096;
	c.pool_bufs = 512;
	c.jobs[0].workers = 4;
	c.jobs[0].keys = 4;
	c.jobs[0].partition_bytes = 36000;
	rc = sg_dp_memif_run(&c, &lc, &mc, &r, err, sizeof(err));
	if (rc < 0 && strstr(err, "EAL"))
		SG_TEST_SKIP_ALL("%s", err);
	printf("memif: %.2f s, %lu/%lu rounds, %lu results ok, %lu bad, %lu retransmits, "
	       "%lu served again by the node\n", r.seconds, (unsigned long)r.gen.rounds_done,
	       (unsigned long)r.gen.rounds_total, (unsigned long)r.gen.results_ok,
	       (unsigned long)r.gen.results_bad, (unsigned long)r.gen.retransmits,
	       (unsigned long)r.eng.retransmits_served);
	SG_CHECK(rc == 0, "memif run: %s", err);
	SG_CHECK_EQ(r.rc, 0);
	SG_CHECK_EQ(r.gen.rounds_total, 4ull * 5 * 4);
	SG_CHECK_EQ(r.gen.rounds_done, r.gen.rounds_total);
	SG_CHECK_EQ(r.gen.results_bad, 0);
	SG_CHECK_EQ(r.gen.results_ok, r.gen.rounds_total * 4);
	SG_CHECK(r.gen.arp_replies >= 1, "ARP answered over memif");
	SG_CHECK_EQ(r.eng.rounds_completed, r.gen.rounds_total);
	SG_CHECK(r.gen.dropped_out + r.gen.dropped_in > 0, "loss injected");
	SG_CHECK(r.n_lcores == 1 && r.lcores[0].rx_pkts > 0, "node counters came back");
	return sg_test_finish("dp_memif");
}
