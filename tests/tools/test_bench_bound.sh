#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/membw prints a positive bandwidth for each kernel and thread count and refuses bad
# options, as does bench/cma_bw for each way of copying; collbench --bound adds a %bound column equal to 100 * 2n * algbw / GBPS for an
# all-reduce and (n + 1) * algbw for an all-gather, and refuses a bad GBPS; collbench applies
# NCCL_TESTS_MIN_BW as nccl-tests does, refuses an -A algorithm that cannot run the
# collective, takes nccl-tests' other options at their defaults and refuses them otherwise,
# and -T also bounds start-up; -A hier on one host is reported as not running (header, JSON
# and the library's warning); bench/compare refuses bad options with exit 2.
# Exit status: 0 pass, 1 fail, 99 not built.
set -u
top_builddir=${top_builddir:-.}
srcdir=${srcdir:-.}
for p in bench/membw bench/cma_bw collbench collrun; do
    [ -x "$top_builddir/$p" ] || { echo "test_bench_bound: $p not built" >&2; exit 99; }
done
tmp=$(mktemp -d /tmp/bench_bound.XXXXXX) || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if "$top_builddir/bench/membw" -t 2 -m 4 -r 1 >"$tmp/m" 2>&1 &&
    [ "$(awk '$3 > 0 && ($2 == 1 || $2 == 2)' "$tmp/m" | grep -c -E '^(read|write|copy|add|write_nt|copy_nt|add_nt) ')" = 14 ]
then ok "membw: 7 kernels x 2 thread counts, positive GB/s"; else bad "membw output"; cat "$tmp/m"; fi
for a in "-t 0" "-m x" "-r -1" "extra"; do
    # shellcheck disable=SC2086
    "$top_builddir/bench/membw" $a >/dev/null 2>"$tmp/e"
    if [ $? = 2 ] && grep -q membw "$tmp/e"; then ok "membw refuses $a"; else bad "membw $a"; fi
done

if "$top_builddir/bench/cma_bw" -m 4 -b 64 -r 1 >"$tmp/cm" 2>&1 &&
    [ "$(awk '$2 == 4 && $3 == 64 && $5 > 0' "$tmp/cm" | grep -c -E '^(readv|writev|memcpy|memcpy1) ')" = 4 ]
then ok "cma_bw: readv, writev, memcpy in blocks and in one call, positive GB/s"
else bad "cma_bw output"; cat "$tmp/cm"; fi
for a in "-m 0" "-b 2" "-r 0" "extra"; do
    # shellcheck disable=SC2086
    "$top_builddir/bench/cma_bw" $a >/dev/null 2>"$tmp/e"
    if [ $? = 2 ] && grep -q cma_bw "$tmp/e"; then ok "cma_bw refuses $a"; else bad "cma_bw $a"; fi
done

check_bound() { # coll factor
    "$top_builddir/collrun" -n 2 "$top_builddir/collbench" -C "$1" -b 1M -e 1M -n 2 -w 1 \
        --bound 7.5 >"$tmp/c" 2>&1 || { bad "collbench -C $1 --bound failed"; cat "$tmp/c"; return; }
    if grep -q '%bound' "$tmp/c" &&
        awk -v f="$2" '$1 == 1048576 { want = 100 * f * $7 / 7.5; got = $NF; n++
                 if (got < want * 0.97 - 0.1 || got > want * 1.03 + 0.1) exit 1 }
                 END { exit n != 1 }' "$tmp/c"
    then ok "collbench -C $1 --bound: %bound = 100 * $2 * algbw / 7.5"
    else bad "collbench -C $1 %bound column"; cat "$tmp/c"; fi
}
check_bound allreduce 4
check_bound allgather 3
for v in 0 -1 x 1e9; do
    if "$top_builddir/collbench" --bound "$v" >/dev/null 2>&1; then bad "collbench --bound $v accepted"
    else ok "collbench refuses --bound $v"; fi
