/* SPDX-License-Identifier: MIT */
/*
 * collrun_loop.c -- supervises the running ranks: one poll() loop over a self-pipe fed by the
 * signal handlers and, with --prefix, the ranks' output pipes. It reaps ranks, forwards signals,
 * reports the first failure, runs the teardown (grace, SIGTERM, SIGKILL), enforces --timeout
 * and decides collrun's exit status. It never busy-waits: poll sleeps until a signal, output or
 * the next deadline. Starting the ranks is collrun_spawn.c's job.
 */
#include "collrun.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Forwarded to the ranks. SIGINT and SIGHUP go to each rank's process group, as a terminal
 * sends them; SIGTERM, SIGUSR1 and SIGUSR2 go to the rank process only, as `kill PID` would. */
static const int loop_forwarded[] = {SIGINT, SIGHUP, SIGTERM, SIGUSR1, SIGUSR2};

static volatile sig_atomic_t loop_sig_count[NSIG]; /* written by the handler only */
static int                   loop_sig_seen[NSIG];  /* how many of those the loop has handled */
static int                   loop_sig_pipe[2] = {-1, -1};
static int                   loop_sig_saved[NSIG]; /* 1 where loop_sig_old holds the original */
static struct sigaction      loop_sig_old[NSIG];
static sigset_t              loop_old_mask;
static int                   loop_nsigint;

/* ---- signals ---- */

static void loop_on_signal(int sig)
{
    int  saved_errno = errno;
    char c           = (char)sig;

    loop_sig_count[sig]++;
    if (write(loop_sig_pipe[1], &c, 1) < 0) {
        /* the pipe is full, so the loop wakes anyway and reads the counters */
    }
    errno = saved_errno;
}

static int loop_sig_install(int sig, void (*handler)(int), int flags)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags   = flags; /* no SA_RESTART: a blocked write to our stdout returns EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, &loop_sig_old[sig]) != 0) {
        collrun_msg("cannot install the handler of signal %d: %s", sig, strerror(errno));
        return -1;
    }
    loop_sig_saved[sig] = 1;
    return 0;
}

/*
 * A forwarded signal that collrun inherits as ignored stays ignored (as nohup expects), and the
 * ranks inherit that. The ranks get back the original dispositions and mask before exec.
 */
