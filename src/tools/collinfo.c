/* SPDX-License-Identifier: MIT */
/*
 * collinfo: what libcoll sees and would do on this machine: version, every parameter with its
 * value, default, source and help (like ucx_info -c), the transports built in and whether they
 * can run here, and the algorithms. This file uses the public API only; the tuner's predictions
 * ("algos -n N", collinfo_algos.c) and the topology ("topo", collinfo_topo.c) call the
 * library's internals.
 */
#include "collinfo.h"

#include <coll.h>

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: collinfo [command]\n"
                 "  (none)            summary: version, transports, algorithms\n"
                 "  -p, params        every parameter: value, default, source, help\n"
                 "  -t, transports    transports built in and whether they are usable here\n"
                 "  -a, algos         algorithms and the collectives they implement\n");
    collinfo_algos_usage(out);
    collinfo_topo_usage(out);
    collinfo_doctor_usage(out);
    fprintf(out, "  -h, --help        this text\n");
}

static void print_params(void)
{
    int n = coll_param_count();
    printf("# %-26s %-10s %-10s %-12s %s\n", "parameter", "value", "default", "source", "help");
    for (int i = 0; i < n; i++) {
        coll_param_info_t p;
        if (coll_param_get(i, &p) != COLL_OK) {
            continue;
        }
        printf("%-28s %-10s %-10s %-12s %s (%s, %s)\n", p.name, p.value[0] ? p.value : "\"\"",
               p.deflt[0] ? p.deflt : "\"\"", p.source, p.help, p.type, p.subsys);
    }
}

static void print_transports(void)
{
    printf("# %-8s %-7s %s\n", "transport", "usable", "description");
    for (int i = 0; i < coll_transport_count(); i++) {
        coll_transport_info_t t;
        if (coll_transport_get(i, &t) == COLL_OK) {
            printf("  %-8s %-7s %s%s%s\n", t.name, t.usable ? "yes" : "no", t.desc,
                   t.usable ? "" : " -- ", t.why_not);
        }
    }
}

static void print_algos(void)
{
    printf("# %-13s %-40s %s\n", "algorithm", "collectives", "description");
    for (int i = 0; i < coll_algo_count(); i++) {
        coll_algo_info_t a;
        if (coll_algo_get(i, &a) == COLL_OK) {
            printf("  %-13s %-40s %s\n", a.name, a.colls, a.desc);
        }
    }
}

int main(int argc, char **argv)
{
    const char *cmd     = argc > 1 ? argv[1] : "";
    int         version = 0;
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "-p") == 0 || strcmp(cmd, "params") == 0) {
        print_params();
    } else if (strcmp(cmd, "-t") == 0 || strcmp(cmd, "transports") == 0) {
        print_transports();
    } else if ((strcmp(cmd, "-a") == 0 || strcmp(cmd, "algos") == 0) && argc > 2) {
        return collinfo_algos_main(argc - 1, argv + 1);
    } else if (strcmp(cmd, "-a") == 0 || strcmp(cmd, "algos") == 0) {
        print_algos();
    } else if (strcmp(cmd, "doctor") == 0) {
        return collinfo_doctor_main(argc - 1, argv + 1);
    } else if (strcmp(cmd, "topo") == 0) {
        return collinfo_topo_main(argc - 1, argv + 1);
    } else if (cmd[0] == '\0') {
        coll_get_version(&version);
        printf("libcoll %d.%d.%d\n\n", version / 10000, version / 100 % 100, version % 100);
        print_transports();
        printf("\n");
        print_algos();
        printf("\nRun 'collinfo -p' for every parameter.\n");
    } else {
        fprintf(stderr, "collinfo: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    return 0;
}
