/* SPDX-License-Identifier: MIT */
/*
 * NCCL's communicator API on libcoll: creation (one rank, with a config, all ranks of one
 * process, by split), teardown, queries, and NCCL's error reporting.
 */
#include "nccl_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_SHIM_VISIBLE __attribute__((visibility("default")))

static __thread char nccl_last[512];

ncclResult_t nccl_result(coll_result_t st)
{
    switch (st) {
    case COLL_OK:
        return ncclSuccess;
    case COLL_INPROGRESS:
    case COLL_AGAIN:
        return ncclInProgress;
    case COLL_ERR_INVALID_ARG:
        return ncclInvalidArgument;
    case COLL_ERR_INVALID_USAGE:
    case COLL_ERR_UNSUPPORTED:
    case COLL_ERR_MISMATCH:
    case COLL_ERR_ABORTED:
        return ncclInvalidUsage;
    case COLL_ERR_NO_MEMORY:
    case COLL_ERR_SYSTEM:
    case COLL_ERR_TRANSPORT:
        return ncclSystemError;
    case COLL_ERR_REMOTE:
    case COLL_ERR_TIMEOUT:
    case COLL_ERR_REVOKED:
        return ncclRemoteError;
    case COLL_ERR_CUDA:
        return ncclUnhandledCudaError;
    default:
        return ncclInternalError;
    }
}

ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nccl_last, sizeof(nccl_last), fmt, ap);
    va_end(ap);
    if (comm != NULL && comm->async == ncclSuccess &&
        (r == ncclRemoteError || r == ncclSystemError || r == ncclInternalError)) {
        comm->async = r; /* the communicator is broken, as ncclCommGetAsyncError reports */
    }
    return r;
}

ncclResult_t nccl_check_comm(ncclComm_t comm, const char *fn)
{
    if (comm == NULL) {
        return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    }
    if (comm->c == NULL) {
        return nccl_fail(NULL, ncclInvalidUsage,
                         "%s: the communicator is not initialised (call ncclGroupEnd after "
                         "ncclCommInitRank inside a group)",
                         fn);
    }
    if (comm->finalized) {
        return nccl_fail(comm, ncclInvalidUsage, "%s: the communicator was finalized", fn);
    }
    return ncclSuccess;
}

/* A libcoll failure of call fn on comm (NULL before one exists). */
static ncclResult_t nccl_coll_fail(ncclComm_t comm, coll_result_t st, const char *fn)
{
    const char *msg =
        comm != NULL && comm->c != NULL ? coll_comm_last_error(comm->c) : coll_last_error();
    return nccl_fail(comm, nccl_result(st), "%s: %s", fn, msg[0] ? msg : coll_strerror(st));
}

NCCL_SHIM_VISIBLE ncclResult_t ncclGetVersion(int *version)
{
    if (version == NULL) {
        return nccl_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
    }
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    coll_unique_id_t id;
    if (uniqueId == NULL) {
        return nccl_fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    }
    _Static_assert(sizeof(id) == sizeof(*uniqueId), "unique ids differ in size");
    coll_result_t st = coll_get_unique_id(&id);
    if (st != COLL_OK) {
        return nccl_coll_fail(NULL, st, "ncclGetUniqueId");
    }
    memcpy(uniqueId, &id, sizeof(id));
    return ncclSuccess;
}

/* Create comm's libcoll communicator now (blocking until every rank joined). */
ncclResult_t nccl_comm_create(ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank)
{
    coll_unique_id_t cid;
    memcpy(&cid, id, sizeof(cid));
    coll_result_t st = coll_comm_init_rank(&comm->c, nranks, cid, rank);
    if (st != COLL_OK) {
        comm->c = NULL;
        return nccl_coll_fail(NULL, st, "ncclCommInitRank");
    }
    comm->rank   = rank;
    comm->nranks = nranks;
    return ncclSuccess;
}

ncclResult_t nccl_group_defer_init(ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank);

