/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Straggler attribution (sg_dp_engine_job_lateness(), sg_late.h): pushes at
 * synthetic times, one rank late by a known amount; the histogram, sums,
 * moving average, last counts and the straggler against what the test
 * computes from the times it chose; the lower bound of a timed-out round; the
 * late-rank log line (once, again after recovery); sg_late_add() and
 * sg_late_quantile_ns().
 */
#include <errno.h>
#include <stdio.h>

#include <rte_log.h>

#include "dp_test_util.h"
#include "sg_late.h"

#define US 1000ull
#define MS 1000000ull
#define TOKEN 0x1a7eull
#define N 4
#define NCHUNK 4

static struct cap cap;

static const struct push_spec ps = {.job = 7, .token = TOKEN, .dtype = SG_DTYPE_FP32,
				    .chunk_bytes = 64, .key = 1, .key_nelem = 16 * NCHUNK};

static int push(struct sg_dp_engine *e, uint32_t job, uint32_t rank, uint32_t chunk,
		uint32_t round, uint64_t now)
{
	static uint8_t p[SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD];
	struct push_spec s = ps;
	float d[16];

	s.job = job;
	for (int i = 0; i < 16; i++)
		d[i] = (float)(rank + 1);
	cap.n = 0; /* the RESULTs are not what this test reads */
	return sg_dp_engine_rx(e, p, mk_pkt(p, &s, rank, chunk, round, d), 100 + rank, now);
}

static void add_job(struct sg_dp_engine *e, uint32_t id, uint32_t n, enum sg_mode mode)
{
	struct sg_dp_key k = {.id = 1, .nelem = ps.key_nelem};
	struct sg_dp_job_conf jc = {.id = id, .nworkers = n, .token = TOKEN,
				    .dtype = SG_DTYPE_FP32, .mode = mode, .chunk_bytes = 64,
				    .keys = &k, .nkeys = 1};

	SG_CHECK_EQ(sg_dp_engine_add_job(e, &jc), 0);
}

/* What the test expects, from the times it gave each push. */
struct want {
	uint64_t hist[N][SG_LATE_BUCKETS];
	uint64_t sum[N], last[N], rounds;
};

/*
 * Rounds @p r0..@p r1-1 of every chunk: the ranks but the slow one push within
 * 10 µs of the round's start, in an order that turns with the round (so the
 * first is not always rank 0); rank @p slow pushes @p late later, give or take
 * 300 µs. Each push's lateness goes into @p w.
 */
static void rounds(struct sg_dp_engine *e, uint32_t job, enum sg_mode mode, uint32_t r0,
		   uint32_t r1, uint32_t slow, uint64_t late, uint64_t *t, struct want *w)
{
	uint64_t seed = 42 + r0;

	for (uint32_t r = r0; r < r1; r++) {
		for (uint32_t c = 0; c < NCHUNK; c++) {
			uint64_t t0 = *t + c * 50 * US, first = UINT64_MAX, at[N];
			uint32_t order[N], k = 0, lastr = 0;

			for (uint32_t i = 0; i < N; i++)
				if ((i + r) % N != slow)
					order[k++] = (i + r) % N;
			order[k] = slow;
			for (uint32_t i = 0; i < N; i++) {
				uint32_t rk = order[i];

				at[rk] = rk == slow ? t0 + late - 300 * US + splitmix64(&seed) % (600 * US)
						   : t0 + i * 3 * US + splitmix64(&seed) % 3;
			}
			for (uint32_t i = 0; i < N; i++) {
				uint32_t rk = order[i];
				int rc = push(e, job, rk, c, r, at[rk]);

				SG_CHECK(rc > 0 && (rc & SG_DP_USED_SUMMED),
					 "job %u round %u chunk %u rank %u: %d", job, r, c, rk, rc);
				first = first < at[rk] ? first : at[rk];
				w->hist[rk][sg_late_bucket(at[rk] - first)]++;
				w->sum[rk] += at[rk] - first;
				lastr = rk;
				(void)mode;
			}
			w->last[lastr]++;
			w->rounds++;
		}
		*t += 25 * MS;
	}
}

static void check_want(const struct sg_late *l, const struct want *w, const char *what)
{
	SG_CHECK(l->nranks == N, "%s: nranks %u", what, l->nranks);
	SG_CHECK(l->rounds == w->rounds, "%s: rounds %" PRIu64 ", want %" PRIu64, what, l->rounds,
		 w->rounds);
	for (uint32_t r = 0; r < N; r++) {
		SG_CHECK(l->rank[r].sum_ns == w->sum[r], "%s: rank %u sum %" PRIu64 " want %" PRIu64,
			 what, r, l->rank[r].sum_ns, w->sum[r]);
		SG_CHECK(l->rank[r].last == w->last[r], "%s: rank %u last %" PRIu64 " want %" PRIu64,
			 what, r, l->rank[r].last, w->last[r]);
		for (unsigned int b = 0; b < SG_LATE_BUCKETS; b++)
			SG_CHECK(l->rank[r].hist[b] == w->hist[r][b],
				 "%s: rank %u bucket %u: %" PRIu64 " want %" PRIu64, what, r, b,
				 l->rank[r].hist[b], w->hist[r][b]);
	}
	for (uint32_t r = N; r < SG_MAX_WORKERS; r++)
		SG_CHECK(sg_late_pushes(&l->rank[r]) == 0 && l->rank[r].last == 0,
			 "%s: rank %u past N is 0", what, r);
}

