#!/bin/bash
# Bad user input gets a clear help message that names the parameter and says
# how to fix it: an unparsable CIDR, a window of zero, a loss rate above 1, a
# negative in-flight limit, a retransmission timeout ceiling below its
# floor, tail-loss probes neither on nor off, and an interface that does not
# exist.  Only the message text is checked.
. "$(dirname "$0")/../lib/mpitest.sh"
usnic_mode || { pass "bad params (skipped with USNIC_TEST_BTL=tcp)"; finish; }
build_prog trivial || finish

# expect_help NAME "MCA ARGS" PATTERN...: run a trivial job with the (bad)
# settings; every PATTERN must appear in the output.  mpirun of this Open MPI
# sometimes drops a rank's help message (ORTE_ERROR_LOG show_help, about 1
# run in 30 under load, for every rank at once): a miss is retried, up to 6
# runs in all, and fails only if no run shows the message.
expect_help() {
    local name=$1 mca=$2 try ok pat
    shift 2
    for try in 1 2 3 4 5 6; do
        USNIC_TEST_IF=${IF_OVERRIDE-lo} TEST_TIMEOUT=40 EXTRA_MCA="$mca" run_mpi 2 "$BIN"
        ok=1
        for pat in "$@"; do
            grep -v '^# ' "$RUN_LOG" | grep -q -- "$pat" || ok=0
        done
        [ $ok = 1 ] && break
        echo "# $name: run $try without the message$(grep -q 'ORTE_ERROR_LOG.*show_help' \
            "$RUN_LOG" && echo ' (mpirun lost a help message)'); retrying"
    done
    if [ $ok = 1 ]; then
        pass "$name"
    else
        fail "$name" "message with: $*" "$RUN_LOG"
    fi
}

IF_OVERRIDE= expect_help "bad CIDR in if_include" "--mca btl_usnic_if_include 10.0.0.0/40" \
    "Parameter: btl_usnic_if_include" "IPv4 CIDR"
expect_help "zero send window" "--mca btl_usnic_send_window 0" \
    "Parameter: btl_usnic_send_window" "positive integer"
expect_help "drop rate above 1" "--mca btl_usnic_debug_drop_rate 1.5" \
    "Parameter: btl_usnic_debug_drop_rate" "between 0 and 1"
expect_help "negative in-flight limit" "--mca btl_usnic_max_inflight -5" \
    "Parameter: btl_usnic_max_inflight" "no limit"
expect_help "timeout ceiling below floor" \
    "--mca btl_usnic_retrans_timeout_min 5000 --mca btl_usnic_retrans_timeout_max 1000" \
    "Parameter: btl_usnic_retrans_timeout_max" "at least btl_usnic_retrans_timeout_min"
expect_help "tlp neither on nor off" "--mca btl_usnic_tlp 2" \
    "Parameter: btl_usnic_tlp" "1 (on) or 0 (off)"
IF_OVERRIDE= expect_help "missing interface" "--mca btl_usnic_if_include nosuchif0" \
    "found no usable network device" "btl_usnic_if_include: *nosuchif0"
finish
