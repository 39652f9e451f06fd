#!/usr/bin/env bash
# callgrind.sh - instructions executed for one 8-byte MPI send + receive
# (-s: of another size)
# through the usnic BTL (and through btl/tcp for comparison), counted by
# valgrind's callgrind.  Instruction counts do not depend on machine load.
#
# What is counted: build/pp8 runs an 8-byte ping-pong between 2 ranks
# (--bind-to core, loopback), each rank under
#   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=pp8_loop
# so only the thread running the ping-pong loop, and only inside it, is
# counted (MPI_Init, wire-up, MPI_Finalize and Open MPI's helper threads are
# not).  One iteration on rank 0 = MPI_Irecv + MPI_Send(8 B) + MPI_Wait =
# one 8-byte send and one 8-byte receive; the receive also processes the
# acknowledgement that rides on the reply (no separate ACK packets, no
# retransmissions: checked from usnic's counters, see below).
#
# Difference method: the loop runs N1 and N2 iterations (default 2000 and
# 12000) in separate jobs; per round trip = (Ir(N2) - Ir(N1)) / (N2 - N1),
# which cancels every one-time cost (first-message connection setup, loop
# entry/exit).  The same is done per object and per function.
#
# Determinism: pp8's default "handoff" mode hands the turn to the peer with
# a POSIX semaphore after MPI_Send returns, and posts its receive before;
# the waiting rank sleeps in sem_wait instead of spinning in the progress
# engine, and MPI_Wait finds the message already in the socket (loopback
# delivers during the sender's system call).  So every iteration runs the
# same code and the counts repeat to a few instructions (a busy-polling
# ping-pong would count a timing-dependent number of empty polls; --plain
# measures that variant anyway, and shows that it does not repeat).  The
# handoff (sem_post + sem_wait in libc) and pp8's own loop, together ~220
# instructions per round trip, are reported separately and are NOT part of
# the "inside MPI" figure.  Valgrind runs code ~50-100x slower
# than native, so usnic's time-driven events (ACK delay 50 us, retransmit
# timer 5 ms, polled every timeout/4) would fire far more often per round
# trip than at native speed; their time constants are scaled by
# --timer-scale (default 100) so that, as natively, every ACK rides on the
# reply and no timer expires.  The runs' usnic counters (print_stats) are
# checked: acks_tx and retransmissions must not grow between the N1 and N2
# jobs (a difference of 1-2 explicit ACKs comes from start-up/finalize,
# outside the counted loop, and is only noted).
#
# Attribution (per round trip, rank 0; rank 1 does the mirror image):
#  - by object, self cost (what `callgrind_annotate --inclusive=no` shows per
#    function, summed per shared object): the BTL (mca_btl_usnic.so or
#    mca_btl_tcp.so), libfabric, ob1 (mca_pml_ob1.so: a plugin in Debian's
#    build, not part of libmpi), libmpi + libopen-pal, libc, libevent,
#    other.  The callgrind output files are read directly (a small parser
#    below) rather than through callgrind_annotate's text, which does not
#    name the object on every line.
#  - by layer, "folded": the cost of helper libraries (libc, libevent,
#    ld.so, vdso) is charged to the layer that called them, e.g. the
#    pthread mutexes libfabric takes count for libfabric and the libevent
#    timer calls of usnic's retransmit timers count for the BTL.  Helper
#    functions that call back into Open MPI (libevent's dispatch loop, which
#    btl/tcp's receive path runs through) are not folded, so nothing is
#    counted twice; their own cost shows as "not attributed".
# Callgrind counts user-space instructions only: a system call counts as
# one instruction, the kernel's work (UDP or TCP stack) is not included.  So
# the system calls per round trip are counted too: the same two jobs run
# natively with rank 0's main thread under 'strace -c' (--no-strace skips).
#
# Run time: about 45 s with the defaults (8 valgrind jobs of 3-8 s each and
# 4 short strace jobs).  The report names the installed mca_btl_usnic.so
# (hash, time) and warns if it was reinstalled during the run.
#
# Output: markdown on stdout and bench/results/<name>.md, ending with a line
#   callgrind: usnic 8B send+recv = N instructions (btl N, libfabric N)
# (N = instructions inside the MPI calls per round trip on rank 0; btl and
# libfabric = self cost of mca_btl_usnic.so and of libfabric).  The whole
# measurement is repeated (--repeat, default 2) and the report says whether
# the numbers repeat.  Logs and callgrind files: bench/results/<name>-logs/.
set -u
{
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results

ITERS=2000,12000
REPEAT=2
TRANSPORTS=usnic,tcp
TSCALE=100
PLAIN=0
SIZE=8
USNIC_EXTRA=""
STRACE=1
DO_BUILD=1
RUN_TIMEOUT=300
NAME=""

usage() {
    cat <<EOF
usage: $0 [options]
  -n N1,N2         iteration counts of the two runs (default $ITERS)
  --repeat R       repeat the whole measurement R times (default $REPEAT)
  -T list          transports (default $TRANSPORTS)
  --timer-scale F  multiply usnic's ACK delay and retransmit timeout by F
                   (default $TSCALE; 1 = unchanged)
  --plain          measure the busy-polling ping-pong (pp8 -p) instead of
                   the handoff one (counts then depend on timing)
  -s BYTES         message size (default 8; pp8 -s).  The handoff mode needs
                   messages of one datagram: a chunked message's MPI_Send
                   returns only once the peer acknowledged it, and the
                   peer sleeps in the handoff (the run times out); measure
                   larger ones with --plain
  --usnic-mca ARGS more mpirun arguments for the usnic runs, e.g.
                   "--mca btl_usnic_udp_datagram_size -1" (the 1472-byte
                   datagrams, and so the trains, of a 1500-byte Ethernet)
  --no-strace      skip the native system-call count (strace -c)
  --timeout S      kill one run after S seconds (default $RUN_TIMEOUT)
  --no-build       do not run make first
  -o NAME          result file prefix (default callgrind-<timestamp>)
  -h, --help       this text
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        -n) ITERS=${2:-}; shift 2 || break ;;
        --repeat) REPEAT=${2:-}; shift 2 || break ;;
        -T) TRANSPORTS=${2:-}; shift 2 || break ;;
        --timer-scale) TSCALE=${2:-}; shift 2 || break ;;
        --plain) PLAIN=1; shift ;;
        -s) SIZE=${2:-}; shift 2 || break ;;
        --usnic-mca) USNIC_EXTRA=${2:-}; shift 2 || break ;;
        --no-strace) STRACE=0; shift ;;
        --timeout) RUN_TIMEOUT=${2:-}; shift 2 || break ;;
        --no-build) DO_BUILD=0; shift ;;
        -o) NAME=${2:-}; shift 2 || break ;;
        -h|--help) usage; exit 0 ;;
        *) echo "callgrind.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$NAME" ] || NAME=callgrind-$(date +%Y%m%d-%H%M%S)
