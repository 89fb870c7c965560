/* SPDX-License-Identifier: MIT */
/*
 * TCP transport test: forks 2..4 ranks that exchange listen handles through files in a mkdtemp()
 * directory (no bootstrap), connect, and move messages of many shapes (empty, odd, multi-frame,
 * unexpected, reduced on arrival, out of tag order) with 1, 2 and 4 sockets per peer. Also:
 * stray clients during setup (garbage, silence, a wrong job secret, a replayed response), a
 * corrupt frame, mismatched COLL_TCP_NSOCKS, setup timeouts, a
 * peer killed mid-frame, block/wake, interface choice. Expected log lines are checked in a file.
 * One program on purpose (over the usual size): every scenario shares the file-based handle
 * exchange, the rank runner and the log check, and each rank function sits beside its checks.
 */
#include "tcp/tcp.h"
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "log.h"
#include "param.h"
#include "coll_test.h"
#include "util.h"

#define MAXR     4
#define NSIZES   5
#define NBIG     4
#define NSMALL   32
#define WAIT_MAX 20.0 /* seconds; a hang fails the test instead of blocking make check */

static const coll_transport_ops_t *ops = &coll_tp_tcp_ops;

/* One operation with its completion record. */
typedef struct top {
    coll_tp_op_t  op;
    int           done;
    coll_result_t st;
} top_t;

typedef struct trank {
    int            rank;
    int            nranks;
    coll_tp_ctx_t *ctx;
    coll_tp_ep_t  *eps[MAXR];
    size_t         frag;
    int            stray_fds[2];
    pthread_t      stray_thread;
} trank_t;

static const uint8_t job_secret[16] = "test-job-secret";

static void on_done(void *arg, coll_result_t st)
{
    top_t *t = arg;
    t->done++;
    t->st = st;
}

static void top_init(top_t *t, void *buf, size_t len, uint64_t tag)
{
    memset(t, 0, sizeof(*t));
    t->op.buf  = buf;
    t->op.len  = len;
    t->op.tag  = tag;
    t->op.done = on_done;
    t->op.arg  = t;
}

static void fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0) {
            seed = coll_test_rand(&seed);
        }
        p[i] = (unsigned char)(seed >> (8 * (i % 8)));
    }
}

static void check(const void *buf, size_t len, uint64_t seed, const char *what)
{
    unsigned char *want = malloc(len + 1);
    ASSERT_TRUE(want != NULL);
    fill(want, len, seed);
    if (memcmp(want, buf, len) != 0) {
        size_t i = 0;
        while (((const unsigned char *)buf)[i] == want[i]) {
            i++;
        }
        ASSERT_(0, "%s: %zu bytes differ from byte %zu", what, len, i);
    }
    free(want);
}

static uint64_t seed_of(int src, int dst, uint64_t tag)
{
    return ((uint64_t)src * 131 + (uint64_t)dst) * 1000003u + tag;
}

/* Drive progress until every op of the array is done (or WAIT_MAX passes: fail). */
static void wait_all(trank_t *t, top_t *ops_, int n)
{
    double end = coll_time_s() + WAIT_MAX;
    for (;;) {
        int left = 0;
        ops->progress(t->ctx);
        for (int i = 0; i < n; i++) {
            left += ops_[i].done == 0;
        }
        if (left == 0) {
            return;
        }
        ASSERT_(coll_time_s() < end, "rank %d: %d operations still pending", t->rank, left);
        ops->block(t->ctx, 0.01);
    }
}

static void expect_ok(top_t *ops_, int n)
{
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(ops_[i].done, 1);
        ASSERT_OK(ops_[i].st);
    }
}

/* Every rank sends a zero-length message to every other rank and waits for theirs. */
static void barrier(trank_t *t, uint64_t tag)
{
    top_t ops_[2 * MAXR];
    int   n = 0;
    for (int p = 0; p < t->nranks; p++) {
        if (p != t->rank) {
            top_init(&ops_[n], NULL, 0, tag);
            ASSERT_OK(ops->irecv(t->eps[p], &ops_[n].op));
            n++;
        }
    }
    for (int p = 0; p < t->nranks; p++) {
        if (p != t->rank) {
            top_init(&ops_[n], NULL, 0, tag);
            ASSERT_OK(ops->isend(t->eps[p], &ops_[n].op));
            n++;
        }
    }
    wait_all(t, ops_, n);
    expect_ok(ops_, n);
}

/* ---- setup ---- */

