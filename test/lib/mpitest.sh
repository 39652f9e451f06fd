# shellcheck shell=bash
# Helpers for the usnic BTL MPI integration tests; source from test/mpi/t_*.sh.
#
# Environment:
#   TEST_TMP        scratch dir for binaries and logs (default /tmp/usnic-tests)
#   TEST_TIMEOUT    hard time limit of one mpirun, seconds (default 120)
#   EXTRA_MCA       extra mpirun arguments, split on spaces
#                   (e.g. "--mca btl_usnic_debug_drop_rate 0.05")
#   USNIC_TEST_BTL  "tcp": run over "btl tcp,self" on lo instead of usnic and
#                   skip the usnic statistics checks (debugging the tests)
#   USNIC_TEST_DEV  device every [usnic stats] line must name (default lo)
#   USNIC_TEST_IF   btl_usnic_if_include value (default lo; empty: not set)
#
# Only the loopback interface is used, for MPI traffic and for the runtime.

TEST_TMP=${TEST_TMP:-/tmp/usnic-tests}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
mkdir -p "$TEST_TMP/bin" "$TEST_TMP/logs" || exit 1
TEST_TMP=$(cd "$TEST_TMP" && pwd)
MT_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../mpi" && pwd)
MT_NAME=$(basename "$0" .sh)
MT_FAILS=0
MT_RUNS=0
MT_WHY=
RUN_LOG=
MT_PROG=
BIN=

usnic_mode() { [ "${USNIC_TEST_BTL:-usnic}" != tcp ]; }
# the datagram backend the tests run over: "kernel" (the default) unless
# OMPI_MCA_btl_usnic_providers names another (test/run-all.sh's second pass)
usnic_backend() { echo "${OMPI_MCA_btl_usnic_providers:-kernel}"; }

# ---- result reporting ------------------------------------------------------

pass() { echo "PASS: $1"; }

# fail NAME REASON [LOG]: report a failure, show the end of LOG if given.
fail() {
    echo "FAIL: $1 ($2)"
    MT_FAILS=$((MT_FAILS + 1))
    if [ -n "${3:-}" ] && [ -f "$3" ]; then
        fail_log_excerpt "$3"
    fi
}

# fail_log_excerpt LOG: what a CI log needs to tell why a run failed.  A
# run_mpi log (see there) holds mpirun's own messages (start-up help
# messages, an abort, a process that exited abnormally) before the
# per-rank sections: those first lines, then the end of every rank's
# section, so a failure on one rank (usnic's messages during a job, such
# as "lost contact with a peer", are in its own stderr) is not hidden
# behind another's output.  Any other file: its last 25 lines.
fail_log_excerpt() {
    local log=$1
    if ! grep -q '^==== rank ' "$log"; then
        echo "---- last lines of $log ----"
        tail -n 25 "$log" | sed 's/^/    /'
        echo "----"
        return
    fi
    echo "---- $log: mpirun's own output (first 40 lines) ----"
    sed -n '/^==== rank /q;p' "$log" | head -n 40 | cut -c1-400 | sed 's/^/    /'
    awk '/^==== rank / { if (name != "") flush(); name = $0; n = 0; next }
         { buf[n++ % 12] = $0; total = n }
         function flush(   i, s) {
             print "---- " name " (last " (total < 12 ? total : 12) " of " total " lines) ----"
             s = total > 12 ? total - 12 : 0
             for (i = s; i < total; i++) print "    " substr(buf[i % 12], 1, 400)
         }
         END { if (name != "") flush() }' "$log"
    echo "----"
}

# finish: exit non-zero if anything failed.
finish() {
    if [ "$MT_FAILS" -ne 0 ]; then
        echo "$MT_NAME: $MT_FAILS failure(s)"
        exit 1
    fi
    exit 0
}

# ---- building and running --------------------------------------------------

# build_prog NAME [CFLAGS...]: compile test/mpi/NAME.c to $TEST_TMP/bin/NAME
# and set BIN.  Reports FAIL and returns 1 if it does not compile.
build_prog() {
    _build_with mpicc "$@"
}

# build_tool NAME [ARGS...]: the same for a helper that is no MPI program
# (cc; ARGS after the source, so libraries may be among them).
build_tool() {
    _build_with cc "$@"
}

