/* SPDX-License-Identifier: MIT */
/*
 * Buffers registered with a communicator (coll_comm_register, coll_comm_deregister). Collective:
 * registrations are numbered in call order, alike on every rank. Where every rank is on this host
 * with shared windows (the direct path's condition, src/engine/direct.c), two rounds of the
 * small-call slots make it: each rank publishes its buffer (pid, memfd, offset, length), maps
 * every peer's through /proc/<pid>/fd/<fd> (pidfd_getfd where /proc refuses), then publishes
 * whether that worked, so that no rank returns (and may free its memory) before every peer has
 * mapped it, and a failure anywhere is an error everywhere. Elsewhere the registration is only
 * numbered. Deregistering is local: unmapping the peers' buffers concerns this rank only, and a
 * rank that dropped a registration publishes no buffer in it, which sends the others' calls on
 * it to the engine as well.
 */
#include "api/comm.h"
#include "api/mem.h"
#include "api/register.h"
#include "engine/engine.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REG_MAGIC 0x52454731u /* "REG1" */

typedef struct reg_desc { /* round 1: a rank's buffer */
    int32_t  ok;          /* 1: inside coll_mem_alloc memory */
    int32_t  pid;
    int32_t  fd;
    int32_t  pad;
    uint64_t off;   /* of the buffer in the memfd */
    uint64_t bytes; /* registered */
    uint64_t addr;  /* in its owner, for messages */
} reg_desc_t;

typedef struct reg_status { /* round 2: did this rank map every peer's buffer? */
    int32_t ok;
    int32_t peer; /* the one it could not map */
    int32_t err;  /* errno */
} reg_status_t;

static int reg_shared(const coll_comm_t *comm)
{
    const coll_comm_tp_t *tp;
    if (comm->win_tp < 0 || comm->nranks < 2) {
        return 0;
    }
    tp = &comm->tp[comm->win_tp];
    return tp->ops->small_slot != NULL && tp->ops->small_poll != NULL &&
           tp->ops->small_publish != NULL;
}

static void reg_unmap(coll_reg_t *reg)
{
    for (int r = 0; reg->map != NULL && r < reg->comm->nranks; r++) {
        if (reg->map[r] != NULL) {
            munmap(reg->map[r], reg->map_len[r]);
        }
    }
}

static void reg_free(coll_reg_t *reg)
{
    if (reg == NULL) {
        return;
    }
    reg_unmap(reg);
    reg->magic = 0;
    coll_free(reg->at);
    coll_free(reg->len);
    coll_free(reg->map);
    coll_free(reg->map_len);
    coll_free(reg);
}

/* A descriptor of this process' memfd fd, opened anew: through /proc, else pidfd_getfd. */
static int reg_open_peer_fd(int pid, int fd)
{
    char path[64];
    int  nfd;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    nfd = open(path, O_RDONLY | O_CLOEXEC);
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    if (nfd < 0) {
        int e     = errno;
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd >= 0) {
            nfd = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
            close(pidfd);
        }
        if (nfd < 0) {
            errno = e; /* /proc's reason is the one to tell */
        }
    }
#endif
    return nfd;
}

/* Map rank r's buffer (its descriptor d) read-only; 0 or an errno. */
static int reg_map_peer(coll_reg_t *reg, int r, const reg_desc_t *d)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t head = (size_t)(d->off % page);
    size_t len  = (head + (size_t)d->bytes + page - 1) / page * page;
    int    fd   = reg_open_peer_fd(d->pid, d->fd);
    void  *p;

    if (fd < 0) {
        return errno != 0 ? errno : EACCES;
    }
    p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)(d->off - head));
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return e;
    }
    close(fd);
    reg->map[r]     = p;
    reg->map_len[r] = len;
    reg->at[r]      = (const char *)p + head;
    return 0;
}

