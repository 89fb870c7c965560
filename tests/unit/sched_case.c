/* SPDX-License-Identifier: MIT */
/*
 * One simulated case of the schedule tests (sched_case.h): inputs of small integers, buffers by
 * the in-place rule of algo.h, the reference result, the build and simulation of every rank's
 * schedule and the comparison. It sweeps nothing.
 */
#include "sched_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll_test.h"
#include "compiler.h"
#include "reduce/reduce.h"
#include "sim.h"

int      verbose;
uint64_t ncases, nevents;

int tip(const tcase_t *tc, int r)
{
    return tc->args.in_place == TIP_MIXED ? (r % 2) : tc->args.in_place;
}

/* ---- values: small integers, so fp32 and bf16 arithmetic is exact in any order ---- */

static uint64_t thash(uint64_t x)
{
    uint64_t state = x;
    return coll_test_rand(&state);
}

int tvalue(const tcase_t *tc, int rank, size_t i)
{
    uint64_t h = thash(tc->seed * 1000003u + (uint64_t)rank * 7919u + i);

    if (tc->args.coll == COLL_OP_ALLREDUCE || tc->args.coll == COLL_OP_REDUCE_SCATTER ||
        tc->args.coll == COLL_OP_REDUCE) {
        switch (tc->args.op) {
        case COLL_PROD:
            return (int)(h % 3) == 0 ? -1 : (int)(h % 3); /* -1, 1, 2: |product| <= 2^16 */
        case COLL_MAX:
        case COLL_MIN:
            return (int)(h % 201) - 100;
        default:
            return (int)(h % 9) - 4; /* |sum of 16| <= 64: exact in bf16 */
        }
    }
    if (tc->args.dtype == COLL_INT32) { /* data movement: unique values catch misplacement */
        return rank * 1000003 + (int)i;
    }
    return (int)(h % 255) - 127;
}

void tset(coll_dtype_t dt, void *base, size_t i, int v)
{
    if (dt == COLL_INT32) {
        ((int32_t *)base)[i] = v;
    } else if (dt == COLL_FLOAT32) {
        ((float *)base)[i] = (float)v;
    } else {
        ((uint16_t *)base)[i] = coll_float_to_bf16((float)v);
    }
}

double tget(coll_dtype_t dt, const void *base, size_t i)
{
    if (dt == COLL_INT32) {
        return ((const int32_t *)base)[i];
    }
    if (dt == COLL_FLOAT32) {
        return ((const float *)base)[i];
    }
    return coll_bf16_to_float(((const uint16_t *)base)[i]);
}

/* ---- buffers per collective (the in-place rule of algo.h) ---- */

static size_t in_elems(const tcase_t *tc)
{
    coll_op_t c = tc->args.coll;
    return (c == COLL_OP_REDUCE_SCATTER || c == COLL_OP_ALLTOALL)
               ? tc->args.count * (size_t)tc->nranks
               : tc->args.count;
}

void tbuf_alloc(trank_t *t, int b, size_t bytes)
{
    t->size[b] = bytes;
    t->buf[b]  = malloc(bytes + 1);
    ASSERT_TRUE(t->buf[b] != NULL);
    memset(t->buf[b], 0x5a, bytes + 1);
}

void tproc_bind(sim_proc_t *p, const coll_sched_t *s, trank_t *t)
{
    if (s->scratch_bytes > 0) {
        tbuf_alloc(t, COLL_BUF_SCRATCH, s->scratch_bytes);
    }
    p->sched = s;
    for (int b = 0; b < COLL_BUF_COUNT; b++) {
        p->buf[b]  = t->buf[b];
        p->size[b] = t->size[b];
    }
}

