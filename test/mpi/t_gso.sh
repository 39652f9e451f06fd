#!/bin/bash
# The kernel backend's trains (UDP_SEGMENT) and batched receives (UDP_GRO),
# with 1472-byte datagrams (btl_usnic_udp_datagram_size -1) on loopback,
# the pingpong program checking every byte (0 B .. 16 MiB+1):
#   a. trains on: both ranks sent trains (gso_trains > 0), copied into one
#      buffer for the kernel (trains_copied > 0: datagrams of at most
#      btl_usnic_train_copy bytes), several at once (tx_batched > 0: one
#      sendmmsg for the trains of a large message, btl_usnic_tx_batch),
#      and received coalesced batches (gro_batches > 0)
#   b. 2% of arriving datagrams dropped by fault injection (after the GRO
#      split, so trains lose datagrams in their middle): data intact,
#      retransmissions, trains still sent
#      The chunks of 1472-byte datagrams, PUTs' too, all go through the
#      receive buffers (rx_direct = 0: never in place)
#   c. the kernel refusing UDP_SEGMENT (btl_usnic_debug_gso_refused 1, as
#      EIO from a kernel or device without it): the verbose note says so,
#      no train is sent, the data arrive datagram by datagram (8972-byte
#      ones: their PUT chunks still received in place)
#   d. btl_usnic_gso 0: no trains, no GRO batches; with btl_usnic_rx_predict
#      0 no chunk predicted (a. and b. predict chunks from the one before:
#      rx_predicted > 0, as does f.'s run with the MACs checked one by one)
#   f. messages up to 256 KiB + 1 (eager, chunked, no PUT): with 1472-byte
#      datagrams their chunks go through receive buffers (rx_direct = 0:
#      the scattered receive costs more than it saves there), with
#      8972-byte ones straight into the reassembly buffer (rx_direct > 0)
#   g. messages up to 512 KiB + 1: the largest go by rendezvous and PUT;
#      a 1 MiB ping-pong with 1472-byte datagrams: no PUT chunk received
#      in place; the first PUT into the target copied past the caches,
#      every later one into the same target through the cache (at least
#      one chunk and at most two messages' worth streamed)
#   h. loopback's own datagram size (65507 bytes: too large for trains or
#      GRO): no trains, but chunks still received straight into their
#      destination (rx_direct > 0) and sent several per sendmmsg
#      (tx_batched > 0), also with 2% drops, 1% duplicates and 2%
#      reordering injected; with btl_usnic_tx_batch 1 one by one
#      (tx_batched = 0); but 12 messages of 1 MiB (+ up to 4 KiB)
#      each way at once, each into a target of its own (manymsgs -b): every
#      PUT chunk copied past the caches from a receive buffer
#      (rx_put_streamed > 0, rx_direct = 0: a cold target is filled faster
#      so than by the kernel), also under faults, and with 1472-byte
#      datagrams (one store fence per progress call, not per chunk); with
#      1472-byte datagrams the trains of these PUTs (larger than
#      btl_usnic_train_copy_put_max) go to the kernel in pieces, not copied
#      (gso_trains > trains_copied), also under faults, and so do those
#      of a 512 KiB ping-pong's PUTs (smaller, but each starts with nothing
#      else in flight: waited for); with btl_usnic_train_copy_put_max 0
#      every train is copied
#   i. thousands of messages of mixed sizes outstanding at once (manymsgs,
#      every byte checked, both ways): the window opens for several queued
#      messages at once and their datagrams share trains, a message's short
#      last datagram padded to the train's size (gso_pads > 0 on both
#      ranks), and, with 8972-byte datagrams, padded last chunks received
#      in place (rx_direct_pad > 0);
#      the same with 2% drops, 1% duplicates and 2% reordering injected,
#      once with the trains copied together and once handed to the kernel
#      as a piece per header, payload and padding (btl_usnic_train_copy 0)
#      and with their header MACs computed one by one (btl_usnic_mac_lanes
#      0: macs_tx_lanes = macs_rx_lanes = 0; chunks still predicted, checked
#      on f.'s fault-free fragments); in a., where the CPU has
#      AVX-512 (and VBMI2), the MACs of trains and coalesced receives are computed 8 at
#      a time (macs_tx_lanes > 0, macs_rx_lanes > 0), in f.'s 8972-byte run
#      those of chunks received in place too (macs_rx_lanes >= rx_direct),
#      elsewhere never
#   j. btl_usnic_tx_coalesce (65536 by default): trains left open for the
#      next messages while 64 KiB or more are unacknowledged (tx_held > 0
#      on both ranks; with btl_usnic_tx_coalesce 0 never: tx_held = 0 in
#      i.), every byte still checked, also with 2% drops, 1% duplicates and
#      2% reordering injected; and a sender that computes for 2 s after a
#      burst of 12 x 16 KiB (burst.c): its held train is sent by the
#      liveness thread (tx_late > 0), the receiver has every message within
#      500 ms; with btl_usnic_liveness 0 nothing is held (tx_held = 0)
#   e. btl_usnic_direct_recv 0, 8972-byte datagrams: trains, but no chunk
#      received straight into its target (c. and f. receive them so with
#      the same datagrams: rx_direct > 0; b.'s
#      injected faults take the whole-datagram path; t_hostile and
#      t_multihost run direct receives under attack and real loss)
# Over another backend (run-all.sh's libfabric udp pass) only the data
# checks apply: no trains there.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog pingpong || finish
pingpong=$BIN
floor=$((4 * $(pingpong_size_sum $((16 * 1024 * 1024 + 1)))))
small="--mca btl_usnic_udp_datagram_size -1"
mid="--mca btl_usnic_udp_datagram_size 8972"
kernel=false
usnic_mode && [ "$(usnic_backend)" = kernel ] && kernel=true

EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN"
if check_run "gso: trains" $? 2 "$floor" && $kernel; then
    each_rank "gso: trains sent" gso_trains -gt 0
    each_rank "gso: trains copied into one buffer" trains_copied -gt 0
    each_rank "gso: coalesced receives" gro_batches -gt 0
    each_rank "gso: trains sent several per system call" tx_batched -gt 0
    each_rank "gso: chunks taken on the predicted path" rx_predicted -gt 0
    each_rank "gso: 1400-byte chunks, PUTs' too, not received in place" rx_direct -eq 0
    if grep -qw avx512f /proc/cpuinfo && grep -qw avx512_vbmi2 /proc/cpuinfo; then
        each_rank "gso: header MACs of trains computed 8 at a time" macs_tx_lanes -gt 0
        each_rank "gso: header MACs of coalesced receives computed 8 at a time" macs_rx_lanes -gt 0
    else
        each_rank "gso: no AVX-512, header MACs one by one" macs_tx_lanes -eq 0
    fi
fi

EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_debug_drop_rate 0.02 --mca btl_usnic_debug_seed 7" \
    run_mpi 2 "$BIN"
if check_run "gso: 2% loss inside trains" $? 2 "$floor" && usnic_mode; then
    each_rank "gso: 2% loss, datagrams dropped" inj_drop -gt 0
    each_rank "gso: 2% loss, resent" retrans -gt 0
    $kernel && each_rank "gso: 2% loss, trains sent" gso_trains -gt 0
    $kernel && each_rank "gso: 2% loss, chunks predicted" rx_predicted -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} $mid --mca btl_usnic_debug_gso_refused 1 --mca btl_base_verbose 5" \
    run_mpi 2 "$BIN"
if check_run "gso: refused by the kernel" $? 2 "$floor" && $kernel; then
    each_rank "gso: refused, no train sent" gso_trains -eq 0
    each_rank "gso: refused, datagrams still received in place" rx_direct -gt 0
    n=$(grep -c "the kernel refuses UDP_SEGMENT" "$RUN_LOG")
    if [ "$n" -ge 2 ]; then
        pass "gso: refused: the fall back noted ($n lines)"
    else
        fail "gso: refused" "expected the 'kernel refuses UDP_SEGMENT' note from 2 ranks, found $n" \
            "$RUN_LOG"
    fi
