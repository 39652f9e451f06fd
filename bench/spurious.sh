#!/usr/bin/env bash
# spurious.sh - retransmissions of the usnic BTL without any packet loss.
#
# Nothing drops a packet here (no nftables rule, no fault injection), so
# every segment the BTL sends again is, unless the kernel itself dropped
# the original (a full socket buffer), a spurious retransmission: a timer
# that fired before the ACK could come back, e.g. because the peer was
# descheduled.  This counts them on loss-free workloads:
#   exchange  build/exchange -n CYCLES: 2 ranks, ping-pongs of 8 B .. 1 MiB
#   allred    build/allred -n CALLS: NP ranks (default 4), small
#             MPI_Allreduce calls; on one host the ranks outnumber the
#             cores (--oversubscribe --bind-to none, mpi_yield_when_idle 1,
#             as in loss.sh)
#   bw        build/mpi_bench -t bw: 2 ranks, unidirectional bandwidth,
#             windows of 64 messages of 64 KiB .. 4 MiB (1 MiB with -q)
# in two setups (--where, default both):
#   lo        loopback inside a private network namespace made here (as
#             loss.sh), exchange and bw --bind-to core
#   netns     between "hosts" made of network namespaces (the test bed of
#             test/lib/netns.sh, as loss.sh --netns: veths of MTU 9000 or
#             --netns-mtu N to a bridge, one rank per host; exchange and bw
#             on h1 and h2, bound to cores 0 and 1; the allreduce loop on
#             h1 .. hNP, not bound)
# Every workload runs -r N times per setup (default 3), interleaved: round
# 1 runs each workload in each setup once, then round 2, ...
#
# Counted per run, from the '[usnic stats]' line every rank prints at
# finalize (--mca btl_usnic_print_stats 1), summed over the ranks:
#   tx_pkts        datagrams sent (data, ACKs, retransmissions)
#   retrans        segments actually sent again, and every other
#                  retransmission-related counter the installed build
#                  prints (timeout_retrans, fast_retrans, sack_retrans, and
#                  whatever a newer build adds - tail-loss probes, RTO
#                  expiries -: fields are found by name)
#   dup_rx         duplicates the receivers dropped: without loss, every
#                  retransmission that arrives is one
# reported per million packets sent.  Also per run, in every namespace that
# holds ranks: the kernel's UDP drop counters (/proc/net/snmp Udp:
# RcvbufErrors, SndbufErrors, InErrors; before/after the run) and, on the
# test bed, the veths' rx_dropped/tx_dropped - a resend of a datagram the
# kernel dropped is no spurious one, so the report also gives retrans
# minus those drops.  The runnable tasks are sampled during each run (as in
# loss.sh): a run averaging 0.5 more than its ranks + 0.5 is flagged busy,
# because other work on the CPUs is the usual cause of spurious resends.
#
# Run time on this 2-core machine: about 2 min with the defaults (18 runs:
# both setups, 3 rounds), about 20 s with -q (6 runs: 1 round, 30 cycles,
# 300 calls, bw up to 1 MiB).
#
# Output: markdown report on stdout and in bench/results/<name>.md, per-run
# CSV (every usnic counter by name) in bench/results/<name>-runs.csv, logs in
# bench/results/<name>-logs/.  Needs root (network namespaces).
set -u
# The whole script is one { ... } block, so bash parses it completely before
# running: editing it while it runs cannot break the running instance.
{
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results

ROUNDS=3
ROUNDS_SET=0
QUICK=0
WHERE=lo,netns
WORKLOADS=exchange,allred,bw
CYCLES=""
ITERS=""
NP=4
BW_MAX=""
EXTRA=()
DO_BUILD=1
RUN_TIMEOUT=300
WAIT_IDLE=0
NAME=""
NETNS_MTU=9000

usage() {
    cat <<EOF
usage: $0 [options]
  -r N         rounds (default 3; 1 with -q)
  -q           quick run: 1 round, 30 cycles, 300 allreduce calls, bw up
               to 1 MiB
  --where LIST setups, comma separated: lo, netns (default $WHERE)
  --netns      the same as --where netns
  --netns-mtu N  MTU of the test bed's veths (default $NETNS_MTU)
  -w LIST      workloads, comma separated: exchange, allred, bw (default
               $WORKLOADS)
  -n CYCLES    exchange cycles per run (default 100; 30 with -q)
  -i CALLS     MPI_Allreduce calls per allred run (default 2000; 300 with -q)
  --np N       ranks of the allreduce loop (default $NP; on the test bed also
               the number of hosts)
  --bw-max B   largest bw message size (default 4m; 1m with -q)
  --mca NAME VALUE  add '--mca NAME VALUE' to every run (repeatable), e.g.
               --mca btl_usnic_retrans_timeout 10000
  --timeout S  kill one run after S seconds (default $RUN_TIMEOUT)
  --wait-idle S  before each run, wait up to S seconds for other processes
               to stop using the CPUs (default 0: don't wait, only report)
  --no-build   do not run make first
  -o NAME      result file prefix (default spurious-<timestamp>)
  -h, --help   this text
All traffic stays in network namespaces made here (loopback of a private
one; the test bed's 10.211.0.0/24), which are removed again at the end.
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        -r) ROUNDS=${2:-}; ROUNDS_SET=1; shift 2 || break ;;
        -q) QUICK=1; shift ;;
        --where) WHERE=${2:-}; shift 2 || break ;;
        --netns) WHERE=netns; shift ;;
        --netns-mtu) NETNS_MTU=${2:-}; shift 2 || break ;;
        --netns-mtu=*) NETNS_MTU=${1#--netns-mtu=}; shift ;;
        -w) WORKLOADS=${2:-}; shift 2 || break ;;
        -n) CYCLES=${2:-}; shift 2 || break ;;
        -i) ITERS=${2:-}; shift 2 || break ;;
        --np) NP=${2:-}; shift 2 || break ;;
        --bw-max) BW_MAX=${2:-}; shift 2 || break ;;
        --mca)
            [ $# -ge 3 ] || { echo "spurious.sh: --mca expects a name and a value" >&2; exit 2; }
            EXTRA+=(--mca "$2" "$3"); shift 3 ;;
        --timeout) RUN_TIMEOUT=${2:-}; shift 2 || break ;;
        --wait-idle) WAIT_IDLE=${2:-}; shift 2 || break ;;
        --no-build) DO_BUILD=0; shift ;;
        -o) NAME=${2:-}; shift 2 || break ;;
        -h|--help) usage; exit 0 ;;
        *) echo "spurious.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if [ $QUICK = 1 ]; then
    [ $ROUNDS_SET = 1 ] || ROUNDS=1
    [ -n "$CYCLES" ] || CYCLES=30
    [ -n "$ITERS" ] || ITERS=300
    [ -n "$BW_MAX" ] || BW_MAX=1m
