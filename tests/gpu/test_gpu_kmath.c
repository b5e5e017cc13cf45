/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA backend's arithmetic and ordering, checked on the CPU (no GPU):
 *  - sg_gpu_kmath.h's fp16/bf16 conversions against summation/'s;
 *  - the reduce kernels' per-vector and per-element functions, cut by the
 *    kernels' own head/vector/tail split, against sg_sum_addk() bit for bit
 *    (any alignment, n not a multiple of the vector width, k = 1..16);
 *  - the partition and step clipping helpers against a plain reference;
 *  - the pipelined staging's streams and events (sg_gpu_plan_chains(),
 *    sg_gpu_step_waits(), the slot reuse of sg_gpu_cuda_run()) in a
 *    simulator of CUDA streams that runs ready stream heads in random order
 *    and checks that no step starts before the steps it depends on, and no
 *    slot buffer is reused while a partition still uses it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "sg_gpu_internal.h"
#include "sg_gpu_kmath.h"

static uint32_t rng = 12345;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

/* The header's own bit casts: what the kernels use. */
#define u2f sg_gpu_u2f
#define f2u sg_gpu_f2u

/* ---- conversions -------------------------------------------------------- */

static void check_narrow(float f)
{
	uint16_t a = sg_gpu_f2h_soft(f), b = sg_fp32_to_fp16(f);
	uint16_t c = sg_gpu_f2b_soft(f), d = sg_fp32_to_bf16(f);

	SG_CHECK(a == b, "fp16 of %#x: %#x, summation/ %#x", f2u(f), a, b);
	SG_CHECK(c == d, "bf16 of %#x: %#x, summation/ %#x", f2u(f), c, d);
}

static void test_conversions(void)
{
	SG_CHECK_EQ(SG_GPU_DT_FP32, SG_DTYPE_FP32);
	SG_CHECK_EQ(SG_GPU_DT_FP16, SG_DTYPE_FP16);
	SG_CHECK_EQ(SG_GPU_DT_BF16, SG_DTYPE_BF16);
	SG_CHECK_EQ(SG_GPU_KMAX_SRC, SG_GPU_MAX_SRC);
	for (uint32_t h = 0; h < 65536; h++) {
		float a = sg_gpu_h2f_soft((uint16_t)h), b = sg_fp16_to_fp32((uint16_t)h);

		SG_CHECK(f2u(a) == f2u(b), "fp16 %#x widens to %#x, summation/ %#x", h, f2u(a),
			 f2u(b));
		SG_CHECK(f2u(sg_gpu_b2f_soft((uint16_t)h)) == f2u(sg_bf16_to_fp32((uint16_t)h)),
			 "bf16 %#x", h);
		SG_CHECK(f2u(sg_gpu_widen(SG_GPU_DT_FP16, (uint16_t)h)) == f2u(b), "widen %#x", h);
		/* Around every 16-bit value: the rounding boundaries and their neighbours. */
		if ((h & 0x7c00) != 0x7c00) {
			uint32_t lo = f2u(b), hi = f2u(sg_fp16_to_fp32((uint16_t)(h + 1)));
			uint32_t mid = f2u((u2f(lo) + u2f(hi)) / 2);

			if ((h & 0x7fff) != 0x7bff && (h & 0x7fff) != 0x7fff)
				for (int dlt = -1; dlt <= 1; dlt++)
					check_narrow(u2f(mid + dlt));
		}
		for (int dlt = -1; dlt <= 1; dlt++)
			check_narrow(u2f((h << 16) + 0x8000u + dlt)); /* bf16 midpoints */
	}
	/* Every exponent and sign with sampled mantissas, Inf and NaNs included. */
	for (uint64_t u = 0; u < (1ull << 32); u += 997)
		check_narrow(u2f((uint32_t)u));
	check_narrow(65504.0f);
	check_narrow(65519.99f);
	check_narrow(65520.0f);
	check_narrow(0x1p-25f);
	check_narrow(0x1.000002p-25f);
	check_narrow(0x1p-24f * 1.5f);
	check_narrow(0x1p-24f * 2.5f);
	SG_CHECK_EQ(sg_gpu_f2h_soft(65520.0f), 0x7c00);
	SG_CHECK_EQ(sg_gpu_f2h_soft(0x1p-25f), 0);
	SG_CHECK_EQ(sg_gpu_f2h_soft(0x1p-24f * 2.5f), 2); /* tie to even */
	SG_CHECK_EQ(sg_gpu_f2b_soft(u2f(0x3f808000)), 0x3f80); /* tie to even (down) */
	SG_CHECK_EQ(sg_gpu_f2b_soft(u2f(0x3f818000)), 0x3f82); /* tie to even (up) */
}

