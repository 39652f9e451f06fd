#!/bin/bash
# Hostile datagrams: while a data-checked 2-rank job (hostile_job.c) runs
# over "btl usnic,self" on lo, an attacker on the same host (hostile.c, run
# as root) throws thousands of datagrams per scenario at the job's four
# usnic ports (priority and data channel of each rank): random bytes,
# truncations, every header field out of range, wrong and unknown keys,
# foreign-job senders, spoofed sources (raw socket), forged sequence
# numbers, ACKs, SACKs, PUTs and chunks under keys read from the job's
# traffic, replays of genuine packets (see hostile.c for the list).
#
# Four configurations, one job each:
#   auth header     (the default)          every scenario, blind and on-path;
#                                          kernel backend: 65507-byte PUT
#                                          chunks received in place
#   auth full + checksum 1                 every scenario
#   auth none                              the blind scenarios only, from an
#                                          attacker that reads nothing (-b);
#                                          on-path attacks succeed against
#                                          auth none by design (README.txt,
#                                          threat model) and are not run
#   auth header, 1472-byte datagrams       the blind scenarios, kernel
#                                          backend only: chunks taken on the
#                                          predicted path (rx_predicted > 0),
#                                          none received in place
#   auth header, 8972-byte datagrams       the same: PUT chunks received
#                                          straight into their targets
#                                          (direct receive), at least one
# Checks, per configuration:
#   - the job exits 0 with "OK hostile_job rounds=N": every byte of every
#     message arrived intact; usnic carried at least the job's BYTES
#   - the attacker ran every scenario, n datagrams to every port
#   - no stall: a progress line every second, each with new messages, and
#     during the attack at least STALL_FRAC of the byte rate before it
#   - every hostile datagram counted, per rank: the drop_* counters (all
#     but drop_DUPLICATE, which genuine resends also move, and the second
#     count of held datagrams: - unparked) + rx_copies + ack_copies +
#     kernel_drops >= the datagrams the attacker sent to the rank's ports
#   - the reasons: for every reason the attacker predicted for N datagrams,
#     N - kernel_drops <= drop_REASON (SENDER: + drop_PENDING - unparked;
#     COPY: rx_copies + ack_copies); the reasons genuine traffic never
#     produces are also bounded above (nothing else was counted as them)
#   - nothing taken as news: a rank accepted no more ACK packets (acks_rx)
#     than its peer sent (acks_tx + pings_tx), and took no more duplicates
#     for the peer's resends (dup_rx - rx_copies) than the peer resent
#     (retrans)
#   - stats consistent: bad_pkts = the drops it covers; at most
#     USNIC_PARK_MAX (64) datagrams held for a modex lookup (one lookup of
#     the peer, never repeated)
#
# Needs root (raw and packet sockets).  Overrides: HOSTILE_N (datagrams per
# port per scenario, 1500), HOSTILE_RATE (datagrams/s, 25000), HOSTILE_SEED,
# STALL_FRAC (0.25).  Each mpirun is limited to TEST_TIMEOUT seconds (120).
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

hn=${HOSTILE_N:-1500}
hrate=${HOSTILE_RATE:-25000}
stall_frac=${STALL_FRAC:-0.25}
warmup=4 # progress lines (seconds) before the attack starts
park_max=64

if ! usnic_mode; then
    fail "hostile" "runs over usnic only (USNIC_TEST_BTL=tcp is not supported here)"
    finish
fi
if [ "$(id -u)" -ne 0 ]; then
    fail "hostile" "must run as root (the attacker uses raw and packet sockets)"
    finish
fi
build_prog hostile_job || finish
job=$BIN
# the attacker writes the wire format itself: its idea of the valid version
# must be the component's, or its predictions are off by whole scenarios
want_ver=$(sed -n 's/^#define USNIC_PROTO_VERSION \([0-9]*\).*/\1/p' "$MT_SRC/../../btl_usnic_proto.h")
have_ver=$(sed -n 's/^#define VERSION \([0-9]*\).*/\1/p' "$MT_SRC/hostile.c")
if [ -z "$want_ver" ] || [ "$want_ver" != "$have_ver" ]; then
    fail "hostile speaks the component's protocol" \
        "hostile.c VERSION '$have_ver', btl_usnic_proto.h USNIC_PROTO_VERSION '$want_ver': update hostile.c"
    finish
