/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * N libsigma workers over kernel UDP in one process, against a running sigmad,
 * pushing several jobs at once (one session per rank and job, holding the
 * job's tensors 0, 1, ...): every push_pull of a round is in flight together, and
 * every element of every sum is compared with the exact sum computed here
 * (small integers, exact in every dtype: fp16 and bf16 too).
 *
 * Usage: sock_workers ADDR PORT N ROUNDS SPEC [SPEC...]
 *   SPEC = JOB:TOKEN:DTYPE:ELEMS[+ELEMS...]:PARTITION_BYTES:CHUNK_BYTES
 *   (one ELEMS per tensor of the job, in the order sigmactl job create got them)
 * Environment: SIGMA_STEER_REDUCERS=R (sigma_conf.steer_reducers),
 * SIGMA_FIRST_ROUND=K (the jobs' rounds so far: a later run continues them),
 * SIGMA_MIN_SECONDS=S (keep going, round after round, for at least S seconds:
 * load while the caller moves keys), SIGMA_RTO_US (first retransmit timeout),
 * SIGMA_WINDOW (chunks in flight per session, default 64).
 * Prints "rounds R" and each rank's counters; exits 0 when every sum was right.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_util.h"

#define SW_MAX_JOBS 8
#define SW_MAX_OPS 16 /* tensors over all jobs */

struct spec {
	uint32_t job;
	uint64_t token;
	enum sg_dtype dt;
	unsigned int ntensors;
	uint64_t elems[SW_MAX_OPS];
	uint32_t partition, chunk;
};

/* One tensor of one job: what each rank push_pulls every round. */
struct op {
	const struct spec *sp;
	struct cu_group *g;
	uint32_t tensor;
	uint64_t elems;
	struct sigma_tensor *t[CU_MAX_W];
	void *in[CU_MAX_W], *out[CU_MAX_W];
};

/* Rank @p r's element @p i in round @p k: small integers, unsigned for uint8. */
static int64_t value(enum sg_dtype dt, unsigned int r, unsigned int k, uint64_t i)
{
	int64_t v = (int64_t)((i * 7 + k * 3 + r * 5) % 61);

	return dt == SG_DTYPE_UINT8 ? v : v - 30;
}

static void put(void *buf, enum sg_dtype dt, uint64_t i, int64_t v)
{
	switch (dt) {
	case SG_DTYPE_FP32: ((float *)buf)[i] = (float)v; break;
	case SG_DTYPE_FP64: ((double *)buf)[i] = (double)v; break;
	case SG_DTYPE_FP16: ((uint16_t *)buf)[i] = sg_fp32_to_fp16((float)v); break;
	case SG_DTYPE_BF16: ((uint16_t *)buf)[i] = sg_fp32_to_bf16((float)v); break;
	case SG_DTYPE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case SG_DTYPE_INT64: ((int64_t *)buf)[i] = v; break;
	case SG_DTYPE_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	}
}

/* Element @p i of @p buf as a double (every value here is an exact integer). */
static double get(const void *buf, enum sg_dtype dt, uint64_t i)
{
	switch (dt) {
	case SG_DTYPE_FP32: return ((const float *)buf)[i];
	case SG_DTYPE_FP64: return ((const double *)buf)[i];
	case SG_DTYPE_FP16: return sg_fp16_to_fp32(((const uint16_t *)buf)[i]);
	case SG_DTYPE_BF16: return sg_bf16_to_fp32(((const uint16_t *)buf)[i]);
	case SG_DTYPE_INT32: return ((const int32_t *)buf)[i];
	case SG_DTYPE_INT64: return (double)((const int64_t *)buf)[i];
	case SG_DTYPE_INT8: return ((const int8_t *)buf)[i];
	default: return ((const uint8_t *)buf)[i];
	}
}

static int parse_spec(const char *s, struct spec *sp)
{
	char dt[16], list[256], *save = NULL;
	unsigned long long tok;
	unsigned int job, part, chunk;

	if (sscanf(s, "%u:%llx:%15[a-z0-9]:%255[0-9+]:%u:%u", &job, &tok, dt, list, &part,
		   &chunk) != 6)
		return -EINVAL;
	*sp = (struct spec){.job = job, .token = tok, .partition = part, .chunk = chunk};
	if (sg_dtype_from_name(dt, &sp->dt) < 0)
		return -EINVAL;
	for (char *e = strtok_r(list, "+", &save); e != NULL; e = strtok_r(NULL, "+", &save)) {
		if (sp->ntensors == SW_MAX_OPS || (sp->elems[sp->ntensors] = strtoull(e, NULL, 10)) == 0)
			return -EINVAL;
		sp->ntensors++;
	}
	return sp->ntensors ? 0 : -EINVAL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static struct cu_group g[SW_MAX_JOBS];
	static struct spec sp[SW_MAX_JOBS];
	static struct op ops[SW_MAX_OPS];
	unsigned int n, rounds, nj = (unsigned int)argc - 5, nops = 0, first = 0, k;
	double min_s = 0, t0;
	uint64_t bad = 0;
	/* a window of 64 chunks per session (libsigma's default is 256): a dozen sessions
	 * at once would otherwise overflow sigmad's socket buffers on a loaded machine,
	 * and a key could run out of retries while the kernel drops its pushes */
	struct sigma_conf c = {.rto_us = 20000, .max_retries = 16, .window = 64};

	if (argc < 6 || argc - 5 > SW_MAX_JOBS) {
		fprintf(stderr, "usage: %s ADDR PORT N ROUNDS JOB:TOKEN:DTYPE:ELEMS[+ELEMS...]:"
				"PARTITION:CHUNK [...] (at most %d)\n", argv[0], SW_MAX_JOBS);
		return 2;
	}
	n = (unsigned int)atoi(argv[3]);
	rounds = (unsigned int)atoi(argv[4]);
	if (n < 1 || n > CU_MAX_W)
		return 2;
	if (getenv("SIGMA_FIRST_ROUND") != NULL)
		first = (unsigned int)atoi(getenv("SIGMA_FIRST_ROUND"));
	if (getenv("SIGMA_MIN_SECONDS") != NULL)
		min_s = atof(getenv("SIGMA_MIN_SECONDS"));
	if (getenv("SIGMA_STEER_REDUCERS") != NULL)
		c.steer_reducers = (uint16_t)atoi(getenv("SIGMA_STEER_REDUCERS"));
	if (getenv("SIGMA_RTO_US") != NULL)
		c.rto_us = (uint32_t)atoi(getenv("SIGMA_RTO_US"));
	if (getenv("SIGMA_WINDOW") != NULL)
		c.window = (uint32_t)atoi(getenv("SIGMA_WINDOW"));
	c.first_round = first;
	for (unsigned int j = 0; j < nj; j++) {
		if (parse_spec(argv[5 + j], &sp[j]) < 0 || nops + sp[j].ntensors > SW_MAX_OPS) {
			fprintf(stderr, "sock_workers: bad spec '%s' (or more than %d tensors)\n",
				argv[5 + j], SW_MAX_OPS);
			return 2;
		}
		c.job = sp[j].job;
		c.token = sp[j].token;
		c.partition_bytes = sp[j].partition;
		c.chunk_bytes = sp[j].chunk;
		g[j].nnodes = 1;
		g[j].nodes[0] = (struct sigma_node){.addr = argv[1], .port = (uint16_t)atoi(argv[2])};
		if (cu_sessions(&g[j], n, &c) < 0) {
			fprintf(stderr, "sock_workers: job %u: open: %s\n", sp[j].job, strerror(errno));
			return 1;
		}
		for (uint32_t x = 0; x < sp[j].ntensors; x++) {
			struct op *o = &ops[nops++];
			size_t bytes = sp[j].elems[x] * sg_dtype_size(sp[j].dt);

			*o = (struct op){.sp = &sp[j], .g = &g[j], .tensor = x, .elems = sp[j].elems[x]};
			for (unsigned int r = 0; r < n; r++) {
				o->t[r] = sigma_tensor_register(g[j].s[r], "t", x, sp[j].dt, o->elems,
								(int)nops);
				o->in[r] = malloc(bytes);
				o->out[r] = malloc(bytes);
				if (o->t[r] == NULL || o->in[r] == NULL || o->out[r] == NULL) {
					fprintf(stderr, "sock_workers: job %u tensor %u: register: %s\n",
						sp[j].job, x, strerror(errno));
					return 1;
				}
			}
		}
	}
	t0 = now_s();
	for (k = first; k < first + rounds || now_s() - t0 < min_s; k++) {
		unsigned int busy;

		for (unsigned int q = 0; q < nops; q++)
			for (unsigned int r = 0; r < n; r++) {
				struct op *o = &ops[q];

				for (uint64_t i = 0; i < o->elems; i++)
					put(o->in[r], o->sp->dt, i, value(o->sp->dt, r + o->tensor, k, i));
				SG_CHECK_EQ(sigma_push_pull(o->t[r], o->in[r], o->out[r], NULL, NULL), 0);
			}
		/* every tensor's operations progress together */
		do {
			busy = 0;
			for (unsigned int q = 0; q < nops; q++)
				for (unsigned int r = 0; r < n; r++)
					if (sigma_test(ops[q].t[r]) == -EINPROGRESS) {
						busy++;
						sigma_poll(ops[q].g->s[r], 100);
					}
		} while (busy);
		for (unsigned int q = 0; q < nops; q++)
			for (unsigned int r = 0; r < n; r++) {
				struct op *o = &ops[q];
				uint64_t b = 0;

				if (!SG_CHECK(sigma_test(o->t[r]) == 0, "job %u tensor %u rank %u round %u: "
					      "%s", o->sp->job, o->tensor, r, k,
					      sigma_last_error(o->g->s[r])))
					goto out;
				for (uint64_t i = 0; i < o->elems; i++) {
					int64_t ref = 0;

					for (unsigned int w = 0; w < n; w++)
						ref += value(o->sp->dt, w + o->tensor, k, i);
					b += get(o->out[r], o->sp->dt, i) != (double)ref;
				}
				SG_CHECK(b == 0, "job %u tensor %u (%s) rank %u round %u: %" PRIu64 " of %"
					 PRIu64 " elements differ from the exact sum", o->sp->job,
					 o->tensor, sg_dtype_name(o->sp->dt), r, k, b, o->elems);
				bad += b;
			}
	}
out:
	printf("rounds %u (%.1f s)\n", k - first, now_s() - t0);
	for (unsigned int j = 0; j < nj; j++)
		for (unsigned int r = 0; r < n; r++) {
			struct sigma_stats st;

			sigma_get_stats(g[j].s[r], &st);
			printf("job %u %s rank %u: %" PRIu64 " pushes, %" PRIu64 " results, %" PRIu64
			       " retransmits, %" PRIu64 " nacks, %" PRIu64 " bad packets\n", sp[j].job,
			       sg_dtype_name(sp[j].dt), r, st.tx_packets, st.rx_results,
			       st.retransmits, st.nacks, st.rx_bad);
		}
	for (unsigned int q = 0; q < nops; q++)
		for (unsigned int r = 0; r < n; r++) {
			free(ops[q].in[r]);
			free(ops[q].out[r]);
		}
	for (unsigned int j = 0; j < nj; j++)
		cu_free(&g[j]);
	SG_CHECK(bad == 0, "%" PRIu64 " wrong elements", bad);
	return sg_test_finish("sock_workers");
}