done
# NCCL_TESTS_MIN_BW, as in nccl-tests: "Avg bus bandwidth" ends in FAILED below 90% of it (and
# the status is 1) or OK, and the JSON's average_bus_bandwidth gets "okay"; unset, neither.
min_bw() { # value ("-" for unset): status in st
    if [ "$1" = - ]; then set -- env -u NCCL_TESTS_MIN_BW; else set -- env NCCL_TESTS_MIN_BW="$1"; fi
    "$@" "$top_builddir/collrun" -n 2 "$top_builddir/collbench" -b 64K -e 64K -n 2 -w 1 \
        -J "$tmp/mb.json" >"$tmp/mb" 2>&1
    st=$?
}
avg='^# Avg bus bandwidth    : [0-9.e+-]*'
jsn='"average_bus_bandwidth": {"bandwidth": [0-9.e+-]*'
min_bw 1e6
if [ $st = 1 ] && grep -q "$avg FAILED\$" "$tmp/mb" && grep -q "$jsn, \"okay\": false}\$" "$tmp/mb.json"
then ok "NCCL_TESTS_MIN_BW=1e6: FAILED, okay false, status 1"
else bad "NCCL_TESTS_MIN_BW=1e6 (status $st)"; cat "$tmp/mb" "$tmp/mb.json"; fi
min_bw 1e-9
if [ $st = 0 ] && grep -q "$avg OK\$" "$tmp/mb" && grep -q "$jsn, \"okay\": true}\$" "$tmp/mb.json"
then ok "NCCL_TESTS_MIN_BW=1e-9: OK, okay true, status 0"
else bad "NCCL_TESTS_MIN_BW=1e-9 (status $st)"; cat "$tmp/mb" "$tmp/mb.json"; fi
min_bw -
if [ $st = 0 ] && grep -q "$avg \$" "$tmp/mb" && grep -q "$jsn}\$" "$tmp/mb.json"
then ok "no NCCL_TESTS_MIN_BW: no verdict, no okay"
else bad "no NCCL_TESTS_MIN_BW (status $st)"; cat "$tmp/mb" "$tmp/mb.json"; fi
min_bw x
if [ $st = 2 ] && grep -q "NCCL_TESTS_MIN_BW 'x' is not a bandwidth" "$tmp/mb"
then ok "NCCL_TESTS_MIN_BW=x refused"; else bad "NCCL_TESTS_MIN_BW=x (status $st)"; cat "$tmp/mb"; fi
# -A: an algorithm the library lacks, or one that does not implement the collective (which
# the library would skip, picking by cost), exits 2 naming both; one that implements it runs.
algo_refused() { # args message
    # shellcheck disable=SC2086
    "$top_builddir/collbench" $1 -b 8 -e 8 -n 1 -w 0 >/dev/null 2>"$tmp/e"
    st=$?
    if [ $st = 2 ] && grep -qF -- "$2" "$tmp/e"; then ok "collbench $1 refused"
    else bad "collbench $1 (status $st)"; cat "$tmp/e"; fi
}
algo_refused "-A nosuch" "-A nosuch: libcoll has no algorithm nosuch; it has ring "
algo_refused "-C alltoall -A ring" "-A ring: algorithm ring does not implement alltoall"
algo_refused "-A allgather:tree" "-A allgather:tree: algorithm tree does not implement allgather"
algo_refused "-A allgather:ring" "-A allgather:ring: forces no algorithm for allreduce"
"$top_builddir/collrun" -n 2 "$top_builddir/collbench" -C allgather -A tree,bruck -b 8 -e 8 \
    -n 1 -w 0 >"$tmp/a" 2>&1
st=$?
if [ $st = 0 ] && grep -q '^# Algorithm: COLL_ALGO=tree,bruck$' "$tmp/a"
then ok "collbench -C allgather -A tree,bruck runs"; else bad "-A tree,bruck (status $st)"; cat "$tmp/a"; fi
# -A hier on one host cannot run: the header and the JSON say so instead of naming hier, and
# the library warns (once per collective and algorithm) what runs instead; -A hier,ring names
# ring as what runs. COLL_ALGO entries that never apply are warned about too.
"$top_builddir/collrun" -n 2 "$top_builddir/collbench" -A hier -b 64k -e 64k -n 1 -w 0 \
    -J "$tmp/h.json" >"$tmp/h" 2>&1
st=$?
if [ $st = 0 ] && grep -q '^# Algorithm: COLL_ALGO=hier; hier cannot run on this communicator (.*1 host(s)): nothing is forced' "$tmp/h" &&
    grep -q '"algo": null,' "$tmp/h.json" && grep -q '"algo_requested": "hier",' "$tmp/h.json"
