#!/bin/bash
# Routed peers: two hosts on two subnets joined by a router
# (test/lib/netns-routed.sh): h1 10.212.1.11/24 and h2 10.212.2.12/24,
# each with a default route through head (10.212.1.1 / 10.212.2.1,
# ip_forward=1), which also runs mpirun.  One rank per host, "btl
# usnic,self", btl_usnic_if_include 10.212.0.0/16.
#   1. ping-pong 0 B .. 1 MiB, data verified: each rank pairs its eth0 with
#      the other host's as a routed pair ("paired: routed via gateway
#      10.212.N.1 dev eth0" at btl_base_verbose), usnic carried the bytes,
#      and the router forwarded at least what each rank sent over usnic
#   1b. rank 1 computes 5 s outside MPI with btl_usnic_peer_timeout 2:
#      the liveness probes and replies cross the router, the job completes
#      (kernel pass only, see there)
#   2. the link to h2 at MTU 1400 (h1's stays 1500): the pair uses the
#      smaller datagram (1372 bytes) on both sides, data verified, and no
#      datagram was fragmented on the way (h1 fragmented none, the router
#      refused none for size)
#   3. h1 without a default route: h1 refuses the pair with "no route" in
#      its verbose output, ob1 reports the ranks unable to reach each
#      other, and the job fails (not timing out)
#   4. btl_usnic_routed_peers 0: the pair is refused ("routed peers are
#      off") and the job fails the same way
#   5. h1 with a second interface (eth1, another subnet, no route to h2 of
#      its own): eth1 refuses h2 ("route leaves via other interface eth0"),
#      h2 (with an unreachable route to eth1's subnet) refuses eth1 ("no
#      route"), eth0 pairs, the job passes
# Runs in both passes of run-all.sh (kernel sockets, libfabric udp).  Every
# run must leave no process in the namespaces; the bed is removed at the
# end.  Needs root.  Each mpirun is limited to TEST_TIMEOUT seconds (30
# here; a run takes 2-5 s, a failing one about as long).
TEST_TIMEOUT=${TEST_TIMEOUT:-30}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"
# shellcheck source=SCRIPTDIR/../lib/netns-routed.sh
. "$(dirname "$0")/../lib/netns-routed.sh"

max=1048576

if ! usnic_mode; then
    pass "routed netns (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
build_prog pingpong || finish
pingpong=$BIN
build_prog stall || finish
stall=$BIN
nsbed_routed_up 2 || finish
export USNIC_TEST_DEV=$NSB_DEV
hosts1=$(nsbed_hostfile 1)
floor=$((2 * $(pingpong_size_sum "$max")))
a1=$(nsbed_addr 1)
a2=$(nsbed_addr 2)

# rank_lines R: the log lines of rank R's output (stdout and stderr)
rank_lines() {
    awk -v r="$1" '/^==== rank [0-9]+ / { in_r = ($3 == r); next }
                   /^==== / { in_r = 0 } in_r' "$RUN_LOG"
}

# pair_line R PEER_ADDR [LOCAL]: rank R's pairing verdict about the peer
# module at PEER_ADDR ("paired: ..." or "not paired: ..."), from the line of
# its local module LOCAL ("eth1 (10.212.9.11/24) and "; any if not given);
# empty if none
pair_line() {
    rank_lines "$1" | grep -F "${3:-}" | grep -F "($2/$NSB_PREFIX): " |
        grep -E ': (not )?paired: ' | head -1 | sed 's/.*: \(\(not \)\{0,1\}paired: \)/\1/'
}

# usnic_tx R: rank R's usnic tx_bytes ([usnic stats] line)
usnic_tx() {
    rank_lines "$1" | awk '/\[usnic stats\]/ { for (i = 1; i <= NF; i++)
        if ($i ~ /^tx_bytes=/) print substr($i, 10) }' | head -1
}

# ip_stat NS_CMD FIELD: a counter of the "Ip:" lines of /proc/net/snmp
ip_stat() {
    "$@" cat /proc/net/snmp | awk -v f="$IP_FIELD" '
        $1 == "Ip:" && !h { for (i = 2; i <= NF; i++) col[$i] = i; h = 1; next }
        $1 == "Ip:" { print $col[f] }'
}


# ---- 1. a routed pair carries a data-checked ping-pong ----------------------
name="routed pingpong h1<->h2"
fwd1=$(nsbed_router_ifstat 1 tx_bytes)
fwd2=$(nsbed_router_ifstat 2 tx_bytes)
nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max"
rc=$?
check_run "$name" $rc 2 "$floor"
nsbed_check_placement "$name: one rank per host, own subnet, 1472-byte datagrams" 2 1
p0=$(pair_line 0 "$a2")
p1=$(pair_line 1 "$a1")
echo "    rank 0 (h1) about h2: $p0"
echo "    rank 1 (h2) about h1: $p1"
case "$p0|$p1" in
    "paired: routed via gateway $(nsbed_gateway 1) dev $NSB_DEV; datagrams of 1472 bytes"*"|paired: routed via gateway $(nsbed_gateway 2) dev $NSB_DEV; datagrams of 1472 bytes"*)
        pass "$name: verbose output shows the routed pair on both sides" ;;
    *) fail "$name: routed pair in verbose output" "rank 0: '${p0:-none}', rank 1: '${p1:-none}'" "$RUN_LOG" ;;
