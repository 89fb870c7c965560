/* SPDX-License-Identifier: MIT */
/*
 * The proxy's copies between device memory and host staging. Pinned staging is copied in one
 * go. Pageable staging (heap memory, for calls larger than the pinned regions) is copied
 * through two pinned halves of COLL_PROXY_BOUNCE_HALF bytes, allocated with the device state:
 * the copy engine fills or drains one half while the proxy moves the other to or from the heap.
 *
 * Why not copy to pageable memory directly: the driver stages such a copy itself, through a
 * buffer that one thread holds for the whole copy, including any wait for the copy's stream.
 * On an H200, a caller's cudaMemcpyAsync from device to pageable memory, queued on a stream
 * behind a receive, held it; the proxy's copy of a send's input to heap staging then waited
 * for it, on both ranks, while each receive needed the other rank's send. So the proxy never
 * names pageable memory in a copy, and calls of the caller's threads cannot hold it back.
 */
#include "cuda/devop.h"

#include <string.h>

static size_t bounce_len(size_t len, size_t i)
{
    size_t off = i * COLL_PROXY_BOUNCE_HALF;
    return len - off < COLL_PROXY_BOUNCE_HALF ? len - off : COLL_PROXY_BOUNCE_HALF;
}

/* Chunk i of src (device) into its half, the half's event recorded after it. */
static cudaError_t bounce_fetch(coll_cuda_comm_t *cc, char *const half[2], const char *src,
                                size_t len, size_t i)
{
    int         k = (int)(i & 1);
    cudaError_t e = cudaMemcpyAsync(half[k], src + i * COLL_PROXY_BOUNCE_HALF, bounce_len(len, i),
                                    cudaMemcpyDeviceToHost, cc->copy);
    return e == cudaSuccess ? cudaEventRecord(cc->bounce_ev[k], cc->copy) : e;
}

/* device (src) to heap (dst): chunk i+1 is copied to one half while chunk i leaves the other */
static cudaError_t bounce_from_device(coll_cuda_comm_t *cc, char *dst, const char *src, size_t len)
{
    char *const half[2] = {cc->bounce, (char *)cc->bounce + COLL_PROXY_BOUNCE_HALF};
    size_t      n       = (len + COLL_PROXY_BOUNCE_HALF - 1) / COLL_PROXY_BOUNCE_HALF;
    cudaError_t e       = bounce_fetch(cc, half, src, len, 0);

    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        int k = (int)(i & 1);
        if (i + 1 < n) {
            e = bounce_fetch(cc, half, src, len, i + 1);
        }
        if (e == cudaSuccess) {
            e = cudaEventSynchronize(cc->bounce_ev[k]);
        }
        if (e == cudaSuccess) {
            memcpy(dst + i * COLL_PROXY_BOUNCE_HALF, half[k], bounce_len(len, i));
        }
    }
    return e;
}

/* heap (src) to device (dst): a half is refilled once the copy that read it ended */
static cudaError_t bounce_to_device(coll_cuda_comm_t *cc, char *dst, const char *src, size_t len)
{
    char       *half[2] = {cc->bounce, (char *)cc->bounce + COLL_PROXY_BOUNCE_HALF};
    size_t      n       = (len + COLL_PROXY_BOUNCE_HALF - 1) / COLL_PROXY_BOUNCE_HALF;
    cudaError_t e       = cudaSuccess;

    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        int    k   = (int)(i & 1);
        size_t off = i * COLL_PROXY_BOUNCE_HALF, l = bounce_len(len, i);
        if (i >= 2) {
            e = cudaEventSynchronize(cc->bounce_ev[k]);
        }
        if (e == cudaSuccess) {
            memcpy(half[k], src + off, l);
            e = cudaMemcpyAsync(dst + off, half[k], l, cudaMemcpyHostToDevice, cc->copy);
        }
        if (e == cudaSuccess) {
            e = cudaEventRecord(cc->bounce_ev[k], cc->copy);
        }
    }
    return e;
}

cudaError_t coll_proxy_copy(coll_cuda_comm_t *cc, void *dst, const void *src, size_t len,
                            int to_device, int pageable)
{
    cudaError_t e;

    if (len == 0) {
        return cudaSuccess;
    }
    if (pageable && cc->bounce != NULL) {
        e = to_device ? bounce_to_device(cc, dst, src, len) : bounce_from_device(cc, dst, src, len);
    } else {
        e = cudaMemcpyAsync(dst, src, len,
                            to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, cc->copy);
    }
    /* to its end, also after a failure: nothing of it may run on after the call ended */
    cudaError_t s = cudaStreamSynchronize(cc->copy);
    return e != cudaSuccess ? e : s;
}
