/* SPDX-License-Identifier: MIT */
/*
 * The tag index of matching: records (posted receives, buffered messages) hashed by tag, each
 * bucket a list in insertion order, so that the oldest record of a tag is found, and any record
 * removed, in constant time however many are outstanding. Grows by rehashing; a failed growth
 * only leaves the chains longer.
 */
#ifndef COLL_TP_MATCH_INDEX_H
#define COLL_TP_MATCH_INDEX_H

#include "transport.h"

#define COLL_TP_MINDEX_INLINE 16 /* buckets before the first growth, kept inside the index */

typedef struct coll_tp_mindex {
    coll_tp_mlink_t **big; /* 2 * nbuckets: heads then tails; NULL: the inline ones */
    size_t            nbuckets;
    size_t            count;
    size_t            scan; /* _pop: buckets before it are empty */
    coll_tp_mlink_t  *inl[2 * COLL_TP_MINDEX_INLINE];
} coll_tp_mindex_t;

void coll_tp_mindex_init(coll_tp_mindex_t *x);
/* Frees the buckets; the records are the caller's (take them out first with _pop). */
void coll_tp_mindex_fini(coll_tp_mindex_t *x);
/* Append l with tag: after every record of the same tag. */
void coll_tp_mindex_add(coll_tp_mindex_t *x, coll_tp_mlink_t *l, uint64_t tag);
void coll_tp_mindex_remove(coll_tp_mindex_t *x, coll_tp_mlink_t *l);
/* The oldest record of tag after `after` (NULL: the oldest of all), or NULL. */
coll_tp_mlink_t *coll_tp_mindex_find(const coll_tp_mindex_t *x, uint64_t tag,
                                     const coll_tp_mlink_t *after);
/* Remove and return some record, or NULL when empty (teardown). */
coll_tp_mlink_t *coll_tp_mindex_pop(coll_tp_mindex_t *x);

#define coll_tp_mindex_entry(l, type, member) ((type *)(void *)((char *)(l)-offsetof(type, member)))

#endif
