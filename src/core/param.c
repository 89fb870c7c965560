/* SPDX-License-Identifier: MIT */
/*
 * Configuration: expands params.def into a table and resolves every row once, environment >
 * config file > default, validating each value by type. The only file that calls getenv().
 * Messages about the configuration are queued while resolving and logged under ENV once
 * logging (which itself reads COLL_DEBUG*) is set up. Per-communicator overrides live elsewhere.
 */
#include "param.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

extern char **environ;

typedef enum {
    PARAM_T_INT,
    PARAM_T_SIZE,
    PARAM_T_BOOL,
    PARAM_T_TIME,
    PARAM_T_ENUM,
    PARAM_T_LIST,
    PARAM_T_STRING
} param_type_t;

typedef enum { PARAM_SRC_DEFAULT, PARAM_SRC_ENV, PARAM_SRC_FILE } param_src_t;

typedef struct {
    const char   *name; /* "COLL_" NAME */
    param_type_t  type;
    const char   *deflt; /* default as text; must parse as type (checked by test_params) */
    coll_subsys_t subsys;
    const char   *choices; /* "a|b|c" for ENUM, else NULL */
    const char   *help;
} param_row_t;

typedef struct {
    char       *text; /* effective value as given (owned); NULL means the default text */
    param_src_t src;
    union {
        int64_t i;    /* INT, BOOL, ENUM (index) */
        size_t  size; /* SIZE */
        double  time; /* TIME, seconds */
    } v;
} param_value_t;

typedef struct {
    coll_log_level_t lvl;
    char            *text;
} param_msg_t;

static const param_row_t param_rows[COLL_P_COUNT] = {
#define COLL_PARAM(_name, _type, _deflt, _ss, _choices, _help)                                     \
    [COLL_P_##_name] = {"COLL_" #_name, PARAM_T_##_type, _deflt, COLL_SS_##_ss, _choices, _help},
#include "params.def"
#undef COLL_PARAM
};

static const char *const param_type_names[] = {"int",  "size", "bool",  "time",
                                               "enum", "list", "string"};

static const char *const param_expected[] = {
    [PARAM_T_INT]  = "a decimal integer from -2147483648 to 2147483647",
    [PARAM_T_SIZE] = "a size such as 4096, 64k, 1m or 2g",
    [PARAM_T_BOOL] = "y/n, yes/no, 1/0, true/false or on/off",
    [PARAM_T_TIME] = "a time such as 30, 1.5s, 500ms, 20us, 2m or 1h",
};

#define PARAM_HIDDEN "(hidden)"

/* State below is written under param_lock; getters read it lock-free once param_ready is 1. */
static pthread_mutex_t param_lock = PTHREAD_MUTEX_INITIALIZER;
static int             param_resolved; /* values computed (under lock) */
static int             param_ready;    /* atomic: resolved and messages handed to the log */
static __thread int    param_in_load;  /* this thread is inside coll_params_load() */
static param_value_t   param_values[COLL_P_COUNT];
static char           *param_conf_source; /* "config file PATH" when a file was read */
static param_msg_t    *param_msgs;        /* queued until logging is set up */
static size_t          param_nmsgs;
static size_t          param_msgs_cap;

/* ---- parsers ---- */

int coll_parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"y", "yes", "1", "true", "on"};
    static const char *const no[]  = {"n", "no", "0", "false", "off"};

    if (text == NULL || out == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Decimal digits, then k/m/g/t (binary multiples) optionally followed by b or ib, or just b. */
int coll_parse_size(const char *text, size_t *out)
{
    unsigned long long v;
    unsigned           shift = 0;
    char              *end;

    if (text == NULL || out == NULL || isdigit((unsigned char)text[0]) == 0) {
        return -1;
    }
    errno = 0;
    v     = strtoull(text, &end, 10);
    if (errno == ERANGE) {
        return -1;
    }
    switch (tolower((unsigned char)*end)) {
    case 'k':
        shift = 10;
        break;
    case 'm':
        shift = 20;
        break;
    case 'g':
        shift = 30;
        break;
    case 't':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift != 0) {
        end++;
        if (tolower((unsigned char)*end) == 'i' && tolower((unsigned char)end[1]) == 'b') {
            end += 2;
        } else if (tolower((unsigned char)*end) == 'b') {
            end++;
        }
    } else if (tolower((unsigned char)*end) == 'b') {
        end++;
    }
    if (*end != '\0' || v > (unsigned long long)(SIZE_MAX >> shift)) {
        return -1;
    }
    *out = (size_t)v << shift;
    return 0;
}

/* Non-negative decimal number (no exponent) and a unit: s (default), ms, us, ns, m, h. */
int coll_parse_time(const char *text, double *seconds_out)
{
    static const struct {
        const char *unit;
        double      scale;
    } units[]     = {{"", 1.0},    {"s", 1.0},  {"ms", 1e-3},  {"us", 1e-6},
                     {"ns", 1e-9}, {"m", 60.0}, {"min", 60.0}, {"h", 3600.0}};
    double      v = 0.0, frac = 0.1;
    const char *p      = text;
    int         digits = 0;

    if (text == NULL || seconds_out == NULL) {
        return -1;
    }
    /* Parsed by hand: strtod() would accept hex, inf and nan and depends on the locale. */
    for (; isdigit((unsigned char)*p); p++, digits++) {
        v = v * 10.0 + (double)(*p - '0');
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, digits++) {
            v += (double)(*p - '0') * frac;
            frac *= 0.1;
        }
    }
    if (digits == 0) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(p, units[i].unit) == 0) {
            *seconds_out = v * units[i].scale;
            return 0;
        }
    }
    return -1;
}

