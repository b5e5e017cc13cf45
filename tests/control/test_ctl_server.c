/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control server against a mock agent, on loopback and a private Unix
 * socket: round trips over both sockets, HMAC authentication (right, wrong,
 * replayed, absent), garbage (malformed JSON, oversized frames, unknown
 * methods, slow-loris), /metrics, and a summing thread that must keep going
 * and stay correct throughout.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_common.h>
#include <sodium.h>

#include "ctl_mock.h"
#include "sg_ctl_place.h"
#include "sg_ctl_server.h"
#include "sg_sum.h"
#include "sg_test.h"

static char sock_path[108], tmpdir[64];
static struct sg_ctl_server *srv;
static struct mock_agent mock;
static uint16_t tcp_port, http_port;
static int determ_id; /* a deterministic job the mock holds (test_unix_roundtrips) */
static long long open_any_id; /* an open job of dtype any it holds (test_job_create_open) */

/* ---- a "dataplane" that must keep summing while the control plane is abused ---- */

static volatile int dp_stop;
static unsigned long dp_rounds, dp_errors;

static void *dp_main(void *arg)
{
	enum { N = 4, LEN = 4096 };
	static int32_t in[N][LEN], acc[LEN];
	unsigned int r, w, i;

	(void)arg;
	for (r = 0; !__atomic_load_n(&dp_stop, __ATOMIC_RELAXED); r++) {
		for (w = 0; w < N; w++)
			for (i = 0; i < LEN; i++)
				in[w][i] = (int32_t)(r * 7 + w * 3 + i);
		memcpy(acc, in[0], sizeof(acc));
		for (w = 1; w < N; w++)
			sg_sum_add(SG_DTYPE_INT32, acc, in[w], LEN);
		/* Reference: the closed form of the sum. */
		for (i = 0; i < LEN; i++)
			if (acc[i] != (int32_t)(N * (r * 7 + i) + 3 * (0 + 1 + 2 + 3)))
				__atomic_fetch_add(&dp_errors, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&dp_rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* ---- raw socket helpers ---- */

static int raw_unix(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sa.sun_path, sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int raw_tcp(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void raw_send(int fd, const char *s)
{
	size_t n = strlen(s);

	SG_CHECK(send(fd, s, n, MSG_NOSIGNAL) == (ssize_t)n, "send failed");
}

/* One line (malloc'd, without '\n'), or NULL on EOF/timeout. Byte-wise: tests only. */
static char *raw_line(int fd, int timeout_ms)
{
	char buf[65536];
	size_t n = 0;

	while (n < sizeof(buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (poll(&p, 1, timeout_ms) != 1 || recv(fd, buf + n, 1, 0) != 1)
			return NULL;
		if (buf[n] == '\n') {
			buf[n] = '\0';
			return strdup(buf);
		}
		n++;
	}
	return NULL;
}

/* True if the server closes @p fd within @p ms (pending lines are skipped). */
static bool raw_closed_within(int fd, int ms)
{
	char b[4096];
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left;
		ssize_t r;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = ms - (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, left) != 1)
			return false;
		r = recv(fd, b, sizeof(b), 0);
		if (r <= 0)
			return true;
	}
}

/* The "error.code" of a reply line, 0 if it has none. */
static long err_code(const char *line)
{
	json_t *j = line ? json_loads(line, 0, NULL) : NULL;
	long code = 0;

	if (j != NULL && json_object_get(j, "error") != NULL)
		code = (long)json_integer_value(json_object_get(json_object_get(j, "error"), "code"));
	json_decref(j);
	return code;
}

/* Send one frame and check the error code of the answer (0: a result). */
static void send_expect(int fd, const char *frame, long code)
{
	char *line;

	raw_send(fd, frame);
	line = raw_line(fd, 2000);
	SG_CHECK(line != NULL && err_code(line) == code, "%.60s -> %s", frame, line ? line : "none");
	free(line);
}

static struct sg_ctl_server_stats stats(void)
{
	struct sg_ctl_server_stats st;

	sg_ctl_server_get_stats(srv, &st);
	return st;
}

/* Call over a client; returns the parsed result (or NULL and *code set). */
static json_t *call(struct sg_ctl_client *c, const char *method, const char *params, long *code)
{
	char *res = NULL, *emsg = NULL;
	json_t *j = NULL;
	int rc = sg_ctl_client_call(c, method, params, &res, &emsg);

	*code = 0;
	if (rc == 0)
		j = json_loads(res, JSON_DECODE_ANY, NULL);
	else if (rc == -EREMOTEIO && emsg != NULL)
		*code = strtol(strrchr(emsg, '(') + 1, NULL, 10);
	else
		*code = rc;
	free(res);
	free(emsg);
	return j;
}

/* ---- tests ---- */

/* A call that must fail with @p code and @p needle in its message. */
static void call_refused(struct sg_ctl_client *c, const char *method, const char *params,
			 long code, const char *needle)
{
	char *res = NULL, *emsg = NULL;
	int rc = sg_ctl_client_call(c, method, params, &res, &emsg);
	char want[16];

	snprintf(want, sizeof(want), "(%ld)", code);
	SG_CHECK(rc == -EREMOTEIO && emsg && strstr(emsg, needle) && strstr(emsg, want),
		 "%s %s: %d %s (want '%s' %s)", method, params ? params : "", rc,
		 emsg ? emsg : res, needle, want);
	free(res);
	free(emsg);
}

/* A job_create answer's integer member. */
static long long jint(json_t *r, const char *k)
{
	return (long long)json_integer_value(json_object_get(r, k));
}

/*
 * job_create as the job service calls it: a given id, token and chunk size, and
 * the job's node list, of which this node keeps the keys placed on it, numbered
 * as libsigma numbers them.
 */
static void test_job_create_spanning(struct sg_ctl_client *c)
{
	static const char tok[] = "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff";
	struct sg_ctl_place_node pn[3] = {{"mock-node", SG_NODE_CPU, 100, true},
					  {"other-a", SG_NODE_CPU, 100, true},
					  {"other-b", SG_NODE_GPU, 40, true}};
	double w[3];
	char params[1024];
	uint32_t want = 0, k = 0;
	bool same = true;
	json_t *r;
	long code;

	r = call(c, "node_info", NULL, &code);
	SG_CHECK(r && jint(r, "max_chunk_bytes") == MOCK_MAX_CHUNK && jint(r, "udp_port") == 9300 &&
		 !strcmp(json_string_value(json_object_get(r, "addr")), "10.0.0.9") &&
		 !strcmp(json_string_value(json_object_get(r, "kind")), "cpu"), "node_info for jobs");
	json_decref(r);
	/* one node: every partition, keys tensor << 16 | part */
	r = call(c, "job_create", "{\"workers\":2,\"id\":700,\"chunk_bytes\":1424,\"token\":\""
		 "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff\",\"partition_bytes\":"
		 "4000,\"tensors\":[{\"elems\":2500},{\"elems\":1000}]}", &code);
	SG_CHECK(r && jint(r, "id") == 700 && jint(r, "chunk_bytes") == 1424 && jint(r, "keys") == 4 &&
		 jint(r, "nodes") == 1 && jint(r, "partition_bytes") == 4000, "id, chunk: %ld", code);
	json_decref(r);
	SG_CHECK(strncmp(mock.last_token, "00112233445566778899aabbccddeeff", 32) == 0,
		 "the given token (lower case): %s", mock.last_token);
	SG_CHECK(mock.last_n_keys == 4 && mock.last_keys[0].id == 0 && mock.last_keys[2].id == 2 &&
		 mock.last_keys[2].nelem == 500 && mock.last_keys[3].id == 0x10000 &&
		 mock.last_keys[3].nelem == 1000, "keys numbered tensor<<16|part");
	/* the same id again: refused by the agent */
	r = call(c, "job_create", "{\"workers\":2,\"id\":700,\"tensors\":[{\"elems\":1}]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_REFUSED, "id in use: %ld", code);
	/* bad values of the new members */
	call_refused(c, "job_create", "{\"workers\":2,\"token\":\"abc\",\"tensors\":[{\"elems\":1}]}",
		     SG_CTL_ERR_INVALID_PARAMS, "64 hex digits");
	call_refused(c, "job_create", "{\"workers\":2,\"chunk_bytes\":1001,\"tensors\":[{\"elems\":1}]}",
		     SG_CTL_ERR_INVALID_PARAMS, "multiple of 8");
	call_refused(c, "job_create", "{\"workers\":2,\"chunk_bytes\":9000,\"tensors\":[{\"elems\":1}]}",
		     SG_CTL_ERR_INVALID_PARAMS, "chunk_bytes");
	call_refused(c, "job_create", "{\"workers\":2,\"id\":-1,\"tensors\":[{\"elems\":1}]}",
		     SG_CTL_ERR_INVALID_PARAMS, "id");
	call_refused(c, "job_create", "{\"workers\":2,\"partition_bytes\":4,\"tensors\":[{\"elems\":"
		     "300000}]}", SG_CTL_ERR_INVALID_PARAMS, "at most 65536");
	call_refused(c, "job_create", "{\"workers\":2,\"tensors\":[{\"elems\":1}],\"nodes\":"
		     "[{\"name\":\"x\"},{\"name\":\"x\"}]}", SG_CTL_ERR_INVALID_PARAMS, "twice");
	call_refused(c, "job_create", "{\"workers\":2,\"tensors\":[{\"elems\":1}],\"nodes\":"
		     "[{\"name\":\"mock-node\",\"weight\":1},{\"name\":\"y\"}]}",
		     SG_CTL_ERR_INVALID_PARAMS, "every node a weight");
	call_refused(c, "job_create", "{\"workers\":2,\"tensors\":[{\"elems\":1}],\"nodes\":"
		     "[{\"name\":\"mock-node\",\"kind\":\"tpu\"}]}", SG_CTL_ERR_INVALID_PARAMS, "kind");
	call_refused(c, "job_create", "{\"workers\":2,\"tensors\":[{\"elems\":1}],\"nodes\":"
		     "[{\"name\":\"a\"},{\"name\":\"b\"}]}", SG_CTL_ERR_REFUSED,
		     "not in the job's node list");
	call_refused(c, "job_create", "{\"workers\":2,\"tensors\":[{\"elems\":1}],\"nodes\":[]}",
		     SG_CTL_ERR_INVALID_PARAMS, "nodes");
	/* three nodes: this one keeps exactly the keys placement gives it */
	snprintf(params, sizeof(params), "{\"workers\":3,\"id\":701,\"token\":\"%s\","
		 "\"partition_bytes\":400,\"tensors\":[{\"elems\":10000},{\"elems\":20000},"
		 "{\"elems\":99}],\"nodes\":[{\"name\":\"other-b\",\"kind\":\"gpu\",\"gbps\":40},"
		 "{\"name\":\"mock-node\",\"gbps\":100},{\"name\":\"other-a\",\"gbps\":100}]}", tok);
	r = call(c, "job_create", params, &code);
	SG_CHECK(r != NULL && jint(r, "nodes") == 3, "spanning job: %ld", code);
	json_decref(r);
	SG_CHECK_EQ(sg_ctl_place_weights(pn, 3, w), 0);
	for (uint32_t t = 0; t < 3; t++) {
		uint32_t elems = t == 0 ? 10000 : t == 1 ? 20000 : 99;

		for (uint32_t p = 0; p * 100 < elems; p++) {
			if (sg_ctl_place_key(pn, w, 3, sg_ctl_partition_key(t, p)) != 0)
				continue;
			want++;
			same &= k < mock.last_n_keys && mock.last_keys[k].id == sg_wire_key(t, p) &&
				mock.last_keys[k].nelem == (elems - p * 100 < 100 ? elems - p * 100 : 100);
			k++;
		}
	}
	SG_CHECK(want > 50 && want < 251 && mock.last_n_keys == want && same,
		 "placed keys: %u here, %u expected, same %d", mock.last_n_keys, want, same);
	/* explicit weights win: all of them on this node */
	snprintf(params, sizeof(params), "{\"workers\":3,\"id\":702,\"tensors\":[{\"elems\":1000}],"
		 "\"partition_bytes\":40,\"nodes\":[{\"name\":\"other-a\",\"weight\":0},"
		 "{\"name\":\"mock-node\",\"weight\":0.25}]}");
	r = call(c, "job_create", params, &code);
	SG_CHECK(r != NULL && jint(r, "keys") == 100 && mock.last_n_keys == 100, "weights: %ld",
		 code);
	json_decref(r);
	/* ... or none: a node may hold no key of a job */
	snprintf(params, sizeof(params), "{\"workers\":3,\"id\":703,\"tensors\":[{\"elems\":1000}],"
		 "\"partition_bytes\":40,\"nodes\":[{\"name\":\"other-a\",\"weight\":1},"
		 "{\"name\":\"mock-node\",\"weight\":0}]}");
	r = call(c, "job_create", params, &code);
	SG_CHECK(r != NULL && jint(r, "keys") == 0, "no keys here: %ld", code);
	json_decref(r);
	for (uint32_t id = 700; id <= 703; id++) {
		snprintf(params, sizeof(params), "{\"id\":%u}", id);
		json_decref(call(c, "job_destroy", params, &code));
	}
}

/* A job_list entry of job @p id (NULL if none), a new reference. */
static json_t *listed(struct sg_ctl_client *c, long long id)
{
	long code;
	json_t *r = call(c, "job_list", NULL, &code), *e, *found = NULL;
	size_t i;

	json_array_foreach(r, i, e)
		if (jint(e, "id") == id)
			found = json_incref(e);
	json_decref(r);
	return found;
}

/*
 * Open jobs: job_create without tensors (or with none listed) places no key; the
 * agent gets open with the slots asked for; dtype any is for open jobs only, and so
 * is slots; the answer says keys "open", and job_list and /metrics tell them apart.
 */
/* job_keys_add: keys checked against the job's own tensors and sized from them; an
 * unknown job, a key of no tensor or partition of it, a key twice, an open job, bad
 * params: refused before the agent, nothing added, each counted. */
static void test_job_keys_add(struct sg_ctl_client *c)
{
	struct sg_ctl_server_stats st0, st1;
	unsigned int calls;
	json_t *r;
	long code;

	sg_ctl_server_get_stats(srv, &st0);
	/* fp32, 1000 elements a partition: tensor 0 is 1000, 1000, 500; tensor 1 one of 1000 */
	r = call(c, "job_create", "{\"workers\":2,\"id\":710,\"partition_bytes\":4000,"
		 "\"tensors\":[{\"elems\":2500},{\"elems\":1000}]}", &code);
	SG_CHECK(r != NULL, "job 710: %ld", code);
	json_decref(r);
	r = call(c, "job_keys_add", "{\"id\":710,\"keys\":[2,65536,0]}", &code);
	SG_CHECK(r && jint(r, "id") == 710 && jint(r, "keys") == 3 && jint(r, "added") == 3,
		 "job_keys_add: %ld", code);
	json_decref(r);
	SG_CHECK(mock.last_n_keys == 3 && mock.last_keys[0].id == 2 &&
		 mock.last_keys[0].nelem == 500 && mock.last_keys[1].id == 0x10000 &&
		 mock.last_keys[1].nelem == 1000 && mock.last_keys[2].id == 0 &&
		 mock.last_keys[2].nelem == 1000, "the keys' sizes are the job's partitions'");
	calls = mock.keys_add_calls;
	call_refused(c, "job_keys_add", "{\"id\":9999,\"keys\":[0]}", SG_CTL_ERR_NOT_FOUND,
		     "no such job: 9999");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[3]}", SG_CTL_ERR_INVALID_PARAMS,
		     "keys[0] is not a key of job 710");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[0,65537]}",
		     SG_CTL_ERR_INVALID_PARAMS, "keys[1] is not a key of job 710");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[131072]}",
		     SG_CTL_ERR_INVALID_PARAMS, "not a key of job 710");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[1,1]}", SG_CTL_ERR_INVALID_PARAMS,
		     "given twice");
	/* apart, and after a larger key: found all the same (the ids are sorted) */
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[65536,2,0,65536]}",
		     SG_CTL_ERR_INVALID_PARAMS, "key 0x00010000 given twice");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[-1]}", SG_CTL_ERR_INVALID_PARAMS,
		     "not a key");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[\"0\"]}",
		     SG_CTL_ERR_INVALID_PARAMS, "not a key");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[]}", SG_CTL_ERR_INVALID_PARAMS,
		     "1..4096 keys");
	call_refused(c, "job_keys_add", "{\"id\":710}", SG_CTL_ERR_INVALID_PARAMS, "invalid params");
	call_refused(c, "job_keys_add", "{\"id\":710,\"keys\":[0],\"x\":1}",
		     SG_CTL_ERR_INVALID_PARAMS, "invalid params");
	SG_CHECK(mock.keys_add_calls == calls, "a refused request reached the agent");
	r = call(c, "job_create", "{\"workers\":2,\"id\":711}", &code);
	SG_CHECK(r != NULL, "open job 711: %ld", code);
	json_decref(r);
	call_refused(c, "job_keys_add", "{\"id\":711,\"keys\":[0]}", SG_CTL_ERR_REFUSED,
		     "an open job makes its own keys");
	sg_ctl_server_get_stats(srv, &st1);
	/* timed: the control thread's time in the requests that got to the keys' checks */
	SG_CHECK(st1.keys_add_busy_us >= st1.keys_add_max_us, "busy_us %" PRIu64 " < max_us %"
		 PRIu64, st1.keys_add_busy_us, st1.keys_add_max_us);
	SG_CHECK(st1.keys_add_refused - st0.keys_add_refused == 12 &&
		 st1.keys_add_requests - st0.keys_add_requests == 1 &&
		 st1.keys_add_added - st0.keys_add_added == 3, "counted: refused %" PRIu64
		 ", requests %" PRIu64, st1.keys_add_refused - st0.keys_add_refused,
		 st1.keys_add_requests - st0.keys_add_requests);
	json_decref(call(c, "job_destroy", "{\"id\":710}", &code));
	json_decref(call(c, "job_destroy", "{\"id\":711}", &code));
}

