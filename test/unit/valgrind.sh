#!/bin/sh
# Build the unit tests without sanitizers and run them under valgrind
# (memory errors and leaks are failures).
#
#   test/unit/valgrind.sh [build-dir]     (default /tmp/usnic-unit-valgrind)
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-/tmp/usnic-unit-valgrind}
CC=${CC:-gcc}
CFLAGS="-std=c11 -O1 -g -Wall -Wextra -Werror -I. -DBTL_USNIC_UNIT_TEST=1"
CORE="btl_usnic_rel.c btl_usnic_reasm.c btl_usnic_reg.c btl_usnic_proto.c"
TESTS="test_rel test_proto"
LIMIT=${USNIC_UNIT_TIMEOUT:-900}

command -v valgrind >/dev/null 2>&1 || { echo "valgrind not found"; exit 1; }
mkdir -p "$out" || exit 1
cd "$root" || exit 1

for t in $TESTS; do
    echo "build: $out/$t"
    # shellcheck disable=SC2086
    $CC $CFLAGS -o "$out/$t" $CORE "test/unit/$t.c" test/unit/simlink.c || exit 1
done

if command -v timeout >/dev/null 2>&1; then
    run() { timeout "$LIMIT" "$@"; }
else
    run() { "$@"; }
fi

failed=""
for t in $TESTS; do
    echo "valgrind: $t"
    run valgrind -q --error-exitcode=1 --leak-check=full "$out/$t"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && echo "$t: timed out after ${LIMIT}s"
        failed="$failed $t(rc=$rc)"
    fi
done

if [ -n "$failed" ]; then
    echo "valgrind unit tests FAILED:$failed"
    exit 1
fi
echo "valgrind unit tests passed"
