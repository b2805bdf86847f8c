#include "store/refusals.h"

#include "core/log.h"
#include "lockstep/core/error.h"
#include "lockstep/store/prefix_store.h"

namespace lockstep {

namespace {

Store& base_of(Store& store) {
  if (auto* prefix = dynamic_cast<PrefixStore*>(&store)) return *prefix->base();
  return store;
}

}  // namespace

void note_refusals(Store& store, int64_t count, const std::string& last) noexcept {
  try {
    Store& base = base_of(store);
    base.add(kRefusedCountKey, count);
    base.set(kRefusedLastKey, last);
  } catch (const std::exception& e) {
    log_info("could not record a refused connection in the store: ", e.what());
  }
}

Refusals read_refusals(Store& store) {
  Refusals r;
  Store& base = base_of(store);
  r.count = base.add(kRefusedCountKey, 0);
  if (r.count > 0 && base.check({kRefusedLastKey})) r.last = base.get(kRefusedLastKey);
  return r;
}

RefusalWatch::RefusalWatch(Store& store, bool count_earlier, std::chrono::milliseconds grace)
    : store_(store), grace_(grace) {
  if (count_earlier) return;
  try {
    seen_ = read_refusals(store_).count;
  } catch (const std::exception&) {
  }
}

std::optional<std::string> RefusalWatch::overdue() {
  Refusals now;
  try {
    now = read_refusals(store_);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const auto t = std::chrono::steady_clock::now();
  if (now.count > seen_ && !first_) first_ = t;
  if (!first_ || t - *first_ < grace_) return std::nullopt;
  return now.last;
}

}  // namespace lockstep
