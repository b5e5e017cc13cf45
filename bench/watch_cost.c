/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a membership watch costs a worker: W watches of one cluster held for S
 * seconds while nothing changes (a stream, or a range poll every POLL_MS), the
 * process's CPU time over that time (user + system: the watches' threads, the
 * main thread sleeps) per watch and second, and the requests they made; then
 * the cost of sg_etcd_watch_alive() when nothing changed, which is all that
 * libsigma calls, at its timer scans (every rto_us / 4), never per packet: ns
 * per call over 10^7 calls. Prints one JSON object.
 *
 * Usage: watch_cost ETCD_URLS CLUSTER stream|poll [WATCHES [SECONDS [POLL_MS]]]
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sg_etcd.h"
#include "sg_parse.h"

#define MAX_W 64

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sg_etcd_watch_conf c = {0};
	struct sg_etcd_watch *w[MAX_W] = {NULL};
	struct sg_etcd_watch_stats st, sum = {0};
	const char *names[1] = {"n1"};
	unsigned int nw = 4, secs = 10;
	double cpu0, cpu1, t0, t1;
	uint64_t gen = 0, calls = 10000000, seen = 0;
	bool alive = false;

	if (argc < 4 || (strcmp(argv[3], "stream") != 0 && strcmp(argv[3], "poll") != 0)) {
		fprintf(stderr, "usage: watch_cost ETCD_URLS CLUSTER stream|poll [WATCHES [SECONDS "
			"[POLL_MS]]]\n");
		return 2;
	}
	c.etcd.endpoints = argv[1];
	c.cluster = argv[2];
	c.mode = strcmp(argv[3], "poll") == 0 ? SG_ETCD_WATCH_POLL : SG_ETCD_WATCH_AUTO;
	{
		static const uint64_t lo[3] = {1, 1, 0}, hi[3] = {MAX_W, UINT_MAX, UINT32_MAX};
		uint64_t v[3] = {nw, secs, 0};

		for (int i = 0; i < 3 && 4 + i < argc; i++)
			if (sg_parse_u64(argv[4 + i], lo[i], hi[i], &v[i]) != 0)
				return 2;
		nw = (unsigned int)v[0];
		secs = (unsigned int)v[1];
		c.poll_ms = (uint32_t)v[2];
	}
	for (unsigned int i = 0; i < nw; i++) {
		w[i] = sg_etcd_watch_create(&c);
		if (w[i] == NULL) {
			fprintf(stderr, "watch_cost: watch: %s\n", strerror(errno));
			return 1;
		}
	}
	/* the first read (and the stream) made: steady state from here */
	for (int k = 0; k < 500; k++) {
		struct timespec ts = {0, 10000000};

		sg_etcd_watch_stats(w[nw - 1], &st);
		if (st.generation > 0 && (c.mode == SG_ETCD_WATCH_POLL || st.streaming))
			break;
		nanosleep(&ts, NULL);
	}
	cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	t0 = clock_s(CLOCK_MONOTONIC);
	for (unsigned int i = 0; i < secs; i++) {
		struct timespec ts = {1, 0};

		nanosleep(&ts, NULL);
	}
	cpu1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	t1 = clock_s(CLOCK_MONOTONIC);
	for (unsigned int i = 0; i < nw; i++) {
		sg_etcd_watch_stats(w[i], &st);
		sum.polls += st.polls;
		sum.streams += st.streams;
		sum.events += st.events;
		sum.failures += st.failures;
	}
	/* libsigma's call at a timer scan: nothing changed since its last look */
	sg_etcd_watch_alive(w[0], &gen, names, 1, &alive);
	{
		double a = clock_s(CLOCK_MONOTONIC), b;

		for (uint64_t i = 0; i < calls; i++)
			seen += (uint64_t)sg_etcd_watch_alive(w[0], &gen, names, 1, &alive);
		b = clock_s(CLOCK_MONOTONIC);
		printf("{\"bench\": \"watch_cost\", \"mode\": \"%s\", \"watches\": %u, \"seconds\": "
		       "%.2f, \"cpu_ms_per_watch_s\": %.4f, \"polls\": %llu, \"streams\": %llu, "
		       "\"events\": %llu, \"failures\": %llu, \"alive_ns_per_call\": %.2f, "
		       "\"alive_changes_seen\": %llu}\n", argv[3], nw, t1 - t0,
		       (cpu1 - cpu0) * 1e3 / nw / (t1 - t0), (unsigned long long)sum.polls,
		       (unsigned long long)sum.streams, (unsigned long long)sum.events,
		       (unsigned long long)sum.failures, (b - a) * 1e9 / (double)calls,
		       (unsigned long long)seen);
	}
	for (unsigned int i = 0; i < nw; i++)
		sg_etcd_watch_stop(w[i]);
	return 0;
}
