#!/usr/bin/env bash
# init.sh - start-up time of the usnic BTL (docs/perf-init.md).
#
#  loopback  (issue 9) MPI_Init of usnic vs btl/tcp at 2, 8 and 32 ranks on
#            this machine (oversubscribed, not bound), both over lo only:
#              usnic: --mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
#              tcp:   --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
#            plus --mca oob_tcp_if_include lo --bind-to none --oversubscribe.
#  --netns   (issue 10) MPI_Init to the first message, 4 ranks on 2 hosts
#            (network namespaces of test/lib/netns.sh, 2 ranks per host),
#            usnic with btl_usnic_connectivity_check 1 vs 0.
#
# The program is bench/build/init_first: every rank measures the time in
# MPI_Init and from MPI_Init's start until one message from its ring
# neighbour has arrived and its own has been sent; rank 0 prints the
# maximum over the ranks.  The time of the whole mpirun (launch to exit)
# is measured here as well.  Each round runs every configuration once, the
# order alternating between rounds (A B, B A, ...), so that the load of
# other processes on this shared machine falls on both alike.  Reported:
# median over the rounds, min-max, and the ratio (loopback: usnic/tcp of
# the medians, and the min-max of the per-round ratios) or difference
# (--netns: on - off of the medians, and min-max of per-round differences).
set -u
{
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results
ROUNDS=5
NPS=2,8,32
NETNS=0
LOOP=1
DO_BUILD=1
RUN_TIMEOUT=120
NAME=init-$(date +%Y%m%d-%H%M%S)

usage() {
    cat <<EOF
usage: $0 [options]
  -r N          rounds (default $ROUNDS)
  -n LIST       rank counts of the loopback comparison (default $NPS)
  --netns       also run the connectivity-checker comparison across two
                network-namespace hosts (4 ranks; needs root)
  --netns-only  only that one
  --timeout S   limit of one mpirun (default $RUN_TIMEOUT s)
  --no-build    do not run make first
  -o NAME       result file prefix (default $NAME)
Results: a markdown table on stdout and in bench/results/NAME.md, every
run in bench/results/NAME.csv, the runs' output in bench/results/NAME-logs/.
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        -r) ROUNDS=$2; shift 2 ;;
        -n) NPS=$2; shift 2 ;;
        --netns) NETNS=1; shift ;;
        --netns-only) NETNS=1; LOOP=0; shift ;;
        --timeout) RUN_TIMEOUT=$2; shift 2 ;;
        --no-build) DO_BUILD=0; shift ;;
        -o) NAME=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "init.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
case "$ROUNDS" in ''|*[!0-9]*|0) echo "init.sh: -r expects a positive integer" >&2; exit 2 ;; esac
case "$RUN_TIMEOUT" in ''|*[!0-9]*) echo "init.sh: --timeout expects seconds" >&2; exit 2 ;; esac
[[ $NPS =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "init.sh: -n expects e.g. 2,8,32" >&2; exit 2; }
if [ $NETNS = 1 ] && [ "$(id -u)" != 0 ]; then
    echo "init.sh: --netns needs root (network namespaces)" >&2; exit 1
fi
command -v python3 >/dev/null || { echo "init.sh: python3 is needed for the report" >&2; exit 1; }
if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" build/init_first >&2 || { echo "init.sh: build failed" >&2; exit 1; }
fi
[ -x "$BUILD/init_first" ] || { echo "init.sh: $BUILD/init_first missing (make)" >&2; exit 1; }

mkdir -p "$RESDIR/$NAME-logs"
LOGDIR=$RESDIR/$NAME-logs
CSV=$RESDIR/$NAME.csv
echo "part,np,config,round,init_s,first_s,fin0_s,wall_s,rc" >"$CSV"
CMDS=$LOGDIR/commands.txt
: >"$CMDS"

# one_run PART NP CONFIG ROUND PREFIX... -- MPIRUN ARGS...: run, parse, append to CSV
one_run() {
    local part=$1 np=$2 cfg=$3 round=$4 log t0 t1 rc line init first fin
    shift 4
    log=$LOGDIR/$part-np$np-$cfg-r$round.log
    t0=$(date +%s.%N)
    timeout -k 5 "$RUN_TIMEOUT" "$@" </dev/null >"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    line=$(grep '^init_first np=' "$log" | head -n 1)
    init=$(sed -n 's/.* init_max_s=\([0-9.]*\).*/\1/p' <<<"$line")
    first=$(sed -n 's/.* first_max_s=\([0-9.]*\).*/\1/p' <<<"$line")
    fin=$(sed -n 's/^init_first fin0_s=\([0-9.]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$init" ] && [ "$rc" = 0 ] || echo "init.sh: $part np=$np $cfg round $round failed (rc $rc, $log)" >&2
    echo "$part,$np,$cfg,$round,${init:-},${first:-},${fin:-},$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'),$rc" >>"$CSV"
    grep -qxF "$part np=$np $cfg: $*" "$CMDS" || echo "$part np=$np $cfg: $*" >>"$CMDS"
}

# ---- loopback: usnic vs tcp --------------------------------------------
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca oob_tcp_if_include lo
        --mca pml ob1)
USNIC=(--mca btl "usnic,self" --mca btl_usnic_if_include lo)
TCP=(--mca btl "tcp,self" --mca btl_tcp_if_include lo)
if [ $LOOP = 1 ]; then
    IFS=, read -r -a NPL <<<"$NPS"
    for ((r = 1; r <= ROUNDS; r++)); do
        for np in "${NPL[@]}"; do
            if ((r % 2)); then order=(usnic tcp); else order=(tcp usnic); fi
            for cfg in "${order[@]}"; do
                echo "round $r/$ROUNDS np=$np $cfg" >&2
                if [ "$cfg" = usnic ]; then
                    one_run loop "$np" usnic "$r" "${MPIRUN[@]}" -np "$np" "${USNIC[@]}" "$BUILD/init_first"
                else
                    one_run loop "$np" tcp "$r" "${MPIRUN[@]}" -np "$np" "${TCP[@]}" "$BUILD/init_first"
                fi
            done
        done
    done
fi

# ---- two namespace hosts: connectivity checker on vs off ---------------
if [ $NETNS = 1 ]; then
    TEST_TMP=$LOGDIR/testbed
    # shellcheck source=test/lib/mpitest.sh
    . "$REPO/test/lib/mpitest.sh"
    # shellcheck source=test/lib/netns.sh
    . "$REPO/test/lib/netns.sh"
    if ! nsbed_up 2 >"$LOGDIR/testbed.log" 2>&1; then
        cat "$LOGDIR/testbed.log" >&2
        echo "init.sh: cannot build the two-namespace test bed" >&2
        exit 1
    fi
    HOSTFILE=$(nsbed_hostfile 2)
    NSRUN=(ip netns exec "$NSB_HEAD" mpirun --allow-run-as-root -np 4 --hostfile "$HOSTFILE"
           --bind-to none --mca plm_rsh_agent "$NSB_AGENT" --mca oob_tcp_if_include "$NSB_CIDR"
           --mca pml ob1 --mca btl "usnic,self" --mca btl_usnic_if_include "$NSB_CIDR")
    for ((r = 1; r <= ROUNDS; r++)); do
        if ((r % 2)); then order=(1 0); else order=(0 1); fi
        for cc in "${order[@]}"; do
            echo "netns round $r/$ROUNDS connectivity_check $cc" >&2
            one_run netns 4 "cc$cc" "$r" "${NSRUN[@]}" --mca btl_usnic_connectivity_check "$cc" \
                "$BUILD/init_first"
        done
    done
    SETUP_NETNS="4 ranks, 2 on each of two network-namespace hosts (h1 $(nsbed_addr 1), h2 $(nsbed_addr 2)) on veths to a bridge (test/lib/netns.sh), mpirun in the head namespace"
    nsbed_down >/dev/null 2>&1
    trap - EXIT
fi

# ---- report --------------------------------------------------------------
{
    echo "# Start-up time ($NAME)"
    echo
    echo "$(date '+%F %T'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);"
    echo "source $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)," \
         "component path ${OMPI_MCA_mca_component_path:-(system)}; $ROUNDS rounds, order alternating."
    echo
    python3 - "$CSV" <<'EOF'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))]
