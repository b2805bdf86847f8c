// ZeroRedundancyOptimizer (include/lockstep/torch/zero.h): the partition, the sharded step and
// the consolidation of the shards' state.
#include "lockstep/torch/zero.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "lockstep/core/error.h"
#include "torch/tensor_views.h"

namespace lockstep::torch {

namespace {

constexpr const char* kWhat = "ZeroRedundancyOptimizer";

// [Partition]: largest first, each to the least-loaded rank (ties to the lower rank); each shard
// then in the parameters' own order.
std::vector<std::vector<size_t>> partition(const std::vector<at::Tensor>& params, int ranks) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<std::vector<size_t>> shards(static_cast<size_t>(ranks));
  std::vector<int64_t> load(static_cast<size_t>(ranks), 0);
  for (size_t i : order) {
    const auto r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shards[r].push_back(i);
    load[r] += params[i].numel();
  }
  for (auto& s : shards) std::sort(s.begin(), s.end());
  return shards;
}

}  // namespace

struct ZeroRedundancyOptimizer::Impl {
  std::vector<at::Tensor> params;
  std::shared_ptr<ProcessGroup> group;
  std::chrono::milliseconds timeout;
  std::vector<std::vector<size_t>> shards;
  std::vector<int> owner;
  std::unique_ptr<::torch::optim::Optimizer> local;  // null when this rank's shard is empty
  std::vector<std::string> consolidated;
  OptimizerFactory factory;  // kept for sharded checkpoints, which build optimizers over old shards

  // Rank r's shard, parameters of one dtype at a time: filled by r, broadcast, copied out.
  void broadcast_shard(int r);
  // The local step, then every shard from its owner.
  void step();
};

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<at::Tensor> params,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 OptimizerFactory make_optimizer,
                                                 std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  LOCKSTEP_ENFORCE(group != nullptr, InvalidArgument, kWhat, ": no process group");
  LOCKSTEP_ENFORCE(make_optimizer != nullptr, InvalidArgument, kWhat,
                   ": no optimizer factory (a function from a shard's parameters to an optimizer)");
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    LOCKSTEP_ENFORCE(p.defined() && p.device().is_cpu() && !p.is_sparse() && p.is_contiguous() &&
                         detail::to_dtype(p.scalar_type()).has_value(),
                     InvalidArgument, kWhat, ": parameter #", i,
                     " is not a dense contiguous CPU tensor of a numeric dtype");
  }
  impl_->params = std::move(params);
  impl_->group = std::move(group);
  impl_->timeout = timeout;
  impl_->factory = make_optimizer;
  impl_->shards = partition(impl_->params, impl_->group->size());
  impl_->owner.assign(impl_->params.size(), 0);
  for (size_t r = 0; r < impl_->shards.size(); ++r)
    for (size_t i : impl_->shards[r]) impl_->owner[i] = static_cast<int>(r);
  const auto& mine = impl_->shards[static_cast<size_t>(impl_->group->rank())];
  if (!mine.empty()) {
    std::vector<at::Tensor> shard;
    for (size_t i : mine) shard.push_back(impl_->params[i]);
    impl_->local = make_optimizer(std::move(shard));
    LOCKSTEP_ENFORCE(impl_->local != nullptr, InvalidArgument, kWhat,
                     ": the optimizer factory returned no optimizer");
  }
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

void ZeroRedundancyOptimizer::Impl::broadcast_shard(int r) {
  std::map<at::ScalarType, std::vector<size_t>> by_dtype;
  for (size_t i : shards[static_cast<size_t>(r)]) by_dtype[params[i].scalar_type()].push_back(i);
  const bool mine = r == group->rank();
  ::torch::NoGradGuard no_grad;
  for (const auto& [dtype, indices] : by_dtype) {
    std::vector<at::Tensor> flat;
    int64_t n = 0;
    for (size_t i : indices) {
      flat.push_back(params[i].detach().view({-1}));
      n += flat.back().numel();
    }
    at::Tensor buffer = mine ? at::cat(flat) : at::empty({n}, at::TensorOptions().dtype(dtype));
    group->broadcast(detail::buffer_of(buffer), {.root = r, .timeout = timeout})->wait();
    if (mine) continue;
    int64_t at = 0;
    for (auto& f : flat) {
      f.copy_(buffer.slice(0, at, at + f.numel()));
      at += f.numel();
    }
  }
}

