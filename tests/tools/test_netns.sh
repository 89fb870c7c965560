#!/bin/sh
# SPDX-License-Identifier: MIT
# Two "hosts" on one machine: network namespaces joined by a veth pair, two ranks in each.
# Ranks reach each other by tcp over the veth (COLL_SOCKET_IFNAME), shm inside a namespace,
# and the bootstrap root lives in the first namespace. Needs root and iproute2 (else skip).
set -u
top_builddir=${top_builddir:-.}
bench=$top_builddir/collbench
[ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1 || { echo "SKIP: needs root and ip"; exit 77; }
ns0=colltest$$a
ns1=colltest$$b
tmp=$(mktemp -d /tmp/collns.XXXXXX)
cleanup() { ip netns del "$ns0" 2>/dev/null; ip netns del "$ns1" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
if ! { ip netns add "$ns0" && ip netns add "$ns1" &&
       ip link add "cv$$a" type veth peer name "cv$$b" &&
       ip link set "cv$$a" netns "$ns0" && ip link set "cv$$b" netns "$ns1" &&
       ip -n "$ns0" addr add 10.77.0.1/24 dev "cv$$a" && ip -n "$ns1" addr add 10.77.0.2/24 dev "cv$$b" &&
       ip -n "$ns0" link set "cv$$a" up && ip -n "$ns1" link set "cv$$b" up &&
       ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up; } 2>"$tmp/ip.err"; then
    echo "SKIP: cannot create network namespaces: $(cat "$tmp/ip.err")"
    exit 77
fi
secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
port=$((20000 + $$ % 20000))
run_rank() { # rank ns
    ip netns exec "$2" env COLL_RANK="$1" COLL_NRANKS=4 COLL_ROOT_ADDR=10.77.0.1:$port \
        COLL_JOB_SECRET="$secret" COLL_HOSTID="$2" COLL_SOCKET_IFNAME=cv \
        "$bench" -b 1K -e 4M -f 4 -o all -d float >"$tmp/rank$1" 2>&1
}
pids=""
for r in 0 1; do run_rank $r "$ns0" & pids="$pids $!"; done
for r in 2 3; do run_rank $r "$ns1" & pids="$pids $!"; done
st=0
for p in $pids; do wait "$p" || st=1; done
if [ $st -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/rank0"; then
    grep -E "^ +[0-9]+ " "$tmp/rank0" | tail -3
    echo "PASS: 2 namespaces x 2 ranks (tcp over veth, shm within)"
    echo "1 passed, 0 failed"
    exit 0
fi
for r in 0 1 2 3; do echo "--- rank $r"; cat "$tmp/rank$r"; done
echo "FAIL: 2 namespaces x 2 ranks"
echo "0 passed, 1 failed"
exit 1
