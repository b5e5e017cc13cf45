/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sg-reaper: run one test and make sure that nothing it started outlives it.
 *
 *   sg-reaper [--grace-ms MS] PROGRAM [ARGS...]
 *
 * Every test runs under it (tests/meson.build makes it the default test
 * setup's exe_wrapper). It becomes a child subreaper (PR_SET_CHILD_SUBREAPER),
 * so every process the test leaves is reparented to it rather than to init,
 * and runs PROGRAM as its child, in meson's process group.
 *
 * - The test exits: whatever it started and has not ended within the grace
 *   (2 s by default) is named on stderr, sent SIGTERM, then SIGKILL, and the
 *   test fails (exit 1) even if it passed. A test that leaves a summation node
 *   or a worker running is a defect: the next test, or the next CI job, meets
 *   it.
 * - meson times the test out: it sends SIGTERM to its process group and, half
 *   a second later, SIGKILL. The group is not all the test made (a node started
 *   with setsid(), or under a shell that defers its traps while it waits on a
 *   foreground child, escapes the group or the trap). So on SIGTERM or SIGINT
 *   the reaper passes the signal on to every descendant, waits 200 ms, kills
 *   what is left and exits, inside meson's half second.
 *
 * Exit status: the test's own (a signal N as 128 + N), or 1 when it left
 * processes behind, or 125 when the reaper itself could not run the test.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <poll.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define REAP_MAX 4096

static const char *prog = "sg-reaper";

/* Parent pid of @p pid from /proc (0 when it is gone or unreadable). */
static pid_t parent_of(pid_t pid, char *comm, size_t comm_len)
{
	char path[64], buf[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
	char *open = strchr(buf, '('), *close = strrchr(buf, ')');
	if (open == NULL || close == NULL || close[1] == '\0')
		return 0;
	if (comm != NULL) {
		size_t len = (size_t)(close - open - 1);
		if (len >= comm_len)
			len = comm_len - 1;
		memcpy(comm, open + 1, len);
		comm[len] = '\0';
	}
	char state;
	int ppid;
	if (sscanf(close + 2, "%c %d", &state, &ppid) != 2 || state == 'Z')
		return 0;
	return (pid_t)ppid;
}

/*
 * Every live descendant of this process, read from /proc: a process whose
 * parent chain reaches us. Fills @p out (at most @p max) and returns the count.
 */
static int descendants(pid_t *out, int max)
{
	static pid_t pids[REAP_MAX], ppids[REAP_MAX];
	int n = 0, found = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t self = getpid();

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL && n < REAP_MAX) {
		char *end;
		long v = strtol(e->d_name, &end, 10);
		if (*end != '\0' || v <= 0 || v == self)
			continue;
		pid_t pp = parent_of((pid_t)v, NULL, 0);
		if (pp == 0)
			continue;
		pids[n] = (pid_t)v;
		ppids[n++] = pp;
	}
	closedir(d);
	/* grow the set from our direct children until nothing is added */
	bool added = true;
	bool in[REAP_MAX] = {false};
	while (added) {
		added = false;
		for (int i = 0; i < n; i++) {
			if (in[i])
				continue;
			bool mine = ppids[i] == self;
			for (int j = 0; !mine && j < n; j++)
				mine = in[j] && pids[j] == ppids[i];
			if (mine) {
				in[i] = true;
				added = true;
			}
		}
	}
	for (int i = 0; i < n && found < max; i++)
		if (in[i])
			out[found++] = pids[i];
	return found;
}

/* Reap every exited child; record @p main's status in @p main_status. */
static void reap(pid_t main, int *main_status, bool *main_done)
{
	int st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == main) {
			*main_status = st;
			*main_done = true;
		}
}

static void signal_all(int sig, bool name)
{
	static pid_t left[REAP_MAX];
	int n = descendants(left, REAP_MAX);

	for (int i = 0; i < n; i++) {
		if (name) {
			char comm[64] = "?";
			parent_of(left[i], comm, sizeof(comm));
			fprintf(stderr, "%s: left behind: pid %d (%s)\n", prog, (int)left[i], comm);
		}
		kill(left[i], sig);
	}
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/*
 * Wait until no descendant is left or @p ms pass, reaping our children.
 * Returns the number still alive.
 */
static int wait_gone(long ms, pid_t main, int *main_status, bool *main_done)
{
	static pid_t left[REAP_MAX];
	long end = now_ms() + ms;
	int n;

	for (;;) {
		reap(main, main_status, main_done);
		n = descendants(left, REAP_MAX);
		if (n == 0 || now_ms() >= end)
			return n;
		usleep(20000);
	}
}

static int exit_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 125;
}

int main(int argc, char **argv)
{
	long grace_ms = 2000;
	int argi = 1;

	if (argc > 2 && strcmp(argv[1], "--grace-ms") == 0) {
		char *end;
		grace_ms = strtol(argv[2], &end, 10);
		if (*end != '\0' || grace_ms < 0 || grace_ms > 600000) {
			fprintf(stderr, "%s: --grace-ms wants 0..600000\n", prog);
			return 125;
		}
		argi = 3;
	}
	if (argi >= argc) {
		fprintf(stderr, "usage: %s [--grace-ms MS] PROGRAM [ARGS...]\n", prog);
		return 125;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		fprintf(stderr, "%s: PR_SET_CHILD_SUBREAPER: %s\n", prog, strerror(errno));
		return 125;
	}

	/* Signals arrive through a signalfd, so none is lost between checks. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0) {
		fprintf(stderr, "%s: signalfd: %s\n", prog, strerror(errno));
		return 125;
	}

	pid_t main_pid = fork();
	if (main_pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		return 125;
	}
	if (main_pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[argi], argv + argi);
		fprintf(stderr, "%s: %s: %s\n", prog, argv[argi], strerror(errno));
		_exit(125);
	}

	int main_status = 0;
	bool main_done = false;
	int killed_by = 0;

	while (!main_done && killed_by == 0) {
		struct signalfd_siginfo si;
		ssize_t r = read(sfd, &si, sizeof(si));
		if (r != sizeof(si)) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		if (si.ssi_signo == SIGCHLD)
			reap(main_pid, &main_status, &main_done);
		else
			killed_by = (int)si.ssi_signo;
	}

	if (killed_by != 0) {
		/* meson's timeout (or Ctrl-C): it SIGKILLs the group 500 ms later */
		signal_all(killed_by, false);
		if (wait_gone(200, main_pid, &main_status, &main_done) > 0) {
			signal_all(SIGKILL, false);
			wait_gone(200, main_pid, &main_status, &main_done);
		}
		return 128 + killed_by;
	}

	int rc = exit_code(main_status);
	if (wait_gone(grace_ms, main_pid, &main_status, &main_done) == 0)
		return rc;
	fprintf(stderr, "%s: the test exited %d and left processes running %ld ms later\n", prog,
		rc, grace_ms);
	signal_all(SIGTERM, true);
	if (wait_gone(1000, main_pid, &main_status, &main_done) > 0) {
		signal_all(SIGKILL, false);
		wait_gone(1000, main_pid, &main_status, &main_done);
	}
	return rc == 0 ? 1 : rc;
}
