/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl: the operator's command line over Sigma's control RPC.
 * Exit codes: 0 success, 1 the server (or the connection) failed, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "sigmactl_layout.h"
#include "sigmactl_top.h"
#include "sg_ctl_client.h"
#include "sg_etcd.h"
#include "sigmactl_call.h"
#include "sigmactl_elastic.h"
#include "sg_desc.h"
#include "sg_parse.h"
#include "sg_version.h"

#define EXIT_SERVER SIGMACTL_EXIT_SERVER
#define EXIT_USAGE SIGMACTL_EXIT_USAGE
#define DEFAULT_TARGET "unix:/var/run/sigma/ctl.sock"

static const char *prog = "sigmactl";

static struct {
	const char *target;
	const char *secret_file;
	bool json;
	uint32_t timeout_ms;
	struct sg_ctl_client *cli;
	struct sg_ctl_jobsvc_node nodes[SG_MAX_NODES]; /* --node: the job service's nodes */
	unsigned int n_nodes;
	const char *etcd;	/* --etcd: membership from etcd */
	const char *cluster;	/* --cluster */
} g = {.timeout_ms = 5000, .cluster = "default"};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [options] <command> [args]\n"
		"\n"
		"Commands:\n"
		"  nodes                       summation nodes known from heartbeats, with liveness;\n"
		"                              with --etcd, the nodes registered in etcd\n"
		"  nodes remove NAME           take a node out of the placement\n"
		"  heartbeat NAME [--kind cpu|gpu] [--gbps G]\n"
		"                              announce a node (sigmad does this periodically)\n"
		"  info                        this node: cores, NUMA nodes, ports, reducer lcores\n"
		"  jobs                        jobs with their counters; with --etcd, the job\n"
		"                              records in etcd\n"
		"  jobs --ranks [ID]           each rank's lateness (the slowest first) and the\n"
		"                              straggler: the rank most often last to push\n"
		"  top [--sort busy|mpps|gbps|drops|lcore] [--interval SECS] [--count N]\n"
		"                              live view of lcores, jobs and ranks by lateness\n"
		"                              (-s TARGET, --node TARGET for several nodes, or\n"
		"                              --etcd for the cluster's live nodes, read again\n"
		"                              for each frame); q quits, s sorts; plain text\n"
		"                              when not a terminal\n"
		"  job create --workers N --tensor NAME:ELEMS [--tensor ...] [--dtype fp32]\n"
		"             [--mode sync|async|deterministic] [--partition-bytes B]\n"
		"             [--chunk-bytes B] [--id ID]\n"
		"  job create --workers N --open [--dtype fp32|...|any] [--slots S] [...]\n"
		"  job create ... --auth --rank-dir DIR [--token-file FILE]\n"
		"                              create a job; prints its id and session token, or,\n"
		"                              with --node, creates it on every node and prints the\n"
		"                              job descriptor workers open it with. An --open job\n"
		"                              has no tensors: each node makes a key on its first\n"
		"                              push, up to S chunk slots per reducer [%u]; with\n"
		"                              --dtype any, each key takes its first push's dtype;\n"
		"                              --auth (with --node): authenticated datagrams,\n"
		"                              each rank's own descriptor (its keys) written to\n"
		"                              DIR/rank-R.desc, mode 0600; --token-file: the\n"
		"                              job's token (which holds every key) to FILE, mode\n"
		"                              0600, for an elastic job's proposer only\n"
		"  job destroy ID              destroy a job (on every --node)\n"
		"                              with --node and --etcd, job create also records the\n"
		"                              job in etcd (under a lease of --record-ttl S [30],\n"
		"                              renewed by its nodes) and job destroy removes it\n"
		"  placement JOB [--detail]    which summation node sums which partition\n"
		"  stats                       lcores, jobs and control-plane counters\n"
		"  lcores [--watch [SECS]] [--count N]\n"
		"                              per lcore: role, NUMA, busy%%, Mpps, Gbps, drops\n"
		"  layout                      the lcore layout and the key->reducer map\n"
		"  layout set KEY=VALUE...     live change: keymap=R,R,... (repeated over %d\n"
		"                              buckets), idle=LCORE:poll|sleep; anything else is\n"
		"                              refused with the reason\n"
		"  layout suggest [--interval SECS]\n"
		"                              measure the lcores (default 2 s), name the\n"
		"                              bottleneck, print the keymap or layout change that\n"
		"                              evens the load; changes nothing\n"
		"  drain                       finish in-flight rounds, refuse new ones\n"
		"  drain NODE [--timeout S] [--propose]\n"
		"                              with --etcd: take NODE out of every elastic job at\n"
		"                              an agreed round; returns when no rank uses it [60];\n"
		"                              --propose: propose it too (jobs whose ranks do not)\n"
		"  undrain NODE [--timeout S] [--propose]\n"
		"                              with --etcd: give NODE back to the elastic jobs\n"
		"  elastic                     with --etcd: the elastic jobs and their node sets\n"
		"  log-level LEVEL [--pattern P]  emerg..debug for rte_log types (default sigma.*)\n"
		"  verbs                       verbs transport: mode, Q_Key, max payload, GID/LID,\n"
		"                              each lcore's QPN (what workers address)\n"
		"  verbs connect qpn=N psn=N gid=HEX addr=0xADDR rkey=N slots=N stride=N [lid=N]\n"
		"                              connect an RC worker; prints the node's side\n"
		"  verbs disconnect peer=N     close RC connection N (the peer id connect printed)\n"
		"                              and free its slots for another worker\n"
		"  version                     this sigmactl's and the node's release, control API\n"
		"                              and wire protocol versions; exit 1 if they differ\n"
		"  call METHOD [JSON]          raw JSON-RPC call (prints the JSON result)\n"
		"\n"
		"Options:\n"
		"  -s, --server TARGET   unix:PATH, PATH, or HOST:PORT (TCP). Default: $SIGMACTL_SERVER\n"
		"                        or " DEFAULT_TARGET "\n"
		"  -n, --node TARGET[,addr=IP][,port=N][,kind=cpu|gpu][,gbps=G][,weight=W]\n"
		"                        a summation node of the job (repeat for each) for job\n"
		"                        create/destroy across nodes; addr/port/kind/gbps default to\n"
		"                        the node's node_info, weights to the BytePS split\n"
		"  -k, --secret-file F   shared secret for TCP (default: $SIGMACTL_SECRET_FILE)\n"
		"  -j, --json            print the server's JSON instead of a table\n"
		"  -t, --timeout MS      per-request timeout (default 5000)\n"
		"  -e, --etcd URLS       etcd endpoints http://host:port[,...]: nodes and jobs read\n"
		"                        them; job create/destroy --node record the job there\n"
		"  -c, --cluster NAME    the cluster in etcd (/sigma/NAME/, default \"default\")\n"
		"  -V, --version         print sigmactl's versions and exit\n"
		"  -h, --help            this text\n"
		"\n"
		"Exit status: 0 success, 1 server or connection error, 2 usage error.\n",
		prog, SG_OPEN_SLOTS_DEFAULT, SG_BUCKETS);
}

static int die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", prog);
	return EXIT_USAGE;
}

static int die_server(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die_server(const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = sigmactl_vfail(EXIT_SERVER, fmt, ap);
	va_end(ap);
	return rc;
}

/*
 * The secret of --secret-file into @p secret (*@p len 0 without one). @p who, if
 * not NULL, needs it: without a file, "WHO needs --secret-file". @return 0 or the
 * exit code.
 */
static int load_secret(const char *who, uint8_t *secret, size_t *len)
{
	char err[256];

	*len = 0;
	if (g.secret_file == NULL)
		return who == NULL ? 0 : die_usage("%s needs --secret-file (or "
						   "$SIGMACTL_SECRET_FILE)", who);
	/* The server's loader: same newline trimming, same size limit, same key. */
	if (sg_ctl_secret_load(g.secret_file, false, secret, len, err, sizeof(err)) < 0)
		return die_usage("cannot read secret file: %s", err);
	return 0;
}

/* The secret for -s's target: none for a Unix one. @return 0 or the exit code. */
static int target_secret(uint8_t *secret, size_t *len)
{
	char who[300];

	*len = 0;
	if (!sg_ctl_target_is_tcp(g.target))
		return 0;
	snprintf(who, sizeof(who), "TCP target %s", g.target);
	return load_secret(who, secret, len);
}

static int connect_server(void)
{
	uint8_t secret[SG_CTL_SECRET_MAX];
	size_t len = 0;
	int rc = target_secret(secret, &len);

	if (rc != 0)
		return rc;
	g.cli = sg_ctl_client_connect(g.target, len ? secret : NULL, len, g.timeout_ms);
	memset(secret, 0, sizeof(secret));
	if (g.cli == NULL) {
		if (errno == EACCES)
			return die_server("%s refused the authentication (wrong secret?)", g.target);
		if (errno == EINVAL)
			return die_usage("bad server address '%s'", g.target);
		return die_server("cannot connect to %s: %s", g.target, strerror(errno));
	}
	return 0;
}

/* Call and parse. On error print it and return NULL with *rc set to the exit code. */
static json_t *rpc(const char *method, json_t *params, int *rc)
{
	char err[SIGMACTL_ERR_MAX];
	int r;
	json_t *out = sigmactl_call(g.cli, method, params, &r, err, sizeof(err));

	*rc = out == NULL ? die_server("%s", err) : 0;
	return out;
}

static void print_json(json_t *j)
{
	char *t = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);

	if (t != NULL)
		puts(t);
	free(t);
}

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "-";
}

