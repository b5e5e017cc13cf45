/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job descriptor: good ones parse into the fields and a ready sigma_conf
 * (weights to the same doubles, whichever way they were written), what the
 * writer writes reads back, every kind of garbage is refused with a message
 * that names the field, and thousands of random mutations of a good one never
 * crash the parser nor come back different from what they were read as. An
 * async job refuses failover at sigma_open_job().
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_desc.h"
#include "sg_test.h"
#include "sigma.h"

#define GOOD "sigma-job=1;id=7;workers=4;token=0123456789abcdef;dtype=fp32;mode=deterministic;" \
	     "partition_bytes=4096000;chunk_bytes=1424;node=cpu-a,10.0.0.21,9300,cpu,100,0.5;" \
	     "node=gpu_b.1,10.0.0.22,9301,gpu,25,0.10000000000000001"

static void test_good(void)
{
	struct sg_desc d, d2;
	struct sigma_job job;
	char err[256], buf[SG_DESC_MAX];
	int n;

	SG_CHECK_EQ(sg_desc_parse(GOOD, &d, err, sizeof(err)), 0);
	SG_CHECK(d.id == 7 && d.workers == 4 && d.token == 0x0123456789abcdefull &&
		 d.dtype == SG_DTYPE_FP32 && d.mode == SG_MODE_DETERM &&
		 d.partition_bytes == 4096000 && d.chunk_bytes == 1424 && d.n_nodes == 2, "fields");
	SG_CHECK(strcmp(d.nodes[0].name, "cpu-a") == 0 && strcmp(d.nodes[0].addr, "10.0.0.21") == 0 &&
		 d.nodes[0].port == 9300 && d.nodes[0].kind == SG_NODE_CPU && d.nodes[0].gbps == 100 &&
		 d.nodes[0].weight == 0.5, "node 0");
	SG_CHECK(strcmp(d.nodes[1].name, "gpu_b.1") == 0 && d.nodes[1].port == 9301 &&
		 d.nodes[1].kind == SG_NODE_GPU && d.nodes[1].gbps == 25 && d.nodes[1].weight == 0.1,
		 "node 1: weight %.17g", d.nodes[1].weight);
	/* the writer's form reads back as the same descriptor */
	n = sg_desc_format(&d, buf, sizeof(buf), err, sizeof(err));
	SG_CHECK(n > 0 && (size_t)n == strlen(buf), "format: %d %s", n, err);
	SG_CHECK_EQ(sg_desc_parse(buf, &d2, err, sizeof(err)), 0);
	SG_CHECK(memcmp(&d, &d2, sizeof(d)) == 0, "round trip: %s", buf);
	SG_CHECK_EQ(sg_desc_format(&d, buf, 40, err, sizeof(err)), -ENOSPC);
	/* the shortest round-trip form (Python's repr) gives the same double; so does an exponent */
	SG_CHECK_EQ(sg_desc_parse("sigma-job=1;id=1;workers=1;token=FFFFFFFFFFFFFFFF;dtype=bf16;"
				  "partition_bytes=8;chunk_bytes=8;node=n,1.2.3.4,1,gpu,1e-3,0.1\n",
				  &d2, err, sizeof(err)), 0);
	SG_CHECK(d2.nodes[0].weight == d.nodes[1].weight && d2.nodes[0].gbps == 0.001 &&
		 d2.mode == SG_MODE_SYNC && d2.token == UINT64_MAX, "defaults and forms");
	/* a ready sigma_conf */
	SG_CHECK_EQ(sigma_job_parse("  " GOOD "\r\n", &job, err, sizeof(err)), 0);
	SG_CHECK(job.conf.job == 7 && job.conf.nworkers == 4 && job.conf.token == 0x0123456789abcdefull &&
		 job.conf.nnodes == 2 && job.conf.nodes == job.nodes && job.conf.weights == job.weights &&
		 job.conf.partition_bytes == 4096000 && job.conf.chunk_bytes == 1424 &&
		 strcmp(job.conf.nodes[1].name, "gpu_b.1") == 0 &&
		 strcmp(job.conf.nodes[1].addr, "10.0.0.22") == 0 && job.conf.nodes[1].port == 9301 &&
		 job.weights[0] == 0.5 && job.dtype == SG_DTYPE_FP32 && job.mode == SG_MODE_DETERM,
		 "sigma_job");
	{
		struct sigma_session *s;
		struct sigma_conf base = {.window = 8, .local_addr = "127.0.0.1"};

		job.conf.rank = 3;
		s = sigma_open(&job.conf);
		SG_CHECK(s != NULL, "sigma_open of a parsed job: %s", strerror(errno));
		sigma_close(s);
		s = sigma_open_job(GOOD, 3, &base, err, sizeof(err));
		SG_CHECK(s != NULL, "sigma_open_job: %s", err);
		/* the job sums fp32: an fp16 tensor is refused at once */
		SG_CHECK(s != NULL && sigma_tensor_register(s, "h", 0, SG_DTYPE_FP16, 10, 0) == NULL &&
			 errno == EINVAL, "fp16 tensor in an fp32 job");
		SG_CHECK(s != NULL && sigma_tensor_register(s, "f", 0, SG_DTYPE_FP32, 10, 0) != NULL,
			 "fp32 tensor");
		sigma_close(s);
		SG_CHECK(sigma_open_job(GOOD, 4, NULL, err, sizeof(err)) == NULL && errno == EINVAL &&
			 strstr(err, "rank 4: the job has 4 workers") != NULL, "rank: %s", err);
		SG_CHECK(sigma_open_job("nope", 0, NULL, err, sizeof(err)) == NULL && errno == EINVAL &&
			 strstr(err, "job descriptor:") != NULL, "garbage: %s", err);
	}
}

