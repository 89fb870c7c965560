/* SPDX-License-Identifier: MIT */
/*
 * UCX transport: one UCP context and worker per communicator; worker addresses are the listen
 * handles exchanged through the (authenticated) bootstrap; every message is one UCP active
 * message whose header carries the tag, the length and the job tag, so that libcoll's 64-bit
 * tags need no room in UCX's tag space. Eager messages are delivered from the handler through
 * the shared matching layer; rendezvous ones are fetched with ucp_am_recv_data_nbx straight into
 * a posted receive, or into a staging buffer that is then delivered. Progress and sleep are
 * libcoll's engine's (ucp_worker_progress, the worker's event fd). UCX_* variables select UCX's
 * own transports (UCX_TLS, UCX_NET_DEVICES...). Chosen with COLL_TRANSPORT=ucx; in "auto" it
 * scores below shm and tcp.
 */
#ifndef COLL_TP_UCX_H
#define COLL_TP_UCX_H

#include <ucp/api/ucp.h>

#include "match.h"
#include "transport.h"

#define COLL_UCX_HANDLE_MAGIC 0x48584355u /* "UCXH" */
#define COLL_UCX_AM_MAGIC     0x4d584355u /* "UCXM" */
#define COLL_UCX_AM_ID        11
#define COLL_UCX_MAX_MSG      ((uint64_t)1 << 46)

/* Header of every active message (little endian, 32 bytes). */
typedef struct {
    uint32_t magic;
    uint32_t src; /* sender's rank */
    uint64_t tag;
    uint64_t len;
    uint64_t job_tag;
} coll_ucx_hdr_t;

typedef struct coll_ucx_ep coll_ucx_ep_t;

/* A send in flight: the header must stay valid until UCX completes it. */
typedef struct coll_ucx_sreq {
    coll_ucx_hdr_t        hdr;
    coll_tp_op_t         *op;
    coll_ucx_ep_t        *ep;
    struct coll_ucx_sreq *next_free;
} coll_ucx_sreq_t;

/* A rendezvous receive in flight. */
typedef struct coll_ucx_rreq {
    coll_ucx_ep_t *ep;
    coll_tp_op_t  *op; /* zero copy into op->buf, else NULL: staged */
    void          *stage;
    uint64_t       tag, len;
} coll_ucx_rreq_t;

struct coll_ucx_ep {
    coll_tp_ep_t        base; /* first */
    struct coll_tp_ctx *ctx;
    ucp_ep_h            ep;
    coll_tp_match_t     match;
    coll_result_t       failed;   /* sticky */
    int                 inflight; /* sends and rendezvous receives not yet completed */
};

struct coll_tp_ctx {
    int              rank, nranks;
    uint64_t         job_tag;
    ucp_context_h    context;
    ucp_worker_h     worker;
    int              efd;     /* the worker's event fd */
    int              wake_fd; /* eventfd for wake() */
    coll_ucx_ep_t  **eps;     /* by rank */
    coll_ucx_sreq_t *sfree;
};

extern const coll_transport_ops_t coll_tp_ucx_ops;

/* ucx_ep.c */
coll_result_t coll_ucx_ep_create(struct coll_tp_ctx *ctx, int peer, const void *handle,
                                 coll_ucx_ep_t **ep_p);
void          coll_ucx_ep_destroy(coll_ucx_ep_t *ep);
coll_result_t coll_ucx_isend(coll_tp_ep_t *ep, coll_tp_op_t *op);
coll_result_t coll_ucx_irecv(coll_tp_ep_t *ep, coll_tp_op_t *op);
ucs_status_t  coll_ucx_am_handler(void *arg, const void *header, size_t header_length, void *data,
                                  size_t length, const ucp_am_recv_param_t *param);

#endif
