#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_collrun.sh -- checks collrun end to end with sh -c programs: the environment of the
# ranks, exit statuses, failure and timeout handling, --keep-going, --prefix, signal
# forwarding and that no process is left behind. It needs no libcoll and no network. Timing is
# only bounded loosely.
#
# The collrun tested is $COLLRUN, else ./collrun (make check runs from the build directory),
# else ../collrun. Exit status: 0 pass, 1 fail, 99 harness error.
# shellcheck disable=SC2015,SC2016,SC2317

if [ -n "${COLLRUN:-}" ]; then
    :
elif [ -x ./collrun ]; then
    COLLRUN=./collrun
elif [ -x ../collrun ]; then
    COLLRUN=../collrun
else
    echo "test_collrun: collrun not found (set COLLRUN)" >&2
    exit 99
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/test_collrun.XXXXXX") || exit 99
nfail=0

cleanup() {
    # Last resort: nothing a failed check left behind may keep running.
    for f in "$T"/*.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    nfail=$((nfail + 1))
}

pass() {
    echo "ok: $*"
}

# Runs collrun with a safety net, so that a broken collrun fails the test instead of hanging it.
if command -v timeout >/dev/null 2>&1; then
    SAFETY="timeout -k 5 120"
else
    SAFETY=""
fi
run() {
    $SAFETY "$COLLRUN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}

# Running and not a zombie (a killed grandchild may stay a zombie of init for a while).
is_alive() {
    kill -0 "$1" 2>/dev/null || return 1
    if [ -r "/proc/$1/stat" ]; then
        state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
        [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
        return
    fi
    return 0
}

# Polls (up to ~20 s) until pid $1 is gone; a SIGKILLed process may take a moment to die.
wait_dead() {
    n=0
    while is_alive "$1"; do
        n=$((n + 1))
        [ $n -gt 200 ] && return 1
        sleep 0.1
    done
    return 0
}

# Polls (up to ~20 s) until every file named in the arguments exists.
wait_files() {
    n=0
    for f in "$@"; do
        while [ ! -f "$f" ]; do
            n=$((n + 1))
            [ $n -gt 200 ] && return 1
            sleep 0.1
        done
    done
    return 0
}

now() {
    date +%s
}

# ---- 1. four ranks, all exit 0: each sees its own rank and the same root and secret ----
run -n 4 sh -c 'env > "$0/env.$COLL_RANK"' "$T"
if [ "$rc" -ne 0 ] || [ -s "$T/err" ]; then
    fail "4 ranks exiting 0: status $rc, stderr: $(cat "$T/err")"
else
    root=$(grep '^COLL_ROOT_ADDR=' "$T/env.0")
    secret=$(grep '^COLL_JOB_SECRET=' "$T/env.0")
    echo "$root" | grep -Eq '^COLL_ROOT_ADDR=127\.0\.0\.1:[0-9]+$' || fail "bad root: $root"
    echo "$secret" | grep -Eq '^COLL_JOB_SECRET=[0-9a-f]{32}$' || fail "bad secret: $secret"
    for r in 0 1 2 3; do
        e="$T/env.$r"
        grep -qx "COLL_RANK=$r" "$e" || fail "rank $r: COLL_RANK wrong"
        grep -qx "COLL_LOCAL_RANK=$r" "$e" || fail "rank $r: COLL_LOCAL_RANK wrong"
        grep -qx "COLL_NRANKS=4" "$e" || fail "rank $r: COLL_NRANKS wrong"
        grep -qx "COLL_LOCAL_NRANKS=4" "$e" || fail "rank $r: COLL_LOCAL_NRANKS wrong"
        grep -qx "$root" "$e" || fail "rank $r: COLL_ROOT_ADDR differs"
        grep -qx "$secret" "$e" || fail "rank $r: COLL_JOB_SECRET differs"
        grep -Eq '^(RANK|WORLD_SIZE|LOCAL_WORLD_SIZE)=' "$e" && fail "rank $r: torch env set"
    done
    pass "4 ranks: status 0, own COLL_RANK, same COLL_ROOT_ADDR and COLL_JOB_SECRET"
fi

# ---- 2. --torch-env and -x ----
run --torch-env -x COLLRUN_T=a=b -n 2 sh -c \
    'test "$RANK" = "$COLL_RANK" && test "$WORLD_SIZE" = 2 && test "$LOCAL_RANK" = "$COLL_RANK" &&
     test "$LOCAL_WORLD_SIZE" = 2 && test "$MASTER_ADDR" = 127.0.0.1 && test -n "$MASTER_PORT" &&
     test "$COLLRUN_T" = a=b'
[ "$rc" -eq 0 ] && pass "--torch-env and -x" || fail "--torch-env/-x: status $rc: $(cat "$T/err")"

# ---- 2a. -x NAME exports collrun's own value, over collrun's; -v shows each variable once ----
export MASTER_PORT=1234
run -v -n 1 --torch-env -x MASTER_PORT -x COLLRUN_T=1 -x COLLRUN_T=2 sh -c \
    'echo "$MASTER_PORT $COLLRUN_T"'
unset MASTER_PORT
if [ "$rc" -eq 0 ] && [ "$(cat "$T/out")" = "1234 2" ] &&
    [ "$(grep -o ' MASTER_PORT=[0-9]*' "$T/err")" = " MASTER_PORT=1234" ] &&
    [ "$(grep -o ' COLLRUN_T=[0-9]*' "$T/err")" = " COLLRUN_T=2" ]; then
    pass "-x NAME over --torch-env's MASTER_PORT, the last -x wins, -v shows them once"
else
    fail "-x MASTER_PORT: status $rc, out: $(cat "$T/out"), stderr: $(cat "$T/err")"
fi

# ---- 2b. pinning: rank r on the r-th CPU where the ranks fill collrun's CPUs exactly ----
unset COLL_BIND
ncpu=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
cpus='grep "^Cpus_allowed_list:" /proc/self/status | cut -f2'
all=$(sh -c "$cpus")
if [ "$ncpu" -ge 2 ] && [ "$ncpu" -le 64 ]; then
    run -n "$ncpu" sh -c "echo \$COLL_RANK \$($cpus) \${COLL_BIND-unset}"
    want=$(i=0; for c in $(echo "$all" | tr ',' ' '); do
        case $c in *-*) seq "${c%-*}" "${c#*-}" ;; *) echo "$c" ;; esac
    done | while read -r c; do echo "$i $c unset"; i=$((i + 1)); done)
    [ "$rc" -eq 0 ] && [ "$(sort -n "$T/out")" = "$want" ] ||
        fail "$ncpu ranks on CPUs $all: $(sort -n "$T/out" | tr '\n' ';') (want one CPU each)"
fi
run -n $((ncpu + 1)) sh -c "$cpus"
[ "$rc" -eq 0 ] && [ "$(sort -u "$T/out")" = "$all" ] ||
    fail "$((ncpu + 1)) ranks on $ncpu CPUs: $(sort -u "$T/out" | tr '\n' ' ')(want $all)"
COLL_BIND=numa run -n "$ncpu" sh -c "echo \${COLL_BIND-unset} \$($cpus)"
[ "$rc" -eq 0 ] && [ "$(sort -u "$T/out")" = "numa $all" ] ||
    fail "COLL_BIND=numa: $(sort -u "$T/out" | tr '\n' ' ')(want numa $all, not pinned)"
run --bind-to none -n "$ncpu" sh -c "echo \${COLL_BIND-unset} \$($cpus)"
[ "$rc" -eq 0 ] && [ "$(sort -u "$T/out")" = "none $all" ] ||
    fail "--bind-to none: $(sort -u "$T/out" | tr '\n' ' ')(want none $all)"
run --bind-to socket -n 1 true
[ "$rc" -eq 2 ] && grep -q "'socket' is not none, cpu, core or numa" "$T/err" ||
    fail "--bind-to socket: status $rc, stderr: $(cat "$T/err")"
pass "pinning: one CPU per rank where the ranks fill the CPUs, none beyond, COLL_BIND and --bind-to respected"

# ---- 3. one rank exits 3: its status comes back and the message names it ----
run -n 4 sh -c 'if [ "$COLL_RANK" = 1 ]; then exit 3; fi; exit 0'
if [ "$rc" -eq 3 ] && grep -Eq '^collrun: rank 1 \(pid [0-9]+\) exited with status 3$' "$T/err" &&
    grep -q 'job failed: 1 of 4 ranks failed (first: rank 1, status 3)' "$T/err"; then
    pass "a rank exiting 3"
else
    fail "a rank exiting 3: status $rc, stderr: $(cat "$T/err")"
fi

# ---- 4. a rank kills itself: collrun ends the others after --grace and leaves nothing ----
# Rank 2 waits until the others have recorded their pids (rank 0 also starts a background
# process, which must die with it) and then SIGKILLs itself.
prog='
d=$0
if [ "$COLL_RANK" = 2 ]; then
    echo $$ > "$d/r2.tmp" && mv "$d/r2.tmp" "$d/r2.pid"
    n=0
    while [ ! -f "$d/r0.pid" ] || [ ! -f "$d/r1.pid" ] || [ ! -f "$d/r3.pid" ]; do
        n=$((n + 1)); [ $n -gt 400 ] && break; sleep 0.05
    done
    kill -9 $$
fi
if [ "$COLL_RANK" = 0 ]; then
    sleep 30 &
    echo $! > "$d/bg.tmp" && mv "$d/bg.tmp" "$d/bg.pid"
fi
echo $$ > "$d/r$COLL_RANK.tmp" && mv "$d/r$COLL_RANK.tmp" "$d/r$COLL_RANK.pid"
exec sleep 30'
t0=$(now)
run --grace 1 -n 4 sh -c "$prog" "$T"
dt=$(($(now) - t0))
if [ "$rc" -eq 137 ] && [ "$dt" -lt 25 ] &&
    grep -Eq '^collrun: rank 2 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$' "$T/err" &&
    grep -q 'first: rank 2, signal 9' "$T/err" &&
    [ "$(grep -c '^collrun: rank ' "$T/err")" -eq 1 ]; then
    pass "a rank killed by SIGKILL: status 137 after ${dt}s, one line naming it"
else
    fail "a rank killed by SIGKILL: status $rc after ${dt}s, stderr: $(cat "$T/err")"
fi
survivors=0
for f in r0 r1 r2 r3 bg; do
    if [ ! -f "$T/$f.pid" ]; then
        fail "no pid recorded for $f"
        survivors=1
    elif ! wait_dead "$(cat "$T/$f.pid")"; then
        fail "process $f (pid $(cat "$T/$f.pid")) survived collrun"
        survivors=1
    fi
done
[ $survivors -eq 0 ] && pass "no process of the failed job survives"
rm -f "$T"/*.pid

# ---- 5. --timeout ----
t0=$(now)
run --timeout 1 -n 2 sleep 30
dt=$(($(now) - t0))
if [ "$rc" -eq 124 ] && [ "$dt" -lt 20 ] && grep -q 'timeout' "$T/err"; then
    pass "--timeout 1: status 124 after ${dt}s"
else
    fail "--timeout 1: status $rc after ${dt}s, stderr: $(cat "$T/err")"
fi

# ---- 6. --prefix: whole lines, each with its rank; a partial last line is flushed ----
run --prefix -n 3 sh -c 'seq 1 500; echo "err $COLL_RANK" >&2; printf "tail $COLL_RANK"'
ok=1
[ "$rc" -eq 0 ] || ok=0
for r in 0 1 2; do
    [ "$(grep -c "^\[$r\] [0-9][0-9]*$" "$T/out")" -eq 500 ] || ok=0
    grep -qx "\[$r\] tail $r" "$T/out" || ok=0
    grep -qx "\[$r\] err $r" "$T/err" || ok=0
done
[ "$(grep -cv '^\[[0-2]\] ' "$T/out")" -eq 0 ] || ok=0
[ "$(wc -l <"$T/out")" -eq 1503 ] || ok=0
[ $ok -eq 1 ] && pass "--prefix" || fail "--prefix: status $rc, out: $(head -5 "$T/out")"

run -l -n 2 echo hello
[ "$rc" -eq 0 ] && grep -qx '\[0\] hello' "$T/out" && grep -qx '\[1\] hello' "$T/out" &&
    pass "-l" || fail "-l: status $rc, out: $(cat "$T/out")"

run -n 2 echo plain
[ "$rc" -eq 0 ] && [ "$(grep -cx plain "$T/out")" -eq 2 ] &&
    pass "no prefix without --prefix" || fail "no --prefix: $(cat "$T/out")"

# ---- 7. a program that cannot be executed: one message, status 127 ----
run -n 4 collrun-no-such-program
nmsg=$(grep -c "^collrun: cannot execute 'collrun-no-such-program': " "$T/err")
if [ "$rc" -eq 127 ] && [ "$nmsg" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ]; then
    pass "missing program: status 127, one message"
else
    fail "missing program: status $rc, stderr: $(cat "$T/err")"
fi

# ---- 8. usage errors exit 2; --help and --version exit 0 ----
for args in "--no-such-option -n 2 true" "true" "-n 2" "-n 0 true" "-n 2 --hosts a,b true" \
    "--timeout x -n 2 true"; do
    # shellcheck disable=SC2086
    run $args
    [ "$rc" -eq 2 ] && [ -s "$T/err" ] || fail "collrun $args: status $rc (expected 2)"
done
run -n 2 --hosts a,b true
grep -q 'only local launch' "$T/err" && grep -q srun "$T/err" ||
    fail "--hosts message: $(cat "$T/err")"
run --help
[ "$rc" -eq 0 ] && grep -q 'usage: collrun' "$T/out" || fail "--help: status $rc"
run --version
[ "$rc" -eq 0 ] && grep -q '^collrun ' "$T/out" || fail "--version: status $rc"
pass "usage errors, --help, --version"

# ---- 9. signals: SIGUSR1 reaches every rank and the job goes on; SIGTERM stops it ----
# Each rank traps the signal, records it and exits 0; "ready" files say the traps are set.
sigprog='
d=$0; s=$1
trap "echo got > \"$d/$s.\$COLL_RANK\"; kill \$bg 2>/dev/null; exit 0" $s
sleep 30 &
bg=$!
echo $bg > "$d/bg$COLL_RANK.pid"
echo $$ > "$d/ready$COLL_RANK.tmp" && mv "$d/ready$COLL_RANK.tmp" "$d/ready$COLL_RANK.pid"
wait'
for sig in USR1 TERM; do
    "$COLLRUN" --timeout 60 -n 3 sh -c "$sigprog" "$T" "$sig" >"$T/out" 2>"$T/err" &
    cpid=$!
    echo "$cpid" >"$T/collrun.pid"
    if ! wait_files "$T/ready0.pid" "$T/ready1.pid" "$T/ready2.pid"; then
        fail "SIG$sig: ranks did not start"
        kill -9 "$cpid"
    else
        kill -s "$sig" "$cpid"
    fi
    wait "$cpid" 2>/dev/null
    rc=$?
    want=0
    [ "$sig" = TERM ] && want=143
    [ "$rc" -eq "$want" ] || fail "SIG$sig: collrun status $rc (expected $want): $(cat "$T/err")"
    for r in 0 1 2; do
        [ -f "$T/$sig.$r" ] || fail "SIG$sig did not reach rank $r"
        for p in ready$r bg$r; do
            [ -f "$T/$p.pid" ] && ! wait_dead "$(cat "$T/$p.pid")" && fail "SIG$sig: $p survived"
        done
    done
    rm -f "$T"/*.pid
    pass "SIG$sig forwarded to every rank"
done

# ---- 10. --keep-going: a rank killed early does not end the others, and the job succeeds ----
# Rank 3 SIGKILLs itself at once; the others sleep, then leave a marker and exit 0.
run --keep-going --grace 0 -n 4 sh -c \
    'd=$0; [ "$COLL_RANK" = 3 ] && kill -9 $$; sleep 1; touch "$d/kg.$COLL_RANK"' "$T"
ok=1
for r in 0 1 2; do
    [ -f "$T/kg.$r" ] || ok=0
done
line='^collrun: rank 3 \(pid [0-9]+\) was killed by signal 9 \(Killed\); --keep-going: '
summary='^collrun: 3 of 4 ranks finished; rank 3 failed (signal 9) and the job went on without it$'
if [ $ok -eq 1 ] && [ "$rc" -eq 0 ] &&
    grep -Eq "${line}the other 3 ranks continue\$" "$T/err" && grep -q "$summary" "$T/err"; then
    pass "--keep-going: a rank killed early, the others finish, status 0"
else
    fail "--keep-going, rank killed early: status $rc, markers: $(ls "$T"), stderr: $(cat "$T/err")"
fi

# ---- 11. --keep-going: a failure after a rank exited 0 fails the job with its status ----
# Rank 1 exits 3 only once rank 0 has exited 0 (it waits for rank 0 to be gone or a zombie).
prog='
d=$0
if [ "$COLL_RANK" = 0 ]; then
    echo $$ > "$d/r0.tmp" && mv "$d/r0.tmp" "$d/r0.pid"
    exit 0
fi
n=0
while [ ! -f "$d/r0.pid" ]; do
    n=$((n + 1)); [ $n -gt 400 ] && break; sleep 0.05
done
p=$(cat "$d/r0.pid")
while [ -r "/proc/$p/stat" ] && [ "$(sed "s/.*) //" "/proc/$p/stat" | cut -c1)" != Z ]; do
    n=$((n + 1)); [ $n -gt 400 ] && break; sleep 0.05
done
sleep 0.2
exit 3'
run --keep-going -n 2 sh -c "$prog" "$T"
line='^collrun: rank 1 \(pid [0-9]+\) exited with status 3; --keep-going: no other rank is running$'
if [ "$rc" -eq 3 ] && grep -Eq "$line" "$T/err" &&
    grep -q 'job failed: 1 of 2 ranks failed (first: rank 1, status 3)' "$T/err"; then
    pass "--keep-going: a rank failing after another exited 0 gives status 3"
else
    fail "--keep-going, late failure: status $rc (expected 3), stderr: $(cat "$T/err")"
fi
rm -f "$T"/*.pid

# ---- 12. --keep-going: every rank fails, so the job fails with the first one's status ----
run --keep-going -n 3 sh -c 'exit 1'
line='^collrun: rank [0-2] (pid [0-9]*) exited with status 1; --keep-going: '
if [ "$rc" -eq 1 ] && [ "$(grep -c "$line" "$T/err")" -eq 3 ] &&
    grep -q 'job failed: 3 of 3 ranks failed (first: rank [0-2], status 1)' "$T/err"; then
    pass "--keep-going: all ranks exiting 1 give status 1"
else
    fail "--keep-going, all ranks exit 1: status $rc (expected 1), stderr: $(cat "$T/err")"
fi

if [ $nfail -ne 0 ]; then
    echo "test_collrun: $nfail check(s) failed" >&2
    exit 1
fi
echo "test_collrun: all checks passed"
exit 0
