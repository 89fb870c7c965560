/* SPDX-License-Identifier: MIT */
/*
 * Point-to-point and barrier: ring exchange with non-blocking send/recv of several sizes
 * (0, 1, 7, many chunks), messages matched in order per peer, many outstanding requests at
 * once, coll_test polling, and barriers; over every transport and several rank counts. Then
 * thousands of sends, receives and all-reduces outstanding at once, waited for newest first.
 */
#include "coll_test.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int p2p_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    static const size_t sizes[] = {0, 1, 7, 1000, 100003};
    int                 right = (rank + 1) % n, left = (rank + n - 1) % n;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t          cnt = sizes[s];
        int32_t        *out[3], *in[3];
        coll_request_t *reqs[6];
        for (int k = 0; k < 3; k++) {
            out[k] = malloc(cnt * 4 + 4);
            in[k]  = calloc(cnt + 1, 4);
            for (size_t i = 0; i < cnt; i++) {
                out[k][i] = (int32_t)(rank * 1000003 + k * 7919 + (int)i);
            }
        }
        if (n == 1) {
            ASSERT_OK(coll_barrier(comm));
            for (int k = 0; k < 3; k++) {
                free(out[k]);
                free(in[k]);
            }
            continue;
        }
        /* three messages each way, receives posted in reverse order of the sends */
        for (int k = 0; k < 3; k++) {
            ASSERT_OK(coll_irecv(in[k], cnt, COLL_INT32, left, comm, &reqs[k]));
        }
        for (int k = 0; k < 3; k++) {
            ASSERT_OK(coll_isend(out[k], cnt, COLL_INT32, right, comm, &reqs[3 + k]));
        }
        int done = 0;
        while (!done) { /* poll one of them with coll_test, then wait for the rest */
            ASSERT_OK(coll_test(reqs[0], &done));
        }
        reqs[0] = NULL;
        ASSERT_OK(coll_waitall(6, reqs));
        for (int k = 0; k < 3; k++) {
            for (size_t i = 0; i < cnt; i++) {
                ASSERT_EQ(in[k][i], (int32_t)(left * 1000003 + k * 7919 + (int)i));
            }
            free(out[k]);
            free(in[k]);
        }
        ASSERT_OK(coll_barrier(comm));
    }
    /* blocking send/recv between pairs: even ranks send first */
    if (n > 1) {
        int64_t v = rank, got = -1;
        int     peer = rank ^ 1;
        if (peer < n) {
            if (rank % 2 == 0) {
                ASSERT_OK(coll_send(&v, 1, COLL_INT64, peer, comm));
                ASSERT_OK(coll_recv(&got, 1, COLL_INT64, peer, comm));
            } else {
                ASSERT_OK(coll_recv(&got, 1, COLL_INT64, peer, comm));
                ASSERT_OK(coll_send(&v, 1, COLL_INT64, peer, comm));
            }
            ASSERT_EQ(got, peer);
        }
    }
    for (int i = 0; i < 20; i++) {
        ASSERT_OK(coll_barrier(comm));
    }
    return 0;
}

/* NMANY sends and receives around the ring with an all-reduce every 16th message, all started
 * before any is waited for, then waited for newest first (coll_test on every other one): each
 * progress pass visits only the requests that moved, whatever their number. */
#define NMANY 4000

static int many_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    int              right = (rank + 1) % n, left = (rank + n - 1) % n, nar = NMANY / 16, k = 0;
    int32_t         *out = malloc(sizeof(int32_t) * 2 * NMANY), *in = out + NMANY;
    int64_t         *sums = calloc((size_t)nar, sizeof(int64_t));
    coll_request_t **reqs = calloc(2 * NMANY + (size_t)nar, sizeof(*reqs));
    (void)arg;
    for (int i = 0; i < NMANY; i++) {
        out[i] = rank * 100003 + i;
        in[i]  = -1;
        ASSERT_OK(coll_irecv(&in[i], 1, COLL_INT32, left, comm, &reqs[k++]));
        ASSERT_OK(coll_isend(&out[i], 1, COLL_INT32, right, comm, &reqs[k++]));
        if (i % 16 == 0) {
            int64_t *v = &sums[i / 16];
            *v         = rank + i;
            ASSERT_OK(coll_iallreduce(v, v, 1, COLL_INT64, COLL_SUM, comm, &reqs[k++]));
        }
    }
    while (k > 0) {
        int done = k % 2;
        while (!done) {
            ASSERT_OK(coll_test(reqs[k - 1], &done));
        }
        if (k % 2 != 0) {
            ASSERT_OK(coll_wait(reqs[k - 1]));
        }
        k--;
    }
    for (int i = 0; i < NMANY; i++) {
        ASSERT_EQ(in[i], left * 100003 + i);
        if (i % 16 == 0) {
            ASSERT_EQ(sums[i / 16], (int64_t)n * (n - 1) / 2 + (int64_t)n * i);
        }
    }
    free(out);
    free(sums);
    free(reqs);
    return 0;
}