/* ---- the reduce, as the kernels cut it ---------------------------------- */

/* What sg_gpu_kernel_reduce() launches, with a loop per kernel. */
static void emulate_kernel(int dt, void *dst, const void *const *src, unsigned k, size_t n)
{
	const size_t es = dt == SG_GPU_DT_FP32 ? 4 : 2;
	struct sg_gpu_split sp = sg_gpu_reduce_split(dt, dst, src, k, n);
	const void *sv[SG_GPU_KMAX_SRC];

	SG_CHECK(sp.head + sp.nvec * sg_gpu_lanes(dt) + sp.tail == n, "split covers n=%zu", n);
	for (unsigned j = 0; j < k; j++)
		sv[j] = (const uint8_t *)src[j] + sp.head * es;
	if (sp.nvec > 0) {
		SG_CHECK((((uintptr_t)dst + sp.head * es) & 15) == 0, "vector dst aligned");
		for (unsigned j = 0; j < k; j++)
			SG_CHECK(((uintptr_t)sv[j] & 15) == 0, "vector src %u aligned", j);
	}
	for (size_t i = 0; i < sp.nvec; i++)
		sg_gpu_reduce_v16(dt, (sg_gpu_v16 *)((uint8_t *)dst + sp.head * es), sv, k, i);
	for (size_t t = 0; t < sp.head + sp.tail; t++)
		sg_gpu_reduce_one(dt, dst, src, k, sg_gpu_split_scalar_index(dt, &sp, t));
}

static float special(unsigned i)
{
	static const float v[] = {0.0f,	    -0.0f,  1e-8f,  -3e-6f, 6e-5f,   65504.0f,
				  -65519.0f, 1e30f, -1e38f, 3.0e38f, INFINITY, 0.1f};

	return v[i % (sizeof(v) / sizeof(v[0]))];
}

static void fill_rand(int dt, void *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		val_set((enum sg_dtype)dt, buf, i,
			rnd() % 50 == 0 ? special(rnd())
					: (float)((int)(rnd() % 200001) - 100000) / 997.0f);
	}
}

/* Equal bits, or both NaN (Inf - Inf: payloads are not specified). */
static bool same_elem(int dt, const void *a, const void *b, size_t i)
{
	if (dt == SG_GPU_DT_FP32) {
		float x = ((const float *)a)[i], y = ((const float *)b)[i];

		return f2u(x) == f2u(y) || (isnan(x) && isnan(y));
	}
	uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
	bool nx = dt == SG_GPU_DT_FP16 ? (x & 0x7fff) > 0x7c00 : (x & 0x7fff) > 0x7f80;
	bool ny = dt == SG_GPU_DT_FP16 ? (y & 0x7fff) > 0x7c00 : (y & 0x7fff) > 0x7f80;

	return x == y || (nx && ny);
}

static void one_reduce(int dt, size_t n, unsigned k, const size_t *off)
{
	const size_t es = dt == SG_GPU_DT_FP32 ? 4 : 2, bytes = (n * es + 64 + 63) & ~(size_t)63;
	uint8_t *buf[SG_GPU_KMAX_SRC + 1], *want = aligned_alloc(64, bytes);
	const void *ref[SG_GPU_KMAX_SRC + 1], *src[SG_GPU_KMAX_SRC];
	size_t bad = 0;

	for (unsigned j = 0; j <= k; j++) {
		buf[j] = aligned_alloc(64, bytes);
		fill_rand(dt, buf[j] + off[j], n);
		ref[j] = buf[j] + off[j];
		if (j > 0)
			src[j - 1] = ref[j];
	}
	/* Reference: dst first, then the sources in order, fp32, one rounding. */
	SG_CHECK_EQ(sg_sum_addk((enum sg_dtype)dt, want, ref, k + 1, n, 0), 0);
	emulate_kernel(dt, buf[0] + off[0], src, k, n);
	for (size_t i = 0; i < n; i++)
		bad += !same_elem(dt, buf[0] + off[0], want, i);
	SG_CHECK(bad == 0, "%s n=%zu k=%u dst offset %zu: %zu elements differ",
		 sg_dtype_name((enum sg_dtype)dt), n, k, off[0], bad);
	for (unsigned j = 0; j <= k; j++)
		free(buf[j]);
	free(want);
}

