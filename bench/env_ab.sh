#!/bin/sh
# SPDX-License-Identifier: MIT
# One environment variable's two values side by side: collbench runs interleaved A B A B ... for
# ROUNDS rounds at NRANKS ranks (float sum, sizes MIN..MAX by 4x, 10 timed calls after 3 warm-up
# calls, results checked), and prints per collective and size the median busbw of each value,
# out of place and in place, and the ratio B / A. AB_ARGS adds collbench options to both sides
# (AB_ARGS="-R 1": registered buffers).
# Usage (from the build tree):
#   bench/env_ab.sh VAR A B [ROUNDS (3)] [COLLS] [MIN (64K)] [MAX (256M)] [NRANKS (2)]
# e.g. bench/env_ab.sh COLL_DIRECT_THP 0 1 5 allreduce 1M 256M
set -eu
[ $# -ge 3 ] || { sed -n '3,10p' "$0"; exit 2; }
var=$1
va=$2
vb=$3
rounds=${4:-3}
colls=${5:-"allreduce allgather reduce_scatter"}
min=${6:-64K}
max=${7:-256M}
nranks=${8:-2}
top=${top_builddir:-.}
here=$(dirname "$0")
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for r in $(seq 1 "$rounds"); do
    for c in $colls; do
        for v in "$va" "$vb"; do
            env "$var=$v" "$top/collrun" -n "$nranks" "$top/collbench" -C "$c" -b "$min" -e "$max" \
                -f 4 -n 10 -w 3 -c 1 ${AB_ARGS:-} |
                awk -v c="$c" -v v="$v" '/^ +[0-9]/ && $9 == 0 && $13 == 0 { print c, v, $1, $8, $12 }' >>"$raw"
        done
    done
done
printf '| collective | size (B) | %s=%s oop | %s=%s oop | ratio | %s=%s ip | %s=%s ip | ratio |\n' \
    "$var" "$va" "$var" "$vb" "$var" "$va" "$var" "$vb"
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
awk -v va="$va" -v vb="$vb" -f "$here/median.awk" -f /dev/stdin "$raw" <<'AWK' |
{ k = $1 " " $3; keys[k] = 1; o[k, $2] = o[k, $2] " " $4; i[k, $2] = i[k, $2] " " $5 }
END { for (k in keys) { split(k, p, " ");
        a = median(o[k, va]); b = median(o[k, vb]); c = median(i[k, va]); d = median(i[k, vb]);
        printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", p[1], p[2], a, b, b / a, c, d, d / c } }
AWK
    sort -t'|' -k2,2 -k3,3n
