#!/bin/bash
# Deferred chunks (btl_usnic_reasm.h) and in-place delivery
# (btl_usnic_in_place): a fragment whose chunks all arrive in order within
# one batch of receives is handed to ob1 as segments of the receive
# buffers, without being copied together first.  Over lo with 1472-byte
# datagrams (GSO trains received with UDP_GRO, as at MTU 1500):
#   a. pingpong (every byte checked, 0 B .. 4 MiB+1): rx_in_place > 0 on
#      both ranks; and only 32-64 KiB (fragments of 23-47 chunks, more than
#      a descriptor's 16 segments): the first 15 chunks stay in place and
#      the rest is copied into the last segment, rx_in_place > 0
#   b. dtstress (random derived datatypes unpacked by ob1's convertor from
#      several segments at once; every byte, gaps and guards checked),
#      sizes around 16 chunks: rx_in_place > 0
#   c. manymsgs under 2% drop, 1% duplicates, 2% reordering: data intact,
#      resends, and still fragments handed over in place (trains not held
#      for the next message, btl_usnic_tx_coalesce 0: held trains mix
#      messages so that few of manymsgs' chunked ones arrive within one
#      batch, 0-31 per run; t_gso j. and t_asan test held trains)
#   d. btl_usnic_in_place 0: the same data, rx_in_place = 0
# Over another backend (run-all.sh's libfabric udp pass) only the data
# checks apply.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

small="--mca btl_usnic_udp_datagram_size -1"
kernel=false
usnic_mode && [ "$(usnic_backend)" = kernel ] && kernel=true

build_prog pingpong || finish
max=$((4 * 1024 * 1024 + 1))
floor=$((4 * $(pingpong_size_sum $max)))
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -m "$max"
if check_run "inplace: pingpong" $? 2 "$floor" && $kernel; then
    each_rank "inplace: pingpong, fragments handed over in place" rx_in_place -gt 0
fi

lfloor=$((4 * ($(pingpong_size_sum 65536) - $(pingpong_size_sum 32766)) * 20))
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -n 32767 -m 65536
if check_run "inplace: pingpong of 23-47 chunks" $? 2 "$lfloor" && $kernel; then
    each_rank "inplace: more than 16 chunks, first 15 in place" rx_in_place -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_in_place 0" run_mpi 2 "$BIN" -m "$max"
if check_run "inplace: in_place 0" $? 2 "$floor" && $kernel; then
    each_rank "inplace: in_place 0, nothing in place" rx_in_place -eq 0
fi

# b. 1472-byte datagrams carry 1416-byte chunks: 16 of them are 22656
#    bytes; sizes on both sides of 1, 2, 15, 16 and 17 chunks
build_prog dtstress || finish
sizes=1415,1417,2833,21239,22655,22657,24073,1000,30000
s=${DTSTRESS_SEED:-2024}
EXTRA_MCA="${EXTRA_MCA:-} $small" run_mpi 2 "$BIN" -s "$s" -t 6 -W 40 -M 65536 -b "$sizes"
if check_run "inplace: dtstress seed $s" $? 2; then
    grep -h '^dtstress: seed' "$RUN_LOG" | tail -n 1 | sed 's/^/    /'
    $kernel && each_rank "inplace: dtstress, fragments handed over in place" rx_in_place -gt 0
else
    grep -h -E 'ERROR dtstress|first wrong|reproduce:' "$RUN_LOG" | head -n 6 | sed 's/^/    /'
fi

build_prog manymsgs || finish
mn=3000
mfloor=$((2 * mn * 2 * 8))
EXTRA_MCA="${EXTRA_MCA:-} $small --mca btl_usnic_tx_coalesce 0 --mca btl_usnic_debug_seed 21 --mca btl_usnic_debug_drop_rate 0.02
    --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02" \
    run_mpi 2 "$BIN" -n $mn
if check_run "inplace: manymsgs, loss, duplicates, reordering" $? 2 "$mfloor" && usnic_mode; then
    each_rank "inplace: manymsgs under faults, resent" retrans -gt 0
    if $kernel; then
        # (summed over the ranks: 20-46 per run, one rank once had none)
        inpl=$(stat_sum "$RUN_LOG" rx_in_place)
        if [ "${inpl:-0}" -gt 0 ]; then
            pass "inplace: manymsgs under faults, $inpl fragments handed over in place"
        else
            fail "inplace: manymsgs under faults, in place" "rx_in_place=${inpl:-?} in all" "$RUN_LOG"
        fi
    fi
fi
finish
