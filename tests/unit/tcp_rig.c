/* SPDX-License-Identifier: MIT */
/*
 * Rig of the TCP transport tests (tcp_rig.h): helpers shared by test_tcp (data) and
 * test_tcp_faults (failures). Setup exchanges listen handles through files in a mkdtemp()
 * directory; stray clients (garbage, silence, a wrong job secret, a replayed response) can visit
 * a rank's listener while it sets up. The driver forks the ranks of one configuration and checks
 * their exit status and the expected log lines. No test cases here.
 */
#include "tcp_rig.h"
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

const coll_transport_ops_t *ops = &coll_tp_tcp_ops;

static const uint8_t job_secret[16] = "test-job-secret";

static void on_done(void *arg, coll_result_t st)
{
    top_t *t = arg;
    t->done++;
    t->st = st;
}

void top_init(top_t *t, void *buf, size_t len, uint64_t tag)
{
    memset(t, 0, sizeof(*t));
    t->op.buf  = buf;
    t->op.len  = len;
    t->op.tag  = tag;
    t->op.done = on_done;
    t->op.arg  = t;
}

void fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0) {
            seed = coll_test_rand(&seed);
        }
        p[i] = (unsigned char)(seed >> (8 * (i % 8)));
    }
}

void check(const void *buf, size_t len, uint64_t seed, const char *what)
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

uint64_t seed_of(int src, int dst, uint64_t tag)
{
    return ((uint64_t)src * 131 + (uint64_t)dst) * 1000003u + tag;
}

/* Drive progress until every op of the array is done (or WAIT_MAX passes: fail). */
void wait_all(trank_t *t, top_t *ops_, int n)
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

void expect_ok(top_t *ops_, int n)
{
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(ops_[i].done, 1);
        ASSERT_OK(ops_[i].st);
    }
}

/* Every rank sends a zero-length message to every other rank and waits for theirs. */
void barrier(trank_t *t, uint64_t tag)
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
coll_result_t rank_setup(trank_t *t, const char *dir, int rank, int nranks, unsigned stray_ranks)
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

void rank_teardown(trank_t *t)
{
    for (int p = 0; p < t->nranks; p++) {
        if (t->eps[p] != NULL) {
            ops->ep_close(t->eps[p]);
        }
    }
    ops->finalize(t->ctx);
}

/* ---- driver ---- */

static int log_check(const char *prog, const char *path, const char *const *expect)
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
            fprintf(stderr, "%s: log lacks \"%s\"; log was:\n%s\n", prog, expect[i], text);
            failed = 1;
        }
    }
    unlink(path);
    return failed;
}

/* Forks the ranks of one configuration and checks how each ended (tcp_rig.h). */
int run(const char *prog, const run_cfg_t *cfg)
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
            fprintf(stderr, "%s: %s: rank %d failed (status 0x%x)\n", prog, cfg->name, r, status);
            failed = 1;
        }
        snprintf(path, sizeof(path), "%s/h%d", dir, r);
        unlink(path);
        snprintf(path, sizeof(path), "%s/s%d", dir, r);
        unlink(path);
    }
    if (cfg->expect_log != NULL) {
        snprintf(path, sizeof(path), "%s/log", dir);
        failed |= log_check(prog, path, cfg->expect_log);
    }
    rmdir(dir);
    printf("%s: %-34s %s (%.2f s)\n", prog, cfg->name, failed ? "FAIL" : "ok", coll_time_s() - t0);
    return failed;
}
