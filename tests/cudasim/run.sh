#!/bin/sh
# SPDX-License-Identifier: MIT
# libcoll's device paths on cudasim, the host emulation of CUDA (tests/cudasim/README.md):
#   test_cudasim        the emulation's own checks;
#   test_p2p            the p2p path (device windows by CUDA IPC), 2-4 ranks;
#   test_device_colls   every collective and send/recv on device buffers, blocking,
#                       non-blocking and stream-ordered, 1-4 ranks, over shm and tcp, each path;
#                       then at 2 ranks with the callers' streams waiting by host functions
#                       (COLL_CUDA_STREAM_WAIT=hostfn) instead of stream memory operations,
#                       and with staging from the heap (no pinned message staging, 64 KiB of
#                       pinned staging);
#   collbench -M cuda   2 ranks through collrun, results checked (#wrong 0), p2p and staged,
#                       staged from the heap, once with the debug log written to files.
# First checks that no program took code from the CUDA runtime archive: every CUDA entry
# point they call must be the emulation's. Device memory lives in files under a directory of
# this run's own, removed at the end.
b=${top_builddir:-.}/tests/cudasim
collrun=${COLLRUN:-${top_builddir:-.}/collrun}
fail() { echo "cudasim: FAIL: $*"; exit 1; }
command -v nm >/dev/null || fail "nm (binutils) is needed for the check below"
for p in test_cudasim test_p2p test_device_colls collbench; do
    exe=$b/.libs/$p
    [ -x "$exe" ] || exe=$b/$p
    [ -x "$exe" ] || fail "$b/$p is not built"
    syms=$(nm "$exe" 2>/dev/null) || fail "nm cannot read $exe"
    echo "$syms" | grep -q ' T main$' || fail "nm found no symbols in $exe (stripped?)"
    own=$(echo "$syms" | grep -E ' [TtDdBb] (cuda[A-Z]|__cudart|cudart)' | head -3)
    [ -z "$own" ] || fail "$p contains CUDA runtime code: $own"
done
CUDASIM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cudasim.XXXXXX") || fail "mktemp"
export CUDASIM_DIR
trap 'rm -rf "$CUDASIM_DIR"' EXIT
rc=0
step() { # name, seconds, command...: hangs are the failures to expect, so each has a limit
    name=$1
    limit=$2
    shift 2
    echo "== cudasim: $name"
    start=$(date +%s)
    if [ "$limit" = - ]; then
        "$@"
    else
        timeout "$limit" "$@"
    fi
    r=$?
    [ $r -ne 124 ] || echo "cudasim: $name: still running after $limit s (hung?)"
    echo "== cudasim: $name: exit $r ($(($(date +%s) - start)) s)"
    [ $r -eq 0 ] || rc=1
}
step test_cudasim 120 "$b/test_cudasim"
step test_p2p 300 "$b/test_p2p"
step test_device_colls 900 "$b/test_device_colls"
step "test_device_colls, host-function waits" 300 \
    env COLL_CUDA_STREAM_WAIT=hostfn "$b/test_device_colls" -n 2
step "test_device_colls, heap staging" 300 \
    env COLL_CUDA_MSG_STAGING=0 COLL_CUDA_STAGING_SIZE=64k "$b/test_device_colls" -n 2
bench() { # label, environment...
    label=$1
    shift
    out=$CUDASIM_DIR/bench.out
    for c in allreduce allgather reduce_scatter; do
        timeout 120 env "$@" "$collrun" -n 2 "$b/collbench" -M cuda -C $c -b 8 -e 2M -f 8 -w 1 -n 3 -c 1 \
            > "$out" 2>&1
        r=$?
        rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$out")
        wrong=$(awk '/^ +[0-9]+ +[0-9]+ / && ($9 != 0 || $13 != 0)' "$out" | wc -l)
        echo "collbench -M cuda -C $c, $label: exit $r, $rows sizes, $wrong with wrong results"
        if [ $r -ne 0 ] || [ "$rows" -ne 7 ] || [ "$wrong" -ne 0 ]; then
            cat "$out"
            return 1
        fi
    done
}
step "collbench, p2p" - bench p2p COLL_CUDA_P2P=1 COLL_CUDA_P2P_MIN=0
step "collbench, staged" - bench staged COLL_CUDA_P2P=0
step "collbench, staged from the heap" - bench "heap staging" COLL_CUDA_P2P=0 \
    COLL_CUDA_STAGING_SIZE=64k
step "collbench, debug log to files" - bench "debug log" COLL_CUDA_P2P=1 COLL_CUDA_P2P_MIN=0 COLL_DEBUG=debug \
    COLL_DEBUG_FILE="$CUDASIM_DIR/log.%h.%p"
# that run took the p2p path: each rank logged its line for each collective
n=$(cat "$CUDASIM_DIR"/log.* 2>/dev/null | grep -c 'p2p, CUDA IPC windows')
echo "cudasim: p2p lines in the debug logs: $n (2 ranks x 3 collectives: at least 6)"
[ "$n" -ge 6 ] || rc=1
# Exactly one is expected: test_cudasim's child that touched device memory was killed. More
# would be allocations that libcoll never freed (a window, a staging buffer).
left=$(ls "$CUDASIM_DIR" | grep -c '^cudasim\.')
echo "cudasim: files of device memory left after the programs ended: $left (expected 1)"
[ "$left" -eq 1 ] || rc=1
exit $rc
