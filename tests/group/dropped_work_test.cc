// [Dropped handles] in lockstep/comm/work.h: dropping the last handle of an op still in flight
// waits for the op, so its buffers are never used after the caller let them go. Small ops (which
// may run inline) and large ones (on the progress thread), on tcp and shm.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/spawn.h"

namespace lockstep::testing {
namespace {

class DroppedWork : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(DroppedWork, WaitsForTheOpSoItsBuffersAreDoneWith) {
  const auto& [backend, count] = GetParam();
  spawn_groups(
      2,
      [count = count](ProcessGroup& pg) {
        for (int round = 0; round < 3; ++round) {
          std::vector<float> x(count, static_cast<float>(pg.rank() + 1 + round));
          { (void)pg.all_reduce(view(x)); }  // the handle is dropped at once
          // Nothing waited explicitly, yet the op is over: the result is in place.
          const float sum = static_cast<float>(3 + 2 * round);
          EXPECT_EQ(x.front(), sum) << "round " << round;
          EXPECT_EQ(x.back(), sum) << "round " << round;
        }  // x freed here: nothing may touch it any more
        std::vector<float> y(count, 1.0f);
        pg.all_reduce(view(y))->wait();
        EXPECT_EQ(y[count / 2], 2.0f);
      },
      backend);
}

INSTANTIATE_TEST_SUITE_P(SmallAndLarge, DroppedWork,
                         ::testing::Combine(::testing::Values("tcp", "shm"),
                                            ::testing::Values(size_t{16}, size_t{4} << 20)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace lockstep::testing
