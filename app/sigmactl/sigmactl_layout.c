/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl layout suggest: measure the node's lcores over an interval, name
 * the bottleneck and print the change that would even the load. The planner
 * (lay_plan) is a pure function so that its tests need no node.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "sg_ctl_client.h"
#include "sg_parse.h"
#include "sigmactl_call.h"
#include "sigmactl_layout.h"

#define EXIT_SERVER SIGMACTL_EXIT_SERVER
#define EXIT_USAGE SIGMACTL_EXIT_USAGE

static bool is_reducer_role(enum sg_role r)
{
	return r == SG_ROLE_REDUCE || r == SG_ROLE_RTC;
}

/* Append to @buf (size @cap) at *@len; output that does not fit is cut. */
static void cat(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void cat(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n < cap ? *len + (size_t)n : cap;
}

/* The layout as sigmad's flags, with @add_rx an extra (port,queue,lcore) on the
 * receiving side and @add_red an extra reducer lcore (UINT32_MAX: none). */
static void layout_flags(const struct lay_in *in, char *buf, size_t cap, uint32_t add_red,
			 bool add_rx, uint32_t rx_lcore)
{
	size_t len = 0;
	int rx_port = -1, rx_queue = -1;
	bool rtc = false, io = false, any;
	unsigned int i;

	buf[0] = '\0';
	for (i = 0; i < in->n; i++) {
		if (in->lc[i].role == SG_ROLE_RTC)
			rtc = true;
		if (in->lc[i].role == SG_ROLE_IO)
			io = true;
		if ((in->lc[i].role & SG_ROLE_IO) && in->lc[i].port >= 0 &&
		    (in->lc[i].port > rx_port ||
		     (in->lc[i].port == rx_port && in->lc[i].queue > rx_queue))) {
			rx_port = in->lc[i].port;
			rx_queue = in->lc[i].queue;
		}
	}
	/* an rtc layout grows by an rtc lcore: it receives a queue of its own */
	for (int pass = 0; pass < 2; pass++) {
		enum sg_role want = pass == 0 ? SG_ROLE_IO : SG_ROLE_RTC;
		bool grow = add_rx && ((want == SG_ROLE_IO && io) || (want == SG_ROLE_RTC && !io));

		if (!(want == SG_ROLE_IO ? io : rtc) && !(grow && want == SG_ROLE_RTC && rtc))
			continue;
		cat(buf, cap, &len, "%s--%s \"", len ? " " : "", want == SG_ROLE_IO ? "io" : "rtc");
		any = false;
		for (i = 0; i < in->n; i++)
			if (in->lc[i].role == want) {
				cat(buf, cap, &len, "%s(%d,%d,%u)", any ? "," : "", in->lc[i].port,
				    in->lc[i].queue, in->lc[i].lcore);
				any = true;
			}
		if (grow)
			cat(buf, cap, &len, "%s(%d,%d,%u)", any ? "," : "", rx_port < 0 ? 0 : rx_port,
			    rx_queue + 1, rx_lcore);
		cat(buf, cap, &len, "\"");
	}
	any = false;
	for (i = 0; i < in->n; i++)
		if (in->lc[i].role == SG_ROLE_REDUCE) {
			cat(buf, cap, &len, "%s%u", any ? "," : (len ? " --reduce " : "--reduce "),
			    in->lc[i].lcore);
			any = true;
		}
	if (add_red != UINT32_MAX)
		cat(buf, cap, &len, "%s%u", any ? "," : (len ? " --reduce " : "--reduce "), add_red);
}

/* Even the reducers by moving buckets from the busiest to the least busy, one
 * at a time, while that lowers the busiest. A reducer either gives or takes,
 * so that each bucket moves at most once and the advice reads as "from these
 * to those". Writes the new @p keymap and the estimated busy shares @p after.
 * @return the buckets moved. */
static unsigned int balance(const struct lay_in *in, const double *busy, uint16_t *keymap,
			    double *after)
{
	enum { NONE, GAVE, TOOK } side[LAY_MAX_LCORES] = {NONE};
	unsigned int nb[LAY_MAX_LCORES] = {0}, moved = 0, r, b;
	double w[SG_BUCKETS];

	memcpy(keymap, in->keymap, sizeof(in->keymap));
	for (b = 0; b < SG_BUCKETS; b++)
		nb[in->keymap[b]]++;
	for (r = 0; r < in->n_reducers; r++)
		after[r] = busy[r];
	for (b = 0; b < SG_BUCKETS; b++)
		w[b] = busy[in->keymap[b]] / nb[in->keymap[b]];
	for (;;) {
		int hi = -1, lo = -1, pick = -1;

		for (r = 0; r < in->n_reducers; r++) {
			if (hi < 0 || after[r] > after[hi])
				hi = (int)r;
			if (side[r] != GAVE && (lo < 0 || after[r] < after[lo]))
				lo = (int)r;
		}
		if (hi < 0 || lo < 0 || hi == lo || side[hi] == TOOK)
			break;
		/* the heaviest bucket of the busiest that still lowers it */
		for (b = 0; b < SG_BUCKETS; b++)
			if (keymap[b] == hi && after[lo] + w[b] < after[hi] - 1e-9 &&
			    (pick < 0 || w[b] > w[pick]))
				pick = (int)b;
		if (pick < 0)
			break;
		keymap[pick] = (uint16_t)lo;
		after[hi] -= w[pick];
		after[lo] += w[pick];
		side[hi] = GAVE;
		side[lo] = TOOK;
		moved++;
	}
	return moved;
}

int lay_plan(const struct lay_in *in, const char *target, struct lay_advice *out)
{
	double busy[LAY_MAX_LCORES] = {0}, hi_red = 0;
	double before_max = 0, before_min = 1, after_max = 0;
	uint32_t top_lcore = 0;
	unsigned int i, r;
	int hot_red = -1;
	size_t len = 0;
	const struct lay_lcore *b;

	memset(out, 0, sizeof(*out));
	out->bottleneck = -1;
	if (in->n > LAY_MAX_LCORES || in->n_reducers > in->n)
		return -EINVAL;
	memcpy(out->keymap, in->keymap, sizeof(out->keymap));
	for (i = 0; i < SG_BUCKETS; i++)
		if (in->keymap[i] >= in->n_reducers && in->n_reducers > 0)
			return -EINVAL;
	for (i = 0; i < in->n; i++) {
		const struct lay_lcore *l = &in->lc[i];

		if (l->reducer >= (int)in->n_reducers || (l->reducer >= 0 && !is_reducer_role(l->role)))
			return -EINVAL;
		if (l->reducer >= 0) {
			busy[l->reducer] = l->busy;
			if (hot_red < 0 || l->busy > hi_red) {
				hi_red = l->busy;
				hot_red = (int)i;
			}
		}
		if (out->bottleneck < 0 || l->busy > in->lc[out->bottleneck].busy)
			out->bottleneck = (int)i;
		if (l->lcore > top_lcore)
			top_lcore = l->lcore;
	}
	for (r = 0; r < in->n_reducers; r++)
		out->before[r] = out->after[r] = busy[r];
	if (out->bottleneck < 0)
		return 0;
	b = &in->lc[out->bottleneck];
	if (b->busy < LAY_HOT) {
		out->kind = LAY_NOTHING;
		snprintf(out->why, sizeof(out->why), "no bottleneck: the busiest lcore, %u (%s), is "
			 "%.0f%% busy (under %.0f%%); nothing to change", b->lcore,
			 sg_role_name(b->role), 100 * b->busy, 100 * LAY_HOT);
		return 0;
	}
	if (b->reducer >= 0 && in->n_reducers >= 2) {
		/* the advice takes the new keymap only if it gains enough */
		uint16_t keymap[SG_BUCKETS];
		double after[LAY_MAX_LCORES];
		unsigned int moved = balance(in, busy, keymap, after);

		for (r = 0; r < in->n_reducers; r++) {
			before_max = fmax(before_max, out->before[r]);
			before_min = fmin(before_min, out->before[r]);
			after_max = fmax(after_max, after[r]);
		}
		if (moved > 0 && before_max - after_max >= LAY_MIN_GAIN) {
			out->kind = LAY_KEYMAP;
			out->moved = moved;
			memcpy(out->keymap, keymap, sizeof(keymap));
			memcpy(out->after, after, sizeof(after[0]) * in->n_reducers);
			cat(out->command, sizeof(out->command), &len, "sigmactl -s %s layout set keymap=",
			    target);
			for (i = 0; i < SG_BUCKETS; i++)
				cat(out->command, sizeof(out->command), &len, "%s%u", i ? "," : "",
				    out->keymap[i]);
			snprintf(out->why, sizeof(out->why),
				 "lcore %u (%s) is %.0f%% busy while the least busy reducer is at "
				 "%.0f%%: moving %u of its buckets (live, no restart) should bring the "
				 "busiest reducer to about %.0f%%", b->lcore, sg_role_name(b->role),
				 100 * b->busy, 100 * before_min, out->moved, 100 * after_max);
			return 0;
		}
	}
	if (b->reducer >= 0) {
		bool rtc = b->role == SG_ROLE_RTC;

		out->kind = LAY_ADD_REDUCER;
		/* an rtc layout adds an rtc lcore on another RX queue; io + reduce a reducer */
		layout_flags(in, out->command, sizeof(out->command), rtc ? UINT32_MAX : top_lcore + 1,
			     rtc, top_lcore + 1);
		snprintf(out->why, sizeof(out->why),
			 "lcore %u (%s) is %.0f%% busy and %s: add %s lcore %u (restart sigmad with "
			 "these layout flags, lcore %u enabled in EAL's -l/--lcores%s)", b->lcore,
			 sg_role_name(b->role), 100 * b->busy,
			 in->n_reducers >= 2 ? "the reducers are even" : "it is the only reducer",
			 rtc ? "an rtc" : "a reducer", top_lcore + 1, top_lcore + 1,
			 rtc ? "; the port needs one more RX queue" : "");
		return 0;
	}
	/* receiving is the bottleneck */
	out->kind = LAY_ADD_RX;
	{
		bool reds_hot = hot_red >= 0 && hi_red >= LAY_HOT;

		layout_flags(in, out->command, sizeof(out->command),
			     reds_hot ? top_lcore + 2 : UINT32_MAX, true, top_lcore + 1);
		snprintf(out->why, sizeof(out->why),
			 "lcore %u (%s) is %.0f%% busy receiving while the busiest reducer is at "
			 "%.0f%%: receive on one more RX queue and lcore %u%s (restart sigmad with "
			 "these layout flags; the port needs one more RX queue, and the lcores "
			 "enabled in EAL's -l/--lcores)", b->lcore, sg_role_name(b->role),
			 100 * b->busy, 100 * hi_red, top_lcore + 1,
			 reds_hot ? ", and add a reducer: the reducers are busy too" : "");
	}
	return 0;
}

/* ---- the command ----------------------------------------------------------- */

#define fail sigmactl_fail

static json_t *call(struct sg_ctl_client *cli, const char *target, const char *method, int *rc)
{
	char err[SIGMACTL_ERR_MAX];
	int r;
	json_t *out = sigmactl_call(cli, method, NULL, &r, err, sizeof(err));

	if (out != NULL)
		return out;
	if (r == -EREMOTEIO && strstr(err, "not supported") != NULL)
		*rc = fail(EXIT_SERVER, "%s has no lcores to lay out (%s; sigma-udpd runs on one "
			   "thread)", target, err);
	else
		*rc = fail(EXIT_SERVER, "%s: %s", target, err);
	return NULL;
}

static enum sg_role role_of(const char *s)
{
	static const enum sg_role all[] = {SG_ROLE_IO, SG_ROLE_REDUCE, SG_ROLE_RTC,
					   SG_ROLE_CONTROL};

	for (size_t i = 0; s != NULL && i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(s, sg_role_name(all[i])) == 0)
			return all[i];
	return 0;
}

/* Fill @in from node_info, layout_get and two lcores_get @interval apart. */
static int measure(struct sg_ctl_client *cli, const char *target, double interval,
		   struct lay_in *in)
{
	json_t *info = NULL, *lay = NULL, *l0 = NULL, *l1 = NULL, *v, *x;
	struct timespec ts = {(time_t)interval, (long)((interval - floor(interval)) * 1e9)};
	int rc = 0;
	size_t i, k;

	memset(in, 0, sizeof(*in));
	if ((info = call(cli, target, "node_info", &rc)) == NULL ||
	    (lay = call(cli, target, "layout_get", &rc)) == NULL ||
	    (l0 = call(cli, target, "lcores_get", &rc)) == NULL)
		goto out;
	nanosleep(&ts, NULL);
	if ((l1 = call(cli, target, "lcores_get", &rc)) == NULL)
		goto out;
	v = json_object_get(lay, "lcores");
	if (!json_is_array(v) || !json_is_array(json_object_get(lay, "keymap")) ||
	    !json_is_array(l0) || !json_is_array(l1)) {
		rc = fail(EXIT_SERVER, "%s: layout_get or lcores_get: not the answer documented",
			  target);
		goto out;
	}
	json_array_foreach(v, i, x) {
		struct lay_lcore *l;

		if (in->n == LAY_MAX_LCORES)
			break;
		l = &in->lc[in->n++];
		l->lcore = (uint32_t)json_integer_value(json_object_get(x, "lcore"));
		l->role = role_of(json_string_value(json_object_get(x, "role")));
		l->port = (int32_t)json_integer_value(json_object_get(x, "port"));
		l->queue = (int32_t)json_integer_value(json_object_get(x, "queue"));
		l->reducer = -1;
	}
	in->n_reducers = (unsigned int)json_integer_value(json_object_get(lay, "reducers"));
	json_array_foreach(json_object_get(lay, "keymap"), i, x)
		if (i < SG_BUCKETS)
			in->keymap[i] = (uint16_t)json_integer_value(x);
	/* reducer index -> lcore: node_info's reducer_lcores */
	json_array_foreach(json_object_get(info, "reducer_lcores"), i, x)
		for (k = 0; k < in->n; k++)
			if (in->lc[k].lcore == (uint32_t)json_integer_value(x) &&
			    is_reducer_role(in->lc[k].role))
				in->lc[k].reducer = (int)i;
	for (k = 0; k < in->n; k++) {
		json_t *a = NULL, *b = NULL;

		json_array_foreach(l0, i, x)
			if ((uint32_t)json_integer_value(json_object_get(x, "lcore")) == in->lc[k].lcore)
				a = x;
		json_array_foreach(l1, i, x)
			if ((uint32_t)json_integer_value(json_object_get(x, "lcore")) == in->lc[k].lcore)
				b = x;
		if (a != NULL && b != NULL) {
			double db = (double)(json_integer_value(json_object_get(b, "busy_cycles")) -
					     json_integer_value(json_object_get(a, "busy_cycles")));
			double di = (double)(json_integer_value(json_object_get(b, "idle_cycles")) -
					     json_integer_value(json_object_get(a, "idle_cycles")));

			/* the cycles over the interval; an lcore that counted none: its own share */
			in->lc[k].busy = db + di > 0 && db >= 0 && di >= 0
				? db / (db + di)
				: json_number_value(json_object_get(b, "busy_pct")) / 100.0;
		}
	}
out:
	json_decref(info);
	json_decref(lay);
	json_decref(l0);
	json_decref(l1);
	return rc;
}

static const char *kind_name(enum lay_kind k)
{
	static const char *const names[] = {"nothing", "keymap", "add_reducer", "add_rx"};

	return (size_t)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

static void show(const struct lay_conf *lc, const struct lay_in *in, const struct lay_advice *a,
		 double interval)
{
	unsigned int nb[LAY_MAX_LCORES] = {0}, i;

	for (i = 0; i < SG_BUCKETS; i++)
		if (in->keymap[i] < LAY_MAX_LCORES)
			nb[in->keymap[i]]++;
	if (lc->json) {
		json_t *o = json_object(), *arr = json_array();
		char *t;

		for (i = 0; i < in->n; i++) {
			const struct lay_lcore *l = &in->lc[i];
			json_t *e = json_pack("{s:I, s:s, s:f}", "lcore", (json_int_t)l->lcore, "role",
					      sg_role_name(l->role), "busy", l->busy);

			if (l->reducer >= 0) {
				json_object_set_new(e, "reducer", json_integer(l->reducer));
				json_object_set_new(e, "buckets", json_integer(nb[l->reducer]));
				json_object_set_new(e, "busy_after", json_real(a->after[l->reducer]));
			}
			json_array_append_new(arr, e);
		}
		json_object_set_new(o, "target", json_string(lc->target));
		json_object_set_new(o, "interval", json_real(interval));
		json_object_set_new(o, "lcores", arr);
		json_object_set_new(o, "bottleneck", a->bottleneck >= 0
			? json_integer(in->lc[a->bottleneck].lcore) : json_null());
		json_object_set_new(o, "advice", json_string(kind_name(a->kind)));
		json_object_set_new(o, "command", a->command[0] ? json_string(a->command)
								 : json_null());
		json_object_set_new(o, "why", json_string(a->why));
		t = json_dumps(o, JSON_INDENT(2));
		if (t != NULL)
			puts(t);
		free(t);
		json_decref(o);
		return;
	}
	printf("lcores of %s over %.2g s:\n  LCORE ROLE      BUSY%%  REDUCER  BUCKETS  AFTER%%\n",
	       lc->target, interval);
	for (i = 0; i < in->n; i++) {
		const struct lay_lcore *l = &in->lc[i];

		if (l->reducer >= 0)
			printf("  %5u %-8s %6.1f  %7d  %7u  %6.1f\n", l->lcore, sg_role_name(l->role),
			       100 * l->busy, l->reducer, nb[l->reducer], 100 * a->after[l->reducer]);
		else
			printf("  %5u %-8s %6.1f        -        -       -\n", l->lcore,
			       sg_role_name(l->role), 100 * l->busy);
	}
	if (a->bottleneck >= 0 && a->kind != LAY_NOTHING)
		printf("bottleneck: lcore %u (%s), %.0f%% busy\n", in->lc[a->bottleneck].lcore,
		       sg_role_name(in->lc[a->bottleneck].role), 100 * in->lc[a->bottleneck].busy);
	printf("advice: %s\n", a->why);
	if (a->command[0])
		printf("  %s\n", a->command);
}

int sigmactl_layout_suggest(const struct lay_conf *lc, int argc, char **argv)
{
	static const struct option opts[] = {
		{"interval", required_argument, NULL, 'i'},
		{NULL, 0, NULL, 0},
	};
	struct sg_ctl_client *cli;
	struct lay_advice *a = NULL;
	struct lay_in *in = NULL;
	double interval = 2.0;
	int c, rc;

	optind = 0; /* re-initialise getopt: sigmactl's own options were parsed before */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'i')
			return fail(EXIT_USAGE, "layout suggest: unknown option '%s' (valid: "
				    "--interval SECS)", argv[optind - 1]);
		if (sg_parse_double(optarg, 0.1, 60, &interval) != 0)
			return fail(EXIT_USAGE, "layout suggest: --interval wants seconds (0.1..60), "
				    "not '%s'", optarg);
	}
	if (optind != argc)
		return fail(EXIT_USAGE, "layout suggest: unexpected argument '%s'", argv[optind]);
	cli = sg_ctl_client_connect(lc->target, lc->secret, lc->secret_len, lc->timeout_ms);
	if (cli == NULL)
		return fail(EXIT_SERVER, "cannot connect to %s: %s", lc->target,
			    errno == EACCES ? "the authentication was refused (wrong secret?)"
					    : strerror(errno));
	in = calloc(1, sizeof(*in));
	a = calloc(1, sizeof(*a));
	if (in == NULL || a == NULL) {
		rc = fail(EXIT_SERVER, "out of memory");
		goto out;
	}
	if ((rc = measure(cli, lc->target, interval, in)) != 0)
		goto out;
	if (in->n == 0) {
		rc = fail(EXIT_SERVER, "%s has no lcores to lay out (sigma-udpd runs on one thread)",
			  lc->target);
		goto out;
	}
	if (lay_plan(in, lc->target, a) != 0) {
		rc = fail(EXIT_SERVER, "%s: the layout and keymap it reports do not agree (a keymap "
			  "entry or reducer beyond its %u reducers)", lc->target, in->n_reducers);
		goto out;
	}
	show(lc, in, a, interval);
	rc = 0;
out:
	free(in);
	free(a);
	sg_ctl_client_close(cli);
	return rc;
}
