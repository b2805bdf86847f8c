#include "support/spawn.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "lockstep/group/init.h"

namespace lockstep::testing {

void spawn(int size, const std::function<void(int rank)>& fn) {
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

void spawn_groups(int size, const std::function<void(ProcessGroup& pg)>& fn,
                  const std::string& backend, std::chrono::milliseconds timeout) {
  auto store = std::make_shared<HashStore>();
  spawn(size, [&](int rank) {
    auto pg = init_process_group(
        {.backend = backend, .rank = rank, .world_size = size, .store = store, .timeout = timeout});
    fn(*pg);
  });
}

}  // namespace lockstep::testing
