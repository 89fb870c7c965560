/* SPDX-License-Identifier: MIT */
/*
 * InfiniBand / RoCE verbs transport. Connections are made with librdmacm (IP addresses, so RoCE v2
 * and its GID come from the address; COLL_IB_NQPS reliable-connected QPs per peer, each its own
 * rdma_cm connection). Every QP has a ring of COLL_IB_SLOTS registered slots on the receiving
 * side; the sender copies a fragment (header + payload) into a registered send slot and RDMA
 * WRITEs it WITH IMMEDIATE (the slot index) straight into a free remote slot, inline when it is
 * small; the receiver delivers it through the shared matching layer and returns the slot as a
 * credit (a zero-length WRITE WITH IMMEDIATE, credit bit set), so the sender never overruns a ring.
 * Fragments of one message are striped over the QPs. A completion error or a disconnect fails
 * the peer's operations with COLL_ERR_TRANSPORT naming it.
 */
#ifndef COLL_TP_IB_H
#define COLL_TP_IB_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "match.h"
#include "transport.h"

#define COLL_IB_HANDLE_MAGIC 0x4842494cu /* "LIBH" */
#define COLL_IB_FRAG_MAGIC   0x4642494cu /* "LIBF" */
#define COLL_IB_MAX_QPS      8
#define COLL_IB_CREDIT_BIT   (1u << 31)
#define COLL_IB_MAX_MSG      ((uint64_t)1 << 46)

/* At the start of every slot; the payload follows. */
typedef struct {
    uint32_t magic;
    uint32_t len; /* payload bytes in this fragment */
    uint64_t tag;
    uint64_t total;
    uint64_t off;
} coll_ib_frag_t;

/* Private data of a connection request / accept: who and where the ring is. */
typedef struct {
    uint32_t magic;
    int32_t  rank;
    uint32_t qp_index;
    uint32_t rkey;
    uint64_t job_tag;
    uint64_t ring_addr;
} coll_ib_conn_t;

struct coll_tp_ctx;
typedef struct coll_ib_ep coll_ib_ep_t;

/* A send waiting for credits or in flight: fragments are produced from it in order. */
typedef struct coll_ib_sreq {
    coll_tp_op_t        *op;
    size_t               off;     /* next byte to fragment */
    int                  pending; /* fragments posted, not yet completed */
    struct coll_ib_sreq *next;
} coll_ib_sreq_t;

typedef struct {
    coll_ib_ep_t      *ep;
    int                index;
    int                gidx; /* in ctx->qtab: completions find the QP by it */
    struct rdma_cm_id *id;
    struct ibv_qp     *qp;
    int                connected;
    /* receive ring (ours, written by the peer) and send slots (ours, read by the HCA) */
    char            *ring;
    struct ibv_mr   *ring_mr;
    char            *sbuf;
    struct ibv_mr   *sbuf_mr;
    coll_ib_sreq_t **sowner; /* send slot -> request it carries a fragment of */
    int              snext;  /* next send slot */
    int              sfree;  /* free send slots */
    /* the peer's ring */
    uint64_t raddr;
    uint32_t rkey;
    int      rnext;     /* next remote slot */
    int      credits;   /* free remote slots */
    int      to_return; /* slots consumed here, not yet returned as credits */
} coll_ib_qp_t;

struct coll_ib_ep {
    coll_tp_ep_t        base; /* first */
    struct coll_tp_ctx *ctx;
    coll_ib_qp_t        qps[COLL_IB_MAX_QPS];
    int                 nconnected;
    int                 rr; /* next QP to stripe on */
    coll_tp_match_t     match;
    coll_ib_sreq_t     *sq_head, *sq_tail; /* sends waiting for fragments to go out */
    coll_result_t       failed;
};

struct coll_tp_ctx {
    int                        rank, nranks;
    uint64_t                   job_tag;
    int                        nqps, slots;
    size_t                     slot_size;
    struct ibv_context        *verbs;
    struct ibv_pd             *pd;
    struct ibv_cq             *cq;
    struct ibv_comp_channel   *chan;
    struct rdma_event_channel *ech;
    struct rdma_cm_id         *listen_id;
    char                       devname[64];
    int                        max_inline;
    int                        wake_fd;
    coll_ib_ep_t             **eps;
    coll_ib_sreq_t            *sfree;
    coll_ib_qp_t             **qtab; /* every QP set up, by gidx */
    int                        nq;
};

extern const coll_transport_ops_t coll_tp_ib_ops;

/* ib_cm.c: connections */
coll_result_t coll_ib_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p);
coll_result_t coll_ib_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                  const void *const *handles, double deadline,
                                  coll_tp_ep_t **eps_p);
void          coll_ib_cm_events(struct coll_tp_ctx *ctx);
/* ib_ep.c: data */
coll_result_t coll_ib_qp_setup(coll_ib_qp_t *q); /* rings + posted receives, after the QP */
void          coll_ib_ep_destroy(coll_ib_ep_t *ep);
void          coll_ib_ep_fail(coll_ib_ep_t *ep, const char *why);
coll_result_t coll_ib_isend(coll_tp_ep_t *ep, coll_tp_op_t *op);
coll_result_t coll_ib_irecv(coll_tp_ep_t *ep, coll_tp_op_t *op);
int           coll_ib_poll_cq(struct coll_tp_ctx *ctx);

#endif
