// An idle mpi group costs next to no CPU: after sends, recvs and collectives, every rank sits for
// 2 s with nothing posted, and the process's CPU time (every thread: the group's p2p engine, its
// progress thread, MPI's own) over that time stays below 5% of one core. The MPI channel must
// poll MPI for incoming messages, and used to do so every 50 µs even with nothing posted (16-22%
// of a core per rank on the 2-core development VM). Then a ring of sends and recvs posted after
// the idle time still completes (the idle engine wakes for them).
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <thread>
#include <vector>

#include "lockstep/core/buffer.h"
#include "world.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// CPU time of the whole process so far (user and system, every thread).
std::chrono::nanoseconds process_cpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// Rank r sends `count` floats of value r to rank r+1 and receives rank r-1's.
void ring(ProcessGroup& pg, size_t count) {
  const int n = pg.size();
  const int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
  std::vector<float> out(count, static_cast<float>(pg.rank())), in(count, -1.0f);
  auto r = pg.irecv(view(in), prev, {.tag = 7});
  auto s = pg.isend(view(out), next, {.tag = 7});
  r->wait();
  s->wait();
  EXPECT_EQ(in.front(), static_cast<float>(prev)) << where(pg);
  EXPECT_EQ(in.back(), static_cast<float>(prev)) << where(pg);
}

TEST(MpiIdle, AnIdleGroupTakesAlmostNoCpu) {
  ProcessGroup& pg = world();
  ring(pg, 10);
  ring(pg, 1 << 20);  // several chunks: every stream of the channel has run
  std::vector<float> x(1000, 1.0f);
  pg.all_reduce(view(x))->wait();
  pg.barrier()->wait();
  // The engine thread naps for a few ms after a waiter polled, and a barrier's last waits may
  // still be yielding: let both settle.
  std::this_thread::sleep_for(200ms);
  constexpr auto kIdle = 2s;
  const auto before = process_cpu();
  std::this_thread::sleep_for(kIdle);
  const auto used = process_cpu() - before;
  const double share = std::chrono::duration<double>(used) / kIdle;
  EXPECT_LT(share, 0.05) << where(pg) << ": an idle mpi group took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(used).count()
                         << " ms of CPU in " << kIdle.count() << " s (" << share * 100
                         << "% of a core); something polls MPI while nothing is posted";
  ring(pg, 10);
  ring(pg, 1 << 20);
  pg.barrier()->wait();
}

}  // namespace
}  // namespace lockstep::testing
