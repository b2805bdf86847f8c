// The LibTorch adapter of the DDP reducer (src/ddp/reducer.h): autograd hooks in, gradients
// through GradientAccess, buffers and parameters broadcast from rank 0.
#include "lockstep/torch/ddp.h"

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>
#include <utility>

#include "autograd_glue.h"
#include "core/log.h"
#include "ddp/model_check.h"
#include "ddp/reducer.h"
#include "lockstep/core/error.h"
#include "lockstep/torch/zero.h"
#include "tensor_memory.h"
#include "tensor_views.h"
#include "torch_stream.h"

namespace lockstep::torch {

namespace {

using detail::accumulator_of;
using detail::add_accumulator_hook;
using detail::add_node_pre_hook;
using detail::at_end_of_backward;
using detail::reachable_nodes;
using detail::remove_accumulator_hook;
using ::torch::autograd::Node;

// Copies rank root's tensors to every rank, one broadcast per device and dtype. In place,
// outside autograd.
void broadcast_coalesced(ProcessGroup& group, const std::vector<at::Tensor>& tensors,
                         std::chrono::milliseconds timeout, int root = 0) {
  if (group.size() == 1 || tensors.empty()) return;
  ::torch::NoGradGuard no_grad;
  // The same order on every rank: host first, then by device index and dtype.
  std::map<std::pair<int, at::ScalarType>, std::vector<at::Tensor>> by_kind;
  for (const at::Tensor& t : tensors) {
    int device = t.device().is_cpu() ? -1 : t.device().index();
    by_kind[{device, t.scalar_type()}].push_back(t);
  }
  for (auto& [kind, group_tensors] : by_kind) {
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& t : group_tensors) flat_parts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts).contiguous();
    group.broadcast(detail::buffer_of(flat), {.root = root, .timeout = timeout})->wait();
    int64_t offset = 0;
    for (at::Tensor t : group_tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

ddp::ParamShape shape_of(const std::string& name, const at::Tensor& t) {
  return {
      .name = name, .dtype = std::string(c10::toString(t.scalar_type())), .shape = t.sizes().vec()};
}

// A torch-facing CommHook as a reducer BucketHook.
ddp::BucketHook to_bucket_hook(CommHook hook) {
  return [hook = std::move(hook)](ProcessGroup& group, const ddp::BucketRef& b) {
    GradBucket bucket;
    bucket.index = b.index;
    bucket.is_last = b.is_last;
    bucket.buffer = detail::tensor_of(b.buffer, {static_cast<int64_t>(b.buffer.count)});
    for (size_t i = 0; i < b.spec->params.size(); ++i) {
      bucket.parameter_names.push_back(b.params[b.spec->params[i]].name);
      bucket.offsets.push_back(b.spec->offsets[i]);
      bucket.counts.push_back(b.params[b.spec->params[i]].count);
    }
    HookWork work = hook(group, bucket);
    return ddp::PendingReduction{std::move(work.work), std::move(work.finish)};
  };
}

}  // namespace

class DistributedDataParallelBase::Impl : public ddp::GradientAccess {
 public:
  Impl(DistributedDataParallelBase* owner, std::shared_ptr<::torch::nn::Module> module,
       std::shared_ptr<ProcessGroup> group, DdpOptions options);
  ~Impl() override;

  void read_gradient(size_t p, BufferView slot) override;
  void write_gradient(size_t p, BufferView slot) override;
  void layout_changed() override;
  void release_gradient(size_t p) override;
  void shard_gradients(const ZeroRedundancyOptimizer& optimizer);

  void pre_forward();
  void post_forward(const std::vector<at::Tensor>& outputs);
  void set_hook(CommHook hook);
  void join_shadow(const JoinIteration& iteration);
  void join_finish(int authority);
  DdpStats stats() const;
  std::vector<std::vector<std::string>> layout() const;

  std::shared_ptr<::torch::nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  int no_sync_depth_ = 0;

