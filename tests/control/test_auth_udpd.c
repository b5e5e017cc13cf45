/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auth = mac end to end at a real node: sigma-udpd (argv[1]) gets a job with
 * "auth": "mac" over its control socket; the test derives the job key from
 * the token job_create returned, as a job service does, and each rank's keys
 * from it (sg_auth.h). Over UDP: an attacker that knows the job id and wire
 * token pushes as rank 0 with a key of its own, rank 1 pushes as rank 0 with
 * its own key, a push without a MAC is answered ERROR MISMATCH (auth); then
 * the genuine pushes of both ranks get RESULTs that verify under each rank's
 * node key and hold the exact sum, and a byte-exact replay of a genuine push
 * is dropped. sigma-udpd's drop counters at exit say auth_bad 2, auth_replay
 * 1, auth_mismatch 1. job_create refuses an unknown auth.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "sg_auth.h"
#include "sg_ctl_client.h"
#include "sg_dp_proto.h"
#include "sg_test.h"

#define NELEM 1000

static char dir[] = "/tmp/sg_auth_udpd.XXXXXX";
static uint16_t node_port;

static int udp_socket(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void send_to_node(int fd, const void *buf, size_t len)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(node_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	SG_CHECK(sendto(fd, buf, len, 0, (struct sockaddr *)&a, sizeof(a)) == (ssize_t)len,
		 "sendto");
}

/* One datagram within @p ms into @p buf. @return its length, or -1. */
static ssize_t recv_one(int fd, uint8_t *buf, size_t cap, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (poll(&p, 1, ms) != 1)
		return -1;
	return recv(fd, buf, cap, 0);
}

/* A PUSH of rank @p rank (values v(rank) per element), signed by @p by, or unsigned. */
static size_t mk_push(uint8_t *buf, uint32_t job, uint64_t token, uint16_t rank, uint32_t chunk_bytes,
		      float base, struct sg_auth_signer *by)
{
	float v[NELEM];
	struct sg_dp_msg m = {.type = SG_DP_T_PUSH, .dtype = SG_DTYPE_FP32, .job = job,
			      .rank = rank, .token = token, .key = sg_wire_key(0, 0), .chunk = 0,
			      .nchunks = sg_dp_chunk_count(NELEM, SG_DTYPE_FP32, chunk_bytes),
			      .round = 0, .nelem = NELEM, .offset = 0,
			      .flags = by != NULL ? SG_DP_F_MAC : 0};
	int len;

	for (int i = 0; i < NELEM; i++)
		v[i] = base + (float)(i % 13);
	len = sg_dp_build(buf, SG_DP_HDR_LEN + sizeof(v), &m, v, sizeof(v));
	if (len < 0)
		return 0;
	if (by != NULL)
		sg_auth_sign(by, buf, (size_t)len);
	return (size_t)len + (by != NULL ? SG_AUTH_TRAILER_BYTES : 0);
}

static pid_t udpd_start(const char *udpd, const char *sock, const char *out)
{
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execl(udpd, udpd, "--unix", sock, "--port", "0", "--name", "n0", NULL);
	_exit(127);
}

static struct sg_ctl_client *connect_node(const char *sock)
{
	char target[320];

	snprintf(target, sizeof(target), "unix:%s", sock);
	for (int i = 0; i < 100; i++) {
		struct sg_ctl_client *c = sg_ctl_client_connect(target, NULL, 0, 2000);

		if (c != NULL)
			return c;
		usleep(50000);
	}
	return NULL;
}

static void test_node(struct sg_ctl_client *c)
{
	static uint8_t buf[4][SG_DP_HDR_LEN + 4 * NELEM + 64];
	uint8_t K[SG_AUTH_KEY_BYTES], rk[2][SG_AUTH_KEY_BYTES], nk[2][SG_AUTH_KEY_BYTES];
	uint8_t thief_key[SG_AUTH_KEY_BYTES], in[9000];
	struct sg_auth_signer sg[2], thief;
	char *res = NULL, *msg = NULL;
	json_t *j;
	const char *token_hex = NULL, *auth = NULL;
	json_int_t id = 0, chunk = 0;
	uint64_t wire = 0;
	int fd[3];
	size_t len, keep_len = 0;
	ssize_t n;

	SG_CHECK_EQ(sg_ctl_client_call(c, "job_create", "{\"workers\":2,\"auth\":\"bogus\","
				       "\"tensors\":[{\"elems\":1000}]}", &res, &msg), -EREMOTEIO);
	SG_CHECK(msg != NULL && strstr(msg, "auth must be") != NULL, "bad auth: %s", msg);
	free(msg);
	msg = NULL;
	if (!SG_CHECK(sg_ctl_client_call(c, "node_info", NULL, &res, &msg) == 0, "node_info"))
		return;
	j = json_loads(res, 0, NULL);
	node_port = (uint16_t)json_integer_value(json_object_get(j, "udp_port"));
	json_decref(j);
	free(res);
	if (!SG_CHECK(sg_ctl_client_call(c, "job_create", "{\"workers\":2,\"auth\":\"mac\","
					 "\"tensors\":[{\"elems\":1000}]}", &res, &msg) == 0,
		      "job_create: %s", msg ? msg : ""))
		return;
	j = json_loads(res, 0, NULL);
	SG_CHECK(json_unpack(j, "{s:I, s:s, s:I, s:s}", "id", &id, "token", &token_hex,
			     "chunk_bytes", &chunk, "auth", &auth) == 0, "answer: %s", res);
	SG_CHECK(auth != NULL && strcmp(auth, "mac") == 0, "auth: mac");
	SG_CHECK(chunk > 0 && chunk + SG_AUTH_TRAILER_BYTES <= SG_MAX_CHUNK_BYTES,
		 "chunk_bytes %lld leaves room for the trailer", (long long)chunk);
	if (token_hex == NULL || sg_auth_job_key_from_token(token_hex, K) != 0) {
		SG_CHECK(0, "a token: %s", res);
		json_decref(j);
		free(res);
		return;
	}
	sscanf(token_hex, "%16" SCNx64, &wire);
	for (uint16_t r = 0; r < 2; r++) {
		sg_auth_rank_key(K, r, SG_AUTH_RANK, rk[r]);
		sg_auth_rank_key(K, r, SG_AUTH_NODE, nk[r]);
		sg_auth_signer_init(&sg[r], rk[r], sg_auth_key_id(K));
	}
	randombytes_buf(thief_key, sizeof(thief_key));
	sg_auth_signer_init(&thief, thief_key, sg_auth_key_id(K));
	for (int i = 0; i < 3; i++)
		fd[i] = udp_socket();
	/* the attacker, with the wire token: forged as rank 0; no MAC at all: MISMATCH */
	len = mk_push(buf[0], (uint32_t)id, wire, 0, (uint32_t)chunk, 1e6f, &thief);
	send_to_node(fd[2], buf[0], len);
	len = mk_push(buf[0], (uint32_t)id, wire, 0, (uint32_t)chunk, 1e6f, NULL);
	send_to_node(fd[2], buf[0], len);
	n = recv_one(fd[2], in, sizeof(in), 2000);
	{
		struct sg_dp_msg m;

		SG_CHECK(n > 0 && sg_dp_parse(in, (size_t)n, &m, NULL) == 0 &&
			 m.type == SG_DP_T_ERROR && m.code == SG_DP_C_MISMATCH &&
			 ((const uint8_t *)m.payload)[0] == SG_DP_MM_AUTH,
			 "a push without a MAC: ERROR MISMATCH (auth)");
	}
	/* rank 1 as rank 0, with its own key */
	len = mk_push(buf[0], (uint32_t)id, wire, 0, (uint32_t)chunk, 2e6f, &sg[1]);
	send_to_node(fd[1], buf[0], len);
	SG_CHECK(recv_one(fd[2], in, sizeof(in), 300) < 0 && recv_one(fd[1], in, sizeof(in), 0) < 0,
		 "forged pushes get no answer");
	/* the genuine pushes */
	for (uint16_t r = 0; r < 2; r++) {
		len = mk_push(buf[1 + r], (uint32_t)id, wire, r, (uint32_t)chunk, 100.0f * (r + 1),
			      &sg[r]);
		send_to_node(fd[r], buf[1 + r], len);
		if (r == 0)
			keep_len = len;
	}
	for (uint16_t r = 0; r < 2; r++) {
		struct sg_dp_msg m;
		bool exact = true;

		n = recv_one(fd[r], in, sizeof(in), 3000);
		if (!SG_CHECK(n > 0 && sg_dp_parse(in, (size_t)n, &m, NULL) == 0 &&
			      m.type == SG_DP_T_RESULT, "rank %u: a RESULT", r))
			continue;
		SG_CHECK(m.flags & SG_DP_F_MAC, "signed");
		SG_CHECK_EQ(sg_auth_verify(nk[r], sg_auth_key_id(K), in, (size_t)n, NULL), SG_AUTH_OK);
		SG_CHECK_EQ(sg_auth_verify(nk[1 - r], sg_auth_key_id(K), in, (size_t)n, NULL),
			    SG_AUTH_BAD);
		for (uint32_t i = 0; i < m.nelem; i++) {
			float got;

			memcpy(&got, (const uint8_t *)m.payload + 4 * i, 4);
			exact &= got == 300.0f + 2.0f * (float)(i % 13);
		}
		SG_CHECK(m.nelem == NELEM && exact, "rank %u: the sum of the genuine pushes only", r);
	}
	/* a byte-exact replay of rank 0's genuine push */
	send_to_node(fd[2], buf[1], keep_len);
	SG_CHECK(recv_one(fd[2], in, sizeof(in), 300) < 0, "a replay gets no answer");
	for (int i = 0; i < 3; i++)
		close(fd[i]);
	json_decref(j);
	free(res);
}

int main(int argc, char **argv)
{
	char sock[300], out[300], text[65536] = "";
	struct sg_ctl_client *c;
	int status = 0;
	FILE *f;
	size_t n;
	pid_t pid;

	if (argc < 2)
		SG_TEST_SKIP_ALL("usage: test_auth_udpd sigma-udpd");
	if (mkdtemp(dir) == NULL || sodium_init() < 0)
		SG_TEST_SKIP_ALL("mkdtemp or libsodium");
	snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	pid = udpd_start(argv[1], sock, out);
	c = connect_node(sock);
	if (SG_CHECK(c != NULL, "sigma-udpd's control socket"))
		test_node(c);
	sg_ctl_client_close(c);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	f = fopen(out, "r");
	n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = '\0';
	if (f)
		fclose(f);
	SG_CHECK(strstr(text, "dropped 2 (auth_bad)") != NULL &&
		 strstr(text, "dropped 1 (auth_replay)") != NULL &&
		 strstr(text, "dropped 1 (auth_mismatch)") != NULL, "sigma-udpd's drops: %s", text);
	unlink(out);
	unlink(sock);
	rmdir(dir);
	return sg_test_finish("auth_udpd");
}
