#!/usr/bin/env bash
# Builds the core and its group and p2p tests under AddressSanitizer (gcc's -fsanitize=address,
# part of Debian's g++) in <build>/asan, and runs them: every collective on tcp, shm and hier, the
# error paths, dropped in-flight Work handles, small (inline) and large (progress thread), and the
# p2p engine and its channels (the mesh channel's two threads on one socket too), and the rpc
# layer (its codec, frames, and agents across processes), where a use-after-free would show. scripts/test.sh runs it after
# the main suite.
#
# Usage: bash scripts/sanitize.sh [gtest filter]   (default: every test but the 1 GiB message)
# Settings: LOCKSTEP_BUILD_DIR as for setup.sh; LOCKSTEP_SANITIZE (default address, e.g.
# address,undefined).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
asan_dir="$LOCKSTEP_BUILD_DIR/asan"
if [[ ! -f "$asan_dir/build.ninja" ]]; then
  # The core only: LibTorch, Python, MPI and NCCL stay out (their libraries are not built with
  # ASan, and the core is what the handles and buffers live in).
  cmake -S "$LOCKSTEP_ROOT" -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLOCKSTEP_SANITIZE="${LOCKSTEP_SANITIZE:-address}" -DLOCKSTEP_WITH_TORCH=OFF \
    -DLOCKSTEP_WITH_PYTHON=OFF -DLOCKSTEP_WITH_MPI=OFF -DLOCKSTEP_WITH_NCCL=OFF \
    -DLOCKSTEP_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$asan_dir" -j "${LOCKSTEP_JOBS:-$(nproc)}" --target test_group test_p2p test_backends_tcp \
  test_rpc
# Leak checking needs ptrace, which containers often forbid: ASan's memory errors are the point.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
"$asan_dir/tests/test_group" --gtest_brief=1 --gtest_filter="${1:--*Gibibyte*}"
"$asan_dir/tests/test_p2p" --gtest_brief=1 --gtest_filter="${1:-*}"
"$asan_dir/tests/test_backends_tcp" --gtest_brief=1 --gtest_filter="${1:-MeshChannel.*}"
"$asan_dir/tests/test_rpc" --gtest_brief=1 --gtest_filter="${1:-*}"
echo "sanitize.sh: test_group, test_p2p, the mesh channel's and the rpc tests passed under -fsanitize=${LOCKSTEP_SANITIZE:-address}"
