"""Python helpers shared by the benchmark scripts' report generators."""
import os
import re


def build_lines(logdir):
    """The measured build, and a warning if it changed during the run
    (btl_identity in lib.sh writes build-before.txt and build-after.txt)."""

    def rd(n):
        try:
            return open(os.path.join(logdir, n)).read().strip()
        except OSError:
            return ""

    b, a = rd("build-before.txt"), rd("build-after.txt")
    out = [f"usnic BTL measured: {b or 'unknown'}"]
    so = lambda x: x.split(";")[0]
    if a and b and so(a) != so(b):
        out.append(f"WARNING: the installed usnic BTL changed during the run (now: {so(a)}); "
                   "the results mix two builds")
    return out


# ---- the usnic BTL's counters ('[usnic stats]' lines) -----------------------

STATS_MARK = "[usnic stats]"
# identity fields of a stats line, not counters
STATS_IDS = ("host", "pid", "rank", "dev", "provider")


def usnic_stats(text):
    """The '[usnic stats]' lines that btl_usnic_print_stats 1 makes every
    rank print at finalize, one dict per line: every key=value pair, values
    of digits as int.  Fields are found by name, so counters that a newer
    build adds show up by themselves."""
    out = []
    for line in text.splitlines():
        i = line.find(STATS_MARK)
        if i < 0:
            continue
        d = {}
        for tok in line[i + len(STATS_MARK):].split():
            k, sep, v = tok.partition("=")
            if sep and k:
                d[k] = int(v) if v.isdigit() else v
        out.append(d)
    return out


def stats_sum(lines):
    """Every counter summed over stats lines (usnic_stats), in the order the
    first line that has it prints it."""
    tot = {}
    for d in lines:
        for k, v in d.items():
            if isinstance(v, int) and k not in STATS_IDS:
                tot[k] = tot.get(k, 0) + v
    return tot


_RETRANS = re.compile(r"retrans|resen[dt]|tlp|rto|probe|spurious")
_NOT_COUNT = re.compile(r"rtt|(_us|_ns|_ms|_usec|_nsec|_min|_max|_avg|_mean)$")


def retrans_fields(names):
    """The retransmission-related counters among field names (retrans=,
    timeout_retrans=, ... and whatever a newer build adds: tail-loss
    probes, RTO expiries), retrans first, then in the given order; fields
    that look like times (rtt, *_us) are not counters and are left out."""
    names = list(names)
    got = [n for n in names if _RETRANS.search(n) and not _NOT_COUNT.search(n)]
    return (["retrans"] if "retrans" in got else []) + [n for n in got if n != "retrans"]
