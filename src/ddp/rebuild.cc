// [Rebuild] of the reducer's buckets after the first iteration (see reducer.h): rank 0's arrival
// order, broadcast so every rank buckets identically.
#include "core/log.h"
#include "ddp/reducer.h"
#include "lockstep/core/error.h"

namespace lockstep::ddp {

std::vector<size_t> Reducer::agreed_order() {
  // This rank's order: gradients as they arrived, then the unused ones in current bucket order.
  std::vector<uint8_t> placed(params_.size(), 0);
  std::vector<int64_t> order;
  order.reserve(params_.size());
  for (size_t p : arrival_) {
    if (!placed[p]) order.push_back(static_cast<int64_t>(p));
    placed[p] = 1;
  }
  for (const BucketSpec& bucket : buckets_) {
    for (size_t p : bucket.params) {
      if (!placed[p]) order.push_back(static_cast<int64_t>(p));
      placed[p] = 1;
    }
  }
  group_.broadcast(view(order), {.root = 0, .timeout = options_.timeout})->wait();
  return std::vector<size_t>(order.begin(), order.end());
}

void Reducer::rebuild() {
  std::vector<size_t> order = agreed_order();
  std::vector<BucketSpec> rebuilt = assign_buckets(params_, order, options_.sizes);
  if (shards_gradients()) rebuilt = group_by_owner(std::move(rebuilt));
  if (rebuilt == buckets_) return;
  if (shards_gradients()) {  // between iterations the buckets hold nothing: no values to move
    allocate(std::move(rebuilt));
    stats_.rebuilds += 1;
    return;
  }
  // Keep the old buckets until every slot's values are copied to its new place.
  std::vector<BufferView> old_slots(params_.size());
  for (size_t p = 0; p < params_.size(); ++p) old_slots[p] = slot(p);
  std::vector<Storage> old_storage = std::move(storage_);
  allocate(std::move(rebuilt));
  for (size_t p = 0; p < params_.size(); ++p) {
    memory_.copy(slot(p), old_slots[p]);
  }
  access_.layout_changed();
  stats_.rebuilds += 1;
  log_info(options_.what, ": rebuilt ", buckets_.size(), " buckets in the order gradients arrived");
}

}  // namespace lockstep::ddp
