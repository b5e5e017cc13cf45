/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A baseline of "sigma-bench compare --sweep": Gloo's allreduce (float, sum)
 * of the same sizes and input pattern as bench/mpi_allreduce.c, over Gloo's
 * TCP transport on loopback. Gloo has no launcher: this program forks its N
 * ranks itself; they meet through a FileStore in a fresh folder under /tmp.
 *
 * Usage: sigma-gloo-allreduce N ITERS SIZE...
 * Prints one line per size, as mpi_allreduce does:
 * "allreduce BYTES MEDIAN_SECONDS OK". An iteration's time is its slowest
 * rank's; OK is 1 when every element of every rank's sum is exact.
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

namespace {

constexpr int kMaxRanks = 16;
constexpr int kMaxIters = 1000;
constexpr int kMaxSizes = 16;

/* What the ranks hand rank 0, in memory shared across the fork. */
struct Shared {
	double t[kMaxSizes][kMaxIters][kMaxRanks];
	long bad[kMaxSizes][kMaxRanks];
	int failed;
};

double now()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One rank: meet the others, then every size ITERS + 1 times (the first is a warm-up). */
int rank_main(int rank, int n, const char *dir, int iters, const std::vector<long> &sizes,
	      Shared *sh)
{
	gloo::transport::tcp::attr attr("127.0.0.1");
	auto dev = gloo::transport::tcp::CreateDevice(attr);
	gloo::rendezvous::FileStore store(dir);
	auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);

	ctx->connectFullMesh(store, dev);
	for (size_t j = 0; j < sizes.size(); j++) {
		long ne = (sizes[j] + 3) / 4;
		std::vector<float> in(ne), out(ne);

		for (long i = 0; i < ne; i++)
			in[i] = (float)(i % 509 + rank);
		for (int it = 0; it <= iters; it++) {
			gloo::BarrierOptions bo(ctx);
			gloo::AllreduceOptions ao(ctx);
			double t0;

			gloo::barrier(bo);
			t0 = now();
			ao.setInput(in.data(), ne);
			ao.setOutput(out.data(), ne);
			ao.setReduceFunction(static_cast<void (*)(void *, const void *, const void *,
								  size_t)>(&gloo::sum<float>));
			ao.setTag((uint32_t)(j * (kMaxIters + 1) + it));
			gloo::allreduce(ao);
			if (it > 0)
				sh->t[j][it - 1][rank] = now() - t0;
		}
		for (long i = 0; i < ne; i++)
			sh->bad[j][rank] += out[i] != (float)((long)n * (i % 509) +
							       (long)n * (n - 1) / 2);
	}
	return 0;
}

int run_rank(int rank, int n, const char *dir, int iters, const std::vector<long> &sizes,
	     Shared *sh)
{
	try {
		return rank_main(rank, n, dir, iters, sizes, sh);
	} catch (const std::exception &e) {
		fprintf(stderr, "gloo rank %d: %s\n", rank, e.what());
		sh->failed = 1;
		return 1;
	}
}

} // namespace

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0, iters = argc > 2 ? atoi(argv[2]) : 0;
	char dir[] = "/tmp/sigma-gloo-XXXXXX";
	std::vector<long> sizes;
	std::vector<pid_t> pids;
	Shared *sh;
	int rc = 0;

	for (int a = 3; a < argc; a++)
		sizes.push_back(atol(argv[a]));
	if (n < 1 || n > kMaxRanks || iters < 1 || iters > kMaxIters || sizes.empty() ||
	    sizes.size() > kMaxSizes ||
	    std::any_of(sizes.begin(), sizes.end(), [](long b) { return b < 4 || b % 4; })) {
		fprintf(stderr, "usage: sigma-gloo-allreduce N(1..%d) ITERS(1..%d) SIZE... "
			"(1..%d sizes, multiples of 4 bytes)\n", kMaxRanks, kMaxIters, kMaxSizes);
		return 2;
	}
	sh = (Shared *)mmap(nullptr, sizeof(*sh), PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || mkdtemp(dir) == nullptr) {
		perror("sigma-gloo-allreduce");
		return 1;
	}
	fflush(nullptr);
	for (int r = 1; r < n; r++) {
		pid_t p = fork();

		if (p == 0)
			_exit(run_rank(r, n, dir, iters, sizes, sh));
		if (p < 0) {
			perror("fork");
			sh->failed = 1;
			break;
		}
		pids.push_back(p);
	}
	if (!sh->failed)
		rc = run_rank(0, n, dir, iters, sizes, sh);
	for (pid_t p : pids) {
		int st;

		/* a rank that failed leaves the others waiting: Gloo's timeout ends them */
		if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			rc = 1;
	}
	/* the FileStore's keys, then its folder */
	std::error_code ec;
	std::filesystem::remove_all(dir, ec);
	if (rc != 0 || sh->failed)
		return 1;
	for (size_t j = 0; j < sizes.size(); j++) {
		std::vector<double> t(iters);
		long bad = 0;

		for (int it = 0; it < iters; it++)
			t[it] = *std::max_element(sh->t[j][it], sh->t[j][it] + n);
		for (int r = 0; r < n; r++)
			bad += sh->bad[j][r];
		std::sort(t.begin(), t.end());
		printf("allreduce %ld %.9f %d\n", sizes[j],
		       iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2, bad == 0);
	}
	return 0;
}
