/* SPDX-License-Identifier: MIT */
/*
 * Shareable memory (coll_mem_alloc) and registered buffers (coll_comm_register) over shm on one
 * host: blocking all-reduces, reduce-scatters and all-gathers whose buffers are registered on
 * every rank take the direct path (read from the library's info log: "direct, registered
 * buffers", once per communicator and collective), and give the exact expected results, in and
 * out of place, with nothing written next to the output; a buffer that is not
 * registered on one rank, non-blocking calls, deregistered memory and COLL_DIRECT=0 do not take
 * the registered path (the engine, or cross-memory attach: tests/mp/test_direct_cma); argument
 * errors, and one rank's bad buffer failing the registration on every rank; a rank killed inside a
 * direct all-reduce makes the others fail within COLL_TIMEOUT; ranks that deregister at different
 * points get a mismatch; pushing (the default) and reading (COLL_DIRECT_PUSH=0), plain and
 * non-temporal copies, and the reductions streamed out of place where the outputs are 16-byte
 * aligned ("direct, reduced and streamed"). It does not measure speed. Longer than the style's 800
 * lines: one program for the whole feature, whose cases share the buffers, the log counting and the
 * expected values. Usage: test_register [-n N]
 */
#include "coll_test.h"
#include "mp_data.h"

#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define GUARD     64 /* bytes checked on each side of an output */
#define RECV_SKEW 68 /* the receive region starts this far past a page boundary */
/* ... unless a run asks for another (64: 16-byte aligned, for the streamed reductions) */
static size_t reg_recv_skew = RECV_SKEW;
#define DIRECT_MARK "direct, registered buffers"
#define STREAM_MARK "direct, reduced and streamed" /* reductions with non-temporal stores */

typedef enum { REG_ALLREDUCE, REG_REDUCE_SCATTER, REG_ALLGATHER, REG_NCOLLS } reg_coll_t;

static const char *const reg_coll_names[] = {"allreduce", "reduce_scatter", "allgather"};

/* Totals of case (a): the all-reduce count; reduce-scatter and all-gather use count / n + 1 per
 * rank, so no size is a multiple of a page or of the rank count. */
static const size_t reg_counts[] = {257, 1000, 4099, 65536, 300000, 1u << 20};
#define REG_NCOUNTS (sizeof(reg_counts) / sizeof(reg_counts[0]))
#define REG_MAXEL   ((size_t)(1u << 20))

/* One call: which collective, its type, operator and per-rank count, and the call number the
 * inputs depend on (so data left from another call shows as wrong elements). */
typedef struct {
    reg_coll_t   coll;
    coll_dtype_t dt;
    coll_redop_t op;
    size_t       count; /* all-reduce: count; reduce-scatter: recvcount; all-gather: sendcount */
    int          in_place;
    int          call;
} reg_case_t;

/* A send region and a receive region; the receive region has GUARD spare bytes on each side. */
typedef struct {
    char  *base;  /* what coll_mem_alloc or malloc returned */
    size_t bytes; /* of the allocation */
    char  *send;
    char  *recv;
    int    shared; /* 1: from coll_mem_alloc */
} reg_bufs_t;

static double reg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- test data ---- */

/* Element i of rank's input in call `call`: int32 sums get large call-dependent values, other
 * types mp_data's small integers (exact in every type) shifted by the call. */
static double reg_input(coll_dtype_t dt, coll_redop_t op, int rank, int call, size_t i)
{
    if (dt == COLL_INT32 && op == COLL_SUM) {
        return (double)((rank + 1) * 7 + (int)(i % 1009) * 3 + call * 11);
    }
    return mp_input(op, rank, i + (size_t)call * 131);
}

/* op over ranks 0..n-1 of reg_input, as the library computes it in dt. */
static double reg_reduced(coll_dtype_t dt, coll_redop_t op, int n, int call, size_t i)
{
    if (dt == COLL_INT32 && op == COLL_SUM) {
        return (double)(7 * n * (n + 1) / 2 + n * ((int)(i % 1009) * 3 + call * 11));
    }
    return mp_expect(dt, op, n, i + (size_t)call * 131);
}

/* Expected element idx of rank's output. */
static double reg_expect(const reg_case_t *c, int rank, int n, size_t idx)
{
    switch (c->coll) {
    case REG_REDUCE_SCATTER:
        return reg_reduced(c->dt, c->op, n, c->call, (size_t)rank * c->count + idx);
    case REG_ALLGATHER:
        return reg_input(c->dt, COLL_SUM, (int)(idx / c->count), c->call, idx % c->count);
    default:
        return reg_reduced(c->dt, c->op, n, c->call, idx);
    }
}

static void reg_sizes(const reg_case_t *c, int n, size_t *in_p, size_t *out_p)
{
    *in_p  = c->coll == REG_REDUCE_SCATTER ? c->count * (size_t)n : c->count;
    *out_p = c->coll == REG_ALLGATHER ? c->count * (size_t)n : c->count;
}

static void reg_fill(const reg_case_t *c, char *buf, size_t in_n, int rank)
{
    coll_redop_t op = c->coll == REG_ALLGATHER ? COLL_SUM : c->op;
    for (size_t i = 0; i < in_n; i++) {
        mp_store(c->dt, buf, i, reg_input(c->dt, op, rank, c->call, i));
    }
}

static const char *reg_describe(const reg_case_t *c, int n, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s/%s count %zu %s call %d (%d ranks)", reg_coll_names[c->coll],
             coll_dtype_name(c->dt), coll_redop_name(c->op), c->count,
             c->in_place ? "in place" : "out of place", c->call, n);
    return buf;
}

