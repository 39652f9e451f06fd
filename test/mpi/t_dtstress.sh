#!/bin/bash
# Randomised derived-datatype stress under injected packet loss (dtstress.c),
# 2 ranks over usnic on lo, a matrix of
#   drop 0%, 1%, 5% (+ dup 2%, reorder 5%), 20%
# each with the default datagram size (the loopback MTU) and with 1472-byte
# datagrams (btl_usnic_udp_datagram_size -1).  Every run starts new
# iterations for DTSTRESS_TIME seconds; message sizes cluster around the
# transport's boundaries, taken from ompi_info (eager/rndv/max-send, RDMA
# pipeline, put and priority limits) and from the datagram size (payload of
# a datagram, of a chunk and of a PUT datagram).  Every byte received, gaps
# and guard areas included, is checked; the program prints a reproducing
# command on any mismatch, hang (watchdog) or crash.  Runs with loss must
# also show injected drops and retransmissions (inj_drop, retrans > 0), the
# 5% run injected duplicates and reorderings too.
#
# Overrides: DTSTRESS_SEED (seed of the first run, run i uses SEED+i;
# "random": from the clock; default 1000), DTSTRESS_TIME (seconds per run,
# default 15), DTSTRESS_MAX (largest message, default 4 MiB), DTSTRESS_ARGS
# (more dtstress options), FAULT_SEED (btl_usnic_debug_seed, default 4242).
# Each mpirun is limited to TEST_TIMEOUT seconds (default 90 here).
TEST_TIMEOUT=${TEST_TIMEOUT:-90}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

seed=${DTSTRESS_SEED:-1000}
[ "$seed" = random ] && seed=$(( $(date +%s) % 1000000000 ))
budget=${DTSTRESS_TIME:-15}
max=${DTSTRESS_MAX:-4194304}
fseed=${FAULT_SEED:-4242}
# the watchdog reports a stuck iteration before mpirun's hard timeout
watch=$((TEST_TIMEOUT - ${budget%.*} - 20))
[ "$watch" -lt 10 ] && watch=10

build_prog dtstress || finish

# ---- boundaries ---------------------------------------------------------------
params=$(ompi_info --param btl usnic --level 9 --parsable 2>/dev/null)
param() {
    # mca:btl:usnic:param:btl_usnic_NAME:value:VALUE
    awk -F: -v k="btl_usnic_$1" '$5 == k && $6 == "value" { print $7; exit }' <<< "$params"
}
fixed=
for p in priority_limit eager_limit rndv_eager_limit max_send_size \
         rdma_pipeline_send_length min_rdma_pipeline_size rdma_pipeline_frag_size put_limit; do
    v=$(param "$p")
    case $v in '' | *[!0-9]*) echo "    ompi_info: no btl_usnic_$p" ;; *) fixed="$fixed $v" ;; esac
done
[ -n "$fixed" ] || fixed="512 150000 300000"
# default datagram size on lo: the MTU less IP and UDP headers, at most 65507
mtu=$(cat /sys/class/net/lo/mtu 2>/dev/null || echo 65536)
dgram_default=$((mtu - 28 > 65507 ? 65507 : mtu - 28))

# boundaries DGRAM: the fixed limits and the datagram's payloads: FRAG 56,
# CHUNK 72, PUT 88 bytes of headers (btl_usnic_proto.h: common header 56,
# chunk header 16, PUT header 16); 40, 48, 64 and 80 too, in case headers change
boundaries() {
    local d=$1
    # shellcheck disable=SC2086 # fixed is a list
    printf '%s\n' $fixed $((d - 40)) $((d - 48)) $((d - 56)) $((d - 64)) $((d - 72)) \
        $((d - 80)) $((d - 88)) |
        awk '$1 > 0' | sort -n -u | paste -s -d, -
}

# ---- runs --------------------------------------------------------------------
run_no=0

# dt_run NAME DGRAM "KEYS THAT MUST BE > 0" MCA_ARGS...
dt_run() {
    local name=$1 d=$2 keys=$3 s=$((seed + run_no)) b key v
    shift 3
    run_no=$((run_no + 1))
    b=$(boundaries "$d")
    echo "    $name: dtstress seed $s, boundaries $b"
    # shellcheck disable=SC2086 # DTSTRESS_ARGS is meant to be word-split
    EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_debug_seed $fseed $*" \
        run_mpi 2 "$BIN" -s "$s" -t "$budget" -W "$watch" -M "$max" -b "$b" \
        ${DTSTRESS_ARGS:-}
    if ! check_run "$name" $? 2; then
        grep -h -E 'ERROR dtstress|first wrong|reproduce:' "$RUN_LOG" | head -n 6 |
            sed 's/^/    /'
        return
    fi
    grep -h '^dtstress: seed' "$RUN_LOG" | tail -n 2 | sed 's/^/    /'
    usnic_mode || return
    [ -n "$keys" ] || return
    for key in $keys; do
        v=$(stat_sum "$RUN_LOG" "$key")
        echo "    $name: sum of $key = $v"
        if [ "$v" -le 0 ]; then
            fail "$name recovery" "sum of $key is $v, expected > 0" "$RUN_LOG"
            return
        fi
    done
    pass "$name recovery"
}

for dg in default 1472; do
    if [ "$dg" = default ]; then
        d=$dgram_default
        dmca=
    else
        d=1472
        dmca="--mca btl_usnic_udp_datagram_size -1"
    fi
    # shellcheck disable=SC2086 # dmca is meant to be word-split
    {
        dt_run "dtstress dgram=$dg drop=0" "$d" "" $dmca
        dt_run "dtstress dgram=$dg drop=0.01" "$d" "inj_drop retrans" $dmca \
            --mca btl_usnic_debug_drop_rate 0.01
        dt_run "dtstress dgram=$dg drop=0.05 dup=0.02 reorder=0.05" "$d" \
            "inj_drop retrans inj_dup inj_reorder dup_rx" $dmca \
            --mca btl_usnic_debug_drop_rate 0.05 \
            --mca btl_usnic_debug_dup_rate 0.02 \
            --mca btl_usnic_debug_reorder_rate 0.05
        dt_run "dtstress dgram=$dg drop=0.20" "$d" "inj_drop retrans" $dmca \
            --mca btl_usnic_debug_drop_rate 0.20
    }
done
finish
