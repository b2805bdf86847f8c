// DistributedDataParallel for LibTorch: wrap a module and a process group, and the usual
//   auto loss = loss_fn(ddp(x), y);  loss.backward();  optimizer.step();
// trains on every rank's batch at once: after backward, every rank's gradients are the average
// over the group, so every rank takes the same step and the replicas stay identical.
//
//   auto group = lockstep::init_process_group();
//   auto net = std::make_shared<NetImpl>();             // or a TORCH_MODULE holder: Net net;
//   lockstep::torch::DistributedDataParallel ddp(net, group, {.find_unused_parameters = false});
//   torch::optim::SGD opt(net->parameters(), 0.01);      // the module's own parameters
//   for (auto& batch : loader) {
//     opt.zero_grad();
//     auto loss = torch::nll_loss(ddp(batch.data), batch.target);
//     loss.backward();                                    // gradients averaged when it returns
//     opt.step();
//   }
//
// [Construction] is collective over the group: every rank builds the same model and wraps it,
// in the same order relative to the group's other collectives. It checks that every rank has
// the same parameters (names, shapes, dtypes, in registration order) and throws MismatchError
// naming the first differing parameter with each rank's shape; then it copies rank 0's
// parameters and buffers to every rank.
//
// [Buckets] Gradients are averaged in buckets: flat buffers of several parameters, allreduced
// as one op. Initially parameters go into buckets in reverse registration order (the order
// backward usually produces them): the first bucket up to first_bucket_bytes, the others up to
// bucket_bytes (a single larger parameter gets a bucket of its own). After the first
// synchronised backward the buckets are rebuilt once, in the order the gradients actually
// arrived on rank 0; every rank uses rank 0's layout, so the collectives match. Bucket k's
// allreduce is launched, from the gradient-accumulator hooks while backward is still running,
// once all its gradients are ready and buckets 0..k-1 have been launched. At the end of backward
// (the autograd engine's end-of-backward callback) DDP waits for every bucket and writes the
// averages into the parameters' .grad(); so when backward() returns, the gradients are final.
//
// [Unused parameters] A parameter whose gradient does not arrive in a backward pass (an unused
// branch, a frozen-by-logic layer) never causes a hang: at the end of backward it is reduced
// with this rank's current gradient (zero when it has none), so the result is the average of
// the ranks that did use it, counted as zero elsewhere - exactly single-process training on the
// concatenated batch. When no rank used it, its .grad() is left untouched (a small per-iteration
// "used" bitmap is allreduced to know this). Each such parameter is named once per rank in a
// warning. Without find_unused_parameters, an unused parameter delays its bucket (and every later
// bucket) to the end of backward; find_unused_parameters=true walks the autograd graph from the
// forward outputs and marks unreachable parameters ready when backward starts, restoring overlap.
//
// [Buffers] With broadcast_buffers, rank 0's buffers (BatchNorm running statistics, ...) are
// copied to every rank before the first forward of each iteration (an iteration ends with a
// backward pass), in place and outside autograd. Later forwards before the same backward do not
// touch them, so several forwards before one backward work (PyTorch DDP fails there with
// "modified by an inplace operation").
//
// [When DDP communicates] A forward with grad mode enabled and outside no_sync() arms the next
// backward to synchronise, and (the first one per iteration) broadcasts buffers. A forward under
// torch::NoGradGuard issues no collective: rank 0 may evaluate alone (better: evaluate through
// module() directly). A backward armed by such a forward is collective: every rank must run it.
// Inside no_sync(), forwards arm nothing and backward only accumulates into .grad() locally; the
// first synchronised backward after it averages the accumulated gradients.
//
// [Static graph] Each parameter's gradient accumulator normally runs once per backward. Under
// reentrant activation checkpointing (checkpoint(), lockstep/torch/activation_checkpoint.h) or
// when a module is applied twice inside checkpointed regions, it runs once per use, and without
// static_graph the second run is an error that says to set it. With static_graph the first
// synchronised backward only counts each parameter's runs and reduces at its end (no overlap);
// from the second on, a parameter is ready at its counted last run, buckets launch during
// backward again, and a parameter that gets more runs than counted is an InvalidArgument (the
// graph changed). One in fewer runs than counted (it was not reached) is reduced at the end of
// backward as an unused one.
//
// [Sharded gradients] shard_gradients(zero) turns a DDP + ZeroRedundancyOptimizer pair from ZeRO-1
// into ZeRO-2: a bucket's all_reduce becomes a reduce_scatter whose segment for rank r holds the
// parameters r's optimizer updates; each rank gets the averaged gradients of its own parameters
// only, releases the others' .grad() as soon as they are copied into a bucket, and keeps buckets
// only while backward runs. After backward, a parameter owned elsewhere has no .grad(); the
// optimizer's step updates the owned ones and broadcasts them as before.
//
// [Uneven inputs] DDP is a Joinable (lockstep/torch/join.h): under a Join, ranks that ran out of
// data shadow the buffer broadcast and the gradient all_reduces of the others.
//
// [Devices] The parameters are dense, contiguous tensors, all on the CPU or all on one CUDA
// device. For CUDA parameters the buckets live on that device and are reduced through the
// group's nccl route (backend auto, in a program linked with lockstep::nccl), each op ordered
// after torch's current stream; the reducer's bookkeeping (model check, used-parameter bitmap,
// bucket order) stays on the host backend. ZeRO is CPU-only; shared_buckets has no effect.
// Parameters with requires_grad == false are checked and broadcast but not reduced.
// One backward per armed forward cycle (for accumulation use no_sync()). The wrapper is not
// thread-safe: one thread drives forward and backward of one DDP instance (other ranks may be
// other threads of the same process, each with its own group). Every DDP collective has a
// deadline (options.timeout), so a rank that never runs its backward makes the others fail
// with TimeoutError rather than hang forever.
#pragma once

