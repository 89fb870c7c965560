/* SPDX-License-Identifier: MIT */
/*
 * Logging: filters lines by level (COLL_DEBUG) and subsystem (COLL_DEBUG_SUBSYS), formats them
 * as "host:pid:tid [rank] COLL LEVEL SUBSYS file:line message" and writes each with a single
 * write(2) to stderr or COLL_DEBUG_FILE, so lines from threads and processes never interleave.
 * It reads its settings through the param getters; it does not parse the environment itself.
 */
#include "log.h"
#include "compiler.h"
#include "param.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LOG_ALL_SUBSYS ((uint32_t)((1ull << COLL_SS_COUNT) - 1ull))
#define LOG_LINE_MAX   4096

/* Before coll_log_init() runs, WARN and above from every subsystem reach stderr. */
int      coll_log_level_g       = COLL_LOG_WARN;
uint32_t coll_log_subsys_mask_g = LOG_ALL_SUBSYS;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int            log_ready;    /* atomic: 1 once log_setup() has finished */
static __thread int   log_in_setup; /* this thread runs log_setup() right now */
static int            log_fd                      = STDERR_FILENO;
static int            log_rank                    = -1; /* atomic: -1 until coll_log_set_rank() */
static char           log_host[HOST_NAME_MAX + 1] = "?";

static const char *const log_level_names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

static const char *const log_subsys_names[COLL_SS_COUNT] = {
#define LOG_SS_NAME_(_n) [COLL_SS_##_n] = #_n,
    COLL_SUBSYS_MAP(LOG_SS_NAME_)
#undef LOG_SS_NAME_
};

const char *coll_subsys_name(coll_subsys_t ss)
{
    if ((int)ss < 0 || ss >= COLL_SS_COUNT) {
        return "?";
    }
    return log_subsys_names[ss];
}

/* Subsystem whose name is the n bytes at name (any case), or -1. */
static int log_subsys_lookup(const char *name, size_t n)
{
    for (int i = 0; i < COLL_SS_COUNT; i++) {
        if (strlen(log_subsys_names[i]) == n && strncasecmp(log_subsys_names[i], name, n) == 0) {
            return i;
        }
    }
    return -1;
}

/*
 * "TCP,shm" -> those bits; "all" -> every bit; a leading '^' inverts the result (NCCL).
 * Names not recognised are copied into bad (comma separated) for one warning later.
 */
static uint32_t log_parse_subsys(const char *list, char *bad, size_t bad_len)
{
    uint32_t mask   = 0;
    int      negate = 0;
    int      named  = 0;

    while (*list == ' ' || *list == '\t') {
        list++;
    }
    if (*list == '^') {
        negate = 1;
        list++;
    }
    while (*list != '\0') {
        size_t n = strcspn(list, ",");
        size_t s = 0;
        while (s < n && (list[s] == ' ' || list[s] == '\t')) {
            s++;
        }
        size_t e = n;
        while (e > s && (list[e - 1] == ' ' || list[e - 1] == '\t')) {
            e--;
        }
        if (e > s) {
            int ss = log_subsys_lookup(list + s, e - s);
            named  = 1;
            if (e - s == 3 && strncasecmp(list + s, "all", 3) == 0) {
                mask = LOG_ALL_SUBSYS;
            } else if (ss >= 0) {
                mask |= 1u << ss;
            } else {
                size_t used = strlen(bad);
                snprintf(bad + used, bad_len - used, "%s%.*s", used > 0 ? "," : "", (int)(e - s),
                         list + s);
            }
        }
        list += n;
        if (*list == ',') {
            list++;
        }
    }
    if (named == 0) {
        return negate ? 0 : LOG_ALL_SUBSYS; /* empty list: everything; "^" alone: nothing */
    }
    return negate ? (LOG_ALL_SUBSYS & ~mask) : mask;
}

