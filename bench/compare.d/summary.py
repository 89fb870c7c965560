# SPDX-License-Identifier: MIT
# bench/compare.d/summary.py -- bench/compare's tables: from the raw lines
# "round tool coll nranks bytes time_us", the median time per (tool, collective, ranks, size),
# busbw as collbench computes it, the ratio libcoll / best peer per size (and libcoll-reg /
# best peer: registered buffers), a medians CSV and a gnuplot PNG of busbw against size per
# collective. torch-coll (this library under torch.distributed, bindings/torch) is no peer: its
# column "torch-coll / torch" compares the two backends through the same framework. With
# MEMBWFILE ("round copy-GB/s" lines, bench/membw's copy rate B measured among the rounds), the
# all-reduce tables add %bound: the time of the memory bound, 2*n*S bytes read and written at B
# (bench/README, "Bound"), over the median time.
# Run: /usr/bin/python3 summary.py RAWFILE OUTDIR [MEMBWFILE]
import math
import os
import statistics
import subprocess
import sys

ORDER = ["libcoll", "libcoll-reg", "ompi", "mpich", "gloo", "torch", "torch-coll"]
OURS = ("libcoll", "libcoll-reg", "torch-coll")


def bus_factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "allreduce" else (n - 1.0) / n


def read_membw(path):
    rates = []
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.split()
                try:
                    v = float(p[1]) if len(p) == 2 else float("nan")
                except ValueError:
                    continue
                if math.isfinite(v) and v > 0:
                    rates.append(v)
    return statistics.median(rates) if rates else None


def main(raw, out, membw=None):
    copy_gbs = read_membw(membw)
    samples = {}
    with open(raw) as f:
        for line in f:
            p = line.split()
            if len(p) != 6:
                continue
            samples.setdefault((p[2], int(p[3]), int(p[4]), p[1]), []).append(float(p[5]))
    if not samples:
        sys.stderr.write("summary: no results in %s\n" % raw)
        return 1
    med = {k: statistics.median(v) for k, v in samples.items()}
    with open(os.path.join(out, "medians.csv"), "a") as f:
        for (c, n, b, t), v in sorted(med.items()):
            f.write("%s,%d,%d,%s,%d,%.3f,%.4f\n" % (c, n, b, t, len(samples[(c, n, b, t)]), v,
                                                   b / v / 1e3 * bus_factor(c, n) if v > 0 else 0))
    for coll, n in sorted({(k[0], k[1]) for k in med}):
        tools = [t for t in ORDER if any(k[0] == coll and k[1] == n and k[3] == t for k in med)]
        sizes = sorted({k[2] for k in med if k[0] == coll and k[1] == n})
        bound = copy_gbs if coll == "allreduce" else None
        tc = "torch-coll" in tools
        print("\n## %s, %d ranks, float sum: median time (us) of interleaved rounds, busbw GB/s"
              % (coll, n))
        if bound:
            print("(%%bound: memory bound 2*n*S / B over the median time, B = %.1f GB/s, "
                  "bench/membw copy, median of the rounds)" % bound)
        print("| size (B) | " + " | ".join("%s us | %s GB/s" % (t, t) for t in tools) +
              " | best peer | libcoll / best peer | libcoll-reg / best peer |" +
              (" %bound libcoll | %bound libcoll-reg |" if bound else "") +
              (" torch-coll / torch |" if tc else ""))
        print("|---:|" + "---:|" * (2 * len(tools) + 3 + (2 if bound else 0) + (1 if tc else 0)))
        dat = os.path.join(out, "%s_n%d.dat" % (coll, n))
        with open(dat, "w") as d:
            d.write("# size " + " ".join(tools) + "  (busbw GB/s, NaN where not run)\n")
            for b in sizes:
                row, bus = [], []
                for t in tools:
                    v = med.get((coll, n, b, t))
                    bw = b / v / 1e3 * bus_factor(coll, n) if v else float("nan")
                    bus.append(bw)
                    row.append("%.1f | %.3g" % (v, bw) if v else "- | -")
                peers = [(med[(coll, n, b, t)], t) for t in tools
                         if t not in OURS and (coll, n, b, t) in med]
                best = min(peers) if peers else None
                ratio = best[1] if best else "-"
                for t in ("libcoll", "libcoll-reg"):
                    lib = med.get((coll, n, b, t))
                    ratio += " | %.2f" % (best[0] / lib) if best and lib else " | -"
                for t in ("libcoll", "libcoll-reg") if bound else ():
                    lib = med.get((coll, n, b, t))
                    ratio += " | %.0f %%" % (100.0 * 2 * n * b / (bound * 1e3) / lib) if lib else " | -"
                if tc:
                    ours, theirs = med.get((coll, n, b, "torch-coll")), med.get((coll, n, b, "torch"))
                    ratio += " | %.2f" % (theirs / ours) if ours and theirs else " | -"
                print("| %d | %s | %s |" % (b, " | ".join(row), ratio))
                d.write("%d %s\n" % (b, " ".join("%.6g" % x for x in bus)))
        png = os.path.join(out, "%s_n%d.png" % (coll, n))
        plots = ", ".join("'%s' using 1:%d with linespoints title '%s'" % (dat, i + 2, t)
                          for i, t in enumerate(tools))
        script = ("set terminal png size 900,600; set output '%s'; set logscale x 2; "
                  "set logscale y; set xlabel 'size (B)'; set ylabel 'busbw (GB/s)'; "
                  "set key left top; set title '%s, %d ranks, float sum (medians)'; plot %s"
                  % (png, coll, n, plots))
        try:
            subprocess.run(["gnuplot", "-e", script], check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.stderr.write("summary: no plot (%s)\n" % e)
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.stderr.write("usage: summary.py RAWFILE OUTDIR [MEMBWFILE]\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None))
