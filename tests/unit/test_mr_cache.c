/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the ib transport's registration cache (transports/ib/ib_mr.c) and the memory
 * hooks under it (src/core/memhook.c), without an RDMA device: fake reg/dereg count calls and
 * keep the live registrations. Covers hits and misses, LRU eviction by entries and by bytes
 * (never of a referenced entry), the uncached mode, invalidation by real munmap, madvise, mmap and
 * mremap calls (also while referenced), destroy, and unmaps in another thread meanwhile; and
 * that glibc's malloc, once told, keeps freed memory mapped (which no hook could see).
 */
#include "coll_test.h"
#include "ib/ib_mr.h"
#include "memhook.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t page;

/* ---- fake registration: a table of registrations, each live until deregistered ---- */

#define FAKE_MAX 256

typedef struct {
    uintptr_t addr;
    size_t    len;
    int       live;
} fake_reg_t;

static fake_reg_t      fake[FAKE_MAX]; /* a slot is reused once deregistered */
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int      fake_nreg, fake_ndereg;

/* Like the real ones, reg and dereg map and unmap memory of their own: through the hooks, in
 * the middle of the cache's work. */
static void fake_churn(void)
{
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    ASSERT_TRUE(p != MAP_FAILED);
    ASSERT_EQ(munmap(p, page), 0);
}

static void *fake_reg(void *cookie, void *addr, size_t len)
{
    fake_reg_t *f = NULL;
    int         i;

    ASSERT_EQ((uintptr_t)addr % page, 0);
    ASSERT_EQ(len % page, 0);
    pthread_mutex_lock(&fake_lock);
    for (i = 0; i < FAKE_MAX && f == NULL; i++) {
        f = fake[i].live ? NULL : &fake[i];
    }
    ASSERT_TRUE(f != NULL); /* else registrations leak */
    f->addr = (uintptr_t)addr;
    f->len  = len;
    f->live = 1;
    pthread_mutex_unlock(&fake_lock);
    atomic_fetch_add(&fake_nreg, 1);
    fake_churn();
    return f;
}

static void fake_dereg(void *cookie, void *handle)
{
    fake_reg_t *f = handle;

    pthread_mutex_lock(&fake_lock);
    ASSERT_EQ(f->live, 1); /* never twice */
    f->live = 0;
    pthread_mutex_unlock(&fake_lock);
    atomic_fetch_add(&fake_ndereg, 1);
    fake_churn();
}

static const coll_ib_mrc_ops_t fake_ops = {.reg = fake_reg, .dereg = fake_dereg};

static int fake_nlive(void)
{
    int i, n = 0;

    pthread_mutex_lock(&fake_lock);
    for (i = 0; i < FAKE_MAX; i++) {
        n += fake[i].live;
    }
    pthread_mutex_unlock(&fake_lock);
    return n;
}

/* Is there a live registration of exactly [addr, addr + len)? */
static int fake_is_live(void *addr, size_t len)
{
    int i, found = 0;

    pthread_mutex_lock(&fake_lock);
    for (i = 0; i < FAKE_MAX; i++) {
        found |= fake[i].live && fake[i].addr == (uintptr_t)addr && fake[i].len == len;
    }
    pthread_mutex_unlock(&fake_lock);
    return found;
}

static coll_ib_mrc_t *cache_new(int max_entries, size_t max_bytes, int enabled)
{
    coll_ib_mrc_t *c = NULL;

    ASSERT_OK(coll_ib_mrc_create(&fake_ops, NULL, max_entries, max_bytes, enabled, &c));
    ASSERT_EQ(coll_ib_mrc_enabled(c), enabled);
    return c;
}

/* destroy deregisters everything; then the test's pages go */
static void cache_done(coll_ib_mrc_t *c, void *pages, size_t npages)
{
    coll_ib_mrc_destroy(c);
    ASSERT_EQ(munmap(pages, npages * page), 0);
    ASSERT_EQ(fake_nlive(), 0);
    ASSERT_EQ(atomic_load(&fake_ndereg), atomic_load(&fake_nreg));
}

