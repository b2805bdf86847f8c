// Shared by the install consumers: the ranks of a job as threads of one process.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

// Runs fn(rank) on `world_size` threads and joins them. Returns false, after printing
// "<name>: rank R failed: <what>" for the first rank that threw, when one did.
inline bool run_ranks(const char* name, int world_size, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world_size; ++r)
    ranks.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world_size; ++r) {
    if (!errors[static_cast<size_t>(r)]) continue;
    try {
      std::rethrow_exception(errors[static_cast<size_t>(r)]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: rank %d failed: %s\n", name, r, e.what());
    }
    return false;
  }
  return true;
}
