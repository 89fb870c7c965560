/* SPDX-License-Identifier: MIT */
/*
 * Deadlines of the bootstrap's connection to the root (bootstrap/sock.c): a root address that
 * drops SYNs (a listener whose accept queue is full, as behind a firewall or on a hung host)
 * must not hold a rank past its deadline, neither in coll_sock_connect nor in communicator
 * creation under COLL_BOOTSTRAP_TIMEOUT; a refused address is retried until the deadline, and
 * a root that starts listening late is still reached; a root out of descriptors does not spin.
 * Loopback only; alarm() turns a hang into a failure.
 */
#include "coll_test.h"
#include "auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "param.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define FILLERS 8

/* A loopback socket bound to a free port, not listening yet; *addr_p gets its address. */
static int bound_socket(coll_sockaddr_t *addr_p)
{
    struct sockaddr_in a  = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->len = sizeof(addr_p->ss);
    ASSERT_EQ(getsockname(fd, (struct sockaddr *)&addr_p->ss, &addr_p->len), 0);
    return fd;
}

/* A listener that never accepts, with its accept queue filled by connections of our own, so
 * that the kernel drops further SYNs. Returns the listener; fillers[] get the connections. */
static int blackhole(coll_sockaddr_t *addr_p, int fillers[FILLERS])
{
    int lfd = bound_socket(addr_p), full = 0;
    ASSERT_EQ(listen(lfd, 0), 0);
    for (int i = 0; i < FILLERS; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(fillers[i] >= 0);
        if (full) {
            continue;
        }
        int rc = connect(fillers[i], (struct sockaddr *)&addr_p->ss, addr_p->len);
        ASSERT_TRUE(rc == 0 || errno == EINPROGRESS);
        struct pollfd p = {.fd = fillers[i], .events = POLLOUT};
        full            = rc != 0 && poll(&p, 1, 200) == 0; /* this SYN went unanswered */
    }
    ASSERT_TRUE(full);
    return lfd;
}

static void *listen_later(void *arg)
{
    usleep(300000);
    ASSERT_EQ(listen(*(int *)arg, 4), 0);
    return NULL;
}

/* Rank 1 of a 2-rank job, by hand: joins, hears WELCOME, then says the BYE that a rank sends
 * when it gives up joining at its deadline (one that crossed the WELCOME). */
static void bye_after_welcome(const coll_unique_id_t *id)
{
    coll_sockaddr_t   addr;
    uint8_t           secret[16];
    uint64_t          nonce;
    coll_auth_key_t   key;
    coll_boot_hdr_t   h;
    int               fd    = -1;
    static const char why[] = "gave up joining before it heard that every rank had";

    ASSERT_OK(coll_boot_uid_parse(id, &addr, secret, &nonce));
    uint64_t tag = coll_boot_job_tag(secret);
    ASSERT_OK(coll_sock_connect(&addr, coll_time_s() + 10, &fd));
    coll_auth_derive(secret, "bootstrap", nonce, &key);
    ASSERT_OK(coll_boot_auth_connect(fd, &key, coll_time_s() + 10));
    coll_boot_hello_t hello = {.nranks = 2, .rank = 1, .comm_nonce = nonce};
    coll_boot_hdr_fill(&h, COLL_BOOT_HELLO, tag, 1, 0, sizeof(hello));
    ASSERT_OK(coll_sock_send_all(fd, &h, sizeof(h), coll_time_s() + 10));
    ASSERT_OK(coll_sock_send_all(fd, &hello, sizeof(hello), coll_time_s() + 10));
    do {
        ASSERT_OK(coll_sock_recv_all(fd, &h, sizeof(h), coll_time_s() + 10));
        ASSERT_EQ(h.len, 0u);
    } while (h.type != COLL_BOOT_WELCOME);
    coll_boot_hdr_fill(&h, COLL_BOOT_BYE, tag, 1, 0, sizeof(why));
    ASSERT_OK(coll_sock_send_all(fd, &h, sizeof(h), coll_time_s() + 10));
    ASSERT_OK(coll_sock_send_all(fd, why, sizeof(why), coll_time_s() + 10));
    usleep(100000);
    close(fd);
}

typedef struct {
    coll_unique_id_t id;
    coll_result_t    st;
    double           secs;
    char             msg[512];
} rank0_t;

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The process's descriptors run out with a connection waiting: the root's accept fails with
 * EMFILE. It spun at full CPU until the join deadline (the listener stays readable); now it
 * says why once, stops polling the listener for a moment, and a rank in this process names the
 * cause. */
