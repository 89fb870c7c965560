/* SPDX-License-Identifier: MIT */
/*
 * The single-producer single-consumer byte ring of the shm transport, and the futex doorbell
 * that lets either side sleep. Frames never wrap (a PAD frame fills the end of the ring), start
 * 64-byte aligned, and are validated by the consumer before use. Knows nothing about endpoints,
 * matching or segments: it sees a control block, a data area and one message at a time.
 *
 * Memory ordering. Data: the producer writes a frame, then stores head with release; the
 * consumer loads head with acquire before reading the frame, and stores tail with release after
 * its last read; the producer loads tail with acquire before reusing the space. Sleeping (the
 * classic lost-wakeup race) is closed with a store/fence/load pattern on both sides:
 *   sleeper: sleepers++ (seq_cst); fence; s = seq; check rings; futex_wait(seq, s)
 *   waker:   publish head or tail; fence; if (sleepers) { seq++; futex_wake(seq) }
 * Of the two fences one comes first in the single total order: either the sleeper's check sees
 * the publication, or the waker sees sleepers != 0 and bumps seq, which makes the futex_wait
 * return at once (value changed) or wakes it (already queued). The same argument with
 * want_space in place of sleepers lets a consumer skip the producer's doorbell unless the
 * producer is waiting for space.
 * Where the kernel offers membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) and this process could
 * register for it, the waker's fence moves to the sleeper, which is about to sleep anyway: the
 * sleeper calls membarrier after sleepers++, which runs a full barrier on every CPU running a
 * registered process, so a waker's publication before that point is visible to the sleeper's
 * check, and a waker's load of sleepers after it sees the increment. The hot path (every
 * publication) then costs no fence. Every rank of a host runs on one kernel, so all of them
 * register or none does.
 */
#include "shm.h"
#include "compiler.h"
#include "log.h"

#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t ring_round(uint64_t n)
{
    return (n + SHM_ALIGN - 1) & ~(uint64_t)(SHM_ALIGN - 1);
}

void shm_ring_view(shm_ring_t *r, void *ring_base, uint64_t size, int peer)
{
    memset(r, 0, sizeof(*r));
    r->ctrl = ring_base;
    r->data = (char *)ring_base + SHM_RING_CTRL_SIZE;
    r->size = size;
    r->frag = COLL_MIN_OF(size / 4, SHM_FRAG_MAX); /* several frames in flight, 64-multiple */
    r->peer = peer;
}

/* ---- producer ---- */

/* Free bytes; re-reads the shared tail only when the cached value says there is not enough. */
static uint64_t ring_free(shm_ring_t *r, uint64_t need)
{
    if (r->size - (r->pos - r->other) < need) {
        r->other = atomic_load_explicit(&r->ctrl->tail, memory_order_acquire);
    }
    return r->size - (r->pos - r->other);
}

static void ring_publish(shm_ring_t *r, uint64_t bytes)
{
    r->pos += bytes;
    r->seqno++;
    atomic_store_explicit(&r->ctrl->head, r->pos, memory_order_release);
}

static void ring_write_hdr(shm_ring_t *r, uint64_t off, uint32_t magic, uint32_t len,
                           const coll_tp_op_t *op)
{
    shm_frame_t f;
    memset(&f, 0, sizeof(f));
    f.magic = magic;
    f.len   = len;
    f.seqno = r->seqno;
    if (op != NULL) {
        f.tag    = op->tag;
        f.total  = op->len;
        f.offset = op->bytes;
    }
    memcpy(r->data + off, &f, sizeof(f));
}

int shm_ring_push(shm_ring_t *r, coll_tp_op_t *op, int *started, int *complete_p)
{
    int frames = 0;

    while (op->bytes < op->len || *started == 0) {
        uint64_t n      = COLL_MIN_OF((uint64_t)(op->len - op->bytes), r->frag);
        uint64_t need   = SHM_FRAME_HDR + ring_round(n);
        uint64_t off    = r->pos & (r->size - 1);
        uint64_t contig = r->size - off;

        if (contig < need) {
            /* the frame does not fit before the end: pad the rest, continue at offset 0 */
            if (ring_free(r, contig) < contig) {
                break;
            }
            ring_write_hdr(r, off, SHM_PAD_MAGIC, 0, NULL);
            ring_publish(r, contig);
            frames++;
            continue;
        }
        if (ring_free(r, need) < need) {
            break;
        }
        ring_write_hdr(r, off, SHM_FRAME_MAGIC, (uint32_t)n, op);
        if (n > 0) {
            memcpy(r->data + off + SHM_FRAME_HDR, (const char *)op->buf + op->bytes, n);
        }
        ring_publish(r, need);
        op->bytes += n;
        *started = 1;
        frames++;
    }
    *complete_p = (op->bytes == op->len && *started != 0);
    return frames;
}

