#!/bin/sh
# SPDX-License-Identifier: MIT
# algo_sweep.sh -- how close the tuner's choice comes to the best forced algorithm. For one
# scenario (one host, or H hosts in network namespaces with optionally shaped links) it runs
# collbench over a size sweep once per forced algorithm and once with the tuner's own choice,
# interleaved in rounds, then writes raw.csv, medians.csv, summary.csv and busbw.png.
# It runs one scenario per call and draws no conclusions; see bench/README.md.
set -u

usage() {
    cat << 'EOF'
usage: algo_sweep.sh [options]
Scenario (one per call):
  --hosts H             hosts (default 1: all ranks on this host, shared memory)
  --ranks-per-host R    ranks per host (default 4); --ranks R is the same
  --rate RATE           limit every host link to RATE each way, tc syntax (1gbit, 100mbit);
                        needs H >= 2, root and network namespaces
  --burst SIZE          tbf burst of --rate, tc syntax (default 128kb; see bench/README.md)
  --delay TIME          one-way delay per host link (100us); needs the netem qdisc, refused
                        where it is missing
  --emulate             H >= 2 without namespaces: hosts emulated by COLL_HOSTID on loopback
                        (no --rate or --delay)
  --scenario NAME       label in the CSVs (default HxR, plus -RATE, -DELAY or -emul)
Sweep:
  --coll C              allreduce|reduce_scatter|allgather|broadcast|reduce|alltoall (allreduce)
  --algos A,B,...       forced algorithms (default: what collinfo -a lists for C)
  --min SIZE            smallest size, K/M/G suffixes as collbench (default 8)
  --max SIZE            largest size (default 256M)
  --factor F            size step factor (default 2)
  --sizes S1,S2,...     these sizes instead of --min/--max/--factor
  --rounds N            rounds; each runs every algorithm once, in the same order (default 3)
  --iters N             timed iterations of the small sizes (default 200)
  --iter-bytes SIZE     larger sizes get SIZE / size iterations ... (default 256M)
  --min-iters N         ... but at least N (default 5)
  --warmup N            collbench -w (default: a quarter of a run's iterations, 1 to 20)
  --dtype T, --op O     collbench -d and -o (default float, sum)
  --check               also check results (collbench -c 1; default -c 0, timing only)
  --timeout SEC         limit per collbench job (default 3600)
  --out DIR             output directory (default sweep-SCENARIO-COLL; must not hold raw.csv)
  --builddir DIR        where collbench and collinfo are (default: the directory above this
                        script)
  --report-only         only redo medians.csv, summary.csv and busbw.png from DIR/raw.csv
Sizes are collbench sizes: total bytes of one rank's larger buffer (the whole vector for
allreduce). gnuplot is required (Debian: apt-get install gnuplot-nox).
EOF
}

die() {
    echo "algo_sweep.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/sweep_lib.sh
. "$(dirname "$0")/sweep_lib.sh"

# ---- options ----
hosts=1
nper=4
rate=
burst=128kb
delay=
emulate=0
scenario=
coll=allreduce
algos=
min=8
max=256M
factor=2
sizes=
rounds=3
iters=200
iter_bytes=256M
min_iters=5
warmup=
dtype=float
op=sum
check=0
timeout=3600
out=
builddir=$(cd "$(dirname "$0")/.." && pwd)
report_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --hosts | --ranks-per-host | --ranks | --rate | --burst | --delay | --scenario | --coll | --algos | \
        --min | --max | --factor | --sizes | --rounds | --iters | --iter-bytes | --min-iters | \
        --warmup | --dtype | --op | --timeout | --out | --builddir)
        [ $# -ge 2 ] || die "$1 needs a value" ;;
    esac
    case $1 in
    --hosts) hosts=$2 ;;
    --ranks-per-host | --ranks) nper=$2 ;;
    --rate) rate=$2 ;;
    --burst) burst=$2 ;;
    --delay) delay=$2 ;;
    --emulate) emulate=1 ;;
    --scenario) scenario=$2 ;;
    --coll) coll=$2 ;;
    --algos) algos=$(echo "$2" | tr ',' ' ') ;;
    --min) min=$2 ;;
    --max) max=$2 ;;
    --factor) factor=$2 ;;
    --sizes) sizes=$(echo "$2" | tr ',' ' ') ;;
    --rounds) rounds=$2 ;;
    --iters) iters=$2 ;;
    --iter-bytes) iter_bytes=$2 ;;
    --min-iters) min_iters=$2 ;;
    --warmup) warmup=$2 ;;
    --dtype) dtype=$2 ;;
    --op) op=$2 ;;
    --check) check=1 ;;
    --timeout) timeout=$2 ;;
    --out) out=$2 ;;
    --builddir) builddir=$2 ;;
    --report-only) report_only=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "algo_sweep.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    case $1 in
    --report-only | --emulate | --check) shift ;;
    *) shift 2 ;;
    esac
