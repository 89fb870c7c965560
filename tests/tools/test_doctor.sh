#!/bin/sh
# SPDX-License-Identifier: MIT
# collinfo doctor: on a fake /proc + /sys tree (--root) with every problem it knows, each check
# reports FAIL or warn with its exact fix and the exit status is 1; on a healthy tree it is 0;
# COLL_SOCKET_IFNAME naming no interface is a problem; bad options exit 2. The doctor sizes /dev/shm
# as the library does: COLL_SHM_RING_SIZE clamped to 1g, 1 MiB windows where /dev/shm is small
# (a 64 MiB tmpfs, mounted in a private namespace when unshare allows), and COLL_SOCKET_IFNAME may
# name loopback, which the tcp transport accepts.
# Exit status: 0 pass, 1 fail, 99 collinfo not built.
set -u
top_builddir=${top_builddir:-.}
COLLINFO=$top_builddir/collinfo
if [ ! -x "$COLLINFO" ]; then
    echo "test_doctor: $COLLINFO not built" >&2
    exit 99
fi
tmp=$(mktemp -d /tmp/doctor.XXXXXX) || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
unset COLL_SOCKET_IFNAME
: >"$tmp/empty.conf"
COLL_CONF_FILE=$tmp/empty.conf
export COLL_CONF_FILE
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
has() { # description file text
    if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in:)"; cat "$2"; fi
}

# ---- a sick host: ptrace blocked, IOMMU translating with 2 GPUs, RDMA device, no NUMA info ----
sick=$tmp/sick
mkdir -p "$sick/dev/shm" "$sick/proc/sys/kernel/yama" "$sick/sys/kernel/iommu_groups/0" \
    "$sick/sys/kernel/iommu_groups/1" "$sick/sys/class/infiniband/mlx5_0" \
    "$sick/sys/devices/system/node/node0" "$sick/sys/devices/system/node/node1"
echo 3 >"$sick/proc/sys/kernel/yama/ptrace_scope"
echo "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on" >"$sick/proc/cmdline"
for dev in 0000:17:00.0 0000:65:00.0; do
    d=$sick/sys/bus/pci/devices/$dev
    mkdir -p "$d"
    echo 0x030200 >"$d/class"
    echo 0x10de >"$d/vendor"
    echo -1 >"$d/numa_node"
done
# 4096 ranks need 4096 * 4095 rings of 1 MiB: no /dev/shm has 16 TiB free
(ulimit -l 64 && "$COLLINFO" doctor -n 4096 --root "$sick") >"$tmp/sick.out" 2>&1
rc=$?
cat "$tmp/sick.out"
if [ "$rc" -eq 1 ]; then ok "sick host: exit 1"; else bad "sick host: exit $rc, expected 1"; fi
has "/dev/shm too small" "$tmp/sick.out" "[FAIL] /dev/shm"
has "/dev/shm fix" "$tmp/sick.out" "mount -o remount,size="
has "memlock too low with an RDMA device" "$tmp/sick.out" "[FAIL] locked memory    limit 64 KiB"
has "memlock fix" "$tmp/sick.out" "fix: ulimit -l unlimited"
has "ptrace scope 3 blocks attach" "$tmp/sick.out" "[FAIL] ptrace scope     kernel.yama.ptrace_scope=3"
has "ptrace fix" "$tmp/sick.out" "fix: sysctl -w kernel.yama.ptrace_scope=0"
has "IOMMU translating with GPUs" "$tmp/sick.out" "[FAIL] IOMMU            on and translating (2 groups, 2 NVIDIA GPUs)"
has "IOMMU fix" "$tmp/sick.out" "iommu=pt"
has "GPUs without NUMA node" "$tmp/sick.out" "[warn] GPU/NIC affinity 2 of 2 GPUs"
has "summary line" "$tmp/sick.out" "4 problems, 1 warnings"

