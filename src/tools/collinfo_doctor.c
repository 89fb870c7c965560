/* SPDX-License-Identifier: MIT */
/*
 * collinfo doctor: preflight checks of this host, each printed as ok / warn / FAIL with the
 * exact fix: /dev/shm big enough for the shared-memory transport, locked-memory limit for RDMA,
 * usable network interfaces (and COLL_SOCKET_IFNAME matching one, by the library's rules), ptrace
 * scope for cross-memory attach, IOMMU mode for GPU peer-to-peer, and the NUMA affinity of GPUs and
 * NICs. It reads /proc and /sys under --root (tests use a fake tree); it never changes anything.
 */
#include "collinfo.h"
#include "bootstrap/sock.h"
#include "param.h"
#include "shm/shm.h"

#include <ctype.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DOC_MEMLOCK_MIN (64ull << 20) /* registered buffers of one rank, at least */

typedef struct {
    const char *root;  /* prefix of /proc, /sys and /dev/shm ("" = this host) */
    int         ranks; /* ranks on this host the job will run */
    int         nwarn;
    int         nfail;
} doc_t;

static void doc_report(doc_t *d, int level, const char *what, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* level 0 ok, 1 warn, 2 FAIL */
static void doc_report(doc_t *d, int level, const char *what, const char *fix, const char *fmt, ...)
{
    static const char *const tags[] = {"[ ok ]", "[warn]", "[FAIL]"};
    va_list                  ap;
    printf("%s %-16s ", tags[level], what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (level > 0 && fix != NULL) {
        printf("       fix: %s\n", fix);
    }
    d->nwarn += level == 1;
    d->nfail += level == 2;
}

static int doc_read(const doc_t *d, const char *path, char *buf, size_t len)
{
    char  full[512];
    FILE *f;
    snprintf(full, sizeof(full), "%s%s", d->root, path);
    f = fopen(full, "r");
    if (f == NULL) {
        return -1;
    }
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && isspace((unsigned char)buf[n - 1])) {
        buf[--n] = '\0';
    }
    return 0;
}

/* Entries of a directory (not starting with '.') whose names start with prefix. */
static int doc_count_prefix(const doc_t *d, const char *path, const char *prefix)
{
    char           full[512];
    DIR           *dir;
    struct dirent *e;
    int            n = 0;
    snprintf(full, sizeof(full), "%s%s", d->root, path);
    dir = opendir(full);
    if (dir == NULL) {
        return -1;
    }
    while ((e = readdir(dir)) != NULL) {
        n += e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    closedir(dir);
    return n;
}

static int doc_count_dir(const doc_t *d, const char *path)
{
    return doc_count_prefix(d, path, "");
}

static double doc_gib(double bytes)
{
    return bytes / (1024.0 * 1024.0 * 1024.0);
}

/* Each rank's segment as the shm transport sizes it: a header, a ring (control page and data)
 * to each other local rank, and the window (control block with the small-call slots, two
 * halves). The ring and window sizes come from the transport's own functions, so the clamps
 * (ring in [64k, 1g], window at most 1g) and the small window where /dev/shm is small are the
 * library's. */
static void doc_shm(doc_t *d)
{
    struct statvfs sv;
    char           path[512], fix[256];
    uint64_t       ring, win;
    double         need;

    snprintf(path, sizeof(path), "%s/dev/shm", d->root);
    ring = shm_ring_size_param();
    win  = shm_win_size_param(d->ranks > 1, d->ranks, path);
    need = d->ranks > 1 ? d->ranks * (double)shm_seg_size((uint32_t)d->ranks - 1, ring, win) : 0.0;
    snprintf(fix, sizeof(fix),
             "mount -o remount,size=%.0fG /dev/shm (containers: docker run --shm-size=%.0fg), "
             "or lower COLL_SHM_RING_SIZE",
             doc_gib(need) * 2 + 1, doc_gib(need) * 2 + 1);
    if (statvfs(path, &sv) != 0) {
        doc_report(d, 2, "/dev/shm", "mount -t tmpfs -o size=8G tmpfs /dev/shm",
                   "cannot be examined (%s): the shm transport will fail", path);
        return;
    }
    double total = (double)sv.f_blocks * sv.f_frsize, avail = (double)sv.f_bavail * sv.f_frsize;
    doc_report(d, avail < need ? 2 : 0, "/dev/shm", fix,
               "%.2f GiB, %.2f GiB free; %d ranks on this host need %.3f GiB", doc_gib(total),
               doc_gib(avail), d->ranks, doc_gib(need));
}

static void doc_memlock(doc_t *d)
{
    struct rlimit rl;
    int           ndev = doc_count_dir(d, "/sys/class/infiniband");
    const char   *fix  = "ulimit -l unlimited (persistently: '* - memlock unlimited' in "
                         "/etc/security/limits.conf; containers: --ulimit memlock=-1)";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        doc_report(d, 1, "locked memory", fix, "limit unknown");
        return;
    }
    if (rl.rlim_cur == RLIM_INFINITY) {
        doc_report(d, 0, "locked memory", NULL, "unlimited");
    } else if (rl.rlim_cur < DOC_MEMLOCK_MIN) {
        doc_report(d, ndev > 0 ? 2 : 1, "locked memory", fix,
                   "limit %llu KiB is below %llu MiB: RDMA cannot register buffers%s",
                   (unsigned long long)rl.rlim_cur / 1024, DOC_MEMLOCK_MIN >> 20,
                   ndev > 0 ? "" : " (no RDMA device here, so only if one is added)");
    } else {
        doc_report(d, 0, "locked memory", NULL, "limit %llu MiB",
                   (unsigned long long)rl.rlim_cur >> 20);
    }
}

/* Appends name to the space-separated list unless it is there already (an interface with an
 * IPv4 and an IPv6 address is listed once). */
static void doc_list_add(char *list, size_t cap, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n) {
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) {
            return;
        }
    }
    snprintf(list + strlen(list), cap - strlen(list), "%s%s", list[0] ? " " : "", name);
}

