/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the shm transport without bootstrap or engine: the parent forks 2-4 ranks and
 * relays their listen handles and barriers through pipes; the ranks drive the transport's ops
 * table directly. Covers message sizes, traffic in both directions at once, unexpected and
 * out-of-order messages, reductions on arrival, block()/wake(), corrupt frames, length
 * mismatches, a dead peer, shared windows (flags, acknowledgements, sleeping on them, a dead
 * window owner), and that nothing is left in /dev/shm.
 */
#include "shm/shm.h"
#include "coll_test.h"
#include "compiler.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern const coll_transport_ops_t  coll_tp_shm_ops;
static const coll_transport_ops_t *T = &coll_tp_shm_ops;

#define MAX_RANKS 4

/* ---- parent/child plumbing: an allgather over pipes is all the ranks need ---- */

static int                 g_up[MAX_RANKS][2];   /* child writes, parent reads */
static int                 g_down[MAX_RANKS][2]; /* parent writes, child reads */
static int                 g_rank, g_nranks;
static coll_tp_init_args_t g_args;    /* of this rank's communicator */
static const void        **g_handles; /* every rank's listen handle */

static int io_full(int fd, void *buf, size_t len, int writing)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Every rank contributes len bytes; all receives nranks * len bytes in rank order. */
static void allgather(const void *mine, size_t len, void *all)
{
    uint32_t l = (uint32_t)len;
    ASSERT_EQ(io_full(g_up[g_rank][1], &l, sizeof(l), 1), 0);
    ASSERT_EQ(io_full(g_up[g_rank][1], (void *)mine, len, 1), 0);
    ASSERT_EQ(io_full(g_down[g_rank][0], all, len * (size_t)g_nranks, 0), 0);
}

static void barrier(void)
{
    char c = 0, all[MAX_RANKS];
    allgather(&c, 1, all);
}

/* Relays allgather rounds until a child closes its pipe (finished or died). */
static void parent_serve(int n)
{
    char *buf = NULL;
    for (;;) {
        uint32_t len = 0;
        for (int i = 0; i < n; i++) {
            uint32_t l;
            if (io_full(g_up[i][0], &l, sizeof(l), 0) != 0) {
                free(buf);
                return;
            }
            if (i == 0) {
                len = l;
                buf = realloc(buf, (size_t)len * (size_t)n + 1);
            }
            if (l != len || io_full(g_up[i][0], buf + (size_t)i * len, len, 0) != 0) {
                free(buf);
                return;
            }
        }
        for (int i = 0; i < n; i++) {
            if (io_full(g_down[i][1], buf, (size_t)len * (size_t)n, 1) != 0) {
                free(buf);
                return;
            }
        }
    }
}

typedef void (*rank_fn_t)(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t comm_id);

/* ---- helpers inside a rank ---- */

typedef struct {
    coll_tp_op_t  op;
    int           done;
    coll_result_t st;
} req_t;

static void req_done(void *arg, coll_result_t st)
{
    req_t *r = arg;
    ASSERT_EQ(r->done, 0); /* exactly once */
    r->done = 1;
    r->st   = st;
}

static void req_init(req_t *r, void *buf, size_t len, uint64_t tag)
{
    memset(r, 0, sizeof(*r));
    r->op.buf  = buf;
    r->op.len  = len;
    r->op.tag  = tag;
    r->op.done = req_done;
    r->op.arg  = r;
}

/* Progress until every request in reqs[0..n) is done (the loop the engine will run). */
static void wait_all(coll_tp_ctx_t *ctx, req_t *reqs, int n)
{
    double deadline = coll_time_s() + 10.0;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            left += reqs[i].done == 0;
        }
        if (left == 0) {
            return;
        }
        if (T->progress(ctx) == 0) {
            T->block(ctx, 0.01);
        }
        ASSERT_TRUE(coll_time_s() < deadline);
    }
}

static unsigned char pattern(int src, int dst, size_t i, size_t len)
{
    return (unsigned char)(src * 31 + dst * 7 + i * 13 + len);
}

