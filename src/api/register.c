/* SPDX-License-Identifier: MIT */
/*
 * Buffers registered with a communicator (coll_comm_register, coll_comm_deregister). Both are
 * collective: a registration gets the lowest free number, alike on every rank since every rank
 * registers and deregisters in the same order. Where every rank is on this host with shared
 * windows (the direct path's condition, src/engine/direct.c), two rounds of the small-call slots
 * make it: each rank publishes its buffer (pid, memfd, its device and inode, offset, length) or
 * why it has none, maps every peer's through /proc/<pid>/fd/<fd> (pidfd_getfd where /proc
 * refuses) after checking that the file it opened is that memfd, then publishes whether that
 * worked, so that no rank returns before every peer has mapped its buffer, and a failure on any
 * rank (a bad argument, no memory, a mapping refused) is the same error on every rank. A
 * deregistration is one round, so that the ranks' sets of registrations change together (the
 * direct path's eligibility reads them). Elsewhere registrations are only numbered.
 * A registered buffer's allocation is held: coll_mem_free refuses it until deregistered.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REG_MAGIC 0x52454731u /* "REG1" */

enum { REG_OK = 1, REG_NOT_SHAREABLE = 0, REG_BAD_ARGS = -1, REG_NO_MEMORY = -2 };

typedef struct reg_desc { /* round 1: a rank's buffer, or why it has none */
    int32_t  status;      /* REG_* */
    int32_t  pid;
    int32_t  fd;
    int32_t  pad;
    uint64_t dev, ino, fsize; /* of the memfd, checked by whoever opens it */
    uint64_t off;             /* of the buffer in the memfd */
    uint64_t bytes;           /* registered */
    uint64_t addr;            /* in its owner, for messages */
} reg_desc_t;

typedef struct reg_status { /* round 2: did this rank map every peer's buffer? */
    int32_t ok;
    int32_t peer; /* the one it could not map */
    int32_t err;  /* errno */
} reg_status_t;

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
    if (reg->held != NULL) {
        coll_mem_release(reg->held);
    }
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
    nfd = open(path, O_RDWR | O_CLOEXEC);
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

/* Map rank r's buffer (its descriptor d), to read and write (the direct path writes results
 * into the peers' outputs); 0 or an errno. The file opened must be the
 * memfd the owner published (same device and inode, large enough): a pid or descriptor number
 * reused, or another PID namespace, shows as ESTALE rather than as some other file's bytes. */
static int reg_map_peer(coll_reg_t *reg, int r, const reg_desc_t *d)
{
    size_t      page = (size_t)sysconf(_SC_PAGESIZE);
    size_t      head = (size_t)(d->off % page);
    size_t      len  = (head + (size_t)d->bytes + page - 1) / page * page;
    int         fd   = reg_open_peer_fd(d->pid, d->fd);
    struct stat sb;
    void       *p;

    if (fd < 0) {
        return errno != 0 ? errno : EACCES;
    }
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_dev != d->dev || (uint64_t)sb.st_ino != d->ino ||
        sb.st_size < 0 || (uint64_t)sb.st_size < d->fsize || d->off > d->fsize ||
        d->bytes > d->fsize - d->off) {
        close(fd);
        return ESTALE;
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(d->off - head));
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return e;
    }
    close(fd);
    reg->map[r]     = p;
    reg->map_len[r] = len;
    reg->at[r]      = (char *)p + head;
    return 0;
}

static coll_result_t reg_refused(coll_comm_t *comm, int rank, const reg_desc_t *d)
{
    switch (d->status) {
    case REG_BAD_ARGS:
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_register: rank %d passed buf %#llx, bytes %llu, or "
                                   "reg_p NULL: expected a buffer of at least 1 byte and reg_p",
                                   rank, (unsigned long long)d->addr, (unsigned long long)d->bytes);
    case REG_NO_MEMORY:
        return coll_comm_arg_error(comm, COLL_ERR_NO_MEMORY,
                                   "coll_comm_register: rank %d ran out of memory", rank);
    default:
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_register: rank %d's buffer %#llx (%llu bytes) is "
                                   "not inside one allocation of coll_mem_alloc",
                                   rank, (unsigned long long)d->addr, (unsigned long long)d->bytes);
    }
}

