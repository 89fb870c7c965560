/* SPDX-License-Identifier: MIT */
/*
 * Result-code strings, the per-thread "last error" message, the TRACE hop printed by
 * COLL_CHECK when an error propagates, and names and sizes of dtypes and ops. Nothing here
 * allocates or can fail; it does not decide which errors are logged (the detector does).
 */
#include "error.h"
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERROR_MSG_MAX 512

static __thread char error_last[ERROR_MSG_MAX];

COLL_API const char *coll_strerror(coll_result_t result)
{
    switch (result) {
#define ERROR_STR_(_name, _val, _str)                                                              \
    case COLL_##_name:                                                                             \
        return _str;
        COLL_RESULT_MAP(ERROR_STR_)
#undef ERROR_STR_
    }
    return "unknown error";
}

coll_result_t coll_set_last_error(coll_result_t st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(error_last, sizeof(error_last), fmt, ap);
    va_end(ap);
    return st;
}

const char *coll_get_last_error(void)
{
    return error_last;
}

COLL_API const char *coll_last_error(void)
{
    return error_last;
}

#ifdef COLL_ENABLE_TRACE
/* "ERR_TIMEOUT" for COLL_ERR_TIMEOUT: the name a reader greps for in the source. */
static const char *error_code_name(coll_result_t st)
{
    switch (st) {
#define ERROR_NAME_(_name, _val, _str)                                                             \
    case COLL_##_name:                                                                             \
        return #_name;
        COLL_RESULT_MAP(ERROR_NAME_)
#undef ERROR_NAME_
    }
    return "ERR_UNKNOWN";
}

void coll_log_propagate(coll_result_t st, const char *file, int line)
{
    const char *base = strrchr(file, '/');

    if (coll_log_enabled(COLL_LOG_TRACE, COLL_SS_COLL)) {
        base = (base != NULL) ? base + 1 : file;
        coll_log_emit(COLL_LOG_TRACE, COLL_SS_COLL, file, line, "-> %s at %s:%d",
                      error_code_name(st), base, line);
    }
}
#else
/* Without --enable-trace the hop costs one call on error paths only, and does nothing. */
void coll_log_propagate(coll_result_t st, const char *file, int line)
{
    (void)st;
    (void)file;
    (void)line;
}
#endif

COLL_API coll_result_t coll_get_version(int *version_p)
{
    if (version_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_get_version: version_p is NULL");
    }
    *version_p = COLL_VERSION_CODE;
    return COLL_OK;
}

COLL_API size_t coll_dtype_size(coll_dtype_t dtype)
{
    switch (dtype) {
    case COLL_INT8:
    case COLL_UINT8:
        return 1;
    case COLL_FLOAT16:
    case COLL_BFLOAT16:
        return 2;
    case COLL_INT32:
    case COLL_UINT32:
    case COLL_FLOAT32:
        return 4;
    case COLL_INT64:
    case COLL_UINT64:
    case COLL_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

COLL_API const char *coll_dtype_name(coll_dtype_t dtype)
{
    /* Spelled as nccl-tests prints them, so benchmark output compares line by line. */
    static const char *const names[COLL_DTYPE_COUNT] = {
        [COLL_INT8] = "int8",        [COLL_UINT8] = "uint8",   [COLL_INT32] = "int32",
        [COLL_UINT32] = "uint32",    [COLL_INT64] = "int64",   [COLL_UINT64] = "uint64",
        [COLL_FLOAT16] = "half",     [COLL_FLOAT32] = "float", [COLL_FLOAT64] = "double",
        [COLL_BFLOAT16] = "bfloat16"};

    if ((int)dtype < 0 || dtype >= COLL_DTYPE_COUNT) {
        return "invalid";
    }
    return names[dtype];
}

COLL_API const char *coll_redop_name(coll_redop_t op)
{
    static const char *const names[COLL_REDOP_COUNT] = {[COLL_SUM]  = "sum",
                                                        [COLL_PROD] = "prod",
                                                        [COLL_MAX]  = "max",
                                                        [COLL_MIN]  = "min",
                                                        [COLL_AVG]  = "avg"};

    if ((int)op < 0 || op >= COLL_REDOP_COUNT) {
        return "invalid";
    }
    return names[op];
}