fi

EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_gso 0 --mca btl_usnic_rx_predict 0" run_mpi 2 "$BIN"
if check_run "gso: off" $? 2 "$floor" && $kernel; then
    each_rank "gso: off, no train" gso_trains -eq 0
    each_rank "gso: off, no coalesced receive" gro_batches -eq 0
    each_rank "gso: rx_predict 0, nothing predicted" rx_predicted -eq 0
fi

# f. messages up to 256 KiB + 1 only: eager fragments, chunked, no PUT
#    (the eager limit is 300000 bytes, so a 256 KiB message goes without
#    a rendezvous).  Chunks of 1472-byte datagrams all go through the
#    receive buffers; those of 8972-byte datagrams, after a fragment's
#    first GRO batch, straight into its reassembly buffer
ffloor=$((4 * $(pingpong_size_sum 262145)))
# checked_run NAME MCA FLOOR PUTS ARGS...: $BIN ARGS with MCA, every byte
# checked, and PUTs as PUTS says ("none" or "some"); true where the
# kernel backend's counters follow
checked_run() {
    local name=$1 mca=$2 floor=$3 puts=$4
    shift 4
    EXTRA_MCA="${EXTRA_MCA:-} $mca" run_mpi 2 "$BIN" "$@"
    check_run "$name" $? 2 "$floor" || return 1
    if [ "$puts" = none ]; then
        each_rank "$name, no PUT (no rendezvous)" puts -eq 0
    else
        each_rank "$name, by PUT" puts -gt 0
    fi
    $kernel
}
# fragments_run NAME MCA: the pingpong up to 256 KiB + 1, no PUT
fragments_run() {
    checked_run "$1" "$2" "$ffloor" none -m 262145
}
if fragments_run "gso: fragments up to 256 KiB + 1" "$small"; then
    each_rank "gso: 1400-byte chunks not received in place" rx_direct -eq 0
    each_rank "gso: 1400-byte chunks, coalesced receives" gro_batches -gt 0
fi
if fragments_run "gso: fragments up to 256 KiB + 1, 8972-byte datagrams" "$mid"; then
    each_rank "gso: 8972-byte datagrams, trains sent" gso_trains -gt 0
    each_rank "gso: 8900-byte chunks received in place (direct receive)" rx_direct -gt 0
    if grep -qw avx512f /proc/cpuinfo && grep -qw avx512_vbmi2 /proc/cpuinfo; then
        # the chunks received in place: their headers' MACs together, as
        # a coalesced receive's
        for r in 0 1; do
            lanes=$(rank_stat "$RUN_LOG" $r macs_rx_lanes)
            direct=$(rank_stat "$RUN_LOG" $r rx_direct)
            if [ "$lanes" -ge "$direct" ]; then
                pass "gso: rank $r: MACs of chunks received in place computed 8 at a time ($lanes >= rx_direct $direct)"
            else
                fail "gso: rank $r: MACs of chunks received in place" \
                    "macs_rx_lanes=$lanes < rx_direct=$direct" "$RUN_LOG"
            fi
        done
    fi
fi

# the header MACs checked one by one (no lanes) still let chunks take the
# predicted path: fragments up to 256 KiB + 1, no faults (under i.'s
# injected faults, with its mostly small messages, a rank may see none)
if fragments_run "gso: fragments, MACs one by one" "$small --mca btl_usnic_mac_lanes 0"; then
    each_rank "gso: mac_lanes 0, header MACs one by one (received)" macs_rx_lanes -eq 0
    each_rank "gso: mac_lanes 0, chunks still predicted (MACs checked one by one)" rx_predicted -gt 0
fi

