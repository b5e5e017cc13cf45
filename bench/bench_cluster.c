/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-bench cluster: BytePS's headline on an emulated cluster (docs/emulated-cluster.md).
 *
 * n GPU machines and k CPU machines are network namespaces, each with one veth
 * into a bridge, each link shaped to the same rate in both directions
 * (bench/cluster_net.sh). Every machine runs a summation node (--node: a
 * sigma-udpd, or a sigmad over AF_XDP on the machine's veth and lo, or each in
 * turn in one run); each GPU machine also runs one worker (a process of this
 * program that joined its namespace), or with --local-ranks L, L of them that
 * sum among themselves in shared memory and push the machine's sum once. In
 * the same run, over the same links: OpenMPI's MPI_Allreduce across the GPU
 * machines' ranks (TCP; mpirun reaches them through bench/cluster_rsh.sh),
 * Sigma with every k asked for (the job service places the keys with the
 * BytePS split over the nodes' kinds), and a plain parameter
 * server (all keys on the k CPU machines). Each time is set against the
 * model's, and against a bound worked out from the placement the hash really
 * made and the bytes on the wire. Everything made here is removed at the end,
 * on failure and on SIGINT, SIGTERM or SIGHUP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "sg_ctl_client.h"
#include "sg_dp_af_xdp.h"
#include "sg_ctl_place.h"
#include "sigma.h"
#include "sigma_bench.h"
#include "sigma_local.h"


#define CL_MAX_N 16         /* GPU machines */
#define CL_MAX_L 8          /* ranks per GPU machine (--local-ranks) */
#define CL_MAX_W (CL_MAX_N * CL_MAX_L) /* workers */
#define CL_MAX_K 16         /* CPU machines */
#define CL_MAX_M (CL_MAX_N + CL_MAX_K)
#define CL_MAX_ITERS 20
#define CL_MAX_RUNS 15
#define CL_MAX_CONFIGS (2 * (CL_MAX_K + 2) + 1)
#define CL_MAX_KIDS (2 * CL_MAX_M + CL_MAX_W + 4)
#define CL_UDP_PORT 9300
/* sigmad's: beside sigma-udpd's, whose datagrams its XDP program passes to the kernel */
#define CL_SD_PORT 9500
/* AF_XDP frames are one page: sigmad's links carry 3000-byte frames at most */
#define CL_SD_MTU 3000
/* a worker over net_af_xdp (--worker af_xdp): its UDP port, 9400 + rank */
#define CL_WK_PORT 9400
/* ... and its EAL's memory: its pool of 4095 page-sized mbufs is 14 MB */
#define CL_WK_MEM "64"
/* bytes on the wire per chunk besides its payload: Sigma header, UDP, IPv4, Ethernet */
#define CL_WIRE_OVERHEAD (48 + 8 + 20 + 14)

/*
 * The processes this run started, for the signal handler: on SIGINT, SIGTERM
 * or SIGHUP it passes SIGTERM on to them, and the main flow, which sees them
 * end, removes the rest. A signal handler has no argument, hence the statics.
 */
static volatile pid_t cl_kids[CL_MAX_KIDS];
static volatile sig_atomic_t cl_stop;

static void cl_on_signal(int sig)
{
	cl_stop = sig;
	for (unsigned int i = 0; i < CL_MAX_KIDS; i++)
		if (cl_kids[i] > 0)
			kill(cl_kids[i], SIGTERM);
}

static void kid_add(pid_t p)
{
	for (unsigned int i = 0; i < CL_MAX_KIDS; i++)
		if (cl_kids[i] <= 0) {
			cl_kids[i] = p;
			return;
		}
}

static void kid_del(pid_t p)
{
	for (unsigned int i = 0; i < CL_MAX_KIDS; i++)
		if (cl_kids[i] == p)
			cl_kids[i] = 0;
}

enum cl_kind { CL_MPI, CL_SIGMA, CL_PS };

static const char *const cl_kind_name[] = {"mpi", "sigma", "ps"};

/* The summation node of a configuration (--node). */
enum cl_node { CL_UDPD, CL_SIGMAD };

static const char *const cl_node_name[] = {"udpd", "sigmad"};

/* How the workers reach the nodes (--worker). */
enum cl_worker { CL_W_UDP, CL_W_AF_XDP };

static const char *const cl_worker_name[] = {"udp", "af_xdp"};

struct cl_opts {
	unsigned int n, k, ks[CL_MAX_K + 1], n_ks, kmax;
	unsigned int mbit, mtu, iters, runs, window, chunk;
	unsigned int local; /* --local-ranks: ranks per GPU machine, summing locally first */
	int nice;
	uint64_t size;
	uint32_t partition;
	bool mpi, ps, quiet;
	bool node[2]; /* --node: enum cl_node */
	enum cl_worker worker;
	const char *json, *plot, *udpd, *sigmad;
	char prefix[24];
};

struct cl_machine {
	char name[12]; /* g0.., c0.. */
	char ns[48];   /* PREFIX-name */
	char ip[16];
	char wip[16];  /* a GPU machine's worker over net_af_xdp: an address of its own */
	bool gpu;
	pid_t node;    /* its sigma-udpd */
	char sock[160];
	pid_t sd;      /* its sigmad, while the sigmad configurations run */
	char sd_sock[160];
};

/* One configuration of the run: what it is and what each run measured. */
struct cl_conf {
	enum cl_kind kind;
	enum cl_node node; /* sigma and ps */
	unsigned int k;
	double t[CL_MAX_RUNS];       /* median iteration of each run (NAN: failed) */
	double util_max[CL_MAX_RUNS], util_mean[CL_MAX_RUNS];
	double cpu_machine[CL_MAX_RUNS], cpu_ours[CL_MAX_RUNS];
	double link_bytes[CL_MAX_RUNS]; /* MPI: the busiest link's bytes per iteration */
	/* Sigma and PS: each machine's bytes per timed iteration, up and down */
	double up[CL_MAX_RUNS][CL_MAX_M], down[CL_MAX_RUNS][CL_MAX_M];
	double up_med[CL_MAX_M], down_med[CL_MAX_M];
	double model_link[CL_MAX_M]; /* the model's bytes per iteration on each machine's link */
	/* the payload the nodes summed per iteration (job_list's bytes_pushed), warm-up included */
	double node_pushed[CL_MAX_RUNS], node_pushed_med;
	uint64_t retransmits;
	uint64_t qdisc_drops, sock_drops; /* over every run: tbf queues full, socket buffers full */
	bool ok;
	double model, bound;          /* seconds; bound: the placement made and the wire bytes */
	double share_min, share_max;  /* placed bytes / the split's, over the job's nodes */
	double t_med, util_med, cpu_machine_med, cpu_ours_med, link_med;
};

struct cl_ctx {
	struct cl_opts *o;
	struct cl_machine m[CL_MAX_M]; /* GPU machines first */
	unsigned int nm;
	char dir[64];
	char mpi_exe[256];
	int sw_fd, self_fd;           /* the switch's and our own network namespace */
};

/* Counters sampled around a timed window. */
struct cl_sample {
	double t;
	uint64_t up[CL_MAX_M], down[CL_MAX_M]; /* bytes each machine sent / received */
	uint64_t cpu_busy, cpu_total;          /* /proc/stat, all CPUs, in ticks */
	uint64_t ours;                         /* ticks of our processes */
};

/* What the workers of one configuration share with the parent. */
struct cl_shared {
	pthread_barrier_t bar;
	int failed;
	char err[SIGMA_ERR_LEN + 64];
	uint64_t bad, retransmits;
	int win_open, win_closed;   /* rank 0: timed iterations started, ended */
	double t[CL_MAX_ITERS][CL_MAX_W];
};

/* ---- processes ----------------------------------------------------------- */

static int join_ns(const char *ns)
{
	char path[96];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * Start @p argv (in network namespace @p ns unless NULL), its output to file
 * @p out (NULL: ours). @return its pid, or -errno.
 */
static pid_t spawn(char *const argv[], const char *ns, const char *out)
{
	pid_t p = fork();

	if (p < 0)
		return -errno;
	if (p == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (ns != NULL && join_ns(ns) < 0) {
			fprintf(stderr, "sigma-bench: cannot join namespace %s\n", ns);
			_exit(126);
		}
		if (out != NULL) {
			int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

			if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
				_exit(126);
		}
		execvp(argv[0], argv);
		fprintf(stderr, "sigma-bench: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	kid_add(p);
	return p;
}

/*
 * Wait for @p p at most @p seconds (0: no limit); at the deadline, or on a
 * signal unless @p finish (cleaning up must go on), it is killed.
 * @return its wait status, or -ETIMEDOUT / -EINTR (killed).
 */
static int wait_kid(pid_t p, double seconds, bool finish)
{
	double end = sigma_bench_now() + seconds;
	int st = 0, rc = 0;

	for (;;) {
		pid_t w = waitpid(p, &st, WNOHANG);

		if (w == p || (w < 0 && errno != EINTR))
			break;
		if ((cl_stop && !finish) || (seconds > 0 && sigma_bench_now() > end)) {
			rc = cl_stop && !finish ? -EINTR : -ETIMEDOUT;
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			break;
		}
		usleep(20000);
	}
	kid_del(p);
	return rc < 0 ? rc : st;
}

/* bench/cluster_net.sh @p verb ...: @return its exit status (77: cannot here), or -errno. */
static int net_script(struct cl_ctx *c, const char *verb, bool quiet)
{
	char n[16], k[16], mbit[16], mtu[16];
	char *script = (char *)sigma_bench_path(SIGMA_SOURCE_ROOT "/bench/cluster_net.sh",
						SIGMA_DATA_DIR "/bench/cluster_net.sh");
	char *up[] = {script, (char *)verb, c->o->prefix, n, k, mbit, mtu, NULL};
	char *other[] = {script, (char *)verb, c->o->prefix, NULL};
	pid_t p;
	int st;

	snprintf(n, sizeof(n), "%u", c->o->n);
	snprintf(k, sizeof(k), "%u", c->o->kmax);
	snprintf(mbit, sizeof(mbit), "%u", c->o->mbit);
	snprintf(mtu, sizeof(mtu), "%u", c->o->mtu);
	p = spawn(strcmp(verb, "up") == 0 ? up : other, NULL, quiet ? "/dev/null" : NULL);
	if (p < 0)
		return p;
	/* making it stops at a signal; removing it and checking it never do */
	st = wait_kid(p, 300, strcmp(verb, "up") != 0);
	if (st < 0)
		return st;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* cluster_net.sh uplink PREFIX on MBIT MTU | off (around the sigmad configurations) */
static int net_uplink(struct cl_ctx *c, bool on)
{
	char mbit[16], mtu[16];
	char *script = (char *)sigma_bench_path(SIGMA_SOURCE_ROOT "/bench/cluster_net.sh",
						SIGMA_DATA_DIR "/bench/cluster_net.sh");
	char *argv[] = {script, "uplink", c->o->prefix, on ? "on" : "off", mbit, mtu, NULL};
	pid_t p;
	int st;

	snprintf(mbit, sizeof(mbit), "%u", c->o->mbit);
	snprintf(mtu, sizeof(mtu), "%u", c->o->mtu);
	if (!on)
		argv[4] = NULL;
	p = spawn(argv, NULL, NULL);
	if (p < 0)
		return p;
	st = wait_kid(p, 60, !on);
	if (st < 0)
		return st;
	if (on && WIFEXITED(st) && WEXITSTATUS(st) != 0)
		fprintf(stderr, "sigma-bench: cannot shape the uplinks in the switch for sigmad's "
				"AF_XDP frames (above)%s\n", WEXITSTATUS(st) == 77 ?
				": this kernel has no ifb" : "");
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static int node_start(struct cl_ctx *c, struct cl_machine *m)
{
	char gbps[32], log[128], port[8];
	char udpd[PATH_MAX];
	char *argv[] = {udpd, "--addr", m->ip, "--port", port, "--name", m->name, "--kind",
			m->gpu ? "gpu" : "cpu", "--gbps", gbps, "--unix", m->sock,
			"--max-chunk", "8920", NULL};

	snprintf(udpd, sizeof(udpd), "%s", c->o->udpd);
	snprintf(port, sizeof(port), "%u", CL_UDP_PORT);
	snprintf(gbps, sizeof(gbps), "%g", c->o->mbit / 1000.0);
	snprintf(m->sock, sizeof(m->sock), "%s/%s.sock", c->dir, m->name);
	snprintf(log, sizeof(log), "%s/%s.log", c->dir, m->name);
	m->node = spawn(argv, m->ns, log);
	return m->node < 0 ? (int)m->node : 0;
}

/*
 * A machine's sigmad (docs/emulated-cluster.md, "sigmad nodes"): an EAL of its
 * own without hugepages (-m 128, a file prefix per node), one lcore that
 * sleeps when idle, net_af_xdp on eth0 and, on a GPU machine, on lo as well,
 * for the machine's own worker (one lcore polls both: [layout] extra_rx).
 */
static int sd_start(struct cl_ctx *c, struct cl_machine *m)
{
	const struct cl_opts *o = c->o;
	char ini[128], log[128], prefix[64], lcores[48];
	char *argv[] = {(char *)o->sigmad, "--no-huge", "--no-shconf", "--no-pci", "-m", "128",
			prefix, lcores, "--log-level=lib.eal:error",
			"--vdev=net_af_xdp0,iface=eth0,start_queue=0,queue_count=1",
			m->gpu ? "--vdev=net_af_xdp1,iface=lo,start_queue=0,queue_count=1" : "--",
			m->gpu ? "--" : "--config", m->gpu ? "--config" : ini, m->gpu ? ini : NULL,
			NULL};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f;

	snprintf(m->sd_sock, sizeof(m->sd_sock), "%s/%s-sd.sock", c->dir, m->name);
	snprintf(ini, sizeof(ini), "%s/%s-sigmad.ini", c->dir, m->name);
	snprintf(log, sizeof(log), "%s/%s-sd.log", c->dir, m->name);
	snprintf(prefix, sizeof(prefix), "--file-prefix=%s-%s", o->prefix, m->name);
	snprintf(lcores, sizeof(lcores), "--lcores=(0-1)@(0-%ld)", ncpu > 1 ? ncpu - 1 : 0);
	f = fopen(ini, "w");
	if (f == NULL)
		return -errno;
	/* checksums: the veths and lo leave them to an offload that AF_XDP does not do */
	fprintf(f, "[net]\nip = %s\nudp_port = %u\nmtu = %u\nudp_checksum = no\n"
		"[layout]\nrtc = (0,0,1)\n%s"
		"[resources]\nmbufs = 4096\npool_bufs = 2048\n[live]\nidle = sleep\n"
		"[control]\nunix = %s\nname = %s\nkind = %s\ngbps = %g\n", m->ip, CL_SD_PORT,
		o->mtu, m->gpu ? "extra_rx = (1,0,1)\n" : "", m->sd_sock, m->name,
		m->gpu ? "gpu" : "cpu", o->mbit / 1000.0);
	if (fclose(f) != 0)
		return -EIO;
	/* a fresh log each run: nodes_ready() looks in it for this sigmad's "running" */
	unlink(log);
	m->sd = spawn(argv, m->ns, log);
	return m->sd < 0 ? (int)m->sd : 0;
}

/*
 * Wait until every node of kind @p node answers on its control socket (its log
 * says it runs).
 */
static int nodes_ready(struct cl_ctx *c, enum cl_node node)
{
	const char *mark = node == CL_UDPD ? "sigma-udpd: node " : "sigmad: running";

	for (unsigned int i = 0; i < c->nm; i++) {
		struct cl_machine *m = &c->m[i];
		pid_t *pid = node == CL_UDPD ? &m->node : &m->sd;
		char log[128], line[512];
		bool up = false;

		snprintf(log, sizeof(log), "%s/%s%s.log", c->dir, m->name,
			 node == CL_UDPD ? "" : "-sd");
		for (int t = 0; t < 500 && !up && !cl_stop; t++) {
			FILE *f = fopen(log, "r");

			while (f != NULL && fgets(line, sizeof(line), f) != NULL)
				up |= strstr(line, mark) != NULL;
			if (f != NULL)
				fclose(f);
			if (up)
				break;
			if (waitpid(*pid, NULL, WNOHANG) != 0) { /* it ended */
				kid_del(*pid);
				*pid = 0;
				break;
			}
			usleep(20000);
		}
		if (!up) {
			FILE *f = fopen(log, "r");

			fprintf(stderr, "sigma-bench: the summation node (%s) of %s did not start:\n",
				cl_node_name[node], m->name);
			while (f != NULL && fgets(line, sizeof(line), f) != NULL)
				fprintf(stderr, "  | %s", line);
			if (f != NULL)
				fclose(f);
			return -EIO;
		}
	}
	return 0;
}

static void nodes_stop(struct cl_ctx *c, enum cl_node node)
{
	for (unsigned int i = 0; i < c->nm; i++) {
		pid_t p = node == CL_UDPD ? c->m[i].node : c->m[i].sd;

		if (p > 0)
			kill(p, SIGTERM);
	}
	for (unsigned int i = 0; i < c->nm; i++) {
		pid_t *p = node == CL_UDPD ? &c->m[i].node : &c->m[i].sd;
		pid_t q = *p;

		if (q <= 0)
			continue;
		*p = 0;
		/* a sigmad drains and detaches its XDP programs: give it longer */
		if (wait_kid(q, node == CL_UDPD ? 3 : 10, true) == -ETIMEDOUT)
			fprintf(stderr, "sigma-bench: node %s (%s) did not stop: killed\n",
				c->m[i].name, cl_node_name[node]);
	}
}

/* ---- counters ------------------------------------------------------------ */

/* Each machine's bytes on its link, from the bridge side's veth (in the switch). */
static int read_links(struct cl_ctx *c, struct cl_sample *s)
{
	char line[512];
	FILE *f;
	int rc = 0;

	if (setns(c->sw_fd, CLONE_NEWNET) < 0)
		return -errno;
	f = fopen("/proc/self/net/dev", "r");
	if (setns(c->self_fd, CLONE_NEWNET) < 0)
		rc = -errno;
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		char name[32];
		unsigned long long rx, tx, skip;

		/* name: rx bytes packets errs drop fifo frame compressed multicast, tx bytes */
		if (sscanf(line, " %31[^:]: %llu %llu %llu %llu %llu %llu %llu %llu %llu", name, &rx,
			   &skip, &skip, &skip, &skip, &skip, &skip, &skip, &tx) != 10)
			continue;
		for (unsigned int i = 0; i < c->nm; i++)
			if (strcmp(name, c->m[i].name) == 0) {
				s->up[i] = rx;   /* what the bridge got from the machine */
				s->down[i] = tx; /* what it sent the machine */
			}
	}
	fclose(f);
	return rc;
}

static uint64_t proc_ticks(pid_t p)
{
	char path[64], buf[1024], *q;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL && (q = strrchr(buf, ')')) != NULL)
		/* after the name: state ppid pgrp session tty tpgid flags minflt cminflt
		 * majflt cmajflt utime stime */
		sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
	fclose(f);
	return ut + st;
}

static void sample(struct cl_ctx *c, const pid_t *extra, unsigned int n_extra,
		   struct cl_sample *s)
{
	unsigned long long v[10] = {0};
	FILE *f = fopen("/proc/stat", "r");

	memset(s, 0, sizeof(*s));
	if (f != NULL) {
		/* cpu user nice system idle iowait irq softirq steal */
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
			for (int i = 0; i < 8; i++)
				s->cpu_total += v[i];
			s->cpu_busy = s->cpu_total - v[3] - v[4];
		}
		fclose(f);
	}
	for (unsigned int i = 0; i < c->nm; i++)
		s->ours += proc_ticks(c->m[i].node) + proc_ticks(c->m[i].sd);
	for (unsigned int i = 0; i < n_extra; i++)
		s->ours += proc_ticks(extra[i]);
	read_links(c, s);
	s->t = sigma_bench_now();
}

/*
 * Packets lost in the cluster so far: dropped by the tbf queues (tc -s) and
 * by full UDP socket buffers (/proc/net/snmp's RcvbufErrors and InErrors in
 * each machine). Either costs Sigma a retransmit, TCP a back-off.
 */
static void drops(struct cl_ctx *c, uint64_t *qdisc, uint64_t *sock)
{
	*qdisc = *sock = 0;
	for (unsigned int i = 0; i <= c->nm; i++) {
		const char *ns = i < c->nm ? c->m[i].ns : NULL;
		char cmd[160], line[512], sw[64];
		FILE *f;

		if (ns == NULL) {
			snprintf(sw, sizeof(sw), "%s-sw", c->o->prefix);
			ns = sw;
		}
		snprintf(cmd, sizeof(cmd), "tc -n '%s' -s qdisc show 2>/dev/null", ns);
		f = popen(cmd, "r");
		while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
			char *d = strstr(line, "(dropped ");

			if (d != NULL)
				*qdisc += strtoull(d + 9, NULL, 10);
		}
		if (f != NULL)
			pclose(f);
		if (i == c->nm || join_ns(ns) < 0)
			continue;
		f = fopen("/proc/self/net/snmp", "r");
		while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
			unsigned long long in, noport, inerr, out, rcvbuf;

			/* the second Udp: line holds the values */
			if (sscanf(line, "Udp: %llu %llu %llu %llu %llu", &in, &noport, &inerr, &out,
				   &rcvbuf) == 5)
				*sock += inerr + rcvbuf;
		}
		if (f != NULL)
			fclose(f);
		if (setns(c->self_fd, CLONE_NEWNET) < 0)
			break;
	}
}

/* Fold the window between @p a and @p b into run @p run of @p cf. */
static void window_stats(const struct cl_ctx *c, const struct cl_sample *a,
			 const struct cl_sample *b, struct cl_conf *cf, unsigned int run)
{
	double dt = b->t - a->t, cap = dt * c->o->mbit * 1e6 / 8, sum = 0, mx = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN), hz = sysconf(_SC_CLK_TCK);

	for (unsigned int i = 0; i < c->nm; i++) {
		double u = (double)(b->up[i] - a->up[i]), d = (double)(b->down[i] - a->down[i]);
		double busier = (u > d ? u : d) / cap;

		mx = busier > mx ? busier : mx;
		sum += busier;
	}
	cf->util_max[run] = dt > 0 ? mx : NAN;
	cf->util_mean[run] = dt > 0 ? sum / c->nm : NAN;
	cf->cpu_machine[run] = b->cpu_total > a->cpu_total ?
		(double)(b->cpu_busy - a->cpu_busy) / (double)(b->cpu_total - a->cpu_total) : NAN;
	cf->cpu_ours[run] = dt > 0 && ncpu > 0 && hz > 0 ?
		(double)(b->ours - a->ours) / (double)hz / dt / (double)ncpu : NAN;
}

