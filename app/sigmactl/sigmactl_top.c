/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl top: every interval, each node's lcores (lcores_get), jobs
 * (job_list, with rounds per second from the last frame) and each job's ranks
 * by lateness (job_lateness), drawn as lines: with curses on a terminal
 * (q quits, s changes the sort key, any size down to a line), else as plain
 * text. A node that cannot be reached or answers garbage gets a line that
 * says so; it is called again at the next frame. Nothing here blocks for
 * longer than a call's timeout.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#ifdef SIGMACTL_CURSES
#include <curses.h>
#endif

#include "sg_ctl_client.h"
#include "sg_parse.h"
#include "sigmactl_call.h"
#include "sigmactl_top.h"

/* Ranks shown per job: the slowest. */
#define TOP_RANKS 8
/* Lines of one frame at most (a node's share is bounded by its answers). */
#define TOP_LINES 4096

static const char *const sort_keys[] = {"busy", "mpps", "gbps", "drops", "lcore"};
#define N_SORT (sizeof(sort_keys) / sizeof(sort_keys[0]))

struct top_node {
	const char *target;
	char own[TOP_TARGET_MAX];  /* the target, when nodes_get gave it */
	struct sg_ctl_client *cli;
	json_t *prev_jobs; /* job_list of the last frame, for rates */
	double prev_t;
};

struct frame {
	char *line[TOP_LINES];
	unsigned int n;
};

static volatile sig_atomic_t top_stop;

static void on_sig(int sig)
{
	(void)sig;
	top_stop = 1;
}

