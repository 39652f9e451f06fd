#!/usr/bin/env bash
# breakdown.sh - where the time of a 1 MiB stream goes, per configuration:
# system calls per MiB, CPU time per MiB and CPU utilisation of each rank,
# for usnic (kernel backend, and libfabric udp) and btl/tcp between two
# network-namespace hosts (test/lib/netns.sh) at one or more MTUs.
#
# Each rank runs under `perf stat -e raw_syscalls:sys_enter,task-clock`
# (tracepoint and software counters: they work on virtual machines without a
# PMU).  Every configuration runs twice, with SHORT and LONG repetitions of
# the same 1 MiB window test (mpi_bench -t bw, fixed iteration counts); the
# difference of the two runs is the stream alone, without start-up and
# finalize.  Per MiB = difference of the counts / difference of the MiB
# moved; utilisation = difference of task-clock / difference of the wall
# time of mpi_bench.
#
# Then the same for a 2 KiB ping-ping (bench/pingping: both ranks send,
# then both receive; PP_SHORT and PP_LONG iterations): microseconds, system
# calls and CPU time per iteration.
#
# usage: bench/breakdown.sh [-m MTU[,MTU..]] [-T usnic,udp,tcp] [-r ROUNDS] [-o NAME]
# Output: a markdown table on stdout and in bench/results/NAME.md; one line
# per configuration and round in NAME.csv.  Medians over rounds.
set -u
{
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
REPO=$(cd "$HERE/.." && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results
run_identity "$@"

MTUS=1500
TRANSPORTS=usnic,udp,tcp
ROUNDS=3
NAME=breakdown-$(date +%Y%m%d-%H%M%S)
SHORT=2
LONG=10
# iterations of a window of 64 x 1 MiB per repetition: mpi_bench runs at
# least 2 for sizes above 8 KiB, whatever -i says, so 2 it is
ITERS=2
PP_SHORT=2000
PP_LONG=12000
PP_SIZE=2048

while getopts "m:T:r:o:h" opt; do
    case $opt in
        m) MTUS=$OPTARG ;;
        T) TRANSPORTS=$OPTARG ;;
        r) ROUNDS=$OPTARG ;;
        o) NAME=$OPTARG ;;
        *) sed -n '2,17p' "$0"; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "breakdown.sh: needs root (network namespaces)" >&2; exit 1; }
command -v perf >/dev/null || { echo "breakdown.sh: needs perf (linux-perf)" >&2; exit 1; }
perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1 ||
    { echo "breakdown.sh: perf cannot count raw_syscalls:sys_enter here" >&2; exit 1; }
make -s -C "$HERE" >/dev/null || exit 1
mkdir -p "$RESDIR"
LOGDIR=$(mktemp -d /tmp/usnic-breakdown.XXXXXX)
CSV=$RESDIR/$NAME.csv
echo "test,mtu,transport,round,reps,rank,syscalls,task_ms,wall_s,units" >"$CSV"

# the wrapper every rank runs: perf stat around mpi_bench, one file per rank
WRAP=$LOGDIR/wrap.sh
cat >"$WRAP" <<'EOF'
#!/bin/sh
out=$1
shift
t0=$(date +%s.%N)
perf stat -x, -e raw_syscalls:sys_enter,task-clock -o "$out.$OMPI_COMM_WORLD_RANK" -- "$@"
rc=$?
echo "wall $t0 $(date +%s.%N)" >>"$out.$OMPI_COMM_WORLD_RANK"
exit $rc
EOF
chmod +x "$WRAP"

TEST_TMP=$LOGDIR/testbed
# shellcheck source=test/lib/mpitest.sh
. "$REPO/test/lib/mpitest.sh"
# shellcheck source=test/lib/netns.sh
. "$REPO/test/lib/netns.sh"

# one run: TEST(bw|pp) MTU TRANSPORT ROUND REPS -> CSV lines for both ranks
run_one() {
    local test=$1 mtu=$2 tr=$3 round=$4 reps=$5 out mca=() prog=() r f sys task wall units
    case $tr in
        usnic) mca=(--mca btl usnic,self --mca btl_usnic_if_include "$NSB_CIDR"
                    --mca btl_usnic_providers kernel) ;;
        udp) mca=(--mca btl usnic,self --mca btl_usnic_if_include "$NSB_CIDR"
                  --mca btl_usnic_providers udp -x FI_UDP_IFACE="$NSB_DEV") ;;
        tcp) mca=(--mca btl tcp,self --mca btl_tcp_if_include "$NSB_CIDR") ;;
    esac
    if [ "$test" = bw ]; then
        prog=("$BUILD/mpi_bench" -t bw -s 1m -S 1m -r "$reps" -i "$ITERS" -x 1 -T 0 -B 0)
        # MiB moved: reps x iterations + 1 warm-up iteration, each a window
        # of 64 messages of 1 MiB
        units=$(((reps * ITERS + 1) * 64))
    else
        prog=("$BUILD/pingping" "$reps" "$PP_SIZE")
        units=$reps
    fi
    out=$LOGDIR/$test-$mtu-$tr-$round-$reps
    if ! ip netns exec "$NSB_HEAD" timeout -k 5 300 mpirun --allow-run-as-root -np 2 \
        --hostfile "$HOSTFILE" "${BIND[@]}" --mca plm_rsh_agent "$NSB_AGENT" \
        --mca oob_tcp_if_include "$NSB_CIDR" --mca pml ob1 "${mca[@]}" \
        "$WRAP" "$out" "${prog[@]}" </dev/null >"$out.log" 2>&1; then
        echo "breakdown.sh: run $mtu $tr failed:" >&2
        tail -5 "$out.log" >&2
        return 1
    fi
    for r in 0 1; do
        f=$out.$r
        sys=$(awk -F, '$3 ~ /raw_syscalls:sys_enter/ {print $1}' "$f")
        task=$(awk -F, '$3 ~ /task-clock/ {print $1}' "$f")
        wall=$(awk '$1 == "wall" {printf "%.6f", $3 - $2}' "$f")
        echo "$test,$mtu,$tr,$round,$reps,$r,$sys,$task,$wall,$units" >>"$CSV"
    done
}

