#!/bin/sh
# Compare btl_usnic_fi_ext.h with libfabric's own fi_ext_usnic.h, field by
# field (offsets, sizes) and constant by constant.
#   abi_check.sh [LIBFABRIC_SOURCE_DIR]   against the header in that source
#   abi_check.sh --layout FILE            against a recorded layout (FILE:
#                                         abi_check.c's output, # comments)
#   abi_check.sh --record DIR             print the layout of DIR's header
# Without an argument, tries `apt-get source libfabric` into a temporary
# directory, and where that fails (no deb-src line, no reachable source
# archive) compares against the layout recorded from libfabric 1.17.0,
# fi_ext_usnic-1.17.0.layout beside this script.
# Exit 0: identical, 1: different, 77: nothing to compare against.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
recorded=$here/fi_ext_usnic-1.17.0.layout

# header_of DIR: the fi_ext_usnic.h inside a libfabric source tree
header_of() {
    [ -d "$1" ] && find "$1" -maxdepth 6 -name fi_ext_usnic.h 2>/dev/null | head -n 1
}

# layout_real HEADER > FILE: abi_check.c built against libfabric's header
layout_real() {
    $cc -std=gnu11 -Wall -Wextra -Werror -DABI_REAL -I"$(dirname "$1")" -o "$work/real" \
        "$here/abi_check.c" && "$work/real"
}

mode=source
case "${1:-}" in
--layout) mode=layout; ref=${2:-} ;;
--record) mode=record; src=${2:-} ;;
*) src=${1:-} ;;
esac

if [ "$mode" = record ]; then
    hdr=$(header_of "$src")
    [ -n "$hdr" ] || { echo "abi_check: no fi_ext_usnic.h under '$src'" >&2; exit 77; }
    layout_real "$hdr"
    exit $?
fi

hdr=
if [ "$mode" = source ]; then
    if [ -z "$src" ] && command -v apt-get >/dev/null 2>&1; then
        (cd "$work" && timeout 300 apt-get source -qq libfabric >/dev/null 2>&1) && src=$work
    fi
    hdr=$(header_of "$src")
    if [ -z "$hdr" ] && [ -z "${1:-}" ] && [ -f "$recorded" ]; then
        mode=layout
        ref=$recorded
    fi
fi

if [ "$mode" = layout ]; then
    if [ ! -f "$ref" ]; then
        echo "SKIP: abi_check: no layout file '$ref'"
        exit 77
    fi
    grep -v '^#' "$ref" > "$work/real.txt"
    what="the layout recorded in $(basename "$ref")"
elif [ -n "$hdr" ]; then
    echo "abi_check: reference header $hdr"
    layout_real "$hdr" > "$work/real.txt" || exit 1
    what=$hdr
else
    echo "SKIP: abi_check: no libfabric source with fi_ext_usnic.h (give its directory as argument)"
    exit 77
fi

$cc -std=gnu11 -Wall -Wextra -Werror -I"$top" -o "$work/ours" "$here/abi_check.c" || exit 1
"$work/ours" > "$work/ours.txt" || exit 1
if diff -u "$work/real.txt" "$work/ours.txt"; then
    echo "PASS: abi_check: $(wc -l < "$work/ours.txt") layout facts identical to $what (sizes, offsets, constants)"
    exit 0
fi
echo "FAIL: abi_check: btl_usnic_fi_ext.h differs from $what"
exit 1