void trank_setup(const tcase_t *tc, int r, trank_t *t)
{
    size_t    es = coll_dtype_size(tc->args.dtype), cnt = tc->args.count, n = (size_t)tc->nranks;
    size_t    ne = in_elems(tc);
    int       ip = tip(tc, r), root = tc->args.root;
    char     *in_at;
    coll_op_t c = tc->args.coll;

    memset(t, 0, sizeof(*t));
    t->in = malloc(ne * es + 1);
    ASSERT_TRUE(t->in != NULL);
    for (size_t i = 0; i < ne; i++) {
        tset(tc->args.dtype, t->in, i, tvalue(tc, r, i));
    }
    switch (c) {
    case COLL_OP_REDUCE_SCATTER:
        tbuf_alloc(t, COLL_BUF_SEND, n * cnt * es);
        if (!ip) {
            tbuf_alloc(t, COLL_BUF_RECV, cnt * es);
        }
        in_at = t->buf[COLL_BUF_SEND];
        break;
    case COLL_OP_ALLGATHER:
        tbuf_alloc(t, COLL_BUF_RECV, n * cnt * es);
        if (!ip) {
            tbuf_alloc(t, COLL_BUF_SEND, cnt * es);
        }
        in_at = ip ? t->buf[COLL_BUF_RECV] + (size_t)r * cnt * es : t->buf[COLL_BUF_SEND];
        break;
    case COLL_OP_ALLTOALL:
        tbuf_alloc(t, COLL_BUF_SEND, n * cnt * es);
        tbuf_alloc(t, COLL_BUF_RECV, n * cnt * es);
        in_at = t->buf[COLL_BUF_SEND];
        break;
    default: /* allreduce, broadcast, reduce: sendbuf only on the root for broadcast,
              * recvbuf only on the root for reduce */
        if (ip || c != COLL_OP_REDUCE || r == root) {
            tbuf_alloc(t, COLL_BUF_RECV, cnt * es);
        }
        if (!ip && (c != COLL_OP_BROADCAST || r == root)) {
            tbuf_alloc(t, COLL_BUF_SEND, cnt * es);
        }
        in_at = ip ? t->buf[COLL_BUF_RECV] : t->buf[COLL_BUF_SEND];
        break;
    }
    if (in_at != NULL) {
        memcpy(in_at, t->in, ne * es);
    }
}

void trank_free(trank_t *t)
{
    for (int b = 0; b < COLL_BUF_COUNT; b++) {
        free(t->buf[b]);
    }
    free(t->in);
}

/* ---- reference and comparison ---- */

char *treference(const tcase_t *tc, trank_t *ranks)
{
    size_t       es = coll_dtype_size(tc->args.dtype), ne = in_elems(tc);
    char        *ref = malloc(ne * es + 1);
    coll_redop_t op  = (tc->args.op == COLL_AVG) ? COLL_SUM : tc->args.op;

    ASSERT_TRUE(ref != NULL);
    memcpy(ref, ranks[0].in, ne * es);
    for (int r = 1; r < tc->nranks; r++) {
        coll_reduce3(tc->args.dtype, op, ref, ref, ranks[r].in, ne);
    }
    if (tc->args.op == COLL_AVG) {
        coll_reduce_div(tc->args.dtype, ref, ne, tc->nranks);
    }
    return ref;
}

void tdescribe(const tcase_t *tc, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s n=%d count=%zu %s %s %s chunk=%zu root=%d seed=%" PRIu64,
             tc->algo->name, coll_op_name(tc->args.coll), tc->nranks, tc->args.count,
             tc->args.in_place == TIP_MIXED ? "mixed-in-place"
             : tc->args.in_place            ? "in-place"
                                            : "out-of-place",
             coll_dtype_name(tc->args.dtype), coll_redop_name(tc->args.op), tc->args.chunk_bytes,
             tc->args.root, tc->seed);
}

void tcompare(const tcase_t *tc, int r, const char *what, const char *got, const char *want,
              size_t elems)
{
    size_t es = coll_dtype_size(tc->args.dtype);
    char   d[256];

    ASSERT_TRUE(elems == 0 || got != NULL);
    for (size_t i = 0; i < elems; i++) {
        if (memcmp(got + i * es, want + i * es, es) != 0) {
            tdescribe(tc, d, sizeof(d));
            fprintf(stderr, "FAIL %s: rank %d %s[%zu] = %g, expected %g\n", d, r, what, i,
                    tget(tc->args.dtype, got, i), tget(tc->args.dtype, want, i));
            abort();
        }
    }
}

