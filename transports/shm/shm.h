/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory transport, internal interface shared by shm.c (context, endpoints, ops table),
 * shm_ring.c (the single-producer single-consumer byte ring and the futex doorbell), shm_seg.c
 * (creating, attaching and unlinking /dev/shm segments) and shm_win.c (the shared windows).
 * Not installed; the layouts below are shared between processes of one job on one host and
 * never cross hosts.
 *
 * Segment of one rank: header page, one ring (control page + data) per other local rank, and
 * when every rank of the communicator is on this host, the window: a control block (flags,
 * acknowledgement, the two small-call slots) and two halves of win_size bytes.
 */
#ifndef COLL_TP_SHM_H
#define COLL_TP_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "transport.h"
#include "match.h"

/* Cross-process atomics must be lock-free: a lock-based atomic would use a per-process lock. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shm transport needs lock-free 64-bit atomics");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shm transport needs lock-free 32-bit atomics");

#define SHM_SEG_MAGIC      0x31306d68736c6f63ull /* "collshm01", little endian */
#define SHM_SEG_VERSION    5u
#define SHM_HANDLE_MAGIC   0x53484d48u /* "HMHS" */
#define SHM_FRAME_MAGIC    0x46524d46u /* data frame */
#define SHM_PAD_MAGIC      0x50414450u /* skip to the end of the ring */
#define SHM_RTS_MAGIC      0x53545452u /* single-copy: read len bytes at addr in my memory */
#define SHM_FIN_MAGIC      0x4e494652u /* single-copy: your message tag has been read */
#define SHM_CMA_BOUNCE     ((uint64_t)256 << 10) /* reducing reads go through this much */
#define SHM_NAME_MAX       48
#define SHM_HDR_SIZE       4096u /* segment header page */
#define SHM_RING_CTRL_SIZE 4096u /* head/tail page in front of each ring */
#define SHM_FRAME_HDR      64u   /* header slot; payloads start 64-aligned */
#define SHM_ALIGN          64u   /* frame start and non-final payload unit */
#define SHM_RING_MIN       ((uint64_t)64 << 10)
#define SHM_RING_MAX       ((uint64_t)1 << 30)
#define SHM_FRAG_MAX       ((uint64_t)64 << 10) /* pipelining grain: receiver starts early */
#define SHM_TOTAL_MAX      ((uint64_t)1 << 40)  /* largest message a frame may announce */
#define SHM_LIVE_CHECK_S   0.25 /* how often an idle rank with pending work checks its peers */
/* The window control block in front of the two halves holds the flags and the two small-call
 * slots of COLL_TP_SMALL_MAX bytes: 18 pages (asserted below). */
#define SHM_WIN_CTRL_SIZE 73728u
#define SHM_WIN_ALIGN     4096u /* window halves are whole pages */
#define SHM_WIN_MAX       ((uint64_t)1 << 30)
#define SHM_WIN_SMALL     (1u << 20) /* the default window where /dev/shm is small */

/* Futex doorbell of one process: producers bump seq after publishing when sleepers != 0. */
typedef struct shm_doorbell {
    _Atomic uint32_t seq;      /* futex word */
    _Atomic uint32_t sleepers; /* threads of the owner inside block() */
} shm_doorbell_t;

/* First page of every segment. Written by the owner before its handle is published. */
typedef struct shm_seg_hdr {
    uint64_t magic; /* SHM_SEG_MAGIC */
    uint32_t version;
    uint32_t nslots; /* incoming rings */
    uint64_t job_tag;
    uint64_t comm_id;
    uint64_t ring_size; /* data bytes of each ring, power of two */
    uint64_t win_size;  /* bytes of each window half, 0 = no window */
    uint64_t seg_size;  /* whole segment */
    int32_t  rank;      /* owner */
    int32_t  pid;       /* owner, for messages */
    uint32_t live_lock; /* 1: the owner holds a write lock on the segment while alive */
    uint64_t self_addr; /* where the owner maps this header: peers probe single-copy reads */
    _Alignas(64) shm_doorbell_t bell;
} shm_seg_hdr_t;