 private:
  void use_device(at::Device device);
  void check_and_broadcast();
  void install_hooks();
  void on_gradient(size_t p);
  void begin_backward();
  void on_backward_end();
  void on_static_gradient(size_t p);
  void finish_sync();
  std::vector<at::Tensor> state_tensors() const;  // parameters, then buffers

  std::vector<std::string> names_;  // reduced parameters (requires_grad), registration order
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> buffers_;
  std::vector<detail::NodePtr> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::vector<uint8_t> grad_is_view_;
  std::unique_ptr<ddp::BucketMemory>
      memory_;  // [Bucket memory] on the parameters' device; null: host
  std::unique_ptr<ddp::Reducer> reducer_;

  bool armed_ = false;            // the next backward synchronises
  bool backward_active_ = false;  // a backward pass has reached a hook and not ended
  bool syncing_ = false;          // the running backward synchronises
  bool buffers_synced_ = false;   // buffers broadcast in this iteration
  bool traversed_ = false;        // reached_ holds this iteration's traversals
  std::vector<uint8_t> reached_;  // per parameter: reachable from some forward's outputs
  DdpStats stats_;
  DistributedDataParallelBase* owner_;  // the Joinable
  // Set to null when the Impl is gone: autograd nodes of a retained graph keep their hooks.
  std::shared_ptr<Impl*> alive_;
  double next_scale_ = 1.0;  // gradient factor of the iteration the last forward started (Join)
  double scale_ = 1.0;       // of the running backward
  bool reduced_ = false;     // the running backward's reduction has run (static graph)
  // [Static graph]: accumulator runs per parameter in this backward, and as counted in the first.
  std::vector<int32_t> runs_;
  std::vector<int32_t> expected_runs_;
  std::vector<int64_t> last_run_;  // the first backward: position of each parameter's last run
  int64_t run_count_ = 0;
  bool counted_ = false;  // expected_runs_ holds the first synchronised backward's counts
  size_t expected_ready_ = 0, ready_ = 0;
};

DistributedDataParallelBase::Impl::Impl(DistributedDataParallelBase* owner,
                                        std::shared_ptr<::torch::nn::Module> module,
                                        std::shared_ptr<ProcessGroup> group, DdpOptions options)
    : module_(std::move(module)),
      group_(std::move(group)),
      options_(std::move(options)),
      owner_(owner),
      alive_(std::make_shared<Impl*>(this)) {
  LOCKSTEP_ENFORCE(module_ && group_, InvalidArgument,
                   "DistributedDataParallel needs a module and a process group (got null)");
  std::vector<ddp::ParamSpec> specs;
  std::optional<at::Device> device;  // of the first parameter; every other one must match
  std::string first_name;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    auto dtype = detail::to_dtype(p.scalar_type());
    LOCKSTEP_ENFORCE((p.device().is_cpu() || p.device().is_cuda()) && p.layout() == at::kStrided &&
                         p.is_contiguous(),
                     InvalidArgument, "DistributedDataParallel: parameter '", item.key(),
                     "' is not a dense contiguous CPU or CUDA tensor (", p.device(), ")");
    if (!device) {
      device = p.device();
      first_name = item.key();
    }
    LOCKSTEP_ENFORCE(p.device() == *device, InvalidArgument, "DistributedDataParallel: parameter '",
                     item.key(), "' is on ", p.device(), " but '", first_name, "' is on ", *device,
                     ". DDP reduces the parameters of one device: move the whole module there "
                     "(module->to(device)), one process per GPU");
    if (!p.requires_grad()) continue;
    LOCKSTEP_ENFORCE(dtype && is_floating(*dtype), InvalidArgument,
                     "DistributedDataParallel: parameter '", item.key(), "' has dtype ",
                     p.scalar_type(), "; gradients must be floating point");
    names_.push_back(item.key());
    params_.push_back(p);
    specs.push_back({.name = item.key(), .count = static_cast<size_t>(p.numel()), .dtype = *dtype});
  }
  if (device && device->is_cuda()) use_device(*device);
  for (const auto& item : module_->named_buffers(/*recurse=*/true))
    buffers_.push_back(item.value());
  check_and_broadcast();
  grad_is_view_.assign(params_.size(), 0);
  std::string advice = options_.find_unused_parameters
                           ? ""
                           : "If parameters are unused by design, pass .find_unused_parameters = "
                             "true so that their buckets need not wait for the end of backward.";
  reducer_ = std::make_unique<ddp::Reducer>(
      std::move(specs), *group_, *this,
      ddp::ReducerOptions{.sizes = {.first_bucket_bytes = options_.first_bucket_bytes,
                                    .bucket_bytes = options_.bucket_bytes},
                          .timeout = options_.timeout,
                          .hook = options_.comm_hook ? to_bucket_hook(options_.comm_hook) : nullptr,
                          .shared_buckets = options_.shared_buckets && !memory_,  // host only
                          .memory = memory_.get(),
                          .unused_advice = advice,
                          .repeat_advice = options_.static_graph
                                               ? ""
                                               : "If the model reuses parameters by design "
                                                 "(reentrant activation checkpointing, a module "
                                                 "applied twice), pass .static_graph = true."});
  install_hooks();
}

DistributedDataParallelBase::Impl::~Impl() {
  *alive_ = nullptr;
  for (size_t p = 0; p < accumulators_.size(); ++p) {
    remove_accumulator_hook(*accumulators_[p], hook_keys_[p]);
  }
}

std::vector<at::Tensor> DistributedDataParallelBase::Impl::state_tensors() const {
  std::vector<at::Tensor> all;
  for (const auto& item : module_->named_parameters(true)) all.push_back(item.value());
  for (const auto& item : module_->named_buffers(true)) all.push_back(item.value());
  return all;
}

// CUDA parameters: buckets on their device, reduced by the group's nccl route (under backend auto)
// and ordered after torch's current stream. The reducer's bookkeeping stays on the host.
void DistributedDataParallelBase::Impl::use_device(at::Device device) {
  LOCKSTEP_ENFORCE(
      group_->backend_name() != "nccl", InvalidArgument, "DistributedDataParallel: group '",
      group_->name(),
      "' uses backend nccl, which moves CUDA memory only, but DDP also reduces host "
      "data (the model check, the used-parameter bitmap, the bucket order). Create the "
      "group with backend auto (the default): it sends CUDA buffers to nccl and host "
      "buffers to shm or tcp");
  detail::use_torch_current_stream();
  memory_ = std::make_unique<detail::TensorMemory>(device);
}

void DistributedDataParallelBase::Impl::check_and_broadcast() {
  std::vector<ddp::ParamShape> shapes;
  for (const auto& item : module_->named_parameters(true))
    shapes.push_back(shape_of(item.key(), item.value()));
  for (const auto& item : module_->named_buffers(true))
    shapes.push_back(shape_of(item.key(), item.value()));
  ddp::verify_same_parameters(*group_, shapes, "DistributedDataParallel", options_.timeout);
  broadcast_coalesced(*group_, state_tensors(), options_.timeout);
}

void DistributedDataParallelBase::Impl::install_hooks() {
  for (size_t p = 0; p < params_.size(); ++p) {
    accumulators_.push_back(accumulator_of(params_[p]));
    hook_keys_.push_back(
        add_accumulator_hook(*accumulators_.back(), [this, p] { on_gradient(p); }));
  }
}

void DistributedDataParallelBase::Impl::pre_forward() {
  if (backward_active_) {  // the last backward threw before its end: drop its state
    backward_active_ = false;
    syncing_ = false;
  }
  if (!::torch::autograd::GradMode::is_enabled() || no_sync_depth_ > 0) {
    armed_ = false;
    return;
  }
  armed_ = true;
  reducer_->note_forward();
  if (buffers_synced_) return;
  // The first synchronising forward of an iteration: under a Join, the all_reduce that tells
  // which ranks still train; its lowest rank has current buffers.
  JoinIteration join = owner_->notify_join();
  next_scale_ = join.gradient_scale;
  if (options_.broadcast_buffers && group_->size() > 1 && !buffers_.empty()) {
    broadcast_coalesced(*group_, buffers_, options_.timeout, std::max(join.first_training_rank, 0));
    stats_.buffer_broadcasts += 1;
  }
  buffers_synced_ = true;
}

void DistributedDataParallelBase::Impl::post_forward(const std::vector<at::Tensor>& outputs) {
  if (!armed_) return;
  // The backward pass starts at these nodes, in the outermost graph task: its end callback goes
  // there, even when the first gradient arrives inside a reentrant (checkpointed) inner backward.
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad() || !out.grad_fn()) continue;
    add_node_pre_hook(*out.grad_fn(), [alive = alive_] {
      if (Impl* self = *alive; self && !self->backward_active_) self->begin_backward();
    });
  }
  if (!options_.find_unused_parameters) return;
  std::unordered_set<const Node*> nodes;  // this graph only: freed nodes' addresses get reused
  reachable_nodes(outputs, nodes);
  reached_.resize(params_.size(), 0);
  for (size_t p = 0; p < params_.size(); ++p) {
    if (nodes.count(accumulators_[p].get())) reached_[p] = 1;
  }
  traversed_ = true;
}

