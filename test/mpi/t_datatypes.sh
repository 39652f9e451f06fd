#!/bin/bash
# Derived datatypes (vector, indexed, struct with gaps, hvector of struct),
# small and > 1 MiB, received into differently shaped layouts; 2 ranks.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog datatypes || finish
run_mpi 2 "$BIN"
# floor: the seven large cases alone move >= 10 MB each way
check_run datatypes $? 2 $((2 * 10 * 1000 * 1000))
finish