/* Shared control words of one ring; head and tail live on separate cache lines. */
typedef struct shm_ring_ctrl {
    _Alignas(64) _Atomic uint64_t head; /* producer: bytes published, monotonic */
    _Atomic uint32_t want_space;        /* producer: a send waits for the consumer */
    _Alignas(64) _Atomic uint64_t tail; /* consumer: bytes consumed, monotonic */
    _Atomic uint32_t cma; /* consumer: 1 it can read the producer's memory (single-copy), 2 not */
} shm_ring_ctrl_t;

/* Header of every frame (SHM_FRAME_HDR bytes reserved); payload follows at +SHM_FRAME_HDR. */
typedef struct shm_frame {
    uint32_t magic; /* SHM_FRAME_MAGIC or SHM_PAD_MAGIC */
    uint32_t len;   /* payload bytes in this frame */
    uint64_t tag;
    uint64_t total;  /* message length */
    uint64_t offset; /* of this payload in the message; RTS: the address of the message */
    uint64_t seqno;  /* frame number in the ring, checked by the consumer */
} shm_frame_t;

/* Window control block, written only by the owner. A flag holds the epoch its slot was last
 * published for; gen moves after every flag or ack store so that a sleeper can tell whether
 * anything it polled changed (see shm_win.c). */
typedef struct shm_win_ctrl {
    _Alignas(64) _Atomic uint64_t ack; /* every epoch <= ack finished by the owner */
    _Alignas(64) _Atomic uint64_t gen;
    _Alignas(64) _Atomic uint64_t flag[2][COLL_TP_WIN_SLOTS];
    coll_tp_small_t small[2]; /* small-call slots (shm_win.c), outside the halves */
} shm_win_ctrl_t;

_Static_assert(sizeof(shm_seg_hdr_t) <= SHM_HDR_SIZE, "segment header exceeds its page");
_Static_assert(sizeof(shm_win_ctrl_t) <= SHM_WIN_CTRL_SIZE, "window control exceeds its pages");
_Static_assert(sizeof(shm_ring_ctrl_t) <= SHM_RING_CTRL_SIZE, "ring control exceeds its page");
_Static_assert(sizeof(shm_frame_t) <= SHM_FRAME_HDR, "frame header exceeds its slot");

/* Listen handle published through the bootstrap. */
typedef struct shm_handle {
    uint32_t magic; /* SHM_HANDLE_MAGIC */
    uint32_t version;
    uint64_t seg_size;
    uint64_t ring_size;
    int32_t  rank;
    int32_t  pid;
    uint32_t nslots;
    uint32_t reserved;
    uint64_t win_size; /* 0: no window */
    char     name[SHM_NAME_MAX];
} shm_handle_t;

/* A mapped segment, ours or a peer's. fd stays open: it carries the owner's liveness lock. */
typedef struct shm_seg {
    char           name[SHM_NAME_MAX];
    int            fd;
    int            linked; /* created by us and still in /dev/shm */
    void          *base;
    size_t         size;
    shm_seg_hdr_t *hdr;
} shm_seg_t;

/* This process' view of one ring (producer or consumer side). */
typedef struct shm_ring {
    shm_ring_ctrl_t *ctrl;
    char            *data;
    uint64_t         size;  /* power of two */
    uint64_t         frag;  /* largest payload of one frame */
    uint64_t         pos;   /* producer: head; consumer: tail (private copy) */
    uint64_t         other; /* producer: last tail seen; consumer: last head seen */
    uint64_t         seqno; /* next frame number to write or expect */
    int              peer;  /* rank on the other side, for messages */
} shm_ring_t;

/* A FIN still to be written: the peer's message (tag, length) has been read. */
typedef struct shm_fin {
    uint64_t tag, total;
} shm_fin_t;