static void root_out_of_descriptors(void)
{
    coll_unique_id_t id;
    coll_sockaddr_t  addr;
    uint8_t          secret[16];
    uint64_t         nonce;
    struct rlimit    old, low;
    static int       fillers[4096];
    int              nfill = 0, fd = -1;

    setenv("COLL_BOOTSTRAP_TIMEOUT", "20", 1);
    coll_params_reset_for_testing();
    ASSERT_OK(coll_get_unique_id(&id));
    ASSERT_OK(coll_boot_uid_parse(&id, &addr, secret, &nonce));
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    low          = old;
    low.rlim_cur = 256;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    while (nfill < 4096 && (fillers[nfill] = dup(2)) >= 0) {
        nfill++;
    }
    ASSERT_TRUE(nfill > 0);
    close(fillers[--nfill]); /* one left: the connection's own */
    ASSERT_OK(coll_sock_connect(&addr, coll_time_s() + 5, &fd));
    usleep(200000); /* the root tries to accept and fails */
    double cpu0 = cpu_seconds(), t0 = coll_time_s();
    usleep(1000000);
    double cpu = cpu_seconds() - cpu0, wall = coll_time_s() - t0;
    int    e = coll_boot_root_accept_errno(nonce);
    printf("out of descriptors: %.2f s of CPU in %.2f s, the root's accept: %s\n", cpu, wall,
           e != 0 ? strerror(e) : "no error");
    close(fd);
    while (nfill > 0) {
        close(fillers[--nfill]);
    }
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    coll_boot_root_join(nonce);
    ASSERT_TRUE(cpu < 0.3 * wall);
    ASSERT_EQ(e, EMFILE);
    ASSERT_STR_CONTAINS(strerror(e), "open files");
}

static void *rank0_init(void *arg)
{
    rank0_t     *r    = arg;
    coll_comm_t *comm = NULL;
    double       t0   = coll_time_s();
    r->st             = coll_comm_init_rank(&comm, 2, r->id, 0);
    r->secs           = coll_time_s() - t0;
    snprintf(r->msg, sizeof(r->msg), "%s", coll_last_error());
    return NULL;
}

int main(void)
{
    coll_sockaddr_t addr;
    int             fillers[FILLERS], fd = -1;
    double          t0;

    alarm(60); /* a connect() blocked in the kernel's SYN retries takes two minutes */

    /* SYNs dropped: the attempt ends at the deadline */
    int lfd = blackhole(&addr, fillers);
    t0      = coll_time_s();
    ASSERT_EQ(coll_sock_connect(&addr, t0 + 0.5, &fd), COLL_ERR_TIMEOUT);
    printf("dropped SYNs: coll_sock_connect gave up after %.2f s (deadline 0.5 s)\n",
           coll_time_s() - t0);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0);
    t0 = coll_time_s();
    ASSERT_EQ(coll_sock_connect_once(&addr, t0 + 0.3, &fd, NULL), COLL_ERR_TIMEOUT);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0);

    /* ... and communicator creation honours COLL_BOOTSTRAP_TIMEOUT */
    coll_unique_id_t id;
    coll_comm_t     *comm       = NULL;
    uint8_t          secret[16] = {1, 2, 3};
    coll_boot_uid_make(&addr, secret, 42, &id);
    setenv("COLL_BOOTSTRAP_TIMEOUT", "1", 1);
    coll_params_reset_for_testing();
    t0               = coll_time_s();
    coll_result_t st = coll_comm_init_rank(&comm, 2, id, 1);
    printf("dropped SYNs: coll_comm_init_rank returned %s after %.2f s "
           "(COLL_BOOTSTRAP_TIMEOUT=1): %s\n",
           coll_strerror(st), coll_time_s() - t0, coll_last_error());
    ASSERT_EQ(st, COLL_ERR_TIMEOUT);
    ASSERT_TRUE(coll_time_s() - t0 < 5.0);
    ASSERT_STR_CONTAINS(coll_last_error(), "cannot reach the bootstrap root");
    for (int i = 0; i < FILLERS; i++) {
        close(fillers[i]);
    }
    close(lfd);

    /* refused: retried until the deadline */
    lfd = bound_socket(&addr);
    t0  = coll_time_s();
    ASSERT_EQ(coll_sock_connect(&addr, t0 + 0.3, &fd), COLL_ERR_TIMEOUT);
    ASSERT_TRUE(coll_time_s() - t0 >= 0.2);
    int err = 0;
    ASSERT_EQ(coll_sock_connect_once(&addr, coll_time_s() + 1, &fd, &err), COLL_ERR_REMOTE);
    ASSERT_EQ(err, ECONNREFUSED);

    /* a root that listens late is reached (ranks may start before it) */
    pthread_t th;
    pthread_create(&th, NULL, listen_later, &lfd);
    ASSERT_OK(coll_sock_connect(&addr, coll_time_s() + 10, &fd));
    pthread_join(th, NULL);
    close(fd);
    close(lfd);

    /* A rank's BYE that crossed the root's WELCOME (it gave up at its deadline as the last rank
     * joined): the root took it for a rank that had finished, and rank 0 waited in the first
     * round until COLL_BOOTSTRAP_TIMEOUT. It now reports it as gone, naming it. */
    rank0_t r0;
    setenv("COLL_BOOTSTRAP_TIMEOUT", "20", 1);
    coll_params_reset_for_testing();
    ASSERT_OK(coll_get_unique_id(&r0.id));
    pthread_create(&th, NULL, rank0_init, &r0);
    bye_after_welcome(&r0.id);
    pthread_join(th, NULL);
    printf("BYE across the WELCOME: rank 0's creation returned %s after %.2f s: %s\n",
           coll_strerror(r0.st), r0.secs, r0.msg);
    ASSERT_EQ(r0.st, COLL_ERR_REMOTE);
    ASSERT_STR_CONTAINS(r0.msg, "rank 1");
    ASSERT_STR_CONTAINS(r0.msg, "gave up joining");
    ASSERT_TRUE(r0.secs < 10.0);

    root_out_of_descriptors();
    printf("PASS: bootstrap connection deadlines\n");
    return 0;
}
