#!/bin/sh
# SPDX-License-Identifier: MIT
# The torch.distributed "coll" backend: builds bindings/torch against this build's libcoll
# (Debian's python3-torch, libtorch-dev, pybind11-dev; /usr/bin/python3) and runs
# test_torch_backend.py on 2 ranks of one host, then on 2 emulated hosts (COLL_HOSTID). Exits 77 (skip) when PyTorch or its headers are absent.
set -u
srcdir=$(cd "${srcdir:-$(dirname "$0")/../..}" && pwd)
top=$(pwd)
py=/usr/bin/python3
if ! $py -c "import torch, torch.distributed" 2>/dev/null || [ ! -d /usr/include/torch ]; then
    echo "test_torch: skipped: needs Debian's python3-torch, libtorch-dev and pybind11-dev"
    exit 77
fi
lib=$top/bindings/torch/lib
mkdir -p "$top/bindings/torch"
if ! (cd "$top/bindings/torch" && COLL_BUILD_DIR=$top $py "$srcdir/bindings/torch/setup.py" -q \
    build --build-base "$top/bindings/torch/build" --build-lib "$lib" >build.log 2>&1); then
    tail -20 "$top/bindings/torch/build.log"
    echo "test_torch: FAIL: the extension did not build"
    exit 1
fi
fail=0
logs=$(mktemp -d)
# run_test HOSTS: the test on 2 ranks, each rank on a host of its own (COLL_HOSTID) when HOSTS
# is 2; logs in $logs/HOSTS.rankR.log
run_test() {
    port=$($py -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    pids=""
    for r in 0 1; do
        host=torchtest
        [ "$1" = 1 ] || host=torchtest$r
        TORCH_COLL_LIB=$lib RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            COLL_HOSTID=$host COLL_DEBUG=info COLL_DEBUG_SUBSYS=ALGO \
            COLL_DEBUG_FILE="$logs/$1.rank$r.log" \
            timeout 300 $py "$srcdir/tests/torch/test_torch_backend.py" &
        pids="$pids $!"
    done
    for p in $pids; do
        wait "$p" || fail=1
    done
}
# One host: each rank's all-reduce, all-gather and reduce-scatter of host tensors took the
# direct path (the backend runs them as blocking calls; requests would take the engine).
run_test 1
for r in 0 1; do
    for c in allreduce allgather reduce_scatter; do
        if ! grep -Eq "rank $r: $c of [0-9]+ bytes .*: direct, cross-memory attach" "$logs/1.rank$r.log"; then
            echo "test_torch: FAIL: rank $r's $c never took the direct path; its log:"
            grep -E "direct|ERROR|WARN" "$logs/1.rank$r.log" | head -20
            fail=1
        fi
    done
done
# Two hosts (emulated): the same test, with every call a request (no direct path there).
run_test 2
for r in 0 1; do
    if grep -q ": direct, cross-memory attach\|registered buffers" "$logs/2.rank$r.log"; then
        echo "test_torch: FAIL: rank $r took the direct path across hosts"
        fail=1
    fi
    if ! grep -q "(2 ranks, 2 hosts)" "$logs/2.rank$r.log"; then
        echo "test_torch: FAIL: rank $r's log shows no communicator of 2 hosts"
        fail=1
    fi
done
rm -rf "$logs"
[ $fail = 0 ] && echo "test_torch: PASS" || echo "test_torch: FAIL"
exit $fail
