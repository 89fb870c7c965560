/* SPDX-License-Identifier: MIT */
/*
 * collrun.h -- shared state of collrun, the local launcher (collrun.c parses options,
 * collrun_spawn.c starts the ranks, collrun_loop.c supervises them, collrun_relay.c prefixes
 * their output). collrun never links libcoll: it only hands its ranks COLL_* variables.
 * It launches on this host only; runs across hosts use srun, mpirun or torchrun.
 */
#ifndef COLLRUN_H
#define COLLRUN_H

/* pipe2, getrandom, strsignal, open_memstream: this header comes first in every collrun file. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stddef.h>
#include <sys/types.h>

#define COLLRUN_MAX_RANKS  16384
#define COLLRUN_KILL_DELAY 2.0       /* seconds between SIGTERM and SIGKILL in a teardown */
#define COLLRUN_LINE_MAX   65536     /* longer --prefix lines are relayed in pieces */
#define COLLRUN_DRAIN_MAX  (1 << 20) /* most bytes one drain reads: a writer may never stop */

/* Exit statuses of collrun itself (a failed rank's own status is passed through). */
#define COLLRUN_EXIT_USAGE   2
#define COLLRUN_EXIT_TIMEOUT 124
#define COLLRUN_EXIT_LAUNCH  125 /* collrun failed (fork, pipe, poll), as timeout(1) does */
#define COLLRUN_EXIT_EXEC    127 /* the program could not be executed */

typedef struct collrun_opts {
    int         nranks;     /* -n: number of ranks */
    double      timeout_s;  /* --timeout: 0 means none */
    double      grace_s;    /* --grace: time survivors get after the first failure */
    int         keep_going; /* --keep-going: a failed rank does not end the others */
    int         prefix;     /* --prefix: relay output lines as "[rank] line" */
    int         torch_env;  /* --torch-env: also set RANK, WORLD_SIZE, ... */
    int         verbose;    /* -v: print what is launched */
    const char *bind;       /* --bind-to: none|cpu|core|numa; NULL: cpu where the ranks fill
                               the CPUs and COLL_BIND is not set (collrun_spawn.c) */
    int          nxvars;    /* number of -x arguments */
    const char **xvars;     /* -x arguments as given: NAME or NAME=VALUE */
    char *const *argv;      /* program and its arguments, NULL-terminated */
} collrun_opts_t;

/* One output pipe of a rank under --prefix: bytes wait here until a line is complete. */
typedef struct collrun_stream {
    int    fd;      /* read end, -1 when closed */
    int    out_fd;  /* where its lines go: 1 or 2 */
    int    midline; /* a piece of the current line has been relayed already */
    size_t len;     /* bytes held in buf */
    size_t cap;     /* allocated size of buf */
    char  *buf;
} collrun_stream_t;

typedef struct collrun_rank {
    pid_t            pid;       /* also its process group id */
    int              running;   /* has not exited; exited ones stay zombies until the end */
    int              signalled; /* collrun sent it a signal meant to stop it */
    int              killed;    /* it died of signal `code` (else it exited with `code`) */
    int              ended_now; /* seen ended by this loop_reap, not yet reported */
    int              dying;     /* already exiting when another rank's exit 0 was seen */
    int              code;      /* exit status or signal number */
    int              core;      /* it dumped core */
    collrun_stream_t out[2];    /* stdout, stderr (used with --prefix only) */
} collrun_rank_t;

/* Why the job is ending; the first cause wins and decides the exit status. */
typedef enum collrun_cause {
    COLLRUN_CAUSE_NONE,
    COLLRUN_CAUSE_FAILURE,   /* a rank exited non-zero or was killed */
    COLLRUN_CAUSE_INTERRUPT, /* collrun received SIGINT, SIGTERM or SIGHUP */
    COLLRUN_CAUSE_TIMEOUT    /* --timeout expired */
} collrun_cause_t;

/* Teardown stages: survivors get the grace period, then SIGTERM, then SIGKILL. */
typedef enum collrun_stage {
    COLLRUN_STAGE_RUN,
    COLLRUN_STAGE_GRACE,
    COLLRUN_STAGE_TERM,
    COLLRUN_STAGE_KILL
} collrun_stage_t;

typedef struct collrun_job {
    const collrun_opts_t *opts;
    collrun_rank_t       *ranks;
    int                   nspawned;   /* ranks started so far */
    int                   nrunning;   /* ranks that have not exited */
    int                   nfailed;    /* failed on their own */
    int                   nsucceeded; /* exited 0 */
    int                   nlate;      /* --keep-going: failed after a rank had exited 0 */
    int                   nstopped;   /* ended after collrun signalled them */
    collrun_cause_t       cause;
    int                   cause_rank; /* FAILURE, or --keep-going: the first failed rank */
    int                   cause_sig;  /* INTERRUPT: the signal received */
    collrun_stage_t       stage;
    double                stage_deadline;  /* GRACE, TERM: when the next stage starts */
    double                deadline;        /* --timeout, absolute; 0 = none */
    char                  root_addr[32];   /* COLL_ROOT_ADDR */
    int                   port_holders[2]; /* keep the ports reserved; closed at exit */
    char                  master_port[8];  /* MASTER_PORT under --torch-env */
    char                  secret[33];      /* COLL_JOB_SECRET: 32 hex digits */
} collrun_job_t;

/* collrun.c */
void   collrun_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double collrun_now(void);

/* collrun_spawn.c */
int collrun_job_prepare(collrun_job_t *job);
int collrun_spawn_all(collrun_job_t *job);

/* collrun_loop.c */
int  collrun_signals_init(void);
void collrun_signals_child_reset(void);
int  collrun_loop_run(collrun_job_t *job);
void collrun_kill_all(collrun_job_t *job, int sig);
void collrun_reap_all(collrun_job_t *job);

/* collrun_relay.c */
int  collrun_relay_open(collrun_rank_t *rank, int child_fds[2]);
int  collrun_relay_read(collrun_stream_t *st, int rank, int drain);
void collrun_relay_finish(collrun_rank_t *rank, int rank_id);
int  collrun_relay_pollable(const collrun_stream_t *st);

#endif /* COLLRUN_H */