static long long jint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static double jnum(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* ---- tables ---- */

static void show_nodes(json_t *r)
{
	json_t *n;
	size_t i;

	printf("%-24s %-4s %8s %-6s %12s\n", "NODE", "KIND", "GBPS", "STATE", "LAST_BEAT_MS");
	json_array_foreach(json_object_get(r, "nodes"), i, n)
		printf("%-24s %-4s %8.1f %-6s %12lld\n", jstr(n, "name"), jstr(n, "kind"),
		       jnum(n, "gbps"), json_is_true(json_object_get(n, "alive")) ? "alive" : "LOST",
		       jint(n, "last_heartbeat_ms"));
	printf("membership epoch %lld\n", jint(r, "epoch"));
}

static void show_info(json_t *r)
{
	json_t *p;
	size_t i;

	printf("node:            %s%s\n", jstr(r, "name"),
	       json_is_true(json_object_get(r, "draining")) ? " (draining)" : "");
	printf("cores:           %lld\nNUMA nodes:      %lld\nreducer lcores: ", jint(r, "cores"),
	       jint(r, "numa_nodes"));
	json_array_foreach(json_object_get(r, "reducer_lcores"), i, p)
		printf(" %lld", (long long)json_integer_value(p));
	printf("\n%-16s %10s %5s\n", "PORT", "SPEED", "NUMA");
	json_array_foreach(json_object_get(r, "ports"), i, p)
		printf("%-16s %7lldGb/s %5lld\n", jstr(p, "name"), jint(p, "speed_mbps") / 1000,
		       jint(p, "numa"));
}

static void show_jobs(json_t *r)
{
	json_t *j;
	size_t i;

	printf("%6s %7s %-5s %-13s %10s %7s %7s %17s %14s %11s %10s %10s %10s\n", "JOB", "WORKERS",
	       "DTYPE", "MODE", "PART_BYTES", "TENSORS", "KEYS", "SLOTS_USED/BUDGET", "ROUNDS",
	       "RETRANSMITS", "INCOMPLETE", "NACKS", "DROPS");
	json_array_foreach(r, i, j) {
		char tensors[24], slots[48];

		/* an open job has no tensors: its pushes make its keys */
		if (json_is_true(json_object_get(j, "open")))
			snprintf(tensors, sizeof(tensors), "open");
		else
			snprintf(tensors, sizeof(tensors), "%lld", jint(j, "tensors"));
		snprintf(slots, sizeof(slots), "%lld/%lld", jint(j, "slots_used"),
			 jint(j, "slots_budget"));
		printf("%6lld %7lld %-5s %-13s %10lld %7s %7lld %17s %14lld %11lld %10lld %10lld "
		       "%10lld\n", jint(j, "id"), jint(j, "workers"), jstr(j, "dtype"),
		       jstr(j, "mode"), jint(j, "partition_bytes"), tensors, jint(j, "keys"), slots,
		       jint(j, "rounds_completed"), jint(j, "retransmits"), jint(j, "incomplete"),
		       jint(j, "nacks"), jint(j, "drops"));
	}
}

static void show_lcores(json_t *r)
{
	json_t *l;
	size_t i;

	printf("%5s %-8s %4s %-5s %6s %8s %9s %12s\n", "LCORE", "ROLE", "NUMA", "IDLE", "BUSY%",
	       "MPPS", "GBPS", "DROPS");
	json_array_foreach(r, i, l)
		printf("%5lld %-8s %4lld %-5s %6.1f %8.2f %9.2f %12lld\n", jint(l, "lcore"),
		       jstr(l, "role"), jint(l, "numa"), jstr(l, "idle"), jnum(l, "busy_pct"),
		       jnum(l, "mpps"), jnum(l, "gbps_summed"), jint(l, "drops"));
}

static void show_layout(json_t *r)
{
	json_t *l;
	size_t i;

	printf("%5s %-8s %4s %-5s %5s %6s\n", "LCORE", "ROLE", "NUMA", "IDLE", "PORT", "QUEUE");
	json_array_foreach(json_object_get(r, "lcores"), i, l) {
		printf("%5lld %-8s %4lld %-5s ", jint(l, "lcore"), jstr(l, "role"), jint(l, "numa"),
		       jstr(l, "idle"));
		if (jint(l, "port") < 0)
			printf("%5s %6s\n", "-", "-");
		else
			printf("%5lld %6lld\n", jint(l, "port"), jint(l, "queue"));
	}
	printf("reducers: %lld\nkeymap (bucket->reducer):", jint(r, "reducers"));
	json_array_foreach(json_object_get(r, "keymap"), i, l)
		printf("%s%lld", i % 16 ? " " : "\n  ", (long long)json_integer_value(l));
	putchar('\n');
}

static void show_placement(json_t *r)
{
	json_t *n;
	size_t i;

	printf("job %lld, membership epoch %lld\n", jint(r, "job"), jint(r, "epoch"));
	printf("%-24s %-4s %-6s %8s %10s %14s\n", "NODE", "KIND", "STATE", "WEIGHT", "PARTITIONS",
	       "BYTES");
	json_array_foreach(json_object_get(r, "nodes"), i, n)
		printf("%-24s %-4s %-6s %8.4f %10lld %14lld\n", jstr(n, "name"), jstr(n, "kind"),
		       json_is_true(json_object_get(n, "alive")) ? "alive" : "LOST",
		       jnum(n, "weight"), jint(n, "partitions"), jint(n, "bytes"));
	if (json_object_get(r, "partitions") != NULL) {
		printf("\n%6s %6s %10s  %s\n", "TENSOR", "PART", "BYTES", "NODE");
		json_array_foreach(json_object_get(r, "partitions"), i, n)
			printf("%6lld %6lld %10lld  %s\n", jint(n, "tensor"), jint(n, "part"),
			       jint(n, "bytes"), jstr(n, "node"));
	}
}

static void show_stats(json_t *r)
{
	const char *k;
	json_t *v;

	show_lcores(json_object_get(r, "lcores"));
	putchar('\n');
	show_jobs(json_object_get(r, "jobs"));
	/* only the reasons that dropped something: a node has dozens */
	{
		int any = 0;

		json_object_foreach(json_object_get(r, "drops"), k, v)
			if (json_integer_value(v) != 0)
				printf("%s  %-28s %lld\n", any++ ? "" : "\ndrops by reason:\n", k,
				       (long long)json_integer_value(v));
		if (!any && json_object_get(r, "drops") != NULL)
			printf("\ndrops by reason: none\n");
	}
	printf("\ncontrol plane%s:\n",
	       json_is_true(json_object_get(r, "draining")) ? " (node draining)" : "");
	json_object_foreach(json_object_get(r, "control"), k, v)
		printf("  %-18s %lld\n", k, (long long)json_integer_value(v));
}

/* Run a method and show its answer as a table or JSON. */
static int simple(const char *method, json_t *params, void (*show)(json_t *))
{
	int rc;
	json_t *r = rpc(method, params, &rc);

	if (r == NULL)
		return rc;
	if (g.json || show == NULL)
		print_json(r);
	else
		show(r);
	json_decref(r);
	return 0;
}

/* Connect, then simple(); @p params is consumed either way. */
static int run_method(const char *method, json_t *params, void (*show)(json_t *))
{
	int rc = connect_server();

	if (rc != 0) {
		json_decref(params);
		return rc;
	}
	return simple(method, params, show);
}

static void show_created(json_t *r)
{
	if (json_is_string(json_object_get(r, "keys")))
		printf("job %lld created (open: its pushes make its keys)\ntoken %s\nchunk_bytes "
		       "%lld, up to %lld chunk slots per reducer (%lld on this node)\n",
		       jint(r, "id"), jstr(r, "token"), jint(r, "chunk_bytes"), jint(r, "slots"),
		       jint(r, "slots_budget"));
	else
		printf("job %lld created\ntoken %s\nchunk_bytes %lld, %lld partitions on this node\n",
		       jint(r, "id"), jstr(r, "token"), jint(r, "chunk_bytes"), jint(r, "keys"));
}

static void show_log_level(json_t *r)
{
	printf("log level of %s set to %s\n", jstr(r, "pattern"), jstr(r, "level"));
}

static void show_drain(json_t *r)
{
	(void)r;
	printf("node is draining: in-flight rounds finish, new ones are refused\n");
}

static void show_layout_set(json_t *r)
{
	(void)r;
	printf("layout changed\n");
}

/*
 * version: this sigmactl's versions and the node's (the `version` method), and
 * whether they agree; exit 1 when they do not (or the node has no such method).
 */
static int cmd_version(void)
{
	struct sg_ctl_version v;
	char err[512];
	int rc = connect_server();

	if (rc != 0)
		return rc;
	rc = sg_ctl_version_check(g.cli, &v, err, sizeof(err));
	if (rc != 0 && rc != -EPROTONOSUPPORT)
		return die_server("%s", err);
	if (g.json) {
		json_t *j = json_pack("{s:{s:s, s:i, s:i}, s:{s:s, s:i, s:i}, s:b}", "client",
				      "release", SG_VERSION_STRING, "api", SG_API_VERSION,
				      "protocol", SG_PROTO_VERSION, "node", "release", v.release,
				      "api", v.api, "protocol", v.protocol, "compatible", rc == 0);
		char *txt = j ? json_dumps(j, JSON_INDENT(2)) : NULL;

		printf("%s\n", txt ? txt : "{}");
		free(txt);
		json_decref(j);
	} else {
		printf("%-9s %-10s %11s %14s\n%-9s %-10s %11d %14d\n%-9s %-10s %11d %14d\n", "",
		       "RELEASE", "CONTROL_API", "WIRE_PROTOCOL", "sigmactl", SG_VERSION_STRING,
		       SG_API_VERSION, SG_PROTO_VERSION, "node", v.release[0] ? v.release : "?",
		       v.api, v.protocol);
	}
	if (rc != 0)
		return die_server("%s", err);
	return 0;
}

/* ---- subcommands with arguments ---- */

/* --node TARGET[,addr=IP][,port=N][,kind=cpu|gpu][,gbps=G][,weight=W] */
static int parse_node(char *spec, struct sg_ctl_jobsvc_node *n)
{
	char *save = NULL, *tok = strtok_r(spec, ",", &save);

	memset(n, 0, sizeof(*n));
	if (tok == NULL || strchr(tok, '=') != NULL)
		return die_usage("--node wants TARGET[,addr=IP][,port=N][,kind=cpu|gpu][,gbps=G]"
				 "[,weight=W]");
	n->target = tok;
	while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
		char *eq = strchr(tok, '=');
		uint64_t v;

		if (eq == NULL)
			return die_usage("--node %s: '%s' is not KEY=VALUE", n->target, tok);
		*eq++ = '\0';
		if (strcmp(tok, "addr") == 0) {
			n->addr = eq;
		} else if (strcmp(tok, "port") == 0) {
			if (sg_parse_u64(eq, 0, 65535, &v) != 0 || v == 0)
				return die_usage("--node %s: port must be 1..65535", n->target);
			n->udp_port = (uint16_t)v;
		} else if (strcmp(tok, "kind") == 0) {
			enum sg_node_kind k;

			if (sg_node_kind_from_name(eq, &k) != 0)
				return die_usage("--node %s: kind must be cpu or gpu", n->target);
			n->kind = eq;
		} else if (strcmp(tok, "gbps") == 0) {
			if (sg_parse_double(eq, 0, DBL_MAX, &n->gbps) != 0 || !(n->gbps > 0))
				return die_usage("--node %s: gbps must be a positive number", n->target);
		} else if (strcmp(tok, "weight") == 0) {
			if (sg_parse_double(eq, 0, DBL_MAX, &n->weight) != 0)
				return die_usage("--node %s: weight must be a number >= 0", n->target);
			n->has_weight = true;
		} else {
			return die_usage("--node %s: unknown key '%s' (addr, port, kind, gbps, weight)",
					 n->target, tok);
		}
	}
	return 0;
}

