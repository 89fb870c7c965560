#!/bin/sh
# SPDX-License-Identifier: MIT
# The torch.distributed "coll" backend: builds bindings/torch against this build's libcoll
# (Debian's python3-torch, libtorch-dev, pybind11-dev; /usr/bin/python3) and runs
# test_torch_backend.py on 2 ranks. Exits 77 (skip) when PyTorch or its headers are absent.
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
port=$($py -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
fail=0
pids=""
logs=$(mktemp -d)
for r in 0 1; do
    TORCH_COLL_LIB=$lib RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        COLL_DEBUG=info COLL_DEBUG_SUBSYS=ALGO COLL_DEBUG_FILE="$logs/rank$r.log" \
        timeout 300 $py "$srcdir/tests/torch/test_torch_backend.py" &
    pids="$pids $!"
done
for p in $pids; do
    wait "$p" || fail=1
done
# Each rank's all-reduce, all-gather and reduce-scatter of host tensors took the direct path
# (the backend runs them as blocking calls; non-blocking ones would take the engine).
for r in 0 1; do
    for c in allreduce allgather reduce_scatter; do
        if ! grep -Eq "rank $r: $c of [0-9]+ bytes .*: direct, cross-memory attach" "$logs/rank$r.log"; then
            echo "test_torch: FAIL: rank $r's $c never took the direct path; its log:"
            grep -E "direct|ERROR|WARN" "$logs/rank$r.log" | head -20
            fail=1
        fi
    done
done
rm -rf "$logs"
[ $fail = 0 ] && echo "test_torch: PASS" || echo "test_torch: FAIL"
exit $fail
