/* SPDX-License-Identifier: MIT */
/*
 * The sysfs backend (libcoll without hwloc) on a sysfs tree made up in a temporary directory:
 * a 2-socket machine with 2 cores of 2 threads per socket, two NUMA nodes, L3 caches, a GPU and
 * an InfiniBand NIC behind one PCIe switch on socket 0, a GPU on socket 1, and a virtio NIC
 * whose interface hangs below its PCI function. Checks what the model says about each.
 */
#include "coll_test.h"
#include "topo/topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[] = "/tmp/coll_test_sysfs.XXXXXX";

#define DEV_SW  "sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0"
#define DEV_GPU DEV_SW "/0000:12:00.0/0000:13:00.0"
#define DEV_IB  DEV_SW "/0000:12:04.0/0000:14:00.0"
#define DEV_G1  "sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0"
#define DEV_ETH "sys/devices/pci0000:00/0000:00:03.0"
#define DEV_DSK "sys/devices/pci0000:00/0000:00:02.0"

/* Creates root/rel with its parent directories (rel ends with '/': a directory). */
static void mk(const char *rel, const char *text)
{
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *s = strchr(path + strlen(root) + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
        *s = '\0';
        ASSERT_TRUE(mkdir(path, 0755) == 0 || errno == EEXIST);
        *s = '/';
    }
    if (text != NULL) {
        FILE *f = fopen(path, "w");
        ASSERT_TRUE(f != NULL);
        fputs(text, f);
        fclose(f);
    }
}

/* root/link -> root/target */
static void ln(const char *target, const char *link)
{
    char t[1024], l[1024];

    snprintf(t, sizeof(t), "%s/%s", root, target);
    snprintf(l, sizeof(l), "%s/%s", root, link);
    mk(link, NULL);
    ASSERT_EQ(symlink(t, l), 0);
}

static void mk_pci(const char *dir, const char *cls, const char *vendor, const char *numa)
{
    char rel[512], link[256];

    snprintf(rel, sizeof(rel), "%s/class", dir);
    mk(rel, cls);
    snprintf(rel, sizeof(rel), "%s/vendor", dir);
    mk(rel, vendor);
    snprintf(rel, sizeof(rel), "%s/device", dir);
    mk(rel, "0x2330\n");
    snprintf(rel, sizeof(rel), "%s/numa_node", dir);
    mk(rel, numa);
    snprintf(link, sizeof(link), "sys/bus/pci/devices/%s", strrchr(dir, '/') + 1);
    ln(dir, link);
}

