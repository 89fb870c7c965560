/* SPDX-License-Identifier: MIT */
/*
 * Verbs transport connections without librdmacm (COLL_IB_CM=bootstrap). The listen handle names
 * a TCP socket; the lower rank of every pair connects to the higher one's, the two authenticate
 * with the job's key (auth.h) and swap a hello: GID, LID, MTU and, per QP, its number, first PSN
 * and ring (address, rkey). Each side then moves its QPs RESET -> INIT -> RTR -> RTS itself, with
 * a global route (the chosen GID) on RoCE. Per-pair QP numbers do not fit in a 256-byte handle,
 * hence the socket. It stays open: its end is how a dead peer shows (plain RC QPs have no
 * disconnect event), polled from progress and block.
 *
 * Order: every rank first connects to each higher rank, one at a time, then serves its lower
 * ranks. The highest rank only serves, so every wait ends (chained over the ranks).
 */
#include "config.h"

#include "ib.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/sock.h"
#include "error.h"
#include "log.h"
#include "util.h"

#define IB_HELLO_MAGIC 0x4f42494cu /* "LIBO" */
#define IB_PEER_WAIT_S 10.0        /* one exchange with a peer that is already talking */

typedef struct {
    uint32_t qpn, psn, rkey, pad;
    uint64_t addr; /* of the ring */
} ib_hello_qp_t;

/* What one rank tells one peer; host byte order (one job, one architecture). */
typedef struct {
    uint32_t      magic;
    int32_t       rank; /* sender */
    int32_t       peer; /* intended receiver */
    uint32_t      nqps, slots;
    uint32_t      slot_size;
    uint64_t      job_tag;
    uint8_t       gid[16];
    uint16_t      lid;
    uint8_t       mtu;
    uint8_t       pad[5];
    ib_hello_qp_t qp[COLL_IB_MAX_QPS];
} ib_hello_t;

coll_result_t coll_ib_boot_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p)
{
    coll_sockaddr_t a = {.len = sizeof(a.ss)};
    const char     *why;
    if (ctx->ipaddr.ss_family != 0) { /* the device's own interface, where there is one */
        a.ss = ctx->ipaddr;
        a.len =
            a.ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        coll_sock_set_port(&a, 0);
    } else if (coll_sock_pick_addr(0, &a, NULL, &why) != COLL_OK) {
        coll_error(IB, "rank %d: no IP address for the QP exchange: %s", ctx->rank, why);
        return COLL_ERR_UNSUPPORTED;
    }
    COLL_CHECK(coll_sock_listen(&a, 128, &ctx->boot_fd));
    coll_ib_handle_t h = {.magic  = COLL_IB_HANDLE_MAGIC,
                          .family = (uint16_t)a.ss.ss_family,
                          .cm     = COLL_IB_CM_BOOTSTRAP};
    if (a.ss.ss_family == AF_INET) {
        h.port = ((struct sockaddr_in *)&a.ss)->sin_port;
        memcpy(h.addr, &((struct sockaddr_in *)&a.ss)->sin_addr, 4);
    } else {
        h.port = ((struct sockaddr_in6 *)&a.ss)->sin6_port;
        memcpy(h.addr, &((struct sockaddr_in6 *)&a.ss)->sin6_addr, 16);
    }
    memcpy(handle, &h, sizeof(h));
    *len_p = sizeof(h);
    return COLL_OK;
}