#include <torch/nn/module.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/comm/options.h"
#include "lockstep/group/process_group.h"
#include "lockstep/torch/comm_hooks.h"
#include "lockstep/torch/join.h"

namespace lockstep::torch {

struct DdpOptions {
  // Size cap of the first bucket (the last layers' gradients, which arrive first): small, so that
  // communication starts early in backward.
  size_t first_bucket_bytes = size_t{1} << 20;  // 1 MiB
  // Size cap of every other bucket: large, so that per-op overhead is amortised.
  size_t bucket_bytes = size_t{25} << 20;  // 25 MiB
  // Copy rank 0's buffers to every rank before the first forward of each iteration.
  bool broadcast_buffers = true;
  // Walk the autograd graph from the forward outputs after each forward, and mark parameters it
  // cannot reach ready as soon as backward starts (see [Unused parameters]). Costs one graph
  // traversal per forward. Outputs are found in an at::Tensor, a std::vector<at::Tensor>, or a
  // std::tuple / std::pair of tensors; other return types are not traversed (correct, no overlap
  // gain).
  bool find_unused_parameters = false;
  // Make each parameter's .grad() a view into its bucket after the first synchronised backward:
  // no second copy of the gradients, no copy in or out of the buckets. optimizer.zero_grad()
  // (in-place zeroing) keeps the views; a .grad() replaced by the user is copied and re-viewed at
  // the next synchronised backward.
  bool gradient_as_bucket_view = false;
  // Buckets in memory from ProcessGroup::allocate: on the shm backend, memory every rank maps, so
  // that each bucket's all_reduce runs without the copies in and out of the group's segment (the
  // zero-copy path; elsewhere it is ordinary memory). It makes building the DDP object and its
  // first-iteration bucket rebuild collective, as the parameter broadcast already is. It needs
  // /dev/shm room for about the model's gradients per rank; false: private memory.
  bool shared_buckets = true;
  // The autograd graph is the same in every iteration (see [Static graph]): a parameter may
  // then get its gradient several times in one backward (activation checkpointing, a module used
  // twice), and its bucket is sent once the last of them has arrived.
  bool static_graph = false;
  // How a bucket is averaged (comm_hooks.h). Empty: allreduce_hook().
  CommHook comm_hook{};
  // Deadline of every collective DDP issues; kGroupTimeout: the group's timeout.
  std::chrono::milliseconds timeout = kGroupTimeout;
};

class DistributedDataParallelBase;
class ZeroRedundancyOptimizer;

// RAII scope in which forward/backward only accumulate gradients locally (see [When DDP
// communicates]). Scopes nest. Movable; must not outlive the DDP object.
class [[nodiscard]] NoSyncGuard {
 public:
  explicit NoSyncGuard(DistributedDataParallelBase* ddp);
  NoSyncGuard(NoSyncGuard&& other) noexcept : ddp_(std::exchange(other.ddp_, nullptr)) {}
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;
  NoSyncGuard(const NoSyncGuard&) = delete;
  ~NoSyncGuard();

 private:
  DistributedDataParallelBase* ddp_;
};

// Counters, for tests, benchmarks and logging.
struct DdpStats {
  int64_t synced_backwards = 0;   // backward passes that averaged gradients
  int64_t buffer_broadcasts = 0;  // iterations whose buffers were broadcast
  int64_t bucket_rebuilds = 0;    // 0 or 1
  int64_t early_launched = 0;     // buckets launched before the end of backward, in total
  int64_t buckets_launched = 0;   // buckets launched, in total
  int64_t buckets = 0;            // buckets now
  // Of them, in memory every rank of the group maps (shared_buckets on the shm backend): their
  // all_reduce takes the zero-copy path.
  int64_t shared_buckets = 0;
  // Iterations of other ranks this rank shadowed inside Join::join(), in total.
  int64_t joined_iterations = 0;
  // Time backward spent at its end waiting for the buckets' communication (what overlap did not
  // hide), in total.
  double comm_wait_seconds = 0;
};

// The part of the wrapper that does not depend on the module type. Use DistributedDataParallel.
class DistributedDataParallelBase : public Joinable {
 public:
  // Collective over `group` (see [Construction]). Registers hooks on the parameters' gradient
  // accumulators; keeps `module` and `group` alive. Throws MismatchError when the models differ,
  // InvalidArgument for a parameter that is not a dense contiguous tensor on the first parameter's
  // device (CPU or CUDA, see [Devices]) or a CUDA model on an nccl-only group, and whatever the
  // group throws (TimeoutError, NetworkError) when a rank does not take part.
  DistributedDataParallelBase(std::shared_ptr<::torch::nn::Module> module,
                              std::shared_ptr<ProcessGroup> group, DdpOptions options);
  // Removes the hooks. REQUIRES: no backward pass of this model is running.
  virtual ~DistributedDataParallelBase();
  DistributedDataParallelBase(const DistributedDataParallelBase&) = delete;
  DistributedDataParallelBase& operator=(const DistributedDataParallelBase&) = delete;

