/* SPDX-License-Identifier: MIT */
/*
 * coll.h -- the public interface of libcoll, a collective communication library for training
 * neural networks. Communicators, collectives (blocking and non-blocking), point-to-point
 * send/recv, errors and introspection. This is the only installed header; C99 and C++ safe.
 * Semantics follow NCCL where NCCL defines them (in-place rules, dtype and op numbering).
 */
#ifndef COLL_H
#define COLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define COLL_API __attribute__((visibility("default")))
#else
#define COLL_API
#endif

/** @brief Library version: major * 10000 + minor * 100 + patch. */
#define COLL_VERSION_MAJOR 0
#define COLL_VERSION_MINOR 1
#define COLL_VERSION_PATCH 0
#define COLL_VERSION_CODE                                                                          \
    (COLL_VERSION_MAJOR * 10000 + COLL_VERSION_MINOR * 100 + COLL_VERSION_PATCH)

/*
 * Result codes: one table is the single source of truth for the values and their strings.
 * Errors are negative, non-errors are zero or positive.
 */
#define COLL_RESULT_MAP(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(INPROGRESS, 1, "operation in progress")                                                      \
    X(AGAIN, 2, "resources busy, retry")                                                           \
    X(ERR_INVALID_ARG, -1, "invalid argument")                                                     \
    X(ERR_INVALID_USAGE, -2, "invalid usage")                                                      \
    X(ERR_NO_MEMORY, -3, "out of memory")                                                          \
    X(ERR_SYSTEM, -4, "system call failed")                                                        \
    X(ERR_TRANSPORT, -5, "transport failure")                                                      \
    X(ERR_REMOTE, -6, "remote rank failed")                                                        \
    X(ERR_TIMEOUT, -7, "timed out")                                                                \
    X(ERR_UNSUPPORTED, -8, "not supported")                                                        \
    X(ERR_CUDA, -9, "CUDA error")                                                                  \
    X(ERR_INTERNAL, -10, "internal error")                                                         \
    X(ERR_ABORTED, -11, "communicator aborted")                                                    \
    X(ERR_MISMATCH, -12, "ranks disagree on the operation")                                        \
    X(ERR_REVOKED, -13, "communicator revoked")

/** @brief Result of every libcoll call that can fail: errors are < 0. */
typedef enum {
#define COLL_RESULT_ENUM_(_name, _val, _str) COLL_##_name = _val,
    COLL_RESULT_MAP(COLL_RESULT_ENUM_)
#undef COLL_RESULT_ENUM_
} coll_result_t;

/** @brief Element types. The numbering is NCCL's, so values can be passed through unchanged. */
typedef enum {
    COLL_INT8     = 0,
    COLL_UINT8    = 1,
    COLL_INT32    = 2,
    COLL_UINT32   = 3,
    COLL_INT64    = 4,
    COLL_UINT64   = 5,
    COLL_FLOAT16  = 6, /* IEEE binary16; reduced in fp32, rounded to nearest even */
    COLL_FLOAT32  = 7,
    COLL_FLOAT64  = 8,
    COLL_BFLOAT16 = 9, /* bfloat16; reduced in fp32, rounded to nearest even */
    COLL_DTYPE_COUNT
} coll_dtype_t;

/** @brief Reduction operators (NCCL numbering). AVG divides the sum by the rank count once. */
typedef enum {
    COLL_SUM  = 0,
    COLL_PROD = 1,
    COLL_MAX  = 2,
    COLL_MIN  = 3,
    COLL_AVG  = 4,
    COLL_REDOP_COUNT
} coll_redop_t;

/** @brief Opaque communicator. */
typedef struct coll_comm coll_comm_t;
/** @brief Opaque handle of a non-blocking operation. */
typedef struct coll_request coll_request_t;

/** @brief Bytes in a unique id (same size as NCCL's). */
#define COLL_UNIQUE_ID_BYTES 128
/** @brief Rendezvous handle: the root's address and a random job secret. Pass it out of band. */
typedef struct {
    char internal[COLL_UNIQUE_ID_BYTES];
} coll_unique_id_t;

/** @brief color for coll_comm_split() that makes the caller part of no new communicator. */
#define COLL_SPLIT_NOCOLOR (-1)