/* A QP in INIT, with its rings registered and receives posted. */
static coll_result_t boot_qp_create(coll_ib_qp_t *q)
{
    struct coll_tp_ctx     *ctx = q->ep->ctx;
    struct ibv_qp_init_attr a   = coll_ib_qp_attr(ctx);
    q->qp                       = ibv_create_qp(ctx->pd, &a);
    if (q->qp == NULL) {
        a.cap.max_inline_data = 0; /* this device has no inline sends */
        q->qp                 = ibv_create_qp(ctx->pd, &a);
    }
    if (q->qp == NULL) {
        coll_error(IB, "rank %d: cannot create a QP for rank %d: %s", ctx->rank, q->ep->base.peer,
                   strerror(errno));
        return COLL_ERR_TRANSPORT;
    }
    if ((int)a.cap.max_inline_data < ctx->max_inline) {
        ctx->max_inline = (int)a.cap.max_inline_data;
    }
    struct ibv_qp_attr init = {.qp_state        = IBV_QPS_INIT,
                               .port_num        = (uint8_t)ctx->port,
                               .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                  IBV_ACCESS_REMOTE_READ};
    int                err  = ibv_modify_qp(q->qp, &init,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err != 0) {
        coll_error(IB, "rank %d: QP %u for rank %d: RESET -> INIT failed: %s", ctx->rank,
                   q->qp->qp_num, q->ep->base.peer, strerror(err));
        return COLL_ERR_TRANSPORT;
    }
    q->psn = (q->qp->qp_num * 2654435761u ^ (uint32_t)getpid()) & 0xffffffu;
    return coll_ib_qp_setup(q);
}

static ib_hello_t boot_hello(const coll_ib_ep_t *ep)
{
    const struct coll_tp_ctx *ctx = ep->ctx;
    ib_hello_t                h   = {.magic     = IB_HELLO_MAGIC,
                                     .rank      = ctx->rank,
                                     .peer      = ep->base.peer,
                                     .nqps      = (uint32_t)ctx->nqps,
                                     .slots     = (uint32_t)ctx->slots,
                                     .slot_size = (uint32_t)ctx->slot_size,
                                     .job_tag   = ctx->job_tag,
                                     .lid       = ctx->lid,
                                     .mtu       = ctx->mtu};
    memcpy(h.gid, ctx->gid.raw, sizeof(h.gid));
    for (int k = 0; k < ctx->nqps; k++) {
        const coll_ib_qp_t *q = &ep->qps[k];
        h.qp[k]               = (ib_hello_qp_t){.qpn  = q->qp->qp_num,
                                                .psn  = q->psn,
                                                .rkey = q->ring_mr->rkey,
                                                .addr = (uint64_t)(uintptr_t)q->ring};
    }
    return h;
}

/* Is h what rank `from` should have sent us? Logs why not. */
static int boot_hello_ok(const struct coll_tp_ctx *ctx, const ib_hello_t *h, int from)
{
    const char *bad = h->magic != IB_HELLO_MAGIC || h->job_tag != ctx->job_tag ? "not this job's"
                      : h->rank != from || h->peer != ctx->rank                ? "misaddressed"
                      : h->nqps != (uint32_t)ctx->nqps           ? "COLL_IB_NQPS differs"
                      : h->slots != (uint32_t)ctx->slots         ? "COLL_IB_SLOTS differs"
                      : h->slot_size != (uint32_t)ctx->slot_size ? "COLL_IB_SLOT_SIZE differs"
                                                                 : NULL;
    if (bad != NULL) {
        coll_error(IB, "rank %d: QP exchange with rank %d (says rank %d, %u QPs): %s", ctx->rank,
                   from, h->rank, h->nqps, bad);
    }
    return bad == NULL;
}

