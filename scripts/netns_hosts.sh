#!/bin/bash
# Hosts on one machine, for multi-host jobs and tests: each host is a network namespace with its
# own UTS namespace (its own host name), joined to the others by a veth pair to one bridge, on a
# private subnet. Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2.
#
#   scripts/netns_hosts.sh check                 exit 0 when hosts can be made here; otherwise
#                                                print why and exit 77 (a test's "skipped")
#   scripts/netns_hosts.sh up NAME N             make hosts 0..N-1 of fixture NAME
#   scripts/netns_hosts.sh addr I                host I's address (10.231.0.<I+1>)
#   scripts/netns_hosts.sh run NAME I CMD...     run CMD on host I: in its network namespace,
#                                                with host name NAME-host<I>
#   scripts/netns_hosts.sh cut NAME I            take host I's link down silently (no RST, no
#                                                FIN: its packets vanish), a network partition
#   scripts/netns_hosts.sh heal NAME I           bring host I's link back up
#   scripts/netns_hosts.sh down NAME             remove everything fixture NAME made
#   scripts/netns_hosts.sh reap                  remove fixtures whose creator is dead
#
# NAME is "ls<pid>" with the pid of the process that owns the fixture (a test's shell: "ls$$"),
# at most 9 characters so that interface names fit. Everything the fixture makes carries it:
# namespaces NAME-h<I>, the bridge NAMEb, host-side veth ends NAMEv<I> (the other end is eth0
# inside host I). `up` first reaps fixtures of dead processes, so a test killed with SIGKILL,
# which cannot clean up, leaves nothing behind once the next fixture is made; a test that exits
# otherwise removes its own with `down` from an EXIT trap.
#
# Try a 2-host job by hand (as root, from the repository, after building):
#   scripts/netns_hosts.sh up ls$$ 2
#   scripts/netns_hosts.sh run ls$$ 1 build/lockstep run --nnodes 2 --node-rank 1 \
#       --nproc-per-node 2 --master-addr 10.231.0.1 --master-port 29500 build/examples/all_reduce &
#   scripts/netns_hosts.sh run ls$$ 0 build/lockstep run --nnodes 2 --node-rank 0 \
#       --nproc-per-node 2 --master-addr 10.231.0.1 --master-port 29500 build/examples/all_reduce
#   scripts/netns_hosts.sh down ls$$
set -euo pipefail

readonly SUBNET=10.231.0

die() {
  echo "netns_hosts.sh: $*" >&2
  exit 2
}

check_name() {
  [[ "$1" =~ ^ls[0-9]{1,7}$ ]] || die "fixture name '$1' is not ls<pid> (at most 9 characters)"
}

cmd_check() {
  if ! command -v ip >/dev/null; then
    echo "netns_hosts.sh: 'ip' is missing (apt-get install iproute2)"
    exit 77
  fi
  if ! command -v unshare >/dev/null; then
    echo "netns_hosts.sh: 'unshare' is missing (apt-get install util-linux)"
    exit 77
  fi
  local probe="lsprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "netns_hosts.sh: cannot create a network namespace here (needs root or CAP_SYS_ADMIN)"
    exit 77
  fi
  local ok=1
  ip netns exec "$probe" unshare -u true 2>/dev/null || ok=0
  ip link add "${probe:0:10}b" type bridge 2>/dev/null && ip link del "${probe:0:10}b" || ok=0
  ip netns del "$probe"
  if [ "$ok" = 0 ]; then
    echo "netns_hosts.sh: cannot create a UTS namespace or a bridge here (needs CAP_NET_ADMIN)"
    exit 77
  fi
}

cmd_down() {
  local name=$1
  check_name "$name"
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-h[0-9]+$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
                grep -E "^${name}(b|v[0-9]+)$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
}

cmd_reap() {
  local name pid
  for name in $( (ip netns list 2>/dev/null | awk '{print $1}' | sed -nE 's/^(ls[0-9]+)-h[0-9]+$/\1/p';
                  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
                    sed -nE 's/^(ls[0-9]+)(b|v[0-9]+)$/\1/p') | sort -u); do
    pid=${name#ls}
    [ -d "/proc/$pid" ] || cmd_down "$name"
  done
}

cmd_up() {
  local name=$1 n=$2
  check_name "$name"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "host count '$n' is not 1..200"
  cmd_reap
  cmd_down "$name"
  ip link add "${name}b" type bridge
  ip link set "${name}b" up
  local i ns
  for ((i = 0; i < n; i++)); do
    ns="${name}-h$i"
    ip netns add "$ns"
    ip link add "${name}v$i" type veth peer name "${name}p$i"
    ip link set "${name}p$i" netns "$ns"
    ip -n "$ns" link set "${name}p$i" name eth0
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link set "${name}v$i" master "${name}b"
    ip link set "${name}v$i" up
  done
}

cmd_run() {
  local name=$1 i=$2
  shift 2
  check_name "$name"
  ip netns list | awk '{print $1}' | grep -qx "${name}-h$i" || die "no host $i in fixture $name"
  exec ip netns exec "${name}-h$i" unshare --uts /bin/sh -c \
    'hostname "$0" && exec "$@"' "${name}-host$i" "$@"
}

# The host side of host I's veth pair, down or up: while it is down, nothing host I sends reaches
# the bridge and nothing reaches host I, and neither side is told.
cmd_link() {
  local name=$1 i=$2 state=$3
  check_name "$name"
  ip link show "${name}v$i" >/dev/null 2>&1 || die "no host $i in fixture $name"
  ip link set "${name}v$i" "$state"
}

case "${1:-}" in
  check) cmd_check ;;
  up) [ $# = 3 ] || die "usage: up NAME N"; cmd_up "$2" "$3" ;;
  addr) [ $# = 2 ] || die "usage: addr I"; echo "$SUBNET.$(($2 + 1))" ;;
  run) [ $# -ge 4 ] || die "usage: run NAME I CMD..."; shift; cmd_run "$@" ;;
  cut) [ $# = 3 ] || die "usage: cut NAME I"; cmd_link "$2" "$3" down ;;
  heal) [ $# = 3 ] || die "usage: heal NAME I"; cmd_link "$2" "$3" up ;;
  down) [ $# = 2 ] || die "usage: down NAME"; cmd_down "$2" ;;
  reap) cmd_reap ;;
  *) die "usage: check | up NAME N | addr I | run NAME I CMD... | cut NAME I | heal NAME I | down NAME | reap (see the top of this file)" ;;
esac
