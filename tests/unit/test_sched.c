/* SPDX-License-Identifier: MIT */
/*
 * Schedules and algorithms without a network: every algorithm x collective x rank count x
 * count x in/out/mixed place x dtype x op is built for all ranks, checked with coll_sched_check,
 * run in the simulator under several random interleavings and compared with a plain reference.
 * Also structure checks (ring step counts, chain roots), sched.c's error paths, the
 * simulator's own error detection and the registry. Usage: test_sched [-v] [-q (quick)].
 * Over 800 lines on purpose: one matrix driver and its reference must stay side by side.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algo.h"
#include "coll_test.h"
#include "compiler.h"
#include "reduce/reduce.h"
#include "sim.h"
#include "tree/tree.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define MAX_RANKS 16

static int      verbose;
static uint64_t ncases, nevents;

typedef struct {
    const coll_algo_t *algo;
    coll_args_t        args;
    int                nranks;
    uint64_t           seed;
} tcase_t;

/* args.in_place == TIP_MIXED: odd ranks in place, even ranks not (the flag is per rank). */
#define TIP_MIXED 2

static int tip(const tcase_t *tc, int r)
{
    return tc->args.in_place == TIP_MIXED ? (r % 2) : tc->args.in_place;
}

/* Buffers and inputs of one rank. */
typedef struct {
    char  *buf[COLL_BUF_COUNT];
    size_t size[COLL_BUF_COUNT];
    char  *in; /* this rank's input, kept for the reference */
} trank_t;

/* ---- values: small integers, so fp32 and bf16 arithmetic is exact in any order ---- */

static uint64_t thash(uint64_t x)
{
    uint64_t state = x;
    return coll_test_rand(&state);
}

static int tvalue(const tcase_t *tc, int rank, size_t i)
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

static void tset(coll_dtype_t dt, void *base, size_t i, int v)
{
    if (dt == COLL_INT32) {
        ((int32_t *)base)[i] = v;
    } else if (dt == COLL_FLOAT32) {
        ((float *)base)[i] = (float)v;
    } else {
        ((uint16_t *)base)[i] = coll_float_to_bf16((float)v);
    }
}

static double tget(coll_dtype_t dt, const void *base, size_t i)
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

static void tbuf_alloc(trank_t *t, int b, size_t bytes)
{
    t->size[b] = bytes;
    t->buf[b]  = malloc(bytes + 1);
    ASSERT_TRUE(t->buf[b] != NULL);
    memset(t->buf[b], 0x5a, bytes + 1);
}

static void trank_setup(const tcase_t *tc, int r, trank_t *t)
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

static void trank_free(trank_t *t)
{
    for (int b = 0; b < COLL_BUF_COUNT; b++) {
        free(t->buf[b]);
    }
    free(t->in);
}

/* ---- reference and comparison ---- */

static char *treference(const tcase_t *tc, trank_t *ranks)
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

static void tdescribe(const tcase_t *tc, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s n=%d count=%zu %s %s %s chunk=%zu root=%d seed=%" PRIu64,
             tc->algo->name, coll_op_name(tc->args.coll), tc->nranks, tc->args.count,
             tc->args.in_place == TIP_MIXED ? "mixed-in-place"
             : tc->args.in_place            ? "in-place"
                                            : "out-of-place",
             coll_dtype_name(tc->args.dtype), coll_redop_name(tc->args.op), tc->args.chunk_bytes,
             tc->args.root, tc->seed);
}

