#!/bin/sh
# Build the usnic test-double provider: OUTDIR/libusnic-fi.so
# (libfabric loads it from FI_PROVIDER_PATH=OUTDIR).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:?usage: build.sh OUTDIR}
mkdir -p "$out"
${CC:-cc} -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared \
    -fvisibility=hidden -I"$here" -I"$top" \
    -o "$out/libusnic-fi.so" \
    "$here/usnic_td.c" "$here/usnic_td_dom.c" "$here/usnic_td_ep.c" \
    -lfabric -lpthread
echo "built $out/libusnic-fi.so"
