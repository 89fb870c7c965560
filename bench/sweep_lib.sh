# SPDX-License-Identifier: MIT
# sweep_lib.sh -- sourced (POSIX sh) by bench/algo_sweep.sh and bench/train_sweep.sh: the pieces
# of their reports that are the same. It runs nothing when sourced.
#
#   SWEEP_AWK_MEDIAN   awk source of median(s): the median of the numbers in the string s,
#                      separated by spaces; prepend it to an awk program
#   sweep_png_term     prints the gnuplot terminal for a 1100x650 PNG (pngcairo, else png)

# shellcheck disable=SC2034 # used by the scripts that source this file
SWEEP_AWK_MEDIAN='
    function median(s,    a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }'

sweep_png_term() {
    if gnuplot -e "set terminal pngcairo" < /dev/null > /dev/null 2>&1; then
        echo "pngcairo size 1100,650 noenhanced"
    else
        echo "png size 1100,650 noenhanced"
    fi
}
