/* SPDX-License-Identifier: MIT */
/*
 * The algorithm table: every built-in algorithm with the collectives it implements, when it
 * applies, its cost function (cost.c) and its builders; lookup by name, and the selection of
 * one algorithm per call (COLL_ALGO-style override, else the cheapest under the caller's
 * model). It does not read the environment (the caller passes the override string and the
 * model) and does not measure anything (src/api/tune.c does).
 */
#include "algo.h"

#include <stdio.h>
#include <string.h>
#include "basic/basic.h"
#include "cost.h"
#include "hier/hier.h"
#include "log.h"
#include "rd/rd.h"
#include "ring/ring.h"
#include "tree/tree.h"
#include "window/window.h"

#define ALGO_BIT(_op) (1u << (_op))

static const char *const algo_op_names[COLL_OP_COUNT] = {[COLL_OP_ALLREDUCE] = "allreduce",
                                                         [COLL_OP_REDUCE_SCATTER] =
                                                             "reduce_scatter",
                                                         [COLL_OP_ALLGATHER] = "allgather",
                                                         [COLL_OP_BROADCAST] = "broadcast",
                                                         [COLL_OP_REDUCE]    = "reduce",
                                                         [COLL_OP_ALLTOALL]  = "alltoall",
                                                         [COLL_OP_BARRIER]   = "barrier",
                                                         [COLL_OP_SEND]      = "send",
                                                         [COLL_OP_RECV]      = "recv"};

const char *coll_op_name(coll_op_t op)
{
    return ((unsigned)op < COLL_OP_COUNT) ? algo_op_names[op] : "invalid";
}

/* ---- ring / chain ---- */

static int ring_supported(int nranks, const coll_args_t *args)
{
    if (nranks < 1 || coll_dtype_size(args->dtype) == 0) {
        return 0;
    }
    if (args->coll == COLL_OP_BROADCAST || args->coll == COLL_OP_REDUCE) {
        return args->root >= 0 && args->root < nranks;
    }
    return args->coll == COLL_OP_ALLREDUCE || args->coll == COLL_OP_REDUCE_SCATTER ||
           args->coll == COLL_OP_ALLGATHER;
}

/* Ring phases: every rank sends (n-1)/n of the data per phase in n-1 messages. Chains: the
 * pipeline fills in n-1 chunk times, then delivers one chunk per chunk time. */
static coll_result_t ring_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    switch (args->coll) {
    case COLL_OP_ALLREDUCE:
        return coll_ring_allreduce_build(rank, nranks, args, s);
    case COLL_OP_REDUCE_SCATTER:
        return coll_ring_reduce_scatter_build(rank, nranks, args, s);
    case COLL_OP_ALLGATHER:
        return coll_ring_allgather_build(rank, nranks, args, s);
    case COLL_OP_BROADCAST:
        return coll_ring_broadcast_build(rank, nranks, args, s);
    case COLL_OP_REDUCE:
        return coll_ring_reduce_build(rank, nranks, args, s);
    default:
        coll_error(ALGO, "ring does not implement %s", coll_op_name(args->coll));
        return COLL_ERR_UNSUPPORTED;
    }
}

/* ---- recursive doubling / Rabenseifner allreduce ---- */

static int rd_supported(int nranks, const coll_args_t *args)
{
    return nranks >= 1 && args->coll == COLL_OP_ALLREDUCE && coll_dtype_size(args->dtype) != 0;
}

/* ---- trees: allreduce through the double binary tree (as NCCL's "Tree"), broadcast and
 * reduce along one binary tree ---- */

static int tree_supported(int nranks, const coll_args_t *args)
{
    if (nranks < 1 || coll_dtype_size(args->dtype) == 0) {
        return 0;
    }
    if (args->coll == COLL_OP_ALLREDUCE) {
        return 1;
    }
    return (args->coll == COLL_OP_BROADCAST || args->coll == COLL_OP_REDUCE) && args->root >= 0 &&
           args->root < nranks;
}

static double tree_cost(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    return (args->coll == COLL_OP_ALLREDUCE) ? coll_cost_dbtree(nranks, args, m)
                                             : coll_cost_tree(nranks, args, m);
}

static coll_result_t tree_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    if (args->coll == COLL_OP_ALLREDUCE) {
        return coll_dbtree_allreduce_build(rank, nranks, args, s);
    }
    if (args->coll == COLL_OP_BROADCAST) {
        return coll_tree_broadcast_build(rank, nranks, args, s);
    }
    if (args->coll == COLL_OP_REDUCE) {
        return coll_tree_reduce_build(rank, nranks, args, s);
    }
    coll_error(ALGO, "tree does not implement %s", coll_op_name(args->coll));
    return COLL_ERR_UNSUPPORTED;
}

