/* SPDX-License-Identifier: MIT */
/* UCX transport: context, worker, handles, progress and sleep (see ucx.h). */
#include "ucx.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "util.h"

#define UCX_HANDLE_HDR 8 /* {u32 magic, u32 address length} */

static int ucx_usable(const char **why_p)
{
    return 1; /* init says precisely why when UCX cannot start */
}

static int ucx_reachable(const coll_peer_info_t *self, const coll_peer_info_t *peer)
{
    return 1; /* reaches every peer, but is taken only when asked for (COLL_TRANSPORT=ucx) */
}

static void ucx_finalize(coll_tp_ctx_t *ctx)
{
    if (ctx == NULL) {
        return;
    }
    for (int r = 0; ctx->eps != NULL && r < ctx->nranks; r++) {
        if (ctx->eps[r] != NULL) {
            coll_ucx_ep_destroy(ctx->eps[r]);
        }
    }
    while (ctx->sfree != NULL) {
        coll_ucx_sreq_t *s = ctx->sfree;
        ctx->sfree         = s->next_free;
        coll_free(s);
    }
    if (ctx->worker != NULL) {
        ucp_worker_destroy(ctx->worker);
    }
    if (ctx->context != NULL) {
        ucp_cleanup(ctx->context);
    }
    if (ctx->wake_fd >= 0) {
        close(ctx->wake_fd);
    }
    coll_free(ctx->eps);
    coll_free(ctx);
}

static coll_result_t ucx_init(const coll_tp_init_args_t *args, coll_tp_ctx_t **ctx_p)
{
    ucp_config_t  *config;
    ucs_status_t   s;
    coll_tp_ctx_t *ctx = coll_calloc(1, sizeof(*ctx), "ucx context");
    if (ctx == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ctx->rank    = args->rank;
    ctx->nranks  = args->nranks;
    ctx->job_tag = args->job_tag;
    ctx->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ctx->eps     = coll_calloc((size_t)args->nranks, sizeof(*ctx->eps), "ucx endpoints");
    if (ctx->wake_fd < 0 || ctx->eps == NULL) {
        ucx_finalize(ctx);
        return COLL_ERR_NO_MEMORY;
    }
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
                           .features   = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                           .name       = "libcoll"};
    s                   = ucp_config_read(NULL, NULL, &config); /* UCX_* from the environment */
    if (s == UCS_OK) {
        s = ucp_init(&params, config, &ctx->context);
        ucp_config_release(config);
    }
    if (s != UCS_OK) {
        coll_error(UCX, "rank %d: cannot start UCX: %s (check UCX_TLS and UCX_NET_DEVICES)",
                   args->rank, ucs_status_string(s));
        ucx_finalize(ctx);
        return COLL_ERR_TRANSPORT;
    }
    /* every call reaches the transport under the communicator's lock */
    ucp_worker_params_t wp = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    s                      = ucp_worker_create(ctx->context, &wp, &ctx->worker);
    if (s == UCS_OK) {
        s = ucp_worker_get_efd(ctx->worker, &ctx->efd);
    }
    if (s == UCS_OK) {
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
            .id    = COLL_UCX_AM_ID,
            .flags = UCP_AM_FLAG_WHOLE_MSG,
            .cb    = coll_ucx_am_handler,
            .arg   = ctx};
        s = ucp_worker_set_am_recv_handler(ctx->worker, &hp);
    }
    if (s != UCS_OK) {
        coll_error(UCX, "rank %d: cannot create the UCX worker: %s", args->rank,
                   ucs_status_string(s));
        ucx_finalize(ctx);
        return COLL_ERR_TRANSPORT;
    }
    *ctx_p = ctx;
    return COLL_OK;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* little-endian hosts only, as the rest of the wire */
}

