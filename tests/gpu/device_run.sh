#!/bin/bash
# SPDX-License-Identifier: MIT
# Everything the GPU work needs checked on a machine with a GPU, in one go and with a time limit
# for each part, from a bundle (tests/gpu/bundle.sh): the kernel tests, the p2p tests, the device
# collectives matrix, then bench/cuda_p2p.sh at 2 ranks (3 rounds) and 4 ranks (all-reduce, 2
# rounds). Logs and the benchmark's raw output go to OUTDIR, with OUTDIR/results.tgz holding all
# of it. Exit 1 when a test failed or timed out.
# usage: tests/gpu/device_run.sh BUNDLE OUTDIR [SECONDS_PER_TEST (default 240)]
set -u
bundle=$(cd "${1:?usage: device_run.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: device_run.sh BUNDLE OUTDIR}
limit=${3:-240}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
fail=0
nvidia-smi -L >"$out/device.txt" 2>&1
for t in test_kernels test_p2p test_device_colls; do
    start=$(date +%s)
    timeout "$limit" "$bundle/$t" >"$out/$t.log" 2>&1
    rc=$?
    echo "$t: exit $rc in $(($(date +%s) - start)) s ($(tail -1 "$out/$t.log"))"
    [ $rc -eq 0 ] || fail=1
done
timeout "$limit" bash "$here/../../bench/cuda_p2p.sh" -r 3 "$bundle" "$out/bench_n2" >"$out/bench_n2.txt" 2>&1
echo "bench, 2 ranks: exit $?"
timeout "$limit" bash "$here/../../bench/cuda_p2p.sh" -n 4 -r 2 -C allreduce "$bundle" "$out/bench_n4" \
    >"$out/bench_n4.txt" 2>&1
echo "bench, 4 ranks: exit $?"
tar czf "$out/results.tgz" -C "$out" --exclude results.tgz .
exit $fail