/* ---- recursive halving reduce_scatter ---- */

static int rh_supported(int nranks, const coll_args_t *args)
{
    return nranks >= 1 && args->coll == COLL_OP_REDUCE_SCATTER && coll_dtype_size(args->dtype) != 0;
}

/* log2(p) messages carrying (p-1)/p of the vector (count is the per-rank block); the fold
 * sends the whole vector down and one block back. */
/* ---- Bruck allgather ---- */

static int bruck_supported(int nranks, const coll_args_t *args)
{
    return nranks >= 1 && args->coll == COLL_OP_ALLGATHER && coll_dtype_size(args->dtype) != 0;
}

/* ---- pairwise alltoall ---- */

static int pairwise_supported(int nranks, const coll_args_t *args)
{
    return nranks >= 1 && args->coll == COLL_OP_ALLTOALL && !args->in_place &&
           coll_dtype_size(args->dtype) != 0;
}

/* ---- dissemination barrier ---- */

static int dissemination_supported(int nranks, const coll_args_t *args)
{
    return nranks >= 1 && args->coll == COLL_OP_BARRIER;
}

/* ---- direct send/recv ---- */

static int direct_supported(int nranks, const coll_args_t *args)
{
    return (args->coll == COLL_OP_SEND || args->coll == COLL_OP_RECV) && args->root >= 0 &&
           args->root < nranks && coll_dtype_size(args->dtype) != 0;
}

/* ---- the table ---- */

static const coll_algo_t algo_table[] = {
    {.name  = "ring",
     .desc  = "ring reduce-scatter/allgather, chained broadcast/reduce; chunk-pipelined",
     .colls = ALGO_BIT(COLL_OP_ALLREDUCE) | ALGO_BIT(COLL_OP_REDUCE_SCATTER) |
              ALGO_BIT(COLL_OP_ALLGATHER) | ALGO_BIT(COLL_OP_BROADCAST) | ALGO_BIT(COLL_OP_REDUCE),
     .supported = ring_supported,
     .cost_us   = coll_cost_ring,
     .build     = ring_build},
    {.name      = "recursive_doubling",
     .desc      = "allreduce in log2 n rounds of full-vector exchanges",
     .colls     = ALGO_BIT(COLL_OP_ALLREDUCE),
     .supported = rd_supported,
     .cost_us   = coll_cost_rd,
     .build     = coll_rd_allreduce_build},
    {.name      = "rabenseifner",
     .desc      = "halving reduce-scatter + doubling allgather",
     .colls     = ALGO_BIT(COLL_OP_ALLREDUCE),
     .supported = rd_supported,
     .cost_us   = coll_cost_rab,
     .build     = coll_rab_allreduce_build},
    {.name  = "tree",
     .desc  = "allreduce: halves reduced and broadcast through two complementary binary trees; "
              "broadcast/reduce: one binary tree; chunk-pipelined",
     .colls = ALGO_BIT(COLL_OP_ALLREDUCE) | ALGO_BIT(COLL_OP_BROADCAST) | ALGO_BIT(COLL_OP_REDUCE),
     .supported = tree_supported,
     .cost_us   = tree_cost,
     .build     = tree_build},
    {.name      = "recursive_halving",
     .desc      = "reduce_scatter in log2 n halving rounds",
     .colls     = ALGO_BIT(COLL_OP_REDUCE_SCATTER),
     .supported = rh_supported,
     .cost_us   = coll_cost_rh,
     .build     = coll_rh_reduce_scatter_build},
    {.name      = "bruck",
     .desc      = "allgather in ceil(log2 n) rounds, any n",
     .colls     = ALGO_BIT(COLL_OP_ALLGATHER),
     .supported = bruck_supported,
     .cost_us   = coll_cost_bruck,
     .build     = coll_bruck_allgather_build},
    {.name  = "hier",
     .desc  = "hierarchical: intra-host reduce_scatter/allgather around one inter-host rail "
              "per local rank (>= 2 hosts with equal rank counts)",
     .colls = ALGO_BIT(COLL_OP_ALLREDUCE) | ALGO_BIT(COLL_OP_REDUCE_SCATTER) |
              ALGO_BIT(COLL_OP_ALLGATHER),
     .supported = coll_hier_supported,
     .cost_us   = coll_hier_cost,
     .build     = coll_hier_build},
    {.name      = "oneshot",
     .desc      = "allreduce through shared-memory windows: every rank reduces every input "
                  "(one host, message fits the window)",
     .colls     = ALGO_BIT(COLL_OP_ALLREDUCE),
     .supported = coll_oneshot_supported,
     .cost_us   = coll_cost_oneshot,
     .build     = coll_oneshot_build},
    {.name      = "twoshot",
     .desc      = "allreduce through shared-memory windows: each rank reduces one segment, "
                  "all gather them (one host, message fits the window)",
     .colls     = ALGO_BIT(COLL_OP_ALLREDUCE),
     .supported = coll_twoshot_supported,
     .cost_us   = coll_cost_twoshot,
     .build     = coll_twoshot_build},
    {.name      = "pairwise",
     .desc      = "alltoall in n-1 rounds of exchanges with rank +k / -k, chunked",
     .colls     = ALGO_BIT(COLL_OP_ALLTOALL),
     .supported = pairwise_supported,
     .cost_us   = coll_cost_pairwise,
     .build     = coll_pairwise_alltoall_build},
    {.name      = "dissemination",
     .desc      = "barrier in ceil(log2 n) rounds of zero-byte messages",
     .colls     = ALGO_BIT(COLL_OP_BARRIER),
     .supported = dissemination_supported,
     .cost_us   = coll_cost_dissemination,
     .build     = coll_dissemination_barrier_build},
    {.name      = "direct",
     .desc      = "point-to-point send/recv, chunked",
     .colls     = ALGO_BIT(COLL_OP_SEND) | ALGO_BIT(COLL_OP_RECV),
     .supported = direct_supported,
     .cost_us   = coll_cost_direct,
     .build     = coll_direct_build},
};

