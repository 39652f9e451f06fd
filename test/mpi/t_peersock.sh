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
finish
