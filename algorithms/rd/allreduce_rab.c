/* SPDX-License-Identifier: MIT */
/*
 * Rabenseifner allreduce: a recursive-halving reduce-scatter (log2(p) rounds, each exchanging
 * half of the current window with rank ^ mask and reducing the kept half) and a recursive-
 * doubling allgather that retraces the rounds, after the same fold as recursive doubling for
 * rank counts that are not a power of two. Every block is reduced on one rank only, so all
 * ranks end with the same bits. Transfers are cut into chunk_bytes pieces; dependencies are
 * exact per overlapping piece. For medium messages. Builds one rank's schedule.
 */
#include "rd/rd.h"

#include <string.h>
#include "error.h"
#include "log.h"
#include "util.h"

/* A step that wrote or read elements [lo, hi) of one buffer. */
typedef struct rab_piece {
    uint64_t lo, hi;
    int      step;
} rab_piece_t;

/* Pieces sorted by lo, not overlapping. */
typedef struct rab_list {
    rab_piece_t *p;
    size_t       n;
} rab_list_t;

typedef struct rab_ctx {
    int            rank;
    coll_rd_fold_t f;
    size_t         esize;
    size_t         count;
    size_t         ce;      /* elements per piece, >= 1 */
    uint64_t       npieces; /* pieces of the whole vector: the tag stride of a round */
    coll_buf_id_t  in;
    int            in_place;
} rab_ctx_t;

/* First element of block b of p2 nearly equal blocks. */
static uint64_t rab_bstart(const rab_ctx_t *x, int b)
{
    size_t q = x->count / (size_t)x->f.p2, rem = x->count % (size_t)x->f.p2;
    return (uint64_t)b * q + ((size_t)b < rem ? (size_t)b : rem);
}