/** @brief Per-communicator settings; they take precedence over the environment. */
typedef struct {
    size_t      size;      /* sizeof(coll_config_t), set by COLL_CONFIG_INITIALIZER */
    double      timeout_s; /* deadline of every wait in seconds; <= 0 takes COLL_TIMEOUT */
    const char *name;      /* communicator name used in log lines; NULL for none */
} coll_config_t;

/** @brief Initialiser giving every field its "use the environment" value. */
#define COLL_CONFIG_INITIALIZER                                                                    \
    {                                                                                              \
        sizeof(coll_config_t), 0.0, NULL                                                           \
    }

/* ---- library ---- */

/**
 * @brief Join the job described by the environment (collrun, torchrun, Slurm, Open MPI, MPICH)
 *        and create the world communicator. MPI-style; call once per process.
 * @param [in,out] argc  may be NULL; arguments are not modified at present
 * @param [in,out] argv  may be NULL
 * @param [out] world_p  the world communicator
 * @return COLL_OK, or an error with coll_last_error() saying which variable was missing or wrong.
 */
COLL_API coll_result_t coll_init(int *argc, char ***argv, coll_comm_t **world_p);

/** @brief Destroy the world communicator made by coll_init(). Collective over the world. */
COLL_API coll_result_t coll_finalize(void);

/** @brief Version code (COLL_VERSION_CODE of the library actually loaded). */
COLL_API coll_result_t coll_get_version(int *version_p);

/** @brief Static string for a result code; never NULL. */
COLL_API const char *coll_strerror(coll_result_t result);

/** @brief Message of the last error raised by this thread outside a communicator (init). */
COLL_API const char *coll_last_error(void);

/** @brief Size in bytes of one element of dtype, or 0 if dtype is not valid. */
COLL_API size_t coll_dtype_size(coll_dtype_t dtype);

/** @brief Short name of a dtype ("float", "bfloat16", ...) or "invalid". */
COLL_API const char *coll_dtype_name(coll_dtype_t dtype);

/** @brief Short name of an op ("sum", "avg", ...) or "invalid". */
COLL_API const char *coll_redop_name(coll_redop_t op);

/* ---- communicators ---- */

/**
 * @brief Create a new rendezvous: starts a bootstrap root in this process, which must stay
 *        alive until every communicator made from the id is destroyed (NCCL semantics).
 */
COLL_API coll_result_t coll_get_unique_id(coll_unique_id_t *id_p);

/**
 * @brief Collective over nranks processes holding the same id: create a communicator.
 * @param [out] comm_p  new communicator
 * @param [in] nranks   number of ranks, >= 1
 * @param [in] id       from coll_get_unique_id() on one process
 * @param [in] rank     this process' rank, 0 <= rank < nranks
 */
COLL_API coll_result_t coll_comm_init_rank(coll_comm_t **comm_p, int nranks, coll_unique_id_t id,
                                           int rank);

/** @brief coll_comm_init_rank() with per-communicator settings (config may be NULL). */
COLL_API coll_result_t coll_comm_init_rank_config(coll_comm_t **comm_p, int nranks,
                                                  coll_unique_id_t id, int rank,
                                                  const coll_config_t *config);

/**
 * @brief Collective over comm: ranks with the same color form a new communicator, ordered by
 *        key then by old rank. color COLL_SPLIT_NOCOLOR yields *newcomm_p == NULL.
 */
COLL_API coll_result_t coll_comm_split(coll_comm_t *comm, int color, int key,
                                       coll_comm_t **newcomm_p);

/**
 * @brief Collective: wait until every rank has finished its operations, then free comm.
 *        A rank that never arrives delays this call at most by the communicator's timeout.
 */
COLL_API coll_result_t coll_comm_destroy(coll_comm_t *comm);

/**
 * @brief Mark comm as failed: every pending and future wait on it returns COLL_ERR_ABORTED,
 *        and the other ranks are told. Safe from any thread; comm must still be destroyed.
 */
COLL_API coll_result_t coll_comm_abort(coll_comm_t *comm);

/**
 * @brief Revoke comm on every rank: pending and later operations on it fail with
 *        COLL_ERR_REVOKED everywhere, so that all survivors stop and can shrink it.
 */
COLL_API coll_result_t coll_comm_revoke(coll_comm_t *comm);