int shm_ring_push_ctl(shm_ring_t *r, uint32_t magic, uint64_t tag, uint64_t total, uint64_t addr)
{
    /* positions are 64-aligned, so a header always fits before the end of the ring */
    if (ring_free(r, SHM_FRAME_HDR) < SHM_FRAME_HDR) {
        return 0;
    }
    shm_frame_t f;
    memset(&f, 0, sizeof(f));
    f.magic  = magic;
    f.tag    = tag;
    f.total  = total;
    f.offset = addr;
    f.seqno  = r->seqno;
    memcpy(r->data + (r->pos & (r->size - 1)), &f, sizeof(f));
    ring_publish(r, SHM_FRAME_HDR);
    return 1;
}

/* Has the consumer freed anything since the producer stalled at stall_tail? */
int shm_ring_has_space(shm_ring_t *r, uint64_t stall_tail)
{
    return atomic_load_explicit(&r->ctrl->tail, memory_order_acquire) != stall_tail;
}

/* Producer: ask (or stop asking) the consumer to ring our doorbell when it frees space. The
 * fence orders the flag before the caller's next tail load (see the header comment). */
void shm_ring_set_want_space(shm_ring_t *r, int on)
{
    atomic_store_explicit(&r->ctrl->want_space, on ? 1u : 0u, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
}

/* Consumer, after storing tail: does the producer wait for space? */
int shm_ring_wants_space(shm_ring_t *r)
{
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&r->ctrl->want_space, memory_order_relaxed) != 0;
}

/* ---- consumer ---- */

int shm_ring_nonempty(shm_ring_t *r)
{
    return atomic_load_explicit(&r->ctrl->head, memory_order_acquire) != r->pos;
}

static coll_result_t ring_bad(const shm_ring_t *r, uint64_t off, const char *what, uint64_t val)
{
    coll_error(SHM,
               "corrupt frame from rank %d at ring offset %" PRIu64 " (frame %" PRIu64
               "): %s (value 0x%" PRIx64 "); the endpoint is closed",
               r->peer, off, r->seqno, what, val);
    return COLL_ERR_TRANSPORT;
}

/* Checks of a data frame header; f is a private copy, so the peer cannot change it after. */
static coll_result_t ring_check_data(const shm_ring_t *r, const shm_frame_t *f, uint64_t off,
                                     uint64_t avail)
{
    if (f->len > r->frag) {
        return ring_bad(r, off, "payload longer than a frame may be", f->len);
    }
    if (f->total > SHM_TOTAL_MAX || f->offset > f->total || f->len > f->total - f->offset) {
        return ring_bad(r, off, "payload outside its message", f->offset);
    }
    if (f->offset % SHM_ALIGN != 0 || (f->offset + f->len < f->total && f->len % SHM_ALIGN != 0)) {
        return ring_bad(r, off, "misaligned fragment", f->offset);
    }
    uint64_t bytes = SHM_FRAME_HDR + ring_round(f->len);
    if (bytes > avail || bytes > r->size - off) {
        return ring_bad(r, off, "frame extends past the published data", bytes);
    }
    return COLL_OK;
}

