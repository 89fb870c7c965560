#!/bin/bash
# SPDX-License-Identifier: MIT
# Fault-injection suite: TRIALS trials (default 100) of each fault kind, each on a random
# collective x algorithm x transport x rank count x victim, run under collrun with
# COLL_TIMEOUT=2. Every trial must end without a hang (collrun's --timeout) and without a crash
# (every rank but a killed victim leaves its result line), survivors must report an error
# naming the cause within COLL_TIMEOUT + 1 s of the fault (or of when they last moved after it: a
# call that returned, the last step of the call that timed out), and faults that must not
# disturb the job (garbage on every port) must leave every result correct.
#   usage: check-faults.sh [TRIALS] [KIND...]   (kinds: kill stop close corrupt garbage shmfull args)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${top_builddir:-$(cd "$here/../.." && pwd)}
trials=${1:-100}
shift || true
kinds=${*:-kill stop close corrupt garbage shmfull args}
collrun=$top/collrun
prog=$top/tests/faults/fault_rank
timeout_s=2
RANDOM=${FAULT_SEED:-4242}
work=$(mktemp -d /tmp/coll-faults.XXXXXX)
[ -n "${FAULT_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fails=0
total=0
trial_dir="" # the trial being checked, for fail()'s details
trial_n=0
trial_t0=0

algos_for() { # collective transport -> algorithms to pick from
    case $1 in
    allreduce) echo "ring tree recursive_doubling rabenseifner" $([ "$2" = shm ] && echo oneshot twoshot) ;;
    reduce_scatter) echo "ring recursive_halving" ;;
    allgather) echo "ring bruck" ;;
    broadcast | reduce) echo "ring tree" ;;
    alltoall) echo "pairwise" ;;
    barrier) echo "dissemination" ;;
    esac
}

pick() { # words... -> one of them
    local a=("$@")
    echo "${a[RANDOM % ${#a[@]}]}"
}

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
    [ -n "$trial_dir" ] || return 0
    # what each rank wrote, and how the job ended, so that a failure seen once can be read
    local r
    echo "  trial took $(($(date +%s) - trial_t0)) s; fault: $(cat "$trial_dir/fault" 2>/dev/null)"
    for ((r = 0; r < trial_n; r++)); do
        echo "  rank $r: $(cat "$trial_dir/rank-$r" 2>/dev/null || echo '(nothing)')"
    done
    tail -8 "$trial_dir/out" 2>/dev/null | sed 's/^/  out: /'
    if [ -s "$trial_dir/stacks" ]; then
        head -150 "$trial_dir/stacks" | sed 's/^/  stacks: /'
    fi
}

kill_victim() { # dir: the victim that wrote its pid there, if it still runs
    local pid
    pid=$(awk '$2 == "pid" { print $3 }' "$1/fault" 2>/dev/null)
    if [ -n "$pid" ] && grep -q fault_rank "/proc/$pid/cmdline" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
    fi
}

