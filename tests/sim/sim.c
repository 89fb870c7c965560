/* SPDX-License-Identifier: MIT */
/*
 * Schedule simulator. Events (start a ready step, finish a local step, deliver a message,
 * buffer an eager message) sit in one pool and a seeded generator picks the next one, so ready
 * steps start and messages arrive in random order with random delays. Every running step holds
 * per-byte marks on the regions it reads (count) or writes (-1); conflicting marks are data
 * hazards. Data is moved with the library's reduction kernels. Not a performance model.
 *
 * Shared windows: every proc has a window (one call, one epoch). A PUT writes it and publishes
 * its slot when it finishes; a GET* waits until the owner's slot is published, marks the
 * owner's window region as read (so a PUT over it meanwhile is a hazard), and checks that
 * every byte it reads was last written by the PUT of that slot (not overwritten, not stale).
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reduce/reduce.h"

enum { SIM_WAIT, SIM_READY, SIM_FLAG, SIM_RUN, SIM_DONE }; /* SIM_FLAG: GET* waits for a slot */
enum { SIM_A_START, SIM_A_FINISH, SIM_A_DELIVER, SIM_A_BUFFER };

#define SIM_NONE UINT32_MAX
#define SIM_WIN  COLL_BUF_COUNT       /* buffer id of a proc's window in marks and regions */
#define SIM_NBUF (COLL_BUF_COUNT + 1) /* buffers per proc in marks */

typedef struct {
    uint32_t type;
    uint32_t id; /* step (global id) or message index */
} sim_action_t;

typedef struct {
    uint32_t send, recv; /* global step ids */
    uint8_t  send_started, recv_started, send_done, delivered;
    void    *copy; /* eager data, captured when the send completed early */
} sim_msg_t;

/* A region a step touches: whose memory, buffer, range, and whether it writes it. */
typedef struct {
    uint32_t proc;
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
    int16_t     **marks; /* [proc * SIM_NBUF + buf] per byte: -1 written, k > 0 read */
    char        **win;   /* [proc] window of win_size bytes */
    uint32_t    **wrote; /* [proc] per window byte: 1 + slot of the PUT that wrote it last */
    uint64_t      win_size;
    uint32_t     *proc_of_rank; /* [rank] proc running that rank's schedule (SIM_NONE: none) */
    uint8_t      *flag;         /* [proc * SLOTS + slot] published */
    uint32_t     *flag_head;    /* [proc * SLOTS + slot] first GET* waiting for it */
    uint32_t     *flag_next;    /* [gid] next GET* waiting for the same slot */
    uint64_t      rng;
    uint32_t      done;
    int           failed;
    char         *err;
    size_t        errlen;
    sim_stats_t   stats;
} sim_t;

static const char *const sim_buf_names[SIM_NBUF] = {"send", "recv", "scratch", "window"};

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

/* The proc whose window a GET* reads (SIM_NONE if no proc runs that rank). */
static uint32_t sim_owner(const sim_t *sim, uint32_t gid)
{
    int peer = sim_step(sim, gid)->peer;
    int n    = sim->procs[sim->proc_of[gid]].sched->nranks;

    return (peer >= 0 && peer < n) ? sim->proc_of_rank[peer] : SIM_NONE;
}

