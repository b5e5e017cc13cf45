/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which chunks a timeout resends (client/sigma_client.c, scan_timers()). The
 * test is the node: a UDP socket it reads by hand, answering only what each
 * case needs, for one worker session of a job of two ranks (the other rank
 * exists only in the RESULTs the test makes up). It checks, datagram by
 * datagram:
 * - a chunk whose later chunks have their RESULT is resent at its timeout
 *   (evidence of a loss, as a SACK beyond a hole);
 * - while the node says nothing, a timeout resends one chunk (a probe), not
 *   every chunk outstanding, and counts the others in timeouts_held;
 * - the probe is the last chunk sent, and its RESULT makes the next timeouts
 *   resend the chunks sent before it;
 * - a probe the node answers with ERROR WAITING (it holds that push) is not
 *   probed again before the other chunks: after a failover, ranks may send a
 *   node their chunks in different orders, and each probing a chunk the node
 *   held while the other's lost push waited made both wait for good;
 * - the output is what the RESULTs carried;
 * - each node's window follows its placement weight;
 * - a node that answers the session counts as alive while one chunk waits.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"

enum { NCHUNK = 4, ELEMS = SG_DP_PAYLOAD_MTU1500 / 4, RTO_MS = 20 };

struct fake {
	int fd;
	struct sockaddr_in worker; /* where the pushes come from */
	unsigned int pushes[NCHUNK], resends[NCHUNK];
};

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Read every push queued at the fake node; count them per chunk. */
static void take(struct fake *f, uint32_t round)
{
	uint8_t buf[SG_DP_HDR_LEN + SG_MAX_CHUNK_BYTES];
	socklen_t alen = sizeof(f->worker);
	ssize_t len;

	while ((len = recvfrom(f->fd, buf, sizeof(buf), MSG_DONTWAIT,
			       (struct sockaddr *)&f->worker, &alen)) > 0) {
		struct sg_dp_msg m;

		SG_CHECK_EQ(sg_dp_parse(buf, (size_t)len, &m, NULL), 0);
		SG_CHECK(m.type == SG_DP_T_PUSH && m.chunk < NCHUNK && m.round == round,
			 "unexpected packet: type %u chunk %u round %u", m.type, m.chunk, m.round);
		f->pushes[m.chunk]++;
		f->resends[m.chunk] += (m.flags & SG_DP_F_RETRANS) != 0;
		alen = sizeof(f->worker);
	}
}

/* Poll the session and read the node's socket for @p ms. */
static void drive(struct sigma_session *s, struct fake *f, uint32_t round, uint64_t ms)
{
	uint64_t end = ms_now() + ms;

	do {
		sigma_poll(s, 500);
		take(f, round);
	} while (ms_now() < end);
}

/* Poll until @p want resends in all came (or @p ms passed). */
static void drive_until(struct sigma_session *s, struct fake *f, uint32_t round,
			unsigned int want, uint64_t ms)
{
	uint64_t end = ms_now() + ms;

	for (;;) {
		unsigned int got = 0;

		for (unsigned int c = 0; c < NCHUNK; c++)
			got += f->resends[c];
		if (got >= want || ms_now() >= end)
			return;
		sigma_poll(s, 500);
		take(f, round);
	}
}

static unsigned int total(const unsigned int *v)
{
	unsigned int n = 0;

	for (unsigned int c = 0; c < NCHUNK; c++)
		n += v[c];
	return n;
}

/* The node's RESULT of chunk @p c: element i of chunk c is 3 * (c * ELEMS + i). */
static void result(struct fake *f, uint32_t round, uint32_t c)
{
	uint8_t pkt[SG_DP_HDR_LEN + ELEMS * 4];
	float sum[ELEMS];
	struct sg_dp_msg m = {.type = SG_DP_T_RESULT, .dtype = SG_DTYPE_FP32, .job = 5,
			      .rank = 0, .token = 77, .key = 0, .chunk = c, .nchunks = NCHUNK,
			      .round = round, .nelem = ELEMS, .offset = c * ELEMS * 4};

	for (unsigned int i = 0; i < ELEMS; i++)
		sum[i] = 3.0f * (float)(c * ELEMS + i);
	SG_CHECK(sg_dp_build(pkt, sizeof(pkt), &m, sum, sizeof(sum)) > 0, "build");
	SG_CHECK(sendto(f->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&f->worker,
			sizeof(f->worker)) == (ssize_t)sizeof(pkt), "send RESULT");
}