int collrun_signals_init(void)
{
    struct sigaction cur;
    sigset_t         set;
    size_t           i;
    int              sig;

    if (pipe2(loop_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        collrun_msg("cannot create the signal pipe: %s", strerror(errno));
        return -1;
    }
    sigprocmask(SIG_SETMASK, NULL, &loop_old_mask);
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (loop_sig_install(SIGCHLD, loop_on_signal, SA_NOCLDSTOP) != 0) {
        return -1;
    }
    for (i = 0; i < sizeof(loop_forwarded) / sizeof(loop_forwarded[0]); i++) {
        sig = loop_forwarded[i];
        if (sigaction(sig, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN) {
            continue;
        }
        if (loop_sig_install(sig, loop_on_signal, 0) != 0) {
            return -1;
        }
        sigaddset(&set, sig);
    }
    /* A write to a closed stdout or stderr must fail with EPIPE, not kill collrun (and with
     * it, through the parent-death signal, every rank). */
    if (loop_sig_install(SIGPIPE, SIG_IGN, 0) != 0) {
        return -1;
    }
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    return 0;
}

void collrun_signals_child_reset(void)
{
    int sig;

    for (sig = 1; sig < NSIG; sig++) {
        if (loop_sig_saved[sig]) {
            sigaction(sig, &loop_sig_old[sig], NULL);
        }
    }
    sigprocmask(SIG_SETMASK, &loop_old_mask, NULL);
}

/* ---- signalling and reaping ranks ---- */

/*
 * Exited ranks stay zombies until the end of the job, so their pids, which are also their
 * process group ids, cannot be reused: signalling the group of an exited rank (to reach what it
 * left behind) can never hit an unrelated process.
 */
static void loop_signal_ranks(collrun_job_t *job, int sig, int group, int stop)
{
    collrun_rank_t *rank;
    int             r;

    for (r = 0; r < job->nspawned; r++) {
        rank = &job->ranks[r];
        if (group) {
            kill(-rank->pid, sig);
        }
        if (rank->running && (!group || getpgid(rank->pid) != rank->pid)) {
            kill(rank->pid, sig); /* not in its own group any more, or not a group signal */
        }
        if (stop && rank->running) {
            rank->signalled = 1;
        }
    }
}

void collrun_kill_all(collrun_job_t *job, int sig)
{
    loop_signal_ranks(job, sig, 1, 1);
}

void collrun_reap_all(collrun_job_t *job)
{
    int r;

    for (r = 0; r < job->nspawned; r++) {
        while (waitpid(job->ranks[r].pid, NULL, 0) < 0 && errno == EINTR) {
        }
        job->ranks[r].running = 0;
    }
    job->nrunning = 0;
}

/* One line on how rank r ended, followed by `tail` ("" for none). */
static void loop_describe(const collrun_job_t *job, int r, const char *tail)
{
    const collrun_rank_t *rank = &job->ranks[r];

    if (rank->killed) {
        collrun_msg("rank %d (pid %d) was killed by signal %d (%s)%s%s", r, (int)rank->pid,
                    rank->code, strsignal(rank->code), rank->core ? ", core dumped" : "", tail);
    } else {
        collrun_msg("rank %d (pid %d) exited with status %d%s", r, (int)rank->pid, rank->code,
                    tail);
    }
}

/* ---- teardown ---- */

static void loop_stage_set(collrun_job_t *job, collrun_stage_t stage)
{
    job->stage = stage;
    if (stage == COLLRUN_STAGE_GRACE) {
        job->stage_deadline = collrun_now() + job->opts->grace_s;
    } else if (stage == COLLRUN_STAGE_TERM) {
        if (job->opts->verbose) {
            collrun_msg("sending SIGTERM to %d remaining ranks", job->nrunning);
        }
        collrun_kill_all(job, SIGTERM);
        collrun_kill_all(job, SIGCONT); /* a stopped rank acts on SIGTERM only once resumed */
        job->stage_deadline = collrun_now() + COLLRUN_KILL_DELAY;
    } else if (stage == COLLRUN_STAGE_KILL) {
        if (job->opts->verbose) {
            collrun_msg("sending SIGKILL to %d remaining ranks", job->nrunning);
        }
        collrun_kill_all(job, SIGKILL);
    }
}

/* The first failure or interrupt gives the survivors --grace seconds to exit by themselves. */
static void loop_teardown_begin(collrun_job_t *job)
{
    if (job->stage == COLLRUN_STAGE_RUN) {
        loop_stage_set(job, job->opts->grace_s > 0 ? COLLRUN_STAGE_GRACE : COLLRUN_STAGE_TERM);
    }
}

/* Is pid exiting (the kernel's PF_EXITING, field 9 of /proc/PID/stat)? A process killed by a
 * signal becomes a zombie only once its memory is torn down, which for a large process takes
 * longer than a peer needs to see it gone and exit. */
static int loop_pid_exiting(pid_t pid)
{
    char  path[64], buf[1024];
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return 0;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n]        = '\0';
    char    *p    = strrchr(buf, ')'); /* the command name may hold anything */
    unsigned flag = 0;
    return p != NULL && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %u", &flag) == 1 &&
           (flag & 0x4u) != 0;
}

/* A rank exited 0: ranks already on their way out died before it did, whatever order their
 * ends are reaped in (--keep-going's rule is about failures after a success). */
static void loop_mark_dying(collrun_job_t *job)
{
    for (int r = 0; r < job->nspawned; r++) {
        collrun_rank_t *rank = &job->ranks[r];
        if (rank->running && !rank->dying) {
            rank->dying = loop_pid_exiting(rank->pid);
        }
    }
}

/*
 * --keep-going: rank r failed while the job runs. It is reported at once and the others go on;
 * a failure after a rank has exited 0 is still reported, and makes the job fail at the end.
 */
static void loop_rank_survived(collrun_job_t *job, int r)
{
    char tail[128];

    if (job->nfailed == 1) {
        job->cause_rank = r;
    }
    if (job->nsucceeded > 0 && !job->ranks[r].dying) {
        job->nlate++;
    }
    if (job->nrunning == 0) {
        snprintf(tail, sizeof(tail), "; --keep-going: no other rank is running");
    } else {
        snprintf(tail, sizeof(tail), "; --keep-going: the other %d rank%s continue%s",
                 job->nrunning, job->nrunning == 1 ? "" : "s", job->nrunning == 1 ? "s" : "");
    }
    loop_describe(job, r, tail);
}

static void loop_rank_ended(collrun_job_t *job, int r)
{
    collrun_rank_t *rank = &job->ranks[r];

    if (!rank->killed && rank->code == 0) {
        if (job->opts->keep_going) {
            loop_mark_dying(job);
        }
        job->nsucceeded++;
        return;
    }
    if (rank->signalled) {
        job->nstopped++; /* it ended because collrun asked it to */
        if (job->opts->verbose) {
            loop_describe(job, r, "");
        }
        return;
    }
    job->nfailed++;
    if (job->cause == COLLRUN_CAUSE_NONE && job->opts->keep_going) {
        loop_rank_survived(job, r);
    } else if (job->cause == COLLRUN_CAUSE_NONE) {
        loop_describe(job, r, "");
        job->cause      = COLLRUN_CAUSE_FAILURE;
        job->cause_rank = r;
        loop_teardown_begin(job);
    } else if (job->cause == COLLRUN_CAUSE_FAILURE && rank->killed &&
               !job->ranks[job->cause_rank].killed) {
        /* killed by a signal (not collrun's) after other ranks' error exits were seen: as in
         * loop_reap, the likelier cause, whose peers reported it before its own end could be
         * seen (a rank with threads to end, on a busy host) */
        loop_describe(job, r, "");
        job->cause_rank = r;
    } else if (job->opts->verbose) {
        loop_describe(job, r, "");
    }
}

/*
 * Notes every rank that has exited; WNOWAIT leaves it a zombie (see loop_signal_ranks). When
 * several ended since the last look, those killed by a signal are taken first: a rank that
 * crashed or was killed is the likelier cause, and the others' error exits are often their
 * report of it (on a busy host they can end before collrun is scheduled to see the first).
 */
static void loop_reap(collrun_job_t *job)
{
    collrun_rank_t *rank;
    siginfo_t       si;
    int             r, pass, nended = 0;

    for (r = 0; r < job->nspawned; r++) {
        rank            = &job->ranks[r];
        rank->ended_now = 0;
        if (!rank->running) {
            continue;
        }
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)rank->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            si.si_pid == 0) {
            continue;
        }
        rank->running   = 0;
        rank->ended_now = 1;
        rank->killed    = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
        rank->core      = si.si_code == CLD_DUMPED;
        rank->code      = si.si_status;
        job->nrunning--;
        nended++;
    }
    for (pass = 0; pass < 2 && nended > 0; pass++) {
        for (r = 0; r < job->nspawned; r++) {
            rank = &job->ranks[r];
            if (!rank->ended_now || rank->killed != (pass == 0)) {
                continue;
            }
            rank->ended_now = 0;
            nended--;
            /* Relay what the rank wrote before saying anything about its end. */
            collrun_relay_read(&rank->out[0], r, 1);
            collrun_relay_read(&rank->out[1], r, 1);
            loop_rank_ended(job, r);
        }
    }
}