# ---- a healthy host ----
good=$tmp/good
mkdir -p "$good/dev/shm" "$good/proc/sys/kernel/yama" "$good/sys/kernel/iommu_groups/0" \
    "$good/sys/devices/system/node/node0"
echo 0 >"$good/proc/sys/kernel/yama/ptrace_scope"
echo "root=/dev/sda1 intel_iommu=on iommu=pt" >"$good/proc/cmdline"
"$COLLINFO" doctor -n 2 --root "$good" >"$tmp/good.out" 2>&1
rc=$?
cat "$tmp/good.out"
if [ "$rc" -eq 0 ]; then ok "healthy host: exit 0"; else bad "healthy host: exit $rc"; fi
has "healthy ptrace" "$tmp/good.out" "[ ok ] ptrace scope"
has "IOMMU passthrough" "$tmp/good.out" "[ ok ] IOMMU            on in passthrough mode"
has "no problems" "$tmp/good.out" "0 problems"

# ---- COLL_SOCKET_IFNAME that matches nothing ----
COLL_SOCKET_IFNAME=nosuchif9 "$COLLINFO" doctor -n 2 --root "$good" >"$tmp/if.out" 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then ok "unmatched COLL_SOCKET_IFNAME: exit 1"; else bad "ifname: exit $rc"; fi
has "unmatched COLL_SOCKET_IFNAME named" "$tmp/if.out" "COLL_SOCKET_IFNAME=nosuchif9 matches no interface that is up"

# ---- the library's sizes and rules, not the raw parameters ----
# a ring of 16t is clamped to 1g by the shm transport: 2 ranks need about 2 GiB, not 32768
COLL_SHM_RING_SIZE=16t COLL_SHM_WINDOW_SIZE=4m "$COLLINFO" doctor -n 2 --root "$good" \
    >"$tmp/ring.out" 2>&1
has "COLL_SHM_RING_SIZE=16t sized as the clamped 1g ring" "$tmp/ring.out" \
    "2 ranks on this host need 2.01"
# loopback is up wherever a job on one host can run; the tcp transport accepts it by name
if [ $(($(cat /sys/class/net/lo/flags 2>/dev/null || echo 0) & 1)) -eq 1 ]; then
    COLL_SOCKET_IFNAME=lo "$COLLINFO" doctor -n 2 --root "$good" >"$tmp/lo.out" 2>&1
    has "COLL_SOCKET_IFNAME=lo accepted" "$tmp/lo.out" "[ ok ] interfaces       COLL_SOCKET_IFNAME=lo matches lo"
else
    echo "SKIP: loopback is down here"
fi
# a container's 64 MiB /dev/shm: 6 ranks fit with the 1 MiB windows the library falls back to
small=$tmp/small
mkdir -p "$small/dev/shm"
if unshare -rm sh -c "mount -t tmpfs -o size=64m tmpfs '$small/dev/shm' &&
    '$COLLINFO' doctor -n 6 --root '$small'" >"$tmp/small.out" 2>&1 &&
    grep -q "/dev/shm" "$tmp/small.out"; then
    cat "$tmp/small.out"
    has "64 MiB /dev/shm holds 6 ranks with 1 MiB windows" "$tmp/small.out" "[ ok ] /dev/shm         0.06 GiB"
elif grep -q "/dev/shm  " "$tmp/small.out" 2>/dev/null; then
    cat "$tmp/small.out"
    bad "64 MiB /dev/shm holds 6 ranks with 1 MiB windows"
else
    echo "SKIP: no private mount namespace here (unshare -rm)"
fi

# ---- bad input ----
for args in "-n 0" "-n x" "--bogus" "-n"; do
    # shellcheck disable=SC2086 # split on purpose
    "$COLLINFO" doctor $args >/dev/null 2>&1
    rc=$?
    if [ "$rc" -eq 2 ]; then ok "doctor $args: exit 2"; else bad "doctor $args: exit $rc"; fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
