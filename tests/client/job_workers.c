/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The N workers of a job made by the job service, in one process: each opens
 * its session from the job descriptor (sigma_open_job()), registers the
 * tensors given (ids 0..T-1 of the given sizes and dtypes: the job's tensors,
 * or, for an open job, any the workers choose after it exists), and
 * push_pulls all of them ROUNDS times, several tensors in flight at once;
 * every element of every sum is checked against the sum computed here from
 * the values each rank pushed (small integers, which every dtype sums
 * exactly). Exit 0 when all are right, 1 when one is wrong or an operation
 * failed (the message printed), 2 on usage.
 * With --expect-fail TEXT, exit 0 only when every worker's first operation
 * fails with TEXT in its message (a mismatch must be named, not timed out).
 *
 * A job with auth = mac: --rank-dir DIR opens rank r from DIR/rank-r.desc (its
 * own descriptor, as `sigmactl job create --auth --rank-dir DIR` writes them);
 * --forge R:Q opens rank R with rank Q's keys (Q's descriptor, R's number), and
 * --forge R:none with no keys: then --expect-fail TEXT is checked against rank
 * R's message, and every other rank must fail too (nothing is summed).
 *
 * Usage: job_workers DESCRIPTOR ROUNDS ELEMS[:DTYPE][,ELEMS[:DTYPE]...]
 *                    [--first-round K] [--expect-fail TEXT] [--rank-dir DIR]
 *                    [--forge R:Q|R:none]
 * DTYPE defaults to fp32.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sg_test.h"
#include "sg_test_dtype.h"
#include "sigma.h"

#define MAX_W 8
#define MAX_T 8

/* The first line of @p path into @p buf (SIGMA_JOB_DESC_MAX bytes). @return 0 or -1. */
static int read_desc(const char *path, char *buf)
{
	FILE *f = fopen(path, "r");
	int ok = f != NULL && fgets(buf, SIGMA_JOB_DESC_MAX, f) != NULL;

	if (f != NULL)
		fclose(f);
	return ok ? 0 : -1;
}

/*
 * Rank @p rank's session: from its own descriptor in @p dir, or (forged) from
 * rank @p keys_of's descriptor with @p rank's number, or with no keys (@p keys_of -1).
 */
static struct sigma_session *open_rank(const char *desc, const char *dir, unsigned int rank,
				       int forged, int keys_of, const struct sigma_conf *base,
				       char *err, size_t errlen)
{
	static char own[SIGMA_JOB_DESC_MAX], path[4096];
	static struct sigma_job j;
	struct sigma_conf c;
	struct sigma_session *s;

	if (dir != NULL) {
		snprintf(path, sizeof(path), "%s/rank-%u.desc", dir,
			 forged && keys_of >= 0 ? (unsigned int)keys_of : rank);
		if (read_desc(path, own) != 0) {
			snprintf(err, errlen, "cannot read %.400s", path);
			return NULL;
		}
		desc = own;
	}
	if (!forged)
		return sigma_open_job(desc, (uint16_t)rank, base, err, errlen);
	/* what sigma_open_job() refuses: another rank's keys, or none */
	if (sigma_job_parse(desc, &j, err, errlen) != 0)
		return NULL;
	c = *base;
	c.job = j.conf.job;
	c.rank = (uint16_t)rank;
	c.nworkers = j.conf.nworkers;
	c.token = j.conf.token;
	c.nodes = j.conf.nodes;
	c.nnodes = j.conf.nnodes;
	c.weights = j.conf.weights;
	c.partition_bytes = j.conf.partition_bytes;
	c.chunk_bytes = j.conf.chunk_bytes;
	c.auth_keys = keys_of >= 0 ? j.conf.auth_keys : NULL;
	c.auth_key_id = j.conf.auth_key_id;
	s = sigma_open(&c);
	if (s == NULL)
		snprintf(err, errlen, "sigma_open: %s", strerror(errno));
	return s;
}

/* Rank @p rank's element @p i of tensor @p t in @p round: small where the dtype is narrow. */
static int64_t value(enum sg_dtype dt, unsigned int rank, unsigned int t, uint64_t i,
		     uint32_t round)
{
	uint64_t v = rank * 7 + t * 3 + i % 101 + round;

	/* 8 workers of at most 15 sum to 120: exact in bf16 (8-bit mantissa) and int8 */
	if (sg_dtype_size(dt) <= 2)
		return (int64_t)(v % 16);
	return (int64_t)(v % 1000);
}

