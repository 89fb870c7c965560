/* SPDX-License-Identifier: MIT */
/*
 * Dissemination barrier: in round k every rank sends a zero-byte message to (r + 2^k) % n and
 * receives one from (r - 2^k) % n. The send of round k waits for the receive of round k-1 and
 * for the send of round k-1 (which waited for all earlier receives), so it carries everything
 * this rank has heard; after ceil(log2 n) rounds every rank has heard, transitively, from every
 * other. One schedule.
 */
#include "basic/basic.h"

coll_result_t coll_dissemination_barrier_build(int rank, int nranks, const coll_args_t *args,
                                               coll_sched_t *s)
{
    int      prev_recv = -1, prev_send = -1;
    uint32_t k = 0;

    for (long long dist = 1; dist < nranks; dist *= 2, k++) {
        int to   = (int)((rank + dist) % nranks);
        int from = (int)((rank - dist % nranks + nranks) % nranks);
        int snd  = coll_sched_send(s, to, k, COLL_BUF_SEND, 0, 0);

        coll_sched_dep(s, snd, prev_recv);
        coll_sched_dep(s, snd, prev_send);
        prev_send = snd;
        prev_recv = coll_sched_recv(s, from, k, COLL_BUF_RECV, 0, 0);
    }
    return s->build_error;
}
