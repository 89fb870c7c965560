/* SPDX-License-Identifier: MIT */
/*
 * Logging: level filtering (COLL_DEBUG), subsystem lists and ^ negation (COLL_DEBUG_SUBSYS),
 * %h/%p in COLL_DEBUG_FILE, the fallback to stderr, the exact line format, and whole lines
 * under concurrent threads and processes. Logging is set up once per process, so every case
 * runs in a forked child with its own environment; the parent reads the files it wrote.
 */
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll_test.h"
#include "log.h"
#include "param.h"

#define TEST_NTHREADS 4
#define TEST_NLINES   100

static char test_dir[] = "/tmp/coll_test_log.XXXXXX";
static char test_conf[300];

typedef void (*test_body_fn_t)(void);

static void test_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", test_dir, name);
}

/* Whole file as a string ("" if it does not exist); caller frees. */
static char *test_read(const char *path)
{
    FILE *f   = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    ASSERT_TRUE(buf != NULL);
    if (f != NULL) {
        size_t n = fread(buf, 1, (1 << 20) - 1, f);
        buf[n]   = '\0';
        fclose(f);
    }
    return buf;
}

/*
 * Fork; the child sets env ("NAME=VALUE" strings, NULL-terminated), optionally sends its
 * stderr to stderr_path, runs body and exits 0. Returns the child's pid after it succeeded.
 */
static pid_t test_child(const char *const env[], const char *stderr_path, test_body_fn_t body)
{
    int   status;
    pid_t pid = fork();

    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        for (int i = 0; env[i] != NULL; i++) {
            ASSERT_TRUE(putenv((char *)env[i]) == 0);
        }
        if (stderr_path != NULL) {
            ASSERT_TRUE(freopen(stderr_path, "w", stderr) != NULL);
        }
        body();
        _exit(0);
    }
    pid_t got = waitpid(pid, &status, 0);
    ASSERT_EQ(got, pid);
    ASSERT_(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    return pid;
}

/* One line per (level, subsystem) so the parent can see exactly what passed the filter. */
static void test_emit_all(void)
{
    for (int l = COLL_LOG_ERROR; l <= COLL_LOG_TRACE; l++) {
        coll_log((coll_log_level_t)l, INIT, "msg-%d-INIT", l);
        coll_log((coll_log_level_t)l, TCP, "msg-%d-TCP", l);
        coll_log((coll_log_level_t)l, SHM, "msg-%d-SHM", l);
    }
}

static void test_body_init_emit(void)
{
    coll_log_init();
    test_emit_all();
}

/* Which of the 5 x 3 lines are in log; expect[] holds "I", "T", "S" sets per level. */
static void test_expect_lines(const char *log, const char *const expect[5])
{
    static const char *const ss[] = {"INIT", "TCP", "SHM"};
    char                     msg[64];

    for (int l = COLL_LOG_ERROR; l <= COLL_LOG_TRACE; l++) {
        for (int s = 0; s < 3; s++) {
            int want = strchr(expect[l - 1], ss[s][0]) != NULL;
            snprintf(msg, sizeof(msg), "msg-%d-%s\n", l, ss[s]);
            ASSERT_(want == (strstr(log, msg) != NULL), "line %s%s expected", msg,
                    want ? "" : " not");
        }
    }
}

/* Run test_emit_all() with COLL_DEBUG=level and COLL_DEBUG_SUBSYS=subsys (NULL: unset). */
static char *test_filter_case(const char *name, const char *level, const char *subsys)
{
    static char file_env[400], level_env[64], subsys_env[128];
    char        path[300];
    const char *env[4] = {file_env, NULL, NULL, NULL};
    int         n      = 1;

    test_path(path, sizeof(path), name);
    snprintf(file_env, sizeof(file_env), "COLL_DEBUG_FILE=%s", path);
    if (level != NULL) {
        snprintf(level_env, sizeof(level_env), "COLL_DEBUG=%s", level);
        env[n++] = level_env;
    }
    if (subsys != NULL) {
        snprintf(subsys_env, sizeof(subsys_env), "COLL_DEBUG_SUBSYS=%s", subsys);
        env[n++] = subsys_env;
    }
    test_child(env, NULL, test_body_init_emit);
    char *log = test_read(path);
    unlink(path);
    return log;
}