static void test_reduce(void)
{
	static const int dts[] = {SG_GPU_DT_FP32, SG_GPU_DT_FP16, SG_GPU_DT_BF16};
	static const size_t ns[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 1000, 4099};
	static const unsigned ks[] = {1, 2, 3, 16};

	for (unsigned d = 0; d < 3; d++) {
		const size_t es = dts[d] == SG_GPU_DT_FP32 ? 4 : 2;

		for (unsigned ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
			for (unsigned ki = 0; ki < 4; ki++) {
				size_t off[SG_GPU_KMAX_SRC + 1];

				/* Every pointer at the same offset within 16 bytes. */
				for (size_t o = 0; o < 16; o += es) {
					for (unsigned j = 0; j <= ks[ki]; j++)
						off[j] = o + (j % 2) * 16;
					one_reduce(dts[d], ns[ni], ks[ki], off);
				}
				/* One source off by an element: all scalar. */
				for (unsigned j = 0; j <= ks[ki]; j++)
					off[j] = 0;
				off[ks[ki]] = es;
				one_reduce(dts[d], ns[ni], ks[ki], off);
			}
		}
	}
	/* The split itself: mixed offsets and odd addresses never vectorise. */
	{
		_Alignas(16) uint8_t b[64];
		const void *s1[1] = {b + 4};
		struct sg_gpu_split sp = sg_gpu_reduce_split(SG_GPU_DT_FP32, b, s1, 1, 12);

		SG_CHECK(sp.head == 12 && sp.nvec == 0 && sp.tail == 0, "mixed: scalar");
		s1[0] = b + 17;
		sp = sg_gpu_reduce_split(SG_GPU_DT_FP16, b + 1, s1, 1, 20);
		SG_CHECK(sp.head == 20 && sp.nvec == 0, "odd address: scalar");
		s1[0] = b + 20;
		sp = sg_gpu_reduce_split(SG_GPU_DT_FP16, b + 4, s1, 1, 20);
		SG_CHECK(sp.head == 6 && sp.nvec == 1 && sp.tail == 6, "head 6, 1 vector, tail 6");
		SG_CHECK_EQ(sg_gpu_split_scalar_index(SG_GPU_DT_FP16, &sp, 5), 5);
		SG_CHECK_EQ(sg_gpu_split_scalar_index(SG_GPU_DT_FP16, &sp, 6), 14);
		SG_CHECK_EQ(sg_gpu_blocks(0, 256, 4096), 1);
		SG_CHECK_EQ(sg_gpu_blocks(257, 256, 4096), 2);
		SG_CHECK_EQ(sg_gpu_blocks((size_t)1 << 40, 256, 4096), 4096);
	}
}

/* ---- partitions ----------------------------------------------------------- */

static void test_partitions(void)
{
	static const uint32_t pszs[] = {4, 64, 4096000};

	for (unsigned pi = 0; pi < 3; pi++) {
		uint32_t psz = pszs[pi];

		for (unsigned r = 0; r < 2000; r++) {
			size_t bytes = r < 20 ? r : (size_t)rnd() % (5ull * psz + 7), sum = 0;
			size_t np = sg_gpu_nparts(bytes, psz);

			for (size_t p = 0; p < np; p++) {
				uint32_t len = sg_gpu_part_len(bytes, psz, p);
				uint32_t off = rnd() % (psz + 1), sb = 1 + rnd() % psz;
				uint32_t lo = off, hi = off + sb > len ? len : off + sb;

				SG_CHECK(len > 0 && len <= psz, "part %zu of %zu bytes: %u", p, bytes,
					 len);
				sum += len;
				SG_CHECK_EQ(sg_gpu_step_len(off, sb, len), hi > lo ? hi - lo : 0);
			}
			SG_CHECK(sum == bytes, "%zu bytes in %zu partitions of %u: %zu", bytes, np,
				 psz, sum);
		}
	}
	SG_CHECK_EQ(sg_gpu_step_len(10, 5, 10), 0);
	SG_CHECK_EQ(sg_gpu_step_len(8, 5, 10), 2);
	SG_CHECK_EQ(sg_gpu_step_len(0, 0xffffffffu, 10), 10);
}

