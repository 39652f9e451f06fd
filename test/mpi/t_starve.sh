#!/bin/bash
# A 1 MiB message (rendezvous and PUT: the data socket) from one rank while
# a stream of 8-byte messages from another keeps the receiver's priority
# socket busy, the receiver slower than the stream: the large message must
# complete while the stream lasts, every byte in place (starve.c).  With
# interface-MTU datagrams and with 1472-byte ones (about 700 datagrams for
# the PUT).
# shellcheck source=SCRIPTDIR/../lib/mpitest.sh
. "$(dirname "$0")/../lib/mpitest.sh"

build_prog starve || finish
for dg in default 1472; do
    name="starve ($dg datagrams)"
    if [ "$dg" = 1472 ]; then
        EXTRA_MCA="${EXTRA_MCA:-} --mca btl_usnic_udp_datagram_size -1" run_mpi 3 "$BIN" -t 3 -w 1000 -g 5
    else
        run_mpi 3 "$BIN" -t 3 -w 1000 -g 5
    fi
    check_run "$name" $? 3 $((1024 * 1024)) && grep -h '^starve:' "$RUN_LOG" | sed 's/^/    /'
done
finish