static void tcompare(const tcase_t *tc, int r, const char *what, const char *got, const char *want,
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

static void tbuild(const tcase_t *tc, coll_sched_t *s)
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

static void run_case(const tcase_t *tc)
{
    coll_sched_t s[MAX_RANKS];
    trank_t      ranks[MAX_RANKS];
    sim_proc_t   procs[MAX_RANKS];
    sim_stats_t  stats;
    char         err[1024], d[256];

    tbuild(tc, s);
    for (int r = 0; r < tc->nranks; r++) {
        trank_setup(tc, r, &ranks[r]);
        if (s[r].scratch_bytes > 0) {
            tbuf_alloc(&ranks[r], COLL_BUF_SCRATCH, s[r].scratch_bytes);
        }
        procs[r].sched = &s[r];
        for (int b = 0; b < COLL_BUF_COUNT; b++) {
            procs[r].buf[b]  = ranks[r].buf[b];
            procs[r].size[b] = ranks[r].size[b];
        }
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

/* ---- sweeps ---- */

static const int          rank_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};
static const coll_dtype_t dtypes[]      = {COLL_INT32, COLL_FLOAT32, COLL_BFLOAT16};
static const coll_redop_t redops[]      = {COLL_SUM, COLL_AVG, COLL_MAX, COLL_PROD};
static const size_t       chunk_sizes[] = {64, 4096};
#define NSEEDS 3

static int is_reduction(coll_op_t c)
{
    return c == COLL_OP_ALLREDUCE || c == COLL_OP_REDUCE_SCATTER || c == COLL_OP_REDUCE;
}

/* Counts: empty, one, odd, fewer than ranks, a chunk and a bit, several chunks and odd, and
 * for allreduce (whose blocks are count / n) several chunks per block. */
static int make_counts(coll_op_t c, int n, size_t chunk, size_t es, size_t *out)
{
    size_t ce = chunk / es;
    int    k  = 0;

    out[k++] = 0;
    out[k++] = 1;
    out[k++] = 7;
    if (n - 1 > 1 && n - 1 != 7) {
        out[k++] = (size_t)n - 1;
    }
    out[k++] = ce + 3;
    out[k++] = 3 * ce + 5;
    if (c == COLL_OP_ALLREDUCE && chunk < 1024) {
        out[k++] = (2 * (size_t)n + 1) * ce + 5;
    }
    return k;
}

/* Point-to-point: rank r sends to r+1 and receives from r-1, two schedules per rank. */
static void run_p2p(const tcase_t *tc0)
{
    coll_sched_t s[2 * MAX_RANKS];
    sim_proc_t   procs[2 * MAX_RANKS];
    trank_t      t[2 * MAX_RANKS];
    char         err[1024], d[256];
    int          n  = tc0->nranks;
    tcase_t      tc = *tc0;

    memset(procs, 0, sizeof(procs));
    memset(t, 0, sizeof(t));
    for (int p = 0; p < 2 * n; p++) {
        int r = p / 2, is_send = (p % 2 == 0), b = is_send ? COLL_BUF_SEND : COLL_BUF_RECV;

        tc.args.coll = is_send ? COLL_OP_SEND : COLL_OP_RECV;
        tc.args.root = is_send ? (r + 1) % n : (r - 1 + n) % n;
        ASSERT_TRUE(tc.algo->supported(n, &tc.args));
        coll_sched_init(&s[p], r, n, tc.args.dtype, tc.args.op);
        ASSERT_OK(tc.algo->build(r, n, &tc.args, &s[p]));
        ASSERT_OK(coll_sched_finalize(&s[p]));
        ASSERT_OK(coll_sched_check(&s[p], err, sizeof(err)));
        tbuf_alloc(&t[p], b, tc.args.count * coll_dtype_size(tc.args.dtype));
        for (size_t i = 0; i < tc.args.count && is_send; i++) {
            tset(tc.args.dtype, t[p].buf[b], i, tvalue(&tc, r, i));
        }
        procs[p].sched = &s[p];
        memcpy(procs[p].buf, t[p].buf, sizeof(procs[p].buf));
        memcpy(procs[p].size, t[p].size, sizeof(procs[p].size));
    }
    if (sim_run(procs, 2 * n, tc.seed, NULL, err, sizeof(err)) != 0) {
        tdescribe(&tc, d, sizeof(d));
        fprintf(stderr, "FAIL %s: %s\n", d, err);
        abort();
    }
    for (int r = 0; r < n; r++) {
        tcompare(&tc, r, "recvbuf", t[2 * r + 1].buf[COLL_BUF_RECV],
                 t[2 * ((r - 1 + n) % n)].buf[COLL_BUF_SEND], tc.args.count);
    }
    for (int p = 0; p < 2 * n; p++) {
        trank_free(&t[p]);
        coll_sched_destroy(&s[p]);
    }
    ncases++;
}

/* One shape (ranks, chunk, dtype, count) over in/out of place, ops and seeds. */
static void sweep_shape(const tcase_t *shape, int quick)
{
    coll_op_t coll = shape->args.coll;
    int       n    = shape->nranks;

    for (int ip = 0; ip <= TIP_MIXED; ip++) {
        for (size_t oi = 0; oi < COLL_ARRAY_SIZE(redops); oi++) {
            tcase_t tc = *shape;

            if ((ip && (coll == COLL_OP_ALLTOALL || coll == COLL_OP_SEND)) ||
                (!is_reduction(coll) && oi > 0) ||
                (redops[oi] == COLL_PROD && tc.args.dtype != COLL_INT32)) {
                continue;
            }
            tc.args.in_place = ip;
            tc.args.op       = redops[oi];
            for (uint64_t seed = 1; seed <= (quick || ip == TIP_MIXED ? 1 : NSEEDS); seed++) {
                tc.seed = seed + 100 * (uint64_t)tc.args.count;
                if (coll == COLL_OP_BROADCAST || coll == COLL_OP_REDUCE) {
                    tc.args.root = (int)((seed * 5 + tc.args.count) % (uint64_t)n);
                }
                if (coll == COLL_OP_SEND) {
                    run_p2p(&tc);
                    continue;
                }
                ASSERT_TRUE(tc.algo->supported(n, &tc.args));
                run_case(&tc);
            }
        }
    }
}

/* One host whose ranks share windows large enough for every case here. */
static void window_layout(coll_layout_t *l, int n)
{
    ASSERT_OK(coll_layout_init_blocks(l, n, 1));
    l->shared_window = 1;
    l->window_bytes  = (size_t)1 << 20;
}

/* An algorithm that runs only where the ranks share windows. */
static int needs_window(const coll_algo_t *a)
{
    coll_args_t args = {
        .coll = COLL_OP_ALLREDUCE, .count = 1, .dtype = COLL_INT32, .root = -1, .chunk_bytes = 64};
    return (a->colls & (1u << COLL_OP_ALLREDUCE)) != 0 && !a->supported(2, &args) &&
           strcmp(a->name, "hier") != 0;
}

/* Host layouts a composed algorithm is tried on: blocks of consecutive ranks and ranks dealt
 * round-robin, in 2 hosts and (when they divide) 4; for a window algorithm one shared host;
 * empty for a flat algorithm (NULL layout). */
static int sweep_layouts(const coll_algo_t *a, int n, coll_layout_t *ls, int max)
{
    int k = 0;

    if (needs_window(a)) {
        window_layout(&ls[k++], n);
        return k;
    }
    if (strcmp(a->name, "hier") != 0) {
        return 0;
    }
    for (int h = 2; h <= 4 && k + 2 <= max; h *= 2) {
        uint64_t keys[MAX_RANKS];
        if (n % h != 0 || n / h < 2) {
            continue;
        }
        ASSERT_OK(coll_layout_init_blocks(&ls[k++], n, h));
        for (int r = 0; r < n; r++) {
            keys[r] = (uint64_t)(r % h);
        }
        ASSERT_OK(coll_layout_init(&ls[k++], n, keys));
    }
    return k;
}

static void sweep_coll(const coll_algo_t *a, coll_op_t coll, int quick)
{
    for (size_t ni = 0; ni < COLL_ARRAY_SIZE(rank_counts); ni++) {
        coll_layout_t layouts[4];
        int           n    = rank_counts[ni];
        int           nl   = sweep_layouts(a, n, layouts, 4);
        int           flat = nl == 0 && strcmp(a->name, "hier") != 0;

        for (int li = 0; li < (flat ? 1 : nl); li++) {
            for (size_t ci = 0; ci < COLL_ARRAY_SIZE(chunk_sizes); ci++) {
                for (size_t di = 0; di < COLL_ARRAY_SIZE(dtypes); di++) {
                    tcase_t tc = {.algo = a, .nranks = n};
                    size_t  counts[8];
                    int     nc =
                        make_counts(coll, n, chunk_sizes[ci], coll_dtype_size(dtypes[di]), counts);

                    for (int k = 0; k < nc && !(coll == COLL_OP_SEND && n == 1); k++) {
                        tc.args = (coll_args_t){.coll        = coll,
                                                .count       = counts[k],
                                                .dtype       = dtypes[di],
                                                .root        = -1,
                                                .chunk_bytes = chunk_sizes[ci],
                                                .layout      = flat ? NULL : &layouts[li]};
                        if (!flat && !a->supported(n, &tc.args)) {
                            continue; /* e.g. fewer elements than ranks per host */
                        }
                        sweep_shape(&tc, quick);
                    }
                }
            }
        }
        for (int li = 0; li < nl; li++) {
            coll_layout_fini(&layouts[li]);
        }
    }
}

/*
 * Barrier: runs in the simulator, and every rank's completion must depend (through its own
 * dependencies and the messages it received) on a step of every other rank.
 */
static void check_barrier_causality(coll_sched_t *s, int n)
{
    uint32_t base[MAX_RANKS + 1], total = 0;
    uint64_t mask[4096], all            = (n == 64) ? ~0ull : ((1ull << n) - 1);

    for (int r = 0; r < n; r++) {
        base[r] = total;
        total += s[r].nsteps;
    }
    ASSERT_TRUE(total <= 4096);
    for (int r = 0; r < n; r++) {
        for (uint32_t i = 0; i < s[r].nsteps; i++) {
            mask[base[r] + i] = 1ull << r;
        }
    }
    /* Steps are in dependency order within a rank; sweep until nothing changes. */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < n; r++) {
            for (uint32_t i = 0; i < s[r].nsteps; i++) {
                const coll_step_t *st = &s[r].steps[i];
                uint64_t           m  = mask[base[r] + i];

                for (uint32_t j = 0; j < st->succ_count; j++) {
                    uint64_t *t = &mask[base[r] + s[r].succ[st->succ_start + j]];
                    changed |= (*t | m) != *t;
                    *t |= m;
                }
                if (st->kind == COLL_STEP_SEND) { /* find the matching receive */
                    const coll_sched_t *q = &s[st->peer];
                    for (uint32_t k = 0; k < q->nsteps; k++) {
                        if (q->steps[k].kind == COLL_STEP_RECV && q->steps[k].peer == r &&
                            q->steps[k].tag == st->tag &&
                            (mask[base[st->peer] + k] | m) != mask[base[st->peer] + k]) {
                            mask[base[st->peer] + k] |= m;
                            changed = 1;
                        }
                    }
                }
            }
        }
    }
    for (int r = 0; r < n; r++) {
        uint64_t m = 1ull << r;
        for (uint32_t i = 0; i < s[r].nsteps; i++) {
            m |= mask[base[r] + i];
        }
        ASSERT_EQ(m, all);
    }
}

