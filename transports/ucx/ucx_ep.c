/* SPDX-License-Identifier: MIT */
/* UCX transport: endpoints, sends, the active-message handler, receives, failures. */
#include "ucx.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "util.h"

static void ucx_ep_failed(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    coll_ucx_ep_t *ep = arg;
    if (ep->failed == COLL_OK) {
        ep->failed = COLL_ERR_REMOTE;
        coll_error(UCX, "rank %d: connection to rank %d lost: %s (peer process died?)",
                   ep->ctx->rank, ep->base.peer, ucs_status_string(status));
        coll_tp_match_fini(&ep->match, COLL_ERR_REMOTE); /* fails every posted receive */
        coll_tp_match_init(&ep->match, ep->base.peer, "ucx");
    }
}

/* A message from the peer did not fit its receive (matching logged why): the endpoint fails
 * with that status (COLL_ERR_MISMATCH), not as a lost connection. */
static void ucx_ep_fail_match(coll_ucx_ep_t *ep, coll_result_t st)
{
    if (ep->failed == COLL_OK) {
        ep->failed = st;
        coll_tp_match_fini(&ep->match, st);
        coll_tp_match_init(&ep->match, ep->base.peer, "ucx");
    }
}

coll_result_t coll_ucx_ep_create(struct coll_tp_ctx *ctx, int peer, const void *handle,
                                 coll_ucx_ep_t **ep_p)
{
    uint32_t magic, len;
    memcpy(&magic, handle, 4);
    memcpy(&len, (const uint8_t *)handle + 4, 4);
    if (magic != COLL_UCX_HANDLE_MAGIC || len == 0 || len > COLL_TP_HANDLE_MAX - 8) {
        coll_error(UCX, "rank %d: the listen handle of rank %d is not a UCX address", ctx->rank,
                   peer);
        return COLL_ERR_INVALID_ARG;
    }
    coll_ucx_ep_t *ep = coll_calloc(1, sizeof(*ep), "ucx endpoint");
    if (ep == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ep->base.ops  = &coll_tp_ucx_ops;
    ep->base.peer = peer;
    ep->ctx       = ctx;
    coll_tp_match_init(&ep->match, peer, "ucx");
    ucp_ep_params_t params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                            UCP_EP_PARAM_FIELD_ERR_HANDLER,
                              .address  = (const ucp_address_t *)((const uint8_t *)handle + 8),
                              .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                              .err_handler.cb  = ucx_ep_failed,
                              .err_handler.arg = ep};
    ucs_status_t    s      = ucp_ep_create(ctx->worker, &params, &ep->ep);
    if (s == UCS_ERR_UNREACHABLE) {
        /* UCX's shared-memory transports cannot report a peer's failure: go without (a dead
         * rank is still reported, by the bootstrap's death notice) */
        params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        s               = ucp_ep_create(ctx->worker, &params, &ep->ep);
        if (s == UCS_OK) {
            coll_info(UCX, "rank %d: endpoint to rank %d without peer-failure handling", ctx->rank,
                      peer);
        }
    }
    if (s != UCS_OK) {
        coll_error(UCX, "rank %d: cannot create an endpoint to rank %d: %s", ctx->rank, peer,
                   ucs_status_string(s));
        coll_free(ep);
        return COLL_ERR_TRANSPORT;
    }
    *ep_p = ep;
    return COLL_OK;
}

void coll_ucx_ep_destroy(coll_ucx_ep_t *ep)
{
    ucp_request_param_t p   = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags        = UCP_EP_CLOSE_FLAG_FORCE};
    void               *req = ucp_ep_close_nbx(ep->ep, &p);
    double              end = coll_time_s() + 5.0;
    if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS && coll_time_s() < end) {
            ucp_worker_progress(ep->ctx->worker);
        }
        ucp_request_free(req);
    }
    /* a send or rendezvous receive still in flight completes (failed) during the close */
    coll_tp_match_fini(&ep->match, COLL_ERR_ABORTED);
    coll_free(ep);
}

/* ---- sends ---- */

static coll_ucx_sreq_t *sreq_get(struct coll_tp_ctx *ctx)
{
    coll_ucx_sreq_t *s = ctx->sfree;
    if (s != NULL) {
        ctx->sfree = s->next_free;
        return s;
    }
    return coll_malloc(sizeof(*s), "ucx send");
}

static void sreq_put(struct coll_tp_ctx *ctx, coll_ucx_sreq_t *s)
{
    s->next_free = ctx->sfree;
    ctx->sfree   = s;
}

static void send_done(void *request, ucs_status_t status, void *user_data)
{
    coll_ucx_sreq_t *s  = user_data;
    coll_tp_op_t    *op = s->op;
    s->ep->inflight--;
    op->bytes = status == UCS_OK ? op->len : 0;
    sreq_put(s->ep->ctx, s);
    ucp_request_free(request);
    op->done(op->arg, status == UCS_OK ? COLL_OK : COLL_ERR_REMOTE);
}