_build_with() {
    local compiler=$1 name=$2 out
    shift 2
    BIN=$TEST_TMP/bin/$name
    # build under a private name, then rename: scripts may run in parallel
    if ! out=$($compiler -O2 -Wall -Wextra -o "$BIN.$$" "$MT_SRC/$name.c" "$@" 2>&1)
    then
        fail "build $name" "$compiler failed"
        printf '    %s\n' "$out"
        rm -f "$BIN.$$"
        return 1
    fi
    [ -n "$out" ] && printf '    build %s: %s\n' "$name" "$out"
    mv -f "$BIN.$$" "$BIN"
}

# run_log_finish NP RC START [ARGS...]: complete RUN_LOG after an mpirun that
# wrote each rank's output under $RUN_LOG.d (--output-filename): append it
# rank by rank, note a timeout, print the one-line summary; returns RC.
run_log_finish() {
    local np=$1 rc=$2 start=$3 dir=$RUN_LOG.d r s f
    shift 3
    [ "$rc" -eq 124 ] && echo "# TIMEOUT after ${TEST_TIMEOUT}s" >> "$RUN_LOG"
    [ -d "$dir" ] || echo "# no per-rank output in $dir" >> "$RUN_LOG"
    for ((r = 0; r < np; r++)); do
        for s in stdout stderr; do
            for f in "$dir"/*/"rank.$r/$s"; do
                [ -s "$f" ] || continue
                echo "==== rank $r $s"
                cat "$f"
                [ -z "$(tail -c 1 "$f")" ] || echo
            done
        done
    done >> "$RUN_LOG"
    rm -rf "$dir"
    echo "    ran: np=$np $MT_PROG $* ${EXTRA_MCA:+[$EXTRA_MCA] }" \
         "-> rc=$rc, $((SECONDS - start))s, log $RUN_LOG"
    return "$rc"
}

# run_mpi NP PROG [ARGS...]: run PROG on NP ranks under a hard timeout and
# leave the name of its log file in RUN_LOG (do not call it in a subshell).
# The log holds the command (first line, "# ..."), mpirun's own messages,
# then each rank's stdout and stderr in "==== rank N stdout|stderr"
# sections.  mpirun interleaves the output of different ranks and streams
# at arbitrary points, even inside lines, so the ranks' output is collected
# per rank (--output-filename) and appended afterwards.
# Returns mpirun's exit status (124 = timed out).
run_mpi() {
    local np=$1 prog=$2 rc start dir
    shift 2
    MT_RUNS=$((MT_RUNS + 1))
    MT_PROG=$(basename "$prog")
    # the script's pid keeps concurrent runs of one script apart
    RUN_LOG=$TEST_TMP/logs/$MT_NAME.$$.$MT_RUNS.$MT_PROG.log
    dir=$RUN_LOG.d
    rm -rf "$dir"

    local -a cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none
                  -np "$np" --mca pml ob1 --mca oob_tcp_if_include lo
                  --output-filename "$dir:nocopy")
    if usnic_mode; then
        cmd+=(--mca btl "usnic,self" --mca btl_usnic_print_stats 1)
        # USNIC_TEST_IF= (empty) leaves btl_usnic_if_include to the caller
        [ -n "${USNIC_TEST_IF-lo}" ] && cmd+=(--mca btl_usnic_if_include "${USNIC_TEST_IF-lo}")
    else
        cmd+=(--mca btl "tcp,self" --mca btl_tcp_if_include lo)
    fi
    # shellcheck disable=SC2206 # EXTRA_MCA is meant to be word-split
    cmd+=(${EXTRA_MCA:-} "$prog" "$@")

    # MT_RUN_AS=UID:GID: the job runs as that user (no root, no
    # capabilities), with a home and temporary directory of its own and the
    # ranks' output directory made its own
    local -a as=()
    if [ -n "${MT_RUN_AS:-}" ]; then
        local home=$TEST_TMP/home-${MT_RUN_AS%%:*}
        mkdir -p "$home" "$dir" && chown "$MT_RUN_AS" "$home" "$dir" || return 1
        as=(setpriv --reuid="${MT_RUN_AS%%:*}" --regid="${MT_RUN_AS##*:}" --clear-groups
            env HOME="$home" TMPDIR="$home")
    fi

    echo "# ${as[*]}${as[*]:+ }${cmd[*]}" > "$RUN_LOG"
    start=$SECONDS
    timeout -k 20 "$TEST_TIMEOUT" "${as[@]}" "${cmd[@]}" >> "$RUN_LOG" 2>&1 < /dev/null
    rc=$?
    run_log_finish "$np" "$rc" "$start" "$@"
}

# ---- log checks -------------------------------------------------------------

# program_bytes LOG: the payload figure the program printed ("BYTES n").
program_bytes() {
    grep -o 'BYTES [0-9][0-9]*' "$1" | tail -n 1 | cut -d' ' -f2
}

# stat_sum LOG KEY: sum of KEY over all [usnic stats] lines (0 if none).
stat_sum() {
    awk -v key="$2" '
        /\[usnic stats\]/ {
            for (i = 1; i <= NF; i++)
                if (index($i, key "=") == 1) sum += substr($i, length(key) + 2)
        }
        END { printf "%.0f\n", sum }' "$1"
}

# rank_stat LOG RANK KEY: KEY of the [usnic stats] line of RANK (0 if absent)
rank_stat() {
    awk -v r="$2" -v key="$3" '
        /\[usnic stats\]/ && (" " $0 " ") ~ (" rank=" r " ") {
            for (i = 1; i <= NF; i++)
                if (index($i, key "=") == 1) v += substr($i, length(key) + 2)
        }
        END { printf "%.0f\n", v }' "$1"
}

# assert_direct_receive NAME: the kernel backend received chunks straight
# into their destination (direct receive) in the last run: rx_direct > 0
# summed over its ranks.
assert_direct_receive() {
    local direct
    direct=$(stat_sum "$RUN_LOG" rx_direct)
    if [ "${direct:-0}" -gt 0 ]; then
        pass "$1: $direct chunks received in place, $(stat_sum "$RUN_LOG" rx_direct_miss) receives held others"
    else
        fail "$1: direct receive" "rx_direct=${direct:-missing}: no chunk was received in place" "$RUN_LOG"
    fi
}

# assert_usnic_carried LOG MIN_BYTES NP: the [usnic stats] lines show that
# usnic carried the job: ranks 0..NP-1 each printed at least one line (one
# per module, at least NP lines, no module twice), every line names the
# expected device, every rank sent packets, and the sum of tx_bytes is at
# least MIN_BYTES.  Returns 1 with the reason in MT_WHY otherwise.
# Always succeeds with USNIC_TEST_BTL=tcp.
# An awk function for the checks that read [usnic stats] lines: stats_kv(kv)
# puts the key=value fields of the line in $0 into kv (emptied first) and
# returns the line from "[usnic stats]" on.  Use: awk "$MT_AWK_STATS"'...'
MT_AWK_STATS='
function stats_kv(kv,    line, n, f, i, eq) {
    delete kv
    line = substr($0, index($0, "[usnic stats]"))
    n = split(line, f, " ")
    for (i = 3; i <= n; i++) {
        eq = index(f[i], "=")
        if (eq > 1) kv[substr(f[i], 1, eq - 1)] = substr(f[i], eq + 1)
    }
    return line
}'

assert_usnic_carried() {
    local log=$1 min=$2 np=$3
    if ! usnic_mode; then
        MT_WHY="usnic stats not checked (USNIC_TEST_BTL=tcp)"
        return 0
    fi
    MT_WHY=$(awk -v np="$np" -v min="$min" -v dev="${USNIC_TEST_DEV:-lo}" "$MT_AWK_STATS"'
        /\[usnic stats\]/ {
            line = stats_kv(kv)
            if (!("rank" in kv) || !("tx_pkts" in kv) || !("tx_bytes" in kv) ||
                kv["rank"] !~ /^[0-9]+$/) {
                err = err "; malformed line: " line
                next
            }
            lines++
            r = kv["rank"] + 0
            if (r >= np) err = err "; unexpected rank " r
            if (kv["dev"] != dev) err = err "; rank " r " used dev=" kv["dev"]
            id = kv["host"] "/" kv["pid"] "/" r "/" kv["dev"]
            if (id in once) err = err "; rank " r " printed dev " kv["dev"] " twice"
            once[id] = 1
            seen[r] = 1
            pkts[r] += kv["tx_pkts"]
            bytes += kv["tx_bytes"]
        }
        END {
            if (lines < np) err = err "; " lines + 0 " [usnic stats] lines for " np " ranks"
            for (r = 0; r < np; r++) {
                if (!(r in seen)) err = err "; no stats from rank " r
                else if (pkts[r] <= 0) err = err "; rank " r " sent no packets"
            }
            if (bytes < min)
                err = err sprintf("; tx_bytes sum %.0f < expected minimum %.0f", bytes, min)
            if (err != "") print substr(err, 3)
            else printf "usnic carried %.0f bytes (>= %.0f) on %d ranks\n", bytes, min, np
        }' "$log")
    case $MT_WHY in usnic\ carried*) return 0 ;; esac
    return 1
}

# check_run NAME RC NP [FLOOR_BYTES]: standard verdict for the last run_mpi
# (log RUN_LOG, program MT_PROG): mpirun succeeded, the program printed
# "OK <program>" and its BYTES figure, and usnic carried at least
# max(BYTES, FLOOR_BYTES) payload bytes.  Prints one PASS/FAIL line for NAME;
# returns 1 on failure.
check_run() {
    local name=$1 rc=$2 np=$3 floor=${4:-0} bytes
    if [ "$rc" -eq 124 ]; then
        fail "$name" "timed out after ${TEST_TIMEOUT}s" "$RUN_LOG"; return 1
    elif [ "$rc" -ne 0 ]; then
        fail "$name" "mpirun exit status $rc" "$RUN_LOG"; return 1
    elif ! grep -q "^OK $MT_PROG\$" "$RUN_LOG"; then
        fail "$name" "program did not print 'OK $MT_PROG'" "$RUN_LOG"
        return 1
    fi
    bytes=$(program_bytes "$RUN_LOG")
    if [ -z "$bytes" ]; then
        fail "$name" "program did not print its BYTES figure" "$RUN_LOG"
        return 1
    fi
    [ "$floor" -gt "$bytes" ] && bytes=$floor
    if ! assert_usnic_carried "$RUN_LOG" "$bytes" "$np"; then
        fail "$name" "$MT_WHY" "$RUN_LOG"; return 1
    fi
    if ! assert_no_refusals "$RUN_LOG"; then
        fail "$name" "$MT_WHY" "$RUN_LOG"; return 1
    fi
    echo "    $name: $MT_WHY"
    pass "$name"
}

# each_rank NAME KEY OP VALUE: PASS if every rank's KEY in the last run's
# [usnic stats] lines compares with VALUE by OP (test(1): -gt, -eq, ...),
# else FAIL naming the ranks that do not (and FAIL if fewer than 2 ranks
# printed their counters).
each_rank() {
    local name=$1 key=$2 op=$3 val=$4 line v r=0 bad=
    while read -r line; do
        v=$(sed -n "s/.* $key=\([0-9]*\).*/\1/p" <<<"$line")
        if ! [ "${v:-0}" "$op" "$val" ]; then
            bad="$bad rank $r: $key=${v:-?}"
        fi
        r=$((r + 1))
    done < <(grep '\[usnic stats\]' "$RUN_LOG")
    if [ "$r" -lt 2 ]; then
        fail "$name" "[usnic stats] lines from $r ranks" "$RUN_LOG"
    elif [ -n "$bad" ]; then
        fail "$name" "want $key $op $val:$bad" "$RUN_LOG"
    else
        pass "$name: $key $op $val on both ranks ($(stat_sum "$RUN_LOG" "$key") in all)"
    fi
}

