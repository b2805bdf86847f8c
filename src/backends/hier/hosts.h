// Hosts: which ranks of a group share a machine, so that "auto" can pick a backend and the
// hierarchical backend can split the group into host-local ranks and host leaders.
//
// [Host identity] A host is its host name plus the kernel's boot id, so that two containers that
// share a host name but not memory are not mistaken for one host. LOCKSTEP_HOST_ID replaces the
// identity; it is a test hook that simulates several hosts on one machine: one value applies to
// this process, a comma-separated list gives one value per rank of the default group (ranks as
// threads of one process). Ranks with equal values are "one host" and must really share
// /dev/shm.
#pragma once

#include <string>
#include <vector>

#include "comm/group_config.h"

namespace lockstep::hier {

// The identity of the host that default-group rank `global_rank` runs on (see [Host identity]).
// Throws ConfigError when a LOCKSTEP_HOST_ID list has no entry for global_rank.
std::string host_identity(int global_rank);

struct HostMap {
  // Group ranks per host, ascending; hosts ordered by their lowest rank.
  std::vector<std::vector<int>> hosts;
  // Per group rank: its host's index in `hosts`.
  std::vector<int> host_of;

  // The rank that speaks for host h between hosts: its lowest rank.
  int leader(int host) const { return hosts[static_cast<size_t>(host)].front(); }
  // Every host's leader, in host order.
  std::vector<int> leaders() const;
  // Group rank `rank`'s host's ranks.
  const std::vector<int>& ranks_with(int rank) const {
    return hosts[static_cast<size_t>(host_of[static_cast<size_t>(rank)])];
  }
  // Whether some host but not every host runs several ranks of the group.
  bool is_multi_host_with_shared_hosts() const;
};

// Groups ranks by identity (ids[r]: rank r's host identity).
HostMap map_hosts(const std::vector<std::string>& ids);

// Exchanges every member's host identity through config.store (keys "<group>/hosts/<rank>") and
// maps them. Collective over the group; blocks up to config.timeout (the store's TimeoutError).
HostMap exchange_hosts(const GroupConfig& config);

}  // namespace lockstep::hier