static void test_job_create_open(struct sg_ctl_client *c)
{
	static const struct {
		const char *params, *why;
		long code;
	} bad[] = {
		{"{\"workers\":2,\"dtype\":\"any\",\"tensors\":[{\"elems\":1}]}",
		 "dtype any is for open jobs", SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"slots\":10,\"tensors\":[{\"elems\":1}]}", "slots is for open jobs",
		 SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"slots\":0}", "slots must be 1..16777216", SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"slots\":16777217}", "slots must be", SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"slots\":\"many\"}", "Expected integer", SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"dtype\":\"anything\"}", "unknown dtype", SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"dtype\":\"any\",\"partition_bytes\":4}", "partition_bytes",
		 SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":0}", "workers", SG_CTL_ERR_INVALID_PARAMS},
		{"{\"workers\":2,\"nodes\":[{\"name\":\"a\"}]}", "not in the job's node list",
		 SG_CTL_ERR_REFUSED},
	};
	json_t *r, *e;
	long code;
	long long id, open2;
	char params[64];

	mock.last_n_keys = 99;
	r = call(c, "job_create", "{\"workers\":3,\"dtype\":\"any\",\"slots\":5000,\"nodes\":"
		 "[{\"name\":\"mock-node\"},{\"name\":\"other\"}]}", &code);
	SG_CHECK(r != NULL && json_is_string(json_object_get(r, "keys")) &&
		 strcmp(json_string_value(json_object_get(r, "keys")), "open") == 0 &&
		 jint(r, "slots") == 5000 && jint(r, "slots_budget") == 10000 &&
		 strcmp(json_string_value(json_object_get(r, "dtype")), "any") == 0 &&
		 jint(r, "nodes") == 2, "open job of dtype any: %ld", code);
	id = r ? jint(r, "id") : 0;
	json_decref(r);
	SG_CHECK(mock.last_n_keys == 0 && mock.n_jobs > 0 && mock.jobs[mock.n_jobs - 1].open &&
		 mock.jobs[mock.n_jobs - 1].dtype == SG_DTYPE_ANY, "the agent got an open job");
	e = listed(c, id);
	SG_CHECK(e != NULL && json_is_true(json_object_get(e, "open")) &&
		 jint(e, "slots") == 5000 && jint(e, "slots_budget") == 10000 &&
		 jint(e, "tensors") == 0, "job_list of the open job");
	json_decref(e);
	/* tensors: [] is an open job too, with the default budget */
	r = call(c, "job_create", "{\"workers\":2,\"tensors\":[],\"mode\":\"async\"}", &code);
	SG_CHECK(r != NULL && jint(r, "slots") == SG_OPEN_SLOTS_DEFAULT &&
		 strcmp(json_string_value(json_object_get(r, "dtype")), "fp32") == 0,
		 "tensors [] and the default budget: %ld", code);
	open2 = r ? jint(r, "id") : 0;
	json_decref(r);
	/* a job of tensors is not open, and says so */
	e = listed(c, determ_id);
	SG_CHECK(e != NULL && json_is_false(json_object_get(e, "open")) &&
		 json_object_get(e, "slots") == NULL, "a job of tensors is listed as fixed");
	json_decref(e);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		call_refused(c, "job_create", bad[i].params, bad[i].code, bad[i].why);
	/* the open job of dtype any stays for /metrics; the other goes */
	snprintf(params, sizeof(params), "{\"id\":%lld}", open2);
	json_decref(call(c, "job_destroy", params, &code));
	open_any_id = id;
}