/* ---- Sigma: the job service, workers in their machines ---------------------- */

/* Local rank @p j's share of @p ne elements: [*off, *off + *len) (as sigma.local's). */
static void local_share(uint64_t ne, unsigned int L, unsigned int j, uint64_t *off,
			uint64_t *len)
{
	*off = ne * j / L;
	*len = ne * (j + 1) / L - *off;
}

/*
 * --worker af_xdp: the worker's XDP program, sigmad's, steers the datagrams to
 * its address and port and the ARP of its address to its AF_XDP socket. The
 * program is attached when the session sets its port's queues up, inside
 * sigma_open(), and the session sends its ARP requests at once: this thread
 * configures the program as soon as it is there.
 */
struct wk_steer {
	const char *ip;
	uint16_t port;
	int stop; /* atomic */
	int rc;
	char err[192];
};

static void *wk_steer_main(void *arg)
{
	struct wk_steer *w = arg;
	struct in_addr ip = {0};

	inet_pton(AF_INET, w->ip, &ip);
	w->rc = -ENOENT;
	for (int t = 0; t < 20000 && w->rc == -ENOENT && !__atomic_load_n(&w->stop,
									  __ATOMIC_ACQUIRE); t++) {
		w->rc = sg_dp_xdp_iface_steer("eth0", ip.s_addr, w->port, 1, SG_DP_XDP_F_ARP,
					      w->err, sizeof(w->err));
		if (w->rc == -ENOENT)
			usleep(1000);
	}
	return NULL;
}

