/* SPDX-License-Identifier: MIT */
/*
 * cudasim: a host emulation of the CUDA runtime and driver entry points libcoll uses (see
 * cudasim.h). One device (ordinal 0). What it holds to, so that a bug that would hang or fault
 * on a GPU shows here too:
 * - device memory is not host memory: the address returned by cudaMalloc is mapped PROT_NONE, and
 *   a host access faults with a message naming the allocation;
 * - each stream runs its operations in order on a thread of its own, asynchronously to the
 *   caller; events, cuStreamWaitValue32 and host functions order work as on a GPU;
 * - copies check their kind and bounds; pageable host memory makes an async copy synchronous
 *   (as the runtime does); host functions may not call CUDA (cudaErrorNotPermitted);
 * - cudaIpcGetMemHandle / cudaIpcOpenMemHandle map an allocation in another process through a
 *   named file (CUDASIM_DIR, default /dev/shm); pool memory (cudaMallocAsync) has no handle;
 * - after fork() a child of a process that used CUDA gets cudaErrorInitializationError.
 * Not emulated: several devices, peer access, the legacy stream's implicit synchronisation
 * with blocking streams, graphs, timing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cudasim.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

static pthread_mutex_t      sim_mu = PTHREAD_MUTEX_INITIALIZER;
static region_t            *regions;
static unsigned long        file_seq;
static int                  used;   /* this process made CUDA calls */
static int                  broken; /* a fork child of a process that had */
static __thread int         tls_ctx, tls_in_hostfn;
static __thread cudaError_t tls_last;

static int kind_device(int k)
{
    return k == R_DEVICE || k == R_POOL || k == R_IPC;
}

/* under sim_mu */
static region_t *region_find(const void *p)
{
    for (region_t *r = regions; r != NULL; r = r->next) {
        if ((const char *)p >= r->base && (const char *)p < r->base + (r->size ? r->size : 1)) {
            return r;
        }
    }
    return NULL;
}

/* Is p the start of an allocation of one of the kinds in mask (1 << kind)? */
static int region_starts(const void *p, unsigned mask)
{
    pthread_mutex_lock(&sim_mu);
    region_t *r  = region_find(p);
    int       ok = r != NULL && r->base == p && (mask & (1u << r->kind)) != 0;
    pthread_mutex_unlock(&sim_mu);
    return ok;
}

