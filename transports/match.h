/* SPDX-License-Identifier: MIT */
/*
 * Tag matching shared by the byte-stream transports (shm, tcp): posted receives per endpoint,
 * unexpected messages buffered until their receive is posted, delivery by copy or by
 * reduction on arrival. Both are indexed by tag (match_index.h): the oldest of a tag is found
 * at once, however many thousands of calls are outstanding. Fragments of a message may arrive in
 * any order; each fragment carries (tag, total length, offset) and offsets/lengths are multiples of
 * 8 except at a message end.
 */
#ifndef COLL_TP_MATCH_H
#define COLL_TP_MATCH_H

#include "match_index.h"
#include "transport.h"

typedef struct coll_tp_unexp {
    coll_tp_mlink_t       link; /* in the match's unexp index */
    uint64_t              tag;
    size_t                total; /* message length announced by the sender */
    size_t                bytes; /* received so far */
    char                 *data;  /* cap >= total bytes */
    size_t                cap;
    coll_tp_op_t         *waiting; /* receive posted while the message was still arriving */
    struct coll_tp_unexp *next;    /* the spare list */
} coll_tp_unexp_t;

typedef struct coll_tp_match {
    coll_tp_mindex_t posted;      /* receives waiting for their message, by tag (op->mlink) */
    coll_tp_mindex_t unexp;       /* messages waiting for their receive, by tag */
    int              peer;        /* for error messages */
    const char      *tpname;      /* for error messages */
    size_t           unexp_bytes; /* buffered now */
    size_t           unexp_max;   /* COLL_UNEXPECTED_MAX (0: no limit) */
    int              held_logged; /* coll_tp_match_held was logged */
    int              nwaiting;    /* receives waiting for the rest of a buffered message */
    /* Released records kept with their buffers for the next unexpected message: fresh heap
     * memory costs a page fault per 4 KiB on first touch, which dominated large exchanges. */
    coll_tp_unexp_t *spare;
    int              nspare;
    size_t           spare_bytes;
} coll_tp_match_t;

void coll_tp_match_init(coll_tp_match_t *m, int peer, const char *tpname);
/* Fails every posted op with status and frees buffered messages. */
void coll_tp_match_fini(coll_tp_match_t *m, coll_result_t status);

/* Post a receive: takes buffered data for its tag if any; may complete op at once. */
coll_result_t coll_tp_match_post(coll_tp_match_t *m, coll_tp_op_t *op);

/* A fragment arrived: deliver to the posted receive or buffer it. COLL_ERR_CUDA when copying it
 * into a posted receive of device memory failed: the transport then fails the endpoint. */
coll_result_t coll_tp_match_deliver(coll_tp_match_t *m, uint64_t tag, size_t total, size_t off,
                                    const void *data, size_t n);

/* Zero-copy helper for transports that can read straight into user memory: the posted plain
 * copy receive for tag (NULL if none, or if it reduces, is device memory, or waits on buffered
 * data). After
 * writing n bytes at buf + off, the transport calls coll_tp_match_account(). */
coll_tp_op_t *coll_tp_match_lookup_copy(coll_tp_match_t *m, uint64_t tag, size_t total);
coll_result_t coll_tp_match_account(coll_tp_match_t *m, coll_tp_op_t *op, size_t n);

/* Does a sender's message of total bytes fit the posted receive op? COLL_ERR_MISMATCH (logged,
 * naming the peer and both lengths) when not. */
coll_result_t coll_tp_match_check_len(const coll_tp_match_t *m, const coll_tp_op_t *op,
                                      size_t total);

/* A point-to-point message of sent_tag from the peer met a receive whose tag differs in
 * COLL_TAG_P2P_END alone: logs that the send and the receive differ in length (naming the peer
 * and which is longer) and returns COLL_ERR_MISMATCH. Posting, delivery and taking check this
 * themselves; transports that keep their own records of announced messages (rendezvous) call it
 * when a receive meets one. */
coll_result_t coll_tp_match_p2p_clash(const coll_tp_match_t *m, uint64_t sent_tag);

/* Do a receive's tag and a message's tag name one point-to-point message of different lengths
 * (they differ in COLL_TAG_P2P_END alone)? */
static inline int coll_tp_tags_clash(uint64_t recv_tag, uint64_t sent_tag)
{
    return (recv_tag & COLL_TAG_P2P) != 0 && sent_tag == (recv_tag ^ COLL_TAG_P2P_END);
}

/* Single-copy transports: unlink and return (*op_p) the posted receive for tag, copy or
 * reducing, to fill it by other means; NULL when none is posted. Error when its length is not
 * total. The caller completes it. */
coll_result_t coll_tp_match_take(coll_tp_match_t *m, uint64_t tag, size_t total,
                                 coll_tp_op_t **op_p);

/* Is anything posted (a receive waiting for data)? */
static inline int coll_tp_match_busy(const coll_tp_match_t *m)
{
    return m->posted.count > 0 || m->nwaiting > 0;
}

/* Should the transport stop taking the peer's messages for now? When COLL_UNEXPECTED_MAX bytes
 * are buffered and no receive waits for the peer: what it sent last is for calls not made yet,
 * so it waits in the ring or socket (the sender waits for room) instead of this process's
 * memory. A transport whose own sends need the peer's frames (acknowledgements) must not hold
 * while such a send is pending. */
static inline int coll_tp_match_held(const coll_tp_match_t *m)
{
    return m->unexp_max > 0 && m->unexp_bytes >= m->unexp_max && !coll_tp_match_busy(m);
}

/* Logs (debug, once per endpoint) that the peer's messages are held. */
void coll_tp_match_log_held(coll_tp_match_t *m);

#endif
