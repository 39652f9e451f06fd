#!/usr/bin/env bash
# Install the Debian 12 packages btl/usnic needs to build, run and test,
# when any is missing (one quiet "apt-get update", then "apt-get install").
# Needs root (or password-less sudo).  Exit status non-zero on failure.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
    libopenmpi-dev openmpi-bin libhwloc-dev
    libfabric-dev libfabric-bin
    autoconf automake libtool pkg-config make gcc
    valgrind gnuplot-nox clang-format clang libclang-rt-14-dev
    libnetfilter-queue-dev nftables iptables iproute2
    liburing-dev
)

missing=()
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
((${#missing[@]} == 0)) && exit 0

sudo=()
if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || { echo "install-deps: missing ${missing[*]}; run as root" >&2; exit 1; }
    sudo=(sudo -n env DEBIAN_FRONTEND=noninteractive)
fi
echo "install-deps: installing ${missing[*]}" >&2
log=$(mktemp)
if ! "${sudo[@]}" apt-get update -qq >>"$log" 2>&1 ||
   ! "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >>"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "install-deps: apt-get failed" >&2
    exit 1
fi
rm -f "$log"