if ! [[ $ITERS =~ ^[0-9]+,[0-9]+$ ]]; then
    echo "callgrind.sh: -n expects N1,N2" >&2; exit 2
fi
N1=${ITERS%,*} N2=${ITERS#*,}
if [ "$N1" -lt 1 ] || [ "$N2" -le "$N1" ]; then
    echo "callgrind.sh: -n expects 1 <= N1 < N2" >&2; exit 2
fi
case "$REPEAT" in ''|*[!0-9]*|0) echo "callgrind.sh: --repeat expects a positive integer" >&2; exit 2 ;; esac
case "$TSCALE" in ''|*[!0-9]*|0) echo "callgrind.sh: --timer-scale expects a positive integer" >&2; exit 2 ;; esac
case "$RUN_TIMEOUT" in ''|*[!0-9]*|0) echo "callgrind.sh: --timeout expects seconds" >&2; exit 2 ;; esac
case "$SIZE" in ''|*[!0-9]*) echo "callgrind.sh: -s expects bytes (8 or more)" >&2; exit 2 ;; esac
[ "$SIZE" -ge 8 ] || { echo "callgrind.sh: -s expects bytes (8 or more)" >&2; exit 2; }
IFS=, read -r -a TLIST <<<"$TRANSPORTS"
for t in "${TLIST[@]}"; do
    case "$t" in usnic|tcp) ;; *) echo "callgrind.sh: unknown transport '$t'" >&2; exit 2 ;; esac