/* The two rounds; comm locked. reg NULL when this rank has none (mine says why). */
static coll_result_t reg_exchange(coll_comm_t *comm, coll_reg_t *reg, const coll_args_t *a,
                                  const reg_desc_t *mine)
{
    reg_desc_t    d;
    reg_status_t  s   = {1, -1, 0};
    int           bad = -1, parity;
    double        t0  = 0.0;
    coll_result_t st;

    coll_small_begin(comm, a);
    st = coll_small_round(comm, a, mine, sizeof(*mine), &parity, &t0);
    if (st == COLL_OK) {
        st = coll_small_check(comm, parity, a);
    }
    if (st != COLL_OK) {
        coll_small_end(comm, a, t0, st);
        return st;
    }
    for (int r = 0; r < comm->nranks; r++) { /* every descriptor read before the next round */
        memcpy(&d, coll_small_payload(comm, r, parity), sizeof(d));
        if (d.status != REG_OK) {
            if (bad < 0) {
                bad = r;
            }
            continue;
        }
        if (reg == NULL || mine->status != REG_OK) {
            continue;
        }
        reg->len[r] = (size_t)d.bytes;
        if (r != comm->rank && s.ok) {
            int e = reg_map_peer(reg, r, &d);
            if (e != 0) {
                s.ok   = 0;
                s.peer = r;
                s.err  = e;
            }
        }
    }
    if (bad >= 0) { /* every rank saw the same descriptors: the same error everywhere */
        memcpy(&d, coll_small_payload(comm, bad, parity), sizeof(d));
        coll_small_end(comm, a, t0, COLL_OK);
        return reg_refused(comm, bad, &d);
    }
    st = coll_small_round(comm, a, &s, sizeof(s), &parity, &t0);
    coll_small_end(comm, a, t0, st);
    for (int r = 0; r < comm->nranks && st == COLL_OK; r++) {
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
    return st;
}

/* A new registration's arrays; NULL when out of memory. */
static coll_reg_t *reg_new(coll_comm_t *comm)
{
    size_t      n   = (size_t)comm->nranks;
    coll_reg_t *reg = coll_calloc(1, sizeof(*reg), "registration");
    if (reg != NULL) {
        reg->comm    = comm; /* reg_free reads its rank count */
        reg->at      = coll_calloc(n, sizeof(*reg->at), "registration");
        reg->len     = coll_calloc(n, sizeof(*reg->len), "registration");
        reg->map     = coll_calloc(n, sizeof(*reg->map), "registration");
        reg->map_len = coll_calloc(n, sizeof(*reg->map_len), "registration");
    }
    if (reg != NULL &&
        (reg->at == NULL || reg->len == NULL || reg->map == NULL || reg->map_len == NULL)) {
        reg_free(reg);
        reg = NULL;
    }
    return reg;
}

/* The lowest free number, the table grown to hold it; -1 when out of memory. */
static int reg_number(coll_comm_t *comm)
{
    int          cap;
    coll_reg_t **n;
    for (int i = 0; i < comm->nregs; i++) {
        if (comm->regs[i] == NULL) {
            return i;
        }
    }
    if (comm->nregs < comm->regs_cap) {
        return comm->nregs;
    }
    cap = comm->regs_cap ? 2 * comm->regs_cap : 4;
    n   = coll_calloc((size_t)cap, sizeof(*n), "registrations");
    if (n == NULL) {
        return -1;
    }
    if (comm->regs != NULL) {
        memcpy(n, comm->regs, (size_t)comm->nregs * sizeof(*n));
    }
    coll_free(comm->regs);
    comm->regs     = n;
    comm->regs_cap = cap;
    return comm->nregs;
}

static uint64_t reg_hash(int num)
{
    return coll_hash64(0x7265676973746572ull ^ (uint64_t)num);
}

COLL_API coll_result_t coll_comm_register(coll_comm_t *comm, void *buf, size_t bytes,
                                          coll_reg_t **reg_p)
{
    coll_args_t    a = {.coll = COLL_OP_BARRIER, .dtype = COLL_UINT8, .op = COLL_SUM, .root = -1};
    reg_desc_t     mine;
    coll_reg_t    *reg = NULL;
    coll_mem_ref_t ref;
    coll_result_t  st = COLL_OK;
    int            num;

    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_register"));
    memset(&mine, 0, sizeof(mine));
    mine.status = REG_OK;
    mine.pid    = (int32_t)getpid();
    mine.bytes  = bytes;
    mine.addr   = (uint64_t)(uintptr_t)buf;
    if (reg_p == NULL || buf == NULL || bytes == 0) {
        mine.status = REG_BAD_ARGS;
    } else if ((reg = reg_new(comm)) == NULL) {
        mine.status = REG_NO_MEMORY;
    } else if (!coll_mem_hold(buf, bytes, &ref)) {
        mine.status = REG_NOT_SHAREABLE;
    } else {
        reg->held  = ref.base;
        mine.fd    = ref.fd;
        mine.off   = ref.off;
        mine.dev   = ref.dev;
        mine.ino   = ref.ino;
        mine.fsize = ref.fsize;
    }

    pthread_mutex_lock(&comm->lock);
    if (comm->error != COLL_OK) {
        pthread_mutex_unlock(&comm->lock);
        reg_free(reg);
        return coll_set_last_error(comm->error, "%s", comm->last_error);
    }
    num = reg_number(comm);
    if (num < 0 && mine.status == REG_OK) {
        mine.status = REG_NO_MEMORY;
    }
    if (coll_small_slots(comm)) {
        a.count = (size_t)(num < 0 ? comm->nregs : num);
        st      = reg_exchange(comm, mine.status == REG_OK ? reg : NULL, &a, &mine);
        if (st != COLL_OK && comm->error != COLL_OK) {
            coll_engine_fail_all(comm, st); /* in-flight calls end with it */
            st = coll_set_last_error(st, "%s", comm->last_error);
        }
    } else if (mine.status != REG_OK) { /* nothing exchanged: only this rank's can be told */
        st = reg_refused(comm, comm->rank, &mine);
    }
    if (st == COLL_OK) {
        reg->magic           = REG_MAGIC;
        reg->num             = num;
        reg->buf             = buf;
        reg->bytes           = bytes;
        reg->at[comm->rank]  = buf;
        reg->len[comm->rank] = bytes;
        comm->regs[num]      = reg;
        comm->nregs          = num + 1 > comm->nregs ? num + 1 : comm->nregs;
        comm->regs_live++;
        comm->regs_hash ^= reg_hash(num);
        *reg_p = reg;
        coll_debug(COLL, "rank %d: registration %d: %zu bytes at %p", comm->rank, num, bytes, buf);
    } else {
        reg_free(reg);
    }
    pthread_mutex_unlock(&comm->lock);
    return st;
}

COLL_API coll_result_t coll_comm_deregister(coll_comm_t *comm, coll_reg_t *reg)
{
    coll_args_t   a   = {.coll = COLL_OP_BARRIER, .dtype = COLL_INT8, .op = COLL_SUM, .root = -1};
    coll_result_t st  = COLL_OK;
    int           num = -1, parity;
    double        t0  = 0.0;

    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_deregister"));
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < comm->nregs && reg != NULL; i++) { /* by pointer: reg may be freed */
        if (comm->regs[i] == reg) {
            num = i;
        }
    }
    if (num < 0) {
        pthread_mutex_unlock(&comm->lock);
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_deregister: %p is not a registration of this "
                                   "communicator",
                                   (void *)reg);
    }
    if (coll_small_slots(comm) && comm->error == COLL_OK) { /* the sets change together */
        a.count = (size_t)num;
        coll_small_begin(comm, &a);
        st = coll_small_round(comm, &a, &num, sizeof(num), &parity, &t0);
        if (st == COLL_OK) {
            st = coll_small_check(comm, parity, &a);
        }
        coll_small_end(comm, &a, t0, st);
        if (st != COLL_OK) {
            coll_engine_fail_all(comm, st);
            st = coll_set_last_error(st, "%s", comm->last_error);
        }
    }
    /* dropped whatever happened: on a failed communicator this is the cleanup */
    comm->regs[num] = NULL;
    comm->regs_live--;
    comm->regs_hash ^= reg_hash(num);
    while (comm->nregs > 0 && comm->regs[comm->nregs - 1] == NULL) {
        comm->nregs--;
    }
    pthread_mutex_unlock(&comm->lock);
    reg_free(reg);
    return st;
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
