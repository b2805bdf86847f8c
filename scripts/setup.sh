# Sourced by scripts/main.sh and scripts/test.sh (not run on its own).
#
# lockstep_setup [TARGET...]: installs the Debian packages lockstep needs (only those missing),
# makes the project's Python environment (.venv, with the pinned torch 2.x of
# scripts/requirements.txt) when it is missing or its pins changed, configures ./build with CMake
# and Ninja the first time, then builds incrementally: TARGETs, or everything when none are given.
# Meant for Debian 12, run as root (or with sudo available).
#
# Settings (environment): LOCKSTEP_BUILD_DIR (default: <repo>/build), LOCKSTEP_BUILD_TYPE (default
# RelWithDebInfo, used when configuring), LOCKSTEP_JOBS (default: nproc), LOCKSTEP_BUILD_SANITIZE
# (a -fsanitize= value for the whole build, used when configuring; scripts/test.sh sets it),
# LOCKSTEP_VENV (default: <repo>/.venv), LOCKSTEP_BASE_PYTHON (the interpreter the environment is
# made from; default: Debian's /usr/bin/python3, 3.11, whatever python3 comes first on PATH).

LOCKSTEP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCKSTEP_BUILD_DIR="${LOCKSTEP_BUILD_DIR:-$LOCKSTEP_ROOT/build}"
LOCKSTEP_VENV="${LOCKSTEP_VENV:-$LOCKSTEP_ROOT/.venv}"
LOCKSTEP_BASE_PYTHON="${LOCKSTEP_BASE_PYTHON:-/usr/bin/python3}"

# Debian packages needed to build and test. Later parts of the project append theirs here
# (libopenmpi-dev). PyTorch is not among them: it comes from the Python package registry into
# .venv (lockstep_install_python), as its users install it; its wheel's LibTorch builds
# lockstep_torch and the main job, which trains on dataset-fashion-mnist. python3-venv and
# python3-dev make that environment and build the Python package (lockstep as a
# torch.distributed backend) against Debian's python3.
# libssl-dev: OpenSSL's libcrypto, for the HMAC that authenticates a job's connections.
# doxygen builds the API reference (the `docs` target, tested by CTest's api_reference).
# clang and libclang-rt-14-dev (libFuzzer and clang's sanitizers) build the fuzz harnesses
# (scripts/fuzz.sh, which scripts/test.sh runs briefly); clang-format-14 checks the sources'
# formatting (scripts/format_check.sh, CTest's `format`). iproute2 makes the network-namespace
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
  libcli11-dev
  dataset-fashion-mnist
  libopenmpi-dev
  openmpi-bin
  python3-venv
  python3-dev
  doxygen
  clang
  libclang-rt-14-dev
  clang-format-14
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

# The project's Python environment: LOCKSTEP_VENV, made from LOCKSTEP_BASE_PYTHON, with
# scripts/requirements.txt installed. A copy of the pins inside it tells whether they changed
# since; only then does pip run (a fresh machine downloads about 3 GiB: torch's CUDA wheels).
lockstep_install_python() {
  local pins="$LOCKSTEP_ROOT/scripts/requirements.txt" stamp="$LOCKSTEP_VENV/lockstep-requirements.txt"
  if [[ -f "$stamp" ]] && cmp -s "$pins" "$stamp"; then
    return 0
  fi
  if [[ ! -x "$LOCKSTEP_VENV/bin/python" ]]; then
    if ! "$LOCKSTEP_BASE_PYTHON" -c "import venv, ensurepip" 2>/dev/null; then
      echo "lockstep setup: error: LOCKSTEP_BASE_PYTHON=$LOCKSTEP_BASE_PYTHON cannot make a" \
        "virtual environment (no such interpreter, or no venv/ensurepip: Debian's python3-venv)" >&2
      return 1
    fi
    echo "lockstep setup: making the Python environment $LOCKSTEP_VENV from $LOCKSTEP_BASE_PYTHON"
    "$LOCKSTEP_BASE_PYTHON" -m venv "$LOCKSTEP_VENV"
  fi
  echo "lockstep setup: installing scripts/requirements.txt into $LOCKSTEP_VENV"
  "$LOCKSTEP_VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
    --retries 5 --timeout 60 -r "$pins"
  cp "$pins" "$stamp"
}

lockstep_build() {
  if [[ ! -f "$LOCKSTEP_BUILD_DIR/build.ninja" ]]; then
    cmake -S "$LOCKSTEP_ROOT" -B "$LOCKSTEP_BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE="${LOCKSTEP_BUILD_TYPE:-RelWithDebInfo}" \
      -DLOCKSTEP_PYTHON_EXECUTABLE="$LOCKSTEP_VENV/bin/python" \
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
  lockstep_install_python
  lockstep_build "$@"
}
