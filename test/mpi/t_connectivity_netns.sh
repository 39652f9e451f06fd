#!/bin/bash
# The connectivity checker between two hosts made of network namespaces
# (test/lib/netns.sh; one rank on h1, one on h2), veths of MTU 9000 whose
# bridge port towards h2 (vh2, in the head namespace) carries only 1500
# bytes: an MTU black hole in the path, invisible to each host's own
# datagram self-test (frames above 1500 vanish between the hosts, no ICMP).
#   1. the data-checked ping-pong (0 B .. 1 MiB) completes over usnic: the
#      check finds that 8972-byte datagrams vanish and 1472-byte ones pass,
#      the pair uses 1472, and the warning names both hosts;
#   2. btl_usnic_connectivity_mtu_fallback 0: the job fails with the MTU
#      message within 10 s of its start (plus the launch);
#   3. all UDP to and from h2 dropped on h2's veth (nft):
#      the "no usable path" message naming h2's address comes within 10 s
#      and the job ends;
#   4. the path is fine at start-up and the black hole opens while 1 MiB
#      messages flow: the path is checked again, the pair goes on with
#      1472-byte datagrams (what was cut at 8972 goes in PART packets) and
#      the job completes with its data intact, with the "carry on" warning
#      (it used to hang, then to abort);
#   5. the same with btl_usnic_connectivity_mtu_fallback 0: the job ends
#      with the "stopped carrying" message within 20 s of the cut;
#   6. the black hole opens while the job runs and closes again once the
#      pair went down to 1472 (a link that failed over and back): with
#      btl_usnic_connectivity_raise_after 2 the full size is checked again
#      2 s after the shrink, passes, and the pair goes back to 8972-byte
#      datagrams (path_grown); the hole opens once more right after that
#      and is found within 7 s (not held back by the 10 s between checks of
#      stuck data), and closes again; every shrink is undone and the job
#      completes with its data intact;
#   7. the black hole from the start, and an attacker on h1's bridge port
#      (cc_forge.c) who reads the pings and answers every one above 1472
#      bytes from h2's address: its pongs lack the MAC only the pinged
#      process can make, so they are dropped and counted (cc_forged), the
#      pair uses 1472 from the start, and the raise checks (every second)
#      never grow it into the hole; the same attacker replays every ping
#      from the head's own address, and no responder echoes one there
#      (the ping's MAC names its source): all refused and counted
#      (live_forged);
#   8. vh2 takes 8000 bytes, between two of the checker's rungs (8972 and
#      4068): the check searches the gap and the pair uses 7972-byte
#      datagrams (it used 4068), with its data intact;
#   9. the black hole from the start, ranks 0 and 1 on h1, rank 2 on h2:
#      right after MPI_Init rank 0 sends rank 2 64 bytes (MPI_Send), starts
#      messages of 4000 bytes and 1 MiB to it (MPI_Isend), then exchanges
#      200 messages of 1 KiB with rank 1 (test/mpi/firstsend.c).  The
#      check of the path to h2 takes about 3 s (8972-byte pings vanish
#      through 12 rounds of 250 ms), but nothing waits for it that need
#      not: the small message (a datagram every usable path carries)
#      returns within 0.5 s, the calls within 1 s (the first that needs
#      the verdict waits for it one round, 250 ms), the exchanges end at
#      least a second before the 1 MiB message (which needs the verdict: rank 0
#      counts the peer in path_held), and that ends within 5 s (rank 2's
#      replies are small: they do not wait for its own check of the way
#      back), intact at 1472 bytes; the 4000 bytes, cut for 8972-byte
#      datagrams before the verdict, go as PART packets (tx_parted at rank
#      0, rx_joined at rank 2).  (Until session 33 the first send waited
#      in the BTL for the verdict: each call took the check's seconds,
#      every peer of the process went without ACKs meanwhile, and the
#      message took two checks, 6 s.)
#  10. the black hole from the start, and checks that give no verdict in
#      time (USNIC_CC_TEST_PATH_TIMEOUT_MS 300, where the check takes 3 s):
#      after 300 ms the pair counts as unchecked and sends 8972-byte
#      datagrams into the hole; a second later the stuck data has its path
#      checked again, which finds the hole, and the pair goes on at 1472
#      bytes (what was cut at 8972 in parts), with its data intact.
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"

