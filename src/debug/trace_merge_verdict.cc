// The text verdict of `lockstep trace` (see trace_merge.h for what it says).
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "debug/status_keys.h"
#include "debug/trace_merge.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

constexpr size_t kMaxListed = 10;  // mismatches and failures listed per group
constexpr size_t kReasonChars = 300;

// One rank's collectives by sequence number.
using BySeq = std::map<uint64_t, const OpRecord*>;

BySeq collectives(const Dump& d) {
  BySeq out;
  for (const OpRecord& r : d.ops)
    if (r.collective()) out[r.seq] = &r;
  return out;
}

std::string seconds_between(int64_t from_us, int64_t to_us) {
  return detail::concat(static_cast<double>((to_us - from_us) / 100'000) / 10.0, " s");
}

// What every rank must agree on at one sequence number.
auto shape(const OpRecord& r) {
  bool own_counts = r.op == "all_to_all_v";  // send counts legitimately differ per rank
  return std::make_tuple(r.op, r.dtype, own_counts ? 0 : r.count, r.root, r.reduce_op);
}

std::string call_text(const OpRecord& r) {
  std::string s =
      r.op + " (" + (r.dtype.empty() ? "" : r.dtype + ", ") + std::to_string(r.count) + " elements";
  if (r.root >= 0) s += ", root " + std::to_string(r.root);
  if (!r.reduce_op.empty()) s += ", " + r.reduce_op;
  return s + ")";
}

struct GroupView {
  std::string name;
  int size = 1;
  std::vector<const Dump*> dumps;  // by rank, null where missing
  std::vector<BySeq> ops;          // by rank
};

std::string missing_dumps(const GroupView& g) {
  std::vector<int> missing;
  for (int r = 0; r < g.size; ++r)
    if (!g.dumps[static_cast<size_t>(r)]) missing.push_back(r);
  if (missing.empty()) return "";
  return "  no dump from ranks " + rank_list(missing) +
         " (still running, stuck in a long wait, killed, or writing elsewhere)\n";
}

std::string last_completed_line(const GroupView& g) {
  std::string s = "  last completed:";
  for (int r = 0; r < g.size; ++r) {
    const Dump* d = g.dumps[static_cast<size_t>(r)];
    std::string what = !d ? "no dump"
                       : d->progress.completed == 0
                           ? "none"
                           : "#" + std::to_string(d->progress.completed - 1);
    s += detail::concat(r ? ", rank " : " rank ", r, " ", what);
  }
  return s + "\n";
}

// The stalled op: the first sequence number some rank with a dump did not complete.
std::string stall_lines(const GroupView& g) {
  uint64_t stalled = std::numeric_limits<uint64_t>::max(), furthest = 0;
  for (const Dump* d : g.dumps)
    if (d) {
      stalled = std::min(stalled, d->progress.completed);
      furthest = std::max(furthest, d->progress.entered);
    }
  if (stalled >= furthest)
    return detail::concat("  no stall: every rank completed all ", furthest, " collectives\n");
  const OpRecord* sample = nullptr;
  int64_t first_failure = std::numeric_limits<int64_t>::max();
  for (const BySeq& ops : g.ops)
    if (auto it = ops.find(stalled); it != ops.end()) {
      sample = sample ? sample : it->second;
      if (it->second->state == OpState::failed && it->second->ended_us > 0)
        first_failure = std::min(first_failure, it->second->ended_us);
    }
  std::string op = sample ? sample->summary() : "collective #" + std::to_string(stalled);
  std::vector<int> entered, never, late;
  std::string behind;
  for (int r = 0; r < g.size; ++r) {
    const Dump* d = g.dumps[static_cast<size_t>(r)];
    if (!d) continue;
    auto it = g.ops[static_cast<size_t>(r)].find(stalled);
    std::string last =
        d->progress.completed == 0 ? "nothing" : "#" + std::to_string(d->progress.completed - 1);
    if (d->progress.entered <= stalled) {
      never.push_back(r);
      behind += detail::concat("  behind: rank ", r, " never entered ", op,
                               "; its last completed "
                               "collective is ",
                               last, "\n");
    } else if (it != g.ops[static_cast<size_t>(r)].end() &&
               it->second->enqueued_us > first_failure) {
      late.push_back(r);
      behind += detail::concat("  behind: rank ", r, " entered ", op, " only ",
                               seconds_between(first_failure, it->second->enqueued_us),
                               " after another rank had failed in it; its last completed "
                               "collective is ",
                               last, "\n");
    } else {
      entered.push_back(r);
    }
  }
  std::string s =
      detail::concat("  stalled at ", op, ": ranks ", rank_list(entered), " entered it");
  if (!late.empty()) s += ", ranks " + rank_list(late) + " only after a failure";
  if (!never.empty()) s += ", ranks " + rank_list(never) + " never did";
  return s + "\n" + behind;
}

std::string mismatch_lines(const GroupView& g) {
  std::set<uint64_t> seqs;
  for (const BySeq& ops : g.ops)
    for (const auto& [seq, r] : ops) seqs.insert(seq);
  std::string s;
  size_t listed = 0;
  for (uint64_t seq : seqs) {
    std::map<decltype(shape(OpRecord{})), std::vector<int>> calls;
    std::map<decltype(shape(OpRecord{})), const OpRecord*> example;
    for (int r = 0; r < g.size; ++r)
      if (auto it = g.ops[static_cast<size_t>(r)].find(seq);
          it != g.ops[static_cast<size_t>(r)].end()) {
        calls[shape(*it->second)].push_back(r);
        example[shape(*it->second)] = it->second;
      }
    if (calls.size() < 2) continue;
    if (++listed > kMaxListed) break;
    s += detail::concat("  mismatch at collective #", seq, ":");
    for (const auto& [key, ranks] : calls)
      s += detail::concat(" ranks ", rank_list(ranks), " called ", call_text(*example[key]), ";");
    s.back() = '\n';
  }
  return s.empty() ? "  mismatched ops: none\n" : s;
}

std::string failure_lines(const GroupView& g) {
  std::string s;
  for (int r = 0; r < g.size; ++r) {
    const Dump* d = g.dumps[static_cast<size_t>(r)];
    if (!d) continue;
    std::vector<const OpRecord*> failed;
    for (const OpRecord& op : d->ops)
      if (op.state == OpState::failed) failed.push_back(&op);
    if (failed.empty()) continue;
    s += detail::concat("  failed on rank ", r, ": ", failed.front()->label());
    if (failed.size() > 1) s += detail::concat(" and ", failed.size() - 1, " later op(s)");
    std::string reason = d->reason.substr(0, kReasonChars);
    if (d->reason.size() > kReasonChars) reason += "...";
    s += ": " + reason + "\n";
  }
  return s.empty() ? "  failed ops: none\n" : s;
}

std::vector<GroupView> by_group(const std::vector<Dump>& dumps) {
  std::vector<GroupView> groups;
  for (const Dump& d : dumps) {
    if (groups.empty() || groups.back().name != d.group)
      groups.push_back({.name = d.group, .size = d.size});
    GroupView& g = groups.back();
    g.size = std::max(g.size, d.size);
    g.dumps.resize(static_cast<size_t>(g.size), nullptr);
    g.ops.resize(static_cast<size_t>(g.size));
    g.dumps[static_cast<size_t>(d.rank)] = &d;
    g.ops[static_cast<size_t>(d.rank)] = collectives(d);
  }
  return groups;
}

}  // namespace

std::string trace_verdict(const std::vector<Dump>& dumps) {
  if (dumps.empty()) return "no flight-recorder dumps found\n";
  std::string out;
  for (const GroupView& g : by_group(dumps)) {
    int present = 0;
    for (const Dump* d : g.dumps) present += d ? 1 : 0;
    out += detail::concat("group '", g.name, "': ", g.size, " ranks, ", present, " dumps\n");
    out += missing_dumps(g) + stall_lines(g) + last_completed_line(g) + mismatch_lines(g) +
           failure_lines(g);
  }
  return out;
}

}  // namespace lockstep::debug
