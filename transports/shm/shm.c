/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory transport for ranks on one host: context and endpoints, the non-blocking data
 * path (isend queues and pushes frames, progress drains incoming frames straight into tag
 * matching, which copies or reduces out of shared memory), polite waiting on a futex doorbell,
 * dead-peer detection, and the ops table. Ring, segment and window mechanics live in
 * shm_ring.c, shm_seg.c and shm_win.c; tag matching in transports/match.c.
 */
#include "shm.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "compiler.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

extern const coll_transport_ops_t coll_tp_shm_ops;

static char shm_rndv_mark; /* op->tp_priv of a send that goes single-copy */
#define SHM_OP_RNDV ((void *)&shm_rndv_mark)

/* ---- context ---- */

/* COLL_SHM_RING_SIZE rounded down to a power of two in [64k, 1g] (collinfo doctor sizes
 * segments with it too). */
uint64_t shm_ring_size_param(void)
{
    static atomic_int warned;
    size_t            want = coll_param_size(COLL_P_SHM_RING_SIZE);
    uint64_t          size = SHM_RING_MIN;

    while (size < SHM_RING_MAX && size * 2 <= want) {
        size *= 2;
    }
    if (size != want && atomic_exchange(&warned, 1) == 0) {
        coll_warn(SHM, "COLL_SHM_RING_SIZE %zu is not a power of two in [64k, 1g]: using %" PRIu64,
                  want, size);
    }
    return size;
}

