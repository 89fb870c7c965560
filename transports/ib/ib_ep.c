/* SPDX-License-Identifier: MIT */
/* Verbs transport data path: slots, RDMA WRITE WITH IMMEDIATE, credits, completions (ib.h). */
#include "config.h"

#include "ib.h"
#include "cuda/devmem.h"
#include "ib_mr.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "util.h"

/* wr_id: the QP's index in ctx->qtab above 20 bits, the send slot (or a kind) below. */
#define WR_RECV   0xfffffu
#define WR_CREDIT 0xffffeu
static uint64_t wr_make(coll_ib_qp_t *q, uint32_t slot)
{
    return (uint64_t)q->gidx << 20 | slot;
}

static coll_ib_qp_t *wr_qp(struct coll_tp_ctx *ctx, uint64_t id)
{
    uint64_t i = id >> 20;
    return i < (uint64_t)ctx->nq ? ctx->qtab[i] : NULL;
}

struct ibv_qp_init_attr coll_ib_qp_attr(const struct coll_tp_ctx *ctx)
{
    return (struct ibv_qp_init_attr){
        .send_cq = ctx->cq,
        .recv_cq = ctx->cq,
        .qp_type = IBV_QPT_RC,
        .cap     = {.max_send_wr     = (uint32_t)(ctx->slots + 16 + COLL_IB_RD_DEPTH),
                    .max_recv_wr     = 2 * (uint32_t)ctx->slots + 16,
                    .max_send_sge    = 1,
                    .max_recv_sge    = 1,
                    .max_inline_data = (uint32_t)ctx->max_inline}};
}

/* The QP is connected to the peer's ring: it may send, with a full ring of credits. */
void coll_ib_qp_ready(coll_ib_qp_t *q, uint64_t raddr, uint32_t rkey)
{
    q->raddr     = raddr;
    q->rkey      = rkey;
    q->connected = 1;
    q->credits   = q->ep->ctx->slots;
    q->ep->nconnected++;
}

static coll_result_t post_recv(coll_ib_qp_t *q)
{
    struct ibv_recv_wr wr = {.wr_id = wr_make(q, WR_RECV)}, *bad;
    return ibv_post_recv(q->qp, &wr, &bad) == 0 ? COLL_OK : COLL_ERR_TRANSPORT;
}