static void loop_forward(collrun_job_t *job, int sig)
{
    int group = sig == SIGINT || sig == SIGHUP;
    int stop  = sig == SIGINT || sig == SIGHUP || sig == SIGTERM;

    if (sig == SIGINT && loop_nsigint++ > 0) {
        collrun_msg("interrupted again: killing %d ranks", job->nrunning);
        if (job->cause == COLLRUN_CAUSE_NONE) {
            job->cause     = COLLRUN_CAUSE_INTERRUPT;
            job->cause_sig = sig;
        }
        loop_stage_set(job, COLLRUN_STAGE_KILL);
        return;
    }
    if (stop && job->cause == COLLRUN_CAUSE_NONE) {
        collrun_msg("caught signal %d (%s), forwarding it to %d ranks%s", sig, strsignal(sig),
                    job->nrunning, sig == SIGINT ? "; interrupt again to kill them" : "");
    } else if (job->opts->verbose) {
        collrun_msg("forwarding signal %d (%s) to %d ranks", sig, strsignal(sig), job->nrunning);
    }
    loop_signal_ranks(job, sig, group, stop);
    if (stop && job->cause == COLLRUN_CAUSE_NONE) {
        job->cause     = COLLRUN_CAUSE_INTERRUPT;
        job->cause_sig = sig;
        loop_teardown_begin(job);
    }
}

