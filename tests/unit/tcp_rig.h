/* SPDX-License-Identifier: MIT */
/*
 * Rig of the TCP transport tests (test_tcp, test_tcp_faults; tcp_rig.c): operations with their
 * completion record, data fill/check and a progress loop bounded by WAIT_MAX; rank setup over
 * listen handles exchanged through files in a mkdtemp() directory (no bootstrap), optionally
 * visited by stray clients; and the driver that forks the ranks of one configuration with its
 * COLL_TCP_* settings and checks how each ended and what the log holds. It tests nothing itself.
 */
#ifndef COLL_TEST_TCP_RIG_H
#define COLL_TEST_TCP_RIG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "tcp/tcp.h"

#define MAXR     4
#define WAIT_MAX 20.0 /* seconds; a hang fails the test instead of blocking make check */

extern const coll_transport_ops_t *ops;

/* One operation with its completion record. */
typedef struct top {
    coll_tp_op_t  op;
    int           done;
    coll_result_t st;
} top_t;

typedef struct trank {
    int            rank;
    int            nranks;
    coll_tp_ctx_t *ctx;
    coll_tp_ep_t  *eps[MAXR];
    size_t         frag;
    int            stray_fds[2];
    pthread_t      stray_thread;
} trank_t;

void     top_init(top_t *t, void *buf, size_t len, uint64_t tag);
void     fill(void *buf, size_t len, uint64_t seed);
void     check(const void *buf, size_t len, uint64_t seed, const char *what);
uint64_t seed_of(int src, int dst, uint64_t tag);
/* Drive progress until every op of the array is done (or WAIT_MAX passes: fail). */
void wait_all(trank_t *t, top_t *ops_, int n);
void expect_ok(top_t *ops_, int n);
/* Every rank sends a zero-length message to every other rank and waits for theirs. */
void barrier(trank_t *t, uint64_t tag);

/* stray_ranks: bit r set = rank r is visited by stray clients while it sets up. */
coll_result_t rank_setup(trank_t *t, const char *dir, int rank, int nranks, unsigned stray_ranks);
void          rank_teardown(trank_t *t);

typedef int (*rank_fn_t)(const char *dir, int rank, int nranks);

typedef struct run_cfg {
    const char        *name;
    rank_fn_t          fn;
    int                nranks;
    const char        *nsocks;      /* COLL_TCP_NSOCKS */
    const char        *frag;        /* COLL_TCP_FRAG_SIZE */
    const char        *nsocks_last; /* COLL_TCP_NSOCKS of the last rank, if different */
    int                kill_rank0;  /* rank 0 is expected to die of SIGKILL */
    const char *const *expect_log;  /* if set: the log goes to a file that must hold these */
} run_cfg_t;

/* Forks the ranks of one configuration and checks how each ended; prog prefixes its report.
 * Returns nonzero on failure. */
int run(const char *prog, const run_cfg_t *cfg);

#endif
