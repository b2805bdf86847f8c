#!/usr/bin/env bash
# Builds everything (installing missing Debian packages first) and runs the whole test suite.
# Exits non-zero when any test fails. Extra arguments go to ctest (e.g. scripts/test.sh -R bench).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup
ctest --test-dir "$LOCKSTEP_BUILD_DIR" --output-on-failure --no-tests=error \
  -j "${LOCKSTEP_JOBS:-$(nproc)}" "$@"