/* Expand %h (host), %p (pid) and %% in a COLL_DEBUG_FILE pattern. */
static void log_expand_path(const char *pattern, char *out, size_t out_len)
{
    size_t used = 0;

    for (const char *p = pattern; *p != '\0' && used + 1 < out_len; p++) {
        int n = 0;
        if (p[0] == '%' && p[1] == 'h') {
            n = snprintf(out + used, out_len - used, "%s", log_host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            n = snprintf(out + used, out_len - used, "%d", (int)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            out[used] = '%';
            n         = 1;
            p++;
        } else {
            out[used] = *p;
            n         = 1;
        }
        used += (n > 0) ? (size_t)n : 0;
        if (used >= out_len) {
            used = out_len - 1;
        }
    }
    out[used] = '\0';
}

/* Runs once (pthread_once): level, subsystem mask and destination from the parameters. */
static void log_setup(void)
{
    char        bad[256]       = "";
    char        path[PATH_MAX] = "";
    int         open_errno     = 0;
    const char *file;

    log_in_setup = 1;
    if (gethostname(log_host, sizeof(log_host) - 1) != 0) {
        snprintf(log_host, sizeof(log_host), "unknown");
    }
    log_host[sizeof(log_host) - 1] = '\0';

    coll_log_level_g = coll_param_enum(COLL_P_DEBUG); /* CHOICES are in enum order */
    coll_log_subsys_mask_g =
        log_parse_subsys(coll_param_str(COLL_P_DEBUG_SUBSYS), bad, sizeof(bad));
    file = coll_param_str(COLL_P_DEBUG_FILE);
    if (file[0] != '\0') {
        log_expand_path(file, path, sizeof(path));
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            open_errno = errno;
        } else {
            log_fd = fd;
        }
    }
    __atomic_store_n(&log_ready, 1, __ATOMIC_RELEASE);
    log_in_setup = 0;

    /* Logging works from here on, so problems with the settings themselves can be reported;
     * coll_log_emit() directly, because the subsystem mask must not hide them (see there). */
    if (open_errno != 0 && coll_log_level_g >= COLL_LOG_WARN) {
        coll_log_emit(COLL_LOG_WARN, COLL_SS_ENV, __FILE__, __LINE__,
                      "cannot open log file %s: %s; logging to stderr", path, strerror(open_errno));
    }
    if (bad[0] != '\0' && coll_log_level_g >= COLL_LOG_WARN) {
        coll_log_emit(COLL_LOG_WARN, COLL_SS_ENV, __FILE__, __LINE__,
                      "COLL_DEBUG_SUBSYS: unknown subsystem %s ignored", bad);
    }
}

void coll_log_init(void)
{
    /* log_in_setup: the param getters called by log_setup() come back here; return at once. */
    if (__atomic_load_n(&log_ready, __ATOMIC_ACQUIRE) != 0 || log_in_setup != 0) {
        return;
    }
    (void)coll_params_load(); /* resolves values first; it calls back here (then a no-op) */
    pthread_once(&log_once, log_setup);
}

void coll_log_set_rank(int rank)
{
    __atomic_store_n(&log_rank, rank, __ATOMIC_RELAXED);
}

static void log_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; /* nowhere left to report a failing log */
        }
        buf += n;
        len -= (size_t)n;
    }
}

/*
 * The filter after init (a caller that ran before init checked against the defaults).
 * ENV errors and warnings (bad or unknown variables) pass any COLL_DEBUG_SUBSYS mask, since
 * that setting may be what is wrong; param.c and log_setup() call coll_log_emit() directly
 * for them, because the coll_warn() macro would apply the mask first.
 */
static int log_pass(coll_log_level_t lvl, coll_subsys_t ss)
{
    if (lvl <= COLL_LOG_NONE || lvl > COLL_LOG_TRACE || (int)ss < 0 || ss >= COLL_SS_COUNT ||
        (int)lvl > coll_log_level_g) {
        return 0;
    }
    return (coll_log_subsys_mask_g & (1u << ss)) != 0 ||
           (ss == COLL_SS_ENV && lvl <= COLL_LOG_WARN);
}

void coll_log_emit(coll_log_level_t lvl, coll_subsys_t ss, const char *file, int line,
                   const char *fmt, ...)
{
    char        buf[LOG_LINE_MAX];
    char        rank_str[16] = "-";
    const char *base;
    va_list     ap;
    int         saved_errno = errno; /* callers often log strerror(errno) and then use errno */

    coll_log_init();
    if (log_pass(lvl, ss) == 0) {
        errno = saved_errno;
        return;
    }
    int rank = __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
    if (rank >= 0) {
        snprintf(rank_str, sizeof(rank_str), "%d", rank);
    }
    file = (file != NULL) ? file : "?";
    base = strrchr(file, '/');
    base = (base != NULL) ? base + 1 : file;

    int    head = snprintf(buf, sizeof(buf), "%s:%d:%ld [%s] COLL %s %s %s:%d ", log_host,
                           (int)getpid(), (long)syscall(SYS_gettid), rank_str, log_level_names[lvl],
                           coll_subsys_name(ss), base, line);
    size_t len  = (head > 0 && (size_t)head < sizeof(buf)) ? (size_t)head : 0;
    va_start(ap, fmt);
    int body = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
    va_end(ap);
    if (body > 0) {
        len += COLL_MIN_OF((size_t)body, sizeof(buf) - len - 1);
    }
    while (len > 0 && buf[len - 1] == '\n') {
        len--;
    }
    if (len > sizeof(buf) - 2) {
        len = sizeof(buf) - 2; /* long messages are cut; the line still ends in '\n' */
    }
    buf[len++] = '\n';
    log_write_all(log_fd, buf, len);
    errno = saved_errno;
}

static __thread char log_last_error[512];

void coll_log_error(coll_subsys_t ss, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    int     saved_errno = errno;
    va_start(ap, fmt);
    vsnprintf(log_last_error, sizeof(log_last_error), fmt, ap);
    va_end(ap);
    if (coll_log_enabled(COLL_LOG_ERROR, ss)) {
        coll_log_emit(COLL_LOG_ERROR, ss, file, line, "%s", log_last_error);
    }
    errno = saved_errno;
}

const char *coll_log_last_error(void)
{
    return log_last_error;
}

void coll_log_clear_last_error(void)
{
    log_last_error[0] = '\0';
}
