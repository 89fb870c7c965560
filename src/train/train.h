/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the training layer (DDP, ZeRO): the progress worker that runs the
 * layer's collectives on a thread of its own, fp32 <-> fp16/bf16 conversion, argument errors.
 * The layer communicates through the public coll.h calls, and asks the library one thing more:
 * whether a call would run inline among the ranks of one host (coll_call_runs_inline, which
 * matches only blocking calls, so the worker makes it blocking); besides, it uses the platform
 * layer alone (logging, the thread's last-error message, allocation).
 */
#ifndef COLL_TRAIN_TRAIN_H
#define COLL_TRAIN_TRAIN_H

#include "coll_train.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* COMPRESS: one whole compressed all-reduce (coll_compress_allreduce of sendbuf into recvbuf),
 * run to completion when the op starts, so its collectives stay together in the order every
 * rank issues them. */
typedef enum {
    TRAIN_OP_ALLREDUCE,
    TRAIN_OP_REDUCE_SCATTER,
    TRAIN_OP_ALLGATHER,
    TRAIN_OP_COMPRESS
} train_op_kind_t;

/* One collective handed to the worker. Fields up to `arg` are the caller's; the rest belong
 * to the worker until `done` is set (read under the worker's lock). */
typedef struct train_op {
    train_op_kind_t  kind;
    const void      *sendbuf;
    void            *recvbuf;
    size_t           count; /* elements: all-reduce total, reduce-scatter/all-gather per rank */
    coll_dtype_t     dtype;
    coll_redop_t     redop;
    coll_compress_t *compress; /* COMPRESS: the bucket's compressor (on the worker's comm) */
    void (*before)(struct train_op *op); /* on the worker, before the start (pack, convert) */
    void (*after)(struct train_op *op);  /* on the worker, after completion (unpack, free) */
    int may_inline; /* 1: where the library would run the call inline (one host), the worker
                       ends the ops in flight and makes it blocking (DDP's buckets) */
    void            *arg;
    double           t_start; /* worker: when the collective was started */
    double           t_end;   /* worker: when it completed */
    coll_result_t    status;
    int              done;
    coll_request_t  *req;
    struct train_op *next;
} train_op_t;

typedef struct train_share { /* coll_train_worker_share */
    void  *buf;
    size_t bytes;
} train_share_t;

/* Runs the ops in submission order: every queued op is started, then the oldest waited for
 * (coll_wait spins briefly and then sleeps, so the thread costs little while it waits). */
typedef struct {
    coll_comm_t        *comm;
    int                 rank;
    int                 nranks;
    pthread_t           thread;
    pthread_mutex_t     lock;
    pthread_cond_t      cv_work; /* queue became non-empty, or stop */
    pthread_cond_t      cv_done; /* an op finished */
    train_op_t         *head;    /* submitted, not yet taken by the worker */
    train_op_t         *tail;
    int                 stop;
    int                 started;
    unsigned long       submitted; /* ops submitted and finished (under lock): equal when idle */
    unsigned long       finished;
    atomic_ullong       wire_bytes; /* ring-model bytes sent by this rank */
    struct train_share *shares;     /* buffers to register with comm before the next op */
    int                 nshare, cap_share;
} train_worker_t;

/* Collective: split comm into the worker's own communicator and start the thread. */
coll_result_t coll_train_worker_init(train_worker_t *w, coll_comm_t *comm, const char *fn);
/* Collective: stop the thread (after every submitted op) and destroy the communicator. */
coll_result_t coll_train_worker_fini(train_worker_t *w);
void          coll_train_worker_submit(train_worker_t *w, train_op_t *op);
/* Register [buf, buf + bytes) with the worker's communicator before the worker's next op, so
 * that calls on it among the ranks of one host take the direct path (src/engine/direct.c).
 * Every rank shares the same buffers in the same order while the worker is idle (the
 * registration is collective, and then comes before the same op everywhere); a buffer that is
 * not coll_mem_alloc memory on some rank is refused on every rank alike and stays unregistered.
 * The registrations end with the communicator (coll_train_worker_fini); the buffers must live
 * until then. COLL_ERR_INVALID_USAGE with ops in flight, COLL_ERR_NO_MEMORY when the list
 * cannot grow; nothing is shared then. */
coll_result_t coll_train_worker_share(train_worker_t *w, void *buf, size_t bytes);
/* Drop the shares not registered yet (their buffers are about to be freed). */
void coll_train_worker_unshare(train_worker_t *w);
/* Memory for a buffer of the layer's collectives: coll_mem_alloc (shareable, *shared_p 1), else
 * zeroed heap memory (*shared_p 0); NULL when neither. Freed by coll_train_buffer_free. */
void *coll_train_buffer_alloc(size_t bytes, int *shared_p);
void  coll_train_buffer_free(void *p, int shared);
/* Block until op is done; returns its status. */
coll_result_t coll_train_worker_wait(train_worker_t *w, train_op_t *op);
/* 1 if op is done (never blocks). */
int coll_train_worker_test(train_worker_t *w, train_op_t *op);
/* Wait until every op submitted so far has finished (the worker is idle). */
void coll_train_worker_drain(train_worker_t *w);
/* Ops submitted and not yet finished: 0 when the worker is idle. */
unsigned long coll_train_worker_busy(train_worker_t *w);
/* Collective, with the worker idle: the arrival summary of its communicator
 * (coll_comm_stats); COLL_ERR_INVALID_USAGE while ops are in flight. */
coll_result_t coll_train_worker_arrival(train_worker_t *w, const char *fn, char *buf, size_t len);

/* Conversions with round-to-nearest-even, NaN kept a NaN. */
void coll_train_to_half(void *dst, const float *src, size_t n, coll_dtype_t half);
void coll_train_from_half(float *dst, const void *src, size_t n, coll_dtype_t half);

/* Record "fn: message" as this thread's last error, log it once where it was detected (WARN,
 * as the core logs argument errors), and return st. */
coll_result_t coll_train_error_at(const char *file, int line, coll_result_t st, const char *fn,
                                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define coll_train_error(_st, _fn, ...)                                                            \
    coll_train_error_at(__FILE__, __LINE__, _st, _fn, __VA_ARGS__)

/* Bucket assignment shared by DDP and ZeRO: walk items from the last to the first and close
 * a bucket before an item that would take it past cap bytes (or whose group key differs).
 * Writes bucket_of[i]; returns the bucket count. Bucket 0 holds the last items. */
int coll_train_assign_buckets(int n, const size_t *bytes, const int *key, size_t cap,
                              int *bucket_of);

double coll_train_time_s(void);

#endif