static void test_unix_roundtrips(void)
{
	struct sg_ctl_client *c = sg_ctl_client_connect(sock_path, NULL, 0, 2000);
	struct stat st;
	json_t *r, *n;
	long code;
	size_t i;
	uint64_t total_bytes = 0, total_parts = 0;
	char params[512];
	int id;

	SG_CHECK(stat(sock_path, &st) == 0 && (st.st_mode & 0777) == 0600, "socket mode %o",
		 st.st_mode & 0777);
	SG_CHECK(c != NULL, "unix connect: %s", strerror(errno));
	if (c == NULL)
		return;
	r = call(c, "node_info", NULL, &code);
	SG_CHECK(r && strcmp(json_string_value(json_object_get(r, "name")), "mock-node") == 0,
		 "node_info");
	SG_CHECK_EQ(json_integer_value(json_object_get(r, "cores")), 2);
	SG_CHECK_EQ(json_array_size(json_object_get(r, "reducer_lcores")), 2);
	json_decref(r);

	/* A job of two tensors: 10 MB fp32 (3 partitions of 4096000) and 1000 fp16. */
	r = call(c, "job_create",
		 "{\"workers\":4,\"dtype\":\"fp32\",\"tensors\":[{\"name\":\"w\",\"elems\":2500000},"
		 "{\"elems\":1000}]}",
		 &code);
	SG_CHECK(r != NULL, "job_create code %ld", code);
	id = (int)json_integer_value(json_object_get(r, "id"));
	SG_CHECK(id > 0, "job id %d", id);
	SG_CHECK(r && strlen(json_string_value(json_object_get(r, "token"))) == 64, "token");
	SG_CHECK(r && strcmp(json_string_value(json_object_get(r, "token")), mock.last_token) == 0,
		 "the agent got the same token");
	json_decref(r);
	r = call(c, "job_list", NULL, &code);
	SG_CHECK(json_array_size(r) == 1 &&
			 json_integer_value(json_object_get(json_array_get(r, 0), "id")) == id &&
			 json_integer_value(json_object_get(json_array_get(r, 0), "workers")) == 4,
		 "job_list");
	json_decref(r);
	/* More jobs than the server's own table (a node's file jobs too): every one listed */
	mock.extra_jobs = 3 * SG_CTL_MAX_JOBS;
	r = call(c, "job_list", NULL, &code);
	SG_CHECK_EQ(json_array_size(r), 1 + 3 * SG_CTL_MAX_JOBS);
	SG_CHECK_EQ(json_integer_value(json_object_get(json_array_get(r, 3 * SG_CTL_MAX_JOBS),
						       "id")), 5000 + 3 * SG_CTL_MAX_JOBS - 1);
	mock.extra_jobs = 0;
	json_decref(r);
	/* Refusals: bad params, agent refusal with its reason. */
	r = call(c, "job_create", "{\"workers\":4,\"dtype\":\"fp33\",\"tensors\":[{\"elems\":1}]}",
		 &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "bad dtype: %ld", code);
	r = call(c, "job_create", "{\"workers\":4,\"tensors\":[{\"elems\":1}],\"extra\":1}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "unknown member: %ld", code);
	r = call(c, "job_create", "{\"workers\":4,\"tensors\":[{\"elems\":-5}]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "negative elems: %ld", code);
	r = call(c, "job_create", "{\"workers\":4,\"tensors\":{}}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "tensors not an array: %ld", code);
	r = call(c, "job_create", "{\"workers\":4,\"partition_bytes\":99999999,\"tensors\":[{\"elems\":1}]}",
		 &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "partition too big: %ld", code);
	r = call(c, "job_create", "{\"workers\":13,\"tensors\":[{\"elems\":1}]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_REFUSED, "agent refusal: %ld", code);
	/* One worker limit: the engine's 64 (a bitmap of ranks), refused as a bad param. */
	r = call(c, "job_create", "{\"workers\":65,\"tensors\":[{\"elems\":1}]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "65 workers: %ld", code);
	r = call(c, "job_create", "{\"workers\":4096,\"tensors\":[{\"elems\":1}]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "4096 workers: %ld", code);
	/* Every mode of the engine can be created, and is listed as created. */
	r = call(c, "job_create", "{\"workers\":64,\"mode\":\"deterministic\","
		 "\"tensors\":[{\"elems\":10}]}", &code);
	SG_CHECK(r != NULL, "deterministic job: %ld", code);
	determ_id = (int)json_integer_value(json_object_get(r, "id"));
	json_decref(r);
	r = call(c, "job_list", NULL, &code);
	for (i = 0; i < json_array_size(r); i++) {
		json_t *e = json_array_get(r, i);

		if (json_integer_value(json_object_get(e, "id")) == determ_id)
			SG_CHECK(strcmp(json_string_value(json_object_get(e, "mode")),
					"deterministic") == 0, "deterministic job listed as %s",
				 json_string_value(json_object_get(e, "mode")));
	}
	json_decref(r);
	r = call(c, "job_create", "{\"workers\":4,\"mode\":\"eventual\",\"tensors\":[{\"elems\":1}]}",
		 &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "bad mode: %ld", code);
	test_job_create_spanning(c);
	test_job_create_open(c);
	test_job_keys_add(c);

	/* Placement needs members. */
	snprintf(params, sizeof(params), "{\"id\":%d}", id);
	r = call(c, "job_placement", params, &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_NOT_FOUND, "placement with no nodes: %ld", code);
	r = call(c, "node_heartbeat", "{\"name\":\"cpu0\",\"kind\":\"cpu\",\"gbps\":100}", &code);
	json_decref(r);
	r = call(c, "node_heartbeat", "{\"name\":\"gpu0\",\"kind\":\"gpu\",\"gbps\":100}", &code);
	json_decref(r);
	r = call(c, "node_heartbeat", "{\"name\":\"gpu1\",\"kind\":\"gpu\",\"gbps\":100}", &code);
	json_decref(r);
	r = call(c, "node_heartbeat", "{\"name\":\"x\",\"kind\":\"tpu\",\"gbps\":100}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "bad kind: %ld", code);
	r = call(c, "node_heartbeat", "{\"name\":\"x\",\"gbps\":-1}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "bad gbps: %ld", code);
	r = call(c, "nodes_list", NULL, &code);
	SG_CHECK_EQ(json_array_size(json_object_get(r, "nodes")), 3);
	json_decref(r);
	snprintf(params, sizeof(params), "{\"id\":%d,\"detail\":true}", id);
	r = call(c, "job_placement", params, &code);
	SG_CHECK(r != NULL, "placement: %ld", code);
	n = json_object_get(r, "nodes");
	for (i = 0; i < json_array_size(n); i++) {
		json_t *e = json_array_get(n, i);
		const char *name = json_string_value(json_object_get(e, "name"));
		double w = json_real_value(json_object_get(e, "weight"));

		/* n=2 GPU, k=1 CPU: CPU 2(n-1)/(n^2+kn-2k) = 1/2, GPU (n-k)/.. = 1/4. */
		SG_CHECK(fabs(w - (name[0] == 'c' ? 0.5 : 0.25)) < 1e-9, "%s weight %f", name, w);
		total_bytes += json_integer_value(json_object_get(e, "bytes"));
		total_parts += json_integer_value(json_object_get(e, "partitions"));
	}
	SG_CHECK_EQ(total_bytes, 2500000ull * 4 + 1000 * 4);
	SG_CHECK_EQ(total_parts, 3 + 1);
	SG_CHECK_EQ(json_array_size(json_object_get(r, "partitions")), 4);
	json_decref(r);
	/* Every party computes the same map: recompute partition 0 of tensor 0 here. */
	{
		struct sg_ctl_place_node pn[3] = {{"cpu0", SG_NODE_CPU, 100, true},
						  {"gpu0", SG_NODE_GPU, 100, true},
						  {"gpu1", SG_NODE_GPU, 100, true}};
		double w[3];
		json_t *p0;
		int o;

		r = call(c, "job_placement", params, &code);
		p0 = json_array_get(json_object_get(r, "partitions"), 0);
		sg_ctl_place_weights(pn, 3, w);
		o = sg_ctl_place_key(pn, w, 3, sg_ctl_partition_key(0, 0));
		SG_CHECK(o >= 0 && p0 &&
				 strcmp(json_string_value(json_object_get(p0, "node")), pn[o].name) == 0,
			 "server and library agree on key 0");
		json_decref(r);
	}
	r = call(c, "node_remove", "{\"name\":\"gpu1\"}", &code);
	json_decref(r);
	r = call(c, "node_remove", "{\"name\":\"gpu1\"}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_NOT_FOUND, "remove twice: %ld", code);

	/* Lcores, layout. */
	r = call(c, "lcores_get", NULL, &code);
	SG_CHECK_EQ(json_array_size(r), MOCK_LCORES);
	SG_CHECK(r && strcmp(json_string_value(json_object_get(json_array_get(r, 1), "role")),
			     "reducer") == 0,
		 "lcore 1 role");
	SG_CHECK(r && json_integer_value(json_object_get(json_array_get(r, 2), "ring")) == 6,
		 "lcore 2's ring");
	json_decref(r);
	r = call(c, "layout_get", NULL, &code);
	SG_CHECK_EQ(json_array_size(json_object_get(r, "keymap")), SG_BUCKETS);
	json_decref(r);
	{
		char km[600] = "{\"keymap\":[";

		for (i = 0; i < SG_BUCKETS; i++)
			strcat(km, i ? ",1" : "1");
		strcat(km, "],\"idle\":[{\"lcore\":2,\"policy\":\"sleep\"}]}");
		r = call(c, "layout_set", km, &code);
		SG_CHECK(r != NULL, "layout_set: %ld", code);
		json_decref(r);
		SG_CHECK_EQ(mock.layout.keymap[0], 1);
		SG_CHECK_EQ(mock.layout.lcores[2].idle, SG_IDLE_SLEEP);
		km[11] = '7'; /* keymap[0] = 7: the agent refuses, naming why */
		r = call(c, "layout_set", km, &code);
		SG_CHECK(r == NULL && code == SG_CTL_ERR_REFUSED, "bad reducer: %ld", code);
	}
	r = call(c, "layout_set", "{\"roles\":[1,2]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_REFUSED, "roles refused: %ld", code);
	r = call(c, "layout_set", "{\"keymap\":[1,2]}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "short keymap: %ld", code);
	SG_CHECK_EQ(mock.layout_changes, 1);

	/* Log level, stats, destroy, drain. */
	r = call(c, "log_level_set", "{\"level\":\"debug\"}", &code);
	SG_CHECK(r != NULL && mock.last_log_level == 8, "log level");
	json_decref(r);
	r = call(c, "log_level_set", "{\"level\":\"loud\"}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "bad level: %ld", code);
	r = call(c, "stats_get", NULL, &code);
	SG_CHECK(r && json_array_size(json_object_get(r, "lcores")) == MOCK_LCORES &&
			 json_array_size(json_object_get(r, "jobs")) == 3 &&
			 json_integer_value(json_object_get(json_object_get(r, "control"),
							    "requests")) > 10,
		 "stats_get");
	SG_CHECK(r && json_integer_value(json_object_get(json_object_get(r, "drops"),
							 "engine_short")) == 7 &&
			 json_object_size(json_object_get(r, "drops")) == 2,
		 "stats_get's drops by reason");
	json_decref(r);
	r = call(c, "stats_get", "{\"x\":1}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "params on a no-param method");
	snprintf(params, sizeof(params), "{\"id\":%d}", id);
	r = call(c, "job_destroy", params, &code);
	/* the deterministic one and the open one stay */
	SG_CHECK(r != NULL && mock.n_jobs == 2, "job_destroy");
	json_decref(r);
	r = call(c, "job_destroy", params, &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_NOT_FOUND, "destroy twice: %ld", code);
	r = call(c, "job_destroy", "{\"id\":\"seven\"}", &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_INVALID_PARAMS, "string id: %ld", code);
	r = call(c, "rpc_get_methods", NULL, &code);
	SG_CHECK(json_array_size(r) >= 15, "rpc_get_methods");
	json_decref(r);
	r = call(c, "no_such_method", NULL, &code);
	SG_CHECK(r == NULL && code == SG_CTL_ERR_METHOD_NOT_FOUND, "unknown method: %ld", code);
	sg_ctl_client_close(c);
}

/* ---- verbs RPCs ---- */

#define RC_OK "{\"qpn\":4660,\"psn\":16777215,\"lid\":65535,\"rkey\":4294967295," \
	      "\"slots\":65536,\"stride\":64"

static void test_verbs_gid(void)
{
	static const char *const bad[] = {"", "fe80", "fe80:0000:0000:0000:0000:0000:0000:002",
					  "fe80:0000:0000:0000:0000:0000:0000:00:2a",
					  "fe80 0000:0000:0000:0000:0000:0000:002a",
					  "0000000000000000000000000000002g",
					  "+000000000000000000000000000002a"};
	uint8_t g[16], h[16];
	char s[40];

	SG_CHECK_EQ(sg_ctl_gid_parse("FE80000000000000000000000000002a", g), 0);
	SG_CHECK(g[0] == 0xfe && g[1] == 0x80 && g[15] == 0x2a && g[14] == 0, "gid bytes");
	sg_ctl_gid_format(g, s);
	SG_CHECK(!strcmp(s, "fe80:0000:0000:0000:0000:0000:0000:002a"), "%s", s);
	SG_CHECK(sg_ctl_gid_parse(s, h) == 0 && !memcmp(g, h, 16), "round trip");
	for (size_t i = 0; i < RTE_DIM(bad); i++)
		SG_CHECK(sg_ctl_gid_parse(bad[i], h) == -EINVAL, "'%s' accepted", bad[i]);
	SG_CHECK_EQ(sg_ctl_gid_parse(NULL, h), -EINVAL);
}

static void test_verbs(void)
{
	struct sg_ctl_client *c = sg_ctl_client_connect(sock_path, NULL, 0, 2000);
	json_t *r, *n;
	long code;
	int fd;
	unsigned int calls;

	SG_CHECK(c != NULL, "unix connect");
	if (c == NULL)
		return;
	test_verbs_gid();
	/* verbs_info: the agent's numbers as JSON */
	r = call(c, "verbs_info", NULL, &code);
	SG_CHECK(r != NULL, "verbs_info: %ld", code);
	SG_CHECK(r && !strcmp(json_string_value(json_object_get(r, "mode")), "rc") &&
		 json_integer_value(json_object_get(r, "qkey")) == 0x53470001 &&
		 json_integer_value(json_object_get(r, "max_payload")) == 4040 &&
		 json_integer_value(json_object_get(r, "lid")) == 7 &&
		 json_integer_value(json_object_get(r, "gid_index")) == 3 &&
		 !strcmp(json_string_value(json_object_get(r, "gid")),
			 "fe80:0000:0000:0000:0000:0000:0000:002a") &&
		 json_integer_value(json_object_get(json_object_get(r, "rc"), "max_connections")) ==
			 16, "verbs_info fields");
	n = json_array_get(json_object_get(r, "lcores"), 1);
	SG_CHECK(n && json_integer_value(json_object_get(n, "qpn")) == 0xabcdef &&
		 !strcmp(json_string_value(json_object_get(n, "role")), "reducer"), "lcore 1");
	json_decref(r);
	/* verbs_rc_connect: every field reaches the agent; the node's side comes back */
	r = call(c, "verbs_rc_connect", RC_OK ",\"gid\":\"fe80:0000:0000:0000:0000:0000:0000:002b\","
		 "\"addr\":\"0xFFFFFFFFFFFFF000\"}", &code);
	SG_CHECK(r != NULL, "verbs_rc_connect: %ld", code);
	SG_CHECK(mock.rc_calls == 1 && mock.last_worker.qpn == 4660 &&
		 mock.last_worker.psn == 0xffffff && mock.last_worker.lid == 0xffff &&
		 mock.last_worker.rkey == UINT32_MAX && mock.last_worker.slots == 65536 &&
		 mock.last_worker.stride == 64 && mock.last_worker.addr == 0xfffffffffffff000ull &&
		 mock.last_worker.gid[0] == 0xfe && mock.last_worker.gid[15] == 0x2b,
		 "worker fields");
	n = json_object_get(r, "node");
	SG_CHECK(n && json_integer_value(json_object_get(r, "peer")) == 0 &&
		 json_integer_value(json_object_get(n, "qpn")) == 0x200 &&
		 json_integer_value(json_object_get(n, "rkey")) == 0xdeadbeef &&
		 !strcmp(json_string_value(json_object_get(n, "addr")), "0xffff800000001000") &&
		 !strcmp(json_string_value(json_object_get(n, "gid")),
			 "fe80:0000:0000:0000:0000:0000:0000:002a"), "node side");
	json_decref(r);
	r = call(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		 "\"addr\":4096}", &code);
	SG_CHECK(r && mock.rc_calls == 2 && mock.last_worker.addr == 4096, "integer addr");
	json_decref(r);
	/* garbage never reaches the agent */
	calls = mock.rc_calls;
	call_refused(c, "verbs_rc_connect", NULL, SG_CTL_ERR_INVALID_PARAMS, "want {qpn");
	call_refused(c, "verbs_rc_connect", RC_OK "}", SG_CTL_ERR_INVALID_PARAMS, "gid must be");
	call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		     "\"addr\":-4096}", SG_CTL_ERR_INVALID_PARAMS, "addr must be");
	/* one "0x", then hex digits only (strtoull alone would take "0x0x1000" as 0x1000) */
	call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		     "\"addr\":\"0x0x1000\"}", SG_CTL_ERR_INVALID_PARAMS, "addr must be");
	call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		     "\"addr\":\"0x1000 \"}", SG_CTL_ERR_INVALID_PARAMS, "addr must be");
	call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		     "\"addr\":4096,\"qkey\":1}", SG_CTL_ERR_INVALID_PARAMS, "unknown member 'qkey'");
	call_refused(c, "verbs_rc_connect", "{\"qpn\":true}", SG_CTL_ERR_INVALID_PARAMS,
		     "qpn must be");
	call_refused(c, "verbs_info", "[1]", SG_CTL_ERR_INVALID_PARAMS, "takes none");
	SG_CHECK_EQ(mock.rc_calls, calls);
	/* the agent's refusals: UD, then a node without verbs */
	mock.verbs_kind = 1;
	call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		     "\"addr\":4096}", SG_CTL_ERR_NOT_SUPPORTED, "mode = ud");
	r = call(c, "verbs_info", NULL, &code);
	SG_CHECK(r && !strcmp(json_string_value(json_object_get(r, "mode")), "ud") &&
		 json_object_get(r, "rc") == NULL, "UD verbs_info");
	json_decref(r);
	mock.verbs_kind = 2;
	call_refused(c, "verbs_info", NULL, SG_CTL_ERR_NOT_SUPPORTED, "DPDK transport");
	call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
		     "\"addr\":4096}", SG_CTL_ERR_NOT_SUPPORTED, "DPDK transport");
	mock.verbs_kind = 0;
	/* verbs_rc_disconnect: a peer id connect gave, once; garbage never reaches the agent */
	r = call(c, "verbs_rc_disconnect", "{\"peer\":1}", &code);
	SG_CHECK(r && json_integer_value(json_object_get(r, "peer")) == 1 && mock.closed == 2 &&
		 mock.disc_calls == 1, "disconnect peer 1: %ld", code);
	json_decref(r);
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":1}", SG_CTL_ERR_NOT_FOUND,
		     "no open connection with peer id 1");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":4294967295}", SG_CTL_ERR_NOT_FOUND,
		     "no open connection with peer id 4294967295");
	calls = mock.disc_calls;
	call_refused(c, "verbs_rc_disconnect", NULL, SG_CTL_ERR_INVALID_PARAMS, "want {peer}");
	call_refused(c, "verbs_rc_disconnect", "[1]", SG_CTL_ERR_INVALID_PARAMS, "want {peer}");
	call_refused(c, "verbs_rc_disconnect", "{}", SG_CTL_ERR_INVALID_PARAMS, "want {peer}");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":0,\"x\":1}",
		     SG_CTL_ERR_INVALID_PARAMS, "want {peer}");
	call_refused(c, "verbs_rc_disconnect", "{\"peeer\":0}", SG_CTL_ERR_INVALID_PARAMS,
		     "peer must be");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":\"0\"}", SG_CTL_ERR_INVALID_PARAMS,
		     "peer must be");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":-1}", SG_CTL_ERR_INVALID_PARAMS,
		     "peer must be");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":4294967296}",
		     SG_CTL_ERR_INVALID_PARAMS, "peer must be");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":null}", SG_CTL_ERR_INVALID_PARAMS,
		     "peer must be");
	SG_CHECK_EQ(mock.disc_calls, calls);
	mock.verbs_kind = 2;
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":0}", SG_CTL_ERR_NOT_SUPPORTED,
		     "DPDK transport");
	mock.verbs_kind = 0;
	calls = mock.rc_calls;
	sg_ctl_client_close(c);
	/* TCP without auth: refused and closed before the agent sees it */
	fd = raw_tcp(tcp_port);
	free(raw_line(fd, 2000));
	send_expect(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"verbs_rc_connect\",\"params\":"
		    RC_OK ",\"gid\":\"0000000000000000000000000000002b\",\"addr\":4096}}\n",
		    SG_CTL_ERR_UNAUTHENTICATED);
	SG_CHECK(raw_closed_within(fd, 2000), "closed after an unauthenticated verbs_rc_connect");
	close(fd);
	fd = raw_tcp(tcp_port);
	free(raw_line(fd, 2000));
	send_expect(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"verbs_rc_disconnect\","
		    "\"params\":{\"peer\":0}}\n", SG_CTL_ERR_UNAUTHENTICATED);
	SG_CHECK(raw_closed_within(fd, 2000), "closed after an unauthenticated "
		 "verbs_rc_disconnect");
	close(fd);
	SG_CHECK(mock.closed == 2, "an unauthenticated disconnect closed nothing");
	fd = raw_tcp(tcp_port);
	free(raw_line(fd, 2000));
	send_expect(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"verbs_info\"}\n",
		    SG_CTL_ERR_UNAUTHENTICATED);
	close(fd);
	SG_CHECK_EQ(mock.rc_calls, calls);
}

