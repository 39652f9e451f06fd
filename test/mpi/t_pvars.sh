#!/bin/bash
# The usnic counters as MPI_T performance variables (btl_usnic_<counter>,
# btl_usnic_drop_<REASON>): pvars.c finds them, checks their class, type,
# binding and flags, and checks that tx_bytes, rx_bytes and tx_pkts moved
# by what a checked 8 MiB exchange each way carried (drop_AUTH did not,
# srtt_max_us is set).  Here: every counter of the stats line has its
# variable.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
usnic_mode || { pass "pvars (skipped with USNIC_TEST_BTL=tcp)"; finish; }
build_prog pvars || finish

run_mpi 2 "$BIN"
check_run "pvars: MPI_T reads the counters, data intact" $? 2 || finish
grep '^PVAR rank' "$RUN_LOG" | sed 's/^/    /'
# one variable per counter of the stats line, and one per drop reason
# (the line shows drop_<REASON> only where it is not 0)
keys=$(grep -m1 '\[usnic stats\]' "$RUN_LOG" | tr ' ' '\n' | grep '^[a-z_]*=[0-9]*$' |
    grep -vc '^drop_\|^pid=\|^rank=')
reasons=$(grep -c '^    X([A-Z_]*, "' "$(dirname "$0")/../../btl_usnic_proto.h")
nvars=$(grep -m1 '^PVARS ' "$RUN_LOG" | cut -d' ' -f2)
if [ -n "$nvars" ] && [ "$keys" -gt 50 ] && [ "$nvars" -eq $((keys + reasons)) ]; then
    pass "pvars: $nvars variables: the $keys counters of the stats line and the $reasons drop reasons"
else
    fail "pvars: one variable per counter" "PVARS ${nvars:-none}, stats line counters $keys + $reasons drop reasons" "$RUN_LOG"
fi
finish
