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
 * Usage: job_workers DESCRIPTOR ROUNDS ELEMS[:DTYPE][,ELEMS[:DTYPE]...]
 *                    [--first-round K] [--expect-fail TEXT]
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
	uint8_t *in[MAX_W][MAX_T], *out[MAX_W][MAX_T];
	uint64_t elems[MAX_T];
	enum sg_dtype dts[MAX_T];
	unsigned int nt = 0, n, rounds;
	struct sigma_conf base = {.rto_us = 20000, .rto_max_us = 400000, .max_retries = 10};
	const char *expect = NULL;
	char err[512], *list, *save = NULL;
	uint64_t bad = 0, checked = 0;
	int failed = 0;

	if (argc < 4)
		goto usage;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--first-round") == 0 && i + 1 < argc)
			base.first_round = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--expect-fail") == 0 && i + 1 < argc)
			expect = argv[++i];
		else
			goto usage;
	}
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
		s[r] = sigma_open_job(argv[1], (uint16_t)r, &base, err, sizeof(err));
		if (s[r] == NULL) {
			fprintf(stderr, "job_workers: rank %u: %s\n", r, err);
			return 1;
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
				return 1;
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
				if (expect != NULL && strstr(sigma_last_error(s[r]), expect) == NULL) {
					printf("job_workers: expected '%s'\n", expect);
					failed = 2;
				} else if (failed == 0) {
					failed = 1;
				}
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
	for (unsigned int r = 0; r < n; r++) {
		for (unsigned int t = 0; t < nt; t++) {
			free(in[r][t]);
			free(out[r][t]);
		}
		sigma_close(s[r]);
	}
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
		"[--expect-fail TEXT]\n");
	return 2;
}
