#!/bin/sh
# SPDX-License-Identifier: MIT
# The topology in a running communicator. Ranks replay the 2-socket machine of
# tests/topologies/synthetic_2s8g4n.xml (COLL_TOPO_FILE) on GPU local_rank:
#  - 5 ranks on one host: GPUs 0-3 on package 0, GPU 4 on package 1. The ring crosses the
#    sockets twice, and the tuner measures the intra-host link across them (ranks 0 and 4).
#  - 6 ranks on 2 emulated hosts, rank r on host r mod 2: the ring crosses hosts twice; ring,
#    tree and hierarchical all-reduce, broadcast and reduce built over the topology order (the
#    trees over the ring's order, hier's rails between ranks on like GPUs) give exact results.
# Skips without hwloc (COLL_TOPO_FILE needs it).
set -u
top_builddir=${top_builddir:-.}
here=$(cd "$(dirname "$0")" && pwd)
fixture=$here/../topologies/synthetic_2s8g4n.xml
collrun=$top_builddir/collrun
collbench=$top_builddir/collbench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

if ! grep -q "define HAVE_HWLOC 1" "$top_builddir/config.h" 2>/dev/null; then
    echo "SKIP: COLL_TOPO_FILE needs hwloc"
    exit 77
fi

check() { # check "what" command...
    what=$1
    shift
    if "$@"; then
        echo "ok: $what"
    else
        echo "FAIL: $what"
        fail=1
    fi
}

export COLL_TOPO_FILE="$fixture" COLL_TOPO_GPU=local_rank COLL_TIMEOUT=60

COLL_DEBUG=INFO "$collrun" -n 5 "$collbench" -b 64K -e 64K -n 2 -w 1 >"$tmp/one" 2>&1
check "5 ranks on one 2-socket host: collbench exit 0" test $? -eq 0
check "the ring crosses the sockets twice" \
    grep -q "rank 0: the ring crosses hosts 0 time(s) and sockets 2 time(s)" "$tmp/one"
check "the intra-host link is measured across the sockets" \
    grep -q "rank 0: the intra-host link is measured between ranks 0 and 4 (package 0" "$tmp/one"

# rank r on emulated host r mod 2
cat >"$tmp/wrap.sh" <<'WRAP'
#!/bin/sh
COLL_HOSTID=host$((COLL_RANK % 2))
export COLL_HOSTID
exec "$@"
WRAP
for algo in ring tree hier; do
    for coll in allreduce broadcast reduce; do
        case $algo/$coll in hier/broadcast | hier/reduce) continue ;; esac
        COLL_DEBUG=INFO COLL_ALGO=$algo "$collrun" -n 6 sh "$tmp/wrap.sh" "$collbench" \
            -C "$coll" -b 8 -e 512K -f 16 -n 2 -w 1 -c 1 >"$tmp/$algo.$coll" 2>&1
        check "2 hosts x 3 interleaved ranks, $algo $coll: exact results" test $? -eq 0
        check "2 hosts x 3 interleaved ranks, $algo $coll: $algo ran" \
            grep -q "rank 0: $coll of [0-9]* bytes ([a-z0-9]*): $algo, forced by COLL_ALGO" \
            "$tmp/$algo.$coll"
        check "2 hosts x 3 interleaved ranks, $algo $coll: the ring crosses hosts twice" \
            grep -q "rank 0: the ring crosses hosts 2 time(s)" "$tmp/$algo.$coll"
    done
done
if [ $fail -ne 0 ]; then
    for f in "$tmp"/*; do
        echo "---- $f"
        tail -n 20 "$f"
    done
fi
exit $fail