static int sim_regions(const sim_t *sim, uint32_t gid, sim_region_t r[3])
{
    const coll_step_t *st = sim_step(sim, gid);
    uint32_t           p  = sim->proc_of[gid];
    int                n  = 0;

    switch (st->kind) {
    case COLL_STEP_SEND:
        r[n++] = (sim_region_t){p, st->src_buf, st->src_off, st->len, 0};
        break;
    case COLL_STEP_RECV:
    case COLL_STEP_DIV:
        r[n++] = (sim_region_t){p, st->dst_buf, st->dst_off, st->len, 1};
        break;
    case COLL_STEP_PUT:
        r[n++] = (sim_region_t){p, SIM_WIN, st->win_off, st->len, 1};
        r[n++] = (sim_region_t){p, st->src_buf, st->src_off, st->len, 0};
        break;
    default: /* RECV_REDUCE, COPY, REDUCE, GET*: an exact alias of dst is covered by the write */
        r[n++] = (sim_region_t){p, st->dst_buf, st->dst_off, st->len, 1};
        if (st->kind == COLL_STEP_GET || st->kind == COLL_STEP_GET_REDUCE) {
            r[n++] = (sim_region_t){sim_owner(sim, gid), SIM_WIN, st->win_off, st->len, 0};
        }
        if (st->kind != COLL_STEP_GET &&
            (st->kind == COLL_STEP_COPY || st->src_buf != st->dst_buf ||
             st->src_off != st->dst_off)) {
            r[n++] = (sim_region_t){p, st->src_buf, st->src_off, st->len, 0};
        }
        break;
    }
    return n;
}

static char *sim_ptr(sim_t *sim, uint32_t p, unsigned buf, uint64_t off)
{
    return (char *)sim->procs[p].buf[buf] + off;
}

/* Finds a running step touching the region (a window is touched by other procs too), for the
 * hazard message. */
