/* SPDX-License-Identifier: MIT */
/* collbench_cuda.c -- device buffers for --memory cuda (the CUDA runtime; stubs without it). */
#include "config.h"
#include "collbench.h"

#include <stdio.h>

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

static char cb_dev_name[300] = "CUDA device";

int cb_cuda_setup(int local_rank, size_t len, char **ds_p, char **dr_p, void **stream_p, char *err,
                  size_t errlen)
{
    int                   ndev = 0, dev;
    cudaError_t           e    = cudaGetDeviceCount(&ndev);
    struct cudaDeviceProp prop;
    cudaStream_t          st;

    if (e != cudaSuccess || ndev == 0) {
        snprintf(err, errlen, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    dev = local_rank % ndev;
    e   = cudaSetDevice(dev);
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)ds_p, len);
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)dr_p, len);
    }
    if (e == cudaSuccess) {
        e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    }
    if (e != cudaSuccess) {
        snprintf(err, errlen, "device %d: %s", dev, cudaGetErrorString(e));
        return -1;
    }
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        snprintf(cb_dev_name, sizeof(cb_dev_name), "device %d [%s]", dev, prop.name);
    }
    *stream_p = st;
    return 0;
}

/* cudaMemcpy from pageable memory may return before the data reached the device, and the
 * calls run on a non-blocking stream, unordered with the legacy stream the copy is on: wait. */
int cb_cuda_upload(void *dev, const void *host, size_t len)
{
    return cudaMemcpy(dev, host, len, cudaMemcpyHostToDevice) == cudaSuccess &&
                   cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess
               ? 0
               : -1;
}

int cb_cuda_download(void *host, const void *dev, size_t len)
{
    return cudaMemcpy(host, dev, len, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}

int cb_cuda_sync(void *stream)
{
    return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : -1;
}

const char *cb_cuda_device_name(void)
{
    return cb_dev_name;
}

#else

int cb_cuda_setup(int local_rank, size_t len, char **ds_p, char **dr_p, void **stream_p, char *err,
                  size_t errlen)
{
    (void)local_rank;
    (void)len;
    (void)ds_p;
    (void)dr_p;
    (void)stream_p;
    snprintf(err, errlen, "collbench was built without CUDA (configure --with-cuda)");
    return -1;
}

int cb_cuda_upload(void *dev, const void *host, size_t len)
{
    (void)dev;
    (void)host;
    (void)len;
    return -1;
}

int cb_cuda_download(void *host, const void *dev, size_t len)
{
    (void)host;
    (void)dev;
    (void)len;
    return -1;
}

int cb_cuda_sync(void *stream)
{
    (void)stream;
    return -1;
}

const char *cb_cuda_device_name(void)
{
    return "host memory";
}

#endif
