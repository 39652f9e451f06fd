#!/bin/bash
# MPI_Bcast (small, 4 MiB), MPI_Allreduce (ints/doubles up to 1M elements),
# MPI_Alltoallv with uneven counts; 4 ranks.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog collectives || finish
run_mpi 4 "$BIN"
# floor: the 4 MiB broadcast from each of 4 roots reaches 3 other ranks
check_run collectives $? 4 $((4 * 3 * 4 * 1024 * 1024))
finish