done
for v in "$hosts" "$nper" "$factor" "$rounds" "$iters" "$min_iters" "${warmup:-1}" "$timeout"; do
    case $v in
    '' | *[!0-9]*) die "not a number: $v" ;;
    esac
done
if [ "$hosts" -lt 1 ] || [ "$nper" -lt 1 ] || [ "$rounds" -lt 1 ]; then
    die "--hosts, --ranks-per-host and --rounds must be at least 1"
fi
[ "$factor" -ge 2 ] || die "--factor must be >= 2"
if [ -n "$rate$delay" ] && [ "$hosts" -lt 2 ]; then
    die "--rate and --delay shape links between hosts: they need --hosts 2 or more"
fi
if [ "$emulate" -eq 1 ] && [ -n "$rate$delay" ]; then
    die "--emulate runs on loopback, which cannot be shaped: drop --rate/--delay"
fi
if [ -z "$scenario" ]; then
    scenario=${hosts}x$nper${rate:+-$rate}${delay:+-$delay}
    [ "$emulate" -eq 1 ] && scenario=$scenario-emul
fi
[ -n "$out" ] || out=sweep-$scenario-$coll
if ! command -v gnuplot > /dev/null 2>&1; then
    die "gnuplot is not installed; it draws busbw.png (Debian: apt-get install gnuplot-nox)"
fi

# ---- report: medians, summary, plot, max ratio (from raw.csv alone) ----

# medians.csv: one row per (algo, bytes); ran is what ran in every round, "" if unknown.
report_medians() {
    awk -F, "$SWEEP_AWK_MEDIAN"'
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        {
            k = $c["algo"] SUBSEP $c["bytes"]
            if (!(k in n)) { order[++nk] = k; sc[k] = $c["scenario"]; co[k] = $c["coll"] }
            n[k]++; t[k] = t[k] " " $c["time_us"]; b[k] = b[k] " " $c["busbw"]
            r = $c["ran"]
            if (!(k in ran)) ran[k] = r; else if (ran[k] != r) ran[k] = ran[k] "|" r
        }
        END {
            print "scenario,coll,algo,bytes,rounds,median_time_us,median_busbw,ran"
            for (i = 1; i <= nk; i++) {
                k = order[i]; split(k, kk, SUBSEP)
                printf "%s,%s,%s,%s,%d,%.3f,%.6g,%s\n", sc[k], co[k], kk[1], kk[2], n[k],
                    median(t[k]), median(b[k]), ran[k]
            }
        }' "$out/raw.csv" > "$out/medians.csv"
}

# summary.csv: one row per size. A forced algorithm counts for a size only where it is the one
# that ran (or what ran is unknown); the others are listed in not_run and left empty.
report_summary() {
    awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        {
            a = $c["algo"]; by = $c["bytes"] + 0; sc = $c["scenario"]; co = $c["coll"]
            if (!(by in seenb)) { seenb[by] = 1; sizes[++ns] = by }
            if (a != "tuner" && !(a in seena)) { seena[a] = 1; alg[++na] = a }
            k = a SUBSEP by; tm[k] = $c["median_time_us"]; ran[k] = $c["ran"]
        }
        END {
            printf "scenario,coll,bytes,best_algo,best_us,tuner_us,tuner_ran,tuner_over_best,"
            printf "choice_us,choice_over_best,not_run"
            for (j = 1; j <= na; j++) printf ",%s_us", alg[j]
            printf "\n"
            for (i = 1; i <= ns; i++) {
                by = sizes[i]; best = ""; bt = 0; nr = ""; cells = ""
                for (j = 1; j <= na; j++) {
                    k = alg[j] SUBSEP by; cell = ""
                    if (k in tm) {
                        if (ran[k] == "" || ran[k] == alg[j]) {
                            cell = tm[k]
                            if (best == "" || tm[k] + 0 < bt) { best = alg[j]; bt = tm[k] + 0 }
                        } else nr = nr (nr == "" ? "" : " ") alg[j] "->" ran[k]
                    }
                    cells = cells "," cell
                }
                k = "tuner" SUBSEP by
                tt = (k in tm) ? tm[k] : ""; tr = (k in ran) ? ran[k] : ""
                ratio = (tt != "" && best != "" && bt > 0) ? sprintf("%.3f", tt / bt) : ""
                # The choice judged apart from the noise of the tuner runs: the forced run of the
                # algorithm the tuner ran (when it ran one algorithm, forced as itself).
                k = tr SUBSEP by; ct = ""; cr = ""
                if (tr != "" && (k in tm) && (ran[k] == "" || ran[k] == tr)) {
                    ct = tm[k]; cr = (bt > 0) ? sprintf("%.3f", ct / bt) : ""
                }
                printf "%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s%s\n", sc, co, by, best,
                    best == "" ? "" : sprintf("%.3f", bt), tt, tr, ratio, ct, cr, nr, cells
            }
        }' "$out/medians.csv" > "$out/summary.csv"
}

