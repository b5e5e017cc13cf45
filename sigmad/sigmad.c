/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad: the summation appliance. EAL arguments, then `--`, then Sigma's
 * options (sigmad --help). Without `--` every argument is Sigma's and EAL
 * gets a no-hugepage, virtual-device default (sg_dp_eal_init()).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "sg_config.h"
#include "sg_ctl_server.h"
#include "sg_dp_agent.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"
#if SG_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* set by signal handlers, read by the main loop */
static volatile sig_atomic_t got_stop, got_hup;

/*
 * ---- systemd: readiness and the journal's levels (docs/deploy.md) ----------
 *
 * libsystemd's sd_notify() tells systemd (Type=notify) that sigmad is ready,
 * reloading or stopping; without NOTIFY_SOCKET it does nothing. When stderr is
 * the journal, each rte_log line gets its level as a syslog prefix ("<3>"),
 * which journald reads (SyslogLevelPrefix=, on by default).
 */

/* How long every lcore and the control server may take to answer at start-up */
#define READY_TIMEOUT_MS 10000

static bool journal;	   /* stderr is the journal's stream */
static FILE *journal_log;  /* rte_log's stream then */

#if SG_HAVE_SYSTEMD
/* Whether stderr is the journal: JOURNAL_STREAM names its device and inode. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return e != NULL && sscanf(e, "%llu:%llu", &dev, &ino) == 2 &&
	       fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

/* rte_log's levels, RTE_LOG_EMERG (1) .. RTE_LOG_DEBUG (8), as the journal's */
static const char *const journal_prefix[] = {SD_EMERG, SD_ALERT, SD_CRIT, SD_ERR, SD_WARNING,
					     SD_NOTICE, SD_INFO, SD_DEBUG};
static bool journal_line_start = true; /* under journal_log's lock */

/* journal_log's write: the message to stderr, each line after the level of the message */
static ssize_t journal_write(void *cookie, const char *buf, size_t len)
{
	int lvl = rte_log_cur_msg_loglevel();
	const char *pfx = journal_prefix[lvl >= 1 && lvl <= 8 ? lvl - 1 : (int)RTE_LOG_INFO - 1];

	for (size_t done = 0, n; done < len; done += n) {
		const char *nl = memchr(buf + done, '\n', len - done);

		n = nl != NULL ? (size_t)(nl - buf) + 1 - done : len - done;
		if (journal_line_start)
			fputs(pfx, stderr);
		fwrite(buf + done, 1, n, stderr);
		journal_line_start = nl != NULL;
	}
	fflush(stderr);
	return (ssize_t)len;
}

static void journal_start(void)
{
	cookie_io_functions_t io = {.write = journal_write};

	journal = stderr_is_journal();
	if (!journal || (journal_log = fopencookie(NULL, "w", io)) == NULL)
		return;
	/* unbuffered: one write per message, by the thread that logs it (its level) */
	setvbuf(journal_log, NULL, _IONBF, 0);
	rte_openlog_stream(journal_log);
}
#else
static void journal_start(void)
{
}

/* without libsystemd: no notifications, no levels */
#define sd_notify(unset, state) 0
#define sd_notifyf(unset, ...) 0
#define SD_ERR ""
#endif

static void journal_stop(void)
{
	if (journal_log == NULL)
		return;
	rte_openlog_stream(NULL);
	fclose(journal_log);
	journal_log = NULL;
}

/* "sigmad: error: ..." on stderr, at the journal's error level */
static void say_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%ssigmad: error: ", journal ? SD_ERR : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

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

/* The pipeline's config into @p c, sigmad's own sections ([control], [cluster]) into @p s. */
static int load_config(struct sg_dp_config *c, struct sg_dp_agent_sections *s, int argc,
		       char **argv, char *err, size_t errlen)
{
	if (sg_dp_config_defaults(c) < 0) {
		snprintf(err, errlen, "the embedded default config does not load");
		return -EINVAL;
	}
	sg_dp_agent_sections_init(s, c);
	return sg_dp_config_parse_args(c, argc, argv, err, errlen);
}

/*
 * Start the control agent from the [control] section that the config load parsed;
 * @p scp receives the server's config (pointing into @p c).
 */