int coll_parse_int(const char *text, int64_t *out)
{
    const char *p = (text[0] == '-' || text[0] == '+') ? text + 1 : text;
    char       *end;
    long long   v;

    if (isdigit((unsigned char)*p) == 0) {
        return -1;
    }
    errno = 0;
    v     = strtoll(text, &end, 10);
    if (errno == ERANGE || *end != '\0') {
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* Index of text (any case) in "a|b|c", or -1. */
static int param_parse_enum(const char *choices, const char *text)
{
    size_t len = strlen(text);
    int    idx = 0;

    for (const char *c = choices; c != NULL && *c != '\0'; idx++) {
        size_t n = strcspn(c, "|");
        if (n == len && strncasecmp(c, text, n) == 0) {
            return idx;
        }
        c += n;
        c += (*c == '|') ? 1 : 0;
    }
    return -1;
}

/* Parse text as row's type into *val. 0 on success, -1 when malformed. */
static int param_parse(const param_row_t *row, const char *text, param_value_t *val)
{
    int b;

    switch (row->type) {
    case PARAM_T_INT:
        return coll_parse_int(text, &val->v.i);
    case PARAM_T_SIZE:
        return coll_parse_size(text, &val->v.size);
    case PARAM_T_TIME:
        return coll_parse_time(text, &val->v.time);
    case PARAM_T_BOOL:
        if (coll_parse_bool(text, &b) != 0) {
            return -1;
        }
        val->v.i = b;
        return 0;
    case PARAM_T_ENUM:
        val->v.i = param_parse_enum(row->choices, text);
        return (val->v.i < 0) ? -1 : 0;
    case PARAM_T_LIST:
    case PARAM_T_STRING:
        return 0;
    }
    return -1;
}

/* Values that parse but that the library cannot use: an INT must fit an int (its users cast
 * it), and a deadline of 0 would fail every wait at once. NULL when val is usable, else what
 * was expected. */
static const char *param_unusable(int id, const param_value_t *val)
{
    const param_row_t *row = &param_rows[id];

    if (row->type == PARAM_T_INT && (val->v.i < INT_MIN || val->v.i > INT_MAX)) {
        return param_expected[PARAM_T_INT];
    }
    if ((id == COLL_P_TIMEOUT || id == COLL_P_BOOTSTRAP_TIMEOUT) && !(val->v.time > 0.0)) {
        return "a time above 0 (there is no 'no deadline')";
    }
    return NULL;
}

/* ---- messages queued during resolution ---- */

static void param_note(coll_log_level_t lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void param_note(coll_log_level_t lvl, const char *fmt, ...)
{
    va_list ap;
    char   *text;
    int     n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if (param_nmsgs == param_msgs_cap) {
        size_t       cap  = (param_msgs_cap == 0) ? 16 : 2 * param_msgs_cap;
        param_msg_t *msgs = realloc(param_msgs, cap * sizeof(*msgs));
        if (msgs == NULL) {
            return; /* out of memory: the note is dropped, the value still resolves */
        }
        param_msgs     = msgs;
        param_msgs_cap = cap;
    }
    /* Plain malloc: coll_malloc() logs, and logging is not set up while this runs. */
    text = malloc((size_t)n + 1);
    if (text == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    param_msgs[param_nmsgs].lvl  = lvl;
    param_msgs[param_nmsgs].text = text;
    param_nmsgs++;
}

/* ---- resolution ---- */

/* Row whose name (with the COLL_ prefix) is the n bytes at name, or -1. */
static int param_lookup(const char *name, size_t n, int ignore_case)
{
    for (int i = 0; i < COLL_P_COUNT; i++) {
        const char *r = param_rows[i].name;
        if (strlen(r) == n && (ignore_case ? strncasecmp(r, name, n) : strncmp(r, name, n)) == 0) {
            return i;
        }
    }
    return -1;
}

static char *param_trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s)) {
        s++;
    }
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) {
        *--end = '\0';
    }
    return s;
}

