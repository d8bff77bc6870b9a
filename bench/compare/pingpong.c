/* The bench's suite in C against the MPI API, for -compare: the same
 * sizes, iteration counts, warm-up, window of 64 and acknowledgement as
 * bench/suite.go, so that MPICH and Open MPI are measured the way Tachyon
 * is, in the same run. Built by the bench with mpicc.mpich and
 * mpicc.openmpi and run on two ranks. It prints one line a figure, as
 * bench -format anchor does:
 *
 *   latency SIZE US      half the round trip of a blocking ping-pong
 *   msgrate SIZE MMSGS   windows of 64 Isend/Irecv, each acknowledged
 *   bw      SIZE MBS     the same windows, as bandwidth
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { window = 64, warm_windows = 5 };

/* iters_for is bench/suite.go's itersFor. */
static int iters_for(int size) {
    if (size <= 8192)
        return 20000;
    if (size <= 262144)
        return 2000;
    return 200;
}

/* latency returns half the round trip of a blocking ping-pong, in us. */
static double latency(int rank, char *buf, int size) {
    int iters = iters_for(size), warm = iters / 10;
    double t0 = 0;
    for (int i = 0; i < iters + warm; i++) {
        if (i == warm) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

/* rate returns millions of size-byte messages a second: the sender posts
 * a window of sends from one buffer, the receiver a window of receives
 * into buffers of their own, and each window ends with an empty
 * acknowledgement from the receiver (bench/suite.go's messageRate). */
static double rate(int rank, char *buf, int size) {
    int iters = iters_for(size) / window + 10;
    MPI_Request reqs[window];
    double t0 = 0;
    for (int i = 0; i < iters + warm_windows; i++) {
        if (i == warm_windows) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            for (int w = 0; w < window; w++)
                MPI_Isend(buf, size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < window; w++)
                MPI_Irecv(buf + (size_t)w * size, size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        }
    }
    return (double)iters * window / (MPI_Wtime() - t0) / 1e6;
}

int main(int argc, char **argv) {
    int rank, n;
    long max = argc > 1 ? atol(argv[1]) : 4194304;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 2 || max < 1 || max > (1L << 26)) {
        if (rank == 0)
            fprintf(stderr, "pingpong: run on 2 ranks, with a largest size from 1 to 64 MiB\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc((size_t)max * window + 1);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 3);
    memset(buf, 1, (size_t)max * window + 1);
    latency(rank, buf, 0); /* one untimed pass first, as the bench makes */
    for (long s = 0; s <= max; s = s ? s * 2 : 1) {
        double us = latency(rank, buf, (int)s);
        if (rank == 0)
            printf("latency %ld %.3f\n", s, us);
    }
    for (long s = 1; s <= max; s *= 2) {
        double m = rate(rank, buf, (int)s);
        if (rank == 0) {
            printf("msgrate %ld %.4f\n", s, m);
            printf("bw %ld %.1f\n", s, m * s);
        }
    }
    fflush(stdout);
    MPI_Finalize();
    free(buf);
    return 0;
}
