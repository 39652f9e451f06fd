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
# mpirun (Open MPI 4.1.4's ORTE) sometimes fails to forward the ranks'
# help message in this namespace: "ORTE_ERROR_LOG: Out of resource in
# file ../../../orte/util/show_help.c", and now and then mpirun itself then
# crashes in its PMIx log handler (pmix_server_log_fn ->
# orte_rml_oob_send_buffer_nb, signal 11: once in a CI run, never in 12
# runs of this test alone).
# That is mpirun's crash, not a rank's: the job is run again, at most
# twice, and the run that counts must pass everything below.
dropped() {
    ip netns exec "$ns" nft list ruleset | grep -o 'packets [0-9]*' | head -1 | cut -d' ' -f2
}
for attempt in 1 2 3; do
    drops0=$(dropped)
    PATH=$wrap:$PATH run_mpi 2 "$BIN" -m 4194304
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'ORTE_ERROR_LOG: Out of resource in file .*show_help.c' "$RUN_LOG" &&
        grep -q 'pmix_server_log_fn' "$RUN_LOG" && [ "$attempt" -lt 3 ]; then
        printf '    datagram fallback: mpirun crashed forwarding the help message (ORTE, rc=%s): run %d again\n' \
            "$rc" $((attempt + 1))
        continue
    fi
    break
done
rm -rf "$wrap"
check_run "datagram fallback: ping-pong correct" $rc 2 0
if grep -q 'could not confirm that 65507-byte datagrams' "$RUN_LOG"; then
    pass "datagram fallback: self-test failure reported"
elif grep -q 'ORTE_ERROR_LOG.*show_help' "$RUN_LOG"; then
    pass "datagram fallback: self-test failure reported (help text lost by mpirun, ORTE error logged)"
else
    fail "datagram fallback" "no self-test failure message" "$RUN_LOG"
fi
drops=$(($(dropped) - ${drops0:-0})) # (by the run that counts)
pkts=$(stat_sum "$RUN_LOG" tx_pkts)
bytes=$(stat_sum "$RUN_LOG" tx_bytes)
if [ "${drops:-0}" -ge 2 ] && [ "$pkts" -ge $((bytes / 1472)) ]; then
    pass "datagram fallback: ${drops} large datagrams dropped, then $pkts packets of <= 1472 bytes"
else
    fail "datagram fallback" "drops=${drops:-none} packets=$pkts bytes=$bytes"
fi
finish
