#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/cost_growth.sh -- all-reduce (float sum) time against size and against ranks (1..8 on
# this host) from collbench, ROUNDS rounds interleaved over the rank counts, medians beside the
# cost model's prediction for the algorithm the tuner picks (collinfo algos -n N). Markdown out.
# Run from the build tree: bench/cost_growth.sh [ROUNDS (3)] [MAXBYTES (32M)] [RANKS ("1 2 4 8")]
set -eu
rounds=${1:-3} maxb=${2:-32M} ranklist=${3:-"1 2 4 8"}
case $rounds in '' | *[!0-9]* | 0) echo "cost_growth: ROUNDS must be a positive number" >&2; exit 2 ;; esac
[ -x ./collbench ] && [ -x ./collinfo ] ||
    { echo "cost_growth: run it from the build tree" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
r=1
while [ "$r" -le "$rounds" ]; do
    for n in $ranklist; do
        ./collrun -n "$n" ./collbench -b 8 -e "$maxb" -f 4 -n 5 -w 2 -c 0 --csv "$tmp/c.csv" \
            >/dev/null || { echo "cost_growth: collbench -n $n failed" >&2; exit 1; }
        awk -F, -v n="$n" 'NR > 1 { print n, $3, $8 }' "$tmp/c.csv" >>"$tmp/raw"
    done
    r=$((r + 1))
done
for n in $ranklist; do
    ./collinfo algos -n "$n" 2>/dev/null |
        awk -v n="$n" '/^# [a-z_]+:/ { on = $2 == "allreduce:" }
                       on && $1 ~ /^[0-9]+$/ { print n, $1, $3, $4 }' >>"$tmp/model"
done
echo "| ranks | size (B) | measured median (us) | model (us) | model's choice | measured / model |"
echo "|---:|---:|---:|---:|---|---:|"
sort -k1,1n -k2,2n -k3,3g "$tmp/raw" | awk -v m="$tmp/model" '
    BEGIN { while ((getline l < m) > 0) { split(l, f, " "); ch[f[1] " " f[2]] = f[3]; pt[f[1] " " f[2]] = f[4] } }
    function flush() { if (k == "") return; med = c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
        split(k, f, " "); p = pt[k]
        printf "| %d | %d | %.1f | %s | %s | %s |\n", f[1], f[2], med, (p == "" ? "-" : p),
            (ch[k] == "" ? "-" : ch[k]), (p > 0 ? sprintf("%.2f", med / p) : "-") }
    { key = $1 " " $2; if (key != k) { flush(); k = key; c = 0 } v[++c] = $3 }
    END { flush() }'
