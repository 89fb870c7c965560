# SPDX-License-Identifier: MIT
# netns_lib.sh -- sourced (POSIX sh) by tests and bench scripts: H "hosts" as network
# namespaces, each joined to a Linux bridge in a private "switch" namespace by a veth pair,
# with an optional rate limit per host link, and a launcher for jobs of N ranks per host.
# Where namespaces cannot be made it can emulate the hosts with COLL_HOSTID on loopback.
# It never touches the interfaces of the namespace it is called from and builds nothing.
#
#   netns_create H [RATE [DELAY]]   make H hosts: 0 done; 77 namespaces unavailable, 1 the
#                                   shaping asked for is impossible (reason in NETNS_WHY)
#   netns_require H [RATE [DELAY]]  netns_create, or exit 77 (skip) saying why
#   netns_emulate H                 H hosts emulated by COLL_HOSTID, ranks on loopback
#   netns_setup H                   netns_create H, else netns_emulate H; says which
#                                   (NETNS_EMULATE=1 in the environment: always emulate)
#   netns_exec h CMD...             run CMD on host h (0-based)
#   netns_run N OUTDIR CMD...       H*N ranks of CMD, rank r on host r/N; rank r's stdout and
#                                   stderr go to OUTDIR/rank<r>.log; status: 0, or the first
#                                   failed rank's (124 on NETNS_TIMEOUT). N may also be one
#                                   count per host, comma-separated ("4,3": ranks 0-3 on host
#                                   0, ranks 4-6 on host 1)
#   netns_atexit 'CMD'              one more command for netns_cleanup
#   netns_cleanup                   stop ranks, delete the namespaces (trapped on EXIT INT TERM)
#
# Host h has address 10.77.0.(h+1)/24 on interface NETNS_IF; rank 0 (host 0) is the bootstrap
# root. RATE (tc syntax: 1gbit, 100mbit) limits each host link in both directions, like a
# full-duplex NIC: tbf on the host's egress and on the switch port toward the host. DELAY
# needs the netem qdisc (one-way delay on the switch port toward each host); tbf and htb
# cannot add propagation delay, only load-dependent queueing delay, so without netem
# netns_create refuses DELAY instead of approximating it.
#
# Settings (set before the calls): NETNS_TIMEOUT (seconds per job, default 300), NETNS_GRACE
# (seconds the other ranks get after one fails, default 3), NETNS_BURST (tbf burst, default
# 128kb), NETNS_QUEUE (tbf queue as a delay bound, default 20ms). Read-only after setup:
# NETNS_MODE (netns|emulate), NETNS_HOSTS, NETNS_RATE, NETNS_DELAY, NETNS_WHY.

NETNS_MODE=
NETNS_HOSTS=0
NETNS_RATE=
NETNS_DELAY=
NETNS_WHY=
NETNS_IF=cn0
NETNS_PREFIX=coll$$-
NETNS_CREATED=
NETNS_PIDS=
NETNS_ATEXIT=
NETNS_TIMEOUT=${NETNS_TIMEOUT:-300}
NETNS_GRACE=${NETNS_GRACE:-3}
NETNS_BURST=${NETNS_BURST:-128kb}
NETNS_QUEUE=${NETNS_QUEUE:-20ms}
# Root ports: one per job, chosen before its ranks start; rank 0 binds it only once it runs.
# Until then any connect() or bind to port 0 on host 0 (the job's own ranks included) may be
# given a port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), and the
# TIME_WAIT such a connection leaves keeps rank 0 from listening on that port for a minute.
# So root ports are drawn from 20000 up to the start of that range on host 0, where the
# kernel never picks a port by itself: unique per job inside the private namespaces; on
# loopback (emulation) also checked with ss where it exists.
NETNS_PORT=

netns_atexit() {
    NETNS_ATEXIT="$NETNS_ATEXIT
$1"
}

