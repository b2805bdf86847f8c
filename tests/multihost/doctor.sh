#!/bin/bash
# `lockstep doctor` on real network-namespace hosts (scripts/netns_hosts.sh): 3 hosts, each with its
# own host name and address, `lockstep run --nnodes 3 ... -- lockstep doctor` on each.
#   1. a good job: every node reaches every other at its advertised address, the clocks agree, and
#      the host names (unknown to the machine's /etc/hosts) are a note, not a problem;
#   2. host 2 advertises 192.0.2.1 (TEST-NET-1, no host answers), then 10.231.0.250 (on the hosts'
#      subnet, no host has it: the connection gets no answer): node 0 names host 2, the address
#      and the nodes that cannot reach it, within the probe timeout;
#   3. Debian's /etc/hosts on host 1 (its name mapped to 127.0.1.1, through /etc/netns/<ns>/hosts,
#      which `ip netns exec` mounts over /etc/hosts): host 1's doctor reports the loopback name as
#      a problem of a 3-node job, with the fix;
#   4. no launcher: srun's variables set by hand and `lockstep doctor --peers` on each host.
# Skips (exit 77) where namespaces cannot be made. Removes every namespace and file it made on exit.
#   tests/multihost/doctor.sh BUILD_DIR
set -uo pipefail
netns_etc="/etc/netns/ls$$-h1"
made_etc_netns=0
[ -d /etc/netns ] || made_etc_netns=1
fixture_cleanup_extra() {
  rm -rf "$netns_etc"
  [ "$made_etc_netns" = 1 ] && rmdir /etc/netns 2>/dev/null
}
source "$(dirname "$0")/fixture.sh" "$1" 3
port=29700
failures=0

# Runs the doctor as a 3-node job, 1 rank per node; node i's output goes to $out/<label>.<i> and
# its exit code to $out/<label>.<i>.rc. Extra "env" assignments for node 2 come after the label.
doctor_job() {
  local label=$1 node2_env=${2:-}
  port=$((port + 1))
  local pids=() i
  for i in 0 1 2; do
    local extra=()
    [ "$i" = 2 ] && [ -n "$node2_env" ] && extra=("$node2_env")
    timeout 120 "$hosts" run "$fixture" "$i" env "${extra[@]}" OMP_NUM_THREADS=1 \
      "$build/lockstep" run --nnodes 3 --node-rank "$i" --nproc-per-node 1 \
      --master-addr "$master" --master-port "$port" --rdzv-timeout 60 -- \
      "$build/lockstep" doctor --probe-timeout 1 --peer-timeout 30 >"$out/$label.$i" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    wait "${pids[$i]}"
    echo $? >"$out/$label.$i.rc"
  done
}

expect() {  # expect LABEL NODE TEXT: node NODE's output contains TEXT
  if grep -qF -- "$3" "$out/$1.$2"; then
    echo "ok: $1: node $2: $3"
  else
    echo "FAIL: $1: node $2's output lacks '$3':"
    sed 's/^/    /' "$out/$1.$2"
    failures=$((failures + 1))
  fi
}

expect_rc() {  # expect_rc LABEL NODE CODE
  local rc
  rc=$(cat "$out/$1.$2.rc")
  if [ "$rc" = "$3" ]; then
    echo "ok: $1: node $2 exited $3"
  else
    echo "FAIL: $1: node $2 exited $rc, not $3:"
    sed 's/^/    /' "$out/$1.$2"
    failures=$((failures + 1))
  fi
}

# 1. A good job.
start=$SECONDS
doctor_job good
echo "good: $((SECONDS - start)) s; node 0's report:"
grep -E '^\[rank0\]: (ok|note|problem|  )' "$out/good.0" | sed 's/^/    /'
for i in 0 1 2; do expect_rc good "$i" 0; done
h=$fixture-host
expect good 0 "ok       reachability: all 3 nodes reach each other at their advertised addresses: node 0 ($h""0) 10.231.0.1, node 1 ($h""1) 10.231.0.2, node 2 ($h""2) 10.231.0.3"
expect good 0 "ok       advertise: node 0 of 3 advertises 10.231.0.1 (its address toward the store"
expect good 0 "ok       clock: node 1 ($h""1)'s clock is "
expect good 0 "ok       clock: node 2 ($h""2)'s clock is "
expect good 0 "note     hostname: this host's name '$h""0' does not resolve"
for i in 1 2; do
  expect good "$i" "ok       advertise: node $i of 3 advertises 10.231.0.$((i + 1))"
  expect good "$i" "ok       reachability: this node reaches the 2 other node(s) at their advertised addresses"
  expect good "$i" "ok       clock: this node (node $i)'s clock is "
