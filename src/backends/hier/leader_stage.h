// LeaderStage: the middle stage of a hierarchical all_reduce, an all_reduce among the host
// leaders. TcpLeaderStage runs it on the leaders' connections of the group's flat tcp mesh; an
// mpi communicator of the leaders would implement the same interface.
#pragma once

#include <vector>

#include "backends/hier/flat_mesh.h"
#include "comm/op.h"

namespace lockstep::hier {

class LeaderStage {
 public:
  virtual ~LeaderStage() = default;
  // In-place all_reduce of work.output among the leaders. `identity` is the user's op: the name
  // in errors and in the mismatch check. work may differ from it only in buffers, dtype and
  // reduce op (f32 for 16-bit data, sum for avg). Collective over the leaders; throws
  // NetworkError, MismatchError or TimeoutError naming the peer.
  virtual void all_reduce(const Op& identity, const Op& work) = 0;
};

class TcpLeaderStage final : public LeaderStage {
 public:
  // leaders: group ranks, ascending; contains this rank. mesh must outlive this stage.
  TcpLeaderStage(FlatMesh& mesh, std::vector<int> leaders)
      : mesh_(mesh), leaders_(std::move(leaders)) {}
  void all_reduce(const Op& identity, const Op& work) override;

 private:
  FlatMesh& mesh_;
  std::vector<int> leaders_;
};

}  // namespace lockstep::hier