static int service_init(struct sg_ctl_jobsvc *svc, uint8_t *secret)
{
	bool tcp = false;

	for (unsigned int i = 0; i < g.n_nodes; i++)
		tcp |= sg_ctl_target_is_tcp(g.nodes[i].target);
	*svc = (struct sg_ctl_jobsvc){.nodes = g.nodes, .n_nodes = g.n_nodes, .secret = secret,
				      .timeout_ms = g.timeout_ms};
	svc->secret_len = 0;
	return tcp ? load_secret("a TCP node", secret, &svc->secret_len) : 0;
}

/*
 * --etcd: the record of the job just made (docs/cluster.md, "Jobs in etcd"), so that
 * its nodes can build a lost node's keys. @return 0, or 1 (the job stays: said why).
 */
static uint32_t record_ttl; /* job create --record-ttl: the record's lease TTL [30 s] */

static int job_record(const struct sg_ctl_job_spec *spec, const char *desc)
{
	struct sg_etcd_conf ec = {.endpoints = g.etcd, .timeout_ms = g.timeout_ms};
	uint64_t elems[SG_ETCD_JOB_MAX_TENSORS];
	char err[512];
	int64_t lease;

	for (uint32_t t = 0; t < spec->n_tensors && t < SG_ETCD_JOB_MAX_TENSORS; t++)
		elems[t] = spec->tensors[t].elems;
	lease = sg_etcd_job_record(&ec, g.cluster, desc, elems, spec->n_tensors, record_ttl, err,
				   sizeof(err));
	if (lease > 0)
		return 0;
	fprintf(stderr, "%s: the job was made but not recorded in etcd (its nodes cannot build a "
		"lost node's keys): %s\n", prog, err);
	return 1;
}

/* Write rank r's descriptor into @p path, a new file of mode 0600. @return 0 or -errno. */
static int write_rank_desc(const char *path, char *desc)
{
	size_t len = strlen(desc);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), rc = 0;

	if (fd < 0)
		return -errno;
	desc[len] = '\n';
	/* 0600 whatever the umask: no other user may read a rank's keys */
	if (fchmod(fd, 0600) != 0 || write(fd, desc, len + 1) != (ssize_t)(len + 1))
		rc = errno ? -errno : -EIO;
	close(fd);
	return rc;
}

/*
 * auth = mac: rank r's descriptor (its keys) into @p dir/rank-R.desc; on failure the
 * ones written are removed again, and @p path names the one that failed. @return 0 or -errno.
 */
static int write_rank_descs(const char *dir, char **descs, uint32_t n, char *path, size_t cap)
{
	uint32_t r;
	int rc = 0;

	for (r = 0; r < n && rc == 0; r++) {
		snprintf(path, cap, "%s/rank-%u.desc", dir, r);
		rc = write_rank_desc(path, descs[r]);
	}
	for (uint32_t k = 0; rc != 0 && k + 1 < r; k++) {
		char other[PATH_MAX];

		snprintf(other, sizeof(other), "%s/rank-%u.desc", dir, k);
		unlink(other);
	}
	return rc;
}