/* Drift the ranks apart a little, differently for each call. */
static void reg_drift(int rank, int call)
{
    for (int k = 0; k < (rank * 5 + call) % 7; k++) {
        sched_yield();
    }
}

/* ---- the library's info log: lines saying the direct path ran ---- */

/* Lines of this process' log that contain DIRECT_MARK. */
static int reg_log_count(void)
{
    return coll_test_log_count(DIRECT_MARK);
}

/* Direct-path lines logged since `before` (a reg_log_count value), summed over the ranks of
 * comm, so it does not matter which ranks log them. The sum's own 4-byte all-reduce uses
 * unregistered memory and cannot add one. */
static int reg_direct_since(coll_comm_t *comm, int before, int rank, const char *what)
{
    int32_t       local = (int32_t)(reg_log_count() - before), total = -1;
    coll_result_t st = coll_allreduce(&local, &total, 1, COLL_INT32, COLL_SUM, comm);
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s: summing the log lines failed: %s\n", rank, what,
                coll_strerror(st));
        ASSERT_OK(st);
    }
    return total;
}

/* ---- buffers ---- */

/* Room for maxel elements of up to 4 bytes in each region. shared: one coll_mem_alloc
 * allocation, the send region at offset 0, the receive region RECV_SKEW bytes past a page;
 * otherwise plain malloc memory laid out the same way. */
static void reg_bufs_alloc(reg_bufs_t *b, size_t maxel, int shared)
{
    size_t region = (maxel * 4 + GUARD + 63) / 64 * 64;
    size_t page   = (size_t)sysconf(_SC_PAGESIZE);
    size_t roff   = (region + GUARD + page - 1) / page * page + reg_recv_skew;
    b->bytes      = roff + region + GUARD;
    b->shared     = shared;
    if (shared) {
        void *p = NULL;
        ASSERT_OK(coll_mem_alloc(&p, b->bytes));
        b->base = p;
    } else {
        b->base = malloc(b->bytes);
        ASSERT_TRUE(b->base != NULL);
    }
    b->send = b->base;
    b->recv = b->base + roff;
}

static void reg_bufs_free(reg_bufs_t *b)
{
    if (b->shared) {
        ASSERT_OK(coll_mem_free(b->base));
    } else {
        free(b->base);
    }
    memset(b, 0, sizeof(*b));
}

/* ---- one call, checked ---- */

static coll_result_t reg_start(coll_comm_t *comm, const reg_case_t *c, const void *s, void *r,
                               coll_request_t **req_p)
{
    if (req_p == NULL) {
        switch (c->coll) {
        case REG_REDUCE_SCATTER:
            return coll_reduce_scatter(s, r, c->count, c->dt, c->op, comm);
        case REG_ALLGATHER:
            return coll_allgather(s, r, c->count, c->dt, comm);
        default:
            return coll_allreduce(s, r, c->count, c->dt, c->op, comm);
        }
    }
    switch (c->coll) {
    case REG_REDUCE_SCATTER:
        return coll_ireduce_scatter(s, r, c->count, c->dt, c->op, comm, req_p);
    case REG_ALLGATHER:
        return coll_iallgather(s, r, c->count, c->dt, comm, req_p);
    default:
        return coll_iallreduce(s, r, c->count, c->dt, c->op, comm, req_p);
    }
}

static size_t reg_guard_check(const char *g, const char *where, const char *what, int rank)
{
    for (int k = 0; k < GUARD; k++) {
        if ((unsigned char)g[k] != 0xa5) {
            fprintf(stderr, "rank %d: %s: byte %d %s the output was written\n", rank, what, k,
                    where);
            return 1;
        }
    }
    return 0;
}

/*
 * One call with the send region sreg and the receive region rreg (in place: rreg holds both,
 * as NCCL places them). Checks every output element, the GUARD bytes before and after the
 * buffer that holds the output, and (out of place) that the send buffer is unchanged. Returns
 * the number of wrong things.
 */
static size_t reg_run(coll_comm_t *comm, int rank, int n, const reg_case_t *c, char *sreg,
                      char *rreg, int nonblocking)
{
    size_t in_n, out_n, wrong = 0, esz = coll_dtype_size(c->dt);
    char   what[160];
    reg_sizes(c, n, &in_n, &out_n);
    size_t span = (c->in_place ? (in_n > out_n ? in_n : out_n) : out_n) * esz;
    char  *send = sreg, *recv = rreg, *out = rreg;
    reg_describe(c, n, what, sizeof(what));
    if (!c->in_place) {
        reg_fill(c, send, in_n, rank);
    } else if (c->coll == REG_REDUCE_SCATTER) {
        reg_fill(c, rreg, in_n, rank);
        send = rreg;
        recv = out = rreg + (size_t)rank * c->count * esz;
    } else if (c->coll == REG_ALLGATHER) {
        send = rreg + (size_t)rank * c->count * esz;
        reg_fill(c, send, in_n, rank);
    } else {
        reg_fill(c, rreg, in_n, rank);
        send = rreg;
    }
    memset(rreg - GUARD, 0xa5, GUARD);
    memset(rreg + span, 0xa5, GUARD);
    reg_drift(rank, c->call);
    coll_request_t *req = NULL;
    coll_result_t   st  = reg_start(comm, c, send, recv, nonblocking ? &req : NULL);
    if (st == COLL_OK && nonblocking) {
        st = coll_wait(req);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, what, coll_strerror(st),
                coll_comm_last_error(comm));
        ASSERT_OK(st);
    }
    for (size_t i = 0; i < out_n; i++) {
        double want = reg_expect(c, rank, n, i), got = mp_load(c->dt, out, i);
        if (!(got == want)) {
            if (wrong == 0) {
                fprintf(stderr, "rank %d: %s: element %zu of %zu is %g, expected %g\n", rank, what,
                        i, out_n, got, want);
            }
            wrong++;
        }
    }
    wrong += reg_guard_check(rreg - GUARD, "before", what, rank);
    wrong += reg_guard_check(rreg + span, "after", what, rank);
    coll_redop_t op = c->coll == REG_ALLGATHER ? COLL_SUM : c->op;
    for (size_t i = 0; !c->in_place && i < in_n; i++) {
        if (mp_load(c->dt, send, i) != reg_input(c->dt, op, rank, c->call, i)) {
            fprintf(stderr, "rank %d: %s: send element %zu was changed\n", rank, what, i);
            wrong++;
            break;
        }
    }
    return wrong;
}

