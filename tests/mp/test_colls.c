/* SPDX-License-Identifier: MIT */
/*
 * The correctness matrix of one collective (chosen at build time by MP_COLL): for every
 * transport in COLL_TEST_TRANSPORTS and nranks in {1,2,3,4,5,8}, fork the ranks once and run
 * every dtype x op x size {0, 1, 7, chunk+3, several chunks+odd} x {out of place, in place},
 * checking every output element exactly and that nothing past the output was written. The
 * shared-window all-reduces run on shm for 1..8 ranks, once with a window too small for the
 * larger sizes (they fall back), and once over tcp (no windows: they fall back).
 * Usage: test_<coll> [-n NRANKS] [-t TRANSPORT]
 */
#include "coll_test.h"
#include "mp_data.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GUARD 64

enum { MP_ALLREDUCE, MP_REDUCE_SCATTER, MP_ALLGATHER, MP_BROADCAST, MP_REDUCE, MP_ALLTOALL };
#ifndef MP_COLL
#define MP_COLL MP_ALLREDUCE
#endif

typedef struct {
    int    rank, root;
    size_t count;
} mp_ctx_t;

static int mp_is_reduction(void)
{
    return MP_COLL == MP_ALLREDUCE || MP_COLL == MP_REDUCE_SCATTER || MP_COLL == MP_REDUCE;
}

static double a2a_value(int from, int to, size_t j)
{
    return (double)(((size_t)from * 7 + (size_t)to * 3 + j) % 100 + 1);
}

/* expected element idx of this rank's output */
static double mp_expect_out(coll_dtype_t dt, coll_redop_t op, int n, size_t idx, void *vctx)
{
    mp_ctx_t *c = vctx;
    uint64_t  tmp[1];
    double    v;
    switch (MP_COLL) {
    case MP_REDUCE_SCATTER:
        return mp_expect(dt, op, n, (size_t)c->rank * c->count + idx);
    case MP_ALLGATHER:
        v = mp_input(COLL_SUM, (int)(idx / (c->count ? c->count : 1)),
                     idx % (c->count ? c->count : 1));
        break;
    case MP_BROADCAST:
        v = mp_input(COLL_SUM, c->root, idx);
        break;
    case MP_ALLTOALL:
        v = a2a_value((int)(idx / c->count), c->rank, idx % c->count);
        break;
    default:
        return mp_expect(dt, op, n, idx);
    }
    mp_store(dt, tmp, 0, v);
    return mp_load(dt, tmp, 0);
}

/* sizes in elements of this rank's input and output buffers */
static void mp_sizes(size_t count, int n, size_t *in, size_t *out)
{
    switch (MP_COLL) {
    case MP_REDUCE_SCATTER:
        *in  = count * (size_t)n;
        *out = count;
        break;
    case MP_ALLGATHER:
        *in  = count;
        *out = count * (size_t)n;
        break;
    case MP_ALLTOALL:
        *in = *out = count * (size_t)n;
        break;
    default:
        *in = *out = count;
    }
}

static void mp_fill_input(coll_dtype_t dt, coll_redop_t op, char *in, size_t count, int rank, int n)
{
    size_t esz = coll_dtype_size(dt);
    if (MP_COLL == MP_ALLTOALL) {
        for (int p = 0; p < n; p++) {
            for (size_t j = 0; j < count; j++) {
                mp_store(dt, in, (size_t)p * count + j, a2a_value(rank, p, j));
            }
        }
    } else if (MP_COLL == MP_ALLGATHER || MP_COLL == MP_BROADCAST) {
        mp_fill(dt, COLL_SUM, in, count, rank, 0);
    } else {
        size_t in_n, out_n;
        mp_sizes(count, n, &in_n, &out_n);
        mp_fill(dt, op, in, in_n, rank, 0);
    }
    (void)esz;
}