  // ZeRO-2 (see [Sharded gradients]): from the next iteration on, each gradient is averaged onto
  // the rank of `optimizer` that owns its parameter (reduce-scattered by bucket), and every other
  // rank frees it. Call on every rank, between iterations; `optimizer` must hold every parameter
  // DDP reduces. InvalidArgument with a communication hook or gradient_as_bucket_view.
  void shard_gradients(const ZeroRedundancyOptimizer& optimizer);
  // A scope of local gradient accumulation (see NoSyncGuard).
  NoSyncGuard no_sync() { return NoSyncGuard(this); }
  // Replaces the communication hook. Collective in spirit: every rank must use the same kind of
  // hook. REQUIRES: called between iterations, not during backward.
  void register_comm_hook(CommHook hook);

  ProcessGroup& process_group() const;
  const DdpOptions& options() const;
  DdpStats stats() const;
  // The current bucket layout: for each bucket in launch order, its parameters' names in bucket
  // order. The same on every rank.
  std::vector<std::vector<std::string>> bucket_layout() const;

  // Forward plumbing, called by DistributedDataParallel<M>::forward around the module's forward.
  // pre_forward broadcasts buffers when due (after the Join's all_reduce, under a Join) and arms
  // the next backward; post_forward hooks the outputs' gradient functions (so that the backward
  // pass is recognised where it starts, outside any reentrant inner backward) and records the
  // outputs for find_unused_parameters.
  void pre_forward();
  void post_forward(const std::vector<at::Tensor>& outputs);

 protected:
  // Joinable (see [Uneven inputs]).
  ProcessGroup& join_process_group() override;
  void join_shadow(const JoinIteration& iteration) override;
  void join_finish(int authority) override;

 private:
  friend class NoSyncGuard;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

namespace detail {

// Tensors inside a forward's return value, for the find_unused_parameters traversal.
inline void collect_tensors(const at::Tensor& t, std::vector<at::Tensor>& out) {
  out.push_back(t);
}
inline void collect_tensors(const std::vector<at::Tensor>& ts, std::vector<at::Tensor>& out) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <class... Ts>
void collect_tensors(const std::tuple<Ts...>& t, std::vector<at::Tensor>& out) {
  std::apply([&](const auto&... e) { (collect_tensors(e, out), ...); }, t);
}
template <class A, class B>
void collect_tensors(const std::pair<A, B>& p, std::vector<at::Tensor>& out) {
  collect_tensors(p.first, out);
  collect_tensors(p.second, out);
}
template <class T>
void collect_tensors(const T&, std::vector<at::Tensor>&) {}  // not a tensor: not traversed

// The module as a shared_ptr<nn::Module>, from a ModuleHolder (Net, torch::nn::Linear, ...) or a
// std::shared_ptr<SomeModuleImpl>.
template <class M>
std::shared_ptr<::torch::nn::Module> as_module(const M& m) {
  if constexpr (requires { m.ptr(); }) {
    return m.ptr();
  } else {
    return m;
  }
}

}  // namespace detail

// The wrapper. ModuleType is a module holder (a TORCH_MODULE type, torch::nn::Sequential, ...)
// or a std::shared_ptr to a module; it needs a forward().
template <class ModuleType>
class DistributedDataParallel : public DistributedDataParallelBase {
 public:
  DistributedDataParallel(ModuleType module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {})
      : DistributedDataParallelBase(detail::as_module(module), std::move(group),
                                    std::move(options)),
        module_(std::move(module)) {}

  // Calls the module's forward with `args`, with the DDP steps around it (see [When DDP
  // communicates]). Returns what the module's forward returns.
  template <class... Args>
  auto forward(Args&&... args) {
    pre_forward();
    auto out = module_->forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    detail::collect_tensors(out, tensors);
    post_forward(tensors);
    return out;
  }
  template <class... Args>
  auto operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  // The wrapped module (for the optimizer, evaluation, checkpoints).
  ModuleType& module() { return module_; }
  const ModuleType& module() const { return module_; }

 private:
  ModuleType module_;
};

}  // namespace lockstep::torch