static void write_handle(const char *dir, int rank, const void *h, size_t len)
{
    char tmp[512], path[512];
    snprintf(tmp, sizeof(tmp), "%s/h%d.tmp", dir, rank);
    snprintf(path, sizeof(path), "%s/h%d", dir, rank);
    FILE *f = fopen(tmp, "wb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fwrite(h, 1, len, f), len);
    ASSERT_EQ(fclose(f), 0);
    ASSERT_EQ(rename(tmp, path), 0);
}

static void read_handle(const char *dir, int rank, void *h)
{
    char   path[512];
    double end = coll_time_s() + WAIT_MAX;
    FILE  *f;
    snprintf(path, sizeof(path), "%s/h%d", dir, rank);
    while ((f = fopen(path, "rb")) == NULL) {
        ASSERT_(coll_time_s() < end, "no handle from rank %d", rank);
        usleep(1000); /* polling a file written by another process */
    }
    ASSERT_TRUE(fread(h, 1, COLL_TP_HANDLE_MAX, f) > 0);
    fclose(f);
}

/* A plain blocking client socket connected to the listener of an (IPv4) tcp handle. */
static int connect_to(const void *handle)
{
    const uint8_t     *h = handle;
    struct sockaddr_in sa;
    int                fd;

    ASSERT_EQ(coll_tcp_get32(h), COLL_TCP_HANDLE_MAGIC);
    ASSERT_EQ(coll_tcp_get16(h + 4), AF_INET);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port   = htons(coll_tcp_get16(h + 6));
    memcpy(&sa.sin_addr, h + 12, 4);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static void write_flag(const char *dir, int rank)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/s%d", dir, rank);
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fclose(f), 0);
}

static void wait_flag(const char *dir, int rank)
{
    char   path[512];
    double end = coll_time_s() + WAIT_MAX;
    snprintf(path, sizeof(path), "%s/s%d", dir, rank);
    while (access(path, F_OK) != 0) {
        ASSERT_(coll_time_s() < end, "rank %d never finished its strays", rank);
        usleep(1000); /* polling a file written by another process */
    }
}

/* Read the acceptor's challenge (blocking, bounded by SO_RCVTIMEO). */
static void read_challenge(int fd, uint8_t ch[COLL_AUTH_CHALLENGE_LEN])
{
    struct timeval tv = {.tv_sec = (time_t)WAIT_MAX};
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    ASSERT_EQ(recv(fd, ch, COLL_AUTH_CHALLENGE_LEN, MSG_WAITALL), COLL_AUTH_CHALLENGE_LEN);
}

/* The acceptor must close fd without sending a proof (or anything else) after the challenge. */
static void expect_rejected(int fd, const char *what)
{
    uint8_t b[64];
    ssize_t n = recv(fd, b, sizeof(b), 0);
    ASSERT_(n == 0 || (n < 0 && errno == ECONNRESET), "%s: the acceptor answered %zd bytes", what,
            n);
    close(fd);
}

typedef struct {
    trank_t    *t;
    const void *handle;
    const char *dir;
} stray_arg_t;

/* Stray clients on a rank's own listener while it sets up: one that sends garbage, one that stays
 * silent, one that knows the job tag and the hello format but not the secret, one that replays a
 * valid response made for another connection's challenge. The first, third and fourth must be
 * closed without a proof. Then the flag lets lower ranks connect to this one. */
static void *stray_main(void *p)
{
    stray_arg_t      *a = p;
    coll_auth_key_t   right, wrong;
    coll_auth_state_t as;
    uint8_t           ch[COLL_AUTH_CHALLENGE_LEN], ch2[COLL_AUTH_CHALLENGE_LEN];
    uint8_t           msg[COLL_TCP_OUT_LEN];
    coll_tcp_hello_t  h = {.magic     = COLL_TCP_HELLO_MAGIC,
                           .version   = COLL_TCP_VERSION,
                           .job_tag   = 0xabcdef,
                           .from_rank = 0,
                           .to_rank   = (uint32_t)a->t->rank,
                           .comm_id   = 0x1234,
                           .nsocks    = 1,
                           .frag_size = 4096};
    int               fd, fd2;

    coll_auth_derive(job_secret, "transport", 0x1234, &right);
    coll_auth_derive((const uint8_t *)"another-secret!", "transport", 0x1234, &wrong);
    memset(msg, 0xab, sizeof(msg));
    a->t->stray_fds[0] = connect_to(a->handle);
    ASSERT_EQ(write(a->t->stray_fds[0], msg, sizeof(msg)), (ssize_t)sizeof(msg));
    a->t->stray_fds[1] = connect_to(a->handle); /* sends nothing */

    fd = connect_to(a->handle);
    read_challenge(fd, ch);
    coll_tcp_hello_pack(&h, msg + COLL_AUTH_RESPONSE_LEN);
    ASSERT_OK(
        coll_auth_respond(&wrong, &as, ch, msg + COLL_AUTH_RESPONSE_LEN, COLL_TCP_HELLO_LEN, msg));
    ASSERT_EQ(write(fd, msg, sizeof(msg)), (ssize_t)sizeof(msg));
    expect_rejected(fd, "a response made with another secret");

    fd  = connect_to(a->handle);
    fd2 = connect_to(a->handle);
    read_challenge(fd, ch);
    read_challenge(fd2, ch2);
    ASSERT_OK(
        coll_auth_respond(&right, &as, ch, msg + COLL_AUTH_RESPONSE_LEN, COLL_TCP_HELLO_LEN, msg));
    ASSERT_EQ(write(fd2, msg, sizeof(msg)), (ssize_t)sizeof(msg));
    expect_rejected(fd2, "a response replayed from another connection");
    close(fd);

    read_challenge(a->t->stray_fds[0], ch);
    expect_rejected(a->t->stray_fds[0], "garbage");
    write_flag(a->dir, a->t->rank);
    return NULL;
}

