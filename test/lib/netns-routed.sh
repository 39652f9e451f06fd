# shellcheck shell=bash
# A routed variant of the network-namespace test bed (test/lib/netns.sh):
# every host on its own subnet, the head namespace routing between them.
# Source after test/lib/mpitest.sh and test/lib/netns.sh.
#
#   head  (usnic-mh<pid>-head): runs mpirun and is the router
#         (net.ipv4.ip_forward=1): one veth vhN per host, with address
#         10.212.N.1/24
#   hosts h1, h2, ... : NSB_DEV (eth0) with address 10.212.N.(10+N)/24 and
#         a default route via 10.212.N.1
#
# Nothing of netns.sh changes: this file only gives its variables and
# nsbed_addr the routed values, so nsbed_hostfile, nsbed_run_mpi,
# nsbed_start_mpi/nsbed_wait_mpi, nsbed_check_placement, nsbed_ifstat,
# nsbed_leftovers and nsbed_down work on this bed as they do on the
# bridged one.  ORTE and the MPI traffic use NSB_CIDR (10.212.0.0/16),
# which covers every host's subnet: mpirun reaches each host directly (head
# is on every subnet), host-to-host traffic crosses the router.
#
#   nsbed_routed_up NHOSTS   build it (reports FAIL and returns 1 if it cannot)
#   nsbed_router_ifstat HOST COUNTER
#                            a statistics counter of head's veth to HOST
#   nsbed_host_mtu HOST MTU  set the MTU of the link to HOST (both ends)

NSB_RNET=10.212
# shellcheck disable=SC2034 # the values netns.sh reads
{
    NSB_PREFIX=24
    NSB_CIDR=$NSB_RNET.0.0/16
    NSB_HEAD_ADDR=
    NSB_MTU=1500
}

nsbed_addr() { echo "$NSB_RNET.$1.$((10 + $1))"; }
nsbed_gateway() { echo "$NSB_RNET.$1.1"; }

nsbed_routed_up() {
    local n=$1 h ns
    _nsbed_preflight
    if [ -z "$NSB_WHY" ]; then
        _nsbed_step "creating namespace $NSB_HEAD" ip netns add "$NSB_HEAD" &&
            NSB_MADE+=("$NSB_HEAD") &&
            _nsbed_step "loopback up in head" ip -n "$NSB_HEAD" link set lo up &&
            _nsbed_step "forwarding in head" \
                ip netns exec "$NSB_HEAD" sysctl -qw net.ipv4.ip_forward=1
    fi
    for ((h = 1; h <= n && ${#NSB_WHY} == 0; h++)); do
        ns=$(nsbed_ns "$h")
        _nsbed_step "creating namespace $ns" ip netns add "$ns" &&
            NSB_MADE+=("$ns") &&
            _nsbed_step "loopback up in h$h" ip -n "$ns" link set lo up &&
            _nsbed_step "veth pair for h$h" ip -n "$NSB_HEAD" link add "vh$h" \
                mtu "$NSB_MTU" type veth peer name "$NSB_DEV" mtu "$NSB_MTU" netns "$ns" &&
            _nsbed_step "router address toward h$h" \
                ip -n "$NSB_HEAD" addr add "$(nsbed_gateway "$h")/$NSB_PREFIX" dev "vh$h" &&
            _nsbed_step "vh$h up" ip -n "$NSB_HEAD" link set "vh$h" up &&
            _nsbed_step "address of h$h" \
                ip -n "$ns" addr add "$(nsbed_addr "$h")/$NSB_PREFIX" dev "$NSB_DEV" &&
            _nsbed_step "$NSB_DEV up in h$h" ip -n "$ns" link set "$NSB_DEV" up &&
            _nsbed_step "default route of h$h" \
                ip -n "$ns" route add default via "$(nsbed_gateway "$h")" dev "$NSB_DEV" &&
            NSB_HOSTS=$h
    done
    if [ -z "$NSB_WHY" ]; then
        _nsbed_routed_wait || NSB_WHY="hosts cannot reach each other through head: $NSB_WHY"
    fi
    if [ -n "$NSB_WHY" ]; then
        fail "routed test bed" "cannot build the routed network-namespace test bed: $NSB_WHY"
        nsbed_down
        return 1
    fi
    _nsbed_rsh_map "$n"
    echo "    routed test bed: head $NSB_HEAD routes between" \
         "$(for ((h = 1; h <= n; h++)); do printf '%s.%d.0/%d ' "$NSB_RNET" "$h" "$NSB_PREFIX"; done)" \
         "(ip_forward=1), hosts: $NETNS_RSH_MAP"
}

# _nsbed_routed_wait: both ends of every veth up, and h1's kernel routes to
# every other host through the router (the MPI jobs prove the path itself).
_nsbed_routed_wait() {
    local h t a b route
    for ((h = 1; h <= NSB_HOSTS; h++)); do
        for ((t = 0; t < 50; t++)); do
            a=$(ip -n "$NSB_HEAD" -o link show "vh$h" 2>/dev/null)
            b=$(nsbed_exec "$h" ip -o link show "$NSB_DEV" 2>/dev/null)
            case "$a $b" in *"state UP"*"state UP"*) break ;; esac
            sleep 0.1
        done
        case "$a $b" in
            *"state UP"*"state UP"*) ;;
            *) NSB_WHY="link to h$h not up: $a / $b"; return 1 ;;
        esac
    done
    for ((h = 2; h <= NSB_HOSTS; h++)); do
        route=$(nsbed_exec 1 ip route get "$(nsbed_addr "$h")" from "$(nsbed_addr 1)" 2>&1)
        case $route in
            *"via $(nsbed_gateway 1) dev $NSB_DEV"*) ;;
            *) NSB_WHY="h1's route to h$h: $route"; return 1 ;;
        esac
    done
}

# nsbed_router_ifstat HOST COUNTER: statistics counter (tx_bytes, ...) of
# head's veth vhHOST, the router's side of the link to HOST.
nsbed_router_ifstat() {
    ip netns exec "$NSB_HEAD" cat "/sys/class/net/vh$1/statistics/$2" 2>/dev/null || echo 0
}

# nsbed_host_mtu HOST MTU: set the MTU of both ends of the link to HOST.
nsbed_host_mtu() {
    ip -n "$NSB_HEAD" link set "vh$1" mtu "$2" && nsbed_exec "$1" ip link set "$NSB_DEV" mtu "$2"
}