static void *pages_new(size_t npages)
{
    void *p = mmap(NULL, npages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    ASSERT_TRUE(p != MAP_FAILED);
    return p;
}

/* get, then check hit or miss through the registration count */
static coll_ib_mreg_t *get_expect(coll_ib_mrc_t *c, void *addr, size_t len, int hit)
{
    coll_ib_mreg_t *reg    = NULL;
    void           *handle = NULL;
    int             before = atomic_load(&fake_nreg);

    ASSERT_OK(coll_ib_mrc_get(c, addr, len, &reg, &handle));
    ASSERT_TRUE(reg != NULL && handle != NULL);
    ASSERT_EQ(atomic_load(&fake_nreg), before + (hit ? 0 : 1));
    return reg;
}

/* ---- the hooks themselves ---- */

static atomic_int hook_calls;
static uintptr_t  hook_start;
static size_t     hook_len;

static void hook_record(void *arg, uintptr_t start, size_t len)
{
    atomic_fetch_add(&hook_calls, 1);
    errno      = EBADF; /* the caller's errno is the real call's, whatever a hook does */
    hook_start = start;
    hook_len   = len;
    if (arg != NULL) {
        ASSERT_EQ(munmap(arg, page), 0); /* straight to the system: no second call */
    }
}

static void test_memhook(void)
{
    const char *why = NULL;
    char       *p   = pages_new(4);
    int         n, status;
    pid_t       pid;

    ASSERT_EQ(coll_memhook_effective(&why), 1);
    ASSERT_EQ(coll_memhook_add(hook_record, NULL), 0);

    errno = EAGAIN;
    ASSERT_EQ(munmap(p + 3 * page, page), 0);
    ASSERT_EQ(errno, EAGAIN);
    ASSERT_EQ(atomic_load(&hook_calls), 1);
    ASSERT_EQ(hook_start, (uintptr_t)(p + 3 * page));
    ASSERT_EQ(hook_len, page);
    ASSERT_EQ(madvise(p, page, MADV_WILLNEED), 0); /* keeps the pages */
    ASSERT_EQ(madvise(p, page, MADV_DONTFORK), 0);
    ASSERT_EQ(madvise(p, page, MADV_DOFORK), 0);
    ASSERT_EQ(atomic_load(&hook_calls), 1);
    ASSERT_EQ(madvise(p + page, page, MADV_DONTNEED), 0);
    ASSERT_EQ(atomic_load(&hook_calls), 2);
    ASSERT_EQ(hook_start, (uintptr_t)(p + page));

    /* errno as the real call leaves it */
    errno = 0;
    ASSERT_EQ(munmap(p + 1, page), -1);
    ASSERT_EQ(errno, EINVAL);
    errno = 0;
    ASSERT_EQ(madvise(p + 1, page, MADV_DONTNEED), -1);
    ASSERT_EQ(errno, EINVAL);
    ASSERT_EQ(atomic_load(&hook_calls), 4);

    /* a forked child starts without callbacks; the parent keeps its own */
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        _exit(munmap(p + 2 * page, page) == 0 && atomic_load(&hook_calls) == 4 ? 0 : 1);
    }
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(madvise(p, page, MADV_DONTNEED), 0);
    ASSERT_EQ(atomic_load(&hook_calls), 5);
    coll_memhook_remove(hook_record, NULL);

    /* a callback that unmaps is not called again for its own unmap */
    ASSERT_EQ(coll_memhook_add(hook_record, p + 2 * page), 0);
    atomic_store(&hook_calls, 0);
    ASSERT_EQ(munmap(p, page), 0);
    ASSERT_EQ(atomic_load(&hook_calls), 1);
    coll_memhook_remove(hook_record, p + 2 * page);
    ASSERT_EQ(munmap(p + page, page), 0);
    ASSERT_EQ(atomic_load(&hook_calls), 1); /* removed */

    /* the table is small and says so */
    for (n = 0; coll_memhook_add(hook_record, (void *)(uintptr_t)(n + 1)) == 0; n++) {
        ASSERT_TRUE(n < 1000);
    }
    ASSERT_TRUE(n > 0);
    for (; n > 0; n--) {
        coll_memhook_remove(hook_record, (void *)(uintptr_t)n);
    }
}

/* ---- glibc's malloc keeps what it frees mapped ---- */