/* job create with --node: the job service, printing the job descriptor. */
static int job_create_service(struct sg_ctl_job_spec *spec, const char *rank_dir,
			      const char *token_file)
{
	static char desc[SG_DESC_MAX];
	char token[SG_CTL_TOKEN_LEN + 1];
	uint8_t secret[SG_CTL_SECRET_MAX];
	struct sg_ctl_jobsvc svc;
	char err[1024], path[PATH_MAX], **descs = NULL;
	int64_t id;
	int rc = service_init(&svc, secret);

	if (rc != 0)
		return rc;
	if (spec->auth) {
		descs = calloc(spec->workers, sizeof(*descs));
		for (uint32_t r = 0; descs != NULL && r < spec->workers; r++)
			if ((descs[r] = calloc(1, SG_DESC_MAX)) == NULL)
				return die_server("job create: out of memory");
		if (descs == NULL)
			return die_server("job create: out of memory");
		spec->rank_descs = descs;
		spec->token_out = token_file != NULL ? token : NULL;
	}
	id = sg_ctl_job_service_create(&svc, spec, desc, sizeof(desc), err, sizeof(err));
	memset(secret, 0, sizeof(secret));
	if (id >= 0 && spec->auth) {
		rc = write_rank_descs(rank_dir, descs, spec->workers, path, sizeof(path));
		if (rc != 0) {
			snprintf(err, sizeof(err), "cannot write %.900s (%s): the job is destroyed "
				 "again", path, strerror(-rc));
			sg_ctl_job_service_destroy(&svc, (uint32_t)id, NULL, 0);
			id = -EIO;
		}
	}
	/* as a rank's descriptor: a new file, 0600 (write_rank_desc() ends it with a newline) */
	if (id >= 0 && token_file != NULL && (rc = write_rank_desc(token_file, token)) != 0) {
		snprintf(err, sizeof(err), "cannot write %.900s (%s): the job is destroyed again",
			 token_file, strerror(-rc));
		unlink(token_file);
		for (uint32_t r = 0; r < spec->workers; r++) {
			snprintf(path, sizeof(path), "%s/rank-%u.desc", rank_dir, r);
			unlink(path);
		}
		sg_ctl_job_service_destroy(&svc, (uint32_t)id, NULL, 0);
		id = -EIO;
	}
	sodium_memzero(token, sizeof(token));
	for (uint32_t r = 0; descs != NULL && r < spec->workers; r++) {
		sodium_memzero(descs[r], SG_DESC_MAX);
		free(descs[r]);
	}
	free(descs);
	if (id < 0)
		return id == -EINVAL && strstr(err, "node") == NULL ? die_usage("job create: %s", err)
								     : die_server("job create: %s", err);
	if (g.etcd != NULL)
		rc = job_record(spec, desc);
	if (g.json) {
		json_t *j = json_pack("{s:I, s:s}", "id", (json_int_t)id, "descriptor", desc);

		if (spec->auth)
			json_object_set_new(j, "rank_dir", json_string(rank_dir));
		print_json(j);
		json_decref(j);
	} else {
		/* the descriptor alone on stdout, for SIGMA_JOB=$(sigmactl ...) */
		puts(desc);
		if (spec->auth)
			fprintf(stderr, "%s: job %lld created on %u node(s) with auth = mac%s; give "
				"rank R the file %s/rank-R.desc (its keys) and no other\n", prog,
				(long long)id, g.n_nodes,
				g.etcd != NULL && rc == 0 ? " and recorded in etcd" : "", rank_dir);
		else
			fprintf(stderr, "%s: job %lld created on %u node(s)%s; give each worker the "
				"line above (sigma_open_job())\n", prog, (long long)id, g.n_nodes,
				g.etcd != NULL && rc == 0 ? " and recorded in etcd" : "");
	}
	return rc;
}

static int cmd_job_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{"workers", required_argument, NULL, 'w'},
		{"tensor", required_argument, NULL, 't'},
		{"dtype", required_argument, NULL, 'd'},
		{"mode", required_argument, NULL, 'm'},
		{"partition-bytes", required_argument, NULL, 'p'},
		{"chunk-bytes", required_argument, NULL, 'c'},
		{"id", required_argument, NULL, 'i'},
		{"open", no_argument, NULL, 'o'},
		{"slots", required_argument, NULL, 's'},
		{"record-ttl", required_argument, NULL, 'r'},
		{"auth", no_argument, NULL, 'a'},
		{"rank-dir", required_argument, NULL, 'R'},
		{"token-file", required_argument, NULL, 'T'},
		{NULL, 0, NULL, 0},
	};
	static struct sg_ctl_tensor tensors[1024];
	struct sg_ctl_job_spec spec = {.tensors = tensors};
	const char *dtype = NULL, *mode = NULL, *rank_dir = NULL, *token_file = NULL;
	bool open = false;
	json_t *params, *jt;
	uint64_t v;
	int c;

	optind = 0; /* re-initialise getopt: options may follow the operands here */
	while ((c = getopt_long(argc, argv, "w:t:d:m:p:c:i:os:r:aR:", opts, NULL)) != -1) {
		char *colon;

		switch (c) {
		case 'w':
			if (sg_parse_u64(optarg, 0, 1u << 20, &v) != 0 || v == 0)
				goto bad_arg;
			spec.workers = (uint32_t)v;
			break;
		case 't':
			colon = strrchr(optarg, ':');
			if (colon == NULL || sg_parse_u64(colon + 1, 0, 1ull << 40, &v) != 0 || v == 0 ||
			    (size_t)(colon - optarg) >= sizeof(tensors[0].name))
				goto bad_arg;
			if (spec.n_tensors == 1024)
				return die_usage("job create: at most 1024 tensors");
			snprintf(tensors[spec.n_tensors].name, sizeof(tensors[0].name), "%.*s",
				 (int)(colon - optarg), optarg);
			tensors[spec.n_tensors++].elems = v;
			break;
		case 'd':
			dtype = optarg;
			break;
		case 'm':
			mode = optarg;
			break;
		case 'p':
			if (sg_parse_u64(optarg, 0, UINT32_MAX, &v) != 0)
				goto bad_arg;
			spec.partition_bytes = (uint32_t)v;
			break;
		case 'c':
			if (sg_parse_u64(optarg, 0, UINT32_MAX, &v) != 0)
				goto bad_arg;
			spec.chunk_bytes = (uint32_t)v;
			break;
		case 'i':
			if (sg_parse_u64(optarg, 0, UINT32_MAX, &v) != 0 || v == 0)
				goto bad_arg;
			spec.id = (uint32_t)v;
			break;
		case 'o':
			open = true;
			break;
		case 's':
			if (sg_parse_u64(optarg, 0, SG_OPEN_SLOTS_MAX, &v) != 0 || v == 0)
				goto bad_arg;
			spec.slots = (uint32_t)v;
			break;
		case 'r':
			if (sg_parse_u64(optarg, 0, 3600, &v) != 0 || v == 0)
				goto bad_arg;
			record_ttl = (uint32_t)v;
			break;
		case 'a':
			spec.auth = true;
			break;
		case 'R':
			rank_dir = optarg;
			break;
		case 'T':
			token_file = optarg;
			break;
		default:
			return die_usage("job create: bad option");
		}
	}
	if (optind != argc || spec.workers == 0 || (spec.n_tensors == 0) != open)
		return die_usage("job create needs --workers N and either at least one --tensor "
				 "NAME:ELEMS or --open (tensors registered later; each node makes "
				 "a key on its first push)");
	if (spec.slots != 0 && !open)
		return die_usage("job create: --slots is for an --open job (a job of tensors takes "
				 "the slots of its chunks)");
	if (spec.auth && (g.n_nodes == 0 || rank_dir == NULL))
		return die_usage("job create --auth needs --node (the job service derives each "
				 "rank's keys) and --rank-dir DIR (where each rank's descriptor goes)");
	if (rank_dir != NULL && !spec.auth)
		return die_usage("job create: --rank-dir is for --auth");
	if (token_file != NULL && !spec.auth)
		return die_usage("job create: --token-file is for --auth");
	if (g.n_nodes > 0) {
		if (dtype != NULL && sg_job_dtype_from_name(dtype, &spec.dtype) != 0)
			return die_usage("job create: unknown dtype '%s'", dtype);
		if (spec.dtype == SG_DTYPE_ANY && !open)
			return die_usage("job create: --dtype any is for an --open job");
		if (mode != NULL && sg_mode_from_name(mode, &spec.mode) != 0)
			return die_usage("job create: mode must be sync, async or deterministic");
		return job_create_service(&spec, rank_dir, token_file);
	}
	/* one node, as given with -s: the node checks the values and picks what is left */
	params = json_pack("{s:I}", "workers", (json_int_t)spec.workers);
	jt = json_array();
	for (uint32_t t = 0; t < spec.n_tensors; t++)
		json_array_append_new(jt, json_pack("{s:s, s:I}", "name", tensors[t].name, "elems",
						    (json_int_t)tensors[t].elems));
	if (open)
		json_decref(jt); /* no tensors: an open job */
	else
		json_object_set_new(params, "tensors", jt);
	if (spec.slots != 0)
		json_object_set_new(params, "slots", json_integer((json_int_t)spec.slots));
	if (dtype != NULL)
		json_object_set_new(params, "dtype", json_string(dtype));
	if (mode != NULL)
		json_object_set_new(params, "mode", json_string(mode));
	if (spec.partition_bytes != 0)
		json_object_set_new(params, "partition_bytes",
				    json_integer((json_int_t)spec.partition_bytes));
	if (spec.chunk_bytes != 0)
		json_object_set_new(params, "chunk_bytes", json_integer((json_int_t)spec.chunk_bytes));
	if (spec.id != 0)
		json_object_set_new(params, "id", json_integer((json_int_t)spec.id));
	return run_method("job_create", params, show_created);
