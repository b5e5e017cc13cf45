/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Local aggregation (sigma_local.h) with auth = mac: 2 machines of 2 local
 * ranks, each a forked process, against one kernel-UDP node of this process
 * holding the 2 sub-jobs, each with its own job key. Local rank j of machine
 * m pushes share j as rank m of sub-job j, so its session gets sub-job j's
 * rank-m keys (the two a rank's own descriptor would hold) and no other.
 * Before the workers start, an attacker that knows each sub-job's id and wire
 * token pushes forged data as every machine, for every round. Every element
 * must be the exact sum over the 4 ranks (small integers in fp32, computed
 * here), the node must count each forgery as auth_bad and take one push per
 * chunk per machine, and every session's RESULTs must have verified.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "client_util.h"
#include "sg_auth.h"
#include "sigma_local.h"

#define M 2
#define L 2
#define ROUNDS 4
#define NT 2
#define JOB0 3918000u
#define CHUNK 1392 /* 1424 less the trailer */

static const uint64_t nelems[NT] = {20011, 3};
static uint8_t K[L][SG_AUTH_KEY_BYTES];
static uint64_t token0;

struct report {
	int rc[M * L];
	uint64_t rx_bad[M * L];
	char err[M * L][SIGMA_ERR_LEN];
};

static float val(unsigned int r, uint64_t i, unsigned int k)
{
	return (float)((int)((i * 7 + r * 131 + k * 17) % 1001) - 500);
}

/* Process r: local rank r % L of machine r / L, with sub-job j's rank-m keys only. */
static void child(struct report *rep, const struct sigma_node *node, unsigned int r)
{
	unsigned int m = r / L, j = r % L;
	uint8_t keys[2 * SG_AUTH_KEY_BYTES];
	struct sigma_conf c = {.job = JOB0 + j, .rank = (uint16_t)m, .nworkers = M,
			       .token = token0 + j, .nodes = node, .nnodes = 1, .rto_us = 2000,
			       .chunk_bytes = CHUNK, .ranks_wait_us = 10000000,
			       .auth_keys = keys, .auth_key_id = sg_auth_key_id(K[j])};
	struct sigma_local_conf lc = {.job = JOB0, .key = token0, .machine = (uint16_t)m,
				      .local_rank = (uint16_t)j, .local_size = L,
				      .open_timeout_ms = 5000};
	struct sigma_local_tensor *t[NT];
	static float in[NT][20011], out[NT][20011];
	struct sigma_session *s;
	struct sigma_local *l;
	struct sigma_stats st;
	int rc = 0;

	sg_auth_rank_key(K[j], (uint16_t)m, SG_AUTH_RANK, keys);
	sg_auth_rank_key(K[j], (uint16_t)m, SG_AUTH_NODE, keys + SG_AUTH_KEY_BYTES);
	/* what a rank's own descriptor would not hold: the job keys */
	sodium_memzero(K, sizeof(K));
	s = sigma_open(&c);
	sodium_memzero(keys, sizeof(keys)); /* sigma_open() copied them */
	l = s != NULL ? sigma_local_open(&lc, s, rep->err[r], SIGMA_ERR_LEN) : NULL;
	if (l == NULL) {
		rep->rc[r] = -errno;
		_exit(1);
	}
	for (unsigned int q = 0; q < NT; q++) {
		t[q] = sigma_local_tensor_register(l, "t", q, SG_DTYPE_FP32, nelems[q], 0);
		if (t[q] == NULL) {
			rep->rc[r] = -errno;
			snprintf(rep->err[r], SIGMA_ERR_LEN, "%s", sigma_local_last_error(l));
			_exit(1);
		}
	}
	for (unsigned int k = 0; k < ROUNDS && rc == 0; k++)
		for (unsigned int q = 0; q < NT && rc == 0; q++) {
			uint64_t bad = 0;

			for (uint64_t i = 0; i < nelems[q]; i++)
				in[q][i] = val(r, i, k);
			rc = sigma_local_push_pull(t[q], in[q], out[q]);
			if (rc < 0) {
				rep->rc[r] = rc;
				snprintf(rep->err[r], SIGMA_ERR_LEN, "%s", sigma_local_last_error(l));
				break;
			}
			for (uint64_t i = 0; i < nelems[q]; i++) {
				float want = 0;

				for (unsigned int w = 0; w < M * L; w++)
					want += val(w, i, k);
				bad += out[q][i] != want;
			}
			SG_CHECK(bad == 0, "rank %u (machine %u local rank %u) tensor %u round %u: "
				 "%" PRIu64 " elements not the exact sum", r, m, j, q, k, bad);
		}
	sigma_get_stats(s, &st);
	rep->rx_bad[r] = st.rx_bad;
	sigma_local_close(l);
	sigma_close(s);
	_exit(rc == 0 && sg_test_failures == 0 ? 0 : 1);
}

/* Forged pushes of sub-job @p j's shares, as every machine, rounds 0..ROUNDS-1. */
static unsigned int forge(uint16_t port, unsigned int j)
{
	static uint8_t buf[SG_DP_HDR_LEN + CHUNK + SG_AUTH_TRAILER_BYTES];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sg_auth_signer thief;
	uint8_t tk[SG_AUTH_KEY_BYTES];
	float junk[CHUNK / 4];
	unsigned int sent = 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	randombytes_buf(tk, sizeof(tk));
	sg_auth_signer_init(&thief, tk, sg_auth_key_id(K[j])); /* even the job's key id */
	for (unsigned int i = 0; i < CHUNK / 4; i++)
		junk[i] = 1e6f;
	for (unsigned int q = 0; q < NT; q++) {
		uint64_t share = nelems[q] * (j + 1) / L - nelems[q] * j / L;
		uint32_t per = CHUNK / 4, nch = sg_dp_chunk_count(share, SG_DTYPE_FP32, CHUNK);

		if (share == 0)
			continue;
		for (uint32_t round = 0; round < ROUNDS; round++)
			for (uint16_t r = 0; r < M; r++)
				for (uint32_t c = 0; c < nch; c++) {
					uint32_t n = share - c * per < per ? (uint32_t)(share - c * per)
									   : per;
					struct sg_dp_msg msg = {
						.type = SG_DP_T_PUSH, .flags = SG_DP_F_MAC,
						.dtype = SG_DTYPE_FP32, .job = JOB0 + j, .rank = r,
						.token = token0 + j, .key = sg_wire_key(q, 0),
						.chunk = c, .nchunks = nch, .round = round, .nelem = n,
						.offset = c * CHUNK};
					int len = sg_dp_build(buf, sizeof(buf), &msg, junk, n * 4);

					sg_auth_sign(&thief, buf, (size_t)len);
					sent += sendto(fd, buf, (size_t)len + SG_AUTH_TRAILER_BYTES, 0,
						       (struct sockaddr *)&to, sizeof(to)) > 0;
					usleep(200); /* within the node's socket buffer */
				}
	}
	close(fd);
	return sent;
}

int main(void)
{
	struct report *rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	const struct sigma_udpd_conf dc = {.engine = {.pool_bufs = 4096}};
	struct cu_group g = {0};
	pid_t pids[M * L];
	unsigned int forged = 0;
	uint64_t bad = 0, pushes = 0, want = 0;

	if (rep == MAP_FAILED)
		return 1;
	if (access("/dev/shm", W_OK) < 0)
		SG_TEST_SKIP_ALL("/dev/shm is not writable");
	if (sodium_init() < 0)
		SG_TEST_SKIP_ALL("libsodium does not start");
	memset(rep, 0, sizeof(*rep));
	token0 = 0xa0700000ull + (uint64_t)getpid() * 8;
	if (!SG_CHECK_EQ(cu_nodes(&g, 1, &dc), 0))
		return sg_test_finish("client_local_auth");
	for (unsigned int j = 0; j < L; j++) {
		struct sg_dp_job_conf job = {.id = JOB0 + j, .nworkers = M, .token = token0 + j,
					     .dtype = SG_DTYPE_ANY, .mode = SG_MODE_DETERM,
					     .open = true, .slots = 4096, .chunk_bytes = CHUNK,
					     .auth_key = K[j]};

		sg_auth_job_key(K[j]);
		SG_CHECK_EQ(sigma_udpd_add_job(g.d[0], &job), 0);
	}
	SG_CHECK_EQ(sigma_udpd_start(g.d[0]), 0);
	for (unsigned int j = 0; j < L; j++)
		forged += forge(g.nodes[0].port, j);
	fflush(NULL);
	for (unsigned int r = 0; r < M * L; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			child(rep, g.nodes, r);
	}
	for (unsigned int r = 0; r < M * L; r++) {
		int st = 0;

		SG_CHECK(waitpid(pids[r], &st, 0) == pids[r] && WIFEXITED(st) &&
			 WEXITSTATUS(st) == 0, "process %u failed: %d %s", r, rep->rc[r],
			 rep->err[r]);
		SG_CHECK(rep->rx_bad[r] == 0, "process %u: %" PRIu64 " replies refused", r,
			 rep->rx_bad[r]);
	}
	for (unsigned int j = 0; j < L; j++) {
		struct sg_dp_job_stats js;

		SG_CHECK_EQ(sigma_udpd_job_stats(g.d[0], JOB0 + j, &js), 0);
		pushes += js.rx_pushes;
		for (unsigned int q = 0; q < NT; q++) {
			uint64_t share = nelems[q] * (j + 1) / L - nelems[q] * j / L;

			want += share ? sg_dp_chunk_count(share, SG_DTYPE_FP32, CHUNK) : 0;
		}
	}
	want *= (uint64_t)ROUNDS * M;
	sigma_udpd_stop(g.d[0]);
	{
		struct sg_dp_stats st;

		sigma_udpd_stats(g.d[0], &st);
		bad = st.drops[SG_DP_DROP_AUTH_BAD];
	}
	sigma_udpd_destroy(g.d[0]);
	printf("M=%u L=%u with auth: forged %u, auth_bad %" PRIu64 ", pushes %" PRIu64
	       " (want %" PRIu64 ")\n", M, L, forged, bad, pushes, want);
	SG_CHECK(forged > 0 && bad == forged, "every forgery counted: %" PRIu64 " of %u", bad,
		 forged);
	SG_CHECK(pushes == want, "one push per chunk per machine: %" PRIu64 ", want %" PRIu64,
		 pushes, want);
	return sg_test_finish("client_local_auth");
}
