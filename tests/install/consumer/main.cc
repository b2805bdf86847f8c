// Uses the installed lockstep package: two ranks as threads of this process, joined through a
// HashStore, run an all_reduce over the TCP backend and check the closed-form result.
#include <lockstep/core/error.h>
#include <lockstep/core/settings.h>
#include <lockstep/group/init.h>
#include <lockstep/store/hash_store.h>

#include "run_ranks.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

namespace {

constexpr int kWorldSize = 2;
constexpr size_t kCount = 1000;

// Rank r contributes r + 1 + i to element i, so element i of the sum is 3 + 2i.
int run_rank(int rank, const std::shared_ptr<lockstep::Store>& store) {
  auto pg = lockstep::init_process_group({.backend = "tcp",
                                          .rank = rank,
                                          .world_size = kWorldSize,
                                          .store = store,
                                          .timeout = std::chrono::seconds(60)});
  std::vector<float> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(rank + 1 + i);
  lockstep::WorkPtr work = pg->all_reduce(lockstep::view(data));
  bool called_back = false;
  work->wait();
  work->on_complete([&](std::exception_ptr e) { called_back = e == nullptr; });
  int wrong = 0;
  for (size_t i = 0; i < kCount; ++i)
    if (data[i] != static_cast<float>(3 + 2 * i)) ++wrong;
  if (!work->is_completed() || work->exception() || !called_back) ++wrong;

  // What a user sees of a group, a bad call (rejected, the group stays usable), a subgroup,
  // memory from allocate, and the other collectives' public options.
  if (pg->rank() != rank || pg->size() != kWorldSize || pg->backend_name() != "tcp" ||
      pg->global_ranks() != std::vector<int>{0, 1} || pg->name() != "default")
    ++wrong;
  try {
    pg->broadcast(lockstep::view(data), {.root = kWorldSize});
    ++wrong;
  } catch (const lockstep::InvalidArgument&) {
  }
  auto pair = pg->new_group({0, 1}, {.backend = "tcp"});
  lockstep::SharedBuffer shared = pair->allocate(4 * sizeof(int32_t));
  shared.as<int32_t>()[0] = rank;
  pair->broadcast(shared.view(lockstep::DType::i32, 1), {.root = 1})->wait();
  if (shared.as<int32_t>()[0] != 1) ++wrong;
  std::vector<int32_t> gathered(kWorldSize), mine = {10 + rank};
  pair->all_gather(lockstep::view(mine), lockstep::view(gathered))->wait();
  if (gathered != std::vector<int32_t>{10, 11}) ++wrong;
  pair->monitored_barrier(std::chrono::seconds(30));
  if (lockstep::settings().timeout.count() <= 0) ++wrong;
  return wrong;
}

}  // namespace

int main() {
  auto store = std::make_shared<lockstep::HashStore>();
  int wrong[kWorldSize] = {};
  if (!run_ranks("lockstep consumer", kWorldSize, [&](int r) { wrong[r] = run_rank(r, store); }))
    return 1;
  for (int r = 0; r < kWorldSize; ++r) {
    if (wrong[r] != 0) {
      std::fprintf(stderr, "lockstep consumer: rank %d: %d of %zu checks wrong\n", r, wrong[r],
                   kCount);
      return 1;
    }
  }
  std::printf("lockstep consumer: ok (all_reduce over %d ranks, %zu floats, sums 3 + 2i)\n",
              kWorldSize, kCount);
  return 0;
}