/* malloc, touch and free a large buffer; is its memory still mapped? */
static void *heap_free_big(void *arg)
{
    size_t        len = 100u << 20;
    char         *p   = malloc(len);
    unsigned char vec[1];
    uintptr_t     mid;

    ASSERT_TRUE(p != NULL);
    memset(p, 1, len);
    mid = ((uintptr_t)p + len / 2) & ~(uintptr_t)(page - 1);
    free(p);
    return (void *)(uintptr_t)(mincore((void *)mid, page, vec) == 0);
}

static void test_heap(void)
{
    pthread_t t;
    void     *mapped;

    coll_memhook_keep_heap_mapped();
    coll_memhook_keep_heap_mapped(); /* once */
    ASSERT_TRUE(heap_free_big(NULL) != NULL);
    /* a thread's arena would map it as a chunk of its own, and unmap it at free */
    ASSERT_EQ(pthread_create(&t, NULL, heap_free_big, NULL), 0);
    ASSERT_EQ(pthread_join(t, &mapped), 0);
    ASSERT_TRUE(mapped != NULL);
}

/* ---- the cache ---- */

static void test_hits(void)
{
    coll_ib_mrc_t  *c = cache_new(64, 1ul << 30, 1);
    char           *p = pages_new(8);
    coll_ib_mreg_t *r[4];
    uint64_t        hits, misses;

    r[0] = get_expect(c, p + 10, 100, 0);
    ASSERT_TRUE(fake_is_live(p, page)); /* the page-aligned range */
    r[1] = get_expect(c, p + 10, 100, 1);
    ASSERT_TRUE(r[1] == r[0]);
    r[2] = get_expect(c, p + 200, 50, 1); /* contained */
    r[3] = get_expect(c, p, 3 * page, 0); /* not covered */
    ASSERT_TRUE(fake_is_live(p, 3 * page));
    coll_ib_mrc_put(c, r[0]);
    coll_ib_mrc_put(c, r[1]);
    coll_ib_mrc_put(c, r[2]);
    coll_ib_mrc_put(c, r[3]);
    coll_ib_mrc_put(c, get_expect(c, p + page, page, 1));
    coll_ib_mrc_put(c, get_expect(c, p + 2 * page + 1, page - 1, 1));
    coll_ib_mrc_put(c, get_expect(c, p + 2 * page + 1, page, 0)); /* crosses into page 3 */
    coll_ib_mrc_put(c, get_expect(c, p + 7 * page, 0, 0));        /* 0 bytes: one page */
    ASSERT_EQ(fake_nlive(), 4);                                   /* all cached, none dropped */
    coll_ib_mrc_stats(c, &hits, &misses, NULL, NULL);
    ASSERT_EQ(hits, 4);
    ASSERT_EQ(misses, 4);
    cache_done(c, p, 8);
}

static void test_lru(void)
{
    coll_ib_mrc_t  *c = cache_new(2, 1ul << 30, 1);
    char           *p = pages_new(8);
    coll_ib_mreg_t *a, *b;
    uint64_t        evictions;

    coll_ib_mrc_put(c, get_expect(c, p, page, 0));            /* A */
    coll_ib_mrc_put(c, get_expect(c, p + page, page, 0));     /* B */
    coll_ib_mrc_put(c, get_expect(c, p, page, 1));            /* A is now the newer */
    coll_ib_mrc_put(c, get_expect(c, p + 2 * page, page, 0)); /* C evicts B */
    ASSERT_TRUE(fake_is_live(p, page));
    ASSERT_TRUE(!fake_is_live(p + page, page));
    ASSERT_TRUE(fake_is_live(p + 2 * page, page));
    coll_ib_mrc_put(c, get_expect(c, p + page, page, 0)); /* B again: evicts A */
    ASSERT_TRUE(!fake_is_live(p, page));
    coll_ib_mrc_stats(c, NULL, NULL, &evictions, NULL);
    ASSERT_EQ(evictions, 2);

    /* referenced entries stay, over the limit, until put */
    a = get_expect(c, p + 3 * page, page, 0);
    b = get_expect(c, p + 4 * page, page, 0);
    ASSERT_TRUE(!fake_is_live(p + page, page) && !fake_is_live(p + 2 * page, page));
    ASSERT_TRUE(fake_is_live(p + 3 * page, page) && fake_is_live(p + 4 * page, page));
    coll_ib_mrc_put(c, get_expect(c, p + 5 * page, page, 0)); /* itself the only candidate */
    ASSERT_TRUE(!fake_is_live(p + 5 * page, page));
    ASSERT_EQ(fake_nlive(), 2);
    coll_ib_mrc_put(c, b);
    coll_ib_mrc_put(c, a);
    ASSERT_EQ(fake_nlive(), 2); /* within the limit again: both cached */
    coll_ib_mrc_put(c, get_expect(c, p + 3 * page, page, 1));
    coll_ib_mrc_put(c, get_expect(c, p + 4 * page, page, 1));

    /* recency is that of the last put: held the longest means used the latest */
    a = get_expect(c, p + 3 * page, page, 1);
    coll_ib_mrc_put(c, get_expect(c, p + 4 * page, page, 1));
    coll_ib_mrc_put(c, a);
    coll_ib_mrc_put(c, get_expect(c, p + 6 * page, page, 0));
    ASSERT_TRUE(fake_is_live(p + 3 * page, page));
    ASSERT_TRUE(!fake_is_live(p + 4 * page, page));
    cache_done(c, p, 8);
}