typedef struct shm_ep {
    coll_tp_ep_t        base; /* first: the core sees a coll_tp_ep_t */
    struct coll_tp_ctx *ctx;
    coll_tp_match_t     match;      /* posted and unexpected receives from the peer */
    shm_ring_t          rx;         /* in our segment, written by the peer */
    shm_ring_t          tx;         /* in the peer's segment, written by us */
    shm_seg_t           peer_seg;   /* mapping of the peer's segment */
    coll_tp_op_t       *sendq_head; /* FIFO; frames of one message are never interleaved */
    coll_tp_op_t       *sendq_tail;
    int                 tx_started; /* the head op has written at least one frame */
    uint64_t            stall_tail; /* tail seen when the head op last ran out of space */
    int                 want_space; /* we set tx.ctrl->want_space */
    coll_result_t       status;     /* COLL_OK, or why the endpoint failed */
    shm_win_ctrl_t     *win;        /* the peer's window control, NULL without windows */
    uint64_t            win_size;   /* the peer's window half */
    struct shm_ep      *next;       /* in ctx->eps */
    /* single-copy (shm_cma.c) */
    int             peer_pid;  /* from the peer's handle */
    coll_tp_op_t   *rndv_head; /* sends announced by RTS, waiting for the peer's FIN */
    struct shm_rts *rts_head;  /* RTS received before their receive was posted */
    shm_fin_t      *fin;       /* FIN frames still to be written */
    uint32_t        nfin, capfin;
} shm_ep_t;

struct coll_tp_ctx {
    int             rank;
    int             nranks;
    uint64_t        comm_id;
    uint64_t        job_tag;
    int            *lidx; /* nranks: index among the ranks of this host, or -1 */
    int             nlocal;
    uint64_t        ring_size;
    int             mem_node; /* NUMA node for the own segment's pages, -1: any */
    shm_seg_t       seg;      /* ours: one incoming ring per other local rank */
    int             have_seg;
    shm_doorbell_t *bell; /* in seg, or private_bell when there is no segment */
    shm_doorbell_t  private_bell;
    shm_ep_t       *eps;
    double          next_live_check;
    double          live_check_s; /* SHM_LIVE_CHECK_S; tests raise it to catch lost wakeups */
    /* shared windows (shm_win.c) */
    uint64_t        win_size;   /* own window half, 0 = none */
    uint64_t        win_common; /* the smallest half of every rank (0: windows unusable) */
    shm_win_ctrl_t *win;        /* own window control, in seg */
    shm_ep_t      **ep_of;      /* nranks: endpoint of each rank (NULL: self, not shm) */
    uint64_t       *win_seen;   /* nranks: gen seen by the last unsuccessful poll of the rank */
    uint8_t        *win_armed;  /* nranks: such a poll happened since the last progress() */
    /* single-copy (shm_cma.c) */
    uint64_t cma_min;    /* sends of at least this many bytes go single-copy; 0: never */
    char    *cma_bounce; /* SHM_CMA_BOUNCE bytes for reducing reads, allocated on first use */
};

/* ---- shm_seg.c ---- */
void          shm_seg_name(char *buf, size_t len, uint64_t comm_id, int rank);
uint64_t      shm_seg_size(uint32_t nslots, uint64_t ring_size, uint64_t win_size);
coll_result_t shm_seg_create(shm_seg_t *seg, const struct coll_tp_ctx *ctx, uint32_t nslots);
coll_result_t shm_seg_attach(shm_seg_t *seg, const struct coll_tp_ctx *ctx, const shm_handle_t *h,
                             int peer);
/* Wire checks (fuzzed by tests/fuzz/): a peer's handle from the bootstrap, against the segment
 * this rank expects (name) from peer; a mapped segment's header, against the handle. */
coll_result_t shm_seg_check_handle(const struct coll_tp_ctx *ctx, const shm_handle_t *h, int peer,
                                   const char *name);
coll_result_t shm_seg_check_mapped(const struct coll_tp_ctx *ctx, const shm_seg_t *seg,
                                   const shm_handle_t *h, int peer);
void          shm_seg_unlink(shm_seg_t *seg);
void          shm_seg_close(shm_seg_t *seg); /* unmap, close, unlink if still linked */
void         *shm_seg_ring(const shm_seg_t *seg, uint32_t slot);
void         *shm_seg_win(const shm_seg_t *seg); /* window control block, NULL if none */
int           shm_seg_owner_alive(const shm_seg_t *seg);
int           shm_seg_probe(const char **why_p);

