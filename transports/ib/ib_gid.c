/* SPDX-License-Identifier: MIT */
/*
 * The GID of the verbs transport's port: COLL_IB_GID_INDEX, or (-1) the RoCE v2 GID that holds an
 * IPv4-mapped address (::ffff:a.b.c.d), else any RoCE v2 GID, else index 0 (InfiniBand ports
 * address by LID; their GID 0 is the port GID). The bootstrap path puts it in every address
 * vector; rdma_cm derives its own from the IP address, so there the choice is only checked and
 * logged. Also records the port's LID and active MTU.
 */
#include "config.h"

#include "ib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "param.h"

enum { GID_EMPTY = -1, GID_IB = 0, GID_ROCE_V1 = 1, GID_ROCE_V2 = 2 };

#if HAVE_DECL_IBV_QUERY_GID_EX
/* Entry i of the port's table and its type; GID_EMPTY when the entry is unused. */
static int gid_read(struct ibv_context *c, int port, int i, union ibv_gid *gid)
{
    struct ibv_gid_entry e;
    if (ibv_query_gid_ex(c, (uint32_t)port, (uint32_t)i, &e, 0) != 0) {
        return GID_EMPTY;
    }
    *gid = e.gid;
    return e.gid_type == IBV_GID_TYPE_ROCE_V2   ? GID_ROCE_V2
           : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GID_ROCE_V1
                                                : GID_IB;
}
#else
/* Older rdma-core: the GID from verbs, its type from sysfs ("RoCE v2", "IB/RoCE v1"). */
static int gid_read(struct ibv_context *c, int port, int i, union ibv_gid *gid)
{
    static const union ibv_gid zero;
    char                       path[256], type[32] = "";
    if (ibv_query_gid(c, (uint8_t)port, i, gid) != 0 || memcmp(gid, &zero, sizeof(zero)) == 0) {
        return GID_EMPTY;
    }
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d",
             ibv_get_device_name(c->device), port, i);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(type, sizeof(type), f) == NULL) {
            type[0] = '\0';
        }
        fclose(f);
    }
    return strstr(type, "v2") != NULL ? GID_ROCE_V2 : GID_IB;
}
#endif

static int gid_is_v4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static const char *gid_type_str(int type)
{
    return type == GID_ROCE_V2 ? "RoCE v2" : type == GID_ROCE_V1 ? "RoCE v1" : "IB";
}

/* The best entry of a table of n: v2 + IPv4-mapped (3) > v2 (2) > index 0 (1). */
static int gid_auto(struct ibv_context *c, int port, int n)
{
    int best = 0, best_score = 1;
    for (int i = 0; i < n && best_score < 3; i++) { /* tables can be long (rxe: 1024) */
        union ibv_gid g;
        int           type  = gid_read(c, port, i, &g);
        int           score = type != GID_ROCE_V2 ? 0 : gid_is_v4_mapped(&g) ? 3 : 2;
        if (score > best_score) {
            best       = i;
            best_score = score;
        }
    }
    return best;
}

/* Logs why index want is no GID of the port (n entries): out of range or empty. */
static coll_result_t gid_bad(struct coll_tp_ctx *ctx, int want, int n, const char *what)
{
    int used = 0;
    for (int i = 0; i < n; i++) {
        union ibv_gid g;
        used += gid_read(ctx->verbs, ctx->port, i, &g) != GID_EMPTY;
    }
    coll_error(IB,
               "rank %d: COLL_IB_GID_INDEX=%d is not a GID of device %s port %d: %s (the port "
               "has %d GIDs in use in a table of %d; -1 chooses one)",
               ctx->rank, want, ctx->devname, ctx->port, what, used, n);
    return COLL_ERR_INVALID_ARG;
}

coll_result_t coll_ib_gid_choose(struct coll_tp_ctx *ctx)
{
    struct ibv_port_attr pa;
    int                  want = (int)coll_param_int(COLL_P_IB_GID_INDEX);
    if (ibv_query_port(ctx->verbs, (uint8_t)ctx->port, &pa) != 0) {
        coll_error(IB, "rank %d: cannot query port %d of %s: %s", ctx->rank, ctx->port,
                   ctx->devname, strerror(errno));
        return COLL_ERR_TRANSPORT;
    }
    int n          = pa.gid_tbl_len;
    ctx->lid       = pa.lid;
    ctx->mtu       = (uint8_t)pa.active_mtu;
    ctx->is_global = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (want < -1 || want >= n) {
        return gid_bad(ctx, want, n, "out of range");
    }
    int i    = want >= 0 ? want : gid_auto(ctx->verbs, ctx->port, n);
    int type = gid_read(ctx->verbs, ctx->port, i, &ctx->gid);
    if (type == GID_EMPTY && want >= 0) {
        return gid_bad(ctx, want, n, "an empty entry");
    }
    if (type == GID_EMPTY && ctx->is_global) {
        coll_error(IB, "rank %d: device %s port %d has no GID (RoCE needs one: an IP address?)",
                   ctx->rank, ctx->devname, ctx->port);
        return COLL_ERR_UNSUPPORTED;
    }
    if (i > UINT8_MAX && ctx->is_global) { /* ibv_global_route's sgid_index is 8 bits */
        coll_error(IB,
                   "rank %d: COLL_IB_GID_INDEX=%d: device %s port %d: an address vector takes "
                   "GID indices 0..255 only",
                   ctx->rank, i, ctx->devname, ctx->port);
        return COLL_ERR_INVALID_ARG;
    }
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, ctx->gid.raw, text, sizeof(text));
    ctx->gid_index = i;
    coll_info(IB, "rank %d: device %s port %d: GID %d of %d (%s, %s)%s", ctx->rank, ctx->devname,
              ctx->port, i, n, gid_type_str(type), text,
              want >= 0 ? ", set by COLL_IB_GID_INDEX" : "");
    return COLL_OK;
}
