/* SPDX-License-Identifier: MIT */
/*
 * Tag matching for byte-stream transports. A fragment either lands in its posted receive
 * (copied, or reduced against the receive's operand) or is buffered as unexpected until the
 * receive is posted. A receive posted while its message is still partly buffered waits for the
 * rest to arrive in the buffer and then takes the whole message at once; this keeps reductions
 * exact (every byte is combined exactly once) without tracking which ranges arrived.
 */
#include "match.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "reduce/reduce.h"
#include "cuda/devmem.h"

#include <inttypes.h>
#include <string.h>

/* Spare unexpected buffers kept per endpoint: a few, bounded in bytes (see match.h). */
#define MATCH_SPARE_MAX       4
#define MATCH_SPARE_BYTES_MAX ((size_t)8 << 20)
#define MATCH_CAP_ROUND       ((size_t)64 << 10)
#define MATCH_CAP_MIN         ((size_t)64)

void coll_tp_match_init(coll_tp_match_t *m, int peer, const char *tpname)
{
    memset(m, 0, sizeof(*m));
    coll_tp_mindex_init(&m->posted);
    coll_tp_mindex_init(&m->unexp);
    m->peer      = peer;
    m->tpname    = tpname;
    m->unexp_max = coll_param_size(COLL_P_UNEXPECTED_MAX);
}

void coll_tp_match_log_held(coll_tp_match_t *m)
{
    if (!m->held_logged) {
        m->held_logged = 1;
        coll_debug(COLL,
                   "%s: %zu bytes from rank %d buffered ahead of their receives "
                   "(COLL_UNEXPECTED_MAX %zu): its later messages wait until a receive is posted",
                   m->tpname, m->unexp_bytes, m->peer, m->unexp_max);
    }
}

static void match_complete(coll_tp_op_t *op, coll_result_t st)
{
    op->next = NULL;
    op->done(op->arg, st);
}

void coll_tp_match_fini(coll_tp_match_t *m, coll_result_t status)
{
    coll_tp_mlink_t *l;
    coll_tp_unexp_t *u;
    while ((l = coll_tp_mindex_pop(&m->posted)) != NULL) {
        match_complete(coll_tp_mindex_entry(l, coll_tp_op_t, mlink), status);
    }
    while ((l = coll_tp_mindex_pop(&m->unexp)) != NULL) {
        u = coll_tp_mindex_entry(l, coll_tp_unexp_t, link);
        if (u->waiting != NULL) {
            match_complete(u->waiting, status);
        }
        coll_free(u->data);
        coll_free(u);
    }
    coll_tp_mindex_fini(&m->posted);
    coll_tp_mindex_fini(&m->unexp);
    m->unexp_bytes = 0;
    m->nwaiting    = 0;
    while (m->spare != NULL) {
        u        = m->spare;
        m->spare = u->next;
        coll_free(u->data);
        coll_free(u);
    }
    m->nspare      = 0;
    m->spare_bytes = 0;
}

/* A record with a buffer of at least total bytes: the smallest spare that fits, else new. */
static coll_tp_unexp_t *match_unexp_get(coll_tp_match_t *m, size_t total)
{
    coll_tp_unexp_t *best = NULL, *best_prev = NULL, *prev = NULL;

    for (coll_tp_unexp_t *u = m->spare; u != NULL; prev = u, u = u->next) {
        if (u->cap >= total && (best == NULL || u->cap < best->cap)) {
            best      = u;
            best_prev = prev;
        }
    }
    if (best != NULL) {
        if (best_prev == NULL) {
            m->spare = best->next;
        } else {
            best_prev->next = best->next;
        }
        m->nspare--;
        m->spare_bytes -= best->cap;
        best->tag     = 0;
        best->total   = 0;
        best->bytes   = 0;
        best->waiting = NULL;
        best->next    = NULL;
        return best;
    }
    best = coll_calloc(1, sizeof(*best), "unexpected message");
    if (best == NULL) {
        return NULL;
    }
    /* round sizes up so one spare serves the neighbouring sizes too: to a power of two below
     * MATCH_CAP_ROUND (thousands of small messages may wait at once), to its multiples above */
    if (total < MATCH_CAP_ROUND) {
        best->cap = MATCH_CAP_MIN;
        while (best->cap < total) {
            best->cap *= 2;
        }
    } else {
        best->cap = (total <= MATCH_SPARE_BYTES_MAX)
                        ? (total + MATCH_CAP_ROUND - 1) / MATCH_CAP_ROUND * MATCH_CAP_ROUND
                        : total;
    }
    best->data = coll_malloc(best->cap > 0 ? best->cap : 1, "unexpected message data");
    if (best->data == NULL) {
        coll_free(best);
        return NULL;
    }
    return best;
}