done

# 2. Host 2 advertises an address nothing answers.
start=$SECONDS
doctor_job unreachable LOCKSTEP_SOCKET_ADDR=192.0.2.1
took=$((SECONDS - start))
grep -E '^\[rank0\]: (problem  reachability|  +fix: on)' "$out/unreachable.0" | sed 's/^/    /'
expect unreachable 0 "problem  reachability: node 2 ($h""2) advertises 192.0.2.1:"
expect unreachable 0 "for data connections, and nodes 0, 1 cannot reach it: "
expect unreachable 0 "fix: on $h""2, set LOCKSTEP_SOCKET_ADDR to an address the other nodes can reach"
expect_rc unreachable 0 1
if [ "$took" -le 60 ]; then
  echo "ok: unreachable: reported in $took s"
else
  echo "FAIL: unreachable: took $took s"
  failures=$((failures + 1))
fi

# 2b. Host 2 advertises an address on the hosts' own subnet that no host has: nothing answers the
# connection (no ARP reply), so the attempt ends at --probe-timeout.
start=$SECONDS
doctor_job silent LOCKSTEP_SOCKET_ADDR=10.231.0.250
took=$((SECONDS - start))
expect silent 0 "problem  reachability: node 2 ($h""2) advertises 10.231.0.250:"
expect silent 0 "cannot reach it: no answer in 1 s"
expect_rc silent 0 1
if [ "$took" -le 60 ]; then
  echo "ok: silent: reported in $took s"
else
  echo "FAIL: silent: took $took s"
  failures=$((failures + 1))
fi

# 3. Debian's /etc/hosts on host 1: its name resolves to 127.0.1.1.
if mkdir -p "$netns_etc" 2>/dev/null &&
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s1\n' "$h" >"$netns_etc/hosts"; then
  doctor_job loopback_name
  expect loopback_name 1 "problem  hostname: '$h""1' resolves to 127.0.1.1, a loopback address, in a 3-node job"
  expect loopback_name 1 "fix: map '$h""1' to this host's routable address in /etc/hosts"
  expect_rc loopback_name 1 1
  expect loopback_name 0 "ok       reachability: all 3 nodes reach each other"
  rm -rf "$netns_etc"  # host 1's name does not resolve again
else
  echo "skipped: the loopback host name (cannot write $netns_etc)"
fi

# 4. No launcher: srun's variables set by hand, one task per host, `lockstep doctor --peers`: rank
# 0's doctor hosts the store at the node list's first host, port 15000 + SLURM_JOB_ID.
srun_pids=()
for i in 0 1 2; do
  timeout 120 "$hosts" run "$fixture" "$i" env SLURM_PROCID=$i SLURM_NTASKS=3 SLURM_LOCALID=0 \
    SLURM_NTASKS_PER_NODE=1 SLURM_JOB_NODELIST="10.231.0.[1-3]" SLURM_JOB_ID=4343 \
    OMP_NUM_THREADS=1 "$build/lockstep" doctor --peers --probe-timeout 1 --peer-timeout 30 \
    >"$out/srun.$i" 2>&1 &
  srun_pids+=($!)
done
for i in 0 1 2; do
  wait "${srun_pids[$i]}"
  echo $? >"$out/srun.$i.rc"
done
for i in 0 1 2; do expect_rc srun "$i" 0; done
expect srun 0 "ok       reachability: all 3 nodes reach each other at their advertised addresses: node 0 ($h""0) 10.231.0.1, node 1 ($h""1) 10.231.0.2, node 2 ($h""2) 10.231.0.3"
expect srun 0 "ok       clock: node 2 ($h""2)'s clock is "
expect srun 2 "ok       clock: this node (node 2)'s clock is "

[ "$failures" = 0 ] && echo "doctor multi-host: all passed" || echo "doctor multi-host: $failures failure(s)"
[ "$failures" = 0 ]