/* The per-rank count of collective coll for a total of `total` elements. */
static size_t reg_count_of(reg_coll_t coll, size_t total, int n)
{
    return coll == REG_ALLREDUCE ? total : total / (size_t)n + 1;
}

/* An int32 sum of collective coll for a total of `total` elements. */
static reg_case_t reg_sum(reg_coll_t coll, size_t total, int n, int in_place, int call)
{
    reg_case_t c = {coll, COLL_INT32, COLL_SUM, reg_count_of(coll, total, n), in_place, call};
    return c;
}

/* Every collective, in and out of place, over counts[0..ncounts) in int32 sums, from the send
 * region sreg into the receive region rreg; the number of direct-path lines each collective added,
 * summed over ranks, goes to lines[coll] when lines is not NULL. */
static size_t reg_sweep(coll_comm_t *comm, int rank, int n, const size_t *counts, size_t ncounts,
                        int reps, char *sreg, char *rreg, int *call, int *lines)
{
    size_t wrong = 0;
    for (int coll = 0; coll < REG_NCOLLS; coll++) {
        int before = reg_log_count();
        for (int rep = 0; rep < reps; rep++) {
            for (size_t s = 0; s < ncounts; s++) {
                for (int ip = 0; ip < 2; ip++) {
                    reg_case_t c = reg_sum((reg_coll_t)coll, counts[s], n, ip, (*call)++);
                    wrong += reg_run(comm, rank, n, &c, sreg, rreg, 0);
                }
            }
        }
        int total = reg_direct_since(comm, before, rank, reg_coll_names[coll]);
        if (lines != NULL) {
            lines[coll] = total;
        }
    }
    return wrong;
}

static void reg_report(int rank, const char *what, int n, size_t wrong)
{
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %s: %zu wrong\n", rank, what, wrong);
    } else if (rank == 0) {
        printf("  %d ranks: %s ok\n", n, what);
        fflush(stdout);
    }
}

/* ---- (a) every rank registered: the direct path, exact results ---- */

static size_t case_direct(int rank, int n, coll_comm_t *comm)
{
    reg_bufs_t  b;
    coll_reg_t *reg = NULL;
    size_t      wrong;
    int         call = 0, lines[REG_NCOLLS];
    reg_bufs_alloc(&b, REG_MAXEL + (size_t)n, 1);
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    ASSERT_TRUE(reg != NULL);
    /* the large counts twice, the others three times, alternating in and out of place */
    wrong = reg_sweep(comm, rank, n, reg_counts, 4, 3, b.send, b.recv, &call, lines);
    for (int coll = 0; coll < REG_NCOLLS; coll++) {
        if (lines[coll] < 1 || lines[coll] > n) { /* once per rank at most */
            fprintf(stderr, "rank %d: %s on registered buffers: %d \"%s\" lines in the logs\n",
                    rank, reg_coll_names[coll], lines[coll], DIRECT_MARK);
            wrong++;
        }
    }
    wrong +=
        reg_sweep(comm, rank, n, reg_counts + 4, REG_NCOUNTS - 4, 2, b.send, b.recv, &call, NULL);
    /* other types and operators, with exact expected values from mp_data */
    static const size_t totals[] = {4099, 65536};
    static const struct {
        coll_dtype_t dt;
        coll_redop_t op;
    } kinds[] = {{COLL_FLOAT16, COLL_SUM}, {COLL_BFLOAT16, COLL_MAX}, {COLL_FLOAT32, COLL_PROD},
                 {COLL_FLOAT32, COLL_AVG}, {COLL_INT32, COLL_MIN},    {COLL_FLOAT32, COLL_SUM}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (int coll = 0; coll < REG_NCOLLS; coll++) {
            for (size_t t = 0; t < 2; t++) {
                for (int ip = 0; ip < 2; ip++) {
                    reg_case_t c = {(reg_coll_t)coll,
                                    kinds[k].dt,
                                    kinds[k].op,
                                    reg_count_of((reg_coll_t)coll, totals[t], n),
                                    ip,
                                    call++};
                    if (coll == REG_ALLGATHER && kinds[k].op != COLL_SUM) {
                        continue;
                    }
                    wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
                }
            }
        }
    }
    /* at most 1 KiB: the small-call path, still on registered memory; and count 0 */
    reg_case_t small = {REG_ALLREDUCE, COLL_INT32, COLL_SUM, 256, 0, call++};
    wrong += reg_run(comm, rank, n, &small, b.send, b.recv, 0);
    small.in_place = 1;
    small.call     = call++;
    wrong += reg_run(comm, rank, n, &small, b.send, b.recv, 0);
    ASSERT_OK(coll_allreduce(b.send, b.recv, 0, COLL_INT32, COLL_SUM, comm));
    /* from COLL_DIRECT_STREAM_REDUCE_MIN written bytes the out-of-place all-reduces and
     * reduce-scatters were reduced and streamed where every output was 16-byte aligned, and
     * only there: one line for each of the two */
    const char *smin     = getenv("COLL_DIRECT_STREAM_REDUCE_MIN");
    int         streamed = coll_test_log_count(STREAM_MARK);
    if (smin != NULL && strcmp(smin, "4k") == 0 && streamed != (reg_recv_skew % 16 == 0 ? 2 : 0)) {
        fprintf(stderr, "rank %d: %d \"%s\" lines with outputs %zu bytes past a page (%s)\n", rank,
                streamed, STREAM_MARK, reg_recv_skew,
                reg_recv_skew % 16 == 0 ? "16-byte aligned: 2 expected" : "unaligned: 0 expected");
        wrong++;
    }
    ASSERT_OK(coll_comm_deregister(comm, reg));
    reg_bufs_free(&b);
    reg_report(rank, "(a) direct path, every collective and size", n, wrong);
    return wrong;
}

