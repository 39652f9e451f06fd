#!/usr/bin/env bash
# run.sh - compare the usnic BTL with btl/tcp, mtl/ofi over udp;ofi_rxd and
# the raw libfabric udp provider, on one host over loopback only, or (with
# --netns) between two "hosts" made of network namespaces on this machine,
# each with a veth to a bridge (the test bed of test/lib/netns.sh).  rawgso
# (bench/gso_stream) streams the same datagram sizes over plain kernel UDP
# sockets, with and without UDP_SEGMENT/UDP_GRO: the bandwidth ceiling of a
# kernel-UDP backend (docs/perf-gso-raw.md).  usnic
# runs twice: with interface-MTU datagrams (usnic) and with the provider's
# advertised 1472-byte ones (usnic1472); each run's retransmissions come
# from the '[usnic stats]' lines of btl_usnic_print_stats.
#
# Every round runs each transport once (order rotated between rounds so no
# transport always runs first); the per-round medians are then combined:
# reported median = median of the per-round medians, min/max = extremes of
# the per-round min/max.  Results: markdown table on stdout (and in .md),
# CSV files and a PNG plot under bench/results/ (--netns: names end in -netns).
# Full loopback runs end with bench/callgrind.sh's instruction count for one
# 8-byte send+receive, appended to the report (--no-callgrind skips it).
set -u
# The whole script is one { ... } block, so bash parses it completely before
# running: editing run.sh while it runs cannot break the running instance.
{
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
REPO=$(cd "$HERE/.." && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results

# the command line, directory and commit for the report (lib.sh)
run_identity "$@"
# The largest UDP payload on lo: what usnic uses by default (interface MTU
# minus IP and UDP headers, at most 65507).
MAXDGRAM=$(lo_maxdgram)
NETNS=0
NETNS_MTU=9000

ROUNDS=3
ROUNDS_SET=0
QUICK=0
LOSS=""
TESTS=lat,bw,bibw,rate
MINSIZE=0
MAXSIZE=4m
TRANSPORTS=usnic,usnic1472,tcp,rxd,raw,rawgso
DGRAM=""
CEILING=""
RUN_TIMEOUT=600
WAIT_IDLE=0
DO_BUILD=1
CALLGRIND=1
STAMP=$(date +%Y%m%d-%H%M%S)

usage() {
    cat <<EOF
usage: $0 [options]
  --netns         run between two hosts made of network namespaces (h1, h2,
                  one rank each; test/lib/netns.sh) instead of over loopback
  --netns-mtu N   MTU of the hosts' veths with --netns (default $NETNS_MTU;
                  1500..65535); usnic then sends N-28-byte datagrams
  -r N            rounds (default 3; 1 with -q)
  -q              quick run: sizes up to 64 KiB, fewer repetitions, 1 round
  --loss RATE     add '--mca btl_usnic_debug_drop_rate RATE' to the usnic runs
  -t tests        mpi_bench tests (default $TESTS)
  -s / -S bytes   mpi_bench size range (default $MINSIZE..$MAXSIZE)
  -T list         transports to run (default $TRANSPORTS);
                  usnic1472 = usnic with --mca btl_usnic_udp_datagram_size -1
                  (the provider's advertised 1472-byte datagrams instead of
                  the interface-MTU ones, $MAXDGRAM bytes on lo, MTU-28 with --netns);
                  rawgso = bench/build/gso_stream: kernel UDP streaming of the -d
                  sizes, modes plain (sendto), gso (UDP_SEGMENT + UDP_GRO) and
                  gsoiov (gso with a 56-byte header iovec per datagram), and an
                  8-byte ping-pong (pp)
  -d list         raw datagram size(s) for fi_dgram_bench and gso_stream streaming (default
                  1472,$MAXDGRAM; --netns: 1472,MTU-28; e.g. 1472,8972,32000,60000);
                  1472 and usnic's datagram size are always added
  --ceiling B     raw streaming size used as the usnic bw reference for messages
                  larger than it (default $MAXDGRAM, usnic's datagram size on lo,
                  MTU-28 with --netns; usnic1472 is always compared with the
                  1472-byte streaming)
  --timeout S     kill a single benchmark run after S seconds (default $RUN_TIMEOUT)
  --wait-idle S   before each run wait up to S seconds for other processes to
                  stop using the CPUs (default 0: don't wait, only report)
  --no-build      do not run make first
  --no-callgrind  skip the instruction count (bench/callgrind.sh, about 30 s)
                  that full loopback runs append to the report (-q and
                  --netns runs skip it)
  -o NAME         result file prefix (default bench-<timestamp>; --netns adds
                  the suffix -netns)
  -h, --help      this text
All traffic stays on 127.0.0.1 / lo; with --netns on 10.211.0.0/24 between
the namespaces, which are removed again at the end (needs root).
EOF
}

NAME=""
while [ $# -gt 0 ]; do
    case "$1" in
        --netns) NETNS=1; shift ;;
        --netns-mtu) NETNS_MTU=$2; shift 2 ;;
        --netns-mtu=*) NETNS_MTU=${1#--netns-mtu=}; shift ;;
        -r) ROUNDS=$2; ROUNDS_SET=1; shift 2 ;;
        -q) QUICK=1; shift ;;
        --loss) LOSS=$2; shift 2 ;;
        --loss=*) LOSS=${1#--loss=}; shift ;;
        -t) TESTS=$2; shift 2 ;;
        -s) MINSIZE=$2; shift 2 ;;
        -S) MAXSIZE=$2; shift 2 ;;
        -T) TRANSPORTS=$2; shift 2 ;;
        -d) DGRAM=$2; shift 2 ;;
        --ceiling) CEILING=$2; shift 2 ;;
        --timeout) RUN_TIMEOUT=$2; shift 2 ;;
        --wait-idle) WAIT_IDLE=$2; shift 2 ;;
        --no-build) DO_BUILD=0; shift ;;
        --no-callgrind) CALLGRIND=0; shift ;;
        -o) NAME=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$NAME" ] || NAME=bench-$STAMP
if [ $NETNS = 1 ]; then
    case "$NETNS_MTU" in ''|*[!0-9]*) NETNS_MTU=0 ;; esac
    if [ "$NETNS_MTU" -lt 1500 ] || [ "$NETNS_MTU" -gt 65535 ]; then
        echo "run.sh: --netns-mtu expects an MTU of 1500..65535" >&2; exit 2
    fi
    # usnic's default datagram: the veth MTU minus IP and UDP headers
    MAXDGRAM=$((NETNS_MTU - 28))
    [ $MAXDGRAM -le 65507 ] || MAXDGRAM=65507
    [[ $NAME == *-netns ]] || NAME=$NAME-netns
    [ "$(id -u)" = 0 ] || { echo "run.sh: --netns needs root (network namespaces)" >&2; exit 1; }
fi
[ -n "$DGRAM" ] || DGRAM=1472   # usnic's size is added next
# the raw reference sizes of usnic1472 and usnic must be measured
for d in 1472 $MAXDGRAM; do
    [[ ",$DGRAM," == *",$d,"* ]] || DGRAM=$DGRAM,$d
done
[ -n "$CEILING" ] || CEILING=$MAXDGRAM
case "$CEILING" in ''|*[!0-9]*) echo "run.sh: bad --ceiling / -d value" >&2; exit 2 ;; esac
[[ ",$DGRAM," == *",$CEILING,"* ]] || DGRAM=$DGRAM,$CEILING
if [ -n "$LOSS" ] && ! [[ $LOSS =~ ^[0-9]*\.?[0-9]+([eE]-?[0-9]+)?$ ]]; then
    echo "run.sh: --loss expects a number, e.g. 0.01" >&2; exit 2
