# shellcheck shell=bash
# A multi-host test bed of Linux network namespaces for the usnic BTL MPI
# tests; source after test/lib/mpitest.sh (needs root, iproute2, unshare).
#
#   head  (namespace usnic-mh<pid>-head): runs mpirun, holds the bridge br0
#         with NSB_HEAD_ADDR (10.211.0.1/24)
#   hosts h1, h2, ... (namespaces usnic-mh<pid>-hN): one veth each, named
#         NSB_DEV (eth0) on the host side and vhN on the bridge side, with
#         address 10.211.0.(10+N)/24; MTU NSB_MTU (1500, the veth default;
#         a caller may set NSB_MTU after sourcing this file, before nsbed_up)
#
# Every run of a script makes its own namespaces (the script's pid is in
# their names), so concurrent runs do not meet.  mpirun starts its daemons
# on the hosts with test/lib/netns-rsh.sh as remote-shell agent: it runs
# the daemon in the host's network namespace and in a private UTS
# namespace whose hostname is the host's name (h1-<pid>, ...), so every
# "host" also has its own hostname and its own Open MPI session directory.
# The runtime (ORTE's TCP out-of-band channel) and the MPI traffic both use
# the bridge; nothing leaves the namespaces.
#
#   nsbed_up NHOSTS       build it (reports FAIL and returns 1 if it cannot)
#   nsbed_down            end every process inside, delete the namespaces
#                         (installed as EXIT trap by nsbed_up)
#   nsbed_hostfile SLOTS  write a hostfile of all hosts, print its name
#   nsbed_exec HOST CMD.. run CMD in the namespace of host HOST (1, 2, ..)
#   nsbed_run_mpi HOSTFILE NP PROG [ARGS...]
#                         run_mpi (see mpitest.sh) across the hosts
#   nsbed_start_mpi / nsbed_wait_mpi
#                         the same in two halves (act while the job runs)
#   nsbed_check_placement NAME NP PER_HOST
#                         check where the ranks of the last run ran
#   nsbed_ifstat HOST COUNTER   a statistics counter of HOST's NSB_DEV
#   nsbed_leftovers       processes still running in the namespaces
#   nsbed_no_leftovers NAME   FAIL if processes of the last run stay behind
#   nsbed_removed NAME    PASS/FAIL: every namespace of the bed is gone

NSB_NET=10.211.0
NSB_PREFIX=24
NSB_CIDR=$NSB_NET.0/$NSB_PREFIX
NSB_HEAD_ADDR=$NSB_NET.1
NSB_DEV=eth0
NSB_MTU=1500    # MTU of both ends of every veth (read by nsbed_up)
NSB_BASE=usnic-mh$$
NSB_HEAD=$NSB_BASE-head
NSB_HOSTS=0
NSB_MADE=()
NSB_REMOVED=() # what the last nsbed_down removed
NSB_AGENT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns-rsh.sh

nsbed_ns() { echo "$NSB_BASE-h$1"; }
nsbed_addr() { echo "$NSB_NET.$((10 + $1))"; }
nsbed_name() { echo "h$1-$$"; }

nsbed_exec() {
    local h=$1
    shift
    ip netns exec "$(nsbed_ns "$h")" "$@"
}

# _nsbed_step DESCRIPTION CMD...: run a set-up step; on failure remember
# what failed and the command's message in NSB_WHY.
_nsbed_step() {
    local what=$1 out
    shift
    if ! out=$("$@" 2>&1); then
        NSB_WHY="$what failed: $* -> ${out:-no message}"
        return 1
    fi
}

# _nsbed_preflight: the traps that remove the bed, and what building one
# needs (root, iproute2, unshare, the remote-shell agent): NSB_WHY says
# what is missing.
_nsbed_preflight() {
    NSB_WHY=
    trap nsbed_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    if [ "$(id -u)" -ne 0 ]; then
        NSB_WHY="must run as root to create network namespaces (uid $(id -u))"
    elif ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
        NSB_WHY="needs ip (iproute2) and unshare (util-linux)"
    elif [ ! -x "$NSB_AGENT" ]; then
        NSB_WHY="remote-shell agent $NSB_AGENT is missing or not executable"
    fi
}

