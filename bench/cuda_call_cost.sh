#!/bin/bash
# SPDX-License-Identifier: MIT
# Where the fixed cost of a collective on device memory goes, among ranks sharing one GPU:
# all-reduce of 8 B to 8 MiB on the p2p path and staged, with the caller's stream waiting by a
# stream memory operation (COLL_CUDA_STREAM_WAIT=memop: the GPU waits on a mapped word) or by a
# host function (hostfn: a thread of the CUDA runtime waits), and with the proxy's polling off
# (COLL_SPIN_TIME=0), interleaved round after round; then one short run with COLL_DEBUG=debug,
# whose per-call lines (the proxy's wait for the caller's stream, the phases, the exchanges) are
# summed up. Raw output in OUTDIR; the table of median out-of-place times per variant at the end.
#
# usage: bench/cuda_call_cost.sh [-n NRANKS] [-r ROUNDS] [BINDIR] [OUTDIR]
set -u
nranks=2 rounds=2
while getopts "n:r:" o; do
    case $o in
        n) nranks=$OPTARG ;;
        r) rounds=$OPTARG ;;
        *) sed -n '10p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
bindir=${1:-.}
out=${2:-cuda_call_cost_$(date +%Y-%m-%d)}
mkdir -p "$out"
find_bin() { if [ -x "$bindir/$1" ]; then echo "$bindir/$1"; else echo "$bindir/bench/$1"; fi; }
collrun=$(find_bin collrun) collbench=$(find_bin collbench)
variants="p2p,memop p2p,hostfn p2p,memop,nospin staged,memop staged,hostfn"
run() { # variant file [collbench flags]
    local v=$1 f=$2 p2p=0 wait=memop spin=500us
    shift 2
    case $v in p2p*) p2p=1 ;; esac
    case $v in *hostfn*) wait=hostfn ;; esac
    case $v in *nospin*) spin=0 ;; esac
    COLL_CUDA_P2P=$p2p COLL_CUDA_P2P_MIN=0 COLL_CUDA_STREAM_WAIT=$wait COLL_SPIN_TIME=$spin timeout 60 "$collrun" \
        -n "$nranks" "$collbench" -M cuda -C allreduce -c 1 "$@" >"$f" 2>&1
}
for r in $(seq 1 "$rounds"); do
    for v in $variants; do
        f="$out/${v//,/_}.r$r.txt"
        run "$v" "$f" -b 8 -e 8M -f 8 -w 5 -n 50
        echo "round $r $v: exit $? ($(grep -c '^ *[0-9]' "$f") sizes)"
    done
done
# the trace: per-call lines of rank 0's proxy
rm -f "$out"/trace.*
COLL_DEBUG=debug COLL_DEBUG_SUBSYS=COLL COLL_DEBUG_FILE="$out/trace.%p" \
    run p2p,memop "$out/trace_collbench.txt" -b 8 -e 8 -w 5 -n 50
echo "trace run: exit $?"
here=$(cd "$(dirname "$0")" && pwd)
awk -f "$here/median.awk" -f /dev/stdin "$out"/*.r*.txt <<'AWK'
FNR == 1 { v = FILENAME; sub(/.*\//, "", v); sub(/\.r[0-9]+\.txt$/, "", v); if (!(v in vs)) { vs[v] = 1; vo[++nv] = v } }
/^ *[0-9]/ && NF >= 13 && $9 ~ /^[0-9]+$/ && $13 ~ /^[0-9]+$/ {
    if (!($1 in ss)) { ss[$1] = 1; so[++ns] = $1 }
    t[$1, v] = t[$1, v] " " $6; w[$1, v] += $9 + $13
}
END {
    printf "\nall-reduce, out of place, median us per call (#wrong summed)\n%10s", "size (B)"
    for (i = 1; i <= nv; i++) printf " %18s", vo[i]
    printf "\n"
    for (j = 1; j <= ns; j++) {
        printf "%10s", so[j]
        for (i = 1; i <= nv; i++) { m = median(t[so[j], vo[i]]); printf " %13s (%2d)", m == "" ? "-" : m, w[so[j], vo[i]] }
        printf "\n"
    }
}
AWK
# rank 0's trace: the proxy's per-call split, medians over the timed calls
for f in "$out"/trace.*; do
    grep -q '\[0\]' "$f" 2>/dev/null || continue
    grep 'p2p allreduce' "$f" | sed 's/.*exchanges, \([0-9.]*\) us: caller.s stream \([0-9.]*\), phases \([0-9.]*\), exchanges \([0-9.]*\).*/\1 \2 \3 \4/' |
        tail -n 50 | sort -n | awk '{ a[NR] = $0 } END { if (NR) print "p2p all-reduce of 8 B, rank 0, median call (us): total, stream wait, phases, exchanges: " a[int((NR + 1) / 2)] }'
done
