/* SPDX-License-Identifier: MIT */
/*
 * /dev/shm segments of the shm transport: create one (named after the communicator id and the
 * owner's rank, memory reserved up front so a full /dev/shm is an error at init rather than a
 * SIGBUS later), attach to a peer's and validate it, unlink, unmap. The owner holds a POSIX
 * write lock on its segment while it lives, which peers test to notice a dead rank. Knows
 * nothing about rings and windows beyond where each one starts.
 */
#include "shm.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void shm_seg_name(char *buf, size_t len, uint64_t comm_id, int rank)
{
    snprintf(buf, len, "/coll-%016" PRIx64 "-%d", comm_id, rank);
}

uint64_t shm_seg_size(uint32_t nslots, uint64_t ring_size, uint64_t win_size)
{
    uint64_t win = (win_size > 0) ? SHM_WIN_CTRL_SIZE + 2 * win_size : 0;
    return SHM_HDR_SIZE + (uint64_t)nslots * (SHM_RING_CTRL_SIZE + ring_size) + win;
}

void *shm_seg_ring(const shm_seg_t *seg, uint32_t slot)
{
    uint64_t stride = SHM_RING_CTRL_SIZE + seg->hdr->ring_size;
    return (char *)seg->base + SHM_HDR_SIZE + (uint64_t)slot * stride;
}

void *shm_seg_win(const shm_seg_t *seg)
{
    if (seg->hdr == NULL || seg->hdr->win_size == 0) {
        return NULL;
    }
    return shm_seg_ring(seg, seg->hdr->nslots); /* the window follows the last ring */
}

static void seg_reset(shm_seg_t *seg)
{
    memset(seg, 0, sizeof(*seg));
    seg->fd = -1;
}

/* Reserve the memory now: tmpfs pages are otherwise allocated on first touch, and a full
 * /dev/shm would then kill the process with SIGBUS in the middle of a collective. */
static coll_result_t seg_reserve(shm_seg_t *seg, uint32_t nslots, uint64_t ring_size,
                                 uint64_t win_size)
{
    int err = posix_fallocate(seg->fd, 0, (off_t)seg->size);
    if (err == ENOSPC || err == ENOMEM || err == EFBIG) {
        coll_error(SHM,
                   "no space in /dev/shm for %s (needed %zu bytes: %u rings of %" PRIu64
                   " bytes, window halves of %" PRIu64
                   "): %s; enlarge /dev/shm (containers: --shm-size) or set "
                   "COLL_SHM_RING_SIZE or COLL_SHM_WINDOW_SIZE lower",
                   seg->name, seg->size, nslots, ring_size, win_size, strerror(err));
        return COLL_ERR_SYSTEM;
    }
    if (err == EOPNOTSUPP || err == EINVAL || err == ENOSYS) {
        coll_debug(SHM, "cannot reserve memory of /dev/shm%s (%s): pages come on first use",
                   seg->name, strerror(err));
    } else if (err != 0) {
        coll_error(SHM, "cannot reserve %zu bytes in /dev/shm for %s: %s", seg->size, seg->name,
                   strerror(err));
        return COLL_ERR_SYSTEM;
    }
    return COLL_OK;
}