# g. up to 512 KiB + 1: the messages above 450000 bytes (eager limit plus
#    ob1's pipeline send length) go as a rendezvous with emulated PUT
gfloor=$((4 * $(pingpong_size_sum 524289)))
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -m 524289
if check_run "gso: up to 512 KiB + 1" $? 2 "$gfloor"; then
    each_rank "gso: 512 KiB messages by PUT" puts -gt 0
fi

# g2. a ping-pong of 1 MiB +/- 1 by PUT, 1472-byte datagrams: every chunk
#    through the receive buffers, never in place (session 30: windows of 1
#    MiB PUTs 1.16x the bandwidth); the first PUT into the target (fresh
#    memory) copied past the caches, the PUTs after it into a target
#    reused through the cache: between 1 chunk and two messages' chunks
#    streamed (a run streamed 758: ob1 may PUT the first message in more
#    than one piece; every PUT streamed would be about 100 times that)
twomsgs=$((2 * (1048577 / 1416 + 1)))
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -n 1048575 -m 1048577 -i 4
if check_run "gso: 1 MiB ping-pong by PUT" $? 2 $((4 * 3 * 1048576)) && $kernel; then
    each_rank "gso: 1 MiB ping-pong, PUTs from the peer" puts -gt 8
    each_rank "gso: 1 MiB PUTs of 1472-byte datagrams not received in place" rx_direct -eq 0
    each_rank "gso: 1 MiB ping-pong, its first PUT copied past the caches" rx_put_streamed -gt 0
    each_rank "gso: 1 MiB ping-pong, PUTs into the reused target copied through the cache" \
        rx_put_streamed -le $twomsgs
fi

# h. the default datagram size: 65507 bytes on loopback
run_mpi 2 "$BIN"
if check_run "gso: 65507-byte datagrams" $? 2 "$floor" && $kernel; then
    each_rank "gso: 65507-byte datagrams, no train" gso_trains -eq 0
    each_rank "gso: 65507-byte datagrams received in place (direct receive)" rx_direct -gt 0
    each_rank "gso: 65507-byte datagrams sent several per system call" tx_batched -gt 0
fi
EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_tx_batch 1" run_mpi 2 "$BIN"
if check_run "gso: 65507-byte datagrams, tx_batch 1" $? 2 "$floor" && $kernel; then
    each_rank "gso: tx_batch 1, one datagram per system call" tx_batched -eq 0
fi
EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_debug_seed 11 --mca btl_usnic_debug_drop_rate 0.02
    --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02" run_mpi 2 "$BIN"
if check_run "gso: 65507-byte datagrams, loss, duplicates, reordering" $? 2 "$floor" &&
    usnic_mode; then
    each_rank "gso: 65507-byte datagrams under faults, dropped" inj_drop -gt 0
    each_rank "gso: 65507-byte datagrams under faults, resent" retrans -gt 0
    $kernel && each_rank "gso: 65507-byte datagrams under faults, batched" tx_batched -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} $mid --mca btl_usnic_direct_recv 0" run_mpi 2 "$BIN"
if check_run "gso: direct receive off" $? 2 "$floor" && $kernel; then
    each_rank "gso: direct receive off, trains still sent" gso_trains -gt 0
    each_rank "gso: direct receive off, nothing received in place" rx_direct -eq 0
fi

# i. trains that go on from one message to the next (manymsgs: 2 ranks x
#    N messages each way x 2 rounds, each at least 8 bytes)
build_prog manymsgs || finish
# h. (with i.'s program) 1 MiB messages, each into a target of its own
bigfloor=$((2 * 12 * 2 * 1048576))
# bigrun NAME MCA: 2 rounds of 12 messages of 1 MiB + up to 4 KiB each way
bigrun() {
    checked_run "$1" "$2" "$bigfloor" some -b 1048576 -n 12
}
if bigrun "gso: 1 MiB messages into targets of their own" ""; then
    each_rank "gso: 1 MiB PUTs copied past the caches" rx_put_streamed -gt 0
    each_rank "gso: 1 MiB PUTs into cold targets not received in place" rx_direct -eq 0
