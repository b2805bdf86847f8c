#include "ddp/reducer.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

namespace lockstep::ddp {

namespace {

constexpr size_t kMaxNamesInWarning = 20;

}  // namespace

Reducer::Reducer(std::vector<ParamSpec> params, ProcessGroup& group, GradientAccess& access,
                 ReducerOptions options)
    : params_(std::move(params)),
      group_(group),
      access_(access),
      options_(std::move(options)),
      memory_(options_.memory ? *options_.memory : host_memory()),
      times_(options_.what, settings().debug != DebugLevel::off, settings().debug_every) {
  LOCKSTEP_ENFORCE(!options_.shared_buckets || !memory_.device().is_cuda(), InvalidArgument,
                   options_.what, ": shared buckets are host memory; buckets on ",
                   device_name(memory_.device()), " cannot be shared");
  custom_hook_ = static_cast<bool>(options_.hook);
  if (!options_.hook) options_.hook = average_hook(options_.timeout);
  allocate(assign_buckets(params_, reverse_order(params_.size()), options_.sizes));
  log_layout();
  ready_.assign(params_.size(), 0);
  used_.assign(params_.size(), 0);
}

Reducer::~Reducer() {
  std::exception_ptr ignored;
  wait_all(ignored);
}

void Reducer::allocate(std::vector<BucketSpec> buckets) {
  buckets_ = std::move(buckets);
  storage_.clear();
  stats_.shared_buckets = 0;
  bucket_of_.assign(params_.size(), 0);
  index_in_bucket_.assign(params_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    size_t bytes = std::max<size_t>(buckets_[b].bytes(), kBucketAlignment);
    if (shards_gradients()) {  // allocated by the iteration that uses it
      storage_.emplace_back();
    } else if (options_.shared_buckets) {  // page-aligned and zero-filled
      auto buffer = std::make_shared<SharedBuffer>(group_.allocate(bytes, options_.timeout));
      stats_.shared_buckets += buffer->shared() ? 1 : 0;
      storage_.emplace_back(buffer, static_cast<std::byte*>(buffer->data()));
    } else {
      storage_.push_back(memory_.allocate(bytes));
    }
    for (size_t i = 0; i < buckets_[b].params.size(); ++i) {
      bucket_of_[buckets_[b].params[i]] = b;
      index_in_bucket_[buckets_[b].params[i]] = i;
    }
  }
}

BufferView Reducer::slot(size_t p) {
  const BucketSpec& bucket = buckets_[bucket_of_[p]];
  size_t offset = bucket.offsets[index_in_bucket_[p]] * element_size(bucket.dtype);
  return BufferView{storage_[bucket_of_[p]].get() + offset, params_[p].count, bucket.dtype,
                    memory_.device()};
}

void Reducer::set_hook(BucketHook hook) {
  LOCKSTEP_ENFORCE(!in_backward_, InvalidArgument, options_.what,
                   ": a communication hook cannot be changed during backward");
  LOCKSTEP_ENFORCE(!hook || !shards_gradients(), InvalidArgument, options_.what,
                   ": sharded gradients (ZeRO-2) are reduce-scattered; they take no communication "
                   "hook");
  custom_hook_ = static_cast<bool>(hook);
  options_.hook = hook ? std::move(hook) : average_hook(options_.timeout);
}

void Reducer::begin_backward() {
  if (in_backward_) {  // the previous iteration was abandoned (backward threw)
    std::exception_ptr ignored;
    wait_all(ignored);
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(used_.begin(), used_.end(), 0);
  pending_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  next_launch_ = 0;
  inflight_.assign(buckets_.size(), PendingReduction{});
  arrival_.clear();
  in_backward_ = true;
  times_.backward_started();
}

void Reducer::mark(size_t p, bool used) {
  ensure_storage(bucket_of_[p]);
  if (zero_contribution_) {
    memory_.zero(slot(p));
  } else {
    access_.read_gradient(p, slot(p));
    if (shards_gradients() && owners_[p] != group_.rank()) access_.release_gradient(p);
  }
  ready_[p] = 1;
  used_[p] = used ? 1 : 0;
  if (used) arrival_.push_back(p);
  pending_[bucket_of_[p]] -= 1;
}

void Reducer::mark_unused(std::span<const size_t> params) {
  LOCKSTEP_ENFORCE(in_backward_, InvalidArgument, options_.what,
                   ": mark_unused outside a backward pass (call begin_backward first)");
  for (size_t p : params) {
    LOCKSTEP_ENFORCE(p < params_.size(), InvalidArgument, options_.what, ": parameter index ", p,
                     " out of range (", params_.size(), " parameters)");
    if (!ready_[p]) mark(p, false);
  }
  launch_ready();
}

void Reducer::mark_ready(size_t p) {
  LOCKSTEP_ENFORCE(p < params_.size(), InvalidArgument, options_.what, ": parameter index ", p,
                   " out of range (", params_.size(), " parameters)");
  LOCKSTEP_ENFORCE(in_backward_, InvalidArgument, options_.what,
                   ": mark_ready outside a backward pass (call begin_backward first)");
  if (!ready_[p]) {
    mark(p, true);
    launch_ready();
    return;
  }
  const std::string& name = params_[p].name;
  LOCKSTEP_ENFORCE(!used_[p], InvalidArgument, options_.what, ": parameter '", name,
                   "' got a gradient twice in one backward pass on rank ", group_.rank(),
                   ". Run one backward per forward (several losses: add them first), and use "
                   "no_sync() to accumulate over micro-batches.",
                   options_.repeat_advice.empty() ? "" : " ", options_.repeat_advice);
  LOCKSTEP_ENFORCE(bucket_of_[p] >= next_launch_, InvalidArgument, options_.what, ": parameter '",
                   name, "' got a gradient on rank ", group_.rank(),
                   " after it was marked unused and its bucket was sent. The graph traversal of "
                   "find_unused_parameters did not reach it from the forward outputs: compute the "
                   "loss from the outputs of the DDP forward, or turn find_unused_parameters off.");
  access_.read_gradient(p, slot(p));  // its bucket is not sent yet: take the real gradient
  if (shards_gradients() && owners_[p] != group_.rank()) access_.release_gradient(p);
  used_[p] = 1;
  arrival_.push_back(p);
}

void Reducer::launch_ready() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) launch(next_launch_++);
}