void DistributedDataParallelBase::Impl::on_gradient(size_t p) {
  if (!backward_active_) begin_backward();
  if (!syncing_ && !reduced_) return;
  if (options_.static_graph) {
    on_static_gradient(p);
  } else {
    reducer_->mark_ready(p);
  }
}

void DistributedDataParallelBase::Impl::on_static_gradient(size_t p) {
  const int32_t runs = ++runs_[p];
  if (!counted_) {  // the first synchronised backward: count, reduce at its end
    last_run_[p] = run_count_++;
    return;
  }
  LOCKSTEP_ENFORCE(!reduced_, InvalidArgument, "DistributedDataParallel: parameter '", names_[p],
                   "' got a gradient on rank ", group_->rank(),
                   " after every gradient counted in the first backward pass had arrived and "
                   "been reduced. static_graph needs the same autograd graph in every iteration; "
                   "turn it off for a model whose graph changes");
  LOCKSTEP_ENFORCE(
      runs <= expected_runs_[p], InvalidArgument, "DistributedDataParallel: parameter '", names_[p],
      "' got its gradient ", runs, runs == 1 ? " time" : " times",
      " in this backward pass on rank ", group_->rank(), ", but ", expected_runs_[p],
      expected_runs_[p] == 1 ? " time" : " times",
      " in the first one. static_graph needs the same autograd graph in every iteration; turn it "
      "off for a model whose graph changes");
  if (runs < expected_runs_[p]) return;
  reducer_->mark_ready(p);
  if (++ready_ == expected_ready_) {
    // Its last expected gradient: reduce when the graph task it arrived in ends (perhaps an
    // inner, reentrant one; no parameter gets a gradient after it).
    at_end_of_backward([alive = alive_] {
      if (Impl* self = *alive; self && self->syncing_) self->finish_sync();
    });
  }
}

