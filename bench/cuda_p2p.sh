#!/bin/bash
# SPDX-License-Identifier: MIT
# Device collectives among ranks sharing one GPU: the p2p path (COLL_CUDA_P2P=1 with
# COLL_CUDA_P2P_MIN=0, every size through the ranks' device windows mapped by CUDA IPC) against
# staging through pinned host memory (COLL_CUDA_P2P=0),
# interleaved (p2p, staged, p2p, staged ...), beside the device-to-device copy bandwidth
# (bench/cuda_copy_bw). Raw collbench output goes to OUTDIR, one file per run; the table of
# medians is printed at the end (bench/cuda_p2p_summary.awk).
#
# usage: bench/cuda_p2p.sh [-n NRANKS] [-r ROUNDS] [-e MAXBYTES] [-C "COLL ..."] [-i ITERS]
#                          [BINDIR] [OUTDIR]
#   BINDIR holds collrun, collbench and cuda_copy_bw (default: the build tree, .)
set -u
nranks=2 rounds=2 maxb=256M colls="allreduce reduce_scatter allgather" iters=10
while getopts "n:r:e:C:i:" o; do
    case $o in
        n) nranks=$OPTARG ;;
        r) rounds=$OPTARG ;;
        e) maxb=$OPTARG ;;
        C) colls=$OPTARG ;;
        i) iters=$OPTARG ;;
        *) sed -n '9,11p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
bindir=${1:-.}
out=${2:-cuda_p2p_$(date +%Y-%m-%d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
find_bin() { # name: in BINDIR, else BINDIR/bench
    if [ -x "$bindir/$1" ]; then echo "$bindir/$1"; else echo "$bindir/bench/$1"; fi
}
collrun=$(find_bin collrun) collbench=$(find_bin collbench) copybw=$(find_bin cuda_copy_bw)

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/device.txt" 2>&1
echo "device: $(cat "$out/device.txt")"
"$copybw" -b 1M -e "$maxb" -n 50 >"$out/copy_bw.txt" 2>&1
cat "$out/copy_bw.txt"
for r in $(seq 1 "$rounds"); do
    for c in $colls; do
        for p in 1 0; do
            f="$out/$c.n$nranks.p2p$p.r$r.txt"
            COLL_CUDA_P2P=$p COLL_CUDA_P2P_MIN=0 "$collrun" -n "$nranks" "$collbench" -M cuda -C "$c" -b 8 -e "$maxb" \
                -f 4 -w 2 -n "$iters" -c 1 >"$f" 2>&1
            echo "round $r $c COLL_CUDA_P2P=$p: exit $? ($(grep -c '^ *[0-9]' "$f") sizes)"
        done
    done
done
awk -f "$here/median.awk" -f "$here/cuda_p2p_summary.awk" "$out"/*.r*.txt
