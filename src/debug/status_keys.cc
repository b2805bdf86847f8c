#include "debug/status_keys.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

std::optional<RankStatus> parse_status(const std::string& value) {
  unsigned long long entered = 0, started = 0, completed = 0, seq = 0;
  char kind[32] = {};
  char tail = 0;
  const int got = std::sscanf(value.c_str(), "%llu %llu %llu %31s %llu%c", &entered, &started,
                              &completed, kind, &seq, &tail);
  if (got != 3 && got != 5) return std::nullopt;
  return RankStatus(Progress{.entered = entered, .started = started, .completed = completed},
                    got == 5 ? kind : "", seq);
}

std::string op_text(const RankStatus& s) {
  return detail::concat(s.op_kind, " #", s.op_seq);
}

// Where ranks that all entered #seq differ in what they run there: "" when they agree.
std::string different_ops(const RankStatuses& statuses, uint64_t seq) {
  std::map<std::string, std::vector<int>> by_op;
  for (size_t r = 0; r < statuses.size(); ++r)
    if (statuses[r] && !statuses[r]->op_kind.empty() && statuses[r]->op_seq == seq)
      by_op[statuses[r]->op_kind].push_back(static_cast<int>(r));
  if (by_op.size() < 2) return "";
  std::string s = detail::concat("every rank entered #", seq, ", but not the same collective:");
  bool first = true;
  for (const auto& [kind, ranks] : by_op) {
    s += first ? " " : ", ";
    first = false;
    s += ranks.size() == 1 ? detail::concat("rank ", ranks.front(), " is in ")
                           : "ranks " + rank_list(ranks) + " in ";
    s += detail::concat(kind, " #", seq);
  }
  return s + " (the ranks called collectives in a different order)";
}

std::vector<std::string> status_keys(const std::string& group, int size) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(status_key(group, r));
  return keys;
}

std::string last_completed(const std::optional<Progress>& p) {
  if (!p) return "unknown";
  if (p->completed == 0) return "none";
  return "#" + std::to_string(p->completed - 1);
}

}  // namespace

std::string status_key(const std::string& group, int rank) {
  return group + "/status/" + std::to_string(rank);
}

void publish_status(Store& store, const std::string& group, int rank, const RankStatus& p) {
  std::string value = detail::concat(p.entered, " ", p.started, " ", p.completed);
  if (!p.op_kind.empty()) value += detail::concat(" ", p.op_kind, " ", p.op_seq);
  store.set(status_key(group, rank), value);
}

RankStatuses read_statuses(Store& store, const std::string& group, int size,
                           std::chrono::milliseconds wait) {
  std::vector<std::string> keys = status_keys(group, size);
  RankStatuses out(static_cast<size_t>(size));
  std::vector<std::string> values;
  try {
    values = store.multi_get(keys, wait);
  } catch (const TimeoutError&) {
    // Some rank has no key yet: read the others one by one.
    values.assign(keys.size(), "");
    for (size_t r = 0; r < keys.size(); ++r)
      if (store.check({keys[r]})) values[r] = store.get(keys[r], wait);
  }
  for (size_t r = 0; r < values.size(); ++r) out[r] = parse_status(values[r]);
  return out;
}

std::vector<int> ranks_not_entered(const RankStatuses& statuses, uint64_t seq) {
  std::vector<int> out;
  for (size_t r = 0; r < statuses.size(); ++r)
    if (statuses[r] && statuses[r]->entered <= seq) out.push_back(static_cast<int>(r));
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

std::string describe_statuses(const RankStatuses& statuses, uint64_t seq) {
  std::vector<int> missing = ranks_not_entered(statuses, seq);
  std::string s;
  if (missing.empty()) {
    s = different_ops(statuses, seq);
    if (s.empty()) s = "every rank entered it";
  } else {
    s = "ranks " + rank_list(missing) + " never entered it";
    std::string where;
    for (int r : missing)
      if (const auto& st = statuses[static_cast<size_t>(r)]; st && !st->op_kind.empty())
        where += detail::concat(where.empty() ? "" : ", ", "rank ", r, " is in ", op_text(*st));
    if (!where.empty()) s += " (" + where + ")";
  }
  std::vector<int> unknown;
  for (size_t r = 0; r < statuses.size(); ++r)
    if (!statuses[r]) unknown.push_back(static_cast<int>(r));
  if (!unknown.empty()) s += "; no status from ranks " + rank_list(unknown);
  s += "; last completed:";
  for (size_t r = 0; r < statuses.size(); ++r)
    s += detail::concat(r ? ", rank " : " rank ", r, " ", last_completed(statuses[r]));
  return s;
}

std::string blame_key(int reporter_global_rank) {
  return "lockstep/blame/" + std::to_string(reporter_global_rank);
}

void publish_blame(Store& store, const Blame& blame) {
  std::string ranks;
  for (int r : blame.culprits) ranks += (ranks.empty() ? "" : " ") + std::to_string(r);
  store.set(blame_key(blame.reporter), ranks + "\t" + blame.op);
}

std::vector<Blame> read_blames(Store& store, int world_size) {
  std::vector<Blame> out;
  for (int r = 0; r < world_size; ++r) {
    std::string key = blame_key(r);
    if (!store.check({key})) continue;
    std::string value = store.get(key, std::chrono::milliseconds(1000));
    size_t tab = value.find('\t');
    if (tab == std::string::npos) continue;
    Blame blame{.reporter = r, .op = value.substr(tab + 1)};
    std::istringstream ranks(value.substr(0, tab));
    for (int culprit; ranks >> culprit;) blame.culprits.push_back(culprit);
    if (!blame.culprits.empty()) out.push_back(std::move(blame));
  }
  return out;
}

}  // namespace lockstep::debug