if ! usnic_mode; then
    pass "connectivity netns (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
command -v nft >/dev/null || { fail "connectivity netns" "needs nft (nftables)"; finish; }
build_prog pingpong || finish
pp=$BIN
NSB_MTU=9000
nsbed_up 2 || finish
export USNIC_TEST_DEV=$NSB_DEV
hosts1=$(nsbed_hostfile 1)
# the misconfigured switch port: h2's side of the bridge takes 1500 bytes
ip -n "$NSB_HEAD" link set vh2 mtu 1500 ||
    { fail "connectivity netns" "cannot set vh2's MTU"; finish; }
h2addr=$(nsbed_addr 2)

# ---- 1. black hole: fallback to the largest size that passes ----
t0=$SECONDS
nsbed_run_mpi "$hosts1" 2 "$pp" -m 1m
rc=$?
if check_run "connectivity netns: black hole, data intact" $rc 2; then
    echo "    job took $((SECONDS - t0))s"
fi
if grep -q 'drops large UDP datagrams' "$RUN_LOG" && grep -q 'Largest passed: *1472 bytes' "$RUN_LOG" &&
    grep -q 'Expected size: *8972 bytes' "$RUN_LOG" &&
    grep -Eq "8972-byte datagrams vanish, 1472 pass: using 1472" "$RUN_LOG"; then
    pass "connectivity netns: black hole found (8972 vanish, 1472 pass), warned, 1472 used"
else
    fail "connectivity netns: black hole warning" "no MTU warning with 8972/1472" "$RUN_LOG"
fi
grep -m1 'Peer host:' "$RUN_LOG" | sed 's/^/    /'

# ---- 2. the same with the fallback off: an error within 10 s ----
t0=$SECONDS
EXTRA_MCA="--mca btl_usnic_connectivity_mtu_fallback 0" nsbed_run_mpi "$hosts1" 2 "$pp" -m 1m
rc=$?
took=$((SECONDS - t0))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 15 ] &&
    grep -q 'The job\s*$\|will be aborted' "$RUN_LOG" &&
    grep -q 'btl_usnic_connectivity_mtu_fallback 1 the pair' "$RUN_LOG"; then
    pass "connectivity netns: black hole with mtu_fallback 0: MTU error, job ended after ${took}s (rc=$rc)"
else
    fail "connectivity netns: mtu_fallback 0" "rc=$rc after ${took}s, or no MTU error" "$RUN_LOG"
fi
grep -q '^OK pingpong' "$RUN_LOG" &&
    fail "connectivity netns: mtu_fallback 0" "the job completed although it should have failed" "$RUN_LOG"

# ---- 3. no path at all to h2 ----
# (on h2's wire side only: its own datagram self-test, over its loopback,
# still passes, as it would behind a firewall in the path)
nsbed_exec 2 nft -f - <<NFT
table inet usnic_cc_cut {
    chain in {
        type filter hook input priority 0; policy accept;
        iifname "$NSB_DEV" meta l4proto udp counter drop
    }
    chain out {
        type filter hook output priority 0; policy accept;
        oifname "$NSB_DEV" meta l4proto udp counter drop
    }
}
NFT
t0=$SECONDS
nsbed_run_mpi "$hosts1" 2 "$pp" -m 1m
rc=$?
took=$((SECONDS - t0))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 15 ] &&
    grep -q 'could not get even a small UDP' "$RUN_LOG" &&
    grep -Eq "Peer host: .*address $h2addr\)" "$RUN_LOG"; then
    pass "connectivity netns: UDP to h2 dropped: no-path error naming $h2addr, job ended after ${took}s (rc=$rc)"
