/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host backend: every plan on every reference topology, in list order and in
 * another order its dependencies allow, gives every GPU the sum that a
 * scalar loop in this test computes; a simulated multi-machine service;
 * errors. Also that AUTO falls back to the host backend here, saying why.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "sg_gpu_internal.h"

/* Simulated service: the other machines add 'other' to every element. */
struct fake_net {
	enum sg_dtype dt;
	float other;
	uint8_t *pushed; /* whole tensor */
	uint32_t part;
	int fail;
	unsigned pushes, pulls;
};

static int net_fn(void *arg, unsigned partition, uint32_t off, const void *push, void *pull,
		  uint32_t bytes)
{
	struct fake_net *n = arg;
	size_t es = sg_dtype_size(n->dt), base = (size_t)partition * n->part + off;

	if (n->fail)
		return -EIO;
	if (push != NULL) {
		memcpy(n->pushed + base, push, bytes);
		n->pushes++;
		return 0;
	}
	for (size_t i = 0; i < bytes / es; i++)
		val_set(n->dt, pull, i, val_get(n->dt, n->pushed + base, i) + n->other);
	n->pulls++;
	return 0;
}

/*
 * Run plan p over a tensor of 'elems' elements with integer-valued data
 * (exact in every dtype and any order of addition) and compare each GPU's
 * result with the scalar sum. Returns the number of wrong elements.
 */
static size_t run_exact(const struct sg_gpu_plan *p, enum sg_dtype dt, size_t elems,
			unsigned shuffle, struct fake_net *net)
{
	size_t es = sg_dtype_size(dt), wrong = 0;
	void *grads[SG_GPU_MAX_GPUS];
	float *ref = calloc(elems, sizeof(float));
	struct sg_gpu_exec_conf conf = {.backend = SG_GPU_BACKEND_HOST, .plan = p, .dtype = dt,
					.shuffle = shuffle};
	struct sg_gpu_exec *ex;
	int rc;

	if (net != NULL) {
		conf.net = net_fn;
		conf.net_arg = net;
	}
	for (unsigned g = 0; g < p->ngpus; g++) {
		grads[g] = malloc(elems * es + 1);
		for (size_t i = 0; i < elems; i++) {
			float v = exact_val(i, g);

			val_set(dt, grads[g], i, v);
			ref[i] += v;
		}
	}
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "create: %s", strerror(errno));
	if (ex != NULL) {
		rc = sg_gpu_exec_run(ex, grads, elems * es);
		SG_CHECK(rc == 0, "run %s: %d", p->strategy, rc);
		for (unsigned g = 0; g < p->ngpus; g++) {
			for (size_t i = 0; i < elems; i++) {
				float want = ref[i] + (net ? net->other : 0);

				if (val_get(dt, grads[g], i) != want && wrong++ < 3)
					fprintf(stderr, "%s %s gpu%u [%zu]: %g want %g\n",
						p->strategy, sg_dtype_name(dt), g, i,
						(double)val_get(dt, grads[g], i), (double)want);
			}
		}
	}
	sg_gpu_exec_destroy(ex);
	for (unsigned g = 0; g < p->ngpus; g++)
		free(grads[g]);
	free(ref);
	return wrong;
}

