/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The N workers of a job (open, or of tensors and recorded in etcd), in one
 * process, each with its own etcd membership watch (sg_etcd_watch_alive() as sigma_conf.membership): they
 * push_pull T tensors ROUNDS times and check every sum against one computed
 * here, bit for bit (fp32 values that do not sum exactly, added in rank order:
 * the job must be in deterministic mode; with --exact, small integers that any
 * mode sums exactly). With --kill PID@ROUND, process PID gets SIGKILL once
 * round ROUND's pushes are under way (a summation node, or etcd), and the time
 * from the kill to the end of that round and of the next one is printed.
 * Exit 0 when every sum is right and every operation succeeded, 1 otherwise
 * (the message printed), 2 on usage. With --expect-fail TEXT, exit 0 only
 * when an operation fails with TEXT in its message (and within --within MS
 * of the kill when given). A round still going after 20 s prints each rank's
 * counters once ("round K: no end after 20 s"), to tell a stuck job from a
 * starved one.
 *
 * Usage: failover_workers DESCRIPTOR ETCD_URLS CLUSTER ROUNDS ELEMS[,ELEMS...]
 *        [--kill PID@ROUND] [--exact] [--poll-ms MS] [--expect-fail TEXT]
 *        [--within MS] [--first-round K] [--static] [--wait-ms MS] [--json]
 * --static: no membership, the descriptor's nodes only (what a kill does without failover).
 * --wait-ms: sigma_conf.failover_wait_us in ms (default 10 s).
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sg_etcd.h"
#include "sg_parse.h"
#include "sigma.h"

#define MAX_W 8
#define MAX_T 8

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Rank @p r's element @p i of tensor @p t in round @p k. */
static float value(bool exact, unsigned int r, unsigned int t, uint64_t i, uint32_t k)
{
	uint64_t v = (r * 7919u + t * 104729u + i * 2654435761u + k * 40503u) % 100003u;

	if (exact)
		return (float)(v % 1000);
	return (float)v / 977.0f - 37.25f; /* sums that round differently in another order */
}

/* A round's time after which the state of each rank is printed, once. */
#define SLOW_ROUND_MS 20000.0

