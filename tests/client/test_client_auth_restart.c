/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank's program started again against a job with auth = mac (docs/protocol.md,
 * "Authenticated datagrams": the node keeps one replay window per rank). Rank 0
 * of a 2-rank job runs as 8 processes one after the other, each pushing one
 * round (first_round = its number) while rank 1, in this process, runs on: each
 * new process's pushes must be taken (none dropped as auth_replay) and every sum
 * be exact. Before libsigma started its sequence at the wall clock, a process
 * whose random start fell below the one before it was locked out half the time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "sg_auth.h"
#include "sg_test.h"
#include "sigma.h"
#include "sigma_udpd.h"

#define N 2
#define JOB 17
#define TOKEN 0x72657374ull
#define NELEM 5000
#define CHUNK 1392
#define RUNS 8

static uint8_t K[SG_AUTH_KEY_BYTES];

static float value(unsigned int r, uint32_t i, uint32_t k)
{
	return (float)(r * 1000 + k * 10 + i % 7);
}

/* Rank @p r's session from round @p first on, with only its own keys. */
static struct sigma_session *open_rank(uint16_t port, uint16_t r, uint32_t first,
				       struct sigma_tensor **t)
{
	struct sigma_node node = {.name = "n0", .addr = "127.0.0.1", .port = port};
	uint8_t keys[2 * SG_AUTH_KEY_BYTES];
	struct sigma_conf c = {.job = JOB, .token = TOKEN, .nworkers = N, .rank = r,
			       .chunk_bytes = CHUNK, .nodes = &node, .nnodes = 1,
			       .rto_us = 20000, .max_retries = 20, .first_round = first,
			       .auth_keys = keys, .auth_key_id = sg_auth_key_id(K)};
	struct sigma_session *s;

	sg_auth_rank_key(K, r, SG_AUTH_RANK, keys);
	sg_auth_rank_key(K, r, SG_AUTH_NODE, keys + SG_AUTH_KEY_BYTES);
	s = sigma_open(&c);
	sodium_memzero(keys, sizeof(keys));
	*t = s ? sigma_tensor_register(s, "grad", 0, SG_DTYPE_FP32, NELEM, 0) : NULL;
	return s;
}

static bool exact(const float *out, uint32_t k)
{
	for (uint32_t i = 0; i < NELEM; i++)
		if (out[i] != value(0, i, k) + value(1, i, k))
			return false;
	return true;
}

/* The restarted program: rank 0's round @p argv[1] against port @p argv[2], job key argv[3]. */
static int rank0_main(char **argv)
{
	static float in[NELEM], out[NELEM];
	uint32_t k = (uint32_t)atoi(argv[1]);
	struct sigma_tensor *t0;
	struct sigma_session *s0;
	int rc;

	if (sodium_init() < 0 || sodium_hex2bin(K, sizeof(K), argv[3], strlen(argv[3]), NULL,
						NULL, NULL) != 0)
		return 2;
	s0 = open_rank((uint16_t)atoi(argv[2]), 0, k, &t0);
	for (uint32_t i = 0; i < NELEM; i++)
		in[i] = value(0, i, k);
	rc = t0 ? sigma_push_pull_sync(t0, in, out) : -EINVAL;
	if (rc != 0)
		fprintf(stderr, "rank 0, process %u: %d %s\n", k, rc,
			s0 ? sigma_last_error(s0) : "no session");
	sigma_close(s0);
	return rc == 0 && exact(out, k) ? 0 : 1;
}

int main(int argc, char **argv)
{
	static float in[NELEM], out[NELEM];
	struct sg_dp_job_conf job = {.id = JOB, .nworkers = N, .token = TOKEN,
				     .dtype = SG_DTYPE_ANY, .mode = SG_MODE_SYNC, .open = true,
				     .slots = 64, .chunk_bytes = CHUNK, .auth_key = K};
	struct sigma_udpd_conf dc = {0};
	struct sigma_udpd *d;
	struct sigma_session *s1;
	struct sigma_tensor *t1;
	struct sg_dp_stats st;
	uint16_t port;

	if (argc == 4)
		return rank0_main(argv);
	if (sodium_init() < 0)
		SG_TEST_SKIP_ALL("libsodium does not start");
	sg_auth_job_key(K);
	d = sigma_udpd_create(&dc);
	if (!SG_CHECK(d != NULL && sigma_udpd_add_job(d, &job) == 0 && sigma_udpd_start(d) == 0,
		      "node"))
		return sg_test_finish("client_auth_restart");
	port = sigma_udpd_port(d);
	s1 = open_rank(port, 1, 0, &t1);
	if (!SG_CHECK(t1 != NULL, "rank 1"))
		return sg_test_finish("client_auth_restart");
	for (uint32_t k = 0; k < RUNS; k++) {
		pid_t pid;
		int status = 0, rc;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			/* a new program, as a restarted worker is: nothing of this process kept */
			char ks[16], ps[16], hex[2 * SG_AUTH_KEY_BYTES + 1];

			snprintf(ks, sizeof(ks), "%u", k);
			snprintf(ps, sizeof(ps), "%u", port);
			sodium_bin2hex(hex, sizeof(hex), K, sizeof(K));
			execl("/proc/self/exe", "test_client_auth_restart", ks, ps, hex, (char *)NULL);
			_exit(127);
		}
		for (uint32_t i = 0; i < NELEM; i++)
			in[i] = value(1, i, k);
		rc = sigma_push_pull_sync(t1, in, out);
		SG_CHECK(rc == 0 && exact(out, k), "round %u (rank 0's process %u): %d %s", k, k,
			 rc, sigma_last_error(s1));
		SG_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
			 WEXITSTATUS(status) == 0, "rank 0's process %u", k);
	}
	sigma_close(s1);
	sigma_udpd_stop(d);
	sigma_udpd_stats(d, &st);
	printf("%u processes of rank 0: auth_replay %llu, auth_bad %llu\n", RUNS,
	       (unsigned long long)st.drops[SG_DP_DROP_AUTH_REPLAY],
	       (unsigned long long)st.drops[SG_DP_DROP_AUTH_BAD]);
	SG_CHECK_EQ(st.drops[SG_DP_DROP_AUTH_REPLAY], 0);
	SG_CHECK_EQ(st.drops[SG_DP_DROP_AUTH_BAD], 0);
	sigma_udpd_destroy(d);
	return sg_test_finish("client_auth_restart");
}