coll_result_t shm_ring_peek(shm_ring_t *r, shm_frame_t *f, const void **payload_p)
{
    for (;;) {
        if (r->other == r->pos) {
            r->other = atomic_load_explicit(&r->ctrl->head, memory_order_acquire);
            if (r->other == r->pos) {
                return COLL_AGAIN;
            }
        }
        uint64_t avail = r->other - r->pos;
        uint64_t off   = r->pos & (r->size - 1);
        if (avail > r->size || avail < SHM_FRAME_HDR || avail % SHM_ALIGN != 0) {
            return ring_bad(r, off, "ring head out of range", avail);
        }
        memcpy(f, r->data + off, sizeof(*f));
        if (f->magic != SHM_FRAME_MAGIC && f->magic != SHM_PAD_MAGIC && f->magic != SHM_RTS_MAGIC &&
            f->magic != SHM_FIN_MAGIC) {
            return ring_bad(r, off, "bad magic", f->magic);
        }
        if (f->seqno != r->seqno) {
            return ring_bad(r, off, "frame out of sequence", f->seqno);
        }
        if (f->magic == SHM_RTS_MAGIC || f->magic == SHM_FIN_MAGIC) {
            if (f->len != 0 || f->total == 0 || f->total > SHM_TOTAL_MAX) {
                return ring_bad(r, off, "bad single-copy frame", f->total);
            }
            *payload_p = NULL;
            return COLL_OK;
        }
        if (f->magic == SHM_FRAME_MAGIC) {
            coll_result_t st = ring_check_data(r, f, off, avail);
            if (st != COLL_OK) {
                return st;
            }
            *payload_p = r->data + off + SHM_FRAME_HDR;
            return COLL_OK;
        }
        if (off == 0 || f->len != 0 || avail < r->size - off) {
            return ring_bad(r, off, "bad pad frame", f->len);
        }
        r->pos += r->size - off;
        r->seqno++;
        atomic_store_explicit(&r->ctrl->tail, r->pos, memory_order_release);
    }
}

void shm_ring_consume(shm_ring_t *r, const shm_frame_t *f)
{
    r->pos += SHM_FRAME_HDR + ring_round(f->len);
    r->seqno++;
    atomic_store_explicit(&r->ctrl->tail, r->pos, memory_order_release);
}

/* ---- doorbell ---- */

static long bell_futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    /* No FUTEX_PRIVATE_FLAG: the word is in a MAP_SHARED mapping used by several processes. */
    return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

void shm_bell_force(shm_doorbell_t *b)
{
    atomic_fetch_add_explicit(&b->seq, 1, memory_order_seq_cst);
    bell_futex(&b->seq, FUTEX_WAKE, INT_MAX, NULL);
}

static pthread_once_t bell_once = PTHREAD_ONCE_INIT;
static int            bell_asym; /* 1: sleepers run membarrier, wakers need no fence */

static void bell_asym_init(void)
{
    long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0);

    if (q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
        (q & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0 &&
        syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0) == 0) {
        bell_asym = 1;
    }
    coll_debug(SHM, "doorbell: %s",
               bell_asym ? "membarrier on the sleeping side, no fence on "
                           "the waking side"
                         : "a fence on both sides");
}

void shm_bell_setup(void)
{
    pthread_once(&bell_once, bell_asym_init);
}

void shm_bell_ring(shm_doorbell_t *b)
{
    if (bell_asym) {
        atomic_signal_fence(memory_order_seq_cst); /* the sleeper's membarrier orders us */
    } else {
        atomic_thread_fence(memory_order_seq_cst);
    }
    if (atomic_load_explicit(&b->sleepers, memory_order_relaxed) != 0) {
        shm_bell_force(b);
    }
}

uint32_t shm_bell_prepare(shm_doorbell_t *b)
{
    atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
    if (bell_asym && syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0) != 0) {
        /* cannot happen once registered; a waker without its fence may then leave this
         * sleeper to its timeout (a slice of at most 20 ms), never forever */
        coll_debug(SHM, "membarrier failed");
    }
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&b->seq, memory_order_acquire);
}

void shm_bell_cancel(shm_doorbell_t *b)
{
    atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}

void shm_bell_wait(shm_doorbell_t *b, uint32_t seen, double timeout_s)
{
    struct timespec ts;
    ts.tv_sec  = (time_t)timeout_s;
    ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_nsec = 999999999L;
    }
    /* EAGAIN (seq moved), EINTR and ETIMEDOUT all mean "go and look": no error to report. */
    bell_futex(&b->seq, FUTEX_WAIT, seen, &ts);
    shm_bell_cancel(b);
}