bad_arg:
	return die_usage("job create: bad value '%s' for --%s", optarg,
			 c == 'w' ? "workers" : c == 't' ? "tensor (want NAME:ELEMS)" :
			 c == 'c' ? "chunk-bytes" : c == 'i' ? "id" :
			 c == 's' ? "slots (1..16777216)" : c == 'r' ? "record-ttl (1..3600 s)" :
			 "partition-bytes");
}

/* job destroy ID with --node: on every node. */
static int job_destroy_service(uint32_t id)
{
	uint8_t secret[SG_CTL_SECRET_MAX];
	struct sg_ctl_jobsvc svc;
	char err[2048];
	int rc = service_init(&svc, secret);

	if (rc != 0)
		return rc;
	rc = sg_ctl_job_service_destroy(&svc, id, err, sizeof(err));
	memset(secret, 0, sizeof(secret));
	if (rc != 0)
		return die_server("job destroy: %s", err);
	if (g.etcd != NULL) {
		struct sg_etcd_conf ec = {.endpoints = g.etcd, .timeout_ms = g.timeout_ms};

		rc = sg_etcd_job_unrecord(&ec, g.cluster, id, err, sizeof(err));
		if (rc < 0 && rc != -ENOENT)
			return die_server("job destroy: the job is gone from its nodes, not its "
					  "record in etcd: %s", err);
	}
	if (!g.json)
		printf("job %u destroyed on %u node(s)\n", id, g.n_nodes);
	else
		puts("true");
	return 0;
}

static int cmd_with_id(const char *what, const char *method, int argc, char **argv)
{
	static const struct option opts[] = {{"detail", no_argument, NULL, 'D'}, {NULL, 0, NULL, 0}};
	bool detail = false;
	uint64_t id;
	int c;

	optind = 0; /* re-initialise getopt: options may follow the operands here */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'D' || strcmp(method, "job_placement") != 0)
			return die_usage("%s: unknown option", what);
		detail = true;
	}
	if (optind != argc - 1 || sg_parse_u64(argv[optind], 0, UINT32_MAX, &id) != 0)
		return die_usage("%s needs one job id", what);
	return run_method(method,
		      detail ? json_pack("{s:I, s:b}", "id", (json_int_t)id, "detail", 1)
			     : json_pack("{s:I}", "id", (json_int_t)id),
		      strcmp(method, "job_placement") == 0 ? show_placement : NULL);
}

static int by_avg_desc(const void *a, const void *b)
{
	double x = jnum(*(json_t *const *)a, "avg_us"), y = jnum(*(json_t *const *)b, "avg_us");

	return x < y ? 1 : x > y ? -1 : 0;
}

/* job_lateness's answer: the straggler, then the ranks, the slowest first. */
static void show_ranks(json_t *r)
{
	json_t *ranks = json_object_get(r, "ranks"), *st = json_object_get(r, "straggler"), *x;
	size_t n = json_array_size(ranks), i;
	json_t **v = calloc(n ? n : 1, sizeof(*v));

	printf("job %lld: %lld workers, %lld rounds; ", jint(r, "id"), jint(r, "workers"),
	       jint(r, "rounds"));
	if (json_is_object(st))
		printf("straggler: rank %lld, last in %.0f%% of rounds, %.3f ms late on average\n",
		       jint(st, "rank"), 100.0 * jnum(st, "last_share"), jnum(st, "avg_us") / 1e3);
	else
		printf("no straggler: no round completed yet\n");
	if (v == NULL)
		return;
	json_array_foreach(ranks, i, x)
		v[i] = x;
	qsort(v, n, sizeof(*v), by_avg_desc);
	printf("%6s %12s %10s %6s %10s %10s %10s %10s\n", "RANK", "PUSHES", "LAST", "LAST%",
	       "AVG_MS", "MEAN_MS", "P50_MS", "P99_MS");
	for (i = 0; i < n; i++)
		printf("%6lld %12lld %10lld %6.1f %10.3f %10.3f %10.3f %10.3f\n", jint(v[i], "rank"),
		       jint(v[i], "pushes"), jint(v[i], "last"), 100.0 * jnum(v[i], "last_share"),
		       jnum(v[i], "avg_us") / 1e3, jnum(v[i], "mean_us") / 1e3,
		       jnum(v[i], "p50_us") / 1e3, jnum(v[i], "p99_us") / 1e3);
	free(v);
}

/* jobs --ranks [ID]: job_lateness of one job, or of each job_list names. */
static int cmd_jobs_ranks(int argc, char **argv)
{
	json_t *ids = NULL, *all, *j;
	uint64_t id = 0;
	size_t i;
	int rc;

	if (argc > 1 || (argc == 1 && (sg_parse_u64(argv[0], 0, UINT32_MAX, &id) != 0 || id == 0)))
		return die_usage("jobs --ranks takes at most one job id");
	if ((rc = connect_server()) != 0)
		return rc;
	if (argc == 1) {
		ids = json_array();
		json_array_append_new(ids, json_pack("{s:I}", "id", (json_int_t)id));
	} else if ((ids = rpc("job_list", NULL, &rc)) == NULL) {
		return rc;
	}
	all = json_array();
	json_array_foreach(ids, i, j) {
		json_t *r = rpc("job_lateness", json_pack("{s:I}", "id", jint(j, "id")), &rc);

		if (r == NULL)
			break;
		if (g.json) {
			json_array_append_new(all, r);
			continue;
		}
		if (i > 0)
			putchar('\n');
		show_ranks(r);
		json_decref(r);
	}
	if (rc == 0 && g.json)
		print_json(all);
	json_decref(all);
	json_decref(ids);
	return rc;
}

/* top --etcd: the control targets of the cluster's live nodes, read for each frame */
static int top_etcd_nodes(void *arg, char (*out)[TOP_TARGET_MAX], unsigned int cap, char *err,
			  size_t errlen)
{
	struct sg_etcd_node nodes[SG_MAX_NODES];
	struct sg_etcd_garbage gb = {0};
	unsigned int k = 0;
	int n = sg_etcd_nodes_get(arg, g.cluster, nodes, SG_MAX_NODES, &gb);

	if (n < 0) {
		snprintf(err, errlen, "%s", sg_etcd_last_error(arg));
		return -1;
	}
	for (int i = 0; i < n && i < SG_MAX_NODES && k < cap; i++)
		if (nodes[i].control[0] != '\0')
			snprintf(out[k++], TOP_TARGET_MAX, "%s", nodes[i].control);
	return (int)k;
}

/* top: the -s target, or every --node's, or with --etcd the cluster's live nodes;
 * a TCP one needs the secret. */
static int cmd_top(int argc, char **argv)
{
	const char *targets[SG_MAX_NODES];
	uint8_t secret[SG_CTL_SECRET_MAX];
	struct top_conf tc = {.targets = targets, .n = g.n_nodes ? g.n_nodes : 1,
			      .timeout_ms = g.timeout_ms < 900 ? g.timeout_ms : 900};
	bool tcp = false;
	size_t len = 0;
	int rc;

	if (g.etcd != NULL && g.n_nodes == 0) {
		struct sg_etcd_conf ec = {.endpoints = g.etcd, .timeout_ms = tc.timeout_ms};
		char src[320];

		/* the nodes register their control targets; a TCP one wants -k */
		if ((rc = load_secret(NULL, secret, &len)) != 0)
			return rc;
		if ((tc.nodes_arg = sg_etcd_create(&ec)) == NULL)
			return die_usage("--etcd: want http://host:port[,...]");
		if (sg_etcd_prefix(g.cluster, src, sizeof(src)) != 0) {
			sg_etcd_destroy(tc.nodes_arg);
			return die_usage("--cluster: 1..63 of [A-Za-z0-9._-]");
		}
		snprintf(src, sizeof(src), "etcd %s, cluster %s", g.etcd, g.cluster);
		tc.nodes_get = top_etcd_nodes;
		tc.source = src;
		tc.secret = len ? secret : NULL;
		tc.secret_len = len;
		rc = sigmactl_top(&tc, argc, argv);
		sg_etcd_destroy(tc.nodes_arg);
		memset(secret, 0, sizeof(secret));
		return rc;
	}
	targets[0] = g.target;
	for (unsigned int i = 0; i < g.n_nodes; i++)
		targets[i] = g.nodes[i].target;
	for (unsigned int i = 0; i < tc.n; i++)
		tcp |= sg_ctl_target_is_tcp(targets[i]);
	if (tcp && (rc = load_secret("top: a TCP target", secret, &len)) != 0)
		return rc;
	tc.secret = len ? secret : NULL;
	tc.secret_len = len;
	rc = sigmactl_top(&tc, argc, argv);
	memset(secret, 0, sizeof(secret));
	return rc;
}

