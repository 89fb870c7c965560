/* SPDX-License-Identifier: MIT */
/*
 * MPI-style all-reduce: every rank contributes rank+1 to each element; every rank checks that
 * it received the sum 1+2+...+n. Run: collrun -n 4 ./ex_allreduce
 */
#include <coll.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    coll_comm_t *world;
    int          rank, size;
    if (coll_init(&argc, &argv, &world) != COLL_OK) {
        fprintf(stderr, "coll_init failed: %s\n", coll_last_error());
        return 1;
    }
    coll_comm_rank(world, &rank);
    coll_comm_size(world, &size);

    enum { N = 1 << 20 };
    float *grad = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        grad[i] = (float)(rank + 1);
    }
    coll_result_t st = coll_allreduce(grad, grad, N, COLL_FLOAT32, COLL_SUM, world);
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: allreduce failed: %s\n", rank, coll_comm_last_error(world));
        return 1;
    }
    float want = (float)size * (float)(size + 1) / 2.0f;
    int   bad  = 0;
    for (int i = 0; i < N; i++) {
        bad += grad[i] != want;
    }
    printf("rank %d of %d: sum %g, %d wrong\n", rank, size, grad[0], bad);
    free(grad);
    coll_finalize();
    return bad != 0;
}