/* stray_ranks: bit r set = rank r is visited by stray clients while it sets up. */
static coll_result_t rank_setup(trank_t *t, const char *dir, int rank, int nranks,
                                unsigned stray_ranks)
{
    int              strays = (stray_ranks >> rank) & 1;
    stray_arg_t      sa;
    coll_peer_info_t peers[MAXR];
    uint8_t          handles[MAXR][COLL_TP_HANDLE_MAX];
    const void      *hp[MAXR];
    int              plist[MAXR], n = 0;
    size_t           len = 0;
    coll_tp_ep_t    *eps[MAXR];

    memset(t, 0, sizeof(*t));
    t->rank   = rank;
    t->nranks = nranks;
    coll_log_set_rank(rank);
    for (int r = 0; r < nranks; r++) {
        memset(&peers[r], 0, sizeof(peers[r]));
        peers[r].rank      = r;
        peers[r].host_hash = 42;
        snprintf(peers[r].hostname, sizeof(peers[r].hostname), "localhost");
    }
    coll_tp_init_args_t args = {.rank      = rank,
                                .nranks    = nranks,
                                .comm_id   = 0x1234,
                                .job_tag   = 0xabcdef,
                                .peers     = peers,
                                .timeout_s = 30};
    coll_auth_derive(job_secret, "transport", 0x1234, &args.auth_key);
    ASSERT_TRUE(ops->usable(NULL));
    ASSERT_OK(ops->init(&args, &t->ctx));
    t->frag = coll_tcp_ctx(t->ctx)->frag_size;
    ASSERT_OK(ops->listen(t->ctx, handles[rank], &len));
    ASSERT_TRUE(len > 0 && len <= COLL_TP_HANDLE_MAX);
    write_handle(dir, rank, handles[rank], len);
    if (strays) {
        sa = (stray_arg_t){.t = t, .handle = handles[rank], .dir = dir};
        ASSERT_EQ(pthread_create(&t->stray_thread, NULL, stray_main, &sa), 0);
    }
    for (int r = 0; r < nranks; r++) {
        if (r != rank) {
            read_handle(dir, r, handles[r]);
            plist[n++] = r;
        }
        hp[r] = handles[r];
    }
    /* higher ranks first serve their strays: then every rejection happens while they listen */
    for (int r = rank + 1; r < nranks; r++) {
        if ((stray_ranks >> r) & 1) {
            wait_flag(dir, r);
        }
    }
    coll_result_t st = ops->connect_all(t->ctx, plist, n, hp, coll_time_s() + WAIT_MAX, eps);
    for (int i = 0; st == COLL_OK && i < n; i++) {
        t->eps[plist[i]] = eps[i];
        ASSERT_EQ(ops->reachable(&peers[rank], &peers[plist[i]]), 10);
    }
    if (st == COLL_OK) {
        ops->established(t->ctx);
    }
    if (strays) {
        ASSERT_EQ(pthread_join(t->stray_thread, NULL), 0);
        close(t->stray_fds[1]);
    }
    return st;
}

static void rank_teardown(trank_t *t)
{
    for (int p = 0; p < t->nranks; p++) {
        if (t->eps[p] != NULL) {
            ops->ep_close(t->eps[p]);
        }
    }
    ops->finalize(t->ctx);
}

/* ---- data tests (every rank with every other rank) ---- */