static int count_leftovers(uint64_t comm_id)
{
    char           prefix[64];
    int            n   = 0;
    DIR           *dir = opendir("/dev/shm");
    struct dirent *de;
    snprintf(prefix, sizeof(prefix), "coll-%016" PRIx64 "-", comm_id);
    ASSERT_TRUE(dir != NULL);
    while ((de = readdir(dir)) != NULL) {
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    }
    closedir(dir);
    return n;
}

/* ---- phase A: data path on 4 ranks ---- */

static void test_sizes(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t ring)
{
    size_t sizes[] = {0, 1, 7, 4096, ring * 3 + 5};
    int    n       = g_nranks;
    for (size_t s = 0; s < COLL_ARRAY_SIZE(sizes); s++) {
        size_t         len = sizes[s];
        req_t          rs[2 * MAX_RANKS];
        unsigned char *sb[MAX_RANKS], *rb[MAX_RANKS];
        int            k = 0;
        for (int p = 0; p < n; p++) {
            if (p == g_rank) {
                continue;
            }
            sb[p] = malloc(len + 1);
            rb[p] = malloc(len + 1);
            for (size_t i = 0; i < len; i++) {
                sb[p][i] = pattern(g_rank, p, i, len);
            }
            req_init(&rs[k], rb[p], len, 10 + s);
            ASSERT_OK(T->irecv(eps[p], &rs[k++].op));
            req_init(&rs[k], sb[p], len, 10 + s);
            ASSERT_OK(T->isend(eps[p], &rs[k++].op));
        }
        wait_all(ctx, rs, k);
        for (int i = 0; i < k; i++) {
            ASSERT_OK(rs[i].st);
            ASSERT_EQ(rs[i].op.bytes, len);
        }
        for (int p = 0; p < n; p++) {
            if (p == g_rank) {
                continue;
            }
            for (size_t i = 0; i < len; i++) {
                ASSERT_EQ(rb[p][i], pattern(p, g_rank, i, len));
            }
            free(sb[p]);
            free(rb[p]);
        }
    }
}

/* Every rank sends K large messages to every peer before posting any receive (they arrive
 * unexpected, and the rings fill in both directions), then receives them in reverse order. */
static void test_flood(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t ring)
{
    enum { K = 5 };
    size_t len = 2 * ring + 3 * 64 + 17;
    req_t *rs  = calloc(2 * K * MAX_RANKS, sizeof(req_t));
    char  *sb = malloc(len * K), *rb = malloc(len * K * MAX_RANKS);
    int    k = 0;
    for (int m = 0; m < K; m++) {
        for (size_t i = 0; i < len; i++) {
            sb[m * len + i] = (char)pattern(g_rank, m, i, len);
        }
    }
    for (int m = 0; m < K; m++) {
        for (int p = 0; p < g_nranks; p++) {
            if (p != g_rank) {
                req_init(&rs[k], sb + m * len, len, 100 + m);
                ASSERT_OK(T->isend(eps[p], &rs[k++].op));
            }
        }
    }
    for (int m = K - 1; m >= 0; m--) {
        for (int p = 0; p < g_nranks; p++) {
            if (p != g_rank) {
                req_init(&rs[k], rb + ((size_t)p * K + m) * len, len, 100 + m);
                ASSERT_OK(T->irecv(eps[p], &rs[k++].op));
            }
        }
    }
    wait_all(ctx, rs, k);
    for (int i = 0; i < k; i++) {
        ASSERT_OK(rs[i].st);
    }
    for (int p = 0; p < g_nranks; p++) {
        for (int m = 0; m < K && p != g_rank; m++) {
            for (size_t i = 0; i < len; i++) {
                ASSERT_EQ((unsigned char)rb[((size_t)p * K + m) * len + i], pattern(p, m, i, len));
            }
        }
    }
    free(rs);
    free(sb);
    free(rb);
}

