#!/bin/bash
# Peer liveness between two hosts made of network namespaces
# (test/lib/netns.sh; one rank on h1, one on h2), btl_usnic_peer_timeout 3:
#   1. rank 1 (h2) computes outside MPI for 12 s (4 x the timeout) while
#      rank 0's 8 MiB message waits for it: the job completes with every
#      byte intact; rank 0's probes crossed the veths and were answered;
#      neither rank takes the 12 s for a round trip (srtt_max_us < 1 s;
#      a rank that checks 8 MiB before answering may add milliseconds; rank
#      1 may measure nothing at all: 0).  Meanwhile an attacker on h1's
#      bridge port (cc_forge.c) replays every probe (and connectivity ping)
#      from the head's own address: h2's liveness thread answers none of
#      them there (a probe's MAC names its source), counts them
#      (live_forged), and still answers rank 0's own probes.
#   2. the same, but once rank 1 is away, all UDP into h2 is dropped (an
#      nft rule in h2: its usnic path is cut, ORTE's TCP still works): rank
#      0 reports h2 unreachable within peer_timeout + 2 s of the cut (plus
#      3 s for the job's shutdown), naming h2 as mpirun knows it (the
#      hostfile's address), and the job ends.
#   3. the same with h2's link set down (ip link set eth0 down in h2): the
#      message names h2, its interface and address.
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"

if ! usnic_mode; then
    pass "liveness netns (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
command -v nft >/dev/null || { fail "liveness netns" "needs nft (nftables)"; finish; }
build_prog stall || finish
stall=$BIN
nsbed_up 2 || finish
export USNIC_TEST_DEV=$NSB_DEV
hosts1=$(nsbed_hostfile 1)
timeout_s=3

# ---- 1. a busy rank on the other host lives ----
forging=false
nsbed_forge_start vh1 2147483647 -R "$NSB_HEAD_ADDR" && forging=true
EXTRA_MCA="--mca btl_usnic_peer_timeout $timeout_s" nsbed_run_mpi "$hosts1" 2 "$stall" busy 12
rc=$?
if $forging; then
    nsbed_forge_stop
    refused=$(rank_stat "$RUN_LOG" 1 live_forged)
    if [ "${NSB_FORGE_PROBES:-0}" -ge 2 ] && [ "${NSB_FORGE_REFLECTED:-x}" = 0 ] &&
        [ "${refused:-0}" -ge $((NSB_FORGE_PROBES / 2)) ]; then
        pass "liveness netns: $NSB_FORGE_PROBES probes (and $NSB_FORGE_PINGS pings) replayed from the head's address: 0 answered there, $refused refused by h2 (live_forged)"
    else
        fail "liveness netns: probes replayed from another address" \
            "probes=${NSB_FORGE_PROBES:-none} replayed=${NSB_FORGE_REPLAYED:-none} reflected=${NSB_FORGE_REFLECTED:-none} (want 0) h2 live_forged=${refused:-none} (want >= probes / 2: the last replays may come after its count)" "$RUN_LOG"
    fi
fi
replies=$(stat_sum "$RUN_LOG" live_replies)
answered=$(stat_sum "$RUN_LOG" live_answered)
if [ $rc -eq 0 ] && grep -q 'STALL: busy peer ok' "$RUN_LOG" && ! grep -q 'lost contact' "$RUN_LOG" &&
    [ "$replies" -gt 0 ] && [ "$answered" -gt 0 ]; then
    pass "liveness netns: rank on h2 12 s outside MPI (peer_timeout $timeout_s) lives: data intact, $replies probe replies"
else
    fail "liveness netns: busy rank" "rc=$rc replies=$replies answered=$answered" "$RUN_LOG"
fi
# The 12 s are no round trip: rank 1's last send before it left was
# acknowledged at once, but it read the ACK 12 s later; rank 0's data
# waited 12 s for rank 1 while rank 0's timer pinged it.  Neither may measure that
# (both ranks once ended with a smoothed round trip of seconds).
srtt0=$(rank_stat "$RUN_LOG" 0 srtt_max_us)
srtt1=$(rank_stat "$RUN_LOG" 1 srtt_max_us)
if [ $rc -eq 0 ] && [ "$srtt0" -lt 1000000 ] && [ "$srtt1" -lt 1000000 ]; then
    pass "liveness netns: round trips after 12 s away: srtt ${srtt0} us (rank 0), ${srtt1} us (rank 1)"
else
    fail "liveness netns: round trips after 12 s away" \
        "srtt_max_us rank 0 $srtt0, rank 1 $srtt1 (want < 1 s; 0: nothing measured)" "$RUN_LOG"