/* ---- (b) one rank's buffer not registered; non-blocking calls ---- */

static coll_comm_t *reg_fresh_comm(coll_comm_t *comm, int rank)
{
    coll_comm_t *sub = NULL;
    ASSERT_OK(coll_comm_split(comm, 0, rank, &sub));
    ASSERT_TRUE(sub != NULL);
    return sub;
}

/*
 * On a new communicator (no direct-path line logged yet): calls where rank 1's receive buffer,
 * or the last rank's send buffer, is plain malloc memory, and non-blocking calls on registered
 * memory, must log no direct-path line; then the same calls fully registered and blocking must
 * log one per collective, which shows the first ones would have been seen.
 */
static size_t case_mixed(int rank, int n, coll_comm_t *world)
{
    static const size_t counts[] = {4099, 65536};
    coll_comm_t        *comm     = reg_fresh_comm(world, rank);
    reg_bufs_t          b, plain;
    coll_reg_t         *reg   = NULL;
    size_t              wrong = 0;
    int                 call = 5000, before = reg_log_count();
    reg_bufs_alloc(&b, 65536 + (size_t)n, 1);
    reg_bufs_alloc(&plain, 65536 + (size_t)n, 0);
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    for (int coll = 0; coll < REG_NCOLLS; coll++) {
        for (size_t s = 0; s < 2; s++) {
            /* rank 1 receives into malloc memory, out of place or in place; the last rank
             * sends from it */
            for (int v = 0; v < 3; v++) {
                /* a reduce-scatter needs only the inputs registered, an all-gather the inputs
                 * or the outputs (case_one_side) */
                if ((v == 0 && coll == REG_REDUCE_SCATTER) || (v == 2 && coll == REG_ALLGATHER)) {
                    continue;
                }
                reg_case_t c    = reg_sum((reg_coll_t)coll, counts[s], n, v == 1, call++);
                char      *sreg = b.send, *rreg = b.recv;
                if (v < 2 && rank == 1) {
                    rreg = plain.recv;
                }
                if ((v == 2 || (v == 0 && coll == REG_ALLGATHER)) && rank == n - 1) {
                    sreg = plain.send; /* all-gather: neither all inputs nor all outputs */
                }
                wrong += reg_run(comm, rank, n, &c, sreg, rreg, 0);
            }
            reg_case_t c = reg_sum((reg_coll_t)coll, counts[s], n, (int)s, call++);
            wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 1); /* non-blocking */
        }
    }
    int lines = reg_direct_since(comm, before, rank, "mixed");
    if (lines != 0) {
        fprintf(stderr,
                "rank %d: calls with an unregistered buffer on one rank, or non-blocking, "
                "took the direct path (%d lines)\n",
                rank, lines);
        wrong++;
    }
    /* the positive control: the same collectives fully registered */
    for (int coll = 0; coll < REG_NCOLLS; coll++) {
        before       = reg_log_count();
        reg_case_t c = reg_sum((reg_coll_t)coll, 4099, n, 0, call++);
        wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
        if (reg_direct_since(comm, before, rank, reg_coll_names[coll]) < 1) {
            fprintf(stderr, "rank %d: %s fully registered after the mixed calls: no \"%s\"\n", rank,
                    reg_coll_names[coll], DIRECT_MARK);
            wrong++;
        }
    }
    /* a non-blocking call in flight while blocking ones run on registered memory: results only
     * (whether those take the direct path is the library's choice) */
    reg_case_t      big = {REG_ALLREDUCE, COLL_INT32, COLL_SUM, 65536, 0, call++};
    coll_request_t *req = NULL;
    reg_fill(&big, plain.send, big.count, rank);
    ASSERT_OK(coll_iallreduce(plain.send, plain.recv, big.count, COLL_INT32, COLL_SUM, comm, &req));
    for (int coll = 0; coll < REG_NCOLLS; coll++) {
        reg_case_t c = reg_sum((reg_coll_t)coll, 65536, n, coll == 1, call++);
        wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
    }
    ASSERT_OK(coll_wait(req));
    for (size_t i = 0; i < big.count; i++) {
        if (((int32_t *)plain.recv)[i] !=
            (int32_t)reg_reduced(COLL_INT32, COLL_SUM, n, big.call, i)) {
            fprintf(stderr, "rank %d: overlapped iallreduce: element %zu wrong\n", rank, i);
            wrong++;
            break;
        }
    }
    ASSERT_OK(coll_comm_deregister(comm, reg));
    reg_bufs_free(&b);
    reg_bufs_free(&plain);
    ASSERT_OK(coll_comm_destroy(comm));
    reg_report(rank, "(b) unregistered on one rank, non-blocking: normal path", n, wrong);
    return wrong;
}