static coll_result_t ucx_listen(coll_tp_ctx_t *ctx, void *handle, size_t *len_p)
{
    ucp_address_t *addr;
    size_t         len;
    ucs_status_t   s = ucp_worker_get_address(ctx->worker, &addr, &len);
    if (s != UCS_OK) {
        coll_error(UCX, "rank %d: no UCX worker address: %s", ctx->rank, ucs_status_string(s));
        return COLL_ERR_TRANSPORT;
    }
    if (len > COLL_TP_HANDLE_MAX - UCX_HANDLE_HDR) {
        coll_error(UCX,
                   "rank %d: the UCX worker address takes %zu bytes, more than the %d a handle "
                   "holds: select fewer UCX transports (UCX_TLS, e.g. UCX_TLS=tcp,shm,self)",
                   ctx->rank, len, COLL_TP_HANDLE_MAX - UCX_HANDLE_HDR);
        ucp_worker_release_address(ctx->worker, addr);
        return COLL_ERR_UNSUPPORTED;
    }
    put32(handle, COLL_UCX_HANDLE_MAGIC);
    put32((uint8_t *)handle + 4, (uint32_t)len);
    memcpy((uint8_t *)handle + UCX_HANDLE_HDR, addr, len);
    *len_p = UCX_HANDLE_HDR + len;
    ucp_worker_release_address(ctx->worker, addr);
    coll_debug(UCX, "rank %d: worker address of %zu bytes", ctx->rank, len);
    return COLL_OK;
}

static coll_result_t ucx_connect_all(coll_tp_ctx_t *ctx, const int *peers, int npeers,
                                     const void *const *handles, double deadline,
                                     coll_tp_ep_t **eps_p)
{
    for (int i = 0; i < npeers; i++) {
        int p = peers[i];
        if (p < 0 || p >= ctx->nranks || p == ctx->rank || handles == NULL || handles[p] == NULL) {
            coll_error(UCX, "connect_all: peer %d is invalid or has no handle", p);
            return COLL_ERR_INVALID_ARG;
        }
        if (ctx->eps[p] == NULL) {
            COLL_CHECK(coll_ucx_ep_create(ctx, p, handles[p], &ctx->eps[p]));
        }
        eps_p[i] = &ctx->eps[p]->base;
    }
    /* UCX wires up lazily, on the first message; nothing to wait for here */
    (void)deadline;
    return COLL_OK;
}

static int ucx_progress(coll_tp_ctx_t *ctx)
{
    int moved = 0;
    while (ucp_worker_progress(ctx->worker) != 0 && moved < 64) {
        moved++;
    }
    return moved;
}

static void ucx_block(coll_tp_ctx_t *ctx, double timeout_s)
{
    uint64_t      count;
    struct pollfd pfd[2] = {{.fd = ctx->wake_fd, .events = POLLIN},
                            {.fd = ctx->efd, .events = POLLIN}};
    int           ms     = timeout_s <= 0                ? 0
                           : timeout_s >= INT_MAX / 1000 ? INT_MAX
                                                         : (int)ceil(timeout_s * 1e3);
    if (ucp_worker_arm(ctx->worker) == UCS_ERR_BUSY) {
        return; /* events are waiting: progress now */
    }
    if (poll(pfd, 2, ms) > 0 && (pfd[0].revents & POLLIN) != 0) {
        if (read(ctx->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN) {
            coll_debug(UCX, "read(eventfd) failed: %s", strerror(errno));
        }
    }
}

static void ucx_wake(coll_tp_ctx_t *ctx)
{
    uint64_t one = 1;
    ssize_t  n   = write(ctx->wake_fd, &one, sizeof(one));
    (void)n;
}

static void ucx_ep_close(coll_tp_ep_t *tep)
{
    coll_ucx_ep_t *ep       = (coll_ucx_ep_t *)tep;
    ep->ctx->eps[tep->peer] = NULL;
    coll_ucx_ep_destroy(ep);
}

const coll_transport_ops_t coll_tp_ucx_ops = {
    .abi         = COLL_TRANSPORT_ABI,
    .name        = "ucx",
    .desc        = "UCX (UCP active messages over UCX's own transports: UCX_TLS)",
    .caps        = COLL_TP_CAP_HOST_MEM,
    .usable      = ucx_usable,
    .init        = ucx_init,
    .finalize    = ucx_finalize,
    .reachable   = ucx_reachable,
    .listen      = ucx_listen,
    .connect_all = ucx_connect_all,
    .isend       = coll_ucx_isend,
    .irecv       = coll_ucx_irecv,
    .progress    = ucx_progress,
    .block       = ucx_block,
    .wake        = ucx_wake,
    .ep_close    = ucx_ep_close,
};
