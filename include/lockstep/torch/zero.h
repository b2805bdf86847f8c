// ZeroRedundancyOptimizer: optimizer state sharded across a group (ZeRO stage 1), for LibTorch.
//
//   std::vector<at::Tensor> params = model->parameters();
//   lockstep::torch::ZeroRedundancyOptimizer opt(params, group, [](std::vector<at::Tensor> shard) {
//     return std::make_unique<torch::optim::Adam>(shard, torch::optim::AdamOptions(1e-3));
//   });
//   ... loss.backward() through DistributedDataParallel (gradients averaged) ...
//   opt.step();
//
// [Partition] The parameters (the same list, in the same order, on every rank) are split into
// one shard per rank, balanced by size: largest first, each to the rank with the fewest elements
// so far (ties to the lower rank), so every rank computes the same partition. Each rank builds its
// optimizer over its own shard only, so it keeps the state (momentum, Adam's moments) of that
// shard alone: about 1/n of the whole.
//
// [Step] step() runs the local optimizer on this rank's shard, then broadcasts every rank's
// updated shard from its owner (one flat broadcast per rank), so all ranks end with identical
// parameters. The gradients must already be the same on every rank (DDP averages them).
//
// [Join] A Joinable: under a Join (join.h), a rank that ran out of data still runs the step of
// each iteration of the others (its shard is stepped with the gradients DDP's shadow averaged, and
// sent), so the parameters stay identical everywhere.
//
// [State] consolidate_state_dict(to) gathers every rank's optimizer state on rank `to`, which can
// then save it whole; every rank must call it.
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/deadline.h"
#include "lockstep/group/process_group.h"
#include "lockstep/torch/join.h"

namespace lockstep::torch {

class ZeroRedundancyOptimizer : public Joinable {
 public:
  // Builds the optimizer of this rank's shard from its parameters.
  using OptimizerFactory =
      std::function<std::unique_ptr<::torch::optim::Optimizer>(std::vector<at::Tensor> shard)>;

  // Not collective. `params`: dense CPU tensors, the same list on every rank.
  ZeroRedundancyOptimizer(std::vector<at::Tensor> params, std::shared_ptr<ProcessGroup> group,
                          OptimizerFactory make_optimizer,
                          std::chrono::milliseconds timeout = kGroupTimeout);
  ~ZeroRedundancyOptimizer() override;
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  // Collective: the local step, then every shard broadcast from its owner ([Step]).
  void step();
  // Zeroes (or drops, set_to_none) the gradients of every parameter, not only this rank's shard.
  void zero_grad(bool set_to_none = false);

  // The rank that updates parameter i (its index in the constructor's list).
  int owner(size_t i) const;
  // The indices of rank r's shard, in the constructor's order.
  const std::vector<size_t>& shard(int rank) const;
  // This rank's optimizer, over shard(group.rank()).
  ::torch::optim::Optimizer& local_optimizer();

  // Collective: every rank's optimizer state (torch::serialize, as Optimizer::save writes it)
  // gathered on rank `to`, where consolidated_state() then holds one archive per rank, in rank
  // order. Elsewhere consolidated_state() is empty.
  void consolidate_state_dict(int to = 0);
  const std::vector<std::string>& consolidated_state() const;

  // For sharded checkpoints (lockstep/torch/sharded_checkpoint.h), which reshard the state: the
  // parameters as passed to the constructor, the factory, and whether this rank has an optimizer
  // (false when its shard is empty).
  const std::vector<at::Tensor>& parameters() const;
  const OptimizerFactory& optimizer_factory() const;
  bool has_local_optimizer() const;

 protected:
  // Joinable (see [Join]).
  ProcessGroup& join_process_group() override;
  void join_shadow(const JoinIteration& iteration) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::torch