/*
 * --worker af_xdp: the worker's own EAL (no hugepages, a small -m, a file
 * prefix of its own, under the run's prefix so that cluster_net.sh finds it)
 * with one port, net_af_xdp on its machine's eth0, with sigmad's XDP program.
 */
static int wk_eal(const struct cl_ctx *c, unsigned int i, unsigned int r, char *err,
		  size_t errlen)
{
	char prefix[64], lcores[48];
	char *argv[] = {"sigma-bench", "--no-huge", "--no-shconf", "--no-pci", "--no-telemetry",
			"-m", CL_WK_MEM, prefix, lcores, "--log-level=lib.eal:error",
			"--vdev=net_af_xdp0,iface=eth0,start_queue=0,queue_count=1", NULL};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char **eargv;
	int n;

	snprintf(prefix, sizeof(prefix), "--file-prefix=%s-%s-w%u", c->o->prefix, c->m[i].name,
		 r);
	snprintf(lcores, sizeof(lcores), "--lcores=0@(0-%ld)", ncpu > 1 ? ncpu - 1 : 0);
	n = sg_dp_xdp_eal_args((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv, &eargv);
	if (n < 0) {
		snprintf(err, errlen, "no memory for the EAL's arguments");
		return n;
	}
	/* without it the PMD's default program takes every frame: the kernel would
	 * see no ARP, no MPI and none of the node's datagrams */
	if (strstr(eargv[n - 1], "xdp_prog=") == NULL) {
		snprintf(err, errlen, "no XDP program (sigma_xdp.o; its path in SIGMA_XDP_PROG): "
			 "build with clang and libbpf-dev");
		return -ENOENT;
	}
	if (rte_eal_init(n, eargv) < 0) {
		snprintf(err, errlen, "rte_eal_init with net_af_xdp on eth0 failed: %s (-m %s MB "
			 "without hugepages)", rte_strerror(rte_errno), CL_WK_MEM);
		return -EIO;
	}
	if (rte_eth_dev_count_avail() != 1) {
		snprintf(err, errlen, "net_af_xdp0 on eth0 did not probe (see the PMD's messages "
			 "above)");
		rte_eal_cleanup();
		return -ENODEV;
	}
	return 0;
}

/* --worker af_xdp: open the session over the port, configuring the XDP program. */
static struct sigma_session *wk_open(struct cl_ctx *c, const char *desc, unsigned int i,
				     unsigned int r, const struct sigma_conf *base, char *err,
				     size_t errlen)
{
	struct wk_steer w = {.ip = base->local_addr, .port = base->local_port};
	struct sigma_session *s;
	pthread_t th;
	int e;

	if (wk_eal(c, i, r, err, errlen) < 0)
		return NULL;
	if (pthread_create(&th, NULL, wk_steer_main, &w) != 0) {
		snprintf(err, errlen, "cannot start a thread");
		return NULL;
	}
	s = sigma_open_job(desc, (uint16_t)i, base, err, errlen);
	e = errno;
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	if (s != NULL)
		return s;
	if (w.rc != 0 && w.rc != -ENOENT) /* the program is not ours, or its map refused us */
		snprintf(err, errlen, "net_af_xdp on eth0: sigmad's XDP program: %s", w.err);
	else if (e == EHOSTUNREACH)
		snprintf(err, errlen, "net_af_xdp on eth0: no ARP reply from the nodes for %s "
			 "(sigmad's XDP program %s)", base->local_addr, w.rc == 0 ?
			 "steered its ARP to the port" : "never appeared on eth0");
	else
		sg_dp_xdp_explain(0, c->o->mtu, -e, err, errlen);
	return NULL;
}

/*
 * Worker @p r: rank r of the job (--local-ranks 1), or local rank r % L of
 * machine r / L, the machine's rank in sub-job r % L of @p desc, summing with
 * its machine's local ranks through libsigma's local aggregation
 * (sigma_local.h: the machine's shared-memory segment, its share pushed).
 */
static void worker(struct cl_ctx *c, struct cl_shared *sh, char (*desc)[SIGMA_JOB_DESC_MAX],
		   unsigned int r)
{
	const struct cl_opts *o = c->o;
	struct sigma_conf base = {.window = o->window, .rto_us = 1000000, .rto_max_us = 4000000,
				  .max_retries = 8};
	unsigned int L = o->local, i = r / L, j = r % L;
	uint64_t ne = o->size / 4, off, len;
	struct sigma_session *s = NULL;
	struct sigma_tensor *t = NULL;
	struct sigma_local *l = NULL;
	struct sigma_local_tensor *lt = NULL;
	struct sigma_job *job0 = NULL;
	struct sigma_stats st;
	char err[256] = "";
	void *in = malloc(o->size), *out = malloc(o->size);
	int rc;

	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (o->worker == CL_W_AF_XDP) {
		/* libsigma's DPDK transport on port 0, net_af_xdp on eth0 (wk_eal()) */
		base.transport = SIGMA_TRANSPORT_DPDK;
		base.dpdk_port = 0;
		base.local_addr = c->m[i].wip;
		base.local_port = (uint16_t)(CL_WK_PORT + r);
	}
	local_share(ne, L, j, &off, &len);
	if ((rc = join_ns(c->m[i].ns)) < 0)
		snprintf(err, sizeof(err), "cannot join %s: %s", c->m[i].ns, strerror(-rc));
	else if (in == NULL || out == NULL)
		snprintf(err, sizeof(err), "no memory for %" PRIu64 " bytes", o->size);
	else if (o->worker == CL_W_AF_XDP &&
		 (s = wk_open(c, desc[j], i, r, &base, err, sizeof(err))) == NULL)
		;
	else if (o->worker == CL_W_UDP &&
		 (s = sigma_open_job(desc[j], (uint16_t)i, &base, err, sizeof(err))) == NULL)
		;
	else if (L == 1 && (t = sigma_tensor_register(s, "grad", 0, SG_DTYPE_FP32, len, 0)) == NULL)
		snprintf(err, sizeof(err), "cannot register the tensor: %s", strerror(errno));
	else if (L > 1) {
		/* the segment's name and key: sub-job 0's id and token, the same on each local rank */
		struct sigma_local_conf lc = {.machine = (uint16_t)i, .local_rank = (uint16_t)j,
					      .local_size = (uint16_t)L};

		if ((job0 = malloc(sizeof(*job0))) == NULL)
			snprintf(err, sizeof(err), "no memory");
		else if (sigma_job_parse(desc[0], job0, err, sizeof(err)) < 0)
			;
		else if (lc.job = job0->conf.job, lc.key = job0->conf.token,
			 (l = sigma_local_open(&lc, s, err, sizeof(err))) == NULL)
			;
		else if ((lt = sigma_local_tensor_register(l, "grad", 0, SG_DTYPE_FP32, ne, 0)) ==
			 NULL)
			snprintf(err, sizeof(err), "cannot register the tensor: %s",
				 sigma_local_last_error(l));
		free(job0);
	}
	if (t == NULL && lt == NULL) {
		sh->failed = 1;
		snprintf(sh->err, sizeof(sh->err), "worker %u: %s", r, err);
	} else {
		sigma_bench_fill(in, SG_DTYPE_FP32, ne, r);
	}
	for (unsigned int it = 0; it <= o->iters; it++) {
		double t0;

		pthread_barrier_wait(&sh->bar);
		if (r == 0 && it == 1)
			__atomic_store_n(&sh->win_open, 1, __ATOMIC_RELEASE);
		if (sh->failed || (t == NULL && lt == NULL))
			continue;
		t0 = sigma_bench_now();
		if ((L > 1 ? sigma_local_push_pull(lt, in, out) :
		     sigma_push_pull_sync(t, in, out)) < 0) {
			sh->failed = 1;
			snprintf(sh->err, sizeof(sh->err), "worker %u: %s", r,
				 L > 1 ? sigma_local_last_error(l) : sigma_last_error(s));
			continue;
		}
		if (it > 0)
			sh->t[it - 1][r] = sigma_bench_now() - t0;
		if (it == o->iters)
			__atomic_add_fetch(&sh->bad, sigma_bench_count_bad(out, SG_DTYPE_FP32, ne,
									   o->n * L), __ATOMIC_RELAXED);
	}
	pthread_barrier_wait(&sh->bar);
	if (r == 0)
		__atomic_store_n(&sh->win_closed, 1, __ATOMIC_RELEASE);
	if (s != NULL) {
		sigma_get_stats(s, &st);
		__atomic_add_fetch(&sh->retransmits, st.retransmits, __ATOMIC_RELAXED);
	}
	sigma_local_close(l);
	sigma_close(s);
	if (o->worker == CL_W_AF_XDP && s != NULL) {
		/* the PMD detaches the program as the port closes; what is left, we do */
		rte_eal_cleanup();
		sg_dp_xdp_cleanup();
	}
	free(in);
	free(out);
}

/* --worker af_xdp: XDP programs on the GPU machines' eth0 once their workers are gone. */
static unsigned int xdp_left(const struct cl_ctx *c)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < c->o->n; i++) {
		char cmd[160], line[1024];
		FILE *f;

		snprintf(cmd, sizeof(cmd), "ip -n '%s' -o link show dev eth0 2>/dev/null",
			 c->m[i].ns);
		f = popen(cmd, "r");
		while (f != NULL && fgets(line, sizeof(line), f) != NULL)
			if (strstr(line, "prog/xdp") != NULL) {
				fprintf(stderr, "sigma-bench: an XDP program is left on %s's eth0 after "
						"its worker exited: %s", c->m[i].name, line);
				n++;
			}
		if (f != NULL)
			pclose(f);
	}
	return n;
}

