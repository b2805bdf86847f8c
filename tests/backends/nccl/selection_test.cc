// Backend selection with the nccl backend built: auto keeps host buffers on shm/tcp (without
// touching CUDA) and sends CUDA buffers to nccl; on a machine without a GPU, asking for nccl or
// passing CUDA buffers is a clear error, never a crash.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/nccl/cuda_util.h"
#include "gpu_harness.h"
#include "group/backend_registry.h"
#include "lockstep/core/error.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

TEST(NcclSelection, NcclIsNamedInTheBackendListButNotInTheHostTestMatrix) {
  try {
    init_process_group({.backend = "no-such-backend",
                        .rank = 0,
                        .world_size = 1,
                        .store = std::make_shared<HashStore>(),
                        .timeout = 10s});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), ", nccl")) << e.what();
  }
  auto names = backend_names();  // host-memory backends, run by the ranks-as-threads tests
  EXPECT_EQ(std::find(names.begin(), names.end(), "nccl"), names.end());
}

TEST(NcclSelection, AutoRunsHostBuffersOnTheHostBackend) {
  constexpr int kSize = 3;
  spawn_groups(
      kSize,
      [](ProcessGroup& pg) {
        EXPECT_EQ(pg.backend_name(), "shm");  // one host: shm, as without nccl
        std::vector<int64_t> v(100);
        for (size_t i = 0; i < v.size(); ++i) v[i] = pg.rank() + static_cast<int64_t>(i);
        pg.all_reduce(view(v))->wait();
        for (size_t i = 0; i < v.size(); ++i)
          ASSERT_EQ(v[i], kSize * (kSize - 1) / 2 + kSize * static_cast<int64_t>(i)) << i;
      },
      "auto");
}

TEST(NcclSelection, NcclWithoutGpuIsAConfigError) {
  if (gpu_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    init_process_group({.backend = "nccl",
                        .rank = 0,
                        .world_size = 1,
                        .store = std::make_shared<HashStore>(),
                        .timeout = 10s});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "backend nccl needs a CUDA device")) << e.what();
    EXPECT_TRUE(contains(e.what(), "rank 0 sees none")) << e.what();
    EXPECT_TRUE(contains(e.what(), "use backend auto, shm or tcp")) << e.what();
  }
}

TEST(NcclSelection, AutoWithoutGpuRefusesCudaBuffersAndStaysUsable) {
  if (gpu_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  constexpr int kSize = 2;
  spawn_groups(
      kSize,
      [](ProcessGroup& pg) {
        std::vector<float> v(8, 1.0f);
        BufferView tagged{v.data(), v.size(), DType::f32, Device::cuda(0)};
        try {
          (void)pg.all_reduce(tagged);
          FAIL() << "expected InvalidArgument";
        } catch (const InvalidArgument& e) {
          EXPECT_TRUE(contains(e.what(), "all_reduce: rank " + std::to_string(pg.rank()) +
                                             " passed a cuda:0 buffer"))
              << e.what();
          EXPECT_TRUE(contains(e.what(), "sees no CUDA device")) << e.what();
        }
        pg.all_reduce(view(v))->wait();  // refused before queueing: the group is intact
        EXPECT_EQ(v[0], static_cast<float>(kSize));
      },
      "auto");
}

}  // namespace
}  // namespace lockstep::testing
