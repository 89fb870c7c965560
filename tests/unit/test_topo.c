/* SPDX-License-Identifier: MIT */
/*
 * The topology model on the machines of tests/topologies (hwloc XML): counts, where each GPU
 * and NIC sits, the links between them (PIX within a switch, SYS across sockets, NVLink), the
 * nearest NIC of each GPU, and the ring order: on the 2-socket machine it crosses the socket
 * link exactly twice, and over emulated hosts it enters and leaves each host once. Also the
 * link rules on hand-made bridge chains, cpusets and bus ids, and COLL_TOPO_FILE. Without hwloc
 * the XML parts check that files are refused and the rest still runs.
 */
#include "config.h"
#include "coll_test.h"
#include "param.h"
#include "topo/local.h"
#include "topo/place.h"
#include "topo/topo.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FIX_2S  TOPO_DIR "/synthetic_2s8g4n.xml"
#define FIX_DGX TOPO_DIR "/synthetic_dgx.xml"
#define FIX_4N  TOPO_DIR "/synthetic_quadnuma.xml"
#ifdef HAVE_HWLOC
#define HAVE_HWLOC_TEXT ""
#else
#define HAVE_HWLOC_TEXT " (without hwloc: the XML machines were not read)"
#endif

/* ---- link rules on hand-made chains ---- */

static coll_topo_pci_t dev(uint64_t busid, int pkg, int n, const uint64_t *chain)
{
    coll_topo_pci_t p = {.busid = busid, .package = pkg, .numa = pkg, .nchain = n};

    memcpy(p.chain, chain, (size_t)n * sizeof(chain[0]));
    return p;
}

static void test_link_rules(void)
{
    uint64_t hb0 = COLL_TOPO_HOSTBRIDGE(0, 0x10), hb1 = COLL_TOPO_HOSTBRIDGE(0, 0x20);
    uint64_t rp = COLL_TOPO_BUSID(0, 0x10, 1, 0), up = COLL_TOPO_BUSID(0, 0x11, 0, 0);
    uint64_t up2 = COLL_TOPO_BUSID(0, 0x13, 0, 0), up3 = COLL_TOPO_BUSID(0, 0x14, 0, 0);
    /* root port -> switch (upstream, downstream ports) -> devices */
    uint64_t        ca[] = {hb0, rp, up, COLL_TOPO_BUSID(0, 0x12, 0, 0)};
    uint64_t        cb[] = {hb0, rp, up, COLL_TOPO_BUSID(0, 0x12, 4, 0)};
    coll_topo_pci_t a = dev(1, 0, 4, ca), b = dev(2, 0, 4, cb);
    /* two levels of switches: a and c meet at the upper switch only */
    uint64_t cc[] = {
        hb0, rp, up, COLL_TOPO_BUSID(0, 0x12, 8, 0), up2, COLL_TOPO_BUSID(0, 0x15, 0, 0)};
    uint64_t cd[] = {
        hb0, rp, up, COLL_TOPO_BUSID(0, 0x12, 12, 0), up3, COLL_TOPO_BUSID(0, 0x16, 0, 0)};
    coll_topo_pci_t c = dev(3, 0, 6, cc), d = dev(4, 0, 6, cd);
    /* another root port of the same host bridge; another host bridge, then another package */
    uint64_t        ce[] = {hb0, COLL_TOPO_BUSID(0, 0x10, 2, 0)}, cf[] = {hb1, rp};
    coll_topo_pci_t e = dev(5, 0, 2, ce), f = dev(6, 0, 2, cf), g = dev(7, 1, 2, cf);
    /* a switch drawn as a single bridge below the host bridge */
    uint64_t        ch[] = {hb1, COLL_TOPO_BUSID(0, 0x20, 3, 0)};
    coll_topo_pci_t h = dev(8, 1, 2, ch), i = dev(9, 1, 2, ch);

    ASSERT_EQ(coll_topo_pci_link(&a, &a), COLL_TOPO_LINK_X);
    ASSERT_EQ(coll_topo_pci_link(&a, &b), COLL_TOPO_LINK_PIX);
    ASSERT_EQ(coll_topo_pci_switch(&a), up);
    ASSERT_EQ(coll_topo_pci_link(&c, &d), COLL_TOPO_LINK_PXB);
    ASSERT_EQ(coll_topo_pci_link(&a, &c), COLL_TOPO_LINK_PXB);
    ASSERT_EQ(coll_topo_pci_link(&a, &e), COLL_TOPO_LINK_PHB);
    ASSERT_EQ(coll_topo_pci_link(&a, &f), COLL_TOPO_LINK_NODE);
    ASSERT_EQ(coll_topo_pci_link(&a, &g), COLL_TOPO_LINK_SYS);
    ASSERT_EQ(coll_topo_pci_link(&h, &i), COLL_TOPO_LINK_PIX);
    ASSERT_EQ(coll_topo_pci_link(&h, &g), COLL_TOPO_LINK_PHB);
    /* unknown package: the NUMA node decides, and unknown both is the worst case */
    f.package = g.package = -1;
    g.numa                = 0;
    ASSERT_EQ(coll_topo_pci_link(&a, &g), COLL_TOPO_LINK_NODE);
    g.numa = -1;
    ASSERT_EQ(coll_topo_pci_link(&a, &g), COLL_TOPO_LINK_SYS);
    ASSERT_TRUE(strcmp(coll_topo_link_name(COLL_TOPO_LINK_PXB), "PXB") == 0);
}

