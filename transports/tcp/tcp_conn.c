/* SPDX-License-Identifier: MIT */
/*
 * TCP connection setup: listen() on the chosen interface, and connect_all(), in which the lower
 * rank of every pair opens nsocks sockets to the higher rank's listener. The acceptor sends an
 * authentication challenge; the connector answers with a response proving the job secret and
 * a hello; the acceptor checks the response (before parsing anything else) and the hello, and
 * answers with its own proof and an ack, which the connector checks in turn. One poll() loop serves
 * both roles until the deadline; strays and garbage are logged and dropped. No data is moved here.
 * Past ~800 lines because both sides' state machines, the handshake and the setup's failure
 * handling (deadline, the job's notices, peers refusing) act on one poll set and one state.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* accept4() */
#endif
#include "tcp.h"
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <unistd.h>
#include "compiler.h"
#include "error.h"
#include "log.h"
#include "util.h"

#define TCP_RETRY_MIN_S 0.005
#define TCP_RETRY_MAX_S 0.25
#define TCP_STRAY_SLACK 16 /* unidentified accepted sockets kept besides the expected ones */
#define TCP_POLL_MAX_MS 100
/* A peer's listener was open when its handle was exchanged, so a refusal means it is gone; the
 * bootstrap normally says so first (and names why), this is the fallback. */
#define TCP_REFUSED_GRACE_S 2.0
#define TCP_NOTICES_EVERY_S 0.01 /* how often connection setup looks at the job's notices */

enum {
    TCP_OUT_IDLE,
    TCP_OUT_CONNECTING,
    TCP_OUT_CHALLENGE,
    TCP_OUT_HELLO,
    TCP_OUT_ACK,
    TCP_OUT_DONE
};
enum { TCP_IN_FREE, TCP_IN_HELLO, TCP_IN_ACK };

/* One socket being set up, on either side. */
typedef struct tcp_conn {
    int               fd;
    int               out; /* 1: this rank connects; 0: this rank accepted it */
    int               state;
    int               pos;    /* index into peers[] (connector) or -1 until the hello names it */
    int               index;  /* socket index */
    size_t            nbytes; /* of the current setup message moved so far */
    uint8_t           buf[COLL_TCP_OUT_LEN];
    coll_auth_state_t auth;
    double            retry_at;
    double            backoff;
    double            since;         /* acceptor: when accepted, to evict the oldest stray first */
    double            refused_since; /* connector: first of the refusals in a row; < 0: none */
    int               last_errno;
    char              raddr[64];
} tcp_conn_t;

/* State of one connect_all() call. */
typedef struct tcp_cstate {
    coll_tcp_ctx_t          *ctx;
    const int               *peers;
    int                      npeers;
    coll_tcp_ep_t          **eps;    /* by position in peers[]; NULL if connected earlier */
    int                     *pos_of; /* rank -> position in peers[], -1 if absent */
    struct sockaddr_storage *dst;    /* by position: peer's listener (connector side) */
    socklen_t               *dstlen;
    tcp_conn_t              *out; /* nout connector slots */
    int                      nout;
    int                      out_left;
    tcp_conn_t              *in; /* nin accept slots */
    int                      nin;
    int                      in_left; /* sockets still expected from lower ranks */
    coll_result_t            fatal;
    double                   start;
    double                   notices_at; /* when to look at the job's notices next */
    struct pollfd           *pfds;
    tcp_conn_t             **pconn; /* pconn[i] owns pfds[i]; NULL = the listener */
} tcp_cstate_t;

void coll_tcp_sock_options(int fd)
{
    int one = 1;

    /* Buffer sizes are left to the kernel on purpose: setting SO_SNDBUF/SO_RCVBUF turns off
     * autotuning and is capped by net.core.[rw]mem_max (~200 KiB by default), which would
     * shrink the window on fast links instead of growing it. */
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        coll_debug(TCP, "setsockopt(TCP_NODELAY) failed: %s", strerror(errno));
    }
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0) {
        coll_debug(TCP, "setsockopt(SO_KEEPALIVE) failed: %s", strerror(errno));
    }
}

/* ---- listen ---- */

static int tcp_all_local(const coll_tcp_ctx_t *ctx)
{
    int r;

    for (r = 0; r < ctx->nranks; r++) {
        if (ctx->peers[r].host_hash != ctx->peers[ctx->rank].host_hash) {
            return 0;
        }
    }
    return 1;
}

