#include "debug/fingerprint_exchange.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/failure.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

std::string key_of(const std::string& group, uint64_t seq, int step, int rank) {
  return detail::concat(group, "/detail/", seq, "/", step, "/", rank);
}

}  // namespace

FingerprintRoute fingerprint_route(const Backend& backend) {
  return backend.device_problem(Device{}).empty() ? FingerprintRoute::backend
                                                  : FingerprintRoute::store;
}

void store_all_gather(Store& store, const std::string& group, int rank, int size, const Op& op,
                      int step, const void* mine, size_t bytes, void* all) {
  if (op.seq >= 2)
    for (int s = 1; s <= 3; ++s) store.delete_key(key_of(group, op.seq - 2, s, rank));
  store.set(key_of(group, op.seq, step, rank),
            std::string_view(static_cast<const char*>(mine), bytes));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key_of(group, op.seq, step, r));
  std::vector<std::string> values;
  for (;;) {
    auto slice = std::clamp(op.deadline.remaining(), std::chrono::milliseconds(1),
                            std::chrono::milliseconds(100));
    try {
      values = store.multi_get(keys, slice);
      break;
    } catch (const TimeoutError&) {
      if (store.check({abort_key(group)}))
        if (auto note = read_abort_note(store, group, slice))
          throw NetworkError(detail::concat("rank ", rank, ": the group was aborted by ", *note,
                                            " (seen in the store exchange)"));
      if (!op.deadline.expired()) continue;
      std::string missing;
      for (int r = 0; r < size; ++r)
        if (!store.check({keys[static_cast<size_t>(r)]}))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw TimeoutError(detail::concat(
          "rank ", rank, ": ranks [", missing, "] of group '", group,
          "' never posted their fingerprint in the store (they did not reach this op, or run "
          "without LOCKSTEP_DEBUG=DETAIL)"));
    }
  }
  for (int r = 0; r < size; ++r) {
    const std::string& v = values[static_cast<size_t>(r)];
    LOCKSTEP_ENFORCE(v.size() == bytes, MismatchError, "rank ", r, " posted ", v.size(),
                     " bytes for exchange ", step, ", not ", bytes,
                     "; every rank must run the same lockstep with LOCKSTEP_DEBUG=DETAIL");
    std::memcpy(static_cast<char*>(all) + static_cast<size_t>(r) * bytes, v.data(), bytes);
  }
}

}  // namespace lockstep::debug
