/* SPDX-License-Identifier: BSD-3-Clause */
/* The [control] INI section: good files give the right config, bad ones a clear error. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_cfgfile.h>
#include <rte_log.h>

#include "sg_ctl_config.h"
#include "sg_parse.h"
#include "sg_test.h"

static char dir[64], ini[128], secret[128];

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
	chmod(path, mode);
}

/* Load @p body as the INI file, offering its keys to @p hook (may be NULL). */
static int load_hook(const char *body, struct sg_ctl_server_config *cfg,
		     struct sg_ctl_config_store *st, const struct sg_ctl_config_hook *hook,
		     char *err)
{
	struct rte_cfgfile *f;
	int rc;

	write_file(ini, body, 0600);
	f = rte_cfgfile_load(ini, 0);
	if (f == NULL)
		return -EIO;
	memset(cfg, 0, sizeof(*cfg));
	err[0] = '\0';
	rc = hook ? sg_ctl_config_load_ext(f, "control", cfg, st, hook, err, 256)
		  : sg_ctl_config_load(f, "control", cfg, st, err, 256);
	rte_cfgfile_close(f);
	return rc;
}

/* Load @p body as the INI file; returns sg_ctl_config_load()'s result. */
static int load(const char *body, struct sg_ctl_server_config *cfg,
		struct sg_ctl_config_store *st, char *err)
{
	return load_hook(body, cfg, st, NULL, err);
}

/* The caller's key "color": red or blue; it counts the keys it was offered. */
static int color_key(void *arg, const char *key, const char *value, char *err, size_t len)
{
	unsigned int *offered = arg;

	(*offered)++;
	if (strcmp(key, "color") != 0)
		return 0;
	if (strcmp(value, "red") != 0 && strcmp(value, "blue") != 0) {
		snprintf(err, len, "[control] color = %s: red or blue", value);
		return -EINVAL;
	}
	return 1;
}

/* A section shared with the caller: each key read once, by its owner. */
static void test_hook(void)
{
	struct sg_ctl_server_config cfg;
	struct sg_ctl_config_store st;
	unsigned int offered = 0;
	const struct sg_ctl_config_hook hook = {.key = color_key, .arg = &offered,
						.keys = "color"};
	char err[256];

	SG_CHECK_EQ(load_hook("[control]\ncolor = red\nmax_conns = 3\n", &cfg, &st, &hook, err),
		    0);
	SG_CHECK(offered == 2 && cfg.max_conns == 3, "offered %u keys, max_conns %u", offered,
		 cfg.max_conns);
	SG_CHECK_EQ(load_hook("[control]\ncolor = green\n", &cfg, &st, &hook, err), -EINVAL);
	SG_CHECK(strstr(err, "red or blue") != NULL, "%s", err);
	SG_CHECK_EQ(load_hook("[control]\nshade = 1\n", &cfg, &st, &hook, err), -EINVAL);
	SG_CHECK(strstr(err, "unknown key 'shade'") && strstr(err, "heartbeat_timeout_ms, color)"),
		 "%s", err);
	/* without the hook its key is unknown */
	SG_CHECK_EQ(load("[control]\ncolor = red\n", &cfg, &st, err), -EINVAL);
}

static void bad(const char *body, const char *want)
{
	struct sg_ctl_server_config cfg;
	struct sg_ctl_config_store st;
	char err[256];
	int rc = load(body, &cfg, &st, err);

	SG_CHECK(rc == -EINVAL && strstr(err, want) != NULL, "%s -> rc %d, '%s' (want '%s')", body,
		 rc, err, want);
}

/* The log level names (sg_parse.h, without DPDK) number the levels as rte_log does. */
static void test_log_levels(void)
{
	SG_CHECK_EQ(SG_LOG_LEVEL_EMERG, RTE_LOG_EMERG);
	SG_CHECK_EQ(SG_LOG_LEVEL_DEBUG, RTE_LOG_DEBUG);
	SG_CHECK_EQ(sg_log_level_parse("warning"), RTE_LOG_WARNING);
	SG_CHECK_EQ(sg_log_level_parse("info"), RTE_LOG_INFO);
}