/* Cuts a trailing comment off a value: a # after white space, outside quotes. */
static void param_cut_comment(char *value)
{
    char quote = 0;
    for (char *p = value; *p != '\0'; p++) {
        if (quote != 0) {
            quote = *p == quote ? 0 : quote;
        } else if (*p == '"' || *p == '\'') {
            quote = *p;
        } else if (*p == '#' && (p == value || *(p - 1) == ' ' || *(p - 1) == '\t')) {
            *p = '\0';
            return;
        }
    }
}

/* One line of a config file: NAME=VALUE (NAME with or without COLL_) with an optional trailing
 * " # comment", a # comment, or blank. */
static void param_conf_line(const char *path, int lineno, char *line, char *file_vals[])
{
    char  *eq, *name, *value;
    char   full[128];
    size_t vlen;
    int    id;

    line = param_trim(line);
    if (line[0] == '\0' || line[0] == '#') {
        return;
    }
    eq = strchr(line, '=');
    if (eq == NULL) {
        param_note(COLL_LOG_WARN, "%s:%d: expected NAME=VALUE, ignoring \"%s\"", path, lineno,
                   line);
        return;
    }
    *eq = '\0';
    param_cut_comment(eq + 1);
    name  = param_trim(line);
    value = param_trim(eq + 1);
    vlen  = strlen(value);
    if (vlen >= 2 && (value[0] == '"' || value[0] == '\'') && value[vlen - 1] == value[0]) {
        value[vlen - 1] = '\0'; /* NAME="a b" as in a shell file */
        value++;
    }
    snprintf(full, sizeof(full), "%s%s", strncasecmp(name, "COLL_", 5) == 0 ? "" : "COLL_", name);
    id = param_lookup(full, strlen(full), 1);
    if (id < 0) {
        param_note(COLL_LOG_WARN, "%s:%d: unknown parameter %s; see collinfo -p", path, lineno,
                   name);
        return;
    }
    free(file_vals[id]); /* a later line wins */
    file_vals[id] = strdup(value);
}

/* COLL_CONF_FILE if set (it must open), else ~/.coll.conf, else /etc/coll.conf if present. */
static void param_read_conf(char *file_vals[])
{
    const char *path = getenv("COLL_CONF_FILE");
    const char *home = getenv("HOME");
    char        home_path[PATH_MAX];
    char       *line   = NULL;
    size_t      cap    = 0;
    int         must   = (path != NULL && path[0] != '\0');
    int         lineno = 0;
    FILE       *f;

    if (must == 0) {
        path = NULL;
        if (home != NULL && home[0] != '\0' &&
            snprintf(home_path, sizeof(home_path), "%s/.coll.conf", home) <
                (int)sizeof(home_path) &&
            access(home_path, F_OK) == 0) {
            path = home_path;
        } else if (access("/etc/coll.conf", F_OK) == 0) {
            path = "/etc/coll.conf";
        }
    }
    if (path == NULL) {
        return;
    }
    f = fopen(path, "re");
    if (f == NULL) {
        param_note(COLL_LOG_WARN, "cannot open config file %s: %s", path, strerror(errno));
        return;
    }
    size_t slen       = strlen(path) + sizeof("config file ");
    param_conf_source = malloc(slen);
    if (param_conf_source != NULL) {
        snprintf(param_conf_source, slen, "config file %s", path);
    }
    while (getline(&line, &cap, f) >= 0) {
        param_conf_line(path, ++lineno, line, file_vals);
    }
    free(line);
    fclose(f);
}

/* Job secrets must not reach log files or collinfo output that users paste into reports. */
static int param_is_secret(const param_row_t *row)
{
    return strstr(row->name, "SECRET") != NULL;
}

