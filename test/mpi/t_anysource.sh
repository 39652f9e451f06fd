#!/bin/bash
# MPI_ANY_SOURCE / MPI_ANY_TAG receives (pre-posted, probe, blocking) with
# small and > 64 KiB messages from all other ranks; 4 ranks.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog anysource || finish
run_mpi 4 "$BIN"
check_run anysource $? 4
finish