coll_result_t coll_ucx_isend(coll_tp_ep_t *tep, coll_tp_op_t *op)
{
    coll_ucx_ep_t *ep = (coll_ucx_ep_t *)tep;
    if (op->len > COLL_UCX_MAX_MSG) {
        coll_error(UCX, "send of %zu bytes to rank %d is too large", op->len, tep->peer);
        return COLL_ERR_INVALID_ARG;
    }
    if (ep->failed != COLL_OK) {
        op->done(op->arg, ep->failed);
        return COLL_OK;
    }
    coll_ucx_sreq_t *s = sreq_get(ep->ctx);
    if (s == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    s->hdr                = (coll_ucx_hdr_t){.magic   = COLL_UCX_AM_MAGIC,
                                             .src     = (uint32_t)ep->ctx->rank,
                                             .tag     = op->tag,
                                             .len     = op->len,
                                             .job_tag = ep->ctx->job_tag};
    s->op                 = op;
    s->ep                 = ep;
    ucp_request_param_t p = {.op_attr_mask =
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb.send   = send_done,
                             .user_data = s};
    ucs_status_ptr_t    r =
        ucp_am_send_nbx(ep->ep, COLL_UCX_AM_ID, &s->hdr, sizeof(s->hdr), op->buf, op->len, &p);
    if (r == NULL) { /* done at once */
        sreq_put(ep->ctx, s);
        op->bytes = op->len;
        op->done(op->arg, COLL_OK);
        return COLL_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        sreq_put(ep->ctx, s);
        coll_error(UCX, "send to rank %d failed: %s", tep->peer,
                   ucs_status_string(UCS_PTR_STATUS(r)));
        op->done(op->arg, COLL_ERR_REMOTE);
        return COLL_OK;
    }
    ep->inflight++;
    return COLL_OK;
}

/* ---- receives ---- */

coll_result_t coll_ucx_irecv(coll_tp_ep_t *tep, coll_tp_op_t *op)
{
    coll_ucx_ep_t *ep = (coll_ucx_ep_t *)tep;
    if (ep->failed != COLL_OK) {
        op->done(op->arg, ep->failed);
        return COLL_OK;
    }
    return coll_tp_match_post(&ep->match, op);
}

static void rndv_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    coll_ucx_rreq_t *rr = user_data;
    coll_ucx_ep_t   *ep = rr->ep;
    ep->inflight--;
    if (status != UCS_OK) {
        coll_error(UCX, "receiving %llu bytes from rank %d failed: %s", (unsigned long long)rr->len,
                   ep->base.peer, ucs_status_string(status));
        ucx_ep_failed(ep, ep->ep, status);
    } else if (rr->op != NULL) {
        if (ep->failed == COLL_OK) { /* else the failure completed its receive already */
            coll_tp_match_account(&ep->match, rr->op, (size_t)rr->len);
        }
    } else {
        coll_result_t st = coll_tp_match_deliver(&ep->match, rr->tag, (size_t)rr->len, 0, rr->stage,
                                                 (size_t)rr->len);
        if (st != COLL_OK) {
            ucx_ep_fail_match(ep, st);
        }
    }
    free(rr->stage);
    coll_free(rr);
    if (request != NULL) {
        ucp_request_free(request);
    }
}

/* Fetch a rendezvous message: into its posted plain receive, or staged and then delivered. */
static ucs_status_t rndv_fetch(coll_ucx_ep_t *ep, const coll_ucx_hdr_t *h, void *desc)
{
    coll_ucx_rreq_t *rr = coll_calloc(1, sizeof(*rr), "ucx receive");
    if (rr == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    rr->ep    = ep;
    rr->tag   = h->tag;
    rr->len   = h->len;
    rr->op    = coll_tp_match_lookup_copy(&ep->match, h->tag, (size_t)h->len);
    void *dst = rr->op != NULL ? rr->op->buf : (rr->stage = malloc(h->len > 0 ? h->len : 1));
    if (dst == NULL) {
        coll_free(rr);
        return UCS_ERR_NO_MEMORY;
    }
    ucp_request_param_t p = {.op_attr_mask =
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb.recv_am = rndv_done,
                             .user_data  = rr};
    ep->inflight++;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(ep->ctx->worker, desc, dst, h->len, &p);
    if (r == NULL) { /* done at once: no callback will come */
        rndv_done(NULL, UCS_OK, h->len, rr);
    } else if (UCS_PTR_IS_ERR(r)) {
        ep->inflight--;
        free(rr->stage);
        coll_free(rr);
        return UCS_PTR_STATUS(r);
    }
    return UCS_INPROGRESS;
}

ucs_status_t coll_ucx_am_handler(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param)
{
    struct coll_tp_ctx *ctx = arg;
    coll_ucx_hdr_t      h;
    if (header_length != sizeof(h)) {
        coll_warn(UCX, "rank %d: dropped a message with a %zu-byte header", ctx->rank,
                  header_length);
        return UCS_OK;
    }
    memcpy(&h, header, sizeof(h));
    if (h.magic != COLL_UCX_AM_MAGIC || h.job_tag != ctx->job_tag ||
        h.src >= (uint32_t)ctx->nranks || ctx->eps[h.src] == NULL || h.len != length ||
        h.len > COLL_UCX_MAX_MSG) {
        coll_warn(UCX,
                  "rank %d: dropped a message (magic 0x%08x, rank %u, %zu bytes): not from a "
                  "rank of this communicator",
                  ctx->rank, h.magic, h.src, length);
        return UCS_OK;
    }
    coll_ucx_ep_t *ep = ctx->eps[h.src];
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
        ucs_status_t s = rndv_fetch(ep, &h, data);
        if (s != UCS_INPROGRESS) {
            ucx_ep_failed(ep, ep->ep, s);
        }
        return UCS_INPROGRESS;
    }
    coll_result_t st = coll_tp_match_deliver(&ep->match, h.tag, (size_t)h.len, 0, data, length);
    if (st != COLL_OK) {
        ucx_ep_fail_match(ep, st);
    }
    return UCS_OK;
}