# The summary as a table, then the worst tuner/best over sizes of more than 0 bytes.
report_print() {
    awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i
                  printf "%12s  %-20s %12s  %-20s %12s  %7s  %7s\n", "bytes", "best forced", "us",
                      "tuner ran", "us", "ratio", "choice"; next }
        {
            printf "%12s  %-20s %12s  %-20s %12s  %7s  %7s%s\n", $c["bytes"], $c["best_algo"],
                $c["best_us"], $c["tuner_ran"], $c["tuner_us"], $c["tuner_over_best"],
                $c["choice_over_best"],
                $c["not_run"] == "" ? "" : "  (not run: " $c["not_run"] ")"
            if ($c["bytes"] > 0 && $c["tuner_over_best"] != "" && $c["tuner_over_best"] + 0 > worst) {
                worst = $c["tuner_over_best"] + 0
                w = sprintf("%s B: tuner %s %s us, best %s %s us", $c["bytes"], $c["tuner_ran"],
                    $c["tuner_us"], $c["best_algo"], $c["best_us"])
            }
            if ($c["bytes"] > 0 && $c["choice_over_best"] != "" && $c["choice_over_best"] + 0 > cworst) {
                cworst = $c["choice_over_best"] + 0
                cw = sprintf("%s B: %s %s us forced, best %s %s us", $c["bytes"], $c["tuner_ran"],
                    $c["choice_us"], $c["best_algo"], $c["best_us"])
            }
        }
        END {
            if (w == "") print "max ratio: n/a (no size with both a tuner time and a forced time)"
            else printf "max ratio: %.3f (tuner/best at %s)\n", worst, w
            if (cw != "") printf "max choice ratio: %.3f (the tuner'"'"'s choice forced/best at %s)\n", cworst, cw
        }' "$out/summary.csv"
}

# busbw.png: median busbw against size, one curve per forced algorithm (points where it did
# not run left out) and a thick one for the tuner.
report_plot() {
    pdir=$out/plotdata
    rm -rf "$pdir"
    mkdir -p "$pdir" || die "cannot create $pdir"
    awk -F, -v d="$pdir" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["bytes"] + 0 <= 0 { next }
        $c["algo"] != "tuner" && $c["ran"] != "" && $c["ran"] != $c["algo"] { next }
        {
            a = $c["algo"]
            if (!(a in seen)) { seen[a] = 1; print a > (d "/list") }
            print $c["bytes"], $c["median_busbw"] > (d "/" a ".dat")
            b = $c["bytes"] + 0
            if (lo == "" || b < lo) lo = b
            if (b > hi) hi = b
        }
        END { if (lo != "") print lo / 1.5, hi * 1.5 > (d "/xrange") }' "$out/medians.csv"
    [ -s "$pdir/list" ] || die "nothing to plot in $out/medians.csv"
    plots=
    while read -r a; do
        style="with linespoints lw 1.5"
        [ "$a" = tuner ] && style="with linespoints lw 4 dt 2 lc rgb 'black'"
        plots="$plots${plots:+, }'$pdir/$a.dat' using 1:2 $style title '$a'"
    done < "$pdir/list"
    term=$(sweep_png_term)
    read -r xlo xhi < "$pdir/xrange"
    title=$(awk -F, 'NR == 2 { print $2 ", " $1; exit }' "$out/medians.csv")
    gnuplot << EOF || die "gnuplot failed"
set terminal $term
set output '$out/busbw.png'
set title '$title: median bus bandwidth per algorithm'
set xlabel 'size (bytes)'
set ylabel 'bus bandwidth (GB/s)'
set logscale x 2
set format x '%.0b%B'
set xrange [$xlo:$xhi]
set yrange [0:*]
set grid
set key left top
plot $plots
EOF
    rm -rf "$pdir"
}

