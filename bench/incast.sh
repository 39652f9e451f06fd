#!/usr/bin/env bash
# incast.sh - many senders into one receiver: usnic with its receive buffer
# shared among the senders (btl_usnic_rx_share 1, the default), usnic
# without (each sender keeps up to its own limit in flight), and btl/tcp,
# in interleaved rounds of the same job (build/incast: every rank but 0
# sends K messages of SIZE MiB to rank 0 at once, R times; every byte is
# checked).
#
#   bench/incast.sh [-n NP] [-H HOSTS] [-m MTU] [-r ROUNDS] [-k K] [-s MIB]
#                   [-R REPS] [-T LIST] [-o NAME]
#
#   -n NP      ranks (default 8): rank 0 receives, the others send
#   -H HOSTS   0 (default): all ranks on this host, over loopback;
#              N >= 2: N network-namespace hosts (test/lib/netns.sh), rank 0
#              alone on h1, the senders spread over h2..hN
#   -m MTU     the hosts' veth MTU with -H (default 1500)
#   -r ROUNDS  interleaved rounds (default 5)
#   -k, -s, -R incast's K messages of SIZE MiB per sender, R repetitions
#              (defaults 8, 1, 3)
#   -T LIST    of usnic, usnic-noshare, tcp (default all three)
#   -o NAME    report bench/results/NAME.md (default incast-<time>)
#
# Per run: MB/s into rank 0 (incast's own figure), and from the usnic
# ranks' counters (btl_usnic_print_stats): datagrams resent (retrans), of
# them after a retransmission timeout (timeout_retrans), datagrams the
# receiver's kernel dropped for a full socket buffer (kernel_drops), and
# how often a sender found its window or allowance full (window_full).
# Ratios are taken round by round (same round, same machine state), shown
# as median [min-max].
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
np=8 hosts=0 mtu=1500 rounds=5 k=8 size=1 reps=3
list=usnic,usnic-noshare,tcp
name=incast-$(date +%Y%m%d-%H%M%S)
while getopts "n:H:m:r:k:s:R:T:o:h" o; do
    case $o in
    n) np=$OPTARG ;;
    H) hosts=$OPTARG ;;
    m) mtu=$OPTARG ;;
    r) rounds=$OPTARG ;;
    k) k=$OPTARG ;;
    s) size=$OPTARG ;;
    R) reps=$OPTARG ;;
    T) list=$OPTARG ;;
    o) name=$OPTARG ;;
    *) sed -n '2,30p' "$0"; exit 2 ;;
    esac
done
[ "$np" -ge 2 ] || { echo "incast.sh: -n needs 2 or more ranks" >&2; exit 2; }
[ "$hosts" = 0 ] || [ "$hosts" -ge 2 ] || { echo "incast.sh: -H is 0 or 2+" >&2; exit 2; }
IFS=, read -r -a transports <<< "$list"

make -s -C "$here" build/incast > /dev/null || exit 1
prog=$here/build/incast
out=$here/results/$name
logs=$out-logs
mkdir -p "$logs"

TEST_TMP=$logs/testbed
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
export TEST_TMP
# shellcheck source=test/lib/mpitest.sh
. "$repo/test/lib/mpitest.sh"
mpix=()
if [ "$hosts" -ge 2 ]; then
    # shellcheck source=test/lib/netns.sh
    . "$repo/test/lib/netns.sh"
    NSB_MTU=$mtu
    nsbed_up "$hosts" > "$logs/testbed.log" 2>&1 || { cat "$logs/testbed.log"; exit 1; }
    hf=$logs/hosts
    per=$(((np - 1 + hosts - 2) / (hosts - 1)))
    {
        echo "$(nsbed_addr 1) slots=1"
        for ((h = 2; h <= hosts; h++)); do echo "$(nsbed_addr "$h") slots=$per"; done
    } > "$hf"
    mpix=(ip netns exec "$NSB_HEAD")
    base=(mpirun --allow-run-as-root --hostfile "$hf" -np "$np" --bind-to none
          --mca plm_rsh_agent "$NSB_AGENT" --mca oob_tcp_if_include "$NSB_CIDR" --mca pml ob1)
    usnic_if=(--mca btl_usnic_if_include "$NSB_CIDR")
    tcp_if=(--mca btl_tcp_if_include "$NSB_CIDR")
    where="$hosts network-namespace hosts over veth (MTU $mtu) + bridge; rank 0 alone on h1, $((np - 1)) senders on h2..h$hosts ($per per host at most)"
else
    base=(mpirun --allow-run-as-root --oversubscribe -np "$np" --bind-to none
          --mca oob_tcp_if_include lo --mca pml ob1)
    usnic_if=(--mca btl_usnic_if_include lo)
    tcp_if=(--mca btl_tcp_if_include lo)
    where="loopback, all $np ranks on this host ($(nproc) CPUs, --bind-to none)"
fi

