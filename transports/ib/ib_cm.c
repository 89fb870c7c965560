/* SPDX-License-Identifier: MIT */
/*
 * Verbs transport connections through librdmacm: a listener on the IP address of the chosen
 * RDMA device's network interface (its address is the listen handle), COLL_IB_NQPS connections
 * from the lower rank of every pair to the higher one, each carrying in its private data who is
 * calling, which QP it is and where its ring is; the acceptor answers with its own ring. Later
 * events (a peer's disconnect) fail the peer's operations. Without librdmacm only stubs are
 * built (COLL_IB_CM then always means the bootstrap path, ib_boot.c).
 */
#include "config.h"

#include "ib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <fcntl.h>

#include "error.h"
#include "log.h"
#include "util.h"

#ifdef HAVE_RDMACM

/* The event channel and a listening id on the device's IP address. A failure is an error only
 * when rdma_cm was asked for (required); COLL_IB_CM=auto then goes on without it. */
coll_result_t coll_ib_cm_open(struct coll_tp_ctx *ctx, int required)
{
    ctx->ech = rdma_create_event_channel();
    if (ctx->ech == NULL || rdma_create_id(ctx->ech, &ctx->listen_id, ctx, RDMA_PS_TCP) != 0 ||
        rdma_bind_addr(ctx->listen_id, (struct sockaddr *)&ctx->ipaddr) != 0 ||
        rdma_listen(ctx->listen_id, 128) != 0 || ctx->listen_id->verbs == NULL) {
        coll_log(required ? COLL_LOG_ERROR : COLL_LOG_INFO, IB,
                 "rank %d: cannot listen for RDMA connections on %s: %s", ctx->rank, ctx->devname,
                 strerror(errno));
        coll_ib_cm_close(ctx);
        return COLL_ERR_TRANSPORT;
    }
    fcntl(ctx->ech->fd, F_SETFL, fcntl(ctx->ech->fd, F_GETFL) | O_NONBLOCK);
    ctx->verbs = ctx->listen_id->verbs;
    ctx->cm    = COLL_IB_CM_RDMACM;
    return COLL_OK;
}

void coll_ib_cm_close(struct coll_tp_ctx *ctx)
{
    if (ctx->listen_id != NULL) {
        rdma_destroy_id(ctx->listen_id);
        ctx->listen_id = NULL;
    }
    if (ctx->ech != NULL) {
        rdma_destroy_event_channel(ctx->ech);
        ctx->ech = NULL;
    }
}

static coll_result_t cm_create_qp(coll_ib_qp_t *q, struct rdma_cm_id *id)
{
    struct coll_tp_ctx     *ctx = q->ep->ctx;
    struct ibv_qp_init_attr a   = coll_ib_qp_attr(ctx);
    if (id->verbs != ctx->verbs) {
        coll_error(IB, "rank %d: a connection to rank %d arrived on another RDMA device", ctx->rank,
                   q->ep->base.peer);
        return COLL_ERR_TRANSPORT;
    }
    if (rdma_create_qp(id, ctx->pd, &a) != 0) {
        a.cap.max_inline_data = 0; /* this device has no inline sends */
        if (rdma_create_qp(id, ctx->pd, &a) != 0) {
            coll_error(IB, "rank %d: cannot create a QP for rank %d: %s", ctx->rank,
                       q->ep->base.peer, strerror(errno));
            return COLL_ERR_TRANSPORT;
        }
    }
    q->id       = id;
    id->context = q;
    q->qp       = id->qp;
    if ((int)a.cap.max_inline_data < ctx->max_inline) {
        ctx->max_inline = (int)a.cap.max_inline_data;
    }
    return coll_ib_qp_setup(q);
}

void coll_ib_cm_qp_destroy(coll_ib_qp_t *q)
{
    if (q->connected) {
        rdma_disconnect(q->id);
    }
    if (q->qp != NULL) {
        rdma_destroy_qp(q->id);
    }
    rdma_destroy_id(q->id);
}

coll_result_t coll_ib_cm_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p)
{
    struct sockaddr *sa = rdma_get_local_addr(ctx->listen_id);
    coll_ib_handle_t h  = {.magic  = COLL_IB_HANDLE_MAGIC,
                           .family = (uint16_t)sa->sa_family,
                           .port   = rdma_get_src_port(ctx->listen_id),
                           .cm     = COLL_IB_CM_RDMACM};
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

static void conn_param(struct rdma_conn_param *p, const coll_ib_conn_t *c, int rd_depth)
{
    memset(p, 0, sizeof(*p));
    p->private_data        = c;
    p->private_data_len    = sizeof(*c);
    p->responder_resources = (uint8_t)rd_depth; /* RDMA READs of the rendezvous (ib_rndv.c) */
    p->initiator_depth     = (uint8_t)rd_depth;
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
    if (cm_create_qp(q, ev->id) != COLL_OK) {
        rdma_reject(ev->id, NULL, 0);
        q->id = NULL;
        coll_ib_ep_fail(q->ep, "cannot create the QP of an incoming connection");
        return;
    }
    coll_ib_conn_t         mine = conn_info(q);
    struct rdma_conn_param p;
    conn_param(&p, &mine, ctx->rd_depth);
    /* no more READs either way than the requester can take or issue */
    if (p.responder_resources > ev->param.conn.initiator_depth) {
        p.responder_resources = ev->param.conn.initiator_depth;
    }
    if (p.initiator_depth > ev->param.conn.responder_resources) {
        p.initiator_depth = ev->param.conn.responder_resources;
    }
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
        if (cm_create_qp(q, ev->id) != COLL_OK) {
            coll_ib_ep_fail(q->ep, "cannot create a QP");
            break;
        }
        coll_ib_conn_t         mine = conn_info(q);
        struct rdma_conn_param p;
        conn_param(&p, &mine, ctx->rd_depth);
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

coll_result_t coll_ib_cm_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                     const void *const *handles, double deadline)
{
    for (int i = 0; i < npeers; i++) {
        int p = peers[i];
        if (p < ctx->rank) {
            continue; /* the lower rank connects */
        }
        coll_ib_handle_t        h;
        struct sockaddr_storage ss;
        COLL_CHECK(coll_ib_handle_get(ctx, handles[p], p, &h, &ss));
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

#else /* no librdmacm: ib.c never picks these */

coll_result_t coll_ib_cm_open(struct coll_tp_ctx *ctx, int required)
{
    return COLL_ERR_UNSUPPORTED;
}

void coll_ib_cm_close(struct coll_tp_ctx *ctx)
{
}

coll_result_t coll_ib_cm_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p)
{
    return COLL_ERR_UNSUPPORTED;
}

coll_result_t coll_ib_cm_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                     const void *const *handles, double deadline)
{
    return COLL_ERR_UNSUPPORTED;
}

void coll_ib_cm_events(struct coll_tp_ctx *ctx)
{
}

void coll_ib_cm_qp_destroy(coll_ib_qp_t *q)
{
}

#endif