/* A send and a receive of different counts, of several chunks or one empty: the receive fails
 * with COLL_ERR_MISMATCH at once (it used to take the first chunks and return success over tcp,
 * the rest of the message dropped; a count of 0 sent nothing at all). The sender finishes, or
 * fails at once too: the receiving rank announces its failure (a single-copy send, which waits
 * for its receiver to read it, used to wait to its timeout). */
static void short_timeout(int rank, int nranks)
{
    (void)rank;
    (void)nranks;
    setenv("COLL_TIMEOUT", "3", 1);
}

/* {sent, expected} element counts of the mismatch cases: several chunks each way, and an
 * empty message against a small one each way */
static const size_t mismatch_counts[][2] = {
    {(size_t)1 << 20, (size_t)2 << 20}, {(size_t)2 << 20, (size_t)1 << 20}, {0, 100}, {100, 0}};
#define NMISMATCH (sizeof(mismatch_counts) / sizeof(mismatch_counts[0]))

static int mismatch_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t   sent = mismatch_counts[*(int *)arg][0], expected = mismatch_counts[*(int *)arg][1];
    int32_t *buf = calloc((sent > expected ? sent : expected) + 1, sizeof(int32_t));
    (void)n;
    ASSERT_TRUE(buf != NULL);
    if (rank == 0) {
        double        t0 = coll_time_s();
        coll_result_t st = coll_send(buf, sent, COLL_INT32, 1, comm);
        printf("rank 0: send of %zu elements against a receive of %zu: %s after %.2f s\n", sent,
               expected, coll_strerror(st), coll_time_s() - t0);
        /* ib: the receiver's failed endpoint takes the connection down under the send */
        ASSERT_TRUE(st == COLL_OK || st == COLL_ERR_REMOTE || st == COLL_ERR_TRANSPORT);
        ASSERT_TRUE(coll_time_s() - t0 < 2.5); /* not its timeout (3 s) */
    } else {
        double        t0 = coll_time_s();
        coll_result_t st = coll_recv(buf, expected, COLL_INT32, 0, comm);
        printf("rank 1: recv of %zu elements against a send of %zu: %s after %.2f s\n", expected,
               sent, coll_strerror(st), coll_time_s() - t0);
        ASSERT_EQ(st, COLL_ERR_MISMATCH);
        ASSERT_TRUE(coll_time_s() - t0 < 2.5); /* not the timeout's diagnosis */
    }
    free(buf);
    return 0;
}

int main(void)
{
    const char      *tps[8];
    int              ntp = coll_test_transports(tps, 8), failed = 0, total = 0;
    static const int counts[] = {1, 2, 3, 5, 8};
    for (int t = 0; t < ntp; t++) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            coll_test_opts_t o = {
                .nranks = counts[i], .want_comm = 1, .timeout_s = 120, .transport = tps[t]};
            int rc = coll_test_run_ranks(&o, p2p_rank, NULL);
            printf("%s: p2p over %s, %d ranks\n", rc ? "FAIL" : "PASS", tps[t], counts[i]);
            total++;
            failed += rc != 0;
        }
    }
    for (int t = 0; t < ntp; t++) {
        for (int nr = 2; nr <= 3; nr++) {
            coll_test_opts_t o = {
                .nranks = nr, .want_comm = 1, .timeout_s = 120, .transport = tps[t]};
            int rc = coll_test_run_ranks(&o, many_rank, NULL);
            printf("%s: %d sends, receives and all-reduces outstanding over %s, %d ranks\n",
                   rc ? "FAIL" : "PASS", NMANY * 2 + NMANY / 16, tps[t], nr);
            total++;
            failed += rc != 0;
        }
    }
    for (int t = 0; t < ntp; t++) {
        for (int c = 0; c < (int)NMISMATCH; c++) {
            coll_test_opts_t o  = {.nranks      = 2,
                                   .want_comm   = 1,
                                   .timeout_s   = 60,
                                   .transport   = tps[t],
                                   .before_comm = short_timeout};
            int              rc = coll_test_run_ranks(&o, mismatch_rank, &c);
            printf("%s: send of %zu elements into a receive of %zu over %s\n", rc ? "FAIL" : "PASS",
                   mismatch_counts[c][0], mismatch_counts[c][1], tps[t]);
            total++;
            failed += rc != 0;
        }
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0;
}
