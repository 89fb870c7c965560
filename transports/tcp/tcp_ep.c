/* SPDX-License-Identifier: MIT */
/*
 * TCP data path: a message is cut into frames of at most frag_size payload, striped round-robin
 * over the peer's sockets, each written with one sendmsg (header + payload). Receivers parse
 * frames per socket and read payloads straight into a posted receive when the matching layer
 * offers one, else into a bounce buffer handed to coll_tp_match_deliver(). No allocation per
 * message; peer failure fails everything pending on the endpoint. Connection setup is elsewhere.
 */
#include "tcp.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>
#include "compiler.h"
#include "error.h"
#include "log.h"
#include "util.h"

#define TCP_SREQ_GROW_MIN    32
#define TCP_RX_BUDGET_FRAMES 4 /* frames read per socket per call, for fairness */

/* ---- send request freelist (grown rarely, freed with the endpoint) ---- */

static coll_result_t tcp_sreq_grow(coll_tcp_ep_t *ep, size_t n)
{
    const size_t head = 16; /* keeps the requests 8-byte aligned behind the chain pointer */
    char        *chunk;
    size_t       i;

    chunk = coll_malloc(head + n * ep->sreq_size, "tcp send requests");
    if (chunk == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    *(void **)chunk = ep->sreq_chunks;
    ep->sreq_chunks = chunk;
    for (i = 0; i < n; i++) {
        coll_tcp_sreq_t *sreq = (coll_tcp_sreq_t *)(void *)(chunk + head + i * ep->sreq_size);
        sreq->free_next       = ep->sreq_free;
        ep->sreq_free         = sreq;
    }
    ep->sreq_count += n;
    return COLL_OK;
}

static coll_tcp_sreq_t *tcp_sreq_get(coll_tcp_ep_t *ep)
{
    coll_tcp_sreq_t *sreq;

    if (ep->sreq_free == NULL &&
        tcp_sreq_grow(ep, COLL_MAX_OF(ep->sreq_count, (size_t)TCP_SREQ_GROW_MIN)) != COLL_OK) {
        return NULL;
    }
    sreq          = ep->sreq_free;
    ep->sreq_free = sreq->free_next;
    return sreq;
}

static void tcp_sreq_put(coll_tcp_ep_t *ep, coll_tcp_sreq_t *sreq)
{
    sreq->op        = NULL;
    sreq->free_next = ep->sreq_free;
    ep->sreq_free   = sreq;
}

/* ---- endpoint life cycle and failure ---- */

coll_result_t coll_tcp_ep_create(coll_tcp_ctx_t *ctx, int peer, coll_tcp_ep_t **ep_p)
{
    coll_tcp_ep_t *ep;
    int            k;

    ep = coll_calloc(1, sizeof(*ep), "tcp endpoint");
    if (ep == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    ep->super.ops  = &coll_tp_tcp_ops;
    ep->super.peer = peer;
    ep->ctx        = ctx;
    ep->nsocks     = ctx->nsocks;
    ep->sreq_size =
        (sizeof(coll_tcp_sreq_t) + (size_t)ep->nsocks * sizeof(coll_tcp_slink_t) + 7) & ~(size_t)7;
    snprintf(ep->addr_str, sizeof(ep->addr_str), "?");
    coll_tp_match_init(&ep->match, peer, "tcp");
    for (k = 0; k < COLL_TCP_MAX_SOCKS; k++) {
        ep->socks[k].fd    = -1;
        ep->socks[k].index = k;
        ep->socks[k].ep    = ep;
    }
    for (k = 0; k < ep->nsocks; k++) {
        ep->socks[k].rx_bounce = coll_malloc(ctx->frag_size, "tcp bounce buffer");
        ep->socks[k].rx_stage  = coll_malloc(COLL_TCP_RX_STAGE, "tcp receive stage");
        if (ep->socks[k].rx_bounce == NULL || ep->socks[k].rx_stage == NULL) {
            goto err;
        }
    }
    if (tcp_sreq_grow(ep, TCP_SREQ_GROW_MIN) != COLL_OK) {
        goto err;
    }
    *ep_p = ep;
    return COLL_OK;

err:
    coll_tcp_ep_destroy(ep, COLL_ERR_ABORTED);
    return COLL_ERR_NO_MEMORY;
}

static int tcp_ep_busy(const coll_tcp_ep_t *ep)
{
    int k;

    if (ep->sends_pending > 0 || coll_tp_match_busy(&ep->match)) {
        return 1;
    }
    for (k = 0; k < ep->nsocks; k++) {
        if (ep->socks[k].rx_state != COLL_TCP_RX_HDR || ep->socks[k].rx_got > 0) {
            return 1; /* the peer stopped in the middle of a frame */
        }
    }
    return 0;
}

/* Logs the failure once, when it first matters to an operation. */
static void tcp_ep_report(coll_tcp_ep_t *ep)
{
    if (ep->fail_logged) {
        return;
    }
    ep->fail_logged = 1;
    if (ep->fail_status == COLL_ERR_REMOTE) {
        coll_error(TCP, "connection to rank %d (%s) lost: %s (peer process died?)", ep->super.peer,
                   ep->addr_str, ep->fail_reason);
    } else {
        coll_error(TCP, "connection to rank %d (%s) failed: %s", ep->super.peer, ep->addr_str,
                   ep->fail_reason);
    }
}

/* Closes the sockets and completes every pending send and receive with status. */
/* After quiesce (every rank finished, see transport.h) close without TIME_WAIT, so that
 * thousands of communicator cycles do not exhaust the port range; else a graceful close. */
static void tcp_close_now(const coll_tcp_ctx_t *ctx, int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    if (ctx->quiesced && setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) != 0) {
        coll_debug(TCP, "setsockopt(SO_LINGER) failed: %s", strerror(errno));
    }
    close(fd);
}

static void tcp_ep_shutdown(coll_tcp_ep_t *ep, coll_result_t status)
{
    coll_tcp_sreq_t  *list = NULL, *sreq;
    coll_tcp_slink_t *link;
    coll_tp_op_t     *op;
    int               k;

    for (k = 0; k < COLL_TCP_MAX_SOCKS; k++) {
        coll_tcp_sock_t *s = &ep->socks[k];
        if (s->fd >= 0) {
            tcp_close_now(ep->ctx, s->fd);
            s->fd = -1;
        }
        for (link = s->txq_head; link != NULL; link = link->next) {
            if (!link->sreq->failed) { /* a send is queued on up to nsocks sockets */
                link->sreq->failed    = 1;
                link->sreq->free_next = list;
                list                  = link->sreq;
            }
        }
        s->txq_head = s->txq_tail = NULL;
        s->tx_off                 = 0;
        s->rx_zc                  = NULL;
        s->rx_stage_off = s->rx_stage_len = 0;
    }
    ep->sends_pending = 0;
    while (list != NULL) {
        sreq = list;
        list = sreq->free_next;
        op   = sreq->op;
        tcp_sreq_put(ep, sreq);
        op->tp_priv = NULL;
        op->done(op->arg, status);
    }
    if (!ep->match_closed) {
        ep->match_closed = 1;
        coll_tp_match_fini(&ep->match, status);
    }
}

void coll_tcp_ep_fail(coll_tcp_ep_t *ep, coll_result_t status, const char *fmt, ...)
{
    va_list ap;

    if (ep->failed) {
        return;
    }
    ep->failed      = 1;
    ep->fail_status = status;
    va_start(ap, fmt);
    vsnprintf(ep->fail_reason, sizeof(ep->fail_reason), fmt, ap);
    va_end(ap);
    if (tcp_ep_busy(ep) || status != COLL_ERR_REMOTE) {
        tcp_ep_report(ep);
    } else {
        /* nothing was waiting: most likely an orderly shutdown; an error only if used again */
        coll_debug(TCP, "connection to rank %d (%s) closed: %s", ep->super.peer, ep->addr_str,
                   ep->fail_reason);
    }
    tcp_ep_shutdown(ep, status);
}

void coll_tcp_ep_destroy(coll_tcp_ep_t *ep, coll_result_t status)
{
    void *chunk;
    int   k;

    tcp_ep_shutdown(ep, status);
    for (k = 0; k < COLL_TCP_MAX_SOCKS; k++) {
        coll_free(ep->socks[k].rx_bounce);
        coll_free(ep->socks[k].rx_stage);
    }
    while ((chunk = ep->sreq_chunks) != NULL) {
        ep->sreq_chunks = *(void **)chunk;
        coll_free(chunk);
    }
    coll_free(ep);
}

/* ---- send side ---- */

static void tcp_send_complete(coll_tcp_ep_t *ep, coll_tcp_sreq_t *sreq)
{
    coll_tp_op_t *op = sreq->op;

    tcp_sreq_put(ep, sreq);
    ep->sends_pending--;
    op->bytes   = op->len;
    op->tp_priv = NULL;
    op->done(op->arg, COLL_OK);
}

/* The head frame of s is complete: advance its link, maybe finish the message. */
static void tcp_sock_frame_sent(coll_tcp_sock_t *s)
{
    coll_tcp_slink_t *link = s->txq_head;
    coll_tcp_sreq_t  *sreq = link->sreq;
    coll_tcp_ep_t    *ep   = s->ep;

    s->tx_off = 0;
    ep->stats.frames_sent++;
    link->frame += (uint64_t)ep->nsocks;
    if (link->frame >= sreq->nframes) {
        s->txq_head = link->next;
        if (s->txq_head == NULL) {
            s->txq_tail = NULL;
        }
    }
    if (--sreq->frames_left == 0) {
        tcp_send_complete(ep, sreq);
    }
}

/* Writes queued frames until the socket would block; returns 1 if bytes moved. */
static int tcp_sock_flush(coll_tcp_sock_t *s)
{
    coll_tcp_ep_t *ep   = s->ep;
    size_t         frag = ep->ctx->frag_size;
    struct iovec   iov[2];
    struct msghdr  msg;
    int            moved = 0;

    while (s->txq_head != NULL) {
        coll_tcp_slink_t *link = s->txq_head;
        coll_tp_op_t     *op   = link->sreq->op;
        uint64_t          off  = link->frame * frag;
        size_t            len  = (size_t)COLL_MIN_OF((uint64_t)frag, op->len - off);
        size_t            want;
        ssize_t           n;
        int               niov = 0;

        if (s->tx_off == 0) {
            coll_tcp_put32(s->tx_hdr + 0, COLL_TCP_FRAME_MAGIC);
            coll_tcp_put32(s->tx_hdr + 4, (uint32_t)len);
            coll_tcp_put64(s->tx_hdr + 8, op->tag);
            coll_tcp_put64(s->tx_hdr + 16, op->len);
            coll_tcp_put64(s->tx_hdr + 24, off);
        }
        if (s->tx_off < COLL_TCP_FRAME_HDR) {
            iov[niov].iov_base = s->tx_hdr + s->tx_off;
            iov[niov].iov_len  = COLL_TCP_FRAME_HDR - s->tx_off;
            niov++;
        }
        if (len > 0) {
            size_t done = s->tx_off > COLL_TCP_FRAME_HDR ? s->tx_off - COLL_TCP_FRAME_HDR : 0;
            iov[niov].iov_base = (char *)op->buf + off + done;
            iov[niov].iov_len  = len - done;
            niov++;
        }
        want = COLL_TCP_FRAME_HDR + len - s->tx_off;
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov    = iov;
        msg.msg_iovlen = (size_t)niov;
        n              = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                s->tx_blocked = 1;
                break;
            }
            coll_tcp_ep_fail(ep, COLL_ERR_REMOTE, "send on socket %d: %s", s->index,
                             strerror(errno));
            return 1;
        }
        moved = 1;
        s->tx_off += (size_t)n;
        if ((size_t)n < want) {
            s->tx_blocked = 1; /* the send buffer is full: wait for POLLOUT */
            break;
        }
        tcp_sock_frame_sent(s);
    }
    return moved;
}

