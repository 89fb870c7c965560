/* SPDX-License-Identifier: MIT */
/*
 * Failure behaviour, over every transport: a rank killed with SIGKILL in the middle of large
 * all-reduces (and, over shm, of shared-window all-reduces, where survivors wait on flags
 * rather than messages) makes every survivor fail with an error naming it, quickly;
 * coll_comm_abort from another thread unblocks a wait at once and the other ranks learn who
 * aborted; a silent rank turns into COLL_ERR_TIMEOUT naming it (also while waited on through a
 * window); garbage, silent connections and a client that knows the job's wire format and tag
 * but not its secret are rejected by the bootstrap root (no proof, nothing parsed) while the
 * job still forms and works.
 */
#include "coll_test.h"
#include "auth.h"
#include "bootstrap/wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- kill -9 of rank `victim` while everyone runs all-reduces ---- */
typedef struct {
    int    victim;
    size_t count; /* fp32 elements per call */
    int    at;    /* the call the victim dies before */
} kill_args_t;

static int kill_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const kill_args_t *ka     = arg;
    int                victim = ka->victim;
    size_t             count  = ka->count;
    float             *buf    = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        buf[i] = 1.0f;
    }
    double        t_fail = 0;
    coll_result_t st     = COLL_OK;
    for (int it = 0; it < 100000 && st == COLL_OK; it++) {
        if (rank == victim && it == ka->at) {
            raise(SIGKILL);
        }
        st     = coll_allreduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm);
        t_fail = now_s();
    }
    free(buf);
    char want[32];
    snprintf(want, sizeof(want), "rank %d", victim);
    const char *msg = coll_comm_last_error(comm);
    printf("rank %d: %s after the kill: %s\n", rank, coll_strerror(st), msg);
    ASSERT_TRUE(st == COLL_ERR_REMOTE || st == COLL_ERR_TRANSPORT);
    ASSERT_STR_CONTAINS(msg, want);
    ASSERT_EQ(coll_comm_get_error(comm), st);
    /* a later call fails at once with the same error */
    double t0 = now_s();
    float  x  = 1;
    ASSERT_EQ(coll_allreduce(&x, &x, 1, COLL_FLOAT32, COLL_SUM, comm), st);
    ASSERT_TRUE(now_s() - t0 < 1.0);
    (void)t_fail;
    return 0;
}

/* ---- abort from another thread while blocked in a receive that never completes ---- */
static void *abort_thread(void *arg)
{
    usleep(200000);
    coll_comm_abort((coll_comm_t *)arg);
    return NULL;
}

static int abort_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    pthread_t th;
    int       x = 0;
    if (rank == 1) {
        pthread_create(&th, NULL, abort_thread, comm);
    }
    coll_request_t *req;
    int             done = 0;
    double          t0   = now_s();
    ASSERT_OK(coll_irecv(&x, 1, COLL_INT32, (rank + 1) % n, comm, &req)); /* nobody sends */
    coll_result_t st = coll_wait(req);
    double        dt = now_s() - t0;
    /* the failed request was released (its memory stays with the communicator): using it again
     * is refused, where it once unlinked it a second time from the active list */
    ASSERT_EQ(coll_wait(req), COLL_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(coll_last_error(), "coll_wait: req is not a live request");
    ASSERT_EQ(coll_test(req, &done), COLL_ERR_INVALID_USAGE);
    ASSERT_EQ(done, 0);
    printf("rank %d: recv returned %s after %.2f s: %s\n", rank, coll_strerror(st), dt,
           coll_comm_last_error(comm));
    if (rank == 1) {
        pthread_join(th, NULL);
        ASSERT_EQ(st, COLL_ERR_ABORTED);
    } else {
        ASSERT_EQ(st, COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "rank 1 aborted");
    }
    ASSERT_TRUE(dt < 10.0);
    return 0;
}

/* ---- a rank that never calls the collective: the others time out naming it ---- */
static int timeout_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    int x = 1, y = 0;
    if (rank == 1) {
        usleep(2500000); /* longer than COLL_TIMEOUT=1 of rank 0 */
        return 0;
    }
    double        t0 = now_s();
    coll_result_t st = coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm);
    printf("rank %d: %s after %.2f s: %s\n", rank, coll_strerror(st), now_s() - t0,
           coll_comm_last_error(comm));
    ASSERT_EQ(st, COLL_ERR_TIMEOUT);
    ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "waiting on rank 1");
    return 0;
}