# _nsbed_rsh_map N: tell netns-rsh.sh which address is which host (its
# namespace and hostname), for hosts 1..N.
_nsbed_rsh_map() {
    local h
    NETNS_RSH_MAP=
    for ((h = 1; h <= $1; h++)); do
        NETNS_RSH_MAP+="$(nsbed_addr "$h")=$(nsbed_ns "$h")=$(nsbed_name "$h") "
    done
    export NETNS_RSH_MAP
}

# nsbed_removed NAME: after nsbed_down, one PASS/FAIL line: no namespace of
# this bed is left.
nsbed_removed() {
    local left
    left=$(ip netns list | grep -F -e "$NSB_BASE-" || true)
    if [ -z "$left" ]; then
        pass "$1 (${#NSB_REMOVED[@]} namespaces)"
    else
        fail "$1" "namespaces left: $left"
    fi
}

nsbed_up() {
    local n=$1 h ns
    _nsbed_preflight
    if [ -z "$NSB_WHY" ]; then
        _nsbed_step "creating namespace $NSB_HEAD" ip netns add "$NSB_HEAD" &&
            NSB_MADE+=("$NSB_HEAD") &&
            _nsbed_step "loopback up in head" ip -n "$NSB_HEAD" link set lo up &&
            _nsbed_step "creating the bridge" ip -n "$NSB_HEAD" link add br0 type bridge &&
            _nsbed_step "bridge address" \
                ip -n "$NSB_HEAD" addr add "$NSB_HEAD_ADDR/$NSB_PREFIX" dev br0 &&
            _nsbed_step "bridge up" ip -n "$NSB_HEAD" link set br0 up
    fi
    for ((h = 1; h <= n && ${#NSB_WHY} == 0; h++)); do
        ns=$(nsbed_ns "$h")
        _nsbed_step "creating namespace $ns" ip netns add "$ns" &&
            NSB_MADE+=("$ns") &&
            _nsbed_step "loopback up in h$h" ip -n "$ns" link set lo up &&
            _nsbed_step "veth pair for h$h" ip -n "$NSB_HEAD" link add "vh$h" \
                mtu "$NSB_MTU" type veth peer name "$NSB_DEV" mtu "$NSB_MTU" netns "$ns" &&
            _nsbed_step "attaching vh$h to br0" \
                ip -n "$NSB_HEAD" link set "vh$h" master br0 up &&
            _nsbed_step "address of h$h" \
                ip -n "$ns" addr add "$(nsbed_addr "$h")/$NSB_PREFIX" dev "$NSB_DEV" &&
            _nsbed_step "$NSB_DEV up in h$h" ip -n "$ns" link set "$NSB_DEV" up &&
            NSB_HOSTS=$h
    done
    if [ -n "$NSB_WHY" ]; then
        fail "multihost test bed" "cannot build the network-namespace test bed: $NSB_WHY"
        nsbed_down
        return 1
    fi
    # a bridge port forwards only some time after it came up: wait for it
    _nsbed_wait_links || {
        fail "multihost test bed" "hosts not reachable over br0: $NSB_WHY"
        nsbed_down
        return 1
    }
    _nsbed_rsh_map "$n"
    echo "    test bed: head $NSB_HEAD (br0 $NSB_HEAD_ADDR/$NSB_PREFIX), hosts:" \
         "$NETNS_RSH_MAP"
}

# _nsbed_wait_links: every bridge port is up and forwarding.
_nsbed_wait_links() {
    local h t state
    for ((h = 1; h <= NSB_HOSTS; h++)); do
        for ((t = 0; t < 50; t++)); do
            state=$(ip -n "$NSB_HEAD" -o link show "vh$h" 2>/dev/null)
            case $state in *"state UP"*) break ;; esac
            sleep 0.1
        done
        for ((t = 0; t < 50; t++)); do
            state=$(bridge -n "$NSB_HEAD" link show dev "vh$h" 2>/dev/null)
            case $state in *"state forwarding"*) break ;; esac
            sleep 0.1
        done
        case $state in
            *"state forwarding"*) ;;
            *) NSB_WHY="bridge port vh$h not forwarding: $state"; return 1 ;;
        esac
    done
}