static void sweep_barrier(const coll_algo_t *a)
{
    for (size_t ni = 0; ni < COLL_ARRAY_SIZE(rank_counts); ni++) {
        for (uint64_t seed = 1; seed <= NSEEDS; seed++) {
            tcase_t      tc = {.algo = a, .nranks = rank_counts[ni], .seed = seed};
            coll_sched_t s[MAX_RANKS];
            sim_proc_t   procs[MAX_RANKS];
            char         err[1024];

            tc.args = (coll_args_t){
                .coll = COLL_OP_BARRIER, .dtype = COLL_INT8, .root = -1, .chunk_bytes = 64};
            ASSERT_TRUE(a->supported(tc.nranks, &tc.args));
            tbuild(&tc, s);
            memset(procs, 0, sizeof(procs));
            for (int r = 0; r < tc.nranks; r++) {
                procs[r].sched = &s[r];
            }
            if (sim_run(procs, tc.nranks, seed, NULL, err, sizeof(err)) != 0) {
                fprintf(stderr, "FAIL barrier n=%d: %s\n", tc.nranks, err);
                abort();
            }
            check_barrier_causality(s, tc.nranks);
            for (int r = 0; r < tc.nranks; r++) {
                coll_sched_destroy(&s[r]);
            }
            ncases++;
        }
    }
}

