/* SPDX-License-Identifier: MIT */
/*
 * nb_outstanding -- the cost of many non-blocking operations in flight at once: every rank
 * starts N operations (sends to the next rank and receives from the previous one, all-reduces
 * of 4 floats, or both), then waits for them in the order given, and reports the median time
 * per operation of the starts and of the waits over R repetitions, for each N. A cost that
 * grows with N shows a progress pass that walks every outstanding operation. Public API only.
 * Run: collrun -n 2 bench/nb_outstanding -k p2p -r 5 1000 4000 16000
 */
#include "bench_time.h"
#include <coll.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_P2P, KIND_ALLREDUCE, KIND_MIXED };

static void usage(FILE *f)
{
    fprintf(f, "usage: nb_outstanding [-k p2p|allreduce|mixed] [-r REPS] [-w fifo|lifo] N...\n"
               "  N operations per rank started, then waited for (fifo: oldest first)\n");
}

/* One repetition: start n operations, wait for them; times in seconds. */
static int run_once(coll_comm_t *comm, int kind, int lifo, int n, float *buf, coll_request_t **reqs,
                    double *t_start, double *t_wait)
{
    int rank, size, k = 0;
    coll_comm_rank(comm, &rank);
    coll_comm_size(comm, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    if (coll_barrier(comm) != COLL_OK) {
        return -1;
    }
    double t0 = bench_now_s();
    for (int i = 0; i < n; i++) {
        coll_result_t st;
        float        *b = buf + 8 * (size_t)i;
        int ar          = kind == KIND_ALLREDUCE || (kind == KIND_MIXED && i % 4 == 0) || size == 1;
        if (ar) {
            st = coll_iallreduce(b, b, 4, COLL_FLOAT32, COLL_SUM, comm, &reqs[k++]);
        } else {
            st = coll_irecv(b + 4, 4, COLL_FLOAT32, left, comm, &reqs[k++]);
            if (st == COLL_OK) {
                st = coll_isend(b, 4, COLL_FLOAT32, right, comm, &reqs[k++]);
            }
        }
        if (st != COLL_OK) {
            fprintf(stderr, "rank %d: operation %d of %d failed to start: %s\n", rank, i, n,
                    coll_strerror(st));
            return -1;
        }
    }
    double t1 = bench_now_s();
    for (int i = 0; i < k; i++) {
        coll_result_t st = coll_wait(reqs[lifo ? k - 1 - i : i]);
        if (st != COLL_OK) {
            fprintf(stderr, "rank %d: wait %d of %d failed: %s\n", rank, i, k, coll_strerror(st));
            return -1;
        }
    }
    *t_start = (t1 - t0) / k;
    *t_wait  = (bench_now_s() - t1) / k;
    return 0;
}

int main(int argc, char **argv)
{
    coll_comm_t *comm;
    int          kind = KIND_P2P, reps = 5, lifo = 0, c, rank, nmax = 0;
    if (coll_init(&argc, &argv, &comm) != COLL_OK) {
        fprintf(stderr, "nb_outstanding: coll_init failed: %s\n", coll_last_error());
        return 1;
    }
    while ((c = getopt(argc, argv, "k:r:w:h")) != -1) {
        if (c == 'k' &&
            (!strcmp(optarg, "p2p") || !strcmp(optarg, "allreduce") || !strcmp(optarg, "mixed"))) {
            kind = optarg[0] == 'p' ? KIND_P2P : optarg[0] == 'a' ? KIND_ALLREDUCE : KIND_MIXED;
        } else if (c == 'r' && atoi(optarg) > 0) {
            reps = atoi(optarg);
        } else if (c == 'w' && (!strcmp(optarg, "fifo") || !strcmp(optarg, "lifo"))) {
            lifo = optarg[0] == 'l';
        } else {
            usage(c == 'h' ? stdout : stderr);
            coll_finalize();
            return c != 'h';
        }
    }
    for (int a = optind; a < argc; a++) {
        int n = atoi(argv[a]);
        if (n <= 0) {
            fprintf(stderr, "nb_outstanding: N must be a positive count, got '%s'\n", argv[a]);
            coll_finalize();
            return 1;
        }
        nmax = n > nmax ? n : nmax;
    }
    if (nmax == 0) {
        usage(stderr);
        coll_finalize();
        return 1;
    }
    coll_comm_rank(comm, &rank);
    float           *buf  = calloc((size_t)nmax * 8, sizeof(float));
    coll_request_t **reqs = calloc((size_t)nmax * 2, sizeof(*reqs));
    double          *ts = calloc((size_t)reps * 2, sizeof(double)), *tw = ts + reps;
    if (buf == NULL || reqs == NULL || ts == NULL) {
        fprintf(stderr, "nb_outstanding: out of memory\n");
        return 1;
    }
    if (rank == 0) {
        printf("# %10s %14s %14s   (median of %d, per operation, waited %s)\n", "N", "start us",
               "wait us", reps, lifo ? "newest first" : "oldest first");
    }
    int rc = 0;
    for (int a = optind; a < argc && rc == 0; a++) {
        int n = atoi(argv[a]);
        for (int r = 0; r < reps && rc == 0; r++) {
            rc = run_once(comm, kind, lifo, n, buf, reqs, &ts[r], &tw[r]);
        }
        if (rc == 0 && rank == 0) {
            printf("  %10d %14.3f %14.3f\n", n, 1e6 * bench_median(ts, reps),
                   1e6 * bench_median(tw, reps));
            fflush(stdout);
        }
    }
    free(buf);
    free(reqs);
    free(ts);
    coll_finalize();
    return rc != 0;
}
