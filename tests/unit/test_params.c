/* SPDX-License-Identifier: MIT */
/*
 * Configuration table: every type's parser on good and bad text, precedence environment >
 * config file > default, the messages logged under ENV (set values, invalid values, unknown
 * COLL_* variables), the collinfo view (coll_param_get) and the error/name helpers of the core.
 * The log is captured through COLL_DEBUG_FILE into a private temporary directory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_test.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "api/tune.h"

/* Rows counted independently of param.h's enum. */
static const int test_nrows = 0
#define COLL_PARAM(...) +1
#include "params.def"
#undef COLL_PARAM
    ;

static char test_dir[] = "/tmp/coll_test_params.XXXXXX";
static char test_log[256];
static char test_conf[256];
static long test_log_seen; /* bytes of the log already looked at */

static void test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    int put = fputs(text, f);
    int rc  = fclose(f); /* ASSERT_EQ evaluates its arguments again when it fails */
    ASSERT_TRUE(put >= 0 && rc == 0);
}

/* Log text written since the previous call (caller frees). */
static char *test_log_new(void)
{
    FILE *f = fopen(test_log, "r");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fseek(f, 0, SEEK_END), 0);
    long end = ftell(f);
    ASSERT_TRUE(end >= test_log_seen);
    char *buf = malloc((size_t)(end - test_log_seen) + 1);
    ASSERT_TRUE(buf != NULL);
    ASSERT_EQ(fseek(f, test_log_seen, SEEK_SET), 0);
    size_t n = fread(buf, 1, (size_t)(end - test_log_seen), f);
    buf[n]   = '\0';
    fclose(f);
    test_log_seen = end;
    return buf;
}

static int test_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

/* Forget the resolved values, resolve again and return the log lines that produced. */
static char *test_reload(void)
{
    coll_params_reset_for_testing();
    ASSERT_OK(coll_params_load());
    return test_log_new();
}

static void test_parse_size(void)
{
    static const struct {
        const char *text;
        size_t      value;
    } good[]                       = {{"0", 0},
                                      {"4096", 4096},
                                      {"4k", 4096},
                                      {"4K", 4096},
                                      {"1kb", 1024},
                                      {"1KiB", 1024},
                                      {"1m", 1u << 20},
                                      {"1MiB", 1u << 20},
                                      {"3mb", 3u << 20},
                                      {"2g", (size_t)2 << 30},
                                      {"1t", (size_t)1 << 40},
                                      {"100b", 100}};
    static const char *const bad[] = {"",
                                      "k",
                                      "-1",
                                      "+4",
                                      "1x",
                                      "1kk",
                                      "1.5k",
                                      " 4k",
                                      "4 k",
                                      "4ki",
                                      "4kib2",
                                      "0x10",
                                      "99999999999999999999",
                                      "17179869184g"};
    size_t                   v;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        ASSERT_EQ(coll_parse_size(good[i].text, &v), 0);
        ASSERT_EQ(v, good[i].value);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_(coll_parse_size(bad[i], &v) == -1, "size \"%s\" rejected", bad[i]);
    }
    ASSERT_EQ(coll_parse_size(NULL, &v), -1);
}

static void test_parse_time(void)
{
    static const struct {
        const char *text;
        double      value;
    } good[] = {{"30", 30.0},    {"1.5", 1.5},    {"30s", 30.0},  {"500ms", 0.5},
                {"20us", 20e-6}, {"100ns", 1e-7}, {"2m", 120.0},  {"1h", 3600.0},
                {".5", 0.5},     {"0", 0.0},      {"10MS", 0.01}, {"3min", 180.0}};
    static const char *const bad[] = {"",     "s",     "-1",  "1x", "1e3", "inf", "nan",
                                      "0x10", "1.2.3", "5 s", " 5", ".",   "1d"};
    double                   v;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = -1.0;
        ASSERT_EQ(coll_parse_time(good[i].text, &v), 0);
        ASSERT_(fabs(v - good[i].value) <= 1e-9 * (1.0 + good[i].value), "time \"%s\" = %g",
                good[i].text, v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_(coll_parse_time(bad[i], &v) == -1, "time \"%s\" rejected", bad[i]);
    }
}

