#!/usr/bin/env bash
# midjob_cut.sh - an MTU black hole that opens while a job runs, watched
# from outside: a checked 1 MiB ping-pong between two network-namespace
# hosts (test/lib/netns.sh, veths of MTU 9000); once 100 MB went out, the
# bridge port towards h2 takes only 1500 bytes (-m: another size), and both
# hosts' veths cut every UDP_SEGMENT train into packets (gso_max_segs 1).
# Prints h1's transmit rate every second, how long the job took after the
# cut, and the counters that tell what happened: retransmissions (into the
# hole), path_shrunk, tx_parted, rx_joined, path_grown.
#
# usage: bench/midjob_cut.sh [-i ITERATIONS] [-p] [-m MTU] [-r SECONDS] [-a "MPIRUN ARGS"]
#   -i N   ping-pong iterations (default 150)
#   -m M   the port takes M bytes after the cut (default 1500; e.g. 8000,
#          between two of the checker's usual sizes)
#   -p     no cut (the same job over the same test bed, for comparison)
#   -r S   close the hole again S seconds after the cut (vh2 back to 9000,
#          trains whole again), e.g. with
#          -a "--mca btl_usnic_connectivity_raise_after 2"
#   -a     more mpirun arguments, e.g.
#          "--mca btl_usnic_connectivity_recheck_after 300"
# Needs root; all traffic stays on the test bed's 10.211.0.0/24.
set -u
iters=150
cut=1
args=""
restore=0
cut_mtu=1500
while getopts "i:pm:r:a:" o; do
    case $o in
    i) iters=$OPTARG ;;
    m) cut_mtu=$OPTARG ;;
    p) cut=0 ;;
    r) restore=$OPTARG ;;
    a) args=$OPTARG ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
    esac
done
cd "$(dirname "$0")/../test/mpi" || exit 1
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# shellcheck source=/dev/null
. ../lib/mpitest.sh
# shellcheck source=/dev/null
. ../lib/netns.sh
build_prog pingpong || exit 1
pp=$BIN
NSB_MTU=9000
nsbed_up 2 || exit 1
export USNIC_TEST_DEV=$NSB_DEV
hosts1=$(nsbed_hostfile 1)
tx0=$(nsbed_ifstat 1 tx_bytes)
EXTRA_MCA="$args" nsbed_start_mpi "$hosts1" 2 "$pp" -n 1m -m 1m -i "$iters"
nsbed_wait_sent 1 100000000 "$tx0"
for h in 1 2; do
    ip -n "$(nsbed_ns $h)" link set "$NSB_DEV" gso_max_segs 1
done
[ $cut = 1 ] && ip -n "$NSB_HEAD" link set vh2 mtu "$cut_mtu"
t0=$SECONDS
(
    prev=$(nsbed_ifstat 1 tx_bytes)
    for i in $(seq 1 600); do
        sleep 1
        c=$(nsbed_ifstat 1 tx_bytes)
        echo "t=${i}s h1 transmits $(((c - prev) / 1000000)) MB/s"
        prev=$c
    done
) &
mon=$!
if [ "$restore" -gt 0 ]; then
    sleep "$restore"
    ip -n "$NSB_HEAD" link set vh2 mtu 9000
    for h in 1 2; do
        ip -n "$(nsbed_ns $h)" link set "$NSB_DEV" gso_max_segs 65535
    done
    echo "t=$((SECONDS - t0))s: the path carries 9000 again"
fi
nsbed_wait_mpi
rc=$?
kill $mon 2>/dev/null
echo "job: rc=$rc, $((SECONDS - t0)) s after the $([ $cut = 1 ] && echo cut || echo 100 MB mark)"
for k in retrans timeout_retrans sack_retrans path_shrunk tx_parted rx_joined path_grown; do
    printf '%s: rank 0 %s, rank 1 %s\n' "$k" "$(rank_stat "$RUN_LOG" 0 $k)" "$(rank_stat "$RUN_LOG" 1 $k)"
done
grep -h 'checking the path again\|checking whether\|from now on\|still vanish' "$RUN_LOG" | sed 's/^/  /'
finish
