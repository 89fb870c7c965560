#!/bin/sh
# SPDX-License-Identifier: MIT
# train_sweep.sh -- DDP step time with communication overlapped with backward against the same
# step with a blocking all-reduce after backward. For each scenario (one host, or H hosts in
# network namespaces with tbf-shaped links, as algo_sweep.sh) it runs train_bench once per mode,
# interleaved (blocking, overlapped, blocking, ...) in rounds, for each emulated backward
# (sleep, spin), then writes raw.csv (one row per step), medians.csv, summary.csv and
# step_time.png, and prints overlapped/blocking from the medians. It draws no conclusions and
# compresses nothing (--comm takes only dense so far); see bench/README.md.
set -u

usage() {
    cat << 'EOF'
usage: train_sweep.sh [options]
Scenarios:
  --scenarios LIST      space or comma separated HxR[-RATE]: H hosts of R ranks, links limited
                        to RATE each way (tc syntax); H >= 2 needs root and network namespaces
                        (default "1x2 2x1-1gbit")
  --burst SIZE          tbf burst of the rate (default 128kb)
Model (train_bench options):
  --layers N            layers, one bucket each (default 8)
  --layer-mib M         fp32 gradient MiB per layer (default 2)
  --compute-ms T        emulated backward per layer, ms (default 25)
  --compute LIST        emulated backward: sleep (GPU-like), spin (CPU training), or both
                        (default sleep,spin)
  --comm LIST           bucket communication; only dense exists so far (default dense)
  --steps S             timed steps per run, after one warm-up step (default 8)
Sweep:
  --rounds N            rounds; each runs blocking then overlapped once per scenario and
                        compute (default 3)
  --timeout SEC         limit per train_bench job (default 300)
  --out DIR             output directory (default train-sweep; must not hold raw.csv)
  --builddir DIR        where train_bench is (default: the directory above this script)
  --report-only         only redo medians.csv, summary.csv and step_time.png from DIR/raw.csv
Medians are over every timed step of every round. gnuplot is required (Debian: apt-get
install gnuplot-nox).
EOF
}

die() {
    echo "train_sweep.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/sweep_lib.sh
. "$(dirname "$0")/sweep_lib.sh"

# ---- options ----
scenarios="1x2 2x1-1gbit"
burst=128kb
layers=8
layer_mib=2
compute_ms=25
computes="sleep spin"
comms=dense
steps=8
rounds=3
timeout=300
out=train-sweep
builddir=$(cd "$(dirname "$0")/.." && pwd)
report_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --scenarios | --burst | --layers | --layer-mib | --compute-ms | --compute | --comm | \
        --steps | --rounds | --timeout | --out | --builddir)
        [ $# -ge 2 ] || die "$1 needs a value" ;;
    esac
    case $1 in
    --scenarios) scenarios=$(echo "$2" | tr ',' ' ') ;;
    --burst) burst=$2 ;;
    --layers) layers=$2 ;;
    --layer-mib) layer_mib=$2 ;;
    --compute-ms) compute_ms=$2 ;;
    --compute) computes=$(echo "$2" | tr ',' ' ') ;;
    --comm) comms=$(echo "$2" | tr ',' ' ') ;;
    --steps) steps=$2 ;;
    --rounds) rounds=$2 ;;
    --timeout) timeout=$2 ;;
    --out) out=$2 ;;
    --builddir) builddir=$2 ;;
    --report-only) report_only=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "train_sweep.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    case $1 in
    --report-only) shift ;;
    *) shift 2 ;;
    esac
done
for v in "$layers" "$steps" "$rounds" "$timeout"; do
    case $v in
    '' | *[!0-9]*) die "not a number: $v" ;;
    esac
done
if [ "$rounds" -lt 1 ] || [ "$steps" -lt 1 ]; then
    die "--rounds and --steps must be at least 1"
fi
for c in $computes; do
    case $c in
    sleep | spin) ;;
    *) die "--compute takes sleep and/or spin, not $c" ;;
    esac
done
for c in $comms; do
    # top-k and 1-bit compression will be added here, and in train_bench --comm
    [ "$c" = dense ] || die "--comm $c: only dense is implemented"
done
for s in $scenarios; do
    case $s in
    [1-9]*x[1-9]* | [1-9]*x[1-9]*-*) ;;
    *) die "bad scenario $s (HxR or HxR-RATE)" ;;
    esac
done
if ! command -v gnuplot > /dev/null 2>&1; then
    die "gnuplot is not installed; it draws step_time.png (Debian: apt-get install gnuplot-nox)"
fi