/* The rules of the bootstrap and tcp transport (src/bootstrap/ifaddr.c): an interface serves
 * when it is up (IFF_UP; IFF_RUNNING is not asked for) with an IPv4 or IPv6 address.
 * COLL_SOCKET_IFNAME, matched with the library's own filter, may name loopback; without it the
 * choice skips loopback, docker* and link-local IPv6. */
static int doc_if_default(const struct ifaddrs *i)
{
    if ((i->ifa_flags & IFF_LOOPBACK) != 0 || !coll_sock_ifname_match(NULL, i->ifa_name)) {
        return 0;
    }
    if (i->ifa_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(void *)i->ifa_addr;
        return !IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr);
    }
    return 1;
}

static void doc_netif(doc_t *d)
{
    struct ifaddrs *ifs, *i;
    const char     *want       = coll_param_str(COLL_P_SOCKET_IFNAME);
    int             user       = want != NULL && want[0] != '\0';
    char            names[512] = "", downs[256] = "", every[512] = "", hits[512] = "";
    int             up = 0, matched = 0;
    if (getifaddrs(&ifs) != 0) {
        doc_report(d, 2, "interfaces", NULL, "getifaddrs failed");
        return;
    }
    for (i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
            continue;
        }
        int is_up = (i->ifa_flags & IFF_UP) != 0;
        if (is_up) {
            doc_list_add(every, sizeof(every), i->ifa_name);
            if (user && coll_sock_ifname_match(want, i->ifa_name)) {
                doc_list_add(hits, sizeof(hits), i->ifa_name);
                matched++;
            }
        }
        if (!doc_if_default(i)) {
            continue;
        }
        if (is_up) {
            doc_list_add(names, sizeof(names), i->ifa_name);
        } else {
            doc_list_add(downs, sizeof(downs), i->ifa_name);
        }
        up += is_up;
    }
    freeifaddrs(ifs);
    if (user && matched == 0) {
        doc_report(d, 2, "interfaces",
                   "unset COLL_SOCKET_IFNAME, or set it to one of the "
                   "interfaces listed",
                   "COLL_SOCKET_IFNAME=%s matches no interface that is up with an address "
                   "(up: %s)",
                   want, every[0] ? every : "none");
    } else if (user) {
        doc_report(d, 0, "interfaces", NULL, "COLL_SOCKET_IFNAME=%s matches %s (up)", want, hits);
    } else if (up == 0) {
        doc_report(d, 1, "interfaces", "bring one up (ip link set IFACE up) for jobs across hosts",
                   "no interface up besides loopback and docker%s%s: only single-host jobs can "
                   "run",
                   downs[0] ? "; down: " : "", downs);
    } else {
        doc_report(d, 0, "interfaces", NULL, "up: %s%s%s", names, downs[0] ? "; down: " : "",
                   downs);
    }
}

static void doc_ptrace(doc_t *d)
{
    char v[32];
    if (doc_read(d, "/proc/sys/kernel/yama/ptrace_scope", v, sizeof(v)) != 0) {
        doc_report(d, 0, "ptrace scope", NULL, "no Yama module: cross-memory attach allowed");
        return;
    }
    int scope = atoi(v);
    doc_report(d,
               scope >= 2   ? 2
               : scope == 1 ? 1
                            : 0,
               "ptrace scope",
               "sysctl -w kernel.yama.ptrace_scope=0 (persistently in /etc/sysctl.d/; "
               "containers: --cap-add SYS_PTRACE)",
               "kernel.yama.ptrace_scope=%d: cross-memory attach (process_vm_readv) between "
               "ranks is %s%s",
               scope,
               scope == 0   ? "allowed"
               : scope == 1 ? "limited to descendants"
                            : "blocked",
               scope == 0 ? ""
                          : " (libcoll's shm then copies every message through its rings: "
                            "messages of COLL_SHM_CMA_MIN bytes or more lose the single copy)");
}

