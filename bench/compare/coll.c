/* bench -coll's comparison: the collective suite of bench/coll.go written
 * against the MPI API, built with each implementation's mpicc and run
 * under its mpiexec right after Tachyon's ranks. OSU-style: the mean time
 * of one call, the maximum over the ranks, every rank's timed loop
 * started by a barrier.
 *
 *   coll OP SIZE US   OP: barrier (SIZE 0), bcast, reduce, allreduce,
 *                     allgather, alltoall; SIZE: bytes a rank contributes
 *                     (8-byte doubles; MPI_SUM for the reductions; for
 *                     alltoall, SIZE/n bytes to each rank, at least one
 *                     double)
 *
 * Usage: coll MAXSIZE [ITERS]   (sizes 8 B to MAXSIZE, doubling)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The same counts as collIters in bench/coll.go; ITERS > 0 sets one for
 * every size. */
static int fixed_iters;
static int iters_for(long size) {
	if (fixed_iters > 0)
		return fixed_iters;
	return size <= 8192 ? 10000 : size <= 262144 ? 1000 : 100;
}

static double timed(const char *op, long size, double *a, double *b, int n) {
	int iters = iters_for(size), warm = iters / 10;
	int cnt = (int)(size / 8), blk = cnt / n > 0 ? cnt / n : 1;
	double t0 = 0;
	for (int i = 0; i < warm + iters; i++) {
		if (i == warm) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (!strcmp(op, "bcast"))
			MPI_Bcast(a, cnt, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		else if (!strcmp(op, "reduce"))
			MPI_Reduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		else if (!strcmp(op, "allreduce"))
			MPI_Allreduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		else if (!strcmp(op, "allgather"))
			MPI_Allgather(a, cnt, MPI_DOUBLE, b, cnt, MPI_DOUBLE, MPI_COMM_WORLD);
		else if (!strcmp(op, "alltoall"))
			MPI_Alltoall(a, blk, MPI_DOUBLE, b, blk, MPI_DOUBLE, MPI_COMM_WORLD);
		else
			MPI_Barrier(MPI_COMM_WORLD);
	}
	double t = (MPI_Wtime() - t0) / iters * 1e6, tmax = 0;
	MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	return tmax;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	long max = argc > 1 ? atol(argv[1]) : 1 << 20;
	fixed_iters = argc > 2 ? atoi(argv[2]) : 0;
	/* allgather's receive buffer holds n blocks of max bytes */
	double *a = calloc((size_t)(max / 8 + 1) * n, 8), *b = calloc((size_t)(max / 8 + 1) * n, 8);
	const char *ops[] = {"bcast", "reduce", "allreduce", "allgather", "alltoall"};
	double t = timed("barrier", 0, a, b, n);
	if (rank == 0)
		printf("coll barrier 0 %.3f\n", t);
	for (int o = 0; o < 5; o++)
		for (long s = 8; s <= max; s *= 2) {
			t = timed(ops[o], s, a, b, n);
			if (rank == 0) {
				printf("coll %s %ld %.3f\n", ops[o], s, t);
				fflush(stdout);
			}
		}
	MPI_Finalize();
	return 0;
}
