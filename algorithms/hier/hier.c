/* SPDX-License-Identifier: MIT */
/*
 * Hierarchical collectives, composed from flat ones on sub-communicators:
 *   allreduce:      local reduce_scatter -> rail allreduce of this rank's slice -> local allgather
 *                   (count % local_size trailing elements: one flat allreduce over every rank);
 *   reduce_scatter: blocks permuted into scratch so each rank's host-wide super-block is
 *                   contiguous -> local reduce_scatter -> rail reduce_scatter -> own block out;
 *   allgather:      own block into the permuted scratch -> rail allgather -> local allgather ->
 *                   blocks back in rank order.
 * A rail is the ranks with one local rank on every host; the L rails run at once. Each part is
 * the tuner's pick for its size and link (compose.c), and parts overlap chunk by chunk.
 */
#include "hier/hier.h"

#include "error.h"
#include "hier/compose.h"
#include "log.h"
#include "util.h"

#include <string.h>

typedef struct hier_ctx {
    const coll_layout_t *l;
    int                  L, H, lr, h;
    int                 *rail;  /* H ranks: local rank lr of every host */
    int                 *world; /* 0 .. n-1 (the tail's "sub-communicator") */
    coll_embed_t         local, railx;
    coll_model_t         mi, mr; /* models of the local parts and of the rails */
    size_t               esize;
    uint32_t             tag;
} hier_ctx_t;

int coll_hier_supported(int nranks, const coll_args_t *args)
{
    const coll_layout_t *l = args->layout;

    if (l == NULL || l->nhosts < 2 || l->local_size < 2 || l->nranks != nranks ||
        coll_dtype_size(args->dtype) == 0 || args->count == 0) {
        return 0;
    }
    switch (args->coll) {
    case COLL_OP_ALLREDUCE:
        return args->count >= (size_t)l->local_size;
    case COLL_OP_REDUCE_SCATTER:
    case COLL_OP_ALLGATHER:
        return 1;
    default:
        return 0;
    }
}

/* Local parts run on the intra-host link; a rail on the inter-host link, the L rails of a host
 * sharing its m->inter_nics NICs (one each when there are L of them). A rail is a communicator
 * of one rank per host, so inside it every message crosses hosts on that share. */
static void hier_models(const coll_model_t *m, int L, coll_model_t *mi, coll_model_t *mr)
{
    *mi                        = *m;
    mi->inter                  = m->intra;
    *mr                        = *m;
    mr->intra                  = m->inter;
    mr->intra.beta_us_per_byte = coll_model_inter_beta(m, L);
    mr->inter                  = mr->intra;
    mr->inter_nics             = 1;
}

static void hier_embed(coll_embed_t *e, const int *ranks, int n, int rank)
{
    e->ranks  = ranks;
    e->nranks = n;
    e->rank   = rank;
    for (int b = 0; b < COLL_BUF_COUNT; b++) {
        e->buf[b] = (coll_buf_id_t)b;
        e->off[b] = 0;
    }
}

static void hier_map(coll_embed_t *e, coll_buf_id_t sub, coll_buf_id_t parent, uint64_t off)
{
    e->buf[sub] = parent;
    e->off[sub] = off;
}

static coll_args_t hier_sub_args(const coll_args_t *args, coll_op_t coll, size_t count,
                                 int in_place)
{
    coll_args_t a = *args;

    a.coll     = coll;
    a.count    = count;
    a.op       = (args->op == COLL_AVG) ? COLL_SUM : args->op;
    a.root     = -1;
    a.in_place = in_place;
    a.layout   = NULL;
    return a;
}

