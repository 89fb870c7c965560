/* SPDX-License-Identifier: MIT */
/*
 * Which ranks the CUDA p2p path joins (src/cuda/p2p_topo.c), on the machines of
 * tests/topologies: on the 2-socket machine (pairs of GPUs under one PCIe switch, pairs of
 * switches under one host bridge... see test_topo) the worst link of a set of ranks' GPUs and
 * the COLL_CUDA_P2P_LEVEL choices that admit it; on the DGX-like machine every pair is NVLink;
 * ranks sharing a GPU are always joined; a rank whose GPU the model lacks leaves the choice to
 * the CUDA IPC mapping. Without hwloc the XML machines are not read (the model-less cases run).
 */
#include "config.h"
#include "coll_test.h"
#include "cuda/p2p_topo.h"

#include <string.h>

#define FIX_2S  TOPO_DIR "/synthetic_2s8g4n.xml"
#define FIX_DGX TOPO_DIR "/synthetic_dgx.xml"

enum { L_NV, L_PIX, L_PXB, L_PHB, L_NODE, L_SYS }; /* COLL_CUDA_P2P_LEVEL's choices */

/* places of n ranks on GPUs gpus[] of t (-1: a bus id the model lacks) */
static void place(const coll_topo_t *t, const int *gpus, int n, coll_topo_place_t *pl)
{
    memset(pl, 0, (size_t)n * sizeof(*pl));
    for (int r = 0; r < n; r++) {
        pl[r].gpu = gpus[r] < 0 ? 0xfe0000 + 1 : t->gpu[gpus[r]].pci.busid + 1;
    }
}

static coll_topo_link_t worst_of(const coll_topo_t *t, const int *gpus, int n, int *known)
{
    coll_topo_place_t pl[8];
    coll_topo_link_t  w;
    int               a, b;
    place(t, gpus, n, pl);
    *known = coll_p2p_worst_link(t, pl, n, &w, &a, &b);
    if (*known && w != COLL_TOPO_LINK_X) {
        ASSERT_TRUE(a < b);
        ASSERT_TRUE(gpus[a] != gpus[b]);
    }
    return w;
}

static int allows(const coll_topo_t *t, const int *gpus, int n, int level)
{
    coll_topo_place_t pl[8];
    place(t, gpus, n, pl);
    return coll_p2p_topo_allows(t, pl, n, level);
}

int main(void)
{
    int known;
#ifdef HAVE_HWLOC
    coll_topo_t *t = NULL;
    ASSERT_OK(coll_topo_load_xml(FIX_2S, &t));
    ASSERT_EQ(t->ngpu, 8);
    {
        int same[] = {3, 3, 3}, pair[] = {0, 1}, quad[] = {0, 1, 2, 3},
            all[]   = {0, 1, 2, 3, 4, 5, 6, 7};
        int cross[] = {1, 5}, lost[] = {0, -1};
        ASSERT_EQ(worst_of(t, same, 3, &known), COLL_TOPO_LINK_X);
        ASSERT_TRUE(known);
        ASSERT_EQ(worst_of(t, pair, 2, &known), COLL_TOPO_LINK_PIX);
        ASSERT_EQ(worst_of(t, quad, 4, &known), COLL_TOPO_LINK_NODE);
        ASSERT_EQ(worst_of(t, all, 8, &known), COLL_TOPO_LINK_SYS);
        ASSERT_EQ(worst_of(t, cross, 2, &known), COLL_TOPO_LINK_SYS);
        worst_of(t, lost, 2, &known);
        ASSERT_TRUE(!known);
        /* one GPU: any level; a switch pair: from PIX; across the sockets: SYS only */
        ASSERT_TRUE(allows(t, same, 3, L_NV));
        ASSERT_TRUE(!allows(t, pair, 2, L_NV));
        ASSERT_TRUE(allows(t, pair, 2, L_PIX));
        ASSERT_TRUE(allows(t, pair, 2, L_PXB));
        ASSERT_TRUE(!allows(t, quad, 4, L_PXB));
        ASSERT_TRUE(!allows(t, quad, 4, L_PHB));
        ASSERT_TRUE(allows(t, quad, 4, L_NODE));
        ASSERT_TRUE(!allows(t, all, 8, L_NODE));
        ASSERT_TRUE(allows(t, all, 8, L_SYS));
        ASSERT_TRUE(allows(t, lost, 2, L_NV)); /* unknown: the IPC mapping decides */
    }
    coll_topo_free(t);
    t = NULL;
    ASSERT_OK(coll_topo_load_xml(FIX_DGX, &t));
    {
        int all[] = {0, 1, 2, 3, 4, 5, 6, 7}, two[] = {2, 7};
        ASSERT_EQ(worst_of(t, all, 8, &known), COLL_TOPO_LINK_NV);
        ASSERT_EQ(worst_of(t, two, 2, &known), COLL_TOPO_LINK_NV);
        ASSERT_TRUE(allows(t, all, 8, L_NV));
    }
    coll_topo_free(t);
#endif
    /* no model, or a rank without a GPU: unknown, allowed */
    coll_topo_place_t none[2];
    coll_topo_link_t  w;
    int               a, b;
    memset(none, 0, sizeof(none));
    ASSERT_TRUE(!coll_p2p_worst_link(NULL, none, 2, &w, &a, &b));
    ASSERT_TRUE(coll_p2p_topo_allows(NULL, none, 2, L_NV));
    printf("p2p topology: ok%s\n",
#ifdef HAVE_HWLOC
           ""
#else
           " (without hwloc: the XML machines were not read)"
#endif
    );
    return 0;
}