static volatile sig_atomic_t stop_watch;

static void on_sigint(int sig)
{
	(void)sig;
	stop_watch = 1;
}

static int cmd_lcores(int argc, char **argv)
{
	static const struct option opts[] = {
		{"watch", optional_argument, NULL, 'W'},
		{"count", required_argument, NULL, 'c'},
		{NULL, 0, NULL, 0},
	};
	double interval = 0;
	uint64_t count = 0, i;
	int c, rc;

	optind = 0; /* re-initialise getopt: options may follow the operands here */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'W') {
			interval = 1.0;
			if (optarg != NULL && sg_parse_double(optarg, 0.05, 3600, &interval) != 0)
				return die_usage("lcores: --watch wants seconds (0.05..3600)");
		} else if (c == 'c') {
			if (sg_parse_u64(optarg, 0, 1u << 30, &count) != 0 || count == 0)
				return die_usage("lcores: --count wants a positive number");
		} else {
			return die_usage("lcores: unknown option");
		}
	}
	/* "--watch 2" as two words: take the number. */
	if (interval > 0 && optind == argc - 1) {
		double v;

		if (sg_parse_double(argv[optind], 0.05, 3600, &v) != 0)
			return die_usage("lcores: --watch wants seconds (0.05..3600)");
		interval = v;
		optind++;
	}
	if (optind != argc)
		return die_usage("lcores: unexpected argument '%s'", argv[optind]);
	if ((rc = connect_server()) != 0)
		return rc;
	if (interval == 0)
		return simple("lcores_get", NULL, show_lcores);
	signal(SIGINT, on_sigint);
	for (i = 0; !stop_watch && (count == 0 || i < count); i++) {
		struct timespec ts = {(time_t)interval,
				      (long)((interval - floor(interval)) * 1e9)};
		time_t now = time(NULL);
		char tbuf[32];

		if (!g.json) {
			/* Like top: home the cursor and clear, then redraw. */
			fputs("\033[H\033[2J", stdout);
			strftime(tbuf, sizeof(tbuf), "%H:%M:%S", localtime(&now));
			printf("sigma lcores on %s, every %.2gs, %s (Ctrl-C quits)\n\n", g.target,
			       interval, tbuf);
		}
		rc = simple("lcores_get", NULL, show_lcores);
		fflush(stdout);
		if (rc != 0)
			return rc;
		if (count == 0 || i + 1 < count)
			nanosleep(&ts, NULL);
	}
	return 0;
}

/* layout suggest: measures, names the bottleneck, prints a command; changes nothing */
static int cmd_layout_suggest(int argc, char **argv)
{
	uint8_t secret[SG_CTL_SECRET_MAX];
	struct lay_conf lc = {.target = g.target, .timeout_ms = g.timeout_ms, .json = g.json};
	size_t len = 0;
	int rc = target_secret(secret, &len);

	if (rc != 0)
		return rc;
	lc.secret = len ? secret : NULL;
	lc.secret_len = len;
	rc = sigmactl_layout_suggest(&lc, argc, argv);
	memset(secret, 0, sizeof(secret));
	return rc;
}

static int cmd_layout_set(int argc, char **argv)
{
	json_t *params = json_object(), *idle = json_array();
	int i;

	if (argc < 1)
		goto usage_err;
	for (i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		char key[64];

		if (eq == NULL || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(key))
			goto usage_err;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - argv[i]), argv[i]);
		if (strcmp(key, "keymap") == 0) {
			json_t *km = json_array();
			uint64_t v, list[SG_BUCKETS];
			char *save = NULL, *tok, *dup = strdup(eq + 1);
			int n = 0, b;

			for (tok = strtok_r(dup, ",", &save); tok && n < SG_BUCKETS;
			     tok = strtok_r(NULL, ",", &save)) {
				if (sg_parse_u64(tok, 0, 65535, &v) != 0)
					break;
				list[n++] = v;
			}
			free(dup);
			if (n == 0 || tok != NULL) {
				json_decref(km);
				goto usage_err;
			}
			/* A short list repeats: "0,1" alternates the two reducers. */
			for (b = 0; b < SG_BUCKETS; b++)
				json_array_append_new(km, json_integer((json_int_t)list[b % n]));
			json_object_set_new(params, "keymap", km);
		} else if (strcmp(key, "idle") == 0) {
			char *colon = strchr(eq + 1, ':');
			uint64_t lc;

			if (colon == NULL)
				goto usage_err;
			*colon = '\0';
			if (sg_parse_u64(eq + 1, 0, 1023, &lc) != 0)
				goto usage_err;
			json_array_append_new(idle, json_pack("{s:I, s:s}", "lcore", (json_int_t)lc,
							      "policy", colon + 1));
		} else {
			/* Not ours to judge: the server says what cannot change live. */
			json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);

			json_object_set_new(params, key, v ? v : json_string(eq + 1));
		}
	}
	if (json_array_size(idle) > 0)
		json_object_set_new(params, "idle", idle);
	else
		json_decref(idle);
	return run_method("layout_set", params, show_layout_set);
usage_err:
	json_decref(params);
	json_decref(idle);
	return die_usage("layout set wants KEY=VALUE: keymap=R[,R...] or idle=LCORE:poll|sleep");
}

static int cmd_log_level(int argc, char **argv)
{
	static const struct option opts[] = {{"pattern", required_argument, NULL, 'p'},
					     {NULL, 0, NULL, 0}};
	const char *pattern = NULL;
	json_t *params;
	int c;

	optind = 0; /* re-initialise getopt: options may follow the operands here */
	while ((c = getopt_long(argc, argv, "p:", opts, NULL)) != -1) {
		if (c != 'p')
			return die_usage("log-level: unknown option");
		pattern = optarg;
	}
	if (optind != argc - 1)
		return die_usage("log-level needs one LEVEL (emerg|alert|crit|err|warning|notice|"
				 "info|debug)");
	params = json_pack("{s:s}", "level", argv[optind]);
	if (pattern != NULL)
		json_object_set_new(params, "pattern", json_string(pattern));
	return run_method("log_level_set", params, show_log_level);
}

static int cmd_heartbeat(int argc, char **argv)
{
	static const struct option opts[] = {{"kind", required_argument, NULL, 'k'},
					     {"gbps", required_argument, NULL, 'g'},
					     {NULL, 0, NULL, 0}};
	const char *kind = "cpu";
	double gbps = 100;
	int c;

	optind = 0; /* re-initialise getopt: options may follow the operands here */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'k') {
			kind = optarg;
		} else if (c == 'g') {
			if (sg_parse_double(optarg, 0, DBL_MAX, &gbps) != 0 || !(gbps > 0))
				return die_usage("heartbeat: --gbps wants a positive number");
		} else {
			return die_usage("heartbeat: unknown option");
		}
	}
	if (optind != argc - 1)
		return die_usage("heartbeat needs one node NAME");
	return run_method("node_heartbeat",
		      json_pack("{s:s, s:s, s:f}", "name", argv[optind], "kind", kind, "gbps", gbps),
		      NULL);
}

static void show_verbs(json_t *r)
{
	json_t *l, *rc = json_object_get(r, "rc");
	size_t i;

	printf("transport:   verbs, mode %s\n", jstr(r, "mode"));
	printf("port:        %lld, gid %s (index %lld), lid %lld\n", jint(r, "port"),
	       jstr(r, "gid"), jint(r, "gid_index"), jint(r, "lid"));
	printf("qkey:        0x%08llx\n", jint(r, "qkey"));
	printf("max payload: %lld bytes per message (%lld with the Sigma header)\n",
	       jint(r, "max_payload"), jint(r, "msg_max"));
	if (rc != NULL)
		printf("RC:          %lld of %lld workers connected, %lld slots each\n",
		       jint(rc, "connected"), jint(rc, "max_connections"), jint(rc, "slots"));
	printf("%5s %-8s %10s\n", "LCORE", "ROLE", "QPN");
	json_array_foreach(json_object_get(r, "lcores"), i, l)
		printf("%5lld %-8s %#10llx\n", jint(l, "lcore"), jstr(l, "role"), jint(l, "qpn"));
}