/* algo_warn_skipped keeps one bit per algorithm */
_Static_assert(sizeof(algo_table) / sizeof(algo_table[0]) <= 64, "more algorithms than bits");

int coll_algo_registry_count(void)
{
    return (int)(sizeof(algo_table) / sizeof(algo_table[0]));
}

const coll_algo_t *coll_algo_registry_get(int i)
{
    return (i >= 0 && i < coll_algo_registry_count()) ? &algo_table[i] : NULL;
}

static const coll_algo_t *algo_find_n(const char *name, size_t len)
{
    for (int i = 0; i < coll_algo_registry_count(); i++) {
        if (strlen(algo_table[i].name) == len && strncmp(algo_table[i].name, name, len) == 0) {
            return &algo_table[i];
        }
    }
    return NULL;
}

const coll_algo_t *coll_algo_registry_find(const char *name)
{
    return (name == NULL) ? NULL : algo_find_n(name, strlen(name));
}

int coll_algo_applies(const coll_algo_t *a, int nranks, const coll_args_t *args)
{
    return (unsigned)args->coll < COLL_OP_COUNT && (a->colls & ALGO_BIT(args->coll)) != 0 &&
           a->supported(nranks, args);
}

/* One warning per process for a bad override, not one per call. */
static void algo_warn_once(const char *spec, const char *what, size_t len, const char *name)
{
    static int warned;

    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) == 0) {
        coll_warn(ALGO, "algorithm override \"%s\": unknown %s \"%.*s\" ignored", spec, what,
                  (int)len, name);
    }
}

static int algo_op_find_n(const char *name, size_t len)
{
    for (int op = 0; op < COLL_OP_COUNT; op++) {
        if (strlen(algo_op_names[op]) == len && strncmp(algo_op_names[op], name, len) == 0) {
            return op;
        }
    }
    return -1;
}

/* Name of an algorithm in the override: "auto" means no choice; unknown names warn. */
static const coll_algo_t *algo_spec_algo(const char *spec, const char *name, size_t len)
{
    const coll_algo_t *a = algo_find_n(name, len);

    if (a == NULL && !(len == 4 && strncmp(name, "auto", 4) == 0)) {
        algo_warn_once(spec, "algorithm", len, name);
    }
    return a;
}

static void algo_trim(const char **str, size_t *len)
{
    while (*len > 0 && (**str == ' ' || **str == '\t')) {
        (*str)++;
        (*len)--;
    }
    while (*len > 0 && ((*str)[*len - 1] == ' ' || (*str)[*len - 1] == '\t')) {
        (*len)--;
    }
}

/*
 * COLL_ALGO forced skipped for this call: a warning, once per process for each (collective,
 * algorithm), naming why and what runs instead (instead NULL: the library's own choice, which
 * may be the small-call path). Without it a forced algorithm that never runs goes unnoticed.
 */
