#!/bin/bash
# The BTL over libfabric's usnic provider, as test/prov's conformance double
# (libusnic-fi.so from FI_PROVIDER_PATH, btl_usnic_providers usnic) enforces
# its contract: FI_MR_LOCAL (a post with an unregistered buffer or without
# its descriptor aborts the job: USNIC_TD_STRICT=abort), FI_MSG_PREFIX,
# max_msg_size with the prefix, queue sizes.
#
#   pingpong (every size to 4 MiB, data checked), datatypes, collectives
#   (4 ranks), threads, packet loss (drop 5%): each must pass, and show
#   that the usnic path ran: "using provider usnic" in the verbose output,
#   mr_regs > 0 in the stats, and in the double's log for every domain
#   registrations > 0 (as many as the BTL's mr_regs for that process and
#   device: one per pool chunk), all deregistered, prefix_ops > 0,
#   violations=0, none left open;
#   CQ errors injected (cqerr): the message, cq_errors > 0, data intact;
#   two VFs, link of usnic_1 down mid-job: the job completes over usnic_0
#   (detours > 0) with the link-down message;
#   two VFs, link of usnic_1 down mid-job and up again: the job completes,
#   and after the up usnic_1 carries its own traffic directly again (its
#   tx_pkts grow, its detours do not, by the counters in the "link up"
#   line and the final stats);
#   one VF, its link down mid-job: the peer is reported unreachable after
#   btl_usnic_peer_timeout (2 s), the job fails, no hang;
#   one VF, its link down for 1 s and up again (peer_timeout 5): the job
#   completes, nobody is given up;
#   too few VFs / queue pairs: the resource message naming what to raise.
#
# Kernel pass only: it sets the provider itself, so test/run-all.sh's udp
# pass (OMPI_MCA_btl_usnic_providers=udp) skips it.
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

if [ -n "${OMPI_MCA_btl_usnic_providers:-}" ]; then
    echo "# t_usnic_prov: runs in the kernel pass only (it picks the provider itself)"
    exit 0
fi

TD=$TEST_TMP/td-usnic
if ! out=$("$MT_SRC/../prov/build.sh" "$TD" 2>&1); then
    fail "build usnic test double" "test/prov/build.sh failed"
    printf '    %s\n' "$out"
    finish
fi
export FI_PROVIDER_PATH=$TD USNIC_TD_STRICT=abort
unset USNIC_TD_VFS USNIC_TD_NUM_VF USNIC_TD_QP_PER_VF USNIC_TD_CQ_PER_VF USNIC_TD_CONTROL
PROV_MCA="--mca btl_usnic_providers usnic --mca btl_base_verbose 5"
CTL=$TEST_TMP/logs/$MT_NAME.$$.ctl
TDLOG=

# td_run NP PROG ARGS...: run_mpi over the double with a fresh double log (TDLOG)
td_run() {
    TDLOG=$TEST_TMP/logs/$MT_NAME.$$.$((MT_RUNS + 1)).td
    rm -f "$TDLOG"
    USNIC_TD_LOG=$TDLOG EXTRA_MCA="$PROV_MCA ${MCA:-}" run_mpi "$@"
}