# nsbed_down: end the processes left in our namespaces (by pid: only what
# this script started can be in them), then delete the namespaces.
nsbed_down() {
    local ns pids t
    for ns in "${NSB_MADE[@]}"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] || continue
        # shellcheck disable=SC2086 # one pid per word
        kill -TERM $pids 2>/dev/null
    done
    for ns in "${NSB_MADE[@]}"; do
        for ((t = 0; t < 30; t++)); do
            pids=$(ip netns pids "$ns" 2>/dev/null)
            [ -n "$pids" ] || break
            sleep 0.1
        done
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
    for ns in "${NSB_MADE[@]}"; do
        ip netns delete "$ns" || echo "netns.sh: could not delete namespace $ns" >&2
    done
    NSB_REMOVED=("${NSB_MADE[@]}")
    NSB_MADE=()
    NSB_HOSTS=0
}

# nsbed_hostfile SLOTS: a hostfile listing every host's address with SLOTS
# slots; prints its file name.
nsbed_hostfile() {
    local slots=$1 h f=$TEST_TMP/logs/$MT_NAME.$$.hosts.$1
    for ((h = 1; h <= NSB_HOSTS; h++)); do
        echo "$(nsbed_addr "$h") slots=$slots"
    done > "$f"
    echo "$f"
}

# nsbed_run_mpi HOSTFILE NP PROG [ARGS...]: like run_mpi (mpitest.sh: same
# log layout, RUN_LOG and MT_PROG set, status 124 = timed out), but mpirun
# runs in head and the ranks on the hosts of HOSTFILE.  MPI traffic over
# "btl usnic,self" on the test bed's subnet (given as a CIDR); the BTL's
# verbose output (btl_base_verbose 100) is in the log.  EXTRA_MCA is added.
nsbed_run_mpi() {
    nsbed_start_mpi "$@"
    nsbed_wait_mpi
}

# nsbed_start_mpi HOSTFILE NP PROG [ARGS...]: nsbed_run_mpi's job started in
# the background (its pid in NSB_JOB); the ranks' output collects under
# $RUN_LOG.d until nsbed_wait_mpi waits for the job and finishes the log.
nsbed_start_mpi() {
    local hf=$1 np=$2 prog=$3 dir
    shift 3
    MT_RUNS=$((MT_RUNS + 1))
    MT_PROG=$(basename "$prog")
    RUN_LOG=$TEST_TMP/logs/$MT_NAME.$$.$MT_RUNS.$MT_PROG.log
    dir=$RUN_LOG.d
    rm -rf "$dir"

    # shellcheck disable=SC2054 # "usnic,self" is one argument
    local -a cmd=(mpirun --allow-run-as-root --hostfile "$hf" -np "$np"
                  --bind-to none
                  --mca plm_rsh_agent "$NSB_AGENT"
                  --mca oob_tcp_if_include "$NSB_CIDR"
                  --output-filename "$dir:nocopy"
                  --mca pml ob1 --mca btl usnic,self
                  --mca btl_usnic_if_include "$NSB_CIDR"
                  --mca btl_usnic_print_stats 1 --mca btl_base_verbose 100)
    # shellcheck disable=SC2206 # EXTRA_MCA is meant to be word-split
    cmd+=(${EXTRA_MCA:-} "$prog" "$@")

    echo "# ip netns exec $NSB_HEAD ${cmd[*]}" > "$RUN_LOG"
    NSB_JOB_NP=$np
    NSB_JOB_ARGS=("$@")
    NSB_JOB_START=$SECONDS
    # in the background: a signal to this script runs its traps (and so
    # nsbed_down) at once instead of after mpirun
    ip netns exec "$NSB_HEAD" timeout -k 10 "$TEST_TIMEOUT" "${cmd[@]}" \
        >> "$RUN_LOG" 2>&1 < /dev/null &
    NSB_JOB=$!
}

# nsbed_wait_mpi: wait for nsbed_start_mpi's job; returns its status (as
# run_mpi does: 124 = timed out) with the log completed.
nsbed_wait_mpi() {
    local rc
    wait "$NSB_JOB"
    rc=$?
    run_log_finish "$NSB_JOB_NP" "$rc" "$NSB_JOB_START" "${NSB_JOB_ARGS[@]}"
}

