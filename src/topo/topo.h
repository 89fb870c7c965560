/* SPDX-License-Identifier: MIT */
/*
 * The topology of one host: packages, NUMA nodes (CPUs, memory, distances), L3 caches, GPUs and
 * NICs with the PCI bridges above them. hwloc fills it (topo_hwloc.c: this machine or an XML
 * file); without hwloc, sysfs does (topo_sysfs.c). It says where things are and how two devices
 * are linked, in nvidia-smi's words (PIX ... SYS); it does not bind, allocate or talk to other
 * ranks. Indexes into the arrays are "logical" (0..n-1 in discovery order); os_index fields
 * hold the numbers the operating system uses.
 */
#ifndef COLL_TOPO_TOPO_H
#define COLL_TOPO_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

#define COLL_TOPO_MAX_PKG   16
#define COLL_TOPO_MAX_NUMA  64
#define COLL_TOPO_MAX_L3    256
#define COLL_TOPO_MAX_GPU   32
#define COLL_TOPO_MAX_NIC   32
#define COLL_TOPO_MAX_CHAIN 12   /* PCI bridges above one device */
#define COLL_TOPO_MAX_CPUS  2048 /* PU os indexes a cpuset can hold */

/* A set of PUs (hardware threads) by os index. */
typedef struct coll_topo_cpuset {
    uint64_t w[COLL_TOPO_MAX_CPUS / 64];
} coll_topo_cpuset_t;

/* How two devices are linked, closest first: a smaller value is a better path. */
typedef enum {
    COLL_TOPO_LINK_X,    /* the device itself */
    COLL_TOPO_LINK_NV,   /* NVLink between two GPUs */
    COLL_TOPO_LINK_PIX,  /* through one PCIe switch */
    COLL_TOPO_LINK_PXB,  /* through several PCIe switches, not through the host bridge */
    COLL_TOPO_LINK_PHB,  /* through one PCIe host bridge (the CPU's root complex) */
    COLL_TOPO_LINK_NODE, /* between host bridges of one package */
    COLL_TOPO_LINK_SYS,  /* across the link between packages (UPI, xGMI) */
    COLL_TOPO_LINK_COUNT
} coll_topo_link_t;

/* A PCI address packed as domain:bus:dev.fn, so that numbers order like the text. */
#define COLL_TOPO_BUSID(_dom, _bus, _dev, _fn)                                                     \
    (((uint64_t)(_dom) << 16) | ((uint64_t)(_bus) << 8) | ((uint64_t)(_dev) << 3) | (uint64_t)(_fn))
/* A host bridge has no address of its own: it is named by its domain and root bus. */
#define COLL_TOPO_HOSTBRIDGE(_dom, _bus) ((1ull << 63) | COLL_TOPO_BUSID((_dom), (_bus), 0, 0))
#define COLL_TOPO_IS_HOSTBRIDGE(_id)     (((_id) >> 63) != 0)

/* Where a PCI device sits. */
typedef struct coll_topo_pci {
    uint64_t busid;    /* COLL_TOPO_BUSID */
    uint16_t vendor;   /* 0x10de NVIDIA, 0x15b3 Mellanox... */
    uint16_t device;   /* device id */
    uint16_t class_id; /* 0x0302 3D controller, 0x0207 InfiniBand... */
    float    link_gbs; /* PCIe link bandwidth in GB/s; 0: unknown */
    int      numa;     /* index in numa[], -1: unknown or several nodes */
    int      package;  /* index in pkg[], -1: unknown or several packages */
    int      nchain;   /* entries in chain[] */
    /* The bridges above the device, host bridge first (COLL_TOPO_HOSTBRIDGE), then each PCI
     * bridge (root port, switch ports) by its own bus id; the device's parent is last. */
    uint64_t chain[COLL_TOPO_MAX_CHAIN];
} coll_topo_pci_t;

typedef struct coll_topo_gpu {
    coll_topo_pci_t pci;
    char            name[64];  /* model ("NVIDIA H100 80GB HBM3"), else "vendor:device" */
    char            osdev[16]; /* operating-system name: "cuda0", "nvml0", "rsmi0"; "" */
} coll_topo_gpu_t;

typedef struct coll_topo_nic {
    coll_topo_pci_t pci;
    char            name[32];   /* network interface ("ib0", "eth0"); "" if none */
    char            ofa[32];    /* OpenFabrics (verbs) device ("mlx5_0"); "" if none */
    int             speed_mbps; /* link speed in Mb/s; 0: unknown */
} coll_topo_nic_t;

typedef struct coll_topo_pkg {
    int                os_index;
    int                ncores;
    int                npus;
    char               model[64]; /* CPU model; "" if unknown */
    coll_topo_cpuset_t cpus;
} coll_topo_pkg_t;

typedef struct coll_topo_numa {
    int                os_index;
    int                package; /* index in pkg[], -1 if unknown */
    uint64_t           memory;  /* bytes */
    int                ncores;
    int                npus;
    coll_topo_cpuset_t cpus;
} coll_topo_numa_t;

typedef struct coll_topo_l3 {
    uint64_t bytes;
    int      package; /* index in pkg[], -1 if unknown */
    int      ncores;  /* cores sharing it */
} coll_topo_l3_t;

