#!/bin/bash
# Accidental corruption is caught end to end (btl_usnic_checksum: CRC32C over
# header and payload; btl_usnic_auth full: the MAC over the payload too).
#
#   a. one host (lo), 2 ranks, dtstress (every byte checked) with
#      btl_usnic_checksum 1 and btl_usnic_debug_corrupt_rate 0.02 (each
#      sender flips one bit in 2% of its datagrams after the CRC and MAC
#      were computed), auth at its default: the job succeeds with every
#      byte right, corruption was injected (inj_corrupt > 0) and caught by
#      the CRC (drop_CHECKSUM > 0, and never by the MAC: drop_AUTH == 0),
#      and, per direction, the receiver refused every corrupted datagram
#      that reached it and nothing else (the accounting is below, at
#      refusal_check)
#   b. the same with btl_usnic_checksum 0 and btl_usnic_auth full: the MAC
#      catches it (drop_AUTH > 0, drop_CHECKSUM == 0), every byte right,
#      no datagram refused that was not corrupted
#   c. two namespace hosts h1, h2 (test/lib/netns.sh), one rank each,
#      pingpong: nfq_corrupt (nfq_corrupt.c, NFQUEUE) flips one bit in the
#      UDP payload of ~1% of the UDP datagrams arriving in h2 from h1 and
#      zeroes their UDP checksum, so the kernel delivers them, like a NIC
#      that corrupts data after its own checksum check.  With
#      btl_usnic_checksum 1 every byte still arrives right and the rank in
#      h2 refused exactly the corrupted datagrams that reached it: most as
#      drop_CHECKSUM (at least all whose flipped bit lies past the headers).
#      A control run with btl_usnic_checksum 0 and btl_usnic_auth header
#      shows what happens without the CRC: reported as INFO lines, not
#      PASS/FAIL (where the bit lands decides how the job fails).
#      Without NFQUEUE (the kernel's nft "queue" expression, or iptables'
#      NFQUEUE target) the netns checks print SKIP lines.
# The single-host runs corrupt on purpose: USNIC_TEST_HOSTILE=1 lets their
# drop_CHECKSUM/drop_AUTH through assert_no_refusals (mpitest.sh).
#
# Overrides: CORRUPT_TIME (dtstress seconds per run, 6), CORRUPT_SEED
# (dtstress seed, 2000), FAULT_SEED (btl_usnic_debug_seed, 4242),
# CORRUPT_RATE (btl_usnic_debug_corrupt_rate, 0.02), CORRUPT_NFQ_RATE
# (fraction nfq_corrupt corrupts, 0.01), CORRUPT_NFQ_SEED (4242),
# CORRUPT_MAX (netns pingpong maximum size, 1 MiB), CORRUPT_ITERS (its
# pingpong -i, 0.3: about 20000 datagrams from h1 to h2).
# Each mpirun is limited to TEST_TIMEOUT seconds (default 60 here; the
# control run to 20 s, it may hang).
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"

budget=${CORRUPT_TIME:-6}
dseed=${CORRUPT_SEED:-2000}
fseed=${FAULT_SEED:-4242}
rate=${CORRUPT_RATE:-0.02}
nfq_rate=${CORRUPT_NFQ_RATE:-0.01}
nfq_seed=${CORRUPT_NFQ_SEED:-4242}
max=${CORRUPT_MAX:-1048576}
iters=${CORRUPT_ITERS:-0.3}
watch=$((TEST_TIMEOUT - ${budget%.*} - 15))
[ "$watch" -lt 10 ] && watch=10

# Refusals a corrupted datagram can get: the reasons of the receive path's
# checks 1-3 (btl_usnic_rx.h: parse, sender lookup, CRC then MAC).  Not
# PENDING (the datagram is held and checked again: its final verdict is
# counted then), nor the reasons of checks 4-6 (ACK_RANGE, DUPLICATE,
# WINDOW, TAG, REASSEMBLY, PUT_RANGE of a live PUT): only a datagram that
# passed the integrity checks gets that far.
REFUSALS="SHORT VERSION TYPE LENGTH SENDER ADDRESS CHECKSUM AUTH CHUNK_RANGE PUT_RANGE"

if ! usnic_mode; then
    fail "corrupt" "runs over usnic only (USNIC_TEST_BTL=tcp is not supported here)"
    finish
