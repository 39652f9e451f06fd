"""Python helpers shared by the benchmark scripts' report generators."""
import os


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
