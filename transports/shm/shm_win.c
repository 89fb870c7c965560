/* SPDX-License-Identifier: MIT */
/*
 * Shared windows of the shm transport: when every rank of the communicator is on this host,
 * each segment ends with a window (control block + two halves) that every rank maps. This file
 * sizes it, publishes and polls flags and acknowledgements, and lets a sleeping rank know that
 * something it polled has changed. It does not decide when a half may be written: the engine
 * does, with the acknowledgements (src/engine/window.c).
 *
 * Memory ordering. The owner writes window data, then stores the flag with release; a reader
 * loads the flag with acquire before it reads the data. A rank stores its ack with release
 * after its last read of epoch ack; a writer loads every ack with acquire before it reuses a
 * half. Sleeping uses the doorbell's store/fence/load pattern (shm_ring.c) with gen in place of
 * a ring head: a poll that fails records the owner's gen, read before the flag; the owner
 * bumps gen after every store and then rings the doorbells, so a sleeper either sees gen move
 * in block() or is woken.
 */
#include "shm.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/statvfs.h>

/* COLL_SHM_WINDOW_SIZE rounded up to whole pages, 0 when not every rank is on this host. The
 * default (4 MiB per half) shrinks to 1 MiB where shm_dir (/dev/shm) could not hold this host's
 * windows four times over (a container's 64 MiB /dev/shm, say): windows are reserved, not
 * sparse. collinfo (algos, doctor) calls this too, so that it predicts the same window. */
uint64_t shm_win_size_param(int all_local, int nlocal, const char *shm_dir)
{
    uint64_t       want = coll_param_size(COLL_P_SHM_WINDOW_SIZE);
    struct statvfs v;

    if (!all_local || want == 0) {
        return 0;
    }
    if (want > SHM_WIN_MAX) {
        coll_warn(SHM, "COLL_SHM_WINDOW_SIZE %" PRIu64 " is above 1g: using 1g", want);
        want = SHM_WIN_MAX;
    }
    if (!coll_param_is_set(COLL_P_SHM_WINDOW_SIZE) && want > SHM_WIN_SMALL &&
        statvfs(shm_dir, &v) == 0 &&
        (uint64_t)v.f_bavail * v.f_frsize < 4u * 2u * want * (uint64_t)nlocal) {
        coll_debug(SHM, "%s has %" PRIu64 " bytes free: windows of %u bytes per half", shm_dir,
                   (uint64_t)v.f_bavail * v.f_frsize, SHM_WIN_SMALL);
        want = SHM_WIN_SMALL;
    }
    return (want + SHM_WIN_ALIGN - 1) / SHM_WIN_ALIGN * SHM_WIN_ALIGN;
}

coll_result_t shm_win_init(coll_tp_ctx_t *ctx)
{
    size_t n = (size_t)ctx->nranks;

    ctx->ep_of     = coll_calloc(n, sizeof(*ctx->ep_of), "shm endpoints by rank");
    ctx->win_seen  = coll_calloc(n, sizeof(*ctx->win_seen), "shm window state");
    ctx->win_armed = coll_calloc(n, 1, "shm window state");
    if (ctx->ep_of == NULL || ctx->win_seen == NULL || ctx->win_armed == NULL) {
        shm_win_fini(ctx);
        return COLL_ERR_NO_MEMORY;
    }
    return COLL_OK;
}

void shm_win_fini(coll_tp_ctx_t *ctx)
{
    coll_free(ctx->ep_of);
    coll_free(ctx->win_seen);
    coll_free(ctx->win_armed);
    ctx->ep_of     = NULL;
    ctx->win_seen  = NULL;
    ctx->win_armed = NULL;
}

/* Every rank reads the same handles, so every rank agrees on the smallest window. */
void shm_win_connect(coll_tp_ctx_t *ctx, const void *const *handles)
{
    uint64_t common = ctx->win_size;

    for (int r = 0; r < ctx->nranks && common > 0; r++) {
        shm_handle_t h;

        if (ctx->lidx[r] < 0 || handles[r] == NULL) {
            common = 0;
            break;
        }
        memcpy(&h, handles[r], sizeof(h));
        if (h.magic != SHM_HANDLE_MAGIC || (r != ctx->rank && ctx->ep_of[r] == NULL)) {
            common = 0;
        } else if (h.win_size < common) {
            common = h.win_size;
        }
    }
    ctx->win_common = (ctx->win != NULL) ? common : 0;
    coll_debug(SHM, "rank %d: shared windows of %" PRIu64 " bytes per half%s", ctx->rank,
               ctx->win_common, ctx->win_common == 0 ? " (none)" : "");
}

static shm_win_ctrl_t *win_ctrl(coll_tp_ctx_t *ctx, int rank)
{
    return (rank == ctx->rank) ? ctx->win : ctx->ep_of[rank]->win;
}

/* Why rank can no longer publish: its endpoint failed (dead peer), else COLL_OK. */
static coll_result_t win_status(coll_tp_ctx_t *ctx, int rank)
{
    return (rank == ctx->rank) ? COLL_OK : ctx->ep_of[rank]->status;
}

static void win_arm(coll_tp_ctx_t *ctx, int rank, uint64_t gen)
{
    ctx->win_seen[rank]  = gen;
    ctx->win_armed[rank] = 1;
}

void shm_win_disarm(coll_tp_ctx_t *ctx)
{
    if (ctx->win_common > 0) {
        memset(ctx->win_armed, 0, (size_t)ctx->nranks);
    }
}