then ok "collbench -A hier on one host says hier did not run"; else bad "-A hier header/JSON (status $st)"; cat "$tmp/h" "$tmp/h.json"; fi
if [ "$(grep -c 'COLL_ALGO forces hier for allreduce, but it cannot run' "$tmp/h")" = 2 ]
then ok "-A hier: the library warns once per rank"; else bad "-A hier: library warning"; cat "$tmp/h"; fi
"$top_builddir/collrun" -n 2 "$top_builddir/collbench" -A hier,ring -b 64k -e 64k -n 1 -w 0 \
    >"$tmp/h" 2>&1
if grep -q '^# Algorithm: COLL_ALGO=hier,ring; hier cannot run .*: ring runs instead$' "$tmp/h" &&
    grep -q 'COLL_ALGO forces hier for allreduce, but .*; ring runs instead' "$tmp/h"
then ok "collbench -A hier,ring: ring runs instead"; else bad "-A hier,ring"; cat "$tmp/h"; fi
COLL_ALGO=allgather:tree,barrier:ring "$top_builddir/collrun" -n 2 "$top_builddir/collbench" \
    -C allgather -b 1k -e 1k -n 1 -w 0 >"$tmp/h" 2>&1
if grep -q 'COLL_ALGO forces tree for allgather, but it does not implement allgather' "$tmp/h"
then ok "COLL_ALGO=allgather:tree warned"; else bad "COLL_ALGO=allgather:tree silent"; cat "$tmp/h"; fi
# nccl-tests' options at the values that change nothing are accepted; at others they are
# refused naming the option (collbench's -M host|cuda keeps its meaning; -M 0 is host).
for a in "-m 1" "--agg_iters 1" "-p 0" "-p 1" "--parallel_init 1" "-y 0" "--stream_null 0" \
    "-G 0" "--cudagraph 0" "-C 1" "--report_cputime 0" "-S 0" "--report_timestamps 0" "-u 0" \
    "--unalign 0" "-I 0" "--per_iter_timing 0" "-K 0" "--per_iter_skip 0" "-x 0" \
    "--cta_policy 0" "-D 0" "--device_implementation 0" "-V 16" "--device_cta_count 16" \
    "-M 0" "--memory 0" "-M host" "-R 0"; do
    # shellcheck disable=SC2086
    "$top_builddir/collbench" $a -b 8 -e 8 -n 1 -w 0 >"$tmp/o" 2>&1
    st=$?
    if [ $st = 0 ]; then ok "collbench $a accepted"; else bad "collbench $a (status $st)"; cat "$tmp/o"; fi
done
for a in "-m 2|-m 2 (--agg_iters) is not supported" "--cudagraph 1|-G 1 (--cudagraph)" \
    "-p 2|-p 2 (--parallel_init)" "-y 1|-y 1 (--stream_null)" "-S 1|-S 1 (--report_timestamps)" \
    "-u 4|-u 4 (--unalign)" "-I 1|-I 1 (--per_iter_timing)" "-K 2|-K 2 (--per_iter_skip)" \
    "-x 1|-x 1 (--cta_policy)" "-D 1|-D 1 (--device_implementation)" \
    "-V 0|-V 0 (--device_cta_count)" "--report_cputime 2|--report_cputime 2 is not supported" \
    "-M 1|for -M (host or cuda"; do
    # shellcheck disable=SC2086
    "$top_builddir/collbench" ${a%%|*} -b 8 -e 8 -n 1 -w 0 >/dev/null 2>"$tmp/e"
    st=$?
    if [ $st = 2 ] && grep -qF -- "${a#*|}" "$tmp/e"; then ok "collbench refuses ${a%%|*}"
    else bad "collbench ${a%%|*} (status $st)"; cat "$tmp/e"; fi