fi
case "$ROUNDS" in ''|*[!0-9]*|0) echo "run.sh: -r expects a positive integer" >&2; exit 2 ;; esac
case "$RUN_TIMEOUT$WAIT_IDLE" in *[!0-9]*) echo "run.sh: --timeout/--wait-idle expect seconds" >&2; exit 2 ;; esac

MPI_REPS=5
MPI_EXTRA=()
RAW_REPS=5
RAW_T=50
RAW_SMALL=0,1,2,4,8,16,32,64,128,256,512,1024
RAWGSO_T=1          # gso_stream: seconds per measurement
RAWGSO_MODES=plain,gso,gsoiov,pp
if [ $QUICK = 1 ]; then
    [ $ROUNDS_SET = 1 ] || ROUNDS=1
    [ "$MAXSIZE" = 4m ] && MAXSIZE=64k
    MPI_REPS=3
    MPI_EXTRA=(-T 10)
    RAW_REPS=3
    RAW_T=30
    RAW_SMALL=0,8,64,1024
    RAWGSO_T=0.5
fi

command -v python3 >/dev/null || { echo "run.sh: python3 is needed for the report" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "run.sh: mpirun not found" >&2; exit 1; }

if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" >&2 || { echo "run.sh: build failed" >&2; exit 1; }
fi
[ -x "$BUILD/mpi_bench" ] && [ -x "$BUILD/fi_dgram_bench" ] || {
    echo "run.sh: binaries missing in $BUILD (run make)" >&2; exit 1; }

mkdir -p "$RESDIR"
LOGDIR=$RESDIR/$NAME-logs
mkdir -p "$LOGDIR"

declare -A STATUS   # transport -> ok | n/a: reason
declare -A CMDLINE
declare -A DGINFO   # usnic transports: datagram size seen in the probe
IFS=, read -r -a TLIST <<<"$TRANSPORTS"
for t in "${TLIST[@]}"; do
    case "$t" in usnic|usnic1472|tcp|rxd|raw|rawgso) ;; *) echo "run.sh: unknown transport '$t'" >&2; exit 2 ;; esac
done

# Where each command runs: CMDX / SRVX are prefixes (ip netns exec NS) of the
# measured command CMD and, for raw udp across namespaces, of its server SRV
# (empty on loopback).  STARTED: every background pid (ended by pid only).
CMDX=()
SRV=()
SRVX=()
MPIX=()
RAW_PEER=()
RAWGSO_PEER=(-a 127.0.0.1)   # loopback: gso_stream forks its own receiver
SRVPID=""
STARTED=()
SETUP=""    # --netns: the test bed, for the report
if [ $NETNS = 1 ]; then
    # The test bed of the MPI tests: namespaces head (mpirun, bridge br0),
    # h1 and h2 (one veth each, NSB_DEV, to the bridge), addresses in
    # NSB_CIDR.  Built here, torn down by netns_teardown (EXIT trap).
    TEST_TMP=$LOGDIR/testbed
    # shellcheck source=test/lib/mpitest.sh
    . "$REPO/test/lib/mpitest.sh"
    # shellcheck source=test/lib/netns.sh
    . "$REPO/test/lib/netns.sh"
    NSB_MTU=$NETNS_MTU
    # End what this script started (by pid), then the namespaces (and any
    # process still in them); check that none is left.
    netns_teardown() {
        local p
        for p in "${STARTED[@]}"; do kill -TERM "$p" 2>/dev/null; done
        STARTED=()
        nsbed_remove run.sh
    }
    if ! nsbed_up 2 >"$LOGDIR/testbed.log" 2>&1; then
        cat "$LOGDIR/testbed.log" >&2
        echo "run.sh: cannot build the two-namespace test bed (see above)" >&2
        exit 1
    fi
    # nsbed_up's EXIT trap, extended to what this script started itself
    trap netns_teardown EXIT
    H1=$(nsbed_addr 1)
    H2=$(nsbed_addr 2)
    UDP_IF=$NSB_DEV
    HOSTFILE=$(nsbed_hostfile 1)
    netns_bind "$LOGDIR" "$H1" "$H2"
    SETUP="two network-namespace hosts over veth (MTU $NETNS_MTU) + bridge: h1 $H1 and h2 $H2,"
    SETUP+=" each on a veth $NSB_DEV (MTU $NETNS_MTU) to the bridge br0 in namespace head ($NSB_HEAD_ADDR),"
    SETUP+=" where mpirun runs (daemons started in h1/h2 by test/lib/netns-rsh.sh); all traffic on $NSB_CIDR;"
    SETUP+=" one rank per host, $BIND_DESC; raw udp: fi_dgram_bench server (-L) in h2, client (-C) in h1"
    SETUP+=" (rawgso: gso_stream likewise),"
    SETUP+=" control over TCP between the same addresses; the namespaces share this machine's"
    SETUP+=" $(nproc) CPUs and kernel (test bed: test/lib/netns.sh)"
    echo "# $SETUP" >&2
    export FI_UDP_IFACE=$NSB_DEV
    MPIX=(ip netns exec "$NSB_HEAD")
    MPIRUN=(mpirun --allow-run-as-root -np 2 --hostfile "$HOSTFILE" "${BIND[@]}"
            --mca plm_rsh_agent "$NSB_AGENT"
            --mca oob_tcp_if_include "$NSB_CIDR" -x FI_UDP_IFACE="$NSB_DEV")
    NET=$NSB_CIDR
    RAW_PEER=(-a "$H1" -C "$H2")
    RAWGSO_PEER=(-C "$H2")
else
    # Everything on loopback: OOB wire-up, BTLs, and the udp provider (used by
    # usnic and by rxd) restricted to interface lo.
    UDP_IF=lo
    export FI_UDP_IFACE=lo
    MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core
            --mca oob_tcp_if_include lo -x FI_UDP_IFACE=lo)
    NET=lo
fi
# print_stats: each rank prints '[usnic stats] ... tx_pkts=N ... retrans=N ...'
# on stderr at MPI_Finalize (the report sums them per run)
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include "$NET"
           --mca btl_usnic_print_stats 1)
[ -n "$LOSS" ] && USNIC_MCA+=(--mca btl_usnic_debug_drop_rate "$LOSS")
USNIC1472_MCA=("${USNIC_MCA[@]}" --mca btl_usnic_udp_datagram_size -1)
TCP_MCA=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NET")
RXD_MCA=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "udp;ofi_rxd")
MPI_ARGS=(-t "$TESTS" -s "$MINSIZE" -S "$MAXSIZE" -r "$MPI_REPS" "${MPI_EXTRA[@]}")
if [ $NETNS = 1 ]; then
    RAW_ARGS=(-p udp "${RAW_PEER[@]}" -d "$DGRAM" -b "$RAW_SMALL" -S 1024 -r "$RAW_REPS" -T "$RAW_T")
else
    RAW_ARGS=(-p udp -a 127.0.0.1 -d "$DGRAM" -b "$RAW_SMALL" -S 1024 -r "$RAW_REPS" -T "$RAW_T")
fi
# with the latency test, also a raw ping-pong of every size above one
# datagram, as trains of interface-MTU datagrams (pptrain)
[[ ",$TESTS," == *",lat,"* ]] && RAWGSO_MODES=$RAWGSO_MODES,pptrain
RAWGSO_ARGS=("${RAWGSO_PEER[@]}" -m "$RAWGSO_MODES" -d "$DGRAM" -r "$RAW_REPS" -t "$RAWGSO_T"
             -T "$MINSIZE:$MAXSIZE")

