/* SPDX-License-Identifier: MIT */
/*
 * collinfo topo: the topology libcoll sees on this host (or in an hwloc XML file): packages,
 * NUMA nodes and their distances, the GPU and NIC link matrix in the style of nvidia-smi
 * topo -m, each GPU's nearest NIC, the PCI tree above the devices, and the ring order libcoll
 * takes over one rank per GPU. --xml writes the topology as hwloc XML (needs hwloc). It reads
 * the library's model (src/topo) directly, so what it prints is what a communicator uses.
 */
#include "collinfo.h"
#include "algo.h"
#include "topo/place.h"
#include "topo/topo.h"
#include "param.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "tree/tree.h"

typedef struct {
    const char *topo;  /* --topo FILE */
    const char *sysfs; /* --sysfs ROOT */
    const char *xml;   /* --xml FILE */
} ct_opts_t;

void collinfo_topo_usage(FILE *out)
{
    fprintf(out,
            "  topo [options]    this host's topology: packages, NUMA nodes, distances, the\n"
            "                    GPU/NIC link matrix (like nvidia-smi topo -m), nearest NICs,\n"
            "                    the PCI tree, and the ring order and trees over the GPUs\n"
            "      --topo FILE        read an hwloc XML file instead (as COLL_TOPO_FILE)\n"
            "      --sysfs ROOT       read sysfs below ROOT, as libcoll does without hwloc\n"
            "      --xml FILE         write the topology as hwloc XML to FILE (- = stdout)\n");
}

static const struct option ct_longopts[] = {{"topo", required_argument, NULL, 't'},
                                            {"sysfs", required_argument, NULL, 's'},
                                            {"xml", required_argument, NULL, 'x'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};

static int ct_parse_args(int argc, char **argv, ct_opts_t *o)
{
    int c;

    *o     = (ct_opts_t){0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", ct_longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            o->topo = optarg;
            break;
        case 's':
            o->sysfs = optarg;
            break;
        case 'x':
            o->xml = optarg;
            break;
        case 'h':
            collinfo_topo_usage(stdout);
            return -1;
        default:
            return 2; /* getopt printed why */
        }
    }
    if (optind < argc) {
        fprintf(stderr, "collinfo topo: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o->topo != NULL && o->sysfs != NULL) {
        fprintf(stderr, "collinfo topo: --topo and --sysfs exclude each other\n");
        return 2;
    }
    if (o->xml != NULL && o->sysfs != NULL) {
        fprintf(stderr, "collinfo topo: --xml writes hwloc's view; it cannot export --sysfs\n");
        return 2;
    }
    return 0;
}

static const char *ct_bytes(uint64_t b, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double                   v      = (double)b;
    int                      u      = 0;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, (u == 0 || v >= 100) ? "%.0f %s" : "%.1f %s", v, unit[u]);
    return buf;
}

/* ---- host summary ---- */

static void ct_print_cpus(const coll_topo_t *t)
{
    char cpus[256], mem[32];

    printf("# host %s (%s)\n", t->hostname[0] ? t->hostname : "-", t->source);
    printf("# %d package(s), %d NUMA node(s), %d core(s), %d PU(s), %d L3 cache(s), %d GPU(s), "
           "%d NIC(s)\n",
           t->npkg, t->nnuma, t->ncores, t->npus, t->nl3, t->ngpu, t->nnic);
    printf("\n# %-8s %-6s %-5s %-4s %-14s %s\n", "package", "cores", "PUs", "L3", "cpus", "model");
    for (int p = 0; p < t->npkg; p++) {
        uint64_t l3  = 0;
        int      nl3 = 0;
        for (int c = 0; c < t->nl3; c++) {
            if (t->l3[c].package == p) {
                l3 += t->l3[c].bytes;
                nl3++;
            }
        }
        printf("  %-8d %-6d %-5d %-4d %-14s %s%s%s\n", t->pkg[p].os_index, t->pkg[p].ncores,
               t->pkg[p].npus, nl3, coll_topo_cpuset_format(&t->pkg[p].cpus, cpus, sizeof(cpus)),
               t->pkg[p].model[0] ? t->pkg[p].model : "-", nl3 ? ", L3 total " : "",
               nl3 ? ct_bytes(l3, mem, sizeof(mem)) : "");
    }
    printf("\n# %-5s %-8s %-6s %-5s %-11s %s\n", "NUMA", "package", "cores", "PUs", "memory",
           "cpus");
    for (int n = 0; n < t->nnuma; n++) {
        const coll_topo_numa_t *m = &t->numa[n];
        printf("  %-5d %-8d %-6d %-5d %-11s %s\n", m->os_index,
               m->package >= 0 ? t->pkg[m->package].os_index : -1, m->ncores, m->npus,
               ct_bytes(m->memory, mem, sizeof(mem)),
               coll_topo_cpuset_format(&m->cpus, cpus, sizeof(cpus)));
    }
    printf("\n# NUMA distances (relative latency, 10 = local; - = unknown)\n%6s", "");
    for (int j = 0; j < t->nnuma; j++) {
        char name[16];
        snprintf(name, sizeof(name), "N%d", t->numa[j].os_index);
        printf(" %7s", name);
    }
    printf("\n");
    for (int i = 0; i < t->nnuma; i++) {
        printf("  N%-3d", t->numa[i].os_index);
        for (int j = 0; j < t->nnuma; j++) {
            if (t->numa_dist[i][j] != 0) {
                printf(" %7u", t->numa_dist[i][j]);
            } else {
                printf(" %7s", "-");
            }
        }
        printf("\n");
    }
}