# td_assert NAME: the last run went through the usnic provider by its rules
td_assert() {
    local name=$1 regs why=
    grep -q "using provider usnic device" "$RUN_LOG" || why="; no 'using provider usnic' line"
    regs=$(stat_sum "$RUN_LOG" mr_regs)
    [ "$regs" -gt 0 ] || why="$why; mr_regs sum is $regs"
    grep -q "USNIC-TD VIOLATION" "$RUN_LOG" && why="$why; the double reported a violation"
    if [ ! -s "$TDLOG" ]; then
        why="$why; no double log $TDLOG"
    else
        why=$why$(awk '/ domain=/ {
                n++
                for (i = 1; i <= NF; i++) {
                    split($i, kv, "=")
                    v[kv[1]] = kv[2]
                }
                if (v["registrations"] + 0 <= 0) e = e "; " $2 " " $3 " registered nothing"
                if (v["prefix_ops"] + 0 <= 0) e = e "; " $2 " " $3 " no prefix ops"
                if (v["violations"] != "0") e = e "; " $2 " " $3 " violations=" v["violations"]
            }
            /still open/ { e = e "; " $0 }
            END { if (n == 0) e = e "; no domain counters"; printf "%s", e }' "$TDLOG")
        # the pools: one registration per chunk (the BTL's mr_regs, per
        # process and device, equals what the double counted), and every
        # one of them closed by the time the domain was
        why=$why$(awk '
            FNR == NR && / domain=/ {
                p = $2; sub(/:$/, "", p); sub(/^pid=/, "", p)
                d = $3; sub(/:$/, "", d); sub(/^domain=/, "", d)
                for (i = 4; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                td[p " " d] = v["registrations"]
                if (v["registrations"] != v["deregistrations"])
                    e = e "; pid " p " " d ": " v["registrations"] " registrations, " \
                        v["deregistrations"] " deregistrations"
                next
            }
            FNR != NR && /\[usnic stats\]/ {
                p = ""; d = ""; r = ""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^pid=/) p = substr($i, 5)
                    if ($i ~ /^dev=/) d = substr($i, 5)
                    if ($i ~ /^mr_regs=/) r = substr($i, 9)
                }
                if ((p " " d) in td && td[p " " d] != r)
                    e = e "; pid " p " " d ": mr_regs=" r ", the double counted " td[p " " d]
                seen++
            }
            END { if (seen == 0) e = e "; no stats lines to compare"; printf "%s", e }' \
            "$TDLOG" "$RUN_LOG")
    fi
    if [ -n "$why" ]; then
        fail "$name (usnic contract)" "${why#; }" "$RUN_LOG"
        return 1
    fi
    echo "    $name: provider usnic, mr_regs=$regs," \
        "$(grep -c ' domain=' "$TDLOG") domains closed with registrations, prefix, 0 violations"
    pass "$name (usnic contract)"
}

# ctl_later SECONDS LINE: append LINE to the control file after SECONDS (the
# double applies only lines that appear after it first read the file)
ctl_later() {
    (sleep "$1" && echo "$2" >> "$CTL") &
}

