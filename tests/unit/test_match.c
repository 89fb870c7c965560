/* SPDX-License-Identifier: MIT */
/*
 * Unit test of tag matching (transports/match.c) and its index (transports/match_index.c):
 * the oldest record of a tag is found first, through growth and removals; thousands of receives
 * posted and filled in reverse order, messages buffered ahead of their receives (several of
 * one tag, in order; one arriving in fragments while its receive waits), a point-to-point
 * length clash, and teardown failing what is left.
 */
#include "match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_test.h"

typedef struct {
    coll_tp_mlink_t link;
    int             seq;
} rec_t;

/* 20000 records over 97 tags: per tag in insertion order, across the index's growth; every
 * third removed, then the rest popped. */
static void test_index(void)
{
    enum { N = 20000, NTAG = 97 };
    coll_tp_mindex_t x;
    rec_t           *r = calloc(N, sizeof(*r));
    ASSERT_TRUE(r != NULL);
    coll_tp_mindex_init(&x);
    for (int i = 0; i < N; i++) {
        r[i].seq = i;
        coll_tp_mindex_add(&x, &r[i].link, (uint64_t)(i % NTAG) << 40 | 7);
    }
    ASSERT_EQ(x.count, (size_t)N);
    ASSERT_TRUE(x.nbuckets > COLL_TP_MINDEX_INLINE);
    for (int i = 0; i < N; i += 3) {
        coll_tp_mindex_remove(&x, &r[i].link);
    }
    for (int t = 0; t < NTAG; t++) {
        uint64_t         tag  = (uint64_t)t << 40 | 7;
        int              last = -1, n = 0;
        coll_tp_mlink_t *l = coll_tp_mindex_find(&x, tag, NULL);
        for (; l != NULL; l = coll_tp_mindex_find(&x, tag, l)) {
            rec_t *e = coll_tp_mindex_entry(l, rec_t, link);
            ASSERT_EQ(e->seq % NTAG, t);
            ASSERT_TRUE(e->seq > last);
            ASSERT_TRUE(e->seq % 3 != 0);
            last = e->seq;
            n++;
        }
        int want = 0;
        for (int i = t; i < N; i += NTAG) {
            want += i % 3 != 0;
        }
        ASSERT_EQ(n, want);
    }
    ASSERT_TRUE(coll_tp_mindex_find(&x, (uint64_t)NTAG << 40 | 7, NULL) == NULL);
    size_t left = x.count, popped = 0;
    while (coll_tp_mindex_pop(&x) != NULL) {
        popped++;
    }
    ASSERT_EQ(popped, left);
    ASSERT_EQ(x.count, (size_t)0);
    coll_tp_mindex_fini(&x);
    free(r);
}

typedef struct {
    coll_tp_op_t  op;
    int64_t       val;
    int           done;
    coll_result_t st;
} recv_t;

static void recv_done(void *arg, coll_result_t st)
{
    recv_t *r = arg;
    r->done++;
    r->st = st;
}

static void recv_init(recv_t *r, uint64_t tag)
{
    memset(r, 0, sizeof(*r));
    r->val     = -1;
    r->op.buf  = &r->val;
    r->op.len  = sizeof(r->val);
    r->op.tag  = tag;
    r->op.done = recv_done;
    r->op.arg  = r;
}

static uint64_t coll_tag(int seq, int step)
{
    return (uint64_t)seq << 40 | (uint64_t)step;
}

/* Receives posted first, messages delivered newest first: each lands in its own receive. */
static void test_posted_reverse(void)
{
    enum { N = 5000 };
    coll_tp_match_t m;
    recv_t         *r = calloc(N, sizeof(*r));
    ASSERT_TRUE(r != NULL);
    coll_tp_match_init(&m, 1, "test");
    for (int i = 0; i < N; i++) {
        recv_init(&r[i], coll_tag(i / 2, i % 2));
        ASSERT_OK(coll_tp_match_post(&m, &r[i].op));
    }
    ASSERT_TRUE(coll_tp_match_busy(&m));
    for (int i = N - 1; i >= 0; i--) {
        int64_t v = 1000 + i;
        ASSERT_OK(coll_tp_match_deliver(&m, coll_tag(i / 2, i % 2), sizeof(v), 0, &v, sizeof(v)));
        ASSERT_EQ(r[i].done, 1);
        ASSERT_EQ(r[i].val, (int64_t)(1000 + i));
    }
    ASSERT_TRUE(!coll_tp_match_busy(&m));
    coll_tp_match_fini(&m, COLL_ERR_REMOTE);
    free(r);
}

