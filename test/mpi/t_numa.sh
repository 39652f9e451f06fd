#!/bin/bash
# NUMA locality of the devices (btl_usnic_hwloc.c).  A network namespace of
# our own holds a veth pair whose ends are named eth0 (10.212.1.1/24) and
# eth1 (10.212.2.1/24), so every rank has two usnic modules and both pair
# with the peer's.  mpirun runs inside it; OPAL's topology comes from a
# synthetic hwloc XML file (hwloc_base_topo_file) of a two-socket machine
# whose PUs 0 and 1 are this machine's two CPUs, so binding is real:
#   numa-2socket.xml        package 0: NUMA node 0, PU 0, NIC eth0 (PCI);
#                           package 1: NUMA node 1, PU 1, NIC eth1;
#                           NUMA distances 10 local, 21 remote
#   numa-2socket-nopci.xml  the same without any PCI device
# Each run is a ping-pong of 0 B .. 1 KiB (eager messages only, every byte
# checked) between rank 0 and rank 1:
#   1. two-socket topology, rank 0 bound to socket 0, rank 1 to socket 1:
#      each rank's verbose output gives its far NIC distance 21 and
#      btl_latency 10 -> 21 and keeps the near one at 10; the counters show
#      each rank's messages went over its near NIC only (the far module's
#      tx_bytes is 0: it sent nothing but ACKs)
#   1b. the same without the topology's distance matrix: the far NIC is at
#      the default remote distance 20 (btl_latency 10 -> 20), not used
#   1c. the same, but the topology's eth0 and eth1 have other hardware
#      addresses than ours (devices of the same names elsewhere, e.g. in
#      another network namespace): said so, nothing raised, both carried
#   2. the same with btl_usnic_want_numa_device_assignment 0: said so, no
#      latency raised, both modules of each rank carried messages (so the
#      check of 1 can fail)
#   3. the topology without PCI devices, same binding: the verbose output
#      says there is no PCI information, no latency raised, both modules
#      carried messages
#   4. the machine's real topology, ranks not bound: the verbose output
#      says the process is not bound, nothing raised, both modules carried
#   5. btl_usnic_want_numa_device_assignment 2 (on loopback): a help message
#      names the parameter and what it accepts
# Needs root (network namespaces).  Runs in the kernel pass of run-all.sh
# only: the locality logic does not depend on the datagram backend, and a
# second pass would repeat the same checks.
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

if ! usnic_mode; then
    pass "numa (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
if [ "$(usnic_backend)" != kernel ]; then
    echo "t_numa: runs in the kernel pass only (backend here: $(usnic_backend))"
    finish
fi

NS=usnic-numa$$
NS_MADE=false
TOPO2=$MT_SRC/numa-2socket.xml
TOPO_NOPCI=$MT_SRC/numa-2socket-nopci.xml
# the hardware addresses numa-2socket.xml gives eth0 and eth1
MAC0=02:00:00:00:00:10
MAC1=02:00:00:00:00:11

ns_down() {
    local pids t
    $NS_MADE || return 0
    pids=$(ip netns pids "$NS" 2>/dev/null)
    # shellcheck disable=SC2086 # one pid per word
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
    for ((t = 0; t < 30; t++)); do
        pids=$(ip netns pids "$NS" 2>/dev/null)
        [ -n "$pids" ] || break
        sleep 0.1
    done
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns delete "$NS" || echo "t_numa: could not delete namespace $NS" >&2
    NS_MADE=false
}

# ns_up: the namespace with eth0 and eth1 (a veth pair), both up.
ns_up() {
    local out
    trap ns_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    if [ "$(id -u)" -ne 0 ]; then
        fail "numa test bed" "must run as root to create a network namespace (uid $(id -u))"
        return 1
    fi
    if ! out=$(ip netns add "$NS" 2>&1); then
        fail "numa test bed" "ip netns add $NS: $out"
        return 1
    fi
    NS_MADE=true
    if ! out=$({ ip -n "$NS" link set lo up &&
        ip -n "$NS" link add eth0 type veth peer name eth1 &&
        ip -n "$NS" link set eth0 address "$MAC0" && ip -n "$NS" link set eth1 address "$MAC1" &&
        ip -n "$NS" addr add 10.212.1.1/24 dev eth0 &&
        ip -n "$NS" addr add 10.212.2.1/24 dev eth1 &&
        ip -n "$NS" link set eth0 up && ip -n "$NS" link set eth1 up; } 2>&1); then
        fail "numa test bed" "setting up eth0/eth1 in $NS: $out"
        return 1
    fi
}