static void test_levels(void)
{
    char *log;

    log = test_filter_case("default.log", NULL, NULL);
    test_expect_lines(log, (const char *const[]){"ITS", "ITS", "", "", ""});
    free(log);
    log = test_filter_case("info.log", "InFo", NULL);
    test_expect_lines(log, (const char *const[]){"ITS", "ITS", "ITS", "", ""});
    ASSERT_STR_CONTAINS(log, " INFO ENV ");
    ASSERT_STR_CONTAINS(log, "COLL_DEBUG set by environment to InFo");
    free(log);
    log = test_filter_case("debug.log", "DEBUG", NULL);
    test_expect_lines(log, (const char *const[]){"ITS", "ITS", "ITS", "ITS", ""});
    free(log);
    log = test_filter_case("trace.log", "trace", NULL);
    test_expect_lines(log, (const char *const[]){"ITS", "ITS", "ITS", "ITS", "ITS"});
    free(log);
    log = test_filter_case("error.log", "error", NULL);
    test_expect_lines(log, (const char *const[]){"ITS", "", "", "", ""});
    free(log);
    log = test_filter_case("none.log", "none", NULL);
    ASSERT_EQ(strlen(log), 0);
    free(log);
    /* An unknown level warns (naming value and choices) and keeps the default, warn. */
    log = test_filter_case("bad.log", "verbose", NULL);
    test_expect_lines(log, (const char *const[]){"ITS", "ITS", "", "", ""});
    ASSERT_STR_CONTAINS(log, "\"verbose\" for COLL_DEBUG");
    free(log);
}

static void test_subsystems(void)
{
    char *log;

    log = test_filter_case("ss1.log", "info", "tcp, Shm");
    test_expect_lines(log, (const char *const[]){"TS", "TS", "TS", "", ""});
    ASSERT_TRUE(strstr(log, " ENV ") == NULL); /* ENV not listed: its INFO lines go */
    free(log);
    log = test_filter_case("ss2.log", "info", "^TCP");
    test_expect_lines(log, (const char *const[]){"IS", "IS", "IS", "", ""});
    ASSERT_STR_CONTAINS(log, " INFO ENV ");
    free(log);
    log = test_filter_case("ss3.log", "info", "^tcp,init");
    test_expect_lines(log, (const char *const[]){"S", "S", "S", "", ""});
    free(log);
    log = test_filter_case("ss4.log", "trace", "^all");
    ASSERT_EQ(strlen(log), 0);
    free(log);
    log = test_filter_case("ss5.log", "info", "ALL");
    test_expect_lines(log, (const char *const[]){"ITS", "ITS", "ITS", "", ""});
    free(log);
    /* Configuration warnings are not hidden by a list that leaves ENV out. */
    log = test_filter_case("ss6.log", "warn", "tcp,bogus");
    test_expect_lines(log, (const char *const[]){"T", "T", "", "", ""});
    ASSERT_STR_CONTAINS(log, " WARN ENV log.c:");
    ASSERT_STR_CONTAINS(log, "unknown subsystem bogus ignored");
    free(log);
}

static void test_body_format(void)
{
    coll_warn(TCP, "hello %d line %d", 42, __LINE__); /* before init: initialises logging */
    coll_log_set_rank(3);
    coll_error(BOOTSTRAP, "bye line %d\n", __LINE__); /* trailing newline is not doubled */
}

/* "host:pid:tid [rank] COLL LEVEL SUBSYS file:line message", one line each. */
static void test_format(void)
{
    char        path[300], env_file[400], host[256] = "";
    const char *env[] = {env_file, NULL};
    regex_t     re;
    regmatch_t  m[5];

    test_path(path, sizeof(path), "format.log");
    snprintf(env_file, sizeof(env_file), "COLL_DEBUG_FILE=%s", path);
    pid_t pid = test_child(env, NULL, test_body_format);
    char *log = test_read(path);
    ASSERT_TRUE(gethostname(host, sizeof(host) - 1) == 0);

    int rc = regcomp(&re,
                     "^([^: ]+):([0-9]+):[0-9]+ \\[-\\] COLL WARN TCP test_log_filter\\.c:"
                     "([0-9]+) hello 42 line ([0-9]+)\n"
                     "[^: ]+:[0-9]+:[0-9]+ \\[3\\] COLL ERROR BOOTSTRAP test_log_filter\\.c:"
                     "[0-9]+ bye line [0-9]+\n$",
                     REG_EXTENDED);
    ASSERT_EQ(rc, 0);
    ASSERT_(regexec(&re, log, 5, m, 0) == 0, "log format:\n%s", log);
    regfree(&re);
    ASSERT_EQ((int)(m[1].rm_eo - m[1].rm_so), (int)strlen(host));
    ASSERT_EQ(strncmp(log + m[1].rm_so, host, strlen(host)), 0);
    ASSERT_EQ(atol(log + m[2].rm_so), pid);
    ASSERT_EQ(atol(log + m[3].rm_so), atol(log + m[4].rm_so)); /* file:line is the caller's */
    free(log);
    unlink(path);
}

static void test_body_fallback(void)
{
    coll_log_init();
    coll_warn(SHM, "fallback-ok");
}