/* The node's ERROR WAITING for chunk @p c: it holds rank 0's push and waits for rank 1. */
static void waiting(struct fake *f, uint32_t round, uint32_t c)
{
	uint8_t pkt[SG_DP_HDR_LEN + 8];
	uint64_t missing = htobe64(2);
	struct sg_dp_msg m = {.type = SG_DP_T_ERROR, .code = SG_DP_C_WAITING,
			      .dtype = SG_DTYPE_FP32, .job = 5, .rank = 0, .token = 77, .key = 0,
			      .chunk = c, .nchunks = NCHUNK, .round = round, .nelem = ELEMS,
			      .offset = c * ELEMS * 4};

	SG_CHECK(sg_dp_build(pkt, sizeof(pkt), &m, &missing, 8) > 0, "build WAITING");
	SG_CHECK(sendto(f->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&f->worker,
			sizeof(f->worker)) == (ssize_t)sizeof(pkt), "send WAITING");
}

static void check_out(const float *out)
{
	size_t bad = 0;

	for (size_t i = 0; i < (size_t)NCHUNK * ELEMS; i++)
		bad += out[i] != 3.0f * (float)i;
	SG_CHECK_EQ(bad, 0);
}

/* A UDP socket on 127.0.0.1 for a fake node; its port in @p port. */
static int fake_node(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	SG_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		 getsockname(fd, (struct sockaddr *)&a, &alen) == 0, "fake node socket");
	*port = ntohs(a.sin_port);
	return fd;
}

/* Pushes queued at @p fd, read and dropped. */
static unsigned int drain(int fd)
{
	uint8_t buf[SG_DP_HDR_LEN + SG_MAX_CHUNK_BYTES];
	unsigned int n = 0;

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		n++;
	return n;
}

/*
 * A node that answers the session while one chunk stays unanswered is alive:
 * the chunk's wait ends at ranks_wait_us (SIGMA_FAIL_RANKS_MISSING), not after
 * max_retries resends as if the node were dead. Here the node leaves chunk 3
 * of 4 without a reply and answers each of its resends with a duplicate of
 * chunk 0's RESULT. Counting the chunk's own unanswered resends failed it as
 * NODE_SILENT after 3 (a loaded machine did so to live nodes in py_torch).
 */
static void test_alive_node(void)
{
	struct fake f = {0};
	struct sigma_node node = {.name = "alive", .addr = "127.0.0.1", .kind = SG_NODE_CPU,
				  .gbps = 1};
	struct sigma_conf c = {.job = 5, .rank = 0, .nworkers = 2, .token = 77, .nodes = &node,
			       .nnodes = 1, .window = 8, .rto_us = RTO_MS * 1000,
			       .rto_max_us = RTO_MS * 1000, .max_retries = 3,
			       .ranks_wait_us = 400000};
	static float in[NCHUNK * ELEMS], out[NCHUNK * ELEMS];
	struct sigma_failure fl;
	struct sigma_session *s;
	struct sigma_tensor *t;
	unsigned int seen = 0;
	uint64_t end;

	f.fd = fake_node(&node.port);
	s = sigma_open(&c);
	SG_CHECK(s != NULL, "open: %s", strerror(errno));
	t = sigma_tensor_register(s, "t", 0, SG_DTYPE_FP32, NCHUNK * ELEMS, 0);
	SG_CHECK(t != NULL && sigma_push_pull(t, in, out, NULL, NULL) == 0, "push_pull");
	drive(s, &f, 0, 5);
	for (uint32_t k = 0; k < NCHUNK - 1; k++)
		result(&f, 0, k);
	for (end = ms_now() + 2000; sigma_test(t) == -EINPROGRESS && ms_now() < end;) {
		sigma_poll(s, 500);
		take(&f, 0);
		for (; seen < f.resends[NCHUNK - 1]; seen++)
			result(&f, 0, 0);
	}
	SG_CHECK(sigma_test(t) == -ETIMEDOUT && sigma_last_failure(s, &fl) == 0 &&
			 fl.kind == SIGMA_FAIL_RANKS_MISSING,
		 "a live node: status %d, failure kind %d, want -ETIMEDOUT and RANKS_MISSING "
		 "(%d): %s", sigma_test(t), fl.kind, SIGMA_FAIL_RANKS_MISSING,
		 sigma_last_error(s));
	SG_CHECK(f.resends[NCHUNK - 1] > c.max_retries, "chunk %u resent %u times, want more "
		 "than max_retries (%u)", NCHUNK - 1, f.resends[NCHUNK - 1], c.max_retries);
	sigma_close(s);
	close(f.fd);
}