# command line of a transport, into array CMD (and CMDX, SRV, SRVX)
set_cmd() {
    CMDX=("${MPIX[@]}")
    SRV=()
    SRVX=()
    case "$1" in
        usnic) CMD=("${MPIRUN[@]}" "${USNIC_MCA[@]}" "$BUILD/mpi_bench" "${@:2}") ;;
        usnic1472) CMD=("${MPIRUN[@]}" "${USNIC1472_MCA[@]}" "$BUILD/mpi_bench" "${@:2}") ;;
        tcp)   CMD=("${MPIRUN[@]}" "${TCP_MCA[@]}" "$BUILD/mpi_bench" "${@:2}") ;;
        rxd)   CMD=("${MPIRUN[@]}" "${RXD_MCA[@]}" "$BUILD/mpi_bench" "${@:2}") ;;
        raw)   CMD=("$BUILD/fi_dgram_bench" "${@:2}")
               CMDX=()
               if [ $NETNS = 1 ]; then
                   # the client measures in h1; its server echoes / receives in h2
                   CMDX=(ip netns exec "$(nsbed_ns 1)")
                   SRV=("$BUILD/fi_dgram_bench" -L "$H2")
                   SRVX=(ip netns exec "$(nsbed_ns 2)")
               fi ;;
        rawgso) CMD=("$BUILD/gso_stream" "${@:2}")
               CMDX=()
               if [ $NETNS = 1 ]; then
                   # the client sends in h1; its server receives / echoes in h2
                   CMDX=(ip netns exec "$(nsbed_ns 1)")
                   SRV=("$BUILD/gso_stream" -L "$H2")
                   SRVX=(ip netns exec "$(nsbed_ns 2)")
               fi ;;
    esac
}

# set_cmd with the arguments of a measured run of transport $1
set_run_cmd() {
    case "$1" in
        raw) set_cmd raw "${RAW_ARGS[@]}" ;;
        rawgso) set_cmd rawgso "${RAWGSO_ARGS[@]}" ;;
        *) set_cmd "$1" "${MPI_ARGS[@]}" ;;
    esac
}