static struct sg_dp_agent *start_agent(struct sg_dp_pipeline *p,
				       const struct sg_dp_agent_sections *c,
				       struct sg_ctl_server_config *scp)
{
	struct sg_ctl_server_config sc;
	struct sg_dp_agent *a;
	char err[512];

	sg_dp_agent_sections_server(c, &sc);
	*scp = sc;
	a = sg_dp_agent_start(p, &sc, &c->ctl.ac, &c->cluster, err, sizeof(err));
	if (a == NULL) {
		say_error("[control]: %s", err);
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
 * The control server answers: a `version` call through its own Unix socket, or
 * TCP (with the shared secret) when it has no Unix socket.
 */
static int control_answers(struct sg_dp_agent *a, const struct sg_ctl_server_config *sc,
			   char *err, size_t errlen)
{
	const char *addr = sc->tcp_addr != NULL && sc->tcp_addr[0] ? sc->tcp_addr : "127.0.0.1";
	char target[320];
	struct sg_ctl_client *cli;
	bool tcp = sc->unix_path == NULL;
	int rc;

	if (tcp && sg_ctl_server_tcp_port(sg_dp_agent_server(a)) == 0)
		return 0; /* no socket to ask (only metrics, say): its thread is up */
	if (!tcp)
		snprintf(target, sizeof(target), "unix:%s", sc->unix_path);
	else
		snprintf(target, sizeof(target), "%s:%u", strcmp(addr, "0.0.0.0") ? addr : "127.0.0.1",
			 sg_ctl_server_tcp_port(sg_dp_agent_server(a)));
	cli = sg_ctl_client_connect(target, tcp ? sc->secret : NULL, tcp ? sc->secret_len : 0,
				    READY_TIMEOUT_MS);
	if (cli == NULL) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", target, strerror(errno));
		return rc;
	}
	rc = sg_ctl_version_check(cli, NULL, err, errlen);
	sg_ctl_client_close(cli);
	return rc;
}

/*
 * Readiness: every lcore polls, and the control server (if any) answers a call.
 * Then, and only then, READY=1 to systemd. @return 0 or -errno (said why).
 */
static int ready(struct sg_dp_pipeline *p, struct sg_dp_agent *a,
		 const struct sg_ctl_server_config *sc)
{
	char err[512];
	int rc = sg_dp_pipeline_wait_polling(p, READY_TIMEOUT_MS);

	if (rc < 0) {
		say_error("not every lcore polls %u ms after the start: %s", READY_TIMEOUT_MS,
			  strerror(-rc));
		return rc;
	}
	if (a != NULL && (rc = control_answers(a, sc, err, sizeof(err))) < 0) {
		say_error("the control server does not answer: %s", err);
		return rc;
	}
	printf("sigmad: ready: %u lcore(s) polling%s\n", sg_dp_pipeline_n_lcores(p),
	       a != NULL ? ", the control server answers" : "");
	fflush(stdout);
	(void)sd_notifyf(0, "READY=1\nSTATUS=summing on %u lcore(s)%s", sg_dp_pipeline_n_lcores(p),
		   a != NULL ? ", control server up" : "");
	return 0;
}

/*
 * SIGHUP for the control agent: old (@p c, what the agent runs with) and new
 * (@p nc) [control] as parsed. @return changes needing a restart.
 */
static int reload_agent(struct sg_dp_agent *a, const struct sg_dp_agent_sections *c,
			const struct sg_dp_agent_sections *nc)
{
	int n;

	if ((a != NULL) != nc->control) {
		printf("sigmad: SIGHUP: [control] %s: needs a restart\n", a ? "removed" : "added");
		return 1;
	}
	if (a == NULL)
		return 0;
	/* the server's keys are compared here, parsed, and named; the agent takes the rest */
	n = sg_dp_agent_sections_diff(c, nc, stdout);
	return n + sg_dp_agent_reload(a, &nc->ctl.ac, stdout);
}

/* @p c: the config sigmad started with, which restart-only keys are compared to */
static void reload(struct sg_dp_pipeline *p, struct sg_dp_agent *agent,
		   const struct sg_dp_config *c, const struct sg_dp_agent_sections *cs, int argc,
		   char **argv)
{
	struct sg_dp_agent_sections ns;
	struct sg_dp_config nc;
	char err[512];
	int n;

	printf("sigmad: SIGHUP: re-reading %s\n", c->config_path[0] ? c->config_path :
	       "the embedded config and options");

	if (load_config(&nc, &ns, argc, argv, err, sizeof(err)) != 0) {
		printf("sigmad: SIGHUP: config rejected, nothing changed: %s\n", err);
		fflush(stdout);
		explicit_bzero(&ns.ctl, sizeof(ns.ctl));
		return;
	}
	n = sg_dp_pipeline_reload(p, &nc, stdout);
	n += reload_agent(agent, cs, &ns);
	/* the new secret was only compared */
	explicit_bzero(&ns.ctl, sizeof(ns.ctl));
	printf("sigmad: SIGHUP: done; %d change%s need%s a restart\n", n, n == 1 ? "" : "s",
	       n == 1 ? "s" : "");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct sg_dp_agent_sections cs; /* [control], [cluster] */
	struct sg_dp_config c;
	struct sg_dp_pipeline *p;
	char err[512];
	int eal_argc, sg_argc, rc, ret = 0;
	char **sg_argv;
	uint64_t t0, last_stats;
	struct sg_dp_agent *agent = NULL;
	struct sg_ctl_server_config sc;

	/* under systemd, the journal gets every log line's level: EAL's too */
	journal_start();
	sg_argv = sg_dp_args_split(argc, argv, &eal_argc, &sg_argc);
	if (sg_argv == NULL)
		return 1;
	/* --help and bad options are answered before EAL starts */
	rc = load_config(&c, &cs, sg_argc, sg_argv, err, sizeof(err));
	if (rc == 0 && c.demo) {
		snprintf(err, sizeof(err), "--demo is sigma-demo's (build/app/sigma-demo/"
			 "sigma-demo, or ./sigma demo): sigmad carries no traffic generator");
		rc = -EINVAL;
	}
	if (rc != 0) {
		if (rc < 0)
			say_error("%s", err);
		free(sg_argv);
		journal_stop();
		return rc > 0 ? 0 : 2;
	}
	if (sg_dp_eal_init(eal_argc, argv, "sigmad") < 0) {
		say_error("EAL did not start (%s); without hugepages pass --no-huge --no-shconf -m "
			  "512 before --", rte_strerror(rte_errno));
		free(sg_argv);
		journal_stop();
		return 1;
	}
	rte_log_set_level_pattern("sigma.*", c.log_level);
	p = sg_dp_pipeline_create(&c, err, sizeof(err));
	if (p == NULL) {
		say_error("%s", err);
		/* a build without the configured transport is a configuration error */
		ret = errno == EPROTONOSUPPORT ? 2 : 1;
		goto out;
	}
	sg_dp_telemetry_register(p);
	install_signals();
	rc = sg_dp_pipeline_start(p);
	if (rc < 0) {
		say_error("cannot start the lcores: %s", strerror(-rc));
		ret = 1;
	} else {
		printf("sigmad: running: %u lcore(s), %u job(s); SIGINT/SIGTERM stop, SIGHUP "
		       "reloads\n", sg_dp_pipeline_n_lcores(p), c.n_jobs);
		fflush(stdout);
		if (cs.control)
			agent = start_agent(p, &cs, &sc);
		/* /sigma/cluster answers from now on, with or without an agent */
		sg_dp_agent_telemetry_register(agent);
		if ((cs.control && agent == NULL) || ready(p, agent, &sc) < 0) {
			ret = 1;
			got_stop = 1;
		}
	}
	t0 = last_stats = rte_rdtsc();
	while (rc == 0 && !got_stop) {
		uint64_t now = rte_rdtsc(), hz = rte_get_tsc_hz();
		unsigned int si = sg_dp_pipeline_config(p)->stats_interval_s;

		if (c.duration_s > 0 && (double)(now - t0) / (double)hz >= c.duration_s)
			break;
		if (got_hup) {
			struct timespec ts;

			got_hup = 0;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			(void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
					 (unsigned long long)ts.tv_sec * 1000000ull +
					 (unsigned long long)ts.tv_nsec / 1000);
			reload(p, agent, &c, &cs, sg_argc, sg_argv);
			(void)sd_notify(0, "READY=1");
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

		(void)sd_notify(0, "STOPPING=1\nSTATUS=draining");
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
	explicit_bzero(&cs.ctl, sizeof(cs.ctl));
	sg_dp_eal_cleanup();
	free(sg_argv);
	fflush(stdout);
	journal_stop();
	return ret;
}