fi

# rstat LOG RANK KEY: KEY summed over RANK's [usnic stats] lines (0 if none).
rstat() {
    awk -v r="$2" -v key="$3" '
        /\[usnic stats\]/ {
            line = substr($0, index($0, "[usnic stats]")) " "
            if (index(line, " rank=" r " ") == 0) next
            n = split(line, f, " ")
            for (i = 3; i <= n; i++)
                if (index(f[i], key "=") == 1) s += substr(f[i], length(key) + 2)
        }
        END { printf "%.0f\n", s }' "$1"
}

# refused LOG RANK: RANK's refusals of the kinds in REFUSALS.
refused() {
    local r sum=0
    for r in $REFUSALS; do
        sum=$((sum + $(rstat "$1" "$2" "drop_$r")))
    done
    echo "$sum"
}

# refusal_check NAME LOG A B C EAGAIN_A SLOP: the datagrams from rank A to
# rank B, of which C were corrupted (counted where the bit was flipped),
# against B's refusals R (REFUSALS).  Prints one PASS or FAIL line.
#
# Every refusal R counts is of a corrupted datagram (the same job without
# corruption refuses nothing of the kind: assert_no_refusals), and each
# corrupted datagram is refused at most once: nothing duplicates datagrams
# here (no dup injection; neither loopback nor a veth copies packets), and
# a corrupted copy of a segment B already has is still refused for its
# corruption, not counted as a duplicate, because the integrity checks
# come before the sequence check.  So R <= C exactly.
#
# Every corrupted datagram that reaches B's receive path is refused
# (CRC32C catches every single-bit error, wherever the bit is, the crc
# field included; a flipped header bit may be caught earlier, by the parse
# or sender checks), except when the CRC is off: then a flip of the unused
# crc field goes unnoticed, and harms nothing (SLOP says how many such are
# tolerated).  Corrupted datagrams that do not reach the receive path:
#   - sends the provider refused (EAGAIN): counted in inj_corrupt, not
#     sent; at most tx_eagain of A (EAGAIN_A; 0 when C is counted on the
#     wire)
#   - datagrams sent but never read by B (a full socket buffer, arrival
#     after B closed its sockets): at most tx_pkts(A) - rx_pkts(B), as A
#     sends only to B and B receives only from A (rx_pkts counts every
#     datagram read, refused or not)
#   - datagrams held for a sender lookup (drop_PENDING) that were never
#     handed back (unparked) before the end: PENDING - unparked of B
# so R >= C - EAGAIN_A - max(0, tx(A) - rx(B)) - (PENDING(B) - unparked(B))
# (- SLOP).  On this test's loopback and veths the lost terms are 0 or
# a few datagrams at the end, so both bounds are tight.
refusal_check() {
    local name=$1 log=$2 a=$3 b=$4 c=$5 eagain=$6 slop=$7
    local r tx rx lost pend unparked held low
    r=$(refused "$log" "$b")
    tx=$(rstat "$log" "$a" tx_pkts)
    rx=$(rstat "$log" "$b" rx_pkts)
    lost=$((tx > rx ? tx - rx : 0))
    pend=$(rstat "$log" "$b" drop_PENDING)
    unparked=$(rstat "$log" "$b" unparked)
    held=$((pend > unparked ? pend - unparked : 0))
    low=$((c - eagain - lost - held - slop))
    echo "    $name: rank $a -> $b: corrupted $c, refused $r ($(refusal_detail "$log" "$b"))," \
         "not sent $eagain, unread $lost (tx $tx, rx $rx), held $held, slop $slop"
    if [ "$r" -le "$c" ] && [ "$r" -ge "$low" ]; then
        pass "$name: rank $b refused $r of $c corrupted datagrams from rank $a (>= $low)"
        return 0
    fi
    fail "$name" "rank $b refused $r datagrams of rank $a, which corrupted $c: expected $low <= refused <= $c" "$log"
    return 1
}

# refusal_detail LOG RANK: RANK's non-zero refusal counters, "KEY=N ...".
refusal_detail() {
    local r v out=
    for r in $REFUSALS PENDING; do
        v=$(rstat "$1" "$2" "drop_$r")
        [ "$v" != 0 ] && out+="$r=$v "
    done
    echo "${out% }"
}

