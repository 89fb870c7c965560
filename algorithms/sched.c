/* SPDX-License-Identifier: MIT */
/*
 * Schedules: growable step and edge arrays filled by the algorithms, finalize (edges into CSR
 * successor lists and dependency counts), a stand-alone validity check and a printer. This file
 * knows nothing about any particular algorithm and never touches buffers, windows or the network.
 */
#include "sched.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "log.h"
#include "util.h"

/* Builders return int step indices, so a schedule holds at most INT32_MAX steps. */
#define SCHED_MAX_STEPS ((uint32_t)INT32_MAX)
#define SCHED_MIN_CAP   16u

void coll_sched_init(coll_sched_t *s, int rank, int nranks, coll_dtype_t dtype, coll_redop_t op)
{
    memset(s, 0, sizeof(*s));
    s->rank        = rank;
    s->nranks      = nranks;
    s->dtype       = dtype;
    s->op          = (op == COLL_AVG) ? COLL_SUM : op; /* the algorithm adds the DIV steps */
    s->build_error = COLL_OK;
}

void coll_sched_destroy(coll_sched_t *s)
{
    if (s == NULL) {
        return;
    }
    coll_free(s->steps);
    coll_free(s->succ);
    coll_free(s->edges);
    memset(s, 0, sizeof(*s));
}

static void sched_fail(coll_sched_t *s, coll_result_t st)
{
    if (s->build_error == COLL_OK) {
        s->build_error = st;
    }
}

/* Appends a step; every field not set by the caller is zero. */
static int sched_push(coll_sched_t *s, const coll_step_t *st)
{
    if (s->build_error != COLL_OK) {
        return -1;
    }
    if (s->finalized) {
        coll_error(ALGO, "step added to a finalized schedule");
        sched_fail(s, COLL_ERR_INTERNAL);
        return -1;
    }
    if (s->nsteps == s->cap) {
        uint32_t     cap = (s->cap == 0) ? SCHED_MIN_CAP : s->cap * 2;
        coll_step_t *steps;

        if (s->cap >= SCHED_MAX_STEPS) {
            coll_error(ALGO, "schedule needs more than %u steps", SCHED_MAX_STEPS);
            sched_fail(s, COLL_ERR_UNSUPPORTED);
            return -1;
        }
        if (cap > SCHED_MAX_STEPS || cap < s->cap) {
            cap = SCHED_MAX_STEPS;
        }
        steps = coll_realloc(s->steps, (size_t)cap * sizeof(*steps), "schedule steps");
        if (steps == NULL) {
            sched_fail(s, COLL_ERR_NO_MEMORY);
            return -1;
        }
        s->steps = steps;
        s->cap   = cap;
    }
    s->steps[s->nsteps] = *st;
    return (int)s->nsteps++;
}

int coll_sched_append(coll_sched_t *s, const coll_step_t *st)
{
    coll_step_t copy = *st;

    copy.ndeps = copy.succ_start = copy.succ_count = 0;
    return sched_push(s, &copy);
}

