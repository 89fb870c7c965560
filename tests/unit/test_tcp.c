/* SPDX-License-Identifier: MIT */
/*
 * TCP transport data test: forks 2..4 ranks (tcp_rig.h: handles exchanged through files, no
 * bootstrap), connect, and move messages of many shapes (empty, odd, multi-frame, unexpected,
 * reduced on arrival, out of tag order) with 1, 2 and 4 sockets per peer; block/wake on rank 0.
 * Stray clients (garbage, silence, a wrong job secret, a replayed response) visit ranks 1 and
 * the last while they set up, and the log must show them refused. Failure cases: test_tcp_faults.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "coll_test.h"
#include "tcp_rig.h"
#include "util.h"

#define NSIZES 5
#define NBIG   4
#define NSMALL 32

/* ---- data tests (every rank with every other rank) ---- */

static uint64_t zcopy_frames(trank_t *t)
{
    uint64_t n = 0;
    for (int p = 0; p < t->nranks; p++) {
        if (t->eps[p] != NULL) {
            n += ((coll_tcp_ep_t *)t->eps[p])->stats.frames_zcopy;
        }
    }
    return n;
}

/* Sizes 0, 1, 7, 4096, 5 frames + 3, received with the receives posted first (zero copy). */
static void test_sizes(trank_t *t)
{
    size_t   sizes[NSIZES] = {0, 1, 7, 4096, t->frag * 5 + 3};
    top_t    recvs[MAXR * NSIZES], sends[MAXR * NSIZES];
    char    *rbuf[MAXR * NSIZES], *sbuf[MAXR * NSIZES];
    int      n   = 0;
    uint64_t zc0 = zcopy_frames(t);

    for (int p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSIZES; k++, n++) {
            rbuf[n] = malloc(sizes[k] + 1);
            sbuf[n] = malloc(sizes[k] + 1);
            fill(sbuf[n], sizes[k], seed_of(t->rank, p, 100 + k));
            top_init(&recvs[n], rbuf[n], sizes[k], 100 + k);
            top_init(&sends[n], sbuf[n], sizes[k], 100 + k);
            ASSERT_OK(ops->irecv(t->eps[p], &recvs[n].op));
        }
    }
    barrier(t, 1); /* every receive is posted before any data moves */
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSIZES; k++, i++) {
            ASSERT_OK(ops->isend(t->eps[p], &sends[i].op));
        }
    }
    wait_all(t, recvs, n);
    wait_all(t, sends, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSIZES; k++, i++) {
            ASSERT_EQ(recvs[i].op.bytes, sizes[k]);
            ASSERT_EQ(sends[i].op.bytes, sizes[k]);
            check(rbuf[i], sizes[k], seed_of(p, t->rank, 100 + k), "sizes");
            free(rbuf[i]);
            free(sbuf[i]);
        }
    }
    ASSERT_TRUE(zcopy_frames(t) > zc0);
}

/* Both sides send several large messages before posting any receive, then post them in
 * reverse tag order: nothing may deadlock, unexpected data must be buffered and matched. */
static void test_unexpected(trank_t *t)
{
    size_t len = t->frag * 8 + 5;
    top_t  recvs[MAXR * NBIG], sends[MAXR * NBIG];
    char  *rbuf[MAXR * NBIG], *sbuf[MAXR * NBIG];
    int    n = 0;

    for (int p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NBIG; k++, n++) {
            sbuf[n] = malloc(len);
            rbuf[n] = malloc(len);
            fill(sbuf[n], len, seed_of(t->rank, p, 200 + k));
            top_init(&sends[n], sbuf[n], len, 200 + k);
            ASSERT_OK(ops->isend(t->eps[p], &sends[n].op));
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        int p = 0, k = i % NBIG, idx = i / NBIG;
        for (int q = 0, c = 0; q < t->nranks; q++) {
            if (q != t->rank && c++ == idx) {
                p = q;
            }
        }
        top_init(&recvs[i], rbuf[i], len, 200 + k);
        ASSERT_OK(ops->irecv(t->eps[p], &recvs[i].op));
        ops->progress(t->ctx);
    }
    wait_all(t, recvs, n);
    wait_all(t, sends, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NBIG; k++, i++) {
            check(rbuf[i], len, seed_of(p, t->rank, 200 + k), "unexpected");
            free(rbuf[i]);
            free(sbuf[i]);
        }
    }
}

/* Many small messages, received in an order unrelated to the send order. */
static void test_small_shuffled(trank_t *t)
{
    top_t recvs[MAXR * NSMALL], sends[MAXR * NSMALL];
    char  rbuf[MAXR * NSMALL][128], sbuf[MAXR * NSMALL][128];
    int   n = 0;

    for (int p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSMALL; k++, n++) {
            int kk = (k * 7 + 3) % NSMALL; /* a permutation of the tags */
            top_init(&recvs[n], rbuf[n], (size_t)kk + 1, 300 + kk);
            ASSERT_OK(ops->irecv(t->eps[p], &recvs[n].op));
            fill(sbuf[n], (size_t)k + 1, seed_of(t->rank, p, 300 + k));
            top_init(&sends[n], sbuf[n], (size_t)k + 1, 300 + k);
            ASSERT_OK(ops->isend(t->eps[p], &sends[n].op));
        }
    }
    wait_all(t, recvs, n);
    wait_all(t, sends, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSMALL; k++, i++) {
            int kk = (k * 7 + 3) % NSMALL;
            check(rbuf[i], (size_t)kk + 1, seed_of(p, t->rank, 300 + kk), "small");
        }
    }
}

