#!/bin/bash
# MPI jobs across "hosts" made of network namespaces (test/lib/netns.sh):
# mpirun in namespace head (bridge br0, 10.211.0.1/24), its daemons started
# by test/lib/netns-rsh.sh in hosts h1 (10.211.0.11) and h2 (10.211.0.12),
# each on a veth (MTU 1500) to the bridge; ORTE over TCP and the MPI
# traffic over "btl usnic,self" on the bridge (btl_usnic_if_include given
# as the CIDR 10.211.0.0/24).
#   1. ping-pong 0 B .. 4 MiB between h1 and h2, data verified; the ranks
#      ran on different hosts with their own addresses, with 1472-byte
#      datagrams (MTU 1500 - 28); usnic carried >= the program's BYTES and
#      the bytes went over the veths
#   2. the same with 1% real packet loss: an nft rule in h2 drops 1% of the
#      UDP packets arriving on its veth; all data still verified, the rule
#      dropped packets and usnic retransmitted, and no resend was of a
#      datagram that had arrived (dup_rx at most a tenth of retrans); over
#      the kernel backend no chunk was received in place (rx_direct = 0:
#      1472-byte chunks go through the receive buffers, PUTs' too); then,
#      under the same loss, thousands of
#      messages of mixed sizes outstanding both ways (manymsgs, every byte
#      checked): resends, and over the kernel backend trains that went on
#      from one message to the next (gso_pads on both ranks), so padded
#      datagrams were among what the wire lost
#   3. collectives on 4 ranks, 2 per host: same-host pairs over usnic too
#   4. the veths raised to MTU 9000 (8972-byte datagrams) and 1% of the
#      UDP packets into h2 dropped again: the ping-pong's data verified,
#      rank 0 (h1 -> h2) retransmitted, and over the kernel backend rank 1
#      (in h2, behind the loss) received chunks in place (rx_direct > 0):
#      the direct receive under real loss on a wire, where a lost chunk
#      leaves a hole that what arrives next must not fill
# Every run must leave no process behind in the namespaces, and the test bed
# must be gone at the end.  Needs root (network namespaces): without it the
# test fails, it does not skip.
#
# Overrides: MH_MAX (ping-pong maximum size, 4 MiB), MH_LOSS (% dropped, 1).
# Each mpirun is limited to TEST_TIMEOUT seconds (default 30 here; a run
# takes 2-5 s).
TEST_TIMEOUT=${TEST_TIMEOUT:-30}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"

max=${MH_MAX:-4194304}
loss=${MH_LOSS:-1}

if ! usnic_mode; then
    fail "multihost" "runs over usnic only (USNIC_TEST_BTL=tcp is not supported here)"
    finish
fi
command -v nft >/dev/null || { fail "multihost" "needs nft (nftables)"; finish; }
build_prog pingpong || finish
pingpong=$BIN
build_prog collectives || finish
collectives=$BIN
build_prog manymsgs || finish
manymsgs=$BIN
nsbed_up 2 || finish
export USNIC_TEST_DEV=$NSB_DEV


