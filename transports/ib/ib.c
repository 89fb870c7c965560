/* SPDX-License-Identifier: MIT */
/* Verbs transport: device choice, protection domain, completion queue, progress and sleep. */
#include "ib.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

/* The network interface of device dev's port (RoCE), from sysfs; 0 when there is none. */
static int ib_netdev(const char *dev, int port, char *ifname, size_t len)
{
    char path[256];
    for (int i = 0; i < 16; i++) {
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", dev,
                 port, i);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        int ok = fgets(ifname, (int)len, f) != NULL;
        fclose(f);
        if (ok) {
            ifname[strcspn(ifname, "\n")] = '\0';
            return ifname[0] != '\0';
        }
    }
    return 0;
}

/* The first IPv4 (else IPv6) address of interface ifname. */
static int ib_if_addr(const char *ifname, struct sockaddr_storage *ss)
{
    struct ifaddrs *ifs, *i;
    int             found = 0;
    if (getifaddrs(&ifs) != 0) {
        return 0;
    }
    for (int fam = 0; fam < 2 && !found; fam++) {
        for (i = ifs; i != NULL && !found; i = i->ifa_next) {
            if (i->ifa_addr != NULL && strcmp(i->ifa_name, ifname) == 0 &&
                i->ifa_addr->sa_family == (fam == 0 ? AF_INET : AF_INET6)) {
                memcpy(ss, i->ifa_addr,
                       fam == 0 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
                found = 1;
            }
        }
    }
    freeifaddrs(ifs);
    return found;
}

/* COLL_IB_HCA, else the first device whose port is active and has an IP interface. */
static int ib_pick(char *dev, size_t devlen, struct sockaddr_storage *ss, const char **why_p)
{
    const char         *want = coll_param_str(COLL_P_IB_HCA);
    int                 port = (int)coll_param_int(COLL_P_IB_PORT), n = 0, found = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    *why_p                   = "no RDMA device (ibv_get_device_list found none)";
    for (int i = 0; list != NULL && i < n && !found; i++) {
        const char *name = ibv_get_device_name(list[i]);
        char        ifname[IF_NAMESIZE + 1];
        if (want != NULL && want[0] != '\0' && strcmp(want, name) != 0) {
            *why_p = "COLL_IB_HCA names no device here";
            continue;
        }
        struct ibv_context  *c = ibv_open_device(list[i]);
        struct ibv_port_attr pa;
        int                  active =
            c != NULL && ibv_query_port(c, (uint8_t)port, &pa) == 0 && pa.state == IBV_PORT_ACTIVE;
        if (c != NULL) {
            ibv_close_device(c);
        }
        if (!active) {
            *why_p = "no RDMA device with an active port";
        } else if (!ib_netdev(name, port, ifname, sizeof(ifname)) || !ib_if_addr(ifname, ss)) {
            *why_p = "the RDMA device has no IP interface (rdma_cm needs one)";
        } else {
            snprintf(dev, devlen, "%s", name);
            found = 1;
        }
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
    return found;
}

static int ib_usable(const char **why_p)
{
    char                    dev[64];
    struct sockaddr_storage ss;
    return ib_pick(dev, sizeof(dev), &ss, why_p);
}

static int ib_reachable(const coll_peer_info_t *self, const coll_peer_info_t *peer)
{
    return 15; /* above tcp across hosts; on one host shm scores higher */
}

static void ib_finalize(coll_tp_ctx_t *ctx)
{
    if (ctx == NULL) {
        return;
    }
    for (int r = 0; ctx->eps != NULL && r < ctx->nranks; r++) {
        if (ctx->eps[r] != NULL) {
            coll_ib_ep_destroy(ctx->eps[r]);
        }
    }
    while (ctx->sfree != NULL) {
        coll_ib_sreq_t *s = ctx->sfree;
        ctx->sfree        = s->next;
        coll_free(s);
    }
    if (ctx->listen_id != NULL) {
        rdma_destroy_id(ctx->listen_id);
    }
    if (ctx->cq != NULL) {
        ibv_destroy_cq(ctx->cq);
    }
    if (ctx->chan != NULL) {
        ibv_destroy_comp_channel(ctx->chan);
    }
    if (ctx->pd != NULL) {
        ibv_dealloc_pd(ctx->pd);
    }
    if (ctx->ech != NULL) {
        rdma_destroy_event_channel(ctx->ech);
    }
    if (ctx->wake_fd >= 0) {
        close(ctx->wake_fd);
    }
    coll_free(ctx->eps);
    coll_free(ctx->qtab);
    coll_free(ctx);
}

static coll_result_t ib_init(const coll_tp_init_args_t *args, coll_tp_ctx_t **ctx_p)
{
    struct sockaddr_storage ss = {0};
    const char             *why;
    coll_tp_ctx_t          *ctx = coll_calloc(1, sizeof(*ctx), "ib context");
    if (ctx == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ctx->rank       = args->rank;
    ctx->nranks     = args->nranks;
    ctx->job_tag    = args->job_tag;
    ctx->nqps       = (int)coll_param_int(COLL_P_IB_NQPS);
    ctx->slots      = (int)coll_param_int(COLL_P_IB_SLOTS);
    ctx->slot_size  = coll_param_size(COLL_P_IB_SLOT_SIZE);
    ctx->max_inline = 256;
    ctx->wake_fd    = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ctx->eps        = coll_calloc((size_t)args->nranks, sizeof(*ctx->eps), "ib endpoints");
    if (ctx->wake_fd < 0 || ctx->eps == NULL) {
        ib_finalize(ctx);
        return COLL_ERR_NO_MEMORY;
    }
    if (ctx->nqps < 1 || ctx->nqps > COLL_IB_MAX_QPS || ctx->slots < 2 || ctx->slots > 4096 ||
        ctx->slot_size < 4096 || ctx->slot_size > (64u << 20)) {
        coll_error(IB,
                   "COLL_IB_NQPS=%d (1..%d), COLL_IB_SLOTS=%d (2..4096), "
                   "COLL_IB_SLOT_SIZE=%zu (4k..64m): out of range",
                   ctx->nqps, COLL_IB_MAX_QPS, ctx->slots, ctx->slot_size);
        ib_finalize(ctx);
        return COLL_ERR_INVALID_ARG;
    }
    if (!ib_pick(ctx->devname, sizeof(ctx->devname), &ss, &why)) {
        coll_error(IB, "rank %d: %s", args->rank, why);
        ib_finalize(ctx);
        return COLL_ERR_UNSUPPORTED;
    }
    ctx->ech = rdma_create_event_channel();
    if (ctx->ech == NULL || rdma_create_id(ctx->ech, &ctx->listen_id, ctx, RDMA_PS_TCP) != 0 ||
        rdma_bind_addr(ctx->listen_id, (struct sockaddr *)&ss) != 0 ||
        rdma_listen(ctx->listen_id, 128) != 0 || ctx->listen_id->verbs == NULL) {
        coll_error(IB, "rank %d: cannot listen for RDMA connections on %s: %s", args->rank,
                   ctx->devname, strerror(errno));
        ib_finalize(ctx);
        return COLL_ERR_TRANSPORT;
    }
    fcntl(ctx->ech->fd, F_SETFL, fcntl(ctx->ech->fd, F_GETFL) | O_NONBLOCK);
    ctx->verbs = ctx->listen_id->verbs;
    int cqe    = args->nranks * ctx->nqps * (3 * ctx->slots + 32);
    ctx->pd    = ibv_alloc_pd(ctx->verbs);
    ctx->chan  = ibv_create_comp_channel(ctx->verbs);
    ctx->cq    = ctx->chan != NULL ? ibv_create_cq(ctx->verbs, cqe, NULL, ctx->chan, 0) : NULL;
    if (ctx->pd == NULL || ctx->cq == NULL) {
        coll_error(IB, "rank %d: cannot create a protection domain or a %d-entry CQ on %s",
                   args->rank, cqe, ctx->devname);
        ib_finalize(ctx);
        return COLL_ERR_TRANSPORT;
    }
    fcntl(ctx->chan->fd, F_SETFL, fcntl(ctx->chan->fd, F_GETFL) | O_NONBLOCK);
    coll_info(IB, "rank %d: device %s, %d QPs per peer, %d slots of %zu bytes", args->rank,
              ctx->devname, ctx->nqps, ctx->slots, ctx->slot_size);
    *ctx_p = ctx;
    return COLL_OK;
}

coll_result_t coll_ib_create_qp(coll_ib_qp_t *q, struct rdma_cm_id *id)
{
    coll_tp_ctx_t          *ctx = q->ep->ctx;
    struct ibv_qp_init_attr a   = {.send_cq = ctx->cq,
                                   .recv_cq = ctx->cq,
                                   .qp_type = IBV_QPT_RC,
                                   .cap     = {.max_send_wr     = (uint32_t)ctx->slots + 16,
                                               .max_recv_wr     = 2 * (uint32_t)ctx->slots + 16,
                                               .max_send_sge    = 1,
                                               .max_recv_sge    = 1,
                                               .max_inline_data = (uint32_t)ctx->max_inline}};
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

static int ib_progress(coll_tp_ctx_t *ctx)
{
    coll_ib_cm_events(ctx);
    return coll_ib_poll_cq(ctx);
}

static void ib_block(coll_tp_ctx_t *ctx, double timeout_s)
{
    struct ibv_cq *cq;
    void          *cqctx;
    uint64_t       count;
    int            ms = timeout_s <= 0                ? 0
                        : timeout_s >= INT_MAX / 1000 ? INT_MAX
                                                      : (int)ceil(timeout_s * 1e3);
    if (ibv_req_notify_cq(ctx->cq, 0) != 0 || coll_ib_poll_cq(ctx) > 0) {
        return; /* completions arrived before the notification was armed */
    }
    struct pollfd pfd[3] = {{.fd = ctx->wake_fd, .events = POLLIN},
                            {.fd = ctx->chan->fd, .events = POLLIN},
                            {.fd = ctx->ech->fd, .events = POLLIN}};
    if (poll(pfd, 3, ms) <= 0) {
        return;
    }
    if (pfd[0].revents & POLLIN) {
        ssize_t n = read(ctx->wake_fd, &count, sizeof(count));
        (void)n;
    }
    if ((pfd[1].revents & POLLIN) && ibv_get_cq_event(ctx->chan, &cq, &cqctx) == 0) {
        ibv_ack_cq_events(cq, 1);
    }
}

static void ib_wake(coll_tp_ctx_t *ctx)
{
    uint64_t one = 1;
    ssize_t  n   = write(ctx->wake_fd, &one, sizeof(one));
    (void)n;
}

static coll_result_t ib_listen(coll_tp_ctx_t *ctx, void *handle, size_t *len_p)
{
    return coll_ib_listen(ctx, handle, len_p);
}

static coll_result_t ib_connect_all(coll_tp_ctx_t *ctx, const int *peers, int npeers,
                                    const void *const *handles, double deadline,
                                    coll_tp_ep_t **eps_p)
{
    return coll_ib_connect_all(ctx, peers, npeers, handles, deadline, eps_p);
}

static void ib_ep_close(coll_tp_ep_t *tep)
{
    coll_ib_ep_t *ep        = (coll_ib_ep_t *)tep;
    ep->ctx->eps[tep->peer] = NULL;
    coll_ib_ep_destroy(ep);
}

const coll_transport_ops_t coll_tp_ib_ops = {
    .abi         = COLL_TRANSPORT_ABI,
    .name        = "ib",
    .desc        = "InfiniBand/RoCE verbs: RC QPs by rdma_cm, RDMA WRITE with immediate, credits",
    .caps        = COLL_TP_CAP_HOST_MEM | COLL_TP_CAP_RDMA,
    .usable      = ib_usable,
    .init        = ib_init,
    .finalize    = ib_finalize,
    .reachable   = ib_reachable,
    .listen      = ib_listen,
    .connect_all = ib_connect_all,
    .isend       = coll_ib_isend,
    .irecv       = coll_ib_irecv,
    .progress    = ib_progress,
    .block       = ib_block,
    .wake        = ib_wake,
    .ep_close    = ib_ep_close,
};
