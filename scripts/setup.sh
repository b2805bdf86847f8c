# Sourced by scripts/main.sh and scripts/test.sh (not run on its own).
#
# lockstep_setup [TARGET...]: installs the Debian packages lockstep needs (only those missing),
# configures ./build with CMake and Ninja the first time, then builds incrementally: TARGETs, or
# everything when none are given. Meant for Debian 12, run as root (or with sudo available).
#
# Settings (environment): LOCKSTEP_BUILD_DIR (default: <repo>/build), LOCKSTEP_BUILD_TYPE (default
# RelWithDebInfo, used when configuring), LOCKSTEP_JOBS (default: nproc), LOCKSTEP_BUILD_SANITIZE
# (a -fsanitize= value for the whole build, used when configuring; scripts/test.sh sets it).

LOCKSTEP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCKSTEP_BUILD_DIR="${LOCKSTEP_BUILD_DIR:-$LOCKSTEP_ROOT/build}"

# Debian packages needed to build and test. Later parts of the project append theirs here
# (libopenmpi-dev). libtorch-dev builds lockstep_torch and the main job, which trains on
# dataset-fashion-mnist. python3-torch (Debian's PyTorch, for /usr/bin/python3) runs the tests of
# unmodified PyTorch scripts under `lockstep run`; with python3-dev and pybind11-dev it also builds
# the Python package (lockstep as a torch.distributed backend), tested with python3-pytest.
# libssl-dev: OpenSSL's libcrypto, for the HMAC that authenticates a job's connections.
# doxygen builds the API reference (the `docs` target, tested by CTest's api_reference).
# clang and libclang-rt-14-dev (libFuzzer and clang's sanitizers) build the fuzz harnesses
# (scripts/fuzz.sh, which scripts/test.sh runs briefly). iproute2 makes the network-namespace
# hosts of the multi-host tests (scripts/netns_hosts.sh).
LOCKSTEP_APT_PACKAGES=(
  cmake
  ninja-build
  g++
  libgtest-dev
  libgmock-dev
  pkg-config
  zlib1g-dev
  libssl-dev
  libbenchmark-dev
  nlohmann-json3-dev
  libtorch-dev
  dataset-fashion-mnist
  libopenmpi-dev
  openmpi-bin
  python3-torch
  python3-dev
  pybind11-dev
  python3-pytest
  doxygen
  clang
  libclang-rt-14-dev
  iproute2
)

lockstep_package_installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

lockstep_install_packages() {
  local missing=() package
  for package in "${LOCKSTEP_APT_PACKAGES[@]}"; do
    lockstep_package_installed "$package" || missing+=("$package")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "lockstep setup: installing missing Debian packages: ${missing[*]}"
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "lockstep setup: error: packages ${missing[*]} are missing; run as root or install them" >&2
      return 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${missing[@]}"
}

lockstep_build() {
  if [[ ! -f "$LOCKSTEP_BUILD_DIR/build.ninja" ]]; then
    cmake -S "$LOCKSTEP_ROOT" -B "$LOCKSTEP_BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE="${LOCKSTEP_BUILD_TYPE:-RelWithDebInfo}" \
      -DLOCKSTEP_SANITIZE="${LOCKSTEP_BUILD_SANITIZE:-}"
  fi
  local targets=()
  (($# > 0)) && targets=(--target "$@")
  cmake --build "$LOCKSTEP_BUILD_DIR" -j "${LOCKSTEP_JOBS:-$(nproc)}" "${targets[@]}"
}

# What a sanitized build's tests run with: every report fails the test (ASan aborts, UBSan halts
# with a stack), and leak checking is off (it needs ptrace, which containers often forbid, and
# python3 and LibTorch keep memory to the end on purpose).
lockstep_sanitizer_environment() {
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
}

lockstep_setup() {
  lockstep_install_packages
  lockstep_build "$@"
}
