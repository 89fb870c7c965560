#!/bin/sh
# SPDX-License-Identifier: MIT
# plot_busbw.sh -- bus bandwidth against message size from collbench --csv files, drawn by
# gnuplot into a PNG: one curve per file, or per (type, redop, root) when a file holds several.
# It does not run benchmarks and does not average repeated sweeps (-N): every row is a point.
set -eu

usage() {
    cat << 'EOF'
usage: plot_busbw.sh [-o OUT.png] [-t TITLE] [-i] [-d TYPE] [-r OP] FILE.csv...
Plot busbw (GB/s) against size (bytes, log scale) from collbench --csv files.
  -o OUT    PNG to write (default busbw.png)
  -t TITLE  plot title (default "collbench bus bandwidth")
  -i        plot the in-place columns instead of the out-of-place ones
  -d TYPE   only rows of this type, e.g. float
  -r OP     only rows of this redop, e.g. sum
Curves are labelled with the file name (without .csv), plus type, redop and root when a file
holds more than one combination. Rows of size 0 have no place on a log axis and are skipped.
EOF
}

out=busbw.png
title="collbench bus bandwidth"
column=oop_busbw_gbs
want_type=
want_op=
while getopts "o:t:id:r:h" opt; do
    case $opt in
    o) out=$OPTARG ;;
    t) title=$OPTARG ;;
    i) column=ip_busbw_gbs ;;
    d) want_type=$OPTARG ;;
    r) want_op=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
    usage >&2
    exit 2
fi
if ! command -v gnuplot > /dev/null 2>&1; then
    echo "plot_busbw.sh: gnuplot is not installed" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/plot_busbw.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# Single quotes double inside gnuplot's single-quoted strings.
gq() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"
}

# Split each file into one data file per (type, redop, root): $tmp/<file>_<key>.dat holds
# "size busbw" lines, and $tmp/<file>.keys lists "<key> <label>".
k=0
for f in "$@"; do
    if [ ! -r "$f" ]; then
        echo "plot_busbw.sh: cannot read $f" >&2
        exit 1
    fi
    awk -F, -v col="$column" -v t="$want_type" -v o="$want_op" -v pre="$tmp/$k" '
        NR == 1 {
            for (i = 1; i <= NF; i++) c[$i] = i
            if (!("size" in c) || !(col in c)) {
                print "not a collbench --csv file: " FILENAME > "/dev/stderr"; bad = 1; exit 1
            }
            next
        }
        (t != "" && $c["type"] != t) || (o != "" && $c["redop"] != o) { next }
        $c["size"] + 0 <= 0 || $c[col] == "" { next }
        {
            key = $c["type"] " " $c["redop"] ($c["root"] >= 0 ? " root " $c["root"] : "")
            if (!(key in id)) { id[key] = ++n; print n, key > (pre ".keys") }
            print $c["size"], $c[col] > (pre "_" id[key] ".dat")
        }
        END { exit bad }' "$f"
    k=$((k + 1))
done

# One plot clause per curve.
plots=
k=0
for f in "$@"; do
    name=$(basename "$f" .csv)
    if [ -s "$tmp/$k.keys" ]; then
        nkeys=$(wc -l < "$tmp/$k.keys")
        while read -r id key; do
            label=$name
            [ "$nkeys" -gt 1 ] && label="$name ($key)"
            plots="$plots${plots:+, }'$tmp/${k}_$id.dat' using 1:2 with linespoints title $(gq "$label")"
        done < "$tmp/$k.keys"
    fi
    k=$((k + 1))
done
if [ -z "$plots" ]; then
    echo "plot_busbw.sh: no rows to plot" >&2
    exit 1
fi

terminal="pngcairo size 1000,600 noenhanced"
if ! gnuplot -e "set terminal pngcairo" < /dev/null > /dev/null 2>&1; then
    terminal="png size 1000,600 noenhanced"
fi
gnuplot << EOF
set terminal $terminal
set output $(gq "$out")
set title $(gq "$title")
set xlabel 'message size (bytes)'
set ylabel 'bus bandwidth (GB/s)'
set logscale x 2
set format x '%.0b%B'
set yrange [0:*]
set grid
set key left top
plot $plots
EOF
echo "plot_busbw.sh: wrote $out"
