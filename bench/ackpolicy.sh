#!/usr/bin/env bash
# ackpolicy.sh - what the usnic BTL's ACK policy costs and buys, on loopback.
#
# The explicit-ACK policy (btl_usnic_ack.c, usnic_rel_ack_due in
# btl_usnic_rel.h): a receiver that accepted data owes its peer a cumulative
# ACK.  The ACK rides on the next data packet to that peer if there is one
# (piggy-backed); otherwise the progress engine sends it alone, on the
# priority channel, once
#   - btl_usnic_ack_delay microseconds passed since the ACK became owed, or
#   - ack_every = (the peer's btl_usnic_send_window) / 4 datagrams arrived
#     unacknowledged, or
#   - at once after a duplicate or an out-of-order arrival (with a SACK), or
#     after the last chunk of an emulated PUT (btl_usnic_recv.c: its
#     initiator waits for that ACK before it sends ob1's FIN).
# The test is made once per progress call (usnic_progress_acks, after the
# receive completions - up to 16 per channel - and the queued sends), with
# the clock read at the start of that call.  ack_delay 0 therefore does not
# mean "one ACK per datagram": it means an ACK in EVERY progress call that
# accepted data which nothing piggy-backed in that same call (one ACK covers
# the whole batch of that call); a reply the application sends after the
# progress call returned comes too late to carry it.  Measured: such a call
# accepts one datagram, so in practice it is one ACK per data datagram.
#
# Settings (MCA parameters only, no code change), each at both datagram
# sizes (the interface-MTU default, 65507 bytes on lo, and
# btl_usnic_udp_datagram_size -1 = the provider's 1472 bytes):
#   ack_delay sweep at the default window:  -d list (default 0,10,50,200,1000 us)
#   send_window sweep at the default delay: -w list (default 16,64,256 segments)
#   --cross: the full product delays x windows instead.
# btl_usnic_recv_window is set to 2 x send_window in every run (it must be
# at least the peer's send window; it only sizes the receive bitmap).
#
# Metrics per setting, each from its own mpirun (so the '[usnic stats]'
# counters of btl_usnic_print_stats belong to one traffic pattern):
#   lat8    8 B ping-pong latency (us)              mpi_bench -t lat  -s 8   -S 8
#   rate8   8 B message rate (msgs/s)               mpi_bench -t rate -s 8   -S 8
#   bw64k   64 KiB unidirectional bandwidth (MB/s)  mpi_bench -t bw   -s 64k -S 64k
#   bw1m    1 MiB unidirectional bandwidth (MB/s)   mpi_bench -t bw   -s 1m  -S 1m
#   bibw1m  1 MiB bidirectional bandwidth (MB/s)    mpi_bench -t bibw -s 1m  -S 1m
# and from both ranks' [usnic stats] lines: explicit ACKs sent per data
# datagram received (acks_tx / (rx_pkts - acks_rx)), piggy-backed ACKs,
# SACKs, retransmissions, window_full (send attempts that found the peer's
# window - in segments or in bytes in flight - full: sender stalls).
#
# Every round runs every (setting, test) once; within a round the tests run
# one after the other and, per test, the settings in a fresh random order
# (seeded, --seed), so slow drifts of the machine hit all settings alike.
# Not a fixed rotation: with one, every setting always follows the same
# predecessor, and a first sweep showed the 8 B message rate of identical
# traffic differing by up to 10% between settings, consistently over 7
# rounds - an order effect that vanished once the order was shuffled.
# Reported: median of the per-round medians [min-max of the per-round
# medians]; "outside the noise" = the two ranges do not overlap.
#
# Run time: 70 mpiruns of ~0.8 s per round with the defaults (14 settings x
# 5 tests); 7 rounds take about 6.5 minutes on an idle 2-core machine (more
# rounds: fewer settings that look better or worse by chance); -q (1 round,
# fewer repetitions) about 50 s.  Serialise it with other benchmarks on the
# machine:  flock /tmp/usnic-bench.lock bash bench/ackpolicy.sh
#
# Output: markdown report on stdout and in bench/results/<name>.md, one CSV
# line per run in bench/results/<name>-runs.csv, logs in
# bench/results/<name>-logs/.
set -u
# One { ... } block: bash parses the whole script before running it, so
# editing the file while it runs cannot break the running instance.
{
HERE=$(cd "$(dirname "$0")" && pwd)
INVOCATION="$0"
for a in "$@"; do INVOCATION+=" $a"; done
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
BUILD=$HERE/build
RESDIR=$HERE/results

DEF_DELAY=50   # the component's defaults (btl_usnic_mca.c)
DEF_WIN=64
ROUNDS=7
ROUNDS_SET=0
QUICK=0
DELAYS=0,10,50,200,1000
WINDOWS=16,64,256
DGRAMS=max,1472
TESTS=lat8,rate8,bw64k,bw1m,bibw1m
CROSS=0
RUN_TIMEOUT=120
WAIT_IDLE=0
DO_BUILD=0
NAME=""
SEED=""

usage() {
    cat <<EOF
usage: $0 [options]
  -r N          rounds (default $ROUNDS; 1 with -q)
  -q            quick run: 1 round, fewer repetitions per run
  -d list       ack_delay values in us (default $DELAYS), swept at send_window $DEF_WIN
  -w list       send_window values (default $WINDOWS), swept at ack_delay $DEF_DELAY;
                recv_window is always 2 x send_window
  -g list       datagram sizes: max (interface MTU, 65507 on lo) and/or 1472
                (btl_usnic_udp_datagram_size -1) (default $DGRAMS)
  -t list       tests (default $TESTS)
  --cross       every ack_delay with every send_window (slower: 15 settings
                per datagram size with the default lists instead of 7)
  --timeout S   kill one run after S seconds (default $RUN_TIMEOUT)
  --wait-idle S before each run wait up to S seconds for other processes to
                stop using the CPUs (default 0: don't wait, only report)
  --seed N      seed of the random run order (default: random, printed in the report)
  --build       run make in bench/ first (default: only if binaries are missing)
  -o NAME       result file prefix (default ackpolicy-<timestamp>)
  -h, --help    this text
All traffic stays on 127.0.0.1 / lo.  Serialise with other benchmarks:
  flock /tmp/usnic-bench.lock bash $0
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        -r) ROUNDS=${2:-}; ROUNDS_SET=1; shift 2 || break ;;
        -q) QUICK=1; shift ;;
        -d) DELAYS=${2:-}; shift 2 || break ;;
        -w) WINDOWS=${2:-}; shift 2 || break ;;
        -g) DGRAMS=${2:-}; shift 2 || break ;;
        -t) TESTS=${2:-}; shift 2 || break ;;
        --cross) CROSS=1; shift ;;
        --timeout) RUN_TIMEOUT=${2:-}; shift 2 || break ;;
        --wait-idle) WAIT_IDLE=${2:-}; shift 2 || break ;;
        --seed) SEED=${2:-}; shift 2 || break ;;
        --build) DO_BUILD=1; shift ;;
        -o) NAME=${2:-}; shift 2 || break ;;
        -h|--help) usage; exit 0 ;;
        *) echo "ackpolicy.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ $QUICK = 1 ] && [ $ROUNDS_SET = 0 ] && ROUNDS=1
