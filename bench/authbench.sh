#!/usr/bin/env bash
# authbench.sh - what the usnic BTL's datagram protection costs: 8 B
# latency and 1 MiB bandwidth (optionally 64 KiB bandwidth) with
# btl_usnic_auth none / header / full x btl_usnic_checksum 0 / 1, against
# btl/tcp and the raw libfabric udp provider (bench/build/fi_dgram_bench),
# all measured in the same run, over loopback only.
#
# Every round runs each (configuration, measure) once: the measures one
# after the other, within a measure every configuration (so the runs that
# are compared with each other are close in time); both orders rotate from
# round to round.  Reported: median of the per-round medians [lowest min -
# highest max over all rounds], ratios to auth none / checksum 0 (the
# baseline), to btl/tcp and to raw udp, each round's median (the noise), the
# 5% budget verdicts of the header MAC and of CRC32C, and what auth full
# costs per GB.  Each configuration's mode is checked once, in a short probe
# run with btl_base_verbose 20 (the "endpoint ... created: auth M, checksum
# C" lines); every measured usnic run prints its '[usnic stats]' lines
# (btl_usnic_print_stats), whose tx_bytes show that usnic carried the data.
#
# Results: markdown on stdout and in bench/results/<name>.md (and in the
# file given with -o), per-run CSV in bench/results/<name>-rounds.csv, logs
# in bench/results/<name>-logs/.
set -u
# The whole script is one { ... } block, so bash parses it completely before
# running: editing authbench.sh while it runs cannot break the running one.
{
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
REPO=$(cd "$HERE/.." && pwd)
BUILD=$HERE/build
RESDIR=$HERE/results

# the command line, directory and commit for the report (lib.sh)
run_identity "$@"
# usnic's default datagram on lo: the interface MTU minus IP and UDP
# headers, at most 65507
MAXDGRAM=$(lo_maxdgram)

ALL_CONFIGS=none0,none1,header0,header1,full0,full1,tcp,raw
CONFIGS=$ALL_CONFIGS
ROUNDS=5
REPS=9
RAW_REPS=9
RAW_T=50
DGRAM=""
BW64K=0
RUN_TIMEOUT=120
WAIT_IDLE=0
DO_BUILD=1
CALLGRIND=0
OUTFILE=""
APPEND=0
NAME=""
NOTE=""
STAMP=$(date +%Y%m%d-%H%M%S)

usage() {
    cat <<EOF
usage: $0 [options]
  -r N            rounds (default $ROUNDS); reported: median of the per-round medians
  --dgram N       usnic datagram size: 1472 runs the usnic configurations with
                  '--mca btl_usnic_udp_datagram_size -1' (the provider's 1472-byte
                  datagrams: many more datagrams per MiB, so per-datagram costs
                  show); N > 1472 passes N to that parameter; raw udp streams
                  N-byte datagrams (default: the interface MTU, $MAXDGRAM bytes on lo)
  --64k           also measure 64 KiB bandwidth
  -c list         configurations (default $ALL_CONFIGS):
                  <auth><checksum> for usnic (none0 = auth none, checksum 0, the
                  baseline of the ratios), tcp = btl/tcp, raw = fi_dgram_bench
  --reps N        mpi_bench / fi_dgram_bench repetitions per run (default $REPS)
  --timeout S     kill a single run after S seconds (default $RUN_TIMEOUT)
  --wait-idle S   before each run wait up to S seconds for other processes to
                  stop using the CPUs (default 0: don't wait, only report)
  --callgrind     also count instructions per 8-byte round trip of every usnic
                  configuration (bench/callgrind.sh, about 40 s each; the
                  count does not depend on the machine's load)
  --no-build      do not run make -C bench first
  --note TEXT     a note printed at the top of the report (e.g. the machine's state)
  -o FILE         also write the markdown report to FILE (e.g. docs/perf-auth.md)
  --append        append to the -o FILE instead of replacing it (e.g. a --dgram 1472
                  run after the default one)
  -n NAME         result name in bench/results/ (default authbench-<timestamp>)
  -h, --help      this text
All traffic stays on 127.0.0.1 / lo.  2 ranks, --bind-to core.
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        -r) ROUNDS=${2-}; shift 2 ;;
        --dgram) DGRAM=${2-}; shift 2 ;;
        --dgram=*) DGRAM=${1#--dgram=}; shift ;;
        --64k) BW64K=1; shift ;;
        -c) CONFIGS=${2-}; shift 2 ;;
        --reps) REPS=${2-}; RAW_REPS=${2-}; shift 2 ;;
        --timeout) RUN_TIMEOUT=${2-}; shift 2 ;;
        --wait-idle) WAIT_IDLE=${2-}; shift 2 ;;
        --callgrind) CALLGRIND=1; shift ;;
        --no-build) DO_BUILD=0; shift ;;
        --note) NOTE=${2-}; shift 2 ;;
        -o) OUTFILE=${2-}; shift 2 ;;
        --append) APPEND=1; shift ;;
        -n) NAME=${2-}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "authbench.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$NAME" ] || NAME=authbench-$STAMP
