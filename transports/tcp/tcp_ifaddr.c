/* SPDX-License-Identifier: MIT */
/*
 * Which local address the TCP transport (and later the bootstrap) listens on: getifaddrs()
 * filtered by COLL_SOCKET_IFNAME (NCCL syntax) or by the default rules, loopback when every
 * rank is on this host. Also formats socket addresses for log lines. Opens no sockets.
 */
#include "tcp.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include "compiler.h"
#include "log.h"
#include "param.h"
#include "util.h"

#define TCP_IF_MAX_NAMES 32

/* Parsed COLL_SOCKET_IFNAME: "eth,ib" (prefixes), "^docker,lo" (exclude), "=eth0" (exact). */
typedef struct tcp_if_filter {
    int  exclude;
    int  exact;
    int  n;
    char names[TCP_IF_MAX_NAMES][IF_NAMESIZE];
} tcp_if_filter_t;

static void tcp_if_filter_parse(const char *spec, tcp_if_filter_t *f)
{
    const char *p = spec;

    memset(f, 0, sizeof(*f));
    if (*p == '^') {
        f->exclude = 1;
        p++;
    }
    if (*p == '=') {
        f->exact = 1;
        p++;
    }
    while (*p != '\0' && f->n < TCP_IF_MAX_NAMES) {
        size_t len = strcspn(p, ",");

        if (len > 0) {
            size_t copy = COLL_MIN(len, (size_t)IF_NAMESIZE - 1);
            memcpy(f->names[f->n], p, copy);
            f->names[f->n][copy] = '\0';
            f->n++;
        }
        p += len;
        if (*p == ',') {
            p++;
        }
    }
}

static int tcp_if_filter_match(const tcp_if_filter_t *f, const char *name)
{
    int i, matched = 0;

    for (i = 0; i < f->n && !matched; i++) {
        if (f->exact) {
            matched = strcmp(name, f->names[i]) == 0;
        } else {
            matched = strncmp(name, f->names[i], strlen(f->names[i])) == 0;
        }
    }
    return f->exclude ? !matched : matched;
}

enum { TCP_IF_DEFAULT, TCP_IF_USER, TCP_IF_LOOPBACK };

/* Does interface entry ifa, of address family family, qualify under rule? */
static int tcp_if_accept(const struct ifaddrs *ifa, int family, int rule, const tcp_if_filter_t *f)
{
    int loop;

    if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != family ||
        (ifa->ifa_flags & IFF_UP) == 0) {
        return 0;
    }
    loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    switch (rule) {
    case TCP_IF_USER:
        return tcp_if_filter_match(f, ifa->ifa_name);
    case TCP_IF_LOOPBACK:
        return loop;
    default:
        if (loop || strncmp(ifa->ifa_name, "docker", 6) == 0 || strcmp(ifa->ifa_name, "lo") == 0) {
            return 0;
        }
        if (family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(void *)ifa->ifa_addr;
            /* link-local needs a scope every peer agrees on: only when asked for by name */
            if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) {
                return 0;
            }
        }
        return 1;
    }
}

static int tcp_if_search(struct ifaddrs *list, int rule, const tcp_if_filter_t *f,
                         coll_tcp_addr_t *addr_p)
{
    static const int families[] = {AF_INET, AF_INET6};
    struct ifaddrs  *ifa;
    size_t           i;

    for (i = 0; i < COLL_ARRAY_SIZE(families); i++) {
        for (ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
            if (!tcp_if_accept(ifa, families[i], rule, f)) {
                continue;
            }
            memset(addr_p, 0, sizeof(*addr_p));
            addr_p->salen =
                families[i] == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
            memcpy(&addr_p->sa, ifa->ifa_addr, addr_p->salen);
            coll_strlcpy(addr_p->ifname, ifa->ifa_name, sizeof(addr_p->ifname));
            return 1;
        }
    }
    return 0;
}

static void tcp_if_loopback_v4(coll_tcp_addr_t *addr_p)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&addr_p->sa;

    memset(addr_p, 0, sizeof(*addr_p));
    s4->sin_family      = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr_p->salen       = sizeof(*s4);
    coll_strlcpy(addr_p->ifname, "lo", sizeof(addr_p->ifname));
}

coll_result_t coll_tcp_pick_addr(int all_local, coll_tcp_addr_t *addr_p, const char **why_p)
{
    const char     *spec = coll_param_str(COLL_P_SOCKET_IFNAME);
    const char     *why;
    struct ifaddrs *list = NULL;
    tcp_if_filter_t filter;
    int             user = spec != NULL && spec[0] != '\0';

    if (!user && all_local) {
        tcp_if_loopback_v4(addr_p);
        why = "all ranks on this host";
        goto out;
    }
    if (getifaddrs(&list) != 0) {
        coll_error(TCP, "getifaddrs() failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    if (user) {
        tcp_if_filter_parse(spec, &filter);
        if (!tcp_if_search(list, TCP_IF_USER, &filter, addr_p)) {
            freeifaddrs(list);
            coll_error(TCP, "no UP interface with an address matches COLL_SOCKET_IFNAME=%s", spec);
            return COLL_ERR_INVALID_USAGE;
        }
        why = "COLL_SOCKET_IFNAME";
    } else if (tcp_if_search(list, TCP_IF_DEFAULT, NULL, addr_p)) {
        why = "first UP interface that is not loopback or docker";
    } else if (tcp_if_search(list, TCP_IF_LOOPBACK, NULL, addr_p)) {
        why = "no other interface is UP";
    } else {
        tcp_if_loopback_v4(addr_p);
        why = "no interface found, trying 127.0.0.1";
    }
    freeifaddrs(list);
out:
    if (why_p != NULL) {
        *why_p = why;
    }
    return COLL_OK;
}

const char *coll_tcp_sa_str(const struct sockaddr *sa, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN] = "?";
    char scope[IF_NAMESIZE + 1] = "";

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        char                       ifn[IF_NAMESIZE];
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        if (s6->sin6_scope_id != 0 && if_indextoname(s6->sin6_scope_id, ifn) != NULL) {
            snprintf(scope, sizeof(scope), "%%%s", ifn);
        }
        snprintf(buf, size, "[%s%s]:%u", host, scope, (unsigned)ntohs(s6->sin6_port));
    } else {
        snprintf(buf, size, "(family %d)", (int)sa->sa_family);
    }
    return buf;
}