STAMP=$(date +%Y%m%d-%H%M%S)
[ -n "$NAME" ] || NAME=ackpolicy-$STAMP
case "$ROUNDS" in ''|*[!0-9]*|0) echo "ackpolicy.sh: -r expects a positive integer" >&2; exit 2 ;; esac
case "$RUN_TIMEOUT" in ''|*[!0-9]*|0) echo "ackpolicy.sh: --timeout expects seconds" >&2; exit 2 ;; esac
case "$WAIT_IDLE" in ''|*[!0-9]*) echo "ackpolicy.sh: --wait-idle expects seconds" >&2; exit 2 ;; esac
[ -n "$SEED" ] || SEED=$(( $(od -An -N2 -tu2 /dev/urandom) ))
case "$SEED" in ''|*[!0-9]*) echo "ackpolicy.sh: --seed expects a non-negative integer" >&2; exit 2 ;; esac
RANDOM=$SEED
IFS=, read -r -a DLIST <<<"$DELAYS"
IFS=, read -r -a WLIST <<<"$WINDOWS"
IFS=, read -r -a GLIST <<<"$DGRAMS"
IFS=, read -r -a TLIST <<<"$TESTS"
for v in "${DLIST[@]}"; do
    case "$v" in ''|*[!0-9]*) echo "ackpolicy.sh: -d expects microseconds, e.g. 0,50,200" >&2; exit 2 ;; esac
done
for v in "${WLIST[@]}"; do
    case "$v" in ''|*[!0-9]*|0) echo "ackpolicy.sh: -w expects positive segment counts" >&2; exit 2 ;; esac
    [ "$v" -le 524288 ] || { echo "ackpolicy.sh: -w: at most 524288 (recv_window = 2x <= 2^20)" >&2; exit 2; }
done
for v in "${GLIST[@]}"; do
    case "$v" in max|1472) ;; *) echo "ackpolicy.sh: -g expects max and/or 1472" >&2; exit 2 ;; esac
done
for v in "${TLIST[@]}"; do
    case "$v" in lat8|rate8|bw64k|bw1m|bibw1m) ;;
        *) echo "ackpolicy.sh: unknown test '$v' (lat8,rate8,bw64k,bw1m,bibw1m)" >&2; exit 2 ;; esac
done

command -v python3 >/dev/null || { echo "ackpolicy.sh: python3 is needed for the report" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "ackpolicy.sh: mpirun not found" >&2; exit 1; }
ompi_info 2>/dev/null | grep -q 'btl: usnic' ||
    { echo "ackpolicy.sh: the usnic BTL is not installed (ompi_info | grep usnic)" >&2; exit 1; }
if [ $DO_BUILD = 1 ] || [ ! -x "$BUILD/mpi_bench" ]; then
    make -s -C "$HERE" "$BUILD/mpi_bench" >&2 || { echo "ackpolicy.sh: build failed" >&2; exit 1; }