/* PCI devices of a class prefix ("0x0302" 3D controller, "0x0207" InfiniBand, ...). */
static int doc_pci_numa(doc_t *d, const char *vendor, const char *cls, int *unknown_p)
{
    char           full[512], path[600], v[64];
    DIR           *dir;
    struct dirent *e;
    int            n = 0;
    snprintf(full, sizeof(full), "%s/sys/bus/pci/devices", d->root);
    dir = opendir(full);
    if (dir == NULL) {
        return 0;
    }
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", e->d_name);
        if (doc_read(d, path, v, sizeof(v)) != 0 || strncmp(v, cls, strlen(cls)) != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
        if (vendor != NULL && (doc_read(d, path, v, sizeof(v)) != 0 || strcmp(v, vendor) != 0)) {
            continue;
        }
        n++;
        snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", e->d_name);
        *unknown_p += doc_read(d, path, v, sizeof(v)) != 0 || atoi(v) < 0;
    }
    closedir(dir);
    return n;
}

static void doc_iommu(doc_t *d)
{
    char cmdline[2048] = "";
    int  unknown       = 0;
    int  ngpu          = doc_pci_numa(d, "0x10de", "0x03", &unknown);
    int  groups        = doc_count_dir(d, "/sys/kernel/iommu_groups");
    doc_read(d, "/proc/cmdline", cmdline, sizeof(cmdline));
    int pt = strstr(cmdline, "iommu=pt") != NULL || strstr(cmdline, "iommu.passthrough=1") != NULL;
    if (groups <= 0) {
        doc_report(d, 0, "IOMMU", NULL, "off: peer-to-peer DMA is not translated");
    } else if (pt) {
        doc_report(d, 0, "IOMMU", NULL, "on in passthrough mode (%d groups)", groups);
    } else {
        doc_report(d, ngpu > 1 ? 2 : 1, "IOMMU",
                   "add iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt) to the "
                   "kernel command line and reboot; disable ACS on the PCIe switches "
                   "(setpci ECAP_ACS+0x6.w=0000 per bridge) for GPU peer-to-peer",
                   "on and translating (%d groups, %d NVIDIA GPUs): GPU peer-to-peer and "
                   "GPUDirect RDMA go through the root complex or fail",
                   groups, ngpu);
    }
}

static void doc_affinity(doc_t *d)
{
    int gpu_unknown = 0, nic_unknown = 0;
    int ngpu  = doc_pci_numa(d, "0x10de", "0x03", &gpu_unknown);
    int nnic  = doc_pci_numa(d, NULL, "0x02", &nic_unknown); /* Ethernet and InfiniBand */
    int nnuma = doc_count_prefix(d, "/sys/devices/system/node", "node");
    if (ngpu + nnic == 0) {
        doc_report(d, 0, "GPU/NIC affinity", NULL, "no GPU or PCI NIC found");
    } else if ((gpu_unknown + nic_unknown) > 0 && nnuma > 1) {
        doc_report(d, 1, "GPU/NIC affinity",
                   "enable NUMA in the BIOS/hypervisor (ACPI SRAT/_PXM), or bind ranks by hand "
                   "(COLL_BIND=numa cannot place them)",
                   "%d of %d GPUs and %d of %d NICs have no NUMA node on a multi-node host: ranks "
                   "cannot be placed near them",
                   gpu_unknown, ngpu, nic_unknown, nnic);
    } else {
        doc_report(d, 0, "GPU/NIC affinity", NULL,
                   "%d GPUs, %d NICs, %d NUMA nodes: placement known", ngpu, nnic, nnuma);
    }
}

void collinfo_doctor_usage(FILE *out)
{
    fprintf(out, "  doctor [-n RANKS] [--root DIR]\n"
                 "                    preflight checks of this host, each with the exact fix\n");
}

int collinfo_doctor_main(int argc, char **argv)
{
    doc_t d = {.root = "", .ranks = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end;
            long  n = strtol(argv[++i], &end, 10);
            if (*end != '\0' || n < 1 || n > 4096) {
                fprintf(stderr, "collinfo doctor: -n wants 1..4096 ranks, not '%s'\n", argv[i]);
                return 2;
            }
            d.ranks = (int)n;
        } else if (strcmp(argv[i], "--root") == 0 && i + 1 < argc) {
            d.root = argv[++i];
        } else {
            fprintf(stderr, "collinfo doctor: unknown option '%s'\n", argv[i]);
            collinfo_doctor_usage(stderr);
            return 2;
        }
    }
    if (d.ranks < 1) {
        d.ranks = 1;
    }
    doc_shm(&d);
    doc_memlock(&d);
    doc_netif(&d);
    doc_ptrace(&d);
    doc_iommu(&d);
    doc_affinity(&d);
    printf("%d problems, %d warnings\n", d.nfail, d.nwarn);
    return d.nfail > 0 ? 1 : 0;
}