/* ---- garbage on the bootstrap port before the job forms ---- */
static void garbage_client(const coll_unique_id_t *id)
{
    coll_uid_t u;
    memcpy(&u, id->internal, sizeof(u));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = u.where.port};
    memcpy(&a.sin_addr, u.where.addr, 4);
    for (int k = 0; k < 4; k++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
            perror("garbage connect");
            exit(7);
        }
        if (k == 0) {
            const char junk[] = "GET / HTTP/1.0\r\n\r\n and more junk to fill a header";
            ssize_t    w      = write(fd, junk, sizeof(junk));
            (void)w;
        } else if (k == 1) { /* a well-formed header with another job's tag */
            coll_boot_hdr_t h = {COLL_BOOT_MAGIC, COLL_BOOT_VERSION, 1, 12345, 0, 0, 16, 0};
            ssize_t         w = write(fd, &h, sizeof(h));
            (void)w;
        }
        if (k == 3) { /* answers the challenge, but with another secret */
            uint8_t           ch[COLL_AUTH_CHALLENGE_LEN], resp[COLL_AUTH_RESPONSE_LEN], b[64];
            coll_auth_key_t   key;
            coll_auth_state_t as;
            struct timeval    tv = {.tv_sec = 20};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            coll_auth_derive((const uint8_t *)"not-the-secret!", "bootstrap", u.nonce, &key);
            if (recv(fd, ch, sizeof(ch), MSG_WAITALL) != (ssize_t)sizeof(ch) ||
                coll_auth_respond(&key, &as, ch, NULL, 0, resp) != COLL_OK ||
                write(fd, resp, sizeof(resp)) != (ssize_t)sizeof(resp)) {
                fprintf(stderr, "rogue client: no challenge from the bootstrap root\n");
                exit(7);
            }
            ssize_t n = recv(fd, b, sizeof(b), 0);
            if (n != 0) {
                fprintf(stderr, "rogue client: the root answered %zd bytes instead of closing\n",
                        n);
                exit(7);
            }
        }
        /* k == 2: connects and stays silent (left open) */
        if (k != 2) {
            close(fd);
        }
    }
}

static int garbage_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    int x = rank, sum = 0;
    ASSERT_OK(coll_allreduce(&x, &sum, 1, COLL_INT32, COLL_SUM, comm));
    ASSERT_EQ(sum, n * (n - 1) / 2);
    return 0;
}

static int run(const char *what, const char *tp, coll_test_opts_t o, coll_test_rank_fn_t fn,
               void *arg)
{
    o.transport = tp;
    int rc      = coll_test_run_ranks(&o, fn, arg);
    printf("%s: %s over %s, %d ranks\n", rc ? "FAIL" : "PASS", what, tp, o.nranks);
    fflush(stdout);
    return rc != 0;
}

int main(void)
{
    const char *tps[8];
    int         ntp = coll_test_transports(tps, 8), failed = 0, total = 0;
    setenv("COLL_TIMEOUT", "30", 0);
    for (int t = 0; t < ntp; t++) {
        for (int victim = 0; victim < 4; victim += 2) {
            coll_test_opts_t o = {
                .nranks = 4, .want_comm = 1, .timeout_s = 120, .victim = victim + 1};
            kill_args_t ka = {.victim = victim, .count = 16u << 20, .at = 2}; /* 64 MiB */
            /* rank 2 dies with single-copy sends and reads in flight (shm RTS/FIN); the
             * engine's schedules, not the direct path (tests/mp/test_direct_cma kills a rank
             * there) */
            setenv("COLL_SHM_CMA_MIN", victim == 2 ? "1" : "0", 1);
            setenv("COLL_DIRECT_CMA", "0", 1);
            failed += run(victim == 0 ? "kill -9 of rank 0 (root)"
                                      : "kill -9 of rank 2 (shm: single-copy messages)",
                          tps[t], o, kill_rank, &ka);
            unsetenv("COLL_SHM_CMA_MIN");
            unsetenv("COLL_DIRECT_CMA");
            total++;
        }
        /* shared windows: 256 KiB calls fit them; the victim dies between two calls, so the
         * others wait for its flags or its acknowledgement */
        static const char *const win_algos[] = {"allreduce:oneshot", "allreduce:twoshot"};
        for (int a = 0; a < 2 && strcmp(tps[t], "shm") == 0; a++) {
            coll_test_opts_t o  = {.nranks = 5, .want_comm = 1, .timeout_s = 120, .victim = 4};
            kill_args_t      ka = {.victim = 3, .count = 64u << 10, .at = 50 + 7 * a};
            char             what[64];
            setenv("COLL_ALGO", win_algos[a], 1);
            snprintf(what, sizeof(what), "kill -9 of rank 3 in %s", win_algos[a]);
            failed += run(what, tps[t], o, kill_rank, &ka);
            unsetenv("COLL_ALGO");
            total++;
        }
        coll_test_opts_t a = {.nranks = 3, .want_comm = 1, .timeout_s = 60};
        failed += run("abort from another thread", tps[t], a, abort_rank, NULL);
        total++;
        setenv("COLL_TIMEOUT", "1", 1);
        coll_test_opts_t to = {.nranks = 2, .want_comm = 1, .timeout_s = 60};
        failed += run("silent rank times out", tps[t], to, timeout_rank, NULL);
        total++;
        if (strcmp(tps[t], "shm") == 0) { /* waiting for a window flag instead of a message */
            setenv("COLL_ALGO", "allreduce:oneshot", 1);
            failed +=
                run("silent rank times out in allreduce:oneshot", tps[t], to, timeout_rank, NULL);
            unsetenv("COLL_ALGO");
            total++;
        }
        setenv("COLL_TIMEOUT", "30", 1);
        coll_test_opts_t g = {
            .nranks = 3, .want_comm = 1, .timeout_s = 60, .before_share = garbage_client};
        failed += run("garbage on the bootstrap port", tps[t], g, garbage_rank, NULL);
        total++;
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0;
}
