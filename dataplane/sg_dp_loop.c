/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loopback run: sigmad's pipeline on a ring port with the in-process
 * generator on the main lcore. Shared by the tests, the benchmark and the
 * demo so that all three exercise exactly the daemon's code.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_dp_engine.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* A frame that is wrong in one way, so each garbage frame hits a drop reason. */
static uint32_t garbage_frame(uint8_t *f, unsigned int i, const struct sg_dp_net *dut)
{
	struct sg_dp_net w = {.ip = RTE_BE32(0x0a0b00c8), .udp_port = RTE_BE16(1234),
			      .udp_checksum = true};
	struct sg_dp_peer to = {.mac = dut->mac, .ip = dut->ip, .udp_port = dut->udp_port};
	uint32_t len = SG_DP_NET_HDR_LEN + 64;

	memset(f, 0, 128);
	for (int b = 0; b < 64; b++)
		f[SG_DP_NET_HDR_LEN + b] = (uint8_t)(b * 13 + i);
	sg_dp_net_build(&w, &to, f, 64, NULL);
	switch (i % 6) {
	case 0: f[12] = 0x86; f[13] = 0xdd; break;   /* IPv6 ethertype */
	case 1: f[24] ^= 0x5a; break;                 /* IP checksum */
	case 2: len = 20; break;                      /* truncated */
	case 3: f[60] ^= 1; break;                    /* UDP checksum */
	case 4: break;                                /* valid UDP, bad Sigma magic */
	case 5: f[37] ^= 1; break;                    /* another UDP port */
	}
	return len;
}

int sg_dp_loopback_run(const struct sg_dp_config *c, const struct sg_dp_loop_conf *lc,
		       struct sg_dp_loop_result *res, FILE *table, char *err, size_t errlen)
{
	struct sg_dp_config cfg = *c;
	struct rte_ring *rx[SG_DP_MAX_LAYOUT] = {NULL}, *tx = NULL;
	struct rte_ring *txq[SG_DP_MAX_LAYOUT];
	struct rte_mempool *gpool = NULL;
	struct sg_dp_pipeline *p = NULL;
	struct sg_dp_gen *g = NULL;
	char name[64];
	unsigned int nrxq = 0, pid_tag = (unsigned int)getpid();
	unsigned int run_no = (unsigned int)(rte_rdtsc() >> 8) & 0xffffff; /* unique names */
	int port = -1, rc = 0;
	struct sg_dp_net dnet;
	const struct sg_dp_job_cfg *job = &c->jobs[0];

