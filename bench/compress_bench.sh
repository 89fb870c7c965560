#!/bin/sh
# SPDX-License-Identifier: MIT
# compress_bench.sh -- runs bench/compress_bench (dense / top-k / 1-bit step time and wire
# bytes) in two scenarios: 2 ranks on one host (shared memory), and 2 hosts as network
# namespaces with every host link shaped to RATE (default 1gbit). Each scenario runs ROUNDS
# times; writes raw.csv, medians.csv (median step time per scenario, mode and size) and
# step_time.png. The shaped scenario needs root and namespaces; it is skipped (said so) without.
#   usage: compress_bench.sh [--out DIR] [--rounds N] [--rate RATE] [-- compress_bench args]
set -u
out=compress-bench
rounds=3
rate=1gbit
builddir=$(cd "$(dirname "$0")/.." && pwd)
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --builddir) builddir=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: compress_bench.sh [--out DIR] [--rounds N] [--rate RATE] [-- ARGS]" >&2; exit 2 ;;
    esac
done
bench=$builddir/bench/compress_bench
[ -x "$bench" ] || { echo "compress_bench.sh: $bench not built (make bench/compress_bench)" >&2; exit 1; }
# shellcheck source=tests/tools/netns_lib.sh
. "$(dirname "$0")/../tests/tools/netns_lib.sh"
trap netns_cleanup EXIT INT TERM
mkdir -p "$out" || exit 1
echo "scenario,round,mode,count,nranks,step_ms,wire_bytes,dense_bytes,saving" > "$out/raw.csv"

args=$* # compress_bench options: no spaces inside one

run_scenario() { # NAME RANKS_PER_HOST
    r=1
    while [ "$r" -le "$rounds" ]; do
        dir=$out/$1.r$r
        # shellcheck disable=SC2086 # $args: compress_bench's options, one word each
        if ! netns_run "$2" "$dir" "$bench" $args; then
            echo "compress_bench.sh: $1 round $r failed, see $dir" >&2
            return 1
        fi
        grep '^[a-z]*,[0-9]' "$dir/rank0.log" | sed "s/^/$1,$r,/" >> "$out/raw.csv"
        r=$((r + 1))
    done
}

# one host, 2 ranks: shared memory
netns_emulate 1
run_scenario 1host 2 || exit 1
# 2 hosts, 1 rank each, links shaped to $rate
if netns_create 2 "$rate"; then
    run_scenario "2hosts-$rate" 1 || exit 1
else
    echo "compress_bench.sh: shaped scenario skipped: $NETNS_WHY"
fi

# medians over rounds, then a bar chart of step time (log scale)
awk -F, 'NR > 1 { k = $1 "," $3 "," $4; v[k] = v[k] " " $6; w[k] = $7 "," $8 "," $9 }
END {
    for (k in v) {
        n = split(substr(v[k], 2), a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        print k "," m "," w[k]
    }
}' "$out/raw.csv" | sort -t, -k1,1 -k3,3n -k2,2 > "$out/medians.tmp"
{ echo "scenario,mode,count,step_ms_median,wire_bytes,dense_bytes,saving"; cat "$out/medians.tmp"; } \
    > "$out/medians.csv" && rm -f "$out/medians.tmp"
cat "$out/medians.csv"
if command -v gnuplot > /dev/null 2>&1; then
    awk -F, 'NR > 1 { key = $1 " " ($3 / 1e6) "M"; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
                      t[key, $2] = $4 }
             END { print "case dense topk onebit"
                   for (i = 1; i <= n; i++) { k = order[i]; gsub(" ", "_", k)
                       print k, t[order[i], "dense"], t[order[i], "topk"], t[order[i], "onebit"] } }' \
        "$out/medians.csv" > "$out/plot.dat"
    gnuplot << EOG
set terminal png size 900,500 noenhanced
set output "$out/step_time.png"
set title "compressed gradient averaging, 2 ranks: median step time (ms, log scale)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "step time (ms)"
set xtics rotate by -20
set key top left
plot "$out/plot.dat" using 2:xtic(1) title "dense", "" using 3 title "top-k 1%", "" using 4 title "1-bit"
EOG
    echo "compress_bench.sh: wrote $out/step_time.png"
else
    echo "compress_bench.sh: gnuplot not found: no plot"
fi
