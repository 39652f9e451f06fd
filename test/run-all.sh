#!/bin/bash
# The whole test suite of btl/usnic: builds and installs the component,
# runs the unit tests of the reliability core (an AddressSanitizer build and
# a valgrind one) and the receive-path fuzzer side by side, the usnic
# provider double's checks, then every MPI integration test
# (test/mpi/t_*.sh) over each backend.  Every
# check prints "PASS: name" or "FAIL: name (why)"; the last line is the
# summary "N passed, N failed".  Exit status is non-zero on any failure.
#
#   test/run-all.sh            everything
#   SKIP_BUILD=1 test/run-all.sh   use the component already installed
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=${TEST_TMP:-/tmp/usnic-tests}
mkdir -p "$out"
passed=0
failed=0
skipped=0

# run_step NAME CMD...: run a step, count the PASS/FAIL/SKIP lines it prints; a
# step that fails without printing a FAIL line counts as one failure.
run_step() {
    local name=$1 t0=$SECONDS
    shift
    echo "=== $name"
    "$@" >"$out/step-$name.log" 2>&1
    account_step "$name" $? $((SECONDS - t0))
}

# start_step NAME CMD...: start a step in the background; finish_step NAME
# waits for it and counts it as run_step does.
declare -A bg_pid
start_step() {
    local name=$1
    shift
    (
        t0=$SECONDS
        "$@" >"$out/step-$name.log" 2>&1
        rc=$?
        echo $((SECONDS - t0)) >"$out/step-$name.time"
        exit $rc
    ) &
    bg_pid[$name]=$!
}
finish_step() {
    local name=$1 rc
    echo "=== $name"
    wait "${bg_pid[$name]}"
    rc=$?
    account_step "$name" $rc "$(cat "$out/step-$name.time" 2>/dev/null || echo '?')"
}

# account_step NAME RC SECONDS: print the step's result lines and count them
account_step() {
    local name=$1 rc=$2 log="$out/step-$1.log" p f
    echo "    ($name took $3 s)"
    # PASS/FAIL lines, and the log excerpt a FAIL brings with it (fail() in
    # test/lib/mpitest.sh frames it with "---- ... ----" lines)
    awk '/^(PASS|FAIL|SKIP)/ { print; x = 0; next }
         /^---- last lines of / { x = 1 }
         x { print } /^----$/ { x = 0 }' "$log"
    p=$(grep -c '^PASS' "$log")
    f=$(grep -c '^FAIL' "$log")
    skipped=$((skipped + $(grep -c '^SKIP' "$log")))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL: $name (exit status $rc; log $log)"
        tail -n 20 "$log" | sed 's/^/    /'
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}

build_component() (
    set -e
    cd "$top"
    ./autogen.sh
    # a fresh build directory: one configured from another checkout would
    # keep that checkout's source paths in its dependency files
    rm -rf "$out/build"
    mkdir -p "$out/build"
    cd "$out/build"
    "$top/configure"
    make -j2 V=0 2>&1 | tee "$out/build-warnings.log"
    if grep -q 'warning:' "$out/build-warnings.log"; then
        echo "FAIL: build has compiler warnings"
        exit 1
    fi
    make install
    ompi_info | grep -q 'MCA btl: usnic' || { echo "FAIL: ompi_info does not list btl usnic"; exit 1; }
    echo "PASS: build and install without warnings"
)

"$top/scripts/install-deps.sh" || { echo "0 passed, 1 failed"; exit 1; }
# every C source obeys the repository's .clang-format
format_check() {
    local bad=
    cd "$top" || return 1
    for f in btl_usnic*.[ch] test/unit/*.[ch] test/mpi/*.[ch] test/fuzz/*.c bench/*.c; do
        clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
    done
    if [ -n "$bad" ]; then
        echo "FAIL: clang-format (differs:$bad)"
        return 1
    fi
    echo "PASS: clang-format: all C sources formatted"
}
run_step format format_check

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    run_step build build_component
fi
# The unit tests of the AddressSanitizer and valgrind builds and the
# libFuzzer target over the receive dispatch (regressions, seed corpus, then
# a bounded run, FUZZ_RUNS) run side by side: the unit tests wait on real
# time much of theirs (the connectivity agent's timeouts), so the three take
# about 100 s together on 2 CPUs against 200 s one after the other.
start_step unit-asan bash "$top/test/unit/build.sh" "$out/unit"
start_step unit-valgrind bash "$top/test/unit/valgrind.sh" "$out/unit-vg"
start_step fuzz env FUZZ_OUT="$out/fuzz" bash "$top/test/fuzz/run.sh"
finish_step unit-asan
finish_step unit-valgrind
finish_step fuzz
# the usnic-provider test double (issue 11) against its own contract checks
run_step prov bash "$top/test/prov/t_prov.sh" "$out/prov"
# every MPI test over the default backend (the kernel's UDP sockets here),
# then again over libfabric's udp provider (USNIC_TEST_BACKENDS="kernel"
# runs the first pass only).  The second pass gives t_dtstress's eight runs
# 8 s each instead of 15 (DTSTRESS_TIME_UDP, else DTSTRESS_TIME if set), to
# keep CI well inside 30 minutes on 2 cores: the receive and send paths
# above the channel are the same code, which the first pass stresses for
# the full time.
for backend in ${USNIC_TEST_BACKENDS:-kernel udp}; do
    for t in "$top"/test/mpi/t_*.sh; do
        if [ "$backend" = kernel ]; then
            run_step "$(basename "$t" .sh)" bash "$t"
        else
            run_step "$(basename "$t" .sh)-$backend" \
                env OMPI_MCA_btl_usnic_providers="$backend" \
                DTSTRESS_TIME="${DTSTRESS_TIME_UDP:-${DTSTRESS_TIME:-8}}" bash "$t"
        fi
    done
done

if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
