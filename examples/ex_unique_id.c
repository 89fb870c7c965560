/* SPDX-License-Identifier: MIT */
/*
 * NCCL-style creation: rank 0 makes a unique id, broadcasts it over the world communicator
 * (any out-of-band channel works: MPI_Bcast, a file, a TCP store), and every rank joins a new
 * communicator with coll_comm_init_rank in reverse rank order; then an all-gather on it.
 * Run: collrun -n 3 ./ex_unique_id
 */
#include <coll.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    coll_comm_t     *world, *comm;
    coll_unique_id_t id;
    int              rank, size;
    if (coll_init(&argc, &argv, &world) != COLL_OK) {
        fprintf(stderr, "coll_init failed: %s\n", coll_last_error());
        return 1;
    }
    coll_comm_rank(world, &rank);
    coll_comm_size(world, &size);
    if (rank == 0 && coll_get_unique_id(&id) != COLL_OK) {
        fprintf(stderr, "coll_get_unique_id failed: %s\n", coll_last_error());
        return 1;
    }
    coll_broadcast(&id, &id, sizeof(id), COLL_UINT8, 0, world);
    int newrank = size - 1 - rank;
    if (coll_comm_init_rank(&comm, size, id, newrank) != COLL_OK) {
        fprintf(stderr, "rank %d: init failed: %s\n", rank, coll_last_error());
        return 1;
    }
    int *all = malloc(sizeof(int) * (size_t)size), bad = 0;
    coll_allgather(&rank, all, 1, COLL_INT32, comm);
    for (int r = 0; r < size; r++) {
        bad += all[r] != size - 1 - r;
    }
    printf("world rank %d is rank %d of the new communicator; %d wrong\n", rank, newrank, bad);
    free(all);
    coll_comm_destroy(comm);
    coll_finalize();
    return bad != 0;
}