/* ---- allreduce bit identity ---- */

/*
 * Training needs every rank to hold the same bits after an allreduce. Non-integer random
 * inputs make the result depend on the order of reduction; every rank's recvbuf must equal
 * rank 0's bit for bit, and the reference within a tolerance.
 */
static void run_identity(const coll_algo_t *algo, int n, coll_dtype_t dt, coll_redop_t op,
                         size_t count, int ip, uint64_t seed)
{
    tcase_t       tc = {.algo = algo, .nranks = n, .seed = seed};
    coll_sched_t  s[MAX_RANKS];
    trank_t       ranks[MAX_RANKS];
    sim_proc_t    procs[MAX_RANKS];
    size_t        es = coll_dtype_size(dt);
    char          err[1024], d[256];
    double        maxdiff = 0.0, tol = (dt == COLL_FLOAT32) ? 1e-4 : 0.1;
    char         *ref;
    coll_layout_t wl;

    window_layout(&wl, n);
    tc.args = (coll_args_t){.coll        = COLL_OP_ALLREDUCE,
                            .count       = count,
                            .dtype       = dt,
                            .op          = op,
                            .root        = -1,
                            .in_place    = ip,
                            .chunk_bytes = 64,
                            .layout      = needs_window(algo) ? &wl : NULL};
    tbuild(&tc, s);
    for (int r = 0; r < n; r++) {
        uint64_t state = seed * 7919u + (uint64_t)r;

        trank_setup(&tc, r, &ranks[r]);
        for (size_t i = 0; i < count; i++) { /* uniform in [-1, 1), 24 random bits */
            double v = (double)(coll_test_rand(&state) >> 40) / (double)(1 << 23) - 1.0;
            if (dt == COLL_FLOAT32) {
                ((float *)ranks[r].in)[i] = (float)v;
            } else {
                ((uint16_t *)ranks[r].in)[i] = coll_float_to_bf16((float)v);
            }
        }
        memcpy(tip(&tc, r) ? ranks[r].buf[COLL_BUF_RECV] : ranks[r].buf[COLL_BUF_SEND], ranks[r].in,
               count * es);
        if (s[r].scratch_bytes > 0) {
            tbuf_alloc(&ranks[r], COLL_BUF_SCRATCH, s[r].scratch_bytes);
        }
        procs[r].sched = &s[r];
        for (int b = 0; b < COLL_BUF_COUNT; b++) {
            procs[r].buf[b]  = ranks[r].buf[b];
            procs[r].size[b] = ranks[r].size[b];
        }
    }
    tdescribe(&tc, d, sizeof(d));
    if (sim_run(procs, n, seed, NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "FAIL %s: %s\n", d, err);
        abort();
    }
    ref = treference(&tc, ranks);
    for (int r = 0; r < n; r++) {
        const char *got = ranks[r].buf[COLL_BUF_RECV];

        if (memcmp(got, ranks[0].buf[COLL_BUF_RECV], count * es) != 0) {
            fprintf(stderr, "FAIL %s: rank %d's result differs from rank 0's in its bits\n", d, r);
            abort();
        }
        for (size_t i = 0; i < count; i++) {
            double diff = tget(dt, got, i) - tget(dt, ref, i);
            maxdiff     = (diff < 0 ? -diff : diff) > maxdiff ? (diff < 0 ? -diff : diff) : maxdiff;
        }
    }
    if (maxdiff > tol * n) {
        fprintf(stderr, "FAIL %s: maxdiff %g against the reference\n", d, maxdiff);
        abort();
    }
    if (verbose) {
        printf("ok identical bits %s (maxdiff %g)\n", d, maxdiff);
    }
    free(ref);
    for (int r = 0; r < n; r++) {
        trank_free(&ranks[r]);
        coll_sched_destroy(&s[r]);
    }
    coll_layout_fini(&wl);
    ncases++;
}

static void test_bit_identity(void)
{
    static const char *const algos[] = {
        "ring", "recursive_doubling", "rabenseifner", "tree", "oneshot", "twoshot"};
    static const size_t       counts[] = {1, 7, 37, 200};
    static const coll_redop_t ops[]    = {COLL_SUM, COLL_AVG};

    for (size_t ai = 0; ai < COLL_ARRAY_SIZE(algos); ai++) {
        const coll_algo_t *a = coll_algo_registry_find(algos[ai]);

        ASSERT_TRUE(a != NULL);
        for (size_t ni = 0; ni < COLL_ARRAY_SIZE(rank_counts); ni++) {
            for (size_t ci = 0; ci < COLL_ARRAY_SIZE(counts); ci++) {
                for (size_t oi = 0; oi < COLL_ARRAY_SIZE(ops); oi++) {
                    for (int ip = 0; ip <= TIP_MIXED; ip++) {
                        uint64_t seed = 1 + ci * 31 + oi * 7 + (uint64_t)ip;

                        run_identity(a, rank_counts[ni], COLL_FLOAT32, ops[oi], counts[ci], ip,
                                     seed);
                        run_identity(a, rank_counts[ni], COLL_BFLOAT16, ops[oi], counts[ci], ip,
                                     seed);
                    }
                }
            }
        }
    }
}

