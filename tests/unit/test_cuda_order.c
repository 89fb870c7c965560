/* SPDX-License-Identifier: MIT */
/*
 * The bookkeeping of calls on device memory that runs without CUDA (src/cuda/order.c), in
 * every build:
 *   release queue  stream-ordered calls with increasing tickets (gaps: calls no stream waits
 *                  for) end in random orders; after each end the released ticket must be the
 *                  highest one whose call and every earlier one ended, never move back, and
 *                  every call be released exactly once, in ticket order;
 *   message parts  random takes and gives: the parts held never overlap, stay inside the
 *                  region, start 256-byte aligned, a part that would not fit is refused, and the
 *                  region is whole again (next part at 0) once none is held.
 */
#include "coll_test.h"
#include "cuda/order.h"

#include <string.h>

#define CALLS 64

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rng(void)
{
    return (uint32_t)(coll_test_rand(&rng_state) >> 11);
}

static void test_release_queue(void)
{
    for (int round = 0; round < 2000; round++) {
        coll_ticket_fifo_t q = {NULL, NULL};
        coll_ticket_node_t node[CALLS];
        uint32_t           ticket[CALLS], t = 0, released = 0;
        int                ended[CALLS] = {0}, seen[CALLS] = {0}, n = 1 + (int)(rng() % CALLS);
        int                order[CALLS];

        for (int i = 0; i < n; i++) {
            t += 1 + rng() % 3; /* gaps: request-based calls take tickets too */
            ticket[i] = t;
            coll_ticket_fifo_add(&q, &node[i], t);
            order[i] = i;
        }
        for (int i = n - 1; i > 0; i--) { /* the order the calls end in */
            int j = (int)(rng() % (uint32_t)(i + 1)), x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        for (int k = 0; k < n; k++) {
            int                 i   = order[k];
            uint32_t            rel = released;
            coll_ticket_node_t *out = coll_ticket_fifo_end(&q, &node[i], &rel);
            ended[i]                = 1;
            int want                = -1; /* the last call of the ended prefix */
            while (want + 1 < n && ended[want + 1]) {
                want++;
            }
            uint32_t want_rel = want >= 0 ? ticket[want] : 0;
            ASSERT_(rel == (want_rel > released ? want_rel : released),
                    "round %d, end %d: released %u, expected %u", round, k, rel, want_rel);
            ASSERT_(rel >= released, "round %d: the release moved back (%u < %u)", round, rel,
                    released);
            ASSERT_EQ(out != NULL, rel != released);
            uint32_t prev = released;
            for (coll_ticket_node_t *x = out; x != NULL; x = x->next) {
                int idx = (int)(x - node);
                ASSERT_(idx >= 0 && idx < n && ended[idx] && !seen[idx],
                        "round %d: call %d released wrongly", round, idx);
                ASSERT_(x->ticket > prev, "round %d: released out of ticket order", round);
                prev      = x->ticket;
                seen[idx] = 1;
            }
            released = rel;
        }
        for (int i = 0; i < n; i++) {
            ASSERT_(seen[i], "round %d: call %d never released", round, i);
        }
        ASSERT_(q.head == NULL && q.tail == NULL, "round %d: queue not empty", round);
        ASSERT_EQ(released, ticket[n - 1]);
    }
}

static void test_parts(void)
{
    enum { HOLD = 16 };
    for (int round = 0; round < 2000; round++) {
        size_t       cap = 256 + rng() % (1u << 16);
        coll_parts_t p   = {cap, 0, 0};
        size_t       at[HOLD], len[HOLD];
        int          held = 0;

        for (int step = 0; step < 200; step++) {
            if (held > 0 && (held == HOLD || rng() % 2)) { /* give one back, any of them */
                int j  = (int)(rng() % (uint32_t)held);
                at[j]  = at[held - 1];
                len[j] = len[held - 1];
                held--;
                coll_parts_give(&p);
                if (held == 0) {
                    ASSERT_EQ(p.used, (size_t)0);
                }
                continue;
            }
            size_t need = 1 + rng() % (cap / 2 + 64);
            size_t off  = coll_parts_take(&p, need);
            if (off == COLL_PARTS_NONE) { /* refused: only where something is held */
                ASSERT_(held > 0 || need > cap,
                        "round %d: %zu bytes of an empty region of %zu refused", round, need, cap);
                continue;
            }
            ASSERT_(off % 256 == 0 && off + need <= cap, "round %d: part [%zu, +%zu) in %zu", round,
                    off, need, cap);
            if (held == 0) {
                ASSERT_EQ(off, (size_t)0);
            }
            for (int j = 0; j < held; j++) {
                ASSERT_(off >= at[j] + len[j] || off + need <= at[j],
                        "round %d: part [%zu, +%zu) overlaps [%zu, +%zu)", round, off, need, at[j],
                        len[j]);
            }
            at[held]  = off;
            len[held] = need;
            held++;
        }
    }
}

int main(void)
{
    test_release_queue();
    test_parts();
    printf("release queue: 2000 rounds ok; message parts: 2000 rounds ok\n");
    return 0;
}