# ---- report: medians, summary, plot, ratios (from raw.csv alone) ----

# medians.csv: one row per (scenario, comm, compute, mode), medians over all timed steps.
report_medians() {
    awk -F, "$SWEEP_AWK_MEDIAN"'
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        {
            k = $c["scenario"] SUBSEP $c["comm"] SUBSEP $c["compute"] SUBSEP $c["mode"]
            if (!(k in n)) order[++nk] = k
            n[k]++; st[k] = st[k] " " $c["step_ms"]; bw[k] = bw[k] " " $c["backward_ms"]
            cm[k] = cm[k] " " $c["comm_ms"]; ex[k] = ex[k] " " $c["exposed_ms"]
            wb[k] = wb[k] " " $c["wire_bytes"]; rd[k] = rd[k] < $c["round"] ? $c["round"] : rd[k]
        }
        END {
            printf "scenario,comm,compute,mode,rounds,steps,"
            print "step_ms,backward_ms,comm_ms,exposed_ms,wire_mib"
            for (i = 1; i <= nk; i++) {
                k = order[i]; split(k, kk, SUBSEP)
                printf "%s,%s,%s,%s,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f\n", kk[1], kk[2], kk[3], kk[4],
                    rd[k], n[k], median(st[k]), median(bw[k]), median(cm[k]), median(ex[k]),
                    median(wb[k]) / 1048576
            }
        }' "$out/raw.csv" > "$out/medians.csv"
}

# summary.csv: one row per (scenario, comm, compute): both modes and their ratio.
report_summary() {
    awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        {
            k = $c["scenario"] "," $c["comm"] "," $c["compute"]
            if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
            m = $c["mode"]
            step[k, m] = $c["step_ms"]; comm[k, m] = $c["comm_ms"]; exp_[k, m] = $c["exposed_ms"]
        }
        END {
            print "scenario,comm,compute,blocking_ms,overlapped_ms,overlapped_over_blocking," \
                "blocking_comm_ms,overlapped_comm_ms,overlapped_exposed_ms"
            for (i = 1; i <= nk; i++) {
                k = order[i]; b = step[k, "blocking"]; o = step[k, "overlapped"]
                r = (b != "" && o != "" && b > 0) ? sprintf("%.3f", o / b) : ""
                printf "%s,%s,%s,%s,%s,%s,%s\n", k, b, o, r, comm[k, "blocking"],
                    comm[k, "overlapped"], exp_[k, "overlapped"]
            }
        }' "$out/medians.csv" > "$out/summary.csv"
}

report_print() {
    awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i
                  printf "%-14s %-6s %-6s %12s %14s %7s %10s %10s %12s\n", "scenario", "comm",
                      "compute", "blocking ms", "overlapped ms", "ratio", "comm(b) ms", "comm(o) ms",
                      "exposed(o) ms"; next }
        {
            printf "%-14s %-6s %-6s %12s %14s %7s %10s %10s %12s\n", $c["scenario"], $c["comm"],
                $c["compute"], $c["blocking_ms"], $c["overlapped_ms"],
                $c["overlapped_over_blocking"], $c["blocking_comm_ms"], $c["overlapped_comm_ms"],
                $c["overlapped_exposed_ms"]
        }
        END { print "ratio = median overlapped step / median blocking step" }' "$out/summary.csv"
}

# step_time.png: per scenario, compute and mode, clustered bars of the median step time, the
# communication time in the step and the part of it exposed (after backward ended).
report_plot() {
    dat=$out/plot.dat
    awk -F, '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        {
            lab = $c["scenario"] " " $c["compute"] " " $c["mode"]
            if ($c["comm"] != "dense") lab = lab " " $c["comm"]
            printf "\"%s\" %s %s %s\n", lab, $c["step_ms"], $c["comm_ms"], $c["exposed_ms"]
        }' "$out/medians.csv" > "$dat"
    [ -s "$dat" ] || die "nothing to plot in $out/medians.csv"
    term=$(sweep_png_term)
    nsteps=$(awk -F, 'NR == 2 { print $6 }' "$out/medians.csv")
    title="DDP step: overlapped vs blocking all-reduce (median over $nsteps steps)"
    gnuplot << EOF || die "gnuplot failed"
set terminal $term
set output '$out/step_time.png'
set title '$title'
set ylabel 'ms'
set yrange [0:*]
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 scale 0
set grid ytics
set key outside top center horizontal
set bmargin 8
plot '$dat' using 2:xtic(1) title 'step time', '' using 3 title 'communication (total)', \
     '' using 4 title 'communication exposed after backward'
EOF
    rm -f "$dat"
}