static void show_verbs_connect(json_t *r)
{
	json_t *n = json_object_get(r, "node");

	printf("connected as peer %lld; the node's side:\n", jint(r, "peer"));
	printf("  qpn %#llx psn %#llx lid %lld gid %s\n  ring addr %s rkey %#llx, %lld slots of "
	       "%lld bytes\n", jint(n, "qpn"), jint(n, "psn"), jint(n, "lid"), jstr(n, "gid"),
	       jstr(n, "addr"), jint(n, "rkey"), jint(n, "slots"), jint(n, "stride"));
}

/*
 * A number of verbs connect and disconnect: decimal, or hex after "0x"
 * (sg_parse_u64x()); zeros before a decimal number are dropped, not read as
 * octal: psn=010 is 10, as it always was here.
 */
static int verbs_num(const char *s, uint64_t max, uint64_t *v)
{
	if (strspn(s, "0123456789") == strlen(s))
		while (s[0] == '0' && s[1] != '\0')
			s++;
	return sg_parse_u64x(s, 0, max, v);
}

/* verbs connect KEY=VALUE...: numbers go as integers, gid (and what is no number) as written. */
static int cmd_verbs_connect(int argc, char **argv)
{
	json_t *params = json_object();

	if (argc == 0) {
		json_decref(params);
		return die_usage("verbs connect needs qpn=N psn=N gid=HEX addr=0xADDR rkey=N "
				 "slots=N stride=N [lid=N]");
	}
	for (int i = 0; i < argc; i++) {
		char key[16], *eq = strchr(argv[i], '=');
		uint64_t v;

		if (eq == NULL || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(key) ||
		    eq[1] == '\0') {
			json_decref(params);
			return die_usage("verbs connect: '%s' is not KEY=VALUE", argv[i]);
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - argv[i]), argv[i]);
		/* decimal, or hex after "0x"; an addr above 2^63 does not fit a JSON
		 * integer: it goes as the "0x..." string, as does what is no number */
		if (strcmp(key, "gid") == 0 || verbs_num(eq + 1, INT64_MAX, &v) != 0)
			json_object_set_new(params, key, json_string(eq + 1));
		else
			json_object_set_new(params, key, json_integer((json_int_t)v));
	}
	return run_method("verbs_rc_connect", params, show_verbs_connect);
}

static void show_verbs_disconnect(json_t *r)
{
	printf("peer %lld disconnected; its slots are free\n", jint(r, "peer"));
}

/* verbs disconnect peer=N: decimal or 0x hex; what is no number is refused here. */
static int cmd_verbs_disconnect(int argc, char **argv)
{
	const char *v = argc == 1 && strncmp(argv[0], "peer=", 5) == 0 ? argv[0] + 5 : NULL;
	uint64_t n;

	if (v == NULL || *v == '\0' || *v == '-' || *v == '+')
		return die_usage("verbs disconnect needs peer=N (the peer id verbs connect printed)");
	if (verbs_num(v, UINT32_MAX, &n) != 0)
		return die_usage("verbs disconnect: peer must be a number in [0, 4294967295], not "
				 "'%s'", v);
	return run_method("verbs_rc_disconnect", json_pack("{s:I}", "peer", (json_int_t)n),
			  show_verbs_disconnect);
}

/* The records of etcd that did not parse, by reason (@p what: the member the key names). */
static void print_ignored(const struct sg_etcd_garbage *gb, const char *what)
{
	uint64_t n = gb->not_json + gb->bad_field + gb->bad_kind + gb->name_mismatch;

	if (n)
		printf("ignored %" PRIu64 " record(s) that do not parse (%" PRIu64 " not JSON, %"
		       PRIu64 " bad field, %" PRIu64 " unknown kind, %" PRIu64 " %s not the key's): "
		       "see the messages above\n", n, gb->not_json, gb->bad_field, gb->bad_kind,
		       gb->name_mismatch, what);
}

/* nodes --etcd: the registered nodes, read as every worker reads them */
static int etcd_nodes(void)
{
	struct sg_etcd_conf ec = {.endpoints = g.etcd, .timeout_ms = g.timeout_ms};
	struct sg_etcd_node nodes[SG_MAX_NODES];
	struct sg_etcd_garbage gb = {0};
	struct sg_etcd *e = sg_etcd_create(&ec);
	uint64_t ignored;
	int n;

	if (e == NULL)
		return die_usage("--etcd: want http://host:port[,...]");
	n = sg_etcd_nodes_get(e, g.cluster, nodes, SG_MAX_NODES, &gb);
	if (n == -EINVAL) {
		sg_etcd_destroy(e);
		return die_usage("--cluster: 1..63 of [A-Za-z0-9._-]");
	}
	if (n < 0) {
		fprintf(stderr, "%s: etcd: %s\n", prog, sg_etcd_last_error(e));
		sg_etcd_destroy(e);
		return 1;
	}
	ignored = gb.not_json + gb.bad_field + gb.bad_kind + gb.name_mismatch;
	if (n > SG_MAX_NODES)
		n = SG_MAX_NODES;
	if (g.json) {
		json_t *arr = json_array();
		char *txt;

		for (int i = 0; i < n; i++)
			json_array_append_new(arr, json_pack("{s:s, s:s, s:f, s:s, s:i, s:s}", "name",
				nodes[i].name, "kind", sg_node_kind_name(nodes[i].kind), "gbps",
				nodes[i].gbps, "addr", nodes[i].addr, "port", nodes[i].port, "control",
				nodes[i].control));
		txt = json_dumps(json_pack("{s:o, s:I}", "nodes", arr, "ignored",
					   (json_int_t)ignored), JSON_INDENT(2));
		printf("%s\n", txt ? txt : "{}");
		free(txt);
	} else {
		printf("%-20s %-4s %8s %-21s %s\n", "NAME", "KIND", "GBPS", "DATAPLANE", "CONTROL");
		for (int i = 0; i < n; i++) {
			char dp[32];

			snprintf(dp, sizeof(dp), "%s:%u", nodes[i].addr, nodes[i].port);
			printf("%-20s %-4s %8g %-21s %s\n", nodes[i].name,
			       sg_node_kind_name(nodes[i].kind), nodes[i].gbps, dp, nodes[i].control);
		}
		print_ignored(&gb, "name");
	}
	sg_etcd_destroy(e);
	return 0;
}

/* jobs --etcd: the job records, read as a node reads them */
static int etcd_jobs(void)
{
	struct sg_etcd_conf ec = {.endpoints = g.etcd, .timeout_ms = g.timeout_ms};
	struct sg_etcd_garbage gb = {0};
	struct sg_etcd *e = sg_etcd_create(&ec);
	struct sg_etcd_job *jobs = calloc(SG_CTL_MAX_JOBS, sizeof(*jobs));
	uint64_t ignored;
	json_t *arr = json_array();
	int n;

	if (e == NULL || jobs == NULL || arr == NULL) {
		sg_etcd_destroy(e);
		free(jobs);
		json_decref(arr);
		return e == NULL ? die_usage("--etcd: want http://host:port[,...]") : 1;
	}
	n = sg_etcd_jobs_get(e, g.cluster, jobs, SG_CTL_MAX_JOBS, &gb);
	if (n < 0) {
		fprintf(stderr, "%s: etcd: %s\n", prog, n == -EINVAL ?
			"--cluster: 1..63 of [A-Za-z0-9._-]" : sg_etcd_last_error(e));
		sg_etcd_destroy(e);
		free(jobs);
		json_decref(arr);
		return n == -EINVAL ? 2 : 1;
	}
	ignored = gb.not_json + gb.bad_field + gb.bad_kind + gb.name_mismatch;
	if (n > SG_CTL_MAX_JOBS)
		n = SG_CTL_MAX_JOBS;
	if (!g.json)
		printf("%-10s %-7s %-5s %-13s %8s %8s %7s %s\n", "ID", "WORKERS", "DTYPE", "MODE",
		       "TENSORS", "PARTBYTE", "CHUNK", "NODES");
	for (int i = 0; i < n; i++) {
		const struct sg_etcd_job *j = &jobs[i];
		char names[512] = "", tens[16] = "open";
		int len = 0;

		if (!j->open)
			snprintf(tens, sizeof(tens), "%u", j->n_tensors);
		for (uint32_t k = 0; k < j->n_nodes && len >= 0 && (size_t)len < sizeof(names); k++)
			len += snprintf(names + len, sizeof(names) - len, "%s%s", k ? "," : "",
					j->nodes[k].name);
		if (g.json)
			json_array_append_new(arr, json_pack("{s:I, s:I, s:s, s:s, s:b, s:I, s:I, s:I, "
				"s:s, s:s, s:I}", "id", (json_int_t)j->id, "workers",
				(json_int_t)j->workers, "dtype", sg_dtype_name(j->dtype), "mode",
				sg_mode_name(j->mode), "open", j->open, "tensors",
				(json_int_t)j->n_tensors, "partition_bytes",
				(json_int_t)j->partition_bytes, "chunk_bytes",
				(json_int_t)j->chunk_bytes, "nodes", names, "token_digest",
				j->token_digest, "lease", (json_int_t)j->lease));
		else
			printf("%-10u %-7u %-5s %-13s %8s %8u %7u %s\n", j->id, j->workers,
			       sg_dtype_name(j->dtype), sg_mode_name(j->mode), tens,
			       j->partition_bytes, j->chunk_bytes, names);
	}
	if (g.json) {
		char *txt = json_dumps(json_pack("{s:o, s:I}", "jobs", arr, "ignored",
						 (json_int_t)ignored), JSON_INDENT(2));

		printf("%s\n", txt ? txt : "{}");
		free(txt);
	} else {
		json_decref(arr);
		print_ignored(&gb, "id");
	}
	sg_etcd_destroy(e);
	free(jobs);
	return 0;
}

