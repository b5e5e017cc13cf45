/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-udpd: a summation node over kernel UDP with Sigma's control server, for
 * machines without DPDK and for tests: the aggregation engine behind a socket
 * (sigma_udpd.h), jobs created, listed and destroyed over JSON-RPC (the
 * job_create / job_list / job_destroy / node_info subset of sigmad's agent), so
 * that the job service and sigmactl treat it as they treat sigmad.
 * Exit codes: 0 stopped by SIGINT/SIGTERM, 1 could not start, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sg_ctl_server.h"
#include "sg_dp_ctl_job.h"
#include "sg_etcd.h"
#include "sg_parse.h"
#include "sg_version.h"
#include "sigma_udpd.h"

#define MAX_JOBS 64

struct node_job {
	bool used;
	struct sg_ctl_job spec; /* id, N, dtype, mode, partition, chunk, tensors and keys counts */
	uint64_t token;		/* the wire token: a job with no key here gets its engine job late */
};

struct node {
	struct sigma_udpd *d;
	char name[SG_NAME_MAX];
	char addr[16];
	enum sg_node_kind kind;
	double gbps;
	uint32_t next_id;
	struct node_job jobs[MAX_JOBS]; /* the server's thread only */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static struct node_job *job_find(struct node *n, uint32_t id)
{
	for (unsigned int i = 0; i < MAX_JOBS; i++)
		if (n->jobs[i].used && n->jobs[i].spec.id == id)
			return &n->jobs[i];
	return NULL;
}

static int op_node_info(void *arg, struct sg_ctl_node_info *out)
{
	struct node *n = arg;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", n->name);
	out->n_cores = cores > 0 ? (uint32_t)cores : 1;
	out->n_numa = 1;
	out->n_reducers = 1;
	snprintf(out->addr, sizeof(out->addr), "%s", n->addr);
	out->udp_port = sigma_udpd_port(n->d);
	out->kind = n->kind;
	out->gbps = n->gbps;
	out->max_chunk_bytes = sigma_udpd_max_payload(n->d);
	return 0;
}

static int op_job_create(void *arg, struct sg_ctl_job *job, char *reason)
{
	struct node *n = arg;
	uint32_t max = sigma_udpd_max_payload(n->d), id = job->id;
	struct node_job *slot = NULL;
	struct sg_dp_key *keys;
	uint64_t token = 0;
	int rc = 0;

	/* dtype any (an open job): chunk_bytes, a multiple of 8, fits every element size */
	if (job->chunk_bytes > sg_dp_ctl_max_chunk(job, max) ||
	    (job->dtype != SG_DTYPE_ANY && job->chunk_bytes % sg_dtype_size(job->dtype) != 0)) {
		snprintf(reason, SG_CTL_REASON_MAX, "chunk_bytes %u: this node takes at most %u, in "
			 "multiples of the element size%s", job->chunk_bytes,
			 sg_dp_ctl_max_chunk(job, max), job->auth ? " (auth = mac: 32 bytes of "
			 "each datagram are its MAC's)" : "");
		return -EINVAL;
	}
	if (id != 0 && job_find(n, id) != NULL) {
		snprintf(reason, SG_CTL_REASON_MAX, "job id %u is in use on this node", id);
		return -EEXIST;
	}
	for (unsigned int i = 0; i < MAX_JOBS && slot == NULL; i++)
		if (!n->jobs[i].used)
			slot = &n->jobs[i];
	if (slot == NULL) {
		snprintf(reason, SG_CTL_REASON_MAX, "%d jobs already: destroy one first", MAX_JOBS);
		return -ENOSPC;
	}
	if (id == 0) {
		while (n->next_id == 0 || job_find(n, n->next_id) != NULL)
			n->next_id++;
		id = n->next_id++;
	}
	token = sg_ctl_wire_token(job->token);
	keys = calloc(job->n_keys ? job->n_keys : 1, sizeof(*keys));
	if (keys == NULL)
		return -ENOMEM;
	sg_dp_keys_from_ctl(job->keys, job->n_keys, keys);
	/* a job of keys placed elsewhere only is listed here; an open job always sums here */
	if (job->n_keys > 0 || job->open) {
		struct sg_dp_job_conf jc = sg_dp_job_from_ctl(job, id, token, max, keys, job->n_keys);

		rc = sigma_udpd_add_job(n->d, &jc);
		job->slots = jc.slots;
		job->slots_budget = jc.slots;
	}
	free(keys);
	if (rc != 0) {
		snprintf(reason, SG_CTL_REASON_MAX, "the engine refused the job: %s", strerror(-rc));
		return rc;
	}
	job->id = id;
	if (job->chunk_bytes == 0)
		job->chunk_bytes = sg_dp_ctl_max_chunk(job, max);
	slot->used = true;
	slot->spec = *job;
	slot->spec.tensors = NULL;
	slot->spec.keys = NULL;
	slot->token = token;
	memset(slot->spec.token, 0, sizeof(slot->spec.token));
	if (job->open)
		printf("sigma-udpd: job %u created: open (its pushes make its keys), %u workers, %s, "
		       "%s, %u chunk slots, %u-byte chunks\n", id, job->n_workers,
		       sg_dtype_name(job->dtype), sg_mode_name(job->mode), job->slots,
		       job->chunk_bytes);
	else
		printf("sigma-udpd: job %u created: %u workers, %s, %s, %u partitions here, %u-byte "
		       "chunks\n", id, job->n_workers, sg_dtype_name(job->dtype),
		       sg_mode_name(job->mode), job->n_keys, job->chunk_bytes);
	fflush(stdout);
	return 0;
}

static int op_job_list(void *arg, struct sg_ctl_job *out, unsigned int cap)
{
	struct node *n = arg;
	unsigned int k = 0;

	for (unsigned int i = 0; i < MAX_JOBS && k < cap; i++) {
		struct sg_dp_job_stats st = {0};

		if (!n->jobs[i].used)
			continue;
		out[k] = n->jobs[i].spec;
		if (sigma_udpd_job_stats(n->d, out[k].id, &st) == 0) {
			out[k].rounds_completed = st.rounds_completed;
			out[k].retransmits = st.retransmits_served;
			out[k].incomplete = st.incomplete_slots;
			out[k].nacks = st.nacks_sent;
			out[k].drops = st.drops;
			out[k].bytes_pushed = st.rx_bytes;
			out[k].slots_used = st.slots_used;
			out[k].slots_budget = st.slots;
			if (out[k].open)
				out[k].n_keys = (uint32_t)st.keys;
		}
		k++;
	}
	return (int)k;
}

static int op_job_destroy(void *arg, uint32_t id)
{
	struct node *n = arg;
	struct node_job *j = job_find(n, id);

	if (j == NULL)
		return -ENOENT;
	if (j->spec.n_keys > 0 || j->spec.open)
		sigma_udpd_remove_job(n->d, id);
	j->used = false;
	explicit_bzero(j->spec.auth_key, sizeof(j->spec.auth_key));
	printf("sigma-udpd: job %u destroyed\n", id);
	fflush(stdout);
	return 0;
}

/* Failover: a lost node's keys that placement now gives this node (docs/cluster.md). */
static int op_job_keys_add(void *arg, uint32_t id, const struct sg_ctl_key *keys, uint32_t n,
			   char *reason)
{
	struct node *nd = arg;
	struct node_job *j = job_find(nd, id);
	struct sg_dp_key *k;
	int rc;

	if (j == NULL || j->spec.open) {
		snprintf(reason, SG_CTL_REASON_MAX, "%s", j ? "an open job makes its own keys" :
			 "no such job");
		return j ? -EINVAL : -ENOENT;
	}
	if (n == 0)
		return 0;
	k = calloc(n, sizeof(*k));
	if (k == NULL)
		return -ENOMEM;
	sg_dp_keys_from_ctl(keys, n, k);
	if (j->spec.n_keys == 0) {
		/* no key was placed here: the engine has no job yet (j is fixed: checked above) */
		struct sg_dp_job_conf jc = sg_dp_job_from_ctl(&j->spec, id, j->token,
							      j->spec.chunk_bytes, k, n);

		rc = sigma_udpd_add_job(nd->d, &jc);
		rc = rc < 0 ? rc : (int)n;
	} else {
		rc = sigma_udpd_add_keys(nd->d, id, k, n);
	}
	free(k);
	if (rc < 0) {
		snprintf(reason, SG_CTL_REASON_MAX, "the engine refused the keys: %s", strerror(-rc));
		return rc;
	}
	j->spec.n_keys += (uint32_t)rc;
	printf("sigma-udpd: job %u: %d key(s) added (a lost node's), %u here\n", id, rc,
	       j->spec.n_keys);
	fflush(stdout);
	return rc;
}

/* The engine's table; a job with no keys here has none: its ranks were never timed here. */
static int op_job_lateness(void *arg, uint32_t id, struct sg_late *out)
{
	struct node *n = arg;
	const struct node_job *j = job_find(n, id);

	if (j == NULL)
		return -ENOENT;
	if (sigma_udpd_job_lateness(n->d, id, out) != 0) {
		memset(out, 0, sizeof(*out));
		out->nranks = j->spec.n_workers;
	}
	return 0;
}

/* The engine's drops by reason, and the socket's and rings' own. */
static int op_drops(void *arg, struct sg_ctl_drop *out, unsigned int cap)
{
	struct node *n = arg;
	struct sg_dp_stats st;
	struct sigma_udpd_io io;
	unsigned int k = 0;

#define UDPD_DROP(v, ...)                                                                          \
	do {                                                                                       \
		if (k < cap) {                                                                     \
			snprintf(out[k].reason, sizeof(out[k].reason), __VA_ARGS__);               \
			out[k++].count = (v);                                                      \
		}                                                                                  \
	} while (0)
	sigma_udpd_stats(n->d, &st);
	sigma_udpd_io_stats(n->d, &io);
	for (int w = 1; w < SG_DP_DROP_COUNT; w++)
		UDPD_DROP(st.drops[w], "engine_%s", sg_dp_drop_name((enum sg_dp_drop)w));
	UDPD_DROP(io.rx_overflows, "udp_rx_overflows");
	UDPD_DROP(io.shm_tx_full, "shm_tx_full");
	UDPD_DROP(io.shm_tx_stale, "shm_tx_stale");
	UDPD_DROP(io.shm_bad_len, "shm_bad_len");
#undef UDPD_DROP
	return (int)k;
}

static const struct sg_ctl_agent_ops ops = {
	.node_info = op_node_info,
	.job_lateness = op_job_lateness,
	.drops = op_drops,
	.job_create = op_job_create,
	.job_list = op_job_list,
	.job_destroy = op_job_destroy,
	.job_keys_add = op_job_keys_add,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sigma-udpd [options]\n"
		"A Sigma summation node over kernel UDP, with the control server (jobs are made\n"
		"over JSON-RPC, e.g. by sigmactl --node ... job create).\n"
		"  --addr A          dataplane address to bind and announce [127.0.0.1]\n"
		"  --port P          dataplane UDP port [9300; 0: any]\n"
		"  --name NAME       the node's name: placement hashes it [sigma-udpd]\n"
		"  --kind cpu|gpu    [cpu]\n"
		"  --gbps G          bandwidth placement weighs the node with [10]\n"
		"  --unix PATH       control socket (mode 0600)\n"
		"  --listen H:P      control over TCP (needs --secret-file)\n"
		"  --secret-file F   shared secret for TCP (mode 0600)\n"
		"  --max-chunk B     largest chunk_bytes a job may use here [8920]\n"
		"  --pool-bufs N     accumulator buffers [4096]\n"
		"  --etcd URLS       register in etcd: http://host:port[,...], and watch it for the\n"
		"                    records of this node's jobs (failover; docs/cluster.md)\n"
		"  --cluster NAME    the cluster's name: records under /sigma/NAME/ [default]\n"
		"  --ttl S           lease TTL, the liveness timeout, 1..3600 s [5]\n"
		"  --etcd-user U     etcd authentication: the user, whose password is the first\n"
		"                    line of --etcd-password-file F (mode 0600)\n"
		"  --etcd-ca F, --etcd-cert F, --etcd-key F  TLS for https:// endpoints: the CA\n"
		"                    that signed etcd's certificate, this node's certificate and key\n"
		"  --drop-rx P, --drop-tx P  loss injection: drop P per mille of packets [0]\n"
		"  --spin-us U       after light traffic, poll this long before sleeping; 0: never\n"
		"                    [200]\n"
		"  --shm PATH        offer shared memory to workers of this machine at this Unix\n"
		"                    socket (made mode 0600, replaced if there, removed at exit;\n"
		"                    put it in a private folder): SIGMA_TRANSPORT_SHM\n"
		"  --shm-max N       shared-memory channels at once, 1..1024; more are refused [64]\n"
		"  --metrics H:P     serve Prometheus's GET /metrics over HTTP there (port 0: any,\n"
		"                    printed at start-up) [off]\n"
		"  --late-warn-ms MS log a rank whose pushes come this much after their rounds'\n"
		"                    first on average, naming it, 1..3600000 [10]\n"
		"  --version         print the release, wire protocol and control API versions\n"
		"  -h, --help        this text\n"
		"Runs until SIGINT or SIGTERM. Exit: 0 stopped, 1 could not start, 2 usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"addr", required_argument, NULL, 'a'},	 {"port", required_argument, NULL, 'p'},
		{"name", required_argument, NULL, 'n'},	 {"kind", required_argument, NULL, 'k'},
		{"gbps", required_argument, NULL, 'g'},	 {"unix", required_argument, NULL, 'u'},
		{"listen", required_argument, NULL, 'l'}, {"secret-file", required_argument, NULL, 's'},
		{"max-chunk", required_argument, NULL, 'm'},
		{"pool-bufs", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
		{"etcd", required_argument, NULL, 'E'}, {"cluster", required_argument, NULL, 'C'},
		{"ttl", required_argument, NULL, 'T'}, {"drop-rx", required_argument, NULL, 'R'},
		{"drop-tx", required_argument, NULL, 'X'}, {"spin-us", required_argument, NULL, 'S'},
		{"version", no_argument, NULL, 'V'}, {"shm", required_argument, NULL, 'M'},
		{"shm-max", required_argument, NULL, 'N'},
		{"metrics", required_argument, NULL, 'P'},
		{"late-warn-ms", required_argument, NULL, 'L'},
		{"etcd-user", required_argument, NULL, 1}, {"etcd-password-file", required_argument, NULL, 2},
		{"etcd-ca", required_argument, NULL, 3}, {"etcd-cert", required_argument, NULL, 4},
		{"etcd-key", required_argument, NULL, 5},
		{NULL, 0, NULL, 0},
	};
	static struct node n = {.name = "sigma-udpd", .addr = "127.0.0.1", .gbps = 10};
	struct sigma_udpd_conf dc = {.port = 9300};
	struct sg_ctl_server_config sc = {.tcp_disable = true};
	uint8_t secret[SG_CTL_SECRET_MAX];
	const char *unix_path = NULL, *listen = NULL, *secret_file = NULL, *etcd = NULL;
	const char *metrics = NULL;
	char metrics_addr[64] = "";
	struct sg_etcd_reg_conf rc = {.cluster = "default", .ttl_s = 5};
	struct sg_etcd_reg *reg = NULL;
	char tcp_addr[64] = "", err[256], etcd_pw[SG_ETCD_PASSWORD_MAX];
	const char *etcd_pw_file = NULL;
	struct sg_ctl_server *srv;
	struct sg_dp_stats st;
	struct sigma_udpd_io io;
	size_t secret_len = 0;
	uint64_t v;
	int c, li = 0;

	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		switch (c) {
		case 'a':
			snprintf(n.addr, sizeof(n.addr), "%s", optarg);
			break;
		case 'p':
			if (sg_parse_u64(optarg, 0, 65535, &v) != 0)
				goto bad;
			dc.port = (uint16_t)v;
			break;
		case 'n':
			if (strlen(optarg) == 0 || strlen(optarg) >= sizeof(n.name))
				goto bad;
			snprintf(n.name, sizeof(n.name), "%s", optarg);
			break;
		case 'k':
			if (sg_node_kind_from_name(optarg, &n.kind) != 0)
				goto bad;
			break;
		case 'g':
			if (sg_parse_double(optarg, 1e-6, 1e6, &n.gbps) != 0)
				goto bad;
			break;
		case 'u':
			unix_path = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 's':
			secret_file = optarg;
			break;
		case 'm':
			if (sg_parse_u64(optarg, 8, SG_MAX_CHUNK_BYTES, &v) != 0 || v % 8 != 0)
				goto bad;
			dc.engine.max_payload = (uint32_t)v;
			break;
		case 'b':
			if (sg_parse_u64(optarg, 16, 1 << 22, &v) != 0)
				goto bad;
			dc.engine.pool_bufs = (uint32_t)v;
			break;
		case 'E':
			etcd = optarg;
			break;
		case 1:
			rc.etcd.user = optarg;
			break;
		case 2:
			etcd_pw_file = optarg;
			break;
		case 3:
			rc.etcd.ca_file = optarg;
			break;
		case 4:
			rc.etcd.cert_file = optarg;
			break;
		case 5:
			rc.etcd.key_file = optarg;
			break;
		case 'S':
			if (sg_parse_u64(optarg, 0, 1000000, &v) != 0)
				goto bad;
			dc.spin_us = v == 0 ? -1 : (int32_t)v;
			break;
		case 'C':
			rc.cluster = optarg;
			break;
		case 'T':
			if (sg_parse_u64(optarg, 1, 3600, &v) != 0)
				goto bad;
			rc.ttl_s = (uint32_t)v;
			break;
		case 'R':
		case 'X':
			if (sg_parse_u64(optarg, 0, 1000, &v) != 0)
				goto bad;
			*(c == 'R' ? &dc.drop_rx_permille : &dc.drop_tx_permille) = (uint32_t)v;
			dc.seed = (uint32_t)getpid();
			break;
		case 'M':
			if (optarg[0] == '\0')
				goto bad;
			dc.shm_path = optarg;
			break;
		case 'N':
			if (sg_parse_u64(optarg, 1, 1024, &v) != 0)
				goto bad;
			dc.shm_max = (uint32_t)v;
			break;
		case 'P':
			metrics = optarg;
			break;
		case 'L':
			if (sg_parse_u64(optarg, 1, 3600000, &v) != 0)
				goto bad;
			dc.engine.late_log_ns = v * 1000000ull;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			fputs(SG_VERSION_TEXT("sigma-udpd"), stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (unix_path == NULL && listen == NULL)) {
		fprintf(stderr, "sigma-udpd: give a control socket (--unix PATH and/or --listen "
			"H:P)\n");
		usage(stderr);
		return 2;
	}
	if ((etcd_pw_file != NULL) != (rc.etcd.user != NULL)) {
		fprintf(stderr, "sigma-udpd: --etcd-user and --etcd-password-file go together\n");
		return 2;
	}
	if (etcd_pw_file != NULL) {
		if (sg_etcd_password_load("--etcd-password-file", etcd_pw_file, etcd_pw, err,
					  sizeof(err)) != 0) {
			fprintf(stderr, "sigma-udpd: %s\n", err);
			return 2;
		}
		rc.etcd.password = etcd_pw;
	}
	if (listen != NULL) {
		const char *colon = strrchr(listen, ':');

		if (colon == NULL || colon == listen || (size_t)(colon - listen) >= sizeof(tcp_addr) ||
		    sg_parse_u64(colon + 1, 0, 65535, &v) != 0 || secret_file == NULL) {
			fprintf(stderr, "sigma-udpd: --listen wants HOST:PORT and a --secret-file\n");
			return 2;
		}
		snprintf(tcp_addr, sizeof(tcp_addr), "%.*s", (int)(colon - listen), listen);
		if (sg_ctl_secret_load(secret_file, true, secret, &secret_len, err, sizeof(err)) != 0) {
			fprintf(stderr, "sigma-udpd: %s\n", err);
			return 2;
		}
		sc.tcp_disable = false;
		sc.tcp_addr = tcp_addr;
		sc.tcp_port = (uint16_t)v;
		sc.secret = secret;
		sc.secret_len = secret_len;
	}
	if (metrics != NULL) {
		const char *colon = strrchr(metrics, ':');

		if (colon == NULL || colon == metrics ||
		    (size_t)(colon - metrics) >= sizeof(metrics_addr) ||
		    sg_parse_u64(colon + 1, 0, 65535, &v) != 0) {
			fprintf(stderr, "sigma-udpd: --metrics wants HOST:PORT\n");
			return 2;
		}
		snprintf(metrics_addr, sizeof(metrics_addr), "%.*s", (int)(colon - metrics), metrics);
		sc.metrics_enable = true;
		sc.metrics_addr = metrics_addr;
		sc.metrics_port = (uint16_t)v;
	}
	dc.addr = n.addr;
	n.d = sigma_udpd_create(&dc);
	if (n.d == NULL) {
		fprintf(stderr, "sigma-udpd: cannot open %s:%u%s%s: %s\n", n.addr, dc.port,
			dc.shm_path ? " and shared memory at " : "", dc.shm_path ? dc.shm_path : "",
			strerror(errno));
		return 1;
	}
	if (sigma_udpd_start(n.d) != 0) {
		fprintf(stderr, "sigma-udpd: cannot start the node's thread\n");
		sigma_udpd_destroy(n.d);
		return 1;
	}
	sc.unix_path = unix_path;
	sc.ops = &ops;
	sc.ops_arg = &n;
	if (etcd != NULL) {
		/* the server watches the membership and its jobs' records: failover of fixed jobs */
		rc.etcd.endpoints = etcd;
		sc.etcd = &rc.etcd;
		sc.cluster = rc.cluster;
	}
	srv = sg_ctl_server_create(&sc);
	if (srv == NULL) {
		fprintf(stderr, "sigma-udpd: cannot start the control server: %s\n", strerror(errno));
		sigma_udpd_destroy(n.d);
		return 1;
	}
	if (etcd != NULL) {
		/* the registration's own thread keeps the lease: the node's thread never waits */
		rc.etcd.endpoints = etcd;
		snprintf(rc.node.name, sizeof(rc.node.name), "%s", n.name);
		snprintf(rc.node.addr, sizeof(rc.node.addr), "%s", n.addr);
		rc.node.port = sigma_udpd_port(n.d);
		rc.node.kind = n.kind;
		rc.node.gbps = n.gbps;
		if (listen != NULL)
			snprintf(rc.node.control, sizeof(rc.node.control), "%s:%u", tcp_addr,
				 sg_ctl_server_tcp_port(srv));
		else
			snprintf(rc.node.control, sizeof(rc.node.control), "unix:%s", unix_path);
		reg = sg_etcd_reg_start(&rc);
		if (reg == NULL) {
			fprintf(stderr, "sigma-udpd: cannot register in etcd (--etcd, --cluster, "
				"--name): %s\n", strerror(errno));
			sg_ctl_server_destroy(srv);
			sigma_udpd_destroy(n.d);
			return 2;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("sigma-udpd: node %s on %s:%u (%s, %g Gb/s), control %s%s%s tcp port %u%s%s",
	       n.name, n.addr, sigma_udpd_port(n.d), sg_node_kind_name(n.kind), n.gbps,
	       unix_path ? "unix:" : "", unix_path ? unix_path : "", unix_path ? "," : "",
	       sg_ctl_server_tcp_port(srv), dc.shm_path ? ", shm " : "",
	       dc.shm_path ? dc.shm_path : "");
	if (metrics != NULL)
		printf(", metrics port %u", sg_ctl_server_metrics_port(srv));
	printf("\n");
	fflush(stdout);
	while (!stop)
		usleep(20000); /* a signal between a check and pause() would be lost */
	sg_etcd_reg_stop(reg, true); /* a clean leave: workers move its keys at once */
	sg_ctl_server_destroy(srv);
	explicit_bzero(etcd_pw, sizeof(etcd_pw));
	sigma_udpd_stop(n.d);
	sigma_udpd_stats(n.d, &st);
	printf("sigma-udpd: stopped; %" PRIu64 " packets, %" PRIu64 " pushes summed, %" PRIu64
	       " rounds, %" PRIu64 " errors sent, %" PRIu64 " WAITING sent\n", st.rx_packets,
	       st.rx_pushes, st.rounds_completed, st.errors_sent, st.waits_sent);
	sigma_udpd_io_stats(n.d, &io);
	if (io.rx_overflows)
		printf("sigma-udpd: dropped %" PRIu64 " (kernel: the socket's receive buffer was "
		       "full)\n", io.rx_overflows);
	if (dc.shm_path != NULL) {
		printf("sigma-udpd: shm: %" PRIu64 " channels (%" PRIu64 " refused, %" PRIu64
		       " closed, %" PRIu64 " for garbage), %" PRIu64 " datagrams in, %" PRIu64
		       " out, %" PRIu64 " dropped (ring full), %" PRIu64 " (channel gone), %"
		       PRIu64 " bad lengths, %" PRIu64 " wake-ups\n", io.shm_accepted,
		       io.shm_refused, io.shm_closed, io.shm_garbage, io.shm_rx, io.shm_tx,
		       io.shm_tx_full, io.shm_tx_stale, io.shm_bad_len, io.shm_wakeups);
	}
	for (int w = 1; w < SG_DP_DROP_COUNT; w++)
		if (st.drops[w])
			printf("sigma-udpd: dropped %" PRIu64 " (%s)\n", st.drops[w],
			       sg_dp_drop_name((enum sg_dp_drop)w));
	sigma_udpd_destroy(n.d);
	memset(secret, 0, sizeof(secret));
	return 0;
bad:
	fprintf(stderr, "sigma-udpd: bad value '%s' for --%s\n", optarg, opts[li].name);
	usage(stderr);
	return 2;
}
