#!/bin/sh
# SPDX-License-Identifier: MIT
# The NIC each rank's TCP traffic uses, end to end. In a private network namespace, four veth
# interfaces named like the NICs of tests/topologies/synthetic_2s8g4n.xml (ib0-ib3, one per
# PCIe switch, ibK at 10.78.K.1); two ranks on hosts emulated by COLL_HOSTID replay that
# machine (COLL_TOPO_FILE) and drive GPU 2 and GPU 5 (COLL_TOPO_GPU=local_rank). With
# COLL_SOCKET_IFNAME unset each must listen on the NIC of its GPU's switch (ib1, ib2); once ib1
# has no carrier and ib2 no address, on the other NIC of its socket (ib0, ib3); with
# COLL_SOCKET_IFNAME set, where that says. Skips without root, namespaces, veth or hwloc.
set -u
top_builddir=${top_builddir:-.}
here=$(cd "$(dirname "$0")" && pwd)
fixture=$here/../topologies/synthetic_2s8g4n.xml

if [ "${COLL_NIC_NETNS_INNER:-0}" != 1 ]; then
    if ! grep -q "define HAVE_HWLOC 1" "$top_builddir/config.h" 2>/dev/null; then
        echo "SKIP: COLL_TOPO_FILE needs hwloc"
        exit 77
    fi
    if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1 ||
        ! unshare -n true 2>/dev/null; then
        echo "SKIP: needs root, iproute2 and unshare -n"
        exit 77
    fi
    COLL_NIC_NETNS_INNER=1 exec unshare -n sh "$0" "$@"
fi

# ---- in the private namespace from here on ----
ip link set lo up || exit 99
for k in 0 1 2 3; do
    if ! { ip link add "ib$k" type veth peer name "ib${k}p" &&
           ip addr add "10.78.$k.1/24" dev "ib$k" && ip link set "ib$k" up &&
           ip link set "ib${k}p" up; } 2>/dev/null; then
        echo "SKIP: cannot make veth interfaces here"
        exit 77
    fi
done
# shellcheck source=tests/tools/netns_lib.sh
. "$here/netns_lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/collnic.XXXXXX") || exit 99
# shellcheck disable=SC2016 # expanded when the cleanup runs
netns_atexit 'rm -rf "$tmp"'
NETNS_TIMEOUT=60
netns_emulate 2
fail=0

# One job of 2 ranks (rank r drives GPU 3r + 2); $1 names it, $2 is COLL_SOCKET_IFNAME or "-"
# for unset.
job() {
    out=$tmp/$1
    ifn=$2
    set -- env -u COLL_SOCKET_IFNAME
    [ "$ifn" = - ] || set -- env COLL_SOCKET_IFNAME="$ifn"
    # shellcheck disable=SC2016 # expanded by the rank's shell
    COLL_DEBUG=info COLL_DEBUG_SUBSYS=TOPO,TCP netns_run 1 "$out" "$@" \
        COLL_TOPO_FILE="$fixture" COLL_TOPO_GPU=local_rank COLL_TUNE_MEASURE=0 \
        sh -c 'COLL_LOCAL_RANK=$((COLL_RANK * 3 + 2)) exec "$@"' sh \
        "$top_builddir/collbench" -n 2 -w 1 -c 1 -C allreduce -b 1K -e 1K
    st=$?
    if [ "$st" -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out/rank0.log"; then
        echo "FAIL: $1: status $st"
        fail=1
        tail -n 20 "$out"/rank*.log
    fi
}

# expect LABEL RANK TEXT: rank RANK's log of job LABEL holds TEXT
expect() {
    if grep -qF "$3" "$tmp/$1/rank$2.log"; then
        echo "PASS: $1: rank $2: $3"
    else
        echo "FAIL: $1: rank $2 logs no \"$3\""
        fail=1
        grep -E "TOPO|TCP" "$tmp/$1/rank$2.log" | tail -n 8
    fi
}

job near -
expect near 0 "rank 0 uses NIC ib1 (10.78.1.1), PIX to GPU 2"
expect near 0 "listening on ib1 10.78.1.1:"
expect near 1 "rank 1 uses NIC ib2 (10.78.2.1), PIX to GPU 5"
expect near 1 "listening on ib2 10.78.2.1:"

ip link set ib1p down  # ib1 stays up but loses its carrier
ip addr flush dev ib2  # ib2 runs without an address
job fallback -
expect fallback 0 "rank 0 uses NIC ib0 (10.78.0.1), NODE to GPU 2"
expect fallback 0 "listening on ib0 10.78.0.1:"
expect fallback 1 "rank 1 uses NIC ib3 (10.78.3.1), NODE to GPU 5"
expect fallback 1 "listening on ib3 10.78.3.1:"

job user =ib3
expect user 0 "listening on ib3 10.78.3.1:"
if grep -q "uses NIC" "$tmp/user/rank0.log"; then
    echo "FAIL: user: a NIC was chosen although COLL_SOCKET_IFNAME is set"
    fail=1
fi
[ "$fail" -eq 0 ]
