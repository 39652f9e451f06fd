#!/usr/bin/env bash
# ab.sh - two settings of usnic (A and B) and btl/tcp, interleaved in every
# round between two network-namespace hosts (test/lib/netns.sh, one rank
# each, bound like run.sh), so that the machine's slow and fast phases hit
# both settings alike.  Prints each run's mpi_bench lines, then a table:
# per test and size the medians over the rounds of A, B and tcp, and B/A
# within each round (bandwidth: > 1 means B is faster; latency: < 1).
#
# usage: bench/ab.sh [-m MTU] [-r ROUNDS] [-a "MCA A"] [-b "MCA B"] [--no-tcp]
#                    [-- MPI_BENCH ARGS]
#   -m MTU      veth MTU (default 1500)
#   -r ROUNDS   rounds (default 4)
#   -a / -b     extra mpirun arguments of setting A / B, e.g.
#               -a "--mca btl_usnic_connect_peers 0"  (default: none)
#   after --     mpi_bench arguments (default: -t lat,bw,bibw -s 8 -S 1m -r 5 -T 50)
# Example (the session 12 comparison of docs/perf-kernel-backend.md):
#   bench/ab.sh -a "--mca btl_usnic_connect_peers 0" -b "--mca btl_usnic_connect_peers 256"
# Needs root; all traffic stays on the test bed's 10.211.0.0/24, removed at the end.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
MTU=1500 ROUNDS=4 A="" B="" TCP=1
while [ $# -gt 0 ]; do
    case "$1" in
        -m) MTU=$2; shift 2 ;;
        -r) ROUNDS=$2; shift 2 ;;
        -a) A=$2; shift 2 ;;
        -b) B=$2; shift 2 ;;
        --no-tcp) TCP=0; shift ;;
        --) shift; break ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "ab.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || set -- -t lat,bw,bibw -s 8 -S 1m -r 5 -T 50
case "$MTU$ROUNDS" in *[!0-9]*|'') echo "ab.sh: -m and -r expect numbers" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "ab.sh: needs root (network namespaces)" >&2; exit 1; }
[ -x "$HERE/build/mpi_bench" ] || make -s -C "$HERE" >&2 || exit 1

OUT=$(mktemp -d /tmp/usnic-ab.XXXXXX)
TEST_TMP=$OUT/testbed
# shellcheck source=test/lib/mpitest.sh
. "$REPO/test/lib/mpitest.sh"
# shellcheck source=test/lib/netns.sh
. "$REPO/test/lib/netns.sh"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
netns_pair_up "$MTU" "$OUT" || exit 1
MPIRUN=(ip netns exec "$NSB_HEAD" timeout -k 10 600 mpirun --allow-run-as-root -np 2
        --hostfile "$(nsbed_hostfile 1)" "${BIND[@]}" --mca plm_rsh_agent "$NSB_AGENT"
        --mca oob_tcp_if_include "$NSB_CIDR" --mca pml ob1)
USNIC=(--mca btl usnic,self --mca btl_usnic_if_include "$NSB_CIDR")
TCPB=(--mca btl tcp,self --mca btl_tcp_if_include "$NSB_CIDR")
echo "# ab.sh: MTU $MTU, $ROUNDS rounds, A: '${A}', B: '${B}', mpi_bench $*"
variants="A B"
[ $TCP = 1 ] && variants="A B tcp"
for ((r = 1; r <= ROUNDS; r++)); do
    for v in $variants; do
        case $v in
            # shellcheck disable=SC2206 # A and B are meant to be word-split
            A) args=("${USNIC[@]}" $A) ;;
            # shellcheck disable=SC2206
            B) args=("${USNIC[@]}" $B) ;;
            tcp) args=("${TCPB[@]}") ;;
        esac
        "${MPIRUN[@]}" "${args[@]}" "$HERE/build/mpi_bench" "$@" </dev/null 2>"$OUT/err.$r.$v" |
            grep -v '^#' | sed "s/^/r$r $v /" | tee -a "$OUT/runs.txt"
    done
done
python3 - "$OUT/runs.txt" <<'EOF'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) >= 5:
        d[(p[2], int(p[3]), p[1])].append(float(p[4]))
keys = sorted({(k[0], k[1]) for k in d})
print("| test | size | A | B | tcp | B/A by round |")
print("|---|---:|---:|---:|---:|---|")
for t, s in keys:
    a, b, c = d[(t, s, "A")], d[(t, s, "B")], d.get((t, s, "tcp"), [])
    med = lambda x: "%.2f" % statistics.median(x) if x else "-"
    ratios = " ".join("%.2f" % (y / x) for x, y in zip(a, b) if x > 0)
    print(f"| {t} | {s} | {med(a)} | {med(b)} | {med(c)} | {ratios} |")
EOF
echo "# runs and stderr: $OUT"
