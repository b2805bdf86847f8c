#!/bin/bash
# An elastic job (`lockstep run --nnodes 2:3`) on 3 network-namespace hosts (scripts/netns_hosts.sh)
# running the main job, build/train_fashion_mnist, with --resume and a checkpoint folder that every
# host sees:
#   1. Once the 3-node world (attempt 0) has checkpointed an epoch, host 2's launcher is killed
#      (SIGKILL): hosts 0 and 1 must re-form with WORLD_SIZE 2 (attempt 1, a restart after a
#      failure) and resume from the checkpoint.
#   2. Once they have resumed, host 2's launcher is started again, with the same command: it must
#      be admitted at the next restart point, which the running nodes take as a membership change
#      (not counted against --max-restarts): attempt 2 has WORLD_SIZE 3, resumes from the
#      checkpoint again and finishes.
#   3. A reference run of the same training without membership changes (a fixed --nnodes 3 job on
#      the same hosts, same training arguments) gives the final test accuracy that the elastic
#      run's must match within ELASTIC_ACCURACY_TOLERANCE percentage points (see below).
# Prints the launcher lines that show both membership changes. Skips (exit 77) where namespaces
# cannot be made; removes every namespace it made on exit.
#   tests/multihost/elastic.sh BUILD_DIR
set -uo pipefail
source "$(dirname "$0")/fixture.sh" "$1" 3
cd "$out" || exit 1  # the ranks' flight-recorder dumps (lockstep-trace/) go here
port=29650      # the elastic job's store
ref_port=29651  # the reference job's store
failures=0
train=${ELASTIC_TRAIN:-$build/train_fashion_mnist}  # the training program (override for a prebuilt one)
epochs=${ELASTIC_EPOCHS:-3}
subset=${ELASTIC_SUBSET:-6000}
# How far (percentage points) the elastic run's final test accuracy may fall below the reference's.
# Training is deterministic here (fixed seed, 1 rank per host, the same tcp all_reduce): repeated
# runs of one configuration agree to the last digit (82.33% at seed 0, 4 runs). When the re-add cuts
# the 2-node attempt before it saves an epoch (the usual case), the elastic run trains every epoch at
# world size 3, as the reference does, and both print the same accuracy. When that attempt saves an
# epoch first, that epoch runs at world size 2 (another shard order, 1.5x the steps): measured
# +0.67 points (seed 0) and +0.27 (seed 1). 1.5 points is twice the largest change a correct run
# showed; the spread between seeds (82.33% vs 84.51%) is not at stake, as both runs use seed 0.
tolerance=${ELASTIC_ACCURACY_TOLERANCE:-1.5}
[ -x "$train" ] || { echo "skip: $train is not built"; exit 77; }
train_args=(--epochs "$epochs" --subset "$subset" --batch-size 32 --seed 0 --resume)

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Waits up to $2 seconds until file $1 contains $3.
wait_for() {
  local deadline=$((SECONDS + $2))
  until grep -qF -- "$3" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# Starts an elastic launcher on host $1; its output goes to $out/$2, its pid to $out/$2.pid.
start() {
  local i=$1 name=$2
  timeout 300 "$hosts" run "$fixture" "$i" sh -c 'echo $$ > "$0"; exec "$@"' "$out/$name.pid" \
    "$build/lockstep" run --nnodes 2:3 --nproc-per-node 1 --master-addr "$master" \
    --master-port "$port" --rdzv-timeout 60 --rdzv-last-call 2 --rdzv-keep-alive 3 \
    --max-restarts 2 --term-timeout 3 -- \
    "$train" "${train_args[@]}" --checkpoint-dir "$out/ckpt" >"$out/$name" 2>&1 &
  pids+=($!)
}

# Lines of file $2 from the launcher's line that starts attempt $1 to the one that starts the next.
attempt_lines() {
  awk -v start="lockstep run: attempt $1: world size" '
    /^lockstep run: attempt [0-9]+: world size/ { inside = index($0, start) == 1 }
    inside' "$2"
}

expect() {  # expect FILE TEXT
  if grep -qF -- "$2" "$1"; then echo "ok: $2"; else fail "$(basename "$1") lacks '$2'"; fi
}

expect_in_attempt() {  # expect_in_attempt N FILE TEXT
  if attempt_lines "$1" "$2" | grep -qF -- "$3"; then
    echo "ok: attempt $1: $3"
  else
    fail "$(basename "$2"), attempt $1, lacks '$3'"
  fi
}

# The final test accuracy (a number of percent) that rank 0 printed in file $1, or nothing.
final_accuracy() {
  sed -nE "s|^\[rank0\]: epoch $epochs/$epochs: .*test accuracy ([0-9.]+)%.*|\1|p" "$1" | tail -1
}

# --- The elastic job: 3 nodes, then 2, then 3 again.
start 0 node.0
wait_for "$out/node.0" 30 "hosting the elastic job's store" || fail "host 0 never hosted the store"
start 1 node.1
start 2 node.2
# The first attempt has all 3 hosts; kill host 2's launcher once that world saved an epoch.
wait_for "$out/node.0" 60 "attempt 0: world size 3 on 3 node(s)" || fail "no 3-node attempt"
wait_for "$out/node.0" 240 "[rank0]: epoch 1/$epochs: train loss" ||  # saved, not in progress
  fail "the 3-node world never finished an epoch"
victim=$(cat "$out/node.2.pid")
echo "killing host 2's launcher (pid $victim) with SIGKILL"
kill -KILL "$victim"
wait "${pids[2]}" 2>/dev/null

# Hosts 0 and 1 go on as a 2-node world that resumes from the checkpoint; then host 2 comes back.
wait_for "$out/node.0" 60 "attempt 1: world size 2 on 2 node(s)" || fail "no 2-node attempt"
wait_for "$out/node.0" 60 "[rank0]: resumed from" || fail "the 2-node world never resumed"
echo "starting host 2's launcher again"
start 2 node.2again
wait_for "$out/node.0" 60 "attempt 2: world size 3 on 3 node(s)" ||
  fail "host 2 was not admitted back at the next restart point"

# pids: host 0, host 1, host 2 (killed), host 2 again.
for i in 0 1 3; do
  wait "${pids[$i]}" || fail "the launcher of host $((i == 3 ? 2 : i)) failed (exit $?)"
done
elastic_end=$SECONDS

# --- The reference: the same training, without membership changes: a fixed 3-node job on the same
# hosts (the same world size, ranks and transport as the elastic job's last attempt).
ref_pids=()
for i in 0 1 2; do
  timeout 300 "$hosts" run "$fixture" "$i" "$build/lockstep" run --nnodes 3 --node-rank "$i" \
    --nproc-per-node 1 --master-addr "$master" --master-port "$ref_port" --rdzv-timeout 60 -- \
    "$train" "${train_args[@]}" --checkpoint-dir "$out/refckpt" >"$out/ref.$i" 2>&1 &
  ref_pids+=($!)
  pids+=($!)
done
for i in 0 1 2; do
  wait "${ref_pids[$i]}" || fail "the reference job's host $i failed (exit $?)"
done

echo "--- the launcher lines of host 0 (the store's host), host 1 and host 2 (back)"
grep -h "^lockstep run:" "$out/node.0" | sed 's/^/host 0: /'
grep -h "^lockstep run:" "$out/node.1" | sed 's/^/host 1: /'
grep -h "^lockstep run:" "$out/node.2again" | sed 's/^/host 2: /'
echo "--- rank 0's lines"
grep -h "^\[rank0\]" "$out/node.0" | grep -v "step " | sed 's/^/host 0: /'
echo "--- the reference's rank 0"
grep -h "^\[rank0\]" "$out/ref.0" | grep -v "step " | sed 's/^/ref: /'

ckpt="$out/ckpt/fashion_mnist.ckpt"
# Attempt 0: 3 nodes, from scratch.
expect "$out/node.0" "lockstep run: attempt 0: world size 3 on 3 node(s)"
expect_in_attempt 0 "$out/node.0" "[rank0]: no checkpoint at $ckpt; starting from scratch"
expect_in_attempt 0 "$out/node.0" "3 rank(s) ("  # the example's opening line, at each attempt
# The loss of host 2: a restart after a failure, on 2 nodes, from the checkpoint.
grep -qE "launcher pid $victim\) (of attempt [0-9]+: it is gone|is gone)" "$out/node.0" ||
  fail "host 0's launcher never named host 2's launcher (pid $victim) as gone"
for f in node.0 node.1; do
  expect "$out/$f" "attempt 1: world size 2 on 2 node(s)"
  expect "$out/$f" "restarts after failures so far 1 of 2"
done
expect_in_attempt 1 "$out/node.0" "2 rank(s) ("
expect_in_attempt 1 "$out/node.0" "[rank0]: resumed from $ckpt after epoch"
# Host 2's return: a membership change, not counted against --max-restarts, then 3 nodes again.
for f in node.0 node.1; do
  expect "$out/$f" "lockstep run: attempt 1 ended for a membership change (1 node(s) waiting to join); re-forming the job (not counted against --max-restarts)"
  expect_in_attempt 2 "$out/$f" "world size 3 on 3 node(s)"
  expect_in_attempt 2 "$out/$f" "restarts after failures so far 1 of 2"
done
expect "$out/node.2again" "lockstep run: attempt 2: world size 3 on 3 node(s)"
expect "$out/node.2again" "this node is node 2, ranks 2..2; restarts after failures so far 1 of 2"
expect_in_attempt 2 "$out/node.0" "3 rank(s) ("
expect_in_attempt 2 "$out/node.0" "[rank0]: resumed from $ckpt after epoch"
expect_in_attempt 2 "$out/node.0" "[rank0]: epoch $epochs/$epochs:"
if grep -q "lockstep run: attempt 3:" "$out/node.0"; then fail "the job ran more than 3 attempts"; fi
expect "$out/ref.0" "3 rank(s) ("

# The main job's accuracy: not worse than the reference's by more than the tolerance.
elastic_acc=$(final_accuracy "$out/node.0")
ref_acc=$(final_accuracy "$out/ref.0")
if [ -z "$elastic_acc" ] || [ -z "$ref_acc" ]; then
  fail "no final test accuracy (elastic '${elastic_acc}', reference '${ref_acc}')"
else
  echo "final test accuracy: elastic ${elastic_acc}%, reference ${ref_acc}% (tolerance $tolerance points)"
  awk -v e="$elastic_acc" -v r="$ref_acc" -v t="$tolerance" 'BEGIN { exit !(e >= r - t) }' ||
    fail "the elastic run's accuracy ${elastic_acc}% is more than $tolerance points below the reference's ${ref_acc}%"
fi
echo "time: elastic job ${elastic_end} s, reference $((SECONDS - elastic_end)) s, in all $SECONDS s"
[ "$failures" = 0 ] && echo "elastic: ok" && exit 0
for f in node.0 node.1 node.2 node.2again ref.0 ref.1 ref.2; do
  echo "--- $f"
  sed 's/^/    /' "$out/$f" 2>/dev/null
done
exit 1