/* RTR then RTS towards the peer's QP r. */
static coll_result_t boot_qp_connect(coll_ib_qp_t *q, const ib_hello_t *h, const ib_hello_qp_t *r)
{
    struct coll_tp_ctx *ctx = q->ep->ctx;
    struct ibv_qp_attr  a   = {
           .qp_state           = IBV_QPS_RTR,
           .path_mtu           = (enum ibv_mtu)(h->mtu < ctx->mtu ? h->mtu : ctx->mtu),
           .dest_qp_num        = r->qpn,
           .rq_psn             = r->psn,
           .max_dest_rd_atomic = (uint8_t)ctx->rd_depth,
           .min_rnr_timer      = 12,
           .ah_attr            = {.dlid      = h->lid,
                                  .port_num  = (uint8_t)ctx->port,
                                  .is_global = ctx->is_global,
                                  .grh       = {.sgid_index = (uint8_t)ctx->gid_index, .hop_limit = 64}}};
    memcpy(a.ah_attr.grh.dgid.raw, h->gid, sizeof(h->gid));
    int         err  = ibv_modify_qp(q->qp, &a,
                                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    const char *step = "INIT -> RTR";
    if (err == 0) {
        a    = (struct ibv_qp_attr){.qp_state      = IBV_QPS_RTS,
                                    .timeout       = 14,
                                    .retry_cnt     = 7,
                                    .rnr_retry     = 7,
                                    .sq_psn        = q->psn,
                                    .max_rd_atomic = (uint8_t)ctx->rd_depth};
        err  = ibv_modify_qp(q->qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        step = "RTR -> RTS";
    }
    if (err != 0) {
        coll_error(IB, "rank %d: QP %u to rank %d's QP %u (GID index %d): %s failed: %s", ctx->rank,
                   q->qp->qp_num, q->ep->base.peer, r->qpn, ctx->gid_index, step, strerror(err));
        return COLL_ERR_TRANSPORT;
    }
    coll_ib_qp_ready(q, r->addr, r->rkey);
    return COLL_OK;
}

static coll_result_t boot_ep_connect(coll_ib_ep_t *ep, const ib_hello_t *h)
{
    for (int k = 0; k < ep->ctx->nqps; k++) {
        COLL_CHECK(boot_qp_connect(&ep->qps[k], h, &h->qp[k]));
    }
    return COLL_OK;
}

/* Connector side with higher rank p, whose socket address is ss. */
static coll_result_t boot_connect(struct coll_tp_ctx *ctx, int p, const struct sockaddr_storage *ss,
                                  double deadline)
{
    coll_ib_ep_t     *ep   = ctx->eps[p];
    coll_sockaddr_t   a    = {.ss = *ss};
    ib_hello_t        mine = boot_hello(ep), theirs;
    coll_auth_state_t st;
    uint8_t           chal[COLL_AUTH_CHALLENGE_LEN], resp[COLL_AUTH_RESPONSE_LEN];
    uint8_t           proof[COLL_AUTH_PROOF_LEN];
    coll_result_t     res;
    a.len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    COLL_CHECK(coll_sock_connect(&a, deadline, &ep->sock));
    COLL_CHECK_GOTO(coll_sock_recv_all(ep->sock, chal, sizeof(chal), deadline), res, err);
    COLL_CHECK_GOTO(coll_auth_respond(&ctx->auth_key, &st, chal, &mine, sizeof(mine), resp), res,
                    err);
    COLL_CHECK_GOTO(coll_sock_send_all(ep->sock, resp, sizeof(resp), deadline), res, err);
    COLL_CHECK_GOTO(coll_sock_send_all(ep->sock, &mine, sizeof(mine), deadline), res, err);
    COLL_CHECK_GOTO(coll_sock_recv_all(ep->sock, proof, sizeof(proof), deadline), res, err);
    COLL_CHECK_GOTO(coll_sock_recv_all(ep->sock, &theirs, sizeof(theirs), deadline), res, err);
    if (coll_auth_check_proof(&ctx->auth_key, &st, proof, &mine, sizeof(mine)) != COLL_OK) {
        coll_error(IB, "rank %d: rank %d's QP exchange socket did not prove the job's key",
                   ctx->rank, p);
        return COLL_ERR_TRANSPORT;
    }
    if (!boot_hello_ok(ctx, &theirs, p)) {
        return COLL_ERR_TRANSPORT;
    }
    return boot_ep_connect(ep, &theirs);
err:
    coll_error(IB, "rank %d: QP exchange with rank %d failed: %s", ctx->rank, p,
               coll_strerror(res));
    return res;
}

/* Acceptor side: authenticate one connection; COLL_ERR_INVALID_ARG for a stranger (dropped). */
static coll_result_t boot_serve(struct coll_tp_ctx *ctx, int fd, double deadline)
{
    coll_auth_state_t st;
    ib_hello_t        theirs;
    uint8_t           chal[COLL_AUTH_CHALLENGE_LEN], resp[COLL_AUTH_RESPONSE_LEN];
    uint8_t           proof[COLL_AUTH_PROOF_LEN];
    if (coll_auth_challenge(&st, chal) != COLL_OK ||
        coll_sock_send_all(fd, chal, sizeof(chal), deadline) != COLL_OK ||
        coll_sock_recv_all(fd, resp, sizeof(resp), deadline) != COLL_OK ||
        coll_sock_recv_all(fd, &theirs, sizeof(theirs), deadline) != COLL_OK ||
        coll_auth_check_response(&ctx->auth_key, &st, resp, &theirs, sizeof(theirs), proof) !=
            COLL_OK) {
        coll_warn(IB, "rank %d: dropped a QP exchange connection that did not authenticate",
                  ctx->rank);
        return COLL_ERR_INVALID_ARG;
    }
    int from = theirs.rank;
    if (from < 0 || from >= ctx->rank || ctx->eps[from] == NULL || ctx->eps[from]->sock >= 0) {
        coll_warn(IB, "rank %d: dropped a QP exchange from rank %d: not expected", ctx->rank, from);
        return COLL_ERR_INVALID_ARG;
    }
    coll_ib_ep_t *ep = ctx->eps[from];
    if (!boot_hello_ok(ctx, &theirs, from)) {
        return COLL_ERR_TRANSPORT;
    }
    COLL_CHECK(boot_ep_connect(ep, &theirs));
    ib_hello_t mine = boot_hello(ep);
    if (coll_sock_send_all(fd, proof, sizeof(proof), deadline) != COLL_OK ||
        coll_sock_send_all(fd, &mine, sizeof(mine), deadline) != COLL_OK) {
        coll_error(IB, "rank %d: cannot answer rank %d's QP exchange", ctx->rank, from);
        return COLL_ERR_TRANSPORT;
    }
    ep->sock = fd; /* the endpoint owns it from here */
    return COLL_OK;
}

/* Accept and serve n lower ranks. */
static coll_result_t boot_accept(struct coll_tp_ctx *ctx, int n, double deadline)
{
    while (n > 0) {
        struct pollfd pfd = {.fd = ctx->boot_fd, .events = POLLIN};
        double        now = coll_time_s();
        if (now > deadline) {
            coll_error(IB, "rank %d: %d lower rank(s) did not connect before the deadline",
                       ctx->rank, n);
            return COLL_ERR_TIMEOUT;
        }
        poll(&pfd, 1, 100);
        int fd = accept4(ctx->boot_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue; /* nothing yet (EAGAIN), or a connection that went away */
        }
        coll_sock_nonblock(fd);
        double        until = now + IB_PEER_WAIT_S < deadline ? now + IB_PEER_WAIT_S : deadline;
        coll_result_t st    = boot_serve(ctx, fd, until);
        if (st != COLL_OK) {
            close(fd);
            if (st != COLL_ERR_INVALID_ARG) {
                return st;
            }
            continue;
        }
        n--;
    }
    return COLL_OK;
}

coll_result_t coll_ib_boot_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                       const void *const *handles, double deadline)
{
    int lower = 0;
    for (int i = 0; i < npeers; i++) {
        for (int k = 0; k < ctx->nqps; k++) {
            COLL_CHECK(boot_qp_create(&ctx->eps[peers[i]]->qps[k]));
        }
        lower += peers[i] < ctx->rank;
    }
    for (int i = 0; i < npeers; i++) {
        int                     p = peers[i];
        coll_ib_handle_t        h;
        struct sockaddr_storage ss;
        if (p > ctx->rank) { /* handles[p] was checked by coll_ib_eps_create */
            COLL_CHECK(coll_ib_handle_get(ctx, handles[p], p, &h, &ss));
            COLL_CHECK(boot_connect(ctx, p, &ss, deadline));
        }
    }
    return boot_accept(ctx, lower, deadline);
}

/* Fail the endpoints whose peer closed its socket (it exited or was killed). */
void coll_ib_boot_liveness(struct coll_tp_ctx *ctx)
{
    for (int r = 0; r < ctx->nranks; r++) {
        coll_ib_ep_t *ep = ctx->eps[r];
        char          c;
        if (ep == NULL || ep->sock < 0) {
            continue;
        }
        ssize_t n = recv(ep->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            close(ep->sock);
            ep->sock = -1;
            coll_ib_ep_fail(ep, "the peer closed its QP exchange socket (process died?)");
        }
    }
}