coll_result_t coll_tcp_listen(coll_tcp_ctx_t *ctx, void *handle, size_t *handle_len_p)
{
    const char   *why = "";
    socklen_t     len;
    int           fd, backlog;
    coll_result_t status;

    if (ctx->listen_fd >= 0) {
        coll_error(TCP, "listen called twice on one context");
        return COLL_ERR_INVALID_USAGE;
    }
    COLL_CHECK(coll_tcp_pick_addr(tcp_all_local(ctx), ctx->netif, &ctx->addr, &why));
    fd = socket(ctx->addr.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        coll_error(TCP, "socket() failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    coll_tcp_sa_str((struct sockaddr *)&ctx->addr.sa, ctx->addr_str, sizeof(ctx->addr_str));
    status  = COLL_ERR_SYSTEM;
    backlog = COLL_MAX_OF(ctx->nranks * ctx->nsocks + TCP_STRAY_SLACK, 128);
    if (bind(fd, (struct sockaddr *)&ctx->addr.sa, ctx->addr.salen) != 0) {
        coll_error(TCP, "bind to %s (%s) failed: %s", ctx->addr_str, ctx->addr.ifname,
                   strerror(errno));
        goto err;
    }
    if (listen(fd, backlog) != 0) {
        coll_error(TCP, "listen on %s failed: %s", ctx->addr_str, strerror(errno));
        goto err;
    }
    len = sizeof(ctx->addr.sa);
    if (getsockname(fd, (struct sockaddr *)&ctx->addr.sa, &len) != 0) {
        coll_error(TCP, "getsockname failed: %s", strerror(errno));
        goto err;
    }
    coll_tcp_sa_str((struct sockaddr *)&ctx->addr.sa, ctx->addr_str, sizeof(ctx->addr_str));
    ctx->listen_fd = fd;
    coll_tcp_handle_pack(&ctx->addr, handle);
    *handle_len_p = sizeof(coll_tcp_handle_t);
    coll_info(TCP, "listening on %s %s (%s), %d socket(s) per peer, frames of %zu bytes",
              ctx->addr.ifname, ctx->addr_str, why, ctx->nsocks, ctx->frag_size);
    return COLL_OK;

err:
    close(fd);
    return status;
}

/* ---- the job's failure notices ---- */

/* Has the bootstrap learned of a failed rank? COLL_OK, or the failure (recorded as the last
 * error). With force, looks now; else at most every TCP_NOTICES_EVERY_S. */
static coll_result_t tcp_cs_notices(tcp_cstate_t *cs, double now, int force)
{
    coll_tcp_ctx_t *ctx      = cs->ctx;
    char            msg[256] = "";
    coll_result_t   st;

    if (ctx->notices == NULL || (!force && now < cs->notices_at)) {
        return COLL_OK;
    }
    cs->notices_at = now + TCP_NOTICES_EVERY_S;
    st             = ctx->notices(ctx->notices_arg, msg, sizeof(msg));
    if (st != COLL_OK) { /* the bootstrap logged it */
        coll_debug(TCP, "rank %d: connection setup stopped after %.3f s: %s", ctx->rank,
                   now - cs->start, msg);
        coll_set_last_error(st, "rank %d: %s", ctx->rank, msg);
    }
    return st;
}

/* ---- connector side ---- */

/* c's peer has refused connections for TCP_REFUSED_GRACE_S: it is gone. */
static void tcp_out_gone(tcp_cstate_t *cs, tcp_conn_t *c, double now)
{
    cs->fatal = tcp_cs_notices(cs, now, 1);
    if (cs->fatal != COLL_OK) {
        return; /* the bootstrap knows why */
    }
    coll_error(TCP,
               "rank %d (%s) has refused connections for %.1f s although its listener was open "
               "when the handles were exchanged (process died?)",
               cs->peers[c->pos], c->raddr, now - c->refused_since);
    cs->fatal = coll_set_last_error(COLL_ERR_REMOTE,
                                    "rank %d: rank %d (%s) refuses connections (process died?)",
                                    cs->ctx->rank, cs->peers[c->pos], c->raddr);
}

static void tcp_out_retry(tcp_cstate_t *cs, tcp_conn_t *c, int err, double now)
{
    if (err != ECONNREFUSED) {
        c->refused_since = -1;
    } else if (c->refused_since < 0) {
        c->refused_since = now;
    } else if (now - c->refused_since >= TCP_REFUSED_GRACE_S && cs->fatal == COLL_OK) {
        tcp_out_gone(cs, c, now);
    }
    close(c->fd);
    c->fd         = -1;
    c->state      = TCP_OUT_IDLE;
    c->nbytes     = 0;
    c->last_errno = err;
    c->retry_at   = now + c->backoff;
    c->backoff    = COLL_MIN_OF(c->backoff * 2, TCP_RETRY_MAX_S);
    coll_debug(TCP, "connection %d to rank %d (%s): %s; retrying", c->index, cs->peers[c->pos],
               c->raddr, err != 0 ? strerror(err) : "closed before ack");
}

/* The hello connection c sends (the bytes both proofs cover). */
static void tcp_out_hello_bytes(const tcp_cstate_t *cs, const tcp_conn_t *c,
                                uint8_t out[COLL_TCP_HELLO_LEN])
{
    coll_tcp_hello_t h = {
        .magic      = COLL_TCP_HELLO_MAGIC,
        .version    = COLL_TCP_VERSION,
        .sock_index = (uint16_t)c->index,
        .job_tag    = cs->ctx->job_tag,
        .from_rank  = (uint32_t)cs->ctx->rank,
        .to_rank    = (uint32_t)cs->peers[c->pos],
        .comm_id    = cs->ctx->comm_id,
        .nsocks     = (uint16_t)cs->ctx->nsocks,
        .frag_size  = (uint32_t)cs->ctx->frag_size,
    };
    coll_tcp_hello_pack(&h, out);
}

/* The acceptor's challenge has arrived: answer it, with the hello the answer covers. */
static void tcp_out_hello(tcp_cstate_t *cs, tcp_conn_t *c, double now)
{
    uint8_t challenge[COLL_AUTH_CHALLENGE_LEN];

    memcpy(challenge, c->buf, sizeof(challenge));
    tcp_out_hello_bytes(cs, c, c->buf + COLL_AUTH_RESPONSE_LEN);
    if (coll_auth_respond(&cs->ctx->auth_key, &c->auth, challenge, c->buf + COLL_AUTH_RESPONSE_LEN,
                          COLL_TCP_HELLO_LEN, c->buf) != COLL_OK) {
        coll_warn(TCP, "connection %d to rank %d (%s): no valid authentication challenge", c->index,
                  cs->peers[c->pos], c->raddr);
        tcp_out_retry(cs, c, EPROTO, now);
        return;
    }
    c->state  = TCP_OUT_HELLO;
    c->nbytes = 0;
}

static void tcp_out_connected(tcp_conn_t *c)
{
    c->state  = TCP_OUT_CHALLENGE;
    c->nbytes = 0;
}

static void tcp_out_start(tcp_cstate_t *cs, tcp_conn_t *c, double now)
{
    const struct sockaddr *sa = (const struct sockaddr *)&cs->dst[c->pos];

    c->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        coll_error(TCP, "socket() failed: %s", strerror(errno));
        cs->fatal = COLL_ERR_SYSTEM;
        return;
    }
    coll_tcp_sock_options(c->fd);
    if (connect(c->fd, sa, cs->dstlen[c->pos]) == 0) {
        tcp_out_connected(c);
    } else if (errno == EINPROGRESS || errno == EINTR) {
        c->state = TCP_OUT_CONNECTING;
    } else {
        tcp_out_retry(cs, c, errno, now);
    }
}

/* The acceptor answered: check its proof, move the socket into the endpoint, or give up on a
 * refusal. */
static void tcp_out_acked(tcp_cstate_t *cs, tcp_conn_t *c)
{
    uint8_t        hello[COLL_TCP_HELLO_LEN];
    const uint8_t *ack    = c->buf + COLL_AUTH_PROOF_LEN;
    uint32_t       magic  = coll_tcp_get32(ack);
    int32_t        status = (int32_t)coll_tcp_get32(ack + 4);
    coll_tcp_ep_t *ep     = cs->eps[c->pos];

    tcp_out_hello_bytes(cs, c, hello);
    if (coll_auth_check_proof(&cs->ctx->auth_key, &c->auth, c->buf, hello, sizeof(hello)) !=
        COLL_OK) {
        coll_error(TCP,
                   "rank %d (%s) failed authentication on connection %d: the listener does not "
                   "hold this job's secret",
                   cs->peers[c->pos], c->raddr, c->index);
        cs->fatal = COLL_ERR_TRANSPORT;
        return;
    }
    if (magic != COLL_TCP_ACK_MAGIC || status != 0) {
        coll_error(TCP, "rank %d (%s) refused connection %d: %s", cs->peers[c->pos], c->raddr,
                   c->index,
                   magic != COLL_TCP_ACK_MAGIC
                       ? "bad ack"
                       : "COLL_TCP_NSOCKS or COLL_TCP_FRAG_SIZE differ between the two ranks");
        cs->fatal = COLL_ERR_INVALID_USAGE;
        return;
    }
    ep->socks[c->index].fd = c->fd;
    coll_strlcpy(ep->addr_str, c->raddr, sizeof(ep->addr_str));
    c->fd    = -1;
    c->state = TCP_OUT_DONE;
    cs->out_left--;
}

static void tcp_out_event(tcp_cstate_t *cs, tcp_conn_t *c, short revents, double now)
{
    int       err = 0;
    socklen_t len = sizeof(err);
    ssize_t   n;

    if (c->state == TCP_OUT_CONNECTING) {
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
        if (err != 0) {
            tcp_out_retry(cs, c, err, now);
            return;
        }
        tcp_out_connected(c);
        return;
    }
    if (c->state == TCP_OUT_CHALLENGE && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        n = recv(c->fd, c->buf + c->nbytes, COLL_AUTH_CHALLENGE_LEN - c->nbytes, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            tcp_out_retry(cs, c, n == 0 ? 0 : errno, now);
            return;
        }
        c->nbytes += n > 0 ? (size_t)n : 0;
        if (c->nbytes == COLL_AUTH_CHALLENGE_LEN) {
            tcp_out_hello(cs, c, now);
        }
        return;
    }
    if (c->state == TCP_OUT_HELLO) {
        n = send(c->fd, c->buf + c->nbytes, COLL_TCP_OUT_LEN - c->nbytes, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            tcp_out_retry(cs, c, errno, now);
            return;
        }
        c->nbytes += n > 0 ? (size_t)n : 0;
        if (c->nbytes == COLL_TCP_OUT_LEN) {
            c->state  = TCP_OUT_ACK;
            c->nbytes = 0;
        }
        return;
    }
    if (c->state == TCP_OUT_ACK && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        /* exactly proof + ack: data frames may follow them on the same stream */
        n = recv(c->fd, c->buf + c->nbytes, COLL_TCP_IN_LEN - c->nbytes, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            tcp_out_retry(cs, c, n == 0 ? 0 : errno, now);
            return;
        }
        c->nbytes += n > 0 ? (size_t)n : 0;
        if (c->nbytes == COLL_TCP_IN_LEN) {
            tcp_out_acked(cs, c);
        }
    }
}

/* ---- acceptor side ---- */

static void tcp_in_close(tcp_conn_t *c)
{
    close(c->fd);
    c->fd    = -1;
    c->state = TCP_IN_FREE;
}

static tcp_conn_t *tcp_in_slot(tcp_cstate_t *cs)
{
    tcp_conn_t *oldest = NULL;
    int         i;

    for (i = 0; i < cs->nin; i++) {
        if (cs->in[i].state == TCP_IN_FREE) {
            return &cs->in[i];
        }
        if (cs->in[i].state == TCP_IN_HELLO &&
            (oldest == NULL || cs->in[i].since < oldest->since)) {
            oldest = &cs->in[i];
        }
    }
    if (oldest != NULL) {
        coll_warn(TCP, "closing connection from %s: no hello yet and too many pending",
                  oldest->raddr);
        tcp_in_close(oldest);
    }
    return oldest;
}

static void tcp_in_accept(tcp_cstate_t *cs, double now)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    tcp_conn_t             *c;
    int                     fd;

    for (;;) {
        len = sizeof(ss);
        fd =
            accept4(cs->ctx->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the connection stays queued and poll() would report it forever */
                coll_error(TCP, "accept on %s failed: %s (raise the open-file limit?)",
                           cs->ctx->addr_str, strerror(errno));
                cs->fatal = COLL_ERR_SYSTEM;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                coll_debug(TCP, "accept on %s: %s", cs->ctx->addr_str, strerror(errno));
            }
            return;
        }
        c = tcp_in_slot(cs);
        if (c == NULL) { /* every slot is mid-ack: cannot happen with the slack, but be safe */
            close(fd);
            continue;
        }
        coll_tcp_sock_options(fd);
        coll_tcp_sa_str((struct sockaddr *)&ss, c->raddr, sizeof(c->raddr));
        /* a fresh socket's send buffer is empty: the challenge goes whole or not at all */
        if (coll_auth_challenge(&c->auth, c->buf) != COLL_OK ||
            send(fd, c->buf, COLL_AUTH_CHALLENGE_LEN, MSG_NOSIGNAL) != COLL_AUTH_CHALLENGE_LEN) {
            coll_debug(TCP, "could not challenge the connection from %s", c->raddr);
            close(fd);
            continue;
        }
        c->fd     = fd;
        c->state  = TCP_IN_HELLO;
        c->pos    = -1;
        c->nbytes = 0;
        c->since  = now;
    }
}