static void sim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sim_warn(const char *fmt, ...)
{
    va_list ap;
    char    line[512];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudasim[%d]: %s\n", (int)getpid(), line);
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const char *a = si->si_addr;
    /* no lock: the process is about to end either way */
    for (region_t *r = regions; r != NULL; r = r->next) {
        if (kind_device(r->kind) && a >= r->base && a < r->base + r->maplen) {
            char msg[160];
            int  n = snprintf(msg, sizeof msg,
                              "cudasim[%d]: host code touched device memory at %p "
                               "(allocation %p, %zu bytes)\n",
                              (int)getpid(), (const void *)a, (void *)r->base, r->size);
            if (write(2, msg, (size_t)n) < 0) {
                /* nothing left to do */
            }
            break;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void hostfn_forget(void);

static void sim_atfork_child(void)
{
    if (used) {
        broken = 1;
    }
    hostfn_forget();
}

static void sim_init_once(void)
{
    struct sigaction old, sa;
    pthread_atfork(NULL, NULL, sim_atfork_child);
    if (sigaction(SIGSEGV, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags     = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
    }
}
static pthread_once_t sim_once = PTHREAD_ONCE_INIT;

static cudaError_t set_err(cudaError_t e)
{
    if (e != cudaSuccess) {
        tls_last = e;
    }
    return e;
}

/* A host function that calls CUDA: the runtime may return cudaErrorNotPermitted or deadlock.
 * Fatal here unless CUDASIM_HOSTFN_CUDA=error (test_cudasim checks the error). */
static void hostfn_violation(const char *fn)
{
    const char *how = getenv("CUDASIM_HOSTFN_CUDA");
    sim_warn("%s called from a host function%s", fn,
             how != NULL && strcmp(how, "error") == 0 ? "" : ": aborting");
    if (how == NULL || strcmp(how, "error") != 0) {
        abort();
    }
}

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

/* ---- streams ---- */

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

static struct CUstream_st *streams;
static struct CUstream_st *legacy;

static void event_unref(struct CUevent_st *ev)
{
    pthread_mutex_lock(&ev->mu);
    int last = --ev->refs == 0;
    pthread_mutex_unlock(&ev->mu);
    if (last) {
        pthread_mutex_destroy(&ev->mu);
        pthread_cond_destroy(&ev->cv);
        free(ev);
    }
}

static void region_unmap(region_t *r)
{
    if (kind_device(r->kind)) {
        munmap(r->base, r->maplen);
        munmap(r->alias, r->maplen);
        if (r->path[0] != '\0' && r->kind != R_IPC) {
            unlink(r->path);
        }
    }
}

static void region_drop(void *p)
{
    pthread_mutex_lock(&sim_mu);
    for (region_t **pp = &regions; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == p) {
            region_t *r = *pp;
            *pp         = r->next;
            pthread_mutex_unlock(&sim_mu);
            region_unmap(r);
            free(r);
            return;
        }
    }
    pthread_mutex_unlock(&sim_mu);
}

/* Host functions of every stream run on one thread, one at a time: the runtime leaves the order
 * of host functions of independent streams undefined and may serialise them, and a host
 * function that blocks holds back the others. Emulating the strictest case finds the
 * deadlocks that this can cause. */
static pthread_mutex_t cb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  cb_cv = PTHREAD_COND_INITIALIZER, cb_done = PTHREAD_COND_INITIALIZER;
static op_t           *cb_head, *cb_tail;
static int             cb_running;

static void *hostfn_main(void *arg)
{
    (void)arg;
    tls_in_hostfn = 1;
    pthread_mutex_lock(&cb_mu);
    for (;;) {
        while (cb_head == NULL) {
            pthread_cond_wait(&cb_cv, &cb_mu);
        }
        op_t *o = cb_head;
        cb_head = o->cb_next;
        if (cb_head == NULL) {
            cb_tail = NULL;
        }
        pthread_mutex_unlock(&cb_mu);
        o->fn(o->arg);
        pthread_mutex_lock(&cb_mu);
        o->cb_ran = 1;
        pthread_cond_broadcast(&cb_done);
    }
    return NULL;
}

static void hostfn_forget(void)
{
    cb_running = 0; /* threads do not survive fork */
}

static void hostfn_run(op_t *o)
{
    pthread_mutex_lock(&cb_mu);
    if (!cb_running) {
        pthread_t t;
        if (pthread_create(&t, NULL, hostfn_main, NULL) != 0) {
            sim_warn("cannot start the host-function thread: aborting");
            abort();
        }
        pthread_detach(t);
        cb_running = 1;
    }
    if (cb_tail != NULL) {
        cb_tail->cb_next = o;
    } else {
        cb_head = o;
    }
    cb_tail = o;
    pthread_cond_signal(&cb_cv);
    while (!o->cb_ran) {
        pthread_cond_wait(&cb_done, &cb_mu);
    }
    pthread_mutex_unlock(&cb_mu);
}

static void op_run(op_t *o)
{
    switch (o->type) {
    case OP_COPY:
        memmove(o->dst, o->src, o->n);
        free(o->arg);
        break;
    case OP_SET:
        memset(o->dst, o->value, o->n);
        break;
    case OP_FN:
        hostfn_run(o);
        break;
    case OP_KERNEL:
        o->fn(o->arg);
        free(o->arg);
        break;
    case OP_EVENT:
        pthread_mutex_lock(&o->ev->mu);
        if (o->ev->completed < o->ev_seq) {
            o->ev->completed = o->ev_seq;
        }
        pthread_cond_broadcast(&o->ev->cv);
        pthread_mutex_unlock(&o->ev->mu);
        event_unref(o->ev);
        break;
    case OP_WAITEVENT:
        pthread_mutex_lock(&o->ev->mu);
        while (o->ev->completed < o->ev_seq) {
            pthread_cond_wait(&o->ev->cv, &o->ev->mu);
        }
        pthread_mutex_unlock(&o->ev->mu);
        event_unref(o->ev);
        break;
    case OP_WAITVAL: {
        const volatile uint32_t *w = o->dst;
        for (unsigned spins = 0;; spins++) {
            uint32_t v  = __atomic_load_n(w, __ATOMIC_ACQUIRE);
            int      ok = 0;
            switch (o->wflags & 0x3) {
            case CU_STREAM_WAIT_VALUE_GEQ:
                ok = (int32_t)(v - o->wval) >= 0;
                break;
            case CU_STREAM_WAIT_VALUE_EQ:
                ok = v == o->wval;
                break;
            case CU_STREAM_WAIT_VALUE_AND:
                ok = (v & o->wval) != 0;
                break;
            default: /* NOR */
                ok = ~(v | o->wval) != 0;
                break;
            }
            if (ok) {
                break;
            }
            if (spins > 200) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            }
        }
        break;
    }
    case OP_FREE:
        region_drop(o->dst);
        break;
    }
}

static void stream_free(struct CUstream_st *s)
{
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle);
    free(s);
}

static void *stream_main(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->destroyed) {
            pthread_cond_wait(&s->cv, &s->mu);
        }
        if (s->head == NULL) {
            break;
        }
        op_t *o = s->head;
        pthread_mutex_unlock(&s->mu);
        op_run(o);
        pthread_mutex_lock(&s->mu);
        s->head = o->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->done = o->seq;
        free(o);
        pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->mu);
    /* listed until now, so that drain_all (cudaFree, cudaDeviceSynchronize) waits for the work
     * a destroyed stream still had, as a GPU does */
    pthread_mutex_lock(&sim_mu);
    for (struct CUstream_st **pp = &streams; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    s->exited = 1;
    int last  = s->refs == 0;
    pthread_mutex_unlock(&sim_mu);
    if (last) {
        stream_free(s);
    }
    return NULL;
}

