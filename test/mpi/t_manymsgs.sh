#!/bin/bash
# Thousands of outstanding MPI_Isend/MPI_Irecv (8 B .. 64 KiB) between all
# pairs of 3 ranks.  MANYMSGS_N overrides the messages per peer (5000).
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog manymsgs || finish
run_mpi 3 "$BIN" -n "${MANYMSGS_N:-5000}"
# floor: each message is >= 8 bytes; 3 ranks x 2 peers x N x 2 rounds
check_run manymsgs $? 3 $((3 * 2 * ${MANYMSGS_N:-5000} * 2 * 8))
finish
