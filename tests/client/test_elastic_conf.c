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
 * auth = mac: the job's descriptor and a rank's own (its keys) both refused with
 * EOPNOTSUPP naming it, before etcd (the same descriptor without auth gets there).
 */
static void test_auth(void)
{
	static const char *const descs[] = {
		DESC ";auth=mac;key_id=0a1b2c3d",
		DESC ";auth=mac;key_id=0a1b2c3d;rank=0;keys="
		     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
		     "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"};
	char err[SIGMA_ERR_LEN];

	for (size_t i = 0; i < sizeof(descs) / sizeof(descs[0]); i++) {
		int rc = try_open((struct sigma_elastic_conf){.descriptor = descs[i]}, err,
				  sizeof(err));

		SG_CHECK(rc == EOPNOTSUPP && strstr(err, "job 7 has auth = mac") != NULL &&
			 strstr(err, "elastic job does not support") != NULL &&
			 strstr(err, "000102") == NULL,
			 "auth descriptor %zu: errno %d (want EOPNOTSUPP naming auth): %s", i, rc, err);
	}
	SG_CHECK_EQ(try_open((struct sigma_elastic_conf){0}, err, sizeof(err)), EHOSTUNREACH);
}

int main(void)
{
	test_idle_ms();
	test_others();
	test_auth();
	return sg_test_finish("elastic_conf");
}
