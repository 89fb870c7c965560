/* SPDX-License-Identifier: MIT */
/* Built without CUDA: no pointer is device memory and stream calls are refused. */
#include "cuda/cuda.h"
#include "cuda/devmem.h"
#include "error.h"

#include <string.h>

int coll_cuda_ptr_device(const void *p, int *device_p)
{
    (void)p;
    (void)device_p;
    return 0;
}

int coll_cuda_ptr_managed(const void *p)
{
    (void)p;
    return 0;
}

int coll_cuda_current_busid(uint64_t *busid_p)
{
    (void)busid_p;
    return 0;
}

int coll_cuda_call_on_device(const coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                             const void *recvbuf)
{
    (void)comm;
    (void)a;
    (void)sendbuf;
    (void)recvbuf;
    return 0;
}

const char *coll_cuda_unavailable(void)
{
    return "libcoll was built without CUDA (configure --with-cuda)";
}

coll_result_t coll_cuda_start(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                              void *recvbuf, void *stream, int stream_ordered, coll_task_t **req_p)
{
    (void)sendbuf;
    (void)recvbuf;
    (void)stream;
    (void)stream_ordered;
    (void)req_p;
    /* coll_comm_arg_error puts "rank N: " in front */
    return coll_comm_arg_error(comm, COLL_ERR_UNSUPPORTED, "%s on a CUDA stream: %s",
                               coll_op_name(a->coll), coll_cuda_unavailable());
}

coll_result_t coll_cuda_wait(coll_task_t *req)
{
    (void)req;
    return coll_set_last_error(COLL_ERR_INTERNAL, "no device operations without CUDA");
}

int coll_cuda_test(coll_task_t *req, coll_result_t *status_p)
{
    (void)req;
    *status_p = coll_set_last_error(COLL_ERR_INTERNAL, "no device operations without CUDA");
    return 1;
}

void coll_cuda_comm_destroy(coll_comm_t *comm)
{
    (void)comm;
}

void coll_cuda_comm_free(coll_comm_t *comm)
{
    (void)comm;
}

/* The direct device path never runs without CUDA: args->device is never set. */
const coll_layout_t *coll_cuda_dev_layout(coll_comm_t *comm)
{
    return &comm->layout;
}

const coll_algo_t *coll_cuda_dev_algo(coll_comm_t *comm, const coll_args_t *args, double *cost_p)
{
    (void)comm;
    (void)args;
    (void)cost_p;
    return NULL;
}

void *coll_cuda_win_ptr(coll_comm_t *comm, int rank, int parity)
{
    (void)comm;
    (void)rank;
    (void)parity;
    return NULL;
}

coll_result_t coll_cuda_dev_copy(coll_comm_t *comm, void *dst, const void *src, size_t len)
{
    (void)dst;
    (void)src;
    (void)len;
    return coll_comm_fail(comm, COLL_ERR_INTERNAL, "device step without CUDA");
}

coll_result_t coll_cuda_dev_reduce(coll_comm_t *comm, coll_dtype_t dt, coll_redop_t op, void *dst,
                                   const void *a, const void *b, size_t n)
{
    (void)dt;
    (void)op;
    (void)dst;
    (void)a;
    (void)b;
    (void)n;
    return coll_comm_fail(comm, COLL_ERR_INTERNAL, "device step without CUDA");
}

coll_result_t coll_cuda_dev_div(coll_comm_t *comm, coll_dtype_t dt, void *buf, size_t n,
                                int divisor)
{
    (void)dt;
    (void)buf;
    (void)n;
    (void)divisor;
    return coll_comm_fail(comm, COLL_ERR_INTERNAL, "device step without CUDA");
}

coll_result_t coll_cuda_copy_sync(const coll_devmem_t *dm, void *dst, const void *src, size_t n,
                                  int to_device)
{
    (void)to_device;
    if (dm->device < 0) { /* host memory standing in */
        memcpy(dst, src, n);
        return COLL_OK;
    }
    return coll_set_last_error(COLL_ERR_UNSUPPORTED, "a device copy in a build without CUDA");
}

coll_result_t coll_cuda_dmabuf_get(const coll_devmem_t *dm, const void *addr, size_t len, int *fd_p,
                                   uintptr_t *base_p, size_t *len_p)
{
    (void)dm;
    (void)addr;
    (void)len;
    (void)fd_p;
    (void)base_p;
    (void)len_p;
    return coll_set_last_error(COLL_ERR_UNSUPPORTED, "libcoll was built without CUDA");
}