/* ---- structure ---- */

/* Builds rank's schedule (fp32, 64-byte chunks) with the selected algorithm; returns the
 * number of steps of each kind in c[] and the scratch size. */
static size_t build_count(coll_op_t coll, int rank, int n, size_t count, coll_redop_t op, int root,
                          int ip, int c[COLL_STEP_KIND_COUNT])
{
    coll_args_t        args = {.coll        = coll,
                               .count       = count,
                               .dtype       = COLL_FLOAT32,
                               .op          = op,
                               .root        = root,
                               .in_place    = ip,
                               .chunk_bytes = 64};
    const coll_algo_t *a =
        coll_algo_select(n, &args, "ring", NULL, NULL); /* the counts below are ring's */
    coll_sched_t s;
    char         msg[256];
    size_t       scratch;

    ASSERT_TRUE(a != NULL);
    coll_sched_init(&s, rank, n, args.dtype, args.op);
    ASSERT_OK(a->build(rank, n, &args, &s));
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    memset(c, 0, sizeof(int) * COLL_STEP_KIND_COUNT);
    for (uint32_t i = 0; i < s.nsteps; i++) {
        c[s.steps[i].kind]++;
    }
    scratch = s.scratch_bytes;
    coll_sched_destroy(&s);
    return scratch;
}

static void test_structure(void)
{
    static const int ns[] = {2, 3, 5, 8};
    const size_t     ce   = 64 / sizeof(float);
    int              c[COLL_STEP_KIND_COUNT];

    for (size_t ni = 0; ni < COLL_ARRAY_SIZE(ns); ni++) {
        for (int k = 1, n = ns[ni]; k <= 3; k += 2) {
            for (int r = 0; r < n; r++) {
                for (int ip = 0; ip <= TIP_MIXED;
                     ip++) { /* ring allreduce: 2(n-1) sends per chunk */
                    ASSERT_EQ(build_count(COLL_OP_ALLREDUCE, r, n, n * k * ce, COLL_AVG, -1, ip, c),
                              0);
                    ASSERT_EQ(c[COLL_STEP_SEND], 2 * (n - 1) * k);
                    ASSERT_EQ(c[COLL_STEP_RECV_REDUCE], (n - 1) * k);
                    ASSERT_EQ(c[COLL_STEP_RECV], (n - 1) * k);
                    ASSERT_EQ(c[COLL_STEP_DIV], k);
                    ASSERT_EQ(c[COLL_STEP_COPY] + c[COLL_STEP_REDUCE], 0);
                }
                ASSERT_EQ(build_count(COLL_OP_REDUCE_SCATTER, r, n, k * ce, COLL_SUM, -1, 0, c),
                          (size_t)(n - 2) * k * ce * sizeof(float));
                ASSERT_EQ(c[COLL_STEP_SEND], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_RECV_REDUCE], (n - 1) * k);
                build_count(COLL_OP_ALLGATHER, r, n, k * ce, COLL_SUM, -1, 1, c);
                ASSERT_EQ(c[COLL_STEP_SEND], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_RECV], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_COPY], 0);
                build_count(COLL_OP_ALLTOALL, r, n, k * ce, COLL_SUM, -1, 0, c);
                ASSERT_EQ(c[COLL_STEP_SEND], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_RECV], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_COPY], k);
                for (int root = 0; root < n; root++) { /* chains: the root never receives */
                    build_count(COLL_OP_BROADCAST, r, n, k * ce, COLL_SUM, root, 0, c);
                    ASSERT_EQ(c[COLL_STEP_RECV] + c[COLL_STEP_RECV_REDUCE], r == root ? 0 : k);
                    ASSERT_EQ(c[COLL_STEP_SEND], r == (root - 1 + n) % n ? 0 : k);
                    build_count(COLL_OP_REDUCE, r, n, k * ce, COLL_AVG, root, 0, c);
                    ASSERT_EQ(c[COLL_STEP_SEND], r == root ? 0 : k);
                    ASSERT_EQ(c[COLL_STEP_RECV_REDUCE], r == (root + 1) % n ? 0 : k);
                    ASSERT_EQ(c[COLL_STEP_DIV], r == root ? k : 0);
                }
            }
        }
    }
}

/* ---- trees ---- */

/* One tree: every rank once, parent and child links agree, one root, depth floor(log2 n). */
static void check_tree(int n, const coll_tree_node_t *nd, int root, int *interior)
{
    int depth_max = 0;

    for (int r = 0; r < n; r++) {
        int depth = 0, p = r;

        ASSERT_TRUE(nd[r].nchildren >= 0 && nd[r].nchildren <= 2);
        ASSERT_EQ(nd[r].parent < 0, r == root);
        for (int i = 0; i < nd[r].nchildren; i++) { /* each child names r as its parent */
            int ch = nd[r].child[i];
            ASSERT_TRUE(ch >= 0 && ch < n && ch != r && nd[ch].parent == r);
        }
        if (nd[r].parent >= 0) { /* r is a child of its parent, exactly once */
            const coll_tree_node_t *pn = &nd[nd[r].parent];
            ASSERT_EQ((pn->nchildren > 0 && pn->child[0] == r) +
                          (pn->nchildren > 1 && pn->child[1] == r),
                      1);
        }
        while (nd[p].parent >= 0) { /* reaches the root: no cycle, so every rank once */
            p = nd[p].parent;
            ASSERT_TRUE(++depth < n);
        }
        ASSERT_EQ(p, root);
        depth_max = depth > depth_max ? depth : depth_max;
        interior[r] += nd[r].nchildren > 0;
    }
    ASSERT_EQ(depth_max, coll_tree_depth(n));
}

