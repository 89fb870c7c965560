#!/bin/sh
# SPDX-License-Identifier: MIT
# Hosts as network namespaces on one bridge (netns_lib.sh): 2 hosts x 2 ranks and 4 hosts x 2
# ranks, tcp between hosts over veth and shm within. collbench checks every collective at
# several sizes with the tuner's choice, and allreduce once per algorithm that collinfo -a lists
# for it. Then 7 ranks as 4 + 3 on 2 hosts: every algorithm collinfo -a lists for all-reduce,
# reduce-scatter, all-gather, broadcast and reduce, each of which either runs or is reported in
# the debug log as unable to run the call (the cost model chooses then: coll.7, COLL_ALGO); hier
# needs the same rank count on every host, so there it must fall back. Without root or
# namespaces the same jobs run on loopback with the hosts emulated by COLL_HOSTID, and the
# output says so. It measures nothing: timings here mean nothing.
set -u
top_builddir=${top_builddir:-.}
bench=$top_builddir/collbench
info=$top_builddir/collinfo
# shellcheck source=tests/tools/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/collns.XXXXXX") || exit 99
# shellcheck disable=SC2016 # expanded when the cleanup runs
netns_atexit 'rm -rf "$tmp"'
NETNS_TIMEOUT=60
pass=0
fail=0

# The algorithms of collective $1, from the "name collectives description" lines of collinfo -a.
algos_of() {
    "$info" -a | awk -v c="$1" '$1 !~ /^#/ && ("," $2 ",") ~ ("," c ",") { printf "%s ", $1 }'
}
algos=$(algos_of allreduce)
if [ -z "$algos" ]; then
    echo "FAIL: collinfo -a lists no allreduce algorithm"
    exit 1
fi

# The algorithms rank 0 built float schedules of collective $2 with, from the debug logs in $1.
algos_ran() {
    cat "$1"/debug.* 2>/dev/null |
        awk -v c="$2" '/ \[0\] .* ALGO / && $0 ~ (": " c " of [0-9]+ x float") {
            for (i = 1; i <= NF; i++) if ($i == c && $(i - 1) ~ /:$/) {
                n = substr($(i - 1), 1, length($(i - 1)) - 1)
                if (!(n in seen)) { seen[n] = 1; s = s (s == "" ? "" : ",") n }
            }
        } END { print s }'
}

# One checked collbench job: label, ranks per host, collbench arguments.
job() {
    label=$1
    nper=$2
    shift 2
    out=$tmp/job$((pass + fail))
    mkdir -p "$out"
    COLL_DEBUG=debug COLL_DEBUG_FILE="$out/debug.%p" netns_run "$nper" "$out" \
        "$bench" -n 2 -w 1 -c 1 -T 30 "$@"
    st=$?
    why="status $st"
    if [ "$st" -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$out/rank0.log"; then
        ran=$(algos_ran "$out" "$coll")
        note=
        case ",$ran," in
        *",$forced,"*) [ "$must" = fallback ] && why="$forced ran (ran: $ran)" ;;
        *)
            [ -n "$forced" ] && note=" -- $forced did not run: the cost model chose instead"
            # a forced algorithm that does not run must say so in the debug log
            if [ -n "$must" ] && ! cat "$out"/debug.* |
                grep -q "COLL_ALGO forces $forced for $coll, but"; then
                why="$forced did not run (ran: $ran) and the log does not say why"
            fi
            ;;
        esac
        if [ "$why" = "status 0" ]; then
            pass=$((pass + 1))
            echo "PASS: $label (ran: $ran)$note"
            return
        fi
    fi
    fail=$((fail + 1))
    echo "FAIL: $label ($why)"
    for f in "$out"/rank*.log; do
        echo "--- $f"
        tail -n 30 "$f"
    done
}

for hosts in 2 4; do
    netns_delete
    netns_setup "$hosts"
    where="$hosts hosts x 2 ranks"
    [ "$NETNS_MODE" = emulate ] && where="$where, emulated"
    forced=
    must=
    for coll in allreduce reduce_scatter allgather broadcast alltoall; do
        root=
        [ "$coll" = broadcast ] && root="-r $((hosts + 1))"
        # shellcheck disable=SC2086 # $root is empty or two words
        job "$coll, $where" 2 -C "$coll" -b 12 -e 1M -f 16 $root
    done
    coll=allreduce
    for a in $algos; do
        forced=$a
        job "allreduce -A $a, $where" 2 -C allreduce -A "$a" -b 12 -e 1M -f 16
    done
done

# 4 + 3 ranks: odd sizes (3 and 48 floats) up to 48 KiB, every listed algorithm forced.
netns_delete
netns_setup 2
where="2 hosts, 4 + 3 ranks"
[ "$NETNS_MODE" = emulate ] && where="$where, emulated"
for coll in allreduce reduce_scatter allgather broadcast reduce; do
    forced=
    must=
    root=
    [ "$coll" = broadcast ] || [ "$coll" = reduce ] && root="-r 5"
    # shellcheck disable=SC2086 # $root is empty or two words
    job "$coll, $where" 4,3 -C "$coll" -b 12 -e 48K -f 16 $root
    for a in $(algos_of "$coll"); do
        forced=$a
        must=run-or-say
        [ "$a" = hier ] && must=fallback
        # shellcheck disable=SC2086
        job "$coll -A $a, $where" 4,3 -C "$coll" -A "$a" -b 12 -e 48K -f 16 $root
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
