#!/bin/bash
# The kernel backend's sending ports and connected sockets
# (btl_usnic_chan_kern.c, btl_usnic_connect_peers), with the pingpong
# program checking every byte (0 B .. 4 MiB+1, small and large datagrams):
#   a. default: both ranks name their sending ports (verbose), every
#      datagram goes out on a socket connected to the peer (tx_connected >
#      0 on both ranks), and the peer's source check takes them (no
#      drop_ADDRESS)
#   b. btl_usnic_connect_peers 0: the same data from the channels' sending
#      ports, naming the peer at every send (tx_connected = 0)
#   c. a process short of file descriptors (ulimit -n 40: half of them stay
#      for the application): no connected socket, the verbose note says
#      why, the data still arrive (tx_connected = 0)
#   d. 2% of arriving datagrams dropped, 1% duplicated, 2% reordered, with
#      1472-byte datagrams: data intact, resends, on connected sockets
#   e. sockets are connected at the first send to a peer, not when it is
#      added: 4 ranks, pairs (0,1) and (2,3) exchange data, then a linear
#      reduce and a linear barrier (everyone with rank 0): ranks 1 and 2
#      never send to each other, nor do 1 and 3, so rank 0 connects to 3
#      peers, rank 1 to 1, ranks 2 and 3 to 2 each: 8 in all, where
#      connecting every peer that is added makes 12 (peers_connected)
# t_hostile attacks the same ports: its spoofed datagrams carry the
# sending ports, and its capture reads the job's datagrams from them.
# Over another backend (run-all.sh's libfabric udp pass) only the data
# checks apply.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog pingpong || finish
max=$((4 * 1024 * 1024 + 1))
floor=$((4 * $(pingpong_size_sum $max)))
kernel=false
usnic_mode && [ "$(usnic_backend)" = kernel ] && kernel=true

EXTRA_MCA="${EXTRA_MCA:-} --mca btl_base_verbose 5" run_mpi 2 "$BIN" -m "$max"
if check_run "peersock: connected" $? 2 "$floor" && $kernel; then
    n=$(grep -c 'sends from ports [0-9]*/[0-9]* (sockets connected to up to 256 peers)' "$RUN_LOG")
    if [ "$n" -ge 2 ]; then
        pass "peersock: both ranks send from ports of their own"
    else
        fail "peersock: sending ports" "$n verbose lines name them, want 2" "$RUN_LOG"
    fi
    each_rank "peersock: sent on connected sockets" tx_connected -gt 0
    each_rank "peersock: the peer took our source" drop_ADDRESS -eq 0
fi

EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_connect_peers 0" run_mpi 2 "$BIN" -m "$max"
if check_run "peersock: connect_peers 0" $? 2 "$floor" && $kernel; then
    each_rank "peersock: connect_peers 0, nothing on connected sockets" tx_connected -eq 0
fi

# the ranks under a shell that lowers their descriptor limit first
EXTRA_MCA="${EXTRA_MCA:-} --mca btl_base_verbose 10" \
    run_mpi 2 /bin/sh -c 'ulimit -n 40 && exec "$0" "$@"' "$BIN" -m "$max"
rc=$?
MT_PROG=$(basename "$BIN") # the program the shell became
if check_run "peersock: short of descriptors" $rc 2 "$floor" && $kernel; then
    each_rank "peersock: short of descriptors, nothing on connected sockets" tx_connected -eq 0
    if grep -q 'no connected socket to a peer (Too many open files)' "$RUN_LOG"; then
        pass "peersock: short of descriptors, the verbose note says why"
    else
        fail "peersock: short of descriptors" "no verbose note" "$RUN_LOG"
    fi
fi

EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_udp_datagram_size -1 --mca btl_usnic_debug_drop_rate 0.02 \
--mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02 \
--mca btl_usnic_debug_seed 11" run_mpi 2 "$BIN" -m "$max"
if check_run "peersock: faults" $? 2 "$floor" && usnic_mode; then
    each_rank "peersock: faults, resent" retrans -gt 0
    $kernel && each_rank "peersock: faults, sent on connected sockets" tx_connected -gt 0
fi

EXTRA_MCA="${EXTRA_MCA:-} --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_reduce_algorithm 1 \
--mca coll_tuned_barrier_algorithm 1" run_mpi 4 "$BIN" -m 65536
if check_run "peersock: 4 ranks, linear collectives" $? 4 && $kernel; then
    got=$(grep '\[usnic stats\]' "$RUN_LOG" | sed -n 's/.* peers_connected=\([0-9]*\).*/\1/p' | sort -n | tr '\n' ' ')
    if [ "$got" = "1 2 2 3 " ]; then
        pass "peersock: sockets connected at the first send only (peers_connected per rank: $got)"
    else
        fail "peersock: connected at the first send" "peers_connected per rank '$got', want '1 2 2 3'" "$RUN_LOG"
    fi
fi
finish