# assert_no_refusals LOG: the job's own datagrams were never taken for
# someone else's: no drop_SENDER, drop_ADDRESS, drop_AUTH, drop_CHECKSUM or
# drop_TAG in its [usnic stats] lines (a test that sends hostile or
# corrupted datagrams on purpose sets USNIC_TEST_HOSTILE=1).
assert_no_refusals() {
    local r n
    usnic_mode || return 0
    [ "${USNIC_TEST_HOSTILE:-0}" = 1 ] && return 0
    for r in SENDER ADDRESS AUTH CHECKSUM TAG; do
        n=$(stat_sum "$1" "drop_$r")
        if [ "$n" != 0 ]; then
            MT_WHY="$n of the job's own datagrams refused as drop_$r"
            return 1
        fi
    done
    return 0
}

# pingpong_size_sum MAX: sum of the message sizes pingpong.c uses up to MAX
# (0, 1, 2^k-1, 2^k, 2^k+1 for k = 1..24), each counted once.
pingpong_size_sum() {
    local max=$1 sum=1 last=1 k p c
    for ((k = 1; k <= 24; k++)); do
        p=$((1 << k))
        for c in $((p - 1)) $p $((p + 1)); do
            if [ "$c" -gt "$last" ] && [ "$c" -le "$max" ]; then
                sum=$((sum + c))
                last=$c
            fi
        done
    done
    echo $sum
}
