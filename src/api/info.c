/* SPDX-License-Identifier: MIT */
/* Introspection for tools: the transports and algorithms built into the library. */
#include "algo.h"
#include "error.h"
#include "transport.h"

#include <string.h>

COLL_API int coll_transport_count(void)
{
    return coll_tp_registry_count();
}

COLL_API coll_result_t coll_transport_get(int i, coll_transport_info_t *info_p)
{
    const coll_transport_ops_t *t   = coll_tp_registry_get(i);
    const char                 *why = "";
    if (t == NULL || info_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_transport_get: index %d is not "
                                   "in 0..%d or info_p is NULL",
                                   i, coll_tp_registry_count() - 1);
    }
    info_p->name    = t->name;
    info_p->desc    = t->desc;
    info_p->usable  = t->usable == NULL ? 1 : t->usable(&why);
    info_p->why_not = info_p->usable ? "" : why;
    return COLL_OK;
}

COLL_API int coll_algo_count(void)
{
    return coll_algo_registry_count();
}

COLL_API coll_result_t coll_algo_get(int i, coll_algo_info_t *info_p)
{
    static char        colls[64][256];
    const coll_algo_t *a = coll_algo_registry_get(i);
    if (a == NULL || info_p == NULL || i >= 64) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_algo_get: index %d is not in "
                                   "0..%d or info_p is NULL",
                                   i, coll_algo_registry_count() - 1);
    }
    colls[i][0] = '\0';
    for (int c = 0; c < COLL_OP_COUNT; c++) {
        if (a->colls & (1u << c)) {
            if (colls[i][0] != '\0') {
                strcat(colls[i], ",");
            }
            strcat(colls[i], coll_op_name((coll_op_t)c));
        }
    }
    info_p->name  = a->name;
    info_p->desc  = a->desc;
    info_p->colls = colls[i];
    return COLL_OK;
}