report() {
    [ -s "$out/raw.csv" ] || die "no results in $out/raw.csv"
    report_medians
    report_summary
    report_plot
    report_print
    echo "wrote $out/raw.csv $out/medians.csv $out/summary.csv $out/step_time.png"
}

if [ "$report_only" -eq 1 ]; then
    report
    exit 0
fi

# ---- checks ----
bench=${TRAIN_BENCH:-$builddir/train_bench}
[ -x "$bench" ] || die "no train_bench at $bench (build first, or --builddir)"
[ -e "$out/raw.csv" ] && die "$out/raw.csv exists: choose another --out"
mkdir -p "$out/logs" || die "cannot create $out"
out=$(cd "$out" && pwd)

# shellcheck source=tests/tools/netns_lib.sh
. "$(dirname "$0")/../tests/tools/netns_lib.sh"
NETNS_TIMEOUT=$timeout
NETNS_BURST=$burst

{
    echo "scenarios $scenarios; compute $computes; comm $comms; $rounds round(s)"
    echo "model: $layers layers x $layer_mib MiB, backward $compute_ms ms per layer, $steps steps"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -n), kernel $(uname -r), $(nproc) cpu(s)"
    echo "load $(cat /proc/loadavg 2> /dev/null)"
    git -C "$(dirname "$0")" describe --always --dirty 2> /dev/null | sed 's/^/source /'
    env | grep '^COLL_' | sed 's/^/env /'
} > "$out/info.txt"
sed -n '1,2p' "$out/info.txt"

{
    printf "scenario,hosts,ranks_per_host,rate,comm,compute,mode,round,step,"
    echo "step_ms,backward_ms,comm_ms,exposed_ms,wait_ms,wire_bytes"
} > "$out/raw.csv"
failed=0

# ---- runs ----
for s in $scenarios; do
    hosts=${s%%x*}
    rest=${s#*x}
    nper=${rest%%-*}
    rate=
    [ "$rest" != "$nper" ] && rate=${rest#*-}
    if [ "$hosts" -eq 1 ]; then
        [ -z "$rate" ] || die "scenario $s: a rate needs 2 hosts or more"
        netns_emulate 1
        where="one host, $nper ranks"
    else
        netns_create "$hosts" "$rate"
        case $? in
        0) ;;
        77) die "scenario $s: network namespaces unavailable ($NETNS_WHY)" ;;
        *) die "scenario $s: $NETNS_WHY" ;;
        esac
        where="$hosts network namespaces, $nper rank(s) each, links ${rate:-unshaped}"
    fi
    echo "scenario $s: $where" | tee -a "$out/info.txt"
    round=1
    while [ "$round" -le "$rounds" ]; do
        for comm in $comms; do
            for compute in $computes; do
                for mode in blocking overlapped; do
                    dir=$out/logs/$s-r$round-$comm-$compute-$mode
                    mkdir -p "$dir"
                    netns_run "$nper" "$dir" "$bench" --layers "$layers" \
                        --layer-mib "$layer_mib" --compute-ms "$compute_ms" \
                        --compute "$compute" --comm "$comm" --mode "$mode" --steps "$steps" \
                        --no-zero --csv "$dir/steps.csv"
                    st=$?
                    if [ "$st" -eq 0 ] && [ -s "$dir/steps.csv" ]; then
                        awk -F, -v pre="$s,$hosts,$nper,$rate,$comm" -v r="$round" '
                            NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                            { print pre "," $c["compute"] "," $c["mode"] "," r "," $c["step"] \
                                "," $c["step_ms"] "," $c["backward_ms"] "," $c["comm_ms"] "," \
                                $c["exposed_ms"] "," $c["wait_ms"] "," $c["wire_bytes"] }' \
                            "$dir/steps.csv" >> "$out/raw.csv"
                        printf 'round %d/%d  %-12s %-6s %-5s %-10s %s\n' "$round" "$rounds" \
                            "$s" "$comm" "$compute" "$mode" \
                            "$(grep '^ddp' "$dir/rank0.log" | sed 's/  backward.*//')"
                    else
                        echo "round $round/$rounds  $s $comm $compute $mode" \
                            "FAILED (status $st): $dir"
                        echo "$dir status $st" >> "$out/failures.txt"
                    fi
                done
            done
        done
        round=$((round + 1))
    done
    netns_delete
done
[ -s "$out/failures.txt" ] && failed=1

report
if [ "$failed" -ne 0 ]; then
    echo "train_sweep.sh: some runs failed, see $out/failures.txt" >&2
    exit 1
fi
exit 0