static void loop_handle_signals(collrun_job_t *job)
{
    char   buf[64];
    size_t i;
    int    sig;

    while (read(loop_sig_pipe[0], buf, sizeof(buf)) > 0) {
    }
    for (i = 0; i < sizeof(loop_forwarded) / sizeof(loop_forwarded[0]); i++) {
        sig = loop_forwarded[i];
        while (loop_sig_seen[sig] != loop_sig_count[sig]) {
            loop_sig_seen[sig]++;
            loop_forward(job, sig);
        }
    }
    if (loop_sig_seen[SIGCHLD] != loop_sig_count[SIGCHLD]) {
        loop_sig_seen[SIGCHLD] = loop_sig_count[SIGCHLD]; /* before the scan: none is missed */
        loop_reap(job);
    }
}

/* ---- deadlines ---- */

static void loop_check_deadlines(collrun_job_t *job)
{
    double now = collrun_now();

    if (job->cause == COLLRUN_CAUSE_NONE && job->deadline > 0 && now >= job->deadline) {
        collrun_msg("timeout: the job did not finish within %g s (--timeout); stopping %d ranks",
                    job->opts->timeout_s, job->nrunning);
        job->cause = COLLRUN_CAUSE_TIMEOUT;
        if (job->stage < COLLRUN_STAGE_TERM) {
            loop_stage_set(job, COLLRUN_STAGE_TERM);
        }
    }
    if ((job->stage == COLLRUN_STAGE_GRACE || job->stage == COLLRUN_STAGE_TERM) &&
        now >= job->stage_deadline) {
        loop_stage_set(job,
                       job->stage == COLLRUN_STAGE_GRACE ? COLLRUN_STAGE_TERM : COLLRUN_STAGE_KILL);
    }
}

/* Milliseconds until the next deadline, or -1 (wait for an event) when there is none. */
static int loop_poll_timeout(const collrun_job_t *job)
{
    double next = -1;
    double ms;

    if (job->cause == COLLRUN_CAUSE_NONE && job->deadline > 0) {
        next = job->deadline;
    }
    if ((job->stage == COLLRUN_STAGE_GRACE || job->stage == COLLRUN_STAGE_TERM) &&
        (next < 0 || job->stage_deadline < next)) {
        next = job->stage_deadline;
    }
    if (next < 0) {
        return -1;
    }
    ms = (next - collrun_now()) * 1000.0 + 1.0; /* round up: never wake just before it */
    return ms < 0 ? 0 : ms > INT_MAX / 2 ? INT_MAX / 2 : (int)ms;
}

/* ---- the end ---- */

static int loop_reraise(int sig)
{
    struct sigaction sa;
    sigset_t         set;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig; /* not reached unless sig was not fatal */
}

/*
 * --keep-going, no timeout or interruption, and some ranks failed: the job succeeds when a rank
 * exited 0 and none failed after that (the failures were survived), else it fails as it would
 * have without --keep-going (the first failure becomes the cause).
 */
static void loop_survived(collrun_job_t *job)
{
    const collrun_rank_t *first = &job->ranks[job->cause_rank];

    if (job->nsucceeded == 0 || job->nlate > 0) {
        job->cause = COLLRUN_CAUSE_FAILURE;
    } else if (job->nfailed == 1) {
        collrun_msg("%d of %d ranks finished; rank %d failed (%s %d) and the job went on "
                    "without it",
                    job->nsucceeded, job->opts->nranks, job->cause_rank,
                    first->killed ? "signal" : "status", first->code);
    } else {
        collrun_msg("%d of %d ranks finished; %d ranks failed (first: rank %d, %s %d) and the "
                    "job went on without them",
                    job->nsucceeded, job->opts->nranks, job->nfailed, job->cause_rank,
                    first->killed ? "signal" : "status", first->code);
    }
}