static int tcp_in_claimed(const tcp_cstate_t *cs, int pos, int index)
{
    int i;

    if (cs->eps[pos]->socks[index].fd >= 0) {
        return 1;
    }
    for (i = 0; i < cs->nin; i++) {
        if (cs->in[i].state == TCP_IN_ACK && cs->in[i].pos == pos && cs->in[i].index == index) {
            return 1;
        }
    }
    return 0;
}

/* Why hello h must be refused, or NULL if it is acceptable. */
static const char *tcp_in_check(const tcp_cstate_t *cs, const coll_tcp_hello_t *h, char *why,
                                size_t size)
{
    const coll_tcp_ctx_t *ctx = cs->ctx;

    if (coll_tcp_hello_check(ctx, h, why, size) != NULL) {
        return why;
    }
    if (cs->pos_of[h->from_rank] < 0) {
        snprintf(why, size, "not expecting a connection from rank %u", h->from_rank);
    } else if (h->nsocks == ctx->nsocks && h->frag_size == ctx->frag_size &&
               tcp_in_claimed(cs, cs->pos_of[h->from_rank], h->sock_index)) {
        snprintf(why, size, "duplicate socket %u of rank %u", h->sock_index, h->from_rank);
    } else {
        return NULL;
    }
    return why;
}