/* Pick the value of one row from env, file value (may be NULL) or default, and validate it. */
static void param_resolve_one(int id, const char *file_val)
{
    const param_row_t *row  = &param_rows[id];
    param_value_t     *val  = &param_values[id];
    const char        *env  = getenv(row->name);
    const char        *text = row->deflt;
    const char        *from;

    val->src = PARAM_SRC_DEFAULT;
    if (env != NULL) {
        text     = env;
        val->src = PARAM_SRC_ENV;
    } else if (file_val != NULL) {
        text     = file_val;
        val->src = PARAM_SRC_FILE;
    }
    if (val->src != PARAM_SRC_DEFAULT) {
        from                 = (val->src == PARAM_SRC_ENV) ? "environment" : param_conf_source;
        from                 = (from != NULL) ? from : "config file";
        const char *unusable = NULL;
        if (param_parse(row, text, val) != 0 || (unusable = param_unusable(id, val)) != NULL) {
            param_note(COLL_LOG_WARN,
                       "invalid value \"%s\" for %s from %s: expected %s%s; "
                       "using the default %s",
                       param_is_secret(row) ? PARAM_HIDDEN : text, row->name, from,
                       unusable != NULL            ? unusable
                       : row->type == PARAM_T_ENUM ? "one of "
                                                   : param_expected[row->type],
                       row->type == PARAM_T_ENUM && unusable == NULL ? row->choices : "",
                       row->deflt);
            val->src = PARAM_SRC_DEFAULT;
        } else {
            param_note(COLL_LOG_INFO, "%s set by %s to %s", row->name, from,
                       param_is_secret(row) ? PARAM_HIDDEN : text);
            val->text = strdup(text);
            if (val->text != NULL) {
                return;
            }
            val->src = PARAM_SRC_DEFAULT; /* out of memory: keep the default */
        }
    }
    (void)param_parse(row, row->deflt, val);
}

/* One warning per COLL_* variable in the environment that no row knows (UCX-style). */
static void param_check_unknown_env(void)
{
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        size_t      n  = (eq != NULL) ? (size_t)(eq - *e) : strlen(*e);

        /* COLL_TEST_* belongs to the test harness, not to the library. */
        if (strncmp(*e, "COLL_", 5) != 0 || strncmp(*e, "COLL_TEST_", 10) == 0) {
            continue;
        }
        if (param_lookup(*e, n, 0) < 0) {
            param_note(COLL_LOG_WARN, "unknown variable %.*s (typo?); see collinfo -p", (int)n, *e);
        }
    }
}

static void param_resolve(void)
{
    char *file_vals[COLL_P_COUNT] = {NULL};

    param_read_conf(file_vals);
    for (int id = 0; id < COLL_P_COUNT; id++) {
        param_resolve_one(id, file_vals[id]);
        free(file_vals[id]);
    }
    param_check_unknown_env();
}

coll_result_t coll_params_load(void)
{
    param_msg_t *msgs;
    size_t       nmsgs;

    if (__atomic_load_n(&param_ready, __ATOMIC_ACQUIRE) != 0 || param_in_load != 0) {
        return COLL_OK; /* in_load: coll_log_init() reads params; values are resolved by then */
    }
    param_in_load = 1;
    pthread_mutex_lock(&param_lock);
    if (param_resolved == 0) {
        param_resolve();
        param_resolved = 1;
    }
    pthread_mutex_unlock(&param_lock);
    coll_log_init(); /* reads COLL_DEBUG* through the getters above, which return at once */
    param_in_load = 0;

    /* Hand the queued lines to the log exactly once, whichever thread gets here first. */
    pthread_mutex_lock(&param_lock);
    msgs        = param_msgs;
    nmsgs       = param_nmsgs;
    param_msgs  = NULL;
    param_nmsgs = param_msgs_cap = 0;
    __atomic_store_n(&param_ready, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&param_lock);
    for (size_t i = 0; i < nmsgs; i++) {
        /* Direct call: warnings pass a COLL_DEBUG_SUBSYS mask that excludes ENV (log.c). */
        if ((int)msgs[i].lvl <= coll_log_level_g) {
            coll_log_emit(msgs[i].lvl, COLL_SS_ENV, __FILE__, __LINE__, "%s", msgs[i].text);
        }
        free(msgs[i].text);
    }
    free(msgs);
    return COLL_OK;
}

void coll_params_reset_for_testing(void)
{
    pthread_mutex_lock(&param_lock);
    for (int id = 0; id < COLL_P_COUNT; id++) {
        free(param_values[id].text);
        memset(&param_values[id], 0, sizeof(param_values[id]));
    }
    free(param_conf_source);
    param_conf_source = NULL;
    for (size_t i = 0; i < param_nmsgs; i++) {
        free(param_msgs[i].text);
    }
    free(param_msgs);
    param_msgs  = NULL;
    param_nmsgs = param_msgs_cap = 0;
    param_resolved               = 0;
    __atomic_store_n(&param_ready, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&param_lock);
}