/* Keep the record as a spare if it fits the bounds (evicting the smallest), else free it. */
static void match_unexp_put(coll_tp_match_t *m, coll_tp_unexp_t *u)
{
    while (u->cap <= MATCH_SPARE_BYTES_MAX && m->spare != NULL &&
           (m->nspare >= MATCH_SPARE_MAX || m->spare_bytes + u->cap > MATCH_SPARE_BYTES_MAX)) {
        coll_tp_unexp_t **pp = &m->spare, **small = &m->spare;
        for (; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->cap < (*small)->cap) {
                small = pp;
            }
        }
        if ((*small)->cap > u->cap) {
            break; /* every spare is bigger than this one: keep them */
        }
        coll_tp_unexp_t *victim = *small;
        *small                  = victim->next;
        m->nspare--;
        m->spare_bytes -= victim->cap;
        coll_free(victim->data);
        coll_free(victim);
    }
    if (u->cap <= MATCH_SPARE_BYTES_MAX && m->nspare < MATCH_SPARE_MAX &&
        m->spare_bytes + u->cap <= MATCH_SPARE_BYTES_MAX) {
        u->next  = m->spare;
        m->spare = u;
        m->nspare++;
        m->spare_bytes += u->cap;
        return;
    }
    coll_free(u->data);
    coll_free(u);
}

/* Copy or reduce n bytes of incoming data into op at offset off: COLL_OK, or the device copy's
 * error (op->dev: op->buf is device memory, copied by the CUDA copy engine). */
static coll_result_t match_put(coll_tp_op_t *op, size_t off, const void *data, size_t n)
{
    if (n == 0) {
        return COLL_OK;
    }
    char *dst = (char *)op->buf + off;
    if (op->dev != NULL) { /* never with an operand: the engine posts no such receive */
        return coll_cuda_copy_sync(op->dev, dst, data, n, 1);
    }
    if (op->operand == NULL) {
        memcpy(dst, data, n);
    } else {
        size_t esize = coll_dtype_size(op->dtype);
        coll_reduce3(op->dtype, op->op, dst, (const char *)op->operand + off, data, n / esize);
    }
    return COLL_OK;
}

coll_result_t coll_tp_match_check_len(const coll_tp_match_t *m, const coll_tp_op_t *op,
                                      size_t total)
{
    if (total != op->len) {
        coll_error(COLL,
                   "%s: rank %d sent %zu bytes with tag 0x%" PRIx64 " but the receive expects %zu "
                   "(ranks called different operations or counts)",
                   m->tpname, m->peer, total, op->tag, op->len);
        return COLL_ERR_MISMATCH;
    }
    return COLL_OK;
}

coll_result_t coll_tp_match_p2p_clash(const coll_tp_match_t *m, uint64_t sent_tag)
{
    coll_error(COLL,
               "%s: rank %d's message (its send #%u to this rank) is %s than the receive posted "
               "for it: the counts (or types) of the send and the receive differ",
               m->tpname, m->peer, (unsigned)((sent_tag >> 32) & 0x7fffffffu),
               (sent_tag & COLL_TAG_P2P_END) == 0 ? "longer" : "shorter");
    return COLL_ERR_MISMATCH;
}

/* A posted receive whose tag differs from the arriving tag in COLL_TAG_P2P_END alone? */
static int match_posted_clash(const coll_tp_match_t *m, uint64_t tag)
{
    return (tag & COLL_TAG_P2P) != 0 && /* a collective's message cannot clash */
           coll_tp_mindex_find(&m->posted, tag ^ COLL_TAG_P2P_END, NULL) != NULL;
}

/* The oldest posted receive of tag, or NULL. */
static coll_tp_op_t *match_find_posted(const coll_tp_match_t *m, uint64_t tag)
{
    coll_tp_mlink_t *l = coll_tp_mindex_find(&m->posted, tag, NULL);
    return l != NULL ? coll_tp_mindex_entry(l, coll_tp_op_t, mlink) : NULL;
}

/* The oldest buffered message with tag; with incomplete_only, one still arriving. */
static coll_tp_unexp_t *match_find_unexp_(coll_tp_match_t *m, uint64_t tag, int incomplete_only)
{
    for (coll_tp_mlink_t *l = coll_tp_mindex_find(&m->unexp, tag, NULL); l != NULL;
         l                  = coll_tp_mindex_find(&m->unexp, tag, l)) {
        coll_tp_unexp_t *u = coll_tp_mindex_entry(l, coll_tp_unexp_t, link);
        if (!incomplete_only || u->bytes < u->total) {
            return u;
        }
    }
    return NULL;
}

static coll_tp_unexp_t *match_find_unexp(coll_tp_match_t *m, uint64_t tag)
{
    return match_find_unexp_(m, tag, 0);
}

static void match_release_unexp(coll_tp_match_t *m, coll_tp_unexp_t *u)
{
    coll_tp_mindex_remove(&m->unexp, &u->link);
    m->unexp_bytes -= u->total;
    match_unexp_put(m, u);
}

