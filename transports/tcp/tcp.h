/* SPDX-License-Identifier: MIT */
/*
 * TCP transport, internal interface shared by tcp.c (context, ops table), tcp_conn.c (listen and
 * the connect_all handshake), tcp_ep.c (framed data path over nsocks striped sockets per peer)
 * and tcp_ifaddr.c (interface choice, also used by the bootstrap). Wire formats are little
 * endian and fixed size. Nothing here is installed; the core sees only coll_tp_tcp_ops.
 */
#ifndef COLL_TCP_H
#define COLL_TCP_H

#include <endian.h>
#include <net/if.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include "transport.h"
#include "match.h"

#define COLL_TCP_MAX_SOCKS    16
#define COLL_TCP_FRAME_MAGIC  0x31465443u /* "CTF1" */
#define COLL_TCP_HELLO_MAGIC  0x48504354u /* "TCPH" */
#define COLL_TCP_ACK_MAGIC    0x41504354u /* "TCPA" */
#define COLL_TCP_HANDLE_MAGIC 0x4C504354u /* "TCPL" */
#define COLL_TCP_VERSION      2
#define COLL_TCP_FRAME_HDR    32 /* {u32 magic, u32 len, u64 tag, u64 total, u64 off} */
#define COLL_TCP_HELLO_LEN    40 /* see coll_tcp_hello_t */
#define COLL_TCP_ACK_LEN      8  /* {u32 magic, i32 status} */
/* Setup: the acceptor challenges, the connector answers with response + hello, the acceptor
 * with proof + ack (src/core/auth.h); the response's MAC covers the hello. */
#define COLL_TCP_OUT_LEN   (COLL_AUTH_RESPONSE_LEN + COLL_TCP_HELLO_LEN)
#define COLL_TCP_IN_LEN    (COLL_AUTH_PROOF_LEN + COLL_TCP_ACK_LEN)
#define COLL_TCP_MAX_TOTAL (1ull << 46) /* largest message accepted from the wire */
#define COLL_TCP_RX_STAGE  16384        /* bytes read at once at a frame boundary */

/* ---- interface choice (tcp_ifaddr.c) ---- */

/* A local address to bind to, with the interface it belongs to (for log messages). */
typedef struct coll_tcp_addr {
    struct sockaddr_storage sa; /* AF_INET or AF_INET6, port 0 */
    socklen_t               salen;
    char                    ifname[IF_NAMESIZE];
} coll_tcp_addr_t;

/*
 * Pick the address to listen on. If COLL_SOCKET_IFNAME is set it is applied literally (NCCL
 * syntax: comma-separated name prefixes; a leading '^' excludes them; a leading '=' asks for
 * exact names) to the UP interfaces in getifaddrs() order, IPv4 before IPv6; no match is an
 * error (COLL_ERR_INVALID_USAGE). Otherwise: if all_local (every peer runs on this host) the
 * loopback address; else the first UP non-loopback interface not named docker* (IPv4 first,
 * then global IPv6), falling back to loopback. Before that default, when netif is not empty
 * (the interface of the NIC the topology puts nearest the rank), the IPv4 address of netif if
 * it is up. why_p (may be NULL) receives a static string explaining the choice. Logs nothing
 * but errors; callers log the choice at INFO.
 */
coll_result_t coll_tcp_pick_addr(int all_local, const char *netif, coll_tcp_addr_t *addr_p,
                                 const char **why_p);

/* "10.0.0.1:4242" or "[fe80::1%eth0]:4242" into buf (always terminated); returns buf. */
const char *coll_tcp_sa_str(const struct sockaddr *sa, char *buf, size_t size);

/* ---- wire ---- */

/* Listen handle published through the bootstrap (28 bytes, little endian). */
typedef struct coll_tcp_handle {
    uint32_t magic;    /* COLL_TCP_HANDLE_MAGIC */
    uint16_t family;   /* AF_INET or AF_INET6 */
    uint16_t port;     /* host order */
    uint32_t scope_id; /* IPv6 link-local scope, else 0 */
    uint8_t  addr[16]; /* 4 or 16 bytes of address, network order */
} coll_tcp_handle_t;

/* First bytes of every data socket, sent by the connecting (lower) rank. */
typedef struct coll_tcp_hello {
    uint32_t magic;      /* COLL_TCP_HELLO_MAGIC */
    uint16_t version;    /* COLL_TCP_VERSION */
    uint16_t sock_index; /* 0 .. nsocks-1 */
    uint64_t job_tag;
    uint32_t from_rank;
    uint32_t to_rank;
    uint64_t comm_id;
    uint16_t nsocks; /* sender's COLL_TCP_NSOCKS: must equal the acceptor's */
    uint16_t reserved;
    uint32_t frag_size; /* sender's COLL_TCP_FRAG_SIZE: must equal the acceptor's */
} coll_tcp_hello_t;

