#!/bin/bash
# A link that goes down for a while and comes back, between two hosts made
# of network namespaces (test/lib/netns.sh; one rank on h1, one on h2):
# both hosts' interfaces are set down for 2 s while 64 KiB-1 MiB
# ping-pongs flow (both directions, every byte checked), then up again.
#   - the job completes over usnic with its data intact (2 s is well
#     inside btl_usnic_peer_timeout);
#   - while the interfaces are down every send fails (ENETUNREACH; the
#     kernel backend counts them in tx_errors, the udp provider not).  Those
#     datagrams count as lost, and the retransmission timer sends them
#     again with its backoff: the rank with data in flight makes a few
#     hundred failed sends, not one per progress call (170,000 in 2 s
#     before, at 100% CPU, and a log line each with btl_base_verbose 5).
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"
# shellcheck source=SCRIPTDIR/../lib/netns.sh
. "$(dirname "$0")/../lib/netns.sh"

if ! usnic_mode; then
    pass "link flap netns (skipped with USNIC_TEST_BTL=tcp)"
    finish
fi
build_prog pingpong || finish
pp=$BIN
nsbed_up 2 || finish
export USNIC_TEST_DEV=$NSB_DEV
hosts1=$(nsbed_hostfile 1)

tx0=$(nsbed_ifstat 1 tx_bytes)
nsbed_start_mpi "$hosts1" 2 "$pp" -n 64k -m 1m -i 20
# down once the ping-pongs are under way (50 MB through h1's interface)
nsbed_wait_sent 1 50000000 "$tx0"
for h in 1 2; do ip -n "$(nsbed_ns $h)" link set "$NSB_DEV" down; done
sleep 2
for h in 1 2; do ip -n "$(nsbed_ns $h)" link set "$NSB_DEV" up; done
nsbed_wait_mpi
rc=$?
check_run "link flap netns: both interfaces down 2 s, data intact" $rc 2
# (the kernel backend sees every refused send; libfabric's udp provider
# reports none of them)
errs=$(stat_sum "$RUN_LOG" tx_errors)
least=1
[ "$(usnic_backend)" = kernel ] || least=0
if [ "$errs" -ge $least ] && [ "$errs" -lt 2000 ]; then
    pass "link flap netns: $errs sends failed while the interfaces were down (paced by the timer)"
else
    fail "link flap netns: failed sends" "tx_errors $errs (wanted $least-1999)" "$RUN_LOG"
fi
finish