fi
[ -n "$CYCLES" ] || CYCLES=100
[ -n "$ITERS" ] || ITERS=2000
[ -n "$BW_MAX" ] || BW_MAX=4m
[ -n "$NAME" ] || NAME=spurious-$(date +%Y%m%d-%H%M%S)
case "$ROUNDS" in ''|*[!0-9]*|0) echo "spurious.sh: -r expects a positive integer" >&2; exit 2 ;; esac
case "$CYCLES" in ''|*[!0-9]*|0) echo "spurious.sh: -n expects a positive integer" >&2; exit 2 ;; esac
case "$ITERS" in ''|*[!0-9]*|0) echo "spurious.sh: -i expects a positive integer" >&2; exit 2 ;; esac
case "$NP" in ''|*[!0-9]*) NP=0 ;; esac
if [ "$NP" -lt 2 ] || [ "$NP" -gt 32 ]; then
    echo "spurious.sh: --np expects 2..32 ranks" >&2; exit 2
fi
[[ $BW_MAX =~ ^[0-9]+[kKmM]?$ ]] || { echo "spurious.sh: --bw-max expects a size, e.g. 1m" >&2; exit 2; }
case "$RUN_TIMEOUT" in ''|*[!0-9]*|0) echo "spurious.sh: --timeout expects seconds" >&2; exit 2 ;; esac
case "$WAIT_IDLE" in ''|*[!0-9]*) echo "spurious.sh: --wait-idle expects seconds" >&2; exit 2 ;; esac
case "$NETNS_MTU" in ''|*[!0-9]*) NETNS_MTU=0 ;; esac
if [ "$NETNS_MTU" -lt 1500 ] || [ "$NETNS_MTU" -gt 65535 ]; then
    echo "spurious.sh: --netns-mtu expects an MTU of 1500..65535" >&2; exit 2
