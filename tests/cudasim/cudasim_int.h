/* SPDX-License-Identifier: MIT */
/*
 * cudasim's parts, shared by its files: the state (allocations, streams, the calling thread's
 * context and last error), the operations streams run, and the entry points' prologue. Not
 * for the programs under test: they see cudasim.h and CUDA's own headers.
 *   cudasim.c         allocations' table, pointers, initialisation, device queries, errors,
 *                     the driver's entry points
 *   cudasim_stream.c  streams, the host-function thread, events, kernel launches
 *   cudasim_mem.c     device, pool and pinned memory, copies, IPC handles
 */
#ifndef COLL_CUDASIM_INT_H
#define COLL_CUDASIM_INT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cudasim.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* ---- regions: every allocation the emulation knows ---- */

enum { R_DEVICE, R_POOL, R_IPC, R_HOSTALLOC, R_HOSTREG };

typedef struct region {
    char          *base; /* the address handed out */
    size_t         size; /* as asked */
    size_t         maplen;
    char          *alias; /* host view (device kinds); == base for host kinds */
    int            kind;
    unsigned       flags;
    char           path[512]; /* backing file (device kinds), "" once unlinked */
    unsigned long  seq;       /* its number: sim_path */
    struct region *next;
} region_t;

extern pthread_mutex_t      sim_mu; /* regions, streams' list */
extern region_t            *regions;
extern int                  used;   /* this process made CUDA calls */
extern int                  broken; /* a fork child of a process that had */
extern __thread int         tls_ctx, tls_in_hostfn;
extern __thread cudaError_t tls_last;
extern pthread_once_t       sim_once;

static inline int kind_device(int k)
{
    return k == R_DEVICE || k == R_POOL || k == R_IPC;
}

/* cudasim.c */
region_t   *region_find(const void *p); /* under sim_mu */
int         region_starts(const void *p, unsigned mask);
void        region_drop(void *p); /* unmaps and forgets the allocation starting at p */
void        sim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cudaError_t set_err(cudaError_t e);
void        hostfn_violation(const char *fn);
void        sim_init_once(void);
cudaError_t xlate(const void *p, size_t n, int dev_side, int any, char **out, int *kind_p,
                  const char *fn, const char *which);

/* ---- streams and their operations (cudasim_stream.c) ---- */

enum { OP_COPY, OP_SET, OP_FN, OP_KERNEL, OP_EVENT, OP_WAITEVENT, OP_WAITVAL, OP_FREE };

struct CUevent_st {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    uint64_t        recorded, completed;
    int             refs; /* 1 for the handle + one per pending operation */
};

typedef struct op {
    int         type;
    struct op  *next;
    uint64_t    seq;
    void       *dst;
    const void *src;
    size_t      n;
    int         value;
    void (*fn)(void *);
    void              *arg;
    struct CUevent_st *ev;
    uint64_t           ev_seq;
    uint32_t           wval;
    unsigned           wflags;
    struct op         *cb_next; /* OP_FN: in the host-function queue */
    int                cb_ran;
} op_t;

struct CUstream_st {
    pthread_mutex_t     mu;
    pthread_cond_t      cv;   /* work queued, or destroyed */
    pthread_cond_t      idle; /* an operation ended */
    op_t               *head, *tail;
    uint64_t            enq, done;
    int                 destroyed; /* by cudaStreamDestroy: the thread ends once idle */
    int                 exited;    /* the thread ended (sim_mu) */
    int                 refs;      /* drain_all's references (sim_mu) */
    unsigned            flags;
    pthread_t           thread;
    struct CUstream_st *next; /* all streams of the process */
};

struct CUstream_st *stream_of(cudaStream_t st);
cudaError_t         stream_push(cudaStream_t st, op_t *o, uint64_t *seq_p);
void                stream_wait_seq(struct CUstream_st *s, uint64_t seq);
void                stream_drain(struct CUstream_st *s);
op_t               *op_new(int type);
cudaError_t         op_submit(cudaStream_t st, op_t *o, int wait);
void                drain_all(void); /* every stream idle: a device synchronisation */
void                hostfn_forget(void);

/* Every runtime entry point starts here. */
#define ENTER_NOCTX()                                                                              \
    do {                                                                                           \
        pthread_once(&sim_once, sim_init_once);                                                    \
        if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {                                          \
            return set_err(cudaErrorInitializationError);                                          \
        }                                                                                          \
        if (tls_in_hostfn) {                                                                       \
            hostfn_violation(__func__);                                                            \
            return set_err(cudaErrorNotPermitted);                                                 \
        }                                                                                          \
        __atomic_store_n(&used, 1, __ATOMIC_RELAXED);                                              \
    } while (0)
/* ... and makes the device's primary context current on the calling thread (queries of the
 * device do not: they use ENTER_NOCTX) */
#define ENTER()                                                                                    \
    do {                                                                                           \
        ENTER_NOCTX();                                                                             \
        tls_ctx = 1;                                                                               \
    } while (0)

#endif