/* step waits for every piece of l that overlaps [lo, hi). */
static void rab_deps(coll_sched_t *s, int step, const rab_list_t *l, uint64_t lo, uint64_t hi)
{
    size_t a = 0, b = l->n;

    while (a < b) { /* first piece ending after lo */
        size_t mid = (a + b) / 2;
        if (l->p[mid].hi <= lo) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    for (; a < l->n && l->p[a].lo < hi; a++) {
        coll_sched_dep(s, step, l->p[a].step);
    }
}

typedef enum { RAB_SEND, RAB_RECV, RAB_RECV_REDUCE } rab_kind_t;

/*
 * Elements [lo, hi) in pieces of ce: one step of kind per piece with tags tag_base + i, each
 * waiting for the overlapping pieces of dep; appended to out when out != NULL. The operand of a
 * RECV_REDUCE is the same range of src; the destination is always RECV.
 */
static void rab_range(coll_sched_t *s, const rab_ctx_t *x, rab_kind_t kind, int peer,
                      uint64_t tag_base, coll_buf_id_t src, uint64_t lo, uint64_t hi,
                      const rab_list_t *dep, rab_list_t *out)
{
    uint32_t i = 0;

    for (uint64_t e = lo; e < hi; e += x->ce, i++) {
        uint64_t end = (hi - e < x->ce) ? hi : e + x->ce, off = e * x->esize;
        uint64_t len = (end - e) * x->esize;
        uint32_t tag = (uint32_t)(tag_base + i);
        int      st;

        if (kind == RAB_SEND) {
            st = coll_sched_send(s, peer, tag, src, off, len);
        } else if (kind == RAB_RECV) {
            st = coll_sched_recv(s, peer, tag, COLL_BUF_RECV, off, len);
        } else {
            st = coll_sched_recv_reduce(s, peer, tag, COLL_BUF_RECV, off, src, off, len);
        }
        if (dep != NULL) {
            rab_deps(s, st, dep, e, end);
        }
        if (out != NULL) {
            out->p[out->n++] = (rab_piece_t){.lo = e, .hi = end, .step = st};
        }
    }
}

/* Core rank, blocks: the window of mask m around core rank nr is [nr & ~(m - 1), + m). */
static uint64_t rab_win_lo(const rab_ctx_t *x, int nr, int m)
{
    return rab_bstart(x, nr & ~(m - 1));
}

static uint64_t rab_win_hi(const rab_ctx_t *x, int nr, int m)
{
    return rab_bstart(x, (nr & ~(m - 1)) + m);
}

/*
 * Reduce-scatter rounds k = 0 .. log2p-1 with mask p2 >> (k+1): send the partner's half of the
 * window, reduce the own half. acc: where the running result starts (the input or, after a
 * fold, RECV); prev: the steps that wrote it (empty for the input). The own block's writers
 * end up in prev; round k's sends in sends[k] (the allgather later overwrites those ranges).
 */
static void rab_reduce_scatter(coll_sched_t *s, const rab_ctx_t *x, coll_buf_id_t acc,
                               rab_list_t *prev, rab_list_t *next, rab_list_t *sends)
{
    int nr = x->f.newrank;

    for (int k = 0; k < x->f.log2p; k++) {
        int           m = x->f.p2 >> (k + 1), peer = coll_rd_fold_real(&x->f, nr ^ m);
        uint64_t      tb  = (uint64_t)(1 + k) * x->npieces;
        coll_buf_id_t src = (k == 0) ? acc : COLL_BUF_RECV;
        rab_list_t    swap;

        next->n = 0;
        rab_range(s, x, RAB_SEND, peer, tb, src, rab_win_lo(x, nr ^ m, m), rab_win_hi(x, nr ^ m, m),
                  prev, &sends[k]);
        rab_range(s, x, RAB_RECV_REDUCE, peer, tb, src, rab_win_lo(x, nr, m), rab_win_hi(x, nr, m),
                  prev, next);
        swap  = *prev;
        *prev = *next;
        *next = swap;
    }
}

/*
 * Allgather rounds j = 0 .. log2p-1 with mask 2^j: send the own window (waiting for its
 * writers in win), receive the partner's window into RECV (waiting for the reduce-scatter
 * send that read it) and merge it into win, which ends covering the whole vector.
 */
static void rab_allgather(coll_sched_t *s, const rab_ctx_t *x, rab_list_t *win, rab_list_t *got,
                          rab_list_t *tmp, const rab_list_t *sends)
{
    int nr = x->f.newrank;

    for (int j = 0; j < x->f.log2p; j++) {
        int        m = 1 << j, peer = coll_rd_fold_real(&x->f, nr ^ m);
        uint64_t   tb = (uint64_t)(1 + x->f.log2p + j) * x->npieces;
        rab_list_t swap;

        got->n = 0;
        rab_range(s, x, RAB_SEND, peer, tb, COLL_BUF_RECV, rab_win_lo(x, nr, m),
                  rab_win_hi(x, nr, m), win, NULL);
        rab_range(s, x, RAB_RECV, peer, tb, COLL_BUF_RECV, rab_win_lo(x, nr ^ m, m),
                  rab_win_hi(x, nr ^ m, m), &sends[x->f.log2p - 1 - j], got);
        tmp->n = 0;
        if ((nr & m) != 0) { /* the partner's window lies below */
            memcpy(tmp->p, got->p, got->n * sizeof(rab_piece_t));
            memcpy(tmp->p + got->n, win->p, win->n * sizeof(rab_piece_t));
        } else {
            memcpy(tmp->p, win->p, win->n * sizeof(rab_piece_t));
            memcpy(tmp->p + win->n, got->p, got->n * sizeof(rab_piece_t));
        }
        tmp->n = got->n + win->n;
        swap   = *win;
        *win   = *tmp;
        *tmp   = swap;
    }
}

/* Core rank (possibly after receiving a folded vector); lists has log2p + 3 lists of cap. */
static void rab_core(coll_sched_t *s, const rab_ctx_t *x, int avg, rab_list_t *lists)
{
    rab_list_t   *prev = &lists[0], *next = &lists[1], *tmp = &lists[2], *sends = &lists[3];
    int           keeps   = coll_rd_fold_keeps(&x->f, x->rank);
    uint64_t      tag_out = (uint64_t)(1 + 2 * x->f.log2p) * x->npieces;
    coll_buf_id_t acc     = x->in;

    if (keeps) { /* fold: RECV = op(input, partner's input) over the whole vector */
        rab_range(s, x, RAB_RECV_REDUCE, x->rank + 1, 0, x->in, 0, x->count, NULL, prev);
        acc = COLL_BUF_RECV;
    }
    rab_reduce_scatter(s, x, acc, prev, next, sends);
    if (avg) { /* the one division, on the block's owner only */
        for (size_t i = 0; i < prev->n; i++) {
            rab_piece_t *p = &prev->p[i];
            int dv = coll_sched_div(s, COLL_BUF_RECV, p->lo * x->esize, (p->hi - p->lo) * x->esize);
            coll_sched_dep(s, dv, p->step);
            p->step = dv;
        }
    }
    rab_allgather(s, x, prev, next, tmp, sends);
    if (keeps) {
        rab_range(s, x, RAB_SEND, x->rank + 1, tag_out, COLL_BUF_RECV, 0, x->count, prev, NULL);
    }
}

/* A rank that sits out: send the input down, receive the result. */
static void rab_folded(coll_sched_t *s, const rab_ctx_t *x, rab_list_t *sent)
{
    uint64_t tag_out = (uint64_t)(1 + 2 * x->f.log2p) * x->npieces;

    rab_range(s, x, RAB_SEND, x->rank - 1, 0, x->in, 0, x->count, NULL, sent);
    rab_range(s, x, RAB_RECV, x->rank - 1, tag_out, COLL_BUF_RECV, 0, x->count,
              x->in_place ? sent : NULL, NULL);
}

coll_result_t coll_rab_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                       coll_sched_t *s)
{
    rab_ctx_t     x;
    rab_list_t   *lists;
    rab_piece_t  *pieces;
    size_t        cap, nlists;
    coll_result_t st;

    if (nranks == 1 || args->count == 0 || coll_dtype_size(args->dtype) == 0) {
        return coll_rd_allreduce_build(rank, nranks, args, s); /* copy, nothing, or the error */
    }
    x.rank  = rank;
    x.esize = coll_dtype_size(args->dtype);
    x.count = args->count;
    x.ce    = args->chunk_bytes / x.esize;
    x.ce    = (x.ce == 0) ? 1 : x.ce;
    coll_rd_fold_init(&x.f, rank, nranks);
    x.npieces  = x.count / x.ce + (x.count % x.ce != 0 ? 1 : 0);
    x.in_place = args->in_place;
    x.in       = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    COLL_CHECK(coll_sched_tags_fit((uint64_t)(2 + 2 * x.f.log2p) * x.npieces, "rabenseifner"));

    /* a list is a union of at most log2p + 1 ranges, each cut on its own piece grid */
    cap    = x.npieces + (size_t)x.f.log2p + 2;
    nlists = (size_t)x.f.log2p + 3;
    lists  = coll_calloc(nlists, sizeof(*lists), "rabenseifner lists");
    pieces = coll_malloc(nlists * cap * sizeof(*pieces), "rabenseifner pieces");
    if (lists == NULL || pieces == NULL) {
        st = COLL_ERR_NO_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < nlists; i++) {
        lists[i].p = pieces + i * cap;
    }
    if (x.f.newrank < 0) {
        rab_folded(s, &x, &lists[0]);
    } else {
        rab_core(s, &x, args->op == COLL_AVG, lists);
    }
    st = s->build_error;
out:
    coll_free(pieces);
    coll_free(lists);
    return st;
}