/* auth = mac: the job's descriptor (key id only) and a rank's own (its two keys). */
#define AUTH_JOB GOOD ";auth=mac;key_id=0a1B2c3d"
#define KEYS64 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" \
	       "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
#define AUTH_RANK2 AUTH_JOB ";rank=2;keys=" KEYS64

static void refused(const char *text, const char *needle);

static void test_auth(void)
{
	struct sg_desc d, d2;
	struct sigma_job job;
	struct sigma_conf base = {.local_addr = "127.0.0.1"};
	struct sigma_session *s;
	char err[256], buf[SG_DESC_MAX];
	bool ramp = true;

	SG_CHECK_EQ(sg_desc_parse(AUTH_JOB, &d, err, sizeof(err)), 0);
	SG_CHECK(d.auth && d.key_id == 0x0a1b2c3du && !d.has_keys, "the job's: %s", err);
	SG_CHECK_EQ(sg_desc_parse(AUTH_RANK2, &d, err, sizeof(err)), 0);
	for (int i = 0; i < 64; i++)
		ramp &= d.keys[i] == i;
	SG_CHECK(d.auth && d.has_keys && d.rank == 2 && ramp, "rank 2's keys");
	SG_CHECK(sg_desc_format(&d, buf, sizeof(buf), err, sizeof(err)) > 0 &&
		 strstr(buf, ";auth=mac;key_id=0a1b2c3d;rank=2;keys=" KEYS64) != NULL, "format: %s",
		 buf);
	SG_CHECK(sg_desc_parse(buf, &d2, err, sizeof(err)) == 0 && memcmp(&d, &d2, sizeof(d)) == 0,
		 "round trip");
	/* without auth the form is as before: no auth field written */
	SG_CHECK(sg_desc_parse(GOOD, &d, err, sizeof(err)) == 0 && !d.auth &&
		 sg_desc_format(&d, buf, sizeof(buf), err, sizeof(err)) > 0 &&
		 strstr(buf, "auth") == NULL, "no auth: %s", buf);
	SG_CHECK_EQ(sigma_job_parse(AUTH_RANK2, &job, err, sizeof(err)), 0);
	SG_CHECK(job.auth && job.has_keys && job.rank == 2 && job.conf.rank == 2 &&
		 job.conf.auth_keys == job.auth_keys && job.conf.auth_key_id == 0x0a1b2c3du &&
		 job.auth_keys[63] == 63, "sigma_job with keys");
	SG_CHECK(sigma_job_parse(AUTH_JOB, &job, err, sizeof(err)) == 0 && job.auth &&
		 !job.has_keys && job.conf.auth_keys == NULL, "sigma_job without keys");
	/* a session opens only from its own rank's descriptor */
	SG_CHECK(sigma_open_job(AUTH_JOB, 2, &base, err, sizeof(err)) == NULL && errno == EACCES &&
		 strstr(err, "holds no rank's keys") != NULL, "the job's descriptor: %s", err);
	SG_CHECK(sigma_open_job(AUTH_RANK2, 1, &base, err, sizeof(err)) == NULL && errno == EACCES &&
		 strstr(err, "holds rank 2's keys, not rank 1's") != NULL, "another's: %s", err);
	s = sigma_open_job(AUTH_RANK2, 2, &base, err, sizeof(err));
	SG_CHECK(s != NULL, "rank 2's own: %s", err);
	sigma_close(s);
	refused(GOOD ";auth=none;key_id=00000000", "auth 'none' is not mac");
	refused(GOOD ";auth=mac", "auth=mac and key_id= go together");
	refused(GOOD ";key_id=00000000", "auth=mac and key_id= go together");
	refused(GOOD ";auth=mac;key_id=0000000", "key_id '0000000' is not 8 hex digits");
	refused(GOOD ";auth=mac;key_id=0000000g", "is not 8 hex digits");
	refused(AUTH_JOB ";rank=1", "rank= and keys= go together");
	refused(AUTH_JOB ";keys=" KEYS64, "rank= and keys= go together");
	refused(GOOD ";rank=1;keys=" KEYS64, "keys= without auth=mac");
	refused(AUTH_JOB ";rank=4;keys=" KEYS64, "rank 4: the job has 4 workers");
	refused(AUTH_JOB ";rank=64;keys=" KEYS64, "rank '64' is not 0..63");
	refused(AUTH_RANK2 ";rank=2", "rank= given twice");
	/* a key that does not read is not echoed: it is a secret */
	refused(AUTH_JOB ";rank=1;keys=" KEYS64 "00", "keys is not 128 hex digits");
	SG_CHECK(sg_desc_parse(AUTH_JOB ";rank=1;keys=" KEYS64 "zz", &d, err, sizeof(err)) ==
		 -EINVAL && strstr(err, "3f3") == NULL && strstr(err, "000102") == NULL,
		 "no key in the message: %s", err);
}

