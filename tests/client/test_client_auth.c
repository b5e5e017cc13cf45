/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma with auth = mac (sigma_conf.auth_keys) against two kernel-UDP nodes
 * (sigma_udpd, in this process) whose job has the key (each node signs its
 * replies with a sequence of its own, which a session must take from both): 3 ranks, each with only
 * its own two keys, push_pull two tensors for 12 rounds while the node drops 5%
 * of what it receives and of what it sends (so pushes are resent and RESULTs
 * served again), and an attacker that knows the job id and wire token pushes
 * forged data as every rank before each round. Every sum must be exact (small
 * integers in fp32, computed here), the node must count the forgeries as
 * auth_bad and sum none, and each session's RESULTs must all have verified
 * (none dropped as unsigned). Then the reverse mismatch: sessions with auth
 * against a job without, which fail at once naming it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "sg_auth.h"
#include "sg_test.h"
#include "sigma.h"
#include "sigma_job_conf.h"
#include "sigma_udpd.h"

#define N 3
#define JOB 11
#define TOKEN 0x5151ull
#define NELEM 5000
#define CHUNK 1392

static uint8_t K[SG_AUTH_KEY_BYTES], keys[N][2 * SG_AUTH_KEY_BYTES];

/* The attacker: pushes of every chunk of tensor @p tid as every rank, with its own key. */
static unsigned int forge(uint16_t port, uint32_t tid, uint32_t round)
{
	static uint8_t buf[SG_DP_HDR_LEN + CHUNK + SG_AUTH_TRAILER_BYTES];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	uint32_t per = CHUNK / 4, nchunks = sg_dp_chunk_count(NELEM, SG_DTYPE_FP32, CHUNK);
	struct sg_auth_signer thief;
	uint8_t tk[SG_AUTH_KEY_BYTES];
	float junk[CHUNK / 4];
	unsigned int sent = 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	randombytes_buf(tk, sizeof(tk));
	sg_auth_signer_init(&thief, tk, sg_auth_key_id(K));
	for (uint32_t i = 0; i < per; i++)
		junk[i] = 1e6f;
	for (uint16_t r = 0; r < N; r++)
		for (uint32_t c = 0; c < nchunks; c++) {
			uint32_t n = NELEM - c * per < per ? NELEM - c * per : per;
			struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .flags = SG_DP_F_MAC,
					      .dtype = SG_DTYPE_FP32, .job = JOB, .rank = r,
					      .token = TOKEN, .key = sg_wire_key(tid, 0), .chunk = c,
					      .nchunks = nchunks, .round = round, .nelem = n,
					      .offset = c * CHUNK};
			int len = sg_dp_build(buf, sizeof(buf), &m, junk, n * 4);

			sg_auth_sign(&thief, buf, (size_t)len);
			sent += sendto(fd, buf, (size_t)len + SG_AUTH_TRAILER_BYTES, 0,
				       (struct sockaddr *)&to, sizeof(to)) > 0;
		}
	close(fd);
	return sent;
}

/* @p rounds of push_pull of tensors 0 and 1 by N sessions of @p base. @return the first error. */
static int run(struct sigma_conf base, const uint16_t *port, unsigned int rounds, bool attack,
	       unsigned int *forged, char *msg, size_t msglen)
{
	static float in[N][2][NELEM], out[N][2][NELEM];
	struct sigma_node node[2] = {{.name = "n0", .addr = "127.0.0.1", .port = port[0]},
				     {.name = "n1", .addr = "127.0.0.1", .port = port[1]}};
	struct sigma_session *s[N] = {NULL};
	struct sigma_tensor *t[N][2] = {{NULL}};
	int rc = 0;

	for (unsigned int r = 0; r < N; r++) {
		struct sigma_conf c = base;

		c.rank = (uint16_t)r;
		c.nodes = node;
		c.nnodes = 2;
		c.auth_keys = base.auth_keys != NULL ? keys[r] : NULL;
		s[r] = sigma_open(&c);
		for (uint32_t k = 0; k < 2 && s[r] != NULL; k++)
			t[r][k] = sigma_tensor_register(s[r], NULL, k, SG_DTYPE_FP32, NELEM, 0);
		if (!SG_CHECK(s[r] != NULL && t[r][0] != NULL && t[r][1] != NULL, "session %u", r))
			goto out;
	}
	for (uint32_t round = 0; round < rounds && rc == 0; round++) {
		unsigned int busy;
		bool exact = true;

		for (uint32_t k = 0; k < 2 && attack; k++)
			for (unsigned int i = 0; i < 2; i++)
				*forged += forge(port[i], k, round);
		for (unsigned int r = 0; r < N; r++)
			for (uint32_t k = 0; k < 2; k++) {
				for (uint32_t i = 0; i < NELEM; i++)
					in[r][k][i] = (float)(r * 100 + k * 10 + (i + round) % 31);
				sigma_push_pull(t[r][k], in[r][k], out[r][k], NULL, NULL);
			}
		do {
			busy = 0;
			for (unsigned int r = 0; r < N; r++) {
				sigma_poll(s[r], 200);
				for (uint32_t k = 0; k < 2; k++)
					busy += sigma_test(t[r][k]) == -EINPROGRESS;
			}
		} while (busy);
		for (unsigned int r = 0; r < N && rc == 0; r++)
			for (uint32_t k = 0; k < 2 && rc == 0; k++)
				if ((rc = sigma_test(t[r][k])) != 0)
					snprintf(msg, msglen, "%s", sigma_last_error(s[r]));
		for (unsigned int r = 0; r < N && rc == 0; r++)
			for (uint32_t k = 0; k < 2; k++)
				for (uint32_t i = 0; i < NELEM; i++)
					exact &= out[r][k][i] ==
						 (float)(300 + N * k * 10 + N * ((i + round) % 31));
		if (rc == 0)
			SG_CHECK(exact, "round %u: every sum exact", round);
	}
	for (unsigned int r = 0; r < N && rc == 0; r++) {
		struct sigma_stats st;

		sigma_get_stats(s[r], &st);
		SG_CHECK(st.rx_bad == 0, "rank %u: %llu replies refused", r,
			 (unsigned long long)st.rx_bad);
	}
out:
	for (unsigned int r = 0; r < N; r++)
		sigma_close(s[r]);
	return rc;
}