fi
nsbed_check_placement "liveness netns: one rank per host" 2 1

# ---- 2. h2's usnic path cut while its rank is away ----
EXTRA_MCA="--mca btl_usnic_peer_timeout $timeout_s" nsbed_start_mpi "$hosts1" 2 "$stall" busy 30
cut_at=""
for ((i = 0; i < 200; i++)); do
    if grep -rqs 'STALL: rank 1 away' "$RUN_LOG.d"; then
        nsbed_exec 2 nft -f - <<NFT
table inet usnic_cut {
    chain in {
        type filter hook input priority 0; policy accept;
        meta l4proto udp counter drop
    }
}
NFT
        cut_at=$SECONDS
        break
    fi
    kill -0 "$NSB_JOB" 2>/dev/null || break
    sleep 0.1
done
nsbed_wait_mpi
rc=$?
ended=$SECONDS
# mpirun knows h2 by the name in the hostfile (its address)
h2="($(nsbed_name 2)|$(nsbed_addr 2))"
if [ -z "$cut_at" ]; then
    fail "liveness netns: cut" "rank 1 never reported going away (rc=$rc)" "$RUN_LOG"
elif [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((ended - cut_at)) -le $((timeout_s + 2 + 3)) ] &&
    { grep -Eq "Peer host: *$h2 " "$RUN_LOG" || grep -q 'usnic: peer unreachable' "$RUN_LOG"; }; then
    pass "liveness netns: h2's usnic path cut: reported after $((ended - cut_at))s (peer_timeout $timeout_s), job ended (rc=$rc)"
else
    fail "liveness netns: cut" "rc=$rc, ended $((ended - cut_at))s after the cut" "$RUN_LOG"
fi
grep -Eq "Peer host: *$h2 " "$RUN_LOG" &&
    echo "    the help message names the peer host: $(grep -E -m1 'Peer host:' "$RUN_LOG")"
grep -q 'STALL: send completed' "$RUN_LOG" &&
    fail "liveness netns: cut" "MPI_Send completed although h2 never acknowledged" "$RUN_LOG"
nsbed_exec 2 nft delete table inet usnic_cut 2>/dev/null

# ---- 3. h2's link set down while its rank is away ----
# The BTL's report is what this checks.  The job's end is the launcher's:
# with h2's link down for good, mpirun (ORTE) waits for its daemon on h2
# (TCP retransmissions, minutes), so the link comes back once the report
# is out, and the abort then completes.
EXTRA_MCA="--mca btl_usnic_peer_timeout $timeout_s" nsbed_start_mpi "$hosts1" 2 "$stall" busy 30
cut_at=""
reported_at=""
for ((i = 0; i < 400; i++)); do
    if [ -z "$cut_at" ] && grep -rqs 'STALL: rank 1 away' "$RUN_LOG.d"; then
        nsbed_exec 2 ip link set "$NSB_DEV" down
        cut_at=$SECONDS
    fi
    if [ -n "$cut_at" ] && grep -rqs 'lost contact with a peer' "$RUN_LOG.d" "$RUN_LOG"; then
        reported_at=$SECONDS
        break
    fi
    [ -n "$cut_at" ] && [ $((SECONDS - cut_at)) -gt $((timeout_s + 10)) ] && break
    kill -0 "$NSB_JOB" 2>/dev/null || break
    sleep 0.1
done
nsbed_exec 2 ip link set "$NSB_DEV" up 2>/dev/null
nsbed_wait_mpi
rc=$?
if [ -z "$cut_at" ]; then
    fail "liveness netns: link down" "rank 1 never reported going away (rc=$rc)" "$RUN_LOG"
elif [ -n "$reported_at" ] && [ $((reported_at - cut_at)) -le $((timeout_s + 2)) ] &&
    [ $rc -ne 0 ] && [ $rc -ne 124 ] &&
    grep -Eq "Peer host: *$h2 \(interface $NSB_DEV, address $(nsbed_addr 2)\)" "$RUN_LOG"; then
    pass "liveness netns: h2's link down: reported $((reported_at - cut_at))s after (peer_timeout $timeout_s) naming h2, its interface and address; job ended (rc=$rc)"
else
    fail "liveness netns: link down" "rc=$rc, cut at ${cut_at}s, reported at ${reported_at:-never}s, or h2 not named" "$RUN_LOG"
fi
grep -m2 -E 'Local host:|Peer host:' "$RUN_LOG" | sed 's/^/    /'
finish
