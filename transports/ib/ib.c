/* SPDX-License-Identifier: MIT */
/* Verbs transport: device choice, protection domain, completion queue, the choice of connection
 * manager (COLL_IB_CM), endpoints and handles, progress and sleep. */
#include "config.h"

#include "ib.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <stdbool.h>
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

/* Is port of device d active? */
static bool ib_port_active(struct ibv_device *d, int port)
{
    struct ibv_context  *c = ibv_open_device(d);
    struct ibv_port_attr pa;
    bool                 active =
        c != NULL && ibv_query_port(c, (uint8_t)port, &pa) == 0 && pa.state == IBV_PORT_ACTIVE;
    if (c != NULL) {
        ibv_close_device(c);
    }
    return active;
}

/* COLL_IB_HCA, else the first device whose port is active (and has an IP interface, preferred:
 * rdma_cm needs one). ss gets that address, or family 0 when the device has none. */
static int ib_pick(char *dev, size_t devlen, struct sockaddr_storage *ss, const char **why_p)
{
    const char         *want = coll_param_str(COLL_P_IB_HCA);
    int                 port = (int)coll_param_int(COLL_P_IB_PORT), n = 0, found = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    *why_p                   = "no RDMA device (ibv_get_device_list found none)";
    for (int i = 0; list != NULL && i < n && found < 2; i++) {
        const char *name = ibv_get_device_name(list[i]);
        char        ifname[IF_NAMESIZE + 1];
        if (want != NULL && want[0] != '\0' && strcmp(want, name) != 0) {
            *why_p = "COLL_IB_HCA names no device here";
            continue;
        }
        if (!ib_port_active(list[i], port)) {
            *why_p = "no RDMA device with an active port";
            continue;
        }
        struct sockaddr_storage a = {0};
        bool ip = ib_netdev(name, port, ifname, sizeof(ifname)) && ib_if_addr(ifname, &a);
        if (found == 0 || ip) { /* the first active one, unless a later one has an address */
            snprintf(dev, devlen, "%s", name);
            *ss   = a;
            found = ip ? 2 : 1;
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
    coll_ib_gdr_fini(ctx);
    coll_ib_rndv_fini(ctx);
    while (ctx->sfree != NULL) {
        coll_ib_sreq_t *s = ctx->sfree;
        ctx->sfree        = s->next;
        coll_free(s);
    }
    coll_ib_cm_close(ctx);
    if (ctx->boot_fd >= 0) {
        close(ctx->boot_fd);
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
    if (ctx->verbs != NULL && ctx->cm == COLL_IB_CM_BOOTSTRAP) {
        ibv_close_device(ctx->verbs); /* with rdma_cm, the listening id owns the device */
    }
    if (ctx->wake_fd >= 0) {
        close(ctx->wake_fd);
    }
    coll_free(ctx->eps);
    coll_free(ctx->qtab);
    coll_free(ctx);
}

/* The device named devname, opened for the bootstrap path. */
static struct ibv_context *ib_open(const char *devname)
{
    int                 n    = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_context *c    = NULL;
    for (int i = 0; list != NULL && i < n && c == NULL; i++) {
        if (strcmp(ibv_get_device_name(list[i]), devname) == 0) {
            c = ibv_open_device(list[i]);
        }
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
    return c;
}

/* COLL_IB_CM: rdma_cm where it is built in and the device has an IP address (auto), else the
 * bootstrap path. Opens the device either way (ctx->verbs). */
static coll_result_t ib_cm_choose(coll_tp_ctx_t *ctx)
{
    const char *want = coll_param_str(COLL_P_IB_CM);
#ifdef HAVE_RDMACM
    bool rdmacm = strcmp(want, "bootstrap") != 0;
    if (rdmacm && ctx->ipaddr.ss_family == 0) {
        if (strcmp(want, "rdmacm") == 0) {
            coll_error(IB, "rank %d: COLL_IB_CM=rdmacm but device %s has no IP interface",
                       ctx->rank, ctx->devname);
            return COLL_ERR_UNSUPPORTED;
        }
        rdmacm = false;
    }
    if (rdmacm) {
        bool          required = strcmp(want, "rdmacm") == 0;
        coll_result_t st       = coll_ib_cm_open(ctx, required);
        if (st == COLL_OK || required) {
            return st;
        }
    }
#else
    if (strcmp(want, "rdmacm") == 0) {
        coll_error(IB, "rank %d: COLL_IB_CM=rdmacm but libcoll was built without librdmacm",
                   ctx->rank);
        return COLL_ERR_UNSUPPORTED;
    }
#endif
    ctx->cm    = COLL_IB_CM_BOOTSTRAP;
    ctx->verbs = ib_open(ctx->devname);
    if (ctx->verbs == NULL) {
        coll_error(IB, "rank %d: cannot open RDMA device %s: %s", ctx->rank, ctx->devname,
                   strerror(errno));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

/* Protection domain, completion channel and CQ on ctx->verbs. */
static coll_result_t ib_cq_create(coll_tp_ctx_t *ctx)
{
    int cqe   = ctx->nranks * ctx->nqps * (3 * ctx->slots + 32);
    ctx->pd   = ibv_alloc_pd(ctx->verbs);
    ctx->chan = ibv_create_comp_channel(ctx->verbs);
    ctx->cq   = ctx->chan != NULL ? ibv_create_cq(ctx->verbs, cqe, NULL, ctx->chan, 0) : NULL;
    if (ctx->pd == NULL || ctx->cq == NULL) {
        coll_error(IB, "rank %d: cannot create a protection domain or a %d-entry CQ on %s",
                   ctx->rank, cqe, ctx->devname);
        return COLL_ERR_TRANSPORT;
    }
    fcntl(ctx->chan->fd, F_SETFL, fcntl(ctx->chan->fd, F_GETFL) | O_NONBLOCK);
    return COLL_OK;
}

static coll_result_t ib_params_check(const coll_tp_ctx_t *ctx)
{
    if (ctx->nqps < 1 || ctx->nqps > COLL_IB_MAX_QPS || ctx->slots < 2 || ctx->slots > 4096 ||
        ctx->slot_size < 4096 || ctx->slot_size > (64u << 20)) {
        coll_error(IB,
                   "COLL_IB_NQPS=%d (1..%d), COLL_IB_SLOTS=%d (2..4096), "
                   "COLL_IB_SLOT_SIZE=%zu (4k..64m): out of range",
                   ctx->nqps, COLL_IB_MAX_QPS, ctx->slots, ctx->slot_size);
        return COLL_ERR_INVALID_ARG;
    }
    return COLL_OK;
}

static coll_result_t ib_init(const coll_tp_init_args_t *args, coll_tp_ctx_t **ctx_p)
{
    const char    *why;
    coll_result_t  st;
    coll_tp_ctx_t *ctx = coll_calloc(1, sizeof(*ctx), "ib context");
    if (ctx == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ctx->rank       = args->rank;
    ctx->nranks     = args->nranks;
    ctx->job_tag    = args->job_tag;
    ctx->auth_key   = args->auth_key;
    ctx->port       = (int)coll_param_int(COLL_P_IB_PORT);
    ctx->nqps       = (int)coll_param_int(COLL_P_IB_NQPS);
    ctx->slots      = (int)coll_param_int(COLL_P_IB_SLOTS);
    ctx->slot_size  = coll_param_size(COLL_P_IB_SLOT_SIZE);
    ctx->max_inline = 256;
    ctx->boot_fd    = -1;
    ctx->wake_fd    = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ctx->eps        = coll_calloc((size_t)args->nranks, sizeof(*ctx->eps), "ib endpoints");
    if (ctx->wake_fd < 0 || ctx->eps == NULL) {
        ib_finalize(ctx);
        return COLL_ERR_NO_MEMORY;
    }
    COLL_CHECK_GOTO(ib_params_check(ctx), st, err);
    if (!ib_pick(ctx->devname, sizeof(ctx->devname), &ctx->ipaddr, &why)) {
        coll_error(IB, "rank %d: %s", args->rank, why);
        st = COLL_ERR_UNSUPPORTED;
        goto err;
    }
    COLL_CHECK_GOTO(ib_cm_choose(ctx), st, err);
    COLL_CHECK_GOTO(coll_ib_gid_choose(ctx), st, err);
    COLL_CHECK_GOTO(ib_cq_create(ctx), st, err);
    COLL_CHECK_GOTO(coll_ib_rndv_init(ctx), st, err);
    coll_ib_gdr_init(ctx);
    coll_info(IB,
              "rank %d: device %s, QPs by %s, %d QPs per peer, %d slots of %zu bytes, "
              "rendezvous from %zu bytes",
              args->rank, ctx->devname, ctx->cm == COLL_IB_CM_RDMACM ? "rdma_cm" : "bootstrap",
              ctx->nqps, ctx->slots, ctx->slot_size, ctx->rndv_min);
    *ctx_p = ctx;
    return COLL_OK;
err:
    ib_finalize(ctx);
    return st;
}

/* An endpoint (and its QP slots, not yet created) for every peer, whose handles are checked
 * first: a peer that connects another way fails here on both sides, not at the deadline. */
coll_result_t coll_ib_eps_create(coll_tp_ctx_t *ctx, const int *peers, int npeers,
                                 const void *const *handles, coll_tp_ep_t **eps_p)
{
    for (int i = 0; i < npeers; i++) {
        int                     p = peers[i];
        coll_ib_handle_t        h;
        struct sockaddr_storage ss;
        if (p < 0 || p >= ctx->nranks || p == ctx->rank || handles == NULL || handles[p] == NULL) {
            coll_error(IB, "connect_all: peer %d is invalid or has no handle", p);
            return COLL_ERR_INVALID_ARG;
        }
        COLL_CHECK(coll_ib_handle_get(ctx, handles[p], p, &h, &ss));
    }
    for (int i = 0; i < npeers; i++) {
        int           p  = peers[i];
        coll_ib_ep_t *ep = coll_calloc(1, sizeof(*ep), "ib endpoint");
        if (ep == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
        ep->base.ops  = &coll_tp_ib_ops;
        ep->base.peer = p;
        ep->ctx       = ctx;
        ep->sock      = -1;
        coll_tp_match_init(&ep->match, p, "ib");
        for (int k = 0; k < ctx->nqps; k++) {
            ep->qps[k].ep    = ep;
            ep->qps[k].index = k;
        }
        ctx->eps[p] = ep;
        eps_p[i]    = &ep->base;
    }
    return COLL_OK;
}

/* Rank peer's listen handle, checked, and the address in it. */
coll_result_t coll_ib_handle_get(coll_tp_ctx_t *ctx, const void *handle, int peer,
                                 coll_ib_handle_t *h_p, struct sockaddr_storage *ss_p)
{
    static const char *cms[] = {"?", "rdmacm", "bootstrap"};
    coll_ib_handle_t   h;
    memcpy(&h, handle, sizeof(h));
    if (h.magic != COLL_IB_HANDLE_MAGIC || (h.family != AF_INET && h.family != AF_INET6)) {
        coll_error(IB, "the listen handle of rank %d is not an ib handle", peer);
        return COLL_ERR_INVALID_ARG;
    }
    if (h.cm != (uint32_t)ctx->cm) {
        coll_error(IB, "rank %d connects its QPs by %s, rank %d by %s: set COLL_IB_CM alike",
                   ctx->rank, cms[ctx->cm], peer, h.cm < 3 ? cms[h.cm] : "?");
        return COLL_ERR_INVALID_USAGE;
    }
    memset(ss_p, 0, sizeof(*ss_p));
    if (h.family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss_p;
        s4->sin_family         = AF_INET;
        s4->sin_port           = h.port;
        memcpy(&s4->sin_addr, h.addr, 4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss_p;
        s6->sin6_family         = AF_INET6;
        s6->sin6_port           = h.port;
        memcpy(&s6->sin6_addr, h.addr, 16);
    }
    *h_p = h;
    return COLL_OK;
}

static int ib_progress(coll_tp_ctx_t *ctx)
{
    if (ctx->cm == COLL_IB_CM_RDMACM) {
        coll_ib_cm_events(ctx);
    } else if (coll_time_s() >= ctx->next_liveness) {
        coll_ib_boot_liveness(ctx); /* a syscall: not on every call */
        ctx->next_liveness = coll_time_s() + 0.05;
    }
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
                            {.fd = -1, .events = POLLIN}};
#ifdef HAVE_RDMACM
    if (ctx->cm == COLL_IB_CM_RDMACM) {
        pfd[2].fd = ctx->ech->fd;
    }
#endif
    if (ctx->cm == COLL_IB_CM_BOOTSTRAP) {
        /* a dead peer shows only as the end of its socket: sleep in slices to look at them */
        ms = ms > 200 ? 200 : ms;
    }
    if (poll(pfd, 3, ms) <= 0) {
        if (ctx->cm == COLL_IB_CM_BOOTSTRAP) {
            coll_ib_boot_liveness(ctx);
        }
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
    if (ctx->cm == COLL_IB_CM_RDMACM) {
        return coll_ib_cm_listen(ctx, handle, len_p);
    }
    return coll_ib_boot_listen(ctx, handle, len_p);
}

static coll_result_t ib_connect_all(coll_tp_ctx_t *ctx, const int *peers, int npeers,
                                    const void *const *handles, double deadline,
                                    coll_tp_ep_t **eps_p)
{
    COLL_CHECK(coll_ib_eps_create(ctx, peers, npeers, handles, eps_p));
    if (ctx->cm == COLL_IB_CM_RDMACM) {
        return coll_ib_cm_connect_all(ctx, peers, npeers, handles, deadline);
    }
    return coll_ib_boot_connect_all(ctx, peers, npeers, handles, deadline);
}

static uint32_t ib_ep_caps(coll_tp_ep_t *tep)
{
    return __atomic_load_n(&((coll_ib_ep_t *)tep)->ctx->gdr, __ATOMIC_RELAXED)
               ? COLL_TP_CAP_CUDA_MEM
               : 0;
}

static void ib_ep_close(coll_tp_ep_t *tep)
{
    coll_ib_ep_t *ep        = (coll_ib_ep_t *)tep;
    ep->ctx->eps[tep->peer] = NULL;
    coll_ib_ep_destroy(ep);
}

const coll_transport_ops_t coll_tp_ib_ops = {
    .abi  = COLL_TRANSPORT_ABI,
    .name = "ib",
    .desc = "InfiniBand/RoCE verbs: RC QPs by rdma_cm or bootstrap, RDMA WRITE with immediate and "
            "credits, RDMA READ rendezvous from registered (cached) user buffers, GPUDirect RDMA",
    .caps = COLL_TP_CAP_HOST_MEM | COLL_TP_CAP_RDMA | COLL_TP_CAP_CUDA_MEM,
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
    .ep_caps     = ib_ep_caps,
};