fi
SETUPS=()
for s in ${WHERE//,/ }; do
    case "$s" in
        lo|netns) [[ " ${SETUPS[*]} " == *" $s "* ]] || SETUPS+=("$s") ;;
        *) echo "spurious.sh: unknown setup '$s' (lo, netns)" >&2; exit 2 ;;
    esac
done
WLIST=()
for w in ${WORKLOADS//,/ }; do
    [ "$w" = allreduce ] && w=allred
    case "$w" in
        exchange|allred|bw) [[ " ${WLIST[*]} " == *" $w "* ]] || WLIST+=("$w") ;;
        *) echo "spurious.sh: unknown workload '$w' (exchange, allred, bw)" >&2; exit 2 ;;
    esac
done
if [ ${#SETUPS[@]} = 0 ] || [ ${#WLIST[@]} = 0 ]; then
    echo "spurious.sh: nothing to run (--where, -w)" >&2; exit 2
fi

[ "$(id -u)" = 0 ] || { echo "spurious.sh: must run as root (network namespaces)" >&2; exit 1; }
for c in ip mpirun python3 timeout; do
    command -v $c >/dev/null || { echo "spurious.sh: '$c' not found" >&2; exit 1; }
done
if [[ " ${SETUPS[*]} " == *" netns "* ]]; then
    for c in unshare bridge; do
        command -v $c >/dev/null || { echo "spurious.sh: '$c' not found (needed by the netns setup)" >&2; exit 1; }
    done
fi
ompi_info 2>/dev/null | grep -q 'btl: usnic' ||
    { echo "spurious.sh: the usnic BTL is not installed (ompi_info | grep usnic)" >&2; exit 1; }
if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" >&2 || { echo "spurious.sh: build failed" >&2; exit 1; }
fi
for b in exchange allred mpi_bench; do
    [ -x "$BUILD/$b" ] || { echo "spurious.sh: $BUILD/$b missing (run make)" >&2; exit 1; }
done

mkdir -p "$RESDIR"
LOGDIR=$RESDIR/$NAME-logs
mkdir -p "$LOGDIR"
RUNS=$LOGDIR/runs.txt
: >"$RUNS"

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

# ------------------------------------------------------------- namespaces
# PRIV_NS: the private namespace of the lo setup; the test bed's namespaces
# are in NSB_MADE (test/lib/netns.sh).  cleanup ends the run in progress
# and every process left in them, by PID, then deletes them.
RUNPID=""
PRIV_NS=""
NSB_MADE=()
cleanup() {
    local p left
    trap - EXIT INT TERM HUP
    if [ -n "$RUNPID" ] && kill -0 "$RUNPID" 2>/dev/null; then
        kill -TERM "$RUNPID" 2>/dev/null
    fi
    if [ -n "$PRIV_NS" ] && ip netns list 2>/dev/null | grep -qw "^$PRIV_NS"; then
        for p in $(ip netns pids "$PRIV_NS" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            left=$(ip netns pids "$PRIV_NS" 2>/dev/null)
            [ -z "$left" ] && break
            sleep 0.3
        done
        for p in $(ip netns pids "$PRIV_NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$PRIV_NS" 2>/dev/null
    fi
    PRIV_NS=""
    nsbed_remove spurious.sh
    [ -n "$RUNPID" ] && wait "$RUNPID" 2>/dev/null
    RUNPID=""
}
trap cleanup EXIT
trap 'echo "spurious.sh: interrupted, cleaning up" >&2; exit 130' INT TERM HUP

# Per setup S (lo, netns): COUNT_NS_S, the namespaces that hold ranks (their
# kernel counters are read); MPIRUN_S_2 and MPIRUN_S_N, mpirun for 2 and for
# NP ranks; MCA_S, the setup's usnic parameters.  run_cmd and kernel_drops
# pick them by name.
SETUP_DESC=()
# shellcheck disable=SC2034
if [[ " ${SETUPS[*]} " == *" lo "* ]]; then
    PRIV_NS=usnic-spur-$$
    ip netns add "$PRIV_NS" || { echo "spurious.sh: cannot create network namespace $PRIV_NS" >&2; exit 1; }
    ip -n "$PRIV_NS" link set lo up
    COUNT_NS_lo=("$PRIV_NS")
    MPI_LO=(mpirun --allow-run-as-root --mca oob_tcp_if_include lo -x FI_UDP_IFACE=lo)
    MPIRUN_lo_2=("${MPI_LO[@]}" -np 2 --bind-to core)
    MPIRUN_lo_N=("${MPI_LO[@]}" -np "$NP" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
    MCA_lo=(--mca btl_usnic_if_include lo)
    SETUP_DESC+=("lo: loopback inside the private network namespace $PRIV_NS; exchange and bw 2 ranks --bind-to core, allred $NP ranks on $(nproc) CPUs --oversubscribe --bind-to none, mpi_yield_when_idle 1")
fi
NHOSTS=0
# shellcheck disable=SC2034
if [[ " ${SETUPS[*]} " == *" netns "* ]]; then
    NHOSTS=2
    [[ " ${WLIST[*]} " == *" allred "* ]] && [ "$NP" -gt 2 ] && NHOSTS=$NP
    TEST_TMP=$LOGDIR/testbed
    # shellcheck source=test/lib/mpitest.sh
    . "$REPO/test/lib/mpitest.sh"
    # shellcheck source=test/lib/netns.sh
    . "$REPO/test/lib/netns.sh"
    NSB_MTU=$NETNS_MTU      # read by nsbed_up
    if ! nsbed_up "$NHOSTS" >"$LOGDIR/testbed.log" 2>&1; then
        cat "$LOGDIR/testbed.log" >&2
        echo "spurious.sh: cannot build the network-namespace test bed (see above)" >&2
        exit 1
    fi
    # nsbed_up installed its own traps: cleanup covers both setups
    trap cleanup EXIT
    trap 'echo "spurious.sh: interrupted, cleaning up" >&2; exit 130' INT TERM HUP
    COUNT_NS_netns=()
    for ((h = 1; h <= NHOSTS; h++)); do COUNT_NS_netns+=("$(nsbed_ns $h)"); done
    H1=$(nsbed_addr 1)
    H2=$(nsbed_addr 2)
    HOSTFILE=$LOGDIR/hosts.2
    HOSTFILE_ALL=$LOGDIR/hosts.$NHOSTS
    for h in 1 2; do echo "$(nsbed_addr $h) slots=1"; done >"$HOSTFILE"
    for ((h = 1; h <= NHOSTS; h++)); do echo "$(nsbed_addr $h) slots=1"; done >"$HOSTFILE_ALL"
    netns_bind "$LOGDIR" "$H1" "$H2"
    MPI_NS=(mpirun --allow-run-as-root --mca plm_rsh_agent "$NSB_AGENT"
            --mca oob_tcp_if_include "$NSB_CIDR" -x FI_UDP_IFACE="$NSB_DEV")
    MPIRUN_netns_2=("${MPI_NS[@]}" -np 2 --hostfile "$HOSTFILE" "${BIND[@]}")
    MPIRUN_netns_N=("${MPI_NS[@]}" -np "$NP" --hostfile "$HOSTFILE_ALL" --bind-to none
                    --mca mpi_yield_when_idle 1)
    MCA_netns=(--mca btl_usnic_if_include "$NSB_CIDR")
    SETUP_DESC+=("netns: hosts h1 .. h$NHOSTS ($H1 ..) of the test bed (test/lib/netns.sh), each on a veth $NSB_DEV (MTU $NETNS_MTU) to the bridge br0 in namespace head, where mpirun runs; exchange and bw on h1 and h2 ($BIND_DESC), allred one rank per host on h1 .. h$NP, --bind-to none, mpi_yield_when_idle 1; the namespaces share this machine's $(nproc) CPUs and kernel")
fi
# shellcheck disable=SC2054 # "usnic,self" is one argument
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_print_stats 1 --mca btl_base_verbose 5)

# run_cmd SETUP WORKLOAD: CMD (in the namespace where mpirun runs) and NR
# (number of ranks)
run_cmd() {
    local s=$1 w=$2 mca prog
    local -n two=MPIRUN_${s}_2 all=MPIRUN_${s}_N
    mca="MCA_${s}[@]"
    case "$w" in
        exchange) prog=("$BUILD/exchange" -n "$CYCLES") ;;
        allred) prog=("$BUILD/allred" -n "$ITERS") ;;
        bw) prog=("$BUILD/mpi_bench" -t bw -s 64k -S "$BW_MAX" -r 3) ;;
    esac
    if [ "$w" = allred ]; then
        CMD=("${all[@]}")
        NR=$NP
    else
        CMD=("${two[@]}")
        NR=2
    fi
    CMD+=("${USNIC_MCA[@]}" "${!mca}" "${EXTRA[@]}" "${prog[@]}")
    if [ "$s" = lo ]; then
        CMD=(ip netns exec "$PRIV_NS" env FI_UDP_IFACE=lo "${CMD[@]}")
    else
        CMD=(ip netns exec "$NSB_HEAD" env FI_UDP_IFACE="$NSB_DEV" "${CMD[@]}")
    fi
}

# kernel_drops SETUP: KDROPS = "rcvbuf sndbuf inerrors linkdrops", summed
# over the namespaces that hold ranks (link drops: the test bed's veths,
# rx_dropped + tx_dropped)
kernel_drops() {
    local ns a b c d=0 x y
    local -n nss=COUNT_NS_$1
    local -a tot=(0 0 0)
    for ns in "${nss[@]}"; do
        read -r a b c <<<"$(ip netns exec "$ns" awk '/^Udp:/ {
                if (!h) { for (i = 1; i <= NF; i++) col[$i] = i; h = 1; next }
                print $col["RcvbufErrors"] + 0, $col["SndbufErrors"] + 0, $col["InErrors"] + 0; exit }' /proc/net/snmp)"
        tot=($((tot[0] + ${a:-0})) $((tot[1] + ${b:-0})) $((tot[2] + ${c:-0})))
        if [ "$1" = netns ]; then
            x=$(ip netns exec "$ns" cat "/sys/class/net/$NSB_DEV/statistics/rx_dropped" 2>/dev/null)
            y=$(ip netns exec "$ns" cat "/sys/class/net/$NSB_DEV/statistics/tx_dropped" 2>/dev/null)
            d=$((d + ${x:-0} + ${y:-0}))
        fi
    done
    KDROPS="${tot[*]} $d"
}