coll_result_t coll_tp_match_post(coll_tp_match_t *m, coll_tp_op_t *op)
{
    coll_tp_unexp_t *u = match_find_unexp(m, op->tag);

    op->bytes = 0;
    op->next  = NULL;
    if (u == NULL) {
        if ((op->tag & COLL_TAG_P2P) != 0 &&
            (u = match_find_unexp(m, op->tag ^ COLL_TAG_P2P_END)) != NULL) {
            return coll_tp_match_p2p_clash(m, u->tag);
        }
        coll_tp_mindex_add(&m->posted, &op->mlink, op->tag);
        return COLL_OK;
    }
    coll_result_t st = coll_tp_match_check_len(m, op, u->total);
    if (st != COLL_OK) {
        return st;
    }
    if (u->bytes < u->total) {
        u->waiting = op; /* the rest arrives into the buffer; delivered whole at the end */
        m->nwaiting++;
        return COLL_OK;
    }
    st        = match_put(op, 0, u->data, u->total);
    op->bytes = st == COLL_OK ? u->total : 0;
    match_release_unexp(m, u);
    match_complete(op, st);
    return COLL_OK;
}

static coll_result_t match_buffer(coll_tp_match_t *m, uint64_t tag, size_t total, size_t off,
                                  const void *data, size_t n)
{
    coll_tp_unexp_t *u = match_find_unexp_(m, tag, 1);
    if (u == NULL) {
        u = match_unexp_get(m, total);
        if (u == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
        u->tag   = tag;
        u->total = total;
        u->next  = NULL;
        coll_tp_mindex_add(&m->unexp, &u->link, tag); /* after older messages of the tag */
        m->unexp_bytes += total;
    } else if (u->total != total) {
        coll_error(COLL, "%s: rank %d sent fragments of tag 0x%" PRIx64 " with lengths %zu and %zu",
                   m->tpname, m->peer, tag, u->total, total);
        return COLL_ERR_TRANSPORT;
    }
    if (off > total || n > total - off) {
        coll_error(COLL, "%s: fragment [%zu, +%zu) of rank %d outside its %zu-byte message",
                   m->tpname, off, n, m->peer, total);
        return COLL_ERR_TRANSPORT;
    }
    if (n > 0) {
        memcpy(u->data + off, data, n);
    }
    u->bytes += n;
    if (u->bytes >= u->total && u->waiting != NULL) {
        coll_tp_op_t *op = u->waiting;
        m->nwaiting--;
        coll_result_t st = match_put(op, 0, u->data, u->total);
        op->bytes        = st == COLL_OK ? u->total : 0;
        match_release_unexp(m, u);
        match_complete(op, st);
    }
    return COLL_OK;
}

coll_result_t coll_tp_match_deliver(coll_tp_match_t *m, uint64_t tag, size_t total, size_t off,
                                    const void *data, size_t n)
{
    coll_tp_op_t *op = match_find_posted(m, tag);
    if (op != NULL) {
        COLL_CHECK(coll_tp_match_check_len(m, op, total));
        if (off > total || n > total - off) {
            coll_error(COLL, "%s: fragment [%zu, +%zu) of rank %d outside its %zu-byte message",
                       m->tpname, off, n, m->peer, total);
            return COLL_ERR_TRANSPORT;
        }
        coll_result_t st = match_put(op, off, data, n);
        if (st != COLL_OK) {
            return st; /* a device copy failed: the transport fails the endpoint, and op */
        }
        op->bytes += n;
        if (op->bytes >= op->len) {
            coll_tp_mindex_remove(&m->posted, &op->mlink);
            match_complete(op, COLL_OK);
        }
        return COLL_OK;
    }
    if (match_posted_clash(m, tag)) {
        return coll_tp_match_p2p_clash(m, tag);
    }
    return match_buffer(m, tag, total, off, data, n);
}

coll_result_t coll_tp_match_take(coll_tp_match_t *m, uint64_t tag, size_t total,
                                 coll_tp_op_t **op_p)
{
    coll_tp_op_t *op = match_find_posted(m, tag);

    *op_p = NULL;
    if (op != NULL) {
        COLL_CHECK(coll_tp_match_check_len(m, op, total));
        coll_tp_mindex_remove(&m->posted, &op->mlink);
        *op_p = op;
        return COLL_OK;
    }
    return match_posted_clash(m, tag) ? coll_tp_match_p2p_clash(m, tag) : COLL_OK;
}

coll_tp_op_t *coll_tp_match_lookup_copy(coll_tp_match_t *m, uint64_t tag, size_t total)
{
    coll_tp_op_t *op = match_find_posted(m, tag);
    return (op != NULL && op->operand == NULL && op->dev == NULL && op->len == total) ? op : NULL;
}

coll_result_t coll_tp_match_account(coll_tp_match_t *m, coll_tp_op_t *op, size_t n)
{
    op->bytes += n;
    if (op->bytes < op->len) {
        return COLL_OK;
    }
    for (coll_tp_mlink_t *l = coll_tp_mindex_find(&m->posted, op->tag, NULL); l != NULL;
         l                  = coll_tp_mindex_find(&m->posted, op->tag, l)) {
        if (l == &op->mlink) {
            coll_tp_mindex_remove(&m->posted, l);
            match_complete(op, COLL_OK);
            return COLL_OK;
        }
    }
    coll_error(COLL, "%s: accounted bytes for a receive that is not posted", m->tpname);
    return COLL_ERR_INTERNAL;
}
