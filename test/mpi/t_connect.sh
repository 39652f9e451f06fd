#!/bin/bash
# Two jobs started separately, joined by MPI_Comm_accept / MPI_Comm_connect
# (connect.c), talk over usnic: an ompi-server (--no-daemonize, its PID
# kept) publishes the runtime's contact data; a server job (mpirun -np 1)
# opens a port and writes its name to a file; a client job (mpirun -np 1)
# reads it and connects.  Both exchange every size of a list crossing the
# protocol boundaries (0 B .. 4 MiB+3) in both directions at once, each
# byte checked.  Only "btl usnic,self" is allowed, so the two jobs' traffic
# can only cross usnic.
#
# Asserts: both mpiruns exit 0; each process printed its verdict line OK
# with the btl it was given; with usnic, each printed a [usnic stats] line
# naming dev lo whose tx_bytes cover what it sent to the other (the BYTES
# figure), and neither refused a datagram of the other (no drop_SENDER,
# drop_ADDRESS, drop_AUTH: the two jobs' keys and secrets came from each
# other's modex).  The ompi-server is ended by its PID.
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

TEST_TIMEOUT=${CONNECT_TIMEOUT:-60}
if usnic_mode; then
    want_btl="usnic,self"
else
    want_btl="tcp,self"
fi
build_prog connect || finish

work=$(mktemp -d "$TEST_TMP/connect.XXXXXX") || exit 1
uri=$work/ompi-server.uri
portfile=$work/port
srv_pid=
cleanup() {
    if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then
        kill "$srv_pid" 2>/dev/null
        wait "$srv_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT

OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ompi-server --no-daemonize --report-uri "$uri" \
    --mca oob_tcp_if_include lo > "$work/ompi-server.log" 2>&1 &
srv_pid=$!
for _ in $(seq 1 100); do
    [ -s "$uri" ] && break
    sleep 0.1
done
if [ ! -s "$uri" ]; then
    fail connect "ompi-server wrote no URI" "$work/ompi-server.log"
    finish
fi

# job NAME ROLE: one mpirun (in the background), its output in $work/NAME.log
job() {
    local -a cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 1
                  --mca pml ob1 --mca oob_tcp_if_include lo
                  --ompi-server "file:$uri")
    if usnic_mode; then
        cmd+=(--mca btl "usnic,self" --mca btl_usnic_print_stats 1
              --mca btl_usnic_if_include lo)
    else
        cmd+=(--mca btl "tcp,self" --mca btl_tcp_if_include lo)
    fi
    # shellcheck disable=SC2206 # EXTRA_MCA is meant to be word-split
    cmd+=(${EXTRA_MCA:-} "$BIN" "$2" "$portfile" -t $((TEST_TIMEOUT - 10)))
    echo "# ${cmd[*]}" > "$work/$1.log"
    timeout -k 10 "$TEST_TIMEOUT" "${cmd[@]}" >> "$work/$1.log" 2>&1 < /dev/null
}

job server server &
spid=$!
job client client &
cpid=$!
wait "$spid"
src=$?
wait "$cpid"
crc=$?
# keep the logs where failures can be read
for n in server client; do
    cp "$work/$n.log" "$TEST_TMP/logs/$MT_NAME.$$.$n.log"
done
slog=$TEST_TMP/logs/$MT_NAME.$$.server.log
clog=$TEST_TMP/logs/$MT_NAME.$$.client.log
echo "    ran: server rc=$src (log $slog), client rc=$crc (log $clog)"

if [ "$src" -ne 0 ] || [ "$crc" -ne 0 ]; then
    fail connect "server exit $src, client exit $crc" "$slog"
    [ -f "$clog" ] && tail -n 15 "$clog" | sed 's/^/    client: /'
    finish
fi
pass "connect: two jobs, accept/connect, both exit 0"

bytes=$(program_bytes "$slog")
why=
for n in server client; do
    log=$TEST_TMP/logs/$MT_NAME.$$.$n.log
    if ! grep -q "^connect: $n pid=[0-9]* btl=$want_btl verdict OK" "$log"; then
        why="$why; $n: $(grep -m1 -E '^connect:|ERROR' "$log" || echo 'no verdict line')"
    fi
done
if [ -n "$why" ] || [ -z "$bytes" ]; then
    fail "connect verdicts" "${why#; }${bytes:- no BYTES figure}" "$slog"
    finish
fi
pass "connect verdicts: server and client each verified $bytes bytes over btl $want_btl"

if ! usnic_mode; then
    finish
fi
for n in server client; do
    log=$TEST_TMP/logs/$MT_NAME.$$.$n.log
    line=$(grep -m1 '\[usnic stats\]' "$log")
    tx=$(sed -n 's/.* tx_bytes=\([0-9]*\).*/\1/p' <<<"$line")
    dev=$(sed -n 's/.* dev=\([^ ]*\).*/\1/p' <<<"$line")
    refused=$(grep -o -E 'drop_(SENDER|ADDRESS|AUTH|CHECKSUM|TAG)=[0-9]+' <<<"$line" | tr '\n' ' ')
    if [ -z "$line" ]; then
        fail "connect $n usnic" "no [usnic stats] line" "$log"
    elif [ "$dev" != "${USNIC_TEST_DEV:-lo}" ] || [ -z "$tx" ] || [ "$tx" -lt "$bytes" ]; then
        fail "connect $n usnic" "dev=$dev tx_bytes=$tx, want >= $bytes on ${USNIC_TEST_DEV:-lo}" "$log"
    elif [ -n "$refused" ]; then
        fail "connect $n usnic" "refused datagrams of the other job: $refused" "$log"
    else
        pass "connect $n: usnic carried its data (dev $dev, tx_bytes $tx >= $bytes), nothing refused"
    fi
done
finish
