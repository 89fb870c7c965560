/* SPDX-License-Identifier: MIT */
/*
 * Multi-process test harness: forks N ranks that rendezvous through a unique id written to a
 * file in a private mkdtemp() directory (no launcher, no MPI), waits for them with a timeout
 * (scaled by COLL_TEST_TIMEOUT_MULTIPLIER), kills stragglers and reports each failing rank.
 */
#include "coll_test.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void (*test_before_share)(const coll_unique_id_t *id);

coll_result_t coll_test_comm_create(const char *dir, int rank, int nranks, coll_comm_t **comm_p)
{
    char             path[512], tmp[512];
    coll_unique_id_t id;
    snprintf(path, sizeof(path), "%s/uid", dir);
    if (rank == 0) {
        coll_result_t st = coll_get_unique_id(&id);
        if (st != COLL_OK) {
            return st;
        }
        if (test_before_share != NULL) {
            test_before_share(&id);
        }
        snprintf(tmp, sizeof(tmp), "%s/uid.tmp", dir);
        FILE *f = fopen(tmp, "wb");
        if (f == NULL || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 ||
            rename(tmp, path) != 0) {
            fprintf(stderr, "harness: cannot write %s: %s\n", path, strerror(errno));
            return COLL_ERR_SYSTEM;
        }
    } else {
        double deadline = test_now() + 60.0;
        for (;;) {
            FILE *f = fopen(path, "rb");
            if (f != NULL) {
                size_t n = fread(&id, sizeof(id), 1, f);
                fclose(f);
                if (n == 1) {
                    break;
                }
            }
            if (test_now() > deadline) {
                fprintf(stderr, "harness: rank %d found no unique id in %s\n", rank, dir);
                return COLL_ERR_TIMEOUT;
            }
            usleep(1000);
        }
    }
    return coll_comm_init_rank(comm_p, nranks, id, rank);
}

int coll_test_log_count(const char *mark)
{
    const char *pat = getenv("COLL_DEBUG_FILE");
    char        path[4096], line[2048];
    size_t      used  = 0;
    int         count = 0;
    if (pat == NULL || pat[0] == '\0') {
        return 0;
    }
    for (const char *p = pat; *p != '\0' && used + 16 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'p') {
            used += (size_t)snprintf(path + used, sizeof(path) - used, "%d", (int)getpid());
            p++;
        } else {
            path[used++] = *p;
        }
    }
    path[used] = '\0';
    FILE *f    = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        count += strstr(line, mark) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return count;
}

int coll_test_transports(const char *list[], int max)
{
    static char buf[256];
    const char *env = getenv("COLL_TEST_TRANSPORTS");
    int         n   = 0;
    snprintf(buf, sizeof(buf), "%s", env != NULL && env[0] != '\0' ? env : "shm,tcp");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL && n < max;
         t = strtok_r(NULL, ",", &save)) {
        list[n++] = t;
    }
    return n;
}

int coll_test_has_transport(const char *name)
{
    const char *tps[16];
    int         n = coll_test_transports(tps, 16);
    for (int t = 0; t < n; t++) {
        if (strcmp(tps[t], name) == 0) {
            return 1;
        }
    }
    return 0;
}

int coll_test_direct_setup(void)
{
    if (!coll_test_has_transport("shm")) {
        printf("SKIP: the direct path needs the shm transport (COLL_TEST_TRANSPORTS)\n");
        return 0;
    }
    setenv("COLL_DEBUG", "info", 1);
    setenv("COLL_DEBUG_SUBSYS", "all", 1);
    unsetenv("COLL_ALGO");
    return 1;
}

static int test_child(const coll_test_opts_t *opts, int rank, coll_test_rank_fn_t fn, void *arg)
{
    coll_comm_t *comm = NULL;
    test_before_share = opts->before_share;
    /* Emulated hosts: COLL_TEST_RANKS_PER_HOST=k puts ranks [0,k) on one host id, [k,2k) on the
     * next...: shared memory inside a "host", tcp between them, in one machine.
     * COLL_TEST_INTERLEAVE_HOSTS=h puts rank r on host r mod h instead, so a host's ranks are
     * not consecutive and the rings must reorder them to cross each host boundary once. */
    const char *rph = getenv("COLL_TEST_RANKS_PER_HOST");
    const char *ilv = getenv("COLL_TEST_INTERLEAVE_HOSTS");
    if ((rph != NULL && atoi(rph) > 0) || (ilv != NULL && atoi(ilv) > 0)) {
        char host[32];
        snprintf(host, sizeof(host), "testhost%d",
                 (ilv != NULL && atoi(ilv) > 0) ? rank % atoi(ilv) : rank / atoi(rph));
        setenv("COLL_HOSTID", host, 1);
    }
    if (opts->transport != NULL) {
        setenv("COLL_TRANSPORT", opts->transport, 1);
    }
    if (opts->before_comm != NULL) {
        opts->before_comm(rank, opts->nranks);
    }
    if (opts->want_comm) {
        coll_result_t st = coll_test_comm_create(opts->rendezvous_dir, rank, opts->nranks, &comm);
        if (st != COLL_OK) {
            fprintf(stderr, "rank %d: communicator creation failed: %s: %s\n", rank,
                    coll_strerror(st), coll_last_error());
            return 3;
        }
    }
    int rc = fn(rank, opts->nranks, comm, arg);
    if (comm != NULL) {
        coll_result_t st = coll_comm_destroy(comm);
        if (st != COLL_OK && rc == 0) {
            fprintf(stderr, "rank %d: destroy failed: %s\n", rank, coll_strerror(st));
            rc = 4;
        }
    }
    return rc;
}

