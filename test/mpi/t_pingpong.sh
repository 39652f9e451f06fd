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

# (and 4 MiB in flight: the automatic send window stops at the 1024
# segments a selective ACK describes, where 4 MiB of 1472-byte datagrams
# made it 2048, half the receive window; wider windows collapsed incasts,
# docs/perf-incast.md)
EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_udp_datagram_size -1 --mca btl_usnic_max_inflight 4194304 --mca btl_base_verbose 10" \
    run_mpi 2 "$BIN"
check_run "pingpong (1472-byte datagrams)" $? 2 "$floor"
if usnic_mode; then
    w=$(grep -o 'send window [0-9]* segments per peer' "$RUN_LOG" | sort | uniq -c | tr -s ' ')
    if [ "$(grep -c 'send window 1024 segments per peer' "$RUN_LOG")" -ge 2 ] &&
        [ "$(grep -c 'send window [0-9]* segments per peer' "$RUN_LOG")" -eq \
            "$(grep -c 'send window 1024 segments per peer' "$RUN_LOG")" ]; then
        pass "automatic send window at 1024 segments with 4 MiB in flight of 1472-byte datagrams"
    else
        fail "automatic send window of 1472-byte datagrams" "expected 1024 segments on both ranks, got:${w:- no verbose line}"
    fi
fi
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
