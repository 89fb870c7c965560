/* SPDX-License-Identifier: MIT */
#include "cuda/p2p_topo.h"
#include "topo/local.h"

int coll_p2p_worst_link(const coll_topo_t *topo, const coll_topo_place_t *places, int n,
                        coll_topo_link_t *worst_p, int *ra_p, int *rb_p)
{
    int gpu[64];

    *worst_p = COLL_TOPO_LINK_X;
    *ra_p = *rb_p = 0;
    if (topo == NULL || n < 1 || n > (int)(sizeof(gpu) / sizeof(gpu[0]))) {
        return 0;
    }
    for (int r = 0; r < n; r++) {
        gpu[r] = places[r].gpu == 0 ? -1 : coll_topo_gpu_by_busid(topo, places[r].gpu - 1);
        if (gpu[r] < 0) {
            return 0;
        }
    }
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            coll_topo_link_t l =
                gpu[a] == gpu[b] ? COLL_TOPO_LINK_X : coll_topo_gpu_link(topo, gpu[a], gpu[b]);
            if (l > *worst_p) {
                *worst_p = l;
                *ra_p    = a;
                *rb_p    = b;
            }
        }
    }
    return 1;
}

int coll_p2p_topo_allows(const coll_topo_t *topo, const coll_topo_place_t *places, int n, int level)
{
    coll_topo_link_t worst;
    int              a, b;

    if (!coll_p2p_worst_link(topo, places, n, &worst, &a, &b)) {
        return 1;
    }
    /* the choices start at NV, the links at X (the same device) */
    return (int)worst <= level + (int)COLL_TOPO_LINK_NV;
}