/* Little-endian field access for the fixed-size wire structs. */
static inline void coll_tcp_put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, sizeof(v));
}
static inline void coll_tcp_put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof(v));
}
static inline void coll_tcp_put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof(v));
}
static inline uint16_t coll_tcp_get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return le16toh(v);
}
static inline uint32_t coll_tcp_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return le32toh(v);
}
static inline uint64_t coll_tcp_get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

void coll_tcp_hello_pack(const coll_tcp_hello_t *h, uint8_t *buf);
void coll_tcp_hello_unpack(const uint8_t *buf, coll_tcp_hello_t *h);

/* A data frame header as parsed from the wire. */
typedef struct {
    uint32_t magic, len;
    uint64_t tag, total, off;
} coll_tcp_frame_t;

/* Wire parsers (fuzzed by tests/fuzz/): NULL when acceptable, else why not. A frame header
 * accepted here always satisfies len <= frag_size, off + len <= total <= COLL_TCP_MAX_TOTAL. */
const char *coll_tcp_frame_parse(const uint8_t hdr[COLL_TCP_FRAME_HDR], size_t frag_size,
                                 coll_tcp_frame_t *f);

/* ---- data path objects (tcp_ep.c) ---- */

struct coll_tcp_sreq;

/* One socket's share of a send: frames frame, frame + nsocks, ... of the message. */
typedef struct coll_tcp_slink {
    struct coll_tcp_slink *next;
    struct coll_tcp_sreq  *sreq;
    uint64_t               frame; /* next frame this socket writes */
} coll_tcp_slink_t;

/* Per-send state from the endpoint's freelist (op->tp_priv points here while in flight). */
typedef struct coll_tcp_sreq {
    coll_tp_op_t         *op;
    uint64_t              nframes;
    uint64_t              frames_left; /* frames not yet completely written */
    struct coll_tcp_sreq *free_next;
    int                   failed;  /* completed with an error while links were queued */
    coll_tcp_slink_t      links[]; /* nsocks entries */
} coll_tcp_sreq_t;

enum { COLL_TCP_RX_HDR, COLL_TCP_RX_PAYLOAD };

typedef struct coll_tcp_sock {
    int                 fd;
    int                 index; /* position among the endpoint's sockets */
    struct coll_tcp_ep *ep;
    /* send side: FIFO of links; the head's current frame is tx_off bytes written */
    coll_tcp_slink_t *txq_head;
    coll_tcp_slink_t *txq_tail;
    size_t            tx_off;
    int               tx_blocked; /* last write hit EAGAIN: wait for POLLOUT */
    uint8_t           tx_hdr[COLL_TCP_FRAME_HDR];
    /* receive side */
    int           rx_eof; /* the peer closed this stream at a frame boundary */
    int           rx_state;
    size_t        rx_got; /* bytes of header or payload received */
    uint8_t       rx_hdr[COLL_TCP_FRAME_HDR];
    uint32_t      rx_len;
    uint64_t      rx_tag;
    uint64_t      rx_total;
    uint64_t      rx_off;
    coll_tp_op_t *rx_zc;     /* zero-copy destination, or NULL: payload goes to bounce */
    char         *rx_bounce; /* frag_size bytes */
    /* Between frames the socket is read in COLL_TCP_RX_STAGE chunks, so a small frame costs one
     * recv(); the rest of a large payload is then read straight into its destination. */
    char  *rx_stage;
    size_t rx_stage_off;
    size_t rx_stage_len;
} coll_tcp_sock_t;

/* Counters for diagnostics and tests. */
typedef struct coll_tcp_stats {
    uint64_t frames_sent;
    uint64_t frames_zcopy;   /* received straight into a posted receive */
    uint64_t frames_bounced; /* received through the bounce buffer */
} coll_tcp_stats_t;

typedef struct coll_tcp_ep {
    coll_tp_ep_t         super; /* first: the core sees only this */
    struct coll_tcp_ctx *ctx;
    coll_tp_match_t      match;
    int                  nsocks;
    coll_tcp_sock_t      socks[COLL_TCP_MAX_SOCKS];
    uint32_t             next_sock; /* socket of the next message's first frame */
    int                  failed;    /* a socket broke: isend/irecv fail at once */
    coll_result_t        fail_status;
    int                  fail_logged;
    char                 fail_reason[160];
    char                 addr_str[64]; /* peer's address, for messages */
    int                  match_closed; /* coll_tp_match_fini() done */
    size_t               sreq_size;    /* bytes of one request with its nsocks links */
    size_t               sreq_count;   /* allocated so far */
    coll_tcp_sreq_t     *sreq_free;
    void                *sreq_chunks; /* list of allocations, first word = next */
    uint64_t             sends_pending;
    coll_tcp_stats_t     stats;
} coll_tcp_ep_t;

