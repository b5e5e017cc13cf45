/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The N ranks of an elastic job (client/sigma_elastic.h), one thread each:
 * ROUNDS rounds of push_pull over T fp32 tensors whose sums round differently
 * in another order (the job in deterministic mode), every result checked bit for
 * bit against the rank-order sum computed here. Prints each tensor's
 * partitions' nodes before the first round and after the last (rank 0's view:
 * "place T P NODE_BEFORE NODE_AFTER"), each rank's epoch and counters, and
 * "elements checked: K, wrong: W". Exit 0 when every sum is right and every
 * operation succeeded.
 *
 * Usage: elastic_workers DESCRIPTOR ETCD CLUSTER ROUNDS ELEMS[,ELEMS...]
 *        [--sleep-ms MS] [--plain-rank R] [--propose-all | --propose-none]
 *        [--confirm-ms MS]
 *        [--margin M] [--wait-ms MS] [--ranks-wait-ms MS] [--duration-s S]
 *        [--rounds-log FILE] [--idle T:FROM:TO] [--rank-dir DIR] [--token-file FILE]
 *        [--forge K]
 * --duration-s: run rounds (at most ROUNDS) until S seconds have passed (rank 0
 * decides the last round, every rank runs the same). --rounds-log: rank 0
 * appends "ROUND UNIX_MS" at the end of each round (bench/chaos.sh). The last
 * line is a JSON summary: rounds, elements checked, wrong, failed operations
 * with their reasons, and this process's RSS after the first round and at the end.
 * --plain-rank: rank R runs a plain libsigma session (no elastic instance: it
 * never confirms a proposal). --propose-all: every rank proposes (racing).
 * --propose-none: no rank proposes (sigmactl drain --propose does).
 * --idle: tensor T is not pushed in rounds FROM..TO-1 (a tensor idle at a switch).
 * auth = mac (sigmactl job create --auth): --rank-dir DIR gives rank R the
 * descriptor in DIR/rank-R.desc (DESCRIPTOR is then the job's), --token-file FILE
 * the proposing ranks the job's token (sigma_elastic_conf.job_token), and
 * --forge K makes rank 0 send, before each round, K forged pushes as rank 1 to
 * every node of the descriptor (the job's id, wire token and key id, a MAC under
 * a random key), printing "forged: N" at the end.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <sodium.h>

#include "sg_auth.h"
#include "sg_dp_proto.h"
#include "sg_parse.h"
#include "sigma.h"
#include "sigma_elastic.h"

#define MAX_W 8
#define MAX_T 8

static const char *desc, *urls, *cluster, *rank_dir;
static char rank_desc[MAX_W][SIGMA_JOB_DESC_MAX], job_token[SG_AUTH_KEY_BYTES * 2 + 2];
static unsigned int forge_k;
static unsigned long long forged;
static struct sigma_job job;
static unsigned int n_w, n_t, rounds, sleep_ms, confirm_ms, margin, wait_ms, ranks_wait_ms;
static unsigned int duration_s;
static FILE *rounds_log;
static volatile unsigned int stop_round = ~0u, done_rounds[64];
static long rss_first_kb, rss_last_kb;
static char fails[8][600];
static unsigned int n_fails;
static int plain_rank = -1;
static bool propose_all, propose_none;
static unsigned int idle_t = ~0u, idle_from, idle_to;
static uint64_t elems[MAX_T];
static char before[MAX_T][256][SG_NAME_MAX], after[MAX_T][256][SG_NAME_MAX];
static unsigned long long checked, wrong, failed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double round_ms[1000000 / 1000];

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	while (f != NULL && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return kb;
}

static long unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static float value(unsigned int r, unsigned int t, uint64_t i, uint32_t k)
{
	uint64_t v = (r * 7919u + t * 104729u + i * 2654435761u + k * 40503u) % 100003u;

	return (float)v / 977.0f - 37.25f;
}

/* The descriptor of rank @p r: its own (--rank-dir) or the job's. */
static const char *desc_of(unsigned int r)
{
	return rank_dir != NULL ? rank_desc[r] : desc;
}

/* First line of @p path into @p buf (@p cap). @return 0 or -1. */
static int read_line(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	int rc = f != NULL && fgets(buf, (int)cap, f) != NULL ? 0 : -1;

	if (f != NULL)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return rc;
}

/* --forge: @p k pushes as rank 1 of round @p round to every node, MACed under a random key. */
static void forge(uint32_t round, unsigned int k)
{
	static uint8_t buf[SG_DP_HDR_LEN + 64 + SG_AUTH_TRAILER_BYTES];
	float junk[16];
	struct sg_auth_signer thief;
	uint8_t tk[SG_AUTH_KEY_BYTES];
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	randombytes_buf(tk, sizeof(tk));
	sg_auth_signer_init(&thief, tk, job.conf.auth_key_id);
	for (unsigned int i = 0; i < 16; i++)
		junk[i] = 1e6f;
	for (unsigned int n = 0; n < job.conf.nnodes && fd >= 0; n++) {
		struct sockaddr_in to = {.sin_family = AF_INET,
					 .sin_port = htons(job.conf.nodes[n].port)};

		inet_pton(AF_INET, job.conf.nodes[n].addr, &to.sin_addr);
		for (unsigned int i = 0; i < k; i++) {
			struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .flags = SG_DP_F_MAC,
					      .dtype = SG_DTYPE_FP32, .job = job.conf.job, .rank = 1,
					      .token = job.conf.token, .key = sg_wire_key(0, 0),
					      .chunk = 0, .nchunks = 1, .round = round, .nelem = 16};
			int len = sg_dp_build(buf, sizeof(buf), &m, junk, sizeof(junk));

			sg_auth_sign(&thief, buf, (size_t)len);
			if (sendto(fd, buf, (size_t)len + SG_AUTH_TRAILER_BYTES, 0,
				   (struct sockaddr *)&to, sizeof(to)) > 0)
				forged++;
		}
	}
	if (fd >= 0)
		close(fd);
}

