/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy rendezvous of the verbs transport, for sends of at least COLL_IB_RNDV_MIN bytes.
 * The sender registers its buffer (through the registration cache, ib_mr.c, so a buffer sent
 * again is not registered again) and sends one RTS control fragment through the slot ring:
 * tag, length, address and rkey. The receiver, once its receive is posted, pulls the bytes with
 * RDMA READs straight into the receive buffer (registered through the cache too), striped over
 * the QPs, COLL_IB_RD_DEPTH in flight per QP; a receive that reduces reads pieces into a small
 * registered bounce buffer and reduces each as it lands. When every READ completed it answers
 * with a FIN control fragment, which completes the send. Each byte crosses once, from the
 * sender's buffer to the receiver's, with no copy into or out of the slot rings.
 *
 * A READ's wr_id is COLL_IB_WR_READ | the QP's gidx << 20 | its descriptor; a completion from a
 * QP already destroyed (ctx->qtab[gidx] == NULL) is dropped, so descriptors freed with their
 * endpoint are never touched by a stale completion.
 */
#include "config.h"

#include "ib.h"
#include "ib_mr.h"
#include "cuda/devmem.h"

#include <inttypes.h>
#include <string.h>

#include "compiler.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "reduce/reduce.h"
#include "util.h"

#define RD_POOL      64           /* READ descriptors per context */
#define RD_CHUNK     (512u << 10) /* bytes of one READ into a receive buffer */
#define BOUNCE_PIECE (256u << 10) /* bytes of one READ of a reducing receive */
#define BOUNCE_N     8

typedef struct coll_ib_rd {
    coll_ib_rjob_t *job; /* NULL: free */
    size_t          off, len;
    int             piece; /* bounce piece, -1 none */
    int             next_free;
} coll_ib_rd_t;

static void *mr_reg(void *cookie, void *addr, size_t len)
{
    coll_ib_mr_cookie_t *c = cookie;
    return ibv_reg_mr(c->ctx->pd, addr, len, c->access);
}

static void mr_dereg(void *cookie, void *handle)
{
    ibv_dereg_mr(handle);
}

static const coll_ib_mrc_ops_t mr_ops = {.reg = mr_reg, .dereg = mr_dereg};

