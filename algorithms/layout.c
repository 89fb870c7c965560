/* SPDX-License-Identifier: MIT */
/*
 * Building a communicator's layout from per-rank host keys: host numbering in order of first
 * appearance, local ranks, the per-host rank lists and the regularity flags the algorithms
 * test. Pure computation; no I/O.
 */
#include "layout.h"

#include <string.h>
#include "error.h"
#include "log.h"
#include "util.h"

void coll_layout_fini(coll_layout_t *l)
{
    coll_free(l->host_of);
    coll_free(l->local_rank);
    coll_free(l->host_start);
    coll_free(l->host_ranks);
    coll_free(l->ring_order);
    coll_free(l->ring_pos);
    memset(l, 0, sizeof(*l));
}

static coll_result_t layout_alloc(coll_layout_t *l, int nranks)
{
    memset(l, 0, sizeof(*l));
    l->nranks     = nranks;
    l->host_of    = coll_calloc((size_t)nranks, sizeof(int), "layout");
    l->local_rank = coll_calloc((size_t)nranks, sizeof(int), "layout");
    l->host_start = coll_calloc((size_t)nranks + 1, sizeof(int), "layout");
    l->host_ranks = coll_calloc((size_t)nranks, sizeof(int), "layout");
    l->ring_order = coll_calloc((size_t)nranks, sizeof(int), "layout");
    l->ring_pos   = coll_calloc((size_t)nranks, sizeof(int), "layout");
    if (l->host_of == NULL || l->local_rank == NULL || l->host_start == NULL ||
        l->host_ranks == NULL || l->ring_order == NULL || l->ring_pos == NULL) {
        coll_layout_fini(l);
        return COLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nranks; r++) {
        l->ring_order[r] = l->ring_pos[r] = r;
    }
    return COLL_OK;
}

/* contiguous: every host's ranks are consecutive and listed in rank order. */
static void layout_flags(coll_layout_t *l)
{
    l->contiguous = l->local_size > 0;
    for (int r = 0; r < l->nranks && l->contiguous; r++) {
        l->contiguous =
            (l->host_of[r] == r / l->local_size && l->local_rank[r] == r % l->local_size);
    }
}

/* From host_of and nhosts: local ranks, the per-host rank lists and the regularity flags. */
static void layout_fill(coll_layout_t *l)
{
    int nranks = l->nranks;
    /* counts, then prefix sums, then fill in rank order */
    int *count = l->host_ranks; /* scratch until the last loop overwrites it */
    for (int h = 0; h < l->nhosts; h++) {
        count[h] = 0;
    }
    for (int r = 0; r < nranks; r++) {
        l->local_rank[r] = count[l->host_of[r]]++;
    }
    l->host_start[0] = 0;
    for (int h = 0; h < l->nhosts; h++) {
        l->host_start[h + 1] = l->host_start[h] + count[h];
    }
    for (int r = 0; r < nranks; r++) {
        l->host_ranks[l->host_start[l->host_of[r]] + l->local_rank[r]] = r;
    }
    l->local_size = (l->nhosts > 0 && nranks % l->nhosts == 0) ? nranks / l->nhosts : 0;
    for (int h = 0; h < l->nhosts && l->local_size > 0; h++) {
        if (l->host_start[h + 1] - l->host_start[h] != l->local_size) {
            l->local_size = 0;
        }
    }
    layout_flags(l);
}

coll_result_t coll_layout_init(coll_layout_t *l, int nranks, const uint64_t *host_key)
{
    COLL_CHECK(layout_alloc(l, nranks));
    /* hosts in order of first appearance (quadratic in the host count: fine up to thousands) */
    for (int r = 0; r < nranks; r++) {
        int h = 0;
        while (h < l->nhosts && host_key[l->host_ranks[l->host_start[h]]] != host_key[r]) {
            h++;
        }
        if (h == l->nhosts) {
            l->host_start[h] = r; /* temporarily: the first rank of host h */
            l->host_ranks[r] = r;
            l->nhosts++;
        }
        l->host_of[r] = h;
    }
    layout_fill(l);
    return COLL_OK;
}

/* Is order[0..n) a permutation of 0..n-1? mark: n scratch ints. */
static int layout_is_perm(const int *order, int n, int *mark, const char *what)
{
    for (int i = 0; i < n; i++) {
        mark[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n || mark[order[i]] >= 0) {
            coll_error(ALGO, "%s order: position %d holds rank %d, not a permutation of %d ranks",
                       what, i, order[i], n);
            return 0;
        }
        mark[order[i]] = i;
    }
    return 1;
}

coll_result_t coll_layout_set_ring(coll_layout_t *l, const int *order)
{
    if (!layout_is_perm(order, l->nranks, l->ring_pos, "ring")) { /* ring_pos as scratch */
        for (int p = 0; p < l->nranks; p++) {
            l->ring_pos[l->ring_order[p]] = p;
        }
        return COLL_ERR_INVALID_ARG;
    }
    memcpy(l->ring_order, order, (size_t)l->nranks * sizeof(int));
    return COLL_OK;
}

coll_result_t coll_layout_set_local(coll_layout_t *l, const int *order)
{
    int *seen = coll_calloc((size_t)l->nranks + 1, sizeof(int), "layout");

    if (seen == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    if (!layout_is_perm(order, l->nranks, seen, "local")) {
        coll_free(seen);
        return COLL_ERR_INVALID_ARG;
    }
    /* seen[h]: the ranks of host h met so far along the order */
    memset(seen, 0, (size_t)l->nhosts * sizeof(int));
    for (int i = 0; i < l->nranks; i++) {
        int r = order[i], h = l->host_of[r];

        l->local_rank[r]                                   = seen[h]++;
        l->host_ranks[l->host_start[h] + l->local_rank[r]] = r;
    }
    coll_free(seen);
    layout_flags(l);
    return COLL_OK;
}

/* Direct rather than through host keys: linear in the rank count, so simulated communicators
 * of tens of thousands of ranks on thousands of hosts build at once. */
coll_result_t coll_layout_init_blocks(coll_layout_t *l, int nranks, int nhosts)
{
    int per = (nhosts > 0 && nranks >= nhosts) ? nranks / nhosts : nranks;

    COLL_CHECK(layout_alloc(l, nranks));
    for (int r = 0; r < nranks; r++) {
        int h         = (per > 0) ? r / per : 0;
        l->host_of[r] = (h < nhosts || nhosts < 1) ? h : nhosts - 1;
        l->nhosts     = l->host_of[r] + 1;
    }
    layout_fill(l);
    return COLL_OK;
}
