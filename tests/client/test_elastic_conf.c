/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma_elastic_open()'s range checks (sigma_elastic.h): every bounded option
 * out of its range is refused with EINVAL and a message naming it, before etcd
 * is asked anything (the endpoint here answers nothing, so a value that passes
 * the checks fails later with EHOSTUNREACH: the reference that tells the two
 * apart).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sg_auth.h"
#include "sg_test.h"
#include "sigma_elastic.h"

#define DESC "sigma-job=1;id=7;workers=2;token=0123456789abcdef;dtype=fp32;mode=deterministic;" \
	     "partition_bytes=65536;chunk_bytes=1424;node=n1,127.0.0.1,9300,cpu,1,1"

/* Open rank 0 with @p c's options; @return errno (0: opened), the message in @p err. */
static int try_open(struct sigma_elastic_conf c, char *err, size_t errlen)
{
	struct sigma_elastic *e;

	/* port 1 on loopback: refused at once, no etcd there */
	c.etcd = (struct sg_etcd_conf){.endpoints = "http://127.0.0.1:1", .timeout_ms = 200};
	c.descriptor = c.descriptor ? c.descriptor : DESC;
	c.cluster = "conf";
	c.confirm_ms = c.confirm_ms ? c.confirm_ms : 200;
	errno = 0;
	e = sigma_elastic_open(&c, err, errlen);
	if (e != NULL) {
		sigma_elastic_close(e);
		return 0;
	}
	return errno;
}

static void test_idle_ms(void)
{
	static const uint32_t bad[] = {1, 9, 600001, 4294967295u};
	static const uint32_t good[] = {0, 10, 1000, 600000};
	char err[SIGMA_ERR_LEN];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = try_open((struct sigma_elastic_conf){.idle_ms = bad[i]}, err, sizeof(err));

		SG_CHECK(rc == EINVAL && strstr(err, "idle_ms") != NULL,
			 "idle_ms %u: errno %d (want EINVAL naming idle_ms): %s", bad[i], rc, err);
	}
	/* in range (0: the default): past the checks, to etcd, which is not there */
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int rc = try_open((struct sigma_elastic_conf){.idle_ms = good[i]}, err, sizeof(err));

		SG_CHECK(rc == EHOSTUNREACH, "idle_ms %u: errno %d (want EHOSTUNREACH): %s",
			 good[i], rc, err);
	}
}

/* The bounds that were there before: still enforced, still named. */
static void test_others(void)
{
	char err[SIGMA_ERR_LEN];

	SG_CHECK_EQ(try_open((struct sigma_elastic_conf){.poll_ms = 9}, err, sizeof(err)), EINVAL);
	SG_CHECK(strstr(err, "poll_ms") != NULL, "poll_ms: %s", err);
	SG_CHECK_EQ(try_open((struct sigma_elastic_conf){.margin = 1001}, err, sizeof(err)), EINVAL);
	SG_CHECK(strstr(err, "margin") != NULL, "margin: %s", err);
	SG_CHECK_EQ(try_open((struct sigma_elastic_conf){.rank = 2}, err, sizeof(err)), EINVAL);
}

/*
 * auth = mac: the job's descriptor (no keys) is refused with EACCES; a rank's own
 * that proposes needs the job's token (EINVAL naming job_token), which must be the
 * job's (its wire part and key id: EINVAL); a job_token for a job without auth is
 * refused. The right ones, and a rank that proposes nothing without one, get past
 * the checks to etcd (EHOSTUNREACH).
 */
static void test_auth(void)
{
	static const char keys[] =
		"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
		"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f";
	char tok[65], other[65], job_desc[512], own[768], err[SIGMA_ERR_LEN];
	uint8_t k[SG_AUTH_KEY_BYTES];
	int rc;

	/* the DESC's wire token, then 48 hex digits of the rest */
	snprintf(tok, sizeof(tok), "0123456789abcdef%048d", 7);
	snprintf(other, sizeof(other), "0123456789abcdef%048d", 8);
	SG_CHECK_EQ(sg_auth_job_key_from_token(tok, k), 0);
	snprintf(job_desc, sizeof(job_desc), DESC ";auth=mac;key_id=%08x", sg_auth_key_id(k));
	snprintf(own, sizeof(own), "%s;rank=0;keys=%s", job_desc, keys);

	rc = try_open((struct sigma_elastic_conf){.descriptor = job_desc, .job_token = tok}, err,
		      sizeof(err));
	SG_CHECK(rc == EACCES && strstr(err, "holds no rank's keys") != NULL,
		 "the job's descriptor: errno %d: %s", rc, err);
	rc = try_open((struct sigma_elastic_conf){.descriptor = own, .rank = 1}, err,
		      sizeof(err));
	SG_CHECK(rc == EACCES && strstr(err, "another rank's keys") != NULL,
		 "rank 0's descriptor as rank 1: errno %d: %s", rc, err);
	rc = try_open((struct sigma_elastic_conf){.descriptor = own}, err, sizeof(err));
	SG_CHECK(rc == EINVAL && strstr(err, "job_token") != NULL && strstr(err, "000102") == NULL,
		 "a proposer without the token: errno %d: %s", rc, err);
	rc = try_open((struct sigma_elastic_conf){.descriptor = own, .job_token = other}, err,
		      sizeof(err));
	SG_CHECK(rc == EINVAL && strstr(err, "is not job 7's token") != NULL &&
		 strstr(err, other + 16) == NULL, "another token: errno %d: %s", rc, err);
	tok[3] ^= 1; /* another wire token */
	rc = try_open((struct sigma_elastic_conf){.descriptor = own, .job_token = tok}, err,
		      sizeof(err));
	SG_CHECK(rc == EINVAL && strstr(err, "is not job 7's token") != NULL,
		 "another wire token: errno %d: %s", rc, err);
	tok[3] ^= 1;
	rc = try_open((struct sigma_elastic_conf){.job_token = tok}, err, sizeof(err));
	SG_CHECK(rc == EINVAL && strstr(err, "has none") != NULL, "a job without auth: %d: %s",
		 rc, err);
	/* past the checks: to etcd, which is not there */
	rc = try_open((struct sigma_elastic_conf){.descriptor = own, .job_token = tok}, err,
		      sizeof(err));
	SG_CHECK(rc == EHOSTUNREACH, "the proposer with its token: errno %d: %s", rc, err);
	rc = try_open((struct sigma_elastic_conf){.descriptor = own, .propose = -1}, err,
		      sizeof(err));
	SG_CHECK(rc == EHOSTUNREACH, "a rank that proposes nothing: errno %d: %s", rc, err);
	SG_CHECK_EQ(try_open((struct sigma_elastic_conf){0}, err, sizeof(err)), EHOSTUNREACH);
}

int main(void)
{
	test_idle_ms();
	test_others();
	test_auth();
	return sg_test_finish("elastic_conf");
}
