/* SPDX-License-Identifier: MIT */
/*
 * The two error-propagation macros and the thread-local "last error" message. An error is
 * logged once where it is detected (coll_set_error / coll_error); callers only propagate it,
 * and with --enable-trace every hop prints "-> ERR at file:line" as a free backtrace.
 */
#ifndef COLL_CORE_ERROR_H
#define COLL_CORE_ERROR_H

#include "coll.h"

void coll_log_propagate(coll_result_t st, const char *file, int line);

/* Record a message for coll_last_error() in this thread and return st. */
coll_result_t coll_set_last_error(coll_result_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *coll_get_last_error(void);

#define COLL_CHECK_GOTO(_expr, _status, _label)                                                    \
    do {                                                                                           \
        (_status) = (_expr);                                                                       \
        if ((_status) < 0) {                                                                       \
            coll_log_propagate((_status), __FILE__, __LINE__);                                     \
            goto _label;                                                                           \
        }                                                                                          \
    } while (0)

#define COLL_CHECK(_expr)                                                                          \
    do {                                                                                           \
        coll_result_t _st = (_expr);                                                               \
        if (_st < 0) {                                                                             \
            coll_log_propagate(_st, __FILE__, __LINE__);                                           \
            return _st;                                                                            \
        }                                                                                          \
    } while (0)

#endif
