/* SPDX-License-Identifier: MIT */
/*
 * The training layer's progress worker: a thread that owns a communicator split from the
 * caller's and runs the layer's collectives in submission order while the caller computes.
 * libcoll's non-blocking calls progress only inside coll_wait/coll_test, so without this
 * thread a bucket started during backward would not move until the caller waited for it.
 * Also here: fp16/bf16 conversion, bucket assignment and the layer's error helper.
 */
#include "config.h"
#include "train/train.h"
#include "api/check.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

double coll_train_time_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

coll_result_t coll_train_error_at(const char *file, int line, coll_result_t st, const char *fn,
                                  const char *fmt, ...)
{
    char    msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (coll_log_enabled(COLL_LOG_WARN, COLL_SS_TRAIN)) {
        coll_log_emit(COLL_LOG_WARN, COLL_SS_TRAIN, file, line, "%s: %s", fn, msg);
    }
    return coll_set_last_error(st, "%s: %s", fn, msg);
}

/* ---- the worker thread ---- */

/* Whether op runs inline as a blocking call (the small-call or direct path among the ranks of one
 * host, which matches only blocking calls): every rank decides alike. */
static int worker_inline(train_worker_t *w, const train_op_t *op)
{
    int coll = op->kind == TRAIN_OP_ALLREDUCE        ? COLL_OP_ALLREDUCE
               : op->kind == TRAIN_OP_REDUCE_SCATTER ? COLL_OP_REDUCE_SCATTER
               : op->kind == TRAIN_OP_ALLGATHER      ? COLL_OP_ALLGATHER
                                                     : -1;
    return op->may_inline && coll >= 0 &&
           coll_call_runs_inline(w->comm, coll, op->sendbuf, op->recvbuf, op->count, op->dtype,
                                 op->redop);
}

/* Start op, or with blocking run it to the end (then op->req stays NULL). */
static coll_result_t worker_start_op(train_worker_t *w, train_op_t *op, int blocking)
{
    size_t           bytes = op->count * coll_dtype_size(op->dtype);
    size_t           n     = (size_t)w->nranks;
    coll_request_t **req   = blocking ? NULL : &op->req;

    if (op->before != NULL) {
        op->before(op);
    }
    op->t_start = coll_train_time_s();
    switch (op->kind) {
    case TRAIN_OP_ALLREDUCE:
        atomic_fetch_add(&w->wire_bytes, 2 * bytes * (n - 1) / n);
        return req == NULL ? coll_allreduce(op->sendbuf, op->recvbuf, op->count, op->dtype,
                                            op->redop, w->comm)
                           : coll_iallreduce(op->sendbuf, op->recvbuf, op->count, op->dtype,
                                             op->redop, w->comm, req);
    case TRAIN_OP_REDUCE_SCATTER:
        atomic_fetch_add(&w->wire_bytes, bytes * (n - 1));
        return req == NULL ? coll_reduce_scatter(op->sendbuf, op->recvbuf, op->count, op->dtype,
                                                 op->redop, w->comm)
                           : coll_ireduce_scatter(op->sendbuf, op->recvbuf, op->count, op->dtype,
                                                  op->redop, w->comm, req);
    case TRAIN_OP_ALLGATHER:
        atomic_fetch_add(&w->wire_bytes, bytes * (n - 1));
        return req == NULL
                   ? coll_allgather(op->sendbuf, op->recvbuf, op->count, op->dtype, w->comm)
                   : coll_iallgather(op->sendbuf, op->recvbuf, op->count, op->dtype, w->comm, req);
    case TRAIN_OP_COMPRESS: {
        coll_compress_stats_t cs;
        coll_result_t         st = coll_compress_allreduce(op->compress, op->sendbuf, op->recvbuf);
        if (st == COLL_OK && coll_compress_get_stats(op->compress, &cs) == COLL_OK) {
            atomic_fetch_add(&w->wire_bytes, cs.wire_bytes);
        }
        return st;
    }
    }
    return COLL_ERR_INTERNAL;
}

static void worker_finish_op(train_worker_t *w, train_op_t *op, coll_result_t st)
{
    op->t_end = coll_train_time_s();
    if (st != COLL_OK) {
        coll_error(TRAIN, "rank %d: collective of the training layer failed: %s (%s)", w->rank,
                   coll_strerror(st), coll_comm_last_error(w->comm));
    }
    if (op->after != NULL && st == COLL_OK) {
        op->after(op);
    }
    pthread_mutex_lock(&w->lock);
    op->status = st;
    op->done   = 1;
    w->finished++;
    pthread_cond_broadcast(&w->cv_done);
    pthread_mutex_unlock(&w->lock);
}

/* Register the buffers shared since the last op (coll_train_worker_share), in order. The list
 * does not change meanwhile: nothing is shared while ops are in flight, and the worker calls
 * this with a batch in hand. */