/* ---- streams and events of the pipelined staging ------------------------- */

#define SIM_MAX_OPS 4096

/* One operation queued on a stream: a step (or just its event record). */
struct op {
	unsigned part, step, nwait;
	unsigned wait[64]; /* op ids this one waits for (cudaStreamWaitEvent) */
	bool skipped;      /* nothing to move in this (short) partition: a record only */
	bool done;
};

struct sim {
	const struct sg_gpu_plan *p;
	const uint64_t *deps;
	unsigned depth, nstreams;
	struct op ops[SIM_MAX_OPS];
	unsigned nops;
	int q[64][SIM_MAX_OPS]; /* per stream: op ids in order */
	unsigned qh[64], qt[64];
	int ev[8][512];         /* [slot][step]: op id of the latest record, -1 none */
	bool *done;             /* [part * nsteps + step]: ran, or skipped */
	unsigned errors;
};

static bool op_ready(const struct sim *m, const struct op *o)
{
	for (unsigned i = 0; i < o->nwait; i++)
		if (!m->ops[o->wait[i]].done)
			return false;
	return true;
}

/* Run one ready stream head, picked at random; false when none is ready. */
static bool sim_step(struct sim *m)
{
	unsigned ready[64], nr = 0, s;
	struct op *o;

	for (unsigned i = 0; i < m->nstreams; i++)
		if (m->qh[i] < m->qt[i] && op_ready(m, &m->ops[m->q[i][m->qh[i]]]))
			ready[nr++] = i;
	if (nr == 0)
		return false;
	s = ready[rnd() % nr];
	o = &m->ops[m->q[s][m->qh[s]++]];
	/*
	 * Every dependency of this step in its partition has run. A skipped
	 * step moves nothing: its record may run early, harmlessly.
	 */
	for (unsigned t = 0; !o->skipped && t < o->step; t++)
		if (sg_gpu_dep_test(m->deps, m->p->nsteps, o->step, t) &&
		    !m->done[(size_t)o->part * m->p->nsteps + t] && m->errors++ < 5)
			fprintf(stderr, "FAIL: part %u step %u ran before step %u\n", o->part,
				o->step, t);
	/* No other partition of the same slot is still running (shared buffers). */
	for (unsigned i = 0; !o->skipped && i < m->nops; i++)
		if (!m->ops[i].done && !m->ops[i].skipped && m->ops[i].part != o->part &&
		    m->ops[i].part % m->depth == o->part % m->depth &&
		    m->ops[i].part < o->part && m->errors++ < 5)
			fprintf(stderr, "FAIL: part %u step %u reuses the slot of part %u\n",
				o->part, o->step, m->ops[i].part);
	o->done = true;
	m->done[(size_t)o->part * m->p->nsteps + o->step] = true;
	return true;
}

/* cudaEventSynchronize on every event of a slot. */
static void sim_drain(struct sim *m, unsigned slot)
{
	for (unsigned s = 0; s < m->p->nsteps; s++)
		while (m->ev[slot][s] >= 0 && !m->ops[m->ev[slot][s]].done)
			if (!sim_step(m)) {
				m->errors++;
				fprintf(stderr, "FAIL: deadlock draining slot %u\n", slot);
				return;
			}
}

