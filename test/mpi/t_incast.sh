#!/bin/bash
# Many senders into one receiver (incast, test/mpi/incast.c: random sizes
# at the protocol boundaries, every byte and the guard bytes checked).  The
# receiver shares its data channel's receive buffer among the peers that
# are sending to it (btl_usnic_rx_share): every ACK carries the allowance
# (the header's allow field), and senders keep no more than it in flight.
#   1. 5 senders on loopback, a small receive buffer (btl_usnic_udp_sockbuf
#      512 KiB): data intact; rank 0 counted 5 senders at once
#      (rx_senders_max) and said so at verbose level 20 with the share it
#      gives each, budget / 5 (KiB); the allowance held the senders back
#      (allow_full > 0)
#   2. rx_share 0: data intact, nothing counted, nobody held back by an
#      allowance
#   3. both directions at once (rank 0 sends to everyone meanwhile) under
#      fault injection (drops, duplicates, reordering): data intact, resends
#   4. across 3 network-namespace hosts at MTU 1500 (rank 0 alone on h1, 4
#      senders on h2 and h3): data intact, rank 0 counted 4 senders, the
#      allowance held them back
#   6. (run before 4.) the first message to a peer that computes outside
#      MPI (test/mpi/firstsend.c): MPI_Send returns long before the peer
#      comes back (kernel backend; over a provider sends complete with
#      their ACKs)
#   5. (run before 4.) yielding the CPU, with Open MPI's own
#      mpi_yield_when_idle 0: btl_usnic_yield_idle -1 decides from the
#      ranks on this host and its CPUs (verbose 10, every rank); 1 yields
#      (idle_yields > 0), but not under mpi_yield_when_idle 1 (nor
#      tx_yields); btl_usnic_yield_blocked 1 us with yield_idle 0: senders
#      waiting for their allowance yield (tx_yields > 0, idle_yields = 0);
#      both 0: no yield at all
# INCAST_SEED (default: from the clock, printed) chooses the sizes.
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

if ! usnic_mode; then
    fail "incast" "runs over usnic only (its counters are the point)"
    finish
fi
seed=${INCAST_SEED:-$(date +%s)}
echo "    incast: seed $seed (INCAST_SEED=$seed reproduces the sizes)"
build_prog incast || finish
incast=$BIN

# share_line NP: rank 0's verbose line for NP senders is there, and its
# share is the budget it names divided by NP (KiB, at least 1)
share_line() {
    local n=$1 line kib budget want
    line=$(grep -o "$n peers sending to us at once: each may keep [0-9]* KiB in flight (the receive buffer's [0-9]* KiB shared)" "$RUN_LOG" | head -n 1)
    kib=$(sed -n 's/.*each may keep \([0-9]*\) KiB.*/\1/p' <<< "$line")
    budget=$(sed -n "s/.*buffer's \([0-9]*\) KiB.*/\1/p" <<< "$line")
    if [ -z "$kib" ] || [ -z "$budget" ]; then
        MT_WHY="no verbose line for $n peers"
        return 1
    fi
    want=$((budget / n))
    [ "$want" -lt 1 ] && want=1
    MT_WHY="each of $n may keep $kib KiB of $budget (want $want)"
    [ "$kib" = "$want" ]
}

# ---- 1. 5 senders, shared
EXTRA_MCA="--mca btl_usnic_udp_sockbuf 524288 --mca btl_base_verbose 20" \
    run_mpi 6 "$incast" -k 6 -r 3 -s "$seed"
check_run "incast: 5 senders into one, random sizes, data intact (seed $seed)" $? 6
n=$(rank_stat "$RUN_LOG" 0 rx_senders_max)
if [ "$n" = 5 ] && share_line 5; then
    pass "incast: rank 0 counted 5 senders at once and shared its buffer: $MT_WHY"
else
    fail "incast: rank 0 counted 5 senders and shared its buffer" "rx_senders_max=$n; $MT_WHY" "$RUN_LOG"
fi
held=$(stat_sum "$RUN_LOG" allow_full)
if [ "$held" -gt 0 ]; then
    pass "incast: the allowance held the senders back ($held times)"