static void test_trees(void)
{
    coll_tree_node_t nd[2][64];
    int              interior[64];

    for (int n = 1; n <= 64; n++) {
        int lg = 0;

        while ((1 << lg) < n) {
            lg++;
        }
        ASSERT_TRUE(coll_tree_depth(n) <= lg + 1);
        memset(interior, 0, sizeof(interior));
        for (int t = 0; t < 2; t++) {
            int root = -1;

            for (int r = 0; r < n; r++) {
                coll_dbtree_node(r, n, t, &nd[t][r]);
                root = (nd[t][r].parent < 0) ? r : root;
            }
            check_tree(n, nd[t], root, interior);
        }
        for (int r = 0; r < n; r++) { /* complementary: interior in at most one tree */
            ASSERT_TRUE(interior[r] <= 1);
        }
        for (int root = 0; root < n; root++) { /* rotated trees for broadcast and reduce */
            int shift = root - coll_tree_root(n, 0);

            ASSERT_EQ(coll_tree_root(n, shift), root);
            for (int r = 0; r < n; r++) {
                coll_tree_node(r, n, shift, &nd[0][r]);
            }
            check_tree(n, nd[0], root, interior);
        }
    }
}

/* ---- sched.c error paths ---- */

static void expect_check_fails(coll_sched_t *s, const char *needle)
{
    char        msg[256] = "";
    const char *m        = msg; /* a pointer, for ASSERT_STR_CONTAINS */

    ASSERT_OK(coll_sched_finalize(s));

    ASSERT_TRUE(coll_sched_check(s, msg, sizeof(msg)) == COLL_ERR_INTERNAL);
    ASSERT_STR_CONTAINS(m, needle);
    coll_sched_destroy(s);
}

static void test_sched_errors(void)
{
    coll_sched_t s;
    char         msg[256], *text = NULL;
    size_t       textlen = 0;
    FILE        *mem;

    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_AVG);
    ASSERT_EQ(s.op, COLL_SUM);
    ASSERT_TRUE(coll_sched_check(&s, msg, sizeof(msg)) != COLL_OK); /* not finalized */
    coll_sched_send(&s, 1, 5, COLL_BUF_SEND, 0, 8);
    coll_sched_send(&s, 1, 5, COLL_BUF_SEND, 8, 8);
    expect_check_fails(&s, "tag");

    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM); /* same tag, other direction: fine */
    coll_sched_send(&s, 1, 5, COLL_BUF_SEND, 0, 8);
    coll_sched_recv(&s, 1, 5, COLL_BUF_RECV, 0, 8);
    coll_sched_recv(&s, 2, 5, COLL_BUF_RECV, 8, 8);
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    coll_sched_destroy(&s);

    coll_sched_init(&s, 1, 4, COLL_INT32, COLL_SUM);
    coll_sched_send(&s, 1, 0, COLL_BUF_SEND, 0, 8);
    expect_check_fails(&s, "peer");
    coll_sched_init(&s, 1, 4, COLL_INT32, COLL_SUM);
    coll_sched_recv(&s, 4, 0, COLL_BUF_RECV, 0, 8);
    expect_check_fails(&s, "peer");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 6);
    expect_check_fails(&s, "multiple");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    s.scratch_bytes = 4;
    coll_sched_recv(&s, 1, 0, COLL_BUF_SCRATCH, 0, 8);
    expect_check_fails(&s, "scratch");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_RECV, 4, 8);
    expect_check_fails(&s, "overlap");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_div(&s, (coll_buf_id_t)7, 0, 8);
    expect_check_fails(&s, "destination");

    /* dependencies: only on earlier steps; duplicates collapse; -1 is ignored */
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 8);
    coll_sched_div(&s, COLL_BUF_RECV, 0, 8);
    coll_sched_dep(&s, 1, 0);
    coll_sched_dep(&s, 1, 0);
    coll_sched_dep(&s, 1, -1);
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    ASSERT_EQ(s.steps[1].ndeps, 1);
    ASSERT_EQ(s.nsucc, 1);
    ASSERT_EQ(s.steps[0].succ_count, 1);
    ASSERT_TRUE(coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 8) < 0); /* immutable */
    mem = open_memstream(&text, &textlen);
    ASSERT_TRUE(mem != NULL);
    coll_sched_print(&s, mem);
    fclose(mem);
    ASSERT_STR_CONTAINS(text, "copy");
    ASSERT_STR_CONTAINS(text, "div");
    free(text);
    coll_sched_destroy(&s);

    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 8);
    coll_sched_div(&s, COLL_BUF_RECV, 0, 8);
    coll_sched_dep(&s, 0, 1); /* backwards: rejected, remembered */
    ASSERT_TRUE(s.build_error == COLL_ERR_INTERNAL);
    ASSERT_TRUE(coll_sched_div(&s, COLL_BUF_RECV, 0, 8) < 0);
    ASSERT_TRUE(coll_sched_finalize(&s) == COLL_ERR_INTERNAL);
    coll_sched_destroy(&s);
    ASSERT_TRUE(strcmp(coll_step_kind_name(COLL_STEP_RECV_REDUCE), "recv_reduce") == 0);
    ASSERT_TRUE(strcmp(coll_step_kind_name((coll_step_kind_t)99), "invalid") == 0);
}