case "$NAME" in ''|*/*) echo "authbench.sh: -n expects a plain name" >&2; exit 2 ;; esac
case "$ROUNDS" in ''|*[!0-9]*|0) echo "authbench.sh: -r expects a positive integer" >&2; exit 2 ;; esac
case "$REPS" in ''|*[!0-9]*|0) echo "authbench.sh: --reps expects a positive integer" >&2; exit 2 ;; esac
case "$RUN_TIMEOUT" in ''|*[!0-9]*|0) echo "authbench.sh: --timeout expects seconds" >&2; exit 2 ;; esac
case "$WAIT_IDLE" in ''|*[!0-9]*) echo "authbench.sh: --wait-idle expects seconds" >&2; exit 2 ;; esac
# DG: the datagram size usnic should use (checked in the probe) and raw
# udp streams; USNIC_DG_MCA: how usnic is told
USNIC_DG_MCA=()
if [ -z "$DGRAM" ]; then
    DG=$MAXDGRAM
else
    case "$DGRAM" in ''|*[!0-9]*) DGRAM=0 ;; esac
    if [ "$DGRAM" = 1472 ]; then
        USNIC_DG_MCA=(--mca btl_usnic_udp_datagram_size -1)
    elif [ "$DGRAM" -gt 1472 ] && [ "$DGRAM" -le $MAXDGRAM ]; then
        USNIC_DG_MCA=(--mca btl_usnic_udp_datagram_size "$DGRAM")
    else
        echo "authbench.sh: --dgram expects 1472..$MAXDGRAM" >&2; exit 2
    fi
    DG=$DGRAM
fi
IFS=, read -r -a CLIST <<<"$CONFIGS"
[ ${#CLIST[@]} -gt 0 ] || { echo "authbench.sh: -c: no configuration" >&2; exit 2; }
for c in "${CLIST[@]}"; do
    [[ ",$ALL_CONFIGS," == *",$c,"* ]] || {
        echo "authbench.sh: unknown configuration '$c' (known: $ALL_CONFIGS)" >&2; exit 2; }
done
MEASURES=(lat bw)
[ $BW64K = 1 ] && MEASURES+=(bw64k)

command -v python3 >/dev/null || { echo "authbench.sh: python3 is needed for the report" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "authbench.sh: mpirun not found" >&2; exit 1; }
if [ $DO_BUILD = 1 ]; then
    make -s -C "$HERE" >&2 || { echo "authbench.sh: build failed" >&2; exit 1; }
fi
if [ ! -x "$BUILD/mpi_bench" ] || [ ! -x "$BUILD/fi_dgram_bench" ]; then
    echo "authbench.sh: binaries missing in $BUILD (run make -C bench)" >&2; exit 1
fi

mkdir -p "$RESDIR"
LOGDIR=$RESDIR/$NAME-logs
mkdir -p "$LOGDIR"
if [ -n "$OUTFILE" ]; then
    mkdir -p "$(dirname "$OUTFILE")"
    : >>"$OUTFILE" || { echo "authbench.sh: cannot write $OUTFILE" >&2; exit 1; }
fi

# ------------------------------------------------------------ commands
# Everything on loopback: OOB wire-up, the BTLs and the udp provider.
export FI_UDP_IFACE=lo
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core
        --mca oob_tcp_if_include lo -x FI_UDP_IFACE=lo)
# shellcheck disable=SC2054  # usnic,self and tcp,self are one argument each
USNIC_MCA=(--mca pml ob1 --mca btl usnic,self --mca btl_usnic_if_include lo
           --mca btl_usnic_print_stats 1 "${USNIC_DG_MCA[@]}")
# shellcheck disable=SC2054
TCP_MCA=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
RAW=("$BUILD/fi_dgram_bench" -p udp -a 127.0.0.1)

# auth mode and checksum of a usnic configuration (none0 -> none 0)
cfg_auth() { printf '%s' "${1%[01]}"; }
cfg_crc() { printf '%s' "${1: -1}"; }

# set_cmd CONFIG MEASURE: the command line of one run, into CMD
set_cmd() {
    local c=$1 m=$2 args=()
    case "$m" in
        lat) args=(-t lat -s 8 -S 8) ;;
        bw) args=(-t bw -s 1m -S 1m) ;;
        bw64k) args=(-t bw -s 64k -S 64k) ;;
    esac
    case "$c" in
        raw)
            case "$m" in
                lat) CMD=("${RAW[@]}" -t lat -s 8 -S 8 -d 8 -b 8 -r "$RAW_REPS") ;;
                # one streaming measurement at usnic's datagram size serves
                # every bandwidth measure (bw64k reads the same numbers)
                *) CMD=("${RAW[@]}" -t stream -d "$DG" -b "$DG" -r "$RAW_REPS" -T "$RAW_T") ;;
            esac ;;
        tcp) CMD=("${MPIRUN[@]}" "${TCP_MCA[@]}" "$BUILD/mpi_bench" "${args[@]}" -r "$REPS") ;;
        *) CMD=("${MPIRUN[@]}" "${USNIC_MCA[@]}" --mca btl_usnic_auth "$(cfg_auth "$c")"
                --mca btl_usnic_checksum "$(cfg_crc "$c")" "$BUILD/mpi_bench" "${args[@]}" -r "$REPS") ;;
    esac
}

# raw udp measures bandwidth once per round, not once per bandwidth measure
measures_of() {
    if [ "$1" = raw ]; then printf '%s\n' lat bw; else printf '%s\n' "${MEASURES[@]}"; fi
}

# the pid of the run in progress (sampled_run's RUNPID), ended by pid only
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    if [ -n "${RUNPID:-}" ]; then
        kill -TERM "$RUNPID" 2>/dev/null
        wait "$RUNPID" 2>/dev/null
        RUNPID=""
    fi
    progress_done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ probes
# One short run per configuration: it must succeed, and for usnic the
# verbose output must show every endpoint created with the requested auth
# mode and checksum, and the datagram size expected.
declare -A STATUS CMDLINE
STATFILE=$LOGDIR/status.txt
: >"$STATFILE"
probe() {
    local c=$1 log=$LOGDIR/probe-$1.log want got n dg
    : >"$log"
    if [ "$c" = raw ]; then
        CMD=("${RAW[@]}" -t lat -s 8 -S 8 -d 8 -b 8 -r 1 -n 20)
    else
        set_cmd "$c" lat
        # a few iterations only
        CMD=("${CMD[@]:0:${#CMD[@]}-2}" -r 1 -i 20 -x 2)
        if [ "$c" != tcp ]; then
            CMD=("${CMD[@]:0:${#MPIRUN[@]}}" --mca btl_base_verbose 20 "${CMD[@]:${#MPIRUN[@]}}")
        fi
    fi
    progress "probing $c ..."
    sampled_run "$log" 0.2 timeout -k 10 60 "${CMD[@]}"
    if [ "$RC" -ne 0 ]; then
        STATUS[$c]="n/a: probe run failed (exit $RC; see ${log#"$HERE"/})"
        return
    fi
    if ! grep -q '^lat 8 ' "$log"; then
        STATUS[$c]="n/a: probe produced no result (see ${log#"$HERE"/})"
        return
    fi
    case "$c" in tcp|raw) STATUS[$c]=ok; return ;; esac
    want="auth $(cfg_auth "$c"), checksum $([ "$(cfg_crc "$c")" = 1 ] && echo on || echo off)"
    got=$(grep -o 'created: auth [a-z]*, checksum [a-z]*' "$log" | sed 's/^created: //' | sort | uniq -c |
          awk '{n=$1; $1=""; sub(/^ /, ""); printf "%s%s x%d", (NR > 1 ? "; " : ""), $0, n}')
    n=$(grep -c "created: $want\$" "$log")
    dg=$(grep -o 'btl:usnic: using provider .*: datagram [0-9]* bytes' "$log" |
         grep -o '[0-9]* bytes$' | sort -u | tr '\n' ' ')
    dg=${dg% }
    if [ "$n" -lt 2 ] || [ "$got" != "$want x$n" ]; then
        STATUS[$c]="n/a: mode not confirmed: wanted '$want' on both ranks' endpoints, verbose output shows '${got:-nothing}' (see ${log#"$HERE"/})"
    elif [ "$dg" != "$DG bytes" ]; then
        STATUS[$c]="n/a: datagram size '${dg:-?}', expected $DG bytes (see ${log#"$HERE"/})"
    else
        STATUS[$c]="ok: endpoints created with $got; datagrams $dg"
    fi
}

ID_START=$(btl_identity)
IDFILE=$LOGDIR/identity.txt
printf 'start\t%s\n' "$ID_START" >"$IDFILE"
for c in "${CLIST[@]}"; do probe "$c"; done
progress_done
ACTIVE=()
for c in "${CLIST[@]}"; do
    set_cmd "$c" lat; CMDLINE[$c,lat]="${CMD[*]}"
    set_cmd "$c" bw; CMDLINE[$c,bw]="${CMD[*]}"
    [ $BW64K = 1 ] && { set_cmd "$c" bw64k; CMDLINE[$c,bw64k]="${CMD[*]}"; }
    printf '# %-8s %s\n' "$c" "${STATUS[$c]}" >&2
    [[ ${STATUS[$c]} == ok* ]] && ACTIVE+=("$c")
done
[ ${#ACTIVE[@]} -gt 0 ] || { echo "authbench.sh: no configuration passed its probe" >&2; exit 1; }

# ------------------------------------------------------------ rounds
RUNS=$LOGDIR/runs.txt   # config measure round rc seconds samples sum_of_runnable
: >"$RUNS"
NACT=${#ACTIVE[@]}
NMEAS=${#MEASURES[@]}
TOTAL=0
for c in "${ACTIVE[@]}"; do TOTAL=$((TOTAL + $(measures_of "$c" | wc -l))); done
TOTAL=$((TOTAL * ROUNDS))
RUNNO=0
T_START=$(date +%s)
declare -A FAILS

run_one() {   # config measure round
    local c=$1 m=$2 r=$3 out=$LOGDIR/$1.$2.r$3.out
    set_cmd "$c" "$m"
    wait_idle
    RUNNO=$((RUNNO + 1))
    progress "[round $r/$ROUNDS] run $RUNNO/$TOTAL: $c $m - $(( $(date +%s) - T_START ))s elapsed"
    : >"$out"
    sampled_run "$out" 0.2 timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}"
    echo "$c $m $r $RC $(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.1f", b - a }') $SAMPLES $RUNNABLE_SUM" >>"$RUNS"
    if [ "$RC" -ne 0 ]; then
        FAILS[$c]="${FAILS[$c]:-}round $r $m: exit $RC$([ "$RC" = 124 ] && echo ' (timeout)'); "
        mv "$out" "$out.failed"
    fi
}

for ((r = 1; r <= ROUNDS; r++)); do
    for ((j = 0; j < NMEAS; j++)); do
        m=${MEASURES[$(( (j + r - 1) % NMEAS ))]}
        for ((k = 0; k < NACT; k++)); do
            c=${ACTIVE[$(( (k + r - 1) % NACT ))]}
            measures_of "$c" | grep -qx "$m" && run_one "$c" "$m" "$r"
        done
    done
    printf 'round %d\t%s\n' "$r" "$(btl_identity)" >>"$IDFILE"
done
progress_done
echo "# $TOTAL runs in $(( $(date +%s) - T_START ))s; logs in ${LOGDIR#"$HERE"/}" >&2

# Instructions per 8-byte round trip (bench/callgrind.sh, its pp8
# ping-pong under valgrind), one configuration after the other; the MCA
# settings reach its mpirun through the environment.
CGFILE=$LOGDIR/callgrind.txt   # config<TAB>callgrind.sh's summary line
: >"$CGFILE"
if [ $CALLGRIND = 1 ]; then
    for c in "${ACTIVE[@]}"; do
        case "$c" in tcp|raw) continue ;; esac
        progress "callgrind: $c (about 40 s) ..."
        cg=$(OMPI_MCA_btl_usnic_auth=$(cfg_auth "$c") OMPI_MCA_btl_usnic_checksum=$(cfg_crc "$c") \
             bash "$HERE/callgrind.sh" -T usnic --no-strace --repeat 1 --no-build -o "$NAME-callgrind-$c" \
             2>/dev/null | grep '^callgrind:')
        printf '%s\t%s\n' "$c" "${cg:-failed (see bench/results/$NAME-callgrind-$c-logs)}" >>"$CGFILE"
    done
    progress_done
fi

for c in "${CLIST[@]}"; do
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "${STATUS[$c]}" "${FAILS[$c]:-}" "${CMDLINE[$c,lat]}" \
        "${CMDLINE[$c,bw]}" "${CMDLINE[$c,bw64k]:-}" >>"$STATFILE"
done

# ------------------------------------------------------------ report
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
CPU_FLAGS=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
HAS_SSE42=no; [[ " $CPU_FLAGS " == *" sse4_2 "* ]] && HAS_SSE42=yes
HAS_PCLMUL=no; [[ " $CPU_FLAGS " == *" pclmulqdq "* ]] && HAS_PCLMUL=yes

python3 - "$LOGDIR" "$RESDIR/$NAME" "$OUTFILE" "$ROUNDS" "$INVOCATION" "$INVOKED_IN" "$COMMIT" \
    "$DG" "$DGRAM" "$CPU_MODEL" "$HAS_SSE42" "$HAS_PCLMUL" "$(nproc)" "$(uname -r)" "$NOTE" \
    "$(IFS=,; echo "${MEASURES[*]}")" "$REPS" "$WAIT_IDLE" "$APPEND" <<'PY'
import sys, os, re, glob, statistics, datetime, socket

(logdir, prefix, outfile, rounds, invocation, invoked_in, commit, dg, dgram_opt, cpu_model,
 sse42, pclmul, ncpu, kernel, note, measures, reps, wait_idle, append) = sys.argv[1:20]
rounds = int(rounds); dg = int(dg)
measures = measures.split(",")
USNIC = ["none0", "none1", "header0", "header1", "full0", "full1"]
ORDER = USNIC + ["tcp", "raw"]
BASE = "none0"
SIZE = {"lat": 8, "bw": 1 << 20, "bw64k": 64 << 10}

status, fails, cmds = {}, {}, {}
for line in open(os.path.join(logdir, "status.txt")):
    p = line.rstrip("\n").split("\t")
    p += [""] * (6 - len(p))
    status[p[0]], fails[p[0]] = p[1], p[2]
    cmds[p[0]] = {"lat": p[3], "bw": p[4], "bw64k": p[5]}
configs = [c for c in ORDER if c in status]

def desc(c):
    if c == "tcp":
        return "btl/tcp"
    if c == "raw":
        return f"raw udp ({dg}-byte stream)"
    a, k = c[:-1], c[-1]
    d = f"usnic auth {a}, checksum {k}"
    if c == BASE:
        d += " (baseline)"
    if c == "header0":
        d += " (default)"
    return d

# run conditions: config measure round rc seconds samples sum_of_runnable
cond = {}
for line in open(os.path.join(logdir, "runs.txt")):
    f = line.split()
    if len(f) == 7:
        c, m, r, rc, sec, n, tot = f
        avg = int(tot) / int(n) if int(n) else float("nan")
        cond[(c, m, int(r))] = (int(rc), float(sec), avg)

def stat_field(line, name):
    mm = re.search(r"\s%s=(\d+)" % name, line)
    return int(mm.group(1)) if mm else 0

LINE = re.compile(r"^(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
per = {}        # (config, measure) -> {round: (med, min, max)}
verif = {}      # config -> counters over its measured runs
rows = []
for c in configs:
    v = verif.setdefault(c, dict(runs=0, ok=0, tx=0, retrans=0, bad=0, kdrop=0, unverified=[]))
    for m in measures:
        if c == "raw" and m == "bw64k":
            continue
        for r in range(1, rounds + 1):
            fn = os.path.join(logdir, f"{c}.{m}.r{r}.out")
            if not os.path.exists(fn):
                continue
            txt = open(fn, errors="replace").read()
            want_test = "lat" if m == "lat" else "bw"
            want_size = SIZE[m] if c != "raw" or m == "lat" else dg
            val = None
            for line in txt.splitlines():
                mm = LINE.match(line)
                if mm and mm.group(1) == want_test and int(mm.group(2)) == want_size:
                    try:
                        val = (float(mm.group(3)), float(mm.group(4)), float(mm.group(5)))
                    except ValueError:
                        pass
            ok = val is not None
            if c in USNIC:
                # usnic really carried the traffic: both ranks print their
                # counters, each sent payload, together at least the data
                # the measure moves (reps x the message; lat: both ways)
                st = [l for l in txt.splitlines() if "[usnic stats]" in l]
                tx = [stat_field(l, "tx_bytes") for l in st]
                need = SIZE[m] * int(reps) * (2 if m == "lat" else 1)
                v["runs"] += 1
                v["tx"] += sum(tx)
                v["retrans"] += sum(stat_field(l, "retrans") for l in st)
                v["bad"] += sum(stat_field(l, "bad_pkts") for l in st)
                v["kdrop"] += sum(stat_field(l, "kernel_drops") for l in st)
                if len(st) != 2 or min(tx) == 0 or sum(tx) < need:
                    v["unverified"].append(f"round {r} {m}: {len(st)} stats line(s), "
                                           f"tx_bytes {'+'.join(map(str, tx)) or 'none'}")
                    ok = False
                elif ok:
                    v["ok"] += 1
            if ok:
                per.setdefault((c, m), {})[r] = val
            rc, sec, avg = cond.get((c, m, r), (0, 0.0, float("nan")))
            rows.append((r, c, m, want_size, val, rc, sec, avg, ok))

agg = {}
for k, d in per.items():
    vals = list(d.values())
    agg[k] = (statistics.median(x[0] for x in vals), min(x[1] for x in vals),
              max(x[2] for x in vals), len(vals))

def get(c, m):
    if c == "raw" and m == "bw64k":
        m = "bw"   # the same streaming reference
    return agg.get((c, m))

def fmt(x):
    if x is None:
        return "n/a"
    a = abs(x)
    if a >= 1000: return f"{x:.0f}"
    if a >= 100: return f"{x:.1f}"
    if a >= 1: return f"{x:.2f}"
    return f"{x:.3f}"

def cell(a):
    return "n/a" if a is None else f"{fmt(a[0])} [{fmt(a[1])}-{fmt(a[2])}]"

def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return f"{a[0] / b[0]:.3f}"

def paired(c, ref, m):
    """per-round ratios c / ref (same round), for the rounds both have"""
    a, b = per.get((c, m), {}), per.get((ref, m if not (ref == "raw" and m == "bw64k") else "bw"), {})
    return [a[r][0] / b[r][0] for r in sorted(a) if r in b and b[r][0]]

out = []
P = out.append
now = datetime.datetime.now()
P(f"# usnic BTL: cost of btl_usnic_auth and btl_usnic_checksum, {dg}-byte datagrams - "
  f"{now:%Y-%m-%d %H:%M:%S} on {socket.gethostname()}")
P("")
if note:
    P(f"> **{note}**")
    P("")
P(f"Regenerate: `{invocation}` (run in `{invoked_in}`); git commit {commit}.")
P("")
ids = [l.rstrip("\n").split("\t", 1) for l in open(os.path.join(logdir, "identity.txt"))]
P(f"- CPU: {cpu_model or '?'}, {ncpu} CPUs; SSE4.2 (crc32 instruction): {sse42}; PCLMULQDQ: "
  f"{pclmul} (the component's hardware CRC32C needs both, else a table-driven one); "
  f"kernel {kernel}.")
P(f"- Measured BTL: {ids[0][1] if ids else '?'}.")
changed = sorted({i[1] for i in ids})
if len(changed) > 1:
    P("- **WARNING: the installed usnic BTL changed during the run** (someone reinstalled it): "
      + "; ".join(f"{i[0]}: {i[1]}" for i in ids) + ". The rounds may mix builds.")
P(f"- Loopback only (127.0.0.1 / lo); 2 ranks, `--bind-to core`, `--mca pml ob1`; usnic "
  f"datagrams: {dg} bytes" + (" (`--mca btl_usnic_udp_datagram_size -1`)" if dgram_opt == "1472"
                              else f" (`--mca btl_usnic_udp_datagram_size {dgram_opt}`)" if dgram_opt
                              else " (the interface MTU, the default)")
  + f"; raw udp: `fi_dgram_bench` 8 B ping-pong and streaming of {dg}-byte datagrams.")
P(f"- {rounds} round(s); each round runs every measure of every configuration once, the "
  "measures in turn and within one every configuration, both orders rotated from round to "
  f"round; mpi_bench and fi_dgram_bench repetitions per run: {reps}"
  + (f"; each run waited up to {wait_idle} s for idle CPUs" if wait_idle != "0" else "") + ".")
P("- Cell: median of the per-round medians [lowest min - highest max over all rounds]. "
  "Ratios are of the medians, configuration / reference: latency > 1 and bandwidth < 1 mean "
  "the configuration is slower. 1 MB = 1e6 B.")
P("")

# ---- main table
hdr = "| configuration | 8 B latency (us) | / none0 | / tcp | / raw | 1 MiB bw (MB/s) | / none0 | / tcp | / raw |"
sep = "|---|---|---:|---:|---:|---|---:|---:|---:|"
if "bw64k" in measures:
    hdr += " 64 KiB bw (MB/s) | / none0 | / tcp | / raw |"
    sep += "---|---:|---:|---:|"
P(hdr)
P(sep)
for c in configs:
    cells = []
    for m in measures:
        a = get(c, m)
        if c in USNIC:
            cells += [cell(a), ratio(a, get(BASE, m)), ratio(a, get("tcp", m)), ratio(a, get("raw", m))]
        elif c == "tcp":
            cells += [cell(a), ratio(a, get(BASE, m)), "", ratio(a, get("raw", m))]
        elif m == "bw64k":
            cells += ["(the same stream)", "", "", ""]
        else:
            cells += [cell(a), ratio(a, get(BASE, m)), "", ""]
    if status[c].startswith("n/a"):
        cells = [status[c].replace("|", "\\|")] + [""] * (len(cells) - 1)
    P(f"| {desc(c)} | " + " | ".join(cells) + " |")
P("")
P(f"Raw udp bandwidth is the streaming goodput of {dg}-byte datagrams (no reliability, "
  "no flow control; the reference for every bandwidth column).")
P("")

# ---- budgets
def pct(q):
    return f"{(q - 1) * 100:+.1f}%"

def verdict(c, ref, m, budget=0.05):
    a, b = get(c, m), get(ref, m)
    if a is None or b is None:
        return f"{m}: n/a"
    q = a[0] / b[0]
    pr = paired(c, ref, m)
    lat = m == "lat"
    within = (q <= 1 + budget) if lat else (q >= 1 - budget)
    what = "8 B latency" if lat else ("1 MiB bandwidth" if m == "bw" else "64 KiB bandwidth")
    s = (f"{what} {pct(q)} ({fmt(a[0])} vs {fmt(b[0])} {'us' if lat else 'MB/s'}): "
         + ("**within** the 5% budget" if within else "**over** the 5% budget"))
    if len(pr) > 1:
        inside = [(x <= 1 + budget) if lat else (x >= 1 - budget) for x in pr]
        s += f"; per-round ratios {min(pr):.3f}-{max(pr):.3f}"
        if not all(x == within for x in inside):
            s += " (the rounds disagree: not conclusive at this noise)"
    return s

P("## 5% budgets")
P("")
P("The cost of a configuration is its median against its reference's, measured in the "
  "same run; \"per-round ratios\" pair the two configurations' medians round by round, so "
  "their spread is the noise of the comparison.")
P("")
bm = [m for m in measures if m in ("lat", "bw")] + (["bw64k"] if "bw64k" in measures else [])
if "header0" in configs and BASE in configs:
    P("- **auth header (the default), checksum 0, against auth none:** "
      + "; ".join(verdict("header0", BASE, m) for m in bm) + ".")
if "header1" in configs and "header0" in configs:
    P("- **checksum 1 (CRC32C), auth header, against checksum 0, auth header** (what turning "
      "CRC32C on adds to the default): " + "; ".join(verdict("header1", "header0", m) for m in bm)
      + ".")
if "header1" in configs and "header0" in configs and get("header1", "bw") and get("header0", "bw"):
    q = get("header1", "bw")[0] / get("header0", "bw")[0]
    pr = paired("header1", "header0", "bw")
    fits = q >= 0.95
    sure = len(pr) > 1 and all((x >= 0.95) == fits for x in pr)
    P("- **CRC32C default** (on only if it fits in 5% of 1 MiB bandwidth, measured against the "
      f"default auth header): this run says it {'fits' if fits else 'does not fit'} "
      f"({pct(q)})" + ("" if sure else ", but " + ("one round cannot show the noise"
                                                   if len(pr) <= 1 else "the rounds disagree")
                       + ": decide from a quiet run with more rounds") + ".")
if "header1" in configs and BASE in configs:
    P("- checksum 1 and auth header together, against auth none, checksum 0: "
      + "; ".join(verdict("header1", BASE, m) for m in bm) + ".")
if "none1" in configs and BASE in configs:
    P("- checksum 1 alone (auth none) against auth none, checksum 0: "
      + "; ".join(verdict("none1", BASE, m) for m in bm) + ".")
P("")

# ---- per GB
def per_gb(c, ref, m="bw"):
    a, b = get(c, m), get(ref, m)
    if a is None or b is None or a[0] <= 0 or b[0] <= 0:
        return None
    d = 1000.0 / a[0] - 1000.0 / b[0]   # s per GB (1e9 B) = ns per byte
    pa, pb = per.get((c, m), {}), per.get((ref, m), {})
    pr = [1000.0 / pa[r][0] - 1000.0 / pb[r][0] for r in sorted(pa) if r in pb]
    return d, pr

P("## What the payload MAC and CRC32C cost per GB")
P("")
P("From the 1 MiB bandwidths: extra time = 1/bw(configuration) - 1/bw(reference), in "
  "seconds per GB transferred (1 GB = 1e9 B), which is the same number in ns per byte. "
  "Sender and receiver each run the MAC / CRC over every byte on their own core, in parallel, "
  "so this wall-clock figure is about the CPU time each side spends per byte (both "
  "together: twice that).")
P("")
gb_rows = []
for c, ref in (("full0", BASE), ("full0", "header0"), ("header0", BASE), ("header1", "header0"),
               ("none1", BASE), ("full1", "full0")):
    if c not in configs or ref not in configs:
        continue
    x = per_gb(c, ref)
    if x is None:
        continue
    d, pr = x
    rng = f"{min(pr):+.3f} .. {max(pr):+.3f}" if len(pr) > 1 else ""
    gb_rows.append(f"| {desc(c)} | {desc(ref)} | {d:+.3f} | {rng} | {ratio(get(c, 'bw'), get(ref, 'bw'))} |")
if gb_rows:
    P("| configuration | reference | s per GB (= ns per byte) | per-round range | bw ratio |")
    P("|---|---|---:|---|---:|")
    out.extend(gb_rows)
else:
    P("(needs 1 MiB bandwidths of a configuration and its reference: none measured.)")
P("")

# ---- noise: every round's median
P("## Every round's median")
P("")
P("| configuration | measure | " + " | ".join(f"r{r}" for r in range(1, rounds + 1))
  + " | spread (max/min - 1) |")
P("|---|---|" + "---:|" * rounds + "---:|")
for c in configs:
    for m in measures:
        if c == "raw" and m == "bw64k":
            continue
        d = per.get((c, m), {})
        if not d:
            continue
        vals = [d[r][0] for r in sorted(d)]
        spread = f"{(max(vals) / min(vals) - 1) * 100:.1f}%" if min(vals) > 0 and len(vals) > 1 else ""
        P(f"| {c} | {m} | " + " | ".join(fmt(d[r][0]) if r in d else "-" for r in range(1, rounds + 1))
          + f" | {spread} |")
P("")

# ---- instruction counts
cg = {}
for line in open(os.path.join(logdir, "callgrind.txt")):
    c, _, txt = line.rstrip("\n").partition("\t")
    mm = re.search(r"= (\d+) instructions \(btl (\d+), libfabric (\d+)\)", txt)
    cg[c] = tuple(int(x) for x in mm.groups()) if mm else txt
if cg:
    P("## Instructions per 8-byte round trip (callgrind)")
    P("")
    P("`bench/callgrind.sh -T usnic --no-strace --repeat 1` with the configuration's "
      "`OMPI_MCA_btl_usnic_auth` / `OMPI_MCA_btl_usnic_checksum`: user-space instructions "
      "inside the MPI calls of rank 0 for one 8-byte send + receive (rank 1 does the same "
      "on the other half of the round trip); the kernel's work is not counted. Independent "
      "of the machine's load.")
    P("")
    P("| configuration | inside MPI | BTL (self) | libfabric (self) | difference to none0 |")
    P("|---|---:|---:|---:|---:|")
    b = cg.get(BASE) if isinstance(cg.get(BASE), tuple) else None
    for c in configs:
        if c not in cg:
            continue
        x = cg[c]
        if isinstance(x, tuple):
            d = f"{x[0] - b[0]:+d} ({(x[0] / b[0] - 1) * 100:+.1f}%)" if b else "n/a"
            P(f"| {c} | {x[0]} | {x[1]} | {x[2]} | {d} |")
        else:
            P(f"| {c} | {x} | | | |")
    P("")

# ---- verification
P("## Checks")
P("")
P("Probe: one short run per configuration with `--mca btl_base_verbose 20`; every endpoint "
  "logs `endpoint to module ... created: auth <mode>, checksum <on|off>`. Measured runs: "
  "each usnic run's two `[usnic stats]` lines (`--mca btl_usnic_print_stats 1`); a run counts "
  "only if both ranks sent payload and together at least what the measure moves; "
  "`tx_bytes` = payload bytes sent, `bad_pkts` = datagrams dropped by the receiver's checks "
  "(MAC, CRC, header), `kernel_drops` = socket-buffer overflows.")
P("")
P("| configuration | probe | measured runs verified | tx_bytes (all runs) | retrans | bad_pkts | kernel_drops | failures |")
P("|---|---|---:|---:|---:|---:|---:|---|")
for c in configs:
    v = verif[c]
    f = (fails.get(c) or "").strip().rstrip(";")
    if v["unverified"]:
        f = (f + "; " if f else "") + "UNVERIFIED (excluded): " + "; ".join(v["unverified"])
    st = status[c].replace("|", "\\|")
    if c in USNIC:
        P(f"| {c} | {st} | {v['ok']}/{v['runs']} | {v['tx']} | {v['retrans']} | {v['bad']} | "
          f"{v['kdrop']} | {f} |")
    else:
        n = sum(1 for k in per if k[0] == c for _ in per[k])
        P(f"| {c} | {st} | {n} ok | | | | | {f} |")
P("")
P("Commands (the usnic ones differ only in `btl_usnic_auth` / `btl_usnic_checksum`):")
P("")
for c in ("none0", "tcp", "raw"):
    if c in cmds:
        for m in measures:
            if cmds[c].get(m) and not (c == "raw" and m == "bw64k"):
                P(f"- {c} {m}: `{cmds[c][m]}`")
P("")

# ---- run conditions
P("## Run conditions")
P("")
P("Runnable tasks sampled every 0.2 s during each run (/proc/stat procs_running); a run "
  "itself accounts for about 3 (2 benchmark processes + the sampler); more means other "
  f"processes competed for this host's {ncpu} CPUs.")
P("")
P("| configuration | runs | failed | avg runnable (median of runs) | runs with >= 0.5 other runnable tasks |")
P("|---|---:|---:|---:|---:|")
busy_total = 0
for c in configs:
    cs = [v for k, v in cond.items() if k[0] == c]
    if not cs:
        continue
    avgs = [x[2] for x in cs if x[2] == x[2]]
    busy = sum(1 for x in avgs if x - 3 >= 0.5)
    busy_total += busy
    P(f"| {c} | {len(cs)} | {sum(1 for x in cs if x[0] != 0)} | "
      f"{statistics.median(avgs):.2f} | {busy} |" if avgs else f"| {c} | {len(cs)} | | | |")
P("")
P(f"Per-run data: `{os.path.relpath(prefix, invoked_in)}-rounds.csv`; logs: "
  f"`{os.path.relpath(logdir, invoked_in)}/`.")
if busy_total:
    sys.stderr.write(f"# WARNING: {busy_total} run(s) had other processes competing for the CPUs "
                     "(see 'Run conditions'; --wait-idle S may help)\n")

md = "\n".join(out) + "\n"
sys.stdout.write(md)
open(prefix + ".md", "w").write(md)
if outfile:
    with open(outfile, "a" if append == "1" else "w") as f:
        if append == "1" and f.tell() > 0:
            f.write("\n")
        f.write(md)
with open(prefix + "-rounds.csv", "w") as f:
    f.write("round,config,measure,size,median,min,max,unit,exit,seconds,avg_runnable,verified\n")
    for (r, c, m, s, val, rc, sec, avg, ok) in sorted(rows, key=lambda x: (x[0], x[1], x[2])):
        unit = "us" if m == "lat" else "MB/s"
        v3 = [repr(x) for x in val] if val else ["", "", ""]
        f.write(f"{r},{c},{m},{s},{','.join(v3)},{unit},{rc},{sec},{avg:.2f},{int(ok)}\n")
sys.stderr.write(f"# report: {prefix}.md" + (f" and {outfile}" if outfile else "")
                 + f"; csv: {prefix}-rounds.csv\n")
PY
exit $?
}
