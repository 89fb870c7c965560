/* SPDX-License-Identifier: MIT */
/*
 * collrun.c -- `collrun -n N prog args...`: parses the options and runs the job, which starts N
 * local ranks with the COLL_* variables coll_init() reads, supervises them and ends them all
 * when one fails (unless --keep-going). It does not link libcoll and does not launch on other
 * hosts (--hosts is rejected): under srun, mpirun or torchrun libcoll reads their variables and
 * needs no collrun.
 */
#include "collrun.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef COLLRUN_VERSION
#define COLLRUN_VERSION "unknown"
#endif

/* ---- messages and time ---- */

/* One write per message, so a message never interleaves with a rank's output mid-line. */
void collrun_msg(const char *fmt, ...)
{
    char    line[1024];
    va_list ap;
    int     n;

    n = snprintf(line, sizeof(line), "collrun: ");
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) {
        n = (int)sizeof(line) - 2;
    }
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report it */
    }
}

double collrun_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- options ---- */

static void collrun_usage(FILE *f)
{
    fprintf(f, "usage: collrun [options] -n N prog [args...]\n"
               "Start N ranks of prog on this host with the environment coll_init() reads.\n"
               "\n"
               "  -n, -np N            number of ranks (required)\n"
               "  --timeout SECONDS    stop the job and exit 124 after SECONDS (default: none)\n"
               "  --grace SECONDS      after the first rank fails, how long the others get to\n"
               "                       exit by themselves before SIGTERM, then SIGKILL 2 s\n"
               "                       later (default: 5)\n"
               "  --keep-going         when a rank fails, report it and let the others run on;\n"
               "                       exit 0 if a rank exits 0 and none fails after that\n"
               "  --bind-to none|cpu|core|numa\n"
               "                       pin rank r to the r-th CPU collrun may use (cpu), or bind\n"
               "                       through COLL_BIND (core, numa, none); default: cpu when\n"
               "                       the ranks fill those CPUs exactly and COLL_BIND is not\n"
               "                       set, else nothing\n"
               "  -l, --prefix         prefix each output line with \"[rank] \"\n"
               "  -x NAME[=VALUE]      set NAME for all ranks (NAME alone: export it), repeatable\n"
               "  --torch-env          also set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
               "                       MASTER_ADDR and MASTER_PORT as torchrun does\n"
               "  -v, --verbose        print the command line and environment of every rank\n"
               "  -h, --help           print this help\n"
               "      --version        print the version\n"
               "\n"
               "Each rank gets COLL_RANK, COLL_NRANKS, COLL_LOCAL_RANK, COLL_LOCAL_NRANKS,\n"
               "COLL_ROOT_ADDR and COLL_JOB_SECRET. Exit status: 0 when every rank exits 0 (with\n"
               "--keep-going: as above), else the first failed rank's status (128+N if killed by\n"
               "signal N), 124 on timeout, 127 if prog cannot be executed, 2 for a usage error.\n"
               "See collrun(1).\n");
}

static int collrun_usage_error(const char *fmt, const char *arg)
{
    char msg[512];

    snprintf(msg, sizeof(msg), fmt, arg);
    collrun_msg("%s (see collrun --help)", msg);
    return -1;
}

static int collrun_parse_count(const char *s, int *n_p)
{
    char *end;
    long  v;

    errno = 0;
    v     = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > COLLRUN_MAX_RANKS) {
        collrun_msg("invalid number of ranks '%s': expected 1 to %d (see collrun --help)", s,
                    COLLRUN_MAX_RANKS);
        return -1;
    }
    *n_p = (int)v;
    return 0;
}

static int collrun_parse_seconds(const char *opt, const char *s, double *v_p)
{
    char  *end;
    double v;

    errno = 0;
    v     = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e8) {
        collrun_msg("invalid %s '%s': expected a number of seconds (see collrun --help)", opt, s);
        return -1;
    }
    *v_p = v;
    return 0;
}

/* -x NAME or -x NAME=VALUE: NAME must be a valid environment variable name. */
static int collrun_check_xvar(const char *s)
{
    size_t i;

    for (i = 0; s[i] != '\0' && s[i] != '='; i++) {
        int c = (unsigned char)s[i];

        if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (i > 0 && c >= '0' && c <= '9'))) {
            break;
        }
    }
    if (i == 0 || (s[i] != '\0' && s[i] != '=')) {
        return collrun_usage_error("-x '%s': expected NAME or NAME=VALUE", s);
    }
    if (s[i] == '\0' && getenv(s) == NULL) {
        collrun_msg("warning: -x %s: not set in this environment, ignored", s);
    }
    return 0;
}

/*
 * Returns the value of option `name` (in "--name=value" or "--name value" form) and advances
 * *i past it, or NULL after an error message when the value is missing.
 */