/**
 * @brief Collective over the survivors of a failure: agree on which ranks are alive (those
 *        that call it before the communicator's timeout) and build a communicator of them,
 *        ranked in their old order. comm stays to be destroyed. Needs the bootstrap root
 *        (in old rank 0's process) alive.
 */
COLL_API coll_result_t coll_comm_shrink(coll_comm_t *comm, coll_comm_t **newcomm_p);

/** @brief This process' rank in comm. */
COLL_API coll_result_t coll_comm_rank(const coll_comm_t *comm, int *rank_p);
/** @brief Number of ranks in comm. */
COLL_API coll_result_t coll_comm_size(const coll_comm_t *comm, int *size_p);
/**
 * @brief Number of hosts comm's ranks run on (as COLL_HOSTID or the host's identity tells them
 *        apart). 1: every rank shares this host, where blocking all-reduces, reduce-scatters
 *        and all-gathers take the single-copy direct path (which matches only blocking calls).
 */
COLL_API coll_result_t coll_comm_nhosts(const coll_comm_t *comm, int *nhosts_p);
/** @brief First error the communicator hit (COLL_OK if none), like ncclCommGetAsyncError. */
COLL_API coll_result_t coll_comm_get_error(const coll_comm_t *comm);
/** @brief Human-readable message of the communicator's last error (argument, rank or peer). */
COLL_API const char *coll_comm_last_error(const coll_comm_t *comm);
/**
 * @brief Text of comm's unfinished operations, one line each: collective and shape, sequence
 * number, time pending, steps done, the rank waited on. Local (not collective).
 * @param [in] comm communicator
 * @param [out] buf receives the text, always terminated, truncated at whole lines
 * @param [in] len size of buf
 * @return COLL_OK, or COLL_ERR_INVALID_ARG (NULL buf or len 0, bad handle)
 */
COLL_API coll_result_t coll_comm_dump_pending(coll_comm_t *comm, char *buf, size_t len);
/**
 * @brief Straggler summary over the last 1024 collectives on comm: for each rank, how often it
 * arrived last and by how much on average and at most. Collective: every rank calls it, and
 * every rank gets the same text (one line per rank).
 * @param [in] comm communicator
 * @param [out] buf receives the text, always terminated
 * @param [in] len size of buf
 * @return COLL_OK, COLL_ERR_INVALID_ARG, or the error of the all-gather it performs
 */
COLL_API coll_result_t coll_comm_stats(coll_comm_t *comm, char *buf, size_t len);

/* ---- shareable memory and registered buffers ----
 * Like ncclMemAlloc and ncclCommWindowRegister: memory from coll_mem_alloc() can be mapped by the
 * other processes of its host. Once every rank of a one-host communicator has registered such a
 * buffer with coll_comm_register(), blocking all-reduces (send and receive buffers registered),
 * reduce-scatters (send buffers) and all-gathers (receive, else send buffers) whose buffers lie
 * in registered memory on every rank use the peers' buffers directly (one copy, no staging);
 * other calls run as before. */

/** @brief Opaque registration of a buffer with a communicator. */
typedef struct coll_reg coll_reg_t;

/**
 * @brief Allocate bytes of zeroed, page-aligned memory that other processes of this host can map
 *        (a memfd mapping). Local (not collective). Free with coll_mem_free().
 * @return COLL_OK, COLL_ERR_INVALID_ARG (ptr_p NULL or bytes 0), COLL_ERR_NO_MEMORY or
 *         COLL_ERR_SYSTEM (memfd_create/ftruncate/mmap failed; coll_last_error() says which)
 */
COLL_API coll_result_t coll_mem_alloc(void **ptr_p, size_t bytes);
/**
 * @brief Free memory from coll_mem_alloc() (ptr exactly as returned; NULL does nothing).
 * @return COLL_OK, COLL_ERR_INVALID_ARG (ptr not from coll_mem_alloc) or COLL_ERR_INVALID_USAGE
 *         (still registered: coll_comm_deregister() first)
 */
