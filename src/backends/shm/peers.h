// Peers: who the other ranks of a shm group are, whether they are still alive, and the errors
// that name them.
//
// [Liveness] Each rank records its pid in its control slot. A rank in another process is watched
// through a pidfd (opened at setup, so pid reuse cannot fool it; it turns readable the moment the
// process exits, zombie or not). Ranks that share this process (threads as ranks, as in the
// tests) cannot die alone; they leave through an orderly shutdown, which marks their state
// departed, or an abort, which marks the segment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/shm/layout.h"
#include "comm/op.h"

namespace lockstep::shm {

class Peers {
 public:
  // Opens a pidfd for every rank that runs in another process. REQUIRES every rank attached.
  Peers(const SegmentView& segment, int rank, std::string host);
  ~Peers();
  Peers(const Peers&) = delete;
  Peers& operator=(const Peers&) = delete;

  // "rank 2 (host h, pid 123)".
  std::string describe(int rank) const;
  // The first rank (other than this one) whose process has ended without leaving the group, or
  // nothing. One poll(2) over the pidfds; safe to call from any thread.
  std::optional<int> first_dead() const;
  bool departed(int rank) const;
  // What rank last did, from its published descriptors: "its last collective was barrier #4".
  std::string last_op_of(int rank) const;
  int rank() const { return rank_; }
  int size() const { return segment_.size(); }
  const std::string& host() const { return host_; }

 private:
  SegmentView segment_;
  int rank_;
  std::string host_;
  std::vector<int> pidfds_;   // per rank; -1: this process (or no pidfd available)
  std::vector<int> watched_;  // ranks with a pidfd, in order
};

}  // namespace lockstep::shm