fi
pass "hostile speaks the component's protocol (version $want_ver)"
attacker=$TEST_TMP/bin/hostile
if ! out=$(gcc -O2 -Wall -Wextra -o "$attacker.$$" "$MT_SRC/hostile.c" 2>&1); then
    fail "build hostile" "gcc failed"
    printf '    %s\n' "$out"
    rm -f "$attacker.$$"
    finish
fi
[ -n "$out" ] && printf '    build hostile: %s\n' "$out"
mv -f "$attacker.$$" "$attacker"

JOB_PID=
ATT_PID=
# shellcheck disable=SC2317 # invoked by the traps
cleanup() {
    [ -n "$ATT_PID" ] && kill "$ATT_PID" 2>/dev/null
    # the timeout wrapper passes the signal on to mpirun, which ends its ranks
    [ -n "$JOB_PID" ] && kill "$JOB_PID" 2>/dev/null
    [ -n "$JOB_PID" ] && wait "$JOB_PID" 2>/dev/null
    JOB_PID=
    ATT_PID=
}
trap cleanup EXIT
trap 'cleanup; exit 1' INT TERM

# softnet_drops: packets the kernel dropped before any socket (backlog full)
softnet_drops() {
    local sum=0 dropped rest
    while read -r _ dropped rest; do
        sum=$((sum + 16#$dropped))
    done < /proc/net/softnet_stat
    echo "$sum"
}

# counted LOG RANK: what the rank's stats account for, one datagram each:
# drops but DUPLICATE (genuine resends move it too; a replayed data packet
# is in rx_copies as well) and INJECTED, minus held datagrams counted again
# on release (unparked), plus copies and kernel drops
counted() {
    awk -v r="$2" '
        /\[usnic stats\]/ && (" " $0 " ") ~ (" rank=" r " ") {
            for (i = 1; i <= NF; i++) {
                eq = index($i, "=")
                k = substr($i, 1, eq - 1); v = substr($i, eq + 1) + 0
                if (k ~ /^drop_/ && k != "drop_DUPLICATE" && k != "drop_INJECTED") n += v
                else if (k == "unparked") n -= v
                else if (k == "rx_copies" || k == "ack_copies" || k == "kernel_drops") n += v
            }
        }
        END { printf "%.0f\n", n }' "$1"
}

# expect_sum ALOG PORT_A PORT_B REASON: the attacker's prediction for a rank
expect_sum() {
    awk -v a="$2" -v b="$3" -v why="$4" '
        $1 == "EXPECT" && ($2 == a || $2 == b) && $3 == why { n += $4 }
        END { printf "%.0f\n", n }' "$1"
}

sent_sum() {
    awk -v a="$2" -v b="$3" '$1 == "SENT" && ($2 == a || $2 == b) { n += $3 }
        END { printf "%.0f\n", n }' "$1"
}

# progress_lines FILE: number of PROGRESS lines so far
progress_lines() {
    local n
    n=$(grep -c '^PROGRESS ' "$1" 2>/dev/null)
    echo "${n:-0}"
}

# stall_check NAME PROGFILE ATT_FIRST ATT_LAST: a line every second (none
# more than 1.5 s after the one before), each with new messages; over
# seconds ATT_FIRST..ATT_LAST (line numbers) the job kept at least
# stall_frac of the median byte rate of seconds 2..warmup (the slowest
# second is shown: on this shared machine one second may dip for reasons
# of its own)
stall_check() {
    local name=$1 why
    why=$(awk -v a="$3" -v b="$4" -v w="$warmup" -v frac="$stall_frac" '
        /^PROGRESS / {
            n++
            for (i = 2; i <= NF; i++) {
                split($i, kv, "=")
                f[kv[1]] = kv[2] + 0
            }
            t[n] = f["t"]; m[n] = f["msgs"]; by[n] = f["bytes"]
        }
        END {
            if (n < b + 1) { printf "only %d progress lines (attack ended at line %d)", n, b; exit }
            for (i = 1; i <= n; i++) {
                if (t[i] - t[i - 1] > 1.5) err = err sprintf("; %.2f s between progress lines %d and %d", t[i] - t[i - 1], i - 1, i)
                if (m[i] <= m[i - 1]) err = err sprintf("; no message completed in second %d", i)
                d[i] = by[i] - by[i - 1]
            }
            k = 0
            for (i = 2; i <= w; i++) base[++k] = d[i]
            for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (base[j] < base[i]) { x = base[i]; base[i] = base[j]; base[j] = x }
            med = base[int((k + 1) / 2)]
            min = -1
            for (i = a; i <= b; i++) if (min < 0 || d[i] < min) min = d[i]
            avg = (by[b] - by[a - 1]) / (t[b] - t[a - 1])
            if (avg < frac * med)
                err = err sprintf("; %.0f B/s during the attack, below %.2f of the %.0f B/s before it", avg, frac, med)
            if (err != "") print substr(err, 3)
            else printf "ok: %d seconds; before the attack %.0f MB/s (median), during it %.0f MB/s (%.0f%%, slowest second %.0f MB/s)", n, med / 1e6, avg / 1e6, 100 * avg / med, min / 1e6
        }' "$2")
    case $why in
    ok:*) pass "$name: no stall (${why#ok: })" ;;
    *) fail "$name: no stall" "$why" "$2" ;;
    esac
}

# hostile_run NAME "ATTACKER ARGS" [MCA ARGS...]
hostile_run() {
    local name=$1 aargs=$2 dir prog stopfile alog rc arc r t start ports0 ports1 prio
    local pre_lines post_lines sn0 sn1 lost
    shift 2
    MT_RUNS=$((MT_RUNS + 1))
    MT_PROG=hostile_job
    RUN_LOG=$TEST_TMP/logs/$MT_NAME.$$.$MT_RUNS.hostile_job.log
    dir=$RUN_LOG.d
    stopfile=$RUN_LOG.stop
    alog=$TEST_TMP/logs/$MT_NAME.$$.$MT_RUNS.hostile.log
    rm -rf "$dir" "$stopfile"
    local -a cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none
                  -np 2 --mca pml ob1 --mca oob_tcp_if_include lo
                  --output-filename "$dir:nocopy"
                  --mca btl "usnic,self" --mca btl_usnic_if_include lo
                  --mca btl_usnic_print_stats 1 --mca btl_base_verbose 5
                  "$@" "$job" -t $((TEST_TIMEOUT - 20)) -f "$stopfile")
    echo "# ${cmd[*]}" > "$RUN_LOG"
    echo "    $name: starting the job"
    start=$SECONDS
    timeout -k 20 "$TEST_TIMEOUT" "${cmd[@]}" >> "$RUN_LOG" 2>&1 < /dev/null &
    JOB_PID=$!

    # the ports (from btl_base_verbose 5), then warmup seconds of exchange
    ports0="" ports1="" prog=""
    for ((t = 0; t < 300; t++)); do
        kill -0 "$JOB_PID" 2>/dev/null || break
        ports0=$(cat "$dir"/*/rank.0/stderr 2>/dev/null | grep -v 'sends from' |
            grep -o 'device lo .*ports [0-9]*/[0-9]*' | head -n 1 | sed 's/.*ports //; s|/|,|')
        ports1=$(cat "$dir"/*/rank.1/stderr 2>/dev/null | grep -v 'sends from' |
            grep -o 'device lo .*ports [0-9]*/[0-9]*' | head -n 1 | sed 's/.*ports //; s|/|,|')
        prog=$(echo "$dir"/*/rank.0/stdout)
        if [ -n "$ports0" ] && [ -n "$ports1" ] && [ -f "$prog" ] &&
            [ "$(progress_lines "$prog")" -ge "$warmup" ]; then
            break
        fi
        sleep 0.1
    done
    prio=$(cat "$dir"/*/rank.0/stderr 2>/dev/null | grep -o '(priority [0-9]*)' | head -n 1 | tr -dc 0-9)
    if [ -z "$ports0" ] || [ -z "$ports1" ] || [ ! -f "$prog" ] ||
        [ "$(progress_lines "$prog")" -lt "$warmup" ]; then
        touch "$stopfile"
        wait "$JOB_PID"
        rc=$?
        JOB_PID=
        run_log_finish 2 "$rc" "$start" -f "$stopfile"
        fail "$name" "the job did not start exchanging (ports '${ports0}' '${ports1}', rc=$rc)" "$RUN_LOG"
        return 1
    fi
    p0=${ports0%,*} d0=${ports0#*,} p1=${ports1%,*} d1=${ports1#*,}
    # the ports each rank sends from (kernel backend: ports of their own)
    from0=$(cat "$dir"/*/rank.0/stderr 2>/dev/null | grep -o 'device lo sends from ports [0-9]*/[0-9]*' |
        head -n 1 | sed 's/.*ports //; s|/|,|')
    from1=$(cat "$dir"/*/rank.1/stderr 2>/dev/null | grep -o 'device lo sends from ports [0-9]*/[0-9]*' |
        head -n 1 | sed 's/.*ports //; s|/|,|')
    from0=${from0:-$ports0} from1=${from1:-$ports1}
    echo "    $name: rank 0 ports $p0/$d0 (sending from ${from0/,//}), rank 1 ports $p1/$d1 (sending from ${from1/,//}) (priority/data), priority buffer ${prio:-?} bytes"

    # the attack
    pre_lines=$(progress_lines "$prog")
    sn0=$(softnet_drops)
    # shellcheck disable=SC2086 # aargs is meant to be word-split
    timeout -k 5 150 "$attacker" -p "$p0,$d0,$p1,$d1" -S "$from0,$from1" -n "$hn" -r "$hrate" -m "${prio:-568}" \
        ${HOSTILE_SEED:+-s "$HOSTILE_SEED"} $aargs > "$alog" 2>&1 &
    ATT_PID=$!
    wait "$ATT_PID"
    arc=$?
    ATT_PID=
    sn1=$(softnet_drops)
    post_lines=$(progress_lines "$prog")
    # two more seconds of exchange after it
    for ((t = 0; t < 100; t++)); do
        [ "$(progress_lines "$prog")" -ge $((post_lines + 3)) ] && break
        kill -0 "$JOB_PID" 2>/dev/null || break
        sleep 0.1
    done
    cp "$prog" "$RUN_LOG.progress" 2>/dev/null
    touch "$stopfile"
    wait "$JOB_PID"
    rc=$?
    JOB_PID=
    run_log_finish 2 "$rc" "$start" -f "$stopfile"
    rm -f "$stopfile"
    sed -n '/^SCENARIO /p; /^hostile: done/p; /skipped/p; /WARNING/p' "$alog" | sed 's/^/    /'

    # ---- the job ----
    if [ "$rc" -eq 124 ]; then
        fail "$name: job" "timed out after ${TEST_TIMEOUT}s" "$RUN_LOG"
    elif [ "$rc" -ne 0 ]; then
        fail "$name: job" "mpirun exit status $rc" "$RUN_LOG"
    elif ! grep -Eq '^OK hostile_job rounds=[1-9][0-9]*$' "$RUN_LOG"; then
        fail "$name: job" "no 'OK hostile_job rounds=N' line" "$RUN_LOG"
    else
        pass "$name: job exit 0, data intact ($(grep -E '^OK hostile_job' "$RUN_LOG" | cut -d' ' -f3))"
    fi
    if assert_usnic_carried "$RUN_LOG" "$(program_bytes "$RUN_LOG")" 2; then
        pass "$name: $MT_WHY"
    else
        fail "$name: usnic carried the job" "$MT_WHY" "$RUN_LOG"
    fi

    # ---- the attacker ----
    local nscen short
    nscen=$(grep -c '^SCENARIO ' "$alog")
    short=
    if [ "$arc" -ne 0 ] || [ "$nscen" -eq 0 ] || [ "$(grep -c '^SENT ' "$alog")" -ne 4 ]; then
        fail "$name: attacker" "exit status $arc, $nscen scenarios" "$alog"
    else
        for pt in "$p0" "$d0" "$p1" "$d1"; do
            awk -v p="$pt" -v want=$((nscen * hn)) '$1 == "SENT" && $2 == p && $3 != want { bad = 1 }
                END { exit bad }' "$alog" || short="$short $pt"
        done
        if [ -n "$short" ]; then
            fail "$name: attacker" "not every scenario sent $hn datagrams to ports$short" "$alog"
        else
            pass "$name: attacker sent $hn datagrams to each of the 4 ports in each of $nscen scenarios ($((4 * nscen * hn)) in all)"
        fi
    fi
    lost=$((sn1 - sn0))
    [ "$lost" -gt 0 ] && echo "    $name: note: the kernel dropped $lost packets before any socket during the attack (softnet backlog)"

    # ---- no stall ----
    stall_check "$name" "$RUN_LOG.progress" $((pre_lines + 1)) $((post_lines + 1))

    # ---- every datagram counted, and why ----
    local pp pd sent got kd why exp cnt hi bad line lbl
    for r in 0 1; do
        if [ "$r" -eq 0 ]; then pp=$p0 pd=$d0; else pp=$p1 pd=$d1; fi
        line=$(grep '\[usnic stats\]' "$RUN_LOG" | grep " rank=$r " | head -n 1)
        if [ -z "$line" ]; then
            fail "$name: rank $r stats" "no [usnic stats] line" "$RUN_LOG"
            continue
        fi
        echo "    $name: rank $r: ${line#*\[usnic stats\] }"
        sent=$(sent_sum "$alog" "$pp" "$pd")
        got=$(counted "$RUN_LOG" "$r")
        kd=$(rank_stat "$RUN_LOG" "$r" kernel_drops)
        # datagrams the kernel lost before any socket never reached the rank
        if [ "$got" -ge $((sent - lost)) ] && [ "$sent" -gt 0 ]; then
            pass "$name: rank $r counted every hostile datagram: $got >= $sent sent (kernel_drops=$kd)"
        else
            fail "$name: rank $r counted every hostile datagram" \
                "drops + copies + kernel drops = $got < $sent sent to ports $pp/$pd: $((sent - got)) taken for genuine" "$RUN_LOG"
        fi
        bad=
        for why in SHORT VERSION TYPE LENGTH SENDER ADDRESS CHECKSUM AUTH CHUNK_RANGE PUT_RANGE COPY; do
            exp=$(expect_sum "$alog" "$pp" "$pd" "$why")
            lbl=drop_$why
            case $why in
            SENDER) lbl="drop_SENDER+drop_PENDING-unparked"; cnt=$(($(rank_stat "$RUN_LOG" "$r" drop_SENDER) + $(rank_stat "$RUN_LOG" "$r" drop_PENDING) - $(rank_stat "$RUN_LOG" "$r" unparked))) ;;
            COPY) lbl="rx_copies+ack_copies"; cnt=$(($(rank_stat "$RUN_LOG" "$r" rx_copies) + $(rank_stat "$RUN_LOG" "$r" ack_copies))) ;;
            *) cnt=$(rank_stat "$RUN_LOG" "$r" "drop_$why") ;;
            esac
            # upper bound: random bytes end as SHORT, VERSION or TYPE; no
            # genuine datagram is ever counted as any of these (COPY: an
            # ACK sent within the microsecond of the one before may be)
            case $why in
            SHORT | VERSION | TYPE) hi=$((exp + $(expect_sum "$alog" "$pp" "$pd" ANY))) ;;
            COPY) hi= ;;
            *) hi=$exp ;;
            esac
            if [ "$cnt" -lt $((exp - kd)) ] || { [ "$exp" -gt 0 ] && [ "$cnt" -eq 0 ]; }; then
                bad="$bad; $lbl=$cnt but $exp predicted (kernel_drops=$kd)"
            elif [ -n "$hi" ] && [ "$cnt" -gt "$hi" ]; then
                bad="$bad; $lbl=$cnt, more than the $hi hostile datagrams that could cause it"
            fi
            [ "$why" = COPY ] && why="COPY (rx_copies+ack_copies)"
            [ "$why" = SENDER ] && why="SENDER (+PENDING-unparked)"
            [ "$exp" -gt 0 ] && printf '      rank %d %-28s predicted %6d counted %6d\n' "$r" "$why" "$exp" "$cnt"
        done
        if [ -z "$bad" ]; then
            pass "$name: rank $r drop reasons as predicted"
        else
            fail "$name: rank $r drop reasons" "${bad#; }" "$alog"
        fi
        # Nothing hostile was taken as news: the rank accepted no more ACK
        # packets than its peer sent (explicit ACKs and pings; genuine
        # ones lost in a full socket buffer only make it fewer), and took
        # no more duplicates for resends (dup_rx - rx_copies) than its peer
        # resent (retrans)
        local q acks_in acks_out dups resends
        q=$((1 - r))
        acks_in=$(rank_stat "$RUN_LOG" "$r" acks_rx)
        acks_out=$(($(rank_stat "$RUN_LOG" "$q" acks_tx) + $(rank_stat "$RUN_LOG" "$q" pings_tx)))
        dups=$(($(rank_stat "$RUN_LOG" "$r" dup_rx) - $(rank_stat "$RUN_LOG" "$r" rx_copies)))
        resends=$(rank_stat "$RUN_LOG" "$q" retrans)
        if [ "$acks_in" -le "$acks_out" ] && [ "$dups" -le "$resends" ]; then
            pass "$name: rank $r took no hostile datagram as news (ACK packets accepted $acks_in <= $acks_out sent by rank $q; duplicates taken as resends $dups <= $resends resent)"
        else
            fail "$name: rank $r took no hostile datagram as news" \
                "accepted $acks_in ACK packets, rank $q sent $acks_out ($((acks_in - acks_out)) more); took $dups duplicates for resends, rank $q resent $resends" "$RUN_LOG"
        fi
        # bad_pkts covers every drop but DUPLICATE, PENDING and INJECTED
        local sumd bp parked
        sumd=$(awk -v r="$r" '/\[usnic stats\]/ && (" " $0 " ") ~ (" rank=" r " ") {
                for (i = 1; i <= NF; i++) if ($i ~ /^drop_/ && $i !~ /^drop_(DUPLICATE|PENDING|INJECTED)=/) {
                    split($i, kv, "="); n += kv[2] } } END { printf "%.0f\n", n }' "$RUN_LOG")
        bp=$(rank_stat "$RUN_LOG" "$r" bad_pkts)
        parked=$(rank_stat "$RUN_LOG" "$r" parked)
        if [ "$bp" -eq "$sumd" ] && [ "$parked" -le "$park_max" ]; then
            pass "$name: rank $r stats consistent (bad_pkts=$bp, parked=$parked <= $park_max)"
        else
            fail "$name: rank $r stats consistent" "bad_pkts=$bp, drops it covers=$sumd, parked=$parked (max $park_max)" "$RUN_LOG"
        fi
    done
    echo "    $name: $((SECONDS - start))s; logs $RUN_LOG, $alog"
}