# numa_run [MPIRUN ARGS...] -- PROG [ARGS...]: run_mpi's job (same log
# layout, RUN_LOG set) with mpirun inside the namespace, over usnic on eth0
# and eth1, with the BTL's verbose output and counters.
numa_run() {
    local -a extra=()
    local rc start dir
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        extra+=("$1")
        shift
    done
    shift
    MT_RUNS=$((MT_RUNS + 1))
    MT_PROG=$(basename "$1")
    RUN_LOG=$TEST_TMP/logs/$MT_NAME.$$.$MT_RUNS.$MT_PROG.log
    dir=$RUN_LOG.d
    rm -rf "$dir"
    # shellcheck disable=SC2054 # "usnic,self" and "eth0,eth1" are one argument each
    local -a cmd=(mpirun --allow-run-as-root -np 2 --mca oob_tcp_if_include lo
                  --output-filename "$dir:nocopy"
                  --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include eth0,eth1
                  --mca btl_usnic_print_stats 1 --mca btl_base_verbose 100
                  "${extra[@]}" "$@")
    echo "# ip netns exec $NS ${cmd[*]}" > "$RUN_LOG"
    start=$SECONDS
    ip netns exec "$NS" timeout -k 10 "$TEST_TIMEOUT" "${cmd[@]}" >> "$RUN_LOG" 2>&1 < /dev/null
    rc=$?
    run_log_finish 2 "$rc" "$start" "${@:2}"
}

# tx_bytes RANK DEV: the tx_bytes counter of RANK's module on DEV ("" if none).
tx_bytes() {
    awk -v r="$1" -v dev="$2" "$MT_AWK_STATS"'
        /\[usnic stats\]/ { stats_kv(kv); if (kv["rank"] == r && kv["dev"] == dev) print kv["tx_bytes"] }
    ' "$RUN_LOG" | head -n 1
}

# rank_says RANK PATTERN: RANK's output has a line matching PATTERN (ERE).
rank_says() {
    awk -v r="$1" '/^==== rank [0-9]+ / { cur = $3; next } /^==== / { cur = "" }
                   cur == r { print }' "$RUN_LOG" | grep -Eq "$2"
}

# run_ok NAME RC: the job ended well, the program checked its data.
run_ok() {
    if [ "$2" -eq 124 ]; then
        fail "$1" "timed out after ${TEST_TIMEOUT}s" "$RUN_LOG"
    elif [ "$2" -ne 0 ]; then
        fail "$1" "mpirun exit status $2" "$RUN_LOG"
    elif ! grep -q "^OK $MT_PROG\$" "$RUN_LOG"; then
        fail "$1" "program did not print 'OK $MT_PROG'" "$RUN_LOG"
    else
        return 0
    fi
    return 1
}

# both_carried NAME: every module of both ranks sent messages (tx_bytes > 0).
both_carried() {
    local r d v why='' got=''
    for r in 0 1; do
        for d in eth0 eth1; do
            v=$(tx_bytes $r $d)
            got+=" rank$r/$d=${v:-?}"
            [ "${v:-0}" -gt 0 ] || why+="; rank $r's $d module sent ${v:-no stats line} bytes"
        done
    done
    if [ -n "$why" ]; then
        fail "$1" "${why#; }" "$RUN_LOG"
    else
        pass "$1: tx_bytes$got"
    fi
}

# nothing_raised NAME: no rank raised a btl_latency.
nothing_raised() {
    if grep -q 'btl_latency raised' "$RUN_LOG"; then
        fail "$1" "a btl_latency was raised: $(grep -m1 'btl_latency raised' "$RUN_LOG")" "$RUN_LOG"
    else
        pass "$1"
    fi
}

build_prog pingpong || finish
pingpong=$BIN
ns_up || finish
bind=(--map-by socket --bind-to socket)