/* ---- shm_cma.c: single-copy transfers (cross-memory attach) ---- */
/* Can this rank read the peer's memory? Sets the consumer's verdict in the peer's ring to us. */
void          shm_cma_probe(coll_tp_ctx_t *ctx, shm_ep_t *ep);
int           shm_cma_wanted(const shm_ep_t *ep, const coll_tp_op_t *op);
coll_result_t shm_cma_on_rts(shm_ep_t *ep, const shm_frame_t *f);
coll_result_t shm_cma_on_fin(shm_ep_t *ep, const shm_frame_t *f);
/* A receive is posted: if its RTS came already, read it now (*taken_p = 1). */
coll_result_t shm_cma_post(shm_ep_t *ep, coll_tp_op_t *op, int *taken_p);
/* Write pending FIN frames; returns frames written (the rest stay queued). */
int  shm_cma_push_fins(shm_ep_t *ep);
void shm_cma_fail(shm_ep_t *ep, coll_result_t status);
void shm_cma_fini(coll_tp_ctx_t *ctx);

/* ---- shm_ring.c ---- */
void shm_ring_view(shm_ring_t *r, void *ring_base, uint64_t size, int peer);
/* Producer: write frames of op (its bytes counter advances); returns frames published. */
int shm_ring_push(shm_ring_t *r, coll_tp_op_t *op, int *started, int *complete_p);
int shm_ring_has_space(shm_ring_t *r, uint64_t stall_tail);
/* Producer: one frame without payload (RTS, FIN); 1 when written, 0 when the ring is full. */
int shm_ring_push_ctl(shm_ring_t *r, uint32_t magic, uint64_t tag, uint64_t total, uint64_t addr);
/* Consumer: next data frame (pads are skipped). COLL_OK with f and payload, COLL_AGAIN when
 * empty, COLL_ERR_TRANSPORT (logged) when the ring holds garbage. */
coll_result_t shm_ring_peek(shm_ring_t *r, shm_frame_t *f, const void **payload_p);
void          shm_ring_consume(shm_ring_t *r, const shm_frame_t *f);
int           shm_ring_nonempty(shm_ring_t *r);
void          shm_ring_set_want_space(shm_ring_t *r, int on);
int           shm_ring_wants_space(shm_ring_t *r);
/* Doorbell */
void     shm_bell_setup(void);              /* once per process, before any use */
void     shm_bell_ring(shm_doorbell_t *b);  /* after publishing: wake if asleep */
void     shm_bell_force(shm_doorbell_t *b); /* always wake (wake() from another thread) */
uint32_t shm_bell_prepare(shm_doorbell_t *b);
void     shm_bell_wait(shm_doorbell_t *b, uint32_t seen, double timeout_s);
void     shm_bell_cancel(shm_doorbell_t *b);

/* ---- sizes from the parameters (shm.c, shm_win.c); collinfo uses them too ---- */
uint64_t shm_ring_size_param(void);
uint64_t shm_win_size_param(int all_local, int nlocal, const char *shm_dir);

/* ---- shm_win.c ---- */
coll_result_t shm_win_init(coll_tp_ctx_t *ctx); /* after init: per-rank window state */
void          shm_win_fini(coll_tp_ctx_t *ctx);
/* After connect_all: agree on the usable window size from every local rank's handle. */
void shm_win_connect(coll_tp_ctx_t *ctx, const void *const *handles);
/* Forget the polls of the previous pass (progress() start), after the liveness check used them. */
void shm_win_disarm(coll_tp_ctx_t *ctx);
/* block(): 1 if a rank polled unsuccessfully has published since; *pending_p if one is armed. */
int           shm_win_has_work(coll_tp_ctx_t *ctx, int *pending_p);
size_t        shm_win_size(coll_tp_ctx_t *ctx);
void         *shm_win_ptr(coll_tp_ctx_t *ctx, int rank, int parity);
void          shm_win_publish(coll_tp_ctx_t *ctx, int parity, uint32_t slot, uint64_t epoch);
coll_result_t shm_win_poll(coll_tp_ctx_t *ctx, int rank, int parity, uint32_t slot, uint64_t epoch);
void          shm_win_ack(coll_tp_ctx_t *ctx, uint64_t epoch);
coll_result_t shm_win_acked(coll_tp_ctx_t *ctx, uint64_t epoch, int *rank_p);
coll_tp_small_t *shm_small_slot(coll_tp_ctx_t *ctx, int rank, int parity);
void             shm_small_publish(coll_tp_ctx_t *ctx);
coll_result_t    shm_small_poll(coll_tp_ctx_t *ctx, int rank, int parity, uint64_t stamp, int arm);

#endif