/* Open a TCP connection, read its challenge and write the auth request answering it
 * (its hex digits in upper case if @p upper) into @p req. @return the socket. */
static int tcp_challenged(char *req, size_t cap, bool upper)
{
	int fd = raw_tcp(tcp_port);
	char *line = raw_line(fd, 2000), hex[65];
	json_t *j = line ? json_loads(line, 0, NULL) : NULL;
	const char *nh = json_string_value(json_object_get(json_object_get(j, "params"), "nonce"));
	uint8_t nonce[32];

	SG_CHECK(nh && sodium_hex2bin(nonce, 32, nh, strlen(nh), NULL, NULL, NULL) == 0, "nonce");
	sg_ctl_auth_response(mock_secret, sizeof(mock_secret), nonce, 32, hex);
	for (char *h = hex; upper && *h; h++)
		*h = (char)toupper((unsigned char)*h);
	snprintf(req, cap,
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"auth\",\"params\":{\"response\":\"%s\"}}\n",
		 hex);
	json_decref(j);
	free(line);
	return fd;
}

static void test_tcp_auth(void)
{
	char target[64], *line, msg[256], replay[256];
	struct sg_ctl_server_stats before = stats(), after;
	struct sg_ctl_client *c;
	json_t *r;
	long code;
	int fd, fd2;

	snprintf(target, sizeof(target), "127.0.0.1:%u", tcp_port);
	/* The right secret. */
	c = sg_ctl_client_connect(target, mock_secret, sizeof(mock_secret), 2000);
	SG_CHECK(c != NULL, "tcp connect: %s", strerror(errno));
	r = call(c, "node_info", NULL, &code);
	SG_CHECK(r != NULL, "node_info over tcp: %ld", code);
	json_decref(r);
	sg_ctl_client_close(c);
	/* A wrong one. */
	c = sg_ctl_client_connect(target, (const uint8_t *)"not-the-secret-at-all", 21, 2000);
	SG_CHECK(c == NULL && errno == EACCES, "wrong secret: errno %d", errno);
	sg_ctl_client_close(c);
	/* None at all: a method before auth gets -32001 and the door. */
	fd = raw_tcp(tcp_port);
	line = raw_line(fd, 2000);
	SG_CHECK(line && strstr(line, "auth_challenge"), "challenge: %s", line ? line : "none");
	free(line);
	send_expect(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"node_info\"}\n", SG_CTL_ERR_UNAUTHENTICATED);
	SG_CHECK(raw_closed_within(fd, 2000), "closed after unauthenticated call");
	close(fd);

	/* The answer's hex digits may be upper case (docs/control.md). */
	fd = tcp_challenged(msg, sizeof(msg), true);
	raw_send(fd, msg);
	line = raw_line(fd, 2000);
	SG_CHECK(line && err_code(line) == 0 && strstr(line, "authenticated"), "upper case: %s",
		 line ? line : "none");
	free(line);
	close(fd);

	/* Replay: a valid answer recorded on one connection fails on the next. */
	fd = tcp_challenged(replay, sizeof(replay), false);
	raw_send(fd, replay);
	line = raw_line(fd, 2000);
	SG_CHECK(line && err_code(line) == 0 && strstr(line, "authenticated"), "auth ok: %s",
		 line ? line : "none");
	free(line);
	/* Answering twice on the same connection is refused too. */
	send_expect(fd, replay, SG_CTL_ERR_AUTH_FAILED);
	close(fd);
	fd2 = raw_tcp(tcp_port);
	line = raw_line(fd2, 2000);
	SG_CHECK(line && strstr(line, "auth_challenge"), "second challenge");
	free(line);
	send_expect(fd2, replay, SG_CTL_ERR_AUTH_FAILED);
	SG_CHECK(raw_closed_within(fd2, 2000), "closed after a replayed answer");
	close(fd2);
	/* Garbage in the auth params. */
	fd = raw_tcp(tcp_port);
	free(raw_line(fd, 2000));
	snprintf(msg, sizeof(msg),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"auth\",\"params\":{\"response\":\"zz\"}}\n");
	send_expect(fd, msg, SG_CTL_ERR_AUTH_FAILED);
	close(fd);

	after = stats();
	SG_CHECK_EQ(after.auth_failed - before.auth_failed, 4);
	SG_CHECK_EQ(after.unauthenticated - before.unauthenticated, 1);
	SG_CHECK_EQ(after.auth_ok - before.auth_ok, 3);
}

