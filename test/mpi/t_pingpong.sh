#!/bin/bash
# Ping-pong with data check, 0 B .. 16 MiB+1, both directions, 2 ranks.
# usnic must have carried at least the payload the program reports, and at
# least 4x the sum of all sizes (ping + pong, two directions).
# Run twice: with interface-MTU datagrams (64 KiB on loopback, the default)
# and with the provider's advertised 1472-byte datagrams (what a 1500-byte
# Ethernet gives), which cuts the same messages into ~45x more chunks.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog pingpong || finish
floor=$((4 * $(pingpong_size_sum $((16 * 1024 * 1024 + 1)))))
run_mpi 2 "$BIN"
check_run pingpong $? 2 "$floor"

EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_udp_datagram_size -1" run_mpi 2 "$BIN"
check_run "pingpong (1472-byte datagrams)" $? 2 "$floor"
# 1472-byte datagrams carry at most 1472 bytes each: the packet count proves the size
if usnic_mode; then
    pkts=$(stat_sum "$RUN_LOG" tx_pkts)
    if [ "$pkts" -ge $((floor / 1472)) ]; then
        pass "pingpong (1472-byte datagrams): $pkts packets for $floor bytes"
    else
        fail "pingpong (1472-byte datagrams)" "only $pkts packets for $floor bytes: datagrams larger than 1472"
    fi
fi
finish
