// ProcessGroup::allocate: every rank's requested size is compared through the store (so a rank
// that asks for a different size, or never calls, gets a clear error on every rank), then the
// backend hands out the memory (Backend::allocate).
#include <string>
#include <vector>

#include "group/process_group_impl.h"
#include "lockstep/core/error.h"
#include "lockstep/group/process_group.h"

namespace lockstep {

namespace {

std::string ranks_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "[" + s + "]";
}

// "rank 0: 4096 bytes, rank 1: 8192 bytes" (runs of equal sizes: "ranks 2-5: ...").
std::string sizes_text(const std::vector<uint64_t>& sizes) {
  std::string s;
  for (size_t r = 0; r < sizes.size();) {
    size_t end = r + 1;
    while (end < sizes.size() && sizes[end] == sizes[r]) ++end;
    s += (s.empty() ? "" : ", ") +
         (end - r == 1 ? detail::concat("rank ", r) : detail::concat("ranks ", r, "-", end - 1)) +
         detail::concat(": ", sizes[r], " bytes");
    r = end;
  }
  return s;
}

// Every rank's size for allocate call `index`: each rank sets its key and reads everyone's. The
// last rank to read removes the keys.
std::vector<uint64_t> exchange_sizes(Store& store, const GroupConfig& g, uint64_t index,
                                     uint64_t bytes, std::chrono::milliseconds timeout) {
  const std::string prefix = detail::concat(g.name, "/allocate/", index, "/");
  std::vector<std::string> keys;
  for (int r = 0; r < g.size; ++r) keys.push_back(prefix + std::to_string(r));
  store.set(keys[static_cast<size_t>(g.rank)], std::to_string(bytes));
  std::vector<std::string> values;
  try {
    values = store.multi_get(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < g.size; ++r)
      if (!store.check({keys[static_cast<size_t>(r)]})) missing.push_back(r);
    throw TimeoutError(detail::concat(
        "allocate #", index, " (", bytes, " bytes) of group '", g.name, "': ranks ",
        ranks_list(missing), " did not call allocate within ",
        static_cast<double>(timeout.count()) / 1000.0,
        " s. Fix: every rank must call ProcessGroup::allocate, the same number of times, in the "
        "same order"));
  }
  if (store.add(prefix + "read", 1) == g.size) {
    for (const auto& k : keys) store.delete_key(k);
    store.delete_key(prefix + "read");
  }
  std::vector<uint64_t> sizes;
  for (const auto& v : values) sizes.push_back(std::stoull(v));
  return sizes;
}

}  // namespace

SharedBuffer ProcessGroup::allocate(size_t bytes, std::chrono::milliseconds timeout) {
  uint64_t index;
  {
    std::lock_guard<std::mutex> lock(impl_->issue_mu);
    index = impl_->allocations++;
  }
  timeout = impl_->timeout_or_group(timeout);
  const Deadline deadline = Deadline::after(timeout);
  const std::vector<uint64_t> sizes =
      exchange_sizes(*impl_->config.store, impl_->config, index, bytes, timeout);
  for (uint64_t s : sizes)
    LOCKSTEP_ENFORCE(s == sizes[0], MismatchError, "allocate #", index, " of group '",
                     impl_->config.name, "': the ranks asked for different sizes (",
                     sizes_text(sizes),
                     "). Fix: every rank must call ProcessGroup::allocate with the same size, "
                     "in the same order");
  LOCKSTEP_ENFORCE(bytes > 0, InvalidArgument, "allocate #", index, " of group '",
                   impl_->config.name, "': 0 bytes; ask for at least 1");
  return impl_->backend->allocate(bytes, index, deadline);
}

}  // namespace lockstep
