# The setting every multi-host test shares, sourced after `set -uo pipefail`:
#   source "$(dirname "$0")/fixture.sh" BUILD_DIR NHOSTS
# Sets build (absolute), root (the repository), hosts (scripts/netns_hosts.sh), fixture (this
# test's hosts, named ls<pid> as netns_hosts.sh wants), out (a temporary directory), pids (add the
# background jobs to it) and master (host 0's address), and brings NHOSTS hosts up. At exit it
# kills what is left in pids, takes the hosts down, removes out, and first runs
# fixture_cleanup_extra if the test defined it. Exits 77 (CTest's skip) where namespaces cannot be
# made.
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
hosts="$root/scripts/netns_hosts.sh"
"$hosts" check || exit $?
fixture="ls$$"
out=$(mktemp -d)
pids=()
fixture_cleanup() {
  if declare -F fixture_cleanup_extra >/dev/null; then fixture_cleanup_extra; fi
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  "$hosts" down "$fixture"
  rm -rf "$out"
}
trap fixture_cleanup EXIT
"$hosts" up "$fixture" "$2" || exit 1
master=$("$hosts" addr 0)