IFS=, read -r -a MTU_LIST <<<"$MTUS"
IFS=, read -r -a TR_LIST <<<"$TRANSPORTS"
for mtu in "${MTU_LIST[@]}"; do
    NSB_MTU=$mtu
    if ! nsbed_up 2 >"$LOGDIR/testbed-$mtu.log" 2>&1; then
        cat "$LOGDIR/testbed-$mtu.log" >&2
        exit 1
    fi
    HOSTFILE=$(nsbed_hostfile 1)
    netns_bind "$LOGDIR" "$(nsbed_addr 1)" "$(nsbed_addr 2)"
    for ((round = 1; round <= ROUNDS; round++)); do
        for tr in "${TR_LIST[@]}"; do
            run_one bw "$mtu" "$tr" "$round" "$SHORT" && run_one bw "$mtu" "$tr" "$round" "$LONG"
            run_one pp "$mtu" "$tr" "$round" "$PP_SHORT" && run_one pp "$mtu" "$tr" "$round" "$PP_LONG"
        done
    done
    nsbed_remove breakdown.sh
done

python3 - "$CSV" "$RESDIR/$NAME.md" "$INVOCATION" "$COMMIT" "$SHORT" "$LONG" "$PP_SHORT" "$PP_LONG" "$PP_SIZE" <<'EOF'
import csv, statistics, sys
path, md, invocation, commit, short, long_, pp_short, pp_long, pp_size = sys.argv[1:10]
rows = list(csv.DictReader(open(path)))
runs = {}
for r in rows:
    runs[(r['test'], r['mtu'], r['transport'], r['round'], r['rank'], r['reps'])] = r

def diffs(test, lo, hi):
    out = {}
    for (t, mtu, tr, rnd, rank, reps), r in runs.items():
        if t != test or reps != hi:
            continue
        s = runs.get((t, mtu, tr, rnd, rank, lo))
        if s is None:
            continue
        du = float(r['units']) - float(s['units'])
        dsys = float(r['syscalls']) - float(s['syscalls'])
        dtask = (float(r['task_ms']) - float(s['task_ms'])) / 1000.0
        dwall = float(r['wall_s']) - float(s['wall_s'])
        out.setdefault((mtu, tr, rank), []).append(
            (dsys / du, dtask * 1000.0 / du, dtask / dwall if dwall > 0 else float('nan'),
             du / dwall if dwall > 0 else float('nan')))
    return out

out = diffs('bw', short, long_)
pp = diffs('pp', pp_short, pp_long)
role = {'0': 'sender', '1': 'receiver'}
lines = ["# Where the time of a 1 MiB stream goes", "",
         f"`{invocation}` at commit {commit}: two network-namespace hosts, one rank each (rank 0 "
         "sends a window of 64 x 1 MiB, rank 1 receives); per MiB and utilisation from the "
         f"difference of a {long_}- and a {short}-repetition run (start-up and finalize cancel); "
         "medians over rounds.  Utilisation 1.0 = one CPU busy the whole time (the progress "
         "engines poll, so a waiting rank also counts as busy).", "",
         "| MTU | transport | rank | syscalls / MiB | CPU ms / MiB | CPU utilisation | MiB/s (wall of the rank) |",
         "|---|---|---|---|---|---|---|"]
for key in sorted(out, key=lambda k: (int(k[0]), k[1], k[2])):
    v = out[key]
    med = [statistics.median(x[i] for x in v) for i in range(4)]
    lines.append(f"| {key[0]} | {key[1]} | {key[2]} ({role[key[2]]}) | {med[0]:.1f} | {med[1]:.3f} | "
                 f"{med[2]:.2f} | {med[3]:.0f} |")
lines += ["", f"{pp_size}-byte ping-ping (both ranks send, then both receive), difference of "
          f"{pp_long} and {pp_short} iterations:", "",
          "| MTU | transport | rank | us / iteration | syscalls / iteration | CPU us / iteration | CPU utilisation |",
          "|---|---|---|---|---|---|---|"]
for key in sorted(pp, key=lambda k: (int(k[0]), k[1], k[2])):
    v = pp[key]
    med = [statistics.median(x[i] for x in v) for i in range(4)]
    lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {1e6 / med[3]:.1f} | {med[0]:.1f} | "
                 f"{med[1] * 1000:.1f} | {med[2]:.2f} |")
text = "\n".join(lines) + "\n"
open(md, 'w').write(text)
print(text)
EOF
rm -rf "$LOGDIR"
}
exit