void ZeroRedundancyOptimizer::Impl::step() {
  if (local) local->step();
  for (int r = 0; r < group->size(); ++r) broadcast_shard(r);
}

void ZeroRedundancyOptimizer::step() {
  notify_join();  // the Join's all_reduce when this is its first joinable
  impl_->step();
}

ProcessGroup& ZeroRedundancyOptimizer::join_process_group() {
  return *impl_->group;
}

void ZeroRedundancyOptimizer::join_shadow(const JoinIteration&) {
  impl_->step();
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  for (auto& p : impl_->params) {
    at::Tensor& grad = p.mutable_grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      grad = at::Tensor();
    } else {
      grad = grad.detach();
      grad.zero_();
    }
  }
}

int ZeroRedundancyOptimizer::owner(size_t i) const {
  LOCKSTEP_ENFORCE(i < impl_->owner.size(), InvalidArgument, kWhat, ": parameter index ", i,
                   " out of range (", impl_->owner.size(), " parameters)");
  return impl_->owner[i];
}

const std::vector<size_t>& ZeroRedundancyOptimizer::shard(int rank) const {
  LOCKSTEP_ENFORCE(rank >= 0 && rank < impl_->group->size(), InvalidArgument, kWhat, ": rank ",
                   rank, " is outside the group (valid ranks: 0..", impl_->group->size() - 1, ")");
  return impl_->shards[static_cast<size_t>(rank)];
}

::torch::optim::Optimizer& ZeroRedundancyOptimizer::local_optimizer() {
  LOCKSTEP_ENFORCE(impl_->local != nullptr, InvalidArgument, kWhat, ": rank ", impl_->group->rank(),
                   " owns no parameter (", impl_->params.size(), " parameters over ",
                   impl_->group->size(), " ranks), so it has no optimizer");
  return *impl_->local;
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  ProcessGroup& g = *impl_->group;
  LOCKSTEP_ENFORCE(to >= 0 && to < g.size(), InvalidArgument, kWhat,
                   ": consolidate_state_dict to rank ", to,
                   ", which is outside the group (valid ranks: 0..", g.size() - 1, ")");
  std::string mine;
  if (impl_->local) {
    ::torch::serialize::OutputArchive archive;
    impl_->local->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    mine = out.str();
  }
  std::vector<int64_t> sizes(static_cast<size_t>(g.size()), 0);
  int64_t my_size = static_cast<int64_t>(mine.size());
  g.all_gather(BufferView{&my_size, 1, DType::i64},
               BufferView{sizes.data(), sizes.size(), DType::i64}, {.timeout = impl_->timeout})
      ->wait();
  impl_->consolidated.clear();
  if (g.rank() != to) {
    if (!mine.empty())
      g.send(ConstBufferView{mine.data(), mine.size(), DType::u8}, to, {.timeout = impl_->timeout})
          ->wait();
    return;
  }
  impl_->consolidated.resize(sizes.size());
  std::vector<WorkPtr> recvs;
  for (int r = 0; r < g.size(); ++r) {
    std::string& s = impl_->consolidated[static_cast<size_t>(r)];
    if (r == to) {
      s = std::move(mine);
      continue;
    }
    s.resize(static_cast<size_t>(sizes[static_cast<size_t>(r)]));
    if (!s.empty())
      recvs.push_back(
          g.recv(BufferView{s.data(), s.size(), DType::u8}, r, {.timeout = impl_->timeout}));
  }
  for (auto& w : recvs) w->wait();
}

const std::vector<std::string>& ZeroRedundancyOptimizer::consolidated_state() const {
  return impl_->consolidated;
}

const std::vector<at::Tensor>& ZeroRedundancyOptimizer::parameters() const {
  return impl_->params;
}

const ZeroRedundancyOptimizer::OptimizerFactory& ZeroRedundancyOptimizer::optimizer_factory()
    const {
  return impl_->factory;
}

bool ZeroRedundancyOptimizer::has_local_optimizer() const {
  return impl_->local != nullptr;
}

}  // namespace lockstep::torch
