/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl against a control server with the mock agent, in this process:
 * output (tables and --json), exit codes (0 ok, 1 server, 2 usage) and error
 * messages. argv[1] is the sigmactl binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_mock.h"
#include "sg_ctl_server.h"
#include "sg_test.h"
#include "sg_version.h"

extern char **environ;

static const char *bin;
static char dir[64], sock[128], tcp_target[64], secret_file[128], bad_secret_file[128];
static char out_path[128], err_path[128];
static char out[65536], err[8192];

static void slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, cap - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* Run sigmactl with the NULL-terminated arguments; returns its exit code. */
static int run(const char *first, ...)
{
	const char *args[32];
	posix_spawn_file_actions_t fa;
	va_list ap;
	pid_t pid;
	int n = 0, st;

	args[n++] = bin;
	va_start(ap, first);
	for (const char *a = first; a != NULL && n < 31; a = va_arg(ap, const char *))
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (posix_spawn(&pid, bin, &fa, NULL, (char *const *)args, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	slurp(out_path, out, sizeof(out));
	slurp(err_path, err, sizeof(err));
	return WEXITSTATUS(st);
}

#define HAS(buf, s) SG_CHECK(strstr(buf, s) != NULL, "'%s' not in:\n%s", s, buf)

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	struct sg_ctl_server_config cfg;
	struct sg_ctl_server *srv;
	struct mock_agent mock;
	char secret[64];
	json_t *j;
	unsigned int calls;

	if (argc < 2)
		SG_TEST_SKIP_ALL("usage: test_sigmactl PATH-TO-SIGMACTL");
	bin = argv[1];
	snprintf(dir, sizeof(dir), "/tmp/sg_sigmactl.XXXXXX");
	if (mkdtemp(dir) == NULL)
		SG_TEST_SKIP_ALL("no temporary folder");
	snprintf(sock, sizeof(sock), "unix:%s/ctl.sock", dir);
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	snprintf(err_path, sizeof(err_path), "%s/err", dir);
	snprintf(secret_file, sizeof(secret_file), "%s/secret", dir);
	snprintf(bad_secret_file, sizeof(bad_secret_file), "%s/bad", dir);
	mock_init(&mock);
	mock_config(&cfg, &mock, sock + 5);
	srv = sg_ctl_server_create(&cfg);
	if (srv == NULL)
		SG_TEST_SKIP_ALL("cannot start the server: %s", strerror(errno));
	snprintf(tcp_target, sizeof(tcp_target), "127.0.0.1:%u", sg_ctl_server_tcp_port(srv));
	snprintf(secret, sizeof(secret), "%.*s\n", (int)sizeof(mock_secret), mock_secret);
	write_file(secret_file, secret);
	write_file(bad_secret_file, "definitely-not-the-secret\n");
	unsetenv("SIGMACTL_SERVER");
	unsetenv("SIGMACTL_SECRET_FILE");

	/* Usage and help. */
	SG_CHECK_EQ(run("--help", NULL), 0);
	HAS(out, "usage: ");
	HAS(out, "Exit status");
	SG_CHECK_EQ(run(NULL), 2);
	HAS(err, "usage: ");
	SG_CHECK_EQ(run("-s", sock, "frobnicate", NULL), 2);
	HAS(err, "unknown command 'frobnicate'");
	SG_CHECK_EQ(run("--bogus", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "jobs", "extra", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--tensor", "w:10", NULL), 2);
	HAS(err, "--workers");
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "4", "--tensor", "w", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "-4", "--tensor", "w:1", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "placement", "abc", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "lcores", "--watch=0", NULL), 2);
	/* strtoull() and strtod() took a sign or a hex float: refused as usage errors now */
	SG_CHECK_EQ(run("-s", sock, "lcores", "--count", "+3", NULL), 2);
	HAS(err, "--count wants a positive number");
	SG_CHECK_EQ(run("-s", sock, "lcores", "--watch=+1", NULL), 2);
	HAS(err, "--watch wants seconds");
	SG_CHECK_EQ(run("-s", sock, "lcores", "--watch=0x1p0", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "heartbeat", "cpu-x", "--gbps", "+100", NULL), 2);
	HAS(err, "--gbps wants a positive number");
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "+4", "--tensor", "w:1", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "04", "--tensor", "w:1", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=0x", NULL), 2);
	HAS(err, "peer must be a number");
	SG_CHECK_EQ(run("-s", sock, "layout", "set", "keymap", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "layout", "set", "keymap=a,b", NULL), 2);
	SG_CHECK_EQ(run("-s", tcp_target, "jobs", NULL), 2);
	HAS(err, "needs --secret-file");

	/* Connection and auth failures are server errors. */
	SG_CHECK_EQ(run("-s", "unix:/nonexistent/sigma.sock", "jobs", NULL), 1);
	HAS(err, "cannot connect to unix:/nonexistent/sigma.sock");
	SG_CHECK_EQ(run("-s", tcp_target, "-k", bad_secret_file, "jobs", NULL), 1);
	HAS(err, "refused the authentication");
	SG_CHECK_EQ(run("-s", tcp_target, "-k", secret_file, "info", NULL), 0);
	HAS(out, "mock-node");
	HAS(out, "net_memif0");
	/* versions: the server's `version` method is this build's */
	SG_CHECK_EQ(run("-s", sock, "version", NULL), 0);
	HAS(out, "node      " SG_VERSION_STRING);
	SG_CHECK_EQ(run("-s", sock, "call", "version", NULL), 0);
	j = json_loads(out, 0, NULL);
	SG_CHECK(j != NULL && !strcmp(json_string_value(json_object_get(j, "release")),
				      SG_VERSION_STRING) &&
		 json_integer_value(json_object_get(j, "api")) == SG_API_VERSION &&
		 json_integer_value(json_object_get(j, "protocol")) == SG_PROTO_VERSION,
		 "version: %s", out);
	json_decref(j);
	SG_CHECK_EQ(run("-s", sock, "version", "extra", NULL), 2);
	SG_CHECK_EQ(run("--version", NULL), 0);
	HAS(out, "sigmactl (Sigma) " SG_VERSION_STRING "\n");

	/* Jobs. */
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "4", "--tensor", "w:2500000",
			"--tensor", "b:1000", NULL),
		    0);
	HAS(out, "job 1 created");
	SG_CHECK(strstr(out, mock.last_token) != NULL && strlen(mock.last_token) == 64,
		 "token printed");
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "13", "--tensor", "w:1", NULL), 1);
	HAS(err, "unlucky");
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "4", "--dtype", "fp33",
			"--tensor", "w:1", NULL),
		    1);
	HAS(err, "unknown dtype");
	SG_CHECK_EQ(run("-s", sock, "jobs", NULL), 0);
	HAS(out, "WORKERS");
	HAS(out, "1001"); /* the mock's rounds_completed for job 1 */
	SG_CHECK_EQ(run("-s", sock, "--json", "jobs", NULL), 0);
	j = json_loads(out, 0, NULL);
	SG_CHECK(json_is_array(j) && json_array_size(j) == 1 &&
			 json_integer_value(json_object_get(json_array_get(j, 0), "workers")) == 4,
		 "jobs --json: %s", out);
	json_decref(j);
	SG_CHECK_EQ(run("-s", sock, "jobs", "--json", NULL), 0);
	SG_CHECK(out[0] == '[', "--json after the command");

	/* Nodes and placement. */
	SG_CHECK_EQ(run("-s", sock, "placement", "1", NULL), 1);
	HAS(err, "no summation node");
	SG_CHECK_EQ(run("-s", sock, "heartbeat", "cpu-a", "--kind", "cpu", "--gbps", "100", NULL),
		    0);
	SG_CHECK_EQ(run("-s", sock, "heartbeat", "gpu-a", "--kind", "gpu", NULL), 0);
	SG_CHECK_EQ(run("-s", sock, "heartbeat", "gpu-b", "--kind", "gpu", NULL), 0);
	SG_CHECK_EQ(run("-s", sock, "heartbeat", "gpu-c", "--kind", "tpu", NULL), 1);
	SG_CHECK_EQ(run("-s", sock, "nodes", NULL), 0);
	HAS(out, "cpu-a");
	HAS(out, "alive");
	SG_CHECK_EQ(run("-s", sock, "placement", "1", NULL), 0);
	HAS(out, "0.5000"); /* the CPU machine's weight with n=2, k=1 */
	HAS(out, "0.2500");
	SG_CHECK_EQ(run("-s", sock, "placement", "1", "--detail", NULL), 0);
	HAS(out, "TENSOR");
	SG_CHECK_EQ(run("-s", sock, "placement", "99", NULL), 1);
	HAS(err, "no such job");
	SG_CHECK_EQ(run("-s", sock, "nodes", "remove", "gpu-b", NULL), 0);
	SG_CHECK_EQ(run("-s", sock, "nodes", "remove", "gpu-b", NULL), 1);

	/* Lcores, watch, layout. */
	SG_CHECK_EQ(run("-s", sock, "lcores", NULL), 0);
	HAS(out, "BUSY%");
	HAS(out, "reducer");
	HAS(out, "  51.0 "); /* lcore 1's busy% from the mock */
	SG_CHECK_EQ(run("-s", sock, "lcores", "--watch", "0.05", "--count", "3", NULL), 0);
	{
		int redraws = 0;

		for (char *p = out; (p = strstr(p, "\033[H\033[2J")) != NULL; p++)
			redraws++;
		SG_CHECK_EQ(redraws, 3);
	}
	SG_CHECK_EQ(run("-s", sock, "layout", NULL), 0);
	HAS(out, "keymap");
	SG_CHECK_EQ(run("-s", sock, "layout", "set", "keymap=1,0", "idle=3:sleep", NULL), 0);
	SG_CHECK(mock.layout.keymap[0] == 1 && mock.layout.keymap[1] == 0 &&
			 mock.layout.keymap[63] == 0 && mock.layout.lcores[3].idle == SG_IDLE_SLEEP,
		 "layout applied");
	SG_CHECK_EQ(run("-s", sock, "layout", "set", "roles=[1,2]", NULL), 1);
	HAS(err, "cannot change live");
	SG_CHECK_EQ(run("-s", sock, "layout", "set", "keymap=5", NULL), 1);
	HAS(err, "reducers");
	/* layout suggest: the mock's lcores are 50-53% busy, no bottleneck */
	SG_CHECK_EQ(run("-s", sock, "layout", "suggest", "--interval", "0.1", NULL), 0);
	HAS(out, "BUSY%");
	HAS(out, "advice: no bottleneck: the busiest lcore");
	SG_CHECK_EQ(run("-s", sock, "--json", "layout", "suggest", "--interval=0.1", NULL), 0);
	HAS(out, "\"advice\": \"nothing\"");
	SG_CHECK_EQ(run("-s", sock, "layout", "suggest", "--interval", "0", NULL), 2);
	HAS(err, "--interval wants seconds (0.1..60)");
	SG_CHECK_EQ(run("-s", sock, "layout", "suggest", "--sort", "busy", NULL), 2);
	HAS(err, "valid: --interval SECS");
	SG_CHECK_EQ(run("-s", sock, "layout", "suggest", "now", NULL), 2);
	HAS(err, "unexpected argument 'now'");
	SG_CHECK_EQ(run("-s", tcp_target, "layout", "suggest", NULL), 2);
	HAS(err, "needs --secret-file");

	/* Verbs: the node's addressing, and an RC connection (over TCP: authenticated). */
	SG_CHECK_EQ(run("-s", sock, "verbs", NULL), 0);
	HAS(out, "mode rc");
	HAS(out, "fe80:0000:0000:0000:0000:0000:0000:002a (index 3), lid 7");
	HAS(out, "0x53470001");
	HAS(out, "4040 bytes per message");
	HAS(out, "0 of 16 workers connected, 64 slots each");
	HAS(out, "    3 reducer    0xabcdef");
	SG_CHECK_EQ(run("-s", sock, "verbs", "--json", NULL), 0);
	j = json_loads(out, 0, NULL);
	SG_CHECK(json_integer_value(json_object_get(j, "max_payload")) == 4040 &&
		 json_array_size(json_object_get(j, "lcores")) == 2, "verbs --json: %s", out);
	json_decref(j);
	SG_CHECK_EQ(run("-s", tcp_target, "-k", secret_file, "verbs", "connect", "qpn=0x1234",
			"psn=7", "gid=fe80000000000000000000000000002b", "addr=0x7f0000001000",
			"rkey=0x99", "slots=64", "stride=4096", "lid=3", NULL), 0);
	HAS(out, "connected as peer 0");
	HAS(out, "ring addr 0xffff800000001000 rkey 0xdeadbeef, 64 slots of 4096 bytes");
	SG_CHECK(mock.rc_calls == 1 && mock.last_worker.qpn == 0x1234 && mock.last_worker.psn == 7 &&
		 mock.last_worker.lid == 3 && mock.last_worker.addr == 0x7f0000001000ull &&
		 mock.last_worker.rkey == 0x99 && mock.last_worker.gid[15] == 0x2b,
		 "verbs connect fields");
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", "qpn=0x1234", "psn=7", "gid=zz",
			"addr=0x1000", "rkey=1", "slots=64", "stride=4096", NULL), 1);
	HAS(err, "gid must be");
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", "qpn=4660", "psn=7", "gid=fe80000000000000"
			"000000000000002b", "addr=0xfffffffffffff000", "rkey=1", "slots=64",
			"stride=4096", NULL), 0);
	SG_CHECK(mock.rc_calls == 2 && mock.last_worker.addr == 0xfffffffffffff000ull,
		 "addr above 2^63");
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", "qpn=4660", "psn=7", "gid=fe80000000000000"
			"000000000000002b", "addr=8192", "rkey=1", "slots=64", "stride=4096", NULL),
		    0);
	SG_CHECK(mock.rc_calls == 3 && mock.last_worker.addr == 8192, "decimal addr");
	/* a leading zero is still decimal (not octal) */
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", "qpn=4660", "psn=010", "gid=fe80000000000000"
			"000000000000002b", "addr=0x2000", "rkey=1", "slots=064", "stride=4096",
			NULL), 0);
	SG_CHECK(mock.rc_calls == 4 && mock.last_worker.psn == 10 && mock.last_worker.slots == 64,
		 "leading zeros: psn %u slots %u", mock.last_worker.psn, mock.last_worker.slots);
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", "qpn=12abc", NULL), 1);
	HAS(err, "qpn must be");
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", "qpn", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "connect", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "extra", NULL), 2);
	/* disconnect (over TCP: authenticated), then garbage the tool refuses itself */
	SG_CHECK_EQ(run("-s", tcp_target, "-k", secret_file, "verbs", "disconnect", "peer=0x2",
			NULL), 0);
	HAS(out, "peer 2 disconnected");
	SG_CHECK(mock.closed == 4, "peer 2 closed: %#llx", (unsigned long long)mock.closed);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=2", NULL), 1);
	HAS(err, "no open connection with peer id 2");
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=9", NULL), 1);
	HAS(err, "no open connection");
	calls = mock.disc_calls;
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=-1", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=1x", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=4294967296", NULL), 2);
	HAS(err, "peer must be a number");
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "qpn=1", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "verbs", "disconnect", "peer=1", "peer=2", NULL), 2);
	SG_CHECK_EQ(mock.disc_calls, calls);
	mock.verbs_kind = 2;
	SG_CHECK_EQ(run("-s", sock, "verbs", NULL), 1);
	HAS(err, "DPDK transport");
	mock.verbs_kind = 0;
	SG_CHECK_EQ(mock.rc_calls, 4);

	/* Log level, stats, raw call, drain, destroy. */
	SG_CHECK_EQ(run("-s", sock, "log-level", "info", NULL), 0);
	HAS(out, "sigma.*");
	SG_CHECK_EQ(run("-s", sock, "log-level", "loud", NULL), 1);
	SG_CHECK_EQ(run("-s", sock, "log-level", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "stats", NULL), 0);
	HAS(out, "control plane");
	HAS(out, "auth_failed");
	SG_CHECK_EQ(run("-s", sock, "call", "rpc_get_methods", NULL), 0);
	HAS(out, "job_placement");
	SG_CHECK_EQ(run("-s", sock, "call", "nope", NULL), 1);
	HAS(err, "method not found");
	SG_CHECK_EQ(run("-s", sock, "call", "nope", "{bad", NULL), 2);
	SG_CHECK_EQ(run("-s", sock, "drain", NULL), 0);
	SG_CHECK(mock.draining, "drained");
	SG_CHECK_EQ(run("-s", sock, "job", "create", "--workers", "2", "--tensor", "w:1", NULL), 1);
	HAS(err, "draining");
	SG_CHECK_EQ(run("-s", sock, "job", "destroy", "1", NULL), 0);
	SG_CHECK_EQ(run("-s", sock, "job", "destroy", "1", NULL), 1);
	HAS(err, "no such job");

	sg_ctl_server_destroy(srv);
	unlink(out_path);
	unlink(err_path);
	unlink(secret_file);
	unlink(bad_secret_file);
	rmdir(dir);
	return sg_test_finish("sigmactl");
}