static coll_result_t shm_init(const coll_tp_init_args_t *args, coll_tp_ctx_t **ctx_p)
{
    if (args->peers == NULL || args->rank < 0 || args->rank >= args->nranks) {
        coll_error(SHM, "bad init arguments (rank %d of %d)", args->rank, args->nranks);
        return COLL_ERR_INVALID_ARG;
    }
    coll_tp_ctx_t *ctx = coll_calloc(1, sizeof(*ctx), "shm context");
    if (ctx == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ctx->lidx = coll_calloc((size_t)args->nranks, sizeof(int), "shm local ranks");
    if (ctx->lidx == NULL) {
        coll_free(ctx);
        return COLL_ERR_NO_MEMORY;
    }
    ctx->rank     = args->rank;
    ctx->nranks   = args->nranks;
    ctx->comm_id  = args->comm_id;
    ctx->job_tag  = args->job_tag;
    ctx->mem_node = args->mem_node1 - 1;
    /* Compact local index: every rank of this host computes the same numbering from peers[]. */
    uint64_t host = args->peers[args->rank].host_hash;
    for (int r = 0; r < args->nranks; r++) {
        ctx->lidx[r] = args->peers[r].host_hash == host ? ctx->nlocal++ : -1;
    }
    ctx->ring_size = shm_ring_size_param();
    ctx->win_size =
        shm_win_size_param(ctx->nlocal == ctx->nranks && ctx->nranks > 1, ctx->nlocal, "/dev/shm");
    ctx->live_check_s = SHM_LIVE_CHECK_S;
    ctx->cma_min      = coll_param_size(COLL_P_SHM_CMA_MIN);
    shm_bell_setup();
    ctx->bell   = &ctx->private_bell;
    ctx->seg.fd = -1;
    if (shm_win_init(ctx) != COLL_OK) {
        coll_free(ctx->lidx);
        coll_free(ctx);
        return COLL_ERR_NO_MEMORY;
    }
    *ctx_p = ctx;
    return COLL_OK;
}

/* Slot of writer's incoming ring in owner's segment: local index, skipping the owner. */
static uint32_t shm_slot(const coll_tp_ctx_t *ctx, int owner, int writer)
{
    int w = ctx->lidx[writer];
    return (uint32_t)(w > ctx->lidx[owner] ? w - 1 : w);
}

static int shm_reachable(const coll_peer_info_t *self, const coll_peer_info_t *peer)
{
    return (self->host_hash == peer->host_hash && self->rank != peer->rank) ? 100 : -1;
}

static int shm_usable(const char **why_p)
{
    return shm_seg_probe(why_p);
}

static coll_result_t shm_listen(coll_tp_ctx_t *ctx, void *handle, size_t *handle_len_p)
{
    shm_handle_t h;
    uint32_t     nslots = (uint32_t)(ctx->nlocal - 1);

    if (nslots > 0 && !ctx->have_seg) {
        COLL_CHECK(shm_seg_create(&ctx->seg, ctx, nslots));
        ctx->have_seg = 1;
        ctx->bell     = &ctx->seg.hdr->bell;
        ctx->win      = shm_seg_win(&ctx->seg);
    }
    memset(&h, 0, sizeof(h));
    h.magic     = SHM_HANDLE_MAGIC;
    h.version   = SHM_SEG_VERSION;
    h.rank      = ctx->rank;
    h.pid       = (int32_t)getpid();
    h.nslots    = nslots;
    h.ring_size = ctx->ring_size;
    h.win_size  = ctx->win_size;
    if (ctx->have_seg) {
        h.seg_size = ctx->seg.size;
        coll_strlcpy(h.name, ctx->seg.name, sizeof(h.name));
    }
    _Static_assert(sizeof(h) <= COLL_TP_HANDLE_MAX, "shm handle too large");
    memcpy(handle, &h, sizeof(h));
    *handle_len_p = sizeof(h);
    return COLL_OK;
}

/* ---- endpoints ---- */

static void shm_ep_fail(shm_ep_t *ep, coll_result_t status)
{
    if (ep->status < 0) {
        return;
    }
    ep->status       = status;
    coll_tp_op_t *op = ep->sendq_head;
    ep->sendq_head = ep->sendq_tail = NULL;
    while (op != NULL) {
        coll_tp_op_t *next = op->next;
        op->next           = NULL;
        op->done(op->arg, status);
        op = next;
    }
    shm_cma_fail(ep, status);
    coll_tp_match_fini(&ep->match, status);
}

static void shm_ep_free(shm_ep_t *ep)
{
    coll_tp_ctx_t *ctx = ep->ctx;
    for (shm_ep_t **pp = &ctx->eps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    }
    if (ctx->ep_of[ep->base.peer] == ep) {
        ctx->ep_of[ep->base.peer] = NULL;
    }
    shm_ep_fail(ep, COLL_ERR_ABORTED);
    shm_seg_close(&ep->peer_seg);
    coll_free(ep->fin);
    coll_free(ep);
}

static coll_result_t shm_ep_create(coll_tp_ctx_t *ctx, int peer, const void *handle,
                                   shm_ep_t **ep_p)
{
    shm_handle_t  h;
    coll_result_t st;

    if (peer < 0 || peer >= ctx->nranks || peer == ctx->rank || ctx->lidx[peer] < 0 ||
        !ctx->have_seg || handle == NULL) {
        coll_error(SHM, "rank %d cannot be reached through shared memory from rank %d", peer,
                   ctx->rank);
        return COLL_ERR_INVALID_USAGE;
    }
    shm_ep_t *ep = coll_calloc(1, sizeof(*ep), "shm endpoint");
    if (ep == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ep->peer_seg.fd = -1;
    ep->base.ops    = &coll_tp_shm_ops;
    ep->base.peer   = peer;
    ep->ctx         = ctx;
    ep->next        = ctx->eps; /* linked first so that shm_ep_free() finds it */
    ctx->eps        = ep;
    coll_tp_match_init(&ep->match, peer, "shm");
    memcpy(&h, handle, sizeof(h)); /* the core's buffer may be unaligned */
    COLL_CHECK_GOTO(shm_seg_attach(&ep->peer_seg, ctx, &h, peer), st, err);
    shm_ring_view(&ep->tx, shm_seg_ring(&ep->peer_seg, shm_slot(ctx, peer, ctx->rank)), h.ring_size,
                  peer);
    shm_ring_view(&ep->rx, shm_seg_ring(&ctx->seg, shm_slot(ctx, ctx->rank, peer)), ctx->ring_size,
                  peer);
    ep->win          = shm_seg_win(&ep->peer_seg);
    ep->win_size     = h.win_size;
    ep->peer_pid     = h.pid;
    ctx->ep_of[peer] = ep;
    *ep_p            = ep;
    return COLL_OK;

err:
    shm_ep_free(ep);
    return st;
}

static coll_result_t shm_connect_all(coll_tp_ctx_t *ctx, const int *peers, int npeers,
                                     const void *const *handles, double deadline,
                                     coll_tp_ep_t **eps_p)
{
    coll_result_t st = COLL_OK;
    int           i;

    for (i = 0; i < npeers; i++) {
        eps_p[i] = NULL;
    }
    for (i = 0; i < npeers; i++) {
        shm_ep_t *ep;
        int       p = peers[i];
        COLL_CHECK_GOTO(shm_ep_create(ctx, p, (p >= 0 && p < ctx->nranks) ? handles[p] : NULL, &ep),
                        st, err);
        eps_p[i] = &ep->base;
        shm_cma_probe(ctx, ep);
    }
    shm_win_connect(ctx, handles);
    coll_debug(SHM, "rank %d connected to %d local peers (rings of %" PRIu64 " bytes)", ctx->rank,
               npeers, ctx->ring_size);
    return COLL_OK;

err:
    while (i-- > 0) {
        shm_ep_free((shm_ep_t *)eps_p[i]);
        eps_p[i] = NULL;
    }
    return st;
}

static void shm_established(coll_tp_ctx_t *ctx)
{
    /* every peer has mapped our segment: drop the name so nothing outlives the job */
    if (ctx->have_seg) {
        shm_seg_unlink(&ctx->seg);
    }
}

static void shm_ep_close(coll_tp_ep_t *base)
{
    shm_ep_free((shm_ep_t *)base);
}

static void shm_finalize(coll_tp_ctx_t *ctx)
{
    while (ctx->eps != NULL) {
        shm_ep_free(ctx->eps);
    }
    if (ctx->have_seg) {
        shm_seg_close(&ctx->seg);
    }
    shm_win_fini(ctx);
    shm_cma_fini(ctx);
    coll_free(ctx->lidx);
    coll_free(ctx);
}

/* ---- data path ---- */

/* Push FIN frames, then queued sends in order; completes each op once all its bytes are in the
 * ring, or (single-copy) parks it until the peer's FIN. */
static int shm_ep_push(shm_ep_t *ep)
{
    int frames = shm_cma_push_fins(ep);

    while (ep->sendq_head != NULL || ep->nfin > 0) {
        coll_tp_op_t *op = ep->sendq_head;
        int           complete;
        if (ep->nfin > 0) {
            complete = 0; /* the ring is full: FINs go first */
        } else if (op->tp_priv == SHM_OP_RNDV) {
            complete = shm_ring_push_ctl(&ep->tx, SHM_RTS_MAGIC, op->tag, op->len,
                                         (uint64_t)(uintptr_t)op->buf);
            frames += complete;
        } else {
            frames += shm_ring_push(&ep->tx, op, &ep->tx_started, &complete);
        }
        if (!complete) {
            if (!ep->want_space) { /* ask for a doorbell, then look once more (shm_ring.c) */
                shm_ring_set_want_space(&ep->tx, 1);
                ep->want_space = 1;
                continue;
            }
            ep->stall_tail = ep->tx.other;
            break;
        }
        ep->sendq_head = op->next;
        if (ep->sendq_head == NULL) {
            ep->sendq_tail = NULL;
        }
        ep->tx_started = 0;
        if (op->tp_priv == SHM_OP_RNDV) { /* appended: a FIN completes the oldest of its tag */
            coll_tp_op_t **pp = &ep->rndv_head;
            while (*pp != NULL) {
                pp = &(*pp)->next;
            }
            op->next = NULL;
            *pp      = op;
            continue;
        }
        op->next = NULL;
        op->done(op->arg, COLL_OK);
    }
    if (ep->sendq_head == NULL && ep->nfin == 0 && ep->want_space) {
        shm_ring_set_want_space(&ep->tx, 0);
        ep->want_space = 0;
    }
    if (frames > 0) {
        shm_bell_ring(&ep->peer_seg.hdr->bell);
    }
    return frames;
}

/* The peer's frames wait in the ring (see coll_tp_match_held), unless a FIN for one of this
 * rank's single-copy sends may be among them. */
static int shm_ep_held(const shm_ep_t *ep)
{
    return ep->rndv_head == NULL && coll_tp_match_held(&ep->match);
}

/* Deliver incoming frames, at most one ring's worth per call so no peer starves the others. */
static int shm_ep_drain(shm_ep_t *ep)
{
    uint64_t start = ep->rx.pos;

    while (ep->rx.pos - start < ep->rx.size) {
        if (shm_ep_held(ep)) {
            coll_tp_match_log_held(&ep->match);
            break;
        }
        shm_frame_t   f;
        const void   *payload;
        coll_result_t st = shm_ring_peek(&ep->rx, &f, &payload);
        if (st == COLL_AGAIN) {
            break;
        }
        if (st == COLL_OK && f.magic == SHM_FRAME_MAGIC) {
            st = coll_tp_match_deliver(&ep->match, f.tag, (size_t)f.total, (size_t)f.offset,
                                       payload, f.len);
            shm_ring_consume(&ep->rx, &f); /* after the copy: the producer reuses the space */
        } else if (st == COLL_OK) {
            shm_ring_consume(&ep->rx, &f); /* RTS, FIN: f is a private copy */
            st = f.magic == SHM_RTS_MAGIC ? shm_cma_on_rts(ep, &f) : shm_cma_on_fin(ep, &f);
        }
        if (st < 0) {
            shm_ep_fail(ep, st);
            return 1;
        }
    }
    if (ep->rx.pos == start) {
        return 0;
    }
    if (shm_ring_wants_space(&ep->rx)) {
        shm_bell_ring(&ep->peer_seg.hdr->bell);
    }
    return 1;
}

/* Work that needs the peer alive: queued sends, posted receives, a window poll of the last pass. */
static int shm_ep_pending(const shm_ep_t *ep)
{
    return ep->status == COLL_OK &&
           (ep->sendq_head != NULL || ep->rndv_head != NULL || coll_tp_match_busy(&ep->match) ||
            ep->ctx->win_armed[ep->base.peer] != 0);
}

/* A peer that exited (its segment lock is gone) fails the endpoint, unless it left data. */
static int shm_check_peers(coll_tp_ctx_t *ctx)
{
    int failed = 0;
    for (shm_ep_t *ep = ctx->eps; ep != NULL; ep = ep->next) {
        if (!shm_ep_pending(ep) || shm_seg_owner_alive(&ep->peer_seg) ||
            shm_ring_nonempty(&ep->rx)) {
            continue;
        }
        coll_error(SHM, "rank %d (pid %d) exited while rank %d still %s", ep->base.peer,
                   (int)ep->peer_seg.hdr->pid, ctx->rank,
                   ep->sendq_head != NULL                ? "sends to it"
                   : ep->rndv_head != NULL               ? "waits for it to read a message"
                   : coll_tp_match_busy(&ep->match) != 0 ? "expects data from it"
                                                         : "waits on its window");
        shm_ep_fail(ep, COLL_ERR_REMOTE);
        failed = 1;
    }
    return failed;
}

static int shm_progress(coll_tp_ctx_t *ctx)
{
    int moved = 0, pending = 0;

    for (shm_ep_t *ep = ctx->eps; ep != NULL; ep = ep->next) {
        if (ep->status != COLL_OK) {
            continue;
        }
        moved |= shm_ep_drain(ep);
        if (ep->status == COLL_OK && (ep->sendq_head != NULL || ep->nfin > 0)) {
            moved |= shm_ep_push(ep) > 0;
        }
        pending |= shm_ep_pending(ep);
    }
    if (!moved && pending) {
        double now = coll_time_s();
        if (now >= ctx->next_live_check) {
            ctx->next_live_check = now + ctx->live_check_s;
            moved                = shm_check_peers(ctx);
        }
    }
    shm_win_disarm(ctx); /* the engine polls again after this pass and re-arms what it waits for */
    return moved;
}

static coll_result_t shm_isend(coll_tp_ep_t *base, coll_tp_op_t *op)
{
    shm_ep_t *ep = (shm_ep_t *)base;

    if ((op->len > 0 && op->buf == NULL) || (uint64_t)op->len > SHM_TOTAL_MAX) {
        coll_error(SHM, "bad send to rank %d: %zu bytes at %p", base->peer, op->len, op->buf);
        return COLL_ERR_INVALID_ARG;
    }
    if (ep->status < 0) {
        op->done(op->arg, ep->status);
        return COLL_OK;
    }
    op->bytes   = 0;
    op->next    = NULL;
    op->tp_priv = shm_cma_wanted(ep, op) ? SHM_OP_RNDV : NULL;
    if (ep->sendq_tail == NULL) {
        ep->sendq_head = op;
    } else {
        ep->sendq_tail->next = op;
    }
    ep->sendq_tail = op;
    shm_ep_push(ep);
    return COLL_OK;
}

static coll_result_t shm_irecv(coll_tp_ep_t *base, coll_tp_op_t *op)
{
    shm_ep_t *ep = (shm_ep_t *)base;

    if (op->len > 0 && op->buf == NULL) {
        coll_error(SHM, "bad receive from rank %d: %zu bytes into NULL", base->peer, op->len);
        return COLL_ERR_INVALID_ARG;
    }
    if (op->operand != NULL) {
        size_t esize = coll_dtype_size(op->dtype);
        if (esize == 0 || op->len % esize != 0 || op->op == COLL_AVG ||
            (unsigned)op->op >= COLL_REDOP_COUNT) {
            coll_error(SHM, "bad reducing receive from rank %d: %zu bytes, dtype %d, op %d",
                       base->peer, op->len, (int)op->dtype, (int)op->op);
            return COLL_ERR_INVALID_ARG;
        }
    }
    if (ep->status < 0) {
        op->done(op->arg, ep->status);
        return COLL_OK;
    }
    if (ep->rts_head != NULL) {
        int           taken;
        coll_result_t st = shm_cma_post(ep, op, &taken);
        if (st < 0 && !taken) {
            return st;
        }
        if (taken) { /* done() ran; a failed read closes the endpoint */
            if (st < 0) {
                shm_ep_fail(ep, st);
            } else {
                shm_ep_push(ep); /* the FIN now: block() would not see it queued */
            }
            return COLL_OK;
        }
    }
    return coll_tp_match_post(&ep->match, op);
}

/* ---- waiting ---- */

static int shm_has_work(coll_tp_ctx_t *ctx, int *pending_p)
{
    if (shm_win_has_work(ctx, pending_p)) {
        return 1;
    }
    for (shm_ep_t *ep = ctx->eps; ep != NULL; ep = ep->next) {
        if (ep->status != COLL_OK) {
            continue;
        }
        if ((shm_ring_nonempty(&ep->rx) && !shm_ep_held(ep)) ||
            ((ep->sendq_head != NULL || ep->nfin > 0) &&
             shm_ring_has_space(&ep->tx, ep->stall_tail))) {
            return 1;
        }
        *pending_p |= shm_ep_pending(ep);
    }
    return 0;
}

static void shm_block(coll_tp_ctx_t *ctx, double timeout_s)
{
    int pending = 0;

    if (timeout_s <= 0) {
        return;
    }
    uint32_t seen = shm_bell_prepare(ctx->bell);
    if (shm_has_work(ctx, &pending)) {
        shm_bell_cancel(ctx->bell);
        return;
    }
    /* A dead peer rings no bell: with work pending, wake up in time for the liveness check. */
    if (pending && timeout_s > ctx->live_check_s) {
        timeout_s = ctx->live_check_s;
    }
    shm_bell_wait(ctx->bell, seen, timeout_s);
}

static void shm_wake(coll_tp_ctx_t *ctx)
{
    shm_bell_force(ctx->bell);
}

const coll_transport_ops_t coll_tp_shm_ops = {
    .abi           = COLL_TRANSPORT_ABI,
    .name          = "shm",
    .desc          = "shared memory rings between ranks of one host (/dev/shm)",
    .caps          = COLL_TP_CAP_HOST_MEM,
    .usable        = shm_usable,
    .init          = shm_init,
    .finalize      = shm_finalize,
    .reachable     = shm_reachable,
    .listen        = shm_listen,
    .connect_all   = shm_connect_all,
    .established   = shm_established,
    .isend         = shm_isend,
    .irecv         = shm_irecv,
    .progress      = shm_progress,
    .block         = shm_block,
    .wake          = shm_wake,
    .ep_close      = shm_ep_close,
    .win_size      = shm_win_size,
    .win_ptr       = shm_win_ptr,
    .win_publish   = shm_win_publish,
    .win_poll      = shm_win_poll,
    .win_ack       = shm_win_ack,
    .win_acked     = shm_win_acked,
    .small_slot    = shm_small_slot,
    .small_publish = shm_small_publish,
    .small_poll    = shm_small_poll,
};
