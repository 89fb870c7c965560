/* SPDX-License-Identifier: MIT */
/*
 * Small blocking all-gathers and reduce-scatters on the small-call slots (src/engine/small.c):
 *   (a) at 2-5 ranks, over every tested transport: counts whose input (a reduce-scatter's whole
 *       input) holds 1 element up to exactly COLL_SMALL_AGRS_MAX bytes (32k, the slots' size)
 *       and one element past it (the engine, or cross-memory attach), in place and out of place,
 *       float sum, int32 max and double avg, between all-reduces of the slots; exact values and
 *       untouched bytes past the output on every call;
 *   (b) over shm both calls do take the slots, with COLL_SMALL_MAX=0 too (that one is the
 *       all-reduces'), up to an input of COLL_SMALL_AGRS_MAX bytes: a blocking all-gather
 *       or reduce-scatter against a non-blocking one on the other rank is reported as a
 *       mismatch "on the small-call slots" (over tcp, and with COLL_SMALL_AGRS_MAX=0, the two
 *       calls meet and return the right result);
 *   (c) COLL_SMALL_AGRS_MAX=0: the same sweep, exact, through the engine;
 *   (d) over shm, ranks whose COLL_SMALL_AGRS_MAX differ (one on the slots, one on the direct
 *       path, whose rounds use the slots too) get a mismatch naming the parameters, not data.
 *       Communicator creation refuses ranks that differ there (test_agree); rank 0 changes its
 *       value after it, as only a test can, to reach the call-time report behind that check.
 */
#include "coll_test.h"
#include "param.h"

#include <stdint.h>
#include <string.h>

#define GUARD      64
#define GUARD_BYTE 0x5a
#define SMALL_MAX  32768 /* COLL_SMALL_AGRS_MAX's default, set by the driver */

typedef enum { S_ALLGATHER, S_REDUCE_SCATTER } small_coll_t;

typedef struct {
    coll_dtype_t dt;
    coll_redop_t op;
    size_t       es;
} small_type_t;

static const small_type_t small_types[] = {
    {COLL_FLOAT32, COLL_SUM, 4}, {COLL_INT32, COLL_MAX, 4}, {COLL_FLOAT64, COLL_AVG, 8}};

/* Rank r's element i at call k: small integers, exact in every type used. */
static double small_input(int rank, int call, size_t i)
{
    return (double)((i * 5 + (size_t)rank * 11 + (size_t)call * 3) % 53) - 26.0;
}

static void small_put(const small_type_t *t, void *buf, size_t i, double v)
{
    if (t->dt == COLL_FLOAT32) {
        ((float *)buf)[i] = (float)v;
    } else if (t->dt == COLL_FLOAT64) {
        ((double *)buf)[i] = v;
    } else {
        ((int32_t *)buf)[i] = (int32_t)v;
    }
}

static double small_get(const small_type_t *t, const void *buf, size_t i)
{
    return t->dt == COLL_FLOAT32   ? ((const float *)buf)[i]
           : t->dt == COLL_FLOAT64 ? ((const double *)buf)[i]
                                   : ((const int32_t *)buf)[i];
}

