/* SPDX-License-Identifier: MIT */
/*
 * The schedule matrix without a network: every algorithm x collective x rank count x count x
 * in/out/mixed place x dtype x op (and host layouts for composed and window algorithms) built,
 * checked, simulated under several random interleavings and compared with a reference
 * (sched_case.c); barrier causality; allreduce results identical in every bit on every rank.
 * Usage: test_sched_matrix [-v] [-q (quick)].
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algo.h"
#include "coll_test.h"
#include "compiler.h"
#include "reduce/reduce.h"
#include "sched_case.h"
#include "sim.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

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
        tproc_bind(&procs[p], &s[p], &t[p]);
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

/* Host layouts a composed algorithm is tried on: blocks of consecutive ranks, ranks dealt
 * round-robin, and round-robin with each host's ranks listed backwards (local rank 0 is the
 * host's highest rank, as a topology order may list them), in 2 hosts and (when they divide)
 * 4; for a window algorithm one shared host; for the ring and the trees one host whose order
 * visits the ranks out of rank order (a different permutation for every n, none of them the
 * identity when n > 1); empty for a flat algorithm (NULL layout). */
static int sweep_layouts(const coll_algo_t *a, int n, coll_layout_t *ls, int max)
{
    int k = 0;

    if (needs_window(a)) {
        window_layout(&ls[k++], n);
        return k;
    }
    if (strcmp(a->name, "ring") == 0 || strcmp(a->name, "tree") == 0) {
        int      order[MAX_RANKS];
        uint64_t state = 12345u + (uint64_t)n;

        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        for (int i = n - 1; i > 0; i--) { /* Fisher-Yates, then make sure it moved something */
            int j = (int)(coll_test_rand(&state) % (uint64_t)(i + 1)), x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        if (n > 1 && order[0] == 0 && order[1] == 1) {
            order[0] = 1;
            order[1] = 0;
        }
        ASSERT_OK(coll_layout_init_blocks(&ls[k], n, 1));
        ASSERT_OK(coll_layout_set_ring(&ls[k++], order));
        return k;
    }
    if (strcmp(a->name, "hier") != 0) {
        return 0;
    }
    for (int h = 2; h <= 4 && k + 3 <= max; h *= 2) {
        uint64_t keys[MAX_RANKS];
        int      order[MAX_RANKS];
        if (n % h != 0 || n / h < 2) {
            continue;
        }
        ASSERT_OK(coll_layout_init_blocks(&ls[k++], n, h));
        for (int r = 0; r < n; r++) {
            keys[r] = (uint64_t)(r % h);
        }
        ASSERT_OK(coll_layout_init(&ls[k++], n, keys));
        for (int i = 0; i < n; i++) {
            order[i] = n - 1 - i;
        }
        ASSERT_OK(coll_layout_init(&ls[k], n, keys));
        ASSERT_OK(coll_layout_set_local(&ls[k++], order));
    }
    return k;
}

static void sweep_coll(const coll_algo_t *a, coll_op_t coll, int quick)
{
    for (size_t ni = 0; ni < COLL_ARRAY_SIZE(rank_counts); ni++) {
        coll_layout_t layouts[6];
        int           n    = rank_counts[ni];
        int           nl   = sweep_layouts(a, n, layouts, 6);
        int           flat = nl == 0 && strcmp(a->name, "hier") != 0; /* NULL layout */

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
        tproc_bind(&procs[r], &s[r], &ranks[r]);
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
    printf("test_sched_matrix: %" PRIu64 " cases passed (%" PRIu64 " simulator events)\n", ncases,
           nevents);
    return 0;
}