/* ---- the device matrix ---- */

/* Device d of the matrix: GPUs first, then NICs. */
static const coll_topo_pci_t *ct_dev(const coll_topo_t *t, int d, char *label, size_t len)
{
    snprintf(label, len, "%s%d", d < t->ngpu ? "GPU" : "NIC", d < t->ngpu ? d : d - t->ngpu);
    return (d < t->ngpu) ? &t->gpu[d].pci : &t->nic[d - t->ngpu].pci;
}

static const char *ct_cell(const coll_topo_t *t, int a, int b, char *buf, size_t len)
{
    char                   la[16], lb[16];
    const coll_topo_pci_t *pa = ct_dev(t, a, la, sizeof(la)), *pb = ct_dev(t, b, lb, sizeof(lb));
    coll_topo_link_t       l;

    if (a < t->ngpu && b < t->ngpu) {
        l = coll_topo_gpu_link(t, a, b);
    } else {
        l = (a == b) ? COLL_TOPO_LINK_X : coll_topo_pci_link(pa, pb);
    }
    if (l == COLL_TOPO_LINK_NV) {
        snprintf(buf, len, "NV%d", t->nvlinks[a][b]);
    } else {
        snprintf(buf, len, "%s", coll_topo_link_name(l));
    }
    return buf;
}

static void ct_print_matrix(const coll_topo_t *t)
{
    int  nd = t->ngpu + t->nnic;
    char label[16], cell[16], cpus[256];

    if (nd == 0) {
        printf("\n# no GPU or NIC found\n");
        return;
    }
    printf("\n# devices: how each pair is linked\n%-6s", "");
    for (int d = 0; d < nd; d++) {
        ct_dev(t, d, label, sizeof(label));
        printf(" %-5s", label);
    }
    printf(" %-14s %s\n", "CPU affinity", "NUMA affinity");
    for (int a = 0; a < nd; a++) {
        const coll_topo_pci_t *pa = ct_dev(t, a, label, sizeof(label));
        printf("%-6s", label);
        for (int b = 0; b < nd; b++) {
            printf(" %-5s", ct_cell(t, a, b, cell, sizeof(cell)));
        }
        if (pa->numa >= 0) {
            coll_topo_cpuset_format(&t->numa[pa->numa].cpus, cpus, sizeof(cpus));
            printf(" %-14s %d\n", cpus, t->numa[pa->numa].os_index);
        } else if (pa->package >= 0) {
            coll_topo_cpuset_format(&t->pkg[pa->package].cpus, cpus, sizeof(cpus));
            printf(" %-14s %s\n", cpus, "-");
        } else {
            printf(" %-14s %s\n", "-", "-");
        }
    }
    printf("\nLegend:\n");
    for (int l = 0; l < COLL_TOPO_LINK_COUNT; l++) {
        printf("  %-4s = %s\n", l == COLL_TOPO_LINK_NV ? "NV#" : coll_topo_link_name(l),
               coll_topo_link_help(l));
    }
}

/* ---- device lists ---- */

