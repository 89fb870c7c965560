# SPDX-License-Identifier: MIT
# Sourced by tests that start a job on fixed ports (MASTER_PORT, COLL_ROOT_ADDR).

# Can ports $@ be bound on every address? Without SO_REUSEADDR a bind also fails where a
# connection in TIME_WAIT holds the port. (Without python3: assume so.)
ports_free() {
    command -v python3 >/dev/null 2>&1 || return 0
    python3 -c 'import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    s.bind(("", int(p)))
    s.close()' "$@" 2>/dev/null
}

# The first of $1 ports in a row that are free now, below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range), where no outgoing connection of the tests running beside
# this one can take them in the meantime; the search starts at a place chosen by the pid.
free_ports() {
    _lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    case $_lo in '' | *[!0-9]*) _lo=32768 ;; esac
    [ "$_lo" -gt 21000 ] || _lo=60000
    _p=$((20000 + $$ % (_lo - 20001 - $1)))
    _n=0
    while [ $_n -lt 200 ] && ! ports_free $(seq "$_p" $((_p + $1 - 1))); do
        _p=$((_p + $1))
        [ $_p -lt $((_lo - $1)) ] || _p=20000
        _n=$((_n + 1))
    done
    echo "$_p"
}