# ---- 1. two sockets, one NIC each, ranks bound to different sockets --------
numa_run --mca hwloc_base_topo_file "$TOPO2" "${bind[@]}" -- "$pingpong" -m 1k
rc=$?
name="numa bound"
if run_ok "$name: job" $rc; then
    why=
    for r in 0 1; do
        near=eth$r far=eth$((1 - r))
        rank_says $r "NUMA: this process is bound to CPUs $r \(NUMA node $r\)" ||
            why+="; rank $r does not report being bound to CPU $r on NUMA node $r"
        rank_says $r "NUMA: $far: PCI [0-9a-f:.]+ on NUMA node $((1 - r)), distance 21 \(nearest 10\): btl_latency raised from 10 to 21" ||
            why+="; rank $r does not report $far at distance 21 with btl_latency 10 -> 21"
        rank_says $r "NUMA: $near: PCI [0-9a-f:.]+ on NUMA node $r, distance 10: among the nearest, btl_latency stays 10" ||
            why+="; rank $r does not report $near at distance 10 keeping btl_latency 10"
    done
    if [ -z "$why" ]; then
        pass "$name: each rank's verbose output: near NIC distance 10 (btl_latency 10), far NIC distance 21 (btl_latency raised to 21)"
    else
        fail "$name: verbose output" "${why#; }" "$RUN_LOG"
    fi
    why=
    got=
    for r in 0 1; do
        near=$(tx_bytes $r eth$r) far=$(tx_bytes $r eth$((1 - r)))
        got+=" rank $r: near eth$r ${near:-?}, far eth$((1 - r)) ${far:-?};"
        [ "${near:-0}" -gt 0 ] || why+="; rank $r's near module eth$r sent ${near:-no stats line} bytes"
        [ "${far:-x}" = 0 ] || why+="; rank $r's far module eth$((1 - r)) sent ${far:-no stats line} bytes"
    done
    bytes=$(program_bytes "$RUN_LOG")
    total=$(stat_sum "$RUN_LOG" tx_bytes)
    [ "$total" -ge "${bytes:-1}" ] || why+="; usnic sent $total bytes, the program ${bytes:-?}"
    if [ -z "$why" ]; then
        pass "$name: small messages went over the near NIC only (tx_bytes:$got ${bytes} bytes checked)"
    else
        fail "$name: counters" "${why#; }" "$RUN_LOG"
    fi
fi

# ---- 1b. the same topology without its NUMA distance matrix ------------------
nodist=$TEST_TMP/logs/$MT_NAME.$$.numa-2socket-nodist.xml
sed '/<distances2 /,/<\/distances2>/d' "$TOPO2" > "$nodist"
numa_run --mca hwloc_base_topo_file "$nodist" "${bind[@]}" -- "$pingpong" -m 1k
rc=$?
name="numa bound, no distance matrix"
if grep -q distances2 "$nodist"; then
    fail "$name" "could not strip the distance matrix from $TOPO2"
elif run_ok "$name: job" $rc; then
    why=''
    for r in 0 1; do
        rank_says $r "NUMA: eth$((1 - r)): PCI [0-9a-f:.]+ on NUMA node $((1 - r)), distance 20 \(nearest 10\): btl_latency raised from 10 to 20" ||
            why+="; rank $r does not report eth$((1 - r)) at distance 20 with btl_latency 10 -> 20"
        [ "$(tx_bytes $r eth$((1 - r)))" = 0 ] ||
            why+="; rank $r's far module eth$((1 - r)) sent $(tx_bytes $r eth$((1 - r))) bytes"
    done
    if [ -z "$why" ]; then
        pass "$name: far NIC at the default remote distance 20 (btl_latency 10 -> 20), its tx_bytes 0 on both ranks"
    else
        fail "$name" "${why#; }" "$RUN_LOG"
    fi
fi
rm -f "$nodist"

# ---- 1c. the topology's eth0/eth1 are other devices (other addresses) -------
other=$TEST_TMP/logs/$MT_NAME.$$.numa-2socket-other.xml
sed "s/$MAC0/02:00:00:00:00:20/; s/$MAC1/02:00:00:00:00:21/" "$TOPO2" > "$other"
numa_run --mca hwloc_base_topo_file "$other" "${bind[@]}" -- "$pingpong" -m 1k
rc=$?
name="numa names of other devices"
if grep -q -e "$MAC0" -e "$MAC1" "$other"; then
    fail "$name" "could not change the addresses in $TOPO2"
