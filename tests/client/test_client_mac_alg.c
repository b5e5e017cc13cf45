/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A node whose CPU cannot check AES-256-GMAC and workers whose CPU signs with
 * it (auth = mac; docs/protocol.md, "Authenticated datagrams", "Algorithm"),
 * end to end: the node is a forked process (a kernel-UDP sigma_udpd) whose
 * libsodium is made to say "no AES-NI" (the test links with
 * -Wl,--wrap=crypto_aead_aes256gcm_is_available), the workers are this
 * process, whose real CPU has it. Their push_pull must fail at once with
 * -EPROTO naming the fix (SIGMA_AUTH_MAC=poly1305), the node count the pushes
 * as auth_mismatch and sum none; with SIGMA_AUTH_MAC=poly1305 the same job
 * gives the exact sums. Skipped where the real CPU has no AES-NI.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sg_auth.h"
#include "sg_test.h"
#include "sigma.h"
#include "sigma_udpd.h"

#define N 2
#define JOB 13
#define TOKEN 0x6d61636cull
#define NELEM 3000
#define CHUNK 1392

int __real_crypto_aead_aes256gcm_is_available(void);
int __wrap_crypto_aead_aes256gcm_is_available(void);

static int no_aesni; /* set in the node's process only */

int __wrap_crypto_aead_aes256gcm_is_available(void)
{
	return no_aesni ? 0 : __real_crypto_aead_aes256gcm_is_available();
}

/* What the node's process reports when it ends. */
struct node_report {
	uint16_t port;
	uint64_t mismatch, pushes;
	int ok;
};

static uint8_t K[SG_AUTH_KEY_BYTES];

