/* SPDX-License-Identifier: MIT */
/*
 * Sets of PUs by os index, and their text form, the kernel's cpulist ("0-15,32-47"), which
 * sysfs writes and COLL_DEBUG lines and collinfo print. Fixed size (COLL_TOPO_MAX_CPUS), so a
 * model holding them is one allocation; larger CPU numbers are dropped, not an error.
 */
#include "topo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void coll_topo_cpuset_set(coll_topo_cpuset_t *s, int cpu)
{
    if (cpu >= 0 && cpu < COLL_TOPO_MAX_CPUS) {
        s->w[cpu / 64] |= 1ull << (cpu % 64);
    }
}

int coll_topo_cpuset_isset(const coll_topo_cpuset_t *s, int cpu)
{
    return cpu >= 0 && cpu < COLL_TOPO_MAX_CPUS && ((s->w[cpu / 64] >> (cpu % 64)) & 1) != 0;
}

int coll_topo_cpuset_count(const coll_topo_cpuset_t *s)
{
    int n = 0;

    for (size_t i = 0; i < sizeof(s->w) / sizeof(s->w[0]); i++) {
        n += __builtin_popcountll(s->w[i]);
    }
    return n;
}

int coll_topo_cpuset_first(const coll_topo_cpuset_t *s)
{
    for (size_t i = 0; i < sizeof(s->w) / sizeof(s->w[0]); i++) {
        if (s->w[i] != 0) {
            return (int)i * 64 + __builtin_ctzll(s->w[i]);
        }
    }
    return -1;
}

void coll_topo_cpuset_or(coll_topo_cpuset_t *a, const coll_topo_cpuset_t *b)
{
    for (size_t i = 0; i < sizeof(a->w) / sizeof(a->w[0]); i++) {
        a->w[i] |= b->w[i];
    }
}

char *coll_topo_cpuset_format(const coll_topo_cpuset_t *s, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int c = 0; c < COLL_TOPO_MAX_CPUS; c++) {
        if (!coll_topo_cpuset_isset(s, c)) {
            continue;
        }
        int end = c;
        while (coll_topo_cpuset_isset(s, end + 1)) {
            end++;
        }
        int n = (end == c) ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", c)
                           : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, end);
        if (n < 0 || (size_t)n >= len - used) { /* truncated: end with "..." where it fits */
            if (len > 4) {
                strcpy(buf + len - 4, "...");
            }
            break;
        }
        used += (size_t)n;
        c = end;
    }
    return buf;
}

int coll_topo_cpuset_parse(const char *text, coll_topo_cpuset_t *s)
{
    const char *p = text;

    memset(s, 0, sizeof(*s));
    while (*p == ' ' || *p == '\n') {
        p++;
    }
    while (*p != '\0' && *p != '\n') {
        char *end;
        long  lo = strtol(p, &end, 10), hi;
        if (end == p || lo < 0) {
            return -1;
        }
        hi = lo;
        p  = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo) {
                return -1;
            }
            p = end;
        }
        for (long c = lo; c <= hi && c < COLL_TOPO_MAX_CPUS; c++) {
            coll_topo_cpuset_set(s, (int)c);
        }
        if (*p == ',') {
            p++;
        } else if (*p != '\0' && *p != '\n') {
            return -1;
        }
    }
    return 0;
}