/* The two rounds; comm locked. */
static coll_result_t reg_exchange(coll_comm_t *comm, coll_reg_t *reg, const coll_args_t *a,
                                  const reg_desc_t *mine)
{
    reg_desc_t    d[1];
    reg_status_t  s = {1, -1, 0};
    int           parity, bad = -1;
    double        t0 = 0.0;
    coll_result_t st;

    coll_small_begin(comm, a);
    st = coll_small_round(comm, a, mine, sizeof(*mine), &parity, &t0);
    if (st != COLL_OK) {
        coll_small_end(comm, a, t0, st);
        return st;
    }
    for (int r = 0; r < comm->nranks; r++) { /* read every descriptor before the next round */
        memcpy(d, coll_small_payload(comm, r, parity), sizeof(d[0]));
        if (!d->ok) {
            if (bad < 0) {
                bad = r;
            }
            continue;
        }
        reg->len[r] = (size_t)d->bytes;
        if (r != comm->rank && mine->ok && s.ok) {
            int e = reg_map_peer(reg, r, d);
            if (e != 0) {
                s.ok   = 0;
                s.peer = r;
                s.err  = e;
            }
        }
    }
    if (bad >= 0) {
        reg_desc_t bd;
        memcpy(&bd, coll_small_payload(comm, bad, parity), sizeof(bd));
        coll_small_end(comm, a, t0, COLL_OK);
        return coll_comm_arg_error(
            comm, COLL_ERR_INVALID_ARG,
            "coll_comm_register: rank %d's buffer %#llx (%llu bytes) is not inside one allocation "
            "of coll_mem_alloc",
            bad, (unsigned long long)bd.addr, (unsigned long long)bd.bytes);
    }
    st = coll_small_round(comm, a, &s, sizeof(s), &parity, &t0);
    coll_small_end(comm, a, t0, st);
    if (st != COLL_OK) {
        return st;
    }
    for (int r = 0; r < comm->nranks; r++) {
        reg_status_t rs;
        memcpy(&rs, coll_small_payload(comm, r, parity), sizeof(rs));
        if (!rs.ok) {
            return coll_comm_arg_error(
                comm, COLL_ERR_SYSTEM,
                "coll_comm_register: rank %d cannot map rank %d's registered memory (%s; it "
                "opens /proc/<pid>/fd of its owner: same user and the rights to read another "
                "process' memory, see collinfo doctor)",
                r, rs.peer, strerror(rs.err));
        }
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_comm_register(coll_comm_t *comm, void *buf, size_t bytes,
                                          coll_reg_t **reg_p)
{
    coll_args_t   a = {.coll = COLL_OP_BARRIER, .dtype = COLL_UINT8, .op = COLL_SUM, .root = -1};
    reg_desc_t    mine;
    coll_reg_t   *reg;
    coll_result_t st  = COLL_OK;
    int           fd  = -1;
    uint64_t      off = 0;

    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_register"));
    if (reg_p == NULL) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG, "coll_comm_register: reg_p is NULL");
    }
    *reg_p = NULL;
    if (buf == NULL || bytes == 0) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_register: buf %p, bytes %zu: expected a buffer of "
                                   "at least 1 byte",
                                   buf, bytes);
    }
    reg = coll_calloc(1, sizeof(*reg), "registration");
    if (reg != NULL) {
        reg->at      = coll_calloc((size_t)comm->nranks, sizeof(*reg->at), "registration");
        reg->len     = coll_calloc((size_t)comm->nranks, sizeof(*reg->len), "registration");
        reg->map     = coll_calloc((size_t)comm->nranks, sizeof(*reg->map), "registration");
        reg->map_len = coll_calloc((size_t)comm->nranks, sizeof(*reg->map_len), "registration");
    }
    if (reg == NULL || reg->at == NULL || reg->len == NULL || reg->map == NULL ||
        reg->map_len == NULL) {
        reg_free(reg);
        return coll_comm_arg_error(comm, COLL_ERR_NO_MEMORY, "coll_comm_register: out of memory");
    }
    reg->magic = REG_MAGIC;
    reg->comm  = comm;
    reg->buf   = buf;
    reg->bytes = bytes;

    memset(&mine, 0, sizeof(mine));
    mine.ok    = coll_mem_find(buf, bytes, &fd, &off);
    mine.pid   = (int32_t)getpid();
    mine.fd    = fd;
    mine.off   = off;
    mine.bytes = bytes;
    mine.addr  = (uint64_t)(uintptr_t)buf;

    pthread_mutex_lock(&comm->lock);
    if (comm->error != COLL_OK) {
        pthread_mutex_unlock(&comm->lock);
        reg_free(reg);
        return coll_set_last_error(comm->error, "%s", comm->last_error);
    }
    if (reg_shared(comm)) {
        a.count = (size_t)comm->nregs;
        st      = reg_exchange(comm, reg, &a, &mine);
        if (st != COLL_OK && comm->error != COLL_OK) {
            coll_engine_fail_all(comm, st); /* in-flight calls end with it */
            st = coll_set_last_error(st, "%s", comm->last_error);
        }
    } else if (!mine.ok) { /* nothing to exchange: only this rank's buffer can be told wrong */
        st = coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                 "coll_comm_register: buffer %p (%zu bytes) is not inside one "
                                 "allocation of coll_mem_alloc",
                                 buf, bytes);
    }
    if (st == COLL_OK && comm->nregs == comm->regs_cap) {
        int          cap = comm->regs_cap ? 2 * comm->regs_cap : 4;
        coll_reg_t **n   = coll_calloc((size_t)cap, sizeof(*n), "registrations");
        if (n == NULL) {
            st = coll_comm_fail(comm, COLL_ERR_NO_MEMORY,
                                "rank %d: coll_comm_register: out of "
                                "memory",
                                comm->rank);
        } else {
            if (comm->regs != NULL) {
                memcpy(n, comm->regs, (size_t)comm->nregs * sizeof(*n));
            }
            coll_free(comm->regs);
            comm->regs     = n;
            comm->regs_cap = cap;
        }
    }
    if (st == COLL_OK) {
        reg->num             = comm->nregs++;
        reg->at[comm->rank]  = buf;
        reg->len[comm->rank] = bytes;
        comm->regs[reg->num] = reg;
        comm->regs_live++;
        *reg_p = reg;
        coll_debug(COLL, "rank %d: registration %d: %zu bytes at %p", comm->rank, reg->num, bytes,
                   buf);
    } else {
        reg_free(reg);
    }
    pthread_mutex_unlock(&comm->lock);
    return st;
}