# nsbed_ifstat HOST COUNTER: statistics counter (tx_bytes, rx_packets, ...)
# of the veth NSB_DEV in host HOST.
nsbed_ifstat() {
    nsbed_exec "$1" cat "/sys/class/net/$NSB_DEV/statistics/$2" 2>/dev/null || echo 0
}

# nsbed_wait_sent HOST BYTES [FROM]: wait (at most 30 s) until HOST's
# interface has sent BYTES more than FROM (its tx_bytes when the job was
# started; default: now), so that a job's traffic is under way.
nsbed_wait_sent() {
    local h=$1 bytes=$2 from=${3:-} t
    [ -n "$from" ] || from=$(nsbed_ifstat "$h" tx_bytes)
    for ((t = 0; t < 150; t++)); do
        [ $(($(nsbed_ifstat "$h" tx_bytes) - from)) -gt "$bytes" ] && return 0
        sleep 0.2
    done
    return 1
}

# nsbed_leftovers: "NAMESPACE: PID(COMMAND) ..." for every process still in
# one of our namespaces (empty if none).
nsbed_leftovers() {
    local ns pid out=
    for ns in "${NSB_MADE[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            out+="$ns: $pid($(cat "/proc/$pid/comm" 2>/dev/null)) "
        done
    done
    echo "$out"
}

# nsbed_no_leftovers NAME: no process of the last run is still in the
# namespaces (mpirun and the orted daemons must have exited with the job);
# a FAIL line if some are, after 3 s.
nsbed_no_leftovers() {
    local left t
    for ((t = 0; t < 30; t++)); do
        left=$(nsbed_leftovers)
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    fail "$1: runtime shut down" "processes left after mpirun exited: $left"
}

