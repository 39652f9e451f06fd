#!/usr/bin/env bash
# loss.sh - the loss penalty of the usnic BTL compared with btl/tcp.
#
# A FIXED exchange (build/exchange: 2 ranks, N cycles of ping-pongs of
# 8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB and 1 MiB, every byte checked) is
# timed with and without random packet loss, for usnic and for btl/tcp,
# interleaved in the same run (rounds; the order of the runs rotates between
# rounds).  Penalty = median(time with loss) / median(time without) - 1.
#
# The loss is real packet loss in the kernel, applied the same way to both
# transports: everything runs inside a private network namespace created
# here (only 'lo' exists in it, so no packet can leave it), and an nftables
# table in that namespace drops a random PCT % of the transport's packets at
# the input hook (each packet on lo passes it exactly once):
#   usnic: every UDP packet in the namespace (data, ACKs, retransmissions)
#   tcp:   the BTL's connections only; its ports are pinned to 40000-40099
#          (btl_tcp_port_min_v4/range_v4) and matched as dport or sport, so
#          Open MPI's runtime (ORTE oob / PMIx, TCP on lo too) is not hit;
#          40000-40099 are reserved in the namespace
#          (net.ipv4.ip_local_reserved_ports) so no ephemeral port of the
#          runtime can fall into the range.
# The rule is 'numgen random mod 100 < PCT counter drop' (mod 10000 for a
# fractional PCT), followed by 'counter accept', so every run reports how
# many of the transport's packets passed the rule and how many it dropped.
# Runs without loss use the same table without the drop rule (same rule
# overhead, and their packet counts).
#
# One exemption, on by default (--all-udp turns it off): the usnic BTL sends
# one 64 KiB datagram to itself at startup to prove that interface-MTU
# datagrams work (its first payload byte is 0, which is never a valid usnic
# packet).  If it is lost 3 times in a row (it is retried), the process falls back to
# 1472-byte datagrams for the whole job (and its peers follow), which makes
# the exchange ~3x slower with or without further loss - a startup effect,
# not a loss penalty.  Such datagrams are accepted before the loss rule
# (counted as 'exempt').  Every usnic run also logs the datagram size in use
# (btl_base_verbose 5) and the report flags any run that fell back.
#
# Extra row: usnic with the component's own fault injection
# (--mca btl_usnic_debug_drop_rate PCT/100: the receive path discards that
# fraction of arriving packets), no kernel loss; compared with the same
# clean usnic runs.
#
# Retransmissions: usnic's own counter (btl_usnic_print_stats 1 prints
# '[usnic stats] ... retrans=N ...' per rank at finalize; the sum over both
# ranks is reported), and for tcp the namespace's TCP RetransSegs counter
# (/proc/net/snmp inside the namespace, before/after each run).
#
# Machine load: /proc/loadavg is printed before and after, and during each
# run the runnable tasks are sampled (/proc/stat procs_running; a run on an
# idle machine averages 2-2.5: two polling ranks, the sampler, less during
# start-up); a run averaging 3 or more is flagged busy.  Both transports busy-poll with one rank
# per core, so any other CPU-bound process slows the exchange down (about 4x
# for both on a 2-core machine), and usnic then also resends in vain when a
# descheduled peer cannot acknowledge within btl_usnic_retrans_timeout
# (5 ms): compare runs flagged busy with care (--wait-idle S helps).
#
# Run time: about 30 s with the defaults on an idle 2-core machine, ~5 s
# with -q.
#
# --netns [--netns-mtu N]: the same exchange and conditions between two
# "hosts" made of network namespaces on this machine (the test bed of
# test/lib/netns.sh: h1 10.211.0.11 and h2 10.211.0.12, each on a veth
# eth0 of MTU N, default 9000, to a bridge in namespace head, where mpirun
# runs; daemons started in h1/h2 by test/lib/netns-rsh.sh), one rank per
# host (rankfile: rank 0 on h1 core 0, rank 1 on h2 core 1), all traffic on
# 10.211.0.0/24.  The loss is real packet loss on the veths, in both
# directions: the same nftables table is loaded in h1 AND h2, its rules
# matching only packets arriving on the host's veth (iifname eth0):
#   usnic: every UDP packet arriving on the veth
#   tcp:   the BTL's connections only (ports pinned and reserved as above,
#          in h1, h2 and head, so the runtime's TCP is never dropped)
# The self-test exemption rule is kept, but the self-test datagram goes to
# the rank's own address, i.e. over lo, and never passes the veth rule (the
# report shows the count: 0 expected).  Retransmissions: usnic's as above;
# tcp: RetransSegs of h1 plus h2 (/proc/net/snmp read in each host).  The
# test bed is removed at the end, also on Ctrl-C / TERM.  Result names end
# in -netns.  Run time: about 1 min with the defaults.
#
# Output: markdown table on stdout and in bench/results/<name>.md, per-run
# CSV in bench/results/<name>-runs.csv, logs in bench/results/<name>-logs/.
set -u
{
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results

ROUNDS=3
ROUNDS_SET=0
QUICK=0
PCT=1
CYCLES=""
ALL_UDP=0
DO_BUILD=1
RUN_TIMEOUT=300
WAIT_IDLE=0
NAME=""
NETNS=0
NETNS_MTU=9000

usage() {
    cat <<EOF
usage: $0 [options]
  -r N         rounds (default 3; 1 with -q)
  -q           quick run: 1 round, 30 cycles
  -l PCT       packet loss in percent (default 1; up to 2 decimals, e.g. 0.5)
  -n CYCLES    exchange cycles per run (default 100; 30 with -q)
  --all-udp    also expose usnic's startup self-test datagram to the loss
  --timeout S  kill one run after S seconds (default $RUN_TIMEOUT)
  --wait-idle S  before each run, wait up to S seconds for other processes
               to stop using the CPUs (default 0: don't wait, only report)
  --no-build   do not run make first
  -o NAME      result file prefix (default loss-<timestamp>; --netns adds
               the suffix -netns)
  --netns      between two hosts made of network namespaces (h1, h2, one
               rank each, veths to a bridge; test/lib/netns.sh), the loss
               applied to packets arriving on each host's veth
  --netns-mtu N  MTU of the hosts' veths with --netns (default $NETNS_MTU)
  -h, --help   this text
Runs inside a private network namespace (loopback only); with --netns on
10.211.0.0/24 between the test bed's namespaces, which are removed again at
the end.  Needs root.
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        -r) ROUNDS=${2:-}; ROUNDS_SET=1; shift 2 || break ;;
        -q) QUICK=1; shift ;;
        -l) PCT=${2:-}; shift 2 || break ;;
        -n) CYCLES=${2:-}; shift 2 || break ;;
        --all-udp) ALL_UDP=1; shift ;;
        --timeout) RUN_TIMEOUT=${2:-}; shift 2 || break ;;
        --wait-idle) WAIT_IDLE=${2:-}; shift 2 || break ;;
        --no-build) DO_BUILD=0; shift ;;
        -o) NAME=${2:-}; shift 2 || break ;;
        --netns) NETNS=1; shift ;;
        --netns-mtu) NETNS_MTU=${2:-}; shift 2 || break ;;
        --netns-mtu=*) NETNS_MTU=${1#--netns-mtu=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "loss.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if [ $QUICK = 1 ]; then
    [ $ROUNDS_SET = 1 ] || ROUNDS=1
    [ -n "$CYCLES" ] || CYCLES=30
fi
[ -n "$CYCLES" ] || CYCLES=100
[ -n "$NAME" ] || NAME=loss-$(date +%Y%m%d-%H%M%S)
if [ $NETNS = 1 ]; then
    case "$NETNS_MTU" in ''|*[!0-9]*) NETNS_MTU=0 ;; esac
    if [ "$NETNS_MTU" -lt 1500 ] || [ "$NETNS_MTU" -gt 65535 ]; then
        echo "loss.sh: --netns-mtu expects an MTU of 1500..65535" >&2; exit 2
    fi
    [[ $NAME == *-netns ]] || NAME=$NAME-netns
