/* SPDX-License-Identifier: MIT */
/* Bookkeeping of calls on device memory (order.h): the release queue and the message parts. */
#include "cuda/order.h"

void coll_ticket_fifo_add(coll_ticket_fifo_t *q, coll_ticket_node_t *n, uint32_t ticket)
{
    n->next   = NULL;
    n->ticket = ticket;
    n->ended  = 0;
    if (q->tail != NULL) {
        q->tail->next = n;
    } else {
        q->head = n;
    }
    q->tail = n;
}

coll_ticket_node_t *coll_ticket_fifo_end(coll_ticket_fifo_t *q, coll_ticket_node_t *n,
                                         uint32_t *release_p)
{
    coll_ticket_node_t *out = NULL, *last = NULL;

    n->ended = 1;
    while (q->head != NULL && q->head->ended) {
        coll_ticket_node_t *x = q->head;
        q->head               = x->next;
        if (q->head == NULL) {
            q->tail = NULL;
        }
        x->next = NULL;
        if (last != NULL) {
            last->next = x;
        } else {
            out = x;
        }
        last       = x;
        *release_p = x->ticket;
    }
    return out;
}

size_t coll_parts_take(coll_parts_t *p, size_t need)
{
    size_t at = (p->used + 255) & ~(size_t)255;
    if (need > p->cap || at > p->cap - need) {
        return COLL_PARTS_NONE;
    }
    p->used = at + need;
    p->holders++;
    return at;
}

void coll_parts_give(coll_parts_t *p)
{
    if (p->holders > 0 && --p->holders == 0) {
        p->used = 0;
    }
}
