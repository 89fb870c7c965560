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
 * set), so the sender never overruns a ring. Fragments of one message are striped over the QPs.
 * Sends of at least COLL_IB_RNDV_MIN bytes skip the copies: one RTS fragment names the sender's
 * registered buffer, the receiver RDMA READs it and answers FIN (ib_rndv.c; registrations come
 * from the cache of ib_mr.c). A completion error or a disconnect fails the peer's operations with
 * COLL_ERR_TRANSPORT naming it.
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
#define COLL_IB_RTS_MAGIC    0x5242494cu /* "LIBR": a rendezvous send is ready (ib_rndv.c) */
#define COLL_IB_FIN_MAGIC    0x4542494cu /* "LIBE": its receiver has read it all */
#define COLL_IB_RD_DEPTH     4           /* RDMA READs in flight per QP, at most */
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

/* Payload of an RTS fragment: where the sender's registered buffer is. */
typedef struct {
    uint64_t addr;
    uint32_t rkey;
    uint32_t pad;
} coll_ib_rts_t;

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

/* What the registration cache's callbacks register with (ib_rndv.c). */
typedef struct {
    struct coll_tp_ctx *ctx;
    int                 access; /* IBV_ACCESS_* */
} coll_ib_mr_cookie_t;

/* A send waiting for credits or in flight: fragments are produced from it in order. Kind DATA
 * carries op's bytes; RTS announces op's registered buffer (one fragment; op completes at the
 * FIN); FIN is a control fragment without op, answering the peer's RTS. */
enum { COLL_IB_SREQ_DATA = 0, COLL_IB_SREQ_RTS, COLL_IB_SREQ_FIN };
struct coll_ib_mreg;
typedef struct coll_ib_sreq {
    coll_tp_op_t        *op;
    size_t               off;     /* next byte to fragment */
    int                  pending; /* fragments posted, not yet completed */
    int                  kind;    /* COLL_IB_SREQ_* */
    int                  fin;     /* RTS: the receiver's FIN arrived */
    uint64_t             tag;     /* RTS, FIN */
    uint64_t             total;   /* RTS, FIN */
    coll_ib_rts_t        rts;     /* RTS: the buffer */
    struct coll_ib_mreg *reg;     /* RTS: its registration */
    struct ibv_mr       *dev_mr;  /* RTS of device memory: its own registration (ib_gdr.c) */
    struct coll_ib_sreq *next;
    struct coll_ib_sreq *rv_next; /* RTS: in ep->rv_head until complete */
} coll_ib_sreq_t;

/* A receive being filled by RDMA READs from the sender's buffer (ib_rndv.c). */
typedef struct coll_ib_rjob {
    struct coll_ib_ep   *ep;
    coll_tp_op_t        *op;
    uint64_t             raddr;
    uint32_t             rkey;
    size_t               off;         /* next byte to read */
    int                  outstanding; /* READs posted, not completed */
    coll_result_t        status;
    struct coll_ib_mreg *reg;    /* copy receives: op->buf's registration */
    struct ibv_mr       *dev_mr; /* or of device memory, its own (ib_gdr.c) */
    uint32_t             lkey;
    struct coll_ib_rjob *next;
} coll_ib_rjob_t;