# nsbed_check_placement NAME NP PER_HOST: the last nsbed_run_mpi ran rank r
# on host r / PER_HOST + 1 (mpirun maps by slot), shown by each rank's own
# output: the BTL's "using provider udp device DEV (ADDR/PREFIX): datagram
# N bytes" line names NSB_DEV with that host's address and N = NSB_MTU - 28
# (1472: IP and UDP headers off the veth's MTU), the [usnic stats] line names
# the host's hostname and NSB_DEV, and the rank sent to every other rank
# over usnic ("bml: Using usnic btl for send to" each peer).  So the ranks
# ran in the hosts' namespaces, each host's ranks apart from the other
# hosts', and carried the job over the veths.  One PASS or FAIL line.
nsbed_check_placement() {
    local name=$1 np=$2 per=$3 r h addr name_h mtu why='' table line
    local -a got
    table=$(awk '
        /^==== rank [0-9]+ / { r = $3; next }
        /^==== / { r = ""; next }
        r == "" { next }
        /btl:usnic: using provider / {
            s = substr($0, index($0, "using provider "))
            nw = split(s, w, " ")
            dev[r] = w[5]; a = w[6]; gsub(/[():]/, "", a); addr[r] = a
            for (i = 1; i < nw; i++) if (w[i] == "datagram") dg[r] = w[i + 1]
            nmod[r]++
        }
        /\[usnic stats\]/ {
            n = split(substr($0, index($0, "[usnic stats]")), f, " ")
            for (i = 3; i <= n; i++) {
                if (f[i] ~ /^host=/) host[r] = substr(f[i], 6)
                if (f[i] ~ /^dev=/) sdev[r] = substr(f[i], 5)
            }
        }
        /mca: bml: Using usnic btl for send to / {
            p = substr($0, index($0, "send to ") + 8); sub(/ .*/, "", p)
            if (!((r, p) in peer)) { peer[r, p] = 1; npeer[r]++ }
        }
        END {
            for (r = 0; r < np; r++)
                printf "%d %s %s %s %s %s %d %d\n", r, v(dev[r]), v(addr[r]),
                       v(dg[r]), v(host[r]), v(sdev[r]), npeer[r], nmod[r]
        }
        function v(x) { return x == "" ? "-" : x }' np="$np" "$RUN_LOG")
    for ((r = 0; r < np; r++)); do
        line=$(grep "^$r " <<< "$table")
        read -r -a got <<< "$line"
        h=$((r / per + 1))
        addr=$(nsbed_addr "$h")
        name_h=$(nsbed_name "$h")
        mtu=$(nsbed_exec "$h" cat "/sys/class/net/$NSB_DEV/mtu" 2>/dev/null)
        # got: rank dev addr/prefix datagram host stats-dev usnic-peers modules
        [ "${got[7]:-0}" -eq 1 ] ||
            why+="; rank $r: ${got[7]:-0} 'using provider' lines, expected 1"
        [ "${got[1]}" = "$NSB_DEV" ] && [ "${got[5]}" = "$NSB_DEV" ] ||
            why+="; rank $r: device ${got[1]} / stats dev=${got[5]}, expected $NSB_DEV"
        [ "${got[2]}" = "$addr/$NSB_PREFIX" ] ||
            why+="; rank $r: address ${got[2]}, expected $addr/$NSB_PREFIX (h$h)"
        [ "${got[3]}" = $((NSB_MTU - 28)) ] && [ "$mtu" = "$NSB_MTU" ] ||
            why+="; rank $r: datagram ${got[3]} bytes, expected $((NSB_MTU - 28)) (MTU $NSB_MTU - 28; h$h's $NSB_DEV has MTU ${mtu:-?})"
        [ "${got[4]}" = "$name_h" ] ||
            why+="; rank $r: host=${got[4]}, expected $name_h"
        [ "${got[6]}" -eq $((np - 1)) ] ||
            why+="; rank $r: reaches ${got[6]} of $((np - 1)) peers over usnic"
    done
    if [ -n "$why" ]; then
        fail "$name" "${why#; }" "$RUN_LOG"
        return 1
    fi
    echo "    $name: rank host address device datagram:"
    for ((r = 0; r < np; r++)); do
        read -r -a got <<< "$(grep "^$r " <<< "$table")"
        echo "      $r ${got[4]} ${got[2]} ${got[1]} ${got[3]}"
    done
    pass "$name"
}

# nsbed_forge_start PORT MIN [-R ADDR]: the attacker test/mpi/cc_forge.c
# on the head's bridge port PORT (vhN): forges a pong for every
# connectivity ping above MIN bytes and, with -R, replays every ping and
# liveness probe from ADDR (the head's NSB_HEAD_ADDR: a reflection victim
# of the attacker's choice).  Builds it first; false (a FAIL line) if that
# fails or it does not start.  Sets NSB_FORGE_PID and NSB_FORGE_OUT.
nsbed_forge_start() {
    local port=$1 min=$2 i
    shift 2
    build_tool cc_forge -I"$MT_SRC/../.." || return 1
    NSB_FORGE_OUT=$TEST_TMP/logs/$MT_NAME.$$.forge
    rm -f "$NSB_FORGE_OUT"
    ip netns exec "$NSB_HEAD" "$BIN" -i "$port" -m "$min" -o "$NSB_FORGE_OUT" "$@" \
        >"$NSB_FORGE_OUT.log" 2>&1 &
    NSB_FORGE_PID=$!
    for ((i = 0; i < 50; i++)); do
        [ -f "$NSB_FORGE_OUT" ] && return 0
        kill -0 "$NSB_FORGE_PID" 2>/dev/null || break
        sleep 0.1
    done
    fail "cc_forge on $port" "did not start: $(tr '\n' ' ' <"$NSB_FORGE_OUT.log")"
    return 1
}

# nsbed_forge_stop: ends it and sets NSB_FORGE_PINGS, _FORGED, _PROBES,
# _REPLAYED, _REFLECTED from its last counts (empty if it never wrote any).
nsbed_forge_stop() {
    local k v
    kill -TERM "$NSB_FORGE_PID" 2>/dev/null
    wait "$NSB_FORGE_PID" 2>/dev/null
    for k in pings forged probes replayed reflected; do
        v=$(sed -n "s/.*\b$k=\([0-9]*\).*/\1/p" "$NSB_FORGE_OUT" 2>/dev/null)
        printf -v "NSB_FORGE_${k^^}" '%s' "$v"
    done
}