static void tcp_in_hello(tcp_cstate_t *cs, tcp_conn_t *c)
{
    coll_tcp_ctx_t  *ctx = cs->ctx;
    coll_tcp_hello_t h;
    char             why[128];
    int32_t          status = 0;
    uint8_t          proof[COLL_AUTH_PROOF_LEN];

    coll_result_t ast =
        coll_auth_check_response(&ctx->auth_key, &c->auth, c->buf, c->buf + COLL_AUTH_RESPONSE_LEN,
                                 COLL_TCP_HELLO_LEN, proof);

    if (ast != COLL_OK) {
        coll_warn(TCP, "rejected connection from %s: authentication failed: %s", c->raddr,
                  ast == COLL_ERR_INVALID_ARG
                      ? "not an authentication response (not libcoll, or another version)"
                      : "the peer does not hold this job's secret (another job, or a replay)");
        tcp_in_close(c);
        return;
    }
    coll_tcp_hello_unpack(c->buf + COLL_AUTH_RESPONSE_LEN, &h);
    if (tcp_in_check(cs, &h, why, sizeof(why)) != NULL) {
        coll_warn(TCP, "rejected connection from %s: %s", c->raddr, why);
        tcp_in_close(c);
        return;
    }
    if (h.nsocks != ctx->nsocks || h.frag_size != ctx->frag_size) {
        coll_error(TCP,
                   "rank %u uses COLL_TCP_NSOCKS=%u COLL_TCP_FRAG_SIZE=%u, this rank %d and "
                   "%zu: set them equally on every rank",
                   h.from_rank, h.nsocks, h.frag_size, ctx->nsocks, ctx->frag_size);
        status    = -1;
        cs->fatal = COLL_ERR_INVALID_USAGE;
    }
    memcpy(c->buf, proof, sizeof(proof));
    coll_tcp_put32(c->buf + COLL_AUTH_PROOF_LEN, COLL_TCP_ACK_MAGIC);
    coll_tcp_put32(c->buf + COLL_AUTH_PROOF_LEN + 4, (uint32_t)status);
    if (status != 0) { /* best effort: tell the connector why, then fail */
        (void)send(c->fd, c->buf, COLL_TCP_IN_LEN, MSG_NOSIGNAL);
        tcp_in_close(c);
        return;
    }
    c->pos    = cs->pos_of[h.from_rank];
    c->index  = h.sock_index;
    c->state  = TCP_IN_ACK;
    c->nbytes = 0;
}