fi
[ -x "$BUILD/mpi_bench" ] || { echo "ackpolicy.sh: $BUILD/mpi_bench missing (make -C bench)" >&2; exit 1; }

# ---------------------------------------------------------------- settings
# A setting is "delay window dgram"; the default setting of each datagram
# size is always included (it is the reference).
SETTINGS=()
add_setting() {
    local s
    for s in "${SETTINGS[@]}"; do [ "$s" = "$*" ] && return 0; done
    SETTINGS+=("$*")
}
for g in "${GLIST[@]}"; do
    add_setting $DEF_DELAY $DEF_WIN "$g"
    if [ $CROSS = 1 ]; then
        for d in "${DLIST[@]}"; do for w in "${WLIST[@]}"; do add_setting "$d" "$w" "$g"; done; done
    else
        for d in "${DLIST[@]}"; do add_setting "$d" $DEF_WIN "$g"; done
        for w in "${WLIST[@]}"; do add_setting $DEF_DELAY "$w" "$g"; done
    fi
done
NS=${#SETTINGS[@]}
NT=${#TLIST[@]}

# mpi_bench arguments of a test: more repetitions where a run is short
test_args() {
    local reps_small=11 reps_big=7 extra=()
    if [ $QUICK = 1 ]; then reps_small=5; reps_big=3; extra=(-T 10); fi
    case "$1" in
        lat8)   TARGS=(-t lat -s 8 -S 8 -r "$reps_small") ;;
        rate8)  TARGS=(-t rate -s 8 -S 8 -r "$reps_small") ;;
        bw64k)  TARGS=(-t bw -s 64k -S 64k -r "$reps_big") ;;
        bw1m)   TARGS=(-t bw -s 1m -S 1m -r "$reps_big") ;;
        bibw1m) TARGS=(-t bibw -s 1m -S 1m -r "$reps_big") ;;
    esac
    TARGS+=("${extra[@]}")
}

export FI_UDP_IFACE=lo
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core
        --mca oob_tcp_if_include lo -x FI_UDP_IFACE=lo)
# btl_base_verbose 5: the log says which datagram size the BTL really used
# shellcheck disable=SC2054  # usnic,self is one argument
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
           --mca btl_usnic_print_stats 1 --mca btl_base_verbose 5)

set_cmd() {   # delay window dgram test -> CMD
    local dg=()
    [ "$3" = 1472 ] && dg=(--mca btl_usnic_udp_datagram_size -1)
    test_args "$4"
    CMD=("${MPIRUN[@]}" "${USNIC_MCA[@]}" --mca btl_usnic_ack_delay "$1"
         --mca btl_usnic_send_window "$2" --mca btl_usnic_recv_window $((2 * $2)) "${dg[@]}"
         "$BUILD/mpi_bench" "${TARGS[@]}")
}

mkdir -p "$RESDIR"
LOGDIR=$RESDIR/$NAME-logs
mkdir -p "$LOGDIR"
RUNS=$LOGDIR/runs.txt
: >"$RUNS"
printf '%s\n' "${SETTINGS[@]}" >"$LOGDIR/settings.txt"

RUNPID=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$RUNPID" ] && kill -0 "$RUNPID" 2>/dev/null; then
        kill -TERM "$RUNPID" 2>/dev/null   # timeout passes it on to mpirun
        wait "$RUNPID" 2>/dev/null
    fi
    RUNPID=""
    progress_done
    return 0
}
trap cleanup EXIT
trap 'echo "ackpolicy.sh: interrupted" >&2; exit 130' INT TERM HUP