static uint64_t zcopy_frames(trank_t *t)
{
    uint64_t n = 0;
    for (int p = 0; p < t->nranks; p++) {
        if (t->eps[p] != NULL) {
            n += ((coll_tcp_ep_t *)t->eps[p])->stats.frames_zcopy;
        }
    }
    return n;
}

/* Sizes 0, 1, 7, 4096, 5 frames + 3, received with the receives posted first (zero copy). */
static void test_sizes(trank_t *t)
{
    size_t   sizes[NSIZES] = {0, 1, 7, 4096, t->frag * 5 + 3};
    top_t    recvs[MAXR * NSIZES], sends[MAXR * NSIZES];
    char    *rbuf[MAXR * NSIZES], *sbuf[MAXR * NSIZES];
    int      n   = 0;
    uint64_t zc0 = zcopy_frames(t);

    for (int p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSIZES; k++, n++) {
            rbuf[n] = malloc(sizes[k] + 1);
            sbuf[n] = malloc(sizes[k] + 1);
            fill(sbuf[n], sizes[k], seed_of(t->rank, p, 100 + k));
            top_init(&recvs[n], rbuf[n], sizes[k], 100 + k);
            top_init(&sends[n], sbuf[n], sizes[k], 100 + k);
            ASSERT_OK(ops->irecv(t->eps[p], &recvs[n].op));
        }
    }
    barrier(t, 1); /* every receive is posted before any data moves */
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSIZES; k++, i++) {
            ASSERT_OK(ops->isend(t->eps[p], &sends[i].op));
        }
    }
    wait_all(t, recvs, n);
    wait_all(t, sends, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSIZES; k++, i++) {
            ASSERT_EQ(recvs[i].op.bytes, sizes[k]);
            ASSERT_EQ(sends[i].op.bytes, sizes[k]);
            check(rbuf[i], sizes[k], seed_of(p, t->rank, 100 + k), "sizes");
            free(rbuf[i]);
            free(sbuf[i]);
        }
    }
    ASSERT_TRUE(zcopy_frames(t) > zc0);
}

/* Both sides send several large messages before posting any receive, then post them in
 * reverse tag order: nothing may deadlock, unexpected data must be buffered and matched. */
static void test_unexpected(trank_t *t)
{
    size_t len = t->frag * 8 + 5;
    top_t  recvs[MAXR * NBIG], sends[MAXR * NBIG];
    char  *rbuf[MAXR * NBIG], *sbuf[MAXR * NBIG];
    int    n = 0;

    for (int p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NBIG; k++, n++) {
            sbuf[n] = malloc(len);
            rbuf[n] = malloc(len);
            fill(sbuf[n], len, seed_of(t->rank, p, 200 + k));
            top_init(&sends[n], sbuf[n], len, 200 + k);
            ASSERT_OK(ops->isend(t->eps[p], &sends[n].op));
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        int p = 0, k = i % NBIG, idx = i / NBIG;
        for (int q = 0, c = 0; q < t->nranks; q++) {
            if (q != t->rank && c++ == idx) {
                p = q;
            }
        }
        top_init(&recvs[i], rbuf[i], len, 200 + k);
        ASSERT_OK(ops->irecv(t->eps[p], &recvs[i].op));
        ops->progress(t->ctx);
    }
    wait_all(t, recvs, n);
    wait_all(t, sends, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NBIG; k++, i++) {
            check(rbuf[i], len, seed_of(p, t->rank, 200 + k), "unexpected");
            free(rbuf[i]);
            free(sbuf[i]);
        }
    }
}

/* Many small messages, received in an order unrelated to the send order. */
static void test_small_shuffled(trank_t *t)
{
    top_t recvs[MAXR * NSMALL], sends[MAXR * NSMALL];
    char  rbuf[MAXR * NSMALL][128], sbuf[MAXR * NSMALL][128];
    int   n = 0;

    for (int p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSMALL; k++, n++) {
            int kk = (k * 7 + 3) % NSMALL; /* a permutation of the tags */
            top_init(&recvs[n], rbuf[n], (size_t)kk + 1, 300 + kk);
            ASSERT_OK(ops->irecv(t->eps[p], &recvs[n].op));
            fill(sbuf[n], (size_t)k + 1, seed_of(t->rank, p, 300 + k));
            top_init(&sends[n], sbuf[n], (size_t)k + 1, 300 + k);
            ASSERT_OK(ops->isend(t->eps[p], &sends[n].op));
        }
    }
    wait_all(t, recvs, n);
    wait_all(t, sends, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int i = 0, p = 0; p < t->nranks; p++) {
        for (int k = 0; p != t->rank && k < NSMALL; k++, i++) {
            int kk = (k * 7 + 3) % NSMALL;
            check(rbuf[i], (size_t)kk + 1, seed_of(p, t->rank, 300 + kk), "small");
        }
    }
}