static void tcp_in_event(tcp_cstate_t *cs, tcp_conn_t *c)
{
    coll_tcp_ep_t *ep;
    ssize_t        n;

    if (c->state == TCP_IN_HELLO) {
        n = recv(c->fd, c->buf + c->nbytes, COLL_TCP_OUT_LEN - c->nbytes, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            if (c->nbytes > 0 || n < 0) {
                coll_warn(TCP, "rejected connection from %s: %s after %zu bytes of hello", c->raddr,
                          n == 0 ? "closed" : strerror(errno), c->nbytes);
            }
            tcp_in_close(c);
            return;
        }
        c->nbytes += n > 0 ? (size_t)n : 0;
        if (c->nbytes == COLL_TCP_OUT_LEN) {
            tcp_in_hello(cs, c);
        }
        return;
    }
    n = send(c->fd, c->buf + c->nbytes, COLL_TCP_IN_LEN - c->nbytes, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
        coll_debug(TCP, "ack to %s failed: %s", c->raddr, strerror(errno));
        tcp_in_close(c); /* the connector sees the close and retries */
        return;
    }
    c->nbytes += n > 0 ? (size_t)n : 0;
    if (c->nbytes == COLL_TCP_IN_LEN) {
        ep                     = cs->eps[c->pos];
        ep->socks[c->index].fd = c->fd;
        coll_strlcpy(ep->addr_str, c->raddr, sizeof(ep->addr_str));
        c->fd    = -1;
        c->state = TCP_IN_FREE;
        cs->in_left--;
    }
}