/* The machines of configuration @p cf: their indices into c->m. */
static unsigned int conf_nodes(const struct cl_ctx *c, const struct cl_conf *cf,
			       unsigned int *idx)
{
	unsigned int k = 0;

	if (cf->kind == CL_SIGMA)
		for (unsigned int i = 0; i < c->o->n; i++)
			idx[k++] = i;
	for (unsigned int j = 0; j < cf->k; j++)
		idx[k++] = c->o->n + j;
	return k;
}

/*
 * The model's bytes per iteration on each machine's link, each way (payload
 * only): a GPU machine's worker pushes what other nodes sum, M minus its own
 * node's share s, and pulls it back; its node takes the other n-1 machines'
 * pushes of s and sends them the sum: M + (n-2)s. A CPU machine's node does
 * that for all n machines: n s. Machines count, not ranks: with --local-ranks
 * each machine pushes once.
 */
static void model_links(const struct cl_ctx *c, struct cl_conf *cf)
{
	const struct cl_opts *o = c->o;
	double share_cpu, share_gpu, M = (double)o->size;

	sg_ctl_split(cf->kind == CL_SIGMA ? o->n : 0, cf->k, &share_cpu, &share_gpu);
	for (unsigned int i = 0; i < c->nm; i++)
		cf->model_link[i] = c->m[i].gpu ? M + ((double)o->n - 2) * share_gpu * M :
				    i - o->n < cf->k ? (double)o->n * share_cpu * M : 0;
}

/*
 * The time the links allow for the placement the jobs really have (one, or
 * one per local rank's share): each link's bytes on the wire (payload and
 * headers of every chunk) over its rate. Also each node's bytes against the
 * BytePS split's.
 */
static int placed_bound(struct cl_ctx *c, struct cl_conf *cf, char (*desc)[SIGMA_JOB_DESC_MAX])
{
	static struct sigma_job job;
	const struct cl_opts *o = c->o;
	double wire[CL_MAX_M] = {0}, payload[CL_MAX_M] = {0}, total = 0, worst = 0;
	double share_cpu, share_gpu, B = o->mbit * 1e6 / 8;
	bool has[CL_MAX_M] = {false};
	char err[256];

	for (unsigned int j = 0; j < o->local; j++) {
		struct sigma_session *s;
		struct sigma_tensor *t;
		uint64_t off, len;

		local_share(o->size / 4, o->local, j, &off, &len);
		if (sigma_job_parse(desc[j], &job, err, sizeof(err)) < 0)
			return -EINVAL;
		s = sigma_open(&job.conf); /* a socket in our own namespace: nothing is sent */
		t = s != NULL ? sigma_tensor_register(s, "grad", 0, SG_DTYPE_FP32, len, 0) : NULL;
		if (t == NULL) {
			sigma_close(s);
			return -errno;
		}
		for (uint32_t p = 0; p < sigma_tensor_nparts(t); p++) {
			uint64_t po = (uint64_t)p * o->partition;
			uint64_t pl = len * 4 - po < o->partition ? len * 4 - po : o->partition;
			uint64_t chunks = (pl + o->chunk - 1) / o->chunk;
			int nd = sigma_tensor_part_node(t, p);

			if (nd < 0 || (unsigned int)nd >= job.conf.nnodes)
				continue;
			for (unsigned int i = 0; i < c->nm; i++)
				if (strcmp(job.names[nd], c->m[i].name) == 0) {
					wire[i] += (double)pl + (double)chunks * CL_WIRE_OVERHEAD;
					payload[i] += (double)pl;
				}
			total += (double)pl + (double)chunks * CL_WIRE_OVERHEAD;
		}
		for (unsigned int d = 0; d < job.conf.nnodes; d++)
			for (unsigned int i = 0; i < c->nm; i++)
				has[i] |= strcmp(job.names[d], c->m[i].name) == 0;
		sigma_close(s);
	}
	sg_ctl_split(cf->kind == CL_SIGMA ? o->n : 0, cf->k, &share_cpu, &share_gpu);
	cf->share_min = INFINITY;
	cf->share_max = 0;
	for (unsigned int i = 0; i < c->nm; i++) {
		struct cl_machine *m = &c->m[i];
		double want = (m->gpu ? share_gpu : share_cpu) * (double)o->size, link;

		if (has[i] && want > 0) {
			double r = payload[i] / want;

			cf->share_min = r < cf->share_min ? r : cf->share_min;
			cf->share_max = r > cf->share_max ? r : cf->share_max;
		}
		/* as model_links(), with the bytes the hash placed */
		if (m->gpu)
			link = total - wire[i] + (double)(o->n - 1) * wire[i];
		else
			link = has[i] ? (double)o->n * wire[i] : 0;
		worst = link > worst ? link : worst;
	}
	cf->bound = worst / B;
	return 0;
}

static int jobsvc(struct cl_ctx *c, const struct cl_conf *cf, struct sg_ctl_jobsvc *svc,
		  struct sg_ctl_jobsvc_node *nodes, char (*targets)[176])
{
	unsigned int idx[CL_MAX_M], nn = conf_nodes(c, cf, idx);

	for (unsigned int i = 0; i < nn; i++) {
		snprintf(targets[i], 176, "unix:%s",
			 cf->node == CL_UDPD ? c->m[idx[i]].sock : c->m[idx[i]].sd_sock);
		nodes[i] = (struct sg_ctl_jobsvc_node){.target = targets[i]};
	}
	*svc = (struct sg_ctl_jobsvc){.nodes = nodes, .n_nodes = nn, .timeout_ms = 10000};
	return nn ? 0 : -EINVAL;
}

/*
 * The payload bytes that the nodes of @p svc summed for job @p id (job_list's
 * bytes_pushed): counted by the nodes, apart from the workers and the links.
 * @return them, or a negative value if a node did not answer.
 */
static double node_pushed(const struct sg_ctl_jobsvc *svc, int64_t id)
{
	double sum = 0;

	for (unsigned int i = 0; i < svc->n_nodes; i++) {
		struct sg_ctl_client *cl = sg_ctl_client_connect(svc->nodes[i].target, NULL, 0,
								 svc->timeout_ms);
		char *res = NULL;
		json_t *arr, *j;
		size_t k;
		bool found = false;

		if (cl == NULL || sg_ctl_client_call(cl, "job_list", NULL, &res, NULL) < 0) {
			sg_ctl_client_close(cl);
			return -1;
		}
		sg_ctl_client_close(cl);
		arr = json_loads(res, 0, NULL);
		free(res);
		json_array_foreach(arr, k, j)
			if (json_integer_value(json_object_get(j, "id")) == id) {
				sum += (double)json_integer_value(json_object_get(j, "bytes_pushed"));
				found = true;
			}
		json_decref(arr);
		if (!found)
			return -1;
	}
	return sum;
}

static void kill_all(pid_t *pids, unsigned int n)
{
	for (unsigned int r = 0; r < n; r++)
		if (pids[r] > 0)
			kill(pids[r], SIGKILL);
}

/*
 * One run of a Sigma or PS configuration: a job on its nodes (with
 * --local-ranks L, L sub-jobs of N = n machines, one per local rank's share),
 * n x L workers, the jobs destroyed.
 */
static int run_sigma(struct cl_ctx *c, struct cl_conf *cf, unsigned int run, double deadline)
{
	const struct cl_opts *o = c->o;
	static char desc[CL_MAX_L][SIGMA_JOB_DESC_MAX];
	struct sg_ctl_jobsvc_node nodes[CL_MAX_M];
	char targets[CL_MAX_M][176], err[1024];
	struct sg_ctl_tensor tensor = {0};
	struct sg_ctl_job_spec spec = {.workers = o->n, .dtype = SG_DTYPE_FP32,
				       .partition_bytes = o->partition, .chunk_bytes = o->chunk,
				       .tensors = &tensor, .n_tensors = 1};
	struct sg_ctl_jobsvc svc;
	struct cl_shared *sh;
	struct cl_sample s0 = {0}, s1 = {0};
	pthread_barrierattr_t ba;
	pid_t pids[CL_MAX_W] = {0};
	unsigned int left, L = o->local, nw = o->n * L, jobs = 0;
	bool have0 = false, have1 = false;
	int64_t id[CL_MAX_L];
	int rc = 0;

	snprintf(tensor.name, sizeof(tensor.name), "grad");
	cf->t[run] = NAN;
	jobsvc(c, cf, &svc, nodes, targets);
	for (; jobs < L; jobs++) {
		uint64_t off;

		local_share(o->size / 4, L, jobs, &off, &tensor.elems);
		id[jobs] = sg_ctl_job_service_create(&svc, &spec, desc[jobs], sizeof(desc[jobs]),
						     err, sizeof(err));
		if (id[jobs] < 0) {
			fprintf(stderr, "sigma-bench: %s k=%u: job create: %s\n",
				cl_kind_name[cf->kind], cf->k, err);
			cf->ok = false; /* a job refused marks the configuration FAILED */
			rc = (int)id[jobs];
			goto out;
		}
	}
	if (run == 0 && placed_bound(c, cf, desc) < 0)
		cf->bound = NAN;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		rc = -ENOMEM;
		goto out;
	}
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->bar, &ba, nw);
	fflush(NULL);
	for (unsigned int r = 0; r < nw; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			worker(c, sh, desc, r);
			_exit(0);
		}
		if (pids[r] < 0) {
			sh->failed = 1;
			snprintf(sh->err, sizeof(sh->err), "fork: %s", strerror(errno));
			break;
		}
		kid_add(pids[r]);
	}
	/*
	 * Watch: sample the counters when rank 0 opens and closes the timed
	 * window; a worker that dies, a signal or the deadline ends them all
	 * (the others would wait at the barrier forever).
	 */
	left = 0;
	for (unsigned int r = 0; r < nw; r++)
		left += pids[r] > 0;
	if (left < nw)
		kill_all(pids, nw);
	while (left > 0) {
		bool reaped = false;

		if (!have0 && __atomic_load_n(&sh->win_open, __ATOMIC_ACQUIRE)) {
			sample(c, pids, nw, &s0);
			have0 = true;
		}
		if (have0 && !have1 && __atomic_load_n(&sh->win_closed, __ATOMIC_ACQUIRE)) {
			sample(c, pids, nw, &s1);
			have1 = true;
		}
		for (unsigned int r = 0; r < nw; r++) {
			int st;

			if (pids[r] <= 0 || waitpid(pids[r], &st, WNOHANG) != pids[r])
				continue;
			kid_del(pids[r]);
			pids[r] = 0;
			left--;
			reaped = true;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				sh->failed = 1;
				snprintf(sh->err, sizeof(sh->err), "worker %u died (status 0x%x)", r,
					 st);
				kill_all(pids, nw);
			}
		}
		if (reaped)
			continue;
		if (cl_stop || sigma_bench_now() > deadline) {
			sh->failed = 1;
			snprintf(sh->err, sizeof(sh->err), "%s", cl_stop ? "interrupted" :
				 "no result before the deadline: workers killed");
			kill_all(pids, nw);
		}
		usleep(5000);
	}
	if (o->worker == CL_W_AF_XDP && xdp_left(c) > 0 && !sh->failed) {
		sh->failed = 1;
		snprintf(sh->err, sizeof(sh->err), "XDP programs left by the workers (above)");
	}
	if (!sh->failed && sh->bad == 0) {
		double v[CL_MAX_ITERS];

		for (unsigned int it = 0; it < o->iters; it++) {
			v[it] = 0;
			for (unsigned int r = 0; r < nw; r++)
				v[it] = sh->t[it][r] > v[it] ? sh->t[it][r] : v[it];
		}
		cf->t[run] = sigma_bench_median(v, o->iters);
		if (have1) {
			window_stats(c, &s0, &s1, cf, run);
			/* the window holds the timed iterations */
			for (unsigned int i = 0; i < c->nm; i++) {
				cf->up[run][i] = (double)(s1.up[i] - s0.up[i]) / o->iters;
				cf->down[run][i] = (double)(s1.down[i] - s0.down[i]) / o->iters;
			}
		}
	} else {
		cf->ok = false;
		if (sh->bad)
			fprintf(stderr, "sigma-bench: %s k=%u: %" PRIu64 " wrong sums\n",
				cl_kind_name[cf->kind], cf->k, sh->bad);
		else
			fprintf(stderr, "sigma-bench: %s k=%u: %s\n", cl_kind_name[cf->kind], cf->k,
				sh->err);
		rc = -EIO;
	}
	cf->retransmits += sh->retransmits;
	munmap(sh, sizeof(*sh));
	if (rc == 0) {
		double sum = 0, v = 0;

		for (unsigned int j = 0; j < jobs && v >= 0; j++)
			sum += v = node_pushed(&svc, id[j]);
		cf->node_pushed[run] = v >= 0 ? sum / (o->iters + 1) : NAN;
	}