static coll_result_t seg_map(shm_seg_t *seg, int peer)
{
    void *p = mmap(NULL, seg->size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (p == MAP_FAILED) {
        coll_error(SHM, "cannot map /dev/shm%s (%zu bytes, rank %d): %s", seg->name, seg->size,
                   peer, strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    seg->base = p;
    seg->hdr  = p;
    return COLL_OK;
}

/* Whole-file write lock held for the owner's lifetime; released by the kernel at exit. */
static int seg_lock(int fd)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type   = F_WRLCK;
    fl.l_whence = SEEK_SET;
    return fcntl(fd, F_SETLK, &fl) == 0;
}

coll_result_t shm_seg_create(shm_seg_t *seg, const struct coll_tp_ctx *ctx, uint32_t nslots)
{
    coll_result_t st;

    seg_reset(seg);
    shm_seg_name(seg->name, sizeof(seg->name), ctx->comm_id, ctx->rank);
    seg->size = shm_seg_size(nslots, ctx->ring_size, ctx->win_size);
    seg->fd   = shm_open(seg->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (seg->fd < 0) {
        if (errno == EEXIST) {
            coll_error(SHM,
                       "/dev/shm%s already exists: two communicators with one id on this host, "
                       "or a leftover of a killed job (remove it)",
                       seg->name);
        } else {
            coll_error(SHM, "cannot create /dev/shm%s (%zu bytes): %s", seg->name, seg->size,
                       strerror(errno));
        }
        return COLL_ERR_SYSTEM;
    }
    seg->linked = 1;
    if (ftruncate(seg->fd, (off_t)seg->size) != 0) {
        coll_error(SHM, "cannot size /dev/shm%s to %zu bytes: %s", seg->name, seg->size,
                   strerror(errno));
        st = COLL_ERR_SYSTEM;
        goto err;
    }
    COLL_CHECK_GOTO(seg_map(seg, ctx->rank), st, err);
    /* the pages come with the reservation below: the memory policy must be set before it */
    if (ctx->mem_node >= 0 &&
        coll_mem_prefer_node(seg->base, seg->size, ctx->mem_node) == COLL_OK) {
        coll_info(SHM, "rank %d: /dev/shm%s (%zu bytes) on NUMA node %d", ctx->rank, seg->name,
                  seg->size, ctx->mem_node);
    }
    COLL_CHECK_GOTO(seg_reserve(seg, nslots, ctx->ring_size, ctx->win_size), st, err);

    shm_seg_hdr_t *h = seg->hdr; /* the new file reads as zeros: head = tail = 0 */
    h->version       = SHM_SEG_VERSION;
    h->nslots        = nslots;
    h->job_tag       = ctx->job_tag;
    h->comm_id       = ctx->comm_id;
    h->ring_size     = ctx->ring_size;
    h->win_size      = ctx->win_size;
    h->seg_size      = seg->size;
    h->rank          = ctx->rank;
    h->pid           = (int32_t)getpid();
    h->live_lock     = (uint32_t)seg_lock(seg->fd);
    h->self_addr     = (uint64_t)(uintptr_t)h;
    /* peers map it only after the handle went through the bootstrap (a full barrier) */
    atomic_thread_fence(memory_order_release);
    h->magic = SHM_SEG_MAGIC;
    coll_debug(SHM, "created /dev/shm%s: %zu bytes, %u rings of %" PRIu64 " bytes", seg->name,
               seg->size, nslots, ctx->ring_size);
    return COLL_OK;

err:
    shm_seg_close(seg);
    return st;
}

/* The listen handle must describe exactly the segment this rank expects from peer. */
coll_result_t shm_seg_check_handle(const struct coll_tp_ctx *ctx, const shm_handle_t *h, int peer,
                                   const char *name)
{
    const char *why = NULL;
    if (h->magic != SHM_HANDLE_MAGIC || h->version != SHM_SEG_VERSION) {
        why = "bad magic or version";
    } else if (h->rank != peer || memchr(h->name, '\0', sizeof(h->name)) == NULL ||
               strcmp(h->name, name) != 0) {
        why = "handle names another segment";
    } else if (h->nslots != (uint32_t)(ctx->nlocal - 1)) {
        why = "the ranks disagree on which ranks share this host";
    } else if (h->ring_size < SHM_RING_MIN || h->ring_size > SHM_RING_MAX ||
               (h->ring_size & (h->ring_size - 1)) != 0 || h->win_size > SHM_WIN_MAX ||
               h->win_size % SHM_WIN_ALIGN != 0 ||
               h->seg_size != shm_seg_size(h->nslots, h->ring_size, h->win_size)) {
        why = "bad ring, window or segment size";
    }
    if (why != NULL) {
        coll_error(SHM, "bad shm handle from rank %d: %s", peer, why);
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

coll_result_t shm_seg_check_mapped(const struct coll_tp_ctx *ctx, const shm_seg_t *seg,
                                   const shm_handle_t *h, int peer)
{
    const shm_seg_hdr_t *s   = seg->hdr;
    const char          *why = NULL;
    if (s->magic != SHM_SEG_MAGIC || s->version != SHM_SEG_VERSION) {
        why = "bad magic or version";
    } else if (s->job_tag != ctx->job_tag || s->comm_id != ctx->comm_id) {
        why = "it belongs to another job or communicator";
    } else if (s->rank != peer || s->pid != h->pid || s->nslots != h->nslots ||
               s->ring_size != h->ring_size || s->win_size != h->win_size ||
               s->seg_size != h->seg_size) {
        why = "it does not match the rank's handle";
    }
    if (why != NULL) {
        coll_error(SHM, "shared-memory segment /dev/shm%s of rank %d rejected: %s", seg->name, peer,
                   why);
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

static coll_result_t seg_open_peer(shm_seg_t *seg, const struct coll_tp_ctx *ctx,
                                   const shm_handle_t *h, int peer)
{
    struct stat sb;

    seg->fd = shm_open(seg->name, O_RDWR | O_CLOEXEC, 0);
    if (seg->fd < 0) {
        coll_error(SHM,
                   "cannot open /dev/shm%s of rank %d (pid %d): %s; ranks with one host id "
                   "must share /dev/shm (containers: a common IPC namespace), else set "
                   "COLL_HOSTID per container or COLL_TRANSPORT=tcp",
                   seg->name, peer, (int)h->pid, strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    if (fstat(seg->fd, &sb) != 0) {
        coll_error(SHM, "cannot stat /dev/shm%s: %s", seg->name, strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    if ((uint64_t)sb.st_size != h->seg_size || sb.st_uid != geteuid()) {
        coll_error(SHM,
                   "/dev/shm%s of rank %d has size %jd and owner %u, expected %" PRIu64 " and %u",
                   seg->name, peer, (intmax_t)sb.st_size, (unsigned)sb.st_uid, h->seg_size,
                   (unsigned)geteuid());
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

coll_result_t shm_seg_attach(shm_seg_t *seg, const struct coll_tp_ctx *ctx, const shm_handle_t *h,
                             int peer)
{
    coll_result_t st;

    seg_reset(seg);
    shm_seg_name(seg->name, sizeof(seg->name), ctx->comm_id, peer);
    COLL_CHECK(shm_seg_check_handle(ctx, h, peer, seg->name));
    seg->size = h->seg_size;
    COLL_CHECK_GOTO(seg_open_peer(seg, ctx, h, peer), st, err);
    COLL_CHECK_GOTO(seg_map(seg, peer), st, err);
    atomic_thread_fence(memory_order_acquire);
    COLL_CHECK_GOTO(shm_seg_check_mapped(ctx, seg, h, peer), st, err);
    return COLL_OK;

err:
    shm_seg_close(seg);
    return st;
}

void shm_seg_unlink(shm_seg_t *seg)
{
    if (seg->linked && shm_unlink(seg->name) != 0 && errno != ENOENT) {
        coll_warn(SHM, "cannot remove /dev/shm%s: %s", seg->name, strerror(errno));
    }
    seg->linked = 0;
}

void shm_seg_close(shm_seg_t *seg)
{
    if (seg->base != NULL && munmap(seg->base, seg->size) != 0) {
        coll_warn(SHM, "cannot unmap /dev/shm%s: %s", seg->name, strerror(errno));
    }
    shm_seg_unlink(seg);
    if (seg->fd >= 0) {
        close(seg->fd); /* also drops our liveness lock if this is our own segment */
    }
    seg_reset(seg);
}

/* 0 only when the owner certainly exited (its lock is gone); 1 when alive or unknown. */
int shm_seg_owner_alive(const shm_seg_t *seg)
{
    struct flock fl;
    if (seg->fd < 0 || seg->hdr == NULL || seg->hdr->live_lock == 0) {
        return 1;
    }
    /* an owner in this very process (several ranks in one process, ncclCommInitAll) is alive,
     * and record locks cannot show it: they belong to the process, not to the descriptor */
    if (seg->hdr->pid == (int32_t)getpid()) {
        return 1;
    }
    memset(&fl, 0, sizeof(fl));
    fl.l_type   = F_RDLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(seg->fd, F_GETLK, &fl) != 0) {
        return 1;
    }
    return fl.l_type != F_UNLCK;
}

int shm_seg_probe(const char **why_p)
{
    static char        why[160];
    static atomic_uint probe_count;
    char               name[SHM_NAME_MAX];

    snprintf(name, sizeof(name), "/coll-probe-%d-%u", (int)getpid(),
             atomic_fetch_add(&probe_count, 1));
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, sizeof(why), "cannot create /dev/shm segments: %s", strerror(errno));
        if (why_p != NULL) {
            *why_p = why;
        }
        return 0;
    }
    shm_unlink(name);
    close(fd);
    return 1;
}