/* Lines the engine logged into the stream, and how many name "rank @p rank is late". */
static int late_lines(FILE *log, uint32_t rank)
{
	char line[512], pat[32];
	int n = 0;

	fflush(log);
	rewind(log);
	snprintf(pat, sizeof(pat), "rank %u is late", rank);
	while (fgets(line, sizeof(line), log) != NULL)
		n += strstr(line, pat) != NULL;
	fseek(log, 0, SEEK_END);
	return n;
}

static void test_one_late_rank(enum sg_mode mode, FILE *log)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 64, .late_log_ns = 10 * MS};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	static struct want w;
	static struct sg_late l;
	uint64_t t = 1000 * MS;
	int before = late_lines(log, 3);

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	memset(&w, 0, sizeof(w));
	add_job(e, 7, N, mode);
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 7, &l), 0);
	SG_CHECK(l.nranks == N && l.rounds == 0 && sg_late_straggler(&l) == -1,
		 "a fresh job: no rounds, no straggler");

	rounds(e, 7, mode, 0, 60, 3, 20 * MS, &t, &w);
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 7, &l), 0);
	check_want(&l, &w, "20 ms late");
	SG_CHECK_EQ(sg_late_straggler(&l), 3);
	/* 20 ms +- 0.3 is in [16.4, 32.8) ms: bucket 15 */
	SG_CHECK_EQ(sg_late_bucket(20 * MS), 15);
	SG_CHECK(l.rank[3].hist[15] == 60 * NCHUNK, "rank 3: all its pushes in bucket 15");
	SG_CHECK(l.rank[3].avg_ns > 19500 * US && l.rank[3].avg_ns < 20500 * US,
		 "rank 3's average %" PRIu64 " ns, want 20 ms +- 0.5", l.rank[3].avg_ns);
	for (uint32_t r = 0; r < 3; r++)
		SG_CHECK(l.rank[r].avg_ns < 20 * US, "rank %u's average %" PRIu64 " ns", r,
			 l.rank[r].avg_ns);
	{
		uint64_t q = sg_late_quantile_ns(&l.rank[3], 0.5);

		SG_CHECK(q >= 16384 * US && q < 32768 * US, "rank 3's median %" PRIu64 " ns", q);
	}
	SG_CHECK(late_lines(log, 3) == before + 1, "rank 3 logged as late once (%d lines)",
		 late_lines(log, 3) - before);
	SG_CHECK(late_lines(log, 0) + late_lines(log, 1) + late_lines(log, 2) == 0,
		 "no other rank logged");

	/* rank 3 catches up (1 µs late): its average falls below 5 ms, then it is late again */
	rounds(e, 7, mode, 60, 120, 3, 1 * US + 300 * US, &t, &w);
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 7, &l), 0);
	SG_CHECK(l.rank[3].avg_ns < 1 * MS, "rank 3 on time: average %" PRIu64, l.rank[3].avg_ns);
	rounds(e, 7, mode, 120, 180, 3, 20 * MS, &t, &w);
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 7, &l), 0);
	check_want(&l, &w, "late, on time, late");
	SG_CHECK(late_lines(log, 3) == before + 2, "rank 3 logged again after it recovered (%d)",
		 late_lines(log, 3) - before);

	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 8, &l), -ENOENT);
	SG_CHECK_EQ(sg_dp_engine_remove_job(e, 7), 0);
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 7, &l), -ENOENT);
	sg_dp_engine_destroy(e);
}

/*
 * A round reported late: rank 2 comes 180 ms after the first push, past a 100 ms
 * slot timeout reported at 150 ms. Its lateness is the timeout plus the time since
 * the report (130 ms), a lower bound of the true 180.
 */
static void test_timed_out_round(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 16,
				       .slot_timeout_ns = 100 * MS, .late_log_ns = UINT64_MAX};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	static struct sg_late l;

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	add_job(e, 5, 3, SG_MODE_SYNC);
	SG_CHECK(push(e, 5, 0, 0, 0, 1000 * MS) > 0, "rank 0");
	SG_CHECK(push(e, 5, 1, 0, 0, 1001 * MS) > 0, "rank 1");
	SG_CHECK_EQ(sg_dp_engine_poll(e, 1150 * MS), 1);
	SG_CHECK(push(e, 5, 2, 0, 0, 1180 * MS) & SG_DP_USED_COMPLETED, "rank 2 completes it");
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 5, &l), 0);
	SG_CHECK_EQ(l.rank[2].sum_ns, 130 * MS);
	SG_CHECK_EQ(l.rank[2].hist[sg_late_bucket(130 * MS)], 1);
	SG_CHECK_EQ(l.rank[1].sum_ns, 1 * MS);
	SG_CHECK_EQ(l.rank[0].hist[0], 1);
	SG_CHECK(l.rounds == 1 && l.rank[2].last == 1 && sg_late_straggler(&l) == 2,
		 "rank 2 last");
	sg_dp_engine_destroy(e);
}