# Stop the running job's ranks and delete the namespaces made so far.
netns_delete() {
    for _p in $NETNS_PIDS; do
        netns_alive "$_p" && kill -TERM "${_p%%:*}" 2>/dev/null
    done
    NETNS_PIDS=
    for _ns in $NETNS_CREATED; do
        ip netns del "$_ns" 2>/dev/null
    done
    NETNS_CREATED=
    NETNS_MODE=
}

netns_cleanup() {
    netns_delete
    if [ -n "$NETNS_ATEXIT" ]; then
        eval "$NETNS_ATEXIT"
        NETNS_ATEXIT=
    fi
}

trap 'netns_cleanup' EXIT
trap 'netns_cleanup; trap - EXIT; exit 130' INT
trap 'netns_cleanup; trap - EXIT; exit 143' TERM

# The namespace of host h ("" when hosts are emulated).
netns_name() {
    [ "$NETNS_MODE" = netns ] && printf '%sh%s' "$NETNS_PREFIX" "$1"
}

netns_exec() {
    _h=$1
    shift
    if [ "$NETNS_MODE" = netns ]; then
        ip netns exec "$(netns_name "$_h")" "$@"
    else
        "$@"
    fi
}

# Run "$@", keeping its stderr in NETNS_WHY when it fails.
netns_try() {
    NETNS_WHY=$("$@" 2>&1 >/dev/null) && return 0
    NETNS_WHY="$* : ${NETNS_WHY:-failed}"
    return 1
}

# Host h: namespace, lo up, veth into the bridge, address.
netns_host_add() {
    _ns=$(netns_name "$1")
    _sw=${NETNS_PREFIX}sw
    netns_try ip netns add "$_ns" || return 1
    NETNS_CREATED="$_ns $NETNS_CREATED"
    netns_try ip -n "$_ns" link set lo up &&
        netns_try ip -n "$_sw" link add "p$1" type veth peer name "$NETNS_IF" netns "$_ns" &&
        netns_try ip -n "$_sw" link set "p$1" master br0 &&
        netns_try ip -n "$_sw" link set "p$1" up &&
        netns_try ip -n "$_ns" addr add "10.77.0.$(($1 + 1))/24" dev "$NETNS_IF" &&
        netns_try ip -n "$_ns" link set "$NETNS_IF" up
}

# Rate and delay of host h's link (see the header for where each qdisc sits).
netns_host_shape() {
    _ns=$(netns_name "$1")
    _sw=${NETNS_PREFIX}sw
    if [ -n "$NETNS_RATE" ]; then
        netns_try tc -n "$_ns" qdisc add dev "$NETNS_IF" root tbf rate "$NETNS_RATE" \
            burst "$NETNS_BURST" latency "$NETNS_QUEUE" || return 1
    fi
    if [ -n "$NETNS_DELAY" ]; then
        # shellcheck disable=SC2086 # the rate clause is empty or two words
        netns_try tc -n "$_sw" qdisc add dev "p$1" root netem delay "$NETNS_DELAY" \
            ${NETNS_RATE:+rate "$NETNS_RATE"} limit 100000 || {
            _why="cannot emulate a delay of $NETNS_DELAY: the netem qdisc is not usable here"
            NETNS_WHY="$_why ($NETNS_WHY); tbf/htb only add load-dependent queueing delay"
            return 1
        }
    elif [ -n "$NETNS_RATE" ]; then
        netns_try tc -n "$_sw" qdisc add dev "p$1" root tbf rate "$NETNS_RATE" \
            burst "$NETNS_BURST" latency "$NETNS_QUEUE" || return 1
    fi
}

