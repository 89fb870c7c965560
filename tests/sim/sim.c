/* SPDX-License-Identifier: MIT */
/*
 * Schedule simulator. Events (start a ready step, finish a local step, deliver a message,
 * buffer an eager message) sit in one pool and a seeded generator picks the next one, so ready
 * steps start and messages arrive in random order with random delays. Every running step holds
 * per-byte marks on the regions it reads (count) or writes (-1); conflicting marks are data
 * hazards. Data is moved with the library's reduction kernels. Not a performance model.
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reduce/reduce.h"

enum { SIM_WAIT, SIM_READY, SIM_RUN, SIM_DONE };
enum { SIM_A_START, SIM_A_FINISH, SIM_A_DELIVER, SIM_A_BUFFER };

#define SIM_NONE UINT32_MAX

typedef struct {
    uint32_t type;
    uint32_t id; /* step (global id) or message index */
} sim_action_t;

typedef struct {
    uint32_t send, recv; /* global step ids */
    uint8_t  send_started, recv_started, send_done, delivered;
    void    *copy; /* eager data, captured when the send completed early */
} sim_msg_t;

/* A region a step touches: buffer, range, and whether it writes it. */
typedef struct {
    unsigned buf;
    uint64_t off, len;
    int      write;
} sim_region_t;

typedef struct {
    sim_proc_t   *procs;
    int           nprocs;
    uint32_t     *base; /* [proc] first global step id */
    uint32_t      total;
    uint32_t     *proc_of; /* [gid] */
    uint32_t     *deps;    /* [gid] unfinished predecessors */
    uint8_t      *state;   /* [gid] SIM_* */
    uint32_t     *msg_of;  /* [gid] message index or SIM_NONE */
    sim_msg_t    *msgs;
    uint32_t      nmsgs;
    sim_action_t *pool;
    uint32_t      npool;
    int16_t     **marks; /* [proc * COLL_BUF_COUNT + buf] per byte: -1 written, k > 0 read */
    uint64_t      rng;
    uint32_t      done;
    int           failed;
    char         *err;
    size_t        errlen;
    sim_stats_t   stats;
} sim_t;

static const char *const sim_buf_names[COLL_BUF_COUNT] = {"send", "recv", "scratch"};