/*
 * One side registered, each on a fresh communicator (the log line comes once per collective):
 * with rank 1's receive buffer in plain memory a reduce-scatter (its peers read inputs only)
 * and an all-gather (its peers read the inputs) go direct; with rank 1's send buffer in plain
 * memory a reduce-scatter does not, and an all-gather does where the ranks write into each
 * other's outputs (COLL_DIRECT_PUSH, the default).
 */
static size_t case_one_side(int rank, int n, coll_comm_t *world)
{
    const char *pe    = getenv("COLL_DIRECT_PUSH");
    int         push  = pe == NULL || strcmp(pe, "0") != 0;
    size_t      wrong = 0;
    int         call  = 7000;
    for (int side = 0; side < 2; side++) {
        coll_comm_t *comm = reg_fresh_comm(world, rank);
        reg_bufs_t   b, plain;
        coll_reg_t  *reg = NULL;
        reg_bufs_alloc(&b, 65536 + (size_t)n, 1);
        reg_bufs_alloc(&plain, 65536 + (size_t)n, 0);
        ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
        for (int coll = REG_REDUCE_SCATTER; coll <= REG_ALLGATHER; coll++) {
            int        before = reg_log_count();
            int        want   = side == 0 || (coll == REG_ALLGATHER && push);
            reg_case_t c      = reg_sum((reg_coll_t)coll, 65536, n, 0, call++);
            char      *sreg   = side == 1 && rank == 1 ? plain.send : b.send;
            char      *rreg   = side == 0 && rank == 1 ? plain.recv : b.recv;
            wrong += reg_run(comm, rank, n, &c, sreg, rreg, 0);
            int lines = reg_direct_since(comm, before, rank, reg_coll_names[coll]);
            if ((want && lines < 1) || (!want && lines != 0)) {
                fprintf(stderr,
                        "rank %d: %s with rank 1's %s buffer unregistered: %d \"%s\" "
                        "lines, expected %s\n",
                        rank, reg_coll_names[coll], side == 0 ? "receive" : "send", lines,
                        DIRECT_MARK, want ? "at least 1" : "0");
                wrong++;
            }
        }
        ASSERT_OK(coll_comm_deregister(comm, reg));
        reg_bufs_free(&b);
        reg_bufs_free(&plain);
        ASSERT_OK(coll_comm_destroy(comm));
    }
    reg_report(rank, "(b) reduce-scatter and all-gather with one side registered", n, wrong);
    return wrong;
}

/* ---- (c) two registrations, deregistered one by one ---- */

static size_t reg_one(coll_comm_t *comm, int rank, int n, reg_coll_t coll, int *call, char *s,
                      char *r)
{
    reg_case_t c = reg_sum(coll, 65536, n, 0, (*call)++);
    size_t     w = reg_run(comm, rank, n, &c, s, r, 0);
    c.in_place   = 1;
    c.call       = (*call)++;
    return w + reg_run(comm, rank, n, &c, s, r, 0);
}

/* Expect `want` direct-path lines (-1: at least one) since before. */
static size_t reg_expect_lines(coll_comm_t *comm, int rank, int before, int want, const char *what)
{
    int lines = reg_direct_since(comm, before, rank, what);
    if ((want < 0 && lines < 1) || (want >= 0 && lines != want)) {
        fprintf(stderr, "rank %d: %s: %d direct-path lines, expected %s\n", rank, what, lines,
                want < 0 ? "at least 1" : "0");
        return 1;
    }
    return 0;
}

static size_t case_two_regs(int rank, int n, coll_comm_t *world)
{
    coll_comm_t *comm = reg_fresh_comm(world, rank);
    reg_bufs_t   a, b;
    coll_reg_t  *ra = NULL, *rb = NULL;
    size_t       wrong = 0;
    int          call  = 9000, before;
    reg_bufs_alloc(&a, 65536 + (size_t)n, 1);
    reg_bufs_alloc(&b, 65536 + (size_t)n, 1);
    ASSERT_OK(coll_comm_register(comm, a.base, a.bytes, &ra));
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &rb));
    ASSERT_TRUE(ra != NULL && rb != NULL && ra != rb);
    before = reg_log_count();
    wrong += reg_one(comm, rank, n, REG_ALLREDUCE, &call, a.send, b.recv); /* across both */
    wrong += reg_one(comm, rank, n, REG_ALLREDUCE, &call, b.send, a.recv);
    wrong += reg_one(comm, rank, n, REG_ALLREDUCE, &call, a.send, a.recv);
    wrong += reg_expect_lines(comm, rank, before, -1, "(c) allreduce, two registrations");

    /* a deregistered: calls touching it take the normal path, calls inside b still direct */
    ASSERT_OK(coll_comm_deregister(comm, ra));
    before = reg_log_count();
    wrong += reg_one(comm, rank, n, REG_REDUCE_SCATTER, &call, a.send, a.recv);
    wrong += reg_expect_lines(comm, rank, before, 0, "(c) reduce_scatter on deregistered a");
    before = reg_log_count();
    wrong += reg_one(comm, rank, n, REG_REDUCE_SCATTER, &call, b.send, b.recv);
    wrong += reg_expect_lines(comm, rank, before, -1, "(c) reduce_scatter on b");

    /* none left: normal path everywhere */
    ASSERT_OK(coll_comm_deregister(comm, rb));
    before = reg_log_count();
    wrong += reg_one(comm, rank, n, REG_ALLGATHER, &call, a.send, a.recv);
    wrong += reg_one(comm, rank, n, REG_ALLGATHER, &call, b.send, b.recv);
    wrong += reg_one(comm, rank, n, REG_ALLREDUCE, &call, b.send, b.recv);
    wrong += reg_expect_lines(comm, rank, before, 0, "(c) allgather after deregistering all");

    /* registering a again brings the direct path back (so the zero above was meaningful) */
    ASSERT_OK(coll_comm_register(comm, a.base, a.bytes, &ra));
    before = reg_log_count();
    wrong += reg_one(comm, rank, n, REG_ALLGATHER, &call, a.send, a.recv);
    wrong += reg_expect_lines(comm, rank, before, -1, "(c) allgather on a registered again");
    ASSERT_OK(coll_comm_deregister(comm, ra));
    reg_bufs_free(&a);
    reg_bufs_free(&b);
    ASSERT_OK(coll_comm_destroy(comm));
    reg_report(rank, "(c) two registrations, deregistered one by one", n, wrong);
    return wrong;
}