def vals(part, np, cfg, key):
    return {int(r["round"]): float(r[key]) for r in rows
            if r["part"] == part and r["np"] == np and r["config"] == cfg and r[key] and r["rc"] == "0"}
def cell(v):
    if not v: return "n/a"
    x = list(v.values())
    return "%.3f (%.3f-%.3f)" % (statistics.median(x), min(x), max(x))
def failed(part, np, cfg):
    return sum(1 for r in rows if r["part"] == part and r["np"] == np and r["config"] == cfg and r["rc"] != "0")
keys = [("init_s", "MPI_Init"), ("first_s", "to 1st message"), ("wall_s", "whole mpirun")]
loop_np = sorted({r["np"] for r in rows if r["part"] == "loop"}, key=int)
if loop_np:
    print("Loopback, seconds: median (min-max) over rounds; max over ranks; ratio = usnic/tcp of the medians [min-max of the per-round ratios]")
    print()
    print("| ranks | measure | usnic | tcp | usnic/tcp |")
    print("|---|---|---|---|---|")
    for np in loop_np:
        for k, label in keys:
            u, t = vals("loop", np, "usnic", k), vals("loop", np, "tcp", k)
            ratio = "n/a"
            if u and t:
                per = [u[i] / t[i] for i in u if i in t and t[i] > 0]
                ratio = "%.2f [%.2f-%.2f]" % (statistics.median(u.values()) / statistics.median(t.values()),
                                              min(per), max(per))
            print("| %s | %s | %s | %s | %s |" % (np, label, cell(u), cell(t), ratio))
        f = failed("loop", np, "usnic") + failed("loop", np, "tcp")
        if f: print("| %s | failed runs | %d | | |" % (np, f))
    print()
if any(r["part"] == "netns" for r in rows):
    print("Two namespace hosts, 4 ranks, usnic: btl_usnic_connectivity_check 1 vs 0, seconds: median (min-max); diff = on - off of the medians [min-max of the per-round differences]")
    print()
    print("| measure | checker on | checker off | on - off |")
    print("|---|---|---|---|")
    for k, label in keys:
        on, off = vals("netns", "4", "cc1", k), vals("netns", "4", "cc0", k)
        diff = "n/a"
        if on and off:
            per = [on[i] - off[i] for i in on if i in off]
            diff = "%+.3f [%+.3f..%+.3f]" % (statistics.median(on.values()) - statistics.median(off.values()),
                                             min(per), max(per))
        print("| %s | %s | %s | %s |" % (label, cell(on), cell(off), diff))
    f = failed("netns", "4", "cc1") + failed("netns", "4", "cc0")
    if f: print("| failed runs | %d | | |" % f)
    print()
EOF
    [ -n "${SETUP_NETNS:-}" ] && echo "Namespace test bed: $SETUP_NETNS." && echo
    echo "Commands (bench/results/$NAME-logs/commands.txt):"
    echo
    sed 's/^/    /' "$CMDS"
} | tee "$RESDIR/$NAME.md"
exit 0
}
