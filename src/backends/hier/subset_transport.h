// SubsetTransport: a Transport over some of another Transport's ranks, so that the algorithms in
// src/algorithms run among the host leaders on the connections of the whole group.
//
// Rank i of the subset is rank members[i] of the underlying transport. Messages travel on the
// underlying connections with the underlying current op's headers, so a leader that disagrees
// with any peer about the op still fails with a MismatchError, and errors name the peers by
// their ranks in the whole group.
#pragma once

#include <vector>

#include "algorithms/transport.h"

namespace lockstep::hier {

class SubsetTransport final : public Transport {
 public:
  // REQUIRES members ascending, distinct, ranks of base, and containing base.rank(). base must
  // outlive this view.
  SubsetTransport(Transport& base, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  Request post_send(int peer, const void* data, size_t bytes) override;
  Request post_recv(int peer, void* data, size_t bytes) override;
  void wait(Request r) override { base_.wait(r); }
  void wait_all() override { base_.wait_all(); }

 private:
  int member(int peer) const;

  Transport& base_;
  std::vector<int> members_;
  int rank_ = 0;
};

}  // namespace lockstep::hier
