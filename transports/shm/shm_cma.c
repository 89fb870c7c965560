/* SPDX-License-Identifier: MIT */
/*
 * Single-copy transfers of the shm transport. A send of at least COLL_SHM_CMA_MIN bytes does not
 * go through the ring: the sender writes one RTS frame (tag, length, the address of its buffer)
 * and keeps the send pending; the receiver, once its receive is posted, reads the sender's buffer
 * straight into its own with process_vm_readv(2) (cross-memory attach), or through a small
 * cache-sized bounce buffer when the receive reduces, and answers with a FIN frame that completes
 * the send. Each byte is copied once instead of twice (into the ring and out of it), and large
 * messages no longer stream through a ring of a few hundred kilobytes.
 *
 * Whether a peer may read this process' memory is the kernel's decision (same user, ptrace
 * access mode: Yama's ptrace_scope, seccomp in containers): every receiver probes each sender
 * once at connection by reading the sender's segment header through its own address, and stores
 * the verdict in the control page of the ring the sender writes into. A sender uses RTS only
 * after it sees "yes" there, so a rank that cannot read its peers simply gets eager frames.
 */
#include "shm.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "reduce/reduce.h"
#include "util.h"
#include "compiler.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>

/* An RTS that arrived before its receive was posted. */
typedef struct shm_rts {
    uint64_t        tag;
    uint64_t        total;
    uint64_t        addr;
    struct shm_rts *next;
} shm_rts_t;

#define SHM_CMA_YES 1u
#define SHM_CMA_NO  2u

/* process_vm_readv of the peer's [addr, addr + n) into dst, retried on partial reads; 0 or an
 * errno value (-1 when the kernel read nothing). */
static int cma_readv(int pid, void *dst, uint64_t addr, size_t n)
{
    size_t done = 0;

    while (done < n) {
        struct iovec local  = {(char *)dst + done, n - done};
        struct iovec remote = {(void *)(uintptr_t)(addr + done), n - done};
        ssize_t      got    = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (got <= 0) {
            return got == 0 ? -1 : errno;
        }
        done += (size_t)got;
    }
    return 0;
}

static coll_result_t cma_read(shm_ep_t *ep, void *dst, uint64_t addr, size_t n)
{
    int err = cma_readv(ep->peer_pid, dst, addr, n);
    if (err == 0) {
        return COLL_OK;
    }
    coll_error(SHM,
               "rank %d cannot read %zu bytes of rank %d (pid %d) at 0x%" PRIx64
               " by single copy: %s",
               ep->ctx->rank, n, ep->base.peer, ep->peer_pid, addr,
               err < 0 ? "nothing read" : strerror(err));
    return err == ESRCH ? COLL_ERR_REMOTE : COLL_ERR_TRANSPORT;
}

void shm_cma_probe(coll_tp_ctx_t *ctx, shm_ep_t *ep)
{
    shm_seg_hdr_t theirs;
    uint32_t      verdict = SHM_CMA_NO;
    int           err     = -1;

    if (ctx->cma_min > 0 && ep->peer_seg.hdr->self_addr != 0) {
        err = cma_readv(ep->peer_pid, &theirs, ep->peer_seg.hdr->self_addr, sizeof(theirs));
        if (err == 0 && theirs.magic == SHM_SEG_MAGIC && theirs.comm_id == ctx->comm_id &&
            theirs.rank == ep->base.peer) {
            verdict = SHM_CMA_YES;
        }
    }
    atomic_store_explicit(&ep->rx.ctrl->cma, verdict, memory_order_release);
    if (verdict == SHM_CMA_YES) {
        coll_debug(SHM, "rank %d reads rank %d's messages by single copy", ctx->rank,
                   ep->base.peer);
    } else if (ctx->cma_min > 0) {
        coll_info(SHM,
                  "rank %d cannot read rank %d's memory (process_vm_readv: %s; see collinfo "
                  "doctor): its messages come through the ring",
                  ctx->rank, ep->base.peer, err > 0 ? strerror(err) : "header differs");
    }
}

int shm_cma_wanted(const shm_ep_t *ep, const coll_tp_op_t *op)
{
    uint64_t min = ep->ctx->cma_min;
    return min > 0 && op->len >= min &&
           atomic_load_explicit(&ep->tx.ctrl->cma, memory_order_acquire) == SHM_CMA_YES;
}

