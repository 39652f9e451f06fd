#!/bin/bash
# The connectivity checker on one host (loopback), 4 ranks:
#   1. btl_usnic_connectivity_map: every rank writes its file, listing the
#      3 other ranks with their interface, address and a proven ("ok")
#      datagram size; the non-agent ranks' verdicts came from the host's
#      agent (verbose: "host agent").
#   2. the agent starts listening 1.5 s late (test hook
#      USNIC_CC_TEST_AGENT_DELAY_MS): the clients wait for it and are still
#      served by it; data intact.
#   3. btl_usnic_connectivity_check 0: verbose says the checker is off, the
#      map says "unchecked", the job passes.
#   4. a verdict that comes after the first data (the agent listening 500
#      ms late, rounds of 2 s): rank 1, a client, sends rank 0 one int,
#      then a burst of 12 x 16 KiB, then computes for 4 s outside MPI
#      (burst.c -r 1).  The int goes before the verdict (a datagram every
#      usable path carries); the burst's first send waits in the call for
#      the verdict, due within the check's first round, so the burst
#      reaches rank 0 long before rank 1 is back in MPI (without that wait
#      it sat in rank 1's queue for the 4 s).
# (The checker's races without MPI, agent leaving mid-check, threads,
# version mismatch, are in test/unit/test_cc.c; paths that are broken are
# in t_connectivity_netns.sh.)
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

if ! usnic_mode; then
    pass "connectivity (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
build_prog pingpong || finish
map=$TEST_TMP/logs/$MT_NAME.$$.map

# map_check NAME WANT: 4 map files, each with 3 peer lines in state WANT
map_check() {
    local name=$1 want=$2 files n bad=
    files=$(ls "$map"-*.txt 2>/dev/null)
    n=$(echo "$files" | grep -c .)
    if [ "$n" -ne 4 ]; then
        fail "$name" "$n map files (wanted 4): $files"
        return
    fi
    for f in $files; do
        [ "$(grep -c "^[0-9]* .* lo 127.0.0.1 -> lo 127.0.0.1 [0-9]* $want\$" "$f")" -eq 3 ] ||
            bad="$bad $f"
    done
    if [ -z "$bad" ]; then
        pass "$name: 4 map files, 3 peers each, all $want"
        sed 's/^/    /' "$(echo "$files" | head -1)"
    else
        fail "$name" "map files without 3 '$want' peers:$bad ($(cat $bad | tr '\n' '|'))"
    fi
}

# ---- 1. the map, verdicts from the agent ----
rm -f "$map"-*.txt
EXTRA_MCA="--mca btl_usnic_connectivity_map $map --mca btl_base_verbose 100" run_mpi 4 "$BIN" -m 64k
check_run "connectivity: 4 ranks, checker on" $? 4
map_check "connectivity: map" ok
agent=$(grep -c 'datagrams proven (host agent' "$RUN_LOG")
if [ "$agent" -ge 3 ] && grep -q 'connectivity agent: listening' "$RUN_LOG"; then
    pass "connectivity: $agent verdicts came from the host's agent"
else
    fail "connectivity: agent" "only $agent verdicts from the agent" "$RUN_LOG"
fi

# ---- 2. clients before the agent ----
USNIC_CC_TEST_AGENT_DELAY_MS=1500 EXTRA_MCA="--mca btl_base_verbose 100 -x USNIC_CC_TEST_AGENT_DELAY_MS" \
    run_mpi 4 "$BIN" -m 64k
check_run "connectivity: agent listening 1.5 s late" $? 4
agent=$(grep -c 'datagrams proven (host agent' "$RUN_LOG")
own=$(grep -c 'datagrams proven (this process' "$RUN_LOG")
# the agent's own 3 verdicts are its process's; every client's came from it
if [ "$agent" -ge 9 ] && [ "$own" -le 3 ] && grep -q 'listens 1500 ms late' "$RUN_LOG"; then
    pass "connectivity: clients waited for the late agent ($agent verdicts from it)"
else
    fail "connectivity: late agent" "$agent verdicts from the agent, $own by a process itself" "$RUN_LOG"
fi

# ---- 3. checker off ----
rm -f "$map"-*.txt
EXTRA_MCA="--mca btl_usnic_connectivity_check 0 --mca btl_usnic_connectivity_map $map --mca btl_base_verbose 100" \
    run_mpi 4 "$BIN" -m 64k
check_run "connectivity: checker off" $? 4
if [ "$(grep -c 'connectivity checker off (btl_usnic_connectivity_check 0)' "$RUN_LOG")" -eq 4 ] &&
    ! grep -q 'datagrams proven' "$RUN_LOG"; then
    pass "connectivity: btl_usnic_connectivity_check 0 says so, nothing checked"
else
    fail "connectivity: checker off" "verbose output does not show the checker off" "$RUN_LOG"
fi
map_check "connectivity: map with the checker off" unchecked
rm -f "$map"-*.txt

# ---- 4. the verdict after the first data ----
build_prog burst || finish
USNIC_CC_TEST_AGENT_DELAY_MS=500 EXTRA_MCA="--mca btl_base_verbose 20 -x USNIC_CC_TEST_AGENT_DELAY_MS
    --mca btl_usnic_connectivity_ack_timeout 2000" run_mpi 2 "$BIN" -r 1 -t 4
if check_run "connectivity: a burst that needs the verdict, the sender computing after it" $? 2 $((12 * 16384)); then
    line=$(grep -m1 'BURST:' "$RUN_LOG")
    waited=$(grep -m1 'a first send waited .* (it came)' "$RUN_LOG")
    if [ -n "$waited" ]; then
        pass "connectivity: the burst's first send waited for the verdict: ${waited##*: }; ${line#*BURST: }"
    else
        fail "connectivity: the first send's wait for the verdict" "no 'waited ... (it came)' line: the verdict was in before the burst, or the wait ended without it" "$RUN_LOG"
    fi
fi
finish