static void test_text(void)
{
    coll_topo_cpuset_t s;
    char               buf[64];
    uint64_t           id;

    ASSERT_EQ(coll_topo_cpuset_parse("0-3,8,10-11\n", &s), 0);
    ASSERT_EQ(coll_topo_cpuset_count(&s), 7);
    ASSERT_TRUE(strcmp(coll_topo_cpuset_format(&s, buf, sizeof(buf)), "0-3,8,10-11") == 0);
    ASSERT_EQ(coll_topo_cpuset_first(&s), 0);
    ASSERT_EQ(coll_topo_cpuset_parse("3-1", &s), -1);
    ASSERT_EQ(coll_topo_cpuset_parse("1,x", &s), -1);
    ASSERT_EQ(coll_topo_cpuset_parse("", &s), 0);
    ASSERT_EQ(coll_topo_cpuset_first(&s), -1);
    ASSERT_EQ(coll_topo_busid_parse("0000:b3:1f.7", &id), 0);
    ASSERT_EQ(id, COLL_TOPO_BUSID(0, 0xb3, 0x1f, 7));
    ASSERT_TRUE(strcmp(coll_topo_busid_format(id, buf, sizeof(buf)), "0000:b3:1f.7") == 0);
    ASSERT_EQ(coll_topo_busid_parse("18:00.0", &id), 0);
    ASSERT_EQ(coll_topo_busid_parse("pci0000:00", &id), -1);
    ASSERT_EQ(coll_topo_busid_parse("0000:00:20.0", &id), -1); /* device 32 does not exist */
    coll_topo_busid_format(COLL_TOPO_HOSTBRIDGE(0, 0x17), buf, sizeof(buf));
    ASSERT_TRUE(strcmp(buf, "0000:17") == 0);
}

/* ---- the machines ---- */

#ifdef HAVE_HWLOC
static coll_topo_t *load(const char *path)
{
    coll_topo_t *t = NULL;

    ASSERT_OK(coll_topo_load_xml(path, &t));
    return t;
}

