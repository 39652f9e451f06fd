#!/usr/bin/env bash
# loss.sh - the loss penalty of the usnic BTL compared with btl/tcp, on two
# workloads, at several loss levels.
#
# Workloads (-w, default both):
#   exchange  build/exchange: a FIXED exchange, 2 ranks, N cycles of
#             ping-pongs of 8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB and
#             1 MiB, every byte checked (-n cycles)
#   allred    build/allred: an allreduce-heavy loop, NP ranks (--np, default
#             4), I calls of MPI_Allreduce (MPI_SUM) on 8 B .. 1 KiB of
#             doubles, every element of every result checked (-i calls);
#             the pattern of MPICH's coll/allredmany, where every lost
#             datagram that was the last one in flight costs a full
#             retransmit timeout.  On one host the ranks outnumber the
#             cores: --oversubscribe --bind-to none (the kernel places and
#             migrates them; two ranks bound to each core,
#             --bind-to core:overload-allowed, measured the same within the
#             noise) and --mca mpi_yield_when_idle 1 (what Open MPI picks by
#             itself when oversubscribed; set explicitly so that --netns,
#             where no host is oversubscribed, runs the same way).
# Each is timed with and without random packet loss, for usnic and for
# btl/tcp, at every loss level of -l (default "0 1 5" percent; 0, the
# loss-free baseline, is always run), all interleaved in the same run
# (rounds; the order of the runs rotates between rounds).
# Penalty = median(time with loss) / median(time without) - 1.
#
# The report ends with the two ratios the next transport change must meet:
#   (a) usnic's time at 5 % loss / its loss-free time, on the allreduce
#       loop (target <= 2; at the highest level of -l if 5 is not in it)
#   (b) usnic's penalty in seconds / btl/tcp's penalty in seconds at the
#       same loss (extra seconds = median with loss - median without;
#       target <= 0.02), for every workload and loss level.
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
# Extra rows: usnic with the component's own fault injection
# (--mca btl_usnic_debug_drop_rate PCT/100: the receive path discards that
# fraction of arriving packets), no kernel loss, at every nonzero level of
# -l (--inject LIST: at other levels; --inject none: no such rows); compared
# with the same loss-free usnic runs.
#
# Retransmissions: usnic's own counters (btl_usnic_print_stats 1 prints
# '[usnic stats] ... retrans=N ...' per rank at finalize; the report sums
# retrans= over the ranks, the CSV has every retransmission-related counter
# the installed build prints, by name), and for tcp the namespace's TCP
# RetransSegs counter (/proc/net/snmp inside the namespace, before/after
# each run).
#
# Machine load: /proc/loadavg is printed before and after, and during each
# run the runnable tasks are sampled (/proc/stat procs_running; a run on an
# idle machine averages about one per rank plus 0.5 - the polling ranks,
# the sampler, less during start-up - so 2.5 for the exchange, 4.5 for 4
# allreduce ranks); a run averaging 0.5 more is flagged busy.  Both
# transports busy-poll, so any other CPU-bound process slows the workloads
# down (about 4x for the exchange on a 2-core machine), and usnic then also
# resends in vain when a descheduled peer cannot acknowledge within
# btl_usnic_retrans_timeout (5 ms): compare runs flagged busy with care
# (--wait-idle S helps).  The oversubscribed allreduce loop is exposed to
# that by design (4 ranks, 2 cores): bench/spurious.sh counts the resends
# it causes without any loss.
#
# Run time on this 2-core machine: about 30 s with -q (16 runs: 1 round, 30
# cycles, 300 allreduce calls); with the defaults (48 runs: 3 rounds, 100
# cycles, 2000 calls) about 5 min, nearly half of it btl/tcp at 5 % loss
# (20-30 s per run), plus up to --timeout (300 s) for any run that hangs.
#
# --netns [--netns-mtu N]: the same workloads and conditions between
# "hosts" made of network namespaces on this machine (the test bed of
# test/lib/netns.sh: h1 10.211.0.11, h2 10.211.0.12, ..., each on a veth
# eth0 of MTU N, default 9000, to a bridge in namespace head, where mpirun
# runs; daemons started in the hosts by test/lib/netns-rsh.sh).  The
# exchange runs one rank per host on h1 and h2 (rankfile: rank 0 on h1 core
# 0, rank 1 on h2 core 1), the allreduce loop one rank per host on h1 ..
# hNP (NP hosts are made; --bind-to none), so every message crosses the
# bridge.  All traffic on 10.211.0.0/24.  The loss is real packet loss on
# the veths, in both directions: the same nftables table is loaded in every
# host, its rules matching only packets arriving on the host's veth
# (iifname eth0):
#   usnic: every UDP packet arriving on the veth
#   tcp:   the BTL's connections only (ports pinned and reserved as above,
#          in every host and in head, so the runtime's TCP is never dropped)
# The self-test exemption rule is kept, but the self-test datagram goes to
# the rank's own address, i.e. over lo, and never passes the veth rule (the
# report shows the count: 0 expected).  Retransmissions: usnic's as above;
# tcp: RetransSegs summed over the hosts (/proc/net/snmp read in each).
# The test bed is removed at the end, also on Ctrl-C / TERM.  Result names
# end in -netns.  Run time: a little longer than on one host.
#
# Output: markdown report on stdout and in bench/results/<name>.md, per-run
# CSV in bench/results/<name>-runs.csv, one line per workload, transport
# and loss level in bench/results/<name>-summary.csv, logs in
# bench/results/<name>-logs/.
set -u
{
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results

ROUNDS=3
ROUNDS_SET=0
QUICK=0
LEVELS="0 1 5"
INJECT=""
INJECT_SET=0
WORKLOADS=exchange,allred
CYCLES=""
ITERS=""
NP=4
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
  -q           quick run: 1 round, 30 cycles, 300 allreduce calls
  -l LIST      packet loss levels in percent, space or comma separated
               (default "$LEVELS"; up to 2 decimals, e.g. "0.5 2"; the
               loss-free level 0 is always added)
  -w LIST      workloads, comma separated: exchange, allred (default
               $WORKLOADS)
  -n CYCLES    exchange cycles per run (default 100; 30 with -q)
  -i CALLS     MPI_Allreduce calls per allred run (default 2000; 300 with -q)
  --np N       ranks of the allreduce loop (default $NP; with --netns also
               the number of namespace hosts)
  --inject LIST  fault-injection rows (btl_usnic_debug_drop_rate) at these
               levels in percent (default: every nonzero level of -l;
               'none': no such rows)
  --all-udp    also expose usnic's startup self-test datagram to the loss
  --timeout S  kill one run after S seconds (default $RUN_TIMEOUT)
  --wait-idle S  before each run, wait up to S seconds for other processes
               to stop using the CPUs (default 0: don't wait, only report)
  --no-build   do not run make first
  -o NAME      result file prefix (default loss-<timestamp>; --netns adds
               the suffix -netns)
  --netns      between hosts made of network namespaces (h1, h2, ...: one
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
        -l) LEVELS=${2:-}; shift 2 || break ;;
        -w) WORKLOADS=${2:-}; shift 2 || break ;;
        -n) CYCLES=${2:-}; shift 2 || break ;;
        -i) ITERS=${2:-}; shift 2 || break ;;
        --np) NP=${2:-}; shift 2 || break ;;
        --inject) INJECT=${2:-}; INJECT_SET=1; shift 2 || break ;;
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
    [ -n "$ITERS" ] || ITERS=300