/* Receives posted for tag 2 then tag 1 before the peer sends tag 1 then tag 2. */
static void test_out_of_order(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t ring)
{
    int    peer = g_rank ^ 1;
    size_t len  = ring + ring / 2 + 3;
    char  *s1 = malloc(len), *s2 = malloc(len), *r1 = malloc(len), *r2 = malloc(len);
    req_t  rs[4];
    memset(s1, 1 + g_rank, len);
    memset(s2, 2 + g_rank, len);
    req_init(&rs[0], r2, len, 2);
    req_init(&rs[1], r1, len, 1);
    ASSERT_OK(T->irecv(eps[peer], &rs[0].op));
    ASSERT_OK(T->irecv(eps[peer], &rs[1].op));
    barrier();
    req_init(&rs[2], s1, len, 1);
    req_init(&rs[3], s2, len, 2);
    ASSERT_OK(T->isend(eps[peer], &rs[2].op));
    ASSERT_OK(T->isend(eps[peer], &rs[3].op));
    wait_all(ctx, rs, 4);
    for (size_t i = 0; i < len; i++) {
        ASSERT_EQ(r1[i], 1 + peer);
        ASSERT_EQ(r2[i], 2 + peer);
    }
    free(s1);
    free(s2);
    free(r1);
    free(r2);
}

/* fp32 sum on arrival; posted first (reduced frame by frame out of the ring) or unexpected
 * (reduced from the buffer at post time); in place for odd peers. */
static void test_reduce(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t ring, int posted)
{
    size_t count = (size_t)(COLL_MIN_OF(ring / 4, SHM_FRAG_MAX) / 4) * 3 + 13;
    float *in    = malloc(count * 4), *opnd[MAX_RANKS], *out[MAX_RANKS];
    req_t  rs[2 * MAX_RANKS];
    int    k = 0;
    for (size_t i = 0; i < count; i++) {
        in[i] = (float)(i % 1000) + (float)g_rank;
    }
    for (int p = 0; p < g_nranks; p++) {
        opnd[p] = malloc(count * 4);
        out[p]  = (p % 2 == 1) ? opnd[p] : malloc(count * 4);
        for (size_t i = 0; i < count; i++) {
            opnd[p][i] = (float)i + 1000.0f * (float)p;
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int p = 0; p < g_nranks; p++) {
            if (p == g_rank) {
                continue;
            }
            if (pass == (posted ? 0 : 1)) {
                req_init(&rs[k], out[p], count * 4, 50 + posted);
                rs[k].op.operand = opnd[p];
                rs[k].op.dtype   = COLL_FLOAT32;
                rs[k].op.op      = COLL_SUM;
                ASSERT_OK(T->irecv(eps[p], &rs[k++].op));
            } else {
                req_init(&rs[k], in, count * 4, 50 + posted);
                ASSERT_OK(T->isend(eps[p], &rs[k++].op));
            }
        }
        if (pass == 0) {
            barrier();
            if (!posted) { /* let the data land in the unexpected buffers */
                double deadline = coll_time_s() + 10.0;
                for (int p = 0; p < g_nranks; p++) {
                    shm_ep_t *e = (shm_ep_t *)eps[p];
                    while (p != g_rank && e->match.unexp.count == 0) {
                        T->progress(ctx);
                        ASSERT_TRUE(coll_time_s() < deadline);
                    }
                }
            }
        }
    }
    wait_all(ctx, rs, k);
    for (int p = 0; p < g_nranks; p++) {
        for (size_t i = 0; i < count && p != g_rank; i++) {
            float want = (float)i + 1000.0f * (float)p + (float)(i % 1000) + (float)p;
            ASSERT_TRUE(out[p][i] == want);
        }
        if (out[p] != opnd[p]) {
            free(out[p]);
        }
        free(opnd[p]);
    }
    free(in);
}