static void test_two_sockets(void)
{
    coll_topo_t     *t = load(FIX_2S);
    int              nic[COLL_TOPO_MAX_GPU];
    coll_topo_link_t link[COLL_TOPO_MAX_GPU];

    ASSERT_EQ(t->npkg, 2);
    ASSERT_EQ(t->nnuma, 2);
    ASSERT_EQ(t->ncores, 32);
    ASSERT_EQ(t->npus, 64);
    ASSERT_EQ(t->ngpu, 8);
    ASSERT_EQ(t->nnic, 4);
    ASSERT_EQ(t->numa_dist[0][1], 21);
    ASSERT_EQ(t->numa_dist[1][1], 10);
    ASSERT_EQ(t->numa[1].package, 1);
    ASSERT_TRUE(coll_topo_cpuset_isset(&t->numa[1].cpus, 32));
    ASSERT_TRUE(!coll_topo_cpuset_isset(&t->numa[1].cpus, 31));
    for (int g = 0; g < 8; g++) {
        ASSERT_EQ(t->gpu[g].pci.package, g / 4); /* four GPUs under each socket */
        ASSERT_EQ(t->gpu[g].pci.numa, g / 4);
        ASSERT_EQ(t->gpu[g].pci.vendor, 0x10de);
        ASSERT_EQ(coll_topo_gpu_link(t, g, g ^ 1), COLL_TOPO_LINK_PIX);
        ASSERT_EQ(coll_topo_gpu_link(t, g, g ^ 2), COLL_TOPO_LINK_NODE);
        ASSERT_EQ(coll_topo_gpu_link(t, g, (g + 4) % 8), COLL_TOPO_LINK_SYS);
        ASSERT_EQ(coll_topo_gpu_nic_link(t, g, g / 2), COLL_TOPO_LINK_PIX);
        ASSERT_EQ(coll_topo_gpu_nic_link(t, g, ((g / 2) + 2) % 4), COLL_TOPO_LINK_SYS);
    }
    for (int n = 0; n < 4; n++) {
        char want[16];
        snprintf(want, sizeof(want), "mlx5_%d", n);
        ASSERT_TRUE(strcmp(t->nic[n].ofa, want) == 0);
        ASSERT_EQ(t->nic[n].pci.package, n / 2);
    }
    coll_topo_gpu_nics(t, nic, link);
    for (int g = 0; g < 8; g++) { /* the NIC of its own switch, shared by the switch's 2 GPUs */
        ASSERT_EQ(nic[g], g / 2);
        ASSERT_EQ(link[g], COLL_TOPO_LINK_PIX);
    }
    coll_topo_free(t);
}

static void test_dgx(void)
{
    coll_topo_t *t = load(FIX_DGX);
    int          nic[COLL_TOPO_MAX_GPU], used[COLL_TOPO_MAX_NIC] = {0};

    ASSERT_EQ(t->ngpu, 8);
    ASSERT_EQ(t->nnic, 8);
    coll_topo_gpu_nics(t, nic, NULL);
    for (int g = 0; g < 8; g++) { /* one to one, each NIC under its GPU's switch */
        ASSERT_TRUE(nic[g] >= 0);
        ASSERT_EQ(used[nic[g]]++, 0);
        ASSERT_EQ(coll_topo_gpu_nic_link(t, g, nic[g]), COLL_TOPO_LINK_PIX);
        ASSERT_EQ(coll_topo_pci_switch(&t->gpu[g].pci), coll_topo_pci_switch(&t->nic[nic[g]].pci));
        for (int h = 0; h < 8; h++) {
            ASSERT_EQ(coll_topo_gpu_link(t, g, h), g == h ? COLL_TOPO_LINK_X : COLL_TOPO_LINK_NV);
            ASSERT_EQ(t->nvlinks[g][h], g == h ? 0 : 18);
        }
    }
    coll_topo_free(t);
}

static void test_quad_numa(void)
{
    coll_topo_t *t = load(FIX_4N);

    ASSERT_EQ(t->npkg, 1);
    ASSERT_EQ(t->nnuma, 4);
    ASSERT_EQ(t->nl3, 4);
    ASSERT_EQ(t->ngpu + t->nnic, 0);
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(t->numa[i].package, 0);
        ASSERT_EQ(t->numa[i].ncores, 8);
        for (int j = 0; j < 4; j++) {
            ASSERT_EQ(t->numa_dist[i][j], i == j ? 10 : i / 2 == j / 2 ? 12 : 32);
        }
    }
    coll_topo_free(t);
}