static void tverify(const tcase_t *tc, trank_t *ranks)
{
    size_t    es = coll_dtype_size(tc->args.dtype), cnt = tc->args.count;
    coll_op_t c   = tc->args.coll;
    char     *ref = NULL;

    if (c == COLL_OP_ALLREDUCE || c == COLL_OP_REDUCE_SCATTER || c == COLL_OP_REDUCE) {
        ref = treference(tc, ranks);
    }
    for (int r = 0; r < tc->nranks; r++) {
        trank_t *t = &ranks[r];

        if (!tip(tc, r) && t->buf[COLL_BUF_SEND] != NULL) { /* inputs stay untouched */
            tcompare(tc, r, "sendbuf", t->buf[COLL_BUF_SEND], t->in, in_elems(tc));
        }
        switch (c) {
        case COLL_OP_ALLREDUCE:
            tcompare(tc, r, "recvbuf", t->buf[COLL_BUF_RECV], ref, cnt);
            break;
        case COLL_OP_REDUCE_SCATTER:
            tcompare(tc, r, "result",
                     tip(tc, r) ? t->buf[COLL_BUF_SEND] + (size_t)r * cnt * es
                                : t->buf[COLL_BUF_RECV],
                     ref + (size_t)r * cnt * es, cnt);
            break;
        case COLL_OP_REDUCE:
            if (r == tc->args.root) {
                tcompare(tc, r, "recvbuf", t->buf[COLL_BUF_RECV], ref, cnt);
            }
            break;
        case COLL_OP_BROADCAST:
            tcompare(tc, r, "recvbuf", t->buf[COLL_BUF_RECV], ranks[tc->args.root].in, cnt);
            break;
        case COLL_OP_ALLGATHER:
            for (int b = 0; b < tc->nranks; b++) {
                tcompare(tc, r, "recvbuf", t->buf[COLL_BUF_RECV] + (size_t)b * cnt * es,
                         ranks[b].in, cnt);
            }
            break;
        default: /* alltoall: block p of rank r's result is block r of rank p's input */
            for (int p = 0; p < tc->nranks; p++) {
                tcompare(tc, r, "recvbuf", t->buf[COLL_BUF_RECV] + (size_t)p * cnt * es,
                         ranks[p].in + (size_t)r * cnt * es, cnt);
            }
            break;
        }
    }
    free(ref);
}

/* ---- one case ---- */

void tbuild(const tcase_t *tc, coll_sched_t *s)
{
    char msg[256], d[256];

    for (int r = 0; r < tc->nranks; r++) {
        coll_args_t   args = tc->args;
        coll_result_t st;

        args.in_place = tip(tc, r);
        coll_sched_init(&s[r], r, tc->nranks, args.dtype, args.op);
        st = tc->algo->build(r, tc->nranks, &args, &s[r]);
        if (st == COLL_OK) {
            st = coll_sched_finalize(&s[r]);
        }
        if (st == COLL_OK) {
            st = coll_sched_check(&s[r], msg, sizeof(msg));
        } else {
            snprintf(msg, sizeof(msg), "build failed: %s", coll_strerror(st));
        }
        if (st != COLL_OK) {
            tdescribe(tc, d, sizeof(d));
            fprintf(stderr, "FAIL %s: rank %d: %s\n", d, r, msg);
            coll_sched_print(&s[r], stderr);
            abort();
        }
    }
}

void run_case(const tcase_t *tc)
{
    coll_sched_t s[MAX_RANKS];
    trank_t      ranks[MAX_RANKS];
    sim_proc_t   procs[MAX_RANKS];
    sim_stats_t  stats;
    char         err[1024], d[256];

    tbuild(tc, s);
    for (int r = 0; r < tc->nranks; r++) {
        trank_setup(tc, r, &ranks[r]);
        tproc_bind(&procs[r], &s[r], &ranks[r]);
    }
    if (sim_run(procs, tc->nranks, tc->seed, &stats, err, sizeof(err)) != 0) {
        tdescribe(tc, d, sizeof(d));
        fprintf(stderr, "FAIL %s: %s\n", d, err);
        for (int r = 0; r < tc->nranks && tc->nranks <= 4; r++) {
            coll_sched_print(&s[r], stderr);
        }
        abort();
    }
    tverify(tc, ranks);
    if (verbose) {
        tdescribe(tc, d, sizeof(d));
        printf("ok %s (%" PRIu64 " events)\n", d, stats.events);
    }
    ncases++;
    nevents += stats.events;
    for (int r = 0; r < tc->nranks; r++) {
        trank_free(&ranks[r]);
        coll_sched_destroy(&s[r]);
    }
}

/* One host whose ranks share windows large enough for every case here. */
void window_layout(coll_layout_t *l, int n)
{
    ASSERT_OK(coll_layout_init_blocks(l, n, 1));
    l->shared_window = 1;
    l->window_bytes  = (size_t)1 << 20;
}

/* An algorithm that runs only where the ranks share windows. */
int needs_window(const coll_algo_t *a)
{
    coll_args_t args = {
        .coll = COLL_OP_ALLREDUCE, .count = 1, .dtype = COLL_INT32, .root = -1, .chunk_bytes = 64};
    return (a->colls & (1u << COLL_OP_ALLREDUCE)) != 0 && !a->supported(2, &args) &&
           strcmp(a->name, "hier") != 0;
}