static struct CUstream_st *stream_new(unsigned flags)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->flags = flags;
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        free(s);
        return NULL;
    }
    pthread_detach(s->thread);
    pthread_mutex_lock(&sim_mu);
    s->next = streams;
    streams = s;
    pthread_mutex_unlock(&sim_mu);
    return s;
}

static struct CUstream_st *stream_of(cudaStream_t st)
{
    if (st == NULL || st == cudaStreamLegacy || st == cudaStreamPerThread) {
        pthread_mutex_lock(&sim_mu);
        struct CUstream_st *l = legacy;
        pthread_mutex_unlock(&sim_mu);
        if (l == NULL) {
            l = stream_new(0);
            pthread_mutex_lock(&sim_mu);
            if (legacy == NULL) {
                legacy = l;
            } else { /* another thread won: keep its one; ours idles */
                l = legacy;
            }
            pthread_mutex_unlock(&sim_mu);
        }
        return l;
    }
    return st;
}

/* An operation that will not run: what it owns goes with it. */
static void op_drop(op_t *o)
{
    if (o->type == OP_COPY || o->type == OP_KERNEL) {
        free(o->arg);
    }
    free(o);
}

/* Queue o on st; its sequence number in *seq_p. */
static cudaError_t stream_push(cudaStream_t st, op_t *o, uint64_t *seq_p)
{
    struct CUstream_st *s = stream_of(st);
    if (s == NULL) {
        op_drop(o);
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_lock(&s->mu);
    if (s->destroyed) {
        pthread_mutex_unlock(&s->mu);
        op_drop(o);
        return cudaErrorInvalidResourceHandle;
    }
    o->seq = ++s->enq;
    if (s->tail != NULL) {
        s->tail->next = o;
    } else {
        s->head = o;
    }
    s->tail = o;
    if (seq_p != NULL) {
        *seq_p = o->seq;
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return cudaSuccess;
}

static void stream_wait_seq(struct CUstream_st *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (s->done < seq) {
        pthread_cond_wait(&s->idle, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

static op_t *op_new(int type)
{
    op_t *o = calloc(1, sizeof *o);
    if (o != NULL) {
        o->type = type;
    }
    return o;
}

/* Queue o on st and, when wait is set, return once it ran. */
static cudaError_t op_submit(cudaStream_t st, op_t *o, int wait)
{
    uint64_t    seq;
    cudaError_t e = stream_push(st, o, &seq);
    if (e == cudaSuccess && wait) {
        stream_wait_seq(stream_of(st), seq);
    }
    return e;
}

static void stream_drain(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->enq;
    pthread_mutex_unlock(&s->mu);
    stream_wait_seq(s, seq);
}

static void drain_all(void)
{
    /* each listed stream held (refs) while waited for: its thread may end meanwhile */
    pthread_mutex_lock(&sim_mu);
    size_t n = 0;
    for (struct CUstream_st *s = streams; s != NULL; s = s->next) {
        n++;
    }
    struct CUstream_st **all = calloc(n ? n : 1, sizeof *all);
    n                        = 0;
    for (struct CUstream_st *s = streams; s != NULL && all != NULL; s = s->next) {
        s->refs++;
        all[n++] = s;
    }
    pthread_mutex_unlock(&sim_mu);
    for (size_t i = 0; i < n; i++) {
        stream_drain(all[i]);
    }
    pthread_mutex_lock(&sim_mu);
    for (size_t i = 0; i < n; i++) {
        if (--all[i]->refs == 0 && all[i]->exited) {
            stream_free(all[i]);
        }
    }
    pthread_mutex_unlock(&sim_mu);
    free(all);
}

/* ---- pointers ---- */

/* Translate [p, p + n) for a copy. dev_side: the side must be device-accessible (device
 * memory or pinned host memory); otherwise it must be host memory. *kind_p: the region's kind,
 * -1 for memory the emulation does not know (pageable). */
static cudaError_t xlate(const void *p, size_t n, int dev_side, int any, char **out, int *kind_p,
                         const char *fn, const char *which)
{
    pthread_mutex_lock(&sim_mu);
    region_t *r = region_find(p);
    if (r == NULL) {
        pthread_mutex_unlock(&sim_mu);
        if (dev_side && !any) {
            sim_warn("%s: %s %p is not device memory", fn, which, p);
            return cudaErrorInvalidValue;
        }
        *out = (char *)p;
        if (kind_p != NULL) {
            *kind_p = -1; /* pageable */
        }
        return cudaSuccess;
    }
    size_t off = (size_t)((const char *)p - r->base);
    if (n > r->size - off) {
        sim_warn("%s: %s %p + %zu runs past its allocation (%p, %zu bytes)", fn, which, p, n,
                 (void *)r->base, r->size);
        pthread_mutex_unlock(&sim_mu);
        return cudaErrorInvalidValue;
    }
    if (!dev_side && !any && kind_device(r->kind)) {
        sim_warn("%s: %s %p is device memory where host memory was declared", fn, which, p);
        pthread_mutex_unlock(&sim_mu);
        return cudaErrorInvalidValue;
    }
    *out = r->alias + off;
    if (kind_p != NULL) {
        *kind_p = r->kind;
    }
    pthread_mutex_unlock(&sim_mu);
    return cudaSuccess;
}

SIM_EXPORT void *cudasim_view(const void *p, size_t len, const char *what)
{
    char *out = NULL;
    if (xlate(p, len, 1, 0, &out, NULL, "kernel", what) != cudaSuccess) {
        sim_warn("a kernel would read or write outside device memory: aborting");
        abort();
    }
    return out;
}

SIM_EXPORT void cudasim_device_sync(void)
{
    drain_all();
}

SIM_EXPORT int cudasim_launch(void *stream, void (*fn)(void *), void *arg)
{
    op_t *o = op_new(OP_KERNEL);
    if (o == NULL) {
        free(arg);
        return (int)set_err(cudaErrorMemoryAllocation);
    }
    o->fn  = fn;
    o->arg = arg;
    return (int)set_err(stream_push((cudaStream_t)stream, o, NULL));
}

/* ---- memory ---- */

/* The backing file of allocation seq of process pid: under CUDASIM_DIR, which every process of
 * a run shares (inherited), so that an IPC handle needs only the two numbers. */
static void sim_path(char *buf, size_t len, long pid, unsigned long seq)
{
    const char *dir = getenv("CUDASIM_DIR");
    snprintf(buf, len, "%s/cudasim.%ld.%lu", dir != NULL ? dir : "/dev/shm", pid, seq);
}

static cudaError_t dev_alloc(void **p, size_t size, int kind)
{
    long      pg  = sysconf(_SC_PAGESIZE);
    size_t    len = size == 0 ? (size_t)pg : (size + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    region_t *r   = calloc(1, sizeof *r);
    int       fd;

    if (r == NULL) {
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_lock(&sim_mu);
    unsigned long seq = ++file_seq;
    pthread_mutex_unlock(&sim_mu);
    r->seq = seq;
    sim_path(r->path, sizeof r->path, (long)getpid(), seq);
    fd = open(r->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        sim_warn("cannot make %s: %s", r->path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(r->path);
        }
        free(r);
        return cudaErrorMemoryAllocation;
    }
    r->base  = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
    r->alias = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (r->base == MAP_FAILED || r->alias == MAP_FAILED) {
        if (r->base != MAP_FAILED) {
            munmap(r->base, len);
        }
        if (r->alias != MAP_FAILED) {
            munmap(r->alias, len);
        }
        unlink(r->path);
        free(r);
        return cudaErrorMemoryAllocation;
    }
    if (kind == R_POOL) { /* no IPC handle: nobody opens it by name */
        unlink(r->path);
        r->path[0] = '\0';
    }
    /* fresh device memory holds whatever was there: never zeros */
    memset(r->alias, 0xa5, len);
    r->size   = size;
    r->maplen = len;
    r->kind   = kind;
    pthread_mutex_lock(&sim_mu);
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&sim_mu);
    *p = r->base;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    ENTER();
    if (p == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    return set_err(dev_alloc(p, size, R_DEVICE));
}

SIM_EXPORT cudaError_t cudaFree(void *p)
{
    ENTER();
    if (p == NULL) {
        return cudaSuccess;
    }
    if (!region_starts(p, 1u << R_DEVICE | 1u << R_POOL)) {
        sim_warn("cudaFree(%p): not the start of a device allocation", p);
        return set_err(cudaErrorInvalidValue);
    }
    drain_all(); /* cudaFree synchronises the device */
    region_drop(p);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t st)
{
    ENTER();
    (void)st;
    if (p == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    return set_err(dev_alloc(p, size, R_POOL));
}

SIM_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t st)
{
    ENTER();
    if (p == NULL) {
        return cudaSuccess;
    }
    if (!region_starts(p, 1u << R_DEVICE | 1u << R_POOL)) {
        return set_err(cudaErrorInvalidValue);
    }
    op_t *o = op_new(OP_FREE);
    if (o == NULL) {
        return set_err(cudaErrorMemoryAllocation);
    }
    o->dst = p;
    return set_err(stream_push(st, o, NULL));
}

static cudaError_t host_region(void *p, size_t size, int kind, unsigned flags)
{
    region_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return cudaErrorMemoryAllocation;
    }
    r->base = r->alias = p;
    r->size = r->maplen = size;
    r->kind             = kind;
    r->flags            = flags;
    pthread_mutex_lock(&sim_mu);
    for (region_t *q = regions; q != NULL; q = q->next) {
        if ((char *)p < q->base + q->size && q->base < (char *)p + size) {
            pthread_mutex_unlock(&sim_mu);
            free(r);
            return cudaErrorHostMemoryAlreadyRegistered;
        }
    }
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&sim_mu);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    ENTER();
    drain_all(); /* pinning may synchronise the device: the worst case */
    if (p == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    void *m = NULL;
    if (posix_memalign(&m, 4096, size ? size : 1) != 0) {
        return set_err(cudaErrorMemoryAllocation);
    }
    cudaError_t e = host_region(m, size ? size : 1, R_HOSTALLOC, flags);
    if (e != cudaSuccess) {
        free(m);
        return set_err(e);
    }
    *p = m;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
    return cudaHostAlloc(p, size, 0);
}

SIM_EXPORT cudaError_t cudaFreeHost(void *p)
{
    ENTER();
    if (p == NULL) {
        return cudaSuccess;
    }
    if (!region_starts(p, 1u << R_HOSTALLOC)) {
        return set_err(cudaErrorInvalidValue);
    }
    drain_all();
    region_drop(p);
    free(p);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned flags)
{
    ENTER();
    drain_all(); /* as cudaHostAlloc */
    if (p == NULL || size == 0) {
        return set_err(cudaErrorInvalidValue);
    }
    return set_err(host_region(p, size, R_HOSTREG, flags));
}

SIM_EXPORT cudaError_t cudaHostUnregister(void *p)
{
    ENTER();
    if (!region_starts(p, 1u << R_HOSTREG)) {
        return set_err(cudaErrorHostMemoryNotRegistered);
    }
    drain_all();
    region_drop(p);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags)
{
    ENTER();
    pthread_mutex_lock(&sim_mu);
    region_t *r  = region_find(h);
    int       ok = r != NULL && (r->kind == R_HOSTALLOC || r->kind == R_HOSTREG);
    pthread_mutex_unlock(&sim_mu);
    if (!ok || flags != 0 || d == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *d = h; /* unified addressing */
    return cudaSuccess;
}

/* ---- copies ---- */

/* A copy, queued on st. When it returns (the runtime's rules, "API synchronization behavior"):
 *   cudaMemcpy (blocking): once done, except device to device (queued only) and from pageable
 *   memory to the device (the source is taken at once, the copy queued);
 *   cudaMemcpyAsync: queued; from pageable memory, the source is taken at once. To pageable
 *   memory it is queued too: the runtime may or may not wait, and the caller must not rely
 *   on either. */
static cudaError_t copy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                              cudaStream_t st, int blocking, const char *fn)
{
    char       *d = NULL, *s = NULL, *taken = NULL;
    int         dk = 0, sk = 0, any = kind == cudaMemcpyDefault;
    int         ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int         sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    cudaError_t e;

    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
        return cudaErrorInvalidMemcpyDirection;
    }
    if (n == 0) {
        return cudaSuccess;
    }
    if ((e = xlate(dst, n, ddev, any, &d, &dk, fn, "destination")) != cudaSuccess ||
        (e = xlate(src, n, sdev, any, &s, &sk, fn, "source")) != cudaSuccess) {
        return e;
    }
    int to_dev = dk >= 0 && kind_device(dk), from_dev = sk >= 0 && kind_device(sk);
    if (sk < 0 && to_dev) { /* pageable source: taken now */
        if (blocking) {     /* after a sync of the stream (the runtime's rule for cudaMemcpy) */
            stream_drain(stream_of(st));
        }
        if ((taken = malloc(n)) == NULL) {
            return cudaErrorMemoryAllocation;
        }
        memcpy(taken, s, n);
        s = taken;
    }
    op_t *o = op_new(OP_COPY);
    if (o == NULL) {
        free(taken);
        return cudaErrorMemoryAllocation;
    }
    o->dst   = d;
    o->src   = s;
    o->arg   = taken; /* freed after the copy */
    o->n     = n;
    int wait = blocking && !(to_dev && (from_dev || taken != NULL));
    if (!to_dev && !from_dev) { /* host to host: done by the call */
        wait = 1;
    }
    return op_submit(st, o, wait);
}

SIM_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                       enum cudaMemcpyKind kind, cudaStream_t st)
{
    ENTER();
    return set_err(copy_async(dst, src, n, kind, st, 0, __func__));
}

SIM_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER();
    return set_err(copy_async(dst, src, n, kind, NULL, 1, __func__));
}

static cudaError_t set_async(void *p, int v, size_t n, cudaStream_t st, int sync)
{
    char       *d = NULL;
    cudaError_t e;
    if (n == 0) {
        return cudaSuccess;
    }
    int kind = 0;
    if ((e = xlate(p, n, 1, 0, &d, &kind, "cudaMemset", "destination")) != cudaSuccess) {
        return e;
    }
    sync    = sync && !kind_device(kind); /* cudaMemset waits only on (pinned) host memory */
    op_t *o = op_new(OP_SET);
    if (o == NULL) {
        return cudaErrorMemoryAllocation;
    }
    o->dst   = d;
    o->value = v;
    o->n     = n;
    return op_submit(st, o, sync);
}

/* Asynchronous on device memory (the runtime's rule): only queued on the legacy stream. */
SIM_EXPORT cudaError_t cudaMemset(void *p, int v, size_t n)
{
    ENTER();
    return set_err(set_async(p, v, n, NULL, 0));
}

SIM_EXPORT cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
    ENTER();
    return set_err(set_async(p, v, n, st, 0));
}

/* ---- streams and events ---- */

SIM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags)
{
    ENTER();
    if (st == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *st = stream_new(flags);
    return *st == NULL ? set_err(cudaErrorMemoryAllocation) : cudaSuccess;
}

SIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *st)
{
    return cudaStreamCreateWithFlags(st, cudaStreamDefault);
}

SIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t st)
{
    ENTER();
    if (st == NULL || st == cudaStreamLegacy || st == cudaStreamPerThread) {
        return set_err(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&sim_mu);
    struct CUstream_st *s = streams;
    while (s != NULL && s != st) {
        s = s->next;
    }
    if (s == NULL) {
        pthread_mutex_unlock(&sim_mu);
        return set_err(cudaErrorInvalidResourceHandle);
    }
    /* work already queued still runs; the thread ends after it (and cannot free the stream
     * while sim_mu is held: it unlists itself under it first) */
    pthread_mutex_lock(&st->mu);
    int again     = st->destroyed;
    st->destroyed = 1;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_unlock(&sim_mu);
    return again ? set_err(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

SIM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    ENTER();
    stream_drain(stream_of(st));
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaStreamQuery(cudaStream_t st)
{
    ENTER();
    struct CUstream_st *s = stream_of(st);
    pthread_mutex_lock(&s->mu);
    int idle = s->done == s->enq;
    pthread_mutex_unlock(&s->mu);
    return idle ? cudaSuccess : cudaErrorNotReady; /* not sticky */
}

SIM_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    drain_all();
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *data)
{
    ENTER();
    op_t *o = op_new(OP_FN);
    if (o == NULL || fn == NULL) {
        free(o);
        return set_err(cudaErrorInvalidValue);
    }
    o->fn  = fn;
    o->arg = data;
    return set_err(stream_push(st, o, NULL));
}

SIM_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    ENTER();
    (void)flags;
    if (ev == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return set_err(cudaErrorMemoryAllocation);
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->refs = 1;
    *ev     = e;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    return cudaEventCreateWithFlags(ev, cudaEventDefault);
}

SIM_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    ENTER();
    if (ev == NULL) {
        return set_err(cudaErrorInvalidResourceHandle);
    }
    event_unref(ev);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    ENTER();
    if (ev == NULL) {
        return set_err(cudaErrorInvalidResourceHandle);
    }
    op_t *o = op_new(OP_EVENT);
    if (o == NULL) {
        return set_err(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&ev->mu);
    o->ev_seq = ++ev->recorded;
    ev->refs++;
    pthread_mutex_unlock(&ev->mu);
    o->ev         = ev;
    cudaError_t e = stream_push(st, o, NULL);
    if (e != cudaSuccess) { /* never runs: count it as done */
        pthread_mutex_lock(&ev->mu);
        ev->completed = ev->recorded;
        pthread_mutex_unlock(&ev->mu);
        event_unref(ev);
    }
    return set_err(e);
}

SIM_EXPORT cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    ENTER();
    if (ev == NULL) {
        return set_err(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&ev->mu);
    int done = ev->completed >= ev->recorded;
    pthread_mutex_unlock(&ev->mu);
    return done ? cudaSuccess : cudaErrorNotReady;
}

SIM_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    ENTER();
    if (ev == NULL) {
        return set_err(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&ev->mu);
    uint64_t want = ev->recorded;
    while (ev->completed < want) {
        pthread_cond_wait(&ev->cv, &ev->mu);
    }
    pthread_mutex_unlock(&ev->mu);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags)
{
    ENTER();
    (void)flags;
    if (ev == NULL) {
        return set_err(cudaErrorInvalidResourceHandle);
    }
    op_t *o = op_new(OP_WAITEVENT);
    if (o == NULL) {
        return set_err(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&ev->mu);
    o->ev_seq = ev->recorded;
    ev->refs++;
    pthread_mutex_unlock(&ev->mu);
    o->ev         = ev;
    cudaError_t e = stream_push(st, o, NULL);
    if (e != cudaSuccess) {
        event_unref(ev);
    }
    return set_err(e);
}

/* ---- IPC ---- */

typedef struct {
    uint32_t magic;
    int32_t  pid;
    uint64_t seq; /* the allocation's file: sim_path(pid, seq) */
    uint64_t size;
} ipc_handle_t;
#define IPC_MAGIC 0x43534d31u

SIM_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    ENTER();
    _Static_assert(sizeof(ipc_handle_t) <= sizeof(cudaIpcMemHandle_t), "handle fits");
    pthread_mutex_lock(&sim_mu);
    region_t    *r = region_find(p);
    ipc_handle_t ih;
    memset(&ih, 0, sizeof ih);
    int ok = h != NULL && r != NULL && r->kind == R_DEVICE;
    if (ok) {
        ih.magic = IPC_MAGIC;
        ih.pid   = (int32_t)getpid();
        ih.size  = r->size;
        ih.seq   = r->seq;
    }
    pthread_mutex_unlock(&sim_mu);
    if (!ok) { /* pool memory and host memory have no legacy IPC handle */
        return set_err(cudaErrorInvalidValue);
    }
    memset(h, 0, sizeof *h);
    memcpy(h, &ih, sizeof ih);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags)
{
    ENTER();
    ipc_handle_t ih;
    memcpy(&ih, &h, sizeof ih);
    if (p == NULL || ih.magic != IPC_MAGIC || flags != cudaIpcMemLazyEnablePeerAccess) {
        return set_err(cudaErrorInvalidValue); /* the flag is required */
    }
    if (ih.pid == (int32_t)getpid()) { /* the runtime refuses a process's own handle */
        return set_err(cudaErrorInvalidValue);
    }
    drain_all(); /* mapping may synchronise the device (it hung an H200 whose stream waited) */
    char path[512];
    sim_path(path, sizeof path, (long)ih.pid, (unsigned long)ih.seq);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        sim_warn("cudaIpcOpenMemHandle: %s: %s", path, strerror(errno));
        return set_err(cudaErrorInvalidResourceHandle);
    }
    struct stat st;
    region_t   *r = calloc(1, sizeof *r);
    if (r == NULL || fstat(fd, &st) != 0) {
        close(fd);
        free(r);
        return set_err(cudaErrorMemoryAllocation);
    }
    r->maplen = (size_t)st.st_size;
    r->size   = (size_t)ih.size;
    r->kind   = R_IPC;
    r->base   = mmap(NULL, r->maplen, PROT_NONE, MAP_SHARED, fd, 0);
    r->alias  = mmap(NULL, r->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (r->base == MAP_FAILED || r->alias == MAP_FAILED) {
        free(r);
        return set_err(cudaErrorMemoryAllocation);
    }
    snprintf(r->path, sizeof r->path, "%s", path);
    pthread_mutex_lock(&sim_mu);
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&sim_mu);
    *p = r->base;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaIpcCloseMemHandle(void *p)
{
    ENTER();
    if (!region_starts(p, 1u << R_IPC)) {
        return set_err(cudaErrorInvalidValue);
    }
    drain_all();
    region_drop(p);
    return cudaSuccess;
}

/* ---- device ---- */

SIM_EXPORT cudaError_t cudaGetDeviceCount(int *n)
{
    ENTER_NOCTX();
    if (n == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *n = 1;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
    ENTER_NOCTX();
    if (prop == NULL || d != 0) {
        return set_err(d != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
    }
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "cudasim (host emulation)");
    prop->totalGlobalMem      = (size_t)16 << 30;
    prop->major               = 9;
    prop->minor               = 0;
    prop->multiProcessorCount = 4;
    prop->unifiedAddressing   = 1;
    prop->pciBusID            = 0x17;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaGetDevice(int *d)
{
    ENTER_NOCTX();
    if (d == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *d = 0;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaSetDevice(int d)
{
    ENTER();
    return d == 0 ? cudaSuccess : set_err(cudaErrorInvalidDevice);
}

SIM_EXPORT cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int d)
{
    ENTER_NOCTX();
    if (v == NULL || d != 0) {
        return set_err(d != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
    }
    switch (attr) {
    case cudaDevAttrPciBusId:
        *v = 0x17;
        break;
    case cudaDevAttrMultiProcessorCount:
        *v = 4;
        break;
    default:
        *v = 0; /* no GPUDirect RDMA ordering or flush options, among others */
        break;
    }
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    ENTER_NOCTX();
    if (can == NULL || d != 0 || peer != 0) {
        return set_err(cudaErrorInvalidDevice);
    }
    *can = 0; /* a device is not its own peer */
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    ENTER();
    (void)peer;
    (void)flags;
    return set_err(cudaErrorInvalidDevice);
}

SIM_EXPORT cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(
    enum cudaFlushGPUDirectRDMAWritesTarget target, enum cudaFlushGPUDirectRDMAWritesScope scope)
{
    ENTER();
    (void)target;
    (void)scope;
    return set_err(cudaErrorNotSupported);
}

SIM_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = tls_last;
    tls_last      = cudaSuccess;
    return e;
}

SIM_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return tls_last;
}

SIM_EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInitializationError:
        return "initialization error";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorNotPermitted:
        return "operation not permitted";
    case cudaErrorNotSupported:
        return "operation not supported";
    case cudaErrorHostMemoryAlreadyRegistered:
        return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
        return "pointer does not correspond to a registered memory region";
    case cudaErrorInvalidMemcpyDirection:
        return "invalid copy direction for memcpy";
    default:
        return "unknown error (cudasim)";
    }
}

SIM_EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    return cudaGetErrorString(e);
}

/* ---- driver entry points (found by dlopen("libcuda.so.1")) ---- */

SIM_EXPORT CUresult cuInit(unsigned flags)
{
    pthread_once(&sim_once, sim_init_once);
    if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    __atomic_store_n(&used, 1, __ATOMIC_RELAXED);
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    pthread_mutex_lock(&sim_mu);
    region_t *r    = region_find((const void *)(uintptr_t)ptr);
    int       kind = r != NULL ? r->kind : -1;
    pthread_mutex_unlock(&sim_mu);
    if (kind < 0 || data == NULL) {
        return CUDA_ERROR_INVALID_VALUE; /* as for ordinary host memory */
    }
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = kind_device(kind) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIM_EXPORT CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                           unsigned flags)
{
    char *w = NULL;
    if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (tls_in_hostfn) {
        hostfn_violation("cuStreamWaitValue32");
        return CUDA_ERROR_NOT_PERMITTED;
    }
    if ((uintptr_t)addr % 4 != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (xlate((void *)(uintptr_t)addr, sizeof(uint32_t), 1, 0, &w, NULL, "cuStreamWaitValue32",
              "address") != cudaSuccess) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    op_t *o = op_new(OP_WAITVAL);
    if (o == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->dst    = w;
    o->wval   = value;
    o->wflags = flags;
    return stream_push((cudaStream_t)stream, o, NULL) == cudaSuccess ? CUDA_SUCCESS
                                                                     : CUDA_ERROR_INVALID_HANDLE;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
    if (s == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *s = r == CUDA_SUCCESS ? "no error" : "cudasim driver error";
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    static int the_context;
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *ctx = tls_ctx && !broken ? (CUcontext)(void *)&the_context : NULL;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (dev == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!tls_ctx) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *dev = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
    if (v == NULL || dev != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *v = 0x17;
        break;
    default:
        *v = 0;
        break;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    pthread_mutex_lock(&sim_mu);
    region_t *r  = region_find((const void *)(uintptr_t)ptr);
    int       ok = r != NULL && kind_device(r->kind);
    if (ok) {
        if (base != NULL) {
            *base = (CUdeviceptr)(uintptr_t)r->base;
        }
        if (size != NULL) {
            *size = r->size;
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr ptr, size_t size,
                                                  CUmemRangeHandleType type,
                                                  unsigned long long   flags)
{
    (void)handle;
    (void)ptr;
    (void)size;
    (void)type;
    (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED; /* no dma-buf: no GPUDirect RDMA here */
}

/* Files of device memory left by a process that ended without freeing it. */
__attribute__((destructor)) static void sim_fini(void)
{
    pid_t me = getpid();
    for (region_t *r = regions; r != NULL; r = r->next) {
        if (kind_device(r->kind) && r->kind != R_IPC && r->path[0] != '\0') {
            char mine[32];
            snprintf(mine, sizeof mine, "cudasim.%d.", (int)me);
            if (strstr(r->path, mine) != NULL) {
                unlink(r->path);
            }
        }
    }
}
