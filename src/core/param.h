/* SPDX-License-Identifier: MIT */
/*
 * Configuration: typed access to the rows of params.def. Values are resolved once (config
 * struct > environment > config file > default) on first use; getters are then lock-free.
 * coll_env_get() is the only way any file reads a foreign variable (RANK, SLURM_PROCID...).
 */
#ifndef COLL_CORE_PARAM_H
#define COLL_CORE_PARAM_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

typedef enum {
#define COLL_PARAM(_name, ...) COLL_P_##_name,
#include "params.def"
#undef COLL_PARAM
    COLL_P_COUNT
} coll_param_id_t;

/* Idempotent and thread-safe; every getter calls it. */
coll_result_t coll_params_load(void);

int64_t     coll_param_int(coll_param_id_t id);
size_t      coll_param_size(coll_param_id_t id);
int         coll_param_bool(coll_param_id_t id);
double      coll_param_time(coll_param_id_t id);   /* seconds */
int         coll_param_enum(coll_param_id_t id);   /* index into CHOICES */
const char *coll_param_str(coll_param_id_t id);    /* STRING, LIST, ENUM as text */
int         coll_param_is_set(coll_param_id_t id); /* not from the default */

/* "COLL_" NAME. */
const char *coll_param_name(coll_param_id_t id);
/* A digest of id's resolved value, not of its spelling: "1k" and "1024" give the same one
 * (strings and lists as written). */
uint64_t coll_param_digest(coll_param_id_t id);

/* Parsers shared with tools and tests: return 0 on success, -1 if text is malformed. */
int coll_parse_int(const char *text, int64_t *out); /* decimal, optional sign */
int coll_parse_size(const char *text, size_t *out);
int coll_parse_time(const char *text, double *seconds_out);
int coll_parse_bool(const char *text, int *out);

/* Reads a variable that is not a COLL_* row (launcher variables). NULL if unset. */
const char *coll_env_get(const char *name);

/* For tests: forget the resolved values so the next getter reads the environment again. */
void coll_params_reset_for_testing(void);

#endif