static void worker_register_shared(train_worker_t *w)
{
    pthread_mutex_lock(&w->lock);
    int n = w->nshare;
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < n; i++) {
        coll_reg_t   *reg;
        coll_result_t st = coll_comm_register(w->comm, w->shares[i].buf, w->shares[i].bytes, &reg);
        if (st != COLL_OK) { /* alike on every rank: the buffer keeps the copying paths */
            coll_info(TRAIN,
                      "rank %d: a %zu-byte buffer of the training layer stays "
                      "unregistered: %s",
                      w->rank, w->shares[i].bytes, coll_comm_last_error(w->comm));
        }
    }
    pthread_mutex_lock(&w->lock);
    w->nshare = 0;
    pthread_mutex_unlock(&w->lock);
}

static void *worker_main(void *arg)
{
    train_worker_t *w        = arg;
    train_op_t     *inflight = NULL, *last = NULL;

    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (w->head == NULL && inflight == NULL && !w->stop) {
            pthread_cond_wait(&w->cv_work, &w->lock);
        }
        if (w->head == NULL && inflight == NULL && w->stop) {
            pthread_mutex_unlock(&w->lock);
            return NULL;
        }
        train_op_t *batch = w->head;
        w->head = w->tail = NULL;
        pthread_mutex_unlock(&w->lock);
        if (inflight == NULL) { /* ops of every rank come after the same registrations */
            worker_register_shared(w);
        }
        /* start everything submitted so far (order = submission order on every rank); a call
         * that runs inline, and a compressed all-reduce (blocking calls of its own), first end
         * the ones in flight, then run to the end */
        while (batch != NULL) {
            train_op_t   *op = batch;
            coll_result_t st;
            int           blocking = op->kind == TRAIN_OP_COMPRESS || worker_inline(w, op);
            batch                  = op->next;
            op->next               = NULL;
            while (blocking && inflight != NULL) {
                train_op_t *done = inflight;
                inflight         = done->next;
                done->next       = NULL;
                worker_finish_op(w, done, coll_wait(done->req));
            }
            if (blocking) {
                last = NULL;
            }
            st = worker_start_op(w, op, blocking);
            if (st != COLL_OK || blocking) { /* failed, or run to the end */
                worker_finish_op(w, op, st);
                continue;
            }
            if (last == NULL) {
                inflight = op;
            } else {
                last->next = op;
            }
            last = op;
        }
        if (inflight != NULL) {
            train_op_t *op = inflight;
            inflight       = op->next;
            if (inflight == NULL) {
                last = NULL;
            }
            op->next = NULL;
            worker_finish_op(w, op, coll_wait(op->req));
        }
    }
}

coll_result_t coll_train_worker_init(train_worker_t *w, coll_comm_t *comm, const char *fn)
{
    coll_result_t st;
    int           rc;

    memset(w, 0, sizeof(*w));
    COLL_CHECK(coll_comm_rank(comm, &w->rank));
    COLL_CHECK(coll_comm_size(comm, &w->nranks));
    st = coll_comm_split(comm, 0, w->rank, &w->comm);
    if (st != COLL_OK) {
        return coll_train_error(st, fn, "cannot split a communicator for the progress thread: %s",
                                coll_comm_last_error(comm));
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cv_work, NULL);
    pthread_cond_init(&w->cv_done, NULL);
    rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        coll_comm_destroy(w->comm);
        return coll_train_error(COLL_ERR_SYSTEM, fn, "pthread_create failed: %s", strerror(rc));
    }
    w->started = 1;
    return COLL_OK;
}

coll_result_t coll_train_worker_fini(train_worker_t *w)
{
    coll_result_t st;

    if (!w->started) {
        return COLL_OK;
    }
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv_work);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    st = coll_comm_destroy(w->comm); /* ends the registrations */
    free(w->shares);                 /* realloc'ed */
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cv_work);
    pthread_cond_destroy(&w->cv_done);
    w->started = 0;
    return st;
}

coll_result_t coll_train_worker_share(train_worker_t *w, void *buf, size_t bytes)
{
    coll_result_t st = COLL_OK;
    pthread_mutex_lock(&w->lock);
    if (w->submitted != w->finished) {
        st = COLL_ERR_INVALID_USAGE;
    } else if (w->nshare == w->cap_share) {
        int            cap = w->cap_share ? 2 * w->cap_share : 8;
        train_share_t *p   = realloc(w->shares, (size_t)cap * sizeof(*p));
        if (p != NULL) {
            w->shares    = p;
            w->cap_share = cap;
        } else {
            st = COLL_ERR_NO_MEMORY;
        }
    }
    if (st == COLL_OK) {
        w->shares[w->nshare++] = (train_share_t){buf, bytes};
    }
    pthread_mutex_unlock(&w->lock);
    return st;
}

void coll_train_worker_unshare(train_worker_t *w)
{
    pthread_mutex_lock(&w->lock);
    w->nshare = 0;
    pthread_mutex_unlock(&w->lock);
}