/* A message buffered as unexpected completes its receive inside irecv(). */
static void test_unexpected(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps)
{
    int   peer = (g_rank + 1) % g_nranks, from = (g_rank + g_nranks - 1) % g_nranks;
    char  sb[100], rb[100];
    req_t s, r;
    memset(sb, 0x5a ^ g_rank, sizeof(sb));
    req_init(&s, sb, sizeof(sb), 300);
    ASSERT_OK(T->isend(eps[peer], &s.op));
    ASSERT_EQ(s.done, 1); /* small: all of it went into the ring at once */
    barrier();
    shm_ep_t *e        = (shm_ep_t *)eps[from];
    double    deadline = coll_time_s() + 10.0;
    while (e->match.unexp.count == 0) {
        T->progress(ctx);
        ASSERT_TRUE(coll_time_s() < deadline);
    }
    req_init(&r, rb, sizeof(rb), 300);
    ASSERT_OK(T->irecv(eps[from], &r.op));
    ASSERT_EQ(r.done, 1);
    ASSERT_OK(r.st);
    ASSERT_EQ((unsigned char)rb[99], 0x5a ^ from);
}

static void *waker_main(void *arg)
{
    void          **a    = arg;
    atomic_int     *stop = a[1];
    struct timespec ts   = {0, 1000000};
    while (atomic_load(stop) == 0) {
        T->wake(a[0]);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Long blocks must end through the doorbell (a hang here trips the alarm). */
static void test_block(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t ring)
{
    T->block(ctx, 0.001); /* nothing to do: returns after the timeout */

    /* wake() from another thread */
    pthread_t  th;
    atomic_int stop   = 0;
    void      *arg[2] = {ctx, &stop};
    ASSERT_EQ(pthread_create(&th, NULL, waker_main, arg), 0);
    T->block(ctx, 60.0);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);

    /* rank 0 sends 4 rings' worth to rank 1: both sides sleep (space / data) in between */
    if (g_rank > 1) {
        barrier();
        return;
    }
    size_t len = 4 * ring + 100;
    char  *buf = calloc(1, len);
    req_t  r;
    req_init(&r, buf, len, 400);
    if (g_rank == 1) {
        ASSERT_OK(T->irecv(eps[0], &r.op));
    } else {
        memset(buf, 0x77, len);
    }
    barrier();
    if (g_rank == 0) {
        ASSERT_OK(T->isend(eps[1], &r.op));
    }
    while (!r.done) {
        if (T->progress(ctx) == 0) {
            T->block(ctx, 60.0);
        }
    }
    ASSERT_OK(r.st);
    ASSERT_EQ((unsigned char)buf[len - 1], 0x77);
    free(buf);
}

static void phase_data(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t comm_id)
{
    uint64_t ring = ctx->ring_size;
    ASSERT_EQ(ring, 64 << 10); /* COLL_SHM_RING_SIZE=100k rounds down */
    ctx->live_check_s = 1e6;   /* no periodic wake-ups: a lost doorbell hangs (alarm) */
    test_sizes(ctx, eps, ring);
    barrier();
    test_flood(ctx, eps, ring);
    barrier();
    test_out_of_order(ctx, eps, ring);
    barrier();
    test_reduce(ctx, eps, ring, 1);
    barrier();
    test_reduce(ctx, eps, ring, 0);
    barrier();
    test_unexpected(ctx, eps);
    barrier();
    test_block(ctx, eps, ring);
    barrier();
}

/* ---- phase B: failures on 3 ranks ---- */

static void phase_fail(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t comm_id)
{
    char  buf[256];
    req_t r, s;

    memset(buf, 0, sizeof(buf));
    /* posted receive of 200 bytes, sender sends 100: the receive fails */
    if (g_rank == 1) {
        req_init(&r, buf, 200, 7);
        ASSERT_OK(T->irecv(eps[0], &r.op));
    }
    barrier();
    if (g_rank == 0) {
        req_init(&s, buf, 100, 7);
        ASSERT_OK(T->isend(eps[1], &s.op));
        req_init(&r, buf, 100, 8);
        ASSERT_OK(T->isend(eps[2], &r.op));
        wait_all(ctx, &s, 1);
        wait_all(ctx, &r, 1);
    } else if (g_rank == 1) {
        wait_all(ctx, &r, 1);
        ASSERT_EQ(r.st, COLL_ERR_MISMATCH);
        req_init(&r, buf, 10, 11); /* the endpoint stays failed */
        ASSERT_OK(T->irecv(eps[0], &r.op));
        ASSERT_EQ(r.done, 1);
        ASSERT_TRUE(r.st < 0);
    } else {
        /* unexpected 100 bytes, then a receive of 50: immediate error */
        shm_ep_t *e        = (shm_ep_t *)eps[0];
        double    deadline = coll_time_s() + 10.0;
        while (e->match.unexp.count == 0) {
            T->progress(ctx);
            ASSERT_TRUE(coll_time_s() < deadline);
        }
        req_init(&r, buf, 50, 8);
        ASSERT_EQ(T->irecv(eps[0], &r.op), COLL_ERR_MISMATCH);
    }
    barrier();

    /* garbage in the ring from rank 2 to rank 1 */
    if (g_rank == 1) {
        req_init(&r, buf, 16, 9);
        ASSERT_OK(T->irecv(eps[2], &r.op));
    }
    barrier();
    if (g_rank == 2) {
        shm_ep_t *e   = (shm_ep_t *)eps[1];
        uint64_t  off = e->tx.pos & (e->tx.size - 1);
        memset(e->tx.data + off, 0xab, SHM_FRAME_HDR);
        e->tx.pos += SHM_FRAME_HDR;
        atomic_store(&e->tx.ctrl->head, e->tx.pos);
        shm_bell_ring(&e->peer_seg.hdr->bell);
    } else if (g_rank == 1) {
        wait_all(ctx, &r, 1);
        ASSERT_EQ(r.st, COLL_ERR_TRANSPORT);
    }
    barrier();

    /* rank 2 dies while rank 0 waits for it */
    if (g_rank == 0) {
        req_init(&r, buf, 16, 10);
        ASSERT_OK(T->irecv(eps[2], &r.op));
    }
    barrier();
    if (g_rank == 2) {
        _exit(0); /* no finalize: the kernel drops the mappings and the lock */
    }
    if (g_rank == 0) {
        wait_all(ctx, &r, 1);
        ASSERT_EQ(r.st, COLL_ERR_REMOTE);
    }
}

/* ---- phase D: shared windows on 3 ranks ---- */

/* The engine's loop: progress (forgets old polls), poll, sleep until something changed. With
 * live_check_s huge, a lost wake-up hangs here (alarm). */
static coll_result_t win_wait(coll_tp_ctx_t *ctx, int rank, uint32_t slot, uint64_t epoch)
{
    coll_result_t st;
    int           who = -1;

    for (;;) {
        T->progress(ctx);
        st = (rank < 0) ? T->win_acked(ctx, epoch, &who)
                        : T->win_poll(ctx, rank, (int)(epoch & 1), slot, epoch);
        if (st != COLL_INPROGRESS) {
            return st;
        }
        ASSERT_TRUE(rank >= 0 || (who >= 0 && who < g_nranks));
        T->block(ctx, 60.0);
    }
}

static void phase_win(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t comm_id)
{
    size_t len = T->win_size(ctx);
    int    n   = g_nranks;

    ASSERT_EQ(len, 61440); /* COLL_SHM_WINDOW_SIZE=61000 rounds up to pages */
    ctx->live_check_s = 1e6;
    for (uint64_t epoch = 1; epoch <= 3; epoch++) { /* epoch 3 reuses the half of epoch 1 */
        unsigned char *mine = T->win_ptr(ctx, g_rank, (int)(epoch & 1));
        if (epoch == 3) {
            ASSERT_OK(win_wait(ctx, -1, 0, 1)); /* every rank is done with epoch 1 */
        }
        for (size_t i = 0; i < len; i++) {
            mine[i] = pattern(g_rank, (int)epoch, i, 0);
        }
        T->win_publish(ctx, (int)(epoch & 1), 3, epoch);
        for (int p = 0; p < n; p++) {
            const unsigned char *w = T->win_ptr(ctx, p, (int)(epoch & 1));
            ASSERT_OK(win_wait(ctx, p, 3, epoch));
            for (size_t i = 0; i < len; i += 97) {
                ASSERT_EQ(w[i], pattern(p, (int)epoch, i, 0));
            }
        }
        ASSERT_EQ(T->win_poll(ctx, (g_rank + 1) % n, (int)(epoch & 1), 4, epoch),
                  COLL_INPROGRESS); /* another slot: not published */
        T->win_ack(ctx, epoch);
    }
    ASSERT_OK(win_wait(ctx, -1, 0, 3));
    barrier();
    /* rank 2 dies: rank 0 waits for its flag, rank 1 for its acknowledgement of epoch 4 */
    ctx->live_check_s    = 0.05;
    ctx->next_live_check = 0;
    if (g_rank == 2) {
        _exit(0);
    }
    T->win_ack(ctx, 4);
    ASSERT_EQ(win_wait(ctx, g_rank == 0 ? 2 : -1, 5, 4), COLL_ERR_REMOTE);
    (void)eps;
    (void)comm_id;
}

/* ---- driver ---- */

static void rank_main(int nranks, uint64_t comm_id, rank_fn_t fn, int do_established)
{
    coll_peer_info_t    peers[MAX_RANKS];
    coll_tp_init_args_t args;
    coll_tp_ctx_t      *ctx;
    coll_tp_ep_t       *eps[MAX_RANKS] = {NULL}, *got[MAX_RANKS];
    char                h[COLL_TP_HANDLE_MAX], all[MAX_RANKS][COLL_TP_HANDLE_MAX];
    const void         *handles[MAX_RANKS];
    int                 list[MAX_RANKS], nlist = 0;
    size_t              hlen = 0;

    alarm(20);
    memset(peers, 0, sizeof(peers));
    for (int r = 0; r < nranks; r++) {
        peers[r].rank      = r;
        peers[r].host_hash = 0x5eed;
        handles[r]         = all[r];
        if (r != g_rank) {
            list[nlist++] = r;
        }
    }
    memset(&args, 0, sizeof(args));
    args.rank      = g_rank;
    args.nranks    = nranks;
    args.comm_id   = comm_id;
    args.job_tag   = 0x1234abcdull;
    args.peers     = peers;
    args.timeout_s = 10;
    ASSERT_OK(T->init(&args, &ctx));
    memset(h, 0, sizeof(h));
    ASSERT_OK(T->listen(ctx, h, &hlen));
    ASSERT_TRUE(hlen > 0 && hlen <= COLL_TP_HANDLE_MAX);
    allgather(h, COLL_TP_HANDLE_MAX, all);
    g_args    = args;
    g_handles = handles;
    ASSERT_OK(T->connect_all(ctx, list, nlist, handles, coll_time_s() + 10, got));
    for (int i = 0; i < nlist; i++) {
        ASSERT_EQ(got[i]->peer, list[i]);
        eps[list[i]] = got[i];
    }
    barrier();
    if (do_established) {
        T->established(ctx);
        barrier();
        ASSERT_EQ(count_leftovers(comm_id), 0);
    }
    fn(ctx, eps, comm_id);
    T->finalize(ctx);
}

/* ---- phase C: set-up errors, and finalize() without established() ---- */

static void phase_setup(coll_tp_ctx_t *ctx, coll_tp_ep_t **eps, uint64_t comm_id)
{
    coll_tp_ep_t *got[1] = {NULL};
    int           peer   = 0;

    if (g_rank == 0) {
        ASSERT_TRUE(count_leftovers(comm_id) == 2); /* no established(): still linked */
        coll_tp_ctx_t *ctx2;                        /* a second communicator with our name */
        char           h[COLL_TP_HANDLE_MAX];
        size_t         hlen;
        ASSERT_OK(T->init(&g_args, &ctx2));
        ASSERT_EQ(T->listen(ctx2, h, &hlen), COLL_ERR_SYSTEM);
        T->finalize(ctx2);
        ASSERT_TRUE(count_leftovers(comm_id) == 2);
    } else {
        char        bad[COLL_TP_HANDLE_MAX];
        const void *hs[2] = {bad, g_handles[1]};
        memcpy(bad, g_handles[0], sizeof(bad));
        bad[0] ^= 1; /* handle magic */
        ASSERT_EQ(T->connect_all(ctx, &peer, 1, hs, coll_time_s() + 1, got), COLL_ERR_TRANSPORT);
        ASSERT_TRUE(got[0] == NULL);
        ASSERT_EQ(T->connect_all(ctx, &g_rank, 1, g_handles, coll_time_s() + 1, got),
                  COLL_ERR_INVALID_USAGE);
    }
    barrier();
    if (g_rank == 0) {
        T->established(ctx);
    }
    barrier();
    if (g_rank == 1) { /* the name is gone: a late connect fails cleanly */
        ASSERT_EQ(T->connect_all(ctx, &peer, 1, g_handles, coll_time_s() + 1, got),
                  COLL_ERR_SYSTEM);
        ASSERT_TRUE(got[0] == NULL);
    }
    barrier();
}

static int run_phase(int nranks, rank_fn_t fn, int do_established, uint64_t comm_id)
{
    pid_t pids[MAX_RANKS];
    int   failed = 0;

    g_nranks = nranks;
    for (int i = 0; i < nranks; i++) {
        ASSERT_EQ(pipe(g_up[i]), 0);
        ASSERT_EQ(pipe(g_down[i]), 0);
    }
    for (int i = 0; i < nranks; i++) {
        pids[i] = fork();
        ASSERT_TRUE(pids[i] >= 0);
        if (pids[i] == 0) {
            g_rank = i;
            for (int j = 0; j < nranks; j++) {
                if (j != i) {
                    close(g_up[j][1]);
                    close(g_down[j][0]);
                }
                close(g_up[j][0]);
                close(g_down[j][1]);
            }
            rank_main(nranks, comm_id, fn, do_established);
            _exit(0);
        }
    }
    for (int i = 0; i < nranks; i++) {
        close(g_up[i][1]);
        close(g_down[i][0]);
    }
    parent_serve(nranks);
    for (int i = 0; i < nranks; i++) {
        close(g_up[i][0]);
        close(g_down[i][1]);
    }
    for (int i = 0; i < nranks; i++) {
        int status;
        ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", i, status);
            failed = 1;
        }
    }
    if (count_leftovers(comm_id) != 0) {
        fprintf(stderr, "segments of communicator %016" PRIx64 " left in /dev/shm\n", comm_id);
        failed = 1;
    }
    return failed;
}