static ncclResult_t nccl_init(ncclComm_t *newcomm, int nranks, ncclUniqueId commId, int rank,
                              int device, const char *fn)
{
    if (newcomm == NULL) {
        return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    }
    *newcomm = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: rank %d of %d ranks: expected nranks >= 1 and 0 <= rank < nranks", fn,
                         rank, nranks);
    }
    ncclComm_t comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        return nccl_fail(NULL, ncclSystemError, "%s: out of memory", fn);
    }
    comm->device = device;
    if (nccl_group_depth() > 0) { /* NCCL's way to create several ranks from one thread */
        ncclResult_t r = nccl_group_defer_init(comm, nranks, &commId, rank);
        if (r != ncclSuccess) {
            free(comm);
            return r;
        }
        *newcomm = comm;
        return ncclSuccess;
    }
    ncclResult_t r = nccl_comm_create(comm, nranks, &commId, rank);
    if (r != ncclSuccess) {
        free(comm);
        return r;
    }
    *newcomm = comm;
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                                int rank)
{
    return nccl_init(comm, nranks, commId, rank, 0, "ncclCommInitRank");
}

static ncclResult_t nccl_check_config(const ncclConfig_t *config, const char *fn)
{
    if (config != NULL && (config->magic != 0xcafebeef || config->size < sizeof(size_t) * 2)) {
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: config was not made with NCCL_CONFIG_INITIALIZER", fn);
    }
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                                      ncclUniqueId commId, int rank,
                                                      ncclConfig_t *config)
{
    ncclResult_t r = nccl_check_config(config, "ncclCommInitRankConfig");
    /* blocking = 0 allows ncclInProgress; creating it at once is also NCCL's behaviour */
    return r != ncclSuccess ? r
                            : nccl_init(comm, nranks, commId, rank, 0, "ncclCommInitRankConfig");
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    ncclUniqueId id;
    ncclResult_t r;
    if (comms == NULL || ndev < 1) {
        return nccl_fail(NULL, ncclInvalidArgument,
                         "ncclCommInitAll: comms is %s, ndev %d: expected an array of ndev >= 1",
                         comms == NULL ? "NULL" : "set", ndev);
    }
    if ((r = ncclGetUniqueId(&id)) != ncclSuccess) {
        return r;
    }
    ncclGroupStart();
    for (int i = 0; i < ndev; i++) {
        r = nccl_init(&comms[i], ndev, id, i, devlist != NULL ? devlist[i] : i, "ncclCommInitAll");
        if (r != ncclSuccess) {
            break;
        }
    }
    ncclResult_t g = ncclGroupEnd();
    return r != ncclSuccess ? r : g;
}