/*
 * Each node's window follows its placement weight: with weights 3:1 and a
 * window of 8, the heavy node gets 8 chunks before any RESULT, the light one 3
 * (8 x 1/3, rounded), not 8 each. A worker's pushes to every node share its
 * link, and equal windows shared it equally, whatever each node's bytes.
 */
static void test_node_windows(void)
{
	enum { NPART = 64 };
	struct sigma_node nodes[2] = {
		{.name = "heavy", .addr = "127.0.0.1", .kind = SG_NODE_CPU, .gbps = 1},
		{.name = "light", .addr = "127.0.0.1", .kind = SG_NODE_CPU, .gbps = 1},
	};
	const double weights[2] = {0.75, 0.25};
	struct sigma_conf c = {.job = 6, .rank = 0, .nworkers = 2, .token = 78, .nodes = nodes,
			       .nnodes = 2, .weights = weights, .window = 8, .rto_us = 1000000,
			       .partition_bytes = ELEMS * 4, .max_retries = 20};
	static float in[NPART * ELEMS], out[NPART * ELEMS];
	unsigned int parts[2] = {0}, got[2] = {0};
	struct sigma_session *s;
	struct sigma_tensor *t;
	int fd[2];

	for (unsigned int i = 0; i < 2; i++)
		fd[i] = fake_node(&nodes[i].port);
	s = sigma_open(&c);
	SG_CHECK(s != NULL, "open: %s", strerror(errno));
	t = sigma_tensor_register(s, "w", 0, SG_DTYPE_FP32, NPART * ELEMS, 0);
	SG_CHECK(t != NULL, "register");
	for (uint32_t p = 0; p < NPART; p++)
		parts[sigma_tensor_part_node(t, p)]++;
	SG_CHECK(parts[0] >= 8 && parts[1] >= 8, "placement: %u and %u partitions, want 8 or "
		 "more on each node", parts[0], parts[1]);
	SG_CHECK_EQ(sigma_push_pull(t, in, out, NULL, NULL), 0);
	for (uint64_t end = ms_now() + 20; ms_now() < end;) {
		sigma_poll(s, 500);
		for (unsigned int i = 0; i < 2; i++)
			got[i] += drain(fd[i]);
	}
	SG_CHECK(got[0] == 8 && got[1] == 3, "weights 3:1, window 8: %u and %u chunks out, want "
		 "8 and 3", got[0], got[1]);
	sigma_close(s);
	for (unsigned int i = 0; i < 2; i++)
		close(fd[i]);
}