elif run_ok "$name: job" $rc; then
    why=''
    for r in 0 1; do
        for d in eth0 eth1; do
            rank_says $r "NUMA: $d: the topology's $d \(PCI [0-9a-f:.]+\) has address 02:00:00:00:00:2[01], this interface 02:00:00:00:00:1[01]: another device" ||
                why+="; rank $r does not report the topology's $d as another device"
        done
    done
    if [ -z "$why" ]; then
        pass "$name: each rank sees that the topology's eth0/eth1 have other hardware addresses than its own"
    else
        fail "$name: verbose output" "${why#; }" "$RUN_LOG"
    fi
    nothing_raised "$name: no btl_latency raised"
    both_carried "$name: small messages over both NICs"
fi
rm -f "$other"

# ---- 2. the same with the parameter off --------------------------------------
numa_run --mca hwloc_base_topo_file "$TOPO2" "${bind[@]}" \
    --mca btl_usnic_want_numa_device_assignment 0 -- "$pingpong" -m 1k
rc=$?
name="numa off"
if run_ok "$name: job" $rc; then
    if rank_says 0 'NUMA: btl_usnic_want_numa_device_assignment is 0' &&
        rank_says 1 'NUMA: btl_usnic_want_numa_device_assignment is 0'; then
        pass "$name: both ranks say btl_usnic_want_numa_device_assignment is 0"
    else
        fail "$name: verbose output" "no 'btl_usnic_want_numa_device_assignment is 0' from each rank" "$RUN_LOG"
    fi
    nothing_raised "$name: no btl_latency raised"
    both_carried "$name: small messages over both NICs"
fi

# ---- 3. a topology without PCI information -----------------------------------
numa_run --mca hwloc_base_topo_file "$TOPO_NOPCI" "${bind[@]}" -- "$pingpong" -m 1k
rc=$?
name="numa without PCI info"
if run_ok "$name: job" $rc; then
    if rank_says 0 'NUMA: the hwloc topology has no PCI information' &&
        rank_says 1 'NUMA: the hwloc topology has no PCI information'; then
        pass "$name: both ranks say the topology has no PCI information"
    else
        fail "$name: verbose output" "no 'no PCI information' line from each rank" "$RUN_LOG"
    fi
    nothing_raised "$name: no btl_latency raised"
    both_carried "$name: small messages over both NICs"
fi

# ---- 4. the real topology, ranks not bound -----------------------------------
numa_run --bind-to none -- "$pingpong" -m 1k
rc=$?
name="numa unbound"
if run_ok "$name: job" $rc; then
    # the machine's own topology may have PCI information or not; either
    # way the component must say why it changes nothing
    if rank_says 0 'NUMA: (this process is not bound|the hwloc topology has no PCI information)' &&
        rank_says 1 'NUMA: (this process is not bound|the hwloc topology has no PCI information)'; then
        pass "$name: both ranks say: $(grep -m1 -Eo 'NUMA: (this process is not bound|the hwloc topology has no PCI information)' "$RUN_LOG")"
    else
        fail "$name: verbose output" "no 'not bound' (or 'no PCI information') line from each rank" "$RUN_LOG"
    fi
    nothing_raised "$name: no btl_latency raised"
    both_carried "$name: small messages over both NICs"
fi

# ---- 5. a bad value of the parameter -----------------------------------------
# (on loopback, outside the namespace; mpirun of this Open MPI now and then
# drops a rank's help message, so a miss is retried, as t_bad_params.sh does)
build_prog trivial || finish
name="numa parameter neither on nor off"
for try in 1 2 3 4; do
    EXTRA_MCA="--mca btl_usnic_want_numa_device_assignment 2" run_mpi 2 "$BIN"
    grep -v '^# ' "$RUN_LOG" | grep -q 'Parameter: btl_usnic_want_numa_device_assignment' &&
        grep -v '^# ' "$RUN_LOG" | grep -q '1 (on) or 0 (off)' && break
    try=fail
done
if [ "$try" != fail ]; then
    pass "$name: the help message names it and says 1 (on) or 0 (off)"
else
    fail "$name" "no help message naming btl_usnic_want_numa_device_assignment" "$RUN_LOG"
fi

ns_down
if ip netns list | grep -qw "$NS"; then
    fail "numa test bed removed" "namespace $NS is still there"
else
    pass "numa test bed removed"
fi
finish