coll_result_t coll_tcp_ep_isend(coll_tp_ep_t *tep, coll_tp_op_t *op)
{
    coll_tcp_ep_t   *ep   = (coll_tcp_ep_t *)tep;
    size_t           frag = ep->ctx->frag_size;
    coll_tcp_sreq_t *sreq;
    uint64_t         nframes;
    uint32_t         start, nlinks, j;

    if (coll_unlikely(ep->failed)) {
        tcp_ep_report(ep);
        return ep->fail_status;
    }
    if ((uint64_t)op->len > COLL_TCP_MAX_TOTAL || (op->buf == NULL && op->len > 0)) {
        coll_error(TCP, "isend to rank %d: invalid message (%zu bytes)", tep->peer, op->len);
        return COLL_ERR_INVALID_ARG;
    }
    sreq = tcp_sreq_get(ep);
    if (sreq == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    nframes           = op->len == 0 ? 1 : COLL_DIV_UP((uint64_t)op->len, frag);
    sreq->op          = op;
    sreq->nframes     = nframes;
    sreq->frames_left = nframes;
    sreq->failed      = 0;
    op->bytes         = 0;
    op->tp_priv       = sreq;
    ep->sends_pending++;
    /* frame i goes to socket (start + i) % nsocks: each socket holds one link per message */
    start         = ep->next_sock;
    nlinks        = (uint32_t)COLL_MIN_OF(nframes, (uint64_t)ep->nsocks);
    ep->next_sock = (uint32_t)((start + nframes) % (uint64_t)ep->nsocks);
    for (j = 0; j < nlinks; j++) {
        coll_tcp_sock_t  *s    = &ep->socks[(start + j) % (uint32_t)ep->nsocks];
        coll_tcp_slink_t *link = &sreq->links[j];
        link->sreq             = sreq;
        link->frame            = j;
        link->next             = NULL;
        if (s->txq_tail == NULL) {
            s->txq_head = link;
        } else {
            s->txq_tail->next = link;
        }
        s->txq_tail = link;
    }
    /* write now: isend never blocks, and the frames usually fit in the socket buffers */
    for (j = 0; j < nlinks && !ep->failed; j++) {
        coll_tcp_sock_t *s = &ep->socks[(start + j) % (uint32_t)ep->nsocks];
        if (!s->tx_blocked) {
            tcp_sock_flush(s);
        }
    }
    return COLL_OK;
}

/* ---- receive side ---- */

const char *coll_tcp_frame_parse(const uint8_t hdr[COLL_TCP_FRAME_HDR], size_t frag_size,
                                 coll_tcp_frame_t *f)
{
    f->magic = coll_tcp_get32(hdr);
    f->len   = coll_tcp_get32(hdr + 4);
    f->tag   = coll_tcp_get64(hdr + 8);
    f->total = coll_tcp_get64(hdr + 16);
    f->off   = coll_tcp_get64(hdr + 24);
    if (f->magic != COLL_TCP_FRAME_MAGIC) {
        return "bad magic";
    } else if (f->total > COLL_TCP_MAX_TOTAL) {
        return "message too large";
    } else if (f->len > frag_size) {
        return "frame larger than COLL_TCP_FRAG_SIZE";
    } else if (f->off > f->total || f->len > f->total - f->off) {
        return "frame beyond the message end";
    } else if (f->len == 0 && f->total != 0) {
        return "empty frame in a non-empty message";
    } else if (f->off % 8 != 0) {
        return "unaligned frame offset";
    }
    return NULL;
}

/* Parses and checks the frame header in s->rx_hdr; returns 0 if it is bad. */
static int tcp_sock_parse_hdr(coll_tcp_sock_t *s)
{
    coll_tcp_ep_t   *ep = s->ep;
    coll_tcp_frame_t f;
    const char      *why = coll_tcp_frame_parse(s->rx_hdr, ep->ctx->frag_size, &f);

    s->rx_len   = f.len;
    s->rx_tag   = f.tag;
    s->rx_total = f.total;
    s->rx_off   = f.off;
    if (why != NULL) {
        coll_tcp_ep_fail(ep, COLL_ERR_TRANSPORT,
                         "bad frame on socket %d: %s (magic 0x%08x len %u total %llu offset %llu)",
                         s->index, why, f.magic, f.len, (unsigned long long)f.total,
                         (unsigned long long)f.off);
        return 0;
    }
    return 1;
}

/* A whole frame arrived; data holds its payload unless it went straight into s->rx_zc. */
static void tcp_sock_frame_received(coll_tcp_sock_t *s, const void *data)
{
    coll_tcp_ep_t *ep = s->ep;
    coll_result_t  status;

    if (s->rx_zc != NULL) {
        ep->stats.frames_zcopy++;
        status = coll_tp_match_account(&ep->match, s->rx_zc, s->rx_len);
    } else {
        ep->stats.frames_bounced++;
        status =
            coll_tp_match_deliver(&ep->match, s->rx_tag, s->rx_total, s->rx_off, data, s->rx_len);
    }
    s->rx_zc    = NULL;
    s->rx_state = COLL_TCP_RX_HDR;
    s->rx_got   = 0;
    if (status < 0) {
        coll_tcp_ep_fail(ep, status, "delivery of a %u-byte frame of tag 0x%llx failed: %s",
                         s->rx_len, (unsigned long long)s->rx_tag, coll_strerror(status));
    }
}

/* The header is complete: check it, then expect the payload (or finish an empty message). */
static int tcp_sock_hdr_done(coll_tcp_sock_t *s)
{
    if (!tcp_sock_parse_hdr(s)) {
        return 0;
    }
    s->rx_got = 0;
    s->rx_zc  = NULL;
    if (s->rx_len == 0) {
        tcp_sock_frame_received(s, s->rx_bounce); /* an empty message is its header only */
        return 1;
    }
    s->rx_state = COLL_TCP_RX_PAYLOAD;
    s->rx_zc    = coll_tp_match_lookup_copy(&s->ep->match, s->rx_tag, s->rx_total);
    return 1;
}

static char *tcp_sock_payload_dst(const coll_tcp_sock_t *s)
{
    char *base = s->rx_zc != NULL ? (char *)s->rx_zc->buf + s->rx_off : s->rx_bounce;
    return base + s->rx_got;
}

/* Parses every staged byte (the stage is always emptied, so poll() never has to report it);
 * returns the number of frames completed. */
static int tcp_sock_consume_stage(coll_tcp_sock_t *s)
{
    int frames = 0;

    while (s->rx_stage_off < s->rx_stage_len && !s->ep->failed) {
        const char *src   = s->rx_stage + s->rx_stage_off;
        size_t      avail = s->rx_stage_len - s->rx_stage_off, take;

        if (s->rx_state == COLL_TCP_RX_HDR) {
            take = COLL_MIN_OF(avail, COLL_TCP_FRAME_HDR - s->rx_got);
            memcpy(s->rx_hdr + s->rx_got, src, take);
            s->rx_stage_off += take;
            s->rx_got += take;
            if (s->rx_got == COLL_TCP_FRAME_HDR) {
                if (!tcp_sock_hdr_done(s)) {
                    break;
                }
                frames += s->rx_len == 0;
            }
            continue;
        }
        take = COLL_MIN_OF(avail, (size_t)s->rx_len - s->rx_got);
        s->rx_stage_off += take;
        /* a whole payload in the stage is delivered in place when aligned for any dtype */
        if (s->rx_zc == NULL && s->rx_got == 0 && take == s->rx_len && ((uintptr_t)src & 7) == 0) {
            tcp_sock_frame_received(s, src);
            frames++;
            continue;
        }
        memcpy(tcp_sock_payload_dst(s), src, take);
        s->rx_got += take;
        if (s->rx_got == s->rx_len) {
            tcp_sock_frame_received(s, s->rx_bounce);
            frames++;
        }
    }
    return frames;
}

/* Orderly end of one stream. The peer is closing the endpoint (or died), but frames may still
 * wait on its other streams: the endpoint fails only once every stream has ended. */
static void tcp_sock_eof(coll_tcp_sock_t *s)
{
    coll_tcp_ep_t *ep = s->ep;
    int            k, open = 0;

    s->rx_eof = 1;
    for (k = 0; k < ep->nsocks; k++) {
        open += !ep->socks[k].rx_eof;
    }
    if (open == 0) {
        coll_tcp_ep_fail(ep, COLL_ERR_REMOTE, "connection closed by peer");
    }
}

/* One recv(); returns bytes read, 0 if it would block, -1 if the endpoint failed or ended. */
static ssize_t tcp_sock_read(coll_tcp_sock_t *s, void *dst, size_t want)
{
    ssize_t n;

    do {
        n = recv(s->fd, dst, want, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return 0;
    }
    if (n == 0 && s->rx_state == COLL_TCP_RX_HDR && s->rx_got == 0) {
        tcp_sock_eof(s);
    } else {
        coll_tcp_ep_fail(s->ep, COLL_ERR_REMOTE, "%s on socket %d",
                         n == 0 ? "connection closed by peer in the middle of a frame"
                                : strerror(errno),
                         s->index);
    }
    return -1;
}

/* Reads frames until the socket is drained or the fairness budget is spent. At a frame
 * boundary it reads a stage-full (small frames: one recv each); inside a payload it reads
 * straight into the destination, never past the frame's end. */
static int tcp_sock_recv(coll_tcp_sock_t *s)
{
    int     frames = 0, moved = 0;
    size_t  want;
    ssize_t n;

    for (;;) {
        frames += tcp_sock_consume_stage(s);
        if (s->ep->failed || frames >= TCP_RX_BUDGET_FRAMES) {
            break;
        }
        if (coll_tp_match_held(&s->ep->match)) { /* the rest waits in the socket */
            coll_tp_match_log_held(&s->ep->match);
            break;
        }
        if (s->rx_state == COLL_TCP_RX_PAYLOAD) {
            want = s->rx_len - s->rx_got;
            n    = tcp_sock_read(s, tcp_sock_payload_dst(s), want);
            if (n <= 0) {
                break;
            }
            moved = 1;
            s->rx_got += (size_t)n;
            if ((size_t)n < want) {
                break; /* drained: poll() says when more comes */
            }
            tcp_sock_frame_received(s, s->rx_bounce);
            frames++;
        } else {
            n = tcp_sock_read(s, s->rx_stage, COLL_TCP_RX_STAGE);
            if (n <= 0) {
                break;
            }
            moved           = 1;
            s->rx_stage_off = 0;
            s->rx_stage_len = (size_t)n;
            if (n < COLL_TCP_RX_STAGE) {
                tcp_sock_consume_stage(s);
                break;
            }
        }
    }
    return moved;
}

int coll_tcp_sock_progress(coll_tcp_sock_t *s, short revents)
{
    int moved = 0;

    if (s->fd < 0) {
        return 0;
    }
    if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        moved |= tcp_sock_recv(s);
    }
    if (s->fd >= 0 && (revents & (POLLOUT | POLLERR)) != 0 && s->txq_head != NULL) {
        s->tx_blocked = 0;
        moved |= tcp_sock_flush(s);
    }
    return moved;
}

coll_result_t coll_tcp_ep_irecv(coll_tp_ep_t *tep, coll_tp_op_t *op)
{
    coll_tcp_ep_t *ep = (coll_tcp_ep_t *)tep;

    if (coll_unlikely(ep->failed)) {
        tcp_ep_report(ep);
        return ep->fail_status;
    }
    op->tp_priv = NULL;
    return coll_tp_match_post(&ep->match, op);
}