else
    fail "connectivity netns: no path" "rc=$rc after ${took}s, or no no-path message naming $h2addr" "$RUN_LOG"
fi
grep -m2 -E 'Local host:|Peer host:' "$RUN_LOG" | sed 's/^/    /'
nsbed_exec 2 nft delete table inet usnic_cc_cut 2>/dev/null

# ---- 4. a black hole that opens while the job runs ----
# The path is fine at start-up (8972-byte datagrams proven); once 1 MiB
# messages flow, vh2 takes only 1500 bytes again.  The hosts' veths get
# gso_max_segs 1, so that the kernel cuts every UDP_SEGMENT train into
# packets before it leaves (a train passes the bridge whole otherwise,
# whatever a port's MTU, which no real switch does).  The peer still
# answers small datagrams; without the re-check the job hangs until its
# timeout.
# cut_now: vh2 takes only 1500 bytes, and the hosts' trains are cut into
# packets before they leave
# (cut_now MTU: vh2 takes MTU bytes instead)
cut_now() {
    for h in 1 2; do
        ip -n "$(nsbed_ns $h)" link set "$NSB_DEV" gso_max_segs 1 || echo "    (gso_max_segs not set on h$h)"
    done
    ip -n "$NSB_HEAD" link set vh2 mtu "${1:-1500}"
}

# cut_open NAME ITERATIONS: start the ping-pong, open the black hole once
# 100 MB went out; sets t0 (when)
cut_open() {
    path_whole "$1"
    tx0=$(nsbed_ifstat 1 tx_bytes)
    nsbed_start_mpi "$hosts1" 2 "$pp" -n 1m -m 1m -i "$2"
    nsbed_wait_sent 1 100000000 "$tx0"
    cut_now
    t0=$SECONDS
}

# path_whole NAME: vh2 carries 9000 bytes again, and the hosts' trains
# leave whole
path_whole() {
    ip -n "$NSB_HEAD" link set vh2 mtu 9000 ||
        { fail "connectivity netns: $1" "cannot restore vh2's MTU"; finish; }
    for h in 1 2; do
        ip -n "$(nsbed_ns $h)" link set "$NSB_DEV" gso_max_segs 65535 2>/dev/null
    done
}

# cut_while_running NAME ITERATIONS: cut_open, then wait for the job; sets
# rc and took (seconds after the cut)
cut_while_running() {
    cut_open "$1" "$2"
    nsbed_wait_mpi
    rc=$?
    took=$((SECONDS - t0))
}

# ---- 4. ... with the fallback (the default): the job goes on ----
# (at 1472 bytes, with the kernel cutting every train on both hosts, the
# rest of the job takes about 10 s, 20 s over the udp provider).  The
# full size is tried again every second (btl_usnic_connectivity_raise_after
# 1): the hole stays open, so those checks must change nothing.
EXTRA_MCA="--mca btl_usnic_connectivity_raise_after 1" cut_while_running "black hole while running" 100
parted=$(stat_sum "$RUN_LOG" tx_parted)
joined=$(stat_sum "$RUN_LOG" rx_joined)
shrunk=$(stat_sum "$RUN_LOG" path_shrunk)
grown=$(stat_sum "$RUN_LOG" path_grown)
if check_run "connectivity netns: black hole opened while running, data intact" $rc 2 &&
    grep -q 'The two processes carry on' "$RUN_LOG" && grep -q 'Size in use: *8972 bytes' "$RUN_LOG" &&
    grep -q 'Largest passed: *1472 bytes' "$RUN_LOG" && [ "$shrunk" -ge 1 ] &&
    [ "$parted" -ge 1 ] && [ "$joined" -ge 1 ] && [ "$grown" -eq 0 ]; then
    pass "connectivity netns: black hole opened while running: found again, 1472 used from then on, job completed ${took}s after the cut (path_shrunk=$shrunk, tx_parted=$parted, rx_joined=$joined, path_grown=$grown with $(grep -c 'still vanish' "$RUN_LOG") raise checks that failed)"
