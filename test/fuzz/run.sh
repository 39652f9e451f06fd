#!/bin/bash
# Build the libFuzzer target over the receive dispatch (test/fuzz/fuzz_rx.c)
# and run it: every input of test/fuzz/regressions/ (inputs that once
# crashed it) and of the seed corpus test/fuzz/corpus/ once, then a bounded
# fuzzing run on a temporary copy of the corpus (the committed one is never
# modified).  Prints "PASS: name" or "FAIL: name (why)" per step; exits 0
# only if every step passed.
#
#   test/fuzz/run.sh
#   FUZZ_RUNS=N      fuzzing iterations (default 150000, about a minute on 2 cores)
#   FUZZ_SEED=S      libFuzzer seed (default fixed: 1234)
#   FUZZ_MAX_LEN=L   longest input (default 16384)
#   FUZZ_OUT=DIR     build and work directory (default: a new one under /tmp)
#   CC=clang-14      compiler (default clang)
#
# A crash keeps the crashing input (its path is printed) and the tail of
# the libFuzzer output; reproduce with: <build dir>/fuzz_rx <input>, with
# FUZZ_RX_VERBOSE=1 to see each datagram's verdict.  Add the input to
# test/fuzz/regressions/ so every later run replays it.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CC=${CC:-clang}
runs=${FUZZ_RUNS:-150000}
seed=${FUZZ_SEED:-1234}
max_len=${FUZZ_MAX_LEN:-16384}
out=${FUZZ_OUT:-$(mktemp -d /tmp/usnic-fuzz.XXXXXX)}
CORE="btl_usnic_rel.c btl_usnic_reasm.c btl_usnic_part.c btl_usnic_reg.c btl_usnic_proto.c btl_usnic_auth.c"
CFLAGS="-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
CFLAGS="$CFLAGS -fno-omit-frame-pointer -Wall -Wextra -I. -DBTL_USNIC_UNIT_TEST=1"
bin="$out/fuzz_rx"
failed=0

mkdir -p "$out" "$out/crashes" || exit 1
# leaks are failures; UBSan already stops at its first report
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

pass() { echo "PASS: $1"; }
fail() {
    echo "FAIL: $1 ($2)"
    failed=1
}

# keep_crash LOG: copy whatever libFuzzer wrote as a crashing input into
# $out/crashes, print where, and the tail of the log
keep_crash() {
    local log=$1 f n=0
    for f in "$out"/work/crash-* "$out"/work/leak-* "$out"/work/timeout-* "$out"/work/oom-*; do
        [ -f "$f" ] || continue
        cp "$f" "$out/crashes/" && n=$((n + 1))
        echo "    crashing input kept: $out/crashes/$(basename "$f")"
    done
    echo "---- last lines of $log ----"
    tail -n 40 "$log"
    echo "----"
}

# ---- build
cd "$root" || exit 1
# shellcheck disable=SC2086
if $CC $CFLAGS -o "$bin" $CORE test/fuzz/fuzz_rx.c >"$out/build.log" 2>&1 &&
    ! grep -q 'warning:' "$out/build.log"; then
    pass "fuzz build"
else
    fail "fuzz build" "see $out/build.log"
    tail -n 30 "$out/build.log"
    exit 1
fi

mkdir -p "$out/work"
common=(-rss_limit_mb=2048 -timeout=20 -max_len="$max_len" "-artifact_prefix=$out/work/")

# replay NAME FILE...: run each file once
replay() {
    local log="$out/$1.log"
    shift
    if [ $# -eq 0 ]; then
        return 0
    fi
    if "$bin" "${common[@]}" "$@" >"$log" 2>&1; then
        return 0
    fi
    grep 'Running: ' "$log" | tail -n 1 | sed 's/^Running: /    failing input: /'
    keep_crash "$log"
    return 1
}

# ---- every input that ever crashed the target
regs=()
for f in "$here"/regressions/*; do
    [ -f "$f" ] && [ "$(basename "$f")" != README ] && regs+=("$f")
done
if replay regressions "${regs[@]}"; then
    pass "fuzz regressions replayed (${#regs[@]} inputs)"
else
    fail "fuzz regressions replayed" "an input of test/fuzz/regressions crashes the target"
fi

# ---- the seed corpus
seeds=("$here"/corpus/*)
if [ ! -f "${seeds[0]}" ]; then
    fail "fuzz corpus replayed" "test/fuzz/corpus is empty"
elif replay corpus "${seeds[@]}"; then
    pass "fuzz corpus replayed (${#seeds[@]} inputs)"
else
    fail "fuzz corpus replayed" "a seed crashes the target"
fi

# ---- bounded fuzzing on a copy of the corpus
rm -rf "$out/corpus"
mkdir -p "$out/corpus"
cp "$here"/corpus/* "$out/corpus/" 2>/dev/null
echo "fuzzing: $runs runs, seed $seed, max_len $max_len, corpus copy $out/corpus"
log="$out/fuzz.log"
start=$(date +%s)
"$bin" "${common[@]}" -runs="$runs" -seed="$seed" -print_final_stats=1 "$out/corpus" >"$log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1)
ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n1)
echo "fuzzing took ${secs}s; final ${cov:-cov: ?} ${ft:-ft: ?}"
grep '^stat::' "$log" | sed 's/^/    /'
if [ "$rc" -eq 0 ] && grep -q "^Done $runs runs" "$log"; then
    pass "fuzz $runs runs, seed $seed, no crash"
else
    fail "fuzz $runs runs, seed $seed" "libFuzzer exit status $rc"
    keep_crash "$log"
fi

if [ "$failed" -ne 0 ]; then
    echo "fuzz: FAILED (work directory $out)"
    exit 1
fi
echo "fuzz: all passed (work directory $out)"
exit 0