static void ct_print_devices(const coll_topo_t *t)
{
    int              nic[COLL_TOPO_MAX_GPU];
    coll_topo_link_t link[COLL_TOPO_MAX_GPU];
    char             bus[32], speed[32];

    coll_topo_gpu_nics(t, nic, link);
    if (t->ngpu > 0) {
        printf("\n# %-5s %-13s %-8s %-5s %-8s %-12s %s\n", "GPU", "bus id", "package", "NUMA",
               "device", "nearest NIC", "name");
    }
    for (int g = 0; g < t->ngpu; g++) {
        const coll_topo_pci_t *p        = &t->gpu[g].pci;
        char                   near[32] = "-";
        if (nic[g] >= 0) {
            snprintf(near, sizeof(near), "NIC%d (%s)", nic[g], coll_topo_link_name(link[g]));
        }
        printf("  GPU%-2d %-13s %-8d %-5d %-8s %-12s %s\n", g,
               coll_topo_busid_format(p->busid, bus, sizeof(bus)),
               p->package >= 0 ? t->pkg[p->package].os_index : -1,
               p->numa >= 0 ? t->numa[p->numa].os_index : -1,
               t->gpu[g].osdev[0] ? t->gpu[g].osdev : "-", near, t->gpu[g].name);
    }
    if (t->nnic > 0) {
        printf("\n# %-5s %-13s %-8s %-5s %-10s %-10s %s\n", "NIC", "bus id", "package", "NUMA",
               "interface", "verbs", "speed");
    }
    for (int n = 0; n < t->nnic; n++) {
        const coll_topo_pci_t *p = &t->nic[n].pci;
        snprintf(speed, sizeof(speed), "-");
        if (t->nic[n].speed_mbps > 0) {
            snprintf(speed, sizeof(speed), "%g Gb/s", t->nic[n].speed_mbps / 1000.0);
        }
        printf("  NIC%-2d %-13s %-8d %-5d %-10s %-10s %s\n", n,
               coll_topo_busid_format(p->busid, bus, sizeof(bus)),
               p->package >= 0 ? t->pkg[p->package].os_index : -1,
               p->numa >= 0 ? t->numa[p->numa].os_index : -1,
               t->nic[n].name[0] ? t->nic[n].name : "-", t->nic[n].ofa[0] ? t->nic[n].ofa : "-",
               speed);
    }
}

/* ---- the PCI tree above the devices ---- */

/* Order of the tree: package, then the bridge chain, then the device's own address. */
static int ct_tree_cmp(const coll_topo_pci_t *a, const coll_topo_pci_t *b)
{
    if (a->package != b->package) {
        return (a->package < b->package) ? -1 : 1;
    }
    for (int k = 0; k < a->nchain && k < b->nchain; k++) {
        if (a->chain[k] != b->chain[k]) {
            return (a->chain[k] < b->chain[k]) ? -1 : 1;
        }
    }
    if (a->nchain != b->nchain) {
        return (a->nchain < b->nchain) ? -1 : 1;
    }
    return (a->busid < b->busid) ? -1 : (a->busid > b->busid);
}

static void ct_print_tree(const coll_topo_t *t)
{
    int                    nd   = t->ngpu + t->nnic, idx[COLL_TOPO_MAX_GPU + COLL_TOPO_MAX_NIC];
    const coll_topo_pci_t *prev = NULL;
    char                   label[16], bus[32];

    if (nd == 0) {
        return;
    }
    for (int i = 0; i < nd; i++) { /* insertion sort: a few dozen devices */
        int j  = i;
        idx[i] = i;
        while (j > 0 && ct_tree_cmp(ct_dev(t, idx[j - 1], label, sizeof(label)),
                                    ct_dev(t, idx[j], label, sizeof(label))) > 0) {
            int x      = idx[j];
            idx[j]     = idx[j - 1];
            idx[j - 1] = x;
            j--;
        }
    }
    printf("\n# PCI tree above the devices\n");
    for (int i = 0; i < nd; i++) {
        const coll_topo_pci_t *p      = ct_dev(t, idx[i], label, sizeof(label));
        int                    common = 0;
        if (prev == NULL || prev->package != p->package) {
            if (p->package >= 0) {
                printf("  Package %d\n", t->pkg[p->package].os_index);
            } else {
                printf("  (package unknown)\n");
            }
            prev = NULL;
        }
        while (prev != NULL && common < prev->nchain && common < p->nchain &&
               prev->chain[common] == p->chain[common]) {
            common++;
        }
        for (int k = common; k < p->nchain; k++) {
            printf("%*s%s %s\n", 4 + 2 * k, "",
                   COLL_TOPO_IS_HOSTBRIDGE(p->chain[k]) ? "HostBridge" : "PCIBridge",
                   coll_topo_busid_format(p->chain[k], bus, sizeof(bus)));
        }
        printf("%*s%s %s %s\n", 4 + 2 * p->nchain, "", label,
               coll_topo_busid_format(p->busid, bus, sizeof(bus)),
               idx[i] < t->ngpu
                   ? t->gpu[idx[i]].name
                   : (t->nic[idx[i] - t->ngpu].name[0] ? t->nic[idx[i] - t->ngpu].name
                                                       : t->nic[idx[i] - t->ngpu].ofa));
        prev = p;
    }
}

/* ---- the ring libcoll takes ---- */

