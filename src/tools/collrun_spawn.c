/* SPDX-License-Identifier: MIT */
/*
 * collrun_spawn.c -- starts the ranks: picks a free port for the bootstrap root, makes the job
 * secret, then forks every rank into its own process group with its COLL_* variables and execs
 * the program (execvp, so PATH applies). A failed exec is reported once, through a pipe that
 * closes on a successful exec. Supervising the running ranks is collrun_loop.c's job.
 */
#include "collrun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define COLLRUN_MAX_ENV 16 /* variables collrun sets itself */

/* The variables of one rank; -x arguments come on top of these (so they can override them). */
typedef struct collrun_env {
    int  n;
    char name[COLLRUN_MAX_ENV][24];
    char value[COLLRUN_MAX_ENV][40];
} collrun_env_t;

/* What a child that could not exec the program writes back before it exits. */
typedef enum { SPAWN_STAGE_SETPGID, SPAWN_STAGE_STDIO, SPAWN_STAGE_EXEC } spawn_stage_t;

typedef struct spawn_report {
    int stage; /* spawn_stage_t */
    int err;   /* errno */
} spawn_report_t;

static const char *spawn_stage_names[] = {"setpgid", "redirect stdio", "exec"};

/* ---- job-wide values: root port and secret ---- */

/*
 * Binds n sockets to port 0 of 127.0.0.1 together (so the ports differ) and reads the ports.
 * The first (the bootstrap root's) stays bound (SO_REUSEADDR, never listening) for collrun's
 * lifetime: the kernel then hands those ports to no outgoing connection, while the ranks (which
 * bind with SO_REUSEADDR too) can still listen on them. Releasing them before the ranks bind left a
 * window in which another connection's local port took the root's port ("Address already in use").
 */
static int spawn_free_ports(int n, int *ports, int *fds)
{
    struct sockaddr_in sa;
    socklen_t          len;
    int                i, one = 1;
    int                rc = 0;

    for (i = 0; i < n; i++) {
        fds[i] = -1;
    }
    for (i = 0; i < n && rc == 0; i++) {
        memset(&sa, 0, sizeof(sa));
        sa.sin_family      = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len                = sizeof(sa);
        fds[i]             = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] >= 0) {
            setsockopt(fds[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        }
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&sa, &len) != 0) {
            collrun_msg("cannot find a free TCP port on 127.0.0.1: %s", strerror(errno));
            rc = -1;
        } else {
            ports[i] = ntohs(sa.sin_port);
        }
    }
    /* Only the root's port stays held: libcoll binds it with SO_REUSEADDR, a foreign
     * MASTER_PORT listener may not. */
    for (i = (rc == 0) ? 1 : 0; i < n; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    return rc;
}

static int spawn_random(unsigned char *buf, size_t len)
{
    size_t  got = 0;
    ssize_t r;
    int     fd;

    while (got < len) {
        r = getrandom(buf + got, len - got, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            break;
        }
        got += (size_t)r;
    }
    if (got == len) {
        return 0;
    }
    /* Kernels older than getrandom(2): fall back to the device. */
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < len) {
        r = read(fd, buf + got, len - got);
        if (r <= 0 && !(r < 0 && errno == EINTR)) {
            break;
        }
        got += r > 0 ? (size_t)r : 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    if (got != len) {
        collrun_msg("cannot read random bytes for the job secret: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int collrun_job_prepare(collrun_job_t *job)
{
    unsigned char raw[16];
    int           ports[2];
    size_t        i;

    if (spawn_free_ports(job->opts->torch_env ? 2 : 1, ports, job->port_holders) != 0 ||
        spawn_random(raw, sizeof(raw)) != 0) {
        return -1;
    }
    snprintf(job->root_addr, sizeof(job->root_addr), "127.0.0.1:%d", ports[0]);
    if (job->opts->torch_env) {
        snprintf(job->master_port, sizeof(job->master_port), "%d", ports[1]);
    }
    for (i = 0; i < sizeof(raw); i++) {
        snprintf(job->secret + 2 * i, 3, "%02x", raw[i]);
    }
    return 0;
}

/* ---- the environment of one rank ---- */

static void spawn_env_add(collrun_env_t *env, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void spawn_env_add(collrun_env_t *env, const char *name, const char *fmt, ...)
{
    va_list ap;

    snprintf(env->name[env->n], sizeof(env->name[0]), "%s", name);
    va_start(ap, fmt);
    vsnprintf(env->value[env->n], sizeof(env->value[0]), fmt, ap);
    va_end(ap);
    env->n++;
}

/* COLL_BIND for the ranks (--bind-to none|core|numa), NULL to leave the environment's. */
static const char *spawn_bind(const collrun_opts_t *o)
{
    return o->bind != NULL && strcmp(o->bind, "cpu") != 0 ? o->bind : NULL;
}

/* The CPU collrun pins rank to before exec, -1 for none: with --bind-to cpu, and by default
 * when the ranks fill collrun's CPUs exactly (at least 2, COLL_BIND not set), the rank-th CPU
 * collrun may run on. Ranks that spin while they wait must not share a CPU: two ranks the
 * scheduler started on one CPU stayed there for tens of milliseconds here (50 us per 8-byte
 * all-reduce instead of 0.5). With fewer ranks there are idle CPUs and with more the waits
 * yield, so nothing is pinned; logical CPUs, not cores, so SMT siblings never hold two ranks. */
static int spawn_pin_cpu(const collrun_opts_t *o, int rank)
{
    cpu_set_t set;
    int       want, seen = 0;

    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return -1;
    }
    if (o->bind != NULL
            ? strcmp(o->bind, "cpu") != 0
            : getenv("COLL_BIND") != NULL || o->nranks < 2 || CPU_COUNT(&set) != o->nranks) {
        return -1;
    }
    want = rank % CPU_COUNT(&set);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set) && seen++ == want) {
            return c;
        }
    }
    return -1;
}

