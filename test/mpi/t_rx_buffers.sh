#!/bin/bash
# How many receive buffers each channel posts (btl_usnic_rd_num), as the
# component reports it at btl_base_verbose 20 ("channel N: K receive
# buffers of M bytes posted"):
#   - automatic (0) over udp: 512 KiB worth on the data channel, at least 8:
#     8 of 65507 bytes with loopback-MTU datagrams, 356 of 1472 bytes with
#     btl_usnic_udp_datagram_size -1 (524288 / 1472 = 356);
#   - an explicit btl_usnic_rd_num is taken as given;
#   - the priority channel keeps btl_usnic_prio_rd_num (256), buffers of
#     btl_usnic_priority_limit (512) + the 56-byte common header = 568 bytes.
# The jobs also pass a barrier over usnic, so the buffers really work.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

if ! usnic_mode; then
    pass "rx buffers (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
build_prog trivial || finish

# expect_posted NAME "MCA ARGS" PRIO_LINE DATA_LINE: both channels' lines
# ("<count> receive buffers of <size> bytes") appear for every rank
expect_posted() {
    local name=$1 mca=$2 prio=$3 data=$4 rc np=2 n
    EXTRA_MCA="--mca btl_base_verbose 20 $mca" run_mpi $np "$BIN"
    rc=$?
    if [ $rc -ne 0 ]; then
        fail "$name" "job failed (rc $rc)" "$RUN_LOG"
        return
    fi
    for pat in "channel 0: $prio posted" "channel 1: $data posted"; do
        n=$(grep -c -- "$pat" "$RUN_LOG")
        if [ "$n" -lt $np ]; then
            fail "$name" "expected '$pat' from $np ranks, found $n" "$RUN_LOG"
            return
        fi
    done
    pass "$name: $prio (priority), $data (data)"
}

expect_posted "rx buffers automatic" "" \
    "256 receive buffers of 568 bytes" "8 receive buffers of 65507 bytes"
# kernel backend: UDP_GRO coalesces up to 64 KiB per receive
if [ "$(usnic_backend)" = kernel ]; then
    expect_posted "rx buffers automatic, 1472-byte datagrams" "--mca btl_usnic_udp_datagram_size -1" \
        "256 receive buffers of 568 bytes" "8 receive buffers of 65536 bytes"
fi
expect_posted "rx buffers automatic, 1472-byte datagrams, no GRO" \
    "--mca btl_usnic_udp_datagram_size -1 --mca btl_usnic_gso 0" \
    "256 receive buffers of 568 bytes" "356 receive buffers of 1472 bytes"
expect_posted "rx buffers automatic, 1472-byte datagrams, libfabric udp" \
    "--mca btl_usnic_udp_datagram_size -1 --mca btl_usnic_providers udp" \
    "256 receive buffers of 568 bytes" "356 receive buffers of 1472 bytes"
expect_posted "rx buffers explicit" "--mca btl_usnic_rd_num 40 --mca btl_usnic_prio_rd_num 64" \
    "64 receive buffers of 568 bytes" "40 receive buffers of 65507 bytes"
finish
