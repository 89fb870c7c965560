/* SPDX-License-Identifier: MIT */
/*
 * GPUDirect RDMA for the verbs transport: CUDA device buffers registered with the NIC, so that a
 * rendezvous moves them between GPUs with no copy through host memory. Registration takes a
 * dma-buf of the allocation (cuMemGetHandleForAddressRange, ibv_reg_dmabuf_mr: Linux 5.12+ and
 * a provider that imports dma-bufs), else the device pointer itself where the nvidia_peermem
 * module lets ibv_reg_mr pin GPU memory. Device registrations are not cached: the memory hooks
 * that keep the cache right see munmap, not cudaFree.
 *
 * What the context can do is decided at init without touching CUDA (loading the driver in a
 * process that made no context would break CUDA in the processes it forks): the provider's
 * dma-buf import is probed with an invalid descriptor (EOPNOTSUPP: none), the peer-memory module
 * by its sysfs entry. The first registration then says whether the driver and the device agree.
 */
#include "config.h"

#include "ib.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "cuda/devmem.h"
#include "error.h"
#include "log.h"
#include "param.h"

#if HAVE_CUDA
#define GDR_BUILT 1
#else
#define GDR_BUILT 0
#endif

static int gdr_peermem_loaded(void)
{
    static const char *const paths[] = {"/sys/kernel/mm/memory_peers/nv_mem/version",
                                        "/sys/module/nvidia_peermem/version",
                                        "/sys/module/nv_peer_mem/version"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (access(paths[i], F_OK) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Does the provider import dma-bufs? An invalid descriptor fails with EBADF (or EINVAL) where
 * it does, with EOPNOTSUPP / EPROTONOSUPPORT where it does not. */
static int gdr_dmabuf_import(struct coll_tp_ctx *ctx)
{
#if HAVE_DECL_IBV_REG_DMABUF_MR
    errno              = 0;
    struct ibv_mr *mr  = ibv_reg_dmabuf_mr(ctx->pd, 0, 0, 0, -1, 0);
    int            err = errno;
    if (mr != NULL) { /* cannot be, but then it surely imports them */
        ibv_dereg_mr(mr);
        return 1;
    }
    return err != EOPNOTSUPP && err != EPROTONOSUPPORT && err != ENOSYS && err != 0;
#else
    (void)ctx;
    return 0;
#endif
}

void coll_ib_gdr_init(struct coll_tp_ctx *ctx)
{
    int         mode = coll_param_enum(COLL_P_IB_GDR);
    const char *why  = NULL;

    ctx->gdr        = 0;
    ctx->gdr_dmabuf = 0;
    if (mode == COLL_GDR_OFF) {
        why = "COLL_IB_GDR=0";
    } else if (mode == COLL_GDR_HOST) { /* host memory standing in, for tests: nothing to probe */
        ctx->gdr = 1;
        coll_info(IB,
                  "rank %d: GPUDirect RDMA on %s: host memory standing in for device memory "
                  "(COLL_IB_GDR=host)",
                  ctx->rank, ctx->devname);
        return;
    } else if (!GDR_BUILT) {
        why = "libcoll was built without CUDA";
    } else if (ctx->rndv_min == 0 || ctx->rd == NULL) {
        why = "rendezvous is off (COLL_IB_RNDV_MIN=0, or the device takes no RDMA READ)";
    } else {
        ctx->gdr_dmabuf  = gdr_dmabuf_import(ctx);
        ctx->gdr_peermem = gdr_peermem_loaded();
        ctx->gdr         = ctx->gdr_dmabuf || ctx->gdr_peermem;
    }
    if (!ctx->gdr && why == NULL) {
        why = "the provider imports no dma-buf and nvidia_peermem is not loaded";
    }
    if (ctx->gdr) {
        coll_info(IB, "rank %d: GPUDirect RDMA on %s: device memory registered %s", ctx->rank,
                  ctx->devname,
                  ctx->gdr_dmabuf && ctx->gdr_peermem ? "through dma-bufs, else nvidia_peermem"
                  : ctx->gdr_dmabuf                   ? "through dma-bufs"
                                                      : "by nvidia_peermem");
    } else if (mode == COLL_GDR_ON) {
        coll_warn(IB,
                  "rank %d: COLL_IB_GDR=1 but no GPUDirect RDMA on %s: %s; device buffers "
                  "are staged through host memory",
                  ctx->rank, ctx->devname, why);
    } else {
        coll_info(IB, "rank %d: no GPUDirect RDMA on %s: %s", ctx->rank, ctx->devname, why);
    }
}

/* A dma-buf registration of the pages around [addr, addr + len), or NULL (last error set; its
 * code COLL_ERR_INVALID_ARG when only this allocation cannot be exported). */
static struct ibv_mr *gdr_reg_dmabuf(struct coll_tp_ctx *ctx, const coll_devmem_t *dm, void *addr,
                                     size_t len, int access)
{
#if HAVE_DECL_IBV_REG_DMABUF_MR
    int           fd;
    uintptr_t     base;
    size_t        blen;
    coll_result_t st = coll_cuda_dmabuf_get(dm, addr, len, &fd, &base, &blen);
    if (st != COLL_OK) {
        ctx->gdr_last = st;
        return NULL;
    }
    /* the whole exported range at its own virtual addresses (iova = base): the rendezvous
     * names buffers by address */
    struct ibv_mr *mr  = ibv_reg_dmabuf_mr(ctx->pd, 0, blen, (uint64_t)base, fd, access);
    int            err = errno;
    close(fd); /* the registration holds its own reference */
    if (mr == NULL) {
        ctx->gdr_last = COLL_ERR_TRANSPORT;
        coll_set_last_error(COLL_ERR_TRANSPORT, "ibv_reg_dmabuf_mr of %zu device bytes: %s", blen,
                            strerror(err));
    }
    return mr;
#else
    (void)ctx;
    (void)dm;
    (void)addr;
    (void)len;
    (void)access;
    ctx->gdr_last = COLL_ERR_UNSUPPORTED;
    coll_set_last_error(COLL_ERR_UNSUPPORTED, "built without ibv_reg_dmabuf_mr");
    return NULL;
#endif
}

struct ibv_mr *coll_ib_gdr_reg(struct coll_tp_ctx *ctx, const coll_devmem_t *dm, void *addr,
                               size_t len, int access)
{
    struct ibv_mr *mr = NULL;
    if (dm->device >= 0 && ctx->gdr_dmabuf) {
        mr = gdr_reg_dmabuf(ctx, dm, addr, len, access);
        if (mr == NULL && ctx->gdr_last == COLL_ERR_UNSUPPORTED && ctx->gdr_peermem) {
            ctx->gdr_dmabuf = 0; /* the GPU driver exports none: nvidia_peermem from now on */
        }
    }
    /* plain ibv_reg_mr: host memory standing in (COLL_IB_GDR=host), or device pointers pinned
     * by nvidia_peermem (without dma-bufs, or where this allocation exports none) */
    if (mr == NULL && (dm->device < 0 || ctx->gdr_peermem)) {
        if ((mr = ibv_reg_mr(ctx->pd, addr, len, access)) == NULL) {
            ctx->gdr_last = COLL_ERR_TRANSPORT;
            coll_set_last_error(COLL_ERR_TRANSPORT, "ibv_reg_mr of %zu %s bytes: %s", len,
                                dm->device < 0 ? "host" : "device", strerror(errno));
        }
    }
    if (mr != NULL) {
        ctx->gdr_regs++;
        return mr;
    }
    ctx->gdr_failures++;
    if (ctx->gdr_last != COLL_ERR_INVALID_ARG) {
        ctx->gdr_hard_failures++;
    }
    /* Never worked, and not for one allocation's sake (the GPU driver exports nothing, or three
     * registrations failed): the driver or the device does not take part. Later calls stage
     * (each rank decides for itself; the wire is the same); those already under way copy. */
    if (dm->device >= 0 && ctx->gdr_regs == 0 &&
        ((ctx->gdr_last == COLL_ERR_UNSUPPORTED && !ctx->gdr_peermem) ||
         ctx->gdr_hard_failures >= 3)) {
        if (__atomic_exchange_n(&ctx->gdr, 0, __ATOMIC_RELAXED)) { /* ep_caps reads it */
            coll_warn(IB,
                      "rank %d: device memory cannot be registered on %s (%s): GPUDirect RDMA "
                      "off for this communicator, later calls on device memory are staged",
                      ctx->rank, ctx->devname, coll_last_error());
        }
    } else if (ctx->gdr_failures == 1) {
        coll_warn(IB,
                  "rank %d: device memory at %p cannot be registered on %s (%s); such messages "
                  "are copied through host memory",
                  ctx->rank, addr, ctx->devname, coll_last_error());
    }
    return NULL;
}

void coll_ib_gdr_fini(struct coll_tp_ctx *ctx)
{
    if (ctx->gdr_regs + ctx->gdr_failures + ctx->gdr_copies > 0) {
        coll_info(IB,
                  "rank %d: GPUDirect RDMA: %" PRIu64 " registrations of device memory, %" PRIu64
                  " failed; %" PRIu64 " sends copied out of it",
                  ctx->rank, ctx->gdr_regs, ctx->gdr_failures, ctx->gdr_copies);
    }
}