else
    fail "incast: the allowance held the senders back" "allow_full $held in all" "$RUN_LOG"
fi
echo "    incast shared: kernel_drops $(stat_sum "$RUN_LOG" kernel_drops), retrans $(stat_sum "$RUN_LOG" retrans) (timeouts $(stat_sum "$RUN_LOG" timeout_retrans))"

# ---- 2. not shared
EXTRA_MCA="--mca btl_usnic_udp_sockbuf 524288 --mca btl_usnic_rx_share 0" \
    run_mpi 6 "$incast" -k 6 -r 3 -s "$seed"
check_run "incast: rx_share 0, data intact" $? 6
n=$(stat_sum "$RUN_LOG" rx_senders_max)
held=$(stat_sum "$RUN_LOG" allow_full)
if [ "$n" = 0 ] && [ "$held" = 0 ]; then
    pass "incast: rx_share 0: no senders counted, nobody held back by an allowance"
else
    fail "incast: rx_share 0 turns the sharing off" "rx_senders_max $n, allow_full $held" "$RUN_LOG"
fi
echo "    incast not shared: kernel_drops $(stat_sum "$RUN_LOG" kernel_drops), retrans $(stat_sum "$RUN_LOG" retrans) (timeouts $(stat_sum "$RUN_LOG" timeout_retrans))"

# ---- 3. both directions under faults
EXTRA_MCA="--mca btl_usnic_udp_sockbuf 524288 --mca btl_usnic_debug_drop_rate 0.02
    --mca btl_usnic_debug_dup_rate 0.02 --mca btl_usnic_debug_reorder_rate 0.05" \
    run_mpi 5 "$incast" -k 4 -r 3 -b -s "$((seed + 1))"
check_run "incast: both directions at once, drops, duplicates, reordering, data intact" $? 5
r=$(stat_sum "$RUN_LOG" retrans)
if [ "$r" -gt 0 ]; then
    pass "incast under faults: $r datagrams resent, allowance waits $(stat_sum "$RUN_LOG" allow_full)"
else
    fail "incast under faults: resends" "retrans $r" "$RUN_LOG"
fi

# ---- 5. giving the CPU away where ranks share CPUs (btl_usnic_yield_idle,
# btl_usnic_yield_blocked).  Open MPI's own mpi_yield_when_idle is set to 0
# here (mpirun would turn it on for this oversubscribed job, and then usnic
# leaves the yielding to it).
# count_is N WANT: N is 0 (WANT 0), more than 0 (WANT +), or anything (-)
count_is() {
    case $2 in
        0) [ "${1:-0}" = 0 ] ;;
        +) [ "${1:-0}" -gt 0 ] ;;
        *) true ;;
    esac
}
# yield_run NAME MCA IDLE TX: the incast with MCA, data checked; IDLE and
# TX say what idle_yields and tx_yields must be (count_is)
yield_run() {
    local name=$1 mca=$2 want_idle=$3 want_tx=$4 y t
    EXTRA_MCA="--mca btl_usnic_udp_sockbuf 524288 $mca" \
        run_mpi 6 "$incast" -k 4 -r 2 -s "$((seed + 3))"
    check_run "incast: $name, data intact" $? 6
    y=$(stat_sum "$RUN_LOG" idle_yields)
    t=$(stat_sum "$RUN_LOG" tx_yields)
    if count_is "$y" "$want_idle" && count_is "$t" "$want_tx"; then
        pass "incast: $name: idle_yields $y, tx_yields $t"
    else
        fail "incast: $name" "idle_yields $y (want $want_idle), tx_yields $t (want $want_tx), allow_full $(stat_sum "$RUN_LOG" allow_full)" "$RUN_LOG"
    fi
}
cpus=$(nproc)
want=spins
[ 6 -gt "$cpus" ] && want="yields the CPU"
yield_run "yield_idle automatic" "--mca mpi_yield_when_idle 0 --mca btl_base_verbose 10" - -
lines=$(grep -c "6 of the job's ranks on this host, [0-9]* CPUs: idle progress $want (btl_usnic_yield_idle -1)" "$RUN_LOG")
if [ "$lines" -ge 6 ]; then
    pass "incast: every rank saw 6 ranks on this host ($cpus CPUs here) and so $want"