/* One worker: every push is its round's first and last. Async: no rounds, nothing kept. */
static void test_one_worker_and_async(void)
{
	struct sg_dp_engine_conf ec = {.numa_node = -1, .pool_bufs = 16};
	struct sg_dp_engine *e = cap_engine(&cap, &ec);
	static struct sg_late l;

	if (!SG_CHECK(e != NULL, "engine"))
		return;
	add_job(e, 1, 1, SG_MODE_SYNC);
	add_job(e, 2, 2, SG_MODE_ASYNC);
	for (uint32_t r = 0; r < 5; r++) {
		SG_CHECK(push(e, 1, 0, 0, r, (r + 1) * MS) & SG_DP_USED_COMPLETED, "N = 1");
		SG_CHECK(push(e, 2, 1, 0, r, (r + 1) * MS) > 0, "async");
	}
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 1, &l), 0);
	SG_CHECK(l.nranks == 1 && l.rounds == 5 && l.rank[0].hist[0] == 5 && l.rank[0].sum_ns == 0 &&
			 sg_late_straggler(&l) == 0,
		 "N = 1: 5 rounds, none late");
	SG_CHECK_EQ(sg_dp_engine_job_lateness(e, 2, &l), 0);
	SG_CHECK(l.nranks == 2 && l.rounds == 0 && sg_late_pushes(&l.rank[1]) == 0,
		 "async: nothing timed");
	sg_dp_engine_destroy(e);
}

/* Two engines' tables of one job: counts add, averages weigh by pushes. */
static void test_add_and_quantile(void)
{
	static struct sg_late a, b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.nranks = 2;
	a.rank[1].hist[sg_late_bucket(3 * MS)] = 30;
	a.rank[1].avg_ns = 3 * MS;
	a.rank[1].sum_ns = 90 * MS;
	a.rank[1].last = 30;
	a.rounds = 30;
	b.nranks = 3;
	b.rank[1].hist[sg_late_bucket(7 * MS)] = 10;
	b.rank[1].avg_ns = 7 * MS;
	b.rank[1].sum_ns = 70 * MS;
	b.rank[2].hist[0] = 10;
	b.rank[0].last = 10;
	b.rounds = 10;
	sg_late_add(&a, &b);
	SG_CHECK_EQ(a.nranks, 3);
	SG_CHECK_EQ(a.rounds, 40);
	SG_CHECK_EQ(sg_late_pushes(&a.rank[1]), 40);
	SG_CHECK_EQ(a.rank[1].avg_ns, 4 * MS); /* (30 * 3 + 10 * 7) / 40 */
	SG_CHECK_EQ(a.rank[1].sum_ns, 160 * MS);
	SG_CHECK_EQ(a.rank[2].hist[0], 10);
	SG_CHECK_EQ(sg_late_straggler(&a), 1);
	/* 30 pushes in [2.048, 4.096) ms and 10 in [4.096, 8.192): the median is in the first */
	{
		uint64_t q50 = sg_late_quantile_ns(&a.rank[1], 0.5);
		uint64_t q90 = sg_late_quantile_ns(&a.rank[1], 0.9);

		SG_CHECK(q50 >= 2048 * US && q50 < 4096 * US, "median %" PRIu64, q50);
		SG_CHECK(q90 >= 4096 * US && q90 < 8192 * US, "p90 %" PRIu64, q90);
		SG_CHECK_EQ(sg_late_quantile_ns(&a.rank[5], 0.5), 0);
	}
	SG_CHECK(sg_late_bucket(0) == 0 && sg_late_bucket(999) == 0 && sg_late_bucket(1000) == 1 &&
			 sg_late_bucket(1999) == 1 && sg_late_bucket(2000) == 2 &&
			 sg_late_bucket(UINT64_MAX) == SG_LATE_BUCKETS - 1,
		 "bucket edges");
	SG_CHECK(sg_late_bucket_us(0) == 1 && sg_late_bucket_us(22) == 1ull << 22 &&
			 sg_late_bucket_us(SG_LATE_BUCKETS - 1) == 0,
		 "bucket bounds");
}

int main(void)
{
	FILE *log = tmpfile();

	if (log == NULL)
		SG_TEST_SKIP_ALL("no temporary file for the log");
	rte_openlog_stream(log);
	test_one_late_rank(SG_MODE_SYNC, log);
	test_one_late_rank(SG_MODE_DETERM, log);
	test_timed_out_round();
	test_one_worker_and_async();
	test_add_and_quantile();
	rte_openlog_stream(NULL);
	fclose(log);
	return sg_test_finish("dp_late");
}
