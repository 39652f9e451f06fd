#!/bin/sh
# Remote-shell agent for the network-namespace test bed (test/lib/netns.sh):
# Open MPI's rsh launcher (--mca plm_rsh_agent) calls it like ssh,
#     netns-rsh.sh [options] HOST COMMAND...
# and it runs COMMAND, joined with spaces and given to sh -c as ssh would
# hand it to the remote shell, inside the network namespace that owns HOST,
# in a private UTS namespace whose hostname is that host's name.
#
# The host table comes from the environment (mpirun passes its own on):
#     NETNS_RSH_MAP="ADDR=NETNS=HOSTNAME ADDR=NETNS=HOSTNAME ..."
# Options before HOST (ssh-style, e.g. -x) are ignored; those of ssh's that
# take a value skip it as well.
while [ $# -gt 0 ]; do
    case $1 in
        -[bcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;
        --) shift; break ;;
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "netns-rsh: usage: netns-rsh.sh [options] HOST COMMAND..." >&2
    exit 255
fi
host=$1
shift
for entry in ${NETNS_RSH_MAP:-}; do
    addr=${entry%%=*}
    rest=${entry#*=}
    [ "$addr" = "$host" ] || continue
    ns=${rest%%=*}
    name=${rest#*=}
    # shellcheck disable=SC2016 # $1 and $2 are expanded by the inner shell
    exec ip netns exec "$ns" unshare --uts \
        sh -c 'hostname "$1" && exec sh -c "$2"' netns-rsh "$name" "$*"
done
echo "netns-rsh: host '$host' is not in NETNS_RSH_MAP (${NETNS_RSH_MAP:-empty})" >&2
exit 255
