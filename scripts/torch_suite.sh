#!/usr/bin/env bash
# torch's own DistributedTest suite (tests/c10d/torch_suite.py) in full, as conformance: at world
# sizes 2 and 3, torch's gloo (the baseline) and lockstep in gloo's place, then a table of the
# counts and every test that gloo passes and lockstep does not. Each test spawns its ranks, a few
# seconds: about 50 minutes a run on 2 cores, 20 with --cpu-only (no CUDA, NCCL or GPU tests,
# which skip here anyway).
#   scripts/torch_suite.sh [--worlds "2 3"] [--modes "real-gloo gloo"] [--cpu-only] [-- unittest arguments]
# Logs go to <build>/torch_suite/<mode>-w<world>.log.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
worlds="2 3" modes="real-gloo gloo" extra=() cpu_only=()
while (($#)); do
  case $1 in
    --worlds) worlds=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --cpu-only) cpu_only=(--cpu-only); shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "torch_suite.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
lockstep_setup lockstep_cli lockstep_python
out=$LOCKSTEP_BUILD_DIR/torch_suite
mkdir -p "$out"
for world in $worlds; do
  for mode in $modes; do
    echo "torch_suite: $mode at world $world (log: $out/$mode-w$world.log)"
    (cd "$out" && PYTHONPATH="$LOCKSTEP_BUILD_DIR/python" OMP_NUM_THREADS=1 LOCKSTEP_TIMEOUT=120 \
      "$LOCKSTEP_VENV/bin/python" "$LOCKSTEP_ROOT/tests/c10d/torch_suite.py" --world "$world" \
      --as "$mode" "${cpu_only[@]}" -v "${extra[@]}" > "$out/$mode-w$world.log" 2>&1) || true
  done
done
exec "$LOCKSTEP_VENV/bin/python" "$LOCKSTEP_ROOT/tests/c10d/torch_suite_table.py" "$out"