static void test_bytes(void)
{
    coll_ib_mrc_t  *c = cache_new(64, 3 * page, 1);
    char           *p = pages_new(8);
    coll_ib_mreg_t *big;

    coll_ib_mrc_put(c, get_expect(c, p, page, 0));
    coll_ib_mrc_put(c, get_expect(c, p + page, page, 0));
    coll_ib_mrc_put(c, get_expect(c, p + 2 * page, page, 0));
    ASSERT_EQ(fake_nlive(), 3);
    coll_ib_mrc_put(c, get_expect(c, p + 3 * page, page, 0)); /* 4 pages > 3: the oldest goes */
    ASSERT_TRUE(!fake_is_live(p, page));
    ASSERT_EQ(fake_nlive(), 3);
    big = get_expect(c, p + 4 * page, 4 * page, 0); /* alone over the limit: all others go */
    ASSERT_EQ(fake_nlive(), 1);
    coll_ib_mrc_put(c, big); /* and then itself */
    ASSERT_EQ(fake_nlive(), 0);
    cache_done(c, p, 8);
}

static void test_disabled(void)
{
    coll_ib_mrc_t  *c = cache_new(64, 1ul << 30, 0);
    char           *p = pages_new(2);
    coll_ib_mreg_t *a, *b;

    a = get_expect(c, p, page, 0);
    b = get_expect(c, p, page, 0);
    ASSERT_TRUE(a != b);
    coll_ib_mrc_put(c, a);
    ASSERT_EQ(fake_nlive(), 1);
    coll_ib_mrc_put(c, b);
    ASSERT_EQ(fake_nlive(), 0);
    cache_done(c, p, 2);
}

/* mmap with the old address as a hint: most likely the same pages' address again, which a
 * stale cache would hit */
