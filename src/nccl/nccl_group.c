/* SPDX-License-Identifier: MIT */
/*
 * NCCL's groups: between ncclGroupStart and ncclGroupEnd (per thread, nested) calls only start.
 * Collectives and send/recv start as libcoll non-blocking operations and are waited at the
 * outermost ncclGroupEnd, all of them progressed together (so one thread can drive several
 * communicators, and paired sends and receives never wait on each other); ncclCommInitRank
 * and ncclCommSplit calls are deferred to ncclGroupEnd and run there concurrently, one thread
 * each (the communicators made in one group are destroyed together). Sends and
 * receives between a rank and itself are kept and copied at ncclGroupEnd, in order.
 */
#include "nccl_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_SHIM_VISIBLE __attribute__((visibility("default")))

typedef struct nccl_item {
    ncclComm_t        comm;
    coll_request_t   *req;    /* NULL: deferred init; SPLIT; SELF_SEND, SELF_RECV: a self copy */
    void             *tmp;    /* a self copy: its buffer */
    cudaStream_t      stream; /* a self copy: the call's stream */
    size_t            bytes;
    int               nranks, rank; /* deferred init */
    ncclUniqueId      id;
    int               color, key; /* deferred split */
    ncclComm_t       *split_out;
    struct nccl_item *next_split; /* the parent's next split in this group, or NULL */
    int               split_ord;  /* how many splits of its parent come before it */
    ncclResult_t      result;
    char              msg[256]; /* the made thread's last error */
} nccl_item_t;

#define DONE      ((coll_request_t *)1) /* waited, joined or copied */
#define SELF_SEND ((coll_request_t *)2)
#define SELF_RECV ((coll_request_t *)3)
#define SPLIT     ((coll_request_t *)4)
#define IS_OP(r)                                                                                   \
    ((r) != NULL && (r) != DONE && (r) != SELF_SEND && (r) != SELF_RECV && (r) != SPLIT)
#define DEFERRED(r) ((r) == NULL || (r) == SPLIT) /* made in a thread of its own */

static __thread int          group_depth;
static __thread nccl_item_t *items;
static __thread int          nitems, cap;
static __thread ncclResult_t group_error; /* a call inside the group failed to start */

ncclResult_t nccl_comm_create(ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank);

int nccl_group_depth(void)
{
    return group_depth;
}

static nccl_item_t *group_push(void)
{
    if (nitems == cap) {
        int          ncap = cap > 0 ? 2 * cap : 16;
        nccl_item_t *g    = realloc(items, sizeof(*g) * (size_t)ncap);
        if (g == NULL) {
            return NULL;
        }
        items = g;
        cap   = ncap;
    }
    memset(&items[nitems], 0, sizeof(items[nitems]));
    return &items[nitems++];
}

ncclResult_t nccl_group_add(ncclComm_t comm, coll_request_t *req, void *tmp)
{
    nccl_item_t *it = group_push();
    if (it == NULL) {
        coll_wait(req);
        free(tmp);
        return nccl_fail(comm, ncclSystemError, "ncclGroupEnd: out of memory");
    }
    it->comm = comm;
    it->req  = req;
    it->tmp  = tmp;
    return ncclSuccess;
}

ncclResult_t nccl_group_add_self(ncclComm_t comm, int send, void *buf, size_t bytes,
                                 cudaStream_t stream)
{
    nccl_item_t *it = group_push();
    if (it == NULL) {
        return nccl_fail(comm, ncclSystemError, "ncclGroupEnd: out of memory");
    }
    it->comm   = comm;
    it->req    = send ? SELF_SEND : SELF_RECV;
    it->tmp    = buf;
    it->bytes  = bytes;
    it->stream = stream;
    return ncclSuccess;
}

/* The sends of each communicator to itself, copied into its receives from itself in order; a
 * send or receive left over, or a pair of different sizes, fails the group (nothing copied for
 * that pair). */