void DistributedDataParallelBase::Impl::begin_backward() {
  backward_active_ = true;
  at_end_of_backward([this] { on_backward_end(); });
  buffers_synced_ = false;  // the next forward starts a new iteration
  syncing_ = armed_;
  armed_ = false;
  reduced_ = false;
  scale_ = next_scale_;
  next_scale_ = 1.0;
  if (syncing_) {
    reducer_->begin_backward();
    if (options_.static_graph) {
      runs_.assign(params_.size(), 0);
      ready_ = 0;
      if (counted_) {
        std::vector<size_t> never;  // no gradient in the first backward: unused from the start
        for (size_t q = 0; q < params_.size(); ++q) {
          if (expected_runs_[q] == 0) never.push_back(q);
        }
        reducer_->mark_unused(never);
      } else {
        last_run_.assign(params_.size(), -1);
        run_count_ = 0;
      }
    } else if (traversed_) {
      std::vector<size_t> unreached;
      for (size_t q = 0; q < params_.size(); ++q) {
        if (!reached_[q]) unreached.push_back(q);
      }
      reducer_->mark_unused(unreached);
    }
  }
  reached_.assign(params_.size(), 0);
  traversed_ = false;
}

void DistributedDataParallelBase::Impl::on_backward_end() {
  backward_active_ = false;
  if (syncing_) finish_sync();
  reduced_ = false;
}