	memset(res, 0, sizeof(*res));
	if (c->n_jobs == 0) {
		seterr(err, errlen, "loopback: the config declares no [job N]");
		return -EINVAL;
	}
	for (unsigned int i = 0; i < cfg.n_lcores; i++)
		if (cfg.lcores[i].role & SG_DP_ROLE_IO)
			nrxq = RTE_MAX(nrxq, cfg.lcores[i].queue + 1u);
	/* the generator only feeds queue 0: other RX queues stay empty, so their
	 * lcores see only hand-offs, which is the path under test there */
	for (unsigned int q = 0; q < RTE_MAX(nrxq, 1u); q++) {
		snprintf(name, sizeof(name), "sg_lrx%u_%u_%u", q, run_no, pid_tag);
		rx[q] = rte_ring_create(name, 4096, (int)rte_socket_id(), 0);
		if (rx[q] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	snprintf(name, sizeof(name), "sg_ltx_%u_%u", run_no, pid_tag);
	tx = rte_ring_create(name, 8192, (int)rte_socket_id(), RING_F_SC_DEQ);
	if (tx == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (unsigned int i = 0; i < cfg.n_lcores; i++)
		txq[i] = tx;
	snprintf(name, sizeof(name), "sg_lport_%u", run_no);
	port = rte_eth_from_rings(name, rx, RTE_MAX(nrxq, 1u), txq, (unsigned int)cfg.n_lcores,
				  rte_socket_id());
	if (port < 0) {
		seterr(err, errlen, "loopback: ring port: %s", rte_strerror(rte_errno));
		rc = -rte_errno;
		goto out;
	}
	for (unsigned int i = 0; i < cfg.n_lcores; i++)
		cfg.lcores[i].port = (uint16_t)port;
	snprintf(name, sizeof(name), "sg_lgen_%u_%u", run_no, pid_tag);
	gpool = rte_pktmbuf_pool_create(name, 8192, 256, SG_DP_MBUF_PRIV_SIZE,
					RTE_PKTMBUF_HEADROOM + RTE_ETHER_HDR_LEN + cfg.mtu + 4,
					(int)rte_socket_id());
	if (gpool == NULL) {
		seterr(err, errlen, "loopback: generator mempool: %s", rte_strerror(rte_errno));
		rc = -ENOMEM;
		goto out;
	}
	p = sg_dp_pipeline_create(&cfg, err, errlen);
	if (p == NULL) {
		rc = -errno;
		goto out;
	}
	sg_dp_pipeline_net(p, (uint16_t)port, &dnet);
	{
		struct sg_dp_gen_conf gc = {
			.to_dut = rx[0], .from_dut = tx, .pool = gpool, .dut_mac = dnet.mac,
			.dut_ip = dnet.ip, .dut_udp_port = cfg.udp_port, .job = job->id,
			.token = job->token, .workers = job->workers, .keys = job->keys,
			.partition_bytes = job->partition_bytes,
			.chunk_bytes = job->chunk_bytes ? job->chunk_bytes :
				RTE_ALIGN_FLOOR((uint32_t)cfg.mtu - SG_DP_IPUDP_LEN - SG_DP_HDR_LEN, 8u),
			.rounds = lc->rounds, .window = lc->window ? lc->window : 64,
			.loss = lc->loss, .retrans_us = lc->retrans_us ? lc->retrans_us : 2000,
			.seed = lc->seed, .udp_checksum = cfg.udp_checksum,
		};

		if (job->dtype != SG_DTYPE_FP32) {
			seterr(err, errlen, "loopback: the generator speaks fp32 only");
			rc = -ENOTSUP;
			goto out;
		}
		g = sg_dp_gen_create(&gc);
		if (g == NULL) {
			seterr(err, errlen, "loopback: generator: %s", strerror(errno));
			rc = -errno;
			goto out;
		}
	}
	rc = sg_dp_pipeline_start(p);
	if (rc < 0) {
		seterr(err, errlen, "loopback: cannot launch the lcores: %s", strerror(-rc));
		goto out;
	}
	{
		uint8_t f[256];
		uint64_t t0 = rte_rdtsc(), hz = rte_get_tsc_hz();
		double tmo = lc->timeout_s > 0 ? lc->timeout_s : 30;

		for (unsigned int i = 0; i < lc->garbage; i++)
			sg_dp_gen_raw(g, f, garbage_frame(f, i, &dnet));
		if (lc->arp)
			sg_dp_gen_arp(g);
		res->rc = sg_dp_gen_run(g, t0 + (uint64_t)(tmo * (double)hz), NULL);
		/* answers to the last garbage/ARP frames may trail the final RESULT */
		if (lc->arp) {
			struct sg_dp_gen_stats gs;
			uint64_t until = rte_rdtsc() + hz / 2;

			do {
				sg_dp_gen_poll(g);
				sg_dp_gen_stats(g, &gs);
			} while (gs.arp_replies == 0 && rte_rdtsc() < until);
		}
		res->seconds = (double)(rte_rdtsc() - t0) / (double)hz;
	}
	sg_dp_pipeline_stop(p);
	sg_dp_gen_stats(g, &res->gen);
	sg_dp_pipeline_engine_stats(p, &res->eng);
	res->n_lcores = sg_dp_pipeline_n_lcores(p);
	for (unsigned int i = 0; i < res->n_lcores; i++)
		sg_dp_pipeline_lcore_stats(p, i, &res->lcores[i]);
	if (table)
		sg_dp_pipeline_print_stats(p, table, res->seconds);
out:
	sg_dp_pipeline_stop(p);
	/* frames left in the rings belong to the generator's or the node's pool:
	 * free them before either pool goes */
	for (unsigned int q = 0; q < SG_DP_MAX_LAYOUT && rx[q]; q++) {
		void *m;

		while (rte_ring_dequeue(rx[q], &m) == 0)
			rte_pktmbuf_free(m);
	}
	if (tx) {
		void *m;

		while (rte_ring_dequeue(tx, &m) == 0)
			rte_pktmbuf_free(m);
	}
	sg_dp_gen_destroy(g);
	sg_dp_pipeline_destroy(p);
	if (port >= 0)
		rte_eth_dev_close((uint16_t)port);
	for (unsigned int q = 0; q < SG_DP_MAX_LAYOUT && rx[q]; q++)
		rte_ring_free(rx[q]);
	rte_ring_free(tx);
	rte_mempool_free(gpool);
	return rc;
}