static double small_reduced(const small_type_t *t, int n, int call, size_t i)
{
    double acc = small_input(0, call, i);
    for (int r = 1; r < n; r++) {
        double v = small_input(r, call, i);
        acc      = t->op == COLL_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return t->op == COLL_AVG ? acc / n : acc;
}

/* One call of count elements per rank block; returns the wrong elements and touched guard
 * bytes. */
static size_t small_one(coll_comm_t *comm, int rank, int n, small_coll_t c, const small_type_t *t,
                        size_t count, int in_place, int call)
{
    size_t total = count * (size_t)n * t->es, wrong = 0;
    char  *sbuf = malloc(total + GUARD), *rbuf = malloc(total + GUARD);
    char  *in, *out;

    ASSERT_TRUE(sbuf != NULL && rbuf != NULL);
    memset(sbuf, GUARD_BYTE, total + GUARD);
    memset(rbuf, GUARD_BYTE, total + GUARD);
    if (c == S_ALLGATHER) { /* input: count elements; in place at the own block of rbuf */
        in  = in_place ? rbuf + (size_t)rank * count * t->es : sbuf;
        out = rbuf;
        for (size_t i = 0; i < count; i++) {
            small_put(t, in, i, small_input(rank, call, i));
        }
        ASSERT_OK(coll_allgather(in, out, count, t->dt, comm));
        for (size_t i = 0; i < count * (size_t)n; i++) {
            double want = small_input((int)(i / count), call, i % count);
            wrong += small_get(t, out, i) != want;
        }
    } else { /* input: n blocks; in place the output is the own block of it */
        in  = in_place ? rbuf : sbuf;
        out = in_place ? rbuf + (size_t)rank * count * t->es : rbuf;
        for (size_t i = 0; i < count * (size_t)n; i++) {
            small_put(t, in, i, small_input(rank, call, i));
        }
        ASSERT_OK(coll_reduce_scatter(in, out, count, t->dt, t->op, comm));
        for (size_t i = 0; i < count; i++) {
            double want = small_reduced(t, n, call, (size_t)rank * count + i);
            double got  = small_get(t, out, i);
            double tol  = t->op == COLL_AVG ? 1e-12 * (want < 0 ? -want : want) + 1e-12 : 0.0;
            wrong += got - want > tol || want - got > tol;
        }
    }
    /* nothing written past the output: an out-of-place reduce-scatter's is count elements */
    size_t end = c == S_REDUCE_SCATTER && !in_place ? count * t->es : total;
    for (size_t i = end; i < total + GUARD; i++) {
        wrong += (unsigned char)rbuf[i] != GUARD_BYTE;
    }
    for (size_t i = 0; i < GUARD; i++) {
        wrong += (unsigned char)sbuf[total + i] != GUARD_BYTE;
    }
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %s of %zu x %s, in place %d, call %d: %zu wrong\n", rank,
                c == S_ALLGATHER ? "allgather" : "reduce_scatter", count,
                t->dt == COLL_FLOAT32 ? "f32"
                : t->dt == COLL_INT32 ? "i32"
                                      : "f64",
                in_place, call, wrong);
    }
    free(sbuf);
    free(rbuf);
    return wrong;
}

/* (a), (c) */
static int small_sweep(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t wrong = 0;
    int    call  = 0;
    (void)arg;

    for (int c = 0; c < 2; c++) {
        for (size_t k = 0; k < sizeof(small_types) / sizeof(small_types[0]); k++) {
            const small_type_t *t = &small_types[k];
            /* the input's bytes: count * es (all-gather), count * n * es (reduce-scatter) */
            size_t per      = c == S_ALLGATHER ? t->es : t->es * (size_t)n;
            size_t counts[] = {1, 3, SMALL_MAX / per - 1, SMALL_MAX / per, SMALL_MAX / per + 1};
            for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
                for (int ip = 0; ip < 2; ip++) {
                    int32_t x = rank + call, y = 0; /* an all-reduce of the slots between */
                    wrong += small_one(comm, rank, n, (small_coll_t)c, t, counts[j], ip, call++);
                    ASSERT_OK(coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm));
                    ASSERT_EQ(y, n * (n - 1) / 2 + n * (call - 1));
                }
            }
        }
    }
    ASSERT_EQ(wrong, 0);
    return 0;
}

/* (b): rank 0 non-blocking, rank 1 blocking; arg "slots" or "meet", then "ag" or "rs", and
 * "max" for an input of exactly SMALL_MAX bytes at 2 ranks (else 8 elements per block) */
static int small_mix(int rank, int n, coll_comm_t *comm, void *arg)
{
    const char     *how   = arg; /* "slots": the mismatch report wanted; else the calls meet */
    int             rs    = strstr(how, "rs") != NULL;
    size_t          count = strstr(how, "max") == NULL ? 8 : SMALL_MAX / 4 / (rs ? 2 : 1);
    int32_t        *in = malloc(2 * count * 4), *out = malloc(2 * count * 4);
    coll_request_t *req = NULL;
    coll_result_t   st;
    char            want[160];
    (void)n;

    ASSERT_TRUE(in != NULL && out != NULL);
    for (size_t i = 0; i < 2 * count; i++) {
        in[i] = rank * 100000 + (int32_t)i;
    }
    if (rank == 0) {
        ASSERT_OK(rs ? coll_ireduce_scatter(in, out, count, COLL_INT32, COLL_SUM, comm, &req)
                     : coll_iallgather(in, out, count, COLL_INT32, comm, &req));
        st = coll_wait(req);
    } else {
        st = rs ? coll_reduce_scatter(in, out, count, COLL_INT32, COLL_SUM, comm)
                : coll_allgather(in, out, count, COLL_INT32, comm);
    }
    if (strncmp(how, "slots", 5) != 0) {
        ASSERT_OK(st);
        for (size_t i = 0; i < (rs ? count : 2 * count); i++) { /* rs: block rank of both */
            int32_t w = rs ? 100000 + 2 * (int32_t)((size_t)rank * count + i)
                           : (int32_t)(i / count) * 100000 + (int32_t)(i % count);
            ASSERT_EQ(out[i], w);
        }
    } else {
        ASSERT_EQ(st, COLL_ERR_MISMATCH);
        snprintf(want, sizeof(want),
                 "rank 1 called %s(%zu x i32%s) blocking, on the small-call slots",
                 rs ? "reduce_scatter" : "allgather", count, rs ? ", sum" : "");
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), want);
    }
    free(in);
    free(out);
    return 0;
}