static coll_result_t hier_ctx_init(hier_ctx_t *c, int rank, int nranks, const coll_args_t *args)
{
    const coll_model_t *m = args->model;
    coll_model_t        dflt;

    memset(c, 0, sizeof(*c));
    if (m == NULL) {
        coll_model_default(&dflt);
        m = &dflt;
    }
    c->l     = args->layout;
    c->L     = c->l->local_size;
    c->H     = c->l->nhosts;
    c->lr    = c->l->local_rank[rank];
    c->h     = c->l->host_of[rank];
    c->esize = coll_dtype_size(args->dtype);
    c->rail  = coll_calloc((size_t)c->H, sizeof(int), "rail ranks");
    c->world = coll_calloc((size_t)nranks, sizeof(int), "ranks");
    if (c->rail == NULL || c->world == NULL) {
        coll_free(c->rail);
        coll_free(c->world);
        return COLL_ERR_NO_MEMORY;
    }
    for (int g = 0; g < c->H; g++) {
        c->rail[g] = coll_layout_rank(c->l, g, c->lr);
    }
    for (int r = 0; r < nranks; r++) {
        c->world[r] = r;
    }
    hier_embed(&c->local, c->l->host_ranks + c->l->host_start[c->h], c->L, c->lr);
    hier_embed(&c->railx, c->rail, c->H, c->h);
    hier_models(m, c->L, &c->mi, &c->mr);
    return COLL_OK;
}

static void hier_ctx_fini(hier_ctx_t *c)
{
    coll_free(c->rail);
    coll_free(c->world);
}

/* One DIV over the whole result for AVG, after every part that touches it. */
static void hier_avg(coll_sched_t *s, const coll_args_t *args, coll_buf_id_t buf, uint64_t off,
                     uint64_t len, const coll_part_t *parts, int nparts)
{
    coll_part_t div;

    if (args->op != COLL_AVG || len == 0) {
        return;
    }
    div.first = s->nsteps;
    coll_sched_div(s, buf, off, len);
    div.last = s->nsteps;
    for (int p = 0; p < nparts; p++) {
        coll_compose_hazards(s, parts[p], div);
    }
}

static coll_result_t hier_allreduce(hier_ctx_t *c, int nranks, const coll_args_t *args,
                                    coll_sched_t *s)
{
    size_t        blk = args->count / (size_t)c->L, rem = args->count % (size_t)c->L;
    uint64_t      slice = (uint64_t)c->lr * blk * c->esize, tail = (uint64_t)c->L * blk * c->esize;
    coll_part_t   parts[4];
    int           np = 0;
    coll_args_t   a;
    coll_embed_t  e;
    coll_result_t st;

    /* local reduce_scatter: this rank's host-wide sum of slice lr lands at RECV + slice */
    a = hier_sub_args(args, COLL_OP_REDUCE_SCATTER, blk, args->in_place);
    e = c->local;
    if (args->in_place) {
        hier_map(&e, COLL_BUF_SEND, COLL_BUF_RECV, 0);
    } else {
        hier_map(&e, COLL_BUF_RECV, COLL_BUF_RECV, slice);
    }
    COLL_CHECK(coll_compose(s, &a, &e, &c->mi, &c->tag, NULL, 0, &parts[np]));
    np++;
    /* the rail: allreduce of the slice across hosts, in place */
    a = hier_sub_args(args, COLL_OP_ALLREDUCE, blk, 1);
    e = c->railx;
    hier_map(&e, COLL_BUF_RECV, COLL_BUF_RECV, slice);
    COLL_CHECK(coll_compose(s, &a, &e, &c->mr, &c->tag, parts, np, &parts[np]));
    np++;
    /* local allgather of the slices, in place */
    a = hier_sub_args(args, COLL_OP_ALLGATHER, blk, 1);
    e = c->local;
    COLL_CHECK(coll_compose(s, &a, &e, &c->mi, &c->tag, parts, np, &parts[np]));
    np++;
    if (rem > 0) { /* the last count % L elements: a flat allreduce of every rank */
        coll_embed_t w;
        a = hier_sub_args(args, COLL_OP_ALLREDUCE, rem, args->in_place);
        hier_embed(&w, c->world, nranks, s->rank);
        hier_map(&w, COLL_BUF_SEND, args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND, tail);
        hier_map(&w, COLL_BUF_RECV, COLL_BUF_RECV, tail);
        st = coll_compose(s, &a, &w, &c->mr, &c->tag, NULL, 0, &parts[np]);
        COLL_CHECK(st);
        np++;
    }
    hier_avg(s, args, COLL_BUF_RECV, 0, (uint64_t)args->count * c->esize, parts, np);
    return s->build_error;
}