static void test_all_plans(void)
{
	static const struct {
		const char *file;
		enum sg_gpu_strategy s[4];
		int root[4];
	} cases[] = {
		{"pcie-8gpu.topo", {SG_GPU_STRAT_AUTO, SG_GPU_STRAT_RING, SG_GPU_STRAT_RING}, {0, 0, 4}},
		{"dgx1-nvlink.topo",
		 {SG_GPU_STRAT_AUTO, SG_GPU_STRAT_NVLINK_TREE, SG_GPU_STRAT_CPU_ASSISTED},
		 {0, 6, 0}},
		{"dgx-h100-nvswitch.topo", {SG_GPU_STRAT_AUTO, SG_GPU_STRAT_NVSWITCH}, {0, 8}},
		{"ws-4gpu.topo", {SG_GPU_STRAT_AUTO, SG_GPU_STRAT_RING}, {0, 0}},
	};
	static const enum sg_dtype dts[] = {SG_DTYPE_FP32, SG_DTYPE_FP16, SG_DTYPE_BF16};
	/* 64 KiB partitions: 3 full ones and a short, odd-length tail. */
	const uint32_t part = 65536;
	unsigned runs = 0;

	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct sg_gpu_topo *t = load_ref(cases[c].file);

		for (unsigned k = 0; k < 4; k++) {
			struct sg_gpu_plan_opts o = {.strategy = cases[c].s[k],
						     .root = cases[c].root[k],
						     .partition_bytes = part};
			char err[256] = "";
			struct sg_gpu_plan *p;

			if (k > 0 && cases[c].s[k] == SG_GPU_STRAT_AUTO)
				break;
			p = sg_gpu_plan_build(t, &o, err, sizeof(err));
			SG_CHECK(p != NULL, "%s: %s", cases[c].file, err);
			if (p == NULL)
				continue;
			for (unsigned d = 0; d < 3; d++) {
				size_t elems = 3 * part / sg_dtype_size(dts[d]) + 1001;

				for (unsigned sh = 0; sh < 3; sh++) {
					size_t bad = run_exact(p, dts[d], elems, sh, NULL);

					SG_CHECK(bad == 0, "%s %s %s shuffle=%u: %zu wrong",
						 cases[c].file, p->strategy,
						 sg_dtype_name(dts[d]), sh, bad);
					runs++;
				}
			}
			sg_gpu_plan_free(p);
		}
		sg_gpu_topo_free(t);
	}
	printf("exact sums: %u plan executions\n", runs);
}

/* Several machines: the pulled sum differs from the local one and must reach every GPU. */
static void test_service(void)
{
	const uint32_t part = 16384;
	const size_t elems = 2 * part / 4 + 7;

	for (unsigned f = 0; f < NREF; f++) {
		for (int ring = 0; ring < 2; ring++) {
			struct sg_gpu_topo *t = load_ref(ref_files[f]);
			struct sg_gpu_plan_opts o = {.partition_bytes = part,
						     .strategy = ring ? SG_GPU_STRAT_RING : 0};
			struct sg_gpu_plan *p = sg_gpu_plan_build(t, &o, NULL, 0);
			struct fake_net net = {.dt = SG_DTYPE_FP32, .other = 100.0f, .part = part};

			net.pushed = calloc(1, elems * 4 + part);
			SG_CHECK(p != NULL, "plan");
			if (p != NULL) {
				SG_CHECK(run_exact(p, SG_DTYPE_FP32, elems, 0, &net) == 0,
					 "%s ring=%d with a service", ref_files[f], ring);
				/* One push and one pull per partition (3 partitions). */
				SG_CHECK_EQ(net.pushes, 3);
				SG_CHECK_EQ(net.pulls, 3);
			}
			sg_gpu_plan_free(p);
			sg_gpu_topo_free(t);
			free(net.pushed);
		}
	}
}