/* ---- (d) argument errors ---- */

static void reg_local_errors(void)
{
    void  *p = (void *)&p, *q = NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = 3 * page + 1;
    ASSERT_EQ(coll_mem_alloc(NULL, 10), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_mem_alloc(&p, 0), COLL_ERR_INVALID_ARG);
    ASSERT_TRUE(p == (void *)&p); /* outputs only on success */
    ASSERT_OK(coll_mem_alloc(&q, bytes));
    ASSERT_TRUE(q != NULL);
    ASSERT_EQ((uintptr_t)q % page, 0);
    for (size_t i = 0; i < bytes; i++) {
        ASSERT_EQ(((unsigned char *)q)[i], 0);
    }
    memset(q, 0x3c, bytes);
    ASSERT_EQ(coll_mem_free((char *)q + 8), COLL_ERR_INVALID_ARG); /* not as returned */
    char *m = malloc(64);
    ASSERT_TRUE(m != NULL);
    ASSERT_EQ(coll_mem_free(m), COLL_ERR_INVALID_ARG);
    free(m);
    ASSERT_OK(coll_mem_free(q));
    ASSERT_OK(coll_mem_free(NULL));
}

/* A registration that must fail on every rank with the message naming bad_rank. */
static void reg_expect_reject(coll_comm_t *comm, int rank, void *buf, size_t bytes, int bad_rank)
{
    coll_reg_t   *reg = NULL;
    coll_result_t st  = coll_comm_register(comm, buf, bytes, &reg);
    char          want[32];
    snprintf(want, sizeof(want), "rank %d", bad_rank);
    if (st != COLL_ERR_INVALID_ARG) {
        fprintf(stderr, "rank %d: registration with rank %d's buffer bad returned %s\n", rank,
                bad_rank, coll_strerror(st));
    }
    ASSERT_EQ(st, COLL_ERR_INVALID_ARG);
    ASSERT_TRUE(reg == NULL);
    if (rank == 0) {
        ASSERT_STR_CONTAINS(coll_last_error(), want);
    }
    ASSERT_EQ(coll_comm_get_error(comm), COLL_OK);
}

static size_t case_errors(int rank, int n, coll_comm_t *world)
{
    coll_comm_t *comm = reg_fresh_comm(world, rank);
    reg_bufs_t   b, plain;
    coll_reg_t  *reg   = NULL;
    size_t       wrong = 0;
    int          call  = 12000;
    reg_local_errors();
    reg_bufs_alloc(&b, 4099 + (size_t)n, 1);
    reg_bufs_alloc(&plain, 4099 + (size_t)n, 0);
    /* rank 1 passes malloc memory */
    reg_expect_reject(comm, rank, rank == 1 ? plain.base : b.base, b.bytes, 1);
    /* the last rank's range runs past its allocation (past the page the allocation ends in,
     * in case the library counts whole pages) */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), over = (b.bytes + page - 1) / page * page + 1;
    reg_expect_reject(comm, rank, b.base, rank == n - 1 ? over : b.bytes, n - 1);
    /* every rank: 0 bytes, or no place for the registration */
    ASSERT_EQ(coll_comm_register(comm, b.base, 0, &reg), COLL_ERR_INVALID_ARG);
    ASSERT_TRUE(reg == NULL);
    ASSERT_EQ(coll_comm_register(comm, b.base, b.bytes, NULL), COLL_ERR_INVALID_ARG);
    /* the communicator still works, on the normal path */
    int        before = reg_log_count();
    reg_case_t c      = {REG_ALLREDUCE, COLL_INT32, COLL_SUM, 4099, 0, call++};
    wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
    wrong += reg_expect_lines(comm, rank, before, 0, "(d) allreduce after failed registrations");
    /* and no half-made registration is left behind: a good one matches on every rank */
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    before = reg_log_count();
    c.call = call++;
    wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
    wrong += reg_expect_lines(comm, rank, before, -1, "(d) allreduce after a good registration");
    ASSERT_OK(coll_comm_deregister(comm, reg));
    reg_bufs_free(&b);
    reg_bufs_free(&plain);
    ASSERT_OK(coll_comm_destroy(comm));
    reg_report(rank, "(d) argument errors", n, wrong);
    return wrong;
}

static int reg_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t wrong = 0;
    (void)arg;
    wrong += case_direct(rank, n, comm);
    wrong += case_mixed(rank, n, comm);
    wrong += case_one_side(rank, n, comm);
    wrong += case_two_regs(rank, n, comm);
    wrong += case_errors(rank, n, comm);
    return wrong != 0;
}

/* ---- (e) a rank killed inside a direct all-reduce ---- */

#define REG_TIMEOUT_S 2.0 /* COLL_TIMEOUT of that run */