COLL_API coll_result_t coll_comm_deregister(coll_comm_t *comm, coll_reg_t *reg)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_deregister"));
    pthread_mutex_lock(&comm->lock);
    if (reg == NULL || reg->magic != REG_MAGIC || reg->comm != comm || reg->num < 0 ||
        reg->num >= comm->nregs || comm->regs[reg->num] != reg) {
        pthread_mutex_unlock(&comm->lock);
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_deregister: %p is not a registration of this "
                                   "communicator",
                                   (void *)reg);
    }
    comm->regs[reg->num] = NULL;
    comm->regs_live--;
    pthread_mutex_unlock(&comm->lock);
    reg_free(reg);
    return COLL_OK;
}

void coll_reg_free_all(coll_comm_t *comm)
{
    for (int i = 0; i < comm->nregs; i++) {
        reg_free(comm->regs[i]);
    }
    coll_free(comm->regs);
    comm->regs      = NULL;
    comm->nregs     = 0;
    comm->regs_cap  = 0;
    comm->regs_live = 0;
}

int coll_reg_find(const coll_comm_t *comm, const void *ptr, size_t bytes, int32_t *num_p,
                  uint64_t *off_p)
{
    const char *p = ptr;
    for (int i = 0; i < comm->nregs; i++) {
        const coll_reg_t *reg = comm->regs[i];
        if (reg != NULL && p >= reg->buf && p < reg->buf + reg->bytes &&
            bytes <= (size_t)(reg->buf + reg->bytes - p)) {
            *num_p = i;
            *off_p = (uint64_t)(p - reg->buf);
            return 1;
        }
    }
    return 0;
}