/* ---- getters ---- */

static const param_value_t *param_get(coll_param_id_t id)
{
    (void)coll_params_load();
    if ((int)id < 0 || id >= COLL_P_COUNT) {
        return NULL;
    }
    return &param_values[id];
}

int64_t coll_param_int(coll_param_id_t id)
{
    const param_value_t *val = param_get(id);
    if (val == NULL) {
        return 0;
    }
    switch (param_rows[id].type) {
    case PARAM_T_SIZE:
        return (int64_t)val->v.size;
    case PARAM_T_TIME:
        return (int64_t)val->v.time;
    case PARAM_T_LIST:
    case PARAM_T_STRING:
        return 0;
    default:
        return val->v.i;
    }
}

size_t coll_param_size(coll_param_id_t id)
{
    const param_value_t *val = param_get(id);
    if (val == NULL) {
        return 0;
    }
    return (param_rows[id].type == PARAM_T_SIZE) ? val->v.size : (size_t)coll_param_int(id);
}

int coll_param_bool(coll_param_id_t id)
{
    return coll_param_int(id) != 0;
}

double coll_param_time(coll_param_id_t id)
{
    const param_value_t *val = param_get(id);
    if (val == NULL) {
        return 0.0;
    }
    return (param_rows[id].type == PARAM_T_TIME) ? val->v.time : (double)coll_param_int(id);
}

int coll_param_enum(coll_param_id_t id)
{
    return (int)coll_param_int(id);
}

const char *coll_param_str(coll_param_id_t id)
{
    const param_value_t *val = param_get(id);
    if (val == NULL) {
        return "";
    }
    return (val->text != NULL) ? val->text : param_rows[id].deflt;
}

int coll_param_is_set(coll_param_id_t id)
{
    const param_value_t *val = param_get(id);
    return val != NULL && val->src != PARAM_SRC_DEFAULT;
}

const char *coll_param_name(coll_param_id_t id)
{
    return (int)id >= 0 && id < COLL_P_COUNT ? param_rows[id].name : "COLL_?";
}

uint64_t coll_param_digest(coll_param_id_t id)
{
    const param_value_t *val = param_get(id);
    uint64_t             x   = 0, seed;
    if (val == NULL) {
        return 0;
    }
    /* seeded by the name, not the row's number, which differs between builds */
    seed = coll_hash_bytes(param_rows[id].name, strlen(param_rows[id].name), 0);
    switch (param_rows[id].type) {
    case PARAM_T_SIZE:
        x = (uint64_t)val->v.size;
        break;
    case PARAM_T_TIME:
        memcpy(&x, &val->v.time, sizeof(x));
        break;
    case PARAM_T_LIST:
    case PARAM_T_STRING: {
        const char *t = coll_param_str(id);
        return coll_hash_bytes(t, strlen(t), seed);
    }
    default:
        x = (uint64_t)val->v.i;
        break;
    }
    return coll_hash64(x ^ seed);
}

const char *coll_env_get(const char *name)
{
    return (name != NULL) ? getenv(name) : NULL;
}

/* ---- introspection (public) ---- */

COLL_API int coll_param_count(void)
{
    (void)coll_params_load();
    return COLL_P_COUNT;
}

COLL_API coll_result_t coll_param_get(int i, coll_param_info_t *info_p)
{
    const param_value_t *val;

    if (i < 0 || i >= COLL_P_COUNT || info_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_param_get: index %d not in [0, %d) or info_p NULL", i,
                                   (int)COLL_P_COUNT);
    }
    val           = param_get((coll_param_id_t)i);
    info_p->name  = param_rows[i].name;
    info_p->type  = param_type_names[param_rows[i].type];
    info_p->value = coll_param_str((coll_param_id_t)i);
    if (val->src != PARAM_SRC_DEFAULT && param_is_secret(&param_rows[i])) {
        info_p->value = PARAM_HIDDEN;
    }
    info_p->deflt  = param_rows[i].deflt;
    info_p->subsys = coll_subsys_name(param_rows[i].subsys);
    info_p->help   = param_rows[i].help;
    switch (val->src) {
    case PARAM_SRC_ENV:
        info_p->source = "environment";
        break;
    case PARAM_SRC_FILE:
        info_p->source = (param_conf_source != NULL) ? param_conf_source : "config file";
        break;
    default:
        info_p->source = "default";
        break;
    }
    return COLL_OK;
}