report() {
    [ -s "$out/raw.csv" ] || die "no results in $out/raw.csv"
    report_medians
    report_summary
    report_plot
    report_print
    echo "wrote $out/raw.csv $out/medians.csv $out/summary.csv $out/busbw.png"
}

if [ "$report_only" -eq 1 ]; then
    report
    exit 0
fi

# ---- checks and plan ----
bench=${COLLBENCH:-$builddir/collbench}
info=${COLLINFO:-$builddir/collinfo}
[ -x "$bench" ] || die "no collbench at $bench (build first, or --builddir)"
[ -x "$info" ] || die "no collinfo at $info (build first, or --builddir)"
if [ -e "$out/raw.csv" ]; then
    die "$out/raw.csv exists: choose another --out"
fi
if [ -n "${COLL_ALGO:-}" ]; then
    echo "algo_sweep.sh: ignoring COLL_ALGO=$COLL_ALGO: the tuner runs must choose by themselves"
    unset COLL_ALGO
fi
if [ -z "$algos" ]; then
    algos=$("$info" -a | awk -v c="$coll" '$1 !~ /^#/ && ("," $2 ",") ~ ("," c ",") { printf "%s%s", sep, $1; sep = " " }')
    [ -n "$algos" ] || die "collinfo -a lists no algorithm for $coll"
fi

# Bands: consecutive sizes with the same iteration count, one collbench run each
# ("first last factor iters"); an explicit --sizes list gives one band per size.
bands=$(awk -v min="$min" -v max="$max" -v f="$factor" -v list="$sizes" -v it="$iters" \
    -v ib="$iter_bytes" -v mi="$min_iters" '
    function bytes(s,    v, u) {
        if (s !~ /^[0-9]+(\.[0-9]+)?[kKmMgG]?$/) { print "bad size: " s > "/dev/stderr"; exit 1 }
        v = s + 0; u = substr(s, length(s))
        if (u ~ /[kK]/) v *= 1024; else if (u ~ /[mM]/) v *= 1048576; else if (u ~ /[gG]/) v *= 1073741824
        return int(v)
    }
    function niters(s,    n) {
        n = s > 0 ? int((bytes(ib) + s - 1) / s) : it
        return n > it ? it : (n < mi ? mi : n)
    }
    BEGIN {
        if (mi > it) mi = it
        if (list != "") {
            n = split(list, l, " ")
            for (i = 1; i <= n; i++) { s = bytes(l[i]); print s, s, 2, niters(s) }
            exit 0
        }
        lo = bytes(min); hi = bytes(max)
        if (lo > hi) { print "--min is above --max" > "/dev/stderr"; exit 1 }
        for (s = lo; s <= hi; s = (s == 0 ? 1 : s * f)) {
            n = niters(s)
            if (first != "" && n != bn) { print first, last, f, bn; first = "" }
            if (first == "") { first = s; bn = n }
            last = s
        }
        print first, last, f, bn
    }') || die "bad sizes"
nbands=$(echo "$bands" | wc -l)

# ---- scenario ----
# shellcheck source=tests/tools/netns_lib.sh
. "$(dirname "$0")/../tests/tools/netns_lib.sh"
NETNS_TIMEOUT=$timeout
NETNS_BURST=$burst
if [ "$hosts" -eq 1 ] || [ "$emulate" -eq 1 ]; then
    netns_emulate "$hosts"
    where="$hosts host(s), ranks on loopback"
    [ "$hosts" -gt 1 ] && where="$hosts hosts emulated by COLL_HOSTID on loopback"
else
    netns_create "$hosts" "$rate" "$delay"
    case $? in
    0) ;;
    77) die "network namespaces unavailable ($NETNS_WHY); --emulate runs without them" ;;
    *) die "$NETNS_WHY" ;;
    esac
    where="$hosts network namespaces on a bridge, links ${rate:-unshaped}"
    [ -n "$rate" ] && where="$where (tbf burst $burst)"
    [ -n "$delay" ] && where="$where, delay $delay"
