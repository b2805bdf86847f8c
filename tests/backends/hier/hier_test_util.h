// Helpers of the hierarchical backend tests: simulated hosts (LOCKSTEP_HOST_ID) and ranks as
// threads that report what each one threw.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backends/shm/shm_test_util.h"
#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "support/spawn.h"

namespace lockstep::testing {

// Sets LOCKSTEP_HOST_ID to a per-rank list ("a,a,b,b": ranks 0 and 1 on host a, 2 and 3 on b)
// for its lifetime.
class SimulatedHosts {
 public:
  explicit SimulatedHosts(const std::string& per_rank) {
    ::setenv("LOCKSTEP_HOST_ID", per_rank.c_str(), 1);
  }
  ~SimulatedHosts() { ::unsetenv("LOCKSTEP_HOST_ID"); }
  SimulatedHosts(const SimulatedHosts&) = delete;
  SimulatedHosts& operator=(const SimulatedHosts&) = delete;
};

// Ranks in a per-rank host list.
inline int ranks_in(const std::string& per_rank) {
  int n = 1;
  for (char c : per_rank) n += c == ',';
  return n;
}

struct Outcome {
  std::string type = "none";  // the lockstep error type, or "none"
  std::string what;
  double seconds = 0;  // from the start of fn to the error
};

// Runs fn on the ranks (threads) of a fresh group with backend `backend` over hosts `per_rank`;
// returns what each rank threw.
inline std::vector<Outcome> run_ranks(
    const std::string& per_rank, const std::function<void(ProcessGroup&)>& fn,
    const std::string& backend = "auto",
    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  SimulatedHosts hosts(per_rank);
  const int n = ranks_in(per_rank);
  auto store = std::make_shared<HashStore>();
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  spawn(n, [&](int rank) {
    auto pg = init_process_group(
        {.backend = backend, .rank = rank, .world_size = n, .store = store, .timeout = timeout});
    const auto start = Clock::now();
    try {
      fn(*pg);
    } catch (const std::exception& e) {
      outcomes[static_cast<size_t>(rank)] = {
          error_type(e), e.what(), std::chrono::duration<double>(Clock::now() - start).count()};
    }
  });
  return outcomes;
}

}  // namespace lockstep::testing
