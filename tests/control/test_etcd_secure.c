/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg_etcd against a real etcd with TLS and authentication, as production runs
 * it (skipped when etcd, etcdctl or openssl is absent): a CA and certificates
 * made here with openssl (etcd_certs.sh), etcd on free loopback ports with
 * --cert-file, --key-file, --trusted-ca-file and --client-cert-auth, a user
 * with a role that may read and write /sigma/ only, authentication enabled,
 * and auth tokens that live one second (--auth-token-ttl 1).
 *
 * In that cluster: requests work; a node registers and stays registered
 * while its token keeps expiring; a worker's watch sees nodes come and go,
 * also after its stream was cut while its token expired; and each way of
 * getting it wrong (a wrong password, no user, a server certificate from an
 * unknown CA, a client certificate etcd does not trust, none at all, one
 * with a CommonName, a user deleted under a live token) gives its own clear
 * error within a few seconds.
 *
 * A password file that others may read is refused naming the fix, and the
 * password appears in no message; sigma-udpd registers over TLS with a user
 * (--etcd-ca, --etcd-cert, --etcd-key, --etcd-user, --etcd-password-file),
 * and its SIGKILL is seen by a watch when its lease runs out.
 *
 * argv[1]: etcd_certs.sh; argv[2]: sigma-udpd.
 */
#include <sys/stat.h>

#include "etcd_test_util.h"

static uint16_t cport;
static char url[64];

/* The client's TLS files (in tmpdir) and credentials. */
static char ca[300], crt[300], key[300];

static pid_t etcd_tls_start(uint16_t pport)
{
	char data[256], curl[64], purl[64], ic[96], log[256], f[3][300];
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	snprintf(data, sizeof(data), "%s/s.data", tmpdir);
	snprintf(log, sizeof(log), "%s/s.log", tmpdir);
	child_setup(parent, log, O_APPEND);
	snprintf(curl, sizeof(curl), "https://127.0.0.1:%u", cport);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", pport);
	snprintf(ic, sizeof(ic), "s=%s", purl);
	snprintf(f[0], sizeof(f[0]), "%s/server.crt", tmpdir);
	snprintf(f[1], sizeof(f[1]), "%s/server.key", tmpdir);
	snprintf(f[2], sizeof(f[2]), "%s/ca.crt", tmpdir);
	execlp("etcd", "etcd", "--name", "s", "--data-dir", data, "--listen-client-urls", curl,
	       "--advertise-client-urls", curl, "--listen-peer-urls", purl,
	       "--initial-advertise-peer-urls", purl, "--initial-cluster", ic,
	       "--initial-cluster-state", "new", "--initial-cluster-token", tmpdir + 5,
	       "--heartbeat-interval", "50", "--election-timeout", "500", "--cert-file", f[0],
	       "--key-file", f[1], "--trusted-ca-file", f[2], "--client-cert-auth",
	       "--auth-token-ttl", "1", NULL);
	_exit(127);
}

/* etcdctl with the client certificate and @p args. @return its exit status. */
static int etcdctl(const char *args)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "etcdctl --endpoints %s --cacert %s --cert %s --key %s "
		 "--dial-timeout 3s %s >>%s/etcdctl.log 2>&1", url, ca, crt, key, args, tmpdir);
	return system(cmd);
}

/* A client of @p endpoints as @p user (NULL: none) with TLS files in tmpdir named @p c, @p k. */
static struct sg_etcd *client(const char *endpoints, const char *user, const char *password,
			      const char *cafile, const char *c, const char *k)
{
	char fc[300], fk[300], fca[300];
	struct sg_etcd_conf ec = {.endpoints = endpoints, .user = user, .password = password};

	snprintf(fca, sizeof(fca), "%s/%s", tmpdir, cafile);
	ec.ca_file = fca;
	if (c != NULL) {
		snprintf(fc, sizeof(fc), "%s/%s", tmpdir, c);
		snprintf(fk, sizeof(fk), "%s/%s", tmpdir, k);
		ec.cert_file = fc;
		ec.key_file = fk;
	}
	return sg_etcd_create(&ec);
}

static struct sg_etcd *sigma_client(const char *endpoints)
{
	return client(endpoints, "sigma", "sigma-pw", "ca.crt", "client.crt", "client.key");
}

