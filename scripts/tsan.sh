#!/usr/bin/env bash
# ThreadSanitizer over lockstep's threads: builds the core, its CLI (the launcher and its
# supervisor) and four test programs with -fsanitize=thread in <build>/tsan, and runs them:
#   test_group     the progress queue (every collective on tcp, shm and hier, with the watchdog on)
#   test_debug     the watchdog, the flight recorder and the signal dumps
#   test_p2p       the p2p engine, its progress thread and its channels
#   test_launcher  `lockstep run`'s supervisor (its children, restarts, signals, node sync)
# Every process writes its reports under <build>/tsan/reports (TSAN_OPTIONS log_path), so a race
# in a child process (a rank, or the launcher) is caught even when the test that started it
# passes; the script fails when any report was written, and prints them.
#
# Usage: bash scripts/tsan.sh [TEST_PROGRAM...]   (default: the four above)
# Settings: LOCKSTEP_BUILD_DIR as for setup.sh; LOCKSTEP_JOBS (build jobs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
tsan_dir="$LOCKSTEP_BUILD_DIR/tsan"
programs=("$@")
((${#programs[@]} > 0)) || programs=(test_group test_debug test_p2p test_launcher)

if [[ ! -f "$tsan_dir/build.ninja" ]]; then
  # The core only: LibTorch, Python, MPI and NCCL are not built with TSan, and would report the
  # synchronization inside them that TSan cannot see.
  cmake -S "$LOCKSTEP_ROOT" -B "$tsan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLOCKSTEP_SANITIZE=thread -DLOCKSTEP_WITH_TORCH=OFF -DLOCKSTEP_WITH_PYTHON=OFF \
    -DLOCKSTEP_WITH_MPI=OFF -DLOCKSTEP_WITH_NCCL=OFF -DLOCKSTEP_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$tsan_dir" -j "${LOCKSTEP_JOBS:-$(nproc)}" --target lockstep_cli "${programs[@]}"

reports="$tsan_dir/reports"
rm -rf "$reports"
mkdir -p "$reports"
lockstep_sanitizer_environment
# Every process of a test (ranks, the launcher, its children) logs to its own file, named by pid.
# scripts/tsan.supp holds the false positives, each explained. die_after_fork=0: some tests fork
# the (threaded) test program and run a rank in the child, which starts threads of its own; TSan
# refuses that by default, though it goes on checking the child when allowed.
export TSAN_OPTIONS="log_path=$reports/tsan:suppressions=$LOCKSTEP_ROOT/scripts/tsan.supp:die_after_fork=0:$TSAN_OPTIONS"
status=0
for program in "${programs[@]}"; do
  exe="$tsan_dir/tests/$program"
  # One process per test suite: a test that forks the test program and handles signals in the
  # child (SignalDump) cannot run in a process that earlier suites filled with threads, for TSan
  # delivers signals through its own runtime, which a fork of a threaded process leaves broken.
  # The 1 GiB p2p message takes minutes under TSan and adds no thread interleaving of its own.
  while read -r suite; do
    "$exe" --gtest_brief=1 --gtest_filter="$suite.*:-*Gibibyte*" || {
      status=1
      echo "tsan.sh: $program: $suite failed" >&2
    }
  done < <("$exe" --gtest_list_tests | sed -n 's/^\([^ #][^ ]*\)\.\( .*\)\{0,1\}$/\1/p')
done
if compgen -G "$reports/tsan.*" >/dev/null; then
  echo "tsan.sh: ThreadSanitizer reported (each file is one process):" >&2
  for report in "$reports"/tsan.*; do
    echo "== $report" >&2
    head -60 "$report" >&2
  done
  exit 1
fi
((status == 0)) || { echo "tsan.sh: a test failed under ThreadSanitizer" >&2; exit 1; }
echo "tsan.sh: ${programs[*]} passed under ThreadSanitizer, with no report from any process"