else
    fail "connectivity netns: black hole while running" \
        "rc=$rc ${took}s after the cut, no 'carry on' warning with 8972/1472, no datagram sent in parts, or a raise check grew the size while the hole was open (path_shrunk=$shrunk tx_parted=$parted rx_joined=$joined path_grown=$grown)" "$RUN_LOG"
fi
grep -m3 'checking the path again\|using 1472 from now on\|still vanish' "$RUN_LOG" | sed 's/^/    /'

# ---- 5. ... without it: the job ends with the MTU error ----
EXTRA_MCA="--mca btl_usnic_connectivity_mtu_fallback 0" cut_while_running "black hole while running, no fallback" 300
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 20 ] &&
    grep -q 'stopped carrying the' "$RUN_LOG" && grep -q 'Size in use: *8972 bytes' "$RUN_LOG" &&
    grep -q 'Largest passed: *1472 bytes' "$RUN_LOG" && ! grep -q '^OK pingpong' "$RUN_LOG"; then
    pass "connectivity netns: black hole opened while running, mtu_fallback 0: MTU error, job ended ${took}s after the cut (rc=$rc)"
else
    fail "connectivity netns: black hole while running, no fallback" \
        "rc=$rc ${took}s after the cut, or no 'stopped carrying' error with 8972/1472" "$RUN_LOG"
fi

# ---- 6. ... and closes again: the full size comes back ----
# (then the hole opens once more right after the pair went back to 8972:
# found again within seconds, not 10 s after the raise check; and closes
# again, so that every shrink is undone by the end)

# wait_log PATTERN N: until N lines of the running job's output match
# (at most 30 s); sets waited (seconds)
wait_log() {
    local i w0=$SECONDS
    for ((i = 0; i < 150; i++)); do
        [ "$(grep -rhs "$1" "$RUN_LOG.d" | wc -l)" -ge "$2" ] && break
        sleep 0.2
    done
    waited=$((SECONDS - w0))
}

EXTRA_MCA="--mca btl_usnic_connectivity_raise_after 2" cut_open "black hole closing again" 300
wait_log 'using 1472 from now on' 1
shrunk_after=$waited
path_whole "black hole closing again"
wait_log 'pass again: using 8972 from now on' 1
grown_after=$waited
cut_now
wait_log 'using 1472 from now on' 2
recut_after=$waited
path_whole "black hole closing again"
nsbed_wait_mpi
rc=$?
shrunk=$(stat_sum "$RUN_LOG" path_shrunk)
grown=$(stat_sum "$RUN_LOG" path_grown)
if check_run "connectivity netns: black hole opened and closed again while running, data intact" $rc 2 &&
    [ "$shrunk" -ge 2 ] && [ "$grown" -eq "$shrunk" ] && [ "$recut_after" -le 7 ] &&
    grep -q 'checking whether 8972 pass again' "$RUN_LOG" &&
    grep -q '8972-byte datagrams pass again: using 8972 from now on' "$RUN_LOG"; then
    pass "connectivity netns: black hole closed again: 1472 used ${shrunk_after}s after the cut, 8972 again ${grown_after}s after the repair, 1472 again ${recut_after}s after a second cut, every shrink undone (path_shrunk=$shrunk, path_grown=$grown)"
else
    fail "connectivity netns: black hole closing again" \
        "rc=$rc; shrunk ${shrunk_after}s after the cut, grown ${grown_after}s after the repair, shrunk again ${recut_after}s after the second cut (at most 7 s); path_shrunk=$shrunk path_grown=$grown (want >= 2, equal)" "$RUN_LOG"
fi
grep -m4 'checking whether\|pass again\|from now on' "$RUN_LOG" | sed 's/^/    /'