# ---- single host: injected corruption -------------------------------------
build_prog dtstress || finish
dtstress=$BIN
pingpong=
build_prog pingpong && pingpong=$BIN

# one_host NAME SEED_OFFSET MCA_ARGS...: dtstress with corruption injected;
# the standard verdict (exit 0, "OK dtstress": every byte checked, usnic
# carried it).  Returns 1 if that failed.
one_host() {
    local name=$1 s=$((dseed + $2))
    shift 2
    echo "    $name: dtstress seed $s, btl_usnic_debug_seed $fseed"
    EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_debug_seed $fseed $*" \
        run_mpi 2 "$dtstress" -s "$s" -t "$budget" -W "$watch"
    if ! USNIC_TEST_HOSTILE=1 check_run "$name" $? 2; then
        grep -h -E 'ERROR dtstress|first wrong|reproduce:' "$RUN_LOG" | head -n 6 | sed 's/^/    /'
        return 1
    fi
    grep -h '^dtstress: seed .* iterations' "$RUN_LOG" | sed 's/^/    /'
    grep -h '\[usnic stats\]' "$RUN_LOG" | sed 's/^.*\[usnic stats\]/    [usnic stats]/'
}

# counters_check NAME LOG "KEY>0 ..." "KEY=0 ...": sums over both ranks.
counters_check() {
    local name=$1 log=$2 pos=$3 zero=$4 k v why="" vals=""
    for k in $pos; do
        v=$(stat_sum "$log" "$k")
        vals+="$k=$v "
        [ "$v" -gt 0 ] || why+="; $k is $v, expected > 0"
    done
    for k in $zero; do
        v=$(stat_sum "$log" "$k")
        vals+="$k=$v "
        [ "$v" -eq 0 ] || why+="; $k is $v, expected 0"
    done
    if [ -n "$why" ]; then
        fail "$name" "${why#; }" "$log"
        return 1
    fi
    pass "$name: ${vals% }"
}

# a. CRC on: every corrupted datagram fails the CRC (or an earlier check),
# none reaches the MAC check, so drop_AUTH stays 0.
name="corrupt checksum=1 rate=$rate"
if one_host "$name" 0 --mca btl_usnic_checksum 1 --mca btl_usnic_debug_corrupt_rate "$rate"; then
    log=$RUN_LOG
    counters_check "$name: caught by the CRC" "$log" "inj_corrupt drop_CHECKSUM" "drop_AUTH"
    for d in "0 1" "1 0"; do
        read -r a b <<< "$d"
        refusal_check "$name: every corrupted datagram refused" "$log" "$a" "$b" \
            "$(rstat "$log" "$a" inj_corrupt)" "$(rstat "$log" "$a" tx_eagain)" 0
    done
fi

# b. CRC off, MAC over the payload: the MAC catches it.  The MAC covers
# every byte but the crc field (4 of the >= 56 bytes, only hit by the 25%
# of flips that corrupt() spreads over the whole contiguous part: < 1 in
# 56), which nobody reads with the CRC off: those flips are accepted,
# harmlessly.  Binomial with mean < C/56: C/16 + 4 is far outside it.
name="corrupt checksum=0 auth=full rate=$rate"
if one_host "$name" 1 --mca btl_usnic_checksum 0 --mca btl_usnic_auth full \
        --mca btl_usnic_debug_corrupt_rate "$rate"; then
    log=$RUN_LOG
    counters_check "$name: caught by the MAC" "$log" "inj_corrupt drop_AUTH" "drop_CHECKSUM"
    for d in "0 1" "1 0"; do
        read -r a b <<< "$d"
        c=$(rstat "$log" "$a" inj_corrupt)
        refusal_check "$name: every corrupted datagram refused" "$log" "$a" "$b" \
            "$c" "$(rstat "$log" "$a" tx_eagain)" $((c / 16 + 4))
    done
fi

# ---- two namespace hosts: corruption on the wire ----------------------------
NFQ_NUM=7          # queue number (per network namespace)
NFQ_HDR=88         # nfq_corrupt -H: the longest usnic header (PUT)
NFQ_PID=
NFQ_RULE=
NFQ_WHY=
nfq=

