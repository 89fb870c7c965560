/* SPDX-License-Identifier: MIT */
/*
 * cudasim: the part of the CUDA runtime and driver that libcoll calls, emulated on the host so
 * that the device-memory code paths (the proxy, stream ordering, staging, IPC windows) run in
 * every build. Built as a stand-in libcuda.so.1 that also exports the runtime's entry points;
 * test programs link it in place of the CUDA runtime. See tests/cudasim/README.md.
 *
 * Device memory is a shared file mapped twice: once without access at the address handed out
 * (host code that touches it faults, and the fault is reported as such) and once readable and
 * writable, reached only by stream operations. Each stream is a thread that runs its operations
 * in order.
 */
#ifndef COLL_CUDASIM_H
#define COLL_CUDASIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The host view of [p, p + len): p must lie in device memory (or pinned host memory) with the
 * whole range inside one allocation. Aborts with a message naming what, otherwise. */
void *cudasim_view(const void *p, size_t len, const char *what);

/* Enqueue fn(arg) on stream as a kernel (device work: it may use cudasim_view'ed memory); arg
 * is freed with free() after fn ran, or at once when the launch fails. 0 or a cudaError_t. */
int cudasim_launch(void *stream, void (*fn)(void *), void *arg);

/* Wait until every stream of the process is idle, as a call that synchronises the device does
 * (a kernel's lazy loading: kernels_host.c). */
void cudasim_device_sync(void);

#ifdef __cplusplus
}
#endif

#endif
