#!/bin/bash
# Run every test/mpi/t_*.sh (or the ones named on the command line) one
# after the other and summarise.  Exit status is non-zero if any failed.
cd "$(dirname "$0")" || exit 1
[ $# -eq 0 ] && set -- t_*.sh
failed=
for t in "$@"; do
    echo "=== $t"
    start=$SECONDS
    bash "./$(basename "$t")" || failed="$failed $t"
    echo "=== $t: $((SECONDS - start))s"
done
if [ -n "$failed" ]; then
    echo "FAILED:$failed"
    exit 1
fi
echo "all passed"
