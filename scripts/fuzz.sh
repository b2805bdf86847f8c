#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang, with AddressSanitizer and UndefinedBehavior-
# Sanitizer) in a build folder of their own, and runs each on its seed corpus (docs/fuzzing.md).
# Exits non-zero when any harness crashes; its input is kept in the crash folder it names.
#
# Usage: bash scripts/fuzz.sh [--runs N | --brief] [HARNESS...]
#   --runs N   each harness for N inputs (default 1000000)
#   --brief    each harness for about 10 s or 20000 inputs, whichever comes first (CI:
#              scripts/test.sh runs this)
#   HARNESS    only these (names as in fuzz/: store_request, idx, ...); default: every one built
# Settings (environment): LOCKSTEP_FUZZ_BUILD_DIR (default <repo>/build/fuzz), LOCKSTEP_JOBS
# (default: nproc), LOCKSTEP_FUZZ_WITH_TORCH=1 (also build checkpoint_fuzz, which needs LibTorch).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${LOCKSTEP_FUZZ_BUILD_DIR:-$root/build/fuzz}"

runs=1000000
brief=0
harnesses=()
while (($# > 0)); do
  case "$1" in
    --runs)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --runs needs a number" >&2; exit 2; }
      runs="$2"
      shift 2
      ;;
    --brief) brief=1; shift ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done

for tool in clang clang++; do
  command -v "$tool" >/dev/null || {
    echo "fuzz.sh: $tool not found; install Debian's clang and libclang-rt-14-dev" >&2
    exit 1
  }
done

if [[ ! -f "$build_dir/build.ninja" ]]; then
  # The harnesses and the parsers they reach only: no tests, examples, MPI, NCCL or Python.
  torch=OFF
  [[ "${LOCKSTEP_FUZZ_WITH_TORCH:-0}" == 1 ]] && torch=ON
  CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLOCKSTEP_FUZZ=ON -DLOCKSTEP_WITH_TORCH="$torch" -DLOCKSTEP_WITH_PYTHON=OFF \
    -DLOCKSTEP_WITH_MPI=OFF -DLOCKSTEP_WITH_NCCL=OFF -DLOCKSTEP_BUILD_TESTS=OFF \
    -DLOCKSTEP_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$build_dir" -j "${LOCKSTEP_JOBS:-$(nproc)}" --target fuzzers

if ((${#harnesses[@]} == 0)); then
  for exe in "$build_dir"/fuzz/*_fuzz; do
    [[ -x "$exe" ]] && harnesses+=("$(basename "$exe" _fuzz)")
  done
fi

crash_dir="$build_dir/crashes"
mkdir -p "$crash_dir" "$build_dir/logs"
# Leak checks need ptrace, which containers often forbid; memory errors and UB are the point.
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
if ((brief)); then
  limits=(-runs=20000 -max_total_time=10)
else
  limits=(-runs="$runs")
fi

failed=()
printf '%-20s %12s %10s %10s\n' harness inputs seconds 'inputs/s'
for name in "${harnesses[@]}"; do
  exe="$build_dir/fuzz/${name}_fuzz"
  [[ -x "$exe" ]] || { echo "fuzz.sh: no harness $name (in $build_dir/fuzz)" >&2; exit 2; }
  # New inputs go to a working corpus in the build folder; the committed seeds stay as they are.
  corpus="$build_dir/corpus/$name"
  mkdir -p "$corpus"
  log="$build_dir/logs/$name.log"
  start=$(date +%s%N)
  status=0
  # explain's signatures are short lines, and std::regex backtracks: on inputs of kilobytes the
  # harness ran 129 inputs/s, at 256 bytes 2,100, so 10^6 inputs take minutes, not hours.
  extra=()
  [[ "$name" == explain_signatures ]] && extra=(-max_len=256)
  "$exe" "${limits[@]}" "${extra[@]}" -timeout=25 -print_final_stats=1 \
    -artifact_prefix="$crash_dir/$name-" "$corpus" "$root/fuzz/corpus/$name" >"$log" 2>&1 ||
    status=$?
  tenths=$((($(date +%s%N) - start) / 100000000))
  inputs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate='?'
  [[ -n "$inputs" ]] && ((tenths > 0)) && rate=$((inputs * 10 / tenths))
  printf '%-20s %12s %8d.%d %10s\n' "$name" "${inputs:-?}" $((tenths / 10)) $((tenths % 10)) \
    "$rate"
  if ((status != 0)); then
    failed+=("$name")
    grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: |.*runtime error|artifact_prefix|Test unit written)' \
      "$log" | head -8 | sed 's/^/    /' >&2
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz.sh: ${failed[*]} crashed; the inputs are in $crash_dir, the logs in $build_dir/logs" >&2
  echo "fuzz.sh: reproduce with $build_dir/fuzz/<name>_fuzz <input>" >&2
  exit 1
fi
echo "fuzz.sh: ${#harnesses[@]} harnesses ran without a crash"
