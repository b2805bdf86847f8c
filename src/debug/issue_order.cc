// IssueOrder: the process's live groups, each thread's issue counts, the records' encoding and
// their comparison (see issue_order.h).
#include "debug/issue_order.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

struct LiveGroup {
  std::string name;
  std::vector<int> global_ranks;  // sorted
};

// The process's live groups (under DETAIL), by IssueOrder id.
struct Registry {
  std::mutex mu;
  uint64_t next_id = 1;
  std::map<uint64_t, LiveGroup> groups;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: groups may outlive static destruction
  return *r;
}

// This thread's collectives so far, by IssueOrder id.
thread_local std::unordered_map<uint64_t, uint64_t> issued_by_this_thread;

size_t shared_ranks(const std::vector<int>& a, const std::vector<int>& b) {
  size_t shared = 0;
  for (int r : a) shared += std::binary_search(b.begin(), b.end(), r) ? 1 : 0;
  return shared;
}

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T take(std::string_view& in) {
  LOCKSTEP_ENFORCE(in.size() >= sizeof(T), Error,
                   "fingerprint check: a record of prior issues is truncated");
  T value;
  std::memcpy(&value, in.data(), sizeof value);
  in.remove_prefix(sizeof value);
  return value;
}

constexpr uint32_t kMaxNameBytes = 4096;

}  // namespace

IssueOrder::IssueOrder(std::string group, std::vector<int> global_ranks)
    : group_(std::move(group)), global_ranks_(std::move(global_ranks)) {
  std::sort(global_ranks_.begin(), global_ranks_.end());
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  id_ = r.next_id++;
  r.groups.emplace(id_, LiveGroup{group_, global_ranks_});
}

IssueOrder::~IssueOrder() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.groups.erase(id_);
}

std::vector<PriorIssue> IssueOrder::note() {
  std::vector<PriorIssue> prior;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& [id, other] : r.groups) {
      if (id == id_ || shared_ranks(other.global_ranks, global_ranks_) < 2) continue;
      auto it = issued_by_this_thread.find(id);
      prior.push_back({other.name, it == issued_by_this_thread.end() ? 0 : it->second});
    }
  }
  std::sort(prior.begin(), prior.end(),
            [](const PriorIssue& a, const PriorIssue& b) { return a.group < b.group; });
  ++issued_by_this_thread[id_];
  return prior;
}

std::string encode_prior_issues(const std::vector<PriorIssue>& prior) {
  std::string out;
  put(out, static_cast<uint32_t>(prior.size()));
  for (const PriorIssue& p : prior) {
    put(out, p.count);
    put(out, static_cast<uint32_t>(p.group.size()));
    out += p.group;
  }
  return out;
}

std::vector<PriorIssue> decode_prior_issues(std::string_view bytes) {
  const auto n = take<uint32_t>(bytes);
  // Each entry takes at least 12 bytes: a count that does not fit is not a record.
  LOCKSTEP_ENFORCE(n <= bytes.size() / 12, Error,
                   "fingerprint check: a record of prior issues claims ", n, " entries in ",
                   bytes.size(), " bytes");
  std::vector<PriorIssue> prior(n);
  for (PriorIssue& p : prior) {
    p.count = take<uint64_t>(bytes);
    const auto length = take<uint32_t>(bytes);
    LOCKSTEP_ENFORCE(length <= kMaxNameBytes && length <= bytes.size(), Error,
                     "fingerprint check: a group name in a record of prior issues is truncated");
    p.group.assign(bytes.substr(0, length));
    bytes.remove_prefix(length);
  }
  LOCKSTEP_ENFORCE(bytes.empty(), Error, "fingerprint check: ", bytes.size(),
                   " stray bytes after a record of prior issues");
  return prior;
}

std::optional<std::string> order_inversion(const std::string& group, const std::string& op_title,
                                           std::span<const std::vector<PriorIssue>> all) {
  // Every other group some rank reports, with each reporting rank's count.
  std::map<std::string, std::vector<std::pair<int, uint64_t>>> reports;
  for (size_t r = 0; r < all.size(); ++r)
    for (const PriorIssue& p : all[r]) reports[p.group].emplace_back(static_cast<int>(r), p.count);
  std::string found;
  std::string first_other;
  for (const auto& [other, counts] : reports) {
    const bool agree = std::all_of(counts.begin(), counts.end(),
                                   [&](const auto& c) { return c.second == counts[0].second; });
    if (agree) continue;
    if (first_other.empty()) first_other = other;
    std::string each;
    for (const auto& [rank, count] : counts)
      each += detail::concat(each.empty() ? "" : ", ", "rank ", rank, " had issued ", count);
    found += detail::concat(found.empty() ? "" : "; ", "on group '", other, "': ", each);
  }
  if (found.empty()) return std::nullopt;
  return detail::concat(
      op_title, " on group '", group,
      "': the ranks used their groups in different orders (a cross-group order inversion). "
      "Collectives issued by this thread before this call, ",
      found, " (group ranks of '", group,
      "'). Fix: issue the collectives of all groups in the same order on every rank, e.g. "
      "every rank calls group '",
      group, "' and group '", first_other,
      "' in the same sequence. Without LOCKSTEP_DEBUG=DETAIL such a program deadlocks whenever "
      "the ops are small enough to run on the caller's thread, until the timeout");
}

}  // namespace lockstep::debug
