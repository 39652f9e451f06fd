#!/bin/bash
# MPI_THREAD_MULTIPLE: two threads per rank exchanging concurrently on
# separate communicators, sizes up to 1 MiB; 2 ranks.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog threads -pthread || finish
run_mpi 2 "$BIN"
rc=$?
if grep -q "MPI_THREAD_MULTIPLE not provided" "$RUN_LOG"; then
    fail threads "MPI library does not provide MPI_THREAD_MULTIPLE" "$RUN_LOG"
else
    check_run threads $rc 2
fi
finish