int coll_sched_send(coll_sched_t *s, int peer, uint32_t tag, coll_buf_id_t buf, uint64_t off,
                    uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_SEND,
                      .src_buf = buf,
                      .peer    = peer,
                      .tag     = tag,
                      .src_off = off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_recv(coll_sched_t *s, int peer, uint32_t tag, coll_buf_id_t buf, uint64_t off,
                    uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_RECV,
                      .dst_buf = buf,
                      .peer    = peer,
                      .tag     = tag,
                      .dst_off = off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_recv_reduce(coll_sched_t *s, int peer, uint32_t tag, coll_buf_id_t dst_buf,
                           uint64_t dst_off, coll_buf_id_t operand_buf, uint64_t operand_off,
                           uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_RECV_REDUCE,
                      .dst_buf = dst_buf,
                      .src_buf = operand_buf,
                      .peer    = peer,
                      .tag     = tag,
                      .dst_off = dst_off,
                      .src_off = operand_off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_copy(coll_sched_t *s, coll_buf_id_t dst_buf, uint64_t dst_off, coll_buf_id_t src_buf,
                    uint64_t src_off, uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_COPY,
                      .dst_buf = dst_buf,
                      .src_buf = src_buf,
                      .peer    = -1,
                      .dst_off = dst_off,
                      .src_off = src_off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_reduce(coll_sched_t *s, coll_buf_id_t dst_buf, uint64_t dst_off,
                      coll_buf_id_t src_buf, uint64_t src_off, uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_REDUCE,
                      .dst_buf = dst_buf,
                      .src_buf = src_buf,
                      .peer    = -1,
                      .dst_off = dst_off,
                      .src_off = src_off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_div(coll_sched_t *s, coll_buf_id_t buf, uint64_t off, uint64_t len)
{
    coll_step_t st = {
        .kind = COLL_STEP_DIV, .dst_buf = buf, .peer = -1, .dst_off = off, .len = len};
    return sched_push(s, &st);
}

int coll_sched_put(coll_sched_t *s, uint32_t slot, uint64_t win_off, coll_buf_id_t buf,
                   uint64_t off, uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_PUT,
                      .src_buf = buf,
                      .peer    = -1,
                      .tag     = slot,
                      .src_off = off,
                      .win_off = win_off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_get(coll_sched_t *s, int peer, uint32_t slot, uint64_t win_off, coll_buf_id_t buf,
                   uint64_t off, uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_GET,
                      .dst_buf = buf,
                      .peer    = peer,
                      .tag     = slot,
                      .dst_off = off,
                      .win_off = win_off,
                      .len     = len};
    return sched_push(s, &st);
}

int coll_sched_get_reduce(coll_sched_t *s, int peer, uint32_t slot, uint64_t win_off,
                          coll_buf_id_t dst_buf, uint64_t dst_off, coll_buf_id_t operand_buf,
                          uint64_t operand_off, uint64_t len)
{
    coll_step_t st = {.kind    = COLL_STEP_GET_REDUCE,
                      .dst_buf = dst_buf,
                      .src_buf = operand_buf,
                      .peer    = peer,
                      .tag     = slot,
                      .dst_off = dst_off,
                      .src_off = operand_off,
                      .win_off = win_off,
                      .len     = len};
    return sched_push(s, &st);
}

/* Edges always point from a lower to a higher index, so no schedule can contain a cycle. */
void coll_sched_dep(coll_sched_t *s, int step, int after)
{
    if (step < 0 || after < 0 || s->build_error != COLL_OK) {
        return;
    }
    if ((uint32_t)step >= s->nsteps || after >= step || s->finalized) {
        coll_error(ALGO, "bad dependency: step %d after step %d (%u steps%s)", step, after,
                   s->nsteps, s->finalized ? ", finalized" : "");
        sched_fail(s, COLL_ERR_INTERNAL);
        return;
    }
    if (s->nedges == s->edges_cap) {
        uint32_t  cap = (s->edges_cap == 0) ? SCHED_MIN_CAP : s->edges_cap * 2;
        uint32_t *e;

        if (cap < s->edges_cap || cap > UINT32_MAX / 2) {
            coll_error(ALGO, "schedule has too many dependencies");
            sched_fail(s, COLL_ERR_UNSUPPORTED);
            return;
        }
        e = coll_realloc(s->edges, (size_t)cap * 2 * sizeof(*e), "schedule edges");
        if (e == NULL) {
            sched_fail(s, COLL_ERR_NO_MEMORY);
            return;
        }
        s->edges     = e;
        s->edges_cap = cap;
    }
    s->edges[2 * s->nedges]     = (uint32_t)after; /* from */
    s->edges[2 * s->nedges + 1] = (uint32_t)step;  /* to */
    s->nedges++;
}

/*
 * Counting sort of the edges by source (O(steps + edges)), then one pass that drops duplicate
 * edges with a "last source seen" mark per target and counts the dependencies.
 */
coll_result_t coll_sched_finalize(coll_sched_t *s)
{
    uint32_t *succ = NULL, *mark = NULL;
    uint32_t  i, e, w = 0, pos = 0;

    if (s->build_error != COLL_OK) {
        return s->build_error;
    }
    if (s->finalized) {
        return COLL_OK;
    }
    if (s->nedges > 0) {
        succ = coll_malloc((size_t)s->nedges * sizeof(*succ), "schedule successors");
        mark = coll_calloc(s->nsteps, sizeof(*mark), "schedule finalize marks");
        if (succ == NULL || mark == NULL) {
            coll_free(succ);
            coll_free(mark);
            s->build_error = COLL_ERR_NO_MEMORY;
            return COLL_ERR_NO_MEMORY;
        }
    }
    s->nwin      = 0;
    s->win_bytes = 0;
    for (i = 0; i < s->nsteps; i++) {
        const coll_step_t *st = &s->steps[i];

        s->steps[i].succ_count = 0;
        s->steps[i].ndeps      = 0;
        if (coll_step_is_win(st->kind)) {
            s->nwin++;
            if (st->win_off + st->len > s->win_bytes && st->win_off + st->len >= st->win_off) {
                s->win_bytes = st->win_off + st->len;
            }
        }
    }
    for (e = 0; e < s->nedges; e++) {
        s->steps[s->edges[2 * e]].succ_count++;
    }
    for (i = 0; i < s->nsteps; i++) {
        s->steps[i].succ_start = pos;
        pos += s->steps[i].succ_count;
        s->steps[i].succ_count = 0;
    }
    for (e = 0; e < s->nedges; e++) {
        coll_step_t *from                           = &s->steps[s->edges[2 * e]];
        succ[from->succ_start + from->succ_count++] = s->edges[2 * e + 1];
    }
    /* Compact in place: w never overtakes the read position. */
    for (i = 0; i < s->nsteps; i++) {
        uint32_t start = s->steps[i].succ_start, end = start + s->steps[i].succ_count;
        uint32_t first = w;

        for (e = start; e < end; e++) {
            uint32_t to = succ[e];
            if (mark[to] != i + 1) {
                mark[to]  = i + 1;
                succ[w++] = to;
                s->steps[to].ndeps++;
            }
        }
        s->steps[i].succ_start = first;
        s->steps[i].succ_count = w - first;
    }
    coll_free(mark);
    coll_free(s->edges);
    s->edges     = NULL;
    s->nedges    = 0;
    s->edges_cap = 0;
    s->succ      = succ;
    s->nsucc     = w;
    s->finalized = 1;
    return COLL_OK;
}

static const char *sched_buf_name(unsigned buf)
{
    static const char *const names[COLL_BUF_COUNT] = {"send", "recv", "scratch"};
    return (buf < COLL_BUF_COUNT) ? names[buf] : "badbuf";
}

const char *coll_step_kind_name(coll_step_kind_t kind)
{
    static const char *const names[COLL_STEP_KIND_COUNT] = {
        "send", "recv", "recv_reduce", "copy", "reduce", "div", "put", "get", "get_reduce"};
    return ((unsigned)kind < COLL_STEP_KIND_COUNT) ? names[kind] : "invalid";
}

/* Which buffers a step kind reads (src) and writes (dst). */
static int step_uses_src(unsigned kind)
{
    return kind == COLL_STEP_SEND || kind == COLL_STEP_RECV_REDUCE || kind == COLL_STEP_COPY ||
           kind == COLL_STEP_REDUCE || kind == COLL_STEP_PUT || kind == COLL_STEP_GET_REDUCE;
}

static int step_uses_dst(unsigned kind)
{
    return kind != COLL_STEP_SEND && kind != COLL_STEP_PUT;
}

static int step_is_comm(unsigned kind)
{
    return kind == COLL_STEP_SEND || kind == COLL_STEP_RECV || kind == COLL_STEP_RECV_REDUCE;
}

/* One buffer reference: valid id, no overflow, inside the scratch area when it is scratch. */
static int check_range(const coll_sched_t *s, unsigned buf, uint64_t off, uint64_t len)
{
    if (buf >= COLL_BUF_COUNT || off + len < off) {
        return 0;
    }
    return buf != COLL_BUF_SCRATCH || off + len <= (uint64_t)s->scratch_bytes;
}

/* Window steps: a slot that exists, a window owner that exists (self allowed for GET*, PUT has
 * none), and a window range finalize accounted for. */
static int check_win(const coll_sched_t *s, uint32_t i, char *msg, size_t msglen)
{
    const coll_step_t *st  = &s->steps[i];
    int                put = st->kind == COLL_STEP_PUT;

    if (st->tag >= COLL_SCHED_WIN_SLOTS) {
        snprintf(msg, msglen, "step %u: window slot %u out of range", i, st->tag);
        return 0;
    }
    if (put ? st->peer != -1 : (st->peer < 0 || st->peer >= s->nranks)) {
        snprintf(msg, msglen, "step %u: bad window owner %d (rank %d of %d)", i, st->peer, s->rank,
                 s->nranks);
        return 0;
    }
    if (st->win_off + st->len < st->win_off || st->win_off + st->len > s->win_bytes) {
        snprintf(msg, msglen, "step %u: window range %" PRIu64 "+%" PRIu64 " beyond %" PRIu64, i,
                 st->win_off, st->len, s->win_bytes);
        return 0;
    }
    return 1;
}

static int ranges_overlap(uint64_t a, uint64_t b, uint64_t len)
{
    return len > 0 && a < b + len && b < a + len;
}

static int check_step(const coll_sched_t *s, uint32_t i, size_t esize, char *msg, size_t msglen)
{
    const coll_step_t *st = &s->steps[i];
    const char        *k  = coll_step_kind_name((coll_step_kind_t)st->kind);

    if (st->kind >= COLL_STEP_KIND_COUNT) {
        snprintf(msg, msglen, "step %u: invalid kind %u", i, st->kind);
        return 0;
    }
    if (st->len % esize != 0) {
        snprintf(msg, msglen, "step %u (%s): len %" PRIu64 " not a multiple of %zu", i, k, st->len,
                 esize);
        return 0;
    }
    if (step_is_comm(st->kind) && (st->peer < 0 || st->peer >= s->nranks || st->peer == s->rank)) {
        snprintf(msg, msglen, "step %u (%s): bad peer %d (rank %d of %d)", i, k, st->peer, s->rank,
                 s->nranks);
        return 0;
    }
    if (coll_step_is_win(st->kind) && !check_win(s, i, msg, msglen)) {
        return 0;
    }
    if (step_uses_src(st->kind) && !check_range(s, st->src_buf, st->src_off, st->len)) {
        snprintf(msg, msglen,
                 "step %u (%s): bad source %s+%" PRIu64 " len %" PRIu64 " (scratch %zu)", i, k,
                 sched_buf_name(st->src_buf), st->src_off, st->len, s->scratch_bytes);
        return 0;
    }
    if (step_uses_dst(st->kind) && !check_range(s, st->dst_buf, st->dst_off, st->len)) {
        snprintf(msg, msglen,
                 "step %u (%s): bad destination %s+%" PRIu64 " len %" PRIu64 " (scratch %zu)", i, k,
                 sched_buf_name(st->dst_buf), st->dst_off, st->len, s->scratch_bytes);
        return 0;
    }
    /* COPY must not overlap at all; reductions allow only an exact alias (kernel rule). */
    if (step_uses_src(st->kind) && step_uses_dst(st->kind) && st->src_buf == st->dst_buf &&
        ranges_overlap(st->src_off, st->dst_off, st->len) &&
        (st->kind == COLL_STEP_COPY || st->src_off != st->dst_off)) {
        snprintf(msg, msglen, "step %u (%s): source and destination overlap", i, k);
        return 0;
    }
    if ((uint64_t)st->succ_start + st->succ_count > s->nsucc) {
        snprintf(msg, msglen, "step %u: successor list out of range", i);
        return 0;
    }
    for (uint32_t j = 0; j < st->succ_count; j++) {
        uint32_t to = s->succ[st->succ_start + j];
        if (to <= i || to >= s->nsteps) {
            snprintf(msg, msglen, "step %u: bad successor %u", i, to);
            return 0;
        }
    }
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* No two sends to one peer, and no two receives from one peer, share a tag; no two PUTs share
 * a window slot (they count as sends to an impossible peer). */
static coll_result_t check_tags(const coll_sched_t *s, char *msg, size_t msglen)
{
    uint64_t     *keys = coll_malloc(((size_t)s->nsteps + 1) * sizeof(*keys), "tag check");
    coll_result_t st   = COLL_OK;
    uint32_t      i, n = 0;

    if (keys == NULL) {
        snprintf(msg, msglen, "out of memory");
        return COLL_ERR_NO_MEMORY;
    }
    /* key: direction bit 63, peer bits 32..62, tag bits 0..31 */
    for (i = 0; i < s->nsteps; i++) {
        const coll_step_t *p = &s->steps[i];
        if (step_is_comm(p->kind)) {
            uint64_t dir = (p->kind == COLL_STEP_SEND) ? 0 : 1;
            keys[n++]    = (dir << 63) | ((uint64_t)(uint32_t)p->peer << 32) | p->tag;
        } else if (p->kind == COLL_STEP_PUT) {
            keys[n++] = ((uint64_t)0x7fffffffu << 32) | p->tag;
        }
    }
    qsort(keys, n, sizeof(*keys), cmp_u64);
    for (i = 1; i < n; i++) {
        if (keys[i] == keys[i - 1]) {
            if (((keys[i] >> 32) & 0x7fffffffu) == 0x7fffffffu) {
                snprintf(msg, msglen, "two puts use window slot %u",
                         (unsigned)(keys[i] & 0xffffffffu));
                st = COLL_ERR_INTERNAL;
                break;
            }
            snprintf(msg, msglen, "two %s %s peer %u use tag %u",
                     (keys[i] >> 63) ? "receives" : "sends", (keys[i] >> 63) ? "from" : "to",
                     (unsigned)((keys[i] >> 32) & 0x7fffffffu), (unsigned)(keys[i] & 0xffffffffu));
            st = COLL_ERR_INTERNAL;
            break;
        }
    }
    coll_free(keys);
    return st;
}

int coll_sched_device_fits(const coll_sched_t *s, int (*peer_ok)(void *arg, int peer), void *arg,
                           char *why, size_t whylen)
{
    char scratch[8];
    if (why == NULL) {
        why    = scratch;
        whylen = sizeof(scratch);
    }
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const coll_step_t *st = &s->steps[i];
        if (st->kind == COLL_STEP_RECV_REDUCE || coll_step_is_win(st->kind)) {
            snprintf(why, whylen, "step %u is %s", i, coll_step_kind_name(st->kind));
            return 0;
        }
        if (st->src_buf == COLL_BUF_SCRATCH || st->dst_buf == COLL_BUF_SCRATCH) {
            snprintf(why, whylen, "step %u (%s) uses scratch memory", i,
                     coll_step_kind_name(st->kind));
            return 0;
        }
        if ((st->kind == COLL_STEP_SEND || st->kind == COLL_STEP_RECV) && !peer_ok(arg, st->peer)) {
            snprintf(why, whylen,
                     "step %u (%s) goes to rank %d, whose transport cannot move "
                     "device memory",
                     i, coll_step_kind_name(st->kind), (int)st->peer);
            return 0;
        }
    }
    return 1;
}

coll_result_t coll_sched_check(const coll_sched_t *s, char *msg, size_t msglen)
{
    uint32_t     *indeg;
    size_t        esize = coll_dtype_size(s->dtype);
    coll_result_t st    = COLL_ERR_INTERNAL;
    uint32_t      i;

    if (!s->finalized) {
        snprintf(msg, msglen, "schedule not finalized");
        return COLL_ERR_INTERNAL;
    }
    if (esize == 0 || (unsigned)s->op >= COLL_REDOP_COUNT || s->op == COLL_AVG || s->nranks < 1 ||
        s->rank < 0 || s->rank >= s->nranks) {
        snprintf(msg, msglen, "bad header: rank %d of %d, dtype %d, op %d", s->rank, s->nranks,
                 (int)s->dtype, (int)s->op);
        return COLL_ERR_INTERNAL;
    }
    indeg = coll_calloc((size_t)s->nsteps + 1, sizeof(*indeg), "schedule check");
    if (indeg == NULL) {
        snprintf(msg, msglen, "out of memory");
        return COLL_ERR_NO_MEMORY;
    }
    for (i = 0; i < s->nsteps; i++) {
        if (!check_step(s, i, esize, msg, msglen)) {
            goto out;
        }
        for (uint32_t j = 0; j < s->steps[i].succ_count; j++) {
            indeg[s->succ[s->steps[i].succ_start + j]]++;
        }
    }
    for (i = 0; i < s->nsteps; i++) {
        if (indeg[i] != s->steps[i].ndeps) {
            snprintf(msg, msglen, "step %u: ndeps %u but %u predecessors", i, s->steps[i].ndeps,
                     indeg[i]);
            goto out;
        }
    }
    st = check_tags(s, msg, msglen);
out:
    coll_free(indeg);
    return st;
}

static void print_step(const coll_sched_t *s, uint32_t i, FILE *out)
{
    const coll_step_t *st = &s->steps[i];
    const char        *sb = sched_buf_name(st->src_buf), *db = sched_buf_name(st->dst_buf);

    fprintf(out, "%6u %-11s ", i, coll_step_kind_name((coll_step_kind_t)st->kind));
    switch (st->kind) {
    case COLL_STEP_SEND:
        fprintf(out, "peer %d tag %u %s+%" PRIu64, st->peer, st->tag, sb, st->src_off);
        break;
    case COLL_STEP_RECV:
        fprintf(out, "peer %d tag %u -> %s+%" PRIu64, st->peer, st->tag, db, st->dst_off);
        break;
    case COLL_STEP_RECV_REDUCE:
        fprintf(out, "peer %d tag %u %s+%" PRIu64 " = op(%s+%" PRIu64 ", in)", st->peer, st->tag,
                db, st->dst_off, sb, st->src_off);
        break;
    case COLL_STEP_COPY:
        fprintf(out, "%s+%" PRIu64 " <- %s+%" PRIu64, db, st->dst_off, sb, st->src_off);
        break;
    case COLL_STEP_REDUCE:
        fprintf(out, "%s+%" PRIu64 " op= %s+%" PRIu64, db, st->dst_off, sb, st->src_off);
        break;
    case COLL_STEP_PUT:
        fprintf(out, "slot %u win+%" PRIu64 " <- %s+%" PRIu64, st->tag, st->win_off, sb,
                st->src_off);
        break;
    case COLL_STEP_GET:
        fprintf(out, "peer %d slot %u win+%" PRIu64 " -> %s+%" PRIu64, st->peer, st->tag,
                st->win_off, db, st->dst_off);
        break;
    case COLL_STEP_GET_REDUCE:
        fprintf(out, "peer %d slot %u %s+%" PRIu64 " = op(%s+%" PRIu64 ", win+%" PRIu64 ")",
                st->peer, st->tag, db, st->dst_off, sb, st->src_off, st->win_off);
        break;
    default:
        fprintf(out, "%s+%" PRIu64 " /= %d", db, st->dst_off, s->nranks);
        break;
    }
    fprintf(out, " len %" PRIu64 " deps %u", st->len, st->ndeps);
    if (s->finalized && st->succ_count > 0) {
        fprintf(out, " ->");
        for (uint32_t j = 0; j < st->succ_count; j++) {
            fprintf(out, " %u", s->succ[st->succ_start + j]);
        }
    }
    fputc('\n', out);
}

void coll_sched_print(const coll_sched_t *s, FILE *out)
{
    fprintf(out,
            "schedule rank %d of %d, %s %s, %u steps, %u edges, scratch %zu bytes, window %" PRIu64
            " bytes%s\n",
            s->rank, s->nranks, coll_dtype_name(s->dtype), coll_redop_name(s->op), s->nsteps,
            s->finalized ? s->nsucc : s->nedges, s->scratch_bytes, s->win_bytes,
            s->finalized ? "" : " (not finalized)");
    for (uint32_t i = 0; i < s->nsteps; i++) {
        print_step(s, i, out);
    }
}

void coll_sched_copy_chunked(coll_sched_t *s, size_t chunk_bytes, coll_buf_id_t dst_buf,
                             uint64_t dst_off, coll_buf_id_t src_buf, uint64_t src_off,
                             uint64_t len)
{
    uint64_t esize = coll_dtype_size(s->dtype), piece, done;

    piece = (esize == 0) ? len : chunk_bytes - chunk_bytes % esize;
    if (piece == 0) {
        piece = esize;
    }
    for (done = 0; done < len; done += piece) {
        uint64_t n = (len - done < piece) ? len - done : piece;
        coll_sched_copy(s, dst_buf, dst_off + done, src_buf, src_off + done, n);
    }
}

coll_result_t coll_sched_tags_fit(uint64_t ntags, const char *what)
{
    if (ntags > (uint64_t)UINT32_MAX + 1) {
        coll_error(ALGO, "%s needs %llu tags, more than 32 bits hold; raise COLL_CHUNK_SIZE", what,
                   (unsigned long long)ntags);
        return COLL_ERR_UNSUPPORTED;
    }
    return COLL_OK;
}