static uint64_t sim_rand(sim_t *sim)
{
    uint64_t z = (sim->rng += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int sim_fail(sim_t *sim, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sim_fail(sim_t *sim, const char *fmt, ...)
{
    va_list ap;

    if (!sim->failed) {
        va_start(ap, fmt);
        vsnprintf(sim->err, sim->errlen, fmt, ap);
        va_end(ap);
        sim->failed = 1;
    }
    return -1;
}

static const coll_step_t *sim_step(const sim_t *sim, uint32_t gid)
{
    uint32_t p = sim->proc_of[gid];
    return &sim->procs[p].sched->steps[gid - sim->base[p]];
}

/* "rank 3 step 17 (recv_reduce peer 2 tag 5)" */
static const char *sim_desc(const sim_t *sim, uint32_t gid, char *buf, size_t len)
{
    uint32_t           p  = sim->proc_of[gid];
    const coll_step_t *st = sim_step(sim, gid);

    snprintf(buf, len, "proc %u rank %d step %u (%s peer %d tag %u len %llu)", p,
             sim->procs[p].sched->rank, gid - sim->base[p],
             coll_step_kind_name((coll_step_kind_t)st->kind), st->peer, st->tag,
             (unsigned long long)st->len);
    return buf;
}

static void sim_push(sim_t *sim, uint32_t type, uint32_t id)
{
    sim->pool[sim->npool].type = type;
    sim->pool[sim->npool].id   = id;
    sim->npool++;
}

static int sim_regions(const coll_step_t *st, sim_region_t r[2])
{
    int n = 0;

    switch (st->kind) {
    case COLL_STEP_SEND:
        r[n++] = (sim_region_t){st->src_buf, st->src_off, st->len, 0};
        break;
    case COLL_STEP_RECV:
    case COLL_STEP_DIV:
        r[n++] = (sim_region_t){st->dst_buf, st->dst_off, st->len, 1};
        break;
    default: /* RECV_REDUCE, COPY, REDUCE: an exact alias of dst is covered by the write */
        r[n++] = (sim_region_t){st->dst_buf, st->dst_off, st->len, 1};
        if (st->kind == COLL_STEP_COPY || st->src_buf != st->dst_buf ||
            st->src_off != st->dst_off) {
            r[n++] = (sim_region_t){st->src_buf, st->src_off, st->len, 0};
        }
        break;
    }
    return n;
}

static char *sim_ptr(sim_t *sim, uint32_t p, unsigned buf, uint64_t off)
{
    return (char *)sim->procs[p].buf[buf] + off;
}

/* Finds a running step of proc p touching the region, for the hazard message. */
static uint32_t sim_culprit(sim_t *sim, uint32_t p, uint32_t self, const sim_region_t *rg)
{
    uint32_t n = sim->procs[p].sched->nsteps;

    for (uint32_t g = sim->base[p]; g < sim->base[p] + n; g++) {
        sim_region_t r[2];
        int k = (g == self || sim->state[g] != SIM_RUN) ? 0 : sim_regions(sim_step(sim, g), r);

        for (int j = 0; j < k; j++) {
            if (r[j].buf == rg->buf && r[j].len > 0 && r[j].off < rg->off + rg->len &&
                rg->off < r[j].off + r[j].len && (r[j].write || rg->write)) {
                return g;
            }
        }
    }
    return SIM_NONE;
}

/*
 * Mark arithmetic four marks (int16) per 64-bit word: marks are small, so lane-wise adds
 * never carry into a neighbour (a read adds 1 to marks >= 0; a release subtracts 1 from
 * marks >= 1). These loops are the simulator's hot path.
 */
#define SIM_LANES_ONE  0x0001000100010001ull
#define SIM_LANES_SIGN 0x8000800080008000ull

/* Nonzero if a region can not be taken: any mark for a write, a write mark for a read. */
static int sim_conflict(const int16_t *m, uint64_t len, int write)
{
    uint64_t acc = 0, w, b = 0;

    for (; b + 4 <= len; b += 4) {
        memcpy(&w, m + b, sizeof(w));
        acc |= w;
    }
    for (; b < len; b++) {
        acc |= (uint16_t)m[b];
    }
    return write ? acc != 0 : (acc & SIM_LANES_SIGN) != 0;
}

/* Adds delta (+1 or -1) to every mark. */
static void sim_mark_add(int16_t *m, uint64_t len, int delta)
{
    uint64_t w, b = 0;

    for (; b + 4 <= len; b += 4) {
        memcpy(&w, m + b, sizeof(w));
        w = (delta > 0) ? w + SIM_LANES_ONE : w - SIM_LANES_ONE;
        memcpy(m + b, &w, sizeof(w));
    }
    for (; b < len; b++) {
        m[b] = (int16_t)(m[b] + delta);
    }
}

static int sim_hazard(sim_t *sim, uint32_t gid, const sim_region_t *rg, const int16_t *m)
{
    uint32_t p = sim->proc_of[gid], c = sim_culprit(sim, p, gid, rg);
    uint64_t b = 0;
    char     d1[160], d2[160];

    while (b < rg->len && !(m[b] < 0 || (rg->write && m[b] != 0))) {
        b++;
    }
    return sim_fail(sim, "data hazard: %s %s %s+%llu while running %s accesses it",
                    sim_desc(sim, gid, d1, sizeof(d1)), rg->write ? "writes" : "reads",
                    sim_buf_names[rg->buf], (unsigned long long)(rg->off + b),
                    c == SIM_NONE ? "?" : sim_desc(sim, c, d2, sizeof(d2)));
}

static int sim_acquire(sim_t *sim, uint32_t gid)
{
    uint32_t     p = sim->proc_of[gid];
    sim_region_t r[2];
    int          n = sim_regions(sim_step(sim, gid), r);
    char         d[160];

    for (int j = 0; j < n; j++) {
        int16_t *m;

        if (r[j].len == 0) {
            continue;
        }
        if (r[j].buf >= COLL_BUF_COUNT || sim->procs[p].buf[r[j].buf] == NULL ||
            r[j].off + r[j].len > sim->procs[p].size[r[j].buf]) {
            return sim_fail(sim, "%s %s %s+%llu beyond the buffer (%zu bytes)",
                            sim_desc(sim, gid, d, sizeof(d)), r[j].write ? "writes" : "reads",
                            r[j].buf < COLL_BUF_COUNT ? sim_buf_names[r[j].buf] : "bad",
                            (unsigned long long)r[j].off,
                            r[j].buf < COLL_BUF_COUNT ? sim->procs[p].size[r[j].buf] : 0);
        }
        m = sim->marks[p * COLL_BUF_COUNT + r[j].buf] + r[j].off;
        if (sim_conflict(m, r[j].len, r[j].write)) {
            return sim_hazard(sim, gid, &r[j], m);
        }
        if (r[j].write) {
            memset(m, 0xff, r[j].len * sizeof(*m)); /* -1 */
        } else {
            sim_mark_add(m, r[j].len, 1);
        }
    }
    return 0;
}

static void sim_release(sim_t *sim, uint32_t gid)
{
    uint32_t     p = sim->proc_of[gid];
    sim_region_t r[2];
    int          n = sim_regions(sim_step(sim, gid), r);

    for (int j = 0; j < n; j++) {
        int16_t *m;

        if (r[j].len == 0) {
            continue;
        }
        m = sim->marks[p * COLL_BUF_COUNT + r[j].buf] + r[j].off;
        if (r[j].write) {
            memset(m, 0, r[j].len * sizeof(*m));
        } else {
            sim_mark_add(m, r[j].len, -1);
        }
    }
}

static void sim_complete(sim_t *sim, uint32_t gid)
{
    uint32_t            p  = sim->proc_of[gid];
    const coll_sched_t *s  = sim->procs[p].sched;
    const coll_step_t  *st = sim_step(sim, gid);

    sim_release(sim, gid);
    sim->state[gid] = SIM_DONE;
    sim->done++;
    for (uint32_t j = 0; j < st->succ_count; j++) {
        uint32_t to = sim->base[p] + s->succ[st->succ_start + j];
        if (--sim->deps[to] == 0) {
            sim->state[to] = SIM_READY;
            sim_push(sim, SIM_A_START, to);
        }
    }
}

static void sim_start(sim_t *sim, uint32_t gid)
{
    const coll_step_t *st = sim_step(sim, gid);
    sim_msg_t         *m;

    if (sim_acquire(sim, gid) != 0) {
        return;
    }
    sim->state[gid] = SIM_RUN;
    if (st->kind != COLL_STEP_SEND && st->kind != COLL_STEP_RECV &&
        st->kind != COLL_STEP_RECV_REDUCE) {
        sim_push(sim, SIM_A_FINISH, gid);
        return;
    }
    m = &sim->msgs[sim->msg_of[gid]];
    if (st->kind == COLL_STEP_SEND) {
        m->send_started = 1;
        if (sim_rand(sim) & 1) { /* this message may complete eagerly */
            sim_push(sim, SIM_A_BUFFER, sim->msg_of[gid]);
        }
        if (m->recv_started) {
            sim_push(sim, SIM_A_DELIVER, sim->msg_of[gid]);
        }
    } else {
        m->recv_started = 1;
        if (m->send_started) {
            sim_push(sim, SIM_A_DELIVER, sim->msg_of[gid]);
        }
    }
}

static void sim_local(sim_t *sim, uint32_t gid)
{
    uint32_t            p   = sim->proc_of[gid];
    const coll_sched_t *s   = sim->procs[p].sched;
    const coll_step_t  *st  = sim_step(sim, gid);
    size_t              n   = st->len / coll_dtype_size(s->dtype);
    char               *dst = sim_ptr(sim, p, st->dst_buf, st->dst_off);

    if (st->len > 0) {
        if (st->kind == COLL_STEP_COPY) {
            memcpy(dst, sim_ptr(sim, p, st->src_buf, st->src_off), st->len);
        } else if (st->kind == COLL_STEP_REDUCE) {
            coll_reduce3(s->dtype, s->op, dst, dst, sim_ptr(sim, p, st->src_buf, st->src_off), n);
        } else {
            coll_reduce_div(s->dtype, dst, n, s->nranks);
        }
    }
    sim_complete(sim, gid);
}

/* The send completes before the receive is posted: the data is captured now. */
static void sim_buffer(sim_t *sim, uint32_t mi)
{
    sim_msg_t         *m  = &sim->msgs[mi];
    const coll_step_t *st = sim_step(sim, m->send);

    if (m->delivered) {
        return;
    }
    m->copy = malloc(st->len > 0 ? st->len : 1);
    if (m->copy == NULL) {
        sim_fail(sim, "out of memory");
        return;
    }
    if (st->len > 0) {
        memcpy(m->copy, sim_ptr(sim, sim->proc_of[m->send], st->src_buf, st->src_off), st->len);
    }
    m->send_done = 1;
    sim->stats.eager++;
    sim_complete(sim, m->send);
}

static void sim_deliver(sim_t *sim, uint32_t mi)
{
    sim_msg_t          *m  = &sim->msgs[mi];
    uint32_t            rp = sim->proc_of[m->recv];
    const coll_sched_t *rs = sim->procs[rp].sched;
    const coll_step_t  *ss = sim_step(sim, m->send), *rt = sim_step(sim, m->recv);
    const char         *data;

    data = (m->copy != NULL) ? (const char *)m->copy
                             : sim_ptr(sim, sim->proc_of[m->send], ss->src_buf, ss->src_off);
    if (rt->len > 0) {
        char *dst = sim_ptr(sim, rp, rt->dst_buf, rt->dst_off);

        if (rt->kind == COLL_STEP_RECV) {
            memcpy(dst, data, rt->len);
        } else {
            coll_reduce3(rs->dtype, rs->op, dst, sim_ptr(sim, rp, rt->src_buf, rt->src_off), data,
                         rt->len / coll_dtype_size(rs->dtype));
        }
    }
    m->delivered = 1;
    sim->stats.messages++;
    free(m->copy);
    m->copy = NULL;
    if (!m->send_done) {
        m->send_done = 1;
        sim_complete(sim, m->send);
    }
    sim_complete(sim, m->recv);
}

/* ---- setup: static message matching ---- */

typedef struct {
    int      from, to;
    uint32_t tag;
    uint32_t gid;
} sim_key_t;

static int sim_key_cmp(const void *a, const void *b)
{
    const sim_key_t *x = a, *y = b;

    if (x->from != y->from) {
        return x->from < y->from ? -1 : 1;
    }
    if (x->to != y->to) {
        return x->to < y->to ? -1 : 1;
    }
    return (x->tag > y->tag) - (x->tag < y->tag);
}

static int sim_match_fail(sim_t *sim, const char *what, const sim_key_t *k)
{
    char d[160];
    return sim_fail(sim, "%s: %s", what, sim_desc(sim, k->gid, d, sizeof(d)));
}

/* Pairs every SEND with the RECV* of the same (sender, receiver, tag); all must pair. */
static int sim_match(sim_t *sim)
{
    sim_key_t *sk = malloc(((size_t)sim->total + 1) * sizeof(*sk));
    sim_key_t *rk = malloc(((size_t)sim->total + 1) * sizeof(*rk));
    uint32_t   ns = 0, nr = 0, i, j;
    char       d1[160], d2[160];
    int        rc = -1;

    if (sk == NULL || rk == NULL) {
        sim_fail(sim, "out of memory");
        goto out;
    }
    for (uint32_t g = 0; g < sim->total; g++) {
        const coll_step_t *st   = sim_step(sim, g);
        int                rank = sim->procs[sim->proc_of[g]].sched->rank;

        sim->msg_of[g] = SIM_NONE;
        if (st->kind == COLL_STEP_SEND) {
            sk[ns++] = (sim_key_t){rank, st->peer, st->tag, g};
        } else if (st->kind == COLL_STEP_RECV || st->kind == COLL_STEP_RECV_REDUCE) {
            rk[nr++] = (sim_key_t){st->peer, rank, st->tag, g};
        }
    }
    qsort(sk, ns, sizeof(*sk), sim_key_cmp);
    qsort(rk, nr, sizeof(*rk), sim_key_cmp);
    for (i = 0, j = 0; i < ns || j < nr;) {
        int c = (i == ns) ? 1 : (j == nr) ? -1 : sim_key_cmp(&sk[i], &rk[j]);

        if (c < 0 || (c > 0)) {
            sim_match_fail(sim, c < 0 ? "send without a receive" : "receive without a send",
                           c < 0 ? &sk[i] : &rk[j]);
            goto out;
        }
        if ((i + 1 < ns && sim_key_cmp(&sk[i], &sk[i + 1]) == 0) ||
            (j + 1 < nr && sim_key_cmp(&rk[j], &rk[j + 1]) == 0)) {
            sim_match_fail(sim, "tag used twice", &sk[i]);
            goto out;
        }
        if (sim_step(sim, sk[i].gid)->len != sim_step(sim, rk[j].gid)->len) {
            sim_fail(sim, "length mismatch: %s vs %s", sim_desc(sim, sk[i].gid, d1, sizeof(d1)),
                     sim_desc(sim, rk[j].gid, d2, sizeof(d2)));
            goto out;
        }
        sim->msgs[sim->nmsgs]  = (sim_msg_t){.send = sk[i].gid, .recv = rk[j].gid};
        sim->msg_of[sk[i].gid] = sim->nmsgs;
        sim->msg_of[rk[j].gid] = sim->nmsgs;
        sim->nmsgs++;
        i++;
        j++;
    }
    rc = 0;
out:
    free(sk);
    free(rk);
    return rc;
}

static void sim_deadlock(sim_t *sim)
{
    char     d[160];
    int      len = 0, shown = 0;
    uint32_t stuck = sim->total - sim->done;

    len =
        snprintf(sim->err, sim->errlen, "deadlock: %u of %u steps unfinished;", stuck, sim->total);
    for (uint32_t g = 0; g < sim->total && shown < 4 && len < (int)sim->errlen; g++) {
        if (sim->state[g] == SIM_DONE) {
            continue;
        }
        len += snprintf(sim->err + len, sim->errlen - (size_t)len, " [%s: %s]",
                        sim_desc(sim, g, d, sizeof(d)),
                        sim->state[g] == SIM_WAIT ? "waits for dependencies" : "unmatched");
        shown++;
    }
    sim->failed = 1;
}

static int sim_setup(sim_t *sim)
{
    uint32_t g = 0;

    sim->base  = calloc((size_t)sim->nprocs + 1, sizeof(*sim->base));
    sim->marks = calloc((size_t)sim->nprocs * COLL_BUF_COUNT, sizeof(*sim->marks));
    if (sim->base == NULL || sim->marks == NULL) {
        return sim_fail(sim, "out of memory");
    }
    for (int p = 0; p < sim->nprocs; p++) {
        if (!sim->procs[p].sched->finalized) {
            return sim_fail(sim, "proc %d: schedule not finalized", p);
        }
        sim->base[p] = sim->total;
        sim->total += sim->procs[p].sched->nsteps;
        for (int b = 0; b < COLL_BUF_COUNT; b++) {
            size_t sz = sim->procs[p].buf[b] != NULL ? sim->procs[p].size[b] : 0;
            sim->marks[p * COLL_BUF_COUNT + b] = calloc(sz + 1, sizeof(int16_t));
            if (sim->marks[p * COLL_BUF_COUNT + b] == NULL) {
                return sim_fail(sim, "out of memory");
            }
        }
    }
    sim->proc_of = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    sim->deps    = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    sim->msg_of  = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    sim->state   = calloc((size_t)sim->total + 1, 1);
    sim->msgs    = calloc((size_t)sim->total + 1, sizeof(sim_msg_t));
    sim->pool    = malloc(((size_t)sim->total * 4 + 1) * sizeof(sim_action_t));
    if (sim->proc_of == NULL || sim->deps == NULL || sim->msg_of == NULL || sim->state == NULL ||
        sim->msgs == NULL || sim->pool == NULL) {
        return sim_fail(sim, "out of memory");
    }
    for (int p = 0; p < sim->nprocs; p++) {
        for (uint32_t i = 0; i < sim->procs[p].sched->nsteps; i++, g++) {
            sim->proc_of[g] = (uint32_t)p;
            sim->deps[g]    = sim->procs[p].sched->steps[i].ndeps;
        }
    }
    return sim_match(sim);
}

static void sim_free(sim_t *sim)
{
    for (uint32_t i = 0; sim->msgs != NULL && i < sim->nmsgs; i++) {
        free(sim->msgs[i].copy);
    }
    for (int i = 0; sim->marks != NULL && i < sim->nprocs * COLL_BUF_COUNT; i++) {
        free(sim->marks[i]);
    }
    free(sim->marks);
    free(sim->base);
    free(sim->proc_of);
    free(sim->deps);
    free(sim->msg_of);
    free(sim->state);
    free(sim->msgs);
    free(sim->pool);
}

int sim_run(sim_proc_t *procs, int nprocs, uint64_t seed, sim_stats_t *stats_p, char *err,
            size_t errlen)
{
    sim_t sim;

    memset(&sim, 0, sizeof(sim));
    sim.procs  = procs;
    sim.nprocs = nprocs;
    sim.rng    = seed * 0x2545f4914f6cdd1dull + 1;
    sim.err    = err;
    sim.errlen = errlen;
    if (errlen > 0) {
        err[0] = '\0';
    }
    if (sim_setup(&sim) == 0) {
        for (uint32_t g = 0; g < sim.total; g++) {
            if (sim.deps[g] == 0) {
                sim.state[g] = SIM_READY;
                sim_push(&sim, SIM_A_START, g);
            }
        }
        while (sim.npool > 0 && !sim.failed) {
            uint32_t     k = (uint32_t)(sim_rand(&sim) % sim.npool);
            sim_action_t a = sim.pool[k];

            sim.pool[k] = sim.pool[--sim.npool];
            sim.stats.events++;
            switch (a.type) {
            case SIM_A_START:
                sim_start(&sim, a.id);
                break;
            case SIM_A_FINISH:
                sim_local(&sim, a.id);
                break;
            case SIM_A_BUFFER:
                sim_buffer(&sim, a.id);
                break;
            default:
                sim_deliver(&sim, a.id);
                break;
            }
        }
        if (!sim.failed && sim.done < sim.total) {
            sim_deadlock(&sim);
        }
    }
    if (stats_p != NULL) {
        *stats_p = sim.stats;
    }
    sim_free(&sim);
    return sim.failed ? -1 : 0;
}

/* ---- self-test: bugs the simulator must find ---- */

enum { SIM_BUG_DEADLOCK, SIM_BUG_LENGTH, SIM_BUG_UNMATCHED, SIM_BUG_BOUNDS, SIM_BUG_WAR };

/* Two ranks with one planted bug (or, with fixed, the corrected schedule). */
static int sim_pair_run(int bug, int fixed, uint64_t seed, char *err, size_t errlen)
{
    static char  bufs[2][2][64];
    coll_sched_t s[2];
    sim_proc_t   procs[2];
    int          a, b, rc = -1;

    coll_sched_init(&s[0], 0, 2, COLL_INT32, COLL_SUM);
    coll_sched_init(&s[1], 1, 2, COLL_INT32, COLL_SUM);
    switch (bug) {
    case SIM_BUG_DEADLOCK: /* each rank waits for the other's message before it sends */
        a = coll_sched_recv(&s[0], 1, 0, COLL_BUF_RECV, 0, 8);
        coll_sched_dep(&s[0], coll_sched_send(&s[0], 1, 1, COLL_BUF_SEND, 0, 8), a);
        b = coll_sched_recv(&s[1], 0, 1, COLL_BUF_RECV, 0, 8);
        coll_sched_dep(&s[1], coll_sched_send(&s[1], 0, 0, COLL_BUF_SEND, 0, 8), b);
        break;
    case SIM_BUG_LENGTH:
    case SIM_BUG_UNMATCHED:
    case SIM_BUG_BOUNDS:
        coll_sched_send(&s[0], 1, 0, bug == SIM_BUG_BOUNDS ? COLL_BUF_SCRATCH : COLL_BUF_SEND, 0,
                        8);
        if (bug != SIM_BUG_UNMATCHED) {
            coll_sched_recv(&s[1], 0, 0, COLL_BUF_RECV, 0, bug == SIM_BUG_LENGTH ? 4 : 8);
        }
        break;
    default: /* rank 0 receives into the region it may still be sending from */
        a = coll_sched_send(&s[0], 1, 0, COLL_BUF_RECV, 0, 16);
        b = coll_sched_recv(&s[0], 1, 1, COLL_BUF_RECV, 8, 16);
        coll_sched_dep(&s[0], b, fixed ? a : -1);
        coll_sched_recv(&s[1], 0, 0, COLL_BUF_RECV, 0, 16);
        coll_sched_send(&s[1], 0, 1, COLL_BUF_SEND, 0, 16);
        break;
    }
    memset(procs, 0, sizeof(procs));
    if (coll_sched_finalize(&s[0]) == COLL_OK && coll_sched_finalize(&s[1]) == COLL_OK) {
        for (int r = 0; r < 2; r++) {
            procs[r].sched = &s[r];
            for (int k = 0; k < 2; k++) {
                procs[r].buf[k]  = bufs[r][k];
                procs[r].size[k] = sizeof(bufs[r][k]);
            }
        }
        rc = sim_run(procs, 2, seed, NULL, err, errlen);
    } else {
        snprintf(err, errlen, "self-test schedule did not build");
    }
    coll_sched_destroy(&s[0]);
    coll_sched_destroy(&s[1]);
    return rc;
}

int sim_selftest(char *err, size_t errlen)
{
    static const char *const expect[] = {"deadlock", "length mismatch", "send without a receive",
                                         "beyond", "hazard"};
    char                     msg[512];
    int                      hazards = 0;

    for (int bug = SIM_BUG_DEADLOCK; bug < SIM_BUG_WAR; bug++) {
        if (sim_pair_run(bug, 0, 1, msg, sizeof(msg)) == 0 || strstr(msg, expect[bug]) == NULL) {
            snprintf(err, errlen, "planted bug not reported as \"%s\" (got \"%s\")", expect[bug],
                     msg);
            return -1;
        }
    }
    for (uint64_t seed = 1; seed <= 40; seed++) { /* a hazard shows in some interleavings */
        if (sim_pair_run(SIM_BUG_WAR, 1, seed, msg, sizeof(msg)) != 0) {
            snprintf(err, errlen, "correct schedule reported: %s", msg);
            return -1;
        }
        if (sim_pair_run(SIM_BUG_WAR, 0, seed, msg, sizeof(msg)) != 0) {
            if (strstr(msg, "hazard") == NULL) {
                snprintf(err, errlen, "missing WAR edge reported as: %s", msg);
                return -1;
            }
            hazards++;
        }
    }
    if (hazards == 0) {
        snprintf(err, errlen, "a missing WAR edge went unnoticed in 40 interleavings");
        return -1;
    }
    return 0;
}
