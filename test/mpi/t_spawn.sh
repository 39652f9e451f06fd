#!/bin/bash
# Two jobs talking over usnic: one parent process (mpirun -np 1) spawns 2
# children with MPI_Comm_spawn; parent and children exchange verified
# messages of 0 B .. 4 MiB+3 over the intercommunicator, the children over
# their own MPI_COMM_WORLD, then run verified collectives over the merged
# communicator (spawn.c).  Only "btl usnic,self" is allowed, so everything
# between the jobs crosses usnic.
#
# Asserts: exit 0, "OK spawn" and its BYTES figure; each of the 3 processes
# printed its verdict line with the btl it was given (the children inherit
# mpirun's --mca settings through the environment); and, with usnic, that
# each of those 3 pids printed a [usnic stats] line naming dev lo with
# tx_pkts > 0 (parent: rank 0 of the first job, children: ranks 0 and 1 of
# the spawned job, so assert_usnic_carried does not apply) and that
# tx_bytes over all lines covers the BYTES figure.
#
# run_mpi collects rank output per rank of the job it launched; the spawned
# job's output (verdicts, [usnic stats] lines) is not written to those files
# by this mpirun, it arrives in mpirun's own output at the top of the log.
# The checks below read the whole log, wherever the lines are.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

TEST_TIMEOUT=${SPAWN_TIMEOUT:-60}
if usnic_mode; then
    want_btl="usnic,self"
else
    want_btl="tcp,self"
fi

build_prog spawn || finish
# the program's watchdog fires before the script's time limit, naming the
# phase each process was stuck in
run_mpi 1 "$BIN" -t $((TEST_TIMEOUT > 20 ? TEST_TIMEOUT - 10 : TEST_TIMEOUT / 2))
rc=$?
log=$RUN_LOG
# check_run's usnic check wants ranks 0..NP-1 of one job: the verdict part
# only, the usnic part is done below
if [ "$rc" -eq 124 ]; then
    fail spawn "timed out after ${TEST_TIMEOUT}s" "$log"
    finish
elif [ "$rc" -ne 0 ]; then
    fail spawn "mpirun exit status $rc" "$log"
    finish
elif ! grep -q '^OK spawn$' "$log"; then
    fail spawn "program did not print 'OK spawn'" "$log"
    finish
fi
bytes=$(program_bytes "$log")
if [ -z "$bytes" ]; then
    fail spawn "program did not print its BYTES figure" "$log"
    finish
fi
pass "spawn: mpirun -np 1 + 2 spawned, exit 0, OK spawn, BYTES $bytes"

# verdict lines: "spawn: <parent|child N> pid=P merged_rank=R btl=B verdict OK..."
verdicts=$(grep -o 'spawn: \(parent\|child [01]\) pid=[0-9]* merged_rank=[0-9]* btl=[^ ]* verdict [A-Z]*' "$log")
why=
for w in parent "child 0" "child 1"; do
    line=$(grep "^spawn: $w pid=" <<<"$verdicts")
    if [ "$(grep -c . <<<"$line")" -ne 1 ]; then
        why="$why; $(grep -c . <<<"$line") verdict lines from the $w"
    elif [[ $line != *" btl=$want_btl verdict OK" ]]; then
        why="$why; $w: ${line#spawn: }"
    fi
done
if [ -n "$why" ]; then
    fail "spawn verdicts" "${why#; } (expected btl=$want_btl verdict OK)" "$log"
else
    pass "spawn verdicts: parent and 2 children each verified their data over btl $want_btl"
fi

if ! usnic_mode; then
    pass "spawn usnic stats (not checked with USNIC_TEST_BTL=tcp)"
    finish
fi

# "pid role rank" of the 3 processes, from their verdict lines
procs=$(sed -n 's/^spawn: parent pid=\([0-9]*\) .*/\1 parent 0/p
                s/^spawn: child \([01]\) pid=\([0-9]*\) .*/\2 child_\1 \1/p' <<<"$verdicts")
why=$(awk -v dev="${USNIC_TEST_DEV:-lo}" -v min="$bytes" "$MT_AWK_STATS"'
    FNR == NR { role[$1] = $2; sub(/_/, " ", role[$1]); rank[$1] = $3; nproc++; next }
    /\[usnic stats\]/ {
        line = stats_kv(kv)
        if (!("pid" in kv) || !("tx_pkts" in kv) || !("tx_bytes" in kv)) {
            err = err "; malformed line: " line
            next
        }
        p = kv["pid"]
        lines++
        if (!(p in role)) {
            err = err "; stats from pid " p ", which printed no verdict"
            next
        }
        if (kv["dev"] != dev) err = err "; " role[p] " used dev=" kv["dev"]
        if (("rank" in kv) && kv["rank"] != rank[p])
            err = err "; " role[p] " printed rank=" kv["rank"] ", expected " rank[p]
        seen[p]++
        pkts[p] += kv["tx_pkts"]
        tx += kv["tx_bytes"]
    }
    END {
        if (nproc != 3) err = err "; " nproc + 0 " processes printed a verdict, expected 3"
        for (p in role) {
            if (!(p in seen)) err = err "; no [usnic stats] line from the " role[p] " (pid " p ")"
            else if (pkts[p] <= 0) err = err "; the " role[p] " (pid " p ") sent no packets"
        }
        if (lines < 3) err = err "; " lines + 0 " [usnic stats] lines, expected at least 3"
        if (tx < min) err = err sprintf("; tx_bytes sum %.0f < BYTES %.0f", tx, min)
        if (err != "") print substr(err, 3)
        else printf "usnic carried %.0f bytes (>= %.0f) from 3 processes of 2 jobs\n", tx, min
    }' <(printf '%s\n' "$procs") "$log")
case $why in
usnic\ carried*)
    echo "    spawn: $why"
    pass "spawn usnic stats: parent and both children sent over usnic"
    ;;
*) fail "spawn usnic stats" "$why" "$log" ;;
esac
finish