static uint32_t sim_culprit(sim_t *sim, uint32_t self, const sim_region_t *rg)
{
    for (uint32_t g = 0; g < sim->total; g++) {
        sim_region_t r[3];
        int          k = (g == self || sim->state[g] != SIM_RUN) ? 0 : sim_regions(sim, g, r);

        for (int j = 0; j < k; j++) {
            if (r[j].proc == rg->proc && r[j].buf == rg->buf && r[j].len > 0 &&
                r[j].off < rg->off + rg->len && rg->off < r[j].off + r[j].len &&
                (r[j].write || rg->write)) {
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
    uint32_t c = sim_culprit(sim, gid, rg);
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

/* Bytes of buffer buf of proc p (its window: the simulated window size). */
static uint64_t sim_size(const sim_t *sim, uint32_t p, unsigned buf)
{
    if (p == SIM_NONE || buf > SIM_WIN) {
        return 0;
    }
    if (buf == SIM_WIN) {
        return sim->win_size;
    }
    return sim->procs[p].buf[buf] != NULL ? sim->procs[p].size[buf] : 0;
}

static int sim_acquire(sim_t *sim, uint32_t gid)
{
    sim_region_t r[3];
    int          n = sim_regions(sim, gid, r);
    char         d[160];

    for (int j = 0; j < n; j++) {
        int16_t *m;

        if (r[j].len == 0) {
            continue;
        }
        if (r[j].off + r[j].len > sim_size(sim, r[j].proc, r[j].buf)) {
            return sim_fail(sim, "%s %s %s+%llu beyond the buffer (%llu bytes)",
                            sim_desc(sim, gid, d, sizeof(d)), r[j].write ? "writes" : "reads",
                            r[j].buf < SIM_NBUF ? sim_buf_names[r[j].buf] : "bad",
                            (unsigned long long)r[j].off,
                            (unsigned long long)sim_size(sim, r[j].proc, r[j].buf));
        }
        m = sim->marks[r[j].proc * SIM_NBUF + r[j].buf] + r[j].off;
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
    sim_region_t r[3];
    int          n = sim_regions(sim, gid, r);

    for (int j = 0; j < n; j++) {
        int16_t *m;

        if (r[j].len == 0) {
            continue;
        }
        m = sim->marks[r[j].proc * SIM_NBUF + r[j].buf] + r[j].off;
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

/* ---- shared windows ---- */

static int sim_is_get(const coll_step_t *st)
{
    return st->kind == COLL_STEP_GET || st->kind == COLL_STEP_GET_REDUCE;
}

/* A GET* may run once its owner published the slot; until then it waits in the slot's list. */
static int sim_flag_ready(sim_t *sim, uint32_t gid)
{
    const coll_step_t *st    = sim_step(sim, gid);
    uint32_t           owner = sim_owner(sim, gid), idx;
    char               d[160];

    if (owner == SIM_NONE) {
        sim_fail(sim, "%s reads the window of a rank no proc runs", sim_desc(sim, gid, d, 160));
        return 0;
    }
    idx = owner * COLL_SCHED_WIN_SLOTS + st->tag;
    if (sim->flag[idx]) {
        return 1;
    }
    sim->state[gid]     = SIM_FLAG;
    sim->flag_next[gid] = sim->flag_head[idx];
    sim->flag_head[idx] = gid;
    return 0;
}

/* A PUT finished: the bytes it wrote belong to its slot, which is published. */
static void sim_publish(sim_t *sim, uint32_t gid)
{
    const coll_step_t *st  = sim_step(sim, gid);
    uint32_t           p   = sim->proc_of[gid];
    uint32_t           idx = p * COLL_SCHED_WIN_SLOTS + st->tag;

    for (uint64_t b = 0; b < st->len; b++) {
        sim->wrote[p][st->win_off + b] = st->tag + 1;
    }
    sim->flag[idx] = 1;
    for (uint32_t w = sim->flag_head[idx]; w != SIM_NONE; w = sim->flag_next[w]) {
        sim->state[w] = SIM_READY;
        sim_push(sim, SIM_A_START, w);
    }
    sim->flag_head[idx] = SIM_NONE;
}

/* Window data a GET* reads: every byte must come from the PUT of its slot. */
static const char *sim_window_data(sim_t *sim, uint32_t gid)
{
    const coll_step_t *st    = sim_step(sim, gid);
    uint32_t           owner = sim_owner(sim, gid);
    char               d[160];

    for (uint64_t b = 0; b < st->len; b++) {
        if (sim->wrote[owner][st->win_off + b] != st->tag + 1) {
            sim_fail(sim, "%s reads window byte %llu of rank %d not written by its put of slot %u",
                     sim_desc(sim, gid, d, sizeof(d)), (unsigned long long)(st->win_off + b),
                     st->peer, st->tag);
            return NULL;
        }
    }
    return sim->win[owner] + st->win_off;
}

static void sim_start(sim_t *sim, uint32_t gid)
{
    const coll_step_t *st = sim_step(sim, gid);
    sim_msg_t         *m;

    if (sim_is_get(st) && !sim_flag_ready(sim, gid)) {
        return;
    }
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
    const char         *src = sim_ptr(sim, p, st->src_buf, st->src_off), *win = NULL;

    if (sim_is_get(st) && (win = sim_window_data(sim, gid)) == NULL) {
        return;
    }
    if (st->len > 0) {
        switch (st->kind) {
        case COLL_STEP_COPY:
            memcpy(dst, src, st->len);
            break;
        case COLL_STEP_REDUCE:
            coll_reduce3(s->dtype, s->op, dst, dst, src, n);
            break;
        case COLL_STEP_PUT:
            memcpy(sim->win[p] + st->win_off, src, st->len);
            break;
        case COLL_STEP_GET:
            memcpy(dst, win, st->len);
            break;
        case COLL_STEP_GET_REDUCE:
            coll_reduce3(s->dtype, s->op, dst, src, win, n);
            break;
        default:
            coll_reduce_div(s->dtype, dst, n, s->nranks);
            break;
        }
    }
    sim_complete(sim, gid);
    if (st->kind == COLL_STEP_PUT) {
        sim_publish(sim, gid);
    }
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
                        sim->state[g] == SIM_WAIT   ? "waits for dependencies"
                        : sim->state[g] == SIM_FLAG ? "waits for a window slot never published"
                                                    : "unmatched");
        shown++;
    }
    sim->failed = 1;
}

/* Windows (as large as the largest any schedule uses), slot flags, and rank -> proc. */
static int sim_setup_windows(sim_t *sim)
{
    size_t slots  = (size_t)sim->nprocs * COLL_SCHED_WIN_SLOTS;
    int    nranks = 1;

    for (int p = 0; p < sim->nprocs; p++) {
        const coll_sched_t *s = sim->procs[p].sched;
        sim->win_size         = s->win_bytes > sim->win_size ? s->win_bytes : sim->win_size;
        nranks                = s->nranks > nranks ? s->nranks : nranks;
    }
    sim->win          = calloc((size_t)sim->nprocs, sizeof(*sim->win));
    sim->wrote        = calloc((size_t)sim->nprocs, sizeof(*sim->wrote));
    sim->proc_of_rank = malloc((size_t)nranks * sizeof(uint32_t));
    sim->flag         = calloc(slots, 1);
    sim->flag_head    = malloc(slots * sizeof(uint32_t));
    if (sim->win == NULL || sim->wrote == NULL || sim->proc_of_rank == NULL || sim->flag == NULL ||
        sim->flag_head == NULL) {
        return sim_fail(sim, "out of memory");
    }
    memset(sim->proc_of_rank, 0xff, (size_t)nranks * sizeof(uint32_t));
    memset(sim->flag_head, 0xff, slots * sizeof(uint32_t));
    for (int p = 0; p < sim->nprocs; p++) {
        sim->proc_of_rank[sim->procs[p].sched->rank] = (uint32_t)p;
        sim->win[p]                                  = calloc(sim->win_size + 1, 1);
        sim->wrote[p]                                = calloc(sim->win_size + 1, sizeof(uint32_t));
        sim->marks[p * SIM_NBUF + SIM_WIN]           = calloc(sim->win_size + 1, sizeof(int16_t));
        if (sim->win[p] == NULL || sim->wrote[p] == NULL ||
            sim->marks[p * SIM_NBUF + SIM_WIN] == NULL) {
            return sim_fail(sim, "out of memory");
        }
    }
    return 0;
}

static int sim_setup(sim_t *sim)
{
    uint32_t g = 0;

    sim->base  = calloc((size_t)sim->nprocs + 1, sizeof(*sim->base));
    sim->marks = calloc((size_t)sim->nprocs * SIM_NBUF, sizeof(*sim->marks));
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
            size_t sz                    = sim->procs[p].buf[b] != NULL ? sim->procs[p].size[b] : 0;
            sim->marks[p * SIM_NBUF + b] = calloc(sz + 1, sizeof(int16_t));
            if (sim->marks[p * SIM_NBUF + b] == NULL) {
                return sim_fail(sim, "out of memory");
            }
        }
    }
    if (sim_setup_windows(sim) != 0) {
        return -1;
    }
    sim->proc_of   = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    sim->deps      = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    sim->msg_of    = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    sim->state     = calloc((size_t)sim->total + 1, 1);
    sim->msgs      = calloc((size_t)sim->total + 1, sizeof(sim_msg_t));
    sim->pool      = malloc(((size_t)sim->total * 5 + 1) * sizeof(sim_action_t));
    sim->flag_next = malloc(((size_t)sim->total + 1) * sizeof(uint32_t));
    if (sim->proc_of == NULL || sim->deps == NULL || sim->msg_of == NULL || sim->state == NULL ||
        sim->msgs == NULL || sim->pool == NULL || sim->flag_next == NULL) {
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
    for (int i = 0; sim->marks != NULL && i < sim->nprocs * SIM_NBUF; i++) {
        free(sim->marks[i]);
    }
    for (int p = 0; p < sim->nprocs; p++) {
        free(sim->win != NULL ? sim->win[p] : NULL);
        free(sim->wrote != NULL ? sim->wrote[p] : NULL);
    }
    free(sim->win);
    free(sim->wrote);
    free(sim->proc_of_rank);
    free(sim->flag);
    free(sim->flag_head);
    free(sim->flag_next);
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