static void algo_warn_skipped(const coll_algo_t *skipped, int nranks, const coll_args_t *args,
                              const coll_algo_t *instead)
{
    static uint64_t      warned[COLL_OP_COUNT];
    uint64_t             bit = 1ull << (skipped - algo_table);
    const coll_layout_t *l   = args->layout;
    char                 why[256];

    if ((unsigned)args->coll >= COLL_OP_COUNT ||
        (__atomic_fetch_or(&warned[args->coll], bit, __ATOMIC_RELAXED) & bit) != 0) {
        return;
    }
    if ((skipped->colls & ALGO_BIT(args->coll)) == 0) {
        snprintf(why, sizeof(why), "it does not implement %s", coll_op_name(args->coll));
    } else {
        snprintf(why, sizeof(why), "it cannot run %zu elements on %d ranks in %d host(s): %s",
                 args->count, nranks, l != NULL ? l->nhosts : 1, skipped->desc);
    }
    if (instead != NULL) {
        coll_warn(ALGO, "COLL_ALGO forces %s for %s, but %s; %s runs instead", skipped->name,
                  coll_op_name(args->coll), why, instead->name);
    } else {
        coll_warn(ALGO, "COLL_ALGO forces %s for %s, but %s; the library chooses instead",
                  skipped->name, coll_op_name(args->coll), why);
    }
}

/*
 * spec: comma-separated entries, each "algo" (for every collective it implements) or
 * "coll:algo". A per-collective entry beats a generic one; among equals the first wins.
 * Entries naming an algorithm that cannot run this call are skipped; *skipped_p gets the one
 * worth a warning (a per-collective entry, else a generic one implementing the collective
 * when no per-collective entry applies), or NULL.
 */
static const coll_algo_t *algo_override(int nranks, const coll_args_t *args, const char *spec,
                                        const coll_algo_t **skipped_p)
{
    const coll_algo_t *generic = NULL, *specific = NULL, *a;
    const coll_algo_t *skip_generic = NULL, *skip_specific = NULL;
    const char        *p = spec;
    int                op;

    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t      len = (end != NULL) ? (size_t)(end - p) : strlen(p);
        const char *tok = p, *colon, *name;
        size_t      clen, nlen;

        p = (end != NULL) ? end + 1 : p + len;
        algo_trim(&tok, &len);
        if (len == 0) {
            continue;
        }
        colon = memchr(tok, ':', len);
        if (colon == NULL) {
            a = algo_spec_algo(spec, tok, len);
            if (generic == NULL && a != NULL && coll_algo_applies(a, nranks, args)) {
                generic = a;
            } else if (a != NULL && (unsigned)args->coll < COLL_OP_COUNT &&
                       (a->colls & ALGO_BIT(args->coll)) != 0 &&
                       !coll_algo_applies(a, nranks, args) && skip_generic == NULL) {
                skip_generic = a;
            }
            continue;
        }
        clen = (size_t)(colon - tok);
        name = colon + 1;
        nlen = len - clen - 1;
        algo_trim(&tok, &clen);
        algo_trim(&name, &nlen);
        op = algo_op_find_n(tok, clen);
        if (op < 0) {
            algo_warn_once(spec, "collective", clen, tok);
            continue;
        }
        a = algo_spec_algo(spec, name, nlen);
        if (op == (int)args->coll && specific == NULL && a != NULL) {
            if (coll_algo_applies(a, nranks, args)) {
                specific = a;
            } else if (skip_specific == NULL) {
                skip_specific = a;
            }
        }
    }
    *skipped_p = skip_specific != NULL ? skip_specific : (specific == NULL ? skip_generic : NULL);
    return (specific != NULL) ? specific : generic;
}

int coll_algo_overridden(int nranks, const coll_args_t *args, const char *override)
{
    const coll_algo_t *skipped, *a;

    if (override == NULL) {
        return 0;
    }
    a = algo_override(nranks, args, override, &skipped);
    if (a == NULL && skipped != NULL) {
        algo_warn_skipped(skipped, nranks, args, NULL);
    }
    return a != NULL;
}

const coll_algo_t *coll_algo_select(int nranks, const coll_args_t *args, const char *override,
                                    const coll_model_t *m, double *cost_p)
{
    const coll_algo_t *best = NULL, *skipped = NULL;
    double             best_cost = -1.0;
    coll_model_t       dflt;

    if (override != NULL) {
        best = algo_override(nranks, args, override, &skipped);
        if (best != NULL) {
            if (skipped != NULL) {
                algo_warn_skipped(skipped, nranks, args, best);
            }
            if (cost_p != NULL) {
                *cost_p = -1.0;
            }
            return best;
        }
    }
    if (m == NULL) {
        coll_model_default(&dflt);
        m = &dflt;
    }
    for (int i = 0; i < coll_algo_registry_count(); i++) {
        const coll_algo_t *a = &algo_table[i];
        double             c;

        if (a->forced_only || !coll_algo_applies(a, nranks, args)) {
            continue;
        }
        c = a->cost_us(nranks, args, m);
        if (best == NULL || c < best_cost) {
            best      = a;
            best_cost = c;
        }
    }
    if (skipped != NULL) {
        algo_warn_skipped(skipped, nranks, args, best);
    }
    if (cost_p != NULL) {
        *cost_p = best_cost;
    }
    return best;
}