fi
np=$((hosts * nper))
mkdir -p "$out/logs" || die "cannot create $out"
out=$(cd "$out" && pwd)
{
    echo "scenario $scenario: $where, $nper rank(s) per host, $np ranks"
    echo "collective $coll, dtype $dtype, op $op, algorithms: $algos and tuner, $rounds round(s)"
    echo "bands (first last factor iters):"
    echo "$bands"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -n), kernel $(uname -r), $(nproc) cpu(s)"
    git -C "$(dirname "$0")" describe --always --dirty 2> /dev/null | sed 's/^/source /'
    env | grep '^COLL_' | sed 's/^/env /'
    "$info" -p
} > "$out/info.txt"
sed -n '1,2p' "$out/info.txt"
echo "$((rounds * ($(echo "$algos" | wc -w) + 1) * nbands)) collbench runs into $out"

# ---- runs ----
echo "scenario,coll,algo,bytes,round,time_us,busbw,ip_time_us,ip_busbw,nranks,iters,ran" > "$out/raw.csv"
failed=0

# Rows of one run's collbench CSV for raw.csv; "ran" is what rank 0 logged building the
# schedule of that count (DEBUG ALGO lines), first row kept when rounding repeats a size.
append_rows() { # algo round iters dir
    cat "$4"/debug.* 2> /dev/null | grep ' \[0\] ' > "$4/rank0.debug"
    awk -F, -v sc="$scenario" -v co="$coll" -v a="$1" -v r="$2" -v it="$3" -v dbg="$4/rank0.debug" '
        FILENAME == dbg {
            for (i = 1; i < NF - 4; i++) if ($i ~ /:$/ && $(i + 1) == co && $(i + 2) == "of") {
                k = $(i + 3) SUBSEP $(i + 5); sub(/,$/, "", k); n = substr($i, 1, length($i) - 1)
                if (index("+" ran[k] "+", "+" n "+") == 0) ran[k] = ran[k] (ran[k] == "" ? "" : "+") n
            }
            next
        }
        FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        {
            if ($c["size"] in done) next
            done[$c["size"]] = 1
            k = $c["count"] SUBSEP $c["type"]
            print sc "," co "," a "," $c["size"] "," r "," $c["oop_time_us"] "," $c["oop_busbw_gbs"] \
                "," $c["ip_time_us"] "," $c["ip_busbw_gbs"] "," $c["nranks"] "," it "," ran[k]
        }' FS=' ' "$4/rank0.debug" FS=, "$4/bench.csv" >> "$out/raw.csv"
}

round=1
while [ "$round" -le "$rounds" ]; do
    for a in tuner $algos; do
        b=0
        # A here-document, not a pipe: the loop must run in this shell (netns_run state).
        while read -r first last f n; do
            b=$((b + 1))
            dir=$out/logs/r$round-$a-b$b
            mkdir -p "$dir"
            force=
            [ "$a" = tuner ] || force="-A $a"
            # Warm-up: the first iterations after a size change pay for page faults and cold
            # caches, which otherwise land on whichever algorithm runs first.
            w=$warmup
            if [ -z "$w" ]; then
                w=$((n / 4))
                [ "$w" -ge 1 ] || w=1
                [ "$w" -le 20 ] || w=20
            fi
            t0=$(date +%s)
            # shellcheck disable=SC2086 # $force is empty or two words
            COLL_DEBUG=debug COLL_DEBUG_FILE="$dir/debug.%p" netns_run "$nper" "$dir" \
                "$bench" -C "$coll" -b "$first" -e "$last" -f "$f" -n "$n" -w "$w" \
                -c "$check" -d "$dtype" -o "$op" --csv "$dir/bench.csv" $force
            st=$?
            secs=$(($(date +%s) - t0))
            if [ "$st" -eq 0 ] && [ -s "$dir/bench.csv" ]; then
                append_rows "$a" "$round" "$n" "$dir"
                echo "round $round/$rounds  $a  $first..$last B  n=$n  ${secs}s"
            else
                echo "round $round/$rounds  $a  $first..$last B  FAILED (status $st): $dir"
                echo "$dir status $st" >> "$out/failures.txt"
            fi
        done << EOF
$bands
EOF
    done
    round=$((round + 1))
done
[ -s "$out/failures.txt" ] && failed=1

report
if [ "$failed" -ne 0 ]; then
    echo "algo_sweep.sh: some runs failed, see $out/failures.txt" >&2
    exit 1
fi
exit 0
