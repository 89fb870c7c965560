/* SPDX-License-Identifier: MIT */
/*
 * Verbs transport connections through librdmacm: a listener on the IP address of the chosen
 * RDMA device's network interface (its address is the listen handle), COLL_IB_NQPS connections
 * from the lower rank of every pair to the higher one, each carrying in its private data who is
 * calling, which QP it is and where its ring is; the acceptor answers with its own ring. Later
 * events (a peer's disconnect) fail the peer's operations.
 */
#include "ib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "util.h"

typedef struct {
    uint32_t magic;
    uint16_t family;
    uint16_t port; /* network order */
    uint8_t  addr[16];
} ib_handle_t;

coll_result_t coll_ib_create_qp(coll_ib_qp_t *q, struct rdma_cm_id *id);

coll_result_t coll_ib_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p)
{
    struct sockaddr *sa = rdma_get_local_addr(ctx->listen_id);
    ib_handle_t      h  = {.magic  = COLL_IB_HANDLE_MAGIC,
                           .family = (uint16_t)sa->sa_family,
                           .port   = rdma_get_src_port(ctx->listen_id)};
    if (sa->sa_family == AF_INET) {
        memcpy(h.addr, &((struct sockaddr_in *)sa)->sin_addr, 4);
    } else {
        memcpy(h.addr, &((struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
    memcpy(handle, &h, sizeof(h));
    *len_p = sizeof(h);
    return COLL_OK;
}

static coll_ib_conn_t conn_info(const coll_ib_qp_t *q)
{
    return (coll_ib_conn_t){.magic     = COLL_IB_HANDLE_MAGIC,
                            .rank      = q->ep->ctx->rank,
                            .qp_index  = (uint32_t)q->index,
                            .rkey      = q->ring_mr->rkey,
                            .job_tag   = q->ep->ctx->job_tag,
                            .ring_addr = (uint64_t)(uintptr_t)q->ring};
}

static void conn_param(struct rdma_conn_param *p, const coll_ib_conn_t *c)
{
    memset(p, 0, sizeof(*p));
    p->private_data        = c;
    p->private_data_len    = sizeof(*c);
    p->responder_resources = 1;
    p->initiator_depth     = 1;
    p->retry_count         = 7;
    p->rnr_retry_count     = 7;
}

/* A connection request from a lower rank: check it, make the QP and accept. */
static void on_request(struct coll_tp_ctx *ctx, struct rdma_cm_event *ev)
{
    coll_ib_conn_t c;
    if (ev->param.conn.private_data_len < sizeof(c)) {
        rdma_reject(ev->id, NULL, 0);
        return;
    }
    memcpy(&c, ev->param.conn.private_data, sizeof(c));
    if (c.magic != COLL_IB_HANDLE_MAGIC || c.job_tag != ctx->job_tag || c.rank < 0 ||
        c.rank >= ctx->rank || ctx->eps[c.rank] == NULL || c.qp_index >= (uint32_t)ctx->nqps ||
        ctx->eps[c.rank]->qps[c.qp_index].id != NULL) {
        coll_warn(IB, "rank %d: rejected a connection request (rank %d, QP %u): not expected",
                  ctx->rank, c.rank, c.qp_index);
        rdma_reject(ev->id, NULL, 0);
        return;
    }
    coll_ib_qp_t *q = &ctx->eps[c.rank]->qps[c.qp_index];
    q->raddr        = c.ring_addr;
    q->rkey         = c.rkey;
    if (coll_ib_create_qp(q, ev->id) != COLL_OK) {
        rdma_reject(ev->id, NULL, 0);
        q->id = NULL;
        coll_ib_ep_fail(q->ep, "cannot create the QP of an incoming connection");
        return;
    }
    coll_ib_conn_t         mine = conn_info(q);
    struct rdma_conn_param p;
    conn_param(&p, &mine);
    if (rdma_accept(ev->id, &p) != 0) {
        coll_ib_ep_fail(q->ep, "rdma_accept failed");
    }
}

static void on_event(struct coll_tp_ctx *ctx, struct rdma_cm_event *ev)
{
    coll_ib_qp_t *q = ev->id->context != ctx ? ev->id->context : NULL;
    char          why[96];
    switch (ev->event) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
        on_request(ctx, ev);
        break;
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(ev->id, 2000) != 0) {
            coll_ib_ep_fail(q->ep, "rdma_resolve_route failed");
        }
        break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        if (coll_ib_create_qp(q, ev->id) != COLL_OK) {
            coll_ib_ep_fail(q->ep, "cannot create a QP");
            break;
        }
        coll_ib_conn_t         mine = conn_info(q);
        struct rdma_conn_param p;
        conn_param(&p, &mine);
        if (rdma_connect(ev->id, &p) != 0) {
            coll_ib_ep_fail(q->ep, "rdma_connect failed");
        }
        break;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
        if (q != NULL && ev->param.conn.private_data_len >= sizeof(coll_ib_conn_t) &&
            q->raddr == 0) { /* the connector learns the acceptor's ring here */
            coll_ib_conn_t c;
            memcpy(&c, ev->param.conn.private_data, sizeof(c));
            q->raddr = c.ring_addr;
            q->rkey  = c.rkey;
        }
        if (q != NULL) {
            q->connected = 1;
            q->credits   = ctx->slots;
            q->ep->nconnected++;
        }
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
        if (q != NULL) {
            q->connected = 0;
            coll_ib_ep_fail(q->ep, "the peer disconnected (process died?)");
        }
        break;
    default: /* errors: unreachable, rejected, address or route errors */
        snprintf(why, sizeof(why), "%s (status %d)", rdma_event_str(ev->event), ev->status);
        if (q != NULL) {
            coll_ib_ep_fail(q->ep, why);
        } else {
            coll_warn(IB, "rank %d: connection manager event %s", ctx->rank, why);
        }
        break;
    }
}

void coll_ib_cm_events(struct coll_tp_ctx *ctx)
{
    struct rdma_cm_event *ev;
    while (rdma_get_cm_event(ctx->ech, &ev) == 0) {
        struct rdma_cm_event copy = *ev;
        /* the request's private data lives in the event: handle it before the ack */
        on_event(ctx, &copy);
        rdma_ack_cm_event(ev);
    }
}

coll_result_t coll_ib_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                  const void *const *handles, double deadline, coll_tp_ep_t **eps_p)
{
    for (int i = 0; i < npeers; i++) {
        int p = peers[i];
        if (p < 0 || p >= ctx->nranks || p == ctx->rank || handles == NULL || handles[p] == NULL) {
            coll_error(IB, "connect_all: peer %d is invalid or has no handle", p);
            return COLL_ERR_INVALID_ARG;
        }
        coll_ib_ep_t *ep = coll_calloc(1, sizeof(*ep), "ib endpoint");
        if (ep == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
        ep->base.ops  = &coll_tp_ib_ops;
        ep->base.peer = p;
        ep->ctx       = ctx;
        coll_tp_match_init(&ep->match, p, "ib");
        for (int k = 0; k < ctx->nqps; k++) {
            ep->qps[k].ep    = ep;
            ep->qps[k].index = k;
        }
        ctx->eps[p] = ep;
        eps_p[i]    = &ep->base;
    }
    for (int i = 0; i < npeers; i++) {
        int p = peers[i];
        if (p < ctx->rank) {
            continue; /* the lower rank connects */
        }
        ib_handle_t h;
        memcpy(&h, handles[p], sizeof(h));
        struct sockaddr_storage ss = {0};
        if (h.magic != COLL_IB_HANDLE_MAGIC || (h.family != AF_INET && h.family != AF_INET6)) {
            coll_error(IB, "the listen handle of rank %d is not an ib handle", p);
            return COLL_ERR_INVALID_ARG;
        }
        if (h.family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            s4->sin_family         = AF_INET;
            s4->sin_port           = h.port;
            memcpy(&s4->sin_addr, h.addr, 4);
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            s6->sin6_family         = AF_INET6;
            s6->sin6_port           = h.port;
            memcpy(&s6->sin6_addr, h.addr, 16);
        }
        for (int k = 0; k < ctx->nqps; k++) {
            coll_ib_qp_t *q = &ctx->eps[p]->qps[k];
            if (rdma_create_id(ctx->ech, &q->id, q, RDMA_PS_TCP) != 0 ||
                rdma_resolve_addr(q->id, NULL, (struct sockaddr *)&ss, 2000) != 0) {
                coll_error(IB, "rank %d: cannot start connecting to rank %d: %s", ctx->rank, p,
                           strerror(errno));
                return COLL_ERR_TRANSPORT;
            }
        }
    }
    /* run the connection manager until every QP of every peer is established */
    for (;;) {
        int left = 0;
        for (int i = 0; i < npeers; i++) {
            coll_ib_ep_t *ep = ctx->eps[peers[i]];
            if (ep->failed != COLL_OK) {
                return COLL_ERR_TRANSPORT;
            }
            left += ctx->nqps - ep->nconnected;
        }
        if (left == 0) {
            return COLL_OK;
        }
        double now = coll_time_s();
        if (now > deadline) {
            coll_error(IB, "rank %d: %d connection(s) not established before the deadline",
                       ctx->rank, left);
            return COLL_ERR_TIMEOUT;
        }
        struct pollfd pfd = {.fd = ctx->ech->fd, .events = POLLIN};
        poll(&pfd, 1, 50);
        coll_ib_cm_events(ctx);
    }
}
