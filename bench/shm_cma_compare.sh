#!/bin/sh
# SPDX-License-Identifier: MIT
# Single-copy (COLL_SHM_CMA_MIN=64k, the default) against ring-only shm transfers
# (COLL_SHM_CMA_MIN=0): collbench runs interleaved A B A B ... for ROUNDS rounds, 2 ranks, float
# sum, and the median busbw of each (out-of-place and in-place) per size.
# Usage (from the build tree): bench/shm_cma_compare.sh [ROUNDS] [COLLS] [MIN] [MAX]
set -eu
rounds=${1:-3}
colls=${2:-"allreduce allgather reduce_scatter"}
min=${3:-64K}
max=${4:-256M}
top=${top_builddir:-.}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for r in $(seq 1 "$rounds"); do
    for c in $colls; do
        for m in 0 64k; do
            COLL_SHM_CMA_MIN=$m "$top/collrun" -n 2 "$top/collbench" -C "$c" -b "$min" -e "$max" \
                -f 4 -n 10 -w 3 -c 1 |
                awk -v c="$c" -v m="$m" '/^ +[0-9]/ && $9 == 0 && $13 == 0 { print c, m, $1, $8, $12 }' >>"$raw"
        done
    done
done
printf '| collective | size (B) | ring only oop | single-copy oop | ratio | ring only ip | single-copy ip | ratio |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
sort -k1,1 -k3,3n -k2,2 "$raw" | awk '
function med(s,   a, n, t, i, j) { n = split(s, a, " ");
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
{ k = $1 " " $3; keys[k] = 1; o[k, $2] = o[k, $2] " " $4; i[k, $2] = i[k, $2] " " $5 }
END { for (k in keys) { split(k, p, " ");
        a = med(o[k, "0"]); b = med(o[k, "64k"]); c = med(i[k, "0"]); d = med(i[k, "64k"]);
        printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", p[1], p[2], a, b, b / a, c, d, d / c } }' |
    sort -t'|' -k2,2 -k3,3n
