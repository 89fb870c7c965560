/* SPDX-License-Identifier: MIT */
/*
 * Reuse of the shared windows across calls, over shm with the one-shot and two-shot
 * all-reduces forced, and with the tuner's choice (small blocking calls then go through the
 * small-call slots, src/engine/small.c, all-reduces up to COLL_SMALL_MAX, 1 KiB: 256 int32 do,
 * 257 do not): hundreds of
 * back-to-back calls whose sizes vary (some too large for the window, which fall back to another
 * algorithm between window calls), ranks that drift out of step, other collectives in between, and
 * several non-blocking all-reduces outstanding at once, waited for in reverse order, and blocking
 * calls made while non-blocking ones are in flight. Every call's inputs depend on the call, so data
 * left from an earlier call or overwritten too early shows as a wrong element. Usage: test_window
 * [-n N]
 */
#include "coll_test.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOUT 5 /* non-blocking calls outstanding at once */

static const size_t sizes[] = {1, 5, 100, 1000, 4099, 60000, 250000, 300000, 0, 17, 256, 257};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int32_t input(int rank, int call, size_t i)
{
    return (int32_t)((rank + 1) * 7 + (int)(i % 1009) * 3 + call * 11);
}

/* The sum over n ranks of input(r, call, i). */
static int32_t expect(int n, int call, size_t i)
{
    int32_t sum = 0;
    for (int r = 0; r < n; r++) {
        sum += input(r, call, i);
    }
    return sum;
}

static void fill(int32_t *buf, size_t count, int rank, int call)
{
    for (size_t i = 0; i < count; i++) {
        buf[i] = input(rank, call, i);
    }
}

static size_t check(const int32_t *buf, size_t count, int n, int call, int rank)
{
    for (size_t i = 0; i < count; i++) {
        if (buf[i] != expect(n, call, i)) {
            fprintf(stderr, "rank %d: call %d (%zu elements): [%zu] = %d, expected %d\n", rank,
                    call, count, i, (int)buf[i], (int)expect(n, call, i));
            return 1;
        }
    }
    return 0;
}

/* Some ranks arrive late, differently each call. */
static void drift(int rank, int call)
{
    for (int k = 0; k < (rank * 5 + call) % 7; k++) {
        sched_yield();
    }
}

/* Blocking calls back to back, with an all-gather now and then. */
static size_t run_blocking(int rank, int n, coll_comm_t *comm, int32_t *in, int32_t *out)
{
    size_t wrong = 0;
    for (int call = 0; call < 300; call++) {
        size_t count    = sizes[(size_t)call * 7 % NSIZES];
        int    in_place = call % 3 == 0;
        fill(in_place ? out : in, count, rank, call);
        drift(rank, call);
        ASSERT_OK(coll_allreduce(in_place ? out : in, out, count, COLL_INT32, COLL_SUM, comm));
        wrong += check(out, count, n, call, rank);
        if (call % 37 == 0) {
            int32_t mine = rank, all[64];
            ASSERT_OK(coll_allgather(&mine, all, 1, COLL_INT32, comm));
            for (int r = 0; r < n; r++) {
                wrong += all[r] != r;
            }
        }
    }
    return wrong;
}

/* NOUT non-blocking calls at once (each its own buffers), waited for in reverse order. */
static size_t run_overlapped(int rank, int n, coll_comm_t *comm, int32_t **in, int32_t **out)
{
    size_t wrong = 0;
    for (int round = 0; round < 40; round++) {
        coll_request_t *reqs[NOUT];
        size_t          counts[NOUT];
        for (int k = 0; k < NOUT; k++) {
            int call  = 1000 + round * NOUT + k;
            counts[k] = sizes[(size_t)(round + 3 * k) % NSIZES];
            fill(in[k], counts[k], rank, call);
            ASSERT_OK(
                coll_iallreduce(in[k], out[k], counts[k], COLL_INT32, COLL_SUM, comm, &reqs[k]));
            drift(rank, call);
        }
        for (int k = NOUT - 1; k >= 0; k--) {
            ASSERT_OK(coll_wait(reqs[k]));
        }
        for (int k = 0; k < NOUT; k++) {
            wrong += check(out[k], counts[k], n, 1000 + round * NOUT + k, rank);
        }
    }
    return wrong;
}

/* A large non-blocking call in flight while small blocking ones run (and must keep it going). */
static size_t run_mixed(int rank, int n, coll_comm_t *comm, int32_t **in, int32_t **out)
{
    size_t wrong = 0;
    for (int round = 0; round < 20; round++) {
        coll_request_t *req;
        int             big = 2000 + round * 10;
        fill(in[1], 250000, rank, big);
        ASSERT_OK(coll_iallreduce(in[1], out[1], 250000, COLL_INT32, COLL_SUM, comm, &req));
        for (int k = 1; k <= 5; k++) {
            size_t count = sizes[(size_t)(round + k) % NSIZES] % 300;
            fill(in[0], count, rank, big + k);
            drift(rank, big + k);
            ASSERT_OK(coll_allreduce(in[0], out[0], count, COLL_INT32, COLL_SUM, comm));
            wrong += check(out[0], count, n, big + k, rank);
        }
        ASSERT_OK(coll_wait(req));
        wrong += check(out[1], 250000, n, big, rank);
    }
    return wrong;
}

static int rank_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t   max = 0, wrong;
    int32_t *in[NOUT], *out[NOUT];
    (void)arg;
    for (size_t s = 0; s < NSIZES; s++) {
        max = sizes[s] > max ? sizes[s] : max;
    }
    for (int k = 0; k < NOUT; k++) {
        in[k]  = malloc(max * sizeof(int32_t));
        out[k] = malloc(max * sizeof(int32_t));
        ASSERT_TRUE(in[k] != NULL && out[k] != NULL);
    }
    wrong = run_blocking(rank, n, comm, in[0], out[0]);
    wrong += run_overlapped(rank, n, comm, in, out);
    wrong += run_mixed(rank, n, comm, in, out);
    for (int k = 0; k < NOUT; k++) {
        free(in[k]);
        free(out[k]);
    }
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %zu wrong results\n", rank, wrong);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const algos[]  = {"allreduce:oneshot", "allreduce:twoshot", "auto"};
    static const int         counts[] = {2, 3, 5, 8};
    int                      only_n = 0, failed = 0, total = 0;

    if (argc == 3 && strcmp(argv[1], "-n") == 0) {
        only_n = atoi(argv[2]);
    }
    if (!coll_test_has_transport("shm")) {
        printf("SKIP: shared windows need the shm transport (COLL_TEST_TRANSPORTS)\n");
        return COLL_TEST_SKIP;
    }
    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        setenv("COLL_ALGO", algos[a], 1);
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            if (only_n > 0 && counts[i] != only_n) {
                continue;
            }
            coll_test_opts_t o = {
                .nranks = counts[i], .want_comm = 1, .timeout_s = 300, .transport = "shm"};
            int rc = coll_test_run_ranks(&o, rank_main, NULL);
            printf("%s: window reuse, %s, %d ranks\n", rc ? "FAIL" : "PASS", algos[a], counts[i]);
            fflush(stdout);
            failed += rc != 0;
            total++;
        }
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0;
}
