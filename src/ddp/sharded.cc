// [Sharded gradients] of the DDP reducer (reducer.h): buckets grouped by owner, launched as
// reduce_scatter_v, and alive only during an iteration.
#include <algorithm>

#include "ddp/reducer.h"
#include "lockstep/core/error.h"

namespace lockstep::ddp {

void Reducer::set_gradient_owners(std::vector<int> owners) {
  LOCKSTEP_ENFORCE(!in_backward_, InvalidArgument, options_.what,
                   ": gradient owners cannot change during backward");
  LOCKSTEP_ENFORCE(owners.size() == params_.size(), InvalidArgument, options_.what, ": ",
                   owners.size(), " gradient owners for ", params_.size(), " parameters");
  for (size_t p = 0; p < owners.size(); ++p) {
    LOCKSTEP_ENFORCE(owners[p] >= 0 && owners[p] < group_.size(), InvalidArgument, options_.what,
                     ": parameter '", params_[p].name, "' is owned by rank ", owners[p],
                     ", outside the group (", group_.size(), " ranks)");
  }
  LOCKSTEP_ENFORCE(!custom_hook_, InvalidArgument, options_.what,
                   ": sharded gradients (ZeRO-2) are reduce-scattered; they take no communication "
                   "hook (remove the hook first)");
  owners_ = std::move(owners);
  allocate(group_by_owner(std::move(buckets_)));
}

std::vector<BucketSpec> Reducer::group_by_owner(std::vector<BucketSpec> buckets) {
  const size_t ranks = static_cast<size_t>(group_.size());
  shard_counts_.assign(buckets.size(), std::vector<size_t>(ranks, 0));
  shard_start_.assign(buckets.size(), 0);
  received_.assign(buckets.size(), nullptr);
  for (size_t b = 0; b < buckets.size(); ++b) {
    BucketSpec& spec = buckets[b];
    std::stable_sort(spec.params.begin(), spec.params.end(),
                     [&](size_t x, size_t y) { return owners_[x] < owners_[y]; });
    size_t at = 0;
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const size_t p = spec.params[i];
      spec.offsets[i] = at;
      at += params_[p].count;
      shard_counts_[b][static_cast<size_t>(owners_[p])] += params_[p].count;
    }
    for (int r = 0; r < group_.rank(); ++r)
      shard_start_[b] += shard_counts_[b][static_cast<size_t>(r)];
  }
  return buckets;
}

void Reducer::ensure_storage(size_t b) {
  if (!storage_[b]) storage_[b] = memory_.allocate(buckets_[b].bytes());
}

PendingReduction Reducer::launch_sharded(size_t b) {
  const BucketSpec& spec = buckets_[b];
  const size_t mine = shard_counts_[b][static_cast<size_t>(group_.rank())];
  received_[b] = memory_.allocate(mine * element_size(spec.dtype));
  WorkPtr work = group_.reduce_scatter_v(
      ConstBufferView{storage_[b].get(), spec.count, spec.dtype, memory_.device()},
      BufferView{received_[b].get(), mine, spec.dtype, memory_.device()}, shard_counts_[b],
      {.op = ReduceOp::avg, .timeout = options_.timeout});
  return PendingReduction{std::move(work), nullptr};
}

BufferView Reducer::owned_slot(size_t p) {
  const size_t b = bucket_of_[p];
  const BucketSpec& spec = buckets_[b];
  const size_t offset = spec.offsets[index_in_bucket_[p]] - shard_start_[b];
  return BufferView{received_[b].get() + offset * element_size(spec.dtype), params_[p].count,
                    spec.dtype, memory_.device()};
}

void Reducer::release_buckets() {
  if (!shards_gradients()) return;
  for (auto& s : storage_) s.reset();
  for (auto& r : received_) r.reset();
}

}  // namespace lockstep::ddp