/* Messages ahead of their receives: three of one tag taken in arrival order, one arriving in
 * two fragments around its receive, thousands of others taken in reverse order. */
static void test_unexpected(void)
{
    enum { N = 3000 };
    coll_tp_match_t m;
    recv_t          a[3], frag;
    recv_t         *r   = calloc(N, sizeof(*r));
    uint64_t        dup = coll_tag(77777, 3);
    ASSERT_TRUE(r != NULL);
    coll_tp_match_init(&m, 2, "test");
    for (int64_t k = 0; k < 3; k++) {
        int64_t v = 500 + k;
        ASSERT_OK(coll_tp_match_deliver(&m, dup, sizeof(v), 0, &v, sizeof(v)));
    }
    for (int i = 0; i < N; i++) {
        int64_t v = 2000 + i;
        ASSERT_OK(coll_tp_match_deliver(&m, coll_tag(i, 1), sizeof(v), 0, &v, sizeof(v)));
    }
    ASSERT_EQ(m.unexp.count, (size_t)N + 3);
    for (int k = 0; k < 3; k++) {
        recv_init(&a[k], dup);
        ASSERT_OK(coll_tp_match_post(&m, &a[k].op));
        ASSERT_EQ(a[k].done, 1);
        ASSERT_EQ(a[k].val, (int64_t)(500 + k));
    }
    for (int i = N - 1; i >= 0; i--) {
        recv_init(&r[i], coll_tag(i, 1));
        ASSERT_OK(coll_tp_match_post(&m, &r[i].op));
        ASSERT_EQ(r[i].done, 1);
        ASSERT_EQ(r[i].st, COLL_OK);
        ASSERT_EQ(r[i].val, (int64_t)(2000 + i));
    }
    ASSERT_EQ(m.unexp.count, (size_t)0);
    ASSERT_EQ(m.unexp_bytes, (size_t)0);
    /* first half buffered, receive posted, second half completes it */
    int64_t  v  = 0x0102030405060708;
    uint64_t ft = coll_tag(5, 9);
    ASSERT_OK(coll_tp_match_deliver(&m, ft, sizeof(v), 0, &v, 4));
    recv_init(&frag, ft);
    ASSERT_OK(coll_tp_match_post(&m, &frag.op));
    ASSERT_EQ(frag.done, 0);
    ASSERT_TRUE(coll_tp_match_busy(&m));
    ASSERT_OK(coll_tp_match_deliver(&m, ft, sizeof(v), 4, (char *)&v + 4, 4));
    ASSERT_EQ(frag.done, 1);
    ASSERT_EQ(frag.val, v);
    coll_tp_match_fini(&m, COLL_ERR_REMOTE);
    free(r);
}

/* A point-to-point receive and a message of the same send differing in the end bit (different
 * lengths) clash on both sides; teardown fails the receives left. */
static void test_clash_and_fini(void)
{
    coll_tp_match_t m;
    recv_t          r, left;
    uint64_t        p2p = COLL_TAG_P2P | (uint64_t)4 << 32;
    int64_t         v   = 1;
    coll_tp_match_init(&m, 3, "test");
    recv_init(&r, p2p | COLL_TAG_P2P_END);
    ASSERT_OK(coll_tp_match_post(&m, &r.op));
    ASSERT_EQ(coll_tp_match_deliver(&m, p2p, sizeof(v), 0, &v, sizeof(v)), COLL_ERR_MISMATCH);
    coll_tp_match_fini(&m, COLL_ERR_REMOTE);
    ASSERT_EQ(r.done, 1);
    ASSERT_EQ(r.st, COLL_ERR_REMOTE);

    coll_tp_match_init(&m, 3, "test");
    ASSERT_OK(coll_tp_match_deliver(&m, p2p, sizeof(v), 0, &v, sizeof(v)));
    recv_init(&r, p2p | COLL_TAG_P2P_END);
    ASSERT_EQ(coll_tp_match_post(&m, &r.op), COLL_ERR_MISMATCH);
    recv_init(&left, coll_tag(9, 9));
    ASSERT_OK(coll_tp_match_post(&m, &left.op));
    coll_tp_match_fini(&m, COLL_ERR_ABORTED);
    ASSERT_EQ(left.done, 1);
    ASSERT_EQ(left.st, COLL_ERR_ABORTED);
}

int main(void)
{
    test_index();
    test_posted_reverse();
    test_unexpected();
    test_clash_and_fini();
    printf("test_match: index order, reverse delivery, buffered messages, clashes ok\n");
    return 0;
}