# after a run: wait up to 3 s for the run's processes to leave the
# namespaces of setup $1, then end what is left by PID (noted in log $2)
end_leftovers() {
    local ns p t left
    local -a nss
    if [ "$1" = lo ]; then nss=("$PRIV_NS"); else nss=("${NSB_MADE[@]}"); fi
    for ((t = 0; t < 30; t++)); do
        left=""
        for ns in "${nss[@]}"; do left+=$(ip netns pids "$ns" 2>/dev/null); done
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    echo "# spurious.sh: processes left after the run, ended: $left" >>"$2"
    for ns in "${nss[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
    done
    sleep 1
    for ns in "${nss[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
}


LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-before.txt"
echo "# spurious.sh: setups ${SETUPS[*]}; workloads ${WLIST[*]}; $ROUNDS round(s)" \
     "${EXTRA[*]:+; extra: ${EXTRA[*]}}" >&2
echo "# loadavg before: $LOAD_BEFORE" >&2
T_START=$(date +%s)
TOTAL=$((ROUNDS * ${#SETUPS[@]} * ${#WLIST[@]}))
RUNNO=0
for ((r = 1; r <= ROUNDS; r++)); do
    for s in "${SETUPS[@]}"; do
        for w in "${WLIST[@]}"; do
            RUNNO=$((RUNNO + 1))
            run_cmd "$s" "$w"
            out=$LOGDIR/$s-$w.r$r.log
            echo "# ${CMD[*]}" >"$out"
            wait_idle
            kernel_drops "$s"
            read -r -a k0 <<<"$KDROPS"
            progress "[round $r/$ROUNDS] run $RUNNO/$TOTAL: $s $w - $(( $(date +%s) - T_START ))s elapsed"
            sampled_run "$out" 0.2 timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}"
            rc=$RC n=$SAMPLES sum=$RUNNABLE_SUM t0=$T0 t1=$T1
            end_leftovers "$s" "$out"
            kernel_drops "$s"
            read -r -a k1 <<<"$KDROPS"
            # setup round workload ranks rc wall samples runnable_sum
            # rcvbuf sndbuf inerrors linkdrops (the run's differences)
            echo "$s $r $w $NR $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $n $sum" \
                 "$((k1[0] - k0[0])) $((k1[1] - k0[1])) $((k1[2] - k0[2])) $((k1[3] - k0[3]))" >>"$RUNS"
        done
    done
done
progress_done
T_END=$(date +%s)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-after.txt"
echo "# $TOTAL runs in $((T_END - T_START))s; loadavg after: $LOAD_AFTER; logs in ${LOGDIR#$HERE/}" >&2
cleanup

SP_SETUP=$(printf '%s\n' "${SETUP_DESC[@]}")
export SP_LOGDIR=$LOGDIR SP_PREFIX=$RESDIR/$NAME SP_ROUNDS=$ROUNDS SP_CYCLES=$CYCLES SP_ITERS=$ITERS
export SP_NP=$NP SP_BW_MAX=$BW_MAX SP_EXTRA="${EXTRA[*]}" SP_SETUP SP_LOAD_BEFORE="$LOAD_BEFORE"
export SP_LOAD_AFTER="$LOAD_AFTER" SP_SECS=$((T_END - T_START)) SP_WORKLOADS="${WLIST[*]}"
export SP_SETUPS="${SETUPS[*]}" SP_NETNS_MTU=$NETNS_MTU
BENCH_DIR=$HERE python3 - <<'PY'
import os, re, statistics, sys

sys.path.insert(0, os.environ["BENCH_DIR"])
from benchlib import build_lines, usnic_stats, stats_sum, retrans_fields

E = os.environ
logdir, prefix = E["SP_LOGDIR"], E["SP_PREFIX"]
setups, workloads = E["SP_SETUPS"].split(), E["SP_WORKLOADS"].split()
def size_text(z):
    m = re.fullmatch(r"(\d+)([kKmM]?)", z)
    if not m:
        return z
    n = int(m.group(1)) << {"": 0, "k": 10, "m": 20}[m.group(2).lower()]
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else \
        f"{n >> 10} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


WDESC = {"exchange": f"fixed exchange, {E['SP_CYCLES']} cycles of ping-pongs 8 B .. 1 MiB, 2 ranks",
         "allred": f"{E['SP_ITERS']} x MPI_Allreduce of 8 B .. 1 KiB, {E['SP_NP']} ranks",
         "bw": f"mpi_bench -t bw, 64 KiB .. {size_text(E['SP_BW_MAX'])}, windows of 64, 3 repetitions, 2 ranks"}

runs = []
for line in open(os.path.join(logdir, "runs.txt")):
    f = line.split()
    if len(f) != 12:
        continue
    d = dict(setup=f[0], round=int(f[1]), workload=f[2], ranks=int(f[3]), rc=int(f[4]), wall=float(f[5]),
             samples=int(f[6]), runnable=int(f[7]), rcvbuf=int(f[8]), sndbuf=int(f[9]), inerr=int(f[10]),
             linkdrop=int(f[11]))
    log = os.path.join(logdir, f"{d['setup']}-{d['workload']}.r{d['round']}.log")
    txt = open(log, errors="replace").read() if os.path.exists(log) else ""
    st = usnic_stats(txt)
    d["nstats"] = len(st)
    d["stats"] = stats_sum(st)
    m = re.search(r"^(?:exchange|allred) .*elapsed_s=([0-9.]+) .*?errors=(\d+)", txt, re.M)
    d["elapsed"] = float(m.group(1)) if m else None
    d["errors"] = int(m.group(2)) if m else (0 if d["workload"] == "bw" else None)
    if d["workload"] == "bw":
        bw = re.findall(r"^bw (\d+) ([0-9.]+) ", txt, re.M)
        d["bw"] = {int(a): float(b) for a, b in bw}
        ok_out = bool(bw)
    else:
        d["bw"] = {}
        ok_out = m is not None
    d["ok"] = d["rc"] == 0 and ok_out and not d["errors"] and d["nstats"] >= d["ranks"]
    d["dgram"] = sorted(set(int(x) for x in re.findall(r"btl:usnic: using provider \S+ device \S+ "
                                                        r"\([^)]*\): datagram (\d+) bytes", txt)))
    d["log"] = os.path.relpath(log, os.path.dirname(logdir))
    d["busy"] = bool(d["samples"]) and d["runnable"] / d["samples"] - (d["ranks"] + 0.5) >= 0.5
    runs.append(d)

rf = retrans_fields({k: 0 for d in runs for k in d["stats"]})


def per_m(n, tx):
    return "n/a" if not tx else f"{1e6 * n / tx:.1f}"


out = []
P = out.append
P("# usnic retransmissions without packet loss")
P("")
P("No packet is dropped on purpose (no nftables rule, no fault injection): a resend is spurious unless the "
  "kernel dropped the original (socket buffer full: UDP RcvbufErrors / SndbufErrors / InErrors, veth drops).")
P("")
P("Setups:")
P("")
for s in E["SP_SETUP"].splitlines():
    P(f"- {s}")
P("")
P("Workloads: " + "; ".join(f"**{w}**: {WDESC[w]}" for w in workloads) + ".")
P(f"{E['SP_ROUNDS']} round(s); every usnic run with `--mca btl_usnic_print_stats 1`"
  + (f" and `{E['SP_EXTRA']}`" if E["SP_EXTRA"] else "") + ".")
P("")
hdr = ["setup", "workload", "runs", "packets sent (tx_pkts)"] + \
      [f"{k} (per M sent)" for k in rf] + ["dup_rx (per M sent)", "kernel drops", "retrans - kernel drops",
                                           "retrans per M sent, per run"]
P("| " + " | ".join(hdr) + " |")
P("|" + "|".join(["---", "---"] + ["---:"] * (len(hdr) - 3) + ["---"]) + "|")
totals = {}
for s in setups:
    for w in workloads + ["all"]:
        L = [d for d in runs if d["setup"] == s and (w == "all" or d["workload"] == w) and d["ok"]]
        n_all = len([d for d in runs if d["setup"] == s and (w == "all" or d["workload"] == w)])
        tx = sum(d["stats"].get("tx_pkts", 0) for d in L)
        cells = [s, "**all**" if w == "all" else w, f"{len(L)}" + (f" of {n_all}" if len(L) < n_all else ""),
                 str(tx)]
        for k in rf:
            v = sum(d["stats"].get(k, 0) for d in L)
            cells.append(f"{v} ({per_m(v, tx)})")
        dup = sum(d["stats"].get("dup_rx", 0) for d in L)
        cells.append(f"{dup} ({per_m(dup, tx)})")
        kd = sum(d["rcvbuf"] + d["sndbuf"] + d["inerr"] + d["linkdrop"] for d in L)
        cells.append(str(kd))
        rt = sum(d["stats"].get("retrans", 0) for d in L)
        cells.append(str(max(rt - kd, 0)))
        if w == "all":
            cells.append("")
        else:
            cells.append(", ".join(per_m(d["stats"].get("retrans", 0), d["stats"].get("tx_pkts", 0))
                                   + ("*" if d["busy"] else "") for d in L) or "n/a")
        P("| " + " | ".join(cells) + " |")
        totals[(s, w)] = (rt, tx)
P("")
P("Counters: sums over the ranks' `[usnic stats]` lines and over the rounds; per M sent = per million "
  "datagrams sent (tx_pkts: data, ACKs and retransmissions). retrans = segments actually sent again; "
  + ", ".join(f"{k}" for k in rf if k != "retrans")
  + (" are the build's other retransmission-related counters (found by name; a timer's resend is counted when "
     "queued and may be cancelled by a late ACK)" if len(rf) > 1 else "")
  + "; dup_rx = duplicates the receivers dropped. Kernel drops = UDP RcvbufErrors + SndbufErrors + InErrors of the "
  "namespaces holding ranks, plus the veths' rx/tx_dropped on the test bed. * = the run was flagged busy "
  "(other work competed for the CPUs).")
P("")
for s in setups:
    rt, tx = totals[(s, "all")]
    P(f"**{s}: {per_m(rt, tx)} retransmissions per million packets sent** ({rt} of {tx}).")
P("")
# bandwidth, for context: did the transfers run at their usual speed?
bws = [d for d in runs if d["workload"] == "bw" and d["ok"] and d["bw"]]
if bws:
    P("bw medians (MB/s), for context:")
    P("")
    sizes = sorted({k for d in bws for k in d["bw"]})
    P("| setup | " + " | ".join(f"{z // 1024} KiB" if z < 1 << 20 else f"{z >> 20} MiB" for z in sizes) + " |")
    P("|---|" + "---:|" * len(sizes))
    for s in setups:
        L = [d for d in bws if d["setup"] == s]
        if L:
            P(f"| {s} | " + " | ".join(f"{statistics.median([d['bw'][z] for d in L if z in d['bw']]):.0f}"
                                       if any(z in d["bw"] for d in L) else "" for z in sizes) + " |")
    P("")

notes = []
for d in runs:
    if not d["ok"]:
        why = "timed out" if d["rc"] in (124, 137) else f"exit {d['rc']}"
        if d["rc"] == 0 and d["nstats"] < d["ranks"]:
            why = f"{d['nstats']} of {d['ranks']} `[usnic stats]` lines"
        notes.append(f"round {d['round']} {d['setup']} {d['workload']}: FAILED ({why}; see {d['log']})")
for s in setups:
    sz = sorted({z for d in runs if d["setup"] == s for z in d["dgram"]})
    notes.append(f"{s}: usnic datagram size(s) in use: " + (", ".join(map(str, sz)) or "none seen") + " bytes")
kd = [f"round {d['round']} {d['setup']} {d['workload']}: RcvbufErrors {d['rcvbuf']}, SndbufErrors {d['sndbuf']}, "
      f"InErrors {d['inerr']}, veth drops {d['linkdrop']}"
      for d in runs if d["rcvbuf"] or d["sndbuf"] or d["inerr"] or d["linkdrop"]]
notes.extend(kd or ["the kernel dropped no UDP datagram during any run"])
busy = [f"round {d['round']} {d['setup']} {d['workload']} (~{d['runnable'] / d['samples'] - d['ranks'] - 0.5:.1f})"
        for d in runs if d["busy"]]
if len(busy) > 8:
    busy = [f"{len(busy)} of {len(runs)} runs (avg_runnable in the CSV)"]
notes.append(f"loadavg before {E['SP_LOAD_BEFORE']}, after {E['SP_LOAD_AFTER']}; "
             + ("MACHINE BUSY - other work competed for the CPUs during: " + ", ".join(busy) if busy else
                "no other CPU-bound work seen during the runs"))
notes.append(f"{len(runs)} runs in {E['SP_SECS']} s")
notes.extend(build_lines(logdir))
P("Notes:")
P("")
for n in notes:
    P(f"- {n}")
md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)

keys = []
for d in runs:
    for k in d["stats"]:
        if k not in keys:
            keys.append(k)
with open(prefix + "-runs.csv", "w") as f:
    f.write(",".join(["setup", "round", "workload", "ranks", "exit", "wall_s", "elapsed_s", "avg_runnable", "busy",
                      "udp_rcvbuf_errors", "udp_sndbuf_errors", "udp_in_errors", "veth_drops", "stats_lines"]
                     + [f"usnic_{k}" for k in keys]) + "\n")
    for d in runs:
        f.write(",".join(str(x) for x in [
            d["setup"], d["round"], d["workload"], d["ranks"], d["rc"], d["wall"],
            "" if d["elapsed"] is None else d["elapsed"],
            f"{d['runnable'] / d['samples']:.2f}" if d["samples"] else "", int(d["busy"]),
            d["rcvbuf"], d["sndbuf"], d["inerr"], d["linkdrop"], d["nstats"]]
            + [d["stats"].get(k, "") for k in keys]) + "\n")
PY
exit 0
}
