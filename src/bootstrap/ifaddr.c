/* SPDX-License-Identifier: MIT */
/*
 * Which local address to listen on (bootstrap root, tcp transport): getifaddrs() filtered by
 * COLL_SOCKET_IFNAME (NCCL syntax: prefixes, ^ excludes, = exact names) or by the default rules
 * (not loopback, not docker*, no link-local IPv6), loopback when every rank is on this host or
 * nothing else is up. Opens no sockets.
 */
#include "sock.h"
#include "compiler.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>

#define SOCK_IF_MAX_NAMES 32

/* Parsed COLL_SOCKET_IFNAME: "eth,ib" (prefixes), "^docker,lo" (exclude), "=eth0" (exact). */
typedef struct sock_if_filter {
    int  exclude;
    int  exact;
    int  n;
    char names[SOCK_IF_MAX_NAMES][IF_NAMESIZE];
} sock_if_filter_t;

static void sock_if_filter_parse(const char *spec, sock_if_filter_t *f)
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
    while (*p != '\0' && f->n < SOCK_IF_MAX_NAMES) {
        size_t len = strcspn(p, ",");

        if (len > 0) {
            size_t copy = COLL_MIN_OF(len, (size_t)IF_NAMESIZE - 1);
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

static int sock_if_filter_match(const sock_if_filter_t *f, const char *name)
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

enum { SOCK_IF_DEFAULT, SOCK_IF_USER, SOCK_IF_LOOPBACK };

/* Does interface entry ifa, of address family family, qualify under rule? */
static int sock_if_accept(const struct ifaddrs *ifa, int family, int rule,
                          const sock_if_filter_t *f)
{
    int loop;

    if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != family ||
        (ifa->ifa_flags & IFF_UP) == 0) {
        return 0;
    }
    loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    switch (rule) {
    case SOCK_IF_USER:
        return sock_if_filter_match(f, ifa->ifa_name);
    case SOCK_IF_LOOPBACK:
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

static int sock_if_search(struct ifaddrs *list, int rule, const sock_if_filter_t *f,
                          coll_sockaddr_t *addr_p, char *ifname)
{
    static const int families[] = {AF_INET, AF_INET6};
    struct ifaddrs  *ifa;
    size_t           i;

    for (i = 0; i < COLL_ARRAY_SIZE(families); i++) {
        for (ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
            if (!sock_if_accept(ifa, families[i], rule, f)) {
                continue;
            }
            memset(addr_p, 0, sizeof(*addr_p));
            addr_p->len =
                families[i] == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
            memcpy(&addr_p->ss, ifa->ifa_addr, addr_p->len);
            coll_strlcpy(ifname, ifa->ifa_name, IF_NAMESIZE);
            return 1;
        }
    }
    return 0;
}

static void sock_if_loopback_v4(coll_sockaddr_t *addr_p, char *ifname)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&addr_p->ss;

    memset(addr_p, 0, sizeof(*addr_p));
    s4->sin_family      = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr_p->len         = sizeof(*s4);
    coll_strlcpy(ifname, "lo", IF_NAMESIZE);
}

coll_result_t coll_sock_if_addr4(const char *name, coll_sockaddr_t *addr_p, char *ifname_p)
{
    struct ifaddrs  *list   = NULL, *ifa;
    sock_if_filter_t filter = {.exact = 1, .n = 1};
    char             ifname[IF_NAMESIZE];
    int              found = 0;

    if (getifaddrs(&list) != 0) {
        coll_error(BOOTSTRAP, "getifaddrs() failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    coll_strlcpy(filter.names[0], name, IF_NAMESIZE);
    for (ifa = list; ifa != NULL && !found; ifa = ifa->ifa_next) {
        found = sock_if_accept(ifa, AF_INET, SOCK_IF_USER, &filter);
        if (found) {
            memset(addr_p, 0, sizeof(*addr_p));
            addr_p->len = sizeof(struct sockaddr_in);
            memcpy(&addr_p->ss, ifa->ifa_addr, addr_p->len);
            coll_strlcpy(ifname, ifa->ifa_name, IF_NAMESIZE);
        }
    }
    freeifaddrs(list);
    if (found && ifname_p != NULL) {
        coll_strlcpy(ifname_p, ifname, IF_NAMESIZE);
    }
    return found ? COLL_OK : COLL_ERR_UNSUPPORTED;
}

int coll_sock_ifname_match(const char *filter, const char *name)
{
    sock_if_filter_t f;
    if (filter == NULL || filter[0] == '\0') {
        return strncmp(name, "lo", 2) != 0 && strncmp(name, "docker", 6) != 0;
    }
    sock_if_filter_parse(filter, &f);
    return sock_if_filter_match(&f, name);
}

coll_result_t coll_sock_pick_addr(int all_local, coll_sockaddr_t *addr_p, char *ifname_p,
                                  const char **why_p)
{
    const char      *spec = coll_param_str(COLL_P_SOCKET_IFNAME);
    const char      *why;
    struct ifaddrs  *list = NULL;
    sock_if_filter_t filter;
    char             ifname[IF_NAMESIZE];
    int              user = spec != NULL && spec[0] != '\0';

    if (!user && all_local) {
        sock_if_loopback_v4(addr_p, ifname);
        why = "all ranks on this host";
        goto out;
    }
    if (getifaddrs(&list) != 0) {
        coll_error(BOOTSTRAP, "getifaddrs() failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    if (user) {
        sock_if_filter_parse(spec, &filter);
        if (!sock_if_search(list, SOCK_IF_USER, &filter, addr_p, ifname)) {
            freeifaddrs(list);
            coll_error(BOOTSTRAP, "no UP interface with an address matches COLL_SOCKET_IFNAME=%s",
                       spec);
            return COLL_ERR_INVALID_USAGE;
        }
        why = "COLL_SOCKET_IFNAME";
    } else if (sock_if_search(list, SOCK_IF_DEFAULT, NULL, addr_p, ifname)) {
        why = "first UP interface that is not loopback or docker";
    } else if (sock_if_search(list, SOCK_IF_LOOPBACK, NULL, addr_p, ifname)) {
        why = "no other interface is UP";
    } else {
        sock_if_loopback_v4(addr_p, ifname);
        why = "no interface found, trying 127.0.0.1";
    }
    freeifaddrs(list);
out:
    if (ifname_p != NULL) {
        coll_strlcpy(ifname_p, ifname, IF_NAMESIZE);
    }
    if (why_p != NULL) {
        *why_p = why;
    }
    return COLL_OK;
}
