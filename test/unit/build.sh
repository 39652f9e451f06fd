#!/bin/sh
# Build the unit tests of the usnic core (reliability, wire format,
# reassembly, registrations) and run them, either with AddressSanitizer +
# UBSan (default) or without sanitizers under valgrind (valgrind.sh).
#
#   test/unit/build.sh [build-dir]        (default /tmp/usnic-unit)
#   USNIC_UNIT_MODE=valgrind test/unit/build.sh [build-dir]
#
# Exits non-zero if a build fails or a test fails, crashes, leaks, trips a
# sanitizer or valgrind, or hangs.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${USNIC_UNIT_MODE:-asan}
CC=${CC:-gcc}
CFLAGS="-std=c11 -O1 -g -Wall -Wextra -Werror -I. -DBTL_USNIC_UNIT_TEST=1"
CORE="btl_usnic_rel.c btl_usnic_reasm.c btl_usnic_part.c btl_usnic_reg.c btl_usnic_proto.c btl_usnic_auth.c btl_usnic_route.c"
TESTS="test_auth test_rel test_proto test_model test_route test_cc"
# the connectivity checker is built from its own sources (no core, threads)
CC_SRCS="btl_usnic_cagent.c btl_usnic_cclient.c btl_usnic_auth.c"

case $mode in
asan)
    out=${1:-/tmp/usnic-unit}
    CFLAGS="$CFLAGS -fsanitize=address,undefined -fno-omit-frame-pointer"
    LIMIT=${USNIC_UNIT_TIMEOUT:-300} # seconds per test; they take about one
    RUNNER=""
    label="unit tests"
    # leaks are errors; UBSan stops (non-zero) at the first report
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export ASAN_OPTIONS UBSAN_OPTIONS
    ;;
valgrind)
    out=${1:-/tmp/usnic-unit-valgrind}
    command -v valgrind >/dev/null 2>&1 || { echo "valgrind not found"; exit 1; }
    LIMIT=${USNIC_UNIT_TIMEOUT:-900}
    RUNNER="valgrind -q --error-exitcode=1 --leak-check=full"
    # the model test's millions of steps are for the sanitizer build; under
    # valgrind (~40x slower) a shorter run still covers every code path
    USNIC_MODEL_STEPS=${USNIC_MODEL_STEPS:-60000}
    export USNIC_MODEL_STEPS
    label="valgrind unit tests"
    ;;
*)
    echo "USNIC_UNIT_MODE must be asan or valgrind"
    exit 2
    ;;
esac

mkdir -p "$out" || exit 1
cd "$root" || exit 1

for t in $TESTS; do
    echo "build: $out/$t"
    # shellcheck disable=SC2086
    if [ "$t" = test_cc ]; then
        # shellcheck disable=SC2086
        $CC $CFLAGS -pthread -o "$out/$t" $CC_SRCS "test/unit/$t.c" || exit 1
        continue
    fi
    $CC $CFLAGS -o "$out/$t" $CORE "test/unit/$t.c" test/unit/simlink.c || exit 1
done

if command -v timeout >/dev/null 2>&1; then
    run() { timeout "$LIMIT" "$@"; }
else
    run() { "$@"; }
fi

failed=""
for t in $TESTS; do
    echo "run ($mode): $t"
    # shellcheck disable=SC2086
    run $RUNNER "$out/$t"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && echo "$t: timed out after ${LIMIT}s"
        failed="$failed $t(rc=$rc)"
    fi
done

if [ -n "$failed" ]; then
    echo "$label FAILED:$failed"
    exit 1
fi
echo "$label passed"