void Reducer::launch(size_t b) {
  const BucketSpec& spec = buckets_[b];
  if (shards_gradients()) {
    inflight_[b] = launch_sharded(b);
    stats_.buckets_launched += 1;
    if (in_backward_) stats_.early_launched += 1;
    return;
  }
  BucketRef ref{.index = b,
                .is_last = b + 1 == buckets_.size(),
                .buffer = BufferView{storage_[b].get(), spec.count, spec.dtype, memory_.device()},
                .spec = &spec,
                .params = params_};
  inflight_[b] = options_.hook(group_, ref);
  stats_.buckets_launched += 1;
  if (in_backward_) stats_.early_launched += 1;
}

void Reducer::wait_all(std::exception_ptr& first) {
  for (size_t b = 0; b < std::min(next_launch_, inflight_.size()); ++b) {
    try {
      if (inflight_[b].work) inflight_[b].work->wait();
      if (inflight_[b].finish) inflight_[b].finish();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  inflight_.clear();
  next_launch_ = 0;
}

void Reducer::finalize() {
  LOCKSTEP_ENFORCE(in_backward_, InvalidArgument, options_.what,
                   ": finalize outside a backward pass (call begin_backward first)");
  times_.reduce_started();
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!ready_[p]) mark(p, false);
  }
  if (!zero_contribution_) warn_unused();
  in_backward_ = false;  // what launches now, launches late
  launch_ready();
  std::vector<uint8_t> global_used = used_;
  WorkPtr bitmap;
  if (group_.size() > 1 && !global_used.empty()) {
    bitmap =
        group_.all_reduce(view(global_used), {.op = ReduceOp::max, .timeout = options_.timeout});
  }
  std::exception_ptr first;
  auto wait_start = std::chrono::steady_clock::now();
  wait_all(first);
  try {
    if (bitmap) bitmap->wait();
  } catch (...) {
    if (!first) first = std::current_exception();
  }
  stats_.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (first) std::rethrow_exception(first);
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!global_used[p]) continue;
    if (!shards_gradients()) {
      access_.write_gradient(p, slot(p));
    } else if (owners_[p] == group_.rank()) {
      access_.write_gradient(p, owned_slot(p));
    }
  }
  release_buckets();
  stats_.iterations += 1;
  if (options_.rebuild_buckets && stats_.iterations == 1) {
    rebuild();
    if (stats_.rebuilds == 1) log_layout();
  }
  times_.finished();
}

void Reducer::zero_iteration() {
  begin_backward();
  zero_contribution_ = true;
  try {
    for (size_t p = 0; p < params_.size(); ++p) mark(p, false);
    finalize();
  } catch (...) {
    zero_contribution_ = false;
    throw;
  }
  zero_contribution_ = false;
}

void Reducer::log_layout() const {
  if (settings().debug == DebugLevel::off || group_.rank() != 0) return;
  log_info(options_.what, ": ", stats_.rebuilds ? "rebuilt layout, " : "",
           layout_text(buckets_, params_, options_.sizes), " (the same on every rank)");
}

void Reducer::warn_unused() {
  std::vector<size_t> fresh;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!used_[p] && warned_.insert(p).second) fresh.push_back(p);
  }
  if (fresh.empty()) return;
  std::ostringstream names;
  for (size_t i = 0; i < fresh.size() && i < kMaxNamesInWarning; ++i) {
    names << (i ? ", " : "") << "'" << params_[fresh[i]].name << "'";
  }
  if (fresh.size() > kMaxNamesInWarning)
    names << " and " << fresh.size() - kMaxNamesInWarning << " more";
  log_warning(options_.what, ": on rank ", group_.rank(), " of group '", group_.name(), "', ",
              fresh.size() == 1 ? "parameter " : "parameters ", names.str(),
              " got no gradient in backward pass #", stats_.iterations + 1, ". ",
              fresh.size() == 1 ? "It was" : "They were",
              " reduced with this rank's current gradient (zero after zero_grad()), so the "
              "average counts this rank as zero and no rank waits; a parameter that no rank used "
              "keeps its gradient unchanged. ",
              options_.unused_advice, options_.unused_advice.empty() ? "" : " ",
              "Each parameter is named once.");
}

}  // namespace lockstep::ddp