static coll_result_t mp_call(coll_comm_t *comm, const void *s, void *r, size_t count,
                             coll_dtype_t dt, coll_redop_t op, int root)
{
    switch (MP_COLL) {
    case MP_REDUCE_SCATTER:
        return coll_reduce_scatter(s, r, count, dt, op, comm);
    case MP_ALLGATHER:
        return coll_allgather(s, r, count, dt, comm);
    case MP_BROADCAST:
        return coll_broadcast(s, r, count, dt, root, comm);
    case MP_REDUCE:
        return coll_reduce(s, r, count, dt, op, root, comm);
    case MP_ALLTOALL:
        return coll_alltoall(s, r, count, dt, comm);
    default:
        return coll_allreduce(s, r, count, dt, op, comm);
    }
}

/* One call; returns the number of wrong elements (or 1 on a call error). */
static size_t mp_case(coll_comm_t *comm, int rank, int n, coll_dtype_t dt, coll_redop_t op,
                      size_t count, int in_place, int root)
{
    size_t esz = coll_dtype_size(dt), in_n, out_n, wrong = 0;
    mp_sizes(count, n, &in_n, &out_n);
    size_t big  = (in_n > out_n ? in_n : out_n) * esz;
    char  *sbuf = malloc(big + GUARD), *rbuf = malloc(big + GUARD);
    char  *send = sbuf, *recv = rbuf, *out;
    memset(sbuf, 0x5a, big + GUARD);
    memset(rbuf, 0xa5, big + GUARD);
    mp_ctx_t ctx = {rank, root, count};
    if (!in_place) {
        mp_fill_input(dt, op, send, count, rank, n);
        out = recv;
    } else if (MP_COLL == MP_REDUCE_SCATTER) {
        mp_fill_input(dt, op, sbuf, count, rank, n);
        send = sbuf;
        recv = sbuf + (size_t)rank * count * esz;
        out  = recv;
    } else if (MP_COLL == MP_ALLGATHER) {
        mp_fill(dt, COLL_SUM, rbuf + (size_t)rank * count * esz, count, rank, 0);
        send = rbuf + (size_t)rank * count * esz;
        recv = rbuf;
        out  = recv;
    } else {
        mp_fill_input(dt, op, rbuf, count, rank, n);
        send = recv = rbuf;
        out         = rbuf;
    }
    coll_result_t st = mp_call(comm, send, recv, count, dt, op, root);
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: call failed: %s: %s\n", rank, coll_strerror(st),
                coll_comm_last_error(comm));
        exit(5);
    }
    int significant = !(MP_COLL == MP_REDUCE && rank != root);
    if (significant) {
        char what[128];
        snprintf(what, sizeof(what), "n=%d count=%zu %s root=%d", n, count,
                 in_place ? "in-place" : "out-of-place", root);
        wrong += mp_check(dt, out, out_n, what, rank, mp_expect_out, op, n, 0, &ctx);
        /* nothing written past the output (guard of the buffer holding it) */
        const char *end =
            (in_place && MP_COLL == MP_REDUCE_SCATTER) ? sbuf + big : out + out_n * esz;
        const char   *gbase = (in_place && MP_COLL == MP_REDUCE_SCATTER) ? sbuf : rbuf;
        unsigned char gval  = gbase == sbuf ? 0x5a : 0xa5;
        for (int g = 0; g < GUARD; g++) {
            if ((unsigned char)end[g] != gval) {
                fprintf(stderr, "rank %d: %s: byte %d past the output was written\n", rank, what,
                        g);
                wrong++;
                break;
            }
        }
    }
    free(sbuf);
    free(rbuf);
    return wrong;
}