int main(int argc, char **argv)
{
	static struct sigma_job job;
	struct sigma_session *s[MAX_W] = {NULL};
	struct sigma_tensor *tt[MAX_W][MAX_T];
	uint8_t *in[MAX_W][MAX_T] = {{NULL}}, *out[MAX_W][MAX_T] = {{NULL}};
	uint64_t elems[MAX_T];
	enum sg_dtype dts[MAX_T];
	unsigned int nt = 0, n, rounds;
	struct sigma_conf base = {.rto_us = 20000, .rto_max_us = 400000, .max_retries = 10};
	const char *expect = NULL, *dir = NULL;
	int forge = -1, keys_of = -1;
	char err[512], *list, *save = NULL;
	uint64_t bad = 0, checked = 0;
	int failed = 0, rc = 1;

	if (argc < 4)
		goto usage;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--first-round") == 0 && i + 1 < argc)
			base.first_round = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--expect-fail") == 0 && i + 1 < argc)
			expect = argv[++i];
		else if (strcmp(argv[i], "--rank-dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--forge") == 0 && i + 1 < argc &&
			 strchr(argv[i + 1], ':') != NULL) {
			char *q = strchr(argv[++i], ':') + 1;

			forge = atoi(argv[i]);
			keys_of = strcmp(q, "none") == 0 ? -1 : atoi(q);
		} else
			goto usage;
	}
	/* a forged rank's partners give up on it soon: it never pushes a valid chunk */
	if (forge >= 0)
		base.ranks_wait_us = 1000000;
	if (sigma_job_parse(argv[1], &job, err, sizeof(err)) != 0) {
		fprintf(stderr, "job_workers: %s\n", err);
		return 2;
	}
	n = job.conf.nworkers;
	rounds = (unsigned int)atoi(argv[2]);
	list = argv[3];
	for (char *tok = strtok_r(list, ",", &save); tok != NULL && nt < MAX_T;
	     tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');

		dts[nt] = SG_DTYPE_FP32;
		if (colon != NULL) {
			*colon = '\0';
			if (sg_dtype_from_name(colon + 1, &dts[nt]) != 0)
				goto usage;
		}
		elems[nt++] = strtoull(tok, NULL, 10);
	}
	if (n > MAX_W || nt == 0 || rounds == 0) {
		fprintf(stderr, "job_workers: up to %d workers, 1..%d tensors\n", MAX_W, MAX_T);
		return 2;
	}
	for (unsigned int r = 0; r < n; r++) {
		s[r] = open_rank(argv[1], dir, r, (int)r == forge, keys_of, &base, err, sizeof(err));
		if (s[r] == NULL) {
			fprintf(stderr, "job_workers: rank %u: %s\n", r, err);
			goto out;
		}
		for (unsigned int t = 0; t < nt; t++) {
			size_t bytes = elems[t] * sg_dtype_size(dts[t]);
			char name[16];

			snprintf(name, sizeof(name), "t%u", t);
			tt[r][t] = sigma_tensor_register(s[r], name, t, dts[t], elems[t], (int)t);
			in[r][t] = malloc(bytes);
			out[r][t] = malloc(bytes);
			if (tt[r][t] == NULL || in[r][t] == NULL || out[r][t] == NULL) {
				fprintf(stderr, "job_workers: tensor %u (%s): %s\n", t,
					sg_dtype_name(dts[t]), strerror(errno));
				goto out;
			}
		}
	}
	for (uint32_t k = 0; k < rounds && !failed; k++) {
		uint32_t round = base.first_round + k;
		unsigned int busy;

		for (unsigned int r = 0; r < n; r++)
			for (unsigned int t = 0; t < nt; t++) {
				size_t esz = sg_dtype_size(dts[t]);

				for (uint64_t i = 0; i < elems[t]; i++)
					sg_test_put(dts[t], in[r][t] + i * esz,
						    value(dts[t], r, t, i, round));
				sigma_push_pull(tt[r][t], in[r][t], out[r][t], NULL, NULL);
			}
		do {
			busy = 0;
			for (unsigned int r = 0; r < n; r++) {
				sigma_poll(s[r], 200);
				for (unsigned int t = 0; t < nt; t++)
					busy += sigma_test(tt[r][t]) == -EINPROGRESS;
			}
		} while (busy);
		for (unsigned int r = 0; r < n; r++) {
			int st = 0;

			for (unsigned int t = 0; t < nt && st == 0; t++)
				st = sigma_test(tt[r][t]);
			if (st != 0) {
				printf("rank %u round %u: %s (%d): %s\n", r, round, strerror(-st), st,
				       sigma_last_error(s[r]));
				if (expect != NULL && (forge < 0 || (int)r == forge) &&
				    strstr(sigma_last_error(s[r]), expect) == NULL) {
					printf("job_workers: expected '%s'\n", expect);
					failed = 2;
				} else if (failed == 0) {
					failed = 1;
				}
			} else if (forge >= 0 && expect != NULL) {
				/* a forged rank's round must not complete for anyone */
				printf("job_workers: rank %u's round %u completed\n", r, round);
				failed = 2;
			}
		}
		for (unsigned int t = 0; t < nt && !failed; t++) {
			size_t esz = sg_dtype_size(dts[t]);

			for (uint64_t i = 0; i < elems[t]; i++) {
				int64_t want = 0;

				for (unsigned int r = 0; r < n; r++)
					want += value(dts[t], r, t, i, round);
				for (unsigned int r = 0; r < n; r++, checked++)
					bad += sg_test_get(dts[t], out[r][t] + i * esz) != want;
			}
		}
	}
	rc = 0;
out:
	/* every exit closes what it opened, so the sanitizer build finds no leak */
	for (unsigned int r = 0; r < n; r++) {
		for (unsigned int t = 0; t < nt; t++) {
			free(in[r][t]);
			free(out[r][t]);
		}
		sigma_close(s[r]);
	}
	if (rc != 0)
		return rc;
	if (expect != NULL) {
		printf("job_workers: %s\n", failed == 1 ? "failed as expected" : "did not fail as "
		       "expected");
		return failed == 1 ? 0 : 1;
	}
	printf("job_workers: %u workers, %u tensors, %u rounds from round %u: %llu elements "
	       "checked, %llu wrong\n", n, nt, rounds, base.first_round, (unsigned long long)checked,
	       (unsigned long long)bad);
	return failed || bad || checked == 0 ? 1 : 0;
usage:
	fprintf(stderr, "usage: job_workers DESCRIPTOR ROUNDS ELEMS[:DTYPE][,...] [--first-round K] "
		"[--expect-fail TEXT] [--rank-dir DIR] [--forge R:Q|R:none]\n");
	return 2;
}