int main(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	struct fake f = {0};
	struct sigma_node node = {.name = "fake", .addr = "127.0.0.1", .kind = SG_NODE_CPU,
				  .gbps = 1};
	struct sigma_conf c = {.job = 5, .rank = 0, .nworkers = 2, .token = 77, .nodes = &node,
			       .nnodes = 1, .window = 8, .rto_us = RTO_MS * 1000,
			       .rto_max_us = 1000000, .max_retries = 20};
	static float in[NCHUNK * ELEMS], out[NCHUNK * ELEMS];
	struct sigma_session *s;
	struct sigma_tensor *t;
	struct sigma_stats st;
	unsigned int probe = NCHUNK;
	bool answered[NCHUNK] = {false};

	f.fd = socket(AF_INET, SOCK_DGRAM, 0);
	SG_CHECK(f.fd >= 0 && bind(f.fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		 getsockname(f.fd, (struct sockaddr *)&a, &alen) == 0, "fake node socket");
	node.port = ntohs(a.sin_port);
	s = sigma_open(&c);
	SG_CHECK(s != NULL, "open: %s", strerror(errno));
	t = sigma_tensor_register(s, "t", 0, SG_DTYPE_FP32, NCHUNK * ELEMS, 0);
	SG_CHECK(t != NULL, "register");

	/* 1. Chunk 0 lost: chunks 1..3 have their RESULT, so chunk 0 goes again at its timeout. */
	SG_CHECK_EQ(sigma_push_pull(t, in, out, NULL, NULL), 0);
	drive(s, &f, 0, 5);
	SG_CHECK(total(f.pushes) == NCHUNK, "round 0: %u pushes, want %u", total(f.pushes),
		 NCHUNK);
	for (uint32_t k = 1; k < NCHUNK; k++)
		result(&f, 0, k);
	drive_until(s, &f, 0, 1, 10 * RTO_MS);
	SG_CHECK(f.resends[0] == 1 && total(f.resends) == 1, "round 0: resent chunk 0 %u times "
		 "and %u in all, want chunk 0 once", f.resends[0], total(f.resends));
	result(&f, 0, 0);
	drive(s, &f, 0, 2);
	SG_CHECK_EQ(sigma_test(t), 0);
	check_out(out);

	/* 2. The node says nothing: the first timeout resends one chunk, and holds 3. */
	memset(f.pushes, 0, sizeof(f.pushes));
	memset(f.resends, 0, sizeof(f.resends));
	memset(out, 0, sizeof(out));
	SG_CHECK_EQ(sigma_push_pull(t, in, out, NULL, NULL), 0);
	drive_until(s, &f, 1, 1, 10 * RTO_MS);
	drive(s, &f, 1, RTO_MS / 2); /* the rest of that timer scan and the next: within 2 x RTO */
	sigma_get_stats(s, &st);
	SG_CHECK(total(f.resends) == 1, "round 1: the node was silent, and a timeout resent %u "
		 "chunks, want 1 (a probe)", total(f.resends));
	SG_CHECK(st.timeouts_held >= NCHUNK - 1, "round 1: %" PRIu64 " timeouts held, want %u",
		 st.timeouts_held, NCHUNK - 1);
	for (unsigned int k = 0; k < NCHUNK; k++)
		if (f.resends[k])
			probe = k;

	/* 3. The probe's RESULT is evidence for the chunks sent before it: their next timeout
	 * resends them */
	SG_CHECK(probe == NCHUNK - 1, "round 1: the probe was chunk %u, want the last sent (%u)",
		 probe, NCHUNK - 1);
	result(&f, 1, probe);
	answered[probe] = true;
	drive_until(s, &f, 1, NCHUNK, 20 * RTO_MS);
	SG_CHECK(total(f.resends) == NCHUNK, "round 1: %u resends in all, want each chunk once "
		 "(%u)", total(f.resends), NCHUNK);
	for (unsigned int k = 0; k < NCHUNK; k++)
		SG_CHECK(f.resends[k] == 1, "round 1: chunk %u resent %u times", k, f.resends[k]);
	for (unsigned int k = 0; k < NCHUNK; k++)
		if (!answered[k])
			result(&f, 1, k);
	drive(s, &f, 1, 2);
	SG_CHECK_EQ(sigma_test(t), 0);
	check_out(out);

	/* 4. Each probe answered WAITING: the next timeout probes another chunk, the last
	 * sent of those the node has not said it holds (3, 2, 1, 0), and none fails. */
	memset(f.resends, 0, sizeof(f.resends));
	memset(out, 0, sizeof(out));
	SG_CHECK_EQ(sigma_push_pull(t, in, out, NULL, NULL), 0);
	for (unsigned int i = 0; i < NCHUNK; i++) {
		unsigned int before[NCHUNK], k = NCHUNK;

		memcpy(before, f.resends, sizeof(before));
		drive_until(s, &f, 2, i + 1, 150 * RTO_MS); /* back-off: up to rto_max */
		for (unsigned int j = 0; j < NCHUNK; j++)
			if (f.resends[j] > before[j])
				k = j;
		SG_CHECK(k == NCHUNK - 1 - i, "round 2: probe %u was chunk %u, want %u", i, k,
			 NCHUNK - 1 - i);
		if (k < NCHUNK)
			waiting(&f, 2, k);
	}
	drive(s, &f, 2, 2);
	sigma_get_stats(s, &st);
	SG_CHECK(st.waits == NCHUNK && sigma_test(t) == -EINPROGRESS,
		 "round 2: %" PRIu64 " WAITING taken, want %u; status %d", st.waits, NCHUNK,
		 sigma_test(t));
	for (unsigned int k = 0; k < NCHUNK; k++)
		result(&f, 2, k);
	drive(s, &f, 2, 2);
	SG_CHECK_EQ(sigma_test(t), 0);
	check_out(out);
	sigma_close(s);
	close(f.fd);
	test_node_windows();
	test_alive_node();
	return sg_test_finish("client_rto");
}
