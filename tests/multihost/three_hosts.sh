#!/bin/bash
# Multi-host jobs on real network-namespace hosts (scripts/netns_hosts.sh): 3 hosts, each with its
# own host name and address, `lockstep run --nnodes 3` on each, 2 ranks per host.
#   1. the all_reduce example on `auto`: it picks hier from the hosts' real names, closed forms hold;
#   2. `lockstep bench` across the hosts on tcp and auto (hier), every collective (the matrix), with
#      its closed-form checks;
#   2b. order and size mismatches on hier, within a host and across hosts: a MismatchError on every
#      rank at once (tests/multihost/multihost_job.cc);
#   3. srun's variables set by hand, no launcher: the store's address and port from Slurm's;
#   4. an unmodified PyTorch gloo script, with the interpreter in $2, when it has torch.
# Skips (exit 77) where namespaces cannot be made. Removes every namespace it made on exit.
#   tests/multihost/three_hosts.sh BUILD_DIR [PYTHON]
set -uo pipefail
source "$(dirname "$0")/fixture.sh" "$1" 3
port=29500
failures=0

# Runs "$@" (a program and its arguments) as a 3-node job, 2 ranks per node; node i's output goes
# to $out/<label>.<i>. Returns the number of nodes that failed.
job() {
  local label=$1
  shift
  port=$((port + 1))
  local pids=() i failed=0
  for i in 0 1 2; do
    timeout 240 "$hosts" run "$fixture" "$i" env GLOO_SOCKET_IFNAME=eth0 \
      "$build/lockstep" run --nnodes 3 --node-rank "$i" --nproc-per-node 2 \
      --master-addr "$master" --master-port "$port" --rdzv-timeout 60 -- "$@" \
      >"$out/$label.$i" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    if ! wait "${pids[$i]}"; then
      echo "FAIL: $label: node $i failed:"
      sed 's/^/    /' "$out/$label.$i"
      failed=$((failed + 1))
    fi
  done
  return $failed
}

expect() {  # expect LABEL TEXT: node 0's output contains TEXT
  if grep -qF "$2" "$out/$1.0"; then
    echo "ok: $1: $2"
  else
    echo "FAIL: $1: node 0's output lacks '$2':"
    sed 's/^/    /' "$out/$1.0"
    failures=$((failures + 1))
  fi
}

job all_reduce "$build/examples/all_reduce" || failures=$((failures + 1))
expect all_reduce "all_reduce: ok on 6 ranks (backend hier)"

job bench "$build/lockstep" bench --backend tcp,auto --op all \
  --min-bytes 4 --max-bytes 1M --step-factor 256 --iters 3 || failures=$((failures + 1))
expect bench "tcp us    tcp GB/s     hier us   hier GB/s  check"
# Every size's row ends with the closed-form check's "ok".
rows=$(grep -cE '^\[rank0\]: +[0-9]+ +[0-9]+ ' "$out/bench.0")
good=$(grep -cE '^\[rank0\]: +[0-9]+ +[0-9]+ .* ok$' "$out/bench.0")
if [ "$rows" -gt 0 ] && [ "$rows" = "$good" ]; then
  echo "ok: bench: $good sizes checked on both backends"
else
  echo "FAIL: bench: $good of $rows sizes passed their check"
  failures=$((failures + 1))
fi

# Mismatches on hier: every rank must raise a MismatchError at once (LOCKSTEP_TIMEOUT is 60 s).
mismatch_job() {  # mismatch_job LABEL ARGS...: multihost_job ARGS on every host
  local label=$1
  shift
  job "$label" "$build/tests/multihost_job" "$@"
  local lines fast
  lines=$(cat "$out/$label".* | grep -c "mismatch: MismatchError after ")
  fast=$(cat "$out/$label".* | grep -cE "mismatch: MismatchError after [0-4]\.[0-9]+ s on hier")
  if [ "$lines" = 6 ] && [ "$fast" = 6 ]; then
    echo "ok: $label: a MismatchError on all 6 ranks within 5 s"
    grep -h "mismatch: " "$out/$label".* | head -n 2 | cut -c1-300 | sed 's/^/    /'
  else
    echo "FAIL: $label: $lines of 6 ranks raised a MismatchError, $fast of them on hier within 5 s:"
    cat "$out/$label".* | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
mismatch_job order_within_host order-mismatch 1
mismatch_job order_across_hosts order-mismatch 4,5
mismatch_job size_within_host size-mismatch 3
mismatch_job size_across_hosts size-mismatch 4,5

# "Under Slurm" without a launcher or MASTER_* variables: srun's variables set by hand, 2 tasks per
# host; the store's address comes from the node list's first host, its port from the job id.
slurm_pids=()
for i in 0 1 2; do
  for j in 0 1; do
    timeout 120 "$hosts" run "$fixture" "$i" env SLURM_PROCID=$((2 * i + j)) SLURM_NTASKS=6 \
      SLURM_LOCALID=$j SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NODELIST="10.231.0.[1-3]" \
      SLURM_JOB_ID=4242 LOCKSTEP_DEBUG=INFO "$build/examples/all_reduce" \
      >"$out/slurm.$((2 * i + j))" 2>&1 &
    slurm_pids+=($!)
  done
done
slurm_failed=0
for k in 0 1 2 3 4 5; do
  if ! wait "${slurm_pids[$k]}"; then
    echo "FAIL: slurm: task $k failed:"
    sed 's/^/    /' "$out/slurm.$k"
    slurm_failed=1
  fi
done
[ "$slurm_failed" = 0 ] || failures=$((failures + 1))
expect slurm "all_reduce: ok on 6 ranks (backend hier)"
expect slurm "the first host of SLURM_JOB_NODELIST=10.231.0.[1-3]; port 19242: from SLURM_JOB_ID=4242"

python=${2:-}  # the interpreter the build found torch in (tests/CMakeLists.txt)
if [ -n "$python" ] && "$python" -c "import torch.distributed" 2>/dev/null; then
  job gloo "$python" "$root/tests/multihost/gloo_job.py" || failures=$((failures + 1))
  expect gloo "gloo: ok on 6 ranks over 3 hosts (2 per host)"
else
  echo "skipped: the PyTorch gloo job (no torch for '${python}')"
fi

rm -rf "$out"
[ "$failures" = 0 ] && echo "multi-host: all passed" || echo "multi-host: $failures failure(s)"
[ "$failures" = 0 ]