out:
	for (unsigned int j = 0; j < jobs; j++)
		if (sg_ctl_job_service_destroy(&svc, (uint32_t)id[j], err, sizeof(err)) < 0)
			fprintf(stderr, "sigma-bench: job destroy: %s\n", err);
	return rc;
}

/* ---- MPI_Allreduce across the GPU machines --------------------------------- */

static int run_mpi(struct cl_ctx *c, struct cl_conf *cf, unsigned int run, double deadline)
{
	const struct cl_opts *o = c->o;
	char np[16], hosts[128], iters[16], size[32], out[128], line[256], tmp[128];
	char *agent = (char *)sigma_bench_path(SIGMA_SOURCE_ROOT "/bench/cluster_rsh.sh",
					       SIGMA_DATA_DIR "/bench/cluster_rsh.sh");
	char *argv[] = {"mpirun", "--allow-run-as-root", "-np", np, "--hostfile", hosts,
			"--bind-to", "none", "--mca", "plm_rsh_agent", agent,
			"--mca", "plm_rsh_no_tree_spawn", "1",
			"--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "10.77.0.0/24",
			"--mca", "oob_tcp_if_include", "10.77.0.0/24", "--mca", "pml", "ob1",
			c->mpi_exe, iters, size, NULL};
	struct cl_sample s0, s1;
	FILE *f;
	pid_t p;
	int st;
	bool got = false;

	cf->t[run] = NAN;
	snprintf(np, sizeof(np), "%u", o->n * o->local);
	snprintf(hosts, sizeof(hosts), "%s/hosts", c->dir);
	snprintf(iters, sizeof(iters), "%u", o->iters);
	snprintf(size, sizeof(size), "%" PRIu64, o->size);
	snprintf(out, sizeof(out), "%s/mpi.out", c->dir);
	f = fopen(hosts, "w");
	if (f == NULL)
		return -errno;
	for (unsigned int i = 0; i < o->n; i++)
		fprintf(f, "%s slots=%u\n", c->m[i].ip, o->local);
	fclose(f);
	unlink(out);
	/* mpirun's session folder, and (bench/cluster_rsh.sh) each daemon's beside it */
	snprintf(tmp, sizeof(tmp), "%s/mpi-%s", c->dir, c->m[0].name);
	setenv("SIGMA_CLUSTER_DIR", c->dir, 1);
	setenv("OMPI_MCA_orte_tmpdir_base", tmp, 1);
	if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
		return -errno;
	sample(c, NULL, 0, &s0);
	p = spawn(argv, c->m[0].ns, out); /* mpirun itself on GPU machine 0 */
	if (p < 0)
		return (int)p;
	st = wait_kid(p, deadline - sigma_bench_now(), false);
	sample(c, NULL, 0, &s1);
	unsetenv("OMPI_MCA_orte_tmpdir_base");
	f = fopen(out, "r");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		uint64_t sz;
		double t;
		int ok;

		if (sscanf(line, "allreduce %" SCNu64 " %lf %d", &sz, &t, &ok) == 3 && sz == o->size &&
		    ok == 1) {
			cf->t[run] = t;
			got = true;
		} else if (!o->quiet || st != 0) {
			fprintf(stderr, "mpirun: %s", line);
		}
	}
	if (f != NULL)
		fclose(f);
	if (st != 0 || !got) {
		fprintf(stderr, "sigma-bench: MPI_Allreduce failed (%s)\n",
			st == -ETIMEDOUT ? "deadline" : st == -EINTR ? "interrupted" : "see above");
		cf->ok = false;
		return -EIO;
	}
	/*
	 * The window is the whole mpirun (start-up, warm-up, iterations): no link
	 * use, but the busiest link's bytes per iteration.
	 */
	window_stats(c, &s0, &s1, cf, run);
	cf->util_max[run] = cf->util_mean[run] = NAN;
	for (unsigned int i = 0; i < o->n; i++) {
		double u = (double)(s1.up[i] - s0.up[i]), d = (double)(s1.down[i] - s0.down[i]);
		double per = (u > d ? u : d) / (o->iters + 1);

		if (!(cf->link_bytes[run] >= per))
			cf->link_bytes[run] = per;
	}
	return 0;
}

/* ---- options, outputs ------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sigma-bench cluster [options]   (needs root: network namespaces, tc)\n"
		"  --n N          GPU machines, each a worker and a summation node (default 4)\n"
		"  --k K          CPU machines of the headline: Sigma and PS with K (default 2)\n"
		"  --ks LIST      the k of every Sigma run, e.g. 0,2,4 (default 0..n and K)\n"
		"  --link RATE    each machine's link, both directions: 200mbit, 1gbit, or a number "
		"of Mbit/s (default 100mbit: see docs/emulated-cluster.md)\n"
		"  --size M       model bytes M (K/M/G suffixes: powers of 1024; default 64M)\n"
		"  --partition P  partition bytes (default 64K: enough keys for the hash to "
		"follow the split)\n"
		"  --chunk C      chunk payload, a multiple of 8 up to 8920 (default 8920)\n"
		"  --mtu MTU      the links' MTU (default 9000)\n"
		"  --window W     outstanding chunks per worker and node (default 32)\n"
		"  --iters I      timed iterations after one warm-up (default 3)\n"
		"  --runs R       whole rounds of every configuration, interleaved; figures are "
		"medians across them (default 1)\n"
		"  --no-mpi       skip MPI_Allreduce;  --no-ps  skip the parameter server\n"
		"  --json F       JSON there (default: stdout, after the table)\n"
		"  --plot F.svg   gnuplot: measured time against the model for each k (.png too)\n"
		"  --prefix P     names of the namespaces (P-sw, P-g0, ...; default sgc<pid>)\n"
		"  --udpd PATH    sigma-udpd (default: the build tree's, beside sigma-bench)\n"
		"  --node LIST    the summation nodes: udpd, sigmad (over AF_XDP) or udpd,sigmad "
		"(both, in turn, in each run; default udpd). With sigmad the MTU is at most "
		"3000 (default 3000, chunks 2920)\n"
		"  --sigmad PATH  sigmad (default: the build tree's)\n"
		"  --worker W     how the workers reach the nodes: udp (kernel UDP, default) or "
		"af_xdp (libsigma's DPDK transport on net_af_xdp on the machine's eth0, an EAL "
		"per worker; its own node over kernel UDP; needs --node udpd and --local-ranks 1; "
		"the MTU is at most 3000, default 3000, chunks 2920)\n"
		"  --local-ranks L  ranks per GPU machine, 1..%d (default 1): they sum among "
		"themselves first, each pushes 1/L of the machine's sum, so each machine pushes "
		"once; MPI runs n x L ranks\n"
		"  --nice N       run the cluster's processes at this nice value, -20..19 (default 0; "
		"a negative one shields the run from other load on the machine)\n"
		"  --quiet        no progress lines\n", CL_MAX_L);
}

static int parse_rate(const char *s, unsigned int *mbit)
{
	const char *end;
	double v;

	if (sigma_bench_parse_unit(s, &v, &end) != 0)
		return -EINVAL;
	if (strcasecmp(end, "gbit") == 0)
		v *= 1000;
	else if (strcasecmp(end, "kbit") == 0)
		v /= 1000;
	else if (*end != '\0' && strcasecmp(end, "mbit") != 0)
		return -EINVAL;
	if (v < 1 || v > 100000 || v != floor(v))
		return -EINVAL;
	*mbit = (unsigned int)v;
	return 0;
}

static int parse_ks(const char *s, struct cl_opts *o)
{
	char buf[256], *rest = buf, *tok;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	o->n_ks = 0;
	while ((tok = strsep(&rest, ",")) != NULL)
		if (o->n_ks == CL_MAX_K + 1 ||
		    sigma_bench_parse_uint(tok, 0, CL_MAX_K, &o->ks[o->n_ks++]) < 0)
			return -EINVAL;
	return 0;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return (x > y) - (x < y);
}

/* The default @p prog: the build tree's, @p rel from this program's folder. */
static void default_prog(char *buf, size_t cap, const char *prog, const char *rel)
{
	char self[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	snprintf(buf, cap, "%s", prog);
	if (n <= 0)
		return;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash == NULL)
		return;
	*slash = '\0';
	snprintf(buf, cap, "%s/../%s/%s", self, rel, prog);
}

/* --node udpd,sigmad */
static int parse_nodes(const char *s, struct cl_opts *o)
{
	char buf[64], *rest = buf, *tok;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	o->node[CL_UDPD] = o->node[CL_SIGMAD] = false;
	while ((tok = strsep(&rest, ",")) != NULL)
		if (strcmp(tok, "udpd") == 0)
			o->node[CL_UDPD] = true;
		else if (strcmp(tok, "sigmad") == 0)
			o->node[CL_SIGMAD] = true;
		else
			return -EINVAL;
	return 0;
}