/* Scratch holding all n blocks, super-block l (the H blocks of local rank l) contiguous. */
static uint64_t hier_perm_off(const hier_ctx_t *c, int l, int g, size_t blk)
{
    return ((uint64_t)l * (uint64_t)c->H + (uint64_t)g) * blk * c->esize;
}

static coll_result_t hier_reduce_scatter(hier_ctx_t *c, const coll_args_t *args, coll_sched_t *s)
{
    size_t        blk   = args->count;
    uint64_t      bytes = (uint64_t)blk * c->esize, base = s->scratch_bytes;
    coll_buf_id_t src = COLL_BUF_SEND; /* the input, in place or not */
    coll_part_t   parts[4];
    coll_args_t   a;
    coll_embed_t  e;

    s->scratch_bytes += (uint64_t)c->l->nranks * bytes;
    parts[0].first = s->nsteps;
    for (int g = 0; g < c->H; g++) {
        for (int l = 0; l < c->L; l++) {
            int q = coll_layout_rank(c->l, g, l);
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_SCRATCH,
                                    base + hier_perm_off(c, l, g, blk), src, (uint64_t)q * bytes,
                                    bytes);
        }
    }
    parts[0].last = s->nsteps;
    a             = hier_sub_args(args, COLL_OP_REDUCE_SCATTER, (size_t)c->H * blk, 1);
    e             = c->local;
    hier_map(&e, COLL_BUF_SEND, COLL_BUF_SCRATCH, base);
    COLL_CHECK(coll_compose(s, &a, &e, &c->mi, &c->tag, parts, 1, &parts[1]));
    a = hier_sub_args(args, COLL_OP_REDUCE_SCATTER, blk, 1);
    e = c->railx;
    hier_map(&e, COLL_BUF_SEND, COLL_BUF_SCRATCH, base + hier_perm_off(c, c->lr, 0, blk));
    COLL_CHECK(coll_compose(s, &a, &e, &c->mr, &c->tag, parts, 2, &parts[2]));
    parts[3].first = s->nsteps;
    if (args->in_place) {
        coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_SEND, (uint64_t)s->rank * bytes,
                                COLL_BUF_SCRATCH, base + hier_perm_off(c, c->lr, c->h, blk), bytes);
    } else {
        coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SCRATCH,
                                base + hier_perm_off(c, c->lr, c->h, blk), bytes);
    }
    parts[3].last = s->nsteps;
    for (int p = 0; p < 3; p++) {
        coll_compose_hazards(s, parts[p], parts[3]);
    }
    if (args->in_place) {
        hier_avg(s, args, COLL_BUF_SEND, (uint64_t)s->rank * bytes, bytes, parts, 4);
    } else {
        hier_avg(s, args, COLL_BUF_RECV, 0, bytes, parts, 4);
    }
    return s->build_error;
}

