#!/bin/sh
# Build the unit tests of the usnic core (reliability, wire format,
# reassembly, registrations) with AddressSanitizer + UBSan and run them.
#
#   test/unit/build.sh [build-dir]        (default /tmp/usnic-unit)
#
# Exits non-zero if a build fails or a test fails, crashes, leaks, trips a
# sanitizer or hangs.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-/tmp/usnic-unit}
CC=${CC:-gcc}
CFLAGS="-std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-omit-frame-pointer -I. -DBTL_USNIC_UNIT_TEST=1"
CORE="btl_usnic_rel.c btl_usnic_reasm.c btl_usnic_reg.c btl_usnic_proto.c"
TESTS="test_rel test_proto"
LIMIT=${USNIC_UNIT_TIMEOUT:-300} # seconds per test; they take about one

mkdir -p "$out" || exit 1
cd "$root" || exit 1

for t in $TESTS; do
    echo "build: $out/$t"
    # shellcheck disable=SC2086
    $CC $CFLAGS -o "$out/$t" $CORE "test/unit/$t.c" test/unit/simlink.c || exit 1
done

# leaks are errors; UBSan stops (non-zero) at the first report
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS

if command -v timeout >/dev/null 2>&1; then
    run() { timeout "$LIMIT" "$@"; }
else
    run() { "$@"; }
fi

failed=""
for t in $TESTS; do
    echo "run: $t"
    run "$out/$t"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && echo "$t: timed out after ${LIMIT}s"
        failed="$failed $t(rc=$rc)"
    fi
done

if [ -n "$failed" ]; then
    echo "unit tests FAILED:$failed"
    exit 1
fi
echo "unit tests passed"