/* Random fp32 data: the result is within rounding of a double-precision sum. */
static void test_random_fp32(void)
{
	struct sg_gpu_topo *t = load_ref("dgx1-nvlink.topo");
	struct sg_gpu_plan_opts o = {.partition_bytes = 8192};
	struct sg_gpu_plan *p = sg_gpu_plan_build(t, &o, NULL, 0);
	struct sg_gpu_exec_conf conf = {.plan = p, .dtype = SG_DTYPE_FP32};
	const size_t n = 5000;
	float *g[8];
	double ref[5000] = {0}, mag[5000] = {0};
	struct sg_gpu_exec *ex;
	size_t bad = 0;

	srand(3);
	for (unsigned k = 0; k < 8; k++) {
		g[k] = malloc(n * sizeof(float));
		for (size_t i = 0; i < n; i++) {
			g[k][i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
			ref[i] += g[k][i];
			mag[i] += fabs(g[k][i]);
		}
	}
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "create");
	if (ex != NULL) {
		SG_CHECK_EQ(sg_gpu_exec_run(ex, (void *const *)g, n * sizeof(float)), 0);
		for (unsigned k = 0; k < 8; k++)
			for (size_t i = 0; i < n; i++)
				bad += fabs(g[k][i] - ref[i]) > 8 * 1.2e-7 * mag[i] + 1e-30;
		SG_CHECK(bad == 0, "%zu elements off by more than rounding", bad);
		for (size_t i = 0; i < n; i++)
			bad += g[0][i] != g[7][i];
		SG_CHECK(bad == 0, "every GPU holds the same bits");
	}
	sg_gpu_exec_destroy(ex);
	for (unsigned k = 0; k < 8; k++)
		free(g[k]);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

/*
 * The dependency analysis, on the PCIe plan: each reduce waits for the
 * copies into its scratch, the CPU sum for every D2H, push for the sum;
 * independent switch groups do not wait for each other.
 */
static void test_dependencies(void)
{
	struct sg_gpu_topo *t = load_ref("pcie-8gpu.topo");
	struct sg_gpu_plan *p = sg_gpu_plan_build(t, NULL, NULL, 0);
	uint64_t *deps = p ? sg_gpu_plan_deps(p) : NULL;
	int first_p2p_grp1 = -1, push = -1, last_sum = -1;
	unsigned d2h = 0, d2h_before_sum = 0;

	SG_CHECK(deps != NULL, "deps");
	if (deps == NULL)
		goto out;
	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];

		if (st->kind == SG_GPU_STEP_P2P && st->src[0].idx == 2 && first_p2p_grp1 < 0)
			first_p2p_grp1 = (int)s;
		if (st->kind == SG_GPU_STEP_PUSH)
			push = (int)s;
		if (st->kind == SG_GPU_STEP_CPU_SUM)
			last_sum = (int)s;
		if (st->kind == SG_GPU_STEP_REDUCE)
			SG_CHECK(sg_gpu_dep_test(deps, p->nsteps, s, s - 1), "reduce %u after p2p", s);
	}
	for (unsigned s = 0; s < p->nsteps; s++) {
		if (p->steps[s].kind != SG_GPU_STEP_D2H)
			continue;
		d2h++;
		for (unsigned u = s + 1; u <= (unsigned)last_sum; u++)
			if (p->steps[u].kind == SG_GPU_STEP_CPU_SUM &&
			    sg_gpu_dep_test(deps, p->nsteps, u, s)) {
				d2h_before_sum++;
				break;
			}
	}
	SG_CHECK_EQ(d2h, 8);
	SG_CHECK_EQ(d2h_before_sum, 8);
	SG_CHECK(push > last_sum && sg_gpu_dep_test(deps, p->nsteps, push, last_sum), "push");
	SG_CHECK(first_p2p_grp1 > 0, "group 1 p2p");
	for (int s = 0; first_p2p_grp1 > 0 && s < first_p2p_grp1; s++)
		SG_CHECK(!sg_gpu_dep_test(deps, p->nsteps, first_p2p_grp1, s),
			 "group 1 does not wait for step %d", s);
out:
	free(deps);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
}

/* Device that should issue a step, worked out independently of gpu/. */
static int want_dev(const struct sg_gpu_step *st, const int *dev)
{
	if (st->kind == SG_GPU_STEP_REDUCE || st->kind == SG_GPU_STEP_H2D)
		return dev[st->dst.idx];
	if (st->kind == SG_GPU_STEP_P2P || st->kind == SG_GPU_STEP_BCAST ||
	    st->kind == SG_GPU_STEP_D2H)
		return dev[st->src[0].idx];
	return dev[0];
}