# skip_netns REASON: the netns checks cannot run here.
skip_netns() {
    echo "SKIP: corrupt netns checksum=1: $1"
    echo "SKIP: corrupt netns checksum=0 control run: $1"
}

# build_nfq: compile nfq_corrupt.c (not an MPI program) to $TEST_TMP/bin.
build_nfq() {
    if [ ! -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ]; then
        NFQ_WHY="libnetfilter_queue headers missing (package libnetfilter-queue-dev)"
        return 2
    fi
    build_tool nfq_corrupt -lnetfilter_queue || return 1
    nfq=$BIN
}

# alive PID: the process exists and is not a zombie.
alive() {
    local st
    # (read once: the process may end between a test and a read)
    st=$(cat "/proc/$1/status" 2>/dev/null) || return 1
    ! grep -q '^State:[[:space:]]*Z' <<<"$st"
}

# queue_rule_add: queue the UDP datagrams from h1 to h2 arriving on h2's
# veth to NFQUEUE NFQ_NUM, with "bypass": they pass while nothing listens.
# The nft "queue" statement if the kernel has it (CONFIG_NFT_QUEUE), else
# iptables' NFQUEUE target (xt_NFQUEUE).  Sets NFQ_RULE, or NFQ_WHY.
queue_rule_add() {
    local h1 h2 out nft_err ipt_err
    h1=$(nsbed_addr 1)
    h2=$(nsbed_addr 2)
    if [ ! -e /proc/net/netfilter/nfnetlink_queue ]; then
        if command -v modprobe >/dev/null; then
            modprobe nfnetlink_queue 2>/dev/null
        fi
        if [ ! -e /proc/net/netfilter/nfnetlink_queue ]; then
            NFQ_WHY="the kernel has no NFQUEUE support (nfnetlink_queue)"
            return 1
        fi
    fi
    if out=$(nsbed_exec 2 nft -f - 2>&1 <<NFT
table ip usnic_corrupt {
    chain in {
        type filter hook input priority 0; policy accept;
        iifname "$NSB_DEV" ip saddr $h1 ip daddr $h2 meta l4proto udp counter queue num $NFQ_NUM bypass
    }
}
NFT
    ); then
        NFQ_RULE=nft
        return 0
    fi
    nft_err=$(tr '\n' ' ' <<< "$out" | sed 's/  */ /g')
    if ! command -v iptables >/dev/null; then
        ipt_err="no iptables command (package iptables) for the xt NFQUEUE target"
    elif out=$(nsbed_exec 2 iptables -w 5 -A INPUT -i "$NSB_DEV" -s "$h1" -d "$h2" -p udp \
                   -j NFQUEUE --queue-num "$NFQ_NUM" --queue-bypass 2>&1); then
        NFQ_RULE=iptables
        return 0
    else
        ipt_err=$out
    fi
    NFQ_WHY="no NFQUEUE rule possible: nft: ${nft_err:0:160}; iptables: $ipt_err"
    return 1
}

queue_rule_del() {
    case $NFQ_RULE in
        nft) nsbed_exec 2 nft delete table ip usnic_corrupt ;;
        iptables) nsbed_exec 2 iptables -w 5 -D INPUT -i "$NSB_DEV" -s "$(nsbed_addr 1)" \
                      -d "$(nsbed_addr 2)" -p udp -j NFQUEUE --queue-num "$NFQ_NUM" \
                      --queue-bypass ;;
    esac
    NFQ_RULE=
}

