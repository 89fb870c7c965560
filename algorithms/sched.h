/* SPDX-License-Identifier: MIT */
/*
 * Schedules: one collective call on one rank as data. A schedule is a list of steps (send a byte
 * range to a peer, receive one, receive and reduce on arrival, copy, divide, and the shared-window
 * steps put / get / get_reduce) with explicit dependencies. Algorithms build schedules; the
 * engine runs them; tests run them in a simulated network for any rank count. Offsets name one
 * of three buffers or a window, never pointers, so a schedule is cached per shape and printed
 * with COLL_DEBUG=trace.
 *
 * Shared windows (ranks of one host): every rank owns a window that every other rank can read.
 * PUT copies a local range into the own window and then publishes the flag of its slot; GET
 * and GET_REDUCE wait until a rank's flag of a slot is published for the current call, then
 * copy or reduce from that rank's window. The engine gives each call that uses windows an
 * epoch and makes reuse of a window across calls safe; a schedule only names slots and offsets.
 */
#ifndef COLL_SCHED_H
#define COLL_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "coll.h"

typedef enum {
    COLL_BUF_SEND    = 0, /* the caller's sendbuf */
    COLL_BUF_RECV    = 1, /* the caller's recvbuf */
    COLL_BUF_SCRATCH = 2, /* engine-provided, sched->scratch_bytes long */
    COLL_BUF_COUNT
} coll_buf_id_t;

typedef enum {
    COLL_STEP_SEND,        /* send len bytes at (src_buf, src_off) to peer */
    COLL_STEP_RECV,        /* receive len bytes from peer into (dst_buf, dst_off) */
    COLL_STEP_RECV_REDUCE, /* receive from peer; dst = op(src, incoming); src may equal dst */
    COLL_STEP_COPY,        /* local: dst = src (len bytes; regions must not overlap) */
    COLL_STEP_REDUCE,      /* local: dst = op(dst, src) */
    COLL_STEP_DIV,         /* local: dst /= nranks, elementwise in dtype (the one AVG division) */
    COLL_STEP_PUT,         /* own window at win_off = src, then publish flag `tag` (the slot) */
    COLL_STEP_GET,         /* wait for peer's flag `tag`; dst = peer's window at win_off */
    COLL_STEP_GET_REDUCE,  /* wait for peer's flag `tag`; dst = op(src, peer's window at win_off) */
    COLL_STEP_KIND_COUNT
} coll_step_kind_t;

/* Flag slots of a window: every PUT of one schedule uses its own slot below this. */
#define COLL_SCHED_WIN_SLOTS 256u

typedef struct coll_step {
    uint8_t  kind;    /* coll_step_kind_t */
    uint8_t  src_buf; /* coll_buf_id_t; SEND, RECV_REDUCE, COPY, REDUCE, PUT, GET_REDUCE */
    uint8_t  dst_buf; /* coll_buf_id_t; RECV*, COPY, REDUCE, DIV, GET* */
    uint8_t  pad_;
    int32_t  peer;  /* SEND / RECV*: communicator rank; GET*: window owner (may be self) */
    uint32_t tag;   /* SEND / RECV*: equal on both sides; unique per ordered pair; PUT / GET*:
                       window flag slot (< COLL_SCHED_WIN_SLOTS), unique per PUT */
    uint32_t ndeps; /* steps that must complete first (filled by coll_sched_finalize) */
    uint64_t src_off;
    uint64_t dst_off;
    uint64_t win_off;    /* PUT / GET*: offset in the window */
    uint64_t len;        /* bytes; a multiple of the dtype size */
    uint32_t succ_start; /* successors: sched->succ[succ_start .. succ_start + succ_count) */
    uint32_t succ_count;
} coll_step_t;

typedef struct coll_sched {
    int          rank;
    int          nranks;
    coll_dtype_t dtype;
    coll_redop_t op;            /* reduction used by RECV_REDUCE / REDUCE (never AVG) */
    size_t       scratch_bytes; /* needed in COLL_BUF_SCRATCH */
    uint64_t     win_bytes;     /* window bytes the PUT / GET* steps touch (set by finalize) */
    uint32_t     nwin; /* PUT / GET* steps (set by finalize); > 0: the call needs windows */
    coll_step_t *steps;
    uint32_t     nsteps;
    uint32_t     cap;
    uint32_t    *succ; /* successor lists (CSR), built by finalize */
    uint32_t     nsucc;
    /* builder state: dependency edges (from -> to), turned into succ[] by finalize */
    uint32_t     *edges;
    uint32_t      nedges;
    uint32_t      edges_cap;
    int           finalized;
    coll_result_t build_error; /* first allocation failure while building */
} coll_sched_t;