coll_result_t coll_ib_rndv_init(struct coll_tp_ctx *ctx)
{
    struct ibv_device_attr da;
    ctx->rd_free  = -1;
    ctx->rndv_min = coll_param_size(COLL_P_IB_RNDV_MIN);
    ctx->rd_depth = 1;
    if (ibv_query_device(ctx->verbs, &da) == 0) {
        int d =
            da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom : da.max_qp_init_rd_atom;
        ctx->rd_depth = d < COLL_IB_RD_DEPTH ? d : COLL_IB_RD_DEPTH;
    }
    if (ctx->rd_depth < 1) {
        coll_info(IB, "rank %d: device %s takes no RDMA READ: no rendezvous", ctx->rank,
                  ctx->devname);
        ctx->rd_depth = 1;
        ctx->rndv_min = 0;
        return COLL_OK;
    }
    /* Receiving by rendezvous is always ready (a peer may have another COLL_IB_RNDV_MIN): the
     * descriptors and the bounce buffer. Buffers are registered through the caches (receive
     * buffers: else read through the bounce buffer) only where this rank sends that way. */
    if (ctx->rndv_min > 0) {
        int    on         = (int)coll_param_int(COLL_P_IB_REG_CACHE);
        int    entries    = (int)coll_param_int(COLL_P_IB_REG_CACHE_ENTRIES);
        size_t bytes      = coll_param_size(COLL_P_IB_REG_CACHE_BYTES);
        ctx->mr_cookie[0] = (coll_ib_mr_cookie_t){ctx, IBV_ACCESS_REMOTE_READ};
        ctx->mr_cookie[1] = (coll_ib_mr_cookie_t){ctx, IBV_ACCESS_LOCAL_WRITE};
        COLL_CHECK(coll_ib_mrc_create(&mr_ops, &ctx->mr_cookie[0], entries, bytes, on, &ctx->mrc));
        COLL_CHECK(
            coll_ib_mrc_create(&mr_ops, &ctx->mr_cookie[1], entries, bytes, on, &ctx->mrc_recv));
    }
    ctx->rd     = coll_calloc(RD_POOL, sizeof(*ctx->rd), "ib READ descriptors");
    ctx->bounce = coll_malloc((size_t)BOUNCE_N * BOUNCE_PIECE, "ib bounce buffer");
    if (ctx->rd == NULL || ctx->bounce == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ctx->bounce_mr =
        ibv_reg_mr(ctx->pd, ctx->bounce, (size_t)BOUNCE_N * BOUNCE_PIECE, IBV_ACCESS_LOCAL_WRITE);
    if (ctx->bounce_mr == NULL) {
        coll_error(IB, "rank %d: cannot register a %u-byte bounce buffer on %s", ctx->rank,
                   BOUNCE_N * BOUNCE_PIECE, ctx->devname);
        return COLL_ERR_SYSTEM;
    }
    ctx->bounce_free = (1u << BOUNCE_N) - 1;
    ctx->rd_n        = RD_POOL;
    for (int i = 0; i < RD_POOL; i++) {
        ctx->rd[i].next_free = i + 1 < RD_POOL ? i + 1 : -1;
    }
    ctx->rd_free = 0;
    coll_debug(IB,
               "rank %d: sends of %zu bytes and more by RDMA READ, %d in flight per QP, "
               "registration cache %s",
               ctx->rank, ctx->rndv_min, ctx->rd_depth,
               ctx->mrc != NULL && coll_ib_mrc_enabled(ctx->mrc) ? "on" : "off");
    return COLL_OK;
}

void coll_ib_rndv_fini(struct coll_tp_ctx *ctx)
{
    uint64_t h = 0, m = 0, h2 = 0, m2 = 0;
    if (ctx->mrc != NULL) {
        coll_ib_mrc_stats(ctx->mrc, &h, &m, NULL, NULL);
        if (ctx->mrc_recv != NULL) { /* its creation may have failed */
            coll_ib_mrc_stats(ctx->mrc_recv, &h2, &m2, NULL, NULL);
        }
        coll_debug(IB,
                   "rank %d: %" PRIu64 " sends and %" PRIu64 " receives by RDMA READ; "
                   "registrations: %" PRIu64 " hits, %" PRIu64 " misses",
                   ctx->rank, ctx->rndv_sends, ctx->rndv_recvs, h + h2, m + m2);
    }
    if (ctx->bounce_mr != NULL) {
        ibv_dereg_mr(ctx->bounce_mr);
    }
    coll_free(ctx->bounce);
    coll_free(ctx->rd);
    if (ctx->mrc != NULL) {
        coll_ib_mrc_destroy(ctx->mrc);
    }
    if (ctx->mrc_recv != NULL) {
        coll_ib_mrc_destroy(ctx->mrc_recv);
    }
    ctx->mrc = ctx->mrc_recv = NULL;
}

int coll_ib_rndv_send(coll_ib_ep_t *ep, coll_tp_op_t *op)
{
    struct coll_tp_ctx *ctx = ep->ctx;
    coll_ib_mreg_t     *reg = NULL;
    void               *mr;
    /* device memory too (GPUDirect RDMA): shorter messages are copied through the slots, so
     * that a short send completes without its receive, as from host memory */
    if (ctx->rndv_min == 0 || op->len < ctx->rndv_min) {
        return 0;
    }
    if (op->dev != NULL) {
        if ((mr = coll_ib_gdr_reg(ctx, op->dev, op->buf, op->len, IBV_ACCESS_REMOTE_READ)) ==
            NULL) {
            return 0;
        }
    } else if (coll_ib_mrc_get(ctx->mrc, op->buf, op->len, &reg, &mr) != COLL_OK) {
        coll_debug(IB, "rank %d: %zu bytes at %p to rank %d cannot be registered: sent by copy",
                   ctx->rank, op->len, op->buf, ep->base.peer);
        return 0;
    }
    coll_ib_sreq_t *s = coll_ib_sreq_new(ctx);
    if (s == NULL) {
        if (reg != NULL) {
            coll_ib_mrc_put(ctx->mrc, reg);
        } else {
            ibv_dereg_mr(mr);
        }
        return 0;
    }
    s->op    = op;
    s->kind  = COLL_IB_SREQ_RTS;
    s->tag   = op->tag;
    s->total = op->len;
    s->rts =
        (coll_ib_rts_t){.addr = (uint64_t)(uintptr_t)op->buf, .rkey = ((struct ibv_mr *)mr)->rkey};
    s->reg              = reg;
    s->dev_mr           = reg == NULL ? mr : NULL;
    coll_ib_sreq_t **pp = &ep->rv_head; /* in order: a FIN completes the oldest match */
    while (*pp != NULL) {
        pp = &(*pp)->rv_next;
    }
    *pp = s;
    ctx->rndv_sends++;
    coll_ib_sq_add(ep, s);
    return 1;
}

/* ---- receiver ---- */

static int rd_get(struct coll_tp_ctx *ctx)
{
    int i = ctx->rd_free;
    if (i >= 0) {
        ctx->rd_free = ctx->rd[i].next_free;
    }
    return i;
}

static void rd_put(struct coll_tp_ctx *ctx, int i)
{
    coll_ib_rd_t *d = &ctx->rd[i];
    if (d->piece >= 0) {
        ctx->bounce_free |= 1u << d->piece;
    }
    d->job       = NULL;
    d->next_free = ctx->rd_free;
    ctx->rd_free = i;
}

/* The job is over (every READ done, or it failed): FIN to the sender, the receive completed. */
static void job_finish(coll_ib_rjob_t *job)
{
    coll_ib_ep_t       *ep  = job->ep;
    struct coll_tp_ctx *ctx = ep->ctx;
    coll_tp_op_t       *op  = job->op;
    coll_result_t       st  = job->status;
    for (coll_ib_rjob_t **pp = &ctx->rjobs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == job) {
            *pp = job->next;
            break;
        }
    }
    if (job->reg != NULL) {
        coll_ib_mrc_put(ctx->mrc_recv, job->reg);
    }
    if (job->dev_mr != NULL) {
        ibv_dereg_mr(job->dev_mr);
    }
    if (st == COLL_OK) {
        coll_ib_sreq_t *s = coll_ib_sreq_new(ctx);
        if (s == NULL) {
            st = COLL_ERR_NO_MEMORY;
        } else {
            s->kind  = COLL_IB_SREQ_FIN;
            s->tag   = op->tag;
            s->total = op->len;
            coll_ib_sq_add(ep, s);
        }
    }
    coll_free(job);
    op->bytes = st == COLL_OK ? op->len : 0;
    op->done(op->arg, st);
}