static void report_slow(struct sigma_session *const *s, struct sigma_tensor *tt[][MAX_T],
			unsigned int n, unsigned int nt, uint32_t k)
{
	printf("round %u: no end after %.0f s; each rank's state:\n", k, SLOW_ROUND_MS / 1e3);
	for (unsigned int r = 0; r < n; r++) {
		struct sigma_stats st;
		char busy[MAX_T * 4 + 1] = "";

		sigma_get_stats(s[r], &st);
		for (unsigned int t = 0; t < nt; t++)
			if (sigma_test(tt[r][t]) == -EINPROGRESS)
				snprintf(busy + strlen(busy), sizeof(busy) - strlen(busy), " %u", t);
		printf("  rank %u: tensors in flight:%s; %llu pushes sent, %llu resent, %llu timeouts "
		       "held, %llu replies (%llu RESULT, %llu WAITING, %llu NACK, %llu stale), %llu "
		       "recovery pushes, %llu nodes lost\n", r, busy[0] ? busy : " none",
		       (unsigned long long)st.tx_packets, (unsigned long long)st.retransmits,
		       (unsigned long long)st.timeouts_held, (unsigned long long)st.rx_packets,
		       (unsigned long long)st.rx_results, (unsigned long long)st.waits,
		       (unsigned long long)st.nacks, (unsigned long long)st.rx_stale,
		       (unsigned long long)st.recovery_pushes, (unsigned long long)st.nodes_lost);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct sigma_job job;
	struct sigma_session *s[MAX_W] = {NULL};
	struct sg_etcd_watch *w[MAX_W] = {NULL};
	struct sigma_tensor *tt[MAX_W][MAX_T];
	float *in[MAX_W][MAX_T], *out[MAX_W][MAX_T], *ref[MAX_T];
	uint64_t elems[MAX_T], bad = 0, checked = 0;
	unsigned int nt = 0, n, rounds, kill_round = 0, poll_ms = 50;
	struct sigma_conf base = {.membership = sg_etcd_watch_alive};
	struct sg_etcd_conf ec = {.timeout_ms = 1000};
	const char *expect = NULL;
	char err[512], *save = NULL;
	double t_kill = 0, t_round_done = 0, t_next_done = 0, within = 0, t_start = now_ms();
	double t_failover = 0; /* end of the first round after the workers lost the node */
	bool exact = false, json = false, failed_as_expected = false;
	int kill_pid = 0, failed = 0;

	if (argc < 6)
		goto usage;
	for (int i = 6; i < argc; i++) {
		uint64_t v = 0;

		if (strcmp(argv[i], "--kill") == 0 && i + 1 < argc &&
		    sscanf(argv[i + 1], "%d@%u", &kill_pid, &kill_round) == 2)
			i++;
		else if (strcmp(argv[i], "--static") == 0)
			base.membership = NULL; /* the node list of the descriptor, no failover */
		else if (strcmp(argv[i], "--exact") == 0)
			exact = true;
		else if (strcmp(argv[i], "--first-round") == 0 && i + 1 < argc &&
			 sg_parse_u64(argv[i + 1], 0, UINT32_MAX, &v) == 0)
			base.first_round = (uint32_t)v, i++;
		else if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--poll-ms") == 0 && i + 1 < argc &&
			 sg_parse_u64(argv[i + 1], 0, UINT_MAX, &v) == 0)
			poll_ms = (unsigned int)v, i++;
		else if (strcmp(argv[i], "--wait-ms") == 0 && i + 1 < argc &&
			 sg_parse_u64(argv[i + 1], 0, UINT32_MAX / 1000, &v) == 0)
			base.failover_wait_us = (uint32_t)v * 1000u, i++;
		else if (strcmp(argv[i], "--expect-fail") == 0 && i + 1 < argc)
			expect = argv[++i];
		else if (strcmp(argv[i], "--within") == 0 && i + 1 < argc &&
			 sg_parse_double(argv[i + 1], 0, DBL_MAX, &within) == 0)
			i++;
		else
			goto usage;
	}
	if (sigma_job_parse(argv[1], &job, err, sizeof(err)) != 0) {
		fprintf(stderr, "failover_workers: %s\n", err);
		return 2;
	}
	ec.endpoints = argv[2];
	n = job.conf.nworkers;
	{
		uint64_t v;

		if (sg_parse_u64(argv[4], 1, UINT_MAX, &v) != 0)
			goto usage;
		rounds = (unsigned int)v;
	}
	for (char *tok = strtok_r(argv[5], ",", &save); tok != NULL && nt < MAX_T;
	     tok = strtok_r(NULL, ",", &save))
		if (sg_parse_u64(tok, 1, UINT32_MAX, &elems[nt++]) != 0)
			goto usage;
	if (n > MAX_W || nt == 0)
		goto usage;
	for (unsigned int t = 0; t < nt; t++)
		ref[t] = malloc(elems[t] * sizeof(float));
	for (unsigned int r = 0; r < n; r++) {
		w[r] = sg_etcd_watch_start(&ec, argv[3], poll_ms);
		if (w[r] == NULL) {
			fprintf(stderr, "failover_workers: watch: %s\n", strerror(errno));
			return 1;
		}
		base.membership_arg = w[r];
		s[r] = sigma_open_job(argv[1], (uint16_t)r, &base, err, sizeof(err));
		if (s[r] == NULL) {
			fprintf(stderr, "failover_workers: rank %u: %s\n", r, err);
			return 1;
		}
		for (unsigned int t = 0; t < nt; t++) {
			tt[r][t] = sigma_tensor_register(s[r], NULL, t, SG_DTYPE_FP32, elems[t],
							 (int)t);
			in[r][t] = malloc(elems[t] * sizeof(float));
			out[r][t] = malloc(elems[t] * sizeof(float));
			if (tt[r][t] == NULL || in[r][t] == NULL || out[r][t] == NULL) {
				fprintf(stderr, "failover_workers: tensor %u: %s\n", t,
					strerror(errno));
				return 1;
			}
		}
	}
	for (uint32_t k = 0; k < rounds && !failed; k++) {
		unsigned int busy, polls = 0;
		double t_round;
		bool slow;

		for (unsigned int t = 0; t < nt; t++)
			for (uint64_t i = 0; i < elems[t]; i++) {
				float acc = 0;

				/* the deterministic mode's order: rank 0, then 1, ... */
				for (unsigned int r = 0; r < n; r++) {
					in[r][t][i] = value(exact, r, t, i, base.first_round + k);
					acc = r ? acc + in[r][t][i] : in[r][t][i];
				}
				ref[t][i] = acc;
			}
		for (unsigned int r = 0; r < n; r++)
			for (unsigned int t = 0; t < nt; t++) {
				int rc = sigma_push_pull(tt[r][t], in[r][t], out[r][t], NULL, NULL);

				if (rc < 0 && !failed) {
					printf("rank %u round %u: push_pull: %s: %s\n", r, k,
					       strerror(-rc), sigma_last_error(s[r]));
					failed = 1;
				}
			}
		t_round = now_ms();
		slow = false;
		do {
			busy = 0;
			for (unsigned int r = 0; r < n; r++) {
				sigma_poll(s[r], 200);
				for (unsigned int t = 0; t < nt; t++)
					busy += sigma_test(tt[r][t]) == -EINPROGRESS;
			}
			/* a round that takes this long is stuck or starved: say where it stands */
			if (!slow && now_ms() - t_round > SLOW_ROUND_MS) {
				slow = true;
				report_slow(s, tt, n, nt, k);
			}
			/* mid-round: some chunks summed, others not */
			if (kill_pid && k == kill_round && ++polls == 1 && t_kill == 0) {
				t_kill = now_ms();
				if (kill(kill_pid, SIGKILL) != 0)
					perror("failover_workers: kill");
				printf("killed %d in round %u\n", kill_pid, k);
				fflush(stdout);
			}
		} while (busy);
		if (t_kill && k == kill_round)
			t_round_done = now_ms();
		if (t_kill && k == kill_round + 1)
			t_next_done = now_ms();
		for (unsigned int r = 0; r < n && t_kill && !t_failover; r++) {
			struct sigma_stats one;

			sigma_get_stats(s[r], &one);
			if (one.nodes_lost)
				t_failover = now_ms();
		}
		for (unsigned int r = 0; r < n; r++)
			for (unsigned int t = 0; t < nt; t++) {
				int st = sigma_test(tt[r][t]);

				if (st == 0 || failed)
					continue;
				printf("rank %u round %u: %s (%d): %s\n", r, k, strerror(-st), st,
				       sigma_last_error(s[r]));
				if (expect != NULL && strstr(sigma_last_error(s[r]), expect) &&
				    (within == 0 || now_ms() - (t_kill ? t_kill : t_start) <= within)) {
					failed_as_expected = true;
					printf("failed as expected after %.0f ms\n",
					       now_ms() - (t_kill ? t_kill : t_start));
				}
				failed = 1;
			}
		if (failed)
			break;
		for (unsigned int r = 0; r < n; r++)
			for (unsigned int t = 0; t < nt; t++) {
				if (memcmp(out[r][t], ref[t], elems[t] * sizeof(float)) != 0) {
					for (uint64_t i = 0; i < elems[t]; i++)
						if (memcmp(&out[r][t][i], &ref[t][i], sizeof(float))) {
							if (bad < 5)
								printf("rank %u round %u tensor %u "
								       "[%llu]: %.9g, want %.9g\n", r,
								       k, t, (unsigned long long)i,
								       out[r][t][i], ref[t][i]);
							bad++;
						}
				}
				checked += elems[t];
			}
	}
	{
		struct sigma_stats st = {0}, one;
		struct sg_etcd_watch_stats ws = {0}, wone;

		for (unsigned int r = 0; r < n; r++) {
			sigma_get_stats(s[r], &one);
			st.nodes_lost += one.nodes_lost;
			st.keys_moved += one.keys_moved;
			st.recovery_pushes += one.recovery_pushes;
			st.retransmits += one.retransmits;
			sg_etcd_watch_stats(w[r], &wone);
			ws.polls += wone.polls;
			ws.streams += wone.streams;
			ws.events += wone.events;
			ws.failures += wone.failures;
			ws.garbage.not_json += wone.garbage.not_json;
			ws.garbage.bad_kind += wone.garbage.bad_kind;
			ws.garbage.bad_field += wone.garbage.bad_field;
		}
		if (json)
			printf("{\"kill_to_round_ms\": %.1f, \"kill_to_next_round_ms\": %.1f, "
			       "\"kill_to_failover_round_ms\": %.1f, "
			       "\"nodes_lost\": %llu, \"keys_moved\": %llu, \"recovery_pushes\": %llu}\n",
			       t_round_done - t_kill, t_next_done - t_kill,
			       t_failover ? t_failover - t_kill : -1.0, (unsigned long long)st.nodes_lost, (unsigned long long)st.keys_moved,
			       (unsigned long long)st.recovery_pushes);
		printf("%llu elements checked, %llu wrong; over %u workers: %llu nodes lost, %llu "
		       "keys moved, %llu failover pushes, %llu retransmits; watch: %llu polls, %llu "
		       "streams, %llu events, %llu failed, garbage %llu not json, %llu bad kind, %llu "
		       "bad field\n",
		       (unsigned long long)checked, (unsigned long long)bad, n,
		       (unsigned long long)st.nodes_lost, (unsigned long long)st.keys_moved,
		       (unsigned long long)st.recovery_pushes, (unsigned long long)st.retransmits,
		       (unsigned long long)ws.polls, (unsigned long long)ws.streams,
		       (unsigned long long)ws.events, (unsigned long long)ws.failures,
		       (unsigned long long)ws.garbage.not_json,
		       (unsigned long long)ws.garbage.bad_kind,
		       (unsigned long long)ws.garbage.bad_field);
		if (t_kill && t_round_done)
			printf("kill to the end of its round: %.1f ms, to the end of the next: %.1f ms, "
			       "to the end of the first round after the loss: %.1f ms\n",
			       t_round_done - t_kill, t_next_done ? t_next_done - t_kill : -1.0,
			       t_failover ? t_failover - t_kill : -1.0);
	}
	for (unsigned int r = 0; r < n; r++) {
		sigma_close(s[r]);
		sg_etcd_watch_stop(w[r]);
		for (unsigned int t = 0; t < nt; t++) {
			free(in[r][t]);
			free(out[r][t]);
		}
	}
	for (unsigned int t = 0; t < nt; t++)
		free(ref[t]);
	if (expect != NULL)
		return failed_as_expected ? 0 : 1;
	return failed || bad ? 1 : 0;
usage:
	fprintf(stderr, "usage: failover_workers DESCRIPTOR ETCD_URLS CLUSTER ROUNDS ELEMS[,ELEMS...] "
		"[--kill PID@ROUND] [--exact] [--poll-ms MS] [--expect-fail TEXT] [--within MS] "
		"[--first-round K] [--static] [--wait-ms MS] [--json]\n");
	return 2;
}