netns_create() {
    NETNS_WHY=
    NETNS_RATE=${2:-}
    NETNS_DELAY=${3:-}
    if [ "$(id -u)" -ne 0 ]; then
        NETNS_WHY="not root"
        return 77
    fi
    if ! command -v ip >/dev/null 2>&1; then
        NETNS_WHY="iproute2 (ip) is not installed"
        return 77
    fi
    if [ -n "$NETNS_RATE$NETNS_DELAY" ] && ! command -v tc >/dev/null 2>&1; then
        NETNS_WHY="tc is not installed: cannot shape links"
        return 1
    fi
    if [ "$1" -lt 1 ] || [ "$1" -gt 250 ]; then
        NETNS_WHY="host count $1 out of range 1-250"
        return 1
    fi
    NETNS_MODE=netns
    NETNS_HOSTS=$1
    _sw=${NETNS_PREFIX}sw
    if ! netns_try ip netns add "$_sw"; then
        NETNS_MODE=
        return 77
    fi
    NETNS_CREATED="$_sw"
    if ! { netns_try ip -n "$_sw" link add br0 type bridge forward_delay 0 &&
           netns_try ip -n "$_sw" link set br0 up; }; then
        netns_delete
        return 77
    fi
    _h=0
    while [ "$_h" -lt "$1" ]; do
        if ! netns_host_add "$_h"; then
            netns_delete
            return 77
        fi
        if ! netns_host_shape "$_h"; then
            netns_delete
            return 1
        fi
        _h=$((_h + 1))
    done
    return 0
}

# For scripts that mean nothing without real namespaces (or without the shaping asked for).
netns_require() {
    netns_create "$@" && return 0
    echo "SKIP: cannot make $1 network namespace hosts: $NETNS_WHY"
    exit 77
}

netns_emulate() {
    NETNS_MODE=emulate
    NETNS_HOSTS=$1
    NETNS_RATE=
    NETNS_DELAY=
}

# Real namespaces when possible, else emulation; prints which, returns 0 either way.
netns_setup() {
    if [ "${NETNS_EMULATE:-0}" != 1 ] && netns_create "$1"; then
        echo "netns: $1 hosts as network namespaces on a bridge (10.77.0.0/24)"
        return 0
    fi
    [ "${NETNS_EMULATE:-0}" = 1 ] && NETNS_WHY="NETNS_EMULATE=1"
    echo "netns unavailable: emulating hosts with COLL_HOSTID ($NETNS_WHY)"
    netns_emulate "$1"
}