else
    fail "incast: yield_idle -1 decided from ranks and CPUs" "want '$want' from 6 ranks, $lines lines" "$RUN_LOG"
fi
yield_run "yield_idle 1, idle progress gives the CPU away" \
    "--mca mpi_yield_when_idle 0 --mca btl_usnic_yield_idle 1" + -
yield_run "yield_idle 1 under mpi_yield_when_idle 1: Open MPI yields, usnic not again" \
    "--mca mpi_yield_when_idle 1 --mca btl_usnic_yield_idle 1" 0 0
yield_run "yield_blocked 1 us: senders waiting for their allowance yield, never idle otherwise" \
    "--mca mpi_yield_when_idle 0 --mca btl_usnic_yield_idle 0 --mca btl_usnic_yield_blocked 1" 0 +
yield_run "yield_idle 0, yield_blocked 0: never yielded" \
    "--mca mpi_yield_when_idle 0 --mca btl_usnic_yield_idle 0 --mca btl_usnic_yield_blocked 0" 0 0

# ---- 6. the first message to a peer away from MPI (test/mpi/firstsend.c):
# a chunked send that the BTL completes once it is on the wire, with a
# copy for resending (btl_usnic_early_copy_max), must not wait for a peer
# that computes outside MPI, however small the peer's buffer.  4 ranks,
# 1472-byte datagrams, 256 KiB buffers, 120000 bytes, rank 1 away for 3 s.
# (Session 32 tried a smaller share of the peer's buffer until its first
# ACK; without a time limit on it, this MPI_Send took the whole 3 s.)  Over
# a provider a send completes with its ACK: there only the data counts.
build_prog firstsend || finish
EXTRA_MCA="--mca btl_usnic_udp_sockbuf 262144 --mca btl_usnic_udp_datagram_size -1" \
    run_mpi 4 "$BIN" -a 3 -n 120000
check_run "incast: first message to a peer away from MPI, data intact" $? 4
took=$(sed -n 's/^FIRSTSEND: MPI_Send of [0-9]* bytes returned after \([0-9.]*\) s.*/\1/p' "$RUN_LOG")
if [ "$(usnic_backend)" = kernel ]; then
    if [ -n "$took" ] && awk -v t="$took" 'BEGIN { exit !(t < 1.5) }'; then
        pass "incast: the first send to a peer away for 3 s returned after $took s"
    else
        fail "incast: a first send does not wait for a peer away from MPI" "MPI_Send took ${took:-?} s (want < 1.5)" "$RUN_LOG"
    fi
fi

# ---- 4. three namespace hosts
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"
nsbed_up 3 || finish
export USNIC_TEST_DEV=$NSB_DEV
hf=$TEST_TMP/logs/$MT_NAME.$$.incast-hosts
{
    echo "$(nsbed_addr 1) slots=1"
    echo "$(nsbed_addr 2) slots=2"
    echo "$(nsbed_addr 3) slots=2"
} > "$hf"
EXTRA_MCA="--mca btl_usnic_udp_sockbuf 1048576" \
    nsbed_run_mpi "$hf" 5 "$incast" -k 4 -r 3 -s "$((seed + 2))"
check_run "incast: 4 senders on 2 hosts into one on a third, MTU 1500, data intact" $? 5
n=$(rank_stat "$RUN_LOG" 0 rx_senders_max)
held=$(stat_sum "$RUN_LOG" allow_full)
if [ "$n" = 4 ] && share_line 4 && [ "$held" -gt 0 ]; then
    pass "incast between hosts: rank 0 counted 4 senders, $MT_WHY; held back $held times"
else
    fail "incast between hosts: 4 senders counted and held back" "rx_senders_max $n, allow_full $held; $MT_WHY" "$RUN_LOG"
fi
echo "    incast between hosts: kernel_drops $(stat_sum "$RUN_LOG" kernel_drops), retrans $(stat_sum "$RUN_LOG" retrans) (timeouts $(stat_sum "$RUN_LOG" timeout_retrans))"
nsbed_no_leftovers "incast between hosts"
finish
