/* SPDX-License-Identifier: MIT */
/*
 * The tag index of matching (match_index.h). Tags carry a call's sequence number and a step's
 * number in separate bit fields; a multiplicative hash spreads both over the buckets.
 */
#include "match_index.h"
#include "util.h"

#include <string.h>

#define MINDEX_LOAD 2 /* records per bucket before growing */

static coll_tp_mlink_t **mindex_heads(const coll_tp_mindex_t *x)
{
    return x->big != NULL ? x->big : (coll_tp_mlink_t **)x->inl;
}

static size_t mindex_bucket(size_t nbuckets, uint64_t tag)
{
    uint64_t h = (tag ^ (tag >> 29)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nbuckets - 1);
}

void coll_tp_mindex_init(coll_tp_mindex_t *x)
{
    memset(x, 0, sizeof(*x));
    x->nbuckets = COLL_TP_MINDEX_INLINE;
}

void coll_tp_mindex_fini(coll_tp_mindex_t *x)
{
    coll_free(x->big);
    coll_tp_mindex_init(x);
}

/* Append to bucket b of the arrays heads and tails (nb buckets). */
static void mindex_link(coll_tp_mlink_t **heads, size_t nb, size_t b, coll_tp_mlink_t *l)
{
    coll_tp_mlink_t **tails = heads + nb;
    l->next                 = NULL;
    l->prev                 = tails[b];
    if (tails[b] != NULL) {
        tails[b]->next = l;
    } else {
        heads[b] = l;
    }
    tails[b] = l;
}

/* Four times the buckets; the order within a tag is kept (a bucket's records move in order). */
static void mindex_grow(coll_tp_mindex_t *x)
{
    size_t            nb    = x->nbuckets * 4;
    coll_tp_mlink_t **heads = coll_calloc(2 * nb, sizeof(*heads), "matching index");
    coll_tp_mlink_t **old   = mindex_heads(x);

    if (heads == NULL) {
        return;
    }
    for (size_t b = 0; b < x->nbuckets; b++) {
        for (coll_tp_mlink_t *l = old[b], *next; l != NULL; l = next) {
            next = l->next;
            mindex_link(heads, nb, mindex_bucket(nb, l->tag), l);
        }
    }
    coll_free(x->big);
    x->big      = heads;
    x->nbuckets = nb;
    x->scan     = 0;
}

void coll_tp_mindex_add(coll_tp_mindex_t *x, coll_tp_mlink_t *l, uint64_t tag)
{
    if (x->count >= MINDEX_LOAD * x->nbuckets) {
        mindex_grow(x);
    }
    l->tag  = tag;
    x->scan = 0;
    mindex_link(mindex_heads(x), x->nbuckets, mindex_bucket(x->nbuckets, tag), l);
    x->count++;
}

void coll_tp_mindex_remove(coll_tp_mindex_t *x, coll_tp_mlink_t *l)
{
    coll_tp_mlink_t **heads = mindex_heads(x);
    size_t            b     = mindex_bucket(x->nbuckets, l->tag);

    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else {
        heads[b] = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    } else {
        heads[x->nbuckets + b] = l->prev;
    }
    l->next = l->prev = NULL;
    x->count--;
}

coll_tp_mlink_t *coll_tp_mindex_find(const coll_tp_mindex_t *x, uint64_t tag,
                                     const coll_tp_mlink_t *after)
{
    coll_tp_mlink_t *l =
        after != NULL ? after->next : mindex_heads(x)[mindex_bucket(x->nbuckets, tag)];
    while (l != NULL && l->tag != tag) {
        l = l->next;
    }
    return l;
}

coll_tp_mlink_t *coll_tp_mindex_pop(coll_tp_mindex_t *x)
{
    coll_tp_mlink_t **heads = mindex_heads(x);
    for (; x->count > 0 && x->scan < x->nbuckets; x->scan++) {
        if (heads[x->scan] != NULL) {
            coll_tp_mlink_t *l = heads[x->scan];
            coll_tp_mindex_remove(x, l);
            return l;
        }
    }
    return NULL;
}