static void spawn_env_build(const collrun_job_t *job, int rank, collrun_env_t *env)
{
    const char *bind = spawn_bind(job->opts);

    int n = job->opts->nranks;

    env->n = 0;
    spawn_env_add(env, "COLL_RANK", "%d", rank);
    spawn_env_add(env, "COLL_NRANKS", "%d", n);
    spawn_env_add(env, "COLL_LOCAL_RANK", "%d", rank);
    spawn_env_add(env, "COLL_LOCAL_NRANKS", "%d", n);
    spawn_env_add(env, "COLL_ROOT_ADDR", "%s", job->root_addr);
    spawn_env_add(env, "COLL_JOB_SECRET", "%s", job->secret);
    if (bind != NULL) {
        spawn_env_add(env, "COLL_BIND", "%s", bind);
    }
    if (job->opts->torch_env) {
        spawn_env_add(env, "RANK", "%d", rank);
        spawn_env_add(env, "WORLD_SIZE", "%d", n);
        spawn_env_add(env, "LOCAL_RANK", "%d", rank);
        spawn_env_add(env, "LOCAL_WORLD_SIZE", "%d", n);
        spawn_env_add(env, "MASTER_ADDR", "%s", "127.0.0.1");
        spawn_env_add(env, "MASTER_PORT", "%s", job->master_port);
    }
}

/*
 * The value -x argument i gives its variable: VALUE, or for -x NAME the value NAME has in
 * collrun's environment. NULL when it gives none (NAME not set there) or when a later -x gives
 * the variable a value: the last one wins. collrun never changes its own environment, and a
 * child sets each variable once, after asking about it, so getenv still reads collrun's value.
 */
static const char *spawn_xvar(const collrun_opts_t *o, int i)
{
    const char *x = o->xvars[i];
    size_t      n = strcspn(x, "=");

    for (int j = i + 1; j < o->nxvars; j++) {
        const char *y = o->xvars[j];

        if (strcspn(y, "=") == n && strncmp(x, y, n) == 0 && (y[n] == '=' || getenv(y) != NULL)) {
            return NULL;
        }
    }
    return x[n] == '=' ? x + n + 1 : getenv(x);
}

/* The -x argument that gives variable name its value, or -1 if none does. */
static int spawn_xvar_find(const collrun_opts_t *o, const char *name)
{
    size_t n = strlen(name);

    for (int i = 0; i < o->nxvars; i++) {
        if (strcspn(o->xvars[i], "=") == n && strncmp(o->xvars[i], name, n) == 0 &&
            spawn_xvar(o, i) != NULL) {
            return i;
        }
    }
    return -1;
}

