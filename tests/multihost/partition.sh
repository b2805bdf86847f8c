#!/bin/bash
# Silent partitions on network-namespace hosts (scripts/netns_hosts.sh): 3 hosts, 2 ranks each,
# `lockstep run --nnodes 3` on each, running all_reduces in a loop on the tcp backend
# (tests/multihost/multihost_job.cc) with LOCKSTEP_TIMEOUT=300, so that nothing but link liveness
# (LOCKSTEP_LINK_TIMEOUT, default 10 s) can end an op early.
#   1. Host 2's link goes down in the middle of 64 MiB all_reduces (`netns_hosts.sh cut`: no RST,
#      no FIN, nothing). On every node a rank (or, on host 2, its launcher, which loses the store)
#      must fail within the bound + 2 s, and the node must be done within the bound + 10 s (node 0,
#      which hosts the store, waits up to 25 s more for the others to read the outcome).
#      Hosts 0 and 1 name host 2 as unreachable with its ranks [4, 5]; host 2 names the other
#      side. Each launcher's summary says so. Prints how long each node took. Node 1 (which
#      neither hosts the store nor was cut off) must be done within 1 s of its first rank's error:
#      a group's teardown sends nothing to the ranks it found unreachable, so nothing waits on
#      them (a bye that had to connect to host 2 held every rank for a 2 s linger).
#   2. A rank on host 1 is stopped (SIGSTOP) for longer than the bound, then continued: a slow
#      but alive peer is not declared dead, and the job finishes.
# Skips (exit 77) where namespaces cannot be made. Removes every namespace it made on exit.
#   tests/multihost/partition.sh BUILD_DIR
set -uo pipefail
[ -x "$1/tests/multihost_job" ] || { echo "skip: $1/tests/multihost_job is not built"; exit 77; }
source "$(dirname "$0")/fixture.sh" "$1" 3
loop="$build/tests/multihost_job"
port=29700
failures=0
bound=10     # LOCKSTEP_LINK_TIMEOUT's default, seconds: a rank must fail within bound + 2 s
slack=10     # and its node must be done within bound + slack (the launchers' teardown)

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Waits up to $2 seconds until file $1 contains $3.
wait_for() {
  local deadline=$((SECONDS + $2))
  until grep -qF "$3" "$1" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

# Starts a 3-node job of the loop for $2 seconds over $3 floats; node i's output goes to $out/$1.i.
start_job() {
  local label=$1 secs=$2 floats=$3 i
  port=$((port + 1))
  pids=()
  for i in 0 1 2; do
    (
      LOCKSTEP_TIMEOUT=300 timeout 200 "$hosts" run "$fixture" "$i" "$build/lockstep" run \
        --nnodes 3 --node-rank "$i" --nproc-per-node 2 --master-addr "$master" \
        --master-port "$port" --rdzv-timeout 60 -- "$loop" loop "$secs" "$floats" \
        >"$out/$label.$i" 2>&1
      status=$?
      date +%s%N >"$out/$label.$i.end"  # when the node was done
      exit $status
    ) &
    pids+=($!)
  done
}

seconds() {  # seconds MS: "9.244"
  printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000))
}

show() {  # show LABEL I: node i's output, indented
  sed 's/^/    /' "$out/$1.$2"
}

expect() {  # expect LABEL I TEXT: node i's output contains TEXT
  if grep -qF "$3" "$out/$1.$2"; then
    echo "ok: $1: node $2 says '$3'"
  else
    fail "$1: node $2's output lacks '$3':"
    show "$1" "$2"
  fi
}

# ---- 1. a silent partition ----
start_job cut 150 "${PARTITION_FLOATS:-$((16 * 1024 * 1024))}"  # 64 MiB unless told
if ! wait_for "$out/cut.0" 60 "loop: started"; then
  fail "cut: the job did not start"
  show cut 0