static void test_pure(void)
{
    coll_peer_info_t a = {.rank = 0, .host_hash = 1}, b = {.rank = 1, .host_hash = 1};
    coll_peer_info_t c = {.rank = 2, .host_hash = 2};
    ASSERT_EQ(T->abi, COLL_TRANSPORT_ABI);
    ASSERT_TRUE(T->reachable(&a, &b) > 0);
    ASSERT_TRUE(T->reachable(&a, &a) < 0);
    ASSERT_TRUE(T->reachable(&a, &c) < 0);
}

int main(void)
{
    const char *why = NULL;
    uint64_t    base;

    if (!T->usable(&why)) {
        printf("SKIP: %s\n", why);
        return COLL_TEST_SKIP;
    }
    setenv("COLL_SHM_RING_SIZE", "100k", 1);
    test_pure();
    base       = ((uint64_t)getpid() << 32) ^ coll_time_ns();
    int failed = run_phase(4, phase_data, 1, base + 1);
    failed |= run_phase(3, phase_fail, 1, base + 2);
    failed |= run_phase(2, phase_setup, 0, base + 3);
    setenv("COLL_SHM_WINDOW_SIZE", "61000", 1);
    failed |= run_phase(3, phase_win, 1, base + 4);
    printf("%s\n", failed ? "FAIL" : "PASS");
    return failed;
}