static void test_garbage(void)
{
	static const struct {
		const char *frame;
		long code;
	} bad[] = {
		{"{not json at all\n", SG_CTL_ERR_PARSE},
		{"[1,2,3]\n", SG_CTL_ERR_INVALID_REQUEST},
		{"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"node_info\"}\n", SG_CTL_ERR_INVALID_REQUEST},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"node_info\",\"params\":5}\n",
		 SG_CTL_ERR_INVALID_REQUEST},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"node_info\"}\n", SG_CTL_ERR_PARSE},
		{"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"rm -rf\"}\n", SG_CTL_ERR_METHOD_NOT_FOUND},
		{"\x01\xff\xfe garbage\n", SG_CTL_ERR_PARSE},
		{"42 43\n", SG_CTL_ERR_PARSE},
		/* valid JSON that is not a request object (issue 17, failure 4) */
		{"42\n", SG_CTL_ERR_INVALID_REQUEST},
		{"\"job_list\"\n", SG_CTL_ERR_INVALID_REQUEST},
		{"null\n", SG_CTL_ERR_INVALID_REQUEST},
		{"true\n", SG_CTL_ERR_INVALID_REQUEST},
		{"[]\n", SG_CTL_ERR_INVALID_REQUEST},
		{"-0.5e3\n", SG_CTL_ERR_INVALID_REQUEST},
	};
	struct sg_ctl_server_stats before = stats(), after;
	char big[6000], *line;
	size_t i;
	int fd;

	fd = raw_unix();
	SG_CHECK(fd >= 0, "unix raw connect");
	for (i = 0; i < RTE_DIM(bad); i++)
		send_expect(fd, bad[i].frame, bad[i].code);
	/* After all that, the same connection still works (pipelined, CRLF too). */
	raw_send(fd, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"node_info\"}\r\n"
		     "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"job_list\"}\n");
	line = raw_line(fd, 2000);
	SG_CHECK(line && err_code(line) == 0 && strstr(line, "\"id\":8"), "still works: %s",
		 line ? line : "none");
	free(line);
	line = raw_line(fd, 2000);
	SG_CHECK(line && err_code(line) == 0 && strstr(line, "\"id\":9"), "pipelined");
	free(line);
	/* A notification (no id) gets no answer. */
	raw_send(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"node_info\"}\n"
		     "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"job_list\"}\n");
	line = raw_line(fd, 2000);
	SG_CHECK(line && strstr(line, "\"id\":10"), "notification not answered");
	free(line);
	/* Oversized: more than max_frame (4096) with no newline: error, then closed. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	send_expect(fd, big, SG_CTL_ERR_OVERSIZED);
	SG_CHECK(raw_closed_within(fd, 2000), "closed after an oversized frame");
	close(fd);

	after = stats();
	SG_CHECK_EQ(after.malformed - before.malformed, 13);
	SG_CHECK_EQ(after.unknown_method - before.unknown_method, 1);
	SG_CHECK_EQ(after.oversized - before.oversized, 1);
}

static void test_slow(void)
{
	struct sg_ctl_server_stats before = stats(), after;
	struct timespec t0, t1;
	int fd, fd2, fd3, i;
	bool closed = false;
	long ms;

	/* Slow loris: one byte every 50 ms of a frame that never ends (frame timeout 300 ms). */
	fd = raw_unix();
	fd2 = raw_tcp(tcp_port); /* says nothing: auth timeout 500 ms */
	fd3 = raw_unix();	 /* says nothing: idle timeout 1500 ms */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 40 && !closed; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (send(fd, "{", 1, MSG_NOSIGNAL) != 1)
			closed = true;
		else if (poll(&p, 1, 50) == 1 && recv(fd, &(char){0}, 1, 0) <= 0)
			closed = true;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	SG_CHECK(closed && ms < 1500, "slow loris closed after %ld ms", ms);
	SG_CHECK(raw_closed_within(fd2, 2000), "silent tcp client closed at the auth timeout");
	SG_CHECK(raw_closed_within(fd3, 3000), "idle unix client closed at the idle timeout");
	close(fd);
	close(fd2);
	close(fd3);
	after = stats();
	SG_CHECK_EQ(after.timeouts - before.timeouts, 3);
}

