/* SPDX-License-Identifier: MIT */
/*
 * The transport interface: one const table of function pointers per transport (shm, tcp, and
 * later ib, ucx, p2p). A transport moves tagged byte messages between two ranks of one
 * communicator; it never knows which collective it serves. Receives can reduce on arrival
 * (dst = op(operand, incoming)) so algorithms need no staging copy.
 *
 * Ownership: the caller owns every coll_tp_op_t until its done() callback ran, so the data
 * path never allocates. done() may run inside isend/irecv/progress and must only record the
 * completion (no re-entry into the transport).
 *
 * Shared windows (optional, win_* slots; NULL in transports without them): a transport whose
 * ranks share memory may give every rank a window in two halves that all ranks map, with flags
 * per (half, slot) and an acknowledgement word per rank. The engine numbers the calls that use
 * windows (epochs, equal on every rank), writes half e % 2 in epoch e only after every rank
 * acknowledged epoch e - 2, and publishes flags and acknowledgements through these slots.
 */
#ifndef COLL_TRANSPORT_H
#define COLL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"
#include "auth.h"

#define COLL_TRANSPORT_ABI   5   /* bump on any incompatible change of this header */
#define COLL_TP_HANDLE_MAX   256 /* bytes of a listen handle exchanged through bootstrap */
#define COLL_TP_HOSTNAME_MAX 64
#define COLL_TP_WIN_SLOTS    256   /* flag slots per window half that win_* transports offer */
#define COLL_TP_SMALL_MAX    32768 /* payload bytes of one small-call slot (small_* ops) */

/* Point-to-point messages' tags (the engine's send/recv): bit 63 set, and bit 31 on a message's
 * last chunk. A send and a receive of different lengths then meet as two tags that differ in
 * that bit alone (one side's last chunk against the other's middle one), which matching
 * reports as a mismatch, instead of matching chunk by chunk and truncating. */
#define COLL_TAG_P2P     (1ull << 63)
#define COLL_TAG_P2P_END (1ull << 31)

typedef struct coll_tp_ctx coll_tp_ctx_t; /* per (communicator, transport), defined by each */

/* One small-call slot in shared memory (small_* ops), written only by its owner: the call's
 * description and payload, then the stamp with release. The stamp is (call number + 1) << 8 |
 * the call's 8-bit fingerprint, 0 before the first call; readers load it with acquire. */
typedef struct coll_tp_small {
    _Alignas(64) _Atomic uint64_t stamp;
    uint64_t      count;
    int32_t       dtype;
    int32_t       op;
    unsigned char data[COLL_TP_SMALL_MAX]; /* in the stamp's cache line up to 40 bytes */
} coll_tp_small_t;

/* What every rank publishes about itself at communicator creation. */
typedef struct coll_peer_info {
    int      rank;
    int      pid;
    uint64_t host_hash;                      /* equal on one host (or same COLL_HOSTID) */
    char     hostname[COLL_TP_HOSTNAME_MAX]; /* for messages only */
} coll_peer_info_t;

/* Non-blocking look at the job's failure notices (the bootstrap's): COLL_OK while no rank has
 * failed; else the failure (COLL_ERR_REMOTE: a rank died, aborted or failed), with a message
 * naming the rank written into msg. */
typedef coll_result_t (*coll_tp_notices_fn_t)(void *arg, char *msg, size_t msglen);

typedef struct coll_tp_init_args {
    int      rank; /* this process' rank in the communicator */
    int      nranks;
    uint64_t comm_id; /* unique per communicator: names shm segments */
    uint64_t job_tag; /* carried by every wire header, checked on receipt */
    /* From the job secret and comm_id: network transports authenticate every connection with
     * it (src/core/auth.h). */
    coll_auth_key_t         auth_key;
    const coll_peer_info_t *peers;     /* nranks entries, peers[rank] is self */
    double                  timeout_s; /* communicator's deadline for waits */
    /* NUMA node (os index) + 1 for the pages of this rank's shared memory; 0: leave it be */
    int mem_node1;
    /* Interface of the NIC nearest the rank for traffic between hosts ("eth1"); NULL or "":
     * the transport's own rule. Set only when COLL_SOCKET_IFNAME is not. */
    const char *netif;
    /* Optional (NULL: none): a connect_all() that waits on peers looks here, so that it stops
     * at once with the failure of a rank that died meanwhile instead of at its deadline. */
    coll_tp_notices_fn_t notices;
    void                *notices_arg;
} coll_tp_init_args_t;