/* op may be AVG: the schedule then reduces with SUM and the algorithm adds DIV steps. */
void coll_sched_init(coll_sched_t *s, int rank, int nranks, coll_dtype_t dtype, coll_redop_t op);
void coll_sched_destroy(coll_sched_t *s);

/* Builders: each returns the new step's index (>= 0), or -1 after an allocation failure, which
 * is also remembered in s->build_error (so callers may check once at the end). */
int coll_sched_send(coll_sched_t *s, int peer, uint32_t tag, coll_buf_id_t buf, uint64_t off,
                    uint64_t len);
int coll_sched_recv(coll_sched_t *s, int peer, uint32_t tag, coll_buf_id_t buf, uint64_t off,
                    uint64_t len);
/* dst = op(operand, incoming) */
int coll_sched_recv_reduce(coll_sched_t *s, int peer, uint32_t tag, coll_buf_id_t dst_buf,
                           uint64_t dst_off, coll_buf_id_t operand_buf, uint64_t operand_off,
                           uint64_t len);
int coll_sched_copy(coll_sched_t *s, coll_buf_id_t dst_buf, uint64_t dst_off, coll_buf_id_t src_buf,
                    uint64_t src_off, uint64_t len);
int coll_sched_reduce(coll_sched_t *s, coll_buf_id_t dst_buf, uint64_t dst_off,
                      coll_buf_id_t src_buf, uint64_t src_off, uint64_t len);
int coll_sched_div(coll_sched_t *s, coll_buf_id_t buf, uint64_t off, uint64_t len);

/* Shared windows: PUT of (buf, off) into the own window at win_off under slot; GET from rank
 * peer's window at win_off (published under slot) into (buf, off); GET_REDUCE likewise with
 * dst = op(operand, window data). peer may be this rank. */
int coll_sched_put(coll_sched_t *s, uint32_t slot, uint64_t win_off, coll_buf_id_t buf,
                   uint64_t off, uint64_t len);
int coll_sched_get(coll_sched_t *s, int peer, uint32_t slot, uint64_t win_off, coll_buf_id_t buf,
                   uint64_t off, uint64_t len);
int coll_sched_get_reduce(coll_sched_t *s, int peer, uint32_t slot, uint64_t win_off,
                          coll_buf_id_t dst_buf, uint64_t dst_off, coll_buf_id_t operand_buf,
                          uint64_t operand_off, uint64_t len);
static inline int coll_step_is_win(unsigned kind)
{
    return kind == COLL_STEP_PUT || kind == COLL_STEP_GET || kind == COLL_STEP_GET_REDUCE;
}

/* Append a copy of an existing step (composition); dependencies are not copied. */
int coll_sched_append(coll_sched_t *s, const coll_step_t *st);

/* COPY steps of at most chunk_bytes (whole elements of s->dtype) covering len bytes, so one big
 * local copy never holds up the engine. */
void coll_sched_copy_chunked(coll_sched_t *s, size_t chunk_bytes, coll_buf_id_t dst_buf,
                             uint64_t dst_off, coll_buf_id_t src_buf, uint64_t src_off,
                             uint64_t len);

/* Tags 0 .. ntags-1 must fit in 32 bits: COLL_OK, or COLL_ERR_UNSUPPORTED logged naming what. */
coll_result_t coll_sched_tags_fit(uint64_t ntags, const char *what);

/* Step `step` may start only after step `after` completed. Ignored if either is < 0. */
void coll_sched_dep(coll_sched_t *s, int step, int after);

/* Builds successor lists and dependency counts; the schedule is immutable afterwards. */
coll_result_t coll_sched_finalize(coll_sched_t *s);

/* Checks a finalized schedule on its own: indices, lengths vs dtype, buffer use, acyclic.
 * Returns COLL_OK or COLL_ERR_INTERNAL with a message in msg. */
coll_result_t coll_sched_check(const coll_sched_t *s, char *msg, size_t msglen);

/* Can the schedule run on device buffers that the transports move themselves (GPUDirect
 * RDMA)? Only if it sends, receives and copies: no receive that reduces (the transports do not
 * reduce into device memory), no scratch (host memory), no window step (host windows), and
 * peer_ok(arg, peer) for the peer of every send and receive. 1 yes; 0 no, with the first
 * reason in why (may be NULL). */
int coll_sched_device_fits(const coll_sched_t *s, int (*peer_ok)(void *arg, int peer), void *arg,
                           char *why, size_t whylen);

/* One line per step, for COLL_DEBUG=trace and tests. */
void        coll_sched_print(const coll_sched_t *s, FILE *out);
const char *coll_step_kind_name(coll_step_kind_t kind);

#endif