# ---- 7. forged answers to the pings, replays from elsewhere ----
# (cc_forge takes the ping format from the component's header)
cut_now
if nsbed_forge_start vh1 1472 -R "$NSB_HEAD_ADDR"; then
    EXTRA_MCA="--mca btl_usnic_connectivity_raise_after 1" nsbed_run_mpi "$hosts1" 2 "$pp" -n 1m -m 1m -i 40
    rc=$?
    nsbed_forge_stop
    forged=$NSB_FORGE_FORGED
    pings=$NSB_FORGE_PINGS
    dropped=$(stat_sum "$RUN_LOG" cc_forged)
    grown=$(stat_sum "$RUN_LOG" path_grown)
    if check_run "connectivity netns: forged pongs, data intact" $rc 2 &&
        grep -Eq "8972-byte datagrams vanish, 1472 pass: using 1472" "$RUN_LOG" &&
        grep -q 'has a wrong MAC: dropped' "$RUN_LOG" && [ "${forged:-0}" -ge 2 ] &&
        [ "$dropped" -ge 2 ] && [ "$grown" -eq 0 ]; then
        pass "connectivity netns: forged pongs: $forged sent (of $pings pings seen), $dropped dropped for a wrong MAC (cc_forged), 1472 used, path_grown=0 with $(grep -c 'still vanish' "$RUN_LOG") raise checks that failed"
    else
        fail "connectivity netns: forged pongs" \
            "rc=$rc; forged=${forged:-none} pings=${pings:-none} cc_forged=$dropped path_grown=$grown; a forged pong was taken, not counted, or the pair did not use 1472 ($(tr '\n' ' ' <"$NSB_FORGE_OUT.log"))" "$RUN_LOG"
    fi
    # the same attacker replayed every ping from the head's address: the
    # responders must not answer a source the ping's MAC does not name
    refused=$(stat_sum "$RUN_LOG" live_forged)
    if [ "${NSB_FORGE_REPLAYED:-0}" -ge 2 ] && [ "${NSB_FORGE_REFLECTED:-x}" = 0 ] &&
        [ "$refused" -ge 2 ]; then
        pass "connectivity netns: $NSB_FORGE_REPLAYED pings replayed from the head's address: 0 echoed there, $refused refused (live_forged)"
    else
        fail "connectivity netns: pings replayed from another address" \
            "replayed=${NSB_FORGE_REPLAYED:-none} reflected=${NSB_FORGE_REFLECTED:-none} (want 0) live_forged=$refused (want >= 2)" "$RUN_LOG"
    fi
fi
path_whole "forged pongs"

# ---- 8. a path between two rungs ----
cut_now 8000
nsbed_run_mpi "$hosts1" 2 "$pp" -n 1m -m 1m -i 20
rc=$?
found=$(grep -Eo 'vanish, [0-9]+ pass: using [0-9]+' "$RUN_LOG" | sort -u | tr '\n' ';')
if check_run "connectivity netns: 8000-byte path, data intact" $rc 2 &&
    grep -Eq "8972-byte datagrams vanish, 79(6[4-9]|7[0-2]) pass: using 79(6[4-9]|7[0-2])" "$RUN_LOG"; then
    pass "connectivity netns: 8000-byte path: $found"
else
    fail "connectivity netns: 8000-byte path" \
        "rc=$rc, or the pair did not find 7964-7972-byte datagrams ($found)" "$RUN_LOG"
fi
path_whole "8000-byte path"

# ---- 9. the first send to a peer behind the hole does not hold the sender ----
build_prog firstsend || finish
fs=$BIN
cut_now
hosts21=$TEST_TMP/logs/$MT_NAME.$$.hosts.21
printf '%s slots=2\n%s slots=1\n' "$(nsbed_addr 1)" "$(nsbed_addr 2)" >"$hosts21"
nsbed_run_mpi "$hosts21" 3 "$fs" -p 2 -l 1 -n 1048576 -k 200
rc=$?
line=$(grep -m1 '^FIRSTSEND: 64 bytes' "$RUN_LOG")
read -r t_small t_call t_exch t_msg < <(echo "$line" |
    sed -n 's/.* sent after \([0-9.]*\) s; .* returned after \([0-9.]*\) s; .* done after \([0-9.]*\) s; the message done after \([0-9.]*\) s/\1 \2 \3 \4/p')
