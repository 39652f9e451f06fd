# Shell helpers shared by the benchmark scripts (source it; needs HERE set to
# the bench/ directory).

# Which usnic BTL is measured: the installed .so (hash, time) and the state
# of the source tree; compared before/after to catch a reinstall mid-run.
btl_identity() {
    local dir so top head dirty
    dir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
    so=$dir/mca_btl_usnic.so
    if [ -f "$so" ]; then
        printf '%s (sha256 %s, installed %s)' "$so" "$(sha256sum "$so" | cut -c1-12)" \
            "$(date -r "$so" '+%F %T')"
    else
        printf 'mca_btl_usnic.so not found in %s' "${dir:-?}"
    fi
    top=$(cd "$HERE/.." && pwd)
    if head=$(git -C "$top" rev-parse --short HEAD 2>/dev/null); then
        dirty=$(git -C "$top" status --porcelain --untracked-files=no -- . ':(exclude)bench' 2>/dev/null | wc -l)
        printf '; source tree %s at %s' "$top" "$head"
        [ "$dirty" -gt 0 ] && printf ' + %s modified file(s) outside bench/' "$dirty"
    fi
    echo
}

# read_running: RUNNING = number of runnable tasks right now (includes the
# reading shell)
read_running() {
    local k v rest
    RUNNING=0
    while read -r k v rest; do
        if [ "$k" = procs_running ]; then RUNNING=$v; return; fi
    done </proc/stat
}

# progress TEXT: a transient status line on stderr (a terminal line that
# the next call overwrites; plain lines when stderr is not a terminal)
progress() {
    if [ -t 2 ]; then printf '\r\033[K%s' "$*" >&2; else printf '%s\n' "$*" >&2; fi
}

# progress_done: clear the status line (on a terminal; nothing otherwise)
progress_done() {
    [ -t 2 ] && printf '\r\033[K' >&2
    return 0
}

# wait_idle: wait (up to WAIT_IDLE seconds; 0 or unset = don't) until no
# other task competes for the CPUs
wait_idle() {
    [ "${WAIT_IDLE:-0}" -gt 0 ] 2>/dev/null || return 0
    local deadline=$(( $(date +%s) + WAIT_IDLE )) i sum said=0
    while :; do
        sum=0
        for i in 1 2 3 4; do read_running; sum=$((sum + RUNNING - 1)); sleep 0.25; done
        [ $sum -le 1 ] && return 0    # on average < 0.5 other runnable tasks
        [ "$(date +%s)" -ge $deadline ] && return 0
        if [ -t 2 ] || [ $said = 0 ]; then
            progress "waiting up to ${WAIT_IDLE}s for idle CPUs ($((sum / 4)) other runnable task(s)) ..."
            said=1
        fi
        sleep 2
    done
}

# sampled_run OUT INTERVAL CMD...: run CMD in the background (stdin from
# /dev/null, output appended to OUT; its PID in RUNPID while it runs, for
# the caller's cleanup trap) and sample the runnable tasks every INTERVAL
# seconds until it ends.  Sets RC (its exit status), SAMPLES and
# RUNNABLE_SUM (for the average load during the run), T0 and T1 (start
# and end, date +%s.%N).
sampled_run() {
    local out=$1 interval=$2
    shift 2
    SAMPLES=0
    RUNNABLE_SUM=0
    T0=$(date +%s.%N)
    "$@" </dev/null >>"$out" 2>&1 &
    RUNPID=$!
    while kill -0 "$RUNPID" 2>/dev/null; do
        read_running
        SAMPLES=$((SAMPLES + 1))
        RUNNABLE_SUM=$((RUNNABLE_SUM + RUNNING))
        sleep "$interval"
    done
    wait "$RUNPID"
    RC=$?
    RUNPID=""
    T1=$(date +%s.%N)
}

# netns_pair_up MTU DIR: two namespace hosts (test/lib/netns.sh, sourced
# before) with veths of MTU, the bed's log in DIR/testbed.log (shown if it
# fails: returns 1), and one rank placed on each (netns_bind below).
netns_pair_up() {
    # shellcheck disable=SC2034 # read by nsbed_up
    NSB_MTU=$1
    nsbed_up 2 >"$2/testbed.log" 2>&1 || { cat "$2/testbed.log" >&2; return 1; }
    netns_bind "$2" "$(nsbed_addr 1)" "$(nsbed_addr 2)"
}

# netns_bind DIR H1 H2: how to place one rank on each of two namespace hosts
# (test/lib/netns.sh): a rankfile in DIR puts rank 0 on H1 and rank 1 on H2,
# on different cores as --bind-to core does on one host (each host's daemon
# would otherwise bind its rank to the same first core); with a single CPU
# the ranks are not bound.  Sets BIND (mpirun arguments) and BIND_DESC.
netns_bind() {
    local dir=$1 h1=$2 h2=$3
    if [ "$(nproc)" -ge 2 ]; then
        printf 'rank 0=%s slot=0\nrank 1=%s slot=1\n' "$h1" "$h2" >"$dir/rankfile"
        BIND=(--rankfile "$dir/rankfile")
        BIND_DESC="rank 0 on h1 ($h1) bound to core 0, rank 1 on h2 ($h2) bound to core 1 (rankfile)"
    else
        BIND=(--bind-to none)
        BIND_DESC="rank 0 on h1 ($h1), rank 1 on h2 ($h2), not bound (one CPU)"
    fi
}

# nsbed_remove PROG: remove the test bed nsbed_up made (test/lib/netns.sh;
# every process left in it by pid, then the namespaces), if there is one,
# and say whether any namespace was left behind.
nsbed_remove() {
    local n=${#NSB_MADE[@]} left
    [ "$n" -gt 0 ] || return 0
    nsbed_down
    left=$(ip netns list 2>/dev/null | grep -F -e "$NSB_BASE-")
    if [ -n "$left" ]; then
        echo "$1: WARNING: namespaces left behind: $left" >&2
    else
        echo "# test bed removed ($n namespaces)" >&2
    fi
}

# run_identity ARGS...: what a report needs to be regenerated: INVOCATION
# (the command line as typed, "$0" and ARGS quoted only where the shell
# needs it), INVOKED_IN (the directory) and COMMIT (the short hash of REPO,
# marked when tracked files have uncommitted changes).
shquote() {
    local q="'"
    if [[ $1 =~ ^[A-Za-z0-9_./,:=+%@-]+$ ]]; then printf '%s' "$1"
    else printf "'%s'" "${1//$q/$q\\$q$q}"; fi
}
run_identity() {
    local a
    INVOCATION=$(shquote "$0")
    for a in "$@"; do INVOCATION+=" $(shquote "$a")"; done
    INVOKED_IN=$PWD
    COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null) || COMMIT=unknown
    if [ "$COMMIT" != unknown ] &&
       [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
        COMMIT="$COMMIT (+ uncommitted changes)"
    fi
}

# lo_maxdgram: the largest UDP payload on lo, what usnic uses by default
# there (the interface MTU minus IP and UDP headers, at most 65507).
lo_maxdgram() {
    local mtu d
    mtu=$(cat /sys/class/net/lo/mtu 2>/dev/null)
    case "$mtu" in ''|*[!0-9]*) mtu=65536 ;; esac
    d=$((mtu - 28))
    [ $d -le 65507 ] || d=65507
    echo $d
}