# wire_check NAME H1_TX_BEFORE: the ping-pong's bytes crossed the veths:
# h1's veth sent at least what rank 0 (on h1) reports as usnic tx_bytes.
wire_check() {
    local name=$1 before=$2 sent usnic
    sent=$(($(nsbed_ifstat 1 tx_bytes) - before))
    usnic=$(awk '/^==== rank 0 /{ r = 1; next } /^==== /{ r = 0 }
                 r && /\[usnic stats\]/ { for (i = 1; i <= NF; i++)
                     if ($i ~ /^tx_bytes=/) print substr($i, 10) }' "$RUN_LOG")
    if [ -n "$usnic" ] && [ "$sent" -ge "$usnic" ]; then
        pass "$name: h1's veth sent $sent bytes >= rank 0's usnic tx_bytes $usnic"
    else
        fail "$name" "h1's veth sent $sent bytes, rank 0's usnic tx_bytes ${usnic:-missing}" "$RUN_LOG"
    fi
}

hosts1=$(nsbed_hostfile 1)
hosts2=$(nsbed_hostfile 2)
floor=$((4 * $(pingpong_size_sum "$max")))

# ---- 1. ping-pong between two hosts -------------------------------------
tx0=$(nsbed_ifstat 1 tx_bytes)
nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max"
rc=$?
check_run "multihost pingpong h1<->h2" $rc 2 "$floor"
nsbed_check_placement "multihost pingpong: one rank per host, own address, 1472-byte datagrams" 2 1
wire_check "multihost pingpong on the wire" "$tx0"
nsbed_no_leftovers "multihost pingpong"

# ---- 2. the same with real packet loss in h2 ---------------------------
if ! nsbed_exec 2 nft -f - <<NFT
table inet usnic_mh {
    chain in {
        type filter hook input priority 0; policy accept;
        iifname "$NSB_DEV" meta l4proto udp counter
        iifname "$NSB_DEV" meta l4proto udp numgen random mod 100 < $loss counter drop
    }
}
NFT
then
    fail "multihost pingpong ${loss}% loss" "cannot load the nft rule in h2"
else
    nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max" -i 1
    rc=$?
    name="multihost pingpong ${loss}% loss"
    check_run "$name" $rc 2 "$floor"
    read -r udp_in dropped <<< "$(nsbed_exec 2 nft list chain inet usnic_mh in |
        grep -o 'packets [0-9]*' | cut -d' ' -f2 | tr '\n' ' ')"
    retrans=$(stat_sum "$RUN_LOG" retrans)
    retrans0=$(awk '/^==== rank 0 /{ r = 1; next } /^==== /{ r = 0 }
                    r && /\[usnic stats\]/ { for (i = 1; i <= NF; i++)
                        if ($i ~ /^retrans=/) print substr($i, 9) }' "$RUN_LOG")
    echo "    $name: h2 received ${udp_in:-?} UDP packets on $NSB_DEV, nft dropped" \
         "${dropped:-?}; usnic retrans: all ranks $retrans, rank 0 (h1 -> h2) ${retrans0:-?}"
    # the rule must really have dropped about loss% (binomial: far inside
    # [loss/3, 3*loss] % for ~100k packets), and the sender into h2 must
    # have retransmitted
    if [ "${dropped:-0}" -gt 0 ] && [ "${udp_in:-0}" -gt 0 ] &&
        [ $((dropped * 300)) -ge $((udp_in * loss)) ] &&
        [ $((dropped * 100)) -le $((udp_in * loss * 3)) ] &&
        [ "${retrans0:-0}" -gt 0 ] && [ "$retrans" -gt 0 ]; then
        pass "$name recovery: $dropped of $udp_in UDP packets dropped on the wire, $retrans retransmissions"
    else
        fail "$name recovery" "nft dropped ${dropped:-?} of ${udp_in:-?} UDP packets, retrans=$retrans, rank 0 retrans=${retrans0:-?}" "$RUN_LOG"
    fi
    # nothing was resent that had arrived: the veths neither duplicate nor
    # reorder, so a copy the receiver already held is a needless resend
    # (a probe's answer once declared lost whatever lay beyond its SACK
    # bitmap: at 1472-byte datagrams most of a 1 MiB window, 2-3 resends
    # per datagram lost, most of them duplicates)
    dup_rx=$(stat_sum "$RUN_LOG" dup_rx)
    if [ "$retrans" -gt 0 ] && [ $((dup_rx * 10)) -le "$retrans" ]; then
        pass "$name: no needless resends ($dup_rx duplicates received of $retrans resends)"
    else
        fail "$name: no needless resends" "$dup_rx duplicates received of $retrans resends" "$RUN_LOG"
    fi
    # the kernel backend took every chunk of 1472 bytes through its
    # receive buffers, PUTs' too (direct receive is for chunks of 4 KiB and
    # more: t_gso, t_hostile; session 30)
    [ "$(usnic_backend)" = kernel ] && each_rank "$name: 1472-byte chunks not received in place" rx_direct -eq 0
    nsbed_no_leftovers "$name"

    nsbed_run_mpi "$hosts1" 2 "$manymsgs" -n 2000
    rc=$?
    name="multihost manymsgs ${loss}% loss"
    # floor: 2 ranks x 2000 messages each way x 2 rounds, each >= 8 bytes
    check_run "$name" $rc 2 $((2 * 2000 * 2 * 8))
    retrans=$(stat_sum "$RUN_LOG" retrans)
    pads=$(grep -c 'gso_pads=[1-9]' "$RUN_LOG")
    if [ "${retrans:-0}" -gt 0 ] && { [ "$(usnic_backend)" != kernel ] || [ "$pads" -ge 2 ]; }; then
        pass "$name: $retrans resends, trains across messages on $pads ranks ($(stat_sum "$RUN_LOG" gso_pads) padded datagrams)"
    else
        fail "$name" "retrans=${retrans:-?}, ranks with gso_pads > 0: $pads (want 2)" "$RUN_LOG"
    fi
    nsbed_no_leftovers "$name"
    nsbed_exec 2 nft delete table inet usnic_mh
fi

# ---- 3. collectives, 2 ranks per host -------------------------------------
nsbed_run_mpi "$hosts2" 4 "$collectives"
rc=$?
# floor: the 4 MiB broadcast from each of 4 roots reaches 3 other ranks
check_run "multihost collectives 2x2" $rc 4 $((4 * 3 * 4 * 1024 * 1024))
nsbed_check_placement "multihost collectives: 2 ranks per host, all pairs over usnic" 4 2
# Ranks on the other host have no endpoint until ob1 adds them (lazily, on
# first use): their first datagrams wait for the modex record, fetched
# without blocking, and are then received, none lost and none refused.
if usnic_mode; then
    parked=$(stat_sum "$RUN_LOG" parked)
    unparked=$(stat_sum "$RUN_LOG" unparked)
    refused=$(stat_sum "$RUN_LOG" drop_SENDER)
    if [ "$parked" -gt 0 ] && [ "$parked" = "$unparked" ] && [ "$refused" = 0 ]; then
        pass "multihost collectives: $parked datagrams from lazily added peers held and received"
    else
        fail "multihost collectives: lazily added peers" \
            "parked=$parked unparked=$unparked drop_SENDER=$refused" "$RUN_LOG"
    fi
fi
nsbed_no_leftovers "multihost collectives"

# ---- 4. MTU 9000 with real loss: chunks received in place ----------------
# set_mtu M: every veth end and the bridge to MTU M
set_mtu() {
    local h
    for ((h = 1; h <= NSB_HOSTS; h++)); do
        ip -n "$NSB_HEAD" link set "vh$h" mtu "$1" &&
            nsbed_exec "$h" ip link set "$NSB_DEV" mtu "$1" || return 1
    done
    ip -n "$NSB_HEAD" link set br0 mtu "$1"
}
if ! set_mtu 9000; then
    fail "multihost MTU 9000" "cannot raise the veths' MTU to 9000"
elif ! nsbed_exec 2 nft -f - <<NFT
table inet usnic_mh {
    chain in {
        type filter hook input priority 0; policy accept;
        iifname "$NSB_DEV" meta l4proto udp numgen random mod 100 < $loss counter drop
    }
}
NFT
then
    fail "multihost MTU 9000 ${loss}% loss" "cannot load the nft rule in h2"
else
    NSB_MTU=9000
    name="multihost pingpong MTU 9000 ${loss}% loss"
    nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max" -i 1
    rc=$?
    check_run "$name" $rc 2 "$floor"
    nsbed_check_placement "$name: one rank per host, 8972-byte datagrams" 2 1
    dropped=$(nsbed_exec 2 nft list chain inet usnic_mh in | grep -o 'packets [0-9]*' |
        cut -d' ' -f2)
    retrans0=$(rank_stat "$RUN_LOG" 0 retrans)
    direct1=$(rank_stat "$RUN_LOG" 1 rx_direct)
    if [ "${dropped:-0}" -gt 0 ] && [ "${retrans0:-0}" -gt 0 ]; then
        pass "$name: $dropped packets dropped into h2, rank 0 resent $retrans0"
    else
        fail "$name: recovery" "nft dropped ${dropped:-?}, rank 0 retrans=${retrans0:-?}" "$RUN_LOG"
    fi
    if [ "$(usnic_backend)" = kernel ]; then
        if [ "${direct1:-0}" -gt 0 ]; then
            pass "$name: rank 1, behind the loss, received $direct1 chunks in place"
        else
            fail "$name: received in place" "rank 1 rx_direct=${direct1:-?}" "$RUN_LOG"
        fi
    fi
    nsbed_no_leftovers "$name"
    nsbed_exec 2 nft delete table inet usnic_mh
fi

# ---- the test bed goes away -------------------------------------------------
nsbed_down
nsbed_removed "multihost test bed removed"
finish