static int dispatch(int argc, char **argv)
{
	const char *cmd = argv[0];

	if (strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "nodes") == 0 && argc == 1 && g.etcd != NULL)
		return etcd_nodes();
	if (strcmp(cmd, "jobs") == 0 && argc == 1 && g.etcd != NULL && g.n_nodes == 0)
		return etcd_jobs();
	/* elastic jobs (sigmactl_elastic.c); a bare "drain" is the node's own */
	if (g.etcd != NULL && ((strcmp(cmd, "drain") == 0 && argc >= 2) ||
			       strcmp(cmd, "undrain") == 0 || strcmp(cmd, "elastic") == 0)) {
		struct sg_etcd_conf ec = {.endpoints = g.etcd, .timeout_ms = g.timeout_ms};
		uint8_t secret[SG_CTL_SECRET_MAX];
		size_t len = 0;
		int rc = load_secret(NULL, secret, &len);

		/* the secret, if any, for --propose's calls to the nodes over TCP */
		if (rc == 0)
			rc = sigmactl_elastic(&ec, g.cluster, argc, argv, g.json, secret, len);
		memset(secret, 0, sizeof(secret));
		return rc;
	}
	if (strcmp(cmd, "nodes") == 0 && argc >= 2 && strcmp(argv[1], "remove") == 0) {
		if (argc != 3)
			return die_usage("nodes remove needs one NAME");
		return run_method("node_remove", json_pack("{s:s}", "name", argv[2]), NULL);
	}
	if (strcmp(cmd, "top") == 0)
		return cmd_top(argc, argv);
	if (g.n_nodes > 0 && !(strcmp(cmd, "job") == 0 && argc >= 2 &&
			       (strcmp(argv[1], "create") == 0 || strcmp(argv[1], "destroy") == 0)))
		return die_usage("--node is for job create and job destroy; give one node with -s");
	if (g.n_nodes > 0 && strcmp(argv[1], "destroy") == 0) {
		uint64_t id;

		if (argc != 3 || sg_parse_u64(argv[2], 0, UINT32_MAX, &id) != 0 || id == 0)
			return die_usage("job destroy needs one job id");
		return job_destroy_service((uint32_t)id);
	}
	if (strcmp(cmd, "job") == 0) {
		if (argc >= 2 && strcmp(argv[1], "create") == 0)
			return cmd_job_create(argc - 1, argv + 1);
		if (argc >= 2 && strcmp(argv[1], "destroy") == 0)
			return cmd_with_id("job destroy", "job_destroy", argc - 1, argv + 1);
		return die_usage("job wants 'create' or 'destroy'");
	}
	if (strcmp(cmd, "placement") == 0)
		return cmd_with_id("placement", "job_placement", argc, argv);
	if (strcmp(cmd, "jobs") == 0 && argc >= 2 && strcmp(argv[1], "--ranks") == 0)
		return cmd_jobs_ranks(argc - 2, argv + 2);
	if (strcmp(cmd, "lcores") == 0)
		return cmd_lcores(argc, argv);
	if (strcmp(cmd, "layout") == 0 && argc >= 2 && strcmp(argv[1], "set") == 0)
		return cmd_layout_set(argc - 2, argv + 2);
	if (strcmp(cmd, "layout") == 0 && argc >= 2 && strcmp(argv[1], "suggest") == 0)
		return cmd_layout_suggest(argc - 1, argv + 1);
	if (strcmp(cmd, "log-level") == 0)
		return cmd_log_level(argc, argv);
	if (strcmp(cmd, "heartbeat") == 0)
		return cmd_heartbeat(argc, argv);
	if (strcmp(cmd, "verbs") == 0 && argc >= 2 && strcmp(argv[1], "connect") == 0)
		return cmd_verbs_connect(argc - 2, argv + 2);
	if (strcmp(cmd, "verbs") == 0 && argc >= 2 && strcmp(argv[1], "disconnect") == 0)
		return cmd_verbs_disconnect(argc - 2, argv + 2);
	if (strcmp(cmd, "version") == 0) {
		if (argc > 1)
			return die_usage("version takes no arguments");
		return cmd_version();
	}
	if (strcmp(cmd, "call") == 0) {
		json_t *p = NULL;

		if (argc < 2 || argc > 3)
			return die_usage("call needs METHOD [JSON]");
		if (argc == 3 && (p = json_loads(argv[2], 0, NULL)) == NULL)
			return die_usage("call: params are not a JSON object or array");
		return run_method(argv[1], p, NULL);
	}
	{
		static const struct {
			const char *cmd, *method;
			void (*show)(json_t *);
		} plain[] = {
			{"nodes", "nodes_list", show_nodes}, {"info", "node_info", show_info},
			{"jobs", "job_list", show_jobs},     {"stats", "stats_get", show_stats},
			{"layout", "layout_get", show_layout}, {"drain", "drain", show_drain},
			{"verbs", "verbs_info", show_verbs},
		};
		size_t i;

		for (i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
			if (strcmp(cmd, plain[i].cmd) != 0)
				continue;
			if (argc > 1)
				return die_usage("%s takes no arguments", cmd);
			return run_method(plain[i].method, NULL, plain[i].show);
		}
	}
	return die_usage("unknown command '%s'", cmd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"server", required_argument, NULL, 's'},
		{"node", required_argument, NULL, 'n'},
		{"secret-file", required_argument, NULL, 'k'},
		{"json", no_argument, NULL, 'j'},
		{"timeout", required_argument, NULL, 't'},
		{"etcd", required_argument, NULL, 'e'},
		{"cluster", required_argument, NULL, 'c'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c, rc;

	g.target = getenv("SIGMACTL_SERVER");
	g.secret_file = getenv("SIGMACTL_SECRET_FILE");
	if (g.target == NULL || g.target[0] == '\0')
		g.target = DEFAULT_TARGET;
	while ((c = getopt_long(argc, argv, "+s:n:k:jt:e:c:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			g.target = optarg;
			break;
		case 'n':
			if (g.n_nodes == SG_MAX_NODES)
				return die_usage("at most %d --node", SG_MAX_NODES);
			if ((rc = parse_node(optarg, &g.nodes[g.n_nodes])) != 0)
				return rc;
			g.n_nodes++;
			break;
		case 'k':
			g.secret_file = optarg;
			break;
		case 'j':
			g.json = true;
			break;
		case 't':
			if (sg_parse_u64(optarg, 0, 3600000, &v) != 0 || v == 0)
				return die_usage("--timeout wants milliseconds (1..3600000)");
			g.timeout_ms = (uint32_t)v;
			break;
		case 'e':
			g.etcd = optarg;
			break;
		case 'c':
			g.cluster = optarg;
			break;
		case 'V':
			fputs(SG_VERSION_TEXT("sigmactl"), stdout);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try '%s --help' for more information.\n", prog);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* "--json" may also follow the command, as operators tend to type it. */
	{
		int i, j = optind;

		for (i = optind; i < argc; i++)
			if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-j") == 0)
				g.json = true;
			else
				argv[j++] = argv[i];
		argc = j;
	}
	rc = dispatch(argc - optind, argv + optind);
	sg_ctl_client_close(g.cli);
	return rc;
}
