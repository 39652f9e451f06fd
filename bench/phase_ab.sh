#!/usr/bin/env bash
# phase_ab.sh - run bench/phase_ab (an A/B comparison inside one job, the
# component switching behaviour every 50 ms; see the top of phase_ab.c)
# over usnic between two network-namespace hosts (test/lib/netns.sh, one
# rank each, bound like run.sh), or on loopback.  The component must be a
# build with a phase switch at the decision being compared; the job gets
# USNIC_PHASE_AB=1 in its environment (without -n).
#
# usage: bench/phase_ab.sh [-m MTU | --lo] [-w W] [-t SECONDS] [-n]
#                          [-b] [-a "MPIRUN ARGS"] -- SIZE...
#   -m MTU      veth MTU of the test bed (default 1500)
#   --lo        both ranks on this host over loopback instead
#   -w W        windows of W messages (bandwidth) instead of a ping-pong
#   -b          with -w: windows both ways at once (bidirectional)
#   -t SECONDS  per size (default 4)
#   -n          without USNIC_PHASE_AB (an A/A run: how well A and B agree)
#   -a ARGS     more mpirun arguments, e.g. "--mca btl_usnic_auth none"
# Example: bench/phase_ab.sh -m 1500 -- 131072 262144
# Needs root; all traffic stays on the test bed's 10.211.0.0/24 (or lo).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
MTU=1500 LO=0 W=0 SECS=4 SWITCH=1 EXTRA="" BOTH=()
while [ $# -gt 0 ]; do
    case "$1" in
        -m) MTU=$2; shift 2 ;;
        --lo) LO=1; shift ;;
        -w) W=$2; shift 2 ;;
        -b) BOTH=(-b); shift ;;
        -t) SECS=$2; shift 2 ;;
        -n) SWITCH=0; shift ;;
        -a) EXTRA=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "phase_ab.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "phase_ab.sh: sizes expected after --" >&2; exit 2; }
case "$MTU$W" in *[!0-9]*|'') echo "phase_ab.sh: -m and -w expect numbers" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "phase_ab.sh: needs root" >&2; exit 1; }
[ -x "$HERE/build/phase_ab" ] || make -s -C "$HERE" build/phase_ab >&2 || exit 1
ENVARGS=()
[ $SWITCH = 1 ] && ENVARGS=(-x USNIC_PHASE_AB=1)
PROG=("$HERE/build/phase_ab" -w "$W" "${BOTH[@]}" -t "$SECS" "$@")
COMMON=(--allow-run-as-root -np 2 --mca pml ob1 --mca btl "usnic,self")
if [ $LO = 1 ]; then
    echo "# phase_ab.sh: loopback, -w $W, ${SECS}s per size, switch $SWITCH, extra '$EXTRA'"
    # shellcheck disable=SC2086 # EXTRA is meant to be word-split
    timeout -k 10 600 mpirun "${COMMON[@]}" --bind-to core --mca btl_usnic_if_include lo \
        "${ENVARGS[@]}" $EXTRA "${PROG[@]}" </dev/null
    exit $?
fi
OUT=$(mktemp -d /tmp/usnic-phase-ab.XXXXXX)
# shellcheck disable=SC2034 # read by mpitest.sh
TEST_TMP=$OUT/testbed
# shellcheck source=test/lib/mpitest.sh
. "$REPO/test/lib/mpitest.sh"
# shellcheck source=test/lib/netns.sh
. "$REPO/test/lib/netns.sh"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
netns_pair_up "$MTU" "$OUT" || exit 1
echo "# phase_ab.sh: MTU $MTU, -w $W, ${SECS}s per size, switch $SWITCH, extra '$EXTRA'"
# shellcheck disable=SC2086
ip netns exec "$NSB_HEAD" timeout -k 10 600 mpirun "${COMMON[@]}" --hostfile "$(nsbed_hostfile 1)" \
    "${BIND[@]}" --mca plm_rsh_agent "$NSB_AGENT" --mca oob_tcp_if_include "$NSB_CIDR" \
    --mca btl_usnic_if_include "$NSB_CIDR" "${ENVARGS[@]}" $EXTRA "${PROG[@]}" </dev/null
rc=$?
echo "# logs: $OUT"
exit $rc