/* The run under way (its children inherit it), for coll_test_rendezvous_dir. */
static const char *test_dir;

const char *coll_test_rendezvous_dir(void)
{
    return test_dir;
}

static void test_rmdir(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/uid", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/uid.tmp", dir);
    unlink(path);
    rmdir(dir);
}

int coll_test_run_ranks(const coll_test_opts_t *opts_in, coll_test_rank_fn_t fn, void *arg)
{
    coll_test_opts_t opts  = *opts_in;
    char             dir[] = "/tmp/colltest.XXXXXX";
    const char      *mult  = getenv("COLL_TEST_TIMEOUT_MULTIPLIER");
    double           timeout =
        (opts.timeout_s > 0 ? opts.timeout_s : 60.0) * (mult != NULL ? atof(mult) : 1.0);
    pid_t *pids   = calloc((size_t)opts.nranks, sizeof(pid_t));
    int    failed = 0, left = opts.nranks;

    if (pids == NULL || mkdtemp(dir) == NULL) {
        fprintf(stderr, "harness: cannot create a rendezvous directory: %s\n", strerror(errno));
        exit(COLL_TEST_HARD);
    }
    opts.rendezvous_dir = dir;
    test_dir            = dir;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < opts.nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc = test_child(&opts, r, fn, arg);
            free(pids); /* the child's copy: leak checkers look at every process */
            _exit(rc);
        }
        if (pids[r] < 0) {
            fprintf(stderr, "harness: fork failed: %s\n", strerror(errno));
            exit(COLL_TEST_HARD);
        }
    }
    double deadline = test_now() + timeout;
    while (left > 0) {
        int   status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            if (test_now() > deadline) {
                for (int r = 0; r < opts.nranks; r++) {
                    if (pids[r] > 0) {
                        fprintf(stderr, "harness: rank %d timed out after %.0f s; killing\n", r,
                                timeout);
                        kill(pids[r], SIGKILL);
                    }
                }
                deadline = test_now() + 3600;
                failed   = 1;
            }
            usleep(2000);
            continue;
        }
        for (int r = 0; r < opts.nranks; r++) {
            if (pids[r] != pid) {
                continue;
            }
            pids[r] = 0;
            left--;
            if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && opts.victim == r + 1) {
                /* the rank the test killed on purpose */
            } else if (WIFSIGNALED(status)) {
                fprintf(stderr, "harness: rank %d killed by signal %d\n", r, WTERMSIG(status));
                failed = 1;
            } else if (WEXITSTATUS(status) != 0) {
                fprintf(stderr, "harness: rank %d exited with %d\n", r, WEXITSTATUS(status));
                failed = 1;
            }
        }
    }
    free(pids);
    test_rmdir(dir);
    test_dir = NULL;
    return failed;
}

/* Remove a run's log directory, first printing the warnings, errors and lines with mark of its
 * logs when show is set. */
static void test_logs_done(const char *dir, int show, const char *mark)
{
    char line[2048];
    DIR *d = opendir(dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char path[PATH_MAX + 264];
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = show ? fopen(path, "r") : NULL;
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            if (strstr(line, " WARN ") != NULL || strstr(line, " ERROR ") != NULL ||
                (mark != NULL && strstr(line, mark) != NULL)) {
                fputs(line, stderr);
            }
        }
        if (f != NULL) {
            fclose(f);
        }
        unlink(path);
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(dir);
}

int coll_test_run_logged(const char *what, const coll_test_opts_t *opts, const char *mark,
                         coll_test_rank_fn_t fn, void *arg)
{
    const char     *tmp = getenv("TMPDIR");
    char            dir[PATH_MAX], file[PATH_MAX + 16];
    struct timespec a, b;
    snprintf(dir, sizeof(dir), "%s/colllog.XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(COLL_TEST_HARD);
    }
    snprintf(file, sizeof(file), "%s/log.%%p", dir);
    setenv("COLL_DEBUG_FILE", file, 1);
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = coll_test_run_ranks(opts, fn, arg);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%s: %s, %d ranks (%.2f s)\n", rc ? "FAIL" : "PASS", what, opts->nranks,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
    fflush(stdout);
    test_logs_done(dir, rc != 0, mark);
    unsetenv("COLL_DEBUG_FILE");
    return rc != 0;
}