int main(void)
{
	static struct sg_dp_key jkeys[64];
	struct sigma_conf base = {.job = JOB, .token = TOKEN, .nworkers = N, .chunk_bytes = CHUNK,
				  .rto_us = 2000, .max_retries = 50};
	struct sigma_udpd_conf dc = {.drop_rx_permille = 50, .drop_tx_permille = 50};
	struct sigma_node nd[2] = {{.name = "n0", .addr = "127.0.0.1", .port = 1},
				   {.name = "n1", .addr = "127.0.0.1", .port = 2}};
	static struct sg_dp_key jkeys2[64];
	struct sg_dp_job_conf job[2];
	struct sigma_session *probe;
	struct sigma_udpd *d[2] = {NULL, NULL};
	struct sg_dp_stats st;
	char msg[SIGMA_ERR_LEN] = "";
	unsigned int forged = 0;
	uint64_t bad = 0, summed = 0;
	uint16_t port[2];
	int nk[2] = {0, 0}, rc;

	if (sodium_init() < 0)
		SG_TEST_SKIP_ALL("libsodium does not start");
	sg_auth_job_key(K);
	for (uint16_t r = 0; r < N; r++) {
		sg_auth_rank_key(K, r, SG_AUTH_RANK, keys[r]);
		sg_auth_rank_key(K, r, SG_AUTH_NODE, keys[r] + SG_AUTH_KEY_BYTES);
	}
	base.auth_key_id = sg_auth_key_id(K);
	/* the job a control plane would make for these sessions, with the key */
	base.nodes = nd;
	base.nnodes = 2;
	probe = sigma_open(&base);
	for (uint32_t k = 0; k < 2 && probe != NULL; k++)
		sigma_tensor_register(probe, NULL, k, SG_DTYPE_FP32, NELEM, 0);
	for (unsigned int i = 0; i < 2 && probe != NULL; i++)
		nk[i] = sigma_job_for_node(probe, i, &job[i], i ? jkeys2 : jkeys, 64);
	sigma_close(probe);
	if (!SG_CHECK(nk[0] > 0 && nk[1] > 0, "jobs: %d %d keys", nk[0], nk[1]))
		return sg_test_finish("client_auth");
	for (unsigned int i = 0; i < 2; i++) {
		job[i].auth_key = K;
		d[i] = sigma_udpd_create(&dc);
		if (!SG_CHECK(d[i] != NULL && sigma_udpd_add_job(d[i], &job[i]) == 0 &&
			      sigma_udpd_start(d[i]) == 0, "node %u", i))
			return sg_test_finish("client_auth");
		port[i] = sigma_udpd_port(d[i]);
	}
	base.auth_keys = keys[0]; /* run() gives each rank its own */
	rc = run(base, port, 12, true, &forged, msg, sizeof(msg));
	SG_CHECK(rc == 0, "12 rounds with auth under 5%% loss each way: %d %s", rc, msg);
	for (unsigned int i = 0; i < 2; i++) {
		sigma_udpd_stop(d[i]);
		sigma_udpd_stats(d[i], &st);
		bad += st.drops[SG_DP_DROP_AUTH_BAD];
		summed += st.rx_pushes;
		sigma_udpd_destroy(d[i]);
	}
	printf("forged %u, auth_bad %llu, pushes summed %llu\n", forged, (unsigned long long)bad,
	       (unsigned long long)summed);
	SG_CHECK(forged > 0 && bad > 0 && bad <= forged, "forgeries counted: %llu of %u",
		 (unsigned long long)bad, forged);
	SG_CHECK_EQ(summed, 12 * N * 2 * sg_dp_chunk_count(NELEM, SG_DTYPE_FP32, CHUNK));

	/* sessions with auth, jobs without: at once, naming it */
	dc.drop_rx_permille = dc.drop_tx_permille = 0;
	for (unsigned int i = 0; i < 2; i++) {
		job[i].auth_key = NULL;
		d[i] = sigma_udpd_create(&dc);
		SG_CHECK(d[i] != NULL && sigma_udpd_add_job(d[i], &job[i]) == 0 &&
			 sigma_udpd_start(d[i]) == 0, "node %u without auth", i);
		port[i] = d[i] != NULL ? sigma_udpd_port(d[i]) : 1;
	}
	rc = run(base, port, 1, false, &forged, msg, sizeof(msg));
	SG_CHECK(rc == -EPROTO && strstr(msg, "this session has auth = mac") != NULL,
		 "mismatch: %d %s", rc, msg);
	for (unsigned int i = 0; i < 2; i++)
		sigma_udpd_destroy(d[i]);
	return sg_test_finish("client_auth");
}