hostile_run "hostile auth=header" "all"
# (on lo the kernel backend's 65507-byte datagrams are received in place
# too: the attack lands among them)
[ "$(usnic_backend)" = kernel ] && assert_direct_receive "hostile auth=header"
hostile_run "hostile auth=full checksum=1" "-a full all" --mca btl_usnic_auth full --mca btl_usnic_checksum 1
hostile_run "hostile auth=none (blind)" "-b blind" --mca btl_usnic_auth none
# The kernel backend with 1472-byte datagrams: the job's chunks arrive in
# trains and take the predicted path, through the receive buffers (PUTs'
# too: direct receive is for chunks of 4 KiB and more), while the
# attacker's datagrams land among them; with 8972-byte datagrams its PUTs
# are received straight into their targets (direct receive) under the
# same attack.  Blind scenarios only: on lo the on-path attacker would
# capture whole UDP_SEGMENT trains (one 64 KB packet each) and replay them
# as single datagrams, which the receiver rightly drops for their length,
# not for the reasons hostile.c predicts for captured datagrams.
if [ "$(usnic_backend)" = kernel ]; then
    name="hostile auth=header, 1472-byte datagrams"
    hostile_run "$name" "-b blind" --mca btl_usnic_udp_datagram_size -1
    # most chunks on the predicted path (btl_usnic_rx_predict), the
    # attack's datagrams among them: the drop reasons above are the full
    # path's, counted as predicted
    pred=$(stat_sum "$RUN_LOG" rx_predicted)
    if [ "${pred:-0}" -gt 0 ]; then
        pass "$name: $pred chunks taken on the predicted path under attack"
    else
        fail "$name: predicted path" "rx_predicted=${pred:-missing}" "$RUN_LOG"
    fi
    each_rank "$name: chunks through the receive buffers" rx_direct -eq 0
    name="hostile auth=header, 8972-byte datagrams (direct receive)"
    hostile_run "$name" "-b blind" --mca btl_usnic_udp_datagram_size 8972
    assert_direct_receive "$name"
fi
finish