# The installed component, hashed before every run: another engineer may
# reinstall it while the sweep runs (the report then says which runs used
# which build).
SO=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')/mca_btl_usnic.so
so_id() {
    local h
    h=$(sha256sum "$SO" 2>/dev/null) || { echo missing; return; }
    echo "${h:0:12}"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-before.txt"
sum=0
for _ in 1 2 3 4; do read_running; sum=$((sum + RUNNING - 1)); sleep 0.25; done
IDLE_BEFORE=$(awk -v s=$sum 'BEGIN { printf "%.2f", s / 4 }')
set_cmd $DEF_DELAY $DEF_WIN max lat8
CMD_EXAMPLE="${CMD[*]}"
echo "# ackpolicy.sh: $NS settings x $NT tests x $ROUNDS round(s) = $((NS * NT * ROUNDS)) runs, order seed $SEED" >&2
echo "# loadavg before: $LOAD_BEFORE; other runnable tasks before: $IDLE_BEFORE; logs in ${LOGDIR#"$HERE"/}" >&2

# ---------------------------------------------------------------- rounds
T_START=$(date +%s)
TOTAL=$((NS * NT * ROUNDS))
RUNNO=0
NFAIL=0
for ((r = 1; r <= ROUNDS; r++)); do
    for t in "${TLIST[@]}"; do
        # the settings in a fresh random order (Fisher-Yates with bash's
        # seeded RANDOM), so no setting always follows the same one
        ORDER=()
        for ((k = 0; k < NS; k++)); do ORDER+=("$k"); done
        for ((k = NS - 1; k > 0; k--)); do
            j=$((RANDOM % (k + 1)))
            x=${ORDER[$k]}; ORDER[k]=${ORDER[$j]}; ORDER[j]=$x
        done
        for ((k = 0; k < NS; k++)); do
            read -r d w g <<<"${SETTINGS[${ORDER[$k]}]}"
            RUNNO=$((RUNNO + 1))
            el=$(( $(date +%s) - T_START ))
            eta=""
            [ $RUNNO -gt 1 ] && eta=", ~$(( el * (TOTAL - RUNNO + 1) / (RUNNO - 1) ))s left"
            progress "[round $r/$ROUNDS] run $RUNNO/$TOTAL: $t ack_delay=$d window=$w dgram=$g - ${el}s elapsed$eta"
            set_cmd "$d" "$w" "$g" "$t"
            out=$LOGDIR/d$d-w$w-g$g.$t.r$r.log
            echo "# ${CMD[*]}" >"$out"
            wait_idle
            so=$(so_id)
            sampled_run "$out" 0.1 timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}"
            rc=$RC n=$SAMPLES sum=$RUNNABLE_SUM t0=$T0 t1=$T1
            [ $rc = 0 ] || NFAIL=$((NFAIL + 1))
            [ "$(so_id)" = "$so" ] || so="$so->$(so_id)"   # reinstalled during the run
            # round delay window dgram test rc wall samples runnable_sum build
            echo "$r $d $w $g $t $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $n $sum $so" >>"$RUNS"
        done
    done
done
progress_done
T_END=$(date +%s)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-after.txt"
echo "# $TOTAL runs in $((T_END - T_START))s ($NFAIL failed); loadavg after: $LOAD_AFTER" >&2

BENCH_DIR=$HERE python3 - "$LOGDIR" "$RESDIR/$NAME" "$ROUNDS" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "$IDLE_BEFORE" "$((T_END - T_START))" "$DEF_DELAY" "$DEF_WIN" "$TESTS" "$QUICK" "$CROSS" \
    "$CMD_EXAMPLE" "$SEED" "$INVOCATION" "$(date '+%F %T') on $(hostname)" <<'PY'
import sys, os, re, statistics

sys.path.insert(0, os.environ["BENCH_DIR"])
from benchlib import build_lines

(logdir, prefix, rounds, load_before, load_after, idle_before, secs, def_delay, def_win,
 tests, quick, cross, cmd_example, seed, invocation, when) = sys.argv[1:17]
rounds, def_delay, def_win = int(rounds), int(def_delay), int(def_win)
tests = tests.split(",")

TEST_INFO = {   # test: (title, unit, higher is better, mpi_bench test, size)
    "lat8": ("8 B latency", "us", False, "lat", 8),
    "rate8": ("8 B message rate", "msgs/s", True, "rate", 8),
    "bw64k": ("64 KiB bandwidth", "MB/s", True, "bw", 65536),
    "bw1m": ("1 MiB bandwidth", "MB/s", True, "bw", 1048576),
    "bibw1m": ("1 MiB bidir. bandwidth", "MB/s", True, "bibw", 1048576),
}
BASELINE = 2.5   # average runnable tasks during a run on an idle machine

settings = []
for line in open(os.path.join(logdir, "settings.txt")):
    f = line.split()
    if len(f) == 3:
        settings.append((int(f[0]), int(f[1]), f[2]))
dgrams = []
for s in settings:
    if s[2] not in dgrams:
        dgrams.append(s[2])

runs = []
for line in open(os.path.join(logdir, "runs.txt")):
    f = line.split()
    if len(f) != 10:
        continue
    d = dict(round=int(f[0]), delay=int(f[1]), win=int(f[2]), dg=f[3], test=f[4], rc=int(f[5]),
             wall=float(f[6]), samples=int(f[7]), runnable=int(f[8]), build=f[9])
    log = os.path.join(logdir, f"d{d['delay']}-w{d['win']}-g{d['dg']}.{d['test']}.r{d['round']}.log")
    txt = open(log, errors="replace").read() if os.path.exists(log) else ""
    name, size = TEST_INFO[d["test"]][3], TEST_INFO[d["test"]][4]
    m = re.search(rf"^{name} {size} ([0-9.eE+-]+) ", txt, re.M)
    d["value"] = float(m.group(1)) if m else None
    st = {}
    nst = 0
    for sl in re.findall(r"\[usnic stats\](.*)", txt):
        nst += 1
        for k, v in re.findall(r"(\w+)=(\d+)", sl):
            st[k] = st.get(k, 0) + int(v)
    d["stats"] = st
    d["ranks"] = nst
    d["dgsize"] = sorted(set(int(x) for x in re.findall(
        r"btl:usnic: using provider \S+ device \S+ \([^)]*\): datagram (\d+) bytes", txt)))
    d["fallback"] = len(re.findall(r"self-test datagram of \d+ bytes did not arrive", txt))
    d["ok"] = d["rc"] == 0 and d["value"] is not None
    d["busy"] = bool(d["samples"]) and d["runnable"] / d["samples"] - BASELINE >= 0.5
    d["log"] = os.path.relpath(log, os.path.dirname(logdir))
    runs.append(d)