fi
# (5% dropped: at 2% a rank's peer dropped only 2-3 of about 550 datagrams
# in a few of 80 runs, once none of the data, and retrans was 0; seen in
# session 33)
if bigrun "gso: 1 MiB messages into targets of their own, loss, duplicates, reordering" \
    "--mca btl_usnic_debug_seed 23 --mca btl_usnic_debug_drop_rate 0.05
    --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02"; then
    each_rank "gso: 1 MiB PUTs under faults, resent" retrans -gt 0
    each_rank "gso: 1 MiB PUTs under faults, copied past the caches" rx_put_streamed -gt 0
fi
# trains_in_pieces NAME WANT: on each rank, whether some trains went to the
# kernel in pieces (WANT yes: gso_trains > trains_copied) or none did (no)
trains_in_pieces() {
    local r t c
    for r in 0 1; do
        t=$(rank_stat "$RUN_LOG" $r gso_trains)
        c=$(rank_stat "$RUN_LOG" $r trains_copied)
        if [ "$t" -gt 0 ] && { { [ "$2" = yes ] && [ "$t" -gt "$c" ]; } ||
            { [ "$2" = no ] && [ "$t" -eq "$c" ]; }; }; then
            pass "$1: rank $r: $t trains, $c copied"
        else
            fail "$1: rank $r" "$t trains, $c copied (in pieces wanted: $2)" "$RUN_LOG"
        fi
    done
}
if bigrun "gso: 1 MiB messages into targets of their own, 1472-byte datagrams" "$small"; then
    each_rank "gso: 1 MiB PUTs of 1472-byte datagrams copied past the caches" \
        rx_put_streamed -gt 0
    each_rank "gso: 1 MiB PUTs of 1472-byte datagrams not received in place" rx_direct -eq 0
    trains_in_pieces "gso: trains of 1 MiB PUTs handed over in pieces, not copied" yes
fi
# a 512 KiB ping-pong: PUTs under btl_usnic_train_copy_put_max, but each
# starts with nothing else in flight to its peer (it is waited for): in
# pieces too
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$pingpong" -n 524288 -m 524288 -i 8
if check_run "gso: 512 KiB ping-pong by PUT" $? 2 $((4 * 8 * 524288)) && $kernel; then
    each_rank "gso: 512 KiB ping-pong, PUTs from the peer" puts -gt 4
    trains_in_pieces "gso: trains of a ping-pong's 512 KiB PUTs in pieces" yes
fi
if bigrun "gso: 1 MiB messages, 1472-byte datagrams, train_copy_put_max 0" \
    "$small --mca btl_usnic_train_copy_put_max 0"; then
    trains_in_pieces "gso: train_copy_put_max 0, every train copied" no
fi
if bigrun "gso: 1 MiB messages, 1472-byte datagrams, PUT trains in pieces under faults" \
    "$small --mca btl_usnic_debug_seed 29 --mca btl_usnic_debug_drop_rate 0.02
    --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02"; then
    each_rank "gso: 1 MiB PUTs in pieces under faults, resent" retrans -gt 0
    trains_in_pieces "gso: trains of 1 MiB PUTs in pieces under faults" yes
fi

mn=3000
mfloor=$((2 * mn * 2 * 8))
EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_tx_coalesce 0" run_mpi 2 "$BIN" -n $mn
if check_run "gso: trains across messages" $? 2 "$mfloor" && $kernel; then
    each_rank "gso: short datagrams padded so that trains go on" gso_pads -gt 0
    each_rank "gso: no train held with btl_usnic_tx_coalesce 0" tx_held -eq 0