static ncclResult_t group_run_self(void)
{
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < nitems; i++) {
        if (items[i].req != SELF_SEND && items[i].req != SELF_RECV) {
            continue;
        }
        coll_request_t *want = items[i].req == SELF_SEND ? SELF_RECV : SELF_SEND;
        int             j    = i + 1;
        while (j < nitems && !(items[j].req == want && items[j].comm == items[i].comm)) {
            j++;
        }
        nccl_item_t *s = items[i].req == SELF_SEND ? &items[i] : &items[j];
        nccl_item_t *d = items[i].req == SELF_SEND ? &items[j] : &items[i];
        ncclResult_t e = ncclSuccess;
        if (j == nitems) {
            e = nccl_fail(NULL, ncclInvalidUsage,
                          "ncclGroupEnd: rank %d: an %s to the rank itself (%zu bytes) has no "
                          "matching %s in the group",
                          items[i].comm->rank, items[i].req == SELF_SEND ? "ncclSend" : "ncclRecv",
                          items[i].bytes, items[i].req == SELF_SEND ? "ncclRecv" : "ncclSend");
        } else if (s->bytes != d->bytes) {
            e = nccl_fail(NULL, ncclInvalidArgument,
                          "ncclGroupEnd: rank %d: an ncclSend of %zu bytes to the rank itself "
                          "meets an ncclRecv of %zu bytes",
                          s->comm->rank, s->bytes, d->bytes);
        } else if (s->bytes > 0 && s->tmp != d->tmp) {
            nccl_stream_sync(s->stream); /* the work queued before each call first */
            if (d->stream != s->stream) {
                nccl_stream_sync(d->stream);
            }
            memmove(d->tmp, s->tmp, s->bytes);
        }
        if (j < nitems) {
            items[j].req = DONE;
            items[j].tmp = NULL;
        }
        items[i].req = DONE;
        items[i].tmp = NULL;
        if (e != ncclSuccess && r == ncclSuccess) {
            r = e;
        }
    }
    return r;
}

ncclResult_t nccl_group_defer_init(ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank)
{
    nccl_item_t *it = group_push();
    if (it == NULL) {
        return nccl_fail(NULL, ncclSystemError, "ncclCommInitRank: out of memory");
    }
    it->comm   = comm;
    it->nranks = nranks;
    it->rank   = rank;
    it->id     = *id;
    return ncclSuccess;
}

ncclResult_t nccl_group_defer_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm)
{
    nccl_item_t *it = group_push();
    if (it == NULL) {
        return nccl_fail(comm, ncclSystemError, "ncclCommSplit: out of memory");
    }
    it->comm      = comm;
    it->req       = SPLIT;
    it->color     = color;
    it->key       = key;
    it->split_out = newcomm;
    return ncclSuccess;
}

void nccl_group_note_error(ncclResult_t r)
{
    if (group_error == ncclSuccess) {
        group_error = r;
    }
}

NCCL_SHIM_VISIBLE ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

/* One deferred item's thread: an init, or every split of one parent in call order (the splits
 * of a communicator are rounds of its bootstrap, one after the other). Errors are recorded per
 * thread, so each item keeps its message for ncclGroupEnd's thread. */
static void *init_thread(void *arg)
{
    nccl_item_t *it = arg;
    for (;;) {
        it->result = it->req == SPLIT ? nccl_split_now(it->comm, it->color, it->key, it->split_out)
                                      : nccl_comm_create(it->comm, it->nranks, &it->id, it->rank);
        if (it->result != ncclSuccess) {
            snprintf(it->msg, sizeof(it->msg), "%s", ncclGetLastError(NULL));
        }
        if (it->req != SPLIT || it->next_split == NULL) {
            return NULL;
        }
        it = it->next_split;
    }
}

/* Do the items a and b (made, deferred) hold ranks of one new communicator? Inits: one unique
 * id. Splits: the same split call (the k-th of parents that are ranks of one communicator)
 * and one color. */
static int same_made(const nccl_item_t *a, const nccl_item_t *b)
{
    if ((a->req == SPLIT) != (b->req == SPLIT)) {
        return 0;
    }
    if (a->req != SPLIT) {
        return memcmp(&a->id, &b->id, sizeof(a->id)) == 0;
    }
    const void *pa = a->comm->siblings != NULL ? (const void *)a->comm->siblings : a->comm;
    const void *pb = b->comm->siblings != NULL ? (const void *)b->comm->siblings : b->comm;
    return pa == pb && a->split_ord == b->split_ord && a->color == b->color;
}

/* The deferred inits and splits, all at once: each blocks until every rank of its
 * communicator joined. */
