/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A worker whose session disagrees with the job a node holds gets a clear
 * error at once, not "no RESULT after 10 retries": another chunk size, dtype,
 * tensor set or size (ERROR MISMATCH), a program restarted against a job that
 * ran on (ERROR STALE, with the first_round that works), and, where the node
 * cannot answer (a wrong token), a timeout that says what to check. Each case
 * runs 2 workers against a kernel-UDP node holding a job made to disagree.
 * Last, a node of another wire protocol version (ERROR VERSION, built here byte
 * by byte as docs/protocol.md says) fails the push at once, naming both versions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sg_test.h"
#include "sigma.h"
#include "sigma_job_conf.h"
#include "sigma_udpd.h"

#define N 2
#define JOB 9
#define TOKEN 0x7e57ull
#define NELEM 3000

struct outcome {
	int status[N];
	char msg[SIGMA_ERR_LEN];
	double secs;
	bool sums_ok;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * The job of tensors 0..ntensors-1 (NELEM fp32 each, libsigma's numbering) that a
 * session of @p c would give the node: what a correct control plane creates.
 */
static int job_of(struct sigma_conf c, unsigned int ntensors, struct sg_dp_job_conf *job,
		  struct sg_dp_key *keys, unsigned int cap)
{
	struct sigma_session *s = sigma_open(&c);
	int nk = -EINVAL;

	if (s == NULL)
		return -errno;
	for (unsigned int t = 0; t < ntensors; t++)
		sigma_tensor_register(s, NULL, t, SG_DTYPE_FP32, NELEM, 0);
	nk = sigma_job_for_node(s, 0, job, keys, cap);
	sigma_close(s);
	return nk;
}

/*
 * Push tensor @p tid (@p dt, @p nelem) from N sessions of @p base against a node
 * holding @p job, @p rounds times; every sum checked when all succeed.
 */
static void run(const struct sg_dp_job_conf *job, struct sigma_conf base, uint32_t tid,
		enum sg_dtype dt, uint32_t nelem, unsigned int rounds, uint16_t *port,
		struct sigma_udpd **keep, struct outcome *o)
{
	static float in[N][2 * NELEM], out[N][2 * NELEM];
	struct sigma_udpd_conf dc = {0};
	struct sigma_udpd *d = keep != NULL ? *keep : NULL;
	struct sigma_session *s[N] = {NULL};
	struct sigma_tensor *t[N] = {NULL};
	struct sigma_node node = {.name = "n0", .addr = "127.0.0.1"};
	double t0;

	memset(o, 0, sizeof(*o));
	if (d == NULL) {
		d = sigma_udpd_create(&dc);
		if (!SG_CHECK(d != NULL, "node: %s", strerror(errno)))
			return;
		SG_CHECK_EQ(sigma_udpd_add_job(d, job), 0);
		SG_CHECK_EQ(sigma_udpd_start(d), 0);
		*port = sigma_udpd_port(d);
	}
	node.port = *port;
	for (unsigned int r = 0; r < N; r++) {
		struct sigma_conf c = base;

		c.rank = (uint16_t)r;
		c.nworkers = N;
		c.nodes = &node;
		c.nnodes = 1;
		s[r] = sigma_open(&c);
		t[r] = s[r] ? sigma_tensor_register(s[r], "grad", tid, dt, nelem, 0) : NULL;
		SG_CHECK(t[r] != NULL, "session %u", r);
		if (t[r] == NULL)
			goto out;
	}
	t0 = now_s();
	o->sums_ok = true;
	for (unsigned int round = 0; round < rounds; round++) {
		unsigned int busy;

		for (unsigned int r = 0; r < N; r++) {
			for (uint32_t i = 0; i < nelem; i++)
				in[r][i] = (float)(r * 1000 + i % 97 + round);
			sigma_push_pull(t[r], in[r], out[r], NULL, NULL);
		}
		do {
			busy = 0;
			for (unsigned int r = 0; r < N; r++) {
				sigma_poll(s[r], 200);
				busy += sigma_test(t[r]) == -EINPROGRESS;
			}
		} while (busy);
		for (unsigned int r = 0; r < N; r++)
			o->status[r] = sigma_test(t[r]);
		if (o->status[0] != 0 || o->status[1] != 0) {
			o->sums_ok = false;
			break;
		}
		/* reference: 0*1000 + 1*1000 + 2 * (i % 97 + round), exact in fp32 */
		for (unsigned int r = 0; r < N; r++)
			for (uint32_t i = 0; i < nelem; i++)
				o->sums_ok &= out[r][i] == (float)(1000 + 2 * (i % 97 + round));
	}
	o->secs = now_s() - t0;
	snprintf(o->msg, sizeof(o->msg), "%s", sigma_last_error(s[0]));
	printf("  status %d, %.3f s: %s\n", o->status[0], o->secs, o->msg);
out:
	for (unsigned int r = 0; r < N; r++)
		sigma_close(s[r]);
	if (keep != NULL)
		*keep = d;
	else
		sigma_udpd_destroy(d);
}

/* A node of wire protocol version 2 (a fake): answers each push with ERROR VERSION. */
struct v2_node {
	int fd;
	volatile int stop;
	unsigned int answered;
	uint64_t token; /* ... and first one answer echoing another token, which must not count */
};

static void *v2_node_main(void *arg)
{
	struct v2_node *v = arg;
	uint8_t buf[9000], out[56];
	struct sockaddr_in from;

	while (!v->stop) {
		struct pollfd pf = {.fd = v->fd, .events = POLLIN};
		socklen_t fl = sizeof(from);
		ssize_t n;

		if (poll(&pf, 1, 50) <= 0)
			continue;
		n = recvfrom(v->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n < 48 || buf[4] != 1 || buf[5] != 1)
			continue;
		/* docs/protocol.md, "Versions": the push's 48 bytes, version 2, type ERROR,
		 * flags 0, dtype 0, code VERSION; payload: versions 2 to 2 */
		memcpy(out, buf, 48);
		out[4] = 2, out[5] = 5, out[6] = 0, out[7] = 0, out[14] = 0, out[15] = 8;
		memcpy(out + 48, "\0\0\0\2\0\0\0\2", 8);
		if (v->answered == 0) {
			out[16] ^= 0xff; /* another session's token: to be ignored */
			sendto(v->fd, out, sizeof(out), 0, (struct sockaddr *)&from, fl);
			out[16] ^= 0xff;
		}
		sendto(v->fd, out, sizeof(out), 0, (struct sockaddr *)&from, fl);
		v->answered++;
	}
	return NULL;
}

static void test_version_node(struct sigma_conf base)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct v2_node v = {.fd = socket(AF_INET, SOCK_DGRAM, 0)};
	struct sigma_node node = {.name = "v2", .addr = "127.0.0.1"};
	static float in[NELEM], out[NELEM];
	socklen_t al = sizeof(a);
	struct sigma_session *s;
	struct sigma_tensor *t;
	struct sigma_stats st;
	char want[160];
	pthread_t th;
	double t0;
	int rc;

	printf("a node of wire protocol version 2\n");
	if (!SG_CHECK(v.fd >= 0 && bind(v.fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		      getsockname(v.fd, (struct sockaddr *)&a, &al) == 0, "fake node socket"))
		return;
	SG_CHECK_EQ(pthread_create(&th, NULL, v2_node_main, &v), 0);
	node.port = ntohs(a.sin_port);
	base.nworkers = 1;
	base.nodes = &node;
	base.nnodes = 1;
	s = sigma_open(&base);
	t = s ? sigma_tensor_register(s, "grad", 0, SG_DTYPE_FP32, NELEM, 0) : NULL;
	if (SG_CHECK(t != NULL, "session")) {
		t0 = now_s();
		rc = sigma_push_pull_sync(t, in, out);
		printf("  status %d, %.3f s: %s\n", rc, now_s() - t0, sigma_last_error(s));
		SG_CHECK(rc == -EPROTONOSUPPORT && now_s() - t0 < 1, "version 2 node: %d", rc);
		snprintf(want, sizeof(want), "the node speaks wire protocol version 2, this libsigma "
			 "(release %s) speaks version 1", SG_VERSION_STRING);
		SG_CHECK(strstr(sigma_last_error(s), want) != NULL, "'%s' not in: %s", want,
			 sigma_last_error(s));
		SG_CHECK(strstr(sigma_last_error(s), "ERROR VERSION) from node v2") != NULL,
			 "the node is named: %s", sigma_last_error(s));
		sigma_get_stats(s, &st);
		SG_CHECK(st.rx_bad >= 1, "the answer of another session was not ignored");
	}
	sigma_close(s);
	v.stop = 1;
	pthread_join(th, NULL);
	close(v.fd);
}

#define HAS(o, s) SG_CHECK(strstr((o).msg, s) != NULL, "'%s' not in: %s", s, (o).msg)

int main(void)
{
	static struct sg_dp_key keys[64];
	/* retries that would take over 2 s to run out: an answer must come first */
	struct sigma_conf base = {.job = JOB, .token = TOKEN, .rto_us = 20000,
				  .rto_max_us = 400000, .max_retries = 8, .chunk_bytes = 1424};
	struct sigma_conf probe = base;
	struct sg_dp_job_conf job, job2;
	struct sigma_node nd = {.name = "n0", .addr = "127.0.0.1", .port = 1};
	struct sigma_udpd *d = NULL;
	struct outcome o;
	uint16_t port = 0;
	int nk;

	/* no session: zeros, not a crash (sigma.h) */
	struct sigma_stats st;

	memset(&st, 0xa5, sizeof(st));
	sigma_get_stats(NULL, &st);
	SG_CHECK(st.ops_failed == 0 && st.rx_dropped == 0, "stats of no session");
	sigma_get_stats(NULL, NULL);

	probe.nworkers = N;
	probe.nodes = &nd;
	probe.nnodes = 1;
	nk = job_of(probe, 1, &job, keys, 64);
	if (!SG_CHECK(nk > 0, "job: %d", nk))
		return sg_test_finish("client_errors");

	printf("the job as created: sums right\n");
	run(&job, base, 0, SG_DTYPE_FP32, NELEM, 2, &port, NULL, &o);
	SG_CHECK(o.status[0] == 0 && o.status[1] == 0 && o.sums_ok, "good job: %d", o.status[0]);

	printf("another chunk size\n");
	base.chunk_bytes = 8920;
	run(&job, base, 0, SG_DTYPE_FP32, NELEM, 1, &port, NULL, &o);
	base.chunk_bytes = 1424;
	SG_CHECK(o.status[0] == -EPROTO && o.status[1] == -EPROTO && o.secs < 1, "chunk");
	HAS(o, "chunk_bytes 1424, this session 8920");

	printf("another dtype\n");
	run(&job, base, 0, SG_DTYPE_INT32, NELEM, 1, &port, NULL, &o);
	SG_CHECK(o.status[0] == -EPROTO && o.secs < 1, "dtype");
	HAS(o, "the node's job sums fp32, this tensor is int32");
	/* a narrower type also changes the chunk count: the dtype is still named */
	run(&job, base, 0, SG_DTYPE_FP16, NELEM, 1, &port, NULL, &o);
	SG_CHECK(o.status[0] == -EPROTO && o.secs < 1, "dtype fp16");
	HAS(o, "the node's job sums fp32, this tensor is fp16");

	printf("a tensor the job does not have\n");
	run(&job, base, 1, SG_DTYPE_FP32, NELEM, 1, &port, NULL, &o);
	SG_CHECK(o.status[0] == -EPROTO && o.secs < 1, "key");
	HAS(o, "has no such key");

	printf("another tensor size\n");
	run(&job, base, 0, SG_DTYPE_FP32, NELEM + 700, 1, &port, NULL, &o);
	SG_CHECK(o.status[0] == -EPROTO && o.secs < 1, "size");
	HAS(o, "element count or partition_bytes");

	printf("auth = mac at the node, none at the workers\n");
	{
		static const uint8_t key[32] = {7};

		job2 = job;
		job2.auth_key = key;
		run(&job2, base, 0, SG_DTYPE_FP32, NELEM, 1, &port, NULL, &o);
		SG_CHECK(o.status[0] == -EPROTO && o.status[1] == -EPROTO && o.secs < 1,
			 "auth: %d %d in %.3f s", o.status[0], o.status[1], o.secs);
		HAS(o, "the node's job has auth = mac");
	}

	printf("a wrong token: the node cannot answer\n");
	job2 = job;
	job2.token = TOKEN + 1;
	base.rto_us = 2000;
	base.max_retries = 3;
	run(&job2, base, 0, SG_DTYPE_FP32, NELEM, 1, &port, NULL, &o);
	SG_CHECK(o.status[0] == -ETIMEDOUT, "token: %d", o.status[0]);
	HAS(o, "no reply of this job ever came from that node");
	base.rto_us = 20000;
	base.max_retries = 8;

	printf("a program restarted against a job that ran 3 rounds\n");
	run(&job, base, 0, SG_DTYPE_FP32, NELEM, 3, &port, &d, &o);
	SG_CHECK(o.status[0] == 0 && o.sums_ok, "3 rounds");
	run(&job, base, 0, SG_DTYPE_FP32, NELEM, 1, &port, &d, &o);
	SG_CHECK(o.status[0] == -ESTALE && o.status[1] == -ESTALE && o.secs < 1, "restart: %d",
		 o.status[0]);
	HAS(o, "open the session with first_round = 3");
	HAS(o, "chunk is at round 2 on the node (finished)");
	/* as told: the job's next round */
	base.first_round = 3;
	run(&job, base, 0, SG_DTYPE_FP32, NELEM, 2, &port, &d, &o);
	SG_CHECK(o.status[0] == 0 && o.status[1] == 0 && o.sums_ok, "first_round 3: %d",
		 o.status[0]);
	sigma_udpd_destroy(d);

	/* an open job: no keys until the workers push; tensors registered after it exists */
	printf("an open job: a tensor it never heard of is summed\n");
	{
		struct sg_dp_job_conf oj = {.id = JOB, .nworkers = N, .token = TOKEN,
					    .dtype = SG_DTYPE_FP32, .chunk_bytes = 1424,
					    .open = true, .slots = 9};

		base.first_round = 0;
		run(&oj, base, 7, SG_DTYPE_FP32, NELEM, 2, &port, NULL, &o);
		SG_CHECK(o.status[0] == 0 && o.status[1] == 0 && o.sums_ok, "open job: %d",
			 o.status[0]);
		/* 3000 fp32 in 1424-byte chunks: 9 slots; 8 cannot hold the key */
		printf("an open job without room for a key\n");
		oj.slots = 8;
		run(&oj, base, 7, SG_DTYPE_FP32, NELEM, 1, &port, NULL, &o);
		SG_CHECK(o.status[0] == -ENOSPC && o.status[1] == -ENOSPC && o.secs < 1,
			 "full: %d %d", o.status[0], o.status[1]);
		HAS(o, "ERROR FULL) from node n0 (127.0.0.1:");
		HAS(o, "job 9 has no room for this key on that node");
		HAS(o, "take 0 of the 8 chunk slots one reducer there may give the job, and this "
		    "key needs 9:");
		HAS(o, "sigmactl job create --open --slots S");
		/* the session cuts larger partitions than the job's */
		printf("an open job of smaller partitions than the session's\n");
		oj.slots = 64;
		oj.partition_bytes = 4096;
		base.partition_bytes = 8192;
		run(&oj, base, 7, SG_DTYPE_FP32, NELEM, 1, &port, NULL, &o);
		SG_CHECK(o.status[0] == -EPROTO && o.secs < 1, "partition: %d", o.status[0]);
		HAS(o, "larger than the node's job's partition_bytes allows");
		HAS(o, "this session uses 8192");
	}
	base.partition_bytes = 0;
	test_version_node(base);
	return sg_test_finish("client_errors");
}