/* (d): rank 0 lets no all-gather on the slots (COLL_SMALL_AGRS_MAX=0: cross-memory attach,
 * whose rounds are on the slots too), the others keep 32k: a mismatch, not the other path's
 * description taken for input */
static int small_disagree(int rank, int n, coll_comm_t *comm, void *arg)
{
    int32_t       in[1024], out[2048];
    coll_result_t st;
    (void)n;
    (void)arg;

    if (rank == 0) {
        setenv("COLL_SMALL_AGRS_MAX", "0", 1);
        coll_params_reset_for_testing();
    }
    for (int i = 0; i < 1024; i++) {
        in[i] = rank * 10000 + i;
    }
    st = coll_allgather(in, out, 1024, COLL_INT32, comm);
    printf("rank %d: %s: %s\n", rank, coll_strerror(st), coll_comm_last_error(comm));
    fflush(stdout);
    ASSERT_EQ(st, COLL_ERR_MISMATCH);
    ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "COLL_SMALL_AGRS_MAX differ");
    return 0;
}

static int small_run(const char *what, const char *tp, int n, coll_test_rank_fn_t fn, void *arg)
{
    coll_test_opts_t o  = {.nranks = n, .want_comm = 1, .timeout_s = 60, .transport = tp};
    int              rc = coll_test_run_ranks(&o, fn, arg);
    printf("%s: %s over %s, %d ranks\n", rc ? "FAIL" : "PASS", what, tp, n);
    fflush(stdout);
    return rc != 0;
}

int main(void)
{
    const char *tps[8];
    int         ntp = coll_test_transports(tps, 8), failed = 0;

    unsetenv("COLL_ALGO");
    setenv("COLL_SMALL_MAX", "1k", 1);
    setenv("COLL_SMALL_AGRS_MAX", "32k", 1);
    for (int t = 0; t < ntp; t++) {
        for (int n = 2; n <= 5; n++) {
            failed += small_run("(a) small all-gathers and reduce-scatters", tps[t], n, small_sweep,
                                NULL);
        }
        int shm = strcmp(tps[t], "shm") == 0;
        setenv("COLL_TIMEOUT", "1", 1);
        setenv("COLL_SMALL_MAX", "0", 1);
        failed += small_run("(b) blocking against non-blocking all-gather", tps[t], 2, small_mix,
                            shm ? "slots ag" : "meet ag");
        failed += small_run("(b) blocking against non-blocking reduce-scatter", tps[t], 2,
                            small_mix, shm ? "slots rs" : "meet rs");
        setenv("COLL_DIRECT_CMA", "0", 1); /* its rounds are on the slots too: not the path */
        failed += small_run("(b) the same at the slots' largest input", tps[t], 2, small_mix,
                            shm ? "slots ag max" : "meet ag max");
        failed += small_run("(b) the same at the slots' largest input", tps[t], 2, small_mix,
                            shm ? "slots rs max" : "meet rs max");
        unsetenv("COLL_DIRECT_CMA");
        setenv("COLL_SMALL_AGRS_MAX", "0", 1);
        failed +=
            small_run("(b) all-gather with COLL_SMALL_AGRS_MAX=0", tps[t], 2, small_mix, "meet ag");
        failed += small_run("(b) reduce-scatter with COLL_SMALL_AGRS_MAX=0", tps[t], 2, small_mix,
                            "meet rs");
        unsetenv("COLL_TIMEOUT");
        setenv("COLL_SMALL_MAX", "1k", 1);
        failed += small_run("(c) COLL_SMALL_AGRS_MAX=0", tps[t], 3, small_sweep, NULL);
        setenv("COLL_SMALL_AGRS_MAX", "32k", 1);
        if (shm) {
            setenv("COLL_TIMEOUT", "1", 1);
            failed += small_run("(d) ranks whose COLL_SMALL_AGRS_MAX differ", tps[t], 2,
                                small_disagree, NULL);
            unsetenv("COLL_TIMEOUT");
        }
    }
    printf("%s\n", failed ? "FAIL" : "PASS");
    return failed != 0;
}