void DistributedDataParallelBase::Impl::finish_sync() {
  syncing_ = false;
  reduced_ = true;
  if (options_.static_graph && !counted_) {
    // Ready in the order of their last runs: the rebuild buckets them in that order.
    std::vector<size_t> order;
    for (size_t q = 0; q < params_.size(); ++q) {
      if (runs_[q] > 0) order.push_back(q);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return last_run_[a] < last_run_[b]; });
    for (size_t q : order) reducer_->mark_ready(q);
    expected_runs_ = runs_;
    expected_ready_ = order.size();
    counted_ = true;
  }
  reducer_->finalize();
  stats_.synced_backwards += 1;
}

void DistributedDataParallelBase::Impl::join_shadow(const JoinIteration& iteration) {
  if (options_.broadcast_buffers && group_->size() > 1 && !buffers_.empty()) {
    broadcast_coalesced(*group_, buffers_, options_.timeout,
                        std::max(iteration.first_training_rank, 0));
    stats_.buffer_broadcasts += 1;
  }
  scale_ = iteration.gradient_scale;
  reducer_->zero_iteration();
  scale_ = 1.0;
  stats_.joined_iterations += 1;
}

void DistributedDataParallelBase::Impl::join_finish(int authority) {
  broadcast_coalesced(*group_, state_tensors(), options_.timeout, authority);
}

void DistributedDataParallelBase::Impl::read_gradient(size_t p, BufferView slot) {
  const at::Tensor& grad = params_[p].grad();
  if (grad.defined() && grad.data_ptr() == slot.data) return;  // already the bucket view
  at::Tensor dst = detail::tensor_of(slot, params_[p].sizes());
  ::torch::NoGradGuard no_grad;
  if (grad.defined()) {
    dst.copy_(grad);
  } else {
    dst.zero_();
  }
}

void DistributedDataParallelBase::Impl::write_gradient(size_t p, BufferView slot) {
  at::Tensor& grad = params_[p].mutable_grad();
  ::torch::NoGradGuard no_grad;
  if (options_.gradient_as_bucket_view) {
    if (scale_ != 1.0) detail::tensor_of(slot, params_[p].sizes()).mul_(scale_);
    if (!grad.defined() || grad.data_ptr() != slot.data) {
      grad = detail::tensor_of(slot, params_[p].sizes(), reducer_->slot_owner(p));
    }
    grad_is_view_[p] = 1;
    return;
  }
  at::Tensor src = detail::tensor_of(slot, params_[p].sizes());
  if (scale_ != 1.0) src.mul_(scale_);  // the Join's divisor (see [Averaging] in join.h)
  if (grad.defined()) {
    grad.copy_(src);
  } else {
    grad = src.clone();
  }
}

void DistributedDataParallelBase::Impl::layout_changed() {
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!grad_is_view_[p] || !params_[p].grad().defined()) continue;
    params_[p].mutable_grad() =
        detail::tensor_of(reducer_->slot(p), params_[p].sizes(), reducer_->slot_owner(p));
  }
}

void DistributedDataParallelBase::Impl::release_gradient(size_t p) {
  params_[p].mutable_grad().reset();
}