# run ROUND TRANSPORT: one job; a line "transport round MBps bad retrans tretrans kdrops wfull rc"
run() {
    local r=$1 t=$2 log=$logs/$2.$1.log rc line mbps bad
    local -a cmd=("${base[@]}")
    case $t in
    usnic) cmd+=(--mca btl usnic,self "${usnic_if[@]}" --mca btl_usnic_print_stats 1) ;;
    usnic-noshare) cmd+=(--mca btl usnic,self "${usnic_if[@]}" --mca btl_usnic_print_stats 1
                         --mca btl_usnic_rx_share 0) ;;
    tcp) cmd+=(--mca btl tcp,self "${tcp_if[@]}") ;;
    *) echo "incast.sh: unknown transport $t" >&2; return 1 ;;
    esac
    cmd+=("$prog" -k "$k" -s "$size" -r "$reps")
    echo "# ${mpix[*]} ${cmd[*]}" > "$log"
    timeout -k 10 "$TEST_TIMEOUT" "${mpix[@]}" "${cmd[@]}" >> "$log" 2>&1 < /dev/null
    rc=$?
    line=$(grep -o 'incast np=.*' "$log" | tail -n 1)
    mbps=$(sed -n 's/.*: \([0-9.]*\) MB\/s into rank 0.*/\1/p' <<< "$line")
    bad=$(sed -n 's/.* \([0-9]*\) bad bytes.*/\1/p' <<< "$line")
    echo "$t $r ${mbps:-nan} ${bad:-nan} $(stat_sum "$log" retrans) $(stat_sum "$log" timeout_retrans)" \
        "$(stat_sum "$log" kernel_drops) $(stat_sum "$log" window_full) $rc"
}

rows=$logs/rows.txt
: > "$rows"
for ((r = 1; r <= rounds; r++)); do
    # alternate the order from round to round
    if [ $((r % 2)) = 1 ]; then order=("${transports[@]}"); else
        order=(); for ((i = ${#transports[@]} - 1; i >= 0; i--)); do order+=("${transports[$i]}"); done
    fi
    for t in "${order[@]}"; do
        run "$r" "$t" | tee -a "$rows" >&2
    done
done

python3 - "$rows" "$name" "$where" "$np" "$k" "$size" "$reps" "$rounds" "$(git -C "$repo" describe --always --dirty 2>/dev/null)" \
    "${transports[@]}" > "$out.md" <<'EOF'
import sys, statistics as st
rows, name, where, np_, k, size, reps, rounds, rev = sys.argv[1:10]
ts = sys.argv[10:]
runs = {}
for line in open(rows):
    f = line.split()
    if len(f) != 9:
        continue
    t, r = f[0], int(f[1])
    runs[(t, r)] = dict(mbps=float(f[2]), bad=f[3], retrans=int(f[4]), tretrans=int(f[5]),
                        kdrops=int(f[6]), wfull=int(f[7]), rc=int(f[8]))
def med(xs):
    xs = [x for x in xs if x == x]
    return "n/a" if not xs else "%.0f [%.0f-%.0f]" % (st.median(xs), min(xs), max(xs))
def medr(xs):
    xs = [x for x in xs if x == x]
    return "n/a" if not xs else "%.2f [%.2f-%.2f]" % (st.median(xs), min(xs), max(xs))
print("# Incast: %d senders into one receiver (%s)\n" % (int(np_) - 1, name))
print("%s; each sender %s x %s MiB at once, %s times per job; %s interleaved rounds; commit %s.\n"
      % (where, k, size, reps, rounds, rev))
print("| transport | MB/s into rank 0 | resent datagrams | after a timeout | kernel drops | window or allowance full | failed runs |")
print("|---|---|---|---|---|---|---|")
for t in ts:
    rs = [runs[(t, r)] for r in range(1, int(rounds) + 1) if (t, r) in runs]
    ok = [x for x in rs if x["rc"] == 0 and x["bad"] == "0"]
    print("| %s | %s | %s | %s | %s | %s | %d of %d |" % (
        t, med([x["mbps"] for x in ok]),
        "n/a" if t == "tcp" else med([x["retrans"] for x in ok]),
        "n/a" if t == "tcp" else med([x["tretrans"] for x in ok]),
        "n/a" if t == "tcp" else med([x["kdrops"] for x in ok]),
        "n/a" if t == "tcp" else med([x["wfull"] for x in ok]),
        len(rs) - len(ok), len(rs)))
print("\nRatios of MB/s, round by round: median [min-max]\n")
pairs = [(a, b) for a in ts for b in ts if a != b and a.startswith("usnic") and (b == "tcp" or (a == "usnic" and b == "usnic-noshare"))]
for a, b in pairs:
    xs = []
    for r in range(1, int(rounds) + 1):
        if (a, r) in runs and (b, r) in runs and runs[(b, r)]["mbps"] > 0:
            xs.append(runs[(a, r)]["mbps"] / runs[(b, r)]["mbps"])
    print("- %s / %s: %s" % (a, b, medr(xs)))
print("\nCounters are sums over all ranks of one job (print_stats at MPI_Finalize); cells are median [min-max] over the rounds.")
print("Per-run lines: %s; logs beside it." % rows)
EOF
cat "$out.md"