def key(s):
    return (s[0], s[1], s[2])

def sel(s, test):
    return [d for d in runs if (d["delay"], d["win"], d["dg"]) == key(s) and d["test"] == test and d["ok"]]

def agg(vals):
    v = [x for x in vals if x is not None]
    if not v:
        return None
    return statistics.median(v), min(v), max(v), len(v)

def perf(s, test):
    return agg([d["value"] for d in sel(s, test)])

# ---- stats metrics, per run (both ranks summed)
def data_rx(st):
    return st.get("rx_pkts", 0) - st.get("acks_rx", 0)

def data_tx(st):
    return st.get("tx_pkts", 0) - st.get("acks_tx", 0)

def ratio(a, b):
    return a / b if b else None

STAT_FUNCS = {
    "data_rx": lambda st: data_rx(st),
    "ack_per_data": lambda st: ratio(st.get("acks_tx", 0), data_rx(st)),
    "piggy_per_data": lambda st: ratio(st.get("piggy_acks", 0), data_rx(st)),
    "piggy_share": lambda st: ratio(st.get("piggy_acks", 0), st.get("acks_tx", 0) + st.get("piggy_acks", 0)),
    "data_per_ack": lambda st: ratio(data_rx(st), st.get("acks_tx", 0) + st.get("piggy_acks", 0)),
    "sacks_k": lambda st: ratio(1000.0 * st.get("sacks_tx", 0), data_rx(st)),
    "sacks": lambda st: st.get("sacks_tx", 0),
    "retrans": lambda st: st.get("retrans", 0),
    "wfull_per_tx": lambda st: ratio(st.get("window_full", 0), data_tx(st)),
    "wfull": lambda st: st.get("window_full", 0),
}

def stat(s, test, name):
    return agg([STAT_FUNCS[name](d["stats"]) for d in sel(s, test) if d["ranks"]])

def stat_all(s, name):
    """the stats metric over all tests of one setting: per round, the runs' counters summed"""
    vals = []
    for r in range(1, rounds + 1):
        tot = {}
        n = 0
        for t in tests:
            for d in sel(s, t):
                if d["round"] == r and d["ranks"]:
                    n += 1
                    for k, v in d["stats"].items():
                        tot[k] = tot.get(k, 0) + v
        if n == len(tests):
            vals.append(STAT_FUNCS[name](tot))
    return agg(vals)

def fmt(x, nd):
    if x is None:
        return "n/a"
    if abs(x) >= 1e5:
        return f"{x:.0f}"
    return f"{x:.{nd}f}"

def cell(a, nd=1):
    if a is None:
        return "n/a"
    if a[3] == 1:
        return fmt(a[0], nd)
    return f"{fmt(a[0], nd)} [{fmt(a[1], nd)}-{fmt(a[2], nd)}]"

ND = {"lat8": 2, "rate8": 0, "bw64k": 0, "bw1m": 0, "bibw1m": 0}

def dflt(g):
    return (def_delay, def_win, g)

def sname(s):
    return f"ack_delay {s[0]}, window {s[1]}"

def dgname(g):
    return "65507 B (interface MTU)" if g == "max" else "1472 B"

def compare(a, b, higher):
    """a vs b (agg tuples): +1 a better outside the noise, -1 worse, 0 overlap"""
    if a is None or b is None or a[3] < 2 or b[3] < 2:
        return 0
    if higher:
        return 1 if a[1] > b[2] else (-1 if a[2] < b[1] else 0)
    return 1 if a[2] < b[1] else (-1 if a[1] > b[2] else 0)

def paired(s, test):
    """per-round value(s) / value(default), and the number of rounds s was better"""
    g = s[2]
    higher = TEST_INFO[test][2]
    rs, wins = [], 0
    for r in range(1, rounds + 1):
        a = [d["value"] for d in sel(s, test) if d["round"] == r]
        b = [d["value"] for d in sel(dflt(g), test) if d["round"] == r]
        if a and b and b[0]:
            q = a[0] / b[0]
            rs.append(q)
            if (q > 1) == higher and q != 1:
                wins += 1
    return rs, wins

def pct(q):
    return f"{(q - 1) * 100:+.1f} %"

out = []
P = out.append
P("# usnic ACK policy: ack_delay and send_window sweep (loopback)")
P("")
P(f"Command: `{invocation}` (run order seed {seed}: add `--seed {seed}` for the same order), "
  f"{when}.")
P("")
P(f"{len(settings)} settings x {len(tests)} tests, {rounds} round(s), every run its own mpirun "
  "(2 ranks, --bind-to core, pml ob1, btl usnic,self on lo); per round and test the settings "
  f"run in a fresh random order (seed {seed}). Values: median of the per-round medians [min-max of the "
  "per-round medians] (each run's median is over its mpi_bench repetitions); "
  "**bold** = better than the default setting of the same datagram size outside the noise "
  "(ranges do not overlap), _italic_ = worse outside the noise. "
  "\"vs default\" = median over rounds of value / default's value in the same round"
  + (" (wins = rounds in which the setting was better)." if rounds > 1 else "."))