static const char *collrun_optarg(int argc, char **argv, int *i, const char *name)
{
    const char *a   = argv[*i];
    size_t      len = strlen(name);

    if (strncmp(a, name, len) == 0 && a[len] == '=') {
        return a + len + 1;
    }
    if (*i + 1 >= argc) {
        collrun_usage_error("option '%s' needs a value", name);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

static int collrun_is_opt(const char *a, const char *name)
{
    size_t len = strlen(name);

    return strncmp(a, name, len) == 0 && (a[len] == '\0' || (a[1] == '-' && a[len] == '='));
}

/* One option at argv[*i]; returns 0, 1 to stop with status 0 (--help), or -1 on error. */
static int collrun_parse_one(int argc, char **argv, int *i, collrun_opts_t *o)
{
    const char *a = argv[*i];
    const char *v;

    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        collrun_usage(stdout);
        return 1;
    } else if (strcmp(a, "--version") == 0) {
        printf("collrun (libcoll) %s\n", COLLRUN_VERSION);
        return 1;
    } else if (strcmp(a, "-l") == 0 || strcmp(a, "--prefix") == 0) {
        o->prefix = 1;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
        o->verbose = 1;
    } else if (strcmp(a, "--torch-env") == 0) {
        o->torch_env = 1;
    } else if (strcmp(a, "--keep-going") == 0) {
        o->keep_going = 1;
    } else if (collrun_is_opt(a, "--bind-to")) {
        v = collrun_optarg(argc, argv, i, "--bind-to");
        if (v == NULL) {
            return -1;
        }
        if (strcmp(v, "none") != 0 && strcmp(v, "cpu") != 0 && strcmp(v, "core") != 0 &&
            strcmp(v, "numa") != 0) {
            return collrun_usage_error("--bind-to: '%s' is not none, cpu, core or numa", v);
        }
        o->bind = v;
    } else if (strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0 || collrun_is_opt(a, "--np")) {
        v = collrun_optarg(argc, argv, i, a[1] == '-' ? "--np" : a);
        return v == NULL ? -1 : collrun_parse_count(v, &o->nranks);
    } else if (strncmp(a, "-n", 2) == 0 && a[2] >= '0' && a[2] <= '9') {
        return collrun_parse_count(a + 2, &o->nranks);
    } else if (collrun_is_opt(a, "--timeout") || collrun_is_opt(a, "--grace")) {
        int is_timeout = a[2] == 't';

        v = collrun_optarg(argc, argv, i, is_timeout ? "--timeout" : "--grace");
        return v == NULL ? -1
                         : collrun_parse_seconds(is_timeout ? "--timeout" : "--grace", v,
                                                 is_timeout ? &o->timeout_s : &o->grace_s);
    } else if (strncmp(a, "-x", 2) == 0) {
        v = a[2] != '\0' ? a + 2 : collrun_optarg(argc, argv, i, "-x");
        if (v == NULL || collrun_check_xvar(v) != 0) {
            return -1;
        }
        o->xvars[o->nxvars++] = v;
    } else if (collrun_is_opt(a, "--hosts") || collrun_is_opt(a, "-H") ||
               collrun_is_opt(a, "--hostfile")) {
        collrun_msg("%s: only local launch is supported: collrun starts every rank on this "
                    "host. To run across hosts, start the program with srun, mpirun or torchrun; "
                    "libcoll reads their environment and needs no collrun.",
                    a);
        return -1;
    } else {
        return collrun_usage_error("unknown option '%s'", a);
    }
    return 0;
}

/* Returns 0 to run, 1 to exit 0 (--help, --version), -1 for a usage error. */
static int collrun_parse(int argc, char **argv, collrun_opts_t *o)
{
    int i;
    int rc;

    o->grace_s = 5.0;
    o->xvars   = calloc((size_t)argc, sizeof(*o->xvars));
    if (o->xvars == NULL) {
        collrun_msg("out of memory");
        return -1;
    }
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (argv[i][0] != '-' || argv[i][1] == '\0') {
            break; /* the program: everything from here on is its command line */
        }
        rc = collrun_parse_one(argc, argv, &i, o);
        if (rc != 0) {
            return rc;
        }
    }
    if (o->nranks == 0) {
        collrun_msg("the number of ranks is required: -n N (see collrun --help)");
        return -1;
    }
    if (i >= argc) {
        collrun_msg("no program given (see collrun --help)");
        return -1;
    }
    o->argv = argv + i;
    return 0;
}

/* ---- main ---- */

/* Ranks and relay pipes must never land on fds 0-2, so make sure those are open. */
static void collrun_std_fds_open(void)
{
    int fd;

    while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= STDERR_FILENO) {
    }
    if (fd > STDERR_FILENO) {
        close(fd);
    }
}

int main(int argc, char **argv)
{
    collrun_opts_t opts = {0};
    collrun_job_t  job  = {0};
    int            rc;

    collrun_std_fds_open();
    rc = collrun_parse(argc, argv, &opts);
    if (rc != 0) {
        free(opts.xvars);
        return rc > 0 ? 0 : COLLRUN_EXIT_USAGE;
    }
    job.opts  = &opts;
    job.ranks = calloc((size_t)opts.nranks, sizeof(*job.ranks));
    if (job.ranks == NULL) {
        collrun_msg("out of memory for %d ranks", opts.nranks);
        rc = COLLRUN_EXIT_LAUNCH;
    } else if (collrun_job_prepare(&job) != 0 || collrun_signals_init() != 0) {
        rc = COLLRUN_EXIT_LAUNCH;
    } else {
        rc = collrun_spawn_all(&job);
        if (rc == 0) {
            /* The exit status, unless an interrupted job ends collrun with the signal. */
            rc = collrun_loop_run(&job);
        }
    }
    free(job.ranks);
    free(opts.xvars);
    return rc;
}