# ctl_when PROG PATTERN LINE [PATTERN LINE...]: in the background, append
# each LINE to the control file once rank 0 of the next run (of PROG) has
# printed its PATTERN, in order (at most 60 s each): events at a point of
# the job, whatever its start-up took on a loaded machine
ctl_when() {
    local out=$TEST_TMP/logs/$MT_NAME.$$.$((MT_RUNS + 1)).$1.log.d
    shift
    (
        while [ $# -ge 2 ]; do
            for ((i = 0; i < 1200; i++)); do
                grep -qs -- "$1" "$out"/*/rank.0/stdout && break
                sleep 0.05
            done
            echo "$2" >> "$CTL"
            shift 2
        done
    ) &
}

# ---- the MPI tests over the double ------------------------------------------
export USNIC_TEST_DEV=usnic_0

build_prog pingpong || finish
PP=$BIN
td_run 2 "$PP" -m 4194304 -i 0.3
check_run "usnic-prov pingpong" $? 2 $((4 * $(pingpong_size_sum 4194304))) &&
    td_assert "usnic-prov pingpong"

build_prog datatypes || finish
td_run 2 "$BIN"
check_run "usnic-prov datatypes" $? 2 $((2 * 10 * 1000 * 1000)) &&
    td_assert "usnic-prov datatypes"

build_prog collectives || finish
td_run 4 "$BIN"
check_run "usnic-prov collectives" $? 4 $((4 * 3 * 4 * 1024 * 1024)) &&
    td_assert "usnic-prov collectives"

build_prog threads -pthread || finish
td_run 2 "$BIN"
check_run "usnic-prov threads" $? 2 && td_assert "usnic-prov threads"

MCA="--mca btl_usnic_debug_seed 4242 --mca btl_usnic_debug_drop_rate 0.05" \
    td_run 2 "$PP" -m 1048576 -i 0.5
if check_run "usnic-prov faults drop=0.05" $? 2 && td_assert "usnic-prov faults drop=0.05"; then
    d=$(stat_sum "$RUN_LOG" inj_drop)
    r=$(stat_sum "$RUN_LOG" retrans)
    if [ "$d" -gt 0 ] && [ "$r" -gt 0 ]; then
        pass "usnic-prov faults recovery (inj_drop=$d retrans=$r)"
    else
        fail "usnic-prov faults recovery" "inj_drop=$d retrans=$r, both must be > 0" "$RUN_LOG"
    fi
fi

# ---- completion errors --------------------------------------------------------
: > "$CTL"
# at a point of the job, not a second after its start: on a fast machine
# the whole ping-pong can end before then (cq_errors 0 in CI once)
ctl_when pingpong "^dir 0 size  *65537 " "cqerr usnic_0 4 send crc"
USNIC_TD_CONTROL=$CTL td_run 2 "$PP" -v -m 4194304 -i 0.2
wait
if check_run "usnic-prov cqerr" $? 2 && td_assert "usnic-prov cqerr"; then
    n=$(stat_sum "$RUN_LOG" cq_errors)
    if [ "$n" -le 0 ]; then
        fail "usnic-prov cqerr reported" "cq_errors sum is $n" "$RUN_LOG"
    elif ! grep -q "^ *Provider: *CRC error" "$RUN_LOG"; then
        fail "usnic-prov cqerr reported" "no decoded completion-error message" "$RUN_LOG"
    elif [ "$(grep -c "A libfabric completion of the usnic BTL reported an error" "$RUN_LOG")" -ne 2 ]; then
        # both ranks got errors: each tells once, and neither message may
        # be lost (they go to the process's stderr, not through mpirun's
        # help relay, which drops or crashes on messages sent at once)
        fail "usnic-prov cqerr reported" "want the message once from each of the 2 ranks" "$RUN_LOG"
    else
        pass "usnic-prov cqerr reported (cq_errors=$n, decoded, once per rank)"
    fi
fi

# ---- link down ------------------------------------------------------------------
# link_down_told DEV ADDR MIN: the last run told the user that DEV's link
# went down, by its help message from at least MIN ranks (a message goes to
# the process's stderr, not through mpirun's help relay, so none is lost).
link_down_told() {
    [ "$(grep -c "device $1 (interface lo, address $2) went" "$RUN_LOG")" -ge "$3" ]
}

# two VFs on different networks: each rank's usnic_0 pairs with the other's
# usnic_0, usnic_1 with usnic_1; the link of usnic_1 goes down mid-job
: > "$CTL"
TWO_VFS=usnic_0=127.0.0.1/16:lo:1500,usnic_1=127.1.0.1/16:lo:1500
ctl_when pingpong "^dir 0 size  *65537 " "link usnic_1 down"
USNIC_TD_VFS=$TWO_VFS USNIC_TD_CONTROL=$CTL \
    USNIC_TEST_IF=127.0.0.0/8 td_run 2 "$PP" -v -m 4194304 -i 0.3
rc=$?
wait
n=$(stat_sum "$RUN_LOG" detours)
if [ "$rc" -ne 0 ] || ! grep -q "^OK pingpong$" "$RUN_LOG"; then
    fail "usnic-prov link down, 2 VFs" "mpirun rc=$rc, no 'OK pingpong'" "$RUN_LOG"
elif [ "$(grep -c 'dev=usnic_1' "$RUN_LOG")" -lt 2 ]; then
    fail "usnic-prov link down, 2 VFs" "usnic_1 was not used by both ranks" "$RUN_LOG"
elif ! link_down_told usnic_1 127.1.0.1 2; then
    fail "usnic-prov link down, 2 VFs" "no link-down message naming usnic_1" "$RUN_LOG"
elif [ "$n" -le 0 ]; then
    fail "usnic-prov link down, 2 VFs" "detours sum is $n" "$RUN_LOG"
else
    pass "usnic-prov link down, 2 VFs: data checked, completed over usnic_0 (detours=$n)"
fi

# the same, and the link comes back at the first direction's 1 MiB (its
# larger sizes and the whole second direction follow, seconds of traffic
# even when rank 0's output reaches ctl_when late on a loaded machine, as
# it did once when the up waited for the second direction): from then on
# usnic_1's stream must go directly again.  Each rank's "link up"
# line has its usnic_1 counters at that moment; its final stats line the
# totals: after the up, direct = tx_pkts growth - detours growth must be
# real traffic, and detours must (nearly) stop: a few may go while the
# peer's own up is a moment later.
: > "$CTL"
ctl_when pingpong "^dir 0 size  *65537 " "link usnic_1 down" \
    "^dir 0 size  *1048576 " "link usnic_1 up"
USNIC_TD_VFS=$TWO_VFS USNIC_TD_CONTROL=$CTL \
    USNIC_TEST_IF=127.0.0.0/8 td_run 2 "$PP" -v -m 4194304 -i 0.3
rc=$?
wait
if [ "$rc" -ne 0 ] || ! grep -q "^OK pingpong$" "$RUN_LOG"; then
    fail "usnic-prov link up again, 2 VFs" "mpirun rc=$rc, no 'OK pingpong'" "$RUN_LOG"
else
    why=$(awk '
        /usnic_1 .*link up again, traffic resumes/ {
            if (match($0, /\[[^]:]*:[0-9]+\]/)) {
                p = substr($0, RSTART, RLENGTH); sub(/.*:/, "", p); sub(/\]/, "", p)
                p = p + 0 # opal_output pads pids to 5 digits ("[vm:06025]"), stats do not
                match($0, /tx_pkts=[0-9]+/); tx0[p] = substr($0, RSTART + 8, RLENGTH - 8)
                match($0, /detours=[0-9]+/); d0[p] = substr($0, RSTART + 8, RLENGTH - 8)
                up++
            }
        }
        /\[usnic stats\].* dev=usnic_1 / {
            match($0, / pid=[0-9]+/); p = substr($0, RSTART + 5, RLENGTH - 5) + 0
            match($0, / tx_pkts=[0-9]+/); tx1[p] = substr($0, RSTART + 9, RLENGTH - 9)
            match($0, / detours=[0-9]+/); d1[p] = substr($0, RSTART + 9, RLENGTH - 9)
        }
        END {
            if (up < 2) { printf "%d ranks printed the link-up line, not 2", up; exit }
            for (p in tx0) {
                if (!(p in tx1)) { printf "pid %s: no usnic_1 stats line", p; exit }
                dd = d1[p] - d0[p]; direct = tx1[p] - tx0[p] - dd
                if (direct < 100 || dd * 10 > direct)
                    e = e sprintf("; pid %s: after the up %d direct, %d detours", p, direct, dd)
                else
                    ok = ok sprintf(", pid %s: %d direct, %d detours", p, direct, dd)
            }
            printf "%s", (e != "") ? substr(e, 3) : "OK" ok
        }' "$RUN_LOG")
    if [ "${why%%,*}" = OK ]; then
        pass "usnic-prov link up again, 2 VFs: data checked, usnic_1 direct again (${why#OK, })"
    else
        fail "usnic-prov link up again, 2 VFs" "$why" "$RUN_LOG"
    fi
fi

# the only VF: its link goes down for good; the job must end in an error
: > "$CTL"
ctl_later 1 "link usnic_0 down"
MCA="--mca btl_usnic_peer_timeout 2" USNIC_TD_CONTROL=$CTL TEST_TIMEOUT=40 \
    td_run 2 "$PP" -m 4194304 -i 4
rc=$?
wait
if [ "$rc" -eq 124 ]; then
    fail "usnic-prov link down, only VF" "hung (timeout)" "$RUN_LOG"
elif [ "$rc" -eq 0 ]; then
    fail "usnic-prov link down, only VF" "the job succeeded (the link was never down?)" "$RUN_LOG"
elif ! link_down_told usnic_0 127.0.0.1 1; then
    fail "usnic-prov link down, only VF" "no link-down message" "$RUN_LOG"
elif ! grep -q -e "link of device usnic_0 has been down" -e "usnic: peer unreachable" "$RUN_LOG"; then
    # (the peer-unreachable help message, or the error callback's text)
    fail "usnic-prov link down, only VF" "no 'peer unreachable'" "$RUN_LOG"
else
    pass "usnic-prov link down, only VF: error (rc=$rc) with the message, no hang"
fi
: > "$CTL"

# the only VF's link down for 1 s and up again, a flap well inside
# btl_usnic_peer_timeout: the BTL must wait it out (its counting starts at
# the down event), and the job completes with every byte checked
: > "$CTL"
ctl_when pingpong "^dir 0 size  *65537 " "link usnic_0 down"
(
    for ((i = 0; i < 1200; i++)); do
        grep -qs "link usnic_0 down" "$CTL" && break
        sleep 0.05
    done
    sleep 1
    echo "link usnic_0 up" >> "$CTL"
) &
MCA="--mca btl_usnic_peer_timeout 5" USNIC_TD_CONTROL=$CTL TEST_TIMEOUT=40 \
    td_run 2 "$PP" -v -m 4194304 -i 1
rc=$?
wait
if [ "$rc" -ne 0 ] || ! grep -q "^OK pingpong$" "$RUN_LOG"; then
    fail "usnic-prov link flap, only VF" "mpirun rc=$rc, no 'OK pingpong'" "$RUN_LOG"
elif ! link_down_told usnic_0 127.0.0.1 1; then
    fail "usnic-prov link flap, only VF" "no link-down message (was the link ever down?)" "$RUN_LOG"
elif grep -q -e "has been down for" -e "usnic: peer unreachable" "$RUN_LOG"; then
    fail "usnic-prov link flap, only VF" "a peer was given up" "$RUN_LOG"
else
    pass "usnic-prov link flap, only VF: 1 s down (peer_timeout 5), job completed, data checked"
fi
: > "$CTL"

# ---- too few resources --------------------------------------------------------------
build_prog trivial || finish
# expect_resources NAME ENV PATTERN: the resource message with PATTERN (mpirun
# sometimes loses a help message: up to 4 runs)
expect_resources() {
    local name=$1 env=$2 pat=$3
    for _ in 1 2 3 4; do
        export "${env?}"
        TEST_TIMEOUT=40 td_run 2 "$BIN"
        unset "${env%%=*}"
        if grep -q "the adapter offers too few resources" "$RUN_LOG" &&
            grep -q -- "$pat" "$RUN_LOG"; then
            pass "$name"
            return
        fi
        grep -q 'ORTE_ERROR_LOG.*show_help' "$RUN_LOG" || break
        echo "# $name: mpirun lost the help message; retrying"
    done
    fail "$name" "no resource message with '$pat'" "$RUN_LOG"
}
expect_resources "usnic-prov too few VFs" USNIC_TD_NUM_VF=1 \
    "1 usNIC VFs (virtual functions) on the adapter of usnic_0, but 2 processes"
expect_resources "usnic-prov too few QPs" USNIC_TD_QP_PER_VF=1 \
    "1 transmit/receive queue pairs per usNIC VF, but each process needs 2"
rm -f "$CTL"
finish
