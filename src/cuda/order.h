/* SPDX-License-Identifier: MIT */
/*
 * Bookkeeping of calls on device memory that runs without CUDA, so that every build tests it
 * (tests/unit/test_cuda_order): which ticket the callers' streams may be released up to, and
 * the parts of the pinned message staging.
 */
#ifndef COLL_CUDA_ORDER_H
#define COLL_CUDA_ORDER_H

#include <stddef.h>
#include <stdint.h>

/* Stream-ordered calls in flight, in ticket order. The streams wait on one counter (flag >=
 * ticket), so it may move past a ticket only once every such call up to it has ended; calls
 * end in any order. Tickets of calls no stream waits for are never added. */
typedef struct coll_ticket_node {
    struct coll_ticket_node *next;
    uint32_t                 ticket;
    int                      ended;
} coll_ticket_node_t;

typedef struct {
    coll_ticket_node_t *head, *tail;
} coll_ticket_fifo_t;

/* n (not in the queue) is in flight with this ticket, higher than any added before */
void coll_ticket_fifo_add(coll_ticket_fifo_t *q, coll_ticket_node_t *n, uint32_t ticket);
/* n ended. Returns the nodes that may now be released (ended, every earlier one too), unlinked,
 * in ticket order and linked by next, NULL when none; *release_p is the last one's ticket. */
coll_ticket_node_t *coll_ticket_fifo_end(coll_ticket_fifo_t *q, coll_ticket_node_t *n,
                                         uint32_t *release_p);

/* Parts of a region of cap bytes, taken one after another (256-byte aligned) and whole again
 * once no part is held. */
typedef struct {
    size_t cap, used;
    int    holders;
} coll_parts_t;

#define COLL_PARTS_NONE ((size_t)-1)
size_t coll_parts_take(coll_parts_t *p, size_t need); /* offset, or COLL_PARTS_NONE */
void   coll_parts_give(coll_parts_t *p);              /* one part given back */

#endif
