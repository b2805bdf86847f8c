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

}  // namespace lockstep
