#!/bin/sh
# SPDX-License-Identifier: MIT
# Small blocking all-reduces through the small-call slots (COLL_SMALL_MAX=1k, the default)
# against the scheduled algorithms (COLL_SMALL_MAX=0): collbench runs interleaved A B A B ... for
# ROUNDS rounds at each rank count, float sum, 8 B - 1 KiB, and the median time (us) of each,
# out of place, per size. Usage (from the build tree):
#   bench/small_compare.sh [ROUNDS] [RANK COUNTS] [ITERS]
set -eu
rounds=${1:-5}
counts=${2:-"2 4 8"}
iters=${3:-20000}
top=${top_builddir:-.}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for r in $(seq 1 "$rounds"); do
    for n in $counts; do
        for m in 0 1k; do
            COLL_SMALL_MAX=$m "$top/collrun" -n "$n" "$top/collbench" -b 8 -e 1024 -f 4 \
                -n "$iters" -w 100 -c 1 |
                awk -v n="$n" -v m="$m" '/^ +[0-9]/ && $9 == 0 { print n, m, $1, $6 }' >>"$raw"
        done
    done
done
printf '| ranks | size (B) | scheduled (us) | small-call slots (us) | speed-up |\n'
printf '|---:|---:|---:|---:|---:|\n'
awk '
function med(s,   a, n, t, i, j) { n = split(s, a, " ");
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
{ k = $1 " " $3; keys[k] = 1; t[k, $2] = t[k, $2] " " $4 }
END { for (k in keys) { split(k, p, " "); a = med(t[k, "0"]); b = med(t[k, "1k"]);
        printf "| %d | %d | %.2f | %.2f | %.2f |\n", p[1], p[2], a, b, a / b } }' "$raw" |
    sort -t'|' -k2,2n -k3,3n
