#!/bin/bash
# Self-test of the usnic test-double provider.
#   t_prov.sh [OUTDIR]      (default: a temporary directory)
# Environment: LIBFABRIC_SRC, a libfabric source tree for the ABI check
# (else /tmp/libfabric-*/ if present, else that check is skipped).
# Prints PASS/FAIL/SKIP lines and "t_prov: N passed, N failed"; exits
# non-zero if anything failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:-}
tmp=$(mktemp -d)
[ -n "$out" ] || out=$tmp/out
pp_pid=
cleanup() {
    if [ -n "$pp_pid" ] && kill -0 "$pp_pid" 2>/dev/null; then
        kill "$pp_pid"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

pass=0
fail=0
result() { # result STATUS TEXT
    if [ "$1" -eq 0 ]; then
        echo "PASS: $2"
        pass=$((pass + 1))
    else
        echo "FAIL: $2"
        fail=$((fail + 1))
    fi
}
has() { grep -q -- "$1" "$2"; }

# ---- build
"$here/build.sh" "$out" > "$tmp/build.log" 2>&1
result $? "build.sh: libusnic-fi.so with -Wall -Wextra -Werror"
${CC:-cc} -std=gnu11 -g -Wall -Wextra -Werror -I"$here" -I"$top" -o "$out/prov_check" \
    "$here/prov_check.c" -lfabric > "$tmp/cc.log" 2>&1
result $? "prov_check.c builds with -Wall -Wextra -Werror"
if [ ! -f "$out/libusnic-fi.so" ] || [ ! -x "$out/prov_check" ]; then
    cat "$tmp/build.log" "$tmp/cc.log"
    echo "t_prov: $pass passed, $((fail + 1)) failed"
    exit 1
fi
export FI_PROVIDER_PATH=$out
unset USNIC_TD_VFS USNIC_TD_STRICT USNIC_TD_DESC USNIC_TD_VERBOSE USNIC_TD_REQUIRE_PREFIX \
    USNIC_TD_LINKDOWN_SEND

# ---- fi_info
if command -v fi_info > /dev/null; then
    FI_PROVIDER_PATH= fi_info -p usnic > "$tmp/noinfo.txt" 2>&1
    ! has "domain: usnic_0" "$tmp/noinfo.txt"
    result $? "without FI_PROVIDER_PATH, fi_info -p usnic finds no usnic device (Debian has none)"
    fi_info -p usnic -v > "$tmp/info.txt" 2>&1
    has "type: FI_EP_DGRAM" "$tmp/info.txt" && has "FI_MSG_PREFIX" "$tmp/info.txt" &&
        has "msg_prefix_size: 64" "$tmp/info.txt" && has "name: usnic_0" "$tmp/info.txt" &&
        has "name: 127.0.0.0/8" "$tmp/info.txt" && has "max_msg_size: 1536" "$tmp/info.txt"
    result $? "FI_PROVIDER_PATH=OUTDIR fi_info -p usnic: usnic_0, FI_EP_DGRAM, FI_MSG_PREFIX, prefix 64"
    FI_LOG_LEVEL=info fi_info -p usnic > "$tmp/log.txt" 2>&1
    has "registering provider: usnic (1.0)" "$tmp/log.txt"
    result $? "libfabric registers the DL provider usnic 1.0 from FI_PROVIDER_PATH"
else
    echo "SKIP: fi_info not installed (libfabric-bin)"
fi

# ---- the C checks
export USNIC_TD_CONTROL=$tmp/control USNIC_TD_LOG=$tmp/td.log
export USNIC_TD_NUM_VF=4 USNIC_TD_QP_PER_VF=5 USNIC_TD_CQ_PER_VF=7
: > "$USNIC_TD_CONTROL"
USNIC_TD_STRICT=error timeout 120 "$out/prov_check" > "$tmp/check.out" 2> "$tmp/check.err"
st=$?
grep -E '^(PASS|FAIL): ' "$tmp/check.out"
pass=$((pass + $(grep -c '^PASS: ' "$tmp/check.out")))
fail=$((fail + $(grep -c '^FAIL: ' "$tmp/check.out")))
if [ $st -ne 0 ] && ! grep -q '^FAIL: ' "$tmp/check.out"; then
    result 1 "prov_check exited with status $st"
    tail -n 20 "$tmp/check.err"
fi
has "^USNIC-TD VIOLATION: fi_send: buffer .* desc == NULL" "$tmp/check.err"
result $? "the violations were printed on stderr as \"USNIC-TD VIOLATION: ...\""

USNIC_TD_STRICT=error USNIC_TD_REQUIRE_PREFIX=0 timeout 60 "$out/prov_check" noprefix \
    > "$tmp/np.out" 2> "$tmp/np.err"
st=$?
grep -E '^(PASS|FAIL): ' "$tmp/np.out"
pass=$((pass + $(grep -c '^PASS: ' "$tmp/np.out")))
fail=$((fail + $(grep -c '^FAIL: ' "$tmp/np.out")))
[ $st -eq 0 ] || grep -q '^FAIL: ' "$tmp/np.out" || result 1 "prov_check noprefix exited with $st"

# ---- devices: two VFs, one of them down when the process first looks
vfs="usnic_0=127.0.0.1/8:lo:1500:40000,usnic_1=127.1.0.1/16:lo:9000:10000"
USNIC_TD_VFS=$vfs USNIC_TD_CONTROL=/nonexistent "$out/prov_check" listing > "$tmp/l1.txt" 2>&1
has "^usnic_0 127.0.0.0/8 1536$" "$tmp/l1.txt" && has "^usnic_1 127.1.0.0/16 9036$" "$tmp/l1.txt"
result $? "USNIC_TD_VFS: two devices; MTU 9000 gives max_msg_size 9036, fabric 127.1.0.0/16"
echo "link usnic_1 down" > "$tmp/control2"
USNIC_TD_VFS=$vfs USNIC_TD_CONTROL=$tmp/control2 "$out/prov_check" listing > "$tmp/l2.txt" 2>&1
has "^usnic_0 " "$tmp/l2.txt" && ! has "^usnic_1 " "$tmp/l2.txt"
result $? "a device whose link is down at the first fi_getinfo is not offered"

# ---- ABI of btl_usnic_fi_ext.h
# Against libfabric's own fi_ext_usnic.h where a libfabric source tree is at
# hand (LIBFABRIC_SRC, or /tmp/libfabric-*), else against the layout
# recorded from libfabric 1.17.0's header (fi_ext_usnic-1.17.0.layout):
# this network serves no Debian source archives.
src=${LIBFABRIC_SRC:-}
if [ -z "$src" ]; then
    for d in /tmp/libfabric-*/; do
        [ -f "$d/prov/usnic/src/fi_ext_usnic.h" ] && src=$d && break
    done
fi
if [ -n "$src" ]; then
    "$here/abi_check.sh" "$src" > "$tmp/abi.txt" 2>&1
    st=$?
    what="fi_ext_usnic.h of $src"
else
    "$here/abi_check.sh" --layout "$here/fi_ext_usnic-1.17.0.layout" > "$tmp/abi.txt" 2>&1
    st=$?
    what="the layout recorded from libfabric 1.17.0"
fi
if [ $st -eq 77 ]; then
    echo "SKIP: abi_check: nothing to compare btl_usnic_fi_ext.h with"
else
    result $st "abi_check: btl_usnic_fi_ext.h matches $what"
    [ $st -eq 0 ] || cat "$tmp/abi.txt"
fi
# the comparison fails on a layout that differs in one field's size
sed 's/^\(fi_usnic_info  *ui\.v2  *offset   8 size\) 200$/\1 204/' \
    "$here/fi_ext_usnic-1.17.0.layout" > "$tmp/bad.layout"
! cmp -s "$here/fi_ext_usnic-1.17.0.layout" "$tmp/bad.layout" &&
    ! "$here/abi_check.sh" --layout "$tmp/bad.layout" > "$tmp/abi-bad.txt" 2>&1 &&
    grep -q '^FAIL: abi_check' "$tmp/abi-bad.txt" && grep -q '^-fi_usnic_info  *ui.v2 .*size 204' "$tmp/abi-bad.txt"
result $? "abi_check: a layout with ui.v2 4 bytes larger is reported as different"

# ---- fi_pingpong from libfabric-bin
if command -v fi_pingpong > /dev/null; then
    port=$((40000 + $$ % 20000))
    : > "$tmp/pp.log"
    USNIC_TD_LOG=$tmp/pp.log USNIC_TD_STRICT=warn USNIC_TD_CONTROL= \
        timeout 60 fi_pingpong -p usnic -e dgram -B $port -I 20 -c > "$tmp/pp_srv.txt" 2>&1 &
    pp_pid=$!
    sleep 0.5
    USNIC_TD_LOG=$tmp/pp.log USNIC_TD_STRICT=warn USNIC_TD_CONTROL= \
        timeout 60 fi_pingpong -p usnic -e dgram -P $port -I 20 -c 127.0.0.1 > "$tmp/pp_cli.txt" 2>&1
    st=$?
    wait "$pp_pid"
    pp_pid=
    [ $st -eq 0 ] && has "^1k " "$tmp/pp_cli.txt"
    result $? "fi_pingpong -p usnic -e dgram -c (data checked) runs against the double"
    n=$(grep -c "VIOLATION" "$tmp/pp.log")
    echo "NOTE: fi_pingpong contract violations seen by the double: $n"
    grep "VIOLATION" "$tmp/pp.log" | sed 's/^/NOTE:   /' | sort -u
else
    echo "SKIP: fi_pingpong not installed (libfabric-bin)"
fi

echo "t_prov: $pass passed, $fail failed"
[ $fail -eq 0 ]
