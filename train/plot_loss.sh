#!/bin/sh
# SPDX-License-Identifier: MIT
# Plot ctrain loss curves (--csv files) into one PNG with gnuplot: training loss as lines,
# validation loss as points. Usage: train/plot_loss.sh OUT.png RUN.csv [RUN2.csv ...]
set -eu
[ $# -ge 2 ] || { echo "usage: plot_loss.sh OUT.png RUN.csv [RUN2.csv ...]" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot_loss.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
out=$1; shift
plots=""
for f in "$@"; do
    [ -r "$f" ] || { echo "plot_loss.sh: cannot read $f" >&2; exit 2; }
    t=$(basename "$f" .csv)
    plots="$plots${plots:+, }'$f' using 1:2 with lines title '$t train', '$f' using 1:(\$3 == \$3 ? \$3 : 1/0) with points pt 7 title '$t val'"
done
gnuplot <<GP
set terminal pngcairo size 900,540 noenhanced
set output '$out'
set datafile separator ','
set key top right
set xlabel 'step'
set ylabel 'loss (nats per byte)'
set grid
plot $plots
GP
echo "loss plot: $out"