typedef struct coll_tcp_ctx {
    int                  rank;
    int                  nranks;
    uint64_t             comm_id;
    uint64_t             job_tag;
    coll_auth_key_t      auth_key;
    int                  quiesced; /* every rank finished: close connections abortively */
    double               timeout_s;
    coll_peer_info_t    *peers; /* copy, nranks entries */
    int                  nsocks;
    size_t               frag_size;
    int                  listen_fd;          /* -1 once closed */
    coll_tcp_addr_t      addr;               /* bound address, with its port */
    char                 netif[IF_NAMESIZE]; /* interface of the rank's nearest NIC; "": none */
    char                 addr_str[80];
    coll_tp_notices_fn_t notices; /* the job's failure notices (init args); NULL: none */
    void                *notices_arg;
    int                  wake_fd; /* eventfd written by wake() */
    coll_tcp_ep_t      **eps;     /* by rank; NULL if not connected */
    /* poll set: [0] = wake_fd, then nsocks entries per endpoint in eps_active order */
    coll_tcp_ep_t   **eps_active;
    int               nactive;
    struct pollfd    *pfds;
    coll_tcp_sock_t **pfd_socks; /* pfd_socks[i] owns pfds[i + 1] */
    int               npfds;     /* sockets only, excluding wake_fd */
} coll_tcp_ctx_t;

/* The context-level checks of a hello (the rest needs the connection state): NULL when it may
 * be accepted, else why (written into why). */
const char *coll_tcp_hello_check(const coll_tcp_ctx_t *ctx, const coll_tcp_hello_t *h, char *why,
                                 size_t size);
/* This rank's listening address as a handle (coll_tcp_handle_t bytes). */
void coll_tcp_handle_pack(const coll_tcp_addr_t *a, uint8_t *buf);
/* A peer's listen handle (from the bootstrap) into a socket address. */
coll_result_t coll_tcp_handle_unpack(const uint8_t *buf, int rank, struct sockaddr_storage *ss,
                                     socklen_t *len_p);

static inline coll_tcp_ctx_t *coll_tcp_ctx(coll_tp_ctx_t *c)
{
    return (coll_tcp_ctx_t *)(void *)c;
}

/* tcp.c */
coll_result_t coll_tcp_ctx_add_ep(coll_tcp_ctx_t *ctx, coll_tcp_ep_t *ep);

/* tcp_ep.c */
coll_result_t coll_tcp_ep_create(coll_tcp_ctx_t *ctx, int peer, coll_tcp_ep_t **ep_p);
/* Closes sockets, fails whatever is pending with status (no log), frees. */
void coll_tcp_ep_destroy(coll_tcp_ep_t *ep, coll_result_t status);
/* Marks the endpoint broken, closes its sockets and fails pending work with status. */
void coll_tcp_ep_fail(coll_tcp_ep_t *ep, coll_result_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
coll_result_t coll_tcp_ep_isend(coll_tp_ep_t *tep, coll_tp_op_t *op);
coll_result_t coll_tcp_ep_irecv(coll_tp_ep_t *tep, coll_tp_op_t *op);
/* Handle poll events of one socket; returns > 0 if bytes moved. */
int coll_tcp_sock_progress(coll_tcp_sock_t *s, short revents);
/* What poll() should wait for on s; *fd_p is -1 when nothing (closed, or drained after EOF).
 * No POLLIN while the peer's messages are held (coll_tp_match_held): they wait in the socket. */
static inline short coll_tcp_sock_events(const coll_tcp_sock_t *s, int *fd_p)
{
    int   rx = !s->rx_eof && !coll_tp_match_held(&s->ep->match);
    short ev = (short)((rx ? POLLIN : 0) | (s->txq_head != NULL ? POLLOUT : 0));

    *fd_p = ev != 0 ? s->fd : -1;
    return ev;
}

/* tcp_conn.c */
void          coll_tcp_sock_options(int fd);
coll_result_t coll_tcp_listen(coll_tcp_ctx_t *ctx, void *handle, size_t *handle_len_p);
coll_result_t coll_tcp_connect_all(coll_tcp_ctx_t *ctx, const int *peers, int npeers,
                                   const void *const *handles, double deadline,
                                   coll_tp_ep_t **eps_p);

extern const coll_transport_ops_t coll_tp_tcp_ops;

#endif
