// FlatMesh: the tcp connections between every pair of ranks of a hierarchical group. Ops that
// do not run hierarchically run on it with the ordinary algorithms, and the leaders' stage of a
// hierarchical all_reduce runs on a subset of it (SubsetTransport).
#pragma once

#include <memory>
#include <string>

#include "algorithms/algorithms.h"
#include "backends/tcp/tcp_transport.h"
#include "comm/group_config.h"
#include "comm/op.h"

namespace lockstep::hier {

class FlatMesh {
 public:
  // Connects to every member (collective over the group, within config.timeout); the same
  // store keys and errors as the tcp backend. `host` is this rank's host as peers' messages show
  // it.
  FlatMesh(const GroupConfig& config, const std::string& host);

  // Runs op over every rank with run_collective. Throws what the transport throws.
  void run(const Op& op);
  // Runs `fn(transport, scratch)` with `identity` as the transport's current op.
  template <class Fn>
  void with_op(const Op& identity, Fn fn) {
    transport_->begin_op(identity);
    fn(*transport_, scratch_);
    transport_->finish_op();
  }

  // After a failure: sends abort frames (the backend leaves the store note first). Never throws.
  void abort(ErrorClass error_class, const std::string& reason);
  // Orderly goodbye (TcpTransport::goodbye). Never throws.
  void goodbye(Deadline deadline) { transport_->goodbye(deadline); }
  // TcpTransport::unreachable_ranks. Any thread.
  std::vector<int> unreachable_ranks() const { return transport_->unreachable_ranks(); }
  // The connections, which the group's p2p channel shares (tcp/mesh_channel.h).
  std::shared_ptr<tcp::MeshLinks> links() const { return transport_->links(); }

 private:
  std::unique_ptr<tcp::TcpTransport> transport_;
  Scratch scratch_;
};

}  // namespace lockstep::hier