static int mp_rank_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t      chunk = 4096;
    const char *cs    = getenv("COLL_CHUNK_SIZE");
    if (cs != NULL && atol(cs) > 0) {
        chunk = (size_t)atol(cs) * (strchr(cs, 'k') ? 1024 : 1);
    }
    size_t wrong = 0, cases = 0;
    int    nops = mp_is_reduction() ? COLL_REDOP_COUNT : 1;
    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        size_t ce      = chunk / coll_dtype_size((coll_dtype_t)dt);
        size_t sizes[] = {0, 1, 7, ce + 3, 3 * ce + 11};
        for (int op = 0; op < nops; op++) {
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                for (int ip = 0; ip < (MP_COLL == MP_ALLTOALL ? 1 : 2); ip++) {
                    int root = (int)((cases + (size_t)dt) % (size_t)n);
                    wrong += mp_case(comm, rank, n, (coll_dtype_t)dt, (coll_redop_t)op, sizes[s],
                                     ip, root);
                    cases++;
                }
            }
        }
    }
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %zu wrong elements over %zu cases\n", rank, wrong, cases);
        return 1;
    }
    if (rank == 0) {
        printf("  %d ranks: %zu cases ok\n", n, cases);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int         only_n = 0, opt, failed = 0, total = 0;
    const char *only_t = NULL, *tps[8];
    while ((opt = getopt(argc, argv, "n:t:")) != -1) {
        if (opt == 'n') {
            only_n = atoi(optarg);
        } else if (opt == 't') {
            only_t = optarg;
        } else {
            fprintf(stderr, "usage: %s [-n nranks] [-t transport]\n", argv[0]);
            return COLL_TEST_HARD;
        }
    }
    int ntp = only_t != NULL ? 1 : coll_test_transports(tps, 8);
    if (only_t != NULL) {
        tps[0] = only_t;
    }
    static const int counts[]     = {1, 2, 3, 4, 5, 8};
    static const int win_counts[] = {1, 2, 3, 4, 5, 6, 7, 8};
    /* every algorithm of the collective, through COLL_ALGO (NULL: the automatic choice) */
    static const char *const ar_algos[] = {
        NULL, "recursive_doubling", "rabenseifner", "tree", "hier", "oneshot", "twoshot"};
    static const char *const tree_algos[] = {NULL, "tree"};
    static const char *const rs_algos[]   = {NULL, "recursive_halving", "hier"};
    static const char *const ag_algos[]   = {NULL, "bruck", "hier"};
    static const char *const no_algos[]   = {NULL};
    const char *const       *algos        = no_algos;
    int                      nalgos       = 1;
    if (MP_COLL == MP_ALLREDUCE) {
        algos  = ar_algos;
        nalgos = (int)(sizeof(ar_algos) / sizeof(ar_algos[0]));
    } else if (MP_COLL == MP_BROADCAST || MP_COLL == MP_REDUCE) {
        algos  = tree_algos;
        nalgos = (int)(sizeof(tree_algos) / sizeof(tree_algos[0]));
    } else if (MP_COLL == MP_REDUCE_SCATTER) {
        algos  = rs_algos;
        nalgos = (int)(sizeof(rs_algos) / sizeof(rs_algos[0]));
    } else if (MP_COLL == MP_ALLGATHER) {
        algos  = ag_algos;
        nalgos = (int)(sizeof(ag_algos) / sizeof(ag_algos[0]));
    }
    for (int a = 0; a < nalgos; a++) {
        int window = algos[a] != NULL && strstr(algos[a], "shot") != NULL;
        if (algos[a] != NULL) {
            setenv("COLL_ALGO", algos[a], 1);
        }
        for (int t = 0; t < ntp; t++) {
            const int *ns = window ? win_counts : counts;
            size_t nns = window ? sizeof(win_counts) / sizeof(int) : sizeof(counts) / sizeof(int);
            for (size_t i = 0; i < nns; i++) {
                /* windows: every count on shm; elsewhere they only fall back, so once */
                if ((only_n > 0 && ns[i] != only_n) ||
                    (window && only_n == 0 && strcmp(tps[t], "shm") != 0 && ns[i] != 3)) {
                    continue;
                }
                /* shm, 4 ranks: a window smaller than the larger sizes, which fall back */
                if (window && strcmp(tps[t], "shm") == 0) {
                    setenv("COLL_SHM_WINDOW_SIZE", ns[i] == 4 ? "4k" : "1m", 1);
                }
                coll_test_opts_t o = {
                    .nranks = ns[i], .want_comm = 1, .timeout_s = 300, .transport = tps[t]};
                printf("%s over %s, algorithm %s:\n", argv[0], tps[t],
                       algos[a] ? algos[a] : "auto");
                fflush(stdout);
                int rc = coll_test_run_ranks(&o, mp_rank_main, NULL);
                total++;
                failed += rc != 0;
                printf("%s: %s, %d ranks, %s: %s\n", rc ? "FAIL" : "PASS", tps[t], ns[i],
                       algos[a] ? algos[a] : "auto", rc ? "failed" : "ok");
            }
        }
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed ? 1 : 0;
}
