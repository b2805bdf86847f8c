#include "debug/monitored_barrier.h"

#include <algorithm>

#include "debug/status_keys.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kOk = "ok";

std::string barrier_prefix(const MonitoredBarrierArgs& a, uint64_t index) {
  return detail::concat(a.group, "/monitored_barrier/", index, "/");
}

std::string arrival_key(const MonitoredBarrierArgs& a, uint64_t index, int rank) {
  return barrier_prefix(a, index) + "arrived/" + std::to_string(rank);
}

std::string verdict_key(const MonitoredBarrierArgs& a) {
  return barrier_prefix(a, a.index) + "verdict";
}

std::string title(const MonitoredBarrierArgs& a) {
  return detail::concat("monitored_barrier #", a.index, " of group '", a.group, "' (rank ", a.rank,
                        " of ", a.size, ")");
}

std::string seconds(milliseconds t) {
  return detail::concat(static_cast<double>(t.count()) / 1e3, " s");
}

// Ranks (other than `except`) whose arrival key is not set.
std::vector<int> not_arrived(Store& store, const MonitoredBarrierArgs& a, int except) {
  std::vector<int> missing;
  for (int r = 0; r < a.size; ++r)
    if (r != except && !store.check({arrival_key(a, a.index, r)})) missing.push_back(r);
  return missing;
}

std::string missing_text(const std::vector<int>& missing, int size) {
  return detail::concat("ranks ", rank_list(missing), " of ", size, " did not arrive");
}

// The same verdict as torch's gloo phrases it, for people and tools that look for its words.
std::string torch_words_rank0(const std::vector<int>& missing) {
  const std::string list = rank_list(missing);  // "[1, 3]"; torch writes "1, 3"
  return detail::concat(" (In torch's words: Rank 0 timed out in monitoredBarrier; Rank",
                        missing.size() == 1 ? " " : "s ", list.substr(1, list.size() - 2),
                        " failed to pass monitoredBarrier.)");
}

std::string torch_words_other(int rank) {
  return detail::concat(" (In torch's words: Rank ", rank,
                        " successfully reached monitoredBarrier, but received errors while "
                        "waiting for send/recv from rank 0.)");
}

void forget_previous(Store& store, const MonitoredBarrierArgs& a) {
  if (a.index == 0) return;
  try {
    for (int r = 0; r < a.size; ++r) store.delete_key(arrival_key(a, a.index - 1, r));
    store.delete_key(barrier_prefix(a, a.index - 1) + "verdict");
  } catch (...) {
    // Leftover keys cost a little memory in the store, nothing else.
  }
}

void collect(Store& store, const MonitoredBarrierArgs& a) {
  store.set(arrival_key(a, a.index, 0), "1");  // so that the others see rank 0 came
  std::vector<std::string> keys;
  for (int r = 1; r < a.size; ++r) keys.push_back(arrival_key(a, a.index, r));
  std::vector<int> missing;
  try {
    store.wait(keys, a.timeout);
  } catch (const TimeoutError&) {
    missing = not_arrived(store, a, 0);
  }
  store.set(verdict_key(a), missing.empty() ? std::string(kOk) : rank_list(missing));
  if (missing.empty()) return forget_previous(store, a);
  throw TimeoutError(detail::concat(title(a), ": ", missing_text(missing, a.size), " within ",
                                    seconds(a.timeout),
                                    ". They are stuck, slow or took another "
                                    "path: check their output and flight recorder dumps.",
                                    torch_words_rank0(missing)));
}

void await_verdict(Store& store, const MonitoredBarrierArgs& a) {
  store.set(arrival_key(a, a.index, a.rank), "1");
  std::string verdict;
  // Rank 0 answers at its own deadline at the latest; allow for it having started later.
  milliseconds wait = a.timeout + std::min(a.timeout, milliseconds(5'000));
  try {
    verdict = store.get(verdict_key(a), wait);
  } catch (const TimeoutError&) {
    std::vector<int> missing = not_arrived(store, a, a.rank);
    throw TimeoutError(detail::concat(title(a),
                                      ": no verdict from rank 0, which collects the "
                                      "arrivals, within ",
                                      seconds(wait), "; ", missing_text(missing, a.size), ".",
                                      torch_words_other(a.rank)));
  }
  if (verdict != kOk)
    throw TimeoutError(detail::concat(title(a), ": ranks ", verdict, " of ", a.size,
                                      " did not arrive within ", seconds(a.timeout),
                                      " (as rank 0 saw it). Check their output and flight "
                                      "recorder dumps.",
                                      torch_words_other(a.rank)));
}

}  // namespace

void monitored_barrier(Store& store, const MonitoredBarrierArgs& a) {
  if (a.size == 1) return;
  if (a.rank == 0)
    collect(store, a);
  else
    await_verdict(store, a);
}

}  // namespace lockstep::debug