/* A job in async mode: no failover (its stores cannot be rebuilt on a survivor). */
static int no_membership(void *arg, uint64_t *gen, const char *const *names, unsigned int n,
			 bool *alive)
{
	(void)arg, (void)gen, (void)names, (void)n, (void)alive;
	return 0;
}

static void test_async_failover(void)
{
	static const char *async = "sigma-job=1;id=7;workers=2;token=0123456789abcdef;dtype=fp32;"
				   "mode=async;partition_bytes=4096;chunk_bytes=1024;"
				   "node=a,127.0.0.1,9300,cpu,1,1";
	struct sigma_conf base = {.local_addr = "127.0.0.1", .failover = true};
	struct sigma_session *s;
	char err[512] = "";

	SG_CHECK(sigma_open_job(async, 0, &base, err, sizeof(err)) == NULL && errno == EOPNOTSUPP &&
			 strstr(err, "not supported in async mode") != NULL,
		 "async with failover: %s", err);
	base.failover = false;
	base.membership = no_membership;
	SG_CHECK(sigma_open_job(async, 0, &base, err, sizeof(err)) == NULL && errno == EOPNOTSUPP,
		 "async with a membership source");
	base.membership = NULL;
	s = sigma_open_job(async, 0, &base, err, sizeof(err));
	SG_CHECK(s != NULL, "async without failover: %s", err);
	sigma_close(s);
}