typedef struct coll_topo {
    char               source[256]; /* "hwloc", "sysfs", or "hwloc XML <path>" */
    char               hostname[64];
    int                npkg, nnuma, nl3, ngpu, nnic;
    int                ncores, npus;
    coll_topo_pkg_t    pkg[COLL_TOPO_MAX_PKG];
    coll_topo_numa_t   numa[COLL_TOPO_MAX_NUMA];
    coll_topo_l3_t     l3[COLL_TOPO_MAX_L3];
    coll_topo_cpuset_t core_first;             /* the first PU of every core (one PU per core) */
    coll_topo_gpu_t    gpu[COLL_TOPO_MAX_GPU]; /* in bus id order */
    coll_topo_nic_t    nic[COLL_TOPO_MAX_NIC]; /* in bus id order */
    /* Relative NUMA latency by logical index, 10 = local (ACPI SLIT); 0: unknown. */
    uint16_t numa_dist[COLL_TOPO_MAX_NUMA][COLL_TOPO_MAX_NUMA];
    /* NVLinks between two GPUs by logical index; 0: none or unknown. */
    uint8_t nvlinks[COLL_TOPO_MAX_GPU][COLL_TOPO_MAX_GPU];
} coll_topo_t;

/* ---- discovery (topo.c picks the source; each backend fills a zeroed model) ---- */

/* This host: COLL_TOPO_FILE if set (needs hwloc), else hwloc, else sysfs. Free with
 * coll_topo_free. COLL_ERR_UNSUPPORTED: COLL_TOPO_FILE without hwloc. */
coll_result_t coll_topo_load(coll_topo_t **topo_p);
/* From an hwloc XML file (COLL_ERR_UNSUPPORTED without hwloc). */
coll_result_t coll_topo_load_xml(const char *path, coll_topo_t **topo_p);
/* From sysfs below root ("/" on a live system; tests pass a fabricated tree). */
coll_result_t coll_topo_load_sysfs(const char *root, coll_topo_t **topo_p);
void          coll_topo_free(coll_topo_t *topo);

/* Writes the hwloc XML of this machine, or of the XML file src when not NULL, to path.
 * COLL_ERR_UNSUPPORTED without hwloc. */
coll_result_t coll_topo_export_xml(const char *src, const char *path);

/* Backends (topo_hwloc.c only when configure found hwloc, topo_sysfs.c always). */
coll_result_t coll_topo_hwloc_fill(coll_topo_t *topo, const char *xml);
coll_result_t coll_topo_hwloc_export(const char *src, const char *path);
coll_result_t coll_topo_sysfs_fill(coll_topo_t *topo, const char *root);
/* The NICs' link speeds from sysfs below root (hwloc does not know them). */
void coll_topo_sysfs_nic_speed(coll_topo_t *topo, const char *root);
/* The speed in Mb/s of the verbs device ofa (port 1), else of the interface name; 0: unknown. */
int coll_topo_sysfs_link_mbps(const char *root, const char *name, const char *ofa);
/* The info key under which exported XML keeps a NIC's speed, which hwloc does not record. */
#define COLL_TOPO_XML_SPEED "LinkSpeedMbps"

/* After a backend: sort GPUs and NICs by bus id (a stable numbering whatever the order of
 * discovery), and fill what can be derived (package of a NUMA node from its CPUs...). */
void coll_topo_finish(coll_topo_t *topo);

/* ---- links ---- */

/* The path between two PCI devices, PIX..SYS (X when they are the same device). A PCIe
 * switch is an upstream port with its downstream ports, as sysfs and hwloc show it: two devices
 * share a switch when the same bridge lies within two bridges above each of them. */
coll_topo_link_t coll_topo_pci_link(const coll_topo_pci_t *a, const coll_topo_pci_t *b);
/* The PCIe switch a device hangs off (a bridge's bus id, used to group devices); 0: none. */
uint64_t coll_topo_pci_switch(const coll_topo_pci_t *pci);
/* Between GPUs i and j: NV when the NVLink matrix has links, else the PCI path. */
coll_topo_link_t coll_topo_gpu_link(const coll_topo_t *topo, int i, int j);
/* Between GPU g and NIC n. */
coll_topo_link_t coll_topo_gpu_nic_link(const coll_topo_t *topo, int g, int n);
/* "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS". */
const char *coll_topo_link_name(coll_topo_link_t link);
/* One line of nvidia-smi's legend for a link. */
const char *coll_topo_link_help(coll_topo_link_t link);

/* ---- cpusets (cpuset.c) ---- */

void coll_topo_cpuset_set(coll_topo_cpuset_t *s, int cpu);
int  coll_topo_cpuset_isset(const coll_topo_cpuset_t *s, int cpu);
int  coll_topo_cpuset_count(const coll_topo_cpuset_t *s);
int  coll_topo_cpuset_first(const coll_topo_cpuset_t *s); /* -1 when empty */
/* a |= b */
void coll_topo_cpuset_or(coll_topo_cpuset_t *a, const coll_topo_cpuset_t *b);
/* "0-15,32-47" (the kernel's cpulist format); "" when empty. Returns buf. */
char *coll_topo_cpuset_format(const coll_topo_cpuset_t *s, char *buf, size_t len);
/* Parses the cpulist format; 0, or -1 when malformed. CPUs beyond the limit are dropped. */
int coll_topo_cpuset_parse(const char *text, coll_topo_cpuset_t *s);

/* "0000:18:00.0" for a bus id; a host bridge as "0000:17". Returns buf. */
char *coll_topo_busid_format(uint64_t busid, char *buf, size_t len);
/* Parses "0000:18:00.0" or "18:00.0"; 0, or -1 when malformed. */
int coll_topo_busid_parse(const char *text, uint64_t *busid_p);

#endif