static void ct_print_ring(const coll_topo_t *t)
{
    int               n = (t->ngpu > 0) ? t->ngpu : t->nnuma, order[COLL_TOPO_MAX_NUMA];
    coll_topo_place_t places[COLL_TOPO_MAX_NUMA] = {{0}};
    int               hosts, pkgs;

    if (n == 0) {
        return;
    }
    for (int r = 0; r < n; r++) {
        coll_topo_place_of(t, 1, t->ngpu > 0 ? r : -1, t->ngpu > 0 ? -1 : r, &places[r]);
    }
    coll_topo_ring_order(places, n, order);
    coll_topo_ring_crossings(places, n, order, &hosts, &pkgs);
    printf("\n# ring over one rank per %s:", t->ngpu > 0 ? "GPU" : "NUMA node");
    for (int i = 0; i < n; i++) {
        if (t->ngpu > 0) {
            printf(" GPU%d", order[i]);
        } else {
            printf(" N%d", t->numa[order[i]].os_index);
        }
    }
    printf("\n# it crosses between packages %d time(s)\n", pkgs);
}

/* ---- the trees libcoll builds over that ring's order ---- */

static void ct_dev_name(const coll_topo_t *t, int r, char *buf, size_t len)
{
    if (t->ngpu > 0) {
        snprintf(buf, len, "GPU%d", r);
    } else {
        snprintf(buf, len, "N%d", t->numa[r].os_index);
    }
}

/* Rank r and its subtree, one rank a line, indented by depth. */
static void ct_print_subtree(const coll_topo_t *t, const coll_layout_t *l, int tree, int r,
                             int depth)
{
    coll_tree_node_t nd;
    char             name[16];

    ct_dev_name(t, r, name, sizeof(name));
    printf("#   %*s%s\n", 2 * depth, "", name);
    coll_topo_dbtree_node(l, r, l->nranks, tree, &nd);
    for (int c = 0; c < nd.nchildren; c++) {
        ct_print_subtree(t, l, tree, nd.child[c], depth + 1);
    }
}

static void ct_print_trees(const coll_topo_t *t)
{
    int               n = (t->ngpu > 0) ? t->ngpu : t->nnuma, order[COLL_TOPO_MAX_NUMA];
    coll_topo_place_t places[COLL_TOPO_MAX_NUMA] = {{0}};
    uint64_t          keys[COLL_TOPO_MAX_NUMA]   = {0};
    coll_layout_t     l;

    if (n < 2 || coll_layout_init(&l, n, keys) != COLL_OK) {
        return;
    }
    for (int r = 0; r < n; r++) {
        coll_topo_place_of(t, 1, t->ngpu > 0 ? r : -1, t->ngpu > 0 ? -1 : r, &places[r]);
    }
    coll_topo_ring_order(places, n, order);
    if (coll_layout_set_ring(&l, order) != COLL_OK) {
        coll_layout_fini(&l);
        return;
    }
    printf("\n# double binary tree over the ring's order, depth %d\n"
           "# (all-reduce; broadcast and reduce use tree 0 turned to their root)\n",
           coll_tree_depth(n));
    for (int tree = 0; tree < 2; tree++) {
        int pkgs = 0, root = -1;

        for (int r = 0; r < n; r++) {
            coll_tree_node_t nd;

            coll_topo_dbtree_node(&l, r, n, tree, &nd);
            root = (nd.parent < 0) ? r : root;
            pkgs += nd.parent >= 0 && places[r].package != places[nd.parent].package;
        }
        printf("# tree %d: %d edge(s) between packages\n", tree, pkgs);
        ct_print_subtree(t, &l, tree, root, 0);
    }
    coll_layout_fini(&l);
}

static int ct_failed(coll_result_t st)
{
    const char *why = coll_last_error();

    fprintf(stderr, "collinfo topo: %s\n", why[0] != '\0' ? why : coll_strerror(st));
    return 1;
}

int collinfo_topo_main(int argc, char **argv)
{
    ct_opts_t     o;
    coll_topo_t  *t;
    coll_result_t st;
    int           rc = ct_parse_args(argc, argv, &o);

    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    if (o.xml != NULL) {
        const char *src = (o.topo != NULL) ? o.topo : coll_param_str(COLL_P_TOPO_FILE);
        st = coll_topo_export_xml(src[0] ? src : NULL, strcmp(o.xml, "-") == 0 ? "-" : o.xml);
        if (st != COLL_OK) {
            return ct_failed(st);
        }
        if (strcmp(o.xml, "-") != 0) {
            printf("collinfo topo: wrote the hwloc XML of %s to %s\n", src[0] ? src : "this host",
                   o.xml);
        }
        return 0;
    }
    st = (o.topo != NULL)    ? coll_topo_load_xml(o.topo, &t)
         : (o.sysfs != NULL) ? coll_topo_load_sysfs(o.sysfs, &t)
                             : coll_topo_load(&t);
    if (st != COLL_OK) {
        return ct_failed(st);
    }
    ct_print_cpus(t);
    ct_print_matrix(t);
    ct_print_devices(t);
    ct_print_tree(t);
    ct_print_ring(t);
    ct_print_trees(t);
    coll_topo_free(t);
    return 0;
}
