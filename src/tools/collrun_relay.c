/* SPDX-License-Identifier: MIT */
/*
 * collrun_relay.c -- --prefix: each rank writes into two pipes (stdout, stderr) and collrun
 * relays every complete line to its own stdout or stderr as "[rank] line". A partial last line
 * is relayed (with a newline added) at EOF; a line longer than COLLRUN_LINE_MAX is relayed in
 * pieces. It only moves bytes: when to read is collrun_loop.c's decision.
 */
#include "collrun.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set when writing to collrun's stdout (index 0) or stderr (1) failed: readers went away. */
static int relay_out_dead[2];

int collrun_relay_open(collrun_rank_t *rank, int child_fds[2])
{
    int p[2];
    int i;

    for (i = 0; i < 2; i++) {
        if (pipe2(p, O_CLOEXEC) != 0) {
            collrun_msg("cannot create output pipes: %s", strerror(errno));
            if (i == 1) {
                close(rank->out[0].fd);
                close(child_fds[0]);
                rank->out[0].fd = -1;
            }
            return -1;
        }
        /* Only collrun's end is non-blocking: the rank's writes must block when it is full. */
        fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
        rank->out[i].fd     = p[0];
        rank->out[i].out_fd = i == 0 ? STDOUT_FILENO : STDERR_FILENO;
        child_fds[i]        = p[1];
    }
    return 0;
}

int collrun_relay_pollable(const collrun_stream_t *st)
{
    return st->fd >= 0;
}

static void relay_close(collrun_stream_t *st)
{
    if (st->fd >= 0) {
        close(st->fd);
        st->fd = -1;
    }
}

/* Writes all of buf; on failure stops relaying to that descriptor for good. */
static void relay_write(int out_fd, const char *buf, size_t len)
{
    ssize_t n;

    while (len > 0 && !relay_out_dead[out_fd - 1]) {
        n = write(out_fd, buf, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            relay_out_dead[out_fd - 1] = 1;
            break;
        }
        buf += n;
        len -= (size_t)n;
    }
}

/*
 * Relays the complete lines held in st, and, when `flush` is set, the incomplete rest too
 * (ending it with a newline when `eof` is set). The output is built in one buffer so that a
 * batch of lines costs one write.
 */
static void relay_emit(collrun_stream_t *st, int rank, int flush, int eof)
{
    static char  *out;
    static size_t out_cap;
    char          prefix[16];
    size_t        plen = (size_t)snprintf(prefix, sizeof(prefix), "[%d] ", rank);
    size_t        pos  = 0;
    size_t        olen = 0;
    size_t        need = st->len + 1;
    size_t        i;
    size_t        n;
    char         *nl;

    for (i = 0; i < st->len; i++) {
        need += st->buf[i] == '\n' ? plen : 0;
    }
    need += plen;
    if (need > out_cap) {
        char *p = realloc(out, need);

        if (p == NULL) {
            return; /* keep the bytes; the next call tries again */
        }
        out     = p;
        out_cap = need;
    }
    while (pos < st->len) {
        nl = memchr(st->buf + pos, '\n', st->len - pos);
        if (nl == NULL && !flush) {
            break;
        }
        n = nl != NULL ? (size_t)(nl - (st->buf + pos)) + 1 : st->len - pos;
        if (!st->midline) {
            memcpy(out + olen, prefix, plen);
            olen += plen;
        }
        memcpy(out + olen, st->buf + pos, n);
        olen += n;
        pos += n;
        st->midline = nl == NULL;
    }
    if (eof && st->midline) {
        out[olen++] = '\n';
        st->midline = 0;
    }
    relay_write(st->out_fd, out, olen);
    memmove(st->buf, st->buf + pos, st->len - pos);
    st->len -= pos;
}

/*
 * Reads what the pipe holds (all of it, up to COLLRUN_DRAIN_MAX, when `drain` is set, else one
 * chunk) and relays the complete lines. Returns 1 when the pipe reached EOF (and is closed).
 */
int collrun_relay_read(collrun_stream_t *st, int rank, int drain)
{
    size_t  total = 0;
    ssize_t n;

    while (st->fd >= 0) {
        if (st->cap - st->len < 4096) {
            size_t cap = st->cap == 0 ? 4096 : st->cap * 2;
            char  *p   = realloc(st->buf, cap);

            if (p == NULL) {
                collrun_msg("out of memory relaying the output of rank %d", rank);
                relay_emit(st, rank, 1, 1);
                relay_close(st);
                return 1;
            }
            st->buf = p;
            st->cap = cap;
        }
        n = read(st->fd, st->buf + st->len, st->cap - st->len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) {
                relay_emit(st, rank, 1, 1);
                relay_close(st);
                return 1;
            }
            return 0;
        }
        st->len += (size_t)n;
        total += (size_t)n;
        relay_emit(st, rank, st->len >= COLLRUN_LINE_MAX, 0);
        if (relay_out_dead[st->out_fd - 1]) {
            /* Nobody reads our output: close the pipe so the rank gets EPIPE, as it would
             * writing there itself. */
            relay_close(st);
            return 1;
        }
        if (!drain || total >= COLLRUN_DRAIN_MAX) {
            return 0; /* a process the rank left behind may write forever */
        }
    }
    return 1;
}

/* At the end of the job: relay what is left, end an incomplete line, close both pipes. */
void collrun_relay_finish(collrun_rank_t *rank, int rank_id)
{
    int i;

    for (i = 0; i < 2; i++) {
        collrun_stream_t *st = &rank->out[i];

        if (st->fd >= 0) {
            collrun_relay_read(st, rank_id, 1);
        }
        if (st->len > 0 || st->midline) {
            relay_emit(st, rank_id, 1, 1);
        }
        relay_close(st);
        free(st->buf);
        st->buf = NULL;
        st->len = 0;
        st->cap = 0;
    }
}