typedef void (*coll_tp_done_fn_t)(void *arg, coll_result_t status);

/* A record's place in the tag index of matching (transports/match.h). */
typedef struct coll_tp_mlink {
    struct coll_tp_mlink *next;
    struct coll_tp_mlink *prev;
    uint64_t              tag;
} coll_tp_mlink_t;

/* One message to send or receive. Fields above the line are set by the caller. */
typedef struct coll_tp_op {
    void        *buf;     /* send: source; recv: destination */
    size_t       len;     /* bytes; a receive must be posted with the sender's length */
    uint64_t     tag;     /* matches a send to a receive on the same pair of ranks */
    const void  *operand; /* recv only: NULL = copy; else buf = op(operand, incoming) */
    coll_dtype_t dtype;   /* recv with operand: element type (len is a multiple) */
    coll_redop_t op;      /* recv with operand: SUM, PROD, MIN or MAX (never AVG) */
    /* non-NULL: buf is CUDA device memory (posted only to endpoints whose ep_caps has
     * COLL_TP_CAP_CUDA_MEM, never with an operand); what the transport copies in or out of it
     * goes by coll_cuda_copy_sync(dev, ...) (src/cuda/devmem.h) */
    const struct coll_devmem *dev;
    coll_tp_done_fn_t         done; /* completion callback */
    void                     *arg;  /* its argument */
    /* ---- owned by the transport / matching layer while in flight ---- */
    size_t             bytes; /* bytes sent, or delivered into buf */
    coll_tp_mlink_t    mlink; /* a posted receive's place in matching's index */
    struct coll_tp_op *next;
    void              *tp_priv; /* transport's own per-op pointer */
} coll_tp_op_t;

/* Base of every endpoint; transports embed it first in their own endpoint struct. */
typedef struct coll_tp_ep {
    const struct coll_transport_ops *ops;
    int                              peer; /* communicator rank of the remote side */
} coll_tp_ep_t;

enum {
    COLL_TP_CAP_HOST_MEM = 1u << 0,
    COLL_TP_CAP_CUDA_MEM = 1u << 1,
    COLL_TP_CAP_RDMA     = 1u << 2,
};

