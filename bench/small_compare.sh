#!/bin/sh
# SPDX-License-Identifier: MIT
# Small blocking collectives through the small-call slots against what serves them without the
# slots: collbench runs interleaved A B A B ... for ROUNDS rounds at each rank count, float sum,
# and prints the median time (us) of each, out of place, per collective and size.
#   allreduce                  COLL_SMALL_MAX=0 against 1k (the default), 8 B - 1 KiB;
#                              (sizes double)
#   allgather, reduce_scatter  COLL_SMALL_AGRS_MAX=0 against 32k (the default), 1 KiB - 32 KiB
#                              of input (collbench's all-gather size is the output: RANKS times
#                              that); without the slots they take cross-memory attach or the
#                              engine.
# Usage (from the build tree):
#   bench/small_compare.sh [ROUNDS (5)] [RANK COUNTS ("2 4 8")] [ITERS (20000)] [COLLS]
set -eu
rounds=${1:-5}
counts=${2:-"2 4 8"}
iters=${3:-20000}
colls=${4:-"allreduce allgather reduce_scatter"}
top=${top_builddir:-.}
here=$(dirname "$0")
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for r in $(seq 1 "$rounds"); do
    for n in $counts; do
        for c in $colls; do
            case $c in
            allreduce) var=COLL_SMALL_MAX on=1k min=8 max=1024 ;;
            allgather) var=COLL_SMALL_AGRS_MAX on=32k min=$((1024 * n)) max=$((32768 * n)) ;;
            *) var=COLL_SMALL_AGRS_MAX on=32k min=1024 max=32768 ;;
            esac
            for m in 0 "$on"; do
                env "$var=$m" "$top/collrun" -n "$n" "$top/collbench" -C "$c" -b "$min" \
                    -e "$max" -f 2 -n "$iters" -w 100 -c 1 |
                    awk -v n="$n" -v c="$c" -v s="$([ "$m" = 0 ] && echo off || echo on)" \
                        '/^ +[0-9]/ && $9 == 0 { print c, n, s, $1, $6 }' >>"$raw"
            done
        done
    done
done
printf '| collective | ranks | size (B) | without the slots (us) | small-call slots (us) | speed-up |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
awk -f "$here/median.awk" -f /dev/stdin "$raw" <<'AWK' | sort -t'|' -k2,2 -k3,3n -k4,4n
{ k = $1 " " $2 " " $4; keys[k] = 1; t[k, $3] = t[k, $3] " " $5 }
END { for (k in keys) { split(k, p, " "); a = median(t[k, "off"]); b = median(t[k, "on"]);
        printf "| %s | %d | %d | %.2f | %.2f | %.2f |\n", p[1], p[2], p[3], a, b, a / b } }
AWK
