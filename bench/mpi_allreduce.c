/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The baseline of "sigma-bench compare": MPI_Allreduce (MPI_FLOAT, MPI_SUM)
 * of the same sizes and input pattern as sigma-bench run. Built at run time
 * with mpicc (meson does not need MPI). Usage: mpi_allreduce ITERS SIZE...
 * Rank 0 prints one line per size: "allreduce BYTES MEDIAN_SECONDS OK".
 * An iteration's time is its slowest rank's.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int rank, n, iters;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	iters = argc > 1 ? atoi(argv[1]) : 5;
	if (iters < 1 || iters > 1000)
		iters = 5;
	for (int a = 2; a < argc; a++) {
		long bytes = atol(argv[a]);
		long ne = (bytes + 3) / 4, bad = 0;
		float *in = malloc(ne * 4), *out = malloc(ne * 4);
		double *t = malloc(sizeof(double) * iters);

		for (long i = 0; i < ne; i++)
			in[i] = (float)(i % 509 + rank);
		for (int it = 0; it <= iters; it++) {
			double t0, dt, worst;

			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			MPI_Allreduce(in, out, (int)ne, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			dt = MPI_Wtime() - t0;
			MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			if (it > 0)
				t[it - 1] = worst;
		}
		for (long i = 0; i < ne; i++)
			bad += out[i] != (float)((long)n * (i % 509) + (long)n * (n - 1) / 2);
		MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		qsort(t, iters, sizeof(double), cmp);
		if (rank == 0)
			printf("allreduce %ld %.9f %d\n", bytes,
			       iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2,
			       bad == 0);
		fflush(stdout);
		free(in);
		free(out);
		free(t);
	}
	MPI_Finalize();
	return 0;
}
