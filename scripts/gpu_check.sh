#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (issue 16): configures a minimal build (nccl on;
# no MPI, LibTorch, Python, examples or docs; nothing fetched from the network), builds only the
# nccl tests, runs them with bounded time, and writes a short report: pass, fail or skip per
# test, the device, the NCCL version, and the latency of a 4-byte all_reduce (blocking, then
# non-blocking communicators). Then, where python3 has a CUDA build of torch 2.x (the GPU
# machine's image: torch 2.11, CUDA 13, Python 3.12), a second build of the Python package and the
# launcher and the LibTorch tests against it: CUDA tensors through the "lockstep" backend and
# beside torch's NCCL ("cpu:lockstep,cuda:nccl"), one rank per GPU, and LibTorch DDP with CUDA
# parameters (tests/torch/ddp_cuda_test.cc). Whole run under 10 minutes; on a machine without a
# GPU it runs the CPU tests and reports that the GPU tests skipped.
#
#   scripts/gpu_check.sh                 # report in $OUT/gpu_check_report.txt if OUT is set,
#                                        # else in the build folder
# Environment: LOCKSTEP_GPU_BUILD_DIR (default <repo>/build-gpu-check), LOCKSTEP_JOBS.
# Exit status: 0 when no test failed, 1 when one did, 2 when the build could not be made.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${LOCKSTEP_GPU_BUILD_DIR:-$ROOT/build-gpu-check}"
JOBS="${LOCKSTEP_JOBS:-$(nproc)}"
REPORT="${OUT:-$BUILD}/gpu_check_report.txt"
mkdir -p "$BUILD" "$(dirname "$REPORT")"
LOG="$BUILD/gpu_check.log"
: >"$LOG"
START=$SECONDS

