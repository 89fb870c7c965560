/* SPDX-License-Identifier: MIT */
/*
 * Logging: levels x subsystems, filtered by COLL_DEBUG and COLL_DEBUG_SUBSYS, written to
 * COLL_DEBUG_FILE or stderr. The library never prints any other way. The level check is
 * inlined so a disabled log line costs one load and one compare.
 */
#ifndef COLL_CORE_LOG_H
#define COLL_CORE_LOG_H

#include <stdint.h>

typedef enum {
    COLL_LOG_NONE,
    COLL_LOG_ERROR,
    COLL_LOG_WARN,
    COLL_LOG_INFO,
    COLL_LOG_DEBUG,
    COLL_LOG_TRACE
} coll_log_level_t;

/* clang-format off */
#define COLL_SUBSYS_MAP(X) \
    X(INIT) X(BOOTSTRAP) X(TOPO) X(ENV) X(MEM) X(SHM) X(TCP) X(IB) X(UCX) X(P2P) X(ALGO) \
    X(COLL) X(TRAIN) X(ENGINE) X(TOOL)
/* clang-format on */

typedef enum {
#define COLL_SS_ENUM_(_n) COLL_SS_##_n,
    COLL_SUBSYS_MAP(COLL_SS_ENUM_)
#undef COLL_SS_ENUM_
        COLL_SS_COUNT
} coll_subsys_t;

/* Filled by coll_log_init(); read without locks on the hot path (set once, before use). */
extern int      coll_log_level_g;
extern uint32_t coll_log_subsys_mask_g;

static inline int coll_log_enabled(coll_log_level_t lvl, coll_subsys_t ss)
{
    return (int)lvl <= coll_log_level_g && (coll_log_subsys_mask_g & (1u << ss)) != 0;
}

void        coll_log_init(void);
void        coll_log_set_rank(int rank);
const char *coll_subsys_name(coll_subsys_t ss);
void        coll_log_emit(coll_log_level_t lvl, coll_subsys_t ss, const char *file, int line,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define coll_log(_lvl, _ss, ...)                                                                   \
    do {                                                                                           \
        if (coll_log_enabled((_lvl), COLL_SS_##_ss))                                               \
            coll_log_emit((_lvl), COLL_SS_##_ss, __FILE__, __LINE__, __VA_ARGS__);                 \
    } while (0)

/* Errors are also remembered per thread (coll_log_last_error), logged or not, so that a call
 * failing deep inside (a transport's setup) can still tell its caller why. */
void coll_log_error(coll_subsys_t ss, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *coll_log_last_error(void);
void        coll_log_clear_last_error(void);
#define coll_error(_ss, ...) coll_log_error(COLL_SS_##_ss, __FILE__, __LINE__, __VA_ARGS__)
#define coll_warn(_ss, ...)  coll_log(COLL_LOG_WARN, _ss, __VA_ARGS__)
#define coll_info(_ss, ...)  coll_log(COLL_LOG_INFO, _ss, __VA_ARGS__)
#define coll_debug(_ss, ...) coll_log(COLL_LOG_DEBUG, _ss, __VA_ARGS__)
#ifdef COLL_ENABLE_TRACE
#define coll_trace(_ss, ...) coll_log(COLL_LOG_TRACE, _ss, __VA_ARGS__)
#else
#define coll_trace(_ss, ...)                                                                       \
    do {                                                                                           \
    } while (0)
#endif

#endif