static void mk_machine(void)
{
    char rel[256], text[64];

    mk("sys/devices/system/cpu/online", "0-7\n");
    for (int c = 0; c < 8; c++) {
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
        snprintf(text, sizeof(text), "%d\n", c / 4);
        mk(rel, text);
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
        snprintf(text, sizeof(text), "%d-%d\n", c & ~1, c | 1);
        mk(rel, text);
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cache/index0/level", c);
        mk(rel, "1\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cache/index3/level", c);
        mk(rel, "3\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cache/index3/size", c);
        mk(rel, "32768K\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cache/index3/shared_cpu_list", c);
        mk(rel, c < 4 ? "0-3\n" : "4-7\n");
    }
    mk("sys/devices/system/node/online", "0-1\n");
    mk("sys/devices/system/node/node0/cpulist", "0-3\n");
    mk("sys/devices/system/node/node1/cpulist", "4-7\n");
    mk("sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:       16384 kB\n");
    mk("sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:       32768 kB\n");
    mk("sys/devices/system/node/node0/distance", "10 21\n");
    mk("sys/devices/system/node/node1/distance", "21 10\n");
    mk("proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake CPU 9000\nflags\t: fpu\n");
    mk_pci(DEV_GPU, "0x030200\n", "0x10de\n", "0\n");
    mk(DEV_GPU "/current_link_speed", "32.0 GT/s PCIe\n");
    mk(DEV_GPU "/current_link_width", "16\n");
    mk("proc/driver/nvidia/gpus/0000:13:00.0/information",
       "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\n");
    mk_pci(DEV_IB, "0x020700\n", "0x15b3\n", "0\n");
    ln(DEV_IB, "sys/class/net/ib0/device");
    ln(DEV_IB, "sys/class/infiniband/mlx5_0/device");
    mk("sys/class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
    mk_pci(DEV_G1, "0x030200\n", "0x10de\n", "1\n");
    mk_pci(DEV_ETH, "0x020000\n", "0x1af4\n", "-1\n");
    mk(DEV_ETH "/virtio0/net/eth0/", NULL);
    ln(DEV_ETH "/virtio0", "sys/class/net/eth0/device");
    mk("sys/class/net/eth0/speed", "10000\n");
    mk_pci(DEV_DSK, "0x010000\n", "0x1af4\n", "-1\n"); /* storage: neither GPU nor NIC */
}

static void test_cpus(const coll_topo_t *t)
{
    ASSERT_TRUE(strcmp(t->source, "sysfs") == 0);
    ASSERT_EQ(t->npkg, 2);
    ASSERT_EQ(t->npus, 8);
    ASSERT_EQ(t->ncores, 4);
    ASSERT_EQ(t->pkg[1].ncores, 2);
    ASSERT_TRUE(strcmp(t->pkg[0].model, "Fake CPU 9000") == 0);
    ASSERT_EQ(t->nnuma, 2);
    ASSERT_EQ(t->numa[1].package, 1);
    ASSERT_EQ(t->numa[1].memory, 32768 * 1024);
    ASSERT_EQ(t->numa[1].ncores, 2);
    ASSERT_EQ(t->numa_dist[0][1], 21);
    ASSERT_EQ(t->numa_dist[1][1], 10);
    ASSERT_EQ(t->nl3, 2);
    ASSERT_EQ(t->l3[1].package, 1);
    ASSERT_EQ(t->l3[1].bytes, 32 << 20);
    ASSERT_EQ(t->l3[1].ncores, 2);
}

static void test_devices(const coll_topo_t *t)
{
    const coll_topo_gpu_t *g0 = &t->gpu[0], *g1 = &t->gpu[1];

    ASSERT_EQ(t->ngpu, 2);
    ASSERT_EQ(g0->pci.busid, COLL_TOPO_BUSID(0, 0x13, 0, 0));
    ASSERT_TRUE(strcmp(g0->name, "NVIDIA H100 80GB HBM3") == 0);
    ASSERT_TRUE(strcmp(g1->name, "10de:2330") == 0);
    ASSERT_EQ(g0->pci.numa, 0);
    ASSERT_EQ(g0->pci.package, 0);
    ASSERT_EQ(g1->pci.package, 1);
    ASSERT_EQ(g0->pci.nchain, 4);
    ASSERT_EQ(g0->pci.chain[0], COLL_TOPO_HOSTBRIDGE(0, 0x10));
    ASSERT_EQ(g0->pci.chain[3], COLL_TOPO_BUSID(0, 0x12, 0, 0));
    /* PCIe 5 x16: 32 GT/s x 16 lanes x 128/130 / 8 */
    ASSERT_TRUE(g0->pci.link_gbs > 62 && g0->pci.link_gbs < 64);
    ASSERT_EQ(t->nnic, 2); /* by bus id: the virtio NIC, then the InfiniBand one */
    ASSERT_TRUE(strcmp(t->nic[0].name, "eth0") == 0);
    ASSERT_EQ(t->nic[0].speed_mbps, 10000);
    ASSERT_EQ(t->nic[0].pci.nchain, 1);
    ASSERT_TRUE(strcmp(t->nic[1].name, "ib0") == 0);
    ASSERT_TRUE(strcmp(t->nic[1].ofa, "mlx5_0") == 0);
    ASSERT_EQ(t->nic[1].speed_mbps, 200000);
    ASSERT_EQ(coll_topo_gpu_nic_link(t, 0, 1), COLL_TOPO_LINK_PIX);
    ASSERT_EQ(coll_topo_gpu_nic_link(t, 1, 1), COLL_TOPO_LINK_SYS);
    ASSERT_EQ(coll_topo_gpu_link(t, 0, 1), COLL_TOPO_LINK_SYS);
}

int main(void)
{
    coll_topo_t *t = NULL;
    char         cmd[128];

    setenv("COLL_DEBUG", "none", 1);
    ASSERT_TRUE(mkdtemp(root) != NULL);
    mk_machine();
    ASSERT_OK(coll_topo_load_sysfs(root, &t));
    test_cpus(t);
    test_devices(t);
    coll_topo_free(t);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ASSERT_EQ(system(cmd), 0);
    ASSERT_EQ(coll_topo_load_sysfs(root, &t), COLL_ERR_SYSTEM); /* nothing there any more */
    printf("test_topo_sysfs: ok\n");
    return 0;
}
