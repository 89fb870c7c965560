/* SPDX-License-Identifier: MIT */
/*
 * What the NCCL library's host-side paths (PreMulSum's scaling, copies between a rank and
 * itself) need to know of a buffer and a stream. Where the process has loaded the CUDA driver
 * (libcuda), it is asked: device memory is refused, managed and pinned memory are read by the
 * host. Otherwise, or for memory the driver does not know, the first and last bytes are read
 * through process_vm_readv(2) on this process: memory mapped but not readable gives EFAULT.
 * The library never loads CUDA itself.
 */
#include "nccl_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

/* The CUDA driver's entry points, when the process has loaded it (never loaded from here). */
static void *mem_cuda_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *f = h != NULL ? dlsym(h, name) : NULL;
    if (h != NULL) {
        dlclose(h); /* drops the reference taken above; the driver stays loaded */
    }
    return f;
}

/* The driver's answer for p: 1 host-readable (managed, pinned), 0 device memory, -1 unknown. */
static int mem_cuda_readable(const void *p)
{
    enum { ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, MEMORYTYPE_DEVICE = 2 };
    typedef int (*attr_fn)(void *, int, unsigned long long);
    attr_fn            get     = (attr_fn)mem_cuda_sym("cuPointerGetAttribute");
    unsigned long long managed = 0, type = 0; /* written as a bool, an unsigned int */

    if (get == NULL || get(&type, ATTR_MEMORY_TYPE, (unsigned long long)(uintptr_t)p) != 0) {
        return -1;
    }
    if (get(&managed, ATTR_IS_MANAGED, (unsigned long long)(uintptr_t)p) == 0 && managed != 0) {
        return 1;
    }
    return type != MEMORYTYPE_DEVICE;
}

int nccl_host_readable(const void *p, size_t n)
{
    char         b;
    const char  *at[2] = {p, (const char *)p + n - 1};
    struct iovec local = {&b, 1};
    int          cuda  = mem_cuda_readable(p);

    if (cuda >= 0) {
        return cuda;
    }
    for (int i = 0; i < 2; i++) {
        struct iovec remote = {(void *)at[i], 1};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1 && errno == EFAULT) {
            return 0;
        }
    }
    return 1; /* readable, or the call is not allowed (a seccomp filter): nothing to tell */
}

void nccl_stream_sync(cudaStream_t stream)
{
    typedef int (*sync_fn)(void *);
    sync_fn sync = (sync_fn)mem_cuda_sym("cuStreamSynchronize");
    if (sync != NULL) {
        sync(stream); /* NULL: the legacy default stream; without a context an error, no wait */
    }
}