static coll_result_t hier_allgather(hier_ctx_t *c, const coll_args_t *args, coll_sched_t *s)
{
    size_t       blk   = args->count;
    uint64_t     bytes = (uint64_t)blk * c->esize, base = s->scratch_bytes;
    coll_part_t  parts[4];
    coll_args_t  a;
    coll_embed_t e;

    s->scratch_bytes += (uint64_t)c->l->nranks * bytes;
    parts[0].first = s->nsteps;
    if (args->in_place) {
        coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_SCRATCH,
                                base + hier_perm_off(c, c->lr, c->h, blk), COLL_BUF_RECV,
                                (uint64_t)s->rank * bytes, bytes);
    } else {
        coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_SCRATCH,
                                base + hier_perm_off(c, c->lr, c->h, blk), COLL_BUF_SEND, 0, bytes);
    }
    parts[0].last = s->nsteps;
    a             = hier_sub_args(args, COLL_OP_ALLGATHER, blk, 1);
    e             = c->railx;
    hier_map(&e, COLL_BUF_RECV, COLL_BUF_SCRATCH, base + hier_perm_off(c, c->lr, 0, blk));
    COLL_CHECK(coll_compose(s, &a, &e, &c->mr, &c->tag, parts, 1, &parts[1]));
    a = hier_sub_args(args, COLL_OP_ALLGATHER, (size_t)c->H * blk, 1);
    e = c->local;
    hier_map(&e, COLL_BUF_RECV, COLL_BUF_SCRATCH, base);
    COLL_CHECK(coll_compose(s, &a, &e, &c->mi, &c->tag, parts, 2, &parts[2]));
    parts[3].first = s->nsteps;
    for (int g = 0; g < c->H; g++) {
        for (int l = 0; l < c->L; l++) {
            int q = coll_layout_rank(c->l, g, l);
            if (args->in_place && q == s->rank) {
                continue; /* already there */
            }
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, (uint64_t)q * bytes,
                                    COLL_BUF_SCRATCH, base + hier_perm_off(c, l, g, blk), bytes);
        }
    }
    parts[3].last = s->nsteps;
    for (int p = 0; p < 3; p++) {
        coll_compose_hazards(s, parts[p], parts[3]);
    }
    return s->build_error;
}

coll_result_t coll_hier_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    hier_ctx_t    c;
    coll_result_t st;

    if (!coll_hier_supported(nranks, args)) {
        coll_error(ALGO, "hier cannot run this %s (needs >= 2 hosts with equal rank counts)",
                   coll_op_name(args->coll));
        return COLL_ERR_UNSUPPORTED;
    }
    COLL_CHECK(hier_ctx_init(&c, rank, nranks, args));
    switch (args->coll) {
    case COLL_OP_ALLREDUCE:
        st = hier_allreduce(&c, nranks, args, s);
        break;
    case COLL_OP_REDUCE_SCATTER:
        st = hier_reduce_scatter(&c, args, s);
        break;
    default:
        st = hier_allgather(&c, args, s);
        break;
    }
    hier_ctx_fini(&c);
    return st;
}

/* ---- cost: the parts' predicted times, in sequence (overlap is a bonus) ---- */

static double hier_part_cost(int n, const coll_args_t *a, const coll_model_t *m)
{
    double cost = 0.0;

    (void)coll_algo_select(n, a, NULL, m, &cost);
    return cost;
}

double coll_hier_cost(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_layout_t *l = args->layout;
    coll_model_t         mi, mr;
    coll_args_t          a;
    int                  L, H;
    double               blk, copy; /* copy: the running total in the allreduce case */

    if (!coll_hier_supported(nranks, args)) {
        return 1e30;
    }
    L = l->local_size;
    H = l->nhosts;
    hier_models(m, L, &mi, &mr);
    switch (args->coll) {
    case COLL_OP_ALLREDUCE:
        blk    = (double)(args->count / (size_t)L);
        a      = hier_sub_args(args, COLL_OP_REDUCE_SCATTER, (size_t)blk, 0);
        copy   = hier_part_cost(L, &a, &mi);
        a.coll = COLL_OP_ALLREDUCE;
        copy += hier_part_cost(H, &a, &mr);
        a.coll = COLL_OP_ALLGATHER;
        return copy + hier_part_cost(L, &a, &mi);
    case COLL_OP_REDUCE_SCATTER:
    case COLL_OP_ALLGATHER:
        copy = 2.0 * (double)nranks * (double)args->count * (double)coll_dtype_size(args->dtype) *
               m->intra.beta_us_per_byte / 2.0;
        a = hier_sub_args(args, args->coll, args->count, 1);
        {
            double rail = hier_part_cost(H, &a, &mr);
            a.count     = (size_t)H * args->count;
            return copy + rail + hier_part_cost(L, &a, &mi);
        }
    default:
        return 1e30;
    }
}
