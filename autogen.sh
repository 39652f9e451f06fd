#!/bin/sh
#
# Generate the standalone build system (configure, Makefile.in, ...).
#
#   ./autogen.sh && ./configure && make && make install
#
# Not needed inside an Open MPI source tree: there Open MPI's own
# autogen.pl picks up configure.m4 and Makefile.am.
#

set -e

cd "$(dirname "$0")"

for tool in autoconf automake libtoolize; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "autogen.sh: '$tool' not found." >&2
        echo "autogen.sh: install autoconf, automake and libtool" \
            "(Debian/Ubuntu: apt-get install autoconf automake libtool pkg-config)." >&2
        exit 1
    fi
done

mkdir -p m4 config

autoreconf --force --install "$@"

echo
echo "autogen.sh: done.  Now run ./configure (see ./configure --help)."