static void job_check(coll_ib_rjob_t *job)
{
    if (job->outstanding == 0 && (job->off >= job->op->len || job->status != COLL_OK)) {
        job_finish(job);
    }
}

/* A QP of the job's peer that can take one more READ, the least loaded. */
static coll_ib_qp_t *read_qp(coll_ib_ep_t *ep)
{
    coll_ib_qp_t *best = NULL;
    for (int k = 0; k < ep->ctx->nqps; k++) {
        coll_ib_qp_t *q = &ep->qps[k];
        if (q->connected && q->nreads < ep->ctx->rd_depth &&
            (best == NULL || q->nreads < best->nreads)) {
            best = q;
        }
    }
    return best;
}

/* Post as many of the job's READs as descriptors, bounce pieces and QP depth allow; how many,
 * or -1 when posting failed the endpoint (and finished its jobs, this one too). */
static int job_issue(coll_ib_rjob_t *job)
{
    coll_ib_ep_t       *ep     = job->ep;
    struct coll_tp_ctx *ctx    = ep->ctx;
    coll_tp_op_t       *op     = job->op;
    int                 posted = 0;
    while (job->off < op->len && job->status == COLL_OK && ep->failed == COLL_OK) {
        coll_ib_qp_t *q     = read_qp(ep);
        int           piece = -1;
        if (q == NULL || ctx->rd_free < 0) {
            break;
        }
        size_t   n;
        uint64_t laddr;
        uint32_t lkey;
        if (job->reg != NULL || job->dev_mr != NULL) {
            n     = COLL_MIN_OF((size_t)RD_CHUNK, op->len - job->off);
            laddr = (uint64_t)(uintptr_t)((char *)op->buf + job->off);
            lkey  = job->lkey;
        } else {
            if (ctx->bounce_free == 0) {
                break;
            }
            piece = __builtin_ctz(ctx->bounce_free);
            n     = COLL_MIN_OF((size_t)BOUNCE_PIECE, op->len - job->off);
            laddr = (uint64_t)(uintptr_t)(ctx->bounce + (size_t)piece * BOUNCE_PIECE);
            lkey  = ctx->bounce_mr->lkey;
            ctx->bounce_free &= ~(1u << piece);
        }
        int           i = rd_get(ctx);
        coll_ib_rd_t *d = &ctx->rd[i];
        *d              = (coll_ib_rd_t){.job = job, .off = job->off, .len = n, .piece = piece};
        struct ibv_sge     sge = {.addr = laddr, .length = (uint32_t)n, .lkey = lkey};
        struct ibv_send_wr wr  = {.wr_id   = COLL_IB_WR_READ | (uint64_t)q->gidx << 20 | (uint64_t)i,
                                  .sg_list = &sge,
                                  .num_sge = 1,
                                  .opcode  = IBV_WR_RDMA_READ,
                                  .send_flags = IBV_SEND_SIGNALED},
                           *bad;
        wr.wr.rdma.remote_addr = job->raddr + job->off;
        wr.wr.rdma.rkey        = job->rkey;
        if (ibv_post_send(q->qp, &wr, &bad) != 0) {
            rd_put(ctx, i);
            job->status = COLL_ERR_TRANSPORT;
            coll_ib_ep_fail(ep, "ibv_post_send (RDMA READ) failed"); /* finishes the job */
            return -1;
        }
        q->nreads++;
        job->outstanding++;
        job->off += n;
        posted++;
    }
    return posted;
}

