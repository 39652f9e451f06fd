#!/bin/bash
# Early completion of sends from user memory (btl_usnic_early_copy_max,
# usnic_send_early in btl_usnic_send.c): when nothing else to the peer is in
# flight, a chunked message sent without a copy is copied once it is on the
# wire and its send completes before the ACK; what is resent later must
# come from that copy.  pingpong -S overwrites its send buffer as soon as
# MPI_Send returns, so a chunk resent from the user's memory would arrive
# scribbled (every byte is checked).  Over lo with 1472-byte datagrams:
#   a. pingpong -S, 0 B .. 1 MiB+1: early_copies > 0 on both ranks
#   b. the same under 3% drop, 1% duplicates, 2% reordering: data intact,
#      resends and early copies on both ranks
#   c. btl_usnic_early_copy_max 0 under the same faults: no early copy,
#      data intact
#   d. pingpong -V -S (a strided datatype, packed by ob1 into a buffer of
#      the BTL's) under the same faults: completed before the ACK without
#      a copy (early_copies > 0), data intact
# Over another backend (run-all.sh's libfabric udp pass) only the data
# checks apply.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

small="--mca btl_usnic_udp_datagram_size -1"
faults="--mca btl_usnic_debug_seed 7 --mca btl_usnic_debug_drop_rate 0.03
    --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02"
kernel=false
usnic_mode && [ "$(usnic_backend)" = kernel ] && kernel=true

build_prog pingpong || finish
max=$((1024 * 1024 + 1))
floor=$((4 * $(pingpong_size_sum $max)))

EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -S -m "$max"
if check_run "early: pingpong, send buffer scribbled after MPI_Send" $? 2 "$floor" && $kernel; then
    each_rank "early: sends completed before their ACK" early_copies -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} $small $faults" run_mpi 2 "$BIN" -S -m "$max" -i 2
if check_run "early: pingpong -S under loss, duplicates, reordering" $? 2 "$floor" &&
    usnic_mode; then
    each_rank "early: under faults, resent" retrans -gt 0
    $kernel && each_rank "early: under faults, sends completed before their ACK" early_copies -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} $small $faults" run_mpi 2 "$BIN" -V -S -m 262145
vfloor=$((4 * $(pingpong_size_sum 262145)))
if check_run "early: strided pingpong -V -S under faults" $? 2 "$vfloor" && usnic_mode; then
    each_rank "early: strided, resent" retrans -gt 0
    $kernel && each_rank "early: packed sends completed before their ACK" early_copies -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} $small $faults --mca btl_usnic_early_copy_max 0" \
    run_mpi 2 "$BIN" -S -m "$max"
if check_run "early: early_copy_max 0 under faults" $? 2 "$floor" && usnic_mode; then
    each_rank "early: early_copy_max 0, no early completion" early_copies -eq 0
fi
finish