COLL_API coll_result_t coll_mem_free(void *ptr);
/**
 * @brief Collective over comm: every rank registers [buf, buf + bytes) of its coll_mem_alloc()
 *        memory (sizes may differ between ranks; registrations are matched by call order). On a
 *        communicator whose ranks are all on one host with shared memory, each rank maps the
 *        others' buffers; elsewhere the registration is kept but used by nothing.
 * @param [out] reg_p the registration, for coll_comm_deregister()
 * @return COLL_OK; COLL_ERR_INVALID_ARG on every rank when any rank's buffer is not inside one
 *         coll_mem_alloc() allocation (the message names the rank), COLL_ERR_SYSTEM when a
 *         peer's memory cannot be mapped, or the communicator's error
 */
COLL_API coll_result_t coll_comm_register(coll_comm_t *comm, void *buf, size_t bytes,
                                          coll_reg_t **reg_p);
/** @brief Collective: drop a registration (every rank at the same point; on a failed
 *         communicator it is dropped locally). COLL_ERR_INVALID_ARG for an unknown reg. */
COLL_API coll_result_t coll_comm_deregister(coll_comm_t *comm, coll_reg_t *reg);

/* ---- collectives (blocking) ----
 * In place as NCCL defines it: allreduce/broadcast/reduce when sendbuf == recvbuf;
 * reduce_scatter when sendbuf + rank * recvcount == recvbuf; allgather when
 * recvbuf + rank * sendcount == sendbuf. Counts are in elements. */

/** @brief recvbuf[i] = op over ranks of sendbuf[i], for i < count, on every rank. */
COLL_API coll_result_t coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm);
/** @brief Reduce nranks * recvcount elements; rank r receives block r. */
COLL_API coll_result_t coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm);
/** @brief recvbuf block r = sendbuf of rank r (sendcount elements each). */
COLL_API coll_result_t coll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      coll_dtype_t dtype, coll_comm_t *comm);
/** @brief recvbuf = root's sendbuf on every rank (sendbuf is read only on root). */
COLL_API coll_result_t coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_dtype_t dtype, int root, coll_comm_t *comm);
/** @brief root's recvbuf = op over ranks of sendbuf (recvbuf is written only on root). */
COLL_API coll_result_t coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_dtype_t dtype, coll_redop_t op, int root,
                                   coll_comm_t *comm);
/** @brief Block p of sendbuf goes to rank p and lands in its block r (count elements each). */
COLL_API coll_result_t coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_dtype_t dtype, coll_comm_t *comm);
/** @brief Returns once every rank has entered the barrier. */
COLL_API coll_result_t coll_barrier(coll_comm_t *comm);
/** @brief Send count elements to peer; matched in order with the peer's coll_recv. */
COLL_API coll_result_t coll_send(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                 coll_comm_t *comm);
/** @brief Receive count elements from peer; the sender's count must be equal. */
COLL_API coll_result_t coll_recv(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                 coll_comm_t *comm);

/* ---- collectives (non-blocking): start, then coll_wait() or coll_test() ----
 * Buffers must stay valid and untouched until completion. Operations on one communicator
 * must be started in the same order on every rank; they may then overlap. */

COLL_API coll_result_t coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm,
                                       coll_request_t **req_p);
COLL_API coll_result_t coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                            coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm,
                                            coll_request_t **req_p);
COLL_API coll_result_t coll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                       coll_dtype_t dtype, coll_comm_t *comm,
                                       coll_request_t **req_p);
COLL_API coll_result_t coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_dtype_t dtype, int root, coll_comm_t *comm,
                                       coll_request_t **req_p);
COLL_API coll_result_t coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_dtype_t dtype, coll_redop_t op, int root,
                                    coll_comm_t *comm, coll_request_t **req_p);
COLL_API coll_result_t coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_dtype_t dtype, coll_comm_t *comm,
                                      coll_request_t **req_p);
COLL_API coll_result_t coll_ibarrier(coll_comm_t *comm, coll_request_t **req_p);
COLL_API coll_result_t coll_isend(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                  coll_comm_t *comm, coll_request_t **req_p);
COLL_API coll_result_t coll_irecv(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                  coll_comm_t *comm, coll_request_t **req_p);

/**
 * @brief Block until req completes (or fails, or its deadline passes), then release it.
 * @return the operation's result.
 */