/* fp32 sum on arrival: out of place posted early, in place posted late (data buffered). */
static void test_reduce(trank_t *t)
{
    size_t count = t->frag / 4 * 3 + 5, len = count * sizeof(float);
    top_t  recvs[2 * MAXR], sends[2 * MAXR];
    float *dst[2 * MAXR], *opnd[2 * MAXR], *src = malloc(len);
    int    n = 0;

    for (size_t i = 0; i < count; i++) {
        src[i] = (float)(i % 7 + (size_t)t->rank);
    }
    for (int p = 0; p < t->nranks; p++) {
        if (p == t->rank) {
            continue;
        }
        for (int v = 0; v < 2; v++, n++) {
            dst[n]  = malloc(len);
            opnd[n] = v == 0 ? malloc(len) : dst[n]; /* v == 1: in place */
            for (size_t i = 0; i < count; i++) {
                opnd[n][i] = (float)(i % 100) + 1000.0f * (float)v;
            }
            top_init(&recvs[n], dst[n], len, 400 + v);
            recvs[n].op.operand = opnd[n];
            recvs[n].op.dtype   = COLL_FLOAT32;
            recvs[n].op.op      = COLL_SUM;
            if (v == 0) {
                ASSERT_OK(ops->irecv(t->eps[p], &recvs[n].op));
            }
        }
    }
    barrier(t, 2);
    for (int p = 0, i = 0; p < t->nranks; p++) {
        for (int v = 0; p != t->rank && v < 2; v++, i++) {
            top_init(&sends[i], src, len, 400 + v);
            ASSERT_OK(ops->isend(t->eps[p], &sends[i].op));
        }
    }
    wait_all(t, sends, n);
    barrier(t, 3); /* the in-place messages have arrived or are arriving: post late */
    for (int p = 0, i = 0; p < t->nranks; p++) {
        for (int v = 0; p != t->rank && v < 2; v++, i++) {
            if (v == 1) {
                ASSERT_OK(ops->irecv(t->eps[p], &recvs[i].op));
            }
        }
    }
    wait_all(t, recvs, n);
    expect_ok(recvs, n);
    expect_ok(sends, n);
    for (int p = 0, i = 0; p < t->nranks; p++) {
        for (int v = 0; p != t->rank && v < 2; v++, i++) {
            for (size_t e = 0; e < count; e++) {
                float want = (float)(e % 100) + 1000.0f * (float)v + (float)(e % 7 + (size_t)p);
                ASSERT_((dst[i][e] == want), "reduce from %d v%d elem %zu: %g != %g", p, v, e,
                        (double)dst[i][e], (double)want);
            }
            if (v == 0) {
                free(opnd[i]);
            }
            free(dst[i]);
        }
    }
    free(src);
}

static volatile int wake_stop;

static void *waker(void *arg)
{
    while (!wake_stop) {
        ops->wake(arg);
        usleep(1000);
    }
    return NULL;
}

/* wake() before block() makes block return at once; so does wake() from another thread. */
static void test_block_wake(trank_t *t)
{
    pthread_t th;
    double    t0 = coll_time_s();

    ops->wake(t->ctx);
    ops->block(t->ctx, 10.0);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0); /* not a timing test: 10 s means wake was lost */
    wake_stop = 0;
    ASSERT_EQ(pthread_create(&th, NULL, waker, t->ctx), 0);
    t0 = coll_time_s();
    ops->block(t->ctx, 10.0);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0);
    wake_stop = 1;
    ASSERT_EQ(pthread_join(th, NULL), 0);
    ops->block(t->ctx, 0); /* drains nothing, returns at once */
}

static int rank_main_data(const char *dir, int rank, int nranks)
{
    trank_t t;

    ASSERT_OK(rank_setup(&t, dir, rank, nranks, 1u << (nranks - 1) | 1u << 1));
    test_sizes(&t);
    test_unexpected(&t);
    test_small_shuffled(&t);
    test_reduce(&t);
    if (rank == 0) {
        test_block_wake(&t);
    }
    barrier(&t, 4);
    rank_teardown(&t);
    return 0;
}

/* Rank 0 dies (SIGKILL) in the middle of a frame: it writes a header announcing a 1 MiB
 * message and 1000 bytes of payload, then kills itself. Rank 1 must see COLL_ERR_REMOTE on the
 * pending receive and on a send too large to fit in the socket buffers, then immediately on
 * new operations. */