esac
# what the router sent to h2 includes everything rank 0 sent over usnic,
# and what it sent to h1 everything rank 1 sent
fwd1=$(($(nsbed_router_ifstat 1 tx_bytes) - fwd1))
fwd2=$(($(nsbed_router_ifstat 2 tx_bytes) - fwd2))
tx0=$(usnic_tx 0)
tx1=$(usnic_tx 1)
if [ -n "$tx0" ] && [ -n "$tx1" ] && [ "$tx0" -gt 0 ] && [ "$fwd2" -ge "$tx0" ] &&
    [ "$fwd1" -ge "$tx1" ]; then
    pass "$name: the router forwarded $fwd2 bytes to h2 (rank 0 sent $tx0 over usnic) and $fwd1 to h1 (rank 1 sent $tx1)"
else
    fail "$name: through the router" "router to h2 $fwd2 bytes, rank 0 usnic tx_bytes ${tx0:-missing}; to h1 $fwd1, rank 1 ${tx1:-missing}" "$RUN_LOG"
fi
nsbed_no_leftovers "$name"

# ---- 1b. liveness across the router ---------------------------------------
# rank 1 (h2) computes 5 s outside MPI while rank 0's message waits, with
# btl_usnic_peer_timeout 2: rank 0's liveness probes go to h2's module
# address through the router and h2's liveness thread answers them, so the
# job completes with the data intact.
# The liveness socket is a plain kernel UDP socket whatever the backend, so
# this runs in the kernel pass only: in the udp pass t_liveness_netns's
# busy case too fails now and then (rank 1, back from its absence, declares
# rank 0 dead at once: its one early datagram had found no endpoint on
# rank 0 and its ACK never came; a start-up race of lazy peers, not of
# routing).
if [ "$(usnic_backend)" = kernel ]; then
    name="routed liveness: rank on h2 5 s outside MPI, peer_timeout 2"
    EXTRA_MCA="--mca btl_usnic_peer_timeout 2" nsbed_run_mpi "$hosts1" 2 "$stall" busy 5
    rc=$?
    replies=$(stat_sum "$RUN_LOG" live_replies)
    answered=$(stat_sum "$RUN_LOG" live_answered)
    if [ $rc -eq 0 ] && grep -q 'STALL: busy peer ok' "$RUN_LOG" && [ "$replies" -gt 0 ] &&
        [ "$answered" -gt 0 ]; then
        pass "$name: lives, data intact, $answered probes answered and $replies replies received"
    else
        fail "$name" "rc=$rc live_replies=$replies live_answered=$answered" "$RUN_LOG"
    fi
    nsbed_no_leftovers "$name"
fi

# ---- 2. different MTUs: the pair uses the smaller datagram ------------------
name="routed pingpong, h2's link at MTU 1400"
if ! nsbed_host_mtu 2 1400; then
    fail "$name" "cannot set the MTU of the link to h2"
else
    IP_FIELD=FragCreates
    frag0=$(ip_stat nsbed_exec 1)
    IP_FIELD=FragFails
    fails0=$(ip_stat ip netns exec "$NSB_HEAD")
    nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max"
    rc=$?
    check_run "$name" $rc 2 "$floor"
    IP_FIELD=FragCreates
    frag=$(($(ip_stat nsbed_exec 1) - frag0))
    IP_FIELD=FragFails
    fails=$(($(ip_stat ip netns exec "$NSB_HEAD") - fails0))
    p0=$(pair_line 0 "$a2")
    p1=$(pair_line 1 "$a1")
    echo "    rank 0 (h1) about h2: $p0"
    echo "    rank 1 (h2) about h1: $p1"
    echo "    IP fragments made in h1: $frag; datagrams the router could not forward for size: $fails"
    case "$p0|$p1" in
        *"datagrams of 1372 bytes (ours 1472, theirs 1372)|"*"datagrams of 1372 bytes (ours 1372, theirs 1472)")
            if [ "$frag" -eq 0 ] && [ "$fails" -eq 0 ]; then
                pass "$name: both sides use 1372-byte datagrams, none fragmented or refused on the way"
            else
                fail "$name: no fragmentation" "h1 made $frag IP fragments, the router failed $fails" "$RUN_LOG"
            fi ;;
        *) fail "$name: smaller datagram" "rank 0: '${p0:-none}', rank 1: '${p1:-none}'" "$RUN_LOG" ;;
    esac
    nsbed_no_leftovers "$name"
    nsbed_host_mtu 2 "$NSB_MTU"
fi

