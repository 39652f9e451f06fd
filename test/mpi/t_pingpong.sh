#!/bin/bash
# Ping-pong with data check, 0 B .. 16 MiB+1, both directions, 2 ranks.
# usnic must have carried at least the payload the program reports, and at
# least 4x the sum of all sizes (ping + pong, two directions).
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog pingpong || finish
run_mpi 2 "$BIN"
check_run pingpong $? 2 $((4 * $(pingpong_size_sum $((16 * 1024 * 1024 + 1)))))
finish