/* The loop of sg_gpu_cuda_run() with CUDA calls replaced by the simulator. */
static void simulate(const struct sg_gpu_plan *p, const int *dev, unsigned max_streams,
		     unsigned depth, size_t bytes, const char *what)
{
	struct sim *m = calloc(1, sizeof(*m));
	int *stream_of = calloc(p->nsteps, sizeof(int)), *dev_of = calloc(p->nsteps, sizeof(int));
	int stream_dev[64];
	unsigned *waits = calloc(p->nsteps, sizeof(unsigned));
	uint64_t *deps = sg_gpu_plan_deps(p);
	size_t nparts = sg_gpu_nparts(bytes, p->partition_bytes);
	int n;

	m->p = p;
	m->deps = deps;
	m->depth = depth;
	m->done = calloc(nparts * p->nsteps + 1, sizeof(bool));
	memset(m->ev, -1, sizeof(m->ev));
	n = sg_gpu_plan_chains(p, deps, dev, dev_of, stream_of, stream_dev, max_streams);
	SG_CHECK(n > 0 && (unsigned)n <= max_streams, "%s: %d streams", what, n);
	if (n <= 0 || p->nsteps > 512 || nparts * p->nsteps > SIM_MAX_OPS)
		goto out;
	m->nstreams = (unsigned)n;
	for (unsigned s = 0; s < p->nsteps; s++)
		SG_CHECK(stream_dev[stream_of[s]] == dev_of[s], "%s: step %u on a stream of "
			 "another device", what, s);
	for (size_t part = 0; part < nparts; part++) {
		unsigned slot = (unsigned)(part % depth);
		uint32_t len = sg_gpu_part_len(bytes, p->partition_bytes, part);

		if (part >= depth)
			sim_drain(m, slot);
		for (unsigned s = 0; s < p->nsteps; s++) {
			struct op *o = &m->ops[m->nops];
			int str = stream_of[s];

			o->part = (unsigned)part;
			o->step = s;
			/* A skipped step only records its event; an issued one waits first. */
			o->skipped = sg_gpu_step_len(p->steps[s].data_off, p->steps[s].bytes,
						     len) == 0;
			if (o->skipped)
				m->done[part * p->nsteps + s] = true;
			else {
				unsigned nw = sg_gpu_step_waits(p, deps, stream_of, s, waits);

				for (unsigned i = 0; i < nw && o->nwait < 64; i++)
					if (m->ev[slot][waits[i]] >= 0)
						o->wait[o->nwait++] = (unsigned)m->ev[slot][waits[i]];
			}
			m->ev[slot][s] = (int)m->nops;
			m->q[str][m->qt[str]++] = (int)m->nops++;
		}
	}
	for (unsigned d = 0; d < depth && d < nparts; d++)
		sim_drain(m, d);
	for (unsigned i = 0; i < m->nops; i++)
		if (!m->ops[i].done && m->errors++ < 5)
			fprintf(stderr, "FAIL: op %u never ran\n", i);
	SG_CHECK(m->errors == 0, "%s: %u ordering errors (streams %u, depth %u)", what, m->errors,
		 max_streams, depth);
out:
	free(deps);
	free(waits);
	free(stream_of);
	free(dev_of);
	free(m->done);
	free(m);
}

static void test_stream_order(void)
{
	for (unsigned f = 0; f < NREF; f++) {
		char err[256] = "";
		struct sg_gpu_topo *t = load_ref(ref_files[f]);
		struct sg_gpu_plan_opts o = {.partition_bytes = 1 << 16};
		struct sg_gpu_plan *p = sg_gpu_plan_build(t, &o, err, sizeof(err));
		int one[SG_GPU_MAX_GPUS] = {0}, own[SG_GPU_MAX_GPUS];

		SG_CHECK(p != NULL, "%s: %s", ref_files[f], err);
		for (unsigned g = 0; g < SG_GPU_MAX_GPUS; g++)
			own[g] = (int)g;
		/* Each logical GPU on its device, or all on one; plenty or few streams. */
		static const struct {
			bool one;
			unsigned streams, depth;
		} runs[] = {{false, 64, 1}, {false, 64, 2}, {false, 64, 3}, {false, 16, 2},
			    {true, 64, 2},  {true, 3, 3},   {true, 1, 2}};

		for (unsigned r = 0; p != NULL && r < sizeof(runs) / sizeof(runs[0]); r++) {
			/* 2.5 partitions: the last one is short, some steps skip. */
			size_t bytes = (5 * (size_t)p->partition_bytes) / 2;

			for (unsigned rep = 0; rep < 3; rep++)
				simulate(p, runs[r].one ? one : own, runs[r].streams, runs[r].depth,
					 bytes, ref_files[f]);
		}
		sg_gpu_plan_free(p);
		sg_gpu_topo_free(t);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1)
		topo_dir = argv[1];
	test_conversions();
	test_reduce();
	test_partitions();
	test_stream_order();
	return sg_test_finish("gpu_kmath");
}