static void job_start(coll_ib_ep_t *ep, coll_tp_op_t *op, const coll_ib_rts_t *rts)
{
    struct coll_tp_ctx *ctx = ep->ctx;
    coll_ib_rjob_t     *job = coll_calloc(1, sizeof(*job), "ib rendezvous receive");
    void               *mr;
    if (job == NULL) {
        op->done(op->arg, COLL_ERR_NO_MEMORY);
        coll_ib_ep_fail(ep, "out of memory for a rendezvous receive");
        return;
    }
    *job     = (coll_ib_rjob_t){.ep = ep, .op = op, .raddr = rts->addr, .rkey = rts->rkey};
    op->next = NULL;
    if (op->dev != NULL) { /* GPUDirect RDMA, else through the bounce buffer */
        job->dev_mr = coll_ib_gdr_reg(ctx, op->dev, op->buf, op->len, IBV_ACCESS_LOCAL_WRITE);
        job->lkey   = job->dev_mr != NULL ? job->dev_mr->lkey : 0;
    } else if (op->operand == NULL && ctx->mrc_recv != NULL &&
               coll_ib_mrc_get(ctx->mrc_recv, op->buf, op->len, &job->reg, &mr) == COLL_OK) {
        job->lkey = ((struct ibv_mr *)mr)->lkey;
    } else {
        job->reg = NULL; /* through the bounce buffer */
    }
    coll_ib_rjob_t **pp = &ctx->rjobs; /* in arrival order */
    while (*pp != NULL) {
        pp = &(*pp)->next;
    }
    *pp = job;
    ctx->rndv_recvs++;
    job_issue(job);
}

void coll_ib_rndv_on_ctl(coll_ib_qp_t *q, const coll_ib_frag_t *h, const char *payload)
{
    coll_ib_ep_t *ep = q->ep;
    if (h->magic == COLL_IB_FIN_MAGIC) {
        for (coll_ib_sreq_t **pp = &ep->rv_head; *pp != NULL; pp = &(*pp)->rv_next) {
            coll_ib_sreq_t *s = *pp;
            if (s->tag == h->tag && s->total == h->total) {
                *pp    = s->rv_next;
                s->fin = 1;
                if (s->pending == 0) {
                    coll_ib_sreq_finish(ep, s, COLL_OK);
                }
                return;
            }
        }
        coll_ib_ep_fail(ep, "a FIN names a message never announced");
        return;
    }
    coll_ib_rts_t rts;
    coll_tp_op_t *op;
    if (ep->ctx->rd == NULL) {
        coll_ib_ep_fail(ep, "it sends by rendezvous (RDMA READ), which this rank's device cannot "
                            "serve: set COLL_IB_RNDV_MIN=0 on every rank");
        return;
    }
    memcpy(&rts, payload, sizeof(rts));
    coll_result_t st = h->total > COLL_IB_MAX_MSG
                           ? COLL_ERR_TRANSPORT
                           : coll_tp_match_take(&ep->match, h->tag, (size_t)h->total, &op);
    if (st != COLL_OK) {
        coll_ib_ep_fail_st(ep, st, "a rendezvous message does not match its receive");
        return;
    }
    if (op != NULL) {
        job_start(ep, op, &rts);
        return;
    }
    coll_ib_rts_rec_t *r = coll_malloc(sizeof(*r), "ib RTS record");
    if (r == NULL) {
        coll_ib_ep_fail(ep, "out of memory for an RTS record");
        return;
    }
    *r                     = (coll_ib_rts_rec_t){.tag = h->tag, .total = h->total, .rts = rts};
    coll_ib_rts_rec_t **pp = &ep->rts_head;
    while (*pp != NULL) {
        pp = &(*pp)->next;
    }
    *pp = r;
}

