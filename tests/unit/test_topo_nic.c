/* SPDX-License-Identifier: MIT */
/*
 * The NIC each rank's TCP traffic uses, on the machines of tests/topologies: on the DGX-like
 * machine every GPU's rank gets its own NIC behind its switch, on the 2-socket machine the two
 * GPUs of a switch share its NIC, a NIC without an address or down is never chosen, and ranks
 * without GPU spread over the NICs of their NUMA node, else of their package. Also the
 * inter-host bandwidth the NICs' link speeds give the tuner, and this host's interface list.
 */
#include "config.h"
#include "coll_test.h"
#include "api/tune.h"
#include "param.h"
#include "topo/nic.h"
#include "topo/place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX_2S  TOPO_DIR "/synthetic_2s8g4n.xml"
#define FIX_DGX TOPO_DIR "/synthetic_dgx.xml"
#define FIX_4N  TOPO_DIR "/synthetic_quadnuma.xml"

/* ib0..ib<n-1>, up, at 10.0.<i>.1 */
static void netifs(coll_topo_netif_t *ifs, int n)
{
    memset(ifs, 0, (size_t)n * sizeof(*ifs));
    for (int i = 0; i < n; i++) {
        snprintf(ifs[i].name, sizeof(ifs[i].name), "ib%d", i);
        snprintf(ifs[i].addr, sizeof(ifs[i].addr), "10.0.%d.1", i);
        ifs[i].up = 1;
    }
}

#ifdef HAVE_HWLOC
static coll_topo_t *load(const char *path)
{
    coll_topo_t *t = NULL;

    ASSERT_OK(coll_topo_load_xml(path, &t));
    return t;
}

/* The pick for the rank driving GPU g (slot g). */
static void pick_gpu(const coll_topo_t *t, int g, const coll_topo_netif_t *ifs, int nifs,
                     coll_topo_nic_pick_t *pick)
{
    coll_topo_place_t p;

    coll_topo_place_of(t, 1, g, -1, &p);
    coll_topo_pick_nic(t, &p, g, ifs, nifs, pick);
    if (pick->nic >= 0) {
        ASSERT_EQ(pick->gpu, g);
        ASSERT_TRUE(strcmp(ifs[pick->netif].name, t->nic[pick->nic].name) == 0);
    }
}

static void test_dgx(void)
{
    coll_topo_t         *t = load(FIX_DGX);
    coll_topo_netif_t    ifs[8];
    coll_topo_nic_pick_t pick;
    int                  used[COLL_TOPO_MAX_NIC] = {0};
    char                 want[32];

    netifs(ifs, 8);
    for (int g = 0; g < 8; g++) { /* one to one, PIX */
        pick_gpu(t, g, ifs, 8, &pick);
        ASSERT_TRUE(pick.nic >= 0);
        ASSERT_EQ(used[pick.nic]++, 0);
        ASSERT_EQ(pick.link, COLL_TOPO_LINK_PIX);
        snprintf(want, sizeof(want), "PIX to GPU %d", g);
        ASSERT_STR_CONTAINS(pick.why, want);
    }
    coll_topo_free(t);
}

static void test_two_sockets(void)
{
    coll_topo_t         *t = load(FIX_2S);
    coll_topo_netif_t    ifs[4];
    coll_topo_nic_pick_t pick;
    coll_topo_place_t    p;

    netifs(ifs, 4);
    for (int g = 0; g < 8; g++) { /* the two GPUs of a switch share its NIC */
        pick_gpu(t, g, ifs, 4, &pick);
        ASSERT_EQ(pick.nic, g / 2);
        ASSERT_EQ(pick.link, COLL_TOPO_LINK_PIX);
    }
    /* ib1 without address, then down: its GPUs fall back to ib0, of their socket */
    for (int k = 0; k < 2; k++) {
        netifs(ifs, 4);
        if (k == 0) {
            ifs[1].addr[0] = '\0';
        } else {
            ifs[1].up = 0;
        }
        for (int g = 0; g < 8; g++) {
            pick_gpu(t, g, ifs, 4, &pick);
            ASSERT_TRUE(pick.nic != 1);
            ASSERT_EQ(pick.nic, g / 2 == 1 ? 0 : g / 2);
            ASSERT_EQ(pick.link, g / 2 == 1 ? COLL_TOPO_LINK_NODE : COLL_TOPO_LINK_PIX);
        }
    }
    /* a single usable NIC: no choice, TCP keeps its own rule */
    netifs(ifs, 1);
    pick_gpu(t, 5, ifs, 1, &pick);
    ASSERT_EQ(pick.nic, -1);
    ASSERT_EQ(pick.netif, -1);

    /* without GPU: the NICs of the NUMA node, spread by slot */
    netifs(ifs, 4);
    coll_topo_place_of(t, 1, -1, 1, &p);
    for (int slot = 0; slot < 4; slot++) {
        coll_topo_pick_nic(t, &p, slot, ifs, 4, &pick);
        ASSERT_EQ(pick.nic, 2 + slot % 2);
        ASSERT_EQ(pick.gpu, -1);
        ASSERT_STR_CONTAINS(pick.why, "on NUMA node");
    }
    /* nothing on the node: the package; nothing on either: no choice */
    ifs[2].addr[0]     = '\0';
    t->nic[3].pci.numa = -1;
    coll_topo_pick_nic(t, &p, 0, ifs, 4, &pick);
    ASSERT_EQ(pick.nic, 3);
    ASSERT_STR_CONTAINS(pick.why, "on package");
    ifs[3].up = 0;
    coll_topo_pick_nic(t, &p, 0, ifs, 4, &pick);
    ASSERT_EQ(pick.nic, -1);
    /* a place that is not known picks nothing */
    p.known = 0;
    netifs(ifs, 4);
    coll_topo_pick_nic(t, &p, 0, ifs, 4, &pick);
    ASSERT_EQ(pick.nic, -1);
    coll_topo_free(t);
}

