#!/bin/sh
# Compare btl_usnic_fi_ext.h with libfabric's own fi_ext_usnic.h, field by
# field (offsets, sizes) and constant by constant.
#   abi_check.sh [LIBFABRIC_SOURCE_DIR]
# Without an argument, tries `apt-get source libfabric` into a temporary
# directory.  Exit 0: identical, 1: different, 77: no libfabric source.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=${1:-}
if [ -z "$src" ] && command -v apt-get >/dev/null 2>&1; then
    (cd "$work" && timeout 300 apt-get source -qq libfabric >/dev/null 2>&1) && src=$work
fi
hdr=
if [ -n "$src" ] && [ -d "$src" ]; then
    hdr=$(find "$src" -maxdepth 6 -name fi_ext_usnic.h 2>/dev/null | head -n 1)
fi
if [ -z "$hdr" ]; then
    echo "SKIP: abi_check: no libfabric source with fi_ext_usnic.h (give its directory as argument)"
    exit 77
fi
echo "abi_check: reference header $hdr"
cc=${CC:-cc}
$cc -std=gnu11 -Wall -Wextra -Werror -DABI_REAL -I"$(dirname "$hdr")" -o "$work/real" \
    "$here/abi_check.c" || exit 1
$cc -std=gnu11 -Wall -Wextra -Werror -I"$top" -o "$work/ours" "$here/abi_check.c" || exit 1
"$work/real" > "$work/real.txt" && "$work/ours" > "$work/ours.txt" || exit 1
if diff -u "$work/real.txt" "$work/ours.txt"; then
    echo "PASS: abi_check: $(wc -l < "$work/ours.txt") layout facts identical (sizes, offsets, constants)"
    exit 0
fi
echo "FAIL: abi_check: btl_usnic_fi_ext.h differs from $hdr"
exit 1