coll_result_t coll_ib_rndv_post(coll_ib_ep_t *ep, coll_tp_op_t *op, int *taken_p)
{
    *taken_p = 0;
    for (coll_ib_rts_rec_t **pp = &ep->rts_head; *pp != NULL; pp = &(*pp)->next) {
        coll_ib_rts_rec_t *r = *pp;
        if (coll_tp_tags_clash(op->tag, r->tag)) {
            return coll_tp_match_p2p_clash(&ep->match, r->tag);
        }
        if (r->tag != op->tag) {
            continue;
        }
        COLL_CHECK(coll_tp_match_check_len(&ep->match, op, (size_t)r->total));
        coll_ib_rts_t rts = r->rts;
        *pp               = r->next;
        coll_free(r);
        *taken_p = 1;
        job_start(ep, op, &rts);
        return COLL_OK;
    }
    return COLL_OK;
}

void coll_ib_rndv_read_done(struct coll_tp_ctx *ctx, const struct ibv_wc *wc)
{
    uint64_t      id   = wc->wr_id & ~COLL_IB_WR_READ;
    uint64_t      gidx = id >> 20;
    int           i    = (int)(id & 0xfffffu);
    coll_ib_qp_t *q    = gidx < (uint64_t)ctx->nq ? ctx->qtab[gidx] : NULL;
    if (q == NULL || i >= ctx->rd_n || ctx->rd[i].job == NULL) {
        return; /* its QP is gone, and the descriptor with it */
    }
    coll_ib_rd_t    d   = ctx->rd[i];
    coll_ib_rjob_t *job = d.job;
    coll_tp_op_t   *op  = job->op;
    q->nreads--;
    coll_result_t copied = COLL_OK;
    if (wc->status == IBV_WC_SUCCESS && job->status == COLL_OK && d.piece >= 0) {
        const char *in = ctx->bounce + (size_t)d.piece * BOUNCE_PIECE;
        char       *to = (char *)op->buf + d.off;
        if (op->dev != NULL) {
            copied = coll_cuda_copy_sync(op->dev, to, in, d.len, 1);
        } else if (op->operand == NULL) {
            memcpy(to, in, d.len);
        } else {
            size_t esize = coll_dtype_size(op->dtype);
            coll_reduce3(op->dtype, op->op, to, (const char *)op->operand + d.off, in,
                         d.len / esize);
        }
    }
    rd_put(ctx, i);
    job->outstanding--;
    if (wc->status != IBV_WC_SUCCESS || copied != COLL_OK) {
        job->status = wc->status != IBV_WC_SUCCESS ? COLL_ERR_TRANSPORT : copied;
        if (job->ep->failed == COLL_OK) { /* the sender waits for a FIN that will not come */
            coll_ib_ep_fail(job->ep, wc->status != IBV_WC_SUCCESS ? ibv_wc_status_str(wc->status)
                                                                  : coll_last_error());
            return; /* it finished the job */
        }
    }
    job_check(job);
}

int coll_ib_rndv_progress(struct coll_tp_ctx *ctx)
{
    int             n = 0;
    coll_ib_rjob_t *job, *next;
    for (job = ctx->rjobs; job != NULL && ctx->rd_free >= 0; job = next) {
        next  = job->next;
        int k = job_issue(job);
        if (k < 0) {
            return n + 1; /* jobs were finished: the list changed */
        }
        n += k;
    }
    return n;
}

void coll_ib_rndv_ep_fail(coll_ib_ep_t *ep, coll_result_t st, int gone)
{
    struct coll_tp_ctx *ctx = ep->ctx;
    while (ep->rv_head != NULL) { /* sends waiting for FIN */
        coll_ib_sreq_t *s = ep->rv_head;
        ep->rv_head       = s->rv_next;
        if (s->pending == 0) {
            coll_ib_sreq_finish(ep, s, st);
        } else {
            s->fin = -1; /* its flushed completion finishes it */
        }
    }
    while (ep->rts_head != NULL) {
        coll_ib_rts_rec_t *r = ep->rts_head;
        ep->rts_head         = r->next;
        coll_free(r);
    }
    coll_ib_rjob_t *job = ctx->rjobs, *next;
    for (; job != NULL; job = next) {
        next = job->next;
        if (job->ep != ep) {
            continue;
        }
        if (job->status == COLL_OK) {
            job->status = st;
        }
        for (int i = 0; gone && i < ctx->rd_n; i++) { /* no completion will come for these */
            if (ctx->rd[i].job == job) {
                rd_put(ctx, i);
                job->outstanding--;
            }
        }
        job_check(job);
    }
}