/*
 * Every rank has exited. If the job is being torn down, what the ranks left running in their
 * process groups is killed too; then the output is flushed, the zombies reaped and the exit
 * status decided. An interrupted job ends collrun with the same signal, so that a calling shell
 * stops too (it would not for a plain exit status of 130).
 */
static int loop_finish(collrun_job_t *job)
{
    const collrun_rank_t *first    = &job->ranks[job->cause_rank];
    char                  tail[64] = "";
    int                   r;

    if (job->cause == COLLRUN_CAUSE_NONE && job->nfailed > 0) {
        loop_survived(job); /* --keep-going */
    }
    if (job->cause != COLLRUN_CAUSE_NONE) {
        collrun_kill_all(job, SIGKILL);
    }
    for (r = 0; r < job->nspawned && job->opts->prefix; r++) {
        collrun_relay_finish(&job->ranks[r], r);
    }
    collrun_reap_all(job);
    switch (job->cause) {
    case COLLRUN_CAUSE_NONE:
        return 0;
    case COLLRUN_CAUSE_TIMEOUT:
        return COLLRUN_EXIT_TIMEOUT;
    case COLLRUN_CAUSE_INTERRUPT:
        return loop_reraise(job->cause_sig);
    case COLLRUN_CAUSE_FAILURE:
        break;
    }
    if (job->nstopped > 0) {
        snprintf(tail, sizeof(tail), "; %d terminated by collrun", job->nstopped);
    }
    collrun_msg("job failed: %d of %d ranks failed (first: rank %d, %s %d)%s", job->nfailed,
                job->opts->nranks, job->cause_rank, first->killed ? "signal" : "status",
                first->code, tail);
    return first->killed ? 128 + first->code : first->code;
}

int collrun_loop_run(collrun_job_t *job)
{
    int                n    = 2 * job->opts->nranks + 1;
    struct pollfd     *pfds = calloc((size_t)n, sizeof(*pfds));
    collrun_stream_t **sts  = calloc((size_t)n, sizeof(*sts));
    int               *ids  = calloc((size_t)n, sizeof(*ids));
    int                nfds;
    int                r;
    int                i;

    if (pfds == NULL || sts == NULL || ids == NULL) {
        collrun_msg("out of memory");
        collrun_kill_all(job, SIGKILL);
        collrun_reap_all(job);
        return COLLRUN_EXIT_LAUNCH;
    }
    if (job->opts->timeout_s > 0) {
        job->deadline = collrun_now() + job->opts->timeout_s;
    }
    loop_handle_signals(job);
    while (job->nrunning > 0) {
        pfds[0].fd      = loop_sig_pipe[0];
        pfds[0].events  = POLLIN;
        pfds[0].revents = 0;
        nfds            = 1;
        for (r = 0; r < job->nspawned; r++) {
            for (i = 0; i < 2; i++) {
                if (collrun_relay_pollable(&job->ranks[r].out[i])) {
                    pfds[nfds].fd      = job->ranks[r].out[i].fd;
                    pfds[nfds].events  = POLLIN;
                    pfds[nfds].revents = 0;
                    sts[nfds]          = &job->ranks[r].out[i];
                    ids[nfds++]        = r;
                }
            }
        }
        if (poll(pfds, (nfds_t)nfds, loop_poll_timeout(job)) < 0 && errno != EINTR) {
            collrun_msg("poll failed: %s; killing the job", strerror(errno));
            collrun_kill_all(job, SIGKILL);
            collrun_reap_all(job);
            return COLLRUN_EXIT_LAUNCH;
        }
        for (i = 1; i < nfds; i++) {
            if (pfds[i].revents != 0) {
                collrun_relay_read(sts[i], ids[i], 0);
            }
        }
        loop_handle_signals(job);
        loop_check_deadlines(job);
    }
    free(pfds);
    free(sts);
    free(ids);
    return loop_finish(job);
}