P("")
P("Command of one run (here: ack_delay 50, window 64, interface-MTU datagrams, latency): "
  f"`{cmd_example}`")
P("")
P("What the settings do (btl_usnic_ack.c, usnic_rel_ack_due): an owed ACK rides on the next "
  "data packet to the peer; otherwise usnic_progress_acks, once per progress call (after up to "
  "16 receive completions per channel and the queued sends), sends it alone when ack_delay us "
  "passed since it became owed, or ack_every = peer's send_window / 4 datagrams arrived "
  "unacknowledged, or at once after a duplicate / out-of-order arrival (then with a SACK) or "
  "after the last chunk of an emulated PUT (1 MiB messages are PUTs). "
  "**ack_delay 0** thus means: an explicit ACK at the end of every progress call that accepted "
  "data nothing piggy-backed in that call - one ACK per receive batch, not per datagram (in "
  "practice a batch is one datagram: see the ACK tables) - and it goes out before the "
  "application can send its reply, so ping-pong replies no longer carry it. "
  "recv_window = 2 x send_window in every run (the component's default recv_window is 4096; it "
  "only sizes the receive bitmap). window_full counts send attempts that found the peer's window "
  "full - in segments, or in bytes in flight (at most half the peer's kernel receive buffer as "
  "getsockopt reports it: Linux doubles the 4 MiB btl_usnic_udp_sockbuf asks for, so 4 MiB, "
  "~64 datagrams of 65507 B - at that size the byte limit and the default window coincide) - so "
  "it is a measure of time spent stalled, not of stall episodes.")
P("")

# ---- performance tables
for g in dgrams:
    ss = [s for s in settings if s[2] == g]
    P(f"## Performance, {dgname(g)} datagrams")
    P("")
    hdr = "| ack_delay (us) | send_window |"
    sep = "|---:|---:|"
    for t in tests:
        ti = TEST_INFO[t]
        hdr += f" {ti[0]} ({ti[1]}, {'higher' if ti[2] else 'lower'} is better) | vs default |"
        sep += "---|---:|"
    P(hdr)
    P(sep)
    for s in ss:
        row = f"| {s[0]}{' (default)' if s[0] == def_delay else ''} | {s[1]}{' (default)' if s[1] == def_win else ''} |"
        for t in tests:
            a, b = perf(s, t), perf(dflt(g), t)
            c = cell(a, ND[t])
            cmp_ = compare(a, b, TEST_INFO[t][2]) if s != dflt(g) else 0
            if cmp_ > 0:
                c = f"**{c}**"
            elif cmp_ < 0:
                c = f"_{c}_"
            if s == dflt(g):
                vs = "(reference)"
            else:
                rs, wins = paired(s, t)
                vs = "n/a" if not rs else pct(statistics.median(rs)) + (
                    f" ({wins}/{len(rs)})" if len(rs) > 1 else "")
            row += f" {c} | {vs} |"
        P(row)
    P("")

# ---- ACK traffic tables, one per test
P("## ACK traffic per test")
P("")
P("From the `[usnic stats]` lines of both ranks of each run (summed), median over rounds. "
  "data rx = data datagrams received (rx_pkts - acks_rx, both directions, including ob1's "
  "control messages); explicit = acks_tx / data rx; piggy = piggy_acks / data rx (data packets "
  "that carried an owed ACK); data/ACK = data rx / (acks_tx + piggy_acks), the datagrams one "
  "ACK covers on average; SACKs = sacks_tx (explicit ACKs with a selective-ACK bitmap, sent "
  "after an out-of-order arrival: on loopback the two channels - two sockets - overtake each "
  "other, there is no loss); retrans = segments sent again; window_full per data datagram sent "
  "(tx_pkts - acks_tx). The iteration count of mpi_bench adapts to the speed, so totals differ "
  "between runs; compare the ratios.")
