/* SPDX-License-Identifier: MIT */
/*
 * InfiniBand / RoCE verbs transport. COLL_IB_NQPS reliable-connected QPs per peer are set up either
 * with librdmacm (ib_cm.c: IP addresses, so RoCE v2 and its GID come from the address, each QP its
 * own rdma_cm connection) or without it (ib_boot.c: the QPs are created with plain verbs, their
 * numbers, PSNs and rings exchanged over an authenticated TCP socket per peer, and moved
 * INIT -> RTR -> RTS by hand with the GID that ib_gid.c chose). Every QP has a ring of
 * COLL_IB_SLOTS registered slots on the receiving side; the sender copies a fragment (header +
 * payload) into a registered send slot and RDMA WRITEs it WITH IMMEDIATE (the slot index) straight
 * into a free remote slot, inline when it is small; the receiver delivers it through the shared
 * matching layer and returns the slot as a credit (a zero-length WRITE WITH IMMEDIATE, credit bit
 * set), so the sender never overruns a ring. Fragments of one message are striped over the QPs. A
 * completion error or a disconnect fails the peer's operations with COLL_ERR_TRANSPORT naming it.
 */
#ifndef COLL_TP_IB_H
#define COLL_TP_IB_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#ifdef HAVE_RDMACM
#include <rdma/rdma_cma.h>
#else
struct rdma_cm_id;
struct rdma_event_channel;
#endif

#include "match.h"
#include "transport.h"

#define COLL_IB_HANDLE_MAGIC 0x4842494cu /* "LIBH" */
#define COLL_IB_FRAG_MAGIC   0x4642494cu /* "LIBF" */
#define COLL_IB_MAX_QPS      8
#define COLL_IB_CREDIT_BIT   (1u << 31)
#define COLL_IB_MAX_MSG      ((uint64_t)1 << 46)

/* How the QPs are connected (COLL_IB_CM); every rank must use the same. */
enum { COLL_IB_CM_RDMACM = 1, COLL_IB_CM_BOOTSTRAP = 2 };

/* The listen handle: how the connection manager or the bootstrap socket is reached. */
typedef struct {
    uint32_t magic;
    uint16_t family;
    uint16_t port; /* network order */
    uint8_t  addr[16];
    uint32_t cm; /* COLL_IB_CM_* */
} coll_ib_handle_t;

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
    uint32_t           psn; /* bootstrap: our first packet sequence number */
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
    int                 sock; /* bootstrap: the socket of the exchange, kept to see the peer die */
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
    int                        port;
    int                        cm;     /* COLL_IB_CM_* */
    struct sockaddr_storage    ipaddr; /* the device's IP address (family 0: none) */
    /* the GID ib_gid.c chose and what the bootstrap path puts in its address vectors */
    int             gid_index;
    union ibv_gid   gid;
    uint16_t        lid;
    uint8_t         mtu;       /* enum ibv_mtu, the active one */
    uint8_t         is_global; /* RoCE (Ethernet): every packet carries the GRH */
    coll_auth_key_t auth_key;
    int             boot_fd;       /* bootstrap: listening socket */
    double          next_liveness; /* bootstrap: when progress next polls the sockets */
    int             max_inline;
    int             wake_fd;
    coll_ib_ep_t  **eps;
    coll_ib_sreq_t *sfree;
    coll_ib_qp_t  **qtab; /* every QP set up, by gidx */
    int             nq;
};

extern const coll_transport_ops_t coll_tp_ib_ops;

/* ib.c */
coll_result_t coll_ib_eps_create(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                 const void *const *handles, coll_tp_ep_t **eps_p);
coll_result_t coll_ib_handle_get(struct coll_tp_ctx *ctx, const void *handle, int peer,
                                 coll_ib_handle_t *h_p, struct sockaddr_storage *ss_p);
/* ib_gid.c: the port's GID for RoCE v2 (or COLL_IB_GID_INDEX), its LID and MTU, into ctx */
coll_result_t coll_ib_gid_choose(struct coll_tp_ctx *ctx);
/* ib_cm.c: connections through librdmacm */
coll_result_t coll_ib_cm_open(struct coll_tp_ctx *ctx, int required);
void          coll_ib_cm_close(struct coll_tp_ctx *ctx);
coll_result_t coll_ib_cm_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p);
coll_result_t coll_ib_cm_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                     const void *const *handles, double deadline);
void          coll_ib_cm_events(struct coll_tp_ctx *ctx);
void          coll_ib_cm_qp_destroy(coll_ib_qp_t *q);
/* ib_boot.c: connections through plain verbs and a socket per peer */
coll_result_t coll_ib_boot_listen(struct coll_tp_ctx *ctx, void *handle, size_t *len_p);
coll_result_t coll_ib_boot_connect_all(struct coll_tp_ctx *ctx, const int *peers, int npeers,
                                       const void *const *handles, double deadline);
void          coll_ib_boot_liveness(struct coll_tp_ctx *ctx);
/* ib_ep.c: data */
struct ibv_qp_init_attr coll_ib_qp_attr(const struct coll_tp_ctx *ctx); /* RC, our CQ, inline */
coll_result_t coll_ib_qp_setup(coll_ib_qp_t *q); /* rings + posted receives, after the QP */
void          coll_ib_qp_ready(coll_ib_qp_t *q, uint64_t raddr, uint32_t rkey);
void          coll_ib_ep_destroy(coll_ib_ep_t *ep);
void          coll_ib_ep_fail(coll_ib_ep_t *ep, const char *why);
coll_result_t coll_ib_isend(coll_tp_ep_t *ep, coll_tp_op_t *op);
coll_result_t coll_ib_irecv(coll_tp_ep_t *ep, coll_tp_op_t *op);
int           coll_ib_poll_cq(struct coll_tp_ctx *ctx);

#endif