# What every process of a job that is about to hang is doing, once, into DIR/stacks: its state
# (a stopped or frozen survivor shows as T or D), each thread's kernel wait channel and system
# call and, where gdb is installed, every thread's stack. A hang seen once in a suite run can
# then be read instead of guessed at. (libcoll's SIGUSR1 dump logs at warning level, which the
# trials' COLL_DEBUG=error hides.)
dump_ranks() { # dir
    local d=$1 pid
    {
        echo "== host: load $(cut -d' ' -f1-3 /proc/loadavg)," \
            "$(grep MemAvailable /proc/meminfo | tr -s ' ')," \
            "pressure: $(for r in cpu memory io; do printf '%s %s; ' $r "$(head -1 /proc/pressure/$r 2>/dev/null)"; done)"
    } >>"$d/stacks" 2>&1
    for pid in $(pgrep -f "fault_rank .*--dir $d\$" 2>/dev/null); do
        {
            echo "== pid $pid: $(awk '{ print "state", $3 }' "/proc/$pid/stat" 2>/dev/null)" \
                "wchan $(cat "/proc/$pid/wchan" 2>/dev/null)" \
                "args: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -o -- '--victim [0-9]*')"
            for t in /proc/"$pid"/task/*; do
                echo "   task ${t##*/}: $(awk '{ print $3 }' "$t/stat" 2>/dev/null)" \
                    "wchan $(cat "$t/wchan" 2>/dev/null) syscall $(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
            done
            if command -v gdb >/dev/null; then
                timeout 20 gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(#|Thread)'
            fi
        } >>"$d/stacks" 2>&1
    done
}

# Waits for the job. A stopped victim never exits by itself: once every survivor has written its
# line (or the job has ended), it is killed, so that a trial need not wait out collrun's grace.
# A job still running 45 s in (collrun's --timeout is 60) has its ranks described (dump_ranks).
watch_job() { # dir nranks victim collrun-pid kind
    local d=$1 n=$2 victim=$3 job=$4 kind=$5 r have pass dumped=0
    for ((pass = 0; pass < 700; pass++)); do # 70 s at most, beyond collrun's own --timeout
        kill -0 "$job" 2>/dev/null || return
        if [ "$kind" = stop ]; then
            have=0
            for ((r = 0; r < n; r++)); do
                [ $r = "$victim" ] || [ ! -s "$d/rank-$r" ] || have=$((have + 1))
            done
            if [ $have = $((n - 1)) ]; then
                kill_victim "$d"
                return
            fi
        fi
        if [ $dumped = 0 ] && [ $pass -ge 450 ]; then
            dump_ranks "$d"
            dumped=1
        fi
        sleep 0.1
    done
}

trial() { # kind index
    local kind=$1 i=$2 d=$work/$1-$2 colls tp coll algo n victim count rc
    mkdir -p "$d"
    colls="allreduce reduce_scatter allgather broadcast reduce alltoall barrier"
    case $kind in
    close | corrupt) tp=tcp ;;
    shmfull) tp=shm ;;
    *) tp=$(pick shm tcp) ;;
    esac
    coll=$(pick $colls)
    algo=$(pick $(algos_for "$coll" "$tp"))
    n=$((2 + RANDOM % 3))
    victim=$((RANDOM % n))
    count=$(pick 4096 65536 262144)
    local fault=$kind
    [ "$kind" = shmfull ] && fault=none
    local desc="$kind #$i: $coll:$algo over $tp, $n ranks, victim $victim, $count floats"
    trial_dir=$d trial_n=$n trial_t0=$(date +%s)
    # the grace is long: a survivor's promptness is judged by the time it wrote, not by collrun
    # (on a loaded host one can write seconds after another that exited)
    local cmd=("$collrun" --timeout 60 --grace 20 -n "$n" -x COLL_TRANSPORT="$tp"
        -x COLL_ALGO="$coll:$algo" -x COLL_TIMEOUT=$timeout_s -x COLL_DEBUG=error
        "$prog" --fault "$fault" --coll "$coll" --victim "$victim" --at 3 --iters 100
        --count "$count" --seed "$RANDOM" --dir "$d")
    if [ "$kind" = shmfull ]; then
        # a private /dev/shm of 64 KiB: the segments cannot be created
        unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /dev/shm && exec "$@"' sh "${cmd[@]}" \
            >"$d/out" 2>&1
        rc=$?
    else
        "${cmd[@]}" >"$d/out" 2>&1 &
        local job=$!
        # a background job ignores SIGINT: an interrupt of the suite ends the job through collrun
        trap 'kill -TERM "$job" 2>/dev/null; kill_victim "$d"; wait "$job"; exit 130' INT TERM
        watch_job "$d" "$n" "$victim" "$job" "$kind"
        wait "$job"
        rc=$?
        trap - INT TERM
    fi
    total=$((total + 1))
    if [ $rc = 124 ]; then
        fail "$desc: hang (collrun --timeout)"
        return
    fi
    local fault_t
    fault_t=$(cut -d' ' -f1 "$d/fault" 2>/dev/null)
    local r line code t msg errors=0
    for ((r = 0; r < n; r++)); do
        line=$(cat "$d/rank-$r" 2>/dev/null)
        if [ -z "$line" ]; then
            if { [ "$kind" = kill ] || [ "$kind" = stop ]; } && [ $r = "$victim" ]; then
                continue
            fi
            fail "$desc: rank $r left no result (crashed?); collrun said: $(tail -3 "$d/out")"
            return
        fi
        read -r code t last msg <<<"${line#* }"
        case $line in
        ok) continue ;;
        init-error*)
            if [ "$kind" != shmfull ]; then
                fail "$desc: rank $r failed to initialise: $line"
                return
            fi
            case $msg in
            */dev/shm* | *space* | *shared*) ;;
            *)
                fail "$desc: rank $r: init error does not name shared memory: $msg"
                return
                ;;
            esac
            errors=$((errors + 1))
            continue
            ;;
        esac
        errors=$((errors + 1))
        # a wrong result is reported as -10; only junk written inside a TCP payload (which has
        # no checksum) may cause one, and the stream's framing then fails too
        [ "$code" = -10 ] && [ "$kind" != corrupt ] && { fail "$desc: rank $r computed a wrong result"; return; }
        # within COLL_TIMEOUT + 1 s of the fault, or of when the fault left the rank free to go
        # on: its last call that returned, or the last step of the call that timed out (a
        # reduce's senders over TCP fill a stopped root's sockets before they wait; on a loaded
        # machine that takes seconds)
        if [ -n "$fault_t" ] && late=$(awk -v t="$t" -v f="$fault_t" -v k="$last" -v l=$((timeout_s + 1)) \
            'BEGIN { if (k > f) f = k; printf "%.2f", t - f; exit !(t - f > l) }'); then
            fail "$desc: rank $r reported $late s after the fault or its last move after it (limit $((timeout_s + 1)) s): $msg"
            return
        fi
        if [ "$kind" = kill ] && [[ $msg != *"rank $victim"* ]]; then
            fail "$desc: rank $r's error does not name the killed rank $victim: $msg"
            return
        fi
    done
    case $kind in
    garbage)
        [ $rc = 0 ] && [ $errors = 0 ] || fail "$desc: the job was disturbed (exit $rc, $errors errors)"
        ;;
    kill | stop)
        # every survivor meets the fault at the latest in the closing all-reduce
        [ $errors -ge $((n - 1)) ] || fail "$desc: only $errors of $((n - 1)) survivors reported the fault"
        # a killed rank is named by everyone (checked above); a stopped one only by the ranks
        # that wait on it directly, and those may hear of another survivor's abort first
        ;;
    close | corrupt)
        if [[ $(cat "$d/fault" 2>/dev/null) != *none* ]]; then
            [ $errors -ge 1 ] || fail "$desc: the fault went unnoticed"
        fi
        ;;
    shmfull)
        [ $errors = "$n" ] || fail "$desc: $errors of $n ranks reported the full /dev/shm"
        ;;
    esac
}

for kind in $kinds; do
    start_fails=$fails
    t0=$(date +%s)
    for ((i = 1; i <= trials; i++)); do
        if [ "$kind" = args ]; then
            trial_dir=""
            total=$((total + 1))
            "$top/tests/mp/test_args" >"$work/args.out" 2>&1 || fail "args #$i: $(tail -3 "$work/args.out")"
        else
            trial "$kind" "$i"
        fi
    done
    echo "faults: $kind: $trials trials, $((fails - start_fails)) failed ($(($(date +%s) - t0)) s)"
done
leftover=$(ls /dev/shm 2>/dev/null | grep -c '^coll-' || true)
echo "faults: $total trials, $fails failed; /dev/shm segments left: $leftover"
[ $fails = 0 ]