static int rank_main_kill(const char *dir, int rank, int nranks)
{
    size_t  rlen = 1u << 20, slen = 128u << 20; /* more than the kernel buffers of 2 sockets */
    char   *buf = calloc(1, slen);
    uint8_t frame[COLL_TCP_FRAME_HDR + 1000];
    top_t   r, s, x;
    trank_t t;

    ASSERT_TRUE(buf != NULL);
    ASSERT_OK(rank_setup(&t, dir, rank, nranks, 0));
    top_init(&r, buf, rlen, 900);
    if (rank == 1) {
        ASSERT_OK(ops->irecv(t.eps[0], &r.op));
    }
    barrier(&t, 5);
    if (rank == 0) {
        memset(frame, 7, sizeof(frame));
        coll_tcp_put32(frame + 0, COLL_TCP_FRAME_MAGIC);
        coll_tcp_put32(frame + 4, (uint32_t)t.frag);
        coll_tcp_put64(frame + 8, 900);
        coll_tcp_put64(frame + 16, rlen);
        coll_tcp_put64(frame + 24, 0);
        ASSERT_EQ(write(((coll_tcp_ep_t *)t.eps[1])->socks[0].fd, frame, sizeof(frame)),
                  (ssize_t)sizeof(frame));
        raise(SIGKILL);
    }
    top_init(&s, buf, slen, 901); /* rank 0 never reads it */
    ASSERT_OK(ops->isend(t.eps[0], &s.op));
    double t0 = coll_time_s();
    wait_all(&t, &r, 1);
    wait_all(&t, &s, 1);
    fprintf(stderr, "test_tcp: peer death noticed after %.3f s\n", coll_time_s() - t0);
    ASSERT_EQ(r.st, COLL_ERR_REMOTE);
    ASSERT_EQ(s.st, COLL_ERR_REMOTE);
    top_init(&x, buf, 8, 902);
    ASSERT_EQ(ops->irecv(t.eps[0], &x.op), COLL_ERR_REMOTE);
    ASSERT_EQ(ops->isend(t.eps[0], &x.op), COLL_ERR_REMOTE);
    ASSERT_EQ(x.done, 0);
    rank_teardown(&t);
    free(buf);
    return 0;
}

/* Rank 0 writes a corrupt frame header into a data socket: rank 1 fails the endpoint with
 * COLL_ERR_TRANSPORT (pending receive and later operations), without reading past it. */
static int rank_main_badframe(const char *dir, int rank, int nranks)
{
    uint8_t junk[COLL_TCP_FRAME_HDR];
    char    buf[8];
    top_t   r, x;
    trank_t t;

    ASSERT_OK(rank_setup(&t, dir, rank, nranks, 0));
    if (rank == 1) {
        top_init(&r, buf, sizeof(buf), 700);
        ASSERT_OK(ops->irecv(t.eps[0], &r.op));
    }
    barrier(&t, 6);
    if (rank == 0) {
        memset(junk, 0x5a, sizeof(junk));
        ASSERT_EQ(write(((coll_tcp_ep_t *)t.eps[1])->socks[0].fd, junk, sizeof(junk)),
                  (ssize_t)sizeof(junk));
        rank_teardown(&t);
        return 0;
    }
    wait_all(&t, &r, 1);
    ASSERT_EQ(r.st, COLL_ERR_TRANSPORT);
    top_init(&x, buf, sizeof(buf), 701);
    ASSERT_EQ(ops->isend(t.eps[0], &x.op), COLL_ERR_TRANSPORT);
    rank_teardown(&t);
    return 0;
}

/* The two ranks disagree on COLL_TCP_NSOCKS: both fail fast with COLL_ERR_INVALID_USAGE. */
static int rank_main_mismatch(const char *dir, int rank, int nranks)
{
    trank_t t;
    double  t0 = coll_time_s();

    ASSERT_EQ(rank_setup(&t, dir, rank, nranks, 0), COLL_ERR_INVALID_USAGE);
    ASSERT_TRUE(coll_time_s() - t0 < WAIT_MAX / 2);
    ops->finalize(t.ctx);
    return 0;
}