fi
EXTRA_MCA="${EXTRA_MCA:-} $mid" run_mpi 2 "$BIN" -n $mn
if check_run "gso: trains across messages, 8972-byte datagrams" $? 2 "$mfloor" && $kernel; then
    each_rank "gso: 8972-byte datagrams padded so that trains go on" gso_pads -gt 0
    each_rank "gso: trains across messages, chunks received in place" rx_direct -gt 0
    pad_direct=$(stat_sum "$RUN_LOG" rx_direct_pad)
    if [ "${pad_direct:-0}" -gt 0 ]; then
        pass "gso: padded last chunks received in place ($pad_direct)"
    else
        fail "gso: padded last chunks received in place" "rx_direct_pad=${pad_direct:-?}" "$RUN_LOG"
    fi
fi
EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_debug_seed 13 --mca btl_usnic_debug_drop_rate 0.02
    --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02" \
    run_mpi 2 "$BIN" -n $mn
if check_run "gso: trains across messages, loss, duplicates, reordering" $? 2 "$mfloor" &&
    usnic_mode; then
    each_rank "gso: trains across messages under faults, resent" retrans -gt 0
    $kernel && each_rank "gso: trains across messages under faults, padded" gso_pads -gt 0
fi
EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_train_copy 0 --mca btl_usnic_mac_lanes 0 --mca btl_usnic_debug_seed 17
    --mca btl_usnic_debug_drop_rate 0.02 --mca btl_usnic_debug_dup_rate 0.01
    --mca btl_usnic_debug_reorder_rate 0.02" run_mpi 2 "$BIN" -n $mn
if check_run "gso: trains in pieces, loss, duplicates, reordering" $? 2 "$mfloor" && $kernel; then
    each_rank "gso: train_copy 0, trains sent" gso_trains -gt 0
    each_rank "gso: train_copy 0, padded" gso_pads -gt 0
    each_rank "gso: train_copy 0, nothing copied" trains_copied -eq 0
    each_rank "gso: mac_lanes 0, header MACs one by one (sent)" macs_tx_lanes -eq 0
    each_rank "gso: mac_lanes 0, header MACs one by one (received)" macs_rx_lanes -eq 0
fi

# j. trains left open while 64 KiB are in flight, for the next messages
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -n $mn
if check_run "gso: tx_coalesce" $? 2 "$mfloor" && $kernel; then
    each_rank "gso: tx_coalesce, trains held" tx_held -gt 0
    each_rank "gso: tx_coalesce, trains sent" gso_trains -gt 0
fi
EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_debug_seed 19
    --mca btl_usnic_debug_drop_rate 0.02 --mca btl_usnic_debug_dup_rate 0.01
    --mca btl_usnic_debug_reorder_rate 0.02" run_mpi 2 "$BIN" -n $mn
if check_run "gso: tx_coalesce, loss, duplicates, reordering" $? 2 "$mfloor" && $kernel; then
    each_rank "gso: tx_coalesce under faults, messages held" tx_held -gt 0
    each_rank "gso: tx_coalesce under faults, resent" retrans -gt 0
fi
build_prog burst || finish
bfloor=$((12 * 16384))
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -t 2
if check_run "gso: burst, then the sender computes" $? 2 "$bfloor"; then
    line=$(grep -m1 "BURST:" "$RUN_LOG")
    pass "gso: burst: ${line#*BURST: }"
    if $kernel; then
        held=$(rank_stat "$RUN_LOG" 0 tx_held)
        late=$(rank_stat "$RUN_LOG" 0 tx_late)
        if [ "${held:-0}" -gt 0 ] && [ "${late:-0}" -gt 0 ]; then
            pass "gso: burst: the sender held $held trains, the liveness thread sent $late"
        else
            fail "gso: burst, held train sent by the liveness thread" \
                "rank 0: tx_held=${held:-?} tx_late=${late:-?} (want both > 0)" "$RUN_LOG"
        fi
    fi
fi
EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_liveness 0" run_mpi 2 "$BIN" -t 1
if check_run "gso: burst without the liveness thread" $? 2 "$bfloor" && $kernel; then
    each_rank "gso: no liveness thread, no train held" tx_held -eq 0
fi
finish
