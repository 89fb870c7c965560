#!/bin/bash
# SPDX-License-Identifier: MIT
# Everything the GPU work needs checked on a machine with a GPU, in one go, from a bundle
# (tests/gpu/bundle.sh), within SECONDS in all: the kernel tests, the p2p tests, the device
# collectives matrix (make check-gpu's three programs), then bench/cuda_call_cost.sh (where a
# device call's fixed cost goes), bench/cuda_p2p.sh at 2 ranks (2 rounds) and 4 ranks
# (all-reduce, 1 round), each part under a limit of its own and of what is left. Logs and raw
# output go to OUTDIR, all of it also in OUTDIR/results.tgz; a test that runs out of time leaves
# its processes' stacks in OUTDIR/NAME.hang/ (bounded, below). Exit 1 when a test failed or ran
# out of time.
# usage: tests/gpu/device_run.sh BUNDLE OUTDIR [SECONDS (default 480)]
set -u
bundle=$(cd "${1:?usage: device_run.sh BUNDLE OUTDIR [SECONDS]}" && pwd)
out=${2:?usage: device_run.sh BUNDLE OUTDIR [SECONDS]}
end=$((SECONDS + ${3:-480}))
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/../../bench
mkdir -p "$out"
fail=0
limit() { # the part's own limit, or what is left (keeping 5 s to pack up)
    local left=$((end - SECONDS - 5)) want=$(($1 > 1 ? $1 : 1))
    [ "$want" -lt "$left" ] && echo "$want" || echo $((left > 1 ? left : 1))
}
# Run "$@" for at most $1 seconds. Past that, the state of every process of its session goes
# to OUTDIR/$2.hang/ (each thread's kernel side from /proc in kernel.txt; its user stack,
# PID.TID, by stackdump.so where the bundle has it; libcoll's pending calls, SIGUSR1, in the
# part's log) before they are killed: exit 124, as timeout(1).
bounded() {
    local lim=$1 dump=$out/$2.hang t0=$SECONDS pid p t
    shift 2
    mkdir -p "$dump"
    if [ -f "$bundle/stackdump.so" ]; then
        STACKDUMP_DIR=$dump LD_PRELOAD=$bundle/stackdump.so setsid "$@" &
    else
        setsid "$@" &
    fi
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$lim" ]; do
        sleep 0.2
    done
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"
        t=$?
        rmdir "$dump" 2>/dev/null
        return $t
    fi
    local procs
    procs=$(ps -o pid= -s "$pid" 2>/dev/null) ||
        procs=$(awk -v s="$pid" '{ sub(/.*\) /, ""); if ($4 == s) print FILENAME }' \
            /proc/[0-9]*/stat 2>/dev/null | cut -d/ -f3)
    for p in $procs; do
        for t in /proc/"$p"/task/*; do
            echo "== pid $p tid ${t##*/} $(cat "$t"/comm) wchan=$(cat "$t"/wchan) $(cut -d' ' -f3 "$t"/stat)"
            head -12 "$t"/stack
        done
    done >"$dump/kernel.txt" 2>/dev/null
    if [ -f "$bundle/stackdump.so" ]; then # SIGUSR2 kills a process without it
        for p in $procs; do kill -USR2 "$p"; done 2>/dev/null
        sleep 1
    fi
    for p in $procs; do kill -USR1 "$p"; done 2>/dev/null
    sleep 1
    kill -KILL -- -"$pid" $procs 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "$*: out of time after $lim s; stacks in $dump" >&2
    return 124
}

nvidia-smi -L >"$out/device.txt" 2>&1
for t in test_kernels:60 test_p2p:60 test_device_colls:240; do
    name=${t%%:*}
    start=$SECONDS
    bounded "$(limit "${t##*:}")" "$name" "$bundle/$name" >"$out/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc in $((SECONDS - start)) s ($(tail -1 "$out/$name.log"))"
    [ $rc -eq 0 ] || fail=1
done
grep -h "^FAIL\|^PASS" "$out/test_device_colls.log"
timeout "$(limit 100)" bash "$bench/cuda_call_cost.sh" -r 2 "$bundle" "$out/call_cost" \
    >"$out/call_cost.txt" 2>&1
echo "call cost: exit $?"
tail -12 "$out/call_cost.txt"
timeout "$(limit $((end - SECONDS - 60)))" bash "$bench/cuda_p2p.sh" -r 2 "$bundle" "$out/bench_n2" \
    >"$out/bench_n2.txt" 2>&1
echo "bench, 2 ranks: exit $?"
timeout "$(limit 120)" bash "$bench/cuda_p2p.sh" -n 4 -r 1 -C allreduce "$bundle" "$out/bench_n4" \
    >"$out/bench_n4.txt" 2>&1
echo "bench, 4 ranks: exit $?"
awk -f "$bench/median.awk" -f "$bench/cuda_p2p_summary.awk" "$out"/bench_n2/*.r*.txt "$out"/bench_n4/*.r*.txt \
    >"$out/summary.txt" 2>/dev/null
tar czf /tmp/device_run_results.tgz -C "$out" . && mv /tmp/device_run_results.tgz "$out/results.tgz"
exit $fail