static coll_result_t cma_queue_fin(shm_ep_t *ep, uint64_t tag, uint64_t total)
{
    if (ep->nfin == ep->capfin) {
        uint32_t   cap = ep->capfin ? ep->capfin * 2 : 16;
        shm_fin_t *fin = coll_realloc(ep->fin, cap * sizeof(*fin), "shm FIN queue");
        if (fin == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
        ep->fin    = fin;
        ep->capfin = cap;
    }
    ep->fin[ep->nfin].tag   = tag;
    ep->fin[ep->nfin].total = total;
    ep->nfin++;
    return COLL_OK;
}

/* Fill the receive op from the sender's buffer at addr, complete it, answer FIN. */
static coll_result_t cma_fill(shm_ep_t *ep, coll_tp_op_t *op, uint64_t addr)
{
    coll_tp_ctx_t *ctx = ep->ctx;
    coll_result_t  st  = COLL_OK;

    if (op->operand == NULL) {
        st = cma_read(ep, op->buf, addr, op->len);
    } else {
        size_t esize = coll_dtype_size(op->dtype);
        size_t piece = (size_t)SHM_CMA_BOUNCE / esize * esize;
        if (ctx->cma_bounce == NULL) {
            ctx->cma_bounce = coll_malloc(SHM_CMA_BOUNCE, "shm single-copy bounce buffer");
        }
        st = ctx->cma_bounce == NULL ? COLL_ERR_NO_MEMORY : COLL_OK;
        for (size_t off = 0; st == COLL_OK && off < op->len; off += piece) {
            size_t n = COLL_MIN_OF(piece, op->len - off);
            st       = cma_read(ep, ctx->cma_bounce, addr + off, n);
            if (st == COLL_OK) {
                coll_reduce3(op->dtype, op->op, (char *)op->buf + off,
                             (const char *)op->operand + off, ctx->cma_bounce, n / esize);
            }
        }
    }
    if (st == COLL_OK) {
        st = cma_queue_fin(ep, op->tag, op->len);
    }
    op->bytes = st == COLL_OK ? op->len : 0;
    op->done(op->arg, st);
    return st;
}

coll_result_t shm_cma_on_rts(shm_ep_t *ep, const shm_frame_t *f)
{
    coll_tp_op_t *op;

    COLL_CHECK(coll_tp_match_take(&ep->match, f->tag, (size_t)f->total, &op));
    if (op != NULL) {
        return cma_fill(ep, op, f->offset);
    }
    shm_rts_t *r = coll_malloc(sizeof(*r), "shm RTS record");
    if (r == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    r->tag         = f->tag;
    r->total       = f->total;
    r->addr        = f->offset;
    r->next        = NULL;
    shm_rts_t **pp = &ep->rts_head; /* keep arrival order */
    while (*pp != NULL) {
        pp = &(*pp)->next;
    }
    *pp = r;
    return COLL_OK;
}

coll_result_t shm_cma_post(shm_ep_t *ep, coll_tp_op_t *op, int *taken_p)
{
    *taken_p = 0;
    for (shm_rts_t **pp = &ep->rts_head; *pp != NULL; pp = &(*pp)->next) {
        shm_rts_t *r = *pp;
        if (coll_tp_tags_clash(op->tag, r->tag)) {
            return coll_tp_match_p2p_clash(&ep->match, r->tag);
        }
        if (r->tag != op->tag) {
            continue;
        }
        COLL_CHECK(coll_tp_match_check_len(&ep->match, op, (size_t)r->total));
        *pp           = r->next;
        *taken_p      = 1;
        uint64_t addr = r->addr;
        coll_free(r);
        op->next = NULL;
        return cma_fill(ep, op, addr);
    }
    return COLL_OK;
}

coll_result_t shm_cma_on_fin(shm_ep_t *ep, const shm_frame_t *f)
{
    for (coll_tp_op_t **pp = &ep->rndv_head; *pp != NULL; pp = &(*pp)->next) {
        coll_tp_op_t *op = *pp;
        if (op->tag == f->tag && (uint64_t)op->len == f->total) {
            *pp       = op->next;
            op->next  = NULL;
            op->bytes = op->len;
            op->done(op->arg, COLL_OK);
            return COLL_OK;
        }
    }
    coll_error(SHM,
               "rank %d acknowledged tag 0x%" PRIx64 " (%" PRIu64 " bytes) that rank %d never "
               "announced; the endpoint is closed",
               ep->base.peer, f->tag, f->total, ep->ctx->rank);
    return COLL_ERR_TRANSPORT;
}

int shm_cma_push_fins(shm_ep_t *ep)
{
    uint32_t i = 0;
    while (i < ep->nfin &&
           shm_ring_push_ctl(&ep->tx, SHM_FIN_MAGIC, ep->fin[i].tag, ep->fin[i].total, 0)) {
        i++;
    }
    if (i > 0) {
        memmove(ep->fin, ep->fin + i, (ep->nfin - i) * sizeof(*ep->fin));
        ep->nfin -= i;
    }
    return (int)i;
}

void shm_cma_fail(shm_ep_t *ep, coll_result_t status)
{
    coll_tp_op_t *op = ep->rndv_head;
    ep->rndv_head    = NULL;
    while (op != NULL) {
        coll_tp_op_t *next = op->next;
        op->next           = NULL;
        op->done(op->arg, status);
        op = next;
    }
    while (ep->rts_head != NULL) {
        shm_rts_t *r = ep->rts_head;
        ep->rts_head = r->next;
        coll_free(r);
    }
    ep->nfin = 0;
}

void shm_cma_fini(coll_tp_ctx_t *ctx)
{
    coll_free(ctx->cma_bounce);
    ctx->cma_bounce = NULL;
}