static ncclResult_t group_run_inits(void)
{
    size_t       cnt  = nitems > 0 ? (size_t)nitems : 1;
    pthread_t   *th   = calloc(cnt, sizeof(*th));
    int         *lead = calloc(cnt, sizeof(*lead)), first_bad = -1;
    ncclResult_t r = ncclSuccess;
    if (th == NULL || lead == NULL) {
        free(th), free(lead);
        return nccl_fail(NULL, ncclSystemError, "ncclGroupEnd: out of memory");
    }
    for (int i = 0; i < nitems; i++) { /* chain each parent's splits; the first leads */
        items[i].next_split = NULL;
        lead[i]             = DEFERRED(items[i].req);
        for (int j = i - 1; j >= 0 && items[i].req == SPLIT; j--) {
            if (items[j].req == SPLIT && items[j].comm == items[i].comm) {
                items[j].next_split = &items[i];
                items[i].split_ord  = items[j].split_ord + 1;
                lead[i]             = 0;
                break;
            }
        }
    }
    for (int i = 0; i < nitems; i++) {
        if (lead[i] && pthread_create(&th[i], NULL, init_thread, &items[i]) != 0) {
            lead[i] = 0;
            for (nccl_item_t *k = &items[i]; k != NULL;
                 k              = k->req == SPLIT ? k->next_split : NULL) {
                k->result = ncclSystemError;
                snprintf(k->msg, sizeof(k->msg), "ncclGroupEnd: no thread");
            }
        }
    }
    for (int i = 0; i < nitems; i++) {
        if (lead[i]) {
            pthread_join(th[i], NULL);
        }
    }
    ncclComm_t *made = calloc(cnt, sizeof(*made));
    for (int i = 0; i < nitems; i++) { /* what each made (NULL: NCCL_SPLIT_NOCOLOR, a failure) */
        if (made != NULL && DEFERRED(items[i].req) && items[i].result == ncclSuccess) {
            made[i] = items[i].req == SPLIT ? *items[i].split_out : items[i].comm;
        }
        if (items[i].result != ncclSuccess && first_bad < 0) {
            first_bad = i;
            r         = items[i].result;
        }
    }
    /* ranks of one communicator made in this process are destroyed together */
    ncclComm_t *group = calloc(cnt, sizeof(*group));
    for (int i = 0; i < nitems && made != NULL && group != NULL; i++) {
        int n = 0;
        for (int j = i; j < nitems && made[i] != NULL; j++) {
            if (made[j] != NULL && same_made(&items[i], &items[j])) {
                group[n++] = made[j];
                made[j]    = j == i ? made[j] : NULL;
            }
        }
        if (n > 1) {
            nccl_make_siblings(group, n);
        }
    }
    for (int i = 0; i < nitems; i++) {
        if (DEFERRED(items[i].req)) {
            items[i].req = DONE;
        }
    }
    if (first_bad >= 0) { /* its message, for ncclGetLastError in this thread */
        nccl_fail(NULL, r, "%s", items[first_bad].msg);
    }
    free(group), free(made), free(lead), free(th);
    return r;
}

/* Every started operation, progressed round-robin until all are done. */
static ncclResult_t group_wait_ops(void)
{
    ncclResult_t r    = ncclSuccess;
    int          left = 0;
    for (int i = 0; i < nitems; i++) {
        left += IS_OP(items[i].req);
    }
    while (left > 0) {
        int progressed = 0;
        for (int i = 0; i < nitems; i++) {
            nccl_item_t *it   = &items[i];
            int          done = 0;
            if (!IS_OP(it->req)) {
                continue;
            }
            coll_result_t st = coll_test(it->req, &done);
            if (!done && st == COLL_OK) {
                continue;
            }
            if (st != COLL_OK && r == ncclSuccess) {
                r = nccl_fail(it->comm, nccl_result(st), "ncclGroupEnd: %s",
                              coll_comm_last_error(it->comm->c));
            }
            free(it->tmp);
            it->tmp = NULL;
            it->req = NULL;
            left--;
            progressed = 1;
        }
        if (!progressed) {
            sched_yield();
        }
    }
    return r;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0) {
        return nccl_fail(NULL, ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart");
    }
    if (--group_depth > 0) {
        return ncclSuccess;
    }
    int has_init = 0;
    for (int i = 0; i < nitems; i++) {
        has_init |= DEFERRED(items[i].req);
    }
    ncclResult_t r = has_init ? group_run_inits() : ncclSuccess;
    ncclResult_t c = group_run_self();
    ncclResult_t w = group_wait_ops();
    ncclResult_t e = group_error;
    nitems         = 0;
    group_error    = ncclSuccess;
    return e != ncclSuccess ? e : r != ncclSuccess ? r : c != ncclSuccess ? c : w;
}
