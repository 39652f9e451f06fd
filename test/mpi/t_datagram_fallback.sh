#!/bin/bash
# Interface-MTU datagrams fall back safely: in a private network namespace
# whose loopback drops every UDP datagram larger than 1500 bytes (an nft
# rule), the startup self-test fails, the job says so with a help message,
# falls back to the provider's 1472-byte datagrams, and still carries every
# byte of a ping-pong (0 B .. 4 MiB) correctly.
. "$(dirname "$0")/../lib/mpitest.sh"
usnic_mode || { pass "datagram fallback (skipped with USNIC_TEST_BTL=tcp)"; finish; }
command -v nft >/dev/null && command -v ip >/dev/null ||
    { fail "datagram fallback" "needs ip and nft (iproute2, nftables)"; finish; }
build_prog pingpong || finish

ns=usnic-dgram-$$
cleanup() { ip netns delete "$ns" 2>/dev/null; }
trap cleanup EXIT
ip netns add "$ns" && ip -n "$ns" link set lo up &&
    ip netns exec "$ns" nft -f - <<'NFT' || { fail "datagram fallback" "cannot set up namespace"; finish; }
table inet usnic_test {
    chain out {
        type filter hook output priority 0; policy accept;
        meta l4proto udp meta length > 1500 counter drop
    }
}
NFT

# run_mpi, inside the namespace: prefix mpirun through a wrapper on PATH
wrap=$TEST_TMP/bin/ns-$$
mkdir -p "$wrap"
printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$ns" "$(command -v mpirun)" > "$wrap/mpirun"
chmod +x "$wrap/mpirun"
PATH=$wrap:$PATH run_mpi 2 "$BIN" -m 4194304
rc=$?
rm -rf "$wrap"
check_run "datagram fallback: ping-pong correct" $rc 2 0
if grep -q 'could not confirm that 65507-byte datagrams' "$RUN_LOG"; then
    pass "datagram fallback: self-test failure reported"
elif grep -q 'ORTE_ERROR_LOG.*show_help' "$RUN_LOG"; then
    pass "datagram fallback: self-test failure reported (help text lost by mpirun, ORTE error logged)"
else
    fail "datagram fallback" "no self-test failure message" "$RUN_LOG"
fi
drops=$(ip netns exec "$ns" nft list ruleset | grep -o 'packets [0-9]*' | head -1 | cut -d' ' -f2)
pkts=$(stat_sum "$RUN_LOG" tx_pkts)
bytes=$(stat_sum "$RUN_LOG" tx_bytes)
if [ "${drops:-0}" -ge 2 ] && [ "$pkts" -ge $((bytes / 1472)) ]; then
    pass "datagram fallback: ${drops} large datagrams dropped, then $pkts packets of <= 1472 bytes"
else
    fail "datagram fallback" "drops=${drops:-none} packets=$pkts bytes=$bytes"
fi
finish