fi
case "$ROUNDS" in ''|*[!0-9]*|0) echo "loss.sh: -r expects a positive integer" >&2; exit 2 ;; esac
case "$CYCLES" in ''|*[!0-9]*|0) echo "loss.sh: -n expects a positive integer" >&2; exit 2 ;; esac
case "$RUN_TIMEOUT" in ''|*[!0-9]*|0) echo "loss.sh: --timeout expects seconds" >&2; exit 2 ;; esac
case "$WAIT_IDLE" in ''|*[!0-9]*) echo "loss.sh: --wait-idle expects seconds" >&2; exit 2 ;; esac
# PCT -> nft threshold: 'mod 100 < P' or, with decimals, 'mod 10000 < P*100'
if [[ $PCT =~ ^[0-9]+$ ]] && [ "$PCT" -ge 1 ] && [ "$PCT" -le 99 ]; then
    NUMGEN="numgen random mod 100 < $PCT"
elif [[ $PCT =~ ^([0-9]*)\.([0-9]{1,2})$ ]]; then
    int=${BASH_REMATCH[1]:-0} frac=${BASH_REMATCH[2]}
    [ ${#frac} = 1 ] && frac=${frac}0
    thr=$((10#$int * 100 + 10#$frac))
    if [ $thr -lt 1 ] || [ $thr -gt 9999 ]; then
        echo "loss.sh: -l expects a percentage between 0.01 and 99.99" >&2; exit 2
    fi
    NUMGEN="numgen random mod 10000 < $thr"
else
    echo "loss.sh: -l expects a percentage, e.g. 1 or 0.5" >&2; exit 2
fi
DROP_RATE=$(awk -v p="$PCT" 'BEGIN { printf "%.6g", p / 100 }')

[ "$(id -u)" = 0 ] || { echo "loss.sh: must run as root (network namespace, nftables)" >&2; exit 1; }
for c in ip nft mpirun python3 timeout; do
    command -v $c >/dev/null || { echo "loss.sh: '$c' not found" >&2; exit 1; }
done
ompi_info 2>/dev/null | grep -q 'btl: usnic' ||
    { echo "loss.sh: the usnic BTL is not installed (ompi_info | grep usnic)" >&2; exit 1; }
if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" >&2 || { echo "loss.sh: build failed" >&2; exit 1; }
fi
[ -x "$BUILD/exchange" ] || { echo "loss.sh: $BUILD/exchange missing (run make)" >&2; exit 1; }

mkdir -p "$RESDIR"
LOGDIR=$RESDIR/$NAME-logs
mkdir -p "$LOGDIR"
RUNS=$LOGDIR/runs.txt
: >"$RUNS"
[ $NETNS = 1 ] && : >"$LOGDIR/hosts.txt"

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

# ---------------------------------------------------------------- namespace
# RULE_NS: the namespaces that hold the loss table (one host: the private
# namespace; --netns: h1 and h2); RUN_NS: where mpirun runs; IIF: the rules'
# interface match (--netns: packets arriving on the host's veth only).
RUNPID=""
IIF=""
if [ $NETNS = 0 ]; then
NS=usnic-loss-$$
cleanup() {
    local p left
    trap - EXIT INT TERM HUP
    # the run in progress (timeout -> ip netns exec/mpirun), by PID
    if [ -n "$RUNPID" ] && kill -0 "$RUNPID" 2>/dev/null; then
        kill -TERM "$RUNPID" 2>/dev/null
    fi
    if ip netns list 2>/dev/null | grep -qw "^$NS"; then
        # every process still inside the namespace, by PID
        for p in $(ip netns pids "$NS" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            left=$(ip netns pids "$NS" 2>/dev/null)
            [ -z "$left" ] && break
            sleep 0.3
        done
        for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$NS" 2>/dev/null
    fi
    [ -n "$RUNPID" ] && wait "$RUNPID" 2>/dev/null
    RUNPID=""
}
trap cleanup EXIT
trap 'echo "loss.sh: interrupted, cleaning up" >&2; exit 130' INT TERM HUP

ip netns add "$NS" || { echo "loss.sh: cannot create network namespace $NS" >&2; exit 1; }
ip -n "$NS" link set lo up
ip netns exec "$NS" sysctl -q -w net.ipv4.ip_local_reserved_ports=40000-40099 ||
    { echo "loss.sh: cannot reserve ports 40000-40099 in $NS" >&2; exit 1; }
RULE_NS=("$NS")
RUN_NS=$NS
NS_DESC="namespace $NS"
else
for c in unshare bridge; do
    command -v $c >/dev/null || { echo "loss.sh: '$c' not found (needed by --netns)" >&2; exit 1; }
done
# The test bed of the MPI tests (test/lib/netns.sh): namespaces head
# (mpirun, bridge br0), h1 and h2 (one veth eth0 each), addresses in
# 10.211.0.0/24.  nsbed_up installs nsbed_down as EXIT trap; cleanup below
# replaces it and also ends the run in progress.
REPO=$(cd "$HERE/.." && pwd)
TEST_TMP=$LOGDIR/testbed
# shellcheck source=test/lib/mpitest.sh
. "$REPO/test/lib/mpitest.sh"
# shellcheck source=test/lib/netns.sh
. "$REPO/test/lib/netns.sh"
NSB_MTU=$NETNS_MTU
cleanup() {
    local n left
    trap - EXIT INT TERM HUP
    # the run in progress (timeout -> ip netns exec/mpirun in head), by PID
    if [ -n "$RUNPID" ] && kill -0 "$RUNPID" 2>/dev/null; then
        kill -TERM "$RUNPID" 2>/dev/null
    fi
    n=${#NSB_MADE[@]}
    if [ "$n" -gt 0 ]; then
        # every process still in the namespaces (mpirun, orted, ranks), by
        # PID, then the namespaces
        nsbed_down
        left=$(ip netns list 2>/dev/null | grep -F -e "$NSB_BASE-")
        if [ -n "$left" ]; then
            echo "loss.sh: WARNING: namespaces left behind: $left" >&2
        else
            echo "# test bed removed ($n namespaces)" >&2
        fi
    fi
    [ -n "$RUNPID" ] && wait "$RUNPID" 2>/dev/null
    RUNPID=""
}
if ! nsbed_up 2 >"$LOGDIR/testbed.log" 2>&1; then
    cat "$LOGDIR/testbed.log" >&2
    echo "loss.sh: cannot build the two-namespace test bed (see above)" >&2
    exit 1
fi
trap cleanup EXIT
trap 'echo "loss.sh: interrupted, cleaning up" >&2; exit 130' INT TERM HUP
# the BTL's tcp ports: no ephemeral port of the runtime (mpirun in head,
# orted and ranks in h1/h2) can fall into the range
for ns in "$NSB_HEAD" "$(nsbed_ns 1)" "$(nsbed_ns 2)"; do
    ip netns exec "$ns" sysctl -q -w net.ipv4.ip_local_reserved_ports=40000-40099 ||
        { echo "loss.sh: cannot reserve ports 40000-40099 in $ns" >&2; exit 1; }
done
RULE_NS=("$(nsbed_ns 1)" "$(nsbed_ns 2)")
RUN_NS=$NSB_HEAD
IIF="iifname \"$NSB_DEV\" "
H1=$(nsbed_addr 1)
H2=$(nsbed_addr 2)
HOSTFILE=$(nsbed_hostfile 1)
netns_bind "$LOGDIR" "$H1" "$H2"
NS_DESC="test bed $NSB_HEAD (mpirun) + ${RULE_NS[*]}, veth MTU $NETNS_MTU"
fi

# --netns, after a run: a process of it still in the test bed (after a
# timeout, say) would compete with the next run for the CPUs: wait up to
# 3 s for the namespaces to empty, then end what is left by PID; notes it
# in the run's log $1.
end_leftovers() {
    local ns p t left=""
    [ $NETNS = 1 ] || return 0
    for ((t = 0; t < 30; t++)); do
        left=$(nsbed_leftovers)
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    echo "# loss.sh: processes left in the test bed after the run, ended: $left" >>"$1"
    for ns in "${NSB_MADE[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
    done
    for ((t = 0; t < 30; t++)); do
        [ -z "$(nsbed_leftovers)" ] && return 0
        sleep 0.1
    done
    for ns in "${NSB_MADE[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
}

# the nftables table for one run, in every namespace of RULE_NS:
# $1 = udp | tcp, $2 = 1 with loss
load_rules() {
    local match lose ns
    if [ "$1" = udp ]; then
        match="${IIF}meta l4proto udp jump lose"
        [ $ALL_UDP = 0 ] && match="${IIF}meta l4proto udp @th,64,8 0 counter accept comment \"exempt\"
                ${IIF}meta l4proto udp jump lose"
    else
        match="${IIF}tcp dport 40000-40099 jump lose
                ${IIF}tcp sport 40000-40099 jump lose"
    fi
    lose=""
    [ "$2" = 1 ] && lose="$NUMGEN counter drop comment \"dropped\""
    for ns in "${RULE_NS[@]}"; do
        ip netns exec "$ns" nft delete table inet usnic_loss 2>/dev/null
        ip netns exec "$ns" nft -f - <<EOF || return 1
table inet usnic_loss {
    chain lose {
        $lose
        counter accept comment "passed"
    }
    chain input {
        type filter hook input priority filter; policy accept;
        $match
    }
}
EOF
    done
}

# counters of the table in namespace $1:
# "passed dropped exempt passed-bytes dropped-bytes"
read_counters() {
    ip netns exec "$1" nft list table inet usnic_loss 2>/dev/null | awk '
        function get(w,   i) { for (i = 1; i < NF; i++) if ($i == w) return $(i + 1); return 0 }
        /comment "passed"/  { p = get("packets"); pb = get("bytes") }
        /comment "dropped"/ { d = get("packets"); db = get("bytes") }
        /comment "exempt"/  { e = get("packets") }
        END { printf "%d %d %d %d %d\n", p, d, e, pb, db }'
}

tcp_retrans() {   # TCP RetransSegs of namespace $1
    ip netns exec "$1" awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RetransSegs") c = i; h = 1 }
                       else print $c }' /proc/net/snmp
}

# over every namespace of RULE_NS: COUNTERS = the sums "passed dropped
# exempt passed-bytes dropped-bytes", RETRANS = the sum of TCP RetransSegs,
# PER_NS = " passed dropped exempt passed-bytes dropped-bytes retrans" of
# each namespace in turn
sample_all() {
    local ns p d e pb db rt
    local -a sum=(0 0 0 0 0)
    RETRANS=0
    PER_NS=""
    for ns in "${RULE_NS[@]}"; do
        read -r p d e pb db <<<"$(read_counters "$ns")"
        rt=$(tcp_retrans "$ns")
        sum=($((sum[0] + p)) $((sum[1] + d)) $((sum[2] + e)) $((sum[3] + pb)) $((sum[4] + db)))
        RETRANS=$((RETRANS + rt))
        PER_NS+=" $p $d $e $pb $db $rt"
    done
    COUNTERS="${sum[*]}"
}


if [ $NETNS = 0 ]; then
    export FI_UDP_IFACE=lo
    MPIRUN=(mpirun --allow-run-as-root -np 2 --bind-to core --mca oob_tcp_if_include lo
            -x FI_UDP_IFACE=lo)
    NET=lo
    KILL_AFTER=5
else
    # mpirun in head, its daemons in h1/h2 (netns-rsh.sh), everything on
    # the test bed's subnet
    export FI_UDP_IFACE=$NSB_DEV
    MPIRUN=(mpirun --allow-run-as-root -np 2 --hostfile "$HOSTFILE" "${BIND[@]}"
            --mca plm_rsh_agent "$NSB_AGENT"
            --mca oob_tcp_if_include "$NSB_CIDR" -x FI_UDP_IFACE="$NSB_DEV")
    NET=$NSB_CIDR
    KILL_AFTER=10   # mpirun ends its remote daemons after a TERM
fi
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include "$NET"
           --mca btl_usnic_print_stats 1 --mca btl_base_verbose 5)
TCP_MCA=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NET"
         --mca btl_tcp_port_min_v4 40000 --mca btl_tcp_port_range_v4 100)
EXCH=("$BUILD/exchange" -n "$CYCLES")

# conditions: name transport(kernel match) loss(0/1) extra-mca
CONDS=(usnic-clean usnic-loss tcp-clean tcp-loss usnic-inject)
cond_cmd() {
    case "$1" in
        usnic-clean|usnic-loss) CMD=("${MPIRUN[@]}" "${USNIC_MCA[@]}" "${EXCH[@]}"); MATCH=udp ;;
        usnic-inject) CMD=("${MPIRUN[@]}" "${USNIC_MCA[@]}" --mca btl_usnic_debug_drop_rate "$DROP_RATE"
                           "${EXCH[@]}"); MATCH=udp ;;
        tcp-clean|tcp-loss) CMD=("${MPIRUN[@]}" "${TCP_MCA[@]}" "${EXCH[@]}"); MATCH=tcp ;;
    esac
    case "$1" in *-loss) LOSSY=1 ;; *) LOSSY=0 ;; esac
}


LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-before.txt"
# other runnable tasks before starting (4 samples over 1 s, minus this shell)
sum=0
for _ in 1 2 3 4; do read_running; sum=$((sum + RUNNING - 1)); sleep 0.25; done
IDLE_BEFORE=$(awk -v s=$sum 'BEGIN { printf "%.2f", s / 4 }')
echo "# loss.sh: $NS_DESC, loss $PCT % ($NUMGEN), $CYCLES cycles, $ROUNDS round(s)" >&2
echo "# loadavg before: $LOAD_BEFORE; other runnable tasks before: $IDLE_BEFORE" >&2

T_START=$(date +%s)
NC=${#CONDS[@]}
TOTAL=$((NC * ROUNDS))
RUNNO=0
for ((r = 1; r <= ROUNDS; r++)); do
    for ((k = 0; k < NC; k++)); do
        c=${CONDS[$(( (k + r - 1) % NC ))]}
        RUNNO=$((RUNNO + 1))
        cond_cmd "$c"
        load_rules "$MATCH" "$LOSSY" || { echo "loss.sh: nft failed" >&2; exit 1; }
        out=$LOGDIR/$c.r$r.log
        echo "# ${CMD[*]}" >"$out"
        wait_idle
        sample_all
        rt0=$RETRANS
        read -r -a per0 <<<"$PER_NS"
        progress "[round $r/$ROUNDS] run $RUNNO/$TOTAL: $c - $(( $(date +%s) - T_START ))s elapsed"
        sampled_run "$out" 0.2 timeout -k $KILL_AFTER "$RUN_TIMEOUT" ip netns exec "$RUN_NS" "${CMD[@]}"
        rc=$RC n=$SAMPLES sum=$RUNNABLE_SUM t0=$T0 t1=$T1
        end_leftovers "$out"
        sample_all
        rt1=$RETRANS
        read -r passed dropped exempt _ <<<"$COUNTERS"
        # round cond rc wall passed dropped exempt tcp_retrans samples runnable_sum
        echo "$r $c $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $passed $dropped $exempt $((rt1 - rt0)) $n $sum" >>"$RUNS"
        if [ $NETNS = 1 ]; then
            # per host: round cond, then for h1 and h2: passed dropped exempt
            # passed-bytes dropped-bytes tcp-retrans (the run's difference)
            read -r -a per1 <<<"$PER_NS"
            line="$r $c"
            for ((i = 0; i < ${#per1[@]}; i++)); do
                if [ $((i % 6)) = 5 ]; then line+=" $((per1[i] - per0[i]))"; else line+=" ${per1[i]}"; fi
            done
            echo "$line" >>"$LOGDIR/hosts.txt"
        fi
    done
done
progress_done
T_END=$(date +%s)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-after.txt"
echo "# $TOTAL runs in $((T_END - T_START))s; loadavg after: $LOAD_AFTER; logs in ${LOGDIR#$HERE/}" >&2
cleanup

# --netns: the test bed, for the report (empty on one host)
if [ $NETNS = 1 ]; then
    export LOSS_NETNS_MTU=$NETNS_MTU LOSS_DEV=$NSB_DEV LOSS_BIND="$BIND_DESC"
    NCPU=$(nproc)
    export LOSS_SETUP="h1 $H1 and h2 $H2, each on a veth $NSB_DEV (MTU $NETNS_MTU) to the bridge br0 in namespace head ($NSB_HEAD_ADDR), where mpirun runs (daemons started in h1/h2 by test/lib/netns-rsh.sh); all traffic on $NSB_CIDR; the namespaces share this machine's $NCPU CPUs and kernel (test bed: test/lib/netns.sh)"
else
    export LOSS_NETNS_MTU=""
fi
BENCH_DIR=$HERE python3 - "$LOGDIR" "$RESDIR/$NAME" "$PCT" "$CYCLES" "$ROUNDS" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "$IDLE_BEFORE" "$((T_END - T_START))" "$ALL_UDP" "$DROP_RATE" "$NUMGEN" <<'PY'
import sys, os, re, statistics

sys.path.insert(0, os.environ["BENCH_DIR"])
from benchlib import build_lines

(logdir, prefix, pct, cycles, rounds, load_before, load_after, idle_before, secs,
 all_udp, drop_rate, numgen) = sys.argv[1:13]
rounds = int(rounds)
netns_mtu = os.environ.get("LOSS_NETNS_MTU", "")   # empty: one host
netns = bool(netns_mtu)
dev = os.environ.get("LOSS_DEV", "eth0")
# --netns: per-host counters of each run, (round, cond) -> [h1, h2], each
# dict(passed, dropped, exempt, pbytes, dbytes, tcp_retrans)
hosts = {}
if netns and os.path.exists(os.path.join(logdir, "hosts.txt")):
    for line in open(os.path.join(logdir, "hosts.txt")):
        f = line.split()
        if len(f) < 2 or (len(f) - 2) % 6:
            continue
        v = [int(x) for x in f[2:]]
        hosts[(int(f[0]), f[1])] = [dict(zip(("passed", "dropped", "exempt", "pbytes", "dbytes",
                                              "tcp_retrans"), v[i:i + 6])) for i in range(0, len(v), 6)]
runs = []
for line in open(os.path.join(logdir, "runs.txt")):
    f = line.split()
    if len(f) != 10:
        continue
    r, c, rc = int(f[0]), f[1], int(f[2])
    d = dict(round=r, cond=c, rc=rc, wall=float(f[3]), passed=int(f[4]), dropped=int(f[5]),
             exempt=int(f[6]), tcp_retrans=int(f[7]), samples=int(f[8]), runnable=int(f[9]))
    log = os.path.join(logdir, f"{c}.r{r}.log")
    txt = open(log, errors="replace").read() if os.path.exists(log) else ""
    m = re.search(r"^exchange cycles=\d+ .*elapsed_s=([0-9.]+) errors=(\d+)", txt, re.M)
    d["elapsed"] = float(m.group(1)) if m else None
    d["errors"] = int(m.group(2)) if m else None
    d["usnic_retrans"] = sum(int(x) for x in re.findall(r"\[usnic stats\].* retrans=(\d+)", txt))
    d["usnic_inj"] = sum(int(x) for x in re.findall(r"\[usnic stats\].* inj_drop=(\d+)", txt))
    d["dgram"] = sorted(set(int(x) for x in re.findall(r"btl:usnic: using provider \S+ device \S+ "
                                                        r"\([^)]*\): datagram (\d+) bytes", txt)))
    # a rank whose interface-MTU self-test failed: the help message (older
    # builds: one line per rank), or mpirun's count of repeats of it
    d["fallback"] = (len(re.findall(r"self-test datagram of \d+ bytes did not arrive|"
                                    r"could not confirm that \d+-byte datagrams", txt)) +
                     sum(int(x) for x in re.findall(r"(\d+) more process(?:es)? ha(?:s|ve) sent help "
                                                    r"message help-mpi-btl-usnic.txt / datagram "
                                                    r"self-test failed", txt)))
    d["hosts"] = hosts.get((r, c))
    d["ok"] = rc == 0 and d["elapsed"] is not None and d["errors"] == 0
    d["log"] = os.path.relpath(log, os.path.dirname(logdir))
    runs.append(d)

BASELINE = 2.5     # average runnable tasks of a run on an idle machine

def is_busy(d):
    return bool(d["samples"]) and d["runnable"] / d["samples"] - BASELINE >= 0.5

def sel(c):
    return [d for d in runs if d["cond"] == c and d["ok"]]

def tstats(c):
    v = [d["elapsed"] for d in sel(c)]
    if not v:
        return None
    return statistics.median(v), min(v), max(v), len(v)

def fmt_t(a):
    return "n/a" if a is None else f"{a[0]:.3f} [{a[1]:.3f}-{a[2]:.3f}]"

def penalty(lossy, clean):
    if lossy is None or clean is None or clean[0] <= 0:
        return None
    return (lossy[0] / clean[0] - 1) * 100

def per_round_pen(lc, cc):
    """[(penalty %, busy)] per round"""
    out = []
    for r in range(1, rounds + 1):
        a = [d for d in sel(lc) if d["round"] == r]
        b = [d for d in sel(cc) if d["round"] == r]
        if a and b and b[0]["elapsed"] > 0:
            out.append(((a[0]["elapsed"] / b[0]["elapsed"] - 1) * 100, is_busy(a[0]) or is_busy(b[0])))
    return out

def best_pen(lc, cc):
    """penalty of the fastest runs: min(lossy) / min(clean) - 1, in %"""
    a, b = tstats(cc), tstats(lc)
    if a is None or b is None or a[1] <= 0:
        return None
    return (b[1] / a[1] - 1) * 100

def med(v):
    return statistics.median(v) if v else None

def fnum(x, nd=0):
    return "n/a" if x is None else f"{x:.{nd}f}"

out = []
P = out.append
if not netns:
    P(f"# usnic loss penalty - {pct} % random packet loss")
    P("")
    P(f"Fixed exchange: {cycles} cycles x ping-pong of 8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB, 1 MiB "
      f"(data checked), 2 ranks, --bind-to core, loopback inside a private network namespace; "
      f"{rounds} round(s), runs interleaved. Times: exchange elapsed seconds, median [min-max] over rounds.")
    P(f"Kernel loss: nftables input hook, `{numgen} drop` on the transport's packets "
      f"(usnic: all UDP{'' if all_udp == '1' else ' except the startup self-test datagram'}; "
      "tcp: ports 40000-40099 = the BTL's connections only).")
else:
    P(f"# usnic loss penalty - {pct} % random packet loss - two network-namespace hosts over veth "
      f"(MTU {netns_mtu}) + bridge")
    P("")
    P(f"Fixed exchange: {cycles} cycles x ping-pong of 8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB, 1 MiB "
      f"(data checked), 2 ranks, one per host: {os.environ.get('LOSS_BIND', '')}; "
      f"{rounds} round(s), runs interleaved. Times: exchange elapsed seconds, median [min-max] over rounds.")
    P(f"Test bed: {os.environ.get('LOSS_SETUP', '')}.")
    P(f"Kernel loss in both directions: the same nftables table in h1 and in h2, input hook, "
      f"`{numgen} drop` on the transport's packets arriving on the host's veth (`iifname \"{dev}\"`) "
      f"(usnic: all UDP{'' if all_udp == '1' else ' except the startup self-test datagram'}; "
      "tcp: ports 40000-40099 = the BTL's connections only, so the runtime's TCP (ORTE/PMIx) is never dropped).")
P("")
P("| transport | loss | time without loss (s) | time with loss (s) | penalty | per-round penalties | penalty of the fastest runs | extra s (median) | drops / packets (lossy runs) | retransmits clean / lossy (median per run) |")
P("|---|---|---|---|---:|---|---:|---:|---|---|")
rows = [("usnic", f"{pct} % kernel (nft)", "usnic-clean", "usnic-loss", "usnic"),
        ("tcp", f"{pct} % kernel (nft)", "tcp-clean", "tcp-loss", "tcp"),
        ("usnic, fault injection", f"btl_usnic_debug_drop_rate {drop_rate}", "usnic-clean", "usnic-inject", "usnic")]
pen = {}
pen_best = {}
for label, lossdesc, cc, lc, kind in rows:
    a, b = tstats(cc), tstats(lc)
    p = penalty(b, a)
    pen[lc] = p
    pr = per_round_pen(lc, cc)
    prs = ", ".join(f"{x:.0f} %" + ("*" if busy else "") for x, busy in pr) if pr else "n/a"
    bp = best_pen(lc, cc)
    pen_best[lc] = bp
    extra = (b[0] - a[0]) if a and b else None
    L = sel(lc)
    if lc == "usnic-inject":
        inj = sum(d["usnic_inj"] for d in L)
        rx = "n/a"
        dp = f"{inj} injected drops (both ranks, all rounds)"
    else:
        tp = sum(d["passed"] + d["dropped"] for d in L)
        td = sum(d["dropped"] for d in L)
        dp = f"{td} / {tp} ({100.0 * td / tp:.2f} %)" if tp else "n/a"
    key = "usnic_retrans" if kind == "usnic" else "tcp_retrans"
    rc_ = med([d[key] for d in sel(cc)])
    rl_ = med([d[key] for d in L])
    P(f"| {label} | {lossdesc} | {fmt_t(a)} | {fmt_t(b)} | {fnum(p)} % | {prs} | {fnum(bp)} % | {fnum(extra, 3)} | {dp} | "
      f"{fnum(rc_)} / {fnum(rl_)} |")
P("")
pu, pt, pi = pen.get("usnic-loss"), pen.get("tcp-loss"), pen.get("usnic-inject")
if pu is not None and pt:
    P(f"**usnic penalty / tcp penalty = {pu / pt:.3f}** ({pu:.0f} % vs {pt:.0f} %, kernel loss {pct} %, medians)")
else:
    P("usnic penalty / tcp penalty = n/a")
bu, bt = pen_best.get("usnic-loss"), pen_best.get("tcp-loss")
if bu is not None and bt:
    P(f"Same from the fastest run of each kind (less sensitive to other load on the machine): "
      f"{bu / bt:.3f} ({bu:.0f} % vs {bt:.0f} %).")
a_u, b_u, a_t, b_t = tstats("usnic-clean"), tstats("usnic-loss"), tstats("tcp-clean"), tstats("tcp-loss")
if a_u and b_u and a_t and b_t and (b_t[0] - a_t[0]) != 0:
    P(f"Extra seconds lost to loss: usnic {b_u[0] - a_u[0]:.3f} s, tcp {b_t[0] - a_t[0]:.3f} s "
      f"(ratio {(b_u[0] - a_u[0]) / (b_t[0] - a_t[0]):.3f}).")
P("")
P("Penalty = median(with loss) / median(without) - 1; per-round penalties compare the two runs "
  "of the same round (* = one of them ran while other work competed for the CPUs); "
  "fastest runs = min(with loss) / min(without) - 1.")
P("Retransmits: usnic = sum of `retrans=` of both ranks' `[usnic stats]` lines (segments actually resent); "
  + ("tcp = TcpRetransSegs of the namespace (/proc/net/snmp)." if not netns else
     "tcp = TcpRetransSegs of h1 plus h2 (each host namespace's /proc/net/snmp)."))
P("")

# notes: failures, fallbacks, datagram sizes, load
notes = []
for d in runs:
    if not d["ok"]:
        notes.append(f"round {d['round']} {d['cond']}: FAILED (exit {d['rc']}"
                     + (", data errors" if d["errors"] else "") + f"; see {d['log']})")
    if d["fallback"]:
        notes.append(f"round {d['round']} {d['cond']}: {d['fallback']} rank(s) fell back to small datagrams "
                     f"(startup self-test datagram lost); sizes {d['dgram']}")
    if d["cond"].endswith("-loss") and d["ok"] and d["dropped"] == 0:
        notes.append(f"round {d['round']} {d['cond']}: the loss rule dropped nothing")
    if d["ok"] and d["cond"] != "usnic-inject" and d["passed"] + d["dropped"] < 2 * int(cycles):
        notes.append(f"round {d['round']} {d['cond']}: the nft rule saw only {d['passed'] + d['dropped']} "
                     "packets - the transport's traffic did not match it")
sizes = sorted({s for d in runs for s in d["dgram"]})
if sizes and not netns:
    notes.append("usnic datagram size(s) in use: " + ", ".join(map(str, sizes)) + " bytes")
elif netns:
    want = min(int(netns_mtu) - 28, 65507)
    n = "usnic datagram size(s) in use: " + (", ".join(map(str, sizes)) or "none seen") + " bytes"
    n += f" (expected {want}: veth MTU {netns_mtu} - 28)" if sizes == [want] else \
         f" - EXPECTED {want} (veth MTU {netns_mtu} - 28)"
    notes.append(n)
ex = sum(d["exempt"] for d in runs)
if all_udp != "1":
    notes.append(f"startup self-test datagrams exempted from the loss rule: {ex}"
                 + (" (on the test bed a rank's self-test datagram goes to its own address, over lo, "
                    "so it never reaches the rule on the veth)" if netns and ex == 0 else ""))
if netns:
    # where the drops happened, and the size of what the rule saw
    for lc in ("usnic-loss", "tcp-loss"):
        hs = [d["hosts"] for d in sel(lc) if d["hosts"]]
        if not hs:
            continue
        parts = []
        for i in range(len(hs[0])):
            p_ = sum(h[i]["passed"] + h[i]["dropped"] for h in hs)
            d_ = sum(h[i]["dropped"] for h in hs)
            parts.append(f"h{i + 1} {d_} of {p_}")
        notes.append(f"{lc}: dropped / packets arriving on each host's veth (all rounds): " + ", ".join(parts))
    avg = []
    for c in ("usnic-clean", "usnic-loss", "tcp-clean", "tcp-loss"):
        hs = [h for d in sel(c) if d["hosts"] for h in d["hosts"]]
        pk = sum(h["passed"] + h["dropped"] for h in hs)
        by = sum(h["pbytes"] + h["dbytes"] for h in hs)
        if pk:
            avg.append(f"{c} {by / pk:.0f} B")
    if avg:
        notes.append("average size of the packets the loss rule saw (IP packets as the kernel hands them "
                     "to the input hook): " + ", ".join(avg))
    rt = []
    for c in ("tcp-clean", "tcp-loss"):
        hs = [d["hosts"] for d in sel(c) if d["hosts"]]
        if hs:
            rt.append(f"{c} " + " / ".join(f"h{i + 1} {sum(h[i]['tcp_retrans'] for h in hs)}"
                                           for i in range(len(hs[0]))))
    if rt:
        notes.append("tcp RetransSegs per host (all rounds): " + ", ".join(rt))
busy = []
for d in runs:
    if d["samples"]:
        other = d["runnable"] / d["samples"] - BASELINE
        if other >= 0.5:
            busy.append(f"r{d['round']} {d['cond']} (~{other:.1f})")
load_note = f"loadavg before {load_before}, after {load_after} (our runs add up to ~2); " \
            f"other runnable tasks before start: {idle_before}"
if busy or float(idle_before) >= 0.5:
    load_note += ". MACHINE BUSY - other work competed for the CPUs during: " + (", ".join(busy) if busy else "start")
else:
    load_note += "; no other CPU-bound work seen during the runs"
notes.append(load_note)
notes.append(f"{len(runs)} runs in {secs} s")
notes.extend(build_lines(logdir))
P("Notes:")
P("")
for n in notes:
    P(f"- {n}")
md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)
HX = ("h1_passed", "h1_dropped", "h1_tcp_retrans", "h2_passed", "h2_dropped", "h2_tcp_retrans",
      "rule_bytes")
with open(prefix + "-runs.csv", "w") as f:
    f.write("round,condition,exit,wall_s,elapsed_s,errors,passed,dropped,exempt,usnic_retrans,"
            "usnic_inj_drop,tcp_retrans,datagram,fallbacks,avg_runnable"
            + ("," + ",".join(HX) if netns else "") + "\n")
    for d in runs:
        extra = []
        if netns:
            h = d["hosts"] or []
            for i in range(2):
                extra += [h[i][k] if i < len(h) else "" for k in ("passed", "dropped", "tcp_retrans")]
            extra.append(sum(x["pbytes"] + x["dbytes"] for x in h) if h else "")
        f.write(",".join(str(x) for x in [
            d["round"], d["cond"], d["rc"], d["wall"], "" if d["elapsed"] is None else d["elapsed"],
            "" if d["errors"] is None else d["errors"], d["passed"], d["dropped"], d["exempt"],
            d["usnic_retrans"], d["usnic_inj"], d["tcp_retrans"], "/".join(map(str, d["dgram"])),
            d["fallback"], f"{d['runnable'] / d['samples']:.2f}" if d["samples"] else ""] + extra) + "\n")
PY
exit 0
}
