/* SPDX-License-Identifier: MIT */
/*
 * Bruck allgather: scratch holds the blocks rotated so that the own block comes first; in
 * round k (distance d = 2^k) a rank sends its first min(d, n - d) blocks to rank - d and
 * appends as many from rank + d, so after ceil(log2 n) rounds scratch block i is rank + i's.
 * One local rotation then puts the blocks in rank order into recvbuf. Any rank count; for
 * small and medium messages. Builds one rank's schedule; runs nothing.
 */
#include "basic/basic.h"

#include "error.h"
#include "log.h"
#include "util.h"

/* A step that wrote scratch elements [lo, hi). */
typedef struct bruck_piece {
    uint64_t lo, hi;
    int      step;
} bruck_piece_t;

typedef struct bruck_ctx {
    size_t         esize;
    size_t         ce;     /* elements per piece, >= 1 */
    uint32_t       stride; /* tag stride of a round: pieces of the whole vector */
    bruck_piece_t *w;      /* scratch writers, sorted by lo, not overlapping */
    size_t         nw;
} bruck_ctx_t;

/* step waits for every writer of scratch that overlaps [lo, hi). */
static void bruck_deps(coll_sched_t *s, const bruck_ctx_t *x, int step, uint64_t lo, uint64_t hi)
{
    size_t a = 0, b = x->nw;

    while (a < b) { /* first writer ending after lo */
        size_t mid = (a + b) / 2;
        if (x->w[mid].hi <= lo) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    for (; a < x->nw && x->w[a].lo < hi; a++) {
        coll_sched_dep(s, step, x->w[a].step);
    }
}

/* Copies count elements from (src, src_off) to scratch [lo, hi) and records the writers. */
static void bruck_fill(coll_sched_t *s, bruck_ctx_t *x, coll_buf_id_t src, uint64_t src_off,
                       uint64_t lo, uint64_t hi)
{
    for (uint64_t e = lo; e < hi; e += x->ce) {
        uint64_t end = (hi - e < x->ce) ? hi : e + x->ce;
        int      st  = coll_sched_copy(s, COLL_BUF_SCRATCH, e * x->esize, src,
                                       src_off + (e - lo) * x->esize, (end - e) * x->esize);

        x->w[x->nw++] = (bruck_piece_t){.lo = e, .hi = end, .step = st};
    }
}

/*
 * Round k: scratch [0, len) goes to `to`, [d0, d0 + len) arrives from `from`, both cut into
 * the same pieces relative to their start so that sender and receiver agree on lengths and
 * tags. The sends wait for the writers of what they read; the receives write elements nothing
 * has touched yet (sends read below d0 only) and become writers.
 */
static void bruck_round(coll_sched_t *s, bruck_ctx_t *x, int k, int to, int from, uint64_t d0,
                        uint64_t len)
{
    uint32_t i = 0;

    for (uint64_t e = 0; e < len; e += x->ce, i++) {
        uint64_t n   = (len - e < x->ce) ? len - e : x->ce;
        uint32_t tag = (uint32_t)k * x->stride + i;
        int      sd  = coll_sched_send(s, to, tag, COLL_BUF_SCRATCH, e * x->esize, n * x->esize);
        int rv = coll_sched_recv(s, from, tag, COLL_BUF_SCRATCH, (d0 + e) * x->esize, n * x->esize);

        bruck_deps(s, x, sd, e, e + n);
        x->w[x->nw++] = (bruck_piece_t){.lo = d0 + e, .hi = d0 + e + n, .step = rv};
    }
}

/* The rotation: scratch [lo, hi) to recvbuf from dst_off, in pieces after their writers. */
static void bruck_unrotate(coll_sched_t *s, const bruck_ctx_t *x, uint64_t lo, uint64_t hi,
                           uint64_t dst_off)
{
    for (uint64_t e = lo; e < hi; e += x->ce) {
        uint64_t end = (hi - e < x->ce) ? hi : e + x->ce;
        int st = coll_sched_copy(s, COLL_BUF_RECV, dst_off + (e - lo) * x->esize, COLL_BUF_SCRATCH,
                                 e * x->esize, (end - e) * x->esize);

        bruck_deps(s, x, st, e, end);
    }
}

static coll_result_t bruck_rounds(coll_sched_t *s, bruck_ctx_t *x, int rank, int n, size_t count)
{
    uint64_t total = (uint64_t)n * count, r = (uint64_t)rank;
    int      k = 0;

    for (long long d = 1; d < n; d *= 2, k++) {
        long long cnt = (d < n - d) ? d : n - d;

        bruck_round(s, x, k, (int)((rank - d + n) % n), (int)((rank + d) % n), (uint64_t)d * count,
                    (uint64_t)cnt * count);
    }
    /* scratch block i is rank + i's: blocks 1 .. n-r-1 go after the own block, the rest first */
    bruck_unrotate(s, x, count, (n - r) * count, (r + 1) * count * x->esize);
    bruck_unrotate(s, x, (n - r) * count, total, 0);
    return s->build_error;
}

coll_result_t coll_bruck_allgather_build(int rank, int nranks, const coll_args_t *args,
                                         coll_sched_t *s)
{
    bruck_ctx_t   x     = {.esize = coll_dtype_size(args->dtype)};
    size_t        total = args->count * (size_t)nranks;
    uint64_t      own;
    uint32_t      nchunks;
    int           rounds = 0;
    coll_result_t st;

    if (nranks < 1 || rank < 0 || rank >= nranks || total / (size_t)nranks != args->count) {
        coll_error(ALGO, "bad bruck allgather: count %zu, rank %d of %d", args->count, rank,
                   nranks);
        return COLL_ERR_INVALID_ARG;
    }
    COLL_CHECK(coll_basic_chunks(args, total, "bruck allgather", &x.ce, &nchunks));
    if (args->count == 0) {
        return COLL_OK;
    }
    own = (uint64_t)rank * args->count * x.esize;
    for (uint64_t e = 0; e < args->count && !args->in_place; e += x.ce) {
        uint64_t n = (args->count - e < x.ce) ? args->count - e : x.ce;
        coll_sched_copy(s, COLL_BUF_RECV, own + e * x.esize, COLL_BUF_SEND, e * x.esize,
                        n * x.esize);
    }
    if (nranks == 1) {
        return s->build_error;
    }
    for (long long d = 1; d < nranks; d *= 2) {
        rounds++;
    }
    COLL_CHECK(coll_sched_tags_fit((uint64_t)rounds * nchunks, "bruck allgather"));
    x.stride         = nchunks;
    s->scratch_bytes = total * x.esize;
    /* writers: the own block's pieces, then each round's range, each cut from its start */
    x.w = coll_malloc(((size_t)nchunks + (size_t)rounds + 2) * sizeof(*x.w), "bruck writers");
    if (x.w == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    bruck_fill(s, &x, args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND, args->in_place ? own : 0, 0,
               args->count);
    st = bruck_rounds(s, &x, rank, nranks, args->count);
    coll_free(x.w);
    return st;
}