/* ---- registry ---- */

/* Allreduce by size: recursive doubling for small, Rabenseifner for medium, ring for large. */

/* The default model, for the cost functions. */
static const coll_model_t *default_model(void)
{
    static coll_model_t m;
    coll_model_default(&m);
    return &m;
}
#define NULL_MODEL default_model()

/* The cost model's favourite for a call, by brute force over the registry. */
static const coll_algo_t *algo_cheapest(int n, const coll_args_t *a)
{
    const coll_algo_t *best      = NULL;
    double             best_cost = 0;
    for (int i = 0; i < coll_algo_registry_count(); i++) {
        const coll_algo_t *x = coll_algo_registry_get(i);
        if (!(x->colls & (1u << a->coll)) || !x->supported(n, a)) {
            continue;
        }
        double c = x->cost_us(n, a, NULL_MODEL);
        if (best == NULL || c < best_cost) {
            best      = x;
            best_cost = c;
        }
    }
    return best;
}

static void test_registry_sizes(void)
{
    static const int ns[] = {4, 6, 8, 16};
    coll_args_t      a    = {.coll        = COLL_OP_ALLREDUCE,
                             .dtype       = COLL_FLOAT32,
                             .op          = COLL_SUM,
                             .root        = -1,
                             .chunk_bytes = 512 << 10};

    for (size_t i = 0; i < COLL_ARRAY_SIZE(ns); i++) {
        const coll_algo_t *small, *medium, *large;

        a.count = 2; /* 8 bytes */
        small   = algo_cheapest(ns[i], &a);
        ASSERT_TRUE(coll_algo_select(ns[i], &a, NULL, NULL, NULL) == small);
        a.count = 64 << 10; /* 256 KiB */
        medium  = algo_cheapest(ns[i], &a);
        ASSERT_TRUE(coll_algo_select(ns[i], &a, NULL, NULL, NULL) == medium);
        a.count = 16 << 20; /* 64 MiB */
        large   = algo_cheapest(ns[i], &a);
        ASSERT_TRUE(coll_algo_select(ns[i], &a, NULL, NULL, NULL) == large);
        if (verbose) {
            printf("n=%d: 8 B %s, 256 KiB %s, 64 MiB %s\n", ns[i], small->name, medium->name,
                   large->name);
        }
        /* latency-bound: fewest rounds; bandwidth-bound: a bandwidth-optimal algorithm */
        ASSERT_TRUE(strcmp(small->name, "recursive_doubling") == 0);
        ASSERT_TRUE(strcmp(large->name, "ring") == 0 || strcmp(large->name, "rabenseifner") == 0);
    }
    a.count = 2;
    ASSERT_TRUE(coll_algo_select(8, &a, "allreduce:rabenseifner", NULL, NULL) ==
                coll_algo_registry_find("rabenseifner"));
}

/* Across hosts with a slow network the hierarchical algorithm takes the large messages; on one
 * host it never runs. */
static void test_registry_hosts(void)
{
    coll_model_t  m;
    coll_layout_t l2, l1;
    coll_args_t   a = {.coll        = COLL_OP_ALLREDUCE,
                       .count       = 4 << 20, /* 16 MiB */
                       .dtype       = COLL_FLOAT32,
                       .op          = COLL_SUM,
                       .root        = -1,
                       .chunk_bytes = 256 << 10};
    double        hier_cost, ring_cost;

    coll_model_default(&m);
    m.inter.beta_us_per_byte = 1e6 / 125e6; /* 1 Gbit/s */
    ASSERT_OK(coll_layout_init_blocks(&l2, 4, 2));
    ASSERT_OK(coll_layout_init_blocks(&l1, 4, 1));
    ASSERT_TRUE(l2.nhosts == 2 && l2.local_size == 2 && l2.contiguous);
    a.layout  = &l2;
    hier_cost = coll_algo_registry_find("hier")->cost_us(4, &a, &m);
    ring_cost = coll_algo_registry_find("ring")->cost_us(4, &a, &m);
    ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, &m, NULL)->name, "hier") == 0);
    /* the ring crosses the slow link with 2 (n-1)/n of the data, hier with the whole vector */
    ASSERT_TRUE(ring_cost > 1.3 * hier_cost);
    a.coll  = COLL_OP_REDUCE_SCATTER;
    a.count = 1 << 20;
    ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, &m, NULL)->name, "hier") == 0);
    a.layout = &l1;
    for (int c = 0; c < 2; c++) {
        a.coll = c == 0 ? COLL_OP_ALLREDUCE : COLL_OP_ALLGATHER;
        ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, &m, NULL)->name, "hier") != 0);
        ASSERT_TRUE(!coll_algo_registry_find("hier")->supported(4, &a));
    }
    coll_layout_fini(&l2);
    coll_layout_fini(&l1);
}