/* Does collrun set the variable whose name is the first len bytes of name? */
static int spawn_env_has(const collrun_env_t *env, const char *name, size_t len)
{
    for (int i = 0; i < env->n; i++) {
        if (strlen(env->name[i]) == len && strncmp(env->name[i], name, len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Writes s so that a shell reads it back as one word. */
static void spawn_print_word(FILE *f, const char *s)
{
    const char *p;

    if (s[0] != '\0' && s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                    "0123456789_-+=/.,:@%")] == '\0') {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (p = s; *p != '\0'; p++) {
        if (*p == '\'') {
            fputs("'\\''", f);
        } else {
            fputc(*p, f);
        }
    }
    fputc('\'', f);
}

/* -v: "collrun: rank 1: COLL_RANK=1 ... [-x variables] prog args", as one write; every
 * variable once, with the value the rank gets. */
static void spawn_print(const collrun_job_t *job, int rank, const collrun_env_t *env)
{
    char  *line = NULL;
    size_t len  = 0;
    FILE  *f    = open_memstream(&line, &len);
    int    i;

    if (f == NULL) {
        return;
    }
    fprintf(f, "collrun: rank %d:", rank);
    int cpu = spawn_pin_cpu(job->opts, rank);
    if (cpu >= 0) {
        fprintf(f, " (pinned to CPU %d)", cpu);
    }
    for (i = 0; i < env->n; i++) {
        int x = spawn_xvar_find(job->opts, env->name[i]);

        fprintf(f, " %s=", env->name[i]);
        spawn_print_word(f, x >= 0 ? spawn_xvar(job->opts, x) : env->value[i]);
    }
    for (i = 0; i < job->opts->nxvars; i++) {
        const char *x     = job->opts->xvars[i];
        size_t      nlen  = strcspn(x, "=");
        const char *value = spawn_xvar(job->opts, i);

        if (value != NULL && !spawn_env_has(env, x, nlen)) { /* else printed above */
            fprintf(f, " %.*s=", (int)nlen, x);
            spawn_print_word(f, value);
        }
    }
    for (i = 0; job->opts->argv[i] != NULL; i++) {
        fputc(' ', f);
        spawn_print_word(f, job->opts->argv[i]);
    }
    fputc('\n', f);
    if (fclose(f) == 0 && write(STDERR_FILENO, line, len) < 0) {
        /* nowhere left to report it */
    }
    free(line);
}

/* ---- fork and exec ---- */

static void spawn_child_fail(int err_fd, spawn_stage_t stage) __attribute__((noreturn));

static void spawn_child_fail(int err_fd, spawn_stage_t stage)
{
    spawn_report_t rep = {.stage = (int)stage, .err = errno};

    if (write(err_fd, &rep, sizeof(rep)) < 0) {
        /* the parent then reports a lost child */
    }
    _exit(COLLRUN_EXIT_EXEC);
}

/*
 * In the child, between fork and exec. collrun is single-threaded, so setenv and execvp are
 * safe here. The rank leads its own process group: a terminal's ^C then reaches collrun only,
 * which forwards it once, and collrun can signal everything the rank started as one group.
 */
static void spawn_child(const collrun_job_t *job, int rank, const collrun_env_t *env,
                        const int out_fds[2], int err_fd, pid_t parent) __attribute__((noreturn));

static void spawn_child(const collrun_job_t *job, int rank, const collrun_env_t *env,
                        const int out_fds[2], int err_fd, pid_t parent)
{
    int fd;
    int i;

    if (setpgid(0, 0) != 0) {
        spawn_child_fail(err_fd, SPAWN_STAGE_SETPGID);
    }
#ifdef __linux__
    /* If collrun is killed outright, its ranks die with it instead of running on. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(COLLRUN_EXIT_LAUNCH);
    }
#endif
    /* Only rank 0 reads collrun's stdin, and not from a terminal: the ranks are not the
     * terminal's foreground group, so a read there would stop them (SIGTTIN). */
    if (rank != 0 || isatty(STDIN_FILENO)) {
        fd = open("/dev/null", O_RDONLY);
        if (fd < 0 || dup2(fd, STDIN_FILENO) < 0) {
            spawn_child_fail(err_fd, SPAWN_STAGE_STDIO);
        }
        close(fd);
    }
    if (job->opts->prefix &&
        (dup2(out_fds[0], STDOUT_FILENO) < 0 || dup2(out_fds[1], STDERR_FILENO) < 0)) {
        spawn_child_fail(err_fd, SPAWN_STAGE_STDIO);
    }
    /* -x overrides collrun's variables. -x NAME keeps collrun's own value, so the variable
     * -x sets is left alone here; -x NAME=VALUE is set after, the last one per variable. */
    for (i = 0; i < env->n; i++) {
        if (spawn_xvar_find(job->opts, env->name[i]) < 0) {
            setenv(env->name[i], env->value[i], 1);
        }
    }
    for (i = 0; i < job->opts->nxvars; i++) {
        if (strchr(job->opts->xvars[i], '=') != NULL && spawn_xvar(job->opts, i) != NULL) {
            putenv((char *)job->opts->xvars[i]);
        }
    }
    int cpu = spawn_pin_cpu(job->opts, rank);
    if (cpu >= 0) { /* advice: a rank that cannot be pinned runs as before */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        (void)sched_setaffinity(0, sizeof(one), &one);
    }
    collrun_signals_child_reset();
    execvp(job->opts->argv[0], job->opts->argv);
    spawn_child_fail(err_fd, SPAWN_STAGE_EXEC);
}

/* Waits until rank r has exec'd (its report pipe closes) or reports why it could not. */
static int spawn_wait_exec(collrun_job_t *job, int r, int err_fd)
{
    spawn_report_t rep;
    ssize_t        n;

    do {
        n = read(err_fd, &rep, sizeof(rep));
    } while (n < 0 && errno == EINTR);
    close(err_fd);
    if (n == 0) {
        return 0;
    }
    if (n != (ssize_t)sizeof(rep) || rep.stage < 0 || rep.stage > SPAWN_STAGE_EXEC) {
        collrun_msg("cannot start rank %d: it exited before exec", r);
        return COLLRUN_EXIT_LAUNCH;
    }
    if (rep.stage == SPAWN_STAGE_EXEC) {
        collrun_msg("cannot execute '%s': %s", job->opts->argv[0], strerror(rep.err));
        return COLLRUN_EXIT_EXEC;
    }
    collrun_msg("cannot start rank %d: %s: %s", r, spawn_stage_names[rep.stage], strerror(rep.err));
    return COLLRUN_EXIT_LAUNCH;
}

static int spawn_one(collrun_job_t *job, int r)
{
    collrun_rank_t *rank        = &job->ranks[r];
    int             out_fds[2]  = {-1, -1};
    int             err_pipe[2] = {-1, -1};
    pid_t           parent      = getpid();
    collrun_env_t   env;
    pid_t           pid;

    spawn_env_build(job, r, &env);
    if (job->opts->verbose) {
        spawn_print(job, r, &env);
    }
    rank->out[0].fd = -1;
    rank->out[1].fd = -1;
    if (job->opts->prefix && collrun_relay_open(rank, out_fds) != 0) {
        return COLLRUN_EXIT_LAUNCH;
    }
    if (pipe2(err_pipe, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
        collrun_msg("cannot start rank %d: %s: %s", r, err_pipe[0] < 0 ? "pipe" : "fork",
                    strerror(errno));
        pid = -1;
    } else if (pid == 0) {
        close(err_pipe[0]);
        spawn_child(job, r, &env, out_fds, err_pipe[1], parent);
    }
    if (out_fds[0] >= 0) {
        close(out_fds[0]);
        close(out_fds[1]);
    }
    if (err_pipe[1] >= 0) {
        close(err_pipe[1]);
    }
    if (pid < 0) {
        if (err_pipe[0] >= 0) {
            close(err_pipe[0]);
        }
        return COLLRUN_EXIT_LAUNCH;
    }
    rank->pid     = pid;
    rank->running = 1;
    job->nspawned++;
    job->nrunning++;
    return spawn_wait_exec(job, r, err_pipe[0]);
}

/*
 * Starts every rank, or none: after a failure the ranks already started are killed and reaped
 * and the exit status is returned. Signals wait (blocked) until all ranks are started, so a
 * child never runs collrun's handlers and the loop sees every rank it must forward to.
 */
int collrun_spawn_all(collrun_job_t *job)
{
    sigset_t all;
    sigset_t old;
    int      rc = 0;
    int      r;

    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    for (r = 0; r < job->opts->nranks && rc == 0; r++) {
        rc = spawn_one(job, r);
    }
    if (rc != 0) {
        collrun_kill_all(job, SIGKILL);
        collrun_reap_all(job);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}