else
  sleep 1
  "$hosts" cut "$fixture" 2
  cut_ns=$(date +%s%N)
  echo "cut: host 2's link went down at $(date -u -d @$((cut_ns / 1000000000)) +%H:%M:%S).$(printf %03d $(((cut_ns / 1000000) % 1000)))"
  for i in 0 1 2; do
    status=0
    wait "${pids[$i]}" || status=$?
    took_ms=$((($(cat "$out/cut.$i.end") - cut_ns) / 1000000))
    # When its first rank raised the error (multihost_job stamps it), and when the node was done.
    first=$(sed -n 's/.*multihost_job: error at \([0-9.]*\):.*/\1/p' "$out/cut.$i" | sort -n | head -n 1)
    detect_ms=-1
    [ -n "$first" ] && detect_ms=$(awk -v a="$first" -v c="$cut_ns" 'BEGIN { printf "%d", a * 1000 - c / 1e6 }')
    if [ "$detect_ms" -ge 0 ]; then
      first_text="its first rank failed $(seconds "$detect_ms") s after the link went down"
    else
      first_text="no rank failed on its own (its launcher stopped them)"
    fi
    echo "cut: node $i: $first_text; the node exited with $status after $(seconds "$took_ms") s"
    [ "$status" != 0 ] || fail "cut: node $i succeeded although host 2 was cut off"
    # Node 0 hosts the store: after its summary it keeps the store up for up to --term-timeout
    # + 15 s (25 s) for the other nodes to read the outcome, and host 2's launcher never can.
    limit=$((bound + slack + (i == 0 ? 25 : 0)))
    # Host 2's launcher may find the store unreachable and stop its ranks before they fail.
    if [ "$detect_ms" -lt 0 ] && [ "$i" = 2 ]; then detect_ms=$took_ms; fi
    if [ "$detect_ms" -lt 0 ] || [ "$detect_ms" -ge $(((bound + 2) * 1000)) ] ||
       [ "$took_ms" -ge $((limit * 1000)) ]; then
      fail "cut: node $i: it found the partition after $detect_ms ms (bound ${bound} s + 2 s), and exited after $took_ms ms (bound $limit s):"
      show cut "$i"
    fi
    if [ "$i" = 1 ] && [ "$detect_ms" -ge 0 ] && [ $((took_ms - detect_ms)) -ge 1000 ]; then
      fail "cut: node 1 exited $((took_ms - detect_ms)) ms after its first rank's error (bound 1 s): its teardown waited on something:"
      show cut 1
    fi
  done
  host2="$fixture-host2"
  for i in 0 1; do
    expect cut "$i" "host $host2 is unreachable"
    expect cut "$i" "Ranks on host $host2: [4, 5]"
  done
  expect cut 2 "is unreachable"
  # The launchers' summaries carry the partition too.
  for i in 0 1 2; do
    if sed -n '/lockstep run: the job failed/,$p' "$out/cut.$i" | grep -q "unreachable"; then
      echo "ok: cut: node $i's summary names the unreachable host"
    else
      fail "cut: node $i's summary does not name the unreachable host:"
      show cut "$i"
    fi
  done
  "$hosts" heal "$fixture" 2
fi

# PARTITION_ONLY_CUT=1: stop here, showing every node's output (when looking into the cut).
if [ -n "${PARTITION_ONLY_CUT:-}" ]; then
  for i in 0 1 2; do echo "== node $i"; show cut "$i"; done
  exit $((failures > 0))
fi
# ---- 2. a stopped (slow) rank is not a dead one ----
stop_for=$((bound + 5))
start_job stop $((stop_for + 10)) 1024
if ! wait_for "$out/stop.1" 60 "loop: started (rank 2, pid "; then
  fail "stop: the job did not start"
  show stop 1
else
  victim=$(sed -n 's/.*loop: started (rank 2, pid \([0-9]*\)).*/\1/p' "$out/stop.1" | head -n 1)
  kill -STOP "$victim"
  sleep "$stop_for"
  kill -CONT "$victim"
  echo "stop: rank 2 (pid $victim) was stopped for $stop_for s"
  for i in 0 1 2; do
    if wait "${pids[$i]}"; then
      echo "ok: stop: node $i finished"
    else
      fail "stop: node $i failed:"
      show stop "$i"
    fi
  done
  expect stop 0 "loop: ok"
fi

[ "$failures" = 0 ] && echo "partition: all passed" || echo "partition: $failures failure(s)"
[ "$failures" = 0 ]