/* An RTS whose receive is not posted yet. */
typedef struct coll_ib_rts_rec {
    uint64_t                tag, total;
    coll_ib_rts_t           rts;
    struct coll_ib_rts_rec *next;
} coll_ib_rts_rec_t;

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
    int      nreads;    /* RDMA READs posted on it, not completed */
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
    coll_ib_sreq_t     *rv_head;  /* rendezvous sends waiting for their FIN */
    coll_ib_rts_rec_t  *rts_head; /* RTS waiting for their receives, in arrival order */
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
    /* rendezvous (ib_rndv.c) */
    size_t              rndv_min; /* sends of at least this go by RDMA READ; 0 never */
    int                 rd_depth; /* READs in flight per QP */
    struct coll_ib_mrc *mrc;      /* registrations of send buffers (remote read) */
    struct coll_ib_mrc *mrc_recv; /* of receive buffers (local write) */
    coll_ib_mr_cookie_t mr_cookie[2];
    coll_ib_rjob_t     *rjobs; /* receives being read */
    struct coll_ib_rd  *rd;    /* READ descriptors, rd_n of them */
    int                 rd_n, rd_free;
    char               *bounce; /* reducing receives read pieces into it */
    struct ibv_mr      *bounce_mr;
    uint32_t            bounce_free; /* bit i: piece i is free */
    uint64_t            rndv_sends, rndv_recvs;
    /* GPUDirect RDMA (ib_gdr.c) */
    int           gdr; /* device buffers can be registered: endpoints take ops with dev set */
    int           gdr_dmabuf; /* through dma-bufs (else, or when a dma-buf fails, nvidia_peermem) */
    int           gdr_peermem; /* nvidia_peermem is loaded */
    coll_result_t gdr_last;    /* the last registration's failure */
    uint64_t      gdr_regs, gdr_failures, gdr_copies;
    uint64_t      gdr_hard_failures; /* failures not of one allocation (INVALID_ARG) */
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
void          coll_ib_ep_fail(coll_ib_ep_t *ep, const char *why); /* COLL_ERR_TRANSPORT */
/* The same with the status the endpoint's operations end with (COLL_ERR_MISMATCH for a message
 * that does not fit its receive, as shm, tcp and ucx report it). */
void            coll_ib_ep_fail_st(coll_ib_ep_t *ep, coll_result_t st, const char *why);
coll_result_t   coll_ib_isend(coll_tp_ep_t *ep, coll_tp_op_t *op);
coll_result_t   coll_ib_irecv(coll_tp_ep_t *ep, coll_tp_op_t *op);
int             coll_ib_poll_cq(struct coll_tp_ctx *ctx);
void            coll_ib_sreq_finish(coll_ib_ep_t *ep, coll_ib_sreq_t *s, coll_result_t st);
coll_result_t   coll_ib_sq_add(coll_ib_ep_t *ep, coll_ib_sreq_t *s); /* queue and push */
coll_ib_sreq_t *coll_ib_sreq_new(struct coll_tp_ctx *ctx);
/* ib_rndv.c: zero-copy rendezvous for large messages (RTS, RDMA READ, FIN) */
/* wr_id of a READ: this bit, the QP's gidx << 20, the descriptor */
#define COLL_IB_WR_READ ((uint64_t)1 << 63)
coll_result_t coll_ib_rndv_init(struct coll_tp_ctx *ctx);
void          coll_ib_rndv_fini(struct coll_tp_ctx *ctx);
int           coll_ib_rndv_send(coll_ib_ep_t *ep, coll_tp_op_t *op); /* 1: taken as RTS */
coll_result_t coll_ib_rndv_post(coll_ib_ep_t *ep, coll_tp_op_t *op, int *taken_p);
void          coll_ib_rndv_on_ctl(coll_ib_qp_t *q, const coll_ib_frag_t *h, const char *payload);
void          coll_ib_rndv_read_done(struct coll_tp_ctx *ctx, const struct ibv_wc *wc);
int           coll_ib_rndv_progress(struct coll_tp_ctx *ctx);
/* ep failed (gone = 0: its QPs may still flush completions) or is destroyed (gone = 1) */
void coll_ib_rndv_ep_fail(coll_ib_ep_t *ep, coll_result_t st, int gone);

/* ib_gdr.c: GPUDirect RDMA. gdr_init (after rndv_init) sets ctx->gdr; gdr_reg registers device
 * memory (NULL, warned once, when it cannot: the message is then copied; when no registration
 * ever worked, ctx->gdr is cleared and later calls are staged). */
void coll_ib_gdr_init(struct coll_tp_ctx *ctx);
void coll_ib_gdr_fini(struct coll_tp_ctx *ctx); /* logs what it did */
struct coll_devmem;
struct ibv_mr *coll_ib_gdr_reg(struct coll_tp_ctx *ctx, const struct coll_devmem *dm, void *addr,
                               size_t len, int access);

#endif