fi
[ -n "$CYCLES" ] || CYCLES=100
[ -n "$ITERS" ] || ITERS=2000
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
case "$ITERS" in ''|*[!0-9]*|0) echo "loss.sh: -i expects a positive integer" >&2; exit 2 ;; esac
case "$NP" in ''|*[!0-9]*) NP=0 ;; esac
if [ "$NP" -lt 2 ] || [ "$NP" -gt 32 ]; then
    echo "loss.sh: --np expects 2..32 ranks" >&2; exit 2
fi
case "$RUN_TIMEOUT" in ''|*[!0-9]*|0) echo "loss.sh: --timeout expects seconds" >&2; exit 2 ;; esac
case "$WAIT_IDLE" in ''|*[!0-9]*) echo "loss.sh: --wait-idle expects seconds" >&2; exit 2 ;; esac
WLIST=()
for w in ${WORKLOADS//,/ }; do
    [ "$w" = allreduce ] && w=allred
    case "$w" in
        exchange|allred) [[ " ${WLIST[*]} " == *" $w "* ]] || WLIST+=("$w") ;;
        *) echo "loss.sh: unknown workload '$w' (exchange, allred)" >&2; exit 2 ;;
    esac
done
[ ${#WLIST[@]} -gt 0 ] || { echo "loss.sh: -w expects exchange and/or allred" >&2; exit 2; }

# pct_numgen PCT: NUMGEN = the nft expression that is true for PCT % of the
# packets, 'numgen random mod 100 < P' or, with decimals, 'mod 10000 <
# P*100'; empty for 0.  Returns 1 (with a message) if PCT is no percentage.
pct_numgen() {
    local int frac thr
    NUMGEN=""
    if [[ $1 =~ ^([0-9]+)$ ]] && [ "$((10#$1))" -le 99 ]; then
        [ "$((10#$1))" -gt 0 ] && NUMGEN="numgen random mod 100 < $((10#$1))"
    elif [[ $1 =~ ^([0-9]*)\.([0-9]{1,2})$ ]]; then
        int=${BASH_REMATCH[1]:-0} frac=${BASH_REMATCH[2]}
        [ ${#frac} = 1 ] && frac=${frac}0
        thr=$((10#$int * 100 + 10#$frac))
        if [ $thr -gt 9999 ]; then
            echo "loss.sh: loss levels are percentages below 100 (got '$1')" >&2
            return 1
        fi
        [ $thr -gt 0 ] && NUMGEN="numgen random mod 10000 < $thr"
    else
        echo "loss.sh: a loss level is a percentage with up to 2 decimals, e.g. 1 or 0.5 (got '$1')" >&2
        return 1
    fi
    return 0
}
# canon_levels LIST: the percentages of LIST (spaces or commas) in one
# spelling each (1.50 -> 1.5, 05 -> 5, 0.0 -> 0), sorted, without duplicates
canon_levels() {
    local p
    for p in ${1//,/ }; do
        awk -v p="$p" 'BEGIN { s = sprintf("%.2f", p); sub(/0+$/, "", s); sub(/\.$/, "", s); print s }'
    done | sort -g -u | tr '\n' ' '
}
for p in ${LEVELS//,/ }; do pct_numgen "$p" || exit 2; done
read -r -a LV <<<"$(canon_levels "0 $LEVELS")"
LOSSY=()
for p in "${LV[@]}"; do [ "$p" = 0 ] || LOSSY+=("$p"); done
if [ $INJECT_SET = 0 ]; then
    INJ=("${LOSSY[@]}")
elif [ "$INJECT" = none ] || [ -z "$INJECT" ]; then
    INJ=()
else
    for p in ${INJECT//,/ }; do pct_numgen "$p" || exit 2; done
    INJ=()
    # 0 % fault injection would be the loss-free run again
    for p in $(canon_levels "$INJECT"); do [ "$p" = 0 ] || INJ+=("$p"); done
fi

[ "$(id -u)" = 0 ] || { echo "loss.sh: must run as root (network namespace, nftables)" >&2; exit 1; }
for c in ip nft mpirun python3 timeout; do
    command -v $c >/dev/null || { echo "loss.sh: '$c' not found" >&2; exit 1; }
done
ompi_info 2>/dev/null | grep -q 'btl: usnic' ||
    { echo "loss.sh: the usnic BTL is not installed (ompi_info | grep usnic)" >&2; exit 1; }
if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" >&2 || { echo "loss.sh: build failed" >&2; exit 1; }
fi
for w in "${WLIST[@]}"; do
    [ -x "$BUILD/$w" ] || { echo "loss.sh: $BUILD/$w missing (run make)" >&2; exit 1; }
done
# hosts of the test bed: 2 for the exchange, NP for the allreduce loop
NHOSTS=2
[[ " ${WLIST[*]} " == *" allred "* ]] && [ "$NP" -gt 2 ] && NHOSTS=$NP

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
# namespace; --netns: every host, h1 .. hNHOSTS); RUN_NS: where mpirun runs; IIF: the rules'
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
    trap - EXIT INT TERM HUP
    # the run in progress (timeout -> ip netns exec/mpirun in head), by PID
    if [ -n "$RUNPID" ] && kill -0 "$RUNPID" 2>/dev/null; then
        kill -TERM "$RUNPID" 2>/dev/null
    fi
    # every process still in the namespaces (mpirun, orted, ranks), by
    # PID, then the namespaces
    nsbed_remove loss.sh
    [ -n "$RUNPID" ] && wait "$RUNPID" 2>/dev/null
    RUNPID=""
}
if ! nsbed_up "$NHOSTS" >"$LOGDIR/testbed.log" 2>&1; then
    cat "$LOGDIR/testbed.log" >&2
    echo "loss.sh: cannot build the network-namespace test bed (see above)" >&2
    exit 1
fi
trap cleanup EXIT
trap 'echo "loss.sh: interrupted, cleaning up" >&2; exit 130' INT TERM HUP
# the BTL's tcp ports: no ephemeral port of the runtime (mpirun in head,
# orted and ranks in the hosts) can fall into the range
RULE_NS=()
for ((h = 1; h <= NHOSTS; h++)); do RULE_NS+=("$(nsbed_ns $h)"); done
for ns in "$NSB_HEAD" "${RULE_NS[@]}"; do
    ip netns exec "$ns" sysctl -q -w net.ipv4.ip_local_reserved_ports=40000-40099 ||
        { echo "loss.sh: cannot reserve ports 40000-40099 in $ns" >&2; exit 1; }
done
RUN_NS=$NSB_HEAD
IIF="iifname \"$NSB_DEV\" "
H1=$(nsbed_addr 1)
H2=$(nsbed_addr 2)
# hostfiles: h1 and h2 for the exchange, h1 .. hNHOSTS for the allreduce
# loop, one slot each
HOSTFILE=$LOGDIR/hosts.2
HOSTFILE_ALL=$LOGDIR/hosts.$NHOSTS
for h in 1 2; do echo "$(nsbed_addr $h) slots=1"; done >"$HOSTFILE"
for ((h = 1; h <= NHOSTS; h++)); do echo "$(nsbed_addr $h) slots=1"; done >"$HOSTFILE_ALL"
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
# $1 = udp | tcp, $2 = the drop condition (pct_numgen), empty: no loss
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
    [ -n "$2" ] && lose="$2 counter drop comment \"dropped\""
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


# mpirun of each workload: MPIRUN_EX (exchange, 2 ranks), MPIRUN_AR
# (allreduce loop, NP ranks); BIND_EX / BIND_AR say how, for the report
if [ $NETNS = 0 ]; then
    export FI_UDP_IFACE=lo
    MPI_COMMON=(mpirun --allow-run-as-root --mca oob_tcp_if_include lo -x FI_UDP_IFACE=lo)
    MPIRUN_EX=("${MPI_COMMON[@]}" -np 2 --bind-to core)
    MPIRUN_AR=("${MPI_COMMON[@]}" -np "$NP" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
    BIND_EX="2 ranks, --bind-to core"
    BIND_AR="$NP ranks on $(nproc) CPUs, --oversubscribe --bind-to none, mpi_yield_when_idle 1"
    NET=lo
    KILL_AFTER=5
else
    # mpirun in head, its daemons in the hosts (netns-rsh.sh), everything
    # on the test bed's subnet
    export FI_UDP_IFACE=$NSB_DEV
    MPI_COMMON=(mpirun --allow-run-as-root --mca plm_rsh_agent "$NSB_AGENT"
                --mca oob_tcp_if_include "$NSB_CIDR" -x FI_UDP_IFACE="$NSB_DEV")
    MPIRUN_EX=("${MPI_COMMON[@]}" -np 2 --hostfile "$HOSTFILE" "${BIND[@]}")
    MPIRUN_AR=("${MPI_COMMON[@]}" -np "$NP" --hostfile "$HOSTFILE_ALL" --bind-to none
               --mca mpi_yield_when_idle 1)
    BIND_EX="one rank per host: $BIND_DESC"
    BIND_AR="one rank per host on h1 .. h$NP ($H1 ..), $NP ranks on $(nproc) CPUs, --bind-to none, mpi_yield_when_idle 1"
    NET=$NSB_CIDR
    KILL_AFTER=10   # mpirun ends its remote daemons after a TERM
fi
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include "$NET"
           --mca btl_usnic_print_stats 1 --mca btl_base_verbose 5)
TCP_MCA=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NET"
         --mca btl_tcp_port_min_v4 40000 --mca btl_tcp_port_range_v4 100)

# conditions WORKLOAD-TRANSPORT-PCT: transport usnic or tcp with PCT %
# kernel loss (0: none), or inject = usnic with PCT % fault injection
CONDS=()
for w in "${WLIST[@]}"; do
    for t in usnic tcp; do
        for p in "${LV[@]}"; do CONDS+=("$w-$t-$p"); done
    done
    for p in "${INJ[@]}"; do CONDS+=("$w-inject-$p"); done
done
# cond_cmd COND: CMD (the command line), MATCH (udp | tcp: the packets the
# loss table matches) and DROP (its drop condition, empty: none)
cond_cmd() {
    local w t p rate
    IFS=- read -r w t p <<<"$1"
    if [ "$w" = exchange ]; then
        CMD=("${MPIRUN_EX[@]}")
        PROG=("$BUILD/exchange" -n "$CYCLES")
    else
        CMD=("${MPIRUN_AR[@]}")
        PROG=("$BUILD/allred" -n "$ITERS")
    fi
    pct_numgen "$p"
    DROP=$NUMGEN
    case "$t" in
        usnic) CMD+=("${USNIC_MCA[@]}" "${PROG[@]}"); MATCH=udp ;;
        inject) rate=$(awk -v p="$p" 'BEGIN { printf "%.6g", p / 100 }')
                CMD+=("${USNIC_MCA[@]}" --mca btl_usnic_debug_drop_rate "$rate" "${PROG[@]}")
                MATCH=udp DROP="" ;;
        tcp) CMD+=("${TCP_MCA[@]}" "${PROG[@]}"); MATCH=tcp ;;
    esac
}
# the drop rule of every level, for the report
RULES_DESC=""
for p in "${LOSSY[@]}"; do
    pct_numgen "$p"
    RULES_DESC+="${RULES_DESC:+, }$p %: \`$NUMGEN drop\`"
done


LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-before.txt"
# other runnable tasks before starting (4 samples over 1 s, minus this shell)
sum=0
for _ in 1 2 3 4; do read_running; sum=$((sum + RUNNING - 1)); sleep 0.25; done
IDLE_BEFORE=$(awk -v s=$sum 'BEGIN { printf "%.2f", s / 4 }')
echo "# loss.sh: $NS_DESC; workloads ${WLIST[*]}; loss ${LV[*]} %; fault injection ${INJ[*]:-none} %;" \
     "$CYCLES cycles, $ITERS allreduce calls ($NP ranks), $ROUNDS round(s)" >&2
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
        load_rules "$MATCH" "$DROP" || { echo "loss.sh: nft failed" >&2; exit 1; }
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
            # per host: round cond, then for h1, h2, ...: passed dropped
            # exempt passed-bytes dropped-bytes tcp-retrans (the run's
            # difference)
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
    export LOSS_NETNS_MTU=$NETNS_MTU LOSS_DEV=$NSB_DEV
    NCPU=$(nproc)
    export LOSS_SETUP="h1 .. h$NHOSTS ($H1 ..), each on a veth $NSB_DEV (MTU $NETNS_MTU) to the bridge br0 in namespace head ($NSB_HEAD_ADDR), where mpirun runs (daemons started in the hosts by test/lib/netns-rsh.sh); all traffic on $NSB_CIDR; the namespaces share this machine's $NCPU CPUs and kernel (test bed: test/lib/netns.sh)"
else
    export LOSS_NETNS_MTU=""
fi
export LOSS_LOGDIR=$LOGDIR LOSS_PREFIX=$RESDIR/$NAME LOSS_LEVELS="${LV[*]}" LOSS_INJECT="${INJ[*]}"
export LOSS_WORKLOADS="${WLIST[*]}" LOSS_CYCLES=$CYCLES LOSS_ITERS=$ITERS LOSS_NP=$NP LOSS_ROUNDS=$ROUNDS
export LOSS_LOAD_BEFORE="$LOAD_BEFORE" LOSS_LOAD_AFTER="$LOAD_AFTER" LOSS_IDLE_BEFORE=$IDLE_BEFORE
export LOSS_SECS=$((T_END - T_START)) LOSS_ALL_UDP=$ALL_UDP LOSS_RULES="$RULES_DESC"
export LOSS_BIND_EX="$BIND_EX" LOSS_BIND_AR="$BIND_AR" LOSS_TIMEOUT=$RUN_TIMEOUT
BENCH_DIR=$HERE python3 - <<'PY'
import sys, os, re, statistics

sys.path.insert(0, os.environ["BENCH_DIR"])
from benchlib import build_lines, usnic_stats, stats_sum, retrans_fields

E = os.environ
logdir, prefix = E["LOSS_LOGDIR"], E["LOSS_PREFIX"]
levels = E["LOSS_LEVELS"].split()          # "0" first
lossy = [p for p in levels if p != "0"]
inject = E["LOSS_INJECT"].split()
workloads = E["LOSS_WORKLOADS"].split()
cycles, iters, np_ = int(E["LOSS_CYCLES"]), int(E["LOSS_ITERS"]), int(E["LOSS_NP"])
rounds = int(E["LOSS_ROUNDS"])
all_udp = E["LOSS_ALL_UDP"] == "1"
netns_mtu = E.get("LOSS_NETNS_MTU", "")   # empty: one host
netns = bool(netns_mtu)
dev = E.get("LOSS_DEV", "eth0")
timeout = int(E["LOSS_TIMEOUT"])
NRANKS = {"exchange": 2, "allred": np_}
WNAME = {"exchange": "fixed exchange", "allred": "allreduce loop"}
TARGET_A, TARGET_B = 2.0, 0.02

# --netns: per-host counters of each run, (round, cond) -> [h1, h2, ...],
# each dict(passed, dropped, exempt, pbytes, dbytes, tcp_retrans)
HK = ("passed", "dropped", "exempt", "pbytes", "dbytes", "tcp_retrans")
hosts = {}
if netns and os.path.exists(os.path.join(logdir, "hosts.txt")):
    for line in open(os.path.join(logdir, "hosts.txt")):
        f = line.split()
        if len(f) < 2 or (len(f) - 2) % 6:
            continue
        v = [int(x) for x in f[2:]]
        hosts[(int(f[0]), f[1])] = [dict(zip(HK, v[i:i + 6])) for i in range(0, len(v), 6)]

RE_EXCH = re.compile(r"^exchange cycles=\d+ .*elapsed_s=([0-9.]+) errors=(\d+)", re.M)
RE_ALLRED = re.compile(r"^allred ranks=\d+ .*elapsed_s=([0-9.]+) .*errors=(\d+)", re.M)
runs = []
for line in open(os.path.join(logdir, "runs.txt")):
    f = line.split()
    if len(f) != 10:
        continue
    r, c, rc = int(f[0]), f[1], int(f[2])
    w, t, pct = c.split("-", 2)
    d = dict(round=r, cond=c, workload=w, transport=t, pct=pct, rc=rc, wall=float(f[3]),
             passed=int(f[4]), dropped=int(f[5]), exempt=int(f[6]), tcp_retrans=int(f[7]),
             samples=int(f[8]), runnable=int(f[9]))
    log = os.path.join(logdir, f"{c}.r{r}.log")
    txt = open(log, errors="replace").read() if os.path.exists(log) else ""
    m = (RE_EXCH if w == "exchange" else RE_ALLRED).search(txt)
    d["elapsed"] = float(m.group(1)) if m else None
    d["errors"] = int(m.group(2)) if m else None
    d["calls"] = {}
    if w == "allred" and m:
        line0 = txt[m.start():txt.find("\n", m.start())]
        d["calls"] = {k: float(v) for k, v in re.findall(r"\b(p50_us|p99_us|max_us|slow_1ms)=([0-9.]+)", line0)}
    st = usnic_stats(txt)
    d["stats"] = stats_sum(st)
    d["nstats"] = len(st)
    d["usnic_retrans"] = d["stats"].get("retrans", 0)
    d["usnic_inj"] = d["stats"].get("inj_drop", 0)
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
    d["timedout"] = rc in (124, 137)
    d["log"] = os.path.relpath(log, os.path.dirname(logdir))
    runs.append(d)


def baseline(d):
    """average runnable tasks of a run on an idle machine: the ranks + 0.5"""
    return NRANKS.get(d["workload"], 2) + 0.5


def busy_by(d):
    return d["runnable"] / d["samples"] - baseline(d) if d["samples"] else 0.0


def is_busy(d):
    return bool(d["samples"]) and busy_by(d) >= 0.5


def cname(w, t, p):
    return f"{w}-{t}-{p}"


def sel(c):
    return [d for d in runs if d["cond"] == c and d["ok"]]


def tstats(c):
    v = [d["elapsed"] for d in sel(c)]
    if not v:
        return None
    return statistics.median(v), min(v), max(v), len(v)


def fmt_t(a, c):
    n = len([d for d in runs if d["cond"] == c])
    if a is None:
        to = [d for d in runs if d["cond"] == c and d["timedout"]]
        if to:
            return f"timed out (> {timeout} s)"
        return "n/a"
    s = f"{a[0]:.3f} [{a[1]:.3f}-{a[2]:.3f}]"
    return s + (f" ({a[3]} of {n} runs)" if a[3] < n else "")


def med(v):
    return statistics.median(v) if v else None


def fnum(x, nd=0, unit=""):
    return "n/a" if x is None else f"{x:.{nd}f}{unit}"


def per_round_pen(lc, cc):
    """[(penalty %, busy)] per round"""
    out = []
    for r in range(1, rounds + 1):
        a = [d for d in sel(lc) if d["round"] == r]
        b = [d for d in sel(cc) if d["round"] == r]
        if a and b and b[0]["elapsed"] > 0:
            out.append(((a[0]["elapsed"] / b[0]["elapsed"] - 1) * 100, is_busy(a[0]) or is_busy(b[0])))
    return out


def compare(w, t, p):
    """time statistics of a lossy condition against its loss-free one"""
    cc = cname(w, "usnic" if t == "inject" else t, "0")
    lc = cname(w, t, p)
    a, b = tstats(cc), tstats(lc)
    res = dict(clean=a, lossy=b, ratio=None, pen=None, extra=None, best_pen=None, best_extra=None,
               lower_extra=None)
    if a and b and a[0] > 0:
        res["ratio"] = b[0] / a[0]
        res["pen"] = (b[0] / a[0] - 1) * 100
        res["extra"] = b[0] - a[0]
        if a[1] > 0:
            res["best_pen"] = (b[1] / a[1] - 1) * 100
            res["best_extra"] = b[1] - a[1]
    elif a and not b:
        # every lossy run timed out: at least the time limit minus the clean time
        to = [d for d in runs if d["cond"] == lc and d["timedout"]]
        if to:
            res["lower_extra"] = timeout - a[0]
    return res


cmp_ = {}
for w in workloads:
    for t in ("usnic", "tcp"):
        for p in lossy:
            cmp_[(w, t, p)] = compare(w, t, p)
    for p in inject:
        cmp_[(w, "inject", p)] = compare(w, "inject", p)

out = []
P = out.append
lvl = ", ".join(f"{p} %" for p in lossy) or "none"
if not netns:
    P(f"# usnic loss penalty - random packet loss {lvl}")
    P("")
    where = "loopback inside a private network namespace"
else:
    P(f"# usnic loss penalty - random packet loss {lvl} - network-namespace hosts over veth "
      f"(MTU {netns_mtu}) + bridge")
    P("")
    where = "network-namespace hosts"
P("Workloads:")
P("")
if "exchange" in workloads:
    P(f"- **exchange**: {cycles} cycles x ping-pong of 8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB, 1 MiB "
      f"(data checked), {E['LOSS_BIND_EX']}.")
if "allred" in workloads:
    P(f"- **allred**: {iters} x MPI_Allreduce (MPI_SUM) of 8 B .. 1 KiB of doubles, sizes in turn "
      f"(every result checked), {E['LOSS_BIND_AR']}.")
P("")
P(f"On {where}; {rounds} round(s), runs interleaved. Times: the workload's own elapsed seconds "
  "(MPI_Wtime on rank 0, connections already made), median [min-max] over rounds.")
if netns:
    P(f"Test bed: {E.get('LOSS_SETUP', '')}.")
    P(f"Kernel loss in both directions: the same nftables table in every host, input hook, drop on the "
      f"transport's packets arriving on the host's veth (`iifname \"{dev}\"`) - {E['LOSS_RULES'] or 'no level'} "
      f"(usnic: all UDP{'' if all_udp else ' except the startup self-test datagram'}; "
      "tcp: ports 40000-40099 = the BTL's connections only, so the runtime's TCP (ORTE/PMIx) is never dropped).")
else:
    P(f"Kernel loss: nftables input hook, drop on the transport's packets - {E['LOSS_RULES'] or 'no level'} "
      f"(usnic: all UDP{'' if all_udp else ' except the startup self-test datagram'}; "
      "tcp: ports 40000-40099 = the BTL's connections only).")
P("")

P("## Times and penalties")
P("")
for w in workloads:
    P(f"### {w} ({WNAME[w]})")
    P("")
    P("| transport | loss | time (s) | time / loss-free | penalty | extra s (median) | per-round penalties "
      "| penalty of the fastest runs | drops / packets | retransmits (median per run) |")
    P("|---|---|---|---:|---:|---:|---|---:|---|---:|")
    rowlist = [(t, p) for t in ("usnic", "tcp") for p in levels] + [("inject", p) for p in inject]
    for t, p in rowlist:
        c = cname(w, t, p)
        L = sel(c)
        label = {"usnic": "usnic", "tcp": "tcp", "inject": "usnic, fault injection"}[t]
        if t == "inject":
            lossdesc = f"btl_usnic_debug_drop_rate {float(p) / 100:.6g}"
        else:
            lossdesc = "0 %" if p == "0" else f"{p} % kernel (nft)"
        if t == "inject":
            dp = f"{sum(d['usnic_inj'] for d in L)} injected drops (all ranks, all rounds)"
        else:
            tp = sum(d["passed"] + d["dropped"] for d in L)
            td = sum(d["dropped"] for d in L)
            dp = f"{td} / {tp} ({100.0 * td / tp:.2f} %)" if tp else "n/a"
        key = "tcp_retrans" if t == "tcp" else "usnic_retrans"
        rt = fnum(med([d[key] for d in L]))
        if p == "0" and t != "inject":
            P(f"| {label} | {lossdesc} | {fmt_t(tstats(c), c)} | 1 | - | - | - | - | {dp} | {rt} |")
            continue
        cm = cmp_[(w, t, p)]
        pr = per_round_pen(c, cname(w, "usnic" if t == "inject" else t, "0"))
        prs = ", ".join(f"{x:.0f} %" + ("*" if b else "") for x, b in pr) if pr else "n/a"
        ratio = fnum(cm["ratio"], 2)
        extra = fnum(cm["extra"], 3)
        if cm["lower_extra"] is not None:
            extra = f"> {cm['lower_extra']:.1f}"
        P(f"| {label} | {lossdesc} | {fmt_t(cm['lossy'], c)} | {ratio} | {fnum(cm['pen'], 0, ' %')} | {extra} | "
          f"{prs} | {fnum(cm['best_pen'], 0, ' %')} | {dp} | {rt} |")
    P("")
    if w == "allred":
        P("Per-call times of the allreduce loop (rank 0's view of each MPI_Allreduce), medians over rounds:")
        P("")
        P("| transport | loss | median call (µs) | 99th percentile (µs) | slowest (µs) | calls of 1 ms or more |")
        P("|---|---|---:|---:|---:|---:|")
        for t, p in rowlist:
            L = [d for d in sel(cname(w, t, p)) if d["calls"]]
            if not L:
                continue
            label = {"usnic": "usnic", "tcp": "tcp", "inject": "usnic, fault injection"}[t]
            lossdesc = (f"{p} % injected" if t == "inject" else f"{p} %")
            g = lambda k: med([d["calls"].get(k) for d in L if k in d["calls"]])
            P(f"| {label} | {lossdesc} | {fnum(g('p50_us'), 1)} | {fnum(g('p99_us'), 0)} | {fnum(g('max_us'), 0)} "
              f"| {fnum(g('slow_1ms'))} of {iters} |")
        P("")
P("Penalty = median(with loss) / median(without) - 1; time / loss-free = median(with loss) / median(without); "
  "extra s = median(with loss) - median(without); per-round penalties compare the two runs "
  "of the same round (* = one of them ran while other work competed for the CPUs); "
  "fastest runs = min(with loss) / min(without) - 1. The fault-injection rows compare with the loss-free usnic runs.")
P("Retransmits: usnic = sum of `retrans=` over the ranks' `[usnic stats]` lines (segments actually resent); "
  + ("tcp = TcpRetransSegs of the namespace (/proc/net/snmp)." if not netns else
     "tcp = TcpRetransSegs summed over the hosts (each host namespace's /proc/net/snmp)."))
P("")

# ---- targets
P("## Targets for the next transport change")
P("")
P("| ratio | workload | loss | measured | target | verdict |")
P("|---|---|---|---:|---:|---|")


def verdict(v, tgt, bound=False):
    if v is None:
        return "n/a"
    if bound:
        return "met" if v <= tgt else "unknown (tcp timed out)"
    return "met" if v <= tgt else "NOT met"


if "allred" in workloads and lossy:
    pa = "5" if "5" in lossy else lossy[-1]
    cm = cmp_[("allred", "usnic", pa)]
    note = "" if pa == "5" else " (5 % not measured: highest level)"
    v = cm["ratio"]
    det = (f"{v:.2f} ({cm['lossy'][0]:.3f} s / {cm['clean'][0]:.3f} s)" if v is not None else "n/a")
    P(f"| (a) usnic time with loss / without | allred | {pa} %{note} | {det} | <= {TARGET_A:g} | {verdict(v, TARGET_A)} |")
elif lossy:
    P("| (a) usnic time with loss / without | allred | - | not run (-w) | <= 2 | n/a |")
for w in workloads:
    for p in lossy:
        cu, ct = cmp_[(w, "usnic", p)], cmp_[(w, "tcp", p)]
        v, det, bound = None, "n/a", False
        if cu["extra"] is not None and ct["extra"] is not None and ct["extra"] > 0:
            v = cu["extra"] / ct["extra"]
            det = f"{v:.3f} ({cu['extra']:.3f} s / {ct['extra']:.3f} s)"
            if rounds > 1 and cu["best_extra"] is not None and ct["best_extra"] and ct["best_extra"] > 0:
                det += f"; fastest runs {cu['best_extra'] / ct['best_extra']:.3f}"
            if cu["pen"] is not None and ct["pen"]:
                det += f"; in % {cu['pen'] / ct['pen']:.3f}"
        elif cu["extra"] is not None and ct["lower_extra"]:
            v = max(cu["extra"], 0) / ct["lower_extra"]
            bound = True
            det = f"< {v:.3f} ({cu['extra']:.3f} s / more than {ct['lower_extra']:.1f} s: tcp timed out)"
        elif cu["extra"] is not None and ct["extra"] is not None:
            det = f"n/a (tcp lost {ct['extra']:.3f} s)"
        P(f"| (b) usnic extra s / tcp extra s | {w} | {p} % | {det} | <= {TARGET_B:g} | {verdict(v, TARGET_B, bound)} |")
P("")
P("(a): median time at that loss / median loss-free time, usnic, allreduce loop. (b): seconds lost to the "
  "loss (median with loss - median without), usnic / btl/tcp, at the same loss; after it, the same from the "
  "fastest runs (min with loss - min without; with 2 or more rounds) and the ratio of the penalties in %.")
P("")

# ---- notes: failures, fallbacks, datagram sizes, counters, load
notes = []
for d in runs:
    if not d["ok"]:
        why = f"timed out after {timeout} s" if d["timedout"] else f"exit {d['rc']}"
        notes.append(f"round {d['round']} {d['cond']}: FAILED ({why}"
                     + (", data errors" if d["errors"] else "") + f"; see {d['log']})")
    if d["fallback"]:
        notes.append(f"round {d['round']} {d['cond']}: {d['fallback']} rank(s) fell back to small datagrams "
                     f"(startup self-test datagram lost); sizes {d['dgram']}")
    lossy_run = d["transport"] != "inject" and d["pct"] != "0"
    if lossy_run and d["ok"] and d["dropped"] == 0:
        notes.append(f"round {d['round']} {d['cond']}: the loss rule dropped nothing")
    need = 2 * cycles if d["workload"] == "exchange" else iters
    if d["ok"] and d["transport"] != "inject" and d["passed"] + d["dropped"] < need:
        notes.append(f"round {d['round']} {d['cond']}: the nft rule saw only {d['passed'] + d['dropped']} "
                     "packets - the transport's traffic did not match it")
    if d["ok"] and d["transport"] != "tcp" and d["nstats"] < NRANKS.get(d["workload"], 2):
        notes.append(f"round {d['round']} {d['cond']}: only {d['nstats']} `[usnic stats]` line(s) in the log")
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
if not all_udp:
    notes.append(f"startup self-test datagrams exempted from the loss rule: {ex}"
                 + (" (on the test bed a rank's self-test datagram goes to its own address, over lo, "
                    "so it never reaches the rule on the veth)" if netns and ex == 0 else ""))
# usnic's retransmission-related counters, whatever this build prints
rf = retrans_fields({k: 0 for d in runs for k in d["stats"]})
for w in workloads:
    parts = []
    for t, p in [("usnic", p) for p in levels] + [("inject", p) for p in inject]:
        L = sel(cname(w, t, p))
        if not L:
            continue
        s = {k: sum(d["stats"].get(k, 0) for d in L) for k in rf + ["tx_pkts", "dup_rx"]}
        desc = " ".join(f"{k}={s[k]}" for k in rf + ["dup_rx"])
        parts.append(f"{'inject ' if t == 'inject' else ''}{p} %: {desc} of tx_pkts={s['tx_pkts']}")
    if parts:
        notes.append(f"usnic counters, {w}, summed over ranks and rounds - " + "; ".join(parts))
if netns:
    # where the drops happened, and the size of what the rule saw
    for c in sorted({d["cond"] for d in runs if d["transport"] != "inject" and d["pct"] != "0"}):
        hs = [d["hosts"] for d in sel(c) if d["hosts"]]
        if not hs:
            continue
        parts = []
        for i in range(len(hs[0])):
            p_ = sum(h[i]["passed"] + h[i]["dropped"] for h in hs)
            d_ = sum(h[i]["dropped"] for h in hs)
            if p_:
                parts.append(f"h{i + 1} {d_} of {p_}")
        notes.append(f"{c}: dropped / packets arriving on each host's veth (all rounds): " + ", ".join(parts))
    avg = []
    for c in sorted({d["cond"] for d in runs if d["transport"] != "inject"}):
        hs = [h for d in sel(c) if d["hosts"] for h in d["hosts"]]
        pk = sum(h["passed"] + h["dropped"] for h in hs)
        by = sum(h["pbytes"] + h["dbytes"] for h in hs)
        if pk:
            avg.append(f"{c} {by / pk:.0f} B")
    if avg:
        notes.append("average size of the packets the loss rule saw (IP packets as the kernel hands them "
                     "to the input hook): " + ", ".join(avg))
    rt = []
    for c in sorted({d["cond"] for d in runs if d["transport"] == "tcp"}):
        hs = [d["hosts"] for d in sel(c) if d["hosts"]]
        if hs:
            rt.append(f"{c} " + " / ".join(f"h{i + 1} {sum(h[i]['tcp_retrans'] for h in hs)}"
                                           for i in range(len(hs[0]))
                                           if any(h[i]["passed"] + h[i]["dropped"] for h in hs)))
    if rt:
        notes.append("tcp RetransSegs per host (all rounds): " + ", ".join(rt))
busy = [f"r{d['round']} {d['cond']} (~{busy_by(d):.1f})" for d in runs if is_busy(d)]
load_note = (f"loadavg before {E['LOSS_LOAD_BEFORE']}, after {E['LOSS_LOAD_AFTER']} (our runs add up to "
             f"~2 for the exchange, ~{np_} for the allreduce loop); "
             f"other runnable tasks before start: {E['LOSS_IDLE_BEFORE']}")
if len(busy) > 8:
    ex_ = [busy_by(d) for d in runs if is_busy(d)]
    busy = [f"{len(busy)} of {len(runs)} runs (~{statistics.mean(ex_):.1f} other runnable tasks on average, "
            f"at most ~{max(ex_):.1f}; avg_runnable in the CSV)"]
if busy or float(E["LOSS_IDLE_BEFORE"]) >= 0.5:
    load_note += ". MACHINE BUSY - other work competed for the CPUs during: " + (", ".join(busy) if busy else "start")
else:
    load_note += "; no other CPU-bound work seen during the runs"
notes.append(load_note)
notes.append(f"{len(runs)} runs in {E['LOSS_SECS']} s")
notes.extend(build_lines(logdir))
P("Notes:")
P("")
for n in notes:
    P(f"- {n}")
md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)

# ---- CSV: every run, and one line per workload / transport / level
nh = max((len(d["hosts"]) for d in runs if d["hosts"]), default=0)
HX = [f"h{i + 1}_{k}" for i in range(nh) for k in ("passed", "dropped", "tcp_retrans")]
# usnic's counters by name (retrans= is usnic_retrans above)
SF = [k for k in rf + ["tx_pkts", "dup_rx"] if k != "retrans"]
SX = [f"usnic_{k}" for k in SF]
with open(prefix + "-runs.csv", "w") as f:
    f.write(",".join(["round", "workload", "transport", "loss_pct", "condition", "exit", "wall_s", "elapsed_s",
                      "errors", "passed", "dropped", "exempt", "usnic_retrans", "usnic_inj_drop", "tcp_retrans",
                      "datagram", "fallbacks", "avg_runnable", "busy", "p50_us", "p99_us", "max_us",
                      "slow_1ms"] + SX + HX + (["rule_bytes"] if netns else [])) + "\n")
    for d in runs:
        extra = [d["stats"].get(k, "") if d["nstats"] else "" for k in SF]
        if netns:
            h = d["hosts"] or []
            for i in range(nh):
                extra += [h[i][k] if i < len(h) else "" for k in ("passed", "dropped", "tcp_retrans")]
            extra.append(sum(x["pbytes"] + x["dbytes"] for x in h) if h else "")
        cl = d["calls"]
        f.write(",".join(str(x) for x in [
            d["round"], d["workload"], d["transport"], d["pct"], d["cond"], d["rc"], d["wall"],
            "" if d["elapsed"] is None else d["elapsed"], "" if d["errors"] is None else d["errors"],
            d["passed"], d["dropped"], d["exempt"], d["usnic_retrans"], d["usnic_inj"], d["tcp_retrans"],
            "/".join(map(str, d["dgram"])), d["fallback"],
            f"{d['runnable'] / d['samples']:.2f}" if d["samples"] else "", int(is_busy(d)),
            cl.get("p50_us", ""), cl.get("p99_us", ""), cl.get("max_us", ""),
            "" if "slow_1ms" not in cl else int(cl["slow_1ms"])] + extra) + "\n")


def g(x, nd):
    return "" if x is None else f"{x:.{nd}f}"


with open(prefix + "-summary.csv", "w") as f:
    f.write("workload,transport,loss_pct,runs_ok,median_s,min_s,max_s,time_ratio,penalty_pct,extra_s,"
            "fastest_penalty_pct,extra_s_ratio_to_tcp\n")
    for w in workloads:
        for t, p in [(t, p) for t in ("usnic", "tcp") for p in levels] + [("inject", p) for p in inject]:
            c = cname(w, t, p)
            a = tstats(c)
            cm = cmp_.get((w, t, p), {})
            rb = None
            if t == "usnic" and p != "0":
                ct = cmp_[(w, "tcp", p)]
                if cm.get("extra") is not None and ct["extra"] is not None and ct["extra"] > 0:
                    rb = cm["extra"] / ct["extra"]
            f.write(",".join([w, t, p, str(a[3] if a else 0), g(a and a[0], 6), g(a and a[1], 6),
                              g(a and a[2], 6), "1" if p == "0" and t != "inject" else g(cm.get("ratio"), 4),
                              g(cm.get("pen"), 1), g(cm.get("extra"), 6), g(cm.get("best_pen"), 1),
                              g(rb, 4)]) + "\n")
PY
exit 0
}
