/* SPDX-License-Identifier: MIT */
/*
 * Test harness: assertions that print both sides, and coll_test_run_ranks(), which forks N
 * ranks that rendezvous through a file in a private mkdtemp() directory (no launcher, no MPI).
 * Exit codes follow automake: 0 pass, 77 skip, 99 harness error, anything else failure.
 */
#ifndef COLL_TEST_H
#define COLL_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll.h"

#define COLL_TEST_SKIP 77
#define COLL_TEST_HARD 99

#define ASSERT_(_cond, _fmt, ...)                                                                  \
    do {                                                                                           \
        if (!(_cond)) {                                                                            \
            fprintf(stderr, "%s:%d: assertion failed: " _fmt "\n", __FILE__, __LINE__,             \
                    __VA_ARGS__);                                                                  \
            fflush(stderr);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define ASSERT_TRUE(_c) ASSERT_((_c), "%s", #_c)
#define ASSERT_EQ(_a, _b)                                                                          \
    do {                                                                                           \
        long long _va = (long long)(_a), _vb = (long long)(_b);                                    \
        ASSERT_(_va == _vb, "%s == %s (%lld vs %lld)", #_a, #_b, _va, _vb);                        \
    } while (0)
#define ASSERT_NE(_a, _b)                                                                          \
    do {                                                                                           \
        long long _va = (long long)(_a), _vb = (long long)(_b);                                    \
        ASSERT_(_va != _vb, "%s != %s (both %lld)", #_a, #_b, _va);                                \
    } while (0)
#define ASSERT_OK(_expr)                                                                           \
    do {                                                                                           \
        coll_result_t _r = (_expr);                                                                \
        ASSERT_(_r == COLL_OK, "%s returned %d (%s)", #_expr, (int)_r, coll_strerror(_r));         \
    } while (0)
#define ASSERT_STR_CONTAINS(_hay, _needle)                                                         \
    do {                                                                                           \
        const char *_h = (_hay);                                                                   \
        ASSERT_(_h != NULL && strstr(_h, (_needle)) != NULL, "\"%s\" contains \"%s\"",             \
                _h ? _h : "(null)", (_needle));                                                    \
    } while (0)

/* Function run by each rank; returns 0 on success. comm is ready (NULL when want_comm == 0). */
typedef int (*coll_test_rank_fn_t)(int rank, int nranks, coll_comm_t *comm, void *arg);

typedef struct {
    int         nranks;
    int         want_comm;      /* 1: harness creates the communicator before calling fn */
    double      timeout_s;      /* per run, scaled by COLL_TEST_TIMEOUT_MULTIPLIER */
    const char *transport;      /* sets COLL_TRANSPORT in the children, NULL = inherit */
    const char *rendezvous_dir; /* filled by the harness: private directory of this run */
    int         victim;         /* 1 + rank expected to die by SIGKILL (not a failure); 0 none */
    void (*before_share)(const coll_unique_id_t *id); /* rank 0, before the id is shared */
    void (*before_comm)(int rank, int nranks);        /* each child, first: its own environment */
} coll_test_opts_t;

/* Fork nranks children, run fn in each, collect exit statuses; 0 if all returned 0.
 * Children that outlive the timeout are killed and reported. */
int coll_test_run_ranks(const coll_test_opts_t *opts, coll_test_rank_fn_t fn, void *arg);

/* Inside a child: create a communicator of nranks through the run's rendezvous file. */
coll_result_t coll_test_comm_create(const char *dir, int rank, int nranks, coll_comm_t **comm_p);
/* Inside a child of a run with want_comm == 0: the directory to pass coll_test_comm_create. */
const char *coll_test_rendezvous_dir(void);

/* Lines of this process' library log (COLL_DEBUG_FILE, %p standing for the pid) that contain
 * mark; 0 when no log file is set or it does not exist yet. */
int coll_test_log_count(const char *mark);

/* One run of coll_test_run_ranks with the library's log in a fresh directory (COLL_DEBUG_FILE,
 * a file per process); prints "PASS|FAIL: what, N ranks (T s)", and on failure the logs' WARN and
 * ERROR lines and those containing mark (NULL: none); removes the logs. 1 when it failed. */
int coll_test_run_logged(const char *what, const coll_test_opts_t *opts, const char *mark,
                         coll_test_rank_fn_t fn, void *arg);

/* Transports to loop over: COLL_TEST_TRANSPORTS (default "shm,tcp"); returns count. */
int coll_test_transports(const char *list[], int max);
/* 1 when name is among coll_test_transports. */
int coll_test_has_transport(const char *name);
/* For tests of the direct path that read what ran from the library's log: 1 when shm is among
 * the tested transports, with the info log on for every subsystem and COLL_ALGO unset; else
 * prints the SKIP line and returns 0 (the test exits COLL_TEST_SKIP). */
int coll_test_direct_setup(void);

/* Deterministic pseudo-random generator for test data. */
static inline uint64_t coll_test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
