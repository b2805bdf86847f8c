// SyncBatchNorm for LibTorch: batch normalization whose batch statistics are those of every
// rank's batch together, the C++ counterpart of torch.nn.SyncBatchNorm.
//
//   auto group = lockstep::init_process_group();
//   lockstep::torch::SyncBatchNorm bn(lockstep::torch::SyncBatchNormOptions(64, group));
//   ... y = bn(x);   // x: (N, C, *) with C == 64, N may differ between ranks (even 0)
//
// or, for a model built with torch::nn::BatchNorm{1,2,3}d inside Sequential / ModuleList /
// ModuleDict containers (see [Conversion]):
//
//   model = lockstep::torch::convert_sync_batchnorm(model, group);
//
// [Forward] In training mode, each rank sums its input per channel (x and x^2, accumulated in
// double) and the group all_reduces one flat buffer [sum (C), sum of squares (C), count (1)]; every
// rank then normalizes its own rows with the global mean and biased variance. The running
// statistics are updated with the global mean and the unbiased global variance (count - 1), with
// `momentum` or, when it is unset, a cumulative average, as torch's BatchNorm does. In eval mode
// with running statistics, forward uses them and communicates nothing; in eval mode without
// (track_running_stats=false) it uses this rank's batch alone, as torch.nn.SyncBatchNorm does.
// A group of one rank communicates nothing.
//
// [Backward] A custom autograd function: each rank sums, per channel, grad_output and
// grad_output * (x - mean) over its rows; the group all_reduces both (one buffer of 2C doubles,
// skipped when the input needs no gradient, as torch does) and each rank computes its rows'
// grad_input from the global sums. Gradients are torch.nn.SyncBatchNorm's:
//   - grad_input of rank r is rank r's rows of the gradient, over the concatenated global batch,
//     of the sum of every rank's loss;
//   - grad_weight and grad_bias are this rank's part of that global gradient (its rows' sums,
//     not reduced): their sum over the ranks is the global batch's. DistributedDataParallel
//     averages them, so with each rank's loss a mean over its own (equal-sized) batch, training
//     under DDP equals one process training torch's BatchNorm on the concatenated batch.
//
// [Collectives] Every rank of the group must run every SyncBatchNorm's training forward, and its
// backward, in the same order (as with DDP); a rank whose module has another num_features makes
// the statistics all_reduce fail on every rank with a MismatchError that says so.
//
// [Conversion] convert_sync_batchnorm replaces every torch::nn::BatchNorm{1,2,3}d below a module
// with a SyncBatchNorm that takes over the same tensors (weight, bias and buffers are the same
// at::Tensor objects, so an optimizer built earlier keeps working). LibTorch lets it update a
// parent's registry of children, and the module lists of Sequential, ModuleList and ModuleDict;
// it cannot update a typed member (`torch::nn::BatchNorm2d bn;` of a user's module) or any other
// copy of the pointer, which forward would keep calling. It therefore counts each BatchNorm's
// references: one held anywhere but in those places makes it throw InvalidArgument naming the
// module's path, before changing anything. Such models should use SyncBatchNorm directly.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include "lockstep/comm/options.h"
#include "lockstep/group/process_group.h"

namespace lockstep::torch {

// The options of torch::nn::BatchNormOptions, with the group to synchronise over.
struct SyncBatchNormOptions {
  SyncBatchNormOptions(int64_t num_features, std::shared_ptr<ProcessGroup> process_group)
      : num_features_(num_features), process_group_(std::move(process_group)) {}

  // C, the size of the input's dimension 1.
  TORCH_ARG(int64_t, num_features);
  // Added to the variance before its square root.
  TORCH_ARG(double, eps) = 1e-5;
  // Weight of the new batch in the running statistics; unset (std::nullopt): a cumulative
  // average over every batch so far.
  TORCH_ARG(std::optional<double>, momentum) = 0.1;
  // Learnable per-channel weight (initialised to 1) and bias (to 0).
  TORCH_ARG(bool, affine) = true;
  // Keep running_mean / running_var / num_batches_tracked, used in eval mode.
  TORCH_ARG(bool, track_running_stats) = true;
  // The ranks whose batches are normalised together: a whole group or a subgroup (new_group).
  TORCH_ARG(std::shared_ptr<ProcessGroup>, process_group);
  // Deadline of each all_reduce; kGroupTimeout: the group's timeout.
  TORCH_ARG(std::chrono::milliseconds, timeout) = kGroupTimeout;
};

class SyncBatchNormImpl : public ::torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  // InvalidArgument without a group or with num_features < 1.
  explicit SyncBatchNormImpl(SyncBatchNormOptions options);
  SyncBatchNormImpl(int64_t num_features, std::shared_ptr<ProcessGroup> process_group)
      : SyncBatchNormImpl(SyncBatchNormOptions(num_features, std::move(process_group))) {}
  // Takes over a torch::nn::BatchNorm{1,2,3}d: its options, and its parameters and buffers as
  // the same tensors (not copies). InvalidArgument when `batchnorm` is not one.
  SyncBatchNormImpl(const ::torch::nn::Module& batchnorm,
                    std::shared_ptr<ProcessGroup> process_group,
                    std::chrono::milliseconds timeout = kGroupTimeout);

  // (Re)creates the parameters and buffers (Cloneable::clone calls it).
  void reset() override;
  void reset_running_stats();
  void reset_parameters();

  // input: (N, C, *) with C == num_features; N may be 0 on some ranks. Collective in training
  // mode (see [Forward]); the output has the input's shape and dtype.
  at::Tensor forward(const at::Tensor& input);

  void pretty_print(std::ostream& stream) const override;

  SyncBatchNormOptions options;
  // Undefined when !affine.
  at::Tensor weight;
  at::Tensor bias;
  // Undefined when !track_running_stats.
  at::Tensor running_mean;
  at::Tensor running_var;
  at::Tensor num_batches_tracked;

 private:
  void register_state(at::Tensor weight, at::Tensor bias, at::Tensor running_mean,
                      at::Tensor running_var, at::Tensor num_batches_tracked);
};

// The module holder, as TORCH_MODULE(SyncBatchNorm) would define it (the macro names
// `torch::nn`, which inside lockstep::torch means this namespace, so it is spelled out here).
class SyncBatchNorm : public ::torch::nn::ModuleHolder<SyncBatchNormImpl> {
 public:
  using ::torch::nn::ModuleHolder<SyncBatchNormImpl>::ModuleHolder;
  using Impl = SyncBatchNormImpl;
};

// Replaces every torch::nn::BatchNorm{1,2,3}d in `module`'s tree with a SyncBatchNorm over
// `process_group` that holds the same tensors (see [Conversion]). Returns the converted module:
// `module` itself, changed in place, or a new SyncBatchNorm when `module` is a BatchNorm. Call it
// before wrapping the model in DistributedDataParallel. Throws InvalidArgument, changing nothing,
// when a BatchNorm is referenced outside the module registry and the containers (a typed member,
// a copy kept elsewhere), naming its path.
std::shared_ptr<::torch::nn::Module> convert_sync_batchnorm(
    std::shared_ptr<::torch::nn::Module> module, std::shared_ptr<ProcessGroup> process_group,
    std::chrono::milliseconds timeout = kGroupTimeout);

}  // namespace lockstep::torch