/* Stream chains for the CUDA backend, checked without a GPU. */
static void test_chains(void)
{
	int ident[SG_GPU_MAX_GPUS], zero[SG_GPU_MAX_GPUS] = {0};

	for (int g = 0; g < SG_GPU_MAX_GPUS; g++)
		ident[g] = g;
	for (unsigned f = 0; f < NREF; f++) {
		struct sg_gpu_topo *t = load_ref(ref_files[f]);
		struct sg_gpu_plan *p = sg_gpu_plan_build(t, NULL, NULL, 0);
		uint64_t *deps = p ? sg_gpu_plan_deps(p) : NULL;
		int *dev_of = calloc(p ? p->nsteps : 1, sizeof(int));
		int *stream_of = calloc(p ? p->nsteps : 1, sizeof(int)), stream_dev[64];

		SG_CHECK(deps != NULL, "deps");
		for (int m = 0; deps != NULL && m < 2; m++) {
			const int *dev = m ? zero : ident;
			int n = sg_gpu_plan_chains(p, deps, dev, dev_of, stream_of, stream_dev, 64);
			unsigned chained = 0;

			SG_CHECK(n > 0 && (unsigned)n < p->nsteps, "%s: %d streams for %u steps",
				 ref_files[f], n, p->nsteps);
			for (unsigned s = 0; n > 0 && s < p->nsteps; s++) {
				SG_CHECK_EQ(dev_of[s], want_dev(&p->steps[s], dev));
				SG_CHECK(stream_of[s] >= 0 && stream_of[s] < n, "stream range");
				SG_CHECK_EQ(stream_dev[stream_of[s]], dev_of[s]);
				/* A step continues a chain only behind one it depends on. */
				for (int u = (int)s - 1; u >= 0; u--) {
					if (stream_of[u] != stream_of[s])
						continue;
					chained += sg_gpu_dep_test(deps, p->nsteps, s, (unsigned)u);
					/* Until streams run out, sharing one means a dependency. */
					SG_CHECK(n == 64 ||
							 sg_gpu_dep_test(deps, p->nsteps, s, (unsigned)u),
						 "%s: step %u follows %d on a stream without need",
						 ref_files[f], s, u);
					break;
				}
			}
			SG_CHECK(chained > 0, "some steps form chains");
		}
		/* One stream only: fine on one device, impossible across eight. */
		if (deps != NULL) {
			SG_CHECK_EQ(sg_gpu_plan_chains(p, deps, zero, dev_of, stream_of, stream_dev,
						       1),
				    1);
			if (p->ngpus > 1)
				SG_CHECK_EQ(sg_gpu_plan_chains(p, deps, ident, dev_of, stream_of,
							       stream_dev, 1),
					    -ENOSPC);
		}
		free(deps);
		free(dev_of);
		free(stream_of);
		sg_gpu_plan_free(p);
		sg_gpu_topo_free(t);
	}
}

