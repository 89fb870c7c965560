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
#include "util.h"
#include "reduce/reduce.h"

#include <inttypes.h>
#include <string.h>

void coll_tp_match_init(coll_tp_match_t *m, int peer, const char *tpname)
{
    memset(m, 0, sizeof(*m));
    m->peer   = peer;
    m->tpname = tpname;
}

static void match_complete(coll_tp_op_t *op, coll_result_t st)
{
    op->next = NULL;
    op->done(op->arg, st);
}

void coll_tp_match_fini(coll_tp_match_t *m, coll_result_t status)
{
    coll_tp_op_t *op = m->posted_head;
    m->posted_head = m->posted_tail = NULL;
    while (op != NULL) {
        coll_tp_op_t *next = op->next;
        match_complete(op, status);
        op = next;
    }
    coll_tp_unexp_t *u = m->unexp_head;
    m->unexp_head      = NULL;
    while (u != NULL) {
        coll_tp_unexp_t *next = u->next;
        if (u->waiting != NULL) {
            match_complete(u->waiting, status);
        }
        coll_free(u->data);
        coll_free(u);
        u = next;
    }
    m->unexp_bytes = 0;
}

/* Copy or reduce n bytes of incoming data into op at offset off. */
static void match_put(coll_tp_op_t *op, size_t off, const void *data, size_t n)
{
    if (n == 0) {
        return;
    }
    char *dst = (char *)op->buf + off;
    if (op->operand == NULL) {
        memcpy(dst, data, n);
    } else {
        size_t esize = coll_dtype_size(op->dtype);
        coll_reduce3(op->dtype, op->op, dst, (const char *)op->operand + off, data, n / esize);
    }
}

static coll_result_t match_check_len(coll_tp_match_t *m, const coll_tp_op_t *op, size_t total)
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

static void match_unlink_posted(coll_tp_match_t *m, coll_tp_op_t *prev, coll_tp_op_t *op)
{
    if (prev == NULL) {
        m->posted_head = op->next;
    } else {
        prev->next = op->next;
    }
    if (m->posted_tail == op) {
        m->posted_tail = prev;
    }
}

/* The oldest buffered message with tag; with incomplete_only, one still arriving. */
static coll_tp_unexp_t *match_find_unexp_(coll_tp_match_t *m, uint64_t tag, int incomplete_only,
                                          coll_tp_unexp_t **prev_p)
{
    coll_tp_unexp_t *prev = NULL;
    for (coll_tp_unexp_t *u = m->unexp_head; u != NULL; prev = u, u = u->next) {
        if (u->tag == tag && (!incomplete_only || u->bytes < u->total)) {
            if (prev_p != NULL) {
                *prev_p = prev;
            }
            return u;
        }
    }
    return NULL;
}

static coll_tp_unexp_t *match_find_unexp(coll_tp_match_t *m, uint64_t tag, coll_tp_unexp_t **prev_p)
{
    return match_find_unexp_(m, tag, 0, prev_p);
}

static void match_release_unexp(coll_tp_match_t *m, coll_tp_unexp_t *prev, coll_tp_unexp_t *u)
{
    if (prev == NULL) {
        m->unexp_head = u->next;
    } else {
        prev->next = u->next;
    }
    m->unexp_bytes -= u->total;
    coll_free(u->data);
    coll_free(u);
}

coll_result_t coll_tp_match_post(coll_tp_match_t *m, coll_tp_op_t *op)
{
    coll_tp_unexp_t *prev = NULL;
    coll_tp_unexp_t *u    = match_find_unexp(m, op->tag, &prev);

    op->bytes = 0;
    op->next  = NULL;
    if (u == NULL) {
        if (m->posted_tail == NULL) {
            m->posted_head = op;
        } else {
            m->posted_tail->next = op;
        }
        m->posted_tail = op;
        return COLL_OK;
    }
    coll_result_t st = match_check_len(m, op, u->total);
    if (st != COLL_OK) {
        return st;
    }
    if (u->bytes < u->total) {
        u->waiting = op; /* the rest arrives into the buffer; delivered whole at the end */
        return COLL_OK;
    }
    match_put(op, 0, u->data, u->total);
    op->bytes = u->total;
    match_release_unexp(m, prev, u);
    match_complete(op, COLL_OK);
    return COLL_OK;
}

static coll_result_t match_buffer(coll_tp_match_t *m, uint64_t tag, size_t total, size_t off,
                                  const void *data, size_t n)
{
    coll_tp_unexp_t *prev = NULL;
    coll_tp_unexp_t *u    = match_find_unexp_(m, tag, 1, &prev);
    if (u == NULL) {
        u = coll_calloc(1, sizeof(*u), "unexpected message");
        if (u == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
        u->data = coll_malloc(total, "unexpected message data");
        if (u->data == NULL) {
            coll_free(u);
            return COLL_ERR_NO_MEMORY;
        }
        u->tag   = tag;
        u->total = total;
        u->next  = NULL;
        /* append, so lookups find older messages first */
        if (m->unexp_head == NULL) {
            m->unexp_head = u;
        } else {
            coll_tp_unexp_t *t = m->unexp_head;
            while (t->next != NULL) {
                t = t->next;
            }
            t->next = u;
        }
        prev = NULL; /* recomputed below if needed */
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
        match_put(op, 0, u->data, u->total);
        op->bytes = u->total;
        prev      = NULL;
        for (coll_tp_unexp_t *t = m->unexp_head; t != u; t = t->next) {
            prev = t;
        }
        match_release_unexp(m, prev, u);
        match_complete(op, COLL_OK);
    }
    return COLL_OK;
}

coll_result_t coll_tp_match_deliver(coll_tp_match_t *m, uint64_t tag, size_t total, size_t off,
                                    const void *data, size_t n)
{
    coll_tp_op_t *prev = NULL;
    for (coll_tp_op_t *op = m->posted_head; op != NULL; prev = op, op = op->next) {
        if (op->tag != tag) {
            continue;
        }
        COLL_CHECK(match_check_len(m, op, total));
        if (off > total || n > total - off) {
            coll_error(COLL, "%s: fragment [%zu, +%zu) of rank %d outside its %zu-byte message",
                       m->tpname, off, n, m->peer, total);
            return COLL_ERR_TRANSPORT;
        }
        match_put(op, off, data, n);
        op->bytes += n;
        if (op->bytes >= op->len) {
            match_unlink_posted(m, prev, op);
            match_complete(op, COLL_OK);
        }
        return COLL_OK;
    }
    return match_buffer(m, tag, total, off, data, n);
}

coll_tp_op_t *coll_tp_match_lookup_copy(coll_tp_match_t *m, uint64_t tag, size_t total)
{
    for (coll_tp_op_t *op = m->posted_head; op != NULL; op = op->next) {
        if (op->tag == tag) {
            return (op->operand == NULL && op->len == total) ? op : NULL;
        }
    }
    return NULL;
}

coll_result_t coll_tp_match_account(coll_tp_match_t *m, coll_tp_op_t *op, size_t n)
{
    op->bytes += n;
    if (op->bytes < op->len) {
        return COLL_OK;
    }
    coll_tp_op_t *prev = NULL;
    for (coll_tp_op_t *p = m->posted_head; p != NULL; prev = p, p = p->next) {
        if (p == op) {
            match_unlink_posted(m, prev, op);
            match_complete(op, COLL_OK);
            return COLL_OK;
        }
    }
    coll_error(COLL, "%s: accounted bytes for a receive that is not posted", m->tpname);
    return COLL_ERR_INTERNAL;
}