# State and start time of process $1 (fields 3 and 22 of /proc/PID/stat) in _pstate and
# _pstart; status 1 when there is no such process.
netns_pstat() {
    { read -r _stat < "/proc/$1/stat"; } 2>/dev/null || return 1
    # shellcheck disable=SC2086 # the fields after "(comm) ", split into words
    set -- ${_stat##*) }
    [ $# -ge 20 ] || return 1
    _pstate=$1
    shift 19
    _pstart=$1
}

# Is the rank $1 (PID:STARTTIME, as in NETNS_PIDS) still running, not a zombie? The shell reaps
# its children whenever it waits for a command (dash does, keeping their status for wait), and
# then their pids may go to any new process: the start time tells ours from such a one, which
# must be neither waited for nor killed. Only builtins run between this and a kill, so no
# child can be reaped in between.
netns_alive() {
    netns_pstat "${1%%:*}" && [ "$_pstart" = "${1#*:}" ] || return 1
    case $_pstate in
    Z* | X*) return 1 ;;
    esac
    return 0
}

netns_port_next() {
    _end=$(netns_exec 0 cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    _end=${_end%%[!0-9]*}
    # an ephemeral range that starts (almost) as low as 20000 leaves no port it cannot take
    [ -n "$_end" ] && [ "$_end" -gt 21000 ] && [ "$_end" -le 65536 ] || _end=60000
    [ -n "$NETNS_PORT" ] || NETNS_PORT=$((20000 + $$ % (_end - 20000) - 1))
    NETNS_PORT=$((NETNS_PORT + 1))
    [ "$NETNS_PORT" -lt "$_end" ] || NETNS_PORT=20000
    if [ "$NETNS_MODE" = emulate ] && command -v ss >/dev/null 2>&1; then
        while [ -n "$(ss -Htan "sport = :$NETNS_PORT" 2>/dev/null)" ]; do
            NETNS_PORT=$((NETNS_PORT + 1))
            [ "$NETNS_PORT" -lt "$_end" ] || NETNS_PORT=20000
        done
    fi
}

netns_run() {
    if [ -z "$NETNS_MODE" ]; then
        echo "netns_run: no hosts: call netns_setup, netns_create or netns_emulate first" >&2
        return 99
    fi
    _out=$2
    case $1 in
    *,*) _per=$(echo "$1" | tr ',' ' ') ;;
    *)
        _per=
        _h=0
        while [ "$_h" -lt "$NETNS_HOSTS" ]; do
            _per="$_per $1"
            _h=$((_h + 1))
        done
        ;;
    esac
    shift 2
    _np=0
    _h=0
    for _c in $_per; do
        _np=$((_np + _c))
        _h=$((_h + 1))
    done
    if [ "$_h" -ne "$NETNS_HOSTS" ]; then
        echo "netns_run: $_h rank counts for $NETNS_HOSTS hosts" >&2
        return 99
    fi
    netns_port_next
    if [ "$NETNS_MODE" = netns ]; then
        _root=10.77.0.1:$NETNS_PORT
        _ifname="=$NETNS_IF"
        _hostpre=$NETNS_PREFIX
    else
        _root=127.0.0.1:$NETNS_PORT
        _ifname="=lo"
        _hostpre=emuhost$$-
    fi
    _secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    mkdir -p "$_out" || return 99
    NETNS_PIDS=
    _r=0
    _h=0
    for _c in $_per; do
        _pre="env"
        [ "$NETNS_MODE" = netns ] && _pre="ip netns exec $(netns_name "$_h")"
        _l=0
        while [ "$_l" -lt "$_c" ]; do
            # One process per rank, whose pid is $!: "ip netns exec" and env exec timeout, and
            # timeout passes TERM on to the rank, so killing that pid stops the rank too.
            # shellcheck disable=SC2086 # $_pre is a command prefix: split it into words
            $_pre timeout -k 5 "$NETNS_TIMEOUT" env COLL_RANK="$_r" COLL_NRANKS="$_np" \
                COLL_LOCAL_RANK="$_l" COLL_LOCAL_NRANKS="$_c" COLL_ROOT_ADDR="$_root" \
                COLL_JOB_SECRET="$_secret" COLL_HOSTID="${_hostpre}h$_h" \
                COLL_SOCKET_IFNAME="$_ifname" "$@" < /dev/null > "$_out/rank$_r.log" 2>&1 &
            # not reaped yet: nothing has waited since it started
            netns_pstat "$!" || _pstart=gone
            NETNS_PIDS="$NETNS_PIDS $!:$_pstart"
            _r=$((_r + 1))
            _l=$((_l + 1))
        done
        _h=$((_h + 1))
    done
    # Reap ranks as they end; once one fails the others get NETNS_GRACE seconds, then TERM,
    # so a crash costs seconds rather than the library's own timeouts.
    _st=0
    _left=$NETNS_PIDS
    _kill_at=
    while [ -n "$_left" ]; do
        _still=
        for _p in $_left; do
            if netns_alive "$_p"; then
                _still="$_still $_p"
                continue
            fi
            wait "${_p%%:*}"
            _rc=$?
            if [ "$_rc" -ne 0 ] && [ "$_st" -eq 0 ]; then
                _st=$_rc
                _kill_at=$(($(date +%s) + NETNS_GRACE))
            fi
        done
        _left=$_still
        [ -n "$_left" ] || break
        if [ -n "$_kill_at" ] && [ "$(date +%s)" -ge "$_kill_at" ]; then
            for _p in $_left; do
                netns_alive "$_p" && kill -TERM "${_p%%:*}" 2>/dev/null
            done
            _kill_at=$(($(date +%s) + 10))
        fi
        sleep 0.1
    done
    NETNS_PIDS=
    return "$_st"
}
