#!/bin/bash
# SPDX-License-Identifier: MIT
# Build the GPU programs as one self-contained bundle for a machine that has a GPU but no build
# tools: a static libcoll (no hwloc, verbs, rdmacm or UCX, so the programs need only libc and
# libstdc++), from a copy of this tree's tracked and untracked files, into DEST (collrun,
# collbench, cuda_copy_bw, test_kernels, test_device_colls, test_p2p, and stackdump.so, which
# device_run.sh preloads to dump the stacks of a part that runs out of time). Then, on that machine:
# tests/gpu/device_run.sh DEST OUTDIR.
# usage: tests/gpu/bundle.sh DEST [WORKDIR]   (WORKDIR, default /tmp/coll-gpu-build, is reused)
set -euo pipefail
dest=${1:?usage: tests/gpu/bundle.sh DEST [WORKDIR]}
work=${2:-/tmp/coll-gpu-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work" "$dest"
dest=$(cd "$dest" && pwd) # the build below runs in WORKDIR
(cd "$top" && git ls-files --cached --others --exclude-standard -z) |
    (cd "$top" && rsync -a --files-from=- --from0 ./ "$work/")
cd "$work"
if [ ! -f Makefile ]; then
    autoreconf -fi >/dev/null 2>&1
    ./configure --disable-shared --enable-static --without-hwloc --without-verbs \
        --without-rdmacm --without-ucx --with-cuda >configure.out
fi
grep -q '^#define HAVE_CUDA 1' config.h || { echo "bundle: configure found no CUDA" >&2; exit 1; }
make -j"$(nproc)" collrun collbench bench/cuda_copy_bw tests/gpu/test_kernels \
    tests/gpu/test_device_colls tests/gpu/test_p2p >make.out
cp collrun collbench bench/cuda_copy_bw tests/gpu/test_kernels tests/gpu/test_device_colls \
    tests/gpu/test_p2p "$dest/"
${CC:-cc} -O1 -g -shared -fPIC -o "$dest/stackdump.so" tests/gpu/stackdump.c
echo "bundle: $(ls "$dest" | tr '\n' ' ')in $dest"