int shm_win_has_work(coll_tp_ctx_t *ctx, int *pending_p)
{
    if (ctx->win_common == 0) {
        return 0;
    }
    for (int r = 0; r < ctx->nranks; r++) {
        if (!ctx->win_armed[r]) {
            continue;
        }
        if (atomic_load_explicit(&win_ctrl(ctx, r)->gen, memory_order_acquire) !=
            ctx->win_seen[r]) {
            ctx->win_armed[r] = 0;
            return 1;
        }
        *pending_p |= (r != ctx->rank);
    }
    return 0;
}

size_t shm_win_size(coll_tp_ctx_t *ctx)
{
    return (size_t)ctx->win_common;
}

void *shm_win_ptr(coll_tp_ctx_t *ctx, int rank, int parity)
{
    uint64_t half = (rank == ctx->rank) ? ctx->win_size : ctx->ep_of[rank]->win_size;

    return (char *)win_ctrl(ctx, rank) + SHM_WIN_CTRL_SIZE + (uint64_t)(parity & 1) * half;
}

/* After a store: move gen and wake every local rank that sleeps. */
static void win_announce(coll_tp_ctx_t *ctx)
{
    /* only the owner writes gen; shm_bell_ring orders it before its look at sleepers */
    atomic_store_explicit(&ctx->win->gen,
                          atomic_load_explicit(&ctx->win->gen, memory_order_relaxed) + 1,
                          memory_order_release);
    for (shm_ep_t *ep = ctx->eps; ep != NULL; ep = ep->next) {
        if (ep->status == COLL_OK) {
            shm_bell_ring(&ep->peer_seg.hdr->bell);
        }
    }
}

void shm_win_publish(coll_tp_ctx_t *ctx, int parity, uint32_t slot, uint64_t epoch)
{
    atomic_store_explicit(&ctx->win->flag[parity & 1][slot], epoch, memory_order_release);
    win_announce(ctx);
}

coll_result_t shm_win_poll(coll_tp_ctx_t *ctx, int rank, int parity, uint32_t slot, uint64_t epoch)
{
    shm_win_ctrl_t *c   = win_ctrl(ctx, rank);
    uint64_t        gen = atomic_load_explicit(&c->gen, memory_order_acquire);
    uint64_t        f   = atomic_load_explicit(&c->flag[parity & 1][slot], memory_order_acquire);
    coll_result_t   st;

    if (f == epoch) {
        return COLL_OK;
    }
    /* values are epoch << 8 | fingerprint (transport.h); the same epoch with another
     * fingerprint is a rank in another call: wait, the engine's timeout names it */
    if ((f >> 8) > (epoch >> 8)) { /* it cannot reuse this half before we acknowledged epoch */
        coll_error(SHM,
                   "rank %d published window slot %u for epoch %" PRIu64
                   " while rank %d still reads epoch %" PRIu64,
                   rank, slot, f >> 8, ctx->rank, epoch >> 8);
        return COLL_ERR_TRANSPORT;
    }
    st = win_status(ctx, rank);
    if (st < 0) {
        return st;
    }
    win_arm(ctx, rank, gen);
    return COLL_INPROGRESS;
}

void shm_win_ack(coll_tp_ctx_t *ctx, uint64_t epoch)
{
    atomic_store_explicit(&ctx->win->ack, epoch, memory_order_release);
    win_announce(ctx);
}

coll_result_t shm_win_acked(coll_tp_ctx_t *ctx, uint64_t epoch, int *rank_p)
{
    for (int r = 0; r < ctx->nranks; r++) {
        shm_win_ctrl_t *c   = win_ctrl(ctx, r);
        uint64_t        gen = atomic_load_explicit(&c->gen, memory_order_acquire);
        coll_result_t   st;

        if (atomic_load_explicit(&c->ack, memory_order_acquire) >= epoch) {
            continue;
        }
        *rank_p = r;
        st      = win_status(ctx, r);
        if (st < 0) {
            return st;
        }
        win_arm(ctx, r, gen);
        return COLL_INPROGRESS;
    }
    return COLL_OK;
}

/* ---- small-call slots: in the control block, same ordering and waking as the flags ---- */

coll_tp_small_t *shm_small_slot(coll_tp_ctx_t *ctx, int rank, int parity)
{
    return &win_ctrl(ctx, rank)->small[parity & 1];
}

void shm_small_publish(coll_tp_ctx_t *ctx)
{
    win_announce(ctx);
}

coll_result_t shm_small_poll(coll_tp_ctx_t *ctx, int rank, int parity, uint64_t stamp, int arm)
{
    shm_win_ctrl_t *c = win_ctrl(ctx, rank);
    /* gen before the stamp, and only to arm: spinning leaves the owner's gen line alone */
    uint64_t      gen = arm ? atomic_load_explicit(&c->gen, memory_order_acquire) : 0;
    uint64_t      f   = atomic_load_explicit(&c->small[parity & 1].stamp, memory_order_acquire);
    coll_result_t st;

    if ((f >> 8) == (stamp >> 8)) {
        return COLL_OK;
    }
    if ((f >> 8) > (stamp >> 8)) { /* it cannot be two calls ahead of a rank still reading */
        coll_error(SHM, "rank %d published small call %" PRIu64 " while rank %d waits for %" PRIu64,
                   rank, (f >> 8) - 1, ctx->rank, (stamp >> 8) - 1);
        return COLL_ERR_TRANSPORT;
    }
    st = win_status(ctx, rank);
    if (st < 0) {
        return st;
    }
    if (arm) {
        win_arm(ctx, rank, gen);
    }
    return COLL_INPROGRESS;
}