coll_result_t coll_ib_qp_setup(coll_ib_qp_t *q)
{
    struct coll_tp_ctx *ctx   = q->ep->ctx;
    size_t              bytes = (size_t)ctx->slots * ctx->slot_size;
    coll_ib_qp_t **tab = coll_realloc(ctx->qtab, sizeof(*tab) * (size_t)(ctx->nq + 1), "ib QPs");
    if (tab == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ctx->qtab            = tab;
    q->gidx              = ctx->nq;
    ctx->qtab[ctx->nq++] = q;
    q->ring              = coll_calloc(1, bytes, "ib receive ring");
    q->sbuf              = coll_calloc(1, bytes, "ib send slots");
    q->sowner            = coll_calloc((size_t)ctx->slots, sizeof(*q->sowner), "ib send owners");
    if (q->ring == NULL || q->sbuf == NULL || q->sowner == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    q->ring_mr =
        ibv_reg_mr(ctx->pd, q->ring, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    q->sbuf_mr = ibv_reg_mr(ctx->pd, q->sbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (q->ring_mr == NULL || q->sbuf_mr == NULL) {
        coll_error(IB, "rank %d: cannot register %zu bytes on %s (locked-memory limit? ulimit -l)",
                   ctx->rank, bytes, ctx->devname);
        return COLL_ERR_SYSTEM;
    }
    q->sfree = ctx->slots;
    for (int i = 0; i < 2 * ctx->slots; i++) {
        COLL_CHECK(post_recv(q));
    }
    return COLL_OK;
}

/* Bytes of the message a send request fragments (control requests: none). */
static size_t sreq_len(const coll_ib_sreq_t *s)
{
    return s->kind == COLL_IB_SREQ_DATA ? s->op->len : 0;
}

coll_ib_sreq_t *coll_ib_sreq_new(struct coll_tp_ctx *ctx)
{
    coll_ib_sreq_t *s = ctx->sfree;
    if (s != NULL) {
        ctx->sfree = s->next;
    } else if ((s = coll_malloc(sizeof(*s), "ib send")) == NULL) {
        return NULL;
    }
    *s = (coll_ib_sreq_t){0};
    return s;
}

void coll_ib_sreq_finish(coll_ib_ep_t *ep, coll_ib_sreq_t *s, coll_result_t st)
{
    coll_tp_op_t *op = s->op;
    if (s->reg != NULL) {
        coll_ib_mrc_put(ep->ctx->mrc, s->reg);
    }
    if (s->dev_mr != NULL) {
        ibv_dereg_mr(s->dev_mr);
    }
    s->next        = ep->ctx->sfree;
    ep->ctx->sfree = s;
    if (op != NULL) {
        op->bytes = st == COLL_OK ? op->len : 0;
        op->done(op->arg, st);
    }
}

/* A posted fragment of s completed (or failed): the request ends when every fragment is out
 * and done, an RTS only once its FIN came too. */
static void sreq_fragment_done(coll_ib_ep_t *ep, coll_ib_sreq_t *s, coll_result_t st)
{
    if (--s->pending > 0 || s->off <= sreq_len(s)) {
        return;
    }
    if (s->kind != COLL_IB_SREQ_RTS || st != COLL_OK) {
        if (s->kind == COLL_IB_SREQ_RTS) { /* failed: off the list of those waiting for FIN */
            for (coll_ib_sreq_t **pp = &ep->rv_head; *pp != NULL; pp = &(*pp)->rv_next) {
                if (*pp == s) {
                    *pp = s->rv_next;
                    break;
                }
            }
        }
        coll_ib_sreq_finish(ep, s, st);
    } else if (s->fin != 0) { /* -1: the endpoint failed meanwhile */
        coll_ib_sreq_finish(ep, s, s->fin > 0 ? COLL_OK : COLL_ERR_TRANSPORT);
    }
}

void coll_ib_ep_fail_st(coll_ib_ep_t *ep, coll_result_t st, const char *why)
{
    if (ep->failed != COLL_OK) {
        return;
    }
    ep->failed = st;
    coll_error(IB, "rank %d: the connection to rank %d failed: %s", ep->ctx->rank, ep->base.peer,
               why);
    while (ep->sq_head != NULL) {
        coll_ib_sreq_t *s = ep->sq_head;
        ep->sq_head       = s->next;
        if (s->kind == COLL_IB_SREQ_RTS) {
            continue; /* also in ep->rv_head: coll_ib_rndv_ep_fail's */
        }
        if (s->pending == 0) { /* else its completions (flushed) finish it */
            coll_ib_sreq_finish(ep, s, st);
        } else {
            s->off = sreq_len(s) + 1;
        }
    }
    ep->sq_tail = NULL;
    coll_ib_rndv_ep_fail(ep, st, 0);
    coll_tp_match_fini(&ep->match, st);
    coll_tp_match_init(&ep->match, ep->base.peer, "ib");
}

void coll_ib_ep_fail(coll_ib_ep_t *ep, const char *why)
{
    coll_ib_ep_fail_st(ep, COLL_ERR_TRANSPORT, why);
}

/* A QP that can take a fragment now (connected, a remote slot and a send slot free). */
static coll_ib_qp_t *pick_qp(coll_ib_ep_t *ep)
{
    int n = ep->ctx->nqps;
    for (int k = 0; k < n; k++) {
        coll_ib_qp_t *q = &ep->qps[(ep->rr + k) % n];
        if (q->connected && q->credits > 0 && q->sfree > 0) {
            ep->rr = (ep->rr + k + 1) % n;
            return q;
        }
    }
    return NULL;
}

/* Turn queued sends into fragments while credits last. */
static void push(coll_ib_ep_t *ep)
{
    struct coll_tp_ctx *ctx = ep->ctx;
    size_t              max = ctx->slot_size - sizeof(coll_ib_frag_t);
    while (ep->sq_head != NULL && ep->failed == COLL_OK) {
        coll_ib_sreq_t *s = ep->sq_head;
        coll_ib_qp_t   *q = pick_qp(ep);
        if (q == NULL) {
            return;
        }
        size_t         len  = sreq_len(s);
        size_t         n    = len - s->off < max ? len - s->off : max;
        int            slot = q->snext;
        char          *buf  = q->sbuf + (size_t)slot * ctx->slot_size;
        coll_ib_frag_t h    = {.magic = COLL_IB_FRAG_MAGIC,
                               .len   = (uint32_t)n,
                               .tag   = s->kind == COLL_IB_SREQ_DATA ? s->op->tag : s->tag,
                               .total = s->kind == COLL_IB_SREQ_DATA ? len : s->total,
                               .off   = s->off};
        if (s->kind == COLL_IB_SREQ_DATA && s->op->dev == NULL) {
            memcpy(buf + sizeof(h), (const char *)s->op->buf + s->off, n);
        } else if (s->kind == COLL_IB_SREQ_DATA) { /* out of device memory, by the copy engine */
            ctx->gdr_copies += s->off == 0 && n > 0;
            if (n > 0 && coll_cuda_copy_sync(s->op->dev, buf + sizeof(h),
                                             (const char *)s->op->buf + s->off, n, 0) != COLL_OK) {
                coll_ib_ep_fail(ep, coll_last_error()); /* a local failure, but the stream's
                                                          order on this endpoint is lost */
                return;
            }
        } else if (s->kind == COLL_IB_SREQ_RTS) { /* one fragment: the buffer's address */
            h.magic = COLL_IB_RTS_MAGIC;
            h.len   = (uint32_t)(n = sizeof(s->rts));
            memcpy(buf + sizeof(h), &s->rts, sizeof(s->rts));
        } else {
            h.magic = COLL_IB_FIN_MAGIC;
        }
        memcpy(buf, &h, sizeof(h));
        struct ibv_sge sge = {
            .addr = (uintptr_t)buf, .length = (uint32_t)(sizeof(h) + n), .lkey = q->sbuf_mr->lkey};
        struct ibv_send_wr wr = {.wr_id      = wr_make(q, (uint32_t)slot),
                                 .sg_list    = &sge,
                                 .num_sge    = 1,
                                 .opcode     = IBV_WR_RDMA_WRITE_WITH_IMM,
                                 .send_flags = IBV_SEND_SIGNALED,
                                 .imm_data   = htonl((uint32_t)q->rnext)},
                           *bad;
        if (sge.length <= (uint32_t)ctx->max_inline) {
            wr.send_flags |= IBV_SEND_INLINE;
        }
        wr.wr.rdma.remote_addr = q->raddr + (uint64_t)q->rnext * ctx->slot_size;
        wr.wr.rdma.rkey        = q->rkey;
        if (ibv_post_send(q->qp, &wr, &bad) != 0) {
            coll_ib_ep_fail(ep, "ibv_post_send failed");
            return;
        }
        q->sowner[slot] = s;
        q->snext        = (slot + 1) % ctx->slots;
        q->sfree--;
        q->rnext = (q->rnext + 1) % ctx->slots;
        q->credits--;
        s->pending++;
        s->off += s->kind == COLL_IB_SREQ_DATA ? n : 0;
        if (s->off >= len) { /* every fragment is out: off the queue */
            ep->sq_head = s->next;
            if (ep->sq_head == NULL) {
                ep->sq_tail = NULL;
            }
            s->next = NULL;
            s->off  = len + 1; /* marks "fully fragmented" */
        }
    }
}

coll_result_t coll_ib_isend(coll_tp_ep_t *tep, coll_tp_op_t *op)
{
    coll_ib_ep_t *ep = (coll_ib_ep_t *)tep;
    if (op->len > COLL_IB_MAX_MSG) {
        coll_error(IB, "send of %zu bytes to rank %d is too large", op->len, tep->peer);
        return COLL_ERR_INVALID_ARG;
    }
    if (ep->failed != COLL_OK) {
        op->done(op->arg, ep->failed);
        return COLL_OK;
    }
    if (coll_ib_rndv_send(ep, op)) {
        return COLL_OK;
    }
    coll_ib_sreq_t *s = coll_ib_sreq_new(ep->ctx);
    if (s == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    s->op = op;
    return coll_ib_sq_add(ep, s);
}

coll_result_t coll_ib_sq_add(coll_ib_ep_t *ep, coll_ib_sreq_t *s)
{
    s->next = NULL;
    if (ep->sq_tail != NULL) {
        ep->sq_tail->next = s;
    } else {
        ep->sq_head = s;
    }
    ep->sq_tail = s;
    push(ep);
    return COLL_OK;
}

coll_result_t coll_ib_irecv(coll_tp_ep_t *tep, coll_tp_op_t *op)
{
    coll_ib_ep_t *ep    = (coll_ib_ep_t *)tep;
    int           taken = 0;
    if (ep->failed != COLL_OK) {
        op->done(op->arg, ep->failed);
        return COLL_OK;
    }
    COLL_CHECK(coll_ib_rndv_post(ep, op, &taken));
    return taken ? COLL_OK : coll_tp_match_post(&ep->match, op);
}

/* Return consumed slots to the sender once half a ring is used (or at once when it stalls). */
static void return_credits(coll_ib_qp_t *q, int force)
{
    struct coll_tp_ctx *ctx = q->ep->ctx;
    if (q->to_return == 0 || (!force && q->to_return < ctx->slots / 2)) {
        return;
    }
    struct ibv_send_wr wr = {.wr_id      = wr_make(q, WR_CREDIT),
                             .num_sge    = 0,
                             .opcode     = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED,
                             .imm_data   = htonl(COLL_IB_CREDIT_BIT | (uint32_t)q->to_return)},
                       *bad;
    wr.wr.rdma.remote_addr = q->raddr;
    wr.wr.rdma.rkey        = q->rkey;
    if (ibv_post_send(q->qp, &wr, &bad) != 0) {
        coll_ib_ep_fail(q->ep, "ibv_post_send (credits) failed");
        return;
    }
    q->to_return = 0;
}

static void on_fragment(coll_ib_qp_t *q, uint32_t slot)
{
    struct coll_tp_ctx *ctx = q->ep->ctx;
    coll_ib_frag_t      h;
    if (slot >= (uint32_t)ctx->slots) {
        coll_ib_ep_fail(q->ep, "a fragment names a slot out of range");
        return;
    }
    const char *buf = q->ring + (size_t)slot * ctx->slot_size;
    memcpy(&h, buf, sizeof(h));
    if ((h.magic == COLL_IB_RTS_MAGIC && h.len == sizeof(coll_ib_rts_t)) ||
        (h.magic == COLL_IB_FIN_MAGIC && h.len == 0)) {
        coll_ib_rndv_on_ctl(q, &h, buf + sizeof(h));
        q->to_return++;
        return_credits(q, 0);
        return;
    }
    if (h.magic != COLL_IB_FRAG_MAGIC || h.len > ctx->slot_size - sizeof(h) ||
        h.total > COLL_IB_MAX_MSG || h.off > h.total || h.len > h.total - h.off) {
        coll_ib_ep_fail(q->ep, "corrupt fragment header");
        return;
    }
    coll_result_t st =
        coll_tp_match_deliver(&q->ep->match, h.tag, h.total, h.off, buf + sizeof(h), h.len);
    if (st != COLL_OK) {
        coll_ib_ep_fail_st(q->ep, st == COLL_ERR_MISMATCH ? st : COLL_ERR_TRANSPORT,
                           st == COLL_ERR_CUDA ? coll_last_error()
                                               : "a fragment does not match its message");
        return;
    }
    q->to_return++;
    return_credits(q, 0);
}

int coll_ib_poll_cq(struct coll_tp_ctx *ctx)
{
    struct ibv_wc wc[32];
    int           n, moved = 0;
    while ((n = ibv_poll_cq(ctx->cq, 32, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].wr_id & COLL_IB_WR_READ) {
                coll_ib_rndv_read_done(ctx, &wc[i]);
                moved++;
                continue;
            }
            coll_ib_qp_t *q    = wr_qp(ctx, wc[i].wr_id);
            uint32_t      kind = (uint32_t)(wc[i].wr_id & 0xfffffu);
            if (q == NULL) {
                continue; /* a QP already closed */
            }
            coll_ib_ep_t *ep = q->ep;
            moved++;
            if (wc[i].status != IBV_WC_SUCCESS) {
                if (wc[i].status != IBV_WC_WR_FLUSH_ERR || ep->failed == COLL_OK) {
                    coll_ib_ep_fail(ep, ibv_wc_status_str(wc[i].status));
                }
                if (kind < WR_CREDIT && q->sowner[kind] != NULL) { /* a failed fragment */
                    coll_ib_sreq_t *s = q->sowner[kind];
                    q->sowner[kind]   = NULL;
                    q->sfree++;
                    sreq_fragment_done(ep, s, COLL_ERR_TRANSPORT);
                }
                continue;
            }
            if (kind == WR_RECV) {
                uint32_t imm = ntohl(wc[i].imm_data);
                if (post_recv(q) != COLL_OK) {
                    coll_ib_ep_fail(ep, "ibv_post_recv failed");
                } else if (imm & COLL_IB_CREDIT_BIT) {
                    q->credits += (int)(imm & ~COLL_IB_CREDIT_BIT);
                } else {
                    on_fragment(q, imm);
                }
            } else if (kind != WR_CREDIT) { /* a data fragment was written: its slot is free */
                coll_ib_sreq_t *s = q->sowner[kind];
                q->sowner[kind]   = NULL;
                q->sfree++;
                if (s != NULL) {
                    sreq_fragment_done(ep, s, COLL_OK);
                }
            }
            push(ep);
        }
    }
    moved += coll_ib_rndv_progress(ctx);
    /* a sender that is out of credits may wait on slots we hold back: return them when idle */
    for (int r = 0; moved == 0 && r < ctx->nranks; r++) {
        for (int k = 0; ctx->eps[r] != NULL && k < ctx->nqps; k++) {
            if (ctx->eps[r]->qps[k].connected) {
                return_credits(&ctx->eps[r]->qps[k], 1);
            }
        }
    }
    return moved;
}

void coll_ib_ep_destroy(coll_ib_ep_t *ep)
{
    /* the QPs go: no completion will come for what they carry */
    for (int k = 0; k < ep->ctx->nqps; k++) {
        for (int i = 0; ep->qps[k].sowner != NULL && i < ep->ctx->slots; i++) {
            coll_ib_sreq_t *s = ep->qps[k].sowner[i];
            if (s != NULL) {
                ep->qps[k].sowner[i] = NULL;
                s->pending--;
                /* an RTS still waiting for its FIN (fin 0) is in ep->rv_head: the rendezvous
                 * code finishes it; one whose FIN came (1) or whose endpoint failed (-1) is not */
                if (s->pending == 0 && s->off > sreq_len(s) &&
                    (s->kind != COLL_IB_SREQ_RTS || s->fin != 0)) {
                    coll_ib_sreq_finish(ep, s, COLL_ERR_ABORTED);
                }
            }
        }
    }
    for (int k = 0; k < ep->ctx->nqps; k++) {
        coll_ib_qp_t *q = &ep->qps[k];
        if (q->qp != NULL) {
            ep->ctx->qtab[q->gidx] = NULL;
        }
        if (q->id != NULL) {
            coll_ib_cm_qp_destroy(q);
        } else if (q->qp != NULL) {
            ibv_destroy_qp(q->qp);
        }
        if (q->ring_mr != NULL) {
            ibv_dereg_mr(q->ring_mr);
        }
        if (q->sbuf_mr != NULL) {
            ibv_dereg_mr(q->sbuf_mr);
        }
        coll_free(q->ring);
        coll_free(q->sbuf);
        coll_free(q->sowner);
    }
    if (ep->sock >= 0) {
        close(ep->sock);
    }
    if (ep->failed == COLL_OK) {
        ep->failed = COLL_ERR_ABORTED;
    }
    while (ep->sq_head != NULL) {
        coll_ib_sreq_t *s = ep->sq_head;
        ep->sq_head       = s->next;
        if (s->kind != COLL_IB_SREQ_RTS) { /* those are in ep->rv_head too */
            coll_ib_sreq_finish(ep, s, COLL_ERR_ABORTED);
        }
    }
    coll_ib_rndv_ep_fail(ep, COLL_ERR_ABORTED, 1);
    coll_tp_match_fini(&ep->match, COLL_ERR_ABORTED);
    coll_free(ep);
}
