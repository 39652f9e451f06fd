#!/bin/bash
# Pingpong under injected packet loss with a fixed seed:
#   drop 1%                          max 4 MiB, pingpong -i 1
#   drop 5%, dup 2%, reorder 5%      max 4 MiB, pingpong -i 0.5
#   drop 20%                         max 1 MiB, pingpong -i 0.25
# (pingpong -i scales its iterations per size; every size runs at least once)
# Each run must still verify all data, usnic must have carried it, and the
# stats must show that packets were really dropped (inj_drop > 0) and
# recovered by retransmission (retrans > 0), tail losses by tail-loss
# probes (tlp_probes > 0); the 5% and 20% runs must also show holes found
# by the ACKs (RACK: sack_retrans > 0), the 5% run injected duplicates and
# reorderings (inj_dup, inj_reorder > 0) and discarded duplicates
# (dup_rx > 0).
#
# Overrides: FAULT_SEED (4242), FAULT_MAX (4 MiB), FAULT_MAX20 (1 MiB),
# FAULT_ITERS (pingpong -i for all three runs).
# Each mpirun is limited to TEST_TIMEOUT seconds (default 90 here).
TEST_TIMEOUT=${TEST_TIMEOUT:-90}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

seed=${FAULT_SEED:-4242}
max=${FAULT_MAX:-4194304}
max20=${FAULT_MAX20:-1048576}

build_prog pingpong || finish

# fault_run NAME MAX ITERS "KEYS THAT MUST BE > 0" MCA_ARGS...
fault_run() {
    local name=$1 m=$2 iters=${FAULT_ITERS:-$3} keys=$4 key v
    shift 4
    EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_debug_seed $seed $*" \
        run_mpi 2 "$BIN" -m "$m" -i "$iters"
    check_run "$name" $? 2 $((4 * $(pingpong_size_sum "$m"))) || return
    usnic_mode || return
    for key in $keys; do
        v=$(stat_sum "$RUN_LOG" "$key")
        echo "    $name: sum of $key = $v"
        if [ "$v" -le 0 ]; then
            fail "$name recovery" "sum of $key is $v, expected > 0" "$RUN_LOG"
            return
        fi
    done
    pass "$name recovery"
}

fault_run "faults drop=0.01" "$max" 1 "inj_drop retrans tlp_probes" \
    --mca btl_usnic_debug_drop_rate 0.01
fault_run "faults drop=0.05 dup=0.02 reorder=0.05" "$max" 0.5 \
    "inj_drop retrans tlp_probes sack_retrans inj_dup inj_reorder dup_rx" \
    --mca btl_usnic_debug_drop_rate 0.05 \
    --mca btl_usnic_debug_dup_rate 0.02 \
    --mca btl_usnic_debug_reorder_rate 0.05
fault_run "faults drop=0.20" "$max20" 0.25 "inj_drop retrans tlp_probes sack_retrans" \
    --mca btl_usnic_debug_drop_rate 0.20
finish