typedef struct coll_transport_ops {
    uint32_t    abi;  /* COLL_TRANSPORT_ABI, checked at registration */
    const char *name; /* "tcp": also its COLL_TCP_* parameter prefix */
    const char *desc; /* one line for collinfo */
    uint32_t    caps; /* COLL_TP_CAP_* */

    /* Can this machine run the transport at all? why_p gets a static reason if not. */
    int (*usable)(const char **why_p);
    coll_result_t (*init)(const coll_tp_init_args_t *args, coll_tp_ctx_t **ctx_p);
    void (*finalize)(coll_tp_ctx_t *ctx);
    /* Pure: can self reach peer, and how well (higher = preferred, < 0 = not reachable)? */
    int (*reachable)(const coll_peer_info_t *self, const coll_peer_info_t *peer);
    /* Open the listening side; write at most COLL_TP_HANDLE_MAX bytes of handle. */
    coll_result_t (*listen)(coll_tp_ctx_t *ctx, void *handle, size_t *handle_len_p);
    /* Connect to every rank in peers[0..npeers) given all ranks' handles (indexed by rank);
     * eps_p[i] receives the endpoint of peers[i]. May block until deadline (coll_time_s()). */
    coll_result_t (*connect_all)(coll_tp_ctx_t *ctx, const int *peers, int npeers,
                                 const void *const *handles, double deadline, coll_tp_ep_t **eps_p);
    /* Optional: every peer is connected (after a bootstrap barrier): e.g. unlink names. */
    void (*established)(coll_tp_ctx_t *ctx);
    /* Optional: every rank has finished with the communicator (its collective destroy got past
     * the bootstrap's last barrier), so connections may be closed abortively (TCP: no TIME_WAIT
     * left behind). Called just before the endpoints are closed. */
    void (*quiesce)(coll_tp_ctx_t *ctx);
    /* Data path, non-blocking. Errors here are immediate (bad length...); peer failures are
     * reported through done(). */
    coll_result_t (*isend)(coll_tp_ep_t *ep, coll_tp_op_t *op);
    coll_result_t (*irecv)(coll_tp_ep_t *ep, coll_tp_op_t *op);
    /* Move bytes on every endpoint; returns > 0 if anything happened, 0 if idle, < 0 error. */
    int (*progress)(coll_tp_ctx_t *ctx);
    /* Sleep until progress may have work or timeout_s passes, or wake() is called. */
    void (*block)(coll_tp_ctx_t *ctx, double timeout_s);
    /* Make a block() in another thread return (abort). Async-signal-safe where possible. */
    void (*wake)(coll_tp_ctx_t *ctx);
    void (*ep_close)(coll_tp_ep_t *ep);
    /* Optional: what this endpoint's data path takes beyond host memory (COLL_TP_CAP_CUDA_MEM:
     * ops with dev set, e.g. by GPUDirect RDMA); NULL means host memory only. */
    uint32_t (*ep_caps)(coll_tp_ep_t *ep);

    /* ---- optional: shared windows ---- */
    /* Bytes of one window half every rank of the communicator offers (the same on every rank),
     * 0 when this context has none (not every rank on this host, or disabled). */
    size_t (*win_size)(coll_tp_ctx_t *ctx);
    /* Half `parity` (0 or 1) of rank's window, mapped here; rank may be this process' own. */
    void *(*win_ptr)(coll_tp_ctx_t *ctx, int rank, int parity);
    /* Publish the own flag (parity, slot) as written for epoch (after the data, release).
     * For publish and poll, epoch is a stamp: the epoch << 8 | the call's fingerprint (8 bits),
     * so that a rank in another call of the same epoch is never taken for a match. */
    void (*win_publish)(coll_tp_ctx_t *ctx, int parity, uint32_t slot, uint64_t epoch);
    /* Is rank's flag (parity, slot) published for epoch? COLL_OK yes; COLL_INPROGRESS not yet,
     * or the same epoch with another fingerprint (a desync the engine's timeout reports) (a
     * later publish makes block() return); < 0 the rank failed. */
    coll_result_t (*win_poll)(coll_tp_ctx_t *ctx, int rank, int parity, uint32_t slot,
                              uint64_t epoch);
    /* Publish that this rank finished every epoch <= epoch (in order, after its last read). */
    void (*win_ack)(coll_tp_ctx_t *ctx, uint64_t epoch);
    /* Has every rank (this one too) acknowledged epoch? COLL_OK; COLL_INPROGRESS with *rank_p a
     * rank that has not (a later acknowledgement makes block() return); < 0 with *rank_p the
     * rank that failed. */
    coll_result_t (*win_acked)(coll_tp_ctx_t *ctx, uint64_t epoch, int *rank_p);

    /* ---- optional, with windows: small-call slots (src/engine/small.c) ---- */
    /* Slot `parity` (0 or 1) of rank, mapped here; rank may be this process' own. */
    coll_tp_small_t *(*small_slot)(coll_tp_ctx_t *ctx, int rank, int parity);
    /* After storing the own slot's stamp: wake the ranks sleeping in block(). */
    void (*small_publish)(coll_tp_ctx_t *ctx);
    /* Does rank's slot `parity` hold call number stamp >> 8? COLL_OK yes (whatever its
     * fingerprint: the caller compares); COLL_INPROGRESS not yet (with arm set, a later publish
     * makes block() return: arm before sleeping; without, the poll reads nothing else of the
     * rank's, for spinning); < 0 the rank failed. */
    coll_result_t (*small_poll)(coll_tp_ctx_t *ctx, int rank, int parity, uint64_t stamp, int arm);
} coll_transport_ops_t;

/* transports/registry.c */
int                         coll_tp_registry_count(void);
const coll_transport_ops_t *coll_tp_registry_get(int i);
const coll_transport_ops_t *coll_tp_registry_find(const char *name);

#endif
