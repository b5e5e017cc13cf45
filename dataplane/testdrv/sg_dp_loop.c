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
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "sg_dp_engine.h"
#include "sg_dp_net.h"
#include "sg_dp_testdrv.h"
#include "sg_dp_proto.h"

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
	case 5: f[36] ^= 0x80; break; /* another UDP port, outside the reducers' range */
	}
	return len;
}

/*
 * Wait (until @p deadline) for the node's lcores to take every frame the
 * generator left in the port's RX rings, answering what comes back. An lcore
 * finishes the burst it took before it sees the stop, and reducers drain
 * their rings before they leave: once these rings are empty, stopping the
 * pipeline loses nothing the generator counted as sent.
 */
static void drain_rx(struct sg_dp_gen *g, struct rte_ring *const *rx, unsigned int nrx,
		     uint64_t deadline)
{
	for (;;) {
		unsigned int left = 0;

		for (unsigned int q = 0; q < nrx; q++)
			left += rte_ring_count(rx[q]);
		if (left == 0 || rte_rdtsc() > deadline)
			return;
		sg_dp_gen_poll(g);
	}
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
		sg_dp_seterr(err, errlen, "loopback: the config declares no [job N]");
		return -EINVAL;
	}
	for (unsigned int i = 0; i < cfg.n_lcores; i++)
		if (cfg.lcores[i].role & SG_ROLE_IO)
			nrxq = RTE_MAX(nrxq, cfg.lcores[i].queue + 1u);
	/* The layout is checked later, in pipeline create; rx[] must not overflow first. */
	if (nrxq > SG_DP_MAX_LAYOUT) {
		sg_dp_seterr(err, errlen, "loopback: RX queue %u: at most %d queues per port",
			     nrxq - 1, SG_DP_MAX_LAYOUT);
		return -EINVAL;
	}
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
		sg_dp_seterr(err, errlen, "loopback: ring port: %s", rte_strerror(rte_errno));
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
		sg_dp_seterr(err, errlen, "loopback: generator mempool: %s", rte_strerror(rte_errno));
		rc = -ENOMEM;
		goto out;
	}
	sg_dp_net_pool_populate(gpool);
	p = sg_dp_pipeline_create(&cfg, err, errlen);
	if (p == NULL) {
		rc = -errno;
		goto out;
	}
	sg_dp_pipeline_net(p, (uint16_t)port, &dnet);
	{
		struct sg_dp_gen_conf gc = {
			.to_dut = rx[0], .from_dut = tx, .port = -1, .pool = gpool, .dut_mac = dnet.mac,
			.dut_ip = dnet.ip, .dut_udp_port = cfg.udp_port, .job = job->id,
			.token = job->token, .workers = job->workers, .keys = job->keys,
			.partition_bytes = job->partition_bytes,
			.chunk_bytes = sg_dp_job_chunk_bytes(&cfg, job),
			.rounds = lc->rounds, .window = lc->window ? lc->window : 64,
			.loss = lc->loss, .corrupt = lc->corrupt,
			.retrans_us = lc->retrans_us ? lc->retrans_us : 2000,
			.seed = lc->seed, .udp_checksum = cfg.udp_checksum,
			.idle_sleep_us = lc->gen_sleep_us,
			.auth_key = job->auth ? job->auth_key : NULL,
			/* its pools go after the pipeline stopped and the rings emptied (below) */
			.prepared = true,
		};
		const struct sg_dp_job_cfg *j2 = &c->jobs[1];

		if (lc->two_jobs) {
			if (c->n_jobs < 2 || j2->workers != job->workers ||
			    j2->partition_bytes != job->partition_bytes || j2->dtype != job->dtype ||
			    sg_dp_job_chunk_bytes(&cfg, j2) != gc.chunk_bytes) {
				sg_dp_seterr(err, errlen, "loopback: two_jobs needs a second job "
					     "like the first (workers, partition_bytes, dtype)");
				rc = -EINVAL;
				goto out;
			}
			gc.job2 = j2->id;
			gc.token2 = j2->token;
			gc.keys2 = j2->keys;
			gc.keys += j2->keys;
		}

		if (job->dtype != SG_DTYPE_FP32) {
			sg_dp_seterr(err, errlen, "loopback: the generator speaks fp32 only");
			rc = -ENOTSUP;
			goto out;
		}
		g = sg_dp_gen_create(&gc);
		if (g == NULL) {
			sg_dp_seterr(err, errlen, "loopback: generator: %s", strerror(errno));
			rc = -errno;
			goto out;
		}
	}
	rc = sg_dp_pipeline_start(p);
	if (rc < 0) {
		sg_dp_seterr(err, errlen, "loopback: cannot launch the lcores: %s", strerror(-rc));
		goto out;
	}
	if (lc->on_start && (rc = lc->on_start(p, lc->hook_arg)) < 0) {
		sg_dp_seterr(err, errlen, "loopback: start hook: %s", strerror(-rc));
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
		res->seconds = (double)(rte_rdtsc() - t0) / (double)hz;
		/* frames sent before the last RESULT came back (retransmits) reach the
		 * node before it stops, so that its counters and the generator's agree */
		if (res->rc == 0)
			drain_rx(g, rx, RTE_MAX(nrxq, 1u), t0 + (uint64_t)(tmo * (double)hz));
		/* answers to the last garbage/ARP frames may trail the final RESULT */
		if (lc->arp) {
			struct sg_dp_gen_stats gs;
			uint64_t until = rte_rdtsc() + hz / 2;

			do {
				sg_dp_gen_poll(g);
				sg_dp_gen_stats(g, &gs);
			} while (gs.arp_replies == 0 && rte_rdtsc() < until);
		}
	}
	if (lc->on_stop)
		lc->on_stop(p, lc->hook_arg);
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

