/* SPDX-License-Identifier: MIT */
/*
 * The transports built into this library, in order of preference. Optional ones are listed
 * under the HAVE_* macros configure defines. Registration checks the ABI and required slots.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "transport.h"
#include "log.h"

#include <string.h>

extern const coll_transport_ops_t coll_tp_shm_ops;
extern const coll_transport_ops_t coll_tp_tcp_ops;
#ifdef HAVE_UCX
extern const coll_transport_ops_t coll_tp_ucx_ops;
#endif
#ifdef HAVE_IBVERBS
extern const coll_transport_ops_t coll_tp_ib_ops;
#endif

static const coll_transport_ops_t *const registry_table[] = {
    &coll_tp_shm_ops,
    &coll_tp_tcp_ops,
#ifdef HAVE_IBVERBS
    &coll_tp_ib_ops,
#endif
#ifdef HAVE_UCX
    &coll_tp_ucx_ops,
#endif
};

static int registry_valid(const coll_transport_ops_t *t)
{
    if (t->abi != COLL_TRANSPORT_ABI) {
        coll_warn(INIT, "transport %s has ABI %u, expected %u: ignored", t->name, t->abi,
                  COLL_TRANSPORT_ABI);
        return 0;
    }
    if (t->init == NULL || t->listen == NULL || t->connect_all == NULL || t->isend == NULL ||
        t->irecv == NULL || t->progress == NULL || t->reachable == NULL || t->finalize == NULL) {
        coll_warn(INIT, "transport %s lacks a required function: ignored", t->name);
        return 0;
    }
    return 1;
}

int coll_tp_registry_count(void)
{
    return (int)(sizeof(registry_table) / sizeof(registry_table[0]));
}

const coll_transport_ops_t *coll_tp_registry_get(int i)
{
    if (i < 0 || i >= coll_tp_registry_count() || !registry_valid(registry_table[i])) {
        return NULL;
    }
    return registry_table[i];
}

const coll_transport_ops_t *coll_tp_registry_find(const char *name)
{
    for (int i = 0; i < coll_tp_registry_count(); i++) {
        const coll_transport_ops_t *t = coll_tp_registry_get(i);
        if (t != NULL && strcmp(t->name, name) == 0) {
            return t;
        }
    }
    return NULL;
}
