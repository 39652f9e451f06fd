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