/* Interface choice: the topology's NIC, then COLL_SOCKET_IFNAME over it. */
static int rank_main_ifaddr(const char *dir, int rank, int nranks)
{
    coll_tcp_addr_t a;
    const char     *why = NULL;
    char            buf[80];

    ASSERT_OK(coll_tcp_pick_addr(1, "", &a, &why));
    ASSERT_EQ(a.sa.ss_family, AF_INET);
    ASSERT_STR_CONTAINS(coll_tcp_sa_str((struct sockaddr *)&a.sa, buf, sizeof(buf)), "127.0.0.1");
    ASSERT_OK(coll_tcp_pick_addr(0, "", &a, &why));
    printf("test_tcp: default interface %s (%s)\n", a.ifname, why);
    /* the topology's NIC (lo stands in: up, with an IPv4 address) */
    ASSERT_OK(coll_tcp_pick_addr(0, "lo", &a, &why));
    ASSERT_TRUE(strcmp(a.ifname, "lo") == 0);
    ASSERT_STR_CONTAINS(why, "nearest");
    ASSERT_OK(coll_tcp_pick_addr(0, "nosuchif0", &a, &why)); /* gone: the default rule */
    ASSERT_TRUE(strstr(why, "nearest") == NULL);
    setenv("COLL_SOCKET_IFNAME", "=lo", 1);
    coll_params_reset_for_testing();
    ASSERT_OK(coll_tcp_pick_addr(0, "", &a, &why));
    ASSERT_TRUE(strcmp(a.ifname, "lo") == 0);
    setenv("COLL_SOCKET_IFNAME", "=nosuchif0", 1);
    coll_params_reset_for_testing();
    ASSERT_EQ(coll_tcp_pick_addr(0, "", &a, &why), COLL_ERR_INVALID_USAGE);
    /* the user's choice wins over the topology's */
    ASSERT_EQ(coll_tcp_pick_addr(0, "lo", &a, &why), COLL_ERR_INVALID_USAGE);
    setenv("COLL_SOCKET_IFNAME", "^lo,docker", 1);
    coll_params_reset_for_testing();
    if (coll_tcp_pick_addr(0, "", &a, &why) == COLL_OK) {
        ASSERT_TRUE(strcmp(a.ifname, "lo") != 0);
    }
    return 0;
}

/* connect_all gives up at the deadline and names what is missing: a lower rank that never
 * connects, and a higher rank whose port refuses connections (retried until then). */
static int rank_main_timeout(const char *dir, int rank, int nranks)
{
    coll_peer_info_t    peers[2] = {{.rank = 0, .host_hash = 42}, {.rank = 1, .host_hash = 42}};
    coll_tp_init_args_t args     = {
            .rank = 1, .nranks = 2, .comm_id = 7, .job_tag = 9, .peers = peers, .timeout_s = 1};
    uint8_t        handle[COLL_TP_HANDLE_MAX];
    const void    *hp[2] = {NULL, handle};
    coll_tp_ctx_t *a, *b;
    coll_tp_ep_t  *ep;
    size_t         len;
    int            peer;

    ASSERT_OK(ops->init(&args, &b));
    ASSERT_OK(ops->listen(b, handle, &len));
    peer = 0;
    ASSERT_EQ(ops->connect_all(b, &peer, 1, hp, coll_time_s() + 0.3, &ep), COLL_ERR_TIMEOUT);
    ops->finalize(b); /* its port is closed now: connecting to it is refused */
    args.rank = 0;
    ASSERT_OK(ops->init(&args, &a));
    peer = 1;
    ASSERT_EQ(ops->connect_all(a, &peer, 1, hp, coll_time_s() + 0.3, &ep), COLL_ERR_TIMEOUT);
    ops->finalize(a);
    return 0;
}

/* ---- driver ---- */

typedef int (*rank_fn_t)(const char *dir, int rank, int nranks);

typedef struct run_cfg {
    const char        *name;
    rank_fn_t          fn;
    int                nranks;
    const char        *nsocks;      /* COLL_TCP_NSOCKS */
    const char        *frag;        /* COLL_TCP_FRAG_SIZE */
    const char        *nsocks_last; /* COLL_TCP_NSOCKS of the last rank, if different */
    int                kill_rank0;  /* rank 0 is expected to die of SIGKILL */
    const char *const *expect_log;  /* if set: the log goes to a file that must hold these */
} run_cfg_t;

static int log_check(const char *path, const char *const *expect)
{
    static char text[1 << 16];
    FILE       *f      = fopen(path, "r");
    size_t      n      = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;
    int         failed = 0;

    text[n] = '\0';
    if (f != NULL) {
        fclose(f);
    }
    for (int i = 0; expect[i] != NULL; i++) {
        if (strstr(text, expect[i]) == NULL) {
            fprintf(stderr, "test_tcp: log lacks \"%s\"; log was:\n%s\n", expect[i], text);
            failed = 1;
        }
    }
    unlink(path);
    return failed;
}