done

[ $STRACE = 1 ] && ! command -v strace >/dev/null && {
    echo "callgrind.sh: strace not found; system calls not counted" >&2; STRACE=0; }
for c in valgrind mpirun python3 timeout; do
    command -v $c >/dev/null || { echo "callgrind.sh: '$c' not found" >&2; exit 1; }
done
if [[ ,$TRANSPORTS, == *,usnic,* ]] && ! ompi_info 2>/dev/null | grep -q 'btl: usnic'; then
    echo "callgrind.sh: the usnic BTL is not installed (ompi_info | grep usnic)" >&2; exit 1
fi
if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" >&2 || { echo "callgrind.sh: build failed" >&2; exit 1; }
fi
[ -x "$BUILD/pp8" ] || { echo "callgrind.sh: $BUILD/pp8 missing (run make)" >&2; exit 1; }

mkdir -p "$RESDIR"
LOGDIR=$RESDIR/$NAME-logs
mkdir -p "$LOGDIR"

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

# usnic's time constants, scaled
param() {   # current value of an MCA parameter of btl usnic, or $2
    local v
    v=$(ompi_info --param btl usnic --level 9 --parsable 2>/dev/null |
        sed -n "s/^mca:btl:usnic:param:$1:value://p" | head -1)
    case "$v" in ''|*[!0-9]*) echo "$2" ;; *) echo "$v" ;; esac
}
ACK_DELAY=$(( $(param btl_usnic_ack_delay 50) * TSCALE ))
RETRANS=$(( $(param btl_usnic_retrans_timeout 5000) * TSCALE ))

export FI_UDP_IFACE=lo
MPIRUN=(mpirun --allow-run-as-root -np 2 --bind-to core --mca oob_tcp_if_include lo
        -x FI_UDP_IFACE=lo)
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
           --mca btl_usnic_print_stats 1
           --mca btl_usnic_ack_delay "$ACK_DELAY" --mca btl_usnic_retrans_timeout "$RETRANS")
# shellcheck disable=SC2206 # USNIC_EXTRA is meant to be word-split
USNIC_MCA+=($USNIC_EXTRA)
TCP_MCA=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
PPARGS=()
[ $PLAIN = 1 ] && PPARGS=(-p)
PPARGS+=(-s "$SIZE")

RUNPID=""
cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$RUNPID" ] && kill -0 "$RUNPID" 2>/dev/null; then
        kill -TERM "$RUNPID" 2>/dev/null   # timeout forwards it to mpirun
        wait "$RUNPID" 2>/dev/null
    fi
    RUNPID=""
}
trap cleanup EXIT
trap 'echo "callgrind.sh: interrupted" >&2; exit 130' INT TERM HUP


LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-before.txt"
T_START=$(date +%s)
: >"$LOGDIR/runs.txt"
TOTAL=$(( REPEAT * ${#TLIST[@]} * 2 ))
RUNNO=0
for ((rep = 1; rep <= REPEAT; rep++)); do
    for t in "${TLIST[@]}"; do
        for n in "$N1" "$N2"; do
            RUNNO=$((RUNNO + 1))
            progress "run $RUNNO/$TOTAL: $t, $n iterations (repetition $rep) - $(( $(date +%s) - T_START ))s elapsed"
            base=$LOGDIR/$t.$rep.$n
            rm -f "$base".rank*.cg
            if [ "$t" = usnic ]; then mca=("${USNIC_MCA[@]}"); else mca=("${TCP_MCA[@]}"); fi
            cmd=("${MPIRUN[@]}" "${mca[@]}"
                 valgrind --tool=callgrind --collect-atstart=no --toggle-collect=pp8_loop
                 "--callgrind-out-file=$base.rank%q{OMPI_COMM_WORLD_RANK}.cg"
                 "$BUILD/pp8" "${PPARGS[@]}" "$n")
            echo "# ${cmd[*]}" >"$base.log"
            t0=$(date +%s)
            timeout -k 10 "$RUN_TIMEOUT" "${cmd[@]}" </dev/null >>"$base.log" 2>&1 &
            RUNPID=$!
            wait $RUNPID
            rc=$?
            RUNPID=""
            echo "$rep $t $n $rc $(( $(date +%s) - t0 ))" >>"$LOGDIR/runs.txt"
            if [ $rc -ne 0 ]; then
                echo "callgrind.sh: run failed (exit $rc), see ${base#$HERE/}.log" >&2
            fi
        done
    done
done
# system calls per round trip: the same ping-pong natively, each rank's
# main thread (the one running the loop) under 'strace -c', same difference
if [ $STRACE = 1 ]; then
    for t in "${TLIST[@]}"; do
        for n in "$N1" "$N2"; do
            progress "strace -c: $t, $n iterations - $(( $(date +%s) - T_START ))s elapsed"
            base=$LOGDIR/strace.$t.$n
            rm -f "$base".rank*
            if [ "$t" = usnic ]; then mca=("${USNIC_MCA[@]}"); else mca=("${TCP_MCA[@]}"); fi
            cmd=("${MPIRUN[@]}" "${mca[@]}" sh -c 'exec strace -c -o "$0.rank$OMPI_COMM_WORLD_RANK" "$@"'
                 "$base" "$BUILD/pp8" "${PPARGS[@]}" "$n")
            echo "# ${cmd[*]}" >"$base.log"
            timeout -k 10 "$RUN_TIMEOUT" "${cmd[@]}" </dev/null >>"$base.log" 2>&1 &
            RUNPID=$!
            wait $RUNPID || echo "callgrind.sh: strace run failed, see ${base#$HERE/}.log" >&2
            RUNPID=""
        done
    done
fi
progress_done
T_END=$(date +%s)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
btl_identity >"$LOGDIR/build-after.txt"
echo "# $TOTAL valgrind jobs$([ $STRACE = 1 ] && echo " + $(( ${#TLIST[@]} * 2 )) strace jobs") in $((T_END - T_START))s; logs in ${LOGDIR#$HERE/}" >&2

BENCH_DIR=$HERE PP_SIZE=$SIZE PP_USNIC_EXTRA=$USNIC_EXTRA python3 - "$LOGDIR" "$RESDIR/$NAME" "$N1" "$N2" "$REPEAT" "$TRANSPORTS" "$TSCALE" \
    "$ACK_DELAY" "$RETRANS" "$PLAIN" "$LOAD_BEFORE" "$LOAD_AFTER" "$((T_END - T_START))" <<'PY'
import sys, os, re, collections

sys.path.insert(0, os.environ["BENCH_DIR"])
from benchlib import build_lines

(logdir, prefix, n1, n2, repeat, transports, tscale, ack_delay, retrans, plain,
 load_before, load_after, secs) = sys.argv[1:14]
n1, n2, repeat, plain = int(n1), int(n2), int(repeat), plain == "1"
TR = transports.split(",")
HELPERS = ("libc.so", "ld-linux", "libevent", "libpthread", "vdso", "???")
def base(o):
    return os.path.basename(o) if o else "???"

def is_helper(o):
    b = base(o)
    return o in (None, "???") or any(b.startswith(h) or h in b for h in HELPERS)

def layer(o, tr):
    """layer of a non-helper object"""
    b = base(o)
    if b == "pp8":
        return "app"
    if b.startswith(f"mca_btl_{tr}.so"):
        return "btl"
    if b.startswith("libfabric.so"):
        return "libfabric"
    return "mpi"

def objclass(o, tr):
    """column of the self-cost table"""
    b = base(o)
    if b.startswith(f"mca_btl_{tr}.so"):
        return "btl"
    if b.startswith("libfabric.so"):
        return "libfabric"
    if b.startswith("mca_pml_ob1.so"):
        return "ob1"
    if b.startswith("libmpi.so") or b.startswith("libopen-pal.so"):
        return "mpi+pal"
    if b.startswith("libc.so"):
        return "libc"
    if b.startswith("libevent"):
        return "libevent"
    return "other"

def parse(path):
    """self cost per object and per function, and the call arcs with their
    inclusive cost: arcs[(caller ob, caller fn, callee ob, callee fn)].
    (Call counts are not used: callgrind counts calls even while collection
    is off, costs only while it is on.)"""
    names = {"ob": {}, "fn": {}}
    def nm(kind, v):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", v)
        if not m:
            return v
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), "???")
    r = dict(total=0, obj=collections.Counter(), fn=collections.Counter(),
             arcs=collections.Counter(), summary=None)
    ob = fn = None
    cob = cfn = None
    pending = None        # the arc of the last calls= line: its cost line follows
    npos = 1
    with open(path, errors="replace") as f:
        for line in f:
            if not line or line == "\n":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                fields = line.split()
                cost = int(fields[npos]) if len(fields) > npos else 0
                if pending is not None:
                    r["arcs"][pending] += cost
                    pending = None
                    continue
                r["total"] += cost
                r["obj"][ob] += cost
                r["fn"][(ob, fn)] += cost
                continue
            k, _, v = line.rstrip("\n").partition("=")
            if k == "ob":
                ob = nm("ob", v)
            elif k == "fn":
                fn = nm("fn", v)
            elif k == "cob":
                cob = nm("ob", v)
            elif k == "cfn":
                cfn = nm("fn", v)
            elif k == "calls":
                pending = (ob, fn, cob if cob is not None else ob, cfn)
                cob = None
            elif line.startswith("positions:"):
                npos = len(line.split()) - 1
            elif line.startswith("summary:"):
                r["summary"] = int(line.split()[1])
    return r

def fold(runs_, tr):
    """Per layer: self cost of its objects + inclusive cost of its direct
    calls into helper functions that never lead back into non-helper code
    (so nothing is counted twice).  Helper functions that can call back
    (libevent's dispatch loop, __libc_start_main, ...) are left out: their
    own cost is 'unattributed'.  The classification uses the arcs of all
    given runs, so it is the same for N1 and N2."""
    back = set()          # helper functions that call (maybe indirectly) non-helper code
    edges = collections.defaultdict(set)
    for r in runs_:
        for (o1, f1, o2, f2) in r["arcs"]:
            if is_helper(o1):
                if not is_helper(o2):
                    back.add((o1, f1))
                else:
                    edges[(o2, f2)].add((o1, f1))      # reverse edge: callee -> callers
    todo = list(back)
    while todo:
        x = todo.pop()
        for y in edges.get(x, ()):
            if y not in back:
                back.add(y)
                todo.append(y)
    out = []
    for r in runs_:
        fo = collections.Counter()
        for o, v in r["obj"].items():
            if not is_helper(o):
                fo[layer(o, tr)] += v
        for (o1, f1, o2, f2), v in r["arcs"].items():
            if not is_helper(o1) and is_helper(o2) and (o2, f2) not in back:
                fo[layer(o1, tr)] += v
        out.append(fo)
    return out

def stats_of(log):
    """usnic counters of both ranks: {rank: {name: value}}"""
    out = {}
    if not os.path.exists(log):
        return out
    for line in open(log, errors="replace"):
        if "[usnic stats]" not in line:
            continue
        d = dict(re.findall(r" (\w+)=(\d+)", line))
        if "rank" in d:
            out[int(d["rank"])] = {k: int(v) for k, v in d.items() if v.isdigit()}
    return out

runs = {}
for line in open(os.path.join(logdir, "runs.txt")):
    f = line.split()
    if len(f) == 5:
        runs[(int(f[0]), f[1], int(f[2]))] = (int(f[3]), int(f[4]))

res = {}       # (rep, tr) -> per-round-trip dict
problems = []
notes = []
for rep in range(1, repeat + 1):
    for tr in TR:
        p = {}
        ok = True
        for n in (n1, n2):
            rc = runs.get((rep, tr, n), (None,))[0]
            f0 = os.path.join(logdir, f"{tr}.{rep}.{n}.rank0.cg")
            f1 = os.path.join(logdir, f"{tr}.{rep}.{n}.rank1.cg")
            if rc != 0 or not os.path.exists(f0) or not os.path.exists(f1):
                problems.append(f"{tr} repetition {rep}, {n} iterations: run failed (exit {rc}); "
                                f"see {os.path.basename(logdir)}/{tr}.{rep}.{n}.log")
                ok = False
                break
            p[n] = (parse(f0), parse(f1), stats_of(os.path.join(logdir, f"{tr}.{rep}.{n}.log")))
        if not ok:
            continue
        a, b = p[n1][0], p[n2][0]
        d = float(n2 - n1)
        rt = dict(total=(b["total"] - a["total"]) / d,
                  rank1=(p[n2][1]["total"] - p[n1][1]["total"]) / d)
        cls = collections.Counter()
        for which, sign in ((b, 1), (a, -1)):
            for o, v in which["obj"].items():
                cls[objclass(o, tr)] += sign * v
        rt["cls"] = {k: v / d for k, v in cls.items()}
        fa, fb = fold([a, b], tr)
        rt["fold"] = {k: (fb[k] - fa[k]) / d for k in set(fa) | set(fb)}
        rt["unattributed"] = rt["total"] - sum(rt["fold"].values())
        fns = set(a["fn"]) | set(b["fn"])
        rt["fns"] = sorted(((b["fn"][k] - a["fn"][k]) / d, (base(k[0]), k[1])) for k in fns)[::-1]
        # handoff: pp8 self + what pp8_loop called in libc (sem_post/sem_wait)
        rt["handoff"] = rt["fold"].get("app", 0.0)
        rt["inside"] = rt["total"] - rt["handoff"]
        if tr == "usnic":
            for key in ("acks_tx", "retrans", "timeout_retrans", "fast_retrans"):
                for rank in (0, 1):
                    x = p[n2][2].get(rank, {}).get(key)
                    y = p[n1][2].get(rank, {}).get(key)
                    if x is None or y is None:
                        continue
                    if x - y > 2:
                        problems.append(f"usnic repetition {rep}: rank {rank} {key} grew by {x - y} "
                                        f"between {n1} and {n2} iterations: timer-driven events in "
                                        "the loop, the counts include them (raise --timer-scale)")
                    elif x - y != 0:
                        notes.append(f"usnic repetition {rep}: rank {rank} {key} {y} -> {x} "
                                     "(whole-job counter; a difference this small comes from "
                                     "start-up/finalize, outside the counted loop)")
            rt["stats"] = {n: p[n][2] for n in (n1, n2)}
        res[(rep, tr)] = rt

out = []
P = out.append
SZ = int(os.environ.get("PP_SIZE", "8"))
P(f"# Instructions per {SZ}-byte MPI send + receive (callgrind)")
if os.environ.get("PP_USNIC_EXTRA"):
    P(f"usnic runs with `{os.environ['PP_USNIC_EXTRA']}`.")
    P("")
P("")
P(f"pp8 {'busy-polling (-p)' if plain else 'handoff'} ping-pong, 2 ranks, --bind-to core, loopback; "
  f"runs of {n1} and {n2} iterations, per round trip = (Ir({n2}) - Ir({n1})) / {n2 - n1}, "
  "counted only inside pp8_loop (--collect-atstart=no --toggle-collect=pp8_loop). "
  f"**One round trip on rank 0 = one {SZ}-byte send (MPI_Send) + one {SZ}-byte receive (MPI_Irecv + MPI_Wait)**; "
  "rank 1 does the same. User-space instructions only (a system call counts as 1).")
if "usnic" in TR:
    P(f"usnic time constants x{tscale} for valgrind's slowdown: btl_usnic_ack_delay {ack_delay} us, "
      f"btl_usnic_retrans_timeout {retrans} us.")
P("")

def f0(x):
    return "n/a" if x is None else f"{0.0 if abs(x) < 0.5 else x:.0f}"

first = {tr: res.get((1, tr)) for tr in TR}
P("## By object (self cost), per round trip on rank 0")
P("")
P("| transport | total | inside MPI calls | BTL .so | libfabric | ob1 PML | libmpi + libopen-pal | libc | libevent | other | pp8 loop + handoff | rank 1 total |")
P("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for tr in TR:
    r = first[tr]
    if not r:
        P(f"| {tr} | n/a |||||||||||")
        continue
    c = r["cls"]
    P(f"| {tr} | {f0(r['total'])} | {f0(r['inside'])} | {f0(c.get('btl', 0))} | {f0(c.get('libfabric', 0))} | "
      f"{f0(c.get('ob1', 0))} | {f0(c.get('mpi+pal', 0))} | {f0(c.get('libc', 0))} | {f0(c.get('libevent', 0))} | "
      f"{f0(c.get('other', 0))} | {f0(r['handoff'])} | {f0(r['rank1'])} |")
P("")
P("Columns BTL .. other add up to the total ('other': pp8 itself, ld.so, remaining "
  "Open MPI plugins; libc includes the handoff's sem_post/sem_wait). "
  "'pp8 loop + handoff' = pp8_loop's own instructions + the libc calls it makes itself "
  "(the semaphore handoff); 'inside MPI calls' = total - that.")
P("")
P("## By layer, helper libraries (libc, libevent, ld.so) charged to their caller, per round trip on rank 0")
P("")
P("| transport | inside MPI calls | MPI layers (libmpi, ob1, libopen-pal, ...) | BTL | libfabric | not attributed (event loop dispatch, ...) |")
P("|---|---:|---:|---:|---:|---:|")
for tr in TR:
    r = first[tr]
    if not r:
        continue
    fo = r["fold"]
    P(f"| {tr} | {f0(r['inside'])} | {f0(fo.get('mpi', 0))} | {f0(fo.get('btl', 0))} | "
      f"{f0(fo.get('libfabric', 0))} | {f0(r['unattributed'])} |")
P("")
for tr in TR:
    r = first[tr]
    if not r:
        continue
    P(f"<details><summary>{tr}: top functions per round trip (self cost, rank 0)</summary>")
    P("")
    P("| Ir | object | function |")
    P("|---:|---|---|")
    for v, (o, fn) in r["fns"][:25]:
        if v < 1:
            break
        P(f"| {v:.1f} | {o} | `{fn}` |")
    P("")
    P("</details>")
    P("")

def strace_counts(path):
    """{syscall: (calls, errors)} from an 'strace -c' summary"""
    out = {}
    if not os.path.exists(path):
        return None
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) < 5 or not re.match(r"^[0-9.]+$", f[0]) or f[-1] == "total":
            continue
        nums = f[3:-1]          # calls [errors]
        try:
            out[f[-1]] = (int(nums[0]), int(nums[1]) if len(nums) > 1 else 0)
        except (ValueError, IndexError):
            pass
    return out

sc_rows = []
for tr in TR:
    a = strace_counts(os.path.join(logdir, f"strace.{tr}.{n1}.rank0"))
    b = strace_counts(os.path.join(logdir, f"strace.{tr}.{n2}.rank0"))
    if a is None or b is None:
        continue
    d = float(n2 - n1)
    per = {}
    for k in set(a) | set(b):
        c = (b.get(k, (0, 0))[0] - a.get(k, (0, 0))[0]) / d
        e = (b.get(k, (0, 0))[1] - a.get(k, (0, 0))[1]) / d
        if abs(c) >= 0.05:
            per[k] = (c, e)
    sc_rows.append((tr, per))
if sc_rows:
    P("## System calls per round trip, rank 0")
    P("")
    P("The same ping-pong run natively, rank 0's main thread under `strace -c`, same difference "
      "method (start-up noise makes the last digit uncertain). The kernel work of these calls is "
      "not in the instruction counts above. futex = the semaphore handoff (2 per round trip), "
      "not MPI.")
    P("")
    P("| transport | MPI system calls per round trip (failed, e.g. EAGAIN) | total without futex |")
    P("|---|---|---:|")
    for tr, per in sc_rows:
        items = sorted(((k, v) for k, v in per.items() if k != "futex"), key=lambda kv: -kv[1][0])
        txt = ", ".join(f"{k} {c:.2f}" + (f" ({e:.2f})" if e >= 0.05 else "") for k, (c, e) in items) or "none"
        tot = sum(c for k, (c, e) in per.items() if k != "futex")
        P(f"| {tr} | {txt} | {tot:.2f} |")
    P("")

P("## Repeatability")
P("")
P("| transport | " + " | ".join(f"run {i} total" for i in range(1, repeat + 1)) +
  " | " + " | ".join(f"run {i} BTL" for i in range(1, repeat + 1)) + " | max difference |")
P("|---|" + "---:|" * (2 * repeat + 1))
verdict = []
for tr in TR:
    tots = [res[(i, tr)]["total"] if (i, tr) in res else None for i in range(1, repeat + 1)]
    btls = [res[(i, tr)]["cls"].get("btl", 0) if (i, tr) in res else None for i in range(1, repeat + 1)]
    have = [x for x in tots if x is not None]
    if len(have) >= 2:
        spread = max(have) - min(have)
        rel = spread / (sum(have) / len(have)) * 100
        diff = f"{spread:.2f} ({rel:.3f} %)"
        verdict.append((tr, spread, rel))
    else:
        diff = "n/a (one run)"
    P(f"| {tr} | " + " | ".join("n/a" if x is None else f"{x:.2f}" for x in tots) + " | " +
      " | ".join("n/a" if x is None else f"{x:.2f}" for x in btls) + f" | {diff} |")
P("")
if verdict:
    worst = max(v[2] for v in verdict)
    P("Numbers " + ("repeat" if worst < 0.5 else "do NOT repeat") +
      f" (largest difference between repetitions: {worst:.3f} % of the total).")
    P("")
if notes:
    P("Notes:")
    P("")
    for nt in notes:
        P(f"- {nt}")
    P("")
if problems:
    P("Problems:")
    P("")
    for pr in problems:
        P(f"- {pr}")
    P("")
u = first.get("usnic")
if u and "stats" in u:
    s1, s2 = u["stats"][n1], u["stats"][n2]
    def g(s, r, k):
        return s.get(r, {}).get(k, "?")
    P("usnic counters, whole job, rank 0 / rank 1 (N1 -> N2): "
      + "; ".join(f"{k} {g(s1, 0, k)}/{g(s1, 1, k)} -> {g(s2, 0, k)}/{g(s2, 1, k)}"
                  for k in ("tx_pkts", "acks_tx", "piggy_acks", "retrans")))
    P("")
for bl in build_lines(logdir):
    P(bl)
    P("")
P(f"loadavg before {load_before}, after {load_after} (instruction counts do not depend on it); "
  f"{len(runs)} valgrind jobs (+ strace runs) in {secs} s.")
P("")
tag = "callgrind (busy-polling ping-pong, NOT repeatable)" if plain else "callgrind"
if u:
    P(f"{tag}: usnic {SZ}B send+recv = {u['inside']:.0f} instructions "
      f"(btl {u['cls'].get('btl', 0):.0f}, libfabric {u['cls'].get('libfabric', 0):.0f})")
t = first.get("tcp")
if t:
    P(f"{tag}: tcp {SZ}B send+recv = {t['inside']:.0f} instructions (btl {t['cls'].get('btl', 0):.0f})")
md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)
PY
exit 0
}