static void test_parse_bool(void)
{
    static const char *const yes[] = {"y", "yes", "1", "true", "on", "Y", "YES", "True", "ON"};
    static const char *const no[]  = {"n", "no", "0", "false", "off", "N", "No", "FALSE", "Off"};
    static const char *const bad[] = {"", "2", "yess", "maybe", " y", "-1"};
    int                      v;

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        v = -1;
        ASSERT_EQ(coll_parse_bool(yes[i], &v), 0);
        ASSERT_EQ(v, 1);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        v = -1;
        ASSERT_EQ(coll_parse_bool(no[i], &v), 0);
        ASSERT_EQ(v, 0);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_(coll_parse_bool(bad[i], &v) == -1, "bool \"%s\" rejected", bad[i]);
    }
}

/* Every row: a valid default, a unique COLL_ name, help text, and source "default". */
static void test_defaults(void)
{
    coll_param_info_t info;
    char             *log = test_reload();

    ASSERT_EQ(coll_param_count(), test_nrows);
    ASSERT_EQ(coll_param_count(), COLL_P_COUNT);
    ASSERT_EQ(test_count(log, " WARN "), 0); /* every default parses */
    ASSERT_STR_CONTAINS(log, "COLL_DEBUG set by environment to info");
    free(log);
    for (int i = 0; i < coll_param_count(); i++) {
        ASSERT_OK(coll_param_get(i, &info));
        ASSERT_EQ(strncmp(info.name, "COLL_", 5), 0);
        ASSERT_TRUE(info.help != NULL && info.help[0] != '\0');
        ASSERT_TRUE(strcmp(info.subsys, "?") != 0);
        for (int j = 0; j < i; j++) {
            coll_param_info_t other;
            ASSERT_OK(coll_param_get(j, &other));
            ASSERT_TRUE(strcmp(info.name, other.name) != 0);
        }
        if (strcmp(info.name, "COLL_DEBUG") == 0 || strcmp(info.name, "COLL_DEBUG_FILE") == 0 ||
            strcmp(info.name, "COLL_CONF_FILE") == 0) {
            ASSERT_EQ(strcmp(info.source, "environment"), 0);
        } else {
            ASSERT_EQ(strcmp(info.source, "default"), 0);
            ASSERT_EQ(strcmp(info.value, info.deflt), 0);
        }
    }
    ASSERT_EQ(coll_param_get(-1, &info), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_param_get(COLL_P_COUNT, &info), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_param_get(0, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "coll_param_get");

    ASSERT_OK(coll_param_get(COLL_P_CHUNK_SIZE, &info));
    ASSERT_EQ(strcmp(info.type, "size"), 0);
    ASSERT_EQ(strcmp(info.subsys, "ALGO"), 0);
    ASSERT_EQ(coll_param_size(COLL_P_CHUNK_SIZE), 256 * 1024);
    ASSERT_EQ(coll_param_int(COLL_P_TCP_NSOCKS), 2);
    ASSERT_EQ(coll_param_int(COLL_P_RANK), -1);
    ASSERT_TRUE(fabs(coll_param_time(COLL_P_SPIN_TIME) - 500e-6) < 1e-12);
    ASSERT_EQ(coll_param_enum(COLL_P_DEBUG), COLL_LOG_INFO);
    ASSERT_EQ(strcmp(coll_param_str(COLL_P_ALGO), "auto"), 0);
    ASSERT_EQ(coll_param_is_set(COLL_P_ALGO), 0);
    ASSERT_EQ(coll_param_is_set(COLL_P_DEBUG), 1);
}

/* Good values of every type from the environment, each logged once at INFO. */
static void test_env_values(void)
{
    setenv("COLL_TCP_NSOCKS", "-4", 1);
    setenv("COLL_CHUNK_SIZE", "64K", 1);
    setenv("COLL_TIMEOUT", "500ms", 1);
    setenv("COLL_DEBUG_SUBSYS", "^tcp", 1);
    setenv("COLL_ALGO", "allreduce:ring", 1);
    setenv("COLL_JOB_SECRET", "0123abcd", 1);
    char *log = test_reload();
    ASSERT_EQ(coll_param_int(COLL_P_TCP_NSOCKS), -4);
    ASSERT_EQ(coll_param_size(COLL_P_CHUNK_SIZE), 65536);
    ASSERT_TRUE(fabs(coll_param_time(COLL_P_TIMEOUT) - 0.5) < 1e-12);
    ASSERT_EQ(strcmp(coll_param_str(COLL_P_DEBUG_SUBSYS), "^tcp"), 0);
    ASSERT_EQ(strcmp(coll_param_str(COLL_P_ALGO), "allreduce:ring"), 0);
    ASSERT_EQ(test_count(log, "COLL_TCP_NSOCKS set by environment to -4\n"), 1);
    ASSERT_EQ(test_count(log, "COLL_CHUNK_SIZE set by environment to 64K\n"), 1);
    ASSERT_EQ(test_count(log, " INFO ENV "), 9); /* + DEBUG, DEBUG_FILE, CONF_FILE */
    ASSERT_EQ(test_count(log, " WARN "), 0);
    /* A secret is used but never shown. */
    coll_param_info_t info;
    ASSERT_EQ(strcmp(coll_param_str(COLL_P_JOB_SECRET), "0123abcd"), 0);
    ASSERT_OK(coll_param_get(COLL_P_JOB_SECRET, &info));
    ASSERT_EQ(strcmp(info.value, "(hidden)"), 0);
    ASSERT_STR_CONTAINS(log, "COLL_JOB_SECRET set by environment to (hidden)\n");
    ASSERT_TRUE(strstr(log, "0123abcd") == NULL);
    free(log);
    unsetenv("COLL_JOB_SECRET");
    unsetenv("COLL_TCP_NSOCKS");
    unsetenv("COLL_CHUNK_SIZE");
    unsetenv("COLL_TIMEOUT");
    unsetenv("COLL_DEBUG_SUBSYS");
    unsetenv("COLL_ALGO");
}

/* A bad value: one WARN naming variable, value and expectation; the default is used. */
static void test_env_invalid(void)
{
    setenv("COLL_TCP_NSOCKS", "four", 1);
    setenv("COLL_CHUNK_SIZE", "12q", 1);
    setenv("COLL_TIMEOUT", "soon", 1);
    setenv("COLL_DEBUG", "verbose", 1);
    setenv("COLL_BOOTSTRAP_PORT_OFFSET", "4294967297", 1); /* parses, but past an int */
    setenv("COLL_BOOTSTRAP_TIMEOUT", "0", 1);              /* parses, but no deadline */
    char *log = test_reload();
    ASSERT_EQ(coll_param_int(COLL_P_TCP_NSOCKS), 2);
    ASSERT_EQ(coll_param_size(COLL_P_CHUNK_SIZE), 256 * 1024);
    ASSERT_TRUE(fabs(coll_param_time(COLL_P_TIMEOUT) - 300.0) < 1e-9);
    ASSERT_EQ(coll_param_enum(COLL_P_DEBUG), COLL_LOG_WARN);
    ASSERT_EQ(coll_param_is_set(COLL_P_TCP_NSOCKS), 0);
    ASSERT_EQ(coll_param_int(COLL_P_BOOTSTRAP_PORT_OFFSET), 1);
    ASSERT_TRUE(fabs(coll_param_time(COLL_P_BOOTSTRAP_TIMEOUT) - 120.0) < 1e-9);
    ASSERT_EQ(test_count(log, " WARN ENV "), 6);
    ASSERT_STR_CONTAINS(log, "\"4294967297\" for COLL_BOOTSTRAP_PORT_OFFSET from environment: "
                             "expected a decimal integer from -2147483648 to 2147483647; using "
                             "the default 1");
    ASSERT_STR_CONTAINS(log, "\"0\" for COLL_BOOTSTRAP_TIMEOUT from environment: expected a "
                             "time above 0");
    ASSERT_STR_CONTAINS(log, "\"four\" for COLL_TCP_NSOCKS from environment: expected a decimal");
    ASSERT_STR_CONTAINS(log, "\"12q\" for COLL_CHUNK_SIZE");
    ASSERT_STR_CONTAINS(log, "\"soon\" for COLL_TIMEOUT");
    ASSERT_STR_CONTAINS(log, "\"verbose\" for COLL_DEBUG from environment: expected one of "
                             "none|error|warn|info|debug|trace; using the default warn");
    ASSERT_EQ(test_count(log, " INFO "), 2); /* DEBUG_FILE, CONF_FILE; level set once */
    free(log);
    setenv("COLL_DEBUG", "info", 1);
    unsetenv("COLL_TCP_NSOCKS");
    unsetenv("COLL_CHUNK_SIZE");
    unsetenv("COLL_TIMEOUT");
    unsetenv("COLL_BOOTSTRAP_PORT_OFFSET");
    unsetenv("COLL_BOOTSTRAP_TIMEOUT");
}

static void test_unknown_env(void)
{
    setenv("COLL_TIMOUT", "5", 1);
    setenv("COLL_TEST_SOMETHING", "1", 1); /* harness namespace: never warned about */
    setenv("COLLX", "1", 1);
    char *log = test_reload();
    ASSERT_EQ(test_count(log, "unknown variable COLL_TIMOUT (typo?); see collinfo -p\n"), 1);
    ASSERT_EQ(test_count(log, "unknown variable"), 1);
    free(log);
    unsetenv("COLL_TIMOUT");
    unsetenv("COLL_TEST_SOMETHING");
    unsetenv("COLLX");
}

/* environment > config file > default, and the source strings collinfo prints. */
static void test_precedence(void)
{
    char              source[300];
    coll_param_info_t info;

    test_write_file(test_conf, "# comment\n"
                               "\n"
                               "COLL_TCP_NSOCKS=3\n"
                               "  CHUNK_SIZE = 64k  # a comment after the value\n"
                               "tcp_frag_size=8k\n"
                               "TIMEOUT=1m\n"
                               "ALGO=\"ring\" # quoted, then a comment\n"
                               "TIMEOUT=2m\n"
                               "NOT_A_PARAM=1\n"
                               "garbage line\n"
                               "SHM_RING_SIZE=huge\n"
                               "HOSTID=\"a # b\"#c # d\n");
    setenv("COLL_TCP_NSOCKS", "7", 1);
    char *log = test_reload();
    snprintf(source, sizeof(source), "config file %s", test_conf);

    ASSERT_EQ(coll_param_int(COLL_P_TCP_NSOCKS), 7);
    ASSERT_OK(coll_param_get(COLL_P_TCP_NSOCKS, &info));
    ASSERT_EQ(strcmp(info.source, "environment"), 0);
    ASSERT_EQ(strcmp(info.value, "7"), 0);
    ASSERT_EQ(strcmp(info.deflt, "2"), 0);

    ASSERT_EQ(coll_param_size(COLL_P_CHUNK_SIZE), 65536);
    ASSERT_EQ(coll_param_size(COLL_P_TCP_FRAG_SIZE), 8192);
    ASSERT_TRUE(fabs(coll_param_time(COLL_P_TIMEOUT) - 120.0) < 1e-9); /* last line wins */
    ASSERT_EQ(strcmp(coll_param_str(COLL_P_ALGO), "ring"), 0);
    ASSERT_EQ(strcmp(coll_param_str(COLL_P_HOSTID), "\"a # b\"#c"), 0); /* # in quotes, no space */
    ASSERT_OK(coll_param_get(COLL_P_CHUNK_SIZE, &info));
    ASSERT_EQ(strcmp(info.source, source), 0);
    ASSERT_EQ(strcmp(info.value, "64k"), 0);

    ASSERT_EQ(coll_param_size(COLL_P_SHM_RING_SIZE), 1u << 20);
    ASSERT_OK(coll_param_get(COLL_P_SHM_RING_SIZE, &info));
    ASSERT_EQ(strcmp(info.source, "default"), 0);
    ASSERT_OK(coll_param_get(COLL_P_SPIN_TIME, &info));
    ASSERT_EQ(strcmp(info.source, "default"), 0);

    ASSERT_STR_CONTAINS(log, "COLL_CHUNK_SIZE set by config file ");
    ASSERT_STR_CONTAINS(log, "COLL_TCP_NSOCKS set by environment to 7");
    ASSERT_EQ(test_count(log, "COLL_TCP_NSOCKS set by config"), 0);
    ASSERT_STR_CONTAINS(log, ":9: unknown parameter NOT_A_PARAM; see collinfo -p");
    ASSERT_STR_CONTAINS(log, ":10: expected NAME=VALUE");
    ASSERT_STR_CONTAINS(log, "\"huge\" for COLL_SHM_RING_SIZE from config file");
    ASSERT_EQ(test_count(log, " WARN "), 3);
    free(log);
    unsetenv("COLL_TCP_NSOCKS");

    /* A COLL_CONF_FILE that cannot be opened is reported, and defaults apply. */
    char missing[300];
    snprintf(missing, sizeof(missing), "%s/missing.conf", test_dir);
    setenv("COLL_CONF_FILE", missing, 1);
    log = test_reload();
    ASSERT_STR_CONTAINS(log, "cannot open config file ");
    ASSERT_EQ(coll_param_size(COLL_P_CHUNK_SIZE), 256 * 1024);
    free(log);
    setenv("COLL_CONF_FILE", test_conf, 1);
    test_write_file(test_conf, "");
}

static void test_env_get(void)
{
    setenv("COLL_TEST_FOREIGN_VAR", "x1", 1);
    ASSERT_EQ(strcmp(coll_env_get("COLL_TEST_FOREIGN_VAR"), "x1"), 0);
    unsetenv("COLL_TEST_FOREIGN_VAR");
    ASSERT_TRUE(coll_env_get("COLL_TEST_FOREIGN_VAR") == NULL);
    ASSERT_TRUE(coll_env_get(NULL) == NULL);
}

/* The rest of the platform layer: result strings, last error, names and sizes. */
static void test_core_names(void)
{
    int version = 0;

    ASSERT_EQ(strcmp(coll_strerror(COLL_OK), "success"), 0);
    ASSERT_EQ(strcmp(coll_strerror(COLL_ERR_TIMEOUT), "timed out"), 0);
    ASSERT_EQ(strcmp(coll_strerror((coll_result_t)-999), "unknown error"), 0);
    ASSERT_EQ(coll_set_last_error(COLL_ERR_REMOTE, "rank %d died", 3), COLL_ERR_REMOTE);
    ASSERT_EQ(strcmp(coll_last_error(), "rank 3 died"), 0);
    ASSERT_EQ(strcmp(coll_get_last_error(), "rank 3 died"), 0);
    ASSERT_OK(coll_get_version(&version));
    ASSERT_EQ(version, COLL_VERSION_CODE);
    ASSERT_EQ(coll_get_version(NULL), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_dtype_size(COLL_BFLOAT16), 2);
    ASSERT_EQ(coll_dtype_size(COLL_FLOAT64), 8);
    ASSERT_EQ(coll_dtype_size(COLL_DTYPE_COUNT), 0);
    ASSERT_EQ(strcmp(coll_dtype_name(COLL_FLOAT16), "half"), 0);
    ASSERT_EQ(strcmp(coll_dtype_name(COLL_FLOAT32), "float"), 0);
    ASSERT_EQ(strcmp(coll_dtype_name((coll_dtype_t)-1), "invalid"), 0);
    ASSERT_EQ(strcmp(coll_redop_name(COLL_AVG), "avg"), 0);
    ASSERT_EQ(strcmp(coll_redop_name(COLL_REDOP_COUNT), "invalid"), 0);
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

/* Values the tuner cannot use keep its defaults, with a warning: a bandwidth of 0, a latency
 * past 1 s or past a double; COLL_CHUNK_SIZE is capped at 1 GiB (offsets plus a chunk of
 * 2^64 - 1 wrapped and wrote before the output). */
static void test_model_params(void)
{
    coll_model_t m, d;
    char         huge[420] = "1";
    memset(huge + 1, '0', 400);
    strcpy(huge + 401, "us");
    coll_model_default(&d);
    setenv("COLL_INTRA_BW", "0", 1);
    setenv("COLL_REDUCE_BW", "0", 1);
    setenv("COLL_INTER_LAT", huge, 1);
    setenv("COLL_INTRA_LAT", "2s", 1);
    setenv("COLL_CHUNK_SIZE", "18446744073709551615", 1);
    char *log = test_reload();
    free(log);
    coll_model_from_params(&m);
    ASSERT_TRUE(m.intra.beta_us_per_byte == d.intra.beta_us_per_byte);
    ASSERT_TRUE(m.gamma_us_per_byte == d.gamma_us_per_byte);
    ASSERT_TRUE(m.inter.alpha_us == d.inter.alpha_us);
    ASSERT_TRUE(m.intra.alpha_us == d.intra.alpha_us);
    ASSERT_EQ(coll_tune_chunk_bytes(), (size_t)1 << 30);
    log = test_log_new();
    ASSERT_STR_CONTAINS(log, "COLL_INTRA_BW: 0 bytes per second is no bandwidth");
    ASSERT_STR_CONTAINS(log, "COLL_REDUCE_BW: 0 bytes per second is no bandwidth");
    ASSERT_STR_CONTAINS(log, "COLL_INTER_LAT: inf s is no latency");
    ASSERT_STR_CONTAINS(log, "COLL_INTRA_LAT: 2 s is no latency");
    ASSERT_STR_CONTAINS(log, "COLL_CHUNK_SIZE 18446744073709551615 is over 1 GiB");
    free(log);
    setenv("COLL_INTRA_BW", "3g", 1); /* usable values are taken */
    setenv("COLL_INTRA_LAT", "1ms", 1);
    setenv("COLL_CHUNK_SIZE", "1k", 1);
    log = test_reload();
    free(log);
    coll_model_from_params(&m);
    ASSERT_TRUE(m.intra.beta_us_per_byte == 1e6 / (double)coll_param_size(COLL_P_INTRA_BW));
    ASSERT_TRUE(m.intra.beta_us_per_byte != d.intra.beta_us_per_byte);
    ASSERT_TRUE(fabs(m.intra.alpha_us - 1000.0) < 1e-9);
    ASSERT_EQ(coll_tune_chunk_bytes(), 1024);
    unsetenv("COLL_INTRA_BW");
    unsetenv("COLL_REDUCE_BW");
    unsetenv("COLL_INTER_LAT");
    unsetenv("COLL_INTRA_LAT");
    unsetenv("COLL_CHUNK_SIZE");
}

int main(void)
{
    test_clean_env();
    ASSERT_TRUE(mkdtemp(test_dir) != NULL);
    snprintf(test_log, sizeof(test_log), "%s/log", test_dir);
    snprintf(test_conf, sizeof(test_conf), "%s/coll.conf", test_dir);
    test_write_file(test_conf, "");
    /* Set before the first library call: logging reads them once per process. */
    setenv("COLL_DEBUG", "info", 1);
    setenv("COLL_DEBUG_FILE", test_log, 1);
    setenv("COLL_CONF_FILE", test_conf, 1); /* keeps ~/.coll.conf out of the test */

    test_parse_size();
    test_parse_time();
    test_parse_bool();
    test_defaults();
    test_env_values();
    test_env_invalid();
    test_unknown_env();
    test_precedence();
    test_env_get();
    test_core_names();
    test_model_params();

    unlink(test_log);
    unlink(test_conf);
    rmdir(test_dir);
    printf("test_params: ok\n");
    return 0;
}