# the command line of set_cmd's result, as shown in the report
cmd_text() {
    local c="${CMDX[*]}${CMDX[*]:+ }${CMD[*]}"
    [ ${#SRV[@]} -gt 0 ] && c="${SRVX[*]} ${SRV[*]} & $c"
    printf '%s' "$c"
}

# launch OUT ERR SECONDS [SERVER_LOG]: start set_cmd's command in the
# background under a time limit (its server first, if it has one); PID and
# SRVPID.  ERR empty: stderr goes to OUT as well.
launch() {
    SRVPID=""
    if [ ${#SRV[@]} -gt 0 ]; then
        "${SRVX[@]}" timeout -k 10 "$3" "${SRV[@]}" </dev/null >"$4" 2>&1 &
        SRVPID=$!
        STARTED+=("$SRVPID")
    fi
    if [ -n "$2" ]; then
        "${CMDX[@]}" timeout -k 10 "$3" "${CMD[@]}" </dev/null >"$1" 2>"$2" &
    else
        "${CMDX[@]}" timeout -k 10 "$3" "${CMD[@]}" </dev/null >"$1" 2>&1 &
    fi
    PID=$!
    STARTED+=("$PID")
}

# forget a pid of STARTED once it has been waited for
unstarted() {
    local p keep=()
    for p in "${STARTED[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    STARTED=("${keep[@]}")
}

# server_wait: after the client ended, its server (if any) ends by itself
# within 15 s, or is ended by pid; SRVRC = its exit status (0: no server).
server_wait() {
    local t
    SRVRC=0
    [ -n "$SRVPID" ] || return 0
    for ((t = 0; t < 150; t++)); do
        kill -0 "$SRVPID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$SRVPID" 2>/dev/null && kill -TERM "$SRVPID" 2>/dev/null
    wait "$SRVPID"
    SRVRC=$?
    unstarted "$SRVPID"
    SRVPID=""
}


# Probe: a tiny run must succeed (and, for rxd, really use mtl/ofi).
probe() {
    local t=$1 log=$LOGDIR/probe-$1.log
    if [[ $t == usnic* ]] && ! ompi_info 2>/dev/null | grep -q 'btl: usnic'; then
        STATUS[$t]="n/a: usnic BTL not installed (ompi_info | grep 'btl: usnic' is empty)"
        return
    fi
    if [ "$t" = raw ]; then
        set_cmd raw "${RAW_PEER[@]}" -t lat -S 8 -s 8 -d 8 -b 8 -r 1 -n 20
    elif [ "$t" = rawgso ]; then
        set_cmd rawgso "${RAWGSO_PEER[@]}" -m gso,pp -d 1472 -r 1 -t 0.2
    elif [ "$t" = rxd ]; then
        set_cmd rxd -t lat -s 8 -S 8 -r 1 -i 20 -x 2
        CMD=("${CMD[@]:0:${#MPIRUN[@]}}" --mca mtl_base_verbose 10 "${CMD[@]:${#MPIRUN[@]}}")
    else
        set_cmd "$t" -t lat -s 8 -S 8 -r 1 -i 20 -x 2
        # usnic: verbose, to see the datagram size the BTL chose
        [[ $t == usnic* ]] &&
            CMD=("${CMD[@]:0:${#MPIRUN[@]}}" --mca btl_base_verbose 5 "${CMD[@]:${#MPIRUN[@]}}")
    fi
    progress "probing $t ..."
    # in the background, so that a signal runs the EXIT trap at once
    launch "$log" "" 120 "$LOGDIR/probe-$t-server.log"
    wait "$PID"
    local rc=$?
    unstarted "$PID"
    server_wait
    if [ $rc -eq 0 ] && [ "$SRVRC" -ne 0 ]; then
        echo "run.sh: the ${SRV[0]##*/} server exited with status $SRVRC:" >>"$log"
        cat "$LOGDIR/probe-$t-server.log" >>"$log"
        rc=$SRVRC
    fi
    if [ $rc -ne 0 ]; then
        local why
        why=$(grep -vE '^\s*$|^-+$|^\[[^]]+\] (mca|select|\.\./)' "$log" | head -4 |
              tr '\n' ' ' | tr -s ' ' | cut -c1-300)
        [ -n "$why" ] || why=$(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-300)
        STATUS[$t]="n/a: probe run failed ($why; see ${log#$HERE/})"
        return
    fi
    local expect='^lat 8 '
    [ "$t" = rawgso ] && expect='^gso_stream: mode=gso '
    if ! grep -q "$expect" "$log"; then
        STATUS[$t]="n/a: probe produced no result (see ${log#$HERE/})"
        return
    fi
    if [[ $t == usnic* ]]; then
        local dg
        dg=$(grep -o 'btl:usnic: using provider .*: datagram [0-9]* bytes' "$log" |
             grep -o '[0-9]* bytes$' | sort -u | tr '\n' ' ')
        dg=${dg% }
        DGINFO[$t]=${dg:+datagrams: $dg}
        if [ "$t" = usnic1472 ] && [ -n "$dg" ] && [ "$dg" != "1472 bytes" ]; then
            DGINFO[$t]="${DGINFO[$t]} (expected 1472 bytes!)"
        fi
    fi
    if [ "$t" = rxd ]; then
        local prov
        prov=$(grep -o 'mtl:ofi:provider: .*' "$log" | head -1)
        if [ -z "$prov" ]; then
            STATUS[$t]="n/a: mtl/ofi not confirmed in verbose output (see ${log#$HERE/})"
            return
        fi
        if ! grep -q "mtl:ofi:provider: $UDP_IF" "$log"; then
            STATUS[$t]="n/a: mtl/ofi picked '$prov', not interface $UDP_IF"
            return
        fi
    fi
    STATUS[$t]=ok
}

for t in "${TLIST[@]}"; do probe "$t"; done
progress_done
for t in "${TLIST[@]}"; do
    set_run_cmd "$t"
    CMDLINE[$t]=$(cmd_text)
    printf '# %-9s %s%s\n' "$t" "${STATUS[$t]}" "${DGINFO[$t]:+ (${DGINFO[$t]})}" >&2
done

# ---------------------------------------------------------------- rounds
ACTIVE=()
for t in "${TLIST[@]}"; do [ "${STATUS[$t]}" = ok ] && ACTIVE+=("$t"); done
NACT=${#ACTIVE[@]}
TOTAL=$((NACT * ROUNDS))
RUNNO=0
T_START=$(date +%s)
declare -A FAILS


RUNS=$LOGDIR/runs.txt
: >"$RUNS"
WIRE=$LOGDIR/wire.txt   # --netns: transport round h1-tx-bytes h2-tx-bytes


run_one() {   # transport round
    local t=$1 r=$2 out=$LOGDIR/$1.r$2.out err=$LOGDIR/$1.r$2.err
    set_run_cmd "$t"
    wait_idle
    local t0 n=0 sum=0 last tx1=0 tx2=0
    # --netns: bytes the hosts' veths send during the run (WIRE)
    if [ $NETNS = 1 ]; then
        tx1=$(nsbed_ifstat 1 tx_bytes)
        tx2=$(nsbed_ifstat 2 tx_bytes)
    fi
    t0=$(date +%s)
    launch "$out" "$err" "$RUN_TIMEOUT" "$LOGDIR/$t.r$r.server.log"
    local pid=$PID
    [ -t 2 ] || progress "[round $r/$ROUNDS] run $RUNNO/$TOTAL: $t - $(( t0 - T_START ))s elapsed"
    # while it runs: progress line (tty only) and a CPU-contention sample
    while kill -0 $pid 2>/dev/null; do
        read_running
        n=$((n + 1)); sum=$((sum + RUNNING))
        if [ -t 2 ]; then
            last=$(grep -v '^#' "$out" 2>/dev/null | tail -n 1 | awk '{print $1, $2}')
            progress "[round $r/$ROUNDS] run $RUNNO/$TOTAL: $t ${last:+(last result: $last)} - $(( $(date +%s) - T_START ))s elapsed"
        fi
        sleep 0.5
    done
    wait $pid
    local rc=$?
    unstarted "$pid"
    server_wait
    if [ $rc -eq 0 ] && [ "$SRVRC" -ne 0 ]; then
        echo "run.sh: the ${SRV[0]##*/} server exited with status $SRVRC (see ${LOGDIR#"$HERE"/}/$t.r$r.server.log)" >>"$err"
        rc=$SRVRC
    fi
    # t round rc seconds samples sum_of_runnable
    echo "$t $r $rc $(( $(date +%s) - t0 )) $n $sum" >>"$RUNS"
    [ $NETNS = 1 ] && echo "$t $r $(( $(nsbed_ifstat 1 tx_bytes) - tx1 ))" \
        "$(( $(nsbed_ifstat 2 tx_bytes) - tx2 ))" >>"$WIRE"
    if [ $rc -ne 0 ]; then
        FAILS[$t]="${FAILS[$t]:-}round $r: exit $rc$([ $rc = 124 ] && echo ' (timeout)') (${err#$HERE/}); "
        mv "$out" "$out.failed"
    fi
}

if [ "$NACT" -gt 0 ]; then
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((k = 0; k < NACT; k++)); do
            t=${ACTIVE[$(( (k + r - 1) % NACT ))]}
            RUNNO=$((RUNNO + 1))
            run_one "$t" "$r"
        done
    done
fi
progress_done
echo "# $TOTAL runs in $(( $(date +%s) - T_START ))s; logs in ${LOGDIR#$HERE/}" >&2
# the test bed is not needed for the report
[ $NETNS = 1 ] && netns_teardown

# ---------------------------------------------------------------- report
STATFILE=$LOGDIR/status.txt
: >"$STATFILE"
for t in usnic usnic1472 tcp rxd raw rawgso; do
    if [[ ",$TRANSPORTS," == *",$t,"* ]]; then
        printf '%s\t%s\t%s\t%s\t%s\n' "$t" "${STATUS[$t]}" "${FAILS[$t]:-}" "${CMDLINE[$t]}" \
            "${DGINFO[$t]:-}" >>"$STATFILE"
    else
        printf '%s\t%s\t\t\n' "$t" "n/a: not selected (-T)" >>"$STATFILE"
    fi
done

python3 - "$LOGDIR" "$RESDIR/$NAME" "$ROUNDS" "${LOSS:-}" "$CEILING" "$TESTS" \
    "$INVOCATION" "$INVOKED_IN" "$COMMIT" "$MAXDGRAM" \
    "$([ $NETNS = 1 ] && echo "$NETNS_MTU")" "$SETUP" "$UDP_IF" "$DGRAM" <<'PY'
import sys, os, re, glob, statistics, subprocess, shutil, datetime, socket, math

logdir, prefix, rounds, loss, ceiling, tests, invocation, invoked_in, commit, maxdgram = sys.argv[1:11]
netns_mtu, setup, udp_if, dgrams = sys.argv[11:15]   # netns_mtu empty: loopback
netns = bool(netns_mtu)
rounds = int(rounds); ceiling = int(ceiling)
TR = ["usnic", "usnic1472", "tcp", "rxd", "raw"]
USNIC_TR = ["usnic", "usnic1472"]
status, fails, cmds, dginfo = {}, {}, {}, {}
for line in open(os.path.join(logdir, "status.txt")):
    parts = line.rstrip("\n").split("\t")
    while len(parts) < 5:
        parts.append("")
    status[parts[0]], fails[parts[0]], cmds[parts[0]], dginfo[parts[0]] = parts[1:5]

LINE = re.compile(r"^(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
per = {}        # (tr, test, size) -> list of (med, min, max)
units = {}
rows = []
for tr in TR:
    for f in sorted(glob.glob(os.path.join(logdir, f"{tr}.r*.out"))):
        rnd = int(re.search(r"\.r(\d+)\.out$", f).group(1))
        for line in open(f):
            if line.startswith("#"):
                continue
            m = LINE.match(line)
            if not m:
                continue
            test, size = m.group(1), int(m.group(2))
            try:
                med, mn, mx = float(m.group(3)), float(m.group(4)), float(m.group(5))
            except ValueError:
                continue
            per.setdefault((tr, test, size), []).append((med, mn, mx))
            units[test if tr != "raw" else "raw_" + test] = m.group(6)
            rows.append((rnd, tr, test, size, med, mn, mx, m.group(6)))

agg = {}
for k, v in per.items():
    agg[k] = (statistics.median([x[0] for x in v]), min(x[1] for x in v),
              max(x[2] for x in v), len(v))

# rawgso: bench/gso_stream prints one 'gso_stream: mode=M size=S rep=R key=value ...'
# line per repetition; per round: median/min/max over the repetitions
GS_LINE = re.compile(r"^gso_stream: (.*)$")
GS_KEYS = ["MB/s", "dgrams/s", "loss", "syscalls_per_MiB", "tx_syscalls_per_MiB",
           "rx_syscalls_per_MiB", "dgrams_per_recv", "lat_us"]
gs_per = {}     # (mode, size, key) -> list of (med, min, max), one per round
gs_rows = []    # (round, mode, size, key, med, min, max)
gs_notes = {}   # (mode, size) -> set of notes (fallbacks, no coalescing)
for f in sorted(glob.glob(os.path.join(logdir, "rawgso.r*.out"))):
    rnd = int(re.search(r"\.r(\d+)\.out$", f).group(1))
    reps = {}
    for line in open(f):
        m = GS_LINE.match(line.rstrip("\n"))
        if not m:
            continue
        kv = dict(x.split("=", 1) for x in m.group(1).split() if "=" in x)
        if "mode" not in kv or not kv.get("size", "").isdigit():
            continue
        key = (kv["mode"], int(kv["size"]))
        for k in GS_KEYS:
            try:
                v = float(kv[k])
            except (KeyError, ValueError):
                continue
            reps.setdefault(key + (k,), []).append(v)
        if kv["mode"] in ("gso", "gsoiov", "gsocopy"):
            n = gs_notes.setdefault(key, set())
            if kv.get("fallback"):
                n.add("kernel refused UDP_SEGMENT: sent plain")
            if kv.get("gro") == "0":
                n.add("kernel refused UDP_GRO")
            elif kv.get("segs_per_send") == "1":
                n.add("one datagram per send (over 65507/2 bytes): nothing to segment")
            elif kv.get("gro_chunks") == "0":
                n.add("no coalesced (GRO) buffer arrived in some runs")
    for k, v in sorted(reps.items()):
        gs_per.setdefault(k, []).append((statistics.median(v), min(v), max(v)))
        gs_rows.append((rnd,) + k + (statistics.median(v), min(v), max(v)))
gs_agg = {k: (statistics.median([x[0] for x in v]), min(x[1] for x in v),
              max(x[2] for x in v), len(v)) for k, v in gs_per.items()}

def gs(mode, size, key):
    return gs_agg.get((mode, size, key))

def fmt(x):
    if x is None:
        return "n/a"
    a = abs(x)
    if a >= 1000: return f"{x:.0f}"
    if a >= 100: return f"{x:.1f}"
    if a >= 1: return f"{x:.2f}"
    return f"{x:.3f}"

def cell(a):
    if a is None:
        return "n/a"
    return f"{fmt(a[0])} [{fmt(a[1])}-{fmt(a[2])}]"

def get(tr, test, size):
    return agg.get((tr, test, size))

raw_sizes = {}
for (tr, test, size) in agg:
    if tr == "raw":
        raw_sizes.setdefault(test, set()).add(size)

def raw_ref(test, size, ceil=ceiling):
    """raw provider value to compare an MPI result with; (agg, note)"""
    rt = {"lat": "lat", "bw": "bw", "rate": "rate"}.get(test)
    if rt is None:
        return None, ""
    a = get("raw", rt, size)
    if a:
        return a, ""
    if test == "bw" and size > ceil and get("raw", "bw", ceil):
        return get("raw", "bw", ceil), "*"
    return None, ""

# usnic counters: each rank prints '[usnic stats] ... tx_pkts=N ... retrans=N ...'
# at MPI_Finalize (btl_usnic_print_stats 1).  mpi_bench runs every test and
# size in one process pair, so these are totals of a whole run.
def stat_field(line, name):
    m = re.search(r"\s%s=(\d+)" % name, line)
    return int(m.group(1)) if m else 0

usn = {}        # (tr, round) -> counters of that run, summed over ranks
for tr in USNIC_TR:
    for f in sorted(glob.glob(os.path.join(logdir, f"{tr}.r*.err"))):
        rnd = int(re.search(r"\.r(\d+)\.err$", f).group(1))
        txt = open(f, errors="replace").read()
        lines = [l for l in txt.splitlines() if "[usnic stats]" in l]
        usn[(tr, rnd)] = dict(
            ranks=len(lines),
            tx=sum(stat_field(l, "tx_pkts") for l in lines),
            retrans=sum(stat_field(l, "retrans") for l in lines),
            inj=sum(stat_field(l, "inj_drop") for l in lines),
            fallback=len(re.findall(r"could not confirm that \d+-byte datagrams", txt)),
            ok=os.path.exists(os.path.join(logdir, f"{tr}.r{rnd}.out")))

def pct(part, whole):
    if not whole:
        return "n/a"
    q = 100.0 * part / whole
    if q == 0:
        return "0%"
    return f"{q:.{max(2, 1 - math.floor(math.log10(q)))}f}%"   # 2 significant digits or more

def retrans_total(tr):
    """(retrans, tx_pkts, runs) over the successful runs of tr that printed stats"""
    ds = [d for (t, _), d in usn.items() if t == tr and d["ok"] and d["ranks"]]
    if not ds:
        return None
    return sum(d["retrans"] for d in ds), sum(d["tx"] for d in ds), len(ds)

def retrans_lines(tr):
    if status.get(tr) != "ok":
        return []
    tot = retrans_total(tr)
    if tot is None:
        return [f"{tr} retransmissions during these runs: n/a (no `[usnic stats]` lines in the logs)"]
    rt, tx, n = tot
    return [f"{tr} retransmissions during these runs: {rt} of {tx} datagrams ({pct(rt, tx)}) - "
            f"totals of {n} whole mpi_bench run{'s' if n > 1 else ''} (all tests and sizes, "
            "both ranks; see \"usnic retransmissions\")"]

def fmt_ratio(q):
    return f"{q:.2f}" if q >= 0.1 else f"{q:.3g}"

def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return fmt_ratio(a[0] / b[0])

# Paired ratios: usnic and tcp run back to back within a round, so their
# per-round ratio cancels what a slow phase of the machine does to both;
# median [min-max] over the rounds where both ran.
by_round = {}   # (tr, test, size) -> {round: median}
for (rnd, tr, test, size, med, mn, mx, unit) in rows:
    by_round.setdefault((tr, test, size), {})[rnd] = med

# the same for the kernel-UDP ceiling: (mode, size, key) -> {round: median}
gs_by_round = {}
for (rnd, mode, size, key, med, mn, mx) in gs_rows:
    gs_by_round.setdefault((mode, size, key), {})[rnd] = med

def paired_ratio(a, b):
    """a, b: {round: median}; the per-round a/b as median [min-max]"""
    q = [a[r] / b[r] for r in sorted(a) if r in b and b[r] != 0]
    if not q:
        return "n/a"
    return f"{fmt_ratio(statistics.median(q))} [{fmt_ratio(min(q))}-{fmt_ratio(max(q))}]"

def round_ratio(a_tr, b_tr, test, size):
    return paired_ratio(by_round.get((a_tr, test, size), {}), by_round.get((b_tr, test, size), {}))

def raw_round_ratio(utr, size, mode, dgram):
    """usnic (utr) streaming size bytes against rawgso's mode with dgram-byte datagrams, by round"""
    return paired_ratio(by_round.get((utr, "bw", size), {}),
                        gs_by_round.get((mode, dgram, "MB/s"), {}))

out = []
P = out.append
SETUP_TITLE = f"two network-namespace hosts over veth (MTU {netns_mtu}) + bridge"
if netns:
    P(f"# usnic BTL benchmark - {SETUP_TITLE} - "
      f"{datetime.datetime.now():%Y-%m-%d %H:%M:%S} on {socket.gethostname()}")
else:
    P(f"# usnic BTL benchmark - {datetime.datetime.now():%Y-%m-%d %H:%M:%S} on {socket.gethostname()}")
P("")
P(f"Command: `{invocation}` (run in `{invoked_in}`); git commit {commit}.")
P("")
if netns:
    P(f"Rounds: {rounds}; setup: {setup}."
      + (f" usnic fault injection: btl_usnic_debug_drop_rate={loss}." if loss else ""))
else:
    P(f"Rounds: {rounds}; loopback only (127.0.0.1 / lo); 2 ranks, --bind-to core."
      + (f" usnic fault injection: btl_usnic_debug_drop_rate={loss}." if loss else ""))
P("Each cell: median of the per-round medians [lowest min - highest max over all rounds].")
P("Ratios: usnic median / other median (latency: < 1 means usnic is faster; "
  "bandwidth and rate: > 1 means usnic is faster).  \"usnic/tcp by round\": the ratio "
  "within each round (the two run back to back), median [min-max] over the rounds: a slow "
  "phase of the machine that hits both transports cancels out of it.")
usnic_dg = maxdgram
m = re.fullmatch(r"datagrams: (\d+) bytes", dginfo.get("usnic", ""))
if m:
    usnic_dg = m.group(1)   # what the probe saw (may differ if the self-test failed)
where = f"on {udp_if}, veth MTU {netns_mtu} - 28" if netns else "on lo"
P(f"usnic uses interface-MTU datagrams ({usnic_dg} bytes {where}); usnic1472 is the same BTL with "
  "`--mca btl_usnic_udp_datagram_size -1`, the udp provider's advertised 1472-byte datagrams "
  "(tables \"usnic with 1472-byte datagrams\", compared with raw udp streaming of 1472-byte datagrams).")
if netns:
    big = sorted({int(x) for x in dgrams.split(",") if x.strip().isdigit()})
    P(f"Datagram sizes: veth MTU {netns_mtu}; usnic {usnic_dg} bytes, usnic1472 "
      f"{dginfo.get('usnic1472', '').replace('datagrams: ', '') or '1472 bytes'}; raw udp "
      f"ping-pong and streaming with {', '.join(map(str, big))}-byte datagrams (and the smaller "
      "sizes in its table).")
P("")
P("| transport | status | command |")
P("|---|---|---|")
for tr in TR + ["rawgso"]:
    st = status.get(tr, "n/a")
    if st == "ok":
        nr = len(glob.glob(os.path.join(logdir, f"{tr}.r*.out")))
        st = f"ok ({nr}/{rounds} rounds" + (f"; {dginfo[tr]}" if dginfo.get(tr) else "") + ")"
        if fails.get(tr):
            st += "; FAILED " + fails[tr]
    P(f"| {tr} | {st.replace('|', chr(92) + '|')} | `{cmds.get(tr, '')}` |")
P("")

mpi_tests = [t for t in ["lat", "bw", "bibw", "rate"] if t in tests.split(",")]
head = {"lat": "Latency (half round trip, us) - lower is better",
        "bw": "Unidirectional bandwidth (MB/s, 1 MB = 1e6 B) - higher is better",
        "bibw": "Bidirectional bandwidth (MB/s, both directions) - higher is better",
        "rate": "Message rate (msgs/s) - higher is better"}
table_rows = []
u14_rows = {}   # (test, size) -> (usnic1472 agg, raw 1472 reference, note)
for test in mpi_tests:
    sizes = sorted({k[2] for k in agg if k[1] == test and k[0] != "raw"})
    if not sizes:
        continue
    P(f"## {head[test]}")
    P("")
    P("| size | usnic | tcp | rxd | raw udp | usnic/raw | usnic/tcp | usnic/tcp by round | usnic/rxd |")
    P("|---:|---|---|---|---|---:|---:|---:|---:|")
    star = False
    for s in sizes:
        u, t, x = get("usnic", test, s), get("tcp", test, s), get("rxd", test, s)
        r, note = raw_ref(test, s)
        star |= bool(note)
        rc = cell(r) + (f" {note}" if note and r else "")
        P(f"| {s} | {cell(u)} | {cell(t)} | {cell(x)} | {rc} | {ratio(u, r)} | {ratio(u, t)} "
          f"| {round_ratio('usnic', 'tcp', test, s)} | {ratio(u, x)} |")
        table_rows.append((test, s, u, t, x, r, note))
    if star:
        P("")
        P(f"\\* raw udp streaming goodput with {ceiling}-byte datagrams (largest single datagram reference).")
    if test == "lat" and gs_agg:
        # the raw kernel-UDP ping-pongs of the same sizes: pp (8 B), pptrain
        lrows = []
        for s in sizes:
            key = ("pp", 8) if s == 8 else ("pptrain", s)
            g = gs(key[0], key[1], "lat_us")
            if g and (s == 8 or s > int(usnic_dg)):
                lrows.append((s, key, g))
        if lrows:
            P("")
            P("Against a raw kernel-UDP ping-pong of the same size (rawgso, busy-polling both "
              "sides): 8 B `pp`, one datagram; above one datagram `pptrain`, the message as "
              "UDP_SEGMENT trains of interface-MTU datagrams from one buffer, received with "
              "UDP_GRO, with no header, MAC, user-space copy, reassembly or PML.  usnic/raw is "
              "what the BTL and ob1 add to the kernel's part.")
            P("")
            P("| size | usnic | raw ping-pong | usnic/raw | usnic/raw by round |")
            P("|---:|---|---|---:|---:|")
            for s, key, g in lrows:
                u = get("usnic", "lat", s)
                pr = paired_ratio(by_round.get(("usnic", "lat", s), {}),
                                  gs_by_round.get((key[0], key[1], "lat_us"), {}))
                P(f"| {s} | {cell(u)} | {cell(g)} | {ratio(u, g)} | {pr} |")
    if test == "bw" and gs_agg:
        # the kernel-UDP ceiling (rawgso) at usnic's datagram size and at 1472
        big = max(sizes)
        parts = []
        for d in sorted({int(usnic_dg), 1472}):
            g, pl = gs("gso", d, "MB/s"), gs("plain", d, "MB/s")
            if not g:
                continue
            q = f"{d}-byte datagrams {fmt(g[0])} MB/s with UDP_SEGMENT/UDP_GRO"
            q += f", {fmt(pl[0])} MB/s with one sendto per datagram" if pl else ""
            utr = "usnic" if str(d) == str(usnic_dg) else "usnic1472"
            u = get(utr, "bw", big)
            if u:
                pr = raw_round_ratio(utr, big, "gso", d)
                q += (f" ({utr} at {big} B: {ratio(u, g)} of it; by round {pr})")
            gi = gs("gsoiov", d, "MB/s")
            if gi:
                # the same train sent from a header iovec and a payload iovec
                # per datagram, as the BTL sends it
                q += f"; {fmt(gi[0])} MB/s with the BTL's iovec layout (gsoiov"
                if u:
                    pr = raw_round_ratio(utr, big, "gsoiov", d)
                    q += f": {utr} at {ratio(u, gi)} of it; by round {pr}"
                q += ")"
            parts.append(q)
        if parts:
            P("")
            P("Kernel UDP ceiling (rawgso, table \"Kernel UDP streaming ceiling\"): " + "; ".join(parts) + ".")
    if test == "bibw":
        P("")
        P("(raw udp has no bidirectional test.)")
    if test in ("bw", "bibw"):
        for l in [""] + retrans_lines("usnic"):
            P(l)
    P("")
    # usnic with 1472-byte datagrams: its own small table
    if any(get("usnic1472", test, s) for s in sizes):
        P("### usnic with 1472-byte datagrams")
        P("")
        P("| size | usnic1472 | raw udp | usnic1472/raw | usnic1472/usnic | usnic1472/tcp | usnic1472/rxd |")
        P("|---:|---|---|---:|---:|---:|---:|")
        star = False
        for s in sizes:
            v = get("usnic1472", test, s)
            u, t, x = get("usnic", test, s), get("tcp", test, s), get("rxd", test, s)
            r, note = raw_ref(test, s, 1472)
            star |= bool(note)
            rc = cell(r) + (f" {note}" if note and r else "")
            P(f"| {s} | {cell(v)} | {rc} | {ratio(v, r)} | {ratio(v, u)} | {ratio(v, t)} | {ratio(v, x)} |")
            u14_rows[(test, s)] = (v, r, note)
        if star:
            P("")
            P("\\* raw udp streaming goodput with 1472-byte datagrams (the size usnic1472 sends).")
        if test == "bibw":
            P("")
            P("(raw udp has no bidirectional test.)")
        if test in ("bw", "bibw"):
            for l in [""] + retrans_lines("usnic1472"):
                P(l)
        P("")

if any(k[0] == "raw" and k[1] == "bw" for k in agg):
    P("## Raw udp provider streaming (no reliability)")
    P("")
    P("| datagram | goodput MB/s | datagrams/s | loss fraction | offered datagrams/s |")
    P("|---:|---|---|---|---|")
    for s in sorted(raw_sizes.get("bw", [])):
        P(f"| {s} | {cell(get('raw','bw',s))} | {cell(get('raw','rate',s))} | "
          f"{cell(get('raw','loss',s))} | {cell(get('raw','txrate',s))} |")
    P("")

if gs_agg:
    P("## Kernel UDP streaming ceiling (rawgso: bench/gso_stream)")
    P("")
    P("One-way streaming of fixed-size datagrams over kernel UDP sockets (no libfabric, no "
      "reliability), " + ("server in h2, client in h1" if netns else "both ends on 127.0.0.1") +
      ": plain = one sendto per datagram, the receiver drains with recvmmsg; gso = UDP_SEGMENT "
      "sends of up to 64 datagrams (at most 65507 bytes), the receiver enables UDP_GRO and "
      "splits 64 KiB buffers at the reported gso_size; gsoiov = gso with a 56-byte header iovec "
      "and a payload iovec per datagram, as the BTL would send. Goodput at the receiver; "
      "syscalls per MiB = sender's sends per MiB sent + receiver's receive calls per MiB "
      "received. The sender is not paced: loss is what the receiver could not take.")
    P("")
    P("| mode | datagram | goodput MB/s | datagrams/s | loss fraction | syscalls/MiB (tx + rx) | note |")
    P("|---|---:|---|---|---|---|---|")
    modes = ["plain", "plaingro", "gso", "gsoiov", "gsocopy"]
    for mode in modes:
        for d in sorted({k[1] for k in gs_agg if k[0] == mode}):
            sc = [gs(mode, d, k) for k in ("syscalls_per_MiB", "tx_syscalls_per_MiB",
                                             "rx_syscalls_per_MiB")]
            scs = (f"{fmt(sc[0][0])} ({fmt(sc[1][0])} + {fmt(sc[2][0])})"
                   if all(sc) else "n/a")
            P(f"| {mode} | {d} | {cell(gs(mode, d, 'MB/s'))} | {cell(gs(mode, d, 'dgrams/s'))} | "
              f"{cell(gs(mode, d, 'loss'))} | {scs} | {'; '.join(sorted(gs_notes.get((mode, d), [])))} |")
    lat = gs("pp", 8, "lat_us")
    if lat:
        P("")
        P(f"8-byte ping-pong over the same sockets (sendto/recvfrom, both sides busy-polling): "
          f"half round trip {cell(lat)} us (median of the per-repetition medians).")
    P("")

runs = []
rp = os.path.join(logdir, "runs.txt")
if os.path.exists(rp):
    for line in open(rp):
        f = line.split()
        if len(f) == 6:
            runs.append((f[0], int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5])))
if runs:
    P("## Run conditions")
    P("")
    P("Runnable tasks sampled every 0.5 s during each run (/proc/stat procs_running); "
      "a run itself accounts for about 3 (2 benchmark processes + the sampler). "
      f"This host has {os.cpu_count()} CPUs.")
    P("")
    P("| round | transport | exit | seconds | avg runnable | note |")
    P("|---:|---|---:|---:|---:|---|")
    bad = 0
    for (tr, rnd, rc, sec, n, tot) in sorted(runs, key=lambda x: (x[1], x[0])):
        avg = tot / n if n else float("nan")
        note = ""
        if n and avg - 3 >= 0.5:
            note = f"CPU contention: ~{avg - 3:.1f} other runnable task(s), results unreliable"
            bad += 1
        if rc != 0:
            note = (note + "; " if note else "") + "FAILED"
        P(f"| {rnd} | {tr} | {rc} | {sec} | {avg:.2f} | {note} |")
    P("")
    if bad:
        sys.stderr.write(f"# WARNING: {bad} run(s) had other processes competing for the CPUs; "
                         "see 'Run conditions' in the report (--wait-idle S may help)\n")

wire = []
wp = os.path.join(logdir, "wire.txt")
if netns and os.path.exists(wp):
    for line in open(wp):
        f = line.split()
        if len(f) == 4:
            wire.append((f[0], int(f[1]), int(f[2]), int(f[3])))
if wire:
    P("## Traffic on the veths")
    P("")
    P(f"Bytes sent by each host's {udp_if} during each run (the kernel's interface counters: "
      "payload plus headers, ACKs and the runtime's TCP traffic): the runs crossed the veths "
      "and the bridge.")
    P("")
    P(f"| round | transport | h1 {udp_if} sent | h2 {udp_if} sent |")
    P("|---:|---|---:|---:|")
    for (tr, rnd, a, b) in sorted(wire, key=lambda x: (x[1], x[0])):
        P(f"| {rnd} | {tr} | {a} | {b} |")
    P("")

if usn:
    P("## usnic retransmissions")
    P("")
    P("Per run, summed over both ranks, from the `[usnic stats]` line each rank prints at "
      "MPI_Finalize (`--mca btl_usnic_print_stats 1`): datagrams = `tx_pkts` (data, ACKs and "
      "retransmissions), retransmits = `retrans` (segments actually sent again). mpi_bench runs "
      "all tests and sizes in one process pair, so only per-run totals exist, not per test or size.")
    P("")
    P("| round | transport | datagrams sent | retransmits | retransmits % | ranks reporting | note |")
    P("|---:|---|---:|---:|---:|---:|---|")
    for (tr, rnd), d in sorted(usn.items(), key=lambda x: (x[0][1], TR.index(x[0][0]))):
        note = []
        if not d["ok"]:
            note.append("FAILED (not in the totals)")
        if not d["ranks"]:
            note.append("no `[usnic stats]` lines")
        if d["inj"]:
            note.append(f"{d['inj']} arriving datagrams dropped by fault injection")
        if d["fallback"]:
            note.append("datagram self-test failed: fell back to 1472-byte datagrams")
        if d["ranks"]:
            P(f"| {rnd} | {tr} | {d['tx']} | {d['retrans']} | {pct(d['retrans'], d['tx'])} | "
              f"{d['ranks']} | {'; '.join(note)} |")
        else:
            P(f"| {rnd} | {tr} | n/a | n/a | n/a | 0 | {'; '.join(note)} |")
    for tr in USNIC_TR:
        tot = retrans_total(tr)
        if tot and rounds > 1:
            rt, tx, n = tot
            P(f"| all ({n}) | {tr} | {tx} | {rt} | {pct(rt, tx)} | | total of the successful runs |")
    P("")

md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)

# CSV: every per-round line, and the wide summary table with ratios.
# --netns: every row ends with a "setup" column naming the test bed.
SH = ",setup" if netns else ""
SX = f",two-netns-hosts-veth-mtu{netns_mtu}-bridge" if netns else ""
with open(prefix + "-rounds.csv", "w") as f:
    f.write("round,transport,test,size,median,min,max,unit" + SH + "\n")
    for r in sorted(rows):
        f.write(",".join(str(x) for x in r) + SX + "\n")
with open(prefix + ".csv", "w") as f:
    cols = ["test", "size"]
    for tr in ("usnic", "tcp", "rxd", "raw"):   # usnic1472: appended columns
        cols += [f"{tr}_median", f"{tr}_min", f"{tr}_max", f"{tr}_rounds"]
    cols += ["raw_note", "usnic_over_raw", "usnic_over_tcp", "usnic_over_rxd"]
    # usnic1472 (btl_usnic_udp_datagram_size -1) and its 1472-byte raw reference
    cols += ["usnic1472_median", "usnic1472_min", "usnic1472_max", "usnic1472_rounds",
             "raw1472_median", "raw1472_min", "raw1472_max", "raw1472_rounds", "raw1472_note",
             "usnic1472_over_raw1472", "usnic1472_over_usnic", "usnic1472_over_tcp",
             "usnic1472_over_rxd"]
    f.write(",".join(cols) + SH + "\n")
    def c4(a):
        return ["", "", "", "0"] if a is None else [repr(a[0]), repr(a[1]), repr(a[2]), str(a[3])]
    for (test, s, u, t, x, r, note) in table_rows:
        vals = [test, str(s)] + c4(u) + c4(t) + c4(x) + c4(r)
        vals += ["ceiling%d" % ceiling if note else "", ratio(u, r), ratio(u, t), ratio(u, x)]
        v, r14, note14 = u14_rows.get((test, s), (None, None, ""))
        vals += c4(v) + c4(r14) + ["ceiling1472" if note14 else "", ratio(v, r14), ratio(v, u),
                                   ratio(v, t), ratio(v, x)]
        f.write(",".join(v if v != "n/a" else "" for v in vals) + SX + "\n")
    for s in sorted(raw_sizes.get("bw", [])):
        for test in ("loss", "txrate"):
            a = get("raw", test, s)
            if a:
                vals = ["raw_" + test, str(s)] + ["", "", "", "0"] * 3 + c4(a) + ["", "", "", ""]
                vals += ["", "", "", "0"] * 2 + [""] * 5
                f.write(",".join(vals) + SX + "\n")

# usnic retransmissions per run
if usn:
    with open(prefix + "-retrans.csv", "w") as f:
        f.write("round,transport,ok,ranks,tx_pkts,retrans,retrans_pct,inj_drop,selftest_fallbacks"
                + SH + "\n")
        for (tr, rnd), d in sorted(usn.items(), key=lambda x: (x[0][1], TR.index(x[0][0]))):
            p = repr(100.0 * d["retrans"] / d["tx"]) if d["tx"] else ""
            f.write(f"{rnd},{tr},{int(d['ok'])},{d['ranks']},{d['tx']},{d['retrans']},{p},"
                    f"{d['inj']},{d['fallback']}{SX}\n")

# plot: latency and bandwidth vs size, log scales, error bars = min/max
if shutil.which("gnuplot"):
    series = []
    for test in ("lat", "bw"):
        for tr in TR:
            pts = sorted((k[2], v) for k, v in agg.items()
                         if k[0] == tr and k[1] == test and k[2] > 0)
            if not pts:
                continue
            fn = os.path.join(logdir, f"plot-{test}-{tr}.dat")
            with open(fn, "w") as f:
                for s, v in pts:
                    f.write(f"{s} {v[0]} {v[1]} {v[2]}\n")
            series.append((test, tr, fn))
    if series:
        term = "pngcairo size 1400,600 font ',10'"
        try:
            t = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
            if "pngcairo" not in (t.stdout + t.stderr):
                term = "png size 1400,600"
        except OSError:
            pass
        colors = {"usnic": "#d62728", "usnic1472": "#ff7f0e", "tcp": "#1f77b4", "rxd": "#2ca02c",
                  "raw": "#7f7f7f"}
        titles = {"raw": "raw udp (one datagram)", "usnic": f"usnic ({usnic_dg}-byte datagrams)",
                  "usnic1472": "usnic1472 (1472-byte datagrams)"}
        gp = [f"set terminal {term}", f"set output '{prefix}.png'",
              "set multiplot layout 1,2 title 'usnic BTL vs tcp / ofi rxd / raw udp (" +
              (SETUP_TITLE if netns else "loopback") + ")" +
              (f", drop rate {loss}" if loss else "") + "'",
              "set logscale xy", "set grid", "set key top left", "set xtics (" + ", ".join(
                  f"'{(str(v >> 20) + 'M') if v >= 1 << 20 else (str(v >> 10) + 'K') if v >= 1024 else str(v)}' {v}"
                  for v in [4 ** i for i in range(12)]) + ")",
              "set xlabel 'message size (bytes)'"]
        for test, ylabel in (("lat", "latency, half round trip (us)"),
                             ("bw", "bandwidth (MB/s)")):
            ss = [x for x in series if x[0] == test]
            gp.append(f"set title '{'Latency' if test == 'lat' else 'Unidirectional bandwidth'}'")
            gp.append(f"set ylabel '{ylabel}'")
            if test == "bw":
                gp.append("set key bottom right")
            if not ss:
                gp.append("set label 1 'no data' at graph 0.4,0.5")
                gp.append("plot [1:2] [1:2] NaN notitle")
                gp.append("unset label 1")
                continue
            parts = []
            for _, tr, fn in ss:
                title = titles.get(tr, tr)
                parts.append(f"'{fn}' using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 0.6 "
                             f"lc rgb '{colors[tr]}' title '{title}'")
            gp.append("plot " + ", \\\n     ".join(parts))
        gp.append("unset multiplot")
        gpf = os.path.join(logdir, "plot.gp")
        open(gpf, "w").write("\n".join(gp) + "\n")
        r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write("gnuplot failed:\n" + r.stderr)
        else:
            sys.stderr.write(f"# plot: {prefix}.png\n")
else:
    sys.stderr.write("# gnuplot not found: no plot\n")
# rawgso (gso_stream): per round and combined ("all"), one row per mode, size, metric
if gs_rows:
    with open(prefix + "-rawgso.csv", "w") as f:
        f.write("round,mode,size,metric,median,min,max" + SH + "\n")
        for r in sorted(gs_rows):
            f.write(",".join(str(x) for x in r) + SX + "\n")
        for k, a in sorted(gs_agg.items()):
            f.write(",".join(["all"] + [str(x) for x in k] + [repr(a[0]), repr(a[1]), repr(a[2])])
                    + SX + "\n")
sys.stderr.write(f"# tables: {prefix}.md  csv: {prefix}.csv {prefix}-rounds.csv"
                 + (f" {prefix}-retrans.csv" if usn else "")
                 + (f" {prefix}-rawgso.csv" if gs_rows else "") + "\n")
PY
rc=$?
# The instruction count of one 8-byte send+receive (bench/callgrind.sh),
# appended to the report; it does not depend on the machine's load.
if [ $CALLGRIND = 1 ] && [ $QUICK = 0 ] && [ $NETNS = 0 ] && [ $rc = 0 ] &&
   [[ ",$TRANSPORTS," == *",usnic,"* ]]; then
    progress "callgrind: instructions per 8-byte send+receive (about 30 s) ..."
    cg=$(bash "$HERE/callgrind.sh" --no-build -o "$NAME-callgrind" 2>/dev/null | grep '^callgrind:')
    progress_done
    {
        echo
        echo "## Instructions per 8-byte send+receive (callgrind)"
        echo
        if [ -n "$cg" ]; then
            echo "From \`bench/callgrind.sh\`, run right after the tables (full report:" \
                 "\`$NAME-callgrind.md\`); the count does not depend on the machine's load."
            echo
            echo "$cg" | sed 's/^callgrind: /- /'
        else
            echo "bench/callgrind.sh failed (is valgrind installed?); see bench/results/$NAME-callgrind-logs."
        fi
    } | tee -a "$RESDIR/$NAME.md"
fi
exit $rc
}
