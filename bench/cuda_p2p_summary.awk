# SPDX-License-Identifier: MIT
# Medians of bench/cuda_p2p.sh's runs: per collective, rank count and size, the out-of-place
# and in-place time and busbw of the p2p path and of staging, the ratio of busbw (p2p / staged)
# and the #wrong total. Input: files named COLL.nN.p2pP.rR.txt (collbench output).
# usage: awk -f bench/median.awk -f bench/cuda_p2p_summary.awk DIR/*.r*.txt
FNR == 1 {
    f = FILENAME
    sub(/.*\//, "", f)
    split(f, parts, ".")
    coll = parts[1]; nr = parts[2]; path = parts[3]
    key0 = coll " " nr
    if (!(key0 in seen)) { seen[key0] = 1; order[++nkeys] = key0 }
}
/^ *[0-9]/ && NF >= 13 && $9 ~ /^[0-9]+$/ && $13 ~ /^[0-9]+$/ { # a killed run's last line is cut
    k = coll " " nr " " $1
    if (!(k in sizes_seen)) { sizes_seen[k] = 1; sizes[key0] = sizes[key0] " " $1 }
    t_oop[k, path] = t_oop[k, path] " " $6
    b_oop[k, path] = b_oop[k, path] " " $8
    t_ip[k, path] = t_ip[k, path] " " $10
    b_ip[k, path] = b_ip[k, path] " " $12
    wrong[k, path] += $9 + $13
}
END {
    for (i = 1; i <= nkeys; i++) {
        key0 = order[i]
        split(key0, kk, " ")
        printf "\n%s, %s ranks (medians; busbw GB/s)\n", kk[1], substr(kk[2], 2)
        printf "%12s | %10s %8s %10s %8s | %10s %8s %10s %8s | %7s %7s | %s\n", "size (B)",
            "p2p us", "busbw", "in-pl us", "busbw", "staged us", "busbw", "in-pl us", "busbw",
            "oop x", "inpl x", "#wrong"
        n = split(sizes[key0], sz, " ")
        for (j = 1; j <= n; j++) {
            k = key0 " " sz[j]
            p1 = "p2p1"; p0 = "p2p0"
            bo1 = median(b_oop[k, p1]); bo0 = median(b_oop[k, p0])
            bi1 = median(b_ip[k, p1]); bi0 = median(b_ip[k, p0])
            ro = bo0 > 0 ? sprintf("%.1f", bo1 / bo0) : "-"
            ri = bi0 > 0 ? sprintf("%.1f", bi1 / bi0) : "-"
            printf "%12s | %10s %8s %10s %8s | %10s %8s %10s %8s | %7s %7s | %d\n", sz[j],
                median(t_oop[k, p1]), bo1, median(t_ip[k, p1]), bi1,
                median(t_oop[k, p0]), bo0, median(t_ip[k, p0]), bi0, ro, ri,
                wrong[k, p1] + wrong[k, p0]
        }
    }
}
