#!/bin/sh
# Build the unit tests without sanitizers and run them under valgrind
# (memory errors and leaks are failures).
#
#   test/unit/valgrind.sh [build-dir]     (default /tmp/usnic-unit-valgrind)
USNIC_UNIT_MODE=valgrind exec "$(dirname "$0")/build.sh" "$@"
