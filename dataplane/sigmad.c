/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad: the summation appliance. EAL arguments, then `--`, then Sigma's
 * options (sigmad --help). Without `--` every argument is Sigma's and EAL
 * gets a no-hugepage, virtual-device default, which is what --demo needs.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "sg_config.h"
#include "sg_ctl.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"

/* set by signal handlers, read by the main loop */
static volatile sig_atomic_t got_stop, got_hup;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_stop = 1;
}

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* Sigma's options: everything after "--", or everything if there is none. */
static int split_args(int argc, char **argv, int *eal_argc, int *sg_first)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			*eal_argc = i;
			*sg_first = i;
			return 1;
		}
	*eal_argc = 1;
	*sg_first = 0;
	return 0;
}

static int load_config(struct sg_dp_config *c, int argc, char **argv, char *err, size_t errlen)
{
	if (sg_dp_config_defaults(c) < 0) {
		snprintf(err, errlen, "the embedded default config does not load");
		return -EINVAL;
	}
	return sg_dp_config_parse_args(c, argc, argv, err, errlen);
}

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

	dc.jobs[0].workers = c->demo_workers;
	/* with the sleep policy the generator yields its CPU too */
	lc.gen_sleep_us = c->idle == SG_IDLE_SLEEP ? c->idle_sleep_us : 0;
	printf("sigmad demo: %u workers push %u keys of %u bytes (fp32) for %.1f s through "
	       "sigmad on a ring port; every element of every RESULT is checked\n",
	       dc.jobs[0].workers, dc.jobs[0].keys, dc.jobs[0].partition_bytes, lc.timeout_s);
	rc = sg_dp_loopback_run(&dc, &lc, &r, stdout, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sigmad: demo: %s\n", err);
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

/* Start the control agent from the [control] section that the config load parsed. */
static struct sg_dp_agent *start_agent(struct sg_dp_pipeline *p, const struct sg_dp_config *c)
{
	struct sg_ctl_server_config sc;
	struct sg_dp_agent *a;
	char err[512];

	sg_dp_config_control(c, &sc);
	a = sg_dp_agent_start(p, &sc, &c->ctl.ac, err, sizeof(err));
	if (a == NULL) {
		fprintf(stderr, "sigmad: error: [control]: %s\n", err);
		return NULL;
	}
	printf("sigmad: control plane:%s%s%s tcp port %u, metrics port %u%s%s\n",
	       sc.unix_path ? " unix " : "", sc.unix_path ? sc.unix_path : "",
	       sc.unix_path ? "," : "", sg_ctl_server_tcp_port(sg_dp_agent_server(a)),
	       sg_ctl_server_metrics_port(sg_dp_agent_server(a)),
	       c->ctl.ac.coordinator[0] ? ", heartbeats to " : "", c->ctl.ac.coordinator);
	return a;
}

/*
 * SIGHUP for the control agent: old (@p c, what the agent runs with) and new
 * (@p nc) [control] as parsed. @return changes needing a restart.
 */
static int reload_agent(struct sg_dp_agent *a, const struct sg_dp_config *c,
			const struct sg_dp_config *nc)
{
	int n;

	if ((a != NULL) != nc->control) {
		printf("sigmad: SIGHUP: [control] %s: needs a restart\n", a ? "removed" : "added");
		return 1;
	}
	if (a == NULL)
		return 0;
	/* the server's keys are compared here, parsed, and named; the agent takes the rest */
	n = sg_dp_config_control_diff(c, nc, stdout);
	return n + sg_dp_agent_reload(a, &nc->ctl.ac, stdout);
}

/* @p c: the config sigmad started with, which restart-only keys are compared to */
static void reload(struct sg_dp_pipeline *p, struct sg_dp_agent *agent,
		   const struct sg_dp_config *c, int argc, char **argv)
{
	struct sg_dp_config nc;
	char err[512];
	int n;

	printf("sigmad: SIGHUP: re-reading %s\n", c->config_path[0] ? c->config_path :
	       "the embedded config and options");
	if (load_config(&nc, argc, argv, err, sizeof(err)) != 0) {
		printf("sigmad: SIGHUP: config rejected, nothing changed: %s\n", err);
		fflush(stdout);
		explicit_bzero(&nc.ctl, sizeof(nc.ctl));
		return;
	}
	n = sg_dp_pipeline_reload(p, &nc, stdout);
	n += reload_agent(agent, c, &nc);
	/* the new secret was only compared */
	explicit_bzero(&nc.ctl, sizeof(nc.ctl));
	printf("sigmad: SIGHUP: done; %d change%s need%s a restart\n", n, n == 1 ? "" : "s",
	       n == 1 ? "s" : "");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct sg_dp_config c;
	struct sg_dp_pipeline *p;
	char err[512], prefix[64], lcores[64];
	int eal_argc, sg_first, sg_argc, rc, ret = 0;
	char **sg_argv;
	bool has_sep = split_args(argc, argv, &eal_argc, &sg_first);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char *def_eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "1024", prefix,
			   lcores, "--log-level=lib.eal:error", "--log-level=lib.telemetry:error",
			   NULL};
	uint64_t t0, last_stats;
	struct sg_dp_agent *agent = NULL;

	/* Sigma's options with argv[0] in front, as getopt expects */
	sg_argc = argc - sg_first;
	sg_argv = calloc((size_t)sg_argc + 1, sizeof(char *));
	if (sg_argv == NULL)
		return 1;
	sg_argv[0] = argv[0];
	for (int i = 1; i < sg_argc; i++)
		sg_argv[i] = argv[sg_first + i];
	/* --help and bad options are answered before EAL starts */
	rc = load_config(&c, sg_argc, sg_argv, err, sizeof(err));
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "sigmad: error: %s\n", err);
		free(sg_argv);
		return rc > 0 ? 0 : 2;
	}
	if (has_sep) {
		rc = rte_eal_init(eal_argc, argv);
	} else {
		snprintf(prefix, sizeof(prefix), "--file-prefix=sigmad_%d", (int)getpid());
		snprintf(lcores, sizeof(lcores), "--lcores=(0-2)@(0-%ld)", ncpu > 1 ? ncpu - 1 : 0);
		rc = rte_eal_init((int)RTE_DIM(def_eal) - 1, def_eal);
	}
	if (rc < 0) {
		fprintf(stderr, "sigmad: error: EAL did not start (%s); without hugepages pass "
			"--no-huge --no-shconf -m 512 before --\n", rte_strerror(rte_errno));
		free(sg_argv);
		return 1;
	}
	rte_log_set_level_pattern("sigma.*", c.log_level);
	if (c.demo) {
		ret = run_demo(&c);
		goto out;
	}
	p = sg_dp_pipeline_create(&c, err, sizeof(err));
	if (p == NULL) {
		fprintf(stderr, "sigmad: error: %s\n", err);
		/* a build without the configured transport is a configuration error */
		ret = errno == EPROTONOSUPPORT ? 2 : 1;
		goto out;
	}
	sg_dp_telemetry_register(p);
	install_signals();
	rc = sg_dp_pipeline_start(p);
	if (rc < 0) {
		fprintf(stderr, "sigmad: error: cannot start the lcores: %s\n", strerror(-rc));
		ret = 1;
	} else {
		printf("sigmad: running: %u lcore(s), %u job(s); SIGINT/SIGTERM stop, SIGHUP "
		       "reloads\n", sg_dp_pipeline_n_lcores(p), c.n_jobs);
		if (c.control && (agent = start_agent(p, &c)) == NULL) {
			ret = 1;
			got_stop = 1;
		}
		fflush(stdout);
	}
	t0 = last_stats = rte_rdtsc();
	while (rc == 0 && !got_stop) {
		uint64_t now = rte_rdtsc(), hz = rte_get_tsc_hz();
		unsigned int si = sg_dp_pipeline_config(p)->stats_interval_s;

		if (c.duration_s > 0 && (double)(now - t0) / (double)hz >= c.duration_s)
			break;
		if (got_hup) {
			got_hup = 0;
			reload(p, agent, &c, sg_argc, sg_argv);
		}
		if (si && now - last_stats >= si * hz) {
			last_stats = now;
			sg_dp_pipeline_print_stats(p, stdout, 0);
			fflush(stdout);
		}
		rte_delay_us_sleep(20000);
	}
	if (rc == 0) {
		double secs = (double)(rte_rdtsc() - t0) / (double)rte_get_tsc_hz();

		sg_dp_agent_stop(agent);
		printf("sigmad: stopping: RX off, draining\n");
		sg_dp_pipeline_stop(p);
		printf("sigmad: final statistics after %.1f s\n", secs);
		sg_dp_pipeline_print_stats(p, stdout, secs);
	}
	sg_dp_telemetry_register(NULL);
	sg_dp_pipeline_destroy(p);
	{
		uint16_t port;

		RTE_ETH_FOREACH_DEV(port)
			rte_eth_dev_close(port);
	}
out:
	explicit_bzero(&c.ctl, sizeof(c.ctl));
	rte_eal_cleanup();
	free(sg_argv);
	fflush(stdout);
	return ret;
}