/* Set up users and roles, then turn authentication on. @return 0 or -1. */
static int setup_auth(void)
{
	static const char *const steps[] = {
		"user add root:root-pw", "user grant-role root root",
		"user add sigma:sigma-pw", "user add tmp:tmp-pw", "role add sigma",
		"role grant-permission sigma --prefix=true readwrite /sigma/",
		"user grant-role sigma sigma", "user grant-role tmp sigma", "auth enable"};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (!SG_CHECK(etcdctl(steps[i]) == 0, "etcdctl %s (see %s/etcdctl.log)", steps[i],
			      tmpdir))
			return -1;
	return 0;
}

/* One put of /sigma/t by @p e: its result, its error in @p why, and the time it took. */
static int try_put(struct sg_etcd *e, char *why, size_t len, double *ms)
{
	double t0 = now_ms();
	int rc = sg_etcd_put(e, "/sigma/t", "v", 1, 0);

	*ms = now_ms() - t0;
	snprintf(why, len, "%s", sg_etcd_last_error(e));
	return rc;
}

/* Each way of getting TLS or the credentials wrong: refused at once, saying which. */
static void test_refusals(void)
{
	static const struct {
		const char *what, *user, *pw, *ca, *crt, *key, *want;
	} cases[] = {
		{"a wrong password", "sigma", "wrong", "ca.crt", "client.crt", "client.key",
		 "authentication failed"},
		{"no user while etcd has authentication on", NULL, NULL, "ca.crt", "client.crt",
		 "client.key", "[cluster] user"},
		{"a server certificate from a CA we do not trust", "sigma", "sigma-pw", "other.crt",
		 "client.crt", "client.key", "ca_file"},
		{"a client certificate from a CA etcd does not trust", "sigma", "sigma-pw", "ca.crt",
		 "rogue.crt", "rogue.key", "cert_file"},
		{"no client certificate", "sigma", "sigma-pw", "ca.crt", NULL, NULL, "cert_file"},
		{"a client certificate with a CommonName", "sigma", "sigma-pw", "ca.crt", "cn.crt",
		 "cn.key", "CommonName"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sg_etcd *e = client(url, cases[i].user, cases[i].pw, cases[i].ca,
					   cases[i].crt, cases[i].key);
		char why[SG_ETCD_ERR_LEN];
		double ms = 0;
		int rc;

		if (!SG_CHECK(e != NULL, "client for %s", cases[i].what))
			continue;
		rc = try_put(e, why, sizeof(why), &ms);
		printf("%s: %d, %.0f ms: %s\n", cases[i].what, rc, ms, why);
		SG_CHECK(rc < 0, "%s: refused", cases[i].what);
		SG_CHECK(strstr(why, cases[i].want) != NULL, "%s: the error names '%s': %s",
			 cases[i].what, cases[i].want, why);
		SG_CHECK(ms < 3000, "%s: answered in %.0f ms", cases[i].what, ms);
		sg_etcd_destroy(e);
	}
}

static void test_requests_and_tokens(void)
{
	struct sg_etcd *e = sigma_client(url);
	struct sg_etcd *t = client(url, "tmp", "tmp-pw", "ca.crt", "client.crt", "client.key");
	char why[SG_ETCD_ERR_LEN];
	double ms;

	if (!SG_CHECK(e != NULL && t != NULL, "clients"))
		goto out;
	SG_CHECK_EQ(sg_etcd_put(e, "/sigma/a", "one", 3, 0), 0);
	SG_CHECK_EQ(count_prefix(e, "/sigma/a"), 1);
	/* the role reaches /sigma/ only */
	SG_CHECK_EQ(sg_etcd_put(e, "/other", "x", 1, 0), -EREMOTEIO);
	SG_CHECK(strstr(sg_etcd_last_error(e), "permission denied") != NULL, "outside /sigma/: %s",
		 sg_etcd_last_error(e));
	/* the token expires (1 s, checked every second): the next request gets a new one */
	SG_CHECK_EQ(try_put(t, why, sizeof(why), &ms), 0);
	msleep(3500);
	SG_CHECK(try_put(t, why, sizeof(why), &ms) == 0, "after the token expired: %s", why);
	/* a user deleted under a live token: the token is invalid and a new one refused */
	SG_CHECK(etcdctl("--user root:root-pw user delete tmp") == 0, "user delete tmp");
	SG_CHECK(try_put(t, why, sizeof(why), &ms) < 0, "deleted user refused");
	SG_CHECK(strstr(why, "token") != NULL && strstr(why, "authentication failed") != NULL,
		 "the error says the token was refused and why a new one was not given: %s", why);
	SG_CHECK(ms < 3000, "answered in %.0f ms", ms);
	SG_CHECK_EQ(sg_etcd_delete(e, "/sigma/", true), 2);
out:
	sg_etcd_destroy(e);
	sg_etcd_destroy(t);
}

static bool reg_registered(struct sg_etcd_reg *r, unsigned int ms)
{
	struct sg_etcd_reg_status st;

	for (unsigned int t = 0; t <= ms; t += 50) {
		sg_etcd_reg_status(r, &st);
		if (st.registered)
			return true;
		msleep(50);
	}
	return false;
}

/*
 * A node registers and a worker watches, both with TLS and a user, through a
 * proxy the test cuts: the node stays registered while its token expires
 * between keepalives, the watch makes its stream again after its token
 * expired, and sees the node leave.
 */
static void test_register_and_watch(void)
{
	struct sg_etcd_reg_conf rc = {.cluster = "c1", .ttl_s = 3,
		.node = {.name = "node-a", .kind = SG_NODE_CPU, .gbps = 25, .addr = "127.0.0.1",
			 .port = 9300}};
	struct sg_etcd_watch_conf wc = {.cluster = "c1"};
	char purl[64], fca[300], fc[300], fk[300];
	struct sg_etcd_watch_stats ws;
	struct sg_etcd_reg_status st;
	struct sg_etcd *e = sigma_client(url);
	struct sg_etcd_watch *w = NULL;
	struct sg_etcd_reg *r = NULL;
	struct proxy px;
	uint64_t streams;

	if (!SG_CHECK(e != NULL && proxy_start(&px, cport) == 0, "client and proxy")) {
		sg_etcd_destroy(e);
		return;
	}
	snprintf(purl, sizeof(purl), "https://127.0.0.1:%u", px.port);
	snprintf(fca, sizeof(fca), "%s/ca.crt", tmpdir);
	snprintf(fc, sizeof(fc), "%s/client.crt", tmpdir);
	snprintf(fk, sizeof(fk), "%s/client.key", tmpdir);
	rc.etcd = (struct sg_etcd_conf){.endpoints = url, .user = "sigma", .password = "sigma-pw",
					.ca_file = fca, .cert_file = fc, .key_file = fk};
	wc.etcd = rc.etcd;
	wc.etcd.endpoints = purl;
	r = sg_etcd_reg_start(&rc);
	w = sg_etcd_watch_create(&wc);
	if (!SG_CHECK(r != NULL && w != NULL, "registration and watch"))
		goto out;
	SG_CHECK(reg_registered(r, 5000), "node-a registered over TLS with a user");
	SG_CHECK(watch_wait(w, "node-a", true, 5000), "the watch sees node-a");
	/* keepalives every second, the token expiring between them: still registered */
	msleep(4000);
	sg_etcd_reg_status(r, &st);
	SG_CHECK(st.registered && st.keepalives >= 2 && st.expired == 0,
		 "registered %d, %llu keepalives, %llu expiries (%s)", st.registered,
		 (unsigned long long)st.keepalives, (unsigned long long)st.expired, st.last_error);
	SG_CHECK_EQ(sg_etcd_nodes_get(e, "c1", NULL, 0, NULL), 1);
	/* the watch's token has expired meanwhile; its stream is cut and made again */
	sg_etcd_watch_stats(w, &ws);
	streams = ws.streams;
	atomic_store(&px.mode, PROXY_CUT);
	msleep(300);
	atomic_store(&px.mode, PROXY_PASS);
	put_record(e, "/sigma/c1/nodes/node-b", "{\"name\":\"node-b\",\"kind\":\"cpu\",\"gbps\":1,"
		   "\"addr\":\"127.0.0.1\",\"port\":9301}");
	SG_CHECK(watch_wait(w, "node-b", true, 3000), "a change after the stream was made again "
		 "with an expired token");
	sg_etcd_watch_stats(w, &ws);
	SG_CHECK(ws.streaming && ws.streams > streams && !ws.polling,
		 "streaming %d, %llu streams (was %llu), polling %d: %s", ws.streaming,
		 (unsigned long long)ws.streams, (unsigned long long)streams, ws.polling,
		 ws.last_error);
	/* a crash: the record goes with its lease, and the watch sees the loss */
	sg_etcd_reg_stop(r, false);
	r = NULL;
	SG_CHECK(watch_wait(w, "node-a", false, 6000), "node-a's lease expired, seen by the watch");
	SG_CHECK(watch_wait(w, "node-b", true, 0), "node-b still there");
out:
	sg_etcd_reg_stop(r, true);
	sg_etcd_watch_stop(w);
	proxy_stop(&px);
	if (e != NULL)
		sg_etcd_delete(e, "/sigma/", true);
	sg_etcd_destroy(e);
}

/* A watch with a wrong password says so, keeps nothing, and does not fall back to polling. */
static void test_watch_refused(void)
{
	char fca[300], fc[300], fk[300];
	struct sg_etcd_watch_conf wc = {.cluster = "c1"};
	struct sg_etcd_watch_stats ws;
	struct sg_etcd_watch *w;

	snprintf(fca, sizeof(fca), "%s/ca.crt", tmpdir);
	snprintf(fc, sizeof(fc), "%s/client.crt", tmpdir);
	snprintf(fk, sizeof(fk), "%s/client.key", tmpdir);
	wc.etcd = (struct sg_etcd_conf){.endpoints = url, .user = "sigma", .password = "wrong",
					.ca_file = fca, .cert_file = fc, .key_file = fk};
	w = sg_etcd_watch_create(&wc);
	if (!SG_CHECK(w != NULL, "watch"))
		return;
	msleep(1500);
	sg_etcd_watch_stats(w, &ws);
	SG_CHECK(!ws.reachable && ws.generation == 0 && ws.failures > 0 && !ws.polling,
		 "reachable %d, generation %llu, failures %llu, polling %d", ws.reachable,
		 (unsigned long long)ws.generation, (unsigned long long)ws.failures, ws.polling);
	SG_CHECK(strstr(ws.last_error, "authentication failed") != NULL, "the watch's error: %s",
		 ws.last_error);
	sg_etcd_watch_stop(w);
}

/* A file of the whole of @p path (at most 64 KiB), NUL-terminated, in @p buf. */
static void read_all(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, cap - 1, f) : 0;

	buf[n] = '\0';
	if (f != NULL)
		fclose(f);
}