/* The node: serve the job until @p fd (a pipe) closes, then report. */
static void node_main(int fd, struct node_report *rep)
{
	struct sg_dp_job_conf job = {.id = JOB, .nworkers = N, .token = TOKEN,
				     .dtype = SG_DTYPE_ANY, .mode = SG_MODE_SYNC, .open = true,
				     .slots = 64, .chunk_bytes = CHUNK, .auth_key = K};
	struct sigma_udpd_conf dc = {0};
	struct sigma_udpd *d;
	struct sg_dp_stats st;
	char c;

	no_aesni = 1;
	d = sigma_udpd_create(&dc);
	if (d == NULL || sigma_udpd_add_job(d, &job) < 0 || sigma_udpd_start(d) < 0)
		_exit(1);
	rep->port = sigma_udpd_port(d);
	__atomic_store_n(&rep->ok, 1, __ATOMIC_RELEASE);
	while (read(fd, &c, 1) > 0)
		;
	sigma_udpd_stop(d);
	sigma_udpd_stats(d, &st);
	rep->mismatch = st.drops[SG_DP_DROP_AUTH_MISMATCH];
	rep->pushes = st.rx_pushes;
	sigma_udpd_destroy(d);
	_exit(0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * One round of push_pull by N sessions with their own keys against the node.
 * @return the first failure (its message in @p msg), 0 when every sum was exact.
 */
static int round_of(uint16_t port, char *msg, size_t msglen, uint8_t *alg)
{
	static float in[N][NELEM], out[N][NELEM];
	struct sigma_node node = {.name = "n0", .addr = "127.0.0.1", .port = port};
	uint8_t keys[N][2 * SG_AUTH_KEY_BYTES];
	struct sigma_session *s[N] = {NULL};
	struct sigma_tensor *t[N] = {NULL};
	struct sg_auth_signer probe;
	int rc = 0, busy;

	sg_auth_signer_init(&probe, K, 0); /* the algorithm these sessions sign with */
	*alg = probe.alg;
	sodium_memzero(&probe, sizeof(probe));
	for (uint16_t r = 0; r < N; r++) {
		struct sigma_conf c = {.job = JOB, .token = TOKEN, .nworkers = N, .rank = r,
				       .chunk_bytes = CHUNK, .nodes = &node, .nnodes = 1,
				       .rto_us = 20000, .max_retries = 8, .auth_keys = keys[r],
				       .auth_key_id = sg_auth_key_id(K)};

		sg_auth_rank_key(K, r, SG_AUTH_RANK, keys[r]);
		sg_auth_rank_key(K, r, SG_AUTH_NODE, keys[r] + SG_AUTH_KEY_BYTES);
		s[r] = sigma_open(&c);
		t[r] = s[r] ? sigma_tensor_register(s[r], "grad", 0, SG_DTYPE_FP32, NELEM, 0) : NULL;
		if (!SG_CHECK(t[r] != NULL, "session %u", r))
			goto out;
		for (uint32_t i = 0; i < NELEM; i++)
			in[r][i] = (float)(r * 1000 + i % 97);
		sigma_push_pull(t[r], in[r], out[r], NULL, NULL);
	}
	do {
		busy = 0;
		for (unsigned int r = 0; r < N; r++) {
			sigma_poll(s[r], 200);
			busy += sigma_test(t[r]) == -EINPROGRESS;
		}
	} while (busy);
	for (unsigned int r = 0; r < N && rc == 0; r++)
		if ((rc = sigma_test(t[r])) != 0)
			snprintf(msg, msglen, "%s", sigma_last_error(s[r]));
	for (unsigned int r = 0; r < N && rc == 0; r++) {
		bool exact = true;

		for (uint32_t i = 0; i < NELEM; i++)
			exact &= out[r][i] == (float)(1000 + 2 * (i % 97));
		SG_CHECK(exact, "rank %u: the exact sum", r);
	}
out:
	for (unsigned int r = 0; r < N; r++)
		sigma_close(s[r]);
	sodium_memzero(keys, sizeof(keys));
	return rc;
}

int main(void)
{
	struct node_report *rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char msg[SIGMA_ERR_LEN] = "";
	int fds[2], st = 0, rc;
	uint8_t alg;
	double t0;
	pid_t pid;

	if (rep == MAP_FAILED || pipe(fds) < 0)
		return 1;
	unsetenv("SIGMA_AUTH_MAC");
	if (sodium_init() < 0)
		SG_TEST_SKIP_ALL("libsodium does not start");
	if (!__real_crypto_aead_aes256gcm_is_available())
		SG_TEST_SKIP_ALL("this CPU has no AES-NI: its workers never sign in GMAC");
	sg_auth_job_key(K);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		node_main(fds[0], rep);
	}
	close(fds[0]);
	for (int i = 0; i < 500 && !__atomic_load_n(&rep->ok, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	if (!SG_CHECK(rep->ok, "the node started")) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return sg_test_finish("client_mac_alg");
	}

	printf("workers in AES-256-GMAC, a node without AES-NI\n");
	t0 = now_s();
	rc = round_of(rep->port, msg, sizeof(msg), &alg);
	printf("  %d in %.3f s: %s\n", rc, now_s() - t0, msg);
	SG_CHECK_EQ(alg, SG_AUTH_GMAC);
	SG_CHECK(rc == -EPROTO && now_s() - t0 < 1, "refused at once: %d", rc);
	SG_CHECK(strstr(msg, "cannot check AES-256-GMAC") != NULL &&
		 strstr(msg, "SIGMA_AUTH_MAC=poly1305") != NULL, "the fix named: %s", msg);

	printf("the same workers with SIGMA_AUTH_MAC=poly1305\n");
	setenv("SIGMA_AUTH_MAC", "poly1305", 1);
	rc = round_of(rep->port, msg, sizeof(msg), &alg);
	SG_CHECK_EQ(alg, SG_AUTH_POLY1305);
	SG_CHECK(rc == 0, "Poly1305: %d %s", rc, msg);

	close(fds[1]);
	SG_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "the node ended well");
	printf("node: auth_mismatch %llu, pushes summed %llu\n",
	       (unsigned long long)rep->mismatch, (unsigned long long)rep->pushes);
	SG_CHECK(rep->mismatch >= N, "every rank's GMAC push counted: %llu",
		 (unsigned long long)rep->mismatch);
	/* the Poly1305 round only: one push per chunk per rank */
	SG_CHECK_EQ(rep->pushes, (uint64_t)N * sg_dp_chunk_count(NELEM, SG_DTYPE_FP32, CHUNK));
	return sg_test_finish("client_mac_alg");
}
