/* SPDX-License-Identifier: MIT */
/*
 * Point-to-point ring: each rank sends a token to its right neighbour and receives one from
 * its left, with non-blocking calls so the exchange cannot deadlock; then a barrier.
 * Run: collrun -n 4 ./ex_ring
 */
#include <coll.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    coll_comm_t    *world;
    coll_request_t *reqs[2];
    int             rank, size, token, got = -1;
    if (coll_init(&argc, &argv, &world) != COLL_OK) {
        fprintf(stderr, "coll_init failed: %s\n", coll_last_error());
        return 1;
    }
    coll_comm_rank(world, &rank);
    coll_comm_size(world, &size);
    if (size < 2) {
        printf("ring needs at least 2 ranks\n");
        coll_finalize();
        return 0;
    }
    token = 100 + rank;
    coll_irecv(&got, 1, COLL_INT32, (rank + size - 1) % size, world, &reqs[0]);
    coll_isend(&token, 1, COLL_INT32, (rank + 1) % size, world, &reqs[1]);
    if (coll_waitall(2, reqs) != COLL_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, coll_comm_last_error(world));
        return 1;
    }
    coll_barrier(world);
    printf("rank %d got %d from rank %d\n", rank, got, (rank + size - 1) % size);
    coll_finalize();
    return got != 100 + (rank + size - 1) % size;
}