/* Replace the first @p from in GOOD by @p to. */
static const char *good_with(const char *from, const char *to)
{
	static char buf[4096];
	const char *p = strstr(GOOD, from);

	if (p == NULL)
		return "";
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(p - GOOD), GOOD, to, p + strlen(from));
	return buf;
}

static void refused(const char *text, const char *needle)
{
	struct sg_desc d;
	struct sigma_job job;
	char err[512] = "", err2[512] = "";
	int rc = sg_desc_parse(text, &d, err, sizeof(err));

	SG_CHECK(rc == -EINVAL && strncmp(err, "job descriptor: ", 16) == 0 &&
		 strstr(err, needle) != NULL, "'%.80s': %d '%s' (want '%s')", text ? text : "(null)",
		 rc, err, needle);
	SG_CHECK(sigma_job_parse(text, &job, err2, sizeof(err2)) == rc && strcmp(err, err2) == 0,
		 "sigma_job_parse agrees");
}

static void test_garbage(void)
{
	static char big[SG_DESC_MAX + 10], many[SG_DESC_MAX];
	struct sg_desc d;
	char err[256];
	int off;

	refused(NULL, "none given");
	refused("", "empty");
	refused(" \n\t", "empty");
	refused("id=7;workers=4", "not a Sigma job descriptor");
	refused(good_with("sigma-job=1", "sigma-job=2"), "version '2'");
	refused(good_with("sigma-job=1", "sigma-job=01"), "version");
	refused(good_with(";id=7", ";color=7"), "unknown key 'color'");
	refused(good_with(";id=7", ""), "no id= field");
	refused(good_with(";workers=4", ""), "no workers= field");
	refused(good_with(";token=0123456789abcdef", ""), "no token= field");
	refused(good_with(";dtype=fp32", ""), "no dtype= field");
	refused(good_with(";chunk_bytes=1424", ""), "no chunk_bytes= field");
	refused(good_with(";partition_bytes=4096000", ""), "no partition_bytes= field");
	refused("sigma-job=1;id=7;workers=4;token=0123456789abcdef;dtype=fp32;"
		"partition_bytes=4096000;chunk_bytes=1424", "no node= field");
	refused(good_with("id=7", "id=7;id=8"), "id= given twice");
	refused(good_with("id=7", "id=0"), "id '0'");
	refused(good_with("id=7", "id=4294967296"), "id '4294967296'");
	refused(good_with("id=7", "id=-7"), "id '-7'");
	refused(good_with("id=7", "id=7x"), "id '7x'");
	refused(good_with("id=7", "id=99999999999999999999999"), "id");
	refused(good_with("workers=4", "workers=65"), "workers '65' is not 1..64");
	refused(good_with("workers=4", "workers=0"), "workers");
	refused(good_with("workers=4", "workers=+4"), "workers");
	refused(good_with("workers=4", "workers=04"), "workers");
	refused(good_with("workers=4", "workers="), "workers");
	refused(good_with("token=0123456789abcdef", "token=0123456789abcde"), "16 hex digits");
	refused(good_with("token=0123456789abcdef", "token=0123456789abcdeg"), "16 hex digits");
	refused(good_with("token=0123456789abcdef", "token=0x23456789abcdef"), "16 hex digits");
	refused(good_with("dtype=fp32", "dtype=fp33"), "dtype 'fp33'");
	refused(good_with("dtype=fp32", "dtype=anything"), "dtype 'anything' is not fp32, fp64, "
		"fp16, bf16, int32, int64, int8, uint8 or any");
	refused(good_with("dtype=fp32", "dtype="), "dtype ''");
	refused(good_with("mode=deterministic", "mode=eventual"), "mode 'eventual'");
	refused(good_with("partition_bytes=4096000", "partition_bytes=4096001"), "partition_bytes");
	refused(good_with("partition_bytes=4096000", "partition_bytes=8388608"), "partition_bytes");
	refused(good_with("chunk_bytes=1424", "chunk_bytes=8928"), "chunk_bytes '8928'");
	refused(good_with("chunk_bytes=1424", "chunk_bytes=1425"), "chunk_bytes");
	refused(good_with("partition_bytes=4096000", "partition_bytes=1000"),
		"chunk_bytes 1424 is larger than partition_bytes 1000");
	refused(good_with("cpu-a,10.0.0.21,9300,cpu,100,0.5", "cpu-a,10.0.0.21,9300,cpu,100"),
		"5 fields, want 6");
	refused(good_with("cpu,100,0.5", "cpu,100,0.5,7"), "more than 6 fields");
	refused(good_with("cpu-a,", "cpu/a,"), "name 'cpu/a'");
	refused(good_with("cpu-a,", ","), "name ''");
	refused(good_with("cpu-a,", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,"),
		"must be 1..63");
	refused(good_with("10.0.0.21", "10.0.0.256"), "address '10.0.0.256'");
	refused(good_with("10.0.0.21", "10.0.0"), "address");
	refused(good_with("10.0.0.21", "10.0.0.21.5"), "address");
	refused(good_with("10.0.0.21", "010.0.0.21"), "address");
	refused(good_with("10.0.0.21", "10..0.21"), "address");
	refused(good_with("10.0.0.21", "host.example"), "address");
	refused(good_with(",9300,", ",0,"), "UDP port '0'");
	refused(good_with(",9300,", ",65536,"), "UDP port");
	refused(good_with(",cpu,", ",tpu,"), "kind 'tpu'");
	refused(good_with(",100,0.5", ",0,0.5"), "gbps '0'");
	refused(good_with(",100,0.5", ",-1,0.5"), "gbps");
	refused(good_with(",100,0.5", ",inf,0.5"), "gbps");
	refused(good_with(",100,0.5", ",1e999,0.5"), "gbps");
	refused(good_with(",100,0.5", ",0x10,0.5"), "gbps");
	refused(good_with(",100,0.5", ",100,-0.5"), "weight '-0.5'");
	refused(good_with(",100,0.5", ",100,nan"), "weight");
	refused(good_with(",100,0.5", ",100,.5."), "weight");
	refused(good_with("node=gpu_b.1", "node=cpu-a"), "node 'cpu-a' is listed twice");
	refused(good_with(";id=7", ";;id=7"), "field 2 is empty");
	refused(GOOD ";", "is empty");
	refused(good_with(";id=7", ";id"), "field 2 ('id') is not key=value");
	refused(good_with(";id=7", ";=7"), "is not key=value");
	refused(good_with("id=7", "id=7\x01"), "byte 0x01");
	refused(good_with("id=7", "id=7 "), "byte 0x20");
	refused(good_with("cpu-a", "cpu\xc3\xa4"), "byte 0xc3");
	/* every weight 0 */
	refused("sigma-job=1;id=1;workers=1;token=0000000000000001;dtype=fp32;partition_bytes=8;"
		"chunk_bytes=8;node=a,1.2.3.4,1,cpu,1,0;node=b,1.2.3.5,1,cpu,1,0.0", "weight is 0");
	/* too long, and too many nodes */
	memset(big, 'a', sizeof(big) - 1);
	SG_CHECK_EQ(sg_desc_parse(big, &d, err, sizeof(err)), -E2BIG);
	off = snprintf(many, sizeof(many), "sigma-job=1;id=1;workers=1;token=0000000000000001;"
		       "dtype=fp32;partition_bytes=8;chunk_bytes=8");
	for (int i = 0; i < 65; i++)
		off += snprintf(many + off, sizeof(many) - (size_t)off, ";node=n%d,1.2.3.4,%d,cpu,1,1",
				i, i + 1);
	refused(many, "more than 64 nodes");
}

/*
 * dtype=any (an open job whose keys take the dtype of their first push): it reads and
 * writes back, and a session opened from it takes tensors of every dtype, each its own.
 */
static void test_dtype_any(void)
{
	static const char any[] = "sigma-job=1;id=9;workers=2;token=00000000000000aa;dtype=any;"
				  "partition_bytes=65536;chunk_bytes=8920;"
				  "node=n,127.0.0.1,9300,cpu,10,1";
	struct sigma_conf base = {.local_addr = "127.0.0.1"};
	struct sigma_session *s;
	struct sigma_job job;
	struct sg_desc d, d2;
	char err[256], buf[SG_DESC_MAX];

	SG_CHECK_EQ(sg_desc_parse(any, &d, err, sizeof(err)), 0);
	SG_CHECK_EQ(d.dtype, SG_DTYPE_ANY);
	SG_CHECK(sg_desc_format(&d, buf, sizeof(buf), err, sizeof(err)) > 0 &&
		 strstr(buf, ";dtype=any;") != NULL && sg_desc_parse(buf, &d2, err, sizeof(err)) == 0 &&
		 memcmp(&d, &d2, sizeof(d)) == 0, "dtype=any writes back: %s", buf);
	SG_CHECK_EQ(sg_desc_parse(good_with("dtype=fp32", "dtype=ANY"), &d, err, sizeof(err)), 0);
	SG_CHECK_EQ(d.dtype, SG_DTYPE_ANY);
	SG_CHECK_EQ(sigma_job_parse(any, &job, err, sizeof(err)), 0);
	SG_CHECK_EQ(job.dtype, SG_DTYPE_ANY);
	s = sigma_open_job(any, 1, &base, err, sizeof(err));
	SG_CHECK(s != NULL, "sigma_open_job of dtype any: %s", err);
	for (unsigned int dt = 0; s != NULL && dt < SG_DTYPE_COUNT; dt++)
		SG_CHECK(sigma_tensor_register(s, "t", dt, (enum sg_dtype)dt, 100, 0) != NULL,
			 "a %s tensor in a job of dtype any: %s", sg_dtype_name((enum sg_dtype)dt),
			 strerror(errno));
	/* any is a job's dtype, never a tensor's */
	SG_CHECK(s != NULL && sigma_tensor_register(s, "x", 100, SG_DTYPE_ANY, 100, 0) == NULL &&
		 errno == EINVAL, "a tensor of dtype any");
	sigma_close(s);
}

/* Random mutations of a good descriptor: no crash; what parses writes back the same. */
static void test_mutations(void)
{
	uint64_t x = 0x5eed;
	unsigned int parsed = 0;
	static const char alphabet[] = "=;,.0123456789abcdefxyz-_ \n\x01\xff";

	for (int it = 0; it < 20000; it++) {
		char t[1024], buf[SG_DESC_MAX], err[256];
		struct sg_desc d, d2;
		size_t len = strlen(GOOD);

		memcpy(t, GOOD, len + 1);
		for (int k = 0, m = 1 + (int)((x >> 7) % 4); k < m; k++) {
			size_t at;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			at = (size_t)(x % (len + 1));
			switch ((x >> 32) % 3) {
			case 0: /* overwrite */
				if (at < len)
					t[at] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
				break;
			case 1: /* delete */
				if (at < len) {
					memmove(t + at, t + at + 1, len - at);
					len--;
				}
				break;
			default: /* insert */
				if (len + 2 < sizeof(t)) {
					memmove(t + at + 1, t + at, len - at + 1);
					t[at] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
					len++;
				}
			}
		}
		if (sg_desc_parse(t, &d, err, sizeof(err)) != 0) {
			SG_CHECK(strncmp(err, "job descriptor: ", 16) == 0, "no reason for '%s'", t);
			continue;
		}
		parsed++;
		SG_CHECK(sg_desc_format(&d, buf, sizeof(buf), err, sizeof(err)) > 0 &&
			 sg_desc_parse(buf, &d2, err, sizeof(err)) == 0 &&
			 memcmp(&d, &d2, sizeof(d)) == 0, "'%s' does not read back", t);
	}
	printf("mutations: %u of 20000 still parse, each reads back the same\n", parsed);
	SG_CHECK(parsed > 100 && parsed < 19000, "mutations parsed: %u", parsed);
}

int main(void)
{
	test_auth();
	test_good();
	test_async_failover();
	test_dtype_any();
	test_garbage();
	test_mutations();
	return sg_test_finish("client_desc");
}