/* Send @p len bytes of @p req to /metrics' port; the answer until the server closes.
 * @p ms (unless NULL) gets how long the first byte of the answer took. */
static char *http_send(const char *req, size_t len, long *ms)
{
	int fd = raw_tcp(http_port);
	char buf[65536];
	size_t n = 0;
	ssize_t r;
	struct timespec t0, t1;

	if (fd < 0)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	SG_CHECK(send(fd, req, len, MSG_NOSIGNAL) == (ssize_t)len, "http send");
	while (n < sizeof(buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (poll(&p, 1, 2000) != 1)
			break;
		r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
		if (r <= 0)
			break;
		if (n == 0 && ms != NULL) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			*ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return strdup(buf);
}

static char *http_get(const char *req)
{
	return http_send(req, strlen(req), NULL);
}

/*
 * Garbage on /metrics' port gets 400 at once (issue 17, failure 5: a request
 * with a NUL byte was held until a timeout and closed without an answer).
 * Before the fix, those without a blank line got no answer and were closed at
 * a timeout, the others 404. How fast the 400 comes is printed, not asserted
 * (the machine is shared).
 */
static void test_http_garbage(void)
{
	static const struct {
		const char *req;
		size_t len;
	} bad[] = {
#define REQ(s) {s, sizeof(s) - 1}
		REQ("GET /metrics\0 HTTP/1.1\r\n\r\n"),
		REQ("GET /metrics HTTP/1.1\r\nHost: a\0b\r\n\r\n"),
		REQ("\0"),
		REQ("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"), /* a TLS hello */
		REQ("\xff\xfe\n"),
		REQ("GET /metrics\r\n\r\n"),
		REQ("GET /metrics HTTP/1.1 extra\r\n"),
		REQ("GET  /metrics HTTP/1.1\r\n"),
		REQ("get /metrics HTTP/1.1\r\n"),
		REQ("GET /met\x01rics HTTP/1.1\r\n\r\n"),
		REQ("GET /metrics HTTP/x.1\r\n\r\n"),
		REQ("GET /metrics HTTP/1.1\r\nHost: \x7f\r\n"),
		REQ("\r\n\r\n"),
#undef REQ
	};
	uint64_t bad0 = stats().http_bad;
	char big[9000];
	long worst = 0;

	for (size_t i = 0; i < RTE_DIM(bad); i++) {
		long ms = -1;
		char *r = http_send(bad[i].req, bad[i].len, &ms);

		SG_CHECK(r && strncmp(r, "HTTP/1.1 400 ", 13) == 0, "garbage %zu: %.20s after %ld ms",
			 i, r ? r : "nothing", ms);
		worst = ms > worst ? ms : worst;
		free(r);
	}
	printf("http garbage: %zu requests, each 400 within %ld ms (frame timeout 300 ms)\n",
	       RTE_DIM(bad), worst);
	/* more than the 8 KiB a request may have, and no end: 400 too */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /", 5);
	{
		long ms = -1;
		char *r = http_send(big, sizeof(big), &ms);

		SG_CHECK(r && strncmp(r, "HTTP/1.1 400 ", 13) == 0, "oversized: %.20s",
			 r ? r : "nothing");
		free(r);
	}
	SG_CHECK_EQ(stats().http_bad - bad0, RTE_DIM(bad) + 1);
	/* and the port still serves */
	{
		char *r = http_get("GET /metrics HTTP/1.0\r\n\r\n");

		SG_CHECK(r && strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0, "metrics after garbage");
		free(r);
	}
}

static void test_metrics(void)
{
	char *r = http_get("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");

	SG_CHECK(r && strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0, "metrics status");
	/* Values from the mock: lcore 1 has 222 packets, 1 drop, busy 51%. */
	SG_CHECK(r && strstr(r, "\nsigma_lcore_packets_total{lcore=\"1\",role=\"reducer\",numa=\"0\"} 222\n"),
		 "lcore packets");
	SG_CHECK(r && strstr(r, "sigma_lcore_drops_total{lcore=\"1\",role=\"reducer\",numa=\"0\"} 1\n"),
		 "lcore drops");
	SG_CHECK(r && strstr(r, "sigma_lcore_busy_ratio{lcore=\"1\",role=\"reducer\",numa=\"0\"} 0.5100\n"),
		 "busy ratio");
	SG_CHECK(r && strstr(r, "# TYPE sigma_lcore_ring_occupancy gauge\n") &&
			 strstr(r, "sigma_lcore_ring_occupancy{lcore=\"1\",role=\"reducer\",numa=\"0\"} 3\n"),
		 "ring occupancy");
	SG_CHECK(r && strstr(r, "# TYPE sigma_lcore_packets_total counter\n"), "TYPE line");
	SG_CHECK(r && strstr(r, "sigma_ctl_refusals_total{reason=\"auth_failed\"} 4\n"),
		 "refusal counter");
	/* drops by reason; a reason the agent left unterminated is cut at 47 */
	SG_CHECK(r && strstr(r, "# TYPE sigma_drops_total counter\n"
			      "sigma_drops_total{reason=\"engine_short\"} 7\n"
			      "sigma_drops_total{reason=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"
			      " 0\n"), "drops by reason: %s", r ? strstr(r, "sigma_drops") : "");
	{
		/* each job's mode, as created (deterministic was listed as sync) */
		char want[160];

		snprintf(want, sizeof(want), "\nsigma_job_info{sigma_job=\"%d\",workers=\"64\","
			 "dtype=\"fp32\",mode=\"deterministic\",keys=\"fixed\"} 1\n", determ_id);
		SG_CHECK(r && strstr(r, want), "no '%s' in the metrics", want + 1);
		snprintf(want, sizeof(want), "\nsigma_job_info{sigma_job=\"%lld\",workers=\"3\","
			 "dtype=\"any\",mode=\"sync\",keys=\"open\"} 1\n", open_any_id);
		SG_CHECK(r && strstr(r, want), "no '%s' in the metrics", want + 1);
		snprintf(want, sizeof(want), "\nsigma_job_slots_budget{sigma_job=\"%lld\"} 10000\n",
			 open_any_id);
		SG_CHECK(r && strstr(r, want) && strstr(r, "# TYPE sigma_job_slots_budget gauge\n") &&
			 strstr(r, "# TYPE sigma_job_keys gauge\n"), "no '%s' in the metrics",
			 want + 1);
	}
	free(r);
	r = http_get("GET /secret HTTP/1.1\r\n\r\n");
	SG_CHECK(r && strncmp(r, "HTTP/1.1 404", 12) == 0, "404");
	free(r);
	r = http_get("BREW /metrics HTCPCP/1.0\r\n\r\n");
	SG_CHECK(r && strncmp(r, "HTTP/1.1 400", 12) == 0, "400");
	free(r);
	r = http_get("POST /metrics HTTP/1.1\r\n\r\n");
	SG_CHECK(r && strncmp(r, "HTTP/1.1 405", 12) == 0, "405");
	free(r);
	SG_CHECK(stats().metrics_scrapes == 1 && stats().http_bad == 3, "http counters");
}

static void test_conn_limit(void)
{
	struct sg_ctl_server_stats before = stats();
	int fds[20], i, closed = 0;

	/* max_conns is 16: the 4 beyond it are accepted and closed at once. */
	for (i = 0; i < 20; i++)
		fds[i] = raw_unix();
	for (i = 0; i < 20; i++)
		closed += raw_closed_within(fds[i], i < 16 ? 20 : 1000);
	SG_CHECK_EQ(closed, 4);
	SG_CHECK_EQ(stats().conns_refused - before.conns_refused, 4);
	for (i = 0; i < 20; i++)
		close(fds[i]);
}

/*
 * Mutated requests: every valid request of the API with random bytes flipped,
 * inserted or cut, thousands of times. The server must stay up and correct.
 */
static void test_mutations(void)
{
	static const char *const seeds[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_create\",\"params\":{\"workers\":4,"
		"\"dtype\":\"fp16\",\"mode\":\"async\",\"partition_bytes\":65536,\"tensors\":[{\"name\":"
		"\"a\",\"elems\":100000},{\"elems\":7}]}}",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"job_placement\",\"params\":{\"id\":2,"
		"\"detail\":true}}",
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"layout_set\",\"params\":{\"idle\":[{\"lcore\":"
		"1,\"policy\":\"sleep\"}],\"keymap\":[0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,"
		"1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1]}}",
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"node_heartbeat\",\"params\":{\"name\":\"g9\","
		"\"kind\":\"gpu\",\"gbps\":25.5}}",
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"log_level_set\",\"params\":{\"pattern\":"
		"\"sigma.nothing\",\"level\":\"info\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"job_destroy\",\"params\":{\"id\":3}}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"stats_get\"}",
	};
	static const char alphabet[] = "{}[]\":,0123456789-.eE \\abcdefghijklmnopqrstuvwxyz\x80\xff";
	uint64_t x = 0x9e3779b97f4a7c15ull;
	char frame[2048];
	int fd = raw_unix(), i, sent = 0;
	struct sg_ctl_client *c;
	json_t *r;
	long code;

	for (i = 0; i < 3000 && fd >= 0; i++) {
		const char *seed = seeds[i % RTE_DIM(seeds)];
		size_t len = strlen(seed), k, nmut;

		memcpy(frame, seed, len);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		for (nmut = 1 + x % 4, k = 0; k < nmut; k++) {
			size_t pos;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			pos = (size_t)(x >> 8) % len;
			switch (x % 3) {
			case 0: /* replace */
				frame[pos] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
				break;
			case 1: /* cut */
				len = pos + 1;
				break;
			default: /* insert */
				if (len < sizeof(frame) - 2) {
					memmove(frame + pos + 1, frame + pos, len - pos);
					frame[pos] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
					len++;
				}
			}
		}
		for (k = 0; k < len; k++)
			if (frame[k] == '\n' || frame[k] == '\0')
				frame[k] = ' ';
		frame[len++] = '\n';
		if (send(fd, frame, len, MSG_NOSIGNAL) != (ssize_t)len)
			break;
		sent++;
		/* Drain answers now and then so neither side's buffers fill. */
		if (i % 50 == 49) {
			char b[65536];

			while (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
				;
		}
	}
	SG_CHECK_EQ(sent, 3000);
	if (fd >= 0)
		close(fd);
	/* Still serving, and still right. */
	c = sg_ctl_client_connect(sock_path, NULL, 0, 2000);
	r = call(c, "node_info", NULL, &code);
	SG_CHECK(r != NULL, "node_info after the mutations: %ld", code);
	json_decref(r);
	sg_ctl_client_close(c);
}

static void test_bad_config(void)
{
	struct sg_ctl_server_config cfg;

	mock_config(&cfg, &mock, NULL);
	cfg.secret_len = 8; /* too short for TCP */
	SG_CHECK(sg_ctl_server_create(&cfg) == NULL && errno == EINVAL, "short secret");
	mock_config(&cfg, &mock, NULL);
	cfg.ops = NULL;
	SG_CHECK(sg_ctl_server_create(&cfg) == NULL && errno == EINVAL, "no ops");
	mock_config(&cfg, &mock, NULL);
	cfg.tcp_addr = "localhost:80";
	SG_CHECK(sg_ctl_server_create(&cfg) == NULL && errno == EINVAL, "bad address");
	mock_config(&cfg, &mock, NULL);
	cfg.tcp_port = tcp_port; /* in use */
	SG_CHECK(sg_ctl_server_create(&cfg) == NULL && errno == EADDRINUSE, "port in use");
	SG_CHECK(sg_ctl_server_create(NULL) == NULL && errno == EINVAL, "NULL config");
	SG_CHECK(sg_ctl_client_connect("nonsense", NULL, 0, 100) == NULL && errno == EINVAL,
		 "bad target");
}

/* Which targets need the secret: the one rule the client, sigmactl and sigmad share. */
static void test_target_kind(void)
{
	static const struct {
		const char *t;
		bool tcp;
	} cases[] = {
		{"127.0.0.1:7070", true}, {"tcp:127.0.0.1:7070", true}, {"host:1", true},
		{"tcp:/odd", true},       {"unix:/run/s.sock", false}, {"unix:rel.sock", false},
		{"/run/s.sock", false},   {"./s.sock", false},          {"", true},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		SG_CHECK(sg_ctl_target_is_tcp(cases[i].t) == cases[i].tcp, "\"%s\": tcp %d",
			 cases[i].t, !cases[i].tcp);
}

/*
 * Two servers in one process, as a node and a plain coordinator (test_agent): the
 * mock's own methods are registered for mock_ops only, so a server made with
 * another table (the same callbacks) answers the node methods as a node that
 * registers none: "not supported", and log_level_set by setting rte_log itself;
 * both list the same methods, and the mock's server still runs the mock's.
 */
static void test_two_servers(void)
{
	static struct sg_ctl_agent_ops other_ops;
	static struct mock_agent other;
	struct sg_ctl_server_config cfg = {.tcp_disable = true};
	struct sg_ctl_client *c, *m;
	struct sg_ctl_server *s2;
	char path[128], km[512];
	unsigned int changes = mock.layout_changes;
	json_t *r, *r2;
	long code;

	other_ops = mock_ops;
	mock_init(&other);
	snprintf(path, sizeof(path), "%s/other.sock", tmpdir);
	cfg.unix_path = path;
	cfg.ops = &other_ops;
	cfg.ops_arg = &other;
	s2 = sg_ctl_server_create(&cfg);
	c = sg_ctl_client_connect(path, NULL, 0, 2000);
	m = sg_ctl_client_connect(sock_path, NULL, 0, 2000);
	SG_CHECK(s2 != NULL && c != NULL && m != NULL, "second server: %s", strerror(errno));
	if (s2 == NULL || c == NULL || m == NULL)
		goto out;
	/* the callbacks are the server's: they work on both */
	r = call(c, "node_info", NULL, &code);
	SG_CHECK(r && !strcmp(json_string_value(json_object_get(r, "name")), "mock-node"),
		 "node_info on the second server: %ld", code);
	json_decref(r);
	snprintf(km, sizeof(km), "{\"keymap\":[");
	for (int i = 0; i < SG_BUCKETS; i++)
		strcat(km, i ? ",0" : "0");
	strcat(km, "]}");
	call_refused(c, "layout_get", NULL, SG_CTL_ERR_NOT_SUPPORTED,
		     "not supported by this node's agent");
	call_refused(c, "layout_get", "{\"x\":1}", SG_CTL_ERR_INVALID_PARAMS, "takes none");
	call_refused(c, "layout_set", km, SG_CTL_ERR_NOT_SUPPORTED,
		     "not supported by this node's agent");
	call_refused(c, "drain", NULL, SG_CTL_ERR_NOT_SUPPORTED, "not supported by this node's agent");
	call_refused(c, "verbs_info", NULL, SG_CTL_ERR_NOT_SUPPORTED,
		     "not supported by this node's agent");
	call_refused(c, "verbs_rc_connect", "{}", SG_CTL_ERR_NOT_SUPPORTED,
		     "not supported by this node's agent");
	call_refused(c, "verbs_rc_disconnect", "{\"peer\":0}", SG_CTL_ERR_NOT_SUPPORTED,
		     "not supported by this node's agent");
	SG_CHECK(!other.draining && other.layout_changes == 0 && other.rc_calls == 0 &&
		 other.disc_calls == 0 && mock.layout_changes == changes,
		 "no node method reached a mock");
	r = call(c, "log_level_set", "{\"pattern\":\"sigma.nothing\",\"level\":\"info\"}", &code);
	SG_CHECK(r && !strcmp(json_string_value(json_object_get(r, "level")), "info") &&
		 other.last_log_level == 0, "log_level_set by the server itself: %ld", code);
	json_decref(r);
	/* the mock's server: the mock's own */
	r = call(m, "layout_get", NULL, &code);
	SG_CHECK(r && json_integer_value(json_object_get(r, "reducers")) == 2, "layout_get: %ld",
		 code);
	json_decref(r);
	r = call(c, "rpc_get_methods", NULL, &code);
	r2 = call(m, "rpc_get_methods", NULL, &code);
	SG_CHECK(r && r2 && json_array_size(r) > 1 && json_equal(r, r2), "the same methods listed");
	json_decref(r);
	json_decref(r2);
out:
	sg_ctl_client_close(c);
	sg_ctl_client_close(m);
	sg_ctl_server_destroy(s2);
}

int main(void)
{
	struct sg_ctl_server_config cfg;
	pthread_t dp;
	unsigned long r0;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sg_ctl_test.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		SG_TEST_SKIP_ALL("cannot make a temporary folder");
	snprintf(sock_path, sizeof(sock_path), "%s/ctl.sock", tmpdir);
	mock_init(&mock);
	mock_config(&cfg, &mock, sock_path);
	srv = sg_ctl_server_create(&cfg);
	if (srv == NULL)
		SG_TEST_SKIP_ALL("cannot start the server on loopback: %s", strerror(errno));
	tcp_port = sg_ctl_server_tcp_port(srv);
	http_port = sg_ctl_server_metrics_port(srv);
	SG_CHECK(tcp_port != 0 && http_port != 0, "ports bound");
	pthread_create(&dp, NULL, dp_main, NULL);

	test_verbs();
	test_unix_roundtrips();
	r0 = __atomic_load_n(&dp_rounds, __ATOMIC_RELAXED);
	test_tcp_auth();
	test_garbage();
	test_slow();
	/* The summing thread went on during the abuse, and every sum was right. */
	SG_CHECK(__atomic_load_n(&dp_rounds, __ATOMIC_RELAXED) > r0 + 10, "dataplane stalled");
	test_metrics();
	test_http_garbage();
	test_conn_limit();
	test_mutations();
	test_bad_config();
	test_target_kind();
	test_two_servers();
	{
		/* a draining node takes no RC connection */
		struct sg_ctl_client *c = sg_ctl_client_connect(sock_path, NULL, 0, 2000);
		long code;

		json_decref(call(c, "drain", NULL, &code));
		call_refused(c, "verbs_rc_connect", RC_OK ",\"gid\":\"0000000000000000000000000000002b\","
			     "\"addr\":4096}", SG_CTL_ERR_REFUSED, "draining");
		sg_ctl_client_close(c);
	}

	__atomic_store_n(&dp_stop, 1, __ATOMIC_RELAXED);
	pthread_join(dp, NULL);
	SG_CHECK_EQ(dp_errors, 0);
	printf("dataplane rounds during the test: %lu\n", dp_rounds);
	sg_ctl_server_destroy(srv);
	SG_CHECK(access(sock_path, F_OK) != 0, "socket file removed");
	rmdir(tmpdir);
	return sg_test_finish("ctl_server");
}