held=$(rank_stat "$RUN_LOG" 0 path_held)
parted=$(rank_stat "$RUN_LOG" 0 tx_parted)
joined=$(rank_stat "$RUN_LOG" 2 rx_joined)
if check_run "connectivity netns: first send behind the hole, data intact" $rc 3 &&
    grep -Eq "\[usnic stats\] host=$(nsbed_name 2) .* rank=2 " "$RUN_LOG" &&
    grep -Eq "\[usnic stats\] host=$(nsbed_name 1) .* rank=1 " "$RUN_LOG" &&
    grep -Eq "8972-byte datagrams vanish, 1472 pass: using 1472" "$RUN_LOG" &&
    [ -n "$t_msg" ] && [ "${held:-0}" -ge 1 ] && [ "${parted:-0}" -ge 1 ] && [ "${joined:-0}" -ge 1 ] &&
    awk -v s="$t_small" -v c="$t_call" -v e="$t_exch" -v m="$t_msg" \
        'BEGIN { exit !(s < 0.5 && c < 1 && e + 1 < m && m < 5) }'; then
    pass "connectivity netns: first sends behind the hole: 64 bytes sent after $t_small s, the MPI_Isends of 4000 bytes and 1 MiB returned after $t_call s, 200 exchanges with a neighbour done after $t_exch s, the 1 MiB message after $t_msg s (path_held=$held; the 4000 bytes in parts: tx_parted=$parted, rx_joined=$joined)"
else
    fail "connectivity netns: first sends behind the hole" \
        "rc=$rc; 64 bytes ${t_small:-?} s (want < 0.5), MPI_Isends ${t_call:-?} s (want < 1), exchanges ${t_exch:-?} s, message ${t_msg:-?} s (want the exchanges a second sooner, the message within 5 s); path_held=${held:-?} tx_parted=${parted:-?} rx_joined=${joined:-?} (each wanted >= 1); or no black hole found, or ranks 1 and 2 not on h1 and h2" "$RUN_LOG"
fi
path_whole "first send behind the hole"

# ---- 10. no verdict in time: unchecked, then found by the check of stuck data ----
cut_now
USNIC_CC_TEST_PATH_TIMEOUT_MS=300 EXTRA_MCA="-x USNIC_CC_TEST_PATH_TIMEOUT_MS" \
    nsbed_run_mpi "$hosts1" 2 "$pp" -n 1m -m 1m -i 10
rc=$?
shrunk=$(stat_sum "$RUN_LOG" path_shrunk)
parted=$(stat_sum "$RUN_LOG" tx_parted)
if check_run "connectivity netns: no verdict in time, data intact" $rc 2 &&
    grep -q 'no verdict 300 ms after the check was asked for' "$RUN_LOG" &&
    grep -q 'not checked; using 8972-byte datagrams' "$RUN_LOG" &&
    grep -q 'using 1472 from now on' "$RUN_LOG" && [ "$shrunk" -ge 1 ] && [ "$parted" -ge 1 ]; then
    pass "connectivity netns: no verdict in time: unchecked at 8972, then the stuck data's check found the hole and the pair went on at 1472 (path_shrunk=$shrunk, tx_parted=$parted)"
else
    fail "connectivity netns: no verdict in time" \
        "rc=$rc; no 'no verdict' or 'not checked' note, or the hole was not found afterwards (path_shrunk=$shrunk tx_parted=$parted, each wanted >= 1)" "$RUN_LOG"
fi
path_whole "no verdict in time"

finish