# nfq_start SEED TAG: run nfq_corrupt in h2; sets NFQ_PID, NFQ_OUT.
# Returns 1 (reason in NFQ_WHY) if it did not come up.
nfq_start() {
    local t
    NFQ_OUT=$TEST_TMP/logs/$MT_NAME.$$.nfq.$2.out
    NFQ_CNT=$TEST_TMP/logs/$MT_NAME.$$.nfq.$2.counts
    NFQ_FLIPS=$TEST_TMP/logs/$MT_NAME.$$.nfq.$2.flips
    rm -f "$NFQ_OUT" "$NFQ_CNT" "$NFQ_FLIPS"
    # not through nsbed_exec (a function: $! would be a subshell's pid):
    # ip netns exec execs the program, so $! is nfq_corrupt's own pid
    ip netns exec "$(nsbed_ns 2)" "$nfq" -q "$NFQ_NUM" -r "$nfq_rate" -s "$1" -H "$NFQ_HDR" -o "$NFQ_CNT" \
        -l "$NFQ_FLIPS" \
        > "$NFQ_OUT" 2>&1 &
    NFQ_PID=$!
    for ((t = 0; t < 50; t++)); do
        alive "$NFQ_PID" || break
        if [ -s "$NFQ_CNT" ]; then
            [ "$(cat "/proc/$NFQ_PID/comm" 2>/dev/null)" = nfq_corrupt ] && return 0
            NFQ_WHY="pid $NFQ_PID is not nfq_corrupt"
            nfq_stop
            return 1
        fi
        sleep 0.1
    done
    NFQ_WHY="nfq_corrupt did not start: $(tr '\n' ' ' < "$NFQ_OUT")"
    nfq_stop
    return 1
}

# nfq_stop: end nfq_corrupt (by its pid: SIGTERM, SIGKILL after 3 s) and
# leave its final counts line in NFQ_FINAL.
nfq_stop() {
    local t
    NFQ_FINAL=
    [ -n "$NFQ_PID" ] || return 0
    kill -TERM "$NFQ_PID" 2>/dev/null
    for ((t = 0; t < 30; t++)); do
        alive "$NFQ_PID" || break
        sleep 0.1
    done
    alive "$NFQ_PID" && kill -KILL "$NFQ_PID" 2>/dev/null
    wait "$NFQ_PID" 2>/dev/null
    NFQ_PID=
    NFQ_FINAL=$(grep -h '^nfq_corrupt: stopped: ' "$NFQ_OUT" | tail -n 1)
}

# nfq_count KEY: KEY's value in NFQ_FINAL (empty if missing).
nfq_count() {
    tr ' ' '\n' <<< "$NFQ_FINAL" | sed -n "s/^$1=//p"
}

# flip_classes FLIPS: where nfq_corrupt's flips (its -l log) landed in the
# usnic datagrams (btl_usnic_proto.h: common header 56 bytes, crc field at
# 44..47; a CHUNK's header 72 bytes, a PUT's 88; an ACK is all header),
# "TOTAL EARLY HEADER CRCFIELD PAYLOAD":
#   EARLY    bytes a check before the CRC reads and may refuse on
#            (usnic_pkt_parse, the sender lookup): version, type, flags,
#            tag, payload_len, sender_key (0..15), reserved (40..43), an
#            ACK's msg_id (28..31, must be 0), chunk and PUT headers.  Every
#            other flip (src_module is only read for an unknown key) passes
#            them unchanged, so with the CRC on only the CRC can catch it:
#            drop_CHECKSUM.
#   HEADER   header bytes but the crc field: what the header MAC covers
#            (the mac field's own 8 bytes: a changed tag mismatches too)
#   CRCFIELD the crc field: unread when the CRC is off
#   PAYLOAD  FRAG/CHUNK/PUT payload: only the CRC or the full MAC cover it
flip_classes() {
    awk '
        {
            for (i = 1; i <= NF; i++) {
                split($i, kv, "=")
                v[kv[1]] = kv[2]
            }
            b = v["byte"] + 0
            t = substr(v["head"], 3, 2)
            hl = (t == "01") ? v["len"] + 0 : (t == "03") ? 72 : (t == "04") ? 88 : 56
            n++
            if (b < 16 || (b >= 40 && b < 44) || (t == "01" && b >= 28 && b < 32) ||
                ((t == "03" || t == "04") && b >= 56 && b < hl))
                early++
            if (b >= 44 && b < 48) crcf++
            else if (b < hl) hdr++
            else pay++
        }
        END { printf "%d %d %d %d %d\n", n, early, hdr, crcf, pay }' "$1" 2>/dev/null ||
        echo "0 0 0 0 0"
}