void *coll_train_buffer_alloc(size_t bytes, int *shared_p)
{
    void *p   = NULL;
    *shared_p = coll_mem_alloc(&p, bytes) == COLL_OK; /* zeroed */
    if (!*shared_p) {
        coll_info(TRAIN,
                  "a %zu-byte buffer of the training layer is heap memory (%s): it "
                  "will not be registered",
                  bytes, coll_last_error());
    }
    return *shared_p ? p : coll_calloc(1, bytes, "training-layer buffer");
}

void coll_train_buffer_free(void *p, int shared)
{
    if (shared && coll_mem_free(p) != COLL_OK) {
        coll_warn(TRAIN, "cannot free a buffer of the training layer: %s", coll_last_error());
    } else if (!shared) {
        coll_free(p);
    }
}

void coll_train_worker_submit(train_worker_t *w, train_op_t *op)
{
    op->done   = 0;
    op->status = COLL_OK;
    op->next   = NULL;
    op->req    = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->tail == NULL) {
        w->head = op;
    } else {
        w->tail->next = op;
    }
    w->tail = op;
    w->submitted++;
    pthread_cond_signal(&w->cv_work);
    pthread_mutex_unlock(&w->lock);
}

void coll_train_worker_drain(train_worker_t *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->submitted != w->finished) { /* each ends, at worst by its timeout */
        pthread_cond_wait(&w->cv_done, &w->lock);
    }
    pthread_mutex_unlock(&w->lock);
}

unsigned long coll_train_worker_busy(train_worker_t *w)
{
    unsigned long busy;

    pthread_mutex_lock(&w->lock);
    busy = w->submitted - w->finished;
    pthread_mutex_unlock(&w->lock);
    return busy;
}

coll_result_t coll_train_worker_arrival(train_worker_t *w, const char *fn, char *buf, size_t len)
{
    unsigned long busy;

    if (buf == NULL || len == 0) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "buf is NULL or len is 0");
    }
    busy = coll_train_worker_busy(w);
    if (busy != 0) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "%lu collective(s) of this step in flight: call it between steps",
                                busy);
    }
    /* the worker is idle, so the caller may use its communicator */
    return coll_comm_stats(w->comm, buf, len);
}

coll_result_t coll_train_worker_wait(train_worker_t *w, train_op_t *op)
{
    coll_result_t st;
    pthread_mutex_lock(&w->lock);
    while (!op->done) {
        pthread_cond_wait(&w->cv_done, &w->lock);
    }
    st = op->status;
    pthread_mutex_unlock(&w->lock);
    return st;
}

int coll_train_worker_test(train_worker_t *w, train_op_t *op)
{
    int done;
    pthread_mutex_lock(&w->lock);
    done = op->done;
    pthread_mutex_unlock(&w->lock);
    return done;
}

/* ---- fp16 / bf16 ---- */

static uint16_t train_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static float train_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float    f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t train_f32_to_f16(float f)
{
    uint32_t u, sign, exp, mant;
    memcpy(&u, &f, 4);
    sign = (u >> 16) & 0x8000u;
    exp  = (u >> 23) & 0xffu;
    mant = u & 0x7fffffu;
    if (exp == 0xffu) {
        return (uint16_t)(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
    }
    int e = (int)exp - 127 + 15;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u); /* overflow to infinity */
    }
    if (e <= 0) {
        if (e < -10) {
            return (uint16_t)sign;
        }
        /* subnormal: shift the mantissa with its implicit bit, round to nearest even */
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half  = mant >> shift;
        uint32_t rem   = mant & ((1u << shift) - 1u);
        uint32_t mid   = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) {
            half++;
        }
        return (uint16_t)(sign | half);
    }
    uint32_t h   = sign | ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
        h++; /* a carry into the exponent is the correct rounding (up to infinity) */
    }
    return (uint16_t)h;
}

static float train_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t u;
    float    f;
    if (exp == 0) {
        f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

void coll_train_to_half(void *dst, const float *src, size_t n, coll_dtype_t half)
{
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++) {
        d[i] = half == COLL_BFLOAT16 ? train_f32_to_bf16(src[i]) : train_f32_to_f16(src[i]);
    }
}

void coll_train_from_half(float *dst, const void *src, size_t n, coll_dtype_t half)
{
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) {
        dst[i] = half == COLL_BFLOAT16 ? train_bf16_to_f32(s[i]) : train_f16_to_f32(s[i]);
    }
}

/* ---- buckets ---- */

int coll_train_assign_buckets(int n, const size_t *bytes, const int *key, size_t cap,
                              int *bucket_of)
{
    int    nb   = 0;
    size_t fill = 0;
    for (int i = n - 1; i >= 0; i--) {
        int same = i < n - 1 && (key == NULL || key[i] == key[i + 1]);
        if (i == n - 1 || !same || (fill > 0 && fill + bytes[i] > cap)) {
            if (i != n - 1) {
                nb++;
            }
            fill = 0;
        }
        fill += bytes[i];
        bucket_of[i] = nb;
    }
    return n > 0 ? nb + 1 : 0;
}
