/* SPDX-License-Identifier: MIT */
/*
 * In-process network simulator for schedules: runs the schedules of every rank of a call (or
 * of several point-to-point calls) on real buffers, honouring dependencies, matching messages
 * by (sender, receiver, tag) and picking a random next event, so that any legal interleaving
 * can occur. It reports deadlocks, unmatched or mismatched messages, out-of-bounds accesses
 * and data hazards (a write into a region a running step reads or writes). Test code only.
 */
#ifndef COLL_TEST_SIM_H
#define COLL_TEST_SIM_H

#include <stddef.h>
#include <stdint.h>
#include "sched.h"

/* One participant: a finalized schedule and the buffers it runs on. A NULL buffer must not be
 * referenced by any step of nonzero length. */
typedef struct sim_proc {
    const coll_sched_t *sched;
    void               *buf[COLL_BUF_COUNT];
    size_t              size[COLL_BUF_COUNT];
} sim_proc_t;

typedef struct sim_stats {
    uint64_t events;   /* simulation events processed */
    uint64_t messages; /* messages delivered */
    uint64_t eager;    /* messages whose send completed before the receive was posted */
} sim_stats_t;

/*
 * Run all procs to completion. seed picks the interleaving. Returns 0, or -1 with a message in
 * err. stats_p may be NULL.
 */
int sim_run(sim_proc_t *procs, int nprocs, uint64_t seed, sim_stats_t *stats_p, char *err,
            size_t errlen);

/* Plants one bug of each kind the simulator must report (deadlock, length mismatch, unmatched
 * send, out-of-bounds access, missing WAR edge) and checks that it does, and that the fixed
 * schedule passes. Returns 0, or -1 with a message in err. */
int sim_selftest(char *err, size_t errlen);

#endif