# flip_where FLIPS: one line per flip, where it landed.
flip_where() {
    awk '
        {
            for (i = 1; i <= NF; i++) {
                split($i, kv, "=")
                v[kv[1]] = kv[2]
            }
            b = v["byte"] + 0
            t = substr(v["head"], 3, 2)
            tn = (t == "01") ? "ACK" : (t == "02") ? "FRAG" : (t == "03") ? "CHUNK" : (t == "04") ? "PUT" : "type " t
            hl = (t == "01") ? v["len"] + 0 : (t == "03") ? 72 : (t == "04") ? 88 : 56
            w = (b >= 44 && b < 48) ? "crc field" : (b < hl) ? "usnic header" : \
                sprintf("payload byte %d", b - hl)
            printf "flip %d: bit %d of byte %d of a %d-byte %s datagram (%s)\n", v["flip"],
                v["bit"], b, v["len"], tn, w
        }' "$1" 2>/dev/null
}

corrupt_cleanup() {
    nfq_stop
    [ -n "$NFQ_RULE" ] && queue_rule_del
    nsbed_down
}

netns_part() {
    local rc c seen udp r ck low lost pend unparked held tx rx why out host2
    local nflips early fhdr fcrc fpay frame
    build_nfq
    case $? in
        1) return ;;
        2) skip_netns "$NFQ_WHY"; return ;;
    esac
    [ -n "$pingpong" ] || { skip_netns "pingpong did not build"; return; }
    nsbed_up 2 || return
    trap corrupt_cleanup EXIT
    if ! queue_rule_add; then
        skip_netns "$NFQ_WHY"
        corrupt_cleanup
        return
    fi
    echo "    NFQUEUE rule in h2 ($NFQ_RULE): UDP $(nsbed_addr 1) -> $(nsbed_addr 2) on $NSB_DEV to queue $NFQ_NUM (bypass)"
    hosts1=$(nsbed_hostfile 1)
    host2=$(nsbed_name 2)

    # -- CRC on ----------------------------------------------------------------
    name="corrupt netns checksum=1 nfq=$nfq_rate"
    if ! nfq_start "$nfq_seed" crc; then
        fail "$name" "$NFQ_WHY"
    else
        EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_checksum 1" \
            nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max" -i "$iters"
        rc=$?
        nfq_stop
        echo "    $name: ${NFQ_FINAL:-nfq_corrupt printed no counts}"
        USNIC_TEST_DEV=$NSB_DEV USNIC_TEST_HOSTILE=1 \
            check_run "$name: job" $rc 2 $((4 * $(pingpong_size_sum "$max")))
        grep -h '\[usnic stats\]' "$RUN_LOG" | sed 's/^.*\[usnic stats\]/    [usnic stats]/'
        c=$(nfq_count corrupted)
        seen=$(nfq_count seen)
        udp=$(nfq_count udp)
        read -r nflips early fhdr fcrc fpay <<< "$(flip_classes "$NFQ_FLIPS")"
        # rank 1 ran in h2 (hostfile order, one slot per host)
        if ! grep -q "\[usnic stats\] host=$host2 pid=[0-9]* rank=1 " "$RUN_LOG"; then
            fail "$name: accounting" "no [usnic stats] line of rank 1 on $host2" "$RUN_LOG"
        elif [ -z "$c" ] || [ "$nflips" != "$c" ]; then
            fail "$name: accounting" "nfq_corrupt counted ${c:-no} flips, logged $nflips (see $NFQ_OUT)"
        else
            r=$(refused "$RUN_LOG" 1)
            ck=$(rstat "$RUN_LOG" 1 drop_CHECKSUM)
            tx=$(rstat "$RUN_LOG" 0 tx_pkts)
            rx=$(rstat "$RUN_LOG" 1 rx_pkts)
            echo "    $name: nfq_corrupt saw $seen packets, $udp UDP datagrams (rank 0 sent $tx," \
                 "rank 1 read $rx), corrupted $c: bit in a header $fhdr, in the crc field $fcrc," \
                 "in a payload $fpay; $early where a check before the CRC looks"
            # refusal_check below, with C counted on the wire (no EAGAIN
            # term): every corrupted datagram rank 1 read was refused,
            # nothing else.  Here: the flips outside EARLY (flip_classes)
            # can only be caught by the CRC, so drop_CHECKSUM >= C - EARLY
            # - (not read or held); and the CRC, checked before the MAC,
            # leaves the MAC nothing to catch.
            why=
            [ "$c" -gt 0 ] || why+="; nfq_corrupt corrupted nothing"
            [ "$ck" -gt 0 ] || why+="; drop_CHECKSUM is $ck in h2"
            [ "$(rstat "$RUN_LOG" 1 drop_AUTH)" -eq 0 ] || why+="; drop_AUTH in h2 with the CRC on"
            lost=$((tx > rx ? tx - rx : 0))
            pend=$(rstat "$RUN_LOG" 1 drop_PENDING)
            unparked=$(rstat "$RUN_LOG" 1 unparked)
            held=$((pend > unparked ? pend - unparked : 0))
            low=$((c - early - lost - held))
            [ "$ck" -le "$c" ] && [ "$ck" -ge "$low" ] ||
                why+="; drop_CHECKSUM $ck in h2, expected $low..$c (corrupted $c, $early where earlier checks look, unread $lost, held $held)"
            if [ -z "$why" ]; then
                pass "$name: CRC caught corruption on the wire: drop_CHECKSUM $ck of $c corrupted (>= $low)"
            else
                fail "$name: CRC caught corruption on the wire" "${why#; }" "$RUN_LOG"
            fi
            refusal_check "$name: every corrupted datagram refused" "$RUN_LOG" 0 1 "$c" 0 0
        fi
    fi

    # -- control: CRC off, MAC over the headers only ---------------------------
    name="corrupt netns checksum=0 auth=header nfq=$nfq_rate (control)"
    if ! nfq_start $((nfq_seed + 1)) nocrc; then
        fail "$name" "$NFQ_WHY"
    else
        TEST_TIMEOUT=20 EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_checksum 0 --mca btl_usnic_auth header" \
            nsbed_run_mpi "$hosts1" 2 "$pingpong" -m "$max" -i "$iters"
        rc=$?
        nfq_stop
        echo "    $name: ${NFQ_FINAL:-nfq_corrupt printed no counts}"
        out=$(grep -h -m 1 -E 'data mismatch|was overwritten|received [0-9-]+ bytes, expected' "$RUN_LOG")
        if [ "$rc" -eq 0 ] && grep -q "^OK pingpong\$" "$RUN_LOG"; then
            why="the job completed and pingpong verified every byte"
        elif [ -n "$out" ]; then
            why="the application found corrupted data (rc=$rc): ${out#*] }"
        elif out=$(grep -h -m 1 'Signal: ' "$RUN_LOG"); then
            # the first frame below the signal handler: where it crashed
            frame=$(grep -h -m 1 '\[ 1\] ' "$RUN_LOG" |
                sed -e 's/.*\[ 1\] //' -e 's/\[0x[0-9a-f]*\]$//' -e 's|^.*/||')
            why="a rank crashed (rc=$rc): ${out#*Signal: } in ${frame:-?}"
        elif [ "$rc" -eq 124 ]; then
            why="the job hung (killed after 20 s)"
        else
            out=$(grep -h -m 1 -i -E 'error|abort|signal|segmentation' "$RUN_LOG" | grep -v '^#')
            why="the job failed (rc=$rc): ${out:-no message}"
        fi
        read -r nflips early fhdr fcrc fpay <<< "$(flip_classes "$NFQ_FLIPS")"
        echo "INFO: $name: $why"
        echo "INFO: $name: nfq_corrupt corrupted $nflips datagrams before the job ended: bit in" \
             "a header $fhdr (the MAC's), in the unused crc field $fcrc, in a payload $fpay (unchecked)"
        flip_where "$NFQ_FLIPS" | head -n 3 | sed "s/^/INFO: $name: /"
        if grep -q '\[usnic stats\]' "$RUN_LOG"; then
            echo "INFO: $name: refusals in h2: $(refusal_detail "$RUN_LOG" 1)"
        else
            echo "INFO: $name: no [usnic stats] lines (the job did not reach MPI_Finalize)"
        fi
    fi

    # -- the test bed goes away --------------------------------------------------
    made=("${NSB_MADE[@]}")
    corrupt_cleanup
    trap - EXIT
    left=$(ip netns list | grep -F -e "$NSB_BASE-" || true)
    if [ -z "$left" ] && [ -z "$NFQ_PID" ]; then
        pass "corrupt netns: nfq_corrupt ended, NFQUEUE rule and test bed removed (${#made[@]} namespaces)"
    else
        fail "corrupt netns: test bed removed" "namespaces left: $left"
    fi
}

netns_part
finish