/* fp32 sum on arrival: out of place posted early, in place posted late (data buffered). */
static void test_reduce(trank_t *t)
{
    size_t count = t->frag / 4 * 3 + 5, len = count * sizeof(float);
    top_t  recvs[2 * MAXR], sends[2 * MAXR];
    float *dst[2 * MAXR], *opnd[2 * MAXR], *src = malloc(len);
    int    n = 0;

    for (size_t i = 0; i < count; i++) {
        src[i] = (float)(i % 7 + (size_t)t->rank);
    }
    for (int p = 0; p < t->nranks; p++) {
        if (p == t->rank) {
            continue;
        }
        for (int v = 0; v < 2; v++, n++) {
            dst[n]  = malloc(len);
            opnd[n] = v == 0 ? malloc(len) : dst[n]; /* v == 1: in place */
            for (size_t i = 0; i < count; i++) {
                opnd[n][i] = (float)(i % 100) + 1000.0f * (float)v;
            }
            top_init(&recvs[n], dst[n], len, 400 + v);
            recvs[n].op.operand = opnd[n];
            recvs[n].op.dtype   = COLL_FLOAT32;
            recvs[n].op.op      = COLL_SUM;
            if (v == 0) {
                ASSERT_OK(ops->irecv(t->eps[p], &recvs[n].op));
            }
        }
    }
    barrier(t, 2);
    for (int p = 0, i = 0; p < t->nranks; p++) {
        for (int v = 0; p != t->rank && v < 2; v++, i++) {
            top_init(&sends[i], src, len, 400 + v);
            ASSERT_OK(ops->isend(t->eps[p], &sends[i].op));
        }
    }
    wait_all(t, sends, n);
    barrier(t, 3); /* the in-place messages have arrived or are arriving: post late */
    for (int p = 0, i = 0; p < t->nranks; p++) {
        for (int v = 0; p != t->rank && v < 2; v++, i++) {
            if (v == 1) {
                ASSERT_OK(ops->irecv(t->eps[p], &recvs[i].op));
            }
        }
    }
    wait_all(t, recvs, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int p = 0, i = 0; p < t->nranks; p++) {
        for (int v = 0; p != t->rank && v < 2; v++, i++) {
            for (size_t e = 0; e < count; e++) {
                float want = (float)(e % 100) + 1000.0f * (float)v + (float)(e % 7 + (size_t)p);
                ASSERT_((dst[i][e] == want), "reduce from %d v%d elem %zu: %g != %g", p, v, e,
                        (double)dst[i][e], (double)want);
            }
            if (v == 0) {
                free(opnd[i]);
            }
            free(dst[i]);
        }
    }
    free(src);
}

static volatile int wake_stop;

static void *waker(void *arg)
{
    while (!wake_stop) {
        ops->wake(arg);
        usleep(1000);
    }
    return NULL;
}

/* wake() before block() makes block return at once; so does wake() from another thread. */
static void test_block_wake(trank_t *t)
{
    pthread_t th;
    double    t0 = coll_time_s();

    ops->wake(t->ctx);
    ops->block(t->ctx, 10.0);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0); /* not a timing test: 10 s means wake was lost */
    wake_stop = 0;
    ASSERT_EQ(pthread_create(&th, NULL, waker, t->ctx), 0);
    t0 = coll_time_s();
    ops->block(t->ctx, 10.0);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0);
    wake_stop = 1;
    ASSERT_EQ(pthread_join(th, NULL), 0);
    ops->block(t->ctx, 0); /* drains nothing, returns at once */
}

static int rank_main_data(const char *dir, int rank, int nranks)
{
    trank_t t;

    ASSERT_OK(rank_setup(&t, dir, rank, nranks, 1u << (nranks - 1) | 1u << 1));
    test_sizes(&t);
    test_unexpected(&t);
    test_small_shuffled(&t);
    test_reduce(&t);
    if (rank == 0) {
        test_block_wake(&t);
    }
    barrier(&t, 4);
    rank_teardown(&t);
    return 0;
}

/* Lines each run's log must contain (the log goes to a file in the run's directory). */
static const char *const log_stray[] = {"not an authentication response",
                                        "does not hold this job's secret", NULL};

/* name, function, ranks, COLL_TCP_NSOCKS, COLL_TCP_FRAG_SIZE, NSOCKS of the last rank,
 * rank 0 dies, expected log lines */
static const run_cfg_t run_cfgs[] = {
    {"3 ranks, 2 sockets, 16k frames", rank_main_data, 3, "2", "16k", NULL, 0, log_stray},
    {"2 ranks, 1 socket, 256k frames", rank_main_data, 2, "1", "256k", NULL, 0, log_stray},
    {"4 ranks, 4 sockets, 8k frames", rank_main_data, 4, "4", "8k", NULL, 0, log_stray},
};

int main(void)
{
    int failed = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    for (size_t i = 0; i < sizeof(run_cfgs) / sizeof(run_cfgs[0]); i++) {
        failed |= run("test_tcp", &run_cfgs[i]);
    }
    return failed ? 1 : 0;
}