done
# -T also bounds start-up (COLL_BOOTSTRAP_TIMEOUT) unless that is set: a rank that never joins
# fails the job in seconds, not after the default 120 s.
safety=""
command -v timeout >/dev/null 2>&1 && safety="timeout -k 5 90"
never_joins() { # collbench arguments
    t0=$(date +%s)
    # shellcheck disable=SC2016 # the inner shell expands them
    $safety "$top_builddir/collrun" --grace 1 -n 2 sh -c \
        'if [ "$COLL_RANK" = 1 ]; then exec sleep 100; fi; exec "$@"' sh \
        "$top_builddir/collbench" "$@" -b 8 -e 8 -n 1 >"$tmp/t" 2>&1
    st=$?
    dt=$(($(date +%s) - t0))
}
unset COLL_BOOTSTRAP_TIMEOUT
never_joins -T 2
if [ $st = 1 ] && [ $dt -lt 60 ] && grep -Eq 'never joined .*within COLL_BOOTSTRAP_TIMEOUT|not every rank joined within COLL_BOOTSTRAP_TIMEOUT' "$tmp/t"
then ok "-T 2: a rank that never joins fails start-up after ${dt}s"
else bad "-T 2, a rank never joins: status $st after ${dt}s"; cat "$tmp/t"; fi
export COLL_BOOTSTRAP_TIMEOUT=1
never_joins -T 600
unset COLL_BOOTSTRAP_TIMEOUT
if [ $st = 1 ] && [ $dt -lt 60 ]; then ok "-T 600 keeps COLL_BOOTSTRAP_TIMEOUT=1 (${dt}s)"
else bad "-T 600 with COLL_BOOTSTRAP_TIMEOUT=1: status $st after ${dt}s"; cat "$tmp/t"; fi
for a in "-n x" "-r 0" "-C bogus" "-z"; do
    # shellcheck disable=SC2086
    (cd "$top_builddir" && sh "$srcdir/bench/compare" $a >/dev/null 2>"$tmp/e")
    if [ $? = 2 ] && grep -q 'bench/compare' "$tmp/e"; then ok "compare refuses $a"; else bad "compare $a"; fi
done
# bench/compare's summary: %bound = 2n*S / B over the median time (B from the membw lines):
# 2 ranks, 1 MiB, B = 41.94304 GB/s -> 100 us; libcoll's median 200 us -> 50 %, libcoll-reg's
# 100 us -> 100 %; no %bound for an all-gather, none without the membw lines. torch-coll (this
# library under torch.distributed, 50 us) is no peer: the best peer stays ompi, and its own
# column is torch (800 us) / torch-coll = 16.00
if [ -x /usr/bin/python3 ]; then
    printf '%s\n' "1 libcoll allreduce 2 1048576 150" "2 libcoll allreduce 2 1048576 200" \
        "3 libcoll allreduce 2 1048576 900" "1 libcoll-reg allreduce 2 1048576 100" \
        "1 ompi allreduce 2 1048576 400" "1 ompi allgather 2 1048576 400" \
        "1 libcoll allgather 2 1048576 200" "1 torch allreduce 2 1048576 800" \
        "1 torch-coll allreduce 2 1048576 50" >"$tmp/raw"
    printf '%s\n' "1 41.94304" "2 10" "3 50" >"$tmp/bw"
    mkdir -p "$tmp/s1" "$tmp/s2"
    /usr/bin/python3 "$srcdir/bench/compare.d/summary.py" "$tmp/raw" "$tmp/s1" "$tmp/bw" \
        >"$tmp/t1" 2>/dev/null
    : >"$tmp/empty" # membw missing or silent: no %bound either
    /usr/bin/python3 "$srcdir/bench/compare.d/summary.py" "$tmp/raw" "$tmp/s2" "$tmp/empty" \
        >"$tmp/t2" 2>/dev/null
    if grep -q '^| 1048576 | .* | ompi | 2.00 | 4.00 | 50 % | 100 % | 16.00 |$' "$tmp/t1" &&
        [ "$(grep -c ' % |' "$tmp/t1")" = 1 ] && ! grep -q '%bound' "$tmp/t2" &&
        grep -q '^| 1048576 | .* | ompi | 2.00 | 4.00 | 16.00 |$' "$tmp/t2"; then
        ok "compare's summary: %bound from the membw lines (all-reduce only); torch-coll no peer"
    else bad "compare's summary %bound"; cat "$tmp/t1" "$tmp/t2"; fi
fi
echo "test_bench_bound: $pass passed, $fail failed"
[ "$fail" = 0 ]