/* %h and %p expand; an unopenable file falls back to stderr with a warning. */
static void test_file_name(void)
{
    char        path[300], env_file[400], host[256] = "";
    const char *env[] = {env_file, NULL};

    ASSERT_TRUE(gethostname(host, sizeof(host) - 1) == 0);
    snprintf(env_file, sizeof(env_file), "COLL_DEBUG_FILE=%s/log.%%h.%%p.%%%%", test_dir);
    pid_t pid = test_child(env, NULL, test_body_fallback);
    snprintf(path, sizeof(path), "%s/log.%s.%d.%%", test_dir, host, (int)pid);
    char *log = test_read(path);
    ASSERT_STR_CONTAINS(log, "fallback-ok\n");
    free(log);
    unlink(path);

    char errpath[300];
    test_path(errpath, sizeof(errpath), "stderr.txt");
    snprintf(env_file, sizeof(env_file), "COLL_DEBUG_FILE=%s/no/such/dir/x.log", test_dir);
    test_child(env, errpath, test_body_fallback);
    log = test_read(errpath);
    ASSERT_STR_CONTAINS(log, "cannot open log file ");
    ASSERT_STR_CONTAINS(log, "/no/such/dir/x.log: No such file or directory; logging to stderr");
    ASSERT_STR_CONTAINS(log, " COLL WARN SHM test_log_filter.c:");
    ASSERT_STR_CONTAINS(log, "fallback-ok\n");
    free(log);
    unlink(errpath);
}

static void *test_thread(void *arg)
{
    ASSERT_EQ(coll_param_int(COLL_P_TCP_NSOCKS), 2);
    for (int i = 0; i < TEST_NLINES; i++) {
        coll_warn(TCP, "thread %ld line %d padding-padding-padding-padding-padding-padding-end",
                  (long)(intptr_t)arg, i);
    }
    return NULL;
}

/* Two processes of TEST_NTHREADS threads append to one file: every line stays whole. */
static void test_body_threads(void)
{
    pthread_t th[TEST_NTHREADS];

    /* No coll_log_init(): the threads of each process race to set logging up on first use,
     * and each process opens the file itself (O_APPEND). */
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    for (long i = 0; i < TEST_NTHREADS; i++) {
        int rc = pthread_create(&th[i], NULL, test_thread, (void *)(intptr_t)i);
        ASSERT_EQ(rc, 0);
    }
    for (int i = 0; i < TEST_NTHREADS; i++) {
        int rc = pthread_join(th[i], NULL);
        ASSERT_EQ(rc, 0);
    }
    if (pid == 0) {
        _exit(0);
    }
    int   status;
    pid_t got = waitpid(pid, &status, 0);
    ASSERT_EQ(got, pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_concurrent(void)
{
    char        path[300], env_file[400];
    const char *env[] = {env_file, NULL};
    regex_t     re;
    int         lines = 0;

    test_path(path, sizeof(path), "threads.log");
    snprintf(env_file, sizeof(env_file), "COLL_DEBUG_FILE=%s", path);
    test_child(env, NULL, test_body_threads);
    char *log = test_read(path);
    int   rc  = regcomp(&re,
                        "^[^: ]+:[0-9]+:[0-9]+ \\[-\\] COLL WARN TCP test_log_filter\\.c:[0-9]+ "
                           "thread [0-9]+ line [0-9]+ (padding-){6}end$",
                        REG_EXTENDED | REG_NOSUB);
    ASSERT_EQ(rc, 0);
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        ASSERT_(regexec(&re, line, 0, NULL, 0) == 0, "torn line: %s", line);
        lines++;
    }
    regfree(&re);
    ASSERT_EQ(lines, 2 * TEST_NTHREADS * TEST_NLINES);
    free(log);
    unlink(path);
}

/* Remove every COLL_* variable inherited from the caller (make check sets some). */
static void test_clean_env(void)
{
    extern char **environ;
    char          name[256];
    int           again = 1;

    while (again) {
        again = 0;
        for (char **e = environ; *e != NULL; e++) {
            size_t n = strcspn(*e, "=");
            if (strncmp(*e, "COLL_", 5) == 0 && n < sizeof(name)) {
                memcpy(name, *e, n);
                name[n] = '\0';
                unsetenv(name); /* environ changed: start over */
                again = 1;
                break;
            }
        }
    }
}

int main(void)
{
    test_clean_env();
    /* Before any init: WARN and every subsystem, so early errors are never lost. */
    ASSERT_EQ(coll_log_level_g, COLL_LOG_WARN);
    ASSERT_EQ(coll_log_subsys_mask_g, (1u << COLL_SS_COUNT) - 1u);
    ASSERT_EQ(strcmp(coll_subsys_name(COLL_SS_TCP), "TCP"), 0);
    ASSERT_EQ(strcmp(coll_subsys_name(COLL_SS_BOOTSTRAP), "BOOTSTRAP"), 0);
    ASSERT_EQ(strcmp(coll_subsys_name(COLL_SS_COUNT), "?"), 0);

    ASSERT_TRUE(mkdtemp(test_dir) != NULL);
    test_path(test_conf, sizeof(test_conf), "empty.conf");
    FILE *f = fopen(test_conf, "w");
    ASSERT_TRUE(f != NULL);
    fclose(f);
    setenv("COLL_CONF_FILE", test_conf, 1); /* keeps ~/.coll.conf out of the test */

    test_levels();
    test_subsystems();
    test_format();
    test_file_name();
    test_concurrent();

    unlink(test_conf);
    ASSERT_TRUE(rmdir(test_dir) == 0);
    printf("test_log_filter: ok\n");
    return 0;
}
