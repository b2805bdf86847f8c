// PeerWatch: notices at once when a rank on this host exits (a crash, SIGKILL, the OOM killer)
// while an op waits for it. NCCL's transports within a host would otherwise wait until the
// deadline. Ranks on other hosts are left to NCCL's own network errors and to the deadline.
//
// [Liveness] Each rank publishes (host id, pid namespace, pid) in the store. A rank in another
// process on this host and in this pid namespace is watched through a pidfd, which turns readable
// the moment the process exits (zombie or not), so pid reuse cannot fool it. Ranks that share
// this process (threads as ranks) are not watched. Where pidfd_open fails (kernels before 5.3,
// seccomp filters in some containers) the rank is watched with kill(pid, 0) instead, which
// cannot tell a reused pid from the peer, and a warning says so once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/group_config.h"
#include "lockstep/core/deadline.h"

namespace lockstep::nccl {

class PeerWatch {
 public:
  // Collective over the group, within deadline (TimeoutError naming the missing ranks). Keys go
  // under prefix ("<group>/nccl/<n>/").
  PeerWatch(const GroupConfig& config, const std::string& prefix, Deadline deadline);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // The first watched rank whose process has ended, or nothing. One poll(2); never blocks.
  std::optional<int> first_dead() const;
  // "rank 2 (pid 123)".
  std::string describe(int rank) const;

 private:
  std::vector<int> pids_;      // per rank, 0 when unknown
  std::vector<int> pidfds_;    // per rank, -1 when not watched through a pidfd
  std::vector<bool> by_kill_;  // per rank: watched through kill(pid, 0) (no pidfd)
};

}  // namespace lockstep::nccl
