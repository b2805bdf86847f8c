#!/usr/bin/env bash
# Builds everything (installing missing Debian packages first) and runs the whole test suite, then
# the group tests again under AddressSanitizer (scripts/sanitize.sh), then every fuzz harness
# briefly (scripts/fuzz.sh --brief, in <build>/fuzz). Exits non-zero when any test fails or a
# harness crashes. Extra arguments go to ctest (e.g. scripts/test.sh -R bench), and skip the ASan
# and fuzz runs, as do LOCKSTEP_SKIP_ASAN=1 and LOCKSTEP_SKIP_FUZZ=1.
#
# LOCKSTEP_SANITIZE=address,undefined (any -fsanitize= value gcc takes) instead builds the whole
# project with that sanitizer in its own folder, <build>/sanitize-<value>, and runs the whole
# suite there: every test, the Python ones with the sanitizer's runtime preloaded into python3. A report fails its test. docs/sanitizers.md says more.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if [[ -n "${LOCKSTEP_SANITIZE:-}" ]]; then
  [[ "$LOCKSTEP_SANITIZE" =~ ^[a-z,]+$ ]] || {
    echo "test.sh: LOCKSTEP_SANITIZE must be a -fsanitize= list such as address,undefined," \
      "not '$LOCKSTEP_SANITIZE'" >&2
    exit 2
  }
  LOCKSTEP_BUILD_DIR="$LOCKSTEP_BUILD_DIR/sanitize-${LOCKSTEP_SANITIZE//,/-}"
  LOCKSTEP_BUILD_SANITIZE="$LOCKSTEP_SANITIZE"
  lockstep_sanitizer_environment
  lockstep_setup
  ctest --test-dir "$LOCKSTEP_BUILD_DIR" --output-on-failure --no-tests=error \
    -j "${LOCKSTEP_JOBS:-$(nproc)}" "$@"
  what="the whole suite"
  (($# == 0)) || what="the selected tests"
  echo "test.sh: $what passed under -fsanitize=$LOCKSTEP_SANITIZE ($LOCKSTEP_BUILD_DIR)"
  exit 0
fi
lockstep_setup
ctest --test-dir "$LOCKSTEP_BUILD_DIR" --output-on-failure --no-tests=error \
  -j "${LOCKSTEP_JOBS:-$(nproc)}" "$@"
if (($# == 0)) && [[ "${LOCKSTEP_SKIP_ASAN:-0}" != 1 ]]; then
  bash "$LOCKSTEP_ROOT/scripts/sanitize.sh"
fi
if (($# == 0)) && [[ "${LOCKSTEP_SKIP_FUZZ:-0}" != 1 ]]; then
  LOCKSTEP_FUZZ_BUILD_DIR="${LOCKSTEP_FUZZ_BUILD_DIR:-$LOCKSTEP_BUILD_DIR/fuzz}" \
    bash "$LOCKSTEP_ROOT/scripts/fuzz.sh" --brief
fi