static void addf(struct frame *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(struct frame *f, const char *fmt, ...)
{
	va_list ap;

	if (f->n == TOP_LINES)
		return;
	va_start(ap, fmt);
	if (vasprintf(&f->line[f->n], fmt, ap) >= 0)
		f->n++;
	va_end(ap);
}

static void frame_free(struct frame *f)
{
	for (unsigned int i = 0; i < f->n; i++)
		free(f->line[i]);
	f->n = 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long tint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static double tnum(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/*
 * Call @p method on node @p nd, connecting first if needed. @return the answer, or
 * NULL with @p err set (the connection is dropped, so the next frame reconnects).
 */
static json_t *top_call(const struct top_conf *tc, struct top_node *nd, const char *method,
			json_t *params, char *err, size_t cap)
{
	json_t *out;
	int rc;

	if (nd->cli == NULL) {
		nd->cli = sg_ctl_client_connect(nd->target, tc->secret, tc->secret_len,
						tc->timeout_ms);
		if (nd->cli == NULL) {
			snprintf(err, cap, "cannot connect: %s", strerror(errno));
			json_decref(params);
			return NULL;
		}
	}
	out = sigmactl_call(nd->cli, method, params, &rc, err, cap);
	if (out == NULL && rc != -EREMOTEIO) {
		sg_ctl_client_close(nd->cli);
		nd->cli = NULL;
	}
	return out;
}

static unsigned int sort_key;

static int lcore_cmp(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	double vx, vy;

	switch (sort_key) {
	case 0: vx = tnum(x, "busy_pct"); vy = tnum(y, "busy_pct"); break;
	case 1: vx = tnum(x, "mpps"); vy = tnum(y, "mpps"); break;
	case 2: vx = tnum(x, "gbps_summed"); vy = tnum(y, "gbps_summed"); break;
	case 3: vx = (double)tint(x, "drops"); vy = (double)tint(y, "drops"); break;
	default: return (int)(tint(x, "lcore") - tint(y, "lcore"));
	}
	return vx < vy ? 1 : vx > vy ? -1 : (int)(tint(x, "lcore") - tint(y, "lcore"));
}

static int rank_cmp(const void *a, const void *b)
{
	double x = tnum(*(json_t *const *)a, "avg_us"), y = tnum(*(json_t *const *)b, "avg_us");

	return x < y ? 1 : x > y ? -1 : 0;
}

/* @p arr's elements, sorted by @p cmp, into a new array of at most @p max (free() it). */
static json_t **sorted(json_t *arr, int (*cmp)(const void *, const void *), size_t *n)
{
	size_t i, m = json_array_size(arr);
	json_t **v = calloc(m ? m : 1, sizeof(*v)), *x;

	if (v == NULL) {
		*n = 0;
		return NULL;
	}
	json_array_foreach(arr, i, x)
		v[i] = x;
	qsort(v, m, sizeof(*v), cmp);
	*n = m;
	return v;
}

static void node_lcores(struct frame *f, json_t *lc)
{
	size_t n, i;
	json_t **v = sorted(lc, lcore_cmp, &n);

	addf(f, "  %5s %-8s %4s %6s %8s %8s %10s %6s", "LCORE", "ROLE", "NUMA", "BUSY%", "MPPS",
	     "GBPS", "DROPS", "RING");
	for (i = 0; v != NULL && i < n; i++)
		addf(f, "  %5lld %-8s %4lld %6.1f %8.3f %8.3f %10lld %6lld", tint(v[i], "lcore"),
		     json_string_value(json_object_get(v[i], "role")) ?: "-", tint(v[i], "numa"),
		     tnum(v[i], "busy_pct"), tnum(v[i], "mpps"), tnum(v[i], "gbps_summed"),
		     tint(v[i], "drops"), tint(v[i], "ring"));
	free(v);
}

/* The job's counter @p key's growth since the last frame, per second (-1: no earlier frame). */
static double job_rate(const struct top_node *nd, json_t *j, const char *key, double t)
{
	size_t i;
	json_t *p;

	json_array_foreach(nd->prev_jobs, i, p)
		if (tint(p, "id") == tint(j, "id") && t > nd->prev_t)
			return (double)(tint(j, key) - tint(p, key)) / (t - nd->prev_t);
	return -1;
}

static void job_ranks(struct frame *f, json_t *late)
{
	json_t *st = json_object_get(late, "straggler");
	size_t n, i;
	json_t **v = sorted(json_object_get(late, "ranks"), rank_cmp, &n);

	if (json_is_object(st))
		addf(f, "    job %lld ranks, the slowest first; straggler: rank %lld, last in %.0f%% "
		     "of rounds, %.3f ms late on average", tint(late, "id"), tint(st, "rank"),
		     100 * tnum(st, "last_share"), tnum(st, "avg_us") / 1e3);
	else
		addf(f, "    job %lld ranks: no round completed yet", tint(late, "id"));
	addf(f, "    %6s %10s %7s %10s %10s", "RANK", "AVG_MS", "LAST%", "P50_MS", "P99_MS");
	for (i = 0; v != NULL && i < n && i < TOP_RANKS; i++)
		addf(f, "    %6lld %10.3f %7.1f %10.3f %10.3f", tint(v[i], "rank"),
		     tnum(v[i], "avg_us") / 1e3, 100 * tnum(v[i], "last_share"),
		     tnum(v[i], "p50_us") / 1e3, tnum(v[i], "p99_us") / 1e3);
	if (n > TOP_RANKS)
		addf(f, "    ... %zu more ranks", n - TOP_RANKS);
	free(v);
}

static int drop_cmp(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "n"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "n"));

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The node's drops by reason (stats_get), those that dropped anything, the most first. */
static void node_drops(const struct top_conf *tc, struct top_node *nd, struct frame *f)
{
	char err[320], line[512];
	json_t *st = top_call(tc, nd, "stats_get", NULL, err, sizeof(err));
	json_t *drops = json_object_get(st, "drops"), *all = json_array(), *v, **s;
	const char *k;
	size_t n = 0, i, len = 0;

	if (!json_is_object(drops)) {
		addf(f, "  drops by reason: %s", st == NULL ? err
			: !json_is_object(st) ? "garbage from the node" : "not kept by this node");
		json_decref(st);
		json_decref(all);
		return;
	}
	json_object_foreach(drops, k, v)
		if (json_integer_value(v) > 0)
			json_array_append_new(all, json_pack("{s:s, s:I}", "r", k, "n",
							     (json_int_t)json_integer_value(v)));
	s = sorted(all, drop_cmp, &n);
	line[0] = '\0';
	for (i = 0; s != NULL && i < n && len < sizeof(line); i++) {
		int w = snprintf(line + len, sizeof(line) - len, "%s%s %lld", i ? ", " : "",
				 json_string_value(json_object_get(s[i], "r")),
				 (long long)json_integer_value(json_object_get(s[i], "n")));

		if (w < 0)
			break;
		len += (size_t)w;
	}
	addf(f, "  drops by reason: %s", n ? line : "none");
	free(s);
	json_decref(all);
	json_decref(st);
}

/* One node's share of the frame. */
static void node_frame(const struct top_conf *tc, struct top_node *nd, struct frame *f)
{
	char err[320];
	json_t *lc, *jobs, *j;
	double t = now_s();
	size_t i;

	addf(f, "node %s", nd->target);
	lc = top_call(tc, nd, "lcores_get", NULL, err, sizeof(err));
	if (json_is_array(lc))
		node_lcores(f, lc);
	else
		addf(f, "  lcores: %s", lc != NULL ? "not an array: garbage from the node" : err);
	json_decref(lc);
	if (nd->cli == NULL) /* unreachable: the rest would fail the same way */
		return;
	jobs = top_call(tc, nd, "job_list", NULL, err, sizeof(err));
	if (!json_is_array(jobs)) {
		addf(f, "  jobs: %s", jobs != NULL ? "not an array: garbage from the node" : err);
		json_decref(jobs);
		return;
	}
	addf(f, "  %6s %7s %9s %8s %12s %9s %9s %9s %9s", "JOB", "WORKERS", "ROUNDS/S", "GBPS",
	     "ROUNDS", "RETRANS", "NACKS", "DROPS", "STRAGGLER");
	json_array_foreach(jobs, i, j) {
		double r = job_rate(nd, j, "rounds_completed", t);
		double bps = job_rate(nd, j, "bytes_pushed", t);
		json_t *late = top_call(tc, nd, "job_lateness",
					json_pack("{s:I}", "id", (json_int_t)tint(j, "id")), err,
					sizeof(err));
		json_t *st = json_object_get(late, "straggler");
		char rate[32], gbps[32], who[32];

		snprintf(rate, sizeof(rate), r < 0 ? "-" : "%.1f", r);
		/* the pushes' payload summed here, in Gbit/s */
		snprintf(gbps, sizeof(gbps), bps < 0 ? "-" : "%.3f", bps * 8 / 1e9);
		snprintf(who, sizeof(who), json_is_object(st) ? "rank %lld" : "-", tint(st, "rank"));
		addf(f, "  %6lld %7lld %9s %8s %12lld %9lld %9lld %9lld %9s", tint(j, "id"),
		     tint(j, "workers"), rate, gbps, tint(j, "rounds_completed"),
		     tint(j, "retransmits"), tint(j, "nacks"), tint(j, "drops"), who);
		if (json_is_object(late))
			job_ranks(f, late);
		else
			addf(f, "    job %lld ranks: %s", tint(j, "id"),
			     late != NULL ? "garbage from the node" : err);
		json_decref(late);
	}
	json_decref(nd->prev_jobs);
	nd->prev_jobs = jobs;
	nd->prev_t = t;
	node_drops(tc, nd, f);
}

static void build(const struct top_conf *tc, struct top_node *nodes, unsigned int nn,
		  struct frame *f, double interval, const char *note)
{
	time_t now = time(NULL);
	char tbuf[32];

	strftime(tbuf, sizeof(tbuf), "%H:%M:%S", localtime(&now));
	addf(f, "sigma top %s: %u node%s, every %.2g s, lcores by %s (q quits, s sorts)", tbuf,
	     nn, nn == 1 ? "" : "s", interval, sort_keys[sort_key]);
	if (note != NULL)
		addf(f, "%s", note);
	for (unsigned int i = 0; i < nn; i++) {
		addf(f, "%s", "");
		node_frame(tc, &nodes[i], f);
	}
}

static void node_forget(struct top_node *nd)
{
	sg_ctl_client_close(nd->cli);
	json_decref(nd->prev_jobs);
	memset(nd, 0, sizeof(*nd));
}

/*
 * Ask tc->nodes_get for the nodes: keep those still there (their connections and
 * rates), drop the others, add the new ones, in the order given. @return the
 * count; on a failed refresh the nodes stay and @p note says why.
 */
static unsigned int refresh_nodes(const struct top_conf *tc, struct top_node *nodes,
				  unsigned int nn, char *note, size_t cap)
{
	static char got[TOP_MAX_NODES][TOP_TARGET_MAX];
	struct top_node old[TOP_MAX_NODES];
	char err[256] = "";
	int n = tc->nodes_get(tc->nodes_arg, got, TOP_MAX_NODES, err, sizeof(err));
	unsigned int i, k;

	if (n < 0) {
		snprintf(note, cap, "%s: %s (the nodes of the last frame)", tc->source, err);
		return nn;
	}
	snprintf(note, cap, "%s: %d live node%s", tc->source, n, n == 1 ? "" : "s");
	memcpy(old, nodes, sizeof(old));
	memset(nodes, 0, sizeof(old));
	for (i = 0; i < (unsigned int)n && i < TOP_MAX_NODES; i++) {
		got[i][TOP_TARGET_MAX - 1] = '\0';
		for (k = 0; k < nn; k++)
			if (old[k].target != NULL && strcmp(old[k].own, got[i]) == 0)
				break;
		if (k < nn) {
			nodes[i] = old[k];
			old[k].target = NULL;
		} else {
			memcpy(nodes[i].own, got[i], sizeof(nodes[i].own));
		}
		nodes[i].target = nodes[i].own;
	}
	for (k = 0; k < nn; k++)
		if (old[k].target != NULL)
			node_forget(&old[k]);
	return i;
}

#ifdef SIGMACTL_CURSES
/* Draw @p f from the top, each line cut to the width; what does not fit is left out. */
static void draw(const struct frame *f)
{
	erase();
	for (int y = 0; y < LINES && (unsigned int)y < f->n; y++)
		mvaddnstr(y, 0, f->line[y], COLS);
	refresh();
}

/* Keys until @p interval passed: @return false on q. */
static bool wait_keys(double interval)
{
	double end = now_s() + interval;

	while (!top_stop && now_s() < end) {
		int ch = getch();

		if (ch == 'q' || ch == 'Q')
			return false;
		if (ch == 's' || ch == 'S') {
			sort_key = (sort_key + 1) % N_SORT;
			return true; /* redraw at once, in the new order */
		}
		/* KEY_RESIZE and others: the next frame fits the new size */
	}
	return !top_stop;
}
#endif

int sigmactl_top(const struct top_conf *tc, int argc, char **argv)
{
	static const struct option opts[] = {
		{"sort", required_argument, NULL, 'S'},
		{"interval", required_argument, NULL, 'i'},
		{"count", required_argument, NULL, 'c'},
		{NULL, 0, NULL, 0},
	};
	struct top_node *nodes = calloc(tc->nodes_get ? TOP_MAX_NODES : tc->n, sizeof(*nodes));
	struct frame f = {.n = 0};
	unsigned int nn = tc->nodes_get ? 0 : tc->n;
	char note[320];
	double interval = 1.0;
	uint64_t count = 0, k;
	bool tty = isatty(STDOUT_FILENO);
	int c;

	if (nodes == NULL)
		return 1;
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		size_t i;

		switch (c) {
		case 'S':
			for (i = 0; i < N_SORT && strcmp(optarg, sort_keys[i]) != 0; i++)
				;
			if (i == N_SORT) {
				fprintf(stderr, "sigmactl: top: unknown sort key '%s': want busy, mpps, "
					"gbps, drops or lcore\n", optarg);
				free(nodes);
				return 2;
			}
			sort_key = (unsigned int)i;
			break;
		case 'i':
			if (sg_parse_double(optarg, 0.1, 3600, &interval) != 0) {
				fprintf(stderr, "sigmactl: top: --interval wants seconds (0.1..3600)\n");
				free(nodes);
				return 2;
			}
			break;
		case 'c':
			if (sg_parse_u64(optarg, 1, 1u << 30, &count) != 0) {
				fprintf(stderr, "sigmactl: top: --count wants a positive number\n");
				free(nodes);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "sigmactl: top: valid options: --sort busy|mpps|gbps|drops|"
				"lcore, --interval SECS, --count N\n");
			free(nodes);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sigmactl: top: unexpected argument '%s'\n", argv[optind]);
		free(nodes);
		return 2;
	}
	for (unsigned int i = 0; i < nn; i++)
		nodes[i].target = tc->targets[i];
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	signal(SIGPIPE, SIG_IGN); /* a node that hangs up: its call fails, the view goes on */
#ifdef SIGMACTL_CURSES
	if (tty) {
		initscr();
		cbreak();
		noecho();
		curs_set(0);
		timeout(100);
	}
#endif
	for (k = 0; !top_stop && (count == 0 || k < count); k++) {
		if (tc->nodes_get != NULL)
			nn = refresh_nodes(tc, nodes, nn, note, sizeof(note));
		build(tc, nodes, nn, &f, interval, tc->nodes_get != NULL ? note : NULL);
#ifdef SIGMACTL_CURSES
		if (tty) {
			draw(&f);
			frame_free(&f);
			if (!wait_keys(count != 0 && k + 1 == count ? 0 : interval))
				break;
			continue;
		}
#endif
		for (unsigned int i = 0; i < f.n; i++)
			puts(f.line[i]);
		putchar('\n');
		fflush(stdout);
		frame_free(&f);
		if (count == 0 || k + 1 < count) {
			struct timespec ts = {(time_t)interval,
					      (long)((interval - floor(interval)) * 1e9)};

			nanosleep(&ts, NULL);
		}
	}
#ifdef SIGMACTL_CURSES
	if (tty)
		endwin();
#endif
	for (unsigned int i = 0; i < nn; i++)
		node_forget(&nodes[i]);
	free(nodes);
	return 0;
}