# expect_unreachable NAME REASON: the last job failed because rank 0 (h1)
# refused to pair with h2 for REASON, and ob1 said so; not a timeout
expect_unreachable() {
    local name=$1 reason=$2 p0
    p0=$(pair_line 0 "$a2")
    echo "    rank 0 (h1) about h2: ${p0:-none}; job rc=$rc after $((SECONDS - NSB_JOB_START)) s"
    if [ "$rc" -eq 124 ]; then
        fail "$name" "timed out after ${TEST_TIMEOUT}s instead of failing" "$RUN_LOG"
    elif [ "$rc" -eq 0 ]; then
        fail "$name" "the job succeeded without a usable pair" "$RUN_LOG"
    elif [[ "$p0" != "not paired: "*"$reason"* ]]; then
        fail "$name" "rank 0's verdict about h2 is '${p0:-none}', expected '$reason'" "$RUN_LOG"
    elif ! grep -q "unable to reach each other" "$RUN_LOG"; then
        fail "$name" "no 'unable to reach each other' message from ob1" "$RUN_LOG"
    else
        pass "$name: refused (\"${p0#not paired: }\"), ob1 reported the ranks unreachable, job failed (rc $rc)"
    fi
    nsbed_no_leftovers "$name"
}

# ---- 3. no route from h1 to h2 ------------------------------------------
name="routed: h1 without a route to h2"
if ! nsbed_exec 1 ip route del default; then
    fail "$name" "cannot remove h1's default route"
else
    nsbed_run_mpi "$hosts1" 2 "$pingpong" -m 1024
    rc=$?
    expect_unreachable "$name" "no route (Network is unreachable)"
    nsbed_exec 1 ip route add default via "$(nsbed_gateway 1)" dev "$NSB_DEV"
fi

# ---- 4. routed peers off ----------------------------------------------------
name="routed: btl_usnic_routed_peers 0"
EXTRA_MCA="--mca btl_usnic_routed_peers 0" nsbed_run_mpi "$hosts1" 2 "$pingpong" -m 1024
rc=$?
expect_unreachable "$name" "routed peers are off"

# ---- 5. a second interface on h1 whose routes do not lead to h2 -------------
# h1 gets eth1 (10.212.9.11/24, a second veth to the router, no default
# route): its module refuses h2 because the route to h2 leaves via eth0,
# while eth0 pairs as before and the job passes.  Each side judges only its
# own routes: through its default route h2 could reach h1's eth1 too, and
# might pick it (the udp provider lists eth1 first) while h1's eth1 refuses
# h2, so h2 is given an unreachable route to eth1's subnet, which it
# refuses with "no route" (README.txt, pairing: multi-homed hosts).
name="routed: h1 with a second interface"
a9=$NSB_RNET.9.11
if ! { ip -n "$NSB_HEAD" link add vh1b type veth peer name eth1 netns "$(nsbed_ns 1)" &&
       ip -n "$NSB_HEAD" addr add "$NSB_RNET.9.1/$NSB_PREFIX" dev vh1b &&
       ip -n "$NSB_HEAD" link set vh1b up &&
       nsbed_exec 1 ip addr add "$a9/$NSB_PREFIX" dev eth1 &&
       nsbed_exec 1 ip link set eth1 up &&
       nsbed_exec 2 ip route add unreachable "$NSB_RNET.9.0/$NSB_PREFIX"; }; then
    fail "$name" "cannot add eth1 to h1"
else
    nsbed_run_mpi "$hosts1" 2 "$pingpong" -m 65536
    rc=$?
    v_eth0=$(pair_line 0 "$a2" "eth0 ($a1/$NSB_PREFIX) and ")
    v_eth1=$(pair_line 0 "$a2" "eth1 ($a9/$NSB_PREFIX) and ")
    v_h2=$(pair_line 1 "$a1")
    v_h2b=$(pair_line 1 "$a9")
    echo "    h1 eth0 about h2: ${v_eth0:-none}"
    echo "    h1 eth1 about h2: ${v_eth1:-none}"
    echo "    h2 eth0 about h1's eth0: ${v_h2:-none}"
    echo "    h2 eth0 about h1's eth1: ${v_h2b:-none}"
    if [ $rc -ne 0 ] || ! grep -q "^OK pingpong\$" "$RUN_LOG"; then
        fail "$name" "job rc=$rc, or data not verified" "$RUN_LOG"
    elif [[ "$v_eth0" != "paired: routed via gateway $(nsbed_gateway 1) dev eth0"* ]] ||
        [[ "$v_eth1" != "not paired: route leaves via other interface eth0 (ours is eth1)" ]] ||
        [[ "$v_h2" != "paired: "* ]] || [[ "$v_h2b" != "not paired: no route ("* ]]; then
        fail "$name" "pairing verdicts: eth0 '${v_eth0:-none}', eth1 '${v_eth1:-none}', h2 '${v_h2:-none}' / '${v_h2b:-none}'" "$RUN_LOG"
    else
        pass "$name: h1's eth1 refused h2 (\"${v_eth1#not paired: }\"), h2 refused it (\"${v_h2b#not paired: }\"), eth0 paired, data intact"
    fi
    nsbed_no_leftovers "$name"
fi

# ---- the test bed goes away -------------------------------------------------
nsbed_down
nsbed_removed "routed test bed removed"
finish
