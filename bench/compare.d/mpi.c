/* SPDX-License-Identifier: MIT */
/*
 * bench/compare.d/mpi.c -- the MPI side of bench/compare: MPI_Allreduce, MPI_Reduce_scatter_block
 * or MPI_Allgather of float (sum) over a doubling size sweep, sizes counted as collbench counts
 * them (all-reduce: the buffer; reduce-scatter: the input of all ranks; all-gather: the
 * output). Prints "coll bytes time_us" per size from rank 0, the time being the slowest rank's
 * mean over the timed calls. Built with Open MPI's and with MPICH's mpicc.
 * Run: mpirun -np 2 ./compare_mpi allreduce 8 268435456 20
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc != 5 || (strcmp(argv[1], "allreduce") && strcmp(argv[1], "reduce_scatter") &&
                      strcmp(argv[1], "allgather"))) {
        if (rank == 0)
            fprintf(stderr, "usage: %s allreduce|reduce_scatter|allgather MINB MAXB ITERS\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }
    int    coll = argv[1][0] == 'a' ? (argv[1][3] == 'r' ? 0 : 2) : 1;
    size_t minb = strtoull(argv[2], NULL, 0), maxb = strtoull(argv[3], NULL, 0);
    int    iters = atoi(argv[4]);
    if (minb < 4 || maxb < minb || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "compare_mpi: bad sizes or iterations\n");
        MPI_Finalize();
        return 2;
    }
    float *a = malloc(maxb + 64), *b = malloc(maxb + 64);
    if (a == NULL || b == NULL) {
        fprintf(stderr, "compare_mpi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(a, 0, maxb + 64);
    memset(b, 0, maxb + 64);
    for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
        size_t cnt  = bytes / sizeof(float); /* elements of the counted buffer */
        int    part = (int)(cnt / (size_t)n);
        if (coll != 0 && part == 0)
            continue;
        double worst = 0.0;
        for (int it = -2; it < iters; it++) {
            if (it == 0) {
                MPI_Barrier(MPI_COMM_WORLD);
                worst = MPI_Wtime();
            }
            if (coll == 0)
                MPI_Allreduce(a, b, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else if (coll == 1)
                MPI_Reduce_scatter_block(a, b, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else
                MPI_Allgather(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD);
        }
        double t = (MPI_Wtime() - worst) / iters, tmax = 0.0;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%s %zu %.3f\n", argv[1], coll == 0 ? bytes : (size_t)part * n * 4, tmax * 1e6);
        fflush(stdout);
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
