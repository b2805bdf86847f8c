// fingerprint_mismatch: compares every rank's fingerprint of one collective and writes the error
// (see fingerprint.h).
#include <algorithm>
#include <functional>

#include "debug/fingerprint.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

constexpr size_t kMaxPairsShown = 8;

std::string op_title(const Fingerprint& f) {
  return std::string(op_kind_name(f.kind)) + (f.variable ? "_v" : "") + " #" +
         std::to_string(f.seq);
}

// "rank 3", "ranks 0, 2-5".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

// Each distinct call, with the ranks that made it (in order of their first rank).
std::vector<std::pair<std::string, std::vector<int>>> distinct_calls(
    std::span<const Fingerprint> all) {
  std::vector<std::pair<std::string, std::vector<int>>> calls;
  for (size_t r = 0; r < all.size(); ++r) {
    std::string call = call_text(all[r]);
    auto it =
        std::find_if(calls.begin(), calls.end(), [&](const auto& c) { return c.first == call; });
    if (it == calls.end()) {
      calls.push_back({call, {static_cast<int>(r)}});
    } else {
      it->second.push_back(static_cast<int>(r));
    }
  }
  return calls;
}

// "rank 0: all_reduce(f32, count 1000, sum); rank 1: all_reduce(f32, count 999, sum)".
std::string calls_text(std::span<const Fingerprint> all) {
  std::string s;
  for (const auto& [call, ranks] : distinct_calls(all))
    s += (s.empty() ? "" : "; ") + ranks_text(ranks) + ": " + call;
  return s;
}

// The ranks whose op differs from the one more than half of the ranks called (empty: no such
// majority, as with two ranks).
std::vector<int> out_of_step(std::span<const Fingerprint> all) {
  std::vector<std::vector<int>> by_op;
  std::vector<const Fingerprint*> firsts;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t i = 0;
    while (i < firsts.size() &&
           (firsts[i]->kind != all[r].kind || firsts[i]->variable != all[r].variable))
      ++i;
    if (i == firsts.size()) {
      firsts.push_back(&all[r]);
      by_op.emplace_back();
    }
    by_op[i].push_back(static_cast<int>(r));
  }
  std::vector<int> others;
  for (size_t i = 0; i < by_op.size(); ++i) {
    if (2 * by_op[i].size() <= all.size()) continue;
    for (size_t j = 0; j < by_op.size(); ++j)
      if (j != i) others.insert(others.end(), by_op[j].begin(), by_op[j].end());
    std::sort(others.begin(), others.end());
  }
  return others;
}

std::string op_mismatch(std::span<const Fingerprint> all) {
  std::string s = detail::concat("collective #", all[0].seq,
                                 ": ranks called different collectives: ", calls_text(all), ". ");
  std::vector<int> odd = out_of_step(all);
  if (!odd.empty())
    s += ranks_text(odd) + (odd.size() == 1 ? " is" : " are") + " out of step with the others: ";
  return s +
         "a rank skipped a collective, added one, or issued them in another order. Fix: every "
         "rank must issue the same collectives in the same order (look for a collective under a "
         "rank-dependent branch or loop)";
}

std::string count_fix(const Fingerprint& f) {
  std::string name(op_kind_name(f.kind));
  if (f.variable) return "every rank must pass the same counts array to " + name + "_v";
  if (f.kind == OpKind::all_reduce || f.kind == OpKind::broadcast || f.kind == OpKind::reduce)
    return "make every rank pass the same count";
  return "make every rank pass the same count, or use " + name + "_v for uneven data";
}

// all_to_all_v: rank i's send count to j against rank j's receive count from i.
std::string pair_mismatches(std::span<const Fingerprint> all) {
  const size_t n = all.size();
  std::string s;
  size_t found = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const auto& send = all[i].counts;
      const auto& recv = all[j].recv_counts;
      if (send.size() != n || recv.size() != n || send[j] == recv[i]) continue;
      if (found++ < kMaxPairsShown)
        s += detail::concat(s.empty() ? "" : "; ", "rank ", i, " sends ", send[j], " to rank ", j,
                            ", which expects ", recv[i]);
    }
  }
  if (found > kMaxPairsShown) s += detail::concat("; and ", found - kMaxPairsShown, " more pairs");
  return s;
}

struct Differences {
  std::vector<std::string> fields;
  std::vector<std::string> fixes;
  void add(bool differs, std::string field, std::string fix) {
    if (!differs) return;
    fields.push_back(std::move(field));
    fixes.push_back(std::move(fix));
  }
};

std::string join(const std::vector<std::string>& parts, const std::string& last_sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == parts.size() ? last_sep : ", ") + parts[i];
  return s;
}

}  // namespace

std::optional<std::string> fingerprint_mismatch(std::span<const Fingerprint> all) {
  if (all.size() < 2) return std::nullopt;
  const Fingerprint& first = all[0];
  auto any_differs = [&](const std::function<bool(const Fingerprint&)>& same_as_first) {
    return !std::all_of(all.begin(), all.end(), same_as_first);
  };
  if (any_differs([&](const Fingerprint& f) {
        return f.kind == first.kind && f.variable == first.variable && f.seq == first.seq;
      }))
    return op_mismatch(all);
  const bool pairwise = first.kind == OpKind::all_to_all && first.variable;
  Differences d;
  d.add(any_differs([&](const Fingerprint& f) { return f.dtype == first.dtype; }), "dtype",
        "pass the same dtype on every rank");
  d.add(!pairwise && any_differs([&](const Fingerprint& f) { return f.counts == first.counts; }),
        first.variable ? "counts" : "count", count_fix(first));
  std::string pairs = pairwise ? pair_mismatches(all) : "";
  d.add(!pairs.empty(), "send/recv counts",
        "rank i's send_counts[j] must equal rank j's recv_counts[i] (" + pairs + ")");
  d.add(any_differs([&](const Fingerprint& f) { return f.reduce_op == first.reduce_op; }),
        "reduce op", "pass the same ReduceOp on every rank");
  d.add(any_differs([&](const Fingerprint& f) { return f.root == first.root; }), "root",
        "pass the same root on every rank");
  d.add(any_differs([&](const Fingerprint& f) { return f.tag == first.tag; }), "tag",
        "use the same tag on every rank");
  d.add(any_differs([&](const Fingerprint& f) { return f.algorithm == first.algorithm; }),
        "algorithm", "force the same algorithm (or automatic) on every rank");
  if (d.fields.empty()) return std::nullopt;
  return detail::concat(op_title(first), ": ranks disagree on ", join(d.fields, " and "), ": ",
                        calls_text(all), ". Fix: ", join(d.fixes, "; and "));
}

}  // namespace lockstep::debug
