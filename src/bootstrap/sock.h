/* SPDX-License-Identifier: MIT */
/*
 * Socket helpers for the bootstrap (and reusable by the tcp transport): address parsing and
 * printing, interface choice with NCCL_SOCKET_IFNAME-style filters, non-blocking connect and
 * listen, and send/recv of whole buffers against a deadline.
 */
#ifndef COLL_BOOTSTRAP_SOCK_H
#define COLL_BOOTSTRAP_SOCK_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include "coll.h"

typedef struct {
    struct sockaddr_storage ss;
    socklen_t               len;
} coll_sockaddr_t;

/* "host:port", "[v6]:port"; host may be a name. */
coll_result_t coll_sock_parse(const char *text, coll_sockaddr_t *addr_p);
/* Printable "a.b.c.d:port" into buf. */
const char *coll_sock_str(const coll_sockaddr_t *addr, char *buf, size_t len);
int         coll_sock_port(const coll_sockaddr_t *addr);
void        coll_sock_set_port(coll_sockaddr_t *addr, int port);

/* ifaddr.c: address of the interface to use (COLL_SOCKET_IFNAME: prefixes, ^ excludes,
 * = exact; default skips loopback, docker* and link-local IPv6; loopback when all_local or
 * nothing else is up). ifname_p (IF_NAMESIZE bytes) and why_p may be NULL. */
coll_result_t coll_sock_pick_addr(int all_local, coll_sockaddr_t *addr_p, char *ifname_p,
                                  const char **why_p);
/* The IPv4 address of interface name when it is up; COLL_ERR_UNSUPPORTED (not logged) when it
 * has none or is down. ifname_p (IF_NAMESIZE bytes) may be NULL. */
coll_result_t coll_sock_if_addr4(const char *name, coll_sockaddr_t *addr_p, char *ifname_p);
/* Does name pass the filter (NCCL syntax)? Exposed for tests. */
int coll_sock_ifname_match(const char *filter, const char *name);

/* Listening socket bound to addr (port 0 = any); *addr_p gets the actual port. */
coll_result_t coll_sock_listen(coll_sockaddr_t *addr, int backlog, int *fd_p);
/* Connect with retries on ECONNREFUSED until deadline (coll_time_s()); no attempt outlasts the
 * deadline, also where SYNs go unanswered. */
coll_result_t coll_sock_connect(const coll_sockaddr_t *addr, double deadline, int *fd_p);
/* One non-blocking attempt, waited on until deadline: COLL_OK with *fd_p (non-blocking);
 * COLL_ERR_REMOTE when it failed (refused, unreachable: *err_p gets the errno);
 * COLL_ERR_TIMEOUT when nothing answered by the deadline; COLL_ERR_SYSTEM (logged): no socket.
 * err_p may be NULL. */
coll_result_t coll_sock_connect_once(const coll_sockaddr_t *addr, double deadline, int *fd_p,
                                     int *err_p);
/* Whole-buffer I/O on a (non-blocking) socket, polling until deadline. EOF -> COLL_ERR_REMOTE. */
coll_result_t coll_sock_send_all(int fd, const void *buf, size_t len, double deadline);
coll_result_t coll_sock_recv_all(int fd, void *buf, size_t len, double deadline);
void          coll_sock_nonblock(int fd);

#endif
