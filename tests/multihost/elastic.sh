#!/bin/bash
# An elastic job (`lockstep run --nnodes 2:3`) on 3 network-namespace hosts (scripts/netns_hosts.sh)
# running the main job, build/train_fashion_mnist, with --resume and a checkpoint folder that every
# host sees. Once the 3-node world has checkpointed an epoch, host 2's launcher is killed
# (SIGKILL): hosts 0 and 1 must re-form with WORLD_SIZE 2, resume from the checkpoint and finish.
# Prints the launcher lines that show the membership change. Skips (exit 77) where namespaces
# cannot be made; removes every namespace it made on exit.
#   tests/multihost/elastic.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
hosts="$root/scripts/netns_hosts.sh"
"$hosts" check || exit $?

fixture="ls$$"  # netns_hosts.sh names fixtures ls<pid> (their owner)
out=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  "$hosts" down "$fixture"
  rm -rf "$out"
}
trap cleanup EXIT
"$hosts" up "$fixture" 3 || exit 1
master=$("$hosts" addr 0)
port=29650
failures=0
train=${ELASTIC_TRAIN:-$build/train_fashion_mnist}  # the training program (override for a prebuilt one)
epochs=${ELASTIC_EPOCHS:-3}
subset=${ELASTIC_SUBSET:-6000}
[ -x "$train" ] || { echo "skip: $train is not built"; exit 77; }

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Waits up to $2 seconds until file $1 contains $3.
wait_for() {
  local deadline=$((SECONDS + $2))
  until grep -qF "$3" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# Starts host $1's launcher; its output goes to $out/node.$1, its pid to $out/pid.$1.
start() {
  local i=$1
  timeout 300 "$hosts" run "$fixture" "$i" sh -c 'echo $$ > "$0"; exec "$@"' "$out/pid.$i" \
    "$build/lockstep" run --nnodes 2:3 --nproc-per-node 1 --master-addr "$master" \
    --master-port "$port" --rdzv-timeout 60 --rdzv-last-call 2 --rdzv-keep-alive 3 \
    --max-restarts 2 --term-timeout 3 -- \
    "$train" --epochs "$epochs" --subset "$subset" --batch-size 32 \
    --resume --checkpoint-dir "$out/ckpt" >"$out/node.$i" 2>&1 &
  pids+=($!)
}

start 0
wait_for "$out/node.0" 30 "hosting the elastic job's store" || fail "host 0 never hosted the store"
start 1
start 2
# The first attempt has all 3 hosts; kill host 2's launcher once that world saved an epoch.
wait_for "$out/node.0" 60 "attempt 0: world size 3 on 3 node(s)" || fail "no 3-node attempt"
wait_for "$out/node.0" 240 "[rank0]: epoch 1/$epochs:" || fail "the 3-node world never finished an epoch"
victim=$(cat "$out/pid.2")
echo "killing host 2's launcher (pid $victim) with SIGKILL"
kill -KILL "$victim"

for i in 0 1; do
  wait "${pids[$i]}" || fail "host $i's launcher failed (exit $?)"
done
wait "${pids[2]}" 2>/dev/null

echo "--- the launcher lines of host 0 (the store's host) and host 1"
grep -h "^lockstep run:" "$out/node.0" | sed 's/^/host 0: /'
grep -h "^lockstep run:" "$out/node.1" | sed 's/^/host 1: /'
echo "--- rank 0's lines"
grep -h "^\[rank0\]" "$out/node.0" | grep -v "step " | sed 's/^/host 0: /'

expect() {  # expect FILE TEXT
  if grep -qF -- "$2" "$1"; then echo "ok: $2"; else fail "$(basename "$1") lacks '$2'"; fi
}
expect "$out/node.0" "lockstep run: attempt 0: world size 3 on 3 node(s)"
expect "$out/node.0" "world size 2 on 2 node(s)"
expect "$out/node.1" "world size 2 on 2 node(s)"
expect "$out/node.0" "3 rank(s) ("  # the example's opening line, at each attempt
expect "$out/node.0" "2 rank(s) ("
expect "$out/node.0" "[rank0]: resumed from $out/ckpt/fashion_mnist.ckpt after epoch"
expect "$out/node.0" "[rank0]: epoch $epochs/$epochs:"
grep -qE "launcher pid $victim\) (of attempt [0-9]+: it is gone|is gone)" "$out/node.0" ||
  fail "host 0's launcher never named host 2's launcher (pid $victim) as gone"
[ "$failures" = 0 ] && echo "elastic: ok" && exit 0
for i in 0 1 2; do echo "--- host $i"; sed 's/^/    /' "$out/node.$i"; done
exit 1