static int reg_kill_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    int           victim = *(const int *)arg;
    size_t        count  = 1u << 18;
    reg_bufs_t    b;
    coll_reg_t   *reg = NULL;
    coll_result_t st  = COLL_OK;
    double        t0  = 0;
    reg_bufs_alloc(&b, count, 1);
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    for (int it = 0; it < 1000 && st == COLL_OK; it++) {
        reg_case_t c = {REG_ALLREDUCE, COLL_INT32, COLL_SUM, count, it % 2, it};
        if (rank == victim && it == 4) {
            raise(SIGKILL); /* no destroy, no finalize */
        }
        if (it < 4) {
            ASSERT_EQ(reg_run(comm, rank, n, &c, b.send, b.recv, 0), 0);
            continue;
        }
        t0 = reg_now();
        st = coll_allreduce(b.send, b.recv, count, COLL_INT32, COLL_SUM, comm);
    }
    double      dt  = reg_now() - t0;
    const char *msg = coll_comm_last_error(comm);
    printf("rank %d: %s %.2f s after entering the all-reduce: %s\n", rank, coll_strerror(st), dt,
           msg);
    fflush(stdout);
    ASSERT_TRUE(st == COLL_ERR_REMOTE || st == COLL_ERR_TRANSPORT || st == COLL_ERR_TIMEOUT);
    ASSERT_TRUE(dt < REG_TIMEOUT_S + 3.0);
    ASSERT_STR_CONTAINS(msg, "rank ");
    if (st == COLL_ERR_REMOTE) {
        char want[32];
        snprintf(want, sizeof(want), "rank %d", victim);
        ASSERT_STR_CONTAINS(msg, want);
    }
    if (rank == 0) { /* the calls before the kill were direct ones */
        ASSERT_TRUE(reg_log_count() >= 1);
    }
    /* later calls fail at once with the same error */
    t0 = reg_now();
    ASSERT_EQ(coll_allreduce(b.send, b.recv, count, COLL_INT32, COLL_SUM, comm), st);
    ASSERT_TRUE(reg_now() - t0 < 1.0);
    /* registered memory cannot be freed (a later allocation at the same address would match
     * the registration); deregistering on the failed communicator drops it locally */
    ASSERT_EQ(coll_mem_free(b.base), COLL_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(coll_last_error(), "still registered");
    ASSERT_OK(coll_comm_deregister(comm, reg));
    ASSERT_EQ(coll_comm_deregister(comm, reg), COLL_ERR_INVALID_ARG); /* once only */
    ASSERT_OK(coll_mem_free(b.base));
    return 0;
}

/* ---- (h) ranks that deregister at different points ---- */

/*
 * Rank 0 deregisters and then makes a large blocking all-reduce; the others make the all-reduce
 * first. Registrations change together on every rank (a deregistration is a round of the
 * slots), so this is a mismatch every rank reports, not a hang in two different paths.
 */
static int reg_skew_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    reg_bufs_t    b;
    coll_reg_t   *reg = NULL;
    coll_result_t st;
    double        t0;
    (void)arg;
    (void)n;
    reg_bufs_alloc(&b, 65536, 1);
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    t0 = reg_now();
    if (rank == 0) {
        st  = coll_comm_deregister(comm, reg);
        reg = NULL; /* dropped whatever the result */
        if (st == COLL_OK) {
            st = coll_allreduce(b.send, b.recv, 65536, COLL_INT32, COLL_SUM, comm);
        }
    } else {
        st = coll_allreduce(b.send, b.recv, 65536, COLL_INT32, COLL_SUM, comm);
    }
    if (st != COLL_ERR_MISMATCH) {
        fprintf(stderr, "rank %d: deregister against all-reduce returned %s: %s\n", rank,
                coll_strerror(st), coll_last_error());
    }
    ASSERT_EQ(st, COLL_ERR_MISMATCH);
    ASSERT_TRUE(reg_now() - t0 < REG_TIMEOUT_S + 3.0);
    if (reg != NULL) {
        ASSERT_OK(coll_comm_deregister(comm, reg));
    }
    reg_bufs_free(&b);
    if (rank == 0) {
        printf("  %d ranks: (h) deregistration against an all-reduce: mismatch on every rank\n", n);
    }
    return 0;
}

/* ---- (f) COLL_DIRECT=0, (g) COLL_DIRECT_MIN ---- */

static int reg_off_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    static const size_t counts[] = {257, 4099, 65536};
    reg_bufs_t          b;
    coll_reg_t         *reg = NULL;
    size_t              wrong;
    int                 call = 20000, lines[REG_NCOLLS];
    (void)arg;
    reg_bufs_alloc(&b, 65536 + (size_t)n, 1);
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    wrong = reg_sweep(comm, rank, n, counts, 3, 2, b.send, b.recv, &call, lines);
    for (int coll = 0; coll < REG_NCOLLS; coll++) {
        if (lines[coll] != 0) {
            fprintf(stderr, "rank %d: COLL_DIRECT=0 but %s took the direct path\n", rank,
                    reg_coll_names[coll]);
            wrong++;
        }
    }
    ASSERT_OK(coll_comm_deregister(comm, reg));
    reg_bufs_free(&b);
    reg_report(rank, "(f) COLL_DIRECT=0: normal path", n, wrong);
    return wrong != 0;
}

