#!/bin/sh
# SPDX-License-Identifier: MIT
# DDP step time, "coll" against gloo: builds bindings/torch (see tests/torch/test_torch.sh) and
# runs bench/torch_ddp_bench.py on NRANKS (2) ranks. WIDTH, DEPTH, STEPS, ROUNDS as in the .py.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
top=$(pwd)
lib=$top/bindings/torch/lib
mkdir -p "$top/bindings/torch"
(cd "$top/bindings/torch" && COLL_BUILD_DIR=$top /usr/bin/python3 "$src/bindings/torch/setup.py" \
    -q build --build-base "$top/bindings/torch/build" --build-lib "$lib" >build.log 2>&1)
n=${NRANKS:-2}
port=$(/usr/bin/python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
r=0
while [ $r -lt "$n" ]; do
    TORCH_COLL_LIB=$lib RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        COLL_DEBUG=error /usr/bin/python3 "$src/bench/torch_ddp_bench.py" 2>&1 | grep -v "^W20\|InitGoogle" &
    r=$((r + 1))
done
wait