/* ---- ring order ---- */

/* Host boundaries crossed by ring edges touching host h. */
static int ring_host_edges(const coll_topo_place_t *p, int n, const int *order, uint64_t h)
{
    int edges = 0;

    for (int i = 0; i < n; i++) {
        const coll_topo_place_t *a = &p[order[i]], *b = &p[order[(i + 1) % n]];
        edges += (a->host != b->host && (a->host == h || b->host == h));
    }
    return edges;
}

static void test_ring(void)
{
    coll_topo_t *t = load(FIX_2S);
    enum { HOSTS = 4, N = 8 * HOSTS };
    coll_topo_place_t p[N];
    int               order[N], hosts, pkgs, naive[N];

    /* one host, rank r on GPU 3r mod 8: rank order crosses the sockets at almost every step */
    for (int r = 0; r < 8; r++) {
        coll_topo_place_of(t, 42, (3 * r) % 8, -1, &p[r]);
        naive[r] = r;
    }
    coll_topo_ring_crossings(p, 8, naive, &hosts, &pkgs);
    ASSERT_TRUE(pkgs > 2);
    coll_topo_ring_order(p, 8, order);
    coll_topo_ring_crossings(p, 8, order, &hosts, &pkgs);
    ASSERT_EQ(hosts, 0);
    ASSERT_EQ(pkgs, 2);
    for (int i = 0, sw = 0; i < 8; i++) { /* switch mates adjacent: 4 switch changes around */
        sw += p[order[i]].pci_sw != p[order[(i + 1) % 8]].pci_sw;
        ASSERT_TRUE(i < 7 || sw == 4);
    }
    /* HOSTS emulated hosts of this machine, ranks dealt out across them */
    for (int r = 0; r < N; r++) {
        coll_topo_place_of(t, 1000 + (uint64_t)((r * 5) % HOSTS), (r * 3 / HOSTS) % 8, -1, &p[r]);
        naive[r] = r;
    }
    coll_topo_ring_crossings(p, N, naive, &hosts, &pkgs);
    ASSERT_TRUE(hosts > HOSTS);
    coll_topo_ring_order(p, N, order);
    coll_topo_ring_crossings(p, N, order, &hosts, &pkgs);
    ASSERT_EQ(hosts, HOSTS);
    ASSERT_EQ(pkgs, HOSTS); /* once inside each host; the host links make up the rest */
    for (int h = 0; h < HOSTS; h++) {
        ASSERT_EQ(ring_host_edges(p, N, order, 1000 + (uint64_t)h), 2);
    }
    for (int i = 0; i < N; i++) { /* hosts meet on the same NIC rail (even host count) */
        const coll_topo_place_t *a = &p[order[i]], *b = &p[order[(i + 1) % N]];
        ASSERT_TRUE(a->host == b->host || a->nic == b->nic);
    }
    coll_topo_free(t);
}