static int parse_opts(int argc, char **argv, struct cl_opts *o, char *udpd, size_t udpd_cap,
		      char *sigmad, size_t sigmad_cap)
{
	static const struct option opts[] = {
		{"n", required_argument, NULL, 'n'},	 {"k", required_argument, NULL, 'k'},
		{"ks", required_argument, NULL, 'K'},	 {"link", required_argument, NULL, 'l'},
		{"size", required_argument, NULL, 's'},	 {"partition", required_argument, NULL, 'P'},
		{"chunk", required_argument, NULL, 'c'}, {"mtu", required_argument, NULL, 'u'},
		{"window", required_argument, NULL, 'w'}, {"iters", required_argument, NULL, 'i'},
		{"runs", required_argument, NULL, 'r'},	 {"no-mpi", no_argument, NULL, 'M'},
		{"no-ps", no_argument, NULL, 'S'},	 {"json", required_argument, NULL, 'j'},
		{"plot", required_argument, NULL, 'p'},	 {"prefix", required_argument, NULL, 'x'},
		{"udpd", required_argument, NULL, 'd'},	 {"quiet", no_argument, NULL, 'q'},
		{"nice", required_argument, NULL, 'N'},	 {"help", no_argument, NULL, 'h'},
		{"node", required_argument, NULL, 'D'},	 {"sigmad", required_argument, NULL, 'e'},
		{"local-ranks", required_argument, NULL, 'L'},
		{"worker", required_argument, NULL, 'W'}, {NULL, 0, NULL, 0}};
	bool ks_set = false, bad = false, mtu_set = false, chunk_set = false;
	uint64_t v;
	int ch;

	*o = (struct cl_opts){.n = 4, .k = 2, .mbit = 100, .mtu = 9000, .iters = 3, .runs = 1,
			      .window = 32, .chunk = 8920, .local = 1, .size = 64ull << 20,
			      .partition = 64 << 10, .mpi = true, .ps = true,
			      .node = {[CL_UDPD] = true}};
	snprintf(o->prefix, sizeof(o->prefix), "sgc%d", (int)getpid());
	default_prog(udpd, udpd_cap, "sigma-udpd", "udpd");
	default_prog(sigmad, sigmad_cap, "sigmad", "sigmad");
	o->udpd = udpd;
	o->sigmad = sigmad;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'n': bad |= sigma_bench_parse_uint(optarg, 1, CL_MAX_N, &o->n) < 0; break;
		case 'k': bad |= sigma_bench_parse_uint(optarg, 0, CL_MAX_K, &o->k) < 0; break;
		case 'K': bad |= parse_ks(optarg, o) < 0; ks_set = true; break;
		case 'l': bad |= parse_rate(optarg, &o->mbit) < 0; break;
		case 's': bad |= sigma_bench_parse_size(optarg, &o->size) < 0; break;
		case 'P':
			bad |= sigma_bench_parse_size(optarg, &v) < 0 || v > SG_MAX_PARTITION_BYTES;
			o->partition = (uint32_t)v;
			break;
		case 'c': bad |= sigma_bench_parse_uint(optarg, 8, SG_MAX_CHUNK_BYTES, &o->chunk) < 0;
			chunk_set = true;
			break;
		case 'u': bad |= sigma_bench_parse_uint(optarg, 1280, 9000, &o->mtu) < 0;
			mtu_set = true;
			break;
		case 'D': bad |= parse_nodes(optarg, o) < 0; break;
		case 'L':
			if (sigma_bench_parse_uint(optarg, 1, CL_MAX_L, &o->local) < 0) {
				fprintf(stderr, "sigma-bench cluster: --local-ranks %s: 1..%d ranks per "
						"GPU machine\n", optarg, CL_MAX_L);
				return -EINVAL;
			}
			break;
		case 'e': o->sigmad = optarg; break;
		case 'W':
			if (strcmp(optarg, "udp") == 0)
				o->worker = CL_W_UDP;
			else if (strcmp(optarg, "af_xdp") == 0)
				o->worker = CL_W_AF_XDP;
			else
				bad = true;
			break;
		case 'w': bad |= sigma_bench_parse_uint(optarg, 1, 4096, &o->window) < 0; break;
		case 'i': bad |= sigma_bench_parse_uint(optarg, 1, CL_MAX_ITERS, &o->iters) < 0;
			break;
		case 'r': bad |= sigma_bench_parse_uint(optarg, 1, CL_MAX_RUNS, &o->runs) < 0; break;
		case 'M': o->mpi = false; break;
		case 'S': o->ps = false; break;
		case 'j': o->json = optarg; break;
		case 'p': o->plot = optarg; break;
		case 'x':
			bad |= strlen(optarg) == 0 || strlen(optarg) >= 16 ||
			       strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(optarg);
			snprintf(o->prefix, sizeof(o->prefix), "%s", optarg);
			break;
		case 'd': o->udpd = optarg; break;
		case 'q': o->quiet = true; break;
		case 'N': {
			int64_t nv = 0;

			bad |= sg_parse_i64(optarg, -20, 19, &nv) != 0;
			o->nice = (int)nv;
			break;
		}
		case 'h': return 1;
		default: return -EINVAL;
		}
	}
	if (o->worker == CL_W_AF_XDP) {
#ifndef SG_HAVE_AF_XDP
		fprintf(stderr, "sigma-bench cluster: --worker af_xdp: this build has no AF_XDP "
				"program (build with clang and libbpf-dev)\n");
		return -EINVAL;
#endif
		/* one XDP program and one AF_XDP socket per queue, and a veth has one */
		if (o->node[CL_SIGMAD]) {
			fprintf(stderr, "sigma-bench cluster: --worker af_xdp needs --node udpd: a "
					"machine's eth0 has one queue, and a sigmad's XDP program and "
					"AF_XDP socket hold it\n");
			return -EINVAL;
		}
		if (o->local > 1) {
			fprintf(stderr, "sigma-bench cluster: --worker af_xdp takes --local-ranks 1: "
					"eth0's one queue has room for one AF_XDP socket\n");
			return -EINVAL;
		}
	}
	/* AF_XDP frames are one page (docs/sigmad.md, "AF_XDP") */
	bool xdp = o->node[CL_SIGMAD] || o->worker == CL_W_AF_XDP;

	if (xdp && !mtu_set)
		o->mtu = CL_SD_MTU;
	if (xdp && !chunk_set)
		o->chunk = CL_SD_MTU - 80;
	if (xdp && o->mtu > CL_SD_MTU) {
		fprintf(stderr, "sigma-bench cluster: %s: AF_XDP takes an MTU of at most %u (--mtu "
				"%u)\n", o->node[CL_SIGMAD] ? "--node sigmad" : "--worker af_xdp",
			CL_SD_MTU, CL_SD_MTU);
		return -EINVAL;
	}
	if (bad || optind < argc) {
		fprintf(stderr, "sigma-bench cluster: bad option: n 1..%d, k and each of --ks 0..%d, "
				"--link a rate, --size a multiple of 4, chunk a multiple of 8 <= 8920, "
				"mtu 1280..9000, iters 1..%d, runs 1..%d, --prefix 1..15 of [a-z0-9], "
				"--node udpd, sigmad or udpd,sigmad, --worker udp or af_xdp\n",
			CL_MAX_N, CL_MAX_K, CL_MAX_ITERS, CL_MAX_RUNS);
		return -EINVAL;
	}
	if (o->size % 4 || o->size == 0 || o->partition % 8 || o->partition == 0 ||
	    o->chunk % 8 || o->chunk > o->partition || o->chunk + 48 + 28 > o->mtu ||
	    o->size / o->partition >= SG_MAX_PARTS) {
		fprintf(stderr, "sigma-bench cluster: need a size that is a multiple of 4 in at most "
				"%d partitions, a partition that is a multiple of 8, and a chunk of at "
				"most the partition whose datagram (chunk + 76 bytes) fits the MTU %u\n",
			SG_MAX_PARTS - 1, o->mtu);
		return -EINVAL;
	}
	if (o->size / 4 < o->local) {
		fprintf(stderr, "sigma-bench cluster: --local-ranks %u: --size %" PRIu64 " has fewer "
				"than one element per local rank\n", o->local, o->size);
		return -EINVAL;
	}
	if (!ks_set) {
		for (unsigned int k = 0; k <= o->n && k <= CL_MAX_K; k++)
			o->ks[o->n_ks++] = k;
		if (o->k > o->n)
			o->ks[o->n_ks++] = o->k;
	}
	qsort(o->ks, o->n_ks, sizeof(o->ks[0]), cmp_uint);
	o->kmax = o->k;
	for (unsigned int i = 0; i < o->n_ks; i++)
		o->kmax = o->ks[i] > o->kmax ? o->ks[i] : o->kmax;
	if (o->ps && o->k == 0)
		o->ps = false; /* a parameter server needs servers */
	if (o->mpi && o->n < 2)
		o->mpi = false;
	return 0;
}

static double med(const double *v, unsigned int n)
{
	double w[CL_MAX_RUNS];
	unsigned int k = 0;

	for (unsigned int i = 0; i < n; i++)
		if (isfinite(v[i]))
			w[k++] = v[i];
	return k ? sigma_bench_median(w, k) : NAN;
}

static double jnum(double v)
{
	return isfinite(v) ? v : -1; /* JSON has no NaN: -1 means "not measured" */
}

static const struct cl_conf *find_conf(const struct cl_conf *cf, unsigned int n,
				       enum cl_kind kind, unsigned int k, enum cl_node node)
{
	for (unsigned int i = 0; i < n; i++)
		if (cf[i].kind == kind && (kind == CL_MPI || (cf[i].k == k && cf[i].node == node)))
			return &cf[i];
	return NULL;
}

