#!/bin/bash
# A process that may not have the socket buffers it asks for
# (btl_usnic_udp_sockbuf): one that is neither root nor has CAP_NET_ADMIN
# gets at most net.core.rmem_max.  Where that is less than what a peer
# keeps in flight (btl_usnic_max_inflight), every stream into the process
# is held back, and the BTL says so once, naming the parameter, what it got
# and the sysctl to raise (help "socket buffer capped").  The jobs run as
# user nobody (MT_RUN_AS), with R = net.core.rmem_max as it is on this host
# (nothing here changes it), the pingpong program checking every byte:
#   a. asked for 4R, in-flight limit 2R: the job runs, and the message
#      names btl_usnic_udp_sockbuf, 4R asked, R granted, rmem_max R
#   b. asked for R (what the host allows): no message
#   c. in-flight limit R (the buffer holds it): no message
#   d. as root, as in a: SO_RCVBUFFORCE grants it, no message
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
usnic_mode || { pass "sockbuf (skipped with USNIC_TEST_BTL=tcp)"; finish; }
command -v setpriv > /dev/null || { fail "sockbuf" "setpriv (util-linux) not found"; finish; }
build_prog pingpong || finish
chmod 755 "$TEST_TMP" "$TEST_TMP/bin" && chmod 755 "$BIN"

r=$(cat /proc/sys/net/core/rmem_max)
if [ "$((4 * r))" -gt $((1 << 30)) ]; then
    echo "SKIP: sockbuf (net.core.rmem_max $r leaves no room above it for btl_usnic_udp_sockbuf)"
    finish
fi
nobody=65534:65534
max=$((256 * 1024 + 1))
capped="asked the kernel for UDP socket buffers of"

# run NAME MCA [AS]: the pingpong with MCA (as AS, uid:gid, if given), data checked
run() {
    MT_RUN_AS=${3:-} EXTRA_MCA="$2" run_mpi 2 "$BIN" -m "$max"
    check_run "sockbuf: $1, data intact" $? 2
}

# told_capped: the last run's log has the whole message
told_capped() {
    grep -q "$capped $((4 * r)) bytes" "$RUN_LOG" &&
        grep -q "(btl_usnic_udp_sockbuf) on host .*, interface lo, and got $r:" "$RUN_LOG" &&
        grep -q "net.core.rmem_max ($r)" "$RUN_LOG" &&
        grep -q "sysctl -w net.core.rmem_max=" "$RUN_LOG"
}
# mpirun of this Open MPI now and then loses the ranks' help messages
# (ORTE_ERROR_LOG in show_help.c, as t_bad_params knows): only then is the
# run repeated, up to 8 times
for try in 1 2 3 4 5 6 7 8; do
    run "nobody, $((4 * r)) bytes asked, rmem_max $r, in-flight limit $((2 * r))" \
        "--mca btl_usnic_udp_sockbuf $((4 * r)) --mca btl_usnic_max_inflight $((2 * r))" "$nobody"
    told_capped && break
    grep -q 'ORTE_ERROR_LOG.*show_help' "$RUN_LOG" || break
    echo "# sockbuf: run $try: mpirun lost the help message; retrying"
done
if told_capped; then
    pass "sockbuf: a process capped below its peers' in-flight limit is told, with the sysctl to raise"
else
    fail "sockbuf: capped buffers reported" "no 'socket buffer capped' message naming $((4 * r)), $r" "$RUN_LOG"
fi

run "nobody, asked for what the host allows" \
    "--mca btl_usnic_udp_sockbuf $r --mca btl_usnic_max_inflight $((2 * r))" "$nobody"
if grep -q "$capped" "$RUN_LOG"; then
    fail "sockbuf: no message when granted what was asked" "message printed" "$RUN_LOG"
else
    pass "sockbuf: no message when the host grants what was asked"
fi

run "nobody, in-flight limit within the buffer" \
    "--mca btl_usnic_udp_sockbuf $((4 * r)) --mca btl_usnic_max_inflight $r" "$nobody"
if grep -q "$capped" "$RUN_LOG"; then
    fail "sockbuf: no message when the buffer holds a peer's limit" "message printed" "$RUN_LOG"
else
    pass "sockbuf: no message when the buffer holds a peer's in-flight limit"
fi

run "root, $((4 * r)) bytes asked" \
    "--mca btl_usnic_udp_sockbuf $((4 * r)) --mca btl_usnic_max_inflight $((2 * r))"
if grep -q "$capped" "$RUN_LOG"; then
    fail "sockbuf: root gets what it asks" "message printed" "$RUN_LOG"
else
    pass "sockbuf: root gets what it asks (SO_RCVBUFFORCE), no message"
fi
finish
