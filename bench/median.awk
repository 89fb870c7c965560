# SPDX-License-Identifier: MIT
# median(list): the median of the numbers in a space-separated list ("" when empty). Loaded
# beside the scripts that use it: awk -f bench/median.awk -f SCRIPT.
function median(list,    n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) {
        t = a[i] + 0
        for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]
        a[j + 1] = t
    }
    if (n == 0) return ""
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