static void *rank_main(void *arg)
{
	unsigned int r = (unsigned int)(uintptr_t)arg;
	struct sigma_elastic *e = NULL;
	struct sigma_session *s = NULL;
	struct sigma_tensor *pt[MAX_T] = {NULL};
	float *in[MAX_T] = {NULL}, *out[MAX_T] = {NULL};
	char err[512];
	unsigned long long ok = 0, bad = 0, fail = 0;

	if ((int)r == plain_rank) {
		s = sigma_open_job(desc_of(r), (uint16_t)r, NULL, err, sizeof(err));
		if (s == NULL) {
			fprintf(stderr, "rank %u: %s\n", r, err);
			fail++;
			goto out;
		}
	} else {
		static struct sigma_conf base;
		struct sigma_elastic_conf c = {.etcd = {.endpoints = urls, .timeout_ms = 1000},
					       .base = &base,
					       .cluster = cluster, .descriptor = desc_of(r),
					       .job_token = job_token[0] && (r == 0 || propose_all) ?
							    job_token : NULL,
					       .rank = (uint16_t)r, .confirm_ms = confirm_ms,
					       .margin = margin, .wait_ms = wait_ms,
					       .propose = propose_all ? 1 : propose_none ? -1 : 0};

		base.ranks_wait_us = ranks_wait_ms * 1000u;
		e = sigma_elastic_open(&c, err, sizeof(err));
		if (e == NULL) {
			fprintf(stderr, "rank %u: %s\n", r, err);
			fail++;
			goto out;
		}
	}
	for (unsigned int t = 0; t < n_t; t++) {
		in[t] = malloc(elems[t] * 4);
		out[t] = malloc(elems[t] * 4);
		if (e)
			sigma_elastic_tensor(e, NULL, t, SG_DTYPE_FP32, elems[t], (int)t);
		else
			pt[t] = sigma_tensor_register(s, NULL, t, SG_DTYPE_FP32, elems[t], (int)t);
	}
	double t_start = mono_ms();

	for (unsigned int k = 0; k < rounds && k < stop_round; k++) {
		double t0 = mono_ms();

		if (r == 0 && forge_k > 0)
			forge(k, forge_k);
		for (unsigned int t = 0; t < n_t; t++) {
			int rc;

			if (t == idle_t && k >= idle_from && k < idle_to)
				continue;
			if (k == 0 && r == 0 && e)
				for (uint32_t p = 0; p < 256; p++)
					if (sigma_elastic_part_node(e, t, p, before[t][p]) != 0)
						break;
			for (uint64_t i = 0; i < elems[t]; i++)
				in[t][i] = value(r, t, i, k);
			rc = e ? sigma_elastic_push_pull_sync(e, t, in[t], out[t])
			       : sigma_push_pull_sync(pt[t], in[t], out[t]);
			if (rc != 0) {
				fprintf(stderr, "rank %u round %u tensor %u: %s\n", r, k, t,
					e ? sigma_elastic_last_error(e) : sigma_last_error(s));
				pthread_mutex_lock(&mu);
				if (n_fails < 8)
					snprintf(fails[n_fails++], sizeof(fails[0]), "rank %u round %u "
						 "tensor %u: %s", r, k, t, e ? sigma_elastic_last_error(e)
						 : sigma_last_error(s));
				pthread_mutex_unlock(&mu);
				fail++;
				goto out;
			}
			for (uint64_t i = 0; i < elems[t]; i++) {
				float ref = 0;

				for (unsigned int q = 0; q < n_w; q++)
					ref += value(q, t, i, k);
				if (memcmp(&ref, &out[t][i], 4) != 0) {
					if (bad < 5)
						fprintf(stderr, "rank %u round %u tensor %u elem %llu: %a, "
							"want %a\n", r, k, t, (unsigned long long)i,
							out[t][i], ref);
					bad++;
				} else {
					ok++;
				}
			}
		}
		if (r == 0 && k < sizeof(round_ms) / sizeof(round_ms[0]))
			round_ms[k] = mono_ms() - t0;
		done_rounds[r] = k + 1;
		if (r == 0 && rounds_log != NULL) {
			fprintf(rounds_log, "%u %ld\n", k, unix_ms());
			fflush(rounds_log);
		}
		if (r == 0 && k == 0)
			rss_first_kb = rss_kb();
		/* the others are at most one round ahead of rank 0: they all stop after k + 1 */
		if (r == 0 && duration_s && mono_ms() - t_start > duration_s * 1e3 &&
		    stop_round == ~0u)
			stop_round = k + 2;
		if (sleep_ms)
			usleep(sleep_ms * 1000u);
	}
	if (r == 0 && e)
		for (unsigned int t = 0; t < n_t; t++)
			for (uint32_t p = 0; p < 256; p++)
				if (sigma_elastic_part_node(e, t, p, after[t][p]) != 0)
					break;
out:
	if (e) {
		struct sigma_elastic_status st;

		sigma_elastic_status(e, &st);
		printf("rank %u: epoch %u, %u nodes, %u sessions, %llu proposals won, %llu lost, "
		       "%llu confirms, %llu aborts (%s), %llu switches, %llu waits\n", r, st.epoch,
		       st.nodes, st.sessions, (unsigned long long)st.proposals,
		       (unsigned long long)st.races_lost, (unsigned long long)st.confirms,
		       (unsigned long long)st.aborts, st.last_abort,
		       (unsigned long long)st.switches, (unsigned long long)st.waits);
	}
	for (unsigned int t = 0; t < n_t; t++) {
		free(in[t]);
		free(out[t]);
	}
	pthread_mutex_lock(&mu);
	checked += ok;
	wrong += bad;
	failed += fail;
	pthread_mutex_unlock(&mu);
	/* every rank done with its rounds before anyone closes (the others may still pull) */
	return e ? (void *)e : (void *)s;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_W];
	void *h[MAX_W];
	char err[512], *save = NULL;
	uint64_t v;

	if (argc < 6)
		goto usage;
	desc = argv[1];
	urls = argv[2];
	cluster = argv[3];
	if (sg_parse_u64(argv[4], 1, 1000000, &v) != 0)
		goto usage;
	rounds = (unsigned int)v;
	for (char *tok = strtok_r(argv[5], ",", &save); tok && n_t < MAX_T;
	     tok = strtok_r(NULL, ",", &save))
		if (sg_parse_u64(tok, 1, 1u << 24, &elems[n_t++]) != 0)
			goto usage;
	for (int i = 6; i < argc; i++) {
		if (strcmp(argv[i], "--propose-all") == 0) {
			propose_all = true;
			continue;
		}
		if (strcmp(argv[i], "--propose-none") == 0) {
			propose_none = true;
			continue;
		}
		if (strcmp(argv[i], "--rounds-log") == 0 && i + 1 < argc) {
			rounds_log = fopen(argv[++i], "a");
			if (rounds_log == NULL)
				goto usage;
			continue;
		}
		if (strcmp(argv[i], "--rank-dir") == 0 && i + 1 < argc) {
			rank_dir = argv[++i];
			continue;
		}
		if (strcmp(argv[i], "--token-file") == 0 && i + 1 < argc) {
			if (read_line(argv[++i], job_token, sizeof(job_token)) != 0)
				goto usage;
			continue;
		}
		if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%u:%u:%u", &idle_t, &idle_from, &idle_to) != 3)
				goto usage;
			continue;
		}
		if (i + 1 >= argc || sg_parse_u64(argv[i + 1], 0, 1000000, &v) != 0)
			goto usage;
		if (strcmp(argv[i], "--sleep-ms") == 0)
			sleep_ms = (unsigned int)v;
		else if (strcmp(argv[i], "--plain-rank") == 0)
			plain_rank = (int)v;
		else if (strcmp(argv[i], "--confirm-ms") == 0)
			confirm_ms = (unsigned int)v;
		else if (strcmp(argv[i], "--margin") == 0)
			margin = (unsigned int)v;
		else if (strcmp(argv[i], "--wait-ms") == 0)
			wait_ms = (unsigned int)v;
		else if (strcmp(argv[i], "--ranks-wait-ms") == 0)
			ranks_wait_ms = (unsigned int)v;
		else if (strcmp(argv[i], "--duration-s") == 0)
			duration_s = (unsigned int)v;
		else if (strcmp(argv[i], "--forge") == 0)
			forge_k = (unsigned int)v;
		else
			goto usage;
		i++;
	}
	if (sigma_job_parse(desc, &job, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	n_w = job.conf.nworkers;
	if (n_w > MAX_W)
		goto usage;
	for (unsigned int r = 0; rank_dir != NULL && r < n_w; r++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/rank-%u.desc", rank_dir, r);
		if (read_line(path, rank_desc[r], sizeof(rank_desc[r])) != 0) {
			fprintf(stderr, "cannot read %s\n", path);
			return 2;
		}
	}
	if (sodium_init() < 0)
		return 2;
	for (unsigned int r = 0; r < n_w; r++)
		pthread_create(&th[r], NULL, rank_main, (void *)(uintptr_t)r);
	for (unsigned int r = 0; r < n_w; r++)
		pthread_join(th[r], &h[r]);
	for (unsigned int r = 0; r < n_w; r++) {
		if ((int)r == plain_rank)
			sigma_close(h[r]);
		else
			sigma_elastic_close(h[r]);
	}
	for (unsigned int t = 0; t < n_t; t++)
		for (uint32_t p = 0; p < 256 && before[t][p][0]; p++)
			printf("place %u %u %s %s\n", t, p, before[t][p], after[t][p]);
	if (rounds > 2 && rounds <= sizeof(round_ms) / sizeof(round_ms[0])) {
		/* rank 0's rounds without the sleep, the first (keys made) left out */
		qsort(round_ms + 1, rounds - 1, sizeof(double), cmp_d);
		printf("round ms (rank 0): median %.1f, p99 %.1f, max %.1f\n",
		       round_ms[1 + (rounds - 1) / 2], round_ms[1 + (rounds - 1) * 99 / 100],
		       round_ms[rounds - 1]);
	}
	if (forge_k > 0)
		printf("forged: %llu\n", forged);
	sodium_memzero(job_token, sizeof(job_token));
	sodium_memzero(rank_desc, sizeof(rank_desc));
	printf("elements checked: %llu, wrong: %llu, failed ops: %llu\n", checked, wrong, failed);
	rss_last_kb = rss_kb();
	printf("{\"rounds\": %u, \"elements_checked\": %llu, \"wrong\": %llu, \"failed_ops\": "
	       "%llu, \"failures\": [", done_rounds[0], checked, wrong, failed);
	for (unsigned int i = 0; i < n_fails; i++) {
		printf("%s\"", i ? ", " : "");
		for (const char *c = fails[i]; *c; c++)
			if (*c == '"' || *c == '\\')
				printf("\\%c", *c);
			else if ((unsigned char)*c >= 0x20)
				putchar(*c);
		printf("\"");
	}
	printf("], \"rss_kb_after_first_round\": %ld, \"rss_kb_end\": %ld}\n", rss_first_kb,
	       rss_last_kb);
	return wrong || failed ? 1 : 0;
usage:
	fprintf(stderr, "usage: elastic_workers DESCRIPTOR ETCD CLUSTER ROUNDS ELEMS[,ELEMS...] "
		"[--sleep-ms MS] [--plain-rank R] [--propose-all | --propose-none] "
		"[--confirm-ms MS] [--margin M] [--wait-ms MS] [--ranks-wait-ms MS] "
		"[--duration-s S] [--rounds-log FILE] [--idle T:FROM:TO] [--rank-dir DIR] "
		"[--token-file FILE] [--forge K]\n");
	return 2;
}