static void print_table(const struct cl_ctx *c, const struct cl_conf *cf, unsigned int ncf,
			const char *cpu, const double *load)
{
	const struct cl_opts *o = c->o;
	const struct cl_conf *mpi = find_conf(cf, ncf, CL_MPI, 0, CL_UDPD);

	printf("sigma-bench cluster: %u GPU + %u CPU machines (network namespaces), each link "
	       "%u Mbit/s both ways (tbf), MTU %u\n", o->n, o->kmax, o->mbit, o->mtu);
	if (o->local > 1)
		printf("%u ranks per GPU machine (--local-ranks): they sum locally, each machine "
		       "pushes once%s%u ranks\n", o->local, o->mpi ? "; MPI_Allreduce over all " :
		       "; ", o->n * o->local);
	printf("M = %" PRIu64 " bytes in partitions of %u, chunks of %u, window %u; %u timed "
	       "iterations, %u run(s); nodes: %s\n", o->size, o->partition, o->chunk,
	       o->window, o->iters, o->runs, o->node[CL_UDPD] && o->node[CL_SIGMAD] ?
	       "sigma-udpd, then sigmad over AF_XDP" : o->node[CL_UDPD] ? "sigma-udpd" :
	       "sigmad over AF_XDP");
	printf("workers: %s\n", o->worker == CL_W_UDP ? "kernel UDP" :
	       "libsigma's DPDK transport on net_af_xdp (their own node over kernel UDP)");
	printf("CPU: %s, %ld online; load average %.2f %.2f %.2f at the start; nice %d\n", cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], o->nice);
	printf("%-6s %-6s %3s %9s %9s %7s %9s %7s %9s %7s %6s %6s %8s %8s\n", "config", "node",
	       "k", "time s",
	       "model s", "/model", "bound s", "/bound", "split", "link%", "CPU%", "ours%",
	       "retrans", "drops");
	for (unsigned int i = 0; i < ncf; i++) {
		const struct cl_conf *x = &cf[i];
		char k[8] = "-", split[24] = "-";

		if (x->kind != CL_MPI)
			snprintf(k, sizeof(k), "%u", x->k);
		if (isfinite(x->share_max) && x->share_max > 0)
			snprintf(split, sizeof(split), "%.2f-%.2f", x->share_min, x->share_max);
		printf("%-6s %-6s %3s %9.3f %9.3f %7.3f %9.3f %7.3f %9s %6.0f%% %5.0f%% %5.0f%% %8"
		       PRIu64 " %8" PRIu64 "%s\n", cl_kind_name[x->kind],
		       x->kind == CL_MPI ? "-" : cl_node_name[x->node], k, x->t_med, x->model,
		       x->t_med / x->model, x->bound, x->t_med / x->bound, split, 100 * x->util_med,
		       100 * x->cpu_machine_med, 100 * x->cpu_ours_med, x->retransmits,
		       x->qdisc_drops + x->sock_drops, x->ok ? "" : "  FAILED");
	}
	printf("model: BytePS's times at the link rate (sigma-bench model); bound: the placement "
	       "the hash made and the bytes on the wire, over the busiest link; split: each "
	       "node's bytes / the split's (min-max); link%%: the busiest link's use (MPI: "
	       "n/a); CPU%%: all CPUs busy (every process on the machine); ours%%: this run's "
	       "processes; drops: packets the tbf queues and socket buffers dropped (all runs)\n");
	for (unsigned int i = 0; i < ncf; i++) {
		const struct cl_conf *x = &cf[i];

		if (x->kind == CL_MPI || !x->ok)
			continue;
		printf("%s k=%u (%s): each link's bytes per iteration / the model's for %u "
		       "machines (busier way):", cl_kind_name[x->kind], x->k, cl_node_name[x->node],
		       o->n);
		for (unsigned int m = 0; m < c->nm; m++)
			if (x->model_link[m] > 0)
				printf(" %s %.3f", c->m[m].name, (x->up_med[m] > x->down_med[m] ?
						x->up_med[m] : x->down_med[m]) / x->model_link[m]);
		printf("; the nodes summed %.3f M per iteration (one copy per machine: %u M)\n",
		       x->node_pushed_med / (double)o->size, o->n);
	}
	if (mpi != NULL)
		printf("MPI_Allreduce: %.0f bytes per iteration on the busiest link (model "
		       "2(n-1)/n M = %.0f)\n", mpi->link_med, 2.0 * (o->n - 1) / o->n *
		       (double)o->size);
	for (enum cl_node nd = CL_UDPD; nd <= CL_SIGMAD; nd++) {
		const struct cl_conf *sk = find_conf(cf, ncf, CL_SIGMA, o->k, nd);

		if (sk != NULL && mpi != NULL && sk->t_med > 0)
			printf("sigma k=%u (%s) vs MPI_Allreduce: %.3fx (the model: %.3fx; target 0.9 "
			       "x model = %.3fx)\n", o->k, cl_node_name[nd], mpi->t_med / sk->t_med,
			       mpi->model / sk->model, 0.9 * mpi->model / sk->model);
	}
}

static void write_json(FILE *f, const struct cl_ctx *c, const struct cl_conf *cf,
		       unsigned int ncf, const char *cpu, const double *load)
{
	const struct cl_opts *o = c->o;
	enum cl_node first = o->node[CL_UDPD] ? CL_UDPD : CL_SIGMAD;
	const struct cl_conf *sk = find_conf(cf, ncf, CL_SIGMA, o->k, first),
			     *mpi = find_conf(cf, ncf, CL_MPI, 0, CL_UDPD);

	fprintf(f, "{\"bench\":\"cluster\",\"cpu\":\"%s\",\"ncpu\":%ld,\"loadavg\":[%.2f,%.2f,"
		   "%.2f],\"node\":\"%s\",\"n\":%u,\"k\":%u,\"cpu_machines\":%u,"
		   "\"nice\":%d,\"link_mbit\":%u,\"mtu\":%u,\"bytes\":%" PRIu64 ",\"partition_bytes\":%u,"
		   "\"chunk_bytes\":%u,\"window\":%u,\"iters\":%u,\"runs\":%u,\"local_ranks\":%u,"
		   "\"worker\":\"%s\",\"configs\":[", cpu,
		sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2],
		o->node[CL_UDPD] && o->node[CL_SIGMAD] ? "sigma-udpd,sigmad" :
		o->node[CL_UDPD] ? "sigma-udpd" : "sigmad", o->n, o->k, o->kmax,
		o->nice, o->mbit, o->mtu, o->size, o->partition, o->chunk, o->window, o->iters, o->runs,
		o->local, cl_worker_name[o->worker]);
	for (unsigned int i = 0; i < ncf; i++) {
		const struct cl_conf *x = &cf[i];

		fprintf(f, "%s{\"config\":\"%s\",\"node\":\"%s\",\"k\":%d,\"ok\":%s,\"time_s\":%.6g,\"model_s\":%.6g,"
			   "\"ratio_model\":%.4f,\"bound_s\":%.6g,\"ratio_bound\":%.4f,"
			   "\"share_min\":%.4f,\"share_max\":%.4f,\"link_util_max\":%.4f,"
			   "\"link_util_mean\":%.4f,\"cpu_busy\":%.4f,\"cpu_ours\":%.4f,"
			   "\"link_bytes_per_iter\":%.0f,\"retransmits\":%" PRIu64 ",\"qdisc_drops\":%"
			   PRIu64 ",\"socket_drops\":%" PRIu64 ",\"runs_s\":[",
			i ? "," : "", cl_kind_name[x->kind],
			x->kind == CL_MPI ? "-" : x->node == CL_UDPD ? "sigma-udpd" : "sigmad",
			x->kind == CL_MPI ? -1 : (int)x->k,
			x->ok ? "true" : "false", jnum(x->t_med), jnum(x->model),
			jnum(x->t_med / x->model), jnum(x->bound), jnum(x->t_med / x->bound),
			jnum(x->share_min), jnum(x->share_max), jnum(x->util_med),
			jnum(x->util_mean[0]), jnum(x->cpu_machine_med), jnum(x->cpu_ours_med),
			jnum(x->link_med), x->retransmits, x->qdisc_drops, x->sock_drops);
		for (unsigned int r = 0; r < o->runs; r++)
			fprintf(f, "%s%.6g", r ? "," : "", jnum(x->t[r]));
		fprintf(f, "],\"node_pushed_bytes_per_iter\":%.0f,\"model_pushed_bytes_per_iter\":%.0f,"
			   "\"machines\":[", jnum(x->node_pushed_med), x->kind == CL_MPI ? -1 :
			(double)o->n * (double)o->size);
		/* each machine's link over the timed iterations, against the model's */
		for (unsigned int m = 0; m < c->nm && x->kind != CL_MPI; m++) {
			double busier = x->up_med[m] > x->down_med[m] ? x->up_med[m] : x->down_med[m];

			fprintf(f, "%s{\"name\":\"%s\",\"up_bytes_per_iter\":%.0f,"
				   "\"down_bytes_per_iter\":%.0f,\"model_bytes_per_iter\":%.0f,"
				   "\"ratio_model\":%.4f}", m ? "," : "", c->m[m].name, jnum(x->up_med[m]),
				jnum(x->down_med[m]), x->model_link[m], x->model_link[m] > 0 &&
				isfinite(busier) ? busier / x->model_link[m] : -1);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "]");
	if (sk != NULL && mpi != NULL && sk->t_med > 0)
		fprintf(f, ",\"sigma_vs_mpi\":%.4f,\"sigma_vs_mpi_model\":%.4f",
			jnum(mpi->t_med / sk->t_med), mpi->model / sk->model);
	fprintf(f, "}\n");
}

/* gnuplot: time against k, measured and modelled; MPI and all-reduce's model as lines. */
static int plot(const char *path, const struct cl_ctx *c, const struct cl_conf *cf,
		unsigned int ncf)
{
	const struct cl_opts *o = c->o;
	const struct cl_conf *mpi = find_conf(cf, ncf, CL_MPI, 0, CL_UDPD);
	/* the measured points of one node kind: udpd's where it ran */
	enum cl_node nd = o->node[CL_UDPD] ? CL_UDPD : CL_SIGMAD;
	char dat[] = "/tmp/sigma-cluster-XXXXXX";
	double B = o->mbit * 1e6 / 8;
	int fd = mkstemp(dat), rc;
	struct sg_ctl_model m;
	FILE *f, *g;

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
		return -errno;
	/* block 0: the model for every k; 1: sigma measured; 2: PS measured */
	for (unsigned int k = 0; k <= o->kmax; k++)
		if (sg_ctl_model(o->n, k, (double)o->size, B, &m) == 0)
			fprintf(f, "%u %.6g %.6g %.6g\n", k, m.t_sigma, m.t_allreduce,
				isfinite(m.t_ps) ? m.t_ps : NAN);
	fprintf(f, "\n\n");
	for (unsigned int i = 0; i < ncf; i++)
		if (cf[i].kind == CL_SIGMA && cf[i].node == nd)
			fprintf(f, "%u %.6g %.6g\n", cf[i].k, jnum(cf[i].t_med), jnum(cf[i].bound));
	fprintf(f, "\n\n");
	for (unsigned int i = 0; i < ncf; i++)
		if (cf[i].kind == CL_PS && cf[i].node == nd)
			fprintf(f, "%u %.6g\n", cf[i].k, jnum(cf[i].t_med));
	fprintf(f, "0 nan\n");
	fclose(f);
	g = popen("gnuplot", "w");
	if (g == NULL) {
		unlink(dat);
		return -errno;
	}
	fprintf(g, "set terminal %s size 800,500 noenhanced\nset output '%s'\n",
		strstr(path, ".png") ? "pngcairo" : "svg", path);
	fprintf(g, "set xlabel 'k (CPU machines)'\nset ylabel 'seconds per push_pull of %.0f MB'\n"
		   "set title 'n = %u GPU machines, links of %u Mbit/s'\nset grid\nset key top right\n"
		   "set xtics 1\nset yrange [0:*]\nplot '%s' index 0 using 1:2 with lines lw 2 "
		   "title 'model: BytePS split', '%s' index 0 using 1:3 with lines dt 2 title "
		   "'model: all-reduce', '%s' index 0 using 1:4 with lines dt 3 title 'model: PS', "
		   "'%s' index 1 using 1:2 with linespoints pt 7 title 'sigma measured', '%s' index 1 "
		   "using 1:3 with points pt 6 title 'bound: placement made, wire bytes', '%s' index "
		   "2 using 1:2 with points pt 5 title 'PS measured'",
		(double)o->size / 1e6, o->n, o->mbit, dat, dat, dat, dat, dat, dat);
	if (mpi != NULL && isfinite(mpi->t_med))
		fprintf(g, ", %.6g with lines lw 2 title 'MPI_Allreduce measured'", mpi->t_med);
	fprintf(g, "\n");
	rc = pclose(g);
	unlink(dat);
	return rc == 0 ? 0 : -EIO;
}

/* ---- the run ------------------------------------------------------------------ */

static void machines(struct cl_ctx *c)
{
	const struct cl_opts *o = c->o;

	c->nm = 0;
	for (unsigned int i = 0; i < o->n + o->kmax; i++) {
		struct cl_machine *m = &c->m[c->nm++];
		bool gpu = i < o->n;
		unsigned int j = gpu ? i : i - o->n;

		char name[12];

		snprintf(name, sizeof(name), "%c%u", gpu ? 'g' : 'c', j % 100);
		*m = (struct cl_machine){.gpu = gpu};
		snprintf(m->name, sizeof(m->name), "%s", name);
		snprintf(m->ns, sizeof(m->ns), "%s-%s", o->prefix, name);
		snprintf(m->ip, sizeof(m->ip), "10.77.0.%hhu", (unsigned char)(gpu ? 1 + j : 101 + j));
		snprintf(m->wip, sizeof(m->wip), "10.77.0.%hhu", (unsigned char)(51 + j));
	}
}