int main(void)
{
	struct sg_ctl_server_config cfg;
	struct sg_ctl_config_store st;
	char err[256], body[512];
	size_t slen = 0;

	snprintf(dir, sizeof(dir), "/tmp/sg_ctl_cfg.XXXXXX");
	if (mkdtemp(dir) == NULL)
		SG_TEST_SKIP_ALL("no temporary folder");
	snprintf(ini, sizeof(ini), "%s/sigmad.ini", dir);
	snprintf(secret, sizeof(secret), "%s/ctl.secret", dir);
	write_file(secret, "0123456789abcdef0123\n", 0600);
	test_log_levels();
	test_hook();

	snprintf(body, sizeof(body),
		 "[control]\nlisten = 127.0.0.1:7070\nunix = %s/ctl.sock\nsecret_file = %s\n"
		 "metrics = 127.0.0.1:9100\nmax_frame = 1024\nmax_conns = 8\nidle_timeout_ms = 100\n"
		 "frame_timeout_ms = 50\nauth_timeout_ms = 60\nheartbeat_timeout_ms = 2500\n",
		 dir, secret);
	SG_CHECK_EQ(load(body, &cfg, &st, err), 0);
	SG_CHECK(!cfg.tcp_disable && strcmp(cfg.tcp_addr, "127.0.0.1") == 0 && cfg.tcp_port == 7070,
		 "listen");
	SG_CHECK(cfg.unix_path && strstr(cfg.unix_path, "/ctl.sock"), "unix");
	SG_CHECK(cfg.metrics_enable && cfg.metrics_port == 9100, "metrics");
	SG_CHECK(cfg.secret_len == 20 && memcmp(cfg.secret, "0123456789abcdef0123", 20) == 0,
		 "secret without its newline");
	SG_CHECK(cfg.max_frame == 1024 && cfg.max_conns == 8 && cfg.idle_timeout_ms == 100 &&
			 cfg.frame_timeout_ms == 50 && cfg.auth_timeout_ms == 60 &&
			 cfg.heartbeat_timeout_ms == 2500,
		 "numbers");
	/* No section: everything off, and the server refuses to start with nothing on. */
	SG_CHECK_EQ(load("[dataplane]\nx = 1\n", &cfg, &st, err), 0);
	SG_CHECK(cfg.tcp_disable && cfg.unix_path == NULL && !cfg.metrics_enable, "defaults off");
	SG_CHECK_EQ(load("[control]\nlisten = off\nunix = off\nmetrics = off\n", &cfg, &st, err), 0);
	SG_CHECK(cfg.tcp_disable && cfg.unix_path == NULL && !cfg.metrics_enable, "all off");

	bad("[control]\nlisten = 127.0.0.1:7070\n", "no secret_file");
	bad("[control]\nlisten = localhost:7070\n", "want IPV4:PORT");
	bad("[control]\nlisten = 127.0.0.1:70000\n", "want IPV4:PORT");
	bad("[control]\nlisten = 127.0.0.1:-1\n", "want IPV4:PORT");
	/* strtoul() took a sign and a leading zero; sg_parse_u64() refuses both */
	bad("[control]\nlisten = 127.0.0.1:+7070\n", "want IPV4:PORT");
	bad("[control]\nmetrics = 127.0.0.1:09100\n", "want IPV4:PORT");
	bad("[control]\nlisten = 127.0.0.1\n", "want IPV4:PORT");
	bad("[control]\nmetrics = :9100\n", "want IPV4:PORT");
	bad("[control]\nunix = relative.sock\n", "absolute path");
	bad("[control]\nmax_frame = 12abc\n", "positive integer");
	bad("[control]\nmax_conns = 0\n", "positive integer");
	bad("[control]\nmax_conns = +8\n", "positive integer");
	bad("[control]\nidle_timeout_ms = -5\n", "positive integer");
	bad("[control]\nheartbeat_timeout_ms = 99999999999\n", "positive integer");
	bad("[control]\nlisten_addr = 127.0.0.1:1\n", "unknown key 'listen_addr'");
	bad("[control]\nsecret_file = /nonexistent/secret\n", "No such file");
	write_file(secret, "0123456789abcdef0123\n", 0644);
	snprintf(body, sizeof(body), "[control]\nsecret_file = %s\n", secret);
	bad(body, "chmod 600");
	write_file(secret, "short\n", 0600);
	bad(body, "at least 16 bytes");
	{
		/* One byte over the limit is refused, not cut: clients would use another key. */
		char big[SG_CTL_SECRET_MAX + 3];

		memset(big, 'k', SG_CTL_SECRET_MAX + 1);
		strcpy(big + SG_CTL_SECRET_MAX + 1, "\n");
		write_file(secret, big, 0600);
		bad(body, "more than 256 bytes of secret");
		big[SG_CTL_SECRET_MAX] = '\n'; /* exactly the limit, plus newlines: fine */
		write_file(secret, big, 0600);
		SG_CHECK_EQ(sg_ctl_secret_load(secret, true, st.secret, &slen, err, sizeof(err)), 0);
		SG_CHECK_EQ(slen, SG_CTL_SECRET_MAX);
	}
	snprintf(body, sizeof(body), "[control]\nsecret_file = %s\n", dir);
	bad(body, "not a regular file");
	SG_CHECK_EQ(sg_ctl_config_load(NULL, "control", NULL, &st, err, sizeof(err)), -EINVAL);

	unlink(secret);
	unlink(ini);
	rmdir(dir);
	return sg_test_finish("ctl_config");
}