/* A rank's own place: its current CUDA device, else by COLL_TOPO_GPU, else its CPUs' node. */
static void test_place_self(void)
{
    coll_topo_t       *t = load(FIX_2S);
    coll_topo_cpuset_t aff;
    coll_topo_place_t  p;

    ASSERT_EQ(coll_topo_cpuset_parse("33-35", &aff), 0);
    ASSERT_EQ(coll_topo_numa_of_cpus(t, &aff), 1);
    ASSERT_EQ(coll_topo_cpuset_parse("30-33", &aff), 0); /* over both sockets */
    ASSERT_EQ(coll_topo_numa_of_cpus(t, &aff), -1);
    memset(&aff, 0, sizeof(aff));
    ASSERT_EQ(coll_topo_numa_of_cpus(t, &aff), -1);
    /* the CUDA device wins; its function number does not matter */
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_AUTO, t->gpu[5].pci.busid | 1, 0), 5);
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_LOCAL_RANK, t->gpu[5].pci.busid, 2), 5);
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_NONE, t->gpu[5].pci.busid, 2), -1);
    /* no device: no guess unless asked for, then local rank mod GPUs */
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_AUTO, 0, 3), -1);
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_LOCAL_RANK, 0, 11), 3);
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_LOCAL_RANK, 0, -1), -1);
    ASSERT_EQ(coll_topo_pick_gpu(t, COLL_TOPO_GPU_AUTO, 0xdead0, 3), -1); /* not on this host */
    ASSERT_EQ(coll_topo_cpuset_parse("40", &aff), 0);
    coll_topo_place_self(t, 9, -1, &aff, &p);
    ASSERT_EQ(p.known, 1);
    ASSERT_EQ(p.numa, 1);
    ASSERT_EQ(p.package, 1);
    ASSERT_EQ(p.gpu, 0);
    coll_topo_place_self(t, 9, 2, &aff, &p); /* a GPU places the rank by the GPU */
    ASSERT_EQ(p.numa, 0);
    ASSERT_EQ(p.gpu, t->gpu[2].pci.busid + 1);
    ASSERT_EQ(p.nic, 1);
    coll_topo_free(t);
}

/* COLL_BIND's choice: inside the rank's NUMA node and the allowed CPUs; core mode gives the
 * ranks of one node different cores, and ranks of different nodes CPUs of their own node. */
static int cpuset_subset(const coll_topo_cpuset_t *a, const coll_topo_cpuset_t *b)
{
    for (size_t i = 0; i < COLL_TOPO_MAX_CPUS / 64; i++) {
        if ((a->w[i] & ~b->w[i]) != 0) {
            return 0;
        }
    }
    return 1;
}

static void check_bind(const coll_topo_t *t)
{
    coll_topo_cpuset_t all, m, used;
    char               buf[256];

    memset(&all, 0xff, sizeof(all));
    memset(&used, 0, sizeof(used));
    for (int n = 0; n < t->nnuma; n++) {
        ASSERT_EQ(coll_topo_numa_logical(t, t->numa[n].os_index), n);
        ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_NUMA, n, 0, &all, &m), 0);
        ASSERT_TRUE(strcmp(coll_topo_cpuset_format(&m, buf, sizeof(buf)),
                           coll_topo_cpuset_format(&t->numa[n].cpus, buf + 128, 128)) == 0);
        for (int slot = 0; slot < t->numa[n].ncores; slot++) {
            ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_CORE, n, slot, &all, &m), 0);
            ASSERT_EQ(coll_topo_cpuset_count(&m), 1);
            ASSERT_TRUE(cpuset_subset(&m, &t->numa[n].cpus));
            ASSERT_TRUE(cpuset_subset(&m, &t->core_first)); /* a core's first thread ... */
            ASSERT_TRUE(!cpuset_subset(&m, &used));         /* ... that no other rank got */
            coll_topo_cpuset_or(&used, &m);
        }
    }
    ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_NONE, 0, 0, &all, &m), -1);
    ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_NUMA, -1, 0, &all, &m), -1);
}