COLL_API coll_result_t coll_wait(coll_request_t *req);
/** @brief Wait for n requests (NULL entries are skipped); returns the first error. */
COLL_API coll_result_t coll_waitall(int n, coll_request_t **reqs);
/**
 * @brief Make progress without blocking. *done_p = 1 when finished, and then req is released
 *        and the operation's result returned; otherwise *done_p = 0 and COLL_OK.
 */
COLL_API coll_result_t coll_test(coll_request_t *req, int *done_p);

/* ---- collectives on a CUDA stream (NCCL's semantics) ----
 * The call enqueues the operation on stream and returns: it starts once the stream's earlier
 * work is done, and the stream's later work waits for its end. Buffers may be device memory
 * (cudaMalloc, managed) or host memory. Calls on one communicator must be made in the same
 * order on every rank, mixed freely with the host calls above. A failure after the call
 * returned is reported by coll_comm_get_error()/coll_comm_last_error() and by the next call;
 * the stream is still released. Without CUDA (build or driver) they return
 * COLL_ERR_UNSUPPORTED. The host calls above accept device memory too: they run after the
 * legacy default stream's earlier work and finish before returning (blocking) or at
 * coll_wait (non-blocking), as a CUDA-aware MPI does. */

/** @brief A cudaStream_t as an opaque pointer; NULL is the legacy default stream. */
typedef void *coll_stream_t;

COLL_API coll_result_t coll_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                             coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm,
                                             coll_stream_t stream);
COLL_API coll_result_t coll_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
                                                  size_t recvcount, coll_dtype_t dtype,
                                                  coll_redop_t op, coll_comm_t *comm,
                                                  coll_stream_t stream);
COLL_API coll_result_t coll_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                             coll_dtype_t dtype, coll_comm_t *comm,
                                             coll_stream_t stream);
COLL_API coll_result_t coll_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
                                             coll_dtype_t dtype, int root, coll_comm_t *comm,
                                             coll_stream_t stream);
COLL_API coll_result_t coll_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                          coll_dtype_t dtype, coll_redop_t op, int root,
                                          coll_comm_t *comm, coll_stream_t stream);
COLL_API coll_result_t coll_alltoall_stream(const void *sendbuf, void *recvbuf, size_t count,
                                            coll_dtype_t dtype, coll_comm_t *comm,
                                            coll_stream_t stream);
COLL_API coll_result_t coll_send_stream(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                        coll_comm_t *comm, coll_stream_t stream);
COLL_API coll_result_t coll_recv_stream(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                        coll_comm_t *comm, coll_stream_t stream);

/* ---- introspection (used by collinfo) ---- */

/** @brief One configuration parameter as the library resolved it. */
typedef struct {
    const char *name;   /* environment variable, e.g. "COLL_TIMEOUT" */
    const char *type;   /* "int", "size", "bool", "time", "enum", "list", "string" */
    const char *value;  /* effective value as text */
    const char *deflt;  /* default as text */
    const char *source; /* "default", "environment", "config file <path>" */
    const char *subsys; /* log subsystem the parameter belongs to */
    const char *help;   /* one line */
} coll_param_info_t;

/** @brief Number of parameters (loads the configuration on first use). */
COLL_API int coll_param_count(void);
/** @brief Describe parameter i, 0 <= i < coll_param_count(). */
COLL_API coll_result_t coll_param_get(int i, coll_param_info_t *info_p);

/** @brief One transport built into the library. */
typedef struct {
    const char *name;    /* "shm", "tcp", ... */
    const char *desc;    /* one line */
    int         usable;  /* 1 if it can run on this machine now */
    const char *why_not; /* reason when not usable, else "" */
} coll_transport_info_t;

/** @brief Number of transports built in. */
COLL_API int coll_transport_count(void);
/** @brief Describe transport i. */
COLL_API coll_result_t coll_transport_get(int i, coll_transport_info_t *info_p);

/** @brief One algorithm built into the library. */
typedef struct {
    const char *name;  /* value accepted by COLL_ALGO, e.g. "ring" */
    const char *desc;  /* one line */
    const char *colls; /* collectives it implements, comma separated */
} coll_algo_info_t;

/** @brief Number of algorithms built in. */
COLL_API int coll_algo_count(void);
/** @brief Describe algorithm i. */
COLL_API coll_result_t coll_algo_get(int i, coll_algo_info_t *info_p);

#ifdef __cplusplus
}
#endif
#endif /* COLL_H */
