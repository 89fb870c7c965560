/* SPDX-License-Identifier: MIT */
/*
 * TCP transport failure test (tcp_rig.h: forked ranks, handles exchanged through files): a peer
 * killed mid-frame, a corrupt frame header, mismatched COLL_TCP_NSOCKS, connection setup
 * timeouts, a peer gone during connection setup, and interface choice (topology NIC,
 * COLL_SOCKET_IFNAME). Each case checks the error codes the surviving ranks see and the log lines
 * it must leave. Data paths: test_tcp.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "coll_test.h"
#include "param.h"
#include "tcp_rig.h"
#include "util.h"

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
    fprintf(stderr, "test_tcp_faults: peer death noticed after %.3f s\n", coll_time_s() - t0);
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
    printf("test_tcp_faults: default interface %s (%s)\n", a.ifname, why);
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

/* The job's failure notices as a communicator's bootstrap would give them: a death, from the
 * third look on. */
static int notices_calls;

static coll_result_t notices_death(void *arg, char *msg, size_t msglen)
{
    if (++notices_calls < 3) {
        return COLL_OK;
    }
    snprintf(msg, msglen, "rank %d disconnected from the bootstrap without finishing",
             *(const int *)arg);
    return COLL_ERR_REMOTE;
}

/* A peer that is gone while connections are set up (its listener was open when the handles
 * were exchanged) fails connect_all with COLL_ERR_REMOTE naming it, long before the deadline:
 * at once when the job's notices say it died, on either side of the pair; without notices,
 * once its port has refused connections for a grace period. */
static int rank_main_gone(const char *dir, int rank, int nranks)
{
    coll_peer_info_t    peers[2] = {{.rank = 0, .host_hash = 42}, {.rank = 1, .host_hash = 42}};
    int                 dead     = 1;
    coll_tp_init_args_t args     = {.rank        = 1,
                                    .nranks      = 2,
                                    .comm_id     = 7,
                                    .job_tag     = 9,
                                    .peers       = peers,
                                    .timeout_s   = 1,
                                    .notices     = notices_death,
                                    .notices_arg = &dead};
    uint8_t             handle[COLL_TP_HANDLE_MAX];
    const void         *hp[2] = {NULL, handle};
    coll_tp_ctx_t      *a, *b;
    coll_tp_ep_t       *ep;
    size_t              len;
    int                 peer;
    double              t0;

    /* rank 1 waits for rank 0, which dies before it connects */
    dead = 0;
    ASSERT_OK(ops->init(&args, &b));
    ASSERT_OK(ops->listen(b, handle, &len));
    peer = 0;
    ASSERT_EQ(ops->connect_all(b, &peer, 1, hp, coll_time_s() + 10, &ep), COLL_ERR_REMOTE);
    ASSERT_STR_CONTAINS(coll_last_error(), "rank 0 disconnected from the bootstrap");
    ops->finalize(b); /* rank 1 is gone now: its port refuses connections */

    /* rank 0 connects to rank 1, gone: the notices say so */
    dead          = 1;
    notices_calls = 0;
    args.rank     = 0;
    ASSERT_OK(ops->init(&args, &a));
    peer = 1;
    t0   = coll_time_s();
    ASSERT_EQ(ops->connect_all(a, &peer, 1, hp, t0 + 10, &ep), COLL_ERR_REMOTE);
    ASSERT_STR_CONTAINS(coll_last_error(), "rank 1 disconnected from the bootstrap");
    ASSERT_TRUE(coll_time_s() - t0 < 1.5); /* before the refusals' grace ran out */
    ops->finalize(a);

    /* no notices: the refusals alone tell, after their grace */
    args.notices = NULL;
    ASSERT_OK(ops->init(&args, &a));
    t0 = coll_time_s();
    ASSERT_EQ(ops->connect_all(a, &peer, 1, hp, t0 + 10, &ep), COLL_ERR_REMOTE);
    fprintf(stderr, "test_tcp_faults: refusing peer given up after %.2f s\n", coll_time_s() - t0);
    ASSERT_STR_CONTAINS(coll_last_error(), "rank 1 (");
    ASSERT_STR_CONTAINS(coll_last_error(), "refuses connections");
    ops->finalize(a);
    return 0;
}

/* Lines each run's log must contain (the log goes to a file in the run's directory). */
static const char *const log_if[]   = {"COLL_SOCKET_IFNAME==nosuchif0", NULL};
static const char *const log_kill[] = {"connection to rank 0", "(peer process died?)", NULL};
static const char *const log_bad[]  = {"bad frame on socket 0: bad magic", NULL};
static const char *const log_mism[] = {"COLL_TCP_NSOCKS=2", "refused connection", NULL};
static const char *const log_tmo[]  = {
     "rank 1 is still missing rank(s) 0 (2 of 2 sockets)",
     "missing rank(s) 1 (2 of 2 sockets, last error: Connection refused)", NULL};
static const char *const log_gone[] = {"has refused connections for", NULL};

/* name, function, ranks, COLL_TCP_NSOCKS, COLL_TCP_FRAG_SIZE, NSOCKS of the last rank,
 * rank 0 dies, expected log lines */
static const run_cfg_t run_cfgs[] = {
    {"interface choice", rank_main_ifaddr, 1, "2", "256k", NULL, 0, log_if},
    {"peer killed mid-transfer", rank_main_kill, 2, "2", "256k", NULL, 1, log_kill},
    {"corrupt frame header", rank_main_badframe, 2, "2", "256k", NULL, 0, log_bad},
    {"COLL_TCP_NSOCKS differs", rank_main_mismatch, 2, "2", "256k", "3", 0, log_mism},
    {"connection setup timeouts", rank_main_timeout, 1, "2", "256k", NULL, 0, log_tmo},
    {"peer gone during connection setup", rank_main_gone, 1, "2", "256k", NULL, 0, log_gone},
};

int main(void)
{
    int failed = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    for (size_t i = 0; i < sizeof(run_cfgs) / sizeof(run_cfgs[0]); i++) {
        failed |= run("test_tcp_faults", &run_cfgs[i]);
    }
    return failed ? 1 : 0;
}