static void test_errors_and_fallback(void)
{
	struct sg_gpu_topo *t = load_ref("ws-4gpu.topo");
	struct sg_gpu_plan_opts o = {.partition_bytes = 4096};
	struct sg_gpu_plan *p = sg_gpu_plan_build(t, &o, NULL, 0);
	struct sg_gpu_exec_conf conf = {.plan = p, .dtype = SG_DTYPE_FP32};
	struct fake_net net = {.dt = SG_DTYPE_FP32, .part = 4096, .fail = 1};
	float a[1024], b[1024], c[1024], d[1024];
	void *grads[4] = {a, b, c, d}, *nogr[4] = {a, NULL, c, d};
	struct sg_gpu_exec *ex;
	char why[256];
	int n;

	memset(a, 0, sizeof(a));
	memcpy(b, a, sizeof(a));
	memcpy(c, a, sizeof(a));
	memcpy(d, a, sizeof(a));
	/* AUTO: the host backend with the reason CUDA was not used. */
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "create");
	n = sg_gpu_cuda_probe(why, sizeof(why));
	if (ex != NULL && n < 0) {
		SG_CHECK_EQ(sg_gpu_exec_backend(ex), SG_GPU_BACKEND_HOST);
		SG_CHECK(strlen(sg_gpu_exec_fallback_reason(ex)) > 0, "a reason");
		SG_CHECK(strcmp(sg_gpu_exec_fallback_reason(ex), why) == 0, "same reason");
		printf("fallback reason: %s\n", why);
	}
	if (ex != NULL) {
		SG_CHECK_EQ(sg_gpu_exec_run(ex, grads, 4 * 1024 - 2), -EINVAL);
		SG_CHECK_EQ(sg_gpu_exec_run(ex, nogr, 4096), -EINVAL);
		SG_CHECK_EQ(sg_gpu_exec_run(ex, NULL, 4096), -EINVAL);
		SG_CHECK_EQ(sg_gpu_exec_run(ex, grads, 0), 0);
	}
	sg_gpu_exec_destroy(ex);
	/* CUDA demanded where it cannot run: ENODEV, no crash. */
	if (n < 0) {
		conf.backend = SG_GPU_BACKEND_CUDA;
		errno = 0;
		SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == ENODEV, "cuda: ENODEV");
		conf.backend = SG_GPU_BACKEND_AUTO;
	}
	/* Unsupported dtype, bad backend, missing plan. */
	conf.dtype = SG_DTYPE_INT32;
	SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL, "int32");
	conf.dtype = SG_DTYPE_FP32;
	conf.backend = 9;
	SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL, "backend");
	conf.backend = SG_GPU_BACKEND_HOST;
	conf.plan = NULL;
	SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL, "no plan");
	SG_CHECK(sg_gpu_exec_create(NULL) == NULL && errno == EINVAL, "no conf");
	/* A service that fails: the run reports it. */
	conf.plan = p;
	conf.net = net_fn;
	conf.net_arg = &net;
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "create");
	if (ex != NULL)
		SG_CHECK_EQ(sg_gpu_exec_run(ex, grads, 4096), -EIO);
	sg_gpu_exec_destroy(ex);
	/* fp16 needs 2-byte alignment of every step: an odd custom step is refused. */
	n = (int)p->steps[0].bytes;
	p->steps[0].bytes = 3;
	conf.net = NULL;
	SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL, "odd step");
	p->steps[0].bytes = (uint32_t)n;
	/*
	 * The executor validates like sg_gpu_plan_validate(): a D2H into GPU
	 * memory, or a reduce reading another GPU, is refused, not run (on CUDA
	 * those would be a wrong-direction copy and a kernel reading peer memory).
	 */
	for (unsigned s = 0, d2h = 0, red = 0; s < p->nsteps; s++) {
		struct sg_gpu_step keep = p->steps[s];

		if (keep.kind == SG_GPU_STEP_D2H && d2h++ == 0) {
			p->steps[s].dst = (struct sg_gpu_ep){.mem = SG_GPU_MEM_GRAD, .idx = 0};
			SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL, "d2h to gpu");
		}
		if (keep.kind == SG_GPU_STEP_REDUCE && red++ == 0) {
			p->steps[s].src[0].idx = (uint16_t)((keep.dst.idx + 1) % p->ngpus);
			SG_CHECK(sg_gpu_exec_create(&conf) == NULL && errno == EINVAL,
				 "reduce reading another gpu");
		}
		p->steps[s] = keep;
		if (s + 1 == p->nsteps)
			SG_CHECK(d2h > 0 && red > 0, "the plan has a d2h and a reduce");
	}
	ex = sg_gpu_exec_create(&conf);
	SG_CHECK(ex != NULL, "restored plan: %s", strerror(errno));
	sg_gpu_exec_destroy(ex);
	SG_CHECK(strcmp(sg_gpu_backend_name(SG_GPU_BACKEND_CUDA), "cuda") == 0, "name");
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
	sg_gpu_exec_destroy(NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		topo_dir = argv[1];
	test_all_plans();
	test_service();
	test_random_fp32();
	test_dependencies();
	test_chains();
	test_errors_and_fallback();
	return sg_test_finish("gpu_exec");
}