static void test_password_file(void)
{
	char path[300], pw[SG_ETCD_PASSWORD_MAX], err[512], big[400];

	snprintf(path, sizeof(path), "%s/pw", tmpdir);
	sg_test_write_file(path, "s3cret-pw\nsecond line\n", 0600);
	SG_CHECK_EQ(sg_etcd_password_load("pw", path, pw, err, sizeof(err)), 0);
	SG_CHECK(strcmp(pw, "s3cret-pw") == 0, "the first line: '%s'", pw);
	sg_test_write_file(path, "s3cret-pw\r\n", 0600);
	SG_CHECK(sg_etcd_password_load("pw", path, pw, err, sizeof(err)) == 0 &&
		 strcmp(pw, "s3cret-pw") == 0, "CR LF cut: '%s'", pw);
	for (unsigned int mode = 0640; mode <= 0644; mode += 4) {
		sg_test_write_file(path, "s3cret-pw\n", mode);
		SG_CHECK_EQ(sg_etcd_password_load("[cluster] password_file", path, pw, err,
						  sizeof(err)), -EINVAL);
		SG_CHECK(strstr(err, "chmod 600") != NULL && strstr(err, "[cluster] password_file") &&
			 strstr(err, "s3cret") == NULL, "mode %o: %s", mode, err);
	}
	sg_test_write_file(path, "\nafter an empty line\n", 0600);
	SG_CHECK_EQ(sg_etcd_password_load("pw", path, pw, err, sizeof(err)), -EINVAL);
	SG_CHECK(strstr(err, "empty") != NULL, "empty: %s", err);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sg_test_write_file(path, big, 0600);
	SG_CHECK_EQ(sg_etcd_password_load("pw", path, pw, err, sizeof(err)), -EINVAL);
	SG_CHECK(strstr(err, "256 bytes") != NULL && strstr(err, "xxxx") == NULL, "long: %s", err);
	snprintf(path, sizeof(path), "%s/none", tmpdir);
	SG_CHECK_EQ(sg_etcd_password_load("pw", path, pw, err, sizeof(err)), -EINVAL);
}

