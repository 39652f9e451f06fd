#!/bin/bash
# The component under AddressSanitizer: build it with --enable-asan into a
# private prefix, load that build first (mca_component_path), preload the
# ASan runtime into the ranks, and run the fault-injection ping-pong and the
# 4-rank wildcard test, held trains handed to the liveness thread (burst
# -l), the connectivity checker.  Any AddressSanitizer report fails the
# test.
. "$(dirname "$0")/../lib/mpitest.sh"
usnic_mode || { pass "asan (skipped with USNIC_TEST_BTL=tcp)"; finish; }
top=$(cd "$(dirname "$0")/../.." && pwd)
asan_lib=$(gcc -print-file-name=libasan.so)
asan_lib=$(readlink -f "$asan_lib")
[ -f "$asan_lib" ] || { fail "asan" "no libasan.so"; finish; }

b=$TEST_TMP/asan-build
p=$TEST_TMP/asan-prefix
rm -rf "$b" "$p"
mkdir -p "$b"
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh >/dev/null 2>&1)
if ! (cd "$b" && "$top/configure" --prefix="$p" --enable-asan >configure.log 2>&1 &&
      make -j2 >make.log 2>&1 && make install >install.log 2>&1); then
    fail "asan build" "see $b/*.log"
    finish
fi
pass "asan build"

sysdir=$(dirname "$(find /usr/lib -name mca_btl_tcp.so -path '*openmpi*' | head -1)")
asan_mca="--mca mca_component_path $p/lib/openmpi:$sysdir -x LD_PRELOAD=$asan_lib -x ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"

check_asan() {
    local name=$1 rc=$2 np=$3
    if grep -q 'AddressSanitizer' "$RUN_LOG"; then
        fail "$name" "AddressSanitizer report" "$RUN_LOG"
        return
    fi
    check_run "$name" "$rc" "$np" 0
}

build_prog pingpong || finish
EXTRA_MCA="$asan_mca --mca btl_usnic_debug_drop_rate 0.05 --mca btl_usnic_debug_dup_rate 0.02 --mca btl_usnic_debug_reorder_rate 0.05" \
    run_mpi 2 "$BIN" -m 4194304
check_asan "asan: ping-pong with loss, duplication, reordering" $? 2

EXTRA_MCA="$asan_mca --mca btl_usnic_udp_datagram_size -1" run_mpi 2 "$BIN" -m 1048576
check_asan "asan: ping-pong with 1472-byte datagrams" $? 2

# trains received straight into PUT targets (direct receive), with injected
# faults taking the whole-datagram path
EXTRA_MCA="$asan_mca --mca btl_usnic_udp_datagram_size -1 --mca btl_usnic_debug_drop_rate 0.02 --mca btl_usnic_debug_dup_rate 0.01 --mca btl_usnic_debug_reorder_rate 0.02" \
    run_mpi 2 "$BIN" -m 1048576
check_asan "asan: ping-pong with 1472-byte datagrams, loss, duplication, reordering" $? 2

build_prog anysource || finish
EXTRA_MCA="$asan_mca" run_mpi 4 "$BIN"
check_asan "asan: anysource, 4 ranks" $? 4

# held trains (btl_usnic_tx_coalesce) handed between the progress engine
# and the liveness thread: bursts of 12 x 16 KiB, the sender computing
# 0-1.5 ms after each, so that the thread sends some held trains while
# the next burst's sends take others back
build_prog burst || finish
EXTRA_MCA="$asan_mca --mca btl_usnic_udp_datagram_size -1" run_mpi 2 "$BIN" -l 400
check_asan "asan: held trains, 400 bursts, the sender computing between them" $? 2
if [ "$(usnic_backend)" = kernel ]; then
    late=$(rank_stat "$RUN_LOG" 0 tx_late)
    if [ "${late:-0}" -gt 0 ]; then
        pass "asan: held trains sent by the liveness thread ($late), by the progress engine the rest"
    else
        fail "asan: held trains" "rank 0 tx_late=${late:-?}: the thread sent none" "$RUN_LOG"
    fi
fi
# the same with a window of 128 KiB: sends that find it full, so that a
# message's send adds nothing to a held train the thread may be sending
EXTRA_MCA="$asan_mca --mca btl_usnic_udp_datagram_size -1 --mca btl_usnic_max_inflight 131072" \
    run_mpi 2 "$BIN" -l 400
check_asan "asan: held trains, 400 bursts, a 128 KiB window" $? 2

# the connectivity checker: clients waiting for an agent that listens late,
# the agent (rank 0) leaving while the clients still run, the map file
build_prog pingpong || finish
USNIC_CC_TEST_AGENT_DELAY_MS=700 EXTRA_MCA="$asan_mca -x USNIC_CC_TEST_AGENT_DELAY_MS --mca btl_usnic_connectivity_map $TEST_TMP/logs/$MT_NAME.$$.map" \
    run_mpi 4 "$BIN" -m 65536
check_asan "asan: connectivity checker, late agent, 4 ranks" $? 4
rm -f "$TEST_TMP/logs/$MT_NAME.$$.map"-*
finish