P("")
for t in tests:
    P(f"### {TEST_INFO[t][0]} ({t})")
    P("")
    P("| datagram | ack_delay | window | data rx | explicit ACKs / data | piggy / data | data / ACK | SACKs | retrans | window_full / data tx |")
    P("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in settings:
        def sc(n, nd):
            a = stat(s, t, n)
            return "n/a" if a is None else fmt(a[0], nd)
        P(f"| {'65507' if s[2] == 'max' else '1472'} | {s[0]} | {s[1]} | {sc('data_rx', 0)} | "
          f"{sc('ack_per_data', 3)} | {sc('piggy_per_data', 3)} | {sc('data_per_ack', 1)} | "
          f"{sc('sacks', 0)} | {sc('retrans', 0)} | {sc('wfull_per_tx', 2)} |")
    P("")

# ---- best per metric
METRICS = [(t, TEST_INFO[t][0] + f" ({TEST_INFO[t][1]})", TEST_INFO[t][2], "perf") for t in tests]
METRICS += [("ack_per_data", "explicit ACKs per data datagram, all tests (fewer = cheaper)", False, "stat"),
            ("data_per_ack", "data datagrams per ACK (explicit + piggy-backed), all tests", True, "stat"),
            ("piggy_share", "share of ACKs piggy-backed (piggy / (piggy + explicit)), all tests", True, "stat"),
            ("sacks_k", "SACKs per 1000 data datagrams, all tests", False, "stat"),
            ("retrans", "retransmissions, all tests", False, "stat"),
            ("wfull_per_tx", "window_full per data datagram sent, all tests", False, "stat")]

def mval(s, m):
    name, _, _, kind = m
    return perf(s, name) if kind == "perf" else stat_all(s, name)

P("## Best setting per metric")
P("")
P("Best = best median. \"clearly\" = better than every other setting of that datagram size "
  "outside the noise (ranges do not overlap with the runner-up); otherwise the settings within "
  "the noise of the best are listed too.")
P("")
P("| metric | datagram | best setting | value | default (50 us, 64) | within the noise of the best |")
P("|---|---|---|---|---|---|")
for m in METRICS:
    name, title, higher, kind = m
    for g in dgrams:
        ss = [s for s in settings if s[2] == g]
        vals = [(s, mval(s, m)) for s in ss]
        vals = [(s, a) for s, a in vals if a is not None]
        if not vals:
            continue
        vals.sort(key=lambda x: x[1][0], reverse=higher)
        best, ba = vals[0]
        ties = [s for s, a in vals[1:] if compare(ba, a, higher) == 0]
        if len(set(round(a[0], 9) for _, a in vals)) == 1:
            bs = "all equal"
        else:
            bs = sname(best) + (" (clearly)" if not ties and len(vals) > 1 else "")
        nd = ND.get(name, 3)
        if name in ("retrans",):
            nd = 0
        da = mval(dflt(g), m)
        tl = ", ".join(f"{s[0]}/{s[1]}" for s in ties)
        if len(tl) > 80:
            tl = f"{len(ties)} of the {len(vals) - 1} others"
        P(f"| {title} | {'65507' if g == 'max' else '1472'} | {bs} | {cell(ba, nd)} | "
          f"{cell(da, nd)} | {tl or '-'} |")
P("")
P("(within the noise: ack_delay/window pairs whose range overlaps the best one's.)")
P("")

# ---- verdict on the defaults
P("## The defaults (ack_delay 50 us, send_window 64)")
P("")
perf_tests = tests
better, worse = {}, {}
for s in settings:
    k = (s[0], s[1])
    if k == (def_delay, def_win):
        continue
    for t in perf_tests:
        a, b = perf(s, t), perf(dflt(s[2]), t)
        c = compare(a, b, TEST_INFO[t][2])
        rs, _ = paired(s, t)
        txt = f"{TEST_INFO[t][0]} @{'65507' if s[2] == 'max' else '1472'}" + (
            f" {pct(statistics.median(rs))}" if rs else "")
        if c > 0:
            better.setdefault(k, []).append(txt)
        elif c < 0:
            worse.setdefault(k, []).append(txt)
pairs = []
for s in settings:
    k = (s[0], s[1])
    if k != (def_delay, def_win) and k not in pairs:
        pairs.append(k)
dominating = [k for k in pairs if better.get(k) and not worse.get(k)]
consistent = {}
for s in settings:
    k = (s[0], s[1])
    if k == (def_delay, def_win) or rounds < 5:
        continue
    for t in perf_tests:
        rs, wins = paired(s, t)
        if len(rs) < 5 or compare(perf(s, t), perf(dflt(s[2]), t), TEST_INFO[t][2]) != 0:
            continue
        if wins in (0, len(rs)):
            consistent.setdefault(k, []).append(
                f"{TEST_INFO[t][0]} @{'65507' if s[2] == 'max' else '1472'} "
                f"{pct(statistics.median(rs))} ({'better' if wins else 'worse'} in {len(rs)}/{len(rs)} rounds)")
for k in pairs:
    b, w = better.get(k, []), worse.get(k, [])
    line = f"- ack_delay {k[0]}, window {k[1]}: "
    if not b and not w:
        line += "within the noise of the default on every metric"
    else:
        if b:
            line += "better outside the noise: " + "; ".join(b)
        if w:
            line += (". " if b else "") + "worse outside the noise: " + "; ".join(w)
    if consistent.get(k):
        line += ". Within the noise but the same sign in every round (paired with the default): " + \
            "; ".join(consistent[k])
    P(line)
P("")
ncmp = sum(1 for k in pairs for g in dgrams for t in perf_tests
           if (k[0], k[1], g) in settings and perf((k[0], k[1], g), t) and perf(dflt(g), t))
if rounds >= 2:
    import math
    pch = 2.0 / math.comb(2 * rounds, rounds)
    P(f"Chance: with {rounds} rounds, two settings that perform the same have non-overlapping "
      f"ranges with probability 2/C({2 * rounds},{rounds}) = {100 * pch:.2f} %; this section makes "
      f"{ncmp} such comparisons, so about {ncmp * pch:.2f} \"outside the noise\" result(s) are "
      "expected by chance alone. A small difference on a single metric is weak evidence; "
      "the 8 B tests are the same experiment at both datagram sizes (an 8 B message is one "
      "datagram on the priority channel, whose size does not depend on the data channel's), so "
      "opposite results there are noise. The same sign in every paired round happens by chance "
      f"with probability 2/2^{rounds} = {100 * 2 / 2 ** rounds:.1f} % per comparison "
      f"(~{ncmp * 2 / 2 ** rounds:.1f} expected here): a hint, not a result.")
    P("")
if rounds < 2:
    P("Only one round: no noise estimate, so no setting can be called better or worse "
      "outside the noise (run with more rounds).")
elif dominating:
    P("**A setting beats the defaults: " + ", ".join(f"ack_delay {k[0]} / window {k[1]}" for k in dominating)
      + "** - better outside the noise on at least one performance metric and not worse outside "
      "the noise on any (both datagram sizes).")
else:
    P("No setting is better than the defaults outside the noise on some performance metric "
      "without being worse outside the noise on another (both datagram sizes considered).")
P("")

# ---- notes
notes = []
for d in runs:
    if not d["ok"]:
        notes.append(f"round {d['round']} ack_delay {d['delay']} window {d['win']} dgram {d['dg']} "
                     f"{d['test']}: FAILED (exit {d['rc']}; see {d['log']})")
    if d["fallback"]:
        notes.append(f"round {d['round']} ack_delay {d['delay']} window {d['win']} {d['test']}: "
                     f"{d['fallback']} rank(s) fell back to 1472-byte datagrams (self-test datagram lost)")
    if d["ok"] and d["ranks"] != 2:
        notes.append(f"round {d['round']} {d['test']} ack_delay {d['delay']} window {d['win']}: "
                     f"{d['ranks']} [usnic stats] line(s) instead of 2")
for g in dgrams:
    seen = sorted({x for d in runs if d["dg"] == g for x in d["dgsize"]})
    exp = "the interface MTU - 28" if g == "max" else "1472"
    notes.append(f"datagram setting '{g}' ({exp}): sizes the BTL reported: "
                 + (", ".join(map(str, seen)) if seen else "none seen") + " bytes")
busy = [d for d in runs if d["busy"]]
load_note = (f"loadavg before {load_before}, after {load_after}; other runnable tasks before start: "
             f"{idle_before}")
if busy:
    load_note += (f". {len(busy)} of {len(runs)} runs averaged >= {BASELINE + 0.5:.1f} runnable "
                  "tasks (other work competed for the CPUs): "
                  + ", ".join(f"r{d['round']} {d['test']} {d['delay']}/{d['win']}/{d['dg']}" for d in busy[:20])
                  + (" ..." if len(busy) > 20 else ""))
else:
    load_note += "; no other CPU-bound work seen during the runs"
notes.append(load_note)
notes.append(f"{len(runs)} runs in {secs} s" + (" (quick mode: fewer repetitions per run)" if quick == "1" else ""))
notes.extend(build_lines(logdir))
builds = {}
for d in runs:
    builds.setdefault(d["build"], []).append(d)
if len(builds) > 1:
    desc = "; ".join(f"sha256 {b}: {len(v)} runs (rounds {min(x['round'] for x in v)}-{max(x['round'] for x in v)})"
                     for b, v in builds.items())
    notes.append("WARNING: the installed mca_btl_usnic.so changed during the sweep (hashed before "
                 "and after every run; 'a->b' = reinstalled during that run): " + desc +
                 ". Settings are only comparable within one build: rerun on a stable build")
else:
    notes.append(f"every run used the same mca_btl_usnic.so (sha256 {next(iter(builds))}, hashed before and after each run)")
P("## Notes")
P("")
for n in notes:
    P(f"- {n}")
md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)

with open(prefix + "-runs.csv", "w") as f:
    keys = ["tx_pkts", "rx_pkts", "acks_tx", "acks_rx", "piggy_acks", "sacks_tx", "retrans",
            "window_full", "tx_eagain"]
    f.write("round,ack_delay,send_window,dgram,test,exit,wall_s,value,unit,ranks,"
            + ",".join(keys) + ",datagram_bytes,fallbacks,build,avg_runnable\n")
    for d in runs:
        f.write(",".join(str(x) for x in [
            d["round"], d["delay"], d["win"], d["dg"], d["test"], d["rc"], d["wall"],
            "" if d["value"] is None else d["value"], TEST_INFO[d["test"]][1], d["ranks"]]
            + [d["stats"].get(k, "") for k in keys]
            + ["/".join(map(str, d["dgsize"])), d["fallback"], d["build"],
               f"{d['runnable'] / d['samples']:.2f}" if d["samples"] else ""]) + "\n")
sys.stderr.write(f"# report: {prefix}.md  per-run csv: {prefix}-runs.csv\n")
PY
exit $?
}