static void test_registry(void)
{
    coll_args_t        a    = {.coll        = COLL_OP_ALLREDUCE,
                               .count       = 1000,
                               .dtype       = COLL_FLOAT32,
                               .op          = COLL_SUM,
                               .root        = -1,
                               .chunk_bytes = 4096};
    const coll_algo_t *ring = coll_algo_registry_find("ring");

    ASSERT_TRUE(coll_algo_registry_count() >= 4);
    ASSERT_TRUE(ring != NULL);
    ASSERT_TRUE(coll_algo_registry_find("nope") == NULL);
    ASSERT_TRUE(coll_algo_registry_get(coll_algo_registry_count()) == NULL);
    ASSERT_TRUE(strcmp(coll_op_name(COLL_OP_REDUCE_SCATTER), "reduce_scatter") == 0);
    ASSERT_TRUE(strcmp(coll_op_name(COLL_OP_COUNT), "invalid") == 0);
    for (int op = 0; op < COLL_OP_COUNT; op++) {
        const coll_algo_t *sel;

        a.coll = (coll_op_t)op;
        a.root = (op == COLL_OP_SEND || op == COLL_OP_RECV || op == COLL_OP_BROADCAST) ? 1 : -1;
        a.root = (op == COLL_OP_REDUCE) ? 2 : a.root;
        sel    = coll_algo_select(4, &a, NULL, NULL, NULL);
        ASSERT_TRUE(sel != NULL && (sel->colls & (1u << op)) != 0);
        ASSERT_TRUE(sel->cost_us(4, &a, NULL_MODEL) >= 0.0);
        ASSERT_TRUE(coll_algo_select(4, &a, "ring", NULL, NULL) == ring ||
                    (ring->colls & (1u << op)) == 0);
    }
    a = (coll_args_t){.coll        = COLL_OP_ALLREDUCE,
                      .count       = 10,
                      .dtype       = COLL_FLOAT32,
                      .root        = -1,
                      .chunk_bytes = 64};
    ASSERT_TRUE(coll_algo_select(4, &a, "allreduce:ring", NULL, NULL) == ring);
    ASSERT_TRUE(coll_algo_select(4, &a, " allgather:ring , allreduce : ring", NULL, NULL) == ring);
    ASSERT_TRUE(coll_algo_select(4, &a, "pairwise", NULL, NULL) ==
                coll_algo_select(4, &a, NULL, NULL, NULL)); /* falls
                                     back */
    fprintf(stderr, "(one warning about an unknown algorithm is expected)\n");
    ASSERT_TRUE(coll_algo_select(4, &a, "bogus,nocoll:ring,allreduce:bogus", NULL, NULL) ==
                coll_algo_select(4, &a, NULL, NULL, NULL));
    test_registry_sizes();
    test_registry_hosts();
    a.coll     = COLL_OP_ALLTOALL;
    a.in_place = 1;
    ASSERT_TRUE(coll_algo_select(4, &a, NULL, NULL, NULL) ==
                NULL); /* alltoall in place: invalid call */
}

/* Tag space: a call needing more than 2^32 tags is refused before anything is allocated. */
static void test_tag_limits(void)
{
    coll_args_t  a = {.coll        = COLL_OP_ALLREDUCE,
                      .count       = (size_t)3 << 31,
                      .dtype       = COLL_INT32,
                      .op          = COLL_SUM,
                      .root        = -1,
                      .chunk_bytes = 4};
    coll_sched_t s;

    if (sizeof(size_t) < 8) {
        return;
    }
    fprintf(stderr, "(two errors about tag and chunk limits are expected)\n");
    coll_sched_init(&s, 0, 3, a.dtype, a.op);
    ASSERT_TRUE(coll_algo_registry_find("ring")->build(0, 3, &a, &s) == COLL_ERR_UNSUPPORTED);
    ASSERT_EQ(s.nsteps, 0);
    coll_sched_destroy(&s);
    a.count = (size_t)1 << 34;
    coll_sched_init(&s, 0, 2, a.dtype, a.op);
    ASSERT_TRUE(coll_algo_registry_find("ring")->build(0, 2, &a, &s) == COLL_ERR_UNSUPPORTED);
    coll_sched_destroy(&s);
}

int main(int argc, char **argv)
{
    int quick = 0;

    /* Thousands of cases allocate and free the same buffer sizes: keep them in the heap
     * instead of mapping and unmapping (and page-faulting) them every time. */
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
    for (int i = 1; i < argc; i++) {
        verbose |= strcmp(argv[i], "-v") == 0;
        quick |= strcmp(argv[i], "-q") == 0;
    }
    fprintf(stderr, "(two errors about a finalized schedule and a bad dependency are expected)\n");
    test_sched_errors();
    {
        char err[512];

        if (sim_selftest(err, sizeof(err)) != 0) {
            fprintf(stderr, "FAIL simulator self-test: %s\n", err);
            abort();
        }
    }
    test_registry();
    test_tag_limits();
    test_structure();
    test_trees();
    test_bit_identity();
    for (int i = 0; i < coll_algo_registry_count(); i++) {
        const coll_algo_t *a = coll_algo_registry_get(i);

        for (int op = 0; op < COLL_OP_COUNT; op++) {
            if ((a->colls & (1u << op)) == 0) {
                continue;
            }
            if (op == COLL_OP_BARRIER) {
                sweep_barrier(a);
            } else if (op != COLL_OP_RECV) { /* SEND runs both sides */
                sweep_coll(a, (coll_op_t)op, quick);
            }
        }
    }
    printf("test_sched: %" PRIu64 " cases passed (%" PRIu64 " simulator events)\n", ncases,
           nevents);
    return 0;
}