/* sigma-udpd @p udpd with TLS, a user, and the password file @p pwf; its output in @p out. */
static pid_t udpd_start(const char *udpd, const char *pwf, const char *out)
{
	char sock[300], c[300], k[300];
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	child_setup(parent, out, O_TRUNC);
	snprintf(sock, sizeof(sock), "%s/udpd.sock", tmpdir);
	snprintf(c, sizeof(c), "%s/client.crt", tmpdir);
	snprintf(k, sizeof(k), "%s/client.key", tmpdir);
	execl(udpd, udpd, "--unix", sock, "--port", "0", "--name", "udpd-1", "--etcd", url,
	      "--cluster", "c2", "--ttl", "1", "--etcd-ca", ca, "--etcd-cert", c, "--etcd-key", k,
	      "--etcd-user", "sigma", "--etcd-password-file", pwf, NULL);
	_exit(127);
}

static void test_udpd(const char *udpd)
{
	char pwf[300], out[300], text[65536];
	struct sg_etcd_watch_conf wc = {.cluster = "c2"};
	struct sg_etcd_watch *w;
	int status = 0;
	pid_t pid;

	snprintf(pwf, sizeof(pwf), "%s/udpd.pw", tmpdir);
	snprintf(out, sizeof(out), "%s/udpd.out", tmpdir);
	/* a password file others may read: refused at once, saying how to fix it */
	sg_test_write_file(pwf, "sigma-pw\n", 0644);
	pid = udpd_start(udpd, pwf, out);
	waitpid(pid, &status, 0);
	read_all(out, text, sizeof(text));
	SG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2, "sigma-udpd exit %d", status);
	SG_CHECK(strstr(text, "chmod 600") != NULL && strstr(text, "sigma-pw") == NULL,
		 "sigma-udpd: %s", text);
	chmod(pwf, 0600);
	wc.etcd = (struct sg_etcd_conf){.endpoints = url, .user = "sigma", .password = "sigma-pw",
					.ca_file = ca, .cert_file = crt, .key_file = key};
	w = sg_etcd_watch_create(&wc);
	pid = udpd_start(udpd, pwf, out);
	SG_CHECK(w != NULL && watch_wait(w, "udpd-1", true, 8000), "sigma-udpd registered over "
		 "TLS with a user");
	msleep(2500); /* keepalives while its token expires */
	SG_CHECK(watch_wait(w, "udpd-1", true, 0), "still registered");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	SG_CHECK(watch_wait(w, "udpd-1", false, 4000), "its loss seen when its lease ran out");
	read_all(out, text, sizeof(text));
	SG_CHECK(strstr(text, "sigma-pw") == NULL && strstr(text, "registered") != NULL,
		 "the password is in no line of sigma-udpd's: %s", text);
	sg_etcd_watch_stop(w);
}

