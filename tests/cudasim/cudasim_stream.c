/* SPDX-License-Identifier: MIT */
/*
 * cudasim's streams (see cudasim.c): each a thread running its operations in order, the one
 * thread that runs every stream's host functions, events, and kernel launches
 * (cudasim_launch). cudasim_int.h declares what the other files use.
 */
#include "cudasim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

void hostfn_forget(void)
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

struct CUstream_st *stream_of(cudaStream_t st)
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

/* Give back a reference taken under sim_mu; the last one frees a stream whose thread ended. */
static void stream_unref(struct CUstream_st *s)
{
    pthread_mutex_lock(&sim_mu);
    if (--s->refs == 0 && s->exited) {
        stream_free(s);
    }
    pthread_mutex_unlock(&sim_mu);
}

/* An operation that will not run: what it owns goes with it. */
static void op_drop(op_t *o)
{
    if (o->type == OP_COPY || o->type == OP_KERNEL) {
        free(o->arg);
    }
    free(o);
}

/* How many operations a stream holds before queueing one more blocks the caller until one ends
 * (CUDASIM_STREAM_DEPTH, default 16). A GPU's driver blocks too, at a depth it does not
 * document (on an H200, some tens of calls each waiting on a memory word): code that queues
 * work while holding what the stream's progress needs hangs there, and here at once. */
static uint64_t       depth_max;
static pthread_once_t depth_once = PTHREAD_ONCE_INIT;

static void depth_read(void)
{
    const char *v = getenv("CUDASIM_STREAM_DEPTH");
    long        d = v != NULL ? atol(v) : 16;
    depth_max     = d > 0 ? (uint64_t)d : 16;
}

static uint64_t stream_depth(void)
{
    pthread_once(&depth_once, depth_read);
    return depth_max;
}

/* Queue o on st (once the stream holds fewer than stream_depth() operations); its sequence
 * number in *seq_p. The stream is held (refs) meanwhile: it may be destroyed while this
 * waits, and its thread may end. An event's record counts from when it is queued. */
cudaError_t stream_push(cudaStream_t st, op_t *o, uint64_t *seq_p)
{
    struct CUstream_st *s     = stream_of(st);
    uint64_t            depth = stream_depth();
    if (s == NULL) {
        op_drop(o);
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_lock(&sim_mu);
    s->refs++;
    pthread_mutex_unlock(&sim_mu);
    pthread_mutex_lock(&s->mu);
    while (!s->destroyed && s->enq - s->done >= depth) {
        pthread_cond_wait(&s->idle, &s->mu);
    }
    if (s->destroyed) {
        pthread_mutex_unlock(&s->mu);
        stream_unref(s);
        op_drop(o);
        return cudaErrorInvalidResourceHandle;
    }
    if (o->type == OP_EVENT) {
        pthread_mutex_lock(&o->ev->mu);
        o->ev_seq = ++o->ev->recorded;
        o->ev->refs++;
        pthread_mutex_unlock(&o->ev->mu);
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
    stream_unref(s);
    return cudaSuccess;
}

void stream_wait_seq(struct CUstream_st *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (s->done < seq) {
        pthread_cond_wait(&s->idle, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

op_t *op_new(int type)
{
    op_t *o = calloc(1, sizeof *o);
    if (o != NULL) {
        o->type = type;
    }
    return o;
}

/* Queue o on st and, when wait is set, return once it ran. */
cudaError_t op_submit(cudaStream_t st, op_t *o, int wait)
{
    uint64_t    seq;
    cudaError_t e = stream_push(st, o, &seq);
    if (e == cudaSuccess && wait) {
        stream_wait_seq(stream_of(st), seq);
    }
    return e;
}

void stream_drain(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->enq;
    pthread_mutex_unlock(&s->mu);
    stream_wait_seq(s, seq);
}

void drain_all(void)
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
    for (size_t i = 0; i < n; i++) {
        stream_unref(all[i]);
    }
    free(all);
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
    pthread_cond_broadcast(&st->idle); /* a caller waiting for room gets its error now */
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
    o->ev = ev; /* counted as recorded once queued (stream_push) */
    return set_err(stream_push(st, o, NULL));
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