/* COLL_DIRECT_MIN=64k: a 16 KiB all-reduce keeps the normal path, a 256 KiB one goes direct. */
static int reg_min_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    reg_bufs_t  b;
    coll_reg_t *reg   = NULL;
    size_t      wrong = 0;
    (void)arg;
    reg_bufs_alloc(&b, 65536 + (size_t)n, 1);
    ASSERT_OK(coll_comm_register(comm, b.base, b.bytes, &reg));
    int        before = reg_log_count();
    reg_case_t c      = {REG_ALLREDUCE, COLL_INT32, COLL_SUM, 4099, 0, 30000};
    wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
    wrong += reg_expect_lines(comm, rank, before, 0, "(g) 16 KiB below COLL_DIRECT_MIN");
    before  = reg_log_count();
    c.count = 65536;
    c.call++;
    wrong += reg_run(comm, rank, n, &c, b.send, b.recv, 0);
    wrong += reg_expect_lines(comm, rank, before, -1, "(g) 256 KiB above COLL_DIRECT_MIN");
    ASSERT_OK(coll_comm_deregister(comm, reg));
    reg_bufs_free(&b);
    reg_report(rank, "(g) COLL_DIRECT_MIN", n, wrong);
    return wrong != 0;
}

/* ---- driver ---- */

/* One run with its own log directory; prints the log's warnings and errors when it fails. */
static int reg_run_ranks(const char *what, int n, int victim, coll_test_rank_fn_t fn, void *arg)
{
    coll_test_opts_t o = {
        .nranks = n, .want_comm = 1, .timeout_s = 60, .transport = "shm", .victim = victim};
    return coll_test_run_logged(what, &o, DIRECT_MARK, fn, arg);
}

int main(int argc, char **argv)
{
    static const int counts[] = {2, 3, 4, 5, 8};
    const char      *dbg      = getenv("COLL_DEBUG");
    int              only_n = 0, failed = 0, total = 0;

    if (argc == 3 && strcmp(argv[1], "-n") == 0 && atoi(argv[2]) >= 2) {
        only_n = atoi(argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [-n N] (N >= 2)\n", argv[0]);
        return COLL_TEST_HARD;
    }
    if (!coll_test_has_transport("shm")) {
        printf("SKIP: the direct path needs the shm transport (COLL_TEST_TRANSPORTS)\n");
        return COLL_TEST_SKIP;
    }
    /* what ran is read from the info log; keep a more verbose level if asked for */
    if (dbg == NULL || (strcasecmp(dbg, "debug") != 0 && strcasecmp(dbg, "trace") != 0)) {
        setenv("COLL_DEBUG", "info", 1);
    }
    setenv("COLL_DEBUG_SUBSYS", "all", 1);
    unsetenv("COLL_ALGO");
    /* all-gathers and reduce-scatters of every count here take the direct path, not the
     * small-call slots that serve up to 32 KiB of input (tests/mp/test_small) */
    setenv("COLL_SMALL_AGRS_MAX", "0", 1);
    unsetenv("COLL_DIRECT");
    unsetenv("COLL_DIRECT_MIN");
    unsetenv("COLL_DIRECT_STREAM_MIN");
    unsetenv("COLL_DIRECT_STREAM_REDUCE_MIN");
    unsetenv("COLL_DIRECT_PUSH");
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]) && (only_n == 0 || i == 0); i++) {
        int n = only_n > 0 ? only_n : counts[i];
        failed += reg_run_ranks("registered buffers (a-d)", n, 0, reg_main, NULL);
        total++;
    }
    /* the ranks reading each other's results instead of writing them */
    setenv("COLL_DIRECT_PUSH", "0", 1);
    failed += reg_run_ranks("registered buffers (a-d), COLL_DIRECT_PUSH=0", only_n > 0 ? only_n : 3,
                            0, reg_main, NULL);
    unsetenv("COLL_DIRECT_PUSH");
    total++;
    /* the copies, and the out-of-place all-reduces and reduce-scatters, with non-temporal
     * stores (reduced and streamed at once where every output is 16-byte aligned), at every
     * size and offset */
    setenv("COLL_DIRECT_STREAM_MIN", "4k", 1);
    setenv("COLL_DIRECT_STREAM_REDUCE_MIN", "4k", 1);
    for (int n = only_n > 0 ? only_n : 2; n <= (only_n > 0 ? only_n : 3); n++) {
        for (int aligned = 0; aligned < 2; aligned++) {
            reg_recv_skew = aligned ? 64 : RECV_SKEW;
            failed += reg_run_ranks(
                aligned ? "registered buffers (a-d), COLL_DIRECT_STREAM[_REDUCE]_MIN=4k, "
                          "outputs 16-byte aligned"
                        : "registered buffers (a-d), COLL_DIRECT_STREAM[_REDUCE]_MIN=4k",
                n, 0, reg_main, NULL);
            total++;
        }
    }
    reg_recv_skew = RECV_SKEW;
    unsetenv("COLL_DIRECT_STREAM_MIN");
    unsetenv("COLL_DIRECT_STREAM_REDUCE_MIN");
    int n_kill = only_n > 0 ? only_n : 4, victim = n_kill - 1;
    setenv("COLL_TIMEOUT", "2", 1);
    failed += reg_run_ranks("(e) rank killed in a direct all-reduce", n_kill, victim + 1,
                            reg_kill_main, &victim);
    unsetenv("COLL_TIMEOUT");
    total++;
    setenv("COLL_TIMEOUT", "2", 1);
    failed += reg_run_ranks("(h) ranks deregistering at different points", only_n > 0 ? only_n : 3,
                            0, reg_skew_main, NULL);
    unsetenv("COLL_TIMEOUT");
    total++;
    setenv("COLL_DIRECT", "0", 1);
    failed += reg_run_ranks("(f) COLL_DIRECT=0", only_n > 0 ? only_n : 3, 0, reg_off_main, NULL);
    unsetenv("COLL_DIRECT");
    total++;
    setenv("COLL_DIRECT_MIN", "64k", 1);
    failed +=
        reg_run_ranks("(g) COLL_DIRECT_MIN=64k", only_n > 0 ? only_n : 2, 0, reg_min_main, NULL);
    unsetenv("COLL_DIRECT_MIN");
    total++;
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0;
}