static unsigned int make_confs(const struct cl_opts *o, struct cl_conf *cf)
{
	unsigned int n = 0;
	double B = o->mbit * 1e6 / 8;
	struct sg_ctl_model m;

	if (o->mpi)
		cf[n++] = (struct cl_conf){.kind = CL_MPI};
	/* udpd's first: sigmad's XDP programs are on the links only while they run */
	for (enum cl_node nd = CL_UDPD; nd <= CL_SIGMAD; nd++) {
		if (!o->node[nd])
			continue;
		for (unsigned int i = 0; i < o->n_ks; i++)
			if (i == 0 || o->ks[i] != o->ks[i - 1])
				cf[n++] = (struct cl_conf){.kind = CL_SIGMA, .k = o->ks[i], .node = nd};
		if (o->ps)
			cf[n++] = (struct cl_conf){.kind = CL_PS, .k = o->k, .node = nd};
	}
	for (unsigned int i = 0; i < n; i++) {
		sg_ctl_model(o->n, cf[i].k, (double)o->size, B, &m);
		cf[i].ok = true;
		cf[i].bound = NAN;
		cf[i].share_max = NAN;
		cf[i].share_min = NAN;
		cf[i].model = cf[i].kind == CL_MPI ? m.t_allreduce :
			      cf[i].kind == CL_PS ? m.t_ps : m.t_sigma;
		for (unsigned int r = 0; r < CL_MAX_RUNS; r++) {
			cf[i].t[r] = cf[i].util_max[r] = cf[i].util_mean[r] = cf[i].cpu_machine[r] =
				cf[i].cpu_ours[r] = cf[i].link_bytes[r] = cf[i].node_pushed[r] = NAN;
			for (unsigned int q = 0; q < CL_MAX_M; q++)
				cf[i].up[r][q] = cf[i].down[r][q] = NAN;
		}
	}
	return n;
}

static int run_all(struct cl_ctx *c, struct cl_conf *cf, unsigned int ncf)
{
	const struct cl_opts *o = c->o;
	int rc = 0;

	for (unsigned int run = 0; run < o->runs && !cl_stop; run++) {
		bool sd_up = false;

		for (unsigned int i = 0; i < ncf && !cl_stop; i++) {
			/* sigmad nodes: started for their configurations, stopped after them */
			if (cf[i].kind != CL_MPI && cf[i].node == CL_SIGMAD && !sd_up) {
				/* AF_XDP frames skip eth0's qdisc: shape uplinks in the switch */
				int src = net_uplink(c, true);

				for (unsigned int j = 0; j < c->nm && src == 0; j++)
					src = sd_start(c, &c->m[j]);
				if (src == 0)
					src = nodes_ready(c, CL_SIGMAD);
				if (src < 0) {
					for (unsigned int j = i; j < ncf; j++)
						cf[j].ok = cf[j].node == CL_SIGMAD ? false : cf[j].ok;
					rc = -EIO;
					break;
				}
				sd_up = true;
			}
			/* generous: ten times the model per iteration, and a minute */
			double dl = sigma_bench_now() + 60 + 10.0 * (o->iters + 1) * cf[i].model;

			char k[32] = "";

			if (cf[i].kind != CL_MPI)
				snprintf(k, sizeof(k), " k=%u", cf[i].k);
			if (cf[i].kind != CL_MPI)
				snprintf(k + strlen(k), sizeof(k) - strlen(k), " (%s)",
					 cl_node_name[cf[i].node]);
			if (!o->quiet)
				fprintf(stderr, "sigma-bench: run %u/%u: %s%s (model %.2f s)\n",
					run + 1, o->runs, cl_kind_name[cf[i].kind], k, cf[i].model);
			uint64_t q0, s0, q1, s1;

			drops(c, &q0, &s0);
			if ((cf[i].kind == CL_MPI ? run_mpi(c, &cf[i], run, dl) :
			     run_sigma(c, &cf[i], run, dl)) < 0)
				rc = -EIO;
			drops(c, &q1, &s1);
			cf[i].qdisc_drops += q1 - q0;
			cf[i].sock_drops += s1 - s0;
		}
		nodes_stop(c, CL_SIGMAD);
		if (sd_up || (o->node[CL_SIGMAD] && rc < 0))
			net_uplink(c, false);
	}
	for (unsigned int i = 0; i < ncf; i++) {
		struct cl_conf *x = &cf[i];

		x->t_med = med(x->t, o->runs);
		x->util_med = med(x->util_max, o->runs);
		x->cpu_machine_med = med(x->cpu_machine, o->runs);
		x->cpu_ours_med = med(x->cpu_ours, o->runs);
		x->link_med = med(x->link_bytes, o->runs);
		x->node_pushed_med = med(x->node_pushed, o->runs);
		for (unsigned int m = 0; m < c->nm; m++) {
			double u[CL_MAX_RUNS], d[CL_MAX_RUNS];

			for (unsigned int r = 0; r < o->runs; r++) {
				u[r] = x->up[r][m];
				d[r] = x->down[r][m];
			}
			x->up_med[m] = med(u, o->runs);
			x->down_med[m] = med(d, o->runs);
		}
	}
	return cl_stop ? -EINTR : rc;
}

int sigma_bench_cluster(int argc, char **argv)
{
	static struct cl_ctx ctx;
	static struct cl_conf cf[CL_MAX_CONFIGS];
	struct sigaction sa = {.sa_handler = cl_on_signal};
	struct sigaction old[3];
	struct cl_opts o;
	char udpd[PATH_MAX], sigmad[PATH_MAX], cpu[128];
	double load[3] = {0};
	unsigned int ncf;
	bool net = false, ran = false;
	int rc = parse_opts(argc, argv, &o, udpd, sizeof(udpd), sigmad, sizeof(sigmad)), nrc;

	if (rc != 0) {
		usage(rc > 0 ? stdout : stderr);
		return rc > 0 ? 0 : 2;
	}
	ctx = (struct cl_ctx){.o = &o, .sw_fd = -1, .self_fd = -1};
	if (o.node[CL_UDPD] && access(o.udpd, X_OK) != 0) {
		fprintf(stderr, "sigma-bench cluster: no sigma-udpd at %s (--udpd PATH)\n", o.udpd);
		return 1;
	}
	if (o.node[CL_SIGMAD] && access(o.sigmad, X_OK) != 0) {
		fprintf(stderr, "sigma-bench cluster: no sigmad at %s (--sigmad PATH)\n", o.sigmad);
		return 1;
	}
	machines(&ctx);
	ncf = make_confs(&o, cf);
	for (unsigned int i = 0; i < ncf; i++)
		if (cf[i].kind != CL_MPI)
			model_links(&ctx, &cf[i]);
	if (o.nice != 0 && setpriority(PRIO_PROCESS, 0, o.nice) < 0) {
		fprintf(stderr, "sigma-bench cluster: cannot set nice %d: %s\n", o.nice,
			strerror(errno));
		return 1;
	}
	getloadavg(load, 3);
	sigma_bench_cpu_model(cpu, sizeof(cpu));
	cl_stop = 0;
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
	sigaction(SIGHUP, &sa, &old[2]);
	/* every program started from here on carries the prefix: so one can tell what is ours */
	setenv("SIGMA_CLUSTER_PREFIX", o.prefix, 1);
	snprintf(ctx.dir, sizeof(ctx.dir), "/tmp/sigma-cluster-%s-XXXXXX", o.prefix);
	if (mkdtemp(ctx.dir) == NULL) {
		ctx.dir[0] = '\0';
		rc = -errno;
		goto out;
	}
	if (o.mpi && (rc = sigma_bench_build_mpi(ctx.mpi_exe, sizeof(ctx.mpi_exe))) < 0) {
		ctx.mpi_exe[0] = '\0';
		goto out;
	}
	if (!o.quiet)
		fprintf(stderr, "sigma-bench: making %u GPU + %u CPU machines (%s-*), links of %u "
				"Mbit/s\n", o.n, o.kmax, o.prefix, o.mbit);
	net = true;
	nrc = net_script(&ctx, "up", false);
	if (nrc != 0) {
		fprintf(stderr, "sigma-bench cluster: cannot make the cluster's network%s\n",
			nrc == 77 ? " here (see above)" : "");
		rc = nrc == 77 ? -EPERM : -EIO;
		goto out;
	}
	{
		char sw[96];

		snprintf(sw, sizeof(sw), "/run/netns/%s-sw", o.prefix);
		ctx.sw_fd = open(sw, O_RDONLY | O_CLOEXEC);
		ctx.self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		if (ctx.sw_fd < 0 || ctx.self_fd < 0) {
			rc = -errno;
			perror("sigma-bench: namespaces");
			goto out;
		}
	}
	for (unsigned int i = 0; i < ctx.nm && rc == 0 && o.node[CL_UDPD]; i++)
		rc = node_start(&ctx, &ctx.m[i]);
	if (rc == 0 && o.node[CL_UDPD])
		rc = nodes_ready(&ctx, CL_UDPD);
	/* the workers' AF_XDP frames skip eth0's qdisc: shape the uplinks in the switch */
	if (rc == 0 && o.worker == CL_W_AF_XDP)
		rc = net_uplink(&ctx, true);
	if (rc == 0 && !cl_stop) {
		rc = run_all(&ctx, cf, ncf);
		ran = true;
	}
out:
	nodes_stop(&ctx, CL_SIGMAD);
	nodes_stop(&ctx, CL_UDPD);
	if (net) {
		if (net_script(&ctx, "down", false) != 0)
			fprintf(stderr, "sigma-bench: removing the cluster failed\n");
		if (net_script(&ctx, "left", false) != 0) {
			fprintf(stderr, "sigma-bench: something of the cluster is left (above)\n");
			rc = rc ? rc : -EIO;
		}
	}
	if (ctx.sw_fd >= 0)
		close(ctx.sw_fd);
	if (ctx.self_fd >= 0)
		close(ctx.self_fd);
	if (ctx.mpi_exe[0])
		sigma_bench_rm_mpi(ctx.mpi_exe);
	if (ctx.dir[0]) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ctx.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "sigma-bench: cannot remove %s\n", ctx.dir);
	}
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
	sigaction(SIGHUP, &old[2], NULL);
	if (cl_stop) {
		fprintf(stderr, "sigma-bench cluster: interrupted (signal %d); everything it made is "
				"removed\n", (int)cl_stop);
		return 1;
	}
	if (ran) { /* failed configurations are marked FAILED */
		struct sigma_bench_out out;

		print_table(&ctx, cf, ncf, cpu, load);
		if (sigma_bench_out_open(&out) == 0) {
			write_json(out.f, &ctx, cf, ncf, cpu, load);
			if (sigma_bench_out_write(&out, o.json) < 0)
				rc = -EIO;
		}
		if (o.plot != NULL && plot(o.plot, &ctx, cf, ncf) < 0) {
			fprintf(stderr, "sigma-bench: gnuplot failed (is gnuplot-nox installed?)\n");
			rc = -EIO;
		}
	}
	return rc == -EPERM ? 77 : rc < 0 ? 1 : 0;
}