/* Forks the ranks of one configuration and checks how each ended. */
static int run(const run_cfg_t *cfg)
{
    char   dir[] = "/tmp/coll_test_tcp.XXXXXX", path[600];
    pid_t  pids[MAXR];
    int    failed = 0;
    double t0     = coll_time_s();

    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/log", dir);
    for (int r = 0; r < cfg->nranks; r++) {
        pids[r] = fork();
        ASSERT_TRUE(pids[r] >= 0);
        if (pids[r] == 0) {
            alarm(60); /* a hung child dies instead of hanging make check */
            int last = r == cfg->nranks - 1 && cfg->nsocks_last != NULL;
            setenv("COLL_TCP_NSOCKS", last ? cfg->nsocks_last : cfg->nsocks, 1);
            setenv("COLL_TCP_FRAG_SIZE", cfg->frag, 1);
            if (cfg->expect_log != NULL) { /* at least WARN, from every subsystem */
                const char *lvl = getenv("COLL_DEBUG");
                if (lvl == NULL || strcmp(lvl, "none") == 0 || strcmp(lvl, "error") == 0) {
                    setenv("COLL_DEBUG", "warn", 1);
                }
                setenv("COLL_DEBUG_SUBSYS", "all", 1);
                setenv("COLL_DEBUG_FILE", path, 1);
            }
            coll_params_reset_for_testing();
            _exit(cfg->fn(dir, r, cfg->nranks));
        }
    }
    for (int r = 0; r < cfg->nranks; r++) {
        int status, want_kill = cfg->kill_rank0 && r == 0;
        ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
        if (want_kill ? !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                      : !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "test_tcp: %s: rank %d failed (status 0x%x)\n", cfg->name, r, status);
            failed = 1;
        }
        snprintf(path, sizeof(path), "%s/h%d", dir, r);
        unlink(path);
        snprintf(path, sizeof(path), "%s/s%d", dir, r);
        unlink(path);
    }
    if (cfg->expect_log != NULL) {
        snprintf(path, sizeof(path), "%s/log", dir);
        failed |= log_check(path, cfg->expect_log);
    }
    rmdir(dir);
    printf("test_tcp: %-34s %s (%.2f s)\n", cfg->name, failed ? "FAIL" : "ok", coll_time_s() - t0);
    return failed;
}

/* Lines each run's log must contain (the log goes to a file in the run's directory). */
static const char *const log_if[]    = {"COLL_SOCKET_IFNAME==nosuchif0", NULL};
static const char *const log_stray[] = {"not an authentication response",
                                        "does not hold this job's secret", NULL};
static const char *const log_kill[]  = {"connection to rank 0", "(peer process died?)", NULL};
static const char *const log_bad[]   = {"bad frame on socket 0: bad magic", NULL};
static const char *const log_mism[]  = {"COLL_TCP_NSOCKS=2", "refused connection", NULL};
static const char *const log_tmo[]   = {
      "rank 1 is still missing rank(s) 0 (2 of 2 sockets)",
      "missing rank(s) 1 (2 of 2 sockets, last error: Connection refused)", NULL};

/* name, function, ranks, COLL_TCP_NSOCKS, COLL_TCP_FRAG_SIZE, NSOCKS of the last rank,
 * rank 0 dies, expected log lines */
static const run_cfg_t run_cfgs[] = {
    {"interface choice", rank_main_ifaddr, 1, "2", "256k", NULL, 0, log_if},
    {"3 ranks, 2 sockets, 16k frames", rank_main_data, 3, "2", "16k", NULL, 0, log_stray},
    {"2 ranks, 1 socket, 256k frames", rank_main_data, 2, "1", "256k", NULL, 0, log_stray},
    {"4 ranks, 4 sockets, 8k frames", rank_main_data, 4, "4", "8k", NULL, 0, log_stray},
    {"peer killed mid-transfer", rank_main_kill, 2, "2", "256k", NULL, 1, log_kill},
    {"corrupt frame header", rank_main_badframe, 2, "2", "256k", NULL, 0, log_bad},
    {"COLL_TCP_NSOCKS differs", rank_main_mismatch, 2, "2", "256k", "3", 0, log_mism},
    {"connection setup timeouts", rank_main_timeout, 1, "2", "256k", NULL, 0, log_tmo},
};

int main(void)
{
    int failed = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    for (size_t i = 0; i < sizeof(run_cfgs) / sizeof(run_cfgs[0]); i++) {
        failed |= run(&run_cfgs[i]);
    }
    return failed ? 1 : 0;
}