/*
 * Two processes over net_memif: the node (a forked child running the
 * pipeline on a memif server port) and the generator (this process, memif
 * client). The child reports its counters through a pipe when it stops.
 */

struct memif_report {
	struct sg_dp_stats eng;
	unsigned int n_lcores;
	struct sg_dp_lcore_stats lcores[SG_DP_MAX_LAYOUT];
	int rc;
};

static int eal_start(const char *prefix, const char *lcores, const char *vdev)
{
	char a_prefix[128], a_lcores[128], a_vdev[400];
	char *argv[] = {"sigma-memif", "--no-huge", "--no-shconf", "--no-pci", "-m", "512",
			a_prefix, a_lcores, a_vdev, "--log-level=lib.eal:error",
			"--log-level=pmd.net.memif:error", NULL};

	snprintf(a_prefix, sizeof(a_prefix), "--file-prefix=%s", prefix);
	snprintf(a_lcores, sizeof(a_lcores), "--lcores=%s", lcores);
	snprintf(a_vdev, sizeof(a_vdev), "--vdev=%s", vdev);
	return rte_eal_init((int)RTE_DIM(argv) - 1, argv);
}

static void __attribute__((noreturn)) memif_child(const struct sg_dp_config *c,
						  const struct sg_dp_memif_conf *mc, int wfd)
{
	struct memif_report rep = {.rc = -1};
	struct sg_dp_pipeline *p;
	char prefix[64], vdev[384], err[512];
	sigset_t set;
	struct timespec tick = {0, 50 * 1000 * 1000};
	double waited = 0;

	/* die with the parent; take SIGTERM synchronously, no handler needed */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	snprintf(prefix, sizeof(prefix), "sg_memif_dut_%d", (int)getppid());
	snprintf(vdev, sizeof(vdev), "net_memif0,role=server,id=0,socket=%s,socket-abstract=no,"
		 "bsize=%u", mc->socket_path, 16384u);
	if (eal_start(prefix, mc->dut_lcores, vdev) < 0) {
		fprintf(stderr, "memif node: EAL: %s\n", rte_strerror(rte_errno));
		goto out;
	}
	p = sg_dp_pipeline_create(c, err, sizeof(err));
	if (p == NULL) {
		fprintf(stderr, "memif node: %s\n", err);
		goto out_eal;
	}
	if (sg_dp_pipeline_start(p) == 0) {
		/* bounded: a parent that never signals still ends this process */
		while (sigtimedwait(&set, NULL, &tick) < 0 && waited < mc->max_life_s)
			waited += 0.05;
		sg_dp_pipeline_stop(p);
		rep.rc = 0;
	}
	sg_dp_pipeline_engine_stats(p, &rep.eng);
	rep.n_lcores = sg_dp_pipeline_n_lcores(p);
	for (unsigned int i = 0; i < rep.n_lcores; i++)
		sg_dp_pipeline_lcore_stats(p, i, &rep.lcores[i]);
	if (mc->dut_table)
		sg_dp_pipeline_print_stats(p, stdout, 0);
	sg_dp_pipeline_destroy(p);
	{
		uint16_t port;

		RTE_ETH_FOREACH_DEV(port)
			rte_eth_dev_close(port);
	}
out_eal:
	sg_dp_eal_cleanup();
out:
	if (write(wfd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		rep.rc = -1;
	close(wfd);
	fflush(stdout);
	_exit(rep.rc == 0 ? 0 : 1);
}

/* Start the client port; memif connects only once the server is up, so retry. */
static int client_port_up(uint16_t port, uint16_t nq, struct rte_mempool *pool,
			  double timeout_s)
{
	struct rte_eth_conf conf = {0};
	struct rte_eth_link link;
	uint64_t end = rte_rdtsc() + (uint64_t)(timeout_s * (double)rte_get_tsc_hz());
	int rc;

	/* memif pairs queues: as many as the node has on either side */
	rc = rte_eth_dev_configure(port, nq, nq, &conf);
	for (uint16_t q = 0; rc == 0 && q < nq; q++) {
		rc = rte_eth_rx_queue_setup(port, q, 1024, rte_socket_id(), NULL, pool);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(port, q, 1024, rte_socket_id(), NULL);
	}
	if (rc < 0)
		return rc;
	while (rte_rdtsc() < end) {
		if (rte_eth_dev_start(port) == 0) {
			for (int i = 0; i < 20; i++) {
				memset(&link, 0, sizeof(link));
				rte_eth_link_get_nowait(port, &link);
				if (link.link_status == RTE_ETH_LINK_UP)
					return 0;
				rte_delay_us_sleep(50000);
			}
			rte_eth_dev_stop(port);
		} else {
			rte_delay_us_sleep(100000);
		}
	}
	return -ETIMEDOUT;
}

int sg_dp_memif_run(const struct sg_dp_config *c, const struct sg_dp_loop_conf *lc,
		    const struct sg_dp_memif_conf *mc, struct sg_dp_loop_result *res, char *err,
		    size_t errlen)
{
	struct memif_report rep;
	const struct sg_dp_job_cfg *job = &c->jobs[0];
	struct rte_mempool *pool = NULL;
	struct sg_dp_gen *g = NULL;
	char prefix[64], vdev[384];
	int fds[2], rc = 0, status = 0;
	bool eal = false, port_started = false;
	uint16_t nq = (uint16_t)c->n_lcores;
	pid_t pid;
	uint64_t hz, t0;

	memset(res, 0, sizeof(*res));
	if (c->n_jobs == 0 || job->dtype != SG_DTYPE_FP32) {
		sg_dp_seterr(err, errlen, "memif: the config needs an fp32 [job N] first");
		return -EINVAL;
	}
	unlink(mc->socket_path);
	if (pipe(fds) < 0) {
		sg_dp_seterr(err, errlen, "memif: pipe: %s", strerror(errno));
		return -errno;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		sg_dp_seterr(err, errlen, "memif: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	if (pid == 0) {
		close(fds[0]);
		memif_child(c, mc, fds[1]);
	}
	close(fds[1]);
	snprintf(prefix, sizeof(prefix), "sg_memif_gen_%d", (int)getpid());
	snprintf(vdev, sizeof(vdev), "net_memif0,role=client,id=0,socket=%s,socket-abstract=no,"
		 "bsize=%u", mc->socket_path, 16384u);
	if (eal_start(prefix, mc->gen_lcores, vdev) < 0) {
		sg_dp_seterr(err, errlen, "memif: generator EAL: %s", rte_strerror(rte_errno));
		rc = -EIO;
		goto out;
	}
	eal = true;
	snprintf(prefix, sizeof(prefix), "sg_memif_pool_%d", (int)getpid());
	pool = rte_pktmbuf_pool_create(prefix, 8192, 256, SG_DP_MBUF_PRIV_SIZE,
				       RTE_PKTMBUF_HEADROOM + RTE_ETHER_HDR_LEN + c->mtu + 4,
				       (int)rte_socket_id());
	if (pool == NULL) {
		sg_dp_seterr(err, errlen, "memif: generator mempool: %s", rte_strerror(rte_errno));
		rc = -ENOMEM;
		goto out;
	}
	sg_dp_net_pool_populate(pool);
	rc = client_port_up(0, nq, pool, 15);
	if (rc < 0) {
		sg_dp_seterr(err, errlen, "memif: the client port did not come up: %s", strerror(-rc));
		goto out;
	}
	port_started = true;
	{
		struct sg_dp_gen_conf gc = {
			.port = 0, .nb_rxq = nq, .pool = pool, .dut_ip = rte_cpu_to_be_32(c->ip),
			.dut_udp_port = c->udp_port, .job = job->id, .token = job->token,
			.workers = job->workers, .keys = job->keys,
			.partition_bytes = job->partition_bytes,
			.chunk_bytes = sg_dp_job_chunk_bytes(c, job),
			.rounds = lc->rounds, .window = lc->window ? lc->window : 64,
			.loss = lc->loss, .corrupt = lc->corrupt,
			.retrans_us = lc->retrans_us ? lc->retrans_us : 2000,
			.seed = lc->seed, .udp_checksum = c->udp_checksum,
			.idle_sleep_us = lc->gen_sleep_us,
			.auth_key = job->auth ? job->auth_key : NULL,
			/* its pools go after the port closed (below) */
			.prepared = true,
		};
		struct sg_dp_gen_stats gs;
		uint64_t end;

		memset(&gc.dut_mac, 0xff, sizeof(gc.dut_mac)); /* until ARP answers */
		g = sg_dp_gen_create(&gc);
		if (g == NULL) {
			rc = -errno;
			sg_dp_seterr(err, errlen, "memif: generator: %s", strerror(errno));
			goto out;
		}
		hz = rte_get_tsc_hz();
		/* resolve the node's MAC the way a worker would: ARP */
		end = rte_rdtsc() + 10 * hz;
		do {
			uint64_t next = rte_rdtsc() + hz / 10;

			sg_dp_gen_arp(g);
			do {
				sg_dp_gen_poll(g);
				sg_dp_gen_stats(g, &gs);
			} while (gs.arp_replies == 0 && rte_rdtsc() < next);
		} while (gs.arp_replies == 0 && rte_rdtsc() < end);
		if (gs.arp_replies == 0) {
			sg_dp_seterr(err, errlen, "memif: the node did not answer ARP");
			rc = -ETIMEDOUT;
			goto out;
		}
		t0 = rte_rdtsc();
		res->rc = sg_dp_gen_run(g, t0 + (uint64_t)((lc->timeout_s > 0 ? lc->timeout_s : 30) *
							   (double)hz), NULL);
		res->seconds = (double)(rte_rdtsc() - t0) / (double)hz;
		sg_dp_gen_stats(g, &res->gen);
	}
out:
	kill(pid, SIGTERM);
	if (read(fds[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep) && rep.rc == 0) {
		res->eng = rep.eng;
		res->n_lcores = rep.n_lcores;
		memcpy(res->lcores, rep.lcores, sizeof(rep.lcores));
	} else if (rc == 0) {
		sg_dp_seterr(err, errlen, "memif: the node process failed");
		rc = -EIO;
	}
	close(fds[0]);
	{
		/* bounded wait, then make sure nothing is left behind */
		int i;

		for (i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
			usleep(50000);
		if (i == 100) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
	}
	if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		sg_dp_seterr(err, errlen, "memif: the node process exited with status %d", status);
		rc = -EIO;
	}
	if (port_started)
		rte_eth_dev_stop(0);
	if (eal) {
		/* the port may hold pushes still: their pools go after it */
		rte_eth_dev_close(0);
		sg_dp_gen_destroy(g);
		rte_mempool_free(pool);
		sg_dp_eal_cleanup();
	}
	unlink(mc->socket_path);
	return rc;
}