static void test_bind(void)
{
    coll_topo_t       *t = load(FIX_2S);
    coll_topo_cpuset_t allowed, m;

    check_bind(t);
    ASSERT_EQ(coll_topo_cpuset_count(&t->core_first), t->ncores);
    /* only allowed CPUs; none of the node allowed: no binding */
    ASSERT_EQ(coll_topo_cpuset_parse("2-3,5", &allowed), 0);
    ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_NUMA, 0, 0, &allowed, &m), 0);
    ASSERT_EQ(coll_topo_cpuset_count(&m), 3);
    ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_CORE, 0, 1, &allowed, &m), 0);
    ASSERT_EQ(coll_topo_cpuset_count(&m), 1);
    ASSERT_TRUE(cpuset_subset(&m, &allowed));
    ASSERT_TRUE(cpuset_subset(&m, &t->core_first));
    ASSERT_EQ(coll_topo_bind_mask(t, COLL_TOPO_BIND_NUMA, 1, 0, &allowed, &m), -1);
    /* shared memory goes to the rank's node where there are several */
    ASSERT_EQ(coll_topo_mem_node(t, t->numa[1].os_index), t->numa[1].os_index);
    ASSERT_EQ(coll_topo_mem_node(t, -1), -1);
    ASSERT_EQ(coll_topo_mem_node(t, 7), -1); /* not a node of this host */
    ASSERT_EQ(coll_topo_mem_node(NULL, 0), -1);
    coll_topo_free(t);
    t = load(FIX_4N);
    check_bind(t);
    ASSERT_EQ(coll_topo_mem_node(t, t->numa[3].os_index), t->numa[3].os_index);
    t->nnuma = 1; /* one node: nothing to place */
    ASSERT_EQ(coll_topo_mem_node(t, t->numa[0].os_index), -1);
    coll_topo_free(t);
}
#endif

/* A rank without GPU is placed by its NUMA node and gets a NIC of its socket. */
static void test_place_cpu(const coll_topo_t *t)
{
    coll_topo_place_t p;

    coll_topo_place_of(t, 7, -1, t->nnuma - 1, &p);
    ASSERT_EQ(p.host, 7);
    ASSERT_EQ(p.gpu, 0);
    ASSERT_EQ(p.numa, t->numa[t->nnuma - 1].os_index);
    ASSERT_TRUE(t->nnic == 0 || p.nic >= 0);
    ASSERT_TRUE(p.nic < 0 || t->nic[p.nic].pci.package == t->numa[t->nnuma - 1].package ||
                t->nic[p.nic].pci.package < 0);
}

/* The system call itself: node 0 exists everywhere, though seccomp may forbid mbind. */
static void test_mem_prefer(void)
{
    size_t        len = 1 << 16;
    void         *p   = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    coll_result_t st;

    ASSERT_TRUE(p != MAP_FAILED);
    st = coll_mem_prefer_node(p, len, 0);
    ASSERT_TRUE(st == COLL_OK || st == COLL_ERR_SYSTEM || st == COLL_ERR_UNSUPPORTED);
    ASSERT_EQ(coll_mem_prefer_node(p, len, -1), COLL_ERR_INVALID_ARG);
    memset(p, 1, len);
    munmap(p, len);
}

static void test_topo_file(void)
{
    coll_topo_t  *t = NULL;
    coll_result_t st;

    setenv("COLL_TOPO_FILE", FIX_2S, 1);
    coll_params_reset_for_testing();
    st = coll_topo_load(&t);
#ifdef HAVE_HWLOC
    ASSERT_OK(st);
    ASSERT_EQ(t->ngpu, 8);
    ASSERT_STR_CONTAINS(t->source, "synthetic_2s8g4n.xml");
    test_place_cpu(t);
    coll_topo_free(t);
#else
    ASSERT_EQ(st, COLL_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(coll_last_error(), "needs hwloc");
#endif
    unsetenv("COLL_TOPO_FILE");
    coll_params_reset_for_testing();
    ASSERT_OK(coll_topo_load(&t)); /* this host: whatever it is, it has a CPU */
    ASSERT_TRUE(t->npkg >= 1 && t->nnuma >= 1 && t->npus >= 1);
    test_place_cpu(t);
    coll_topo_free(t);
}

int main(void)
{
    setenv("COLL_DEBUG", "none", 1); /* the refusals below are expected */
    test_link_rules();
    test_text();
#ifdef HAVE_HWLOC
    test_two_sockets();
    test_dgx();
    test_quad_numa();
    test_ring();
    test_place_self();
    test_bind();
#endif
    test_topo_file();
    test_mem_prefer();
    printf("test_topo: ok%s\n", HAVE_HWLOC_TEXT);
    return 0;
}