say() { echo "$*" | tee -a "$REPORT"; }
summary() {  # "<STATUS> <test>[ -- <skip reason>]" from gtest's output
  awk '/^\[ RUN      \] /{cur=$4; grab=0; next}
       / Skipped$/{grab=1; next}
       grab==1{reason[cur]=$0; grab=0}
       /^\[       OK \] /{print "PASS", $4}
       /^\[  FAILED  \] .*\(/{print "FAIL", $4}
       /^\[  SKIPPED \] .*\(/{r=reason[$4]; print "SKIP", $4 (r == "" ? "" : " -- " r)}' "$1"
}
: >"$REPORT"
say "lockstep gpu_check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"

# --- The machine --------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  say "device: $(nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | paste -sd ';' -)"
else
  say "device: none (nvidia-smi sees no GPU); GPU tests will skip"
fi
NCCL_H=""
for dir in "${NCCL_HOME:-/nonexistent}/include" /usr/local/cuda/include /usr/include; do
  [[ -f "$dir/nccl.h" ]] && NCCL_H="$dir/nccl.h" && break
done
if [[ -n "$NCCL_H" ]]; then
  v() { sed -n "s/^#define NCCL_$1 *\([0-9]*\).*/\1/p" "$NCCL_H" | head -1; }
  say "nccl: $(v MAJOR).$(v MINOR).$(v PATCH) ($NCCL_H)"
else
  say "nccl: nccl.h not found (set NCCL_HOME); the nccl backend cannot be built"
fi

# --- Build: only what the nccl tests need, bounded -----------------------------------------------
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
if ! timeout 120 cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLOCKSTEP_WITH_NCCL=ON -DLOCKSTEP_WITH_MPI=OFF -DLOCKSTEP_WITH_TORCH=OFF \
    -DLOCKSTEP_WITH_PYTHON=OFF -DLOCKSTEP_BUILD_EXAMPLES=OFF >>"$LOG" 2>&1; then
  say "build: cmake configure FAILED (see $LOG; needs CMake, GTest and nlohmann_json installed)"
  exit 2
fi
if ! grep -q "lockstep: nccl backend enabled" "$LOG"; then
  say "build: CMake did not find CUDA and NCCL; the nccl backend is not built (see $LOG)"
  exit 2
fi
if ! timeout 330 cmake --build "$BUILD" --target test_backends_nccl -j "$JOBS" >>"$LOG" 2>&1; then
  say "build: test_backends_nccl FAILED or ran past 330 s (see $LOG)"
  exit 2
fi
say "build: test_backends_nccl in $((SECONDS - START)) s"

# --- Run, bounded ----------------------------------------------------------------------------------
TEST_BIN="$BUILD/tests/test_backends_nccl"
RUN_OUT="$BUILD/gpu_check_tests.txt"
LEFT=$((570 - (SECONDS - START)))  # the whole script stays under 10 minutes
((LEFT < 60)) && LEFT=60
LOCKSTEP_TIMEOUT=60 timeout --kill-after=10 "$((LEFT - 40))" "$TEST_BIN" --gtest_color=no \
  >"$RUN_OUT" 2>&1
RC=$?
((RC == 124 || RC == 137)) && say "tests: the run passed its time limit ($((LEFT - 40)) s) and was stopped"

# The non-blocking latency, for comparison (a few seconds at most).
NB_OUT="$BUILD/gpu_check_nonblocking.txt"
LOCKSTEP_NCCL_NONBLOCKING=1 timeout --kill-after=5 30 "$TEST_BIN" --gtest_color=no \
  --gtest_filter='NcclProbe.LatencyOfAFourByteAllReduce' >"$NB_OUT" 2>&1

# --- torch 2.x on the GPU: the Python package, CUDA tensors, one rank per GPU ---------------------
PY="${LOCKSTEP_GPU_PYTHON:-python3}"
TORCH_OUT="$BUILD/gpu_check_torch.txt"
: >"$TORCH_OUT"
TORCH_RESULT="not run"
GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0)
if ((GPUS == 0)); then
  TORCH_RESULT="skipped ($PY has no CUDA torch, or no GPU)"
elif ((SECONDS - START > 360)); then
  TORCH_RESULT="skipped (no time left: $((SECONDS - START)) s used)"
else
  TBUILD="$BUILD/torch"
  if timeout 90 cmake -S "$ROOT" -B "$TBUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
       -DLOCKSTEP_PYTHON_EXECUTABLE="$(command -v "$PY")" -DLOCKSTEP_WITH_MPI=OFF \
       -DLOCKSTEP_BUILD_EXAMPLES=OFF >>"$TORCH_OUT" 2>&1 &&
     timeout 200 cmake --build "$TBUILD" --target lockstep_python lockstep_cli test_torch \
       -j "$JOBS" >>"$TORCH_OUT" 2>&1; then
    NPROC=$GPUS
    ((NPROC > 2)) && NPROC=2
    TORCH_RESULT="ok"
    for job in cuda_job.py; do
      for init in lockstep "cpu:lockstep,cuda:nccl"; do
        JOB_OUT=$(PYTHONPATH="$TBUILD/python" LOCKSTEP_TIMEOUT=60 LOCKSTEP_CUDA_JOB_INIT="$init" \
          timeout 90 "$TBUILD/lockstep" run --standalone --nproc-per-node "$NPROC" \
          --python "$PY" "$ROOT/tests/c10d/$job" 2>&1)
        JOB_RC=$?
        echo "$JOB_OUT" >>"$TORCH_OUT"
        if ((JOB_RC != 0)) || ! grep -q "CUDA_OK rank=0 init=$init" <<<"$JOB_OUT"; then
          TORCH_RESULT="FAILED ($job, init $init; see $TORCH_OUT)"
          RC=1
        fi
      done
    done
    # LibTorch DDP with CUDA parameters: one rank on GPU 0, against plain training there.
    DDP_OUT="$BUILD/gpu_check_ddp_cuda.txt"
    LOCKSTEP_TIMEOUT=60 timeout --kill-after=5 90 "$TBUILD/tests/test_torch" --gtest_color=no \
      --gtest_filter='DdpCuda.*' >"$DDP_OUT" 2>&1
    DDP_RC=$?
    DDP_RESULTS="$(summary "$DDP_OUT")"
    DDP_RESULT="$(grep -c '^PASS' <<<"$DDP_RESULTS") passed, $(grep -c '^FAIL' <<<"$DDP_RESULTS") failed, $(grep -c '^SKIP' <<<"$DDP_RESULTS") skipped (exit status $DDP_RC; $DDP_OUT)"
    if ((DDP_RC != 0)); then
      RC=1
      TORCH_RESULT="FAILED (LibTorch DDP on CUDA: $DDP_RESULT)"
    fi
  else
    TORCH_RESULT="build FAILED or ran past its limit (see $TORCH_OUT)"
    RC=1
  fi
fi

# --- Report ----------------------------------------------------------------------------------------
RESULTS="$(summary "$RUN_OUT")"
pass=$(grep -c '^PASS' <<<"$RESULTS")
fail=$(grep -c '^FAIL' <<<"$RESULTS")
skip=$(grep -c '^SKIP' <<<"$RESULTS")
say "tests: $pass passed, $fail failed, $skip skipped (exit status $RC)"
[[ -n "$RESULTS" ]] && sed 's/^/  /' <<<"$RESULTS" | tee -a "$REPORT"
lat="$(grep -h -o 'NCCL_LATENCY_US .*' "$RUN_OUT" | head -1)"
lat_nb="$(grep -h -o 'NCCL_LATENCY_US .*' "$NB_OUT" | head -1)"
say "latency, 4-byte all_reduce: ${lat:-not measured (no GPU)}"
say "latency, non-blocking:      ${lat_nb:-not measured (no GPU)}"
mem="$(grep -h -o 'NCCL_MEMORY_GROWTH_MIB .*' "$RUN_OUT" | head -1)"
[[ -n "$mem" ]] && say "device memory over 20 init/destroy rounds: ${mem#NCCL_MEMORY_GROWTH_MIB } MiB"
if ((fail > 0)); then
  say "failures (first lines of each):"
  grep -B2 -A12 '^\[  FAILED  \] .*(' "$RUN_OUT" | head -80 | tee -a "$REPORT" >/dev/null
fi
say "torch 2.x with CUDA tensors (the Python package): $TORCH_RESULT"
say "LibTorch DDP with CUDA parameters (DdpCuda.*): ${DDP_RESULT:-not run}"
((fail == 0)) && [[ "$TORCH_RESULT" == FAILED* || "$TORCH_RESULT" == build* ]] && fail=1
say "total: $((SECONDS - START)) s; full output in $RUN_OUT; report in $REPORT"
((fail == 0 && RC != 124 && RC != 137)) && exit 0 || exit 1
