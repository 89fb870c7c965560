#!/bin/sh
# SPDX-License-Identifier: MIT
# sim_scale.sh -- predicted all-reduce time against communicator size, from the cost model
# only: "collinfo algos --topo FILE --ranks-list ..." on hosts like one hwloc XML machine. It
# prints one Markdown table per size (ring, tree, hier and the tuner's choice per rank count)
# and, per size, the smallest rank count at which tree beats ring and hier beats both. It runs
# nothing and measures nothing; see "Simulation at scale" in bench/README.md.
set -u

usage() {
    cat << 'EOF'
usage: sim_scale.sh [options]
  --topo FILE       hwloc XML of one host (default: tests/topologies/synthetic_dgx.xml)
  --ranks LIST      communicator sizes (default 8,16,32,64,128,256,512,1024)
  --ranks-per-host P  ranks on each host (default: the GPUs in FILE)
  --sizes LIST      all-reduce sizes, k/m/g suffixes (default 8,1m,64m,1g)
  --collinfo PATH   the collinfo to run (default: ./collinfo, else the one in PATH)
  --csv             print collinfo's CSV instead of the tables
EOF
}

here=$(dirname "$0")
topo=$here/../tests/topologies/synthetic_dgx.xml
ranks=8,16,32,64,128,256,512,1024
sizes=8,1m,64m,1g
rph=""
collinfo=""
csv=0
while [ $# -gt 0 ]; do
    case $1 in
    --topo) topo=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --collinfo) collinfo=$2; shift 2 ;;
    --csv) csv=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "sim_scale.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if [ -z "$collinfo" ]; then
    collinfo=./collinfo
    [ -x "$collinfo" ] || collinfo=collinfo
fi

out=$(mktemp /tmp/sim_scale.XXXXXX) || exit 1
trap 'rm -f "$out"' EXIT INT TERM
# shellcheck disable=SC2086 # the optional --ranks-per-host is two words or none
if ! "$collinfo" algos --topo "$topo" --ranks-list "$ranks" ${rph:+--ranks-per-host $rph} \
    --coll allreduce --sizes "$sizes" --csv >"$out"; then
    exit 1
fi
if [ "$csv" -eq 1 ]; then
    cat "$out"
    exit 0
fi
# the topology and model lines of the text table
# shellcheck disable=SC2086
"$collinfo" algos --topo "$topo" --ranks-list "$ranks" ${rph:+--ranks-per-host $rph} \
    --coll barrier | grep -E '^# (topology|host ring|model):'

# Per size: a table, then the crossovers read off the same numbers.
awk -F, '
function human(b) {
    if (b >= 1073741824 && b % 1073741824 == 0) return b / 1073741824 " GiB"
    if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 " MiB"
    if (b >= 1024 && b % 1024 == 0) return b / 1024 " KiB"
    return b " B"
}
function t(v) { return v == "" ? "-" : sprintf("%.1f", v) }
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
    s = $4
    if (!(s in seen)) { seen[s] = 1; order[++ns] = s }
    k = ++nrow[s]
    n[s, k] = $2; h[s, k] = $3; ch[s, k] = $6; ct[s, k] = $8
    ring[s, k] = $col["ring"]; tree[s, k] = $col["tree"]; hier[s, k] = $col["hier"]
}
END {
    for (j = 1; j <= ns; j++) {
        s = order[j]
        printf "\n#### all-reduce of %s (predicted us)\n\n", human(s)
        print "| ranks | hosts | ring | tree | hier | choice (time) |"
        print "|---:|---:|---:|---:|---:|---|"
        tw = ""; hw = ""
        for (k = 1; k <= nrow[s]; k++) {
            printf "| %d | %d | %s | %s | %s | %s %s |\n", n[s, k], h[s, k], t(ring[s, k]),
                t(tree[s, k]), t(hier[s, k]), ch[s, k], t(ct[s, k])
            if (tw == "" && tree[s, k] + 0 < ring[s, k] + 0) tw = n[s, k]
            if (hw == "" && hier[s, k] != "" && hier[s, k] + 0 < ring[s, k] + 0 &&
                hier[s, k] + 0 < tree[s, k] + 0) hw = n[s, k]
        }
        printf "\ntree < ring from %s ranks; hier < ring and tree from %s ranks\n",
            tw == "" ? "no listed" : tw, hw == "" ? "no listed" : hw
    }
}' "$out"