void DistributedDataParallelBase::Impl::shard_gradients(const ZeroRedundancyOptimizer& optimizer) {
  LOCKSTEP_ENFORCE(!options_.gradient_as_bucket_view, InvalidArgument,
                   "DistributedDataParallel: sharded gradients (ZeRO-2) keep no buckets between "
                   "iterations, so they do not combine with gradient_as_bucket_view");
  std::map<const void*, int> owner_of;  // by the parameter's TensorImpl
  const auto& zero_params = optimizer.parameters();
  for (size_t i = 0; i < zero_params.size(); ++i)
    owner_of[zero_params[i].unsafeGetTensorImpl()] = optimizer.owner(i);
  std::vector<int> owners;
  for (size_t p = 0; p < params_.size(); ++p) {
    auto it = owner_of.find(params_[p].unsafeGetTensorImpl());
    LOCKSTEP_ENFORCE(it != owner_of.end(), InvalidArgument, "DistributedDataParallel: parameter '",
                     names_[p],
                     "' is not one of the ZeroRedundancyOptimizer's parameters; sharded gradients "
                     "need an owner for every parameter DDP reduces");
    owners.push_back(it->second);
  }
  reducer_->set_gradient_owners(std::move(owners));
}

void DistributedDataParallelBase::Impl::set_hook(CommHook hook) {
  reducer_->set_hook(hook ? to_bucket_hook(hook) : nullptr);
  options_.comm_hook = std::move(hook);
}

DdpStats DistributedDataParallelBase::Impl::stats() const {
  DdpStats s = stats_;
  s.bucket_rebuilds = reducer_->stats().rebuilds;
  s.buckets_launched = reducer_->stats().buckets_launched;
  s.early_launched = reducer_->stats().early_launched;
  s.comm_wait_seconds = reducer_->stats().wait_seconds;
  s.buckets = static_cast<int64_t>(reducer_->buckets().size());
  s.shared_buckets = reducer_->stats().shared_buckets;
  return s;
}

std::vector<std::vector<std::string>> DistributedDataParallelBase::Impl::layout() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& bucket : reducer_->buckets()) {
    out.emplace_back();
    for (size_t p : bucket.params) out.back().push_back(names_[p]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

DistributedDataParallelBase::DistributedDataParallelBase(
    std::shared_ptr<::torch::nn::Module> module, std::shared_ptr<ProcessGroup> group,
    DdpOptions options)
    : impl_(std::make_unique<Impl>(this, std::move(module), std::move(group), std::move(options))) {
}

DistributedDataParallelBase::~DistributedDataParallelBase() = default;

void DistributedDataParallelBase::shard_gradients(const ZeroRedundancyOptimizer& optimizer) {
  impl_->shard_gradients(optimizer);
}
void DistributedDataParallelBase::register_comm_hook(CommHook hook) {
  impl_->set_hook(std::move(hook));
}
ProcessGroup& DistributedDataParallelBase::process_group() const {
  return *impl_->group_;
}
const DdpOptions& DistributedDataParallelBase::options() const {
  return impl_->options_;
}
DdpStats DistributedDataParallelBase::stats() const {
  return impl_->stats();
}
std::vector<std::vector<std::string>> DistributedDataParallelBase::bucket_layout() const {
  return impl_->layout();
}
void DistributedDataParallelBase::pre_forward() {
  impl_->pre_forward();
}
ProcessGroup& DistributedDataParallelBase::join_process_group() {
  return *impl_->group_;
}
void DistributedDataParallelBase::join_shadow(const JoinIteration& iteration) {
  impl_->join_shadow(iteration);
}
void DistributedDataParallelBase::join_finish(int authority) {
  impl_->join_finish(authority);
}
void DistributedDataParallelBase::post_forward(const std::vector<at::Tensor>& outputs) {
  impl_->post_forward(outputs);
}

NoSyncGuard::NoSyncGuard(DistributedDataParallelBase* ddp) : ddp_(ddp) {
  ddp_->impl_->no_sync_depth_ += 1;
}

NoSyncGuard::~NoSyncGuard() {
  if (ddp_) ddp_->impl_->no_sync_depth_ -= 1;
}

}  // namespace lockstep::torch