ncclResult_t nccl_split_now(ncclComm_t comm, int color, int key, ncclComm_t *newcomm)
{
    coll_comm_t  *nc = NULL;
    coll_result_t st = coll_comm_split(
        comm->c, color == NCCL_SPLIT_NOCOLOR ? COLL_SPLIT_NOCOLOR : color, key, &nc);
    if (st != COLL_OK) {
        return nccl_coll_fail(comm, st, "ncclCommSplit");
    }
    if (nc == NULL) {
        return ncclSuccess; /* NCCL_SPLIT_NOCOLOR */
    }
    ncclComm_t n = calloc(1, sizeof(*n));
    if (n == NULL) {
        coll_comm_destroy(nc);
        return nccl_fail(comm, ncclSystemError, "ncclCommSplit: out of memory");
    }
    n->c      = nc;
    n->device = comm->device;
    coll_comm_rank(nc, &n->rank);
    coll_comm_size(nc, &n->nranks);
    *newcomm = n;
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                             ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclCommSplit");
    if (r == ncclSuccess) {
        r = nccl_check_config(config, "ncclCommSplit");
    }
    if (r == ncclSuccess && newcomm == NULL) {
        r = nccl_fail(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    }
    if (r == ncclSuccess && color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        r = nccl_fail(comm, ncclInvalidArgument,
                      "ncclCommSplit: color %d is negative (only NCCL_SPLIT_NOCOLOR may be)",
                      color);
    }
    if (r != ncclSuccess) {
        if (nccl_group_depth() > 0) {
            nccl_group_note_error(r);
        }
        return r;
    }
    *newcomm = NULL;
    if (nccl_group_depth() > 0) { /* made at ncclGroupEnd, with the group's other splits */
        return nccl_group_defer_split(comm, color, key, newcomm);
    }
    return nccl_split_now(comm, color, key, newcomm);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclCommFinalize");
    if (r != ncclSuccess) {
        return r;
    }
    /* calls outside groups complete before they return; inside one, at ncclGroupEnd */
    comm->finalized = 1;
    return ncclSuccess;
}

void nccl_make_siblings(ncclComm_t *comms, int n)
{
    nccl_siblings_t *s = calloc(1, sizeof(*s));
    if (s == NULL || n < 2 || (s->comms = calloc((size_t)n, sizeof(*s->comms))) == NULL) {
        free(s);
        return; /* then each is destroyed on its own, which waits for the others' timeout */
    }
    s->n = s->left = n;
    for (int i = 0; i < n; i++) {
        s->comms[i]        = comms[i];
        comms[i]->siblings = s;
    }
}

static void *destroy_thread(void *arg)
{
    ncclComm_t comm = arg;
    coll_comm_destroy(comm->c);
    return NULL;
}

/* Destroy comm now, or, for a sibling, once every sibling was asked to be destroyed. */
static ncclResult_t nccl_destroy(ncclComm_t comm)
{
    nccl_siblings_t *s = comm->siblings;
    if (s == NULL) {
        coll_result_t st = comm->c != NULL ? coll_comm_destroy(comm->c) : COLL_OK;
        free(comm);
        return nccl_result(st);
    }
    if (!comm->destroy_asked) {
        comm->destroy_asked = 1;
        s->left--;
    }
    if (s->left > 0) {
        return ncclSuccess;
    }
    pthread_t *th = calloc((size_t)s->n, sizeof(*th));
    for (int i = 0; i < s->n; i++) {
        if (th == NULL || pthread_create(&th[i], NULL, destroy_thread, s->comms[i]) != 0) {
            coll_comm_abort(s->comms[i]->c);
            destroy_thread(s->comms[i]);
            if (th != NULL) {
                th[i] = 0;
            }
        }
    }
    for (int i = 0; i < s->n; i++) {
        if (th != NULL && th[i] != 0) {
            pthread_join(th[i], NULL);
        }
        free(s->comms[i]);
    }
    free(th);
    free(s->comms);
    free(s);
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm == NULL) {
        return ncclSuccess; /* NCCL accepts a NULL communicator here */
    }
    return nccl_destroy(comm);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (comm == NULL) {
        return ncclSuccess;
    }
    if (comm->c != NULL) {
        coll_comm_abort(comm->c);
    }
    return nccl_destroy(comm);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (comm == NULL || asyncError == NULL) {
        return nccl_fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: %s is NULL",
                         comm == NULL ? "comm" : "asyncError");
    }
    coll_result_t st = comm->c != NULL ? coll_comm_get_error(comm->c) : COLL_OK;
    *asyncError      = comm->async != ncclSuccess ? comm->async : nccl_result(st);
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with COLL_DEBUG=info for details)";
    case ncclSystemError:
        return "unhandled system error (run with COLL_DEBUG=info for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the libcoll developers";
    case ncclInvalidArgument:
        return "invalid argument (run with COLL_DEBUG=warn for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with COLL_DEBUG=warn for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

NCCL_SHIM_VISIBLE const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm; /* NCCL's is per thread too */
    return nccl_last;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclCommCount");
    if (r == ncclSuccess && count == NULL) {
        r = nccl_fail(comm, ncclInvalidArgument, "ncclCommCount: count is NULL");
    }
    if (r == ncclSuccess) {
        *count = comm->nranks;
    }
    return r;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclCommUserRank");
    if (r == ncclSuccess && rank == NULL) {
        r = nccl_fail(comm, ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    }
    if (r == ncclSuccess) {
        *rank = comm->rank;
    }
    return r;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclCommCuDevice");
    if (r == ncclSuccess && device == NULL) {
        r = nccl_fail(comm, ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
    }
    if (r == ncclSuccess) {
        *device = comm->device;
    }
    return r;
}