/* ---- one connect_all() call ---- */

static coll_result_t tcp_cs_peer(tcp_cstate_t *cs, int i, const void *const *handles)
{
    coll_tcp_ctx_t *ctx = cs->ctx;
    int             p   = cs->peers[i];

    if (p < 0 || p >= ctx->nranks || p == ctx->rank || cs->pos_of[p] != -1) {
        coll_error(TCP, "connect_all: peer %d is invalid or listed twice", p);
        return COLL_ERR_INVALID_ARG;
    }
    cs->pos_of[p] = -2; /* listed, already connected */
    if (ctx->eps[p] != NULL) {
        return COLL_OK;
    }
    cs->pos_of[p] = i;
    COLL_CHECK(coll_tcp_ep_create(ctx, p, &cs->eps[i]));
    if (p > ctx->rank) {
        if (handles == NULL || handles[p] == NULL) {
            coll_error(TCP, "connect_all: no listen handle for rank %d", p);
            return COLL_ERR_INVALID_ARG;
        }
        COLL_CHECK(coll_tcp_handle_unpack(handles[p], p, &cs->dst[i], &cs->dstlen[i]));
        cs->nout += ctx->nsocks;
    } else {
        cs->in_left += ctx->nsocks;
    }
    return COLL_OK;
}

static coll_result_t tcp_cs_init(tcp_cstate_t *cs, coll_tcp_ctx_t *ctx, const int *peers,
                                 int npeers, const void *const *handles)
{
    int i, k, r, n;

    memset(cs, 0, sizeof(*cs));
    cs->ctx    = ctx;
    cs->peers  = peers;
    cs->npeers = npeers;
    cs->start  = coll_time_s();
    cs->eps    = coll_calloc((size_t)npeers + 1, sizeof(*cs->eps), "tcp endpoints");
    cs->pos_of = coll_malloc((size_t)ctx->nranks * sizeof(int), "tcp rank map");
    cs->dst    = coll_calloc((size_t)npeers + 1, sizeof(*cs->dst), "tcp peer addresses");
    cs->dstlen = coll_calloc((size_t)npeers + 1, sizeof(*cs->dstlen), "tcp peer addresses");
    if (cs->eps == NULL || cs->pos_of == NULL || cs->dst == NULL || cs->dstlen == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (r = 0; r < ctx->nranks; r++) {
        cs->pos_of[r] = -1;
    }
    for (i = 0; i < npeers; i++) {
        COLL_CHECK(tcp_cs_peer(cs, i, handles));
    }
    if (cs->in_left > 0 && ctx->listen_fd < 0) {
        coll_error(TCP, "connect_all: lower ranks must connect but this rank is not listening");
        return COLL_ERR_INVALID_USAGE;
    }
    cs->nin   = cs->in_left > 0 ? cs->in_left + TCP_STRAY_SLACK : 0;
    cs->out   = coll_calloc((size_t)cs->nout + 1, sizeof(*cs->out), "tcp connections");
    cs->in    = coll_calloc((size_t)cs->nin + 1, sizeof(*cs->in), "tcp connections");
    n         = cs->nout + cs->nin + 1;
    cs->pfds  = coll_calloc((size_t)n, sizeof(*cs->pfds), "tcp poll set");
    cs->pconn = coll_calloc((size_t)n, sizeof(*cs->pconn), "tcp poll set");
    if (cs->out == NULL || cs->in == NULL || cs->pfds == NULL || cs->pconn == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (i = 0, n = 0; i < npeers; i++) {
        for (k = 0; cs->eps[i] != NULL && peers[i] > ctx->rank && k < ctx->nsocks; k++, n++) {
            tcp_conn_t *c    = &cs->out[n];
            c->fd            = -1;
            c->out           = 1;
            c->pos           = i;
            c->index         = k;
            c->backoff       = TCP_RETRY_MIN_S;
            c->refused_since = -1;
            coll_tcp_sa_str((struct sockaddr *)&cs->dst[i], c->raddr, sizeof(c->raddr));
        }
    }
    for (i = 0; i < cs->nin; i++) {
        cs->in[i].fd = -1;
    }
    cs->out_left = cs->nout;
    return COLL_OK;
}

/* Closes sockets still in setup; destroys the endpoints the call did not hand out. */
static void tcp_cs_fini(tcp_cstate_t *cs)
{
    int i;

    for (i = 0; cs->out != NULL && i < cs->nout; i++) {
        if (cs->out[i].fd >= 0) {
            close(cs->out[i].fd);
        }
    }
    for (i = 0; cs->in != NULL && i < cs->nin; i++) {
        if (cs->in[i].fd >= 0) {
            close(cs->in[i].fd);
        }
    }
    for (i = 0; cs->eps != NULL && i < cs->npeers; i++) {
        if (cs->eps[i] != NULL) {
            coll_tcp_ep_destroy(cs->eps[i], COLL_ERR_ABORTED);
        }
    }
    coll_free(cs->eps);
    coll_free(cs->pos_of);
    coll_free(cs->dst);
    coll_free(cs->dstlen);
    coll_free(cs->out);
    coll_free(cs->in);
    coll_free(cs->pfds);
    coll_free(cs->pconn);
}

static void tcp_cs_add(tcp_cstate_t *cs, int *n, int fd, short events, tcp_conn_t *c)
{
    cs->pfds[*n].fd      = fd;
    cs->pfds[*n].events  = events;
    cs->pfds[*n].revents = 0;
    cs->pconn[*n]        = c;
    (*n)++;
}

/* Starts due connection attempts and fills the poll set; *wake_at gets the next retry time. */
static int tcp_cs_pollset(tcp_cstate_t *cs, double now, double *wake_at)
{
    tcp_conn_t *c;
    int         i, n = 0;

    if (cs->in_left > 0) {
        tcp_cs_add(cs, &n, cs->ctx->listen_fd, POLLIN, NULL);
    }
    for (i = 0; i < cs->nout && cs->fatal == COLL_OK; i++) {
        c = &cs->out[i];
        if (c->state == TCP_OUT_IDLE && c->retry_at <= now) {
            tcp_out_start(cs, c, now);
        }
        if (c->state == TCP_OUT_IDLE) {
            *wake_at = COLL_MIN_OF(*wake_at, c->retry_at);
        } else if (c->state == TCP_OUT_CONNECTING || c->state == TCP_OUT_HELLO) {
            tcp_cs_add(cs, &n, c->fd, POLLOUT, c);
        } else if (c->state == TCP_OUT_ACK || c->state == TCP_OUT_CHALLENGE) {
            tcp_cs_add(cs, &n, c->fd, POLLIN, c);
        }
    }
    for (i = 0; i < cs->nin; i++) {
        c = &cs->in[i];
        if (c->state != TCP_IN_FREE) {
            tcp_cs_add(cs, &n, c->fd, c->state == TCP_IN_HELLO ? POLLIN : POLLOUT, c);
        }
    }
    return n;
}

static void tcp_cs_timeout(tcp_cstate_t *cs)
{
    char   msg[512] = "";
    size_t off      = 0;
    int    i, k, missing, err;

    for (i = 0; i < cs->npeers && off < sizeof(msg); i++) {
        if (cs->eps[i] == NULL) {
            continue;
        }
        for (k = 0, missing = 0, err = 0; k < cs->ctx->nsocks; k++) {
            missing += cs->eps[i]->socks[k].fd < 0;
        }
        for (k = 0; k < cs->nout; k++) {
            if (cs->out[k].pos == i && cs->out[k].last_errno != 0) {
                err = cs->out[k].last_errno;
            }
        }
        if (missing > 0) {
            off +=
                (size_t)snprintf(msg + off, sizeof(msg) - off, "%s%d (%d of %d sockets%s%s)",
                                 off > 0 ? ", " : "", cs->peers[i], missing, cs->ctx->nsocks,
                                 err != 0 ? ", last error: " : "", err != 0 ? strerror(err) : "");
        }
    }
    coll_error(TCP, "connection setup timed out after %.1f s: rank %d is still missing rank(s) %s",
               coll_time_s() - cs->start, cs->ctx->rank, msg);
}

static coll_result_t tcp_cs_run(tcp_cstate_t *cs, double deadline)
{
    double      now, wake_at;
    tcp_conn_t *c;
    int         i, n, ms;

    while (cs->out_left > 0 || cs->in_left > 0) {
        now = coll_time_s();
        COLL_CHECK(tcp_cs_notices(cs, now, 0));
        if (now >= deadline) {
            tcp_cs_timeout(cs);
            return COLL_ERR_TIMEOUT;
        }
        wake_at = deadline;
        n       = tcp_cs_pollset(cs, now, &wake_at);
        if (cs->fatal != COLL_OK) {
            return cs->fatal;
        }
        ms = (int)ceil((wake_at - now) * 1000.0);
        ms = COLL_MAX_OF(0, COLL_MIN_OF(ms, TCP_POLL_MAX_MS));
        if (poll(cs->pfds, (nfds_t)n, ms) < 0 && errno != EINTR) {
            coll_error(TCP, "poll() failed: %s", strerror(errno));
            return COLL_ERR_SYSTEM;
        }
        now = coll_time_s();
        for (i = 0; i < n && cs->fatal == COLL_OK; i++) {
            c = cs->pconn[i];
            if (cs->pfds[i].revents == 0) {
                continue;
            }
            if (c == NULL) {
                tcp_in_accept(cs, now);
            } else if (c->fd != cs->pfds[i].fd) {
                continue; /* closed (evicted or retried) earlier in this round */
            } else if (c->out) {
                tcp_out_event(cs, c, cs->pfds[i].revents, now);
            } else {
                tcp_in_event(cs, c);
            }
        }
        if (cs->fatal != COLL_OK) {
            return cs->fatal;
        }
    }
    return COLL_OK;
}

coll_result_t coll_tcp_connect_all(coll_tcp_ctx_t *ctx, const int *peers, int npeers,
                                   const void *const *handles, double deadline,
                                   coll_tp_ep_t **eps_p)
{
    tcp_cstate_t   cs;
    coll_tcp_ep_t *ep;
    coll_result_t  status;
    int            i;

    COLL_CHECK_GOTO(tcp_cs_init(&cs, ctx, peers, npeers, handles), status, out);
    COLL_CHECK_GOTO(tcp_cs_run(&cs, deadline), status, out);
    for (i = 0; i < npeers; i++) {
        if (cs.eps[i] != NULL) {
            COLL_CHECK_GOTO(coll_tcp_ctx_add_ep(ctx, cs.eps[i]), status, out);
            coll_debug(TCP, "connected to rank %d (%s) with %d socket(s)", peers[i],
                       cs.eps[i]->addr_str, ctx->nsocks);
            cs.eps[i] = NULL; /* owned by the context now */
        }
        ep       = ctx->eps[peers[i]];
        eps_p[i] = &ep->super;
    }
    coll_info(TCP, "connected to %d peer(s) in %.3f s", npeers, coll_time_s() - cs.start);
out:
    tcp_cs_fini(&cs);
    return status;
}