static char *pages_again(char *old, size_t npages)
{
    void *p = mmap(old, npages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    ASSERT_TRUE(p != MAP_FAILED);
    return p;
}

static void test_invalidate(void)
{
    coll_ib_mrc_t  *c = cache_new(64, 1ul << 30, 1);
    char           *p = pages_new(3), *q = pages_new(1);
    coll_ib_mreg_t *r;
    uint64_t        inval;
    int             same = 0, nreg;

    /* munmap */
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 0));
    ASSERT_EQ(munmap(q, page), 0); /* unrelated */
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 1));
    ASSERT_EQ(munmap(p, 3 * page), 0);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 1);
    q = pages_again(p, 3);
    same += q == p;
    p = q;
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 0));
    ASSERT_EQ(fake_nlive(), 1); /* the dead one is gone by now */

    /* madvise(MADV_DONTNEED) of one page in the middle */
    ASSERT_EQ(madvise(p + page, page, MADV_DONTNEED), 0);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 2);
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 0));
    ASSERT_EQ(fake_nlive(), 1);

    /* mremap: the old range goes */
    q = mremap(p, 3 * page, 6 * page, MREMAP_MAYMOVE);
    ASSERT_TRUE(q != MAP_FAILED);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval); /* before reg/dereg unmap anything */
    ASSERT_EQ(inval, 3);
    same += q == p;
    p = q;
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 0));
    ASSERT_EQ(fake_nlive(), 1);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 3);

    /* unmapped unseen (as glibc's malloc does, with its own hidden call), then new memory
     * mapped at an overlapping address: the mmap hook drops the stale entry */
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 1));
    ASSERT_EQ(syscall(SYS_munmap, p, 6 * page), 0);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 3);
    q = mmap(p, 6 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
             -1, 0);
    ASSERT_TRUE(q == p);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 4);
    coll_ib_mrc_put(c, get_expect(c, p, 3 * page, 0));
    ASSERT_EQ(fake_nlive(), 1);

    /* in use meanwhile: deregistered at the last put only */
    r = get_expect(c, p + page, page, 1);
    ASSERT_TRUE(get_expect(c, p, page, 1) == r);  /* two references */
    ASSERT_EQ(munmap(p + 3 * page, 3 * page), 0); /* the grown part: not registered */
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 4);
    ASSERT_EQ(munmap(p, 3 * page), 0);
    coll_ib_mrc_stats(c, NULL, NULL, NULL, &inval);
    ASSERT_EQ(inval, 5);
    nreg = atomic_load(&fake_nreg);
    q    = pages_new(1);
    coll_ib_mrc_put(c, get_expect(c, q, page, 0)); /* collects garbage, but not this one */
    ASSERT_TRUE(fake_is_live(p, 3 * page));
    coll_ib_mrc_put(c, r);
    ASSERT_TRUE(fake_is_live(p, 3 * page));
    coll_ib_mrc_put(c, r);
    ASSERT_TRUE(!fake_is_live(p, 3 * page));
    ASSERT_EQ(fake_nlive(), 1);
    ASSERT_EQ(atomic_load(&fake_nreg), nreg + 1);
    printf("test_mr_cache: invalidations checked (%d of 2 remaps at the same address)\n", same);
    cache_done(c, q, 1);
}

/* A registration still in use at destroy is deregistered too. */
static void test_destroy_busy(void)
{
    coll_ib_mrc_t *c = cache_new(64, 1ul << 30, 1);
    char          *p = pages_new(2);

    (void)get_expect(c, p, page, 0);
    coll_ib_mrc_put(c, get_expect(c, p + page, page, 0));
    cache_done(c, p, 2);
}

/* ---- another thread unmaps all the time ---- */

static atomic_int churn_stop;

static void *churn_main(void *arg)
{
    long n = 0;

    while (!atomic_load(&churn_stop)) {
        char *p = pages_new(2);

        ASSERT_EQ(madvise(p, page, MADV_DONTNEED), 0);
        ASSERT_EQ(munmap(p, 2 * page), 0);
        n++;
    }
    return (void *)n;
}

static void test_threads(void)
{
    coll_ib_mrc_t *c   = cache_new(4, 1ul << 30, 1);
    char          *buf = pages_new(16);
    pthread_t      t;
    void          *nchurn;
    double         t0 = coll_time_s();
    long           i;

    ASSERT_EQ(pthread_create(&t, NULL, churn_main, NULL), 0);
    for (i = 0; i < 1000000 && coll_time_s() - t0 < 0.3; i++) {
        coll_ib_mreg_t *reg;
        void           *handle;
        size_t          off = (size_t)(i % 13) * page;

        ASSERT_OK(coll_ib_mrc_get(c, buf + off, page + (size_t)(i % 3) * 100, &reg, &handle));
        if (i % 101 == 0) {
            ASSERT_EQ(madvise(buf + off, page, MADV_DONTNEED), 0); /* ours, while in use */
        }
        coll_ib_mrc_put(c, reg);
    }
    atomic_store(&churn_stop, 1);
    ASSERT_EQ(pthread_join(t, &nchurn), 0);
    printf("test_mr_cache: %ld get/put while another thread unmapped %ld times\n", i, (long)nchurn);
    cache_done(c, buf, 16);
}

int main(void)
{
    const char *why = NULL;

    page = (size_t)sysconf(_SC_PAGESIZE);
    if (!coll_memhook_effective(&why)) {
        fprintf(stderr, "test_mr_cache: memory hooks not effective: %s\n", why);
        return 1;
    }
    test_memhook();
    test_heap(); /* before any other thread has an arena */
    test_hits();
    test_lru();
    test_bytes();
    test_disabled();
    test_invalidate();
    test_destroy_busy();
    test_threads();
    printf("test_mr_cache: ok (%d registrations)\n", atomic_load(&fake_nreg));
    return 0;
}