int main(int argc, char **argv)
{
	char cmd[600];
	struct sg_etcd *admin;
	uint16_t p;
	pid_t pid;

	if (argc < 3)
		SG_TEST_SKIP_ALL("usage: test_etcd_secure etcd_certs.sh sigma-udpd");
	if (system("command -v openssl >/dev/null 2>&1") != 0)
		SG_TEST_SKIP_ALL("no openssl (Debian package openssl)");
	etcd_test_init();
	snprintf(cmd, sizeof(cmd), "sh '%s' '%s'", argv[1], tmpdir);
	if (!SG_CHECK(system(cmd) == 0, "certificates made by %s", argv[1])) {
		etcd_test_fini();
		return sg_test_finish("etcd_secure");
	}
	test_password_file();
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmpdir);
	snprintf(crt, sizeof(crt), "%s/client.crt", tmpdir);
	snprintf(key, sizeof(key), "%s/client.key", tmpdir);
	p = free_ports(2);
	cport = p;
	snprintf(url, sizeof(url), "https://127.0.0.1:%u", cport);
	pid = etcd_tls_start((uint16_t)(p + 1));
	admin = client(url, NULL, NULL, "ca.crt", "client.crt", "client.key");
	if (SG_CHECK(admin != NULL && wait_ready(admin), "etcd with TLS up on port %u (log %s/s.log)",
		     cport, tmpdir) && setup_auth() == 0) {
		test_refusals();
		test_requests_and_tokens();
		test_register_and_watch();
		test_watch_refused();
		test_udpd(argv[2]);
	}
	sg_etcd_destroy(admin);
	etcd_kill(&pid);
	if (sg_test_failures == 0)
		etcd_test_fini();
	else
		fprintf(stderr, "kept %s for the logs\n", tmpdir);
	return sg_test_finish("etcd_secure");
}
