#include "debug/status_keys.h"

#include <cstdio>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

std::optional<Progress> parse_status(const std::string& value) {
  unsigned long long entered = 0, started = 0, completed = 0;
  char tail = 0;
  if (std::sscanf(value.c_str(), "%llu %llu %llu%c", &entered, &started, &completed, &tail) != 3)
    return std::nullopt;
  return Progress{.entered = entered, .started = started, .completed = completed};
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

void publish_status(Store& store, const std::string& group, int rank, const Progress& p) {
  store.set(status_key(group, rank), detail::concat(p.entered, " ", p.started, " ", p.completed));
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
  std::string s = missing.empty() ? std::string("every rank entered it")
                                  : "ranks " + rank_list(missing) + " never entered it";
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