static void test_no_nics(void)
{
    coll_topo_t         *t = load(FIX_4N);
    coll_topo_netif_t    ifs[4];
    coll_topo_nic_pick_t pick;
    coll_topo_place_t    p;

    netifs(ifs, 4);
    coll_topo_place_of(t, 1, -1, 2, &p);
    coll_topo_pick_nic(t, &p, 0, ifs, 4, &pick);
    ASSERT_EQ(pick.nic, -1);
    ASSERT_EQ(p.nic_mbps, 0);
    coll_topo_free(t);
}
#endif

/* ---- bandwidth between hosts ---- */

static coll_topo_place_t rank_at(uint64_t host, int nic, int mbps)
{
    return (coll_topo_place_t){.host = host, .nic = nic, .nic_mbps = mbps, .known = 1};
}

static void test_inter_bw(void)
{
    /* host 1: four ranks on two 100 Gb/s rails; host 2: two ranks sharing one */
    coll_topo_place_t p[6] = {rank_at(1, 0, 100000), rank_at(1, 0, 100000), rank_at(1, 1, 100000),
                              rank_at(1, 1, 100000), rank_at(2, 0, 100000), rank_at(2, 0, 100000)};
    coll_model_t      m;

    ASSERT_TRUE(coll_topo_nic_bytes_per_s(10000) == 10e9 / 8 * COLL_TOPO_NIC_EFFICIENCY);
    ASSERT_TRUE(coll_topo_nic_bytes_per_s(0) == 0.0);
    ASSERT_TRUE(coll_topo_nic_bytes_per_s(-1) == 0.0);
    ASSERT_TRUE(coll_topo_inter_bw(p, 4) == 2 * coll_topo_nic_bytes_per_s(100000));
    ASSERT_TRUE(coll_topo_inter_bw(p, 6) == coll_topo_nic_bytes_per_s(100000)); /* the slower */
    p[4].nic = 1; /* host 2 on both rails now */
    ASSERT_TRUE(coll_topo_inter_bw(p, 6) == 2 * coll_topo_nic_bytes_per_s(100000));
    p[5].nic = -1; /* a rank without NIC adds nothing: one rail */
    ASSERT_TRUE(coll_topo_inter_bw(p, 6) == coll_topo_nic_bytes_per_s(100000));
    p[4].nic_mbps = 0; /* host 2's speed unknown: unknown */
    ASSERT_TRUE(coll_topo_inter_bw(p, 6) == 0.0);
    p[4].nic_mbps = 100000;
    p[4].known    = 0;
    ASSERT_TRUE(coll_topo_inter_bw(p, 6) == 0.0);
    ASSERT_TRUE(coll_topo_inter_bw(p, 0) == 0.0);

    /* the tuner's default: applied unless COLL_INTER_BW is set */
    coll_model_from_params(&m);
    ASSERT_EQ(coll_model_nic_bw(&m, p, 4), 1);
    ASSERT_TRUE(m.inter.beta_us_per_byte == 1e6 / (2 * coll_topo_nic_bytes_per_s(100000)));
    ASSERT_EQ(coll_model_nic_bw(&m, p, 6), 0); /* unknown: left as it was */
    ASSERT_TRUE(m.inter.beta_us_per_byte == 1e6 / (2 * coll_topo_nic_bytes_per_s(100000)));
    setenv("COLL_INTER_BW", "1g", 1);
    coll_params_reset_for_testing();
    coll_model_from_params(&m);
    ASSERT_EQ(coll_model_nic_bw(&m, p, 4), 0);
    ASSERT_TRUE(m.inter.beta_us_per_byte == 1e6 / (double)(1 << 30));
    unsetenv("COLL_INTER_BW");
    coll_params_reset_for_testing();
}

/* This host's list: whatever it holds, loopback is not in it. */
static void test_netifs(void)
{
    coll_topo_netif_t ifs[COLL_TOPO_NETIF_MAX];
    int               n = -1;

    ASSERT_OK(coll_topo_netifs(ifs, COLL_TOPO_NETIF_MAX, &n));
    ASSERT_TRUE(n >= 0 && n <= COLL_TOPO_NETIF_MAX);
    for (int i = 0; i < n; i++) {
        ASSERT_TRUE(strcmp(ifs[i].name, "lo") != 0);
        printf("test_topo_nic: %s %s %s\n", ifs[i].name, ifs[i].addr[0] ? ifs[i].addr : "-",
               ifs[i].up ? "up" : "down");
    }
    ASSERT_OK(coll_topo_netifs(ifs, 0, &n));
    ASSERT_EQ(n, 0);
}

int main(void)
{
    setenv("COLL_DEBUG", "none", 1);
#ifdef HAVE_HWLOC
    test_dgx();
    test_two_sockets();
    test_no_nics();
#endif
    test_inter_bw();
    test_netifs();
    printf("test_topo_nic: ok%s\n",
#ifdef HAVE_HWLOC
           ""
#else
           " (without hwloc: the XML machines were not read)"
#endif
    );
    return 0;
}
